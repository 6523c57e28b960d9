//! Unit tests of `crate::upstream::http`.

use super::*;
use crate::upstream::peer::Notice;
use crate::upstream::sse_parse::testing::{body, header, Server, Stream};
use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn peer() -> (Arc<Peer>, Receiver<Notice>) {
    let (tx, rx) = unbounded();
    let p = Peer::new("t", move |n| {
        let _ = tx.send(n);
    });
    (p, rx)
}

pub(crate) fn reply(rq: tiny_http::Request, status: u16, body: &str, headers: &[(&str, &str)]) {
    let mut r = tiny_http::Response::from_string(body).with_status_code(status);
    for (k, v) in headers {
        r.add_header(tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap());
    }
    let _ = rq.respond(r);
}

fn json_reply(rq: tiny_http::Request, msg: Value, headers: &[(&str, &str)]) {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    reply(rq, 200, &msg.to_string(), &all);
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn init_result(id: &Value) -> Value {
    result(
        id,
        json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "test"}}),
    )
}

/// What a handler saw of one request: method, JSON-RPC method or `-`, session, version.
type Seen = (String, String, Option<String>, Option<String>);

/// Reads a POST's JSON body and records the request.
fn record(rq: &mut tiny_http::Request, seen: &Sender<Seen>) -> Value {
    let msg: Value = serde_json::from_str(&body(rq)).unwrap_or(Value::Null);
    let _ = seen.send((
        rq.method().to_string(),
        msg["method"].as_str().unwrap_or("-").to_owned(),
        header(rq, "Mcp-Session-Id"),
        header(rq, "MCP-Protocol-Version"),
    ));
    msg
}

#[test]
fn initialize_event_stream_call_and_close() {
    let (seen_tx, seen) = unbounded();
    let (gone_tx, gone) = unbounded();
    let server = Server::start(move |mut rq| {
        let msg = record(&mut rq, &seen_tx);
        match (rq.method(), msg["method"].as_str()) {
            (tiny_http::Method::Get, _) => {
                assert_eq!(header(&rq, "Accept").as_deref(), Some("text/event-stream"));
                let mut s = Stream::open(rq, &[]);
                s.event(
                    Some("message"),
                    r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                );
                while s.raw(": ping\n\n") {
                    thread::sleep(Duration::from_millis(50));
                }
                let _ = gone_tx.send(());
            }
            (tiny_http::Method::Delete, _) => reply(rq, 200, "", &[]),
            (_, Some("initialize")) => {
                json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
            }
            (_, Some("tools/list")) => {
                assert_eq!(
                    header(&rq, "Accept").as_deref(),
                    Some("application/json, text/event-stream")
                );
                assert_eq!(header(&rq, "X-Token").as_deref(), Some("secret"));
                json_reply(
                    rq,
                    result(&msg["id"], json!({"tools": [{"name": "a"}]})),
                    &[],
                )
            }
            _ => reply(rq, 202, "", &[]),
        }
    });
    let (p, notices) = peer();
    let headers = [("X-Token".to_owned(), "secret".to_owned())];
    connect(&p, &format!("{}/mcp", server.base), &headers, WAIT).unwrap();
    let init = p.initialize(WAIT).unwrap();
    assert_eq!(init.protocol_version, "2025-06-18");
    assert_eq!(notices.recv_timeout(WAIT), Ok(Notice::ToolsChanged));
    let tools = p.list_all("tools/list", "tools", WAIT).unwrap();
    assert_eq!(tools, vec![json!({"name": "a"})]);

    let t0 = Instant::now();
    p.shutdown("bye");
    assert!(t0.elapsed() < Duration::from_secs(2));
    gone.recv_timeout(WAIT)
        .expect("the event stream was closed");
    let s = |x: &str| Some(x.to_owned());
    let v = s("2025-06-18");
    let got: Vec<Seen> = seen.try_iter().collect();
    assert_eq!(
        got,
        vec![
            ("POST".into(), "initialize".into(), None, None),
            ("GET".into(), "-".into(), s("s-1"), v.clone()),
            (
                "POST".into(),
                "notifications/initialized".into(),
                s("s-1"),
                v.clone()
            ),
            ("POST".into(), "tools/list".into(), s("s-1"), v.clone()),
            ("DELETE".into(), "-".into(), s("s-1"), v),
        ]
    );
    assert_eq!(
        p.request("tools/list", json!({}), WAIT),
        Err(Failure::Disconnected("bye".into()))
    );
}

