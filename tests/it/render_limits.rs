//! Values shared through the pickle memo, sent to the real server: a small pickle that names
//! one value thousands of times must be answered quickly, with a small answer, and without the
//! server's memory growing with what the value would be if copied out (each of these took
//! seconds and gigabytes before rendering had a budget).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::pickle_builder::P;
use crate::support::{call_start_body, complete_body, proc_status_kib, raw_item, Server};

/// `ValueError(*[s] * 50_000)` with `s = 'x' * 100_000`: about 200 kB.
fn shared_exception_args() -> Vec<u8> {
    let mut p = P::new();
    let s = p.short_str(&"x".repeat(100_000)).put();
    p.op(b"0").short_global("builtins", "ValueError");
    p.op(b"(").refs(s, 50_000).op(b"tR");
    p.done()
}

/// `a = ['y' * 300]; b = [a] * 60; c = [b] * 60; ...`, five levels: under a kilobyte, and
/// 60^5 x 300 bytes if copied out.
fn nested_shared_lists() -> Vec<u8> {
    let mut p = P::new();
    let mut top = p.short_str(&"y".repeat(300)).put();
    for _ in 0..5 {
        p.op(b"](").refs(top, 60).op(b"e");
        top = p.put();
    }
    p.done()
}

/// A client placeholder whose attributes, failed attributes and pickle attempts name the
/// placeholder of the level below, three levels deep: about 1.6 kB.
fn nested_placeholders() -> Vec<u8> {
    let mut p = P::new();
    let ctor = {
        p.short_global(
            "cideldill_client.custom_picklers",
            "_reconstruct_placeholder",
        );
        p.put()
    };
    let mut below = p.short_str(&"v".repeat(200)).put();
    for _ in 0..3 {
        p.refs(ctor, 1).op(b"}(");
        p.short_str("type_name")
            .short_str("F")
            .short_str("module")
            .short_str("m")
            .short_str("qualname")
            .short_str("F");
        for field in ["attributes", "failed_attributes"] {
            p.short_str(field).op(b"}(");
            for j in 0..30 {
                p.short_str(&format!("a{j}")).refs(below, 1);
            }
            p.op(b"u");
        }
        p.short_str("pickle_attempts")
            .op(b"](")
            .refs(below, 30)
            .op(b"e");
        p.op(b"u\x85R");
        below = p.put();
    }
    p.done()
}

/// The server's resident memory (`VmRSS` of `/proc/<pid>/status`), in bytes.
fn rss(server: &Server) -> u64 {
    proc_status_kib(server.pid(), "VmRSS") * 1024
}

/// Runs `f` (one request), checking that it is answered within `limit` and that the answer,
/// serialized, is at most `max_bytes`.
fn quick_and_small(
    what: &str,
    limit: Duration,
    max_bytes: usize,
    f: impl FnOnce() -> Value,
) -> Value {
    let start = Instant::now();
    let v = f();
    let took = start.elapsed();
    let size = v.to_string().len();
    eprintln!("{what}: {size} bytes in {took:?}");
    assert!(took < limit, "{what} took {took:?}");
    assert!(size <= max_bytes, "{what} answered {size} bytes");
    v
}

/// Renders are bounded; unoptimized test builds are slow, so the deadlines are generous (each
/// takes milliseconds optimized; before the budget, several seconds and gigabytes).
const SLOW: Duration = Duration::from_secs(8);

