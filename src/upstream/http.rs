//! The Streamable HTTP client transport (MCP 2025-03-26 … 2025-11-25) for upstream servers, and
//! the HTTP plumbing it shares with the legacy HTTP+SSE transport in [`super::sse`].
//!
//! Every message is one POST to the server's URL. A request is posted from its own thread, so
//! a long call blocks nobody: the answer comes back as a JSON body or on an event stream that
//! may first carry notifications and the server's own requests, and everything read is fed to
//! [`Peer::incoming`]; an exchange that ends without an answer fails its request with
//! [`Peer::fail`]. Notifications and responses are posted synchronously. The `Mcp-Session-Id`
//! the server hands out is sent back on every later message, and a 404 to a message carrying it
//! means the session is gone ([`Peer::closed`]). Just before `notifications/initialized` is
//! posted, a GET opens the server's own event stream (servers announce list changes on it right
//! after `initialized`); a server without one answers 405, which is fine.
//!
//! A request carrying the modern `_meta` envelope (revision 2026-07-28, see
//! [`super::peer::is_modern_message`]) is posted the modern way: no session id, the headers
//! `MCP-Protocol-Version`, `Mcp-Method` and, for `tools/call`, `resources/read` and
//! `prompts/get`, `Mcp-Name` ([`modern_headers`]); giving up on it closes its response stream
//! ([`Link::abandon`]) instead of posting `notifications/cancelled`. A modern connection never
//! sends `notifications/initialized`, so it never opens the GET stream either.
//!
//! Closing must also stop readers blocked on a socket. Each link's ureq agent therefore connects
//! through [`Interruptible`], whose transport waits for input in short slices and gives up once
//! the link's stop flag is set: every read on the link ends within [`POLL`] of `close`.

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use serde_json::Value;
use ureq::http::Response;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::time::Duration as Wait;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, DefaultConnector, NextTimeout, Transport,
};
use ureq::{Agent, Body, RequestBuilder};

use base64::Engine;

use super::auth::ServerAuth;
use super::peer::{
    is_modern_message, preview, Failure, Link, Peer, MODERN_VERSION, UNSUPPORTED_PROTOCOL_VERSION,
};
use super::sse_parse::{Event, EventReader};
use crate::limits::{
    UPSTREAM_ERROR_BODY, UPSTREAM_MAX_BODY, UPSTREAM_RESUME_ATTEMPTS, UPSTREAM_RESUME_DELAY,
    UPSTREAM_RESUME_MAX_DELAY,
};

/// How long a blocked read waits before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(250);

/// Longest a request's exchange may last. Only a backstop against leaked threads: the peer
/// times calls out itself (and sends `notifications/cancelled`).
const EXCHANGE_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Longest the POST of a notification or response may take.
pub(super) const POST_LIMIT: Duration = Duration::from_secs(30);

/// Connects a Streamable HTTP transport to `url` for `peer` and attaches it. Nothing is sent
/// yet: the caller runs [`Peer::initialize`], and [`Peer::shutdown`] closes the link.
pub fn connect(
    peer: &Arc<Peer>,
    url: &str,
    headers: &[(String, String)],
    connect_timeout: Duration,
) -> Result<(), String> {
    connect_authorized(peer, url, headers, None, connect_timeout)
}

/// [`connect`] with MCP authorization: every request carries the server's bearer token, and a
/// 401 or 403 answer goes to `auth` (see [`super::auth`]).
pub fn connect_authorized(
    peer: &Arc<Peer>,
    url: &str,
    headers: &[(String, String)],
    auth: Option<Arc<ServerAuth>>,
    connect_timeout: Duration,
) -> Result<(), String> {
    check_url(url)?;
    let shared = Shared {
        auth,
        peer: Arc::downgrade(peer),
        url: url.to_owned(),
        headers: headers.to_vec(),
        client: Client::new(connect_timeout),
        connect_timeout,
        session: Mutex::new(None),
        events_opened: AtomicBool::new(false),
        aborts: Mutex::new(HashMap::new()),
    };
    peer.set_link(Box::new(HttpLink(Arc::new(shared))));
    Ok(())
}

struct HttpLink(Arc<Shared>);

