//! `GET /api/call-records?format=jsonl`: every matching call record as JSON Lines, streamed
//! (tiny_http sends a reader of unknown length chunked, 8 KiB at a time), so memory stays at
//! one cursor step of records however many are exported. The state lock is taken per step and
//! never held while writing.

use std::io::{self, Read};

use super::{routes, send, Reply, Req};
use crate::service::{self, CallRecordsExport};
use crate::state::Shared;

/// The media type of the export.
pub const JSONL: &str = "application/x-ndjson; charset=utf-8";

/// Whether this request is an export (served here rather than by the route table).
pub fn is_export(method: &str, path: &str, query: &[(String, String)]) -> bool {
    matches!(method, "GET" | "HEAD")
        && path.trim_end_matches('/') == "/api/call-records"
        && query.iter().any(|(k, v)| k == "format" && v == "jsonl")
}

/// Answers an export request: the lines, or a JSON error for bad filters.
pub fn serve(shared: &Shared, rq: tiny_http::Request, req: &Req, extra: &[(&str, String)]) {
    let filter = match routes::record_filter(req) {
        Ok(f) => f,
        Err(e) => return send(rq, Reply::error(&e), extra),
    };
    let lines = Lines {
        records: service::call_records_export(shared, filter, routes::names_client_events(req)),
        buf: Vec::new(),
        at: 0,
    };
    let mut response = tiny_http::Response::new(200.into(), Vec::new(), lines, None, None);
    for (k, v) in [
        ("Content-Type", JSONL),
        (
            "Content-Disposition",
            "attachment; filename=\"call-records.jsonl\"",
        ),
        ("Cache-Control", "no-store"),
        super::NOSNIFF,
    ]
    .iter()
    .copied()
    .chain(extra.iter().map(|(k, v)| (*k, v.as_str())))
    {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            response.add_header(h);
        }
    }
    if let Err(e) = rq.respond(response) {
        log::debug!("http: call-record export ended early: {e}");
    }
}

/// The export as bytes: one line of JSON per record.
struct Lines<'a> {
    records: CallRecordsExport<'a>,
    buf: Vec<u8>,
    at: usize,
}

impl Read for Lines<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.buf.len() {
            let Some(step) = self.records.next() else {
                return Ok(0);
            };
            self.buf.clear();
            self.at = 0;
            for record in step {
                serde_json::to_writer(&mut self.buf, &record).map_err(io::Error::other)?;
                self.buf.push(b'\n');
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
