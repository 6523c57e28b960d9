//! Reading server-sent events (WHATWG HTML, "server-sent events") from a byte stream, for the
//! HTTP transports of upstream MCP servers.
//!
//! Lines end with CRLF, LF or CR; `field: value` lines fill the event (one optional space after
//! the colon is dropped), lines starting with `:` are comments, and a blank line dispatches the
//! event. Several `data` lines join with `\n`. A line may be very long (one JSON message of many
//! megabytes): the reader grows one buffer per line, so the cost stays linear, up to
//! [`UPSTREAM_SSE_MAX_LINE`].

use std::io::{self, BufRead, BufReader, Read};

use crate::limits::UPSTREAM_SSE_MAX_LINE;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The `event:` type; `message` when the event named none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream so far (ids persist across events), if any.
    pub id: Option<String>,
}

/// Parses events from a byte stream.
pub struct EventReader<R> {
    input: BufReader<R>,
    line: Vec<u8>,
    /// The previous line ended with CR: an LF right after it belongs to that line end.
    skip_lf: bool,
    first_line: bool,
    event: String,
    data: String,
    last_id: Option<String>,
    /// The reconnection time the server asked for with `retry:`, in milliseconds.
    pub retry: Option<u64>,
}

impl<R: Read> EventReader<R> {
    pub fn new(input: R) -> Self {
        EventReader {
            input: BufReader::with_capacity(64 << 10, input),
            line: Vec::new(),
            skip_lf: false,
            first_line: true,
            event: String::new(),
            data: String::new(),
            last_id: None,
            retry: None,
        }
    }

    /// The last event id the stream set (also by an event without data), if any: where a
    /// reconnection resumes (`Last-Event-ID`).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The next event, or `None` at the end of the stream (an unfinished event is dropped, as
    /// the standard says).
    pub fn next_event(&mut self) -> io::Result<Option<Event>> {
        while self.read_line()? {
            let raw = std::mem::take(&mut self.line);
            let text = String::from_utf8_lossy(&raw);
            let mut line: &str = &text;
            if self.first_line {
                self.first_line = false;
                line = line.strip_prefix('\u{feff}').unwrap_or(line);
            }
            let event = self.process(line);
            drop(text);
            // Keep the allocation for the next line, unless it was a huge one.
            if raw.capacity() <= 1 << 20 {
                self.line = raw;
            }
            if event.is_some() {
                return Ok(event);
            }
            if self.data.len() > UPSTREAM_SSE_MAX_LINE {
                return Err(too_long("an event"));
            }
        }
        Ok(None)
    }

    /// Handles one line; returns the event a blank line dispatches.
    fn process(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if self.data.is_empty() {
                return None;
            }
            let mut data = std::mem::take(&mut self.data);
            if data.ends_with('\n') {
                data.pop();
            }
            return Some(Event {
                event: if event.is_empty() {
                    "message".to_owned()
                } else {
                    event
                },
                data,
                id: self.last_id.clone(),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    /// Reads one line (without its end) into `self.line`; false at the end of the stream.
    fn read_line(&mut self) -> io::Result<bool> {
        self.line.clear();
        loop {
            let buf = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(false);
            }
            let start = usize::from(std::mem::take(&mut self.skip_lf) && buf[0] == b'\n');
            let rest = &buf[start..];
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.line.extend_from_slice(&rest[..i]);
                    self.skip_lf = rest[i] == b'\r';
                    self.input.consume(start + i + 1);
                    return Ok(true);
                }
                None => {
                    self.line.extend_from_slice(rest);
                    let n = buf.len();
                    self.input.consume(n);
                    if self.line.len() > UPSTREAM_SSE_MAX_LINE {
                        return Err(too_long("a line"));
                    }
                }
            }
        }
    }
}

fn too_long(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{what} of the event stream is longer than {} MiB",
            UPSTREAM_SSE_MAX_LINE >> 20
        ),
    )
}

