//! Calls in flight: open calls (typed, as they will be recorded), paused executions and their
//! resume actions, orphaned pause ids and com-error reports (protocol doc §2.5 to §2.10 and
//! §5.2). Pure: no I/O, no locks. A pause keeps its `call_data` as the JSON object clients are
//! shown (pauses are few); completed calls move to `records`. What is kept of requests that
//! create nothing (polled unknown ids, com-error reports) is bounded in bytes (`limits`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::breakpoints::Gate;
use crate::intern::Sym;
use crate::limits::{
    MAX_AFTER_ACTIONS, MAX_PAUSED_BYTES_PER_ORIGIN, MAX_PAUSES_PER_ORIGIN, REPORT_TEXT_CHARS,
};
use crate::limits::{
    MAX_COM_ERRORS, MAX_COM_ERRORS_BYTES, MAX_COM_ERROR_REPORT_BYTES, MAX_OPEN_CALLS,
    MAX_OPEN_CALLS_BYTES, MAX_ORPHANS, MAX_ORPHAN_ID_BYTES,
};
use crate::records::{CallId, CallRecord, Process};
use crate::resolution::Resolution;

/// Whether a pause is before the call runs or after it returned (or raised).
#[derive(serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum When {
    Before,
    After,
}

/// Why a call paused, as its pause data tells (`pause_reason` and what goes with it).
#[derive(Clone, Debug, PartialEq)]
pub struct PauseCause {
    /// `breakpoint`, `exception` or `condition_error`.
    pub reason: &'static str,
    /// Why the condition could not be decided.
    pub error: Option<String>,
    /// The breakpoint's hit count, for a breakpoint that counts.
    pub hit_count: Option<u64>,
    /// The condition that held (or could not be decided).
    pub condition: Option<String>,
}

impl PauseCause {
    pub fn plain(reason: &'static str) -> PauseCause {
        PauseCause {
            reason,
            error: None,
            hit_count: None,
            condition: None,
        }
    }

    /// Writes the cause into a pause's wire call data.
    pub fn describe(&self, data: &mut Map<String, Value>) {
        data.insert("pause_reason".into(), json!(self.reason));
        if let Some(c) = &self.condition {
            data.insert("condition".into(), json!(c));
        }
        if let Some(e) = &self.error {
            data.insert("condition_error".into(), json!(e));
        }
        if let Some(n) = self.hit_count {
            data.insert("hit_count".into(), json!(n));
        }
    }
}

/// A paused execution: the call as recorded (before it ran, or completed for an after-pause)
/// and why it paused. Its wire `call_data` is built from these at the edge (`service::pauses`).
#[derive(Clone, Debug)]
pub struct Pause {
    pub id: String,
    pub when: When,
    pub call: Arc<CallRecord>,
    pub cause: PauseCause,
    pub paused_at: f64,
    /// When its program last polled it (`GET /api/poll/<id>`); `paused_at` until the first
    /// poll. A program that stops polling is gone (`limits::PROGRAM_GONE_AFTER_S`).
    pub last_poll_at: f64,
    /// What its call keeps (`CallRecord::weight`), for the bound of a page's pauses.
    pub weight: usize,
}

impl Pause {
    pub fn is_after(&self) -> bool {
        self.when == When::After
    }

    pub fn method_name(&self) -> &str {
        &self.call.method
    }

    /// Whether its program stopped polling: no poll for `gone_after_s` seconds at `now`.
    pub fn is_gone(&self, now: f64, gone_after_s: f64) -> bool {
        now - self.last_poll_at > gone_after_s
    }
}

#[derive(Debug)]
struct OpenCall {
    call: CallRecord,
    pause_id: Option<String>,
    /// What its start decided for its completion (conditional breakpoints).
    gate: Gate,
    /// What it keeps (`CallRecord::weight`), for the byte bound of the open calls.
    weight: usize,
}

/// An open call popped at completion.
#[derive(Debug)]
pub struct Completed {
    pub call: CallRecord,
    /// Its before-pause, if it paused.
    pub pause_id: Option<String>,
    /// That pause, if it was still paused (the client completed without being resumed).
    pub leftover: Option<Pause>,
    /// What its start decided for its completion.
    pub gate: Gate,
}

/// A request about a call or pause that did not come from its owner: another browser origin
/// (or a page's request about a program's call, or the reverse), or for a completion another
/// process (`process_pid` and `process_start_time`). Refused; nothing changes.
#[derive(Debug, PartialEq, Eq)]
pub struct NotYours {
    /// The origin that owns it (`None`: a program, no browser origin).
    pub owner_origin: Option<String>,
}

