//! The debug-client protocol's call reports (protocol doc §2.4, §2.5, §2.9): a wrapped call
//! starts (stored payloads verified, the call opened, paused before it runs when a breakpoint
//! says so), completes (recorded, persisted before the answer, paused after when a breakpoint
//! says so) or reports an event. Answers are the protocol's JSON, which only the client reads.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::gate::{self, Ending, Verdict};
use super::{
    node_pair, node_payload, pair, pretty_pair, py_float, py_int, str_field, timestamp,
    verify_and_store, Obj, EXCEPTION, RESULT,
};
use crate::breakpoints::{Gate, Options, Plan};
use crate::calls::{NotYours, PauseCause, ProcessClaim, When};
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::intern::{Sym, Val};
use crate::limits;
use crate::node::JsonNode;
use crate::pretty;
use crate::records::{
    CallId, CallRecord, CallSite, EventRecord, ExceptionInfo, Hint, HistoryEntry, Item, Process,
    Record,
};
use crate::resolution::{Action, Actor, Resolution};
use crate::state::{Shared, State};

/// The process identity of a request: pid and start time.
struct Identity {
    pid: i64,
    start_time: f64,
}

impl Identity {
    /// The derived `process_key`.
    fn key(&self) -> String {
        format!("{:.6}+{}", self.start_time, self.pid)
    }

