//! The REST API for the UI and agents (protocol doc §5.4, §2.1 to §2.3, §2.10), one or more
//! tests per row of the table, plus the transport conventions of §1 (JSON errors, CORS, 405 with
//! Allow), the continue request with every action and error code, the REPL relay driven by a
//! simulated debugged program, and the server's own extensions (call records, objects, status).
//! Every test starts its own in-memory server; every wait has a deadline.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cideldill_server::cas::{cid_of, decode_base64_lenient};
use cideldill_server::limits::MAX_CLOSED_REPL_SESSIONS;
use cideldill_server::pickle_write::dumps;
use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{
    call_start_body, complete_body, deadline, item, pause_id, wait_for, Client, Resp, Server,
};

const PID: i64 = 16759;
const PROCESS_KEY: &str = "1795311683.721166+16759";

// ---------------------------------------------------------------------------------------------
// Helpers.

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn text(r: &Resp) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Asserts an error answer: status and `error` code; returns the body.
fn expect_error(r: &Resp, status: u16, code: &str) -> Value {
    assert_eq!(
        r.status,
        status,
        "expected {status} {code}, got: {}",
        text(r)
    );
    let body = r.json();
    assert_eq!(body["error"], code, "{body}");
    body
}

/// Adds a breakpoint the way the Python client does at registration.
fn add_breakpoint(c: &Client, name: &str) {
    let r = c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": name, "timestamp": 1795311683.5, "signature": "(x, y=1)"}),
    );
    assert_eq!(r["status"], "ok");
}

/// Starts a call of `method` with one integer argument; returns the answer.
fn start_call(c: &Client, method: &str, arg: i64) -> Value {
    c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(arg), 2)], json!({})),
    )
}

fn call_id(answer: &Value) -> String {
    answer["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no call_id: {answer}"))
        .to_owned()
}

/// A before-pause of `method`: adds the breakpoint, starts a call. Returns (call_id, pause_id).
fn pause_before(c: &Client, method: &str) -> (String, String) {
    add_breakpoint(c, method);
    let answer = start_call(c, method, 1);
    assert_eq!(answer["action"], "poll", "{answer}");
    (call_id(&answer), pause_id(&answer))
}

/// An after-pause of `method` (before-pause continued, call completed with result 3).
fn pause_after(c: &Client, method: &str) -> String {
    let (call, before) = pause_before(c, method);
    c.post_ok(&continue_url(&before), &json!({"action": "continue"}));
    let answer = c.post_ok("/api/call/complete", &complete_body(&call, &json!(3)));
    assert_eq!(answer["action"], "poll", "{answer}");
    assert!(
        answer.get("call_id").is_none(),
        "an after-pause answer has no call_id: {answer}"
    );
    pause_id(&answer)
}

/// Runs a whole call that does not pause: start, then complete with `result`.
fn run_call(c: &Client, method: &str, result: i64) -> String {
    let answer = start_call(c, method, result);
    assert_eq!(answer["action"], "continue", "{answer}");
    let id = call_id(&answer);
    assert_eq!(
        c.post_ok("/api/call/complete", &complete_body(&id, &json!(result))),
        json!({"status": "ok"})
    );
    id
}

fn continue_url(pause: &str) -> String {
    format!("/api/paused/{pause}/continue")
}

/// The stored action of a resumed pause, as its poll shows it.
fn polled_action(c: &Client, pause: &str) -> Value {
    let r = c.get_ok(&format!("/api/poll/{pause}"));
    assert_eq!(r["status"], "ready", "{r}");
    r["action"].clone()
}

fn is_paused(c: &Client, pause: &str) -> bool {
    c.get_ok("/api/paused")["paused"]
        .as_array()
        .expect("paused list")
        .iter()
        .any(|p| p["id"] == pause)
}

/// Asserts the pause is still paused and unresumed (after a refused continue).
fn assert_still_paused(c: &Client, pause: &str) {
    assert!(is_paused(c, pause), "pause {pause} should still be paused");
    assert_eq!(
        c.get_ok(&format!("/api/poll/{pause}")),
        json!({"status": "waiting"})
    );
}

/// Asserts `item` is the dill item of the plain JSON value `v`.
fn assert_dill_item(item: &Value, v: &Value) {
    assert_eq!(item["serialization_format"], "dill", "{item}");
    let bytes = decode_base64_lenient(item["data"].as_str().expect("data is a string"))
        .expect("data is base64");
    assert_eq!(bytes, dumps(v), "pickle of {v} in {item}");
    assert_eq!(item["cid"], cid_of(&bytes).as_str(), "{item}");
}

fn start_session(c: &Client, pause: &str) -> String {
    let r = c.post_ok("/api/repl/start", &json!({"pause_id": pause}));
    r["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id: {r}"))
        .to_owned()
}

fn session(c: &Client, sid: &str) -> Value {
    c.get_ok(&format!("/api/repl/{sid}"))["session"].clone()
}

/// Posts an eval from another thread (it blocks until the program answers).
fn eval_in_background(c: Client, sid: &str, expr: &str) -> mpsc::Receiver<Resp> {
    let (tx, rx) = mpsc::channel();
    let path = format!("/api/repl/{sid}/eval");
    let body = json!({"expr": expr});
    thread::spawn(move || {
        let _ = tx.send(c.post(&path, &body));
    });
    rx
}

fn eval_answer(rx: &mpsc::Receiver<Resp>) -> Resp {
    rx.recv_timeout(deadline())
        .expect("the eval answered in time")
}

/// The simulated program: polls `/api/poll-repl/<pause>` until an eval is handed out.
fn next_eval(c: &Client, pause: &str) -> Value {
    wait_for("an eval queued for the program", || {
        let r = c.get_ok(&format!("/api/poll-repl/{pause}"));
        (!r["eval_id"].is_null()).then_some(r)
    })
}

/// The program's answer to `eval`, as the Python client sends it.
fn repl_result(eval: &Value, result: &str, error: Value) -> Value {
    json!({"eval_id": eval["eval_id"], "pause_id": eval["pause_id"], "session_id": eval["session_id"],
           "result": result, "stdout": "", "error": error, "result_cid": null, "result_data": null})
}

fn ids(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|e| e[key].as_str().unwrap_or_default().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Transport conventions (§1).

#[test]
fn malformed_json_body_is_400_invalid_json() {
    let s = Server::start(&[]);
    let c = s.client();
    expect_error(
        &c.request("POST", "/api/breakpoints", Some(b"{\"function_name\": ")),
        400,
        "invalid_json",
    );
    let (_, pause) = pause_before(&c, "m");
    expect_error(
        &c.request("POST", &continue_url(&pause), Some(b"{oops")),
        400,
        "invalid_json",
    );
    assert_still_paused(&c, &pause);
}

#[test]
fn non_object_body_is_400_invalid_body() {
    let s = Server::start(&[]);
    let c = s.client();
    for body in ["[1, 2]", "\"add\"", "42", "null"] {
        expect_error(
            &c.request("POST", "/api/breakpoints", Some(body.as_bytes())),
            400,
            "invalid_body",
        );
    }
    assert_eq!(c.get_ok("/api/breakpoints")["breakpoints"], json!([]));
}

#[test]
fn unknown_routes_answer_404_json_not_found() {
    let s = Server::start(&[]);
    let c = s.client();
    for path in [
        "/api/nope",
        "/api/breakpoints/a/b/c",
        "/api/poll/",
        "/nope",
        "/static/app.js",
    ] {
        expect_error(&c.get(path), 404, "not_found");
    }
    expect_error(&c.post("/api/nope", &json!({})), 404, "not_found");
}

#[test]
fn wrong_method_answers_405_with_an_allow_header() {
    let s = Server::start(&[]);
    let c = s.client();
    let allowed = |r: &Resp| -> Vec<String> {
        let mut v: Vec<String> = r
            .header("Allow")
            .expect("Allow header")
            .split(',')
            .map(|m| m.trim().to_owned())
            .collect();
        v.sort();
        v
    };
    let r = c.request("PUT", "/api/breakpoints", Some(b"{}"));
    expect_error(&r, 405, "method_not_allowed");
    assert_eq!(allowed(&r), ["GET", "POST"]);
    let r = c.get("/api/call/start");
    expect_error(&r, 405, "method_not_allowed");
    assert_eq!(allowed(&r), ["POST"]);
    let r = c.post("/api/breakpoints/f", &json!({}));
    expect_error(&r, 405, "method_not_allowed");
    assert_eq!(allowed(&r), ["DELETE"]);
}

#[test]
fn options_answers_200_on_routes_and_204_elsewhere_with_cors_only_where_open() {
    let s = Server::start(&[]);
    let c = s.client();
    for (path, status, open) in [
        ("/api/breakpoints", 200, false),
        ("/api/paused/x/continue", 200, false),
        ("/api/call/start", 200, true),
        ("/api/poll/x", 200, true),
        ("/api/nope", 204, false),
        ("/api/", 204, false),
    ] {
        let r = c.request("OPTIONS", path, None);
        assert_eq!(r.status, status, "OPTIONS {path}: {}", text(&r));
        assert!(
            r.body.is_empty(),
            "OPTIONS {path} has an empty body: {}",
            text(&r)
        );
        if open {
            assert_cors(&r, path);
        } else {
            assert_eq!(r.header("Access-Control-Allow-Origin"), None, "{path}");
        }
    }
}

fn assert_cors(r: &Resp, what: &str) {
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"), "{what}");
    assert_eq!(
        r.header("Access-Control-Allow-Headers"),
        Some("Content-Type"),
        "{what}"
    );
    assert_eq!(
        r.header("Access-Control-Allow-Methods"),
        Some("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
        "{what}"
    );
}

#[test]
fn browser_client_endpoints_carry_cors_headers_and_other_paths_do_not() {
    let s = Server::start(&[]);
    let c = s.client();
    let open = [
        (
            "POST /api/call/start {}",
            c.post("/api/call/start", &json!({})),
        ),
        ("GET /api/poll/zz", c.get("/api/poll/zz")),
        ("GET /api/poll-repl/zz", c.get("/api/poll-repl/zz")),
        (
            "malformed call/complete",
            c.request("POST", "/api/call/complete", Some(b"{")),
        ),
    ];
    for (what, r) in &open {
        assert_cors(r, what);
        assert_eq!(r.header("Content-Type"), Some("application/json"), "{what}");
    }
    let guarded = [
        ("GET /api/breakpoints", c.get("/api/breakpoints")),
        (
            "POST /api/breakpoints {}",
            c.post("/api/breakpoints", &json!({})),
        ),
        ("GET /api/nope", c.get("/api/nope")),
        (
            "POST /api/paused/zz/continue",
            c.post("/api/paused/zz/continue", &json!({})),
        ),
        ("GET /api/openapi.json", c.get("/api/openapi.json")),
        ("GET /openapi.json", c.get("/openapi.json")),
        ("GET /", c.get("/")),
        ("GET /nope", c.get("/nope")),
    ];
    for (what, r) in &guarded {
        assert_eq!(r.header("Access-Control-Allow-Origin"), None, "{what}");
        assert_eq!(r.header("Content-Type"), Some("application/json"), "{what}");
    }
}

#[test]
fn python_client_registration_and_completion_get_status_ok() {
    let s = Server::start(&[]);
    let c = s.client();
    let r = c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "add", "timestamp": 1795311683.5, "signature": "(x, y=1)"}),
    );
    assert_eq!(r, json!({"status": "ok", "function_name": "add"}));
    let r = c.post_ok(
        "/api/functions",
        &json!({"function_name": "add", "signature": "(x, y=1)", "function_client_ref": 1}),
    );
    assert_eq!(r["status"], "ok");
    let event = json!({
        "method_name": "with_debug.register", "status": "registered", "timestamp": 1795311683.6,
        "call_site": {"timestamp": 1795311683.6, "stack_trace": []},
        "process_pid": PID, "process_start_time": 1795311683.7211661,
        "pretty_args": [{"__cideldill_placeholder__": true, "summary": "add", "client_ref": 1}],
        "pretty_kwargs": {},
        "pretty_result": {"event": "with_debug_registration", "function_name": "add", "signature": "(x, y=1)",
                          "alias": null, "target_type": "builtins.function"},
    });
    assert_eq!(
        c.post_ok("/api/call/event", &event),
        json!({"status": "ok"})
    );
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let id = call_id(&start_call(&c, "add", 1));
    assert_eq!(
        c.post_ok("/api/call/complete", &complete_body(&id, &json!(2))),
        json!({"status": "ok"})
    );
    // An unknown call id is fine too.
    assert_eq!(
        c.post_ok(
            "/api/call/complete",
            &complete_body("no-such-call", &json!(2))
        ),
        json!({"status": "ok"})
    );
}