/// What a completion says of the process that sends it (`process_pid`, `process_start_time`).
/// Each field is a claim only when sent: an absent (or null) field claims nothing, so a REST
/// caller or a page that omits both is judged by its origin alone (the random call id is the
/// capability); a field that is sent must be the call's, and one that is not a number
/// contradicts every call.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ProcessClaim {
    /// `None`: not sent; `Some(None)`: sent, but not an integer.
    pub pid: Option<Option<i64>>,
    /// `None`: not sent; `Some(None)`: sent, but not a finite number.
    pub start_time: Option<Option<f64>>,
}

impl ProcessClaim {
    /// The claim of a process that sent both fields.
    pub fn of(p: &Process) -> ProcessClaim {
        ProcessClaim {
            pid: Some(Some(p.pid)),
            start_time: Some(Some(p.start_time)),
        }
    }

    fn contradicts(&self, p: &Process) -> bool {
        self.pid.is_some_and(|v| v != Some(p.pid))
            || self.start_time.is_some_and(|v| v != Some(p.start_time))
    }
}

/// An origin as compared: trimmed, without a trailing slash, lowercase.
fn norm_origin(o: &str) -> String {
    o.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// Whether a request from `origin` may act for something owned by `owner`.
fn same_origin(owner: Option<&str>, origin: Option<&str>) -> Result<(), NotYours> {
    let norm = |o: Option<&str>| o.map(norm_origin);
    if norm(owner) == norm(origin) {
        Ok(())
    } else {
        Err(NotYours {
            owner_origin: owner.map(str::to_owned),
        })
    }
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
    /// Open call ids, oldest first (completed ones are skipped when met, and pruned).
    open_order: VecDeque<String>,
    open_bytes: usize,
    /// Open calls dropped to keep within `MAX_OPEN_CALLS` and `MAX_OPEN_CALLS_BYTES`.
    open_dropped: u64,
    paused: Vec<Pause>,
    /// Resume actions by pause id, with the origin that owns the pause.
    actions: HashMap<String, (Value, Option<Sym>)>,
    after_actions: VecDeque<String>,
    /// Unknown pause ids some client polls: when it last polled, and its origin.
    orphans: HashMap<String, (f64, Option<Sym>)>,
    /// Com-error reports with their size as JSON text, and the sum of those sizes.
    /// Reports as compact JSON text: a tree of `Value`s would cost many times the bytes counted.
    com_errors: VecDeque<Box<str>>,
    com_error_bytes: usize,
    /// Pauses admitted (`admit_pause`) and not yet made, by call id, with the normalized
    /// origin and the weight of the call: an after-pause is admitted before its record is
    /// written, and made once it is.
    pause_reserved: HashMap<String, (String, usize)>,
    /// Origins at their pause limit, with the calls that ran without pausing since they
    /// reached it (a burst: it ends when the origin may pause again). Only origins holding
    /// `MAX_PAUSES_PER_ORIGIN` pauses are here, so it is bounded by the paused list.
    pause_bursts: HashMap<String, u64>,
    /// Calls let run without pausing because of `MAX_PAUSES_PER_ORIGIN`, since start.
    pauses_limited: u64,
}

impl Calls {
    /// A new call id: server wall time, a server-wide counter and 128 random bits,
    /// `"%.6f-%03d-<32 hex>"` (the random part makes it unguessable).
    pub fn next_call_id(&mut self, now: f64) -> CallId {
        self.counter += 1;
        CallId::Keyed(Box::new(crate::records::KeyedId {
            at: now,
            n: self.counter,
            key: crate::ids::random_u128(),
        }))
    }

    /// Registers a started call until its completion. Calls that never complete (a client that
    /// died, or a page that only starts calls) would be kept forever: past `MAX_OPEN_CALLS` or
    /// `MAX_OPEN_CALLS_BYTES`, the oldest that is not paused is dropped and counted (its
    /// completion, if it ever comes, is recorded like any unknown completion).
    pub fn open_call(&mut self, call: CallRecord) {
        self.open_gated(call, Gate::Plain);
    }

    /// [`Calls::open_call`], with what its start decided for its completion.
    pub fn open_gated(&mut self, call: CallRecord, gate: Gate) {
        let id = call.call_id.to_string();
        let weight = call.weight() + id.len();
        self.open_bytes += weight;
        if let Some(old) = self.open.insert(
            id.clone(),
            OpenCall {
                call,
                pause_id: None,
                gate,
                weight,
            },
        ) {
            self.open_bytes -= old.weight;
        }
        self.open_order.push_back(id);
        self.bound_open_calls();
    }

    fn bound_open_calls(&mut self) {
        if self.open_order.len() > 2 * self.open.len() + 64 {
            let open = &self.open;
            self.open_order.retain(|id| open.contains_key(id));
        }
        let mut passed = 0;
        while (self.open.len() > MAX_OPEN_CALLS || self.open_bytes > MAX_OPEN_CALLS_BYTES)
            && passed < self.open_order.len()
        {
            let Some(id) = self.open_order.pop_front() else {
                break;
            };
            match self.open.get(&id) {
                None => {}
                Some(o) if o.pause_id.is_some() || self.open.len() == 1 => {
                    // A paused call waits for someone; the newest is the one just started.
                    self.open_order.push_back(id);
                    passed += 1;
                }
                Some(_) => {
                    if let Some(o) = self.open.remove(&id) {
                        self.open_bytes -= o.weight;
                        self.open_dropped += 1;
                        // The first, then every thousandth: a flood must not flood the log.
                        if self.open_dropped % 1000 != 1 {
                            continue;
                        }
                        log::warn!(
                            "dropped the open call {id} ({}) that never completed: more than \
                             {MAX_OPEN_CALLS} open calls or {} MiB ({} dropped so far)",
                            o.call.method,
                            MAX_OPEN_CALLS_BYTES >> 20,
                            self.open_dropped
                        );
                    }
                }
            }
        }
    }

    /// The arguments of an open call whose start deferred its decision to completion.
    pub fn deferred(&self, call_id: &str) -> Option<&CallRecord> {
        self.open
            .get(call_id)
            .filter(|o| o.gate == Gate::Deferred)
            .map(|o| &o.call)
    }

    /// Open calls dropped since start (see `open_call`).
    pub fn open_dropped(&self) -> u64 {
        self.open_dropped
    }

    /// The open calls, in no particular order (object snapshots are derived from them too).
    pub fn open_calls(&self) -> impl Iterator<Item = &CallRecord> {
        self.open.values().map(|o| &o.call)
    }

    pub fn n_open(&self) -> usize {
        self.open.len()
    }

    /// Paused calls of the origin `norm` (normalized), and the pauses admitted for it not made
    /// yet: how many, and what their calls keep (`CallRecord::weight`, counted in full).
    fn pauses_of(&self, norm: &str) -> (usize, usize) {
        let mine = |o: Option<&str>| o.is_some_and(|o| norm_origin(o) == norm);
        let paused = self.paused.iter().filter(|p| mine(p.call.origin()));
        let reserved = self.pause_reserved.values().filter(|(o, _)| o == norm);
        (
            paused.clone().count() + reserved.clone().count(),
            paused.map(|p| p.weight).sum::<usize>() + reserved.map(|(_, w)| w).sum::<usize>(),
        )
    }

    /// Whether `call` may pause now: the calls of a page (a browser origin) hold at most
    /// `MAX_PAUSES_PER_ORIGIN` pauses and `MAX_PAUSED_BYTES_PER_ORIGIN`, the new one included;
    /// programs (no origin) are not limited. An admitted pause is reserved (by call id) until
    /// [`Calls::pause`] makes it or [`Calls::cancel_pause`] gives it up, so pauses admitted
    /// one lock apart from their making cannot pass the bound. A refusal is counted, and the
    /// first of a burst logged (not each call of a flood).
    pub fn admit_pause(&mut self, call: &CallRecord) -> bool {
        let Some(origin) = call.origin() else {
            return true;
        };
        let norm = norm_origin(origin);
        let (held, bytes) = self.pauses_of(&norm);
        let weight = call.weight();
        if held < MAX_PAUSES_PER_ORIGIN && bytes + weight <= MAX_PAUSED_BYTES_PER_ORIGIN {
            self.pause_reserved
                .insert(call.call_id.to_string(), (norm.clone(), weight));
            if let Some(ran) = self.pause_bursts.remove(&norm) {
                log::info!(
                    "the page at {origin} may pause calls again: {ran} of its calls ran \
                     without pausing while it held the most paused calls one origin may"
                );
            }
            return true;
        }
        self.pauses_limited += 1;
        let burst = self.pause_bursts.entry(norm).or_default();
        *burst += 1;
        if *burst == 1 {
            log::warn!(
                "the page at {origin} holds {held} paused calls keeping {} KiB, the most one \
                 browser origin may hold ({MAX_PAUSES_PER_ORIGIN} calls, {} MiB): its calls \
                 run without pausing (answered `continue`, their records say `pause_limit`) \
                 until some of its pauses are resumed; first: {:?}",
                bytes >> 10,
                MAX_PAUSED_BYTES_PER_ORIGIN >> 20,
                crate::pretty::cut(&call.method)
            );
        }
        false
    }

    /// Gives up the pause admitted for the call `call_id` by [`Calls::admit_pause`].
    pub fn cancel_pause(&mut self, call_id: &str) {
        self.pause_reserved.remove(call_id);
    }

    /// Calls that ran without pausing because their page held `MAX_PAUSES_PER_ORIGIN`.
    pub fn pauses_limited(&self) -> u64 {
        self.pauses_limited
    }

    /// Creates a paused execution. A before-pause is linked to its open call (by the call's
    /// id), whose record it shows. A pause of a call with an origin takes up the reservation
    /// `admit_pause` made for it.
    pub fn pause(
        &mut self,
        id: String,
        when: When,
        call: Arc<CallRecord>,
        cause: PauseCause,
        now: f64,
    ) -> Pause {
        self.pause_reserved.remove(&call.call_id.to_string());
        if when == When::Before {
            if let Some(open) = self.open.get_mut(&call.call_id.to_string()) {
                open.pause_id = Some(id.clone());
                open.call.paused_before = true;
            }
        }
        let pause = Pause {
            id,
            when,
            weight: call.weight(),
            call,
            cause,
            paused_at: now,
            last_poll_at: now,
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

    /// The stored action of a pause, peeked (polling is idempotent), for a request from
    /// `origin`: a pause owned by another origin is refused. An id that is neither paused nor
    /// resumed is remembered as an orphan: some client waits on it. An id longer than any we
    /// make is not remembered (it still polls as waiting, so the client keeps polling).
    pub fn poll(
        &mut self,
        pause_id: &str,
        origin: Option<&str>,
        now: f64,
    ) -> Result<Option<Value>, NotYours> {
        if let Some((action, owner)) = self.actions.get(pause_id) {
            same_origin(owner.as_deref(), origin)?;
            return Ok(Some(action.clone()));
        }
        if let Some(p) = self.paused.iter_mut().find(|p| p.id == pause_id) {
            same_origin(p.call.origin(), origin)?;
            p.last_poll_at = p.last_poll_at.max(now);
            return Ok(None);
        }
        if let Some((_, owner)) = self.orphans.get(pause_id) {
            same_origin(owner.as_deref(), origin)?;
        }
        if pause_id.len() <= MAX_ORPHAN_ID_BYTES {
            if self.orphans.len() >= MAX_ORPHANS && !self.orphans.contains_key(pause_id) {
                if let Some(oldest) = self
                    .orphans
                    .iter()
                    .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
                    .map(|(k, _)| k.clone())
                {
                    self.orphans.remove(&oldest);
                }
            }
            self.orphans
                .insert(pause_id.to_owned(), (now, origin.map(Sym::new)));
        }
        Ok(None)
    }

    /// Whether a request from `origin` may act for the pause `pause_id` (REPL polls and
    /// results): a current pause must be owned by that origin; unknown ids pass (they hold
    /// nothing).
    pub fn check_pause_owner(&self, pause_id: &str, origin: Option<&str>) -> Result<(), NotYours> {
        match self.paused_by_id(pause_id) {
            Some(p) => same_origin(p.call.origin(), origin),
            None => Ok(()),
        }
    }

    /// Whether a completion from `origin` that claims `process` may complete the open call
    /// `call_id`: it must come from the origin that started it (a program: none; a page: the
    /// same origin), and what it says of its process must not contradict the call's (omitted
    /// fields claim nothing). Unknown ids pass (their completion records nothing).
    pub fn check_call_owner(
        &self,
        call_id: &str,
        origin: Option<&str>,
        process: &ProcessClaim,
    ) -> Result<(), NotYours> {
        let Some(open) = self.open.get(call_id) else {
            return Ok(());
        };
        same_origin(open.call.origin(), origin)?;
        if process.contradicts(&open.call.process) {
            return Err(NotYours {
                owner_origin: open.call.origin().map(str::to_owned),
            });
        }
        Ok(())
    }

    pub fn is_orphan(&self, pause_id: &str) -> bool {
        self.orphans.contains_key(pause_id)
    }

    /// Unknown pause ids that clients have polled, with the time of the last poll.
    pub fn orphans(&self) -> Vec<(String, f64)> {
        let mut v: Vec<_> = self
            .orphans
            .iter()
            .map(|(k, (t, _))| (k.clone(), *t))
            .collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v
    }

    /// Stores the resume action of a pause and removes it from the paused list. What the
    /// action did is kept in the record of a before-pause's call (`resolution`).
    pub fn resume(
        &mut self,
        pause_id: &str,
        action: Value,
        resolution: Resolution,
    ) -> Result<Resumed, ResumeError> {
        if self.actions.contains_key(pause_id) {
            return Err(ResumeError::AlreadyResumed);
        }
        let Some(pos) = self.paused.iter().position(|p| p.id == pause_id) else {
            if let Some((_, origin)) = self.orphans.remove(pause_id) {
                self.remember_after_action(pause_id, action, origin);
                return Ok(Resumed::Orphan);
            }
            return Err(ResumeError::NotFound);
        };
        let pause = self.paused.remove(pos);
        let origin = pause.call.origin().map(Sym::new);
        if pause.when == When::Before {
            // A before-pause action lives until its call completes.
            self.actions.insert(pause_id.to_owned(), (action, origin));
            if let Some(open) = self.open.get_mut(&pause.call.call_id.to_string()) {
                open.call.set_resolution(resolution);
            }
        } else {
            self.remember_after_action(pause_id, action, origin);
        }
        Ok(Resumed::Pause(pause))
    }

    fn remember_after_action(&mut self, pause_id: &str, action: Value, origin: Option<Sym>) {
        self.actions.insert(pause_id.to_owned(), (action, origin));
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
        self.open_bytes -= open.weight;
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
            gate: open.gate,
            leftover,
        })
    }

    /// Keeps a com-error report: the newest `MAX_COM_ERRORS` within `MAX_COM_ERRORS_BYTES`, a
    /// report over `MAX_COM_ERROR_REPORT_BYTES` shrunk first (see [`shrink_report`]).
    pub fn push_com_error(&mut self, report: Value) {
        let report = shrink_report(report).into_boxed_str();
        self.com_error_bytes += report.len();
        self.com_errors.push_back(report);
        while self.com_errors.len() > MAX_COM_ERRORS || self.com_error_bytes > MAX_COM_ERRORS_BYTES
        {
            match self.com_errors.pop_front() {
                Some(r) => self.com_error_bytes -= r.len(),
                None => break,
            }
        }
    }

    pub fn com_errors(&self) -> Vec<Value> {
        self.com_errors
            .iter()
            .map(|r| serde_json::from_str(r).unwrap_or(Value::Null))
            .collect()
    }
}

/// The fields a report keeps when nothing else makes it fit.
const REPORT_CORE_FIELDS: [&str; 12] = [
    "summary",
    "timestamp",
    "received_at",
    "method",
    "path",
    "server_url",
    "process_pid",
    "process_start_time",
    "status_code",
    "exception_type",
    "exception_message",
    "shrunk",
];

/// A com-error report within `MAX_COM_ERROR_REPORT_BYTES`, as compact JSON text: as sent
/// when it fits; else its long strings cut to 4000 characters; else without `payload` (the
/// failed request's body); else only its core fields, cut to 200 characters. A shrunk report
/// says so in `shrunk`.
fn shrink_report(report: Value) -> String {
    fn cut_strings(v: &mut Value, keep: usize) {
        match v {
            Value::String(s) => {
                if let Some((at, _)) = s.char_indices().nth(keep) {
                    // A new string: truncating would keep the whole allocation.
                    *s = format!("{}... ({} bytes cut)", &s[..at], s.len() - at);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| cut_strings(i, keep)),
            Value::Object(m) => m.values_mut().for_each(|i| cut_strings(i, keep)),
            _ => {}
        }
    }
    let size = |v: &Value| v.to_string().len();
    let text = report.to_string();
    let original = text.len();
    if original <= MAX_COM_ERROR_REPORT_BYTES {
        return text;
    }
    drop(text);
    let Value::Object(mut m) = report else {
        return json!({"shrunk": format!("a report of {original} bytes that is not an object")})
            .to_string();
    };
    m.insert(
        "shrunk".into(),
        json!(format!(
            "this report took {original} bytes; reports over {MAX_COM_ERROR_REPORT_BYTES} are cut"
        )),
    );
    let mut v = Value::Object(m);
    cut_strings(&mut v, REPORT_TEXT_CHARS);
    if size(&v) > MAX_COM_ERROR_REPORT_BYTES {
        if let Some(p) = v.get_mut("payload") {
            *p = json!("(dropped: too large)");
        }
    }
    if size(&v) > MAX_COM_ERROR_REPORT_BYTES {
        let mut core = Map::new();
        for k in REPORT_CORE_FIELDS {
            if let Some(x) = v.get(k) {
                core.insert(k.into(), x.clone());
            }
        }
        v = Value::Object(core);
        cut_strings(&mut v, 200);
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, call_id: &str) -> Arc<CallRecord> {
        Arc::new(CallRecord::for_tests(name, call_id))
    }

    fn cause() -> PauseCause {
        PauseCause::plain("breakpoint")
    }

    fn by() -> Resolution {
        Resolution::new(
            crate::resolution::Action::Continue,
            crate::resolution::Actor::Rest,
            1.0,
        )
    }

    #[test]
    fn call_ids_start_with_the_original_format_and_end_with_128_random_bits() {
        let mut c = Calls::default();
        let a = c.next_call_id(1795311683.784533).to_string();
        assert!(a.starts_with("1795311683.784533-001-"), "{a}");
        assert_eq!(a.len(), "1795311683.784533-001-".len() + 32);
        let b = c.next_call_id(1.0).to_string();
        assert!(b.starts_with("1.000000-002-"), "{b}");
        assert_ne!(a[22..], b[13..], "the random parts differ");
        assert_eq!(CallId::parse(&a).to_string(), a);
        assert!(matches!(CallId::parse(&a), CallId::Keyed(_)));
    }

    #[test]
    fn only_the_owner_polls_completes_or_answers_for_a_call() {
        let mut c = Calls::default();
        let mut page = CallRecord::for_tests("f", "c1");
        page.set_origin(Some("http://localhost:3000"));
        c.open_call(page.clone());
        c.pause("p1".into(), When::Before, Arc::new(page), cause(), 1.0);
        let other = Some("http://evil.example");
        assert!(c.poll("p1", other, 1.0).is_err());
        assert!(
            c.poll("p1", None, 1.0).is_err(),
            "a program cannot poll a page's pause"
        );
        assert_eq!(c.poll("p1", Some("http://localhost:3000/"), 1.0), Ok(None));
        assert!(c.check_pause_owner("p1", other).is_err());
        assert!(c
            .check_pause_owner("p1", Some("http://localhost:3000"))
            .is_ok());
        c.resume("p1", json!({"action": "continue"}), by()).unwrap();
        assert!(c.poll("p1", other, 2.0).is_err(), "nor read its action");
        let me = Process {
            pid: 1,
            start_time: 1.0,
        };
        let them = Process {
            pid: 1,
            start_time: 2.0,
        };
        let page = Some("http://localhost:3000");
        let (me, them) = (ProcessClaim::of(&me), ProcessClaim::of(&them));
        let silent = ProcessClaim::default();
        assert!(c.check_call_owner("c1", other, &me).is_err());
        assert!(c.check_call_owner("c1", other, &silent).is_err());
        assert!(c.check_call_owner("c1", None, &me).is_err(), "a program");
        assert!(c.check_call_owner("c1", page, &them).is_err());
        let pid_only = ProcessClaim {
            pid: Some(Some(1)),
            start_time: None,
        };
        let wrong_pid = ProcessClaim {
            pid: Some(Some(2)),
            start_time: None,
        };
        let bad_pid = ProcessClaim {
            pid: Some(None),
            ..me
        };
        assert!(c.check_call_owner("c1", page, &wrong_pid).is_err());
        assert!(c.check_call_owner("c1", page, &bad_pid).is_err());
        assert!(c.check_call_owner("c1", page, &pid_only).is_ok());
        assert!(c.check_call_owner("c1", page, &silent).is_ok());
        assert!(c.check_call_owner("c1", page, &me).is_ok());
        assert!(c.check_call_owner("unknown", other, &silent).is_ok());
        // An orphan belongs to the origin that polled it first.
        assert_eq!(c.poll("zz", None, 3.0), Ok(None));
        assert!(c.poll("zz", other, 3.0).is_err());
    }

    #[test]
    fn poll_is_idempotent_and_completion_cleans_up() {
        let mut c = Calls::default();
        c.open_call(CallRecord::for_tests("f", "c1"));
        c.pause("p1".into(), When::Before, call("f", "c1"), cause(), 1.0);
        assert_eq!(c.poll("p1", None, 1.0), Ok(None));
        assert!(!c.is_orphan("p1"));
        c.resume("p1", json!({"action": "continue"}), by()).unwrap();
        assert!(c.paused().is_empty());
        assert_eq!(
            c.poll("p1", None, 2.0),
            Ok(Some(json!({"action": "continue"})))
        );
        assert_eq!(
            c.poll("p1", None, 2.0),
            Ok(Some(json!({"action": "continue"})))
        );
        assert_eq!(
            c.resume("p1", json!({}), by()).unwrap_err(),
            ResumeError::AlreadyResumed
        );
        let done = c.complete("c1").unwrap();
        assert_eq!(&*done.call.method, "f");
        assert_eq!(done.pause_id.as_deref(), Some("p1"));
        assert!(done.leftover.is_none());
        assert_eq!(
            c.poll("p1", None, 3.0),
            Ok(None),
            "action deleted at completion"
        );
        assert!(c.complete("c1").is_none());
    }

    #[test]
    fn completing_a_still_paused_call_removes_the_pause() {
        let mut c = Calls::default();
        c.open_call(CallRecord::for_tests("f", "c1"));
        c.pause("p1".into(), When::Before, call("f", "c1"), cause(), 1.0);
        let done = c.complete("c1").unwrap();
        assert_eq!(done.leftover.unwrap().id, "p1");
        assert!(c.paused().is_empty());
    }

    #[test]
    fn unknown_ids_are_not_found_until_polled() {
        let mut c = Calls::default();
        assert_eq!(
            c.resume("zz", json!({}), by()).unwrap_err(),
            ResumeError::NotFound
        );
        assert_eq!(c.poll("zz", None, 1.0), Ok(None));
        assert!(c.is_orphan("zz"));
        assert!(matches!(
            c.resume("zz", json!({"action": "continue"}), by()),
            Ok(Resumed::Orphan)
        ));
        assert_eq!(
            c.poll("zz", None, 2.0),
            Ok(Some(json!({"action": "continue"})))
        );
    }

    #[test]
    fn after_pause_actions_are_bounded() {
        let mut c = Calls::default();
        for i in 0..MAX_AFTER_ACTIONS + 5 {
            let id = format!("p{i}");
            c.pause(id.clone(), When::After, call("f", "done"), cause(), 1.0);
            c.resume(&id, json!({"action": "continue"}), by()).unwrap();
        }
        assert_eq!(c.actions.len(), MAX_AFTER_ACTIONS);
        assert!(!c.has_action("p0"));
        assert!(c.has_action(&format!("p{}", MAX_AFTER_ACTIONS + 4)));
    }

    #[test]
    fn absurdly_long_unknown_ids_poll_as_waiting_but_are_not_remembered() {
        let mut c = Calls::default();
        let long = "x".repeat(MAX_ORPHAN_ID_BYTES + 1);
        assert_eq!(c.poll(&long, None, 1.0), Ok(None));
        assert!(!c.is_orphan(&long));
        assert_eq!(
            c.resume(&long, json!({"action": "continue"}), by())
                .unwrap_err(),
            ResumeError::NotFound
        );
        let uuid = "0b6f4a7e-3c1d-4e8a-9f2b-5d6c7e8f9a0b";
        assert_eq!(c.poll(uuid, None, 1.0), Ok(None));
        assert!(c.is_orphan(uuid));
        for i in 0..MAX_ORPHANS + 10 {
            c.poll(&format!("{i:0>200}"), None, 2.0 + i as f64).unwrap();
        }
        assert_eq!(c.orphans.len(), MAX_ORPHANS);
        assert!(!c.is_orphan(uuid), "the oldest went first");
    }

    #[test]
    fn com_errors_are_bounded_in_bytes_and_large_reports_shrink() {
        let mut c = Calls::default();
        let big = "y".repeat(1 << 20);
        c.push_com_error(json!({"summary": "s", "traceback": big, "payload": {"a": [big]}}));
        let kept = &c.com_errors()[0];
        assert!(kept.to_string().len() <= MAX_COM_ERROR_REPORT_BYTES);
        assert_eq!(kept["summary"], "s");
        assert!(kept["shrunk"].as_str().unwrap().contains("bytes"));
        assert!(kept["traceback"].as_str().unwrap().ends_with("bytes cut)"));
        // Many strings just under the cut: the payload goes.
        let many: Vec<String> = (0..40).map(|_| "z".repeat(3000)).collect();
        c.push_com_error(json!({"summary": "t", "payload": many}));
        assert_eq!(c.com_errors()[1]["payload"], "(dropped: too large)");
        // Many fields: only the core ones stay.
        let wide: Map<String, Value> = (0..100)
            .map(|i| (format!("k{i}"), json!("w".repeat(3000))))
            .collect();
        let mut wide = Value::Object(wide);
        wide["summary"] = json!("u");
        c.push_com_error(wide);
        let last = c.com_errors()[2].clone();
        assert_eq!(last["summary"], "u");
        assert!(last.get("k1").is_none());
        assert!(last.to_string().len() <= MAX_COM_ERROR_REPORT_BYTES);
        c.push_com_error(json!("not an object".repeat(10_000)));
        // The total stays within its bytes, newest kept.
        for i in 0..400 {
            c.push_com_error(json!({"i": i, "payload": "p".repeat(60_000)}));
        }
        assert!(c.com_error_bytes <= MAX_COM_ERRORS_BYTES);
        assert_eq!(
            c.com_error_bytes,
            c.com_errors()
                .iter()
                .map(|r| r.to_string().len())
                .sum::<usize>()
        );
        assert_eq!(c.com_errors().last().unwrap()["i"], 399);
    }

    #[test]
    fn open_calls_that_never_complete_are_bounded_and_paused_ones_kept() {
        let mut c = Calls::default();
        let id = |n: usize| format!("1795311683.500000-{n:03}");
        c.open_call(CallRecord::for_tests("f", &id(0)));
        c.pause("p0".into(), When::Before, call("f", &id(0)), cause(), 1.0);
        for n in 1..=MAX_OPEN_CALLS + 10 {
            c.open_call(CallRecord::for_tests("f", &id(n)));
        }
        assert_eq!(c.n_open(), MAX_OPEN_CALLS);
        assert_eq!(c.open_dropped(), 11);
        // The paused one stayed; the oldest others went; the newest are there to complete.
        assert!(c.complete(&id(0)).is_some());
        assert!(c.complete(&id(1)).is_none());
        assert!(c.complete(&id(11)).is_none());
        assert!(c.complete(&id(12)).is_some());
        assert!(c.complete(&id(MAX_OPEN_CALLS + 10)).is_some());
        assert_eq!(c.n_open(), MAX_OPEN_CALLS - 3);
        assert!(c.open_bytes > 0);
        // The order queue does not grow with completed calls.
        for n in 0..3 * MAX_OPEN_CALLS {
            let i = id(MAX_OPEN_CALLS + 100 + n);
            c.open_call(CallRecord::for_tests("g", &i));
            c.complete(&i);
        }
        assert!(c.open_order.len() <= 2 * c.n_open() + 65);
    }

    #[test]
    fn a_page_holds_at_most_its_pause_limit_and_programs_are_not_limited() {
        let mut c = Calls::default();
        let record = |origin: Option<&str>, id: &str| {
            let mut r = CallRecord::for_tests("f", id);
            r.set_origin(origin);
            r
        };
        let pause = |c: &mut Calls, origin: Option<&str>, n: usize| -> bool {
            let id = format!("{}-{n}", origin.unwrap_or("program"));
            let call = record(origin, &id);
            if !c.admit_pause(&call) {
                return false;
            }
            c.open_call(call.clone());
            c.pause(format!("p{id}"), When::Before, Arc::new(call), cause(), 1.0);
            true
        };
        let evil = Some("http://evil.example");
        for n in 0..MAX_PAUSES_PER_ORIGIN {
            assert!(pause(&mut c, evil, n), "pause {n} is admitted");
        }
        assert!(!pause(&mut c, evil, 1000), "one more is not");
        // The same origin spelled otherwise is the same origin.
        assert!(!c.admit_pause(&record(Some("HTTP://EVIL.EXAMPLE/"), "x")));
        assert_eq!(c.pauses_limited(), 2);
        assert_eq!(c.pause_bursts.len(), 1, "one burst, logged once");
        // Another origin and programs still pause.
        assert!(pause(&mut c, Some("http://localhost:3000"), 0));
        for n in 0..MAX_PAUSES_PER_ORIGIN + 10 {
            assert!(pause(&mut c, None, n), "programs are not limited");
        }
        assert_eq!(c.paused().len(), 2 * MAX_PAUSES_PER_ORIGIN + 11);
        // A person resumes one of the page's pauses: one more may pause, then none again.
        c.resume(
            "phttp://evil.example-3",
            json!({"action": "continue"}),
            by(),
        )
        .unwrap();
        assert!(pause(&mut c, evil, 2000));
        assert!(c.pause_bursts.is_empty(), "the burst ended");
        assert!(!pause(&mut c, evil, 2001));
        // Its completion ends its pause too; an admitted pause counts until it is made or
        // given up (an after-pause is admitted before its record is written).
        c.complete("http://evil.example-4").unwrap();
        let after = record(evil, "after");
        assert!(c.admit_pause(&after));
        assert!(
            !c.admit_pause(&record(evil, "y")),
            "the admitted one holds the room"
        );
        c.cancel_pause("after");
        assert!(c.admit_pause(&after));
        c.pause("a".into(), When::After, Arc::new(after), cause(), 2.0);
        assert!(
            c.pause_reserved.is_empty(),
            "the pause took its reservation"
        );
        assert!(!c.admit_pause(&record(evil, "z")));
        let held = c
            .paused()
            .iter()
            .filter(|p| p.call.origin() == evil)
            .count();
        assert_eq!(held, MAX_PAUSES_PER_ORIGIN);
    }

    #[test]
    fn a_page_pauses_within_its_bytes_too() {
        let mut c = Calls::default();
        let page = Some("http://evil.example");
        // Calls that keep 10 MiB each (a long signature): six fit in the bytes, not seven.
        let heavy = |id: &str| {
            let mut r = CallRecord::for_tests("f", id);
            r.set_origin(page);
            r.signature = crate::intern::Val::Str(Sym::new(&"s".repeat(10 << 20)));
            r
        };
        let weight = heavy("w").weight();
        let fits = MAX_PAUSED_BYTES_PER_ORIGIN / weight;
        assert!(fits < MAX_PAUSES_PER_ORIGIN);
        for n in 0..fits {
            let call = heavy(&format!("c{n}"));
            assert!(c.admit_pause(&call), "{n}");
            c.pause(format!("p{n}"), When::After, Arc::new(call), cause(), 1.0);
        }
        assert!(!c.admit_pause(&heavy("more")));
        // A light call of the page still fits; a program's heavy one is not limited.
        let mut light = CallRecord::for_tests("f", "light");
        light.set_origin(page);
        assert!(c.admit_pause(&light));
        assert!(c.admit_pause(&CallRecord::for_tests("f", "program")));
        let mut program = heavy("program");
        program.notes = None;
        assert!(c.admit_pause(&program));
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
