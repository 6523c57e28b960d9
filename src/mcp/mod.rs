//! The MCP server core, transport-agnostic: sessions, the lifecycle (`initialize`, version
//! negotiation, capabilities), dispatch by method, cancellation, progress, logging, pagination
//! and batches. Two eras share one set of handlers: the legacy revisions (a session starts with
//! `initialize`) and the stateless modern revision 2026-07-28 (`modern.rs`: every request
//! carries its envelope; `server/discover`; `subscriptions/listen` streams). A stdio connection
//! takes the era of its first request that decides it; HTTP sessions are legacy, and a stateless
//! request on Streamable HTTP gets a modern session of its own for as long as it runs
//! (`Transport::Stateless`). Transports (stdio, legacy HTTP+SSE, Streamable HTTP) feed it parsed
//! messages and attach an outbox per session; the notifier thread turns state events into
//! notifications, to each session only what it asked for: resource updates of its subscriptions,
//! `notifications/message` at or above its log level (pauses, resumes, logpoint lines at info,
//! completed calls at debug), and our custom `notifications/breakpoint/*` only when its client
//! declared [`NOTIFICATIONS_EXTENSION`] (standard SDKs warn about, or drop, methods not in MCP).
//! The session registry is in `sessions.rs` (HTTP sessions are capped and expire when idle); what
//! a session keeps from its client, and what a batch answers, is bounded in bytes (`limits`).
//! Tools, resources and prompts live in their own modules and never see a transport.

pub mod bridge;
pub mod external;
pub mod modern;
pub mod prompts;
pub mod replay;
pub mod resources;
mod sessions;
pub mod stdio;
pub mod tools;
pub mod version;

use sessions::bounded_client_info;
pub use sessions::{Active, AtCapacity, Session, Transport};

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};
use serde_json::{json, Map, Value};

use crate::events::{Event, EventKind};
use crate::jsonrpc::{self, Message, Notification, Request, RequestId, Response, RpcError};
use crate::limits;
use crate::state::Shared;

/// The server name announced in `initialize`.
pub const SERVER_NAME: &str = "cideldill-breakpoint-server";

/// MCP 2024-11-05 and later: resource not found.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// Most bytes an HTTP session may have queued for a client that is not reading its stream;
/// past this the session is dropped (its memory is freed) and the drop is logged.
pub const MAX_QUEUED_BYTES: usize = limits::MCP_OUTBOX_BYTES;

/// What a transport's writer receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// One serialised JSON-RPC message (no newline).
    Message(String),
    /// Stop writing: flush and end.
    Close,
}

/// The capability a client declares to receive our custom `notifications/breakpoint/*`
/// (`execution_paused`, `execution_resumed`, `call_completed`, `log`): a key of
/// `capabilities.extensions` or `capabilities.experimental` in `initialize` (legacy era), or of
/// the client capabilities in the envelope of a `subscriptions/listen` (2026-07-28), whose value
/// is an object (its settings; none are read). They are not part of MCP: a client that did not
/// ask for them gets none (the official SDKs log a warning for, or drop, methods they do not
/// know). The server announces it under the same key with the methods it sends.
pub const NOTIFICATIONS_EXTENSION: &str = "io.github.curtcox.cideldill/notifications";

/// The custom notifications [`NOTIFICATIONS_EXTENSION`] opts into.
pub const CUSTOM_NOTIFICATIONS: [&str; 4] = [
    "notifications/breakpoint/execution_paused",
    "notifications/breakpoint/execution_resumed",
    "notifications/breakpoint/call_completed",
    "notifications/breakpoint/log",
];

/// Whether client capabilities declare [`NOTIFICATIONS_EXTENSION`] (in `extensions`, where the
/// SDKs of 2026 put an extension, or in `experimental`).
pub fn wants_custom_notifications(capabilities: Option<&Value>) -> bool {
    let Some(caps) = capabilities else {
        return false;
    };
    ["extensions", "experimental"].iter().any(|k| {
        caps.get(*k)
            .and_then(|m| m.get(NOTIFICATIONS_EXTENSION))
            .is_some_and(|v| v.is_object() || v == &Value::Bool(true))
    })
}

/// MCP log levels (RFC 5424 names), lowest first.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// What a tool, resource or prompt handler gets besides its arguments.
pub struct Ctx<'a> {
    pub mcp: &'a Mcp,
    pub session: &'a Session,
    /// Receives `()` when the request is cancelled (or its transport closed).
    pub cancel: &'a Receiver<()>,
    progress_token: Option<Value>,
    /// The revision the request is handled under (negotiated, or named by its envelope).
    version: &'static str,
    /// Where progress goes when the request has its own response stream (Streamable HTTP).
    progress_out: Option<&'a Sender<Outgoing>>,
    /// When the request started, and the last progress value sent (progress must increase).
    started: Instant,
    last_progress: std::cell::Cell<f64>,
}

