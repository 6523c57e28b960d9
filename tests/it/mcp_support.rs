//! MCP clients for tests: over the server's stdio (`McpServer` spawns `cideldill-server --mcp`,
//! checks that every stdout line is a JSON-RPC message, matches responses by id and keeps
//! notifications), and the raw Streamable HTTP requests on `/mcp` (`mcp_post`, sessions).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};

use crate::support::{deadline, http, wait_for_port, Client, Resp, TempDir};

/// The capability a client declares to receive the custom `notifications/breakpoint/*`.
pub const CUSTOM_NOTIFICATIONS: &str = "io.github.curtcox.cideldill/notifications";

/// Client capabilities declaring the custom notifications (as `experimental`, where a client of
/// the legacy revisions puts what is not in MCP).
pub fn custom_capabilities() -> Value {
    json!({"experimental": {CUSTOM_NOTIFICATIONS: {}}})
}

/// The envelope of a 2026-07-28 request whose client declares the custom notifications (as
/// `extensions`, where the SDKs of that revision put an extension) and wants log lines from
/// `log_level` up, when given.
pub fn modern_envelope_custom(log_level: Option<&str>) -> Value {
    let mut env = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {CUSTOM_NOTIFICATIONS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
    });
    if let Some(level) = log_level {
        env["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    env
}

/// A server started with `--mcp`, and a client on its stdin/stdout.
pub struct McpServer {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    pending: Mutex<Vec<Value>>,
    next_id: AtomicI64,
    pub port: u16,
    pub home: Arc<TempDir>,
    stderr_path: std::path::PathBuf,
    /// Lines of stdout that were not JSON-RPC messages (must stay empty).
    pub junk: Arc<Mutex<Vec<String>>>,
}

impl McpServer {
    pub fn start(extra: &[&str]) -> McpServer {
        McpServer::start_env(extra, &[])
    }

    /// Like `start`, with extra environment variables.
    pub fn start_env(extra: &[&str], envs: &[(&str, &str)]) -> McpServer {
        let home = Arc::new(TempDir::new("mcp"));
        let port_file = home.path().join("port");
        let mut args = vec!["--mcp", "--memory"];
        if !extra.contains(&"--port") {
            args.extend(["--port", "0"]);
        }
        args.extend_from_slice(extra);
        let mut s = McpServer::spawn(home.clone(), home.path(), &port_file, &args, envs);
        let child = s.child.as_mut().expect("just started");
        s.port = wait_for_port(child, &port_file, &s.stderr_path);
        s
    }

    /// `cideldill-server --mcp` with exactly `args`, in the data directory and with the port
    /// file of `server` (as an MCP host would start it beside a running server); `port` is the
    /// running server's.
    pub fn beside(server: &crate::support::Server, args: &[&str]) -> McpServer {
        let mut s = McpServer::beside_path(&server.home, &server.port_file, args);
        s.port = server.port;
        s
    }

    /// `cideldill-server --mcp` with exactly `args`, with this data directory and port file.
    pub fn beside_path(
        home: &std::path::Path,
        port_file: &std::path::Path,
        args: &[&str],
    ) -> McpServer {
        let mut all = vec!["--mcp"];
        all.extend_from_slice(args);
        let own = Arc::new(TempDir::new("mcp-beside"));
        McpServer::spawn(own, home, port_file, &all, &[])
    }

    /// The binary with exactly `args`, as an MCP host starts a registered command: only
    /// `CIDELDILL_HOME` is set (to `home`), and the variables that would change what it does
    /// (`CIDELDILL_PORT_FILE`, `RUST_LOG`) are removed, so the port file is `home/port`.
    pub fn exact(home: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> McpServer {
        let own = Arc::new(TempDir::new("mcp-exact"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cideldill-server"));
        cmd.args(args)
            .env("CIDELDILL_HOME", home)
            .env_remove("CIDELDILL_PORT_FILE")
            .env_remove("RUST_LOG")
            .envs(envs.iter().copied());
        McpServer::spawn_command(own, cmd)
    }

    fn spawn(
        own: Arc<TempDir>,
        home: &std::path::Path,
        port_file: &std::path::Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> McpServer {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cideldill-server"));
        cmd.args(args)
            .env("CIDELDILL_HOME", home)
            .env("CIDELDILL_PORT_FILE", port_file)
            .env("RUST_LOG", "debug")
            .envs(envs.iter().copied());
        McpServer::spawn_command(own, cmd)
    }

    fn spawn_command(own: Arc<TempDir>, mut cmd: Command) -> McpServer {
        let stderr_path = own.path().join("stderr.log");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("start cideldill-server --mcp");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, rx) = unbounded();
        let junk = Arc::new(Mutex::new(Vec::new()));
        let junk2 = junk.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v.get("jsonrpc") == Some(&json!("2.0")) || v.is_array() => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    _ => junk2.lock().unwrap().push(line),
                }
            }
        });
        McpServer {
            child: Some(child),
            stdin,
            lines: rx,
            pending: Mutex::new(Vec::new()),
            next_id: AtomicI64::new(1),
            port: 0,
            home: own,
            stderr_path,
            junk,
        }
    }

    /// Starts and completes the handshake with `version`, as a client declaring no capability
    /// (it gets no custom notification).
    pub fn initialized(version: &str) -> McpServer {
        McpServer::initialized_with(version, json!({}))
    }

    /// Starts and completes the handshake with `version`, as a client declaring the custom
    /// `notifications/breakpoint/*`.
    pub fn initialized_custom(version: &str) -> McpServer {
        McpServer::initialized_with(version, custom_capabilities())
    }

    /// Starts and completes the handshake with `version` and these client capabilities.
    pub fn initialized_with(version: &str, capabilities: Value) -> McpServer {
        let s = McpServer::start(&[]);
        let r = s.request("initialize", json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "it", "version": "1"}}));
        assert_eq!(r["result"]["protocolVersion"], version, "{r}");
        s.notify("notifications/initialized", json!({}));
        s
    }

    pub fn http(&self) -> Client {
        Client { port: self.port }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn send_raw(&self, line: &str) {
        let mut stdin = self.stdin.as_ref().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    pub fn start_request(&self, method: &str, params: Value) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response (the whole response object).
    pub fn request(&self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        self.response(&json!(id), deadline())
    }

    /// Waits for the response with this id; other messages are kept.
    pub fn response(&self, id: &Value, within: Duration) -> Value {
        self.take(within, |m| {
            m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
        })
        .unwrap_or_else(|| {
            panic!(
                "no response to {id} within {within:?}; stderr:\n{}",
                self.stderr()
            )
        })
    }

    /// Waits for the next message matching `pred`, keeping the others for later.
    pub fn take(&self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        {
            let mut pending = self.pending.lock().unwrap();
            if let Some(pos) = pending.iter().position(&pred) {
                return Some(pending.remove(pos));
            }
        }
        let until = Instant::now() + within;
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            let msg = self.lines.recv_timeout(left).ok()?;
            if pred(&msg) {
                return Some(msg);
            }
            self.pending.lock().unwrap().push(msg);
        }
    }

    /// Waits for a notification with this method.
    pub fn notification(&self, method: &str) -> Value {
        self.take(deadline(), |m| {
            m["method"] == method && m.get("id").is_none()
        })
        .unwrap_or_else(|| panic!("no {method} notification; stderr:\n{}", self.stderr()))
    }

    /// Calls a tool and returns the `result` object.
    pub fn call(&self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r.get("result").is_some(), "tools/call {tool} failed: {r}");
        r["result"].clone()
    }

    /// Calls a tool that must succeed; returns its JSON payload (parsed from the text item).
    pub fn call_ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone());
        assert_eq!(r["isError"], false, "{tool} {args}: {r}");
        tool_json(&r)
    }

    /// Calls a tool whose answer is an error named in a normal result (`isError: false`), as
    /// the original server answers lookups of unknown ids; returns the JSON.
    pub fn call_not_found(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone());
        assert_eq!(r["isError"], false, "{tool} {args}: {r}");
        let data = tool_json(&r);
        assert!(data["error"].is_string(), "{tool} {args}: {r}");
        data
    }

    /// Calls a tool that must fail; returns the error JSON.
    pub fn call_err(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone());
        assert_eq!(r["isError"], true, "{tool} {args} should fail: {r}");
        tool_json(&r)
    }

    /// Closes stdin (the client disconnects).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit, with the deadline.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let until = Instant::now() + deadline();
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < until, "server did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- server stderr ----\n{}", self.stderr());
        }
    }
}

