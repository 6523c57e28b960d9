//! The HTTP face: tiny_http (vendored and patched, see `vendor/tiny_http/PATCHES.md`) accepts
//! every connection and reads its requests within the limits of `limits.rs`; `handle` answers
//! each on the thread that read it. `decide` judges a request `Head` (host, origin, pages, the
//! event stream, the export, MCP), `route` the rest with its body (CORS, routing, panics
//! answered 500). Only this module and its submodules touch tiny_http types.

mod debug_client;
mod events;
mod export;
pub mod guard;
mod logging;
mod mcp_http;
mod openapi;
pub mod routes;
mod stream;

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::mcp::Mcp;
use crate::node::JsonNode;
use crate::state::Shared;

pub use guard::Policy;
pub use routes::{reference_markdown, Access, ROUTES};

/// CORS headers of every `/api/` response (protocol doc §1).
const CORS: [(&str, &str); 3] = [
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Headers", "Content-Type"),
    (
        "Access-Control-Allow-Methods",
        "GET, POST, PUT, PATCH, DELETE, OPTIONS",
    ),
];

/// A request as handlers see it.
#[derive(Debug, Default)]
pub struct Req {
    pub method: String,
    pub path: String,
    /// Path parameters captured by the route pattern, percent-decoded.
    pub params: Vec<String>,
    pub query: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The `Host` header, for the OpenAPI `servers` entry.
    pub host: Option<String>,
    /// The `Origin` header: a browser page (on a guarded endpoint, one the origin check let
    /// through: the web UI or an `--allow-origin` page).
    pub origin: Option<String>,
}

impl Req {
    /// The face a request came through, for the record of what it did: a browser page is the
    /// web UI, anything else the REST API.
    pub fn actor(&self) -> crate::resolution::Actor {
        match self.origin {
            Some(_) => crate::resolution::Actor::WebUi,
            None => crate::resolution::Actor::Rest,
        }
    }

    pub fn param(&self, i: usize) -> &str {
        self.params.get(i).map(String::as_str).unwrap_or("")
    }

    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The body as a JSON object. An empty body is an empty object.
    pub fn json(&self) -> Result<Map<String, Value>, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match parse_json_tolerant(&self.body) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => Err(not_an_object(&other)),
            Err(err) => Err(invalid_json(&err)),
        }
    }

    /// The body as a JSON object whose strings borrow from the body (for the hot
    /// `/api/call/start`); the same rules and errors as [`Req::json`].
    pub fn node(&self) -> Result<JsonNode<'_>, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonNode::Obj(Vec::new()));
        }
        let node = match JsonNode::parse(&self.body) {
            Ok(node) => node,
            Err(_) => parse_json_tolerant(&self.body)
                .map(JsonNode::from_value)
                .map_err(|err| invalid_json(&err))?,
        };
        match node {
            JsonNode::Obj(_) => Ok(node),
            other => Err(not_an_object(&other.to_value())),
        }
    }
}

fn not_an_object(v: &Value) -> ApiError {
    ApiError::bad_request(
        "invalid_body",
        format!(
            "request body must be a JSON object, got {}",
            crate::schema::type_phrase(v)
        ),
    )
}

fn invalid_json(err: &serde_json::Error) -> ApiError {
    ApiError::bad_request(
        "invalid_json",
        format!("request body is not valid JSON: {err}"),
    )
}

/// Parses JSON, also accepting the bare `NaN`, `Infinity` and `-Infinity` tokens that Python's
/// `json.dumps` can emit (as null, the only JSON value that can stand for them).
pub fn parse_json_tolerant(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(err) => {
            let text = String::from_utf8_lossy(bytes);
            if !(text.contains("NaN") || text.contains("Infinity")) {
                return Err(err);
            }
            let mut out = String::with_capacity(text.len());
            let mut rest: &str = &text;
            let mut in_string = false;
            while let Some(c) = rest.chars().next() {
                if in_string {
                    if c == '\\' {
                        let n = rest.chars().take(2).map(char::len_utf8).sum();
                        out.push_str(&rest[..n]);
                        rest = &rest[n..];
                        continue;
                    }
                    in_string = c != '"';
                } else if c == '"' {
                    in_string = true;
                } else if let Some(tok) = ["-Infinity", "Infinity", "NaN"]
                    .iter()
                    .find(|t| rest.starts_with(**t))
                {
                    out.push_str("null");
                    rest = &rest[tok.len()..];
                    continue;
                }
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
            serde_json::from_str(&out).map_err(|_| err)
        }
    }
}

