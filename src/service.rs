//! The operations behind the debug-client protocol and the REST API, independent of HTTP:
//! each takes the shared state and a JSON request body and returns the JSON answer or an
//! `ApiError` with the original server's status and body (protocol doc §2 and §5). The MCP
//! layer will call the same functions. Pattern: verify and hash outside the lock, write to the
//! content store outside the lock, then one short critical section on `State`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, RecvTimeoutError};
use serde_json::{json, Map, Value};

use crate::breakpoints::{After, Before, Global, ReplacementError};
use crate::calls::{ResumeError, Resumed};
use crate::cas;
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::intern::{Interner, Sym, Val};
use crate::pickle_write;
use crate::pretty;
use crate::records::{
    self, CallId, CallRecord, CallSite, EventRecord, ExceptionInfo, Hint, HistoryEntry, Item,
    Process, Record, RecordFilter, Snapshot,
};
use crate::repl::{EvalOutcome, ReplError, SessionFilter};
use crate::state::Shared;
use crate::store::{Format, IndexKey, NewBlob, RecordKind};

/// The actions the Python client executes at a before-pause (protocol doc §2.11).
pub const BEFORE_ACTIONS: [&str; 5] = ["continue", "modify", "skip", "raise", "replace"];

type Obj = Map<String, Value>;

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

/// The process identity of a request: pid, start time and the derived `process_key`.
struct Identity {
    pid: i64,
    start_time: f64,
    key: String,
}

