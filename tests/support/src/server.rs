//! Test support: start the real binary on port 0 with a private home and port file, talk HTTP
//! to it with a tiny blocking client, build protocol items; the process facts of `/proc` and
//! signals; raw HTTP (request bytes, a response head read with a deadline, an answer whose body
//! is still to come). Every wait has a deadline. The binaries are found beside the running test
//! binary ([`binary`]), where cargo builds them for the package's integration tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The default deadline of a wait; `CIDELDILL_TEST_DEADLINE_S` raises it on slow machines.
pub fn deadline() -> Duration {
    let secs = std::env::var("CIDELDILL_TEST_DEADLINE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

/// A unique temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cideldill-it-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server process, killed on drop (its stderr is printed if the test failed).
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub home: PathBuf,
    pub port_file: PathBuf,
    stderr_path: PathBuf,
    _dir: Option<TempDir>,
}

impl Server {
    /// In memory, with extra flags.
    pub fn start(extra: &[&str]) -> Server {
        let dir = TempDir::new("srv");
        let mut args = vec!["--memory"];
        args.extend_from_slice(extra);
        let mut s = Server::start_in(dir.path(), &args);
        s._dir = Some(dir);
        s
    }

    /// With `home` as `CIDELDILL_HOME` (kept by the caller, e.g. across restarts).
    pub fn start_in(home: &Path, args: &[&str]) -> Server {
        Server::start_in_env(home, args, &[])
    }

    /// Like `start_in`, with extra environment variables.
    pub fn start_in_env(home: &Path, args: &[&str], envs: &[(&str, &str)]) -> Server {
        let port_file = home.join("port");
        let _ = std::fs::remove_file(&port_file);
        let stderr_path = home.join(format!(
            "stderr-{}.log",
            Instant::now().elapsed().as_nanos() ^ rand_u32() as u128
        ));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr log file");
        let mut cmd = Command::new(binary("cideldill-server"));
        if !args.contains(&"--port") {
            cmd.args(["--port", "0"]);
        }
        let mut child = cmd
            .args(args)
            .env("CIDELDILL_HOME", home)
            .env("CIDELDILL_PORT_FILE", &port_file)
            .env(
                "RUST_LOG",
                std::env::var("IT_RUST_LOG").unwrap_or_else(|_| "debug".into()),
            )
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start cideldill-server");
        let port = wait_for_port(&mut child, &port_file, &stderr_path);
        Server {
            child: Some(child),
            port,
            home: home.to_path_buf(),
            port_file,
            stderr_path,
            _dir: None,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Sends a signal with the `kill` utility and waits for the exit, with a deadline.
    pub fn signal_and_wait(&mut self, signal: &str) -> std::process::ExitStatus {
        self::signal(self.pid(), signal);
        let mut child = self.child.take().expect("server still running");
        let until = Instant::now() + deadline();
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < until, "server did not exit after {signal}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A client for this server.
    pub fn client(&self) -> Client {
        Client { port: self.port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- server stderr ----\n{}", self.stderr());
        }
    }
}

fn rand_u32() -> u32 {
    static N: AtomicU32 = AtomicU32::new(1);
    N.fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(2_654_435_761)
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A blocking HTTP/1.1 client, one connection per request like the Python client.
#[derive(Clone, Copy)]
pub struct Client {
    pub port: u16,
}

impl Client {
    /// Sends raw bytes and reads the whole response.
    pub fn raw(&self, request: &[u8]) -> Resp {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(deadline() + Duration::from_secs(35)))
            .unwrap();
        stream.set_write_timeout(Some(deadline())).unwrap();
        // A server may answer (413) before the whole body is sent; a failed write is fine then.
        let _ = stream.write_all(request);
        read_response(&mut stream)
    }

    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Resp {
        let mut headers = vec![("Connection", "close")];
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        self.raw(&raw_request(self.port, method, path, &headers, body))
    }

    pub fn get(&self, path: &str) -> Resp {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    pub fn delete(&self, path: &str) -> Resp {
        self.request("DELETE", path, None)
    }

    /// GET expecting 200 JSON.
    pub fn get_ok(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(
            r.status,
            200,
            "GET {path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    }

    /// POST expecting 200 JSON.
    pub fn post_ok(&self, path: &str, body: &Value) -> Value {
        let r = self.post(path, body);
        assert_eq!(
            r.status,
            200,
            "POST {path} {body}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    }

    /// POST expecting an error status; returns the JSON body.
    pub fn post_err(&self, path: &str, body: &Value, status: u16) -> Value {
        let r = self.post(path, body);
        assert_eq!(
            r.status,
            status,
            "POST {path} {body}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    }
}

fn read_response(stream: &mut TcpStream) -> Resp {
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf);
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete HTTP response: {:?}",
                String::from_utf8_lossy(&buf)
            )
        });
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect();
    let mut body = buf[head_end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(pos) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..pos]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = pos + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// Polls `f` every 10 ms until it returns `Some`, or `None` after `within`.
pub fn poll_until<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `f` until it returns `Some`, failing after the deadline.
pub fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    poll_until(deadline(), f).unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// A dill-format item for a JSON value: CID of the pickle bytes and base64 data.
pub fn item(value: &Value, client_ref: u64) -> Value {
    let bytes = cideldill_server::pickle_write::dumps(value);
    json!({
        "cid": cideldill_server::cas::cid_of(&bytes),
        "client_ref": client_ref,
        "data": cideldill_server::cas::encode_base64(&bytes),
    })
}

/// The same item without its data (as the client sends an already-sent CID).
pub fn item_ref(value: &Value, client_ref: u64) -> Value {
    let mut i = item(value, client_ref);
    i.as_object_mut().unwrap().remove("data");
    i
}

/// A call/start body as the Python client sends it.
pub fn call_start_body(method: &str, args: Vec<Value>, kwargs: Value) -> Value {
    let target = item(&json!(format!("<function {method}>")), 1);
    json!({
        "method_name": method,
        "target_cid": target["cid"],
        "target": target,
        "args": args,
        "kwargs": kwargs,
        "call_site": {"timestamp": 1795311683.7775, "target_cid": target["cid"],
                      "stack_trace": [{"filename": "/home/me/app.py", "lineno": 13, "function": "<module>", "code_context": "add(1)"}]},
        "call_type": "proxy",
        "process_pid": 16759,
        "process_start_time": 1795311683.7211661,
        "signature": "(x, y=1)",
    })
}

/// A call/complete body for a successful call returning `result`.
pub fn complete_body(call_id: &str, result: &Value) -> Value {
    let r = item(result, 9);
    json!({
        "call_id": call_id, "timestamp": 1795311690.5, "status": "success",
        "process_pid": 16759, "process_start_time": 1795311683.7211661,
        "result_cid": r["cid"], "result_client_ref": 9, "result_data": r["data"],
    })
}

/// The pause id in a poll action's `poll_url`.
pub fn pause_id(action: &Value) -> String {
    let url = action["poll_url"]
        .as_str()
        .unwrap_or_else(|| panic!("not a poll action: {action}"));
    assert!(
        url.starts_with("/api/poll/"),
        "poll_url must be root-relative: {url}"
    );
    url.rsplit('/').next().unwrap().to_owned()
}

/// The pickle bytes of a named line of the fixture corpus (real dill output).
pub fn corpus_pickle(name: &str) -> Vec<u8> {
    let path = repo_root().join("tests/fixtures/pickles/corpus.jsonl");
    let text = std::fs::read_to_string(path).expect("fixture corpus");
    let line = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no corpus line {name}"));
    cideldill_server::cas::decode_base64_lenient(line["pickle"].as_str().unwrap()).unwrap()
}

/// A dill item for raw pickle bytes.
pub fn raw_item(bytes: &[u8], client_ref: u64) -> Value {
    json!({
        "cid": cideldill_server::cas::cid_of(bytes),
        "client_ref": client_ref,
        "data": cideldill_server::cas::encode_base64(bytes),
    })
}

// ---------------------------------------------------------------------------------------------
// Processes.

/// The repository's root directory (this crate is `tests/support` in it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of one of the package's executables (`cideldill-server`,
/// `cideldill-fixture-mcp-server`): cargo builds them for the package's integration tests into
/// the directory above the test binary's own (`target/<profile>/` above
/// `target/<profile>/deps/`). Panics, naming the path, when it is not there.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the path of the running test binary");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is not built (cargo builds it for the integration tests of cideldill-server)",
        path.display()
    );
    path
}

/// The fixture MCP server's executable (`tests/fixtures/mcp_server.rs`), which cargo builds
/// with the tests.
pub fn fixture_server_path() -> PathBuf {
    binary("cideldill-fixture-mcp-server")
}

/// Waits for a server just spawned to write its port to `port_file`, within the deadline. If it
/// exits first or never writes it, fails with its stderr (the file `stderr_path`), killing it.
pub fn wait_for_port(child: &mut Child, port_file: &Path, stderr_path: &Path) -> u16 {
    let until = Instant::now() + deadline();
    let failure = loop {
        if let Some(port) = std::fs::read_to_string(port_file)
            .ok()
            .and_then(|t| t.trim().parse::<u16>().ok())
        {
            return port;
        }
        if let Ok(Some(status)) = child.try_wait() {
            break format!("server exited early with {status}");
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            break "server did not write its port file in time".to_owned();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::fs::read_to_string(stderr_path).unwrap_or_default();
    panic!("{failure}:\n{stderr}");
}

/// Sends a signal (`-KILL`, `-STOP`, ...) with the `kill` utility.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Whether a process is gone (or a zombie, which is dead; its parent reaps it).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// The pids of every process whose parent is `pid`, zombies included.
pub fn children_of(pid: u32) -> Vec<u32> {
    children_with_state(pid)
        .into_iter()
        .map(|(c, _)| c)
        .collect()
}

/// The pids of the living (non-zombie) processes whose parent is `pid`.
pub fn living_children_of(pid: u32) -> Vec<u32> {
    children_with_state(pid)
        .into_iter()
        .filter(|(_, state)| state != "Z")
        .map(|(c, _)| c)
        .collect()
}

/// The children of `pid` with their state letter, from `/proc/<child>/stat`.
fn children_with_state(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // After the command name in parentheses: the state, then the parent's pid.
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if let [state, parent, ..] = fields[..] {
            if parent == pid.to_string() {
                out.push((child, state.to_owned()));
            }
        }
    }
    out
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP.

/// A request's bytes: the request line, `Host` unless `headers` name one, `headers` in their
/// order, then `Content-Length` and the body when there is one.
pub fn raw_request(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.unwrap_or_default());
    out
}

/// One HTTP request with exactly these headers (plus `Host` unless given, and
/// `Connection: close`) on a new connection; the whole response.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let mut all = vec![("Connection", "close")];
    all.extend_from_slice(headers);
    Client { port }.raw(&raw_request(
        port,
        method,
        path,
        &all,
        body.map(str::as_bytes),
    ))
}

/// Connects with a timeout of `wait` on every step.
pub fn connect(port: u16, wait: Duration) -> Option<TcpStream> {
    let s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), wait).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    s.set_write_timeout(Some(wait)).ok()?;
    Some(s)
}

/// Reads one response head from `s` (up to its blank line, not a byte further) and returns its
/// status and the head's text, or `None` if none came by `until`.
pub fn read_head(mut s: &TcpStream, until: Instant) -> Option<(u16, String)> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let left = until.checked_duration_since(Instant::now())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
}

/// The content length of a response head (0 without one).
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())
                .flatten()
        })
        .unwrap_or(0)
}

/// A response whose head has been read; its body is still to come.
pub struct OpenResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The connection, positioned at the start of the body.
    pub body: BufReader<TcpStream>,
}

/// Sends `request` on a new connection and reads the head of its answer, each read waiting at
/// most `read_timeout`: an event stream is then open, its body still to come.
pub fn open_response(port: u16, request: &[u8], read_timeout: Duration) -> OpenResponse {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(read_timeout)).unwrap();
    sock.set_write_timeout(Some(deadline())).unwrap();
    sock.write_all(request).expect("send the request");
    let mut body = BufReader::new(sock);
    let mut line = String::new();
    body.read_line(&mut line).expect("status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        let n = body.read_line(&mut line).expect("header line");
        assert!(n > 0, "the answer ended in its headers");
        match line.trim_end().split_once(':') {
            Some((k, v)) => headers.push((k.trim().to_owned(), v.trim().to_owned())),
            None => break,
        }
    }
    OpenResponse {
        status,
        headers,
        body,
    }
}
