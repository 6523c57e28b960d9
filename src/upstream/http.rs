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
#[cfg(test)]
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
                    Failure::rpc(&e)
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
pub(crate) mod tests;
