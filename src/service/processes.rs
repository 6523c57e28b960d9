//! Call records grouped by the process that made them, for the web UI's call trees: one summary
//! per process, the records of one process (light rows, oldest first, plus the wire shape of one
//! selected record), and one record found by call id wherever it is kept.
//!
//! Where records come from: the in-memory window, and with a database file also the records
//! older than the window, read back from the file through its index. The index keys records by
//! function and status, not by process, so reading the older part means reading every record:
//! that scan is bounded (`limits::PROCESS_DISK_SCAN` records beyond the window) and the answer
//! says when it stopped short. Records made while a scan runs may be missed or seen twice at the
//! seam between window and file; a record seen twice is kept once (by call id).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::read_stored;
use crate::intern::Interner;
use crate::limits::PROCESS_DISK_SCAN;
use crate::records::{Process, Record, RecordFilter};
use crate::state::Shared;
use crate::store::RecordKind;

/// One process that made calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSummary {
    /// `"%.6f+%d"` of its start time and pid (protocol doc §1).
    pub key: String,
    pub pid: i64,
    pub start_time: f64,
    /// The page of a browser (JS) client, when it sent one.
    pub page_url: Option<String>,
    /// The browser origin (`Origin` header) of its calls, when a web page reported them.
    pub origin: Option<String>,
    /// When its first record started and its last one ended (the client's clock).
    pub first_at: f64,
    pub last_at: f64,
    /// Its call records and client events.
    pub records: usize,
}

/// The processes that made the records read, most recently active first.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessListing {
    pub processes: Vec<ProcessSummary>,
    /// False when older records of the database file were left unread (see `PROCESS_DISK_SCAN`).
    pub complete: bool,
}

/// One record of a process, as a tree and a timeline need it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow {
    pub call_id: String,
    pub method: String,
    /// `success`, `exception`, or an event's status.
    pub status: String,
    /// A client event (`/api/call/event`) rather than a call.
    pub event: bool,
    /// The client's clock: `call_site.timestamp` (else when the server saw the call), and the
    /// completion timestamp; an event has one time.
    pub started_at: f64,
    pub completed_at: f64,
    /// The call raised, or the event reports an exception.
    pub raised: bool,
    /// `call_site.stack_trace` as the client sent it (innermost caller first), or null.
    pub stack: Value,
    /// It has REPL sessions.
    pub repl: bool,
    /// What the debugger did to it, when it did something other than let it run as called.
    pub resolution: Option<crate::resolution::Action>,
}

/// The records of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRecords {
    pub process: ProcessSummary,
    /// Oldest first (by start, then as recorded).
    pub rows: Vec<RecordRow>,
    /// The wire shape of the record asked for, when it is one of them.
    pub selected: Option<Value>,
    /// False when older records of the database file were left unread.
    pub complete: bool,
}

/// Every record within reach, newest first, and whether that is all of them.
fn all_records(shared: &Shared) -> (Vec<Record>, bool) {
    let (mut records, dropped) = {
        let st = shared.lock();
        let (page, _) = st.records.page(&RecordFilter::default(), 0, usize::MAX);
        (page, st.records.dropped())
    };
    if dropped == 0 || !shared.store.is_durable() {
        return (records, dropped == 0);
    }
    let (older, total) = read_stored(
        shared,
        RecordKind::CallRecord,
        &|_| true,
        records.len(),
        PROCESS_DISK_SCAN,
    );
    let complete = records.len() + older.len() >= total;
    let known: HashSet<String> = records.iter().filter_map(call_id).collect();
    let mut scratch = Interner::default();
    records.extend(
        older
            .into_iter()
            .map(|v| Record::from_disk(&mut scratch, v))
            .filter(|r| call_id(r).is_none_or(|id| !known.contains(&id))),
    );
    (records, complete)
}

fn call_id(r: &Record) -> Option<String> {
    match r {
        Record::Call(c) => Some(c.call_id.to_string()),
        Record::Event(e) => Some(text(&e.call_id.to_value())),
        Record::Other(v) => v.get("call_id").map(text),
    }
}

/// A JSON value as text: strings as they are, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn process_of(r: &Record) -> Option<Process> {
    match r {
        Record::Call(c) => Some(c.process),
        Record::Event(e) => Some(e.process),
        Record::Other(_) => None,
    }
}

/// When a record started and ended (the client's clock), and the page of a browser client.
struct Span {
    started: f64,
    completed: f64,
    page_url: Option<String>,
    origin: Option<String>,
}

