use ascii::AsciiString;

use std::io::Error as IoError;
use std::io::Result as IoResult;
use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read};

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{HTTPVersion, Method};
use crate::connection::ConnCtl;
use crate::util::RefinedTcpStream;
use crate::util::{SequentialReader, SequentialReaderBuilder, SequentialWriterBuilder};
use crate::{Header, HeaderField, Limits, Request};

/// Most header lines a request head may have (more: 431).
const MAX_HEADERS: usize = 128;

/// Capacity of the buffers between a connection and its socket, as upstream has them (8 KiB
/// measured no faster); reads and writes larger than that bypass them.
const BUF_CAPACITY: usize = 1024;

/// On a connection closed by the server, how long and how much it keeps reading (and
/// discarding) what the client still sends, so that the client reads the answer instead of a
/// reset.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 1 << 20;

/// A ClientConnection is an object that will store a socket to a client
/// and return Request objects.
pub struct ClientConnection {
    // address of the client
    remote_addr: IoResult<Option<SocketAddr>>,

    // sequence of Readers to the stream, so that the data is not read in
    //  the wrong order
    source: SequentialReaderBuilder<BufReader<RefinedTcpStream>>,

    // sequence of Writers to the stream, to avoid writing response #2 before
    //  response #1
    sink: SequentialWriterBuilder<BufWriter<RefinedTcpStream>>,

    // Reader to read the next header from
    next_header_source: SequentialReader<BufReader<RefinedTcpStream>>,

    // set to true if we know that the previous request is the last one
    no_more_requests: bool,

    // true if the connection goes through SSL
    secure: bool,

    // the socket, and whether the answer to the last request closes the connection
    ctl: Arc<ConnCtl>,

    limits: Limits,

    // the read timeout set on the socket now
    read_timeout: Option<Duration>,

    // the request head being read (kept between requests for its allocation)
    head: Vec<u8>,
}

/// Error that can happen when reading a request.
#[derive(Debug)]
enum ReadError {
    WrongRequestLine,
    WrongHeader(HTTPVersion),
    /// the client sent an unrecognized `Expect` header
    ExpectationFailed(HTTPVersion),
    ReadIoError(IoError),
    /// the head is longer than `Limits::max_head_bytes`, or has too many lines (431)
    HeadTooLarge,
    /// the head did not arrive within `Limits::head_timeout` (408)
    HeadTimeout,
    /// no request came within `Limits::idle_timeout`: the connection closes quietly
    Idle,
    /// an HTTP version other than 1.0 and 1.1 (505)
    WrongVersion,
    /// a transfer coding other than chunked (501)
    UnknownCoding(HTTPVersion),
    /// the answer to the previous request closed the connection
    Closed,
}

impl ClientConnection {
    /// Creates a new `ClientConnection` that takes ownership of the `TcpStream`.
    pub(crate) fn new(
        write_socket: RefinedTcpStream,
        mut read_socket: RefinedTcpStream,
        ctl: Arc<ConnCtl>,
        limits: Limits,
        accepted_from: Option<SocketAddr>,
    ) -> ClientConnection {
        // The address `accept` returned, if it did (no system call to ask again).
        let remote_addr = match accepted_from {
            Some(addr) => Ok(Some(addr)),
            None => read_socket.peer_addr(),
        };
        let secure = read_socket.secure();

        let mut source =
            SequentialReaderBuilder::new(BufReader::with_capacity(BUF_CAPACITY, read_socket));
        let first_header = source.next().unwrap();
        let _ = ctl.stream().set_nodelay();
        if limits.write_timeout.is_some() {
            let _ = ctl.stream().set_write_timeout(limits.write_timeout);
        }

        ClientConnection {
            source,
            sink: SequentialWriterBuilder::new(BufWriter::with_capacity(
                BUF_CAPACITY,
                write_socket,
            )),
            remote_addr,
            next_header_source: first_header,
            no_more_requests: false,
            secure,
            ctl,
            limits,
            read_timeout: None,
            head: Vec::new(),
        }
    }

