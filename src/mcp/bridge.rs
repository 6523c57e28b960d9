//! `--mcp` joining a running server: a verbatim bridge between this process's stdin and stdout
//! and the running server's Streamable HTTP endpoint (`/mcp`), so an agent started by an MCP
//! host shares the session that the web UI and scripts use. It never handles a message itself:
//! what the host writes is posted as it came, and what the server answers or sends is written
//! back as it came, one message per line.
//!
//! Threads: `bridge-in` reads stdin. A request (or a batch holding one) is posted from its own
//! `bridge-post` thread, so a request that waits (`breakpoint_wait_for_pause`, a REPL eval)
//! blocks nothing else; its answer arrives as a JSON body or on an event stream that may carry
//! progress notifications first, and everything on it is relayed. Notifications and responses
//! (cancellation included) are posted in order by `bridge-in` itself. When the host sends
//! `notifications/initialized`, `bridge-events` first opens the server's own event stream (list
//! changes, resource updates, `notifications/breakpoint/*`; the server drops what it has no
//! stream for), and the notification is posted once the stream is open. The `Mcp-Session-Id` and the
//! protocol version of the `initialize` exchange are sent back on every later message. A host
//! need not wait for the answer to `initialize` before it sends more: while an `initialize`
//! exchange is in flight, notifications and responses wait on `bridge-in` (so they keep their
//! order) and requests on their own thread, until its answer has been relayed.
//!
//! Which server is joined is decided before (`app::server_to_join`): only one that proves it
//! holds the secret beside its port file (`port_file`), so a process of another user's that
//! answers on the port never sees the agent's traffic.
//!
//! A request of the stateless revision 2026-07-28 (its `params._meta` names the revision, or it
//! is `server/discover`) is posted the stateless way instead: no session id; the headers
//! `MCP-Protocol-Version` (the revision its `_meta` names; 2026-07-28 for a bare discover),
//! `Mcp-Method` and, for `tools/call`, `resources/read` and `prompts/get`, `Mcp-Name`, built
//! from the body (`=?base64?…?=` when a value is not plain ASCII). Each gets an HTTP client of
//! its own: `notifications/cancelled` naming it closes its response stream (that is how the
//! revision cancels over HTTP) instead of being posted, and the request is not answered. A
//! `subscriptions/listen` is such a request whose stream stays open: what comes on it is
//! relayed line by line until the client cancels it or stdin closes.
//!
//! A request the server cannot answer (it is gone, or answers with an HTTP error without a
//! JSON-RPC body) gets a JSON-RPC error naming the cause. Stdin closing ends the bridge: it
//! deletes its session (the server cancels what the session still runs) and exits, and the
//! server keeps running. The server ending the session (it stopped, or forgot the session)
//! ends the bridge with an error on stderr, so the host shows the server as stopped.

use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{unbounded, Sender};
use serde_json::{json, Value};
use ureq::http::Response;
use ureq::Body;

use super::modern::PROTOCOL_VERSION_KEY;
use crate::jsonrpc;
use crate::upstream::http::{content_type, describe_status, drain, header_value, Client};
use crate::upstream::sse_parse::EventReader;

/// Longest stdin line, as for the server's own stdio transport.
const MAX_LINE_BYTES: u64 = crate::limits::MAX_STDIO_LINE_BYTES;
/// Largest JSON answer relayed.
const MAX_BODY: u64 = crate::limits::UPSTREAM_MAX_BODY;
/// Connecting to the running server (on loopback) may take this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a notification or response may take to post.
const POST_LIMIT: Duration = Duration::from_secs(30);

/// How the bridge ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Stdin closed: the host is done.
    StdinClosed,
    /// The server ended the session or cannot be reached.
    Lost(String),
}

/// Relays between this process's stdin and stdout and the server at `port` (stdout is then
/// this bridge's alone, as it is the stdio transport's in a server).
pub fn run_stdio(port: u16) -> End {
    run(port, io::stdin(), io::stdout())
}

