//! The same operations through the REST API on one server and through MCP tools on another
//! give the same state, and on each server both faces show that state alike (their shapes
//! differ on purpose: REST `breakpoint_behaviors`, MCP `behaviors`).

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{call_start_body, complete_body, item, pause_id};

/// Which face a server is driven through.
#[derive(Clone, Copy, Debug)]
enum Face {
    Rest,
    Mcp,
}

/// What the program does on either server: register its two functions.
fn register_functions(s: &McpServer) {
    for name in ["slow_add", "fast_add"] {
        s.http().post_ok(
            "/api/functions",
            &json!({"function_name": name, "signature": "(x, y=1)"}),
        );
    }
}

/// Breakpoint with a before-behavior, an after-behavior, a replacement, a condition, the
/// default behavior, one breakpoint switched off, the master switch off and on again; every answer in the shape both faces share (`status`, `function_name`,
/// `behavior`, ...).
fn configure(s: &McpServer, face: Face) -> Vec<Value> {
    match face {
        Face::Rest => {
            let http = s.http();
            vec![
                http.post_ok(
                    "/api/breakpoints",
                    &json!({"function_name": "slow_add", "behavior": "stop", "signature": "(x, y=1)", "one_shot": false}),
                ),
                http.post_ok(
                    "/api/breakpoints",
                    &json!({"function_name": "fast_add", "signature": "(x, y=1)", "condition": "args[0] > 1", "hit_condition": "%2"}),
                ),
                http.post_ok(
                    "/api/breakpoints/slow_add/after_behavior",
                    &json!({"behavior": "exception"}),
                ),
                http.post_ok(
                    "/api/breakpoints/slow_add/replacement",
                    &json!({"replacement_function": "fast_add"}),
                ),
                http.post_ok("/api/behavior", &json!({"behavior": "stop_exception"})),
                http.post_ok("/api/breakpoints/fast_add/enabled", &json!({"enabled": false})),
                http.post_ok("/api/pausing", &json!({"pausing": false})),
                http.post_ok("/api/pausing", &json!({"pausing": true})),
            ]
        }
        Face::Mcp => vec![
            s.call_ok(
                "breakpoint_add",
                json!({"function_name": "slow_add", "behavior": "stop", "one_shot": false}),
            ),
            s.call_ok(
                "breakpoint_add",
                json!({"function_name": "fast_add", "condition": "args[0] > 1", "hit_condition": "%2"}),
            ),
            s.call_ok(
                "breakpoint_set_after_behavior",
                json!({"function_name": "slow_add", "behavior": "exception"}),
            ),
            s.call_ok(
                "breakpoint_set_replacement",
                json!({"function_name": "slow_add", "replacement_function": "fast_add"}),
            ),
            s.call_ok(
                "breakpoint_set_default_behavior",
                json!({"behavior": "stop_exception"}),
            ),
            s.call_ok(
                "breakpoint_set_enabled",
                json!({"function_name": "fast_add", "enabled": false}),
            ),
            s.call_ok("breakpoint_set_pausing", json!({"pausing": false})),
            s.call_ok("breakpoint_set_pausing", json!({"pausing": true})),
        ],
    }
}

/// The program calls `slow_add(2, y=3)`; it pauses before running and is resumed with
/// `x = 10` (the keyword argument unchanged). Returns the resume answer and what the program
/// receives when it polls.
fn pause_and_modify(s: &McpServer, face: Face) -> (String, Value, Value) {
    let y = item(&json!(3), 3);
    let start = s.http().post_ok(
        "/api/call/start",
        &call_start_body("slow_add", vec![item(&json!(2), 2)], json!({"y": y})),
    );
    let pause = pause_id(&start);
    let call_id = start["call_id"].as_str().unwrap().to_owned();
    let answer = match face {
        // REST resumes with exactly what the program will call with.
        Face::Rest => s.http().post_ok(
            &format!("/api/paused/{pause}/continue"),
            &json!({"action": "modify", "modified_args": [10], "modified_kwargs": {"y": y}}),
        ),
        // MCP infers modify and keeps the keyword argument it was not given.
        Face::Mcp => s.call_ok(
            "breakpoint_continue",
            json!({"pause_id": pause, "modified_args": [10]}),
        ),
    };
    assert_eq!(answer["status"], "ok", "{face:?}: {answer}");
    assert_eq!(answer["pause_id"], json!(pause), "{face:?}: {answer}");
    let polled = s.http().get_ok(&format!("/api/poll/{pause}"));
    assert_eq!(polled["status"], "ready");
    // The program runs the call and reports it (no after-pause: it did not raise).
    let done = s
        .http()
        .post_ok("/api/call/complete", &complete_body(&call_id, &json!(13)));
    assert_eq!(done, json!({"status": "ok"}), "{face:?}");
    (pause, answer, polled["action"].clone())
}

/// The state as REST shows it, in REST's shapes.
fn rest_state(s: &McpServer) -> Value {
    let http = s.http();
    json!({
        "breakpoints": http.get_ok("/api/breakpoints"),
        "behavior": http.get_ok("/api/behavior"),
        "functions": http.get_ok("/api/functions"),
        "paused": http.get_ok("/api/paused"),
    })
}

