//! One session however the server is started: `cideldill-server --mcp` beside a running server
//! (same port file, no `--db`, `--memory` or `--port`) joins that server's session through a
//! stdio ↔ Streamable HTTP bridge; `--standalone` starts a separate server; a server never
//! overwrites nor removes the port file of another live server.

use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp_support::{custom_capabilities, tool_json, McpServer, CUSTOM_NOTIFICATIONS};
use crate::support::{call_start_body, complete_body, deadline, item, pause_id, Server, TempDir};

/// The handshake of a host that declares the custom notifications (the bridge relays it as it
/// came, so the server sees the capability).
fn initialize(agent: &McpServer) -> Value {
    let r = agent.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": custom_capabilities(),
               "clientInfo": {"name": "host", "version": "1"}}),
    );
    agent.notify("notifications/initialized", json!({}));
    r
}

fn port_file_text(server: &Server) -> String {
    std::fs::read_to_string(&server.port_file).unwrap_or_default()
}

#[test]
fn an_mcp_process_beside_a_running_server_joins_its_session() {
    let home = TempDir::new("join");
    let server = Server::start_in(home.path(), &["--memory"]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let status = c.get_ok("/api/status");
    assert_eq!(status["pid"], server.pid());
    assert_eq!(
        status["port_file"],
        server.port_file.display().to_string().as_str()
    );

    let mut agent = McpServer::beside(&server, &[]);
    let init = initialize(&agent);
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "cideldill-breakpoint-server",
        "{init}"
    );
    // The breakpoint the running server has.
    let listed = agent.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(listed["breakpoints"], json!(["add"]), "{listed}");

    // A pause made through the running server: the agent is told, sees it and resumes it.
    let waiter = agent.start_request(
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause",
               "arguments": {"function_name": "add", "timeout_s": 20}}),
    );
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![item(&json!(2), 2)], json!({})),
    );
    let p = pause_id(&start);
    let waited = tool_json(&agent.response(&json!(waiter), deadline())["result"]);
    assert_eq!(waited["pause"]["id"], p.as_str(), "{waited}");
    let note = agent.notification("notifications/breakpoint/execution_paused");
    assert_eq!(note["params"]["pause_id"], p.as_str());
    let paused = agent.call_ok("breakpoint_list_paused", json!({}));
    assert_eq!(paused["paused"][0]["id"], p.as_str(), "{paused}");
    agent.call_ok("breakpoint_continue", json!({"pause_id": p}));
    let action = c.get_ok(&format!("/api/poll/{p}"));
    assert_eq!(action["status"], "ready", "{action}");
    assert_eq!(action["action"]["action"], "continue", "{action}");
    // And what the agent does, the web UI and scripts see.
    let call_id = start["call_id"].as_str().unwrap();
    c.post_ok("/api/call/complete", &complete_body(call_id, &json!(5)));
    let records = agent.call_ok("breakpoint_get_call_records", json!({}));
    assert_eq!(records["calls"][0]["call_id"], call_id, "{records}");

    // Closing stdin ends only the bridge.
    agent.close_stdin();
    assert!(agent.wait_exit().success(), "{}", agent.stderr());
    assert!(agent.junk.lock().unwrap().is_empty());
    assert!(
        agent.stderr().contains("joining the running server"),
        "{}",
        agent.stderr()
    );
    assert_eq!(c.get_ok("/api/status")["breakpoints"], 1);
    assert_eq!(port_file_text(&server), server.port.to_string());
}

#[test]
fn the_bridge_ends_with_an_error_when_the_server_stops() {
    let home = TempDir::new("join-stop");
    let mut server = Server::start_in(home.path(), &["--memory"]);
    let mut agent = McpServer::beside(&server, &[]);
    initialize(&agent);
    agent.call_ok("breakpoint_list_breakpoints", json!({}));
    server.signal_and_wait("-TERM");
    let status = agent.wait_exit();
    assert_eq!(status.code(), Some(1), "{}", agent.stderr());
    assert!(agent.stderr().contains("mcp bridge:"), "{}", agent.stderr());
}

