//! MCP over HTTP (`--mcp-sse`) end to end against the real binary: Streamable HTTP at `/mcp`,
//! the legacy HTTP+SSE transport, broadcasts to many clients, vanished and stalled clients,
//! Origin/Host/header checks, progress on a POST's own stream, shutdown with streams open, a
//! measurement of notification latency, and the stateless revision 2026-07-28 on the same
//! endpoint (headers, errors, keep-alives, cancellation by a closed stream, listen streams).
//! Every wait has a deadline.

use std::io::{self, BufRead, BufReader, Read};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use serde_json::{json, Value};

use crate::mcp_support::{
    initialize, initialize_custom, initialized_note, mcp_post, modern_envelope_custom, rpc,
    streamable_session, streamable_session_custom, tool_json, McpServer,
};
use crate::support::{
    call_start_body, deadline, http, open_response, pause_id, proc_status_kib, raw_request,
    wait_for, Client, OpenResponse, Resp, Server, TempDir,
};

// ---------------------------------------------------------------------------------------------
// A test-side SSE client over a raw socket.

/// One server-sent event, stamped when the blank line ending it was read.
#[derive(Debug)]
struct Ev {
    name: String,
    data: String,
    /// The event's `id` and `retry` fields, if it had them.
    id: Option<String>,
    retry: Option<String>,
    at: Instant,
}

/// A chunked body decoded incrementally; it reads as EOF at the terminating chunk.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                return Ok(0);
            }
            self.left = usize::from_str_radix(line.trim(), 16).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {line:?}"))
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        if n > 0 && self.left == 0 {
            self.inner.read_exact(&mut [0u8; 2])?;
        }
        Ok(n)
    }
}

/// An open response whose body a reader thread parses as SSE into a bounded channel: when the
/// test stops taking events and the channel is full, the thread stops reading the socket.
struct Sse {
    status: u16,
    headers: Vec<(String, String)>,
    rx: Receiver<Ev>,
    sock: TcpStream,
    /// Messages seen while waiting for another one, with their arrival times.
    pending: Vec<(Value, Instant)>,
}

impl Sse {
    fn open(
        port: u16,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        capacity: usize,
    ) -> Sse {
        Sse::open_as(port, method, path, headers, body, capacity, false)
    }

    /// As [`Sse::open`], and every comment line (a keep-alive) is an event named `:`.
    fn open_as(
        port: u16,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        capacity: usize,
        comments: bool,
    ) -> Sse {
        let request = raw_request(port, method, path, headers, body.map(str::as_bytes));
        let OpenResponse {
            status,
            headers,
            body: reader,
        } = open_response(port, &request, deadline() + Duration::from_secs(20));
        let sock = reader.get_ref().try_clone().unwrap();
        let chunked = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
        });
        let mut body: Box<dyn BufRead + Send> = if chunked {
            Box::new(BufReader::new(Chunked {
                inner: reader,
                left: 0,
                done: false,
            }))
        } else {
            Box::new(reader)
        };
        let (tx, rx) = bounded(capacity);
        std::thread::spawn(move || {
            let (mut name, mut data) = (String::new(), Vec::<String>::new());
            let (mut id, mut retry) = (None::<String>, None::<String>);
            let mut line = String::new();
            loop {
                line.clear();
                if !matches!(body.read_line(&mut line), Ok(n) if n > 0) {
                    return; // EOF, the terminating chunk, a read timeout or a reset
                }
                let l = line.trim_end_matches(['\r', '\n']);
                if l.is_empty() {
                    if !(name.is_empty() && data.is_empty() && id.is_none() && retry.is_none()) {
                        let ev = Ev {
                            name: std::mem::take(&mut name),
                            data: data.join("\n"),
                            id: id.take(),
                            retry: retry.take(),
                            at: Instant::now(),
                        };
                        data.clear();
                        if tx.send(ev).is_err() {
                            return;
                        }
                    }
                } else if let Some(v) = l.strip_prefix("event:") {
                    name = v.trim_start().to_owned();
                } else if let Some(v) = l.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                } else if let Some(v) = l.strip_prefix("id:") {
                    id = Some(v.trim_start().to_owned());
                } else if let Some(v) = l.strip_prefix("retry:") {
                    retry = Some(v.trim_start().to_owned());
                } else if comments && l.starts_with(':') {
                    let ev = Ev {
                        name: ":".into(),
                        data: l.to_owned(),
                        id: None,
                        retry: None,
                        at: Instant::now(),
                    };
                    if tx.send(ev).is_err() {
                        return;
                    }
                } // comments (`: ping`) and other fields are ignored
            }
        });
        Sse {
            status,
            headers,
            rx,
            sock,
            pending: Vec::new(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn next_event(&self, until: Instant) -> Result<Ev, RecvTimeoutError> {
        self.rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
    }

    /// The next JSON-RPC message matching `pred` and when it arrived; others are kept.
    fn message_at(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> (Value, Instant) {
        if let Some(i) = self.pending.iter().position(|(m, _)| pred(m)) {
            return self.pending.remove(i);
        }
        let until = Instant::now() + within;
        loop {
            match self.next_event(until) {
                // A priming event (an id, empty data): no message, as for an EventSource.
                Ok(ev) if ev.data.is_empty() && ev.name.is_empty() => {}
                Ok(ev) => {
                    assert_eq!(ev.name, "message", "unexpected event {ev:?}");
                    let m: Value = serde_json::from_str(&ev.data)
                        .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", ev.data));
                    if pred(&m) {
                        return (m, ev.at);
                    }
                    self.pending.push((m, ev.at));
                }
                Err(e) => panic!(
                    "no matching message within {within:?} ({e:?}); other messages: {:?}",
                    self.pending
                        .iter()
                        .map(|(m, _)| &m["method"])
                        .collect::<Vec<_>>()
                ),
            }
        }
    }

    fn message(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        self.message_at(within, pred).0
    }

    /// Whether the stream ends (EOF or the terminating chunk) within `within`.
    fn ended(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            match self.next_event(until) {
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => return true,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

impl Drop for Sse {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

// ---------------------------------------------------------------------------------------------
// Transport helpers.

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
const JSON: (&str, &str) = ("Content-Type", "application/json");
const ACCEPT: (&str, &str) = ("Accept", ACCEPT_BOTH);
const EVIL: &str = "http://evil.example";

/// The server-to-client stream of a Streamable HTTP session.
fn get_stream(port: u16, sid: &str) -> Sse {
    let g = Sse::open(
        port,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", sid)],
        None,
        1024,
    );
    assert_eq!(g.status, 200);
    assert_eq!(g.header("Mcp-Session-Id"), Some(sid));
    g
}

/// A legacy HTTP+SSE session: the stream and the endpoint it announced.
struct Legacy {
    sse: Sse,
    port: u16,
    endpoint: String,
    next_id: i64,
}

impl Legacy {
    fn connect(port: u16) -> Legacy {
        Legacy::connect_with(port, 4096)
    }

    /// Opens `/mcp/sse`; the endpoint event must come at once (flushed, not buffered).
    fn connect_with(port: u16, capacity: usize) -> Legacy {
        let sse = Sse::open(
            port,
            "GET",
            "/mcp/sse",
            &[("Accept", "text/event-stream")],
            None,
            capacity,
        );
        assert_eq!(sse.status, 200);
        assert!(sse
            .header("Content-Type")
            .unwrap()
            .starts_with("text/event-stream"));
        let ev = sse
            .next_event(Instant::now() + Duration::from_secs(2))
            .expect("the endpoint event within 2 s");
        assert_eq!(ev.name, "endpoint", "{ev:?}");
        let id = ev
            .data
            .strip_prefix("/mcp/messages?session_id=")
            .unwrap_or_else(|| panic!("endpoint {:?}", ev.data));
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id:?}"
        );
        Legacy {
            endpoint: ev.data.clone(),
            sse,
            port,
            next_id: 1,
        }
    }

    fn post(&self, msg: &Value) -> Resp {
        Client { port: self.port }.post(&self.endpoint, msg)
    }

    /// Posts a request (202) and waits for its response on the stream.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let r = self.post(&rpc(id, method, params));
        assert_eq!(r.status, 202, "{method}: {}", r.text());
        assert_eq!(r.text(), "Accepted");
        self.sse.message(deadline(), |m| {
            m["id"] == id && (m.get("result").is_some() || m.get("error").is_some())
        })
    }

    /// The handshake without the custom notifications' capability.
    fn init_plain(&mut self) -> &mut Legacy {
        let r = self.request("initialize", initialize("2024-11-05")["params"].clone());
        assert_eq!(r["result"]["protocolVersion"], "2024-11-05", "{r}");
        assert_eq!(self.post(&initialized_note()).status, 202);
        assert_eq!(self.request("ping", json!({}))["result"], json!({}));
        self
    }

    /// The handshake, declaring the custom notifications (these tests watch pauses through
    /// them). The notification is handled after its 202; the ping round trip that follows makes
    /// it all but certain the session counts as initialized for broadcasts.
    fn init(&mut self) -> &mut Legacy {
        let r = self.request(
            "initialize",
            initialize_custom("2024-11-05")["params"].clone(),
        );
        assert_eq!(r["result"]["protocolVersion"], "2024-11-05", "{r}");
        assert_eq!(self.post(&initialized_note()).status, 202);
        assert_eq!(self.request("ping", json!({}))["result"], json!({}));
        self
    }

    fn call_ok(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(r["result"]["isError"], false, "{tool}: {r}");
        tool_json(&r["result"])
    }
}

/// A simulated instrumented program hits the breakpoint `name`: the pause id and when the
/// HTTP response of `/api/call/start` was complete.
fn hit(app: &Client, name: &str) -> (String, Instant) {
    let start = app.post_ok("/api/call/start", &call_start_body(name, vec![], json!({})));
    (pause_id(&start), Instant::now())
}

fn add_breakpoint(app: &Client, name: &str) {
    app.post_ok("/api/breakpoints", &json!({"function_name": name}));
}

fn resume(app: &Client, pause: &str) {
    app.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
}

fn is_paused(pause: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m| {
        m["method"] == "notifications/breakpoint/execution_paused"
            && m["params"]["pause_id"] == pause
    }
}

fn ping_status(port: u16, endpoint: &str) -> u16 {
    Client { port }
        .post(endpoint, &rpc(99, "ping", json!({})))
        .status
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn streamable_http_sessions_answer_json_and_end_with_delete() {
    let s = Server::start(&["--mcp-sse"]);
    let port = s.port;
    let sid = streamable_session(port, "2025-11-25");

    let r = mcp_post(port, Some(&sid), rpc(1, "tools/list", json!({})));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("Content-Type")
        .unwrap()
        .starts_with("application/json"));
    let tools = r.json()["result"]["tools"].clone();
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "breakpoint_add"));

    let call = rpc(
        2,
        "tools/call",
        json!({"name": "breakpoint_add", "arguments": {"function_name": "add"}}),
    );
    let r = mcp_post(port, Some(&sid), &call);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["id"], 2);
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert!(s.client().get_ok("/api/breakpoints")["breakpoints"]
        .as_array()
        .unwrap()
        .contains(&json!("add")));

    let ping = rpc(3, "ping", json!({}));
    let missing = mcp_post(port, None, &ping);
    assert_eq!(missing.status, 400, "{}", missing.text());
    assert_eq!(missing.json()["error"]["code"], -32600);
    let unknown = mcp_post(port, Some(&"0".repeat(32)), &ping);
    assert_eq!(unknown.status, 404, "{}", unknown.text());

    // The server-to-client stream needs the session too.
    let get = |sid: &str| {
        let h = [("Accept", "text/event-stream"), ("Mcp-Session-Id", sid)];
        http(
            port,
            "GET",
            "/mcp",
            if sid.is_empty() { &h[..1] } else { &h },
            None,
        )
        .status
    };
    assert_eq!(get(""), 400);
    assert_eq!(get(&"0".repeat(32)), 404);

    // DELETE ends the session and its open stream.
    let stream = get_stream(port, &sid);
    let del = http(port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], None);
    assert_eq!(del.status, 200, "{}", del.text());
    assert!(
        stream.ended(deadline()),
        "the GET stream of a deleted session ends"
    );
    assert_eq!(
        mcp_post(port, Some(&sid), &ping).status,
        404,
        "an ended session"
    );
    let again = http(port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], None);
    assert_eq!(again.status, 404);

    // Batches: 2025-03-26 allowed JSON-RPC arrays, later revisions refuse them with -32600.
    let batch = json!([
        rpc(1, "ping", json!({})),
        initialized_note(),
        rpc(2, "tools/list", json!({}))
    ]);
    let old = streamable_session(port, "2025-03-26");
    let r = mcp_post(port, Some(&old), &batch);
    assert_eq!(r.status, 200, "{}", r.text());
    let answers = r.json();
    let answers = answers.as_array().expect("an array of responses");
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[0]["result"], json!({}));
    assert_eq!(answers[1]["id"], 2);
    assert!(answers[1]["result"]["tools"].is_array());
    let new = streamable_session(port, "2025-06-18");
    let r = mcp_post(port, Some(&new), &batch);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32600);
}