impl Identity {
    fn process(&self) -> Process {
        Process {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

fn identity(body: &Obj) -> Result<Identity, ApiError> {
    let pid = body.get("process_pid").and_then(py_int);
    let start_time = body
        .get("process_start_time")
        .and_then(py_float)
        .filter(|t| t.is_finite());
    match (pid, start_time) {
        (Some(pid), Some(start_time)) => Ok(Identity {
            pid,
            start_time,
            key: format!("{start_time:.6}+{pid}"),
        }),
        _ => Err(ApiError::bad_request(
            "missing_process_identity",
            "process_pid (int) and process_start_time (float) are required",
        )),
    }
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

fn persist(shared: &Shared, records: &[(RecordKind, Value, IndexKey)]) -> Result<(), ApiError> {
    if !shared.store.is_durable() {
        return Ok(());
    }
    let records: Vec<(RecordKind, &Value, IndexKey)> =
        records.iter().map(|(k, v, i)| (*k, v, *i)).collect();
    shared.store.append_records(&records).map_err(|err| {
        log::error!("record write failed: {err}");
        ApiError::storage(&err)
    })
}

fn poll_action(shared: &Shared, pause_id: &str) -> Obj {
    let mut out = Map::new();
    out.insert("action".into(), json!("poll"));
    out.insert(
        "poll_interval_ms".into(),
        json!(shared.config.poll_interval_ms),
    );
    // Compat: the Python client joins poll_url onto its server URL by string concatenation.
    out.insert("poll_url".into(), json!(format!("/api/poll/{pause_id}")));
    out.insert("timeout_ms".into(), json!(shared.config.poll_timeout_ms));
    out
}

// ---------------------------------------------------------------------------------------------
// Breakpoints, behaviours, functions.

/// `POST /api/breakpoints`: adds a breakpoint (idempotent) and registers the function.
pub fn breakpoint_add(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let name = match str_field(body, "function_name") {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ApiError::bare(400, "function_name required")),
    };
    let signature = str_field(body, "signature");
    let mut st = shared.lock();
    st.breakpoints.add(name);
    // Compat: an unknown behavior is silently ignored here (protocol doc §2.2).
    if let Some(b) = str_field(body, "behavior").and_then(|b| match b {
        "stop" => Some(Before::Stop),
        "go" => Some(Before::Go),
        "yield" => Some(Before::Yield),
        _ => None,
    }) {
        st.breakpoints.set_before(name, b);
    }
    st.functions.register(name, signature);
    st.emit(EventKind::BreakpointsChanged);
    Ok(json!({"status": "ok", "function_name": name}))
}

/// `DELETE /api/breakpoints/<name>`: always ok.
pub fn breakpoint_remove(shared: &Shared, name: &str) -> Value {
    let mut st = shared.lock();
    if st.breakpoints.remove(name) {
        st.emit(EventKind::BreakpointsChanged);
    }
    json!({"status": "ok", "function_name": name})
}

/// `POST /api/breakpoints/<name>/behavior` (strict values: stop, go, yield, continue).
pub fn breakpoint_set_behavior(shared: &Shared, name: &str, body: &Obj) -> Result<Value, ApiError> {
    let Some(b) = str_field(body, "behavior").and_then(Before::parse_strict) else {
        return Err(ApiError::bare(
            400,
            "behavior must be 'stop', 'go', or 'yield'",
        ));
    };
    let mut st = shared.lock();
    if !st.breakpoints.set_before(name, b) {
        return Err(ApiError::bare(404, "breakpoint_not_found"));
    }
    st.emit(EventKind::BreakpointsChanged);
    Ok(json!({"status": "ok", "function_name": name, "behavior": b.as_str()}))
}

/// `POST /api/breakpoints/<name>/after_behavior`.
pub fn breakpoint_set_after_behavior(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<Value, ApiError> {
    let Some(a) = str_field(body, "behavior").and_then(After::parse) else {
        return Err(ApiError::bad_request(
            "invalid_behavior",
            format!("behavior must be one of {}", quote_list(&After::NAMES)),
        ));
    };
    let mut st = shared.lock();
    if !st.breakpoints.set_after(name, a) {
        return Err(ApiError::bare(404, "breakpoint_not_found"));
    }
    st.emit(EventKind::BreakpointsChanged);
    Ok(json!({"status": "ok", "function_name": name, "behavior": a.as_str()}))
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `POST /api/breakpoints/<name>/replacement`.
pub fn breakpoint_set_replacement(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<Value, ApiError> {
    let replacement = match body.get("replacement_function") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Null) => "",
        _ => {
            return Err(ApiError::bad_request(
                "missing_replacement_function",
                "replacement_function (a function name, or \"\" to clear) is required",
            ))
        }
    };
    let mut st = shared.lock();
    let st = &mut *st;
    match st
        .breakpoints
        .set_replacement(name, replacement, &st.functions)
    {
        Ok(()) => {
            st.emit(EventKind::BreakpointsChanged);
            Ok(json!({"status": "ok", "function_name": name, "replacement_function": replacement}))
        }
        Err(ReplacementError::SignatureMismatch) => Err(ApiError::bare(400, "signature_mismatch")),
        Err(ReplacementError::BreakpointNotFound) => {
            Err(ApiError::bare(404, "breakpoint_not_found"))
        }
    }
}

/// `GET /api/breakpoints`.
pub fn breakpoints(shared: &Shared) -> Value {
    shared.lock().breakpoints.listing()
}

/// `GET /api/breakpoints/<name>/history?limit=N`, most recent first.
pub fn breakpoint_history(shared: &Shared, name: &str, offset: usize, limit: usize) -> Value {
    let page = if shared.store.is_durable() {
        let key = records::key_hash(name);
        let mut scratch = Interner::default();
        read_stored(shared, RecordKind::History, &|k| k.a == key, offset, limit)
            .0
            .into_iter()
            .filter_map(|v| HistoryEntry::from_disk(&mut scratch, &v, None))
            .filter(|h| &*h.call.method == name)
            .collect()
    } else {
        shared.lock().records.history(name, offset, limit)
    };
    let render = shared.render();
    let history: Vec<Value> = page.iter().map(|h| h.to_json(&render)).collect();
    json!({"function_name": name, "history": history})
}

/// `GET /api/behavior`.
pub fn default_behavior(shared: &Shared) -> Value {
    json!({"behavior": shared.lock().breakpoints.global().as_str()})
}

/// `POST /api/behavior`.
pub fn set_default_behavior(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let Some(g) = str_field(body, "behavior").and_then(Global::parse) else {
        return Err(ApiError::bad_request(
            "invalid_behavior",
            format!("behavior must be one of {}", quote_list(&Global::NAMES)),
        ));
    };
    let mut st = shared.lock();
    st.breakpoints.set_global(g);
    st.emit(EventKind::BreakpointsChanged);
    Ok(json!({"status": "ok", "behavior": g.as_str()}))
}

/// `POST /api/functions`: registers a function with its signature and metadata.
pub fn function_register(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let name = match str_field(body, "function_name") {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ApiError::bare(400, "function_name required")),
    };
    let signature = str_field(body, "signature");
    let blob = cas::verify_payload(
        body.get("function_cid"),
        body.get("function_data"),
        body.get("function_serialization_format"),
    )?;
    let mut metadata: Option<Obj> = None;
    if let Some(blob) = blob {
        // Only payloads that could not be pickled are sent here; they are placeholders.
        let decoded = pretty::payload(&blob.bytes, blob.format, None);
        let view = match blob.format {
            Some(Format::Json) => Value::Null,
            _ => crate::pickle::view(&blob.bytes),
        };
        store_blobs(shared, vec![blob])?;
        metadata = match decoded {
            Value::Object(m) if pretty::is_placeholder(&Value::Object(m.clone())) => Some(m),
            other if !pretty::is_unrendered(&other) => {
                let summary = match &other {
                    Value::String(s) => s.clone(),
                    v => pretty::cut(&v.to_string()),
                };
                let mut m = Map::new();
                m.insert("summary".into(), json!(summary));
                m.insert("object_name".into(), json!(name));
                m.insert(
                    "object_path".into(),
                    view.get("type").cloned().unwrap_or(Value::Null),
                );
                Some(m)
            }
            _ => None,
        };
    }
    if metadata.is_none() {
        metadata = body
            .get("function_metadata")
            .and_then(Value::as_object)
            .cloned();
    }
    if let Some(client_ref @ (Value::Number(_) | Value::String(_))) =
        body.get("function_client_ref")
    {
        let m = metadata.get_or_insert_with(Map::new);
        m.entry("client_ref").or_insert_with(|| client_ref.clone());
        m.entry("registered_at")
            .or_insert_with(|| json!(ids::now()));
    }
    let mut st = shared.lock();
    st.functions.register(name, signature);
    if let Some(m) = metadata {
        st.functions.set_metadata(name, m);
    }
    st.emit(EventKind::FunctionsChanged);
    let signature = st.functions.signature(name).map(str::to_owned);
    Ok(json!({"status": "ok", "function_name": name, "signature": signature}))
}

/// `GET /api/functions`.
pub fn functions(shared: &Shared) -> Value {
    shared.lock().functions.listing()
}

// ---------------------------------------------------------------------------------------------
// Calls.

/// The items of a call start, in the order the original scans them for missing CIDs.
fn call_items<'a>(target: Option<&'a Value>, args: &'a [Value], kwargs: &'a Obj) -> Vec<&'a Value> {
    let mut items = Vec::with_capacity(1 + args.len() + kwargs.len());
    if let Some(t @ Value::Object(m)) = target {
        if !m.is_empty() {
            items.push(t);
        }
    }
    items.extend(args.iter());
    items.extend(kwargs.values());
    items
}

fn has_data(item: &Value) -> bool {
    item.get("data").is_some_and(|d| !d.is_null())
}

/// `POST /api/call/start` (protocol doc §2.5).
pub fn call_start(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let who = identity(body)?;
    let method_name = match str_field(body, "method_name") {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_method_name",
                "method_name is required",
            ))
        }
    };
    let empty_args = Vec::new();
    let empty_kwargs = Map::new();
    let args = match body.get("args") {
        None | Some(Value::Null) => &empty_args,
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "args must be a list of items",
            ))
        }
    };
    let kwargs = match body.get("kwargs") {
        None | Some(Value::Null) => &empty_kwargs,
        Some(Value::Object(k)) => k,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "kwargs must be an object of items",
            ))
        }
    };
    let target = body.get("target").filter(|t| !t.is_null());
    // Checked before anything is stored or a call id is used (the original checks it after).
    let preferred_format = match body.get("preferred_format") {
        None | Some(Value::Null) => "dill",
        Some(Value::String(s)) if s == "dill" || s == "json" => s.as_str(),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_preferred_format",
                format!("preferred_format must be 'dill' or 'json', got {other}"),
            ))
        }
    };

    let items = call_items(target, args, kwargs);
    // An item may omit data its twin in the same request carries (the client marks a CID sent
    // as soon as it serializes it), so CIDs with data in this request count as present.
    let provided: HashSet<&str> = items
        .iter()
        .filter(|i| has_data(i))
        .filter_map(|i| i.get("cid")?.as_str())
        .collect();
    let mut missing: Vec<&str> = Vec::new();
    for item in &items {
        if let Some(cid) = item.get("cid").and_then(Value::as_str) {
            if !has_data(item)
                && !provided.contains(cid)
                && !missing.contains(&cid)
                && !shared.store.contains(cid)
            {
                missing.push(cid);
            }
        }
    }
    if !missing.is_empty() {
        // Compat: the only error the Python client survives on call/start; it resends once.
        return Err(ApiError::new(400, "cid_not_found", "Resend with full data")
            .with("missing_cids", json!(missing)));
    }
    let blobs = items
        .iter()
        .map(|i| cas::verify_item(i))
        .collect::<Result<Vec<_>, _>>()?;
    store_blobs(shared, blobs.into_iter().flatten().collect())?;

    let now = ids::now();
    let mut call = {
        let mut interner = shared.interner();
        let i = &mut *interner;
        let parsed_args: Box<[Item]> = args.iter().map(|x| Item::parse(i, x)).collect();
        let parsed_kwargs: Box<[(Sym, Item)]> = kwargs
            .iter()
            .map(|(name, x)| (i.sym(name), Item::parse(i, x)))
            .collect();
        CallRecord {
            call_id: CallId::Ours { at: now, n: 0 },
            method: interner.sym(&method_name),
            process: who.process(),
            target: target.map(|t| Item::parse(&mut interner, t)),
            args: parsed_args,
            kwargs: parsed_kwargs,
            signature: interner.field(body.get("signature")).or_null(),
            call_site: CallSite::parse(&mut interner, body.get("call_site")),
            page_url: interner.field(body.get("page_url")).or_null(),
            preferred_json: preferred_format == "json",
            paused_before: false,
            seen_at: now,
            done_at: now,
            status: Val::Null,
            completed_at: now,
            result_cid: Val::Null,
            result_client_ref: Val::Null,
            result_format: Hint::Absent,
            exception: None,
            repl_sessions: Box::default(),
        }
    };

    // A pause shows its call data rendered, which reads the content store: render it before
    // taking the lock when a pause is likely (the decision itself is taken under the lock).
    let call_data_of = |call: &CallRecord| {
        let mut data = call.call_data(&shared.render());
        // The items as sent, payloads included (protocol doc §2.5 step 7).
        data.insert("target".into(), target.cloned().unwrap_or(Value::Null));
        data.insert("args".into(), json!(args));
        data.insert("kwargs".into(), json!(kwargs));
        data
    };
    let likely = shared.lock().breakpoints.should_pause_before(&method_name);
    let mut rendered = likely.then(|| call_data_of(&call));

    let mut st = shared.lock();
    call.call_id = st.calls.next_call_id(now);
    let call_id = call.call_id.to_string();
    if st.breakpoints.should_pause_before(&method_name) {
        call.paused_before = true;
        let mut call_data = match rendered.take() {
            Some(data) => data,
            // A breakpoint added in between: rare enough to render under the lock.
            None => call_data_of(&call),
        };
        call_data.insert("call_id".into(), json!(call_id));
        call_data.insert("pause_reason".into(), json!("breakpoint"));
        st.calls.open_call(call);
        let pause_id = ids::uuid4();
        st.calls
            .pause(pause_id.clone(), call_data, now, Some(&call_id));
        st.emit(EventKind::ExecutionPaused {
            pause_id: pause_id.clone(),
            method_name,
            pause_reason: "breakpoint".into(),
            paused_at: now,
        });
        let mut out = poll_action(shared, &pause_id);
        out.insert("call_id".into(), json!(call_id));
        return Ok(Value::Object(out));
    }
    st.calls.open_call(call);
    if st.breakpoints.contains(&method_name) {
        if let Some(r) = st.breakpoints.replacement(&method_name) {
            return Ok(json!({"call_id": call_id, "action": "replace", "function_name": r}));
        }
    }
    Ok(json!({"call_id": call_id, "action": "continue"}))
}