#[test]
fn shared_pickle_values_render_small_fast_and_within_memory() {
    let server = Server::start(&[]);
    let c = server.client();
    let rss_before = rss(&server);

    // 1. The exception whose 50,000 args are one string, as an argument of a paused call.
    let exc = shared_exception_args();
    assert!(exc.len() < 210_000);
    c.post_ok("/api/breakpoints", &json!({"function_name": "parse"}));
    let start = quick_and_small("call/start", SLOW, 4 << 20, || {
        c.post_ok(
            "/api/call/start",
            &call_start_body("parse", vec![raw_item(&exc, 2)], json!({})),
        )
    });
    assert_eq!(start["action"], "poll");
    let paused = quick_and_small("GET /api/paused", SLOW, 8 << 20, || c.get_ok("/api/paused"));
    let shown = paused.to_string();
    assert!(shown.contains("<cut: render budget"), "the cut is marked");
    let exc_cid = cideldill_server::cas::cid_of(&exc);
    let object = quick_and_small("GET /api/objects (exception)", SLOW, 8 << 20, || {
        c.get_ok(&format!("/api/objects/{exc_cid}"))
    });
    assert_eq!(object["value"]["type_name"], "ValueError");
    assert_eq!(object["type"], "ValueError");

    // 2. Nested shared lists: under a kilobyte of pickle.
    let lists = nested_shared_lists();
    assert!(lists.len() < 1000, "{} bytes", lists.len());
    let cid = cideldill_server::cas::cid_of(&lists);
    c.post_ok(
        "/api/call/start",
        &call_start_body("parse", vec![raw_item(&lists, 3)], json!({})),
    );
    let object = quick_and_small("GET /api/objects (lists)", SLOW, 1 << 20, || {
        c.get_ok(&format!("/api/objects/{cid}"))
    });
    assert_eq!(object["type"], "list");
    assert!(object["value"].as_str().is_some_and(|s| s.ends_with("...")));
    assert!(object["attributes"].to_string().contains("__cut__"));

    // 3. Function registration with nested placeholders as its data, and the listing.
    let ph = nested_placeholders();
    assert!(ph.len() < 2000, "{} bytes", ph.len());
    let item = raw_item(&ph, 4);
    quick_and_small("POST /api/functions", SLOW, 1 << 10, || {
        c.post_ok(
            "/api/functions",
            &json!({"function_name": "handler", "signature": "(req)",
                    "function_cid": item["cid"], "function_data": item["data"]}),
        )
    });
    let listing = quick_and_small("GET /api/functions", SLOW, 1 << 20, || {
        c.get_ok("/api/functions")
    });
    let meta = &listing["function_metadata"]["handler"];
    assert_eq!(meta["__cideldill_placeholder__"], true);
    assert!(meta.to_string().contains("<cut: render budget"));

    // 4. The call records show them all: completing the first call with the exception as its
    // result too.
    let call_id = start["call_id"].as_str().unwrap_or_default().to_owned();
    c.post_ok(
        &format!("/api/paused/{}/continue", start_pause(&start)),
        &json!({"action": "continue"}),
    );
    let done = raw_item(&exc, 9);
    c.post_ok(
        "/api/call/complete",
        &json!({"call_id": call_id, "timestamp": 1795311690.5, "status": "success",
                "process_pid": 16759, "process_start_time": 1795311683.7211661,
                "result_cid": done["cid"], "result_client_ref": 9, "result_data": done["data"]}),
    );
    quick_and_small("GET /api/call-records", SLOW, 16 << 20, || {
        c.get_ok("/api/call-records")
    });

    // The server kept nothing near what the values would be if copied out (gigabytes).
    let grown = rss(&server).saturating_sub(rss_before);
    eprintln!("RSS grew by {grown} bytes");
    assert!(grown < 256 << 20, "RSS grew by {grown} bytes");
}

fn start_pause(start: &Value) -> String {
    crate::support::pause_id(start)
}

/// A page of many records whose values each render to their whole budget is cut at the
/// response budget (32 MiB of rendered values): later values show a marker, the page stays
/// within the budget, and each value is still readable by its CID.
#[test]
fn a_listing_shows_at_most_the_response_budget_of_rendered_values() {
    let server = Server::start(&["--memory"]);
    let c = server.client();
    // A JSON item (as the browser client sends) of 100,000 different integers: its display
    // value is the list itself, about 3 MiB as the budget counts it.
    let big = Value::Array((0..100_000).map(|n| json!(n * 7)).collect());
    let text = big.to_string();
    let full = json!({"cid": cideldill_server::cas::cid_of(text.as_bytes()), "client_ref": 2,
                      "data": text, "serialization_format": "json"});
    let mut by_ref = full.clone();
    by_ref.as_object_mut().unwrap().remove("data");
    for n in 0..24 {
        let arg = if n == 0 { full.clone() } else { by_ref.clone() };
        let body = call_start_body("big", vec![arg], json!({}));
        let resp = c.post("/api/call/start", &body);
        let answer: Value = serde_json::from_slice(&resp.body).unwrap();
        assert_eq!(answer["action"], "continue", "{}", answer["error"]);
        let call_id = answer["call_id"].as_str().unwrap();
        c.post_ok("/api/call/complete", &complete_body(call_id, &json!(n)));
    }
    let t0 = Instant::now();
    let resp = c.get("/api/call-records?limit=100");
    assert_eq!(resp.status, 200);
    assert!(t0.elapsed() < Duration::from_secs(30));
    let bytes = resp.body.len();
    let page: Value = serde_json::from_slice(&resp.body).unwrap();
    let calls = page["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 24);
    let cut = calls
        .iter()
        .filter(|r| r["pretty_args"][0] == "<cut: response budget>")
        .count();
    // Each value is about 3 MiB as the budget counts it: some fit, the rest are cut.
    assert!((8..24).contains(&cut), "{cut} of 24 cut, {bytes} bytes");
    assert!(bytes < 40 << 20, "{bytes} bytes");
    // The newest come first and are shown whole (up to their own budget).
    assert!(
        calls[0]["pretty_args"][0].is_array(),
        "{}",
        &calls[0]["pretty_args"].to_string()[..80]
    );
    // A cut value is still there by its CID.
    let object = c.get(&format!("/api/objects/{}", full["cid"].as_str().unwrap()));
    assert_eq!(object.status, 200);
}
