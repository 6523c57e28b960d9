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
    // The export names the page's choice of client events (the API lists them by default).
    assert!(body.contains(
        "href=\"/api/call-records?format=jsonl&amp;function=add&amp;search=APPLE&amp;client_events=hide\""
    ));
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
fn the_calls_page_search_stops_at_a_full_page_and_older_pages_search_further() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let ids = six_calls(&c);
    // "apple" is in calls 3, 1 and 0 (newest first): a page of 2 is full at call 1, and the
    // search stops there (the page answers in a bounded time however many records are kept).
    let body = html(&c, "/calls?search=apple&limit=2");
    assert!(body.contains(&ids[3]) && body.contains(&ids[1]), "{body}");
    assert!(!body.contains(&ids[0]), "{body}");
    assert!(body.contains("1–2 of the first 2 matching calls"), "{body}");
    assert!(
        body.contains("The search stopped at a full page, after looking at the newest 5 records"),
        "{body}"
    );
    assert!(
        body.contains("href=\"/calls?search=apple&amp;offset=2&amp;limit=2\" rel=\"next\">Older"),
        "{body}"
    );
    let older = html(&c, "/calls?search=apple&limit=2&offset=2");
    assert!(
        older.contains(&ids[0]) && !older.contains(&ids[1]),
        "{older}"
    );
    assert!(older.contains("3–3 of 3 matching calls"), "{older}");
    assert!(!older.contains("The search stopped"), "{older}");
    // The REST listing still counts every match.
    let rest = c.get_ok("/api/call-records?search=apple&limit=2");
    assert_eq!(rest["total_count"], 3);
    assert_eq!(rest["scanned"], 6);
    assert_eq!(rest["search_truncated"], false);
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

/// Posts a client event as the real Python client does (protocol doc §2.4) from process `pid`:
/// its registration of `with_debug(add)`, or the attribute probe its proxy makes on every call.
fn client_event(c: &Client, pid: u32, registration: bool) {
    let body = if registration {
        json!({
            "method_name": "with_debug.register", "status": "registered", "timestamp": 1795311683.6,
            "call_site": {"timestamp": 1795311683.6, "stack_trace": []},
            "pretty_args": [{"__cideldill_placeholder__": true, "summary": "add", "client_ref": 1}],
            "pretty_kwargs": {},
            "pretty_result": {"event": "with_debug_registration", "function_name": "add",
                              "signature": "(x, flag=True)", "alias": null, "target_type": "builtins.function"},
            "process_pid": pid, "process_start_time": 1795311683.5,
        })
    } else {
        json!({
            "method_name": "__getattr__('_cideldill_alias_name')", "status": "exception",
            "timestamp": 1795311683.7,
            "call_site": {"timestamp": 1795311683.7, "target_cid": "x", "stack_trace": []},
            "pretty_args": [], "pretty_kwargs": {},
            "exception": {"type": "AttributeError", "message": "'Proxy' object has no attribute '_cideldill_alias_name'",
                          "target_type": "builtins.function", "requested_attribute": "_cideldill_alias_name"},
            "process_pid": pid, "process_start_time": 1795311683.5,
        })
    };
    assert_eq!(c.post_ok("/api/call/event", &body), json!({"status": "ok"}));
}

/// A session as the real client makes it: a registration, then each call preceded by the
/// probe. The program's call ids, oldest first (4 calls, 5 client events).
fn noisy_session(c: &Client) -> Vec<String> {
    client_event(c, 100, true);
    let mut ids = Vec::new();
    for (n, arg) in [json!("apple"), json!(2), json!(3), json!("pear")]
        .iter()
        .enumerate()
    {
        client_event(c, 100, false);
        ids.push(call(c, "add", 100, arg, &json!(n)));
    }
    ids
}