    fn process(&self) -> Process {
        Process {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

fn identity(body: &Obj) -> Result<Identity, ApiError> {
    identity_of(body.get("process_pid"), body.get("process_start_time"))
}

fn identity_of(pid: Option<&Value>, start_time: Option<&Value>) -> Result<Identity, ApiError> {
    let pid = pid.and_then(py_int);
    let start_time = start_time.and_then(py_float).filter(|t| t.is_finite());
    match (pid, start_time) {
        (Some(pid), Some(start_time)) => Ok(Identity { pid, start_time }),
        _ => Err(ApiError::bad_request(
            "missing_process_identity",
            "process_pid (int) and process_start_time (float) are required",
        )),
    }
}

/// The answer that tells the client to poll a pause.
fn poll_action(shared: &Shared, pause_id: &str) -> Obj {
    let mut out = Map::new();
    out.insert("action".into(), json!("poll"));
    out.insert(
        "poll_interval_ms".into(),
        json!(shared.config.poll_interval_ms),
    );
    // Compat: the Python client joins poll_url onto its server URL by string concatenation.
    out.insert("poll_url".into(), json!(format!("/api/poll/{pause_id}")));
    out.insert("timeout_ms".into(), json!(shared.config.poll_timeout_ms));
    out
}

/// The items of a call start, in the order the original scans them for missing CIDs.
fn call_items<'a, 'b>(
    target: Option<&'b JsonNode<'a>>,
    args: &'b [JsonNode<'a>],
    kwargs: &'b [(Cow<'a, str>, JsonNode<'a>)],
) -> Vec<&'b JsonNode<'a>> {
    let mut items = Vec::with_capacity(1 + args.len() + kwargs.len());
    if let Some(t @ JsonNode::Obj(m)) = target {
        if !m.is_empty() {
            items.push(t);
        }
    }
    items.extend(args.iter());
    items.extend(kwargs.iter().map(|(_, v)| v));
    items
}

fn has_data(item: &JsonNode<'_>) -> bool {
    item.get("data").is_some_and(|d| !d.is_null())
}

/// The refusal of a request about a call or pause that another process or origin owns.
pub(crate) fn not_yours(what: &str, e: &NotYours) -> ApiError {
    let owner = match &e.owner_origin {
        Some(o) => format!("the page at {o}"),
        None => "a program (no browser origin)".to_owned(),
    };
    ApiError::new(
        403,
        "not_owner",
        format!(
            "this {what} belongs to {owner}: only requests from where it started may complete it, \
             poll it or answer its REPL, and process fields, where sent, must be its own"
        ),
    )
}

#[cfg(test)]
/// `POST /api/call/start` (protocol doc §2.5), for a request without a browser origin.
pub fn call_start(shared: &Shared, body: &JsonNode<'_>) -> Result<Value, ApiError> {
    call_start_from(shared, body, None)
}

/// `POST /api/call/start` (protocol doc §2.5), on the body as parsed by `JsonNode::parse` (the
/// hottest request: its items and call site are read without copying the body into a
/// `Value` first). `origin`: the page's `Origin`, which the call and its pauses carry (only
/// requests from that origin may complete or poll them).
pub fn call_start_from(
    shared: &Shared,
    body: &JsonNode<'_>,
    origin: Option<&str>,
) -> Result<Value, ApiError> {
    let fitted = super::fields::fit_node(body)?;
    let body = fitted.as_ref().unwrap_or(body);
    let scalar = |key: &str| body.get(key).map(JsonNode::to_value);
    let who = identity_of(
        scalar("process_pid").as_ref(),
        scalar("process_start_time").as_ref(),
    )?;
    let method_name = match body.get("method_name").and_then(JsonNode::as_str) {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_method_name",
                "method_name is required",
            ))
        }
    };
    let args: &[JsonNode<'_>] = match body.get("args") {
        None | Some(JsonNode::Null) => &[],
        Some(JsonNode::Arr(a)) => a,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "args must be a list of items",
            ))
        }
    };
    let kwargs: &[(Cow<'_, str>, JsonNode<'_>)] = match body.get("kwargs") {
        None | Some(JsonNode::Null) => &[],
        Some(JsonNode::Obj(k)) => k,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_payload",
                "kwargs must be an object of items",
            ))
        }
    };
    let target = body.get("target").filter(|t| !t.is_null());
    // Checked before anything is stored or a call id is used (the original checks it after).
    let preferred_format = match body.get("preferred_format") {
        None | Some(JsonNode::Null) => "dill",
        Some(JsonNode::Str(s)) if s == "dill" || s == "json" => s,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_preferred_format",
                format!("preferred_format must be 'dill' or 'json', got {other}"),
            ))
        }
    };

    let items = call_items(target, args, kwargs);
    // An item may omit data its twin in the same request carries (the client marks a CID sent
    // as soon as it serializes it), so CIDs with data in this request count as present.
    let provided: Vec<&str> = items
        .iter()
        .filter(|i| has_data(i))
        .filter_map(|i| i.get("cid")?.as_str())
        .collect();
    let mut missing: Vec<&str> = Vec::new();
    for item in &items {
        if let Some(cid) = item.get("cid").and_then(JsonNode::as_str) {
            if !has_data(item)
                && !provided.contains(&cid)
                && !missing.contains(&cid)
                && !shared.store.contains(cid)
            {
                missing.push(cid);
            }
        }
    }
    if !missing.is_empty() {
        // Compat: the only error the Python client survives on call/start; it resends once.
        return Err(ApiError::new(400, "cid_not_found", "Resend with full data")
            .with("missing_cids", json!(missing)));
    }
    // Only items that carry data have anything to verify or store (a body of a million bare
    // numbers needs no payload per number).
    let payloads: Vec<_> = items
        .iter()
        .filter(|i| has_data(i))
        .map(|i| node_payload(i))
        .collect();
    verify_and_store(shared, &payloads)?;

    let now = ids::now();
    let mut call = {
        let mut interner = shared.interner();
        let i = &mut *interner;
        let parsed_args: Box<[Item]> = args.iter().map(|x| Item::from_node(i, x)).collect();
        let parsed_kwargs: Box<[(Sym, Item)]> = kwargs
            .iter()
            .map(|(name, x)| (i.sym(name), Item::from_node(i, x)))
            .collect();
        let method = interner.sym(&method_name);
        CallRecord {
            target: target.map(|t| Item::from_node(&mut interner, t)),
            args: parsed_args,
            kwargs: parsed_kwargs,
            signature: interner.field(scalar("signature").as_ref()).or_null(),
            call_site: CallSite::from_node(&mut interner, body.get("call_site")),
            page_url: interner.field(scalar("page_url").as_ref()).or_null(),
            preferred_json: preferred_format == "json",
            ..CallRecord::started(CallId::Ours { at: now, n: 0 }, method, who.process(), now)
        }
    };

    // A gated breakpoint (condition, hit condition, log message) decides from the call's
    // values, decoded and evaluated here, outside the lock; a condition that reads the outcome
    // is decided at completion.
    let plan = shared.lock().breakpoints.plan(&method_name);
    let verdict = match &plan {
        Plan::Gated(o) if !o.reads_outcome() => {
            Some(gate::judge(shared, o, &call.args, &call.kwargs, None))
        }
        _ => None,
    };

    call.set_origin(origin);
    let mut st = shared.lock();
    call.call_id = st.calls.next_call_id(now);
    let call_id = call.call_id.to_string();
    // The program runs a replay for the server, in the REPL relay of one of its paused calls:
    // its calls run now without pausing (a pause would wait on the paused program itself),
    // and the first call of the replayed function is the replayed call.
    if let Some(active) = st.replays.get_mut(&call.process.key()) {
        if active.call_id.is_none() && active.function == method_name {
            active.call_id = Some(call_id.clone());
            call.set_replay_of(&active.source);
        }
        call.set_resolution(Resolution::new(Action::Continue, Actor::Replay, now));
        st.calls.open_gated(call, Gate::Missed);
        return Ok(json!({"call_id": call_id, "action": "continue"}));
    }
    let mut decision = decide_start(&mut st, &method_name, &plan, verdict.as_ref());
    limit_pause(&mut st, &mut decision, &call);
    if let Some(line) = decision.log {
        write_log(&mut st, &method_name, &call_id, &line, now);
        call.set_log(line);
    }
    if let Some(by) = decision.ran_by {
        call.set_resolution(Resolution::new(Action::Continue, by, now));
    }
    if let Some(pause) = decision.pause {
        call.paused_before = true;
        let shown = Arc::new(call.clone());
        st.calls.open_gated(call, Gate::Hit);
        let pause_id = ids::uuid4();
        st.calls
            .pause(pause_id.clone(), When::Before, shown, pause.clone(), now);
        st.emit(EventKind::ExecutionPaused {
            pause_id: pause_id.clone(),
            method_name: method_name.clone(),
            pause_reason: pause.reason.into(),
            paused_at: now,
        });
        if st.breakpoints.disarm_if_one_shot(&method_name) {
            st.emit(EventKind::BreakpointsChanged);
            drop(st);
            super::settings::write_current(shared);
        }
        let mut out = poll_action(shared, &pause_id);
        out.insert("call_id".into(), json!(call_id));
        return Ok(Value::Object(out));
    }
    // A call let run by the pause limit runs as is, as with no breakpoint; so does a call
    // whose breakpoint is switched off.
    let limited = decision.ran_by == Some(Actor::PauseLimit);
    let replacement = st
        .breakpoints
        .is_enabled(&method_name)
        .then(|| st.breakpoints.replacement(&method_name))
        .flatten()
        .filter(|_| !limited)
        .map(str::to_owned);
    if let Some(r) = &replacement {
        let mut done = Resolution::new(Action::Replace, Actor::Breakpoint, now);
        done.replacement = Some(Sym::new(r));
        call.set_resolution(done);
    }
    st.calls.open_gated(call, decision.gate);
    match replacement {
        Some(r) => Ok(json!({"call_id": call_id, "action": "replace", "function_name": r})),
        None => Ok(json!({"call_id": call_id, "action": "continue"})),
    }
}