/// The pair of payload fields `<prefix>_cid` / `<prefix>_data` of a completion or event.
fn verify_pair(body: &Obj, prefix: &str) -> Result<Option<NewBlob>, ApiError> {
    cas::verify_payload(
        body.get(&format!("{prefix}_cid")),
        body.get(&format!("{prefix}_data")),
        body.get(&format!("{prefix}_serialization_format")),
    )
}

/// The display value of `<prefix>_cid`, or null without one.
fn pretty_pair(shared: &Shared, body: &Obj, prefix: &str) -> Option<Value> {
    let cid = body
        .get(&format!("{prefix}_cid"))
        .filter(|c| !c.is_null())?;
    Some(shared.render().json_cid(
        Some(cid),
        body.get(&format!("{prefix}_serialization_format")),
    ))
}

/// A copy of `call_data` whose items (target, args, kwargs) keep their CID but not their
/// base64 `data`: records are kept for the whole session and persisted, while the payload is
/// already in the content store once (`GET /api/objects/<cid>`).
pub fn without_item_data(call_data: &Obj) -> Obj {
    let mut out = call_data.clone();
    let strip = |v: &mut Value| {
        if let Value::Object(item) = v {
            item.remove("data");
        }
    };
    if let Some(t) = out.get_mut("target") {
        strip(t);
    }
    if let Some(Value::Array(args)) = out.get_mut("args") {
        args.iter_mut().for_each(strip);
    }
    if let Some(Value::Object(kwargs)) = out.get_mut("kwargs") {
        kwargs.values_mut().for_each(strip);
    }
    out
}