#[test]
fn legacy_sse_announces_its_endpoint_at_once_and_answers_on_the_stream() {
    let s = Server::start(&["--mcp-sse"]);
    let mut l = Legacy::connect(s.port);
    assert_eq!(l.sse.header("Cache-Control"), Some("no-cache"));
    assert_eq!(l.sse.header("X-Accel-Buffering"), Some("no"));
    let r = l.request("initialize", initialize("2024-11-05")["params"].clone());
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(
        r["result"]["serverInfo"]["name"],
        "cideldill-breakpoint-server"
    );
    assert_eq!(l.post(&initialized_note()).status, 202);

    l.call_ok("breakpoint_add", json!({"function_name": "mul"}));
    let listed = l.call_ok("breakpoint_list_breakpoints", json!({}));
    assert!(listed["breakpoints"]
        .as_array()
        .unwrap()
        .contains(&json!("mul")));

    let client = s.client();
    let ping = rpc(50, "ping", json!({}));
    for path in ["/mcp/messages", "/mcp/messages?session_id="] {
        let r = client.post(path, &ping);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
    }
    let unknown = format!("/mcp/messages?session_id={}", "0".repeat(32));
    assert_eq!(client.post(&unknown, &ping).status, 404);
    let garbage = client.request("POST", &l.endpoint, Some(b"{this is not json"));
    assert_eq!(garbage.status, 400, "{}", garbage.text());
    // Valid JSON that is no JSON-RPC message: accepted, answered with -32600 on the stream.
    assert_eq!(l.post(&json!({"foo": 1})).status, 202);
    let err = l.sse.message(deadline(), |m| m.get("error").is_some());
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert_eq!(err["id"], Value::Null);
    // The session survives all that.
    assert_eq!(l.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn a_pause_reaches_two_legacy_sessions_and_a_streamable_get_stream() {
    let s = Server::start(&["--mcp-sse"]);
    let mut a = Legacy::connect(s.port);
    a.init();
    let mut b = Legacy::connect(s.port);
    b.init();
    let sid = streamable_session_custom(s.port, "2025-11-25");
    let mut g = get_stream(s.port, &sid);

    let app = s.client();
    add_breakpoint(&app, "add");
    let (p, _) = hit(&app, "add");
    for stream in [&mut a.sse, &mut b.sse, &mut g] {
        let n = stream.message(deadline(), is_paused(&p));
        assert_eq!(n["params"]["method_name"], "add");
        assert_eq!(n["params"]["pause_reason"], "breakpoint");
        assert!(n.get("id").is_none(), "a notification: {n}");
    }
}

/// The custom `notifications/breakpoint/*` go to a client that declared their capability and
/// to no other, on every transport alike: legacy HTTP+SSE, a Streamable HTTP session's GET
/// stream and stdio. (The server's own capabilities in the `initialize` answer name those
/// methods; on a legacy stream that answer arrives as an event, which is not a notification.)
/// Each stream is read up to the `resources/list_changed` the same pause sends after them.
#[test]
fn custom_notifications_follow_one_rule_on_every_transport() {
    let s = Server::start(&["--mcp-sse"]);
    let mut plain_sse = Legacy::connect(s.port);
    plain_sse.init_plain();
    let mut custom_sse = Legacy::connect(s.port);
    custom_sse.init();
    let plain_sid = streamable_session(s.port, "2025-11-25");
    let mut plain_get = get_stream(s.port, &plain_sid);
    let custom_sid = streamable_session_custom(s.port, "2025-11-25");
    let mut custom_get = get_stream(s.port, &custom_sid);
    let plain_stdio = McpServer::beside(&s, &[]);
    plain_stdio.request("initialize", initialize("2025-11-25")["params"].clone());
    plain_stdio.send(&initialized_note());
    let custom_stdio = McpServer::beside(&s, &[]);
    custom_stdio.request(
        "initialize",
        initialize_custom("2025-11-25")["params"].clone(),
    );
    custom_stdio.send(&initialized_note());
    assert_eq!(plain_stdio.request("ping", json!({}))["result"], json!({}));
    assert_eq!(custom_stdio.request("ping", json!({}))["result"], json!({}));

    let app = s.client();
    add_breakpoint(&app, "add");
    let (p, _) = hit(&app, "add");
    let listed = |m: &Value| m["method"] == "notifications/resources/list_changed";
    let custom = |m: &Value| {
        m["method"]
            .as_str()
            .is_some_and(|n| n.starts_with("notifications/breakpoint/"))
    };
    for (what, stream, declared) in [
        ("legacy SSE", &mut plain_sse.sse, false),
        ("legacy SSE", &mut custom_sse.sse, true),
        ("Streamable HTTP", &mut plain_get, false),
        ("Streamable HTTP", &mut custom_get, true),
    ] {
        stream.message(deadline(), listed);
        let seen: Vec<&Value> = stream
            .pending
            .iter()
            .map(|(m, _)| m)
            .filter(|m| custom(m))
            .collect();
        if declared {
            assert!(
                seen.iter().any(|m| is_paused(&p)(m)),
                "{what}, declared: no execution_paused before list_changed: {seen:?}"
            );
        } else {
            assert!(seen.is_empty(), "{what}, not declared, got {seen:?}");
        }
    }
    let note = custom_stdio.notification("notifications/breakpoint/execution_paused");
    assert_eq!(note["params"]["pause_id"], p.as_str());
    let before_list = std::cell::RefCell::new(Vec::new());
    plain_stdio
        .take(deadline(), |m| {
            before_list.borrow_mut().push(m.clone());
            listed(m)
        })
        .expect("stdio: list_changed");
    let before_list = before_list.into_inner();
    assert!(
        !before_list.iter().any(custom),
        "stdio, not declared, got {before_list:?}"
    );
}

#[test]
fn a_client_that_vanishes_mid_stream_is_dropped_while_others_are_served() {
    let s = Server::start(&["--mcp-sse"]);
    let app = s.client();
    let mut gone = Legacy::connect(s.port);
    gone.init();
    let gone_endpoint = gone.endpoint.clone();
    let mut stay = Legacy::connect(s.port);
    stay.init();
    add_breakpoint(&app, "f");
    let (p, _) = hit(&app, "f");
    gone.sse.message(deadline(), is_paused(&p));
    stay.sse.message(deadline(), is_paused(&p));

    drop(gone);
    resume(&app, &p); // the next broadcast finds the socket closed
    let mut broadcasts = 1;
    wait_for("the vanished session to be dropped", || {
        if ping_status(s.port, &gone_endpoint) == 404 {
            return Some(());
        }
        // Not noticed yet: one more broadcast, which the remaining client must still get.
        let (p, _) = hit(&app, "f");
        stay.sse.message(deadline(), is_paused(&p));
        resume(&app, &p);
        broadcasts += 1;
        None
    });
    eprintln!("vanished client dropped after {broadcasts} broadcast(s)");
    assert_eq!(stay.request("ping", json!({}))["result"], json!({}));
    let (p, _) = hit(&app, "f");
    stay.sse.message(deadline(), is_paused(&p));
}

#[test]
fn a_client_that_stops_reading_is_dropped_without_holding_memory() {
    let s = Server::start(&["--mcp-sse"]);
    let app = s.client();
    // Two events fit in its channel; then its reader thread stops reading the socket.
    let mut stalled = Legacy::connect_with(s.port, 2);
    stalled.init();
    let mut reader = Legacy::connect_with(s.port, 1 << 16);
    reader.init();
    // Log messages repeat the method name: each round then sends four copies of it to every
    // session, while the server's own state (the open call) keeps one.
    for l in [&mut stalled, &mut reader] {
        let r = l.request("logging/setLevel", json!({"level": "info"}));
        assert_eq!(r["result"], json!({}), "{r}");
    }
    // The longest name a client may send (`limits::MAX_FUNCTION_NAME_BYTES`).
    let name = format!("big_{}", "x".repeat(4_000));
    add_breakpoint(&app, &name);
    let mut body = call_start_body("big", vec![], json!({}));
    body["method_name"] = json!(name);
    // No target item: only the open call keeps the long name.
    body["target"] = Value::Null;
    let body = body.to_string();
    let rss_before = proc_status_kib(s.pid(), "VmRSS");

    let started = Instant::now();
    let until = started + deadline() + Duration::from_secs(5);
    // ~16 KB per round and session: the stalled session's queue (1,024 messages) fills once
    // the kernel's socket buffers (a few MiB) are full. Rounds go on until the stalled session
    // is gone (kernel buffers differ), 90 at least.
    let mut dropped_at = None;
    let mut rounds = 0;
    while rounds < 90 || (dropped_at.is_none() && rounds < 4000) {
        rounds += 1;
        let round = rounds;
        let r = app.request("POST", "/api/call/start", Some(body.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.text());
        let p = pause_id(&r.json());
        // The reading client gets every pause, in order, as it happens.
        loop {
            let ev = reader.sse.next_event(until).unwrap_or_else(|e| {
                panic!("round {round}: no execution_paused for the reading client ({e:?})")
            });
            // Checked without parsing 100 KB of JSON per event (the test is a debug build).
            if ev
                .data
                .contains("\"notifications/breakpoint/execution_paused\"")
            {
                assert!(
                    ev.data.contains(&format!("\"pause_id\":\"{p}\"")),
                    "round {round}"
                );
                assert!(
                    ev.data.contains(&name),
                    "round {round}: the whole method name"
                );
                break;
            }
        }
        resume(&app, &p);
        if dropped_at.is_none() && round % 5 == 0 && ping_status(s.port, &stalled.endpoint) == 404 {
            dropped_at = Some(round);
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(reader.request("ping", json!({}))["result"], json!({}));
    assert_eq!(
        ping_status(s.port, &reader.endpoint),
        202,
        "the reader stays"
    );
    wait_for("the stalled session to be dropped", || {
        (ping_status(s.port, &stalled.endpoint) == 404).then_some(())
    });
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    // Once its client reads again, the dropped session's stream drains and ends.
    assert!(
        stalled.sse.ended(deadline()),
        "the stream of a dropped session ends"
    );
    eprintln!(
        "stalled client: {rounds} rounds in {elapsed:?}, stalled session dropped by round \
         {dropped_at:?}; server RSS {rss_before} KiB -> {rss_after} KiB"
    );
    assert!(
        rss_after < rss_before + 64 * 1024,
        "server RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

#[test]
fn stdio_and_sse_clients_share_state_and_both_receive_pauses() {
    // Breakpoints added over stdio, legacy SSE and Streamable HTTP are one list, and a pause is
    // notified on stdio and on the SSE stream alike.
    let s = McpServer::start(&["--mcp-sse"]);
    let r = s.request(
        "initialize",
        initialize_custom("2025-11-25")["params"].clone(),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    s.notify("notifications/initialized", json!({}));
    let mut l = Legacy::connect(s.port);
    l.init();
    let sid = streamable_session(s.port, "2025-11-25");

    s.call_ok("breakpoint_add", json!({"function_name": "from_stdio"}));
    let listed = l.call_ok("breakpoint_list_breakpoints", json!({}));
    assert!(
        listed["breakpoints"]
            .as_array()
            .unwrap()
            .contains(&json!("from_stdio")),
        "{listed}"
    );
    l.call_ok("breakpoint_add", json!({"function_name": "from_sse"}));
    let call = rpc(
        5,
        "tools/call",
        json!({"name": "breakpoint_add", "arguments": {"function_name": "from_http"}}),
    );
    assert_eq!(
        mcp_post(s.port, Some(&sid), &call).json()["result"]["isError"],
        false
    );
    let listed = s.call_ok("breakpoint_list_breakpoints", json!({}));
    for name in ["from_stdio", "from_sse", "from_http"] {
        assert!(
            listed["breakpoints"]
                .as_array()
                .unwrap()
                .contains(&json!(name)),
            "{listed}"
        );
    }

    let (p, _) = hit(&s.http(), "from_sse");
    let n = s.notification("notifications/breakpoint/execution_paused");
    assert_eq!(n["params"]["pause_id"], p.as_str());
    let n = l.sse.message(deadline(), is_paused(&p));
    assert_eq!(n["params"]["method_name"], "from_sse");
}

#[test]
fn origin_host_and_header_checks_guard_every_mcp_endpoint() {
    let s = Server::start(&["--mcp-sse"]);
    let port = s.port;
    let init = initialize("2025-11-25").to_string();
    let post = |headers: &[(&str, &str)]| http(port, "POST", "/mcp", headers, Some(&init));
    let status = |r: Resp| (r.status, r.text());

    // A foreign Origin is refused on all three endpoints; the server's own origin is fine.
    let r = post(&[JSON, ACCEPT, ("Origin", EVIL)]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32600);
    let sse = http(
        port,
        "GET",
        "/mcp/sse",
        &[("Accept", "text/event-stream"), ("Origin", EVIL)],
        None,
    );
    assert_eq!(status(sse).0, 403);
    let l = Legacy::connect(port);
    let msg = rpc(1, "ping", json!({})).to_string();
    let r = http(
        port,
        "POST",
        &l.endpoint,
        &[JSON, ("Origin", EVIL)],
        Some(&msg),
    );
    assert_eq!(status(r).0, 403);
    // Another loopback port is another web origin: refused too.
    let other = format!("http://localhost:{}", port.wrapping_add(1).max(1));
    let r = http(
        port,
        "POST",
        &l.endpoint,
        &[JSON, ("Origin", &other)],
        Some(&msg),
    );
    assert_eq!(status(r).0, 403);
    assert_eq!(post(&[JSON, ACCEPT, ("Origin", "null")]).status, 403);
    let own = format!("http://localhost:{port}");
    let r = http(
        port,
        "POST",
        &l.endpoint,
        &[JSON, ("Origin", &own)],
        Some(&msg),
    );
    assert_eq!(status(r).0, 202);
    for origin in [own.clone(), format!("http://127.0.0.1:{port}")] {
        let r = post(&[JSON, ACCEPT, ("Origin", &origin)]);
        assert_eq!(r.status, 200, "{origin}: {}", r.text());
    }

    // DNS-rebinding guard on a loopback bind.
    let r = post(&[JSON, ACCEPT, ("Host", "evil.example")]);
    assert_eq!(status(r).0, 421);
    let r = http(
        port,
        "GET",
        "/mcp/sse",
        &[("Host", "evil.example:80"), ("Accept", "text/event-stream")],
        None,
    );
    assert_eq!(status(r).0, 421);
    let r = post(&[JSON, ACCEPT, ("Host", &format!("localhost:{port}"))]);
    assert_eq!(status(r).0, 200);

    // Header rules of Streamable HTTP.
    assert_eq!(
        status(post(&[("Content-Type", "text/plain"), ACCEPT])).0,
        415
    );
    assert_eq!(status(post(&[JSON, ("Accept", "text/html")])).0, 406);
    assert_eq!(
        status(post(&[
            JSON,
            ACCEPT,
            ("MCP-Protocol-Version", "1999-01-01")
        ]))
        .0,
        400
    );
    assert_eq!(
        status(post(&[
            JSON,
            ACCEPT,
            ("MCP-Protocol-Version", "2025-06-18")
        ]))
        .0,
        200
    );
    let sid = streamable_session(port, "2025-11-25");
    let r = http(
        port,
        "GET",
        "/mcp",
        &[("Accept", "application/json"), ("Mcp-Session-Id", &sid)],
        None,
    );
    assert_eq!(status(r).0, 406);
    let r = http(port, "PUT", "/mcp", &[JSON], Some(&init));
    assert_eq!(r.status, 405, "{}", r.text());
    assert!(r.header("Allow").unwrap().contains("POST"));

    // Session cap: while the first session is in use (its stream open), the second of either
    // transport is refused until the first ends (an idle one would make room: mcp_limits.rs).
    let capped = Server::start(&["--mcp-sse", "--mcp-max-sessions", "1"]);
    let first = streamable_session(capped.port, "2025-11-25");
    let first_stream = get_stream(capped.port, &first);
    let r = mcp_post(capped.port, None, initialize("2025-11-25"));
    assert_eq!(r.status, 503, "{}", r.text());
    let r = http(
        capped.port,
        "GET",
        "/mcp/sse",
        &[("Accept", "text/event-stream")],
        None,
    );
    assert_eq!(r.status, 503, "{}", r.text());
    let del = http(
        capped.port,
        "DELETE",
        "/mcp",
        &[("Mcp-Session-Id", &first)],
        None,
    );
    assert_eq!(del.status, 200);
    assert!(first_stream.ended(deadline()));
    streamable_session(capped.port, "2025-11-25");

    // Without --mcp-sse, a loopback server serves Streamable HTTP (so an `--mcp` process can
    // join it) but not the legacy transport.
    let plain = Server::start(&[]);
    streamable_session(plain.port, "2025-11-25");
    let r = http(
        plain.port,
        "GET",
        "/mcp/sse",
        &[("Accept", "text/event-stream")],
        None,
    );
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"], "transport_off");
    // A server bound beyond loopback has no MCP endpoint without --mcp-sse.
    let remote = Server::start(&["--host", "0.0.0.0", "--allow-remote"]);
    for method in ["GET", "POST"] {
        let r = http(remote.port, method, "/mcp", &[JSON, ACCEPT], Some(&init));
        assert_eq!(r.status, 404, "{method} /mcp: {}", r.text());
        assert!(r.json().is_object());
    }
}

#[test]
fn a_request_with_a_progress_token_gets_progress_on_its_own_sse_reply() {
    let s = Server::start(&["--mcp-sse"]);
    let sid = streamable_session(s.port, "2025-11-25");
    let body = rpc(
        7,
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 1.5},
               "_meta": {"progressToken": "wait-7"}}),
    );
    let mut reply = Sse::open(
        s.port,
        "POST",
        "/mcp",
        &[JSON, ACCEPT, ("Mcp-Session-Id", &sid)],
        Some(&body.to_string()),
        64,
    );
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("Content-Type")
        .unwrap()
        .starts_with("text/event-stream"));
    let mut progress = Vec::new();
    let result = loop {
        let m = reply.message(deadline(), |_| true);
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "wait-7");
            progress.push(m["params"]["progress"].as_f64().unwrap());
        } else {
            break m;
        }
    };
    assert_eq!(result["id"], 7, "{result}");
    assert_eq!(tool_json(&result["result"])["paused"], false, "{result}");
    assert!(!progress.is_empty(), "no progress before the result");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert!(
        reply.ended(deadline()),
        "the reply stream ends after the response"
    );
}

#[test]
fn a_client_that_accepts_only_event_streams_gets_its_reply_as_one() {
    let s = Server::start(&["--mcp-sse"]);
    let sid = streamable_session(s.port, "2025-11-25");
    let body = rpc(8, "tools/list", json!({}));
    let mut reply = Sse::open(
        s.port,
        "POST",
        "/mcp",
        &[
            JSON,
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &sid),
        ],
        Some(&body.to_string()),
        64,
    );
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("Content-Type")
        .unwrap()
        .starts_with("text/event-stream"));
    let m = reply.message(deadline(), |m| m["id"] == 8);
    assert_eq!(
        m["result"]["tools"].as_array().unwrap().len(),
        cideldill_server::mcp::tools::TOOLS.len()
    );
    assert!(reply.ended(deadline()));
}

