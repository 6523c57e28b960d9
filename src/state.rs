//! The shared state: one `Mutex<State>` over the pure stores, the content store (its own leaf
//! lock, for I/O) and the event bus. `Shared::lock` is the only way in; its guard publishes the
//! events recorded under the lock after releasing it.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::breakpoints::{Breakpoints, Functions, Logbook, Settings};
use crate::calls::Calls;
use crate::config::Config;
use crate::events::{Bus, Event, EventKind};
use crate::intern::Interner;
use crate::records::Records;
use crate::render::{RenderCache, StoreRender};
use crate::repl::Repl;
use crate::store::Store;
use crate::upstream::manager::Manager;

/// All domain data, guarded by one mutex (see ARCHITECTURE.md, "Threads and the one lock").
#[derive(Default)]
pub struct State {
    pub breakpoints: Breakpoints,
    pub functions: Functions,
    pub calls: Calls,
    pub records: Records,
    pub repl: Repl,
    /// The newest lines logpoints wrote.
    pub logbook: Logbook,
    /// Browser origins granted, pending and denied (the browser-client endpoints).
    pub origins: crate::origins::Origins,
    /// The labels and notes of runs.
    pub runs: crate::runs::RunNotes,
    /// The notes on call records read from the database, until `Shared` takes them.
    pub record_notes: crate::runs::RecordNotes,
    /// Replays whose evaluation runs in a program, by process key (`service::replay`).
    pub replays: std::collections::HashMap<String, crate::replay::Active>,
    /// The newest replay sequences' reports (wire shape), by report id (shown by
    /// `/runs/replayed/<id>`).
    pub replay_reports: crate::replay::Reports<serde_json::Value>,
    next_seq: u64,
    pending_events: Vec<Event>,
}

impl State {
    /// Records an event; it is published when the lock is released.
    pub fn emit(&mut self, kind: EventKind) {
        self.next_seq += 1;
        self.pending_events.push(Event {
            seq: self.next_seq,
            kind: Arc::new(kind),
        });
    }
}

/// What every thread shares.
pub struct Shared {
    pub config: Config,
    pub store: Store,
    pub bus: Bus,
    /// The MCP client manager: idle (no thread, no child) until a server is connected, by the
    /// flags at start or at run time (`POST /api/mcp-clients/connect`, the web UI).
    pub upstream: Arc<Manager>,
    /// Shares the strings, CIDs and JSON trees of records (a leaf lock, taken before `state`
    /// is, never while it is held).
    pub interner: Mutex<Interner>,
    renders: Mutex<RenderCache>,
    /// Payload texts verified before (a leaf lock, like the interner).
    verified: Mutex<crate::cas::Verified>,
    /// MCP sessions open (agents connected), kept by the MCP server for the status line.
    pub mcp_sessions: std::sync::atomic::AtomicUsize,
    /// The server is stopping: set once, under the state lock (so an operation that checks it
    /// under the lock, like a REPL eval, is either refused or released by the stop), and read
    /// without the lock by whatever only polls it (event streams).
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// The secret this server proves itself with to whoever its port file sends (`port_file`);
    /// set once the port is bound.
    pub join_secret: std::sync::OnceLock<crate::port_file::Secret>,
    state: Mutex<State>,
    /// The breakpoint settings the database holds (`None` after a failed write: unknown).
    /// Held by a change of the settings until its record is written (taken before `state`),
    /// so records reach the database in the order of the changes.
    settings_writer: Mutex<Option<Settings>>,
    /// The processes that recorded calls, with their records in light form (a leaf lock; see
    /// `process_index.rs`).
    pub processes: Mutex<crate::process_index::ProcessIndex>,
    /// The notes on call records (a leaf lock, taken while rendering records).
    pub record_notes: Mutex<crate::runs::RecordNotes>,
}

impl Shared {
    pub fn new(config: Config, store: Store, state: State) -> Shared {
        Shared::with_interner(config, store, state, Interner::default())
    }