/// The text form of the exception reported at completion (protocol doc §4.3).
fn text_exception(body: &Obj, exception_type: &str) -> Value {
    pretty::exception_text(
        exception_type,
        str_field(body, "exception_message").unwrap_or(""),
        body.get("exception_traceback"),
    )
}

/// `POST /api/call/complete` (protocol doc §2.9).
pub fn call_complete(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let call_id = match body.get("call_id") {
        Some(Value::String(c)) if !c.is_empty() => c.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_call_id",
                "call_id is required",
            ))
        }
    };
    let mut blobs = Vec::new();
    blobs.extend(verify_pair(body, "result")?);
    blobs.extend(verify_pair(body, "exception")?);
    store_blobs(shared, blobs)?;

    let now = ids::now();
    let completed_at = timestamp(body, "timestamp", now);
    let status = body.get("status").cloned().unwrap_or(Value::Null);
    let is_exception = body.get("exception_cid").is_some_and(|c| !c.is_null())
        || !matches!(status.as_str(), None | Some("success"));
    let decoded_exception = pretty_pair(shared, body, "exception");
    let exception = match (str_field(body, "exception_type"), decoded_exception) {
        (Some(t), None) => text_exception(body, t),
        (Some(t), Some(d)) if pretty::is_placeholder(&d) || pretty::is_unrendered(&d) => {
            text_exception(body, t)
        }
        (_, Some(d)) => d,
        (None, None) => Value::Null,
    };

    let (status_val, result, exception_info) = {
        let mut interner = shared.interner();
        let mut field = |k: &str| interner.field(body.get(k)).or_null();
        let status_val = field("status");
        let result = (field("result_cid"), field("result_client_ref"));
        let info = ExceptionInfo {
            shown: Val::Null,
            cid: field("exception_cid"),
            client_ref: field("exception_client_ref"),
            exception_type: field("exception_type"),
            message: field("exception_message"),
            traceback: field("exception_traceback"),
        };
        let shown = interner.val(&exception);
        (status_val, result, ExceptionInfo { shown, ..info })
    };
    let result_format =
        Hint::parse(body.get("result_serialization_format")).unwrap_or(Hint::Absent);
    let has_exception = !exception_info.is_null();

    let mut st = shared.lock();
    let Some(done) = st.calls.complete(&call_id) else {
        // Compat: an unknown call id is fine and records nothing.
        return Ok(json!({"status": "ok"}));
    };
    if let Some(p) = &done.leftover {
        st.repl.close_pause(&p.id, now);
    }
    let mut call = done.call;
    call.status = status_val;
    call.completed_at = completed_at;
    call.done_at = now;
    (call.result_cid, call.result_client_ref) = result;
    call.result_format = result_format;
    call.exception = has_exception.then(|| Box::new(exception_info));
    call.repl_sessions = done
        .pause_id
        .as_deref()
        .map(|p| st.repl.sessions_of(p).iter().map(|s| Sym::new(s)).collect())
        .unwrap_or_default();
    let call = Arc::new(call);
    let method_name = call.method.to_string();
    st.records.push(Record::Call(call.clone()));
    st.emit(EventKind::CallCompleted {
        call_id: call_id.clone(),
        method_name: method_name.clone(),
        status: call.status.as_str().unwrap_or("").to_owned(),
    });
    let mut history = None;
    if st.breakpoints.contains(&method_name) {
        let entry = HistoryEntry::new(Sym::new(&ids::uuid4()), call.clone());
        st.records.push_history(entry.clone());
        history = Some(entry);
    }
    let pause_after = st
        .breakpoints
        .should_pause_after(&method_name, is_exception);
    drop(st);

    // Written before the reply: an acknowledged completion survives a crash.
    if shared.store.is_durable() {
        let record = Record::Call(call.clone());
        let mut records = vec![(RecordKind::CallRecord, call.to_disk(), record.index_key())];
        if let Some(entry) = &history {
            records.push((RecordKind::History, entry.to_disk(), entry.index_key()));
        }
        persist(shared, &records)?;
    }

    if !pause_after {
        return Ok(json!({"status": "ok"}));
    }
    let reason = if is_exception {
        "exception"
    } else {
        "breakpoint"
    };
    let render = shared.render();
    let mut pause_data = call.call_data(&render);
    attach_item_data(shared, &call, &mut pause_data);
    pause_data.insert("pretty_result".into(), call.pretty_result(&render));
    let exception = call
        .exception
        .as_ref()
        .map_or(Value::Null, |e| e.shown.to_value());
    if !exception.is_null() {
        pause_data.insert("exception".into(), exception);
    }
    pause_data.insert("pause_reason".into(), json!(reason));
    let pause_id = ids::uuid4();
    let mut st = shared.lock();
    st.calls.pause(pause_id.clone(), pause_data, now, None);
    st.emit(EventKind::ExecutionPaused {
        pause_id: pause_id.clone(),
        method_name,
        pause_reason: reason.into(),
        paused_at: now,
    });
    drop(st);
    // The after-pause answer carries no call_id (protocol doc §2.9).
    Ok(Value::Object(poll_action(shared, &pause_id)))
}

