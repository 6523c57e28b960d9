//! The stdio transport: an upstream MCP server as a child process speaking newline-delimited
//! JSON-RPC on its stdin and stdout.
//!
//! Four threads per child: the *reader* feeds each stdout line to the [`Peer`] (lines that are
//! not JSON are logged and skipped: servers print banners), the *writer* owns the child's stdin
//! and writes what [`Link::send`] queued, the *stderr* thread copies each stderr line into our
//! log under the server's name, and the *waiter* owns the `Child`, reaps it the moment it exits
//! (so an exit is noticed at once and never leaves a zombie), then clears out whatever is left
//! in its process group. Stopping a child closes its stdin, waits, sends SIGTERM to its process
//! group, waits, then SIGKILL.
//!
//! Nothing but the writer ever blocks on the child's stdin. A child that stops reading it
//! (hostile, or wedged) fills the pipe, then the writer's queue of
//! [`UPSTREAM_WRITE_QUEUE`] messages; the next send fails at once and drops the
//! connection as broken. So a caller's timeout always fires, the reader thread (which answers
//! the server's own requests) never stalls, and stopping never waits for the writer: it drops
//! the queue's sender (the writer then closes stdin if it is idle) and signals the child, whose
//! death ends a write blocked on the pipe with `EPIPE`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use serde_json::Value;

use super::peer::{preview, Link, Peer};
use crate::limits::{UPSTREAM_MAX_LOG_LINE, UPSTREAM_STDIO_MAX_LINE, UPSTREAM_WRITE_QUEUE};
use crate::sys::{signal_group, Signal};

/// What to run.
#[derive(Clone, Debug)]
pub struct Spawn<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: Option<&'a Path>,
}

/// A running child process. Cloneable handle; [`Proc::stop`] ends it and its group.
pub struct Proc {
    name: String,
    pid: u32,
    /// The writer thread's queue (its stdin): dropped to close the child's stdin.
    writer: Mutex<Option<Sender<Vec<u8>>>>,
    /// Receives the exit status once the waiter reaped the child (then disconnects).
    exited: Receiver<ExitStatus>,
    status: Mutex<Option<ExitStatus>>,
    /// Disconnects when the waiter thread is done (child reaped, group cleared).
    done: Receiver<()>,
    stopping: AtomicBool,
    grace: Duration,
    /// The last few stderr lines, for connection errors.
    stderr_tail: Mutex<std::collections::VecDeque<String>>,
    /// Set when the child's stderr reached EOF (everything it wrote is in `stderr_tail`).
    stderr_done: AtomicBool,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits up to `timeout` for the child to exit; its status if it did.
    pub fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = *lock(&self.status) {
            return Some(s);
        }
        match self.exited.recv_timeout(timeout) {
            Ok(s) => {
                *lock(&self.status) = Some(s);
                Some(s)
            }
            Err(_) => *lock(&self.status),
        }
    }

    /// Ends the child: closes its stdin, waits `grace`, SIGTERM to its group, waits `grace`,
    /// SIGKILL; then waits until the waiter has reaped it and cleared its group. Blocks up to
    /// about three times `grace`.
    pub fn stop(&self) {
        self.stop_within(self.grace);
    }

    /// [`Proc::stop`] with its own grace period (shutdown is in a hurry: its own host gives
    /// it only a few seconds before SIGKILL, which would orphan the children).
    pub fn stop_within(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        // Never waits for the writer: an idle one closes stdin now, a blocked one dies with
        // the child.
        drop(lock(&self.writer).take());
        if self.wait_exit(grace).is_none() {
            log::info!(
                "upstream {}: no exit {} after closing stdin; sending SIGTERM to its process group",
                self.name,
                super::peer::show_duration(grace)
            );
            let _ = signal_group(self.pid, Signal::Term);
            if self.wait_exit(grace).is_none() {
                log::warn!(
                    "upstream {}: still running after SIGTERM; sending SIGKILL",
                    self.name
                );
                let _ = signal_group(self.pid, Signal::Kill);
            }
        }
        let _ = self
            .done
            .recv_timeout(self.grace * 3 + Duration::from_secs(1));
    }

    /// Why the child is gone, if it is: its exit status (waiting up to `timeout` for it) and the
    /// last lines it wrote to stderr.
    pub fn exit_report(&self, timeout: Duration) -> Option<String> {
        let status = self.wait_exit(timeout)?;
        // Its last words may still be in the pipe: give the stderr thread a moment to drain it.
        let until = Instant::now() + Duration::from_millis(300);
        while !self.stderr_done.load(Ordering::SeqCst) && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        let mut out = format!("the server process exited ({})", describe(status));
        let tail = lock(&self.stderr_tail);
        if !tail.is_empty() {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            out.push_str(&format!("; its stderr ended with: {}", lines.join(" | ")));
        }
        Some(out)
    }

    /// Whether the waiter is done (child reaped and its group cleared).
    pub fn is_done(&self) -> bool {
        matches!(
            self.done.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }
}