impl Ctx<'_> {
    pub fn shared(&self) -> &Shared {
        &self.mcp.shared
    }

    /// The revision the request is handled under.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// Whether the client asked for progress notifications (a `progressToken`).
    pub fn wants_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    /// Sends `notifications/progress` when the request carried a `progressToken` and `progress`
    /// is larger than the last value sent (MCP: progress increases with each notification).
    pub fn progress(&self, progress: f64, total: Option<f64>, message: &str) {
        if progress <= self.last_progress.get() {
            return;
        }
        self.last_progress.set(progress);
        if let Some(token) = &self.progress_token {
            let mut params =
                json!({"progressToken": token, "progress": progress, "message": message});
            if let Some(t) = total {
                params["total"] = json!(t);
            }
            let note = Message::notification("notifications/progress", params);
            match self.progress_out {
                Some(tx) => {
                    let _ = tx.send(Outgoing::Message(note.to_text()));
                }
                None => {
                    self.session.send(&note);
                }
            }
        }
    }

    /// Waits until `deadline` for an item on `rx`, reporting progress every second as the
    /// seconds since the request started, out of `total`; `None` when the deadline passes (or
    /// the producer went away), `Some(Err(()))` when cancelled.
    pub fn wait<T>(
        &self,
        rx: &Receiver<T>,
        deadline: Instant,
        total: Duration,
        what: &str,
    ) -> Option<Result<T, ()>> {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let tick = (deadline - now).min(Duration::from_secs(1));
            select! {
                recv(rx) -> msg => return msg.ok().map(Ok),
                recv(self.cancel) -> _ => return Some(Err(())),
                default(tick) => {
                    let elapsed = self.started.elapsed().as_secs_f64().floor();
                    self.progress(elapsed, Some(total.as_secs_f64()), what);
                }
            }
        }
    }
}

/// The MCP server: shared state plus the sessions of every transport.
pub struct Mcp {
    pub shared: Arc<Shared>,
    /// Event streams currently open on HTTP (their threads are detached; shutdown waits on this).
    pub open_streams: std::sync::atomic::AtomicUsize,
    /// `subscriptions/listen` streams open on Streamable HTTP (at most `MCP_HTTP_MAX_LISTENS`).
    pub http_listens: std::sync::atomic::AtomicUsize,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Items per page of every list method.
    pub page_size: usize,
    /// Threads for requests that may block (`may_block`), on every transport.
    pub pool: crate::pool::Pool,
    /// True while a session is open: the notifier receives events only then.
    any_session: Arc<AtomicBool>,
    /// When idle sessions were last looked for (`now_ms()`).
    last_sweep: AtomicU64,
    /// Set by `close_all` (shutdown): requests stopped from then on are answered with an error
    /// rather than left unanswered.
    shutting_down: AtomicBool,
}

/// What a batch gets back.
#[derive(Debug, PartialEq)]
pub enum BatchAnswer {
    /// The JSON array of its answers.
    Answers(String),
    /// One error for the whole batch (the session's revision has no batches).
    Refused(String),
}

impl BatchAnswer {
    pub fn into_text(self) -> String {
        match self {
            BatchAnswer::Answers(t) | BatchAnswer::Refused(t) => t,
        }
    }
}

