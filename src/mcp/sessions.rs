//! The session registry: one `Session` per MCP client connection (its negotiated revision,
//! subscriptions, log level, requests in flight, outbox), and the rules HTTP sessions live by.
//! Requests and streams hold their session as an [`Active`] use; an HTTP session with no use for
//! `--mcp-session-idle-s` is closed, lazily at lookups and opens and on the notifier's timer (no
//! thread of its own); at `--mcp-max-sessions` the least recently used idle Streamable HTTP
//! session makes room, under the same lock as the count and the insert.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde_json::{json, Value};

use super::{level_rank, Mcp, Outgoing, MAX_QUEUED_BYTES};
use crate::ids;
use crate::jsonrpc::{self, Message, RequestId};
use crate::limits;

/// Milliseconds since the first call: the clock of session activity.
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A number that grows with every use of any session: it orders sessions by their last use
/// exactly, where the clock has ties.
fn next_use() -> u64 {
    static USES: AtomicU64 = AtomicU64::new(0);
    USES.fetch_add(1, Ordering::Relaxed)
}

#[derive(Default)]
pub(super) struct SessionState {
    pub(super) version: Option<&'static str>,
    pub(super) initialized: bool,
    /// Minimum level of `notifications/message`; none until the client sets one.
    pub(super) log_level: Option<usize>,
    /// The client declared `NOTIFICATIONS_EXTENSION` in `initialize`: it gets the custom
    /// `notifications/breakpoint/*` (a client that did not would log or drop them).
    pub(super) custom_notes: bool,
    pub(super) subscriptions: HashSet<String>,
    pub(super) in_flight: HashMap<RequestId, Sender<()>>,
    /// Set by `cancel_all`: a request that starts afterwards is cancelled at once.
    pub(super) closed: bool,
    /// The client's `clientInfo`, at most `MCP_MAX_CLIENT_INFO_BYTES` of it.
    pub(super) client_info: Value,
    /// The connection speaks the stateless modern revision (stdio: fixed by its first request
    /// that names a revision in `_meta`, or `server/discover`). Legacy once `version` is set.
    pub(super) modern: bool,
    /// The open `subscriptions/listen` streams of a modern connection, by request id.
    pub(super) listens: HashMap<RequestId, super::modern::Filter>,
}

