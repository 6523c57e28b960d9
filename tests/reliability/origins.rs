//! Browser origins are granted, not assumed: the attacks of an outside probe from web pages,
//! against the real binary. The browser-client endpoints answered every origin, so any page
//! you visited could report calls, create pauses and poll; and requests a page makes without
//! an `Origin` header (`<img src>`, `<script src>`) reached the guarded endpoints: 40 of them
//! held all 32 event streams (the web UI got 503), 64 held every legacy MCP SSE listen (agents'
//! initialize got 503), and they could start record searches.
//!
//! Every test here failed on the server before the fix and passes after it: a page may use the
//! browser-client endpoints only from the server's own origins, `--allow-origin` ones or an
//! origin the person granted in the web UI (a pending request there until then, kept with
//! `--db`); and the guarded endpoints, the event stream, the export and MCP refuse requests
//! with `Sec-Fetch-Site: cross-site` or `same-site` that carry no `Origin`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    call_start_body, http, item, open_response, raw_request, Client, Resp, Server, TempDir,
};

const EVIL: &str = "http://evil.example";
const DEV: &str = "http://localhost:3000";

fn from(c: &Client, origin: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let text = body.map(Value::to_string);
    http(
        c.port,
        method,
        path,
        &[("Origin", origin), ("Content-Type", "application/json")],
        text.as_deref(),
    )
}

/// A page's call start (the debug client's shape: pid 0, a page URL).
fn page_call(origin: &str) -> Value {
    let mut b = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    b["process_pid"] = json!(0);
    b["page_url"] = json!(format!("{origin}/app.html"));
    b
}

/// Every browser-client request of a page, with what it needs.
fn page_requests() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        (
            "POST",
            "/api/functions",
            Some(json!({"function_name": "page_fn"})),
        ),
        ("POST", "/api/call/start", Some(page_call(EVIL))),
        ("POST", "/api/call/complete", Some(json!({"call_id": "x"}))),
        (
            "POST",
            "/api/call/repl-result",
            Some(json!({"eval_id": "e", "session_id": "s", "pause_id": "p"})),
        ),
        (
            "GET",
            "/api/poll/0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b",
            None,
        ),
        (
            "GET",
            "/api/poll-repl/0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b",
            None,
        ),
    ]
}

#[test]
fn a_page_nobody_granted_cannot_report_calls_or_poll() {
    let s = Server::start(&[]);
    let c = s.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    for (method, path, body) in page_requests() {
        let r = from(&c, EVIL, method, path, body.as_ref());
        assert_eq!(r.status, 403, "{method} {path}: {}", r.text());
        let e = r.json();
        assert_eq!(e["error"], "origin_not_allowed", "{method} {path}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("web UI") && msg.contains("--allow-origin"),
            "{msg}"
        );
        // Readable by the page's script, so the debug client can say why.
        assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"), "{path}");
    }
    // Nothing was started or paused (the page's call of `add` would pause).
    assert_eq!(c.get_ok("/api/paused")["paused"], json!([]));
    // The client script itself stays open to every origin.
    let js = from(&c, EVIL, "GET", "/api/debug-client.js", None);
    assert_eq!(js.status, 200);
    // The refusal waits in the web UI, once per origin, however many requests.
    let o = c.get_ok("/api/origins");
    assert_eq!(o["pending"].as_array().unwrap().len(), 1, "{o}");
    assert_eq!(o["pending"][0]["origin"], EVIL);
    assert_eq!(o["pending"][0]["requests"], 6);
    assert_eq!(c.get_ok("/api/functions")["functions"], json!(["add"]));
    let page = http(c.port, "GET", "/", &[("Accept", "text/html")], None).text();
    assert!(page.contains("http://evil.example</strong> wants to report calls"));
}

#[test]
fn pending_requests_are_bounded_and_deny_keeps_refusing() {
    let s = Server::start(&[]);
    let c = s.client();
    let n = cideldill_server::limits::MAX_PENDING_ORIGINS;
    for i in 0..n + 20 {
        let origin = format!("http://site{i}.example");
        let r = from(&c, &origin, "GET", "/api/poll/x", None);
        assert_eq!(r.status, 403);
    }
    let o = c.get_ok("/api/origins");
    let pending = o["pending"].as_array().unwrap();
    assert_eq!(pending.len(), n, "bounded");
    assert_eq!(
        pending[n - 1]["origin"],
        format!("http://site{}.example", n + 19)
    );
    c.post_ok("/api/origins", &json!({"origin": DEV, "decision": "deny"}));
    for _ in 0..3 {
        assert_eq!(from(&c, DEV, "GET", "/api/poll/x", None).status, 403);
    }
    let o = c.get_ok("/api/origins");
    assert!(o["pending"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["origin"] != DEV));
    assert_eq!(o["denied"], json!([DEV]));
    // Bad answers change nothing.
    let e = c.post_err(
        "/api/origins",
        &json!({"origin": "null", "decision": "allow"}),
        400,
    );
    assert_eq!(e["error"], "invalid_origin");
    let e = c.post_err(
        "/api/origins",
        &json!({"origin": DEV, "decision": "maybe"}),
        400,
    );
    assert_eq!(e["error"], "invalid_decision");
}

