//! What a web page can make the server keep through the browser-client endpoints (a page whose
//! origin the user allowed, as in the web UI, may call them): every byte counted, every field
//! bounded. Each test is an attack an outside probe
//! found (a page sending huge method names, stalled event readers, a flood of registrations, a
//! huge name reaching MCP sessions), run against the real binary, with variants; each failed
//! before the fix (memory in gigabytes, a dropped MCP session, an unbounded registry).

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{home, McpHttp, Proc};
use crate::support::{call_start_body, complete_body, raw_request, Client, Resp};

/// What the server may grow by, in KiB, from what these tests send (all refused or bounded).
const GROWTH_KIB: u64 = 96 * 1024;

fn start(tag: &str, args: &[&str]) -> (crate::support::TempDir, Proc) {
    let home = home(tag);
    let mut all = vec!["--memory"];
    all.extend_from_slice(args);
    let server = Proc::start(home.path(), &all, "warn");
    // The page's origin is allowed as a person would allow it on the Paused page: it may use
    // the browser-client endpoints, and nothing else.
    let allowed = server.client().post_ok(
        "/api/origins",
        &json!({"origin": "http://evil.example", "decision": "allow"}),
    );
    assert_eq!(allowed["status"], "ok", "{allowed}");
    (home, server)
}

/// A POST as a web page of another origin sends it.
fn page_post(c: &Client, path: &str, body: &Value) -> Resp {
    let text = body.to_string();
    let headers = [
        ("Connection", "close"),
        ("Content-Type", "application/json"),
        ("Origin", "http://evil.example"),
    ];
    c.raw(&raw_request(
        c.port,
        "POST",
        path,
        &headers,
        Some(text.as_bytes()),
    ))
}

fn assert_refused(r: &Resp, field: &str) {
    assert_eq!(
        r.status,
        400,
        "{field}: {}",
        &r.text()[..r.text().len().min(300)]
    );
    let v = r.json();
    assert_eq!(v["error"], "field_too_long", "{v}");
    assert!(
        v["field"].as_str().is_some_and(|f| f.contains(field)),
        "the answer names {field}: {v}"
    );
    assert!(
        v["max_bytes"].as_u64().is_some(),
        "the answer gives the limit: {v}"
    );
}

#[test]
fn client_bytes_huge_method_names_are_refused_and_memory_stays_bounded() {
    // The probe: 150 calls with 8 MiB names took RSS from 4 MB to 2.5 GB. Here some of them,
    // each started and completed (a record, an event, an interned name each): 20 here.
    let (_home, server) = start("bytes-names", &[]);
    let c = server.client();
    let (base, _) = server.rss_kib();
    let mut statuses = Vec::new();
    for n in 0..20 {
        let name = format!("{n}{}", "m".repeat(8 << 20));
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body(&name, vec![], json!({})),
        );
        if r.status == 200 {
            let id = r.json()["call_id"].as_str().unwrap_or_default().to_owned();
            page_post(&c, "/api/call/complete", &complete_body(&id, &json!(1)));
        }
        statuses.push(r);
    }
    let (rss, peak) = server.rss_kib();
    eprintln!(
        "huge names: RSS {} MiB (peak {} MiB), from {} MiB",
        rss / 1024,
        peak / 1024,
        base / 1024
    );
    assert!(rss < base + GROWTH_KIB, "RSS {rss} KiB from {base} KiB");
    for r in &statuses {
        assert_refused(r, "method_name");
    }
    assert_eq!(c.get("/api/status").status, 200, "the server still answers");
}

#[test]
fn client_bytes_with_few_records_no_name_stays_behind() {
    // Variant: `--max-records 5` (the window forgets the records) — one copy of every name
    // stayed in the interner, the open calls or the replay buffer. Names just within the
    // limit are accepted and leave nothing behind once their records are gone.
    let (_home, server) = start("bytes-few", &["--max-records", "5"]);
    let c = server.client();
    let (base, _) = server.rss_kib();
    for n in 0..20 {
        let name = format!("{n}{}", "m".repeat(4 << 20));
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body(&name, vec![], json!({})),
        );
        assert_refused(&r, "method_name");
    }
    for n in 0..2000 {
        let name = format!("{n:04}{}", "m".repeat(4000));
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body(&name, vec![], json!({})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let id = r.json()["call_id"].as_str().unwrap().to_owned();
        let done = page_post(&c, "/api/call/complete", &complete_body(&id, &json!(n)));
        assert_eq!(done.status, 200, "{}", done.text());
    }
    let (rss, _) = server.rss_kib();
    eprintln!(
        "few records: RSS {} MiB from {} MiB",
        rss / 1024,
        base / 1024
    );
    assert!(rss < base + GROWTH_KIB, "RSS {rss} KiB from {base} KiB");
}