    /// Sets the socket's read timeout, unless it is set so already.
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> IoResult<()> {
        // A zero timeout means none to the socket: wait at least a millisecond.
        let timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        if self.read_timeout != timeout {
            self.ctl.stream().set_read_timeout(timeout)?;
            self.read_timeout = timeout;
        }
        Ok(())
    }

    /// Reads a request head into `self.head`, within `max_head_bytes`: the idle timeout runs
    /// until its first byte, the head timeout from there to its end. Empty lines before the
    /// request line are skipped (and counted).
    fn read_head(&mut self) -> Result<(), ReadError> {
        self.head.clear();
        self.next_header_source
            .turn()
            .map_err(ReadError::ReadIoError)?;
        if self.ctl.is_closing() {
            return Err(ReadError::Closed);
        }
        self.set_read_timeout(self.limits.idle_timeout)
            .map_err(ReadError::ReadIoError)?;
        let max = self.limits.max_head_bytes;
        let mut seen = 0usize;
        let mut deadline: Option<Instant> = None;
        loop {
            let chunk = match self.next_header_source.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(if seen == 0 {
                        ReadError::Idle
                    } else {
                        ReadError::HeadTimeout
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::ReadIoError(e)),
            };
            if chunk.is_empty() {
                return Err(ReadError::ReadIoError(IoError::new(
                    ErrorKind::ConnectionAborted,
                    "Unexpected EOF",
                )));
            }
            let len = chunk.len();
            seen += len;
            if self.head.is_empty() {
                let blank = chunk
                    .iter()
                    .take_while(|b| **b == b'\r' || **b == b'\n')
                    .count();
                if blank > 0 {
                    self.next_header_source.consume(blank);
                    if seen > max {
                        return Err(ReadError::HeadTooLarge);
                    }
                    seen -= len - blank;
                    continue;
                }
            }
            let before = self.head.len();
            let room = (max + 1).saturating_sub(before).min(len);
            self.head.extend_from_slice(&chunk[..room]);
            if let Some(end) = head_end(&self.head, before.saturating_sub(2)) {
                self.next_header_source.consume(end - before);
                self.head.truncate(end);
                break;
            }
            self.next_header_source.consume(room);
            if self.head.len() > max {
                return Err(ReadError::HeadTooLarge);
            }
            let until = *deadline.get_or_insert_with(|| {
                Instant::now() + self.limits.head_timeout.unwrap_or(Duration::MAX / 4)
            });
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReadError::HeadTimeout);
            }
            let wait = self.limits.head_timeout.map(|_| left);
            self.set_read_timeout(wait)
                .map_err(ReadError::ReadIoError)?;
        }
        self.set_read_timeout(self.limits.body_timeout)
            .map_err(ReadError::ReadIoError)
    }

    /// Once the server closes the connection: sends the end of the answers, then reads and
    /// discards what the client still sends for a moment, so that closing the socket does not
    /// reset the connection before the client read its answer.
    fn linger(&mut self) {
        self.ctl.end_answers();
        let stream = self.ctl.stream();
        let until = Instant::now() + LINGER;
        let mut drained = 0;
        let mut buf = [0u8; 4096];
        let mut stream = match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        while drained < LINGER_BYTES {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    }

    /// true if the connection is HTTPS
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// Reads a request from the stream.
    /// Blocks until the header has been read.
    fn read(&mut self) -> Result<Request, ReadError> {
        self.read_head()?;
        let (method, path, version, headers) = parse_head(&self.head)?;
        // building the writer for the request
        let writer = self.sink.next().unwrap();

        // follow-up for next potential request
        let mut data_source = self.source.next().unwrap();
        std::mem::swap(&mut self.next_header_source, &mut data_source);

        // building the next reader
        let request = crate::request::new_request(
            self.secure,
            method,
            path,
            version.clone(),
            headers,
            *self.remote_addr.as_ref().unwrap(),
            data_source,
            writer,
            Some(Arc::clone(&self.ctl)),
        )
        .map_err(|e| {
            use crate::request;
            match e {
                request::RequestCreationError::CreationIoError(e) => ReadError::ReadIoError(e),
                request::RequestCreationError::ExpectationFailed => {
                    ReadError::ExpectationFailed(version)
                }
            }
        })?;

        // return the request
        Ok(request)
    }
}

