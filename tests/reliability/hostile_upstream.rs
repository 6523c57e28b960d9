//! One hostile external MCP server against the real binary (the fixture's hostile modes): a
//! flood of `list_changed` notifications (costs no thread per notice, the catalog ends up
//! current), a child that stops reading its stdin while it sends us requests (calls still time
//! out or fail at once, disconnect and SIGTERM still stop it), and tool lists with hostile names
//! or sizes (skipped, counted in the server's status, bounded).

use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{home, Proc, LIVENESS};
use crate::loadgen::http_within;
use crate::support::{fixture_server_path, poll_until, proc_status_kib, process_gone, Client};

/// The server's thread count now.
fn threads(pid: u32) -> u64 {
    proc_status_kib(pid, "Threads")
}

/// The server's status of external server `name`.
fn client_status(c: &Client, name: &str) -> Value {
    c.get_ok("/api/mcp-clients")["clients"][name].clone()
}

/// Starts a server with `--mcp-clients` (connections at run time).
fn start(tag: &str) -> (crate::support::TempDir, Proc) {
    let dir = home(tag);
    let server = Proc::start(dir.path(), &["--memory", "--mcp-clients"], "info");
    (dir, server)
}

/// Connects the fixture as `fx` with `flags` (no automatic reconnection); the answer.
fn connect(c: &Client, flags: &[&str], timeout_s: f64) -> Value {
    c.post_ok(
        "/api/mcp-clients/connect",
        &json!({"name": "fx", "command": fixture_server_path().display().to_string(),
            "args": flags, "timeout_s": timeout_s, "auto_reconnect": false}),
    )
}

/// The catalog names of `fx`'s tools (none while `fx` is not known yet).
fn tool_names(c: &Client) -> Vec<String> {
    let r = c.get("/api/mcp-tools?server=fx");
    if r.status == 404 {
        return Vec::new();
    }
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["tools"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// A flood of list_changed notifications.

/// Connects a fixture flooding `list_changed` with `flags` (with `on_call`, the flood comes
/// when `fx/notify_change` is called once connected); while the flood lasts, samples the
/// server's thread count until the catalog has `late` (the change made just before the last
/// notice). Returns (threads before, most threads seen, RSS KiB before, RSS KiB after).
fn flood(tag: &str, flags: &[&str], on_call: bool) -> (u64, u64, u64, u64) {
    let (_dir, server) = start(tag);
    let c = server.client();
    let pid = server.pid();
    let (rss_before, _) = server.rss_kib();
    let before = threads(pid);
    let t0 = Instant::now();
    let watcher = {
        let args: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
        let port = c.port;
        thread::spawn(move || {
            let flags: Vec<&str> = args.iter().map(String::as_str).collect();
            let c = Client { port };
            let connected = connect(&c, &flags, 30.0);
            if on_call {
                let (status, body) = http_within(
                    port,
                    "POST",
                    "/api/mcp-tools/call",
                    br#"{"tool": "fx/notify_change", "arguments": {}}"#,
                    LIVENESS,
                )
                .expect("an answer to notify_change");
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            }
            connected
        })
    };
    let mut most = before;
    let current = poll_until(Duration::from_secs(120), || {
        most = most.max(threads(pid));
        tool_names(&c).iter().any(|t| t == "fx/late").then_some(())
    });
    let connected = watcher.join().expect("connect thread");
    assert!(connected["tools"].is_array(), "{connected}");
    assert!(
        current.is_some(),
        "{tag}: the catalog never showed fx/late (the last change); {most} threads at most"
    );
    // The flood is over: everything settles, the server still answers and the tool works.
    let settled = poll_until(LIVENESS, || {
        most = most.max(threads(pid));
        server
            .stderr()
            .contains("list_changed notifications")
            .then_some(())
    });
    assert!(
        settled.is_some(),
        "{tag}: the fixture never finished its flood"
    );
    let echo = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "fx/late", "arguments": {}}),
    );
    assert_eq!(echo["result"]["content"][0]["text"], "late tool", "{echo}");
    assert_eq!(client_status(&c, "fx")["status"], "connected");
    let (rss_after, _) = server.rss_kib();
    eprintln!(
        "{tag}: threads {before} before, {most} at most; RSS {rss_before} KiB -> {rss_after} KiB; \
         current after {:?}",
        t0.elapsed()
    );
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    (before, most, rss_before, rss_after)
}

