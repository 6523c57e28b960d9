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

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    call_start_body, connect, content_length, deadline, http, item, open_response, pause_id,
    poll_until, raw_request, read_head, Client, OpenResponse, Resp, Server, TempDir,
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

// ---------------------------------------------------------------------------------------------
// A page that keeps being refused. The pending list keeps 16 origins, so a page cycling 17 made
// every refused request new: each wrote a warning with its whole request target (5,000
// requests with 64 KiB targets grew stderr by 286.5 MiB in 11.6 s) and published
// `origins_changed` (20,000 requests sent 10,744 events to a reader in 2.6 s, then `resync`
// ended its stream; 2,000 pushed a real `execution_paused` out of the replay, so a reader
// reconnecting with `Last-Event-ID` lost it).

/// One event of a stream, as read: id, name, data.
struct StreamEvent {
    id: Option<u64>,
    name: String,
    data: String,
}

/// Reads the next event of an open stream (comments and chunk sizes skipped); `None` when it
/// ends or nothing comes within the stream's read timeout.
fn next_event(body: &mut std::io::BufReader<std::net::TcpStream>) -> Option<StreamEvent> {
    use std::io::BufRead;
    let (mut id, mut name, mut data) = (None, String::new(), String::new());
    loop {
        let mut line = String::new();
        if body.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(v) = line.strip_prefix("id: ") {
            id = v.parse().ok();
        } else if let Some(v) = line.strip_prefix("event: ") {
            name = v.to_owned();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        } else if line.is_empty() && !name.is_empty() {
            return Some(StreamEvent { id, name, data });
        }
    }
}

fn open_events(port: u16, last_event_id: Option<u64>) -> OpenResponse {
    let id = last_event_id.map(|i| i.to_string());
    let mut headers = vec![("Accept", "text/event-stream")];
    if let Some(id) = &id {
        headers.push(("Last-Event-ID", id));
    }
    let req = raw_request(port, "GET", "/api/events", &headers, None);
    let open = open_response(port, &req, deadline());
    assert_eq!(open.status, 200);
    open
}

