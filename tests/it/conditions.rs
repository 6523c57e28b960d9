//! Conditional breakpoints, hit counts, logpoints and one-shot breakpoints, end to end: the
//! demo program (`--items`, dill-format items) and raw protocol requests with JSON-format
//! items, through REST and MCP.

use std::collections::BTreeSet;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::demo::{demo, demo_on, output, output_in};
use crate::mcp_support::McpServer;
use crate::support::{call_start_body, complete_body, item, pause_id, wait_for, Client, Server};
use cideldill_server::cas::cid_of;

/// The headline condition: the label starts with item-00 and x is odd.
const ODD_EARLY: &str = r#"kwargs["label"].startswith("item-00") and args[0] % 2 == 1"#;

/// A JSON-format item, as the browser client sends it.
fn json_item(value: &Value) -> Value {
    let text = value.to_string();
    json!({"cid": cid_of(text.as_bytes()), "client_ref": 1, "data": text, "serialization_format": "json"})
}

/// A call/start of `method` with these items, as the browser client sends it.
fn browser_start(method: &str, args: Vec<Value>, kwargs: Value) -> Value {
    json!({
        "method_name": method, "args": args, "kwargs": kwargs,
        "call_site": {"timestamp": 1.0, "stack_trace": []},
        "process_pid": 0, "process_start_time": 1795311683.5,
        "page_url": "http://127.0.0.1:9/page.html", "preferred_format": "json",
    })
}

/// A call/complete returning `value` as a JSON item.
fn browser_complete(call_id: &str, value: &Value) -> Value {
    let r = json_item(value);
    json!({
        "call_id": call_id, "timestamp": 2.0, "status": "success",
        "process_pid": 0, "process_start_time": 1795311683.5,
        "result_cid": r["cid"], "result_data": r["data"], "result_serialization_format": "json",
    })
}

/// The integer an argument of the demo shows (`2` or `"2"`).
fn shown_int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not an int: {v}"))
}

