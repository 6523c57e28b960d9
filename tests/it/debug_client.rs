//! The browser debug client: `GET /api/debug-client.js` serves the ES module with the server's
//! URL (from the request's `Host`) baked in, to any origin; and the requests that module sends
//! (JSON items, `preferred_format: "json"`, pid 0 with a `page_url`, from a foreign origin)
//! get JSON actions it can decode. The module itself runs in Chromium in
//! `scripts/ui_test.mjs` (the "debug client" checks).

use serde_json::{json, Value};

use crate::support::{http, pause_id, Client, Resp, Server};

const PAGE: &str = "http://127.0.0.1:8123";

fn get_script(c: &Client, host: &str) -> Resp {
    http(
        c.port,
        "GET",
        "/api/debug-client.js",
        &[("Host", host), ("Origin", PAGE)],
        None,
    )
}

#[test]
fn the_script_is_served_to_any_origin_with_the_server_url_baked_in() {
    let s = Server::start(&["--allow-origin", PAGE]);
    let c = s.client();
    let r = get_script(&c, &format!("127.0.0.1:{}", s.port));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("Content-Type"),
        Some("application/javascript; charset=utf-8")
    );
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(r.header("Cache-Control"), Some("no-cache"));
    let js = r.text();
    let baked = format!("const SERVER_URL = \"http://127.0.0.1:{}\";", s.port);
    assert!(js.contains(&baked), "no {baked} in the script");
    for name in [
        "withDebug",
        "withDebugSync",
        "debugCall",
        "debugCallSync",
        "configure",
        "registerReplacement",
    ] {
        assert!(
            js.contains(&format!("export function {name}(")),
            "{name} is not exported"
        );
    }
    // As the original's endpoint test reads it: the URL constant, window.cideldill, exports.
    assert!(js.contains("export const cideldill = { withDebug, withDebugSync, debugCall, debugCallSync, configure, registerReplacement"));
    assert!(js.contains("window.cideldill = cideldill;"));
    assert!(js.contains("export default cideldill;"));
    // Like the original, the client registers functions but never adds a breakpoint.
    assert!(js.contains("\"/api/functions\""));
    assert!(
        !js.contains("/api/breakpoints"),
        "the client adds breakpoints"
    );
    // The URL follows the name the page used.
    let js = get_script(&c, &format!("localhost:{}", s.port)).text();
    assert!(js.contains(&format!("\"http://localhost:{}\"", s.port)));
    // A module imported by another site is fetched in CORS mode: the preflight is granted too.
    let pre = http(
        c.port,
        "OPTIONS",
        "/api/debug-client.js",
        &[("Origin", PAGE), ("Access-Control-Request-Method", "GET")],
        None,
    );
    assert!(pre.status < 300, "{}", pre.status);
    assert_eq!(pre.header("Access-Control-Allow-Origin"), Some("*"));
    // HEAD answers the headers; other methods are refused; a foreign Host is still 421.
    let head = http(c.port, "HEAD", "/api/debug-client.js", &[], None);
    assert_eq!(
        (head.status, head.header("Content-Type")),
        (200, Some("application/javascript; charset=utf-8"))
    );
    let post = c.post("/api/debug-client.js", &json!({}));
    assert_eq!(post.status, 405);
    let rebound = get_script(&c, "evil.example");
    assert_eq!(rebound.status, 421);
}

/// A JSON item as the module builds one: `data` is JSON text, the CID its SHA-512.
fn json_item(value: &Value, client_ref: u64) -> Value {
    let text = value.to_string();
    json!({
        "cid": cideldill_server::cas::cid_of(text.as_bytes()),
        "client_ref": client_ref,
        "data": text,
        "serialization_format": "json",
    })
}

/// A POST from the page's origin, as the browser sends it.
fn post(c: &Client, path: &str, body: &Value) -> Value {
    let text = body.to_string();
    let r = http(
        c.port,
        "POST",
        path,
        &[("Origin", PAGE), ("Content-Type", "application/json")],
        Some(&text),
    );
    assert_eq!(r.status, 200, "POST {path}: {}", r.text());
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    r.json()
}