#[test]
fn standalone_gets_its_own_session_and_leaves_the_port_file_alone() {
    let home = TempDir::new("standalone");
    let server = Server::start_in(home.path(), &["--memory"]);
    server
        .client()
        .post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let mut own = McpServer::beside(
        &server,
        &["--standalone", "--memory", "--exit-on-stdin-close"],
    );
    initialize(&own);
    let listed = own.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(listed["breakpoints"], json!([]), "{listed}");
    assert!(
        own.stderr().contains("names another running server"),
        "{}",
        own.stderr()
    );
    assert_eq!(port_file_text(&server), server.port.to_string());
    own.close_stdin();
    assert!(own.wait_exit().success(), "{}", own.stderr());
    assert_eq!(port_file_text(&server), server.port.to_string());
    // Flags that ask for a server of its own do not join either.
    let mut with_db = McpServer::beside(&server, &["--memory", "--port", "0"]);
    initialize(&with_db);
    let listed = with_db.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(listed["breakpoints"], json!([]), "{listed}");
    with_db.close_stdin();
    assert_eq!(port_file_text(&server), server.port.to_string());
}

#[test]
fn a_joining_process_refuses_external_server_flags() {
    let home = TempDir::new("join-clients");
    let server = Server::start_in(home.path(), &["--memory"]);
    let mut agent = McpServer::beside(&server, &["--mcp-client", "x:echo hi"]);
    let status = agent.wait_exit();
    assert_eq!(status.code(), Some(2), "{}", agent.stderr());
    let err = agent.stderr();
    assert!(
        err.contains("--standalone") && err.contains("--mcp-client"),
        "{err}"
    );
    // It says exactly what to do instead: the running server's page, and a curl line per
    // --mcp-client that connects it there at run time.
    let url = format!("http://127.0.0.1:{}", server.port);
    assert!(err.contains(&format!("{url}/mcp-servers")), "{err}");
    let fixture = format!("fx:{}", crate::support::fixture_server_path().display());
    let mut agent = McpServer::beside(&server, &["--mcp-client", &fixture]);
    assert_eq!(agent.wait_exit().code(), Some(2), "{}", agent.stderr());
    let err = agent.stderr();
    let prefix = format!(
        "  curl -X POST {url}/api/mcp-clients/connect -H 'Content-Type: application/json' -d '"
    );
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {err}"));
    let body: Value = serde_json::from_str(
        &line
            .strip_suffix('\'')
            .expect("the body is quoted")
            .replace("'\\''", "'"),
    )
    .unwrap();
    let c = server.client();
    let connected = c.post_ok("/api/mcp-clients/connect", &body);
    assert!(
        connected["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("fx/echo")),
        "{connected}"
    );
}

#[test]
fn a_stale_port_file_is_replaced_and_a_live_one_is_not() {
    let home = TempDir::new("stale");
    // A port file left by a killed server names a port nobody answers on.
    let port_file = home.path().join("port");
    std::fs::write(&port_file, "1").unwrap();
    let mut agent = McpServer::beside_path(home.path(), &port_file, &["--exit-on-stdin-close"]);
    let until = std::time::Instant::now() + deadline();
    while std::fs::read_to_string(&port_file).unwrap_or_default() == "1" {
        assert!(std::time::Instant::now() < until, "{}", agent.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    initialize(&agent);
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // It started a server of its own (it had nothing to join) and removes the file at exit.
    let status = crate::support::Client { port }.get_ok("/api/status");
    assert_eq!(status["pid"], agent.pid());
    agent.close_stdin();
    assert!(agent.wait_exit().success(), "{}", agent.stderr());
    assert!(!port_file.exists());
}

#[test]
fn progress_and_cancellation_cross_the_bridge() {
    let home = TempDir::new("join-cancel");
    let server = Server::start_in(home.path(), &["--memory"]);
    let agent = McpServer::beside(&server, &[]);
    initialize(&agent);
    let id = agent.start_request(
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50},
               "_meta": {"progressToken": "tok"}}),
    );
    let progress = agent.notification("notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "tok");
    agent.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    assert!(
        agent
            .take(Duration::from_millis(700), |m| m.get("id")
                == Some(&json!(id)))
            .is_none(),
        "no response after cancel"
    );
    // The cancelled wait does not take the next pause: a new wait does.
    let waiter = agent.start_request(
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 20}}),
    );
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![item(&json!(1), 2)], json!({})),
    );
    let waited = tool_json(&agent.response(&json!(waiter), deadline())["result"]);
    assert_eq!(waited["pause"]["id"], pause_id(&start).as_str());
    assert!(agent
        .take(Duration::from_millis(300), |m| m.get("id")
            == Some(&json!(id)))
        .is_none());
    assert_eq!(agent.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn a_modern_client_joins_through_the_bridge() {
    let home = TempDir::new("join-modern");
    let server = Server::start_in(home.path(), &["--memory"]);
    let agent = McpServer::beside(&server, &[]);
    let env = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                     "io.modelcontextprotocol/clientCapabilities":
                         {"extensions": {CUSTOM_NOTIFICATIONS: {}}}});
    let with_env = |mut params: Value| {
        params["_meta"] = env.clone();
        params
    };
    // The probe a modern client starts with (with the envelope, as every request).
    let d = agent.request("server/discover", with_env(json!({})));
    assert_eq!(d["result"]["supportedVersions"][0], "2026-07-28", "{d}");
    // Without it: the server's error, relayed.
    let bare = agent.request("server/discover", json!({}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let tools = agent.request("tools/list", with_env(json!({})));
    assert_eq!(tools["result"]["resultType"], "complete", "{tools}");
    assert!(tools["result"]["tools"].as_array().unwrap().len() > 10);
    let add = agent.request(
        "tools/call",
        with_env(json!({"name": "breakpoint_add", "arguments": {"function_name": "add"}})),
    );
    assert_eq!(add["result"]["isError"], false, "{add}");
    assert_eq!(add["result"]["resultType"], "complete");
    // Errors come back as the server says them.
    let ping = agent.request("ping", with_env(json!({})));
    assert_eq!(ping["error"]["code"], -32601, "{ping}");
    // A listen stream relayed line by line.
    let listen = agent.start_request(
        "subscriptions/listen",
        with_env(json!({"notifications": {"resourceSubscriptions": ["breakpoint://paused"]}})),
    );
    let ack = agent.notification("notifications/subscriptions/acknowledged");
    let sub_key = "io.modelcontextprotocol/subscriptionId";
    assert_eq!(ack["params"]["_meta"][sub_key], listen, "{ack}");
    // A blocking call cancelled from stdin: its stream is closed, it gets no answer, and the
    // server stops waiting (the next pause goes to the next waiter).
    let mut wait =
        with_env(json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50}}));
    wait["_meta"]["progressToken"] = json!("waiting");
    let cancelled = agent.start_request("tools/call", wait);
    // Its first progress notification: the server is waiting (a cancellation sent earlier
    // could pass the request on its way).
    let progress = agent.notification("notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "waiting", "{progress}");
    agent.notify("notifications/cancelled", json!({"requestId": cancelled}));
    let c = server.client();
    let stderr = || server.stderr();
    crate::support::wait_for("the server to cancel the wait", || {
        stderr()
            .contains(&format!(
                "stateless request {cancelled} (tools/call) cancelled"
            ))
            .then_some(())
    });
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![item(&json!(2), 2)], json!({})),
    );
    let p = pause_id(&start);
    let paused = agent.notification("notifications/breakpoint/execution_paused");
    assert_eq!(paused["params"]["pause_id"], p.as_str());
    assert_eq!(paused["params"]["_meta"][sub_key], listen);
    let waited = agent.request(
        "tools/call",
        with_env(json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 5}})),
    );
    assert_eq!(tool_json(&waited["result"])["pause"]["id"], p.as_str());
    assert!(agent
        .take(Duration::from_millis(300), |m| m.get("id")
            == Some(&json!(cancelled)))
        .is_none());
    // Cancelling the listen stream ends it.
    agent.notify("notifications/cancelled", json!({"requestId": listen}));
    crate::support::wait_for("the server to see the listen stream closed", || {
        stderr()
            .contains(&format!("listen stream {listen} closed by its client"))
            .then_some(())
    });
    let cont = agent.request(
        "tools/call",
        with_env(json!({"name": "breakpoint_continue", "arguments": {"pause_id": p}})),
    );
    assert_eq!(cont["result"]["isError"], false, "{cont}");
    assert!(agent
        .take(Duration::from_millis(700), |m| m["method"]
            == "notifications/breakpoint/execution_resumed")
        .is_none());
    assert!(agent.junk.lock().unwrap().is_empty());
}
