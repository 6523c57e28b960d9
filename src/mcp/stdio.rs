//! The MCP stdio transport: `stdio-in` reads one JSON-RPC message per line from stdin, answers
//! the requests that cannot block itself, and runs each one that may block (`Mcp::may_block`) on
//! its own scoped `mcp-req` thread (so `ping` and `notifications/cancelled` are read while a
//! tool waits); `stdio-out` is the only writer of stdout in the whole program and
//! writes one message per line, flushing each. On stdin EOF the session's requests are
//! cancelled and joined, the session closes, and `on_eof` runs.

use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::{Mcp, Outgoing};
use crate::jsonrpc::{self, Incoming, Message, Response, RpcError};

/// Longest accepted input line; longer ones are answered with a parse error and skipped.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// The running transport.
pub struct Stdio {
    /// Send `Outgoing::Close` here to stop the writer after it has drained.
    pub out_tx: Sender<Outgoing>,
    pub writer: JoinHandle<()>,
    /// Not joined unless stdin reached EOF: a blocking read cannot be interrupted portably.
    pub reader: JoinHandle<()>,
}

/// Starts both threads over the process's stdin and stdout.
pub fn spawn_stdio(mcp: Arc<Mcp>, on_eof: impl FnOnce() + Send + 'static) -> io::Result<Stdio> {
    spawn_with(mcp, io::stdin(), io::stdout(), on_eof)
}

/// Starts both threads over any reader and writer (tests use pipes).
pub fn spawn_with<R, W>(
    mcp: Arc<Mcp>,
    input: R,
    output: W,
    on_eof: impl FnOnce() + Send + 'static,
) -> io::Result<Stdio>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (out_tx, out_rx) = unbounded();
    let output = Arc::new(Mutex::new(io::BufWriter::new(output)));
    let out = Arc::clone(&output);
    let writer = thread::Builder::new()
        .name("stdio-out".into())
        .spawn(move || write_loop(&out, &out_rx))?;
    let session_tx = out_tx.clone();
    let reader = thread::Builder::new()
        .name("stdio-in".into())
        .spawn(move || {
            read_loop(&mcp, io::BufReader::new(input), session_tx, &output);
            on_eof();
        })?;
    Ok(Stdio {
        out_tx,
        writer,
        reader,
    })
}

/// Stdout, shared by `stdio-out` and by `stdio-in` for the answers it gives itself.
type Out<W> = Mutex<io::BufWriter<W>>;

/// Writes one message as one line and flushes it.
fn write_line<W: Write>(output: &Out<W>, text: &str) -> io::Result<()> {
    // A panic while writing leaves at worst a partial line; the stream is lost either way.
    let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
    out.write_all(text.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush())
}

fn write_loop<W: Write>(output: &Out<W>, rx: &Receiver<Outgoing>) {
    while let Ok(item) = rx.recv() {
        match item {
            Outgoing::Message(text) => {
                if let Err(e) = write_line(output, &text) {
                    // A closed stdout means the client left: a normal end.
                    log::debug!("mcp stdio: stdout closed ({e})");
                    return;
                }
            }
            Outgoing::Close => break,
        }
    }
}

fn read_loop<R: BufRead, W: Write>(
    mcp: &Mcp,
    mut input: R,
    out: Sender<Outgoing>,
    output: &Out<W>,
) {
    let session = mcp.open_session("stdio", Some(out.clone()));
    let send = |msg: Message| {
        let _ = out.send(Outgoing::Message(msg.to_text()));
    };
    thread::scope(|scope| {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match (&mut input)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut buf)
            {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    log::warn!("mcp stdio: reading stdin failed: {e}");
                    break;
                }
            }
            if buf.len() as u64 > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                // Skip the rest of the oversized line.
                let mut rest = Vec::new();
                let _ = input.read_until(b'\n', &mut rest);
                let err = RpcError::new(
                    jsonrpc::PARSE_ERROR,
                    format!("message longer than {MAX_LINE_BYTES} bytes"),
                );
                send(Message::Response(Response::err(None, err)));
                continue;
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            log::trace!("< stdio {}", jsonrpc::excerpt(line));
            match jsonrpc::parse(line) {
                Incoming::Single(Message::Request(req)) if !Mcp::may_block(&req) => {
                    // Answered at once and written here: no thread to start, no hand-off.
                    if let Some(resp) = mcp.handle_request(&session, req) {
                        let text = Message::Response(resp).to_text();
                        log::trace!("> stdio {}", jsonrpc::excerpt(&text));
                        if let Err(e) = write_line(output, &text) {
                            log::debug!("mcp stdio: stdout closed ({e})");
                        }
                    }
                }
                Incoming::Single(Message::Request(req)) => {
                    let session = &session;
                    let send = &send;
                    let spawned = thread::Builder::new().name("mcp-req".into()).spawn_scoped(
                        scope,
                        move || {
                            if let Some(resp) = mcp.handle_request(session, req) {
                                send(Message::Response(resp));
                            }
                        },
                    );
                    if let Err(e) = spawned {
                        log::error!("mcp stdio: cannot start a request thread: {e}");
                    }
                }
                Incoming::Single(Message::Notification(n)) => {
                    // Notifications get no answer, but a panic must not end the transport.
                    let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        mcp.handle_notification(&session, &n)
                    }));
                    if handled.is_err() {
                        log::error!("mcp stdio: notification {} panicked", n.method);
                    }
                }
                Incoming::Single(Message::Response(r)) => {
                    log::debug!(
                        "mcp stdio: ignoring a response to {:?} (we send no requests)",
                        r.id
                    );
                }
                Incoming::Batch(items) => {
                    let session = &session;
                    let out = &out;
                    let spawned = thread::Builder::new().name("mcp-req".into()).spawn_scoped(
                        scope,
                        move || {
                            if let Some(array) = mcp.handle_batch(session, items) {
                                let _ = out.send(Outgoing::Message(array.to_string()));
                            }
                        },
                    );
                    if let Err(e) = spawned {
                        log::error!("mcp stdio: cannot start a request thread: {e}");
                    }
                }
                Incoming::Invalid(resp) => send(Message::Response(resp)),
            }
        }
        // EOF: nothing more can be answered usefully; release every waiting tool.
        session.cancel_all();
    });
    mcp.close_session(&session.id);
    log::info!("mcp stdio: stdin closed");
}
