//! The operations every face shares (the debug-client protocol and REST API, MCP tools,
//! resources and prompts), independent of transport. Each takes the shared state and typed
//! arguments (or, for the protocol, the JSON request body) and returns a typed result
//! (`#[derive(Serialize)]`: REST serializes it as the original server's wire shape, MCP builds
//! its own shapes from its fields) or an `ApiError` with the original's status and body
//! (protocol doc §2 and §5). Faces never lock the state or read the content store themselves.
//!
//! Pattern: verify and hash outside the lock, write to the content store outside the lock, then
//! one short critical section on `State` that emits its events once.

mod breakpoints;
mod calls;
mod compare;
pub mod external;
mod fields;
mod gate;
mod origins;
mod pauses;
mod processes;
mod records;
mod repl;
mod replay;
mod runs;
mod settings;

#[cfg(test)]
pub(crate) mod testing;

pub use breakpoints::*;
pub use calls::*;
pub use compare::*;
pub use origins::*;
pub use pauses::*;
pub use processes::*;
pub use records::*;
pub use repl::*;
pub use replay::*;
pub use runs::*;
pub use settings::{deleted_run, SettingsLoader};

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::cas;
use crate::error::ApiError;
use crate::ids;
use crate::node::JsonNode;
use crate::state::Shared;
use crate::store::{Format, IndexKey, NewBlob, RecordKind};

type Obj = Map<String, Value>;

/// `"ok"`: the `status` of every acknowledgement.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Ack {
    Ok,
}

/// `{"status": "ok"}`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub status: Ack,
}

fn str_field<'a>(body: &'a Obj, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

/// Python's `int(x)` for the values a JSON body can hold.
fn py_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)
        }),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Python's `float(x)` for the values a JSON body can hold.
fn py_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A timestamp field, or `now` when absent or not a number.
fn timestamp(body: &Obj, key: &str, now: f64) -> f64 {
    body.get(key)
        .and_then(py_float)
        .filter(|t| t.is_finite())
        .unwrap_or(now)
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn store_blobs(shared: &Shared, blobs: Vec<NewBlob>) -> Result<(), ApiError> {
    if blobs.is_empty() {
        return Ok(());
    }
    shared
        .store
        .put_blobs(blobs, ids::now())
        .map(|_| ())
        .map_err(|err| {
            log::error!("content store write failed: {err}");
            ApiError::storage(&err)
        })
}

/// Writes records durably (nothing without a database file); answers their offsets in the file.
fn persist(
    shared: &Shared,
    records: &[(RecordKind, Value, IndexKey)],
) -> Result<Vec<u64>, ApiError> {
    if !shared.store.is_durable() {
        return Ok(Vec::new());
    }
    let records: Vec<(RecordKind, &Value, IndexKey)> =
        records.iter().map(|(k, v, i)| (*k, v, *i)).collect();
    shared.store.append_records(&records).map_err(|err| {
        log::error!("record write failed: {err}");
        ApiError::storage(&err)
    })
}

/// Keeps a record for good, persist first: it takes its place in the window hidden (so its
/// sequence number follows the window's order), is written to the database outside the lock,
/// and only then is shown, with its history entry, and announced by `event`. So no reader sees
/// and no event announces a record that a crash could still lose. `st` is the caller's guard:
/// its change and the record's place are one step. Answers the record's sequence number and
/// where the database holds it. Without a database the record is shown at once.
fn keep_record(
    shared: &Shared,
    mut st: crate::state::StateGuard<'_>,
    record: crate::records::Record,
    history: Option<crate::records::HistoryEntry>,
    event: crate::events::EventKind,
) -> Result<(u64, Option<u64>), ApiError> {
    if !shared.store.is_durable() {
        let seq = st.records.push(record);
        if let Some(entry) = history {
            st.records.push_history(entry);
        }
        st.emit(event);
        return Ok((seq, None));
    }
    let seq = st.records.push_hidden(record.clone());
    drop(st);
    let mut rows = vec![(
        RecordKind::CallRecord,
        record.to_disk(),
        record.index_key(seq),
    )];
    if let Some(entry) = &history {
        rows.push((RecordKind::History, entry.to_disk(), entry.index_key()));
    }
    let at = persist(shared, &rows)?;
    let mut st = shared.lock();
    st.records.show(seq);
    if let Some(entry) = history {
        st.records.push_history(entry);
    }
    st.emit(event);
    Ok((seq, at.first().copied()))
}

/// Stored records of `kind` whose index key matches, newest first: a page and the number that
/// matched. A read error is logged and ends the page early.
fn read_stored(
    shared: &Shared,
    kind: RecordKind,
    matches: &dyn Fn(IndexKey) -> bool,
    offset: usize,
    limit: usize,
) -> (Vec<Value>, usize) {
    let (offsets, total) = match shared.store.index_page(kind, matches, offset, limit) {
        Ok(found) => found,
        Err(e) => {
            log::error!("store index: read failed: {e}");
            return (Vec::new(), 0);
        }
    };
    let mut page = Vec::with_capacity(offsets.len());
    for at in offsets {
        match shared.store.read_record(at) {
            Ok((_, v)) => page.push(v),
            Err(e) => {
                log::error!("store: cannot read the record at offset {at}: {e}");
                break;
            }
        }
    }
    (page, total)
}

/// A payload as items carry it in `data`: the text of a JSON item, base64 of anything else.
fn item_data(bytes: &[u8], format: Option<Format>) -> Value {
    match format {
        Some(Format::Json) => json!(String::from_utf8_lossy(bytes)),
        _ => json!(cas::encode_base64(bytes)),
    }
}

/// The pair of payload fields `<prefix>_cid` / `<prefix>_data` of a completion or event.
/// A payload as a request carries it: `cid` (when it is a string), `data` and
/// `serialization_format`.
struct Payload<'a> {
    cid: Option<&'a str>,
    data: cas::Data<'a>,
    format: Option<Cow<'a, Value>>,
}