/// What a breakpoint decided for one call.
struct Decision {
    /// Pause now (before the call, or after it at completion).
    pause: Option<PauseCause>,
    /// What the completion is to do (at the start).
    gate: Gate,
    /// The line a logpoint writes.
    log: Option<String>,
    /// Who let the call run without a pause, when its breakpoint decided so (a condition or
    /// hit condition that did not hold, a logpoint).
    ran_by: Option<Actor>,
}

impl Decision {
    fn run(gate: Gate) -> Decision {
        Decision {
            pause: None,
            gate,
            log: None,
            ran_by: None,
        }
    }

    /// Runs without a pause because `by` said so.
    fn let_run(by: Actor) -> Decision {
        Decision {
            ran_by: Some(by),
            ..Decision::run(Gate::Missed)
        }
    }
}

/// The decision of a gated breakpoint on a judged call: counts it when its condition holds,
/// logs a hit of a logpoint, and otherwise pauses a hit when `stops` (the behaviours say so).
/// A condition that cannot be decided pauses, saying why (a logpoint logs why instead).
fn decide_gated(
    st: &mut State,
    name: &str,
    options: &Options,
    verdict: &Verdict,
    stops: bool,
    hit_gate: Gate,
) -> Decision {
    let condition = options.condition.as_ref().map(|c| c.text.clone());
    match &verdict.holds {
        Err(why) if options.log_message.is_some() => Decision {
            log: Some(format!("<condition error: {why}>")),
            ..Decision::let_run(Actor::Logpoint)
        },
        Err(why) => Decision {
            pause: Some(PauseCause {
                reason: "condition_error",
                error: Some(why.clone()),
                hit_count: None,
                condition,
            }),
            ..Decision::run(Gate::Hit)
        },
        Ok(false) => Decision::let_run(Actor::Condition),
        Ok(true) => {
            let counted = st.breakpoints.count(name, options);
            if !counted.hit {
                Decision::let_run(Actor::Condition)
            } else if options.log_message.is_some() {
                Decision {
                    log: verdict.log.clone(),
                    ..Decision::let_run(Actor::Logpoint)
                }
            } else if stops {
                Decision {
                    pause: Some(PauseCause {
                        reason: "breakpoint",
                        error: None,
                        hit_count: Some(counted.count),
                        condition,
                    }),
                    ..Decision::run(hit_gate)
                }
            } else {
                Decision::run(hit_gate)
            }
        }
    }
}

/// A page's call runs instead of pausing when its origin holds `limits::MAX_PAUSES_PER_ORIGIN`
/// pauses or `MAX_PAUSED_BYTES_PER_ORIGIN` (a paused call waits for a person; a page may start
/// calls without end): its record
/// says so (`resolution` by `pause_limit`, unless a person already decided about the call).
/// An admitted pause is reserved for the call (see `Calls::admit_pause`).
fn limit_pause(st: &mut State, decision: &mut Decision, call: &CallRecord) {
    if decision.pause.is_some() && !st.calls.admit_pause(call) {
        decision.pause = None;
        decision.ran_by.get_or_insert(Actor::PauseLimit);
    }
}

/// The start's decision: pause before, or run with what the completion is to do.
fn decide_start(st: &mut State, name: &str, plan: &Plan, verdict: Option<&Verdict>) -> Decision {
    match (plan, verdict) {
        (Plan::NoBreakpoint, _) => Decision::run(Gate::Plain),
        (Plan::Plain, _) => Decision {
            pause: st
                .breakpoints
                .should_pause_before(name)
                .then(|| PauseCause::plain("breakpoint")),
            ..Decision::run(Gate::Plain)
        },
        (Plan::Gated(_), None) => Decision::run(Gate::Deferred),
        (Plan::Gated(o), Some(v)) => {
            let stops = st.breakpoints.should_pause_before(name);
            decide_gated(st, name, o, v, stops, Gate::Hit)
        }
    }
}

/// Writes a logpoint's line: kept for the web UI and told to every subscriber.
fn write_log(st: &mut State, name: &str, call_id: &str, message: &str, now: f64) {
    let line = st
        .logbook
        .push(limits::MAX_LOG_LINES, now, name, call_id, message);
    let kind = EventKind::Log {
        seq: line.seq,
        function_name: name.to_owned(),
        call_id: call_id.to_owned(),
        message: message.to_owned(),
        logged_at: now,
    };
    st.emit(kind);
}