impl Mcp {
    pub fn new(shared: Arc<Shared>, page_size: usize) -> Arc<Mcp> {
        Arc::new(Mcp {
            shared,
            open_streams: std::sync::atomic::AtomicUsize::new(0),
            http_listens: std::sync::atomic::AtomicUsize::new(0),
            sessions: Mutex::new(HashMap::new()),
            page_size: page_size.max(1),
            pool: crate::pool::Pool::new("mcp-req", 2, Duration::from_secs(30)),
            any_session: Arc::new(AtomicBool::new(false)),
            last_sweep: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Handles a notification from the client.
    pub fn handle_notification(&self, session: &Session, n: &Notification) {
        match n.method.as_str() {
            // The modern revision has no handshake: nothing to complete.
            "notifications/initialized" if session.is_modern() => {
                log::debug!("mcp: ignoring notifications/initialized on a modern connection")
            }
            "notifications/initialized" => session.state().initialized = true,
            "notifications/cancelled" => {
                let id = n.params.get("requestId").and_then(RequestId::from_value);
                if let Some(id) = id {
                    let mut st = session.state();
                    if let Some(tx) = st.in_flight.remove(&id) {
                        log::debug!("mcp: request {id} cancelled by the client");
                        let _ = tx.try_send(());
                    } else if st.listens.remove(&id).is_some() {
                        // MCP: a cancelled request gets no response; the stream just ends.
                        log::debug!("mcp: listen stream {id} cancelled by the client");
                    }
                }
            }
            other => log::debug!("mcp: ignoring notification {other}"),
        }
    }

    /// Whether a request may block (a tool whose table entry has `max_block_s` above 0: it
    /// waits for a pause, for the program's REPL answer or for an external MCP server) and so
    /// needs a thread of its own. Every other request is answered at once, and transports run
    /// it on the thread that read it.
    pub fn may_block(req: &Request) -> bool {
        // The tool table says how long each tool may block; an unknown tool is answered at
        // once with an error.
        req.method == "tools/call"
            && req
                .params
                .get("name")
                .and_then(Value::as_str)
                .and_then(tools::find)
                .is_some_and(|t| t.max_block_s > 0.0)
    }

    /// Handles one request. `None` means no response is sent (it was cancelled by its client,
    /// or its transport closed). A request stopped by the shutdown still gets a response: its
    /// outcome if its handler finished without noticing, else a `SHUTTING_DOWN` error (a client
    /// of Streamable HTTP is still waiting on its POST).
    pub fn handle_request(&self, session: &Session, req: Request) -> Option<Response> {
        self.handle_request_via(session, req, None)
    }

    /// Handles one request whose progress notifications go to `progress_out` when given.
    pub fn handle_request_via(
        &self,
        session: &Session,
        req: Request,
        progress_out: Option<&Sender<Outgoing>>,
    ) -> Option<Response> {
        let (cancel_tx, cancel_rx) = bounded(1);
        {
            let mut st = session.state();
            if st.closed {
                // The transport closed before this request started (it was read just before
                // the end of the input): it is cancelled, as those in flight were.
                let _ = cancel_tx.try_send(());
            } else {
                st.in_flight.insert(req.id.clone(), cancel_tx);
            }
        }
        let mut outcome = self.guarded(session, &req, &cancel_rx, progress_out);
        let still_ours = session.state().in_flight.remove(&req.id).is_some();
        if !still_ours && req.method != "initialize" {
            if !self.shutting_down.load(Ordering::SeqCst) {
                // MCP: a cancelled request gets no response.
                return None;
            }
            // Stopped by the shutdown. A cancellation its handler received (the channel is
            // empty again) shaped its outcome: say why instead.
            if cancel_rx.try_recv().is_err() {
                outcome = Err(RpcError::new(
                    jsonrpc::SHUTTING_DOWN,
                    "server shutting down: the request was stopped",
                ));
            }
        }
        Some(Response {
            id: Some(req.id),
            outcome,
        })
    }

    /// Handles a request that cannot block (`!may_block`) on the thread that reads the
    /// session's messages: no cancellation can be read while it runs, so it is not registered
    /// as cancellable. `None` for a `subscriptions/listen` that opened its stream: it is
    /// answered by notifications until the client cancels it, and holds no thread meanwhile.
    pub fn handle_request_now(&self, session: &Session, req: Request) -> Option<Response> {
        debug_assert!(!Self::may_block(&req));
        if req.method == "subscriptions/listen" && self.settle_era(session, &req) {
            return match self.listen(session, &req) {
                Ok(()) => None,
                Err(e) => Some(Response::err(Some(req.id), e)),
            };
        }
        let outcome = self.guarded(session, &req, &crossbeam_channel::never(), None);
        Some(Response {
            id: Some(req.id),
            outcome,
        })
    }

    /// Fixes the era of a stdio connection whose era is still open, by this request: one that
    /// marks the modern era (`modern::marks_modern`) makes it modern; `initialize` makes it
    /// legacy (when answered). Other requests leave it open. Returns whether the connection is
    /// modern. Transports call it on the reading thread, before a request may move to another
    /// thread, so the era follows the order of the input.
    pub fn settle_era(&self, session: &Session, req: &Request) -> bool {
        let mut st = session.state();
        if st.modern {
            return true;
        }
        if st.version.is_some()
            || session.transport != Transport::Stdio
            || req.method == "initialize"
            || !modern::marks_modern(req)
        {
            return false;
        }
        st.modern = true;
        drop(st);
        log::info!(
            "mcp: session {} speaks the stateless revision {} (first request: {})",
            session.id,
            version::MODERN[0],
            req.method
        );
        true
    }

    /// Opens a `subscriptions/listen` stream on a modern connection: checks the envelope and
    /// the filter, registers the stream and sends `notifications/subscriptions/acknowledged`
    /// (under the session's lock, so no event notification can overtake it). The notifier
    /// thread then writes what matches; `notifications/cancelled` (or the connection closing)
    /// ends it. No thread waits for it.
    fn listen(&self, session: &Session, req: &Request) -> Result<(), RpcError> {
        let params = match &req.params {
            Value::Object(m) => m.clone(),
            Value::Null => Map::new(),
            _ => return Err(RpcError::invalid_params("params must be an object")),
        };
        modern::envelope(&params)?;
        let mut filter = modern::requested_filter(&params, limits::MCP_MAX_SUBSCRIPTIONS)?;
        // As with resources/subscribe: only resources that exist can be subscribed to.
        filter
            .resource_uris
            .retain(|u| resources::exists(&self.shared, u));
        let mut st = session.state();
        if st.closed {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "the connection is closing",
            ));
        }
        if st.listens.contains_key(&req.id) {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("a listen stream with id {} is already open", req.id),
            ));
        }
        if st.listens.len() >= limits::MCP_MAX_LISTENS {
            return Err(RpcError::new(
                jsonrpc::LIMIT_EXCEEDED,
                format!(
                    "a connection may hold at most {} listen streams; cancel one first",
                    limits::MCP_MAX_LISTENS
                ),
            ));
        }
        let ack = Message::notification(
            "notifications/subscriptions/acknowledged",
            modern::stamped(&json!({"notifications": filter.to_value()}), &req.id),
        );
        st.listens.insert(req.id.clone(), filter);
        session.send(&ack);
        drop(st);
        log::debug!("mcp: listen stream {} opened", req.id);
        Ok(())
    }

    /// Dispatches a request; a panicking handler still answers (-32603), on every transport,
    /// and the session and the server keep working: the state lock recovers from poisoning.
    fn guarded(
        &self,
        session: &Session,
        req: &Request,
        cancel: &Receiver<()>,
        progress_out: Option<&Sender<Outgoing>>,
    ) -> Result<Value, RpcError> {
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            #[cfg(debug_assertions)]
            failpoint(req);
            self.dispatch(session, req, cancel, progress_out)
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::error!("mcp: {} {} panicked: {what}", req.method, req.id);
            Err(RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "internal error while handling the request (logged)",
            ))
        });
        log::debug!(
            "mcp: {} {} -> {} in {:.1} ms",
            req.method,
            req.id,
            if outcome.is_ok() { "ok" } else { "error" },
            started.elapsed().as_secs_f64() * 1e3
        );
        outcome
    }

    /// Handles a batch (MCP 2025-03-26 only; `jsonrpc::parse` already refused one longer than
    /// `MAX_BATCH_LEN`), returning what to send, if anything. Each request in it is guarded like
    /// a single one, in order. Answers are written as they come, and once they reach
    /// `MAX_BATCH_ANSWER_BYTES` the requests left are answered with an error instead of being
    /// handled (notifications still are: they add no answer); a request handled whose answer
    /// would cross the limit gets that error too, saying it was handled.
    pub fn handle_batch(
        &self,
        session: &Session,
        items: Vec<Result<Message, Response>>,
    ) -> Option<BatchAnswer> {
        self.handle_batch_within(session, items, limits::MAX_BATCH_ANSWER_BYTES)
    }

    fn handle_batch_within(
        &self,
        session: &Session,
        items: Vec<Result<Message, Response>>,
        max_bytes: usize,
    ) -> Option<BatchAnswer> {
        let batches_ok = session.version().is_some_and(version::has_batches);
        if !batches_ok {
            let msg = "JSON-RPC batches are only accepted in sessions that negotiated 2025-03-26";
            return Some(BatchAnswer::Refused(
                Message::Response(Response::err(
                    None,
                    RpcError::new(jsonrpc::INVALID_REQUEST, msg),
                ))
                .to_text(),
            ));
        }
        let over = |id: RequestId, handled: bool| {
            let what = if handled {
                "handled, but its answer would take the batch's answers"
            } else {
                "not handled: the batch's answers reached"
            };
            let err = RpcError::new(
                jsonrpc::LIMIT_EXCEEDED,
                format!(
                    "{what} past the limit of {max_bytes} bytes; send it on its own or in a \
                     smaller batch"
                ),
            )
            .with_data(json!({"handled": handled, "max_batch_answer_bytes": max_bytes}));
            Message::Response(Response::err(Some(id), err)).to_text()
        };
        let mut out = String::from("[");
        let mut full = false;
        for item in items {
            let text = match item {
                Err(resp) => Message::Response(resp).to_text(),
                Ok(Message::Request(req)) if full => over(req.id, false),
                Ok(Message::Request(req)) => {
                    let id = req.id.clone();
                    let Some(resp) = self.handle_request(session, req) else {
                        continue;
                    };
                    let text = Message::Response(resp).to_text();
                    if out.len() + text.len() > max_bytes {
                        full = true;
                        over(id, true)
                    } else {
                        text
                    }
                }
                Ok(Message::Notification(n)) => {
                    self.handle_notification(session, &n);
                    continue;
                }
                Ok(Message::Response(_)) => continue,
            };
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&text);
        }
        out.push(']');
        (out.len() > 2).then_some(BatchAnswer::Answers(out))
    }

    fn dispatch(
        &self,
        session: &Session,
        req: &Request,
        cancel: &Receiver<()>,
        progress_out: Option<&Sender<Outgoing>>,
    ) -> Result<Value, RpcError> {
        let params = match &req.params {
            Value::Object(m) => m.clone(),
            Value::Null => Map::new(),
            _ => return Err(RpcError::invalid_params("params must be an object")),
        };
        if self.settle_era(session, req) {
            return self.dispatch_modern(session, req, &params, cancel, progress_out);
        }
        match req.method.as_str() {
            "initialize" => return self.initialize(session, &params),
            "ping" => return Ok(json!({})),
            _ => {}
        }
        let Some(version) = session.version() else {
            // `server/discover` too: on a transport that stays legacy (HTTP+SSE), an answer
            // would make a probing client adopt the modern era the session cannot speak; this
            // error makes it fall back to `initialize`.
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "the session is not initialized: send initialize first",
            ));
        };
        if req.method == "server/discover" {
            // After the handshake it is answered (it changes nothing; the client learns our
            // revisions, the modern one included, for its next connection).
            return Ok(self.discover());
        }
        self.dispatch_common(session, req, &params, version, cancel, progress_out)
    }

    /// A request on a modern connection: `initialize` and the removed methods are refused, the
    /// envelope is checked, then the request is handled as in the legacy era and its result
    /// completed (`modern::complete`). A resource not found is -32602 here.
    fn dispatch_modern(
        &self,
        session: &Session,
        req: &Request,
        params: &Map<String, Value>,
        cancel: &Receiver<()>,
        progress_out: Option<&Sender<Outgoing>>,
    ) -> Result<Value, RpcError> {
        let method = req.method.as_str();
        match method {
            "initialize" => return Err(modern::initialize_refused()),
            "server/discover" => {
                modern::envelope(params)?;
                return Ok(self.discover());
            }
            m if modern::REMOVED.contains(&m) => return Err(RpcError::method_not_found(m)),
            // Only a transport that keeps the request open can serve it (stdio, through
            // `handle_request_now`).
            "subscriptions/listen" => return Err(RpcError::method_not_found(method)),
            _ => {}
        }
        let version = modern::envelope(params)?;
        let result = self
            .dispatch_common(session, req, params, version, cancel, progress_out)
            .map_err(|mut e| {
                if e.code == RESOURCE_NOT_FOUND {
                    e.code = jsonrpc::INVALID_PARAMS;
                }
                e
            })?;
        Ok(modern::complete(result, method, &server_info()))
    }

    /// `server/discover`: our revisions, capabilities and instructions, completed as every
    /// modern result is (the same answer on a legacy connection).
    fn discover(&self) -> Value {
        modern::complete(
            json!({
                "supportedVersions": version::all_supported(),
                "capabilities": capabilities(version::MODERN[0]),
                "instructions": instructions(version::MODERN[0]),
            }),
            "server/discover",
            &server_info(),
        )
    }

    /// The methods both eras share, handled under `version`.
    fn dispatch_common(
        &self,
        session: &Session,
        req: &Request,
        params: &Map<String, Value>,
        version: &'static str,
        cancel: &Receiver<()>,
        progress_out: Option<&Sender<Outgoing>>,
    ) -> Result<Value, RpcError> {
        let params = params.clone();
        let progress_token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .cloned();
        if progress_token
            .as_ref()
            .is_some_and(|t| t.to_string().len() > limits::MCP_MAX_PROGRESS_TOKEN_BYTES)
        {
            // It would be repeated in every progress notification.
            return Err(RpcError::invalid_params(format!(
                "_meta.progressToken is longer than {} bytes",
                limits::MCP_MAX_PROGRESS_TOKEN_BYTES
            )));
        }
        let ctx = Ctx {
            mcp: self,
            session,
            cancel,
            progress_token,
            version,
            progress_out,
            started: Instant::now(),
            last_progress: std::cell::Cell::new(0.0),
        };
        match req.method.as_str() {
            "tools/list" => {
                let all: Vec<Value> = tools::TOOLS.iter().map(|t| t.describe(version)).collect();
                self.page("tools", all, &params)
            }
            "tools/call" => tools::call(&ctx, &params),
            "resources/list" => self.page("resources", resources::list(&self.shared), &params),
            "resources/templates/list" => {
                self.page("resourceTemplates", resources::templates(), &params)
            }
            "resources/read" => resources::read(&self.shared, &params),
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = params
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| RpcError::invalid_params("uri is required"))?;
                let uri = resources::normalize(uri);
                if req.method == "resources/unsubscribe" {
                    session.state().subscriptions.remove(&uri);
                    return Ok(json!({}));
                }
                if !resources::exists(&self.shared, &uri) {
                    return Err(resources::not_found(&uri));
                }
                self.subscribe(session, uri)?;
                Ok(json!({}))
            }
            "prompts/list" => self.page("prompts", prompts::list(), &params),
            "prompts/get" => prompts::get(&self.shared, &params, version),
            "completion/complete" => prompts::complete(&self.shared, &params),
            "logging/setLevel" => {
                let level = params.get("level").and_then(Value::as_str).unwrap_or("");
                let rank = level_rank(level).ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "level must be one of {}",
                        LOG_LEVELS.join(", ")
                    ))
                })?;
                session.state().log_level = Some(rank);
                Ok(json!({}))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    fn initialize(
        &self,
        session: &Session,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let negotiated = version::negotiate(requested);
        {
            let mut st = session.state();
            if st.version.is_some() {
                return Err(RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "initialize was already called in this session",
                ));
            }
            st.version = Some(negotiated);
            st.client_info = bounded_client_info(params.get("clientInfo"));
            st.custom_notes = wants_custom_notifications(params.get("capabilities"));
        }
        log::info!(
            "mcp: session {} initialized ({negotiated}, client {}{})",
            session.id,
            params
                .get("clientInfo")
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
            if session.state().custom_notes {
                ", with notifications/breakpoint/*"
            } else {
                ""
            }
        );
        let mut info = server_info();
        if !version::has_structured_output(negotiated) {
            info.as_object_mut().map(|m| m.remove("title"));
        }
        Ok(json!({
            "protocolVersion": negotiated,
            "capabilities": capabilities(negotiated),
            "serverInfo": info,
            "instructions": instructions(negotiated),
        }))
    }

    /// Adds a subscription, within `MCP_MAX_SUBSCRIPTIONS`: at the limit, those of resources
    /// that are gone (ended pauses) are pruned first. The session's lock is not held while the
    /// resources are looked up (that takes the state lock).
    fn subscribe(&self, session: &Session, uri: String) -> Result<(), RpcError> {
        let max = limits::MCP_MAX_SUBSCRIPTIONS;
        let current: Vec<String> = {
            let mut st = session.state();
            if st.subscriptions.contains(&uri) || st.subscriptions.len() < max {
                st.subscriptions.insert(uri);
                return Ok(());
            }
            st.subscriptions.iter().cloned().collect()
        };
        let gone: Vec<String> = current
            .into_iter()
            .filter(|u| !resources::exists(&self.shared, u))
            .collect();
        let mut st = session.state();
        for u in &gone {
            st.subscriptions.remove(u);
        }
        if st.subscriptions.len() >= max {
            return Err(RpcError::invalid_params(format!(
                "a session may hold at most {max} resource subscriptions; unsubscribe first"
            )));
        }
        st.subscriptions.insert(uri);
        Ok(())
    }

    /// Cursor pagination: the cursor is the opaque offset of the next page.
    fn page(
        &self,
        key: &str,
        all: Vec<Value>,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) => c
                .strip_prefix("o")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n <= all.len())
                .ok_or_else(|| RpcError::invalid_params(format!("invalid cursor {c:?}")))?,
            Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
        };
        let end = (start + self.page_size).min(all.len());
        let mut out = Map::new();
        out.insert(key.into(), Value::Array(all[start..end].to_vec()));
        if end < all.len() {
            out.insert("nextCursor".into(), json!(format!("o{end}")));
        }
        Ok(Value::Object(out))
    }

    /// Starts the thread that turns state events into notifications. It ends when `stop` is
    /// dropped or sent to.
    pub fn spawn_notifier(self: &Arc<Self>) -> std::io::Result<(Sender<()>, JoinHandle<()>)> {
        let events = self
            .shared
            .bus
            .subscribe_gated(Arc::clone(&self.any_session));
        let (stop_tx, stop_rx) = unbounded::<()>();
        let mcp = self.clone();
        // Idle HTTP sessions are also looked for on this thread's coarse timer, so they go even
        // when no client comes back; a lookup or an `initialize` looks for them too.
        let every = (self.shared.config.mcp_session_idle / 2).clamp(
            Duration::from_secs(1),
            Duration::from_secs(limits::MCP_SESSION_SWEEP_S),
        );
        let handle = thread::Builder::new()
            .name("mcp-notify".into())
            .spawn(move || {
                let mut next_sweep = Instant::now() + every;
                loop {
                    let wait = next_sweep.saturating_duration_since(Instant::now());
                    select! {
                        recv(events) -> e => match e {
                            Ok(e) => mcp.broadcast(&e),
                            Err(_) => return,
                        },
                        recv(stop_rx) -> _ => return,
                        default(wait) => {}
                    }
                    if Instant::now() >= next_sweep {
                        mcp.expire_idle();
                        next_sweep = Instant::now() + every;
                    }
                }
            })?;
        Ok((stop_tx, handle))
    }

    /// Sends the notifications an event causes to every initialized session: to each only what
    /// it asked for (legacy: `resources/list_changed`, `resources/updated` of its subscriptions,
    /// `notifications/message` at or above its `logging/setLevel`, and the custom
    /// `notifications/breakpoint/*` when it declared `NOTIFICATIONS_EXTENSION`; modern: what
    /// each listen stream's filter and envelope name).
    fn broadcast(&self, event: &Event) {
        let sessions = self.live_sessions();
        if sessions.is_empty() {
            return;
        }
        let custom = match &*event.kind {
            EventKind::ExecutionPaused { .. }
            | EventKind::ExecutionResumed { .. }
            | EventKind::CallCompleted { .. }
            | EventKind::Log { .. } => Some((
                format!("notifications/breakpoint/{}", event.name()),
                event.params(),
            )),
            _ => None,
        };
        let list_changed = matches!(
            *event.kind,
            EventKind::ExecutionPaused { .. } | EventKind::ExecutionResumed { .. }
        );
        let updated = resources::affected(&event.kind);
        let log = log_line(&event.kind).map(|(level, line)| {
            let params = json!({"level": level, "logger": "cideldill", "data": line});
            (level_rank(level).unwrap_or(0), params)
        });
        // Modern connections get them on their listen streams, each stamped with its id.
        let for_listens = ListenNotes {
            custom: custom.as_ref().map(|(m, p)| (m.as_str(), p)),
            list_changed,
            updated: &updated,
            log: log.as_ref().map(|(rank, p)| (*rank, p)),
        };
        // Serialised once, sent to every session.
        let custom = custom
            .as_ref()
            .map(|(m, p)| Message::notification(m, p.clone()).to_text());
        let list_changed = list_changed.then(|| {
            Message::notification("notifications/resources/list_changed", Value::Null).to_text()
        });
        let updated_texts: Vec<(&String, String)> = updated
            .iter()
            .map(|uri| {
                let text =
                    Message::notification("notifications/resources/updated", json!({"uri": uri}))
                        .to_text();
                (uri, text)
            })
            .collect();
        let log_text = log.as_ref().map(|(rank, params)| {
            (
                *rank,
                Message::notification("notifications/message", params.clone()).to_text(),
            )
        });
        for s in sessions {
            if s.is_modern() {
                for_listens.send(&s);
            } else {
                let (wants_custom, log_level) = {
                    let st = s.state();
                    (st.custom_notes, st.log_level)
                };
                if let (Some(text), true) = (&custom, wants_custom) {
                    s.send_text(text.clone());
                }
                if let Some(text) = &list_changed {
                    s.send_text(text.clone());
                }
                for (uri, text) in &updated_texts {
                    if s.is_subscribed(uri) {
                        s.send_text(text.clone());
                    }
                }
                if let (Some((rank, text)), Some(min)) = (&log_text, log_level) {
                    if *rank >= min {
                        s.send_text(text.clone());
                    }
                }
            }
            if s.is_overflowed() {
                log::warn!(
                    "mcp: session {} ({}) stopped reading its stream; dropping it",
                    s.id,
                    s.transport
                );
                self.close_session(&s.id);
            }
        }
    }
}