#[test]
fn a_grant_lets_a_pages_calls_through_and_is_kept_with_the_database() {
    let home = TempDir::new("grants");
    let db = home.path().join("grants.db");
    let db = db.to_str().unwrap().to_owned();
    let mut s = Server::start_in(home.path(), &["--db", &db]);
    let c = s.client();
    assert_eq!(
        from(&c, DEV, "POST", "/api/call/start", Some(&page_call(DEV))).status,
        403
    );
    c.post_ok("/api/origins", &json!({"origin": DEV, "decision": "allow"}));
    let r = from(&c, DEV, "POST", "/api/call/start", Some(&page_call(DEV)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get_ok("/api/origins")["pending"], json!([]));
    // Another origin is still refused.
    assert_eq!(
        from(&c, EVIL, "POST", "/api/call/start", Some(&page_call(EVIL))).status,
        403
    );
    s.signal_and_wait("-TERM");
    let s = Server::start_in(home.path(), &["--db", &db]);
    let c = s.client();
    assert_eq!(c.get_ok("/api/origins")["granted"], json!([DEV]));
    let r = from(&c, DEV, "POST", "/api/call/start", Some(&page_call(DEV)));
    assert_eq!(r.status, 200, "the grant survives a restart: {}", r.text());
    // Denying revokes it, also after the next restart.
    c.post_ok("/api/origins", &json!({"origin": DEV, "decision": "deny"}));
    assert_eq!(
        from(&c, DEV, "POST", "/api/call/start", Some(&page_call(DEV))).status,
        403
    );
}

#[test]
fn allow_origin_star_restores_the_open_behaviour_with_a_warning() {
    let s = Server::start(&["--allow-origin", "*"]);
    let c = s.client();
    let r = from(&c, EVIL, "POST", "/api/call/start", Some(&page_call(EVIL)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(s.stderr().contains("--allow-origin '*'"), "{}", s.stderr());
}

/// Opens `n` requests the way an `<img>` of another site sends them (no Origin,
/// `Sec-Fetch-Site: cross-site`) and keeps them open; their statuses.
fn cross_site(c: &Client, path: &str, accept: &str, n: usize) -> Vec<u16> {
    let mut held = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..n {
        let req = raw_request(
            c.port,
            "GET",
            path,
            &[
                ("Accept", accept),
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "no-cors"),
                ("Sec-Fetch-Dest", "image"),
            ],
            None,
        );
        let open = open_response(c.port, &req, Duration::from_secs(10));
        statuses.push(open.status);
        held.push(open);
    }
    statuses
}

#[test]
fn images_of_another_site_cannot_hold_the_event_streams() {
    let s = Server::start(&[]);
    let c = s.client();
    let statuses = cross_site(&c, "/api/events", "text/event-stream", 40);
    assert!(statuses.iter().all(|&st| st == 403), "{statuses:?}");
    // A same-site page (another port on localhost) without Origin is refused too.
    let req = raw_request(
        c.port,
        "GET",
        "/api/events",
        &[("Sec-Fetch-Site", "same-site")],
        None,
    );
    assert_eq!(
        open_response(c.port, &req, Duration::from_secs(10)).status,
        403
    );
    // The web UI's own stream still opens.
    let req = raw_request(
        c.port,
        "GET",
        "/api/events",
        &[
            ("Sec-Fetch-Site", "same-origin"),
            ("Accept", "text/event-stream"),
        ],
        None,
    );
    assert_eq!(
        open_response(c.port, &req, Duration::from_secs(10)).status,
        200
    );
}

#[test]
fn images_of_another_site_cannot_hold_the_mcp_listens_or_start_searches() {
    let s = Server::start(&["--mcp-sse"]);
    let c = s.client();
    let statuses = cross_site(&c, "/mcp/sse", "text/event-stream", 70);
    assert!(statuses.iter().all(|&st| st == 403), "{statuses:?}");
    let statuses = cross_site(&c, "/mcp", "text/event-stream", 3);
    assert!(statuses.iter().all(|&st| st == 403), "{statuses:?}");
    // An agent still initializes.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let r = http(
        c.port,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        Some(&init),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Record searches, the export and the pages embedded by another site are refused...
    for path in [
        "/api/call-records?search=secret",
        "/api/call-records?format=jsonl",
        "/calls?search=secret",
        "/api/status",
    ] {
        let statuses = cross_site(&c, path, "*/*", 1);
        assert_eq!(statuses, [403], "{path}");
    }
    // An <img> of another site cannot pass for a program on the browser-client endpoints.
    for path in [
        "/api/poll/0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b",
        "/api/poll-repl/0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b",
    ] {
        assert_eq!(cross_site(&c, path, "*/*", 1), [403], "{path}");
    }
    assert_eq!(cross_site(&c, "/api/debug-client.js", "*/*", 1), [200]);
    // ...but a person following a link to the web UI from another site gets the page.
    let r = http(
        c.port,
        "GET",
        "/calls",
        &[
            ("Accept", "text/html"),
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "navigate"),
            ("Sec-Fetch-Dest", "document"),
        ],
        None,
    );
    assert_eq!(r.status, 200);
}
