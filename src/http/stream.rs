//! A streamed `text/event-stream` response written by hand over tiny_http's raw writer:
//! tiny_http buffers chunked responses, so each event is written as one chunk and flushed at
//! once. HTTP/1.0 clients get the stream unchunked and the connection closes at the end.

use std::io::{self, Write};

use crate::sse;

/// An open event stream.
pub struct EventStream {
    out: Box<dyn Write + Send + 'static>,
    chunked: bool,
}

impl EventStream {
    /// Sends the status line and headers (plus `extra`) and returns the stream.
    pub fn open(
        rq: tiny_http::Request,
        status: u16,
        extra: &[(&str, String)],
    ) -> io::Result<EventStream> {
        let chunked = *rq.http_version() >= tiny_http::HTTPVersion(1, 1);
        let mut head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             X-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
            if status == 200 { "OK" } else { "Status" }
        );
        if chunked {
            head.push_str("Transfer-Encoding: chunked\r\n");
        }
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        // The head says `Connection: close`: the connection ends with the stream.
        rq.close_connection();
        let mut out = rq.into_writer();
        out.write_all(head.as_bytes())?;
        out.flush()?;
        Ok(EventStream { out, chunked })
    }

    fn write_raw(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        if self.chunked {
            write!(self.out, "{:x}\r\n", text.len())?;
            self.out.write_all(text.as_bytes())?;
            self.out.write_all(b"\r\n")?;
        } else {
            self.out.write_all(text.as_bytes())?;
        }
        self.out.flush()
    }

    /// Writes one event and flushes it.
    pub fn event(&mut self, name: Option<&str>, data: &str) -> io::Result<()> {
        self.write_raw(&sse::event(name, data))
    }

    /// Writes one event with an `id` and a name, and flushes it.
    pub fn event_with_id(&mut self, id: &str, name: &str, data: &str) -> io::Result<()> {
        let mut text = format!("id: {}\n", id.replace(['\n', '\r'], ""));
        text.push_str(&sse::event(Some(name), data));
        self.write_raw(&text)
    }

    /// Writes a priming event: an `id`, the client's reconnection delay (`retry`, in ms) and
    /// empty data, which a client does not take for a message but remembers the id of.
    pub fn prime(&mut self, id: &str, retry_ms: u64) -> io::Result<()> {
        let id = id.replace(['\n', '\r'], "");
        self.write_raw(&format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
    }

    /// Writes a keep-alive comment.
    pub fn ping(&mut self) -> io::Result<()> {
        self.write_raw(&sse::comment("ping"))
    }

    /// Ends the stream (the terminating zero-length chunk).
    pub fn finish(mut self) {
        if self.chunked {
            let _ = self.out.write_all(b"0\r\n\r\n");
        }
        let _ = self.out.flush();
    }
}