/// Continues every pause until the demo exits; returns (x, "before"/"after", pause data).
fn resume_all(c: &Client, child: &mut Child, server: &Server) -> Vec<(i64, &'static str, Value)> {
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut done = BTreeSet::new();
    loop {
        for p in c.get_ok("/api/paused")["paused"]
            .as_array()
            .unwrap()
            .clone()
        {
            let id = p["id"].as_str().unwrap().to_owned();
            if !done.insert(id.clone()) {
                continue;
            }
            let cd = p["call_data"].clone();
            let when = if cd.get("pretty_result").is_some() {
                "after"
            } else {
                "before"
            };
            seen.push((shown_int(&cd["pretty_args"][0]), when, cd));
            c.post_ok(
                &format!("/api/paused/{id}/continue"),
                &json!({"action": "continue"}),
            );
        }
        if let Some(status) = child.try_wait().unwrap() {
            let (out, err) = output(server, &["--items", "20"]);
            assert!(status.success(), "demo failed:\n{out}\n{err}");
            return seen;
        }
        assert!(Instant::now() < until, "the demo did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_condition_pauses_only_the_calls_it_holds_for_before_and_after() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let set = c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "resize", "behavior": "stop", "condition": ODD_EARLY}),
    );
    assert_eq!(set["condition"], ODD_EARLY);
    assert_eq!(set["hit_count"], 0);
    c.post_ok(
        "/api/breakpoints/resize/after_behavior",
        &json!({"behavior": "stop"}),
    );
    let mut child = demo(&server, &["--items", "20"]);
    let seen = resume_all(&c, &mut child, &server);
    let order: Vec<(i64, &str)> = seen.iter().map(|(x, w, _)| (*x, *w)).collect();
    let expected: Vec<(i64, &str)> = [1, 3, 5, 7, 9]
        .iter()
        .flat_map(|&x| [(x, "before"), (x, "after")])
        .collect();
    assert_eq!(
        order, expected,
        "only the odd calls among the first ten pause"
    );
    for (n, (_, when, cd)) in seen.iter().enumerate() {
        assert_eq!(cd["pause_reason"], "breakpoint", "{cd}");
        if *when == "before" {
            assert_eq!(cd["condition"], ODD_EARLY);
            assert_eq!(cd["hit_count"], n / 2 + 1, "{cd}");
        }
    }
    // The demo's registration re-posted the breakpoint by name: the condition stayed.
    let list = c.get_ok("/api/breakpoints");
    assert_eq!(list["breakpoint_conditions"]["resize"], ODD_EARLY);
    assert_eq!(list["breakpoint_hit_counts"]["resize"], 5);
    let records = c.get_ok("/api/call-records?function=resize&limit=100");
    assert_eq!(
        records["total_count"], 20,
        "every call ran and was recorded"
    );
    let (out, _) = output(&server, &["--items", "20"]);
    assert!(
        out.contains("resize(19, label='item-019', scale=2) -> 38"),
        "{out}"
    );
}

#[test]
fn an_agent_finds_the_one_call_that_matters_without_pausing_the_others() {
    let s = McpServer::initialized("2025-11-25");
    s.call_ok("breakpoint_set_default_behavior", json!({"behavior": "go"}));
    let added = s.call_ok(
        "breakpoint_add",
        json!({"function_name": "resize", "behavior": "stop",
               "condition": "kwargs['label'] == 'item-013'"}),
    );
    assert_eq!(added["condition"], "kwargs['label'] == 'item-013'");
    let mut child = demo_on(s.port, s.home.path(), &["--items", "20"]);
    let paused = s.call_ok("breakpoint_wait_for_pause", json!({"timeout_s": 30}));
    assert_eq!(paused["paused"], true, "{paused}");
    let p = &paused["pause"];
    assert_eq!(shown_int(&p["call_data"]["pretty_args"][0]), 13, "{p}");
    // The thirteen calls before it ran without waiting.
    let records = s.http().get_ok("/api/call-records?function=resize");
    assert_eq!(records["total_count"], 13, "{records}");
    s.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p["id"], "action": "continue"}),
    );
    wait_for("the demo to finish", || child.try_wait().unwrap());
    let listed = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(listed["hit_counts"]["resize"], 1);
    assert_eq!(
        listed["conditions"]["resize"],
        "kwargs['label'] == 'item-013'"
    );
    // A condition that does not parse is refused with its position.
    let err = s.call_err(
        "breakpoint_add",
        json!({"function_name": "resize", "condition": "args[0] > (1"}),
    );
    assert_eq!(err["error"], "invalid_condition", "{err}");
    assert_eq!(err["position"]["column"], 13, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("column 13"),
        "{err}"
    );
}