/// The [`Link`] writing to the child's stdin.
struct StdioLink {
    proc: Arc<Proc>,
    /// Set by the first `close`: one stopper thread per child, however many senders find the
    /// queue full at once.
    closing: AtomicBool,
}

impl Link for StdioLink {
    fn send(&self, peer: &Arc<Peer>, msg: &Value) -> Result<(), String> {
        if peer.is_closed() || self.closing.load(Ordering::SeqCst) {
            // Dropped already (a server flooding us with requests must not make each answer
            // try again).
            return Err("the connection is closed".to_owned());
        }
        let mut line = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let queued = match lock(&self.proc.writer).as_ref() {
            Some(tx) => tx.try_send(line),
            None => return Err("the server's stdin is closed".to_owned()),
        };
        match queued {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(_)) => Err("the server's stdin is closed".to_owned()),
            Err(TrySendError::Full(_)) => {
                let why = format!(
                    "the server does not read its input ({UPSTREAM_WRITE_QUEUE} messages \
                     wait to be written to its stdin); the connection is dropped as broken"
                );
                log::warn!("upstream {}: {why}", self.proc.name);
                peer.shutdown(&why);
                Err(why)
            }
        }
    }

    fn close(&self) {
        if self.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        let proc = self.proc.clone();
        // Stopping waits for the child; do it off the caller's thread. Whoever must know the
        // child is gone (shutdown) waits on `Proc::stop` itself.
        let _ = thread::Builder::new()
            .name(format!("upstream-{}-stop", proc.name))
            .spawn(move || proc.stop());
    }
}

