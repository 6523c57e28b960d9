//! Faults: `kill -9` during heavy object and record writes (then every acknowledged object and
//! record is back after reopening, and verifies); SIGTERM with calls in flight on every face (an
//! exit within 3 s, the port file removed, no child left, every client answered or
//! disconnected); an external MCP server killed mid-call (its calls fail at once with a clear
//! error, are recorded, and the server reconnects it).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha512};

use crate::harness::{
    exchange, home, request_bytes, tool_result, McpHttp, Outcome, Proc, LIVENESS,
};
use crate::loadgen::{call_within, cycle_within, http_within, Load};
use crate::support::{
    call_start_body, children_of, complete_body, fixture_server_path, item, pause_id, process_gone,
    signal, wait_for, Client,
};

// ---------------------------------------------------------------------------------------------
// kill -9 during heavy writes.

/// What the writers were told was stored.
#[derive(Default)]
struct Acked {
    /// CIDs of acknowledged payloads.
    objects: HashSet<String>,
    /// Acknowledged completions and events: call id -> (method, result CID).
    records: HashMap<String, (String, String)>,
}

/// A payload no other write has: `size` bytes of text naming its writer.
fn distinct(tag: &str, size: usize) -> Value {
    let mut s = String::with_capacity(size);
    while s.len() < size {
        s.push_str(tag);
        s.push(' ');
    }
    s.truncate(size);
    json!(s)
}

/// Writes as fast as it can until `stop`: call/start with new arguments, call/complete with a
/// new result (half of them of `h`, which has a breakpoint that does not pause, so each also
/// writes a history entry), and now and then a client event carrying a payload.
fn writer(port: u16, w: usize, round: usize, stop: &AtomicBool, acked: &Mutex<Acked>) {
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let tag = format!("r{round}-w{w}-n{n}");
        let method = if n % 2 == 0 { "h" } else { "w" };
        let size = 1024 << (n % 6);
        let arg = item(&distinct(&format!("{tag}-arg"), size), 2);
        let kwarg = item(&distinct(&format!("{tag}-kw"), size / 2), 3);
        let body = call_start_body(method, vec![arg.clone()], json!({"k": kwarg}));
        let Ok(start) = call_within(
            port,
            "POST",
            "/api/call/start",
            body.to_string().as_bytes(),
            LIVENESS,
        ) else {
            return;
        };
        if start["action"] != "continue" {
            panic!("call/start of {method} answered {start}");
        }
        {
            let mut a = acked.lock().unwrap();
            for i in [&body["target"], &arg, &kwarg] {
                a.objects.insert(i["cid"].as_str().unwrap().to_owned());
            }
        }
        let call_id = start["call_id"].as_str().unwrap().to_owned();
        let result = distinct(&format!("{tag}-result"), size / 4);
        let done = complete_body(&call_id, &result);
        let Ok(ok) = call_within(
            port,
            "POST",
            "/api/call/complete",
            done.to_string().as_bytes(),
            LIVENESS,
        ) else {
            return;
        };
        assert_eq!(ok, json!({"status": "ok"}), "call/complete of {call_id}");
        let result_cid = done["result_cid"].as_str().unwrap().to_owned();
        {
            let mut a = acked.lock().unwrap();
            a.objects.insert(result_cid.clone());
            a.records.insert(call_id, (method.to_owned(), result_cid));
        }
        if n % 5 == 0 {
            let payload = item(&distinct(&format!("{tag}-event"), 2048), 9);
            let event_id = format!("ev-{tag}");
            let body = json!({
                "event_id": event_id, "method_name": "pickle_error", "status": "serialization_error",
                "timestamp": 1.5, "call_site": {"timestamp": 1.5, "stack_trace": []},
                "process_pid": 7, "process_start_time": 1.5, "pretty_args": [], "pretty_kwargs": {},
                "result_cid": payload["cid"], "result_data": payload["data"],
            });
            let Ok(ok) = call_within(
                port,
                "POST",
                "/api/call/event",
                body.to_string().as_bytes(),
                LIVENESS,
            ) else {
                return;
            };
            assert_eq!(ok, json!({"status": "ok"}), "call/event {event_id}");
            let cid = payload["cid"].as_str().unwrap().to_owned();
            let mut a = acked.lock().unwrap();
            a.objects.insert(cid.clone());
            a.records.insert(event_id, ("pickle_error".into(), cid));
        }
    }
}

