//! The MCP server's limits against the real binary: Streamable HTTP sessions that clients
//! abandon expire or make room at the cap, the cap holds under a burst, long batches and huge
//! stdio lines are refused in bounded memory, and what the debug-client protocol remembers of
//! requests (unknown pause ids, com-error reports) is bounded in bytes. Memory is read from
//! `/proc/<pid>/status`. Every wait has a deadline.

use std::io::BufReader;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp_support::{initialize, mcp_post, rpc, streamable_session, try_session, McpServer};
use crate::support::{
    call_start_body, deadline, http, open_response, pause_id, proc_status_kib, raw_request,
    wait_for, Server,
};

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The status of a `ping` in session `sid`: 200 while it lives, 404 once it is gone.
fn ping(port: u16, sid: &str) -> u16 {
    mcp_post(port, Some(sid), rpc(7, "ping", json!({}))).status
}

/// Sends a request on a new connection and reads the head of its answer (status 200 expected):
/// an event stream is then open, its body still to come.
fn open_event_stream(port: u16, request: &[u8]) -> BufReader<TcpStream> {
    let open = open_response(port, request, deadline());
    assert_eq!(open.status, 200, "{}", String::from_utf8_lossy(request));
    open.body
}

/// The GET stream of a session, held open until dropped.
fn open_stream(port: u16, sid: &str) -> BufReader<TcpStream> {
    let headers = [("Accept", "text/event-stream"), ("Mcp-Session-Id", sid)];
    open_event_stream(port, &raw_request(port, "GET", "/mcp", &headers, None))
}

const MIB: u64 = 1024;

