//! The MCP client manager end to end: the real binary connects to fixture MCP servers (the
//! `cideldill-fixture-mcp-server` binary of this crate, spawned over stdio) and to another instance of
//! itself over Streamable HTTP and legacy SSE; tests drive it through the REST API and the
//! `external_*` MCP tools.

use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp_support::{tool_json, McpServer};
use crate::support::{
    deadline, fixture_server_path, living_children_of, process_gone, signal, wait_for, Client,
    Server, TempDir,
};

/// Short timings so reconnection and health tests run in seconds.
const FAST: &[&str] = &[
    "--mcp-backoff-base-s",
    "0.05",
    "--mcp-connect-timeout-s",
    "5",
];

fn fx() -> String {
    fixture_server_path().display().to_string()
}

fn inline(name: &str, flags: &str) -> String {
    format!("{name}:{} {flags}", fx())
}

/// A server with the fixture connected as `fx` (plus `flags` for the fixture).
fn with_fixture(flags: &str, extra: &[&str]) -> Server {
    let spec = inline("fx", flags);
    let mut args = vec!["--mcp-client", &spec];
    // Flags given in `extra` win over the fast defaults.
    for pair in FAST.chunks(2) {
        if !extra.contains(&pair[0]) {
            args.extend_from_slice(pair);
        }
    }
    args.extend_from_slice(extra);
    let s = Server::start(&args);
    wait_status(&s.client(), "fx", "connected");
    s
}

/// The external servers as `GET /api/mcp-clients` lists them.
pub(crate) fn clients(c: &Client) -> Value {
    c.get_ok("/api/mcp-clients")["clients"].clone()
}

/// Waits until the external server `name` has `status`; answers its entry.
pub(crate) fn wait_status(c: &Client, name: &str, status: &str) -> Value {
    wait_for(&format!("{name} to be {status}"), || {
        let all = clients(c);
        (all[name]["status"] == status).then(|| all[name].clone())
    })
}

fn call(c: &Client, tool: &str, args: Value) -> crate::support::Resp {
    c.post(
        "/api/mcp-tools/call",
        &json!({"tool": tool, "arguments": args}),
    )
}

fn call_ok(c: &Client, tool: &str, args: Value) -> Value {
    c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": tool, "arguments": args}),
    )
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Asserts an error answer: its status and its `error` code.
fn assert_error(r: &crate::support::Resp, status: u16, code: &str) {
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (status, json!(code)),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
}

fn connect_body(name: &str, args: &[&str]) -> Value {
    json!({"name": name, "command": fx(), "args": args})
}

/// Waits until the fixture has logged (relayed into the server's log, read by `log`) receiving
/// `n` tools/call requests: the call is then in flight upstream, not still queued in the server.
fn wait_fixture_received_calls(log: impl Fn() -> String, n: usize) {
    wait_for(
        &format!("the fixture to log {n} tools/call request(s)"),
        || (log().matches("(stderr): fixture: tools/call").count() >= n).then_some(()),
    );
}

// Status, catalog entries, results (text, structured, several parts) and call records with the
// result stored by CID.
#[test]
fn an_inline_stdio_server_is_connected_listed_and_called_and_every_call_is_recorded() {
    let s = with_fixture("", &[]);
    let c = s.client();
    let fxs = &clients(&c)["fx"];
    assert_eq!(fxs["transport"], "stdio");
    assert_eq!(fxs["protocol_version"], "2025-11-25");
    assert!(fxs["connected_at"].as_f64().unwrap() > 0.0);
    assert!(fxs["tools"].as_array().unwrap().contains(&json!("fx/echo")));

    let tools = c.get_ok("/api/mcp-tools")["tools"].clone();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx/echo")
        .expect("fx/echo listed")
        .clone();
    assert_eq!(echo["server"], "fx");
    assert_eq!(echo["original_name"], "echo");
    assert!(!echo["description"].as_str().unwrap().is_empty());
    assert_eq!(echo["input_schema"]["properties"]["text"]["type"], "string");

    let r = call_ok(&c, "fx/echo", json!({"text": "hello"}));
    assert_eq!(text(&r["result"]), "hello");
    assert_eq!(r["server"], "fx");
    assert_eq!(r["tool"], "fx/echo");
    let r = call_ok(&c, "fx/add", json!({"a": 2, "b": 3.5}));
    assert_eq!(r["result"]["structuredContent"]["sum"], 5.5);
    let r = call_ok(&c, "fx/multi", json!({}));
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}])
    );
    // Missing arguments are {}.
    let r = c.post_ok("/api/mcp-tools/call", &json!({"tool": "fx/no_schema"}));
    assert_eq!(text(&r["result"]), "ok");

    let records = c.get_ok("/api/call-records?function=fx/add")["calls"].clone();
    let rec = &records[0];
    assert_eq!(rec["source"], "mcp_client");
    assert_eq!(rec["server"], "fx");
    assert_eq!(rec["tool"], "fx/add");
    assert_eq!(rec["original_name"], "add");
    assert_eq!(rec["arguments"], json!({"a": 2, "b": 3.5}));
    assert_eq!(rec["status"], "success");
    let cid = rec["result_cid"].as_str().unwrap();
    let obj = c.get_ok(&format!("/api/objects/{cid}?data=true"));
    assert_eq!(obj["format"], "json");
    let stored: Value = serde_json::from_str(obj["data"].as_str().unwrap()).unwrap();
    assert_eq!(stored["structuredContent"]["sum"], 5.5);
}

