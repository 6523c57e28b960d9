//! Unit tests of `crate::upstream::config`.

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn parse(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
    parse_file(text, &no_env)
}

fn parse_err(text: &str) -> String {
    match parse(text) {
        Ok(s) => format!("unexpectedly parsed: {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn one(entry: &str) -> Result<ServerConfig, ConfigError> {
    parse(&format!(r#"{{"servers": {{"s": {entry}}}}}"#)).map(|mut v| v.remove(0))
}

fn one_err(entry: &str) -> String {
    match one(entry) {
        Ok(s) => format!("unexpectedly parsed: {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn oauth_entries_are_parsed_and_checked() {
    let s = one(r#"{"url": "http://h/mcp", "oauth": {"client_id": "id", "client_secret": "sec", "scope": "a b"}}"#)
        .unwrap();
    let o = s.oauth.unwrap();
    assert_eq!(o.client_id.as_deref(), Some("id"));
    assert_eq!(o.client_secret.as_deref(), Some("sec"));
    assert_eq!(o.scope.as_deref(), Some("a b"));
    assert_eq!(one(r#"{"url": "http://h/mcp"}"#).unwrap().oauth, None);
    assert_eq!(
        one(r#"{"url": "http://h", "oauth": {}}"#).unwrap().oauth,
        Some(OAuthConfig::default())
    );
    assert_eq!(
        one_err(r#"{"url": "http://h", "oauth": "x"}"#),
        "servers.s.oauth: expected an object, got \"x\""
    );
    assert_eq!(
        one_err(r#"{"url": "http://h", "oauth": {"client_secret": "s"}}"#),
        "servers.s.oauth.client_id: required with \"client_secret\""
    );
    assert_eq!(
        one_err(r#"{"url": "http://h", "oauth": {"scope": 3}}"#),
        "servers.s.oauth.scope: expected a string, got 3"
    );
    assert!(
        one_err(r#"{"url": "http://h", "oauth": {"client_metadata_url": "ftp://x"}}"#)
            .contains("expected an http:// or https:// URL")
    );
}

fn stdio(command: &str, args: &[&str]) -> Transport {
    Transport::Stdio {
        command: command.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: vec![],
        cwd: None,
    }
}

// A `servers` file with one stdio entry and one sse entry.
#[test]
fn parses_the_documented_example() {
    let text = r#"{
      "servers": {
        "filesystem": {
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/user"],
          "env": {},
          "transport": "stdio"
        },
        "remote-db": {
          "url": "http://db-server:8080/mcp/sse",
          "transport": "sse"
        }
      }
    }"#;
    let servers = parse(text).unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].name, "filesystem");
    assert_eq!(
        servers[0].transport,
        stdio(
            "npx",
            &[
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/home/user"
            ]
        )
    );
    assert_eq!(servers[1].name, "remote-db");
    assert_eq!(
        servers[1].transport,
        Transport::Sse {
            url: "http://db-server:8080/mcp/sse".into(),
            headers: vec![]
        }
    );
    assert_eq!(servers[1].transport.kind(), TransportKind::Sse);
    assert_eq!(
        servers[1].transport.url(),
        Some("http://db-server:8080/mcp/sse")
    );
    assert_eq!(servers[0].transport.url(), None);
}

// An empty server object, under either root key, is no servers.
#[test]
fn empty_servers() {
    assert_eq!(parse(r#"{"servers": {}}"#).unwrap(), vec![]);
    assert_eq!(parse(r#"{"mcpServers": {}}"#).unwrap(), vec![]);
}

// Invalid JSON is an error, with a hint when the text has comments.
#[test]
fn invalid_json() {
    let e = parse("{").unwrap_err();
    assert!(
        matches!(
            e,
            ConfigError::Json {
                comments: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("invalid JSON: "), "{e}");
    let e = parse("{\"servers\": {} // note\n}").unwrap_err();
    assert!(
        e.to_string().ends_with("(JSON does not allow comments)"),
        "{e}"
    );
    let e = parse("/* c */ {\"servers\": {}}").unwrap_err();
    assert!(matches!(e, ConfigError::Json { comments: true, .. }));
    assert!(parse("")
        .unwrap_err()
        .to_string()
        .starts_with("invalid JSON"));
}

#[test]
fn root_shape_errors() {
    assert_eq!(
        parse_err("[]"),
        "expected a JSON object with a \"servers\" or \"mcpServers\" object, got []"
    );
    assert_eq!(
        parse_err("{}"),
        "no \"servers\" or \"mcpServers\" object at the top level"
    );
    assert_eq!(
        parse_err(r#"{"servers": {}, "mcpServers": {}}"#),
        "has both \"servers\" and \"mcpServers\"; use one"
    );
    assert_eq!(
        parse_err(r#"{"servers": []}"#),
        "servers: expected an object of server entries, got []"
    );
    assert_eq!(
        parse_err(r#"{"mcpServers": {"fs": "npx"}}"#),
        "mcpServers.fs: expected an object, got \"npx\""
    );
    // Other top-level keys are ignored (VS Code's "inputs", Claude Code's "projects"...).
    assert_eq!(parse(r#"{"inputs": [], "servers": {}}"#).unwrap(), vec![]);
}

// Server names are validated when the file is loaded: letters, digits, `_` and `-` only,
// not empty, no `__`.
#[test]
fn server_names_validated() {
    assert_eq!(
        parse_err(r#"{"servers": {"a/b": {"command": "x"}}}"#),
        "servers.a/b: invalid server name \"a/b\": a server name may only contain letters, \
         digits, '_' and '-', not '/'"
    );
    assert_eq!(
        parse_err(r#"{"servers": {"": {"command": "x"}}}"#),
        "servers.: invalid server name \"\": a server name must not be empty"
    );
    assert_eq!(
        parse_err(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#),
        "mcpServers.a__b: invalid server name \"a__b\": a server name must not contain \
         \"__\" (the tool-name separator)"
    );
    assert!(
        parse(r#"{"servers": {"my-server": {"command": "x"}, "db_1": {"command": "y"}}}"#).is_ok()
    );
}

// No transport is fine with exactly one of command / url; neither (or both) is an error.
#[test]
fn transport_inferred_or_missing() {
    assert_eq!(
        one(r#"{"command": "srv"}"#).unwrap().transport,
        stdio("srv", &[])
    );
    assert_eq!(
        one(r#"{"url": "http://h/mcp"}"#).unwrap().transport,
        Transport::Auto {
            url: "http://h/mcp".into(),
            headers: vec![]
        }
    );
    assert_eq!(
        one_err("{}"),
        "servers.s: needs a \"command\" (stdio) or a \"url\" (Streamable HTTP, falling back \
         to SSE), or a \"transport\""
    );
    assert_eq!(
        one_err(r#"{"command": "x", "url": "http://h"}"#),
        "servers.s: has both \"command\" and \"url\"; add \"type\": \"stdio\", \"sse\" or \
         \"http\" to choose"
    );
    // With a transport, the other transport's keys are ignored (with a warning).
    let s = one(r#"{"type": "stdio", "command": "x", "url": "http://h", "headers": {}}"#).unwrap();
    assert_eq!(s.transport, stdio("x", &[]));
    let s = one(r#"{"type": "http", "command": "x", "url": "http://h", "env": {"A": 1}}"#).unwrap();
    assert_eq!(s.transport.kind(), TransportKind::Http);
}

// A stdio entry needs a non-empty string `command`.
#[test]
fn stdio_missing_command() {
    assert_eq!(
        one_err(r#"{"transport": "stdio"}"#),
        "servers.s.command: required for the stdio transport"
    );
    assert_eq!(
        one_err(r#"{"transport": "stdio", "url": "http://h"}"#),
        "servers.s.command: required for the stdio transport"
    );
    assert_eq!(
        one_err(r#"{"command": "  "}"#),
        "servers.s.command: expected a non-empty string, got \"  \""
    );
    assert_eq!(
        one_err(r#"{"command": ["npx"]}"#),
        "servers.s.command: expected a string, got [\"npx\"]"
    );
}

// An sse or http entry needs an http:// or https:// `url` with a host.
#[test]
fn http_missing_url() {
    assert_eq!(
        one_err(r#"{"transport": "sse"}"#),
        "servers.s.url: required for the sse transport"
    );
    assert_eq!(
        one_err(r#"{"type": "http", "command": "x"}"#),
        "servers.s.url: required for the http transport"
    );
    assert_eq!(
        one_err(r#"{"url": "ftp://h"}"#),
        "servers.s.url: expected an http:// or https:// URL, got \"ftp://h\""
    );
    assert_eq!(
        one_err(r#"{"type": "sse", "url": "http://"}"#),
        "servers.s.url: expected an http:// or https:// URL, got \"http://\""
    );
    assert_eq!(
        one_err(r#"{"url": 5}"#),
        "servers.s.url: expected a string, got 5"
    );
}

// An unknown transport is an error; the Streamable HTTP aliases that hosts write are
// accepted; `transport` and `type` must agree.
#[test]
fn transport_names() {
    assert_eq!(
        one_err(r#"{"transport": "ws", "url": "http://h"}"#),
        "servers.s.transport: unknown transport \"ws\"; expected \"stdio\", \"sse\" or \"http\""
    );
    assert_eq!(
        one_err(r#"{"type": 3, "url": "http://h"}"#),
        "servers.s.type: expected a string, got 3"
    );
    for alias in [
        "http",
        "streamable-http",
        "streamableHttp",
        "streamable_http",
    ] {
        let s = one(&format!(r#"{{"type": "{alias}", "url": "https://h/mcp"}}"#)).unwrap();
        assert_eq!(s.transport.kind(), TransportKind::Http, "{alias}");
    }
    // `transport` and `type` may both be present if they agree.
    assert!(one(r#"{"type": "sse", "transport": "sse", "url": "http://h"}"#).is_ok());
    assert_eq!(
        one_err(r#"{"transport": "sse", "type": "http", "url": "http://h"}"#),
        "servers.s.type: \"http\" contradicts \"transport\": \"sse\""
    );
}

// Optional fields take their defaults: 30 s timeout, auto-reconnect, no tool filter.
#[test]
fn optional_fields_defaulted() {
    let s = one(r#"{"command": "x"}"#).unwrap();
    assert_eq!(s.timeout, Duration::from_secs(30));
    assert!(s.auto_reconnect);
    assert!(s.allowed_tools.is_empty() && s.denied_tools.is_empty());
    assert!(s.tool_filter().is_empty());
    assert_eq!(s, ServerConfig::new("s", stdio("x", &[])));
}

// `timeout_s` (seconds), `timeoutMs` and `timeout_ms` (milliseconds): positive numbers, and
// several given must agree.
#[test]
fn timeouts() {
    assert_eq!(
        one(r#"{"command": "x", "timeout_s": 5}"#).unwrap().timeout,
        Duration::from_secs(5)
    );
    assert_eq!(
        one(r#"{"command": "x", "timeout_s": 0.25}"#)
            .unwrap()
            .timeout,
        Duration::from_millis(250)
    );
    assert_eq!(
        one(r#"{"command": "x", "timeoutMs": 1500}"#)
            .unwrap()
            .timeout,
        Duration::from_millis(1500)
    );
    assert_eq!(
        one(r#"{"command": "x", "timeout_ms": 60000}"#)
            .unwrap()
            .timeout,
        Duration::from_secs(60)
    );
    assert_eq!(
        one(r#"{"command": "x", "timeout_s": 2, "timeout_ms": 2000}"#)
            .unwrap()
            .timeout,
        Duration::from_secs(2)
    );
    assert_eq!(
        one_err(r#"{"command": "x", "timeout_s": 2, "timeoutMs": 3000}"#),
        "servers.s.timeoutMs: 3s contradicts \"timeout_s\" (2s)"
    );
    for (bad, shown) in [
        ("0", "0"),
        ("-1", "-1"),
        ("\"x\"", "\"x\""),
        ("null", "null"),
        ("true", "true"),
        ("1e300", "1e+300"),
    ] {
        assert_eq!(
            one_err(&format!(r#"{{"command": "x", "timeout_s": {bad}}}"#)),
            format!("servers.s.timeout_s: expected a positive number, got {shown}")
        );
    }
    assert_eq!(
        one_err(r#"{"command": "x", "timeout_ms": 0.0000001}"#),
        // Numbers are shown as written (serde_json keeps their text).
        "servers.s.timeout_ms: expected a positive number, got 0.0000001"
    );
    // The whole message, with the server's name in the path.
    assert_eq!(
        parse_err(r#"{"servers": {"time": {"command": "t", "timeout_s": "x"}}}"#),
        "servers.time.timeout_s: expected a positive number, got \"x\""
    );
}

// `env` is an object of strings with non-empty names, kept in order; `cwd` is kept.
#[test]
fn env_must_be_object_of_strings() {
    assert_eq!(
        one_err(r#"{"command": "x", "env": ["A=1"]}"#),
        "servers.s.env: expected an object of strings, got [\"A=1\"]"
    );
    assert_eq!(
        one_err(r#"{"command": "x", "env": {"A": 1}}"#),
        "servers.s.env.A: expected a string, got 1"
    );
    assert_eq!(
        one_err(r#"{"command": "x", "env": {"": "v"}}"#),
        "servers.s.env.: expected a non-empty name, got \"\""
    );
    let s = one(r#"{"command": "x", "env": {"B": "2", "A": "1"}, "cwd": "/tmp"}"#).unwrap();
    assert_eq!(
        s.transport,
        Transport::Stdio {
            command: "x".into(),
            args: vec![],
            env: vec![("B".into(), "2".into()), ("A".into(), "1".into())],
            cwd: Some(PathBuf::from("/tmp")),
        }
    );
}

#[test]
fn other_field_types() {
    assert_eq!(
        one_err(r#"{"command": "x", "args": "-y"}"#),
        "servers.s.args: expected an array of strings, got \"-y\""
    );
    assert_eq!(
        one_err(r#"{"command": "x", "args": ["a", 2]}"#),
        "servers.s.args[1]: expected a string, got 2"
    );
    assert_eq!(
        one_err(r#"{"command": "x", "cwd": 1}"#),
        "servers.s.cwd: expected a string, got 1"
    );
    assert_eq!(
        one_err(r#"{"command": "x", "cwd": ""}"#),
        "servers.s.cwd: expected a non-empty path, got \"\""
    );
    assert_eq!(
        one_err(r#"{"command": "x", "auto_reconnect": "yes"}"#),
        "servers.s.auto_reconnect: expected true or false, got \"yes\""
    );
    assert!(
        !one(r#"{"command": "x", "auto_reconnect": false}"#)
            .unwrap()
            .auto_reconnect
    );
    assert_eq!(
        one_err(r#"{"url": "http://h", "headers": []}"#),
        "servers.s.headers: expected an object of strings, got []"
    );
    // Header values are never shown: they hold tokens.
    assert_eq!(
        one_err(r#"{"url": "http://h", "headers": {"X-Key": 12345}}"#),
        "servers.s.headers.X-Key: expected a string, got a number"
    );
    assert_eq!(
        one_err(r#"{"url": "http://h", "headers": {"X": "a\r\nEvil: 1"}}"#),
        "servers.s.headers.X: expected a header value without line breaks, got a value with \
         a line break"
    );
    // Unknown keys are ignored.
    assert!(one(r#"{"command": "x", "disabled": false, "alwaysAllow": []}"#).is_ok());
    // A long value is cut in messages.
    let long = "y".repeat(100);
    let msg = one_err(&format!(r#"{{"command": "x", "cwd": [{long:?}]}}"#));
    assert!(msg.ends_with("...") && msg.len() < 120, "{msg}");
}

#[test]
fn tool_lists() {
    let s = one(
        r#"{"command": "x", "allowed_tools": ["read_*", "list"], "denied_tools": ["read_secret"]}"#,
    )
    .unwrap();
    assert_eq!(s.allowed_tools, ["read_*", "list"]);
    assert_eq!(s.denied_tools, ["read_secret"]);
    let f = s.tool_filter();
    assert!(f.allows("read_file") && f.allows("list"));
    assert!(!f.allows("read_secret") && !f.allows("write"));
    assert_eq!(
        one_err(r#"{"command": "x", "denied_tools": "write_*"}"#),
        "servers.s.denied_tools: expected an array of strings, got \"write_*\""
    );
    assert_eq!(
        one_err(r#"{"command": "x", "allowed_tools": [1]}"#),
        "servers.s.allowed_tools[0]: expected a string, got 1"
    );
    assert_eq!(
        one_err(r#"{"command": "x", "allowed_tools": ["a", ""]}"#),
        "servers.s.allowed_tools[1]: expected a non-empty glob pattern, got \"\""
    );
    // Patterns are not expanded.
    let s = one(r#"{"command": "x", "denied_tools": ["${X}"]}"#).unwrap();
    assert_eq!(s.denied_tools, ["${X}"]);
}

#[test]
fn expansion_rules() {
    let env = env_of(&[("A", "1"), ("EMPTY", ""), ("P", "/p")]);
    let x = |s: &str| expand_vars(s, &env);
    assert_eq!(x("plain $A $ {A}").unwrap(), "plain $A $ {A}");
    assert_eq!(x("${A}${A}-${P}/x").unwrap(), "11-/p/x");
    assert_eq!(x("${NOPE:-dflt}").unwrap(), "dflt");
    assert_eq!(x("${EMPTY:-dflt}").unwrap(), "dflt");
    assert_eq!(x("${EMPTY}").unwrap(), "");
    assert_eq!(x("${A:-dflt}").unwrap(), "1");
    assert_eq!(x("${NOPE:-}").unwrap(), "");
    assert_eq!(x("${NOPE:-a:-b}").unwrap(), "a:-b");
    assert_eq!(x("é${A}ü").unwrap(), "é1ü");
    assert_eq!(x("${NOPE}"), Err(ExpandError::Undefined("NOPE".into())));
    assert_eq!(x("${A"), Err(ExpandError::Unterminated));
    assert_eq!(x("${}"), Err(ExpandError::BadName(String::new())));
    assert_eq!(x("${1A}"), Err(ExpandError::BadName("1A".into())));
    assert_eq!(x("${A B}"), Err(ExpandError::BadName("A B".into())));
}

#[test]
fn expansion_in_fields() {
    let env = env_of(&[("BIN", "/usr/bin/srv"), ("TOKEN", "t0k"), ("HOST", "h:1")]);
    let text = r#"{"mcpServers": {
        "a": {"command": "${BIN}", "args": ["--x=${TOKEN}", "${NOPE:-d}"],
              "env": {"KEY_${BIN}": "${TOKEN}"}, "cwd": "${BIN}"},
        "b": {"type": "http", "url": "http://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    }}"#;
    let servers = parse_file(text, &env).unwrap();
    assert_eq!(
        servers[0].transport,
        Transport::Stdio {
            command: "/usr/bin/srv".into(),
            args: vec!["--x=t0k".into(), "d".into()],
            // Keys and cwd are not expanded.
            env: vec![("KEY_${BIN}".into(), "t0k".into())],
            cwd: Some(PathBuf::from("${BIN}")),
        }
    );
    assert_eq!(
        servers[1].transport,
        Transport::Http {
            url: "http://h:1/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer t0k".into())],
        }
    );
    // Debug output hides header and env values.
    let dbg = format!("{servers:?}");
    assert!(
        !dbg.contains("Bearer") && dbg.contains("Authorization"),
        "{dbg}"
    );

    let err = |field: &str| match parse_file(&format!(r#"{{"servers": {{"gh": {field}}}}}"#), &env)
    {
        Ok(_) => String::from("parsed"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        err(r#"{"command": "${NOPE}"}"#),
        "servers.gh.command: environment variable NOPE is not set (write ${NOPE:-default} to \
         give a default)"
    );
    assert_eq!(
        err(r#"{"command": "x", "args": ["ok", "${NOPE}"]}"#),
        "servers.gh.args[1]: environment variable NOPE is not set (write ${NOPE:-default} to \
         give a default)"
    );
    assert_eq!(
        err(r#"{"command": "x", "env": {"K": "${NOPE}"}}"#),
        "servers.gh.env.K: environment variable NOPE is not set (write ${NOPE:-default} to \
         give a default)"
    );
    assert_eq!(
        err(r#"{"url": "${NOPE}"}"#),
        "servers.gh.url: environment variable NOPE is not set (write ${NOPE:-default} to \
         give a default)"
    );
    assert_eq!(
        err(r#"{"url": "http://h", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}"#),
        "servers.gh.headers.Authorization: environment variable GH_TOKEN is not set (write \
         ${GH_TOKEN:-default} to give a default)"
    );
    assert_eq!(
        err(r#"{"command": "${BIN"}"#),
        "servers.gh.command: \"${\" without a closing \"}\""
    );
    assert_eq!(
        err(r#"{"command": "${B-N}"}"#),
        "servers.gh.command: invalid variable name \"B-N\" in \"${…}\""
    );
    assert_eq!(
        err(r#"{"command": "${EMPTY:-}"}"#),
        "servers.gh.command: expected a non-empty string, got \"\""
    );
    // The message shows the URL as written, not its expansion.
    assert_eq!(
        err(r#"{"url": "${TOKEN}"}"#),
        "servers.gh.url: expected an http:// or https:// URL, got \"${TOKEN}\""
    );
}

// The Claude Desktop / Claude Code `mcpServers` shape, with `type`, `headers` and `${VAR}`.
#[test]
fn claude_style_config() {
    let env = env_of(&[("TOKEN", "abc")]);
    let text = r#"{
      "mcpServers": {
        "everything": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": { "LOG": "1" } },
        "local-http": { "type": "http", "url": "http://127.0.0.1:3001/mcp", "headers": { "Authorization": "Bearer ${TOKEN}" } },
        "old-sse":    { "type": "sse",  "url": "http://127.0.0.1:3002/sse" },
        "bare-url":   { "url": "https://example.com/mcp/" }
      }
    }"#;
    let s = parse_file(text, &env).unwrap();
    let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything", "local-http", "old-sse", "bare-url"]);
    let kinds: Vec<&str> = s.iter().map(|s| s.transport.kind().as_str()).collect();
    assert_eq!(kinds, ["stdio", "http", "sse", "auto"]);
    // The URL is kept exactly, trailing slash or not.
    assert_eq!(s[3].transport.url(), Some("https://example.com/mcp/"));
    assert_eq!(s[2].transport.url(), Some("http://127.0.0.1:3002/sse"));
}

// `--mcp-client NAME:VALUE`: split at the first colon; a URL or a stdio command; the error
// messages.
#[test]
fn inline_flags() {
    let p = |f: &str| parse_inline(f, &no_env);
    let s = p("filesystem:npx -y @modelcontextprotocol/server-filesystem /tmp").unwrap();
    assert_eq!(s.name, "filesystem");
    assert_eq!(
        s.transport,
        stdio(
            "npx",
            &["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
        )
    );
    assert_eq!(s.timeout, UPSTREAM_CALL_TIMEOUT);
    assert!(s.auto_reconnect);
    // First colon only; later colons belong to the value.
    assert_eq!(
        p("remote-db:http://db-server:8080/mcp/sse")
            .unwrap()
            .transport,
        Transport::Auto {
            url: "http://db-server:8080/mcp/sse".into(),
            headers: vec![]
        }
    );
    assert_eq!(
        p("secure-api:https://api.example.com/mcp/sse")
            .unwrap()
            .transport
            .kind(),
        TransportKind::Auto
    );
    assert_eq!(
        p("x:HTTPS://h/").unwrap().transport.kind(),
        TransportKind::Auto
    );
    assert_eq!(
        p("x:  srv  --a:b  ").unwrap().transport,
        stdio("srv", &["--a:b"])
    );

    let e = |f: &str| p(f).unwrap_err().to_string();
    assert_eq!(
        e("no-colon"),
        "--mcp-client \"no-colon\": expected NAME:COMMAND or NAME:URL (no ':' found)"
    );
    assert_eq!(
        e(":command"),
        "--mcp-client \":command\": the server name before ':' is empty"
    );
    assert_eq!(
        e("name:"),
        "--mcp-client \"name:\": nothing after \"name:\"; give a command or an http(s):// URL"
    );
    assert_eq!(
        e("name:   "),
        "--mcp-client \"name:   \": nothing after \"name:\"; give a command or an http(s):// URL"
    );
    assert_eq!(
        e("my server:cmd"),
        "--mcp-client \"my server:cmd\": invalid server name \"my server\": a server name \
         may only contain letters, digits, '_' and '-', not ' '"
    );
    assert_eq!(
        e("a__b:cmd"),
        "--mcp-client \"a__b:cmd\": invalid server name \"a__b\": a server name must not \
         contain \"__\" (the tool-name separator)"
    );
    assert_eq!(
        e("http://host/mcp"),
        "--mcp-client \"http://host/mcp\": looks like a URL without a server name; write \
         NAME:URL"
    );
    assert_eq!(
        e("x:http://"),
        "--mcp-client \"x:http://\": \"http://\" has no host"
    );
}

#[test]
fn inline_json_entry() {
    let env = env_of(&[("T", "tok")]);
    let s = parse_inline(
        r#"gh:{"type": "http", "url": "https://api/mcp", "headers": {"Authorization": "Bearer ${T}"}, "timeout_s": 5}"#,
        &env,
    )
    .unwrap();
    assert_eq!(s.name, "gh");
    assert_eq!(s.timeout, Duration::from_secs(5));
    assert_eq!(
        s.transport,
        Transport::Http {
            url: "https://api/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer tok".into())]
        }
    );
    assert_eq!(
        parse_inline(r#"gh:{"type": "sse"}"#, &env)
            .unwrap_err()
            .to_string(),
        "--mcp-client gh.url: required for the sse transport"
    );
    let e = parse_inline("gh:{nope", &env).unwrap_err().to_string();
    assert!(
        e.starts_with("--mcp-client \"gh:{nope\": invalid JSON entry: "),
        "{e}"
    );
}

// Where the config file is looked for: `$CIDELDILL_MCP_CLIENTS_CONFIG`, then
// `$CIDELDILL_HOME`, then `~/.cideldill`; `~` is expanded and empty values count as unset.
#[test]
fn config_paths() {
    assert_eq!(
        config_path(&env_of(&[("HOME", "/home/u")])),
        PathBuf::from("/home/u/.cideldill/mcp_clients.json")
    );
    assert_eq!(
        config_path(&env_of(&[
            ("HOME", "/home/u"),
            ("CIDELDILL_HOME", "/data/cd")
        ])),
        PathBuf::from("/data/cd/mcp_clients.json")
    );
    assert_eq!(
        config_path(&env_of(&[("HOME", "/home/u"), ("CIDELDILL_HOME", "~/cd")])),
        PathBuf::from("/home/u/cd/mcp_clients.json")
    );
    assert_eq!(
        config_path(&env_of(&[
            ("HOME", "/home/u"),
            ("CIDELDILL_HOME", "/data/cd"),
            ("CIDELDILL_MCP_CLIENTS_CONFIG", "/etc/mcp.json")
        ])),
        PathBuf::from("/etc/mcp.json")
    );
    assert_eq!(
        config_path(&env_of(&[
            ("HOME", "/home/u"),
            ("CIDELDILL_MCP_CLIENTS_CONFIG", "~/.claude.json")
        ])),
        PathBuf::from("/home/u/.claude.json")
    );
    // Empty values count as unset.
    assert_eq!(
        config_path(&env_of(&[
            ("HOME", "/home/u"),
            ("CIDELDILL_HOME", ""),
            ("CIDELDILL_MCP_CLIENTS_CONFIG", "")
        ])),
        PathBuf::from("/home/u/.cideldill/mcp_clients.json")
    );
    assert_eq!(
        config_path(&no_env),
        PathBuf::from(".cideldill/mcp_clients.json")
    );
}

fn flags(mcp_clients: bool, config: Option<&str>, inline: &[&str]) -> ClientFlags {
    ClientFlags {
        mcp_clients,
        config: config.map(str::to_owned),
        inline: inline.iter().map(|s| (*s).to_owned()).collect(),
    }
}

// Which config file, if any, the flags select.
#[test]
fn which_file() {
    let env = env_of(&[("HOME", "/h")]);
    let file = |f: Option<FileSource>| Some(Plan { file: f });
    assert_eq!(plan(&flags(false, None, &[]), &env), None);
    assert_eq!(
        plan(&flags(true, None, &[]), &env),
        file(Some(FileSource::Default(
            "/h/.cideldill/mcp_clients.json".into()
        )))
    );
    assert_eq!(plan(&flags(false, None, &["a:b"]), &env), file(None));
    assert_eq!(
        plan(&flags(false, Some("/x.json"), &[]), &env),
        file(Some(FileSource::Explicit("/x.json".into())))
    );
    assert_eq!(
        plan(&flags(true, Some("~/x.json"), &["a:b"]), &env),
        file(Some(FileSource::Explicit("/h/x.json".into())))
    );
    assert_eq!(
        plan(&flags(false, Some(r#" {"servers": {}}"#), &[]), &env),
        file(Some(FileSource::InlineJson(r#" {"servers": {}}"#.into())))
    );
}

fn reader(files: &'static [(&'static str, &'static str)]) -> impl Fn(&Path) -> FileRead {
    move |p| match files.iter().find(|(n, _)| Path::new(n) == p) {
        Some((_, "EACCES")) => FileRead::Failed("permission denied".into()),
        Some((_, t)) => FileRead::Text((*t).to_owned()),
        None => FileRead::Missing,
    }
}

// A missing default file is no servers; a missing explicit file, an unreadable file or a bad
// entry is an error.
#[test]
fn missing_file_rules() {
    let env = env_of(&[("HOME", "/h")]);
    let none = reader(&[]);
    assert_eq!(
        load_source(&FileSource::Default("/h/m.json".into()), &none, &env),
        Ok(vec![])
    );
    let e = load_source(&FileSource::Explicit("/nonexistent".into()), &none, &env).unwrap_err();
    assert_eq!(
        e,
        ConfigError::NotFound {
            path: "/nonexistent".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "MCP clients config file not found: /nonexistent"
    );
    let locked = reader(&[("/h/m.json", "EACCES")]);
    assert_eq!(
        load_source(&FileSource::Default("/h/m.json".into()), &locked, &env)
            .unwrap_err()
            .to_string(),
        "cannot read MCP clients config file /h/m.json: permission denied"
    );
    let bad = reader(&[(
        "/c.json",
        r#"{"servers": {"t": {"command": "x", "timeout_s": "x"}}}"#,
    )]);
    assert_eq!(
        load_source(&FileSource::Explicit("/c.json".into()), &bad, &env)
            .unwrap_err()
            .to_string(),
        "/c.json: servers.t.timeout_s: expected a positive number, got \"x\""
    );
    assert_eq!(
        startup_servers(&flags(true, None, &[]), &none, &env),
        Ok(Some(vec![]))
    );
    assert_eq!(
        startup_servers(&flags(false, Some("/nonexistent"), &[]), &none, &env),
        Err(ConfigError::NotFound {
            path: "/nonexistent".into()
        })
    );
    assert_eq!(
        startup_servers(&flags(false, None, &[]), &none, &env),
        Ok(None)
    );
}

// File and inline servers are merged, and an inline server replaces the file's server of the
// same name.
#[test]
fn startup_merge() {
    let env = env_of(&[("HOME", "/h")]);
    let files = reader(&[(
        "/h/.cideldill/mcp_clients.json",
        r#"{"servers": {"a": {"command": "file-a"}, "b": {"command": "file-b"}}}"#,
    )]);
    let got = startup_servers(
        &flags(true, None, &["b:inline-b", "c:http://c/", "c:inline-c"]),
        &files,
        &env,
    )
    .unwrap()
    .unwrap();
    let summary: Vec<(&str, &str)> = got
        .iter()
        .map(|s| match &s.transport {
            Transport::Stdio { command, .. } => (s.name.as_str(), command.as_str()),
            t => (s.name.as_str(), t.url().unwrap_or("")),
        })
        .collect();
    assert_eq!(
        summary,
        [("a", "file-a"), ("b", "inline-b"), ("c", "inline-c")]
    );

    // Inline alone creates the manager with just those servers.
    let got = startup_servers(&flags(false, None, &["x:srv"]), &reader(&[]), &env)
        .unwrap()
        .unwrap();
    assert_eq!(got, vec![ServerConfig::new("x", stdio("srv", &[]))]);

    // A bad inline flag is reported even when the file is missing.
    assert!(matches!(
        startup_servers(&flags(false, Some("/none"), &["bad"]), &reader(&[]), &env),
        Err(ConfigError::Inline { .. })
    ));

    // Inline JSON in --mcp-clients-config.
    let got = startup_servers(
        &flags(
            false,
            Some(r#"{"mcpServers": {"m": {"command": "m"}}}"#),
            &[],
        ),
        &reader(&[]),
        &env,
    )
    .unwrap()
    .unwrap();
    assert_eq!(got[0].name, "m");
}

#[test]
fn merge_order() {
    let s = |n: &str, c: &str| ServerConfig::new(n, stdio(c, &[]));
    assert_eq!(
        merge(
            vec![s("a", "1"), s("b", "1")],
            vec![s("c", "2"), s("a", "2")]
        ),
        vec![s("a", "2"), s("b", "1"), s("c", "2")]
    );
    assert_eq!(merge(vec![], vec![]), vec![]);
}

#[test]
fn read_fs_missing_and_present() {
    assert_eq!(
        read_fs(Path::new("/nonexistent-dir-for-upstream-test/x.json")),
        FileRead::Missing
    );
    let dir = std::env::temp_dir().join(format!("upstream-cfg-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("mcp_clients.json");
    std::fs::write(&file, r#"{"servers": {}}"#).unwrap();
    assert_eq!(read_fs(&file), FileRead::Text(r#"{"servers": {}}"#.into()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_panics_on_odd_input() {
    let valid = r#"{"mcpServers": {"é": {"url": "hTtP://ü/${A:-é}", "headers": {"h": "${"}}, "a": {"command": "${}", "timeout_s": 1e-320}}}"#;
    for end in 0..=valid.len() {
        if let Some(prefix) = valid.get(..end) {
            let _ = parse_file(prefix, &no_env);
            let _ = parse_inline(prefix, &no_env);
            let _ = parse_inline(&format!("n:{prefix}"), &no_env);
            let _ = expand_vars(prefix, &no_env);
        }
    }
    for odd in [
        "é", "ü:", "x:ü", "x:h", "x:httpé", "x:{", "x:{}", "x:[]", ":", "::",
    ] {
        let _ = parse_inline(odd, &no_env);
    }
    assert!(is_http_url("http://é"));
    assert!(!is_http_url("httpé"));
    assert!(!is_http_url("é"));
}