/// Relays between `input`/`output` and `http://127.0.0.1:<port>/mcp` until stdin closes or the
/// session is lost.
pub fn run<R, W>(port: u16, input: R, output: W) -> End
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (done_tx, done_rx) = unbounded();
    let bridge = Arc::new(Bridge {
        url: format!("http://127.0.0.1:{port}/mcp"),
        client: Client::new(CONNECT_TIMEOUT),
        session: Mutex::new(None),
        version: Mutex::new(None),
        out: Mutex::new(io::BufWriter::new(Box::new(output))),
        events_opened: AtomicBool::new(false),
        initializing: Mutex::new(0),
        initialized: Condvar::new(),
        stops: Mutex::new(HashMap::new()),
        done: done_tx,
    });
    let reader = bridge.clone();
    let spawned = thread::Builder::new()
        .name("bridge-in".into())
        .spawn(move || reader.read_loop(io::BufReader::new(input)));
    if let Err(e) = spawned {
        return End::Lost(format!("cannot start the stdin thread: {e}"));
    }
    let end = done_rx.recv().unwrap_or(End::StdinClosed);
    bridge.close();
    end
}

struct Bridge {
    url: String,
    client: Client,
    session: Mutex<Option<String>>,
    /// The protocol version the `initialize` exchange settled on.
    version: Mutex<Option<String>>,
    out: Mutex<io::BufWriter<Box<dyn Write + Send>>>,
    events_opened: AtomicBool,
    /// `initialize` exchanges in flight: what the host sends meanwhile waits for the answer
    /// (it needs the session id), in the order it came.
    initializing: Mutex<usize>,
    /// Signalled when an `initialize` exchange ends.
    initialized: Condvar,
    /// The stop flags of the stateless requests in flight, by request id (as JSON text).
    stops: Mutex<HashMap<String, Arc<AtomicBool>>>,
    done: Sender<End>,
}

