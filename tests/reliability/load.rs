//! The load test: 32 client threads for 30 s against one server (with a database file) on every
//! face at once: the debug-client protocol (the benchmark's call cycle, and paused calls polled
//! like the Python client does), the REST API, MCP over stdio and MCP over Streamable HTTP.
//! Each pause is resumed by exactly one resumer (REST, an MCP stdio tool call or an MCP HTTP
//! tool call), so every request of the mix must succeed. Then the invariants: every started call
//! completed or is still paused, and `/api/status`, the call records and the breakpoint history
//! agree with what the clients were told.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};

use crate::harness::{home, tool_result, McpHttp, Proc, StdioRpc, LIVENESS};
use crate::loadgen::{call_within, cycle_within, http_within, Load};
use crate::support::{item, Client};

/// How long the clients keep going: 30 s, as the hardening issue asks (`RELIABILITY_LOAD_S`
/// changes it for a quick try).
fn run_time() -> Duration {
    let secs = std::env::var("RELIABILITY_LOAD_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30.0);
    Duration::from_secs_f64(secs)
}
const THREADS: usize = 32;
/// Threads per role: call cycles without a pause, paused calls, then the resumers.
const FREE: usize = 12;
const PAUSED: usize = 8;
const REST: usize = 4;
const STDIO: usize = 4;
const MCP_HTTP: usize = 4;

/// The load description of `scripts/bench_load.py`, built from Rust pickles.
fn load_description() -> Value {
    let target = item(&json!("<function shop.pricing.apply_discount>"), 1);
    let sets: Vec<Value> = (0..16)
        .map(|i| {
            let r = 2 + 4 * i;
            json!({
                "args": [
                    item(&json!({"order_id": 10_000 + i, "customer": format!("customer-{i:04}"),
                                 "total": i as f64 * 3.25,
                                 "items": [["sku-1", 1, 9.99], ["sku-2", 2, 9.99]]}), r),
                    item(&json!(format!("EUR-{i}")), r + 1),
                ],
                "kwargs": {"c": item(&json!([i, i as f64 * 0.5, null, true]), r + 2)},
                "result": item(&json!({"order_id": 10_000 + i, "discounted": i as f64 * 2.9}), r + 3),
            })
        })
        .collect();
    json!({"target": target, "sets": sets})
}

/// What the clients were told, gathered from every thread.
#[derive(Default)]
struct Told {
    /// Call ids whose completion was acknowledged, by function.
    free: Vec<String>,
    bp: Vec<String>,
    /// Event ids acknowledged (each a call record).
    events: Vec<String>,
    /// Pauses deliberately left open at the end.
    left_paused: Vec<String>,
    /// Requests that failed: what, and why.
    errors: Vec<String>,
    requests: usize,
}

struct Mix {
    port: u16,
    load: Load,
    stop: AtomicBool,
    /// Program threads still running (resumers stop after them).
    programs: AtomicUsize,
    told: Mutex<Told>,
    requests: AtomicUsize,
    /// One queue of pause ids per resumer kind: REST, MCP stdio, MCP HTTP.
    queues: [(Sender<String>, Receiver<String>); 3],
}

impl Mix {
    fn error(&self, what: String) {
        let mut told = self.told.lock().unwrap();
        if told.errors.len() < 50 {
            told.errors.push(what);
        }
    }

    fn counted<T>(&self, r: Result<T, String>) -> Result<T, String> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn post(&self, path: &str, body: &[u8]) -> Result<Value, String> {
        self.counted(call_within(self.port, "POST", path, body, LIVENESS))
    }

    fn get(&self, path: &str) -> Result<Value, String> {
        self.counted(call_within(self.port, "GET", path, b"", LIVENESS))
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A call cycle of a function without a breakpoint, as the benchmark runs it.
fn free_program(mix: &Mix, t: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut i = t as u64 * 1_000_003;
    while !mix.stopping() {
        i += 1;
        match mix.counted(cycle_within(mix.port, &mix.load, i, LIVENESS)) {
            Ok(id) => ids.push(id.as_str().unwrap_or_default().to_owned()),
            Err(e) => {
                mix.error(format!("free cycle: {e}"));
                break;
            }
        }
        mix.requests.fetch_add(1, Ordering::Relaxed);
    }
    ids
}

/// Starts a call of `bp` and returns its call id and pause id.
fn start_paused(mix: &Mix, k: usize) -> Result<(Value, String), String> {
    let start = mix.post("/api/call/start", &mix.load.bp[k])?;
    let url = start["poll_url"]
        .as_str()
        .filter(|u| u.starts_with("/api/poll/"))
        .ok_or_else(|| format!("call/start of bp did not pause: {start}"))?;
    Ok((
        start["call_id"].clone(),
        url["/api/poll/".len()..].to_owned(),
    ))
}

/// Paused calls of `bp`, polled like the Python client until a resumer continues them; every
/// eighth cycle also reports a client event. The last call is left paused.
fn paused_program(mix: &Mix, t: usize) -> (Vec<String>, Vec<String>, Option<String>) {
    let (mut ids, mut events) = (Vec::new(), Vec::new());
    let mut n = 0usize;
    let result = (|| -> Result<(), String> {
        while !mix.stopping() {
            n += 1;
            let k = (t * 7 + n) % mix.load.bp.len();
            let (call_id, pause) = start_paused(mix, k)?;
            mix.queues[(t + n) % 3]
                .0
                .send(pause.clone())
                .map_err(|e| e.to_string())?;
            let until = Instant::now() + LIVENESS;
            let mut polls = 0;
            loop {
                polls += 1;
                let v = mix.get(&format!("/api/poll/{pause}"))?;
                match v["status"].as_str() {
                    Some("ready") if v["action"]["action"] == "continue" => break,
                    Some("waiting") => {}
                    _ => return Err(format!("poll {pause}: {v}")),
                }
                if polls % 5 == 0 {
                    let r = mix.get(&format!("/api/poll-repl/{pause}"))?;
                    if r != json!({"eval_id": null}) {
                        return Err(format!("poll-repl {pause}: {r}"));
                    }
                }
                if Instant::now() > until {
                    return Err(format!("pause {pause} not resumed within {LIVENESS:?}"));
                }
                thread::sleep(Duration::from_millis(15));
            }
            let done = mix.post("/api/call/complete", &mix.load.complete(k, &call_id))?;
            if done != json!({"status": "ok"}) {
                return Err(format!("call/complete of {call_id}: {done}"));
            }
            ids.push(call_id.as_str().unwrap_or_default().to_owned());
            if n % 8 == 0 {
                let event_id = format!("ev-{t}-{n}");
                let body = json!({
                    "event_id": event_id, "method_name": "__getattr__('_cideldill_alias_name')",
                    "status": "exception", "timestamp": crate::loadgen::now(),
                    "call_site": {"timestamp": crate::loadgen::now(), "stack_trace": []},
                    "process_pid": std::process::id(), "process_start_time": 1.5,
                    "pretty_args": [], "pretty_kwargs": {},
                    "exception": {"type": "AttributeError", "message": "no alias"},
                });
                let r = mix.post("/api/call/event", body.to_string().as_bytes())?;
                if r != json!({"status": "ok"}) {
                    return Err(format!("call/event: {r}"));
                }
                events.push(event_id);
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        mix.error(format!("paused program {t}: {e}"));
        return (ids, events, None);
    }
    match start_paused(mix, t % mix.load.bp.len()) {
        Ok((_, pause)) => (ids, events, Some(pause)),
        Err(e) => {
            mix.error(format!("paused program {t}, last call: {e}"));
            (ids, events, None)
        }
    }
}

/// Runs `resume` on every pause id of `queue` and `idle` in between, until the programs are
/// done and the queue is empty.
fn resumer(
    mix: &Mix,
    queue: &Receiver<String>,
    mut resume: impl FnMut(&str) -> Result<(), String>,
    mut idle: impl FnMut(usize) -> Result<(), String>,
) {
    let mut n = 0;
    loop {
        match queue.recv_timeout(Duration::from_millis(10)) {
            Ok(pause) => {
                if let Err(e) = resume(&pause) {
                    mix.error(format!("resume {pause}: {e}"));
                }
            }
            Err(_) if mix.programs.load(Ordering::SeqCst) == 0 => return,
            Err(_) => {
                n += 1;
                if let Err(e) = idle(n) {
                    mix.error(format!("idle request {n}: {e}"));
                }
            }
        }
    }
}

fn rest_resumer(mix: &Mix, t: usize) {
    let reads = [
        "/api/status",
        "/api/paused",
        "/api/call-records?limit=20",
        "/api/call-records?function=bp&limit=5",
        "/api/breakpoints/bp/history?limit=5",
        "/api/objects?limit=5",
        "/api/functions",
        "/api/breakpoints",
        "/api/com-errors",
        "/api/repl/sessions",
        "/api/snapshots?client_ref=2",
        "/",
    ];
    resumer(
        mix,
        &mix.queues[0].1,
        |pause| {
            let r = mix.post(
                &format!("/api/paused/{pause}/continue"),
                br#"{"action": "continue"}"#,
            )?;
            (r["status"] == "ok")
                .then_some(())
                .ok_or_else(|| format!("continue answered {r}"))
        },
        |n| {
            // A text search scans records for up to 1.5 s: now and then only.
            let path = if n % 400 == 7 {
                "/api/call-records?search=eur-3&limit=5"
            } else {
                reads[(n + t) % reads.len()]
            };
            mix.get(path).map(|_| ())
        },
    );
}

/// The idle requests of an MCP client.
fn mcp_idle(
    n: usize,
    request: &dyn Fn(&str, Value) -> Result<Value, String>,
) -> Result<(), String> {
    let tool = |name: &str, args: Value| -> Result<(), String> {
        let r = request("tools/call", json!({"name": name, "arguments": args}))?;
        tool_result(&r).map(|_| ())
    };
    let plain = |method: &str| -> Result<(), String> {
        let r = request(method, json!({}))?;
        r.get("result")
            .map(|_| ())
            .ok_or_else(|| format!("{method}: {r}"))
    };
    match n % 7 {
        0 => tool("breakpoint_list_paused", json!({})),
        1 => tool("breakpoint_list_breakpoints", json!({})),
        2 => tool("breakpoint_get_call_records", json!({"limit": 5})),
        3 => plain("resources/list"),
        4 => plain("tools/list"),
        5 => plain("ping"),
        _ => tool("breakpoint_get_default_behavior", json!({})),
    }
}

fn mcp_resume(
    pause: &str,
    request: &dyn Fn(&str, Value) -> Result<Value, String>,
) -> Result<(), String> {
    let r = request(
        "tools/call",
        json!({"name": "breakpoint_continue", "arguments": {"pause_id": pause, "action": "continue"}}),
    )?;
    let out = tool_result(&r)?;
    (out["status"] == "ok")
        .then_some(())
        .ok_or_else(|| format!("breakpoint_continue answered {out}"))
}

fn stdio_resumer(mix: &Mix, rpc: &StdioRpc) {
    let request = |method: &str, params: Value| mix.counted(rpc.request(method, params, LIVENESS));
    resumer(
        mix,
        &mix.queues[1].1,
        |pause| mcp_resume(pause, &request),
        |n| mcp_idle(n, &request),
    );
}

fn http_resumer(mix: &Mix) {
    let session = match mix.counted(McpHttp::open(mix.port)) {
        Ok(s) => s,
        Err(e) => {
            mix.error(format!("MCP HTTP session: {e}"));
            // Still drain this kind's pauses, or their programs wait forever.
            resumer(
                mix,
                &mix.queues[2].1,
                |_| Err("no session".into()),
                |_| Ok(()),
            );
            return;
        }
    };
    let request = |method: &str, params: Value| mix.counted(session.request(method, params));
    resumer(
        mix,
        &mix.queues[2].1,
        |pause| mcp_resume(pause, &request),
        |n| mcp_idle(n, &request),
    );
}

/// Every page of a listing, `limit` at a time, collected by `key`.
fn all_pages(c: &Client, path: &str, key: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let (status, body) = http_within(
            c.port,
            "GET",
            &format!("{path}{sep}limit=1000&offset={}", out.len()),
            b"",
            LIVENESS,
        )
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(
            status,
            200,
            "GET {path}: {}",
            String::from_utf8_lossy(&body)
        );
        let page: Value = serde_json::from_slice(&body).expect("JSON page");
        let items = page[key].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return out;
        }
        out.extend(items);
    }
}

#[test]
fn thirty_seconds_of_mixed_load_on_every_face_leave_consistent_counts() {
    let dir = home("load");
    let db = dir.path().join("load.db");
    let server = Proc::start(
        dir.path(),
        &["--mcp", "--mcp-sse", "--db", db.to_str().unwrap()],
        "warn",
    );
    let c = server.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "bp"}));
    c.post_ok(
        "/api/breakpoints/bp/after_behavior",
        &json!({"behavior": "go"}),
    );
    let rpc: Arc<StdioRpc> = server.stdio.clone().expect("stdio session");
    rpc.initialize().expect("MCP stdio handshake");

    let mix = Mix {
        port: server.port,
        load: Load::from_value(&load_description()).expect("load"),
        stop: AtomicBool::new(false),
        programs: AtomicUsize::new(FREE + PAUSED),
        told: Mutex::default(),
        requests: AtomicUsize::new(0),
        queues: [unbounded(), unbounded(), unbounded()],
    };
    assert_eq!(FREE + PAUSED + REST + STDIO + MCP_HTTP, THREADS);
    let run = run_time();
    let t0 = Instant::now();
    thread::scope(|s| {
        let mix = &mix;
        for t in 0..FREE {
            s.spawn(move || {
                let ids = free_program(mix, t);
                mix.told.lock().unwrap().free.extend(ids);
                mix.programs.fetch_sub(1, Ordering::SeqCst);
            });
        }
        for t in 0..PAUSED {
            s.spawn(move || {
                let (ids, events, left) = paused_program(mix, t);
                let mut told = mix.told.lock().unwrap();
                told.bp.extend(ids);
                told.events.extend(events);
                told.left_paused.extend(left);
                drop(told);
                mix.programs.fetch_sub(1, Ordering::SeqCst);
            });
        }
        for t in 0..REST {
            s.spawn(move || rest_resumer(mix, t));
        }
        for _ in 0..STDIO {
            let rpc = rpc.clone();
            s.spawn(move || stdio_resumer(mix, &rpc));
        }
        for _ in 0..MCP_HTTP {
            s.spawn(move || http_resumer(mix));
        }
        // The clock: every other thread ends on its own once this flag is set (each of their
        // requests has its own deadline).
        while t0.elapsed() < run && mix.told.lock().unwrap().errors.is_empty() {
            thread::sleep(Duration::from_millis(50));
        }
        mix.stop.store(true, Ordering::SeqCst);
    });
    let elapsed = t0.elapsed();
    let mut told = mix.told.into_inner().unwrap();
    told.requests = mix.requests.load(Ordering::Relaxed);
    eprintln!(
        "load: {} requests in {elapsed:.1?} ({} free calls, {} paused calls, {} events, {} left paused)",
        told.requests,
        told.free.len(),
        told.bp.len(),
        told.events.len(),
        told.left_paused.len()
    );
    assert!(
        told.errors.is_empty(),
        "errors under load: {:#?}",
        told.errors
    );
    assert!(
        elapsed < run + LIVENESS,
        "the clients took {elapsed:?} to stop"
    );
    assert!(
        rpc.junk.lock().unwrap().is_empty(),
        "stdout carried non-JSON-RPC lines: {:?}",
        rpc.junk.lock().unwrap()
    );
    assert!(
        told.free.len() > 100 && told.bp.len() > 20,
        "too little load ran"
    );
    assert_eq!(told.left_paused.len(), PAUSED);

    // Every started call completed or is paused: the paused ones are exactly those left.
    let status = c.get_ok("/api/status");
    assert_eq!(status["paused"], PAUSED, "{status}");
    assert_eq!(status["open_calls"], PAUSED, "{status}");
    let paused: HashSet<String> = c.get_ok("/api/paused")["paused"]
        .as_array()
        .expect("paused list")
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    let left: HashSet<String> = told.left_paused.iter().cloned().collect();
    assert_eq!(paused, left, "paused executions");

    // The counts agree: status, the listing, each function's filter, and the history.
    let n_records = told.free.len() + told.bp.len() + told.events.len();
    assert_eq!(status["total_calls"], n_records, "{status}");
    let page = c.get_ok("/api/call-records?limit=1");
    assert_eq!(page["total_count"], n_records, "{page}");
    for (function, n) in [("apply_discount", told.free.len()), ("bp", told.bp.len())] {
        let page = c.get_ok(&format!("/api/call-records?limit=1&function={function}"));
        assert_eq!(page["total_count"], n, "{function}: {page}");
    }

    // The records are exactly the acknowledged calls and events, each once.
    let records = all_pages(&c, "/api/call-records", "calls");
    assert_eq!(records.len(), n_records);
    let mut seen = HashSet::new();
    for r in &records {
        let id = r["call_id"].as_str().expect("call_id").to_owned();
        assert!(seen.insert(id.clone()), "call record {id} listed twice");
    }
    let expected: HashSet<String> = told
        .free
        .iter()
        .chain(&told.bp)
        .chain(&told.events)
        .cloned()
        .collect();
    assert_eq!(expected.len(), n_records, "the server gave a call id twice");
    assert_eq!(
        seen, expected,
        "call records differ from acknowledged calls"
    );

    // The history of `bp` holds each of its completed calls once.
    let history = all_pages(&c, "/api/breakpoints/bp/history", "history");
    let in_history: HashSet<String> = history
        .iter()
        .map(|h| {
            h["call_data"]["call_id"]
                .as_str()
                .expect("history call_id")
                .to_owned()
        })
        .collect();
    assert_eq!(history.len(), told.bp.len(), "history entries");
    assert_eq!(
        in_history,
        told.bp.iter().cloned().collect::<HashSet<_>>(),
        "history differs from completed calls of bp"
    );
    let (rss, hwm) = server.rss_kib();
    eprintln!(
        "load: server RSS {} MiB, peak {} MiB",
        rss / 1024,
        hwm / 1024
    );
}