// ---------------------------------------------------------------------------------------------
// Breakpoints (§2.1, §2.2, DELETE).

#[test]
fn breakpoints_start_empty() {
    let s = Server::start(&[]);
    assert_eq!(
        s.client().get_ok("/api/breakpoints"),
        json!({"breakpoints": [], "breakpoint_behaviors": {}, "breakpoint_after_behaviors": {}, "breakpoint_replacements": {},
               "breakpoint_conditions": {}, "breakpoint_hit_conditions": {}, "breakpoint_log_messages": {},
               "breakpoint_one_shot": [], "breakpoint_hit_counts": {}, "breakpoint_enabled": {},
               "pausing": true})
    );
}

#[test]
fn adding_a_breakpoint_answers_exactly_status_ok_and_is_idempotent() {
    let s = Server::start(&[]);
    let c = s.client();
    for _ in 0..2 {
        let r = c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": "add", "timestamp": 1.5, "signature": "(x, y=1)"}),
        );
        assert_eq!(r, json!({"status": "ok", "function_name": "add"}));
    }
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "Calc.__call__"}),
    );
    let mut listing = c.get_ok("/api/breakpoints");
    let mut names: Vec<String> = serde_json::from_value(listing["breakpoints"].take()).unwrap();
    names.sort();
    assert_eq!(names, ["Calc.__call__", "add"]);
    assert_eq!(
        listing["breakpoint_behaviors"],
        json!({"add": "yield", "Calc.__call__": "yield"})
    );
    assert_eq!(
        listing["breakpoint_after_behaviors"],
        json!({"add": "yield", "Calc.__call__": "yield"})
    );
    assert_eq!(listing["breakpoint_replacements"], json!({}));
}

#[test]
fn adding_a_breakpoint_applies_a_valid_behavior_and_silently_ignores_an_invalid_one() {
    let s = Server::start(&[]);
    let c = s.client();
    let behaviors = || c.get_ok("/api/breakpoints")["breakpoint_behaviors"].clone();
    assert_eq!(
        c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": "f", "behavior": "bogus"})
        )["status"],
        "ok"
    );
    assert_eq!(behaviors(), json!({"f": "yield"}));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "behavior": "stop"}),
    );
    assert_eq!(behaviors(), json!({"f": "stop"}));
    for ignored in [
        json!("defer"),
        json!("continue"),
        json!("exception"),
        json!(7),
    ] {
        let r = c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": "f", "behavior": ignored}),
        );
        assert_eq!(r, json!({"status": "ok", "function_name": "f"}));
        assert_eq!(
            behaviors(),
            json!({"f": "stop"}),
            "behavior {ignored} is ignored"
        );
    }
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "behavior": "go"}),
    );
    assert_eq!(behaviors(), json!({"f": "go"}));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "behavior": "yield"}),
    );
    assert_eq!(behaviors(), json!({"f": "yield"}));
}

#[test]
fn adding_a_breakpoint_without_function_name_is_400() {
    let s = Server::start(&[]);
    let c = s.client();
    for body in [
        json!({}),
        json!({"function_name": ""}),
        json!({"function_name": 5}),
        json!({"signature": "(x)"}),
    ] {
        assert_eq!(
            c.post_err("/api/breakpoints", &body, 400),
            json!({"error": "function_name required"})
        );
    }
    assert_eq!(c.get_ok("/api/breakpoints")["breakpoints"], json!([]));
}

#[test]
fn adding_a_breakpoint_without_signature_deletes_the_stored_signature() {
    let s = Server::start(&[]);
    let c = s.client();
    let signatures = || c.get_ok("/api/functions")["function_signatures"].clone();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    assert_eq!(signatures(), json!({"f": "(x)"}));
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    assert_eq!(signatures(), json!({}));
    assert_eq!(
        c.get_ok("/api/functions")["functions"],
        json!(["f"]),
        "the function stays registered"
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": ""}),
    );
    assert_eq!(signatures(), json!({}), "an empty signature deletes it too");
}

#[test]
fn deleting_a_breakpoint_clears_its_behaviors_and_replacement_and_is_ok_for_unknown_names() {
    let s = Server::start(&[]);
    let c = s.client();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "g", "signature": "(x)"}),
    );
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "stop"}));
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "exception"}),
    );
    c.post_ok(
        "/api/breakpoints/f/replacement",
        &json!({"replacement_function": "g"}),
    );
    c.post_ok(
        "/api/breakpoints/f/condition",
        &json!({"condition": "args[0] > 1"}),
    );
    c.post_ok("/api/breakpoints", &json!({"function_name": "keep"}));

    let r = c.delete("/api/breakpoints/f");
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(r.json(), json!({"status": "ok", "function_name": "f"}));
    assert_eq!(
        c.get_ok("/api/breakpoints"),
        json!({"breakpoints": ["keep"], "breakpoint_behaviors": {"keep": "yield"},
               "breakpoint_after_behaviors": {"keep": "yield"}, "breakpoint_replacements": {},
               "breakpoint_conditions": {}, "breakpoint_hit_conditions": {}, "breakpoint_log_messages": {},
               "breakpoint_one_shot": [], "breakpoint_hit_counts": {"keep": 0},
               "breakpoint_enabled": {"keep": true}, "pausing": true})
    );
    // Re-created (as the client does at every registration): the old settings are gone.
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    let listing = c.get_ok("/api/breakpoints");
    assert_eq!(listing["breakpoint_behaviors"]["f"], "yield");
    assert_eq!(listing["breakpoint_after_behaviors"]["f"], "yield");
    assert_eq!(listing["breakpoint_replacements"], json!({}));

    for (path, name) in [
        ("/api/breakpoints/never-added", "never-added"),
        ("/api/breakpoints/a%20b", "a b"),
    ] {
        let r = c.delete(path);
        assert_eq!(r.status, 200, "{}", text(&r));
        assert_eq!(r.json(), json!({"status": "ok", "function_name": name}));
    }
    assert_eq!(
        c.delete("/api/breakpoints/f").json(),
        json!({"status": "ok", "function_name": "f"})
    );
    assert_eq!(
        c.delete("/api/breakpoints/f").status,
        200,
        "deleting twice is fine"
    );
}

// ---------------------------------------------------------------------------------------------
// Per-breakpoint behaviors and replacement.

#[test]
fn behavior_accepts_stop_go_yield_and_continue_as_go() {
    let s = Server::start(&[]);
    let c = s.client();
    add_breakpoint(&c, "f");
    for (sent, stored) in [
        ("stop", "stop"),
        ("go", "go"),
        ("yield", "yield"),
        ("continue", "go"),
    ] {
        let r = c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": sent}));
        assert_eq!(
            r,
            json!({"status": "ok", "function_name": "f", "behavior": stored})
        );
        assert_eq!(
            c.get_ok("/api/breakpoints")["breakpoint_behaviors"]["f"],
            stored
        );
    }
    // The behavior decides the before-pause: go runs the call under the global stop...
    assert_eq!(start_call(&c, "f", 1)["action"], "continue");
    // ...and stop pauses it even under the global go.
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "stop"}));
    assert_eq!(start_call(&c, "f", 1)["action"], "poll");
}

#[test]
fn behavior_rejects_defer_before_checking_the_breakpoint() {
    let s = Server::start(&[]);
    let c = s.client();
    let rejected = json!({"error": "behavior must be 'stop', 'go', or 'yield'"});
    assert_eq!(
        c.post_err(
            "/api/breakpoints/missing/behavior",
            &json!({"behavior": "defer"}),
            400
        ),
        rejected
    );
    add_breakpoint(&c, "f");
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "stop"}));
    for body in [
        json!({"behavior": "defer"}),
        json!({"behavior": "default"}),
        json!({"behavior": "breakpoints"}),
        json!({"behavior": "exception"}),
        json!({"behavior": ""}),
        json!({"behavior": 1}),
        json!({}),
    ] {
        assert_eq!(
            c.post_err("/api/breakpoints/f/behavior", &body, 400),
            rejected,
            "{body}"
        );
    }
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_behaviors"]["f"],
        "stop",
        "unchanged"
    );
}

