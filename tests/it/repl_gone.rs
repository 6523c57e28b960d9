//! Programs that stop polling their pause (killed, or stopped): the pause listing says when
//! each last polled and whether it is gone, a gone program's pause can be dismissed (and a
//! program that comes back is told to continue), and the REPL refuses it at once instead of
//! waiting 30 s. Also the REPL's scope (`dir()` asked when a session opens) and the earlier
//! transcripts of the same program. The simulated program plays the client protocol over HTTP.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    call_start_body, complete_body, deadline, item, pause_id, poll_until, wait_for, Client, Resp,
    Server,
};

/// A before-pause of `method`: returns (call_id, pause_id).
fn pause_before(c: &Client, method: &str, arg: i64) -> (String, String) {
    c.post_ok("/api/breakpoints", &json!({"function_name": method}));
    let answer = c.post_ok(
        "/api/call/start",
        &call_start_body(method, vec![item(&json!(arg), 2)], json!({})),
    );
    assert_eq!(answer["action"], "poll", "{answer}");
    let call = answer["call_id"].as_str().expect("call_id").to_owned();
    (call, pause_id(&answer))
}

fn listed(c: &Client, pause: &str) -> Option<Value> {
    c.get_ok("/api/paused")["paused"]
        .as_array()
        .expect("paused list")
        .iter()
        .find(|p| p["id"] == pause)
        .cloned()
}

/// Waits until the listing says the program of `pause` is gone (it stops polling after 5 s).
fn wait_gone(c: &Client, pause: &str) -> Value {
    poll_until(deadline() + Duration::from_secs(6), || {
        listed(c, pause).filter(|p| p["gone"] == true)
    })
    .expect("the pause was listed as gone in time")
}

/// A program polling its pause every 100 ms, as the Python client does, until told to stop.
fn keep_polling(c: Client, pause: &str) -> mpsc::Sender<()> {
    let (stop, stopped) = mpsc::channel::<()>();
    let path = format!("/api/poll/{pause}");
    thread::spawn(move || loop {
        let _ = c.get(&path);
        match stopped.recv_timeout(Duration::from_millis(100)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    });
    stop
}

fn page(c: &Client, path: &str) -> String {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
        c.port
    );
    let r = c.raw(req.as_bytes());
    assert_eq!(r.status, 200, "{path}");
    r.text()
}

#[test]
fn a_program_that_stops_polling_is_gone_refused_a_repl_and_dismissed_and_continues_if_it_comes_back(
) {
    let s = Server::start(&[]);
    let c = s.client();
    let (call, pause) = pause_before(&c, "add", 1);
    assert_eq!(
        c.get_ok(&format!("/api/poll/{pause}")),
        json!({"status": "waiting"})
    );
    let p = listed(&c, &pause).expect("listed");
    assert_eq!(p["gone"], false, "{p}");
    assert!(
        p["last_poll_at"].as_f64().expect("last_poll_at") >= p["paused_at"].as_f64().unwrap(),
        "{p}"
    );
    // While it polls, it cannot be dismissed.
    let e = c.post_err(&format!("/api/paused/{pause}/dismiss"), &json!({}), 409);
    assert_eq!(e["error"], "program_not_gone", "{e}");

    // It stops polling (killed).
    let gone = wait_gone(&c, &pause);
    assert!(
        gone["last_poll_at"].as_f64() == p["last_poll_at"].as_f64()
            || gone["last_poll_at"].as_f64() > p["last_poll_at"].as_f64()
    );
    let html = page(&c, "/");
    assert!(html.contains("program gone"), "the card says so");
    assert!(
        html.contains("data-act=\"dismiss\""),
        "the card offers Dismiss"
    );

    // A REPL on it fails at once, with a clear error.
    let asked = Instant::now();
    let e = c.post_err("/api/repl/start", &json!({"pause_id": pause}), 410);
    assert!(asked.elapsed() < Duration::from_secs(2), "at once");
    assert_eq!(e["error"], "program_gone", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("stopped polling"),
        "{e}"
    );

    // Dismissed: the pause is gone from the list.
    let done = c.post_ok(&format!("/api/paused/{pause}/dismiss"), &json!({}));
    assert_eq!(done, json!({"status": "ok", "dismissed": [pause]}));
    assert!(listed(&c, &pause).is_none());
    c.post_err(&format!("/api/paused/{pause}/dismiss"), &json!({}), 409);
    c.post_err("/api/paused/nope/dismiss", &json!({}), 404);

    // The program was only stopped: it polls again, is told to continue, and its call is
    // recorded when it completes.
    let r = c.get_ok(&format!("/api/poll/{pause}"));
    assert_eq!(
        r,
        json!({"status": "ready", "action": {"action": "continue"}})
    );
    assert_eq!(
        c.post_ok("/api/call/complete", &complete_body(&call, &json!(2)))["action"],
        "poll",
        "the after-pause of the call"
    );
    let records = c.get_ok("/api/call-records?function=add");
    assert_eq!(records["calls"][0]["call_id"], call, "{records}");
}

