//! A page's pauses are bounded per origin: a page the user allowed may report calls, and with
//! a breakpoint on a function (and the default behaviour `stop`) every call it reports pauses
//! and waits for a person. A page looping calls piled up pauses without end. Now a browser
//! origin holds at most `MAX_PAUSES_PER_ORIGIN` pauses (before and after together); a call past
//! it runs (answered `continue`) and its record says why (`resolution` by `pause_limit`).
//! Another origin and programs still pause, and a person resuming some of the page's pauses
//! lets its calls pause again. Failed before the fix: every call paused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cideldill_server::limits::{MAX_PAUSED_BYTES_PER_ORIGIN, MAX_PAUSES_PER_ORIGIN};

use crate::harness::{home, Proc};
use crate::support::{call_start_body, complete_body, http, item, pause_id, Client, Resp};

const EVIL: &str = "http://evil.example";
const OTHER: &str = "http://other.example";

fn page_post(c: &Client, origin: &str, path: &str, body: &Value) -> Resp {
    let text = body.to_string();
    http(
        c.port,
        "POST",
        path,
        &[("Content-Type", "application/json"), ("Origin", origin)],
        Some(&text),
    )
}

/// Current pauses by origin: (of `EVIL`, of `OTHER`, of programs).
fn paused_by_origin(c: &Client) -> (usize, usize, usize, Vec<String>) {
    let listing = c.get_ok("/api/paused");
    let paused = listing["paused"].as_array().expect("paused").clone();
    let of = |o: Option<&str>| {
        paused
            .iter()
            .filter(|p| p["call_data"]["origin"].as_str() == o)
            .count()
    };
    let evil_ids = paused
        .iter()
        .filter(|p| p["call_data"]["origin"] == EVIL && p["when"] == "before")
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    (of(Some(EVIL)), of(Some(OTHER)), of(None), evil_ids)
}

/// How many times the server logged the start of a burst of calls let run.
fn bursts_logged(server: &Proc) -> usize {
    server
        .stderr()
        .matches("the most one browser origin may hold")
        .count()
}

