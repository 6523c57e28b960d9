//! The MCP stdio transport: `stdio-in` reads one JSON-RPC message per line from stdin and
//! answers the requests that cannot block itself. On a request that may block
//! (`Mcp::may_block`), the reading moves to an `mcp-req` thread of the MCP pool (so `ping` and
//! `notifications/cancelled` are read while a tool waits) and the thread that read the request
//! handles it: the request starts at once, and the reader's wake-up is off its path. A
//! `subscriptions/listen` (modern era) is registered by the reading thread and holds no thread:
//! the notifier writes its notifications, `notifications/cancelled` ends it. Stdout is one buffered writer behind a lock: responses are written by the
//! thread that made them, and `stdio-out` writes notifications (and the responses of requests
//! that asked for progress, so they follow their progress notifications). One message per line,
//! each flushed; nothing else in the program writes stdout. On stdin EOF the session's requests are
//! cancelled and joined, the session closes, and `on_eof` runs. A line longer than
//! `MAX_STDIO_LINE_BYTES` is answered with one parse error and the rest of it is skipped as it
//! streams in, in constant memory.

use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::{Mcp, Outgoing, Session, Transport};
use crate::jsonrpc::{self, Incoming, Message, Response, RpcError};
use crate::pool::Joiner;

/// Longest accepted input line; longer ones are answered with a parse error and skipped.
const MAX_LINE_BYTES: u64 = crate::limits::MAX_STDIO_LINE_BYTES;
/// A line buffer grown past this by a long line is freed after it, not kept for the next.
const KEEP_LINE_BUFFER_BYTES: usize = 1 << 20;

/// The running transport.
pub struct Stdio {
    /// Send `Outgoing::Close` here to stop the writer after it has drained.
    pub out_tx: Sender<Outgoing>,
    pub writer: JoinHandle<()>,
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
    let session = mcp.open_session(Transport::Stdio, Some(out_tx.clone()));
    let reader = Reader {
        mcp,
        session,
        input: io::BufReader::new(input),
        buf: Vec::new(),
        out: out_tx.clone(),
        output,
        running: Joiner::default(),
        on_eof: Box::new(on_eof),
    };
    // The first reading thread (reading may move to pool threads) is detached, never
    // joined: a blocking read cannot be interrupted portably.
    thread::Builder::new()
        .name("stdio-in".into())
        .spawn(move || reader.run())?;
    Ok(Stdio { out_tx, writer })
}

/// Stdout, shared by `stdio-out` and by `stdio-in` for the answers it gives itself.
type Out<W> = Mutex<io::BufWriter<W>>;

/// Writes a response as one line.
fn write_response<W: Write>(output: &Out<W>, resp: Response) {
    let text = Message::Response(resp).to_text();
    log::trace!("> stdio {}", jsonrpc::excerpt(&text));
    if let Err(e) = write_line(output, &text) {
        log::debug!("mcp stdio: stdout closed ({e})");
    }
}

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

/// The reading side of the session. Whichever thread holds it reads stdin; on a request that
/// may block, it hands itself to a pool thread (which goes on reading) and handles that request
/// in place, so the request starts without waiting for another thread to wake up.
struct Reader<R, W: Write> {
    mcp: Arc<Mcp>,
    session: Arc<Session>,
    input: io::BufReader<R>,
    buf: Vec<u8>,
    /// The session's outbox, drained by `stdio-out`.
    out: Sender<Outgoing>,
    output: Arc<Out<W>>,
    /// The requests still running, waited for at EOF.
    running: Joiner,
    on_eof: Box<dyn FnOnce() + Send>,
}

impl<R: Read + Send + 'static, W: Write + Send + 'static> Reader<R, W> {
    fn send(&self, msg: Message) {
        let _ = self.out.send(Outgoing::Message(msg.to_text()));
    }