/// The payload `<prefix>_cid`, `<prefix>_data`, `<prefix>_serialization_format` of a body.
fn pair<'a>(body: &'a Obj, prefix: &str) -> Payload<'a> {
    Payload {
        cid: str_field(body, &format!("{prefix}_cid")),
        data: match body.get(&format!("{prefix}_data")) {
            None | Some(Value::Null) => cas::Data::Missing,
            Some(Value::String(text)) => cas::Data::Text(text),
            Some(_) => cas::Data::NotText,
        },
        format: body
            .get(&format!("{prefix}_serialization_format"))
            .map(Cow::Borrowed),
    }
}

/// The keys of a payload named by a prefix: `<prefix>_cid`, `<prefix>_data`,
/// `<prefix>_serialization_format`.
type PairKeys = [&'static str; 3];
const RESULT: PairKeys = ["result_cid", "result_data", "result_serialization_format"];
const EXCEPTION: PairKeys = [
    "exception_cid",
    "exception_data",
    "exception_serialization_format",
];

/// [`pair`] on a body as parsed from a request.
fn node_pair<'a>(body: &'a JsonNode<'a>, [cid, data, format]: PairKeys) -> Payload<'a> {
    Payload {
        cid: body.get(cid).and_then(JsonNode::as_str),
        data: node_data(body.get(data)),
        format: body.get(format).map(|f| Cow::Owned(f.to_value())),
    }
}

fn node_data<'a>(data: Option<&'a JsonNode<'a>>) -> cas::Data<'a> {
    match data {
        None | Some(JsonNode::Null) => cas::Data::Missing,
        Some(JsonNode::Str(text)) => cas::Data::Text(text),
        Some(_) => cas::Data::NotText,
    }
}

/// The payload of an item as parsed from a request body.
fn node_payload<'a>(item: &'a JsonNode<'a>) -> Payload<'a> {
    Payload {
        cid: item.get("cid").and_then(JsonNode::as_str),
        data: node_data(item.get("data")),
        format: item
            .get("serialization_format")
            .map(|f| Cow::Owned(f.to_value())),
    }
}

/// Verifies payloads in order (the first error is the answer, nothing is stored then) and
/// stores the new blobs. A text verified before for a CID still in the store is not decoded
/// and hashed again (`cas::Verified`).
fn verify_and_store(shared: &Shared, payloads: &[Payload<'_>]) -> Result<(), ApiError> {
    fn text<'a>(p: &'a Payload<'_>) -> Option<(&'a str, &'a str, Format)> {
        match (p.cid, p.data) {
            (Some(cid), cas::Data::Text(text)) => {
                Some((cid, text, cas::parse_format(p.format.as_deref()).ok()?))
            }
            _ => None,
        }
    }
    let known: Vec<Option<[u8; 64]>> = {
        let verified = shared.verified();
        payloads
            .iter()
            .map(|p| text(p).and_then(|(cid, t, f)| verified.knows(cid, f, t)))
            .collect()
    };
    let mut blobs = Vec::new();
    let mut learned = Vec::new();
    for (p, known) in payloads.iter().zip(known) {
        if known.is_some_and(|d| shared.store.contains_digest(&d)) {
            continue;
        }
        let Some(blob) = cas::verify_parts(p.cid, p.data, p.format.as_deref())? else {
            continue;
        };
        if let (Some((_, t, _)), Some(format)) = (text(p), blob.format) {
            learned.push((*blob.cid.digest(), format, t));
        }
        blobs.push(blob);
    }
    store_blobs(shared, blobs)?;
    if !learned.is_empty() {
        let mut verified = shared.verified();
        for (digest, format, t) in learned {
            verified.remember(&digest, format, t);
        }
    }
    Ok(())
}

/// The display value of `<prefix>_cid`, or `None` without one.
fn pretty_pair(shared: &Shared, body: &Obj, prefix: &str) -> Option<Value> {
    let cid = body
        .get(&format!("{prefix}_cid"))
        .filter(|c| !c.is_null())?;
    Some(shared.render().json_cid(
        Some(cid),
        body.get(&format!("{prefix}_serialization_format")),
    ))
}