/// The text form of the exception reported at completion (protocol doc §4.3).
fn text_exception(body: &Obj, exception_type: &str) -> Value {
    pretty::exception_text(
        exception_type,
        str_field(body, "exception_message").unwrap_or(""),
        body.get("exception_traceback"),
    )
}

/// What a completion shows as its exception: the decoded exception payload, or the text form
/// when there is no payload or it cannot be rendered.
fn shown_exception(shared: &Shared, body: &Obj) -> Value {
    let decoded = pretty_pair(shared, body, "exception");
    match (str_field(body, "exception_type"), decoded) {
        (Some(t), None) => text_exception(body, t),
        (Some(t), Some(d)) if pretty::is_placeholder(&d) || pretty::is_unrendered(&d) => {
            text_exception(body, t)
        }
        (_, Some(d)) => d,
        (None, None) => Value::Null,
    }
}

#[cfg(test)]
/// `POST /api/call/complete` (protocol doc §2.9), for a request without a browser origin.
pub fn call_complete(shared: &Shared, body: &JsonNode<'_>) -> Result<Value, ApiError> {
    call_complete_from(shared, body, None)
}

/// `POST /api/call/complete` (protocol doc §2.9) from `origin`: an open call is completed only
/// from the origin that started it (a program: no browser origin), by a request whose
/// `process_pid` and `process_start_time`, where sent, are the call's (`ProcessClaim`; REST
/// callers and the original's browser client omit them); anyone else gets 403 `not_owner`
/// and nothing changes.
pub fn call_complete_from(
    shared: &Shared,
    body: &JsonNode<'_>,
    origin: Option<&str>,
) -> Result<Value, ApiError> {
    let fitted = super::fields::fit_node(body)?;
    let body = fitted.as_ref().unwrap_or(body);
    let call_id = match body.get("call_id") {
        Some(JsonNode::Str(c)) if !c.is_empty() => c.to_string(),
        Some(JsonNode::Num(n)) => n.to_string(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_call_id",
                "call_id is required",
            ))
        }
    };
    let claim = |key: &str| {
        body.get(key)
            .filter(|v| !v.is_null())
            .map(JsonNode::to_value)
    };
    let who = ProcessClaim {
        pid: claim("process_pid").map(|v| py_int(&v)),
        start_time: claim("process_start_time").map(|v| py_float(&v).filter(|t| t.is_finite())),
    };
    let owned = |st: &State| {
        st.calls
            .check_call_owner(&call_id, origin, &who)
            .map_err(|e| not_yours("call", &e))
    };
    // Checked before anything is stored, and again when the call is taken.
    owned(&shared.lock())?;
    verify_and_store(
        shared,
        &[node_pair(body, RESULT), node_pair(body, EXCEPTION)],
    )?;

    let now = ids::now();
    let value = |key: &str| body.get(key).map(JsonNode::to_value);
    let completed_at = value("timestamp")
        .as_ref()
        .and_then(py_float)
        .filter(|t| t.is_finite())
        .unwrap_or(now);
    let status = body.get("status").and_then(JsonNode::as_str);
    let is_exception = body.get("exception_cid").is_some_and(|c| !c.is_null())
        || !matches!(status, None | Some("success"));
    let exception = match body.get("exception_type").and_then(JsonNode::as_str) {
        // Only a failed call carries these: read them as JSON then.
        None if body.get("exception_cid").is_none_or(JsonNode::is_null) => Value::Null,
        _ => {
            let Value::Object(fields) = body.to_value() else {
                return Err(ApiError::internal(
                    "a call/complete body that is not an object",
                ));
            };
            shown_exception(shared, &fields)
        }
    };

    let (status_val, result, exception_info) = {
        let mut interner = shared.interner();
        let mut field = |k: &str| interner.node_field(body.get(k)).or_null();
        let status_val = field("status");
        let result = (field("result_cid"), field("result_client_ref"));
        let info = ExceptionInfo {
            shown: Val::Null,
            cid: field("exception_cid"),
            client_ref: field("exception_client_ref"),
            exception_type: field("exception_type"),
            message: field("exception_message"),
            traceback: field("exception_traceback"),
        };
        let shown = interner.val(&exception);
        (status_val, result, ExceptionInfo { shown, ..info })
    };
    let result_format =
        Hint::parse(value("result_serialization_format").as_ref()).unwrap_or(Hint::Absent);
    let has_exception = !exception_info.is_null();

    // A call whose breakpoint reads its outcome is judged now, outside the lock.
    let deferred = {
        let st = shared.lock();
        st.calls.deferred(&call_id).map(|c| {
            let plan = st.breakpoints.plan(&c.method);
            (plan, c.args.clone(), c.kwargs.clone())
        })
    };
    let judged = match deferred {
        Some((Plan::Gated(options), args, kwargs)) => {
            let ending = Ending {
                result: body
                    .get("result_cid")
                    .and_then(JsonNode::as_str)
                    .map(|cid| (cid, result_format)),
                exception_type: is_exception.then(|| {
                    body.get("exception_type")
                        .and_then(JsonNode::as_str)
                        .unwrap_or("Exception")
                }),
            };
            let verdict = gate::judge(shared, &options, &args, &kwargs, Some(&ending));
            Some((options, verdict))
        }
        _ => None,
    };

    let mut st = shared.lock();
    owned(&st)?;
    let Some(done) = st.calls.complete(&call_id) else {
        // Compat: an unknown call id is fine and records nothing.
        return Ok(json!({"status": "ok"}));
    };
    if let Some(p) = &done.leftover {
        st.repl.close_pause(&p.id, now);
    }
    let mut call = done.call;
    let method_name = call.method.to_string();
    let mut decision = match (done.gate, &judged) {
        (Gate::Plain | Gate::Hit, _) => Decision {
            pause: st
                .breakpoints
                .should_pause_after(&method_name, is_exception)
                .then(|| {
                    PauseCause::plain(if is_exception {
                        "exception"
                    } else {
                        "breakpoint"
                    })
                }),
            ..Decision::run(Gate::Plain)
        },
        (Gate::Deferred, Some((options, verdict))) => {
            // Decided only now: the pause it asked for, before or after, comes after the call.
            let stops = st.breakpoints.should_pause_before(&method_name)
                || st
                    .breakpoints
                    .should_pause_after(&method_name, is_exception);
            let mut d = decide_gated(&mut st, &method_name, options, verdict, stops, Gate::Hit);
            if let Some(p) = &mut d.pause {
                if is_exception && p.reason == "breakpoint" {
                    p.reason = "exception";
                }
            }
            d
        }
        // Missed, or its breakpoint lost its options since the call started.
        (Gate::Missed | Gate::Deferred, _) => Decision::run(Gate::Missed),
    };
    if let Some(line) = &decision.log {
        write_log(&mut st, &method_name, &call_id, line, now);
        call.set_log(line.clone());
    }
    if let (Some(by), None) = (decision.ran_by, call.resolution()) {
        call.set_resolution(Resolution::new(Action::Continue, by, now));
    }
    call.status = status_val;
    call.completed_at = completed_at;
    call.done_at = now;
    (call.result_cid, call.result_client_ref) = result;
    call.result_format = result_format;
    call.exception = has_exception.then(|| Box::new(exception_info));
    call.repl_sessions = done
        .pause_id
        .as_deref()
        .map(|p| st.repl.sessions_of(p).iter().map(|s| Sym::new(s)).collect())
        .unwrap_or_default();
    // Admitted on the call as it will be kept (its after-pause shows this record).
    limit_pause(&mut st, &mut decision, &call);
    if decision.ran_by == Some(Actor::PauseLimit) && call.resolution().is_none() {
        call.set_resolution(Resolution::new(Action::Continue, Actor::PauseLimit, now));
    }
    let call = Arc::new(call);
    let history = st
        .breakpoints
        .contains(&method_name)
        .then(|| HistoryEntry::new(Sym::new(&ids::uuid4()), call.clone()));
    let event = EventKind::CallCompleted {
        call_id: call_id.clone(),
        method_name: method_name.clone(),
        status: call.status.as_str().unwrap_or("").to_owned(),
        process_key: Some(call.process.key()),
    };
    // Written before it is shown and before the reply: an acknowledged completion survives
    // a crash.
    let record = Record::Call(call.clone());
    match super::keep_record(shared, st, record.clone(), history, event) {
        Ok((seq, at)) => super::processes::note(shared, &record, seq, at),
        Err(e) => {
            if decision.pause.is_some() {
                // The after-pause admitted for this call will not be made.
                shared.lock().calls.cancel_pause(&call_id);
            }
            return Err(e);
        }
    }

    let Some(pause) = decision.pause else {
        return Ok(json!({"status": "ok"}));
    };
    let pause_id = ids::uuid4();
    let mut st = shared.lock();
    st.calls
        .pause(pause_id.clone(), When::After, call, pause.clone(), now);
    st.emit(EventKind::ExecutionPaused {
        pause_id: pause_id.clone(),
        method_name: method_name.clone(),
        pause_reason: pause.reason.into(),
        paused_at: now,
    });
    let disarmed = st.breakpoints.disarm_if_one_shot(&method_name);
    if disarmed {
        st.emit(EventKind::BreakpointsChanged);
    }
    drop(st);
    if disarmed {
        super::settings::write_current(shared);
    }
    // The after-pause answer carries no call_id (protocol doc §2.9).
    Ok(Value::Object(poll_action(shared, &pause_id)))
}

