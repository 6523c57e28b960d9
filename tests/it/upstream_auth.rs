//! MCP authorization of an upstream HTTP server, end to end: the real binary against
//! `tests/fixtures/oauth_mcp_server.py`, a protected MCP server with its own authorization
//! server (discovery, dynamic registration, PKCE, resource, refresh, step-up). The browser is
//! played by following the authorization server's redirect to this server's callback page.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::support::{http, wait_for, Client, Server, TempDir};

/// The fixture's process: killed on drop.
struct Fixture {
    child: Child,
    port: u16,
}

impl Fixture {
    fn start() -> Fixture {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_mcp_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("python3 is required for this test: {e}"));
        let mut line = String::new();
        // The fixture prints its port before serving; a dead one closes stdout (empty line).
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the fixture's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("fixture port line {line:?}"));
        Fixture { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn stats(&self) -> Value {
        let r = http(self.port, "GET", "/control/stats", &[], None);
        assert_eq!(r.status, 200);
        r.json()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(c: &Client, name: &str) -> Value {
    c.get_ok("/api/mcp-clients")["clients"][name].clone()
}

fn wait_auth(c: &Client, name: &str, status: &str, auth: &str) -> Value {
    wait_for(&format!("{name} to be {status} with auth {auth}"), || {
        let s = server(c, name);
        (s["status"] == status && s["auth"]["state"] == auth).then_some(s)
    })
}

/// `path?query` of an absolute http URL on 127.0.0.1, and its port.
fn split(url: &str) -> (u16, String) {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected URL {url}"));
    let slash = rest.find('/').expect("a path");
    (
        rest[..slash].parse().expect("port"),
        rest[slash..].to_owned(),
    )
}

/// Plays the browser: opens the authorization URL and follows its redirect to our callback;
/// the callback page's text.
fn authorize_in_browser(c: &Client, name: &str) -> (String, String, String) {
    let answer = c.post_ok(&format!("/api/mcp-clients/{name}/authorize"), &json!({}));
    let url = answer["authorization_url"]
        .as_str()
        .expect("authorization_url")
        .to_owned();
    let (as_port, path) = split(&url);
    let r = http(as_port, "GET", &path, &[], None);
    assert_eq!(
        r.status,
        302,
        "the authorize endpoint refused: {}",
        r.text()
    );
    let location = r.header("Location").expect("Location").to_owned();
    let (port, path) = split(&location);
    assert_eq!(port, c.port, "the redirect goes to this server");
    assert!(path.starts_with("/oauth/callback?"), "{path}");
    let page = http(port, "GET", &path, &[("Accept", "text/html")], None);
    assert_eq!(page.status, 200);
    (url, page.text(), path)
}

/// Percent-encodes all but unreserved characters.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn call(c: &Client, tool: &str) -> crate::support::Resp {
    c.post(
        "/api/mcp-tools/call",
        &json!({"tool": tool, "arguments": {}}),
    )
}

#[test]
fn a_protected_server_is_authorized_in_the_browser_refreshed_stepped_up_and_kept_across_restarts() {
    let fx = Fixture::start();
    let home = TempDir::new("oauth");
    let spec = format!("prot:{}", fx.url());
    let args = [
        "--mcp-client",
        spec.as_str(),
        "--mcp-connect-timeout-s",
        "5",
    ];
    let mut s = Server::start_in(home.path(), &args);
    let c = s.client();

    // The server answered 401: it needs authorizing, and says so over REST.
    let before = wait_auth(&c, "prot", "error", "required");
    assert!(
        before["error"].as_str().unwrap_or("").contains("401"),
        "{before}"
    );
    assert!(
        before["error"]
            .as_str()
            .unwrap_or("")
            .contains("needs authorization"),
        "{before}"
    );
    // It names the action that starts the authorization, and that action works.
    let auth = &before["auth"];
    assert_eq!(
        auth["authorize_url"], "/api/mcp-clients/prot/authorize",
        "{before}"
    );
    assert_eq!(auth["authorize_method"], "POST", "{before}");
    let r = call(&c, "prot/whoami");
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["error"], "server_not_connected");

    // An unknown state is refused by the callback page.
    let bogus = http(
        c.port,
        "GET",
        "/oauth/callback?code=x&state=nope",
        &[],
        None,
    );
    assert!(
        bogus.text().contains("Authorization failed"),
        "{}",
        bogus.text()
    );

    let (url, page, callback) = authorize_in_browser(&c, "prot");
    for part in [
        "response_type=code",
        "code_challenge_method=S256",
        &format!("resource={}", percent(&fx.url())),
        "scope=mcp%3Aread",
    ] {
        assert!(url.contains(part), "{part} missing from {url}");
    }
    assert!(page.contains("Authorized"), "{page}");
    let after = wait_auth(&c, "prot", "connected", "authorized");
    assert_eq!(after["auth"]["scopes"], json!(["mcp:read"]));
    assert!(after["auth"].get("authorize_url").is_none(), "{after}");
    let r = call(&c, "prot/whoami");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("whoami with scope mcp:read"),
        "{}",
        r.text()
    );
    // An agent joining over MCP sees the server authorized and calls its tool too.
    let agent = crate::mcp_support::McpServer::beside(&s, &[]);
    let init = agent.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "host", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    agent.notify("notifications/initialized", json!({}));
    let servers = agent.call_ok("external_list_servers", json!({}));
    assert!(
        servers
            .to_string()
            .contains("\"auth_state\":\"authorized\""),
        "{servers}"
    );
    let out = agent.call_ok(
        "external_call_tool",
        json!({"tool": "prot/whoami", "arguments": {}}),
    );
    assert!(
        out.to_string().contains("whoami with scope mcp:read"),
        "{out}"
    );
    drop(agent);

