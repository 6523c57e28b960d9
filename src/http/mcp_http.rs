//! MCP over HTTP on the server's own port (`--mcp-sse`): Streamable HTTP at `/mcp` (POST with
//! a JSON or SSE reply, GET for the server-to-client stream, DELETE to end a session) and the
//! legacy HTTP+SSE transport at `/mcp/sse` plus `/mcp/messages?session_id=`. Every request is
//! checked for `Origin` (403) and, on a loopback bind, `Host` (421). Streams run on detached
//! threads counted in `Mcp::open_streams`: a writer blocked in a socket cannot be joined, it ends
//! when its peer goes away. Outboxes are bounded; a session whose client stops reading is dropped.
//! Every request and stream holds its session as [`Active`] while it runs, so a session with a
//! request in flight or a stream open is never closed as idle nor evicted at the cap.
//!
//! `/mcp` also serves the stateless revision 2026-07-28, chosen per request: a POST whose
//! `MCP-Protocol-Version` header, or whose body's `params._meta`, names it is handled the modern
//! way (see "Streamable HTTP, stateless" below); anything else takes the legacy path, so legacy
//! sessions and stateless requests share the endpoint.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use base64::Engine;
use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError};

use super::stream::EventStream;
use super::{guard, read_body};
use crate::jsonrpc::{self, Incoming, Message, Response, RpcError};
use crate::limits;
use crate::mcp::replay::{self, EventId, Kept, ResumeError};
use crate::mcp::{modern, version, Active, BatchAnswer, Mcp, Outgoing, Session, Transport};

/// Messages a session may have queued for its stream before it counts as stalled.
pub const OUTBOX_CAPACITY: usize = limits::MCP_OUTBOX_MESSAGES;
/// Silence after which a stream gets a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Longest silence on a stateless request's event stream (a comment line is written then): a
/// closed peer is noticed only when a write fails, and that cancels the request.
const STATELESS_KEEPALIVE: Duration = Duration::from_millis(500);
/// The session header of Streamable HTTP.
const SESSION_HEADER: &str = "Mcp-Session-Id";
/// The reconnection delay a priming event gives the client (`retry`), in milliseconds.
const RETRY_MS: u64 = 1000;

/// Whether a path belongs to the MCP HTTP transports.
pub fn is_mcp_path(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/'),
        "/mcp" | "/mcp/sse" | "/mcp/messages"
    )
}

fn header<'a>(rq: &'a tiny_http::Request, name: &str) -> Option<&'a str> {
    rq.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// The headers of an MCP request that must appear at most once.
const SINGLE_HEADERS: &[&str] = &[
    SESSION_HEADER,
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Origin",
    "Content-Type",
    "Last-Event-ID",
];

/// The first of [`SINGLE_HEADERS`] that the request repeats.
fn repeated_header(rq: &tiny_http::Request) -> Option<&'static str> {
    SINGLE_HEADERS.iter().copied().find(|name| {
        rq.headers()
            .iter()
            .filter(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .count()
            > 1
    })
}