#[test]
fn answers_on_an_event_stream_after_the_servers_ping() {
    let (pong_tx, pong) = unbounded::<Value>();
    let server = Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        match msg["method"].as_str() {
            Some("slow") => {
                let mut s = Stream::open(rq, &[]);
                s.event(None, r#"{"jsonrpc":"2.0","id":"srv-1","method":"ping"}"#);
                let answer = pong.recv_timeout(WAIT).unwrap_or(Value::Null);
                assert_eq!(
                    answer,
                    json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
                );
                s.raw(": keep-alive\n\nevent: other\ndata: x\n\nid: 1\ndata:\n\n");
                s.event(Some("message"), r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#);
                s.event(
                    Some("message"),
                    &result(&msg["id"], json!({"done": true})).to_string(),
                );
                s.finish();
            }
            Some("mute") => {
                let mut s = Stream::open(rq, &[]);
                s.event(Some("message"), "not json");
                s.finish();
            }
            Some(_) => reply(rq, 202, "", &[]),
            None => {
                let _ = pong_tx.send(msg);
                reply(rq, 202, "", &[]);
            }
        }
    });
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    assert_eq!(
        p.request("slow", json!({}), WAIT),
        Ok(json!({"done": true}))
    );
    assert_eq!(
        p.request("mute", json!({}), WAIT),
        Err(Failure::Disconnected(
            "the server closed the response stream without answering".into()
        ))
    );
}

#[test]
fn a_stale_session_closes_the_peer() {
    let server = Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        match (rq.method(), msg["method"].as_str()) {
            (tiny_http::Method::Get, _) => reply(rq, 405, "Method Not Allowed", &[]),
            (_, Some("initialize")) => {
                json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-2")])
            }
            (_, Some("notifications/initialized")) => reply(rq, 202, "", &[]),
            _ => reply(rq, 404, "Session not found", &[]),
        }
    });
    let (p, notices) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    p.initialize(WAIT).unwrap();
    match p.request("tools/list", json!({}), WAIT) {
        Err(Failure::Http {
            status: 404,
            mcp_error: false,
            message,
        }) => assert_eq!(message, "404 Not Found: Session not found"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        notices.recv_timeout(WAIT),
        Ok(Notice::Closed(
            "the server ended the session (HTTP 404)".into()
        ))
    );
    assert!(p.is_closed());
}

