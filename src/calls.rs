//! Calls in flight: open calls (typed, as they will be recorded), paused executions and their
//! resume actions, orphaned pause ids and com-error reports (protocol doc §2.5 to §2.10 and
//! §5.2). Pure: no I/O, no locks. A pause keeps its `call_data` as the JSON object clients are
//! shown (pauses are few); completed calls move to `records`.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Map, Value};

use crate::records::{CallId, CallRecord};

/// How many resume actions of after-pauses are kept for clients still polling them. The
/// original never deletes them; we keep the newest ones (a client polls within milliseconds).
const MAX_AFTER_ACTIONS: usize = 10_000;
/// How many unknown pause ids that clients poll (pauses from before a restart) we remember.
const MAX_ORPHANS: usize = 1_000;
/// How many com-error reports are kept, as in the original.
const MAX_COM_ERRORS: usize = 500;

/// A paused execution.
#[derive(Clone, Debug)]
pub struct Pause {
    pub id: String,
    pub call_data: Map<String, Value>,
    pub paused_at: f64,
    /// The call this pause belongs to; `None` for an after-pause (the call is already complete).
    pub call_id: Option<String>,
}

impl Pause {
    /// An after-pause is recognised by its result or exception (protocol doc §5.2).
    pub fn is_after(&self) -> bool {
        self.call_data.contains_key("pretty_result") || self.call_data.contains_key("exception")
    }

