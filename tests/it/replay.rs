//! Replay in the live program: the demo (`scripts/demo_app.py --items N`, which speaks the
//! Python client's protocol) pauses at every call; recorded calls of `resize` are replayed
//! through the REPL relay of its paused call, as recorded and with edited arguments, one by
//! one and as a sequence that stops at its first divergence.

use std::process::Child;

use serde_json::{json, Value};

use cideldill_server::mcp::tools::TOOLS;
use cideldill_server::schema;

use crate::demo::{demo, demo_on, output};
use crate::mcp_support::McpServer;
use crate::support::{
    call_start_body, complete_body, item, pause_id, wait_for, Client, Server, TempDir,
};

/// The first pause of `resize` whose first argument is shown as `x`, before or after its call.
fn pause_of(c: &Client, x: &str, after: bool) -> String {
    wait_for(&format!("the pause of resize({x})"), || {
        let paused = c.get_ok("/api/paused");
        paused["paused"].as_array()?.iter().find_map(|p| {
            let cd = &p["call_data"];
            let is_after = cd.get("pretty_result").is_some();
            (cd["method_name"] == "resize" && cd["pretty_args"][0] == x && is_after == after)
                .then(|| p["id"].as_str().map(str::to_owned))
                .flatten()
        })
    })
}

fn resume(c: &Client, pause_id: &str, body: Value) {
    c.post_ok(&format!("/api/paused/{pause_id}/continue"), &body);
}

/// The call id of the newest record of `resize(x)` that is not a replay.
fn record_of(c: &Client, x: &str) -> String {
    let page = c.get_ok("/api/call-records?function=resize");
    page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pretty_args"][0] == x && r.get("replay_of").is_none())
        .and_then(|r| r["call_id"].as_str())
        .unwrap_or_else(|| panic!("no record of resize({x}): {page}"))
        .to_owned()
}

fn finish(c: &Client, child: &mut Child) {
    wait_for("the demo to finish", || {
        c.post_ok("/api/paused/continue-all", &json!({}));
        child.try_wait().unwrap()
    });
}

