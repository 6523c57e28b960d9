//! Every tool's success and error paths through the real binary over stdio, following the test
//! plan of the MCP design (its numbers are in the test names' comments).

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{call_start_body, complete_body, corpus_pickle, item, raw_item, wait_for};
use cideldill_server::cas::decode_base64_lenient;
use cideldill_server::pickle_write::dumps;

fn paused_call(s: &McpServer, method: &str) -> String {
    crate::mcp_stdio::start_paused_call(s, method).0
}

fn action_of(s: &McpServer, pause: &str) -> Value {
    s.http().get_ok(&format!("/api/poll/{pause}"))["action"].clone()
}

#[test]
fn breakpoints_add_remove_and_behaviors() {
    let s = McpServer::initialized("2025-11-25");
    // 5, 33, 38, 51, 53: empty state.
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({})),
        json!({"breakpoints": [], "behaviors": {}, "after_behaviors": {}, "replacements": {},
               "conditions": {}, "hit_conditions": {}, "log_messages": {}, "one_shot": [], "hit_counts": {},
               "enabled": {}, "pausing": true})
    );
    assert_eq!(
        s.call_ok("breakpoint_get_default_behavior", json!({})),
        json!({"behavior": "stop"})
    );
    assert_eq!(
        s.call_ok("breakpoint_list_paused", json!({})),
        json!({"paused": []})
    );
    assert_eq!(
        s.call_ok("breakpoint_list_functions", json!({})),
        json!({"functions": [], "signatures": {}, "metadata": {}, "total": 0})
    );
    let empty = s.call_ok("breakpoint_get_call_records", json!({}));
    assert_eq!(
        (
            empty["calls"].clone(),
            empty["total_count"].clone(),
            empty["truncated"].clone()
        ),
        (json!([]), json!(0), json!(false))
    );
    // 12: idempotent add.
    s.call_ok("breakpoint_add", json!({"function_name": "f"}));
    s.call_ok("breakpoint_add", json!({"function_name": "f"}));
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({}))["breakpoints"],
        json!(["f"])
    );
    // 16-18 and aliases.
    for (given, stored) in [
        ("stop", "stop"),
        ("go", "go"),
        ("yield", "yield"),
        ("continue", "go"),
        ("defer", "yield"),
    ] {
        let r = s.call_ok(
            "breakpoint_set_behavior",
            json!({"function_name": "f", "behavior": given}),
        );
        assert_eq!(r["behavior"], stored);
        assert_eq!(
            s.call_ok("breakpoint_list_breakpoints", json!({}))["behaviors"]["f"],
            stored
        );
    }
    // 21-25, 26.
    for (given, stored) in [
        ("stop", "stop"),
        ("go", "go"),
        ("exception", "exception"),
        ("stop_exception", "stop_exception"),
        ("yield", "yield"),
        ("both", "stop_exception"),
    ] {
        let r = s.call_ok(
            "breakpoint_set_after_behavior",
            json!({"function_name": "f", "behavior": given}),
        );
        assert_eq!(r["behavior"], stored);
        assert_eq!(
            s.call_ok("breakpoint_list_breakpoints", json!({}))["after_behaviors"]["f"],
            stored
        );
    }
    assert_eq!(
        s.call_err(
            "breakpoint_set_after_behavior",
            json!({"function_name": "f", "behavior": "later"})
        )["error"],
        "invalid_behavior"
    );
    // 34-36.
    for b in ["go", "exception", "stop_exception", "stop"] {
        assert_eq!(
            s.call_ok("breakpoint_set_default_behavior", json!({"behavior": b}))["behavior"],
            b
        );
        assert_eq!(
            s.call_ok("breakpoint_get_default_behavior", json!({}))["behavior"],
            b
        );
    }
    // 7, 28, 29: replacements listed and cleared.
    s.http().post_ok(
        "/api/functions",
        &json!({"function_name": "f", "signature": "(x)"}),
    );
    s.http().post_ok(
        "/api/functions",
        &json!({"function_name": "g", "signature": "(x)"}),
    );
    s.call_ok(
        "breakpoint_set_replacement",
        json!({"function_name": "f", "replacement_function": "g"}),
    );
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({}))["replacements"],
        json!({"f": "g"})
    );
    s.call_ok(
        "breakpoint_set_replacement",
        json!({"function_name": "f", "replacement_function": ""}),
    );
    assert_eq!(
        s.call_ok("breakpoint_list_breakpoints", json!({}))["replacements"],
        json!({})
    );
    // 52: functions with signatures.
    let f = s.call_ok("breakpoint_list_functions", json!({}));
    assert_eq!(f["signatures"], json!({"f": "(x)", "g": "(x)"}));
    // 13-15: remove clears behaviors; removing again succeeds.
    s.call_ok(
        "breakpoint_set_behavior",
        json!({"function_name": "f", "behavior": "stop"}),
    );
    s.call_ok("breakpoint_remove", json!({"function_name": "f"}));
    assert_eq!(
        s.call_ok("breakpoint_remove", json!({"function_name": "f"}))["status"],
        "ok"
    );
    s.call_ok("breakpoint_add", json!({"function_name": "f"}));
    let l = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(
        (
            l["behaviors"]["f"].clone(),
            l["after_behaviors"]["f"].clone()
        ),
        (json!("yield"), json!("yield"))
    );
}

