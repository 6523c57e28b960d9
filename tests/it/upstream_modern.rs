//! The MCP client's two protocol eras end to end: the real binary connects to the fixture MCP
//! server in `--modern-only` mode (revision 2026-07-28: no `initialize`, a `_meta` envelope on
//! every request) beside a legacy one, over stdio, and callers see the same shapes from both.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp_support::{tool_json, McpServer};
use crate::support::{fixture_server_path, wait_for, Client, Server};
use crate::upstream::wait_status;

fn fx() -> String {
    fixture_server_path().display().to_string()
}

fn wait_connected(c: &Client, name: &str) -> Value {
    wait_status(c, name, "connected")
}

/// What the modern fixture saw so far (its `stats` tool).
fn stats(c: &Client, server: &str) -> Value {
    let r = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": format!("{server}/stats"), "arguments": {}}),
    );
    serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

// A modern-only server and a legacy one side by side: each connected in its era, called through
// the REST API with the same result shapes, resources listed and read, health checked with
// server/discover (never ping) on the modern one, input_required a clean error without a retry,
// and a call past its timeout cancelled with notifications/cancelled over stdio.
#[test]
fn a_modern_only_server_works_beside_a_legacy_one_over_the_rest_api() {
    let modern = format!("mod:{} --modern-only", fx());
    let legacy = format!("leg:{}", fx());
    let s = Server::start(&[
        "--mcp-client",
        &modern,
        "--mcp-client",
        &legacy,
        "--mcp-connect-timeout-s",
        "5",
        "--mcp-ping-interval-s",
        "0.2",
    ]);
    let c = s.client();
    let m = wait_connected(&c, "mod");
    assert_eq!(
        (&m["protocol_era"], &m["protocol_version"]),
        (&json!("modern"), &json!("2026-07-28")),
        "{m}"
    );
    assert_eq!(m["server_info"]["name"], "fixture-modern");
    assert!(m["instructions"].as_str().unwrap().contains("modern"));
    let l = wait_connected(&c, "leg");
    assert_eq!(
        (&l["protocol_era"], &l["protocol_version"]),
        (&json!("legacy"), &json!("2025-11-25")),
        "{l}"
    );

    // The same shapes from both eras.
    for server in ["mod", "leg"] {
        let r = c.post_ok(
            "/api/mcp-tools/call",
            &json!({"tool": format!("{server}/add"), "arguments": {"a": 2, "b": 3}}),
        );
        assert_eq!(r["server"], server);
        assert_eq!(r["result"]["structuredContent"]["sum"], 5, "{r}");
        assert_eq!(r["result"]["content"][0]["text"], "5");
        let r = c.post_ok(
            "/api/mcp-tools/call",
            &json!({"tool": format!("{server}/größe_✓"), "arguments": {"wort": "Straße"}}),
        );
        assert_eq!(r["result"]["content"][0]["text"], "got Straße");
        let r = c.post_ok(
            "/api/mcp-resources/read",
            &json!({"server": server, "uri": "fixture://data.json"}),
        );
        assert_eq!(r["content"], "{\"a\":1}");
        assert_eq!(r["mime_type"], "application/json");
    }
    let res = c.get_ok("/api/mcp-resources?server=mod");
    assert_eq!(res["resources"][0]["uri"], "fixture://hello", "{res}");
    // A modern tool result keeps its resultType inside the raw result.
    let r = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "mod/echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(r["result"]["resultType"], "complete");

    // input_required: a clean error naming what was asked, and no retry.
    let e = c.post(
        "/api/mcp-tools/call",
        &json!({"tool": "mod/ask", "arguments": {}}),
    );
    let body = e.json();
    assert_eq!(
        (e.status, &body["error"]),
        (502, &json!("input_required")),
        "{body}"
    );
    assert_eq!(
        body["input_requests"],
        json!(["elicitation", "roots", "sampling"])
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("elicitation, roots, sampling") && message.contains("not retried"),
        "{message}"
    );
    let rec = &c.get_ok("/api/call-records?function=mod/ask")["calls"][0];
    assert_eq!(rec["status"], "error");
    assert_eq!(rec["error"]["code"], "input_required");

    // Health checks: several server/discover, no ping, no handshake, no envelope missing.
    let until = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let seen = stats(&c, "mod");
        if seen["methods"]["server/discover"].as_u64().unwrap_or(0) >= 3 || Instant::now() > until {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        seen["methods"]["server/discover"].as_u64().unwrap() >= 3,
        "the probe and at least two health checks: {seen}"
    );
    for absent in ["ping", "initialize", "notifications/initialized"] {
        assert!(seen["methods"].get(absent).is_none(), "{absent}: {seen}");
    }
    assert_eq!(seen["violations"], json!([]), "{seen}");
    assert_eq!(
        seen["tools"]["ask"], 1,
        "input_required is not retried: {seen}"
    );
    assert_eq!(wait_connected(&c, "mod")["protocol_era"], "modern");

    // A modern stdio call past its timeout is cancelled with notifications/cancelled.
    let r = c.post_ok(
        "/api/mcp-clients/connect",
        &json!({"name": "mod2", "command": fx(), "args": ["--modern-only"], "timeout_s": 0.3}),
    );
    assert_eq!(r["status"], "ok", "{r}");
    let e = c.post(
        "/api/mcp-tools/call",
        &json!({"tool": "mod2/slow", "arguments": {"ms": 5000}}),
    );
    assert_eq!(e.json()["error"], "call_timeout", "{}", e.json());
    let seen = stats(&c, "mod2");
    assert_eq!(seen["methods"]["notifications/cancelled"], 1, "{seen}");
    assert_eq!(seen["violations"], json!([]), "{seen}");
}