#[test]
fn a_recorded_call_is_replayed_in_the_live_program_as_recorded_and_edited() {
    let server = Server::start(&[]);
    let c = server.client();
    let mut child = demo(&server, &["--items", "4"]);
    // resize(0) runs as is; resize(1) is skipped with a fake result (its record says 99).
    let p = pause_of(&c, "0", false);
    resume(&c, &p, json!({"action": "continue"}));
    resume(&c, &pause_of(&c, "0", true), json!({"action": "continue"}));
    let p = pause_of(&c, "1", false);
    resume(&c, &p, json!({"action": "skip", "fake_result": 99}));
    resume(&c, &pause_of(&c, "1", true), json!({"action": "continue"}));
    // The program is paused before resize(2): replays go through that pause.
    let paused = pause_of(&c, "2", false);
    let r0 = record_of(&c, "0");
    let r1 = record_of(&c, "1");

    let same = c.post_ok(&format!("/api/call-records/{r0}/replay"), &json!({}));
    assert_eq!(same["source_id"], r0.as_str(), "{same}");
    assert_eq!(same["pause_id"], paused.as_str(), "{same}");
    assert_eq!(same["status"], "success", "{same}");
    assert_eq!(same["result"], "0", "{same}");
    assert_eq!(same["same"], true, "{same}");
    assert_eq!(same["differences"], json!([]), "{same}");
    assert_eq!(
        same["expression"],
        concat!(
            "(self if method is object.__getattribute__(self, \"_target\") ",
            "else getattr(self, name))(0, label=\"item-000\", scale=2)"
        ),
        "{same}"
    );
    let new_id = same["record_id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, r0);
    // The replayed call is a record of its own, marked, that ran without pausing although
    // resize's breakpoint stops every call.
    let page = c.get_ok("/api/call-records?function=resize");
    let replayed = page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["call_id"] == new_id.as_str())
        .unwrap_or_else(|| panic!("{page}"));
    assert_eq!(replayed["replay_of"], r0.as_str());
    assert_eq!(replayed["resolution"]["by"], "replay", "{replayed}");
    let paused_now = c.get_ok("/api/paused")["paused"].as_array().unwrap().len();
    assert_eq!(paused_now, 1, "only the program's own pause remains");

    // Edited arguments: JSON values, and the record's own item by CID.
    let source = page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["call_id"] == r0.as_str())
        .unwrap()
        .clone();
    let label = source["kwargs"]["label"]["cid"].clone();
    let edited = c.post_ok(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"args": [7], "kwargs": {"label": {"cid": label}, "scale": 3}}),
    );
    assert_eq!(edited["result"], "21", "{edited}");
    assert_eq!(edited["same"], false);
    let parts: Vec<&str> = edited["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["part"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["args[0]", "kwargs.scale", "result"], "{edited}");
    assert_eq!(edited["differences"][0]["source"], "0");
    assert_eq!(edited["differences"][0]["replay"], "7");

    // A call that raises in the replay reports its exception.
    let raised = c.post_ok(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"args": [[1]], "kwargs": {"label": "x", "scale": "s"}}),
    );
    assert_eq!(raised["status"], "exception", "{raised}");
    assert!(
        raised["exception"].to_string().contains("TypeError"),
        "{raised}"
    );

    // Bad input and nothing to run it: clear refusals.
    let bad = c.post(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"args": "x"}),
    );
    assert_eq!(
        (bad.status, bad.json()["error"].clone()),
        (400, json!("invalid_args"))
    );
    let bad = c.post(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"kwargs": {"not a name": 1}}),
    );
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["argument"], "kwargs.not a name");
    let missing = c.post("/api/call-records/nope/replay", &json!({}));
    assert_eq!(missing.status, 404);
    let elsewhere = c.post(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"into_run": "1.0+1"}),
    );
    assert_eq!(elsewhere.status, 409);
    let body = elsewhere.json();
    assert_eq!(body["error"], "no_live_program");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("with a breakpoint on resize"),
        "{body}"
    );

    // A sequence: resize(0) replays the same, resize(1) (skipped with 99) diverges.
    let run = source["process_key"].as_str().unwrap().to_owned();
    let seq = c.post_ok(&format!("/api/runs/{run}/replay"), &json!({}));
    assert_eq!(seq["completed"], false, "{seq}");
    assert_eq!(seq["replayed"].as_array().unwrap().len(), 2, "{seq}");
    assert_eq!(seq["replayed"][0]["source_id"], r0.as_str());
    assert_eq!(seq["replayed"][0]["same"], true);
    assert_eq!(seq["divergence"]["source_id"], r1.as_str(), "{seq}");
    assert_eq!(seq["divergence"]["differences"][0]["part"], "result");
    assert_eq!(seq["divergence"]["differences"][0]["source"], "99");
    assert_eq!(seq["divergence"]["differences"][0]["replay"], "2");
    let only = c.post_ok(
        &format!("/api/runs/{run}/replay"),
        &json!({"call_ids": [r0, r0]}),
    );
    assert_eq!(only["completed"], true, "{only}");
    assert_eq!(only["divergence"], Value::Null);
    let bad = c.post(&format!("/api/runs/{run}/replay"), &json!({"call_ids": []}));
    assert_eq!(bad.status, 400);

    finish(&c, &mut child);
    let (out, err) = output(&server, &["--items", "4"]);
    assert!(child.wait().unwrap().success(), "{out}\n{err}");
    assert!(
        out.contains("resize(3, label='item-003', scale=2) -> 6"),
        "{out}"
    );
    assert_eq!(c.get_ok("/api/com-errors")["errors"], json!([]));
    // The program is gone: nothing can run a replay now.
    let r = c.post(&format!("/api/call-records/{r0}/replay"), &json!({}));
    assert_eq!(r.status, 409);
}

