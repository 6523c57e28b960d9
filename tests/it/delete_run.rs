//! Deleting a run (`DELETE /api/runs/<run_id>`, `breakpoint_delete_run`): its records, history
//! entries, label and notes and the objects only it used go; another run and the objects it
//! shares stay; with a database file, across a kill -9 and a restart.

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{call_start_body, complete_body, item, pause_id, Client, Server, TempDir};

/// Records one completed call `method(arg)` of the process `pid` (started at `started`),
/// returning `result`. Answers the run id.
fn call(c: &Client, pid: i64, started: f64, method: &str, arg: &Value, result: &Value) -> String {
    let mut body = call_start_body(method, vec![item(arg, 2)], json!({}));
    body["process_pid"] = json!(pid);
    body["process_start_time"] = json!(started);
    body["call_site"]["timestamp"] = json!(started + 1.0);
    let start = c.post_ok("/api/call/start", &body);
    assert_eq!(start["action"], "continue", "{start}");
    let id = start["call_id"].as_str().unwrap().to_owned();
    let mut done = complete_body(&id, result);
    done["process_pid"] = json!(pid);
    done["process_start_time"] = json!(started);
    c.post_ok("/api/call/complete", &done);
    format!("{started:.6}+{pid}")
}

fn url(run: &str) -> String {
    run.replace('+', "%2B")
}

fn cid(v: &Value) -> String {
    item(v, 0)["cid"].as_str().unwrap().to_owned()
}

/// Two runs: pid 100 calls `load("only-old")` and `load("shared")`, both returning 2; pid 200
/// calls `load("shared")` returning 3. Answers (old, new).
fn two_runs(c: &Client) -> (String, String) {
    // A breakpoint that lets calls run: each completed call gets a history entry.
    c.post_ok("/api/breakpoints", &json!({"function_name": "load"}));
    c.post_ok("/api/breakpoints/load/behavior", &json!({"behavior": "go"}));
    c.post_ok(
        "/api/breakpoints/load/after_behavior",
        &json!({"behavior": "go"}),
    );
    let old = call(c, 100, 1000.0, "load", &json!("only-old"), &json!(2));
    call(c, 100, 1000.0, "load", &json!("shared"), &json!(2));
    let new = call(c, 200, 2000.0, "load", &json!("shared"), &json!(3));
    (old, new)
}

fn run_ids(c: &Client) -> Vec<String> {
    c.get_ok("/api/runs")["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect()
}

/// What a deleted run leaves: nothing of it in the runs, records, search, export and objects;
/// the other run whole.
fn only_the_new_run_is_left(c: &Client, old: &str, new: &str) {
    assert_eq!(run_ids(c), vec![new.to_owned()]);
    let records = c.get_ok("/api/call-records?client_events=show");
    assert_eq!(records["total_count"], 1, "{records}");
    assert_eq!(records["calls"][0]["process_pid"], 200, "{records}");
    let of_old = c.get_ok(&format!("/api/call-records?process={}", url(old)));
    assert_eq!(of_old["total_count"], 0, "{of_old}");
    let found = c.get_ok("/api/call-records?search=only-old");
    assert_eq!(found["total_count"], 0, "{found}");
    let export = c.get("/api/call-records?format=jsonl");
    assert_eq!(export.status, 200);
    let lines: Vec<Value> = export
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["process_pid"], 200);
    let history = c.get_ok("/api/breakpoints/load/history");
    let history = history["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0]["call_data"]["process_pid"], 200, "{history:?}");
    // The object only the deleted run used is gone; the shared ones stay.
    let e = c.get(&format!("/api/objects/{}", cid(&json!("only-old"))));
    assert_eq!(e.status, 404, "{}", e.text());
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!("only-old"))))
            .json()["error"],
        "cid_not_found"
    );
    for shared in [json!("shared"), json!("<function load>"), json!(3)] {
        let r = c.get(&format!("/api/objects/{}", cid(&shared)));
        assert_eq!(r.status, 200, "{shared}: {}", r.text());
    }
    // The result 2 only the old run returned is gone too.
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!(2)))).status,
        404
    );
    let page = c.get(&format!("/object/{}", cid(&json!("only-old"))));
    assert_eq!(page.status, 404, "the object page of a deleted object");
    let compared = c.get(&format!("/api/runs/compare?a={}&b={}", url(old), url(new)));
    assert_eq!(compared.status, 404, "{}", compared.text());
    assert_eq!(compared.json()["error"], "run_not_found");
    let tree = c.get(&format!("/call-tree/{}", url(old)));
    assert_eq!(tree.status, 404, "the deleted run's call tree");
    assert_eq!(c.get(&format!("/call-tree/{}", url(new))).status, 200);
}