/// Puts the payloads back into the items of a call's data that carried one when the call
/// started (a pause shows the items as the client sent them): base64 of a pickle, or the text
/// of a JSON item, from the content store.
fn attach_item_data(shared: &Shared, call: &CallRecord, data: &mut Obj) {
    let payload = |item: &Item| -> Option<Value> {
        let Item::Std {
            cid,
            had_data: true,
            ..
        } = item
        else {
            return None;
        };
        let blob = shared.store.get_digest(cid.digest()).ok()??;
        Some(match blob.format {
            Some(Format::Json) => json!(String::from_utf8_lossy(&blob.bytes)),
            _ => json!(cas::encode_base64(&blob.bytes)),
        })
    };
    let put = |slot: Option<&mut Value>, item: &Item| {
        if let (Some(Value::Object(m)), Some(p)) = (slot, payload(item)) {
            m.insert("data".into(), p);
        }
    };
    if let Some(t) = &call.target {
        put(data.get_mut("target"), t);
    }
    for (i, a) in call.args.iter().enumerate() {
        put(data.get_mut("args").and_then(|v| v.get_mut(i)), a);
    }
    for (k, v) in call.kwargs.iter() {
        put(data.get_mut("kwargs").and_then(|m| m.get_mut(&**k)), v);
    }
}

/// `POST /api/call/event` (protocol doc §2.4): diagnostics that become call records.
pub fn call_event(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let who = identity(body)?;
    let mut blobs = Vec::new();
    blobs.extend(verify_pair(body, "result")?);
    blobs.extend(verify_pair(body, "exception")?);
    store_blobs(shared, blobs)?;
    let now = ids::now();
    let at = timestamp(body, "timestamp", now);
    let first_str = |keys: &[&str], default: &str| -> String {
        keys.iter()
            .find_map(|k| str_field(body, k).filter(|s| !s.is_empty()))
            .unwrap_or(default)
            .to_owned()
    };
    let call_id = match body.get("event_id").or_else(|| body.get("call_id")) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => ids::uuid4(),
    };
    let method_name = first_str(&["method_name", "event_type"], "event");
    let status = first_str(&["status", "event_type"], "event");
    // A decoded payload wins over the sanitized field, unless we could not render it.
    let pick = |prefix: &str, field: &str| -> Value {
        match pretty_pair(shared, body, prefix) {
            Some(v) if !pretty::is_unrendered(&v) => v,
            decoded => body
                .get(field)
                .cloned()
                .filter(|v| !v.is_null())
                .or(decoded)
                .unwrap_or(Value::Null),
        }
    };
    let pretty_result = pick("result", "pretty_result");
    let exception = pick("exception", "exception");
    let record = {
        let mut i = shared.interner();
        EventRecord {
            call_id: Val::Str(Sym::new(&call_id)),
            method: i.sym(&method_name),
            status: i.sym(&status),
            pretty_args: i.val(body.get("pretty_args").unwrap_or(&json!([]))),
            pretty_kwargs: i.val(body.get("pretty_kwargs").unwrap_or(&json!({}))),
            signature: i.field(body.get("signature")).or_null(),
            call_site: CallSite::parse(&mut i, body.get("call_site")),
            page_url: i.field(body.get("page_url")).or_null(),
            event_type: i.field(body.get("event_type")).or_null(),
            process: who.process(),
            at,
            result_cid: i.field(body.get("result_cid")).or_null(),
            exception_cid: i.field(body.get("exception_cid")).or_null(),
            pretty_result: i.val(&pretty_result),
            exception: i.val(&exception),
        }
    };
    let record = Record::Event(Arc::new(record));
    let mut st = shared.lock();
    st.records.push(record.clone());
    if method_name == "with_debug.register" {
        if let Some(f) = body
            .get("pretty_result")
            .and_then(|r| r.get("function_name"))
            .and_then(Value::as_str)
        {
            st.functions
                .set_metadata_key(f, "last_process_key", json!(who.key));
            st.emit(EventKind::FunctionsChanged);
        }
    }
    st.emit(EventKind::CallCompleted {
        call_id,
        method_name,
        status,
    });
    drop(st);
    if shared.store.is_durable() {
        persist(
            shared,
            &[(RecordKind::CallRecord, record.to_disk(), record.index_key())],
        )?;
    }
    Ok(json!({"status": "ok"}))
}

// ---------------------------------------------------------------------------------------------
// Pauses.

/// `GET /api/paused`.
pub fn paused(shared: &Shared) -> Value {
    let st = shared.lock();
    let list: Vec<Value> = st
        .calls
        .paused()
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "call_data": p.call_data,
                "paused_at": p.paused_at,
                "repl_sessions": st.repl.sessions_of(&p.id),
            })
        })
        .collect();
    json!({"paused": list})
}

/// The paused executions without base64 payloads: what MCP tools, resources and prompts show.
pub fn paused_without_data(shared: &Shared) -> Vec<Value> {
    let st = shared.lock();
    st.calls
        .paused()
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "call_data": without_item_data(&p.call_data),
                "paused_at": p.paused_at,
                "repl_sessions": st.repl.sessions_of(&p.id),
            })
        })
        .collect()
}

/// `GET /api/poll/<id>`: ready with the stored action, or waiting (also for unknown ids).
pub fn poll(shared: &Shared, pause_id: &str) -> Value {
    match shared.lock().calls.poll(pause_id, ids::now()) {
        Some(action) => json!({"status": "ready", "action": action}),
        None => json!({"status": "waiting"}),
    }
}

/// Encodes a plain value for a client of `preferred_format`, returning the item and its blob.
fn encode_value(value: &Value, preferred_format: &str) -> (Value, NewBlob) {
    if preferred_format == "json" {
        let text = value.to_string();
        let cid = cas::cid_value(text.as_bytes());
        let item = json!({"cid": cid, "data": text, "serialization_format": "json"});
        (
            item,
            NewBlob {
                cid,
                bytes: text.into_bytes(),
                format: Some(Format::Json),
            },
        )
    } else {
        let bytes = pickle_write::dumps(value);
        let cid = cas::cid_value(&bytes);
        let item =
            json!({"cid": cid, "data": cas::encode_base64(&bytes), "serialization_format": "dill"});
        (
            item,
            NewBlob {
                cid,
                bytes,
                format: Some(Format::Dill),
            },
        )
    }
}