/// The `notifications/message` an event writes, with its level: pauses and resumes at info,
/// logpoint lines at info, completed calls (and client events) at debug.
fn log_line(kind: &EventKind) -> Option<(&'static str, String)> {
    match kind {
        EventKind::ExecutionPaused {
            pause_id,
            method_name,
            pause_reason,
            ..
        } => Some((
            "info",
            format!(
                "{method_name} paused ({pause_reason}), pause {pause_id}: inspect it with \
                 breakpoint_list_paused, resume it with breakpoint_continue"
            ),
        )),
        EventKind::ExecutionResumed {
            pause_id,
            method_name,
            action,
        } => Some((
            "info",
            format!("{method_name} resumed with {action}, pause {pause_id}"),
        )),
        EventKind::CallCompleted {
            call_id,
            method_name,
            status,
            ..
        } => Some((
            "debug",
            format!("{method_name} completed ({status}), call {call_id}"),
        )),
        EventKind::Log {
            function_name,
            call_id,
            message,
            ..
        } => Some((
            "info",
            format!("logpoint {function_name} (call {call_id}): {message}"),
        )),
        _ => None,
    }
}

/// What one event sends to the listen streams of a modern connection.
struct ListenNotes<'a> {
    /// The `notifications/breakpoint/*` method and params: the streams whose client declared
    /// `NOTIFICATIONS_EXTENSION` get it.
    custom: Option<(&'a str, &'a Value)>,
    /// Whether `notifications/resources/list_changed` goes to the streams that asked for it.
    list_changed: bool,
    /// The resources the event changed.
    updated: &'a [String],
    /// The rank of the `notifications/message` level, and its params: the streams whose
    /// log level is at or below it get it.
    log: Option<(usize, &'a Value)>,
}