#[test]
fn sigterm_ends_open_streams_and_exits_cleanly() {
    let mut s = Server::start(&["--mcp-sse"]);
    let mut l = Legacy::connect(s.port);
    l.init();
    let sid = streamable_session(s.port, "2025-11-25");
    let g = get_stream(s.port, &sid);
    let started = Instant::now();
    let status = s.signal_and_wait("-TERM");
    assert!(status.success(), "exit status {status}");
    assert!(l.sse.ended(deadline()), "the legacy stream ends");
    assert!(g.ended(deadline()), "the GET stream ends");
    eprintln!(
        "shutdown with two streams open took {:?}",
        started.elapsed()
    );
}

// Defect: a request in flight at shutdown was answered 202 with an empty body (as a
// notification is), or its reply stream ended without a response.
#[test]
fn a_tool_call_in_flight_at_shutdown_is_answered_with_a_json_rpc_error() {
    let mut s = Server::start(&["--mcp-sse"]);
    let port = s.port;
    let wait = |id: i64| {
        rpc(
            id,
            "tools/call",
            json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50},
                   "_meta": {"progressToken": format!("wait-{id}")}}),
        )
    };
    let is_progress = |id: i64| {
        move |m: &Value| {
            m["method"] == "notifications/progress"
                && m["params"]["progressToken"] == format!("wait-{id}")
        }
    };
    // Answered as JSON (the client takes nothing else); its progress goes to the session's
    // GET stream, which shows that the call is waiting.
    let json_sid = streamable_session(port, "2025-11-25");
    let mut json_stream = get_stream(port, &json_sid);
    let body = wait(1).to_string();
    let (tx, json_reply) = bounded(1);
    std::thread::spawn(move || {
        let headers = [
            JSON,
            ("Accept", "application/json"),
            ("Mcp-Session-Id", &json_sid),
        ];
        let _ = tx.send(http(port, "POST", "/mcp", &headers, Some(&body)));
    });
    json_stream.message(deadline(), is_progress(1));
    // Answered on its own event stream, which carries its progress.
    let sse_sid = streamable_session(port, "2025-11-25");
    let mut sse_reply = Sse::open(
        port,
        "POST",
        "/mcp",
        &[JSON, ACCEPT, ("Mcp-Session-Id", &sse_sid)],
        Some(&wait(2).to_string()),
        64,
    );
    assert_eq!(sse_reply.status, 200);
    sse_reply.message(deadline(), is_progress(2));

    let status = s.signal_and_wait("-TERM");
    assert!(status.success(), "exit status {status}");
    let r: Resp = json_reply
        .recv_timeout(deadline())
        .expect("the JSON answer within the deadline");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("Content-Type")
        .is_some_and(|t| t.starts_with("application/json")));
    let says_shutting_down = |answer: &Value, id: i64| {
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32000, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shutting down")),
            "{answer}"
        );
    };
    says_shutting_down(&r.json(), 1);
    says_shutting_down(&sse_reply.message(deadline(), |m| m["id"] == 2), 2);
    assert!(sse_reply.ended(deadline()), "the reply stream ends");
}

