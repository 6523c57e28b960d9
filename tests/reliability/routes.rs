//! Hostile HTTP requests against the real binary (`--memory --mcp-sse`, port 0): random
//! methods, every path of the route table (REST, web UI pages, MCP) with hostile path
//! parameters and queries, random headers, and bodies that are mutated valid bodies, random JSON,
//! token soup or raw bytes.
//!
//! The oracle, for every request: a complete HTTP answer within `PER_REQUEST` (never a dropped
//! connection, never a hang); never 500 nor another 5xx; an error (4xx) is a
//! JSON body with an `error` member (a JSON-RPC error on the MCP endpoints), except the web UI's
//! HTML "not found" page; the server's peak resident memory stays within `HTTP_FACTOR` times the
//! largest request sent plus `HTTP_SLACK_KIB` over its level after start-up; and after the run
//! the server has logged no panic.
//!
//! A fixed case count, every case sent (each within its own deadline); the failures are collected (one example per method, route
//! and kind of failure) rather than stopping at the first, so one run reports every kind found.
//! `RELIABILITY_SEED` (hex) replays a run; the seed is printed. The defects this fuzzer found
//! each have their own regression test below.
//!
//! Below the fuzzer: those defects' tests, and the memory a request costs (and what the server
//! keeps from many requests) measured from outside for the costliest JSON shapes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cideldill_server::http::ROUTES;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};

use crate::harness::{exchange, home, request_bytes, McpHttp, Outcome, Proc};
use crate::props::{config, hostile_string, json_value, number, token_soup};
use crate::support::{call_start_body, complete_body, item, Resp};

/// A request's peak memory: at most this many times the largest request sent...
pub const HTTP_FACTOR: u64 = 64;
/// ...plus this, over the level after start-up (worker threads, caches, allocator slack).
pub const HTTP_SLACK_KIB: u64 = 48 * 1024;
const PER_REQUEST: Duration = Duration::from_secs(10);
/// Requests a run sends, all of them (5,000 take about 6 s on 2 cores under load), unless the
/// server exits.
const CASES: usize = 5000;

/// One endpoint: its method, path pattern (`{x}` is a parameter) and query parameter names.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub query: Vec<&'static str>,
}

/// The pages of the web UI: `GET`, answered with HTML.
pub const PAGES: &[&str] = &[
    "/",
    "/calls",
    "/breakpoints",
    "/breakpoint/{name}/history",
    "/functions",
    "/com-errors",
    "/mcp-servers",
    "/repls",
    "/repl/{session_id}",
    "/object/{cid}",
    "/call-tree",
    "/call-tree/{process_key}",
    "/callstack/{pause_id}",
    "/callstack/call/{call_id}",
    "/frame/{pause_id}/{index}",
    "/frame/call/{call_id}/{index}",
    // The original server's addresses.
    "/objects",
    "/repl-help",
    "/docs",
    "/frame/call/{process_key}/{call_id}/{index}",
    "/breakpoint/{name}/history/{record_id}",
    "/ui/app.css",
    "/ui/app.js",
    "/ui/events-worker.js",
    "/ui/icon.svg",
];

/// Every endpoint: the route table, the web UI pages and the MCP transports.
pub fn endpoints() -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = ROUTES
        .iter()
        .map(|r| Endpoint {
            method: r.method,
            path: r.path,
            query: r.query.iter().map(|(k, _)| *k).collect(),
        })
        .collect();
    out.extend(PAGES.iter().map(|p| Endpoint {
        method: "GET",
        path: p,
        query: vec![
            "fragment", "process", "function", "status", "search", "limit", "offset",
        ],
    }));
    for (method, path) in [
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("DELETE", "/mcp"),
        ("GET", "/mcp/sse"),
        ("POST", "/mcp/messages"),
    ] {
        out.push(Endpoint {
            method,
            path,
            query: vec!["session_id", "sessionId"],
        });
    }
    out
}

/// Whether `path` is served by the web UI (HTML, also for "not found").
fn is_page(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or(path);
    path == "/"
        || PAGES
            .iter()
            .filter(|p| **p != "/")
            .any(|p| path.starts_with(p.split('{').next().unwrap_or(p).trim_end_matches('/')))
}