    pub fn with_interner(
        config: Config,
        store: Store,
        mut state: State,
        interner: Interner,
    ) -> Shared {
        let record_notes = std::mem::take(&mut state.record_notes);
        // What the database holds: the settings restored from it (or none, which reads as
        // these defaults).
        let written = state.breakpoints.settings();
        Shared {
            upstream: Manager::idle(config.upstream_timing.clone()),
            config,
            store,
            bus: Bus::default(),
            interner: Mutex::new(interner),
            renders: Mutex::new(RenderCache::default()),
            verified: Mutex::new(crate::cas::Verified::default()),
            mcp_sessions: std::sync::atomic::AtomicUsize::new(0),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            join_secret: std::sync::OnceLock::new(),
            state: Mutex::new(state),
            settings_writer: Mutex::new(Some(written)),
            processes: Mutex::new(crate::process_index::ProcessIndex::default()),
            record_notes: Mutex::new(record_notes),
        }
    }

    /// The process index (its poisoning is recovered: an entry is pushed whole or not at all).
    pub fn processes(&self) -> MutexGuard<'_, crate::process_index::ProcessIndex> {
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The interner (its poisoning is recovered: interning leaves no broken invariant).
    pub fn interner(&self) -> MutexGuard<'_, Interner> {
        self.interner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The payload texts verified before (poisoning recovered: a lost entry is only re-verified).
    pub fn verified(&self) -> MutexGuard<'_, crate::cas::Verified> {
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Renders stored payloads on demand (never call it with the state lock held: it reads
    /// the content store).
    pub fn render(&self) -> StoreRender<'_> {
        StoreRender {
            store: &self.store,
            cache: &self.renders,
            notes: Some(&self.record_notes),
        }
    }

    /// The turn to change the breakpoint settings, with the settings the database holds (see
    /// `service::settings`). Poisoning is recovered as "unknown": the next write holds every
    /// setting.
    pub fn settings_writer(&self) -> MutexGuard<'_, Option<Settings>> {
        self.settings_writer.lock().unwrap_or_else(|e| {
            let mut written = e.into_inner();
            *written = None;
            self.settings_writer.clear_poison();
            written
        })
    }

    /// Locks the state.
    ///
    /// Poisoning is recovered on purpose: a panic inside one request is caught and answered
    /// with 500, and every store method leaves its data consistent between statements that
    /// can panic, so the server keeps serving.
    pub fn lock(&self) -> StateGuard<'_> {
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        crate::lock_rule::locked();
        StateGuard {
            guard: Some(guard),
            bus: &self.bus,
        }
    }
}

/// A locked `State`. Dropping it releases the lock, then publishes the events emitted under it.
pub struct StateGuard<'a> {
    guard: Option<MutexGuard<'a, State>>,
    bus: &'a Bus,
}

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard.as_ref().expect("guard is present until drop")
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_mut().expect("guard is present until drop")
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let events = match self.guard.as_mut() {
            Some(g) => std::mem::take(&mut g.pending_events),
            None => Vec::new(),
        };
        if self.guard.take().is_some() {
            crate::lock_rule::unlocked();
        }
        self.bus.publish(events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn shared() -> Arc<Shared> {
        let config = Config::for_tests("/nonexistent/port".into());
        Arc::new(Shared::new(config, Store::memory(), State::default()))
    }

    #[test]
    fn a_panic_under_the_lock_does_not_lock_everyone_out() {
        let s = shared();
        let s2 = s.clone();
        let _ = std::thread::spawn(move || {
            let mut st = s2.lock();
            st.breakpoints.add("f");
            panic!("a buggy request");
        })
        .join();
        assert!(s.lock().breakpoints.contains("f"));
    }

    #[test]
    fn events_are_published_after_the_lock_is_released() {
        let s = shared();
        let rx = s.bus.subscribe();
        {
            let mut st = s.lock();
            st.emit(EventKind::BreakpointsChanged);
            st.emit(EventKind::FunctionsChanged);
            assert!(
                rx.try_recv().is_err(),
                "nothing is sent while the lock is held"
            );
        }
        let a = rx.try_recv().unwrap();
        let b = rx.try_recv().unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        assert_eq!(*a.kind, EventKind::BreakpointsChanged);
    }
}