impl ClientConnection {
    /// Answers a request that could not be read with `status` and an empty body, and closes
    /// the connection.
    fn refuse(&mut self, status: u16, version: HTTPVersion, why: &str) {
        use crate::{Response, StatusCode};
        use std::io::Write;
        let mut writer = self.sink.next().unwrap();
        let (kind, body) = crate::refusal(&self.limits, status, why);
        let mut response = Response::from_data(body).with_status_code(StatusCode(status));
        for (name, value) in [
            ("Connection", "close"),
            ("Content-Type", kind),
            ("X-Content-Type-Options", "nosniff"),
        ] {
            response.add_header(Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap());
        }
        if response
            .raw_print(writer.by_ref(), version, &[], false, None)
            .is_ok()
        {
            let _ = writer.flush();
        }
        self.linger();
    }
}

impl Iterator for ClientConnection {
    type Item = Request;

    /// Blocks until the next Request is available.
    /// Returns None when no new Requests will come from the client.
    fn next(&mut self) -> Option<Request> {
        use crate::{Response, StatusCode};

        // the client sent a "connection: close" header in this previous request
        //  or is using HTTP 1.0, meaning that no new request will come
        if self.no_more_requests {
            return None;
        }

        loop {
            let rq = match self.read() {
                // we don't know where the next request would start, so we have to close
                Err(ReadError::WrongRequestLine) => {
                    self.refuse(400, HTTPVersion(1, 1), "the request line is malformed");
                    return None;
                }

                Err(ReadError::WrongHeader(ver)) => {
                    self.refuse(
                        400,
                        ver,
                        "a header is malformed (not a token before the colon, whitespace before it, a value that is not ASCII, a folded line) or the body's framing is ambiguous (Content-Length with Transfer-Encoding, a malformed or repeated differing Content-Length, a transfer coding other than chunked)",
                    );
                    return None;
                }

                Err(ReadError::ExpectationFailed(ver)) => {
                    // TODO: should be recoverable, but needs handling in case of body
                    self.refuse(417, ver, "only Expect: 100-continue is understood");
                    return None;
                }

                Err(ReadError::Closed) => {
                    // The answer may still be written (through `into_writer`, on another
                    // thread): the connection closes once it is done.
                    use std::io::Write;
                    let mut after = self.sink.next().unwrap();
                    let _ = after.flush();
                    drop(after);
                    self.linger();
                    return None;
                }

                Err(ReadError::Idle) => return None,

                Err(ReadError::HeadTooLarge) => {
                    let why = format!(
                        "the request head is over {} bytes or {} header lines",
                        self.limits.max_head_bytes, MAX_HEADERS
                    );
                    self.refuse(431, HTTPVersion(1, 1), &why);
                    return None;
                }

                Err(ReadError::HeadTimeout) => {
                    self.refuse(
                        408,
                        HTTPVersion(1, 1),
                        "the request head did not arrive in time",
                    );
                    return None;
                }

                Err(ReadError::WrongVersion) => {
                    self.refuse(
                        505,
                        HTTPVersion(1, 1),
                        "only HTTP/1.0 and HTTP/1.1 are served",
                    );
                    return None;
                }

                Err(ReadError::UnknownCoding(ver)) => {
                    self.refuse(501, ver, "only the chunked transfer coding is understood");
                    return None;
                }

                Err(ReadError::ReadIoError(err)) => {
                    log::debug!("Connection ended: {}", err);
                    return None;
                }

                Ok(rq) => rq,
            };

            // checking HTTP version
            if *rq.http_version() > (1, 1) {
                let writer = self.sink.next().unwrap();
                let response = Response::from_string(
                    "This server only supports HTTP versions 1.0 and 1.1".to_owned(),
                )
                .with_status_code(StatusCode(505));
                response
                    .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                    .ok();
                continue;
            }

            // updating the status of the connection
            let connection_header = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Connection"))
                .map(|h| h.value.as_str());

            let lowercase = connection_header.map(|h| h.to_ascii_lowercase());

            match lowercase {
                Some(ref val) if val.contains("close") => self.no_more_requests = true,
                Some(ref val) if val.contains("upgrade") => self.no_more_requests = true,
                Some(ref val)
                    if !val.contains("keep-alive") && *rq.http_version() == HTTPVersion(1, 0) =>
                {
                    self.no_more_requests = true
                }
                None if *rq.http_version() == HTTPVersion(1, 0) => self.no_more_requests = true,
                _ => (),
            };
            if self.no_more_requests && !lowercase.map_or(false, |v| v.contains("upgrade")) {
                self.ctl.mark_last();
            }

            // returning the request
            return Some(rq);
        }
    }
}