#[test]
fn a_replayed_call_is_on_disk_when_acknowledged_and_names_its_source_after_a_restart() {
    let home = TempDir::new("replay-db");
    let db = home.path().join("runs.db");
    let db = db.to_str().unwrap();
    let mut server = Server::start_in(home.path(), &["--db", db]);
    let c = server.client();
    let mut child = demo(&server, &["--items", "2"]);
    resume(&c, &pause_of(&c, "0", false), json!({"action": "continue"}));
    resume(&c, &pause_of(&c, "0", true), json!({"action": "continue"}));
    pause_of(&c, "1", false);
    let r0 = record_of(&c, "0");
    let replayed = c.post_ok(
        &format!("/api/call-records/{r0}/replay"),
        &json!({"args": [4]}),
    );
    let new_id = replayed["record_id"].as_str().unwrap().to_owned();
    let run = replayed["run_id"].as_str().unwrap().to_owned();
    child.kill().unwrap();
    child.wait().unwrap();
    server.signal_and_wait("-KILL");

    let server = Server::start_in(home.path(), &["--db", db]);
    let c = server.client();
    let page = c.get_ok("/api/call-records?function=resize");
    let record = page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["call_id"] == new_id.as_str())
        .unwrap_or_else(|| panic!("the replayed call is kept: {page}"))
        .clone();
    assert_eq!(record["replay_of"], r0.as_str());
    assert_eq!(record["pretty_result"], "8");
    // Its call tree details still compare it with its source, read back from the file.
    let html = c.get(&format!(
        "/call-tree/{}?selected={}",
        urlencode(&run),
        urlencode(&new_id)
    ));
    let text = String::from_utf8_lossy(&html.body).into_owned();
    assert!(text.contains("Replay of"), "{text}");
    assert!(text.contains("Compared with the recorded call"), "{text}");
    // The program is gone with the old server: nothing can replay now.
    let r = c.post(&format!("/api/call-records/{r0}/replay"), &json!({}));
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error"], "no_live_program");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn a_program_that_cannot_call_the_function_is_refused_and_its_calls_meanwhile_do_not_pause() {
    let server = Server::start(&[]);
    let c = server.client();
    // A call of g recorded, then the program paused in a call of f (same process), which
    // has a breakpoint.
    let g = c.post_ok(
        "/api/call/start",
        &call_start_body("g", vec![item(&json!(1), 1)], json!({})),
    );
    let g_id = g["call_id"].as_str().unwrap().to_owned();
    c.post_ok("/api/call/complete", &complete_body(&g_id, &json!(2)));
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let f = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![item(&json!(1), 1)], json!({})),
    );
    let pause = pause_id(&f);
    // The program: evaluates the replay, makes a call of f meanwhile (which must not pause:
    // the program is paused itself), and has no g registered.
    let http = server.client();
    let p = pause.clone();
    let program = std::thread::spawn(move || {
        let req = wait_for("the replay's eval", || {
            let r = http.get_ok(&format!("/api/poll-repl/{p}"));
            r["eval_id"].is_string().then_some(r)
        });
        // The paused frame is the client's, not the program's: g is looked up in the
        // client's function registry and called through debug_call.
        assert_eq!(
            req["expr"],
            "__import__(\"cideldill_client\").debug_call(\"g\", \
             __import__(\"cideldill_client.function_registry\", fromlist=[\"get_function\"])\
             .get_function(\"g\"), 1)"
        );
        let nested = http.post_ok(
            "/api/call/start",
            &call_start_body("f", vec![item(&json!(5), 5)], json!({})),
        );
        assert_eq!(nested["action"], "continue", "{nested}");
        let id = nested["call_id"].as_str().unwrap();
        let done = http.post_ok("/api/call/complete", &complete_body(id, &json!(0)));
        assert!(
            done.get("action").is_none() || done["action"].is_null(),
            "no after-pause: {done}"
        );
        http.post_ok(
            "/api/call/repl-result",
            &json!({"eval_id": req["eval_id"], "pause_id": p, "session_id": req["session_id"],
                    "result": "", "stdout": "",
                    "error": "TypeError: debug_call with alias requires a callable as second argument"}),
        );
    });
    let r = c.post(&format!("/api/call-records/{g_id}/replay"), &json!({}));
    program.join().unwrap();
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(body["error"], "replay_not_run");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("TypeError: debug_call"), "{message}");
    assert!(message.contains("function registry"), "{message}");
    assert!(message.contains("breakpoint on it"), "{message}");
    // Once the replay ended, calls pause again as their breakpoints say.
    let again = c.post_ok(
        "/api/call/start",
        &call_start_body("f", vec![item(&json!(6), 6)], json!({})),
    );
    assert_eq!(again["action"], "poll", "{again}");
    // An argument given as a stored object the server does not hold is refused, named.
    let bad = c.post(
        &format!("/api/call-records/{g_id}/replay"),
        &json!({"args": [{"cid": "0".repeat(128)}]}),
    );
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["argument"], "args[0]");
    // A web page's call (it runs as JavaScript) is never sent to a Python program.
    let mut body = call_start_body("h", vec![item(&json!(1), 1)], json!({}));
    body["page_url"] = json!("http://localhost:8000/");
    let h = c.post_ok("/api/call/start", &body);
    let h_id = h["call_id"].as_str().unwrap().to_owned();
    c.post_ok("/api/call/complete", &complete_body(&h_id, &json!(1)));
    let page = c.post(&format!("/api/call-records/{h_id}/replay"), &json!({}));
    assert_eq!(page.status, 400);
    assert_eq!(page.json()["error"], "not_replayable");
}

