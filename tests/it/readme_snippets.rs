//! The README's MCP registration snippets, run as written. Every code block marked
//! `<!-- snippet:NAME -->` is parsed the way its host reads it (a `claude mcp add` line, a
//! Claude Desktop or Cursor `mcpServers` file, a VS Code `servers` file). A stdio entry starts
//! exactly the command it names (`cideldill-server`, resolved to the binary under test) with
//! exactly its arguments, in a fresh `CIDELDILL_HOME` and no `--port`, and must complete an MCP
//! `initialize` and `tools/list` on stdio: once with no server running (it starts its own) and
//! once beside a running server (it joins that session). An HTTP entry's URL must be the
//! default address, and its path must answer `initialize` and `tools/list` on a running
//! server. A snippet this test cannot run fails it.

use serde_json::{json, Value};

use crate::mcp_support::McpServer;
use crate::support::{Client, Server, TempDir};

/// The snippets the README must have.
const EXPECTED: [&str; 7] = [
    "claude-code-stdio",
    "claude-code-http",
    "claude-desktop",
    "cursor-stdio",
    "cursor-http",
    "vscode-stdio",
    "vscode-http",
];

/// A marked code block of the README.
#[derive(Debug)]
struct Snippet {
    name: String,
    lang: String,
    text: String,
}

/// What a host does with a snippet.
#[derive(Debug, PartialEq)]
enum Launch {
    /// Starts `command` with `args` (and `env`) and talks MCP on its stdio.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Talks Streamable HTTP to `url`.
    Http { url: String },
}

fn readme() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    std::fs::read_to_string(path).expect("README.md")
}

/// Every `<!-- snippet:NAME -->` of `text` with the fenced code block that follows it.
fn snippets(text: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- snippet:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        let name = name.trim().to_owned();
        let fence = lines
            .next()
            .unwrap_or_else(|| panic!("snippet {name}: nothing follows the marker"));
        let lang = fence
            .strip_prefix("```")
            .unwrap_or_else(|| panic!("snippet {name}: the marker's next line is not a fence"))
            .trim()
            .to_owned();
        let mut body = Vec::new();
        for line in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            body.push(line);
        }
        out.push(Snippet {
            name,
            lang,
            text: body.join("\n"),
        });
    }
    out
}

/// How the host of `snippet` starts or reaches the server; an error for anything this test
/// does not know how to run.
fn launches(snippet: &Snippet) -> Result<Vec<Launch>, String> {
    match snippet.lang.as_str() {
        "sh" => {
            let lines: Vec<&str> = snippet
                .text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            match lines.as_slice() {
                [line] => claude_mcp_add(line).map(|l| vec![l]),
                _ => Err(format!("expected one command line, got {lines:?}")),
            }
        }
        "json" => {
            let value: Value = serde_json::from_str(&snippet.text)
                .map_err(|e| format!("not JSON ({e}): {}", snippet.text))?;
            host_file(&value)
        }
        other => Err(format!("unknown snippet language {other:?}")),
    }
}

/// `claude mcp add [options] NAME -- COMMAND ARGS...` (stdio) or
/// `claude mcp add --transport http NAME URL`.
fn claude_mcp_add(line: &str) -> Result<Launch, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let rest = match words.as_slice() {
        ["claude", "mcp", "add", rest @ ..] => rest,
        _ => return Err(format!("not a `claude mcp add` line: {line}")),
    };
    if line.contains(['\'', '"', '\\', '$', '`']) {
        return Err(format!("quoting is not understood here: {line}"));
    }
    let mut transport = "stdio";
    let mut env = Vec::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            "--" => {
                let (command, args) = rest[i + 1..]
                    .split_first()
                    .ok_or_else(|| format!("no command after --: {line}"))?;
                if transport != "stdio" || positional.len() != 1 {
                    return Err(format!("a stdio entry is NAME -- COMMAND: {line}"));
                }
                return Ok(Launch::Stdio {
                    command: command.to_string(),
                    args: args.iter().map(|a| a.to_string()).collect(),
                    env,
                });
            }
            "--transport" | "-t" => {
                transport = rest.get(i + 1).ok_or("--transport needs a value")?;
                i += 2;
            }
            "--scope" | "-s" => i += 2,
            "--env" | "-e" => {
                let pair = rest.get(i + 1).ok_or("--env needs KEY=VALUE")?;
                let (k, v) = pair.split_once('=').ok_or("--env needs KEY=VALUE")?;
                env.push((k.to_owned(), v.to_owned()));
                i += 2;
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            word => {
                positional.push(word);
                i += 1;
            }
        }
    }
    match (transport, positional.as_slice()) {
        ("http", [_name, url]) => Ok(Launch::Http {
            url: url.to_string(),
        }),
        _ => Err(format!(
            "transport {transport} with {positional:?} is not run here: {line}"
        )),
    }
}

