//! Runs (what one process recorded): the listing, labels and notes, through REST and MCP, and
//! across a restart with a database file; breakpoints added in bulk.

use std::path::Path;

use serde_json::json;

use crate::mcp_support::McpServer;
use crate::support::{call_start_body, complete_body, item, Client, Server, TempDir};

/// Records one call of `method` by the process `pid` started at `started`, at `at`; `raise`
/// makes it an exception. Answers the run id (the process key).
fn call(c: &Client, pid: i64, started: f64, method: &str, at: f64, raise: bool) -> String {
    let mut body = call_start_body(method, vec![item(&json!(1), 2)], json!({}));
    body["process_pid"] = json!(pid);
    body["process_start_time"] = json!(started);
    body["call_site"]["timestamp"] = json!(at);
    let start = c.post_ok("/api/call/start", &body);
    assert_eq!(start["action"], "continue", "{start}");
    let id = start["call_id"].as_str().unwrap().to_owned();
    let mut done = complete_body(&id, &json!(2));
    done["process_pid"] = json!(pid);
    done["process_start_time"] = json!(started);
    done["timestamp"] = json!(at + 0.5);
    if raise {
        done["status"] = json!("exception");
        done["exception"] = json!("ValueError('x')");
        let e = item(&json!("ValueError('x')"), 11);
        done["exception_cid"] = e["cid"].clone();
        done["exception_data"] = e["data"].clone();
    }
    c.post_ok("/api/call/complete", &done);
    let runs = c.get_ok("/api/runs");
    runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pid"] == pid)
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .expect("the run is listed")
}

fn url(run: &str) -> String {
    run.replace('+', "%2B")
}

/// Two runs: an older one of pid 100 (two calls, one raising) and a newer one of pid 200.
fn two_runs(c: &Client) -> (String, String) {
    let old = call(c, 100, 1000.0, "load", 1001.0, false);
    call(c, 100, 1000.0, "parse", 1002.0, true);
    let new = call(c, 200, 2000.0, "load", 2001.0, false);
    (old, new)
}

#[test]
fn runs_are_listed_newest_first_with_counts_and_pages() {
    let s = Server::start(&[]);
    let c = s.client();
    let (old, new) = two_runs(&c);
    for (id, method) in [("e1", "tick"), ("e2", "with_debug.register")] {
        c.post_ok(
            "/api/call/event",
            &json!({"method_name": method, "status": "ok", "timestamp": 1001.5,
                    "process_pid": 100, "process_start_time": 1000.0,
                    "event_id": id, "call_site": {"stack_trace": []}}),
        );
    }
    let all = c.get_ok("/api/runs");
    assert_eq!(all["total"], 2, "{all}");
    let runs = all["runs"].as_array().unwrap();
    assert_eq!(runs[0]["run_id"], new.as_str());
    assert_eq!(runs[1]["run_id"], old.as_str());
    let r = &runs[1];
    assert_eq!(r["pid"], 100);
    assert_eq!(r["program"], "app.py");
    assert_eq!(r["calls"], 2);
    assert_eq!(r["events"], 1);
    assert_eq!(r["client_events"], 1);
    assert_eq!(r["exceptions"], 1, "{r}");
    assert_eq!(r["start"], 1001.0);
    assert_eq!(r["end"], 1002.5);
    assert_eq!(r["label"], "");
    assert_eq!(r["notes"], "");
    let page = c.get_ok("/api/runs?offset=1&limit=1");
    assert_eq!(page["runs"].as_array().unwrap().len(), 1);
    assert_eq!(page["runs"][0]["run_id"], old.as_str());
    assert_eq!(
        (page["offset"].clone(), page["limit"].clone()),
        (json!(1), json!(1))
    );
    let e = c.get("/api/runs?limit=1001");
    assert_eq!(e.status, 400);
    assert_eq!(e.json()["error"], "invalid_limit");
}

