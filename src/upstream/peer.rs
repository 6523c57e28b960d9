//! One JSON-RPC conversation with an upstream MCP server, independent of the transport.
//!
//! A [`Peer`] numbers its requests, keeps a table of pending ids, and hands each caller a
//! one-shot channel; the transport's reader thread feeds every incoming message to
//! [`Peer::incoming`], which completes the matching caller, answers the server's own requests
//! (`ping` with `{}`, everything else with -32601), and reports notifications that matter to
//! the manager. Calls to one server therefore run concurrently: nothing is serialised by a lock
//! held across I/O. When the transport ends, [`Peer::closed`] fails every pending call at once.
//!
//! A transport implements [`Link`]: `send` puts one message on the wire (a line on the child's
//! stdin, a POST), and `close` tears the connection down.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use serde_json::{json, Map, Value};

use crate::jsonrpc::METHOD_NOT_FOUND;
use crate::limits::UPSTREAM_MAX_PAGES;

/// The protocol revision this client offers; older revisions the server answers with are
/// accepted.
pub const OFFERED_VERSION: &str = "2025-11-25";

/// Revisions this client can speak, newest first.
pub const KNOWN_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Why a request did not produce a result.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// No answer within the timeout; the server was sent `notifications/cancelled`.
    Timeout(Duration),
    /// The connection ended (or was never usable) before the answer came.
    Disconnected(String),
    /// The server answered with a JSON-RPC error.
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// An HTTP transport got a status that is not a JSON-RPC answer. `mcp_error` tells whether
    /// the body was a JSON-RPC error (a Streamable HTTP server saying no) or not (a plain 404 or
    /// 405: no Streamable HTTP endpoint here).
    Http {
        status: u16,
        mcp_error: bool,
        message: String,
    },
    /// The answer was not what the method promises.
    Invalid(String),
    /// Our own caller gave up (its request was cancelled); the server was told.
    Cancelled,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no answer within {}", show_duration(*d)),
            Failure::Disconnected(why) => write!(f, "connection lost: {why}"),
            Failure::Rpc { code, message, .. } => write!(f, "server error {code}: {message}"),
            Failure::Http {
                status, message, ..
            } => write!(f, "HTTP {status}: {message}"),
            Failure::Invalid(why) => write!(f, "invalid answer: {why}"),
            Failure::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// `30 s`, `1.5 s`, `250 ms`.
pub fn show_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// A transport under a [`Peer`].
pub trait Link: Send + Sync {
    /// Puts one JSON-RPC message on the wire. It may block briefly (a pipe write); a transport
    /// whose answers come back on the same exchange (Streamable HTTP) sends from its own thread
    /// and feeds them to [`Peer::incoming`], or reports a failed exchange with
    /// [`Peer::fail`].
    fn send(&self, peer: &Arc<Peer>, msg: &Value) -> Result<(), String>;

    /// Ends the connection: idempotent, and it must not block for long.
    fn close(&self);
}

/// What a peer tells its owner.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// The server sent `notifications/tools/list_changed`.
    ToolsChanged,
    /// The server sent `notifications/resources/list_changed`.
    ResourcesChanged,
    /// The connection ended (once per peer).
    Closed(String),
}

/// The result of `initialize`.
#[derive(Clone, Debug, PartialEq)]
pub struct Initialized {
    pub protocol_version: String,
    pub server_info: Value,
    pub capabilities: Map<String, Value>,
    pub instructions: Option<String>,
}

type Reply = Result<Value, Failure>;

/// One conversation. Create it, connect a transport with it, then [`Peer::set_link`].
pub struct Peer {
    /// The upstream server's name (for logs).
    pub name: String,
    link: OnceLock<Box<dyn Link>>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, Sender<Reply>>>,
    closed: Mutex<Option<String>>,
    is_closed: AtomicBool,
    version: OnceLock<String>,
    notices: Box<dyn Fn(Notice) + Send + Sync>,
    /// Progress tokens we sent, and where their `notifications/progress` params go.
    progress: Mutex<HashMap<String, Sender<Value>>>,
}