#[test]
fn client_bytes_every_client_field_is_bounded() {
    // Variants: each string a page or the Python client sends, on each client endpoint.
    let (_home, server) = start("bytes-fields", &[]);
    let c = server.client();
    let big = "x".repeat(2 << 20);
    let with = |mut body: Value, key: &str, value: Value| {
        body[key] = value;
        body
    };
    let start = call_start_body("f", vec![], json!({}));
    for (key, value) in [
        ("signature", json!(big)),
        ("page_url", json!(big)),
        ("call_site", json!({"timestamp": 1.0, "stack": big})),
        ("method_name", json!("m".repeat(5000))),
    ] {
        assert_refused(
            &page_post(&c, "/api/call/start", &with(start.clone(), key, value)),
            key,
        );
    }
    let kw = with(
        start.clone(),
        "kwargs",
        json!({"k".repeat(5000): {"cid": "c"}}),
    );
    assert_refused(&page_post(&c, "/api/call/start", &kw), "kwargs");
    let item = with(
        start.clone(),
        "args",
        json!([{"cid": "c", "client_ref": big}]),
    );
    assert_refused(
        &page_post(&c, "/api/call/start", &item),
        "args[0].client_ref",
    );

    let done = complete_body("1.0-001", &json!(1));
    for (key, value) in [
        ("status", json!("s".repeat(5000))),
        ("call_id", json!("c".repeat(5000))),
    ] {
        assert_refused(
            &page_post(&c, "/api/call/complete", &with(done.clone(), key, value)),
            key,
        );
    }

    let event = json!({"process_pid": 1, "process_start_time": 1.0, "event_type": "e"});
    for (key, value) in [
        ("event_type", json!("e".repeat(5000))),
        ("method_name", json!("m".repeat(5000))),
        ("pretty_args", json!([big])),
        ("page_url", json!(big)),
    ] {
        // A Python-client endpoint: pages get 403 there, scripts are bounded the same.
        assert_refused(
            &c.post("/api/call/event", &with(event.clone(), key, value)),
            key,
        );
    }

    let function = json!({"function_name": "f"});
    for (key, value) in [
        ("signature", json!(big)),
        ("function_metadata", json!({"m": big})),
        ("function_client_ref", json!("r".repeat(5000))),
    ] {
        assert_refused(
            &page_post(&c, "/api/functions", &with(function.clone(), key, value)),
            key,
        );
    }

    let repl = json!({"eval_id": "e", "session_id": "s", "pause_id": "p"});
    for (key, value) in [
        ("eval_id", json!("e".repeat(5000))),
        ("pause_id", json!("p".repeat(5000))),
    ] {
        assert_refused(
            &page_post(&c, "/api/call/repl-result", &with(repl.clone(), key, value)),
            key,
        );
    }
    // What a program may legitimately send long is cut to the limit instead (the Python
    // client exits on any 400): an exception's message, a deep stack, a REPL answer.
    for (key, value) in [
        ("stdout", json!(big)),
        ("result", json!(big)),
        ("error", json!(big)),
    ] {
        let r = page_post(&c, "/api/call/repl-result", &with(repl.clone(), key, value));
        assert_eq!(
            r.json()["error"],
            "session_not_found",
            "{key} is cut, then the eval is looked up"
        );
    }
    let frames: Vec<Value> = (0..20_000)
        .map(|n| json!({"filename": "/home/me/app.py", "lineno": n, "function": "f", "code_context": "f(n - 1)"}))
        .collect();
    let deep = with(
        start.clone(),
        "call_site",
        json!({"timestamp": 1.0, "stack_trace": frames}),
    );
    let r = page_post(&c, "/api/call/start", &deep);
    assert_eq!(r.status, 200, "{}", &r.text()[..r.text().len().min(300)]);
    let id = r.json()["call_id"].as_str().unwrap().to_owned();
    let mut failed = complete_body(&id, &json!(1));
    failed["status"] = json!("exception");
    failed["exception_type"] = json!("ValueError");
    failed["exception_message"] = json!(big);
    let r = page_post(&c, "/api/call/complete", &failed);
    assert_eq!(r.status, 200, "{}", &r.text()[..r.text().len().min(300)]);
    let records = c.get_ok("/api/call-records?function=f&limit=1");
    let record = &records["calls"][0];
    let kept = record["call_site"]["stack_trace"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(
        kept > 1000 && kept < 20_000,
        "the innermost frames that fit: {kept}"
    );
    assert!(
        record.to_string().contains("...<cut: "),
        "the message is cut, and says so"
    );
    // The cut message shows a few times (the exception's summary, its message), the cut
    // stack once: bounded by the field limit, not by what was sent.
    let len = record.to_string().len();
    assert!(len < 6 << 20, "{len} bytes");
    // Payload texts are bounded by the body alone: a 2 MiB result payload is fine.
    let r = page_post(
        &c,
        "/api/call/start",
        &call_start_body("ok", vec![], json!({})),
    );
    let id = r.json()["call_id"].as_str().unwrap().to_owned();
    let payload = complete_body(&id, &json!("y".repeat(2 << 20)));
    assert_eq!(page_post(&c, "/api/call/complete", &payload).status, 200);
}

#[test]
fn client_bytes_stalled_event_readers_do_not_multiply_names() {
    // The probe: 31 `/api/events` readers that never read, and 100 calls with 1 MiB names:
    // 3.5 GB (each event copied once per reader). Here 20 readers and 20 such calls, then
    // 300 calls with names at the limit, whose events the readers share.
    let (_home, server) = start("bytes-events", &[]);
    let c = server.client();
    let mut readers: Vec<TcpStream> = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        let req = raw_request(
            server.port,
            "GET",
            "/api/events",
            &[("Accept", "text/event-stream")],
            None,
        );
        std::io::Write::write_all(&mut s, &req).expect("send");
        // Read the head only, then never again.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("a stream head");
        assert_eq!(&head[9..12], b"200");
        readers.push(s);
    }
    let (base, _) = server.rss_kib();
    let mut refused = 0;
    for n in 0..20 {
        let name = format!("{n}{}", "e".repeat(1 << 20));
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body(&name, vec![], json!({})),
        );
        if r.status == 200 {
            let id = r.json()["call_id"].as_str().unwrap_or_default().to_owned();
            page_post(&c, "/api/call/complete", &complete_body(&id, &json!(1)));
        } else {
            assert_refused(&r, "method_name");
            refused += 1;
        }
    }
    let name = "e".repeat(4000);
    for n in 0..300 {
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body(&name, vec![], json!({})),
        );
        let id = r.json()["call_id"].as_str().unwrap().to_owned();
        page_post(&c, "/api/call/complete", &complete_body(&id, &json!(n)));
    }
    let (rss, peak) = server.rss_kib();
    eprintln!(
        "stalled readers: RSS {} MiB (peak {} MiB) from {} MiB",
        rss / 1024,
        peak / 1024,
        base / 1024
    );
    assert!(rss < base + GROWTH_KIB, "RSS {rss} KiB from {base} KiB");
    assert_eq!(refused, 20);
    drop(readers);
}

