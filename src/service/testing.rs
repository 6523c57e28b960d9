//! What the service sections' unit tests share: an in-memory `Shared` (as `state.rs`'s tests
//! build it), protocol bodies as the Python client sends them, and paused calls.

use serde_json::{json, Value};

use super::Obj;
use crate::cas;
use crate::config::Config;
use crate::pickle_write;
use crate::state::{Shared, State};
use crate::store::Store;

/// `call_start` on a body given as a JSON object (parsed as the route parses it).
pub fn start(shared: &Shared, body: &Obj) -> Result<Value, crate::error::ApiError> {
    let text = serde_json::to_vec(body).expect("a JSON body");
    super::call_start(shared, &crate::node::Node::parse(&text).expect("parses"))
}

/// `call_complete` on a body given as a JSON object (parsed as the route parses it).
pub fn complete(shared: &Shared, body: &Obj) -> Result<Value, crate::error::ApiError> {
    let text = serde_json::to_vec(body).expect("a JSON body");
    super::call_complete(shared, &crate::node::Node::parse(&text).expect("parses"))
}

/// A fresh in-memory server state.
pub fn shared() -> Shared {
    let config = Config::for_tests("/nonexistent/port".into());
    Shared::new(config, Store::memory(), State::default())
}

/// A JSON object literal as a request body.
pub fn body(v: Value) -> Obj {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// A dill item carrying its pickle (as the client sends a value the first time).
pub fn item(value: &Value) -> Value {
    let bytes = pickle_write::dumps(value);
    json!({"cid": cas::cid_of(&bytes), "data": cas::encode_base64(&bytes)})
}

/// A `/api/call/start` body with these positional arguments.
pub fn start_body(method: &str, args: &[Value]) -> Obj {
    let args: Vec<Value> = args.iter().map(item).collect();
    body(json!({
        "method_name": method,
        "args": args,
        "kwargs": {},
        "process_pid": 4242,
        "process_start_time": 1795311683.5,
        "signature": "(x, y=1)",
    }))
}

/// Starts a call of `method` that pauses before it runs (a breakpoint is added first):
/// its pause id and call id.
pub fn paused_call(shared: &Shared, method: &str, args: &[Value]) -> (String, String) {
    super::breakpoint_add(shared, &body(json!({"function_name": method}))).unwrap();
    let answer = start(shared, &start_body(method, args)).unwrap();
    assert_eq!(answer["action"], "poll", "{answer}");
    let pause_id = answer["poll_url"]
        .as_str()
        .and_then(|u| u.strip_prefix("/api/poll/"))
        .expect("a poll url")
        .to_owned();
    (pause_id, answer["call_id"].as_str().unwrap().to_owned())
}

/// A `/api/call/complete` body of a successful call returning `result`.
pub fn complete_body(call_id: &str, result: &Value) -> Obj {
    let r = item(result);
    body(json!({
        "call_id": call_id, "timestamp": 1795311690.5, "status": "success",
        "process_pid": 4242, "process_start_time": 1795311683.5,
        "result_cid": r["cid"], "result_data": r["data"],
    }))
}
