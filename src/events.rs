//! State-transition events and their subscribers. Events are collected while the state lock is
//! held and published by `StateGuard` after it is released, so a slow subscriber never holds
//! up the state; each carries a sequence number taken under the lock, which orders them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TrySendError};
use serde_json::{json, Value};

use crate::limits::REPLAY_EVENTS;

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// A call paused, before running or after completing.
    ExecutionPaused {
        pause_id: String,
        method_name: String,
        pause_reason: String,
        paused_at: f64,
    },
    /// A pause was resumed with an action.
    ExecutionResumed {
        pause_id: String,
        method_name: String,
        action: String,
    },
    /// A call record was added (completed calls and client events alike, as in the original).
    CallCompleted {
        call_id: String,
        method_name: String,
        status: String,
        /// The process that made the call (none for the server's own calls to external MCP
        /// servers): a page showing one process ignores the others' calls.
        process_key: Option<String>,
    },
    /// Breakpoints, their behaviours, replacements or the global default changed.
    BreakpointsChanged,
    /// A function was registered or its metadata changed.
    FunctionsChanged,
    /// A REPL session was started or closed on request (resuming a pause closes its sessions
    /// too, told by `ExecutionResumed`).
    ReplSession {
        session_id: String,
        pause_id: String,
        state: &'static str,
    },
    /// The paused program answered a REPL eval; the session's transcript has it.
    ReplOutput {
        session_id: String,
        eval_id: String,
        is_error: bool,
    },
    /// An external MCP server's status changed (connecting, connected, disconnected, error,
    /// failed).
    ExternalServer { name: String, status: &'static str },
    /// A browser origin asked to report calls, or was allowed or denied (the web UI's pending
    /// requests).
    OriginsChanged,
    /// A run (what one process recorded) was deleted with its records.
    RunDeleted { run_id: String },
    /// A run's label or notes changed.
    RunChanged { run_id: String },
    /// A logpoint wrote a line (`notifications/breakpoint/log` for agents).
    Log {
        seq: u64,
        function_name: String,
        call_id: String,
        message: String,
        logged_at: f64,
    },
}

impl EventKind {
    /// A notice says only that something must be read again (`origins_changed`, which refused
    /// pages cause): the newest one tells as much as all of them, so the replay keeps only it,
    /// apart from the session's events.
    pub fn is_notice(&self) -> bool {
        matches!(self, EventKind::OriginsChanged)
    }
}

/// One event with its sequence number. Its kind is shared: an event is copied to every
/// subscriber's queue and into the replay buffer, and every copy shares one allocation of what
/// it says (the texts a client chose are bounded: names and ids by
/// `limits::MAX_FUNCTION_NAME_BYTES`, a logpoint's line by `limits::LOG_LINE_BYTES`), so each
/// queue, bounded by count, is bounded by bytes too.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub seq: u64,
    pub kind: Arc<EventKind>,
}

/// Every event's name ([`Event::name`]), in one place: the web UI's scripts (`app.js`,
/// `events-worker.js`) listen for these and `resync` (a tidy test compares them).
pub const EVENT_NAMES: [&str; 12] = [
    "execution_paused",
    "execution_resumed",
    "call_completed",
    "breakpoints_changed",
    "functions_changed",
    "repl_session",
    "repl_output",
    "external_server",
    "log",
    "origins_changed",
    "run_deleted",
    "run_changed",
];