#[test]
fn http_errors_and_refused_connections_fail_the_call() {
    let server = Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        match msg["method"].as_str() {
            Some("rpc") => reply(
                rq,
                400,
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: no valid session"}}"#,
                &[("Content-Type", "application/json")],
            ),
            Some("plain") => reply(rq, 405, "", &[]),
            Some("accepted") => reply(rq, 202, "", &[]),
            _ => reply(rq, 500, "boom", &[]),
        }
    });
    let (p, notices) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    let fail = |m: &str| p.request(m, json!({}), WAIT).unwrap_err();
    assert_eq!(
        fail("rpc"),
        Failure::Http {
            status: 400,
            mcp_error: true,
            message: "400 Bad Request: -32000 Bad Request: no valid session".into()
        }
    );
    assert_eq!(
        fail("plain"),
        Failure::Http {
            status: 405,
            mcp_error: false,
            message: "405 Method Not Allowed".into()
        }
    );
    assert!(matches!(fail("accepted"), Failure::Invalid(_)));
    assert_eq!(
        p.notify("notifications/x", json!({})),
        Err("HTTP 500 Internal Server Error: boom".into())
    );
    assert!(!p.is_closed());
    assert!(notices.try_recv().is_err());

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (q, _) = peer();
    connect(&q, &format!("http://127.0.0.1:{port}/mcp"), &[], WAIT).unwrap();
    match q.request("x", json!({}), WAIT) {
        Err(Failure::Disconnected(why)) => assert!(why.contains("refused"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(q.notify("notifications/x", json!({})).is_err());
}

#[test]
fn modern_headers_name_the_method_and_encode_what_is_not_plain_ascii() {
    use crate::upstream::peer::with_envelope;
    let msg = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": with_envelope(params)});
    let legacy =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
    assert_eq!(modern_headers(&legacy), None);
    let h = |m: &Value| {
        modern_headers(m)
            .unwrap()
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        h(&msg("tools/list", json!({}))),
        ["MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list"]
    );
    assert_eq!(
        h(&msg("tools/call", json!({"name": "echo", "arguments": {}})))[2],
        "Mcp-Name: echo"
    );
    assert_eq!(
        h(&msg("tools/call", json!({"name": "größe_✓"})))[2],
        "Mcp-Name: =?base64?Z3LDtsOfZV/inJM=?="
    );
    assert_eq!(
        h(&msg("resources/read", json!({"uri": "file:///a b.txt"})))[2],
        "Mcp-Name: file:///a b.txt"
    );
    assert_eq!(
        h(&msg("prompts/get", json!({"name": "p"})))[2],
        "Mcp-Name: p"
    );
    for (value, plain) in [
        ("plain name", true),
        (" lead", false),
        ("trail ", false),
        ("tab\there", false),
        ("=?base64?eA==?=", false),
        ("", true),
    ] {
        assert_eq!(header_value(value) == value, plain, "{value:?}");
    }
    assert_eq!(header_value(" lead"), "=?base64?IGxlYWQ=?=");
}

// A modern server over Streamable HTTP: the probe chooses the modern era; every request is
// a POST with the modern headers and envelope and no session (one the server hands out is
// ignored); a request given up closes its response stream instead of posting
// notifications/cancelled; closing sends no DELETE.
#[test]
fn a_modern_server_gets_modern_posts_and_cancellation_by_a_closed_stream() {
    use crate::upstream::peer::{Era, MODERN_VERSION};
    type Posted = (
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let (seen_tx, seen) = unbounded::<Posted>();
    let (gone_tx, gone) = unbounded();
    let server = Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        let method = msg["method"].as_str().unwrap_or("-").to_owned();
        let meta = &msg["params"]["_meta"];
        let envelope_ok = meta["io.modelcontextprotocol/protocolVersion"] == MODERN_VERSION
            && meta["io.modelcontextprotocol/clientCapabilities"] == json!({})
            && meta["io.modelcontextprotocol/clientInfo"]["name"] == "cideldill-server";
        let _ = seen_tx.send((
            format!(
                "{} {method}{}",
                rq.method(),
                if envelope_ok { "" } else { " (no envelope)" }
            ),
            header(&rq, "MCP-Protocol-Version"),
            header(&rq, "Mcp-Method"),
            header(&rq, "Mcp-Name"),
            header(&rq, "Mcp-Session-Id"),
        ));
        if rq.method() != &tiny_http::Method::Post {
            return reply(rq, 405, "", &[]);
        }
        let id = msg["id"].clone();
        match method.as_str() {
            "server/discover" => json_reply(
                rq,
                result(
                    &id,
                    json!({"supportedVersions": ["2025-11-25", MODERN_VERSION],
                    "capabilities": {"tools": {}}, "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern"}}}),
                ),
                &[("Mcp-Session-Id", "should-be-ignored")],
            ),
            "tools/call" if msg["params"]["name"] == "slow" => {
                let mut s = Stream::open(rq, &[]);
                while s.raw(": waiting\n\n") {
                    thread::sleep(Duration::from_millis(50));
                }
                let _ = gone_tx.send(());
            }
            "tools/call" => json_reply(
                rq,
                result(&id, json!({"content": [], "resultType": "complete"})),
                &[],
            ),
            _ => reply(rq, 400, "unexpected", &[]),
        }
    });
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    let init = p.handshake(WAIT).unwrap();
    assert_eq!(init.era, Era::Modern);
    assert_eq!(init.server_info, json!({"name": "modern"}));
    assert_eq!(p.era(), Era::Modern);
    let r = p.request(
        "tools/call",
        json!({"name": "größe_✓", "arguments": {}}),
        WAIT,
    );
    assert_eq!(r, Ok(json!({"content": [], "resultType": "complete"})));
    let t0 = Instant::now();
    let r = p.request(
        "tools/call",
        json!({"name": "slow"}),
        Duration::from_millis(300),
    );
    assert_eq!(r, Err(Failure::Timeout(Duration::from_millis(300))));
    gone.recv_timeout(WAIT)
        .expect("the response stream was closed");
    assert!(t0.elapsed() < Duration::from_secs(5));
    p.shutdown("bye");
    thread::sleep(Duration::from_millis(100));
    let got: Vec<Posted> = seen.try_iter().collect();
    let s = |x: &str| Some(x.to_owned());
    let v = s(MODERN_VERSION);
    assert_eq!(
        got,
        vec![
            (
                "POST server/discover".into(),
                v.clone(),
                s("server/discover"),
                None,
                None
            ),
            (
                "POST tools/call".into(),
                v.clone(),
                s("tools/call"),
                s("=?base64?Z3LDtsOfZV/inJM=?="),
                None
            ),
            (
                "POST tools/call".into(),
                v.clone(),
                s("tools/call"),
                s("slow"),
                None
            ),
        ]
    );
}

