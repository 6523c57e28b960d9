//! REPL sessions on paused executions and the eval relay (protocol doc §2.7, §2.8, §5.4).
//! A waiting eval registers a one-shot sender here under the state lock and waits on the
//! receiver outside it; delivering a result, closing the session or resuming the pause sends
//! exactly one outcome. Closed sessions are kept with their transcripts, the newest
//! `MAX_CLOSED_REPL_SESSIONS` of them (`limits.rs`); open ones are never dropped. Pure: no I/O,
//! no blocking.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crossbeam_channel::Sender;
use serde_json::{json, Map, Value};

use crate::limits::MAX_CLOSED_REPL_SESSIONS;

/// What a waiting eval receives.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalOutcome {
    /// `{"output","stdout","is_error","result_cid"}`.
    Result(Value),
    /// The session was closed (or its pause resumed) before a result arrived.
    Closed,
}

/// An eval queued for the debugged program, as `/api/poll-repl` hands it out.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub eval_id: String,
    pub session_id: String,
    pub pause_id: String,
    pub expr: String,
}

impl EvalRequest {
    pub fn to_json(&self) -> Value {
        json!({"eval_id": self.eval_id, "session_id": self.session_id,
               "pause_id": self.pause_id, "expr": self.expr})
    }
}

#[derive(Debug)]
struct Pending {
    session_id: String,
    expr: String,
    waiter: Sender<EvalOutcome>,
    /// The `dir()` asked for when the session opened: its answer becomes the session's
    /// `scope`, not a transcript entry.
    scope: bool,
}

/// The expression that lists the names a REPL session's evaluations see.
pub const SCOPE_EXPR: &str = "dir()";

/// The names in a `dir()` answer: the program's repr of a list of strings (or its JSON
/// rendering); `None` when it is not one.
pub fn scope_names(output: &str) -> Option<Vec<String>> {
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(output) {
        return items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect();
    }
    let inner = output.trim().strip_prefix('[')?.strip_suffix(']')?;
    let names: Vec<String> = inner
        .split(',')
        .map(|n| n.trim().trim_matches(|c| c == '\'' || c == '"').to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    let identifier = |n: &String| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
            && n.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    };
    names.iter().all(identifier).then_some(names)
}

/// One REPL session bound to one pause.
#[derive(Debug, Clone)]
pub struct Session {
    pub session_id: String,
    pub pause_id: String,
    pub started_at: f64,
    pub closed_at: Option<f64>,
    /// The pause's call data fields shown with the session (pid, function, call, args...).
    pub info: Map<String, Value>,
    pub transcript: Vec<Value>,
    /// What the evaluations see, once the program answered `dir()` (`{"names": [...]}`, or
    /// `{"error": text}`); `{"asked": true}` while it has not; null when nobody asked.
    pub scope: Value,
}

impl Session {
    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }

    /// The session as `GET /api/repl/<sid>` shows it.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("session_id".into(), json!(self.session_id));
        out.insert("pause_id".into(), json!(self.pause_id));
        for (k, v) in &self.info {
            out.insert(k.clone(), v.clone());
        }
        out.insert("started_at".into(), json!(self.started_at));
        out.insert("closed_at".into(), json!(self.closed_at));
        out.insert("transcript".into(), json!(self.transcript));
        out.insert("scope".into(), self.scope.clone());
        Value::Object(out)
    }

    fn summary_text(&self) -> String {
        let mut s = format!("{} {}", self.session_id, self.pause_id);
        for key in ["function_name", "call_id", "process_key"] {
            if let Some(v) = self.info.get(key).and_then(Value::as_str) {
                s.push(' ');
                s.push_str(v);
            }
        }
        s
    }
}

/// Why an eval could not be queued or a result delivered.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplError {
    SessionNotFound,
    SessionClosed,
    EvalNotFound,
}

/// Filters of `GET /api/repl/sessions`.
#[derive(Debug, Default)]
pub struct SessionFilter<'a> {
    pub search: Option<&'a str>,
    pub active: Option<bool>,
    pub from: Option<f64>,
    pub to: Option<f64>,
}

