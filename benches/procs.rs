//! Child processes: servers, `cat`, the fixture MCP server; CPU pinning, signals, watchdogs,
//! memory readings and the request cycles run against a server.

use super::*;

/// Newline-delimited JSON-RPC over a child's stdin/stdout.
pub(super) struct Rpc {
    pub(super) stdin: ChildStdin,
    pub(super) stdout: BufReader<ChildStdout>,
    pub(super) next: u64,
    pub(super) line: String,
}

impl Rpc {
    pub(super) fn new(child: &mut Child) -> Rpc {
        Rpc {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: BufReader::new(child.stdout.take().expect("piped stdout")),
            next: 1,
            line: String::new(),
        }
    }

    pub(super) fn send(&mut self, msg: &Value) -> Res<()> {
        let mut bytes = serde_json::to_vec(msg).map_err(err("encode"))?;
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).map_err(err("write stdin"))
    }

    /// Sends a request and reads lines until the one carrying its id (notifications are skipped).
    pub(super) fn request(&mut self, method: &str, params: &Value) -> Res<Value> {
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

    pub(super) fn mcp_handshake(&mut self) -> Res<()> {
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "cideldill-bench", "version": "0"}});
        self.request("initialize", &init)?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }
}

pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) rpc: Option<Rpc>,
    /// The scratch directory (home, port file, stderr log), for servers.
    pub(super) dir: Option<PathBuf>,
    pub(super) port: u16,
}

impl Proc {
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn rpc(&mut self) -> &mut Rpc {
        self.rpc.as_mut().expect("a piped child")
    }

    pub(super) fn stderr_tail(&self) -> String {
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
    pub(super) fn piped(program: &Path, args: &[&str]) -> Res<Proc> {
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
    pub(super) fn server(bin: &Path, dir: &Path, args: &[String], mcp: bool) -> Res<Proc> {
        Proc::server_within(bin, dir, args, mcp, Duration::from_secs(10))
    }

    /// [`Proc::server`], waiting up to `within` for the port file (a large database is read
    /// before the port is bound).
    pub(super) fn server_within(
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

    pub(super) fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid())
    }

    pub(super) fn wait_exit(&mut self, within: Duration) -> bool {
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
pub(super) struct Pin;

/// CPUs this process may use, read before any pinning (the count follows the thread's mask).
pub(super) fn all_cpus() -> usize {
    static ALL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *ALL.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Pin {
    pub(super) fn to(cpus: &str) -> Res<Pin> {
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

pub(super) fn set_affinity(cpus: &str) -> bool {
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

pub(super) fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Kills a child if a measurement over its pipes outlives its deadline (a blocked read then
/// sees end of file).
pub(super) struct Watchdog {
    pub(super) tx: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    pub(super) fn new(pid: u32, limit: Duration) -> Watchdog {
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

pub(super) fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub(super) struct Ran {
    pub(super) done: u64,
    pub(super) elapsed: Duration,
    pub(super) error: Option<String>,
    pub(super) stopped: bool,
}

impl Ran {
    pub(super) fn rate(&self) -> f64 {
        self.done as f64 / self.elapsed.as_secs_f64()
    }
}

/// Call cycles `first..until` on `threads` threads, until done, the deadline, an error, or
/// `stop` (the RSS guard).
pub(super) fn run_cycles(
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