#[test]
fn page_pauses_are_bounded_per_origin_and_a_person_makes_room() {
    let home = home("page-pauses");
    let server = Proc::start(home.path(), &["--memory"], "info");
    let c = server.client();
    for origin in [EVIL, OTHER] {
        let r = c.post_ok(
            "/api/origins",
            &json!({"origin": origin, "decision": "allow"}),
        );
        assert_eq!(r["status"], "ok", "{r}");
    }
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));

    // The attack: 4 threads of the page start calls of `f`, each with a new call id, and
    // complete those that were let run (a completion asks for an after-pause too). A watcher
    // reads the paused list meanwhile: the page never holds more than the bound.
    const CALLS: usize = 4 * 60;
    let started = Arc::new(AtomicUsize::new(0));
    let continued = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + Duration::from_secs(120);
    let watcher = {
        let done = done.clone();
        let port = server.port;
        std::thread::spawn(move || {
            let c = Client { port };
            let mut most = 0;
            while !done.load(Ordering::SeqCst) && Instant::now() < until {
                let (evil, ..) = paused_by_origin(&c);
                most = most.max(evil);
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    let attackers: Vec<_> = (0..4)
        .map(|t| {
            let (started, continued) = (started.clone(), continued.clone());
            let port = server.port;
            std::thread::spawn(move || {
                let c = Client { port };
                for n in 0..CALLS / 4 {
                    assert!(Instant::now() < until, "the attack took too long");
                    let arg = item(&json!(format!("{t}-{n}")), 2);
                    let r = page_post(
                        &c,
                        EVIL,
                        "/api/call/start",
                        &call_start_body("f", vec![arg], json!({})),
                    );
                    assert_eq!(r.status, 200, "{}", r.text());
                    started.fetch_add(1, Ordering::SeqCst);
                    let a = r.json();
                    if a["action"] == "continue" {
                        continued.fetch_add(1, Ordering::SeqCst);
                        let id = a["call_id"].as_str().unwrap();
                        let done = page_post(
                            &c,
                            EVIL,
                            "/api/call/complete",
                            &complete_body(id, &json!(n)),
                        );
                        assert_eq!(done.status, 200, "{}", done.text());
                        assert_eq!(done.json(), json!({"status": "ok"}), "no after-pause");
                    } else {
                        assert_eq!(a["action"], "poll", "{a}");
                    }
                }
            })
        })
        .collect();
    for a in attackers {
        a.join().expect("an attacker");
    }
    done.store(true, Ordering::SeqCst);
    let most = watcher.join().expect("the watcher");
    let (evil, other, programs, evil_ids) = paused_by_origin(&c);
    eprintln!(
        "page pauses: {} calls started, {} let run, the page held at most {most} pauses \
         (now {evil})",
        started.load(Ordering::SeqCst),
        continued.load(Ordering::SeqCst)
    );
    assert_eq!(
        evil, MAX_PAUSES_PER_ORIGIN,
        "the page holds the bound, no more"
    );
    assert!(most <= MAX_PAUSES_PER_ORIGIN, "at most {most}");
    assert_eq!(
        continued.load(Ordering::SeqCst),
        CALLS - MAX_PAUSES_PER_ORIGIN
    );
    assert_eq!((other, programs), (0, 0));
    let status = c.get_ok("/api/status");
    assert_eq!(
        status["pauses_limited"].as_u64(),
        Some((2 * (CALLS - MAX_PAUSES_PER_ORIGIN)) as u64),
        "each call let run counted at its start and its completion: {status}"
    );
    // The records of the calls let run say why.
    let records = c.get_ok("/api/call-records?function=f&limit=5");
    for r in records["calls"].as_array().unwrap() {
        assert_eq!(r["origin"], EVIL);
        assert_eq!(r["resolution"]["by"], "pause_limit", "{}", r["resolution"]);
        assert_eq!(r["resolution"]["action"], "continue");
    }
    // Logged once for the whole burst, not per call.
    assert_eq!(bursts_logged(&server), 1, "{}", server.stderr());

    // Another origin and a program still pause.
    let r = page_post(
        &c,
        OTHER,
        "/api/call/start",
        &call_start_body("f", vec![], json!({})),
    );
    assert_eq!(r.json()["action"], "poll", "{}", r.text());
    let r = c.post_ok("/api/call/start", &call_start_body("f", vec![], json!({})));
    pause_id(&r);

    // A person resumes 5 of the page's pauses: 5 more of its calls pause, the next runs.
    for id in evil_ids.iter().take(5) {
        c.post_ok(
            &format!("/api/paused/{id}/continue"),
            &json!({"action": "continue"}),
        );
    }
    for n in 0..6 {
        let r = page_post(
            &c,
            EVIL,
            "/api/call/start",
            &call_start_body("f", vec![], json!({})),
        );
        let want = if n < 5 { "poll" } else { "continue" };
        assert_eq!(r.json()["action"], want, "call {n} after the resumes");
    }
    let (evil, other, programs, _) = paused_by_origin(&c);
    assert_eq!((evil, other, programs), (MAX_PAUSES_PER_ORIGIN, 1, 1));
    assert_eq!(bursts_logged(&server), 2, "a new burst is logged once");
    assert_eq!(c.get("/api/status").status, 200, "the server still answers");
}

#[test]
fn page_pauses_are_bounded_in_bytes_too() {
    // Variant: calls that keep about 2 MB each (a signature and a page URL near the field
    // limit): the page holds what fits in the bytes, fewer than the count.
    let home = home("page-pause-bytes");
    let server = Proc::start(home.path(), &["--memory"], "warn");
    let c = server.client();
    c.post_ok(
        "/api/origins",
        &json!({"origin": EVIL, "decision": "allow"}),
    );
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let (base, _) = server.rss_kib();
    let mut polled = 0;
    for n in 0..60 {
        let mut body = call_start_body("f", vec![], json!({}));
        body["signature"] = json!(format!("({n}{})", "a".repeat(1_000_000)));
        body["page_url"] = json!(format!("http://evil.example/{n}{}", "u".repeat(1_000_000)));
        let r = page_post(&c, EVIL, "/api/call/start", &body);
        assert_eq!(r.status, 200, "{}", &r.text()[..r.text().len().min(300)]);
        if r.json()["action"] == "poll" {
            polled += 1;
        }
    }
    let (evil, ..) = paused_by_origin(&c);
    let (rss, _) = server.rss_kib();
    eprintln!(
        "page pause bytes: {polled} of 60 calls paused, RSS {} MiB from {} MiB",
        rss / 1024,
        base / 1024
    );
    assert_eq!(evil, polled);
    // Each call keeps a little more than its two 1,000,000-byte fields.
    let most = MAX_PAUSED_BYTES_PER_ORIGIN / 2_000_000;
    assert!(
        polled > 10 && polled <= most,
        "{polled} pauses of 2 MB calls (at most {most})"
    );
    let status = c.get_ok("/api/status");
    assert_eq!(status["pauses_limited"].as_u64(), Some(60 - polled as u64));
}
