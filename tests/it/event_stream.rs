//! `GET /api/events` over real HTTP: live events with ids, replay after `Last-Event-ID`,
//! `resync` when the missed events are gone, the origin rule, and shutdown with streams open.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;

use serde_json::{json, Value};

use crate::support::{
    call_start_body, deadline, open_response, pause_id, raw_request, OpenResponse, Server,
};

/// An open event stream read line by line, with a deadline on every read.
pub struct Stream {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// One event as read: id, name and data.
#[derive(Debug)]
pub struct Ev {
    pub id: Option<String>,
    pub name: String,
    pub data: Value,
}

impl Stream {
    pub fn open(port: u16, extra: &[(&str, &str)], query: &str) -> Stream {
        let mut headers = vec![("Accept", "text/event-stream")];
        headers.extend_from_slice(extra);
        let request = raw_request(port, "GET", &format!("/api/events{query}"), &headers, None);
        let OpenResponse {
            status,
            headers,
            body: reader,
        } = open_response(port, &request, deadline());
        Stream {
            reader,
            status,
            headers,
        }
    }

    /// The next event (chunk-size lines and comments skipped).
    pub fn next(&mut self) -> Ev {
        let (mut id, mut name, mut data) = (None, String::new(), String::new());
        loop {
            let mut line = String::new();
            let n = self
                .reader
                .read_line(&mut line)
                .expect("an event within the deadline");
            assert!(n > 0, "the stream ended");
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            } else if line.is_empty() && !name.is_empty() {
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Ev { id, name, data };
            }
        }
    }
}

#[test]
fn events_stream_live_replay_after_an_id_and_resync_when_too_old() {
    let s = Server::start(&["--memory"]);
    let c = s.client();
    let mut live = Stream::open(s.port, &[], "");
    assert_eq!(live.status, 200);
    assert!(live
        .headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("Content-Type")
            && v.eq_ignore_ascii_case("text/event-stream")));

    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    let first = live.next();
    assert_eq!(first.name, "breakpoints_changed");
    assert_eq!(first.data["type"], "breakpoints_changed");
    let first_id: u64 = first.id.as_deref().unwrap().parse().unwrap();
    assert_eq!(first.data["seq"], first_id);

    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![], json!({})),
    );
    let pid = pause_id(&start);
    let paused = live.next();
    assert_eq!(paused.name, "execution_paused");
    assert_eq!(paused.data["pause_id"], pid.as_str());
    c.post_ok(
        &format!("/api/paused/{pid}/continue"),
        &json!({"action": "continue"}),
    );
    let resumed = live.next();
    assert_eq!(resumed.name, "execution_resumed");
    assert_eq!(resumed.data["action"], "continue");

    // A client that comes back gets what it missed, in order, then the live events.
    let mut again = Stream::open(s.port, &[("Last-Event-ID", &first_id.to_string())], "");
    assert_eq!(again.next().name, "execution_paused");
    assert_eq!(again.next().name, "execution_resumed");
    c.post_ok("/api/breakpoints", &json!({"function_name": "mul"}));
    assert_eq!(again.next().name, "breakpoints_changed");
    assert_eq!(live.next().name, "breakpoints_changed");
    // The query parameter does the same (for clients that cannot set the header).
    let mut by_query = Stream::open(s.port, &[], &format!("?last_event_id={first_id}"));
    assert_eq!(by_query.next().name, "execution_paused");

    // An id that is not one of ours: the client must reload its state.
    let mut lost = Stream::open(s.port, &[("Last-Event-ID", "not-a-number")], "");
    let ev = lost.next();
    assert_eq!(ev.name, "resync");
    assert!(ev.id.is_none());
}

#[test]
fn a_foreign_page_cannot_listen_and_the_stream_ends_at_shutdown() {
    let mut s = Server::start(&["--memory"]);
    let evil = Stream::open(s.port, &[("Origin", "http://evil.example")], "");
    assert_eq!(evil.status, 403);
    let own = format!("http://localhost:{}", s.port);
    let mut stream = Stream::open(s.port, &[("Origin", &own)], "");
    assert_eq!(stream.status, 200);
    assert!(stream
        .headers
        .iter()
        .any(|(k, v)| k == "Access-Control-Allow-Origin" && v == &own));
    // The server stops promptly with a stream open, and the stream ends.
    let status = s.signal_and_wait("-TERM");
    assert!(status.success(), "{status:?}");
    let mut line = String::new();
    let ended = loop {
        line.clear();
        match stream.reader.read_line(&mut line) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    assert!(ended, "the stream ends when the server exits");
}
