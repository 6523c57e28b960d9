//! What was recorded and stored: call records (from memory, or from the database file, which
//! holds every record), stored objects with their rendered value and structured view, object
//! snapshots, the debug client's com-error reports, and the server's status counts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::{item_data, read_stored, Ack, Done, Obj};
use crate::error::ApiError;
use crate::intern::{Cid, Interner};
use crate::limits::{MAX_SNAPSHOTS, SCAN_BUDGET};
use crate::pretty::{self, View};
use crate::records::{self, CallRecord, ClientEvents, Record, RecordFilter, Snapshot};
use crate::search::TextSearch;
use crate::state::Shared;
use crate::store::{Format, RecordKind};

/// `GET /api/call-records`: a page of records, newest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CallRecordsPage {
    /// Each record in its wire shape (the client's call data and its completion, a client
    /// event, or an external tool call).
    pub calls: Vec<Value>,
    /// How many records matched, in all (with `search_truncated`, among those scanned).
    pub total_count: usize,
    pub offset: usize,
    pub limit: usize,
    /// Records a scan tested (present when a filter reads records one by one: `search`,
    /// `process`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scanned: Option<usize>,
    /// The scan ran out of its time budget ([`SCAN_BUDGET`]) before the oldest record (or, for
    /// the web UI's page, [`call_records_for_page`], stopped with the page full): the page and
    /// `total_count` cover the newest `scanned` records only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_truncated: Option<bool>,
    /// How many records passed every other filter but were left out as the client's own
    /// events (with `search_truncated`, among those scanned; a text search does not look into
    /// them). Present when the listing hides client events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_events_hidden: Option<usize>,
}

impl CallRecordsPage {
    /// Whether more records matched than this page holds from its offset.
    pub fn truncated(&self) -> bool {
        self.offset + self.calls.len() < self.total_count
    }

    /// The call ids of the page's records (those that have a string id).
    pub fn call_ids(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter_map(|c| c.get("call_id")?.as_str().map(str::to_owned))
            .collect()
    }
}

/// `GET /api/objects/<cid>`: a stored item with its rendered value and view.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct StoredObject {
    pub cid: Cid,
    pub format: Option<&'static str>,
    pub size: usize,
    pub stored_at: f64,
    pub value: Value,
    #[serde(flatten)]
    pub view: View,
    /// The payload (`?data=true`): the text of a JSON item, base64 of a pickle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// One entry of `GET /api/objects`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ObjectMeta {
    pub cid: Cid,
    pub size: u64,
    pub format: Option<&'static str>,
    pub stored_at: f64,
}

/// `GET /api/objects`: newest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ObjectsPage {
    pub objects: Vec<ObjectMeta>,
    pub total_count: usize,
    pub offset: usize,
    pub limit: usize,
}

/// `GET /api/status`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub server: &'static str,
    pub version: &'static str,
    pub database: String,
    pub breakpoints: usize,
    pub functions: usize,
    pub paused: usize,
    pub open_calls: usize,
    /// Open calls dropped because too many never completed (`limits::MAX_OPEN_CALLS`).
    pub open_calls_dropped: u64,
    /// Calls of pages that ran without pausing because their origin held the most pauses one
    /// origin may (`limits::MAX_PAUSES_PER_ORIGIN`).
    pub pauses_limited: u64,
    /// Calls recorded since the database was created (in memory plus dropped).
    pub total_calls: u64,
    pub calls_in_memory: usize,
    pub calls_dropped: u64,
    pub stored_objects: usize,
    pub default_behavior: crate::breakpoints::Global,
    /// The master switch: while false no call pauses (`GET /api/pausing`).
    pub pausing: bool,
    /// The port file this server was started with (whether or not it wrote it: a server never
    /// overwrites the port file of another live server), and its process id: with them a new
    /// `--mcp` process finds out that the port file names this running server, and joins it.
    pub port_file: String,
    pub pid: u32,
}

