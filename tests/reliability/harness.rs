//! What the reliability tests need beyond the test support crate's `server`: a server process
//! with its MCP stdio session open to many threads at once (`Proc`, `StdioRpc`), a Streamable
//! HTTP MCP client (`McpHttp`), and a raw HTTP exchange that tells a dropped connection from an
//! answer and never reads an event stream to its end (`exchange`). Process facts read from
//! `/proc`, signals and raw requests come from that module. Every wait has a deadline.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender};
use serde_json::{json, Value};

use crate::support::{proc_status_kib, raw_request, wait_for_port, Client, Resp, TempDir};

/// The deadline of one request in these tests: liveness, not speed, on two busy cores.
pub const LIVENESS: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// A server process.

/// A running `cideldill-server`, killed on drop (its stderr is printed if the test failed).
pub struct Proc {
    child: Option<Child>,
    pub port: u16,
    pub port_file: PathBuf,
    stderr_path: PathBuf,
    /// The MCP stdio session, when started with `--mcp`.
    pub stdio: Option<Arc<StdioRpc>>,
}

impl Proc {
    /// Starts the server on port 0 with `home` as `CIDELDILL_HOME` and the port file in it;
    /// with `--mcp` among `args` its stdin and stdout become an MCP session.
    pub fn start(home: &Path, args: &[&str], log: &str) -> Proc {
        Proc::start_in(home, args, log, None)
    }

    /// Like `start`, with `cwd` as the working directory.
    pub fn start_in(home: &Path, args: &[&str], log: &str, cwd: Option<&Path>) -> Proc {
        static N: AtomicUsize = AtomicUsize::new(0);
        let port_file = home.join("port");
        let _ = std::fs::remove_file(&port_file);
        let stderr_path = home.join(format!("stderr-{}.log", N.fetch_add(1, Ordering::Relaxed)));
        let mcp = args.contains(&"--mcp");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cideldill-server"));
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .args(["--port", "0"])
            .args(args)
            .env("CIDELDILL_HOME", home)
            .env("CIDELDILL_PORT_FILE", &port_file)
            .env("RUST_LOG", log)
            // A panic's backtrace is symbolized from the debug info, which costs tens of MiB:
            // memory measurements must not depend on the caller's environment.
            .env("RUST_BACKTRACE", "0")
            .stdin(if mcp { Stdio::piped() } else { Stdio::null() })
            .stdout(if mcp { Stdio::piped() } else { Stdio::null() })
            .stderr(std::fs::File::create(&stderr_path).expect("stderr log"))
            .spawn()
            .expect("start cideldill-server");
        let stdio = mcp.then(|| StdioRpc::attach(&mut child));
        let port = wait_for_port(&mut child, &port_file, &stderr_path);
        Proc {
            child: Some(child),
            port,
            port_file,
            stderr_path,
            stdio,
        }
    }

    pub fn client(&self) -> Client {
        Client { port: self.port }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends a signal with the `kill` utility.
    pub fn signal(&self, sig: &str) {
        crate::support::signal(self.pid(), sig);
    }

    /// Waits for the exit, up to `within`; `None` if it is still running then.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        let child = self.child.as_mut()?;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Resident memory now and at its peak, in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        (
            proc_status_kib(self.pid(), "VmRSS"),
            proc_status_kib(self.pid(), "VmHWM"),
        )
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let text = self.stderr();
            // The tail only: a load test's log is long.
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!("---- server stderr (tail) ----\n{}", tail.join("\n"));
        }
    }
}

/// A unique temporary home.
pub fn home(tag: &str) -> TempDir {
    TempDir::new(&format!("rel-{tag}"))
}

// ---------------------------------------------------------------------------------------------
// MCP over the server's stdio, shared by many threads.

type Waiters = Mutex<HashMap<i64, Sender<Value>>>;

/// An MCP client on a server's stdin/stdout: requests from any thread, responses routed by id
/// by one reader thread; every stdout line must be a JSON-RPC message.
pub struct StdioRpc {
    stdin: Mutex<Option<ChildStdin>>,
    waiters: Arc<Waiters>,
    next: AtomicI64,
    /// Lines on stdout that were not JSON-RPC messages (must stay empty).
    pub junk: Arc<Mutex<Vec<String>>>,
    /// Set when the server's stdout closed.
    closed: Arc<AtomicBool>,
}