impl ListenNotes<'_> {
    /// Sends each open stream of `session` what its filter matches, stamped with its id. The
    /// session's lock is held while sending, so a stream's acknowledgement (sent under the same
    /// lock) always comes first, and a cancelled stream gets nothing more.
    fn send(&self, session: &Session) {
        let st = session.state();
        for (id, filter) in &st.listens {
            if let (Some((method, params)), true) = (&self.custom, filter.custom) {
                session.send(&Message::notification(method, modern::stamped(params, id)));
            }
            if self.list_changed && filter.resources_list_changed {
                session.send(&Message::notification(
                    "notifications/resources/list_changed",
                    modern::stamped(&Value::Null, id),
                ));
            }
            for uri in self.updated {
                if filter.resource_uris.contains(uri) {
                    session.send(&Message::notification(
                        "notifications/resources/updated",
                        modern::stamped(&json!({"uri": uri}), id),
                    ));
                }
            }
            if let (Some((rank, params)), Some(min)) = (&self.log, filter.log_level) {
                if *rank >= min {
                    session.send(&Message::notification(
                        "notifications/message",
                        modern::stamped(params, id),
                    ));
                }
            }
        }
    }
}

/// The server's capabilities under a revision. `logging`: `logging/setLevel` in the legacy
/// revisions, the `io.modelcontextprotocol/logLevel` of a listen request's `_meta` in the modern
/// one (its resource subscriptions are made on `subscriptions/listen` streams too). Our custom
/// notifications are announced under `experimental` (and `extensions` in the modern revision,
/// which has them), with the methods a client that declares the same key receives.
fn capabilities(version: &str) -> Value {
    let mut capabilities = json!({
        "tools": {"listChanged": false},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": false},
        "logging": {},
    });
    let custom = json!({NOTIFICATIONS_EXTENSION: {"notifications": CUSTOM_NOTIFICATIONS}});
    capabilities["experimental"] = custom.clone();
    if version::is_modern(version) {
        capabilities["extensions"] = custom;
    }
    if version::has_annotations(version) {
        capabilities["completions"] = json!({});
    }
    capabilities
}