/// The JSON in a tool result's single text item.
pub fn tool_json(result: &Value) -> Value {
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "one content item: {result}");
    assert_eq!(content[0]["type"], "text");
    serde_json::from_str(content[0]["text"].as_str().unwrap()).expect("text is JSON")
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP on `/mcp`, one raw request at a time.

/// A JSON-RPC request.
pub fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// An `initialize` request asking for `version`, declaring no capability.
pub fn initialize(version: &str) -> Value {
    initialize_with(version, json!({}))
}

/// An `initialize` request asking for `version`, declaring the custom notifications.
pub fn initialize_custom(version: &str) -> Value {
    initialize_with(version, custom_capabilities())
}

/// An `initialize` request asking for `version` with these client capabilities.
pub fn initialize_with(version: &str, capabilities: Value) -> Value {
    rpc(
        0,
        "initialize",
        json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "it-http", "version": "1"}}),
    )
}

/// The `notifications/initialized` notification.
pub fn initialized_note() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// A Streamable HTTP POST to `/mcp` as a conforming client sends it, with `body` (a message or
/// the text of one or of a batch).
pub fn mcp_post(port: u16, session: Option<&str>, body: impl std::fmt::Display) -> Resp {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    http(port, "POST", "/mcp", &headers, Some(&body.to_string()))
}