/// The filters of a call-record listing from named values, as the REST query
/// (`GET /api/call-records`, its JSON Lines export) and the MCP tool `breakpoint_get_call_records`
/// give them: `function`, `status`, `process` (a process key or a pid), `source` (one of
/// [`records::SOURCES`], else 400 `invalid_source`), `search` and `client_events` (`show`,
/// `hide` or `only`, else 400 `invalid_client_events`; `default_events` when not given). An
/// empty value filters nothing.
pub fn record_filter<'a>(
    value: impl Fn(&str) -> Option<&'a str>,
    default_events: ClientEvents,
) -> Result<RecordFilter<'a>, ApiError> {
    let given = |key: &str| value(key).filter(|v| !v.is_empty());
    let source = given("source");
    if let Some(other) = source.filter(|s| !records::SOURCES.contains(s)) {
        return Err(ApiError::bad_request(
            "invalid_source",
            format!("source must be 'program' or 'mcp_client', got '{other}'"),
        ));
    }
    let client_events = match given("client_events") {
        None => default_events,
        Some(v) => ClientEvents::parse(v).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_client_events",
                format!("client_events must be 'show', 'hide' or 'only', got '{v}'"),
            )
        })?,
    };
    Ok(RecordFilter {
        function: given("function"),
        status: given("status"),
        process: given("process"),
        source,
        search: given("search"),
        client_events,
    })
}

/// `GET /api/call-records`: newest first.
pub fn call_records(
    shared: &Shared,
    filter: &RecordFilter,
    offset: usize,
    limit: usize,
) -> CallRecordsPage {
    call_records_within(shared, filter, offset, limit, SCAN_BUDGET)
}

/// [`call_records`] with the scan's time budget given.
pub fn call_records_within(
    shared: &Shared,
    filter: &RecordFilter,
    offset: usize,
    limit: usize,
    budget: Duration,
) -> CallRecordsPage {
    if filter.needs_scan() {
        return scan_page(shared, filter, offset, limit, budget, false);
    }
    let (page, total, left_out) = if shared.store.is_durable() {
        // The file holds every record, also those past the in-memory window. One walk of
        // the index counts the client events left out too.
        let every = filter.with_client_events(ClientEvents::Show);
        let left_out = std::cell::Cell::new(0);
        let (values, total) = read_stored(
            shared,
            RecordKind::CallRecord,
            &|k| {
                let found = filter.may_match(k);
                if !found && every.may_match(k) {
                    left_out.set(left_out.get() + 1);
                }
                found
            },
            offset,
            limit,
        );
        let mut scratch = Interner::default();
        let page = values
            .into_iter()
            .map(|v| Record::from_disk(&mut scratch, v))
            .filter(|r| filter.matches(r))
            .collect();
        (page, total, left_out.get())
    } else {
        shared
            .lock()
            .records
            .page_and_left_out(filter, offset, limit)
    };
    CallRecordsPage {
        calls: shown(shared, &page),
        total_count: total,
        offset,
        limit,
        scanned: None,
        search_truncated: None,
        client_events_hidden: (filter.client_events == ClientEvents::Hide).then_some(left_out),
    }
}

/// A page of records for a person waiting on it (the web UI's Calls page): like
/// [`call_records_within`], but a scan (a text search, a process filter) also stops as soon as
/// the page is full, so its `total_count` counts only the matches found by then; when it stopped
/// before the oldest record, by the budget or with the page full, `search_truncated` says so.
pub fn call_records_for_page(
    shared: &Shared,
    filter: &RecordFilter,
    offset: usize,
    limit: usize,
    budget: Duration,
) -> CallRecordsPage {
    if filter.needs_scan() {
        return scan_page(shared, filter, offset, limit, budget, true);
    }
    call_records_within(shared, filter, offset, limit, budget)
}

/// Marks the client's own events among records in their wire shape with `"client_event": true`
/// (a listing that names its choice of client events, and every MCP listing, carry it; the
/// REST default keeps the records as they were).
pub fn mark_client_events(calls: &mut [Value]) {
    for call in calls {
        let method = call.get("method_name").and_then(Value::as_str);
        if method.is_some_and(records::is_client_event) {
            if let Some(m) = call.as_object_mut() {
                m.insert("client_event".into(), Value::Bool(true));
            }
        }
    }
}