#[test]
fn a_logpoint_logs_a_line_per_call_and_the_program_never_waits() {
    // A client that declared the custom notifications, notifications/breakpoint/log among them.
    let s = McpServer::initialized_custom("2025-11-25");
    let set = s.call_ok(
        "breakpoint_add",
        json!({"function_name": "resize", "log_message": "scale={kwargs['scale']} -> {result}"}),
    );
    assert_eq!(set["log_message"], "scale={kwargs['scale']} -> {result}");
    // The global default is stop: a logpoint logs instead of pausing all the same.
    let mut child = demo_on(s.port, s.home.path(), &["--items", "3"]);
    let mut messages = Vec::new();
    for _ in 0..3 {
        let note = s.notification("notifications/breakpoint/log");
        assert_eq!(note["params"]["function_name"], "resize");
        messages.push(note["params"]["message"].as_str().unwrap().to_owned());
    }
    assert_eq!(messages, ["scale=2 -> 0", "scale=2 -> 2", "scale=2 -> 4"]);
    let status = wait_for("the demo to finish", || child.try_wait().unwrap());
    let (out, err) = output_in(s.home.path(), &["--items", "3"]);
    assert!(status.success(), "{out}\n{err}");
    let c = s.http();
    assert_eq!(c.get_ok("/api/paused")["paused"], json!([]));
    let lines = c.get_ok("/api/logpoints");
    let texts: Vec<&str> = lines["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["message"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["scale=2 -> 0", "scale=2 -> 2", "scale=2 -> 4"]);
    assert_eq!(lines["last_seq"], 3);
    assert_eq!(
        c.get_ok("/api/logpoints?after=2")["lines"][0]["message"],
        "scale=2 -> 4"
    );
    let records = c.get_ok("/api/call-records?function=resize");
    let logged: BTreeSet<&str> = records["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["log"].as_str().unwrap())
        .collect();
    assert_eq!(logged.len(), 3, "every call record has its line: {records}");
}

#[test]
fn conditions_read_json_items_and_an_undecidable_one_pauses_saying_why() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "move", "behavior": "stop",
                "condition": "args[0].x < 0 and len(kwargs['path']) == 2"}),
    );
    let point = |x: i64| json_item(&json!({"x": x, "y": 1}));
    let path = json_item(&json!(["a", "b"]));
    let run = c.post_ok(
        "/api/call/start",
        &browser_start("move", vec![point(3)], json!({"path": path})),
    );
    assert_eq!(run["action"], "continue", "x = 3 runs: {run}");
    assert_eq!(
        c.post_ok(
            "/api/call/complete",
            &browser_complete(run["call_id"].as_str().unwrap(), &json!(1))
        ),
        json!({"status": "ok"}),
        "and no after-pause either"
    );
    let stop = c.post_ok(
        "/api/call/start",
        &browser_start("move", vec![point(-3)], json!({"path": path})),
    );
    assert_eq!(stop["action"], "poll", "x = -3 pauses: {stop}");
    let paused = c.get_ok("/api/paused");
    assert_eq!(paused["paused"][0]["call_data"]["pretty_args"][0]["x"], -3);
    c.post_ok(
        &format!("/api/paused/{}/continue", pause_id(&stop)),
        &json!({"action": "modify", "modified_args": [{"x": 5, "y": 5}]}),
    );
    let action = c.get_ok(&format!("/api/poll/{}", pause_id(&stop)));
    assert_eq!(
        action["action"]["modified_args"][0]["serialization_format"], "json",
        "a JSON caller gets JSON items back: {action}"
    );
    // No attribute x: the call pauses and the pause says why.
    let odd = c.post_ok(
        "/api/call/start",
        &browser_start(
            "move",
            vec![json_item(&json!([1, 2]))],
            json!({"path": path}),
        ),
    );
    assert_eq!(odd["action"], "poll", "{odd}");
    let listed = c.get_ok("/api/paused");
    let cd = listed["paused"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == pause_id(&odd).as_str())
        .unwrap()["call_data"]
        .clone();
    assert_eq!(cd["pause_reason"], "condition_error", "{cd}");
    let why = cd["condition_error"].as_str().unwrap();
    assert!(
        why.contains("args[0].x") && why.contains("no attribute 'x'"),
        "{why}"
    );
}

#[test]
fn hit_conditions_count_the_calls_whose_condition_holds_and_can_be_reset() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "behavior": "stop", "condition": "args[0] >= 0",
                "hit_condition": "%3"}),
    );
    let start = |x: i64| {
        let r = c.post_ok(
            "/api/call/start",
            &call_start_body("f", vec![item(&json!(x), 2)], json!({})),
        );
        let paused = r["action"] == "poll";
        if paused {
            c.post_ok(
                &format!("/api/paused/{}/continue", pause_id(&r)),
                &json!({"action": "continue"}),
            );
        }
        c.post_ok(
            "/api/call/complete",
            &complete_body(r["call_id"].as_str().unwrap(), &json!(x)),
        );
        paused
    };
    // Negative calls are not counted: the 3rd and 6th counted calls pause.
    let pauses: Vec<bool> = [1, -1, 2, 3, -5, 4, 5, 6]
        .iter()
        .map(|&x| start(x))
        .collect();
    assert_eq!(
        pauses,
        [false, false, false, true, false, false, false, true]
    );
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_hit_counts"]["f"],
        6
    );
    // Reset, then ">1": every counted call after the first.
    assert_eq!(c.delete("/api/breakpoints/f/hits").json()["hit_count"], 0);
    c.post_ok(
        "/api/breakpoints/f/hit_condition",
        &json!({"hit_condition": ">1"}),
    );
    let pauses: Vec<bool> = [1, 2, 3].iter().map(|&x| start(x)).collect();
    assert_eq!(pauses, [false, true, true]);
    // "2": the second only; changing the hit condition restarts the count.
    let set = c.post_ok(
        "/api/breakpoints/f/hit_condition",
        &json!({"hit_condition": "2"}),
    );
    assert_eq!(set["hit_count"], 0);
    let pauses: Vec<bool> = [1, 2, 3].iter().map(|&x| start(x)).collect();
    assert_eq!(pauses, [false, true, false]);
    // Bad values say what is expected; nothing changes.
    for bad in ["x", "%0", ">-1", "0", "5x"] {
        let err = c.post_err(
            "/api/breakpoints/f/hit_condition",
            &json!({"hit_condition": bad}),
            400,
        );
        assert_eq!(err["error"], "invalid_hit_condition", "{bad}: {err}");
    }
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_hit_conditions"]["f"],
        "2"
    );
    // Clearing it: every call whose condition holds pauses again.
    c.post_ok(
        "/api/breakpoints/f/hit_condition",
        &json!({"hit_condition": ""}),
    );
    assert!(start(7));
}