#[test]
fn continue_actions_reach_the_program_encoded_as_pickles() {
    let s = McpServer::initialized("2025-11-25");
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    // 42: skip with a fake result.
    let p = paused_call(&s, "add");
    assert_eq!(
        s.call_ok(
            "breakpoint_continue",
            json!({"pause_id": p, "fake_result": {"a": [1, 2.5, null]}})
        )["action"],
        "skip"
    );
    let a = action_of(&s, &p);
    assert_eq!(a["action"], "skip");
    assert_eq!(
        decode_base64_lenient(a["fake_result_data"].as_str().unwrap()).unwrap(),
        dumps(&json!({"a": [1, 2.5, null]}))
    );
    // 43: raise.
    let p = paused_call(&s, "add");
    s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "exception_type": "ValueError", "exception_message": "bad"}),
    );
    assert_eq!(
        action_of(&s, &p),
        json!({"action": "raise", "exception_type": "ValueError", "exception_message": "bad"})
    );
    assert_eq!(
        s.call_err(
            "breakpoint_continue",
            json!({"pause_id": paused_call(&s, "add"), "exception_type": "mod.Err"})
        )["error"],
        "invalid_exception_type"
    );
    // 45: kwargs only; the original positional items are kept (with their data).
    let p = paused_call(&s, "add");
    s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "modified_kwargs": {"y": 7}}),
    );
    let a = action_of(&s, &p);
    assert_eq!(a["action"], "modify");
    assert_eq!(a["modified_args"][0]["cid"], item(&json!(2), 2)["cid"]);
    assert_eq!(a["modified_args"][0]["data"], item(&json!(2), 2)["data"]);
    assert_eq!(
        decode_base64_lenient(a["modified_kwargs"]["y"]["data"].as_str().unwrap()).unwrap(),
        dumps(&json!(7))
    );
    // 46, 47: a replacement wins over the action.
    let p = paused_call(&s, "add");
    let r = s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "action": "skip", "replacement_function": "multiply"}),
    );
    assert_eq!(r["action"], "replace");
    assert_eq!(
        action_of(&s, &p),
        json!({"action": "replace", "function_name": "multiply"})
    );
    // An explicit action is kept; an unknown one is refused with a reason.
    let p = paused_call(&s, "add");
    assert_eq!(
        s.call_err(
            "breakpoint_continue",
            json!({"pause_id": p, "action": "teleport"})
        )["error"],
        "invalid_action"
    );
    s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "action": "continue"}),
    );
    assert_eq!(action_of(&s, &p), json!({"action": "continue"}));
}