// Unknown servers and tools, bad requests, upstream errors, duplicate and invalid names,
// ambiguous bare names (a bare name resolves when unique), deny lists and a server with no tools.
#[test]
fn failures_carry_the_designs_codes_and_fitting_statuses() {
    let s = with_fixture("", &[]);
    let c = s.client();
    let e = call(&c, "nosuch/tool", json!({}));
    assert_error(&e, 404, "server_not_found");
    let e = call(&c, "fx/nosuch", json!({}));
    assert_error(&e, 404, "tool_not_found");
    let e = c.post("/api/mcp-tools/call", &json!({"arguments": {}}));
    assert_error(&e, 400, "missing_tool");
    let e = c.post(
        "/api/mcp-tools/call",
        &json!({"tool": "fx/echo", "arguments": [1]}),
    );
    assert_error(&e, 400, "invalid_arguments");
    // A bare name offered by exactly one server resolves.
    assert_eq!(
        text(&call_ok(&c, "echo", json!({"text": "bare"}))["result"]),
        "bare"
    );
    // A JSON-RPC error from the tool is a failed call with the upstream code.
    let e = call(&c, "fx/rpc_error", json!({}));
    assert_eq!(e.status, 502);
    let body = e.json();
    assert_eq!(body["error"], "call_failed");
    assert_eq!(body["upstream_code"], -32603);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("internal failure"));
    assert!(body["call_id"].as_str().unwrap().starts_with("mcp-"));
    // isError results are results, passed through faithfully.
    let r = call_ok(&c, "fx/fail", json!({}));
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(text(&r["result"]), "it failed");
    let records = c.get_ok("/api/call-records?function=fx/rpc_error")["calls"].clone();
    assert_eq!(records[0]["status"], "error");
    assert_eq!(records[0]["error"]["code"], "call_failed");
    assert_eq!(
        c.get_ok("/api/call-records?function=fx/fail")["calls"][0]["status"],
        "tool_error"
    );
    for path in [
        "/api/mcp-clients/nosuch/disconnect",
        "/api/mcp-clients/nosuch/reconnect",
    ] {
        let e = c.post(path, &json!({}));
        assert_error(&e, 404, "server_not_found");
    }
    let e = c.post("/api/mcp-clients/connect", &connect_body("fx", &[]));
    assert_error(&e, 409, "duplicate_name");
    let e = c.post(
        "/api/mcp-clients/connect",
        &json!({"name": "a/b", "command": "x"}),
    );
    assert_error(&e, 400, "invalid_config");

    // A second server with the same tools makes bare names ambiguous; a deny list hides and
    // refuses tools.
    let mut body = connect_body("fy", &[]);
    body["denied_tools"] = json!(["fail*", "rpc_*"]);
    let r = c.post_ok("/api/mcp-clients/connect", &body);
    assert!(r["tools"].as_array().unwrap().contains(&json!("fy/echo")));
    assert!(!r["tools"].as_array().unwrap().contains(&json!("fy/fail")));
    let e = call(&c, "echo", json!({"text": "x"}));
    assert_eq!(e.status, 409);
    assert_eq!(e.json()["error"], "ambiguous_tool");
    assert_eq!(e.json()["candidates"], json!(["fx/echo", "fy/echo"]));
    let e = call(&c, "fy/fail", json!({}));
    assert_error(&e, 403, "tool_denied");
    let listed = c.get_ok("/api/mcp-tools?server=fy")["tools"].clone();
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["server"] == "fy"
            && t["original_name"] != "fail"
            && t["original_name"] != "rpc_error"));
    let e = c.get("/api/mcp-tools?server=nosuch");
    assert_eq!(e.status, 404);

    // Zero tools.
    c.post_ok(
        "/api/mcp-clients/connect",
        &connect_body("empty", &["--no-tools"]),
    );
    assert_eq!(c.get_ok("/api/mcp-tools?server=empty")["tools"], json!([]));
    let e = call(&c, "empty/echo", json!({}));
    assert_error(&e, 404, "tool_not_found");
}

/// The names of the threads of `pid` that belong to the MCP client manager.
fn upstream_threads(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc tasks") {
        let comm = task.map(|t| t.path().join("comm")).expect("a task");
        let name = std::fs::read_to_string(comm).unwrap_or_default();
        if name.starts_with("upstream") {
            out.push(name.trim().to_owned());
        }
    }
    out
}

// A server started without any client flag has an idle manager (no thread, no child): every
// surface answers as for a manager with no server, and a server connected at run time, with no
// flag, is listed and called like one from a flag. Browser pages of other origins cannot.
#[test]
fn without_a_client_flag_servers_connect_at_run_time() {
    let s = Server::start(FAST);
    let c = s.client();
    assert_eq!(upstream_threads(s.pid()), Vec::<String>::new());
    assert_eq!(living_children_of(s.pid()), Vec::<u32>::new());
    assert_eq!(clients(&c), json!({}));
    assert_eq!(c.get_ok("/api/mcp-tools")["tools"], json!([]));
    assert_eq!(
        c.get_ok("/api/mcp-resources"),
        json!({"resources": [], "errors": {}})
    );
    assert_error(&call(&c, "a/b", json!({})), 404, "server_not_found");
    for path in [
        "/api/mcp-clients/x/disconnect",
        "/api/mcp-clients/x/reconnect",
    ] {
        assert_error(&c.post(path, &json!({})), 404, "server_not_found");
    }
    assert_error(
        &c.post(
            "/api/mcp-resources/read",
            &json!({"server": "a", "uri": "u"}),
        ),
        404,
        "server_not_found",
    );
    // A page of another origin cannot spawn anything.
    let body = connect_body("fx", &[]).to_string();
    let r = crate::support::http(
        s.port,
        "POST",
        "/api/mcp-clients/connect",
        &[
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/json"),
        ],
        Some(&body),
    );
    assert_error(&r, 403, "origin_not_allowed");
    assert_eq!(clients(&c), json!({}));
    assert_eq!(living_children_of(s.pid()), Vec::<u32>::new());

    // Connected at run time (as the web UI's form does): listed, its tools in the catalog, called.
    let r = c.post_ok("/api/mcp-clients/connect", &connect_body("fx", &[]));
    assert!(
        r["tools"].as_array().unwrap().contains(&json!("fx/echo")),
        "{r}"
    );
    let fx = wait_status(&c, "fx", "connected");
    assert_eq!(fx["source"], "runtime");
    assert_eq!(living_children_of(s.pid()).len(), 1, "the fixture runs");
    assert!(!upstream_threads(s.pid()).is_empty(), "the manager woke up");
    let tools = c.get_ok("/api/mcp-tools?server=fx")["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "fx/echo"),
        "{tools}"
    );
    let out = call_ok(&c, "fx/echo", json!({"text": "hi"}));
    assert_eq!(text(&out["result"]), "hi", "{out}");
    // An agent sees it too.
    let m = McpServer::beside(&s, &[]);
    m.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "host", "version": "1"}}),
    );
    m.notify("notifications/initialized", json!({}));
    let listed = m.call_ok("external_list_tools", json!({}));
    assert!(
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "fx/echo"),
        "{listed}"
    );
}