struct Shared {
    /// The server's authorization, if it is reached over HTTP at all.
    auth: Option<Arc<ServerAuth>>,
    peer: Weak<Peer>,
    url: String,
    headers: Vec<(String, String)>,
    client: Client,
    connect_timeout: Duration,
    session: Mutex<Option<String>>,
    events_opened: AtomicBool,
    /// The stop flags of modern requests in flight, by request id.
    aborts: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

/// The headers of a modern request (`None` for a legacy message): the revision, the method,
/// and `Mcp-Name` for the methods that name something (tool, resource URI, prompt).
pub(crate) fn modern_headers(msg: &Value) -> Option<Vec<(String, String)>> {
    if !is_modern_message(msg) {
        return None;
    }
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let mut headers = vec![
        ("MCP-Protocol-Version".to_owned(), MODERN_VERSION.to_owned()),
        ("Mcp-Method".to_owned(), header_value(method)),
    ];
    let named = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(name) = named
        .and_then(|k| msg.pointer(&format!("/params/{k}")))
        .and_then(Value::as_str)
    {
        headers.push(("Mcp-Name".to_owned(), header_value(name)));
    }
    Some(headers)
}

/// A header value as is when it is plain visible ASCII (spaces inside only), else
/// `=?base64?<standard base64 of its UTF-8>?=` (also when it already looks like that form).
pub(crate) fn header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// A request id as a map key.
fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Link for HttpLink {
    fn send(&self, peer: &Arc<Peer>, msg: &Value) -> Result<(), String> {
        let s = &self.0;
        if s.client.stopped() {
            return Err("connection closed".to_owned());
        }
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let method = msg.get("method").and_then(Value::as_str);
        let mut modern = modern_headers(msg);
        if let Some(h) = modern.as_mut() {
            // A tools/call mirrors the parameters the tool marks with `x-mcp-header`.
            h.extend(peer.param_headers(msg));
        }
        if let (Some(method), Some(id)) = (method, msg.get("id").filter(|v| !v.is_null())) {
            // A modern request gets a client of its own, which `abandon` can stop alone.
            let own = modern.is_some().then(|| {
                let (client, stop) = s.client.for_request(s.connect_timeout);
                lock(&s.aborts).insert(id_key(id), stop);
                client
            });
            let key = id_key(id);
            let (t, p, id, method) = (s.clone(), peer.clone(), id.clone(), method.to_owned());
            let spawned = thread::Builder::new()
                .name(format!("upstream-{}-post", peer.name))
                .spawn(move || {
                    let client = own.as_ref().unwrap_or(&t.client);
                    t.exchange(&p, client, modern.as_deref(), body, &id, &method);
                    lock(&t.aborts).remove(&id_key(&id));
                });
            if let Err(e) = spawned {
                lock(&s.aborts).remove(&key);
                return Err(format!("cannot start a thread: {e}"));
            }
            return Ok(());
        }
        if method == Some("notifications/initialized") {
            s.open_event_stream(peer);
        }
        let (result, had_session) = s.post(peer, &s.client, modern.as_deref(), body, POST_LIMIT);
        let resp = result.map_err(|e| s.client.describe(&e))?;
        let status = resp.status().as_u16();
        if resp.status().is_success() {
            drain(resp);
            return Ok(());
        }
        let (_, message) = describe_status(resp);
        s.session_lost(peer, status, had_session);
        Err(format!("HTTP {message}"))
    }

    fn close(&self) {
        let s = &self.0;
        if s.client.stop() {
            return;
        }
        let Some(session) = lock(&s.session).clone() else {
            return;
        };
        // This link's agent refuses new connections now: the DELETE gets its own. Waited for
        // at most a second; it ends the session on the server, which also closes the GET stream.
        let client = Client::new(Duration::from_secs(1));
        let mut rq = with_headers(client.agent.delete(&s.url), &s.headers)
            .config()
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .header("Mcp-Session-Id", session);
        if let Some(t) = s.auth.as_ref().and_then(|a| a.bearer()) {
            rq = rq.header("Authorization", format!("Bearer {t}"));
        }
        let name = match s.peer.upgrade() {
            Some(p) => {
                if let Some(v) = p.protocol_version() {
                    rq = rq.header("MCP-Protocol-Version", v);
                }
                p.name.clone()
            }
            None => String::new(),
        };
        let (tx, rx) = bounded(1);
        let spawned = thread::Builder::new()
            .name(format!("upstream-{name}-delete"))
            .spawn(move || {
                match rq.call() {
                    Ok(r) => log::debug!(
                        "upstream {name}: DELETE of the session answered {}",
                        r.status()
                    ),
                    Err(e) => log::debug!("upstream {name}: DELETE of the session failed: {e}"),
                }
                let _ = tx.send(());
            });
        if spawned.is_ok() {
            let _ = rx.recv_timeout(Duration::from_secs(1));
        }
    }

    fn abandon(&self, id: &Value) -> bool {
        match lock(&self.0.aborts).remove(&id_key(id)) {
            Some(stop) => {
                stop.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    fn mirrors_tool_params(&self) -> bool {
        true
    }
}

impl Shared {
    /// POSTs one message through `client`; also tells whether it carried a session id. A
    /// modern message (`modern` holds its headers) carries no session id and learns none.
    fn post(
        &self,
        peer: &Peer,
        client: &Client,
        modern: Option<&[(String, String)]>,
        body: Vec<u8>,
        limit: Duration,
    ) -> (Result<Response<Body>, ureq::Error>, bool) {
        self.post_once(peer, client, modern, body, limit, false)
    }

    fn post_once(
        &self,
        peer: &Peer,
        client: &Client,
        modern: Option<&[(String, String)]>,
        body: Vec<u8>,
        limit: Duration,
        retried: bool,
    ) -> (Result<Response<Body>, ureq::Error>, bool) {
        let session = match modern {
            Some(_) => None,
            None => lock(&self.session).clone(),
        };
        let had_session = session.is_some();
        let rq = client
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(limit))
            .build();
        let mut rq = with_headers(rq, &self.headers)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(id) = session {
            rq = rq.header("Mcp-Session-Id", id);
        }
        match modern {
            Some(headers) => {
                for (k, v) in headers {
                    rq = rq.header(k.as_str(), v);
                }
            }
            None => {
                if let Some(v) = peer.protocol_version() {
                    rq = rq.header("MCP-Protocol-Version", v);
                }
            }
        }
        let token = self.auth.as_ref().and_then(|a| a.bearer());
        if let Some(t) = &token {
            rq = rq.header("Authorization", format!("Bearer {t}"));
        }
        let result = rq.send(&body[..]);
        if let (Some(auth), Ok(resp)) = (&self.auth, &result) {
            let status = resp.status().as_u16();
            if matches!(status, 401 | 403) {
                let challenge = resp
                    .headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok());
                // Sent once more when the token was refreshed; a second refusal stands.
                if auth.challenged(status, challenge, token.as_deref()) && !retried {
                    if let Ok(resp) = result {
                        drain(resp);
                    }
                    return self.post_once(peer, client, modern, body, limit, true);
                }
            }
        }
        if let (Ok(resp), None) = (&result, modern) {
            self.remember_session(peer, resp);
        }
        (result, had_session)
    }

    fn remember_session(&self, peer: &Peer, resp: &Response<Body>) {
        let Some(value) = resp.headers().get("mcp-session-id") else {
            return;
        };
        match value.to_str() {
            Ok(id) if !id.is_empty() && id.bytes().all(|b| (0x21..=0x7e).contains(&b)) => {
                let mut session = lock(&self.session);
                if session.as_deref() != Some(id) {
                    log::debug!("upstream {}: the server assigned a session", peer.name);
                    *session = Some(id.to_owned());
                }
            }
            _ => log::warn!(
                "upstream {}: ignoring an Mcp-Session-Id that is not visible ASCII",
                peer.name
            ),
        }
    }

    /// A 404 to a message that carried a session id: the server forgot the session.
    fn session_lost(&self, peer: &Peer, status: u16, had_session: bool) {
        if status == 404 && had_session && !self.client.stopped() {
            log::info!("upstream {}: the server ended the session", peer.name);
            peer.closed("the server ended the session (HTTP 404)");
        }
    }

    /// Posts a request and feeds its answer (with whatever came before it) to the peer, or
    /// fails the request. Runs on its own thread.
    fn exchange(
        &self,
        peer: &Arc<Peer>,
        client: &Client,
        modern: Option<&[(String, String)]>,
        body: Vec<u8>,
        id: &Value,
        method: &str,
    ) {
        let (result, had_session) = self.post(peer, client, modern, body, EXCHANGE_LIMIT);
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                let why = client.describe(&e);
                log::debug!("upstream {}: {method} (id {id}): {why}", peer.name);
                return peer.fail(id, Failure::Disconnected(why));
            }
        };
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let (error, message) = describe_error(resp);
            log::debug!("upstream {}: {method} (id {id}): HTTP {message}", peer.name);
            let failure = match error {
                // A modern server refusing the revision: its error says which it supports.
                Some(e)
                    if e.get("code").and_then(Value::as_i64)
                        == Some(UNSUPPORTED_PROTOCOL_VERSION) =>
                {
                    Failure::Rpc {
                        code: UNSUPPORTED_PROTOCOL_VERSION,
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        data: e.get("data").cloned(),
                    }
                }
                error => Failure::Http {
                    status,
                    mcp_error: error.is_some(),
                    message,
                },
            };
            peer.fail(id, failure);
            return self.session_lost(peer, status, had_session);
        }
        let failure = match content_type(&resp).as_str() {
            "application/json" => self.json_answer(peer, client, resp, id),
            "text/event-stream" => self.stream_answer(peer, client, resp, id, modern.is_none()),
            other => Some(Failure::Invalid(format!(
                "HTTP {status} with {} instead of a JSON-RPC answer",
                if other.is_empty() {
                    "no content type".to_owned()
                } else {
                    format!("content type {other}")
                }
            ))),
        };
        if let Some(f) = failure {
            if !client.stopped() {
                log::debug!("upstream {}: {method} (id {id}): {f}", peer.name);
                peer.fail(id, f);
            }
        }
    }

    fn json_answer(
        &self,
        peer: &Arc<Peer>,
        client: &Client,
        resp: Response<Body>,
        id: &Value,
    ) -> Option<Failure> {
        let bytes = match resp
            .into_body()
            .into_with_config()
            .limit(UPSTREAM_MAX_BODY)
            .read_to_vec()
        {
            Ok(b) => b,
            Err(e) => {
                return Some(Failure::Disconnected(format!(
                    "reading the answer failed: {}",
                    client.describe(&e)
                )))
            }
        };
        let msg: Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return Some(Failure::Invalid(format!(
                    "the JSON body does not parse ({e}): {}",
                    preview(&String::from_utf8_lossy(&bytes))
                )))
            }
        };
        if client.stopped() {
            return None;
        }
        let answered = answers(&msg, id);
        peer.incoming(msg);
        (!answered).then(|| Failure::Invalid(format!("the JSON body does not answer id {id}")))
    }

    /// Reads a request's event stream until its answer. A legacy-era stream (`resumable`) that
    /// ends or breaks without the answer after giving an event id is resumed (revision
    /// 2025-11-25, "Resumability and Redelivery"): after the server's `retry` delay (else
    /// [`UPSTREAM_RESUME_DELAY`], at most [`UPSTREAM_RESUME_MAX_DELAY`]) a GET with
    /// `Last-Event-ID` asks for the rest, again as often as the server closes it, until
    /// [`UPSTREAM_RESUME_ATTEMPTS`] reconnections in a row brought no new event or the request
    /// is no longer awaited. The modern revision has no resumption.
    fn stream_answer(
        &self,
        peer: &Arc<Peer>,
        client: &Client,
        resp: Response<Body>,
        id: &Value,
        resumable: bool,
    ) -> Option<Failure> {
        let mut resp = resp;
        let mut last_id: Option<String> = None;
        let mut retry: Option<u64> = None;
        let mut fruitless = 0u32;
        loop {
            let mut events = EventReader::new(resp.into_body().into_reader());
            let mut why = loop {
                match events.next_event() {
                    Ok(Some(ev)) => {
                        if client.stopped() {
                            return None;
                        }
                        if let Some(msg) = event_message(peer, &ev) {
                            let answered = answers(&msg, id);
                            peer.incoming(msg);
                            if answered {
                                // Done; the server closes the stream after the answer anyway.
                                return None;
                            }
                        }
                    }
                    Ok(None) => {
                        break "the server closed the response stream without answering".to_owned()
                    }
                    Err(e) => break format!("the response stream failed: {e}"),
                }
            };
            if client.stopped() {
                return None;
            }
            if let Some(r) = events.retry {
                retry = Some(r);
            }
            if let Some(seen) = events.last_id() {
                if last_id.as_deref() != Some(seen) {
                    last_id = Some(seen.to_owned());
                    fruitless = 0;
                }
            }
            let from = match &last_id {
                Some(from) if resumable => from.clone(),
                _ => return Some(Failure::Disconnected(why)),
            };
            let delay = retry
                .map_or(UPSTREAM_RESUME_DELAY, Duration::from_millis)
                .min(UPSTREAM_RESUME_MAX_DELAY);
            resp = loop {
                if fruitless >= UPSTREAM_RESUME_ATTEMPTS {
                    return Some(Failure::Disconnected(format!(
                        "{why}; {fruitless} reconnections in a row (GET with Last-Event-ID) brought nothing new"
                    )));
                }
                fruitless += 1;
                if !self.pause(peer, client, id, delay) {
                    return None;
                }
                log::debug!(
                    "upstream {}: id {id}: {why}; resuming after event {from:?} (attempt {fruitless})",
                    peer.name
                );
                match self.resume(peer, client, &from) {
                    Ok(r) => break r,
                    Err(Resumed::Retry(e)) => {
                        why = format!("resuming the response stream failed: {e}")
                    }
                    Err(Resumed::Refused(e)) => {
                        return Some(Failure::Disconnected(format!(
                            "{why}, and resuming it was refused: {e}"
                        )))
                    }
                }
            };
        }
    }

    /// Waits `delay` before a reconnection; false when there is no point any more (the link
    /// closed, or nobody awaits request `id`).
    fn pause(&self, peer: &Peer, client: &Client, id: &Value, delay: Duration) -> bool {
        let end = Instant::now() + delay;
        loop {
            if client.stopped() || !peer.awaits(id) {
                return false;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            thread::sleep(left.min(Duration::from_millis(20)));
        }
    }

    /// One GET resuming a response stream after event `last_event_id`.
    fn resume(
        &self,
        peer: &Peer,
        client: &Client,
        last_event_id: &str,
    ) -> Result<Response<Body>, Resumed> {
        let session = lock(&self.session).clone();
        let had_session = session.is_some();
        let rq = client
            .agent
            .get(&self.url)
            .config()
            .timeout_global(Some(EXCHANGE_LIMIT))
            .build();
        let mut rq = with_headers(rq, &self.headers)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", last_event_id);
        if let Some(s) = session {
            rq = rq.header("Mcp-Session-Id", s);
        }
        if let Some(v) = peer.protocol_version() {
            rq = rq.header("MCP-Protocol-Version", v);
        }
        let resp = rq.call().map_err(|e| Resumed::Retry(client.describe(&e)))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let (_, message) = describe_status(resp);
            self.session_lost(peer, status, had_session);
            return Err(Resumed::Refused(format!("HTTP {message}")));
        }
        match content_type(&resp).as_str() {
            "text/event-stream" => Ok(resp),
            other => Err(Resumed::Refused(format!(
                "HTTP {status} with {} instead of an event stream",
                if other.is_empty() {
                    "no content type".to_owned()
                } else {
                    format!("content type {other}")
                }
            ))),
        }
    }

    /// Opens the server's event stream (once) and returns when its response headers arrived,
    /// it failed, or the connect timeout passed.
    fn open_event_stream(self: &Arc<Self>, peer: &Arc<Peer>) {
        if self.events_opened.swap(true, Ordering::SeqCst) {
            return;
        }
        let (tx, rx) = bounded(1);
        let (s, p) = (self.clone(), peer.clone());
        let spawned = thread::Builder::new()
            .name(format!("upstream-{}-events", peer.name))
            .spawn(move || {
                s.read_event_stream(&p, move || {
                    let _ = tx.send(());
                })
            });
        match spawned {
            Ok(_) => drop(rx.recv_timeout(self.connect_timeout)),
            Err(e) => log::warn!(
                "upstream {}: cannot start the event stream thread: {e}",
                peer.name
            ),
        }
    }

    fn read_event_stream(&self, peer: &Arc<Peer>, opened: impl FnOnce()) {
        let session = lock(&self.session).clone();
        let mut rq = with_headers(self.client.agent.get(&self.url), &self.headers)
            .header("Accept", "text/event-stream");
        if let Some(t) = self.auth.as_ref().and_then(|a| a.bearer()) {
            rq = rq.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(id) = session {
            rq = rq.header("Mcp-Session-Id", id);
        }
        if let Some(v) = peer.protocol_version() {
            rq = rq.header("MCP-Protocol-Version", v);
        }
        let result = rq.call();
        opened();
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                let why = self.client.describe(&e);
                return log::debug!("upstream {}: no event stream: {why}", peer.name);
            }
        };
        let status = resp.status();
        let ct = content_type(&resp);
        if !status.is_success() || ct != "text/event-stream" {
            let level = if status.is_client_error() {
                log::Level::Debug
            } else {
                log::Level::Info
            };
            return log::log!(
                level,
                "upstream {}: the server offers no event stream (HTTP {status}, {ct:?})",
                peer.name
            );
        }
        log::debug!("upstream {}: event stream open", peer.name);
        let mut events = EventReader::new(resp.into_body().into_reader());
        let end = loop {
            match events.next_event() {
                Ok(Some(ev)) => {
                    if self.client.stopped() {
                        return;
                    }
                    if let Some(msg) = event_message(peer, &ev) {
                        peer.incoming(msg);
                    }
                }
                Ok(None) => break "ended".to_owned(),
                Err(e) => break format!("failed: {e}"),
            }
        };
        if !self.client.stopped() {
            log::debug!("upstream {}: the event stream {end}", peer.name);
        }
    }
}

