//! The MCP client against Streamable HTTP servers that behave as the MCP specification allows
//! and a careless client would not expect, through the real binary: a legacy server that
//! closes a call's response stream and expects the client to resume it, a modern server that
//! refuses the first `server/discover` for its version and marks tool parameters with
//! `x-mcp-header` (some of them invalidly), and a server that answers 401 (no legacy SSE
//! fallback). Each server is a small tiny_http fixture in this file.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};

use crate::support::{wait_for, Server};
use crate::upstream::{clients, wait_status};

/// One request as the fixture saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    rpc: String,
    headers: Vec<(String, String)>,
    at: Instant,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A tiny_http server on a free loopback port, each request on its own thread, every request
/// recorded.
struct Fixture {
    server: Arc<tiny_http::Server>,
    url: String,
    seen: Receiver<Seen>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

impl Fixture {
    fn start(handler: impl Fn(tiny_http::Request, Value) + Send + Sync + 'static) -> Fixture {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let (tx, seen) = unbounded();
        let handler = Arc::new(handler);
        let s = server.clone();
        thread::spawn(move || {
            for mut rq in s.incoming_requests() {
                let (h, tx): (_, Sender<Seen>) = (handler.clone(), tx.clone());
                thread::spawn(move || {
                    let mut text = String::new();
                    let _ = rq.as_reader().read_to_string(&mut text);
                    let msg: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    let _ = tx.send(Seen {
                        method: rq.method().to_string(),
                        rpc: msg["method"].as_str().unwrap_or("-").to_owned(),
                        headers: rq
                            .headers()
                            .iter()
                            .map(|h| (h.field.as_str().to_string(), h.value.to_string()))
                            .collect(),
                        at: Instant::now(),
                    });
                    h(rq, msg)
                });
            }
        });
        Fixture {
            server,
            url: format!("http://127.0.0.1:{port}/mcp"),
            seen,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.try_iter().collect()
    }
}

fn reply(rq: tiny_http::Request, status: u16, body: &str, headers: &[(&str, &str)]) {
    let mut r = tiny_http::Response::from_string(body).with_status_code(status);
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            r.add_header(h);
        }
    }
    let _ = rq.respond(r);
}

fn answer(rq: tiny_http::Request, id: &Value, result: Value) {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    reply(
        rq,
        200,
        &body,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", "s-1"),
        ],
    );
}

/// A chunked event stream over the raw socket.
struct Stream(Box<dyn Write + Send>);

impl Stream {
    fn open(rq: tiny_http::Request) -> Stream {
        let mut out = rq.into_writer();
        let _ = out.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: s-1\r\n\
              Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let _ = out.flush();
        Stream(out)
    }

    fn raw(&mut self, text: &str) -> bool {
        write!(self.0, "{:x}\r\n{text}\r\n", text.len()).is_ok() && self.0.flush().is_ok()
    }

    fn finish(mut self) {
        let _ = self.0.write_all(b"0\r\n\r\n");
        let _ = self.0.flush();
    }
}

