//! The trust boundary of the HTTP port, row by row over the route table: the browser-client
//! endpoints answer the server's own origins, `--allow-origin` ones and origins granted in the
//! web UI, and refuse others with a 403 the page can read (CORS `*`), the debug client script
//! excepted (every origin); every other endpoint refuses browser origins other than the
//! server's own (other loopback ports and `null` included) with 403 and no CORS grant, and
//! requests a browser sent for another site without `Origin` (`Sec-Fetch-Site`); requests
//! without `Origin` (curl, scripts, the Python client) pass everywhere; and a loopback server
//! answers 421 to any request naming a non-loopback `Host`.

use cideldill_server::http::{Access, ROUTES};
use serde_json::json;

use crate::support::{Client, Resp, Server};

/// A request with exactly these extra headers (a `Host` naming the server unless given).
fn send(c: &Client, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let body = if matches!(method, "POST" | "PUT" | "PATCH") {
        "{}"
    } else {
        ""
    };
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{}\r\n", c.port));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    c.raw(req.as_bytes())
}

/// The status of a request whose answer may be an endless stream (`GET /api/events`): only
/// the status line is read.
fn status_of(c: &Client, method: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", c.port)).expect("connect");
    s.set_read_timeout(Some(crate::support::deadline()))
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n", c.port);
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .expect("a status line");
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A concrete path for a route pattern (every `{param}` becomes `x`).
fn concrete(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn every_route_row_applies_its_origin_rule() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let own = [
        format!("http://127.0.0.1:{}", s.port),
        format!("http://localhost:{}", s.port),
        format!("http://[::1]:{}", s.port),
    ];
    let other_port = format!("http://localhost:{}", s.port.wrapping_add(1).max(1));
    let foreign = ["http://evil.example", other_port.as_str(), "null"];
    let browser_client = [
        ("POST", "/api/functions"),
        ("POST", "/api/call/start"),
        ("POST", "/api/call/complete"),
        ("POST", "/api/call/repl-result"),
        ("GET", "/api/poll/{pause_id}"),
        ("GET", "/api/poll-repl/{pause_id}"),
        ("GET", "/api/debug-client.js"),
    ];
    let mut open = Vec::new();
    for route in ROUTES {
        let path = concrete(route.path);
        let row = format!("{} {}", route.method, route.path);
        assert_eq!(
            route.access == Access::Anyone,
            browser_client.contains(&(route.method, route.path)),
            "{row}: only the browser-client endpoints are open to every origin"
        );
        if route.access == Access::Anyone {
            open.push(row.clone());
        }
        for origin in foreign {
            let r = send(&c, route.method, &path, &[("Origin", origin)]);
            match route.access {
                Access::Anyone if route.path == "/api/debug-client.js" => {
                    assert_ne!(r.status, 403, "{row} from {origin}");
                    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"), "{row}");
                }
                Access::Anyone => {
                    // Refused until granted, readably for the page's script.
                    assert_eq!(r.status, 403, "{row} from {origin}");
                    assert_eq!(r.json()["error"], "origin_not_allowed", "{row}");
                    assert!(
                        r.json()["message"]
                            .as_str()
                            .unwrap()
                            .contains("--allow-origin"),
                        "{row}"
                    );
                    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"), "{row}");
                }
                Access::Guarded => {
                    assert_eq!(r.status, 403, "{row} from {origin}");
                    assert_eq!(r.json()["error"], "origin_not_allowed", "{row}");
                    assert_eq!(r.header("Access-Control-Allow-Origin"), None, "{row}");
                }
            }
            // The preflight of a browser's cross-origin request: granted only where open.
            let pre = send(
                &c,
                "OPTIONS",
                &path,
                &[
                    ("Origin", origin),
                    ("Access-Control-Request-Method", route.method),
                ],
            );
            let granted = pre.status < 300 && pre.header("Access-Control-Allow-Origin").is_some();
            assert_eq!(
                granted,
                route.access == Access::Anyone,
                "OPTIONS {row} from {origin}"
            );
        }
        // Fetch metadata: what a browser sent for another site without an Origin (an <img>, a
        // <script>) is refused everywhere but the client script (on a browser-client endpoint
        // it would pass for a program); a same-origin one or a typed URL is not.
        for site in ["cross-site", "same-site"] {
            let status = status_of(&c, route.method, &path, &[("Sec-Fetch-Site", site)]);
            let want_refused = route.path != "/api/debug-client.js";
            assert_eq!(
                status == 403,
                want_refused,
                "{row} with Sec-Fetch-Site {site}"
            );
        }
        if route.path == "/api/events" {
            for site in ["same-origin", "none"] {
                let status = status_of(&c, route.method, &path, &[("Sec-Fetch-Site", site)]);
                assert_eq!(status, 200, "{row} with Sec-Fetch-Site {site}");
            }
            // An endless stream: only its status is read.
            for origin in &own {
                let status = status_of(&c, route.method, &path, &[("Origin", origin)]);
                assert_eq!(status, 200, "{row} from {origin}");
            }
            assert_eq!(status_of(&c, route.method, &path, &[]), 200, "{row}");
            for host in ["evil.example", "192.168.1.9"] {
                let r = send(&c, route.method, &path, &[("Host", host)]);
                assert_eq!(r.status, 421, "{row} with Host {host}");
            }
            continue;
        }
        for origin in &own {
            let r = send(&c, route.method, &path, &[("Origin", origin)]);
            // (`/api/poll/x` was polled without an Origin above: that unknown pause id belongs
            // to its first poller, and a page is told so.)
            let not_owner = r.status == 403 && r.json()["error"] == "not_owner";
            assert!(
                r.status != 403 || not_owner,
                "{row} from its own origin {origin}: {}",
                r.text()
            );
            if route.access == Access::Guarded {
                assert_eq!(
                    r.header("Access-Control-Allow-Origin"),
                    Some(origin.as_str()),
                    "{row}"
                );
            }
        }
        // No Origin: curl, scripts and the Python client.
        let r = send(&c, route.method, &path, &[]);
        // (A page polled the unknown pause id `x` above: it belongs to that page now.)
        let not_owner = r.status == 403 && r.json()["error"] == "not_owner";
        assert!(
            r.status != 403 || not_owner,
            "{row} without Origin: {}",
            r.text()
        );
        assert_ne!(r.status, 421, "{row} without Origin");
        // DNS rebinding: another site's name resolved to this machine.
        for host in [
            "evil.example",
            &format!("evil.example:{}", s.port),
            "192.168.1.9",
        ] {
            let r = send(&c, route.method, &path, &[("Host", host)]);
            assert_eq!(r.status, 421, "{row} with Host {host}");
            assert_eq!(r.json()["error"], "misdirected_request", "{row}");
        }
    }
    assert_eq!(open.len(), browser_client.len(), "{open:?}");
    // Loopback names with any port are this machine.
    for host in ["localhost", "localhost:1", "[::1]:80", "127.0.0.1"] {
        let r = send(&c, "GET", "/api/status", &[("Host", host)]);
        assert_eq!(r.status, 200, "Host {host}");
    }
}

#[test]
fn a_foreign_page_cannot_steer_the_debugger_but_the_program_keeps_talking() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let evil = [("Origin", "http://evil.example")];
    // The classic attack: a text/plain POST (no preflight) that changes the behavior.
    let r = send(&c, "POST", "/api/behavior", &evil);
    assert_eq!(r.status, 403);
    assert_eq!(c.get("/api/behavior").json()["behavior"], "stop");
    for (method, path) in [
        ("POST", "/api/breakpoints"),
        ("POST", "/api/repl/start"),
        ("POST", "/api/paused/x/continue"),
        ("GET", "/api/paused"),
        ("GET", "/api/call-records"),
        ("GET", "/"),
        ("GET", "/api/nope"),
    ] {
        assert_eq!(send(&c, method, path, &evil).status, 403, "{method} {path}");
    }
    // What an instrumented page's browser client sends is refused until the person grants
    // the origin; the refusal waits in the web UI as a request.
    let r = send(&c, "GET", "/api/poll/x", &evil);
    assert_eq!(r.status, 403);
    let body = json!({"function_name": "f"}).to_string();
    let register = || {
        let req = format!(
            "POST /api/functions HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: http://evil.example\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            c.port,
            body.len()
        );
        c.raw(req.as_bytes())
    };
    let r = register();
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(c.get_ok("/api/functions")["functions"], json!([]));
    let origins = c.get_ok("/api/origins");
    assert_eq!(origins["pending"][0]["origin"], "http://evil.example");
    assert_eq!(origins["pending"][0]["requests"], 2);
    // A page cannot grant itself.
    let grant = json!({"origin": "http://evil.example", "decision": "allow"}).to_string();
    let req = format!(
        "POST /api/origins HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: http://evil.example\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{grant}",
        c.port,
        grant.len()
    );
    assert_eq!(c.raw(req.as_bytes()).status, 403);
    c.post_ok(
        "/api/origins",
        &json!({"origin": "http://evil.example", "decision": "allow"}),
    );
    let r = register();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    // Granted for the browser-client endpoints only.
    assert_eq!(send(&c, "GET", "/api/paused", &evil).status, 403);
    c.post_ok(
        "/api/origins",
        &json!({"origin": "http://evil.example", "decision": "deny"}),
    );
    assert_eq!(register().status, 403);
    assert_eq!(
        c.get_ok("/api/origins")["pending"],
        json!([]),
        "denied: not asked again"
    );
    // An origin given with --allow-origin is granted, by name.
    let s = Server::start(&["--memory", "--allow-origin", "https://tools.example"]);
    let c = s.client();
    let r = send(
        &c,
        "GET",
        "/api/status",
        &[("Origin", "https://tools.example")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://tools.example")
    );
    assert_eq!(r.header("Vary"), Some("Origin"));
    assert_eq!(send(&c, "GET", "/api/status", &evil).status, 403);
}

#[test]
fn the_pages_are_html_with_a_strict_policy_and_scripts_still_get_json() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let page = |path: &str| {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/html,*/*;q=0.8\r\nConnection: close\r\n\r\n",
            c.port
        );
        c.raw(req.as_bytes())
    };
    let home = page("/");
    assert_eq!(home.status, 200);
    assert_eq!(
        home.header("Content-Type"),
        Some("text/html; charset=utf-8")
    );
    let csp = home.header("Content-Security-Policy").expect("a CSP");
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert!(!csp.contains("unsafe-inline"));
    let html = String::from_utf8_lossy(&home.body);
    assert!(html.contains("Nothing is paused"), "{html}");
    assert!(!html.contains("<script>"), "no inline script");
    // The same URL without Accept: text/html is the JSON summary scripts use.
    assert_eq!(c.get_ok("/")["server"], "cideldill-server");
    let js = page("/ui/app.js");
    assert_eq!(
        js.header("Content-Type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(page("/ui/app.css").status == 200);
    let missing = page("/ui/no-such-page");
    assert_eq!(missing.status, 404);
    assert!(String::from_utf8_lossy(&missing.body).contains("Not found"));
    assert!(missing.header("Content-Security-Policy").is_some());
    // A foreign page cannot read them either.
    let r = send(
        &c,
        "GET",
        "/ui/app.js",
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(r.status, 403);
}

/// Secrets planted in the query of every kind of request, accepted or refused: none reaches
/// the log, at the debug level that logs every request. The OAuth callback's refusals (a
/// foreign `Origin`, a non-loopback `Host`, a cross-site request without `Origin`, a
/// cross-site fetch that is no document navigation) logged its whole query, `code` and `state`
/// included; only the accepted one was redacted.
#[test]
fn secrets_in_a_query_never_reach_the_log_whatever_the_answer() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let code = "PLANTED-CODE-7f3a";
    let state = "PLANTED-STATE-91c2";
    let callback = format!("/oauth/callback?code={code}&state={state}&iss=x");
    let host = format!("127.0.0.1:{}", s.port);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16);
    let cases: Vec<Case> = vec![
        (
            "foreign origin",
            vec![("Origin", "http://evil.example")],
            403,
        ),
        ("non-loopback host", vec![("Host", "evil.example")], 421),
        (
            "cross-site without origin",
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "no-cors"),
                ("Sec-Fetch-Dest", "image"),
            ],
            403,
        ),
        (
            "a fetch that is no document",
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "navigate"),
                ("Accept", "text/html"),
            ],
            403,
        ),
        (
            "a repeated origin",
            vec![("Origin", "http://evil.example"), ("Origin", &host)],
            400,
        ),
        ("accepted", vec![("Accept", "text/html")], 200),
    ];
    for (what, headers, status) in &cases {
        let r = send(&c, "GET", &callback, headers);
        assert_eq!(r.status, *status, "{what}: {}", r.text());
    }
    // Other secrets, on other paths and answers: a page refused on a browser-client endpoint,
    // a guarded endpoint, a 404, MCP, and a header that is never logged.
    let others = [
        "access_token",
        "refresh_token",
        "token",
        "client_secret",
        "password",
    ];
    for (i, name) in others.iter().enumerate() {
        let secret = format!("PLANTED-{i}-{name}");
        for (path, headers, status) in [
            ("/api/poll/x", vec![("Origin", "http://evil.example")], 403),
            ("/api/status", vec![("Origin", "http://evil.example")], 403),
            (
                "/api/status",
                vec![("Authorization", "Bearer PLANTED-AUTH")],
                200,
            ),
            ("/api/no-such-thing", vec![], 404),
        ] {
            let target = format!("{path}?a=1&{name}={secret}");
            let r = send(&c, "GET", &target, &headers);
            assert_eq!(r.status, status, "{target}: {}", r.text());
        }
    }
    // Everything was logged, and named, with the secrets redacted.
    let log = crate::support::wait_for("the last request in the log", || {
        let log = s.stderr();
        log.contains("/api/no-such-thing?a=1&[password redacted]")
            .then_some(log)
    });
    assert!(
        log.contains("/oauth/callback?[code redacted]&[state redacted]&iss=x"),
        "{log}"
    );
    assert!(!log.contains("code="), "no authorization code at all");
    for planted in ["PLANTED-CODE", "PLANTED-STATE", "PLANTED-AUTH"]
        .into_iter()
        .map(str::to_owned)
        .chain(
            others
                .iter()
                .enumerate()
                .map(|(i, n)| format!("PLANTED-{i}-{n}")),
        )
    {
        assert!(!log.contains(&planted), "{planted} is in the log:\n{log}");
    }
}

/// A header that the trust rules read, given twice: which one counted depended on who read it
/// (this server read the first). Such a request is refused before any rule is applied, on
/// every kind of endpoint, with raw requests naming both copies.
#[test]
fn a_request_repeating_a_trust_header_is_refused_before_any_rule() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let own = format!("http://127.0.0.1:{}", s.port);
    let host = format!("127.0.0.1:{}", s.port);
    let evil = "http://evil.example";
    let header_pairs: Vec<(&str, [&str; 2])> = vec![
        // The first copy is the one that would have passed.
        ("Origin", [own.as_str(), evil]),
        ("Origin", [evil, own.as_str()]),
        ("Origin", [own.as_str(), own.as_str()]),
        ("Host", [host.as_str(), "evil.example"]),
        ("Host", ["evil.example", host.as_str()]),
        ("Sec-Fetch-Site", ["same-origin", "cross-site"]),
        ("Sec-Fetch-Mode", ["navigate", "no-cors"]),
        ("Sec-Fetch-Dest", ["document", "image"]),
        ("Access-Control-Request-Method", ["GET", "POST"]),
    ];
    let endpoints = [
        ("GET", "/api/status"),
        ("POST", "/api/paused/x/continue"),
        ("POST", "/api/call/start"),
        ("GET", "/calls"),
        ("OPTIONS", "/api/breakpoints"),
    ];
    for (name, [first, second]) in &header_pairs {
        for (method, path) in endpoints {
            // Also in another case and with the copies apart.
            let lower = name.to_ascii_lowercase();
            let mut headers = vec![
                (*name, *first),
                ("Accept", "*/*"),
                (lower.as_str(), *second),
            ];
            if *name != "Host" {
                headers.insert(0, ("Host", host.as_str()));
            }
            let r = send(&c, method, path, &headers);
            assert_eq!(
                r.status,
                400,
                "{name} twice on {method} {path}: {}",
                r.text()
            );
            let e = r.json();
            assert_eq!(e["error"], "duplicate_header", "{e}");
            assert!(
                e["message"].as_str().unwrap().contains(name),
                "names the header: {e}"
            );
            assert_eq!(
                r.header("Access-Control-Allow-Origin"),
                None,
                "no CORS grant"
            );
        }
    }
    // MCP over HTTP answers with a JSON-RPC error.
    let r = send(
        &c,
        "POST",
        "/mcp",
        &[("Origin", own.as_str()), ("Origin", evil)],
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json();
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("Origin"));
    // The event stream refuses it too, before it opens.
    assert_eq!(
        status_of(
            &c,
            "GET",
            "/api/events",
            &[
                ("Sec-Fetch-Site", "same-origin"),
                ("Sec-Fetch-Site", "cross-site")
            ]
        ),
        400
    );
    // Nothing was started, and a single copy of each is still answered as before.
    assert_eq!(c.get_ok("/api/paused")["paused"], json!([]));
    assert_eq!(
        send(&c, "GET", "/api/status", &[("Origin", own.as_str())]).status,
        200
    );
    assert_eq!(
        send(&c, "GET", "/api/status", &[("Origin", evil)]).status,
        403
    );
    assert_eq!(
        send(&c, "GET", "/api/status", &[("Host", "evil.example")]).status,
        421
    );
    // Headers the rules do not read may repeat.
    let r = send(
        &c,
        "GET",
        "/api/status",
        &[("Accept", "*/*"), ("Accept", "*/*")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
}
