//! The front door: our own accept loop, which owns the client sockets. `http-door` threads
//! accept connections (the last idle one starts another first), read each request head (at most
//! 64 KiB, else 431; within `HEAD_TIMEOUT`, else 408), refuse connections beyond the cap (503)
//! and close idle keep-alive connections after the idle timeout. A request answered with a
//! `Reply` (the route table, pages, refusals) is answered right here, on the thread that read
//! it: its body is read up to the cap (a declared body over `--max-body-mb` is not read: 413,
//! and the connection closes). A request whose handler writes to the socket itself (MCP over
//! HTTP, the event stream, the JSON Lines export) or whose body is chunked is forwarded on a
//! new connection to tiny_http's private Unix socket with `Connection: close`, and the answer
//! copied back as it comes; a declared body over the cap is not forwarded (tiny_http gets
//! `X-Cideldill-Declared-Length` instead, and `read_body` answers 413). So no tiny_http thread
//! ever waits on a client, and every tiny_http connection ends with its answer.

use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Decision, Face, Reply};
use crate::limits::{
    BODY_STALL_TIMEOUT, HEAD_TIMEOUT, MAX_REQUEST_HEAD_BYTES, WRITE_STALL_TIMEOUT,
};

/// The header that stands for a declared body over the cap (the door drops it from clients).
pub const DECLARED_LENGTH: &str = "X-Cideldill-Declared-Length";

/// Door threads kept waiting in `accept` when the server is quiet.
const MAX_IDLE_ACCEPTORS: usize = 4;

/// The stack of a thread that copies a request body: it only moves bytes through a buffer on
/// the heap.
const COPIER_STACK: usize = 256 * 1024;

/// Pause after `accept` failed for want of file descriptors (the connection waits in the
/// listen backlog meanwhile).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Bodies up to this size are read whole before tiny_http sees the request (larger ones are
/// copied by a helper thread while the answer is relayed). Kept well under a Unix socket's
/// send buffer, so writing head and body never blocks.
const INLINE_BODY_MAX: usize = 32 * 1024;

/// Read buffer size for the request side and for answers.
const BUF_SIZE: usize = 16 * 1024;

/// Longest answer head read before relaying starts regardless.
const MAX_ANSWER_HEAD: usize = 64 * 1024;

/// On a close that leaves request bytes unread, how long (and how much) the door keeps
/// reading so the client gets the answer rather than a reset.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 1 << 20;

/// What the door enforces.
#[derive(Clone, Debug)]
pub struct DoorLimits {
    pub max_body_bytes: u64,
    pub max_connections: usize,
    pub idle_timeout: Duration,
}

/// The running front door (cheap to clone).
#[derive(Clone)]
pub struct Door {
    inner: Arc<Inner>,
}

struct Inner {
    face: Arc<Face>,
    listener: TcpListener,
    /// tiny_http's Unix socket.
    backend: PathBuf,
    limits: DoorLimits,
    /// Connections being served (refused ones too while they are answered).
    open: AtomicUsize,
    /// Threads waiting in `accept`.
    idle: AtomicUsize,
    closing: AtomicBool,
    /// When a refusal or a failed `accept` was last logged (one warning a second at most).
    warned: Mutex<Option<Instant>>,
}

/// Starts the door on `listener`, answering with `face` and forwarding to tiny_http's socket
/// at `backend`.
pub fn spawn_door(
    face: Arc<Face>,
    listener: TcpListener,
    backend: PathBuf,
    limits: DoorLimits,
) -> io::Result<Door> {
    let inner = Arc::new(Inner {
        face,
        listener,
        backend,
        limits,
        open: AtomicUsize::new(0),
        idle: AtomicUsize::new(0),
        closing: AtomicBool::new(false),
        warned: Mutex::new(None),
    });
    for _ in 0..2 {
        spawn_acceptor(&inner)?;
    }
    Ok(Door { inner })
}

fn spawn_acceptor(inner: &Arc<Inner>) -> io::Result<()> {
    inner.idle.fetch_add(1, Ordering::SeqCst);
    let me = Arc::clone(inner);
    let spawned = thread::Builder::new()
        .name("http-door".into())
        .spawn(move || acceptor_loop(&me));
    if spawned.is_err() {
        inner.idle.fetch_sub(1, Ordering::SeqCst);
    }
    spawned.map(|_| ())
}

impl Door {
    /// Starts a thread in `accept` if none waits there (starting one failed earlier).
    pub fn ensure_acceptor(&self) {
        if self.inner.idle.load(Ordering::SeqCst) == 0 && !self.inner.closing.load(Ordering::SeqCst)
        {
            match spawn_acceptor(&self.inner) {
                Ok(()) => log::debug!("http: started a door thread to wait for connections"),
                Err(err) => log::error!("http: could not start a door thread: {err}"),
            }
        }
    }