/// The headers of a stateless (2026-07-28) request, or `None` for a legacy message: a single
/// request whose `params._meta` names a revision, or `server/discover`.
fn stateless_headers(msg: &Value) -> Option<Vec<(&'static str, String)>> {
    let method = msg.get("method").and_then(Value::as_str)?;
    msg.get("id").filter(|v| !v.is_null())?;
    let named = msg
        .pointer("/params/_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION_KEY));
    if named.is_none() && method != "server/discover" {
        return None;
    }
    let revision = match named {
        Some(Value::String(v)) => v.clone(),
        Some(other) => other.to_string(),
        None => super::version::MODERN[0].to_owned(),
    };
    let mut headers = vec![
        ("MCP-Protocol-Version", header_value(&revision)),
        ("Mcp-Method", header_value(method)),
    ];
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(name) = key
        .and_then(|k| msg.pointer(&format!("/params/{k}")))
        .and_then(Value::as_str)
    {
        headers.push(("Mcp-Name", header_value(name)));
    }
    Some(headers)
}

/// The id a `notifications/cancelled` names, as a key of `Bridge::stops`.
fn cancelled_id(msg: &Value) -> Option<String> {
    if msg.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    msg.pointer("/params/requestId")
        .filter(|v| !v.is_null())
        .map(Value::to_string)
}

/// What a line from the host is.
enum Kind {
    /// A request, or a batch holding one, with the ids to answer if the exchange fails, and
    /// whether it is `initialize`.
    Request { ids: Vec<Value>, initialize: bool },
    /// Notifications and responses, answered by nothing.
    Other { initialized: bool },
}

/// A message's method and id (a non-null one).
fn one(m: &Value) -> (Option<&str>, Option<Value>) {
    let method = m.get("method").and_then(Value::as_str);
    let id = m.get("id").filter(|v| !v.is_null()).cloned();
    (method, id)
}

fn kind(msg: &Value) -> Kind {
    let items: Vec<&Value> = match msg {
        Value::Array(batch) => batch.iter().collect(),
        other => vec![other],
    };
    let ids: Vec<Value> = items
        .iter()
        .filter_map(|m| match one(m) {
            (Some(_), Some(id)) => Some(id),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        Kind::Other {
            initialized: items
                .iter()
                .any(|m| one(m).0 == Some("notifications/initialized")),
        }
    } else {
        Kind::Request {
            ids,
            initialize: items.iter().any(|m| one(m).0 == Some("initialize")),
        }
    }
}

impl Bridge {
    fn read_loop(self: Arc<Self>, mut input: impl BufRead) {
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
                    log::warn!("mcp bridge: reading stdin failed: {e}");
                    break;
                }
            }
            if buf.len() as u64 > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                buf = Vec::new();
                self.write(&json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": jsonrpc::PARSE_ERROR,
                    "message": format!("message longer than {MAX_LINE_BYTES} bytes")}}));
                if super::stdio::skip_line(&mut input).is_err() {
                    break;
                }
                continue;
            }
            let line = String::from_utf8_lossy(&buf).trim().to_owned();
            if line.is_empty() {
                continue;
            }
            log::trace!("< bridge {}", jsonrpc::excerpt(&line));
            match serde_json::from_str::<Value>(&line) {
                Ok(msg) => match kind(&msg) {
                    Kind::Request { ids, .. } if stateless_headers(&msg).is_some() => {
                        let headers = stateless_headers(&msg).unwrap_or_default();
                        let me = self.clone();
                        let spawned = thread::Builder::new()
                            .name("bridge-post".into())
                            .spawn(move || me.stateless(line.into_bytes(), &ids, headers));
                        if let Err(e) = spawned {
                            log::error!("mcp bridge: cannot start a thread: {e}");
                        }
                    }
                    Kind::Request { ids, initialize } => {
                        let me = self.clone();
                        if initialize {
                            *self.lock_initializing() += 1;
                        }
                        let spawned =
                            thread::Builder::new()
                                .name("bridge-post".into())
                                .spawn(move || {
                                    if !initialize {
                                        me.await_initialize();
                                    }
                                    me.exchange(line.into_bytes(), &ids, initialize);
                                    if initialize {
                                        me.initialize_ended();
                                    }
                                });
                        if let Err(e) = spawned {
                            log::error!("mcp bridge: cannot start a thread: {e}");
                            if initialize {
                                self.initialize_ended();
                            }
                        }
                    }
                    Kind::Other { .. } if self.abandon(&msg) => {}
                    Kind::Other { initialized } => {
                        // Sent before the answer to `initialize` arrived (a host need not
                        // wait for it): queued here, in order, until the session id is known.
                        self.await_initialize();
                        // The server's stream is open before anything can happen that it
                        // would announce (it drops what it cannot deliver).
                        if initialized {
                            self.open_event_stream();
                        }
                        self.post_one(line.into_bytes());
                    }
                },
                // Not JSON: the server answers it with a parse error, relayed.
                Err(_) => self.exchange(line.into_bytes(), &[Value::Null], false),
            }
        }
        let _ = self.done.send(End::StdinClosed);
    }

    fn lock_initializing(&self) -> std::sync::MutexGuard<'_, usize> {
        self.initializing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn initialize_ended(&self) {
        let mut n = self.lock_initializing();
        *n = n.saturating_sub(1);
        self.initialized.notify_all();
    }

    /// Waits (at most `POST_LIMIT`) until no `initialize` exchange is in flight.
    fn await_initialize(&self) {
        let until = std::time::Instant::now() + POST_LIMIT;
        let mut n = self.lock_initializing();
        while *n > 0 {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                log::warn!("mcp bridge: no answer to initialize after {POST_LIMIT:?}; going on");
                return;
            }
            n = self
                .initialized
                .wait_timeout(n, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Writes one message as one line.
    fn write(&self, msg: &Value) {
        let text = msg.to_string();
        log::trace!("> bridge {}", jsonrpc::excerpt(&text));
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let written = out
            .write_all(text.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if let Err(e) = written {
            log::debug!("mcp bridge: stdout closed ({e})");
        }
    }

    /// Answers each of `ids` with a JSON-RPC error.
    fn fail(&self, ids: &[Value], message: &str) {
        for id in ids {
            self.write(&json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32000, "message": message}}));
        }
    }

    fn lost(&self, why: String) {
        let _ = self.done.send(End::Lost(why));
    }

    fn post(&self, body: Vec<u8>, limit: Duration) -> (Result<Response<Body>, ureq::Error>, bool) {
        let session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let had_session = session.is_some();
        let rq = self
            .client
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(limit))
            .build()
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        let result = self.session_headers(rq, session).send(body);
        if let Ok(resp) = &result {
            if let Some(id) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.to_owned());
            }
        }
        (result, had_session)
    }

    /// Adds the session id (when there is one) and the protocol version the `initialize`
    /// exchange settled on.
    fn session_headers<B>(
        &self,
        mut rq: ureq::RequestBuilder<B>,
        session: Option<String>,
    ) -> ureq::RequestBuilder<B> {
        if let Some(id) = session {
            rq = rq.header("Mcp-Session-Id", id);
        }
        if let Some(v) = self
            .version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            rq = rq.header("MCP-Protocol-Version", v);
        }
        rq
    }

    /// A 404 to a message that carried the session: the server forgot it (it restarted, or
    /// the session was closed).
    fn check_session(&self, status: u16, had_session: bool) {
        if status == 404 && had_session {
            self.lost(
                "the running server ended this MCP session (it restarted or closed it)".into(),
            );
        }
    }

    /// Posts a notification or response, relaying an error answer if there is one.
    fn post_one(&self, body: Vec<u8>) {
        let (result, had_session) = self.post(body, POST_LIMIT);
        match result {
            Ok(resp) if resp.status().is_success() => drain(resp),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let (_, message) = describe_status(resp);
                log::warn!("mcp bridge: the server refused a message: HTTP {message}");
                self.check_session(status, had_session);
            }
            Err(e) => self.lost(format!(
                "the running server at {} cannot be reached: {}",
                self.url,
                self.client.describe(&e)
            )),
        }
    }

    /// A `notifications/cancelled` naming a stateless request in flight: its stream is closed
    /// (the server cancels it), and the notification goes no further.
    fn abandon(&self, msg: &Value) -> bool {
        let Some(id) = cancelled_id(msg) else {
            return false;
        };
        match self
            .stops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
        {
            Some(stop) => {
                log::debug!("mcp bridge: request {id} cancelled: closing its stream");
                stop.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Posts a stateless request on a client of its own (stopped by [`Bridge::abandon`]) and
    /// relays what comes back; a request given up is not answered.
    fn stateless(&self, body: Vec<u8>, ids: &[Value], headers: Vec<(&'static str, String)>) {
        let (client, stop) = self.client.for_request(CONNECT_TIMEOUT);
        let key = ids.first().map(Value::to_string).unwrap_or_default();
        self.stops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), stop);
        let mut rq = client
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(Duration::from_secs(24 * 3600)))
            .build()
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (k, v) in headers {
            rq = rq.header(k, v);
        }
        let result = rq.send(body);
        self.relay(result, &client, ids, false, false);
        self.stops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Posts a request and relays everything that comes back until its answer.
    fn exchange(&self, body: Vec<u8>, ids: &[Value], initialize: bool) {
        let (result, had_session) = self.post(body, Duration::from_secs(24 * 3600));
        self.relay(result, &self.client, ids, initialize, had_session);
    }

    /// Relays the answer to a posted request (through `client`): a JSON body, or an event
    /// stream until it ends. Nothing is said for a request whose client was stopped.
    fn relay(
        &self,
        result: Result<Response<Body>, ureq::Error>,
        client: &Client,
        ids: &[Value],
        initialize: bool,
        had_session: bool,
    ) {
        let resp = match result {
            Ok(r) => r,
            Err(_) if client.stopped() => return,
            Err(e) => {
                let why = format!(
                    "the running server at {} cannot be reached: {}",
                    self.url,
                    self.client.describe(&e)
                );
                self.fail(ids, &why);
                return self.lost(why);
            }
        };
        let status = resp.status().as_u16();
        let relay = |msg: Value| {
            if initialize {
                self.learn_version(&msg);
            }
            self.write(&msg);
        };
        match content_type(&resp).as_str() {
            "text/event-stream" if resp.status().is_success() => {
                let mut events = EventReader::new(resp.into_body().into_reader());
                loop {
                    match events.next_event() {
                        Ok(Some(ev)) if ev.event == "message" && !ev.data.trim().is_empty() => {
                            match serde_json::from_str(&ev.data) {
                                Ok(msg) => relay(msg),
                                Err(e) => log::warn!("mcp bridge: an event is not JSON ({e})"),
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) if client.stopped() => break,
                        Err(e) => {
                            self.fail(ids, &format!("the answer stream failed: {e}"));
                            break;
                        }
                    }
                }
            }
            "application/json" => {
                let bytes = resp
                    .into_body()
                    .into_with_config()
                    .limit(MAX_BODY)
                    .read_to_vec();
                match bytes.map(|b| serde_json::from_slice::<Value>(&b)) {
                    Ok(Ok(msg)) => relay(msg),
                    _ => self.fail(ids, &format!("HTTP {status} with an unreadable answer")),
                }
                self.check_session(status, had_session);
            }
            _ if resp.status().is_success() => drain(resp),
            _ => {
                let (_, message) = describe_status(resp);
                self.fail(ids, &format!("the running server answered HTTP {message}"));
                self.check_session(status, had_session);
            }
        }
    }

    fn learn_version(&self, msg: &Value) {
        if let Some(v) = msg
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
        {
            *self.version.lock().unwrap_or_else(|e| e.into_inner()) = Some(v.to_owned());
        }
    }

    /// Opens the server's own event stream once, on `bridge-events`, and returns once its
    /// answer arrived (or `CONNECT_TIMEOUT` passed); its end ends the bridge.
    fn open_event_stream(self: &Arc<Self>) {
        if self.events_opened.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        let (opened_tx, opened_rx) = crossbeam_channel::bounded(1);
        let spawned = thread::Builder::new()
            .name("bridge-events".into())
            .spawn(move || {
                me.read_events(move || {
                    let _ = opened_tx.send(());
                })
            });
        match spawned {
            Ok(_) => drop(opened_rx.recv_timeout(CONNECT_TIMEOUT)),
            Err(e) => log::error!("mcp bridge: cannot start the event stream thread: {e}"),
        }
    }

    fn read_events(&self, opened: impl FnOnce()) {
        let session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let rq = self
            .client
            .agent
            .get(&self.url)
            .header("Accept", "text/event-stream");
        let answer = self.session_headers(rq, session).call();
        opened();
        let resp = match answer {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let (_, message) = describe_status(r);
                return self.lost(format!("the server's event stream: HTTP {message}"));
            }
            Err(e) => return self.lost(format!("the server's event stream: {e}")),
        };
        let mut events = EventReader::new(resp.into_body().into_reader());
        loop {
            match events.next_event() {
                Ok(Some(ev)) if ev.event == "message" && !ev.data.trim().is_empty() => {
                    match serde_json::from_str::<Value>(&ev.data) {
                        Ok(msg) => self.write(&msg),
                        Err(e) => log::warn!("mcp bridge: an event is not JSON ({e})"),
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    log::debug!("mcp bridge: the event stream failed: {e}");
                    break;
                }
            }
        }
        if !self.client.stopped() {
            self.lost("the running server closed this session's event stream (it stopped)".into());
        }
    }

    /// Ends the session on the server (which cancels what it still runs) and stops every read.
    fn close(&self) {
        let session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.client.stop();
        let Some(id) = session else { return };
        let client = Client::new(Duration::from_secs(1));
        let rq = client
            .agent
            .delete(&self.url)
            .config()
            .timeout_global(Some(Duration::from_secs(2)))
            .build();
        match self.session_headers(rq, Some(id)).call() {
            Ok(r) => log::debug!("mcp bridge: DELETE of the session answered {}", r.status()),
            Err(e) => log::debug!("mcp bridge: DELETE of the session failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart_by_what_answers_them() {
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"});
        assert!(matches!(
            kind(&req),
            Kind::Request {
                initialize: true,
                ..
            }
        ));
        let batch = json!([{"jsonrpc": "2.0", "method": "notifications/initialized"},
                           {"jsonrpc": "2.0", "id": "a", "method": "tools/list"}]);
        match kind(&batch) {
            Kind::Request { ids, initialize } => {
                assert_eq!(ids, [json!("a")]);
                assert!(!initialize);
            }
            Kind::Other { .. } => panic!("a batch with a request"),
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(matches!(kind(&note), Kind::Other { initialized: true }));
        let response = json!({"jsonrpc": "2.0", "id": 7, "result": {}});
        assert!(matches!(
            kind(&response),
            Kind::Other { initialized: false }
        ));
    }

    #[test]
    fn stateless_requests_get_their_headers_from_the_body() {
        let env = json!({PROTOCOL_VERSION_KEY: "2026-07-28",
                         "io.modelcontextprotocol/clientCapabilities": {}});
        let h = |m: Value| {
            stateless_headers(&m).map(|v| {
                v.into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            h(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"})).unwrap(),
            [
                "MCP-Protocol-Version: 2026-07-28",
                "Mcp-Method: server/discover"
            ]
        );
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "größe", "_meta": env}});
        assert_eq!(
            h(call).unwrap()[2],
            format!("Mcp-Name: {}", header_value("größe"))
        );
        let read = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
                          "params": {"uri": "breakpoint://status", "_meta": env}});
        assert_eq!(h(read).unwrap()[2], "Mcp-Name: breakpoint://status");
        // Legacy requests, notifications: posted as before.
        assert!(h(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).is_none());
        assert!(h(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"_meta": env}})
        )
        .is_none());
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": "a"}});
        assert_eq!(cancelled_id(&cancel).as_deref(), Some("\"a\""));
        assert_eq!(json!("a").to_string(), "\"a\"", "the key stateless() uses");
    }

    /// Input that hands over what the test sends, then end of file once the test lets go.
    struct Feed(crossbeam_channel::Receiver<Vec<u8>>, Vec<u8>);

    impl Read for Feed {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.1.is_empty() {
                match self.0.recv() {
                    Ok(chunk) => self.1 = chunk,
                    Err(_) => return Ok(0),
                }
            }
            let n = buf.len().min(self.1.len());
            buf[..n].copy_from_slice(&self.1[..n]);
            self.1.drain(..n);
            Ok(n)
        }
    }

    /// An event stream body that stays open until the test ends.
    struct Open(crossbeam_channel::Receiver<()>);

    impl Read for Open {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            let _ = self.0.recv();
            Ok(0)
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A host may send `notifications/initialized` before the answer to `initialize` arrived.
    /// The server here holds that answer until something else arrives (what the bridge did
    /// before: it opened the event stream and posted the notification without a session, so
    /// the server refused both and the bridge exited), or until 3 s passed without anything
    /// (what a bridge that queues the notification does). Either way is deterministic.
    #[test]
    fn a_notification_sent_before_the_initialize_answer_waits_for_the_session() {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let (seen_tx, seen_rx) = unbounded::<(String, Option<String>, String)>();
        let (open_tx, open_rx) = crossbeam_channel::unbounded::<()>();
        thread::spawn(move || {
            let init_answer = |rq: tiny_http::Request| {
                let body = json!({"jsonrpc": "2.0", "id": 1, "result": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "serverInfo": {"name": "fake", "version": "0"}}});
                let resp = tiny_http::Response::from_string(body.to_string())
                    .with_header(
                        tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap(),
                    )
                    .with_header(tiny_http::Header::from_bytes("Mcp-Session-Id", "s1").unwrap());
                let _ = rq.respond(resp);
            };
            let mut held: Option<tiny_http::Request> = None;
            loop {
                let next = if held.is_some() {
                    server.recv_timeout(Duration::from_secs(3))
                } else {
                    server.recv().map(Some)
                };
                let Ok(next) = next else { return };
                if let Some(rq) = held.take() {
                    init_answer(rq);
                }
                let Some(mut rq) = next else { continue };
                let mut body = String::new();
                let _ = rq.as_reader().read_to_string(&mut body);
                let session = rq
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Mcp-Session-Id"))
                    .map(|h| h.value.as_str().to_owned());
                let method = rq.method().as_str().to_owned();
                let _ = seen_tx.send((method.clone(), session, body.clone()));
                if body.contains("\"initialize\"") {
                    held = Some(rq);
                } else if method == "GET" {
                    let resp = tiny_http::Response::new(
                        200.into(),
                        vec![
                            tiny_http::Header::from_bytes("Content-Type", "text/event-stream")
                                .unwrap(),
                        ],
                        Open(open_rx.clone()),
                        None,
                        None,
                    );
                    thread::spawn(move || drop(rq.respond(resp)));
                } else {
                    let _ = rq.respond(tiny_http::Response::empty(202));
                }
            }
        });
        let (feed_tx, feed_rx) = crossbeam_channel::unbounded();
        let out = Sink::default();
        let (end_tx, end_rx) = crossbeam_channel::bounded(1);
        let sink = out.clone();
        thread::spawn(move || {
            let _ = end_tx.send(run(port, Feed(feed_rx, Vec::new()), sink));
        });
        let lines = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        );
        feed_tx.send(lines.as_bytes().to_vec()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while !seen
            .iter()
            .any(|(_, _, b): &(String, Option<String>, String)| {
                b.contains("notifications/initialized")
            })
        {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match seen_rx.recv_timeout(left) {
                Ok(r) => seen.push(r),
                Err(_) => panic!("the notification never arrived; seen: {seen:?}"),
            }
        }
        assert!(seen[0].2.contains("\"initialize\""), "{seen:?}");
        for (method, session, body) in &seen[1..] {
            assert_eq!(
                session.as_deref(),
                Some("s1"),
                "{method} {body} was sent without the session: {seen:?}"
            );
        }
        assert!(end_rx.try_recv().is_err(), "the bridge ended early");
        drop(feed_tx);
        let end = end_rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(end, End::StdinClosed);
        drop(open_tx);
        let written = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(written.contains("\"serverInfo\""), "{written}");
    }
}
