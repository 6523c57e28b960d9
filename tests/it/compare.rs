//! Comparing two runs over REST and MCP: two programs' calls posted over the client protocol
//! (the second run passes one argument differently and makes one extra call), aligned so that
//! the extra call shifts nothing else, with the first divergence named.

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{item, Client, Server};

const START: f64 = 1795311683.5;

fn key(pid: i64) -> String {
    format!("{START:.6}+{pid}")
}

fn frame(line: u64, function: &str) -> Value {
    json!({"filename": "/srv/app.py", "lineno": line, "function": function})
}

/// One call of process `pid`, started at `at` with `stack`; completed by `finish`.
fn begin(c: &Client, pid: i64, method: &str, args: &[Value], at: f64, stack: Value) -> String {
    let items: Vec<Value> = args
        .iter()
        .enumerate()
        .map(|(i, v)| item(v, 100 + i as u64))
        .collect();
    let r = c.post_ok(
        "/api/call/start",
        &json!({"method_name": method, "args": items, "kwargs": {},
                "call_site": {"timestamp": at, "stack_trace": stack},
                "process_pid": pid, "process_start_time": START}),
    );
    r["call_id"].as_str().unwrap().to_owned()
}

fn finish(c: &Client, pid: i64, call_id: &str, result: &Value, at: f64) {
    let r = item(result, 9);
    c.post_ok(
        "/api/call/complete",
        &json!({"call_id": call_id, "timestamp": at, "status": "success",
                "process_pid": pid, "process_start_time": START,
                "result_cid": r["cid"], "result_data": r["data"]}),
    );
}

/// A run: main() calls add(1, y), then (when `extra`) log("x"), then mul(3, 4).
fn run(c: &Client, pid: i64, y: i64, extra: bool) {
    let t = 100.0 * pid as f64;
    let main = begin(c, pid, "main", &[], t, json!([frame(20, "<module>")]));
    let inner = || json!([frame(3, "main"), frame(20, "<module>")]);
    let add = begin(c, pid, "add", &[json!(1), json!(y)], t + 1.0, inner());
    finish(c, pid, &add, &json!(1 + y), t + 1.5);
    if extra {
        let log = begin(c, pid, "log", &[json!("x")], t + 2.0, inner());
        finish(c, pid, &log, &Value::Null, t + 2.5);
    }
    let mul = begin(c, pid, "mul", &[json!(3), json!(4)], t + 3.0, inner());
    finish(c, pid, &mul, &json!(12), t + 3.5);
    finish(c, pid, &main, &json!(0), t + 4.0);
}

fn marks(pair: &Value) -> Vec<&str> {
    pair["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect()
}

/// What both faces answer for the two runs.
fn check(r: &Value) {
    assert_eq!(r["truncated"], false, "{r}");
    assert_eq!(
        (r["a"]["calls"].as_u64(), r["b"]["calls"].as_u64()),
        (Some(3), Some(4))
    );
    let pairs = r["pairs"].as_array().unwrap();
    let functions: Vec<&str> = pairs
        .iter()
        .map(|p| p["function"].as_str().unwrap())
        .collect();
    assert_eq!(functions, ["main", "add", "log", "mul"], "{r}");
    assert_eq!(marks(&pairs[0]), ["same"]);
    assert_eq!(
        marks(&pairs[1]),
        ["different_arguments", "different_result"]
    );
    assert_eq!(marks(&pairs[2]), ["only_in_b"]);
    assert!(pairs[2]["a"].is_null() && pairs[2]["b"]["function"] == "log");
    assert_eq!(marks(&pairs[3]), ["same"], "the extra call shifts nothing");
    assert_eq!(pairs[3]["a"]["depth"], 1);
    // The changed argument: the same first one, a different second one (another CID).
    let (a, b) = (&pairs[1]["a"]["args"], &pairs[1]["b"]["args"]);
    assert_eq!(a[0]["cid"], b[0]["cid"]);
    assert_ne!(a[1]["cid"], b[1]["cid"]);
    assert_eq!(
        (a[1]["shown"].as_str(), b[1]["shown"].as_str()),
        (Some("2"), Some("5"))
    );
    assert_eq!(pairs[1]["b"]["result"]["shown"], "6");
    assert_eq!(
        r["first_divergence"],
        json!({"index": 1, "function": "add", "marks": ["different_arguments", "different_result"]})
    );
    assert_eq!(
        r["counts"],
        json!({"same": 2, "different_arguments": 1, "different_result": 1,
               "different_exception": 0, "only_in_a": 0, "only_in_b": 1})
    );
    assert_eq!(r["total_pairs"], 4);
}

#[test]
fn two_runs_are_aligned_and_their_first_divergence_named_over_rest() {
    let s = Server::start(&[]);
    let c = s.client();
    run(&c, 41, 2, false);
    run(&c, 42, 5, true);
    let path = |extra: &str| {
        format!(
            "/api/runs/compare?a={}&b={}{extra}",
            key(41).replace('+', "%2B"),
            key(42).replace('+', "%2B")
        )
    };
    check(&c.get_ok(&path("")));
    // A page of the pairs; the counts and the first divergence still cover all.
    let page = c.get_ok(&path("&offset=2&limit=1"));
    assert_eq!(page["pairs"].as_array().unwrap().len(), 1);
    assert_eq!(page["pairs"][0]["function"], "log");
    assert_eq!(page["pairs"][0]["index"], 2);
    assert_eq!(page["first_divergence"]["index"], 1);
    // A run compared with itself is the same throughout.
    let same = c.get_ok(&format!(
        "/api/runs/compare?a={0}&b={0}",
        key(42).replace('+', "%2B")
    ));
    assert!(same["first_divergence"].is_null());
    assert_eq!(same["counts"]["same"], 4);
    // Bad input: named.
    let r = c.get(&format!(
        "/api/runs/compare?a={}",
        key(41).replace('+', "%2B")
    ));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["parameter"], "b");
    let r = c.get(&format!(
        "/api/runs/compare?a=nope&b={}",
        key(41).replace('+', "%2B")
    ));
    assert_eq!(r.status, 404);
    assert_eq!(
        (r.json()["error"].as_str(), r.json()["parameter"].as_str()),
        (Some("run_not_found"), Some("a"))
    );
    let r = c.get(&path("&limit=0x"));
    assert_eq!(r.status, 400);
}