/// Every page of a listing.
fn all_pages(c: &Client, path: &str, key: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let target = format!("{path}{sep}limit=1000&offset={}", out.len());
        let (status, body) = http_within(c.port, "GET", &target, b"", LIVENESS)
            .unwrap_or_else(|e| panic!("GET {target}: {e}"));
        assert_eq!(
            status,
            200,
            "GET {target}: {}",
            String::from_utf8_lossy(&body)
        );
        let page: Value = serde_json::from_slice(&body).unwrap();
        let items = page[key].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return out;
        }
        out.extend(items);
    }
}

/// Checks that everything acknowledged is stored and verifies.
fn verify(server: &Proc, acked: &Acked) {
    let c = server.client();
    for cid in &acked.objects {
        let (status, body) = http_within(
            server.port,
            "GET",
            &format!("/api/objects/{cid}?data=true"),
            b"",
            LIVENESS,
        )
        .unwrap_or_else(|e| panic!("GET object {cid}: {e}"));
        assert_eq!(
            status,
            200,
            "acknowledged object {cid} is gone: {}",
            String::from_utf8_lossy(&body)
        );
        let obj: Value = serde_json::from_slice(&body).unwrap();
        let data = obj["data"]
            .as_str()
            .unwrap_or_else(|| panic!("object {cid} without data: {obj}"));
        let bytes = match obj["format"].as_str() {
            Some("json") => data.as_bytes().to_vec(),
            _ => base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap_or_else(|e| panic!("object {cid}: data is not base64: {e}")),
        };
        let digest: String = Sha512::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(&digest, cid, "object {cid} does not verify");
    }
    let records = all_pages(&c, "/api/call-records", "calls");
    let mut listed: HashMap<String, &Value> = HashMap::new();
    for r in &records {
        let id = r["call_id"].as_str().unwrap_or_default().to_owned();
        assert!(
            listed.insert(id.clone(), r).is_none(),
            "record {id} listed twice"
        );
    }
    for (id, (method, result_cid)) in &acked.records {
        let r = listed.get(id).unwrap_or_else(|| {
            panic!("acknowledged record {id} is gone ({} listed)", listed.len())
        });
        assert_eq!(r["method_name"], method.as_str(), "{r}");
        assert_eq!(r["result_cid"], result_cid.as_str(), "{r}");
    }
    let history: HashSet<String> = all_pages(&c, "/api/breakpoints/h/history", "history")
        .iter()
        .map(|h| {
            h["call_data"]["call_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    for (id, (method, _)) in &acked.records {
        if method == "h" {
            assert!(
                history.contains(id),
                "acknowledged history entry of {id} is gone"
            );
        }
    }
}

#[test]
fn kill_9_during_heavy_writes_loses_no_acknowledged_object_or_record() {
    let dir = home("kill9");
    let db = dir.path().join("heavy.db");
    let args = ["--db", db.to_str().unwrap()];
    let acked = Mutex::new(Acked::default());
    for round in 0..3 {
        let mut server = Proc::start(dir.path(), &args, "warn");
        if round > 0 {
            verify(&server, &acked.lock().unwrap());
        }
        let c = server.client();
        c.post_ok(
            "/api/breakpoints",
            &json!({"function_name": "h", "behavior": "go"}),
        );
        c.post_ok(
            "/api/breakpoints/h/after_behavior",
            &json!({"behavior": "go"}),
        );
        let stop = AtomicBool::new(false);
        let port = server.port;
        thread::scope(|s| {
            for w in 0..6 {
                let (stop, acked) = (&stop, &acked);
                s.spawn(move || writer(port, w, round, stop, acked));
            }
            // Kill while the writers are at it, at a different moment each round.
            let until = Instant::now() + Duration::from_millis(1200 + 500 * round as u64);
            while Instant::now() < until {
                thread::sleep(Duration::from_millis(20));
            }
            server.signal("-KILL");
            assert!(
                server.wait_exit(LIVENESS).is_some(),
                "no exit after SIGKILL"
            );
            stop.store(true, Ordering::Relaxed);
        });
        let a = acked.lock().unwrap();
        eprintln!(
            "kill -9 round {round}: {} objects and {} records acknowledged so far",
            a.objects.len(),
            a.records.len()
        );
    }
    let mut server = Proc::start(dir.path(), &args, "warn");
    verify(&server, &acked.lock().unwrap());
    // A clean stop and one more reopen keep it all too.
    server.signal("-TERM");
    assert!(server.wait_exit(LIVENESS).is_some());
    let server = Proc::start(dir.path(), &args, "warn");
    verify(&server, &acked.lock().unwrap());
}

// ---------------------------------------------------------------------------------------------
// SIGTERM with calls in flight.

/// Finishes when the server answers or closes the connection; `Err` if it hangs.
fn in_flight(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<String, String> {
    match exchange(
        port,
        &request_bytes(port, method, path, headers, body),
        LIVENESS,
        true,
    ) {
        Outcome::Answered(x) => Ok(format!(
            "{} {}",
            x.status,
            x.text().chars().take(120).collect::<String>()
        )),
        Outcome::Dropped(why) => Ok(format!("closed: {why}")),
        Outcome::Hung(after) => Err(format!(
            "{method} {path}: no answer {after:?} after SIGTERM"
        )),
    }
}

fn fixture_pid(c: &Client, name: &str) -> u32 {
    wait_for(&format!("{name} connected"), || {
        let v = c.get_ok("/api/mcp-clients");
        let s = &v["clients"][name];
        (s["status"] == "connected").then(|| s["pid"].as_u64().unwrap() as u32)
    })
}

#[test]
fn sigterm_with_calls_in_flight_exits_within_3_s_and_leaves_nothing_behind() {
    let dir = home("sigterm");
    let db = dir.path().join("t.db");
    let spec = format!("fx:{}", fixture_server_path().display());
    let mut server = Proc::start(
        dir.path(),
        &[
            "--mcp",
            "--mcp-sse",
            "--db",
            db.to_str().unwrap(),
            "--mcp-client",
            &spec,
            "--mcp-connect-timeout-s",
            "10",
        ],
        "info",
    );
    let port = server.port;
    let c = server.client();
    let fx = fixture_pid(&c, "fx");
    let rpc = server.stdio.clone().unwrap();
    rpc.initialize().unwrap();

    // A paused call, a REPL session on it with an eval waiting for the program's answer.
    c.post_ok("/api/breakpoints", &json!({"function_name": "p"}));
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("p", vec![item(&json!(1), 2)], json!({})),
    );
    let pause = pause_id(&start);
    let session = c.post_ok("/api/repl/start", &json!({"pause_id": pause}))["session_id"]
        .as_str()
        .expect("a REPL session")
        .to_owned();
    let json_headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    let mcp = McpHttp::open(port).unwrap();
    let stop = AtomicBool::new(false);
    let acked_calls = Mutex::new(Vec::new());
    let load = Load::from_value(&json!({"target": item(&json!("t"), 1), "sets": [
        {"args": [item(&json!(1), 2)], "kwargs": {}, "result": item(&json!(2), 3)}]}))
    .unwrap();

    let outcomes: Vec<Result<String, String>> = thread::scope(|s| {
        let mut handles = Vec::new();
        let h = &json_headers;
        let eval_path = format!("/api/repl/{session}/eval");
        handles
            .push(s.spawn(move || in_flight(port, "POST", &eval_path, h, br#"{"expr": "1 + 1"}"#)));
        let slow = json!({"tool": "fx/slow", "arguments": {"ms": 60000}}).to_string();
        handles.push(
            s.spawn(move || in_flight(port, "POST", "/api/mcp-tools/call", h, slow.as_bytes())),
        );
        handles.push(s.spawn(|| {
            match mcp.request(
                "tools/call",
                json!({"name": "external_call_tool",
            "arguments": {"tool": "fx/slow", "arguments": {"ms": 60000}}}),
            ) {
                Ok(r) => Ok(r.to_string()),
                Err(e) if e.contains("no answer") || e.contains("Hung") => Err(e),
                Err(e) => Ok(e),
            }
        }));
        let rpc2 = rpc.clone();
        handles.push(s.spawn(move || {
            // A stdio request that waits for a pause that never comes: an answer, or stdout
            // closing with the process, is fine; only the deadline matters.
            match rpc2.request(
                "tools/call",
                json!({"name": "breakpoint_wait_for_pause",
                "arguments": {"function_name": "nobody", "timeout_s": 50}}),
                LIVENESS,
            ) {
                Err(e) if e.contains("no response within") => Err(e),
                Err(e) => Ok(e),
                Ok(r) => Ok(r.to_string()),
            }
        }));
        handles.push(s.spawn(move || {
            in_flight(port, "GET", "/api/events", &[], b"").map(|_| "events".into())
        }));
        let poll = format!("/api/poll/{pause}");
        let stop_ref = &stop;
        handles.push(s.spawn(move || {
            // The paused program polls until the server goes away.
            while !stop_ref.load(Ordering::Relaxed) {
                if http_within(port, "GET", &poll, b"", LIVENESS).is_err() {
                    return Ok("poller saw the server go".to_owned());
                }
                thread::sleep(Duration::from_millis(20));
            }
            Ok("poller stopped".to_owned())
        }));
        for t in 0..4 {
            let (load, acked_calls) = (&load, &acked_calls);
            handles.push(s.spawn(move || {
                let mut i = t as u64 * 1000;
                loop {
                    i += 1;
                    match cycle_within(port, load, i, LIVENESS) {
                        Ok(id) => acked_calls
                            .lock()
                            .unwrap()
                            .push(id.as_str().unwrap().to_owned()),
                        Err(_) => return Ok("cycles stopped".to_owned()),
                    }
                }
            }));
        }
        // Everything is in flight: the eval was handed to the program's poll, the two slow
        // calls reached the fixture (its log lines come into ours).
        wait_for("the REPL eval to be queued", || {
            let v = c.get_ok(&format!("/api/poll-repl/{pause}"));
            (!v["eval_id"].is_null()).then_some(())
        });
        wait_for("two slow calls at the fixture", || {
            (server.stderr().matches("fixture: tools/call").count() >= 2).then_some(())
        });
        // The call cycles are under way (on a loaded machine the first may take a while).
        wait_for("a call cycle acknowledged", || {
            (!acked_calls.lock().unwrap().is_empty()).then_some(())
        });
        let children = children_of(server.pid());
        assert!(
            children.contains(&fx),
            "the fixture {fx} is not among {children:?}"
        );
        let t0 = Instant::now();
        server.signal("-TERM");
        let status = server.wait_exit(Duration::from_secs(10));
        let took = t0.elapsed();
        stop.store(true, Ordering::Relaxed);
        assert!(status.is_some(), "still running 10 s after SIGTERM");
        assert!(
            took <= Duration::from_secs(3),
            "exit took {took:?} after SIGTERM"
        );
        assert!(status.unwrap().success(), "exit status {status:?}");
        eprintln!("sigterm: exited {took:?} after the signal");
        for child in &children {
            assert!(process_gone(*child), "child {child} outlived the server");
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("sigterm: clients ended with {outcomes:#?}");
    for o in &outcomes {
        assert!(o.is_ok(), "{o:?}");
    }
    assert!(!server.port_file.exists(), "the port file is left behind");
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");

    // Every call acknowledged before the signal is in the database.
    let reopened = Proc::start(dir.path(), &["--db", db.to_str().unwrap()], "warn");
    let ids: HashSet<String> = all_pages(&reopened.client(), "/api/call-records", "calls")
        .iter()
        .map(|r| r["call_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let acked = acked_calls.into_inner().unwrap();
    assert!(!acked.is_empty(), "no call cycle was acknowledged");
    for id in &acked {
        assert!(ids.contains(id), "acknowledged call {id} lost at SIGTERM");
    }
}

// ---------------------------------------------------------------------------------------------
// An external MCP server killed mid-call.

#[test]
fn an_external_server_killed_mid_call_fails_its_calls_at_once_and_comes_back() {
    let dir = home("upkill");
    let spec = format!("fx:{}", fixture_server_path().display());
    let server = Proc::start(
        dir.path(),
        &[
            "--mcp",
            "--mcp-sse",
            "--memory",
            "--mcp-client",
            &spec,
            "--mcp-backoff-base-s",
            "0.05",
            "--mcp-connect-timeout-s",
            "10",
        ],
        "info",
    );
    let port = server.port;
    let c = server.client();
    let fx = fixture_pid(&c, "fx");
    let rpc = server.stdio.clone().unwrap();
    rpc.initialize().unwrap();
    let mcp = McpHttp::open(port).unwrap();
    let json_headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    let slow = json!({"tool": "fx/slow", "arguments": {"ms": 60000}}).to_string();
    let external = json!({"name": "external_call_tool", "arguments": {"tool": "fx/slow", "arguments": {"ms": 60000}}});

    let killed_at: Mutex<Option<Instant>> = Mutex::new(None);
    let ended = |what: &str, r: String| -> (String, Duration) {
        let at = killed_at.lock().unwrap().expect("killed before any answer");
        (format!("{what}: {r}"), at.elapsed())
    };
    let results: Vec<(String, Duration)> = thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..2 {
            let (h, slow, ended) = (&json_headers, &slow, &ended);
            handles.push(s.spawn(move || {
                let r = match exchange(
                    port,
                    &request_bytes(port, "POST", "/api/mcp-tools/call", h, slow.as_bytes()),
                    LIVENESS,
                    false,
                ) {
                    Outcome::Answered(x) => {
                        let v: Value = serde_json::from_slice(&x.body).unwrap_or(Value::Null);
                        assert_eq!(x.status, 502, "REST call {i}: {}", x.text());
                        assert_eq!(v["error"], "call_failed", "REST call {i}: {v}");
                        format!("{} {}", x.status, v["message"])
                    }
                    other => panic!("REST call {i}: {other:?}"),
                };
                ended("REST", r)
            }));
        }
        let (external2, ended2) = (&external, &ended);
        handles.push(s.spawn(move || {
            let r = rpc
                .request("tools/call", external2.clone(), LIVENESS)
                .expect("a stdio answer");
            assert!(tool_result(&r).is_err(), "the stdio call succeeded: {r}");
            ended2("stdio", r["result"].to_string())
        }));
        let (external3, ended3, mcp) = (&external, &ended, &mcp);
        handles.push(s.spawn(move || {
            let r = mcp
                .request("tools/call", external3.clone())
                .expect("an HTTP answer");
            assert!(tool_result(&r).is_err(), "the HTTP call succeeded: {r}");
            ended3("MCP HTTP", r["result"].to_string())
        }));
        wait_for("four slow calls at the fixture", || {
            (server.stderr().matches("fixture: tools/call").count() >= 4).then_some(())
        });
        *killed_at.lock().unwrap() = Some(Instant::now());
        signal(fx, "-KILL");
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("killed mid-call: {results:#?}");
    for (what, after) in &results {
        assert!(
            *after < Duration::from_secs(3),
            "{what} answered {after:?} after the kill"
        );
    }
    // Each failed call is a call record, none a success.
    let records = c.get_ok("/api/call-records?source=mcp_client&limit=100")["calls"].clone();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 4, "{records:?}");
    assert!(
        records.iter().all(|r| r["status"] != "success"),
        "{records:?}"
    );
    // The server reconnects by itself, the old child is reaped, the new one answers.
    let new_fx = wait_for("a new fixture", || {
        let v = c.get_ok("/api/mcp-clients");
        let s = &v["clients"]["fx"];
        (s["status"] == "connected" && s["pid"].as_u64() != Some(fx as u64))
            .then(|| s["pid"].as_u64().unwrap() as u32)
    });
    wait_for("the killed fixture to be reaped", || {
        (!children_of(server.pid()).contains(&fx)).then_some(())
    });
    assert_eq!(children_of(server.pid()), vec![new_fx]);
    let echo = c.post_ok(
        "/api/mcp-tools/call",
        &json!({"tool": "fx/echo", "arguments": {"text": "back"}}),
    );
    assert_eq!(echo["result"]["content"][0]["text"], "back", "{echo}");
    let log = server.stderr();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}