fn respond(
    rq: tiny_http::Request,
    status: u16,
    content_type: &str,
    body: Vec<u8>,
    extra: &[(&str, &str)],
) {
    let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
    for (k, v) in [("Content-Type", content_type), super::NOSNIFF]
        .iter()
        .chain(extra.iter())
    {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    if let Err(e) = rq.respond(resp) {
        log::debug!("mcp http: could not respond: {e}");
    }
}

/// A plain answer outside JSON-RPC (`202 Accepted`); errors in the REST API's JSON shape.
fn text(rq: tiny_http::Request, status: u16, body: &str) {
    if status >= 400 {
        return json_error(rq, status, body, &[]);
    }
    respond(
        rq,
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
        &[],
    );
}

fn json_error(rq: tiny_http::Request, status: u16, message: &str, headers: &[(&str, &str)]) {
    let code = match status {
        400 => "bad_request",
        404 => "session_not_found",
        405 => "method_not_allowed",
        _ => "error",
    };
    let body = crate::error::ApiError::new(status, code, message).to_json();
    respond(
        rq,
        status,
        "application/json",
        body.to_string().into_bytes(),
        headers,
    );
}

/// A JSON-RPC error body with a null id, as Streamable HTTP errors carry.
fn rpc_error(rq: tiny_http::Request, status: u16, code: i64, message: &str) {
    let body = Message::Response(Response::err(None, RpcError::new(code, message))).to_text();
    respond(rq, status, "application/json", body.into_bytes(), &[]);
}

/// Handles one request on an MCP path.
pub fn handle(
    mcp: &Arc<Mcp>,
    policy: &guard::Policy,
    mut rq: tiny_http::Request,
    path: &str,
    query: &[(String, String)],
) {
    let config = &mcp.shared.config;
    // A header that must be single, sent twice: which one counts would depend on who reads it
    // (this server reads the first, a proxy may read the last), so neither does.
    if let Some(name) = repeated_header(&rq) {
        return rpc_error(
            rq,
            400,
            jsonrpc::INVALID_REQUEST,
            &format!("Bad Request: the {name} header is given more than once"),
        );
    }
    // `Host` was checked before (421 on every endpoint of a loopback server).
    if !policy.origin_allowed(header(&rq, "Origin")) {
        // MCP 2025-11-25, Streamable HTTP: an invalid Origin gets 403.
        return rpc_error(
            rq,
            403,
            jsonrpc::INVALID_REQUEST,
            "Forbidden: origin not allowed (see --allow-origin)",
        );
    }
    let method = rq.method().as_str().to_ascii_uppercase();
    let path = path.trim_end_matches('/');
    if path != "/mcp" && !config.mcp_legacy_sse {
        let body = crate::error::ApiError::new(
            404,
            "transport_off",
            "the legacy HTTP+SSE transport is off (start the server with --mcp-sse); \
             Streamable HTTP is at /mcp",
        )
        .to_json();
        return respond(
            rq,
            404,
            "application/json",
            body.to_string().into_bytes(),
            &[],
        );
    }
    match (path, method.as_str()) {
        ("/mcp/sse", "GET") => legacy_open(mcp, rq),
        ("/mcp/messages", "POST") => {
            let body = match read_body(&mut rq, config.max_body_bytes) {
                Ok(b) => b,
                Err(_) => return text(rq, 413, "Payload Too Large"),
            };
            legacy_post(mcp, rq, query, &body)
        }
        ("/mcp", "POST") => {
            let body = match read_body(&mut rq, config.max_body_bytes) {
                Ok(b) => b,
                Err(_) => {
                    return rpc_error(
                        rq,
                        413,
                        jsonrpc::INVALID_REQUEST,
                        "request body too large (see --max-body-mb)",
                    )
                }
            };
            streamable_post(mcp, rq, &body)
        }
        ("/mcp", "GET") => streamable_get(mcp, rq),
        ("/mcp", "DELETE") => streamable_delete(mcp, rq),
        ("/mcp", _) => json_error(
            rq,
            405,
            "method not allowed here (allowed: GET, POST, DELETE)",
            &[("Allow", "GET, POST, DELETE")],
        ),
        ("/mcp/sse", _) => json_error(
            rq,
            405,
            "method not allowed here (allowed: GET)",
            &[("Allow", "GET")],
        ),
        (_, _) => json_error(
            rq,
            405,
            "method not allowed here (allowed: POST)",
            &[("Allow", "POST")],
        ),
    }
}

/// Writes a session's outbox to an event stream until the session ends or the peer leaves. The
/// stream keeps the session in use (`active`) while it is open: it does not idle meanwhile.
/// A Streamable HTTP GET stream is resumable (`resume`): its events carry ids.
fn spawn_stream(
    mcp: &Arc<Mcp>,
    rq: tiny_http::Request,
    active: Active,
    rx: Receiver<Outgoing>,
    endpoint: Option<String>,
    gen: u64,
    resume: Option<GetStream>,
) {
    // The stream's head says `Connection: close`; said here, before the thread that reads the
    // connection looks for its next request.
    rq.close_connection();
    let mcp2 = mcp.clone();
    mcp.open_streams.fetch_add(1, Ordering::SeqCst);
    let (id, transport) = (active.id.clone(), active.transport);
    let name = format!("mcp-stream:{}", &id[..8.min(id.len())]);
    let spawned = thread::Builder::new().name(name).spawn(move || {
        run_stream(rq, &active, &rx, endpoint.as_deref(), resume);
        if active.transport == Transport::Sse {
            // Legacy SSE: closing the stream ends the session.
            mcp2.close_session(&active.id);
        } else {
            // What was still queued is kept (`Session::send_text`) for a reconnection.
            active.detach_stream(gen);
        }
        // The session idles from now on.
        drop(active);
        mcp2.open_streams.fetch_sub(1, Ordering::SeqCst);
    });
    if let Err(e) = spawned {
        log::error!("mcp http: cannot start a stream thread: {e}");
        mcp.open_streams.fetch_sub(1, Ordering::SeqCst);
        if transport == Transport::Sse {
            // A legacy session lives only as long as its stream.
            mcp.close_session(&id);
        }
    }
}

/// Whether a session's event streams start with a priming event (an id, `retry`, empty data):
/// from 2025-11-25 on. Clients of earlier revisions may take its empty data for a malformed
/// message, so their streams carry event ids only.
fn primes(session: &Session) -> bool {
    session.version().is_some_and(|v| v >= "2025-11-25")
}

/// How a Streamable HTTP GET stream starts: the id of its priming event, the messages it
/// replays (a reconnection's), and the number of the first message its outbox brings.
struct GetStream {
    prime: EventId,
    missed: Vec<Kept>,
    live_from: u64,
}

fn run_stream(
    rq: tiny_http::Request,
    session: &Session,
    rx: &Receiver<Outgoing>,
    endpoint: Option<&str>,
    resume: Option<GetStream>,
) {
    let mut headers = Vec::new();
    if session.transport == Transport::Http {
        headers.push((SESSION_HEADER, session.id.clone()));
    }
    let Ok(mut stream) = EventStream::open(rq, 200, &headers) else {
        return;
    };
    if let Some(uri) = endpoint {
        if stream.event(Some("endpoint"), uri).is_err() {
            return;
        }
    }
    let mut next_seq = None;
    if let Some(start) = resume {
        let mut sent = Ok(());
        if primes(session) {
            sent = stream.prime(&start.prime.to_string(), RETRY_MS);
        }
        for (seq, text) in &start.missed {
            if sent.is_err() {
                break;
            }
            sent = stream.event_with_id(&standalone_id(*seq), "message", text);
        }
        if sent.is_err() {
            return;
        }
        next_seq = Some(start.live_from);
    }
    log::debug!("mcp http: stream of session {} open", session.id);
    loop {
        let sent = match rx.recv_timeout(KEEPALIVE) {
            Ok(Outgoing::Message(text)) => {
                session.dequeued(text.len());
                match next_seq.as_mut() {
                    // Kept and numbered when it was queued, in this order.
                    Some(seq) => {
                        *seq += 1;
                        stream.event_with_id(&standalone_id(*seq - 1), "message", &text)
                    }
                    None => stream.event(Some("message"), &text),
                }
            }
            Ok(Outgoing::Close) | Err(RecvTimeoutError::Disconnected) => break,
            // Keep-alives also find out that a silent peer went away.
            Err(RecvTimeoutError::Timeout) => stream.ping(),
        };
        if sent.is_err() {
            log::debug!(
                "mcp http: stream of session {} closed by the peer",
                session.id
            );
            return;
        }
    }
    stream.finish();
}

fn standalone_id(seq: u64) -> String {
    EventId {
        stream: replay::STANDALONE,
        seq,
    }
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// Legacy HTTP+SSE (MCP 2024-11-05).

fn legacy_open(mcp: &Arc<Mcp>, rq: tiny_http::Request) {
    let (tx, rx) = bounded(OUTBOX_CAPACITY);
    let Ok(session) = mcp.open_capped(Transport::Sse, Some(tx)) else {
        return text(
            rq,
            503,
            "Service Unavailable: too many MCP sessions, all in use (see --mcp-max-sessions)",
        );
    };
    session.keep_drain(rx.clone());
    // Compat: the original's endpoint, relative to the stream's URL.
    let endpoint = format!("/mcp/messages?session_id={}", session.id);
    spawn_stream(mcp, rq, session, rx, Some(endpoint), 0, None);
}

fn legacy_post(mcp: &Arc<Mcp>, rq: tiny_http::Request, query: &[(String, String)], body: &[u8]) {
    let Some(id) = query
        .iter()
        .find(|(k, _)| k == "session_id")
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
    else {
        return text(rq, 400, "session_id is required");
    };
    let Some(session) = mcp.use_session(id, Transport::Sse) else {
        return text(rq, 404, "Could not find session");
    };
    let incoming = jsonrpc::parse(&String::from_utf8_lossy(body));
    if matches!(&incoming, Incoming::Invalid(r) if r.outcome.as_ref().is_err_and(|e| e.code == jsonrpc::PARSE_ERROR))
    {
        return text(rq, 400, "Could not parse message");
    }
    // Notifications are handled before the 202, so a client's next POST cannot overtake them
    // (e.g. `notifications/initialized`); requests answer on the stream after it.
    match incoming {
        Incoming::Single(Message::Notification(n)) => {
            mcp.handle_notification(&session, &n);
            text(rq, 202, "Accepted");
        }
        Incoming::Single(Message::Response(_)) => text(rq, 202, "Accepted"),
        Incoming::Single(Message::Request(req)) => {
            text(rq, 202, "Accepted");
            if let Some(resp) = mcp.handle_request(&session, req) {
                session.send(&Message::Response(resp));
            }
        }
        Incoming::Batch(items) => {
            text(rq, 202, "Accepted");
            if let Some(answer) = mcp.handle_batch(&session, items) {
                session.send_text(answer.into_text());
            }
        }
        Incoming::Invalid(resp) => {
            text(rq, 202, "Accepted");
            session.send(&Message::Response(resp));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP (MCP 2025-03-26 and later).

fn accepts(rq: &tiny_http::Request, kind: &str) -> bool {
    header(rq, "Accept").is_some_and(|a| {
        a.split(',').any(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            t.eq_ignore_ascii_case(kind) || t == "*/*"
        })
    })
}

/// The session named by the `Mcp-Session-Id` header, in use until the result is dropped, or the
/// error response already sent.
fn streamable_session(
    mcp: &Mcp,
    rq: tiny_http::Request,
) -> Result<(Active, tiny_http::Request), ()> {
    let Some(id) = header(&rq, SESSION_HEADER).map(str::to_owned) else {
        rpc_error(
            rq,
            400,
            jsonrpc::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        );
        return Err(());
    };
    match mcp.use_session(&id, Transport::Http) {
        Some(s) => Ok((s, rq)),
        None => {
            // MCP 2025-03-26, Streamable HTTP: an unknown, ended or expired session is 404.
            rpc_error(
                rq,
                404,
                jsonrpc::INVALID_REQUEST,
                "Not Found: no such session; initialize again",
            );
            Err(())
        }
    }
}

fn streamable_post(mcp: &Arc<Mcp>, rq: tiny_http::Request, body: &[u8]) {
    if !header(&rq, "Content-Type")
        .is_some_and(|c| c.to_ascii_lowercase().starts_with("application/json"))
    {
        return rpc_error(
            rq,
            415,
            jsonrpc::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    if !(accepts(&rq, "application/json") || accepts(&rq, "text/event-stream")) {
        return rpc_error(
            rq,
            406,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: Accept must include application/json and text/event-stream",
        );
    }
    let incoming = jsonrpc::parse(&String::from_utf8_lossy(body));
    if is_stateless(&rq, &incoming) {
        return stateless_post(mcp, rq, incoming);
    }
    if let Some(v) = header(&rq, "MCP-Protocol-Version").map(|v| v.trim().to_owned()) {
        if !version::is_supported(&v) {
            // A revision of neither era: -32022 with what we speak, as the stateless revision
            // answers it, so that a client of both eras retries with one of ours rather than
            // taking this server for a legacy one.
            let id = match &incoming {
                Incoming::Single(Message::Request(req)) => Some(req.id.clone()),
                _ => None,
            };
            let mut err = modern::unsupported_version(&serde_json::json!(v));
            err.message = format!("Bad Request: unsupported MCP-Protocol-Version {v}");
            let body = Message::Response(Response::err(id, err)).to_text();
            return respond(rq, 400, "application/json", body.into_bytes(), &[]);
        }
    }
    if let Incoming::Single(Message::Request(req)) = &incoming {
        if req.method == "initialize" {
            let Ok(session) = mcp.open_capped(Transport::Http, None) else {
                return rpc_error(
                    rq,
                    503,
                    jsonrpc::INTERNAL_ERROR,
                    "Service Unavailable: too many MCP sessions, each with a request in flight \
                     or a stream open (see --mcp-max-sessions)",
                );
            };
            let Some(resp) = mcp.handle_request(&session, req.clone()) else {
                return respond(rq, 202, "text/plain", Vec::new(), &[]);
            };
            if resp.outcome.is_err() {
                mcp.close_session(&session.id);
            }
            let body = Message::Response(resp).to_text().into_bytes();
            return respond(
                rq,
                200,
                "application/json",
                body,
                &[(SESSION_HEADER, &session.id)],
            );
        }
    }
    if let Incoming::Invalid(resp) = incoming {
        let body = Message::Response(resp).to_text().into_bytes();
        return respond(rq, 400, "application/json", body, &[]);
    }
    let Ok((session, rq)) = streamable_session(mcp, rq) else {
        return;
    };
    match incoming {
        Incoming::Single(Message::Request(req)) => {
            let has_progress = req.progress_token().is_some();
            // JSON unless the client only takes an event stream, or wants progress on one.
            let sse = accepts(&rq, "text/event-stream")
                && (has_progress || !accepts(&rq, "application/json"));
            if sse {
                sse_reply(mcp, rq, session.session(), req);
            } else {
                match mcp.handle_request(&session, req) {
                    Some(resp) => respond(
                        rq,
                        200,
                        "application/json",
                        Message::Response(resp).to_text().into_bytes(),
                        &[],
                    ),
                    // Cancelled: nothing to say.
                    None => respond(rq, 202, "text/plain", Vec::new(), &[]),
                }
            }
        }
        Incoming::Single(Message::Notification(n)) => {
            mcp.handle_notification(&session, &n);
            respond(rq, 202, "text/plain", Vec::new(), &[]);
        }
        Incoming::Single(Message::Response(_)) => respond(rq, 202, "text/plain", Vec::new(), &[]),
        Incoming::Batch(items) => match mcp.handle_batch(&session, items) {
            Some(BatchAnswer::Answers(text)) => {
                respond(rq, 200, "application/json", text.into_bytes(), &[])
            }
            Some(BatchAnswer::Refused(text)) => {
                respond(rq, 400, "application/json", text.into_bytes(), &[])
            }
            None => respond(rq, 202, "text/plain", Vec::new(), &[]),
        },
        Incoming::Invalid(_) => {}
    }
}

/// Opens a request's event stream and starts the request on the MCP pool; its messages
/// (progress notifications, then the response) arrive on the receiver, whose sender is dropped
/// when the request ends. When no thread can be started, the error is the stream's one answer.
fn start_streamed(
    mcp: &Arc<Mcp>,
    rq: tiny_http::Request,
    session: &Arc<Session>,
    req: jsonrpc::Request,
) -> Option<(EventStream, Receiver<Outgoing>)> {
    let mut stream = EventStream::open(rq, 200, &[]).ok()?;
    let (tx, rx) = unbounded::<Outgoing>();
    let (mcp2, session2) = (Arc::clone(mcp), Arc::clone(session));
    let id = req.id.clone();
    let ran = mcp.pool.run(move || {
        if let Some(resp) = mcp2.handle_request_via(&session2, req, Some(&tx)) {
            let _ = tx.send(Outgoing::Message(Message::Response(resp).to_text()));
        }
    });
    if let Err(e) = ran {
        log::error!("mcp http: cannot start a request thread: {e}");
        let err = RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            format!("the server cannot start a thread for this request: {e}"),
        );
        let _ = stream.event(
            Some("message"),
            &Message::Response(Response::err(Some(id), err)).to_text(),
        );
        stream.finish();
        return None;
    }
    Some((stream, rx))
}

/// Answers a request on its own event stream: progress notifications, then the response. The
/// stream is resumable: a priming event first (from 2025-11-25), each message with an id, all of
/// them kept (`Session::replay`), so that a client that loses the stream gets the rest with
/// `GET` and `Last-Event-ID`.
fn sse_reply(
    mcp: &Arc<Mcp>,
    rq: tiny_http::Request,
    session: &Arc<Session>,
    req: jsonrpc::Request,
) {
    let stream_id = session.replay().new_stream();
    let primed = primes(session);
    let Some((mut stream, rx)) = start_streamed(mcp, rq, session, req) else {
        session.replay().close(stream_id);
        return;
    };
    let mut peer_gone = primed
        && stream
            .prime(
                &EventId {
                    stream: stream_id,
                    seq: 0,
                }
                .to_string(),
                RETRY_MS,
            )
            .is_err();
    // The job's sender is dropped when it ends, which ends this loop.
    while let Ok(Outgoing::Message(text)) = rx.recv() {
        let id = session.replay().record(stream_id, &text);
        // Disconnecting is not a cancellation (MCP 2025-03-26): keep draining, and keeping.
        if !peer_gone
            && stream
                .event_with_id(&id.to_string(), "message", &text)
                .is_err()
        {
            peer_gone = true;
        }
    }
    session.replay().close(stream_id);
    stream.finish();
}

/// A `GET` with `Last-Event-ID` (legacy era): the messages of that event's stream that came
/// after it. For the session's GET stream, the stream then goes on as a new GET stream; for a
/// POST's stream, the request's later messages follow until it ends, then the stream ends.
fn streamable_resume(mcp: &Arc<Mcp>, rq: tiny_http::Request, last: &str) {
    let Some(after) = EventId::parse(last) else {
        return rpc_error(
            rq,
            400,
            jsonrpc::INVALID_REQUEST,
            &format!("Bad Request: Last-Event-ID {last:?} is not an event id of this server"),
        );
    };
    let Ok((session, rq)) = streamable_session(mcp, rq) else {
        return;
    };
    let refuse = |rq, e: ResumeError| match e {
        ResumeError::Unknown => rpc_error(
            rq,
            400,
            jsonrpc::INVALID_REQUEST,
            &format!("Bad Request: no event {after} was sent in this session"),
        ),
        ResumeError::Forgotten => rpc_error(
            rq,
            410,
            jsonrpc::INVALID_REQUEST,
            &format!(
                "Gone: the messages after event {after} are no longer kept (a stream keeps its \
                 last {} messages, a session its last {} streams and {} bytes); they are lost",
                limits::MCP_REPLAY_EVENTS,
                limits::MCP_REPLAY_STREAMS,
                limits::MCP_REPLAY_BYTES
            ),
        ),
    };
    if after.stream == replay::STANDALONE && !session.replay().has_standalone() {
        return refuse(rq, ResumeError::Unknown);
    }
    if after.stream == replay::STANDALONE {
        // Attached first, then the replay read: a message is numbered when it is queued, so
        // those up to `last` are replayed and those after it come through the outbox.
        let (tx, rx) = bounded(OUTBOX_CAPACITY);
        let (gen, last) = session.attach_resumable(tx);
        let resumed = session.replay().resume(after);
        match resumed {
            Ok(mut r) => {
                // Those after `last` come through the outbox.
                r.missed.retain(|(seq, _)| *seq <= last.seq);
                session.keep_drain(rx.clone());
                let start = GetStream {
                    prime: after,
                    missed: r.missed,
                    live_from: last.seq + 1,
                };
                spawn_stream(mcp, rq, session, rx, None, gen, Some(start));
            }
            Err(e) => {
                session.detach_stream(gen);
                refuse(rq, e);
            }
        }
        return;
    }
    let resumed = session.replay().resume(after);
    let r = match resumed {
        Ok(r) => r,
        Err(e) => return refuse(rq, e),
    };
    let Ok(mut stream) = EventStream::open(rq, 200, &[(SESSION_HEADER, session.id.clone())]) else {
        return;
    };
    log::debug!(
        "mcp http: session {} resumes stream {} after event {after}",
        session.id,
        after.stream
    );
    let id = |seq| EventId {
        stream: after.stream,
        seq,
    };
    let mut sent = if primes(&session) {
        stream.prime(&after.to_string(), RETRY_MS)
    } else {
        Ok(())
    };
    for (seq, text) in &r.missed {
        if sent.is_err() {
            return;
        }
        sent = stream.event_with_id(&id(*seq).to_string(), "message", text);
    }
    if let Some(follow) = r.follow {
        loop {
            sent = match follow.recv_timeout(KEEPALIVE) {
                Ok((seq, text)) => stream.event_with_id(&id(seq).to_string(), "message", &text),
                Err(RecvTimeoutError::Timeout) => stream.ping(),
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if sent.is_err() {
                return;
            }
        }
    }
    if sent.is_ok() {
        stream.finish();
    }
}

fn streamable_get(mcp: &Arc<Mcp>, rq: tiny_http::Request) {
    if names_stateless_version(&rq) {
        return stateless_not_allowed(rq);
    }
    if !accepts(&rq, "text/event-stream") {
        return rpc_error(
            rq,
            406,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: GET needs Accept: text/event-stream",
        );
    }
    // MCP 2025-03-26 and later, "Resumability and Redelivery" (the modern revision has none:
    // its GET was refused above).
    if let Some(last) = header(&rq, "Last-Event-ID").map(str::to_owned) {
        return streamable_resume(mcp, rq, &last);
    }
    let Ok((session, rq)) = streamable_session(mcp, rq) else {
        return;
    };
    let (tx, rx) = bounded(OUTBOX_CAPACITY);
    let (gen, last) = session.attach_resumable(tx);
    session.keep_drain(rx.clone());
    let start = GetStream {
        prime: last,
        missed: Vec::new(),
        live_from: last.seq + 1,
    };
    spawn_stream(mcp, rq, session, rx, None, gen, Some(start));
}

fn streamable_delete(mcp: &Arc<Mcp>, rq: tiny_http::Request) {
    if names_stateless_version(&rq) {
        return stateless_not_allowed(rq);
    }
    let Ok((session, rq)) = streamable_session(mcp, rq) else {
        return;
    };
    mcp.close_session(&session.id);
    respond(rq, 200, "application/json", b"{}".to_vec(), &[]);
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP, stateless (MCP 2026-07-28): POST only, no session; every request carries the
// headers `MCP-Protocol-Version`, `Mcp-Method` and, for `tools/call`, `resources/read` and
// `prompts/get`, `Mcp-Name`, which must agree with its body. It runs on a session of its own
// (`Transport::Stateless`, modern from the start) that is registered while it runs, so the
// shutdown stops it, and is closed after. Closing its response stream cancels it.

/// Whether the request's `MCP-Protocol-Version` header names a modern revision.
fn names_stateless_version(rq: &tiny_http::Request) -> bool {
    header(rq, "MCP-Protocol-Version").is_some_and(|v| version::is_modern(v.trim()))
}

/// Whether a POST to `/mcp` takes the stateless path: its header names a modern revision, or
/// its body's `_meta` names a revision that is not a legacy one we speak (a modern one, or one
/// we do not know: answered -32022 there, with the request's id).
fn is_stateless(rq: &tiny_http::Request, incoming: &Incoming) -> bool {
    names_stateless_version(rq)
        || matches!(incoming, Incoming::Single(Message::Request(req))
            if modern::named_version(req).is_some_and(|v| !version::is_supported(v)))
}

/// A modern GET or DELETE: there are no sessions nor server streams in this revision.
fn stateless_not_allowed(rq: tiny_http::Request) {
    let body = Message::Response(Response::err(
        None,
        RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "Method Not Allowed: the stateless revision 2026-07-28 takes POST only",
        ),
    ))
    .to_text();
    respond(
        rq,
        405,
        "application/json",
        body.into_bytes(),
        &[("Allow", "POST")],
    );
}

/// A header value, decoded from `=?base64?…?=` when it comes in that form (`None` when that
/// form does not decode to UTF-8).
fn header_text(value: &str) -> Option<String> {
    let value = value.trim();
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(value.to_owned()),
    }
}

fn mismatch(message: String) -> RpcError {
    RpcError::new(modern::HEADER_MISMATCH, message)
}

/// The headers a stateless request must carry, checked against its body.
fn check_stateless_headers(
    rq: &tiny_http::Request,
    req: &jsonrpc::Request,
) -> Result<(), RpcError> {
    let named = modern::named_version(req);
    let Some(v) = header(rq, "MCP-Protocol-Version").map(str::trim) else {
        return Err(mismatch(
            "the MCP-Protocol-Version header is required (2026-07-28)".into(),
        ));
    };
    if !version::is_modern(v) && !version::is_supported(v) {
        return Err(modern::unsupported_version(&serde_json::json!(v)));
    }
    if named.is_some_and(|n| n != v) || !version::is_modern(v) {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header ({v}) differs from the request's \
             params._meta revision ({})",
            named.unwrap_or("none")
        )));
    }
    match header(rq, "Mcp-Method").map(header_text) {
        None => return Err(mismatch("the Mcp-Method header is required".into())),
        Some(m) if m.as_deref() != Some(req.method.as_str()) => {
            return Err(mismatch(format!(
                "the Mcp-Method header ({}) differs from the body's method ({})",
                m.unwrap_or_else(|| "undecodable".into()),
                req.method
            )))
        }
        Some(_) => {}
    }
    let key = match req.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Ok(()),
    };
    let expected = req.params.get(key).and_then(serde_json::Value::as_str);
    let given = header(rq, "Mcp-Name").map(header_text);
    match (given, expected) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(mismatch(format!(
            "the Mcp-Name header is required for {} (the {key})",
            req.method
        ))),
        (Some(g), e) if g.as_deref() == e => Ok(()),
        (Some(g), e) => Err(mismatch(format!(
            "the Mcp-Name header ({}) differs from the body's {key} ({})",
            g.unwrap_or_else(|| "undecodable".into()),
            e.unwrap_or("none")
        ))),
    }
}