#[test]
fn two_runs_are_compared_over_mcp() {
    let s = McpServer::initialized("2025-11-25");
    let c = s.http();
    run(&c, 41, 2, false);
    run(&c, 42, 5, true);
    let r = s.call_ok(
        "breakpoint_compare_runs",
        json!({"a": key(41), "b": key(42)}),
    );
    check(&r);
    let e = s.call_err(
        "breakpoint_compare_runs",
        json!({"a": key(41), "b": "nope"}),
    );
    assert_eq!(e["error"], "run_not_found");
    assert_eq!(e["parameter"], "b");
    let e = s.call_err("breakpoint_compare_runs", json!({"a": key(41)}));
    assert_eq!(e["error"], "missing_parameter");
}

fn html(c: &Client, path: &str) -> String {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
        c.port
    );
    let r = c.raw(req.as_bytes());
    assert_eq!(r.status, 200, "GET {path}");
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    r.text()
}

#[test]
fn the_compare_page_shows_the_runs_side_by_side() {
    let s = Server::start(&[]);
    let c = s.client();
    run(&c, 41, 2, false);
    run(&c, 42, 5, true);
    // The form lists both runs.
    let page = html(&c, "/runs/compare");
    assert!(page.contains(&format!("value=\"{}\"", key(41))), "{page}");
    assert!(page.contains(&format!("value=\"{}\"", key(42))));
    // A `+` left unencoded in the address reads as a space: it still names the run.
    let page = html(&c, &format!("/runs/compare?a={}&b={}", key(41), key(42)));
    assert!(
        page.contains("First divergence: <a href=\"#pair-1\">pair 2, add</a> (different arguments, different result)"),
        "{page}"
    );
    assert!(page.contains("id=\"pair-2\" class=\"diff only\""));
    assert!(page.contains("only in run B"));
    // The changed argument is marked with a sign and links to its object.
    let b_arg = item(&json!(5), 0)["cid"].as_str().unwrap().to_owned();
    assert!(
        page.contains(&format!("href=\"/object/{b_arg}\"")),
        "{page}"
    );
    assert!(page.contains("class=\"value changed\">5</code>"), "{page}");
    assert!(page.contains("<option value=\"1795311683.500000+41\" selected>"));
    // An unknown run is said so on the page.
    let page = html(&c, &format!("/runs/compare?a=nope&b={}", key(41)));
    assert!(page.contains("role=\"alert\">no run nope"), "{page}");
}

#[test]
fn runs_in_a_database_file_are_compared_after_a_restart() {
    let home = crate::support::TempDir::new("compare-db");
    let db = home.path().join("runs.db");
    let db = db.to_str().unwrap().to_owned();
    let path = format!(
        "/api/runs/compare?a={}&b={}",
        key(41).replace('+', "%2B"),
        key(42).replace('+', "%2B")
    );
    let mut server = Server::start_in(home.path(), &["--db", &db]);
    let c = server.client();
    run(&c, 41, 2, false);
    run(&c, 42, 5, true);
    check(&c.get_ok(&path));
    server.signal_and_wait("-KILL");
    // Read back from the file by the index built when it opens.
    let server = Server::start_in(home.path(), &["--db", &db]);
    check(&server.client().get_ok(&path));
}