/// Threads a connection may add: the fixture's reader, writer, stderr and waiter threads, one
/// relist, the connect thread, HTTP workers of the test's polling.
const THREAD_SLACK: u64 = 24;

#[test]
fn a_flood_of_tools_list_changed_costs_no_thread_per_notice() {
    let (before, most, _, _) = flood("flood", &["--flood-list-changed", "20000"], false);
    assert!(
        most <= before + THREAD_SLACK,
        "{most} threads during the flood ({before} before)"
    );
}

// Once connected, a tool call floods 3,000 notices and every tools/list takes 100 ms, so the
// notices come while a relist is in flight: they coalesce into one more relist, which sees the
// last change.
#[test]
fn a_flood_of_list_changed_during_slow_relists_coalesces() {
    let (before, most, _, _) = flood(
        "flood-slow",
        &["--notify-change-count", "3000", "--slow-list", "100"],
        true,
    );
    assert!(
        most <= before + THREAD_SLACK,
        "{most} threads during the flood ({before} before)"
    );
}

// Resources and tools changes interleaved: neither kind queues more than one notice.
#[test]
fn a_flood_of_mixed_list_changed_kinds_stays_bounded() {
    let (before, most, rss_before, rss_after) = flood(
        "flood-mixed",
        &["--flood-list-changed", "20000", "--flood-resources"],
        false,
    );
    assert!(
        most <= before + THREAD_SLACK,
        "{most} threads during the flood ({before} before)"
    );
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

// ---------------------------------------------------------------------------------------------
// A child that stops reading its stdin.

/// A REST tool call through `port` with a deadline: (status, body, how long it took).
fn timed_call(port: u16, tool: &str, arguments: Value) -> (u16, Value, Duration) {
    let body = json!({"tool": tool, "arguments": arguments}).to_string();
    let t0 = Instant::now();
    let (status, body) = http_within(
        port,
        "POST",
        "/api/mcp-tools/call",
        body.as_bytes(),
        LIVENESS,
    )
    .unwrap_or_else(|e| {
        panic!(
            "the call of {tool} got no answer after {:?}: {e}",
            t0.elapsed()
        )
    });
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (status, v, t0.elapsed())
}

/// A call into a deaf child answers with an error within its timeout (2 s) and some slack.
fn assert_fails_in_time(what: &str, (status, body, took): &(u16, Value, Duration)) {
    eprintln!("{what}: {status} after {took:?}: {body}");
    assert!(
        *took < Duration::from_secs(10),
        "{what}: answered after {took:?} (timeout 2 s)"
    );
    assert!(
        matches!(*status, 502 | 504),
        "{what}: status {status}: {body}"
    );
    assert!(
        matches!(
            body["error"].as_str(),
            Some("call_timeout" | "call_failed" | "server_not_connected")
        ),
        "{what}: {body}"
    );
}

/// Connects a fixture that goes deaf with `flags`; checks a call fails in time; then disconnects
/// it (or, with `sigterm`, signals the server) and checks the child is gone within seconds.
/// A fixture flooding requests right after its tool list may be found broken before the
/// connection is installed: then connecting fails (in time) and so do the calls. Meanwhile the
/// server's threads stay few, and its log does not repeat a line per request of the flood.
fn deaf(tag: &str, flags: &[&str], arguments: Value, sigterm: bool) {
    let (dir, mut server) = start(tag);
    let c = server.client();
    let port = server.port;
    let pid = server.pid();
    let before = threads(pid);
    let mut most = before;
    let pid_file = dir.path().join("fx.pid");
    let mut args = flags.to_vec();
    let pid_arg = pid_file.display().to_string();
    args.extend(["--pid-file", &pid_arg]);
    let body = json!({"name": "fx", "command": fixture_server_path().display().to_string(),
        "args": args, "timeout_s": 2.0, "auto_reconnect": false});
    let t0 = Instant::now();
    let (status, answer) = http_within(
        port,
        "POST",
        "/api/mcp-clients/connect",
        body.to_string().as_bytes(),
        LIVENESS,
    )
    .unwrap_or_else(|e| panic!("{tag}: connect got no answer: {e}"));
    eprintln!(
        "{tag}: connect answered {status} after {:?}: {}",
        t0.elapsed(),
        String::from_utf8_lossy(&answer)
    );
    assert!(
        matches!(status, 200 | 502),
        "{tag}: connect answered {status}"
    );
    let fx: u32 = std::fs::read_to_string(&pid_file)
        .expect("the fixture's pid file")
        .trim()
        .parse()
        .expect("a pid");
    most = most.max(threads(pid));
    let first = timed_call(port, "fx/echo", arguments.clone());
    assert_fails_in_time(&format!("{tag}: first call"), &first);
    most = most.max(threads(pid));
    let second = timed_call(port, "fx/echo", arguments);
    assert_fails_in_time(&format!("{tag}: second call"), &second);
    most = most.max(threads(pid));
    let log = server.stderr();
    let refusals = log.matches("refused the server's").count();
    let unanswered = log.matches("could not answer").count();
    assert!(
        refusals <= 10 && unanswered <= 10,
        "{tag}: {refusals} refusals and {unanswered} failed answers logged"
    );
    if sigterm {
        let t0 = Instant::now();
        server.signal("-TERM");
        let status = server.wait_exit(Duration::from_secs(10));
        let took = t0.elapsed();
        assert!(status.is_some(), "{tag}: still running 10 s after SIGTERM");
        assert!(
            took <= Duration::from_secs(3),
            "{tag}: exit took {took:?} after SIGTERM"
        );
        let gone = poll_until(Duration::from_secs(5), || process_gone(fx).then_some(()));
        assert!(gone.is_some(), "{tag}: the child {fx} outlived the server");
        eprintln!("{tag}: exited {took:?} after SIGTERM");
        return;
    }
    let t0 = Instant::now();
    let (status, body) = http_within(
        port,
        "POST",
        "/api/mcp-clients/fx/disconnect",
        b"{}",
        LIVENESS,
    )
    .unwrap_or_else(|e| panic!("{tag}: disconnect got no answer: {e}"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // Stopping closes stdin, waits the kill grace (2 s), then SIGTERM.
    let gone = poll_until(Duration::from_secs(10), || {
        most = most.max(threads(pid));
        process_gone(fx).then_some(())
    });
    assert!(
        gone.is_some(),
        "{tag}: the child {fx} still runs {:?} after disconnect",
        t0.elapsed()
    );
    eprintln!(
        "{tag}: child gone {:?} after disconnect; threads {before} before, {most} at most",
        t0.elapsed()
    );
    assert!(
        most <= before + THREAD_SLACK,
        "{tag}: {most} threads ({before} before)"
    );
    // The server is fine and says so.
    let status = client_status(&c, "fx");
    assert_eq!(status["status"], "disconnected", "{status}");
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}

// The child stops reading after its tool list and floods us with ping, roots and sampling
// requests: our answers fill its stdin, the connection is dropped as broken, calls fail at once.
#[test]
fn a_deaf_child_flooding_requests_fails_calls_in_time_and_is_stopped() {
    deaf(
        "deaf-flood",
        &["--deaf-after-list", "--request-flood"],
        json!({"text": "hi"}),
        false,
    );
}

// The child stops reading after its tool list and is otherwise quiet; a call larger than the
// pipe blocks the write: its caller still times out, and so does the next call.
#[test]
fn a_deaf_child_blocking_a_large_write_still_times_calls_out() {
    deaf(
        "deaf-large",
        &["--deaf-after-list"],
        json!({"text": "x".repeat(1 << 20)}),
        false,
    );
}

// The child stops reading mid-stream (after some bytes of our requests) and floods requests.
#[test]
fn a_child_that_stops_reading_after_some_bytes_is_stopped() {
    deaf(
        "deaf-bytes",
        &["--deaf-after-bytes", "2000", "--request-flood"],
        json!({"text": "x".repeat(64 * 1024)}),
        false,
    );
}

// SIGTERM with a deaf child whose stdin write is blocked: the server exits within 3 s.
#[test]
fn sigterm_with_a_deaf_child_exits_within_3_s() {
    deaf(
        "deaf-sigterm",
        &["--deaf-after-list"],
        json!({"text": "x".repeat(1 << 20)}),
        true,
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile tool lists.

// Empty names, a newline, a right-to-left override, a 100 KB name, a duplicate, a tool without a
// name and a string instead of a tool: none is listed, the first `echo` is kept, and the count
// shows in the server's status.
#[test]
fn hostile_tool_names_are_skipped_and_counted() {
    let (_dir, server) = start("names");
    let c = server.client();
    let connected = connect(&c, &["--hostile-tools"], 30.0);
    let names = tool_names(&c);
    assert!(names.contains(&"fx/echo".to_owned()), "{names:?}");
    assert!(names.contains(&"fx/größe_✓".to_owned()), "{names:?}");
    for n in &names {
        let tool = n.trim_start_matches("fx/");
        assert!(
            !tool.is_empty()
                && tool.chars().count() <= 128
                && !tool.chars().any(|c| c.is_control() || c == '\u{202E}'),
            "{n:?} listed"
        );
    }
    assert_eq!(
        names.iter().filter(|n| *n == "fx/echo").count(),
        1,
        "{names:?}"
    );
    let tools = c.get_ok("/api/mcp-tools?server=fx")["tools"].clone();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx/echo")
        .unwrap();
    assert_ne!(echo["description"], "DUPLICATE", "the first echo is kept");
    let status = client_status(&c, "fx");
    assert_eq!(status["skipped_tools"], 7, "{status}");
    assert_eq!(
        status["skipped_tools_by_reason"],
        json!({"invalid_name": 6, "duplicate": 1, "over_limit": 0, "invalid_header": 0}),
        "{status}"
    );
    let page = c.get("/mcp-servers").text();
    assert!(
        page.contains("7 tools this server listed left out (6 invalid name, 1 duplicate)"),
        "{page}"
    );
    assert_eq!(connected["tools"].as_array().unwrap().len(), names.len());
    let echoed = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "fx/echo", "arguments": {"text": "still"}}),
    );
    assert_eq!(echoed["result"]["content"][0]["text"], "still", "{echoed}");
    let log = server.stderr();
    assert!(log.contains("skipped one of its tools"), "no log line");
}

/// Connects a fixture listing `n` extra tools of `bytes` description each; (kept tools, status,
/// RSS KiB after).
fn many(tag: &str, n: usize, bytes: usize) -> (usize, Value, u64) {
    let (_dir, server) = start(tag);
    let c = server.client();
    connect(
        &c,
        &[
            "--many-tools",
            &n.to_string(),
            "--tool-description-bytes",
            &bytes.to_string(),
        ],
        60.0,
    );
    let kept = tool_names(&c).len();
    let mut status = client_status(&c, "fx");
    status["tools"] = json!("(left out)");
    let (rss, peak) = server.rss_kib();
    eprintln!(
        "{tag}: kept {kept} tools; RSS {rss} KiB (peak {peak} KiB); skipped {}",
        status["skipped_tools_by_reason"]
    );
    (kept, status, rss)
}

// 20,000 small tools: a thousand are kept, the rest counted as past the limit.
#[test]
fn a_server_with_20000_tools_is_cut_to_the_limit() {
    let (kept, status, _) = many("many", 20_000, 100);
    assert_eq!(kept, 1000, "{status}");
    assert_eq!(
        status["skipped_tools_by_reason"]["over_limit"],
        20_000 + 14 - 1000,
        "{status}"
    );
}

// 2,000 tools with 20 KB descriptions (40 MB of JSON): the byte budget (4 MiB) cuts them.
#[test]
fn a_server_with_huge_tool_descriptions_is_cut_to_the_byte_budget() {
    let (kept, status, rss) = many("big", 2_000, 20 * 1024);
    assert!(kept < 220, "{kept} tools kept: {status}");
    assert!(kept > 100, "{kept} tools kept: {status}");
    assert_eq!(
        status["skipped_tools_by_reason"]["over_limit"],
        2_000 + 14 - kept,
        "{status}"
    );
    assert!(rss < 512 * 1024, "RSS {rss} KiB");
}

// Resources with hostile URIs or names, a duplicate, and 5,000 more than the limit allows: the
// listing keeps the valid ones within the limit, the first of a URI, and counts the rest.
#[test]
fn hostile_and_surplus_resources_are_skipped_and_counted() {
    let (_dir, server) = start("resources");
    let c = server.client();
    connect(
        &c,
        &["--hostile-resources", "--many-resources", "5000"],
        30.0,
    );
    let listing = c.get_ok("/api/mcp-resources?server=fx");
    let resources = listing["resources"].as_array().expect("resources");
    assert_eq!(resources.len(), 1000, "{}", listing["skipped"]);
    assert_eq!(resources[0]["uri"], "fixture://hello");
    assert_eq!(resources[0]["name"], "hello", "the first of a URI is kept");
    for r in resources {
        let uri = r["uri"].as_str().expect("a URI");
        assert!(
            !uri.is_empty() && !uri.chars().any(|c| c.is_control() || c == '\u{202E}'),
            "{uri:?} listed"
        );
        assert_ne!(r["uri"], "fixture://named");
    }
    assert_eq!(
        listing["skipped"]["fx"],
        json!({"invalid": 6, "duplicate": 1, "over_limit": 5000 + 2 - 1000}),
        "{}",
        listing["skipped"]
    );
    let read = c.post_ok(
        "/api/mcp-resources/read",
        &json!({"server": "fx", "uri": "fixture://hello"}),
    );
    assert_eq!(read["content"], "hello world", "{read}");
}

// ---------------------------------------------------------------------------------------------
// The same flood over Streamable HTTP: a minimal MCP server whose event stream (the GET) carries
// 20,000 `notifications/tools/list_changed`, `late` added just before the last.

/// The event stream of [`HttpFlooder`]: `n` list_changed events, generated as they are read;
/// `late` is set just before the last one is handed out.
struct FloodStream {
    left: usize,
    late: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pending: Vec<u8>,
}

impl std::io::Read for FloodStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pending.is_empty() {
            if self.left == 0 {
                return Ok(0);
            }
            self.left -= 1;
            if self.left == 0 {
                self.late.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            self.pending = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n".to_vec();
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

/// A Streamable HTTP MCP server on port 0 that floods its event stream; serves until dropped.
struct HttpFlooder {
    port: u16,
    server: std::sync::Arc<tiny_http::Server>,
    thread: Option<thread::JoinHandle<()>>,
}

impl HttpFlooder {
    fn start(n: usize) -> HttpFlooder {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let late = Arc::new(AtomicBool::new(false));
        let s = server.clone();
        let thread = thread::spawn(move || {
            for mut rq in s.incoming_requests() {
                let late = late.clone();
                thread::spawn(move || {
                    let header = |name: &str, value: &str| {
                        tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
                            .expect("a header")
                    };
                    if *rq.method() == tiny_http::Method::Get {
                        let body = FloodStream {
                            left: n,
                            late,
                            pending: Vec::new(),
                        };
                        let resp = tiny_http::Response::new(
                            200.into(),
                            vec![header("Content-Type", "text/event-stream")],
                            body,
                            None,
                            None,
                        );
                        let _ = rq.respond(resp);
                        return;
                    }
                    if *rq.method() == tiny_http::Method::Delete {
                        let _ = rq.respond(tiny_http::Response::empty(200));
                        return;
                    }
                    let mut body = String::new();
                    let _ = std::io::Read::read_to_string(rq.as_reader(), &mut body);
                    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let id = msg.get("id").cloned();
                    let method = msg["method"].as_str().unwrap_or_default().to_owned();
                    let Some(id) = id.filter(|_| !method.is_empty()) else {
                        // A notification or a response of the client.
                        let _ = rq.respond(tiny_http::Response::empty(202));
                        return;
                    };
                    let reply = match method.as_str() {
                        "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {"tools": {"listChanged": true}},
                            "serverInfo": {"name": "flooder", "version": "1"}}}),
                        "tools/list" => {
                            let mut tools =
                                vec![json!({"name": "echo", "inputSchema": {"type": "object"}})];
                            if late.load(Ordering::SeqCst) {
                                tools.push(
                                    json!({"name": "late", "inputSchema": {"type": "object"}}),
                                );
                            }
                            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})
                        }
                        "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                        other => json!({"jsonrpc": "2.0", "id": id, "error": {
                            "code": -32601, "message": format!("Method not found: {other}")}}),
                    };
                    let resp = tiny_http::Response::from_string(reply.to_string())
                        .with_header(header("Content-Type", "application/json"))
                        .with_header(header("Mcp-Session-Id", "flood-session"));
                    let _ = rq.respond(resp);
                });
            }
        });
        HttpFlooder {
            port,
            server,
            thread: Some(thread),
        }
    }
}

