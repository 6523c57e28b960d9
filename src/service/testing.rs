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
    super::call_start(
        shared,
        &crate::node::JsonNode::parse(&text).expect("parses"),
    )
}

/// `call_complete` on a body given as a JSON object (parsed as the route parses it).
pub fn complete(shared: &Shared, body: &Obj) -> Result<Value, crate::error::ApiError> {
    let text = serde_json::to_vec(body).expect("a JSON body");
    super::call_complete(
        shared,
        &crate::node::JsonNode::parse(&text).expect("parses"),
    )
}

/// A fresh in-memory server state.
pub fn shared() -> Shared {
    let config = Config::for_tests("/nonexistent/port".into());
    Shared::new(config, Store::memory(), State::default())
}

/// A fresh server state with a database file (removed on drop) and a window of `max_records`.
pub struct Durable {
    pub shared: Shared,
    dir: std::path::PathBuf,
}

impl Durable {
    pub fn new(max_records: usize) -> Durable {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cideldill-service-test-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            crate::ids::random_hex(8)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let (store, _) = Store::open(&dir.join("test.db")).expect("a database file");
        let mut config = Config::for_tests(dir.join("port"));
        config.max_records = max_records;
        let mut state = State::default();
        state.records =
            crate::records::Records::new(max_records, crate::limits::DEFAULT_MAX_RECORDS_BYTES);
        Durable {
            shared: Shared::new(config, store, state),
            dir,
        }
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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

/// Markup a page must show as text: every page test feeds it through each field it shows.
pub const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

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

/// Resumes a pause with `continue`, as a REST request without a body would.
pub fn resume(shared: &Shared, pause_id: &str) {
    super::continue_pause(
        shared,
        pause_id,
        &Obj::new(),
        crate::resolution::Actor::Rest,
    )
    .unwrap();
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