/// The HTTP status of a stateless answer: 400 for a header or revision error, 404 for a method
/// we do not have (its JSON-RPC body tells a modern server from a missing endpoint), else 200.
fn stateless_status(resp: &Response) -> u16 {
    match &resp.outcome {
        Err(e) if e.code == jsonrpc::METHOD_NOT_FOUND => 404,
        Err(e)
            if e.code == modern::HEADER_MISMATCH
                || e.code == modern::UNSUPPORTED_PROTOCOL_VERSION =>
        {
            400
        }
        _ => 200,
    }
}

fn stateless_answer(rq: tiny_http::Request, resp: Response) {
    let status = stateless_status(&resp);
    let body = Message::Response(resp).to_text().into_bytes();
    respond(rq, status, "application/json", body, &[]);
}

/// The session of one stateless request, closed when dropped.
struct Stateless<'a> {
    mcp: &'a Mcp,
    session: Arc<Session>,
}

impl Drop for Stateless<'_> {
    fn drop(&mut self) {
        self.mcp.close_session(&self.session.id);
    }
}

fn stateless_post(mcp: &Arc<Mcp>, rq: tiny_http::Request, incoming: Incoming) {
    let req = match incoming {
        Incoming::Single(Message::Request(req)) => req,
        // Nothing to do with a notification or response here: cancelling is closing the
        // request's response stream.
        Incoming::Single(_) => return respond(rq, 202, "text/plain", Vec::new(), &[]),
        Incoming::Batch(_) => {
            return rpc_error(
                rq,
                400,
                jsonrpc::INVALID_REQUEST,
                "Bad Request: the stateless revision 2026-07-28 takes one message per POST",
            )
        }
        Incoming::Invalid(resp) => {
            let body = Message::Response(resp).to_text().into_bytes();
            return respond(rq, 400, "application/json", body, &[]);
        }
    };
    if let Err(e) = check_stateless_headers(&rq, &req) {
        return stateless_answer(rq, Response::err(Some(req.id), e));
    }
    if let Err(e) = modern::check_request(&req) {
        // A request without its envelope is malformed: 400 (a revision we do not speak, named
        // in both the header and the body, was refused above).
        let body = Message::Response(Response::err(Some(req.id), e)).to_text();
        return respond(rq, 400, "application/json", body.into_bytes(), &[]);
    }
    if req.method == "subscriptions/listen" {
        return listen_stream(mcp, rq, req);
    }
    let guard = Stateless {
        mcp,
        session: mcp.open_stateless(None),
    };
    let has_progress = req.progress_token().is_some();
    let sse = accepts(&rq, "text/event-stream")
        && (Mcp::may_block(&req) || has_progress || !accepts(&rq, "application/json"));
    if sse {
        stateless_sse_reply(mcp, rq, &guard.session, req);
    } else {
        match mcp.handle_request(&guard.session, req) {
            Some(resp) => stateless_answer(rq, resp),
            None => respond(rq, 202, "text/plain", Vec::new(), &[]),
        }
    }
}