#[test]
fn behavior_on_an_unknown_breakpoint_is_404() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(
        c.post_err(
            "/api/breakpoints/missing/behavior",
            &json!({"behavior": "stop"}),
            404
        ),
        json!({"error": "breakpoint_not_found"})
    );
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoints"],
        json!([]),
        "no breakpoint is created"
    );
}

#[test]
fn after_behavior_accepts_every_value_and_alias_and_answers_the_normalized_name() {
    let s = Server::start(&[]);
    let c = s.client();
    add_breakpoint(&c, "f");
    let cases = [
        ("stop", "stop"),
        ("go", "go"),
        ("exception", "exception"),
        ("stop_exception", "stop_exception"),
        ("yield", "yield"),
        ("breakpoints", "stop"),
        ("stop_at_breakpoints", "stop"),
        ("exceptions", "exception"),
        ("stop_at_exceptions", "exception"),
        ("breakpoints_and_exceptions", "stop_exception"),
        ("stop_at_breakpoints_and_exceptions", "stop_exception"),
        ("both", "stop_exception"),
        ("continue", "go"),
        ("defer", "yield"),
        ("default", "yield"),
    ];
    for (sent, normalized) in cases {
        // Start from something else so each case visibly changes the listing.
        let other = if normalized == "go" { "stop" } else { "go" };
        c.post_ok(
            "/api/breakpoints/f/after_behavior",
            &json!({"behavior": other}),
        );
        let r = c.post_ok(
            "/api/breakpoints/f/after_behavior",
            &json!({"behavior": sent}),
        );
        assert_eq!(
            r,
            json!({"status": "ok", "function_name": "f", "behavior": normalized}),
            "{sent}"
        );
        assert_eq!(
            c.get_ok("/api/breakpoints")["breakpoint_after_behaviors"]["f"],
            normalized,
            "{sent}"
        );
    }
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_behaviors"]["f"],
        "yield",
        "the before-behavior is untouched"
    );
}

#[test]
fn after_behavior_rejects_invalid_or_missing_values_before_checking_the_breakpoint() {
    let s = Server::start(&[]);
    let c = s.client();
    add_breakpoint(&c, "f");
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "exception"}),
    );
    for (name, body) in [
        ("f", json!({"behavior": "sometimes"})),
        ("f", json!({})),
        ("f", json!({"behavior": null})),
        ("missing", json!({"behavior": "sometimes"})),
    ] {
        let r = c.post(&format!("/api/breakpoints/{name}/after_behavior"), &body);
        assert_eq!(r.status, 400, "{name} {body}: {}", text(&r));
        let message = r.json()["message"]
            .as_str()
            .unwrap_or_else(|| panic!("a message: {}", text(&r)))
            .to_owned();
        for value in ["stop", "go", "exception", "stop_exception", "yield"] {
            assert!(
                message.contains(&format!("'{value}'")),
                "the message lists {value}: {message}"
            );
        }
    }
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_after_behaviors"]["f"],
        "exception",
        "unchanged"
    );
}

#[test]
fn after_behavior_on_an_unknown_breakpoint_is_404() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(
        c.post_err(
            "/api/breakpoints/missing/after_behavior",
            &json!({"behavior": "stop"}),
            404
        ),
        json!({"error": "breakpoint_not_found"})
    );
}

/// f and g share the signature "(x)", h has "(x, y)"; f has a breakpoint; nobp has none.
fn replacement_fixture(c: &Client) {
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    for (name, sig) in [("g", "(x)"), ("h", "(x, y)"), ("nobp", "(x)")] {
        c.post_ok(
            "/api/functions",
            &json!({"function_name": name, "signature": sig}),
        );
    }
}

#[test]
fn replacement_with_a_matching_signature_is_set_and_listed() {
    let s = Server::start(&[]);
    let c = s.client();
    replacement_fixture(&c);
    let r = c.post_ok(
        "/api/breakpoints/f/replacement",
        &json!({"replacement_function": "g"}),
    );
    assert_eq!(
        r,
        json!({"status": "ok", "function_name": "f", "replacement_function": "g"})
    );
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_replacements"],
        json!({"f": "g"})
    );
}

#[test]
fn replacement_checks_the_signature_before_the_breakpoint() {
    let s = Server::start(&[]);
    let c = s.client();
    replacement_fixture(&c);
    let mismatch = json!({"error": "signature_mismatch"});
    let not_found = json!({"error": "breakpoint_not_found"});
    let set = |name: &str, to: &str, status: u16| {
        c.post_err(
            &format!("/api/breakpoints/{name}/replacement"),
            &json!({"replacement_function": to}),
            status,
        )
    };
    assert_eq!(set("f", "h", 400), mismatch, "different signatures");
    assert_eq!(
        set("f", "unregistered", 400),
        mismatch,
        "the replacement has no signature"
    );
    assert_eq!(
        set("nobp", "h", 400),
        mismatch,
        "checked before the missing breakpoint"
    );
    assert_eq!(
        set("unknown", "g", 400),
        mismatch,
        "a function without signature, without breakpoint"
    );
    assert_eq!(
        set("nobp", "g", 404),
        not_found,
        "signatures match, no breakpoint"
    );
    // A registration without signature erases f's signature: the check then fails.
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    assert_eq!(set("f", "g", 400), mismatch, "f lost its signature");
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_replacements"],
        json!({})
    );
}

#[test]
fn replacement_is_cleared_by_an_empty_name_or_the_function_itself() {
    let s = Server::start(&[]);
    let c = s.client();
    replacement_fixture(&c);
    let replacements = || c.get_ok("/api/breakpoints")["breakpoint_replacements"].clone();
    for clear in ["", "f"] {
        c.post_ok(
            "/api/breakpoints/f/replacement",
            &json!({"replacement_function": "g"}),
        );
        assert_eq!(replacements(), json!({"f": "g"}));
        let r = c.post_ok(
            "/api/breakpoints/f/replacement",
            &json!({"replacement_function": clear}),
        );
        assert_eq!(
            r,
            json!({"status": "ok", "function_name": "f", "replacement_function": clear})
        );
        assert_eq!(replacements(), json!({}), "cleared by {clear:?}");
    }
    assert_eq!(
        c.post_err(
            "/api/breakpoints/nobp/replacement",
            &json!({"replacement_function": ""}),
            404
        ),
        json!({"error": "breakpoint_not_found"})
    );
}

#[test]
fn a_replacement_answers_replace_when_the_call_does_not_pause() {
    let s = Server::start(&[]);
    let c = s.client();
    replacement_fixture(&c);
    c.post_ok(
        "/api/breakpoints/f/replacement",
        &json!({"replacement_function": "g"}),
    );
    c.post_ok("/api/breakpoints/f/behavior", &json!({"behavior": "go"}));
    let answer = start_call(&c, "f", 1);
    assert_eq!(
        answer,
        json!({"call_id": answer["call_id"], "action": "replace", "function_name": "g"})
    );
    assert!(answer["call_id"].as_str().is_some_and(|id| !id.is_empty()));
}

// ---------------------------------------------------------------------------------------------
// History.