/// A host's JSON file: `{"mcpServers": {...}}` (Claude Desktop, Cursor: `command`, `args`,
/// `env`, or `url`) or VS Code's `{"servers": {...}}` (each entry with its `type`).
fn host_file(value: &Value) -> Result<Vec<Launch>, String> {
    let top = value.as_object().ok_or("not an object")?;
    let (key, servers) = match top.iter().collect::<Vec<_>>().as_slice() {
        [(k, v)] if *k == "mcpServers" || *k == "servers" => (k.as_str(), *v),
        _ => return Err(format!("expected one key, mcpServers or servers: {value}")),
    };
    let servers = servers.as_object().ok_or("the servers are not an object")?;
    if servers.is_empty() {
        return Err("no server entry".into());
    }
    let mut out = Vec::new();
    for (name, entry) in servers {
        let entry = entry
            .as_object()
            .ok_or_else(|| format!("{name}: not an object"))?;
        for k in entry.keys() {
            if !["type", "command", "args", "env", "url"].contains(&k.as_str()) {
                return Err(format!("{name}: unknown field {k}"));
            }
        }
        let kind = match entry.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => return Err(format!("{name}: type {other}")),
            None if key == "servers" => return Err(format!("{name}: VS Code entries need a type")),
            None if entry.contains_key("command") => "stdio",
            None if entry.contains_key("url") => "http",
            None => return Err(format!("{name}: neither command nor url")),
        };
        let text = |v: &Value| v.as_str().map(str::to_owned).ok_or(format!("{name}: {v}"));
        match kind {
            "stdio" if !entry.contains_key("url") => {
                let command = text(entry.get("command").ok_or(format!("{name}: no command"))?)?;
                let args = match entry.get("args") {
                    None => Vec::new(),
                    Some(Value::Array(a)) => a.iter().map(text).collect::<Result<_, _>>()?,
                    Some(other) => return Err(format!("{name}: args {other}")),
                };
                let env = match entry.get("env") {
                    None => Vec::new(),
                    Some(Value::Object(m)) => m
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), text(v)?)))
                        .collect::<Result<_, String>>()?,
                    Some(other) => return Err(format!("{name}: env {other}")),
                };
                out.push(Launch::Stdio { command, args, env });
            }
            "http" if !entry.contains_key("command") => {
                let url = text(entry.get("url").ok_or(format!("{name}: no url"))?)?;
                out.push(Launch::Http { url });
            }
            other => return Err(format!("{name}: a {other} entry is not run here")),
        }
    }
    Ok(out)
}