/// Why a GET resuming a response stream gave no stream.
enum Resumed {
    /// It did not get through (connection refused, reset): worth another attempt.
    Retry(String),
    /// The server answered with an error or no event stream: it does not resume streams.
    Refused(String),
}

/// Whether `msg` (a message or batch) is the response to request `id`.
fn answers(msg: &Value, id: &Value) -> bool {
    match msg {
        Value::Array(batch) => batch.iter().any(|m| answers(m, id)),
        Value::Object(o) => o.get("id") == Some(id) && !o.contains_key("method"),
        _ => false,
    }
}

/// The JSON-RPC message a `message` event carries; other events, empty data (a stream's
/// priming event) and unparsable data (logged) give `None`.
pub(super) fn event_message(peer: &Peer, ev: &Event) -> Option<Value> {
    if ev.event != "message" {
        log::debug!("upstream {}: ignoring a {:?} event", peer.name, ev.event);
        return None;
    }
    if ev.data.trim().is_empty() {
        return None;
    }
    match serde_json::from_str(&ev.data) {
        Ok(v) => Some(v),
        Err(e) => {
            log::warn!(
                "upstream {}: skipping an event that is not JSON ({e}): {}",
                peer.name,
                preview(&ev.data)
            );
            None
        }
    }
}

/// Rejects what is not an `http://` or `https://` URL (and `https://` without TLS support).
pub(super) fn check_url(url: &str) -> Result<(), String> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http") => {}
        Some("https") if cfg!(feature = "tls") => {}
        Some("https") => {
            return Err(format!(
                "{url}: https needs a build with the `tls` feature (cargo build --features tls)"
            ))
        }
        _ => return Err(format!("{url}: not an http:// or https:// URL")),
    }
    url.parse::<ureq::http::Uri>()
        .map(drop)
        .map_err(|e| format!("{url}: invalid URL ({e})"))
}