#[test]
fn labels_and_notes_are_set_cleared_and_checked() {
    let s = Server::start(&[]);
    let c = s.client();
    let (old, _) = two_runs(&c);
    let path = |what: &str| format!("/api/runs/{}/{what}", url(&old));
    assert_eq!(
        c.post_ok(&path("label"), &json!({"label": "  baseline "})),
        json!({"status": "ok", "run_id": old, "label": "baseline", "notes": ""})
    );
    let set = c.post_ok(&path("notes"), &json!({"notes": "before the fix\nslow"}));
    assert_eq!(set["label"], "baseline");
    assert_eq!(set["notes"], "before the fix\nslow");
    let listed = c.get_ok("/api/runs");
    assert_eq!(listed["runs"][1]["label"], "baseline");
    assert_eq!(listed["runs"][1]["notes"], "before the fix\nslow");
    assert_eq!(listed["runs"][0]["label"], "");
    // Clearing.
    let cleared = c.post_ok(&path("label"), &json!({"label": ""}));
    assert_eq!(cleared["label"], "");
    assert_eq!(cleared["notes"], "before the fix\nslow");
    // Bad bodies and unknown runs.
    let e = c.post_err(&path("label"), &json!({"name": "x"}), 400);
    assert_eq!(
        (e["error"].as_str(), e["field"].as_str()),
        (Some("missing_label"), Some("label"))
    );
    let e = c.post_err(&path("label"), &json!({"label": 3}), 400);
    assert_eq!(e["error"], "missing_label");
    let e = c.post_err(&path("label"), &json!({"label": "a\nb"}), 400);
    assert_eq!(e["error"], "invalid_label", "{e}");
    let e = c.post_err(&path("label"), &json!({"label": "x".repeat(201)}), 400);
    assert_eq!(e["error"], "invalid_label");
    assert!(e["message"].as_str().unwrap().contains("200"), "{e}");
    let e = c.post_err(&path("notes"), &json!({"notes": "x".repeat(10_001)}), 400);
    assert_eq!(
        (e["error"].as_str(), e["field"].as_str()),
        (Some("invalid_notes"), Some("notes"))
    );
    let e = c.post_err("/api/runs/1.0%2B999/label", &json!({"label": "x"}), 404);
    assert_eq!(e["error"], "run_not_found");
    let e = c.post_err("/api/runs/1.0%2B999/notes", &json!({"notes": "x"}), 404);
    assert_eq!(e["run_id"], "1.0+999");
}

