//! The MCP server over stdio, end to end against the real binary: handshake and negotiation,
//! every tool (results checked against their output schemas), resources, prompts, completion,
//! notifications, cancellation, progress, batches, and the process lifecycle in `--mcp` mode.

use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp_support::{tool_json, McpServer, CUSTOM_NOTIFICATIONS};
use crate::support::{call_start_body, complete_body, deadline, item, pause_id, wait_for};
use cideldill_server::mcp::tools::TOOLS;
use cideldill_server::schema;

/// A simulated instrumented program: a call of `method` starts over HTTP and pauses.
pub(crate) fn start_paused_call(s: &McpServer, method: &str) -> (String, String) {
    let start = s.http().post_ok(
        "/api/call/start",
        &call_start_body(
            method,
            vec![item(&json!(2), 2)],
            json!({"y": item(&json!(3), 3)}),
        ),
    );
    (
        pause_id(&start),
        start["call_id"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn handshake_negotiates_versions_and_announces_the_server() {
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let s = McpServer::start(&[]);
        let r = s.request(
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "it"}}),
        );
        let res = &r["result"];
        assert_eq!(res["protocolVersion"], answered);
        assert_eq!(res["serverInfo"]["name"], "cideldill-breakpoint-server");
        assert_eq!(res["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(res["capabilities"]["tools"].is_object());
        assert_eq!(res["capabilities"]["resources"]["subscribe"], true);
        assert!(res["capabilities"]["prompts"].is_object());
        assert!(res["capabilities"]["logging"].is_object());
        assert_eq!(
            res["capabilities"]["experimental"][CUSTOM_NOTIFICATIONS]["notifications"][0],
            "notifications/breakpoint/execution_paused"
        );
        let instructions = res["instructions"].as_str().unwrap();
        assert!(instructions.contains("breakpoint_wait_for_pause"));
        // How to hear of pauses in this era, and how to opt into the custom notifications.
        for said in [
            "resources/subscribe to breakpoint://paused",
            "logging/setLevel info",
            CUSTOM_NOTIFICATIONS,
            "capabilities.experimental",
        ] {
            assert!(instructions.contains(said), "{said}: {instructions}");
        }
        assert_eq!(s.request("ping", json!({}))["result"], json!({}));
        assert!(
            s.junk.lock().unwrap().is_empty(),
            "stdout must carry only JSON-RPC: {:?}",
            s.junk.lock().unwrap()
        );
    }
}

#[test]
fn stdout_carries_only_json_rpc_while_logs_go_to_stderr() {
    let s = McpServer::initialized("2025-11-25");
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    let (p, _) = start_paused_call(&s, "add");
    s.call_ok("breakpoint_continue", json!({"pause_id": p}));
    s.send_raw("this is not json");
    let r = s
        .take(deadline(), |m| m["error"]["code"] == -32700)
        .expect("a parse error response");
    assert_eq!(r["id"], Value::Null);
    assert!(
        s.junk.lock().unwrap().is_empty(),
        "{:?}",
        s.junk.lock().unwrap()
    );
    assert!(s.stderr().contains("Server running on"), "banner on stderr");
}

#[test]
fn tools_list_comes_from_the_table_with_schemas_per_revision() {
    let s = McpServer::initialized("2025-11-25");
    let tools = s.request("tools/list", json!({}))["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
    assert_eq!(names, expected);
    for t in tools.as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["outputSchema"]["type"], "object");
        assert!(t["annotations"]["readOnlyHint"].is_boolean());
        assert!(!t["description"].as_str().unwrap().is_empty());
    }
    let old = McpServer::initialized("2024-11-05");
    let tools = old.request("tools/list", json!({}))["result"]["tools"].clone();
    assert!(tools[0].get("outputSchema").is_none() && tools[0].get("annotations").is_none());
}

#[test]
fn list_methods_paginate_with_cursors() {
    let s = McpServer::start(&["--mcp-page-size", "4"]);
    s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it"}}),
    );
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        let page = s.request("tools/list", params)["result"].clone();
        assert!(page["tools"].as_array().unwrap().len() <= 4);
        seen.extend(
            page["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].clone()),
        );
        match page.get("nextCursor") {
            Some(c) => cursor = c.clone(),
            None => break,
        }
    }
    assert_eq!(seen.len(), TOOLS.len());
    assert_eq!(
        s.request("tools/list", json!({"cursor": "bogus"}))["error"]["code"],
        -32602
    );
    let first = s.request("resources/list", json!({}))["result"].clone();
    assert_eq!(first["resources"].as_array().unwrap().len(), 4);
    assert!(first["nextCursor"].is_string());
}

