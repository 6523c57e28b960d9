//! The floors: the trivial floor server (a thread per connection, a fixed small JSON answer,
//! then close), the tiny_http floor and nginx; and `bench --floor-server` / `--gen-db`, the
//! floor and database-generating modes of this program.

use super::*;

pub(super) struct Trivial {
    pub(super) port: u16,
    pub(super) stop: Arc<AtomicBool>,
}

pub(super) const TRIVIAL_ANSWER: &str =
    r#"{"call_id":"bench-1","action":"continue","status":"ok"}"#;

impl Trivial {
    pub(super) fn start() -> Res<Trivial> {
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
pub(super) struct TinyFloor {
    pub(super) server: Arc<tiny_http::Server>,
    pub(super) port: u16,
    pub(super) workers: Vec<thread::JoinHandle<()>>,
}

impl TinyFloor {
    pub(super) fn start(workers: usize) -> Res<TinyFloor> {
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
pub(super) struct Nginx {
    pub(super) child: Child,
    pub(super) dir: PathBuf,
    pub(super) port: u16,
}

impl Nginx {
    pub(super) fn start(bin: &Path, dir: &Path) -> Res<Nginx> {
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

    pub(super) fn log_tail(&self) -> String {
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
pub(super) fn nginx_conf(dir: &Path, port: u16, version: &str) -> String {
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

pub(super) fn trivial_serve(mut c: TcpStream) {
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

/// `bench --floor-server trivial|tiny`: serves a floor in its own process (so that it pays
/// the same process switches ours does), prints its port, and exits when stdin closes.
pub(super) fn floor_server(kind: &str) -> ! {
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
pub(super) fn gen_db(args: &[String]) -> ! {
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
pub(super) struct FloorProc {
    pub(super) child: Child,
    pub(super) port: u16,
}

impl FloorProc {
    pub(super) fn start(kind: &str) -> Res<FloorProc> {
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