// Without external servers the proxy tools answer with a hint saying where a user connects one.
#[test]
fn the_proxy_tools_without_servers_say_where_to_connect_one() {
    let m = McpServer::initialized("2025-11-25");
    assert_eq!(
        m.call_ok("external_list_servers", json!({}))["servers"],
        json!({})
    );
    let e = m.call_err("external_call_tool", json!({"tool": "a/b"}));
    assert_eq!(e["error"], "server_not_found");
    assert!(e["hint"].as_str().unwrap().contains("/mcp-servers"), "{e}");
}

// A call past timeout_s is cancelled upstream and the connection stays usable.
#[test]
fn a_call_past_its_timeout_is_cancelled_and_the_server_stays_usable() {
    let s = Server::start(&["--mcp-clients", "--mcp-backoff-base-s", "0.05"]);
    let c = s.client();
    let mut body = connect_body("slow", &[]);
    body["timeout_s"] = json!(0.5);
    c.post_ok("/api/mcp-clients/connect", &body);
    let t0 = Instant::now();
    let e = call(&c, "slow/slow", json!({"ms": 5000}));
    let took = t0.elapsed();
    assert_eq!(e.status, 504);
    assert_eq!(e.json()["error"], "call_timeout");
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "{took:?}"
    );
    wait_for("the fixture to log the cancellation", || {
        s.stderr()
            .contains("(stderr): fixture: cancelled")
            .then_some(())
    });
    assert_eq!(
        text(&call_ok(&c, "slow/echo", json!({"text": "still here"}))["result"]),
        "still here"
    );
    assert_eq!(
        c.get_ok("/api/call-records?function=slow/slow")["calls"][0]["status"],
        "timeout"
    );
}

// Calls to one server run concurrently (multiplexed by id).
#[test]
fn concurrent_calls_to_one_server_overlap() {
    let s = with_fixture("", &[]);
    let port = s.port;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..6)
        .map(|i| {
            thread::spawn(move || {
                let c = Client { port };
                let r = call_ok(&c, "fx/slow", json!({"ms": 600}));
                assert_eq!(text(&r["result"]), "slept 600", "call {i}");
            })
        })
        .collect();
    // Meanwhile, another server connects.
    let c = s.client();
    c.post_ok("/api/mcp-clients/connect", &connect_body("other", &[]));
    assert_eq!(
        text(&call_ok(&c, "other/echo", json!({"text": "o"}))["result"]),
        "o"
    );
    for h in handles {
        h.join().unwrap();
    }
    let took = t0.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "6 x 600 ms took {took:?}: serialised?"
    );
}

// A killed child fails the call in flight at once and shows disconnected, then it reconnects
// by itself.
#[test]
fn a_crash_fails_the_call_at_once_and_the_server_reconnects_by_itself() {
    let s = with_fixture("", &["--mcp-backoff-base-s", "0.5"]);
    let c = s.client();
    let t0 = Instant::now();
    let e = call(&c, "fx/crash", json!({}));
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(e.status, 502);
    let body = e.json();
    assert_eq!(body["error"], "call_failed");
    assert!(
        body["message"].as_str().unwrap().contains("exit status 3"),
        "{body}"
    );
    let down = wait_status(&c, "fx", "disconnected");
    assert!(down["error"].as_str().unwrap().contains("exited"), "{down}");
    // While down, calls say so.
    let e = call(&c, "fx/echo", json!({"text": "x"}));
    assert_eq!(e.json()["error"], "server_not_connected");
    let up = wait_status(&c, "fx", "connected");
    let pid = up["pid"].as_u64().unwrap() as u32;

    // Killing the child from outside: the same.
    signal(pid, "-KILL");
    let down = wait_status(&c, "fx", "disconnected");
    assert!(
        down["error"].as_str().unwrap().contains("signal 9"),
        "{down}"
    );
    let up = wait_status(&c, "fx", "connected");
    assert_ne!(up["pid"].as_u64().unwrap() as u32, pid);
    assert_eq!(
        text(&call_ok(&c, "fx/echo", json!({"text": "back"}))["result"]),
        "back"
    );
    assert!(process_gone(pid));
}