#[test]
fn a_breakpoint_pauses_and_an_agent_inspects_evaluates_and_modifies_it() {
    // A client that declared the custom notifications (it watches them below).
    let s = McpServer::initialized_custom("2025-11-25");
    let http = s.http();
    // State is shared with the REST API both ways.
    s.call_ok(
        "breakpoint_add",
        json!({"function_name": "add", "behavior": "stop"}),
    );
    assert_eq!(
        http.get_ok("/api/breakpoints")["breakpoint_behaviors"]["add"],
        "stop"
    );
    http.post_ok("/api/breakpoints", &json!({"function_name": "other"}));
    let listed = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert!(listed["breakpoints"]
        .as_array()
        .unwrap()
        .contains(&json!("other")));

    let waiter = s.start_request("tools/call", json!({"name": "breakpoint_wait_for_pause", "arguments": {"function_name": "add", "timeout_s": 20}}));
    let (p, call_id) = start_paused_call(&s, "add");
    let waited = tool_json(&s.response(&json!(waiter), deadline())["result"]);
    assert_eq!(waited["paused"], true);
    assert_eq!(waited["pause"]["id"], p.as_str());
    let note = s.notification("notifications/breakpoint/execution_paused");
    assert_eq!(note["params"]["pause_id"], p.as_str());
    assert_eq!(note["params"]["method_name"], "add");
    assert_eq!(note["params"]["pause_reason"], "breakpoint");

    // No base64 payloads in what agents see; CIDs lead to the objects.
    let paused = s.call_ok("breakpoint_list_paused", json!({}));
    let cd = &paused["paused"][0]["call_data"];
    assert!(cd["args"][0].get("data").is_none(), "{cd}");
    let cid = cd["args"][0]["cid"].as_str().unwrap().to_owned();
    let obj = s.call_ok("breakpoint_inspect_object", json!({"cid": cid}));
    assert_eq!(obj["cid"], cid.as_str());
    assert!(obj["repr"].is_string() && obj["type"].is_string());

    // REPL eval through the relay: a simulated program answers.
    let app = {
        let p = p.clone();
        std::thread::spawn(move || {
            let req = wait_for("an eval request", || {
                let r = http.get_ok(&format!("/api/poll-repl/{p}"));
                r["eval_id"].is_string().then_some(r)
            });
            assert_eq!(req["expr"], "args[0] * 21");
            http.post_ok("/api/call/repl-result", &json!({"eval_id": req["eval_id"], "pause_id": p, "session_id": req["session_id"],
                "result": "42", "stdout": "hello\n", "error": null, "result_cid": null, "result_data": null}));
        })
    };
    let out = s.call_ok(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "args[0] * 21"}),
    );
    app.join().unwrap();
    assert_eq!(out["output"], "42");
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["is_error"], false);
    assert!(out["session_id"].is_string());

    // Continue with modified_args only: a modify action carrying both lists.
    let r = s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "modified_args": [10]}),
    );
    assert_eq!(r["action"], "modify");
    let action = http.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(action["action"], "modify");
    assert_eq!(
        action["modified_args"][0]["data"], "gARLCi4=",
        "pickled for the Python client"
    );
    assert_eq!(
        action["modified_kwargs"]["y"]["cid"],
        item(&json!(3), 3)["cid"],
        "original kwargs kept"
    );
    assert_eq!(
        action["modified_kwargs"]["y"]["data"],
        item(&json!(3), 3)["data"]
    );
    let resumed = s.notification("notifications/breakpoint/execution_resumed");
    assert_eq!(resumed["params"]["action"], "modify");

    let done = http.post_ok("/api/call/complete", &complete_body(&call_id, &json!(13)));
    let completed = s.notification("notifications/breakpoint/call_completed");
    assert_eq!(completed["params"]["call_id"], call_id.as_str());
    // The after-pause accepts only continue, with a reason.
    let after = pause_id(&done);
    let err = s.call_err(
        "breakpoint_continue",
        json!({"pause_id": after, "fake_result": 1}),
    );
    assert_eq!(err["error"], "invalid_action");
    assert!(err["hint"].as_str().unwrap().contains("continue"));
    s.call_ok("breakpoint_continue", json!({"pause_id": after}));
    let records = s.call_ok("breakpoint_get_call_records", json!({"limit": 5}));
    assert_eq!(records["calls"][0]["call_id"], call_id.as_str());
    assert_eq!(records["total_count"], 1);
    assert_eq!(records["truncated"], false);
}