#[test]
fn pause_notifications_reach_ten_sse_sessions_quickly() {
    let s = Server::start(&["--mcp-sse"]);
    let app = s.client();
    let mut sessions: Vec<Legacy> = (0..10)
        .map(|_| {
            let mut l = Legacy::connect(s.port);
            l.init();
            l
        })
        .collect();
    add_breakpoint(&app, "lat");
    let (mut lat, mut floor, mut early) = (Vec::new(), Vec::new(), 0);
    for _ in 0..50 {
        let t = Instant::now();
        app.get_ok("/api/status");
        floor.push(t.elapsed());
        let (p, answered) = hit(&app, "lat");
        for l in &mut sessions {
            let (_, at) = l.sse.message_at(deadline(), is_paused(&p));
            early += usize::from(at < answered);
            lat.push(at.saturating_duration_since(answered));
        }
        resume(&app, &p);
    }
    lat.sort();
    floor.sort();
    let pct = |v: &[Duration], q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
    let (p50, p99) = (pct(&lat, 50), pct(&lat, 99));
    eprintln!(
        "notification latency over {} deliveries: p50 {p50:?}, p99 {p99:?}, max {:?} \
         ({early} arrived before the call/start response); floor (GET /api/status round trip): \
         p50 {:?}, p99 {:?}",
        lat.len(),
        lat[lat.len() - 1],
        pct(&floor, 50),
        pct(&floor, 99)
    );
    assert!(p99 < Duration::from_secs(2), "p99 {p99:?}");
}