    fn run(mut self) {
        loop {
            if self.buf.capacity() > KEEP_LINE_BUFFER_BYTES {
                self.buf = Vec::new();
            }
            self.buf.clear();
            match (&mut self.input)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut self.buf)
            {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    log::warn!("mcp stdio: reading stdin failed: {e}");
                    break;
                }
            }
            if self.buf.len() as u64 > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
                self.buf = Vec::new();
                let skipped = skip_line(&mut self.input);
                let err = RpcError::new(
                    jsonrpc::PARSE_ERROR,
                    format!("message longer than {MAX_LINE_BYTES} bytes"),
                );
                self.send(Message::Response(Response::err(None, err)));
                match skipped {
                    Ok(()) => continue,
                    Err(e) => {
                        log::warn!("mcp stdio: reading stdin failed: {e}");
                        break;
                    }
                }
            }
            let line = String::from_utf8_lossy(&self.buf);
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            log::trace!("< stdio {}", jsonrpc::excerpt(line));
            let incoming = jsonrpc::parse(line);
            if let Incoming::Single(Message::Request(req)) = &incoming {
                // The era follows the order of the input, even when the request moves on.
                self.mcp.settle_era(&self.session, req);
            }
            match incoming {
                Incoming::Single(Message::Request(req)) if !Mcp::may_block(&req) => {
                    // Answered at once and written here: no thread to wake, no hand-off. A
                    // listen stream is answered by notifications until it is cancelled.
                    if let Some(resp) = self.mcp.handle_request_now(&self.session, req) {
                        write_response(&self.output, resp);
                    }
                }
                Incoming::Single(Message::Request(req)) => {
                    let (mcp, session) = (Arc::clone(&self.mcp), Arc::clone(&self.session));
                    let (out, output) = (self.out.clone(), Arc::clone(&self.output));
                    let token = self.running.token();
                    match self.hand_off() {
                        Ok(()) => {
                            answer_blocking(&mcp, &session, req, &out, &output);
                            drop(token);
                            return;
                        }
                        Err((me, e)) => {
                            self = me;
                            log::error!("mcp stdio: cannot start a thread to read on: {e}");
                            let err = RpcError::new(
                                jsonrpc::INTERNAL_ERROR,
                                format!("the server cannot start a thread for this request: {e}"),
                            );
                            self.send(Message::Response(Response::err(Some(req.id), err)));
                        }
                    }
                }
                Incoming::Single(Message::Notification(n)) => {
                    // Notifications get no answer, but a panic must not end the transport.
                    let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.mcp.handle_notification(&self.session, &n)
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
                    let (mcp, session) = (Arc::clone(&self.mcp), Arc::clone(&self.session));
                    let out = self.out.clone();
                    let token = self.running.token();
                    let ran = self.mcp.pool.run(move || {
                        if let Some(array) = mcp.handle_batch(&session, items) {
                            let _ = out.send(Outgoing::Message(array.into_text()));
                        }
                        drop(token);
                    });
                    if let Err(e) = ran {
                        log::error!("mcp stdio: cannot start a request thread: {e}");
                        let err = RpcError::new(
                            jsonrpc::INTERNAL_ERROR,
                            format!("the server cannot start a thread for this batch: {e}"),
                        );
                        self.send(Message::Response(Response::err(None, err)));
                    }
                }
                Incoming::Invalid(resp) => self.send(Message::Response(resp)),
            }
        }
        self.finish();
    }

    /// Moves the reading to a pool thread; gives the reader back if none can be started.
    fn hand_off(self) -> Result<(), (Self, io::Error)> {
        let pool = self.mcp.pool.clone();
        let slot = Arc::new(Mutex::new(Some(self)));
        let theirs = Arc::clone(&slot);
        pool.run(move || {
            let reader = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(reader) = reader {
                reader.run();
            }
        })
        .map_err(|e| {
            let me = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            (me.expect("the job never ran"), e)
        })
    }

    /// EOF: nothing more can be answered usefully; release every waiting tool, wait for them,
    /// close the session.
    fn finish(self) {
        self.session.cancel_all();
        self.running.join();
        self.mcp.close_session(&self.session.id);
        log::info!("mcp stdio: stdin closed");
        (self.on_eof)();
    }
}

/// Reads and drops the rest of a line (through its newline, or to EOF), one buffer at a time.
pub(crate) fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                input.consume(n);
            }
        }
    }
}

/// Runs a request that may block and writes its response. Progress notifications go through
/// `stdio-out`; the response of a request that asked for them goes that way too, so it cannot
/// overtake them. Other responses are written directly.
fn answer_blocking<W: Write>(
    mcp: &Mcp,
    session: &Session,
    req: jsonrpc::Request,
    out: &Sender<Outgoing>,
    output: &Out<W>,
) {
    let via_writer = req.progress_token().is_some();
    if let Some(resp) = mcp.handle_request(session, req) {
        if via_writer {
            let _ = out.send(Outgoing::Message(Message::Response(resp).to_text()));
        } else {
            write_response(output, resp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipping_a_line_stops_after_its_newline_or_at_eof() {
        let mut input = io::BufReader::with_capacity(4, &b"abcdefghij\nnext\n"[..]);
        skip_line(&mut input).unwrap();
        let mut rest = String::new();
        input.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "next\n");
        let mut input = io::BufReader::with_capacity(4, &b"no newline at all"[..]);
        skip_line(&mut input).unwrap();
        assert!(input.fill_buf().unwrap().is_empty());
    }
}