/// Checks the listings of a [`noisy_session`]: REST lists every record by default, hides or
/// keeps only the client events on request with their count, and so do the export and the
/// Calls page (which hides them by default).
fn check_client_events(c: &Client, program: &[String]) {
    let newest_first: Vec<String> = program.iter().rev().cloned().collect();
    let all = c.get_ok("/api/call-records");
    assert_eq!(all["total_count"], 9);
    assert!(all.get("client_events_hidden").is_none(), "{all}");
    assert!(all["calls"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r.get("client_event").is_none()));
    let hidden = c.get_ok("/api/call-records?client_events=hide");
    assert_eq!(
        (
            hidden["total_count"].clone(),
            hidden["client_events_hidden"].clone()
        ),
        (json!(4), json!(5))
    );
    assert_eq!(ids(&hidden), newest_first);
    // Paging and the index filters combine with it.
    let paged = c.get_ok("/api/call-records?client_events=hide&offset=1&limit=2");
    assert_eq!(ids(&paged), newest_first[1..3]);
    let failed = c.get_ok("/api/call-records?client_events=hide&status=exception");
    assert_eq!(
        (
            failed["total_count"].clone(),
            failed["client_events_hidden"].clone()
        ),
        (json!(0), json!(4))
    );
    let only = c.get_ok("/api/call-records?client_events=only");
    assert_eq!(only["total_count"], 5);
    for r in only["calls"].as_array().unwrap() {
        assert_eq!(r["client_event"], true, "{r}");
    }
    assert_eq!(only["calls"][4]["method_name"], "with_debug.register");
    // A search leaves them out unless asked, and counts what it did not search.
    let search = c.get_ok("/api/call-records?client_events=hide&search=_cideldill_alias");
    assert_eq!(
        (
            search["total_count"].clone(),
            search["client_events_hidden"].clone()
        ),
        (json!(0), json!(5))
    );
    assert_eq!(
        c.get_ok("/api/call-records?search=_cideldill_alias")["total_count"],
        4
    );
    let process = c.get_ok("/api/call-records?client_events=hide&process=100");
    assert_eq!(ids(&process), newest_first);
    // The export.
    assert_eq!(export(c, "&client_events=hide").len(), 4);
    let lines = export(c, "&client_events=only");
    assert_eq!(lines.len(), 5);
    assert!(lines.iter().all(|l| l["client_event"] == true));
    assert_eq!(export(c, "").len(), 9);
    // The page hides them by default, with their count and a toggle that keeps the filters.
    let body = html(c, "/calls");
    assert!(body.contains("5 client events hidden"), "{body}");
    assert!(body.contains("1–4 of 4 calls"), "{body}");
    assert!(!body.contains("_cideldill_alias_name"), "{body}");
    assert!(
        body.contains("href=\"/calls?client_events=show\">Show them</a>"),
        "{body}"
    );
    let body = html(c, "/calls?function=add&client_events=show");
    assert!(body.contains("1–4 of 4 matching calls"), "{body}");
    let body = html(c, "/calls?status=exception&client_events=show");
    assert!(body.contains("1–4 of 4 matching calls"), "{body}");
    assert!(
        body.contains("<span class=\"badge client\">exception</span>"),
        "{body}"
    );
    assert!(
        !body.contains("badge failed") && !body.contains("class=\"raised\""),
        "{body}"
    );
}

#[test]
fn client_events_are_kept_but_hidden_on_request_and_by_the_page() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let ids = noisy_session(&c);
    check_client_events(&c, &ids);
    for bad in [
        "client_events=HIDE",
        "client_events=no",
        "format=jsonl&client_events=x",
    ] {
        let r = c.get(&format!("/api/call-records?{bad}"));
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.json()["error"], "invalid_client_events", "{bad}");
    }
}

#[test]
fn with_a_database_client_events_past_the_window_are_counted_and_left_out_by_the_index() {
    let home = TempDir::new("calls-noise");
    let db = home.path().join("noise.db");
    let db = db.to_str().unwrap();
    let args = ["--db", db, "--max-records", "2"];
    let server = Server::start_in(home.path(), &args);
    let ids = noisy_session(&server.client());
    assert_eq!(server.client().get_ok("/api/status")["calls_in_memory"], 2);
    check_client_events(&server.client(), &ids);
    drop(server);
    let server = Server::start_in(home.path(), &args);
    check_client_events(&server.client(), &ids);
}

#[test]
fn an_agent_gets_the_program_calls_unless_it_asks_for_client_events() {
    let s = crate::mcp_support::McpServer::initialized("2025-11-25");
    let c = s.http();
    let ids = noisy_session(&c);
    let listed = s.call_ok("breakpoint_get_call_records", json!({}));
    assert_eq!(
        (
            listed["total_count"].clone(),
            listed["client_events_hidden"].clone()
        ),
        (json!(4), json!(5))
    );
    assert_eq!(listed["calls"][0]["call_id"], ids[3].as_str());
    let shown = s.call_ok(
        "breakpoint_get_call_records",
        json!({"client_events": "show"}),
    );
    assert_eq!(shown["total_count"], 9);
    assert!(shown.get("client_events_hidden").is_none());
    assert_eq!(shown["calls"][0]["client_event"], Value::Null);
    assert_eq!(shown["calls"][1]["client_event"], true);
    let only = s.call_ok(
        "breakpoint_get_call_records",
        json!({"client_events": "only", "limit": 2}),
    );
    assert_eq!(
        (only["total_count"].clone(), only["truncated"].clone()),
        (json!(5), json!(true))
    );
    let r = s.call(
        "breakpoint_get_call_records",
        json!({"client_events": "all"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r.to_string()
            .contains("\\\"parameter\\\":\\\"client_events\\\""),
        "{r}"
    );
}