// A legacy server closes the response stream of a call right after a priming event (id,
// retry: 500) and answers on the stream the client resumes with GET and Last-Event-ID: the
// call succeeds, and the GET came no sooner than the retry delay after the stream closed.
#[test]
fn a_call_whose_stream_the_server_closes_is_resumed_and_answered() {
    let pending = Arc::new(Mutex::new(None::<Value>));
    let closed_at = Arc::new(Mutex::new(None::<Instant>));
    let (p2, c2) = (pending.clone(), closed_at.clone());
    let fx = Fixture::start(move |rq, msg| {
        if rq.method() == &tiny_http::Method::Get {
            let mut s = Stream::open(rq);
            s.raw("id: g-1\nretry: 500\ndata: \n\n");
            let id = p2.lock().map(|mut p| p.take()).unwrap_or(None);
            if let Some(id) = id {
                let answer = json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "resumed"}]}});
                s.raw(&format!("event: message\nid: g-2\ndata: {answer}\n\n"));
            }
            while s.raw(": idle\n\n") {
                thread::sleep(Duration::from_millis(50));
            }
            return;
        }
        match msg["method"].as_str() {
            Some("initialize") => answer(
                rq,
                &msg["id"],
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "resuming"}}),
            ),
            Some("tools/list") => answer(
                rq,
                &msg["id"],
                json!({"tools": [{"name": "long", "inputSchema": {"type": "object"}}]}),
            ),
            Some("tools/call") => {
                if let Ok(mut p) = p2.lock() {
                    *p = Some(msg["id"].clone());
                }
                let mut s = Stream::open(rq);
                s.raw("id: p-1\nretry: 500\ndata: \n\n");
                if let Ok(mut c) = c2.lock() {
                    *c = Some(Instant::now());
                }
                s.finish();
            }
            Some("server/discover") => reply(rq, 400, "", &[]),
            _ if msg.get("id").is_some() => answer(rq, &msg["id"], json!({})),
            _ => reply(rq, 202, "", &[]),
        }
    });
    let s = Server::start(&["--mcp-client", &format!("res:{}", fx.url)]);
    let c = s.client();
    let st = wait_status(&c, "res", "connected");
    assert_eq!(st["transport"], "http", "{st}");
    let r = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "res/long", "arguments": {}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "resumed", "{r}");
    let seen = fx.seen();
    let resumed: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.method == "GET" && s.header("Last-Event-ID").is_some())
        .collect();
    assert_eq!(resumed.len(), 1, "{seen:?}");
    assert_eq!(resumed[0].header("Last-Event-ID"), Some("p-1"));
    assert_eq!(resumed[0].header("Mcp-Session-Id"), Some("s-1"));
    let closed = closed_at
        .lock()
        .unwrap()
        .expect("the call's stream was closed");
    let waited = resumed[0].at - closed;
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
}

/// The tools of the modern fixture: one valid tool with annotations, one without, and one per
/// way an annotation can be invalid.
fn modern_tools() -> Value {
    let one = |name: &str, prop: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": {"v": prop}}});
    json!([
        {"name": "valid", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "greeting": {"type": "string", "x-mcp-header": "Greeting"},
            "query": {"type": "string"}
        }}},
        {"name": "plain", "inputSchema": {"type": "object"}},
        one("bad_empty", json!({"type": "string", "x-mcp-header": ""})),
        one("bad_object", json!({"type": "object", "x-mcp-header": "Data"})),
        one("bad_number", json!({"type": "number", "x-mcp-header": "F"})),
        one("bad_space", json!({"type": "string", "x-mcp-header": "My Region"})),
        one("bad_ascii", json!({"type": "string", "x-mcp-header": "Région"})),
        {"name": "bad_duplicate", "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "MyField"},
            "b": {"type": "string", "x-mcp-header": "myfield"}
        }}},
        {"name": "bad_items", "inputSchema": {"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}
        }}},
    ])
}