    /// Stops taking connections and requests: idle door threads end, a connection that sends
    /// another request is answered 503 and closed; answers in flight are still relayed.
    pub fn close(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let Ok(mut addr) = self.inner.listener.local_addr() else {
            return;
        };
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        // Each thread in `accept` wakes up on a connection of our own, sees `closing` and ends.
        for _ in 0..self.inner.idle.load(Ordering::SeqCst) {
            let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(100));
        }
    }
}

/// One door thread: accept a connection, serve it to its end, accept again.
fn acceptor_loop(inner: &Arc<Inner>) {
    let mut bufs = Buffers::default();
    loop {
        let accepted = inner.listener.accept();
        let now_idle = inner.idle.fetch_sub(1, Ordering::SeqCst) - 1;
        if inner.closing.load(Ordering::SeqCst) {
            break;
        }
        match accepted {
            Ok((tcp, _)) => {
                if now_idle == 0 {
                    // Keep one thread in accept while this one serves.
                    if let Err(err) = spawn_acceptor(inner) {
                        log::error!("http: could not start a door thread: {err}");
                    }
                }
                let open = inner.open.fetch_add(1, Ordering::SeqCst) + 1;
                if open > inner.limits.max_connections {
                    inner.warn_throttled(&format!(
                        "{} connections open, the limit (--max-connections): answering 503",
                        inner.limits.max_connections
                    ));
                    refuse_busy(&tcp, inner.limits.max_connections);
                } else {
                    serve(inner, tcp, &mut bufs);
                }
                inner.open.fetch_sub(1, Ordering::SeqCst);
                bufs.reset();
            }
            Err(err) => {
                if out_of_resources(&err) {
                    inner.warn_throttled(&format!(
                        "cannot accept connections ({} open): {err}; retrying",
                        inner.open.load(Ordering::SeqCst)
                    ));
                    thread::sleep(ACCEPT_BACKOFF);
                } else {
                    log::debug!("http: accept failed: {err}");
                }
            }
        }
        if inner.idle.load(Ordering::SeqCst) >= MAX_IDLE_ACCEPTORS
            || inner.closing.load(Ordering::SeqCst)
        {
            break;
        }
        inner.idle.fetch_add(1, Ordering::SeqCst);
    }
}

impl Inner {
    /// Logs a warning, at most one a second (a flood of connections must not flood the log).
    fn warn_throttled(&self, what: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *warned = Some(Instant::now());
            log::warn!("http: {what}");
        }
    }
}