#[test]
fn two_runs_of_the_unchanged_demo_compare_as_the_same() {
    let server = Server::start(&[]);
    let c = server.client();
    c.post_ok("/api/behavior", &json!({"behavior": "go"}));
    let mut keys = Vec::new();
    for run in 0..2 {
        let dir = server.home.join(format!("run-{run}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = crate::demo::demo_on(server.port, &dir, &[]);
        let status = crate::support::wait_for("the demo to finish", || child.try_wait().unwrap());
        assert!(status.success(), "{:?}", crate::demo::output_in(&dir, &[]));
        let page = c.get_ok("/api/call-records?function=describe");
        let key = page["calls"][0]["process_key"].as_str().unwrap().to_owned();
        keys.push(key);
    }
    assert_ne!(keys[0], keys[1]);
    // describe(channel) takes an object holding a socket, sent as placeholders whose texts
    // name memory addresses: compared by type and attributes, the two runs are the same.
    // (A `+` left in the query reads as a space, which the server takes for the key's `+`.)
    let r = c.get_ok(&format!("/api/runs/compare?a={}&b={}", keys[0], keys[1]));
    assert_eq!(r["first_divergence"], Value::Null, "{r}");
    assert_eq!(r["counts"]["same"], r["total_pairs"], "{r}");
    // The five calls and the two pickle_error events describe's argument makes the client send
    // (their object_id is the object's address).
    assert_eq!(r["total_pairs"], 7, "{r}");
    // The page: arguments named from the signature, and no value marked as differing.
    let page = c
        .get(&format!("/runs/compare?a={}&b={}", keys[0], keys[1]))
        .text();
    assert!(
        page.contains("<dt>x</dt>") && page.contains("<dt>channel</dt>"),
        "{page}"
    );
    assert!(!page.contains("arg 0"), "{page}");
    assert!(!page.contains("diff-mark"), "{page}");
}

fn enc(key: &str) -> String {
    key.replace('+', "%2B")
}

#[test]
fn the_compare_page_names_labelled_runs_by_their_labels_under_runs() {
    let s = Server::start(&[]);
    let c = s.client();
    run(&c, 41, 2, false);
    run(&c, 42, 5, true);
    c.post_ok(
        &format!("/api/runs/{}/label", enc(&key(41))),
        &json!({"label": "baseline <b>"}),
    );
    let page = html(&c, &format!("/runs/compare?a={}&b={}", key(41), key(42)));
    // The navigation marks Runs, not the call tree.
    assert!(
        page.contains("<a href=\"/runs\" aria-current=\"page\">Runs</a>"),
        "{page}"
    );
    assert!(!page.contains("<a href=\"/call-tree\" aria-current"));
    // The pickers: the label first, the key still there.
    assert!(
        page.contains(&format!(
            "<option value=\"{0}\" selected>baseline &lt;b&gt; · app.py · pid 41 · 3 calls · {0}</option>",
            key(41)
        )),
        "{page}"
    );
    // The header: the label, the key in small print beside it; an unlabelled run by its key.
    assert!(
        page.contains(&format!(
            "title=\"run {0}\">baseline &lt;b&gt;</a> <small class=\"run-key\">{0}</small>",
            key(41)
        )),
        "{page}"
    );
    assert!(page.contains(&format!("<code>{}</code></a> (4 calls)", key(42))));
    // The Runs page's confirmation and the call tree's list name it by its label too.
    let runs = html(&c, "/runs");
    assert!(
        runs.contains("Really delete run “baseline &lt;b&gt;” (3 calls)?"),
        "{runs}"
    );
    let tree = html(&c, "/call-tree");
    assert!(
        tree.contains("<span class=\"badge run-label\">baseline &lt;b&gt;</span>"),
        "{tree}"
    );
    // A bad offset is said so, not a panic or a silent first page.
    let page = html(
        &c,
        &format!("/runs/compare?a={}&b={}&offset=-3", key(41), key(42)),
    );
    assert!(
        page.contains("role=\"alert\">offset must be a number of pairs"),
        "{page}"
    );
}

/// Runs of `n` calls of process 51 and 52 (in parallel), each call's argument a 300-character
/// text; run 52's call `diverge` passes another one.
fn long_runs(c: &Client, n: usize, diverge: usize) {
    std::thread::scope(|scope| {
        for pid in [51i64, 52] {
            let c = Client { port: c.port };
            scope.spawn(move || {
                for i in 0..n {
                    let t = 1000.0 * pid as f64 + i as f64;
                    let mut arg = format!("{i:05}:{}", "x".repeat(294));
                    if pid == 52 && i == diverge {
                        arg = format!("{i:05}:{}", "y".repeat(294));
                    }
                    let id = begin(&c, pid, "step", &[json!(arg)], t, json!([]));
                    finish(&c, pid, &id, &json!(i), t + 0.5);
                }
            });
        }
    });
}

#[test]
fn a_comparison_of_long_runs_opens_at_its_first_divergence_in_pages_under_256_kib() {
    const BOUND: usize = 256 * 1024;
    let s = Server::start(&[]);
    let c = s.client();
    // More calls than are compared (the first 1,000 of each run), as in runs of 25,000 calls:
    // the pages are those of the calls compared.
    let n = 1200;
    let diverge = 700;
    long_runs(&c, n, diverge);
    let (a, b) = (key(51), key(52));
    let at = |extra: &str| html(&c, &format!("/runs/compare?a={a}&b={b}{extra}"));
    let first = at("");
    assert!(first.len() < BOUND, "{} bytes", first.len());
    assert!(
        first.contains(&format!(
            "First divergence: <a href=\"#pair-{diverge}\">pair {}, step</a>",
            diverge + 1
        )),
        "the first divergence is on the first page"
    );
    assert!(first.contains(&format!("id=\"pair-{diverge}\" class=\"diff\"")));
    // Its neighbourhood: the pairs just before it, then the ones after.
    assert!(first.contains(&format!("id=\"pair-{}\" class=\"same\"", diverge - 1)));
    assert!(first.contains(&format!("id=\"pair-{}\" class=\"same\"", diverge + 1)));
    assert!(!first.contains("id=\"pair-0\""));
    assert!(first.contains("Only the first 1000 calls of each run are compared."));
    // Links to the pages around it, each under the bound too.
    let from = diverge - 5;
    assert!(
        first.contains(&format!("<span>pairs {}–", from + 1)),
        "{first}"
    );
    let link = |page: &str, name: &str| -> String {
        let end = page
            .find(&format!("\">{name}</a>"))
            .unwrap_or_else(|| panic!("{name} in {page}"));
        let start = page[..end].rfind("href=\"").unwrap() + "href=\"".len();
        page[start..end].replace("&amp;", "&")
    };
    assert_eq!(
        link(&first, "First pairs"),
        format!("/runs/compare?a={}&b={}&offset=0", enc(&a), enc(&b))
    );
    let later = html(&c, &link(&first, "Later pairs"));
    assert!(later.len() < BOUND, "{} bytes", later.len());
    assert!(!later.contains(&format!("id=\"pair-{diverge}\"")));
    assert!(later.contains("First divergence: <a href=\"/runs/compare?a="));
    let earlier = html(&c, &link(&first, "Earlier pairs"));
    assert!(earlier.len() < BOUND && earlier.contains(&format!("id=\"pair-{}\"", from - 1)));
    let start = at("&offset=0");
    assert!(start.len() < BOUND && start.contains("id=\"pair-0\" class=\"same\""));
    let last = at("&offset=999");
    assert!(
        last.len() < BOUND && last.contains("id=\"pair-999\"") && !last.contains("Later pairs")
    );
    // The REST answer keeps its own paging (offset and limit, from the first pair).
    let r = c.get_ok(&format!(
        "/api/runs/compare?a={}&b={}&limit=3",
        enc(&a),
        enc(&b)
    ));
    assert_eq!(
        (r["offset"].as_u64(), r["pairs"].as_array().unwrap().len()),
        (Some(0), 3)
    );
    assert_eq!(r["first_divergence"]["index"], diverge);
}

#[test]
fn a_page_of_huge_values_stays_under_256_kib() {
    const BOUND: usize = 256 * 1024;
    let s = Server::start(&[]);
    let c = s.client();
    let long_name = format!("f{}", "n".repeat(3000));
    for pid in [61i64, 62] {
        for i in 0..30 {
            let t = 1000.0 * pid as f64 + i as f64;
            let args: Vec<Value> = (0..20)
                .map(|k| json!(format!("{pid}{i}{k}{}", "\"<&".repeat(7000))))
                .collect();
            let id = begin(&c, pid, &long_name, &args, t, json!([]));
            finish(&c, pid, &id, &json!("r".repeat(50_000)), t + 0.5);
        }
    }
    for offset in ["", "&offset=0", "&offset=17"] {
        let page = html(
            &c,
            &format!("/runs/compare?a={}&b={}{offset}", key(61), key(62)),
        );
        assert!(page.len() < BOUND, "{offset}: {} bytes", page.len());
        assert!(page.contains("its object page shows all"), "{offset}");
        assert!(page.contains("and 8 more arguments"), "{offset}");
    }
}