    pub fn method_name(&self) -> &str {
        self.call_data
            .get("method_name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

#[derive(Debug)]
struct OpenCall {
    call: CallRecord,
    pause_id: Option<String>,
}

/// An open call popped at completion.
#[derive(Debug)]
pub struct Completed {
    pub call: CallRecord,
    /// Its before-pause, if it paused.
    pub pause_id: Option<String>,
    /// That pause, if it was still paused (the client completed without being resumed).
    pub leftover: Option<Pause>,
}

/// Why a resume was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ResumeError {
    NotFound,
    AlreadyResumed,
}

/// What `resume` did.
#[derive(Debug)]
pub enum Resumed {
    /// A current pause was resumed.
    Pause(Pause),
    /// A pause id some client polls but that this server never created (it was created
    /// before a restart): the action is stored so that client is released.
    Orphan,
}

#[derive(Debug, Default)]
pub struct Calls {
    counter: u64,
    open: HashMap<String, OpenCall>,
    paused: Vec<Pause>,
    actions: HashMap<String, Value>,
    after_actions: VecDeque<String>,
    orphans: HashMap<String, f64>,
    com_errors: VecDeque<Value>,
}

impl Calls {
    /// A new call id: server wall time and a server-wide counter, `"%.6f-%03d"`.
    pub fn next_call_id(&mut self, now: f64) -> CallId {
        self.counter += 1;
        CallId::Ours {
            at: now,
            n: self.counter,
        }
    }

    pub fn open_call(&mut self, call: CallRecord) {
        self.open.insert(
            call.call_id.to_string(),
            OpenCall {
                call,
                pause_id: None,
            },
        );
    }

    /// The open calls, in no particular order (object snapshots are derived from them too).
    pub fn open_calls(&self) -> impl Iterator<Item = &CallRecord> {
        self.open.values().map(|o| &o.call)
    }

    pub fn n_open(&self) -> usize {
        self.open.len()
    }

    /// Creates a paused execution. For a before-pause, `call_id` links it to its open call.
    pub fn pause(
        &mut self,
        id: String,
        call_data: Map<String, Value>,
        now: f64,
        call_id: Option<&str>,
    ) -> Pause {
        if let Some(open) = call_id.and_then(|c| self.open.get_mut(c)) {
            open.pause_id = Some(id.clone());
            open.call.paused_before = true;
        }
        let pause = Pause {
            id,
            call_data,
            paused_at: now,
            call_id: call_id.map(str::to_owned),
        };
        self.paused.push(pause.clone());
        pause
    }

    pub fn paused(&self) -> &[Pause] {
        &self.paused
    }

    pub fn paused_by_id(&self, id: &str) -> Option<&Pause> {
        self.paused.iter().find(|p| p.id == id)
    }

    pub fn has_action(&self, pause_id: &str) -> bool {
        self.actions.contains_key(pause_id)
    }

    /// The stored action of a pause, peeked (polling is idempotent). An id that is neither
    /// paused nor resumed is remembered as an orphan: some client waits on it.
    pub fn poll(&mut self, pause_id: &str, now: f64) -> Option<Value> {
        if let Some(action) = self.actions.get(pause_id) {
            return Some(action.clone());
        }
        if self.paused_by_id(pause_id).is_none() {
            if self.orphans.len() >= MAX_ORPHANS && !self.orphans.contains_key(pause_id) {
                if let Some(oldest) = self
                    .orphans
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(k, _)| k.clone())
                {
                    self.orphans.remove(&oldest);
                }
            }
            self.orphans.insert(pause_id.to_owned(), now);
        }
        None
    }

    pub fn is_orphan(&self, pause_id: &str) -> bool {
        self.orphans.contains_key(pause_id)
    }

    /// Unknown pause ids that clients have polled, with the time of the last poll.
    pub fn orphans(&self) -> Vec<(String, f64)> {
        let mut v: Vec<_> = self.orphans.iter().map(|(k, t)| (k.clone(), *t)).collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v
    }

    /// Stores the resume action of a pause and removes it from the paused list.
    pub fn resume(&mut self, pause_id: &str, action: Value) -> Result<Resumed, ResumeError> {
        if self.actions.contains_key(pause_id) {
            return Err(ResumeError::AlreadyResumed);
        }
        let Some(pos) = self.paused.iter().position(|p| p.id == pause_id) else {
            if self.orphans.remove(pause_id).is_some() {
                self.remember_after_action(pause_id, action);
                return Ok(Resumed::Orphan);
            }
            return Err(ResumeError::NotFound);
        };
        let pause = self.paused.remove(pos);
        if pause.call_id.is_some() {
            // A before-pause action lives until its call completes.
            self.actions.insert(pause_id.to_owned(), action);
        } else {
            self.remember_after_action(pause_id, action);
        }
        Ok(Resumed::Pause(pause))
    }

    fn remember_after_action(&mut self, pause_id: &str, action: Value) {
        self.actions.insert(pause_id.to_owned(), action);
        self.after_actions.push_back(pause_id.to_owned());
        while self.after_actions.len() > MAX_AFTER_ACTIONS {
            if let Some(old) = self.after_actions.pop_front() {
                self.actions.remove(&old);
            }
        }
    }

    /// Pops an open call at completion, deleting its before-pause action and any leftover
    /// paused entry (returned, so its REPL sessions can be closed).
    pub fn complete(&mut self, call_id: &str) -> Option<Completed> {
        let open = self.open.remove(call_id)?;
        let mut leftover = None;
        if let Some(pid) = &open.pause_id {
            self.actions.remove(pid);
            if let Some(pos) = self.paused.iter().position(|p| &p.id == pid) {
                leftover = Some(self.paused.remove(pos));
            }
        }
        Some(Completed {
            call: open.call,
            pause_id: open.pause_id,
            leftover,
        })
    }

    pub fn push_com_error(&mut self, report: Value) {
        self.com_errors.push_back(report);
        while self.com_errors.len() > MAX_COM_ERRORS {
            self.com_errors.pop_front();
        }
    }

    pub fn com_errors(&self) -> Vec<Value> {
        self.com_errors.iter().cloned().collect()
    }

    /// Summary of a pause for event payloads.
    pub fn pause_summary(pause: &Pause) -> Value {
        json!({
            "pause_id": pause.id,
            "method_name": pause.method_name(),
            "pause_reason": pause.call_data.get("pause_reason").cloned().unwrap_or(json!("breakpoint")),
            "paused_at": pause.paused_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Map<String, Value> {
        json!({"method_name": name}).as_object().cloned().unwrap()
    }

    #[test]
    fn call_ids_have_the_original_format() {
        let mut c = Calls::default();
        assert_eq!(
            c.next_call_id(1795311683.784533).to_string(),
            "1795311683.784533-001"
        );
        assert_eq!(c.next_call_id(1.0).to_string(), "1.000000-002");
    }

    #[test]
    fn poll_is_idempotent_and_completion_cleans_up() {
        let mut c = Calls::default();
        c.open_call(CallRecord::for_tests("f", "c1"));
        c.pause("p1".into(), data("f"), 1.0, Some("c1"));
        assert_eq!(c.poll("p1", 1.0), None);
        assert!(!c.is_orphan("p1"));
        c.resume("p1", json!({"action": "continue"})).unwrap();
        assert!(c.paused().is_empty());
        assert_eq!(c.poll("p1", 2.0), Some(json!({"action": "continue"})));
        assert_eq!(c.poll("p1", 2.0), Some(json!({"action": "continue"})));
        assert_eq!(
            c.resume("p1", json!({})).unwrap_err(),
            ResumeError::AlreadyResumed
        );
        let done = c.complete("c1").unwrap();
        assert_eq!(&*done.call.method, "f");
        assert_eq!(done.pause_id.as_deref(), Some("p1"));
        assert!(done.leftover.is_none());
        assert_eq!(c.poll("p1", 3.0), None, "action deleted at completion");
        assert!(c.complete("c1").is_none());
    }

    #[test]
    fn completing_a_still_paused_call_removes_the_pause() {
        let mut c = Calls::default();
        c.open_call(CallRecord::for_tests("f", "c1"));
        c.pause("p1".into(), data("f"), 1.0, Some("c1"));
        let done = c.complete("c1").unwrap();
        assert_eq!(done.leftover.unwrap().id, "p1");
        assert!(c.paused().is_empty());
    }

    #[test]
    fn unknown_ids_are_not_found_until_polled() {
        let mut c = Calls::default();
        assert_eq!(
            c.resume("zz", json!({})).unwrap_err(),
            ResumeError::NotFound
        );
        assert_eq!(c.poll("zz", 1.0), None);
        assert!(c.is_orphan("zz"));
        assert!(matches!(
            c.resume("zz", json!({"action": "continue"})),
            Ok(Resumed::Orphan)
        ));
        assert_eq!(c.poll("zz", 2.0), Some(json!({"action": "continue"})));
    }

    #[test]
    fn after_pause_actions_are_bounded() {
        let mut c = Calls::default();
        for i in 0..MAX_AFTER_ACTIONS + 5 {
            let id = format!("p{i}");
            c.pause(id.clone(), data("f"), 1.0, None);
            c.resume(&id, json!({"action": "continue"})).unwrap();
        }
        assert_eq!(c.actions.len(), MAX_AFTER_ACTIONS);
        assert!(!c.has_action("p0"));
        assert!(c.has_action(&format!("p{}", MAX_AFTER_ACTIONS + 4)));
    }

    #[test]
    fn com_errors_keep_the_last_500() {
        let mut c = Calls::default();
        for i in 0..510 {
            c.push_com_error(json!({"i": i}));
        }
        let all = c.com_errors();
        assert_eq!(all.len(), 500);
        assert_eq!(all[0]["i"], 10);
    }
}