#[test]
fn every_tool_result_matches_its_output_schema() {
    let s = McpServer::initialized("2025-11-25");
    let http = s.http();
    http.post_ok(
        "/api/functions",
        &json!({"function_name": "fast", "signature": "(x, y=1)"}),
    );
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    http.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "add", "signature": "(x, y=1)"}),
    );
    let (p, call_id) = start_paused_call(&s, "add");
    let cid = item(&json!(2), 2)["cid"].clone();
    // A payload that does not decode: its view carries `error`.
    let corrupt = crate::support::raw_item(b"not a pickle", 7);
    http.post_ok(
        "/api/call/start",
        &call_start_body("other", vec![corrupt.clone()], json!({})),
    );
    // A run: one event recorded.
    http.post_ok(
        "/api/call/event",
        &json!({"method_name": "tick", "status": "ok", "timestamp": 201.0,
                "process_pid": 16759, "process_start_time": 1795311683.721166,
                "event_id": "ev-1", "call_site": {"stack_trace": []}}),
    );
    let run = s.call_ok("breakpoint_list_runs", json!({}))["runs"][0]["run_id"].clone();
    let calls: Vec<(&str, Value)> = vec![
        ("breakpoint_list_breakpoints", json!({})),
        ("breakpoint_list_runs", json!({})),
        (
            "breakpoint_label_run",
            json!({"run_id": run, "label": "l", "notes": "n"}),
        ),
        // The answers the original gives as results: an unknown pause, an unknown CID.
        ("breakpoint_continue", json!({"pause_id": "nope"})),
        ("breakpoint_inspect_object", json!({"cid": "0".repeat(128)})),
        ("breakpoint_inspect_object", json!({"cid": corrupt["cid"]})),
        ("breakpoint_add", json!({"function_name": "g"})),
        (
            "breakpoint_set_behavior",
            json!({"function_name": "g", "behavior": "go"}),
        ),
        (
            "breakpoint_set_after_behavior",
            json!({"function_name": "g", "behavior": "exception"}),
        ),
        (
            "breakpoint_set_replacement",
            json!({"function_name": "add", "replacement_function": "fast"}),
        ),
        (
            "breakpoint_set_enabled",
            json!({"function_name": "g", "enabled": false}),
        ),
        ("breakpoint_set_pausing", json!({"pausing": true})),
        ("breakpoint_get_default_behavior", json!({})),
        (
            "breakpoint_set_default_behavior",
            json!({"behavior": "stop"}),
        ),
        ("breakpoint_list_paused", json!({})),
        ("breakpoint_list_functions", json!({})),
        ("breakpoint_get_call_records", json!({})),
        ("breakpoint_inspect_object", json!({"cid": cid})),
        ("breakpoint_wait_for_pause", json!({"timeout_s": 0})),
        (
            "breakpoint_wait_for_pause",
            json!({"function_name": "nobody", "timeout_s": 0.2}),
        ),
        ("breakpoint_continue", json!({"pause_id": p})),
        ("breakpoint_continue_all", json!({})),
        ("breakpoint_remove", json!({"function_name": "g"})),
    ];
    let mut covered = std::collections::HashSet::new();
    for (name, args) in calls {
        let r = s.call(name, args.clone());
        assert_eq!(r["isError"], false, "{name}: {r}");
        let structured = r["structuredContent"].clone();
        assert_eq!(
            structured,
            tool_json(&r),
            "structuredContent equals the text JSON"
        );
        let tool = TOOLS.iter().find(|t| t.name == name).unwrap();
        let errors = schema::validate(&(tool.output_schema)(), &structured);
        assert!(
            errors.is_empty(),
            "{name} result {structured} violates its output schema: {errors:?}"
        );
        covered.insert(name);
    }
    // The eval needs a program to answer.
    http.post_ok("/api/call/complete", &complete_body(&call_id, &json!(5)));
    let (p2, _) = start_paused_call(&s, "add");
    let app = std::thread::spawn(move || {
        let req = wait_for("eval", || {
            let r = http.get_ok(&format!("/api/poll-repl/{p2}"));
            r["eval_id"].is_string().then_some(r)
        });
        http.post_ok("/api/call/repl-result", &json!({"eval_id": req["eval_id"], "pause_id": req["pause_id"], "session_id": req["session_id"], "result": "1", "stdout": "", "error": null}));
    });
    let p2 = s.call_ok("breakpoint_list_paused", json!({}))["paused"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["call_data"].get("pretty_result").is_none())
        .unwrap()["id"]
        .clone();
    let r = s.call(
        "breakpoint_repl_eval",
        json!({"pause_id": p2, "expression": "1"}),
    );
    app.join().unwrap();
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_repl_eval")
        .unwrap();
    assert!(
        schema::validate(&(tool.output_schema)(), &r["structuredContent"]).is_empty(),
        "{r}"
    );
    covered.insert("breakpoint_repl_eval");
    // A run compared with itself: the completed call's process.
    let key = http.get_ok("/api/call-records")["calls"][0]["process_key"].clone();
    let r = s.call_ok("breakpoint_compare_runs", json!({"a": key, "b": key}));
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_compare_runs")
        .unwrap();
    let errors = schema::validate(&(tool.output_schema)(), &r);
    assert!(errors.is_empty(), "{r} {errors:?}");
    // Compared with itself, every aligned pair is the same.
    assert!(r["total_pairs"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["counts"]["same"], r["total_pairs"], "{r}");
    covered.insert("breakpoint_compare_runs");
    // A replay of the completed add(2, y=3) through the same pause: the simulated program
    // answers the eval by calling add again, which the server runs without pausing.
    let http = s.http();
    let program = std::thread::spawn(move || {
        // Whichever pause of the program carries it (both paused calls are of add).
        let req = wait_for("the replay's eval", || {
            let paused = http.get_ok("/api/paused")["paused"].clone();
            paused.as_array()?.iter().find_map(|p| {
                let id = p["id"].as_str()?;
                let r = http.get_ok(&format!("/api/poll-repl/{id}"));
                r["eval_id"].is_string().then_some(r)
            })
        });
        assert_eq!(
            req["expr"],
            concat!(
                "(self if method is object.__getattribute__(self, \"_target\") ",
                "else getattr(self, name))(2, y=3)"
            )
        );
        let start = http.post_ok(
            "/api/call/start",
            &call_start_body(
                "add",
                vec![item(&json!(2), 2)],
                json!({"y": item(&json!(3), 3)}),
            ),
        );
        assert_eq!(start["action"], "continue", "{start}");
        let id = start["call_id"].as_str().unwrap();
        http.post_ok("/api/call/complete", &complete_body(id, &json!(5)));
        http.post_ok("/api/call/repl-result", &json!({"eval_id": req["eval_id"], "pause_id": req["pause_id"], "session_id": req["session_id"], "result": "5", "stdout": "", "error": null}));
    });
    let r = s.call("breakpoint_replay_call", json!({"call_id": call_id}));
    program.join().unwrap();
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["same"], true, "{r}");
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_replay_call")
        .unwrap();
    assert!(
        schema::validate(&(tool.output_schema)(), &r["structuredContent"]).is_empty(),
        "{r}"
    );
    covered.insert("breakpoint_replay_call");
    // A sequence naming a record that does not exist stops there (tests/it/replay.rs replays
    // sequences in a live program).
    let r = s.call(
        "breakpoint_replay_run",
        json!({"run_id": "1795311683.7211661+16759", "call_ids": ["nope"]}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["completed"], false, "{r}");
    assert_eq!(
        r["structuredContent"]["stopped"]["error"], "record_not_found",
        "{r}"
    );
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_replay_run")
        .unwrap();
    assert!(
        schema::validate(&(tool.output_schema)(), &r["structuredContent"]).is_empty(),
        "{r}"
    );
    covered.insert("breakpoint_replay_run");
    // Last, as it removes the run the others used (once nothing of it is paused).
    s.call_ok("breakpoint_continue_all", json!({}));
    let r = s.call("breakpoint_delete_run", json!({"run_id": run}));
    assert_eq!(r["isError"], false, "{r}");
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_delete_run")
        .unwrap();
    assert!(
        schema::validate(&(tool.output_schema)(), &r["structuredContent"]).is_empty(),
        "{r}"
    );
    covered.insert("breakpoint_replay_run");
    covered.insert("breakpoint_delete_run");
    // The external_* proxies need external servers: tests/it/upstream.rs checks their schemas.
    let own = TOOLS
        .iter()
        .filter(|t| t.name.starts_with("breakpoint_"))
        .count();
    assert_eq!(covered.len(), own, "every breakpoint_* tool was checked");
}