/// Out of file descriptors or kernel memory: waiting helps.
fn out_of_resources(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// A door thread's buffers, kept from one connection to the next.
#[derive(Default)]
struct Buffers {
    /// Bytes read from the client and not yet forwarded.
    req: Buf,
    /// The head forwarded to tiny_http.
    forward: Vec<u8>,
    /// The answer being relayed.
    answer: Vec<u8>,
}

impl Buffers {
    /// Empties the buffers between connections, giving back what a large head made them grow to.
    fn reset(&mut self) {
        self.req.start = 0;
        self.req.end = 0;
        if self.req.data.len() > BUF_SIZE {
            self.req.data = Vec::new();
        }
        if self.answer.len() > BUF_SIZE {
            self.answer = Vec::new();
        }
        self.forward.clear();
        self.forward.shrink_to(BUF_SIZE);
    }
}

/// Received bytes: `data[start..end]` are still to be used.
#[derive(Default)]
struct Buf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl Buf {
    fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// One read, keeping at most `max` bytes: 0 at end of stream.
    fn read_from(&mut self, mut r: impl Read, max: usize) -> io::Result<usize> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.data.len() {
                let grown = (self.data.len() * 2).clamp(BUF_SIZE, max.max(BUF_SIZE));
                if grown <= self.data.len() {
                    return Err(io::Error::other("request buffer full"));
                }
                self.data.resize(grown, 0);
            }
        }
        let n = r.read(&mut self.data[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

/// A client connection and the read timeout set on it.
struct Conn {
    tcp: TcpStream,
    timeout: Option<Duration>,
}

impl Conn {
    fn read_timeout(&mut self, t: Duration) -> io::Result<()> {
        let t = t.max(Duration::from_millis(1));
        if self.timeout != Some(t) {
            self.tcp.set_read_timeout(Some(t))?;
            self.timeout = Some(t);
        }
        Ok(())
    }

    /// Reads into `buf` with timeout `t`: `Ok(false)` at the end of the stream.
    fn fill(&mut self, buf: &mut Buf, t: Duration, max: usize) -> io::Result<bool> {
        self.read_timeout(t)?;
        loop {
            match buf.read_from(&self.tcp, max) {
                Ok(n) => return Ok(n > 0),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Serves one connection: request after request until one side closes.
fn serve(inner: &Inner, tcp: TcpStream, bufs: &mut Buffers) {
    // Answers are relayed in pieces as they come; Nagle's algorithm would hold the later ones.
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_write_timeout(Some(WRITE_STALL_TIMEOUT));
    let mut conn = Conn { tcp, timeout: None };
    let mut wait = HEAD_TIMEOUT;
    loop {
        let head_len = match read_head(&mut conn, &mut bufs.req, wait) {
            Ok(n) => n,
            Err(HeadError::Closed) => return,
            Err(HeadError::TimedOut) => {
                log::debug!("http: a request head did not arrive within {HEAD_TIMEOUT:?} (408)");
                let msg = format!("the request head did not arrive within {HEAD_TIMEOUT:?}");
                return fail(conn, 408, "Request Timeout", "request_timeout", &msg);
            }
            Err(HeadError::TooLarge) => {
                log::debug!("http: a request head over {MAX_REQUEST_HEAD_BYTES} bytes (431)");
                let msg = format!(
                    "the request line and headers exceed {} KiB",
                    MAX_REQUEST_HEAD_BYTES / 1024
                );
                return fail(
                    conn,
                    431,
                    "Request Header Fields Too Large",
                    "request_header_too_large",
                    &msg,
                );
            }
        };
        match exchange(inner, &mut conn, bufs, head_len) {
            Next::Request => wait = inner.limits.idle_timeout,
            Next::Close { unread } => return close(conn, unread || bufs.req.len() > 0),
        }
    }
}

enum HeadError {
    /// The client closed, went silent before sending anything, or failed.
    Closed,
    TimedOut,
    TooLarge,
}

/// Reads until a whole request head is buffered; returns its length (the blank line included).
/// `wait` bounds the wait for its first byte; `HEAD_TIMEOUT` the rest.
fn read_head(conn: &mut Conn, buf: &mut Buf, wait: Duration) -> Result<usize, HeadError> {
    let max = MAX_REQUEST_HEAD_BYTES + INLINE_BODY_MAX;
    let mut scanned = 0;
    let mut deadline = None;
    loop {
        // Blank lines before a request line are ignored (RFC 9112 §2.2).
        while buf.filled().starts_with(b"\r\n") || buf.filled().starts_with(b"\n") {
            let n = if buf.filled()[0] == b'\r' { 2 } else { 1 };
            buf.consume(n);
            scanned = 0;
        }
        let have = buf.filled();
        if let Some(i) = find(&have[scanned..], b"\r\n\r\n") {
            let end = scanned + i + 4;
            return if end > MAX_REQUEST_HEAD_BYTES {
                Err(HeadError::TooLarge)
            } else {
                Ok(end)
            };
        }
        if have.len() >= MAX_REQUEST_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        let empty = have.is_empty();
        scanned = have.len().saturating_sub(3);
        let timeout = if empty {
            wait
        } else {
            let until = *deadline.get_or_insert_with(|| Instant::now() + HEAD_TIMEOUT);
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HeadError::TimedOut);
            }
            left
        };
        match conn.fill(buf, timeout, max) {
            Ok(true) => {}
            Ok(false) => return Err(HeadError::Closed),
            Err(e) if is_timeout(&e) && !empty => return Err(HeadError::TimedOut),
            Err(_) => return Err(HeadError::Closed),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The request body, as its head declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    /// `Transfer-Encoding`: tiny_http decodes it and the handler caps it; its end is not
    /// tracked here, so the connection closes after the answer.
    Chunked,
}

/// What the door needs to know of a request head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    url: String,
    body: Body,
    /// A declared body over the cap: not read, not forwarded.
    over_cap: Option<u64>,
    /// The connection may carry another request after this one.
    keep_alive: bool,
    expect_continue: bool,
    /// The values of `FACE_HEADERS`, in their order.
    seen: [Option<String>; 8],
}

/// The headers the HTTP face reads (`http::Head`).
const FACE_HEADERS: [&str; 8] = [
    "Host",
    "Origin",
    "Accept",
    "Access-Control-Request-Method",
    "Last-Event-ID",
    "Sec-Fetch-Site",
    "Sec-Fetch-Mode",
    "Sec-Fetch-Dest",
];

impl Head {
    fn header(&self, name: &str) -> Option<String> {
        let i = FACE_HEADERS.iter().position(|h| *h == name)?;
        self.seen[i].clone()
    }

    fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }
}

/// Headers the door consumes or replaces: hop-by-hop ones (it is the hop), and its own marker.
const DROPPED: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "expect",
    "x-cideldill-declared-length",
];

/// Parses a request head (ending with its blank line) and writes into `out` the head tiny_http
/// gets if the request is forwarded: the same request line and headers, hop-by-hop ones
/// dropped, `Connection: close`.
fn parse_head(raw: &[u8], max_body: u64, out: &mut Vec<u8>) -> Result<Head, &'static str> {
    const BARE_LF: &str = "a line of the request head ends without CR";
    out.clear();
    let text = &raw[..raw.len() - 2];
    let mut lines = text.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let request_line = lines.next().ok_or("no request line")?;
    out.extend_from_slice(request_line);
    out.push(b'\n');
    let request_line = request_line.strip_suffix(b"\r").ok_or(BARE_LF)?;
    let request_line =
        std::str::from_utf8(request_line).map_err(|_| "the request line is not text")?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(url), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line");
    };
    if method.is_empty() || url.is_empty() {
        return Err("malformed request line");
    }
    let mut seen: [Option<String>; 8] = Default::default();
    let (mut length, mut chunked, mut close, mut expect_continue) = (None, false, false, false);
    for line in lines {
        let bare = line.strip_suffix(b"\r").ok_or(BARE_LF)?;
        let Some(colon) = bare.iter().position(|&b| b == b':') else {
            return Err("a header line without a colon");
        };
        let name = &bare[..colon];
        let value = bare[colon + 1..].trim_ascii();
        if let Some(i) = FACE_HEADERS
            .iter()
            .position(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            seen[i].get_or_insert_with(|| String::from_utf8_lossy(value).into_owned());
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_length(value).ok_or("invalid Content-Length")?;
            if length.is_some_and(|m| m != n) {
                return Err("conflicting Content-Length headers");
            }
            length = Some(n);
            continue;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        } else if name.eq_ignore_ascii_case(b"expect")
            && value.eq_ignore_ascii_case(b"100-continue")
        {
            expect_continue = true;
        } else if name.eq_ignore_ascii_case(b"expect") {
            // tiny_http answers 417 to the expectations it does not know.
            out.extend_from_slice(line);
            out.push(b'\n');
            continue;
        }
        if DROPPED
            .iter()
            .any(|d| name.eq_ignore_ascii_case(d.as_bytes()))
        {
            continue;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    let (body, over_cap) = match length {
        _ if chunked => (Body::Chunked, None),
        Some(n) if n > max_body => {
            out.extend_from_slice(format!("{DECLARED_LENGTH}: {n}\r\n").as_bytes());
            (Body::None, Some(n))
        }
        Some(n) => {
            out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
            (if n == 0 { Body::None } else { Body::Length(n) }, None)
        }
        None => (Body::None, None),
    };
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Head {
        method: method.to_owned(),
        url: url.to_owned(),
        body,
        over_cap,
        keep_alive: version == "HTTP/1.1" && !close && !chunked && over_cap.is_none(),
        expect_continue,
        seen,
    })
}

/// A `Content-Length` value: digits only.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// What follows an exchange on a connection.
enum Next {
    /// Another request may come.
    Request,
    /// The connection closes; `unread`: the client may still be sending this request.
    Close { unread: bool },
}

/// Answers, or forwards, one request whose head is the first `head_len` buffered bytes.
fn exchange(inner: &Inner, conn: &mut Conn, bufs: &mut Buffers, head_len: usize) -> Next {
    let close = Next::Close { unread: true };
    let parsed = parse_head(
        &bufs.req.filled()[..head_len],
        inner.limits.max_body_bytes,
        &mut bufs.forward,
    );
    bufs.req.consume(head_len);
    let head = match parsed {
        Ok(head) => head,
        Err(why) => {
            log::debug!("http: refused a request head (400): {why}");
            reply(&conn.tcp, 400, "Bad Request", "bad_request", why);
            return close;
        }
    };
    if inner.closing.load(Ordering::SeqCst) {
        let msg = "the server is shutting down";
        reply(&conn.tcp, 503, "Service Unavailable", "shutting_down", msg);
        return close;
    }
    if head.body == Body::Chunked {
        return forward(inner, conn, bufs, &head);
    }
    let started = Instant::now();
    let face_head = super::Head::new(&head.method, &head.url, |name| head.header(name));
    let decided = catch_unwind(AssertUnwindSafe(|| inner.face.decide(&face_head)));
    let (reply, grant, body_read) = match decided {
        Ok(Decision::Mcp | Decision::Events(_) | Decision::Export(_)) => {
            return forward(inner, conn, bufs, &head);
        }
        Ok(Decision::Answer(reply)) => {
            // A body that is here already goes; one still on its way closes the connection.
            let whole = match head.body {
                Body::Length(n) if n <= bufs.req.len() as u64 => {
                    bufs.req.consume(n as usize);
                    true
                }
                Body::None => head.over_cap.is_none(),
                _ => false,
            };
            (reply, Vec::new(), whole)
        }
        Ok(Decision::Route { checked }) => {
            let body = match (head.over_cap, head.body) {
                (Some(_), _) => Err(super::too_large(inner.limits.max_body_bytes)),
                (None, Body::Length(n)) => {
                    if head.expect_continue && (bufs.req.len() as u64) < n {
                        let _ = (&conn.tcp).write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                    }
                    read_body(conn, &mut bufs.req, n).map_err(|e| super::unreadable_body(&e))
                }
                (None, _) => Ok(Vec::new()),
            };
            let whole = body.is_ok() && head.over_cap.is_none();
            let shared = inner.face.shared();
            match catch_unwind(AssertUnwindSafe(|| {
                super::route(shared, face_head, body, checked)
            })) {
                Ok((reply, grant)) => (reply, grant, whole),
                Err(_) => {
                    log::error!("http: routing panicked on {} {}", head.method, head.url);
                    (internal_error(), Vec::new(), whole)
                }
            }
        }
        Err(_) => {
            log::error!("http: a page panicked on {} {}", head.method, head.url);
            (internal_error(), Vec::new(), false)
        }
    };
    let keep = head.keep_alive && body_read && !inner.closing.load(Ordering::SeqCst);
    let status = reply.status;
    let written = write_reply(
        &conn.tcp,
        &reply,
        &grant,
        head.is_head(),
        keep,
        &mut bufs.forward,
    );
    log::debug!(
        "http: {} {} -> {status} in {:.1} ms",
        head.method.to_ascii_uppercase(),
        head.url,
        started.elapsed().as_secs_f64() * 1e3
    );
    if written.is_ok() && keep {
        Next::Request
    } else {
        Next::Close { unread: !body_read }
    }
}

fn internal_error() -> Reply {
    Reply::error(&crate::error::ApiError::internal(
        "internal error while handling the request (logged)",
    ))
}

/// Reads a body of `n` bytes (what is buffered first), with `BODY_STALL_TIMEOUT` per read.
fn read_body(conn: &mut Conn, buf: &mut Buf, n: u64) -> io::Result<Vec<u8>> {
    let n = usize::try_from(n).map_err(|_| io::Error::from(ErrorKind::OutOfMemory))?;
    let mut body = Vec::with_capacity(n.min(1 << 20));
    let here = buf.len().min(n);
    body.extend_from_slice(&buf.filled()[..here]);
    buf.consume(here);
    if body.len() < n {
        conn.read_timeout(BODY_STALL_TIMEOUT)?;
    }
    while body.len() < n {
        let old = body.len();
        body.resize(old + (n - old).min(64 * 1024), 0);
        match (&conn.tcp).read(&mut body[old..]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(k) => body.truncate(old + k),
            Err(e) if e.kind() == ErrorKind::Interrupted => body.truncate(old),
            Err(e) => return Err(e),
        }
    }
    Ok(body)
}

/// Writes a reply with its extra headers: `Content-Length` always, `Connection: close` when
/// the connection closes after it, no body for `HEAD` or a status without one.
fn write_reply(
    tcp: &TcpStream,
    reply: &Reply,
    extra: &[(&str, String)],
    head_only: bool,
    keep: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    use std::fmt::Write as _;
    let status = reply.status;
    let mut text = format!(
        "HTTP/1.1 {status} {}\r\nDate: {}\r\n",
        reason(status),
        http_date(SystemTime::now())
    );
    let own_type = reply
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    if !own_type {
        let _ = write!(text, "Content-Type: {}\r\n", reply.content_type);
    }
    let _ = write!(text, "{}: {}\r\n", super::NOSNIFF.0, super::NOSNIFF.1);
    let headers = reply
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(extra.iter().map(|(k, v)| (*k, v.as_str())));
    for (k, v) in headers {
        let framing = [
            "x-content-type-options",
            "content-length",
            "connection",
            "transfer-encoding",
            "trailer",
            "upgrade",
        ]
        .iter()
        .any(|f| k.eq_ignore_ascii_case(f));
        let clean = |t: &str| t.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b));
        if !framing && !k.is_empty() && clean(k) && clean(v) {
            let _ = write!(text, "{k}: {v}\r\n");
        }
    }
    let bodiless = (100..200).contains(&status) || matches!(status, 204 | 304);
    if !bodiless {
        let _ = write!(text, "Content-Length: {}\r\n", reply.body.len());
    }
    if !keep {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    out.clear();
    out.extend_from_slice(text.as_bytes());
    let body: &[u8] = if head_only || bodiless {
        &[]
    } else {
        &reply.body
    };
    write_both(tcp, out, body)
}

/// The reason phrase of a status.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// An HTTP date (RFC 9110 §5.6.7): `Tue, 24 Nov 2026 06:48:31 GMT`.
fn http_date(at: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    // Days to a civil date (Howard Hinnant's algorithm), for dates after 1970.
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Forwards a request to tiny_http's Unix socket and relays its answer: the requests whose
/// handlers write to the socket themselves, and chunked bodies. The forwarded head is in
/// `bufs.forward`.
fn forward(inner: &Inner, conn: &mut Conn, bufs: &mut Buffers, head: &Head) -> Next {
    let close = Next::Close { unread: true };
    let wants_body = head.body != Body::None;
    if head.expect_continue && wants_body {
        let _ = (&conn.tcp).write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    // A small body is read whole first, so tiny_http never waits on the client.
    if let Body::Length(n) = head.body {
        if n <= INLINE_BODY_MAX as u64 {
            while (bufs.req.len() as u64) < n {
                let max = MAX_REQUEST_HEAD_BYTES + INLINE_BODY_MAX;
                match conn.fill(&mut bufs.req, BODY_STALL_TIMEOUT, max) {
                    Ok(true) => {}
                    _ => return close,
                }
            }
        }
    }
    let inline = match head.body {
        Body::None => 0,
        Body::Length(n) => bufs.req.len().min(usize::try_from(n).unwrap_or(usize::MAX)),
        Body::Chunked => bufs.req.len(),
    };
    let unix = match UnixStream::connect(&inner.backend) {
        Ok(u) => u,
        Err(err) => {
            log::warn!("http: cannot reach tiny_http: {err}");
            let msg = "the server cannot take this request now; try again";
            reply(&conn.tcp, 503, "Service Unavailable", "unavailable", msg);
            return close;
        }
    };
    let sent = write_both(&unix, &bufs.forward, &bufs.req.filled()[..inline]);
    bufs.req.consume(inline);
    if let Err(err) = sent {
        log::debug!("http: could not forward a request to tiny_http: {err}");
    }
    let remaining = match head.body {
        Body::Length(n) => Some(n - inline as u64),
        Body::Chunked => None,
        Body::None => Some(0),
    };
    let next = |keep_alive: bool, whole: bool| {
        if keep_alive && head.keep_alive && whole && !inner.closing.load(Ordering::SeqCst) {
            Next::Request
        } else {
            Next::Close {
                unread: !whole || head.over_cap.is_some(),
            }
        }
    };
    if remaining == Some(0) {
        let answer = relay(conn, &unix, head, bufs);
        return next(answer.keep_alive, true);
    }
    // A large or chunked body is copied on a helper thread while the answer is relayed: a
    // handler may answer before it reads the body (and tiny_http then reads the rest of it).
    let _ = conn.read_timeout(BODY_STALL_TIMEOUT);
    let (answer, whole) = thread::scope(|s| {
        let copier = thread::Builder::new()
            .name("http-door-body".into())
            .stack_size(COPIER_STACK)
            .spawn_scoped(s, || copy_body(&conn.tcp, &unix, remaining));
        let Ok(copier) = copier else {
            return (Answer::default(), false);
        };
        let answer = relay(conn, &unix, head, bufs);
        if !copier.is_finished() {
            // Answered before the body arrived: the rest of the body goes nowhere.
            let _ = conn.tcp.shutdown(Shutdown::Read);
            let _ = unix.shutdown(Shutdown::Both);
        }
        (answer, copier.join().unwrap_or(false))
    });
    next(answer.keep_alive, whole)
}

/// Writes `a` then `b`, gathered.
fn write_both(mut w: impl Write, a: &[u8], b: &[u8]) -> io::Result<()> {
    let (mut a, mut b) = (a, b);
    while !a.is_empty() || !b.is_empty() {
        let n = match w.write_vectored(&[IoSlice::new(a), IoSlice::new(b)]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[n - from_a..];
    }
    Ok(())
}

/// Copies a request body from the client to tiny_http: `remaining` bytes, or (chunked, `None`)
/// until the client stops. `true` when the whole declared body went through.
fn copy_body(tcp: &TcpStream, unix: &UnixStream, remaining: Option<u64>) -> bool {
    let mut chunk = vec![0u8; BUF_SIZE];
    let mut left = remaining;
    while left != Some(0) {
        let want = left.map_or(chunk.len(), |l| l.min(chunk.len() as u64) as usize);
        let n = match (&*tcp).read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if (&*unix).write_all(&chunk[..n]).is_err() {
            return false;
        }
        left = left.map(|l| l - n as u64);
    }
    if left == Some(0) {
        return true;
    }
    // Cut short: tiny_http sees the body end early.
    let _ = unix.shutdown(Shutdown::Write);
    false
}

/// How a relayed answer ended.
#[derive(Default)]
struct Answer {
    /// The answer was complete and self-delimiting, and did not ask to close.
    keep_alive: bool,
}

/// How the client finds the end of an answer.
enum Framing {
    Length(u64),
    /// Chunked, or delimited by the end of the connection: relayed until tiny_http closes.
    UntilEnd {
        self_delimiting: bool,
    },
}

/// Relays tiny_http's answer to the client: the head (with `Connection: close` added when the
/// connection will close), then the body as it comes.
fn relay(conn: &Conn, unix: &UnixStream, head: &Head, bufs: &mut Buffers) -> Answer {
    let buf = &mut bufs.answer;
    if buf.len() < BUF_SIZE {
        buf.resize(BUF_SIZE, 0);
    }
    let mut filled = 0;
    let head_end = loop {
        if let Some(i) = find(&buf[..filled], b"\r\n\r\n") {
            break Some(i + 4);
        }
        if filled == buf.len() {
            if buf.len() >= MAX_ANSWER_HEAD {
                break None;
            }
            buf.resize(buf.len() * 2, 0);
        }
        match (&*unix).read(&mut buf[filled..]) {
            Ok(0) => break None,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break None,
        }
    };
    let Some(head_end) = head_end else {
        if filled == 0 {
            // tiny_http closed without an answer: it could not read the request.
            let msg = "the request could not be parsed";
            reply(&conn.tcp, 400, "Bad Request", "bad_request", msg);
        } else {
            let _ = (&conn.tcp).write_all(&buf[..filled]);
            copy_to_end(unix, &conn.tcp, buf, None);
        }
        return Answer::default();
    };
    let (status, framing, asks_close) = answer_framing(&buf[..head_end], head.is_head());
    let self_delimiting = match framing {
        Framing::Length(_) => true,
        Framing::UntilEnd { self_delimiting } => self_delimiting,
    };
    let keep = head.keep_alive && self_delimiting && !asks_close;
    let answer_head = if keep || asks_close {
        &buf[..head_end]
    } else {
        // The client learns that the connection closes after this answer.
        bufs.forward.clear();
        bufs.forward.extend_from_slice(&buf[..head_end - 2]);
        bufs.forward.extend_from_slice(b"Connection: close\r\n\r\n");
        &bufs.forward
    };
    let body_have = filled - head_end;
    let body_now = match framing {
        Framing::Length(n) => body_have.min(usize::try_from(n).unwrap_or(usize::MAX)),
        Framing::UntilEnd { .. } => body_have,
    };
    if write_both(&conn.tcp, answer_head, &buf[head_end..head_end + body_now]).is_err() {
        return Answer::default();
    }
    let complete = match framing {
        Framing::Length(n) => {
            let left = n - body_now as u64;
            left == 0 || copy_to_end(unix, &conn.tcp, buf, Some(left))
        }
        Framing::UntilEnd { .. } => copy_to_end(unix, &conn.tcp, buf, None),
    };
    if !complete {
        log::debug!("http: an answer ({status}) was cut short");
    }
    Answer {
        keep_alive: keep && complete,
    }
}

/// Status, framing and `Connection: close` of an answer head.
fn answer_framing(head: &[u8], to_head_request: bool) -> (u16, Framing, bool) {
    let mut lines = head.split(|&b| b == b'\n');
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(|&b| b == b' ').nth(1))
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (mut length, mut chunked, mut close) = (None, false, false);
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            length = parse_length(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            close = value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        }
    }
    let no_body = to_head_request || (100..200).contains(&status) || matches!(status, 204 | 304);
    let framing = match (no_body, chunked, length) {
        (true, _, _) => Framing::Length(0),
        (false, true, _) => Framing::UntilEnd {
            self_delimiting: true,
        },
        (false, false, Some(n)) => Framing::Length(n),
        (false, false, None) => Framing::UntilEnd {
            self_delimiting: false,
        },
    };
    (status, framing, close)
}

/// Copies from tiny_http to the client: `left` bytes, or to the end of the stream. `true` when
/// all of it went through.
fn copy_to_end(unix: &UnixStream, tcp: &TcpStream, buf: &mut [u8], left: Option<u64>) -> bool {
    let mut left = left;
    loop {
        if left == Some(0) {
            return true;
        }
        let want = left.map_or(buf.len(), |l| l.min(buf.len() as u64) as usize);
        let n = match (&*unix).read(&mut buf[..want]) {
            Ok(0) => return left.is_none(),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        if (&*tcp).write_all(&buf[..n]).is_err() {
            return false;
        }
        left = left.map(|l| l - n as u64);
    }
}

/// Writes a short answer of the door's own, JSON like every error of the API, and asks the
/// client to close.
fn reply(tcp: &TcpStream, status: u16, reason: &str, code: &str, message: &str) {
    let body = serde_json::json!({"error": code, "message": message}).to_string();
    let retry = if status == 503 {
        "Retry-After: 1\r\n"
    } else {
        ""
    };
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         X-Content-Type-Options: nosniff\r\n\
         {retry}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = (&*tcp).write_all(text.as_bytes());
}

/// Answers with the door's own error and closes.
fn fail(conn: Conn, status: u16, reason: &str, code: &str, message: &str) {
    reply(&conn.tcp, status, reason, code, message);
    close(conn, true);
}

/// Closes a connection. When request bytes may be left unread, the door first stops writing and
/// reads on a little (up to `LINGER`), so the client reads the answer instead of a reset.
fn close(conn: Conn, unread: bool) {
    if !unread {
        return;
    }
    let tcp = conn.tcp;
    let _ = tcp.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut total = 0;
    while total < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || tcp.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match (&tcp).read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

/// Answers a connection beyond the cap with 503 and closes it, on the accepting thread: reads
/// what already arrived without waiting, so the close does not reset the answer away.
fn refuse_busy(tcp: &TcpStream, cap: usize) {
    let msg = format!(
        "the server has {cap} connections open, its limit (see --max-connections); try again"
    );
    reply(
        tcp,
        503,
        "Service Unavailable",
        "too_many_connections",
        &msg,
    );
    let _ = tcp.shutdown(Shutdown::Write);
    if tcp.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 4096];
        while matches!((&*tcp).read(&mut sink), Ok(n) if n > 0) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str, max: u64) -> (Result<Head, &'static str>, String) {
        let mut out = Vec::new();
        let head = parse_head(raw.as_bytes(), max, &mut out);
        (head, String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_forwarded_head_drops_hop_by_hop_headers_and_asks_to_close() {
        let (head, out) = parse(
            "POST /api/call/start HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\
             Upgrade: h2c\r\nTE: identity\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\
             X-Cideldill-Declared-Length: 9\r\n\r\n",
            100,
        );
        assert_eq!(
            out,
            "POST /api/call/start HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
        let head = head.unwrap();
        assert_eq!(head.body, Body::Length(5));
        assert!(head.keep_alive && head.expect_continue && !head.is_head());
        assert_eq!(
            (head.method.as_str(), head.url.as_str()),
            ("POST", "/api/call/start")
        );
        assert_eq!(head.header("Host").as_deref(), Some("x"));
        assert_eq!(head.header("Origin"), None);
    }

    #[test]
    fn a_declared_body_over_the_cap_is_not_forwarded() {
        let (head, out) = parse(
            "POST /x HTTP/1.1\r\nContent-Length: 101\r\nContent-Length: 101\r\n\r\n",
            100,
        );
        let head = head.unwrap();
        assert_eq!((head.body, head.over_cap), (Body::None, Some(101)));
        assert!(!head.keep_alive);
        assert!(out.contains("X-Cideldill-Declared-Length: 101\r\n"));
        assert!(!out.contains("Content-Length"));
    }

    #[test]
    fn bad_lengths_are_refused_and_chunked_bodies_close_the_connection() {
        for bad in ["abc", "-1", "1, 2", "", "99999999999999999999"] {
            let raw = format!("POST /x HTTP/1.1\r\nContent-Length: {bad}\r\n\r\n");
            assert!(parse(&raw, 100).0.is_err(), "{bad}");
        }
        let raw = "POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(parse(raw, 100).0.is_err());
        let raw = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 500\r\n\r\n";
        let head = parse(raw, 100).0.unwrap();
        assert_eq!((head.body, head.keep_alive), (Body::Chunked, false));
        let raw = "GET / HTTP/1.0\r\n\r\n";
        assert!(!parse(raw, 100).0.unwrap().keep_alive);
        let raw = "GET / HTTP/1.1\r\nConnection: Close\r\n\r\n";
        assert!(!parse(raw, 100).0.unwrap().keep_alive);
        for bad in [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost x\r\n\r\n",
        ] {
            assert!(parse(bad, 100).0.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn http_dates_and_reasons() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_502_911);
        assert_eq!(http_date(at), "Tue, 24 Nov 2026 06:48:31 GMT");
        assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(http_date(leap), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(reason(431), "Request Header Fields Too Large");
        assert_eq!(reason(299), "Status");
    }

    #[test]
    fn answer_framing_reads_length_chunking_and_close() {
        let f = |h: &str, head_rq| {
            let (s, f, c) = answer_framing(h.as_bytes(), head_rq);
            let f = match f {
                Framing::Length(n) => format!("len {n}"),
                Framing::UntilEnd { self_delimiting } => format!("end {self_delimiting}"),
            };
            (s, f, c)
        };
        let ok = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n";
        assert_eq!(f(ok, false), (200, "len 12".into(), false));
        assert_eq!(f(ok, true), (200, "len 0".into(), false));
        let stream = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        assert_eq!(f(stream, false), (200, "end true".into(), true));
        assert_eq!(
            f("HTTP/1.0 200 OK\r\n\r\n", false),
            (200, "end false".into(), false)
        );
        assert_eq!(
            f("HTTP/1.1 204 No Content\r\n\r\n", false),
            (204, "len 0".into(), false)
        );
    }

    #[test]
    fn write_both_gathers_across_short_writes() {
        struct Trickle(Vec<u8>);
        impl Write for Trickle {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                let n = b.len().min(3);
                self.0.extend_from_slice(&b[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut t = Trickle(Vec::new());
        write_both(&mut t, b"hello ", b"world").unwrap();
        assert_eq!(t.0, b"hello world");
    }
}