#[test]
fn history_lists_completed_calls_most_recent_first_with_a_limit() {
    let s = Server::start(&[]);
    let c = s.client();
    add_breakpoint(&c, "hist");
    c.post_ok("/api/breakpoints/hist/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints/hist/after_behavior",
        &json!({"behavior": "go"}),
    );

    let mut calls = Vec::new();
    for i in 0..3 {
        let answer = start_call(&c, "hist", i);
        assert_eq!(answer["action"], "continue", "{answer}");
        let id = call_id(&answer);
        let mut body = complete_body(&id, &json!(i));
        body["timestamp"] = json!(1000.0 + i as f64);
        if i == 1 {
            body = json!({"call_id": id, "timestamp": 1001.0, "status": "exception",
                          "process_pid": PID, "process_start_time": 1795311683.7211661,
                          "exception_type": "ValueError", "exception_message": "bad",
                          "exception_traceback": "Traceback (most recent call last):\nValueError: bad\n"});
        }
        assert_eq!(
            c.post_ok("/api/call/complete", &body),
            json!({"status": "ok"})
        );
        calls.push(id);
    }
    // A function without breakpoint has no history.
    run_call(&c, "other", 5);

    let h = c.get_ok("/api/breakpoints/hist/history");
    assert_eq!(h["function_name"], "hist");
    let history = h["history"].as_array().expect("history list");
    assert_eq!(history.len(), 3, "{h}");
    let got: Vec<&str> = history
        .iter()
        .map(|e| e["call_data"]["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        [calls[2].as_str(), calls[1].as_str(), calls[0].as_str()],
        "most recent first"
    );
    for (entry, at) in history.iter().zip([1002.0, 1001.0, 1000.0]) {
        assert_eq!(entry["function_name"], "hist");
        assert_eq!(entry["completed_at"], json!(at));
        assert_eq!(
            entry["id"].as_str().map(str::len),
            Some(36),
            "a UUID4 id: {entry}"
        );
        let data = &entry["call_data"];
        assert_eq!(data["method_name"], "hist");
        assert!(
            data.get("pretty_result").is_some() && data.get("exception").is_some(),
            "{data}"
        );
    }
    assert_eq!(history[0]["call_data"]["status"], "success");
    assert!(history[0]["call_data"]["exception"].is_null());
    assert_eq!(history[1]["call_data"]["status"], "exception");
    assert_eq!(
        history[1]["call_data"]["exception"]["summary"],
        "ValueError: bad"
    );

    let limited = c.get_ok("/api/breakpoints/hist/history?limit=2");
    assert_eq!(
        ids(&limited["history"], "id"),
        ids(&json!(history[..2]), "id")
    );
    assert_eq!(
        c.get_ok("/api/breakpoints/other/history"),
        json!({"function_name": "other", "history": []})
    );

    // Without the breakpoint, calls are no longer added (the old entries stay).
    c.delete("/api/breakpoints/hist");
    run_call(&c, "hist", 9);
    assert_eq!(
        c.get_ok("/api/breakpoints/hist/history")["history"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

// ---------------------------------------------------------------------------------------------
// Global behavior.

#[test]
fn global_behavior_starts_as_stop_and_accepts_every_value_and_alias() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(c.get_ok("/api/behavior"), json!({"behavior": "stop"}));
    let cases = [
        ("go", "go"),
        ("stop", "stop"),
        ("exception", "exception"),
        ("stop_exception", "stop_exception"),
        ("breakpoints", "stop"),
        ("exceptions", "exception"),
        ("stop_at_breakpoints", "stop"),
        ("stop_at_exceptions", "exception"),
        ("breakpoints_and_exceptions", "stop_exception"),
        ("continue", "go"),
        ("stop_at_breakpoints_and_exceptions", "stop_exception"),
        ("both", "stop_exception"),
    ];
    for (sent, normalized) in cases {
        assert_eq!(
            c.post_ok("/api/behavior", &json!({"behavior": sent})),
            json!({"status": "ok", "behavior": normalized})
        );
        assert_eq!(
            c.get_ok("/api/behavior"),
            json!({"behavior": normalized}),
            "{sent}"
        );
    }
}

#[test]
fn global_behavior_rejects_yield() {
    let s = Server::start(&[]);
    let c = s.client();
    c.post_ok("/api/behavior", &json!({"behavior": "exception"}));
    for body in [
        json!({"behavior": "yield"}),
        json!({"behavior": "defer"}),
        json!({"behavior": "nope"}),
        json!({}),
    ] {
        let r = c.post("/api/behavior", &body);
        assert_eq!(r.status, 400, "{body}: {}", text(&r));
        let message = r.json()["message"].as_str().unwrap_or_default().to_owned();
        for value in ["stop", "go", "exception", "stop_exception"] {
            assert!(
                message.contains(&format!("'{value}'")),
                "the message lists {value}: {message}"
            );
        }
        assert!(!message.contains("'yield'"), "{message}");
    }
    assert_eq!(
        c.get_ok("/api/behavior"),
        json!({"behavior": "exception"}),
        "unchanged"
    );
}

// ---------------------------------------------------------------------------------------------
// Functions (§2.3).

#[test]
fn functions_are_listed_sorted_with_signatures_and_metadata() {
    let s = Server::start(&[]);
    let c = s.client();
    let before = now();
    let r = c.post_ok(
        "/api/functions",
        &json!({"function_name": "zeta", "signature": "(x, y=1)", "function_client_ref": 1}),
    );
    assert_eq!(
        r,
        json!({"status": "ok", "function_name": "zeta", "signature": "(x, y=1)"})
    );
    let after = now();
    let r = c.post_ok("/api/functions", &json!({"function_name": "alpha"}));
    assert_eq!(
        r,
        json!({"status": "ok", "function_name": "alpha", "signature": null})
    );

    let f = c.get_ok("/api/functions");
    assert_eq!(f["functions"], json!(["alpha", "zeta"]));
    assert_eq!(f["function_signatures"], json!({"zeta": "(x, y=1)"}));
    let meta = &f["function_metadata"]["zeta"];
    assert_eq!(meta["client_ref"], 1);
    let at = meta["registered_at"]
        .as_f64()
        .unwrap_or_else(|| panic!("registered_at is a float: {meta}"));
    assert!(
        before - 1.0 <= at && at <= after + 1.0,
        "registered_at {at} is now (epoch seconds)"
    );
    assert!(
        f["function_metadata"].get("alpha").is_none(),
        "no metadata without a client ref: {f}"
    );

    // The registration event adds last_process_key.
    let event = json!({
        "method_name": "with_debug.register", "status": "registered", "timestamp": 1795311683.6,
        "call_site": {"timestamp": 1795311683.6, "stack_trace": []},
        "process_pid": PID, "process_start_time": 1795311683.7211661,
        "pretty_result": {"event": "with_debug_registration", "function_name": "zeta"},
    });
    c.post_ok("/api/call/event", &event);
    let meta = c.get_ok("/api/functions")["function_metadata"]["zeta"].clone();
    assert_eq!(meta["last_process_key"], PROCESS_KEY);
    assert_eq!(meta["client_ref"], 1);

    // Re-registering replaces the metadata and a missing signature deletes the stored one.
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "zeta", "function_client_ref": 4}),
    );
    let f = c.get_ok("/api/functions");
    assert_eq!(f["function_signatures"], json!({}));
    assert_eq!(f["function_metadata"]["zeta"]["client_ref"], 4);
    assert!(
        f["function_metadata"]["zeta"]
            .get("last_process_key")
            .is_none(),
        "replaced: {f}"
    );
}

#[test]
fn registering_a_function_without_a_name_is_400() {
    let s = Server::start(&[]);
    let c = s.client();
    for body in [
        json!({}),
        json!({"function_name": ""}),
        json!({"signature": "(x)", "function_client_ref": 1}),
    ] {
        assert_eq!(
            c.post_err("/api/functions", &body, 400),
            json!({"error": "function_name required"})
        );
    }
    assert_eq!(
        c.get_ok("/api/functions"),
        json!({"functions": [], "function_signatures": {}, "function_metadata": {}})
    );
}

// ---------------------------------------------------------------------------------------------
// Paused executions (§5.2).

#[test]
fn paused_lists_before_and_after_pauses_with_their_call_data() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(c.get_ok("/api/paused"), json!({"paused": []}));
    let t0 = now();
    let (call, before) = pause_before(&c, "add");
    let list = c.get_ok("/api/paused")["paused"].clone();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let p = &list[0];
    assert_eq!(p["id"], before.as_str());
    assert_eq!(p["repl_sessions"], json!([]));
    let at = p["paused_at"].as_f64().expect("paused_at is a float");
    assert!(
        at >= t0 - 1.0 && at <= now() + 1.0,
        "paused_at {at} is epoch seconds"
    );
    let data = &p["call_data"];
    assert_eq!(data["method_name"], "add");
    assert_eq!(data["call_id"], call.as_str());
    assert_eq!(data["pause_reason"], "breakpoint");
    assert_eq!(data["process_pid"], PID);
    assert_eq!(data["process_key"], PROCESS_KEY);
    assert_eq!(data["signature"], "(x, y=1)");
    assert_eq!(
        data["args"],
        json!([item(&json!(1), 2)]),
        "the raw items, with data"
    );
    assert_eq!(data["pretty_args"].as_array().map(Vec::len), Some(1));
    assert!(
        data.get("pretty_result").is_none(),
        "a before-pause has no result: {data}"
    );

    let sid = start_session(&c, &before);
    assert_eq!(
        c.get_ok("/api/paused")["paused"][0]["repl_sessions"],
        json!([sid])
    );

    c.post_ok(&continue_url(&before), &json!({"action": "continue"}));
    assert_eq!(c.get_ok("/api/paused"), json!({"paused": []}));
    let answer = c.post_ok("/api/call/complete", &complete_body(&call, &json!(3)));
    let after = pause_id(&answer);
    let list = c.get_ok("/api/paused")["paused"].clone();
    assert_eq!(ids(&list, "id"), [after.as_str()]);
    let data = &list[0]["call_data"];
    assert_eq!(data["call_id"], call.as_str());
    assert_eq!(data["pause_reason"], "breakpoint");
    assert!(
        data.get("pretty_result").is_some(),
        "an after-pause has the result: {data}"
    );
}

// ---------------------------------------------------------------------------------------------
// The continue request (§5.4).

#[test]
fn continue_releases_the_poll_and_removes_the_pause() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    assert_eq!(
        c.get_ok(&format!("/api/poll/{pause}")),
        json!({"status": "waiting"})
    );
    let r = c.post_ok(&continue_url(&pause), &json!({"action": "continue"}));
    assert_eq!(r, json!({"status": "ok", "pause_id": pause}));
    for _ in 0..2 {
        assert_eq!(
            c.get_ok(&format!("/api/poll/{pause}")),
            json!({"status": "ready", "action": {"action": "continue"}}),
            "idempotent"
        );
    }
    assert!(!is_paused(&c, &pause));

    // Without a body (or without an action) the action is continue.
    let answer = start_call(&c, "m", 2);
    let second = pause_id(&answer);
    let r = c.request("POST", &continue_url(&second), None);
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(polled_action(&c, &second), json!({"action": "continue"}));
    let third = pause_id(&start_call(&c, "m", 3));
    c.post_ok(&continue_url(&third), &json!({"action": null}));
    assert_eq!(polled_action(&c, &third), json!({"action": "continue"}));
}

#[test]
fn continue_on_an_unknown_pause_is_404_pause_not_found() {
    let s = Server::start(&[]);
    let c = s.client();
    let unknown = "0b0e5d43-5a8c-4f4e-9b8a-3f2d1c0b9a87";
    let body = expect_error(
        &c.post(&continue_url(unknown), &json!({"action": "continue"})),
        404,
        "pause_not_found",
    );
    assert_eq!(body["pause_id"], unknown);
    // Nothing was stored under that id.
    assert_eq!(
        c.get_ok(&format!("/api/poll/{unknown}")),
        json!({"status": "waiting"})
    );
}

#[test]
fn continue_twice_is_409_pause_already_resumed() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    c.post_ok(
        &continue_url(&pause),
        &json!({"action": "skip", "fake_result": 1}),
    );
    for body in [
        json!({"action": "continue"}),
        json!({"action": "skip", "fake_result": 2}),
    ] {
        let err = expect_error(
            &c.post(&continue_url(&pause), &body),
            409,
            "pause_already_resumed",
        );
        assert_eq!(err["pause_id"], pause.as_str());
    }
    assert_eq!(
        polled_action(&c, &pause)["fake_result"],
        1,
        "the first action is kept"
    );
}

#[test]
fn continue_on_an_unknown_but_polled_pause_accepts_only_continue() {
    let s = Server::start(&[]);
    let c = s.client();
    // A pause from before a restart: its client keeps polling it.
    let orphan = "5d1f3c1e-8f0e-4e55-a0d8-6c1b2a3d4e5f";
    assert_eq!(
        c.get_ok(&format!("/api/poll/{orphan}")),
        json!({"status": "waiting"})
    );
    for body in [
        json!({"action": "skip", "fake_result": 1}),
        json!({"action": "modify", "modified_args": []}),
        json!({"action": "continue", "replacement_function": "other"}),
    ] {
        expect_error(&c.post(&continue_url(orphan), &body), 400, "invalid_action");
    }
    assert_eq!(
        c.get_ok(&format!("/api/poll/{orphan}")),
        json!({"status": "waiting"})
    );
    assert_eq!(
        c.post_ok(&continue_url(orphan), &json!({"action": "continue"})),
        json!({"status": "ok", "pause_id": orphan})
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll/{orphan}")),
        json!({"status": "ready", "action": {"action": "continue"}})
    );
    expect_error(
        &c.post(&continue_url(orphan), &json!({"action": "continue"})),
        409,
        "pause_already_resumed",
    );
}