/// `POST /api/call/event` (protocol doc §2.4): diagnostics that become call records.
pub fn call_event(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    super::fields::check_obj(body)?;
    let who = identity(body)?;
    verify_and_store(shared, &[pair(body, "result"), pair(body, "exception")])?;
    let now = ids::now();
    let at = timestamp(body, "timestamp", now);
    let first_str = |keys: &[&str], default: &str| -> String {
        keys.iter()
            .find_map(|k| str_field(body, k).filter(|s| !s.is_empty()))
            .unwrap_or(default)
            .to_owned()
    };
    let call_id = match body.get("event_id").or_else(|| body.get("call_id")) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => ids::uuid4(),
    };
    let method_name = first_str(&["method_name", "event_type"], "event");
    let status = first_str(&["status", "event_type"], "event");
    // A decoded payload wins over the sanitized field, unless we could not render it.
    let pick = |prefix: &str, field: &str| -> Value {
        match pretty_pair(shared, body, prefix) {
            Some(v) if !pretty::is_unrendered(&v) => v,
            decoded => body
                .get(field)
                .cloned()
                .filter(|v| !v.is_null())
                .or(decoded)
                .unwrap_or(Value::Null),
        }
    };
    let pretty_result = pick("result", "pretty_result");
    let exception = pick("exception", "exception");
    let record = {
        let mut i = shared.interner();
        EventRecord {
            call_id: Val::Str(Sym::new(&call_id)),
            method: i.sym(&method_name),
            status: i.sym(&status),
            pretty_args: i.val(body.get("pretty_args").unwrap_or(&json!([]))),
            pretty_kwargs: i.val(body.get("pretty_kwargs").unwrap_or(&json!({}))),
            signature: i.field(body.get("signature")).or_null(),
            call_site: CallSite::parse(&mut i, body.get("call_site")),
            page_url: i.field(body.get("page_url")).or_null(),
            event_type: i.field(body.get("event_type")).or_null(),
            process: who.process(),
            at,
            result_cid: i.field(body.get("result_cid")).or_null(),
            exception_cid: i.field(body.get("exception_cid")).or_null(),
            pretty_result: i.val(&pretty_result),
            exception: i.val(&exception),
        }
    };
    let record = Record::Event(Arc::new(record));
    let mut st = shared.lock();
    if method_name == "with_debug.register" {
        if let Some(f) = body
            .get("pretty_result")
            .and_then(|r| r.get("function_name"))
            .and_then(Value::as_str)
            // Only for a registered function: an event must not grow the registry past its
            // bounds (`limits::MAX_FUNCTIONS_BYTES`).
            .filter(|f| st.functions.contains(f))
        {
            st.functions
                .set_metadata_key(f, "last_process_key", json!(who.key()));
            st.emit(EventKind::FunctionsChanged);
        }
    }
    let event = EventKind::CallCompleted {
        call_id,
        method_name,
        status,
        process_key: Some(who.key()),
    };
    let (seq, at) = super::keep_record(shared, st, record.clone(), None, event)?;
    super::processes::note(shared, &record, seq, at);
    Ok(json!({"status": "ok"}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakpoints::Global;
    use crate::records::RecordFilter;
    use crate::service::testing::{
        body, complete_body, item, paused_call, shared, start, start_body,
    };
    use crate::service::{call_records, set_global, Payloads};

    /// Persist first: when the completion is announced, its record is already in the
    /// database file (a subscriber reading it then finds it), and readers of the window saw
    /// nothing before.
    #[test]
    fn a_completion_is_announced_only_once_its_record_is_written() {
        let durable = crate::service::testing::Durable::new(100);
        let s = &durable.shared;
        let events = s.bus.subscribe();
        let (stored, shown) = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    let e = events
                        .recv_timeout(left)
                        .expect("a call_completed event in time");
                    if e.name() == "call_completed" {
                        let stored = s
                            .store
                            .index_page(crate::store::RecordKind::CallRecord, &|_| true, 0, 10)
                            .expect("the index reads")
                            .1;
                        let shown = s.lock().records.calls().count();
                        return (stored, shown);
                    }
                }
            });
            let answer = start(s, &start_body("add", &[json!(1), json!(2)])).unwrap();
            let call_id = answer["call_id"].as_str().unwrap().to_owned();
            crate::service::testing::complete(s, &complete_body(&call_id, &json!(3))).unwrap();
            watcher.join().unwrap()
        });
        assert_eq!((stored, shown), (1, 1), "written, then shown and announced");
    }

    #[test]
    fn a_call_without_a_breakpoint_continues_and_its_completion_is_recorded() {
        let s = shared();
        let answer = start(&s, &start_body("add", &[json!(1), json!(2)])).unwrap();
        assert_eq!(answer["action"], "continue");
        let call_id = answer["call_id"].as_str().unwrap().to_owned();
        assert_eq!(s.lock().calls.n_open(), 1);
        let done =
            crate::service::testing::complete(&s, &complete_body(&call_id, &json!(3))).unwrap();
        assert_eq!(done, json!({"status": "ok"}));
        let page = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!(page.total_count, 1);
        assert_eq!(page.call_ids(), [call_id]);
        let record = &page.calls[0];
        assert_eq!(record["method_name"], "add");
        assert_eq!(record["pretty_args"], json!(["1", "2"]));
        assert_eq!(record["pretty_result"], "3");
        assert_eq!(record["status"], "success");
    }

    #[test]
    fn a_breakpoint_pauses_before_and_after() {
        let s = shared();
        let (pause_id, call_id) = paused_call(&s, "f", &[json!("x")]);
        let paused = crate::service::paused(&s, Payloads::Omitted).paused;
        assert_eq!(paused.len(), 1);
        assert_eq!(paused[0].id, pause_id);
        assert_eq!(paused[0].call_data["call_id"], json!(call_id));
        assert!(!paused[0].is_after());
        crate::service::testing::resume(&s, &pause_id);
        // Global stop pauses after a successful call too: the answer is a poll without call_id.
        let after =
            crate::service::testing::complete(&s, &complete_body(&call_id, &json!(1))).unwrap();
        assert_eq!(after["action"], "poll");
        assert!(after.get("call_id").is_none());
        let paused = crate::service::paused(&s, Payloads::Included).paused;
        assert!(paused[0].is_after());
        assert_eq!(paused[0].call_data["pretty_result"], "1");
        assert_eq!(paused[0].call_data["pause_reason"], "breakpoint");
    }

    #[test]
    fn a_replacement_is_announced_when_the_call_does_not_pause() {
        let s = shared();
        set_global(&s, Global::Go).unwrap();
        crate::service::add_breakpoint(&s, "f", crate::service::Signature::Set(Some("(x)")), None)
            .unwrap();
        crate::service::function_register(
            &s,
            &body(json!({"function_name": "g", "signature": "(x)"})),
        )
        .unwrap();
        crate::service::set_replacement(&s, "f", "g")
            .unwrap()
            .unwrap();
        let answer = start(&s, &start_body("f", &[])).unwrap();
        assert_eq!(answer["action"], "replace");
        assert_eq!(answer["function_name"], "g");
    }

    #[test]
    fn missing_payloads_and_identities_are_refused_before_anything_is_stored() {
        let s = shared();
        let mut b = start_body("f", &[json!(5)]);
        let arg = item(&json!(5));
        b["args"] = json!([{"cid": arg["cid"]}]);
        let e = start(&s, &b).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "cid_not_found"));
        assert_eq!(e.body["missing_cids"], json!([arg["cid"]]));
        // The same CID with its data in the same request counts as present.
        b["kwargs"] = json!({"y": arg});
        assert_eq!(start(&s, &b).unwrap()["action"], "continue");
        let mut b = start_body("f", &[]);
        b.remove("process_pid");
        assert_eq!(
            start(&s, &b).unwrap_err().code(),
            "missing_process_identity"
        );
        let mut b = start_body("f", &[]);
        b.insert("preferred_format".into(), json!("yaml"));
        assert_eq!(
            start(&s, &b).unwrap_err().code(),
            "invalid_preferred_format"
        );
    }

    #[test]
    fn completions_report_exceptions_by_status_cid_or_type() {
        use crate::service::testing::complete;
        let s = shared();
        crate::service::breakpoint_add(&s, &body(json!({"function_name": "f"}))).unwrap();
        set_global(&s, Global::Exception).unwrap();
        let finish = |status: Value, extra: Value| {
            let call_id = start(&s, &start_body("f", &[])).unwrap()["call_id"]
                .as_str()
                .unwrap()
                .to_owned();
            let mut b = body(json!({"call_id": call_id, "status": status,
                "process_pid": 4242, "process_start_time": 1795311683.5}));
            if let Value::Object(m) = extra {
                b.extend(m);
            }
            let answer = complete(&s, &b).unwrap();
            let page = call_records(&s, &RecordFilter::default(), 0, 1);
            (answer, page.calls[0].clone())
        };
        // A status that is not a string is no exception; only the exact "success" is success.
        assert_eq!(finish(json!(5), json!({})).0, json!({"status": "ok"}));
        assert_eq!(
            finish(json!("success"), json!({})).0,
            json!({"status": "ok"})
        );
        let (answer, _) = finish(json!("error"), json!({}));
        assert_eq!(answer["action"], "poll");
        // A type without a payload shows the text form, with the message.
        let (answer, record) = finish(
            json!("exception"),
            json!({"exception_type": "ValueError", "exception_message": "bad x"}),
        );
        assert_eq!(answer["action"], "poll");
        assert_eq!(record["exception"]["type_name"], "ValueError");
        assert_eq!(record["exception"]["message"], "bad x");
    }

    #[test]
    fn a_payload_sent_again_is_checked_against_the_text_verified_before() {
        let s = shared();
        let b = start_body("f", &[json!(5)]);
        start(&s, &b).unwrap();
        assert_eq!(s.verified().len(), 1);
        // The same text again: accepted without a new blob.
        start(&s, &b).unwrap();
        assert_eq!(s.store.len(), 1);
        // Another text under the same CID is still refused, even though the CID is stored.
        let mut bad = b.clone();
        bad["args"][0]["data"] = item(&json!(6))["data"].clone();
        let e = start(&s, &bad).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "cid_mismatch"));
        // The same text under another format is verified as that format (and fails).
        let mut as_json = b.clone();
        as_json["args"][0]["serialization_format"] = json!("json");
        assert_eq!(start(&s, &as_json).unwrap_err().code(), "invalid_json");
        assert_eq!(s.store.len(), 1);
    }

    #[test]
    fn only_the_starting_process_and_origin_complete_a_call() {
        let s = shared();
        let page = Some("http://localhost:3000");
        let text = serde_json::to_string(&start_body("f", &[json!(1)])).unwrap();
        let answer = call_start_from(&s, &JsonNode::parse(text.as_bytes()).unwrap(), page).unwrap();
        let call_id = answer["call_id"].as_str().unwrap().to_owned();
        let try_complete = |b: &Obj, origin: Option<&str>| {
            let text = serde_json::to_string(b).unwrap();
            call_complete_from(&s, &JsonNode::parse(text.as_bytes()).unwrap(), origin)
        };
        let good = complete_body(&call_id, &json!(2));
        let e = try_complete(&good, None).unwrap_err();
        assert_eq!((e.status, e.code()), (403, "not_owner"));
        assert!(e.to_string().contains("http://localhost:3000"), "{e}");
        let e = try_complete(&good, Some("http://evil.example")).unwrap_err();
        assert_eq!(e.code(), "not_owner");
        let mut other_pid = good.clone();
        other_pid.insert("process_pid".into(), json!(4243));
        assert_eq!(
            try_complete(&other_pid, page).unwrap_err().code(),
            "not_owner"
        );
        let mut bad_start = good.clone();
        bad_start.remove("process_pid");
        bad_start.insert("process_start_time".into(), json!("yesterday"));
        assert_eq!(
            try_complete(&bad_start, page).unwrap_err().code(),
            "not_owner",
            "a field that is sent must be the call's"
        );
        let mut silent = good.clone();
        silent.remove("process_pid");
        silent.remove("process_start_time");
        assert_eq!(
            try_complete(&silent, None).unwrap_err().code(),
            "not_owner",
            "omitted fields do not make a program the page"
        );
        assert_eq!(s.lock().calls.n_open(), 1, "refusals change nothing");
        assert_eq!(
            call_records(&s, &RecordFilter::default(), 0, 10).total_count,
            0
        );
        // From the page that started it, omitted process fields claim nothing.
        assert_eq!(
            try_complete(&silent, page).unwrap(),
            json!({"status": "ok"})
        );
        let page_rec = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!(page_rec.calls[0]["origin"], "http://localhost:3000");
    }

    #[test]
    fn a_page_past_its_pause_limit_runs_and_its_record_says_why() {
        use crate::limits::MAX_PAUSES_PER_ORIGIN;
        let s = shared();
        crate::service::add_breakpoint(&s, "f", crate::service::Signature::Set(Some("(x)")), None)
            .unwrap();
        crate::service::function_register(
            &s,
            &body(json!({"function_name": "g", "signature": "(x)"})),
        )
        .unwrap();
        crate::service::set_replacement(&s, "f", "g")
            .unwrap()
            .unwrap();
        let page = Some("http://evil.example");
        let start_as = |origin: Option<&str>| {
            let text = serde_json::to_string(&start_body("f", &[json!(1)])).unwrap();
            call_start_from(&s, &JsonNode::parse(text.as_bytes()).unwrap(), origin).unwrap()
        };
        let complete_as = |call_id: &str, origin: Option<&str>| {
            let text = serde_json::to_string(&complete_body(call_id, &json!(2))).unwrap();
            call_complete_from(&s, &JsonNode::parse(text.as_bytes()).unwrap(), origin).unwrap()
        };
        let mut pauses = Vec::new();
        for _ in 0..MAX_PAUSES_PER_ORIGIN {
            let answer = start_as(page);
            assert_eq!(answer["action"], "poll", "{answer}");
            pauses.push(answer);
        }
        // One more: it runs as is (no replacement either), and its record says why.
        let answer = start_as(page);
        assert_eq!(answer["action"], "continue", "{answer}");
        let call_id = answer["call_id"].as_str().unwrap().to_owned();
        // Its completion would pause after it (global `stop`): still no room.
        assert_eq!(complete_as(&call_id, page), json!({"status": "ok"}));
        let records = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!(records.calls[0]["resolution"]["by"], "pause_limit");
        assert_eq!(records.calls[0]["resolution"]["action"], "continue");
        assert_eq!(s.lock().calls.pauses_limited(), 2);
        assert_eq!(crate::service::server_status(&s).pauses_limited, 2);
        // A program pauses still.
        assert_eq!(start_as(None)["action"], "poll");
        // A person resumes one of the page's pauses: its next call pauses again.
        let first = pauses[0]["poll_url"]
            .as_str()
            .unwrap()
            .trim_start_matches("/api/poll/")
            .to_owned();
        crate::service::testing::resume(&s, &first);
        let answer = start_as(page);
        assert_eq!(answer["action"], "poll", "{answer}");
        let page_paused = s
            .lock()
            .calls
            .paused()
            .iter()
            .filter(|p| p.call.origin() == page)
            .count();
        assert_eq!(page_paused, MAX_PAUSES_PER_ORIGIN);
        // The resumed call completes: its after-pause finds no room, and its record keeps
        // what the person decided.
        let resumed_call = pauses[0]["call_id"].as_str().unwrap().to_owned();
        assert_eq!(complete_as(&resumed_call, page), json!({"status": "ok"}));
        let records = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!(records.calls[0]["resolution"]["by"], "rest");
        assert_eq!(s.lock().calls.pauses_limited(), 3);
    }

    #[test]
    fn unknown_completions_are_fine_and_events_become_records() {
        let s = shared();
        assert_eq!(
            crate::service::testing::complete(&s, &body(json!({"call_id": "nope"}))).unwrap(),
            json!({"status": "ok"})
        );
        assert_eq!(
            crate::service::testing::complete(&s, &body(json!({})))
                .unwrap_err()
                .code(),
            "missing_call_id"
        );
        let event = body(json!({
            "event_type": "pickle_error", "process_pid": 1, "process_start_time": 2.5,
            "pretty_args": ["a"], "timestamp": 3.0,
        }));
        assert_eq!(call_event(&s, &event).unwrap(), json!({"status": "ok"}));
        let page = call_records(&s, &RecordFilter::default(), 0, 10);
        assert_eq!(page.calls[0]["method_name"], "pickle_error");
        assert_eq!(page.calls[0]["process_key"], "2.500000+1");
    }
}