/// The first live pause of `function` in run `run` (any run when `None`), before its call or
/// after it.
fn pause_in(c: &Client, run: Option<&str>, function: &str, after: bool) -> String {
    wait_for(&format!("a pause of {function}"), || {
        let paused = c.get_ok("/api/paused");
        paused["paused"].as_array()?.iter().find_map(|p| {
            let cd = &p["call_data"];
            let is_after = cd.get("pretty_result").is_some();
            let in_run = run.is_none_or(|r| cd["process_key"] == r);
            (cd["method_name"] == function && is_after == after && in_run)
                .then(|| p["id"].as_str().map(str::to_owned))
                .flatten()
        })
    })
}

/// Resumes the demo's default calls (add, greet, summarize, describe) before and after, up to
/// the pause before `stop` (of run `run`); its id.
fn run_up_to(c: &Client, run: Option<&str>, stop: &str) -> String {
    for f in ["add", "greet", "summarize", "describe", "divide"] {
        if f == stop {
            return pause_in(c, run, f, false);
        }
        resume(
            c,
            &pause_in(c, run, f, false),
            json!({"action": "continue"}),
        );
        resume(c, &pause_in(c, run, f, true), json!({"action": "continue"}));
    }
    panic!("{stop} is not a call of the demo");
}

/// The newest program record of `function` (not a replay), in run `run` when given.
fn newest(c: &Client, function: &str, run: Option<&str>) -> Value {
    let page = c.get_ok(&format!(
        "/api/call-records?function={function}&source=program"
    ));
    page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r.get("replay_of").is_none() && run.is_none_or(|k| r["process_key"] == k))
        .cloned()
        .unwrap_or_else(|| panic!("no record of {function}: {page}"))
}