/// The records of a page in their wire shape, within one response's render budget.
fn shown(shared: &Shared, page: &[Record]) -> Vec<Value> {
    let store_render = shared.render();
    let render = store_render.limited();
    page.iter().map(|r| r.to_json(&render)).collect()
}

/// A page of a listing that tests records one by one, newest first, until the oldest or the
/// time budget; with `until_full`, also until the page is full.
fn scan_page(
    shared: &Shared,
    filter: &RecordFilter,
    offset: usize,
    limit: usize,
    budget: Duration,
    until_full: bool,
) -> CallRecordsPage {
    let deadline = Instant::now() + budget;
    let store_render = shared.render();
    let render = store_render.scanning();
    let mut search = filter.search.map(TextSearch::new);
    // Hidden client events are read to be counted (not searched).
    let hide = filter.client_events == ClientEvents::Hide;
    let walked = if hide {
        filter.with_client_events(ClientEvents::Show)
    } else {
        *filter
    };
    let mut cursor = RecordCursor::new(shared, walked);
    let (mut page, mut total, mut scanned, mut cut) = (Vec::new(), 0, 0, false);
    let mut hidden = 0;
    'scan: while let Some(step) = cursor.step() {
        for r in step {
            if Instant::now() >= deadline || (until_full && page.len() >= limit) {
                cut = true;
                break 'scan;
            }
            scanned += 1;
            if hide && r.is_client_event() {
                hidden += 1;
                continue;
            }
            if search.as_mut().is_some_and(|s| !s.matches(&r, &render)) {
                continue;
            }
            if total >= offset && page.len() < limit {
                page.push(r);
            }
            total += 1;
        }
    }
    if let Some(s) = &search {
        log::debug!(
            "call records: searched {scanned} records ({} values rendered) in {:.1} ms{}",
            s.rendered,
            (Instant::now() + budget - deadline).as_secs_f64() * 1e3,
            if cut { ", cut at the time budget" } else { "" }
        );
    }
    CallRecordsPage {
        calls: shown(shared, &page),
        total_count: total,
        offset,
        limit,
        scanned: Some(scanned),
        search_truncated: Some(cut),
        client_events_hidden: hide.then_some(hidden),
    }
}

/// Records tested per step of a [`RecordCursor`] (one short lock, or one run of the index).
const CURSOR_STEP: usize = 512;

/// Call records newest first, in bounded steps: first those in the in-memory window, then,
/// with a database, the older ones from the file through its index (which skips the records
/// the filter's keys exclude, and those already seen in the window by their sequence number).
/// Each step holds the state lock, or reads the index, briefly; nothing is held between steps,
/// so records arriving meanwhile are simply newer than the cursor.
pub struct RecordCursor<'a> {
    shared: &'a Shared,
    filter: RecordFilter<'a>,
    at: At,
}

/// Where a [`RecordCursor`] is.
enum At {
    /// In the window, below this sequence number.
    Window(u64),
    /// In the file: records numbered below `seq`, from index entry `before` back.
    File {
        seq: u64,
        before: Option<u64>,
    },
    Done,
}

impl<'a> RecordCursor<'a> {
    pub fn new(shared: &'a Shared, filter: RecordFilter<'a>) -> RecordCursor<'a> {
        RecordCursor {
            shared,
            filter,
            at: At::Window(u64::MAX),
        }
    }

    /// The next few records that pass the filter (all but its text search), newest first;
    /// `None` once the oldest record was passed.
    pub fn step(&mut self) -> Option<Vec<Record>> {
        let filter = self.filter;
        match self.at {
            At::Done => None,
            At::Window(before) => {
                let step = self
                    .shared
                    .lock()
                    .records
                    .before(before, CURSOR_STEP, |r| filter.matches(r));
                self.at = match (step.more, self.shared.store.is_durable()) {
                    (true, _) => At::Window(step.reached),
                    (false, true) => At::File {
                        seq: step.reached,
                        before: None,
                    },
                    (false, false) => At::Done,
                };
                Some(step.found)
            }
            At::File { seq, before } => {
                let (offsets, next) = match self.shared.store.index_before(
                    RecordKind::CallRecord,
                    &|k| k.seq < seq && filter.may_match(k),
                    before,
                    CURSOR_STEP,
                ) {
                    Ok(found) => found,
                    Err(e) => {
                        log::error!("store index: read failed: {e}");
                        (Vec::new(), 0)
                    }
                };
                self.at = if next == 0 {
                    At::Done
                } else {
                    At::File {
                        seq,
                        before: Some(next),
                    }
                };
                // A scratch interner per step: the records are dropped after use.
                let mut scratch = Interner::default();
                let mut found = Vec::with_capacity(offsets.len());
                for at in offsets {
                    match self.shared.store.read_record(at) {
                        Ok((_, v)) => {
                            let r = Record::from_disk(&mut scratch, v);
                            if filter.matches(&r) {
                                found.push(r);
                            }
                        }
                        Err(e) => log::error!("store: cannot read the record at offset {at}: {e}"),
                    }
                }
                Some(found)
            }
        }
    }
}