impl Event {
    /// The event's name, as MCP notifications will carry it (`notifications/breakpoint/<name>`).
    pub fn name(&self) -> &'static str {
        match *self.kind {
            EventKind::ExecutionPaused { .. } => "execution_paused",
            EventKind::ExecutionResumed { .. } => "execution_resumed",
            EventKind::CallCompleted { .. } => "call_completed",
            EventKind::BreakpointsChanged => "breakpoints_changed",
            EventKind::FunctionsChanged => "functions_changed",
            EventKind::ReplSession { .. } => "repl_session",
            EventKind::ReplOutput { .. } => "repl_output",
            EventKind::ExternalServer { .. } => "external_server",
            EventKind::Log { .. } => "log",
            EventKind::OriginsChanged => "origins_changed",
            EventKind::RunDeleted { .. } => "run_deleted",
            EventKind::RunChanged { .. } => "run_changed",
        }
    }

    /// The event's payload (protocol doc §7.5 for the first three).
    pub fn params(&self) -> Value {
        match &*self.kind {
            EventKind::ExecutionPaused {
                pause_id,
                method_name,
                pause_reason,
                paused_at,
            } => json!({
                "pause_id": pause_id, "method_name": method_name,
                "pause_reason": pause_reason, "paused_at": paused_at,
            }),
            EventKind::ExecutionResumed {
                pause_id,
                method_name,
                action,
            } => {
                json!({"pause_id": pause_id, "method_name": method_name, "action": action})
            }
            EventKind::CallCompleted {
                call_id,
                method_name,
                status,
                process_key,
            } => {
                let mut v =
                    json!({"call_id": call_id, "method_name": method_name, "status": status});
                if let Some(k) = process_key {
                    v["process_key"] = json!(k);
                }
                v
            }
            EventKind::BreakpointsChanged
            | EventKind::FunctionsChanged
            | EventKind::OriginsChanged => json!({}),
            EventKind::RunDeleted { run_id } | EventKind::RunChanged { run_id } => {
                json!({"run_id": run_id})
            }
            EventKind::ReplSession {
                session_id,
                pause_id,
                state,
            } => json!({"session_id": session_id, "pause_id": pause_id, "state": state}),
            EventKind::ReplOutput {
                session_id,
                eval_id,
                is_error,
            } => json!({"session_id": session_id, "eval_id": eval_id, "is_error": is_error}),
            EventKind::ExternalServer { name, status } => {
                json!({"name": name, "status": status})
            }
            EventKind::Log {
                seq,
                function_name,
                call_id,
                message,
                logged_at,
            } => json!({
                "seq": seq, "function_name": function_name, "call_id": call_id,
                "message": message, "logged_at": logged_at,
            }),
        }
    }
}

/// Subscribers to events, and the most recent events for replay. Its mutex is a leaf lock:
/// never taken while calling out.
#[derive(Default)]
pub struct Bus {
    subscribers: Mutex<Subscribers>,
}

#[derive(Default)]
struct Subscribers {
    list: Vec<Subscriber>,
    /// The last `REPLAY_EVENTS` events published, in publishing order, notices apart.
    recent: VecDeque<Event>,
    /// The highest sequence number that `recent` no longer keeps.
    evicted: u64,
    /// The newest notice ([`EventKind::is_notice`]): kept apart, so that a flood of them
    /// never pushes another event out of the replay; one tells as much as many.
    notice: Option<Event>,
}

struct Subscriber {
    tx: Sender<Event>,
    /// Events reach a gated subscriber only while its gate is open.
    gate: Option<Arc<AtomicBool>>,
    /// A bounded subscriber that fell behind: set, and the subscriber dropped, when its queue
    /// is full (so a stalled reader never holds memory or blocks anyone).
    lagged: Option<Arc<AtomicBool>>,
}

/// A bounded subscription: its events, and whether it fell behind and was dropped.
pub struct Subscription {
    pub rx: Receiver<Event>,
    pub lagged: Arc<AtomicBool>,
}

/// Why a replay cannot give every event after the one asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Gap;

impl Bus {
    /// A new unbounded subscription; dropping the receiver unsubscribes.
    pub fn subscribe(&self) -> Receiver<Event> {
        self.add(None)
    }

    /// A subscription that receives only the events published while `gate` is true (the MCP
    /// notifier: with no session open, no event wakes it).
    pub fn subscribe_gated(&self, gate: Arc<AtomicBool>) -> Receiver<Event> {
        self.add(Some(gate))
    }

    fn add(&self, gate: Option<Arc<AtomicBool>>) -> Receiver<Event> {
        let (tx, rx) = unbounded();
        self.lock().list.push(Subscriber {
            tx,
            gate,
            lagged: None,
        });
        rx
    }

