//! Paused executions: listing them (with or without the items' base64 payloads), the debug
//! client's poll, and resuming a pause with an action the client can execute (plain JSON values
//! encoded as pickles, or as JSON for clients that prefer it).

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{item_data, quote_list, store_blobs, str_field, Ack, Obj};
use std::sync::Arc;

pub use crate::calls::When;
use crate::calls::{Pause, PauseCause, ResumeError, Resumed};
use crate::cas;
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::intern::{Interner, Sym};
use crate::pickle_write;
use crate::records::{CallRecord, Item};
use crate::resolution::{Action, Actor, Resolution};
use crate::state::Shared;
use crate::store::{Format, NewBlob};

/// The actions the Python client executes at a before-pause (protocol doc §2.11).
pub const BEFORE_ACTIONS: [&str; 5] = ["continue", "modify", "skip", "raise", "replace"];

/// One paused execution: its wire form (`call_data`, rendered at the edge with or without the
/// items' payloads) and, for the faces that read it, the typed pause behind it.
#[derive(Serialize, Debug, Clone)]
pub struct PausedExecution {
    pub id: String,
    /// Before or after the call: an after-pause takes only `continue`.
    pub when: When,
    pub call_data: Obj,
    pub paused_at: f64,
    pub repl_sessions: Vec<String>,
    /// When its program last polled it (`paused_at` until the first poll).
    pub last_poll_at: f64,
    /// Its program stopped polling (`gone_after_s`): probably killed. It can be dismissed.
    pub gone: bool,
    /// The call as recorded (before it ran, or completed).
    #[serde(skip)]
    pub call: Arc<CallRecord>,
    /// Why it paused.
    #[serde(skip)]
    pub cause: PauseCause,
}

impl PartialEq for PausedExecution {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.id,
            self.when,
            &self.call_data,
            self.paused_at,
            &self.repl_sessions,
            self.last_poll_at,
            self.gone,
        ) == (
            &other.id,
            other.when,
            &other.call_data,
            other.paused_at,
            &other.repl_sessions,
            other.last_poll_at,
            other.gone,
        )
    }
}

impl PausedExecution {
    pub fn method_name(&self) -> &str {
        &self.call.method
    }

    /// A pause after the call completed (it shows a result or an exception).
    pub fn is_after(&self) -> bool {
        self.when == When::After
    }
}

/// `GET /api/paused`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct PausedList {
    pub paused: Vec<PausedExecution>,
}

/// Whether the items of a pause's call data keep their base64 `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payloads {
    /// As the client sent them (REST, for clients that resend them).
    Included,
    /// CIDs only: what MCP tools, resources and prompts show.
    Omitted,
}

/// A pause resumed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Continued {
    pub status: Ack,
    pub pause_id: String,
    /// The action stored for the client (`replace` when a replacement function was given).
    #[serde(skip)]
    pub action: String,
}

/// Every pause resumed with `continue`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ContinuedAll {
    pub status: Ack,
    /// The pauses resumed, oldest first.
    pub resumed: Vec<String>,
}

/// Resumes every current pause with `continue` (a pause resumed meanwhile by someone else is
/// left out of `resumed`).
pub fn continue_all(shared: &Shared) -> ContinuedAll {
    let resumed = paused_ids(shared)
        .into_iter()
        .filter(|id| continue_pause(shared, id, &Obj::new(), Actor::ContinueAll).is_ok())
        .collect();
    ContinuedAll {
        status: Ack::Ok,
        resumed,
    }
}

/// The original items of a paused call, with their payloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OriginalItems {
    pub args: Vec<Value>,
    pub kwargs: Obj,
}

/// The wire call data of a pause (protocol doc §2.5 step 7): the call's data, its items with
/// their payloads read back from the content store when asked for, for an after-pause its
/// result or exception, and why it paused.
fn call_data(shared: &Shared, p: &Pause, payloads: Payloads, budget: &mut usize) -> Obj {
    let render = shared.render();
    let call = &p.call;
    let mut data = call.call_data(&render);
    if payloads == Payloads::Included {
        attach_item_data(shared, call, &mut data, budget);
    }
    if p.is_after() {
        data.insert("pretty_result".into(), call.pretty_result(&render));
        if let Some(e) = call.exception.as_ref().filter(|e| !e.shown.is_null()) {
            data.insert("exception".into(), e.shown.to_value());
        }
    }
    p.cause.describe(&mut data);
    data
}