/// What a session keeps of a client's `clientInfo`: all of it when small, else its name and
/// version cut to 256 bytes each (it is the client's to make as large as a request body).
pub(super) fn bounded_client_info(info: Option<&Value>) -> Value {
    let Some(info) = info else {
        return Value::Null;
    };
    if info.to_string().len() <= limits::MCP_MAX_CLIENT_INFO_BYTES {
        return info.clone();
    }
    let field = |k: &str| {
        let text = info.get(k).and_then(Value::as_str).unwrap_or("");
        let mut end = text.len().min(limits::MCP_CLIENT_INFO_FIELD_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Value::from(&text[..end])
    };
    json!({"name": field("name"), "version": field("version")})
}

/// The transport an MCP client reached us on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    /// Legacy HTTP+SSE (2024-11-05).
    Sse,
    /// Streamable HTTP, legacy revisions (a session per `initialize`).
    Http,
    /// Streamable HTTP, the stateless revision 2026-07-28: one registered session per request
    /// (or per `subscriptions/listen` stream) while it runs, never named to the client, never
    /// counted against `--mcp-max-sessions` nor expired as idle.
    Stateless,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Sse => "sse",
            Transport::Http => "http",
            Transport::Stateless => "http-stateless",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One MCP client connection.
pub struct Session {
    pub id: String,
    pub transport: Transport,
    /// Where messages not tied to an HTTP response go: stdout, a legacy SSE stream, or the
    /// Streamable HTTP GET stream while one is open (none: such messages are dropped).
    outbox: Mutex<Option<Sender<Outgoing>>>,
    /// Set when a bounded outbox was full: the client stopped reading and the session goes.
    overflowed: AtomicBool,
    /// Bytes queued and not yet taken by the stream writer, and the limit (0: none, stdio).
    queued: std::sync::atomic::AtomicUsize,
    max_queued: usize,
    /// A second receiver of the outbox, to free what is queued when the session closes while its
    /// writer is blocked in a socket write.
    drain: Mutex<Option<Receiver<Outgoing>>>,
    /// Which attached stream is current (a second GET stream replaces the first).
    stream_gen: std::sync::atomic::AtomicU64,
    /// Requests being handled and streams open ([`Active`] guards): while any, the session is
    /// not idle and cannot expire or be evicted.
    users: AtomicUsize,
    /// When the last user let go (or the session opened), in `now_ms()` milliseconds, and the
    /// `next_use()` number of that moment.
    last_active: AtomicU64,
    last_use: AtomicU64,
    state: Mutex<SessionState>,
    /// Streamable HTTP (legacy era): the messages its streams carried, for a client that
    /// resumes one with `Last-Event-ID`.
    replay: Mutex<super::replay::Replay>,
}

/// A use of a session (a request being handled, or an open stream): the session counts as busy
/// while it lives, and as active at the moment it is dropped.
pub struct Active(Arc<Session>);

impl Active {
    /// Takes a use of `session`. To be race-free against eviction it is taken while the
    /// session registry is locked (eviction checks `users` under that lock).
    fn new(session: Arc<Session>) -> Active {
        session.users.fetch_add(1, Ordering::SeqCst);
        Active(session)
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.0
    }
}

impl std::ops::Deref for Active {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.0
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.last_active.store(now_ms(), Ordering::SeqCst);
        self.0.last_use.store(next_use(), Ordering::SeqCst);
        self.0.users.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Session {
    pub(super) fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a message on the session's outbox; false when there is none, it is gone, or it
    /// is full (then the session is marked for dropping: one stalled client must not hold
    /// memory or block anyone).
    pub fn send(&self, msg: &Message) -> bool {
        let text = msg.to_text();
        log::trace!(
            "> {}:{} {}",
            self.transport,
            self.id,
            jsonrpc::excerpt(&text)
        );
        self.send_text(text)
    }

    /// Queues already-serialised JSON (a batch answer).
    pub fn send_text(&self, text: String) -> bool {
        let len = text.len();
        if self.max_queued > 0 && len > self.max_queued {
            // One message larger than a whole queue is not a sign of a client that stopped
            // reading: only it is not sent (the client's next read of the state has it).
            log::warn!(
                "mcp: a message of {len} bytes for session {} ({}) is larger than a stream's \
                 queue ({} bytes); not sent",
                self.id,
                self.transport,
                self.max_queued
            );
            return false;
        }
        if self.max_queued > 0 && self.queued.load(Ordering::Relaxed) + len > self.max_queued {
            self.overflowed.store(true, Ordering::Relaxed);
            return false;
        }
        let outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = outbox.as_ref() else {
            // Streamable HTTP with no GET stream connected right now: once one was opened, the
            // message is kept for the client's reconnection (`Last-Event-ID`).
            if self.transport == Transport::Http {
                let mut replay = self.replay();
                if replay.has_standalone() {
                    replay.record(super::replay::STANDALONE, &text);
                    return true;
                }
            }
            return false;
        };
        // Streamable HTTP: what goes to the GET stream is kept for a reconnection, numbered in
        // the order it is queued (under the outbox's lock, as `attach_resumable` reads it).
        let keep = (self.transport == Transport::Http).then(|| text.clone());
        match tx.try_send(Outgoing::Message(text)) {
            Ok(()) => {
                self.queued.fetch_add(len, Ordering::Relaxed);
                if let Some(text) = keep {
                    self.replay().record(super::replay::STANDALONE, &text);
                }
                true
            }
            Err(TrySendError::Full(_)) => {
                self.overflowed.store(true, Ordering::Relaxed);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// The kept messages of this session's streams (Streamable HTTP, legacy era).
    pub fn replay(&self) -> MutexGuard<'_, super::replay::Replay> {
        self.replay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Directs out-of-band messages to `tx`, a Streamable HTTP GET stream (as
    /// [`Session::attach`]); from then on they are also kept for a reconnection. Returns the
    /// stream's generation and the id of the last message kept before it: the messages `tx`
    /// gets are the ones numbered after it, in order.
    pub fn attach_resumable(&self, tx: Sender<Outgoing>) -> (u64, super::replay::EventId) {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        *outbox = Some(tx);
        let last = self.replay().open_standalone();
        (self.stream_gen.fetch_add(1, Ordering::Relaxed) + 1, last)
    }

    /// Directs out-of-band messages to `tx` (a stream opened), replacing any earlier one;
    /// returns the stream's generation for [`Session::detach_stream`].
    pub fn attach(&self, tx: Sender<Outgoing>) -> u64 {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        *outbox = Some(tx);
        self.stream_gen.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Detaches the outbox if it still belongs to the stream of generation `gen`.
    pub fn detach_stream(&self, gen: u64) {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        if self.stream_gen.load(Ordering::Relaxed) == gen {
            outbox.take();
        }
    }

    /// Stops sending out-of-band messages (the stream closed) and frees what is still queued.
    pub fn detach(&self) {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(rx) = self.drain.lock().unwrap_or_else(|e| e.into_inner()).take() {
            while rx.try_recv().is_ok() {}
        }
        self.queued.store(0, Ordering::Relaxed);
    }

    /// Keeps `rx` (a clone of the stream's receiver) to drain the outbox on close.
    pub fn keep_drain(&self, rx: Receiver<Outgoing>) {
        *self.drain.lock().unwrap_or_else(|e| e.into_inner()) = Some(rx);
    }

    /// The stream writer took a message of `len` bytes off the outbox.
    pub fn dequeued(&self, len: usize) {
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(len))
            });
    }

    pub fn is_overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Milliseconds since the session was last used, or `None` while it is in use.
    fn idle_ms(&self, now: u64) -> Option<u64> {
        (self.users.load(Ordering::SeqCst) == 0)
            .then(|| now.saturating_sub(self.last_active.load(Ordering::SeqCst)))
    }

    /// The negotiated revision, once `initialize` was answered.
    pub fn version(&self) -> Option<&'static str> {
        self.state().version
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.state().subscriptions.contains(uri)
    }

    /// Whether the connection speaks the modern revision.
    pub fn is_modern(&self) -> bool {
        self.state().modern
    }

    /// Cancels every request in flight and ends the listen streams (the transport closed).
    pub fn cancel_all(&self) {
        let pending: Vec<Sender<()>> = {
            let mut st = self.state();
            st.closed = true;
            st.listens.clear();
            st.in_flight.drain().map(|(_, tx)| tx).collect()
        };
        for tx in pending {
            let _ = tx.try_send(());
        }
    }

    /// Sends `notifications/message` if the client asked for this level.
    pub fn log(&self, level: &str, data: Value) {
        let wanted = self.state().log_level;
        if let (Some(min), Some(rank)) = (wanted, level_rank(level)) {
            if rank >= min {
                self.send(&Message::notification(
                    "notifications/message",
                    json!({"level": level, "logger": "cideldill", "data": data}),
                ));
            }
        }
    }
}

/// Why [`Mcp::open_capped`] could not open a session.
#[derive(Debug, PartialEq, Eq)]
pub struct AtCapacity;

impl Mcp {
    fn sessions_map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a session whose out-of-band messages go to `outbox`, with no cap (stdio).
    pub fn open_session(
        &self,
        transport: Transport,
        outbox: Option<Sender<Outgoing>>,
    ) -> Arc<Session> {
        let session = Self::new_session(transport, outbox);
        {
            let mut sessions = self.sessions_map();
            sessions.insert(session.id.clone(), session.clone());
            self.registry_changed(&sessions);
        }
        log::debug!("mcp: session {} opened on {transport}", session.id);
        session
    }

    /// Opens an HTTP session, in use by the caller, within `--mcp-max-sessions` (counting both
    /// HTTP transports). Idle sessions past `--mcp-session-idle-s` are closed first; at the cap,
    /// the longest-idle Streamable HTTP session (no request in flight, no open stream) is closed
    /// to make room; with none, the cap holds. Count, choice and insert happen under one lock, so
    /// a burst cannot overshoot the cap.
    pub fn open_capped(
        &self,
        transport: Transport,
        outbox: Option<Sender<Outgoing>>,
    ) -> Result<Active, AtCapacity> {
        let cap = self.shared.config.mcp_max_sessions;
        let session = Self::new_session(transport, outbox);
        let mut closed = Vec::new();
        let active = {
            let mut sessions = self.sessions_map();
            let now = now_ms();
            closed.extend(self.take_expired(&mut sessions, now));
            let counted =
                |s: &Arc<Session>| matches!(s.transport, Transport::Sse | Transport::Http);
            if sessions.values().filter(|s| counted(s)).count() >= cap {
                let victim = sessions
                    .values()
                    .filter(|s| s.transport == Transport::Http)
                    .filter_map(|s| {
                        let idle = s.idle_ms(now)?;
                        Some((s.last_use.load(Ordering::SeqCst), idle, s.id.clone()))
                    })
                    .min();
                match victim {
                    Some((_, idle, id)) => {
                        log::info!(
                            "mcp: {cap} HTTP sessions open (--mcp-max-sessions); closing \
                             session {id}, idle for {:.1} s, to make room",
                            idle as f64 / 1e3
                        );
                        closed.extend(sessions.remove(&id));
                    }
                    None => {
                        drop(sessions);
                        self.release(closed);
                        return Err(AtCapacity);
                    }
                }
            }
            sessions.insert(session.id.clone(), session.clone());
            self.registry_changed(&sessions);
            Active::new(session)
        };
        self.release(closed);
        log::debug!("mcp: session {} opened on {transport}", active.id);
        Ok(active)
    }

    /// Registers the session of one stateless (2026-07-28) HTTP request or listen stream, modern
    /// from the start, whose out-of-band messages (a listen stream's) go to `outbox`. The caller
    /// closes it ([`Mcp::close_session`]) when the request or stream ends.
    pub fn open_stateless(&self, outbox: Option<Sender<Outgoing>>) -> Arc<Session> {
        let session = Self::new_session(Transport::Stateless, outbox);
        session.state().modern = true;
        {
            let mut sessions = self.sessions_map();
            sessions.insert(session.id.clone(), session.clone());
            self.registry_changed(&sessions);
        }
        session
    }

    /// The session `id` of `transport`, in use by the caller; `None` if there is none or it
    /// expired (it is then closed). Idle sessions are looked for at most once a second here.
    pub fn use_session(&self, id: &str, transport: Transport) -> Option<Active> {
        let now = now_ms();
        let sweep = now.saturating_sub(self.last_sweep.load(Ordering::Relaxed)) >= 1000;
        let mut closed = Vec::new();
        let found = {
            let mut sessions = self.sessions_map();
            if sweep {
                closed.extend(self.take_expired(&mut sessions, now));
            } else if sessions.get(id).is_some_and(|s| self.is_expired(s, now)) {
                closed.extend(sessions.remove(id));
                self.registry_changed(&sessions);
            }
            sessions
                .get(id)
                .filter(|s| s.transport == transport)
                .cloned()
                .map(Active::new)
        };
        self.release(closed);
        found
    }

    /// Closes the HTTP sessions idle past `--mcp-session-idle-s` (the notifier calls this on
    /// its timer, so idle sessions go even when no client comes back).
    pub fn expire_idle(&self) {
        let closed = {
            let mut sessions = self.sessions_map();
            self.take_expired(&mut sessions, now_ms())
        };
        self.release(closed);
    }

    fn is_expired(&self, s: &Session, now: u64) -> bool {
        let limit = self.shared.config.mcp_session_idle.as_millis() as u64;
        s.transport == Transport::Http && s.idle_ms(now).is_some_and(|idle| idle >= limit)
    }

    /// Removes the expired sessions from the registry (its lock held by the caller); they are
    /// to be [`Mcp::release`]d once it is unlocked.
    fn take_expired(
        &self,
        sessions: &mut HashMap<String, Arc<Session>>,
        now: u64,
    ) -> Vec<Arc<Session>> {
        self.last_sweep.store(now, Ordering::Relaxed);
        let expired: Vec<String> = sessions
            .values()
            .filter(|s| self.is_expired(s, now))
            .map(|s| s.id.clone())
            .collect();
        let out: Vec<Arc<Session>> = expired
            .iter()
            .filter_map(|id| sessions.remove(id))
            .collect();
        if !out.is_empty() {
            self.registry_changed(sessions);
            log::info!(
                "mcp: closed {} HTTP session(s) idle for {} s or more (--mcp-session-idle-s)",
                out.len(),
                self.shared.config.mcp_session_idle.as_secs_f64()
            );
        }
        out
    }

    /// Updates what follows the number of sessions (the registry's lock held). The sessions of
    /// stateless requests are not agents' connections: they are not counted for the web UI.
    fn registry_changed(&self, sessions: &HashMap<String, Arc<Session>>) {
        self.any_session
            .store(!sessions.is_empty(), Ordering::SeqCst);
        let agents = sessions
            .values()
            .filter(|s| s.transport != Transport::Stateless)
            .count();
        self.shared.mcp_sessions.store(agents, Ordering::SeqCst);
    }

    /// Ends sessions already removed from the registry: their requests are cancelled and their
    /// outboxes dropped (a stream ends), so nothing of theirs is left once the last use ends.
    fn release(&self, closed: Vec<Arc<Session>>) {
        for s in closed {
            s.cancel_all();
            s.detach();
            log::debug!("mcp: session {} closed", s.id);
        }
    }

    fn new_session(transport: Transport, outbox: Option<Sender<Outgoing>>) -> Arc<Session> {
        Arc::new(Session {
            id: ids::random_hex(16),
            transport,
            outbox: Mutex::new(outbox),
            overflowed: AtomicBool::new(false),
            queued: std::sync::atomic::AtomicUsize::new(0),
            max_queued: if transport == Transport::Stdio {
                0
            } else {
                MAX_QUEUED_BYTES
            },
            stream_gen: std::sync::atomic::AtomicU64::new(0),
            drain: Mutex::new(None),
            users: AtomicUsize::new(0),
            last_active: AtomicU64::new(now_ms()),
            last_use: AtomicU64::new(next_use()),
            state: Mutex::new(SessionState::default()),
            replay: Mutex::new(super::replay::Replay::default()),
        })
    }

    /// Forgets a session and cancels its requests.
    pub fn close_session(&self, id: &str) {
        let removed = {
            let mut sessions = self.sessions_map();
            let removed = sessions.remove(id);
            self.registry_changed(&sessions);
            removed
        };
        // Dropping the outbox ends the session's stream, if any.
        self.release(removed.into_iter().collect());
    }

    /// How many sessions use `transport`.
    pub fn count_sessions(&self, transport: Transport) -> usize {
        self.sessions_map()
            .values()
            .filter(|s| s.transport == transport)
            .count()
    }

    /// Closes every session (shutdown): streams end when their outboxes are dropped, and the
    /// requests in flight are stopped and answered with a `SHUTTING_DOWN` error.
    pub fn close_all(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let all: Vec<Arc<Session>> = self.sessions_map().drain().map(|(_, s)| s).collect();
        for s in all {
            s.cancel_all();
            s.detach();
        }
    }

    /// Sessions that completed the handshake (MCP: before `notifications/initialized` the
    /// server sends only pings and log messages), and modern ones with a listen stream open.
    pub(super) fn live_sessions(&self) -> Vec<Arc<Session>> {
        self.sessions_map()
            .values()
            .filter(|s| {
                let st = s.state();
                st.initialized || !st.listens.is_empty()
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crossbeam_channel::bounded;

    use super::*;
    use crate::config::Config;
    use crate::state::{Shared, State};
    use crate::store::Store;

    fn capped(cap: usize, idle: Duration) -> Arc<Mcp> {
        let mut config = Config::for_tests("/nonexistent".into());
        config.mcp_max_sessions = cap;
        config.mcp_session_idle = idle;
        Mcp::new(
            Arc::new(Shared::new(config, Store::memory(), State::default())),
            2,
        )
    }

    #[test]
    fn a_message_larger_than_the_queue_is_skipped_and_the_session_stays() {
        let mcp = capped(3, Duration::from_secs(3600));
        let (tx, rx) = crossbeam_channel::unbounded();
        let s = mcp.open_capped(Transport::Http, Some(tx)).unwrap();
        assert!(!s.send_text("x".repeat(MAX_QUEUED_BYTES + 1)));
        assert!(
            !s.is_overflowed(),
            "one large message says nothing of the client"
        );
        assert!(s.send_text("small".into()));
        assert!(matches!(rx.try_recv(), Ok(Outgoing::Message(m)) if m == "small"));
        // A client that stops reading still overflows its queue.
        for _ in 0..=(MAX_QUEUED_BYTES / (1 << 20)) {
            s.send_text("y".repeat(1 << 20));
        }
        assert!(s.is_overflowed());
    }

    #[test]
    fn at_the_cap_the_longest_idle_unused_http_session_makes_room() {
        let mcp = capped(3, Duration::from_secs(3600));
        let a = mcp.open_capped(Transport::Http, None).unwrap();
        let a_id = a.id.clone();
        // `b` keeps a stream open (a use that lasts), `c` is idle, `a` was idle longest.
        let b = mcp.open_capped(Transport::Http, None).unwrap();
        drop(a);
        std::thread::sleep(Duration::from_millis(5));
        let c_id = mcp.open_capped(Transport::Http, None).unwrap().id.clone();
        let d = mcp.open_capped(Transport::Http, None).unwrap();
        assert!(
            mcp.use_session(&a_id, Transport::Http).is_none(),
            "a made room"
        );
        assert!(mcp.use_session(&b.id, Transport::Http).is_some());
        assert_eq!(mcp.count_sessions(Transport::Http), 3);
        // A session in use (a request in flight, a stream) is never evicted.
        let c = mcp.use_session(&c_id, Transport::Http).unwrap();
        assert_eq!(
            mcp.open_capped(Transport::Http, None).err(),
            Some(AtCapacity)
        );
        drop(c);
        let e = mcp.open_capped(Transport::Http, None).unwrap();
        assert!(mcp.use_session(&c_id, Transport::Http).is_none());
        assert_eq!(mcp.count_sessions(Transport::Http), 3);
        // Legacy SSE sessions count against the cap but are never evicted (their stream is open).
        drop((b, d, e));
        let mcp = capped(1, Duration::from_secs(3600));
        let _sse = mcp.open_capped(Transport::Sse, None).unwrap();
        let _sse2 = mcp.open_capped(Transport::Sse, None);
        assert!(_sse2.is_err());
    }

    #[test]
    fn idle_http_sessions_expire_and_release_what_they_hold() {
        let mcp = capped(10, Duration::from_millis(50));
        let (tx, rx) = bounded(4);
        let idle = mcp.open_capped(Transport::Http, None).unwrap();
        idle.attach(tx);
        idle.keep_drain(rx.clone());
        assert!(idle.send(&Message::notification("n", Value::Null)));
        let idle_id = idle.id.clone();
        let idle_session = Arc::clone(idle.session());
        drop(idle);
        let busy = mcp.open_capped(Transport::Http, None).unwrap();
        let stdio = mcp.open_session(Transport::Stdio, None);
        std::thread::sleep(Duration::from_millis(80));
        mcp.expire_idle();
        assert!(mcp.use_session(&idle_id, Transport::Http).is_none());
        assert!(rx.try_recv().is_err(), "its queued messages were freed");
        assert!(!idle_session.send(&Message::notification("n", Value::Null)));
        assert!(idle_session.state().closed, "its requests were cancelled");
        assert!(mcp.use_session(&busy.id, Transport::Http).is_some());
        assert_eq!(
            mcp.count_sessions(Transport::Stdio),
            1,
            "stdio never expires"
        );
        drop(stdio);
        // A lookup finds an expired session gone, even between sweeps.
        let busy_id = busy.id.clone();
        drop(busy);
        std::thread::sleep(Duration::from_millis(80));
        assert!(mcp.use_session(&busy_id, Transport::Http).is_none());
        assert_eq!(mcp.count_sessions(Transport::Http), 0);
    }

    #[test]
    fn a_burst_of_opens_never_passes_the_cap() {
        let mcp = capped(8, Duration::from_secs(3600));
        let held: Vec<Active> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| mcp.open_capped(Transport::Http, None).ok()))
                .collect();
            threads
                .into_iter()
                .filter_map(|t| t.join().unwrap())
                .collect()
        });
        // Every session is still in use: eight opened, eight refused.
        assert_eq!(held.len(), 8);
        assert_eq!(mcp.count_sessions(Transport::Http), 8);
    }
}