#[test]
fn outcome_conditions_are_decided_when_the_call_returns() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "behavior": "stop", "condition": "result is None or result > 10"}),
    );
    let call = |x: i64, result: &Value| {
        let r = c.post_ok(
            "/api/call/start",
            &call_start_body("f", vec![item(&json!(x), 2)], json!({})),
        );
        assert_eq!(r["action"], "continue", "no before-pause: {r}");
        c.post_ok(
            "/api/call/complete",
            &complete_body(r["call_id"].as_str().unwrap(), result),
        )
    };
    assert_eq!(call(1, &json!(5)), json!({"status": "ok"}));
    let after = call(2, &json!(50));
    assert_eq!(after["action"], "poll", "{after}");
    let paused = c.get_ok("/api/paused");
    assert_eq!(
        shown_int(&paused["paused"][0]["call_data"]["pretty_result"]),
        50
    );
    c.post_ok(
        &format!("/api/paused/{}/continue", pause_id(&after)),
        &json!({"action": "continue"}),
    );
    assert_eq!(call(3, &Value::Null)["action"], "poll");

    // exception == "ZeroDivisionError" on a call that raised.
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "g", "behavior": "stop", "condition": "exception == 'ZeroDivisionError'"}),
    );
    let raise = |t: &str| {
        let r = c.post_ok(
            "/api/call/start",
            &call_start_body("g", vec![item(&json!(1), 2)], json!({})),
        );
        let e = item(&json!(t), 8);
        c.post_ok(
            "/api/call/complete",
            &json!({"call_id": r["call_id"], "timestamp": 2.0, "status": "exception",
                    "process_pid": 16759, "process_start_time": 1795311683.7211661,
                    "exception_type": t, "exception_message": "boom", "exception_traceback": "",
                    "exception_cid": e["cid"], "exception_data": e["data"]}),
        )
    };
    assert_eq!(raise("ValueError"), json!({"status": "ok"}));
    let stopped = raise("ZeroDivisionError");
    assert_eq!(stopped["action"], "poll", "{stopped}");
    let listed = c.get_ok("/api/paused");
    let p = listed["paused"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == pause_id(&stopped).as_str())
        .unwrap()
        .clone();
    assert_eq!(p["call_data"]["pause_reason"], "exception", "{p}");
}

