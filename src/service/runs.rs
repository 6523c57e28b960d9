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
use crate::records::HistoryEntry;
use crate::runs::{check_label, check_notes, RunMeta, TooLong};
use crate::state::Shared;
use crate::store::RecordKind;

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
    shared.lock().emit(crate::events::EventKind::RunChanged {
        run_id: run_id.to_owned(),
    });
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

/// What deleting a run removed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunDeleted {
    pub status: super::Ack,
    pub run_id: String,
    /// Call records and events removed (the client's own events too).
    pub records: usize,
    /// Execution-history entries of its calls removed.
    pub history_entries: usize,
    /// Stored objects (payloads) that only this run's records used, removed.
    pub objects: usize,
    /// Their size in bytes. With a database file the bytes stay in the file, unreachable
    /// (the file is append-only and has no compaction); without one their memory is freed.
    pub object_bytes: u64,
    /// Whether the run had a label or notes (removed with it).
    pub had_label_or_notes: bool,
}

/// Every CID (128 lowercase hex digits) a stored record's JSON names, into `out`.
fn cids_in(v: &Value, out: &mut std::collections::HashSet<String>) {
    match v {
        Value::String(s) if crate::intern::parse_digest(s).is_some() => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| cids_in(x, out)),
        Value::Object(m) => m.values().for_each(|x| cids_in(x, out)),
        _ => {}
    }
}

/// The pause of the run `run_id` now paused, if any.
fn paused_in(st: &crate::state::State, run_id: &str) -> Option<String> {
    st.calls
        .paused()
        .iter()
        .find(|p| p.call.process.key() == run_id)
        .map(|p| p.id.clone())
}