#[test]
fn a_panicking_request_is_answered_with_an_internal_error_on_both_http_transports() {
    let home = TempDir::new("panic-http");
    let s = Server::start_in_env(
        home.path(),
        &["--memory", "--mcp-sse"],
        &[("CIDELDILL_PANIC_ON", "breakpoint_list_breakpoints")],
    );
    let call = |id| {
        rpc(
            id,
            "tools/call",
            json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
        )
    };
    let sid = streamable_session(s.port, "2025-11-25");
    let r = mcp_post(s.port, Some(&sid), call(7));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], 7);
    assert_eq!(r.json()["error"]["code"], -32603, "{}", r.text());
    // The session and the server keep working.
    let r = mcp_post(s.port, Some(&sid), rpc(8, "ping", json!({})));
    assert_eq!(r.json()["result"], json!({}));

    let mut legacy = Legacy::connect(s.port);
    legacy.init();
    let answer = legacy.request(
        "tools/call",
        json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
    );
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let answer = legacy.request("ping", json!({}));
    assert_eq!(answer["result"], json!({}));
    assert!(s.stderr().contains("panicked"), "{}", s.stderr());
}

// ---------------------------------------------------------------------------------------------
// The stateless revision 2026-07-28 on `/mcp`.

const MODERN: &str = "2026-07-28";

fn envelope() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A request with the envelope added to its params' `_meta`.
fn modern_rpc(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = envelope();
    rpc(id, method, params)
}

/// The headers a stateless request carries: `name` as `Mcp-Name` when given.
fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        JSON,
        ACCEPT,
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    h
}