#[test]
fn a_one_shot_breakpoint_pauses_once_then_goes_and_stays_listed() {
    let server = Server::start(&[]);
    let c = server.client();
    let set = c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "one_shot": true}),
    );
    assert_eq!(set["one_shot"], true);
    let start = || {
        c.post_ok(
            "/api/call/start",
            &call_start_body("f", vec![item(&json!(1), 2)], json!({})),
        )
    };
    let first = start();
    assert_eq!(first["action"], "poll");
    let list = c.get_ok("/api/breakpoints");
    assert_eq!(list["breakpoints"], json!(["f"]));
    assert_eq!(list["breakpoint_behaviors"]["f"], "go");
    assert_eq!(list["breakpoint_after_behaviors"]["f"], "go");
    assert_eq!(list["breakpoint_one_shot"], json!(["f"]));
    c.post_ok(
        &format!("/api/paused/{}/continue", pause_id(&first)),
        &json!({"action": "continue"}),
    );
    assert_eq!(
        c.post_ok(
            "/api/call/complete",
            &complete_body(first["call_id"].as_str().unwrap(), &json!(1))
        ),
        json!({"status": "ok"}),
        "no after-pause once it went off"
    );
    let second = start();
    assert_eq!(second["action"], "continue");
    // A logpoint never pauses: one_shot with it is refused, and says what to use.
    let err = c.post_err(
        "/api/breakpoints/f/log_message",
        &json!({"log_message": "x={args[0]}"}),
        400,
    );
    assert_eq!(err["error"], "invalid_options", "{err}");
    assert!(err["message"].as_str().unwrap().contains("hit_condition"));
}

#[test]
fn bad_options_are_refused_with_their_position_and_change_nothing() {
    let server = Server::start(&[]);
    let c = server.client();
    let err = c.post_err(
        "/api/breakpoints",
        &json!({"function_name": "f", "condition": "args[0] > (1"}),
        400,
    );
    assert_eq!(err["error"], "invalid_condition");
    assert_eq!(err["field"], "condition");
    assert_eq!(err["position"]["column"], 13);
    assert!(
        err["message"].as_str().unwrap().contains("column 13"),
        "{err}"
    );
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoints"],
        json!([]),
        "a refused breakpoint is not added"
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "f", "condition": "args[0] > 1"}),
    );
    for (body, code) in [
        (json!({"condition": 5}), "invalid_condition"),
        (json!({"condition": "len(args"}), "invalid_condition"),
        (json!({"log_message": "x={args[0]"}), "invalid_log_message"),
        (json!({"log_message": "x={}"}), "invalid_log_message"),
        (json!({"one_shot": "yes"}), "invalid_one_shot"),
    ] {
        let field = body.as_object().unwrap().keys().next().unwrap().clone();
        let err = c.post_err(&format!("/api/breakpoints/f/{field}"), &body, 400);
        assert_eq!(err["error"], code, "{body}: {err}");
    }
    let err = c.post_err("/api/breakpoints/f/condition", &json!({}), 400);
    assert_eq!(err["error"], "missing_condition");
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoint_conditions"]["f"],
        "args[0] > 1",
        "nothing changed"
    );
    let err = c.post_err(
        "/api/breakpoints/nope/condition",
        &json!({"condition": "True"}),
        404,
    );
    assert_eq!(err["error"], "breakpoint_not_found");
    // Each option changes on its own; "" clears one.
    c.post_ok("/api/breakpoints/f/condition", &json!({"condition": ""}));
    let list = c.get_ok("/api/breakpoints");
    assert!(list["breakpoint_conditions"].get("f").is_none(), "{list}");
}

#[test]
fn a_modern_listen_stream_gets_the_log_lines() {
    let s = McpServer::start(&[]);
    // A client that declares the custom notifications and wants log lines from info up.
    let envelope = crate::mcp_support::modern_envelope_custom(Some("info"));
    let listen = s.start_request(
        "subscriptions/listen",
        json!({"notifications": {}, "_meta": envelope}),
    );
    s.notification("notifications/subscriptions/acknowledged");
    let r = s.request(
        "tools/call",
        json!({"name": "breakpoint_add", "_meta": envelope,
               "arguments": {"function_name": "f", "log_message": "f({args[0]}) = {result}"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let c = s.http();
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![item(&json!(4), 2)], json!({})),
    );
    assert_eq!(start["action"], "continue");
    c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(16)),
    );
    let note = s.notification("notifications/breakpoint/log");
    assert_eq!(note["params"]["message"], "f(4) = 16");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen
    );
    // The same line as a standard log message, for clients that know no custom notification.
    let line = s.notification("notifications/message");
    assert_eq!(line["params"]["level"], "info");
    assert!(
        line["params"]["data"]
            .as_str()
            .unwrap()
            .ends_with(": f(4) = 16"),
        "{line}"
    );
    assert_eq!(
        line["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen
    );
}