#[test]
fn a_deleted_run_is_gone_from_every_listing_with_the_objects_only_it_used() {
    let s = Server::start(&[]);
    let c = s.client();
    let (old, new) = two_runs(&c);
    c.post_ok(
        &format!("/api/runs/{}/label", url(&old)),
        &json!({"label": "old"}),
    );
    let r = c.delete(&format!("/api/runs/{}", url(&old)));
    assert_eq!(r.status, 200, "{}", r.text());
    let done = r.json();
    assert_eq!(done["status"], "ok");
    assert_eq!(done["run_id"], old.as_str());
    assert_eq!(done["records"], 2, "{done}");
    assert_eq!(
        done["objects"], 2,
        "the argument only-old and the result 2: {done}"
    );
    assert!(done["object_bytes"].as_u64().unwrap() > 0, "{done}");
    assert_eq!(done["had_label_or_notes"], true);
    only_the_new_run_is_left(&c, &old, &new);
    // Again: an unknown run.
    let e = c.delete(&format!("/api/runs/{}", url(&old)));
    assert_eq!(e.status, 404);
    assert_eq!(e.json()["error"], "run_not_found");
    assert_eq!(e.json()["run_id"], old.as_str());
    // The program goes on calling: a fresh run with the same id, without the old label; the
    // object sent by CID alone again is asked for again (the client then resends it).
    call(&c, 100, 1000.0, "load", &json!("only-old"), &json!(2));
    let runs = c.get_ok("/api/runs");
    let again = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == old.as_str())
        .cloned()
        .expect("the run starts again");
    assert_eq!(
        (again["calls"].clone(), again["label"].clone()),
        (json!(1), json!(""))
    );
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!("only-old"))))
            .status,
        200
    );
}

#[test]
fn a_run_with_a_paused_call_is_not_deleted() {
    let s = Server::start(&[]);
    let c = s.client();
    let (old, _) = two_runs(&c);
    c.post_ok("/api/breakpoints", &json!({"function_name": "hold"}));
    let mut body = call_start_body("hold", vec![item(&json!(1), 2)], json!({}));
    body["process_pid"] = json!(100);
    body["process_start_time"] = json!(1000.0);
    let action = c.post_ok("/api/call/start", &body);
    let pause = pause_id(&action);
    let e = c.delete(&format!("/api/runs/{}", url(&old)));
    assert_eq!(e.status, 409, "{}", e.text());
    let e = e.json();
    assert_eq!(e["error"], "run_paused");
    assert_eq!(e["pause_id"], pause.as_str());
    assert!(e["message"].as_str().unwrap().contains(&pause), "{e}");
    assert_eq!(run_ids(&c).len(), 2, "nothing deleted");
    c.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
    let r = c.delete(&format!("/api/runs/{}", url(&old)));
    assert_eq!(r.status, 200, "{}", r.text());
    // The call that was paused (in flight, started before the delete) still has its objects.
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!(1)))).status,
        200
    );
}

#[test]
fn a_deletion_survives_a_kill_and_a_restart_with_a_database() {
    let home = TempDir::new("delete-run-db");
    let db = home.path().join("runs.db");
    let db = db.to_str().unwrap().to_owned();
    let args = ["--db", db.as_str()];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    let (old, new) = two_runs(&c);
    c.post_ok(
        &format!("/api/runs/{}/notes", url(&old)),
        &json!({"notes": "to go"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/label", url(&new)),
        &json!({"label": "kept"}),
    );
    let done = c.delete(&format!("/api/runs/{}", url(&old))).json();
    assert_eq!(
        (done["records"].clone(), done["objects"].clone()),
        (json!(2), json!(2)),
        "{done}"
    );
    only_the_new_run_is_left(&c, &old, &new);
    // Acknowledged means on disk.
    server.signal_and_wait("-KILL");
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    only_the_new_run_is_left(&c, &old, &new);
    let runs = c.get_ok("/api/runs");
    assert_eq!(runs["runs"][0]["label"], "kept");
    // The same process records again after the delete: that part is a run again after a
    // restart (a tombstone deletes only what was recorded before it).
    call(&c, 100, 1000.0, "load", &json!("after"), &json!(5));
    server.signal_and_wait("-KILL");
    let server = Server::start_in(home.path(), &args);
    let c = server.client();
    let runs = c.get_ok("/api/runs");
    let back = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == old.as_str())
        .cloned()
        .expect("recorded after the delete");
    assert_eq!(
        (back["calls"].clone(), back["notes"].clone()),
        (json!(1), json!(""))
    );
    assert_eq!(c.get_ok("/api/call-records")["total_count"], 2);
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!("only-old"))))
            .status,
        404
    );
    assert_eq!(
        c.get(&format!("/api/objects/{}", cid(&json!("after"))))
            .status,
        200
    );
}

#[test]
fn mcp_deletes_a_run_and_marks_the_tool_destructive() {
    let s = McpServer::initialized("2025-11-25");
    let c = s.http();
    let (old, new) = two_runs(&c);
    let listed = s.request("tools/list", json!({}));
    let tool = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "breakpoint_delete_run")
        .cloned()
        .expect("listed");
    assert_eq!(tool["annotations"]["destructiveHint"], true, "{tool}");
    assert_eq!(tool["annotations"]["readOnlyHint"], false, "{tool}");
    let done = s.call_ok("breakpoint_delete_run", json!({"run_id": old}));
    assert_eq!(done["records"], 2, "{done}");
    assert_eq!(done["objects"], 2, "{done}");
    only_the_new_run_is_left(&c, &old, &new);
    let e = s.call_err("breakpoint_delete_run", json!({"run_id": old}));
    assert!(e.to_string().contains("run_not_found"), "{e}");
    let e = s.call_err("breakpoint_delete_run", json!({}));
    assert!(e.to_string().contains("run_id"), "{e}");
}