#[test]
fn bad_arguments_are_tool_errors_naming_the_parameter() {
    let s = McpServer::initialized("2025-11-25");
    // A missing required parameter, and a bad limit, have the original's codes.
    let e = s.call_err("breakpoint_add", json!({}));
    assert_eq!(e["error"], "missing_parameter");
    assert_eq!(e["parameter"], "function_name");
    assert!(
        e["message"].as_str().unwrap().contains("function_name"),
        "{e}"
    );
    let e = s.call_err("breakpoint_get_call_records", json!({"limit": "5"}));
    assert_eq!(e["error"], "invalid_limit");
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
    let e = s.call_err("breakpoint_get_call_records", json!({"limit": 0}));
    assert_eq!(e["error"], "invalid_limit");
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
    // Other arguments that do not fit the schema.
    let e = s.call_err("breakpoint_add", json!({"function_name": 5}));
    assert_eq!(e["error"], "invalid_arguments");
    assert_eq!(e["parameter"], "function_name");
    let e = s.call_err(
        "breakpoint_add",
        json!({"function_name": "f", "one_shot": "yes", "reset_hits": 1}),
    );
    assert_eq!(e["error"], "invalid_arguments");
    assert!(e.get("parameter").is_none(), "two of them: {e}");
    // Extra parameters are ignored.
    s.call_ok(
        "breakpoint_add",
        json!({"function_name": "f", "color": "blue"}),
    );
    // A blank required string.
    let e = s.call_err("breakpoint_add", json!({"function_name": "  "}));
    assert_eq!(e["error"], "missing_parameter");
    // Unknown tool: a JSON-RPC error.
    let r = s.request(
        "tools/call",
        json!({"name": "breakpoint_fly", "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], -32602);
    // Unknown method.
    assert_eq!(
        s.request("tools/frobnicate", json!({}))["error"]["code"],
        -32601
    );
}

#[test]
fn application_errors_carry_codes_and_hints() {
    let s = McpServer::initialized("2025-06-18");
    let cases = [
        (
            "breakpoint_set_behavior",
            json!({"function_name": "nope", "behavior": "stop"}),
            "breakpoint_not_found",
        ),
        (
            "breakpoint_set_behavior",
            json!({"function_name": "nope", "behavior": "halt"}),
            "invalid_behavior",
        ),
        (
            "breakpoint_set_after_behavior",
            json!({"function_name": "nope", "behavior": "stop"}),
            "breakpoint_not_found",
        ),
        (
            "breakpoint_set_replacement",
            json!({"function_name": "nope", "replacement_function": "x"}),
            "breakpoint_not_found",
        ),
        (
            "breakpoint_set_default_behavior",
            json!({"behavior": "yield"}),
            "invalid_behavior",
        ),
        (
            "breakpoint_set_enabled",
            json!({"function_name": "nope", "enabled": false}),
            "breakpoint_not_found",
        ),
        (
            "breakpoint_repl_eval",
            json!({"pause_id": "nope", "expression": "1"}),
            "pause_not_found",
        ),
        (
            "breakpoint_repl_eval",
            json!({"pause_id": "nope", "expression": "  "}),
            "missing_expression",
        ),
        (
            "breakpoint_add",
            json!({"function_name": "f", "behavior": "sometimes"}),
            "invalid_behavior",
        ),
    ];
    for (tool, args, code) in cases {
        let e = s.call_err(tool, args.clone());
        assert_eq!(e["error"], code, "{tool} {args}: {e}");
        assert!(!e["message"].as_str().unwrap().is_empty());
        assert!(!e["hint"].as_str().unwrap().is_empty(), "{tool}: a hint");
    }
    // Lookups of unknown ids are answered as the original answers them: a result (isError
    // false) whose JSON names the error, with the id, a message and a hint.
    for (tool, args, code, key) in [
        (
            "breakpoint_continue",
            json!({"pause_id": "nope"}),
            "pause_not_found",
            "pause_id",
        ),
        (
            "breakpoint_inspect_object",
            json!({"cid": "0".repeat(128)}),
            "cid_not_found",
            "cid",
        ),
    ] {
        let e = s.call_not_found(tool, args.clone());
        assert_eq!(e["error"], code, "{tool} {args}: {e}");
        assert_eq!(e[key], args[key], "{tool}: {e}");
        assert!(!e["message"].as_str().unwrap().is_empty());
        assert!(!e["hint"].as_str().unwrap().is_empty(), "{tool}: a hint");
    }
    // An invalid behavior adds nothing.
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({}))["breakpoints"],
        json!([])
    );
    // Replacement: signature checked after the breakpoint (MCP order).
    s.call_ok("breakpoint_add", json!({"function_name": "f"}));
    let e = s.call_err(
        "breakpoint_set_replacement",
        json!({"function_name": "f", "replacement_function": "g"}),
    );
    assert_eq!(e["error"], "signature_mismatch");
    // A REPL eval nobody answers times out with a hint.
    let (p, _) = start_paused_call(&s, "f");
    let e = s.call_err(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "1", "timeout_s": 0.3}),
    );
    assert_eq!(e["error"], "eval_timeout");
    s.call_ok("breakpoint_continue", json!({"pause_id": p}));
    let e = s.call_err("breakpoint_continue", json!({"pause_id": p}));
    assert_eq!(e["error"], "pause_already_resumed");
}