// Backoff then failed; a manual reconnect resets the count.
#[test]
fn reconnection_gives_up_after_five_attempts_and_a_manual_reconnect_starts_over() {
    let dir = TempDir::new("flaky");
    let flag = dir.path().join("started-once");
    let script = format!(
        "if [ -e '{0}' ]; then echo refusing >&2; exit 1; fi; touch '{0}'; exec '{1}'",
        flag.display(),
        fx()
    );
    let s = Server::start(&["--mcp-clients", "--mcp-backoff-base-s", "0.05"]);
    let c = s.client();
    c.post_ok(
        "/api/mcp-clients/connect",
        &json!({"name": "flaky", "command": "sh", "args": ["-c", script]}),
    );
    let t0 = Instant::now();
    let _ = call(&c, "flaky/crash", json!({}));
    let failed = wait_status(&c, "flaky", "failed");
    // 0.05 + 0.1 + 0.2 + 0.4 + 0.8 s of backoff at least.
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(failed["reconnect_attempts"], 5);
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("gave up after 5 reconnection attempts"),
        "{failed}"
    );
    let logged = s.stderr();
    for n in 1..=5 {
        assert!(
            logged.contains(&format!("attempt {n} of 5")),
            "attempt {n} not logged"
        );
    }
    std::fs::remove_file(&flag).unwrap();
    let r = c.post_ok("/api/mcp-clients/flaky/reconnect", &json!({}));
    assert!(r["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("flaky/echo")));
    assert_eq!(clients(&c)["flaky"]["reconnect_attempts"], 0);
}

// With the manager but no server, every listing is empty; a server connected with
// auto_reconnect false stays disconnected after a crash.
#[test]
fn without_auto_reconnect_a_lost_server_stays_disconnected() {
    let s = Server::start(&["--mcp-clients", "--mcp-backoff-base-s", "0.05"]);
    let c = s.client();
    assert_eq!(clients(&c), json!({}));
    assert_eq!(c.get_ok("/api/mcp-tools"), json!({"tools": []}));
    assert_eq!(c.get_ok("/api/mcp-resources")["resources"], json!([]));
    let mut body = connect_body("once", &[]);
    body["auto_reconnect"] = json!(false);
    c.post_ok("/api/mcp-clients/connect", &body);
    let _ = call(&c, "once/crash", json!({}));
    wait_status(&c, "once", "disconnected");
    // The absence of a reconnection is what is tested: 600 ms is twelve times the backoff base
    // (0.05 s), time for several attempts had auto_reconnect been ignored.
    thread::sleep(Duration::from_millis(600));
    let st = &clients(&c)["once"];
    assert_eq!(st["status"], "disconnected");
    assert_eq!(st["reconnect_attempts"], 0);
}

// Servers that cannot be connected get status error with the reason.
#[test]
fn servers_that_fail_to_start_or_initialize_get_status_error() {
    let s = Server::start(&["--mcp-clients", "--mcp-connect-timeout-s", "1"]);
    let c = s.client();
    let cases: &[(&str, Value, &str)] = &[
        (
            "crash",
            connect_body("crash", &["--crash-on-start"]),
            "exited (exit status 1); its stderr ended with: ",
        ),
        (
            "nocmd",
            json!({"name": "nocmd", "command": "/nonexistent/mcp-server"}),
            "cannot start",
        ),
        (
            "failinit",
            connect_body("failinit", &["--fail-init"]),
            "initialization refused",
        ),
        (
            "badinit",
            connect_body("badinit", &["--bad-init"]),
            "protocolVersion",
        ),
        (
            "hang",
            connect_body("hang", &["--hang-init"]),
            "connect timeout of 1 s",
        ),
    ];
    for (name, body, reason) in cases {
        let t0 = Instant::now();
        let e = c.post("/api/mcp-clients/connect", body);
        assert!(
            t0.elapsed() < Duration::from_secs(4),
            "{name} took {:?}",
            t0.elapsed()
        );
        assert_eq!(e.status, 502, "{name}");
        let b = e.json();
        assert_eq!(b["error"], "connect_failed", "{name}");
        assert!(
            b["message"].as_str().unwrap().contains(reason),
            "{name}: {b}"
        );
        let st = &clients(&c)[*name];
        assert_eq!(st["status"], "error", "{name}");
        assert!(
            st["error"].as_str().unwrap().contains(reason),
            "{name}: {st}"
        );
    }
    // A failed name can be connected again with a fixed definition.
    c.post_ok("/api/mcp-clients/connect", &connect_body("crash", &[]));
    assert_eq!(clients(&c)["crash"]["status"], "connected");
}

// Junk on stdout, stderr captured under the server's name, unicode names and arguments
// pass through.
#[test]
fn junk_stdout_is_skipped_stderr_is_logged_and_unicode_passes_through() {
    let s = with_fixture("--junk --stderr-chatter", &[]);
    let c = s.client();
    let r = call_ok(
        &c,
        "fx/größe_✓",
        json!({"wort": "Grüße 🌍 \"quoted\"\nline"}),
    );
    assert_eq!(text(&r["result"]), "got Grüße 🌍 \"quoted\"\nline");
    let tools = c.get_ok("/api/mcp-tools")["tools"].clone();
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "fx/größe_✓" && t["original_name"] == "größe_✓"));
    let big = "é".repeat(1 << 20);
    let r = call_ok(&c, "fx/echo", json!({"text": big}));
    assert_eq!(text(&r["result"]).len(), big.len());
    let log = s.stderr();
    assert!(
        log.contains("upstream fx (stderr): fixture: stderr line 1"),
        "stderr not captured"
    );
    assert!(
        log.contains("skipped a stdout line that is not JSON"),
        "junk not reported"
    );
}

// 10 MB results are never truncated by the manager or REST;
// external_call_tool cuts them for the agent and names the stored CID.
#[test]
fn a_ten_megabyte_result_is_whole_over_rest_and_cut_for_agents() {
    let spec = inline("fx", "");
    let m = McpServer::start(&["--mcp-client", &spec]);
    let init = m.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}));
    assert!(init.get("result").is_some());
    m.notify("notifications/initialized", json!({}));
    let c = m.http();
    wait_status(&c, "fx", "connected");
    let size = 10 * 1024 * 1024;
    let r = call_ok(&c, "fx/huge", json!({"bytes": size}));
    let t = text(&r["result"]);
    assert_eq!(t.len(), size);
    assert!(t.starts_with(&format!("{size}:")));

    let out = m.call_ok(
        "external_call_tool",
        json!({"tool": "fx/huge", "arguments": {"bytes": size}}),
    );
    assert_eq!(out["truncated"], true);
    assert!(out["result_size"].as_u64().unwrap() > size as u64);
    let shown = out["content"][0]["text"].as_str().unwrap();
    assert!(shown.len() < 60_000, "{}", shown.len());
    assert!(shown.contains("cut:"));
    let cid = out["result_cid"].as_str().unwrap();
    assert!(out["note"].as_str().unwrap().contains(cid));
    let obj = c.get_ok(&format!("/api/objects/{cid}?data=true"));
    let full: Value = serde_json::from_str(obj["data"].as_str().unwrap()).unwrap();
    assert_eq!(full["content"][0]["text"].as_str().unwrap().len(), size);
}