fn db_arg(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn labels_and_notes_survive_a_restart_with_a_database() {
    let home = TempDir::new("runs-db");
    let db = home.path().join("runs.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    let (old, new) = two_runs(&c);
    c.post_ok(
        &format!("/api/runs/{}/label", url(&old)),
        &json!({"label": "first"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/label", url(&old)),
        &json!({"label": "baseline"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/notes", url(&old)),
        &json!({"notes": "kept"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/label", url(&new)),
        &json!({"label": "gone"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/label", url(&new)),
        &json!({"label": ""}),
    );
    // Acknowledged means on disk: a kill -9 loses nothing.
    server.signal_and_wait("-KILL");
    let server = Server::start_in(home.path(), &args);
    let runs = server.client().get_ok("/api/runs");
    assert_eq!(runs["runs"][1]["run_id"], old.as_str());
    assert_eq!(runs["runs"][1]["label"], "baseline");
    assert_eq!(runs["runs"][1]["notes"], "kept");
    assert_eq!(runs["runs"][0]["label"], "", "{runs}");
    assert_eq!(runs["runs"][0]["notes"], "");
    // The breakpoint settings are untouched by the run records.
    let bps = server.client().get_ok("/api/breakpoints");
    assert_eq!(bps["pausing"], true);
}

#[test]
fn mcp_lists_and_labels_runs() {
    let s = McpServer::initialized("2025-11-25");
    let c = s.http();
    let (old, new) = two_runs(&c);
    let listed = s.call_ok("breakpoint_list_runs", json!({"limit": 1}));
    assert_eq!(listed["total"], 2);
    assert_eq!(listed["runs"][0]["run_id"], new.as_str());
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);
    let listed = s.call_ok("breakpoint_list_runs", json!({"offset": 1}));
    assert_eq!(listed["runs"][0]["exceptions"], 1);
    let set = s.call_ok(
        "breakpoint_label_run",
        json!({"run_id": old, "label": "baseline", "notes": "n"}),
    );
    assert_eq!(
        set,
        json!({"status": "ok", "run_id": old, "label": "baseline", "notes": "n"})
    );
    let set = s.call_ok("breakpoint_label_run", json!({"run_id": old, "notes": ""}));
    assert_eq!(
        (set["label"].as_str(), set["notes"].as_str()),
        (Some("baseline"), Some(""))
    );
    assert_eq!(c.get_ok("/api/runs")["runs"][1]["label"], "baseline");
    let e = s.call_err(
        "breakpoint_label_run",
        json!({"run_id": "1+2", "label": "x"}),
    );
    assert!(e.to_string().contains("run_not_found"), "{e}");
    let e = s.call_err("breakpoint_label_run", json!({"run_id": old}));
    assert!(e.to_string().contains("missing_parameter"), "{e}");
    let e = s.call_err(
        "breakpoint_label_run",
        json!({"run_id": old, "label": "x".repeat(201)}),
    );
    assert!(e.to_string().contains("invalid_label"), "{e}");
}

#[test]
fn breakpoints_are_added_in_bulk_over_rest_each_answered_in_order() {
    let s = Server::start(&[]);
    let c = s.client();
    let r = c.request(
        "POST",
        "/api/breakpoints",
        Some(
            json!([{"function_name": "a"},
                   {"function_name": "b", "behavior": "go", "condition": "args[0] > 1"},
                   {"function_name": "c", "condition": "args[0] >"},
                   {"function_name": ""},
                   {"function_name": "e", "hit_condition": "%2"}])
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let out = r.json();
    let out = out.as_array().unwrap();
    assert_eq!(out.len(), 5);
    assert_eq!(out[0], json!({"status": "ok", "function_name": "a"}));
    assert_eq!(out[1]["status"], "ok");
    assert_eq!(out[1]["condition"], "args[0] > 1");
    assert_eq!(out[2]["index"], 2);
    assert!(out[2]["error"].is_string(), "{}", out[2]);
    assert_eq!(out[3]["index"], 3);
    assert!(out[3]["error"].is_string(), "{}", out[3]);
    assert_eq!(out[4]["hit_condition"], "%2");
    let listed = c.get_ok("/api/breakpoints");
    assert_eq!(listed["breakpoints"], json!(["a", "b", "e"]));
    assert_eq!(listed["breakpoint_behaviors"]["b"], "go");
    // The single form is unchanged.
    assert_eq!(
        c.post_ok("/api/breakpoints", &json!({"function_name": "f"})),
        json!({"status": "ok", "function_name": "f"})
    );
    // An empty or oversized list, and a broken one, are refused whole.
    let e = c.request("POST", "/api/breakpoints", Some(b"[]"));
    assert_eq!(e.status, 400);
    assert_eq!(e.json()["error"], "invalid_breakpoints");
    let many: Vec<_> = (0..1001)
        .map(|i| json!({"function_name": format!("g{i}")}))
        .collect();
    let e = c.request(
        "POST",
        "/api/breakpoints",
        Some(json!(many).to_string().as_bytes()),
    );
    assert_eq!(e.status, 400);
    assert_eq!(e.json()["field"], "breakpoints");
    let e = c.request(
        "POST",
        "/api/breakpoints",
        Some(b"[{\"function_name\": \"x\"}, 2]"),
    );
    assert_eq!(e.status, 400);
    let body = e.json();
    assert_eq!(
        (body["error"].as_str(), body["index"].as_u64()),
        (Some("invalid_body"), Some(1))
    );
    let e = c.request("POST", "/api/breakpoints", Some(b"[{\"function_name\": "));
    assert_eq!(e.status, 400);
    assert_eq!(e.json()["error"], "invalid_json");
    assert_eq!(
        c.get_ok("/api/breakpoints")["breakpoints"],
        json!(["a", "b", "e", "f"])
    );
}

#[test]
fn breakpoints_are_added_in_bulk_over_mcp() {
    let s = McpServer::initialized("2025-11-25");
    let out = s.call_ok(
        "breakpoint_add",
        json!({"breakpoints": [{"function_name": "a", "behavior": "go"},
                               {"function_name": "b", "condition": "args[0] >"},
                               {"function_name": "c", "log_message": "x={args[0]}"}]}),
    );
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["function_name"], "a");
    assert_eq!(results[1]["index"], 1);
    assert!(results[1]["error"].is_string());
    assert_eq!(results[2]["log_message"], "x={args[0]}");
    let listed = s.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(listed["breakpoints"], json!(["a", "c"]));
    assert_eq!(listed["behaviors"]["a"], "go");
    // The single form still answers as before; neither form is an error.
    let one = s.call_ok("breakpoint_add", json!({"function_name": "d"}));
    assert_eq!(one["function_name"], "d");
    let e = s.call_err("breakpoint_add", json!({}));
    assert!(e.to_string().contains("function_name"), "{e}");
    let e = s.call_err("breakpoint_add", json!({"breakpoints": []}));
    assert!(e.to_string().contains("breakpoints"), "{e}");
}

#[test]
fn the_runs_page_lists_runs_with_their_forms_and_the_call_tree_shows_label_and_notes() {
    let s = Server::start(&[]);
    let c = s.client();
    let empty = c.get("/runs");
    assert_eq!(empty.status, 200);
    assert!(empty.text().contains("No runs recorded yet"));
    let (old, new) = two_runs(&c);
    c.post_ok(
        &format!("/api/runs/{}/label", url(&old)),
        &json!({"label": "<b>baseline</b>"}),
    );
    c.post_ok(
        &format!("/api/runs/{}/notes", url(&old)),
        &json!({"notes": "before & after"}),
    );
    let page = c.get("/runs").text();
    assert!(page.contains("<a href=\"/runs\""), "in the navigation");
    let at_new = page
        .find(&format!("data-run=\"{new}\""))
        .expect("newer run");
    let at_old = page
        .find(&format!("data-run=\"{old}\""))
        .expect("older run");
    assert!(at_new < at_old, "newest first");
    let enc = url(&old);
    assert!(
        page.contains(&format!("data-api=\"/api/runs/{enc}/label\"")),
        "{page}"
    );
    assert!(page.contains(&format!("data-api=\"/api/runs/{enc}/notes\"")));
    assert!(page.contains(&format!("href=\"/call-tree/{enc}\"")));
    assert!(
        page.contains("value=\"&lt;b&gt;baseline&lt;/b&gt;\""),
        "escaped"
    );
    assert!(page.contains(">before &amp; after</textarea>"));
    assert!(!page.contains("<b>baseline"));
    // The newer run links to its comparison with the run of the same program before it; the
    // oldest has none.
    let compare = format!("href=\"/runs/compare?a={}&amp;b={}\"", url(&old), url(&new));
    let at_link = page.find(&compare).expect(&page);
    assert!(
        at_new < at_link && at_link < at_old,
        "in the newer run's row"
    );
    assert_eq!(page.matches("class=\"run-compare\"").count(), 1);
    let tree = c.get(&format!("/call-tree/{enc}")).text();
    assert!(tree.contains("<span class=\"badge run-label\">&lt;b&gt;baseline&lt;/b&gt;</span>"));
    assert!(tree.contains("<p class=\"run-notes\">before &amp; after</p>"));
    let other = c.get(&format!("/call-tree/{}", url(&new))).text();
    assert!(!other.contains("run-notes"));
}

/// Records one call of pid 100 and answers its call id.
fn one_call_id(c: &Client, at: f64) -> String {
    call(c, 100, 1000.0, "load", at, false);
    c.get_ok("/api/call-records?limit=1")["calls"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_note_on_a_call_record_is_shown_searched_exported_and_checked() {
    let s = Server::start(&[]);
    let c = s.client();
    let id = one_call_id(&c, 1001.0);
    let other = one_call_id(&c, 1002.0);
    let note = format!("/api/call-records/{id}/note");
    assert_eq!(
        c.post_ok(&note, &json!({"note": " the slow <one> "})),
        json!({"status": "ok", "call_id": id, "note": "the slow <one>"})
    );
    let page = c.get_ok("/api/call-records");
    let calls = page["calls"].as_array().unwrap();
    let noted = calls.iter().find(|r| r["call_id"] == id.as_str()).unwrap();
    assert_eq!(noted["note"], "the slow <one>");
    let plain = calls
        .iter()
        .find(|r| r["call_id"] == other.as_str())
        .unwrap();
    assert!(plain.get("note").is_none(), "{plain}");
    // Searchable.
    let found = c.get_ok("/api/call-records?search=SLOW%20%3Cone");
    assert_eq!(found["calls"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["calls"][0]["call_id"], id.as_str());
    // Exported.
    let lines = c.get("/api/call-records?format=jsonl").text();
    let line = lines.lines().find(|l| l.contains(&id)).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(line).unwrap()["note"],
        "the slow <one>"
    );
    // The Calls page and the call tree's details show it, escaped.
    let calls_page = c.get("/calls").text();
    assert!(
        calls_page.contains("<span class=\"label\">Note</span> the slow &lt;one&gt;</p>"),
        "{calls_page}"
    );
    let runs = c.get_ok("/api/runs");
    let run = url(runs["runs"][0]["run_id"].as_str().unwrap());
    let tree = c.get(&format!("/call-tree/{run}?selected={id}")).text();
    assert!(
        tree.contains(&format!("data-api=\"/api/call-records/{id}/note\"")),
        "{tree}"
    );
    assert!(tree.contains(">the slow &lt;one&gt;</textarea>"));
    // Removed with "".
    c.post_ok(&note, &json!({"note": ""}));
    assert!(c.get_ok("/api/call-records")["calls"][0]
        .get("note")
        .is_none());
    // Errors.
    let e = c.post_err(&note, &json!({"text": "x"}), 400);
    assert_eq!(
        (e["error"].as_str(), e["field"].as_str()),
        (Some("missing_note"), Some("note"))
    );
    let e = c.post_err(&note, &json!({"note": "x".repeat(10_001)}), 400);
    assert_eq!(e["error"], "invalid_note");
    let e = c.post_err("/api/call-records/nope/note", &json!({"note": "x"}), 404);
    assert_eq!(e["error"], "record_not_found");
}

#[test]
fn notes_on_records_survive_a_restart_with_a_database() {
    let home = TempDir::new("notes-db");
    let db = home.path().join("notes.db");
    let args = ["--db", &db_arg(&db)];
    let mut server = Server::start_in(home.path(), &args);
    let c = server.client();
    let id = one_call_id(&c, 1001.0);
    let other = one_call_id(&c, 1002.0);
    c.post_ok(
        &format!("/api/call-records/{id}/note"),
        &json!({"note": "first"}),
    );
    c.post_ok(
        &format!("/api/call-records/{id}/note"),
        &json!({"note": "kept"}),
    );
    c.post_ok(
        &format!("/api/call-records/{other}/note"),
        &json!({"note": "gone"}),
    );
    c.post_ok(
        &format!("/api/call-records/{other}/note"),
        &json!({"note": ""}),
    );
    server.signal_and_wait("-KILL");
    let server = Server::start_in(home.path(), &args);
    let page = server.client().get_ok("/api/call-records");
    let calls = page["calls"].as_array().unwrap();
    let find = |want: &str| calls.iter().find(|r| r["call_id"] == want).unwrap().clone();
    assert_eq!(find(&id)["note"], "kept");
    assert!(find(&other).get("note").is_none());
    let found = server.client().get_ok("/api/call-records?search=kept");
    assert_eq!(found["calls"][0]["call_id"], id.as_str());
}