#[test]
fn a_repl_eval_waiting_on_a_program_that_goes_away_fails_promptly_with_program_gone() {
    let s = Server::start(&[]);
    let c = s.client();
    let (_, pause) = pause_before(&c, "add", 1);
    let stop = keep_polling(s.client(), &pause);
    let sid = c.post_ok("/api/repl/start", &json!({"pause_id": pause}))["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    // The program never takes the eval: it is killed while the eval waits.
    let (tx, rx) = mpsc::channel::<Resp>();
    let waiting = s.client();
    let path = format!("/api/repl/{sid}/eval");
    thread::spawn(move || {
        let _ = tx.send(waiting.post(&path, &json!({"expr": "args[0]"})));
    });
    let _ = stop.send(());
    let killed = Instant::now();
    let r = rx
        .recv_timeout(deadline() + Duration::from_secs(6))
        .expect("the eval answered well before the 30 s eval timeout");
    assert_eq!(r.status, 410, "{}", r.text());
    assert_eq!(r.json()["error"], "program_gone");
    assert!(
        killed.elapsed() < Duration::from_secs(9),
        "within a few seconds of the last poll, not 30 s: {:?}",
        killed.elapsed()
    );
    // A new eval in that session is refused at once too.
    let e = c.post_err(&format!("/api/repl/{sid}/eval"), &json!({"expr": "1"}), 410);
    assert_eq!(e["error"], "program_gone");
}

#[test]
fn a_repl_session_asks_for_its_scope_and_a_later_pause_shows_the_earlier_transcript() {
    let s = Server::start(&[]);
    let c = s.client();
    let (call, pause) = pause_before(&c, "add", 7);
    let sid = c.post_ok(
        "/api/repl/start",
        &json!({"pause_id": pause, "scope": true}),
    )["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let e = c.post_err(
        "/api/repl/start",
        &json!({"pause_id": pause, "scope": "yes"}),
        400,
    );
    assert_eq!(e["error"], "invalid_scope");
    // The program is asked for dir() first.
    let first = wait_for("the scope eval", || {
        let r = c.get_ok(&format!("/api/poll-repl/{pause}"));
        (!r["eval_id"].is_null()).then_some(r)
    });
    assert_eq!(first["expr"], "dir()");
    assert_eq!(first["session_id"], sid.as_str());
    let names =
        "['action', 'args', 'call_id', 'call_site', 'frame', 'kwargs', 'method', 'name', 'self']";
    c.post_ok(
        "/api/call/repl-result",
        &json!({"eval_id": first["eval_id"], "pause_id": pause, "session_id": sid,
                "result": names, "stdout": "", "error": null, "result_cid": null, "result_data": null}),
    );
    let session = c.get_ok(&format!("/api/repl/{sid}"))["session"].clone();
    assert_eq!(session["scope"]["names"][1], "args", "{session}");
    assert_eq!(session["scope"]["names"].as_array().unwrap().len(), 9);
    assert_eq!(
        session["transcript"],
        json!([]),
        "dir() is not a transcript entry"
    );
    let html = page(&c, &format!("/repl/{sid}"));
    assert!(html.contains("<code>kwargs</code>"), "the names are shown");
    assert!(html.contains("args[0]"), "the arguments are shown by index");

    // An ordinary eval whose value the program sent: its result links to the object.
    let (tx, rx) = mpsc::channel::<Resp>();
    let waiting = s.client();
    let path = format!("/api/repl/{sid}/eval");
    thread::spawn(move || {
        let _ = tx.send(waiting.post(&path, &json!({"expr": "args[0] * 6"})));
    });
    let eval = wait_for("the eval", || {
        let r = c.get_ok(&format!("/api/poll-repl/{pause}"));
        (!r["eval_id"].is_null()).then_some(r)
    });
    let value = item(&json!(42), 0);
    c.post_ok(
        "/api/call/repl-result",
        &json!({"eval_id": eval["eval_id"], "pause_id": pause, "session_id": sid,
                "result": "42", "stdout": "", "error": null,
                "result_cid": value["cid"], "result_data": value["data"]}),
    );
    let r = rx.recv_timeout(deadline()).expect("the eval answered");
    assert_eq!(r.json()["output"], "42");
    let html = page(&c, &format!("/repl/{sid}"));
    let cid = value["cid"].as_str().unwrap();
    assert!(
        html.contains(&format!("href=\"/object/{cid}\"")),
        "the result links to its object"
    );

    // The pause ends; the transcript stays readable; the next pause of the same program shows it.
    c.post_ok(&format!("/api/paused/{pause}/continue"), &json!({}));
    let html = page(&c, &format!("/repl/{sid}"));
    assert!(html.contains("args[0] * 6") && html.contains("This session closed"));
    let after = c.post_ok("/api/call/complete", &complete_body(&call, &json!(8)));
    let next = pause_id(&after);
    let sid2 = c.post_ok("/api/repl/start", &json!({"pause_id": next}))["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let html = page(&c, &format!("/repl/{sid2}"));
    assert!(
        html.contains("At an earlier pause of this program"),
        "the earlier transcript is shown"
    );
    assert!(
        html.contains("data-expr=\"args[0] * 6\""),
        "and its input is recalled with up/down"
    );
}