/// Sent with every answer: a browser never reads a JSON or export answer as a page or script.
pub(crate) const NOSNIFF: (&str, &str) = ("X-Content-Type-Options", "nosniff");

/// What a handler answers.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default(),
            headers: Vec::new(),
        }
    }

    pub fn error(err: &ApiError) -> Reply {
        Reply::json(err.status, &err.to_json())
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            content_type: "text/plain",
            body: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// The HTTP server: tiny_http (the vendored copy, see `vendor/tiny_http/PATCHES.md`) within
/// the limits of `limits.rs`, answering each connection's requests on the thread that reads
/// it (one per open connection, from a pool that keeps four when the server is quiet). A
/// request that blocks (a REPL eval waits up to 30 s, an event stream lasts as long as its
/// client) so holds only its own connection.
pub struct Http {
    server: Option<tiny_http::Server>,
    /// Requests being answered.
    busy: Arc<AtomicUsize>,
    /// Set by `close`: a request on a kept-alive connection is answered 503 and the
    /// connection closed.
    closing: Arc<AtomicBool>,
}

/// What answering a request needs.
pub struct Face {
    shared: Arc<Shared>,
    policy: Policy,
    /// The MCP core, with `--mcp-sse`.
    mcp: Option<Arc<Mcp>>,
    refusals: Refusals,
}

/// What refused requests may cost: their warnings go through the rate limit of
/// `logging::RefusalLog`, and what waits (the summary of the warnings left out, a coalesced
/// `origins_changed`) is flushed by the `refusals` thread when it is due.
pub(crate) struct Refusals {
    log: Arc<Mutex<logging::RefusalLog>>,
    /// Wakes the `refusals` thread; it ends when this is dropped (with the HTTP server).
    wake: crossbeam_channel::Sender<()>,
}

impl Refusals {
    /// Starts the `refusals` thread for `shared`.
    fn start(shared: &Arc<Shared>) -> std::io::Result<Refusals> {
        let log = Arc::new(Mutex::new(logging::RefusalLog::default()));
        let (wake, woken) = crossbeam_channel::bounded(1);
        let (flushed, weak) = (Arc::clone(&log), Arc::downgrade(shared));
        thread::Builder::new()
            .name("refusals".into())
            .spawn(move || flush_refusals(&weak, &flushed, &woken))?;
        Ok(Refusals { log, wake })
    }

    fn log(&self) -> std::sync::MutexGuard<'_, logging::RefusalLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs the warning `line` about a refused request from `origin`, unless the rate limit
    /// says to count it only.
    fn warn(&self, origin: Option<&str>, line: impl FnOnce() -> String) {
        let note = self.log().note(Instant::now(), origin);
        match note {
            logging::Note::Log(summary) => {
                if let Some(summary) = summary {
                    log::warn!("{summary}");
                }
                log::warn!("{}", line());
            }
            logging::Note::Quiet => self.wake(),
        }
    }

    /// Something waits to be flushed.
    fn wake(&self) {
        let _ = self.wake.try_send(());
    }
}

/// The `refusals` thread: sleeps until something waits, then until it is due, and flushes it
/// (the summary of the warnings left out, a coalesced `origins_changed`).
fn flush_refusals(
    shared: &Weak<Shared>,
    log: &Mutex<logging::RefusalLog>,
    woken: &crossbeam_channel::Receiver<()>,
) {
    let log = || log.lock().unwrap_or_else(|e| e.into_inner());
    while woken.recv().is_ok() {
        loop {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let origins_due = shared.lock().origins.notice_due();
            let log_due = log().due();
            let Some(due) = [origins_due, log_due].into_iter().flatten().min() else {
                break;
            };
            let now = Instant::now();
            if due > now {
                drop(shared);
                // A timer: woken early by new work, it looks again.
                if let Err(crossbeam_channel::RecvTimeoutError::Disconnected) =
                    woken.recv_timeout(due - now)
                {
                    return;
                }
                continue;
            }
            if let Some(summary) = log().take_due(now) {
                log::warn!("{summary}");
            }
            let mut st = shared.lock();
            if st.origins.take_notice(now) {
                st.emit(crate::events::EventKind::OriginsChanged);
            }
        }
    }
}

/// Counts a request as being answered while it lives.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn new(count: &Arc<AtomicUsize>) -> Busy {
        count.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(count))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts serving HTTP on `listener` (bound to `port`), at most `max_connections` at once.