#[test]
fn calls_of_other_functions_are_replayed_through_the_client_registry_also_as_an_mcp_sequence() {
    let s = McpServer::initialized("2025-11-25");
    let c = s.http();
    let mut child = demo_on(s.port, s.home.path(), &[]);
    // The demo is paused before divide(1, 0), its last call: add, greet, summarize and
    // describe were recorded.
    let paused = run_up_to(&c, None, "divide");
    let add = newest(&c, "add", None);
    let run = add["process_key"].as_str().unwrap().to_owned();
    let add_id = add["call_id"].as_str().unwrap();

    // add(2, y=3) replayed from the pause of divide: found in the client's function
    // registry and called through debug_call, recorded as a replay of the source.
    let r = c.post_ok(&format!("/api/call-records/{add_id}/replay"), &json!({}));
    assert_eq!(r["pause_id"], paused.as_str(), "{r}");
    assert!(
        r["expression"]
            .as_str()
            .unwrap()
            .starts_with("__import__(\"cideldill_client\").debug_call(\"add\", "),
        "{r}"
    );
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["result"], "5", "{r}");
    assert_eq!(r["same"], true, "{r}");
    assert_eq!(r["record"]["replay_of"], add_id, "{r}");
    // Edited: a difference in a plain value shows.
    let r = c.post_ok(
        &format!("/api/call-records/{add_id}/replay"),
        &json!({"args": [4]}),
    );
    assert_eq!(r["result"], "7", "{r}");
    let parts: Vec<&str> = r["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["part"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["args[0]", "result"], "{r}");

    // The run as a sequence over MCP: add and greet replay the same through the pause of
    // divide; summarize takes instances (a dataclass), which have no literal: it stops there.
    let seq = s.call_ok("breakpoint_replay_run", json!({"run_id": run}));
    let tool = TOOLS
        .iter()
        .find(|t| t.name == "breakpoint_replay_run")
        .unwrap();
    let errors = schema::validate(&(tool.output_schema)(), &seq);
    assert!(errors.is_empty(), "{seq} {errors:?}");
    let steps = seq["replayed"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{seq}");
    assert!(steps.iter().all(|st| st["same"] == true), "{seq}");
    assert_eq!(steps[0]["function"], "add", "{seq}");
    assert_eq!(steps[1]["function"], "greet", "{seq}");
    assert_eq!(seq["completed"], false, "{seq}");
    assert_eq!(seq["stopped"]["error"], "invalid_args", "{seq}");
    let summarize = newest(&c, "summarize", None);
    assert_eq!(seq["stopped"]["source_id"], summarize["call_id"], "{seq}");
    // The web UI's report of that sequence.
    let report = c.get(&format!(
        "/runs/replayed/{}",
        seq["report_id"].as_str().unwrap()
    ));
    assert_eq!(report.status, 200);
    let text = report.text();
    assert!(text.contains("Stopped after 2 calls"), "{text}");
    assert!(text.contains("<code>invalid_args</code>"), "{text}");
    assert_eq!(c.get("/runs/replayed/nope").status, 404);
    // A function the program did not register (a name no wrapped callable has) is refused
    // with what to do.
    let mut body = call_start_body("nowhere", vec![item(&json!(1), 1)], json!({}));
    body["process_pid"] = add["process_pid"].clone();
    body["process_start_time"] = add["process_start_time"].clone();
    let fake = c.post_ok("/api/call/start", &body);
    let fake_id = fake["call_id"].as_str().unwrap().to_owned();
    c.post_ok("/api/call/complete", &{
        let mut b = complete_body(&fake_id, &json!(1));
        b["process_pid"] = add["process_pid"].clone();
        b["process_start_time"] = add["process_start_time"].clone();
        b
    });
    let refused = c.post(&format!("/api/call-records/{fake_id}/replay"), &json!({}));
    assert_eq!(
        refused.status,
        409,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let body = refused.json();
    assert_eq!(body["error"], "replay_not_run", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("function registry"), "{message}");

    // A second program of the same code, paused before greet; the first one ends. A call of
    // the first run is replayed in the second, which recorded calls of add.
    let dir = s.home.path().join("second");
    std::fs::create_dir_all(&dir).unwrap();
    let mut second = demo_on(s.port, &dir, &[]);
    wait_for("the first demo to end", || {
        let paused = c.get_ok("/api/paused");
        for p in paused["paused"].as_array().unwrap() {
            if p["call_data"]["process_key"] == run.as_str() {
                let id = p["id"].as_str().unwrap();
                c.post(
                    &format!("/api/paused/{id}/continue"),
                    &json!({"action": "continue"}),
                );
            }
        }
        child.try_wait().unwrap()
    });
    let paused2 = run_up_to_second(&c, &run, "greet");
    let r = c.post_ok(&format!("/api/call-records/{add_id}/replay"), &json!({}));
    assert_eq!(r["pause_id"], paused2.as_str(), "{r}");
    assert_ne!(r["run_id"], run.as_str(), "{r}");
    assert_eq!(r["same"], true, "{r}");
    finish(&c, &mut second);
}

/// The second demo run (not `first`): resumes add before and after, then its pause before
/// `stop`.
fn run_up_to_second(c: &Client, first: &str, stop: &str) -> String {
    let other = |f: &str, after: bool| {
        wait_for(&format!("a pause of {f} in the second run"), || {
            let paused = c.get_ok("/api/paused");
            paused["paused"].as_array()?.iter().find_map(|p| {
                let cd = &p["call_data"];
                let is_after = cd.get("pretty_result").is_some();
                (cd["method_name"] == f && is_after == after && cd["process_key"] != first)
                    .then(|| p["id"].as_str().map(str::to_owned))
                    .flatten()
            })
        })
    };
    resume(c, &other("add", false), json!({"action": "continue"}));
    resume(c, &other("add", true), json!({"action": "continue"}));
    other(stop, false)
}