#[test]
fn resources_list_read_templates_and_subscriptions() {
    let s = McpServer::initialized("2025-11-25");
    let list = s.request("resources/list", json!({}))["result"]["resources"].clone();
    let uris: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "breakpoint://status",
            "breakpoint://breakpoints",
            "breakpoint://paused",
            "breakpoint://call-history",
            "breakpoint://functions"
        ]
    );
    for uri in &uris {
        let r = s.request("resources/read", json!({"uri": uri}))["result"].clone();
        assert_eq!(r["contents"][0]["uri"], *uri);
        assert_eq!(r["contents"][0]["mimeType"], "application/json");
        serde_json::from_str::<Value>(r["contents"][0]["text"].as_str().unwrap()).unwrap();
    }
    let status = s.request("resources/read", json!({"uri": "breakpoint://status/"}))["result"]
        ["contents"][0]["text"]
        .clone();
    assert_eq!(
        serde_json::from_str::<Value>(status.as_str().unwrap()).unwrap(),
        json!({"breakpoints": 0, "paused": 0, "total_calls": 0, "pausing": true})
    );
    let unknown = s.request("resources/read", json!({"uri": "breakpoint://nope"}));
    assert_eq!(unknown["error"]["code"], -32002);
    let templates =
        s.request("resources/templates/list", json!({}))["result"]["resourceTemplates"].clone();
    assert_eq!(templates.as_array().unwrap().len(), 3);

    assert_eq!(
        s.request("resources/subscribe", json!({"uri": "breakpoint://status"}))["result"],
        json!({})
    );
    assert_eq!(
        s.request("resources/subscribe", json!({"uri": "breakpoint://nope"}))["error"]["code"],
        -32002
    );
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    let updated = s.notification("notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "breakpoint://status");
    // The breakpoints resource is what the tool answers, options included.
    s.call_ok(
        "breakpoint_add",
        json!({"function_name": "add", "condition": "args[0] > 1"}),
    );
    let read = s.request("resources/read", json!({"uri": "breakpoint://breakpoints"}))["result"]
        ["contents"][0]["text"]
        .clone();
    let resource: Value = serde_json::from_str(read.as_str().unwrap()).unwrap();
    let tool = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(resource, tool);
    assert_eq!(resource["conditions"]["add"], "args[0] > 1", "{resource}");
    let (p, _) = start_paused_call(&s, "add");
    s.notification("notifications/resources/list_changed");
    let list = s.request("resources/list", json!({}))["result"]["resources"].clone();
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["uri"] == format!("breakpoint://paused/{p}")));
    let one = s.request(
        "resources/read",
        json!({"uri": format!("breakpoint://paused/{p}")}),
    )["result"]["contents"][0]["text"]
        .clone();
    let one: Value = serde_json::from_str(one.as_str().unwrap()).unwrap();
    assert_eq!(one["id"], p.as_str());
    let obj = s.request("resources/read", json!({"uri": format!("breakpoint://object/{}", item(&json!(2), 0)["cid"].as_str().unwrap())}));
    assert!(obj.get("result").is_some(), "{obj}");
    s.request(
        "resources/unsubscribe",
        json!({"uri": "breakpoint://status"}),
    );
}