#[test]
fn call_records_are_newest_first_with_limits() {
    let s = McpServer::initialized("2025-11-25");
    let http = s.http();
    for i in 0..105 {
        let status = if i % 10 == 0 { "exception" } else { "success" };
        let name = if i % 2 == 0 { "even" } else { "odd" };
        http.post_ok("/api/call/event", &json!({"method_name": name, "status": status, "event_id": format!("e{i}"),
            "process_pid": 1, "process_start_time": 2.0, "exception": if status == "exception" { json!({"type": "ValueError"}) } else { Value::Null }}));
    }
    // 54, 58, 59, 60: default limit 100 of 105.
    let r = s.call_ok("breakpoint_get_call_records", json!({}));
    assert_eq!(r["calls"].as_array().unwrap().len(), 100);
    assert_eq!(
        (r["total_count"].clone(), r["truncated"].clone()),
        (json!(105), json!(true))
    );
    assert_eq!(r["calls"][0]["call_id"], "e104", "newest first");
    // 55, 56: filtered and limited.
    let r = s.call_ok(
        "breakpoint_get_call_records",
        json!({"function_name": "odd", "limit": 3}),
    );
    assert_eq!(
        r["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["call_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["e103", "e101", "e99"]
    );
    assert_eq!(r["total_count"], 52);
    let r = s.call_ok(
        "breakpoint_get_call_records",
        json!({"function_name": "odd", "limit": 1000}),
    );
    assert_eq!(r["truncated"], false);
    // 57: exceptions are in the records.
    let r = s.call_ok(
        "breakpoint_get_call_records",
        json!({"function_name": "even", "limit": 1}),
    );
    assert_eq!(r["calls"][0]["call_id"], "e104");
    let e100 = s.call_ok(
        "breakpoint_get_call_records",
        json!({"function_name": "even", "limit": 3}),
    )["calls"][2]
        .clone();
    assert_eq!(
        (e100["call_id"].as_str(), e100["exception"]["type"].as_str()),
        (Some("e100"), Some("ValueError"))
    );
    // 61: limit 0 is refused by the schema, with the original's code.
    let e = s.call_err("breakpoint_get_call_records", json!({"limit": 0}));
    assert!(e["message"].as_str().unwrap().contains(">= 1"), "{e}");
    assert_eq!(e["error"], "invalid_limit");
}

// Defect: the tool lacked the process, source and search filters of GET /api/call-records.
#[test]
fn call_records_take_the_filters_of_the_rest_listing_with_the_same_answers() {
    let s = McpServer::initialized("2025-11-25");
    let http = s.http();
    // A completed call of `method` in process `pid`, its argument and result plain strings.
    let run = |method: &str, arg: &str, result: &str, pid: i64| -> String {
        let mut start = call_start_body(method, vec![item(&json!(arg), 2)], json!({}));
        start["process_pid"] = json!(pid);
        let answer = http.post_ok("/api/call/start", &start);
        let id = answer["call_id"].as_str().unwrap().to_owned();
        let mut done = complete_body(&id, &json!(result));
        done["process_pid"] = json!(pid);
        http.post_ok("/api/call/complete", &done);
        id
    };
    let a1 = run("f", "alpha", "zero here", 16759);
    let a2 = run("g", "beta", "fine", 16759);
    let b1 = run("f", "gamma", "fine", 4242);
    let key_a = "1795311683.721166+16759";
    for (args, query, expected) in [
        (json!({"process": "4242"}), "process=4242", vec![&b1]),
        (
            json!({"process": key_a}),
            "process=1795311683.721166%2B16759",
            vec![&a2, &a1],
        ),
        (json!({"search": "ZERO"}), "search=ZERO", vec![&a1]),
        (json!({"search": "gamma"}), "search=gamma", vec![&b1]),
        (
            json!({"source": "program"}),
            "source=program",
            vec![&b1, &a2, &a1],
        ),
        (json!({"source": "mcp_client"}), "source=mcp_client", vec![]),
        (
            json!({"source": "", "search": ""}),
            "source=&search=",
            vec![&b1, &a2, &a1],
        ),
        (
            json!({"status": "success"}),
            "status=success",
            vec![&b1, &a2, &a1],
        ),
        (
            json!({"function_name": "f", "process": "16759", "search": "alpha"}),
            "function=f&process=16759&search=alpha",
            vec![&a1],
        ),
    ] {
        let tool = s.call_ok("breakpoint_get_call_records", args.clone());
        let rest = http.get_ok(&format!("/api/call-records?{query}"));
        let expected: Vec<&str> = expected.into_iter().map(String::as_str).collect();
        assert_eq!(call_ids(&tool["calls"]), expected, "{args}");
        assert_eq!(call_ids(&rest["calls"]), expected, "{query}");
        assert_eq!(tool["calls"], rest["calls"], "{args}");
        assert_eq!(tool["total_count"], rest["total_count"], "{args}");
        // A process or text filter scans: how far it got is said as over REST.
        assert_eq!(tool.get("scanned"), rest.get("scanned"), "{args}");
        assert_eq!(
            tool.get("search_truncated"),
            rest.get("search_truncated"),
            "{args}"
        );
    }
    let scanned = s.call_ok("breakpoint_get_call_records", json!({"search": "zero"}));
    assert_eq!(scanned["scanned"], 3);
    assert_eq!(scanned["search_truncated"], false);
    let e = s.call_err("breakpoint_get_call_records", json!({"source": "nope"}));
    assert_eq!(e["error"], "invalid_source", "{e}");
    let rest = http.get("/api/call-records?source=nope");
    assert_eq!(rest.status, 400);
    assert_eq!(rest.json()["error"], "invalid_source");
    assert_eq!(rest.json()["message"], e["message"]);
}

/// The call ids of a listing's `calls`.
fn call_ids(calls: &Value) -> Vec<&str> {
    calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect()
}

/// A simulated program answering every eval of `pause` with `answer(expr)` until stopped.
fn answer_evals(
    s: &McpServer,
    pause: &str,
    n: usize,
    answer: fn(&str) -> Value,
) -> std::thread::JoinHandle<()> {
    let http = s.http();
    let pause = pause.to_owned();
    std::thread::spawn(move || {
        for _ in 0..n {
            let req = wait_for("an eval", || {
                let r = http.get_ok(&format!("/api/poll-repl/{pause}"));
                r["eval_id"].is_string().then_some(r)
            });
            let mut body = answer(req["expr"].as_str().unwrap());
            for k in ["eval_id", "pause_id", "session_id"] {
                body[k] = req[k].clone();
            }
            http.post_ok("/api/call/repl-result", &body);
        }
    })
}

#[test]
fn repl_sessions_are_reused_and_errors_reported() {
    let s = McpServer::initialized("2025-11-25");
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    let p = paused_call(&s, "add");
    let app = answer_evals(&s, &p, 2, |expr| match expr {
        "x = 1" => json!({"result": "", "stdout": "", "error": null}),
        _ => json!({"result": "", "stdout": "", "error": "NameError: name 'y' is not defined"}),
    });
    let first = s.call_ok(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "x = 1"}),
    );
    let sid = first["session_id"].as_str().unwrap().to_owned();
    // 64: the same session is reused; 65: errors are results with is_error.
    let second = s.call_ok(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "y", "session_id": sid}),
    );
    app.join().unwrap();
    assert_eq!(second["session_id"], sid.as_str());
    assert_eq!(second["is_error"], true);
    assert_eq!(second["output"], "NameError: name 'y' is not defined");
    // 40: the pause lists its session.
    let paused = s.call_ok("breakpoint_list_paused", json!({}));
    assert_eq!(paused["paused"][0]["repl_sessions"], json!([sid]));
    let transcript = s.http().get_ok(&format!("/api/repl/{sid}"))["session"]["transcript"].clone();
    assert_eq!(transcript.as_array().unwrap().len(), 2);
    // A session of another pause is refused.
    let other = paused_call(&s, "add");
    assert_eq!(
        s.call_err(
            "breakpoint_repl_eval",
            json!({"pause_id": other, "expression": "1", "session_id": sid})
        )["error"],
        "invalid_session_id"
    );
    // 70: a closed session (its pause was resumed).
    s.call_ok("breakpoint_continue", json!({"pause_id": p}));
    let e = s.call_err(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "1", "session_id": sid}),
    );
    assert!(
        ["session_closed", "invalid_pause"].contains(&e["error"].as_str().unwrap()),
        "{e}"
    );
    let e = s.call_err(
        "breakpoint_repl_eval",
        json!({"pause_id": p, "expression": "1"}),
    );
    assert_eq!(e["error"], "pause_resumed");
}

