//! Calls belong to their caller: the attacks of an outside probe on another program's paused
//! call, against the real binary. Call ids were server time and a counter, and
//! `/api/call/complete` checked neither the process nor the origin: a few hundred guesses
//! completed a real program's paused call (its before-pause vanished, its client polled
//! `waiting` forever, a forged record appeared). A page could also poll another pause, take its
//! REPL requests and answer them.
//!
//! Every test here failed on the server before the fix (time-and-counter call ids, no owner
//! checks, no `origin` field) and passes after it: call ids carry 128 random bits, and
//! completions, polls and REPL results are accepted only from the process and origin that
//! started the call (403 `not_owner`, nothing changes).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    call_start_body, complete_body, http, item, pause_id, poll_until, Client, Resp, Server,
};

/// A page the tests grant with `--allow-origin`, so that only the owner checks refuse it.
const PAGE: &str = "http://localhost:3999";

fn send(c: &Client, method: &str, path: &str, origin: Option<&str>, body: Option<&Value>) -> Resp {
    let text = body.map(Value::to_string);
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    http(c.port, method, path, &headers, text.as_deref())
}

/// A server where every call of `add` pauses before it runs, with `PAGE` allowed.
fn server() -> (Server, Client) {
    let s = Server::start(&["--memory", "--allow-origin", PAGE]);
    let c = s.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    (s, c)
}

/// The victim program (no Origin, pid 16759) starts a call that pauses: (call id, pause id).
fn victim_pauses(c: &Client) -> (String, String) {
    let body = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    let a = c.post_ok("/api/call/start", &body);
    (a["call_id"].as_str().unwrap().to_owned(), pause_id(&a))
}

fn records(c: &Client) -> Vec<Value> {
    c.get_ok("/api/call-records")["calls"]
        .as_array()
        .unwrap()
        .clone()
}

/// The victim's call is intact: still paused before, nothing recorded; its own completion
/// then goes through.
fn victim_intact(c: &Client, call_id: &str, pause: &str) {
    let paused = c.get_ok("/api/paused")["paused"].clone();
    assert!(
        paused.as_array().unwrap().iter().any(|p| p["id"] == pause),
        "the victim's before-pause vanished: {paused}"
    );
    assert_eq!(records(c), Vec::<Value>::new(), "a forged record appeared");
    c.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
    let poll = c.get_ok(&format!("/api/poll/{pause}"));
    assert_eq!(poll["status"], "ready", "{poll}");
    let done = c.post_ok("/api/call/complete", &complete_body(call_id, &json!(2)));
    assert_eq!(
        done["action"], "poll",
        "the victim's own after-pause: {done}"
    );
    let r = records(c);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["process_pid"], 16759);
    assert_eq!(r[0]["origin"], Value::Null);
}