fn initialize_stdio(agent: &McpServer) {
    let r = agent.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "readme-snippet", "version": "1"}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
    assert!(
        r["result"]["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("breakpoint_wait_for_pause")),
        "{r}"
    );
    agent.notify("notifications/initialized", json!({}));
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_our_tools(list: &Value) {
    let names = tool_names(list);
    for tool in [
        "breakpoint_wait_for_pause",
        "breakpoint_continue",
        "external_call_tool",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing: {list}");
    }
}

/// Runs a stdio entry alone (it starts a server of its own) and beside a running server (it
/// joins that server's session).
fn run_stdio(name: &str, command: &str, args: &[String], env: &[(String, String)]) {
    assert_eq!(
        command, "cideldill-server",
        "snippet {name}: the README's snippets name the installed binary"
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(
        !args.contains(&"--port"),
        "snippet {name}: a registration needs no --port"
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

    // Nothing running: the process starts a server of its own.
    let home = TempDir::new("snippet");
    let mut alone = McpServer::exact(home.path(), &args, &env);
    initialize_stdio(&alone);
    assert_our_tools(&alone.request("tools/list", json!({})));
    let port: u16 = crate::support::wait_for("its port file", || {
        std::fs::read_to_string(home.path().join("port"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    let status = Client { port }.get_ok("/api/status");
    assert_eq!(status["pid"], alone.pid(), "snippet {name}: {status}");
    assert!(
        alone.stderr().contains("Server running on"),
        "snippet {name}: {}",
        alone.stderr()
    );
    assert!(alone.junk.lock().unwrap().is_empty(), "snippet {name}");
    alone.close_stdin();

    // Beside a server started as the README says (`cideldill-server`; the test adds --port 0):
    // the process joins its session.
    let home = TempDir::new("snippet-join");
    let server = Server::start_in(home.path(), &[]);
    server
        .client()
        .post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let mut joined = McpServer::exact(home.path(), &args, &env);
    initialize_stdio(&joined);
    assert_our_tools(&joined.request("tools/list", json!({})));
    let r = joined.call_ok("breakpoint_list_breakpoints", json!({}));
    assert_eq!(r["breakpoints"], json!(["add"]), "snippet {name}: {r}");
    joined.close_stdin();
    assert!(joined.wait_exit().success(), "{}", joined.stderr());
    assert!(
        joined.stderr().contains("joining the running server"),
        "snippet {name}: {}",
        joined.stderr()
    );
    assert!(joined.junk.lock().unwrap().is_empty(), "snippet {name}");
}

/// One Streamable HTTP POST of `msg` to `path`.
fn post(port: u16, path: &str, session: Option<&str>, msg: &Value) -> crate::support::Resp {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(s) = session {
        headers.extend([
            ("Mcp-Session-Id", s),
            ("MCP-Protocol-Version", "2025-06-18"),
        ]);
    }
    crate::support::http(port, "POST", path, &headers, Some(&msg.to_string()))
}

/// Checks an HTTP entry: the README's default address, and its path answering MCP on a server.
fn run_http(name: &str, url: &str) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("snippet {name}: {url} is not http://"));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = authority
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("snippet {name}: {url} names no port"));
    assert!(
        host == "127.0.0.1" || host == "localhost",
        "snippet {name}: {url} is not on the loopback address the server binds"
    );
    assert_eq!(
        port,
        cideldill_server::config::DEFAULT_PORT.to_string(),
        "snippet {name}: {url} is not the default port"
    );
    let home = TempDir::new("snippet-http");
    let server = Server::start_in(home.path(), &[]);
    let init = post(
        server.port,
        path,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "readme-snippet", "version": "1"}}}),
    );
    assert_eq!(
        init.status,
        200,
        "snippet {name}: POST {path}: {}",
        String::from_utf8_lossy(&init.body)
    );
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-06-18");
    let sid = init
        .header("Mcp-Session-Id")
        .expect("Mcp-Session-Id")
        .to_owned();
    let note = post(
        server.port,
        path,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(note.status, 202, "snippet {name}");
    let list = post(
        server.port,
        path,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(list.status, 200, "snippet {name}");
    assert_our_tools(&list.json());
}

#[test]
fn the_readme_has_every_registration_snippet_once() {
    let found: Vec<String> = snippets(&readme()).into_iter().map(|s| s.name).collect();
    let mut sorted = found.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        found.len(),
        "a snippet name repeats: {found:?}"
    );
    let mut expected: Vec<String> = EXPECTED.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(sorted, expected);
}

#[test]
fn every_readme_snippet_starts_or_reaches_a_server_that_answers_mcp() {
    let all = snippets(&readme());
    assert!(!all.is_empty(), "no marked snippets in README.md");
    for snippet in &all {
        let launches = launches(snippet)
            .unwrap_or_else(|e| panic!("snippet {}: cannot run it: {e}", snippet.name));
        assert_eq!(launches.len(), 1, "snippet {}: one entry", snippet.name);
        match &launches[0] {
            Launch::Stdio { command, args, env } => run_stdio(&snippet.name, command, args, env),
            Launch::Http { url } => run_http(&snippet.name, url),
        }
    }
}

#[test]
fn a_snippet_of_an_unknown_kind_is_refused() {
    let snippet = |lang: &str, text: &str| Snippet {
        name: "t".into(),
        lang: lang.into(),
        text: text.into(),
    };
    for (lang, text) in [
        ("sh", "npx cideldill-server --mcp"),
        (
            "sh",
            "claude mcp add --transport sse cideldill http://127.0.0.1:5174/mcp/sse",
        ),
        (
            "sh",
            "claude mcp add cideldill -- cideldill-server --mcp\nclaude mcp list",
        ),
        ("sh", "claude mcp add --json cideldill '{}'"),
        ("toml", "[mcp]"),
        (
            "json",
            r#"{"servers": {"x": {"command": "cideldill-server"}}}"#,
        ),
        (
            "json",
            r#"{"mcpServers": {"x": {"type": "sse", "url": "http://127.0.0.1:5174/mcp/sse"}}}"#,
        ),
        (
            "json",
            r#"{"mcpServers": {"x": {"command": "cideldill-server", "cwd": "/"}}}"#,
        ),
        ("json", r#"{"mcpServers": {}}"#),
        (
            "json",
            r#"{"context_servers": {"x": {"command": "cideldill-server"}}}"#,
        ),
    ] {
        assert!(
            launches(&snippet(lang, text)).is_err(),
            "{lang} snippet accepted: {text}"
        );
    }
    assert_eq!(
        launches(&snippet(
            "sh",
            "claude mcp add -e A=1 cideldill -- cideldill-server --mcp --standalone"
        )),
        Ok(vec![Launch::Stdio {
            command: "cideldill-server".into(),
            args: vec!["--mcp".into(), "--standalone".into()],
            env: vec![("A".into(), "1".into())],
        }])
    );
}
