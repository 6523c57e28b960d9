//! Hostile input to the JSON-RPC framing (`cideldill_server::jsonrpc`), in process with the
//! counting allocator, and to the MCP stdio transport of the real binary.
//!
//! Properties of `jsonrpc::parse` on any text: it returns (no panic) within 2 s; its peak memory
//! is at most `RPC_FACTOR` times the text plus `RPC_SLACK`; a single message written back with
//! `Message::to_text` is one line that parses to the same message; a batch comes only from a
//! JSON array; an invalid text gets a parse error (-32700) or an invalid request (-32600) whose
//! own text is one line that parses back as a response. And every message the server could build
//! is written as one line that parses back to itself. Against the real binary: hostile lines on
//! the MCP stdio transport and hostile bodies in a Streamable HTTP session.
//!
//! The memory factor: a `serde_json::Value` slot is 72 bytes here and a JSON element can be 2
//! bytes of text (`0,`), so a `Value` tree alone may take 36 times its text; 64 leaves room for a
//! vector's growth. `a_batch_of_scalars_stays_within_the_memory_factor` holds the framing to it
//! for the shape that costs most.

use std::time::{Duration, Instant};

use cideldill_server::jsonrpc::{
    self, Incoming, Message, Notification, Request, RequestId, Response, RpcError, INVALID_REQUEST,
    PARSE_ERROR,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{json, Value};

use crate::alloc::peak_during;
use crate::harness::{exchange, home, request_bytes, McpHttp, Outcome, Proc, LIVENESS};
use crate::props::{config, hostile_string, json_value, mangled, number, token_soup};

/// Peak memory of one parse: at most this many times its text...
pub const RPC_FACTOR: usize = 64;
/// ...plus this.
pub const RPC_SLACK: usize = 64 * 1024;
const PER_TEXT: Duration = Duration::from_secs(2);
/// Hostile lines (stdio) and bodies (Streamable HTTP) sent to the real binary, every one of
/// them, each answer within `LIVENESS`.
const HOSTILE_SENDS: usize = 400;

/// An object shaped like a JSON-RPC message whose fields may have any type.
fn rpc_shaped() -> impl Strategy<Value = Value> {
    let field = |good: BoxedStrategy<Value>| {
        prop_oneof![
            3 => good.prop_map(Some),
            1 => json_value().prop_map(Some),
            2 => Just(None),
        ]
    };
    let id = prop_oneof![
        any::<i64>().prop_map(Value::from),
        hostile_string().prop_map(Value::String),
        number(),
        Just(Value::Null),
    ]
    .boxed();
    let method = prop_oneof![
        prop::sample::select(vec![
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "resources/read",
            "notifications/cancelled",
            "notifications/initialized",
            "rpc.x",
            "",
        ])
        .prop_map(Value::from),
        hostile_string().prop_map(Value::String),
    ]
    .boxed();
    let params = prop_oneof![
        json_value(),
        prop::collection::vec((hostile_string(), json_value()), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
    ]
    .boxed();
    let error = (number(), hostile_string(), json_value())
        .prop_map(|(code, message, data)| json!({"code": code, "message": message, "data": data}))
        .boxed();
    (
        field(Just(json!("2.0")).boxed()),
        field(id),
        field(method),
        field(params),
        field(json_value().boxed()),
        field(error),
    )
        .prop_map(|(v, id, method, params, result, error)| {
            let mut m = serde_json::Map::new();
            for (k, f) in [
                ("jsonrpc", v),
                ("id", id),
                ("method", method),
                ("params", params),
                ("result", result),
                ("error", error),
            ] {
                if let Some(f) = f {
                    m.insert(k.into(), f);
                }
            }
            Value::Object(m)
        })
}

/// Texts a peer might send on one line (or in one body).
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => mangled(rpc_shaped()),
        2 => mangled(prop::collection::vec(rpc_shaped(), 0..5).prop_map(Value::Array)),
        1 => mangled(json_value()),
        1 => token_soup(),
        1 => any::<String>(),
    ]
}

/// The message a response's text parses back to.
fn reparsed(r: &Response) -> Result<Message, TestCaseError> {
    let line = Message::Response(r.clone()).to_text();
    prop_assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
    match jsonrpc::parse(&line) {
        Incoming::Single(m) => Ok(m),
        other => Err(TestCaseError::fail(format!("{line} parsed as {other:?}"))),
    }
}