/// Test helpers shared by the transports' tests: a tiny_http server on a free loopback port
/// that runs each request on its own thread, and a hand-written event stream response.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::Write;
    use std::sync::Arc;
    use std::thread;

    pub struct Server {
        server: Arc<tiny_http::Server>,
        pub base: String,
    }

    impl Server {
        pub fn start(handler: impl Fn(tiny_http::Request) + Send + Sync + 'static) -> Server {
            let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
            let port = server.server_addr().to_ip().expect("ip").port();
            let handler = Arc::new(handler);
            let s = server.clone();
            thread::spawn(move || {
                for rq in s.incoming_requests() {
                    let h = handler.clone();
                    thread::spawn(move || h(rq));
                }
            });
            Server {
                server,
                base: format!("http://127.0.0.1:{port}"),
            }
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.server.unblock();
        }
    }

    /// A chunked `text/event-stream` response written over the raw socket.
    pub struct Stream(Box<dyn Write + Send>);

    impl Stream {
        pub fn open(rq: tiny_http::Request, extra: &[(&str, &str)]) -> Stream {
            let mut head = String::from(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                 Connection: close\r\nTransfer-Encoding: chunked\r\n",
            );
            for (k, v) in extra {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let mut out = rq.into_writer();
            let _ = out.write_all(head.as_bytes());
            let _ = out.flush();
            Stream(out)
        }

        /// Writes raw stream text as one chunk; false once the client is gone.
        pub fn raw(&mut self, text: &str) -> bool {
            write!(self.0, "{:x}\r\n{text}\r\n", text.len()).is_ok() && self.0.flush().is_ok()
        }

        pub fn event(&mut self, name: Option<&str>, data: &str) -> bool {
            self.raw(&crate::sse::event(name, data))
        }

        /// Ends the response.
        pub fn finish(mut self) {
            let _ = self.0.write_all(b"0\r\n\r\n");
            let _ = self.0.flush();
        }
    }

    /// A request's body as text.
    pub fn body(rq: &mut tiny_http::Request) -> String {
        let mut s = String::new();
        let _ = rq.as_reader().read_to_string(&mut s);
        s
    }

    /// A request header's value.
    pub fn header(rq: &tiny_http::Request, name: &str) -> Option<String> {
        rq.headers()
            .iter()
            .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads events from input delivered in chunks of `step` bytes (to cross buffer edges).
    fn events(input: &[u8], step: usize) -> Vec<Event> {
        struct Drip<'a>(&'a [u8], usize);
        impl Read for Drip<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut r = EventReader::new(Drip(input, step));
        let mut out = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> Event {
        Event {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
        }
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let text = ": hello\nevent: endpoint\ndata: /m?s=1\n\ndata:{\"a\":1}\n\ndata: one\ndata:  two\ndata\n\nid: 7\nevent: x\ndata: y\n\n";
        for step in [1, 2, 3, 1000] {
            assert_eq!(
                events(text.as_bytes(), step),
                vec![
                    ev("endpoint", "/m?s=1", None),
                    ev("message", "{\"a\":1}", None),
                    ev("message", "one\n two\n", None),
                    ev("x", "y", Some("7")),
                ]
            );
        }
    }

    #[test]
    fn every_line_ending_works() {
        for text in [
            "data: a\r\n\r\ndata: b\r\n\r\n",
            "data: a\r\rdata: b\r\r",
            "data: a\n\ndata: b\n\n",
            "\u{feff}data: a\r\n\ndata: b\r\r\n",
        ] {
            for step in [1, 2, 64] {
                assert_eq!(
                    events(text.as_bytes(), step),
                    vec![ev("message", "a", None), ev("message", "b", None)],
                    "{text:?} in steps of {step}"
                );
            }
        }
    }

    #[test]
    fn events_without_data_or_unfinished_are_not_dispatched() {
        assert_eq!(
            events(b"event: x\n\nretry: 10\nid: 3\n\ndata: tail", 7),
            vec![]
        );
        let mut r = EventReader::new(&b"retry: 1500\nretry: x\nid: a\0b\ndata:\n\n"[..]);
        assert_eq!(r.next_event().unwrap(), Some(ev("message", "", None)));
        assert_eq!(r.retry, Some(1500));
        let mut r = EventReader::new(&b"id: p-1\nretry: 500\n\n: bye\n"[..]);
        assert_eq!(r.next_event().unwrap(), None);
        assert_eq!((r.last_id(), r.retry), (Some("p-1"), Some(500)));
    }

    #[test]
    fn a_huge_data_line_is_read_whole() {
        let big = "x".repeat(5 << 20);
        let text = format!("event: message\ndata: {big}\n\n");
        let got = events(text.as_bytes(), 1 << 16);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data.len(), big.len());
    }
}