/// Values that are already items (objects with a `cid` key) pass through untouched.
fn encode_arg(value: &Value, preferred_format: &str, blobs: &mut Vec<NewBlob>) -> Value {
    if value.get("cid").is_some() {
        return value.clone();
    }
    let (item, blob) = encode_value(value, preferred_format);
    blobs.push(blob);
    item
}

/// `POST /api/paused/<id>/continue`: resumes a pause with an action the client can execute.
pub fn continue_pause(shared: &Shared, pause_id: &str, body: &Obj) -> Result<Value, ApiError> {
    let mut action_name = match body.get("action") {
        None | Some(Value::Null) => "continue".to_owned(),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_action",
                format!("action must be a string, got {other}"),
            ))
        }
    };
    let replacement = match body.get("replacement_function") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "replacement_function must be a string",
            ))
        }
    };
    if replacement.is_some() {
        action_name = "replace".into();
    }

    let (is_after, preferred_format) = {
        let st = shared.lock();
        if st.calls.has_action(pause_id) {
            return Err(pause_already_resumed(pause_id));
        }
        match st.calls.paused_by_id(pause_id) {
            Some(p) => (
                p.is_after(),
                p.call_data
                    .get("preferred_format")
                    .and_then(Value::as_str)
                    .unwrap_or("dill")
                    .to_owned(),
            ),
            // A pause from before a restart that a client still polls: only `continue` is
            // safe, as we cannot tell a before-pause from an after-pause.
            None if st.calls.is_orphan(pause_id) => (true, "dill".to_owned()),
            None => return Err(pause_not_found(pause_id)),
        }
    };
    if is_after && action_name != "continue" {
        return Err(ApiError::bad_request(
            "invalid_action",
            format!(
                "pause {pause_id} is after the call completed (or from before a restart); \
                 it can only be resumed with action 'continue', not '{action_name}'"
            ),
        ));
    }
    if !BEFORE_ACTIONS.contains(&action_name.as_str()) {
        return Err(ApiError::bad_request(
            "invalid_action",
            format!(
                "action must be one of {}, got '{action_name}'",
                quote_list(&BEFORE_ACTIONS)
            ),
        ));
    }

    let mut action = Map::new();
    action.insert("action".into(), json!(action_name));
    if let Some(r) = &replacement {
        action.insert("function_name".into(), json!(r));
    }
    let mut blobs = Vec::new();
    if let Some(v) = body.get("modified_args") {
        let Value::Array(list) = v else {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "modified_args must be a list",
            ));
        };
        let items: Vec<Value> = list
            .iter()
            .map(|a| encode_arg(a, &preferred_format, &mut blobs))
            .collect();
        action.insert("modified_args".into(), json!(items));
    }
    if let Some(v) = body.get("modified_kwargs") {
        let Value::Object(map) = v else {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "modified_kwargs must be an object",
            ));
        };
        let items: Obj = map
            .iter()
            .map(|(k, a)| (k.clone(), encode_arg(a, &preferred_format, &mut blobs)))
            .collect();
        action.insert("modified_kwargs".into(), Value::Object(items));
    }
    for key in ["fake_result", "fake_result_data", "exception"] {
        if let Some(v) = body.get(key) {
            action.insert(key.into(), v.clone());
        }
    }
    if let Some(fake) = body.get("fake_result") {
        if !body.contains_key("fake_result_data") {
            let (item, blob) = encode_value(fake, &preferred_format);
            blobs.push(blob);
            action.insert("fake_result_cid".into(), item["cid"].clone());
            action.insert("fake_result_data".into(), item["data"].clone());
            action.insert(
                "fake_result_serialization_format".into(),
                item["serialization_format"].clone(),
            );
        }
    }
    for key in ["exception_type", "exception_message"] {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                action.insert(key.into(), json!(s));
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    "invalid_payload",
                    format!("{key} must be a string"),
                ))
            }
        }
    }
    if let Some(t) = str_field(body, "exception_type") {
        // Compat: the Python client raises getattr(builtins, name, Exception); a dotted name
        // would silently become a plain Exception.
        let is_identifier = t
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && t.chars().all(|c| c.is_alphanumeric() || c == '_');
        if !is_identifier {
            return Err(ApiError::bad_request(
                "invalid_exception_type",
                format!(
                    "exception_type must be a builtin exception name such as ValueError, got '{t}'"
                ),
            ));
        }
    }
    store_blobs(shared, blobs)?;

    let now = ids::now();
    let mut st = shared.lock();
    match st.calls.resume(pause_id, Value::Object(action)) {
        Ok(Resumed::Pause(p)) => {
            st.repl.close_pause(pause_id, now);
            st.emit(EventKind::ExecutionResumed {
                pause_id: pause_id.to_owned(),
                method_name: p.method_name().to_owned(),
                action: action_name,
            });
        }
        Ok(Resumed::Orphan) => {
            st.emit(EventKind::ExecutionResumed {
                pause_id: pause_id.to_owned(),
                method_name: String::new(),
                action: action_name,
            });
        }
        Err(ResumeError::AlreadyResumed) => return Err(pause_already_resumed(pause_id)),
        Err(ResumeError::NotFound) => return Err(pause_not_found(pause_id)),
    }
    Ok(json!({"status": "ok", "pause_id": pause_id}))
}

fn pause_not_found(pause_id: &str) -> ApiError {
    ApiError::not_found("pause_not_found", format!("no paused execution {pause_id}"))
        .with("pause_id", pause_id)
}

fn pause_already_resumed(pause_id: &str) -> ApiError {
    ApiError::conflict(
        "pause_already_resumed",
        format!("pause {pause_id} was already resumed"),
    )
    .with("pause_id", pause_id)
}