#[test]
fn client_bytes_a_huge_name_does_not_drop_mcp_sessions() {
    // The probe: one call with a 9 MiB name dropped every MCP HTTP session (its notification
    // was larger than a session's queue) and made a joined `--mcp` agent exit 1.
    let (_home, server) = start("bytes-mcp", &[]);
    let c = server.client();
    let mcp = McpHttp::open(server.port).expect("an MCP session");
    mcp.request("logging/setLevel", json!({"level": "debug"}))
        .expect("setLevel");
    let name = "n".repeat(9 << 20);
    for body in [
        call_start_body(&name, vec![], json!({})),
        json!({"process_pid": 1, "process_start_time": 1.0, "event_type": name}),
    ] {
        let path = if body.get("event_type").is_some() {
            "/api/call/event"
        } else {
            "/api/call/start"
        };
        let r = c.post(path, &body);
        if r.status == 200 {
            if let Some(id) = r.json()["call_id"].as_str() {
                page_post(&c, "/api/call/complete", &complete_body(id, &json!(1)));
            }
        }
    }
    // The session is still there and answers.
    let listed = mcp.request("tools/list", json!({}));
    assert!(
        listed
            .as_ref()
            .is_ok_and(|v| v["result"]["tools"].is_array()),
        "the session survived: {listed:?}"
    );
}

#[test]
fn client_bytes_the_function_registry_is_bounded_in_bytes() {
    // The probe: 5,000 registrations of long signatures and metadata reached 706 MB, and
    // `GET /api/functions` answered 713 MB. Here 1,500 registrations of 30 KiB each.
    let (_home, server) = start("bytes-functions", &[]);
    let c = server.client();
    let (base, _) = server.rss_kib();
    let (mut kept, mut refused) = (0, 0);
    for n in 0..1500 {
        let body = json!({
            "function_name": format!("f{n:05}"),
            "signature": format!("({})", "a".repeat(15 << 10)),
            "function_metadata": {"doc": "d".repeat(15 << 10)},
        });
        let r = page_post(&c, "/api/functions", &body);
        match r.status {
            200 => kept += 1,
            400 => {
                assert_eq!(r.json()["error"], "too_many_functions", "{}", r.text());
                refused += 1;
            }
            other => panic!("registration {n}: {other} {}", r.text()),
        }
    }
    let (kept_rss, _) = server.rss_kib();
    let listing = c.get("/api/functions");
    assert_eq!(listing.status, 200);
    let (rss, _) = server.rss_kib();
    eprintln!(
        "registry: {kept} kept, {refused} refused, listing {} KiB, RSS {} MiB after the \
         registrations, {} MiB after the whole listing, from {} MiB",
        listing.body.len() / 1024,
        kept_rss / 1024,
        rss / 1024,
        base / 1024
    );
    assert!(
        kept_rss < base + 64 * 1024,
        "RSS {kept_rss} KiB from {base} KiB"
    );
    assert!(refused > 0, "the registry is bounded in bytes");
    assert!(
        listing.body.len() < 40 << 20,
        "the whole listing is bounded: {} bytes",
        listing.body.len()
    );
    // A page of it.
    let page = c.get_ok("/api/functions?limit=10&offset=5");
    assert_eq!(
        page["functions"].as_array().map(Vec::len),
        Some(10),
        "{page}"
    );
    assert_eq!(page["functions"][0], "f00005");
    assert_eq!(page["total"], kept);
    // The whole listing is built in memory (the registry's copy, its JSON): bounded too.
    assert!(rss < base + 2 * GROWTH_KIB, "RSS {rss} KiB from {base} KiB");
}

