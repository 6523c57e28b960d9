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
//!
//! Two protocol eras: the *legacy* one (revisions up to 2025-11-25: `initialize`, then a
//! conversation) and the stateless *modern* one of revision 2026-07-28 (no handshake: every
//! request carries a `_meta` envelope naming the revision, our capabilities and our identity).
//! [`Peer::handshake`] probes with `server/discover` and falls back to `initialize` on any
//! failure; once modern, every request gets the envelope (transports pick their headers from
//! it, see [`is_modern_message`]) and a result asking for more input (`resultType:
//! "input_required"`) fails the request with [`Failure::InputRequired`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use serde_json::{json, Map, Value};

use super::params::{self, Binding};
use crate::jsonrpc::METHOD_NOT_FOUND;
use crate::limits::UPSTREAM_MAX_PAGES;

/// The protocol revision this client offers; older revisions the server answers with are
/// accepted.
pub const OFFERED_VERSION: &str = "2025-11-25";

/// Revisions this client can speak, newest first.
pub const KNOWN_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revision ("modern era"): no `initialize`, no session, no `ping`.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Longest the `server/discover` probe may take (also at most half the connect timeout, so a
/// server that ignores unknown methods still gets its `initialize`).
pub const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// The `_meta` keys of the modern envelope.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// Where a modern result names the server.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Where a modern notification names the `subscriptions/listen` request it belongs to.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Longest a `subscriptions/listen` request waits for its acknowledgement.
pub const LISTEN_ACK_LIMIT: Duration = Duration::from_secs(10);

/// Pause before re-opening a `subscriptions/listen` request the server ended.
pub const LISTEN_REOPEN_DELAY: Duration = Duration::from_secs(1);

/// JSON-RPC error of the modern revision: the protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Which protocol era a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a conversation (revisions up to 2025-11-25).
    Legacy,
    /// Stateless requests with the `_meta` envelope (revision 2026-07-28).
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Who we are, as `initialize` and the modern envelope say it.
pub fn client_info() -> Value {
    json!({"name": "cideldill-server", "version": env!("CARGO_PKG_VERSION")})
}

/// `params` with the modern `_meta` envelope added (other `_meta` keys, such as a
/// `progressToken`, are kept). We declare no client capabilities.
pub fn with_envelope(params: Value) -> Value {
    let mut params = match params {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(META_PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
        m.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
        m.insert(META_CLIENT_INFO.into(), client_info());
    }
    Value::Object(params)
}

/// Whether a message carries the modern envelope: transports speak the modern shape for it.
pub fn is_modern_message(msg: &Value) -> bool {
    msg.pointer("/params/_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
        == Some(MODERN_VERSION)
}

/// What a `server/discover` probe's outcome means: the modern era (with what the server
/// declared), or why not (then `initialize` decides). Only a result listing
/// [`MODERN_VERSION`] among its `supportedVersions` counts; any error, a timeout or another
/// result falls back, whatever its code.
pub fn probe_verdict(reply: &Result<Value, Failure>) -> Result<Initialized, String> {
    let result = match reply {
        Ok(r) => r,
        Err(f) => return Err(f.to_string()),
    };
    let supported: Vec<&str> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !supported.contains(&MODERN_VERSION) {
        return Err(if supported.is_empty() {
            "the discover result lists no supportedVersions".to_owned()
        } else {
            format!("the server supports {}", supported.join(", "))
        });
    }
    let server_info = result
        .pointer("/_meta")
        .and_then(|m| m.get(META_SERVER_INFO))
        .or_else(|| result.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    Ok(Initialized {
        protocol_version: MODERN_VERSION.to_owned(),
        era: Era::Modern,
        server_info,
        capabilities: result
            .get("capabilities")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The revision to probe with again when `server/discover` was refused with -32022
/// (unsupported protocol version) and the error's `data.supported` lists one we speak in the
/// modern era; `None` otherwise.
pub fn retry_version(reply: &Result<Value, Failure>) -> Option<&'static str> {
    let Err(Failure::Rpc {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        data: Some(data),
        ..
    }) = reply
    else {
        return None;
    };
    let supported = data.get("supported").and_then(Value::as_array)?;
    supported
        .iter()
        .any(|v| v == MODERN_VERSION)
        .then_some(MODERN_VERSION)
}

/// A result asking for input we cannot give (`resultType: "input_required"`): what was asked
/// for (`sampling`, `elicitation`, `roots`, or the request's method or key).
pub fn input_required(result: &Value) -> Option<Vec<String>> {
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let mut kinds: Vec<String> = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|reqs| {
            reqs.iter()
                .map(|(key, r)| {
                    match r.get("method").and_then(Value::as_str) {
                        Some("sampling/createMessage") => "sampling",
                        Some("elicitation/create") => "elicitation",
                        Some("roots/list") => "roots",
                        Some(other) => other,
                        None => key,
                    }
                    .to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    kinds.sort();
    kinds.dedup();
    Some(kinds)
}

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
    /// A modern server answered `resultType: "input_required"`, asking for what is listed
    /// (sampling, elicitation, roots); we declare none of these capabilities, so the request
    /// is not retried.
    InputRequired(Vec<String>),
}

impl Failure {
    /// A JSON-RPC `error` object as a failure (a missing code reads as 0).
    pub fn rpc(error: &Value) -> Failure {
        Failure::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            data: error.get("data").cloned(),
        }
    }
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
            Failure::InputRequired(kinds) => write!(
                f,
                "the server asked for input this client does not provide ({}); cideldill-server declares no client capabilities",
                if kinds.is_empty() {
                    "unspecified".to_owned()
                } else {
                    kinds.join(", ")
                }
            ),
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

    /// Gives up on request `id` the transport's own way, if it has one (a modern Streamable
    /// HTTP exchange closes its response stream); false when the server must be sent
    /// `notifications/cancelled` instead.
    fn abandon(&self, _id: &Value) -> bool {
        false
    }

    /// Whether a modern connection over this transport mirrors tool parameters into headers
    /// (Streamable HTTP); the others ignore `x-mcp-header`.
    fn mirrors_tool_params(&self) -> bool {
        false
    }
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

/// The result of `initialize`, or of a `server/discover` that chose the modern era.
#[derive(Clone, Debug, PartialEq)]
pub struct Initialized {
    pub protocol_version: String,
    pub era: Era,
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
    /// Set once `server/discover` chose the modern era.
    modern: AtomicBool,
    notices: Box<dyn Fn(Notice) + Send + Sync>,
    /// Progress tokens we sent, and where their `notifications/progress` params go.
    progress: Mutex<HashMap<String, Sender<Value>>>,
    /// The open `subscriptions/listen` request's id, and where its acknowledgement goes.
    listen: Mutex<Option<(i64, Sender<()>)>>,
    /// Requests of the server refused so far (see [`REFUSALS_LOGGED`]).
    refused: AtomicU64,
    /// Tools whose calls carry `Mcp-Param-*` headers, and where each value comes from.
    param_bindings: Mutex<HashMap<String, Vec<Binding>>>,
}

/// Refusals of the server's requests logged at info per connection; the rest at debug.
const REFUSALS_LOGGED: u64 = 10;

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
            modern: AtomicBool::new(false),
            notices: Box::new(notices),
            progress: Mutex::new(HashMap::new()),
            listen: Mutex::new(None),
            refused: AtomicU64::new(0),
            param_bindings: Mutex::new(HashMap::new()),
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

    /// The era the connection speaks (legacy until a probe chose the modern one).
    pub fn era(&self) -> Era {
        if self.modern.load(Ordering::SeqCst) {
            Era::Modern
        } else {
            Era::Legacy
        }
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

    /// Puts one message on the wire as is (the transports' tests).
    #[cfg(test)]
    pub(crate) fn send_for_test(self: &Arc<Self>, msg: &Value) -> Result<(), String> {
        self.send(msg)
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
    /// then told (`notifications/cancelled`, or a closed response stream) and the caller gets
    /// [`Failure::Cancelled`].
    pub fn request_cancellable(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Reply {
        self.request_inner(method, params, timeout, cancel, true)
    }

    /// Sends a request (with the modern envelope once modern) and waits for its answer. A
    /// request given up (timeout, `cancel`) is abandoned the transport's way, else the server
    /// is sent `notifications/cancelled` unless `notify_abandon` is false (`server/discover`
    /// must not be cancelled).
    fn request_inner(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
        notify_abandon: bool,
    ) -> Reply {
        if self.era() == Era::Modern {
            params = with_envelope(params);
        }
        let reply = self.exchange(method, params, timeout, cancel, notify_abandon);
        match reply {
            Ok(result) => match input_required(&result) {
                Some(kinds) => {
                    log::info!(
                        "upstream {}: {method} needs input ({}) this client does not provide; failing it",
                        self.name,
                        kinds.join(", ")
                    );
                    Err(Failure::InputRequired(kinds))
                }
                None => Ok(result),
            },
            Err(f) => Err(f),
        }
    }

    fn exchange(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
        notify_abandon: bool,
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
        let waiting = lock(&self.pending).remove(&id).is_some();
        if !waiting {
            // Answered (or failed) in the instant the wait ended.
            if let Ok(reply) = rx.try_recv() {
                return reply;
            }
        }
        if !self.is_closed() {
            let reason = if cancelled {
                "cancelled by our client".to_owned()
            } else {
                format!("timed out after {}", show_duration(timeout))
            };
            let abandoned = self.link.get().is_some_and(|l| l.abandon(&json!(id)));
            if abandoned {
                log::info!(
                    "upstream {}: {method} (id {id}) {reason}; closed its response stream",
                    self.name
                );
            } else if notify_abandon {
                log::info!(
                    "upstream {}: {method} (id {id}) {reason}; sending notifications/cancelled",
                    self.name
                );
                let _ = self.notify(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": reason}),
                );
            } else {
                log::info!("upstream {}: {method} (id {id}) {reason}", self.name);
            }
        }
        if cancelled {
            Err(Failure::Cancelled)
        } else {
            Err(Failure::Timeout(timeout))
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

    /// Chooses the era within `timeout`: a `server/discover` probe (for at most
    /// [`PROBE_LIMIT`] and half the time), and when it does not choose the modern era,
    /// [`Peer::initialize`]. An `initialize` refused with -32022 naming the modern revision
    /// (a probe that timed out here but reached a server that then settled on the modern era)
    /// gets one more probe.
    pub fn handshake(self: &Arc<Self>, timeout: Duration) -> Result<Initialized, Failure> {
        let deadline = std::time::Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        let why = match self.discover(timeout.min(PROBE_LIMIT).min(timeout / 2)) {
            Ok(init) => return Ok(init),
            Err(why) => why,
        };
        if self.is_closed() {
            return Err(Failure::Disconnected(
                self.close_reason().unwrap_or_default(),
            ));
        }
        log::debug!(
            "upstream {}: server/discover did not choose the modern era ({why}); initialize",
            self.name
        );
        match self.initialize(left()) {
            Err(Failure::Rpc {
                code: UNSUPPORTED_PROTOCOL_VERSION,
                message,
                data,
            }) => {
                let modern = data
                    .as_ref()
                    .and_then(|d| d.get("supported"))
                    .and_then(Value::as_array)
                    .is_some_and(|l| l.iter().any(|v| v == MODERN_VERSION));
                if !modern {
                    return Err(Failure::Rpc {
                        code: UNSUPPORTED_PROTOCOL_VERSION,
                        message,
                        data,
                    });
                }
                self.discover(left()).map_err(|why| {
                    Failure::Invalid(format!(
                        "the server refused initialize (it speaks {MODERN_VERSION}) and server/discover failed: {why}"
                    ))
                })
            }
            other => other,
        }
    }

    /// Probes with `server/discover` (with the modern envelope; never cancelled). Chooses the
    /// modern era when [`probe_verdict`] says so; otherwise tells why not.
    ///
    /// A probe refused with -32022 (unsupported protocol version) whose `supported` list names
    /// a revision we speak is sent once more with it ([`retry_version`]); a list naming none
    /// falls back to `initialize`.
    pub fn discover(self: &Arc<Self>, timeout: Duration) -> Result<Initialized, String> {
        let deadline = std::time::Instant::now() + timeout;
        let probe = |timeout| {
            self.request_inner(
                "server/discover",
                with_envelope(json!({})),
                timeout,
                None,
                false,
            )
        };
        let mut reply = probe(timeout);
        if let Some(version) = retry_version(&reply) {
            log::info!(
                "upstream {}: server/discover was refused as of an unsupported version; the \
                 server lists {version}, asking again",
                self.name
            );
            reply = probe(deadline.saturating_duration_since(std::time::Instant::now()));
        }
        let init = probe_verdict(&reply)?;
        self.modern.store(true, Ordering::SeqCst);
        let _ = self.version.set(MODERN_VERSION.to_owned());
        Ok(init)
    }

    /// `initialize` then `notifications/initialized`.
    pub fn initialize(self: &Arc<Self>, timeout: Duration) -> Result<Initialized, Failure> {
        let params = json!({
            "protocolVersion": OFFERED_VERSION,
            "capabilities": {},
            "clientInfo": client_info(),
        });
        // Never cancelled (the specification forbids cancelling initialize).
        let result = self.request_inner("initialize", params, timeout, None, false)?;
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
            era: Era::Legacy,
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
    #[cfg(test)]
    pub fn list_all(
        self: &Arc<Self>,
        method: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        self.list_each(method, key, timeout, |item| {
            items.push(item);
            true
        })?;
        Ok(items)
    }

    /// A paginated list, item by item: `keep` is given each of every page's `key` items; once
    /// it returns false (a budget is spent) it still sees the rest of that page, but no further
    /// page is asked for.
    pub fn list_each(
        self: &Arc<Self>,
        method: &str,
        key: &str,
        timeout: Duration,
        mut keep: impl FnMut(Value) -> bool,
    ) -> Result<(), Failure> {
        let mut cursor: Option<String> = None;
        for _ in 0..UPSTREAM_MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let mut page = self.request(method, params, timeout)?;
            let mut more = true;
            match page.get_mut(key).map(Value::take) {
                Some(Value::Array(list)) => {
                    for item in list {
                        more &= keep(item);
                    }
                }
                None | Some(Value::Null) => {}
                Some(_) => return Err(Failure::Invalid(format!("{method}: {key} is not a list"))),
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if more && !c.is_empty() && cursor.as_deref() != Some(c) => {
                    cursor = Some(c.to_owned())
                }
                _ => return Ok(()),
            }
        }
        log::warn!(
            "upstream {}: {method} still paginating after {UPSTREAM_MAX_PAGES} pages; stopped",
            self.name
        );
        Ok(())
    }

    /// Follows a modern server's list changes: opens one `subscriptions/listen` request (on a
    /// thread of its own, which ends with the connection) asking for the list changes the
    /// discover `capabilities` advertise; its `notifications/*/list_changed` become the same
    /// [`Notice`]s a legacy server's do. The request is no pending call with a timeout: it stays
    /// open for the life of the connection and is ended by closing the transport (the HTTP
    /// link's stop flags end its response stream; a stdio server's process is stopped). One the
    /// server ends is re-opened once after [`LISTEN_REOPEN_DELAY`]; one refused, or not
    /// acknowledged within [`LISTEN_ACK_LIMIT`], is given up (logged at debug).
    pub fn listen(self: &Arc<Self>, capabilities: &Map<String, Value>) {
        if self.era() != Era::Modern {
            return;
        }
        let Some(params) = listen_params(capabilities) else {
            log::debug!(
                "upstream {}: no list changes advertised; not listening",
                self.name
            );
            return;
        };
        let weak = Arc::downgrade(self);
        let spawned = thread::Builder::new()
            .name(format!("upstream-{}-listen", self.name))
            .spawn(move || listen_loop(&weak, &params));
        if let Err(e) = spawned {
            log::warn!(
                "upstream {}: cannot start the listen thread: {e}",
                self.name
            );
        }
    }

    /// Sends a `subscriptions/listen` request: its id, the acknowledgement's receiver and the
    /// reply's (which only an ended or refused listen gets).
    fn open_listen(
        self: &Arc<Self>,
        params: &Value,
    ) -> Result<(i64, Receiver<()>, Receiver<Reply>), String> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = bounded(1);
        let (ack_tx, ack_rx) = bounded(1);
        {
            let mut pending = lock(&self.pending);
            if self.is_closed() {
                return Err(self.close_reason().unwrap_or_default());
            }
            pending.insert(id, tx);
            *lock(&self.listen) = Some((id, ack_tx));
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": with_envelope(params.clone())});
        if let Err(e) = self.send(&msg) {
            lock(&self.pending).remove(&id);
            self.end_listen(id, false);
            return Err(e);
        }
        Ok((id, ack_rx, rx))
    }

    /// Forgets listen request `id`; with `cancel`, also tells the server (a closed response
    /// stream, else `notifications/cancelled`).
    fn end_listen(self: &Arc<Self>, id: i64, cancel: bool) {
        {
            let mut listen = lock(&self.listen);
            if listen.as_ref().is_some_and(|(l, _)| *l == id) {
                *listen = None;
            }
        }
        lock(&self.pending).remove(&id);
        if cancel && !self.is_closed() {
            let abandoned = self.link.get().is_some_and(|l| l.abandon(&json!(id)));
            if !abandoned {
                let _ = self.notify(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": "no acknowledgement"}),
                );
            }
        }
    }

    /// `notifications/subscriptions/acknowledged`: wakes the listen request it names.
    fn acknowledged(&self, params: Option<&Value>) {
        let named = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_SUBSCRIPTION_ID))
            .cloned();
        let listen = lock(&self.listen);
        match (&*listen, named) {
            (Some((id, ack)), named)
                if named.is_none()
                    || named.as_ref().and_then(Value::as_i64) == Some(*id)
                    || named.as_ref().and_then(Value::as_str) == Some(&id.to_string()) =>
            {
                let _ = ack.try_send(());
            }
            (_, named) => log::debug!(
                "upstream {}: an acknowledgement for a subscription we do not have ({})",
                self.name,
                named.unwrap_or(Value::Null)
            ),
        }
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
                    (_, Some(e)) => Err(Failure::rpc(e)),
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

    /// Whether request `id` still waits for its answer (a transport stops resuming a stream
    /// for a request given up).
    pub fn awaits(&self, id: &Value) -> bool {
        id.as_i64()
            .is_some_and(|n| lock(&self.pending).contains_key(&n))
    }

    /// Whether tools' `x-mcp-header` annotations matter on this connection: a modern one over
    /// a transport that mirrors them ([`Link::mirrors_tool_params`]).
    pub fn mirrors_tool_params(&self) -> bool {
        self.era() == Era::Modern && self.link.get().is_some_and(|l| l.mirrors_tool_params())
    }

    /// Replaces the table of tools whose calls carry `Mcp-Param-*` headers (tool name to its
    /// annotations; see [`super::params`]).
    pub fn set_param_bindings(&self, table: HashMap<String, Vec<Binding>>) {
        *lock(&self.param_bindings) = table;
    }

    /// The `Mcp-Param-*` headers of `msg` when it is a `tools/call` of a tool with annotations.
    pub fn param_headers(&self, msg: &Value) -> Vec<(String, String)> {
        if msg.get("method").and_then(Value::as_str) != Some("tools/call") {
            return Vec::new();
        }
        let Some(name) = msg.pointer("/params/name").and_then(Value::as_str) else {
            return Vec::new();
        };
        let table = lock(&self.param_bindings);
        match table.get(name) {
            Some(b) => params::headers(b, msg.pointer("/params/arguments").unwrap_or(&Value::Null)),
            None => Vec::new(),
        }
    }

    fn answer_request(self: &Arc<Self>, method: &str, id: Value) {
        if self.is_closed() {
            // Nobody to answer any more (a server flooding requests after we dropped it).
            return;
        }
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            let what = match method {
                "sampling/createMessage" => "sampling",
                "elicitation/create" => "elicitation",
                "roots/list" => "roots",
                _ => "this method",
            };
            // Logged at info the first few times; a server flooding us with requests does not
            // flood the log.
            let level = if self.refused.fetch_add(1, Ordering::Relaxed) < REFUSALS_LOGGED {
                log::Level::Info
            } else {
                log::Level::Debug
            };
            log::log!(
                level,
                "upstream {}: refused the server's {method} request ({what} is not supported)",
                self.name
            );
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!("{method}: {what} is not supported by this client (cideldill-server declares no client capabilities)"),
            }})
        };
        if let Err(e) = self.send(&reply) {
            if !self.is_closed() {
                log::warn!(
                    "upstream {}: could not answer the server's {method}: {e}",
                    self.name
                );
            }
        }
    }

    fn notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/subscriptions/acknowledged" => self.acknowledged(params),
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

/// The params of `subscriptions/listen` for what `capabilities` (a discover result's)
/// advertise: `None` when they advertise no list changes.
pub fn listen_params(capabilities: &Map<String, Value>) -> Option<Value> {
    let mut wanted = Map::new();
    for (cap, key) in [
        ("tools", "toolsListChanged"),
        ("resources", "resourcesListChanged"),
    ] {
        let on = capabilities
            .get(cap)
            .and_then(|c| c.get("listChanged"))
            .and_then(Value::as_bool)
            == Some(true);
        if on {
            wanted.insert(key.into(), json!(true));
        }
    }
    (!wanted.is_empty()).then(|| json!({"notifications": wanted}))
}

/// The listen thread of [`Peer::listen`]: at most two listen requests, one after the other.
fn listen_loop(weak: &Weak<Peer>, params: &Value) {
    for attempt in 0..2 {
        if attempt > 0 {
            thread::sleep(LISTEN_REOPEN_DELAY);
        }
        let Some(peer) = weak.upgrade() else { return };
        if peer.is_closed() {
            return;
        }
        let name = peer.name.clone();
        let (id, ack, reply) = match peer.open_listen(params) {
            Ok(opened) => opened,
            Err(why) => {
                log::debug!("upstream {name}: subscriptions/listen not sent: {why}");
                return;
            }
        };
        // Wait for the acknowledgement without keeping the peer alive.
        drop(peer);
        let early = crossbeam_channel::select! {
            recv(ack) -> r => match r {
                Ok(()) => None,
                Err(_) => return,
            },
            recv(reply) -> r => match r {
                Ok(r) => Some(r),
                Err(_) => return,
            },
            default(LISTEN_ACK_LIMIT) => {
                if let Some(peer) = weak.upgrade() {
                    log::debug!(
                        "upstream {name}: subscriptions/listen (id {id}) not acknowledged within {}; carrying on without it",
                        show_duration(LISTEN_ACK_LIMIT)
                    );
                    peer.end_listen(id, true);
                }
                return;
            }
        };
        if let Some(r) = early {
            if let Some(peer) = weak.upgrade().filter(|p| !p.is_closed()) {
                let why = match r {
                    Ok(_) => "answered without an acknowledgement".to_owned(),
                    Err(f) => f.to_string(),
                };
                log::debug!(
                    "upstream {name}: subscriptions/listen (id {id}) refused ({why}); carrying on without it"
                );
                peer.end_listen(id, false);
            }
            return;
        }
        log::debug!("upstream {name}: listening for list changes (id {id})");
        // Open until the connection ends (the pending table is drained, or dropped with the
        // peer) or the server ends it.
        let Ok(ended) = reply.recv() else { return };
        let Some(peer) = weak.upgrade().filter(|p| !p.is_closed()) else {
            return;
        };
        peer.end_listen(id, false);
        let why = match ended {
            Ok(_) => "answered".to_owned(),
            Err(f) => f.to_string(),
        };
        if attempt == 0 {
            log::info!(
                "upstream {name}: the server ended subscriptions/listen ({why}); re-opening it in {}",
                show_duration(LISTEN_REOPEN_DELAY)
            );
        } else {
            log::info!(
                "upstream {name}: the server ended subscriptions/listen again ({why}); list changes are no longer followed"
            );
        }
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
mod tests;