/// Percent-encodes everything but unreserved characters.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A path segment for a parameter.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "bp", "add", "f", "0b9d4c3a-5b7e-4c1d-9f00-3c2a1b0e9d8f", "1795311683.784533-001",
            "2.000000+1", "16759-1795311683.721166", "0", "1", "-1", "99999999999999999999",
            "fx", "x", "history",
        ])
        .prop_map(str::to_owned),
        2 => hostile_string().prop_map(|s| encode(&s)),
        2 => prop::sample::select(vec![
            "..", ".", "%", "%zz", "%0", "%00", "%ff%fe", "a%2fb", "%2e%2e", "%2e%2e%2f%2e%2e",
            "..%2f..%2f..%2fetc%2fpasswd", "%c0%ae%c0%ae", "a;b", "a,b", "'", "(", "*", "$", "!",
            "~", "%e2%80%ae", "é",
        ])
        .prop_map(str::to_owned),
        1 => Just(format!("{:0128x}", 7)),
        1 => (1usize..6000).prop_map(|n| "a".repeat(n)),
    ]
}

fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "0",
            "1",
            "-1",
            "1000",
            "1001",
            "99999999999999999999",
            "1e9",
            "NaN",
            "true",
            "jsonl",
            "json",
            "xml",
            "program",
            "mcp_client",
            "active",
            "closed",
            "%zz",
            "+",
            "&",
            "=",
            "1.5",
            "inf",
        ])
        .prop_map(str::to_owned),
        hostile_string().prop_map(|s| encode(&s)),
    ]
}

/// A valid body for an endpoint, when it takes one.
fn example_body(method: &str, path: &str) -> Option<Value> {
    if method != "POST" {
        return None;
    }
    let rpc =
        |m: &str, params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": params});
    Some(match path {
        "/api/breakpoints" => json!({"function_name": "add", "signature": "(x, y=1)",
            "behavior": "stop", "condition": "args[0][0] > 0 and len(kwargs) == 1",
            "hit_condition": "%2", "one_shot": false}),
        "/api/breakpoints/{name}/condition" => {
            json!({"condition": "kwargs['y'] in [1, 2] or result is None"})
        }
        "/api/breakpoints/{name}/hit_condition" => json!({"hit_condition": ">=2"}),
        "/api/breakpoints/{name}/log_message" => {
            json!({"log_message": "{args} {kwargs['y']} -> {result} {{x}}"})
        }
        "/api/breakpoints/{name}/one_shot" => json!({"one_shot": true}),
        "/api/breakpoints/{name}/behavior" | "/api/behavior" => json!({"behavior": "go"}),
        "/api/breakpoints/{name}/after_behavior" => json!({"behavior": "stop_exception"}),
        "/api/breakpoints/{name}/replacement" => json!({"replacement_function": "sub"}),
        "/api/functions" => {
            json!({"function_name": "add", "signature": "(x)", "function_client_ref": 1})
        }
        "/api/call/start" => call_start_body(
            "add",
            vec![item(&json!([1, 2]), 2)],
            json!({"y": item(&json!(1), 3)}),
        ),
        "/api/call/complete" => complete_body("1795311683.784533-001", &json!(6)),
        "/api/call/event" => json!({"method_name": "with_debug.register", "status": "registered",
            "timestamp": 1.5, "call_site": {"timestamp": 1.5, "stack_trace": []},
            "process_pid": 1, "process_start_time": 1.5, "pretty_args": [], "pretty_kwargs": {}}),
        "/api/call/repl-result" => {
            json!({"eval_id": "e", "pause_id": "p", "result": "2", "status": "ok"})
        }
        "/api/paused/{pause_id}/continue" => json!({"action": "modify", "modified_args": [1, "x"],
            "modified_kwargs": {"y": 2}, "fake_result": 3, "exception_type": "ValueError",
            "exception_message": "m", "replacement_function": "sub"}),
        "/api/repl/start" => json!({"pause_id": "0b9d4c3a-5b7e-4c1d-9f00-3c2a1b0e9d8f"}),
        "/api/repl/{session_id}/eval" => json!({"expr": "1 + 1"}),
        "/api/report-com-error" => {
            json!({"error": "boom", "url": "/api/call/start", "method": "POST"})
        }
        "/api/mcp-tools/call" => json!({"tool": "fx/echo", "arguments": {"text": "x"}}),
        "/api/mcp-resources/read" => json!({"server": "fx", "uri": "fixture://hello"}),
        "/mcp" | "/mcp/messages" => rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}),
        ),
        _ => json!({}),
    })
}