/// `GET /api/call-records?format=jsonl`: every matching record in its wire shape, newest
/// first, a step at a time (`next` gives the records of one cursor step, maybe none). No time
/// budget: the export reads every record once, so its time is linear in what is stored.
pub struct CallRecordsExport<'a> {
    cursor: RecordCursor<'a>,
    search: Option<TextSearch>,
    mark: bool,
}

/// [`CallRecordsExport`] of the records that pass `filter`; `mark` marks the client's own
/// events ([`mark_client_events`]).
pub fn call_records_export<'a>(
    shared: &'a Shared,
    filter: RecordFilter<'a>,
    mark: bool,
) -> CallRecordsExport<'a> {
    CallRecordsExport {
        cursor: RecordCursor::new(shared, filter),
        search: filter.search.map(TextSearch::new),
        mark,
    }
}

impl Iterator for CallRecordsExport<'_> {
    type Item = Vec<Value>;

    fn next(&mut self) -> Option<Vec<Value>> {
        let step = self.cursor.step()?;
        let store_render = self.cursor.shared.render();
        let render = store_render.scanning();
        let mut lines: Vec<Value> = step
            .into_iter()
            .filter(|r| self.search.as_mut().is_none_or(|s| s.matches(r, &render)))
            .map(|r| r.to_json(&render))
            .collect();
        if self.mark {
            mark_client_events(&mut lines);
        }
        Some(lines)
    }
}

/// The newest call record with this call id, in its wire shape.
pub fn call_record(shared: &Shared, call_id: &str) -> Option<Value> {
    let record = shared.lock().records.by_call_id(call_id)?;
    Some(record.to_json(&shared.render()))
}

fn cid_not_found(cid: &str) -> ApiError {
    ApiError::not_found("cid_not_found", format!("no stored object {cid}")).with("cid", cid)
}

/// `GET /api/objects/<cid>`: a stored item with its rendered value.
pub fn object(shared: &Shared, cid: &str, include_data: bool) -> Result<StoredObject, ApiError> {
    object_from(shared, cid, include_data, 0)
}

/// [`object`] with its view's top-level attributes from the `from`th on (a later page of a
/// long dict or list).
pub fn object_from(
    shared: &Shared,
    cid: &str,
    include_data: bool,
    from: usize,
) -> Result<StoredObject, ApiError> {
    let blob = shared.store.get(cid).map_err(|e| ApiError::storage(&e))?;
    let Some(blob) = blob else {
        return Err(cid_not_found(cid));
    };
    Ok(StoredObject {
        format: blob.format.map(Format::as_str),
        size: blob.bytes.len(),
        stored_at: blob.stored_at,
        value: pretty::payload(&blob.bytes, blob.format, None),
        view: pretty::view_from(&blob.bytes, blob.format, from),
        data: include_data.then(|| item_data(&blob.bytes, blob.format)),
        cid: blob.cid,
    })
}

/// The structured view `{type, repr, attributes}` of a stored item.
pub fn object_view(shared: &Shared, cid: &str) -> Result<View, ApiError> {
    match shared.store.get(cid) {
        Ok(Some(blob)) => Ok(pretty::view(&blob.bytes, blob.format)),
        Ok(None) => Err(cid_not_found(cid)),
        Err(e) => Err(ApiError::storage(&e)),
    }
}