/// `initialize` (checked: a JSON answer with `version` and a session id of 32 or more visible
/// ASCII characters) and `notifications/initialized` (202); the session id, or the refusal of
/// the `initialize`.
pub fn try_session(port: u16, version: &str) -> Result<String, Resp> {
    try_session_with(port, initialize(version))
}

/// [`try_session`] with this `initialize` request.
pub fn try_session_with(port: u16, init: Value) -> Result<String, Resp> {
    let version = init["params"]["protocolVersion"]
        .as_str()
        .expect("initialize names a version")
        .to_owned();
    let version = version.as_str();
    let r = mcp_post(port, None, init);
    if r.status != 200 {
        return Err(r);
    }
    assert!(r
        .header("Content-Type")
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(r.json()["result"]["protocolVersion"], version);
    let sid = r
        .header("Mcp-Session-Id")
        .expect("Mcp-Session-Id")
        .to_owned();
    assert!(
        sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "session id must be 32+ visible ASCII characters: {sid:?}"
    );
    let n = mcp_post(port, Some(&sid), initialized_note());
    assert_eq!(n.status, 202, "{}", n.text());
    Ok(sid)
}

/// Initializes a Streamable HTTP session (as [`try_session`]) and returns its id.
pub fn streamable_session(port: u16, version: &str) -> String {
    try_session(port, version).unwrap_or_else(|r| panic!("initialize: {} {}", r.status, r.text()))
}

/// Initializes a Streamable HTTP session declaring the custom notifications; returns its id.
pub fn streamable_session_custom(port: u16, version: &str) -> String {
    try_session_with(port, initialize_custom(version))
        .unwrap_or_else(|r| panic!("initialize: {} {}", r.status, r.text()))
}