/// Where the request head in `buf` ends (after its empty line), looking from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(at) = buf[i.min(buf.len())..].iter().position(|b| *b == b'\n') {
        let nl = i + at;
        match buf.get(nl + 1) {
            Some(b'\n') => return Some(nl + 2),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// Parses a request head with httparse (strict: no whitespace between a header's name and its
/// colon, no line folding), then judges its framing (RFC 9112, section 6): a request with both
/// `Transfer-Encoding` and `Content-Length`, a `Content-Length` that is not a number or that
/// differs between its values, and a transfer coding that does not end in `chunked` are
/// refused, for each would let the server and a proxy in front of it see different requests.
/// Repeated equal `Content-Length` values are folded into one header.
fn parse_head(head: &[u8]) -> Result<(Method, String, HTTPVersion, Vec<Header>), ReadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    match parsed.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(ReadError::WrongRequestLine),
        Err(httparse::Error::TooManyHeaders) => return Err(ReadError::HeadTooLarge),
        Err(httparse::Error::Version) => return Err(ReadError::WrongVersion),
        Err(_) if parsed.version.is_some() => {
            return Err(ReadError::WrongHeader(http_version(parsed.version)))
        }
        Err(_) => return Err(ReadError::WrongRequestLine),
    }
    let version = http_version(parsed.version);
    let method: Method = parsed
        .method
        .and_then(|m| m.parse().ok())
        .ok_or(ReadError::WrongRequestLine)?;
    let path = parsed.path.ok_or(ReadError::WrongRequestLine)?.to_owned();
    let wrong = || ReadError::WrongHeader(version.clone());
    let mut headers = Vec::with_capacity(parsed.headers.len());
    let mut content_length: Option<u64> = None;
    let mut length_headers = 0;
    let mut codings: Vec<String> = Vec::new();
    for h in parsed.headers.iter() {
        let field = HeaderField::from_str(h.name).map_err(|_| wrong())?;
        let value = std::str::from_utf8(h.value)
            .ok()
            .and_then(|v| AsciiString::from_ascii(v.trim()).ok())
            .ok_or_else(wrong)?;
        if field.equiv("Content-Length") {
            length_headers += 1;
            for part in value.as_str().split(',') {
                let part = part.trim();
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(wrong());
                }
                let n: u64 = part.parse().map_err(|_| wrong())?;
                if content_length.is_some_and(|seen| seen != n) {
                    return Err(wrong());
                }
                content_length = Some(n);
            }
        } else if field.equiv("Transfer-Encoding") {
            codings.extend(
                value
                    .as_str()
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .filter(|c| !c.is_empty()),
            );
        }
        headers.push(Header { field, value });
    }
    if !codings.is_empty() || headers.iter().any(|h| h.field.equiv("Transfer-Encoding")) {
        if content_length.is_some() || codings.last().map(String::as_str) != Some("chunked") {
            return Err(wrong());
        }
        if codings.len() > 1 {
            return Err(ReadError::UnknownCoding(version));
        }
    }
    if let Some(n) = content_length {
        if <usize as std::convert::TryFrom<u64>>::try_from(n).is_err() {
            return Err(wrong());
        }
        if length_headers > 1
            || headers
                .iter()
                .any(|h| h.field.equiv("Content-Length") && h.value.as_str() != n.to_string())
        {
            headers.retain(|h| !h.field.equiv("Content-Length"));
            headers.push(Header {
                field: HeaderField::from_str("Content-Length").map_err(|_| wrong())?,
                value: AsciiString::from_ascii(n.to_string()).map_err(|_| wrong())?,
            });
        }
    }
    Ok((method, path, version, headers))
}