fn modern_post(port: u16, headers: &[(&str, &str)], body: &Value) -> Resp {
    http(port, "POST", "/mcp", headers, Some(&body.to_string()))
}

fn assert_rpc_error(r: &Resp, status: u16, code: i64) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    v
}

#[test]
fn stateless_requests_are_served_beside_legacy_sessions() {
    let s = Server::start(&[]);
    let port = s.port;
    let sid = streamable_session(port, "2025-11-25");

    let d = modern_post(
        port,
        &modern_headers("server/discover", None),
        &modern_rpc(1, "server/discover", json!({})),
    );
    assert_eq!(d.status, 200, "{}", d.text());
    assert!(d.header("Mcp-Session-Id").is_none(), "no session minted");
    let d = d.json();
    assert_eq!(d["result"]["supportedVersions"][0], MODERN, "{d}");
    assert_eq!(d["result"]["resultType"], "complete");

    let list = modern_post(
        port,
        &modern_headers("tools/list", None),
        &modern_rpc(2, "tools/list", json!({})),
    );
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(list.header("Mcp-Session-Id").is_none());
    let list = list.json()["result"].clone();
    assert_eq!(list["resultType"], "complete");
    assert_eq!(list["cacheScope"], "private");
    assert!(list["tools"].as_array().unwrap().len() > 10);

    // The legacy session goes on, its answers undecorated.
    let old = mcp_post(port, Some(&sid), rpc(3, "tools/list", json!({})));
    assert_eq!(old.status, 200, "{}", old.text());
    assert_eq!(old.json()["result"]["tools"], list["tools"]);
    assert!(old.json()["result"].get("resultType").is_none());

    // tools/call, with Mcp-Name plain and base64-encoded; a session id sent is ignored.
    let stray = "0".repeat(32);
    let mut headers = modern_headers("tools/call", Some("breakpoint_add"));
    headers.push(("Mcp-Session-Id", &stray));
    let add = modern_post(
        port,
        &headers,
        &modern_rpc(
            4,
            "tools/call",
            json!({"name": "breakpoint_add", "arguments": {"function_name": "add"}}),
        ),
    );
    assert_eq!(add.status, 200, "{}", add.text());
    assert!(add.header("Mcp-Session-Id").is_none());
    assert_eq!(add.json()["result"]["isError"], false, "{}", add.text());
    assert_eq!(add.json()["result"]["resultType"], "complete");
    // "breakpoint_list_breakpoints" in base64.
    let b64 = "=?base64?YnJlYWtwb2ludF9saXN0X2JyZWFrcG9pbnRz?=";
    let listed = modern_post(
        port,
        &modern_headers("tools/call", Some(b64)),
        &modern_rpc(
            5,
            "tools/call",
            json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
        ),
    );
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert_eq!(
        tool_json(&listed.json()["result"])["breakpoints"],
        json!(["add"])
    );
    let read = modern_post(
        port,
        &modern_headers("resources/read", Some("breakpoint://status")),
        &modern_rpc(6, "resources/read", json!({"uri": "breakpoint://status"})),
    );
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json()["result"]["ttlMs"], 0);

    // The legacy session saw the same state and still ends with DELETE.
    let r = mcp_post(
        port,
        Some(&sid),
        rpc(
            7,
            "tools/call",
            json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
        ),
    );
    assert_eq!(
        tool_json(&r.json()["result"])["breakpoints"],
        json!(["add"])
    );
    let del = http(port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], None);
    assert_eq!(del.status, 200, "{}", del.text());
}

#[test]
fn stateless_requests_are_checked_against_their_headers() {
    let s = Server::start(&[]);
    let port = s.port;
    let call = modern_rpc(
        1,
        "tools/call",
        json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
    );
    // Mcp-Method missing, or another method.
    let no_method = [
        JSON,
        ACCEPT,
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Name", "breakpoint_list_breakpoints"),
    ];
    let e = assert_rpc_error(&modern_post(port, &no_method, &call), 400, -32020);
    assert_eq!(e["id"], 1);
    let other = modern_headers("tools/list", Some("breakpoint_list_breakpoints"));
    assert_rpc_error(&modern_post(port, &other, &call), 400, -32020);
    // Mcp-Name missing, different, or a base64 form of another name.
    assert_rpc_error(
        &modern_post(port, &modern_headers("tools/call", None), &call),
        400,
        -32020,
    );
    assert_rpc_error(
        &modern_post(
            port,
            &modern_headers("tools/call", Some("breakpoint_add")),
            &call,
        ),
        400,
        -32020,
    );
    assert_rpc_error(
        &modern_post(
            port,
            &modern_headers("tools/call", Some("=?base64?YnJlYWtwb2ludF9hZGQ=?=")),
            &call,
        ),
        400,
        -32020,
    );
    let read = modern_rpc(2, "resources/read", json!({"uri": "breakpoint://status"}));
    assert_rpc_error(
        &modern_post(
            port,
            &modern_headers("resources/read", Some("breakpoint://paused")),
            &read,
        ),
        400,
        -32020,
    );
    // A revision we do not speak in the header: -32022 listing ours.
    let h = [
        JSON,
        ACCEPT,
        ("MCP-Protocol-Version", "2099-01-01"),
        ("Mcp-Method", "tools/list"),
    ];
    let e = assert_rpc_error(
        &modern_post(port, &h, &modern_rpc(3, "tools/list", json!({}))),
        400,
        -32022,
    );
    assert_eq!(e["error"]["data"]["supported"][0], MODERN, "{e}");
    // The body naming another revision than the header.
    let mut body = modern_rpc(4, "tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    assert_rpc_error(
        &modern_post(port, &modern_headers("tools/list", None), &body),
        400,
        -32020,
    );
    // The body naming the revision without the header.
    assert_rpc_error(
        &modern_post(
            port,
            &[JSON, ACCEPT, ("Mcp-Method", "tools/list")],
            &modern_rpc(5, "tools/list", json!({})),
        ),
        400,
        -32020,
    );
    // An unknown method (and a removed one) is 404 with -32601.
    assert_rpc_error(
        &modern_post(
            port,
            &modern_headers("nope/nothing", None),
            &modern_rpc(6, "nope/nothing", json!({})),
        ),
        404,
        -32601,
    );
    assert_rpc_error(
        &modern_post(
            port,
            &modern_headers("ping", None),
            &modern_rpc(7, "ping", json!({})),
        ),
        404,
        -32601,
    );
    // No GET stream nor DELETE in this revision.
    for method in ["GET", "DELETE"] {
        let r = http(
            port,
            method,
            "/mcp",
            &[
                ("Accept", "text/event-stream"),
                ("MCP-Protocol-Version", MODERN),
            ],
            None,
        );
        assert_eq!(r.status, 405, "{method}: {}", r.text());
        assert_eq!(r.header("Allow"), Some("POST"));
    }
    // A good request still works afterwards.
    let ok = modern_post(
        port,
        &modern_headers("tools/call", Some("breakpoint_list_breakpoints")),
        &call,
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
}

#[test]
fn a_blocking_stateless_request_keeps_its_stream_alive_and_closing_it_cancels_it() {
    let s = Server::start(&[]);
    let port = s.port;
    let body = modern_rpc(
        9,
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50}}),
    )
    .to_string();
    let sse = Sse::open_as(
        port,
        "POST",
        "/mcp",
        &modern_headers("tools/call", Some("breakpoint_wait_for_pause")),
        Some(&body),
        1024,
        true,
    );
    assert_eq!(sse.status, 200);
    assert!(sse
        .header("Content-Type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(sse.header("X-Accel-Buffering"), Some("no"));
    assert!(sse.header("Mcp-Session-Id").is_none());
    // Comments at least once a second while it waits.
    let opened = Instant::now();
    let mut last = opened;
    let mut comments = 0;
    while opened.elapsed() < Duration::from_millis(2500) {
        let ev = sse
            .next_event(last + Duration::from_millis(1000))
            .expect("a keep-alive comment within a second");
        assert_eq!(ev.name, ":", "only comments while waiting: {ev:?}");
        last = ev.at;
        comments += 1;
    }
    assert!(comments >= 3, "{comments}");
    // The client goes away: the server notices at its next write and cancels the request.
    drop(sse);
    wait_for("the request cancelled", || {
        s.stderr()
            .contains("stateless request 9 (tools/call) cancelled")
            .then_some(())
    });
    // A pause made now is there for the next waiter.
    let app = s.client();
    add_breakpoint(&app, "f");
    let (pause, _) = hit(&app, "f");
    let w = modern_post(
        port,
        &[
            JSON,
            ("Accept", "application/json"),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "breakpoint_wait_for_pause"),
        ],
        &modern_rpc(
            10,
            "tools/call",
            json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 5}}),
        ),
    );
    assert_eq!(w.status, 200, "{}", w.text());
    assert_eq!(
        tool_json(&w.json()["result"])["pause"]["id"],
        pause.as_str()
    );
}

