//! `GET /api/events`: the core's events as a server-sent event stream, for the web UI and for
//! scripts. Each event has its sequence number as `id`, its name as `event` and a JSON object
//! `{seq, type, ...}` as `data`. A client that reconnects with `Last-Event-ID` (header, or the
//! `last_event_id` query parameter) gets the events it missed from the bus's replay buffer
//! (`limits::REPLAY_EVENTS`), or a `resync` event when they are no longer kept; a client that
//! stops reading gets `resync` and the stream ends once its queue (`EVENT_STREAM_QUEUE` events)
//! is full, so it never holds memory or anyone else up. A comment every `KEEPALIVE` keeps
//! proxies from closing an idle stream. The stream holds its HTTP worker (the workers grow by
//! themselves); at most `MAX_EVENT_STREAMS` are open at once, more get 503.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use serde_json::{json, Value};

use super::stream::EventStream;
use super::Reply;
use crate::error::ApiError;
use crate::events::{Event, Gap};
use crate::limits::{EVENT_STREAM_QUEUE, MAX_EVENT_STREAMS};
use crate::state::Shared;

/// Idle time before a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How often a quiet stream checks for shutdown.
const TICK: Duration = Duration::from_millis(500);

/// Streams open now (one process serves one port).
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// The `data` of an event.
fn data(e: &Event) -> String {
    let mut v = e.params();
    if let Value::Object(m) = &mut v {
        m.insert("seq".into(), json!(e.seq));
        m.insert("type".into(), json!(e.name()));
    }
    v.to_string()
}

fn write_event(out: &mut EventStream, e: &Event) -> std::io::Result<()> {
    out.event_with_id(&e.seq.to_string(), e.name(), &data(e))
}

/// Serves one stream until the client goes away, falls behind, or the server shuts down.
pub fn serve(
    shared: &Shared,
    rq: tiny_http::Request,
    last_event_id: Option<&str>,
    headers: &[(&str, String)],
) {
    if OPEN.fetch_add(1, Ordering::SeqCst) >= MAX_EVENT_STREAMS {
        OPEN.fetch_sub(1, Ordering::SeqCst);
        let busy = ApiError::new(
            503,
            "too_many_streams",
            format!("at most {MAX_EVENT_STREAMS} event streams are open at once"),
        );
        return super::send(rq, Reply::error(&busy), headers);
    }
    // Subscribed before the replay is read, so nothing falls between the two.
    let sub = shared.bus.subscribe_bounded(EVENT_STREAM_QUEUE);
    let replay = last_event_id.map(|id| {
        id.trim()
            .parse::<u64>()
            .map_err(|_| Gap)
            .and_then(|seq| shared.bus.replay_after(seq).map(|events| (seq, events)))
    });
    let Ok(mut out) = EventStream::open(rq, 200, headers) else {
        OPEN.fetch_sub(1, Ordering::SeqCst);
        return;
    };
    let mut sent = 0u64;
    let mut alive = match replay {
        None => Ok(()),
        Some(Err(Gap)) => out.event(
            Some("resync"),
            r#"{"reason":"the events after Last-Event-ID are no longer kept"}"#,
        ),
        Some(Ok((seq, events))) => {
            sent = seq;
            events.iter().try_for_each(|e| {
                sent = sent.max(e.seq);
                write_event(&mut out, e)
            })
        }
    };
    let mut quiet_since = Instant::now();
    while alive.is_ok() {
        match sub.rx.recv_timeout(TICK) {
            Ok(e) => {
                // Already sent by the replay.
                if e.seq > sent || last_event_id.is_none() {
                    alive = write_event(&mut out, &e);
                }
                quiet_since = Instant::now();
            }
            Err(RecvTimeoutError::Timeout) => {
                if shared.shutting_down.load(Ordering::SeqCst) {
                    break;
                }
                if quiet_since.elapsed() >= KEEPALIVE {
                    alive = out.ping();
                    quiet_since = Instant::now();
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                if sub.lagged.load(Ordering::SeqCst) {
                    let _ = out.event(
                        Some("resync"),
                        r#"{"reason":"this stream fell behind; reload the state"}"#,
                    );
                }
                break;
            }
        }
    }
    out.finish();
    OPEN.fetch_sub(1, Ordering::SeqCst);
}