/// Checks one message: written back as one line, it parses to itself.
fn round_trips(m: &Message) -> Result<(), TestCaseError> {
    let line = m.to_text();
    prop_assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
    prop_assert_eq!(
        serde_json::to_string(&m.to_value()).unwrap(),
        line.clone(),
        "to_text and to_value disagree"
    );
    prop_assert_eq!(
        jsonrpc::parse(&line),
        Incoming::Single(m.clone()),
        "{}",
        line
    );
    Ok(())
}

fn check_text(text: &str) -> Result<(), TestCaseError> {
    let t0 = Instant::now();
    let (incoming, peak) = peak_during(|| jsonrpc::parse(text));
    let took = t0.elapsed();
    prop_assert!(took < PER_TEXT, "parse took {took:?}");
    let bound = RPC_FACTOR * text.len() + RPC_SLACK;
    prop_assert!(
        peak <= bound,
        "parse held {peak} bytes for {} bytes of text (bound {bound})",
        text.len()
    );
    match &incoming {
        Incoming::Single(m) => round_trips(m)?,
        Incoming::Batch(items) => {
            prop_assert!(text.trim_start().starts_with('['), "batch from {text:?}");
            prop_assert!(!items.is_empty());
            for item in items {
                match item {
                    Ok(m) => round_trips(m)?,
                    Err(r) => {
                        prop_assert_eq!(
                            r.outcome.as_ref().err().map(|e| e.code),
                            Some(INVALID_REQUEST)
                        );
                        prop_assert!(matches!(reparsed(r)?, Message::Response(_)));
                    }
                }
            }
        }
        Incoming::Invalid(r) => {
            let code = r.outcome.as_ref().err().map(|e| e.code);
            prop_assert!(
                code == Some(PARSE_ERROR) || code == Some(INVALID_REQUEST),
                "invalid text answered {r:?}"
            );
            match reparsed(r)? {
                Message::Response(back) => prop_assert_eq!(&back, r),
                other => return Err(TestCaseError::fail(format!("reparsed as {other:?}"))),
            }
        }
    }
    Ok(())
}

/// Any message the server can build.
fn message() -> impl Strategy<Value = Message> {
    let id = prop_oneof![
        any::<i64>().prop_map(RequestId::Num),
        hostile_string().prop_map(RequestId::Str),
    ];
    let params = prop_oneof![
        Just(Value::Null),
        prop::collection::vec(json_value(), 0..4).prop_map(Value::Array),
        prop::collection::vec((hostile_string(), json_value()), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
    ];
    let error = (
        any::<i64>(),
        hostile_string(),
        prop::option::of(json_value()),
    )
        .prop_map(|(code, message, data)| RpcError {
            code,
            message,
            data,
        });
    prop_oneof![
        (id.clone(), hostile_string(), params.clone())
            .prop_map(|(id, method, params)| Message::Request(Request { id, method, params })),
        (hostile_string(), params)
            .prop_map(|(method, params)| Message::Notification(Notification { method, params })),
        (prop::option::of(id.clone()), json_value())
            .prop_map(|(id, v)| Message::Response(Response { id, outcome: Ok(v) })),
        (prop::option::of(id), error).prop_map(|(id, e)| Message::Response(Response {
            id,
            outcome: Err(e)
        })),
    ]
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_text_is_framed_without_panic_hang_or_unbounded_memory(text in hostile_text()) {
        check_text(&text)?;
    }

    #[test]
    fn every_message_is_one_line_that_parses_back_to_itself(m in message()) {
        round_trips(&m)?;
    }
}

/// The costliest shapes per byte, each about 1 MB.
fn costly_shapes() -> Vec<(&'static str, String)> {
    let list = |item: &str, n: usize| format!("[{}]", vec![item; n].join(","));
    let n = 1 << 19;
    vec![
        ("a batch of zeros", list("0", n)),
        ("a batch of empty strings", list("\"\"", n / 2)),
        ("a batch of empty arrays", list("[]", n / 2)),
        ("a batch of id-only objects", list(r#"{"id":1}"#, n / 5)),
        (
            "a request with a million-element params array",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}}}"#,
                list("0", n)
            ),
        ),
    ]
}