impl Drop for HttpFlooder {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_flood_of_list_changed_over_streamable_http_costs_no_thread_per_notice() {
    let flooder = HttpFlooder::start(20_000);
    let (_dir, server) = start("flood-http");
    let c = server.client();
    let pid = server.pid();
    let before = threads(pid);
    let (rss_before, _) = server.rss_kib();
    let url = format!("http://127.0.0.1:{}/mcp", flooder.port);
    let port = c.port;
    let connecting = thread::spawn(move || {
        let body = json!({"name": "fx", "url": url, "transport": "http", "auto_reconnect": false});
        http_within(
            port,
            "POST",
            "/api/mcp-clients/connect",
            body.to_string().as_bytes(),
            LIVENESS,
        )
    });
    let mut most = before;
    let current = poll_until(Duration::from_secs(120), || {
        most = most.max(threads(pid));
        tool_names(&c).iter().any(|t| t == "fx/late").then_some(())
    });
    let (status, body) = connecting
        .join()
        .expect("connect thread")
        .expect("an answer to connect");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        current.is_some(),
        "the catalog never showed fx/late; {most} threads at most"
    );
    // A little longer: the relists after the last notice.
    for _ in 0..50 {
        most = most.max(threads(pid));
        thread::sleep(Duration::from_millis(10));
    }
    let (rss_after, _) = server.rss_kib();
    eprintln!(
        "flood-http: threads {before} before, {most} at most; RSS {rss_before} KiB -> {rss_after} KiB"
    );
    assert!(
        most <= before + THREAD_SLACK,
        "{most} threads during the flood ({before} before)"
    );
    assert_eq!(client_status(&c, "fx")["status"], "connected");
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}
