//! The project's benchmark: one markdown table, every row beside its floor measured in the same
//! run. scripts/bench.sh builds everything and calls this program through `cargo bench`; see its
//! header for what the rows mean.
//!
//! Arguments (all given by bench.sh): `--server BIN` (the release binary), `--baseline BIN`
//! (optional second binary, same rows in extra columns), `--fixture BIN` (the fixture MCP
//! server), `--load FILE` (scripts/bench_load.py's output), `--pickles FILE` (the lines of
//! `scripts/bench_pickle.py --emit`), `--tmp DIR` (scratch directory, on the disk under test),
//! `--scale X` (multiplies every request count and deadline; 1 is the real run), `--nginx BIN`
//! (the floor of the throughput and conditions rows; without it those floors read "failed").
//!
//! The load generator (`load/mod.rs`, shared with the reliability suite) talks HTTP/1.1 by hand
//! over std `TcpStream`, one new connection per request with `Connection: close`, like the
//! Python client; threads are `std::thread`. Servers run with `RUST_LOG=warn` and their own
//! `CIDELDILL_HOME`; their stderr goes to a log file in their scratch directory. Every child
//! process is stopped when its handle drops, and every blocking read has a deadline (socket
//! timeouts, or a watchdog that kills the child).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod load;
mod pages;
use load::{call, cycle, err, find, http, http_within, now, Load, Res, HTTP_TIMEOUT};

/// Stops a call cycle load when the server's RSS passes this.
const RSS_GUARD_KIB: u64 = 4 * 1024 * 1024;
const THREADS: [usize; 3] = [1, 4, 16];

// ---------------------------------------------------------------------------------------------
// Options.

struct Opts {
    server: PathBuf,
    baseline: Option<PathBuf>,
    fixture: PathBuf,
    load: PathBuf,
    pickles: Option<PathBuf>,
    nginx: Option<PathBuf>,
    tmp: PathBuf,
    scale: f64,
    budget: Duration,
    /// Comma-separated step names to run (all when absent).
    only: Option<String>,
}

impl Opts {
    fn parse() -> Res<Opts> {
        let mut args = std::env::args().skip(1);
        let (mut server, mut baseline, mut fixture, mut load, mut pickles, mut tmp) =
            (None, None, None, None, None, None);
        let mut scale = 1.0;
        let mut budget = 400.0;
        let mut only = None;
        let mut nginx = None;
        while let Some(a) = args.next() {
            let mut value = || args.next().ok_or(format!("{a} needs a value"));
            match a.as_str() {
                "--server" => server = Some(PathBuf::from(value()?)),
                "--baseline" => baseline = Some(PathBuf::from(value()?)),
                "--fixture" => fixture = Some(PathBuf::from(value()?)),
                "--load" => load = Some(PathBuf::from(value()?)),
                "--pickles" => pickles = Some(PathBuf::from(value()?)),
                "--tmp" => tmp = Some(PathBuf::from(value()?)),
                "--scale" => scale = value()?.parse().map_err(err("--scale"))?,
                "--budget-s" => budget = value()?.parse().map_err(err("--budget-s"))?,
                "--only" => only = Some(value()?),
                "--nginx" => nginx = Some(PathBuf::from(value()?)),
                "--bench" => {} // added by `cargo bench`
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(Opts {
            server: server.ok_or("--server is required")?,
            baseline,
            fixture: fixture.ok_or("--fixture is required")?,
            load: load.ok_or("--load is required")?,
            pickles,
            nginx,
            tmp: tmp.ok_or("--tmp is required")?,
            scale,
            budget: Duration::from_secs_f64(f64::max(budget, 0.0)),
            only,
        })
    }

    fn n(&self, count: u64) -> u64 {
        ((count as f64 * self.scale) as u64).max(1)
    }

    fn secs(&self, s: f64) -> Duration {
        Duration::from_secs_f64(s * self.scale.max(0.05))
    }
}

// ---------------------------------------------------------------------------------------------
// The trivial floor server: a thread per connection, a fixed small JSON answer, then close.

struct Trivial {
    port: u16,
    stop: Arc<AtomicBool>,
}

const TRIVIAL_ANSWER: &str = r#"{"call_id":"bench-1","action":"continue","status":"ok"}"#;

impl Trivial {
    fn start() -> Res<Trivial> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(err("bind"))?;
        let port = listener.local_addr().map_err(err("addr"))?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(c) = conn {
                    thread::spawn(move || trivial_serve(c));
                }
            }
        });
        Ok(Trivial { port, stop })
    }
}

impl Drop for Trivial {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// A do-nothing server on tiny_http, served the way ours is (threads calling `recv`): what the
/// design's HTTP layer costs by itself.
struct TinyFloor {
    server: Arc<tiny_http::Server>,
    port: u16,
    workers: Vec<thread::JoinHandle<()>>,
}

impl TinyFloor {
    fn start(workers: usize) -> Res<TinyFloor> {
        let server =
            tiny_http::Server::http("127.0.0.1:0").map_err(|e| format!("tiny_http: {e}"))?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .ok_or("tiny_http: no port")?;
        let server = Arc::new(server);
        let workers = (0..workers)
            .map(|_| {
                let server = Arc::clone(&server);
                thread::spawn(move || {
                    let header = tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"application/json"[..],
                    )
                    .expect("a valid header");
                    while let Ok(mut rq) = server.recv() {
                        let mut body = Vec::new();
                        let _ = rq.as_reader().read_to_end(&mut body);
                        let answer = tiny_http::Response::from_string(TRIVIAL_ANSWER)
                            .with_header(header.clone());
                        let _ = rq.respond(answer);
                    }
                })
            })
            .collect();
        Ok(TinyFloor {
            server,
            port,
            workers,
        })
    }
}

impl Drop for TinyFloor {
    fn drop(&mut self) {
        for _ in &self.workers {
            self.server.unblock();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// The floor of the throughput rows: nginx (Debian's nginx-light, which scripts/bench.sh
/// installs) on a fresh loopback port, answering every method and path with
/// `TRIVIAL_ANSWER`: `worker_processes auto`, no access log, keep-alive allowed, any request
/// body read and discarded. It runs as the current user with everything (configuration, pid
/// file, logs, temporary paths) in its own scratch directory; `daemon off`, so it is our
/// child, stopped with SIGTERM (fast shutdown, workers included) when dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Nginx {
    fn start(bin: &Path, dir: &Path) -> Res<Nginx> {
        fs::create_dir_all(dir).map_err(err("mkdir"))?;
        let version = Command::new(bin)
            .arg("-V")
            .output()
            .map_err(|e| format!("run {} -V: {e}", bin.display()))?;
        let version = String::from_utf8_lossy(&version.stderr).into_owned();
        let mut why = String::new();
        // A port the kernel chose a moment ago, released for nginx: taken by someone else in
        // between only by bad luck, hence a few tries.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(err("bind"))?
                .port();
            let conf = dir.join("nginx.conf");
            fs::write(&conf, nginx_conf(dir, port, &version)).map_err(err("nginx.conf"))?;
            let log = fs::File::create(dir.join("stderr.log")).map_err(err("log"))?;
            let child = Command::new(bin)
                .arg("-p")
                .arg(dir)
                .arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(err("log"))?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
            let mut n = Nginx {
                child,
                dir: dir.to_path_buf(),
                port,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(status)) = n.child.try_wait() {
                    why = format!("nginx exited at start ({status}): {}", n.log_tail());
                    break;
                }
                let answer = http_within(port, "POST", "/api/call/start", b"{}", HTTP_TIMEOUT);
                if let Ok((200, body)) = answer {
                    if body == TRIVIAL_ANSWER.as_bytes() {
                        return Ok(n);
                    }
                    why = format!("port {port} answered by someone else");
                    break;
                }
                if Instant::now() > deadline {
                    why = format!("nginx did not answer within 10 s: {}", n.log_tail());
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
            drop(n);
        }
        Err(why)
    }

    fn log_tail(&self) -> String {
        let mut text = fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        text.push_str(&fs::read_to_string(self.dir.join("error.log")).unwrap_or_default());
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        signal(self.child.id(), "-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            thread::sleep(Duration::from_millis(2));
        }
        eprintln!(
            "bench: nginx (pid {}) ignored SIGTERM; killing it",
            self.child.id()
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx's configuration for the floor: see `Nginx`. `version` is `nginx -V`'s output: the
/// temporary paths compiled in (under /var/lib/nginx, not ours to write) are moved into `dir`
/// for every module the binary has.
fn nginx_conf(dir: &Path, port: u16, version: &str) -> String {
    let path = |name: &str| format!("\"{}\"", dir.join(name).display());
    let mut c = String::from("# The throughput floor of benches/bench.rs, written per run.\n");
    // Run as root, nginx would hand its workers to `nobody`: keep them ours.
    if fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        c.push_str("user root;\n");
    }
    c.push_str("worker_processes auto;\ndaemon off;\nmaster_process on;\n");
    let _ = writeln!(c, "pid {};", path("nginx.pid"));
    let _ = writeln!(c, "error_log {} warn;", path("error.log"));
    c.push_str("events {\n    worker_connections 1024;\n}\nhttp {\n");
    let _ = writeln!(c, "    client_body_temp_path {};", path("body"));
    for module in ["proxy", "fastcgi", "uwsgi", "scgi"] {
        if !version.contains(&format!("--without-http_{module}_module")) {
            let _ = writeln!(c, "    {module}_temp_path {};", path(module));
        }
    }
    c.push_str(
        "    access_log off;\n\
         \x20   keepalive_timeout 30s;\n\
         \x20   client_max_body_size 0;\n\
         \x20   client_body_buffer_size 1m;\n\
         \x20   default_type application/json;\n\
         \x20   server {\n",
    );
    let _ = writeln!(c, "        listen 127.0.0.1:{port};");
    c.push_str("        location / {\n");
    let _ = writeln!(c, "            return 200 '{TRIVIAL_ANSWER}';");
    c.push_str("        }\n    }\n}\n");
    c
}

fn trivial_serve(mut c: TcpStream) {
    let _ = c.set_read_timeout(Some(HTTP_TIMEOUT));
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(e) = find(&buf, b"\r\n\r\n") {
            break e;
        }
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + 4 + length {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{TRIVIAL_ANSWER}",
        TRIVIAL_ANSWER.len()
    );
    let _ = c.write_all(answer.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Child processes: servers, `cat`, the fixture MCP server.

/// Newline-delimited JSON-RPC over a child's stdin/stdout.
struct Rpc {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    line: String,
}

impl Rpc {
    fn new(child: &mut Child) -> Rpc {
        Rpc {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: BufReader::new(child.stdout.take().expect("piped stdout")),
            next: 1,
            line: String::new(),
        }
    }

    fn send(&mut self, msg: &Value) -> Res<()> {
        let mut bytes = serde_json::to_vec(msg).map_err(err("encode"))?;
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).map_err(err("write stdin"))
    }

    /// Sends a request and reads lines until the one carrying its id (notifications are skipped).
    fn request(&mut self, method: &str, params: &Value) -> Res<Value> {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.line.clear();
            let n = self
                .stdout
                .read_line(&mut self.line)
                .map_err(err("read stdout"))?;
            if n == 0 {
                return Err(format!("{method}: end of stdout"));
            }
            let v: Value = match serde_json::from_str(&self.line) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method}: error {e}"));
                }
                if v.pointer("/result/isError") == Some(&Value::Bool(true)) {
                    return Err(format!("{method}: isError {}", v["result"]));
                }
                return Ok(v);
            }
        }
    }

    fn mcp_handshake(&mut self) -> Res<()> {
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "cideldill-bench", "version": "0"}});
        self.request("initialize", &init)?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }
}