#[test]
fn guessing_call_ids_from_the_time_and_counter_completes_nothing() {
    let (_s, c) = server();
    // The attacker (another process) brackets the victim's start with calls of its own: their
    // ids give the counter and a time window. In the old format the victim's id was one of a
    // few hundred strings in that window.
    let mut attacker = call_start_body("other", vec![], json!({}));
    attacker["process_pid"] = json!(666);
    let before = c.post_ok("/api/call/start", &attacker)["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (call_id, pause) = victim_pauses(&c);
    let after = c.post_ok("/api/call/start", &attacker)["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let parse = |id: &str| -> (u64, u64, String) {
        let mut parts = id.splitn(3, '-');
        let at: f64 = parts.next().unwrap().parse().unwrap();
        let n: u64 = parts.next().unwrap().parse().unwrap();
        (
            (at * 1e6).round() as u64,
            n,
            parts.next().unwrap_or("").to_owned(),
        )
    };
    let (t0, n0, key0) = parse(&before);
    let (t1, _, _) = parse(&after);
    assert!(t1 >= t0);
    let width = (t1 - t0).min(20_000);
    let mut forged = attacker.clone();
    forged["method_name"] = json!("add");
    for us in t0..=t0 + width {
        let guess = format!("{:.6}-{:03}", us as f64 / 1e6, n0 + 1);
        // The old format, and the new one with the attacker's own random part.
        for id in [guess.clone(), format!("{guess}-{key0}")] {
            let mut b = complete_body(&id, &json!("forged"));
            b["process_pid"] = json!(666);
            let r = c.post("/api/call/complete", &b);
            assert!(r.status == 200 || r.status == 403, "{}", r.text());
        }
    }
    assert!(!call_id.is_empty());
    victim_intact(&c, &call_id, &pause);
}

#[test]
fn a_known_call_id_completes_only_from_its_process_and_origin() {
    let (_s, c) = server();
    let (call_id, pause) = victim_pauses(&c);
    let good = complete_body(&call_id, &json!("forged"));
    let mut variants: Vec<(&str, Value, Option<&str>)> = Vec::new();
    let mut other_pid = good.clone();
    other_pid["process_pid"] = json!(16760);
    variants.push(("another pid", other_pid, None));
    let mut other_start = good.clone();
    other_start["process_start_time"] = json!(1795311683.7);
    variants.push(("another start time", other_start, None));
    let mut partial = good.clone();
    partial.as_object_mut().unwrap().remove("process_pid");
    partial["process_start_time"] = json!(1795311683.7);
    variants.push(("only a start time, another one", partial, None));
    let mut unreadable = good.clone();
    unreadable["process_pid"] = json!("not a pid");
    variants.push(("a pid that is not a number", unreadable, None));
    let mut silent = good.clone();
    silent.as_object_mut().unwrap().remove("process_pid");
    silent.as_object_mut().unwrap().remove("process_start_time");
    variants.push(("a page without process fields", silent, Some(PAGE)));
    // A page (granted, so only the owner check stands) with the program's exact identity.
    variants.push((
        "a page with the program's identity",
        good.clone(),
        Some(PAGE),
    ));
    for (what, body, origin) in variants {
        let r = send(&c, "POST", "/api/call/complete", origin, Some(&body));
        assert_eq!(r.status, 403, "{what}: {}", r.text());
        let e = r.json();
        assert_eq!(e["error"], "not_owner", "{what}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("program"),
            "{what}: {e}"
        );
    }
    victim_intact(&c, &call_id, &pause);
}

#[test]
fn a_page_cannot_poll_a_programs_pause_nor_take_or_answer_its_repl() {
    let (_s, c) = server();
    let (call_id, pause) = victim_pauses(&c);
    let session = c.post_ok("/api/repl/start", &json!({"pause_id": pause}))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The person evaluates; the eval waits for the program.
    let port = c.port;
    let sid = session.clone();
    let eval = std::thread::spawn(move || {
        Client { port }.post_ok(&format!("/api/repl/{sid}/eval"), &json!({"expr": "x"}))
    });
    // The page asks for the pause's action and REPL requests: refused, the queue untouched.
    let page_poll = send(&c, "GET", &format!("/api/poll/{pause}"), Some(PAGE), None);
    assert_eq!(page_poll.status, 403, "{}", page_poll.text());
    assert_eq!(page_poll.json()["error"], "not_owner");
    let queued = poll_until(Duration::from_secs(10), || {
        // Only the owner's poll takes it, once it is queued; the page's polls never do.
        let r = send(
            &c,
            "GET",
            &format!("/api/poll-repl/{pause}"),
            Some(PAGE),
            None,
        );
        assert_eq!(r.status, 403, "the page took a REPL request: {}", r.text());
        let mine = c.get_ok(&format!("/api/poll-repl/{pause}"));
        (!mine["eval_id"].is_null()).then_some(mine)
    })
    .expect("the eval reaches the program");
    let eval_id = queued["eval_id"].as_str().unwrap().to_owned();
    // The page answers it with a forged result: refused, the eval still waits.
    let forged = json!({"eval_id": eval_id, "session_id": session, "pause_id": pause,
                        "result": "'forged'", "stdout": "", "error": null});
    let r = send(
        &c,
        "POST",
        "/api/call/repl-result",
        Some(PAGE),
        Some(&forged),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"], "not_owner");
    let real = json!({"eval_id": eval_id, "session_id": session, "pause_id": pause,
                      "result": "1", "stdout": "", "error": null});
    c.post_ok("/api/call/repl-result", &real);
    let out = eval.join().unwrap();
    assert_eq!(out["output"], "1", "{out}");
    victim_intact(&c, &call_id, &pause);
}

#[test]
fn a_pages_lookalike_pause_shows_its_origin_on_every_face() {
    let (_s, c) = server();
    let (_call_id, program_pause) = victim_pauses(&c);
    // The page copies the program's identity, file and arguments.
    let body = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    let r = send(&c, "POST", "/api/call/start", Some(PAGE), Some(&body));
    assert_eq!(r.status, 200, "{}", r.text());
    let page_pause = pause_id(&r.json());
    let page_call = r.json()["call_id"].as_str().unwrap().to_owned();
    let paused = c.get_ok("/api/paused")["paused"].clone();
    let origin_of = |id: &str| {
        paused
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["call_data"]["origin"].clone())
            .unwrap()
    };
    assert_eq!(origin_of(&program_pause), Value::Null);
    assert_eq!(origin_of(&page_pause), json!(PAGE));
    // The web UI's card says so.
    let page = http(c.port, "GET", "/", &[("Accept", "text/html")], None).text();
    assert!(
        page.contains(&format!("page origin {PAGE}")),
        "no origin on the card"
    );
    // The record, once the page completes its call, carries it too (REST and the Calls page).
    c.post_ok(
        &format!("/api/paused/{page_pause}/continue"),
        &json!({"action": "continue"}),
    );
    let done = send(
        &c,
        "POST",
        "/api/call/complete",
        Some(PAGE),
        Some(&complete_body(&page_call, &json!(2))),
    );
    assert_eq!(done.status, 200, "{}", done.text());
    let rec = records(&c);
    assert_eq!(rec[0]["origin"], json!(PAGE), "{}", rec[0]);
    let calls = http(c.port, "GET", "/calls", &[("Accept", "text/html")], None).text();
    assert!(calls.contains(&format!("page origin {PAGE}")));
}

#[test]
fn one_page_cannot_take_over_another_pages_call() {
    // Two pages, both granted: only the owner checks stand between them.
    const OTHER: &str = "http://localhost:4000";
    let s = Server::start(&["--memory", "--allow-origin", PAGE, "--allow-origin", OTHER]);
    let c = s.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let mut body = call_start_body("add", vec![item(&json!(1), 2)], json!({}));
    body["process_pid"] = json!(0);
    let r = send(&c, "POST", "/api/call/start", Some(PAGE), Some(&body));
    assert_eq!(r.status, 200, "{}", r.text());
    let (call_id, pause) = (
        r.json()["call_id"].as_str().unwrap().to_owned(),
        pause_id(&r.json()),
    );
    // The other page, with the same identity (pid 0 and the same start time), and a program.
    let mut done = complete_body(&call_id, &json!("forged"));
    done["process_pid"] = json!(0);
    for origin in [Some(OTHER), None] {
        let r = send(&c, "POST", "/api/call/complete", origin, Some(&done));
        assert_eq!(r.status, 403, "complete from {origin:?}: {}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains(PAGE));
        let r = send(&c, "GET", &format!("/api/poll/{pause}"), origin, None);
        assert_eq!(r.status, 403, "poll from {origin:?}: {}", r.text());
        let r = send(&c, "GET", &format!("/api/poll-repl/{pause}"), origin, None);
        assert_eq!(r.status, 403, "poll-repl from {origin:?}: {}", r.text());
    }
    assert_eq!(
        c.get_ok("/api/paused")["paused"].as_array().unwrap().len(),
        1
    );
    assert_eq!(records(&c), Vec::<Value>::new());
    // The owner goes on as if nothing happened.
    c.post_ok(
        &format!("/api/paused/{pause}/continue"),
        &json!({"action": "continue"}),
    );
    let r = send(&c, "GET", &format!("/api/poll/{pause}"), Some(PAGE), None);
    assert_eq!(r.json()["status"], "ready");
    let r = send(&c, "POST", "/api/call/complete", Some(PAGE), Some(&done));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(records(&c)[0]["origin"], json!(PAGE));
}