impl StdioRpc {
    fn attach(child: &mut Child) -> Arc<StdioRpc> {
        let stdout = child.stdout.take().expect("piped stdout");
        let waiters: Arc<Waiters> = Arc::default();
        let junk: Arc<Mutex<Vec<String>>> = Arc::default();
        let closed: Arc<AtomicBool> = Arc::default();
        let (w, j) = (waiters.clone(), junk.clone());
        let closed_by_reader = closed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let msg: Value = match serde_json::from_str(&line) {
                    Ok(v) => v,
                    Err(_) => {
                        j.lock().unwrap().push(line);
                        continue;
                    }
                };
                if msg.get("jsonrpc") != Some(&json!("2.0")) {
                    j.lock().unwrap().push(line);
                    continue;
                }
                // Responses go to their waiter; notifications and requests are not needed.
                if let Some(id) = msg.get("id").and_then(Value::as_i64) {
                    if msg.get("method").is_none() {
                        if let Some(tx) = w.lock().unwrap().remove(&id) {
                            let _ = tx.send(msg);
                        }
                    }
                }
            }
            // Stdout closed: nobody will answer the requests still waiting.
            w.lock().unwrap().clear();
            closed_by_reader.store(true, Ordering::SeqCst);
        });
        Arc::new(StdioRpc {
            stdin: Mutex::new(child.stdin.take()),
            waiters,
            next: AtomicI64::new(1),
            junk,
            closed,
        })
    }

    /// Writes one line to the server's stdin.
    pub fn send_line(&self, line: &[u8]) -> Result<(), String> {
        let mut stdin = self.stdin.lock().unwrap();
        let pipe = stdin.as_mut().ok_or("stdin closed")?;
        pipe.write_all(line)
            .and_then(|_| pipe.write_all(b"\n"))
            .and_then(|_| pipe.flush())
            .map_err(|e| format!("write stdin: {e}"))
    }

    /// Sends a request and waits for its response (the whole message), up to `within`.
    pub fn request(&self, method: &str, params: Value, within: Duration) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = bounded(1);
        self.waiters.lock().unwrap().insert(id, tx);
        if self.closed.load(Ordering::SeqCst) {
            self.waiters.lock().unwrap().remove(&id);
            return Err(format!("stdio {method}: stdout is closed"));
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(msg.to_string().as_bytes())?;
        rx.recv_timeout(within).map_err(|e| {
            self.waiters.lock().unwrap().remove(&id);
            if e.is_disconnected() {
                format!("stdio {method}: stdout closed before the response")
            } else {
                format!("stdio {method}: no response within {within:?}")
            }
        })
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), String> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(msg.to_string().as_bytes())
    }

    /// The MCP handshake.
    pub fn initialize(&self) -> Result<(), String> {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "reliability", "version": "1"}}),
            LIVENESS,
        )?;
        if r["result"]["protocolVersion"] != "2025-06-18" {
            return Err(format!("initialize: {r}"));
        }
        self.notify("notifications/initialized", json!({}))
    }
}

/// The result of a successful `tools/call` response, or why it is not one.
pub fn tool_result(response: &Value) -> Result<Value, String> {
    let result = response
        .get("result")
        .ok_or_else(|| format!("not a result: {response}"))?;
    if result["isError"] == true {
        return Err(format!("tool error: {result}"));
    }
    let text = result["content"][0]["text"]
        .as_str()
        .ok_or_else(|| format!("no text item: {result}"))?;
    serde_json::from_str(text).map_err(|e| format!("tool text is not JSON ({e}): {text}"))
}

// ---------------------------------------------------------------------------------------------
// MCP over Streamable HTTP.

/// A Streamable HTTP session on `/mcp`.
pub struct McpHttp {
    port: u16,
    session: String,
    next: AtomicI64,
}

impl McpHttp {
    /// Initializes a session.
    pub fn open(port: u16) -> Result<McpHttp, String> {
        let mut s = McpHttp {
            port,
            session: String::new(),
            next: AtomicI64::new(1),
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "reliability-http", "version": "1"}}});
        let r = s.post(&init)?;
        s.session = r
            .header("Mcp-Session-Id")
            .ok_or_else(|| format!("initialize without a session id: {}", r.text()))?
            .to_owned();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = s.post(&note)?;
        if r.status != 202 {
            return Err(format!("notifications/initialized -> {}", r.status));
        }
        Ok(s)
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.session
    }

    fn post(&self, msg: &Value) -> Result<Resp, String> {
        let body = msg.to_string();
        let mut headers = vec![
            ("Connection", "close"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        if !self.session.is_empty() {
            headers.push(("Mcp-Session-Id", &self.session));
        }
        let req = raw_request(self.port, "POST", "/mcp", &headers, Some(body.as_bytes()));
        match exchange(self.port, &req, LIVENESS, true) {
            Outcome::Answered(x) => Ok(x),
            other => Err(format!("POST /mcp {msg}: {other:?}")),
        }
    }

    /// Sends a request and returns its response message.
    pub fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let r = self.post(&msg)?;
        if r.status != 200 {
            return Err(format!("{method} -> {}: {}", r.status, r.text()));
        }
        let is_sse = r
            .header("Content-Type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let found = if is_sse {
            r.text()
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == id && m.get("method").is_none())
        } else {
            serde_json::from_slice(&r.body).ok()
        };
        found.ok_or_else(|| format!("{method}: no response in {}", r.text()))
    }
}