struct Proc {
    child: Child,
    rpc: Option<Rpc>,
    /// The scratch directory (home, port file, stderr log), for servers.
    dir: Option<PathBuf>,
    port: u16,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rpc(&mut self) -> &mut Rpc {
        self.rpc.as_mut().expect("a piped child")
    }

    fn stderr_tail(&self) -> String {
        let Some(dir) = &self.dir else {
            return String::new();
        };
        let text = fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// A piped child speaking JSON-RPC on stdio (`cat`, the fixture server). Its stderr is
    /// read line by line on a thread, as the server reads the stderr of its MCP children, so a
    /// child that logs costs the same whether the bench or the server calls it.
    fn piped(program: &Path, args: &[&str]) -> Res<Proc> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(err("spawn"))?;
        let stderr = child.stderr.take().expect("piped stderr");
        thread::spawn(move || {
            let mut lines = BufReader::new(stderr);
            let mut line = String::new();
            while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
                line.clear();
            }
        });
        let rpc = Some(Rpc::new(&mut child));
        Ok(Proc {
            child,
            rpc,
            dir: None,
            port: 0,
        })
    }

    /// Starts a server on port 0 in a fresh scratch directory and waits for its port file.
    fn server(bin: &Path, dir: &Path, args: &[String], mcp: bool) -> Res<Proc> {
        Proc::server_within(bin, dir, args, mcp, Duration::from_secs(10))
    }

    /// [`Proc::server`], waiting up to `within` for the port file (a large database is read
    /// before the port is bound).
    fn server_within(
        bin: &Path,
        dir: &Path,
        args: &[String],
        mcp: bool,
        within: Duration,
    ) -> Res<Proc> {
        let home = dir.join("home");
        fs::create_dir_all(&home).map_err(err("mkdir"))?;
        let port_file = dir.join("port");
        let log = fs::File::create(dir.join("stderr.log")).map_err(err("log"))?;
        let mut cmd = Command::new(bin);
        cmd.arg("--port")
            .arg("0")
            .arg("--port-file")
            .arg(&port_file)
            .args(args)
            .env("RUST_LOG", "warn")
            .env("CIDELDILL_HOME", &home)
            .env_remove("CIDELDILL_PORT_FILE")
            .stderr(log);
        if mcp {
            cmd.arg("--mcp")
                .arg("--exit-on-stdin-close")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
        } else {
            cmd.stdin(Stdio::null()).stdout(Stdio::null());
        }
        let mut child = cmd.spawn().map_err(err("spawn server"))?;
        let rpc = mcp.then(|| Rpc::new(&mut child));
        let mut p = Proc {
            child,
            rpc,
            dir: Some(dir.to_path_buf()),
            port: 0,
        };
        let deadline = Instant::now() + within;
        loop {
            if let Some(port) = fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                p.port = port;
                return Ok(p);
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                return Err(format!(
                    "server exited at start ({status}): {}",
                    p.stderr_tail()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("no port file within {within:?}"));
            }
            thread::sleep(Duration::from_micros(100));
        }
    }

    fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid())
    }

    fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            thread::sleep(Duration::from_millis(2));
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Closing stdin ends `cat`, the fixture, and a server started with --exit-on-stdin-close.
        let piped = self.rpc.take().is_some();
        if piped && self.wait_exit(Duration::from_secs(3)) {
            return;
        }
        signal(self.pid(), "-TERM");
        if !self.wait_exit(Duration::from_secs(5)) {
            eprintln!("bench: pid {} ignored SIGTERM; killing it", self.pid());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Pins the calling thread, and the children it starts while pinned, to some CPUs (a `taskset`
/// list); dropping it frees the thread again (its children stay where they are).
struct Pin;

/// CPUs this process may use, read before any pinning (the count follows the thread's mask).
fn all_cpus() -> usize {
    static ALL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *ALL.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Pin {
    fn to(cpus: &str) -> Res<Pin> {
        all_cpus();
        if set_affinity(cpus) {
            Ok(Pin)
        } else {
            Err(format!("cannot pin to CPU {cpus} (is taskset installed?)"))
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        set_affinity(&format!("0-{}", all_cpus() - 1));
    }
}

fn set_affinity(cpus: &str) -> bool {
    let Some(tid) = fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
    else {
        return false;
    };
    Command::new("taskset")
        .args(["-pc", cpus, &tid])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Kills a child if a measurement over its pipes outlives its deadline (a blocked read then
/// sees end of file).
struct Watchdog {
    tx: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    fn new(pid: u32, limit: Duration) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        thread::spawn(move || {
            if rx.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("bench: pid {pid} still busy after {limit:?}; killing it");
                signal(pid, "-KILL");
            }
        });
        Watchdog { tx: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.tx.take();
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

struct Ran {
    done: u64,
    elapsed: Duration,
    error: Option<String>,
    stopped: bool,
}

impl Ran {
    fn rate(&self) -> f64 {
        self.done as f64 / self.elapsed.as_secs_f64()
    }
}

/// Call cycles `first..until` on `threads` threads, until done, the deadline, an error, or
/// `stop` (the RSS guard).
fn run_cycles(
    port: u16,
    load: &Load,
    threads: usize,
    first: u64,
    until: u64,
    deadline: Duration,
    stop: &AtomicBool,
) -> Ran {
    let next = AtomicU64::new(first);
    let done = AtomicU64::new(0);
    let error = Mutex::new(None);
    let t0 = Instant::now();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if stop.load(Ordering::Relaxed) || t0.elapsed() > deadline {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= until {
                    break;
                }
                if let Err(e) = cycle(port, load, i) {
                    error.lock().unwrap().get_or_insert(e);
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    let error = error.into_inner().unwrap();
    Ran {
        done: done.into_inner(),
        elapsed: t0.elapsed(),
        stopped: stop.load(Ordering::Relaxed) && error.is_none(),
        error,
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and cells.

#[derive(Clone, Copy)]
struct Lat {
    p50: f64,
    p99: f64,
}

fn lat(mut v: Vec<Duration>) -> Res<Lat> {
    if v.is_empty() {
        return Err("no samples".into());
    }
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(Lat {
        p50: us(v[v.len() / 2]),
        p99: us(v[(v.len() * 99 / 100).min(v.len() - 1)]),
    })
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        let s = format!("{:.0}", x);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn lat_cell(l: &Lat) -> String {
    format!("{} µs (p99 {})", num(l.p50), num(l.p99))
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "—".into()
    }
}

fn mib(kib: u64) -> String {
    format!("{} MiB", num(kib as f64 / 1024.0))
}

/// A measured value for one binary: the cell text and the number compared with the floor.
#[derive(Clone)]
struct Cell {
    text: String,
    value: Option<f64>,
}

impl Cell {
    fn of(r: Res<(String, f64)>) -> Cell {
        match r {
            Ok((text, value)) => Cell {
                text,
                value: Some(value),
            },
            Err(e) => {
                eprintln!("bench:   failed: {e}");
                let short: String = e.chars().take(60).collect();
                Cell {
                    text: format!("failed: {}", short.replace('|', "/")),
                    value: None,
                }
            }
        }
    }

    fn text(text: String) -> Cell {
        Cell { text, value: None }
    }
}

struct Row {
    measure: String,
    ours: Cell,
    base: Option<Cell>,
    floor: String,
    floor_value: Option<f64>,
    /// How to compare a value with the floor: a ratio, or a difference in µs.
    diff: bool,
    goal: String,
}

impl Row {
    fn compare(&self, c: &Cell) -> String {
        match (c.value, self.floor_value) {
            (Some(v), Some(f)) if self.diff => {
                let sign = if v >= f { "+" } else { "−" };
                format!("{sign}{} µs ({})", num((v - f).abs()), ratio(v, f))
            }
            (Some(v), Some(f)) => ratio(v, f),
            _ => "—".into(),
        }
    }
}

struct Table {
    rows: Vec<Row>,
    baseline: bool,
    costs: Vec<(String, f64)>,
    t0: Instant,
}

impl Table {
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        measure: &str,
        ours: Cell,
        base: Option<Cell>,
        floor: &str,
        floor_value: Option<f64>,
        diff: bool,
        goal: &str,
    ) {
        self.rows.push(Row {
            measure: measure.into(),
            ours,
            base,
            floor: floor.into(),
            floor_value,
            diff,
            goal: goal.into(),
        });
    }

    fn print(&self) {
        let mut out = String::new();
        if self.baseline {
            out.push_str("| measure | ours | floor | ours vs floor | baseline | baseline vs floor | goal |\n");
            out.push_str("|---|---|---|---|---|---|---|\n");
        } else {
            out.push_str("| measure | ours | floor | ours vs floor | goal |\n");
            out.push_str("|---|---|---|---|---|\n");
        }
        for r in &self.rows {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                r.measure,
                r.ours.text,
                r.floor,
                r.compare(&r.ours)
            );
            if self.baseline {
                match &r.base {
                    Some(b) => {
                        let _ = write!(out, " {} | {} |", b.text, r.compare(b));
                    }
                    None => out.push_str(" n/a | — |"),
                }
            }
            let _ = writeln!(out, " {} |", r.goal);
        }
        print!("{out}");
        let costs: Vec<String> = self
            .costs
            .iter()
            .map(|(name, s)| format!("{name} {s:.1} s"))
            .collect();
        println!(
            "\nRun time of the measurements: {:.0} s ({}).",
            self.t0.elapsed().as_secs_f64(),
            costs.join(", ")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The measurements.

struct Bench {
    opts: Opts,
    load: Load,
    runs: AtomicU64,
    /// The in-memory floors, reused by the `--db` rows (plus one fsync).
    floors: Mutex<Floors>,
}

#[derive(Default)]
struct Floors {
    /// nginx's call cycles per second, per entry of `THREADS`.
    cycles: Vec<Option<f64>>,
    /// Trivial server, the 3 requests of a pause round trip.
    pause: Option<Lat>,
    /// The fixture MCP server called directly.
    direct: Option<Lat>,
}

impl Bench {
    fn bins(&self) -> Vec<(&'static str, &Path)> {
        let mut v = vec![("ours", self.opts.server.as_path())];
        if let Some(b) = &self.opts.baseline {
            v.push(("baseline", b.as_path()));
        }
        v
    }

    fn dir(&self, label: &str) -> PathBuf {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        self.opts.tmp.join(format!("{n:02}-{label}"))
    }

    /// nginx, the floor of the throughput rows, in a fresh scratch directory; `None` (the
    /// floor then reads "failed") without `--nginx` or when it does not start.
    fn nginx(&self) -> Option<Nginx> {
        let Some(bin) = &self.opts.nginx else {
            eprintln!("bench:   no nginx (--nginx BIN): its floors fail");
            return None;
        };
        Nginx::start(bin, &self.dir("nginx"))
            .map_err(|e| eprintln!("bench:   nginx failed: {e}"))
            .ok()
    }

    fn server(&self, bin: &Path, label: &str, args: &[&str], mcp: bool) -> Res<Proc> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Proc::server(bin, &self.dir(label), &args, mcp)
    }

    /// Call cycles `from..until` on 4 threads while a monitor thread stops them if the
    /// server's RSS passes the guard; then the RSS once the load has stopped.
    fn phase(&self, server: &Proc, from: u64, until: u64, limit: Duration) -> (Ran, u64) {
        let stop = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        let pid = server.pid();
        let ran = thread::scope(|s| {
            s.spawn(|| {
                let t0 = Instant::now();
                let mut next_report = Duration::from_secs(20);
                while !finished.load(Ordering::Relaxed) {
                    let rss = rss_kib(pid);
                    if rss.is_some_and(|r| r > RSS_GUARD_KIB) {
                        stop.store(true, Ordering::Relaxed);
                    }
                    if t0.elapsed() >= next_report {
                        // Progress on stderr: shows whether RSS levels off.
                        eprintln!(
                            "bench:     after {:.0} s: RSS {} KiB",
                            t0.elapsed().as_secs_f64(),
                            rss.unwrap_or(0)
                        );
                        next_report += Duration::from_secs(20);
                    }
                    thread::sleep(Duration::from_millis(20));
                }
            });
            let ran = run_cycles(server.port, &self.load, 4, from, until, limit, &stop);
            finished.store(true, Ordering::Relaxed);
            ran
        });
        thread::sleep(Duration::from_millis(100));
        (ran, server.rss_kib().unwrap_or(0))
    }

    /// Resident memory per call, and RSS after 100,000 and 1,000,000 calls: one `--memory`
    /// server per binary, the phases interleaved; the last phase gets what is left of the
    /// time budget (the baseline first: a server that grows without bound stops at the guard).
    fn rows_memory(&self, t: &mut Table, budget_end: Instant) {
        struct Mem<'a> {
            label: &'a str,
            server: Res<Proc>,
            total: u64,
            cells: Vec<Cell>,
        }
        let warm = self.load.free.len() as u64 * 2;
        let mut mems: Vec<Mem> = self
            .bins()
            .into_iter()
            .map(|(label, bin)| {
                let server = self.server(bin, label, &["--memory"], false).and_then(|s| {
                    let never = AtomicBool::new(false);
                    let r =
                        run_cycles(s.port, &self.load, 4, 0, warm, self.opts.secs(30.0), &never);
                    r.error.map_or(Ok(s), Err)
                });
                Mem {
                    label,
                    server,
                    total: warm,
                    cells: Vec::new(),
                }
            })
            .collect();
        let per_call = self.opts.n(20_000);
        let marks = [self.opts.n(100_000), self.opts.n(1_000_000)];
        // The per-call phase.
        for m in &mut mems {
            let Ok(server) = &m.server else {
                m.cells.push(Cell::of(Err(m
                    .server
                    .as_ref()
                    .err()
                    .cloned()
                    .unwrap_or_default())));
                continue;
            };
            let rss0 = server.rss_kib().unwrap_or(0);
            let (r, rss1) = self.phase(server, m.total, m.total + per_call, self.opts.secs(60.0));
            m.total += r.done;
            let rate = r.rate();
            m.cells.push(Cell::of(match (r.error, r.done) {
                (Some(e), _) => Err(e),
                (None, 0) => Err("no call completed".into()),
                (None, done) => {
                    let per = (rss1 as f64 - rss0 as f64) / done as f64;
                    eprintln!(
                        "bench:   {}: {done} call cycles, RSS {rss0} -> {rss1} KiB: {per:.2} KiB/call ({:.0} cycles/s)",
                        m.label,
                        rate
                    );
                    Ok((format!("{per:.2} KiB"), per))
                }
            }));
        }
        // RSS after 100,000 calls, then after 1,000,000 (baseline first, within the budget).
        for (k, mark) in marks.iter().enumerate() {
            let last = k == marks.len() - 1;
            let order: Vec<usize> = if last {
                (0..mems.len()).rev().collect()
            } else {
                (0..mems.len()).collect()
            };
            for (j, &i) in order.iter().enumerate() {
                let m = &mut mems[i];
                let Ok(server) = &m.server else {
                    m.cells.push(Cell::text("failed".into()));
                    continue;
                };
                if m.cells
                    .last()
                    .is_some_and(|c| c.text.starts_with('>') || c.text.starts_with("failed"))
                {
                    m.cells.push(Cell::text(
                        m.cells.last().map(|c| c.text.clone()).unwrap_or_default(),
                    ));
                    continue;
                }
                let limit = if last {
                    let left = budget_end.saturating_duration_since(Instant::now());
                    left / (order.len() - j) as u32
                } else {
                    self.opts.secs(60.0)
                };
                let (r, rss) = self.phase(server, m.total, *mark, limit);
                m.total += r.done;
                eprintln!(
                    "bench:   {}: {} calls, RSS {rss} KiB ({:.0} cycles/s, {:.0} s)",
                    m.label,
                    m.total,
                    r.rate(),
                    r.elapsed.as_secs_f64()
                );
                let total = num(m.total as f64);
                m.cells.push(if let Some(e) = r.error {
                    Cell::of(Err(e))
                } else if r.stopped {
                    Cell::text(format!("> 4 GiB after {total} calls"))
                } else if m.total < *mark {
                    Cell {
                        text: format!(
                            "{} after only {total} calls (time box {:.0} s)",
                            mib(rss),
                            limit.as_secs_f64()
                        ),
                        value: Some(rss as f64),
                    }
                } else {
                    Cell {
                        text: mib(rss),
                        value: Some(rss as f64),
                    }
                });
            }
        }
        let mut cells: Vec<Vec<Cell>> = mems.into_iter().map(|m| m.cells).collect();
        let n = |x: u64| num(self.opts.n(x) as f64);
        for (k, (measure, goal)) in [
            (format!("resident memory per recorded call ({} call cycles, `--memory`): RSS growth / calls", n(20_000)), "≤ 1 KiB"),
            (format!("RSS after {} recorded calls (`--memory`)", n(100_000)), "flat past the retention cap (100,000 records)"),
            (format!("RSS after {} recorded calls (`--memory`)", n(1_000_000)), "flat past the retention cap: ≈ the row above"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut col: Vec<Cell> = cells
                .iter_mut()
                .map(|c| std::mem::replace(&mut c[k], Cell::text(String::new())))
                .collect();
            let base = if col.len() > 1 { col.pop() } else { None };
            let ours = col.pop().expect("ours");
            t.row(&measure, ours, base, "—", None, false, goal);
        }
    }

    /// Call cycles per second at 1, 4 and 16 threads, floor and binaries interleaved; with
    /// `db`, also the bytes the database grows per call cycle.
    fn rows_throughput(&self, t: &mut Table, db: bool) -> Option<f64> {
        let nginx = if db { None } else { self.nginx() };
        let tiny = if db {
            None
        } else {
            FloorProc::start("tiny").ok()
        };
        let mut servers = Vec::new();
        for (label, bin) in self.bins() {
            let dir = self.dir(label);
            let dbfile = dir.join("bench.db");
            let args: Vec<String> = if db {
                vec!["--db".into(), dbfile.display().to_string()]
            } else {
                vec!["--memory".into()]
            };
            let s = Proc::server(bin, &dir, &args, false).and_then(|s| {
                let never = AtomicBool::new(false);
                let warm = self.load.free.len() as u64 * 2;
                let r = run_cycles(s.port, &self.load, 2, 0, warm, self.opts.secs(30.0), &never);
                r.error.map_or(Ok(s), Err)
            });
            servers.push((s, dbfile));
        }
        let mut bytes_per_cycle = None;
        let mut cells: Vec<Vec<Cell>> = servers.iter().map(|_| Vec::new()).collect();
        let mut floors = Vec::new();
        let mut tiny_floors = Vec::new();
        // Short windows taken in turns (floors, ours, baseline; three rounds) so that drift of
        // a shared machine touches every column alike; a rate is its cycles over its time.
        const ROUNDS: u32 = 3;
        for threads in THREADS {
            let until = self.opts.n(if db { 20_000 } else { 100_000 });
            let limit = self.opts.secs(1.5) / ROUNDS;
            let mut floor = Some((0, Duration::ZERO));
            let mut tiny_floor = Some((0, Duration::ZERO));
            let mut totals: Vec<Res<(u64, Duration)>> = servers
                .iter()
                .map(|(s, _)| {
                    s.as_ref()
                        .map(|_| (0, Duration::ZERO))
                        .map_err(Clone::clone)
                })
                .collect();
            for _ in 0..ROUNDS {
                if let (Some(ng), Some((done, took))) = (&nginx, &mut floor) {
                    let never = AtomicBool::new(false);
                    let r = run_cycles(ng.port, &self.load, threads, 0, until, limit, &never);
                    match r.error {
                        None => (*done, *took) = (*done + r.done, *took + r.elapsed),
                        Some(e) => {
                            eprintln!("bench:   nginx floor failed: {e}");
                            floor = None;
                        }
                    }
                }
                if let (Some(tf), Some((done, took))) = (&tiny, &mut tiny_floor) {
                    let never = AtomicBool::new(false);
                    let r = run_cycles(tf.port, &self.load, threads, 0, until, limit, &never);
                    match r.error {
                        None => (*done, *took) = (*done + r.done, *took + r.elapsed),
                        Some(e) => {
                            eprintln!("bench:   tiny_http floor failed: {e}");
                            tiny_floor = None;
                        }
                    }
                }
                for (i, ((s, dbfile), total)) in servers.iter().zip(&mut totals).enumerate() {
                    let (Ok(s), Ok((done, took))) = (s, &mut *total) else {
                        continue;
                    };
                    let size0 = fs::metadata(dbfile).map(|m| m.len()).unwrap_or(0);
                    let never = AtomicBool::new(false);
                    let r = run_cycles(s.port, &self.load, threads, 0, until, limit, &never);
                    if let Some(e) = r.error {
                        *total = Err(e);
                        continue;
                    }
                    (*done, *took) = (*done + r.done, *took + r.elapsed);
                    if db && i == 0 && threads == 1 && r.done > 0 {
                        let size1 = fs::metadata(dbfile).map(|m| m.len()).unwrap_or(0);
                        bytes_per_cycle = Some(size1.saturating_sub(size0) as f64 / r.done as f64);
                    }
                }
            }
            if !db {
                floors.push(floor.map(|(done, took)| done as f64 / took.as_secs_f64()));
            }
            if tiny.is_some() {
                tiny_floors.push(tiny_floor.map(|(done, took)| done as f64 / took.as_secs_f64()));
            }
            for (i, total) in totals.into_iter().enumerate() {
                cells[i].push(Cell::of(total.map(|(done, took)| {
                    let rate = done as f64 / took.as_secs_f64();
                    (format!("{} /s", num(rate)), rate)
                })));
            }
        }
        for (k, threads) in THREADS.iter().enumerate() {
            let mut col: Vec<Cell> = cells
                .iter_mut()
                .map(|c| std::mem::replace(&mut c[k], Cell::text(String::new())))
                .collect();
            let base = if col.len() > 1 { col.pop() } else { None };
            let ours = col.pop().expect("ours");
            let (measure, floor, fv, goal) = if db {
                (
                    format!("`--db`: call cycles per second, {threads} client thread(s)"),
                    "see the fsync floor row".to_string(),
                    None,
                    "small gap to that floor",
                )
            } else {
                let f = floors.get(k).copied().flatten();
                (
                    format!("call cycles per second (start + complete, new connection per request), {threads} client thread(s)"),
                    f.map_or("failed".into(), |f| format!("{} /s (nginx)", num(f))),
                    f,
                    "≥ 0.9×",
                )
            };
            let again = (ours.clone(), base.clone());
            t.row(&measure, ours, base, &floor, fv, false, goal);
            if let (Some(tf), Some(f)) = (tiny_floors.get(k).copied().flatten(), fv) {
                t.row(
                    "the same, beside a do-nothing tiny_http server",
                    again.0,
                    again.1,
                    &format!(
                        "{} /s (tiny_http, 4 threads in `recv`: {} of nginx)",
                        num(tf),
                        ratio(tf, f)
                    ),
                    Some(tf),
                    false,
                    "(what bounds the row above)",
                );
            }
        }
        if !db {
            self.floors.lock().unwrap().cycles = floors;
        }
        bytes_per_cycle
    }

    /// Call cycles per second at 4 threads of one function: without a breakpoint, with a
    /// breakpoint that never pauses (`go` before and after), with a simple condition that never
    /// holds (decided from the decoded arguments), and as a logpoint that formats a line from
    /// the decoded arguments and result of every call; in turns with nginx (the floor of the
    /// throughput rows), so drift touches every row alike. Ours only (conditions are new).
    fn rows_conditions(&self, t: &mut Table) {
        const THREADS: usize = 4;
        const ROUNDS: u32 = 3;
        const FN: &str = "/api/breakpoints/apply_discount";
        // Each setup: its name, and the requests (method, path, body) that make it.
        type Setup<'a> = (&'a str, &'a [(&'a str, &'a str, &'a str)]);
        let setups: [Setup; 4] = [
            ("no breakpoint", &[("DELETE", FN, "")]),
            (
                "a breakpoint without condition (`go` before and after)",
                &[
                    ("POST", "/api/breakpoints", r#"{"function_name": "apply_discount", "behavior": "go", "condition": "", "log_message": ""}"#),
                    ("POST", "/api/breakpoints/apply_discount/after_behavior", r#"{"behavior": "go"}"#),
                ],
            ),
            (
                "a breakpoint with a simple condition that never holds (`args[1] == \"EUR-none\"`)",
                &[("POST", "/api/breakpoints", r#"{"function_name": "apply_discount", "condition": "args[1] == 'EUR-none'", "log_message": ""}"#)],
            ),
            (
                "a logpoint (`order {args[0]['order_id']} -> {result['discounted']}`, a line per call)",
                &[("POST", "/api/breakpoints", r#"{"function_name": "apply_discount", "condition": "", "log_message": "order {args[0]['order_id']} -> {result['discounted']}"}"#)],
            ),
        ];
        let floor_proc = self.nginx().ok_or_else(|| "no nginx".to_string());
        let server = self.server(&self.opts.server, "ours", &["--memory"], false);
        let never = AtomicBool::new(false);
        let until = self.opts.n(100_000);
        let limit = self.opts.secs(1.5) / ROUNDS;
        let mut floor: Res<(u64, Duration)> = floor_proc
            .as_ref()
            .map(|_| (0, Duration::ZERO))
            .map_err(Clone::clone);
        let mut totals: Vec<Res<(u64, Duration)>> = setups
            .iter()
            .map(|_| {
                server
                    .as_ref()
                    .map(|_| (0, Duration::ZERO))
                    .map_err(Clone::clone)
            })
            .collect();
        if let Ok(s) = &server {
            let warm = self.load.free.len() as u64 * 2;
            let r = run_cycles(s.port, &self.load, 2, 0, warm, self.opts.secs(30.0), &never);
            if let Some(e) = r.error {
                totals.iter_mut().for_each(|t| *t = Err(e.clone()));
            }
        }
        for _ in 0..ROUNDS {
            if let (Ok(f), Ok((done, took))) = (&floor_proc, &mut floor) {
                let r = run_cycles(f.port, &self.load, THREADS, 0, until, limit, &never);
                match r.error {
                    None => (*done, *took) = (*done + r.done, *took + r.elapsed),
                    Some(e) => floor = Err(e),
                }
            }
            let Ok(s) = &server else { break };
            for ((_, requests), total) in setups.iter().zip(&mut totals) {
                let Ok((done, took)) = total else { continue };
                let set = requests.iter().try_for_each(|(m, path, body)| {
                    call(s.port, m, path, body.as_bytes()).map(|_| ())
                });
                let r = run_cycles(s.port, &self.load, THREADS, 0, until, limit, &never);
                match set.err().or(r.error) {
                    None => (*done, *took) = (*done + r.done, *took + r.elapsed),
                    Some(e) => *total = Err(e),
                }
            }
        }
        let rate = |(done, took): (u64, Duration)| done as f64 / took.as_secs_f64();
        let f = floor.ok().map(rate);
        for ((what, _), total) in setups.iter().zip(totals) {
            let cell = Cell::of(total.map(|x| (format!("{} /s", num(rate(x))), rate(x))));
            t.row(
                &format!("call cycles per second, {THREADS} client threads, {what}"),
                cell,
                None,
                &f.map_or("failed".into(), |f| format!("{} /s (nginx)", num(f))),
                f,
                false,
                "close to the row without a breakpoint",
            );
        }
    }

    /// call/start that pauses + continue + the poll that answers ready, p50/p99; the call is
    /// completed outside the timed section (its after-behavior is `go`).
    fn pause_rt(&self, port: u16, trivial: bool) -> Res<Lat> {
        if !trivial {
            call(
                port,
                "POST",
                "/api/breakpoints",
                br#"{"function_name": "bp"}"#,
            )?;
            call(
                port,
                "POST",
                "/api/breakpoints/bp/after_behavior",
                br#"{"behavior": "go"}"#,
            )?;
        }
        let warm = 50;
        let n = self.opts.n(1_000);
        let deadline = Instant::now() + self.opts.secs(8.0);
        let mut samples = Vec::new();
        for i in 0..(warm + n) {
            if Instant::now() > deadline {
                break;
            }
            let k = (i % self.load.bp.len() as u64) as usize;
            let t0 = Instant::now();
            let start = call(port, "POST", "/api/call/start", &self.load.bp[k])?;
            let (pause, poll_url) = if trivial {
                ("bench-1".to_string(), "/api/poll/bench-1".to_string())
            } else {
                let url = start["poll_url"]
                    .as_str()
                    .ok_or_else(|| format!("call/start did not pause: {start}"))?;
                (
                    url.rsplit('/').next().unwrap_or("").to_string(),
                    url.to_string(),
                )
            };
            call(
                port,
                "POST",
                &format!("/api/paused/{pause}/continue"),
                br#"{"action": "continue"}"#,
            )?;
            let polled = http(port, "GET", &poll_url, b"")?;
            let elapsed = t0.elapsed();
            if !trivial {
                let v: Value = serde_json::from_slice(&polled.1).map_err(err("poll JSON"))?;
                if v["status"] != "ready" {
                    return Err(format!("poll answered {v}"));
                }
                let done = call(
                    port,
                    "POST",
                    "/api/call/complete",
                    &self.load.complete(k, &start["call_id"]),
                )?;
                if done.get("action").is_some() {
                    return Err(format!("after-pause despite after-behavior go: {done}"));
                }
            }
            if i >= warm {
                samples.push(elapsed);
            }
        }
        lat(samples)
    }

    fn rows_pause(&self, t: &mut Table, db: bool, fsync: Option<Lat>) {
        let floor = if db {
            self.floors.lock().unwrap().pause
        } else {
            let f = FloorProc::start("trivial").and_then(|tr| self.pause_rt(tr.port, true));
            if let Err(e) = &f {
                eprintln!("bench:   floor failed: {e}");
            }
            self.floors.lock().unwrap().pause = f.as_ref().ok().copied();
            f.ok()
        };
        let mut cells: Vec<Cell> = self
            .bins()
            .into_iter()
            .map(|(label, bin)| {
                Cell::of((|| {
                    let dir = self.dir(label);
                    let dbfile = dir.join("bench.db").display().to_string();
                    let args: Vec<String> = if db {
                        vec!["--db".into(), dbfile]
                    } else {
                        vec!["--memory".into()]
                    };
                    let s = Proc::server(bin, &dir, &args, false)?;
                    let l = self.pause_rt(s.port, false)?;
                    Ok((lat_cell(&l), l.p50))
                })())
            })
            .collect();
        let base = if cells.len() > 1 { cells.pop() } else { None };
        let ours = cells.pop().expect("ours");
        if db {
            let f = floor.zip(fsync).map(|(p, s)| p.p50 + s.p50);
            t.row(
                "`--db`: pause round trip, p50",
                ours,
                base,
                &f.map_or("failed".into(), |f| {
                    format!(
                        "{} µs (trivial server's 3 requests p50 + fsync p50)",
                        num(f)
                    )
                }),
                f,
                true,
                "small gap to that floor",
            );
        } else {
            t.row(
                "pause round trip (call/start that pauses + POST continue + GET poll answering ready), p50",
                ours,
                base,
                &floor.map_or("failed".into(), |l| {
                    format!("{} (trivial server, the same 3 requests)", lat_cell(&l))
                }),
                floor.map(|l| l.p50),
                false,
                "≤ 0.5 ms",
            );
        }
    }

    /// p50/p99 of one JSON-RPC request repeated over a child's stdio.
    fn time_rpc(&self, p: &mut Proc, method: &str, params: &Value, n: u64) -> Res<Lat> {
        let _dog = Watchdog::new(p.pid(), self.opts.secs(20.0) + Duration::from_secs(5));
        let warm = 200;
        let deadline = Instant::now() + self.opts.secs(10.0);
        let mut samples = Vec::new();
        for i in 0..(warm + n) {
            if Instant::now() > deadline {
                break;
            }
            let t0 = Instant::now();
            p.rpc().request(method, params)?;
            if i >= warm {
                samples.push(t0.elapsed());
            }
        }
        lat(samples)
    }

    /// Two placements: everything on one CPU, where a wake-up is a context switch and the
    /// ratio shows the server's own work; then as the scheduler places it, where a wake-up
    /// across CPUs (costly on a VM) can dominate either side, shown beside `cat` forced onto
    /// the other CPU.
    fn rows_mcp(&self, t: &mut Table) {
        let params = json!({"name": "breakpoint_list_breakpoints", "arguments": {}});
        let n = self.opts.n(3_000);
        let two_cpus = all_cpus() >= 2;
        let measure = |pinned: bool| -> Vec<Cell> {
            self.bins()
                .into_iter()
                .map(|(label, bin)| {
                    Cell::of((|| {
                        let _pin = if pinned { Some(Pin::to("0")?) } else { None };
                        let mut s = self.server(bin, label, &["--memory"], true)?;
                        s.rpc().mcp_handshake()?;
                        let l = self.time_rpc(&mut s, "tools/call", &params, n)?;
                        Ok((lat_cell(&l), l.p50))
                    })())
                })
                .collect()
        };
        for pinned in [true, false] {
            if !pinned && !two_cpus {
                break;
            }
            // Pinned: all on CPU 0. Else: the client on CPU 0 and `cat` forced onto CPU 1.
            let floor = (|| {
                let mut cat = {
                    let _pin = Pin::to(if pinned { "0" } else { "1" })?;
                    Proc::piped(Path::new("cat"), &[])?
                };
                let _pin = Pin::to("0")?;
                self.time_rpc(&mut cat, "tools/call", &params, n)
            })();
            let mut cells = measure(pinned);
            let base = if cells.len() > 1 { cells.pop() } else { None };
            let ours = cells.pop().expect("ours");
            if let Err(e) = &floor {
                eprintln!("bench:   floor failed: {e}");
            }
            let (measure, floor_text, goal) = if pinned {
                (
                    "MCP stdio `tools/call breakpoint_list_breakpoints`, p50, client and server on one CPU",
                    "pipe through `cat`, on the same CPU",
                    "≤ 2×",
                )
            } else {
                (
                    "the same, placed by the scheduler",
                    "`cat` forced onto the other CPU",
                    "(shows the cost of a wake-up across CPUs)",
                )
            };
            t.row(
                measure,
                ours,
                base,
                &floor.as_ref().map_or("failed".into(), |l| {
                    format!("{} ({floor_text})", lat_cell(l))
                }),
                floor.as_ref().ok().map(|l| l.p50),
                false,
                goal,
            );
        }
    }

    /// `external_call_tool` of the fixture's `echo` through a server with `--mcp-client`.
    fn external(&self, bin: &Path, label: &str, db: bool, pinned: bool) -> Res<Lat> {
        let _pin = if pinned { Some(Pin::to("0")?) } else { None };
        let fixture = format!("fx:{}", self.opts.fixture.display());
        let dir = self.dir(label);
        let mut args = vec!["--mcp-client".to_string(), fixture];
        if db {
            args.extend(["--db".into(), dir.join("bench.db").display().to_string()]);
        } else {
            args.push("--memory".into());
        }
        let mut s = Proc::server(bin, &dir, &args, true)?;
        s.rpc().mcp_handshake()?;
        let params = json!({"name": "external_call_tool",
                            "arguments": {"tool": "fx/echo", "arguments": {"text": "hello"}}});
        // Wait until the fixture is connected (its first call succeeds).
        let deadline = Instant::now() + Duration::from_secs(15);
        let dog = Watchdog::new(s.pid(), Duration::from_secs(20));
        loop {
            match s.rpc().request("tools/call", &params) {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("fixture never connected: {e}"))
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
        drop(dog);
        self.time_rpc(&mut s, "tools/call", &params, self.opts.n(1_000))
    }

    /// Without a database, two placements as for MCP stdio: one CPU (the goal row), then as
    /// the scheduler places it. With `--db`, as placed by the scheduler.
    fn rows_external(&self, t: &mut Table, db: bool, fsync: Option<Lat>) {
        let cells = |pinned: bool| -> (Cell, Option<Cell>) {
            let mut cells: Vec<Cell> = self
                .bins()
                .into_iter()
                .map(|(label, bin)| {
                    Cell::of(
                        self.external(bin, label, db, pinned)
                            .map(|l| (lat_cell(&l), l.p50)),
                    )
                })
                .collect();
            let base = if cells.len() > 1 { cells.pop() } else { None };
            (cells.pop().expect("ours"), base)
        };
        if db {
            let direct = self.floors.lock().unwrap().direct;
            let (ours, base) = cells(false);
            // The floor: the fixture called directly, plus one fsync.
            let f = direct.zip(fsync).map(|(d, s)| d.p50 + s.p50);
            t.row(
                "`--db`: `external_call_tool` p50",
                ours,
                base,
                &f.map_or("failed".into(), |f| {
                    format!("{} µs (fixture called directly p50 + fsync p50)", num(f))
                }),
                f,
                true,
                "small gap to that floor",
            );
            return;
        }
        let two_cpus = all_cpus() >= 2;
        for pinned in [true, false] {
            if !pinned && !two_cpus {
                break;
            }
            let direct = (|| {
                let _pin = if pinned { Some(Pin::to("0")?) } else { None };
                let mut f = Proc::piped(&self.opts.fixture, &[])?;
                f.rpc().mcp_handshake()?;
                let params = json!({"name": "echo", "arguments": {"text": "hello"}});
                self.time_rpc(&mut f, "tools/call", &params, self.opts.n(1_000))
            })();
            if let Err(e) = &direct {
                eprintln!("bench:   floor failed: {e}");
            }
            let direct = direct.ok();
            if !pinned {
                self.floors.lock().unwrap().direct = direct;
            }
            let (ours, base) = cells(pinned);
            let (measure, goal) = if pinned {
                (
                    "`external_call_tool` p50 (fixture's `echo` through `--mcp --mcp-client fx:…`), \
                     client, server and fixture on one CPU",
                    "≤ +0.1 ms",
                )
            } else {
                (
                    "the same, placed by the scheduler",
                    "(two more wake-ups than calling directly: see the row above it)",
                )
            };
            t.row(
                measure,
                ours,
                base,
                &direct.map_or("failed".into(), |l| {
                    format!("{} (fixture called directly)", lat_cell(&l))
                }),
                direct.map(|l| l.p50),
                true,
                goal,
            );
        }
    }

    /// Spawn → first 200 on GET /api/breakpoints, p50 of ~20 starts; idle RSS (median).
    fn startup(&self, bin: &Path, label: &str) -> Res<(Lat, u64)> {
        let starts = self.opts.n(20).max(3);
        let mut times = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..starts {
            let dir = self.dir(label);
            let t0 = Instant::now();
            let s = Proc::server(bin, &dir, &["--memory".to_string()], false)?;
            loop {
                match http(s.port, "GET", "/api/breakpoints", b"") {
                    Ok((200, _)) => break,
                    Ok((status, _)) => return Err(format!("GET /api/breakpoints -> {status}")),
                    Err(e) if t0.elapsed() > Duration::from_secs(5) => return Err(e),
                    Err(_) => thread::sleep(Duration::from_micros(100)),
                }
            }
            times.push(t0.elapsed());
            thread::sleep(Duration::from_millis(50));
            rss.push(s.rss_kib().ok_or("no RSS")?);
        }
        rss.sort();
        Ok((lat(times)?, rss[rss.len() / 2]))
    }

    fn rows_startup(&self, t: &mut Table) {
        let mut time_cells = Vec::new();
        let mut rss_cells = Vec::new();
        let mut size_cells = Vec::new();
        for (label, bin) in self.bins() {
            match self.startup(bin, label) {
                Ok((l, rss)) => {
                    time_cells.push(Cell {
                        text: format!("{} ms (p99 {})", num(l.p50 / 1000.0), num(l.p99 / 1000.0)),
                        value: Some(l.p50),
                    });
                    rss_cells.push(Cell {
                        text: mib(rss),
                        value: Some(rss as f64),
                    });
                }
                Err(e) => {
                    time_cells.push(Cell::of(Err(e)));
                    rss_cells.push(Cell::text("failed".into()));
                }
            }
            size_cells.push(Cell::of(
                fs::metadata(bin)
                    .map(|m| {
                        let b = m.len() as f64;
                        (format!("{:.2} MB ({:.2} MiB)", b / 1e6, b / 1048576.0), b)
                    })
                    .map_err(err("binary")),
            ));
        }
        for (measure, mut cells, goal) in [
            (
                "start-up to first answer (spawn → first 200 on GET /api/breakpoints), p50",
                time_cells,
                "≤ 10 ms",
            ),
            ("idle RSS after start-up (median)", rss_cells, "≤ 5 MiB"),
            ("release binary size", size_cells, "≤ 5 MB"),
        ] {
            let base = if cells.len() > 1 { cells.pop() } else { None };
            let ours = cells.pop().expect("ours");
            t.row(measure, ours, base, "—", None, false, goal);
        }
    }

    /// One append of `size` bytes + `fdatasync`, repeated, on the scratch directory's disk.
    fn fsync_floor(&self, size: usize) -> Res<(f64, Lat)> {
        let path = self.opts.tmp.join("fsync-floor.bin");
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(err("fsync file"))?;
        let buf = vec![0x5a_u8; size];
        let n = self.opts.n(2_000);
        let deadline = Instant::now() + self.opts.secs(3.0);
        let mut samples = Vec::new();
        let t0 = Instant::now();
        for _ in 0..n {
            if Instant::now() > deadline {
                break;
            }
            let t = Instant::now();
            f.write_all(&buf).map_err(err("append"))?;
            f.sync_data().map_err(err("fdatasync"))?;
            samples.push(t.elapsed());
        }
        let rate = samples.len() as f64 / t0.elapsed().as_secs_f64();
        drop(f);
        let _ = fs::remove_file(&path);
        Ok((rate, lat(samples)?))
    }

    fn rows_db(&self, t: &mut Table) {
        let first = t.rows.len();
        let bytes = self.rows_throughput(t, true);
        let size = bytes.map_or(2048, |b| b.round().max(1.0) as usize);
        let fsync = self.fsync_floor(size);
        if let Err(e) = &fsync {
            eprintln!("bench:   fsync floor failed: {e}");
        }
        let (rate, fl) = match &fsync {
            Ok((r, l)) => (Some(*r), Some(*l)),
            Err(_) => (None, None),
        };
        let cycles = self.floors.lock().unwrap().cycles.clone();
        for (k, row) in t.rows[first..].iter_mut().enumerate() {
            // Per cycle: nginx's time plus one fsync's (fsyncs do not overlap).
            let f = rate
                .zip(cycles.get(k).copied().flatten())
                .map(|(s, c)| 1.0 / (1.0 / c + 1.0 / s));
            row.floor = f.map_or("failed".into(), |f| {
                format!("{} /s (nginx + one fsync per cycle)", num(f))
            });
            row.floor_value = f;
        }
        let measured = if bytes.is_some() {
            ""
        } else {
            " (a guess: the growth was not measured)"
        };
        t.rows.insert(
            first,
            Row {
                measure: format!(
                    "fsync floor: append {size} B (the database growth per call cycle{measured}) + `fdatasync`, same disk"
                ),
                ours: Cell::text("—".into()),
                base: Some(Cell::text("—".into())),
                floor: match &fsync {
                    Ok((r, l)) => format!("{} /s, {}", num(*r), lat_cell(l)),
                    Err(e) => format!("failed: {e}"),
                },
                floor_value: None,
                diff: false,
                goal: "the floor of the `--db` rows below".into(),
            },
        );
        self.rows_pause(t, true, fl);
        self.rows_external(t, true, fl);
    }

    /// Text search over 100,000 recorded calls, and their JSON Lines export: calls whose
    /// values are all distinct (every call's arguments, keyword argument and result are new
    /// pickles, so the search's memory of CIDs saves nothing and every value is rendered from
    /// the content store) in memory, with `--db`, and with that database reopened with
    /// `--max-records 1000` (the older records are read back from the file); and the usual
    /// load (64 argument sets, repeated) in memory. Floors: the same records' shown texts,
    /// held in this process and lowercased once, scanned with `str::contains` (what an
    /// in-memory text index of the rendered values would cost at best); and a plain page.
    fn rows_search(&self, t: &mut Table) {
        let n = self.opts.n(100_000);
        let reps = self.opts.n(7).max(3) as usize;
        let db_dir = self.dir("search-db");
        let db_file = db_dir.join("search.db").display().to_string();
        let window = 1_000.min(n / 2).max(1);
        enum Calls {
            Distinct,
            Usual,
            Reopened,
        }
        let configs = [
            (
                "`--memory`, values all distinct".to_string(),
                vec!["--memory".to_string()],
                Calls::Distinct,
            ),
            (
                "`--db`, values all distinct".to_string(),
                vec!["--db".into(), db_file.clone()],
                Calls::Distinct,
            ),
            (
                format!(
                    "`--db` reopened with `--max-records {window}` ({} records read from the file)",
                    num((n - window) as f64)
                ),
                vec![
                    "--db".into(),
                    db_file,
                    "--max-records".into(),
                    window.to_string(),
                ],
                Calls::Reopened,
            ),
            (
                "`--memory`, the usual load (64 argument sets, repeated)".to_string(),
                vec!["--memory".to_string()],
                Calls::Usual,
            ),
        ];
        for (mode, args, load) in configs {
            let dir = match load {
                Calls::Distinct if args[0] == "--db" => db_dir.clone(),
                Calls::Reopened => db_dir.clone(),
                _ => self.dir("search"),
            };
            let measured = (|| -> Res<SearchTimes> {
                let s = Proc::server(&self.opts.server, &dir, &args, false)?;
                match load {
                    Calls::Distinct => {
                        eprintln!("bench:   recording {n} calls with distinct values ({mode})");
                        record_distinct(s.port, &self.load, n, 16, self.opts.secs(300.0))?;
                    }
                    Calls::Usual => {
                        eprintln!("bench:   recording {n} calls of the usual load ({mode})");
                        let never = AtomicBool::new(false);
                        let ran =
                            run_cycles(s.port, &self.load, 16, 0, n, self.opts.secs(300.0), &never);
                        if let Some(e) = ran.error {
                            return Err(e);
                        }
                    }
                    Calls::Reopened => {}
                }
                search_times(s.port, n, reps)
            })();
            let (ours, floor, page, export) = match measured {
                Ok(m) => (
                    Cell {
                        text: format!(
                            "{} ms (p99 {}){}",
                            num(m.search.p50 / 1e3),
                            num(m.search.p99 / 1e3),
                            m.note
                        ),
                        value: Some(m.search.p50),
                    },
                    Some(m.floor),
                    Some(m.page),
                    Cell {
                        text: format!(
                            "{} s, {} records/s, {} MB",
                            num(m.export_s),
                            num(n as f64 / m.export_s),
                            num(m.export_bytes as f64 / 1e6)
                        ),
                        value: None,
                    },
                ),
                Err(e) => (Cell::of(Err(e.clone())), None, None, Cell::of(Err(e))),
            };
            let base = || {
                self.opts
                    .baseline
                    .as_ref()
                    .map(|_| Cell::text("n/a".into()))
            };
            let again = ours.clone();
            t.row(
                &format!(
                    "search (`?search=`, a text in no record: every record tested) over {} recorded calls, {mode}, p50",
                    num(n as f64)
                ),
                ours,
                base(),
                &floor.map_or("failed".into(), |f| {
                    format!(
                        "{} ms (p99 {}) (the same records' shown texts, in memory, lowercased once, `str::contains`)",
                        num(f.p50 / 1e3),
                        num(f.p99 / 1e3)
                    )
                }),
                floor.map(|f| f.p50),
                false,
                "under the 1.5 s scan budget",
            );
            t.row(
                "the same, beside an unfiltered page",
                again,
                base(),
                &page.map_or("failed".into(), |p| {
                    format!(
                        "{} ms (p99 {}) (`GET /api/call-records`, 100 records)",
                        num(p.p50 / 1e3),
                        num(p.p99 / 1e3)
                    )
                }),
                page.map(|p| p.p50),
                false,
                "(the cost of testing every record)",
            );
            t.row(
                &format!("JSON Lines export of the same records (`?format=jsonl`), {mode}"),
                export,
                base(),
                "—",
                None,
                false,
                "streamed, memory bounded",
            );
        }
    }

    /// Every page of the UI on a server opened on a generated database of 1,000,000 call
    /// records (`pages.rs`), beside the same address on an empty `--memory` server: median and
    /// p99 of `reps` requests after one (timed apart: the first view), and the bytes.
    fn rows_pages(&self, t: &mut Table) {
        let n = self.opts.n(1_000_000);
        let reps = self.opts.n(20).max(5) as usize;
        let dir = self.dir("pages");
        let db = dir.join("pages.db");
        eprintln!("bench:   generating a database of {n} call records");
        let generated = fs::create_dir_all(&dir)
            .map_err(err("mkdir"))
            .and_then(|_| pages::generate(&db, n));
        let g = match generated {
            Ok(g) => g,
            Err(e) => {
                t.row(
                    "pages at 1,000,000 recorded calls",
                    Cell::of(Err(e)),
                    None,
                    "—",
                    None,
                    false,
                    "—",
                );
                return;
            }
        };
        let calls = num(g.records as f64);
        t.row(
            &format!("generated database: {calls} call records (4 processes, nested calls, client events, exceptions), {} stored objects (library)", num(g.blobs as f64)),
            Cell::text(format!("{:.1} s, {} MB", g.secs, num(g.file_bytes as f64 / 1e6))),
            None,
            "—",
            None,
            false,
            "well under 2 minutes",
        );
        let t0 = Instant::now();
        let args = vec!["--db".to_string(), db.display().to_string()];
        let ours = Proc::server_within(
            &self.opts.server,
            &dir.join("server"),
            &args,
            false,
            self.opts.secs(300.0).max(Duration::from_secs(60)),
        );
        let ours = match ours.and_then(|s| {
            // Open: spawn to the first answer (the port is bound once the file is read).
            call(s.port, "GET", "/api/status", b"").map(|_| s)
        }) {
            Ok(s) => s,
            Err(e) => {
                t.row(
                    &format!("`--db` server on {calls} recorded calls"),
                    Cell::of(Err(e)),
                    None,
                    "—",
                    None,
                    false,
                    "—",
                );
                return;
            }
        };
        let open_s = t0.elapsed().as_secs_f64();
        let rss = ours.rss_kib().unwrap_or(0);
        let floor = self.server(&self.opts.server, "pages-floor", &["--memory"], false);
        let floor_open = Instant::now();
        let floor_open_s = floor
            .as_ref()
            .ok()
            .and_then(|f| call(f.port, "GET", "/api/status", b"").ok())
            .map(|_| floor_open.elapsed().as_secs_f64());
        t.row(
            &format!("open time of a `--db` server on {calls} recorded calls ({} MB file): spawn to first answer; RSS after opening", num(g.file_bytes as f64 / 1e6)),
            Cell::text(format!("{:.1} s, RSS {}", open_s, mib(rss))),
            None,
            &floor_open_s.map_or("—".into(), |_| "an empty `--memory` server: start-up row above".to_string()),
            None,
            false,
            "stated",
        );
        let key = cideldill_server::urlenc::encode_segment(&g.biggest);
        let tree = format!("/call-tree/{key}");
        let pages: Vec<(String, String)> = vec![
            ("`/` (Paused)".into(), "/".into()),
            ("`/calls`".into(), "/calls".into()),
            (
                "`/calls?search=customer-0007` (a text in many records)".into(),
                "/calls?search=customer-0007".into(),
            ),
            (
                "`/calls?search=` a text in no record".into(),
                "/calls?search=no+record+holds+this".into(),
            ),
            (
                "`/calls?client_events=show`".into(),
                "/calls?client_events=show".into(),
            ),
            ("`/call-tree`".into(), "/call-tree".into()),
            (
                "`/call-tree/<biggest process>` (its newest calls)".into(),
                tree.clone(),
            ),
            (
                "`/call-tree/<biggest process>?selected=<a call in the middle>`".into(),
                format!("{tree}?selected={}", g.middle_call),
            ),
            (
                "the same as a fragment (`&fragment=1`: what j/k fetch)".into(),
                format!("{tree}?selected={}&fragment=1", g.middle_call),
            ),
            ("`/breakpoints`".into(), "/breakpoints".into()),
            ("`/objects`".into(), "/objects".into()),
            (
                "`/object/<a shared argument>`".into(),
                format!("/object/{}", g.shared_cid),
            ),
            ("`/functions`".into(), "/functions".into()),
            ("`/repls`".into(), "/repls".into()),
            ("`/mcp-servers`".into(), "/mcp-servers".into()),
            ("`/com-errors`".into(), "/com-errors".into()),
            (
                "`/callstack/call/<an old call>`".into(),
                format!("/callstack/call/{}", g.old_call),
            ),
            (
                "`GET /api/call-records?limit=50`".into(),
                "/api/call-records?limit=50".into(),
            ),
        ];
        const BOUND_MS: f64 = 200.0;
        const BOUND_BYTES: usize = 256 * 1024;
        let timeout = self.opts.secs(30.0).max(Duration::from_secs(10));
        let measure = |port: u16, path: &str, found: bool| -> Res<(Duration, Lat, usize)> {
            let once = || -> Res<(Duration, usize)> {
                let t0 = Instant::now();
                let (status, body) = pages::get_page(port, path, timeout)?;
                let took = t0.elapsed();
                // The empty server has no such process, call or object: its not-found page.
                let expected = status == 200 || (status == 404 && !found);
                if !expected {
                    return Err(format!("{path} answered {status}"));
                }
                Ok((took, body.len()))
            };
            let (first, _) = once()?;
            let mut times = Vec::with_capacity(reps);
            let mut bytes = 0;
            for _ in 0..reps {
                let (took, b) = once()?;
                times.push(took);
                bytes = bytes.max(b);
            }
            Ok((first, lat(times)?, bytes))
        };
        let ms = |d: f64| num(d / 1e3);
        for (label, path) in pages {
            eprintln!("bench:   {path}");
            let mine = measure(ours.port, &path, true);
            let base = floor
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|f| measure(f.port, &path, false));
            let (cell, verdict) = match &mine {
                Ok((first, l, bytes)) => {
                    let worst = l.p99.max(first.as_secs_f64() * 1e6);
                    let pass = worst < BOUND_MS * 1e3 && *bytes < BOUND_BYTES;
                    (
                        Cell {
                            text: format!(
                                "{} ms (p99 {}; first {}), {} kB",
                                ms(l.p50),
                                ms(l.p99),
                                ms(first.as_secs_f64() * 1e6),
                                num(*bytes as f64 / 1e3)
                            ),
                            value: Some(l.p50),
                        },
                        if pass { "pass" } else { "**fail**" },
                    )
                }
                Err(e) => (Cell::of(Err(e.clone())), "**fail**"),
            };
            let (floor_text, floor_value) = match &base {
                Ok((_, l, bytes)) => (
                    format!(
                        "{} ms (p99 {}), {} kB (empty `--memory` server)",
                        ms(l.p50),
                        ms(l.p99),
                        num(*bytes as f64 / 1e3)
                    ),
                    Some(l.p50),
                ),
                Err(e) => (
                    format!("failed: {}", e.chars().take(60).collect::<String>()),
                    None,
                ),
            };
            t.row(
                &format!("{label} at {calls} recorded calls (`--db`), p50"),
                cell,
                None,
                &floor_text,
                floor_value,
                false,
                &format!("< 200 ms and < 256 KiB (p99 and first): {verdict}"),
            );
        }
    }

    fn rows_pickle(&self, t: &mut Table) {
        let Some(list) = &self.opts.pickles else {
            return;
        };
        let text = match fs::read_to_string(list) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("bench:   pickle list: {e}");
                return;
            }
        };
        for line in text.lines() {
            let parts: Vec<&str> = line.split('\t').collect();
            let [file, name, size, python] = parts[..] else {
                continue;
            };
            let python: f64 = python.parse().unwrap_or(0.0);
            let ours = Cell::of((|| {
                let bytes = fs::read(file).map_err(err("pickle file"))?;
                cideldill_server::pickle::repr(&bytes).map_err(|e| format!("{e:?}"))?;
                let limit = self.opts.secs(0.5);
                let (mut n, t0) = (0u64, Instant::now());
                while t0.elapsed() < limit {
                    std::hint::black_box(
                        cideldill_server::pickle::repr(std::hint::black_box(&bytes))
                            .map_err(|e| format!("{e:?}"))?,
                    );
                    n += 1;
                }
                let rate = bytes.len() as f64 * n as f64 / t0.elapsed().as_secs_f64() / 1e6;
                Ok((format!("{} MB/s", num(rate)), rate))
            })());
            let kb = size.parse::<f64>().unwrap_or(0.0) / 1e3;
            t.row(
                &format!("pickle decode-and-render: {name} ({} kB)", num(kb)),
                ours,
                self.opts
                    .baseline
                    .as_ref()
                    .map(|_| Cell::text("n/a (library)".into())),
                &format!("{} MB/s (python3 `pickle.loads` + `repr`)", num(python)),
                Some(python),
                false,
                "—",
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Search over recorded calls.

/// A dill item of a JSON value, pickled as CPython would (new bytes for every new value).
fn distinct_item(value: &Value, client_ref: u64) -> Value {
    let bytes = cideldill_server::pickle_write::dumps(value);
    json!({
        "cid": cideldill_server::cas::cid_of(&bytes),
        "client_ref": client_ref,
        "data": cideldill_server::cas::encode_base64(&bytes),
    })
}

/// Records `n` calls whose arguments, keyword argument and result are all values no other
/// call has, on `threads` threads.
fn record_distinct(port: u16, load: &Load, n: u64, threads: usize, limit: Duration) -> Res<()> {
    let template: Value = serde_json::from_slice(&load.free[0]).map_err(err("template"))?;
    let next = AtomicU64::new(0);
    let error = Mutex::new(None);
    let t0 = Instant::now();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || t0.elapsed() > limit || error.lock().unwrap().is_some() {
                    break;
                }
                let mut start = template.clone();
                start["args"] = json!([
                    distinct_item(&json!({"order_id": i, "customer": format!("customer-{i:06}"), "total": i as f64 * 0.25}), 2),
                    distinct_item(&json!(format!("EUR-{i}")), 3),
                ]);
                start["kwargs"] = json!({"c": distinct_item(&json!([i, "note", null, true]), 4)});
                let r = distinct_item(&json!({"order_id": i, "discounted": i as f64 * 0.2}), 5);
                let result = serde_json::to_vec(&start)
                    .map_err(err("start body"))
                    .and_then(|body| call(port, "POST", "/api/call/start", &body))
                    .and_then(|started| {
                        let done = json!({
                            "call_id": started["call_id"], "timestamp": now(), "status": "success",
                            "result_cid": r["cid"], "result_data": r["data"], "result_client_ref": 5,
                            "process_pid": start["process_pid"], "process_start_time": start["process_start_time"],
                        });
                        call(port, "POST", "/api/call/complete", done.to_string().as_bytes())
                    });
                if let Err(e) = result {
                    error.lock().unwrap().get_or_insert(e);
                    break;
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap() {
        return Err(e);
    }
    let done = next.into_inner().min(n);
    if done < n {
        return Err(format!("recorded only {done} calls in the time box"));
    }
    Ok(())
}

struct SearchTimes {
    search: Lat,
    note: String,
    floor: Lat,
    page: Lat,
    export_s: f64,
    export_bytes: usize,
}

/// The text a rendered value is shown as (the server's rule: strings as they are, a
/// placeholder by its summary, anything else as JSON), lowercased.
fn shown_lower(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.to_lowercase()),
        Value::Object(m) if m.get("summary").is_some_and(Value::is_string) => {
            m["summary"].as_str().map(str::to_lowercase)
        }
        other => Some(other.to_string().to_lowercase()),
    }
}

/// Times the search, the floors and the export on a server holding `n` records.
fn search_times(port: u16, n: u64, reps: usize) -> Res<SearchTimes> {
    let needle = "no record holds this text";
    let path = format!(
        "/api/call-records?limit=100&search={}",
        needle.replace(' ', "+")
    );
    let first = call(port, "GET", &path, b"")?;
    if first["total_count"] != 0 {
        return Err(format!("the search matched: {}", first["total_count"]));
    }
    let mut times = Vec::new();
    let mut note = String::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let page = call(port, "GET", &path, b"")?;
        times.push(t0.elapsed());
        let scanned = page["scanned"].as_u64().unwrap_or(0);
        if page["search_truncated"] == true {
            note = format!(", cut at the budget after {} records", num(scanned as f64));
        } else if scanned != n {
            return Err(format!("the search tested {scanned} records of {n}"));
        }
    }
    let mut pages = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        call(port, "GET", "/api/call-records?limit=100", b"")?;
        pages.push(t0.elapsed());
    }
    let t0 = Instant::now();
    let (status, body) = http(port, "GET", "/api/call-records?format=jsonl", b"")?;
    let export_s = t0.elapsed().as_secs_f64();
    if status != 200 {
        return Err(format!("export answered {status}"));
    }
    let text = String::from_utf8(body).map_err(err("export text"))?;
    let mut texts: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).map_err(err("export line"))?;
        let mut t: Vec<String> = Vec::new();
        for a in r["pretty_args"].as_array().into_iter().flatten() {
            t.extend(shown_lower(a));
        }
        for (k, v) in r["pretty_kwargs"].as_object().into_iter().flatten() {
            t.push(k.to_lowercase());
            t.extend(shown_lower(v));
        }
        for key in [
            "pretty_result",
            "exception",
            "exception_type",
            "exception_message",
            "exception_traceback",
        ] {
            t.extend(shown_lower(&r[key]));
        }
        texts.push(t);
    }
    if texts.len() as u64 != n {
        return Err(format!(
            "the export has {} lines for {n} records",
            texts.len()
        ));
    }
    let mut floor = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let hits = texts
            .iter()
            .filter(|t| t.iter().any(|x| x.contains(std::hint::black_box(needle))))
            .count();
        floor.push(t0.elapsed());
        std::hint::black_box(hits);
    }
    Ok(SearchTimes {
        search: lat(times)?,
        note,
        floor: lat(floor)?,
        page: lat(pages)?,
        export_s,
        export_bytes: text.len(),
    })
}

// ---------------------------------------------------------------------------------------------
// The content store, through the library. Every use of the store API is in this function.

struct StoreResult {
    objects_per_s: f64,
    mb_per_s: f64,
    reopen_s: f64,
    /// Resident memory of the reopened store's index, per object.
    index_bytes_per_object: f64,
    objects: usize,
}

fn store_bench(dir: &Path, objects: usize, batch: usize) -> Res<StoreResult> {
    use cideldill_server::cas::cid_value;
    use cideldill_server::store::{NewBlob, Store};
    let path = dir.join("store.db");
    let (store, _) = Store::open(&path).map_err(err("open"))?;
    let mut put = Duration::ZERO;
    let mut bytes = 0usize;
    let mut i = 0usize;
    while i < objects {
        let blobs: Vec<NewBlob> = (i..(i + batch).min(objects))
            .map(|k| {
                // A small pickle-sized blob, distinct per object.
                let data =
                    format!("\u{80}\u{4}object {k:09} of the content store benchmark").into_bytes();
                NewBlob {
                    cid: cid_value(&data),
                    bytes: data,
                    format: None,
                }
            })
            .collect();
        let n = blobs.len();
        bytes += blobs.iter().map(|b| b.bytes.len()).sum::<usize>();
        let t0 = Instant::now();
        let fresh = store.put_blobs(blobs, now()).map_err(err("put_blobs"))?;
        put += t0.elapsed();
        if fresh != n {
            return Err(format!("put_blobs stored {fresh} of {n}"));
        }
        i += n;
    }
    drop(store);
    let rss_before = rss_kib(std::process::id()).unwrap_or(0);
    let t0 = Instant::now();
    let (store, recovered) = Store::open(&path).map_err(err("reopen"))?;
    let reopen_s = t0.elapsed().as_secs_f64();
    let rss_after = rss_kib(std::process::id()).unwrap_or(0);
    let index_bytes_per_object =
        rss_after.saturating_sub(rss_before) as f64 * 1024.0 / objects as f64;
    if recovered.blobs != objects || store.len() != objects {
        return Err(format!(
            "reopen found {} of {objects} blobs",
            recovered.blobs
        ));
    }
    drop(store);
    let _ = fs::remove_file(&path);
    Ok(StoreResult {
        objects_per_s: objects as f64 / put.as_secs_f64(),
        mb_per_s: bytes as f64 / put.as_secs_f64() / 1e6,
        reopen_s,
        index_bytes_per_object,
        objects,
    })
}

fn rows_store(b: &Bench, t: &mut Table) {
    let objects = b.opts.n(1_000_000) as usize;
    let dir = b.dir("store");
    let r = fs::create_dir_all(&dir)
        .map_err(err("mkdir"))
        .and_then(|_| store_bench(&dir, objects, 1_000));
    let base = || {
        b.opts
            .baseline
            .as_ref()
            .map(|_| Cell::text("n/a (library)".into()))
    };
    match r {
        Ok(r) => {
            t.row(
                &format!(
                    "content-store append throughput, {} objects in batches of 1,000 (library)",
                    num(r.objects as f64)
                ),
                Cell::text(format!(
                    "{} objects/s, {} MB/s",
                    num(r.objects_per_s),
                    num(r.mb_per_s)
                )),
                base(),
                "—",
                None,
                false,
                "—",
            );
            t.row(
                &format!(
                    "content-store reopen time at {} objects (library)",
                    num(r.objects as f64)
                ),
                Cell::text(format!("{:.2} s", r.reopen_s)),
                base(),
                "—",
                None,
                false,
                "—",
            );
            t.row(
                &format!(
                    "content-store index in memory per object (RSS growth of the reopen at {} objects)",
                    num(r.objects as f64)
                ),
                Cell::text(format!("{:.0} B", r.index_bytes_per_object)),
                base(),
                "—",
                None,
                false,
                "stated, small",
            );
        }
        Err(e) => t.row(
            "content-store append and reopen (library)",
            Cell::of(Err(e)),
            base(),
            "—",
            None,
            false,
            "—",
        ),
    }
}

// ---------------------------------------------------------------------------------------------

/// `bench --floor-server trivial|tiny`: serves a floor in its own process (so that it pays
/// the same process switches ours does), prints its port, and exits when stdin closes.
fn floor_server(kind: &str) -> ! {
    let port = match kind {
        "trivial" => Trivial::start().map(|t| {
            let port = t.port;
            std::mem::forget(t);
            port
        }),
        "tiny" => TinyFloor::start(4).map(|t| {
            let port = t.port;
            std::mem::forget(t);
            port
        }),
        other => Err(format!("unknown floor server {other:?}")),
    };
    match port {
        Ok(port) => {
            println!("{port}");
            let _ = std::io::stdout().flush();
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("bench: floor server: {e}");
            std::process::exit(2)
        }
    }
}

/// `bench --gen-db FILE [N]`: writes a database of N call records (default 1,000,000) to FILE,
/// as the pages rows use (see `pages.rs`), and says how long it took and how large it is.
fn gen_db(args: &[String]) -> ! {
    let (Some(path), n) = (args.first(), args.get(1)) else {
        eprintln!("bench: --gen-db FILE [N]");
        std::process::exit(2)
    };
    let n = match n.map(|n| n.parse::<u64>()) {
        None => 1_000_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("bench: --gen-db: N must be a positive whole number");
            std::process::exit(2)
        }
    };
    match pages::generate(Path::new(path), n) {
        Ok(g) => {
            eprintln!(
                "bench: wrote {} call records and {} objects in {:.1} s: {} ({} MB); biggest process {}, middle call {}, old call {}, shared argument {}",
                num(g.records as f64),
                num(g.blobs as f64),
                g.secs,
                path,
                num(g.file_bytes as f64 / 1e6),
                g.biggest,
                g.middle_call,
                g.old_call,
                g.shared_cid
            );
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("bench: --gen-db: {e}");
            std::process::exit(1)
        }
    }
}

/// A floor server in a child process (see `floor_server`).
struct FloorProc {
    child: Child,
    port: u16,
}

impl FloorProc {
    fn start(kind: &str) -> Res<FloorProc> {
        let exe = std::env::current_exe().map_err(err("current_exe"))?;
        let mut child = Command::new(exe)
            .args(["--floor-server", kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(err("spawn floor server"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(err("floor server port"))?;
        match line.trim().parse() {
            Ok(port) => Ok(FloorProc { child, port }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("floor server {kind}: no port"))
            }
        }
    }
}

impl Drop for FloorProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    all_cpus();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--floor-server") {
        floor_server(args.get(2).map_or("", String::as_str));
    }
    if args.get(1).map(String::as_str) == Some("--gen-db") {
        gen_db(&args[2..]);
    }
    let opts = match Opts::parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let load = match Load::read(&opts.load) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let bench = Bench {
        opts,
        load,
        runs: AtomicU64::new(0),
        floors: Mutex::new(Floors::default()),
    };
    let mut t = Table {
        rows: Vec::new(),
        baseline: bench.opts.baseline.is_some(),
        costs: Vec::new(),
        t0: Instant::now(),
    };
    type Step<'a> = (&'static str, Box<dyn Fn(&mut Table) + 'a>);
    // The memory rows go last, as their 1,000,000-call phase takes what is left of the budget;
    // they are printed first.
    let budget_end = t.t0 + bench.opts.budget;
    let steps: Vec<Step> = vec![
        (
            "throughput",
            Box::new(|t: &mut Table| {
                bench.rows_throughput(t, false);
            }),
        ),
        (
            "conditions",
            Box::new(|t: &mut Table| bench.rows_conditions(t)),
        ),
        ("MCP stdio", Box::new(|t: &mut Table| bench.rows_mcp(t))),
        (
            "pause",
            Box::new(|t: &mut Table| bench.rows_pause(t, false, None)),
        ),
        (
            "external",
            Box::new(|t: &mut Table| bench.rows_external(t, false, None)),
        ),
        ("start-up", Box::new(|t: &mut Table| bench.rows_startup(t))),
        ("--db", Box::new(|t: &mut Table| bench.rows_db(t))),
        (
            "content store",
            Box::new(|t: &mut Table| rows_store(&bench, t)),
        ),
        ("pickle", Box::new(|t: &mut Table| bench.rows_pickle(t))),
        ("search", Box::new(|t: &mut Table| bench.rows_search(t))),
        ("pages", Box::new(|t: &mut Table| bench.rows_pages(t))),
        (
            "memory",
            Box::new(|t: &mut Table| bench.rows_memory(t, budget_end)),
        ),
    ];
    for (name, step) in steps {
        if bench
            .opts
            .only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|x| x == name))
        {
            continue;
        }
        eprintln!("bench: [{:6.1} s] {name}", t.t0.elapsed().as_secs_f64());
        let s0 = Instant::now();
        let first = t.rows.len();
        step(&mut t);
        if name == "memory" {
            let rows: Vec<Row> = t.rows.drain(first..).collect();
            t.rows.splice(0..0, rows);
        }
        t.costs.push((name.to_string(), s0.elapsed().as_secs_f64()));
    }
    t.print();
}