/// Adds the configured headers, except those the transports set themselves.
pub(super) fn with_headers<B>(
    mut rq: RequestBuilder<B>,
    headers: &[(String, String)],
) -> RequestBuilder<B> {
    const OURS: [&str; 7] = [
        "accept",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
    ];
    for (k, v) in headers {
        let param = k
            .get(..super::params::HEADER_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(super::params::HEADER_PREFIX));
        if !param && !OURS.iter().any(|o| k.eq_ignore_ascii_case(o)) {
            rq = rq.header(k, v);
        }
    }
    rq
}

/// The media type of a response, lowercase, without parameters.
pub(crate) fn content_type(resp: &Response<Body>) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Reads a small body of known length to its end so the connection can be reused; anything
/// else is dropped (closing the connection), since reading it might block.
pub(crate) fn drain(resp: Response<Body>) {
    let mut body = resp.into_body();
    if body
        .content_length()
        .is_some_and(|n| n <= UPSTREAM_ERROR_BODY)
    {
        let _ = io::copy(&mut body.as_reader(), &mut io::sink());
    }
}

/// Describes a response that is not a success: whether its body is a JSON-RPC error, and
/// `404 Not Found: <the error message or a body preview>`.
pub(crate) fn describe_status(resp: Response<Body>) -> (bool, String) {
    let (error, message) = describe_error(resp);
    (error.is_some(), message)
}

/// [`describe_status`] with the JSON-RPC error object itself, when the body is one.
pub(crate) fn describe_error(resp: Response<Body>) -> (Option<Value>, String) {
    let status = resp.status();
    let mut head = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    head.truncate(head.trim_end().len());
    if status.is_redirection() {
        if let Some(to) = resp.headers().get("location").and_then(|v| v.to_str().ok()) {
            head.push_str(&format!(" (redirects to {to})"));
        }
    }
    let mut bytes = Vec::new();
    let _ = resp
        .into_body()
        .into_reader()
        .take(UPSTREAM_ERROR_BODY)
        .read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    let error = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .filter(|e| e.get("code").is_some_and(Value::is_number));
    match error {
        Some(e) => {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let described = format!("{head}: {}", preview(&format!("{} {message}", e["code"])));
            (Some(e), described)
        }
        None if text.is_empty() => (None, head),
        None => (None, format!("{head}: {}", preview(text))),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A ureq agent whose connections can all be stopped at once.
#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) agent: Agent,
    stop: Arc<AtomicBool>,
    /// A request's own stop flag (see [`Client::for_request`]).
    own: Option<Arc<AtomicBool>>,
}

/// The flags that stop a client's connections: its link's, and a request's own.
#[derive(Clone, Debug)]
struct Stops {
    link: Arc<AtomicBool>,
    own: Option<Arc<AtomicBool>>,
}

impl Stops {
    fn set(&self) -> bool {
        self.link.load(Ordering::SeqCst)
            || self.own.as_ref().is_some_and(|o| o.load(Ordering::SeqCst))
    }
}

impl Client {
    /// An agent that returns 4xx/5xx as responses, follows no redirects (a POST must not turn
    /// into a GET, nor credentials go elsewhere), keeps no idle connections, and times out
    /// connecting after `connect_timeout`; other timeouts are set per request.
    pub(crate) fn new(connect_timeout: Duration) -> Client {
        Client::with_stops(connect_timeout, Arc::new(AtomicBool::new(false)), None)
    }

    /// A client for one request: stopped with this one (the link) or by the flag returned.
    pub(crate) fn for_request(&self, connect_timeout: Duration) -> (Client, Arc<AtomicBool>) {
        let own = Arc::new(AtomicBool::new(false));
        let client = Client::with_stops(connect_timeout, self.stop.clone(), Some(own.clone()));
        (client, own)
    }

    fn with_stops(
        connect_timeout: Duration,
        stop: Arc<AtomicBool>,
        own: Option<Arc<AtomicBool>>,
    ) -> Client {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_resolve(Some(connect_timeout))
            .timeout_connect(Some(connect_timeout))
            // No idle keep-alive connections: a thread-per-connection server (tiny_http, this
            // very server as an upstream) parks a thread on each idle connection, and with
            // enough of them parked it can leave a new connection unserved. A fresh connection
            // per message costs about 0.1 ms on loopback (a TLS handshake on remote https).
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .user_agent(concat!("cideldill-server/", env!("CARGO_PKG_VERSION")))
            .build();
        let stops = Stops {
            link: stop.clone(),
            own: own.clone(),
        };
        let connector = Interruptible {
            inner: DefaultConnector::new(),
            stop: stops,
        };
        Client {
            agent: Agent::with_parts(config, connector, DefaultResolver::default()),
            stop,
            own,
        }
    }

    /// Stops every connection of this client; tells whether it was stopped already.
    pub(crate) fn stop(&self) -> bool {
        self.stop.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            || self.own.as_ref().is_some_and(|o| o.load(Ordering::SeqCst))
    }

    /// A ureq error for humans; "connection closed" once stopped.
    pub(crate) fn describe(&self, e: &ureq::Error) -> String {
        if self.stopped() {
            "connection closed".to_owned()
        } else {
            e.to_string()
        }
    }
}

/// ureq's default connector (TCP, TLS when built with it), with transports that honour a stop
/// flag.
#[derive(Debug)]
struct Interruptible {
    inner: DefaultConnector,
    stop: Stops,
}

impl Connector for Interruptible {
    type Out = Stoppable;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<()>,
    ) -> Result<Option<Stoppable>, ureq::Error> {
        if self.stop.set() {
            return Err(stopped());
        }
        let transport = self.inner.connect(details, chained)?;
        Ok(transport.map(|inner| Stoppable {
            inner,
            stop: self.stop.clone(),
        }))
    }
}