/// The server's name, version and title (`serverInfo`; in `_meta` of every modern result).
fn server_info() -> Value {
    json!({
        "name": SERVER_NAME,
        "version": env!("CARGO_PKG_VERSION"),
        "title": "CID el Dill breakpoint server",
    })
}

/// A short guide for the model, sent in the `initialize` and `server/discover` results.
const INSTRUCTIONS: &str = "This server debugs a running Python program instrumented with cideldill_client. \
Every call of a wrapped function can pause before it runs and after it returns. Typical loop: \
breakpoint_add (or rely on the breakpoints the program registers) -> breakpoint_wait_for_pause -> inspect the \
pause's pretty_args and objects (breakpoint_inspect_object with a CID) -> breakpoint_repl_eval to evaluate \
Python in the paused call -> breakpoint_continue (continue, modified arguments, a fake result, or an exception). \
A pause whose call_data has pretty_result is after the call completed: only 'continue' is possible there.";

/// How a client of the legacy revisions hears of pauses (after `INSTRUCTIONS`).
const HEAR_LEGACY: &str = "To hear of pauses while doing other work: resources/subscribe to breakpoint://paused \
(notifications/resources/updated each time a call pauses or resumes; then read it or call breakpoint_list_paused), \
and/or logging/setLevel info (a notifications/message line for each pause and resume; level debug adds completed calls).";