#[test]
fn modify_encodes_plain_values_as_dill_items_and_passes_items_through() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let reused = json!({"cid": item(&json!(1), 2)["cid"], "client_ref": 2});
    let nested = json!({"a": [1, 2.5, null, true], "b": "é"});
    let body = json!({
        "action": "modify",
        "modified_args": [10, "text", reused, nested],
        "modified_kwargs": {"y": 3, "z": reused},
    });
    assert_eq!(
        c.post_ok(&continue_url(&pause), &body),
        json!({"status": "ok", "pause_id": pause})
    );
    let action = polled_action(&c, &pause);
    let mut keys: Vec<&String> = action.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["action", "modified_args", "modified_kwargs"],
        "{action}"
    );
    assert_eq!(action["action"], "modify");
    let args = &action["modified_args"];
    assert_eq!(args.as_array().map(Vec::len), Some(4), "{action}");
    assert_eq!(
        args[0]["data"], "gARLCi4=",
        "pickle protocol 4 of 10, as the protocol doc shows"
    );
    assert_dill_item(&args[0], &json!(10));
    assert_dill_item(&args[1], &json!("text"));
    assert_eq!(args[2], reused, "an item passes through untouched");
    assert_dill_item(&args[3], &nested);
    assert_dill_item(&action["modified_kwargs"]["y"], &json!(3));
    assert_eq!(action["modified_kwargs"]["z"], reused);
    assert_eq!(action["modified_kwargs"].as_object().unwrap().len(), 2);
    // The encoded values are stored like any item.
    let stored = c.get_ok(&format!(
        "/api/objects/{}",
        args[3]["cid"].as_str().unwrap()
    ));
    assert_eq!(stored["format"], "dill");
    assert!(!is_paused(&c, &pause));
}

#[test]
fn continue_encodes_for_a_json_client_as_json_items() {
    let s = Server::start(&[]);
    let c = s.client();
    add_breakpoint(&c, "m");
    let arg =
        json!({"cid": cid_of(b"1"), "client_ref": 2, "data": "1", "serialization_format": "json"});
    let mut body = call_start_body("m", vec![arg], json!({}));
    body["preferred_format"] = json!("json");
    body["target"] = Value::Null;
    let pause = pause_id(&c.post_ok("/api/call/start", &body));
    c.post_ok(
        &continue_url(&pause),
        &json!({"action": "modify", "modified_args": [[1, 2]], "modified_kwargs": {}}),
    );
    let action = polled_action(&c, &pause);
    let item = &action["modified_args"][0];
    assert_eq!(item["serialization_format"], "json", "{action}");
    let data = item["data"].as_str().expect("JSON text");
    assert_eq!(serde_json::from_str::<Value>(data).unwrap(), json!([1, 2]));
    assert_eq!(item["cid"], cid_of(data.as_bytes()).as_str());
    assert_eq!(action["modified_kwargs"], json!({}));
}

#[test]
fn skip_encodes_a_plain_fake_result_as_dill() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let fake = json!({"total": 3, "items": ["a", "b"]});
    c.post_ok(
        &continue_url(&pause),
        &json!({"action": "skip", "fake_result": fake}),
    );
    let action = polled_action(&c, &pause);
    let mut keys: Vec<&String> = action.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "action",
            "fake_result",
            "fake_result_cid",
            "fake_result_data",
            "fake_result_serialization_format"
        ],
        "{action}"
    );
    assert_eq!(action["action"], "skip");
    assert_eq!(
        action["fake_result"], fake,
        "the raw value is copied through"
    );
    let encoded = json!({"cid": action["fake_result_cid"], "data": action["fake_result_data"],
                         "serialization_format": action["fake_result_serialization_format"]});
    assert_dill_item(&encoded, &fake);
}

#[test]
fn skip_passes_fake_result_data_through() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    c.post_ok(
        &continue_url(&pause),
        &json!({"action": "skip", "fake_result_data": "gARLCi4="}),
    );
    assert_eq!(
        polled_action(&c, &pause),
        json!({"action": "skip", "fake_result_data": "gARLCi4="})
    );
}

#[test]
fn raise_stores_a_builtin_exception_type_and_message() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let body = json!({"action": "raise", "exception_type": "ValueError", "exception_message": "bad input",
                      "exception": "ValueError: bad input"});
    c.post_ok(&continue_url(&pause), &body);
    assert_eq!(polled_action(&c, &pause), body);
}

#[test]
fn raise_rejects_a_dotted_exception_type() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    for t in [
        "mymod.CustomErr",
        "Value Error",
        "",
        "1Error",
        "ValueError()",
    ] {
        let body = json!({"action": "raise", "exception_type": t, "exception_message": "x"});
        expect_error(
            &c.post(&continue_url(&pause), &body),
            400,
            "invalid_exception_type",
        );
    }
    let body = json!({"action": "raise", "exception_type": "ValueError", "exception_message": 5});
    expect_error(
        &c.post(&continue_url(&pause), &body),
        400,
        "invalid_payload",
    );
    assert_still_paused(&c, &pause);
    c.post_ok(
        &continue_url(&pause),
        &json!({"action": "raise", "exception_type": "_Private2"}),
    );
    assert_eq!(
        polled_action(&c, &pause),
        json!({"action": "raise", "exception_type": "_Private2"})
    );
}

#[test]
fn a_replacement_function_turns_any_action_into_replace() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, first) = pause_before(&c, "m");
    c.post_ok(
        &continue_url(&first),
        &json!({"action": "continue", "replacement_function": "other_m"}),
    );
    assert_eq!(
        polled_action(&c, &first),
        json!({"action": "replace", "function_name": "other_m"})
    );

    let second = pause_id(&start_call(&c, "m", 2));
    c.post_ok(
        &continue_url(&second),
        &json!({"action": "skip", "replacement_function": "other_m"}),
    );
    assert_eq!(
        polled_action(&c, &second),
        json!({"action": "replace", "function_name": "other_m"})
    );

    let third = pause_id(&start_call(&c, "m", 3));
    c.post_ok(
        &continue_url(&third),
        &json!({"action": "continue", "replacement_function": ""}),
    );
    assert_eq!(
        polled_action(&c, &third),
        json!({"action": "continue"}),
        "an empty replacement is no replacement"
    );
}

#[test]
fn unknown_actions_are_400_invalid_action_and_leave_the_pause_paused() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    for action in [
        json!("explode"),
        json!("poll"),
        json!("CONTINUE"),
        json!(5),
        json!({"action": "continue"}),
    ] {
        expect_error(
            &c.post(&continue_url(&pause), &json!({"action": action})),
            400,
            "invalid_action",
        );
    }
    assert_still_paused(&c, &pause);
}

#[test]
fn modified_args_must_be_a_list_and_modified_kwargs_an_object() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    for body in [
        json!({"action": "modify", "modified_args": {"x": 1}}),
        json!({"action": "modify", "modified_args": "1, 2"}),
        json!({"action": "modify", "modified_args": [], "modified_kwargs": [1]}),
        json!({"action": "modify", "modified_kwargs": "y=1"}),
    ] {
        expect_error(
            &c.post(&continue_url(&pause), &body),
            400,
            "invalid_payload",
        );
    }
    assert_still_paused(&c, &pause);
}

#[test]
fn after_pauses_accept_only_continue() {
    let s = Server::start(&[]);
    let c = s.client();
    let after = pause_after(&c, "m");
    for body in [
        json!({"action": "skip", "fake_result": 1}),
        json!({"action": "modify", "modified_args": [1]}),
        json!({"action": "raise", "exception_type": "ValueError"}),
        json!({"action": "replace"}),
        json!({"action": "continue", "replacement_function": "other"}),
    ] {
        expect_error(&c.post(&continue_url(&after), &body), 400, "invalid_action");
    }
    assert_still_paused(&c, &after);
    assert_eq!(
        c.post_ok(&continue_url(&after), &json!({"action": "continue"})),
        json!({"status": "ok", "pause_id": after})
    );
    assert_eq!(polled_action(&c, &after), json!({"action": "continue"}));
    assert_eq!(c.get_ok("/api/paused"), json!({"paused": []}));
}

// ---------------------------------------------------------------------------------------------
// REPL sessions (§2.7, §2.8, §5.4).

#[test]
fn repl_start_requires_a_pause_id() {
    let s = Server::start(&[]);
    let c = s.client();
    for body in [
        json!({}),
        json!({"pause_id": ""}),
        json!({"pause_id": "  "}),
        json!({"pause_id": 5}),
    ] {
        expect_error(&c.post("/api/repl/start", &body), 400, "missing_pause_id");
    }
}

#[test]
fn repl_start_on_an_unknown_pause_is_404() {
    let s = Server::start(&[]);
    let c = s.client();
    expect_error(
        &c.post("/api/repl/start", &json!({"pause_id": "no-such-pause"})),
        404,
        "pause_not_found",
    );
    // A completed call's pause is gone too.
    add_breakpoint(&c, "m");
    let answer = start_call(&c, "m", 1);
    let pause = pause_id(&answer);
    c.post_ok(&continue_url(&pause), &json!({}));
    c.post_ok(
        "/api/breakpoints/m/after_behavior",
        &json!({"behavior": "go"}),
    );
    c.post_ok(
        "/api/call/complete",
        &complete_body(&call_id(&answer), &json!(1)),
    );
    expect_error(
        &c.post("/api/repl/start", &json!({"pause_id": pause})),
        404,
        "pause_not_found",
    );
}

#[test]
fn repl_start_on_a_resumed_pause_is_409_pause_resumed() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    c.post_ok(&continue_url(&pause), &json!({"action": "continue"}));
    expect_error(
        &c.post("/api/repl/start", &json!({"pause_id": pause})),
        409,
        "pause_resumed",
    );
}