#[test]
fn prompts_render_live_state_and_complete_pause_ids() {
    let s = McpServer::initialized("2025-11-25");
    let prompts = s.request("prompts/list", json!({}))["result"]["prompts"].clone();
    assert_eq!(prompts.as_array().unwrap().len(), 2);
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    let (p, _) = start_paused_call(&s, "add");
    let start = s.request("prompts/get", json!({"name": "debug-session-start"}))["result"].clone();
    let text = start["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains(&p) && text.contains("\"add\""), "{text}");
    // It tells the agent how to hear of pauses, in its era, and of the custom notifications.
    for said in [
        "resources/subscribe to breakpoint://paused",
        "logging/setLevel info",
        CUSTOM_NOTIFICATIONS,
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
    let modern = s.request(
        "prompts/get",
        json!({"name": "debug-session-start", "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    // This connection is legacy: the envelope is ignored, the legacy text stays.
    let again = modern["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(again.contains("resources/subscribe"), "{again}");
    let one = s.request(
        "prompts/get",
        json!({"name": "inspect-paused-call", "arguments": {"pause_id": p}}),
    )["result"]
        .clone();
    assert!(one["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("before the call runs"));
    assert_eq!(
        s.request(
            "prompts/get",
            json!({"name": "inspect-paused-call", "arguments": {}})
        )["error"]["code"],
        -32602
    );
    assert_eq!(
        s.request(
            "prompts/get",
            json!({"name": "inspect-paused-call", "arguments": {"pause_id": "zz"}})
        )["error"]["code"],
        -32602
    );
    assert_eq!(
        s.request("prompts/get", json!({"name": "nope"}))["error"]["code"],
        -32602
    );
    let c = s.request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "inspect-paused-call"}, "argument": {"name": "pause_id", "value": &p[..4]}}));
    assert_eq!(c["result"]["completion"]["values"], json!([p]));
}

#[test]
fn a_cancelled_wait_gets_no_response_and_progress_is_reported() {
    let s = McpServer::initialized("2025-11-25");
    let id = s.start_request("tools/call", json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 50}, "_meta": {"progressToken": "tok"}}));
    let progress = s.notification("notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "tok");
    s.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    assert!(
        s.take(Duration::from_millis(700), |m| m.get("id")
            == Some(&json!(id)))
            .is_none(),
        "no response after cancel"
    );
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    // A timeout is a normal result.
    let r = s.call_ok("breakpoint_wait_for_pause", json!({"timeout_s": 0.2}));
    assert_eq!(r["paused"], false);
    assert!(r["message"].as_str().unwrap().contains("call again"));
}

