//! The web UI's pages over real HTTP: Breakpoints, breakpoint history, Functions,
//! Communication errors, Object, REPL session and list, External MCP servers; each is HTML
//! with the strict policy, shows program data escaped, and answers unknown ids with a 404 page.
//! Also the events the pages live on that are new with them: `repl_session`, `repl_output`
//! and `external_server`; and the original server's UI addresses (`/objects`,
//! `/object/ref:...`, `/repl-help`, `/docs`, `/frame/call/<process>/<call>/<i>`,
//! `/breakpoint/<name>/history/<id>`).

use serde_json::{json, Value};

use crate::event_stream::Stream;
use crate::support::{
    call_start_body, complete_body, fixture_server_path, item, pause_id, wait_for, Client, Server,
    TempDir,
};

const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

/// `GET path` as a browser navigating: status, CSP header and body.
fn page(c: &Client, path: &str) -> (u16, String) {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html,*/*;q=0.8\r\nConnection: close\r\n\r\n",
        c.port
    );
    let r = c.raw(req.as_bytes());
    let csp = r.header("Content-Security-Policy").unwrap_or("");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{path}: CSP {csp:?}"
    );
    assert_eq!(
        r.header("Content-Type"),
        Some("text/html; charset=utf-8"),
        "{path}"
    );
    let html = String::from_utf8_lossy(&r.body).into_owned();
    assert!(!html.contains("<img"), "{path}: unescaped markup in {html}");
    assert!(!html.contains("<script>"), "{path}: inline script");
    (r.status, html)
}

fn ok_page(c: &Client, path: &str) -> String {
    let (status, html) = page(c, path);
    assert_eq!(status, 200, "{path}: {html}");
    html
}

/// Starts a call of `method` with `args` and returns its pause id (the default stops).
fn pause(c: &Client, method: &str, args: Vec<Value>) -> String {
    let r = c.post_ok("/api/call/start", &call_start_body(method, args, json!({})));
    pause_id(&r)
}

#[test]
fn breakpoints_functions_and_errors_pages_show_escaped_data_and_link_history() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    assert!(ok_page(&c, "/breakpoints").contains("No breakpoints"));
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": HOSTILE, "signature": "(x)"}),
    );
    c.post_ok(
        "/api/functions",
        &json!({"function_name": "twin", "signature": "(x)"}),
    );
    // The form's body: keep_signature keeps the registered signature.
    c.post_ok(
        "/api/breakpoints",
        &json!({"function_name": "twin", "keep_signature": true}),
    );
    assert_eq!(
        c.get_ok("/api/functions")["function_signatures"]["twin"],
        "(x)"
    );
    let html = ok_page(&c, "/breakpoints");
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{html}"
    );
    assert!(
        html.contains("<option>twin</option>"),
        "same-signature replacement offered"
    );
    assert!(html.contains("href=\"/breakpoint/twin/history\""));
    assert!(html.contains("aria-current=\"page\""));
    assert!(ok_page(&c, "/breakpoint/twin/history").contains("No call of this function"));
    // As the original: any name has a history page (empty when nothing was recorded).
    let html = ok_page(&c, "/breakpoint/nothing-here/history");
    assert!(
        html.contains("No call of this function was recorded"),
        "{html}"
    );

    let functions = ok_page(&c, "/functions");
    assert!(functions.contains("<code>twin</code>"), "{functions}");
    c.post_ok(
        "/api/report-com-error",
        &json!({"summary": HOSTILE, "method": "POST", "path": "/api/call/start",
                "process_pid": 1, "traceback": HOSTILE}),
    );
    let errors = ok_page(&c, "/com-errors");
    assert!(errors.contains("&lt;/script&gt;"), "{errors}");
}

#[test]
fn object_repl_and_session_pages_follow_a_pause_and_its_repl() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    let arg = item(&json!({"name": HOSTILE}), 1);
    let cid = arg["cid"].as_str().unwrap().to_owned();
    let p = pause(&c, "f", vec![arg]);
    let home = ok_page(&c, "/");
    assert!(home.contains(&format!("href=\"/object/{cid}\"")), "{home}");
    assert!(home.contains("data-api=\"/api/repl/start\""));
    let object = ok_page(&c, &format!("/object/{cid}"));
    assert!(object.contains("&lt;/script&gt;"), "{object}");
    assert!(object.contains("arg:0"), "where it was seen: {object}");
    assert_eq!(page(&c, &format!("/object/{}", "a".repeat(128))).0, 404);
    assert_eq!(page(&c, "/object/not-a-cid").0, 404);

    let mut events = Stream::open(c.port, &[], "");
    let sid = c.post_ok("/api/repl/start", &json!({"pause_id": p}))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = events.next();
    assert_eq!(started.name, "repl_session");
    assert_eq!(started.data["session_id"], sid.as_str());
    assert_eq!(started.data["state"], "started");
    // The program answers the eval as the client does.
    let answerer = {
        let c = s.client();
        let p = p.clone();
        std::thread::spawn(move || {
            let req = wait_for("the eval", || {
                let r = c.get_ok(&format!("/api/poll-repl/{p}"));
                r["eval_id"].is_string().then_some(r)
            });
            c.post_ok(
                "/api/call/repl-result",
                &json!({"eval_id": req["eval_id"], "session_id": req["session_id"],
                        "pause_id": p, "result": HOSTILE, "stdout": "printed\n"}),
            );
        })
    };
    let r = c.post_ok(&format!("/api/repl/{sid}/eval"), &json!({"expr": "1 + 1"}));
    answerer.join().unwrap();
    assert_eq!(r["output"], HOSTILE);
    let output = events.next();
    assert_eq!(output.name, "repl_output");
    assert_eq!(output.data["session_id"], sid.as_str());
    assert_eq!(output.data["is_error"], false);
    let html = ok_page(&c, &format!("/repl/{sid}"));
    assert!(html.contains("1 + 1") && html.contains("printed"), "{html}");
    assert!(html.contains("&lt;img src=x"), "{html}");
    assert!(html.contains("<textarea id=\"expr\""));
    assert!(ok_page(&c, "/repls").contains(&format!("href=\"/repl/{sid}\"")));
    // Resumed: the input gives way to an explanation.
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    let html = ok_page(&c, &format!("/repl/{sid}"));
    assert!(!html.contains("<textarea"), "{html}");
    assert!(html.contains("This session closed"));
    assert_eq!(page(&c, "/repl/no-such-session").0, 404);
}

#[test]
fn the_external_servers_page_lists_tools_and_status_changes_are_events() {
    let fx = format!("fx:{}", fixture_server_path().display());
    let s = Server::start(&["--memory", "--mcp-client", &fx]);
    let c = s.client();
    wait_for("fx connected", || {
        (c.get_ok("/api/mcp-clients")["clients"]["fx"]["status"] == "connected").then_some(())
    });
    let html = ok_page(&c, "/mcp-servers");
    assert!(html.contains("connected"), "{html}");
    assert!(html.contains("<code>echo</code>"), "{html}");
    assert!(html.contains("data-api=\"/api/mcp-tools/call\""));
    assert!(html.contains("value=\"fx/echo\""));
    assert!(html.contains("data-api=\"/api/mcp-clients/fx/disconnect\""));
    let mut events = Stream::open(c.port, &[], "");
    c.post_ok("/api/mcp-clients/fx/disconnect", &json!({}));
    let e = events.next();
    assert_eq!(e.name, "external_server");
    assert_eq!(
        e.data,
        json!({"seq": e.data["seq"], "type": "external_server", "name": "fx", "status": "disconnected"})
    );
    c.post_ok("/api/mcp-clients/fx/reconnect", &json!({}));
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("connected") {
        let e = events.next();
        assert_eq!(e.name, "external_server");
        seen.push(e.data["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen, ["connecting", "connected"]);
    // Without a client flag the page offers the connect form.
    let plain = Server::start(&["--memory"]);
    let html = ok_page(&plain.client(), "/mcp-servers");
    assert!(
        html.contains("data-api=\"/api/mcp-clients/connect\""),
        "{html}"
    );
    assert!(html.contains("No external servers"), "{html}");
}

// The files the pages name are the ones this server uses, under its CIDELDILL_HOME: the port
// file (Paused, when nothing is paused) and the MCP clients config file (External MCP servers),
// which --mcp-clients then reads.
#[test]
fn the_pages_name_the_files_of_the_servers_own_home() {
    let home = TempDir::new("ui-home");
    let s = Server::start_in(home.path(), &["--memory"]);
    let c = s.client();
    let html = ok_page(&c, "/");
    assert!(html.contains("Nothing is paused"), "{html}");
    let port_file = format!("its port file <code>{}</code>", s.port_file.display());
    assert!(html.contains(&port_file), "{port_file} in {html}");
    let config = home.path().join("mcp_clients.json");
    let html = ok_page(&c, "/mcp-servers");
    let named = format!("<code>{}</code>", config.display());
    assert!(html.contains(&named), "{named} in {html}");
    assert!(!html.contains("~/.cideldill"), "{html}");
    drop(s);
    // That file is the one --mcp-clients reads.
    let entry = json!({"mcpServers": {"fx": {"command": fixture_server_path()}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let s = Server::start_in(home.path(), &["--memory", "--mcp-clients"]);
    let c = s.client();
    wait_for("fx from the config file connected", || {
        (c.get_ok("/api/mcp-clients")["clients"]["fx"]["status"] == "connected").then_some(())
    });
}

/// The first `href="<prefix>..."` in a page.
fn href_starting(html: &str, prefix: &str) -> String {
    let at = html
        .find(&format!("href=\"{prefix}"))
        .unwrap_or_else(|| panic!("no link to {prefix} in {html}"));
    let rest = &html[at + "href=\"".len()..];
    rest[..rest.find('"').unwrap()].replace("&amp;", "&")
}

#[test]
fn the_original_servers_ui_addresses_are_served() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let dir = TempDir::new("compat-src");
    let source = dir.path().join("app.py");
    std::fs::write(&source, "def f(x):\n    return x\n\nf(1)\n").unwrap();
    c.post_ok("/api/breakpoints", &json!({"function_name": "f"}));
    c.post_ok(
        "/api/breakpoints/f/after_behavior",
        &json!({"behavior": "go"}),
    );
    let mut start = call_start_body("f", vec![item(&json!(HOSTILE), 5)], json!({}));
    start["call_site"]["stack_trace"][0]["filename"] = json!(source.to_str().unwrap());
    start["call_site"]["stack_trace"][0]["lineno"] = json!(4);
    let started = c.post_ok("/api/call/start", &start);
    let p = pause_id(&started);
    c.post_ok(
        &format!("/api/paused/{p}/continue"),
        &json!({"action": "continue"}),
    );
    let call_id = started["call_id"].as_str().unwrap().to_owned();
    c.post_ok(
        "/api/call/complete",
        &complete_body(&call_id, &json!(HOSTILE)),
    );
    let record = &c.get_ok("/api/call-records")["calls"][0];
    let process = record["process_key"].as_str().unwrap().to_owned();
    let process_seg = process.replace('+', "%2B");

    // /objects: client objects (with their ref page) and stored objects.
    let objects = ok_page(&c, "/objects");
    assert!(objects.contains("Client objects") && objects.contains("Stored objects"));
    assert!(objects.contains("&lt;/script&gt;"), "{objects}");
    let ref_page = href_starting(&objects, "/object/ref");
    let cid_page = href_starting(&objects, "/object/");
    assert_eq!(page(&c, &cid_page).0, 200, "{cid_page}");
    // /object/ref:<process_key>:<client_ref>, as the original links it.
    let html = ok_page(&c, &ref_page);
    assert!(
        html.contains("Client object") && html.contains("&lt;img"),
        "{html}"
    );
    let html = ok_page(&c, &format!("/object/ref:{process_seg}:5"));
    assert!(html.contains("arg:0") && html.contains("&lt;img"), "{html}");
    assert_eq!(page(&c, &format!("/object/ref:{process_seg}:99")).0, 404);

    assert!(ok_page(&c, "/repl-help").contains("Shift"));

    // /docs: every operation of the OpenAPI document, no external assets.
    let docs = ok_page(&c, "/docs");
    let spec = c.get_ok("/openapi.json");
    for (path, ops) in spec["paths"].as_object().unwrap() {
        assert!(docs.contains(&format!("<code>{path}</code>")), "{path}");
        assert!(!ops.as_object().unwrap().is_empty());
    }
    assert!(docs.contains("href=\"/openapi.json\""));
    assert!(!docs.contains("https://"), "no external assets");

    // /frame/call/<process_key>/<call_id>/<i>: our /frame/call/<call_id>/<i>.
    let ours = ok_page(&c, &format!("/frame/call/{call_id}/0"));
    let theirs = ok_page(&c, &format!("/frame/call/{process_seg}/{call_id}/0"));
    assert_eq!(theirs, ours);
    assert!(
        theirs.contains("<span class=\"tk\">return</span> x"),
        "{theirs}"
    );
    assert_eq!(page(&c, &format!("/frame/call/1.0%2B1/{call_id}/0")).0, 404);
    assert_eq!(
        page(&c, &format!("/frame/call/{process_seg}/{call_id}/9")).0,
        404
    );

    // /breakpoint/<name>/history/<record_id>, also once the breakpoint is gone.
    let history = ok_page(&c, "/breakpoint/f/history");
    let entry = href_starting(&history, "/breakpoint/f/history/");
    assert_eq!(c.delete("/api/breakpoints/f").status, 200);
    let html = ok_page(&c, &entry);
    assert!(
        html.contains(&call_id) && html.contains("&lt;img"),
        "{html}"
    );
    let history = ok_page(&c, "/breakpoint/f/history");
    assert!(history.contains("has no breakpoint now") && history.contains(&entry));
    assert_eq!(page(&c, "/breakpoint/f/history/no-such-record").0, 404);
}

#[test]
fn every_page_title_says_how_many_calls_are_paused() {
    let s = Server::start(&[]);
    let c = s.client();
    let calm = ok_page(&c, "/calls");
    assert!(calm.contains("<title>Calls · cideldill</title>"), "{calm}");
    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    pause(&c, "add", vec![]);
    for (path, title) in [
        ("/", "Paused"),
        ("/calls", "Calls"),
        ("/breakpoints", "Breakpoints"),
        ("/call-tree", "Call trees"),
    ] {
        let html = ok_page(&c, path);
        let want = format!("<title>(1 paused) {title} · cideldill</title>");
        assert!(html.contains(&want), "{path}: no {want}");
        assert!(
            html.contains(&format!("data-title=\"{title} · cideldill\"")),
            "{path}"
        );
    }
    // The Paused page refreshes only for the events it shows.
    assert!(ok_page(&c, "/").contains("data-events=\"execution_paused "));
    assert!(!ok_page(&c, "/calls").contains("data-events="));
}

#[test]
fn a_browser_gets_the_404_page_for_any_unknown_address() {
    let s = Server::start(&[]);
    let c = s.client();
    for path in [
        "/nope",
        "/nope/deeper?x=1",
        "/breakpoint",
        "/%3Cimg%20src%3Dx%3E",
    ] {
        let (status, html) = page(&c, path);
        assert_eq!(status, 404, "{path}");
        assert!(html.contains("<h1>Not found</h1>"), "{path}: {html}");
    }
    // Scripts still get the JSON error, and so does a browser under /api/.
    let r = c.get("/nope");
    assert_eq!(r.status, 404);
    assert!(r.json()["error"].is_string(), "{:?}", r.text());
    let req = format!(
        "GET /api/nope HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
        c.port
    );
    let r = c.raw(req.as_bytes());
    assert_eq!(r.status, 404);
    assert!(r
        .header("Content-Type")
        .unwrap_or("")
        .starts_with("application/json"));
}