#[test]
fn repl_start_opens_a_session_shown_with_its_pause_and_call() {
    let s = Server::start(&[]);
    let c = s.client();
    let (call, pause) = pause_before(&c, "m");
    let t0 = now();
    let sid = start_session(&c, &pause);
    assert!(
        sid.starts_with(&format!("{PID}-")),
        "session ids are <pid>-<started_at>: {sid}"
    );
    let other = start_session(&c, &pause);
    assert_ne!(sid, other, "session ids are unique");

    let session = session(&c, &sid);
    assert_eq!(session["session_id"], sid.as_str());
    assert_eq!(session["pause_id"], pause.as_str());
    assert_eq!(session["pid"], PID);
    assert_eq!(session["function_name"], "m");
    assert_eq!(session["call_id"], call.as_str());
    assert_eq!(session["process_key"], PROCESS_KEY);
    assert_eq!(session["args"], json!([item(&json!(1), 2)]));
    assert_eq!(session["kwargs"], json!({}));
    assert_eq!(session["pretty_args"].as_array().map(Vec::len), Some(1));
    assert_eq!(session["pretty_kwargs"], json!({}));
    assert_eq!(session["signature"], "(x, y=1)");
    assert_eq!(session["closed_at"], Value::Null);
    assert_eq!(session["transcript"], json!([]));
    let started = session["started_at"]
        .as_f64()
        .expect("started_at is a float");
    assert!(
        (t0 - 1.0..=now() + 1.0).contains(&started),
        "started_at {started}"
    );
    assert_eq!(
        sid,
        format!("{PID}-{started:.6}"),
        "the session id is <pid>-<started_at %.6f>"
    );
    assert_eq!(
        c.get_ok("/api/paused")["paused"][0]["repl_sessions"],
        json!([sid, other])
    );
}

#[test]
fn repl_session_unknown_is_404() {
    let s = Server::start(&[]);
    expect_error(
        &s.client().get("/api/repl/123-1.000000"),
        404,
        "session_not_found",
    );
}

#[test]
fn repl_sessions_filter_by_search_status_and_time_newest_first() {
    let s = Server::start(&[]);
    let c = s.client();
    let mut sids = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let (_, pause) = pause_before(&c, name);
        sids.push(start_session(&c, &pause));
    }
    assert_eq!(
        c.post_ok(&format!("/api/repl/{}/close", sids[0]), &json!({})),
        json!({"status": "ok"})
    );
    let list = |query: &str| c.get_ok(&format!("/api/repl/sessions{query}"))["sessions"].clone();
    let at = |idx: &[usize]| {
        idx.iter()
            .map(|&i| sids[i].clone())
            .collect::<Vec<String>>()
    };

    let all = list("");
    assert_eq!(ids(&all, "session_id"), at(&[2, 1, 0]), "newest first");
    assert_eq!(all[2]["function_name"], "alpha");
    assert!(
        all[2]["closed_at"].as_f64().is_some(),
        "closed sessions carry closed_at: {}",
        all[2]
    );
    assert_eq!(all[0]["closed_at"], Value::Null);
    assert_eq!(ids(&list("?search=beta"), "session_id"), at(&[1]));
    assert_eq!(
        ids(&list(&format!("?search={}", sids[2])), "session_id"),
        at(&[2])
    );
    assert_eq!(
        ids(&list("?search=nothing-like-this"), "session_id"),
        Vec::<String>::new()
    );
    assert_eq!(ids(&list("?status=active"), "session_id"), at(&[2, 1]));
    assert_eq!(ids(&list("?status=closed"), "session_id"), at(&[0]));
    let middle = all[1]["started_at"].as_f64().unwrap();
    assert_eq!(
        ids(&list(&format!("?from={middle}")), "session_id"),
        at(&[2, 1])
    );
    assert_eq!(
        ids(&list(&format!("?to={middle}")), "session_id"),
        at(&[1, 0])
    );
    assert_eq!(
        ids(
            &list(&format!("?from={middle}&to={middle}&status=active")),
            "session_id"
        ),
        at(&[1])
    );
    assert_eq!(
        ids(&list("?search=&status=&from=&to="), "session_id").len(),
        3,
        "empty filters are no filters"
    );
}

#[test]
fn repl_sessions_reject_an_invalid_status_or_timestamp() {
    let s = Server::start(&[]);
    let c = s.client();
    expect_error(
        &c.get("/api/repl/sessions?status=open"),
        400,
        "invalid_status",
    );
    expect_error(
        &c.get("/api/repl/sessions?from=yesterday"),
        400,
        "invalid_timestamp",
    );
    expect_error(
        &c.get("/api/repl/sessions?to=12:00"),
        400,
        "invalid_timestamp",
    );
    expect_error(
        &c.get("/api/repl/sessions?from=nan"),
        400,
        "invalid_timestamp",
    );
}

#[test]
fn repl_eval_round_trip_returns_the_program_answer_and_records_it() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{pause}")),
        json!({"eval_id": null})
    );

    let answer = eval_in_background(c, &sid, "1+1");
    let eval = next_eval(&c, &pause);
    assert_eq!(eval["session_id"], sid.as_str());
    assert_eq!(eval["pause_id"], pause.as_str());
    assert_eq!(eval["expr"], "1+1");
    assert_eq!(
        eval["eval_id"].as_str().map(str::len),
        Some(36),
        "a UUID4: {eval}"
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{pause}")),
        json!({"eval_id": null}),
        "handed out once"
    );
    assert_eq!(
        c.post_ok(
            "/api/call/repl-result",
            &repl_result(&eval, "2", Value::Null)
        ),
        json!({"status": "ok"})
    );
    let r = eval_answer(&answer);
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        r.json(),
        json!({"output": "2", "stdout": "", "is_error": false, "result_cid": null})
    );

    // A result with a CID and captured output.
    let value = item(&json!([1, 2]), 7);
    let answer = eval_in_background(c, &sid, "print('hi'); [1, 2]");
    let eval = next_eval(&c, &pause);
    let mut body = repl_result(&eval, "[1, 2]", Value::Null);
    body["stdout"] = json!("hi\n");
    body["result_cid"] = value["cid"].clone();
    body["result_data"] = value["data"].clone();
    c.post_ok("/api/call/repl-result", &body);
    let r = eval_answer(&answer);
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        r.json(),
        json!({"output": "[1, 2]", "stdout": "hi\n", "is_error": false, "result_cid": value["cid"]})
    );

    let transcript = session(&c, &sid)["transcript"].clone();
    assert_eq!(transcript.as_array().map(Vec::len), Some(2), "{transcript}");
    let first = &transcript[0];
    assert!(first["timestamp"].as_f64().is_some(), "{first}");
    assert_eq!(
        first,
        &json!({"index": 0, "input": "1+1", "output": "2", "stdout": "", "is_error": false,
                "result_cid": null, "timestamp": first["timestamp"]})
    );
    assert_eq!(transcript[1]["index"], 1);
    assert_eq!(transcript[1]["input"], "print('hi'); [1, 2]");
    assert_eq!(transcript[1]["result_cid"], value["cid"]);
    assert_eq!(
        c.get_ok("/api/repl/sessions")["sessions"][0]["eval_count"],
        2
    );
}

#[test]
fn repl_eval_reports_program_errors() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let answer = eval_in_background(c, &sid, "x");
    let eval = next_eval(&c, &pause);
    let message = "NameError: name 'x' is not defined";
    c.post_ok(
        "/api/call/repl-result",
        &repl_result(&eval, "", json!(message)),
    );
    let r = eval_answer(&answer);
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        r.json(),
        json!({"output": message, "stdout": "", "is_error": true, "result_cid": null})
    );
    let entry = session(&c, &sid)["transcript"][0].clone();
    assert_eq!(entry["is_error"], true);
    assert_eq!(entry["output"], message);
    assert_eq!(entry["input"], "x");
}

#[test]
fn repl_eval_requires_an_expression() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    for body in [
        json!({}),
        json!({"expr": ""}),
        json!({"expr": "  \n"}),
        json!({"expr": 5}),
        json!({"expr": null}),
    ] {
        expect_error(
            &c.post(&format!("/api/repl/{sid}/eval"), &body),
            400,
            "missing_expr",
        );
    }
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{pause}")),
        json!({"eval_id": null}),
        "nothing was queued"
    );
}

#[test]
fn repl_eval_on_an_unknown_session_is_404() {
    let s = Server::start(&[]);
    let c = s.client();
    expect_error(
        &c.post("/api/repl/999-1.000000/eval", &json!({"expr": "1"})),
        404,
        "session_not_found",
    );
}

#[test]
fn repl_eval_on_a_closed_session_is_409() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    assert_eq!(
        c.post_ok(&format!("/api/repl/{sid}/close"), &json!({})),
        json!({"status": "ok"})
    );
    assert!(session(&c, &sid)["closed_at"].as_f64().is_some());
    expect_error(
        &c.post(&format!("/api/repl/{sid}/eval"), &json!({"expr": "1"})),
        409,
        "session_closed",
    );
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{pause}")),
        json!({"eval_id": null})
    );
    // Resuming the pause closes its sessions too.
    let other = start_session(&c, &pause);
    c.post_ok(&continue_url(&pause), &json!({"action": "continue"}));
    assert!(
        session(&c, &other)["closed_at"].as_f64().is_some(),
        "resuming closes the pause's sessions"
    );
    expect_error(
        &c.post(&format!("/api/repl/{other}/eval"), &json!({"expr": "1"})),
        409,
        "session_closed",
    );
}

#[test]
fn repl_eval_is_released_with_409_when_the_pause_is_resumed_during_the_wait() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let answer = eval_in_background(c, &sid, "slow()");
    let eval = next_eval(&c, &pause);
    // Another thread (here: this one) resumes the pause while the eval waits.
    c.post_ok(&continue_url(&pause), &json!({"action": "continue"}));
    expect_error(&eval_answer(&answer), 409, "session_closed");
    // The program's late answer is refused as closed (the client ignores 409).
    expect_error(
        &c.post(
            "/api/call/repl-result",
            &repl_result(&eval, "1", Value::Null),
        ),
        409,
        "session_closed",
    );
    let session = session(&c, &sid);
    assert!(session["closed_at"].as_f64().is_some(), "{session}");
    assert_eq!(session["transcript"], json!([]));
}

#[test]
fn repl_close_releases_a_waiting_eval_with_409() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let answer = eval_in_background(c, &sid, "slow()");
    let eval = next_eval(&c, &pause);
    assert_eq!(
        c.post_ok(&format!("/api/repl/{sid}/close"), &json!({})),
        json!({"status": "ok"})
    );
    expect_error(&eval_answer(&answer), 409, "session_closed");
    expect_error(
        &c.post(
            "/api/call/repl-result",
            &repl_result(&eval, "1", Value::Null),
        ),
        409,
        "session_closed",
    );
    assert!(
        is_paused(&c, &pause),
        "closing a session does not resume the pause"
    );
}

#[test]
fn repl_close_on_an_unknown_session_is_404() {
    let s = Server::start(&[]);
    expect_error(
        &s.client().post("/api/repl/1-2.000000/close", &json!({})),
        404,
        "session_not_found",
    );
}