#[test]
fn batches_are_accepted_only_in_2025_03_26() {
    let s = McpServer::initialized("2025-03-26");
    s.send(&json!([{"jsonrpc": "2.0", "id": 100, "method": "ping"}, {"jsonrpc": "2.0", "id": 101, "method": "tools/list"}]));
    let arr = s
        .take(deadline(), Value::is_array)
        .expect("a batch response");
    assert_eq!(arr.as_array().unwrap().len(), 2);
    let s = McpServer::initialized("2025-06-18");
    s.send(&json!([{"jsonrpc": "2.0", "id": 100, "method": "ping"}]));
    let r = s
        .take(deadline(), |m| m["error"]["code"] == -32600)
        .expect("-32600 for a batch");
    assert_eq!(r["id"], Value::Null);
}

#[test]
fn logging_set_level_turns_on_log_messages() {
    let s = McpServer::initialized("2025-11-25");
    assert_eq!(
        s.request("logging/setLevel", json!({"level": "bogus"}))["error"]["code"],
        -32602
    );
    s.request("logging/setLevel", json!({"level": "info"}));
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    start_paused_call(&s, "add");
    let m = s.notification("notifications/message");
    assert_eq!(m["params"]["level"], "info");
    assert!(m["params"]["data"].as_str().unwrap().contains("add paused"));
}

#[test]
fn requests_before_initialize_are_refused() {
    let s = McpServer::start(&[]);
    assert_eq!(s.request("tools/list", json!({}))["error"]["code"], -32600);
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn closing_stdin_keeps_http_serving_unless_asked_to_exit() {
    let mut s = McpServer::initialized("2025-11-25");
    s.close_stdin();
    wait_for("the stdio session to end", || {
        s.stderr().contains("stdin closed").then_some(())
    });
    assert!(s.is_running());
    assert_eq!(s.http().get("/api/breakpoints").status, 200);

    let mut s = McpServer::start(&["--exit-on-stdin-close"]);
    let port_file = s.home.path().join("port");
    s.close_stdin();
    let status = s.wait_exit();
    assert!(status.success(), "{status}");
    assert!(!port_file.exists(), "port file removed on exit");
}

#[test]
fn sigterm_in_mcp_mode_exits_cleanly() {
    let mut s = McpServer::initialized("2025-11-25");
    let port_file = s.home.path().join("port");
    crate::support::signal(s.pid(), "-TERM");
    assert!(s.wait_exit().success());
    assert!(!port_file.exists());
}

#[test]
fn a_panicking_request_is_answered_and_stdin_eof_still_exits() {
    let mut s = McpServer::start_env(
        &["--exit-on-stdin-close"],
        &[("CIDELDILL_PANIC_ON", "breakpoint_list_breakpoints")],
    );
    s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
    );
    s.notify("notifications/initialized", json!({}));
    let r = s.request(
        "tools/call",
        json!({"name": "breakpoint_list_breakpoints", "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    // Other requests still work, and so does the same one through the other door.
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    let listed = s.call_ok("breakpoint_list_paused", json!({}));
    assert!(listed.get("isError").is_none_or(|e| e == false), "{listed}");
    s.close_stdin();
    let status = s.wait_exit();
    assert!(status.success(), "{status}\n{}", s.stderr());
}

#[test]
fn blocking_requests_run_side_by_side_and_stdin_eof_waits_for_them() {
    // Each blocking request moves the reading of stdin to another thread: every one of these
    // waits, the pings between them, and a pause that releases two waits are all served.
    let mut s = McpServer::start(&["--exit-on-stdin-close"]);
    s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
    );
    s.notify("notifications/initialized", json!({}));
    s.call_ok("breakpoint_add", json!({"function_name": "mul"}));
    let waits: Vec<i64> = (0..3)
        .map(|_| {
            let id = s.start_request(
                "tools/call",
                json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 30}}),
            );
            assert_eq!(s.request("ping", json!({}))["result"], json!({}));
            id
        })
        .collect();
    let (pause, _) = start_paused_call(&s, "mul");
    for id in &waits {
        let r = s
            .take(deadline(), |m| m.get("id") == Some(&json!(id)))
            .unwrap_or_else(|| panic!("wait {id} was never answered"));
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&pause), "wait {id}: {text}");
    }
    // A wait still running at EOF is released, and the process exits.
    s.start_request(
        "tools/call",
        json!({"name": "breakpoint_wait_for_pause", "arguments": {"timeout_s": 30, "function_name": "none"}}),
    );
    s.close_stdin();
    let status = s.wait_exit();
    assert!(status.success(), "{status}");
}