#[test]
fn a_batch_of_scalars_stays_within_the_memory_factor() {
    let mut over = Vec::new();
    for (name, text) in costly_shapes() {
        let (incoming, peak) = peak_during(|| jsonrpc::parse(&text));
        drop(incoming);
        let factor = peak as f64 / text.len() as f64;
        eprintln!(
            "framing: {name}: {} bytes held {peak} bytes ({factor:.0}x)",
            text.len()
        );
        if peak > RPC_FACTOR * text.len() + RPC_SLACK {
            over.push(format!("{name}: {factor:.0}x"));
        }
    }
    assert!(
        over.is_empty(),
        "jsonrpc::parse holds more than {RPC_FACTOR}x its text: {over:?}"
    );
}

/// Hostile lines on the server's stdin: every one is answered or ignored as JSON-RPC says, the
/// server logs no panic, stdout carries only JSON-RPC, and a ping afterwards is answered.
#[test]
fn hostile_lines_on_mcp_stdio_leave_the_session_usable() {
    let dir = home("stdio");
    let server = Proc::start(dir.path(), &["--mcp", "--memory"], "info");
    let rpc = server.stdio.clone().unwrap();
    rpc.initialize().expect("handshake");
    let mut runner = proptest::test_runner::TestRunner::new(config(HOSTILE_SENDS as u32));
    let strategy = hostile_text();
    let t0 = Instant::now();
    let mut sent = 0;
    while sent < HOSTILE_SENDS {
        let text = strategy
            .new_tree(&mut runner)
            .expect("a value")
            .current()
            .replace(['\n', '\r'], " ");
        rpc.send_line(text.as_bytes()).expect("stdin open");
        sent += 1;
    }
    // Raw bytes that are not UTF-8, an empty line, and a line of whitespace.
    for raw in [
        &b"\xff\xfe{\"jsonrpc\":\"2.0\"}"[..],
        b"",
        b"   \t",
        b"\xc3",
    ] {
        rpc.send_line(raw).expect("stdin open");
    }
    let pong = rpc
        .request("ping", json!({}), LIVENESS)
        .expect("ping after hostile lines");
    assert_eq!(pong["result"], json!({}), "{pong}");
    let tools = rpc
        .request("tools/list", json!({}), LIVENESS)
        .expect("tools/list after hostile lines");
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    assert!(
        rpc.junk.lock().unwrap().is_empty(),
        "stdout carried non-JSON-RPC lines: {:?}",
        rpc.junk.lock().unwrap()
    );
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    eprintln!(
        "framing: {sent} hostile lines on stdio in {:.1?}",
        t0.elapsed()
    );
}

/// Hostile bodies in a Streamable HTTP session: each is answered (never 5xx; an error is JSON),
/// the server logs no panic, and the session still answers a ping afterwards.
#[test]
fn hostile_bodies_on_streamable_http_leave_the_session_usable() {
    let dir = home("mcp-http");
    let server = Proc::start(dir.path(), &["--memory", "--mcp-sse"], "info");
    let port = server.port;
    let session = McpHttp::open(port).expect("a session");
    let headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("Mcp-Session-Id".to_owned(), session.id().to_owned()),
        ("MCP-Protocol-Version".to_owned(), "2025-06-18".to_owned()),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(config(HOSTILE_SENDS as u32));
    let strategy = hostile_text();
    let (t0, mut sent, mut bad) = (Instant::now(), 0, Vec::new());
    while sent < HOSTILE_SENDS {
        let text = strategy.new_tree(&mut runner).expect("a value").current();
        let raw = request_bytes(port, "POST", "/mcp", &headers, text.as_bytes());
        sent += 1;
        match exchange(port, &raw, LIVENESS, false) {
            Outcome::Answered(x) if x.status >= 500 => {
                bad.push(format!("{text:?} -> {} {}", x.status, x.text()))
            }
            Outcome::Answered(x) if x.status >= 400 => {
                let json: Option<Value> = serde_json::from_slice(&x.body).ok();
                if json.as_ref().and_then(|v| v.get("error")).is_none() {
                    bad.push(format!("{text:?} -> {} {:?}", x.status, x.text()));
                }
            }
            Outcome::Answered(_) => {}
            other => bad.push(format!("{text:?} -> {other:?}")),
        }
    }
    let pong = session
        .request("ping", json!({}))
        .expect("ping after hostile bodies");
    assert_eq!(pong["result"], json!({}), "{pong}");
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    eprintln!(
        "framing: {sent} hostile bodies on Streamable HTTP in {:.1?}",
        t0.elapsed()
    );
    assert!(
        bad.is_empty(),
        "{} bad answers:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