// A modern server refuses the first server/discover with -32022 listing 2026-07-28: the
// client asks again and connects in the modern era. Its tools with invalid x-mcp-header
// annotations are left out of the catalog (and counted); a call of the valid one carries the
// annotated arguments as Mcp-Param-* headers, encoded, and none for absent or null ones.
#[test]
fn a_modern_server_gets_a_version_retry_and_its_parameter_headers() {
    let refused = Arc::new(Mutex::new(false));
    let fx = Fixture::start(move |rq, msg| {
        if rq.method() != &tiny_http::Method::Post {
            return reply(rq, 405, "", &[]);
        }
        let id = msg["id"].clone();
        match msg["method"].as_str() {
            Some("server/discover") => {
                let first = refused
                    .lock()
                    .map(|mut r| !std::mem::replace(&mut *r, true));
                if first.unwrap_or(false) {
                    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}});
                    return reply(
                        rq,
                        400,
                        &body.to_string(),
                        &[("Content-Type", "application/json")],
                    );
                }
                answer(
                    rq,
                    &id,
                    json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                        "resultType": "complete",
                        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "headers"}}}),
                )
            }
            Some("tools/list") => answer(
                rq,
                &id,
                json!({"tools": modern_tools(), "resultType": "complete"}),
            ),
            Some("tools/call") => answer(
                rq,
                &id,
                json!({"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}),
            ),
            Some("subscriptions/listen") => reply(rq, 404, "", &[]),
            _ => reply(rq, 400, "unexpected", &[]),
        }
    });
    let s = Server::start(&["--mcp-client", &format!("hdr:{}", fx.url)]);
    let c = s.client();
    let st = wait_status(&c, "hdr", "connected");
    assert_eq!(st["protocol_era"], "modern", "{st}");
    assert_eq!(st["skipped_tools_by_reason"]["invalid_header"], 7, "{st}");
    assert_eq!(st["skipped_tools"], 7, "{st}");
    let discovers: Vec<Seen> = fx
        .seen()
        .into_iter()
        .filter(|s| s.rpc == "server/discover")
        .collect();
    assert_eq!(discovers.len(), 2, "{discovers:?}");
    assert_eq!(
        discovers[1].header("MCP-Protocol-Version"),
        Some("2026-07-28")
    );
    let tools = c.get_ok("/api/mcp-tools?server=hdr");
    let mut names: Vec<String> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["original_name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["plain", "valid"], "{tools}");

    let call = |tool: &str, args: Value| -> Seen {
        let r = c.post_ok(
            "/api/mcp-tools/call",
            &json!({"tool": format!("hdr/{tool}"), "arguments": args}),
        );
        assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");
        let seen = fx.seen();
        seen.into_iter()
            .rev()
            .find(|s| s.rpc == "tools/call")
            .expect("the call reached the server")
    };
    let params = |s: &Seen| -> Vec<(String, String)> {
        let mut p: Vec<(String, String)> = s
            .headers
            .iter()
            .filter(|(k, _)| k.to_ascii_lowercase().starts_with("mcp-param-"))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        p.sort();
        p
    };
    let h = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let seen = call(
        "valid",
        json!({"region": "us-west1", "priority": 42, "verbose": false,
            "greeting": "Hello, 世界", "query": "SELECT 1"}),
    );
    assert_eq!(seen.header("Mcp-Name"), Some("valid"));
    assert_eq!(
        params(&seen),
        [
            h("mcp-param-greeting", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            h("mcp-param-priority", "42"),
            h("mcp-param-region", "us-west1"),
            h("mcp-param-verbose", "false"),
        ]
    );
    let seen = call("valid", json!({"region": " padded ", "verbose": null}));
    assert_eq!(
        params(&seen),
        [h("mcp-param-region", "=?base64?IHBhZGRlZCA=?=")]
    );
    assert!(params(&call("plain", json!({"region": "x"}))).is_empty());
}

// A URL without a transport answered 401 is a Streamable HTTP server asking for
// authorization, not a legacy SSE one: the connection fails with the 401 and no GET is tried;
// a 404 still sends it to legacy SSE.
#[test]
fn a_401_does_not_fall_back_to_legacy_sse() {
    let fx = Fixture::start(|rq, _| {
        reply(
            rq,
            401,
            "",
            &[("WWW-Authenticate", "Bearer realm=\"test\"")],
        )
    });
    let gone = Fixture::start(|rq, _| reply(rq, 404, "", &[]));
    let s = Server::start(&[
        "--mcp-client",
        &format!("auth:{}", fx.url),
        "--mcp-client",
        &format!("gone:{}", gone.url),
        "--mcp-connect-timeout-s",
        "5",
    ]);
    let c = s.client();
    let st = wait_for("auth to fail", || {
        let st = clients(&c)["auth"].clone();
        (st["status"] != "connecting" && st["error"].is_string()).then_some(st)
    });
    let error = st["error"].as_str().unwrap_or("");
    assert!(error.contains("401"), "{st}");
    assert!(!error.contains("SSE"), "{st}");
    let methods: Vec<String> = fx.seen().into_iter().map(|s| s.method).collect();
    assert!(!methods.is_empty());
    assert!(methods.iter().all(|m| m == "POST"), "{methods:?}");

    let st = wait_for("gone to fail", || {
        let st = clients(&c)["gone"].clone();
        (st["status"] != "connecting" && st["error"].is_string()).then_some(st)
    });
    assert!(
        st["error"].as_str().unwrap_or("").contains("legacy SSE"),
        "{st}"
    );
    assert!(gone.seen().iter().any(|s| s.method == "GET"));
}