/// Deletes a run: its call records and events, its execution-history entries, its label and
/// notes, and the stored objects no other record (kept, in flight or paused) and no REPL
/// transcript uses. With a database file a tombstone (a settings record) is written and synced
/// before anything changes, so the run stays deleted after a crash and restart. Refused (409
/// `run_paused`, naming the pause) while one of its calls is paused. A program still running
/// may go on calling: what it records after the delete starts a new run with the same id.
/// Its records written before the tombstone but noted in the process index after it (a
/// completion racing the delete) are deleted too (`ProcessIndex::remove`'s cut).
pub fn delete_run(shared: &Shared, run_id: &str) -> Result<RunDeleted, ApiError> {
    use std::collections::HashSet;
    let refuse_paused = |pause_id: String| {
        ApiError::conflict(
            "run_paused",
            format!(
                "run {run_id:?} has a paused call ({pause_id}); resume it before deleting the run"
            ),
        )
        .with("run_id", run_id.to_owned())
        .with("pause_id", pause_id)
    };
    let locs: Vec<u64> = match shared.processes().get(run_id) {
        Some(p) => p.entries.iter().map(|e| e.loc).collect(),
        None => return Err(run_not_found(run_id)),
    };
    if let Some(pause) = paused_in(&shared.lock(), run_id) {
        return Err(refuse_paused(pause));
    }
    let durable = shared.store.is_durable();
    let mut scratch = crate::intern::Interner::default();
    // The objects its records name.
    let mut candidates = HashSet::new();
    let own: HashSet<u64> = locs.iter().copied().collect();
    let mut call_ids = Vec::new();
    for &loc in &locs {
        if let Some(r) = super::processes::read(shared, loc, &mut scratch) {
            let v = r.to_disk();
            cids_in(&v, &mut candidates);
            if let Some(id) = v.get("call_id").and_then(Value::as_str) {
                call_ids.push(id.to_owned());
            }
        }
    }
    // Its history entries in the file (few: only functions with a breakpoint have them).
    let mut history_offsets = Vec::new();
    if durable {
        let (offsets, _) = shared
            .store
            .index_page(RecordKind::History, &|_| true, 0, usize::MAX)
            .map_err(|e| ApiError::storage(&e))?;
        for at in offsets {
            if let Ok((_, v)) = shared.store.read_record(at) {
                let entry = HistoryEntry::from_disk(&mut scratch, &v, None);
                if entry.is_some_and(|h| h.call.process.key() == run_id) {
                    history_offsets.push(at);
                }
            }
        }
    }
    // Which of them another record kept in the file still names (the records in memory are
    // checked under the lock below).
    if durable && !candidates.is_empty() {
        let (offsets, _) = shared
            .store
            .index_page(RecordKind::CallRecord, &|_| true, 0, usize::MAX)
            .map_err(|e| ApiError::storage(&e))?;
        for at in offsets {
            if own.contains(&at) {
                continue;
            }
            match shared.store.read_record(at) {
                Ok((_, v)) => {
                    let mut named = HashSet::new();
                    cids_in(&v, &mut named);
                    candidates.retain(|c| !named.contains(c));
                }
                Err(e) => {
                    // What it names is unknown: keep every object.
                    log::error!(
                        "deleting run {run_id}: cannot read the record at offset {at} ({e}); \
                         its objects are kept"
                    );
                    candidates.clear();
                }
            }
            if candidates.is_empty() {
                break;
            }
        }
    }
    let _order = shared.settings_writer();
    let mut st = shared.lock();
    if let Some(pause) = paused_in(&st, run_id) {
        return Err(refuse_paused(pause));
    }
    // Records kept in memory (every record without a database file; the newest with one,
    // which covers those recorded since the file was read above), calls in flight, pauses.
    let mut named = HashSet::new();
    for r in st.records.iter() {
        if r.process().is_none_or(|p| p.key() != run_id) {
            cids_in(&r.to_disk(), &mut named);
        }
    }
    for c in st.calls.open_calls() {
        cids_in(&c.to_disk(), &mut named);
    }
    for p in st.calls.paused() {
        cids_in(&p.call.to_disk(), &mut named);
    }
    // REPL transcripts name the objects their answers were stored as.
    for session in st.repl.sessions() {
        for entry in &session.transcript {
            cids_in(entry, &mut named);
        }
    }
    candidates.retain(|c| !named.contains(c));
    let mut forget: Vec<String> = candidates.into_iter().collect();
    forget.sort_unstable();
    // Records it made since its index entries were read are deleted too.
    let locs: Vec<u64> = match shared.processes().get(run_id) {
        Some(p) => p.entries.iter().map(|e| e.loc).collect(),
        None => return Err(run_not_found(run_id)),
    };
    let tombstone = super::settings::tombstone(run_id, &forget);
    let mut offsets = if durable { locs.clone() } else { Vec::new() };
    offsets.extend(&history_offsets);
    // Written under the lock on purpose: the check above that no record, call or pause
    // names the objects and their removal are one step, or a call starting meanwhile could
    // name an object that is then removed. One record and one sync, for a rare request.
    let forgotten = crate::lock_rule::exempt("deleting a run", || {
        shared.store.forget(&tombstone, &offsets)
    });
    let (objects, object_bytes, at) = forgotten.map_err(|e| {
        log::error!("deleting run {run_id}: the tombstone could not be written: {e}");
        ApiError::storage(&e)
    })?;
    // Records of the run kept before the deletion but noted in the index only after it (a
    // completion between its write and its noting) are deleted too: the index skips them.
    let cut = at.unwrap_or_else(|| st.records.next_seq());
    let gone = shared.processes().remove(run_id, cut);
    let records = gone.as_ref().map_or(0, |p| p.entries.len());
    let (in_window, history_in_window) = st.records.forget_process(run_id);
    let history_entries = if durable {
        history_offsets.len()
    } else {
        history_in_window
    };
    let meta = st.runs.get(run_id);
    st.runs.set(run_id, crate::runs::RunMeta::default());
    st.emit(crate::events::EventKind::RunDeleted {
        run_id: run_id.to_owned(),
    });
    drop(st);
    // The strings, CIDs and values only its records held leave the interner now rather than
    // when the tables next grow.
    shared.interner().sweep();
    // The notes on its records go from memory (with a database file their settings records
    // stay, naming calls no listing shows).
    {
        let mut notes = shared
            .record_notes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for id in &call_ids {
            notes.set(id, String::new());
        }
    }
    log::info!(
        "deleted run {run_id}: {records} records ({in_window} in memory), {history_entries} \
         history entries, {objects} objects ({object_bytes} bytes)"
    );
    Ok(RunDeleted {
        status: super::Ack::Ok,
        run_id: run_id.to_owned(),
        records,
        history_entries,
        objects,
        object_bytes,
        had_label_or_notes: !meta.is_empty(),
    })
}