impl Peer {
    /// A peer reporting to `notices` (called from transport threads; it must not block).
    pub fn new(name: &str, notices: impl Fn(Notice) + Send + Sync + 'static) -> Arc<Peer> {
        Arc::new(Peer {
            name: name.to_owned(),
            link: OnceLock::new(),
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            is_closed: AtomicBool::new(false),
            version: OnceLock::new(),
            notices: Box::new(notices),
            progress: Mutex::new(HashMap::new()),
        })
    }

    /// Attaches the transport (once).
    pub fn set_link(&self, link: Box<dyn Link>) {
        if self.link.set(link).is_err() {
            log::warn!("upstream {}: transport attached twice", self.name);
        }
    }

    /// The negotiated protocol revision, once `initialize` succeeded.
    pub fn protocol_version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.is_closed.load(Ordering::SeqCst)
    }

    /// Why the connection ended, if it has.
    pub fn close_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    fn send(self: &Arc<Self>, msg: &Value) -> Result<(), String> {
        match self.link.get() {
            Some(link) => link.send(self, msg),
            None => Err("no transport attached".to_owned()),
        }
    }

    /// Sends a request and waits up to `timeout` for its answer. On timeout the server is sent
    /// `notifications/cancelled` for the request.
    pub fn request(self: &Arc<Self>, method: &str, params: Value, timeout: Duration) -> Reply {
        self.request_cancellable(method, params, timeout, None)
    }

    /// [`Peer::request_cancellable`] that also asks for progress: the request carries a
    /// `_meta.progressToken` of ours, and the params of every `notifications/progress` for it
    /// go to `progress` until the request ends.
    pub fn request_with_progress(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
        progress: Sender<Value>,
    ) -> Reply {
        let token = format!("cideldill-{}", crate::ids::random_hex(8));
        if let Some(obj) = params.as_object_mut() {
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert("progressToken".into(), json!(token));
            }
        }
        lock(&self.progress).insert(token.clone(), progress);
        let reply = self.request_cancellable(method, params, timeout, cancel);
        lock(&self.progress).remove(&token);
        reply
    }

    /// [`Peer::request`] that also ends when `cancel` receives (or disconnects): the server is
    /// then sent `notifications/cancelled` and the caller gets [`Failure::Cancelled`].
    pub fn request_cancellable(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = bounded(1);
        {
            let mut pending = lock(&self.pending);
            // Checked under the pending lock: `closed` drains the table under the same lock, so
            // a request is either failed by it or sees the flag here.
            if self.is_closed() {
                let why = self.close_reason().unwrap_or_default();
                return Err(Failure::Disconnected(why));
            }
            pending.insert(id, tx);
        }
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        if let Err(e) = self.send(&msg) {
            lock(&self.pending).remove(&id);
            return Err(Failure::Disconnected(e));
        }
        let never = crossbeam_channel::never();
        let cancelled = crossbeam_channel::select! {
            recv(rx) -> reply => match reply {
                Ok(reply) => return reply,
                Err(_) => false,
            },
            recv(cancel.unwrap_or(&never)) -> _ => true,
            default(timeout) => false,
        };
        {
            let waiting = lock(&self.pending).remove(&id).is_some();
            if !waiting {
                // Answered (or failed) in the instant the wait ended.
                if let Ok(reply) = rx.try_recv() {
                    return reply;
                }
            }
            {
                if !self.is_closed() {
                    let reason = if cancelled {
                        "cancelled by our client".to_owned()
                    } else {
                        format!("timed out after {}", show_duration(timeout))
                    };
                    log::info!(
                        "upstream {}: {method} (id {id}) {reason}; sending notifications/cancelled",
                        self.name
                    );
                    let _ = self.notify(
                        "notifications/cancelled",
                        json!({"requestId": id, "reason": reason}),
                    );
                }
                if cancelled {
                    Err(Failure::Cancelled)
                } else {
                    Err(Failure::Timeout(timeout))
                }
            }
        }
    }

    /// Sends a notification.
    pub fn notify(self: &Arc<Self>, method: &str, params: Value) -> Result<(), String> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg)
    }

    /// `initialize` then `notifications/initialized`.
    pub fn initialize(self: &Arc<Self>, timeout: Duration) -> Result<Initialized, Failure> {
        let params = json!({
            "protocolVersion": OFFERED_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "cideldill-server", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", params, timeout)?;
        let Some(obj) = result.as_object() else {
            return Err(Failure::Invalid(
                "initialize result is not an object".into(),
            ));
        };
        let version = match obj.get("protocolVersion").and_then(Value::as_str) {
            Some(v) if !v.is_empty() => v.to_owned(),
            _ => {
                return Err(Failure::Invalid(
                    "initialize result has no protocolVersion".into(),
                ))
            }
        };
        if !KNOWN_VERSIONS.contains(&version.as_str()) {
            log::warn!(
                "upstream {}: server answered protocol version {version}; continuing as {OFFERED_VERSION} would",
                self.name
            );
        }
        let _ = self.version.set(version.clone());
        self.notify("notifications/initialized", Value::Null)
            .map_err(Failure::Disconnected)?;
        Ok(Initialized {
            protocol_version: version,
            server_info: obj.get("serverInfo").cloned().unwrap_or(Value::Null),
            capabilities: obj
                .get("capabilities")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            instructions: obj
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// A paginated list (`tools/list`, `resources/list`, …): every page's `key` items.
    pub fn list_all(
        self: &Arc<Self>,
        method: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..UPSTREAM_MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request(method, params, timeout)?;
            match page.get(key) {
                Some(Value::Array(list)) => items.extend(list.iter().cloned()),
                None | Some(Value::Null) => {}
                Some(_) => return Err(Failure::Invalid(format!("{method}: {key} is not a list"))),
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !c.is_empty() && cursor.as_deref() != Some(c) => {
                    cursor = Some(c.to_owned())
                }
                _ => return Ok(items),
            }
        }
        log::warn!(
            "upstream {}: {method} still paginating after {UPSTREAM_MAX_PAGES} pages; stopped",
            self.name
        );
        Ok(items)
    }

    /// Feeds one message (or batch) read from the transport.
    pub fn incoming(self: &Arc<Self>, msg: Value) {
        match msg {
            Value::Array(batch) => {
                for m in batch {
                    self.incoming(m);
                }
            }
            Value::Object(obj) => self.incoming_object(obj),
            other => log::warn!(
                "upstream {}: ignoring a message that is not an object: {}",
                self.name,
                preview(&other.to_string())
            ),
        }
    }

    fn incoming_object(self: &Arc<Self>, obj: Map<String, Value>) {
        let method = obj.get("method").and_then(Value::as_str);
        let id = obj.get("id").filter(|v| !v.is_null());
        match (method, id) {
            (Some(method), Some(id)) => self.answer_request(method, id.clone()),
            (Some(method), None) => self.notification(method, obj.get("params")),
            (None, Some(id)) => {
                let reply = match (obj.get("result"), obj.get("error")) {
                    (Some(r), None) => Ok(r.clone()),
                    (_, Some(e)) => Err(Failure::Rpc {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        data: e.get("data").cloned(),
                    }),
                    (None, None) => Err(Failure::Invalid(
                        "a response with neither result nor error".into(),
                    )),
                };
                match id.as_i64() {
                    Some(n) => self.complete(n, reply),
                    None => log::warn!(
                        "upstream {}: a response to an id we never sent: {id}",
                        self.name
                    ),
                }
            }
            (None, None) => match obj.get("error") {
                Some(e) => log::warn!("upstream {}: error without an id: {e}", self.name),
                None => log::warn!(
                    "upstream {}: ignoring a message that is neither request, response nor notification",
                    self.name
                ),
            },
        }
    }

    fn complete(&self, id: i64, reply: Reply) {
        match lock(&self.pending).remove(&id) {
            Some(tx) => {
                let _ = tx.send(reply);
            }
            None => log::debug!(
                "upstream {}: an answer to id {id}, which is no longer awaited",
                self.name
            ),
        }
    }

    /// Fails one request from the transport (an HTTP exchange that produced no answer).
    pub fn fail(&self, id: &Value, failure: Failure) {
        if let Some(n) = id.as_i64() {
            self.complete(n, Err(failure));
        }
    }

    fn answer_request(self: &Arc<Self>, method: &str, id: Value) {
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            let what = match method {
                "sampling/createMessage" => "sampling",
                "elicitation/create" => "elicitation",
                "roots/list" => "roots",
                _ => "this method",
            };
            log::info!(
                "upstream {}: refused the server's {method} request ({what} is not supported)",
                self.name
            );
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!("{method}: {what} is not supported by this client (cideldill-server declares no client capabilities)"),
            }})
        };
        if let Err(e) = self.send(&reply) {
            log::warn!(
                "upstream {}: could not answer the server's {method}: {e}",
                self.name
            );
        }
    }

    fn notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => (self.notices)(Notice::ToolsChanged),
            "notifications/resources/list_changed" => (self.notices)(Notice::ResourcesChanged),
            "notifications/message" => {
                let params = params.cloned().unwrap_or(Value::Null);
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or("info");
                let data = params.get("data").cloned().unwrap_or(Value::Null);
                let text = match &data {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let lvl = match level {
                    "debug" => log::Level::Debug,
                    "info" | "notice" => log::Level::Info,
                    "warning" => log::Level::Warn,
                    _ => log::Level::Error,
                };
                log::log!(lvl, "upstream {} says: {}", self.name, preview(&text));
            }
            "notifications/progress" => {
                let params = params.cloned().unwrap_or(Value::Null);
                let token = match params.get("progressToken") {
                    Some(Value::String(t)) => t.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                match lock(&self.progress).get(&token) {
                    Some(tx) => {
                        let _ = tx.send(params);
                    }
                    None => log::debug!(
                        "upstream {}: progress for a token we do not know",
                        self.name
                    ),
                }
            }
            "notifications/cancelled" => log::debug!("upstream {}: {method}", self.name),
            _ => log::debug!("upstream {}: ignoring notification {method}", self.name),
        }
    }

    /// The transport ended: fails every pending request and reports [`Notice::Closed`] (once).
    pub fn closed(&self, reason: &str) {
        let drained: Vec<Sender<Reply>> = {
            let mut pending = lock(&self.pending);
            let mut closed = lock(&self.closed);
            if closed.is_some() {
                return;
            }
            *closed = Some(reason.to_owned());
            self.is_closed.store(true, Ordering::SeqCst);
            pending.drain().map(|(_, tx)| tx).collect()
        };
        for tx in drained {
            let _ = tx.send(Err(Failure::Disconnected(reason.to_owned())));
        }
        (self.notices)(Notice::Closed(reason.to_owned()));
    }

    /// Closes the transport (which ends with [`Peer::closed`]) and marks the peer closed.
    pub fn shutdown(&self, reason: &str) {
        if let Some(link) = self.link.get() {
            link.close();
        }
        self.closed(reason);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first 200 characters of a text, for logs.
pub fn preview(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}… ({} bytes)", &text[..i], text.len()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    /// A link that records what is sent and lets the test answer.
    struct Loop {
        sent: Sender<Value>,
    }

    impl Link for Loop {
        fn send(&self, _peer: &Arc<Peer>, msg: &Value) -> Result<(), String> {
            self.sent.send(msg.clone()).map_err(|e| e.to_string())
        }
        fn close(&self) {}
    }

    fn peer() -> (
        Arc<Peer>,
        crossbeam_channel::Receiver<Value>,
        crossbeam_channel::Receiver<Notice>,
    ) {
        let (ntx, nrx) = crossbeam_channel::unbounded();
        let p = Peer::new("t", move |n| {
            let _ = ntx.send(n);
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        p.set_link(Box::new(Loop { sent: tx }));
        (p, rx, nrx)
    }

    #[test]
    fn concurrent_requests_are_matched_by_id_in_any_order() {
        let (p, sent, _) = peer();
        let callers: Vec<_> = (0..8)
            .map(|i| {
                let p = p.clone();
                thread::spawn(move || {
                    p.request("echo", json!({"i": i}), Duration::from_secs(5))
                        .unwrap()
                })
            })
            .collect();
        let mut msgs: Vec<Value> = (0..8)
            .map(|_| sent.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        msgs.reverse();
        for m in msgs {
            p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"i": m["params"]["i"]}}));
        }
        let mut got: Vec<i64> = callers
            .into_iter()
            .map(|h| h.join().unwrap()["i"].as_i64().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn a_timeout_sends_cancelled_and_a_late_answer_is_ignored() {
        let (p, sent, _) = peer();
        let err = p
            .request("slow", json!({}), Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(err, Failure::Timeout(Duration::from_millis(50)));
        let req = sent.recv().unwrap();
        let cancel = sent.recv().unwrap();
        assert_eq!(cancel["method"], "notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], req["id"]);
        p.incoming(json!({"jsonrpc": "2.0", "id": req["id"], "result": {}}));
        // Still usable.
        let q = p.clone();
        let h = thread::spawn(move || q.request("x", Value::Null, Duration::from_secs(5)));
        let m = sent.recv().unwrap();
        assert!(m.get("params").is_none());
        p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"ok": true}}));
        assert_eq!(h.join().unwrap().unwrap(), json!({"ok": true}));
    }

    #[test]
    fn closing_fails_pending_calls_at_once_and_later_calls_immediately() {
        let (p, sent, notices) = peer();
        let q = p.clone();
        let h = thread::spawn(move || q.request("slow", json!({}), Duration::from_secs(30)));
        sent.recv().unwrap();
        let t0 = std::time::Instant::now();
        p.closed("process exited");
        let err = h.join().unwrap().unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(err, Failure::Disconnected("process exited".into()));
        assert_eq!(
            notices.try_recv().unwrap(),
            Notice::Closed("process exited".into())
        );
        p.closed("again");
        assert!(notices.try_recv().is_err(), "Closed is reported once");
        assert!(matches!(
            p.request("x", json!({}), Duration::from_secs(1)),
            Err(Failure::Disconnected(_))
        ));
    }

    #[test]
    fn server_requests_get_answers_and_errors_propagate() {
        let (p, sent, notices) = peer();
        p.incoming(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
        assert_eq!(
            sent.recv().unwrap(),
            json!({"jsonrpc": "2.0", "id": "s1", "result": {}})
        );
        for m in ["sampling/createMessage", "elicitation/create", "roots/list"] {
            p.incoming(json!({"jsonrpc": "2.0", "id": 7, "method": m, "params": {}}));
            let r = sent.recv().unwrap();
            assert_eq!(r["id"], 7);
            assert_eq!(r["error"]["code"], -32601);
            assert!(r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not supported"));
        }
        p.incoming(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        assert_eq!(notices.try_recv().unwrap(), Notice::ToolsChanged);
        let q = p.clone();
        let h = thread::spawn(move || q.request("bad", json!({}), Duration::from_secs(5)));
        let m = sent.recv().unwrap();
        p.incoming(json!([{"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32602, "message": "nope"}}]));
        assert_eq!(
            h.join().unwrap().unwrap_err(),
            Failure::Rpc {
                code: -32602,
                message: "nope".into(),
                data: None
            }
        );
    }

    #[test]
    fn initialize_offers_the_latest_revision_and_accepts_an_older_one() {
        let (p, sent, _) = peer();
        let q = p.clone();
        let h = thread::spawn(move || q.initialize(Duration::from_secs(5)));
        let m = sent.recv().unwrap();
        assert_eq!(m["params"]["protocolVersion"], OFFERED_VERSION);
        assert_eq!(m["params"]["capabilities"], json!({}));
        p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {
            "protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}}}));
        let init = h.join().unwrap().unwrap();
        assert_eq!(init.protocol_version, "2024-11-05");
        assert_eq!(p.protocol_version(), Some("2024-11-05"));
        assert_eq!(sent.recv().unwrap()["method"], "notifications/initialized");
    }

    #[test]
    fn list_all_follows_cursors() {
        let (p, sent, _) = peer();
        let q = p.clone();
        let h = thread::spawn(move || q.list_all("tools/list", "tools", Duration::from_secs(5)));
        let m = sent.recv().unwrap();
        assert_eq!(m["params"], json!({}));
        p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "a"}], "nextCursor": "2"}}));
        let m = sent.recv().unwrap();
        assert_eq!(m["params"], json!({"cursor": "2"}));
        p.incoming(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "b"}]}}));
        let names: Vec<Value> = h
            .join()
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(names, vec![json!("a"), json!("b")]);
    }
}