#[derive(Debug)]
struct Stoppable {
    inner: Box<dyn Transport>,
    stop: Stops,
}

fn stopped() -> ureq::Error {
    ureq::Error::Io(io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection closed",
    ))
}

impl Transport for Stoppable {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        if self.stop.set() {
            return Err(stopped());
        }
        self.inner.transmit_output(amount, timeout)
    }

    /// Waits in slices of [`POLL`]: a timed-out read consumes nothing (plain or TLS), so the
    /// wait can resume after a look at the stop flag.
    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let deadline = match timeout.after {
            Wait::Exact(d) => Instant::now().checked_add(d),
            Wait::NotHappening => None,
        };
        loop {
            if self.stop.set() {
                return Err(stopped());
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let mut slice = timeout;
            slice.after = Wait::Exact(left.map_or(POLL, |l| l.min(POLL)));
            match self.inner.await_input(slice) {
                Err(ureq::Error::Timeout(_)) if left.is_none_or(|l| l > POLL) => {}
                other => return other,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        !self.stop.set() && self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::upstream::peer::Notice;
    use crate::upstream::sse_parse::testing::{body, header, Server, Stream};
    use crossbeam_channel::{unbounded, Receiver, Sender};
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(10);

    pub(crate) fn peer() -> (Arc<Peer>, Receiver<Notice>) {
        let (tx, rx) = unbounded();
        let p = Peer::new("t", move |n| {
            let _ = tx.send(n);
        });
        (p, rx)
    }

    pub(crate) fn reply(rq: tiny_http::Request, status: u16, body: &str, headers: &[(&str, &str)]) {
        let mut r = tiny_http::Response::from_string(body).with_status_code(status);
        for (k, v) in headers {
            r.add_header(tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap());
        }
        let _ = rq.respond(r);
    }

    fn json_reply(rq: tiny_http::Request, msg: Value, headers: &[(&str, &str)]) {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        reply(rq, 200, &msg.to_string(), &all);
    }

    fn result(id: &Value, result: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    }

    fn init_result(id: &Value) -> Value {
        result(
            id,
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true}},
                   "serverInfo": {"name": "test"}}),
        )
    }

    /// What a handler saw of one request: method, JSON-RPC method or `-`, session, version.
    type Seen = (String, String, Option<String>, Option<String>);

    /// Reads a POST's JSON body and records the request.
    fn record(rq: &mut tiny_http::Request, seen: &Sender<Seen>) -> Value {
        let msg: Value = serde_json::from_str(&body(rq)).unwrap_or(Value::Null);
        let _ = seen.send((
            rq.method().to_string(),
            msg["method"].as_str().unwrap_or("-").to_owned(),
            header(rq, "Mcp-Session-Id"),
            header(rq, "MCP-Protocol-Version"),
        ));
        msg
    }

    #[test]
    fn initialize_event_stream_call_and_close() {
        let (seen_tx, seen) = unbounded();
        let (gone_tx, gone) = unbounded();
        let server = Server::start(move |mut rq| {
            let msg = record(&mut rq, &seen_tx);
            match (rq.method(), msg["method"].as_str()) {
                (tiny_http::Method::Get, _) => {
                    assert_eq!(header(&rq, "Accept").as_deref(), Some("text/event-stream"));
                    let mut s = Stream::open(rq, &[]);
                    s.event(
                        Some("message"),
                        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                    );
                    while s.raw(": ping\n\n") {
                        thread::sleep(Duration::from_millis(50));
                    }
                    let _ = gone_tx.send(());
                }
                (tiny_http::Method::Delete, _) => reply(rq, 200, "", &[]),
                (_, Some("initialize")) => {
                    json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
                }
                (_, Some("tools/list")) => {
                    assert_eq!(
                        header(&rq, "Accept").as_deref(),
                        Some("application/json, text/event-stream")
                    );
                    assert_eq!(header(&rq, "X-Token").as_deref(), Some("secret"));
                    json_reply(
                        rq,
                        result(&msg["id"], json!({"tools": [{"name": "a"}]})),
                        &[],
                    )
                }
                _ => reply(rq, 202, "", &[]),
            }
        });
        let (p, notices) = peer();
        let headers = [("X-Token".to_owned(), "secret".to_owned())];
        connect(&p, &format!("{}/mcp", server.base), &headers, WAIT).unwrap();
        let init = p.initialize(WAIT).unwrap();
        assert_eq!(init.protocol_version, "2025-06-18");
        assert_eq!(notices.recv_timeout(WAIT), Ok(Notice::ToolsChanged));
        let tools = p.list_all("tools/list", "tools", WAIT).unwrap();
        assert_eq!(tools, vec![json!({"name": "a"})]);

        let t0 = Instant::now();
        p.shutdown("bye");
        assert!(t0.elapsed() < Duration::from_secs(2));
        gone.recv_timeout(WAIT)
            .expect("the event stream was closed");
        let s = |x: &str| Some(x.to_owned());
        let v = s("2025-06-18");
        let got: Vec<Seen> = seen.try_iter().collect();
        assert_eq!(
            got,
            vec![
                ("POST".into(), "initialize".into(), None, None),
                ("GET".into(), "-".into(), s("s-1"), v.clone()),
                (
                    "POST".into(),
                    "notifications/initialized".into(),
                    s("s-1"),
                    v.clone()
                ),
                ("POST".into(), "tools/list".into(), s("s-1"), v.clone()),
                ("DELETE".into(), "-".into(), s("s-1"), v),
            ]
        );
        assert_eq!(
            p.request("tools/list", json!({}), WAIT),
            Err(Failure::Disconnected("bye".into()))
        );
    }

    #[test]
    fn answers_on_an_event_stream_after_the_servers_ping() {
        let (pong_tx, pong) = unbounded::<Value>();
        let server = Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            match msg["method"].as_str() {
                Some("slow") => {
                    let mut s = Stream::open(rq, &[]);
                    s.event(None, r#"{"jsonrpc":"2.0","id":"srv-1","method":"ping"}"#);
                    let answer = pong.recv_timeout(WAIT).unwrap_or(Value::Null);
                    assert_eq!(
                        answer,
                        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
                    );
                    s.raw(": keep-alive\n\nevent: other\ndata: x\n\nid: 1\ndata:\n\n");
                    s.event(Some("message"), r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#);
                    s.event(
                        Some("message"),
                        &result(&msg["id"], json!({"done": true})).to_string(),
                    );
                    s.finish();
                }
                Some("mute") => {
                    let mut s = Stream::open(rq, &[]);
                    s.event(Some("message"), "not json");
                    s.finish();
                }
                Some(_) => reply(rq, 202, "", &[]),
                None => {
                    let _ = pong_tx.send(msg);
                    reply(rq, 202, "", &[]);
                }
            }
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        assert_eq!(
            p.request("slow", json!({}), WAIT),
            Ok(json!({"done": true}))
        );
        assert_eq!(
            p.request("mute", json!({}), WAIT),
            Err(Failure::Disconnected(
                "the server closed the response stream without answering".into()
            ))
        );
    }

    #[test]
    fn a_stale_session_closes_the_peer() {
        let server = Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            match (rq.method(), msg["method"].as_str()) {
                (tiny_http::Method::Get, _) => reply(rq, 405, "Method Not Allowed", &[]),
                (_, Some("initialize")) => {
                    json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-2")])
                }
                (_, Some("notifications/initialized")) => reply(rq, 202, "", &[]),
                _ => reply(rq, 404, "Session not found", &[]),
            }
        });
        let (p, notices) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        p.initialize(WAIT).unwrap();
        match p.request("tools/list", json!({}), WAIT) {
            Err(Failure::Http {
                status: 404,
                mcp_error: false,
                message,
            }) => assert_eq!(message, "404 Not Found: Session not found"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            notices.recv_timeout(WAIT),
            Ok(Notice::Closed(
                "the server ended the session (HTTP 404)".into()
            ))
        );
        assert!(p.is_closed());
    }

    #[test]
    fn http_errors_and_refused_connections_fail_the_call() {
        let server = Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            match msg["method"].as_str() {
                Some("rpc") => reply(
                    rq,
                    400,
                    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: no valid session"}}"#,
                    &[("Content-Type", "application/json")],
                ),
                Some("plain") => reply(rq, 405, "", &[]),
                Some("accepted") => reply(rq, 202, "", &[]),
                _ => reply(rq, 500, "boom", &[]),
            }
        });
        let (p, notices) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        let fail = |m: &str| p.request(m, json!({}), WAIT).unwrap_err();
        assert_eq!(
            fail("rpc"),
            Failure::Http {
                status: 400,
                mcp_error: true,
                message: "400 Bad Request: -32000 Bad Request: no valid session".into()
            }
        );
        assert_eq!(
            fail("plain"),
            Failure::Http {
                status: 405,
                mcp_error: false,
                message: "405 Method Not Allowed".into()
            }
        );
        assert!(matches!(fail("accepted"), Failure::Invalid(_)));
        assert_eq!(
            p.notify("notifications/x", json!({})),
            Err("HTTP 500 Internal Server Error: boom".into())
        );
        assert!(!p.is_closed());
        assert!(notices.try_recv().is_err());

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (q, _) = peer();
        connect(&q, &format!("http://127.0.0.1:{port}/mcp"), &[], WAIT).unwrap();
        match q.request("x", json!({}), WAIT) {
            Err(Failure::Disconnected(why)) => assert!(why.contains("refused"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(q.notify("notifications/x", json!({})).is_err());
    }

    #[test]
    fn modern_headers_name_the_method_and_encode_what_is_not_plain_ascii() {
        use crate::upstream::peer::with_envelope;
        let msg = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": with_envelope(params)});
        let legacy =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        assert_eq!(modern_headers(&legacy), None);
        let h = |m: &Value| {
            modern_headers(m)
                .unwrap()
                .into_iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            h(&msg("tools/list", json!({}))),
            ["MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list"]
        );
        assert_eq!(
            h(&msg("tools/call", json!({"name": "echo", "arguments": {}})))[2],
            "Mcp-Name: echo"
        );
        assert_eq!(
            h(&msg("tools/call", json!({"name": "größe_✓"})))[2],
            "Mcp-Name: =?base64?Z3LDtsOfZV/inJM=?="
        );
        assert_eq!(
            h(&msg("resources/read", json!({"uri": "file:///a b.txt"})))[2],
            "Mcp-Name: file:///a b.txt"
        );
        assert_eq!(
            h(&msg("prompts/get", json!({"name": "p"})))[2],
            "Mcp-Name: p"
        );
        for (value, plain) in [
            ("plain name", true),
            (" lead", false),
            ("trail ", false),
            ("tab\there", false),
            ("=?base64?eA==?=", false),
            ("", true),
        ] {
            assert_eq!(header_value(value) == value, plain, "{value:?}");
        }
        assert_eq!(header_value(" lead"), "=?base64?IGxlYWQ=?=");
    }

    // A modern server over Streamable HTTP: the probe chooses the modern era; every request is
    // a POST with the modern headers and envelope and no session (one the server hands out is
    // ignored); a request given up closes its response stream instead of posting
    // notifications/cancelled; closing sends no DELETE.
    #[test]
    fn a_modern_server_gets_modern_posts_and_cancellation_by_a_closed_stream() {
        use crate::upstream::peer::{Era, MODERN_VERSION};
        type Posted = (
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let (seen_tx, seen) = unbounded::<Posted>();
        let (gone_tx, gone) = unbounded();
        let server = Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            let method = msg["method"].as_str().unwrap_or("-").to_owned();
            let meta = &msg["params"]["_meta"];
            let envelope_ok = meta["io.modelcontextprotocol/protocolVersion"] == MODERN_VERSION
                && meta["io.modelcontextprotocol/clientCapabilities"] == json!({})
                && meta["io.modelcontextprotocol/clientInfo"]["name"] == "cideldill-server";
            let _ = seen_tx.send((
                format!(
                    "{} {method}{}",
                    rq.method(),
                    if envelope_ok { "" } else { " (no envelope)" }
                ),
                header(&rq, "MCP-Protocol-Version"),
                header(&rq, "Mcp-Method"),
                header(&rq, "Mcp-Name"),
                header(&rq, "Mcp-Session-Id"),
            ));
            if rq.method() != &tiny_http::Method::Post {
                return reply(rq, 405, "", &[]);
            }
            let id = msg["id"].clone();
            match method.as_str() {
                "server/discover" => json_reply(
                    rq,
                    result(
                        &id,
                        json!({"supportedVersions": ["2025-11-25", MODERN_VERSION],
                        "capabilities": {"tools": {}}, "resultType": "complete",
                        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern"}}}),
                    ),
                    &[("Mcp-Session-Id", "should-be-ignored")],
                ),
                "tools/call" if msg["params"]["name"] == "slow" => {
                    let mut s = Stream::open(rq, &[]);
                    while s.raw(": waiting\n\n") {
                        thread::sleep(Duration::from_millis(50));
                    }
                    let _ = gone_tx.send(());
                }
                "tools/call" => json_reply(
                    rq,
                    result(&id, json!({"content": [], "resultType": "complete"})),
                    &[],
                ),
                _ => reply(rq, 400, "unexpected", &[]),
            }
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        let init = p.handshake(WAIT).unwrap();
        assert_eq!(init.era, Era::Modern);
        assert_eq!(init.server_info, json!({"name": "modern"}));
        assert_eq!(p.era(), Era::Modern);
        let r = p.request(
            "tools/call",
            json!({"name": "größe_✓", "arguments": {}}),
            WAIT,
        );
        assert_eq!(r, Ok(json!({"content": [], "resultType": "complete"})));
        let t0 = Instant::now();
        let r = p.request(
            "tools/call",
            json!({"name": "slow"}),
            Duration::from_millis(300),
        );
        assert_eq!(r, Err(Failure::Timeout(Duration::from_millis(300))));
        gone.recv_timeout(WAIT)
            .expect("the response stream was closed");
        assert!(t0.elapsed() < Duration::from_secs(5));
        p.shutdown("bye");
        thread::sleep(Duration::from_millis(100));
        let got: Vec<Posted> = seen.try_iter().collect();
        let s = |x: &str| Some(x.to_owned());
        let v = s(MODERN_VERSION);
        assert_eq!(
            got,
            vec![
                (
                    "POST server/discover".into(),
                    v.clone(),
                    s("server/discover"),
                    None,
                    None
                ),
                (
                    "POST tools/call".into(),
                    v.clone(),
                    s("tools/call"),
                    s("=?base64?Z3LDtsOfZV/inJM=?="),
                    None
                ),
                (
                    "POST tools/call".into(),
                    v.clone(),
                    s("tools/call"),
                    s("slow"),
                    None
                ),
            ]
        );
    }

    // A legacy Streamable HTTP server that answers the probe with an HTTP error still gets
    // initialize, and the session it hands out.
    #[test]
    fn a_refused_probe_falls_back_to_initialize() {
        use crate::upstream::peer::Era;
        let (seen_tx, seen) = unbounded();
        let server = Server::start(move |mut rq| {
            let msg = record(&mut rq, &seen_tx);
            match (rq.method(), msg["method"].as_str()) {
                (tiny_http::Method::Get, _) => reply(rq, 405, "", &[]),
                (_, Some("initialize")) => {
                    json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-9")])
                }
                (_, Some("server/discover")) => reply(
                    rq,
                    400,
                    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: no valid session ID"}}"#,
                    &[("Content-Type", "application/json")],
                ),
                _ => reply(rq, 202, "", &[]),
            }
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        let init = p.handshake(WAIT).unwrap();
        assert_eq!(
            (init.era, init.protocol_version.as_str()),
            (Era::Legacy, "2025-06-18")
        );
        let methods: Vec<String> = seen.try_iter().map(|s: Seen| s.1).collect();
        assert_eq!(methods[..2], ["server/discover", "initialize"]);
    }

    /// A legacy Streamable HTTP server for resumption tests: `initialize` hands out session
    /// `s-r`; a GET without `Last-Event-ID` (the server's own stream) is refused with 405;
    /// `tools/call` opens a stream with a priming event (`id: e-1`, `retry: RETRY`) and closes
    /// it; a GET with `Last-Event-ID` goes to `resumed`, which gets the request's id too.
    fn resuming_server(
        retry_ms: u64,
        resumed: impl Fn(tiny_http::Request, String, Value) + Send + Sync + 'static,
    ) -> Server {
        let call_id = Arc::new(Mutex::new(Value::Null));
        Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            if rq.method() == &tiny_http::Method::Get {
                return match header(&rq, "Last-Event-ID") {
                    Some(last) => {
                        assert_eq!(header(&rq, "Mcp-Session-Id").as_deref(), Some("s-r"));
                        assert_eq!(header(&rq, "Accept").as_deref(), Some("text/event-stream"));
                        let id = lock(&call_id).clone();
                        resumed(rq, last, id)
                    }
                    None => reply(rq, 405, "", &[]),
                };
            }
            match msg["method"].as_str() {
                Some("initialize") => {
                    json_reply(rq, init_result(&msg["id"]), &[("Mcp-Session-Id", "s-r")])
                }
                Some("tools/call") => {
                    *lock(&call_id) = msg["id"].clone();
                    let mut s = Stream::open(rq, &[]);
                    s.raw(&format!("id: e-1\nretry: {retry_ms}\ndata: \n\n"));
                    s.finish();
                }
                _ => reply(rq, 202, "", &[]),
            }
        })
    }

    // The response stream of a call closes after its priming event: the client waits the
    // server's retry delay, resumes with GET and Last-Event-ID, and gets the answer there.
    #[test]
    fn a_closed_response_stream_is_resumed_after_the_retry_delay() {
        let (got_tx, got) = unbounded::<(String, Instant)>();
        let server = resuming_server(300, move |rq, last, id| {
            let _ = got_tx.send((last, Instant::now()));
            let mut s = Stream::open(rq, &[]);
            s.raw("id: e-2\n");
            s.event(None, &result(&id, json!({"resumed": true})).to_string());
            // Held open: the client ends it once answered.
            while s.raw(": wait\n\n") {
                thread::sleep(Duration::from_millis(20));
            }
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        p.initialize(WAIT).unwrap();
        let t0 = Instant::now();
        let r = p.request("tools/call", json!({"name": "long"}), WAIT);
        assert_eq!(r, Ok(json!({"resumed": true})));
        let (last, at) = got.recv_timeout(WAIT).unwrap();
        assert_eq!(last, "e-1");
        assert!(at - t0 >= Duration::from_millis(300), "{:?}", at - t0);
        assert!(got.try_recv().is_err(), "one reconnection");
    }

    // Reconnections that bring nothing new are bounded; a server that refuses the GET fails
    // the call at once; the modern era never resumes.
    #[test]
    fn resumption_is_bounded_and_needs_a_server_that_offers_it() {
        let (gets_tx, gets) = unbounded::<String>();
        let server = resuming_server(10, move |rq, last, _| {
            let _ = gets_tx.send(last);
            let mut s = Stream::open(rq, &[]);
            s.raw(": nothing new\n\n");
            s.finish();
        });
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        p.initialize(WAIT).unwrap();
        let r = p.request("tools/call", json!({"name": "long"}), WAIT);
        assert_eq!(
            r,
            Err(Failure::Disconnected(format!(
                "the server closed the response stream without answering; \
                 {UPSTREAM_RESUME_ATTEMPTS} reconnections in a row (GET with Last-Event-ID) \
                 brought nothing new"
            )))
        );
        let all: Vec<String> = gets.try_iter().collect();
        assert_eq!(
            all,
            vec!["e-1".to_owned(); UPSTREAM_RESUME_ATTEMPTS as usize]
        );

        let server = resuming_server(10, |rq, _, _| reply(rq, 405, "", &[]));
        let (p, _) = peer();
        connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
        p.initialize(WAIT).unwrap();
        let r = p.request("tools/call", json!({"name": "long"}), WAIT);
        assert_eq!(
            r,
            Err(Failure::Disconnected(
                "the server closed the response stream without answering, and resuming it \
                 was refused: HTTP 405 Method Not Allowed"
                    .into()
            ))
        );
    }

    // server/discover refused with -32022 naming the modern revision is asked once more (and
    // the modern era chosen); refused again, or naming only legacy revisions, initialize
    // follows.
    #[test]
    fn a_discover_refused_for_its_version_is_retried_with_a_listed_one() {
        use crate::upstream::peer::Era;
        let refuse = |supported: Value| {
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": supported, "requested": "2026-07-28"}}})
            .to_string()
        };
        for (supported, refusals, era) in [
            (json!([MODERN_VERSION]), 1, Era::Modern),
            (json!([MODERN_VERSION]), 2, Era::Legacy),
            (json!(["2025-11-25"]), 1, Era::Legacy),
        ] {
            let (seen_tx, seen) = unbounded();
            let body_text = refuse(supported.clone());
            let count = Arc::new(Mutex::new(0));
            let server = Server::start(move |mut rq| {
                let msg = record(&mut rq, &seen_tx);
                match (rq.method(), msg["method"].as_str()) {
                    (tiny_http::Method::Get, _) => reply(rq, 405, "", &[]),
                    (_, Some("server/discover")) => {
                        let n = {
                            let mut c = lock(&count);
                            *c += 1;
                            *c
                        };
                        if n <= refusals {
                            reply(rq, 400, &body_text, &[("Content-Type", "application/json")])
                        } else {
                            json_reply(
                                rq,
                                result(
                                    &msg["id"],
                                    json!({"supportedVersions": [MODERN_VERSION],
                                        "capabilities": {}, "resultType": "complete"}),
                                ),
                                &[],
                            )
                        }
                    }
                    (_, Some("initialize")) => json_reply(rq, init_result(&msg["id"]), &[]),
                    _ => reply(rq, 202, "", &[]),
                }
            });
            let (p, _) = peer();
            connect(&p, &format!("{}/mcp", server.base), &[], WAIT).unwrap();
            let init = p.handshake(WAIT).unwrap();
            assert_eq!(init.era, era, "{supported} refused {refusals} times");
            let methods: Vec<(String, Option<String>)> = seen
                .try_iter()
                .filter(|s: &Seen| s.0 == "POST")
                .map(|s| (s.1, s.3))
                .take(3)
                .collect();
            let m = |x: &str, v: Option<&str>| (x.to_owned(), v.map(str::to_owned));
            let expected = match (refusals, era) {
                (1, Era::Modern) => vec![
                    m("server/discover", Some(MODERN_VERSION)),
                    m("server/discover", Some(MODERN_VERSION)),
                ],
                (2, _) => vec![
                    m("server/discover", Some(MODERN_VERSION)),
                    m("server/discover", Some(MODERN_VERSION)),
                    m("initialize", None),
                ],
                _ => vec![
                    m("server/discover", Some(MODERN_VERSION)),
                    m("initialize", None),
                    m("notifications/initialized", Some("2025-06-18")),
                ],
            };
            assert_eq!(methods, expected, "{supported} refused {refusals} times");
        }
    }

    // A modern tools/call carries the Mcp-Param-* headers of the tool's annotations, and the
    // configured headers cannot add or override them.
    #[test]
    fn a_modern_call_mirrors_annotated_parameters() {
        use crate::upstream::params::bindings;
        let (seen_tx, seen) = unbounded::<Vec<(String, String)>>();
        let server = Server::start(move |mut rq| {
            let msg: Value = serde_json::from_str(&body(&mut rq)).unwrap_or(Value::Null);
            let params: Vec<(String, String)> = rq
                .headers()
                .iter()
                .filter(|h| {
                    h.field
                        .as_str()
                        .as_str()
                        .to_ascii_lowercase()
                        .starts_with("mcp-param-")
                })
                .map(|h| (h.field.as_str().to_string(), h.value.to_string()))
                .collect();
            let id = msg["id"].clone();
            match msg["method"].as_str() {
                Some("server/discover") => json_reply(
                    rq,
                    result(
                        &id,
                        json!({"supportedVersions": [MODERN_VERSION], "capabilities": {"tools": {}},
                            "resultType": "complete"}),
                    ),
                    &[],
                ),
                _ => {
                    let _ = seen_tx.send(params);
                    json_reply(rq, result(&id, json!({"content": []})), &[])
                }
            }
        });
        let (p, _) = peer();
        let configured = [("mcp-param-region".to_owned(), "forged".to_owned())];
        connect(&p, &format!("{}/mcp", server.base), &configured, WAIT).unwrap();
        p.handshake(WAIT).unwrap();
        assert!(p.mirrors_tool_params());
        let schema = json!({"properties": {"region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"}}});
        p.set_param_bindings(HashMap::from([(
            "t".to_owned(),
            bindings(&schema).unwrap(),
        )]));
        let call = |name: &str, args: Value| {
            p.request("tools/call", json!({"name": name, "arguments": args}), WAIT)
                .unwrap();
            seen.recv_timeout(WAIT).unwrap()
        };
        let h = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            call("t", json!({"region": "Zürich", "n": 42})),
            vec![
                // Header names travel in lower case (they are case-insensitive).
                h("mcp-param-region", "=?base64?WsO8cmljaA==?="),
                h("mcp-param-n", "42")
            ]
        );
        assert_eq!(
            call("t", json!({"region": null})),
            Vec::<(String, String)>::new()
        );
        assert_eq!(
            call("other", json!({"region": "x"})),
            Vec::<(String, String)>::new()
        );
    }

    #[test]
    fn urls_are_checked() {
        let (p, _) = peer();
        assert!(connect(&p, "ftp://h/x", &[], WAIT).is_err());
        assert!(connect(&p, "http://bad host/", &[], WAIT).is_err());
        let https = connect(&p, "https://h/mcp", &[], WAIT);
        assert_eq!(https.is_ok(), cfg!(feature = "tls"), "{https:?}");
    }
}