// ---------------------------------------------------------------------------------------------
// REPL.

/// `POST /api/repl/start`.
pub fn repl_start(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let pause_id = match str_field(body, "pause_id") {
        Some(p) if !p.trim().is_empty() => p,
        _ => {
            return Err(ApiError::bad_request(
                "missing_pause_id",
                "pause_id is required",
            ))
        }
    };
    let mut st = shared.lock();
    if st.calls.has_action(pause_id) {
        return Err(ApiError::conflict(
            "pause_resumed",
            format!("pause {pause_id} was already resumed"),
        ));
    }
    let Some(pause) = st.calls.paused_by_id(pause_id).cloned() else {
        return Err(ApiError::not_found(
            "pause_not_found",
            format!("no paused execution {pause_id}"),
        ));
    };
    let Some(pid) = pause
        .call_data
        .get("process_pid")
        .filter(|p| !p.is_null())
        .cloned()
    else {
        return Err(ApiError::bad_request(
            "invalid_pause",
            "the paused call has no process_pid",
        ));
    };
    let session_id = st.repl.start(&pause, &pid, ids::now());
    Ok(json!({"session_id": session_id}))
}

/// `GET /api/repl/sessions`.
pub fn repl_sessions(shared: &Shared, filter: &SessionFilter) -> Value {
    json!({"sessions": shared.lock().repl.list(filter)})
}

/// `GET /api/repl/<sid>`.
pub fn repl_session(shared: &Shared, session_id: &str) -> Result<Value, ApiError> {
    match shared.lock().repl.session(session_id) {
        Some(s) => Ok(json!({"session": s.to_json()})),
        None => Err(session_not_found(session_id)),
    }
}

fn session_not_found(session_id: &str) -> ApiError {
    ApiError::not_found("session_not_found", format!("no REPL session {session_id}"))
}

fn session_closed(session_id: &str) -> ApiError {
    ApiError::conflict(
        "session_closed",
        format!("REPL session {session_id} is closed (its pause was resumed)"),
    )
}

/// A queued eval: wait on `outcome`, then hand what arrived to [`repl_eval_finish`].
pub struct PendingEval {
    pub eval_id: String,
    pub session_id: String,
    pub outcome: crossbeam_channel::Receiver<EvalOutcome>,
}

/// Queues an expression for the paused program of a REPL session.
pub fn repl_eval_start(
    shared: &Shared,
    session_id: &str,
    expr: Option<&Value>,
) -> Result<PendingEval, ApiError> {
    let expr = match expr {
        Some(Value::String(e)) if !e.trim().is_empty() => e.as_str(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_expr",
                "expr (a non-blank string) is required",
            ))
        }
    };
    let (tx, rx) = bounded(1);
    let eval_id = ids::uuid4();
    let mut st = shared.lock();
    if st.shutting_down {
        return Err(ApiError::new(
            503,
            "shutting_down",
            "the server is shutting down",
        ));
    }
    let pause_id = match st.repl.session(session_id) {
        None => return Err(session_not_found(session_id)),
        Some(s) if !s.is_open() => return Err(session_closed(session_id)),
        Some(s) => s.pause_id.clone(),
    };
    match st.calls.paused_by_id(&pause_id) {
        Some(p) if p.call_data.get("process_pid").is_some_and(|v| !v.is_null()) => {}
        _ => {
            return Err(ApiError::bad_request(
                "invalid_pause",
                format!("pause {pause_id} is not paused"),
            ))
        }
    }
    match st.repl.enqueue(session_id, expr, eval_id.clone(), tx) {
        Ok(_) => {}
        Err(ReplError::SessionClosed) => return Err(session_closed(session_id)),
        Err(_) => return Err(session_not_found(session_id)),
    }
    Ok(PendingEval {
        eval_id,
        session_id: session_id.to_owned(),
        outcome: rx,
    })
}

/// Turns what a waiting eval received (`None`: it gave up after `waited`) into the answer.
pub fn repl_eval_finish(
    shared: &Shared,
    pending: &PendingEval,
    received: Option<EvalOutcome>,
    waited: Duration,
) -> Result<Value, ApiError> {
    match received {
        Some(EvalOutcome::Result(v)) => Ok(v),
        Some(EvalOutcome::Closed) => Err(session_closed(&pending.session_id)),
        None => {
            shared.lock().repl.expire(&pending.eval_id);
            // The result may have arrived between giving up and the expiry.
            if let Ok(EvalOutcome::Result(v)) = pending.outcome.try_recv() {
                return Ok(v);
            }
            Err(ApiError::new(
                504,
                "eval_timeout",
                format!(
                    "Debug client did not respond within {}s",
                    waited.as_secs_f64()
                ),
            ))
        }
    }
}

/// `POST /api/repl/<sid>/eval`: queues an expression for the paused program and waits up to
/// `timeout` for its answer.
pub fn repl_eval(
    shared: &Shared,
    session_id: &str,
    expr: Option<&Value>,
    timeout: Duration,
) -> Result<Value, ApiError> {
    let pending = repl_eval_start(shared, session_id, expr)?;
    let received = match pending.outcome.recv_timeout(timeout) {
        Ok(outcome) => Some(outcome),
        Err(RecvTimeoutError::Timeout) => None,
        Err(RecvTimeoutError::Disconnected) => {
            return Err(ApiError::new(
                500,
                "eval_missing",
                "the eval was dropped before the debug client answered",
            ))
        }
    };
    repl_eval_finish(shared, &pending, received, timeout)
}

/// `POST /api/repl/<sid>/close`.
pub fn repl_close(shared: &Shared, session_id: &str) -> Result<Value, ApiError> {
    if shared.lock().repl.close(session_id, ids::now()) {
        Ok(json!({"status": "ok"}))
    } else {
        Err(session_not_found(session_id))
    }
}