/// Answers a stateless request on its own event stream: progress, then the response, with a
/// comment at least every `STATELESS_KEEPALIVE` meanwhile. The first write that fails (the
/// client closed the stream) cancels the request.
fn stateless_sse_reply(
    mcp: &Arc<Mcp>,
    rq: tiny_http::Request,
    session: &Arc<Session>,
    req: jsonrpc::Request,
) {
    let (id, method) = (req.id.clone(), req.method.clone());
    let Some((mut stream, rx)) = start_streamed(mcp, rq, session, req) else {
        return;
    };
    let mut peer_gone = false;
    loop {
        // The job's sender is dropped when it ends, which ends this loop.
        let sent = match rx.recv_timeout(STATELESS_KEEPALIVE) {
            Ok(Outgoing::Message(_)) if peer_gone => continue,
            Ok(Outgoing::Message(text)) => stream.event(Some("message"), &text),
            Ok(Outgoing::Close) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) if peer_gone => continue,
            Err(RecvTimeoutError::Timeout) => stream.ping(),
        };
        if sent.is_err() && !peer_gone {
            // MCP 2026-07-28: closing the response stream cancels the request.
            peer_gone = true;
            log::info!(
                "mcp http: stateless request {id} ({method}) cancelled: its client closed the \
                 response stream"
            );
            session.cancel_all();
        }
    }
    if !peer_gone {
        stream.finish();
    }
}