// Sampling, elicitation and roots requests are refused with -32601 and the
// connection stays usable.
#[test]
fn server_requests_are_refused_with_method_not_found_and_the_connection_stays_usable() {
    let s = with_fixture("--ask-on-init", &[]);
    let c = s.client();
    let r = call_ok(&c, "fx/ask", json!({}));
    let answers: Value = serde_json::from_str(&text(&r["result"])).unwrap();
    for id in ["s1", "s2", "s3"] {
        assert_eq!(answers[id]["code"], -32601, "{answers}");
        assert!(answers[id]["message"]
            .as_str()
            .unwrap()
            .contains("not supported"));
    }
    assert_eq!(
        text(&call_ok(&c, "fx/echo", json!({"text": "fine"}))["result"]),
        "fine"
    );
    wait_for("the answers to the requests sent at initialization", || {
        let log = s.stderr();
        (log.contains("i1") && log.contains("i3") && log.contains("-32601")).then_some(())
    });
}

// Tools re-listed on list_changed; a changed list after reconnecting.
#[test]
fn the_tool_list_follows_list_changed_and_reconnection() {
    let dir = TempDir::new("tools");
    let list = dir.path().join("tools.txt");
    std::fs::write(&list, "echo\nalpha\n").unwrap();
    let s = Server::start(&["--mcp-clients"]);
    let c = s.client();
    let r = c.post_ok(
        "/api/mcp-clients/connect",
        &json!({"name": "fx", "command": fx(), "args": ["--tools-file", list.display().to_string()]}),
    );
    assert_eq!(r["tools"], json!(["fx/echo", "fx/alpha"]));
    std::fs::write(&list, "echo\nalpha\nbeta\nnotify_change\n").unwrap();
    let r = c.post_ok("/api/mcp-clients/fx/reconnect", &json!({}));
    assert!(r["tools"].as_array().unwrap().contains(&json!("fx/beta")));
    assert_eq!(
        text(&call_ok(&c, "fx/beta", json!({}))["result"]),
        "beta ok"
    );
    call_ok(&c, "fx/notify_change", json!({}));
    wait_for("fx/late after list_changed", || {
        let tools = c.get_ok("/api/mcp-tools")["tools"].clone();
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "fx/late")
            .then_some(())
    });
    assert_eq!(
        text(&call_ok(&c, "fx/late", json!({}))["result"]),
        "late tool"
    );
}