/// Sessions the server reports having closed as idle, from its log.
fn expired_in_log(stderr: &str) -> usize {
    stderr
        .lines()
        .filter_map(|l| l.split("mcp: closed ").nth(1))
        .filter(|rest| rest.contains("idle for"))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Defect: Streamable HTTP sessions never expired.

#[test]
fn abandoned_streamable_sessions_expire_after_the_idle_timeout() {
    let s = Server::start(&["--mcp-sse", "--mcp-session-idle-s", "1"]);
    // One client keeps its GET stream open: an open stream is activity.
    let keeper = streamable_session(s.port, "2025-11-25");
    let _stream = open_stream(s.port, &keeper);
    // 63 clients initialize and vanish: with the keeper, the default cap of 64 is reached.
    let abandoned: Vec<String> = (0..63)
        .map(|_| streamable_session(s.port, "2025-11-25"))
        .collect();
    // Without any client coming back, the notifier's timer closes them.
    wait_for("the abandoned sessions to expire on the timer", || {
        (expired_in_log(&s.stderr()) >= 63).then_some(())
    });
    // A new client gets a session; the abandoned ones are gone (404: initialize again).
    let fresh = streamable_session(s.port, "2025-11-25");
    assert_eq!(ping(s.port, &fresh), 200);
    for sid in &abandoned {
        assert_eq!(ping(s.port, sid), 404, "abandoned session {sid}");
    }
    assert_eq!(
        ping(s.port, &keeper),
        200,
        "a session with an open stream stays"
    );
    // Past the timeout, a session is gone at its next lookup if the timer did not close it.
    let idle = streamable_session(s.port, "2025-11-25");
    // The idleness under test: past the 1 s of --mcp-session-idle-s, not a synchronisation.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(ping(s.port, &idle), 404);
    assert_eq!(ping(s.port, &keeper), 200);
}

#[test]
fn at_the_cap_the_longest_idle_session_makes_room_for_a_new_one() {
    // The default flags: 64 sessions, 30 minutes of idleness.
    let s = Server::start(&["--mcp-sse"]);
    let keeper = streamable_session(s.port, "2025-11-25");
    let _stream = open_stream(s.port, &keeper);
    let abandoned: Vec<String> = (0..63)
        .map(|_| streamable_session(s.port, "2025-11-25"))
        .collect();
    // A use ends just after its answer is sent, so consecutive sessions may end their last use
    // in either order: using all but the first again makes the first the longest idle.
    for sid in &abandoned[1..] {
        assert_eq!(ping(s.port, sid), 200);
    }
    // The 65th client: the longest-idle session without a stream or request makes room.
    let fresh = try_session(s.port, "2025-11-25").unwrap_or_else(|r| {
        panic!(
            "a new initialize at the cap: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        )
    });
    assert_eq!(ping(s.port, &abandoned[0]), 404, "the longest idle went");
    assert_eq!(ping(s.port, &abandoned[1]), 200, "the others stay");
    assert_eq!(ping(s.port, &keeper), 200, "the oldest has its stream open");
    // Another 100 clients: each evicts one abandoned session, never the keeper.
    for _ in 0..100 {
        streamable_session(s.port, "2025-11-25");
    }
    assert_eq!(ping(s.port, &keeper), 200);
    assert_eq!(ping(s.port, &fresh), 404);
    assert!(
        s.stderr().contains("to make room"),
        "the eviction is logged"
    );
}

#[test]
fn sessions_in_use_are_never_evicted_and_the_cap_then_holds() {
    let s = Server::start(&["--mcp-sse", "--mcp-max-sessions", "2"]);
    let streaming = streamable_session(s.port, "2025-11-25");
    let _stream = open_stream(s.port, &streaming);
    let waiting = streamable_session(s.port, "2025-11-25");
    // A request in flight: waiting 2 s for a pause that never comes, answered on an event
    // stream whose head comes at once.
    let call = rpc(
        1,
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 2}}),
    )
    .to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", &waiting),
        ("Connection", "close"),
    ];
    let request = raw_request(s.port, "POST", "/mcp", &headers, Some(call.as_bytes()));
    let mut in_flight = open_event_stream(s.port, &request);
    let refused = try_session(s.port, "2025-11-25").expect_err("both sessions are in use");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"]["code"], -32603);
    assert!(String::from_utf8_lossy(&refused.body).contains("--mcp-max-sessions"));
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut in_flight, &mut answer);
    assert!(answer.contains(r#""result""#), "{answer}");
    // Now idle (once its handler let go, just after the answer's last byte), the waiting
    // client's session makes room.
    let fresh = wait_for("the answered session to make room", || {
        try_session(s.port, "2025-11-25").ok()
    });
    assert_eq!(ping(s.port, &waiting), 404);
    assert_eq!(ping(s.port, &streaming), 200);
    assert_eq!(ping(s.port, &fresh), 200);
}

#[test]
fn a_burst_of_initializes_never_opens_more_sessions_than_the_cap() {
    const CAP: usize = 2;
    const CLIENTS: usize = 8;
    let s = Server::start(&["--mcp-sse", "--mcp-max-sessions", &CAP.to_string()]);
    let port = s.port;
    // Rounds of clients released together at the cap's edge, each round ended with DELETEs.
    for round in 0..300 {
        let gate = std::sync::Barrier::new(CLIENTS);
        let opened: Vec<String> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    let gate = &gate;
                    scope.spawn(move || {
                        let body = initialize("2025-11-25");
                        gate.wait();
                        let r = mcp_post(port, None, &body);
                        assert!(matches!(r.status, 200 | 503), "{}", r.status);
                        r.header("Mcp-Session-Id").map(str::to_owned)
                    })
                })
                .collect();
            threads
                .into_iter()
                .filter_map(|t| t.join().unwrap())
                .collect()
        });
        assert!(!opened.is_empty(), "round {round}: none opened");
        let alive: Vec<&String> = opened.iter().filter(|sid| ping(port, sid) == 200).collect();
        assert!(
            alive.len() <= CAP,
            "round {round}: {} sessions alive with a cap of {CAP}",
            alive.len()
        );
        for sid in alive {
            let r = http(port, "DELETE", "/mcp", &[("Mcp-Session-Id", sid)], None);
            assert_eq!(r.status, 200);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Defect: JSON-RPC batches multiplied memory.

/// A line or body of `n` `tools/list` requests.
fn tools_list_batch(n: usize) -> String {
    let items: Vec<String> = (0..n)
        .map(|i| rpc(i as i64 + 1, "tools/list", json!({})).to_string())
        .collect();
    format!("[{}]", items.join(","))
}

#[test]
fn a_batch_of_30000_requests_over_http_is_refused_in_bounded_memory() {
    let s = Server::start(&["--mcp-sse"]);
    let sid = streamable_session(s.port, "2025-03-26");
    let rss_before = proc_status_kib(s.pid(), "VmRSS");
    let batch = tools_list_batch(30_000);
    let r = mcp_post(s.port, Some(&sid), &batch);
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    eprintln!(
        "batch of 30,000 ({} bytes): {} bytes answered; RSS {rss_before} -> {rss_after} KiB",
        batch.len(),
        r.body.len()
    );
    assert!(
        r.body.len() < 1024,
        "a short error, not {} bytes",
        r.body.len()
    );
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let e = &r.json()["error"];
    assert_eq!(e["code"], -32600);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("at most 100 messages"),
        "{e}"
    );
    assert_eq!(e["data"]["max_batch_len"], 100);
    assert!(
        rss_after < rss_before + 32 * MIB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // A batch of 100 fits, answered in full.
    let r = mcp_post(s.port, Some(&sid), tools_list_batch(100));
    assert_eq!(r.status, 200);
    let answers = r.json();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 100);
    assert!(answers.iter().all(|a| a["result"]["tools"].is_array()));
    assert_eq!(ping(s.port, &sid), 200);
}