pub fn spawn_http(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    port: u16,
    mcp: Option<Arc<Mcp>>,
    max_connections: usize,
) -> std::io::Result<Http> {
    let policy = Policy::new(&shared.config.host, port, &shared.config.allow_origins);
    if shared.config.allow_origins.iter().any(|o| o.trim() == "*") {
        log::warn!(
            "--allow-origin '*': every web page you visit may report calls, poll pauses, resume \
             them, evaluate code in the debugged program and read every record, as with the \
             original server"
        );
    }
    let refusals = Refusals::start(&shared)?;
    let face = Face {
        shared,
        policy,
        mcp,
        refusals,
    };
    let busy = Arc::new(AtomicUsize::new(0));
    let closing = Arc::new(AtomicBool::new(false));
    let (counted, refused) = (Arc::clone(&busy), Arc::clone(&closing));
    let handler: tiny_http::Handler = Arc::new(move |rq: tiny_http::Request| {
        let _busy = Busy::new(&counted);
        if refused.load(Ordering::SeqCst) {
            let reply = Reply::error(&ApiError::new(
                503,
                "shutting_down",
                "the server is shutting down",
            ));
            return send(rq, reply, &[("Connection", "close".to_owned())]);
        }
        // `handle` answers every panic of a handler itself; tiny_http closes the connection
        // if something around them panics.
        handle(&face, rq);
    });
    let limits = tiny_http::Limits {
        max_head_bytes: crate::limits::MAX_REQUEST_HEAD_BYTES,
        idle_timeout: Some(crate::limits::IDLE_TIMEOUT),
        head_timeout: Some(crate::limits::HEAD_TIMEOUT),
        body_timeout: Some(crate::limits::BODY_STALL_TIMEOUT),
        write_timeout: Some(crate::limits::WRITE_STALL_TIMEOUT),
        max_connections: Some(max_connections),
        refusal_body: Some(refusal_body),
    };
    let server = tiny_http::Server::from_listener_with(listener, None, limits, Some(handler))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(Http {
        server: Some(server),
        busy,
        closing,
    })
}

/// The JSON error body of tiny_http's own refusals (requests it could not read, connections
/// over the cap), like every other error answer.
fn refusal_body(status: u16, why: &str) -> (&'static str, Vec<u8>) {
    let code = match status {
        408 => "request_timeout",
        417 => "expectation_failed",
        431 => "request_header_too_large",
        501 => "not_implemented",
        503 => "too_many_connections",
        505 => "http_version_not_supported",
        _ => "bad_request",
    };
    log::debug!("http: refused a request or connection ({status}): {why}");
    let why = match status {
        503 => {
            "the server has as many connections open as it may (see --max-connections); try again"
                .to_owned()
        }
        _ => why.to_owned(),
    };
    let reply = Reply::error(&ApiError::new(status, code, why));
    (reply.content_type, reply.body)
}

impl Http {
    /// Stops taking connections (the listening socket closes) and requests: a request on a
    /// kept-alive connection is answered 503 and its connection closed. Answers in flight go on.
    pub fn close(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        drop(self.server.take());
    }