/// Spawns the server for `peer`, starts its threads and attaches the link.
pub fn spawn(peer: &Arc<Peer>, spec: &Spawn, grace: Duration) -> Result<Arc<Proc>, String> {
    let mut cmd = Command::new(spec.command);
    cmd.args(spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", spec.command))?;
    let pid = child.id();
    let name = peer.name.clone();
    log::info!("upstream {name}: started {:?} (pid {pid})", spec.command);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (exit_tx, exit_rx) = bounded(1);
    let (done_tx, done_rx) = bounded::<()>(0);
    let (write_tx, write_rx) = bounded::<Vec<u8>>(UPSTREAM_WRITE_QUEUE);
    let proc = Arc::new(Proc {
        name: name.clone(),
        pid,
        writer: Mutex::new(Some(write_tx)),
        exited: exit_rx,
        status: Mutex::new(None),
        done: done_rx,
        stopping: AtomicBool::new(false),
        grace,
        stderr_tail: Mutex::new(std::collections::VecDeque::new()),
        stderr_done: AtomicBool::new(false),
    });

    // The waiter owns the child.
    let wpeer = peer.clone();
    let wproc = proc.clone();
    let waiter = thread::Builder::new()
        .name(format!("upstream-{name}-wait"))
        .spawn(move || {
            let _done = done_tx;
            let status = child.wait();
            let reason = match &status {
                Ok(s) => {
                    let _ = exit_tx.send(*s);
                    format!("the server process exited ({})", describe(*s))
                }
                Err(e) => format!("the server process could not be waited for: {e}"),
            };
            if wproc.stopping.load(Ordering::SeqCst) {
                log::info!("upstream {}: stopped ({reason})", wproc.name);
            } else {
                log::warn!("upstream {}: {reason}", wproc.name);
            }
            // The writer ends once its queue is empty (or its write fails: nobody reads).
            drop(lock(&wproc.writer).take());
            wpeer.closed(&reason);
            clear_group(&wproc.name, pid, grace);
        });
    if let Err(e) = waiter {
        return Err(format!("cannot start the waiter thread: {e}"));
    }

    if let Some(pipe) = stdin {
        let wpeer = Arc::downgrade(peer);
        let wname = name.clone();
        thread::Builder::new()
            .name(format!("upstream-{name}-write"))
            .spawn(move || write_messages(&wname, &wpeer, pipe, &write_rx))
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
    }

    if let Some(out) = stdout {
        let rpeer = peer.clone();
        let rproc = proc.clone();
        thread::Builder::new()
            .name(format!("upstream-{name}-read"))
            .spawn(move || {
                let end = read_messages(&rpeer, out);
                // Prefer the exit status as the reason when the process is exiting.
                let reason = match rproc.wait_exit(Duration::from_millis(500)) {
                    Some(s) => format!("the server process exited ({})", describe(s)),
                    None => end,
                };
                rpeer.closed(&reason);
            })
            .map_err(|e| format!("cannot start the reader thread: {e}"))?;
    }
    if let Some(err) = stderr {
        let eproc = proc.clone();
        thread::Builder::new()
            .name(format!("upstream-{name}-stderr"))
            .spawn(move || {
                copy_stderr(&eproc, err);
                eproc.stderr_done.store(true, Ordering::SeqCst);
            })
            .map_err(|e| format!("cannot start the stderr thread: {e}"))?;
    }
    peer.set_link(Box::new(StdioLink {
        proc: proc.clone(),
        closing: AtomicBool::new(false),
    }));
    Ok(proc)
}

/// The writer thread: writes each queued line to the child's stdin until the queue's sender is
/// dropped (then closing stdin) or a write fails (then the connection is broken: it is shut).
/// Holds the peer weakly, so an idle writer keeps nothing alive.
fn write_messages(name: &str, peer: &Weak<Peer>, mut pipe: ChildStdin, queue: &Receiver<Vec<u8>>) {
    for line in queue {
        if let Err(e) = pipe.write_all(&line).and_then(|()| pipe.flush()) {
            drop(pipe);
            if let Some(peer) = peer.upgrade() {
                if !peer.is_closed() {
                    log::warn!("upstream {name}: cannot write to the server's stdin: {e}");
                    peer.shutdown(&format!("cannot write to the server's stdin: {e}"));
                }
            }
            return;
        }
    }
}

/// After the leader exited: SIGTERM whatever is left in its group, then SIGKILL after `grace`.
fn clear_group(name: &str, pgid: u32, grace: Duration) {
    if !matches!(signal_group(pgid, Signal::Probe), Ok(true)) {
        return;
    }
    log::info!("upstream {name}: terminating processes left in its process group");
    let _ = signal_group(pgid, Signal::Term);
    if group_gone(pgid, grace) {
        return;
    }
    log::warn!("upstream {name}: processes of its group survived SIGTERM; sending SIGKILL");
    let _ = signal_group(pgid, Signal::Kill);
    // Orphans are reaped by init, not by us: wait a little for that, without insisting.
    group_gone(pgid, grace);
}

/// Polls until group `pgid` has no members, up to `timeout`.
fn group_gone(pgid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !matches!(signal_group(pgid, Signal::Probe), Ok(true)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn describe(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// Reads lines until EOF; returns why reading ended.
fn read_messages(peer: &Arc<Peer>, out: impl Read) -> String {
    let mut reader = BufReader::with_capacity(64 * 1024, out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, UPSTREAM_STDIO_MAX_LINE) {
            Ok(Line::Eof) => return "the server closed its stdout".to_owned(),
            Ok(Line::TooLong(n)) => log::error!(
                "upstream {}: skipped a stdout line of {n} bytes (limit {UPSTREAM_STDIO_MAX_LINE})",
                peer.name
            ),
            Ok(Line::Complete) => {
                let text = trim_line(&line);
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_slice::<Value>(text) {
                    Ok(msg) => peer.incoming(msg),
                    Err(_) => log::warn!(
                        "upstream {}: skipped a stdout line that is not JSON: {}",
                        peer.name,
                        preview(&String::from_utf8_lossy(text))
                    ),
                }
            }
            Err(e) => return format!("reading the server's stdout failed: {e}"),
        }
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &line[..end]
}

enum Line {
    Complete,
    Eof,
    TooLong(usize),
}

/// Reads one line into `buf`, discarding (and counting) a line longer than `max`.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    let mut total = 0usize;
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if total == 0 {
                Line::Eof
            } else if too_long {
                Line::TooLong(total)
            } else {
                Line::Complete
            });
        }
        let (take, found) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        total += take;
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(take);
        if found {
            return Ok(if too_long {
                Line::TooLong(total)
            } else {
                Line::Complete
            });
        }
    }
}

