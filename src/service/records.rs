//! What was recorded and stored: call records (from memory, or from the database file, which
//! holds every record), stored objects with their rendered value and structured view, object
//! snapshots, the debug client's com-error reports, and the server's status counts.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::{item_data, read_stored, Ack, Done, Obj};
use crate::error::ApiError;
use crate::intern::{Cid, Interner};
use crate::pretty::{self, View};
use crate::records::{self, CallRecord, Record, RecordFilter, Snapshot};
use crate::state::Shared;
use crate::store::{Format, RecordKind};

/// `GET /api/call-records`: a page of records, newest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CallRecordsPage {
    /// Each record in its wire shape (the client's call data and its completion, a client
    /// event, or an external tool call).
    pub calls: Vec<Value>,
    /// How many records matched, in all.
    pub total_count: usize,
    pub offset: usize,
    pub limit: usize,
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
    /// Calls recorded since the database was created (in memory plus dropped).
    pub total_calls: u64,
    pub calls_in_memory: usize,
    pub calls_dropped: u64,
    pub stored_objects: usize,
    pub default_behavior: crate::breakpoints::Global,
}

/// `GET /api/call-records`: newest first.
pub fn call_records(
    shared: &Shared,
    filter: &RecordFilter,
    offset: usize,
    limit: usize,
) -> CallRecordsPage {
    let (page, total) = if shared.store.is_durable() {
        // The file holds every record, also those past the in-memory window.
        let (values, total) = read_stored(
            shared,
            RecordKind::CallRecord,
            &|k| filter.may_match(k),
            offset,
            limit,
        );
        let mut scratch = Interner::default();
        let page = values
            .into_iter()
            .map(|v| Record::from_disk(&mut scratch, v))
            .filter(|r| filter.matches(r))
            .collect();
        (page, total)
    } else {
        shared.lock().records.page(filter, offset, limit)
    };
    let render = shared.render();
    CallRecordsPage {
        calls: page.iter().map(|r| r.to_json(&render)).collect(),
        total_count: total,
        offset,
        limit,
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
    let blob = shared.store.get(cid).map_err(|e| ApiError::storage(&e))?;
    let Some(blob) = blob else {
        return Err(cid_not_found(cid));
    };
    Ok(StoredObject {
        format: blob.format.map(Format::as_str),
        size: blob.bytes.len(),
        stored_at: blob.stored_at,
        value: pretty::payload(&blob.bytes, blob.format, None),
        view: pretty::view(&blob.bytes, blob.format),
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
/// it, newest first, at most `limit`; and how many calls were looked at.
pub fn object_seen_in(shared: &Shared, cid: &str, limit: usize) -> (Vec<SeenIn>, usize) {
    let Some(cid) = Cid::parse(cid) else {
        return (Vec::new(), 0);
    };
    let st = shared.lock();
    let mut out = Vec::new();
    let mut looked = 0;
    let open = st.calls.open_calls().map(|c| (c, true));
    let done = st.records.calls().rev().map(|c| (&**c, false));
    for (call, is_open) in open.chain(done) {
        looked += 1;
        let roles = records::roles_of(call, &cid);
        if roles.is_empty() {
            continue;
        }
        out.push(SeenIn {
            call_id: call.call_id.to_string(),
            method_name: call.method.to_string(),
            process_key: call.process.key(),
            roles,
            at: call.seen_at,
            open: is_open,
        });
        if out.len() >= limit {
            break;
        }
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

/// `GET /api/snapshots`: the object snapshots of items with a `client_ref` (derived from the
/// open calls and the call records in memory; the newest `MAX_SNAPSHOTS`, oldest first).
pub fn snapshots(shared: &Shared, process_key: Option<&str>, client_ref: Option<&str>) -> Value {
    let calls: Vec<(Arc<CallRecord>, bool)> = {
        let st = shared.lock();
        let open = st.calls.open_calls().map(|c| (Arc::new(c.clone()), false));
        st.records
            .calls()
            .map(|c| (c.clone(), true))
            .chain(open)
            .collect()
    };
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
    let skip = rows.len().saturating_sub(records::MAX_SNAPSHOTS);
    let render = shared.render();
    let list: Vec<Value> = rows[skip..].iter().map(|s| s.to_json(&render)).collect();
    json!({"snapshots": list})
}

/// `POST /api/report-com-error`.
pub fn report_com_error(shared: &Shared, body: &Obj) -> Done {
    let now = crate::ids::now();
    let mut report = body.clone();
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
        total_calls: st.records.len() as u64 + st.records.dropped(),
        calls_in_memory: st.records.len(),
        calls_dropped: st.records.dropped(),
        stored_objects,
        default_behavior: st.breakpoints.global(),
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
            status: None,
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
        crate::service::add_breakpoint(&s, "f", crate::service::Signature::Keep, None);
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
        report_com_error(&s, &body(json!({"summary": "timeout", "timestamp": 1.0})));
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