/// A `subscriptions/listen` POST: its response stream stays open, carrying the acknowledgement,
/// then what its filter matches (the notifier writes to the stream's session), with comments
/// meanwhile, until the client closes it or the server stops. At most `MCP_HTTP_MAX_LISTENS`
/// are open at once.
fn listen_stream(mcp: &Arc<Mcp>, rq: tiny_http::Request, req: jsonrpc::Request) {
    let max = limits::MCP_HTTP_MAX_LISTENS;
    if mcp.http_listens.fetch_add(1, Ordering::SeqCst) >= max {
        mcp.http_listens.fetch_sub(1, Ordering::SeqCst);
        let err = RpcError::new(
            jsonrpc::LIMIT_EXCEEDED,
            format!("the server holds at most {max} listen streams on HTTP; close one first"),
        );
        return stateless_answer(rq, Response::err(Some(req.id), err));
    }
    let (tx, rx) = bounded(OUTBOX_CAPACITY);
    let guard = Stateless {
        mcp,
        session: mcp.open_stateless(Some(tx)),
    };
    guard.session.keep_drain(rx.clone());
    let id = req.id.clone();
    if let Some(resp) = mcp.handle_request_now(&guard.session, req) {
        mcp.http_listens.fetch_sub(1, Ordering::SeqCst);
        return stateless_answer(rq, resp);
    }
    mcp.open_streams.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut stream) = EventStream::open(rq, 200, &[]) {
        log::debug!("mcp http: listen stream {id} open");
        loop {
            let sent = match rx.recv_timeout(STATELESS_KEEPALIVE) {
                Ok(Outgoing::Message(text)) => {
                    guard.session.dequeued(text.len());
                    stream.event(Some("message"), &text)
                }
                // The session closed (the server stops, or the client stopped reading).
                Ok(Outgoing::Close) | Err(RecvTimeoutError::Disconnected) => {
                    stream.finish();
                    break;
                }
                Err(RecvTimeoutError::Timeout) => stream.ping(),
            };
            if sent.is_err() {
                log::debug!("mcp http: listen stream {id} closed by its client");
                break;
            }
        }
    }
    drop(guard);
    mcp.http_listens.fetch_sub(1, Ordering::SeqCst);
    mcp.open_streams.fetch_sub(1, Ordering::SeqCst);
}