#[test]
fn a_stateless_listen_stream_carries_pauses_made_over_rest() {
    let s = Server::start(&[]);
    let port = s.port;
    // A client that declares the custom notifications in the listen request's envelope.
    let body = rpc(
        42,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["breakpoint://paused"]},
               "_meta": modern_envelope_custom(None)}),
    )
    .to_string();
    let mut listen = Sse::open(
        port,
        "POST",
        "/mcp",
        &modern_headers("subscriptions/listen", None),
        Some(&body),
        1024,
    );
    assert_eq!(listen.status, 200);
    assert!(listen.header("Mcp-Session-Id").is_none());
    let ack = listen.message(deadline(), |m| {
        m["method"] == "notifications/subscriptions/acknowledged"
    });
    let sub_key = "io.modelcontextprotocol/subscriptionId";
    assert_eq!(ack["params"]["_meta"][sub_key], 42, "{ack}");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["breakpoint://paused"])
    );
    let app = s.client();
    add_breakpoint(&app, "add");
    let (pause, _) = hit(&app, "add");
    let paused = listen.message(deadline(), is_paused(&pause));
    assert_eq!(paused["params"]["_meta"][sub_key], 42);
    let updated = listen.message(deadline(), |m| {
        m["method"] == "notifications/resources/updated"
            && m["params"]["uri"] == "breakpoint://paused"
    });
    assert_eq!(updated["params"]["_meta"][sub_key], 42);
    resume(&app, &pause);
    let resumed = listen.message(deadline(), |m| {
        m["method"] == "notifications/breakpoint/execution_resumed"
    });
    assert_eq!(resumed["params"]["pause_id"], pause.as_str());
    // A legacy session beside it gets its own notifications, unstamped.
    let sid = streamable_session_custom(port, "2025-11-25");
    let mut g = get_stream(port, &sid);
    let (second, _) = hit(&app, "add");
    let legacy = g.message(deadline(), is_paused(&second));
    assert!(legacy["params"].get("_meta").is_none(), "{legacy}");
    listen.message(deadline(), is_paused(&second));
    drop(listen);
}