/// How a client of the stateless revision 2026-07-28 hears of pauses.
const HEAR_MODERN: &str = "To hear of pauses while doing other work: open subscriptions/listen with \
notifications.resourceSubscriptions [\"breakpoint://paused\"] (notifications/resources/updated each time a call \
pauses or resumes; then read it or call breakpoint_list_paused), and put io.modelcontextprotocol/logLevel info in \
that request's _meta for a notifications/message line for each pause and resume (debug adds completed calls).";

/// The guide for a revision: `INSTRUCTIONS`, how to hear of pauses in that era, and how to opt
/// into the custom notifications.
fn instructions(version: &str) -> String {
    format!("{INSTRUCTIONS} {}", hearing_of_pauses(version))
}

/// How a client of `version` hears of pauses, and how it opts into the custom notifications
/// (the instructions and the `debug-session-start` prompt say it).
pub(crate) fn hearing_of_pauses(version: &str) -> String {
    let (hear, where_) = if version::is_modern(version) {
        (
            HEAR_MODERN,
            "in the client capabilities of the subscriptions/listen request (extensions or experimental)",
        )
    } else {
        (
            HEAR_LEGACY,
            "under capabilities.extensions or capabilities.experimental in initialize",
        )
    };
    format!(
        "{hear} Detailed notifications/breakpoint/* (execution_paused, execution_resumed, \
         call_completed, log) are not part of MCP and are sent only to a client that declares \
         \"{NOTIFICATIONS_EXTENSION}\": {{}} {where_}."
    )
}

/// Debug builds only: `CIDELDILL_PANIC_ON=<method or tool name>` makes that request panic, so
/// the tests can check that every transport still answers it.
#[cfg(debug_assertions)]
fn failpoint(req: &Request) {
    static TARGET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var("CIDELDILL_PANIC_ON").ok());
    if let Some(t) = target {
        let tool = req.params.get("name").and_then(Value::as_str);
        if req.method == *t || tool == Some(t.as_str()) {
            panic!("failpoint CIDELDILL_PANIC_ON={t}");
        }
    }
}

#[cfg(test)]
mod tests;