#[test]
fn inspect_shows_placeholders_and_survives_corrupt_payloads() {
    let s = McpServer::initialized("2025-11-25");
    // 73: an object the client could not pickle.
    let ph = raw_item(&corpus_pickle("placeholder_nested_socket"), 2);
    let corrupt = raw_item(&[0x80, 0x04, 0x95, 0xff, 0xff, b'}'], 3);
    let dataclass = raw_item(&corpus_pickle("exc_zero_division"), 4);
    // The original's own corrupt payload.
    let not_a_pickle = raw_item(b"not a pickle", 5);
    s.http().post_ok(
        "/api/call/start",
        &call_start_body(
            "f",
            vec![
                ph.clone(),
                corrupt.clone(),
                dataclass.clone(),
                not_a_pickle.clone(),
            ],
            json!({}),
        ),
    );
    let v = s.call_ok("breakpoint_inspect_object", json!({"cid": ph["cid"]}));
    assert!(
        v["repr"].as_str().unwrap().starts_with("<Unpicklable"),
        "{v}"
    );
    assert!(v["attributes"].is_object());
    assert!(v.get("error").is_none(), "a placeholder decodes: {v}");
    // 74: corrupt bytes give a clear failure, not an error of the server: the view says why
    // and, as in the original, `error` is deserialization_failed (a result, not isError).
    for bad in [&corrupt, &not_a_pickle] {
        let r = s.call("breakpoint_inspect_object", json!({"cid": bad["cid"]}));
        assert_eq!(r["isError"], false, "{r}");
        let v = crate::mcp_support::tool_json(&r);
        assert_eq!(r["structuredContent"], v, "{r}");
        assert_eq!(v["error"], "deserialization_failed", "{v}");
        assert_eq!(v["cid"], bad["cid"]);
        assert!(v["repr"].as_str().unwrap().contains("unavailable"), "{v}");
        assert!(v["type"].is_string() && v["attributes"].is_object(), "{v}");
    }
    // An unknown CID: the original's answer, a result naming the error (not isError).
    let unknown = "0".repeat(128);
    let r = s.call("breakpoint_inspect_object", json!({"cid": unknown}));
    assert_eq!(r["isError"], false, "{r}");
    let v = crate::mcp_support::tool_json(&r);
    assert_eq!(r["structuredContent"], v, "{r}");
    assert_eq!(v["error"], "cid_not_found", "{v}");
    assert_eq!(v["cid"], unknown.as_str());
    assert!(v["message"].is_string() && v["hint"].is_string(), "{v}");
    // 71: type, repr and attributes.
    let v = s.call_ok(
        "breakpoint_inspect_object",
        json!({"cid": dataclass["cid"]}),
    );
    assert_eq!(v["repr"], "ZeroDivisionError('division by zero')");
    assert_eq!(v["type"], "ZeroDivisionError");
    assert!(v.get("error").is_none(), "{v}");
}