fn copy_stderr(proc: &Proc, err: impl Read) {
    let name = &proc.name;
    let mut reader = BufReader::new(err);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, UPSTREAM_MAX_LOG_LINE) {
            Ok(Line::Eof) | Err(_) => return,
            Ok(Line::TooLong(n)) => log::info!("upstream {name} (stderr): <a line of {n} bytes>"),
            Ok(Line::Complete) => {
                let text = String::from_utf8_lossy(trim_line(&line));
                if !text.trim().is_empty() {
                    log::info!("upstream {name} (stderr): {text}");
                    let mut tail = lock(&proc.stderr_tail);
                    if tail.len() == 3 {
                        tail.pop_front();
                    }
                    tail.push_back(preview(text.trim()));
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_line_splits_skips_overlong_lines_and_ends() {
        let data = b"short\nthis line is far too long\nok\r\nlast".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            buf.clear();
            match read_line(&mut r, &mut buf, 10).unwrap() {
                Line::Eof => break,
                Line::TooLong(n) => got.push(format!("<{n}>")),
                Line::Complete => got.push(String::from_utf8_lossy(trim_line(&buf)).into_owned()),
            }
        }
        assert_eq!(got, ["short", "<26>", "ok", "last"]);
    }

    /// A child running `sh -c script`.
    fn sh(peer: &Arc<Peer>, script: &str) -> Arc<Proc> {
        let args = vec!["-c".to_owned(), script.to_owned()];
        let spec = Spawn {
            command: "sh",
            args: &args,
            env: &[],
            cwd: None,
        };
        spawn(peer, &spec, Duration::from_millis(200)).unwrap()
    }

    #[test]
    fn a_child_that_ignores_stdin_eof_is_terminated_with_its_group() {
        let peer = Peer::new("t", |_| {});
        let proc = sh(&peer, "sleep 60 & sleep 60");
        let pid = proc.pid();
        let t0 = Instant::now();
        proc.stop();
        assert!(proc.is_done());
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(group_gone(pid, Duration::from_secs(5)), "group left behind");
        assert!(peer.is_closed());
    }

    // A child that never reads its stdin: sends never block (the pipe, then the queue fill),
    // the first refused one drops the connection, and stopping does not wait for the writer
    // stuck on the full pipe.
    #[test]
    fn a_child_that_never_reads_fails_sends_at_once_and_still_stops() {
        let peer = Peer::new("t", |_| {});
        let proc = sh(&peer, "exec sleep 60");
        let big =
            serde_json::json!({"jsonrpc": "2.0", "method": "x", "params": "y".repeat(64 * 1024)});
        let t0 = Instant::now();
        let mut refused = None;
        for i in 0..UPSTREAM_WRITE_QUEUE + 8 {
            if let Err(e) = peer.send_for_test(&big) {
                refused = Some((i, e));
                break;
            }
        }
        let (i, why) = refused.expect("a send was refused");
        assert!(i >= UPSTREAM_WRITE_QUEUE, "refused after {i} sends: {why}");
        assert!(why.contains("does not read its input"), "{why}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(peer.is_closed(), "the connection is dropped as broken");
        let t0 = Instant::now();
        proc.stop();
        assert!(proc.is_done());
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_missing_command_is_a_clear_error() {
        let peer = Peer::new("t", |_| {});
        let spec = Spawn {
            command: "/nonexistent/cideldill-no-such-server",
            args: &[],
            env: &[],
            cwd: None,
        };
        let err = spawn(&peer, &spec, Duration::from_millis(100))
            .err()
            .unwrap();
        assert!(err.contains("cannot start"), "{err}");
    }
}