/// A call that named an object.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct SeenIn {
    pub call_id: String,
    pub method_name: String,
    pub process_key: String,
    pub roles: Vec<String>,
    pub at: f64,
    /// The call has not completed yet (it may be paused).
    pub open: bool,
}

/// Where the object `cid` was seen: the open calls and the call records in memory that name
/// it, newest first, at most `limit`; and how many calls were looked at. The window is read a
/// step at a time ([`CURSOR_STEP`] records under the lock, examined after it).
pub fn object_seen_in(shared: &Shared, cid: &str, limit: usize) -> (Vec<SeenIn>, usize) {
    let Some(cid) = Cid::parse(cid) else {
        return (Vec::new(), 0);
    };
    let seen = |call: &crate::records::CallRecord, open: bool| {
        let roles = records::roles_of(call, &cid);
        (!roles.is_empty()).then(|| SeenIn {
            call_id: call.call_id.to_string(),
            method_name: call.method.to_string(),
            process_key: call.process.key(),
            roles,
            at: call.seen_at,
            open,
        })
    };
    // Open calls are looked at under the lock: a few CID comparisons each, and bounded
    // (`limits::MAX_OPEN_CALLS`); they are not shared, so copying them out would cost more.
    let (mut out, mut looked) = {
        let st = shared.lock();
        let open: Vec<SeenIn> = st
            .calls
            .open_calls()
            .filter_map(|c| seen(c, true))
            .take(limit)
            .collect();
        (open, st.calls.n_open())
    };
    let mut before = u64::MAX;
    while out.len() < limit {
        let step = shared
            .lock()
            .records
            .before(before, CURSOR_STEP, |r| matches!(r, Record::Call(_)));
        for r in &step.found {
            if let Record::Call(call) = r {
                looked += 1;
                if let Some(s) = seen(call, false) {
                    out.push(s);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
        if !step.more {
            break;
        }
        before = step.reached;
    }
    (out, looked)
}

/// `GET /api/objects`: metadata of stored items, newest first.
pub fn objects(shared: &Shared, offset: usize, limit: usize) -> ObjectsPage {
    let all = shared.store.list();
    let total_count = all.len();
    let objects = all
        .into_iter()
        .rev()
        .skip(offset)
        .take(limit)
        .map(|m| ObjectMeta {
            cid: m.cid,
            size: m.size,
            format: m.format.map(Format::as_str),
            stored_at: m.stored_at,
        })
        .collect();
    ObjectsPage {
        objects,
        total_count,
        offset,
        limit,
    }
}

/// The call records in memory (completed: true) and the open calls (false), copied under the
/// lock for the snapshots derived from them.
fn calls_in_memory(shared: &Shared) -> Vec<(Arc<CallRecord>, bool)> {
    let st = shared.lock();
    let open = st.calls.open_calls().map(|c| (Arc::new(c.clone()), false));
    st.records
        .calls()
        .map(|c| (c.clone(), true))
        .chain(open)
        .collect()
}

/// `GET /api/snapshots`: the object snapshots of items with a `client_ref` (derived from the
/// open calls and the call records in memory; the newest `MAX_SNAPSHOTS`, oldest first).
pub fn snapshots(shared: &Shared, process_key: Option<&str>, client_ref: Option<&str>) -> Value {
    let calls = calls_in_memory(shared);
    let mut rows: Vec<Snapshot> = calls
        .iter()
        .flat_map(|(c, completed)| records::snapshots_of(c, *completed))
        .filter(|s| process_key.is_none_or(|k| s.call.process.key() == k))
        .filter(|s| {
            client_ref.is_none_or(|r| match &s.client_ref {
                Value::String(text) => text == r,
                other => serde_json::from_str::<Value>(r).ok().as_ref() == Some(other),
            })
        })
        .collect();
    rows.sort_by(|a, b| a.at.total_cmp(&b.at));
    let skip = rows.len().saturating_sub(MAX_SNAPSHOTS);
    let store_render = shared.render();
    let render = store_render.limited();
    let list: Vec<Value> = rows[skip..].iter().map(|s| s.to_json(&render)).collect();
    json!({"snapshots": list})
}

/// The client objects (items sent with a `client_ref`) of the open calls and the call records
/// in memory, each once with its newest snapshot, newest first: at most `limit`, and how many
/// there are. Only those listed are rendered.
pub fn client_objects(shared: &Shared, limit: usize) -> (Vec<Value>, usize) {
    let calls = calls_in_memory(shared);
    let mut newest: std::collections::HashMap<(String, String), Snapshot> =
        std::collections::HashMap::new();
    for s in calls
        .iter()
        .flat_map(|(c, completed)| records::snapshots_of(c, *completed))
    {
        let key = (s.call.process.key(), s.client_ref.to_string());
        if newest.get(&key).is_none_or(|old| old.at <= s.at) {
            newest.insert(key, s);
        }
    }
    let total = newest.len();
    let mut rows: Vec<Snapshot> = newest.into_values().collect();
    rows.sort_by(|a, b| b.at.total_cmp(&a.at));
    rows.truncate(limit);
    let store_render = shared.render();
    let render = store_render.limited();
    (rows.iter().map(|s| s.to_json(&render)).collect(), total)
}

/// `POST /api/report-com-error`.
pub fn report_com_error(shared: &Shared, body: Obj) -> Done {
    let now = crate::ids::now();
    let mut report = body;
    report.insert("received_at".into(), json!(now));
    report.entry("timestamp").or_insert_with(|| json!(now));
    let summary = report
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    shared.lock().calls.push_com_error(Value::Object(report));
    log::warn!("debug client reported a communication error: {summary}");
    Done { status: Ack::Ok }
}

/// `GET /api/com-errors`, oldest first.
pub fn com_errors(shared: &Shared) -> Value {
    json!({"errors": shared.lock().calls.com_errors()})
}

/// `GET /api/status`: counts, for agents and scripts.
pub fn server_status(shared: &Shared) -> ServerStatus {
    let stored_objects = shared.store.len();
    let st = shared.lock();
    ServerStatus {
        server: "cideldill-server",
        version: env!("CARGO_PKG_VERSION"),
        database: shared.config.database.describe(),
        breakpoints: st.breakpoints.len(),
        functions: st.functions.len(),
        paused: st.calls.paused().len(),
        open_calls: st.calls.n_open(),
        open_calls_dropped: st.calls.open_dropped(),
        pauses_limited: st.calls.pauses_limited(),
        total_calls: st.records.len() as u64 + st.records.dropped(),
        calls_in_memory: st.records.len(),
        calls_dropped: st.records.dropped(),
        stored_objects,
        default_behavior: st.breakpoints.global(),
        pausing: st.breakpoints.pausing(),
        port_file: shared.config.port_file.display().to_string(),
        pid: std::process::id(),
    }
}

/// [`server_status`] in its wire shape, for the landing page (`http::index` adds a field).
pub fn status(shared: &Shared) -> Value {
    serde_json::to_value(server_status(shared)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete_body, item, shared, start, start_body};

    fn record_call(s: &Shared, method: &str, result: &Value) -> String {
        let started = start(s, &start_body(method, &[json!(1)])).unwrap();
        let call_id = started["call_id"].as_str().unwrap().to_owned();
        crate::service::testing::complete(s, &complete_body(&call_id, result)).unwrap();
        call_id
    }

    #[test]
    fn call_records_are_paged_newest_first_and_filtered() {
        let s = shared();
        let first = record_call(&s, "f", &json!(1));
        let second = record_call(&s, "g", &json!(2));
        let third = record_call(&s, "f", &json!(3));
        let page = call_records(&s, &RecordFilter::default(), 0, 2);
        assert_eq!(page.call_ids(), [third.clone(), second]);
        assert_eq!((page.total_count, page.offset, page.limit), (3, 0, 2));
        assert!(page.truncated());
        let f_only = RecordFilter {
            function: Some("f"),
            ..RecordFilter::default()
        };
        let page = call_records(&s, &f_only, 0, 10);
        assert_eq!(page.call_ids(), [third, first.clone()]);
        assert!(!page.truncated());
        let wire = serde_json::to_value(&page).unwrap();
        let keys: Vec<&String> = wire.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["calls", "total_count", "offset", "limit"]);
        assert_eq!(
            call_record(&s, &first).unwrap()["pretty_result"],
            json!("1")
        );
        assert_eq!(call_record(&s, "nope"), None);
    }

    /// Records a call of `method` from process `pid` with these arguments and result.
    fn call_from(s: &Shared, method: &str, pid: i64, args: &[Value], result: &Value) -> String {
        let mut b = start_body(method, args);
        b.insert("process_pid".into(), json!(pid));
        let started = start(s, &b).unwrap();
        let call_id = started["call_id"].as_str().unwrap().to_owned();
        let mut done = complete_body(&call_id, result);
        done.insert("process_pid".into(), json!(pid));
        crate::service::testing::complete(s, &done).unwrap();
        call_id
    }

    /// An external tool call as `service::external` records it.
    fn external_call(s: &Shared, tool: &str, text: &str) -> String {
        let call_id = format!("mcp-{tool}");
        let record = json!({"call_id": call_id, "source": "mcp_client", "method_name": tool,
            "tool": tool, "arguments": {"q": text}, "status": "success", "pretty_result": "done"});
        let stored = Record::Other(Arc::new(record.clone()));
        let seq = s.lock().records.push(stored.clone());
        s.store
            .append_records(&[(RecordKind::CallRecord, &record, stored.index_key(seq))])
            .unwrap();
        call_id
    }

    fn search(text: &str) -> RecordFilter<'_> {
        RecordFilter {
            search: Some(text),
            ..RecordFilter::default()
        }
    }

    /// The same calls in memory and with a database whose window holds 2 records: every
    /// filter, alone and combined, lists the same records, newest first, once each.
    #[test]
    fn filters_and_search_combine_alike_in_memory_and_past_the_window_of_a_database() {
        let memory = shared();
        let durable = crate::service::testing::Durable::new(2);
        for s in [&memory, &durable.shared] {
            let a = call_from(s, "add", 7, &[json!("Alpha One")], &json!(1));
            let b = call_from(s, "add", 8, &[json!(2)], &json!({"k": "Needle"}));
            let c = call_from(s, "mul", 7, &[json!(3)], &json!("alphabet"));
            let e = external_call(s, "fs/read", "alpha.txt");
            let d = call_from(s, "add", 7, &[json!(4)], &json!(4));
            let ids = |f: &RecordFilter| call_records(s, f, 0, 100).call_ids();
            let ids = |f: &RecordFilter| ids(f).join(" ");
            let list = |l: &[&String]| l.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(" ");
            assert_eq!(ids(&RecordFilter::default()), list(&[&d, &e, &c, &b, &a]));
            assert_eq!(
                ids(&search("ALPHA")),
                list(&[&e, &c, &a]),
                "any case, every field"
            );
            assert_eq!(
                ids(&search("needle")),
                list(&[&b]),
                "inside a result dict's repr"
            );
            let combined = RecordFilter {
                function: Some("add"),
                process: Some("7"),
                search: Some("alpha"),
                ..RecordFilter::default()
            };
            assert_eq!(ids(&combined), list(&[&a]));
            let by_key = RecordFilter {
                process: Some("1795311683.500000+8"),
                ..RecordFilter::default()
            };
            assert_eq!(ids(&by_key), list(&[&b]));
            let program = RecordFilter {
                source: Some("program"),
                status: Some("success"),
                ..RecordFilter::default()
            };
            assert_eq!(ids(&program), list(&[&d, &c, &b, &a]));
            let external = RecordFilter {
                source: Some("mcp_client"),
                ..RecordFilter::default()
            };
            assert_eq!(ids(&external), list(&[&e]));
            assert!(ids(&search("nowhere at all")).is_empty());
            let page = call_records(s, &search("alpha"), 1, 1);
            assert_eq!(page.call_ids(), std::slice::from_ref(&c));
            assert_eq!(
                (page.total_count, page.scanned, page.search_truncated),
                (3, Some(5), Some(false))
            );
            let wire = serde_json::to_value(&page).unwrap();
            assert_eq!(wire["scanned"], 5);
            assert_eq!(wire["search_truncated"], false);
            let export: Vec<Value> = call_records_export(s, search("alpha"), false)
                .flatten()
                .collect();
            assert_eq!(export, call_records(s, &search("alpha"), 0, 100).calls);
        }
        assert_eq!(
            durable.shared.lock().records.len(),
            2,
            "the others were read from the file"
        );
    }

    #[test]
    fn a_search_out_of_time_says_how_far_it_got() {
        let s = shared();
        for n in 0..3 {
            record_call(&s, "f", &json!(n));
        }
        let page = call_records_within(&s, &search("x"), 0, 10, Duration::ZERO);
        assert_eq!(
            (page.total_count, page.scanned, page.search_truncated),
            (0, Some(0), Some(true))
        );
        let plain = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!((plain.scanned, plain.search_truncated), (None, None));
    }

    #[test]
    fn stored_objects_are_shown_with_their_view_and_data_on_request() {
        let s = shared();
        record_call(&s, "f", &json!({"a": 1}));
        let cid = item(&json!({"a": 1}))["cid"].as_str().unwrap().to_owned();
        let o = object(&s, &cid, false).unwrap();
        assert_eq!(o.view.type_name, "dict");
        assert_eq!(o.value, json!("{'a': 1}"));
        let wire = serde_json::to_value(&o).unwrap();
        let keys: Vec<&String> = wire.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "cid",
                "format",
                "size",
                "stored_at",
                "value",
                "type",
                "repr",
                "attributes"
            ]
        );
        assert_eq!(wire["cid"], json!(cid));
        assert_eq!(wire["format"], "dill");
        let with_data = object(&s, &cid, true).unwrap();
        assert_eq!(with_data.data, Some(item(&json!({"a": 1}))["data"].clone()));
        assert_eq!(object_view(&s, &cid).unwrap(), o.view);
        let missing = "0".repeat(128);
        let e = object(&s, &missing, false).unwrap_err();
        assert_eq!((e.status, e.code()), (404, "cid_not_found"));
        assert_eq!(e.body["cid"], json!(missing));
        assert_eq!(object_view(&s, &missing).unwrap_err(), e);
        let page = objects(&s, 0, 100);
        assert_eq!(page.total_count, 2, "the argument and the result");
        assert_eq!(page.objects[0].cid.hex(), cid, "newest first");
        assert_eq!(objects(&s, 1, 100).objects.len(), 1);
    }

    #[test]
    fn status_counts_and_com_errors() {
        let s = shared();
        record_call(&s, "f", &json!(1));
        crate::service::add_breakpoint(&s, "f", crate::service::Signature::Keep, None).unwrap();
        let st = server_status(&s);
        assert_eq!(
            (
                st.breakpoints,
                st.total_calls,
                st.calls_in_memory,
                st.open_calls
            ),
            (1, 1, 1, 0)
        );
        assert_eq!(st.database, ":memory:");
        let wire = status(&s);
        assert_eq!(wire, serde_json::to_value(&st).unwrap());
        assert_eq!(wire["default_behavior"], "stop");
        assert_eq!(
            wire.as_object().unwrap().keys().next().map(String::as_str),
            Some("server")
        );
        report_com_error(&s, body(json!({"summary": "timeout", "timestamp": 1.0})));
        let errors = com_errors(&s);
        assert_eq!(errors["errors"][0]["summary"], "timeout");
        assert_eq!(errors["errors"][0]["timestamp"], 1.0);
        assert!(errors["errors"][0]["received_at"].is_number());
    }

    #[test]
    fn snapshots_follow_client_refs() {
        let s = shared();
        let mut b = start_body("f", &[]);
        let mut arg = item(&json!(5));
        arg["client_ref"] = json!(77);
        b["args"] = json!([arg]);
        start(&s, &b).unwrap();
        let snaps = snapshots(&s, None, Some("77"));
        assert_eq!(snaps["snapshots"].as_array().unwrap().len(), 1);
        assert!(snapshots(&s, None, Some("78"))["snapshots"]
            .as_array()
            .unwrap()
            .is_empty());
    }
}