#[test]
fn status_resource_follows_changes() {
    // 82.
    let s = McpServer::initialized("2025-11-25");
    let read = || -> Value {
        let text = s.request("resources/read", json!({"uri": "breakpoint://status"}))["result"]
            ["contents"][0]["text"]
            .clone();
        serde_json::from_str(text.as_str().unwrap()).unwrap()
    };
    assert_eq!(read()["breakpoints"], 0);
    s.call_ok("breakpoint_add", json!({"function_name": "add"}));
    paused_call(&s, "add");
    let now = read();
    assert_eq!(
        (now["breakpoints"].clone(), now["paused"].clone()),
        (json!(1), json!(1))
    );
}

#[test]
fn mcp_and_http_change_breakpoints_concurrently() {
    // 90: concurrent add/remove from MCP and HTTP keep the state consistent.
    let s = McpServer::initialized("2025-11-25");
    let http = s.http();
    let writer = std::thread::spawn(move || {
        for i in 0..50 {
            http.post_ok(
                "/api/breakpoints",
                &json!({"function_name": format!("h{i}")}),
            );
            if i % 2 == 0 {
                assert_eq!(http.delete(&format!("/api/breakpoints/h{i}")).status, 200);
            }
        }
    });
    for i in 0..50 {
        s.call_ok("breakpoint_add", json!({"function_name": format!("m{i}")}));
        if i % 2 == 1 {
            s.call_ok(
                "breakpoint_remove",
                json!({"function_name": format!("m{i}")}),
            );
        }
    }
    writer.join().unwrap();
    let names = s.call_ok("breakpoint_list_breakpoints", json!({}))["breakpoints"].clone();
    assert_eq!(names.as_array().unwrap().len(), 50);
    assert!(
        names.as_array().unwrap().contains(&json!("h1"))
            && names.as_array().unwrap().contains(&json!("m0"))
    );
}

#[test]
fn without_mcp_nothing_is_written_to_stdout_and_a_chosen_port_works_with_mcp() {
    // 114, 121: without --mcp there is no MCP, and stdout stays empty in every mode.
    let home = crate::support::TempDir::new("nomcp");
    let port_file = home.path().join("port");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .args([
            "--memory",
            "--port",
            "0",
            "--port-file",
            port_file.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let port: u16 = wait_for("the port file", || {
        std::fs::read_to_string(&port_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let c = crate::support::Client { port };
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    assert_eq!(c.get("/api/status").status, 200);
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    }
    // An absence is tested: 200 ms in which an MCP reader of stdin (there must be none) would
    // have answered the ping (a server with --mcp answers one in a few milliseconds).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    // 115: --mcp with an explicit port binds it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = McpServer::start(&["--port", &port.to_string()]);
    assert_eq!(s.port, port);
    let r = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it"}}),
    );
    assert!(r.get("result").is_some());
    assert_eq!(s.http().get("/api/status").status, 200);
}
