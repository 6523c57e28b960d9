//! The stateless MCP revision 2026-07-28 over stdio, end to end against the real binary: the
//! era a connection takes from its first request, `server/discover`, the envelope and its
//! errors, results (`resultType`, server info, cache hints) equal in content to the legacy ones,
//! the removed methods, progress and cancellation, and `subscriptions/listen` streams.

use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp_stdio::start_paused_call;
use crate::mcp_support::{modern_envelope_custom, tool_json, McpServer, CUSTOM_NOTIFICATIONS};
use cideldill_server::mcp::tools::TOOLS;

const VERSION: &str = "2026-07-28";
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
const SUBSCRIPTION_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// The envelope every modern request carries.
fn envelope() -> Value {
    json!({VERSION_KEY: VERSION, CAPS_KEY: {}, "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}})
}

/// `params` with the envelope added to its `_meta`.
fn with_envelope(mut params: Value) -> Value {
    let meta = params
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    for (k, v) in envelope().as_object().unwrap() {
        meta[k] = v.clone();
    }
    params
}

/// A modern request (with the envelope); the whole response.
fn modern(s: &McpServer, method: &str, params: Value) -> Value {
    s.request(method, with_envelope(params))
}

/// A modern tools/call that must succeed; the result object.
fn modern_call(s: &McpServer, tool: &str, args: Value) -> Value {
    let r = modern(s, "tools/call", json!({"name": tool, "arguments": args}));
    assert_eq!(r["result"]["isError"], false, "{tool}: {r}");
    r["result"].clone()
}

fn assert_complete(result: &Value) {
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(
        result["_meta"][SERVER_INFO_KEY]["name"],
        "cideldill-breakpoint-server"
    );
    assert_eq!(
        result["_meta"][SERVER_INFO_KEY]["version"],
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn discover_announces_both_eras_and_fixes_the_connection_modern() {
    let s = McpServer::start(&[]);
    let r = s.request("server/discover", json!({"_meta": envelope()}));
    let d = &r["result"];
    assert_complete(d);
    assert_eq!(
        d["supportedVersions"],
        json!([
            VERSION,
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert!(d["capabilities"]["tools"].is_object());
    assert_eq!(d["capabilities"]["resources"]["subscribe"], true);
    assert!(d["capabilities"]["prompts"].is_object());
    // No logging/setLevel here: a listen request names its level in _meta.
    assert_eq!(d["capabilities"]["logging"], json!({}));
    assert!(
        d["capabilities"]["extensions"][CUSTOM_NOTIFICATIONS]["notifications"]
            .as_array()
            .unwrap()
            .contains(&json!("notifications/breakpoint/execution_paused"))
    );
    let instructions = d["instructions"].as_str().unwrap();
    assert!(instructions.contains("breakpoint_wait_for_pause"));
    // How to hear of pauses in this era, and how to opt into the custom notifications.
    for said in [
        "subscriptions/listen",
        "breakpoint://paused",
        "io.modelcontextprotocol/logLevel",
        CUSTOM_NOTIFICATIONS,
    ] {
        assert!(instructions.contains(said), "{said}: {instructions}");
    }
    assert!(
        !instructions.contains("resources/subscribe"),
        "{instructions}"
    );
    assert!(d["ttlMs"].as_u64().unwrap() > 0);
    assert_eq!(d["cacheScope"], "private");
    // The connection is modern now: a handshake is refused (not a method of this revision),
    // naming what we speak.
    let e = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it"}}),
    );
    assert_eq!(e["error"]["code"], -32601, "{e}");
    assert_eq!(e["error"]["data"]["supported"][0], VERSION);
    assert!(s.junk.lock().unwrap().is_empty());
}

#[test]
fn tools_list_is_the_legacy_list_in_a_fixed_order_with_cache_hints() {
    let s = McpServer::start(&[]);
    let first = modern(&s, "tools/list", json!({}))["result"].clone();
    assert_complete(&first);
    assert!(first["ttlMs"].as_u64().unwrap() > 0);
    assert_eq!(first["cacheScope"], "private");
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let table: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
    assert_eq!(names, table, "the table's order");
    let again = modern(&s, "tools/list", json!({}))["result"].clone();
    assert_eq!(again["tools"], first["tools"], "deterministic");
    let legacy = McpServer::initialized("2025-11-25");
    let old = legacy.request("tools/list", json!({}))["result"].clone();
    assert_eq!(old["tools"], first["tools"], "the same tools in both eras");
    assert!(old.get("resultType").is_none() && old.get("ttlMs").is_none());
    for (method, key) in [
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ] {
        let r = modern(&s, method, json!({}))["result"].clone();
        assert_complete(&r);
        assert!(r[key].is_array() && r["ttlMs"].is_u64(), "{method}: {r}");
        assert_eq!(r["cacheScope"], "private");
    }
    let read =
        modern(&s, "resources/read", json!({"uri": "breakpoint://status"}))["result"].clone();
    assert_complete(&read);
    assert_eq!(read["ttlMs"], 0, "live state");
    assert!(read["contents"][0]["text"].is_string());
}

#[test]
fn a_tool_call_gives_the_legacy_content() {
    let s = McpServer::start(&[]);
    let legacy = McpServer::initialized("2025-11-25");
    for (tool, args) in [
        ("breakpoint_add", json!({"function_name": "add"})),
        ("breakpoint_list_breakpoints", json!({})),
        ("breakpoint_get_default_behavior", json!({})),
    ] {
        let new = modern_call(&s, tool, args.clone());
        assert_complete(&new);
        let old = legacy.call(tool, args);
        assert_eq!(new["content"], old["content"], "{tool}");
        assert_eq!(new["structuredContent"], old["structuredContent"], "{tool}");
        assert_eq!(new["isError"], old["isError"]);
    }
    // Tool failures are results in both eras.
    let e = modern(
        &s,
        "tools/call",
        json!({"name": "breakpoint_set_behavior", "arguments": {"function_name": "nope", "behavior": "stop"}}),
    );
    assert_eq!(e["result"]["isError"], true);
    assert_complete(&e["result"]);
    // An unknown pause is answered as the original does, in both eras alike.
    let args = json!({"pause_id": "nope"});
    let new = modern_call(&s, "breakpoint_continue", args.clone());
    let old = legacy.call("breakpoint_continue", args);
    assert_eq!(new["isError"], false, "{new}");
    assert_eq!(new["structuredContent"], old["structuredContent"]);
    assert_eq!(new["structuredContent"]["error"], "pause_not_found");
    assert_complete(&new);
}

#[test]
fn errors_of_the_modern_era() {
    let s = McpServer::start(&[]);
    // An unknown revision marks the connection modern and is refused with ours listed.
    let r = s.request(
        "tools/list",
        json!({"_meta": {VERSION_KEY: "2099-01-01", CAPS_KEY: {}}}),
    );
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
    assert!(r["error"]["data"]["supported"]
        .as_array()
        .unwrap()
        .contains(&json!(VERSION)));
    // A missing envelope names what is missing.
    let r = s.request("tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains(VERSION_KEY) && msg.contains(CAPS_KEY), "{msg}");
    let r = s.request("tools/list", json!({"_meta": {VERSION_KEY: VERSION}}));
    assert_eq!(r["error"]["code"], -32602);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(CAPS_KEY) && !msg.contains(VERSION_KEY),
        "{msg}"
    );
    // A resource not found is -32602 here (-32002 in the legacy era).
    let r = modern(
        &s,
        "resources/read",
        json!({"uri": "breakpoint://paused/nope"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["uri"], "breakpoint://paused/nope");
    // Removed methods.
    for (method, params) in [
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", json!({"uri": "breakpoint://status"})),
        (
            "resources/unsubscribe",
            json!({"uri": "breakpoint://status"}),
        ),
    ] {
        let r = modern(&s, method, params);
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    let r = s.request("ping", json!({}));
    assert_eq!(r["error"]["code"], -32601, "without the envelope too");
    // `initialize` is not a method of this revision: -32601, naming ours.
    let r = s.request("initialize", json!({"protocolVersion": "2025-11-25"}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(r["error"]["data"]["supported"][0], VERSION, "{r}");
    // The connection still works.
    assert_complete(&modern(&s, "prompts/list", json!({}))["result"]);
}

#[test]
fn a_legacy_connection_answers_discover_and_keeps_its_handshake() {
    let s = McpServer::initialized("2025-11-25");
    let d = s.request("server/discover", json!({}))["result"].clone();
    assert_eq!(d["supportedVersions"][0], VERSION);
    // Requests carrying the envelope are handled as legacy ones.
    let r = s.request("tools/list", json!({"_meta": envelope()}))["result"].clone();
    assert!(r["tools"].is_array() && r.get("resultType").is_none());
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    let r = s.request("resources/read", json!({"uri": "breakpoint://paused/nope"}));
    assert_eq!(r["error"]["code"], -32002);
}

#[test]
fn progress_and_cancellation_work_in_the_modern_era() {
    let s = McpServer::start(&[]);
    let id = s.start_request(
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50},
               "_meta": {VERSION_KEY: VERSION, CAPS_KEY: {}, "progressToken": "tok"}}),
    );
    let progress = s.notification("notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "tok");
    s.notify("notifications/cancelled", json!({"requestId": id}));
    assert!(
        s.take(Duration::from_millis(700), |m| m.get("id")
            == Some(&json!(id)))
            .is_none(),
        "no response after cancel"
    );
    let r = modern_call(&s, "breakpoint_wait_for_pause", json!({"timeout_s": 0.2}));
    assert_complete(&r);
    assert_eq!(tool_json(&r)["paused"], false);
}

#[test]
fn a_listen_stream_carries_pauses_until_it_is_cancelled() {
    let s = McpServer::start(&[]);
    // A client that declares the custom notifications and wants log lines from info up.
    let listen = s.start_request(
        "subscriptions/listen",
        json!({"notifications": {
            "resourcesListChanged": true,
            "resourceSubscriptions": ["breakpoint://paused"],
        }, "_meta": modern_envelope_custom(Some("info"))}),
    );
    let ack = s.notification("notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["breakpoint://paused"])
    );
    // Other requests are served while the stream is open, blocking ones included.
    modern_call(&s, "breakpoint_add", json!({"function_name": "add"}));
    let waiting = s.start_request(
        "tools/call",
        with_envelope(json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 20}})),
    );
    let (pause, _) = start_paused_call(&s, "add");
    let paused = s.notification("notifications/breakpoint/execution_paused");
    assert_eq!(paused["params"]["pause_id"], pause);
    assert_eq!(paused["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    let updated = s
        .take(crate::support::deadline(), |m| {
            m["method"] == "notifications/resources/updated"
                && m["params"]["uri"] == "breakpoint://paused"
        })
        .expect("resources/updated for breakpoint://paused");
    assert_eq!(updated["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    let changed = s.notification("notifications/resources/list_changed");
    assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    let line = s.notification("notifications/message");
    assert_eq!(line["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    assert_eq!(line["params"]["level"], "info");
    assert!(line["params"]["data"]
        .as_str()
        .unwrap()
        .contains(&format!("add paused (breakpoint), pause {pause}")));
    let woke = s.response(&json!(waiting), crate::support::deadline());
    assert_eq!(tool_json(&woke["result"])["paused"], true, "{woke}");
    // Cancelled: no response, and no more notifications on it.
    s.notify("notifications/cancelled", json!({"requestId": listen}));
    modern_call(&s, "breakpoint_continue", json!({"pause_id": pause}));
    assert!(
        s.take(Duration::from_millis(700), |m| {
            m.get("id") == Some(&json!(listen))
                || m["method"] == "notifications/breakpoint/execution_resumed"
        })
        .is_none(),
        "the cancelled stream ended"
    );
    assert!(s.junk.lock().unwrap().is_empty());
}

#[test]
fn a_listen_stream_of_a_client_that_did_not_declare_them_gets_no_custom_notifications() {
    let s = McpServer::start(&[]);
    // The plain envelope: no capability, no log level.
    let listen = s.start_request(
        "subscriptions/listen",
        with_envelope(json!({"notifications": {
            "resourceSubscriptions": ["breakpoint://paused", "breakpoint://call-history"]}})),
    );
    let ack = s.notification("notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    modern_call(&s, "breakpoint_add", json!({"function_name": "add"}));
    let (pause, call_id) = start_paused_call(&s, "add");
    // Told of the pause through the standard notification it asked for.
    let updated = s
        .take(crate::support::deadline(), |m| {
            m["method"] == "notifications/resources/updated"
                && m["params"]["uri"] == "breakpoint://paused"
        })
        .expect("resources/updated for breakpoint://paused");
    assert_eq!(updated["params"]["_meta"][SUBSCRIPTION_KEY], listen);
    modern_call(&s, "breakpoint_continue", json!({"pause_id": pause}));
    let c = s.http();
    assert_eq!(c.get_ok(&format!("/api/poll/{pause}"))["status"], "ready");
    c.post_ok(
        "/api/call/complete",
        &crate::support::complete_body(&call_id, &json!(3)),
    );
    // The completed call is told too; every message the events caused is in by then.
    s.take(crate::support::deadline(), |m| {
        m["method"] == "notifications/resources/updated"
            && m["params"]["uri"] == "breakpoint://call-history"
    })
    .expect("resources/updated for breakpoint://call-history");
    let unasked = |m: &Value| {
        let method = m["method"].as_str().unwrap_or("");
        method.starts_with("notifications/breakpoint/") || method == "notifications/message"
    };
    assert!(
        s.take(Duration::from_millis(500), unasked).is_none(),
        "no custom notification and no log line without asking"
    );
    assert!(s.junk.lock().unwrap().is_empty());
}

// Defect: `server/discover` was served without the envelope (its params are `RequestParams`,
// which require it), so a request missing a required key got a result.
#[test]
fn discover_needs_the_envelope_like_every_request() {
    let s = McpServer::start(&[]);
    let mut no_caps = envelope();
    no_caps.as_object_mut().unwrap().remove(CAPS_KEY);
    let mut no_version = envelope();
    no_version.as_object_mut().unwrap().remove(VERSION_KEY);
    for params in [
        json!({}),
        json!({"_meta": no_caps}),
        json!({"_meta": no_version}),
    ] {
        let r = s.request("server/discover", params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        assert!(r["error"]["data"]["missing"].is_array(), "{r}");
    }
    let r = s.request(
        "server/discover",
        json!({"_meta": {VERSION_KEY: "v999.0.0", CAPS_KEY: {}}}),
    );
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], "v999.0.0");
    // clientInfo is optional.
    let r = s.request(
        "server/discover",
        json!({"_meta": {VERSION_KEY: VERSION, CAPS_KEY: {}}}),
    );
    assert_complete(&r["result"]);
}