    // The same callback again is refused: a state is used once.
    let again = http(c.port, "GET", &callback, &[], None);
    assert!(
        again.text().contains("no authorization is waiting"),
        "{}",
        again.text()
    );
    let stats = fx.stats();
    assert_eq!(stats["registrations"], 1);
    assert_eq!(stats["refused"], json!([]));

    // The tokens are kept 0600 in the data directory, and never logged.
    let file = home.path().join("mcp_tokens.json");
    let mode = std::fs::metadata(&file)
        .expect("token file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let token = kept["servers"]["prot"]["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let refresh = kept["servers"]["prot"]["tokens"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(token.starts_with("at-") && refresh.starts_with("rt-"));

    // The access token stops working: the next call refreshes it and succeeds.
    assert_eq!(
        http(fx.port, "POST", "/control/expire", &[], Some("")).status,
        200
    );
    let r = call(&c, "prot/whoami");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        fx.stats()["token_requests"],
        json!(["authorization_code", "refresh_token"])
    );
    let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_ne!(
        kept["servers"]["prot"]["tokens"]["access_token"],
        json!(token)
    );

    // Step-up: a tool that needs more scope fails, and the server needs authorizing again
    // with the scopes the challenge named.
    let r = call(&c, "prot/admin");
    assert_ne!(r.status, 200, "{}", r.text());
    let s_auth = server(&c, "prot")["auth"].clone();
    assert_eq!(s_auth["state"], "required", "{s_auth}");
    assert!(
        s_auth["message"]
            .as_str()
            .unwrap()
            .contains("mcp:read mcp:admin"),
        "{s_auth}"
    );
    let (url, page, _) = authorize_in_browser(&c, "prot");
    assert!(url.contains("scope=mcp%3Aread%20mcp%3Aadmin"), "{url}");
    assert!(page.contains("Authorized"), "{page}");
    wait_auth(&c, "prot", "connected", "authorized");
    let r = call(&c, "prot/admin");
    assert_eq!(r.status, 200, "{}", r.text());
    // A challenge that names only the new scope: the new authorization asks for it with
    // everything asked for before, so the tools that worked still work.
    let r = call(&c, "prot/audit");
    assert_ne!(r.status, 200, "{}", r.text());
    assert_eq!(server(&c, "prot")["auth"]["state"], "required");
    let (url, page, _) = authorize_in_browser(&c, "prot");
    assert!(
        url.contains("scope=mcp%3Aread%20mcp%3Aadmin%20mcp%3Aaudit"),
        "{url}"
    );
    assert!(page.contains("Authorized"), "{page}");
    wait_auth(&c, "prot", "connected", "authorized");
    for tool in ["prot/audit", "prot/admin", "prot/whoami"] {
        let r = call(&c, tool);
        assert_eq!(r.status, 200, "{tool}: {}", r.text());
    }
    assert_eq!(fx.stats()["registrations"], 1, "the registration is reused");

    let log = s.stderr();
    for secret in [&token, &refresh] {
        assert!(!log.contains(secret.as_str()), "a token was logged");
    }
    assert!(!log.contains("code="), "the authorization code was logged");

    // A restart with the same data directory connects with the kept token.
    s.signal_and_wait("-TERM");
    let s = Server::start_in(home.path(), &args);
    let c = s.client();
    wait_auth(&c, "prot", "connected", "authorized");
    let r = call(&c, "prot/admin");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        fx.stats()["authorizations"],
        3,
        "no new authorization after the restart (three before it: the first and two step-ups)"
    );
}

#[test]
fn authorizing_refuses_what_it_cannot_do() {
    let s = Server::start(&["--mcp-client", "local:/bin/cat"]);
    let c = s.client();
    let e = c.post_err("/api/mcp-clients/nope/authorize", &json!({}), 404);
    assert_eq!(e["error"], "server_not_found");
    let e = c.post_err("/api/mcp-clients/local/authorize", &json!({}), 400);
    assert_eq!(e["error"], "not_http", "{e}");
    // A stdio server needs no authorization.
    assert_eq!(server(&c, "local")["auth"]["state"], "none");
    let page = http(c.port, "GET", "/oauth/callback", &[], None);
    assert_eq!(page.status, 200);
    assert!(
        page.text().contains("the callback has no state parameter"),
        "{}",
        page.text()
    );
}