#[derive(Debug)]
pub struct Repl {
    sessions: BTreeMap<String, Session>,
    queues: HashMap<String, VecDeque<EvalRequest>>,
    pending: HashMap<String, Pending>,
    /// Ids of the closed sessions still kept, in the order they closed (oldest first).
    closed: VecDeque<String>,
    /// How many closed sessions are kept.
    max_closed: usize,
}

impl Default for Repl {
    fn default() -> Self {
        Repl::with_max_closed(MAX_CLOSED_REPL_SESSIONS)
    }
}

impl Repl {
    /// Every session kept (open or closed), by id.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    /// No sessions; at most `max_closed` closed sessions kept.
    pub fn with_max_closed(max_closed: usize) -> Self {
        Repl {
            sessions: BTreeMap::new(),
            queues: HashMap::new(),
            pending: HashMap::new(),
            closed: VecDeque::new(),
            max_closed,
        }
    }

    /// Starts a session on a pause. The id is `"<pid>-<started_at %.6f>"`, bumped by 1 ms
    /// until unique, as in the original.
    pub fn start(
        &mut self,
        pause_id: &str,
        call_data: &Map<String, Value>,
        pid: &Value,
        now: f64,
    ) -> String {
        let pid_text = match pid {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut started_at = now;
        let mut session_id = format!("{pid_text}-{started_at:.6}");
        while self.sessions.contains_key(&session_id) {
            started_at += 0.001;
            session_id = format!("{pid_text}-{started_at:.6}");
        }
        let cd = call_data;
        let mut info = Map::new();
        info.insert("pid".into(), pid.clone());
        info.insert(
            "function_name".into(),
            cd.get("method_name").cloned().unwrap_or(Value::Null),
        );
        for key in [
            "call_id",
            "process_key",
            "args",
            "kwargs",
            "pretty_args",
            "pretty_kwargs",
            "signature",
        ] {
            info.insert(key.into(), cd.get(key).cloned().unwrap_or(Value::Null));
        }
        let session = Session {
            session_id: session_id.clone(),
            pause_id: pause_id.to_owned(),
            started_at,
            closed_at: None,
            info,
            transcript: Vec::new(),
            scope: Value::Null,
        };
        self.sessions.insert(session_id.clone(), session);
        session_id
    }

    pub fn session(&self, session_id: &str) -> Option<&Session> {
        self.sessions.get(session_id)
    }

    /// The sessions of the same program (`process_key`) started before `session_id`, newest
    /// first, at most `n` of them: what a person evaluated at its earlier pauses.
    pub fn earlier_sessions(&self, session_id: &str, n: usize) -> Vec<&Session> {
        let Some(this) = self.sessions.get(session_id) else {
            return Vec::new();
        };
        let key = this.info.get("process_key").filter(|k| !k.is_null());
        let Some(key) = key else {
            return Vec::new();
        };
        let mut v: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| {
                s.session_id != this.session_id
                    && s.started_at < this.started_at
                    && s.info.get("process_key") == Some(key)
            })
            .collect();
        v.sort_by(|a, b| b.started_at.total_cmp(&a.started_at));
        v.truncate(n);
        v
    }

    /// Asks the program of an open session which names its evaluations see (`dir()`), ahead
    /// of anything queued after; the answer becomes the session's `scope`.
    pub fn ask_scope(&mut self, session_id: &str, eval_id: String) -> Result<(), ReplError> {
        let (tx, _) = crossbeam_channel::bounded(1);
        self.enqueue(session_id, SCOPE_EXPR, eval_id.clone(), tx)?;
        if let Some(p) = self.pending.get_mut(&eval_id) {
            p.scope = true;
        }
        if let Some(s) = self.sessions.get_mut(session_id) {
            s.scope = json!({"asked": true});
        }
        Ok(())
    }