    /// A subscription whose queue holds at most `capacity` events; a subscriber that lets it
    /// fill up is dropped and told so through `lagged`.
    pub fn subscribe_bounded(&self, capacity: usize) -> Subscription {
        let (tx, rx) = bounded(capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        self.lock().list.push(Subscriber {
            tx,
            gate: None,
            lagged: Some(Arc::clone(&lagged)),
        });
        Subscription { rx, lagged }
    }

    /// The kept events after `seq`, by sequence number; `Gap` when some of them are no longer
    /// kept.
    pub fn replay_after(&self, seq: u64) -> Result<Vec<Event>, Gap> {
        let subs = self.lock();
        if subs.evicted > seq {
            return Err(Gap);
        }
        let mut after: Vec<Event> = subs
            .recent
            .iter()
            .chain(subs.notice.iter())
            .filter(|e| e.seq > seq)
            .cloned()
            .collect();
        after.sort_by_key(|e| e.seq);
        Ok(after)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends every event to every live subscriber whose gate is open, forgetting the ones that
    /// went away (a gated one when its gate is open).
    pub fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut subs = self.lock();
        subs.list.retain(|s| {
            if s.gate.as_ref().is_some_and(|g| !g.load(Ordering::SeqCst)) {
                // Kept, and forgotten at a publish with its gate open if it went away.
                return true;
            }
            events.iter().all(|e| match s.tx.try_send(e.clone()) {
                Ok(()) => true,
                Err(TrySendError::Disconnected(_)) => false,
                Err(TrySendError::Full(_)) => {
                    if let Some(lagged) = &s.lagged {
                        lagged.store(true, Ordering::SeqCst);
                    }
                    log::warn!(
                        "events: a subscriber stopped reading ({} events waiting); dropped (an \
                         event stream ends with resync)",
                        s.tx.len()
                    );
                    false
                }
            })
        });
        // Kept for replay by moving them in: no copy when nobody listens.
        for e in events {
            if e.kind.is_notice() {
                if subs.notice.as_ref().is_none_or(|n| n.seq < e.seq) {
                    subs.notice = Some(e);
                }
                continue;
            }
            if subs.recent.len() == REPLAY_EVENTS {
                if let Some(old) = subs.recent.pop_front() {
                    subs.evicted = subs.evicted.max(old.seq);
                }
            }
            subs.recent.push_back(e);
        }
    }

    pub fn n_subscribers(&self) -> usize {
        self.lock().list.len()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_event_name_is_in_the_list_the_web_ui_listens_for() {
        let s = String::new;
        let kinds = [
            EventKind::ExecutionPaused {
                pause_id: s(),
                method_name: s(),
                pause_reason: s(),
                paused_at: 0.0,
            },
            EventKind::ExecutionResumed {
                pause_id: s(),
                method_name: s(),
                action: s(),
            },
            EventKind::CallCompleted {
                call_id: s(),
                method_name: s(),
                status: s(),
                process_key: None,
            },
            EventKind::BreakpointsChanged,
            EventKind::FunctionsChanged,
            EventKind::ReplSession {
                session_id: s(),
                pause_id: s(),
                state: "",
            },
            EventKind::ReplOutput {
                session_id: s(),
                eval_id: s(),
                is_error: false,
            },
            EventKind::ExternalServer {
                name: s(),
                status: "",
            },
            EventKind::OriginsChanged,
            EventKind::RunDeleted { run_id: s() },
            EventKind::RunChanged { run_id: s() },
            EventKind::Log {
                seq: 0,
                function_name: s(),
                call_id: s(),
                message: s(),
                logged_at: 0.0,
            },
        ];
        let mut names: Vec<&str> = kinds
            .into_iter()
            .map(|kind| {
                Event {
                    seq: 0,
                    kind: kind.into(),
                }
                .name()
            })
            .collect();
        names.sort_unstable();
        let mut listed = EVENT_NAMES;
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    use super::*;

    #[test]
    fn publish_reaches_live_subscribers_and_drops_dead_ones() {
        let bus = Bus::default();
        let a = bus.subscribe();
        let b = bus.subscribe();
        drop(b);
        bus.publish(vec![Event {
            seq: 1,
            kind: EventKind::BreakpointsChanged.into(),
        }]);
        assert_eq!(a.try_recv().unwrap().seq, 1);
        assert_eq!(bus.n_subscribers(), 1);
    }

    fn ev(seq: u64) -> Event {
        Event {
            seq,
            kind: EventKind::BreakpointsChanged.into(),
        }
    }

    #[test]
    fn a_bounded_subscriber_that_falls_behind_is_dropped_and_told() {
        let bus = Bus::default();
        let slow = bus.subscribe_bounded(2);
        let fast = bus.subscribe();
        bus.publish(vec![ev(1), ev(2)]);
        assert!(!slow.lagged.load(Ordering::SeqCst));
        bus.publish(vec![ev(3)]);
        assert!(slow.lagged.load(Ordering::SeqCst));
        assert_eq!(bus.n_subscribers(), 1, "the slow one is gone");
        let got: Vec<u64> = slow.rx.try_iter().map(|e| e.seq).collect();
        assert_eq!(got, [1, 2]);
        assert_eq!(fast.try_iter().count(), 3, "the others are not held up");
    }

    #[test]
    fn replay_gives_the_kept_events_after_an_id_or_says_there_is_a_gap() {
        let bus = Bus::default();
        assert_eq!(bus.replay_after(0), Ok(vec![]));
        bus.publish(vec![ev(2), ev(1)]);
        let seqs =
            |r: Result<Vec<Event>, Gap>| r.map(|v| v.iter().map(|e| e.seq).collect::<Vec<_>>());
        assert_eq!(seqs(bus.replay_after(0)), Ok(vec![1, 2]));
        assert_eq!(seqs(bus.replay_after(1)), Ok(vec![2]));
        assert_eq!(seqs(bus.replay_after(2)), Ok(vec![]));
        bus.publish((3..=(REPLAY_EVENTS as u64 + 10)).map(ev).collect());
        assert_eq!(bus.replay_after(5), Err(Gap), "event 6 is no longer kept");
        let last = REPLAY_EVENTS as u64 + 10;
        assert_eq!(seqs(bus.replay_after(last - 1)), Ok(vec![last]));
        assert_eq!(seqs(bus.replay_after(last)), Ok(vec![]));
    }

    #[test]
    fn notices_are_replayed_apart_and_never_push_the_sessions_events_out() {
        let bus = Bus::default();
        let notice = |seq| Event {
            seq,
            kind: EventKind::OriginsChanged.into(),
        };
        bus.publish(vec![ev(1), notice(2), ev(3)]);
        let seqs =
            |r: Result<Vec<Event>, Gap>| r.map(|v| v.iter().map(|e| e.seq).collect::<Vec<_>>());
        assert_eq!(seqs(bus.replay_after(0)), Ok(vec![1, 2, 3]));
        // A flood of notices, many more than the replay keeps.
        let flood = 4..(4 + 3 * REPLAY_EVENTS as u64);
        let last = flood.end - 1;
        bus.publish(flood.map(notice).collect());
        assert_eq!(
            seqs(bus.replay_after(0)),
            Ok(vec![1, 3, last]),
            "the sessions' events stay, with the newest notice"
        );
        assert_eq!(seqs(bus.replay_after(3)), Ok(vec![last]));
        assert_eq!(seqs(bus.replay_after(last)), Ok(vec![]));
        // Events of the session past the replay's size still make a gap.
        let next = last + 1;
        bus.publish((next..next + REPLAY_EVENTS as u64 + 1).map(ev).collect());
        assert_eq!(bus.replay_after(last), Err(Gap));
        assert_eq!(bus.replay_after(next).map(|v| v.len()), Ok(REPLAY_EVENTS));
    }

    #[test]
    fn a_gated_subscriber_gets_only_what_is_published_while_its_gate_is_open() {
        let bus = Bus::default();
        let gate = Arc::new(AtomicBool::new(false));
        let rx = bus.subscribe_gated(Arc::clone(&gate));
        let ev = |seq| Event {
            seq,
            kind: EventKind::BreakpointsChanged.into(),
        };
        bus.publish(vec![ev(1)]);
        gate.store(true, Ordering::SeqCst);
        bus.publish(vec![ev(2)]);
        assert_eq!(rx.try_recv().unwrap().seq, 2);
        assert!(rx.try_recv().is_err());
        drop(rx);
        bus.publish(vec![ev(3)]);
        assert_eq!(
            bus.n_subscribers(),
            0,
            "a gated subscriber that went away is forgotten"
        );
    }

    #[test]
    fn paused_event_payload_has_the_documented_fields() {
        let e = Event {
            seq: 3,
            kind: EventKind::ExecutionPaused {
                pause_id: "p".into(),
                method_name: "add".into(),
                pause_reason: "breakpoint".into(),
                paused_at: 1.5,
            }
            .into(),
        };
        assert_eq!(e.name(), "execution_paused");
        assert_eq!(
            e.params(),
            json!({"pause_id": "p", "method_name": "add", "pause_reason": "breakpoint", "paused_at": 1.5})
        );
    }
}
