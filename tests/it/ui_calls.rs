//! The Calls page and the call-record search and export behind it, on the real binary: calls
//! recorded over the wire appear on `/calls`; the filters and the text search narrow the page,
//! the JSON listing and the JSON Lines export alike, in memory and with a database (including
//! records past `--max-records`, read back from the file, before and after a restart); program
//! values are escaped; pages carry the strict Content-Security-Policy.

use serde_json::{json, Value};

use crate::support::{call_start_body, complete_body, item, Client, Resp, Server, TempDir};

/// A page as a browser asks for it.
fn page(c: &Client, path: &str) -> Resp {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html,*/*;q=0.8\r\nConnection: close\r\n\r\n",
        c.port
    );
    c.raw(req.as_bytes())
}

fn html(c: &Client, path: &str) -> String {
    let r = page(c, path);
    assert_eq!(r.status, 200, "{path}");
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    let csp = r.header("Content-Security-Policy").expect("a CSP");
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"));
    String::from_utf8(r.body).expect("UTF-8")
}

/// Completes one call that does not pause: `method(arg)` from process `pid`, returning
/// `result`; its call id.
fn call(c: &Client, method: &str, pid: u32, arg: &Value, result: &Value) -> String {
    let mut start = call_start_body(
        method,
        vec![item(arg, 2)],
        json!({"flag": item(&json!(true), 3)}),
    );
    start["process_pid"] = json!(pid);
    let started = c.post_ok("/api/call/start", &start);
    assert_eq!(started["action"], "continue", "{started}");
    let call_id = started["call_id"].as_str().unwrap().to_owned();
    let mut done = complete_body(&call_id, result);
    done["process_pid"] = json!(pid);
    c.post_ok("/api/call/complete", &done);
    call_id
}

fn ids(page: &Value) -> Vec<String> {
    page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["call_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The export's lines, each parsed, after checking the answer's headers.
fn export(c: &Client, query: &str) -> Vec<Value> {
    let r = c.get(&format!("/api/call-records?format=jsonl{query}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.header("Content-Type"),
        Some("application/x-ndjson; charset=utf-8")
    );
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l}: {e}")))
        .collect()
}

/// Six calls of two functions from two processes; the call ids, oldest first.
fn six_calls(c: &Client) -> Vec<String> {
    vec![
        call(c, "add", 100, &json!("Apple pie"), &json!(1)),
        call(c, "add", 200, &json!(2), &json!({"fruit": "apple"})),
        call(c, "mul", 100, &json!(3), &json!(9)),
        call(c, "mul", 200, &json!("pear"), &json!("APPLE")),
        call(c, "add", 100, &json!(5), &json!(6)),
        call(c, "mul", 100, &json!(6), &json!(36)),
    ]
}

/// What every mode must answer for [`six_calls`].
fn check_filters(c: &Client, ids_oldest_first: &[String]) {
    let id = |i: usize| ids_oldest_first[i].clone();
    let all = c.get_ok("/api/call-records");
    assert_eq!(ids(&all), [id(5), id(4), id(3), id(2), id(1), id(0)]);
    assert!(
        all.get("scanned").is_none(),
        "a plain listing does not scan"
    );

    let apple = c.get_ok("/api/call-records?search=aPpLe");
    assert_eq!(ids(&apple), [id(3), id(1), id(0)], "{apple}");
    assert_eq!(apple["total_count"], 3);
    assert_eq!(apple["scanned"], 6);
    assert_eq!(apple["search_truncated"], false);

    let narrowed = c.get_ok("/api/call-records?search=apple&function=add&process=100");
    assert_eq!(ids(&narrowed), [id(0)]);
    let key = all["calls"][0]["process_key"].as_str().unwrap().to_owned();
    let by_key = c.get_ok(&format!(
        "/api/call-records?process={}",
        key.replace('+', "%2B")
    ));
    assert_eq!(ids(&by_key), [id(5), id(4), id(2), id(0)]);
    let paged = c.get_ok("/api/call-records?search=apple&offset=1&limit=1");
    assert_eq!(ids(&paged), [id(1)]);
    assert_eq!(paged["total_count"], 3);
    let program = c.get_ok("/api/call-records?source=program&status=success");
    assert_eq!(program["total_count"], 6);
    assert_eq!(
        c.get_ok("/api/call-records?source=mcp_client")["total_count"],
        0
    );

    // The export: every matching record (no paging), in the wire shape of the page.
    let lines = export(c, "&search=apple&limit=1");
    assert_eq!(lines, apple["calls"].as_array().unwrap().clone());
    assert_eq!(export(c, "").len(), 6);
    let mul = export(c, "&function=mul&process=200");
    assert_eq!(mul.len(), 1);
    assert_eq!(mul[0]["method_name"], "mul");
    assert_eq!(mul[0]["process_pid"], 200);
    assert_eq!(mul[0]["pretty_result"], "'APPLE'");

    // The page shows the same selection, and keeps the filters on the export link.
    let body = html(c, "/calls?search=APPLE&function=add");
    for (i, shown) in [(0, true), (1, true), (2, false), (3, false), (4, false)] {
        assert_eq!(
            body.contains(&id(i)),
            shown,
            "call {i} on the page:\n{body}"
        );
    }
    assert!(
        body.contains("href=\"/api/call-records?format=jsonl&amp;function=add&amp;search=APPLE\"")
    );
    assert!(body.contains("1–2 of 2 matching calls"), "{body}");
    assert!(
        body.contains("<a class=\"obj\" href=\"/object/"),
        "arguments link to objects"
    );
}

#[test]
fn calls_recorded_over_the_wire_appear_on_the_calls_page_and_filters_narrow_them() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let empty = html(&c, "/calls");
    assert!(empty.contains("No calls recorded yet"), "{empty}");
    assert!(empty.contains("<a href=\"/calls\" aria-current=\"page\">Calls</a>"));
    let ids = six_calls(&c);
    check_filters(&c, &ids);
    let body = html(&c, "/calls");
    assert!(
        body.contains("id=\"calls-list\" data-live"),
        "the first page is live"
    );
    assert!(body.contains("data-time=\"1795311683.7775\""), "{body}");
    let older = html(&c, "/calls?limit=2&offset=2");
    assert!(
        older.contains("<div id=\"calls-list\">"),
        "later pages hold still"
    );
    assert!(older.contains("3–4 of 6 calls"), "{older}");
    let fragment = html(&c, "/calls?fragment=1&search=pear");
    assert!(fragment.starts_with("<div id=\"frag-status\">"));
    assert!(fragment.contains(&ids[3]) && !fragment.contains(&ids[0]));
}

#[test]
fn with_a_database_the_search_reaches_records_past_the_window_also_after_a_restart() {
    let home = TempDir::new("calls-db");
    let db = home.path().join("calls.db");
    let db = db.to_str().unwrap();
    let args = ["--db", db, "--max-records", "2"];
    let server = Server::start_in(home.path(), &args);
    let ids = six_calls(&server.client());
    check_filters(&server.client(), &ids);
    assert_eq!(server.client().get_ok("/api/status")["calls_in_memory"], 2);
    drop(server);
    let server = Server::start_in(home.path(), &args);
    check_filters(&server.client(), &ids);
    // Calls after the restart come first, once each.
    let c = server.client();
    let late = call(&c, "add", 100, &json!("apple again"), &json!(0));
    let apple = c.get_ok("/api/call-records?search=apple");
    assert_eq!(ids_of_len(&apple), 4);
    assert_eq!(apple["calls"][0]["call_id"], late.as_str());
    assert_eq!(export(&c, "").len(), 7);
}

fn ids_of_len(page: &Value) -> usize {
    let list = ids(page);
    let mut unique = list.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), list.len(), "no record twice: {list:?}");
    list.len()
}

#[test]
fn program_values_are_escaped_and_bad_filters_refused() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let hostile = "<img src=x onerror=alert(1)>";
    call(&c, hostile, 1, &json!(hostile), &json!(hostile));
    let body = html(&c, &format!("/calls?search={}", "%3Cimg"));
    assert!(!body.contains("<img"), "{body}");
    assert!(
        body.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{body}"
    );
    assert!(body.contains("1–1 of 1 matching calls"), "{body}");
    for (query, code) in [
        ("source=elsewhere", "invalid_source"),
        ("format=xml", "invalid_format"),
        ("format=jsonl&source=elsewhere", "invalid_source"),
    ] {
        let r = c.get(&format!("/api/call-records?{query}"));
        assert_eq!(r.status, 400, "{query}");
        assert_eq!(r.json()["error"], code, "{query}");
    }
    // A foreign page can neither read the export nor the page.
    let req = format!(
        "GET /api/call-records?format=jsonl HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n",
        c.port
    );
    assert_eq!(c.raw(req.as_bytes()).status, 403);
}