fn span(r: &Record) -> Option<Span> {
    match r {
        Record::Call(c) => {
            let started = c.call_site.timestamp().as_f64().unwrap_or(c.seen_at);
            Some(Span {
                started,
                completed: c.completed_at.max(started),
                page_url: c.page_url.as_str().map(str::to_owned),
                origin: c.origin().map(str::to_owned),
            })
        }
        Record::Event(e) => Some(Span {
            started: e.at,
            completed: e.at,
            page_url: e.page_url.as_str().map(str::to_owned),
            origin: None,
        }),
        Record::Other(_) => None,
    }
}

fn row(r: &Record, span: &Span) -> Option<RecordRow> {
    let stack = |site: Value| site.get("stack_trace").cloned().unwrap_or(Value::Null);
    match r {
        Record::Call(c) => Some(RecordRow {
            call_id: c.call_id.to_string(),
            method: c.method.to_string(),
            status: c.status.as_str().unwrap_or("").to_owned(),
            event: false,
            started_at: span.started,
            completed_at: span.completed,
            raised: c.exception.as_ref().is_some_and(|e| !e.is_null()),
            stack: stack(c.call_site.to_value()),
            repl: !c.repl_sessions.is_empty(),
            resolution: c
                .resolution()
                .map(|r| r.action)
                .filter(|a| *a != crate::resolution::Action::Continue),
        }),
        Record::Event(e) => Some(RecordRow {
            call_id: text(&e.call_id.to_value()),
            method: e.method.to_string(),
            status: e.status.to_string(),
            event: true,
            started_at: span.started,
            completed_at: span.completed,
            raised: !e.exception.is_null(),
            stack: stack(e.call_site.to_value()),
            repl: false,
            resolution: None,
        }),
        Record::Other(_) => None,
    }
}

/// Counts a record of the process `p` into its summary.
fn count(by_key: &mut Option<ProcessSummary>, p: Process, span: Span) {
    let s = by_key.get_or_insert_with(|| ProcessSummary {
        key: p.key(),
        pid: p.pid,
        start_time: p.start_time,
        page_url: None,
        origin: None,
        first_at: span.started,
        last_at: span.completed,
        records: 0,
    });
    s.records += 1;
    s.first_at = s.first_at.min(span.started);
    s.last_at = s.last_at.max(span.completed);
    if s.page_url.is_none() {
        s.page_url = span.page_url;
    }
    if s.origin.is_none() {
        s.origin = span.origin;
    }
}

/// The processes that made calls or sent events, most recently active first.
pub fn processes(shared: &Shared) -> ProcessListing {
    let (records, complete) = all_records(shared);
    let mut by_key: HashMap<String, Option<ProcessSummary>> = HashMap::new();
    for r in &records {
        let (Some(p), Some(span)) = (process_of(r), span(r)) else {
            continue;
        };
        count(by_key.entry(p.key()).or_default(), p, span);
    }
    let mut processes: Vec<ProcessSummary> = by_key.into_values().flatten().collect();
    processes.sort_by(|a, b| b.last_at.total_cmp(&a.last_at).then(a.key.cmp(&b.key)));
    ProcessListing {
        processes,
        complete,
    }
}

/// The records of the process `key`, oldest first, with the wire shape of the record
/// `selected` when it is one of them; `None` when the process has no records.
pub fn process_records(
    shared: &Shared,
    key: &str,
    selected: Option<&str>,
) -> Option<ProcessRecords> {
    let (records, complete) = all_records(shared);
    let mut summary_of: Option<ProcessSummary> = None;
    let mut rows = Vec::new();
    let mut chosen = None;
    // Newest first: the first record with the selected id is the newest one.
    for r in &records {
        let Some(p) = process_of(r).filter(|p| p.key() == key) else {
            continue;
        };
        let Some((span, row)) = span(r).and_then(|s| row(r, &s).map(|row| (s, row))) else {
            continue;
        };
        if chosen.is_none() && selected.is_some_and(|id| r.call_id_is(id)) {
            chosen = Some(r.clone());
        }
        count(&mut summary_of, p, span);
        rows.push(row);
    }
    let process = summary_of?;
    rows.reverse();
    // Stable: records that started at the same time stay in the order they were recorded.
    rows.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
    let selected = chosen.map(|r| r.to_json(&shared.render()));
    Some(ProcessRecords {
        process,
        rows,
        selected,
        complete,
    })
}