// Defect: closed sessions and their transcripts were kept forever.
#[test]
fn only_the_newest_closed_repl_sessions_are_kept_and_a_dropped_one_is_404_on_every_face() {
    let m = McpServer::initialized("2025-11-25");
    let c = m.http();
    let (_, open_pause) = pause_before(&c, "g");
    let open = start_session(&c, &open_pause);
    let (_, pause) = pause_before(&c, "f");
    // One more session than are kept once closed; resuming the pause closes them all.
    let sids: Vec<String> = (0..=MAX_CLOSED_REPL_SESSIONS)
        .map(|_| start_session(&c, &pause))
        .collect();
    c.post_ok(&continue_url(&pause), &json!({"action": "continue"}));
    let (dropped, kept) = (&sids[0], &sids[1]);

    expect_error(
        &c.get(&format!("/api/repl/{dropped}")),
        404,
        "session_not_found",
    );
    expect_error(
        &c.post(&format!("/api/repl/{dropped}/eval"), &json!({"expr": "1"})),
        404,
        "session_not_found",
    );
    expect_error(
        &c.post(&format!("/api/repl/{dropped}/close"), &json!({})),
        404,
        "session_not_found",
    );
    let e = m.call_err(
        "breakpoint_repl_eval",
        json!({"pause_id": pause, "expression": "1", "session_id": dropped}),
    );
    assert_eq!(e["error"], "session_not_found", "{e}");
    let ui = c.request("GET", &format!("/repl/{dropped}"), None);
    assert_eq!(ui.status, 404);
    assert!(ui
        .header("Content-Type")
        .is_some_and(|t| t.starts_with("text/html")));

    assert!(!session(&c, kept)["closed_at"].is_null());
    let closed = c.get_ok("/api/repl/sessions?status=closed")["sessions"].clone();
    let closed = ids(&closed, "session_id");
    assert_eq!(closed.len(), MAX_CLOSED_REPL_SESSIONS);
    assert!(!closed.contains(dropped));
    // Open sessions are never dropped.
    assert!(session(&c, &open)["closed_at"].is_null());
    let active = c.get_ok("/api/repl/sessions?status=active")["sessions"].clone();
    assert_eq!(ids(&active, "session_id"), vec![open]);
}

#[test]
fn repl_eval_times_out_with_504() {
    let s = Server::start(&["--repl-timeout-s", "0.5"]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let started = Instant::now();
    let answer = eval_in_background(c, &sid, "1+1");
    // The program picks the eval up but never answers in time.
    let eval = next_eval(&c, &pause);
    expect_error(&eval_answer(&answer), 504, "eval_timeout");
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "waited the configured 0.5 s"
    );
    expect_error(
        &c.post(
            "/api/call/repl-result",
            &repl_result(&eval, "2", Value::Null),
        ),
        404,
        "eval_not_found",
    );
    let session = session(&c, &sid);
    assert_eq!(session["transcript"], json!([]));
    assert_eq!(
        session["closed_at"],
        Value::Null,
        "a timeout does not close the session"
    );

    // An eval nobody picks up times out too, and leaves the queue.
    let r = c.post(&format!("/api/repl/{sid}/eval"), &json!({"expr": "2+2"}));
    expect_error(&r, 504, "eval_timeout");
    assert_eq!(
        c.get_ok(&format!("/api/poll-repl/{pause}")),
        json!({"eval_id": null})
    );
}

#[test]
fn repl_result_errors_come_in_the_documented_order() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let closed = start_session(&c, &pause);
    c.post_ok(&format!("/api/repl/{closed}/close"), &json!({}));
    let unknown_eval = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    let body = |eval_id: &str, session_id: &str| {
        json!({"eval_id": eval_id, "pause_id": pause, "session_id": session_id, "result": "1",
               "stdout": "", "error": null, "result_cid": null, "result_data": null})
    };
    let post = |b: &Value| c.post("/api/call/repl-result", b);

    expect_error(&post(&json!({})), 400, "missing_fields");
    for key in ["eval_id", "session_id", "pause_id"] {
        let mut b = body(unknown_eval, &sid);
        b.as_object_mut().unwrap().remove(key);
        expect_error(&post(&b), 400, "missing_fields");
    }
    expect_error(
        &post(&body(unknown_eval, "no-such-session")),
        404,
        "session_not_found",
    );
    expect_error(&post(&body(unknown_eval, &closed)), 409, "session_closed");
    expect_error(&post(&body(unknown_eval, &sid)), 404, "eval_not_found");

    // A bad payload is checked last: with an unknown eval it is eval_not_found...
    let ten = item(&json!(10), 5);
    let mut bad = body(unknown_eval, &sid);
    bad["result_cid"] = json!("abc");
    bad["result_data"] = ten["data"].clone();
    expect_error(&post(&bad), 404, "eval_not_found");
    // ...and with a pending eval it is the CID error, after which the eval still waits.
    let answer = eval_in_background(c, &sid, "10");
    let eval = next_eval(&c, &pause);
    bad["eval_id"] = eval["eval_id"].clone();
    let err = expect_error(&post(&bad), 400, "cid_mismatch");
    assert_eq!(err["provided_cid"], "abc");
    assert_eq!(err["expected_cid"], ten["cid"]);
    let mut good = repl_result(&eval, "10", Value::Null);
    good["result_cid"] = ten["cid"].clone();
    good["result_data"] = ten["data"].clone();
    assert_eq!(
        c.post_ok("/api/call/repl-result", &good),
        json!({"status": "ok"})
    );
    let r = eval_answer(&answer);
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(r.json()["output"], "10");
    // Answered once: a second answer finds no eval.
    expect_error(&post(&good), 404, "eval_not_found");
}

#[test]
fn requests_are_served_while_an_eval_blocks() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let sid = start_session(&c, &pause);
    let answer = eval_in_background(c, &sid, "1+1");
    let eval = next_eval(&c, &pause);
    let quick = Duration::from_secs(3);
    for path in [
        format!("/api/poll/{pause}"),
        format!("/api/poll-repl/{pause}"),
        "/api/paused".to_owned(),
        format!("/api/repl/{sid}"),
    ] {
        let started = Instant::now();
        let r = c.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", text(&r));
        assert!(
            started.elapsed() < quick,
            "GET {path} took {:?} while an eval waited",
            started.elapsed()
        );
    }
    assert_eq!(
        c.get_ok(&format!("/api/poll/{pause}")),
        json!({"status": "waiting"})
    );
    assert!(
        matches!(answer.try_recv(), Err(mpsc::TryRecvError::Empty)),
        "the eval still waits"
    );
    c.post_ok(
        "/api/call/repl-result",
        &repl_result(&eval, "2", Value::Null),
    );
    assert_eq!(eval_answer(&answer).json()["output"], "2");
}

// ---------------------------------------------------------------------------------------------
// Communication errors (§2.10).

#[test]
fn com_errors_are_listed_oldest_first_with_received_at() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(c.get_ok("/api/com-errors"), json!({"errors": []}));
    let first = json!({
        "summary": "POST /api/call/start failed", "timestamp": 1795311683.5, "method": "POST",
        "path": "/api/call/start", "server_url": "http://localhost:5174", "process_pid": PID,
        "process_start_time": 1795311683.7211661, "status_code": 500, "response_text": "boom",
        "payload": {"method_name": "add"},
    });
    let t0 = now();
    assert_eq!(
        c.post_ok("/api/report-com-error", &first),
        json!({"status": "ok"})
    );
    let second = json!({"summary": "GET /api/poll/x failed", "method": "GET", "path": "/api/poll/x",
                        "exception_type": "ConnectionError", "exception_message": "refused"});
    assert_eq!(
        c.post_ok("/api/report-com-error", &second),
        json!({"status": "ok"})
    );
    let t1 = now();

    let errors = c.get_ok("/api/com-errors")["errors"].clone();
    assert_eq!(errors.as_array().map(Vec::len), Some(2), "{errors}");
    for (got, sent) in errors.as_array().unwrap().iter().zip([&first, &second]) {
        for (k, v) in sent.as_object().unwrap() {
            assert_eq!(&got[k], v, "field {k} is kept");
        }
        let at = got["received_at"]
            .as_f64()
            .unwrap_or_else(|| panic!("received_at is a float: {got}"));
        assert!(t0 - 1.0 <= at && at <= t1 + 1.0, "received_at {at}");
    }
    assert_eq!(
        errors[0]["timestamp"], 1795311683.5,
        "a sent timestamp is kept"
    );
    let added = errors[1]["timestamp"]
        .as_f64()
        .expect("a missing timestamp is added");
    assert!(t0 - 1.0 <= added && added <= t1 + 1.0);
}

#[test]
fn com_errors_keep_only_the_last_500() {
    let s = Server::start(&[]);
    let c = s.client();
    for i in 0..505 {
        c.post_ok(
            "/api/report-com-error",
            &json!({"summary": format!("failure {i}"), "i": i}),
        );
    }
    let errors = c.get_ok("/api/com-errors")["errors"].clone();
    let numbers: Vec<i64> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["i"].as_i64().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (5..505).collect::<Vec<i64>>(),
        "the newest 500, oldest first"
    );
}

// ---------------------------------------------------------------------------------------------
// OpenAPI document.

#[test]
fn openapi_document_describes_every_route_with_the_request_host() {
    let s = Server::start(&[]);
    let c = s.client();
    let doc = c.get_ok("/api/openapi.json");
    assert_eq!(
        c.get_ok("/openapi.json"),
        doc,
        "both paths serve the same document"
    );
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "CID el Dill Breakpoint Server API");
    assert_eq!(doc["info"]["version"], "1.0.0");
    assert_eq!(
        doc["servers"][0]["url"],
        format!("http://127.0.0.1:{}", s.port)
    );

    let r =
        c.raw(b"GET /openapi.json HTTP/1.1\r\nHost: localhost:9999\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        r.json()["servers"][0]["url"],
        "http://localhost:9999",
        "the server URL comes from the Host header"
    );

    let paths = doc["paths"].as_object().expect("paths");
    let table = [
        ("get", "/api/breakpoints"),
        ("post", "/api/breakpoints"),
        ("delete", "/api/breakpoints/{name}"),
        ("post", "/api/breakpoints/{name}/behavior"),
        ("post", "/api/breakpoints/{name}/after_behavior"),
        ("post", "/api/breakpoints/{name}/replacement"),
        ("get", "/api/breakpoints/{name}/history"),
        ("get", "/api/behavior"),
        ("post", "/api/behavior"),
        ("get", "/api/functions"),
        ("get", "/api/paused"),
        ("post", "/api/paused/{pause_id}/continue"),
        ("post", "/api/repl/start"),
        ("get", "/api/repl/sessions"),
        ("get", "/api/repl/{session_id}"),
        ("post", "/api/repl/{session_id}/eval"),
        ("post", "/api/repl/{session_id}/close"),
        ("get", "/api/com-errors"),
        ("get", "/openapi.json"),
        ("get", "/api/openapi.json"),
    ];
    for (method, path) in table {
        let op = paths.get(path).and_then(|p| p.get(method));
        assert!(
            op.is_some(),
            "{} {path} is in the document",
            method.to_uppercase()
        );
        assert!(
            op.unwrap()["responses"].is_object(),
            "{method} {path} has responses"
        );
    }
    // And every route the server actually has.
    for route in cideldill_server::http::ROUTES {
        let method = route.method.to_ascii_lowercase();
        assert!(
            paths.get(route.path).and_then(|p| p.get(&method)).is_some(),
            "{} {} is documented",
            route.method,
            route.path
        );
    }
    let history = &paths["/api/breakpoints/{name}/history"]["get"]["parameters"];
    let names: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"name") && names.contains(&"limit"),
        "{history}"
    );
}