#[test]
fn the_answers_of_a_batch_stop_at_their_byte_limit_with_a_clear_error() {
    let s = Server::start(&["--mcp-sse"]);
    let app = s.client();
    app.post_ok("/api/breakpoints", &json!({"function_name": "big"}));
    // A paused call whose resource is about 1 MB: 100 reads of it would answer 100 MB. (The
    // signature just within the limit of a client's field, `MAX_CLIENT_FIELD_BYTES`.)
    let mut body = call_start_body("big", vec![], json!({}));
    body["signature"] = json!(format!("({})", "a".repeat((1 << 20) - 16)));
    let pause = pause_id(&app.post_ok("/api/call/start", &body));
    let sid = streamable_session(s.port, "2025-03-26");
    let read = |i: i64| {
        rpc(
            i,
            "resources/read",
            json!({"uri": format!("breakpoint://paused/{pause}")}),
        )
        .to_string()
    };
    let one = mcp_post(s.port, Some(&sid), read(0));
    assert_eq!(one.status, 200);
    assert!(one.body.len() > 1 << 20, "{} bytes", one.body.len());
    let batch = format!("[{}]", (1..=100).map(read).collect::<Vec<_>>().join(","));
    let rss_before = proc_status_kib(s.pid(), "VmRSS");
    let r = mcp_post(s.port, Some(&sid), &batch);
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    assert_eq!(r.status, 200);
    assert!(
        r.body.len() <= (4 << 20) + 100 * 400,
        "answers of {} bytes",
        r.body.len()
    );
    let answers = r.json();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 100);
    let ids: Vec<i64> = answers.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=100).collect::<Vec<_>>());
    let answered = answers.iter().filter(|a| a.get("result").is_some()).count();
    assert!((1..=4).contains(&answered), "{answered} answered");
    let first_refused = &answers[answered]["error"];
    assert_eq!(first_refused["code"], -32000);
    assert_eq!(first_refused["data"]["handled"], true);
    for a in &answers[answered + 1..] {
        assert_eq!(a["error"]["code"], -32000, "{a}");
        assert_eq!(a["error"]["data"]["handled"], false);
        assert_eq!(a["error"]["data"]["max_batch_answer_bytes"], 4 << 20);
        assert!(a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not handled"));
    }
    assert!(
        rss_after < rss_before + 64 * MIB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

#[test]
fn a_batch_of_30000_requests_over_stdio_is_refused_in_bounded_memory() {
    let s = McpServer::initialized("2025-03-26");
    let rss_before = proc_status_kib(s.pid(), "VmRSS");
    s.send_raw(&tools_list_batch(30_000));
    let e = s
        .take(deadline(), |m| m["error"]["code"] == -32600)
        .expect("one error for the batch");
    assert_eq!(e["id"], Value::Null);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 100 messages"));
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    assert!(
        rss_after < rss_before + 32 * MIB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    assert!(
        s.take(Duration::from_millis(200), Value::is_array)
            .is_none(),
        "no answers array"
    );
}

// ---------------------------------------------------------------------------------------------
// Defect: the rest of an oversized stdio line was read into an unbounded buffer.

#[test]
fn a_200_mb_stdio_line_is_skipped_in_constant_memory() {
    let s = McpServer::initialized("2025-11-25");
    let pid = s.pid();
    let hwm_before = proc_status_kib(pid, "VmHWM");
    let rss_before = proc_status_kib(pid, "VmRSS");
    let mut line = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_owned();
    line.push_str(&"a".repeat(200 << 20));
    line.push_str(r#""}}"#);
    s.send_raw(&line);
    drop(line);
    let e = s
        .take(deadline(), |m| m["error"]["code"] == -32700)
        .expect("a parse error for the long line");
    assert_eq!(e["id"], Value::Null);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("longer than"));
    // The next line is a request of its own, answered.
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    assert!(
        s.take(Duration::from_millis(200), |m| m["error"]["code"] == -32700)
            .is_none(),
        "one error, not one per chunk"
    );
    let hwm_after = proc_status_kib(pid, "VmHWM");
    let rss_after = proc_status_kib(pid, "VmRSS");
    eprintln!("200 MB line: peak RSS {hwm_before} -> {hwm_after} KiB, RSS {rss_before} -> {rss_after} KiB");
    // The first 64 MiB are read to tell a long message from a too long one; nothing more.
    assert!(
        hwm_after < hwm_before + 100 * MIB,
        "peak RSS grew from {hwm_before} KiB to {hwm_after} KiB"
    );
    assert!(
        rss_after < rss_before + 16 * MIB,
        "RSS stayed at {rss_after} KiB (from {rss_before} KiB)"
    );
}

// ---------------------------------------------------------------------------------------------
// Defect: what the debug-client protocol remembers of requests was bounded by count only.

#[test]
fn polling_300_unknown_1_mb_pause_ids_keeps_memory_bounded_and_answers_waiting() {
    let s = Server::start(&[]);
    let c = s.client();
    let rss_before = proc_status_kib(s.pid(), "VmRSS");
    // A 1 MB id no longer reaches the route: the request head is over 64 KiB (431). Ids just
    // under the head limit still must not be remembered (300 of them would be 18 MB).
    let huge = format!("/api/poll/{}", "p".repeat(1 << 20));
    assert_eq!(c.get(&huge).status, 431);
    for i in 0..300 {
        let id = format!("{i:03}{}", "p".repeat(60 << 10));
        let r = c.get(&format!("/api/poll/{id}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.json(), json!({"status": "waiting"}), "poll {i}");
    }
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    eprintln!("300 polls of 1 MB ids: RSS {rss_before} -> {rss_after} KiB");
    assert!(
        rss_after < rss_before + 64 * MIB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // A pause id from before a restart is still remembered, and `continue` releases it.
    let orphan = "0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b";
    assert_eq!(
        c.get_ok(&format!("/api/poll/{orphan}"))["status"],
        "waiting"
    );
    c.post_ok(
        &format!("/api/paused/{orphan}/continue"),
        &json!({"action": "continue"}),
    );
    assert_eq!(c.get_ok(&format!("/api/poll/{orphan}"))["status"], "ready");
}

#[test]
fn large_com_error_reports_are_kept_within_their_bytes() {
    let s = Server::start(&[]);
    let c = s.client();
    let rss_before = proc_status_kib(s.pid(), "VmRSS");
    let big = "e".repeat(1 << 20);
    for i in 0..100 {
        let report = json!({
            "summary": format!("report {i}"), "timestamp": 1.0, "method": "POST",
            "path": "/api/call/start", "server_url": "http://127.0.0.1", "process_pid": 1,
            "process_start_time": 1.0, "payload": {"data": big}, "traceback": big,
        });
        c.post_ok("/api/report-com-error", &report);
    }
    let rss_after = proc_status_kib(s.pid(), "VmRSS");
    eprintln!("100 reports of 2 MB: RSS {rss_before} -> {rss_after} KiB");
    let all = c.get_ok("/api/com-errors");
    let all = all["errors"].as_array().unwrap();
    assert_eq!(all.len(), 100);
    assert_eq!(all[99]["summary"], "report 99");
    assert!(all[99]["shrunk"].is_string());
    assert!(all.iter().map(|r| r.to_string().len()).sum::<usize>() <= 8 << 20);
    assert!(
        rss_after < rss_before + 64 * MIB,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}