// A legacy Streamable HTTP server that answers the probe with an HTTP error still gets
// initialize, and the session it hands out.
#[test]
fn a_refused_probe_falls_back_to_initialize() {
    use crate::upstream::peer::Era;
    let (seen_tx, seen) = unbounded();
    let server = Server::start(move |mut rq| {
        let msg = record(&mut rq, &seen_tx);
        match (rq.method(), msg["method"].as_str()) {
            (tiny_http::Method::Get, _) => reply(rq, 405, "", &[]),
            (_, Some("initialize")) => {
                json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-9")])
            }
            (_, Some("server/discover")) => reply(
                rq,
                400,
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: no valid session ID"}}"#,
                &[("Content-Type", "application/json")],
            ),
            _ => reply(rq, 202, "", &[]),
        }
    });
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    let init = p.handshake(WAIT).unwrap();
    assert_eq!(
        (init.era, init.protocol_version.as_str()),
        (Era::Legacy, "2025-06-18")
    );
    let methods: Vec<String> = seen.try_iter().map(|s: Seen| s.1).collect();
    assert_eq!(methods[..2], ["server/discover", "initialize"]);
}

/// A legacy Streamable HTTP server for resumption tests: `initialize` hands out session
/// `s-r`; a GET without `Last-Event-ID` (the server's own stream) is refused with 405;
/// `tools/call` opens a stream with a priming event (`id: e-1`, `retry: RETRY`) and closes
/// it; a GET with `Last-Event-ID` goes to `resumed`, which gets the request's id too.
fn resuming_server(
    retry_ms: u64,
    resumed: impl Fn(tiny_http::Request, String, Value) + Send + Sync + 'static,
) -> Server {
    let call_id = Arc::new(Mutex::new(Value::Null));
    Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        if rq.method() == &tiny_http::Method::Get {
            return match header(&rq, "Last-Event-ID") {
                Some(last) => {
                    assert_eq!(header(&rq, "Mcp-Session-Id").as_deref(), Some("s-r"));
                    assert_eq!(header(&rq, "Accept").as_deref(), Some("text/event-stream"));
                    let id = lock(&call_id).clone();
                    resumed(rq, last, id)
                }
                None => reply(rq, 405, "", &[]),
            };
        }
        match msg["method"].as_str() {
            Some("initialize") => {
                json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-r")])
            }
            Some("tools/call") => {
                *lock(&call_id) = msg["id"].clone();
                let mut s = Stream::open(rq, &[]);
                s.raw(&format!("id: e-1\nretry: {retry_ms}\ndata: \n\n"));
                s.finish();
            }
            _ => reply(rq, 202, "", &[]),
        }
    })
}

