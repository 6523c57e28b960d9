//! Runs: what one process recorded, from its first call to its last (its id is the process
//! key). The listing comes from the process index (never from the records, so it costs the
//! same with a million records); labels and notes are kept in `State::runs` and, with a
//! database file, in settings records (`settings::persisted_run`).

use serde::Serialize;
use serde_json::Value;

use super::settings::{persisted_note, persisted_run};
use super::Obj;
use crate::error::ApiError;
use crate::limits::MAX_PAGE_LIMIT;
use crate::runs::{check_label, check_notes, RunMeta, TooLong};
use crate::state::Shared;

/// One run as listed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Run {
    pub run_id: String,
    /// The program: the file name of the outermost frame of its first stack that has one.
    pub program: Option<String>,
    /// The page that recorded it (a browser client), if any.
    pub page_url: Option<String>,
    pub pid: i64,
    /// When its first and last call started or ended (seconds since the epoch).
    pub start: f64,
    pub end: f64,
    pub calls: usize,
    /// Events the program sent, and the client's own events (registrations, probes).
    pub events: usize,
    pub client_events: usize,
    /// Calls that raised.
    pub exceptions: usize,
    pub label: String,
    pub notes: String,
}

/// A page of runs, newest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunListing {
    pub runs: Vec<Run>,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
}

/// The runs, newest (latest first call) first, `limit` (at most `MAX_PAGE_LIMIT`) from
/// `offset`.
pub fn runs(shared: &Shared, offset: usize, limit: usize) -> RunListing {
    let limit = limit.min(MAX_PAGE_LIMIT);
    let mut all = shared.processes().summaries();
    all.sort_by(|a, b| b.first_at.total_cmp(&a.first_at).then(a.key.cmp(&b.key)));
    let total = all.len();
    let page: Vec<_> = all.into_iter().skip(offset).take(limit).collect();
    let st = shared.lock();
    let runs = page
        .into_iter()
        .map(|p| {
            let meta = st.runs.get(&p.key);
            Run {
                program: p.script,
                page_url: p.page_url,
                pid: p.pid,
                start: p.first_at,
                end: p.last_at,
                calls: p.calls,
                events: p.records - p.calls - p.client_events,
                client_events: p.client_events,
                exceptions: p.raised,
                label: meta.label,
                notes: meta.notes,
                run_id: p.key,
            }
        })
        .collect();
    RunListing {
        runs,
        total,
        offset,
        limit,
    }
}

/// The label and notes of a run (empty when none), or `None` for an unknown run.
pub fn run_meta(shared: &Shared, run_id: &str) -> Option<RunMeta> {
    let known = shared.processes().get(run_id).is_some();
    known.then(|| shared.lock().runs.get(run_id))
}

/// A run's label and notes after a change.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunLabelled {
    pub status: super::Ack,
    pub run_id: String,
    pub label: String,
    pub notes: String,
}

fn refused(e: TooLong) -> ApiError {
    let what = if e.field == "label" {
        "one line of at most"
    } else {
        "at most"
    };
    ApiError::bad_request(
        &format!("invalid_{}", e.field),
        format!("{} must be {what} {} characters", e.field, e.max),
    )
    .with("field", e.field)
}

/// Sets a run's label and/or notes (`None` leaves one as it is; "" clears it).
pub fn label_run(
    shared: &Shared,
    run_id: &str,
    label: Option<&str>,
    notes: Option<&str>,
) -> Result<RunLabelled, ApiError> {
    let label = label.map(check_label).transpose().map_err(refused)?;
    let notes = notes.map(check_notes).transpose().map_err(refused)?;
    if shared.processes().get(run_id).is_none() {
        return Err(run_not_found(run_id));
    }
    let meta = persisted_run(shared, run_id, |m| {
        if let Some(l) = label {
            m.label = l;
        }
        if let Some(n) = notes {
            m.notes = n;
        }
    })?;
    Ok(RunLabelled {
        status: super::Ack::Ok,
        run_id: run_id.to_owned(),
        label: meta.label,
        notes: meta.notes,
    })
}

pub fn run_not_found(run_id: &str) -> ApiError {
    ApiError::not_found("run_not_found", format!("no run {run_id:?}"))
        .with("run_id", run_id.to_owned())
}

/// A required text field of a request body.
fn text_field<'a>(body: &'a Obj, key: &str) -> Result<&'a str, ApiError> {
    match body.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(Value::Null) => Ok(""),
        _ => Err(ApiError::bad_request(
            &format!("missing_{key}"),
            format!("{key} (text, \"\" to clear) is required"),
        )
        .with("field", key.to_owned())),
    }
}

/// A call record's note after a change.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Noted {
    pub status: super::Ack,
    pub call_id: String,
    pub note: String,
}

/// Sets (or, with "", removes) the note on the call record `call_id`.
pub fn set_record_note(shared: &Shared, call_id: &str, note: &str) -> Result<Noted, ApiError> {
    let note = crate::runs::check_note(note).map_err(refused)?;
    if super::find_record(shared, call_id).is_none() {
        return Err(ApiError::not_found(
            "record_not_found",
            format!("no call record with call id {call_id:?}"),
        )
        .with("call_id", call_id.to_owned()));
    }
    persisted_note(shared, call_id, note.clone())?;
    Ok(Noted {
        status: super::Ack::Ok,
        call_id: call_id.to_owned(),
        note,
    })
}

/// `POST /api/call-records/<call_id>/note`: `{"note": text}`.
pub fn rest_record_note(shared: &Shared, call_id: &str, body: &Obj) -> Result<Noted, ApiError> {
    set_record_note(shared, call_id, text_field(body, "note")?)
}

/// `POST /api/runs/<run_id>/label`: `{"label": text}`.
pub fn rest_label_run(shared: &Shared, run_id: &str, body: &Obj) -> Result<RunLabelled, ApiError> {
    label_run(shared, run_id, Some(text_field(body, "label")?), None)
}

/// `POST /api/runs/<run_id>/notes`: `{"notes": text}`.
pub fn rest_notes_run(shared: &Shared, run_id: &str, body: &Obj) -> Result<RunLabelled, ApiError> {
    label_run(shared, run_id, None, Some(text_field(body, "notes")?))
}