// ---------------------------------------------------------------------------------------------
// Call records, objects and status (this server's extensions).

#[test]
fn call_records_are_newest_first_with_paging_and_filters() {
    let s = Server::start(&[]);
    let c = s.client();
    let a1 = run_call(&c, "a", 1);
    let b = call_id(&start_call(&c, "b", 2));
    c.post_ok(
        "/api/call/complete",
        &json!({"call_id": b, "timestamp": 5.0, "status": "exception",
        "process_pid": PID, "process_start_time": 1795311683.7211661,
        "exception_type": "KeyError", "exception_message": "'k'"}),
    );
    let a3 = run_call(&c, "a", 3);

    let all = c.get_ok("/api/call-records");
    assert_eq!(all["total_count"], 3);
    assert_eq!(all["offset"], 0);
    assert_eq!(all["limit"], 100);
    assert_eq!(
        ids(&all["calls"], "call_id"),
        [a3.clone(), b.clone(), a1.clone()],
        "newest first"
    );
    let rec = &all["calls"][2];
    assert_eq!(rec["method_name"], "a");
    assert_eq!(rec["status"], "success");
    assert_eq!(rec["process_key"], PROCESS_KEY);
    assert_eq!(
        rec["started_at"], 1795311683.7775,
        "started_at is the call site timestamp"
    );
    assert_eq!(rec["completed_at"], 1795311690.5);
    assert_eq!(rec["result_cid"], item(&json!(1), 9)["cid"]);
    assert_eq!(all["calls"][1]["status"], "exception");
    assert_eq!(all["calls"][1]["exception_type"], "KeyError");

    let page = c.get_ok("/api/call-records?limit=1&offset=1");
    assert_eq!(ids(&page["calls"], "call_id"), [b.as_str()]);
    assert_eq!(
        (
            page["total_count"].clone(),
            page["offset"].clone(),
            page["limit"].clone()
        ),
        (json!(3), json!(1), json!(1))
    );
    let only_a = c.get_ok("/api/call-records?function=a");
    assert_eq!(ids(&only_a["calls"], "call_id"), [a3.clone(), a1.clone()]);
    assert_eq!(only_a["total_count"], 2);
    assert_eq!(
        ids(
            &c.get_ok("/api/call-records?status=exception")["calls"],
            "call_id"
        ),
        [b.as_str()]
    );
    assert_eq!(
        c.get_ok("/api/call-records?function=a&status=exception")["calls"],
        json!([])
    );
    assert_eq!(c.get_ok("/api/call-records?offset=10")["calls"], json!([]));
}

#[test]
fn call_records_reject_an_invalid_limit() {
    let s = Server::start(&[]);
    let c = s.client();
    for q in ["limit=abc", "limit=-1", "limit=1001", "limit=1.5"] {
        expect_error(
            &c.get(&format!("/api/call-records?{q}")),
            400,
            "invalid_limit",
        );
    }
    expect_error(&c.get("/api/call-records?offset=x"), 400, "invalid_offset");
    assert_eq!(c.get_ok("/api/call-records?limit=1000")["limit"], 1000);
}

#[test]
fn objects_show_format_size_value_and_data_on_request() {
    let s = Server::start(&[]);
    let c = s.client();
    let ten = item(&json!(10), 2);
    let list = json!({"cid": cid_of(b"[1, 2]"), "client_ref": 3, "data": "[1, 2]", "serialization_format": "json"});
    c.post_ok(
        "/api/call/start",
        &call_start_body("obj", vec![ten.clone(), list.clone()], json!({})),
    );

    let cid = ten["cid"].as_str().unwrap();
    let o = c.get_ok(&format!("/api/objects/{cid}"));
    assert_eq!(o["cid"], cid);
    assert_eq!(o["format"], "dill");
    assert_eq!(o["size"], 5);
    assert!(o["stored_at"].as_f64().is_some(), "{o}");
    assert!(
        o.get("value").is_some_and(|v| !v.is_null()),
        "a rendered value: {o}"
    );
    assert!(o.get("data").is_none(), "no data unless asked: {o}");
    for flag in ["true", "1"] {
        assert_eq!(
            c.get_ok(&format!("/api/objects/{cid}?data={flag}"))["data"],
            "gARLCi4="
        );
    }

    let cid = list["cid"].as_str().unwrap();
    let o = c.get_ok(&format!("/api/objects/{cid}?data=true"));
    assert_eq!(o["format"], "json");
    assert_eq!(o["size"], 6);
    assert_eq!(o["value"], json!([1, 2]));
    assert_eq!(o["data"], "[1, 2]");
}

#[test]
fn unknown_object_is_404_cid_not_found() {
    let s = Server::start(&[]);
    let missing = "0".repeat(128);
    let err = expect_error(
        &s.client().get(&format!("/api/objects/{missing}")),
        404,
        "cid_not_found",
    );
    assert_eq!(err["cid"], missing.as_str());
}

#[test]
fn objects_are_listed_newest_first_with_paging() {
    let s = Server::start(&[]);
    let c = s.client();
    assert_eq!(
        c.get_ok("/api/objects"),
        json!({"objects": [], "total_count": 0, "offset": 0, "limit": 100})
    );
    let body = call_start_body("obj", vec![item(&json!(10), 2)], json!({}));
    c.post_ok("/api/call/start", &body);
    let later = item(&json!("later"), 3);
    c.post_ok(
        "/api/call/start",
        &call_start_body("obj", vec![later.clone()], json!({})),
    );

    let all = c.get_ok("/api/objects");
    assert_eq!(
        all["total_count"], 3,
        "target, 10 and 'later' (the target is stored once): {all}"
    );
    let expected = [
        later["cid"].clone(),
        item(&json!(10), 2)["cid"].clone(),
        body["target"]["cid"].clone(),
    ];
    let got: Vec<Value> = all["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["cid"].clone())
        .collect();
    assert_eq!(got, expected, "newest first");
    let first = &all["objects"][1];
    assert_eq!(
        (first["size"].clone(), first["format"].clone()),
        (json!(5), json!("dill"))
    );
    assert!(first["stored_at"].as_f64().is_some());
    let page = c.get_ok("/api/objects?limit=1&offset=1");
    assert_eq!(page["objects"].as_array().unwrap().len(), 1);
    assert_eq!(page["objects"][0]["cid"], expected[1]);
    assert_eq!(
        (
            page["offset"].clone(),
            page["limit"].clone(),
            page["total_count"].clone()
        ),
        (json!(1), json!(1), json!(3))
    );
    expect_error(&c.get("/api/objects?limit=many"), 400, "invalid_limit");
}

#[test]
fn status_counts_the_server_state() {
    let s = Server::start(&[]);
    let c = s.client();
    let st = c.get_ok("/api/status");
    assert_eq!(st["server"], "cideldill-server");
    assert!(
        st["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{st}"
    );
    assert_eq!(st["database"], ":memory:");
    for key in [
        "breakpoints",
        "functions",
        "paused",
        "open_calls",
        "total_calls",
        "stored_objects",
    ] {
        assert_eq!(st[key], 0, "{key} in {st}");
    }
    assert_eq!(st["default_behavior"], "stop");

    let (call, pause) = pause_before(&c, "m");
    c.post_ok("/api/functions", &json!({"function_name": "helper"}));
    let st = c.get_ok("/api/status");
    let counts = |st: &Value| {
        [
            "breakpoints",
            "functions",
            "paused",
            "open_calls",
            "total_calls",
            "stored_objects",
        ]
        .map(|k| st[k].as_i64().unwrap_or(-1))
    };
    assert_eq!(counts(&st), [1, 2, 1, 1, 0, 2], "{st}");
    c.post_ok(&continue_url(&pause), &json!({}));
    c.post_ok("/api/call/complete", &complete_body(&call, &json!(3)));
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let st = c.get_ok("/api/status");
    assert_eq!(
        counts(&st),
        [1, 2, 1, 0, 1, 3],
        "an after-pause, the call record, the result: {st}"
    );
    assert_eq!(st["default_behavior"], "go");
}

/// Evals block their requests until the program answers, and the program answers through other
/// requests (poll-repl, repl-result): more waiting evals than the server keeps idle workers
/// must not starve those, and every eval completes.
#[test]
fn more_concurrent_evals_than_idle_workers_all_complete() {
    const EVALS: usize = 12;
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "m");
    let waiting: Vec<(String, mpsc::Receiver<Resp>)> = (0..EVALS)
        .map(|i| {
            let sid = start_session(&c, &pause);
            let expr = format!("{i} * 2");
            (expr.clone(), eval_in_background(s.client(), &sid, &expr))
        })
        .collect();
    // The program: hands back every eval it is given, while all of them are still waiting.
    for _ in 0..EVALS {
        let eval = next_eval(&c, &pause);
        let expr = eval["expr"].as_str().unwrap_or_default().to_owned();
        let n: usize = expr.split(' ').next().unwrap().parse().unwrap();
        c.post_ok(
            "/api/call/repl-result",
            &repl_result(&eval, &(n * 2).to_string(), Value::Null),
        );
    }
    for (expr, rx) in waiting {
        let r = eval_answer(&rx);
        assert_eq!(r.status, 200, "{expr}: {}", text(&r));
        let n: usize = expr.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(r.json()["output"], (n * 2).to_string(), "{expr}");
    }
}