// The response stream of a call closes after its priming event: the client waits the
// server's retry delay, resumes with GET and Last-Event-ID, and gets the answer there.
#[test]
fn a_closed_response_stream_is_resumed_after_the_retry_delay() {
    let (got_tx, got) = unbounded::<(String, Instant)>();
    let server = resuming_server(300, move |rq, last, id| {
        let _ = got_tx.send((last, Instant::now()));
        let mut s = Stream::open(rq, &[]);
        s.raw("id: e-2\n");
        s.event(None, &result(&id, json!({"resumed": true})).to_string());
        // Held open: the client ends it once answered.
        while s.raw(": wait\n\n") {
            thread::sleep(Duration::from_millis(20));
        }
    });
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    p.initialize(WAIT).unwrap();
    let t0 = Instant::now();
    let r = p.request("tools/call", json!({"name": "long"}), WAIT);
    assert_eq!(r, Ok(json!({"resumed": true})));
    let (last, at) = got.recv_timeout(WAIT).unwrap();
    assert_eq!(last, "e-1");
    assert!(at - t0 >= Duration::from_millis(300), "{:?}", at - t0);
    assert!(got.try_recv().is_err(), "one reconnection");
}

// Reconnections that bring nothing new are bounded; a server that refuses the GET fails
// the call at once; the modern era never resumes.
#[test]
fn resumption_is_bounded_and_needs_a_server_that_offers_it() {
    let (gets_tx, gets) = unbounded::<String>();
    let server = resuming_server(10, move |rq, last, _| {
        let _ = gets_tx.send(last);
        let mut s = Stream::open(rq, &[]);
        s.raw(": nothing new\n\n");
        s.finish();
    });
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    p.initialize(WAIT).unwrap();
    let r = p.request("tools/call", json!({"name": "long"}), WAIT);
    assert_eq!(
        r,
        Err(Failure::Disconnected(format!(
            "the server closed the response stream without answering; \
             {UPSTREAM_RESUME_ATTEMPTS} reconnections in a row (GET with Last-Event-ID) \
             brought nothing new"
        )))
    );
    let all: Vec<String> = gets.try_iter().collect();
    assert_eq!(
        all,
        vec!["e-1".to_owned(); UPSTREAM_RESUME_ATTEMPTS as usize]
    );

    let server = resuming_server(10, |rq, _, _| reply(rq, 405, "", &[]));
    let (p, _) = peer();
    connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
    p.initialize(WAIT).unwrap();
    let r = p.request("tools/call", json!({"name": "long"}), WAIT);
    assert_eq!(
        r,
        Err(Failure::Disconnected(
            "the server closed the response stream without answering, and resuming it \
             was refused: HTTP 405 Method Not Allowed"
                .into()
        ))
    );
}