    /// Ids of the sessions of one pause, oldest first.
    pub fn sessions_of(&self, pause_id: &str) -> Vec<String> {
        let mut v: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| s.pause_id == pause_id)
            .collect();
        v.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        v.into_iter().map(|s| s.session_id.clone()).collect()
    }

    /// The session, if it exists and is open.
    fn open_session(&self, session_id: &str) -> Result<&Session, ReplError> {
        match self.sessions.get(session_id) {
            None => Err(ReplError::SessionNotFound),
            Some(s) if !s.is_open() => Err(ReplError::SessionClosed),
            Some(s) => Ok(s),
        }
    }

    /// Queues an expression for the program; the outcome will be sent on `waiter`.
    pub fn enqueue(
        &mut self,
        session_id: &str,
        expr: &str,
        eval_id: String,
        waiter: Sender<EvalOutcome>,
    ) -> Result<EvalRequest, ReplError> {
        let session = self.open_session(session_id)?;
        let request = EvalRequest {
            eval_id: eval_id.clone(),
            session_id: session_id.to_owned(),
            pause_id: session.pause_id.clone(),
            expr: expr.to_owned(),
        };
        self.queues
            .entry(request.pause_id.clone())
            .or_default()
            .push_back(request.clone());
        self.pending.insert(
            eval_id,
            Pending {
                session_id: session_id.to_owned(),
                expr: expr.to_owned(),
                waiter,
                scope: false,
            },
        );
        Ok(request)
    }

    /// Pops the oldest queued eval of a pause (`/api/poll-repl`).
    pub fn next_request(&mut self, pause_id: &str) -> Option<EvalRequest> {
        let queue = self.queues.get_mut(pause_id)?;
        let next = queue.pop_front();
        if queue.is_empty() {
            self.queues.remove(pause_id);
        }
        next
    }

    /// Forgets an eval whose waiter gave up (timeout or cancel); a late result is then
    /// answered `eval_not_found`.
    pub fn expire(&mut self, eval_id: &str) {
        if let Some(p) = self.pending.remove(eval_id) {
            if let Some(session) = self.sessions.get(&p.session_id) {
                if let Some(queue) = self.queues.get_mut(&session.pause_id) {
                    queue.retain(|r| r.eval_id != eval_id);
                }
            }
        }
    }

    /// Checks that a result can be delivered, in the original's order: session, closed, eval.
    pub fn check_delivery(&self, session_id: &str, eval_id: &str) -> Result<(), ReplError> {
        self.open_session(session_id)?;
        match self.pending.get(eval_id) {
            Some(p) if p.session_id == session_id => Ok(()),
            _ => Err(ReplError::EvalNotFound),
        }
    }

    /// Appends a transcript entry and wakes the waiting eval with `result`
    /// (`{"output","stdout","is_error","result_cid"}`).
    pub fn deliver(
        &mut self,
        session_id: &str,
        eval_id: &str,
        result: Value,
        now: f64,
    ) -> Result<(), ReplError> {
        self.check_delivery(session_id, eval_id)?;
        let pending = self
            .pending
            .remove(eval_id)
            .ok_or(ReplError::EvalNotFound)?;
        let session = self
            .sessions
            .get_mut(session_id)
            .ok_or(ReplError::SessionNotFound)?;
        if pending.scope {
            let field = |k: &str| result.get(k).cloned().unwrap_or(Value::Null);
            let output = field("output");
            let text = output.as_str().unwrap_or("");
            session.scope = match (field("is_error").as_bool(), scope_names(text)) {
                (Some(false), Some(names)) => json!({"names": names}),
                _ => json!({"error": text}),
            };
            return Ok(());
        }
        let mut entry = Map::new();
        entry.insert("index".into(), json!(session.transcript.len()));
        entry.insert("input".into(), json!(pending.expr));
        if let Value::Object(fields) = &result {
            for key in ["output", "stdout", "is_error", "result_cid"] {
                entry.insert(key.into(), fields.get(key).cloned().unwrap_or(Value::Null));
            }
        }
        entry.insert("timestamp".into(), json!(now));
        session.transcript.push(Value::Object(entry));
        // The waiter may have given up a moment ago; the transcript keeps the result anyway.
        let _ = pending.waiter.try_send(EvalOutcome::Result(result));
        Ok(())
    }

    /// Closes one session and releases its waiting evals. Returns false if unknown.
    pub fn close(&mut self, session_id: &str, now: f64) -> bool {
        let Some(session) = self.sessions.get_mut(session_id) else {
            return false;
        };
        let newly_closed = session.closed_at.is_none();
        if newly_closed {
            session.closed_at = Some(now);
        }
        let pause_id = session.pause_id.clone();
        if let Some(queue) = self.queues.get_mut(&pause_id) {
            queue.retain(|r| r.session_id != session_id);
        }
        let ids: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.session_id == session_id)
            .map(|(k, _)| k.clone())
            .collect();
        for id in ids {
            if let Some(p) = self.pending.remove(&id) {
                let _ = p.waiter.try_send(EvalOutcome::Closed);
            }
        }
        if newly_closed {
            self.closed.push_back(session_id.to_owned());
            while self.closed.len() > self.max_closed {
                if let Some(oldest) = self.closed.pop_front() {
                    // Closed: nothing of it is queued or pending any more.
                    self.sessions.remove(&oldest);
                }
            }
        }
        true
    }

    /// Closes every session of a pause (the pause was resumed or its call ended).
    pub fn close_pause(&mut self, pause_id: &str, now: f64) {
        for sid in self.sessions_of(pause_id) {
            self.close(&sid, now);
        }
        self.queues.remove(pause_id);
    }

    /// Closes everything, releasing every waiter (shutdown).
    pub fn close_all(&mut self, now: f64) {
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for sid in ids {
            self.close(&sid, now);
        }
    }

    /// Sessions matching the filter, newest first.
    pub fn list(&self, filter: &SessionFilter) -> Vec<Value> {
        let needle = filter.search.map(str::to_lowercase);
        let mut v: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| filter.active.is_none_or(|a| a == s.is_open()))
            .filter(|s| filter.from.is_none_or(|t| s.started_at >= t))
            .filter(|s| filter.to.is_none_or(|t| s.started_at <= t))
            .filter(|s| {
                needle
                    .as_ref()
                    .is_none_or(|n| s.summary_text().to_lowercase().contains(n))
            })
            .collect();
        v.sort_by(|a, b| b.started_at.total_cmp(&a.started_at));
        v.into_iter()
            .map(|s| {
                json!({
                    "session_id": s.session_id,
                    "pause_id": s.pause_id,
                    "pid": s.info.get("pid"),
                    "function_name": s.info.get("function_name"),
                    "call_id": s.info.get("call_id"),
                    "process_key": s.info.get("process_key"),
                    "started_at": s.started_at,
                    "closed_at": s.closed_at,
                    "status": if s.is_open() { "active" } else { "closed" },
                    "eval_count": s.transcript.len(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    fn data() -> Map<String, Value> {
        json!({"method_name": "f", "process_pid": 42, "call_id": "c"})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn session_ids_are_pid_and_time_and_unique() {
        let mut r = Repl::default();
        let a = r.start("p", &data(), &json!(42), 10.0);
        let b = r.start("p", &data(), &json!(42), 10.0);
        assert_eq!(a, "42-10.000000");
        assert_eq!(b, "42-10.001000");
        assert_eq!(r.sessions_of("p"), vec![a, b]);
    }

    #[test]
    fn eval_round_trip_appends_transcript_and_wakes_waiter() {
        let mut r = Repl::default();
        let sid = r.start("p", &data(), &json!(42), 10.0);
        let (tx, rx) = bounded(1);
        let req = r.enqueue(&sid, "1+1", "e1".into(), tx).unwrap();
        assert_eq!(req.pause_id, "p");
        assert!(r.next_request("other").is_none());
        assert_eq!(r.next_request("p").unwrap().eval_id, "e1");
        assert!(r.next_request("p").is_none());
        let result = json!({"output": "2", "stdout": "", "is_error": false, "result_cid": null});
        r.deliver(&sid, "e1", result.clone(), 11.0).unwrap();
        assert_eq!(rx.try_recv().unwrap(), EvalOutcome::Result(result));
        assert_eq!(r.session(&sid).unwrap().transcript[0]["input"], "1+1");
        assert_eq!(
            r.deliver(&sid, "e1", json!({}), 12.0),
            Err(ReplError::EvalNotFound)
        );
    }

    #[test]
    fn closing_releases_waiters_and_refuses_more() {
        let mut r = Repl::default();
        let sid = r.start("p", &data(), &json!(1), 1.0);
        let (tx, rx) = bounded(1);
        r.enqueue(&sid, "x", "e1".into(), tx).unwrap();
        r.close_pause("p", 2.0);
        assert_eq!(rx.try_recv().unwrap(), EvalOutcome::Closed);
        let (tx, _rx) = bounded(1);
        assert_eq!(
            r.enqueue(&sid, "x", "e2".into(), tx).unwrap_err(),
            ReplError::SessionClosed
        );
        assert_eq!(r.check_delivery(&sid, "e1"), Err(ReplError::SessionClosed));
        assert_eq!(
            r.check_delivery("nope", "e1"),
            Err(ReplError::SessionNotFound)
        );
        assert!(r.next_request("p").is_none());
    }

    #[test]
    fn expired_evals_leave_the_queue() {
        let mut r = Repl::default();
        let sid = r.start("p", &data(), &json!(1), 1.0);
        let (tx, _rx) = bounded(1);
        r.enqueue(&sid, "x", "e1".into(), tx).unwrap();
        r.expire("e1");
        assert!(r.next_request("p").is_none());
        assert_eq!(r.check_delivery(&sid, "e1"), Err(ReplError::EvalNotFound));
    }

    #[test]
    fn only_the_newest_closed_sessions_are_kept_and_open_ones_never_dropped() {
        let mut r = Repl::with_max_closed(2);
        let open: Vec<String> = (0..5)
            .map(|i| r.start("o", &data(), &json!(1), f64::from(i)))
            .collect();
        let a = r.start("p", &data(), &json!(2), 1.0);
        let b = r.start("p", &data(), &json!(2), 2.0);
        let c = r.start("q", &data(), &json!(2), 3.0);
        // Closed in another order than started: the one closed longest ago goes first.
        r.close(&b, 4.0);
        r.close(&a, 5.0);
        assert!(r.close(&b, 6.0), "closing twice is still fine");
        assert!(r.session(&b).is_some(), "a second close is not a new one");
        r.close(&c, 7.0);
        assert!(r.session(&b).is_none());
        assert!(r.session(&a).is_some() && r.session(&c).is_some());
        assert_eq!(r.sessions_of("p"), vec![a.clone()]);
        assert!(!r.close(&b, 8.0));
        assert_eq!(r.check_delivery(&b, "e"), Err(ReplError::SessionNotFound));
        let (tx, _rx) = bounded(1);
        assert_eq!(
            r.enqueue(&b, "x", "e".into(), tx).unwrap_err(),
            ReplError::SessionNotFound
        );
        assert_eq!(r.list(&SessionFilter::default()).len(), open.len() + 2);
        for sid in &open {
            assert!(r.session(sid).is_some_and(Session::is_open));
        }
        // Shutdown closes everything; then the cap holds for all of them.
        r.close_all(9.0);
        assert_eq!(r.list(&SessionFilter::default()).len(), 2);
        assert_eq!(r.sessions.len(), 2);
    }

    #[test]
    fn the_default_keeps_the_stated_number_of_closed_sessions() {
        let mut r = Repl::default();
        let first = r.start("p", &data(), &json!(1), 0.0);
        for i in 0..MAX_CLOSED_REPL_SESSIONS {
            r.start("p", &data(), &json!(1), 1.0 + i as f64);
        }
        r.close_pause("p", 1e6);
        assert!(r.session(&first).is_none());
        assert_eq!(r.sessions.len(), MAX_CLOSED_REPL_SESSIONS);
    }

    #[test]
    fn list_filters_and_orders_newest_first() {
        let mut r = Repl::default();
        let a = r.start("p", &data(), &json!(1), 1.0);
        let b = r.start("q", &data(), &json!(1), 5.0);
        r.close(&a, 6.0);
        let all = r.list(&SessionFilter::default());
        assert_eq!(all[0]["session_id"], b.as_str());
        let closed = r.list(&SessionFilter {
            active: Some(false),
            ..Default::default()
        });
        assert_eq!(closed.len(), 1);
        let late = r.list(&SessionFilter {
            from: Some(2.0),
            ..Default::default()
        });
        assert_eq!(late.len(), 1);
        let search = r.list(&SessionFilter {
            search: Some("Q"),
            ..Default::default()
        });
        assert_eq!(search.len(), 1);
    }
}