/// The payload of an item that carried one when the call started: base64 of a pickle, or the
/// text of a JSON item, from the content store.
fn item_payload(shared: &Shared, item: &Item) -> Option<Value> {
    if !item.had_data() {
        return None;
    }
    let blob = shared.store.get(&item.cid()?).ok()??;
    Some(item_data(&blob.bytes, blob.format))
}

/// Puts the payloads back into the items of a call's data that carried one when the call
/// started (a pause shows the items as the client sent them), while they fit in `budget`
/// (`limits::MAX_PAUSED_DATA_BYTES` for one listing): past it, items keep their CID only (no
/// client needs them: the Python client reads a listing's ids, times and method names).
fn attach_item_data(shared: &Shared, call: &CallRecord, data: &mut Obj, budget: &mut usize) {
    let mut put = |slot: Option<&mut Value>, item: &Item| {
        if *budget == 0 {
            return;
        }
        if let (Some(Value::Object(m)), Some(p)) = (slot, item_payload(shared, item)) {
            let len = p.as_str().map_or(0, str::len);
            if len > *budget {
                *budget = 0;
                return;
            }
            *budget -= len;
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

/// The paused executions, oldest first. The pauses are copied under the lock (their calls
/// are shared); their values are rendered after it.
pub fn paused(shared: &Shared, payloads: Payloads) -> PausedList {
    let pauses: Vec<(Pause, Vec<String>)> = {
        let st = shared.lock();
        st.calls
            .paused()
            .iter()
            .map(|p| (p.clone(), st.repl.sessions_of(&p.id)))
            .collect()
    };
    let mut budget = crate::limits::MAX_PAUSED_DATA_BYTES;
    let now = ids::now();
    let paused = pauses
        .into_iter()
        .map(|(p, sessions)| execution(shared, p, sessions, payloads, &mut budget, now))
        .collect();
    PausedList { paused }
}

/// Seconds without a poll after which a paused program counts as gone: the larger of
/// `PROGRAM_GONE_AFTER_S` and `PROGRAM_GONE_MISSED_POLLS` poll intervals (`--poll-interval-ms`).
pub fn gone_after_s(shared: &Shared) -> f64 {
    use crate::limits::{PROGRAM_GONE_AFTER_S, PROGRAM_GONE_MISSED_POLLS};
    let interval_s = shared.config.poll_interval_ms as f64 / 1000.0;
    PROGRAM_GONE_AFTER_S.max(PROGRAM_GONE_MISSED_POLLS * interval_s)
}

/// Whether the program of the current pause `pause_id` stopped polling: `Some(seconds since
/// its last poll)` when it is gone, `None` when it polls (or the pause is not current).
pub fn gone_for(shared: &Shared, pause_id: &str) -> Option<f64> {
    let after = gone_after_s(shared);
    let now = ids::now();
    let st = shared.lock();
    let p = st.calls.paused_by_id(pause_id)?;
    p.is_gone(now, after).then_some(now - p.last_poll_at)
}

/// 410 `program_gone`: the program of a pause stopped polling `silent_s` seconds ago.
pub fn program_gone(pause_id: &str, silent_s: f64) -> ApiError {
    ApiError::new(
        410,
        "program_gone",
        format!(
            "the program paused at {pause_id} stopped polling {silent_s:.0} s ago (it was \
             probably killed): nothing can be evaluated in it; dismiss its pause, or wait for \
             it to poll again"
        ),
    )
    .with("pause_id", pause_id)
    .with("last_poll_s_ago", silent_s.floor())
}

fn execution(
    shared: &Shared,
    p: Pause,
    repl_sessions: Vec<String>,
    payloads: Payloads,
    budget: &mut usize,
    now: f64,
) -> PausedExecution {
    PausedExecution {
        call_data: call_data(shared, &p, payloads, budget),
        gone: p.is_gone(now, gone_after_s(shared)),
        last_poll_at: p.last_poll_at,
        id: p.id,
        when: p.when,
        paused_at: p.paused_at,
        repl_sessions,
        call: p.call,
        cause: p.cause,
    }
}

/// One paused execution.
pub fn pause(shared: &Shared, pause_id: &str, payloads: Payloads) -> Option<PausedExecution> {
    let (p, sessions) = {
        let st = shared.lock();
        let p = st.calls.paused_by_id(pause_id)?.clone();
        let sessions = st.repl.sessions_of(pause_id);
        (p, sessions)
    };
    let mut budget = crate::limits::MAX_PAUSED_DATA_BYTES;
    Some(execution(
        shared,
        p,
        sessions,
        payloads,
        &mut budget,
        ids::now(),
    ))
}

/// The ids of the paused executions, oldest first.
pub fn paused_ids(shared: &Shared) -> Vec<String> {
    let st = shared.lock();
    st.calls.paused().iter().map(|p| p.id.clone()).collect()
}

/// An item with its payload (from the content store when the client sent only its CID), so it
/// can be sent back unchanged.
fn with_payload(shared: &Shared, item: &Item) -> Value {
    let mut v = item.to_value();
    if let (Value::Object(m), Some(cid)) = (&mut v, item.cid()) {
        if let Ok(Some(blob)) = shared.store.get(&cid) {
            m.insert("data".into(), item_data(&blob.bytes, blob.format));
            // An item sent with its data is given back as sent; one sent by CID alone says
            // what its data is.
            if !item.had_data() {
                m.insert(
                    "serialization_format".into(),
                    json!(blob.format.unwrap_or(Format::Dill).as_str()),
                );
            }
        }
    }
    v
}

/// The arguments a paused call was made with, each item with its payload.
pub fn original_items(shared: &Shared, pause_id: &str) -> Option<OriginalItems> {
    let call = shared.lock().calls.paused_by_id(pause_id)?.call.clone();
    Some(OriginalItems {
        args: call.args.iter().map(|a| with_payload(shared, a)).collect(),
        kwargs: call
            .kwargs
            .iter()
            .map(|(k, i)| (k.to_string(), with_payload(shared, i)))
            .collect(),
    })
}

/// Longest JSON text of one argument the Modify editor shows as a plain value.
const EDITABLE_CHARS: usize = 4096;

/// What the Modify editor starts from: `{"args": [...], "kwargs": {...}}` with each argument
/// as its plain JSON value where JSON holds the stored value exactly (and it is short), else
/// as its item (`{"cid": ...}`, which the client resolves from its own cache); and the same
/// shape with every argument as its item, sent for arguments left unchanged.
pub fn modify_prefill(shared: &Shared, call: &CallRecord) -> (Value, Value) {
    let editable = |item: &Value| -> Value {
        let plain = item
            .get("cid")
            .and_then(Value::as_str)
            .and_then(|cid| shared.store.get(cid).ok().flatten())
            .and_then(|blob| match blob.format {
                Some(Format::Json) => serde_json::from_slice::<Value>(&blob.bytes).ok(),
                _ => crate::pickle::exact_json(&blob.bytes, 256),
            })
            .filter(|v| v.to_string().len() <= EDITABLE_CHARS);
        plain.unwrap_or_else(|| item.clone())
    };
    let args: Vec<Value> = call.args.iter().map(Item::to_value).collect();
    let kwargs: Obj = call
        .kwargs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_value()))
        .collect();
    let shown = json!({
        "args": args.iter().map(editable).collect::<Vec<_>>(),
        "kwargs": kwargs.iter().map(|(n, i)| (n.clone(), editable(i))).collect::<Obj>(),
    });
    let items = json!({"args": args, "kwargs": kwargs});
    (shown, items)
}

#[cfg(test)]
/// `GET /api/poll/<id>`: ready with the stored action, or waiting (also for unknown ids).
pub fn poll(shared: &Shared, pause_id: &str) -> Value {
    poll_from(shared, pause_id, None).unwrap_or_else(|e| e.to_json())
}

/// `GET /api/poll/<pause_id>` from `origin`: a pause of another origin (or a program's pause
/// polled by a page, or the reverse) is 403 `not_owner`.
pub fn poll_from(shared: &Shared, pause_id: &str, origin: Option<&str>) -> Result<Value, ApiError> {
    match shared.lock().calls.poll(pause_id, origin, ids::now()) {
        Ok(Some(action)) => Ok(json!({"status": "ready", "action": action})),
        Ok(None) => Ok(json!({"status": "waiting"})),
        Err(e) => Err(super::calls::not_yours("pause", &e)),
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
/// `by` is the face it came through; the call's record keeps what was done (`resolution`).
pub fn continue_pause(
    shared: &Shared,
    pause_id: &str,
    body: &Obj,
    by: Actor,
) -> Result<Continued, ApiError> {
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
                if p.call.preferred_json {
                    "json"
                } else {
                    "dill"
                }
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
    let resolution = resolution_of(
        &action_name,
        &action,
        by,
        pause_id,
        now,
        &mut shared.interner(),
    );
    let mut st = shared.lock();
    match st.calls.resume(pause_id, Value::Object(action), resolution) {
        Ok(Resumed::Pause(p)) => {
            st.repl.close_pause(pause_id, now);
            st.emit(EventKind::ExecutionResumed {
                pause_id: pause_id.to_owned(),
                method_name: p.method_name().to_owned(),
                action: action_name.clone(),
            });
        }
        Ok(Resumed::Orphan) => {
            st.emit(EventKind::ExecutionResumed {
                pause_id: pause_id.to_owned(),
                method_name: String::new(),
                action: action_name.clone(),
            });
        }
        Err(ResumeError::AlreadyResumed) => return Err(pause_already_resumed(pause_id)),
        Err(ResumeError::NotFound) => return Err(pause_not_found(pause_id)),
    }
    Ok(Continued {
        status: Ack::Ok,
        pause_id: pause_id.to_owned(),
        action: action_name,
    })
}

/// The pauses of a gone program dismissed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Dismissed {
    pub status: Ack,
    /// The pauses removed: the one asked for and every other pause of the same program that
    /// is gone too, oldest first.
    pub dismissed: Vec<String>,
}

/// `POST /api/paused/<id>/dismiss`: removes the pause of a program that stopped polling, with
/// the other gone pauses of that program. Each is resumed with `continue` (the only action
/// valid at every pause): a program that was only stopped and polls again goes on with its
/// call as if continued, and its completion is recorded as usual. A pause whose program still
/// polls is refused (409 `program_not_gone`: continue it instead).
pub fn dismiss_pause(shared: &Shared, pause_id: &str, by: Actor) -> Result<Dismissed, ApiError> {
    let after = gone_after_s(shared);
    let now = ids::now();
    let mut st = shared.lock();
    if st.calls.has_action(pause_id) {
        return Err(pause_already_resumed(pause_id));
    }
    let Some(p) = st.calls.paused_by_id(pause_id) else {
        return Err(pause_not_found(pause_id));
    };
    if !p.is_gone(now, after) {
        return Err(ApiError::conflict(
            "program_not_gone",
            format!(
                "the program paused at {pause_id} still polls (last {:.1} s ago): continue \
                 its pause instead of dismissing it",
                (now - p.last_poll_at).max(0.0)
            ),
        )
        .with("pause_id", pause_id));
    }
    let (process, origin) = (p.call.process, p.call.origin().map(str::to_owned));
    let targets: Vec<String> = st
        .calls
        .paused()
        .iter()
        .filter(|q| {
            q.id == pause_id
                || (q.call.process == process
                    && q.call.origin() == origin.as_deref()
                    && q.is_gone(now, after))
        })
        .map(|q| q.id.clone())
        .collect();
    let mut dismissed = Vec::new();
    for id in targets {
        let mut r = Resolution::new(Action::Continue, by, now);
        r.pause_id = Some(Sym::new(&id));
        if let Ok(Resumed::Pause(p)) = st.calls.resume(&id, json!({"action": "continue"}), r) {
            st.repl.close_pause(&id, now);
            st.emit(EventKind::ExecutionResumed {
                pause_id: id.clone(),
                method_name: p.method_name().to_owned(),
                action: "dismiss".into(),
            });
            dismissed.push(id);
        }
    }
    Ok(Dismissed {
        status: Ack::Ok,
        dismissed,
    })
}

/// What a resume action does to the call, as its record keeps it.
fn resolution_of(
    action_name: &str,
    action: &Obj,
    by: Actor,
    pause_id: &str,
    now: f64,
    interner: &mut Interner,
) -> Resolution {
    let mut r = Resolution::new(
        Action::parse(action_name).unwrap_or(Action::Continue),
        by,
        now,
    );
    r.pause_id = Some(Sym::new(pause_id));
    match r.action {
        Action::Continue => {}
        Action::Modify => {
            // The client runs the function with exactly these: an omitted list is none.
            let args = action.get("modified_args").and_then(Value::as_array);
            r.args = Some(
                args.map(|a| a.iter().map(|x| Item::parse(interner, x)).collect())
                    .unwrap_or_default(),
            );
            let kwargs = action.get("modified_kwargs").and_then(Value::as_object);
            r.kwargs = Some(
                kwargs
                    .map(|k| {
                        k.iter()
                            .map(|(n, x)| (interner.sym(n), Item::parse(interner, x)))
                            .collect()
                    })
                    .unwrap_or_default(),
            );
        }
        Action::Skip => {
            r.fake_result = match (
                action.get("fake_result_cid"),
                action.get("fake_result_data"),
            ) {
                (Some(Value::String(cid)), _) => Some(Item::parse(
                    interner,
                    &json!({"cid": cid, "serialization_format": action.get("fake_result_serialization_format").cloned().unwrap_or(json!("dill"))}),
                )),
                (_, Some(Value::String(data))) => cas::decode_base64_lenient(data).map(|bytes| {
                    Item::parse(
                        interner,
                        &json!({"cid": cas::cid_of(&bytes), "serialization_format": "dill"}),
                    )
                }),
                _ => None,
            };
        }
        Action::Raise => {
            r.exception_type = Some(
                interner.sym(
                    action
                        .get("exception_type")
                        .and_then(Value::as_str)
                        .unwrap_or("Exception"),
                ),
            );
            r.exception_message = action
                .get("exception_message")
                .and_then(Value::as_str)
                .map(Into::into);
        }
        Action::Replace => {
            r.replacement = action
                .get("function_name")
                .and_then(Value::as_str)
                .map(|f| interner.sym(f));
        }
    }
    r
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete_body, item, paused_call, shared};

    #[test]
    fn continue_all_resumes_every_pause_once() {
        let s = shared();
        let (a, _) = paused_call(&s, "f", &[json!(1)]);
        let (b, _) = paused_call(&s, "g", &[json!(2)]);
        let done = continue_all(&s);
        assert_eq!(done.resumed, [a.clone(), b.clone()]);
        assert!(paused(&s, Payloads::Omitted).paused.is_empty());
        assert_eq!(poll(&s, &a)["action"]["action"], "continue");
        assert_eq!(poll(&s, &b)["status"], "ready");
        assert!(continue_all(&s).resumed.is_empty());
    }

    #[test]
    fn pauses_are_listed_with_or_without_payloads() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[json!(1)]);
        let with = paused(&s, Payloads::Included);
        assert!(with.paused[0].call_data["args"][0].get("data").is_some());
        let without = paused(&s, Payloads::Omitted);
        let arg = &without.paused[0].call_data["args"][0];
        assert!(arg.get("data").is_none() && arg.get("cid").is_some());
        assert_eq!(without.paused[0].method_name(), "f");
        assert_eq!(
            pause(&s, &pause_id, Payloads::Omitted).as_ref(),
            without.paused.first()
        );
        assert_eq!(pause(&s, "nope", Payloads::Omitted), None);
        assert_eq!(paused_ids(&s), vec![pause_id.clone()]);
        let wire = serde_json::to_value(&with).unwrap();
        let keys: Vec<&String> = wire["paused"][0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "id",
                "when",
                "call_data",
                "paused_at",
                "repl_sessions",
                "last_poll_at",
                "gone"
            ]
        );
        assert_eq!(wire["paused"][0]["when"], "before");
        assert_eq!(
            wire["paused"][0]["gone"], false,
            "a pause just made is not gone"
        );
    }

    #[test]
    fn modify_encodes_plain_values_as_pickles_for_the_client() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[json!(1)]);
        assert_eq!(poll(&s, &pause_id), json!({"status": "waiting"}));
        let rx = s.bus.subscribe();
        let done = continue_pause(
            &s,
            &pause_id,
            &body(
                json!({"action": "modify", "modified_args": [10], "modified_kwargs": {"y": "z"}}),
            ),
            crate::resolution::Actor::Rest,
        )
        .unwrap();
        assert_eq!(done.action, "modify");
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            json!({"status": "ok", "pause_id": pause_id}),
            "the action is not part of the REST answer"
        );
        assert!(matches!(
            *rx.try_recv().unwrap().kind,
            EventKind::ExecutionResumed { .. }
        ));
        let ready = poll(&s, &pause_id);
        assert_eq!(ready["status"], "ready");
        let action = &ready["action"];
        assert_eq!(action["action"], "modify");
        let expected = item(&json!(10));
        assert_eq!(action["modified_args"][0]["cid"], expected["cid"]);
        assert_eq!(action["modified_args"][0]["serialization_format"], "dill");
        assert!(
            s.store
                .contains(action["modified_kwargs"]["y"]["cid"].as_str().unwrap()),
            "the encoded payloads are stored"
        );
        assert!(paused(&s, Payloads::Omitted).paused.is_empty());
    }

    #[test]
    fn resuming_twice_unknown_pauses_and_bad_actions_are_refused() {
        let s = shared();
        let e = continue_pause(&s, "nope", &body(json!({})), crate::resolution::Actor::Rest)
            .unwrap_err();
        assert_eq!((e.status, e.code()), (404, "pause_not_found"));
        let (pause_id, call_id) = paused_call(&s, "f", &[]);
        let bad = |b: Value| {
            continue_pause(&s, &pause_id, &body(b), crate::resolution::Actor::Rest).unwrap_err()
        };
        assert_eq!(bad(json!({"action": "fly"})).code(), "invalid_action");
        assert_eq!(
            bad(json!({"action": "raise", "exception_type": "a.B"})).code(),
            "invalid_exception_type"
        );
        assert_eq!(
            bad(json!({"modified_args": {"x": 1}})).code(),
            "invalid_payload"
        );
        let done = continue_pause(
            &s,
            &pause_id,
            &body(json!({"replacement_function": "g"})),
            crate::resolution::Actor::Rest,
        )
        .unwrap();
        assert_eq!(done.action, "replace");
        let e = continue_pause(
            &s,
            &pause_id,
            &body(json!({})),
            crate::resolution::Actor::Rest,
        )
        .unwrap_err();
        assert_eq!((e.status, e.code()), (409, "pause_already_resumed"));
        // An after-pause can only continue.
        let after =
            crate::service::testing::complete(&s, &complete_body(&call_id, &json!(0))).unwrap();
        let after_id = after["poll_url"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        let e = continue_pause(
            &s,
            after_id,
            &body(json!({"action": "skip", "fake_result": 1})),
            crate::resolution::Actor::Rest,
        )
        .unwrap_err();
        assert_eq!(e.code(), "invalid_action");
        continue_pause(
            &s,
            after_id,
            &body(json!({"action": "continue"})),
            crate::resolution::Actor::Rest,
        )
        .unwrap();
    }

    #[test]
    fn original_items_carry_their_payloads() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[json!([1, 2])]);
        let original = original_items(&s, &pause_id).unwrap();
        assert_eq!(original.args.len(), 1);
        assert_eq!(original.args[0]["cid"], item(&json!([1, 2]))["cid"]);
        assert!(original.args[0]["data"].is_string());
        assert!(original.kwargs.is_empty());
        assert_eq!(original_items(&s, "nope"), None);
    }
}