fn poll_ready(c: &Client, id: &str) -> Value {
    let r = http(
        c.port,
        "GET",
        &format!("/api/poll/{id}"),
        &[("Origin", PAGE)],
        None,
    );
    let v = r.json();
    assert_eq!(v["status"], "ready", "{v}");
    v["action"].clone()
}

fn identity() -> Value {
    json!({"process_pid": 0, "process_start_time": 1795400000.25, "page_url": format!("{PAGE}/app.html")})
}

fn start(c: &Client, args: &[Value]) -> Value {
    let mut body = identity();
    let items: Vec<Value> = args
        .iter()
        .enumerate()
        .map(|(i, a)| json_item(a, i as u64 + 2))
        .collect();
    body.as_object_mut().unwrap().extend(
        json!({
            "method_name": "add",
            "target": json_item(&json!({"__cideldill_placeholder__": true, "summary": "<function add>"}), 1),
            "args": items, "kwargs": {},
            "call_site": {"timestamp": 1795400001.0, "stack_trace": [{"filename": format!("{PAGE}/app.js"), "lineno": 3, "function": "go", "code_context": null}]},
            "call_type": "proxy", "signature": "(a, b)", "preferred_format": "json",
        })
        .as_object()
        .unwrap()
        .clone(),
    );
    post(c, "/api/call/start", &body)
}

fn complete(c: &Client, call_id: &str, result: &Value) -> Value {
    let r = json_item(result, 9);
    let mut body = identity();
    body.as_object_mut().unwrap().extend(
        json!({
            "call_id": call_id, "timestamp": 1795400002.0, "status": "success",
            "result_cid": r["cid"], "result_client_ref": 9, "result_data": r["data"],
            "result_serialization_format": "json",
        })
        .as_object()
        .unwrap()
        .clone(),
    );
    post(c, "/api/call/complete", &body)
}

#[test]
fn a_page_gets_json_actions_it_can_decode() {
    let s = Server::start(&["--allow-origin", PAGE]);
    let c = s.client();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "add", "signature": "(a, b)"}),
    );
    // Modify: plain values come back as JSON items.
    let action = start(&c, &[json!(1), json!(2)]);
    let id = pause_id(&action);
    let paused = c.get_ok("/api/paused")["paused"][0].clone();
    let d = &paused["call_data"];
    assert_eq!(d["pretty_args"], json!([1, 2]));
    assert_eq!(d["page_url"], format!("{PAGE}/app.html"));
    assert_eq!(
        (d["process_pid"].clone(), d["preferred_format"].clone()),
        (json!(0), json!("json"))
    );
    c.post_ok(
        &format!("/api/paused/{id}/continue"),
        &json!({"action": "modify", "modified_args": [10, "x"]}),
    );
    let got = poll_ready(&c, &id);
    assert_eq!(got["action"], "modify");
    let ten = &got["modified_args"][0];
    assert_eq!(
        (ten["data"].clone(), ten["serialization_format"].clone()),
        (json!("10"), json!("json"))
    );
    assert_eq!(ten["cid"], json_item(&json!(10), 0)["cid"]);
    assert_eq!(got["modified_args"][1]["data"], "\"x\"");
    // The after-pause shows the JSON result; only continue is taken there.
    let after = complete(&c, action["call_id"].as_str().unwrap(), &json!(30));
    let after_id = pause_id(&after);
    let paused = c.get_ok("/api/paused")["paused"][0].clone();
    assert_eq!(paused["call_data"]["pretty_result"], json!(30));
    c.post_ok(
        &format!("/api/paused/{after_id}/continue"),
        &json!({"action": "continue"}),
    );
    assert_eq!(poll_ready(&c, &after_id)["action"], "continue");
    // Skip: the fake result as raw JSON and as JSON text.
    let action = start(&c, &[json!(5), json!(6)]);
    let id = pause_id(&action);
    c.post_ok(
        &format!("/api/paused/{id}/continue"),
        &json!({"action": "skip", "fake_result": {"fake": [99]}}),
    );
    let got = poll_ready(&c, &id);
    assert_eq!(got["fake_result"], json!({"fake": [99]}));
    assert_eq!(got["fake_result_data"], "{\"fake\":[99]}");
    assert_eq!(got["fake_result_serialization_format"], "json");
}
