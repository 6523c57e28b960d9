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

mod floors;
mod load;
mod opts;
mod pages;
mod procs;
mod search;
mod stats;
mod store;
use floors::*;
use load::{call, cycle, err, find, http, http_within, now, Load, Res, HTTP_TIMEOUT};
use opts::*;
use procs::*;
use stats::*;
use store::*;

/// Stops a call cycle load when the server's RSS passes this.
const RSS_GUARD_KIB: u64 = 4 * 1024 * 1024;
const THREADS: [usize; 3] = [1, 4, 16];

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