/// The wire shape of the newest record with this call id, from the window or the file.
pub fn find_record(shared: &Shared, call_id: &str) -> Option<Value> {
    let found = shared.lock().records.by_call_id(call_id);
    let found = found.or_else(|| {
        if !shared.store.is_durable() {
            return None;
        }
        let (records, _) = all_records(shared);
        records.into_iter().find(|r| r.call_id_is(call_id))
    })?;
    Some(found.to_json(&shared.render()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete, complete_body, shared, start, start_body};
    use serde_json::json;

    fn call(s: &Shared, method: &str, pid: i64, at: f64, stack: Value) -> String {
        let mut b = start_body(method, &[json!(1)]);
        b.insert("process_pid".into(), json!(pid));
        b.insert(
            "call_site".into(),
            json!({"timestamp": at, "stack_trace": stack}),
        );
        let started = start(s, &b).unwrap();
        let id = started["call_id"].as_str().unwrap().to_owned();
        let mut done = complete_body(&id, &json!(2));
        done.insert("timestamp".into(), json!(at + 1.0));
        done.insert("process_pid".into(), json!(pid));
        complete(s, &done).unwrap();
        id
    }

    #[test]
    fn records_are_grouped_by_process_oldest_first() {
        let s = shared();
        let a = call(&s, "f", 1, 100.0, json!([]));
        let b = call(&s, "g", 2, 50.0, json!([]));
        let c = call(
            &s,
            "h",
            1,
            10.0,
            json!([{"filename": "/x.py", "lineno": 3}]),
        );
        crate::service::call_event(
            &s,
            &body(
                json!({"method_name": "e", "status": "registered", "timestamp": 200.0,
                         "process_pid": 1, "process_start_time": 1795311683.5,
                         "event_id": "ev-1", "call_site": {"stack_trace": []}}),
            ),
        )
        .unwrap();
        let listing = processes(&s);
        assert!(listing.complete);
        let keys: Vec<(i64, usize)> = listing
            .processes
            .iter()
            .map(|p| (p.pid, p.records))
            .collect();
        assert_eq!(keys, [(1, 3), (2, 1)], "most recently active first");
        let p1 = &listing.processes[0];
        assert_eq!((p1.first_at, p1.last_at), (10.0, 200.0));
        assert_eq!(p1.key, "1795311683.500000+1");

        let recs = process_records(&s, &p1.key, Some(&a)).unwrap();
        let ids: Vec<&str> = recs.rows.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, [c.as_str(), a.as_str(), "ev-1"]);
        assert!(recs.rows[2].event);
        assert_eq!(recs.rows[0].stack[0]["filename"], "/x.py");
        assert_eq!(recs.selected.as_ref().unwrap()["call_id"], json!(a));
        assert_eq!(recs.selected.unwrap()["pretty_result"], "2");
        assert!(process_records(&s, &p1.key, Some(&b))
            .unwrap()
            .selected
            .is_none());
        assert!(process_records(&s, "nope", None).is_none());
        assert_eq!(find_record(&s, &b).unwrap()["method_name"], "g");
        assert_eq!(find_record(&s, "ev-1").unwrap()["status"], "registered");
        assert!(find_record(&s, "nope").is_none());
    }

    #[test]
    fn records_past_the_window_are_read_back_from_the_database_file() {
        let dir = std::env::temp_dir().join(format!(
            "cideldill-processes-{}-{}",
            std::process::id(),
            crate::ids::random_hex(4)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (store, _) = crate::store::Store::open(&dir.join("t.db")).unwrap();
        let mut state = crate::state::State::default();
        state.records = crate::records::Records::new(2, crate::limits::DEFAULT_MAX_RECORDS_BYTES);
        let config = crate::config::Config::for_tests(dir.join("port"));
        let s = Shared::new(config, store, state);
        let ids: Vec<String> = (0..5)
            .map(|i| call(&s, &format!("f{i}"), 7, f64::from(i), json!([])))
            .collect();
        let listing = processes(&s);
        assert!(listing.complete);
        assert_eq!(listing.processes[0].records, 5);
        let recs = process_records(&s, &listing.processes[0].key, Some(&ids[0])).unwrap();
        let got: Vec<&String> = recs.rows.iter().map(|r| &r.call_id).collect();
        assert_eq!(
            got,
            ids.iter().collect::<Vec<_>>(),
            "each once, oldest first"
        );
        assert_eq!(recs.selected.unwrap()["method_name"], "f0");
        assert_eq!(find_record(&s, &ids[1]).unwrap()["method_name"], "f1");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