    /// Waits until every request is answered (shutdown must already be flagged in the state,
    /// so that waiting handlers return), or until `deadline`. Returns how many were still
    /// being answered then.
    pub fn stop(&mut self, deadline: Instant) -> usize {
        self.close();
        loop {
            let busy = self.busy.load(Ordering::SeqCst);
            if busy == 0 || Instant::now() >= deadline {
                return busy;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A request head as the HTTP face judges it.
#[derive(Debug, Default)]
pub(crate) struct Head {
    /// Upper case.
    pub method: String,
    pub url: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub host: Option<String>,
    pub origin: Option<String>,
    /// `Access-Control-Request-Method`.
    pub asked: Option<String>,
    pub accept: Option<String>,
    pub last_event_id: Option<String>,
    /// `Sec-Fetch-Site`, `Sec-Fetch-Mode`, `Sec-Fetch-Dest` (fetch metadata), lowercase.
    pub fetch_site: Option<String>,
    pub fetch_mode: Option<String>,
    pub fetch_dest: Option<String>,
    /// A header of `TRUST_HEADERS` that the request gives more than once.
    pub repeated: Option<&'static str>,
}

/// The headers the trust rules read: a request must give each at most once, since which copy
/// counts would depend on who reads it (this server read the first; a proxy, a browser or
/// another server may read the last or join them).
pub(crate) const TRUST_HEADERS: [&str; 6] = [
    "Host",
    "Origin",
    "Sec-Fetch-Site",
    "Sec-Fetch-Mode",
    "Sec-Fetch-Dest",
    "Access-Control-Request-Method",
];

impl Head {
    /// From the request line and a lookup of the headers the face reads.
    pub(crate) fn new(
        method: &str,
        url: &str,
        header: impl Fn(&'static str) -> Option<String>,
    ) -> Head {
        let (path, query) = match url.split_once('?') {
            Some((p, q)) => (p.to_owned(), crate::urlenc::parse_query(q)),
            None => (url.to_owned(), Vec::new()),
        };
        let method = method.to_ascii_uppercase();
        Head {
            asked: (method == "OPTIONS")
                .then(|| header("Access-Control-Request-Method"))
                .flatten(),
            method,
            url: url.to_owned(),
            path,
            query,
            host: header("Host"),
            origin: header("Origin"),
            accept: header("Accept"),
            last_event_id: header("Last-Event-ID"),
            fetch_site: header("Sec-Fetch-Site").map(|v| v.trim().to_ascii_lowercase()),
            fetch_mode: header("Sec-Fetch-Mode").map(|v| v.trim().to_ascii_lowercase()),
            fetch_dest: header("Sec-Fetch-Dest").map(|v| v.trim().to_ascii_lowercase()),
            repeated: None,
        }
    }

    fn of(rq: &tiny_http::Request) -> Head {
        let mut head = Head::new(rq.method().as_str(), rq.url(), |name| {
            header_value(rq, name)
        });
        head.repeated = TRUST_HEADERS
            .iter()
            .copied()
            .find(|name| rq.headers().iter().filter(|h| h.field.equiv(name)).count() > 1);
        head
    }
}

/// What the checks that need no handler decide about a request.
pub(crate) enum Decision {
    /// Answer this now (421, 403, a page, the probe).
    Answer(Reply),
    /// MCP over HTTP: its handler writes to the socket itself.
    Mcp,
    /// `GET /api/events`, with its CORS grant.
    Events(Vec<(&'static str, String)>),
    /// The JSON Lines export, with its CORS grant.
    Export(Vec<(&'static str, String)>),
    /// Read the body and route it; `checked` is the access already judged from `Origin`.
    Route { checked: Option<Access> },
}

/// Repeated trust headers, host check, MCP paths, origin check, pages, the debug client
/// script, the event stream and the export, in that order: everything decided from the head
/// alone.
fn decide(
    shared: &Shared,
    mcp: bool,
    policy: &Policy,
    refusals: &Refusals,
    head: &Head,
) -> Decision {
    let (method, path) = (head.method.as_str(), head.path.as_str());
    if let Some(name) = head.repeated {
        refusals.warn(head.origin.as_deref(), || {
            format!(
                "http: refused {method} {}: the {name} header is given more than once",
                logging::loggable(&head.url)
            )
        });
        let message = format!(
            "the {name} header is given more than once; the rules of this server read it, so \
             it must be given once"
        );
        if mcp && mcp_http::is_mcp_path(path) {
            let body = json!({"jsonrpc": "2.0", "id": null,
                              "error": {"code": crate::jsonrpc::INVALID_REQUEST,
                                        "message": format!("Bad Request: {message}")}});
            return Decision::Answer(Reply::json(400, &body));
        }
        return Decision::Answer(Reply::error(&ApiError::bad_request(
            "duplicate_header",
            message,
        )));
    }
    if head.url == "*" && method == "OPTIONS" {
        // A client asking about the server as a whole.
        return Decision::Answer(Reply::empty(204));
    }
    if !policy.host_allowed(head.host.as_deref()) {
        // DNS rebinding: a page of another site, resolved to this machine, names its own host.
        refusals.warn(head.origin.as_deref(), || {
            format!(
                "http: refused {method} {} for Host {:?}",
                logging::loggable(&head.url),
                head.host
                    .as_deref()
                    .map(|h| logging::loggable_value("Host", h))
            )
        });
        return Decision::Answer(Reply::error(&ApiError::new(
            421,
            "misdirected_request",
            "this server only answers to localhost names (DNS-rebinding protection)",
        )));
    }
    if let Some(refused) = cross_site_without_origin(mcp, refusals, head) {
        return Decision::Answer(refused);
    }
    if mcp && mcp_http::is_mcp_path(path) {
        return Decision::Mcp;
    }
    // A preflight is judged by the method it asks for. Requests without `Origin` (the Python
    // client's) learn their route's rule from the routing itself, in one pass.
    let asked = head.asked.as_deref().map(|m| m.trim().to_ascii_uppercase());
    let checked = (head.origin.is_some() || method == "OPTIONS")
        .then(|| routes::access(asked.as_deref().unwrap_or(method), path));
    if checked == Some(Access::Guarded) && !policy.origin_allowed(head.origin.as_deref()) {
        refusals.warn(head.origin.as_deref(), || {
            format!(
                "http: refused {method} {} from origin {:?}",
                logging::loggable(&head.url),
                logging::loggable_value("Origin", head.origin.as_deref().unwrap_or(""))
            )
        });
        let refused = ApiError::new(
            403,
            "origin_not_allowed",
            "this endpoint answers only the server's own pages and --allow-origin origins",
        );
        return Decision::Answer(Reply::error(&refused));
    }
    if let (Some(origin), Some(Access::Anyone)) = (head.origin.as_deref(), checked) {
        let open = method == "OPTIONS" || path == debug_client::PATH;
        if !open && !page_granted(shared, policy, origin) {
            return Decision::Answer(refuse_page(shared, refusals, origin, method, head));
        }
    }
    let page_path = matches!(method, "GET" | "HEAD")
        && (crate::ui::is_page_path(path)
            || (path == "/" && crate::ui::wants_html(head.accept.as_deref())));
    if page_path {
        let page = if matches!(path, "/docs" | "/docs/") {
            let spec = routes::openapi_for(head.host.as_deref());
            Some(crate::ui::api_docs(shared, &spec, &head.query))
        } else {
            crate::ui::serve(shared, path, &head.query)
        };
        if let Some(page) = page {
            return Decision::Answer(page_reply(page));
        }
    }
    if matches!(method, "GET" | "HEAD") && path == debug_client::PATH {
        return Decision::Answer(debug_client::reply(head.host.as_deref()));
    }
    if method == "GET" && path.trim_end_matches('/') == "/api/events" {
        return Decision::Events(cors(Access::Guarded, head.origin.as_deref()));
    }
    if export::is_export(method, path, &head.query) {
        return Decision::Export(cors(Access::Guarded, head.origin.as_deref()));
    }
    Decision::Route { checked }
}

/// A page of the web UI as an answer, with the headers every UI answer carries.
fn page_reply(page: crate::ui::Page) -> Reply {
    Reply {
        status: page.status,
        content_type: page.content_type,
        body: page.body.into_bytes(),
        headers: crate::ui::headers()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// Whether a page of `origin` may use the browser-client endpoints: the server's own origins,
/// `--allow-origin` ones (`*`: every origin), and the origins the user granted in the web UI.
fn page_granted(shared: &Shared, policy: &Policy, origin: &str) -> bool {
    policy.origin_allowed(Some(origin)) || shared.lock().origins.is_granted(origin)
}

/// The 403 of a browser-client request from an origin nobody granted: the origin becomes a
/// pending request in the web UI (unless it was denied), and the answer carries the CORS
/// headers, so that the page's script (the debug client) can read why.
///
/// What it costs is bounded: the pending list by `MAX_PENDING_ORIGINS`, its `origins_changed`
/// by `ORIGINS_EVENT_INTERVAL` (the `refusals` thread tells a waiting change), its warning by
/// the refusals' rate limit (a repeated request of a pending origin is not warned about).
fn refuse_page(
    shared: &Shared,
    refusals: &Refusals,
    origin: &str,
    method: &str,
    head: &Head,
) -> Reply {
    let (asked, told) = {
        let mut st = shared.lock();
        let new = st.origins.refused(origin, &head.path, crate::ids::now());
        let told = new && st.origins.tell_change(Instant::now());
        if told {
            st.emit(crate::events::EventKind::OriginsChanged);
        }
        (new, told)
    };
    if asked && !told {
        refusals.wake();
    }
    if asked {
        refusals.warn(Some(origin), || {
            format!(
                "http: refused {method} {} from origin {:?}: not granted; allow it in the web UI \
                 (Paused page) or with --allow-origin",
                logging::loggable(&head.url),
                logging::loggable_value("Origin", origin)
            )
        });
    }
    let shown: String = origin
        .chars()
        .take(crate::limits::MAX_ORIGIN_BYTES)
        .collect();
    let refused = ApiError::new(
        403,
        "origin_not_allowed",
        format!(
            "the origin {shown} may not report calls to this debugger: allow it in the \
             debugger's web UI (its request is waiting there) or start the server with \
             --allow-origin {shown}"
        ),
    );
    let mut reply = Reply::error(&refused);
    for (k, v) in cors(Access::Anyone, Some(origin)) {
        reply.headers.push((k.to_owned(), v));
    }
    reply
}

/// Fetch metadata: a request that a browser sent for another site (`Sec-Fetch-Site:
/// cross-site` or `same-site`) without an `Origin` header (an `<img>`, `<script>` or
/// `<link>` of another page; no script can read the answer, but it holds connections, event
/// streams and MCP sessions, and starts searches) is refused on every guarded endpoint, the
/// event stream, the export and MCP included; and on the browser-client endpoints too, where
/// it would pass for a program (no `Origin`): the debug client always sends its `Origin`, and
/// programs send no fetch metadata. The debug client script is served to every request, and a
/// person following a link to a page of the web UI (a top-level navigation) is not refused.
fn cross_site_without_origin(mcp: bool, refusals: &Refusals, head: &Head) -> Option<Reply> {
    if head.origin.is_some()
        || !matches!(head.fetch_site.as_deref(), Some("cross-site" | "same-site"))
    {
        return None;
    }
    let (method, path) = (head.method.as_str(), head.path.as_str());
    let is_mcp = mcp_http::is_mcp_path(path);
    if path == debug_client::PATH {
        return None;
    }
    let navigation = matches!(method, "GET" | "HEAD")
        && head.fetch_mode.as_deref() == Some("navigate")
        && head.fetch_dest.as_deref() == Some("document")
        && (crate::ui::is_page_path(path) || path == "/");
    if navigation && !is_mcp {
        return None;
    }
    refusals.warn(None, || {
        format!(
            "http: refused {method} {} sent for another site without an Origin (Sec-Fetch-Site: \
             {})",
            logging::loggable(&head.url),
            logging::loggable_value("Sec-Fetch-Site", head.fetch_site.as_deref().unwrap_or(""))
        )
    });
    let message = "this endpoint refuses requests a browser sent for another site \
                   (Sec-Fetch-Site cross-site or same-site) without an Origin header";
    if is_mcp && mcp {
        let body = json!({"jsonrpc": "2.0", "id": null,
                          "error": {"code": crate::jsonrpc::INVALID_REQUEST, "message": message}});
        return Some(Reply::json(403, &body));
    }
    Some(Reply::error(&ApiError::new(
        403,
        "cross_site_request",
        message,
    )))
}

/// CORS: the browser-client endpoints grant every origin; a guarded endpoint grants only the
/// allowed origin that asked (its own pages need no grant, --allow-origin ones do).
fn cors(access: Access, origin: Option<&str>) -> Vec<(&'static str, String)> {
    match (access, origin) {
        (Access::Anyone, _) => CORS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        (Access::Guarded, Some(o)) => {
            let mut grant = vec![
                ("Access-Control-Allow-Origin", o.to_owned()),
                ("Vary", "Origin".to_owned()),
            ];
            grant.extend(CORS[1..].iter().map(|(k, v)| (*k, (*v).to_owned())));
            grant
        }
        (Access::Guarded, None) => Vec::new(),
    }
}

/// Routes a request with its body (or the answer that refused the body), under the panic
/// boundary; returns the reply and its CORS headers.
fn route(
    shared: &Shared,
    head: Head,
    body: Result<Vec<u8>, Reply>,
    checked: Option<Access>,
) -> (Reply, Vec<(&'static str, String)>) {
    let (reply, routed) = match body {
        Err(reply) => (reply, routes::access(&head.method, &head.path)),
        Ok(body) => {
            let mut req = Req {
                method: head.method.clone(),
                path: head.path,
                params: Vec::new(),
                query: head.query,
                body,
                host: head.host,
                origin: head.origin.clone(),
            };
            let (mut reply, access) =
                guarded(&head.method, &head.url, || routes::route(shared, &mut req));
            join_proof(shared, &req, &mut reply);
            (reply, access)
        }
    };
    (
        reply,
        cors(checked.unwrap_or(routed), head.origin.as_deref()),
    )
}

/// A `GET /api/status?join_nonce=…` is answered with the proof that this server holds the
/// secret beside its port file (see `port_file`).
fn join_proof(shared: &Shared, req: &Req, reply: &mut Reply) {
    if req.method != "GET" || req.path.trim_end_matches('/') != "/api/status" || reply.status != 200
    {
        return;
    }
    let nonce = req
        .query
        .iter()
        .find(|(k, _)| k == crate::port_file::NONCE_PARAM);
    if let (Some((_, nonce)), Some(secret)) = (nonce, shared.join_secret.get()) {
        if let Some(proof) = secret.prove(nonce) {
            reply
                .headers
                .push((crate::port_file::PROOF_HEADER.to_owned(), proof));
        }
    }
}

/// Answers a request. Every line it logs names the request through `logging::loggable`
/// (secrets in the query redacted, the rest cut).
fn handle(face: &Face, mut rq: tiny_http::Request) {
    let (shared, mcp, policy) = (&*face.shared, face.mcp.as_ref(), &face.policy);
    let started = Instant::now();
    let head = Head::of(&rq);
    let (method, url) = (head.method.clone(), logging::loggable(&head.url));
    let ms = || started.elapsed().as_secs_f64() * 1e3;
    match decide(shared, mcp.is_some(), policy, &face.refusals, &head) {
        Decision::Answer(reply) => {
            let status = reply.status;
            send(rq, reply, &[]);
            if url != "*" {
                log::debug!("http: {method} {url} -> {status} in {:.1} ms", ms());
            }
        }
        Decision::Mcp => {
            let mcp = mcp.expect("decided only when MCP over HTTP is on");
            let caught = catch_unwind(AssertUnwindSafe(|| {
                mcp_http::handle(mcp, policy, rq, &head.path, &head.query)
            }));
            if caught.is_err() {
                log::error!("http: MCP handler panicked on {method} {url}");
            }
            log::debug!("http: {method} {url} (mcp) in {:.1} ms", ms());
        }
        Decision::Events(grant) => {
            let last = head.last_event_id.clone().or_else(|| {
                head.query
                    .iter()
                    .find(|(k, _)| k == "last_event_id")
                    .map(|(_, v)| v.clone())
            });
            events::serve(shared, rq, last.as_deref(), &grant);
            log::debug!(
                "http: {method} {url} (event stream) ended after {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        Decision::Export(grant) => {
            let req = Req {
                method: method.clone(),
                path: head.path,
                query: head.query,
                ..Req::default()
            };
            let caught = catch_unwind(AssertUnwindSafe(|| export::serve(shared, rq, &req, &grant)));
            if caught.is_err() {
                log::error!("http: the export panicked on {method} {url}");
            }
            log::debug!("http: {method} {url} (export) in {:.1} ms", ms());
        }
        Decision::Route { checked } => {
            let browsing = matches!(method.as_str(), "GET" | "HEAD")
                && crate::ui::wants_html(head.accept.as_deref())
                && !head.path.starts_with("/api/");
            let path = head.path.clone();
            let body = read_body(&mut rq, shared.config.max_body_bytes);
            // A body refused unread (over the cap) is not read to its end: the connection
            // closes after the answer.
            let close = body.is_err();
            let (mut reply, mut grant) = route(shared, head, body, checked);
            if close {
                grant.push(("Connection", "close".to_owned()));
            }
            if reply.status == 404 && browsing {
                // A browser gets the 404 page, not the JSON error.
                reply = page_reply(crate::ui::not_found_page(shared, &path));
            }
            let status = reply.status;
            send(rq, reply, &grant);
            log::debug!("http: {method} {url} -> {status} in {:.1} ms", ms());
        }
    }
}

/// A request header's value.
fn header_value(rq: &tiny_http::Request, name: &'static str) -> Option<String> {
    rq.headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str().to_owned())
}

/// Sends a reply with extra headers.
fn send(rq: tiny_http::Request, reply: Reply, extra: &[(&str, String)]) {
    let mut response = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    let mut add = |name: &str, value: &str| {
        if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    };
    add("Content-Type", reply.content_type);
    add(NOSNIFF.0, NOSNIFF.1);
    for (k, v) in &reply.headers {
        if !k.eq_ignore_ascii_case(NOSNIFF.0) {
            add(k, v);
        }
    }
    for (k, v) in extra {
        add(k, v);
    }
    if let Err(err) = rq.respond(response) {
        log::debug!("http: could not send a response: {err}");
    }
}

/// Runs a handler, turning a panic into a logged 500 so the server keeps serving.
fn guarded(method: &str, url: &str, f: impl FnOnce() -> (Reply, Access)) -> (Reply, Access) {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        log::error!(
            "http: handler panicked on {method} {}: {what}",
            logging::loggable(url)
        );
        let reply = Reply::error(&ApiError::internal(
            "internal error while handling the request (logged)",
        ));
        let path = url.split('?').next().unwrap_or(url);
        (reply, routes::access(method, path))
    })
}

/// The 413 answer to a body over `cap`.
pub(crate) fn too_large(cap: u64) -> Reply {
    Reply::error(&ApiError::new(
        413,
        "payload_too_large",
        format!(
            "request body exceeds the limit of {} MiB (see --max-body-mb)",
            cap / (1024 * 1024)
        ),
    ))
}

/// The 400 answer to a body that could not be read.
pub(crate) fn unreadable_body(err: &std::io::Error) -> Reply {
    Reply::error(&ApiError::bad_request(
        "unreadable_body",
        format!("could not read the request body: {err}"),
    ))
}

/// Reads the body, refusing (413) a declared or actual length above `cap` (a declared one
/// without reading it).
fn read_body(rq: &mut tiny_http::Request, cap: u64) -> Result<Vec<u8>, Reply> {
    if rq.body_length().is_some_and(|n| n as u64 > cap) {
        return Err(too_large(cap));
    }
    // Sized from Content-Length (the Python client always sends it), so the body is read
    // into one allocation instead of a chain of growing ones.
    let declared = rq.body_length().unwrap_or(0).min(1 << 20);
    let mut body = Vec::with_capacity(declared + 1);
    match rq.as_reader().take(cap + 1).read_to_end(&mut body) {
        Ok(_) if body.len() as u64 > cap => Err(too_large(cap)),
        Ok(_) => Ok(body),
        Err(err) => Err(unreadable_body(&err)),
    }
}

/// The landing answer at `/` until the web UI exists.
fn index(shared: &Shared) -> Value {
    let mut v = crate::service::status(shared);
    v["api"] = json!("/api/openapi.json");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_handler_becomes_a_500_json_reply() {
        let (reply, access) = guarded("GET", "/x", || panic!("boom"));
        assert_eq!((reply.status, access), (500, Access::Guarded));
        let body: Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(body["error"], "internal_error");
        // A browser-client endpoint keeps its CORS grant on a 500.
        let (_, access) = guarded("POST", "/api/call/start?x=1", || panic!("boom"));
        assert_eq!(access, Access::Anyone);
        let ok = guarded("GET", "/x", || (Reply::empty(204), Access::Guarded));
        assert_eq!(ok.0.status, 204);
    }

    #[test]
    fn tolerant_json_accepts_python_non_finite_tokens() {
        assert_eq!(
            parse_json_tolerant(br#"{"a": NaN, "b": [Infinity, -Infinity]}"#).unwrap(),
            json!({"a": null, "b": [null, null]})
        );
        assert_eq!(
            parse_json_tolerant(br#"{"s": "NaN \" Infinity"}"#).unwrap(),
            json!({"s": "NaN \" Infinity"})
        );
        assert!(parse_json_tolerant(b"{").is_err());
        assert!(parse_json_tolerant(b"{\"a\": Nan}").is_err());
    }

    #[test]
    fn empty_body_is_an_empty_object_and_others_are_refused() {
        let mut req = Req::default();
        assert_eq!(req.json().unwrap(), Map::new());
        req.body = b"[1]".to_vec();
        assert_eq!(req.json().unwrap_err().code(), "invalid_body");
        req.body = b"{oops".to_vec();
        assert_eq!(req.json().unwrap_err().code(), "invalid_json");
    }
}