fn http_version(minor: Option<u8>) -> HTTPVersion {
    match minor {
        Some(0) => HTTPVersion(1, 0),
        _ => HTTPVersion(1, 1),
    }
}

#[cfg(test)]
mod test {
    use super::{head_end, parse_head, ReadError};
    use crate::common::HTTPVersion;

    fn parse(head: &str) -> Result<(String, Vec<(String, String)>), ReadError> {
        parse_head(head.as_bytes()).map(|(method, path, _, headers)| {
            (
                format!("{} {}", method, path),
                headers
                    .iter()
                    .map(|h| (h.field.to_string(), h.value.to_string()))
                    .collect(),
            )
        })
    }

    #[test]
    fn a_plain_head_parses() {
        let (line, headers) =
            parse("GET /hello?x=1 HTTP/1.1\r\nHost: a\r\nX-Two:  b c \r\n\r\n").unwrap();
        assert_eq!(line, "GET /hello?x=1");
        assert_eq!(
            headers,
            vec![("Host".into(), "a".into()), ("X-Two".into(), "b c".into())]
        );
        let (_, _, version, _) = parse_head(b"GET / HTTP/1.0\n\n").unwrap();
        assert_eq!(version, HTTPVersion(1, 0));
    }

    #[test]
    fn whitespace_before_a_colon_is_refused() {
        // The smuggling request: a proxy that ignores this header reads the body as a request.
        assert!(matches!(
            parse("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n"),
            Err(ReadError::WrongHeader(_))
        ));
        assert!(parse("POST / HTTP/1.1\r\nContent-Length\t: 5\r\n\r\n").is_err());
        // Line folding (obsolete) is refused too.
        assert!(parse("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n").is_err());
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        for head in [
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n",
        ] {
            assert!(
                matches!(parse(head), Err(ReadError::WrongHeader(_))),
                "{:?} was accepted",
                head
            );
        }
        assert!(matches!(
            parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Err(ReadError::UnknownCoding(_))
        ));
    }

    #[test]
    fn repeated_equal_lengths_fold_into_one() {
        let (_, headers) =
            parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 005, 5\r\n\r\n")
                .unwrap();
        let lengths: Vec<_> = headers
            .iter()
            .filter(|(k, _)| k == "Content-Length")
            .collect();
        assert_eq!(
            lengths,
            vec![&("Content-Length".to_string(), "5".to_string())]
        );
        let (_, headers) = parse("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n").unwrap();
        assert_eq!(headers.len(), 1);
    }

    #[test]
    fn bad_request_lines_and_versions() {
        assert!(matches!(
            parse("GET /hello\r\n\r\n"),
            Err(ReadError::WrongRequestLine)
        ));
        assert!(matches!(
            parse("qsd qsd qsd\r\n\r\n"),
            Err(ReadError::WrongVersion) | Err(ReadError::WrongRequestLine)
        ));
        assert!(matches!(
            parse("GET / HTTP/2.0\r\n\r\n"),
            Err(ReadError::WrongVersion)
        ));
        let many: String = (0..200).map(|i| format!("X-{}: {}\r\n", i, i)).collect();
        assert!(matches!(
            parse(&format!("GET / HTTP/1.1\r\n{}\r\n", many)),
            Err(ReadError::HeadTooLarge)
        ));
    }

    #[test]
    fn the_end_of_a_head_is_found_across_reads() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        let head = b"GET / HTTP/1.1\r\nA: b\r\n\r\n";
        assert_eq!(head_end(head, head.len() - 4), Some(head.len()));
    }
}