/// A valid object with some members replaced by hostile values, removed, or added.
fn mutate(v: Value) -> impl Strategy<Value = Value> {
    let keys: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let n = keys.len().max(1);
    (
        prop::collection::vec((0..n, 0u8..4, json_value(), number()), 0..4),
        hostile_string(),
    )
        .prop_map(move |(edits, extra_key)| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                for (i, how, val, num) in edits {
                    let Some(k) = keys.get(i) else { continue };
                    match how {
                        0 => {
                            m.remove(k);
                        }
                        1 => {
                            m.insert(k.clone(), num);
                        }
                        2 => {
                            m.insert(extra_key.clone(), val);
                        }
                        _ => {
                            m.insert(k.clone(), val);
                        }
                    }
                }
            }
            v
        })
}

fn body(method: &'static str, path: &'static str) -> BoxedStrategy<Vec<u8>> {
    let mut choices: Vec<(u32, BoxedStrategy<Vec<u8>>)> = vec![
        (2, Just(Vec::new()).boxed()),
        (
            2,
            json_value()
                .prop_map(|v| v.to_string().into_bytes())
                .boxed(),
        ),
        (1, token_soup().prop_map(String::into_bytes).boxed()),
        (1, prop::collection::vec(any::<u8>(), 0..200).boxed()),
    ];
    if let Some(example) = example_body(method, path) {
        choices.push((2, Just(example.to_string().into_bytes()).boxed()));
        choices.push((
            5,
            mutate(example)
                .prop_map(|v| v.to_string().into_bytes())
                .boxed(),
        ));
    }
    prop::strategy::Union::new_weighted(choices).boxed()
}

fn headers(port: u16) -> impl Strategy<Value = Vec<(String, String)>> {
    let own = format!("http://127.0.0.1:{port}");
    let header = prop_oneof![
        5 => prop::sample::select(vec![
            "application/json",
            "text/plain",
            "application/json; charset=utf-8",
            "multipart/form-data; boundary=x",
            "",
            "application/x-www-form-urlencoded",
        ])
        .prop_map(|v| ("Content-Type".to_owned(), v.to_owned())),
        5 => prop::sample::select(vec![
            own.clone(),
            "http://evil.example".into(),
            "null".into(),
            "http://localhost:1".into(),
        ])
        .prop_map(|v| ("Origin".to_owned(), v)),
        5 => prop::sample::select(vec![
            "text/html",
            "application/json",
            "text/event-stream",
            "*/*",
            "application/json, text/event-stream",
            "",
        ])
        .prop_map(|v| ("Accept".to_owned(), v.to_owned())),
        5 => prop::sample::select(vec![
            "localhost",
            "evil.example",
            "[::1]",
            "127.0.0.1:1",
            ""
        ])
        .prop_map(|v| ("Host".to_owned(), v.to_owned())),
        5 => prop::sample::select(vec![
            "Last-Event-ID",
            "Mcp-Session-Id",
            "MCP-Protocol-Version",
            "Access-Control-Request-Method",
            "Cookie",
            "X-Forwarded-For",
            "Range"
        ])
        .prop_flat_map(|k| "[ -~]{0,60}".prop_map(move |v| (k.to_owned(), v))),
        1 => prop::sample::select(vec!["X-Name", "Origin", "Mcp-Session-Id"])
            .prop_map(|k| (k.to_owned(), "Jos\u{e9} \u{1F600}".to_owned())),
    ];
    prop::collection::vec(header, 0..4)
}