// server/discover refused with -32022 naming the modern revision is asked once more (and
// the modern era chosen); refused again, or naming only legacy revisions, initialize
// follows.
#[test]
fn a_discover_refused_for_its_version_is_retried_with_a_listed_one() {
    use crate::upstream::peer::Era;
    let refuse = |supported: Value| {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": supported, "requested": "2026-07-28"}}})
        .to_string()
    };
    for (supported, refusals, era) in [
        (json!([MODERN_VERSION]), 1, Era::Modern),
        (json!([MODERN_VERSION]), 2, Era::Legacy),
        (json!(["2025-11-25"]), 1, Era::Legacy),
    ] {
        let (seen_tx, seen) = unbounded();
        let body_text = refuse(supported.clone());
        let count = Arc::new(Mutex::new(0));
        let server = Server::start(move |mut rq| {
            let msg = record(&mut rq, &seen_tx);
            match (rq.method(), msg["method"].as_str()) {
                (tiny_http::Method::Get, _) => reply(rq, 405, "", &[]),
                (_, Some("server/discover")) => {
                    let n = {
                        let mut c = lock(&count);
                        *c += 1;
                        *c
                    };
                    if n <= refusals {
                        reply(rq, 400, &body_text, &[("Content-Type", "application/json")])
                    } else {
                        json_reply(
                            rq,
                            result(
                                &msg["id"],
                                json!({"supportedVersions": [MODERN_VERSION],
                                    "capabilities": {}, "resultType": "complete"}),
                            ),
                            &[],
                        )
                    }
                }
                (_, Some("initialize")) => json_reply(rq, init_result(&msg["id"]), &[]),
                _ => reply(rq, 202, "", &[]),
            }
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        let init = p.handshake(WAIT).unwrap();
        assert_eq!(init.era, era, "{supported} refused {refusals} times");
        let methods: Vec<(String, Option<String>)> = seen
            .try_iter()
            .filter(|s: &Seen| s.0 == "POST")
            .map(|s| (s.1, s.3))
            .take(3)
            .collect();
        let m = |x: &str, v: Option<&str>| (x.to_owned(), v.map(str::to_owned));
        let expected = match (refusals, era) {
            (1, Era::Modern) => vec![
                m("server/discover", Some(MODERN_VERSION)),
                m("server/discover", Some(MODERN_VERSION)),
            ],
            (2, _) => vec![
                m("server/discover", Some(MODERN_VERSION)),
                m("server/discover", Some(MODERN_VERSION)),
                m("initialize", None),
            ],
            _ => vec![
                m("server/discover", Some(MODERN_VERSION)),
                m("initialize", None),
                m("notifications/initialized", Some("2025-06-18")),
            ],
        };
        assert_eq!(methods, expected, "{supported} refused {refusals} times");
    }
}

// A modern tools/call carries the Mcp-Param-* headers of the tool's annotations, and the
// configured headers cannot add or override them.
#[test]
fn a_modern_call_mirrors_annotated_parameters() {
    use crate::upstream::params::bindings;
    let (seen_tx, seen) = unbounded::<Vec<(String, String)>>();
    let server = Server::start(move |mut rq| {
        let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
        let params: Vec<(String, String)> = rq
            .headers()
            .iter()
            .filter(|h| {
                h.field
                    .as_str()
                    .as_str()
                    .to_ascii_lowercase()
                    .starts_with("mcp-param-")
            })
            .map(|h| (h.field.as_str().to_string(), h.value.to_string()))
            .collect();
        let id = msg["id"].clone();
        match msg["method"].as_str() {
            Some("server/discover") => json_reply(
                rq,
                result(
                    &id,
                    json!({"supportedVersions": [MODERN_VERSION], "capabilities": {"tools": {}},
                        "resultType": "complete"}),
                ),
                &[],
            ),
            _ => {
                let _ = seen_tx.send(params);
                json_reply(rq, result(&id, json!({"content": []})), &[])
            }
        }
    });
    let (p, _) = peer();
    let configured = [("mcp-param-region".to_owned(), "forged".to_owned())];
    connect(&p, &format!("{}/mcp", server.base), &configured, WAIT).unwrap();
    p.handshake(WAIT).unwrap();
    assert!(p.mirrors_tool_params());
    let schema = json!({"properties": {"region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"}}});
    p.set_param_bindings(HashMap::from([(
        "t".to_owned(),
        bindings(&schema).unwrap(),
    )]));
    let call = |name: &str, args: Value| {
        p.request("tools/call", json!({"name": name, "arguments": args}), WAIT)
            .unwrap();
        seen.recv_timeout(WAIT).unwrap()
    };
    let h = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        call("t", json!({"region": "Zürich", "n": 42})),
        vec![
            // Header names travel in lower case (they are case-insensitive).
            h("mcp-param-region", "=?base64?WsO8cmljaA==?="),
            h("mcp-param-n", "42")
        ]
    );
    assert_eq!(
        call("t", json!({"region": null})),
        Vec::<(String, String)>::new()
    );
    assert_eq!(
        call("other", json!({"region": "x"})),
        Vec::<(String, String)>::new()
    );
}

#[test]
fn urls_are_checked() {
    let (p, _) = peer();
    assert!(connect(&p, "ftp://h/x", &[], WAIT).is_err());
    assert!(connect(&p, "http://bad host/", &[], WAIT).is_err());
    let https = connect(&p, "https://h/mcp", &[], WAIT);
    assert_eq!(https.is_ok(), cfg!(feature = "tls"), "{https:?}");
}