/// `GET /api/poll-repl/<pause_id>`: the next queued eval, or `{"eval_id": null}` (always 200).
pub fn poll_repl(shared: &Shared, pause_id: &str) -> Value {
    match shared.lock().repl.next_request(pause_id) {
        Some(req) => req.to_json(),
        None => json!({"eval_id": null}),
    }
}

/// `POST /api/call/repl-result` (protocol doc §2.8).
pub fn repl_result(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let field = |k: &str| match body.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let (Some(eval_id), Some(session_id), Some(_pause_id)) =
        (field("eval_id"), field("session_id"), field("pause_id"))
    else {
        return Err(ApiError::bad_request(
            "missing_fields",
            "eval_id, session_id and pause_id are required",
        ));
    };
    let check = |st: &crate::state::State| match st.repl.check_delivery(&session_id, &eval_id) {
        Ok(()) => Ok(()),
        Err(ReplError::SessionNotFound) => Err(session_not_found(&session_id)),
        Err(ReplError::SessionClosed) => Err(session_closed(&session_id)),
        Err(ReplError::EvalNotFound) => Err(ApiError::not_found(
            "eval_not_found",
            format!("no pending eval {eval_id} (expired or answered)"),
        )),
    };
    check(&shared.lock())?;
    let blob = verify_pair(body, "result")?;
    store_blobs(shared, blob.into_iter().collect())?;

    let error = body.get("error").filter(|e| !e.is_null());
    let (output, is_error) = match error {
        Some(Value::String(s)) => (json!(s), true),
        Some(other) => (json!(other.to_string()), true),
        None => {
            let client_text = body
                .get("result")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            match pretty_pair(shared, body, "result") {
                // The client's own repr is exact; the stored pickle is not rendered here yet.
                Some(v) if pretty::is_unrendered(&v) && client_text.is_some() => {
                    (json!(client_text), false)
                }
                Some(Value::String(s)) => (json!(s), false),
                Some(v) => (json!(v.to_string()), false),
                None => match body.get("result") {
                    Some(Value::String(s)) => (json!(s), false),
                    None | Some(Value::Null) => (json!("None"), false),
                    Some(other) => (json!(other.to_string()), false),
                },
            }
        }
    };
    let stdout = match body.get("stdout") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    let result = json!({
        "output": output,
        "stdout": stdout,
        "is_error": is_error,
        "result_cid": body.get("result_cid").cloned().unwrap_or(Value::Null),
    });
    let mut st = shared.lock();
    check(&st)?;
    st.repl
        .deliver(&session_id, &eval_id, result, ids::now())
        .map_err(|_| ApiError::internal("eval vanished"))?;
    Ok(json!({"status": "ok"}))
}

// ---------------------------------------------------------------------------------------------
// Records, objects, com errors, status.

/// `GET /api/call-records`: newest first.
pub fn call_records(shared: &Shared, filter: &RecordFilter, offset: usize, limit: usize) -> Value {
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
    let calls: Vec<Value> = page.iter().map(|r| r.to_json(&render)).collect();
    json!({"calls": calls, "total_count": total, "offset": offset, "limit": limit})
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

/// The newest call record with this call id.
pub fn call_record(shared: &Shared, call_id: &str) -> Option<Value> {
    let record = shared.lock().records.by_call_id(call_id)?;
    Some(record.to_json(&shared.render()))
}

/// `GET /api/objects/<cid>`: a stored item with its rendered value.
pub fn object(shared: &Shared, cid: &str, include_data: bool) -> Result<Value, ApiError> {
    let blob = shared.store.get(cid).map_err(|e| ApiError::storage(&e))?;
    let Some(blob) = blob else {
        return Err(
            ApiError::not_found("cid_not_found", format!("no stored object {cid}"))
                .with("cid", cid),
        );
    };
    let view = pretty::view(&blob.bytes, blob.format);
    let mut out = json!({
        "cid": blob.cid,
        "format": blob.format.map(Format::as_str),
        "size": blob.bytes.len(),
        "stored_at": blob.stored_at,
        "value": pretty::payload(&blob.bytes, blob.format, None),
        "type": view.type_name,
        "repr": view.repr,
        "attributes": view.attributes,
    });
    if include_data {
        out["data"] = match blob.format {
            Some(Format::Json) => json!(String::from_utf8_lossy(&blob.bytes)),
            _ => json!(cas::encode_base64(&blob.bytes)),
        };
    }
    Ok(out)
}

/// `GET /api/objects`: metadata of stored items, newest first.
pub fn objects(shared: &Shared, offset: usize, limit: usize) -> Value {
    let all = shared.store.list();
    let total = all.len();
    let page: Vec<Value> = all
        .iter()
        .rev()
        .skip(offset)
        .take(limit)
        .map(|m| json!({"cid": m.cid, "size": m.size, "format": m.format.map(Format::as_str), "stored_at": m.stored_at}))
        .collect();
    json!({"objects": page, "total_count": total, "offset": offset, "limit": limit})
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
pub fn report_com_error(shared: &Shared, body: &Obj) -> Value {
    let now = ids::now();
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
    json!({"status": "ok"})
}

/// `GET /api/com-errors`, oldest first.
pub fn com_errors(shared: &Shared) -> Value {
    json!({"errors": shared.lock().calls.com_errors()})
}

/// `GET /api/status`: counts, for agents and scripts.
pub fn status(shared: &Shared) -> Value {
    let stored_objects = shared.store.len();
    let st = shared.lock();
    json!({
        "server": "cideldill-server",
        "version": env!("CARGO_PKG_VERSION"),
        "database": shared.config.database.describe(),
        "breakpoints": st.breakpoints.len(),
        "functions": st.functions.len(),
        "paused": st.calls.paused().len(),
        "open_calls": st.calls.n_open(),
        "total_calls": st.records.len() as u64 + st.records.dropped(),
        "calls_in_memory": st.records.len(),
        "calls_dropped": st.records.dropped(),
        "stored_objects": stored_objects,
        "default_behavior": st.breakpoints.global().as_str(),
    })
}