/// A modern (stateless) client and a legacy session drive one debugging session at once: the
/// legacy client sets the breakpoint, the program pauses, the modern client finds the pause and
/// resumes it, and the legacy client sees it gone.
#[test]
fn a_modern_and_a_legacy_client_drive_one_debugging_session_at_once() {
    let s = Server::start(&[]);
    let (port, c) = (s.port, s.client());
    let sid = streamable_session(port, "2025-11-25");
    let legacy_call = |id: i64, name: &str, args: Value| {
        let r = mcp_post(
            port,
            Some(&sid),
            rpc(id, "tools/call", json!({"name": name, "arguments": args})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        tool_json(&r.json()["result"])
    };
    let modern_call = |id: i64, name: &str, args: Value| {
        let r = modern_post(
            port,
            &modern_headers("tools/call", Some(name)),
            &modern_rpc(id, "tools/call", json!({"name": name, "arguments": args})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        tool_json(&r.json()["result"])
    };
    legacy_call(1, "breakpoint_add", json!({"function_name": "add"}));
    let start = c.post_ok(
        "/api/call/start",
        &crate::support::call_start_body(
            "add",
            vec![crate::support::item(&json!(2), 2)],
            json!({}),
        ),
    );
    let p = crate::support::pause_id(&start);
    let paused = modern_call(2, "breakpoint_list_paused", json!({}));
    assert_eq!(paused["paused"][0]["id"], p.as_str(), "{paused}");
    modern_call(3, "breakpoint_continue", json!({"pause_id": p}));
    let action = c.get_ok(&format!("/api/poll/{p}"));
    assert_eq!(action["action"]["action"], "continue", "{action}");
    let seen = legacy_call(4, "breakpoint_list_paused", json!({}));
    assert_eq!(seen["paused"], json!([]), "{seen}");
}

// ---------------------------------------------------------------------------------------------
// Defects found by the official conformance suite: the envelope's errors answered 200 (and
// `server/discover` served without one), a revision of neither era answered -32600 as a
// legacy server would, `initialize` in the stateless revision answered -32022, and legacy event
// streams carried no priming event, event ids nor `retry`, and could not be resumed.

#[test]
fn stateless_envelope_errors_are_400_with_the_request_id() {
    let s = Server::start(&[]);
    let port = s.port;
    let mut no_caps = envelope();
    no_caps
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let mut no_version = envelope();
    no_version
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/protocolVersion");
    for (id, method, params) in [
        (101, "server/discover", json!({})),
        (102, "server/discover", json!({"_meta": no_version})),
        (104, "server/discover", json!({"_meta": no_caps.clone()})),
        (105, "tools/list", json!({"_meta": no_caps})),
    ] {
        let r = modern_post(
            port,
            &modern_headers(method, None),
            &rpc(id, method, params),
        );
        let e = assert_rpc_error(&r, 400, -32602);
        assert_eq!(e["id"], id, "{e}");
        assert!(e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/"));
    }
    // With the envelope (clientInfo is optional), discover is served.
    let mut no_info = envelope();
    no_info
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    let r = modern_post(
        port,
        &modern_headers("server/discover", None),
        &rpc(106, "server/discover", json!({"_meta": no_info})),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["supportedVersions"][0], MODERN);
}

#[test]
fn a_revision_of_neither_era_is_32022_naming_it_with_the_request_id() {
    let s = Server::start(&[]);
    let port = s.port;
    for (id, bad) in [(301, "v999.0.0"), (302, "2099-01-01")] {
        // Named in the header and in the body, as a client of the modern era sends it.
        let mut body = modern_rpc(id, "server/discover", json!({}));
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(bad);
        let h = [
            JSON,
            ACCEPT,
            ("MCP-Protocol-Version", bad),
            ("Mcp-Method", "server/discover"),
        ];
        let e = assert_rpc_error(&modern_post(port, &h, &body), 400, -32022);
        assert_eq!(e["id"], id, "{e}");
        assert_eq!(e["error"]["data"]["requested"], bad, "{e}");
        assert_eq!(e["error"]["data"]["supported"][0], MODERN, "{e}");
        // In the header only (a legacy request): the same error.
        let sid = streamable_session(port, "2025-11-25");
        let h = [
            JSON,
            ACCEPT,
            ("MCP-Protocol-Version", bad),
            ("Mcp-Session-Id", &sid),
        ];
        let r = modern_post(port, &h, &rpc(id + 10, "tools/list", json!({})));
        let e = assert_rpc_error(&r, 400, -32022);
        assert_eq!(e["id"], id + 10, "{e}");
        assert_eq!(e["error"]["data"]["requested"], bad, "{e}");
        assert!(e["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")));
    }
}

#[test]
fn initialize_in_the_stateless_revision_is_404_method_not_found() {
    let s = Server::start(&[]);
    let body = modern_rpc(500, "initialize", json!({}));
    let r = modern_post(s.port, &modern_headers("initialize", None), &body);
    let e = assert_rpc_error(&r, 404, -32601);
    assert_eq!(e["id"], 500);
    assert_eq!(e["error"]["data"]["supported"][0], MODERN, "{e}");
}

/// A POST answered on its own event stream (`Accept: text/event-stream` only).
fn sse_post(port: u16, sid: &str, body: &Value) -> Sse {
    let r = Sse::open(
        port,
        "POST",
        "/mcp",
        &[
            JSON,
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", sid),
        ],
        Some(&body.to_string()),
        256,
    );
    assert_eq!(r.status, 200);
    r
}

/// A GET resuming after `last` (`Last-Event-ID`).
fn resume_stream(port: u16, sid: &str, last: &str) -> Sse {
    Sse::open(
        port,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", sid),
            ("Last-Event-ID", last),
        ],
        None,
        256,
    )
}

/// The `<stream>-<seq>` parts of an event id.
fn id_parts(id: &str) -> (u64, u64) {
    let (a, b) = id.split_once('-').expect("an id <stream>-<seq>");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn a_legacy_sse_reply_is_primed_and_resumed_after_a_lost_connection() {
    let s = Server::start(&[]);
    let port = s.port;
    let sid = streamable_session(port, "2025-11-25");
    let call = rpc(
        7,
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 2},
               "_meta": {"progressToken": "p"}}),
    );
    let reply = sse_post(port, &sid, &call);
    let until = Instant::now() + deadline();
    let prime = reply.next_event(until).expect("a priming event");
    assert_eq!(prime.data, "", "{prime:?}");
    assert_eq!(prime.retry.as_deref(), Some("1000"), "{prime:?}");
    let (stream, seq) = id_parts(prime.id.as_deref().expect("an id"));
    assert_eq!(seq, 0, "{prime:?}");
    let first = reply.next_event(until).expect("a progress event");
    assert_eq!(first.name, "message");
    let m: Value = serde_json::from_str(&first.data).unwrap();
    assert_eq!(m["method"], "notifications/progress", "{m}");
    let last = first.id.clone().expect("an id");
    assert_eq!(id_parts(&last), (stream, 1));
    // The connection is lost mid-request; the request goes on.
    drop(reply);
    let resumed = resume_stream(port, &sid, &last);
    assert_eq!(resumed.status, 200);
    let mut seqs = vec![];
    let result = loop {
        let ev = resumed.next_event(until).expect("the rest of the stream");
        if ev.data.is_empty() {
            continue; // its priming event
        }
        let (st, seq) = id_parts(ev.id.as_deref().expect("an id"));
        assert_eq!(st, stream, "only that stream's messages: {ev:?}");
        seqs.push(seq);
        let m: Value = serde_json::from_str(&ev.data).unwrap();
        if m.get("id").is_some() {
            break m;
        }
        assert_eq!(m["method"], "notifications/progress", "{m}");
    };
    assert_eq!(result["id"], 7, "{result}");
    assert_eq!(tool_json(&result["result"])["paused"], false, "{result}");
    assert_eq!(seqs[0], 2, "nothing before the id given, nothing skipped");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(resumed.ended(deadline()), "it ends with the request");
    // Resuming again from the start of that stream replays all of it (the request is over).
    let mut again = resume_stream(port, &sid, &format!("{stream}-0"));
    let m = again.message(deadline(), |m| m["id"] == 7);
    assert_eq!(m["result"], result["result"]);
    assert!(again.ended(deadline()));
}

#[test]
fn the_get_stream_keeps_what_its_client_missed_while_away() {
    let s = Server::start(&[]);
    let port = s.port;
    let sid = streamable_session_custom(port, "2025-11-25");
    let app = s.client();
    add_breakpoint(&app, "add");
    let g = get_stream(port, &sid);
    let until = Instant::now() + deadline();
    let prime = g.next_event(until).expect("a priming event");
    assert_eq!(prime.data, "");
    assert_eq!(prime.id.as_deref(), Some("0-0"), "{prime:?}");
    let (p, _) = hit(&app, "add");
    let paused = loop {
        let ev = g.next_event(until).expect("the pause");
        let m: Value = serde_json::from_str(&ev.data).unwrap();
        if is_paused(&p)(&m) {
            break ev;
        }
    };
    let last = paused.id.clone().expect("an id");
    assert_eq!(id_parts(&last).0, 0);
    drop(g);
    // While no GET stream is connected (or before the server notices it is gone).
    resume(&app, &p);
    let mut back = resume_stream(port, &sid, &last);
    assert_eq!(back.status, 200);
    let m = back.message(deadline(), |m| {
        m["method"] == "notifications/breakpoint/execution_resumed"
    });
    assert_eq!(m["params"]["pause_id"], p, "{m}");
    // It is the session's GET stream again: the next pause comes on it.
    let (p2, _) = hit(&app, "add");
    back.message(deadline(), is_paused(&p2));
}

#[test]
fn resumption_refuses_ids_it_never_sent_and_streams_it_no_longer_keeps() {
    let s = Server::start(&[]);
    let port = s.port;
    let sid = streamable_session(port, "2025-11-25");
    for (last, status) in [("nonsense", 400), ("1-0", 400), ("0-0", 400)] {
        let r = resume_stream(port, &sid, last);
        assert_eq!(r.status, status, "{last}");
    }
    // Past the number of streams a session keeps, the oldest is forgotten: 410, not a gap.
    let streams = cideldill_server::limits::MCP_REPLAY_STREAMS;
    for i in 0..=streams {
        let mut r = sse_post(port, &sid, &rpc(i as i64, "tools/list", json!({})));
        r.message(deadline(), |m| m["id"] == i as i64);
    }
    let gone = resume_stream(port, &sid, "1-1");
    assert_eq!(gone.status, 410);
    let kept = resume_stream(port, &sid, &format!("{}-0", streams + 1));
    assert_eq!(kept.status, 200);
    // Without a session: as any GET.
    assert_eq!(resume_stream(port, &"0".repeat(32), "1-1").status, 404);
}

#[test]
fn older_revisions_get_event_ids_without_priming_and_the_stateless_one_neither() {
    let s = Server::start(&[]);
    let port = s.port;
    let sid = streamable_session(port, "2025-03-26");
    let reply = sse_post(port, &sid, &rpc(3, "tools/list", json!({})));
    let ev = reply
        .next_event(Instant::now() + deadline())
        .expect("the answer");
    assert!(
        !ev.data.is_empty(),
        "no priming event before 2025-11-25: {ev:?}"
    );
    assert!(ev.retry.is_none());
    assert_eq!(id_parts(ev.id.as_deref().expect("an id")).1, 1);
    // 2026-07-28 has no resumability: no ids, no priming.
    let mut h = modern_headers("tools/list", None);
    h[1] = ("Accept", "text/event-stream");
    let body = modern_rpc(4, "tools/list", json!({}));
    let r = Sse::open(port, "POST", "/mcp", &h, Some(&body.to_string()), 64);
    assert_eq!(r.status, 200);
    let ev = r
        .next_event(Instant::now() + deadline())
        .expect("the answer");
    assert!(
        !ev.data.is_empty() && ev.id.is_none() && ev.retry.is_none(),
        "{ev:?}"
    );
    // And a GET with Last-Event-ID in that revision is refused as every GET is.
    let get = http(
        port,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("MCP-Protocol-Version", MODERN),
            ("Last-Event-ID", "1-0"),
        ],
        None,
    );
    assert_eq!(get.status, 405);
}
