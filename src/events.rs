//! State-transition events and their subscribers. Events are collected while the state lock is
//! held and published by `StateGuard` after it is released, so a slow subscriber never holds
//! up the state; each carries a sequence number taken under the lock, which orders them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};

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
    },
    /// Breakpoints, their behaviours, replacements or the global default changed.
    BreakpointsChanged,
    /// A function was registered or its metadata changed.
    FunctionsChanged,
}

/// One event with its sequence number.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub seq: u64,
    pub kind: EventKind,
}

impl Event {
    /// The event's name, as MCP notifications will carry it (`notifications/breakpoint/<name>`).
    pub fn name(&self) -> &'static str {
        match self.kind {
            EventKind::ExecutionPaused { .. } => "execution_paused",
            EventKind::ExecutionResumed { .. } => "execution_resumed",
            EventKind::CallCompleted { .. } => "call_completed",
            EventKind::BreakpointsChanged => "breakpoints_changed",
            EventKind::FunctionsChanged => "functions_changed",
        }
    }

    /// The event's payload (protocol doc §7.5 for the first three).
    pub fn params(&self) -> Value {
        match &self.kind {
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
            } => {
                json!({"call_id": call_id, "method_name": method_name, "status": status})
            }
            EventKind::BreakpointsChanged | EventKind::FunctionsChanged => json!({}),
        }
    }
}

/// Subscribers to events. Its mutex is a leaf lock: never taken while calling out.
#[derive(Default)]
pub struct Bus {
    subscribers: Mutex<Vec<Subscriber>>,
}

struct Subscriber {
    tx: Sender<Event>,
    /// Events reach a gated subscriber only while its gate is open.
    gate: Option<Arc<AtomicBool>>,
}

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
        self.subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Subscriber { tx, gate });
        rx
    }

    /// Sends every event to every live subscriber whose gate is open, forgetting the ones that
    /// went away (a gated one when its gate is open).
    pub fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|s| {
            if s.gate.as_ref().is_some_and(|g| !g.load(Ordering::SeqCst)) {
                // Kept, and forgotten at a publish with its gate open if it went away.
                return true;
            }
            events.iter().all(|e| s.tx.send(e.clone()).is_ok())
        });
    }

    pub fn n_subscribers(&self) -> usize {
        self.subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_reaches_live_subscribers_and_drops_dead_ones() {
        let bus = Bus::default();
        let a = bus.subscribe();
        let b = bus.subscribe();
        drop(b);
        bus.publish(vec![Event {
            seq: 1,
            kind: EventKind::BreakpointsChanged,
        }]);
        assert_eq!(a.try_recv().unwrap().seq, 1);
        assert_eq!(bus.n_subscribers(), 1);
    }

    #[test]
    fn a_gated_subscriber_gets_only_what_is_published_while_its_gate_is_open() {
        let bus = Bus::default();
        let gate = Arc::new(AtomicBool::new(false));
        let rx = bus.subscribe_gated(Arc::clone(&gate));
        let ev = |seq| Event {
            seq,
            kind: EventKind::BreakpointsChanged,
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
            },
        };
        assert_eq!(e.name(), "execution_paused");
        assert_eq!(
            e.params(),
            json!({"pause_id": "p", "method_name": "add", "pause_reason": "breakpoint", "paused_at": 1.5})
        );
    }
}