/// The state as MCP tools show it, renamed into REST's shapes.
fn mcp_state(s: &McpServer) -> Value {
    let b = s.call_ok("breakpoint_list_breakpoints", json!({}));
    let f = s.call_ok("breakpoint_list_functions", json!({}));
    json!({
        "breakpoints": {
            "breakpoints": b["breakpoints"],
            "breakpoint_behaviors": b["behaviors"],
            "breakpoint_after_behaviors": b["after_behaviors"],
            "breakpoint_replacements": b["replacements"],
            "breakpoint_conditions": b["conditions"],
            "breakpoint_hit_conditions": b["hit_conditions"],
            "breakpoint_log_messages": b["log_messages"],
            "breakpoint_one_shot": b["one_shot"],
            "breakpoint_hit_counts": b["hit_counts"],
            "breakpoint_enabled": b["enabled"],
            "pausing": b["pausing"],
        },
        "behavior": s.call_ok("breakpoint_get_default_behavior", json!({})),
        "functions": {
            "functions": f["functions"],
            "function_signatures": f["signatures"],
            "function_metadata": f["metadata"],
        },
        "paused": s.call_ok("breakpoint_list_paused", json!({})),
    })
}

/// A call record without what differs between two runs (ids, times, process key).
fn comparable(record: &Value) -> Value {
    let mut r = record.clone();
    let m = r.as_object_mut().unwrap();
    for key in [
        "call_id",
        "started_at",
        "completed_at",
        "timestamp",
        "call_site",
    ] {
        m.remove(key);
    }
    // What was done is the same; through which face, when and from which pause differ.
    if let Some(Value::Object(done)) = m.get_mut("resolution") {
        for key in ["by", "at", "pause_id"] {
            done.remove(key);
        }
    }
    r
}

#[test]
fn rest_and_mcp_drive_the_same_operations_to_the_same_state() {
    let by_rest = McpServer::initialized("2025-11-25");
    let by_mcp = McpServer::initialized("2025-11-25");
    register_functions(&by_rest);
    register_functions(&by_mcp);

    // Every configuration answer is the same on both faces.
    let rest_answers = configure(&by_rest, Face::Rest);
    let mcp_answers = configure(&by_mcp, Face::Mcp);
    assert_eq!(rest_answers, mcp_answers);
    assert_eq!(
        rest_answers[1],
        json!({"status": "ok", "function_name": "fast_add", "condition": "args[0] > 1",
               "hit_condition": "%2", "log_message": null, "one_shot": false, "hit_count": 0})
    );

    // The resulting state is the same, and each server's two faces agree on it.
    let expected = json!({
        "breakpoints": {
            "breakpoints": ["fast_add", "slow_add"],
            "breakpoint_behaviors": {"fast_add": "yield", "slow_add": "stop"},
            "breakpoint_after_behaviors": {"fast_add": "yield", "slow_add": "exception"},
            "breakpoint_replacements": {"slow_add": "fast_add"},
            "breakpoint_conditions": {"fast_add": "args[0] > 1"},
            "breakpoint_hit_conditions": {"fast_add": "%2"},
            "breakpoint_log_messages": {},
            "breakpoint_one_shot": [],
            "breakpoint_hit_counts": {"fast_add": 0, "slow_add": 0},
            "breakpoint_enabled": {"fast_add": false, "slow_add": true},
            "pausing": true,
        },
        "behavior": {"behavior": "stop_exception"},
        "functions": {
            "functions": ["fast_add", "slow_add"],
            "function_signatures": {"fast_add": "(x, y=1)", "slow_add": "(x, y=1)"},
            "function_metadata": {},
        },
        "paused": {"paused": []},
    });
    for s in [&by_rest, &by_mcp] {
        assert_eq!(rest_state(s), expected);
        assert_eq!(mcp_state(s), expected);
    }

    // A paused call resumed with modified arguments: the program receives the same action.
    let (rest_pause, rest_answer, rest_action) = pause_and_modify(&by_rest, Face::Rest);
    let (mcp_pause, mcp_answer, mcp_action) = pause_and_modify(&by_mcp, Face::Mcp);
    assert_eq!(rest_answer, json!({"status": "ok", "pause_id": rest_pause}));
    assert_eq!(
        mcp_answer,
        json!({"status": "ok", "pause_id": mcp_pause, "action": "modify"})
    );
    assert_eq!(rest_action, mcp_action);
    assert_eq!(rest_action["action"], "modify");
    assert_eq!(rest_action["modified_args"][0], {
        let mut ten = item(&json!(10), 0);
        ten.as_object_mut().unwrap().remove("client_ref");
        ten["serialization_format"] = json!("dill");
        ten
    });

    // The call record is the same on both servers, and both faces of a server show it alike.
    let mut records = Vec::new();
    for (s, by) in [(&by_rest, "rest"), (&by_mcp, "mcp")] {
        let rest = s.http().get_ok("/api/call-records");
        let mcp = s.call_ok("breakpoint_get_call_records", json!({}));
        assert_eq!(rest["calls"], mcp["calls"]);
        assert_eq!(rest["total_count"], mcp["total_count"]);
        assert_eq!(mcp["truncated"], false);
        assert_eq!(rest["total_count"], 1);
        let record = &rest["calls"][0];
        assert_eq!(record["method_name"], "slow_add");
        assert_eq!(record["status"], "success");
        assert_eq!(record["pretty_result"], "13");
        assert_eq!(record["resolution"]["action"], "modify");
        assert_eq!(record["resolution"]["by"], by);
        records.push(comparable(record));
    }
    assert_eq!(records[0], records[1]);

    // Status counts agree too.
    for s in [&by_rest, &by_mcp] {
        let status = s.http().get_ok("/api/status");
        assert_eq!(
            (
                status["breakpoints"].clone(),
                status["paused"].clone(),
                status["total_calls"].clone()
            ),
            (json!(2), json!(0), json!(1))
        );
        assert_eq!(status["default_behavior"], "stop_exception");
    }
}
