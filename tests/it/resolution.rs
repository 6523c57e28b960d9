//! What the debugger did to a call is what every face records: a modified call shows the
//! arguments that ran beside the ones called, a skipped, raised or replaced call says so, and
//! each names the face it was resumed through (REST, the web UI, an MCP agent, continue all)
//! or the breakpoint that decided (its replacement, its condition, a logpoint).

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{
    call_start_body, complete_body, item, pause_id, raw_request, wait_for, Client, Server, TempDir,
};

/// Starts a call of `f(2)` and returns its pause (the server's default pauses every call).
fn paused_call(c: &Client, method: &str) -> (String, String) {
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(2), 2)], json!({})),
    );
    (
        pause_id(&start),
        start["call_id"].as_str().unwrap().to_owned(),
    )
}

/// POST with the web UI's own `Origin`, as the page's script sends it.
fn post_as_page(c: &Client, path: &str, body: &Value) -> Value {
    let origin = format!("http://127.0.0.1:{}", c.port);
    let text = body.to_string();
    let resp = c.raw(&raw_request(
        c.port,
        "POST",
        path,
        &[
            ("Origin", origin.as_str()),
            ("Content-Type", "application/json"),
            ("Connection", "close"),
        ],
        Some(text.as_bytes()),
    ));
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()
}

/// The newest call record of `method`.
fn record(c: &Client, method: &str) -> Value {
    let page = c.get_ok(&format!("/api/call-records?function={method}&limit=1"));
    page["calls"][0].clone()
}

#[test]
fn a_modified_call_records_the_arguments_that_ran_on_every_face() {
    let mcp = McpServer::initialized("2025-11-25");
    let c = mcp.http();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let (p, call_id) = paused_call(&c, "add");
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "modify", "modified_args": [10], "modified_kwargs": {"y": 20}}),
    );
    // The program ran add(10, y=20) and returned 30: it pauses after the call.
    let after = pause_id(&c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(30))));
    let paused = c.get_ok("/api/paused");
    let data = &paused["paused"][0]["call_data"];
    assert_eq!(paused["paused"][0]["id"], json!(after));
    assert_eq!(data["pretty_args"], json!(["2"]), "what the program called");
    let r = &data["resolution"];
    assert_eq!(r["action"], "modify");
    assert_eq!(r["by"], "rest");
    assert_eq!(r["pause_id"], json!(p));
    assert_eq!(r["pretty_args"], json!(["10"]), "what ran");
    assert_eq!(r["pretty_kwargs"], json!({"y": "20"}));
    assert_eq!(data["pretty_result"], "30");
    // The after-pause card shows what ran beside what was called.
    let html = c
        .raw(&raw_request(
            c.port,
            "GET",
            "/",
            &[("Accept", "text/html"), ("Connection", "close")],
            None,
        ))
        .text();
    assert!(
        html.contains("data-action=\"modify\" data-by=\"rest\""),
        "{html}"
    );
    assert!(
        html.contains("ran as <code class=\"value ran\">add(10, y=20)</code>, called as <code class=\"value called\">add(2)</code>"),
        "{html}"
    );
    c.post_ok(&format!("/api/paused/{after}/continue"), &json!({}));

    // REST: the record and the history entry.
    let rec = record(&c, "add");
    assert_eq!(rec["pretty_args"], json!(["2"]));
    assert_eq!(rec["resolution"]["action"], "modify");
    assert_eq!(rec["resolution"]["pretty_args"], json!(["10"]));
    assert_eq!(rec["resolution"]["args"][0]["serialization_format"], "dill");
    let history = c.get_ok("/api/breakpoints/add/history");
    let entry = &history["history"][0]["call_data"];
    assert_eq!(entry["resolution"]["pretty_kwargs"], json!({"y": "20"}));
    // The JSON Lines export.
    let lines = c.get("/api/call-records?format=jsonl").text();
    let exported: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(exported["resolution"]["action"], "modify");
    // MCP: the agent's view of the records.
    let out = mcp.call_ok(
        "breakpoint_get_call_records",
        json!({"function_name": "add"}),
    );
    let calls = out["calls"].as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(calls[0]["resolution"]["by"], "rest");
    assert_eq!(calls[0]["resolution"]["pretty_args"], json!(["10"]));
    // The web UI: the calls page, the call tree (node and details) and the history page.
    let key = rec["process_key"].as_str().unwrap();
    for path in [
        "/calls".to_owned(),
        format!("/call-tree/{key}?selected={call_id}"),
        "/breakpoint/add/history".to_owned(),
    ] {
        let html = c.get(&path).text();
        assert!(
            html.contains("ran as <code class=\"value ran\">add(10, y=20)</code>"),
            "{path}: {html}"
        );
    }
    let tree = c.get(&format!("/call-tree/{key}")).text();
    assert!(tree.contains("<span class=\"badge modify\""), "{tree}");
}