#[test]
fn a_standard_client_hears_of_pauses_through_standard_notifications_only() {
    // Declares nothing: it subscribes to breakpoint://paused and sets a log level, as the
    // instructions say.
    let s = McpServer::initialized("2025-11-25");
    assert_eq!(
        s.request("resources/subscribe", json!({"uri": "breakpoint://paused"}))["result"],
        json!({})
    );
    assert_eq!(
        s.request(
            "resources/subscribe",
            json!({"uri": "breakpoint://call-history"})
        )["result"],
        json!({})
    );
    s.request("logging/setLevel", json!({"level": "debug"}));
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    // No second pause after the call returns.
    s.call_ok(
        "breakpoint_set_after_behavior",
        json!({"function_name": "add", "behavior": "go"}),
    );
    let (p, call_id) = start_paused_call(&s, "add");
    let updated = s.notification("notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "breakpoint://paused");
    let line = s.notification("notifications/message");
    assert_eq!(line["params"]["level"], "info");
    assert_eq!(line["params"]["logger"], "cideldill");
    let text = line["params"]["data"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("add paused (breakpoint), pause {p}")),
        "{text}"
    );
    s.call_ok("breakpoint_continue", json!({"pause_id": p}));
    let updated = s.notification("notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "breakpoint://paused");
    let line = s.notification("notifications/message");
    assert_eq!(line["params"]["level"], "info");
    assert!(line["params"]["data"]
        .as_str()
        .unwrap()
        .contains(&format!("add resumed with continue, pause {p}")));
    let http = s.http();
    assert_eq!(http.get_ok(&format!("/api/poll/{p}"))["status"], "ready");
    http.post_ok("/api/call/complete", &complete_body(&call_id, &json!(5)));
    let line = s.notification("notifications/message");
    assert_eq!(
        line["params"]["level"], "debug",
        "the completion line: {line}"
    );
    assert!(line["params"]["data"]
        .as_str()
        .unwrap()
        .contains(&format!("add completed (success), call {call_id}")));
    // Every message the completion caused is in once its resource update is.
    s.take(deadline(), |m| {
        m["method"] == "notifications/resources/updated"
            && m["params"]["uri"] == "breakpoint://call-history"
    })
    .expect("resources/updated for breakpoint://call-history");
    assert!(
        s.take(Duration::from_millis(500), |m| m["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("notifications/breakpoint/")))
            .is_none(),
        "no custom notification for a client that did not declare them"
    );
    // At info, the completion line is not sent.
    let s = McpServer::initialized("2025-06-18");
    s.request("logging/setLevel", json!({"level": "info"}));
    s.request(
        "resources/subscribe",
        json!({"uri": "breakpoint://call-history"}),
    );
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    s.call_ok(
        "breakpoint_set_after_behavior",
        json!({"function_name": "add", "behavior": "go"}),
    );
    let (p, call_id) = start_paused_call(&s, "add");
    s.call_ok("breakpoint_continue", json!({"pause_id": p}));
    let http = s.http();
    assert_eq!(http.get_ok(&format!("/api/poll/{p}"))["status"], "ready");
    http.post_ok("/api/call/complete", &complete_body(&call_id, &json!(5)));
    s.take(deadline(), |m| {
        m["method"] == "notifications/resources/updated"
            && m["params"]["uri"] == "breakpoint://call-history"
    })
    .expect("resources/updated for breakpoint://call-history");
    let levels: Vec<Value> = std::iter::from_fn(|| {
        s.take(Duration::from_millis(300), |m| {
            m["method"] == "notifications/message"
        })
    })
    .map(|m| m["params"]["level"].clone())
    .collect();
    assert_eq!(
        levels,
        [json!("info"), json!("info")],
        "pause and resume only"
    );
}

#[test]
fn a_client_declaring_the_capability_as_an_extension_gets_the_custom_notifications() {
    // As the 2026 SDKs declare an extension, in a legacy handshake.
    let s = McpServer::initialized_with(
        "2025-11-25",
        json!({"extensions": {CUSTOM_NOTIFICATIONS: {}}}),
    );
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    let (p, _) = start_paused_call(&s, "add");
    let note = s.notification("notifications/breakpoint/execution_paused");
    assert_eq!(note["params"]["pause_id"], p.as_str());
}