/// Sends `n` refused requests of a page, the origins cycling through `origins` of them, each
/// with a request target of about `target_bytes`, from `connections` kept-alive connections;
/// every answer must be the 403 a page can read.
fn flood(port: u16, connections: usize, origins: usize, n: usize, target_bytes: usize) {
    let threads: Vec<_> = (0..connections)
        .map(|t| {
            std::thread::spawn(move || {
                let mut sock = connect(port, deadline()).expect("connect");
                let pad = "x".repeat(target_bytes);
                for i in (t..n).step_by(connections) {
                    let origin = format!("http://site{}.example", i % origins);
                    let target = format!("/api/poll/{pad}?n={i}");
                    let req = raw_request(port, "GET", &target, &[("Origin", &origin)], None);
                    sock.write_all(&req).expect("send");
                    let (status, head) =
                        read_head(&sock, Instant::now() + deadline()).expect("an answer");
                    assert_eq!(status, 403, "{head}");
                    let mut body = vec![0; content_length(&head)];
                    sock.read_exact(&mut body).expect("the body");
                    assert!(
                        String::from_utf8_lossy(&body).contains("origin_not_allowed"),
                        "{}",
                        String::from_utf8_lossy(&body)
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a flood thread");
    }
}

/// The refusal lines of a log: the warnings naming a refused request, and the requests the
/// summaries say were left out.
fn refusal_lines(log: &str) -> (usize, u64) {
    let warned = log
        .lines()
        .filter(|l| l.contains("http: refused GET /api/poll/"))
        .count();
    let summarised = log
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once("http: ")?;
            let (n, _) = rest.split_once(" more refused requests from ")?;
            n.parse::<u64>().ok()
        })
        .sum();
    (warned, summarised)
}

#[test]
fn a_page_cycling_origins_costs_bounded_log_bytes_and_events_and_loses_no_pause() {
    let home = TempDir::new("refusal-flood");
    // The default log level: what a user's terminal gets.
    let s = Server::start_in_env(home.path(), &["--memory"], &[("RUST_LOG", "info")]);
    let c = s.client();
    // A real pause, before the flood, seen by a live reader.
    let mut live = open_events(s.port, None);
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![item(&json!(1), 1)], json!({})),
    );
    let paused_id = pause_id(&start);
    let paused_seq = loop {
        let e = next_event(&mut live.body).expect("execution_paused on the live stream");
        if e.name == "execution_paused" {
            assert!(e.data.contains(&paused_id), "{}", e.data);
            break e.id.expect("an event id");
        }
    };
    // The live reader counts what the flood sends it, until the event that follows the flood.
    let reader = std::thread::spawn(move || {
        let mut names: Vec<String> = Vec::new();
        while let Some(e) = next_event(&mut live.body) {
            if e.name == "breakpoints_changed" {
                return Ok(names);
            }
            names.push(e.name);
            if names.last().is_some_and(|n| n == "resync") {
                return Err(names);
            }
        }
        Err(names)
    });
    let before = s.stderr().len();
    // One connection, the origins in turn: each request finds its origin pushed out of the
    // pending list, so every one is new.
    let (n, origins) = (20_000, 17);
    let began = Instant::now();
    flood(s.port, 1, origins, n, 4096);
    let took = began.elapsed();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "after_the_flood"}),
    );
    let names = reader
        .join()
        .expect("the reader")
        .unwrap_or_else(|names| panic!("the live stream ended: {names:?}"));
    // Events: one origins_changed per interval at most, the first at once and the last at the
    // end of its interval.
    let interval = cideldill_server::limits::ORIGINS_EVENT_INTERVAL;
    let bound = (took.as_secs_f64() / interval.as_secs_f64()).ceil() as usize + 2;
    let told = names.iter().filter(|n| *n == "origins_changed").count();
    assert!(
        told >= 1,
        "the web UI hears of the pending pages: {names:?}"
    );
    assert!(
        told <= bound,
        "{told} origins_changed in {took:?} (at most {bound})"
    );
    assert_eq!(names.len(), told, "nothing else: {names:?}");
    // The pending list is bounded, and its last change is told once its interval is over.
    let pending = c.get_ok("/api/origins")["pending"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(pending, cideldill_server::limits::MAX_PENDING_ORIGINS);
    let mut late = open_events(s.port, Some(paused_seq - 1));
    let replayed = next_event(&mut late.body).expect("the replay");
    assert_eq!(
        (replayed.name.as_str(), replayed.id),
        ("execution_paused", Some(paused_seq)),
        "the pause made before the flood is replayed: {}",
        replayed.data
    );
    assert!(replayed.data.contains(&paused_id), "{}", replayed.data);
    // Then the event that followed the flood, and one origins_changed for all of it (the
    // newest, kept apart), in the order of their ids.
    let mut rest = Vec::new();
    while !(rest.iter().any(|n| n == "breakpoints_changed")
        && rest.iter().any(|n| n == "origins_changed"))
    {
        let e = next_event(&mut late.body).unwrap_or_else(|| panic!("the replay: {rest:?}"));
        rest.push(e.name);
    }
    assert_eq!(rest.len(), 2, "one notice tells them all: {rest:?}");
    // Log bytes: a few warnings, each cut, and summaries that count every other refusal.
    let window = cideldill_server::limits::REFUSAL_LOG_WINDOW;
    let log = poll_until(deadline() + window, || {
        let log = s.stderr()[before..].to_owned();
        let (warned, summarised) = refusal_lines(&log);
        (warned as u64 + summarised == n as u64).then_some(log)
    })
    .unwrap_or_else(|| {
        let log = s.stderr()[before..].to_owned();
        panic!(
            "refusals not all counted ({:?}): {log}",
            refusal_lines(&log)
        )
    });
    let windows = (took + window).as_secs_f64() / window.as_secs_f64();
    let lines = cideldill_server::limits::REFUSAL_LOG_LINES;
    let (warned, _) = refusal_lines(&log);
    assert!(
        warned as f64 <= (windows.ceil() + 1.0) * lines as f64,
        "{warned} warnings in {took:?}"
    );
    assert!(
        log.len() < 64 << 10,
        "{} bytes of log for {n} refused requests",
        log.len()
    );
    assert!(!log.contains(&"x".repeat(1024)), "targets are cut");
    assert!(log.contains(&format!("from {origins} origins")), "{log}");
    println!(
        "refusal flood: {n} requests from {origins} origins in {took:?}: {} bytes of log \
         ({warned} warnings), {} events to a live reader ({told} origins_changed)",
        log.len(),
        names.len()
    );
}

#[test]
fn at_debug_level_each_refused_request_costs_one_short_line() {
    let s = Server::start(&[]);
    let c = s.client();
    let before = s.stderr().len();
    let n = 2_000;
    flood(c.port, 4, 17, n, 16 << 10);
    let log = s.stderr()[before..].to_owned();
    let per_request = log.len() / n;
    assert!(per_request < 512, "{per_request} bytes of log per request");
    assert!(!log.contains(&"x".repeat(1024)), "targets are cut");
    println!(
        "refusal flood at debug level: {n} requests, {} bytes of log",
        log.len()
    );
}