#[test]
fn skip_raise_replace_and_continue_all_say_what_ran_and_who_decided() {
    let mcp = McpServer::initialized("2025-11-25");
    let c = mcp.http();
    for f in ["s", "r", "p", "a", "b"] {
        c.post_ok("/api/breakpoints", &json!({"function_name": f}));
        c.post_ok(
            &format!("/api/breakpoints/{f}/after_behavior"),
            &json!({"behavior": "go"}),
        );
    }
    // Skip through the web UI: the function did not run; the fake result was returned.
    let (p, call_id) = paused_call(&c, "s");
    post_as_page(
        &c,
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "skip", "fake_result": 99}),
    );
    c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(99)));
    let r = &record(&c, "s")["resolution"];
    assert_eq!(
        (r["action"].as_str(), r["by"].as_str()),
        (Some("skip"), Some("web_ui"))
    );
    assert_eq!(r["pretty_fake_result"], "99");
    let html = c.get("/calls?function=s").text();
    assert!(
        html.contains("the function did not run; it returned <code class=\"value\">99</code>"),
        "{html}"
    );

    // Raise through an MCP agent.
    let (p, call_id) = paused_call(&c, "r");
    mcp.call_ok(
        "breakpoint_continue",
        json!({"pause_id": p, "action": "raise", "exception_type": "ValueError", "exception_message": "no"}),
    );
    let mut done = complete_body(&call_id, &json!(null));
    done["status"] = json!("exception");
    done["exception_type"] = json!("ValueError");
    done["exception_message"] = json!("no");
    c.post_ok("/api/call/complete", &done);
    let r = &record(&c, "r")["resolution"];
    assert_eq!(
        (r["action"].as_str(), r["by"].as_str()),
        (Some("raise"), Some("mcp"))
    );
    assert_eq!(r["exception_type"], "ValueError");
    assert_eq!(r["exception_message"], "no");

    // Replace through REST, and a replacement the breakpoint applies without a pause.
    let (p, call_id) = paused_call(&c, "p");
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"replacement_function": "q"}),
    );
    c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(1)));
    let r = &record(&c, "p")["resolution"];
    assert_eq!(
        (
            r["action"].as_str(),
            r["by"].as_str(),
            r["replacement_function"].as_str()
        ),
        (Some("replace"), Some("rest"), Some("q"))
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "p", "signature": "(x, y=1)"}),
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "q", "signature": "(x, y=1)"}),
    );
    c.post_ok(
        "/api/breakpoints/p/replacement",
        &json!({"replacement_function": "q"}),
    );
    c.post_ok("/api/breakpoints/p/behavior", &json!({"behavior": "go"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("p", vec![item(&json!(2), 2)], json!({})),
    );
    assert_eq!(start["action"], "replace");
    let id = start["call_id"].as_str().unwrap();
    c.post_ok("/api/call/complete", &complete_body(id, &json!(1)));
    let r = &record(&c, "p")["resolution"];
    assert_eq!(
        (r["action"].as_str(), r["by"].as_str(), r.get("pause_id")),
        (Some("replace"), Some("breakpoint"), None)
    );

    // Continue all: both calls say so.
    let (_, a) = paused_call(&c, "a");
    let (_, b) = paused_call(&c, "b");
    let all = c.post_ok("/api/paused/continue-all", &json!({}));
    assert_eq!(all["resumed"].as_array().unwrap().len(), 2);
    for (f, id) in [("a", a), ("b", b)] {
        c.post_ok("/api/call/complete", &complete_body(&id, &json!(0)));
        assert_eq!(record(&c, f)["resolution"]["by"], "continue_all");
    }
}

#[test]
fn a_condition_or_a_logpoint_that_lets_a_call_run_says_so() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "g", "condition": "args[0] > 100"}),
    );
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "h", "log_message": "x={args[0]}"}),
    );
    for f in ["g", "h"] {
        let start = c.post_ok(
            "/api/call/start",
            &call_start_body(f, vec![item(&json!(2), 2)], json!({})),
        );
        assert_eq!(start["action"], "continue", "{f} runs without a pause");
        let id = start["call_id"].as_str().unwrap();
        c.post_ok("/api/call/complete", &complete_body(id, &json!(0)));
    }
    let g = record(&c, "g");
    assert_eq!(g["resolution"]["action"], "continue");
    assert_eq!(g["resolution"]["by"], "condition");
    let h = record(&c, "h");
    assert_eq!(h["resolution"]["by"], "logpoint");
    assert_eq!(h["log"], "x=2");
    // A call nothing decided about has no resolution (the original's record shape).
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("plain", vec![], json!({})),
    );
    let id = start["call_id"].as_str().unwrap();
    c.post_ok("/api/call/complete", &complete_body(id, &json!(0)));
    assert!(record(&c, "plain").get("resolution").is_none());
}

#[test]
fn what_the_debugger_did_survives_a_restart() {
    let home = TempDir::new("resolution-db");
    let db = home.path().join("session.db");
    let db = db.to_str().unwrap();
    let mut server = Server::start_in(home.path(), &["--db", db, "--port", "0"]);
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    c.post_ok(
        "/api/breakpoints/add/after_behavior",
        &json!({"behavior": "go"}),
    );
    let (p, call_id) = paused_call(&c, "add");
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "modify", "modified_args": [7]}),
    );
    c.post_ok("/api/call/complete", &complete_body(&call_id, &json!(8)));
    server.signal_and_wait("-TERM");
    let server = Server::start_in(home.path(), &["--db", db, "--port", "0"]);
    let c = server.client();
    let rec = wait_for("the record read back", || {
        let r = record(&c, "add");
        (!r.is_null()).then_some(r)
    });
    assert_eq!(rec["resolution"]["action"], "modify");
    assert_eq!(rec["resolution"]["by"], "rest");
    assert_eq!(rec["resolution"]["pretty_args"], json!(["7"]));
    assert_eq!(rec["resolution"]["kwargs"], json!({}));
}