// ---------------------------------------------------------------------------------------------
// A raw HTTP exchange.

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    Answered(Resp),
    /// The connection closed before a complete response (or the response was malformed).
    Dropped(String),
    /// No complete response within the deadline.
    Hung(Duration),
}

/// Sends raw request bytes on a new connection and reads the response within `within`: the
/// head, then the body by its `Content-Length`, its chunks, or to the end of the connection.
/// An event stream is not read past its head unless `read_streams` (a POST answered on an event
/// stream ends); a stream that does not end is the caller's to avoid.
pub fn exchange(port: u16, request: &[u8], within: Duration, read_streams: bool) -> Outcome {
    let started = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut sock = match TcpStream::connect_timeout(&addr, within) {
        Ok(s) => s,
        Err(e) => return Outcome::Dropped(format!("connect: {e}")),
    };
    let _ = sock.set_write_timeout(Some(within));
    // A server may answer (413, 400) before reading the whole body; a failed write is fine then.
    let _ = sock.write_all(request);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut read_more = |buf: &mut Vec<u8>| -> Result<bool, Outcome> {
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(Outcome::Hung(started.elapsed()));
        }
        let _ = sock.set_read_timeout(Some(left));
        match sock.read(&mut chunk) {
            Ok(0) => Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err(Outcome::Hung(started.elapsed()))
            }
            // A reset after a complete response is harmless; the caller judges what it got.
            Err(_) => Ok(false),
        }
    };
    let head_end = loop {
        if let Some(i) = crate::loadgen::find(&buf, b"\r\n\r\n") {
            break i;
        }
        match read_more(&mut buf) {
            Ok(true) => {}
            Ok(false) => {
                return Outcome::Dropped(format!(
                    "closed before a complete head: {:?}",
                    String::from_utf8_lossy(&buf[..buf.len().min(200)])
                ))
            }
            Err(o) => return o,
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let Some(status) = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
    else {
        return Outcome::Dropped(format!("bad status line in {head:?}"));
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let stream = get("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
    let chunked = get("transfer-encoding").is_some_and(|t| t.contains("chunked"));
    let length = get("content-length").and_then(|l| l.parse::<usize>().ok());
    let head_only = request.starts_with(b"HEAD ") || status == 204 || status == 304;
    let mut body = buf.split_off(head_end + 4);
    if stream && !read_streams {
        return Outcome::Answered(Resp {
            status,
            headers,
            body,
        });
    }
    loop {
        let complete = if head_only {
            true
        } else if chunked {
            match dechunk(&body) {
                Chunks::Incomplete => false,
                Chunks::Done(_) => true,
                Chunks::Malformed(e) => return Outcome::Dropped(format!("bad chunked body: {e}")),
            }
        } else if let Some(n) = length {
            body.len() >= n
        } else {
            false
        };
        if complete {
            break;
        }
        match read_more(&mut body) {
            Ok(true) => {}
            Ok(false) if chunked || length.is_some() => {
                return Outcome::Dropped(format!(
                    "{status} response cut short after {} body bytes",
                    body.len()
                ))
            }
            Ok(false) => break,
            Err(o) => return o,
        }
    }
    if chunked && !head_only {
        if let Chunks::Done(b) = dechunk(&body) {
            body = b;
        }
    } else if let Some(n) = length {
        body.truncate(n);
    }
    Outcome::Answered(Resp {
        status,
        headers,
        body,
    })
}

enum Chunks {
    Incomplete,
    Done(Vec<u8>),
    Malformed(String),
}

/// Decodes a chunked body, telling a body still arriving from a malformed one.
fn dechunk(mut data: &[u8]) -> Chunks {
    let mut out = Vec::new();
    loop {
        let Some(eol) = crate::loadgen::find(data, b"\r\n") else {
            return Chunks::Incomplete;
        };
        let line = String::from_utf8_lossy(&data[..eol]);
        let Ok(size) = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
        else {
            return Chunks::Malformed(format!("chunk size line {line:?}"));
        };
        let start = eol + 2;
        if size == 0 {
            return if data.len() >= start + 2 {
                Chunks::Done(out)
            } else {
                Chunks::Incomplete
            };
        }
        if data.len() < start + size + 2 {
            return Chunks::Incomplete;
        }
        out.extend_from_slice(&data[start..start + size]);
        data = &data[start + size + 2..];
    }
}

/// A request's bytes: method, target, headers (Host added unless given; `Connection: close`),
/// and a body with its `Content-Length` (always declared for a POST).
pub fn request_bytes(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut all = vec![("Connection", "close")];
    all.extend(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let body = (!body.is_empty() || method == "POST").then_some(body);
    raw_request(port, method, target, &all, body)
}