#[test]
fn client_bytes_dot_segment_names_never_reach_a_url_path() {
    // The probe: a function named `..` got a row on the breakpoints page whose forms post to
    // `/api/breakpoints/../behavior`, which the browser resolves to `/api/behavior`: changing
    // the row's Before select set the global default to `go`. Such names are refused wherever
    // a name enters. Variants: registration, a call, a client event, a breakpoint.
    let (_home, server) = start("bytes-dots", &[]);
    let c = server.client();
    for name in [".", ".."] {
        for (path, body) in [
            (
                "/api/functions",
                json!({"function_name": name, "signature": "()"}),
            ),
            ("/api/call/start", call_start_body(name, vec![], json!({}))),
            (
                "/api/call/event",
                json!({"process_pid": 1, "process_start_time": 1.0, "method_name": name}),
            ),
        ] {
            let r = c.post(path, &body);
            assert_eq!(r.status, 400, "{path} {name}: {}", r.text());
            assert_eq!(r.json()["error"], "invalid_function_name", "{path}");
        }
        let r = c.post("/api/breakpoints", &json!({"function_name": name}));
        assert_eq!(r.status, 400, "a breakpoint named {name}: {}", r.text());
    }
    assert_eq!(c.get_ok("/api/functions")["functions"], json!([]));
    let page = c.get("/breakpoints").text();
    assert!(
        !page.contains("/api/breakpoints/../"),
        "no dot segment in the page"
    );
    // Names that only look like dots stay names, encoded in the page's URLs.
    c.post_ok("/api/breakpoints", &json!({"function_name": "..."}));
    c.post_ok("/api/breakpoints", &json!({"function_name": "%2E%2E"}));
    let page = c.get("/breakpoints").text();
    assert!(
        page.contains("data-api=\"/api/breakpoints/.../behavior\""),
        "{page}"
    );
    assert!(page.contains("data-api=\"/api/breakpoints/%252E%252E/behavior\""));
    let r = c.post_ok(
        "/api/breakpoints/%252E%252E/behavior",
        &json!({"behavior": "go"}),
    );
    assert_eq!(r["function_name"], "%2E%2E", "{r}");
    assert_eq!(
        c.get_ok("/api/behavior")["behavior"],
        "stop",
        "the global default is unchanged"
    );
}

#[test]
fn client_bytes_a_listing_of_pauses_with_payloads_is_bounded() {
    // `GET /api/paused` (with payloads: the Python client's REST default, fetched every 60 s)
    // read every paused call's payloads back: 20 pauses of 3 MiB arguments answered ~80 MB.
    // Past a budget, items are listed by CID only (the client reads ids, times and names).
    let (_home, server) = start("bytes-paused", &[]);
    let c = server.client();
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "big", "behavior": "stop"}),
    );
    for n in 0..20 {
        let arg = crate::support::item(&json!(format!("{n}{}", "p".repeat(3 << 20))), 2);
        let r = page_post(
            &c,
            "/api/call/start",
            &call_start_body("big", vec![arg], json!({})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["action"], "poll", "the call pauses");
    }
    let listing = c.get("/api/paused");
    assert_eq!(listing.status, 200);
    let v = listing.json();
    let paused = v["paused"].as_array().expect("paused");
    assert_eq!(paused.len(), 20, "every pause is listed");
    assert!(
        paused[0]["call_data"]["args"][0]["data"].is_string(),
        "the first keep their data"
    );
    assert!(paused
        .iter()
        .all(|p| p["call_data"]["args"][0]["cid"].is_string()));
    eprintln!("paused listing: {} KiB", listing.body.len() / 1024);
    assert!(
        listing.body.len() < 40 << 20,
        "the listing is bounded: {} bytes",
        listing.body.len()
    );
}