#[test]
fn the_runs_page_is_live_keyed_by_run_and_offers_a_confirmed_delete() {
    let s = Server::start(&[]);
    let c = s.client();
    let empty = c.get("/runs").text();
    assert!(
        empty.contains("id=\"run-list\" data-live data-keyed data-carry"),
        "{empty}"
    );
    assert!(
        empty.contains(
            "data-events=\"execution_paused execution_resumed call_completed run_deleted run_changed\""
        ),
        "the page refreshes on new records, deleted runs and changed labels or notes"
    );
    assert!(empty.contains("<tbody data-key=\"empty\">"));
    let (old, _) = two_runs(&c);
    let page = c.get("/runs").text();
    assert!(
        page.contains(&format!("<tbody data-key=\"run:{old}\">")),
        "{page}"
    );
    let at = page.find(&format!("data-run=\"{old}\"")).unwrap();
    let row = &page[at..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("<details class=\"run-delete\"><summary>Delete…</summary>"),
        "{row}"
    );
    assert!(
        row.contains(&format!(
            "<form data-api=\"/api/runs/{}\" data-method=\"DELETE\">",
            url(&old)
        )),
        "{row}"
    );
    assert!(
        row.contains(&format!("Really delete run {old} (2 calls)?")),
        "{row}"
    );
}

#[test]
fn without_a_database_a_deleted_run_frees_its_memory() {
    let s = Server::start(&[]);
    let c = s.client();
    call(&c, 200, 2000.0, "keep", &json!("small"), &json!(1));
    let before = crate::support::proc_status_kib(s.pid(), "VmRSS");
    // 12 arguments of 1 MiB each, only this run's.
    for n in 0..12 {
        let big = json!(format!("{n:02}{}", "x".repeat(1 << 20)));
        call(&c, 100, 1000.0, "load", &big, &json!(n));
    }
    let status = c.get_ok("/api/status");
    assert_eq!(status["calls_in_memory"], 13, "{status}");
    let objects = status["stored_objects"].as_u64().unwrap();
    let full = crate::support::proc_status_kib(s.pid(), "VmRSS");
    assert!(
        full > before + 10 * 1024,
        "the run holds its objects: {before} → {full} KiB"
    );
    let done = c.delete("/api/runs/1000.000000%2B100").json();
    assert_eq!(done["records"], 12, "{done}");
    assert!(done["object_bytes"].as_u64().unwrap() > 12 << 20, "{done}");
    let status = c.get_ok("/api/status");
    assert_eq!(status["calls_in_memory"], 1, "{status}");
    assert_eq!(
        status["stored_objects"].as_u64().unwrap(),
        objects - done["objects"].as_u64().unwrap()
    );
    let after = crate::support::proc_status_kib(s.pid(), "VmRSS");
    assert!(
        after + 10 * 1024 < full,
        "the memory is given back: {before} → {full} → {after} KiB"
    );
}

#[test]
fn an_object_a_repl_answer_names_stays() {
    let s = Server::start(&[]);
    let c = s.client();
    let (old, _) = two_runs(&c);
    // A paused call of the other run, whose REPL answer is stored as the object "only-old".
    c.post_ok("/api/breakpoints", &json!({"function_name": "hold"}));
    let mut body = call_start_body("hold", vec![item(&json!(1), 2)], json!({}));
    body["process_pid"] = json!(200);
    body["process_start_time"] = json!(2000.0);
    let pause = pause_id(&c.post_ok("/api/call/start", &body));
    let session = c.post_ok("/api/repl/start", &json!({"pause_id": pause}))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let program = {
        let c = s.client();
        let pause = pause.clone();
        std::thread::spawn(move || {
            let req = crate::support::wait_for("an eval", || {
                let r = c.get_ok(&format!("/api/poll-repl/{pause}"));
                r["eval_id"].is_string().then_some(r)
            });
            let stored = item(&json!("only-old"), 5);
            c.post_ok(
                "/api/call/repl-result",
                &json!({"eval_id": req["eval_id"], "pause_id": req["pause_id"],
                        "session_id": req["session_id"], "result": "'only-old'", "stdout": "",
                        "error": null, "result_cid": stored["cid"], "result_data": stored["data"]}),
            );
        })
    };
    let answer = c.post_ok(&format!("/api/repl/{session}/eval"), &json!({"expr": "x"}));
    program.join().unwrap();
    assert_eq!(
        answer["result_cid"],
        cid(&json!("only-old")).as_str(),
        "{answer}"
    );
    c.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
    let done = c.delete(&format!("/api/runs/{}", url(&old))).json();
    assert_eq!(done["objects"], 1, "only the result 2: {done}");
    let r = c.get(&format!("/api/objects/{}", cid(&json!("only-old"))));
    assert_eq!(r.status, 200, "the transcript's object stays: {}", r.text());
}