/// One generated request.
#[derive(Clone, Debug)]
struct Hostile {
    method: String,
    /// The endpoint it was made from (for grouping failures).
    endpoint: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn hostile_request(port: u16) -> impl Strategy<Value = Hostile> {
    let all = endpoints();
    (0..all.len()).prop_flat_map(move |i| {
        let ep = all[i].clone();
        let method = prop_oneof![
            6 => Just(ep.method.to_owned()),
            3 => prop::sample::select(vec!["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
                .prop_map(str::to_owned),
            1 => prop::sample::select(vec!["get", "PROPFIND", "TRACE", "CONNECT", "X"])
                .prop_map(str::to_owned),
        ];
        let keys = if ep.query.is_empty() { vec!["x"] } else { ep.query.clone() };
        let query = prop::collection::vec((prop::sample::select(keys), query_value()), 0..3);
        (
            method,
            prop::collection::vec(prop::option::weighted(0.9, segment()), 3),
            query,
            headers(port),
            body(ep.method, ep.path),
            0u8..8,
        )
            .prop_map(move |(method, segs, query, headers, body, trailer)| {
                // A parameter may be left out altogether (its segment and slash).
                let mut segs = segs.into_iter();
                let mut path: String = ep
                    .path
                    .split('/')
                    .filter_map(|p| {
                        if p.starts_with('{') {
                            segs.next().flatten()
                        } else {
                            Some(p.to_owned())
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                if path.is_empty() {
                    path.push('/');
                }
                match trailer {
                    0 => path.push('/'),
                    1 => path.push_str("//"),
                    _ => {}
                }
                if !query.is_empty() {
                    let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    path = format!("{path}?{}", q.join("&"));
                }
                Hostile {
                    endpoint: format!("{} {}", ep.method, ep.path),
                    method,
                    target: path,
                    headers,
                    body,
                }
            })
    })
}

/// What is wrong with an answer, if anything.
fn judge(req: &Hostile, outcome: &Outcome) -> Option<(&'static str, String)> {
    let x: &Resp = match outcome {
        Outcome::Answered(x) => x,
        Outcome::Dropped(why) => return Some(("dropped connection", why.clone())),
        Outcome::Hung(after) => return Some(("no answer", format!("after {after:?}"))),
    };
    let text = x.text();
    let json: Option<Value> = serde_json::from_slice(&x.body).ok();
    let error_member = json.as_ref().and_then(|v| v.get("error")).is_some();
    if x.status >= 500 {
        return Some(("5xx", format!("{} {}", x.status, cut(&text))));
    }
    if (400..500).contains(&x.status) && req.method != "HEAD" {
        let html = x
            .header("Content-Type")
            .is_some_and(|c| c.starts_with("text/html"));
        let page = is_page(&req.target) && matches!(req.method.as_str(), "GET" | "get");
        // A browser (one that accepts HTML) asking for an unknown address outside /api/ gets
        // the Not found page rather than the JSON error.
        let accepts_html = req
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("accept") && v.contains("text/html"));
        let browser_404 = html
            && x.status == 404
            && accepts_html
            && req.method.eq_ignore_ascii_case("GET")
            && !req.target.starts_with("/api/")
            && text.contains("<h1>Not found</h1>");
        if !(error_member || (html && page) || browser_404) {
            return Some((
                "4xx without a JSON error",
                format!(
                    "{} {:?}: {}",
                    x.status,
                    x.header("Content-Type").unwrap_or(""),
                    cut(&text)
                ),
            ));
        }
    }
    None
}

/// The panics a server logged, each with the line after it (the message).
pub fn new_panics(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("panicked"))
        .map(|(i, l)| format!("{l} {}", lines.get(i + 1).unwrap_or(&"")))
        .collect()
}

fn cut(s: &str) -> String {
    s.chars().take(160).collect()
}

/// The seed of this run: `RELIABILITY_SEED` (hex), else from the clock.
fn seed() -> [u8; 32] {
    let n: u64 = std::env::var("RELIABILITY_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("routes: RELIABILITY_SEED={n:x}");
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&n.to_le_bytes());
    seed
}

#[test]
fn hostile_requests_get_clear_answers_in_bounded_time_and_memory() {
    let dir = home("routes");
    // Sessions that fuzzed clients open and abandon are never reclaimed (see
    // `abandoned_mcp_http_sessions_do_not_lock_out_new_clients`): no limit here.
    let mut server = Proc::start(
        dir.path(),
        &["--memory", "--mcp-sse", "--mcp-max-sessions", "1000000"],
        "warn",
    );
    let port = server.port;
    // Warm up: the workers and caches the first requests create are part of the baseline.
    for path in [
        "/api/status",
        "/calls",
        "/api/call-records",
        "/api/openapi.json",
    ] {
        let _ = exchange(
            port,
            &request_bytes(port, "GET", path, &[], b""),
            PER_REQUEST,
            false,
        );
    }
    let (_, base_kib) = server.rss_kib();
    let mut runner = TestRunner::new_with_rng(
        config(CASES as u32),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed()),
    );
    let strategy = hostile_request(port);
    let mut failures: BTreeMap<(String, String, &'static str), (Hostile, String)> = BTreeMap::new();
    let (t0, mut sent, mut largest) = (Instant::now(), 0usize, 0u64);
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut over_memory = false;
    while sent < CASES {
        let req = strategy.new_tree(&mut runner).expect("a request").current();
        let bytes = request_bytes(port, &req.method, &req.target, &req.headers, &req.body);
        largest = largest.max(bytes.len() as u64);
        let outcome = exchange(port, &bytes, PER_REQUEST, false);
        sent += 1;
        if let Outcome::Answered(x) = &outcome {
            *statuses.entry(x.status).or_default() += 1;
        }
        let mut found = judge(&req, &outcome);
        if !server.is_running() {
            found = Some(("server exited", format!("after {sent} requests")));
        } else {
            // The peak only grows: the request that first passes the bound is reported.
            let (_, peak_kib) = server.rss_kib();
            let bound = base_kib + HTTP_SLACK_KIB + HTTP_FACTOR * largest / 1024;
            if peak_kib > bound && !over_memory {
                over_memory = true;
                let key = (req.method.clone(), req.endpoint.clone(), "memory");
                let detail = format!("peak {peak_kib} KiB > bound {bound} KiB");
                failures.entry(key).or_insert((req.clone(), detail));
            }
        }
        if let Some((kind, detail)) = found {
            let key = (req.method.clone(), req.endpoint.clone(), kind);
            failures.entry(key).or_insert((req, detail));
            if kind == "server exited" {
                break;
            }
        }
    }
    let log = server.stderr();
    eprintln!(
        "routes: {sent} requests in {:.1?}, statuses {statuses:?}, largest {largest} bytes",
        t0.elapsed()
    );
    let panics = new_panics(&log);
    let report: Vec<String> = failures
        .iter()
        .map(|((method, endpoint, kind), (req, detail))| {
            format!(
                "{kind}: {method} on {endpoint}: {} {} headers {:?} body {:?} -> {detail}",
                req.method,
                req.target,
                req.headers,
                cut(&String::from_utf8_lossy(&req.body))
            )
        })
        .collect();
    assert!(
        report.is_empty() && panics.is_empty(),
        "{} kinds of failure:\n{}\npanics logged:\n{}",
        report.len(),
        report.join("\n"),
        panics.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The defects the fuzzer found, one regression test each.

fn answer(port: u16, raw: &[u8]) -> Outcome {
    exchange(port, raw, PER_REQUEST, false)
}

fn answered(outcome: Outcome) -> Resp {
    match outcome {
        Outcome::Answered(x) => x,
        other => panic!("no answer: {other:?}"),
    }
}

/// Found by this suite (fixed): `src/ui/mod.rs` slices the name out of `/breakpoint/<name>/history` without checking
/// that there is one: `GET /breakpoint/history` panics in the worker, and tiny_http answers the
/// dropped request 500 with an empty body.
#[test]
fn get_breakpoint_history_without_a_name_is_not_a_500() {
    let dir = home("d1");
    let server = Proc::start(dir.path(), &["--memory"], "warn");
    let port = server.port;
    for path in [
        "/breakpoint/history",
        "/breakpoint//history",
        "/breakpoint/x/history",
    ] {
        let x = answered(answer(port, &request_bytes(port, "GET", path, &[], b"")));
        assert!(x.status < 500, "GET {path} -> {} {:?}", x.status, x.text());
    }
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}

/// Found by this suite (fixed): `HEAD /api/events` is routed like a GET of the route table's `/api/events` entry,
/// whose handler says the stream is served before routing: 500 `internal_error`.
#[test]
fn head_of_the_event_stream_is_not_a_500() {
    let dir = home("d5");
    let server = Proc::start(dir.path(), &["--memory"], "warn");
    let port = server.port;
    for path in [
        "/api/events",
        "/api/events/",
        "/api/call-records?format=jsonl",
    ] {
        let x = answered(answer(port, &request_bytes(port, "HEAD", path, &[], b"")));
        assert!(x.status < 500, "HEAD {path} -> {}", x.status);
    }
}

/// Found by this suite (fixed): the MCP HTTP transports answer some errors in plain text: 405 for a method they do
/// not serve, and on the legacy `/mcp/messages` 400 "session_id is required" and 404 "Could not
/// find session". Every other error of the server is JSON (a JSON-RPC error here).
#[test]
fn mcp_transport_errors_are_json() {
    let dir = home("d3");
    let server = Proc::start(dir.path(), &["--memory", "--mcp-sse"], "warn");
    let port = server.port;
    let json_body = [("Content-Type".to_owned(), "application/json".to_owned())];
    let rpc = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let cases: Vec<(&str, &str, &[u8])> = vec![
        ("PUT", "/mcp", b""),
        ("PATCH", "/mcp/sse", b""),
        ("DELETE", "/mcp/messages", b""),
        ("POST", "/mcp/messages", rpc),
        ("POST", "/mcp/messages?session_id=nope", rpc),
    ];
    let mut plain = Vec::new();
    for (method, path, body) in cases {
        let x = answered(answer(
            port,
            &request_bytes(port, method, path, &json_body, body),
        ));
        assert!(
            (400..500).contains(&x.status),
            "{method} {path} -> {}",
            x.status
        );
        let json: Option<Value> = serde_json::from_slice(&x.body).ok();
        if json.as_ref().and_then(|v| v.get("error")).is_none() {
            plain.push(format!(
                "{method} {path} -> {} {:?} {:?}",
                x.status,
                x.header("Content-Type").unwrap_or(""),
                x.text()
            ));
        }
    }
    assert!(
        plain.is_empty(),
        "errors that are not JSON:\n{}",
        plain.join("\n")
    );
}

/// Found by this suite (fixed; in tiny_http 0.12: `client.rs` reads each line of the head as ASCII and drops the
/// connection when it is not): a request line or header with a byte that is not ASCII, such as
/// a raw `é` in the path or in a header value, is never answered: the connection is closed
/// without a response. A space in the path, also malformed, gets 400.
#[test]
fn a_request_line_with_a_non_ascii_byte_is_answered() {
    let dir = home("d4");
    let server = Proc::start(dir.path(), &["--memory"], "warn");
    let port = server.port;
    let mut dropped = Vec::new();
    for line in [
        &b"GET /api/repl/\xc3\xa9 HTTP/1.1"[..],
        b"GET /api/status\xff HTTP/1.1",
        b"G\xc3\xa9T /api/status HTTP/1.1",
        b"GET /api/status HTTP/1.1\r\nX-Name: Jos\xc3\xa9",
        b"GET /a b HTTP/1.1",
    ] {
        let raw = [
            line,
            &b"\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"[..],
        ]
        .concat();
        match answer(port, &raw) {
            Outcome::Answered(_) => {}
            Outcome::Dropped(why) => {
                dropped.push(format!("{:?}: {why}", String::from_utf8_lossy(line)))
            }
            Outcome::Hung(after) => dropped.push(format!(
                "{:?}: no answer after {after:?}",
                String::from_utf8_lossy(line)
            )),
        }
    }
    assert!(
        dropped.is_empty(),
        "request lines left unanswered:\n{}",
        dropped.join("\n")
    );
    // The server itself is fine.
    let x = answered(answer(
        port,
        &request_bytes(port, "GET", "/api/status", &[], b""),
    ));
    assert_eq!(x.status, 200);
}

/// Found by this suite (fixed): a Streamable HTTP session lives until its client sends DELETE; one that never does
/// (it crashed, or was killed) is never reclaimed. Once `--mcp-max-sessions` clients have left
/// that way, every new MCP HTTP client is refused (503 "too many MCP sessions") until the server
/// restarts. Here with a limit of 4: four clients initialize and go away, and a fifth must get a
/// session within the deadline.
#[test]
fn abandoned_mcp_http_sessions_do_not_lock_out_new_clients() {
    let dir = home("d7");
    let server = Proc::start(
        dir.path(),
        &["--memory", "--mcp-sse", "--mcp-max-sessions", "4"],
        "warn",
    );
    for i in 0..4 {
        McpHttp::open(server.port).unwrap_or_else(|e| panic!("session {i}: {e}"));
    }
    let mut last = String::new();
    let got_in = crate::support::poll_until(crate::support::deadline(), || {
        match McpHttp::open(server.port) {
            Ok(_) => Some(()),
            Err(e) => {
                last = e;
                None
            }
        }
    });
    assert!(
        got_in.is_some(),
        "a new MCP HTTP client is locked out by four abandoned sessions: {last}"
    );
}

// ---------------------------------------------------------------------------------------------
// Memory per request, from outside: the costliest JSON shapes per byte.

/// `[0,0,...]`: the JSON text that costs most per byte as a `serde_json::Value` (72 bytes for
/// every 2 bytes of text, plus the number's own allocation).
fn zeros(bytes: usize) -> String {
    let n = bytes / 2;
    let mut s = String::with_capacity(n * 2 + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s.push(']');
    s
}

/// Sends one request to a fresh server and returns its status and how much the server's peak
/// resident memory grew, in KiB.
fn peak_growth(
    args: &[&str],
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, u64) {
    let dir = home("mem");
    let server = Proc::start(dir.path(), args, "error");
    let port = server.port;
    let _ = answer(port, &request_bytes(port, "GET", "/api/status", &[], b""));
    let (_, base) = server.rss_kib();
    let x = answered(exchange(
        port,
        &request_bytes(port, method, path, headers, body),
        Duration::from_secs(60),
        false,
    ));
    let (_, peak) = server.rss_kib();
    (x.status, peak.saturating_sub(base))
}

const SHAPE_BYTES: usize = 2 << 20;

/// The bound of this suite: a request costs at most `HTTP_FACTOR` times its size plus
/// `HTTP_SLACK_KIB`, for the costliest JSON shape sent to each kind of body parsing (a JSON
/// object through `parse_json_tolerant`, its NaN fallback, the `Node` parser of the call
/// protocol, a body that is kept as a call record).
#[test]
fn a_rest_request_costs_at_most_the_stated_factor_of_its_size() {
    let z = zeros(SHAPE_BYTES);
    let cases: Vec<(&str, String)> = vec![
        (
            "/api/breakpoints",
            format!(r#"{{"function_name":"f","k":{z}}}"#),
        ),
        (
            "/api/breakpoints",
            format!(r#"{{"function_name":"f","nan":NaN,"k":{z}}}"#),
        ),
        (
            "/api/call/start",
            format!(r#"{{"method_name":"f","process_pid":1,"process_start_time":1.5,"args":{z}}}"#),
        ),
        (
            "/api/paused/nope/continue",
            format!(r#"{{"action":"modify","modified_args":{z}}}"#),
        ),
        (
            "/api/call/event",
            format!(
                r#"{{"method_name":"f","status":"x","timestamp":1.5,"process_pid":1,"process_start_time":1.5,"pretty_args":{z}}}"#
            ),
        ),
    ];
    let mut over = Vec::new();
    for (path, body) in &cases {
        let (status, growth) = peak_growth(&["--memory"], "POST", path, &[], body.as_bytes());
        let bound = HTTP_SLACK_KIB + HTTP_FACTOR * body.len() as u64 / 1024;
        eprintln!(
            "memory: POST {path} ({} KiB) -> {status}, peak +{growth} KiB (bound {bound})",
            body.len() / 1024
        );
        assert!(status < 500, "POST {path} -> {status}");
        if growth > bound {
            over.push(format!("POST {path}: +{growth} KiB > {bound} KiB"));
        }
    }
    assert!(over.is_empty(), "requests over the memory bound: {over:?}");
}

/// Found by this suite (fixed): a JSON-RPC batch cost about twice the bound (see `framing.rs`):
/// a `POST /mcp` of a 2 MiB batch of zeros raised the server's peak memory by about 120 times its
/// size, so one request at the default 64 MiB body cap could have needed about 8 GiB.
#[test]
fn an_mcp_batch_costs_at_most_the_stated_factor_of_its_size() {
    let dir = home("mem-mcp");
    let server = Proc::start(dir.path(), &["--memory", "--mcp-sse"], "error");
    let port = server.port;
    let session = McpHttp::open(port).expect("an MCP session");
    let (_, base) = server.rss_kib();
    let body = zeros(SHAPE_BYTES);
    let headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("Mcp-Session-Id".to_owned(), session.id().to_owned()),
        ("MCP-Protocol-Version".to_owned(), "2025-06-18".to_owned()),
    ];
    let x = answered(exchange(
        port,
        &request_bytes(port, "POST", "/mcp", &headers, body.as_bytes()),
        Duration::from_secs(60),
        false,
    ));
    let (_, peak) = server.rss_kib();
    let growth = peak.saturating_sub(base);
    let bound = HTTP_SLACK_KIB + HTTP_FACTOR * body.len() as u64 / 1024;
    eprintln!(
        "memory: POST /mcp batch ({} KiB) -> {}, peak +{growth} KiB (bound {bound})",
        body.len() / 1024,
        x.status
    );
    assert!(x.status < 500, "POST /mcp -> {}", x.status);
    assert!(
        growth <= bound,
        "POST /mcp batch: +{growth} KiB > {bound} KiB"
    );
}

/// What the server keeps from requests is bounded by bytes, not only by a count: each
/// `POST /api/report-com-error` report (the last 500 are kept) and each client event of
/// `POST /api/call/event` (a call record; the window keeps 100,000) was kept as a JSON tree of
/// about 60 times its size (sixteen 256 KiB requests left the server about 240 MiB larger). Now
/// reports are kept as text and large trees packed. Bound here: what is kept costs at most 4
/// times the bytes sent plus `HTTP_SLACK_KIB`.
#[test]
fn kept_reports_and_events_are_bounded_by_bytes_not_only_by_count() {
    let z = zeros(256 << 10);
    for (path, make) in [
        (
            "/api/report-com-error",
            &(|i: usize, z: &str| format!(r#"{{"summary":"s{i}","k":{z}}}"#))
                as &dyn Fn(usize, &str) -> String,
        ),
        ("/api/call/event", &|i: usize, z: &str| {
            format!(
                r#"{{"event_id":"e{i}","method_name":"f","status":"x","timestamp":1.5,"process_pid":1,"process_start_time":1.5,"pretty_args":{z}}}"#
            )
        }),
    ] {
        let dir = home("kept");
        let server = Proc::start(dir.path(), &["--memory"], "error");
        let port = server.port;
        let _ = answer(port, &request_bytes(port, "GET", "/api/status", &[], b""));
        let (base, _) = server.rss_kib();
        let mut sent = 0u64;
        for i in 0..16 {
            // Each request differs, so nothing is shared between them.
            let body = make(i, &z.replacen('0', &i.to_string(), 1));
            sent += body.len() as u64;
            let x = answered(answer(
                port,
                &request_bytes(port, "POST", path, &[], body.as_bytes()),
            ));
            assert_eq!(x.status, 200, "POST {path}: {}", x.text());
        }
        let (now, _) = server.rss_kib();
        let growth = now.saturating_sub(base);
        let bound = HTTP_SLACK_KIB + 4 * sent / 1024;
        eprintln!(
            "memory: 16 x POST {path} ({} KiB in all) keep +{growth} KiB (bound {bound})",
            sent / 1024
        );
        assert!(
            growth <= bound,
            "POST {path}: 16 requests of {} KiB keep +{growth} KiB > {bound} KiB",
            sent / 16 / 1024
        );
    }
}