// Disconnect keeps the definition and fails in-flight calls.
#[test]
fn disconnect_fails_in_flight_calls_and_reconnect_restores_the_tools() {
    let s = with_fixture("", &[]);
    let c = s.client();
    let pid = clients(&c)["fx"]["pid"].as_u64().unwrap() as u32;
    let port = s.port;
    let inflight = thread::spawn(move || {
        let t0 = Instant::now();
        let r = call(&Client { port }, "fx/never", json!({}));
        (r.status, r.json(), t0.elapsed())
    });
    // Disconnect only once the fixture has the request: a call not yet sent would fail too,
    // with another error (server_not_connected), which is not what this test is about.
    wait_fixture_received_calls(|| s.stderr(), 1);
    assert_eq!(
        c.post_ok("/api/mcp-clients/fx/disconnect", &json!({})),
        json!({"status": "ok", "name": "fx"})
    );
    let (status, body, took) = inflight.join().unwrap();
    assert_eq!(
        (status, body["error"].clone()),
        (502, json!("call_failed")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("disconnected during the call"),
        "{body}"
    );
    assert!(took < Duration::from_secs(5));
    let st = &clients(&c)["fx"];
    assert_eq!(st["status"], "disconnected");
    assert_eq!(st["tools"], json!([]));
    assert_eq!(c.get_ok("/api/mcp-tools")["tools"], json!([]));
    let e = call(&c, "fx/echo", json!({"text": "x"}));
    assert_error(&e, 502, "server_not_connected");
    wait_for("the disconnected child to exit", || {
        process_gone(pid).then_some(())
    });
    let r = c.post_ok("/api/mcp-clients/fx/reconnect", &json!({}));
    assert!(r["tools"].as_array().unwrap().contains(&json!("fx/echo")));
    assert_eq!(
        text(&call_ok(&c, "fx/echo", json!({"text": "again"}))["result"]),
        "again"
    );
}

// The shutdown rules: stdin closed, SIGTERM to the process group,
// SIGKILL; nothing survives, nothing is left a zombie.
#[test]
fn stopping_the_server_leaves_no_child_or_grandchild_even_mid_call() {
    let dir = TempDir::new("pids");
    let pid_file = dir.path().join("pid");
    let flags = format!(
        "--spawn-grandchild --ignore-stdin-eof --pid-file {}",
        pid_file.display()
    );
    let mut s = with_fixture(&flags, &[]);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let grandchild: u32 = wait_for("the grandchild pid", || {
        std::fs::read_to_string(dir.path().join("pid.grandchild"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    assert!(!process_gone(pid) && !process_gone(grandchild));
    let port = s.port;
    let _inflight = thread::spawn(move || call(&Client { port }, "fx/never", json!({})));
    wait_fixture_received_calls(|| s.stderr(), 1);
    let t0 = Instant::now();
    let status = s.signal_and_wait("-TERM");
    assert!(status.success(), "{status}");
    // Closing stdin is ignored by this child: SIGTERM after the shutdown grace (0.8 s).
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    wait_for("the child and grandchild to be gone", || {
        (process_gone(pid) && process_gone(grandchild)).then_some(())
    });
    assert!(s.stderr().contains("sending SIGTERM to its process group"));
}

// The config file (Claude-style here) is read at start; run-time servers
// are never written to it and are gone after a restart.
#[test]
fn config_file_servers_start_with_the_server_and_runtime_ones_do_not_persist() {
    let home = TempDir::new("cfg");
    let cfg = home.path().join("clients.json");
    let text0 = json!({"mcpServers": {"filed": {"command": fx(), "args": ["--stderr-chatter"], "env": {"FIXTURE_GREETING": "${CFG_TEST_GREETING:-hi there}"}}}}).to_string();
    std::fs::write(&cfg, &text0).unwrap();
    let cfg_s = cfg.display().to_string();
    let args = ["--memory", "--mcp-clients-config", &cfg_s];
    {
        let s = Server::start_in(home.path(), &args);
        let c = s.client();
        wait_status(&c, "filed", "connected");
        let r = call_ok(&c, "filed/env", json!({"name": "FIXTURE_GREETING"}));
        assert_eq!(text(&r["result"]), "hi there");
        c.post_ok("/api/mcp-clients/connect", &connect_body("runtime", &[]));
        assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text0);
        assert_eq!(clients(&c)["runtime"]["source"], "runtime");
    }
    let s = Server::start_in(home.path(), &args);
    let c = s.client();
    wait_status(&c, "filed", "connected");
    assert!(clients(&c).get("runtime").is_none());
    // A missing explicit file is an error at start.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .args([
            "--memory",
            "--port",
            "0",
            "--mcp-clients-config",
            "/nonexistent/clients.json",
        ])
        .env("CIDELDILL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a configuration error exits 2");
    assert!(String::from_utf8_lossy(&out.stderr).contains("config file not found"));
}

// Resources of every server, filtered by server, read; unknown resources and servers and a
// disconnected server are errors.
#[test]
fn resources_are_listed_with_their_server_and_read() {
    let s = with_fixture("", &[]);
    let c = s.client();
    let r = c.get_ok("/api/mcp-resources");
    let list = r["resources"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{r}");
    assert_eq!(list[0]["server"], "fx");
    assert_eq!(list[0]["uri"], "fixture://hello");
    assert_eq!(list[0]["mime_type"], "text/plain");
    c.post_ok("/api/mcp-clients/connect", &connect_body("fy", &[]));
    assert_eq!(
        c.get_ok("/api/mcp-resources")["resources"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let only = c.get_ok("/api/mcp-resources?server=fy")["resources"].clone();
    assert!(only.as_array().unwrap().iter().all(|r| r["server"] == "fy"));
    let read = c.post_ok(
        "/api/mcp-resources/read",
        &json!({"server": "fx", "uri": "fixture://hello"}),
    );
    assert_eq!(read["content"], "hello world");
    assert_eq!(read["mime_type"], "text/plain");
    let e = c.post(
        "/api/mcp-resources/read",
        &json!({"server": "fx", "uri": "fixture://nope"}),
    );
    assert_error(&e, 404, "resource_not_found");
    let e = c.post(
        "/api/mcp-resources/read",
        &json!({"server": "nosuch", "uri": "x"}),
    );
    assert_error(&e, 404, "server_not_found");
    c.post_ok("/api/mcp-clients/fy/disconnect", &json!({}));
    let e = c.post(
        "/api/mcp-resources/read",
        &json!({"server": "fy", "uri": "fixture://hello"}),
    );
    assert_error(&e, 502, "server_not_connected");
}

// The five proxy tools over MCP, checked against their
// output schemas.
#[test]
fn the_proxy_tools_reach_external_servers_for_an_agent() {
    use cideldill_server::mcp::tools::TOOLS;
    use cideldill_server::schema;
    let spec = inline("fx", "");
    let m = McpServer::start(&["--mcp-client", &spec]);
    m.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}));
    m.notify("notifications/initialized", json!({}));
    let check = |tool: &str, args: Value| -> Value {
        let r = m.call(tool, args);
        assert_eq!(r["isError"], false, "{tool}: {r}");
        let schema_of = TOOLS.iter().find(|t| t.name == tool).unwrap();
        let errors = schema::validate(&(schema_of.output_schema)(), &r["structuredContent"]);
        assert!(errors.is_empty(), "{tool}: {errors:?}");
        tool_json(&r)
    };
    // Listing waits for start-up connections.
    let servers = check("external_list_servers", json!({}));
    assert_eq!(servers["servers"]["fx"]["status"], "connected");
    assert!(servers["servers"]["fx"]["tool_count"].as_u64().unwrap() >= 10);
    let tools = check("external_list_tools", json!({"server": "fx"}));
    assert!(tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "fx/echo"));
    let out = check(
        "external_call_tool",
        json!({"tool": "fx/echo", "arguments": {"text": "via agent"}}),
    );
    assert_eq!(out["content"][0]["text"], "via agent");
    assert_eq!(out["is_error"], false);
    assert_eq!(out["truncated"], false);
    let inspected = m.call_ok(
        "breakpoint_inspect_object",
        json!({"cid": out["result_cid"]}),
    );
    assert!(
        inspected["repr"].as_str().unwrap().contains("via agent"),
        "{inspected}"
    );
    let fail = check("external_call_tool", json!({"tool": "fx/fail"}));
    assert_eq!(fail["is_error"], true);
    let res = check("external_list_resources", json!({"server": "fx"}));
    assert_eq!(res["resources"][1]["uri"], "fixture://data.json");
    let read = check(
        "external_read_resource",
        json!({"server": "fx", "uri": "fixture://data.json"}),
    );
    assert_eq!(read["content"], "{\"a\":1}");
    assert_eq!(read["mime_type"], "application/json");
    for (tool, args, code) in [
        (
            "external_call_tool",
            json!({"tool": "nosuch/x"}),
            "server_not_found",
        ),
        (
            "external_call_tool",
            json!({"tool": "fx/nosuch"}),
            "tool_not_found",
        ),
        (
            "external_list_tools",
            json!({"server": "nosuch"}),
            "server_not_found",
        ),
        (
            "external_read_resource",
            json!({"server": "nosuch", "uri": "x"}),
            "server_not_found",
        ),
        (
            "external_read_resource",
            json!({"server": "fx", "uri": "fixture://nope"}),
            "resource_not_found",
        ),
    ] {
        let e = m.call_err(tool, args);
        assert_eq!(e["error"], code, "{tool}: {e}");
        assert!(!e["hint"].as_str().unwrap().is_empty());
    }
    let records = m.http().get_ok("/api/call-records?function=fx/echo")["calls"].clone();
    assert_eq!(records[0]["source"], "mcp_client");
}

// Health pings notice a server that stopped answering.
#[test]
fn a_server_that_stops_answering_pings_is_dropped_and_replaced() {
    let s = with_fixture("", &["--mcp-ping-interval-s", "0.3"]);
    let c = s.client();
    let pid = clients(&c)["fx"]["pid"].as_u64().unwrap() as u32;
    signal(pid, "-STOP");
    let down = wait_status(&c, "fx", "disconnected");
    assert!(
        down["error"]
            .as_str()
            .unwrap()
            .contains("health ping failed"),
        "{down}"
    );
    let up = wait_status(&c, "fx", "connected");
    assert_ne!(up["pid"].as_u64().unwrap() as u32, pid);
    // The stopped child was killed (SIGKILL works on a stopped process) and reaped.
    wait_for("the stopped child to be gone", || {
        process_gone(pid).then_some(())
    });
}

// Connecting, disconnecting and reconnecting one server from several threads at once
// leaves one consistent state and no stray process.
#[test]
fn concurrent_connects_disconnects_and_reconnects_stay_consistent() {
    let s = Server::start(&["--mcp-clients", "--mcp-backoff-base-s", "0.05"]);
    let port = s.port;
    let handles: Vec<_> = (0..4)
        .map(|i| {
            thread::spawn(move || {
                let c = Client { port };
                for j in 0..8 {
                    let r = match (i + j) % 3 {
                        0 => c.post("/api/mcp-clients/connect", &connect_body("fx", &[])),
                        1 => c.post("/api/mcp-clients/fx/disconnect", &json!({})),
                        _ => c.post("/api/mcp-clients/fx/reconnect", &json!({})),
                    };
                    // Each answer is a success or one of the documented refusals.
                    assert!(
                        [200, 404, 409, 502].contains(&r.status),
                        "{}: {}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let c = s.client();
    // Settle into a known state: connected after a final reconnect, with exactly one child.
    wait_for("fx to settle", || {
        let st = clients(&c)["fx"]["status"].clone();
        (st != "connecting").then_some(())
    });
    c.post_ok("/api/mcp-clients/fx/reconnect", &json!({}));
    assert_eq!(
        text(&call_ok(&c, "fx/echo", json!({"text": "ok"}))["result"]),
        "ok"
    );
    wait_for("one child process", || {
        (living_children_of(s.pid()).len() == 1).then_some(())
    });
    c.post_ok("/api/mcp-clients/fx/disconnect", &json!({}));
    wait_for("no child process", || {
        living_children_of(s.pid()).is_empty().then_some(())
    });
}

// An agent cancelling external_call_tool cancels the upstream request too.
#[test]
fn cancelling_external_call_tool_cancels_the_upstream_call() {
    let spec = inline("fx", "");
    let m = McpServer::start(&["--mcp-client", &spec]);
    m.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}));
    m.notify("notifications/initialized", json!({}));
    wait_status(&m.http(), "fx", "connected");
    let id = m.start_request(
        "tools/call",
        json!({"name": "external_call_tool", "arguments": {"tool": "fx/slow", "arguments": {"ms": 20000}}}),
    );
    // Cancel once the upstream call is in flight, so the cancellation has a request to follow.
    wait_fixture_received_calls(|| m.stderr(), 1);
    m.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "user gave up"}),
    );
    wait_for("the fixture to log the forwarded cancellation", || {
        m.stderr()
            .contains("(stderr): fixture: cancelled")
            .then_some(())
    });
    let records = wait_for("the cancelled call's record", || {
        let r = m.http().get_ok("/api/call-records?function=fx/slow")["calls"].clone();
        (!r.as_array().unwrap().is_empty()).then_some(r)
    });
    assert_eq!(records[0]["status"], "cancelled");
    let out = m.call_ok(
        "external_call_tool",
        json!({"tool": "fx/echo", "arguments": {"text": "next"}}),
    );
    assert_eq!(out["content"][0]["text"], "next");
}

// Streamable HTTP and legacy SSE, against another instance of this
// server (`--mcp-sse`); a bare URL tries Streamable HTTP first and falls back to SSE.
#[test]
fn http_and_sse_upstreams_reach_another_instance() {
    let a = Server::start(&["--mcp-sse"]);
    let http_url = format!("a_http:http://127.0.0.1:{}/mcp", a.port);
    let sse_url = format!("a_sse:http://127.0.0.1:{}/mcp/sse", a.port);
    let fx_spec = inline("fx", "");
    let b = Server::start(&[
        "--mcp-client",
        &http_url,
        "--mcp-client",
        &sse_url,
        "--mcp-client",
        &fx_spec,
        "--mcp-backoff-base-s",
        "0.05",
    ]);
    let c = b.client();
    let h = wait_status(&c, "a_http", "connected");
    assert_eq!(h["transport"], "http");
    assert_eq!(h["configured_transport"], "auto");
    let s = wait_status(&c, "a_sse", "connected");
    assert_eq!(
        s["transport"], "sse",
        "a bare URL served only by legacy SSE falls back: {s}"
    );
    wait_status(&c, "fx", "connected");
    // Separate catalogs per server, both callable.
    let tools = c.get_ok("/api/mcp-tools")["tools"].clone();
    for name in ["a_http/breakpoint_add", "a_sse/breakpoint_add", "fx/echo"] {
        assert!(
            tools.as_array().unwrap().iter().any(|t| t["name"] == name),
            "{name}"
        );
    }
    let r = call_ok(
        &c,
        "a_http/breakpoint_add",
        json!({"function_name": "via_http"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["function_name"],
        "via_http"
    );
    let r = call_ok(
        &c,
        "a_sse/breakpoint_add",
        json!({"function_name": "via_sse"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let bps = a.client().get_ok("/api/breakpoints");
    let names = bps.to_string();
    assert!(
        names.contains("via_http") && names.contains("via_sse"),
        "{bps}"
    );
    // Resources over both.
    let read = c.post_ok(
        "/api/mcp-resources/read",
        &json!({"server": "a_sse", "uri": "breakpoint://status"}),
    );
    assert!(
        read["content"].as_str().unwrap().contains("breakpoints"),
        "{read}"
    );
    // A call past its timeout over HTTP is cancelled and the session stays usable.
    let mut body = json!({"name": "a_slow", "url": format!("http://127.0.0.1:{}/mcp", a.port), "type": "http", "timeout_s": 0.5});
    c.post_ok("/api/mcp-clients/connect", &body);
    let e = call(
        &c,
        "a_slow/breakpoint_wait_for_pause",
        json!({"timeout_s": 5}),
    );
    assert_error(&e, 504, "call_timeout");
    let r = call_ok(&c, "a_slow/breakpoint_list_breakpoints", json!({}));
    assert_eq!(r["result"]["isError"], false);
    // Explicit sse, with a trailing slash (the inline a_sse has none).
    let slash = json!({"name": "slash", "url": format!("http://127.0.0.1:{}/mcp/sse/", a.port), "transport": "sse"});
    let r = c.post_ok("/api/mcp-clients/connect", &slash);
    assert!(r["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("slash/breakpoint_add")));
    assert_eq!(clients(&c)["slash"]["transport"], "sse");
    let r = call_ok(&c, "slash/breakpoint_list_breakpoints", json!({}));
    assert_eq!(r["result"]["isError"], false);
    // An unreachable URL is connect_failed.
    body = json!({"name": "nowhere", "url": "http://127.0.0.1:1/mcp", "type": "http"});
    let e = c.post("/api/mcp-clients/connect", &body);
    assert_error(&e, 502, "connect_failed");
    assert_eq!(clients(&c)["nowhere"]["status"], "error");
    // Disconnect over HTTP ends the session on the other side.
    c.post_ok("/api/mcp-clients/a_http/disconnect", &json!({}));
    c.post_ok("/api/mcp-clients/a_sse/disconnect", &json!({}));
    assert_eq!(clients(&c)["a_http"]["status"], "disconnected");
}

// A remote server that goes away is noticed by the health ping, retried with backoff, then
// marked failed.
#[test]
fn a_vanished_http_server_is_noticed_retried_and_marked_failed() {
    let mut a = Server::start(&["--mcp-sse"]);
    let url = format!("a:http://127.0.0.1:{}/mcp", a.port);
    let b = Server::start(&[
        "--mcp-client",
        &url,
        "--mcp-ping-interval-s",
        "0.3",
        "--mcp-backoff-base-s",
        "0.05",
    ]);
    let c = b.client();
    wait_status(&c, "a", "connected");
    a.signal_and_wait("-TERM");
    let failed = wait_status(&c, "a", "failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("gave up after 5"),
        "{failed}"
    );
    let log = b.stderr();
    assert!(
        log.contains("health ping failed") || log.contains("the server ended the session"),
        "how the loss was noticed is logged"
    );
}

// The external server's progress reaches an agent that asked for progress.
#[test]
fn external_progress_is_relayed_to_the_agent() {
    let spec = inline("fx", "");
    let m = McpServer::start(&["--mcp-client", &spec]);
    m.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}));
    m.notify("notifications/initialized", json!({}));
    wait_status(&m.http(), "fx", "connected");
    let id = m.start_request(
        "tools/call",
        json!({"name": "external_call_tool", "arguments": {"tool": "fx/slow", "arguments": {"ms": 700}},
               "_meta": {"progressToken": "tok-1"}}),
    );
    let mut seen = Vec::new();
    while let Some(n) = m.take(deadline(), |msg| {
        msg["method"] == "notifications/progress" && msg["params"]["progressToken"] == "tok-1"
    }) {
        seen.push(n["params"]["progress"].as_f64().unwrap());
        assert_eq!(n["params"]["total"].as_f64(), Some(700.0));
        if seen.len() == 3 {
            break;
        }
    }
    assert_eq!(seen.len(), 3, "three progress notifications relayed");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "increasing: {seen:?}");
    let r = m.response(&json!(id), deadline());
    let out = tool_json(&r["result"]);
    assert_eq!(out["content"][0]["text"], "slept 700");
}

/// A request with an `Origin` header, as a browser sends it.
fn with_origin(
    c: &Client,
    method: &str,
    path: &str,
    origin: &str,
    body: Option<&Value>,
) -> crate::support::Resp {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nOrigin: {origin}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        c.port,
        body.len()
    );
    c.raw(req.as_bytes())
}

// A web page in the user's browser must not spawn programs or run external tools through the
// local port: the /api/mcp-* endpoints refuse foreign origins.
#[test]
fn a_foreign_web_origin_cannot_use_the_external_server_endpoints() {
    let s = Server::start(&["--mcp-clients"]);
    let c = s.client();
    let evil = "http://evil.example";
    let body = connect_body("fx", &[]);
    let r = with_origin(&c, "POST", "/api/mcp-clients/connect", evil, Some(&body));
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"], "origin_not_allowed");
    assert_eq!(clients(&c), json!({}), "nothing was spawned");
    for (method, path) in [
        ("GET", "/api/mcp-tools"),
        ("GET", "/api/mcp-clients"),
        ("POST", "/api/mcp-tools/call"),
    ] {
        let r = with_origin(&c, method, path, evil, Some(&json!({"tool": "fx/echo"})));
        assert_eq!(r.status, 403, "{method} {path}");
    }
    // So does every endpoint that is not the browser client's (tests/it/trust.rs has them all).
    assert_eq!(
        with_origin(&c, "GET", "/api/status", evil, None).status,
        403
    );
    // The server's own (loopback) origin is fine.
    let own = format!("http://127.0.0.1:{}", s.port);
    let r = with_origin(&c, "POST", "/api/mcp-clients/connect", &own, Some(&body));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(clients(&c)["fx"]["status"], "connected");
}