// An agent sees the era in external_list_servers, calls a modern server's tools through
// external_call_tool like a legacy one's, and gets input_required as a clean tool error.
#[test]
fn an_agent_calls_a_modern_server_through_the_proxy_tools() {
    let modern = format!("mod:{} --modern-only", fx());
    let legacy = format!("leg:{}", fx());
    let m = McpServer::start(&["--mcp-client", &modern, "--mcp-client", &legacy]);
    m.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
    );
    m.notify("notifications/initialized", json!({}));
    let servers = m.call_ok("external_list_servers", json!({}));
    let s = &servers["servers"];
    assert_eq!(s["mod"]["status"], "connected", "{servers}");
    assert_eq!(s["mod"]["protocol_era"], "modern");
    assert_eq!(s["mod"]["protocol_version"], "2026-07-28");
    assert_eq!(s["leg"]["protocol_era"], "legacy");
    assert_eq!(
        s["leg"]["tool_count"].as_u64().unwrap() + 1,
        s["mod"]["tool_count"].as_u64().unwrap()
    );

    let mut outs = Vec::new();
    for server in ["mod", "leg"] {
        let r = m.call(
            "external_call_tool",
            json!({"tool": format!("{server}/echo"), "arguments": {"text": "via agent"}}),
        );
        assert_eq!(r["isError"], false, "{r}");
        let out = tool_json(&r);
        assert_eq!(
            out["content"],
            json!([{"type": "text", "text": "via agent"}])
        );
        assert_eq!(out["is_error"], false);
        outs.push(out);
    }
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&outs[0]), keys(&outs[1]), "same shape from both eras");

    let fail = m.call_ok("external_call_tool", json!({"tool": "mod/fail"}));
    assert_eq!(fail["is_error"], true);
    let e = m.call_err("external_call_tool", json!({"tool": "mod/ask"}));
    assert_eq!(e["error"], "input_required", "{e}");
    assert!(e["message"].as_str().unwrap().contains("sampling"), "{e}");
    assert!(!e["hint"].as_str().unwrap().is_empty());
}

// A modern server's tool list grows while connected: the client's one subscriptions/listen
// request carries notifications/tools/list_changed, and the new tool appears as it does for a
// legacy server (see the late-tools test in upstream.rs).
#[test]
fn a_modern_servers_list_changes_are_followed_through_subscriptions_listen() {
    let s = Server::start(&["--mcp-clients"]);
    let c = s.client();
    let r = c.post_ok(
        "/api/mcp-clients/connect",
        &json!({"name": "mod", "command": fx(), "args": ["--modern-only"]}),
    );
    assert!(
        !r["tools"].as_array().unwrap().contains(&json!("mod/late")),
        "{r}"
    );
    // The listen request is open (acknowledged) before the list changes.
    wait_for(
        "the fixture to see the subscriptions/listen request",
        || (stats(&c, "mod")["methods"]["subscriptions/listen"] == 1).then_some(()),
    );
    let r = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "mod/notify_change", "arguments": {}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "changed", "{r}");
    wait_for("mod/late after list_changed", || {
        let tools = c.get_ok("/api/mcp-tools")["tools"].clone();
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "mod/late")
            .then_some(())
    });
    let r = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "mod/late", "arguments": {}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "late tool", "{r}");
    let seen = stats(&c, "mod");
    assert_eq!(seen["methods"]["subscriptions/listen"], 1, "{seen}");
    assert!(
        seen["methods"].get("notifications/cancelled").is_none(),
        "{seen}"
    );
    assert_eq!(seen["violations"], json!([]), "{seen}");
}
