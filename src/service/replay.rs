//! Replay: a recorded call is called again in a live program, never on the server. The server
//! writes a Python expression that calls the function with the recorded (or edited) arguments
//! as literals and sends it through the REPL relay of a paused call of that program (the
//! program evaluates it in a thread while its paused call keeps polling). While that
//! evaluation runs, every call the program starts runs without pausing, and the first call of
//! the replayed function is recorded with `replay_of` (see `service::calls`). The answer
//! compares the new record with the source, item by item, by CID.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::Obj;
use crate::error::ApiError;
use crate::ids;
use crate::limits::MAX_REPLAY_SEQUENCE;
use crate::pickle;
use crate::pretty::placeholder_key;
use crate::records::{is_client_event, ClientEvents};
use crate::replay::{self, Active};
use crate::state::Shared;
use crate::store::Format;

/// What differs between the source record and its replay.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Difference {
    /// `args[0]`, `kwargs.y`, `status`, `result`, `exception`.
    pub part: String,
    /// The source's value, as shown (rendered), or null when it had none.
    pub source: Value,
    /// The replay's value, as shown, or null.
    pub replay: Value,
}

/// One replayed call.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Replayed {
    /// The record replayed.
    pub source_id: String,
    pub function: String,
    /// The run (process key) that ran it, and the pause whose REPL relay carried it.
    pub run_id: String,
    pub pause_id: String,
    /// The expression the program evaluated.
    pub expression: String,
    /// The new call record (`replay_of` names the source).
    pub record_id: String,
    /// `success`, `exception`, or `running` when the evaluation ended before the call completed
    /// (the program's own REPL timeout).
    pub status: String,
    /// The new record's rendered result (`pretty_result`) and exception text.
    pub result: Value,
    pub exception: Value,
    /// What differs from the source: arguments, status, result, exception (by CID).
    pub differences: Vec<Difference>,
    /// No difference.
    pub same: bool,
    /// The new record, in its wire shape.
    pub record: Value,
}

/// What the body of a replay may give.
struct Edits<'a> {
    args: Option<&'a Vec<Value>>,
    kwargs: Option<&'a Map<String, Value>>,
    into_run: Option<&'a str>,
}

fn edits(body: &Obj) -> Result<Edits<'_>, ApiError> {
    let args = match body.get("args") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_args",
                "args must be a list (JSON values, or {\"cid\": ...} for a stored object)",
            ))
        }
    };
    let kwargs = match body.get("kwargs") {
        None | Some(Value::Null) => None,
        Some(Value::Object(k)) => Some(k),
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_kwargs",
                "kwargs must be an object (JSON values, or {\"cid\": ...} for a stored object)",
            ))
        }
    };
    let into_run = match body.get("into_run") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.as_str()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_into_run",
                "into_run must be a run id (a process key, \"<start time>+<pid>\")",
            ))
        }
    };
    Ok(Edits {
        args,
        kwargs,
        into_run,
    })
}

/// The literal of a stored object, read by the safe reader (JSON text or a pickle).
fn stored_literal(shared: &Shared, cid: &str) -> Result<String, String> {
    let blob = match shared.store.get(cid) {
        Ok(Some(b)) => b,
        Ok(None) => return Err(format!("no stored object {cid}")),
        Err(e) => return Err(format!("storage unavailable: {e}")),
    };
    let as_pickle = || match pickle::decode(&blob.bytes, &pickle::Limits::default()) {
        Ok(tree) => replay::from_pickle(&tree),
        Err(e) => Err(format!("the stored pickle does not decode: {e}")),
    };
    match blob.format {
        Some(Format::Json) => serde_json::from_slice::<Value>(&blob.bytes)
            .map_err(|_| "the stored JSON does not parse".to_owned())
            .and_then(|v| replay::from_json(&v)),
        Some(Format::Dill) => as_pickle(),
        None => match serde_json::from_slice::<Value>(&blob.bytes) {
            Ok(v) => replay::from_json(&v),
            Err(_) => as_pickle(),
        },
    }
}

/// The literal of one argument: a JSON value, or an object with a `cid` (a stored object, e.g.
/// the record's own item).
fn literal(shared: &Shared, v: &Value) -> Result<String, String> {
    match v.get("cid") {
        Some(Value::String(cid)) if v.is_object() => stored_literal(shared, cid),
        _ => replay::from_json(v),
    }
}

/// The arguments of the call to write, as `args` and `kwargs` literals.
fn arguments(shared: &Shared, source: &Value, e: &Edits) -> Result<Vec<String>, ApiError> {
    let empty_a = Vec::new();
    let empty_k = Map::new();
    let args = e
        .args
        .or_else(|| source.get("args").and_then(Value::as_array))
        .unwrap_or(&empty_a);
    let kwargs = e
        .kwargs
        .or_else(|| source.get("kwargs").and_then(Value::as_object))
        .unwrap_or(&empty_k);
    let mut out = Vec::with_capacity(args.len() + kwargs.len());
    for (i, a) in args.iter().enumerate() {
        let lit = literal(shared, a).map_err(|why| {
            ApiError::bad_request(
                "invalid_args",
                format!("args[{i}] cannot be written as a Python literal: {why}; give it as a JSON value"),
            )
            .with("argument", format!("args[{i}]"))
        })?;
        out.push(lit);
    }
    for (k, v) in kwargs {
        if !replay::is_identifier(k) {
            return Err(ApiError::bad_request(
                "invalid_kwargs",
                format!("kwargs.{k}: a keyword argument's name must be a Python identifier"),
            )
            .with("argument", format!("kwargs.{k}")));
        }
        let lit = literal(shared, v).map_err(|why| {
            ApiError::bad_request(
                "invalid_kwargs",
                format!("kwargs.{k} cannot be written as a Python literal: {why}; give it as a JSON value"),
            )
            .with("argument", format!("kwargs.{k}"))
        })?;
        out.push(format!("{k}={lit}"));
    }
    Ok(out)
}

/// A paused call to replay through: `(pause_id, run_id, its function)`. Live (polling, not
/// resumed) pauses of Python programs only (a web page evaluates JavaScript); a pause of the
/// same run and the same function first, then of the same run, then (no `into_run` given) of
/// the function in another run, then of another run that recorded calls of the function.
fn choose_pause(
    shared: &Shared,
    function: &str,
    run: &str,
    run_given: bool,
) -> Option<(String, String, String)> {
    let gone_after = super::gone_after_s(shared);
    let now = ids::now();
    let live: Vec<(String, String, String)> = {
        let st = shared.lock();
        st.calls
            .paused()
            .iter()
            .filter(|p| !p.is_gone(now, gone_after) && !st.calls.has_action(&p.id))
            .filter(|p| p.call.origin().is_none() && p.call.page_url.as_str().is_none())
            .map(|p| {
                (
                    p.id.clone(),
                    p.call.process.key(),
                    p.method_name().to_owned(),
                )
            })
            .collect()
    };
    let pick = |ok: &dyn Fn(&(String, String, String)) -> bool| live.iter().find(|p| ok(p));
    let found = pick(&|p| p.1 == run && p.2 == function)
        .or_else(|| pick(&|p| p.1 == run))
        .or_else(|| (!run_given).then(|| pick(&|p| p.2 == function)).flatten());
    if found.is_some() || run_given {
        return found.cloned();
    }
    // Another live program that recorded calls of the function has it registered.
    live.iter()
        .find(|p| {
            let filter = super::record_filter(
                |k| match k {
                    "process" => Some(p.1.as_str()),
                    "function" => Some(function),
                    "source" => Some("program"),
                    _ => None,
                },
                ClientEvents::Hide,
            );
            filter.is_ok_and(|f| super::call_records(shared, &f, 0, 1).total_count > 0)
        })
        .cloned()
}

/// The expression that calls `function` with `literals` from a pause of `paused_fn`. In a
/// pause of the same function it goes through `self`, the client's proxy: called itself for a
/// wrapped function, its attribute `name` for a method of a wrapped object.
/// From a pause of another function, the REPL evaluates in the client's proxy frame, where the
/// program's names are not seen: the function is found in the client's function registry
/// (`cideldill_client.function_registry`, where `with_debug` registers every wrapped
/// function by name) and called through `cideldill_client.debug_call` under its recorded
/// name, so that the call is reported and recorded like the wrapped one.
pub fn replay_expression(function: &str, paused_fn: &str, literals: &[String]) -> String {
    if paused_fn == function {
        // In the client's wrapper frame `self` is the proxy and `method` what it wraps: for a
        // wrapped function the proxy itself is called, for a method of a wrapped object the
        // proxy's attribute `name` (both report the call under the paused name).
        return format!(
            "(self if method is object.__getattribute__(self, \"_target\") else \
             getattr(self, name))({})",
            literals.join(", ")
        );
    }
    let name = replay::py_str(function);
    let mut parts = vec![
        name.clone(),
        format!(
            "__import__(\"cideldill_client.function_registry\", fromlist=[\"get_function\"])\
             .get_function({name})"
        ),
    ];
    parts.extend(literals.iter().cloned());
    format!(
        "__import__(\"cideldill_client\").debug_call({})",
        parts.join(", ")
    )
}

/// Removes the replay's mark when the replay ends, however it ends.
struct Mark<'a> {
    shared: &'a Shared,
    run: String,
}

impl Drop for Mark<'_> {
    fn drop(&mut self) {
        self.shared.lock().replays.remove(&self.run);
    }
}

fn no_program(function: &str, run: &str, run_given: bool) -> ApiError {
    let elsewhere = if run_given {
        ""
    } else {
        ", nor a program of another run that recorded calls of it"
    };
    ApiError::conflict(
        "no_live_program",
        format!(
            "no live program of run {run} is paused{elsewhere}, so nothing can run {function}: \
             pause a call of that program (any call: e.g. with a breakpoint on {function}) while \
             it runs, then replay"
        ),
    )
}

/// `POST /api/call-records/<record_id>/replay`: calls the record's function again in a live
/// program, with the recorded arguments or those the body gives (`args`, `kwargs`: JSON values,
/// or `{"cid"}` of a stored object), through a paused call of the record's run (or of the
/// run `into_run`); waits up to `timeout` for the program.
pub fn replay_call(
    shared: &Shared,
    record_id: &str,
    body: &Obj,
    timeout: Duration,
) -> Result<Replayed, ApiError> {
    let started = replay_start(shared, record_id, body)?;
    let deadline = std::time::Instant::now() + timeout;
    let received = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break None;
        }
        match started
            .pending
            .outcome
            .recv_timeout(left.min(super::GONE_CHECK))
        {
            Ok(outcome) => break Some(outcome),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if let Some(ended) = super::repl_eval_if_gone(shared, &started.pending) {
                    return replay_finish(shared, started, ended);
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break None,
        }
    };
    let evaluated = super::repl_eval_finish(shared, &started.pending, received, timeout);
    replay_finish(shared, started, evaluated)
}

/// A replay sent to its program: wait on `pending.outcome`, then hand what arrived to
/// [`replay_finish`] (or [`replay_abandon`] it). While it lives, the program's calls run
/// without pausing.
pub struct ReplayStarted<'a> {
    pub pending: super::PendingEval,
    mark: Mark<'a>,
    source: Value,
    source_id: String,
    function: String,
    pause_id: String,
    expression: String,
}

/// Gives up a replay (its requester cancelled): the evaluation leaves the queue, the session
/// closes, and the program's calls pause again as their breakpoints say.
pub fn replay_abandon(shared: &Shared, started: ReplayStarted) {
    super::repl_eval_abandon(shared, &started.pending);
    let _ = super::repl_close(shared, &started.pending.session_id);
}

/// Checks a replay and sends it to a live paused call of its program (see [`replay_call`]).
pub fn replay_start<'a>(
    shared: &'a Shared,
    record_id: &str,
    body: &Obj,
) -> Result<ReplayStarted<'a>, ApiError> {
    let e = edits(body)?;
    let Some(source) = super::find_record(shared, record_id) else {
        return Err(ApiError::not_found(
            "record_not_found",
            format!("no call record {record_id}"),
        ));
    };
    let function = source
        .get("method_name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let source_run = source
        .get("process_key")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if function.is_empty() || is_client_event(&function) || source.get("args").is_none() {
        return Err(ApiError::bad_request(
            "not_replayable",
            format!("record {record_id} is not a call of a function of the program"),
        ));
    }
    // A web page's call runs as JavaScript, and only Python programs evaluate a replay: its
    // record never becomes a call in a program.
    let from_page = ["origin", "page_url"]
        .iter()
        .any(|k| source.get(*k).is_some_and(|v| !v.is_null()));
    if from_page {
        return Err(ApiError::bad_request(
            "not_replayable",
            format!(
                "record {record_id} is a web page's call: only calls of Python programs can be replayed"
            ),
        ));
    }
    let literals = arguments(shared, &source, &e)?;
    let run = e.into_run.unwrap_or(&source_run).to_owned();
    let Some((pause_id, run_id, paused_fn)) =
        choose_pause(shared, &function, &run, e.into_run.is_some())
    else {
        return Err(no_program(&function, &run, e.into_run.is_some()));
    };
    let expression = replay_expression(&function, &paused_fn, &literals);
    {
        let mut st = shared.lock();
        if st.replays.contains_key(&run_id) {
            return Err(ApiError::conflict(
                "replay_running",
                format!("run {run_id} is already running a replay; wait for it to end"),
            ));
        }
        st.replays.insert(
            run_id.clone(),
            Active {
                function: function.clone(),
                source: record_id.to_owned(),
                call_id: None,
            },
        );
    }
    let mark = Mark {
        shared,
        run: run_id.clone(),
    };
    let session = super::start_session(shared, &pause_id)?.session_id;
    let pending = match super::repl_eval_start(shared, &session, Some(&json!(expression))) {
        Ok(p) => p,
        Err(err) => {
            let _ = super::repl_close(shared, &session);
            return Err(err);
        }
    };
    Ok(ReplayStarted {
        pending,
        mark,
        source,
        source_id: record_id.to_owned(),
        function,
        pause_id,
        expression,
    })
}

/// The answer of a replay whose evaluation ended (`evaluated`: as `repl_eval_finish` gives it).
pub fn replay_finish(
    shared: &Shared,
    started: ReplayStarted,
    evaluated: Result<super::EvalResult, ApiError>,
) -> Result<Replayed, ApiError> {
    let ReplayStarted {
        pending,
        mark,
        source,
        source_id,
        function,
        pause_id,
        expression,
    } = started;
    let _ = super::repl_close(shared, &pending.session_id);
    let run_id = mark.run.clone();
    let started = shared
        .lock()
        .replays
        .get(&run_id)
        .and_then(|a| a.call_id.clone());
    drop(mark);
    let evaluated = evaluated?;
    let Some(record_id_new) = started else {
        return Err(ApiError::conflict(
            "replay_not_run",
            format!(
                "the program did not call {function} (it answered: {}). From a pause of another \
                 function, the program reaches {function} only through the client's function \
                 registry (functions wrapped with with_debug or called with debug_call); a \
                 method of a wrapped object is reached only from a pause of that method: pause \
                 a call of {function} itself, e.g. with a breakpoint on it, then replay",
                evaluated.output
            ),
        ));
    };
    let record = super::find_record(shared, &record_id_new);
    let record = record.unwrap_or_else(|| json!({"call_id": record_id_new, "status": null}));
    let status = match record.get("status").and_then(Value::as_str) {
        Some(s) => s.to_owned(),
        None => "running".to_owned(),
    };
    let differences = compare(&source, &record);
    Ok(Replayed {
        source_id,
        function,
        run_id,
        pause_id,
        expression,
        record_id: record_id_new,
        status,
        result: record.get("pretty_result").cloned().unwrap_or(Value::Null),
        exception: record.get("exception").cloned().unwrap_or(Value::Null),
        same: differences.is_empty(),
        differences,
        record,
    })
}

/// What differs between two call records (wire shapes): each argument and keyword argument by
/// CID, the status, the result by CID, the exception by type and message.
pub fn compare(a: &Value, b: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    let cid = |v: Option<&Value>| v.and_then(|i| i.get("cid")).cloned();
    // Two placeholders (objects the client could not pickle) alike but for their addresses
    // are the same (`pretty::placeholder_key`).
    let alike = |x: Option<&Value>, y: Option<&Value>| {
        let key = |v: Option<&Value>| v.and_then(placeholder_key);
        key(x).is_some() && key(x) == key(y)
    };
    let empty = Vec::new();
    let (aa, ba) = (
        a.get("args").and_then(Value::as_array).unwrap_or(&empty),
        b.get("args").and_then(Value::as_array).unwrap_or(&empty),
    );
    for i in 0..aa.len().max(ba.len()) {
        let shown = |r: &Value| r.pointer(&format!("/pretty_args/{i}")).cloned();
        if cid(aa.get(i)) != cid(ba.get(i)) && !alike(shown(a).as_ref(), shown(b).as_ref()) {
            let at = |r: &Value| {
                r.pointer(&format!("/pretty_args/{i}"))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            out.push(Difference {
                part: format!("args[{i}]"),
                source: at(a),
                replay: at(b),
            });
        }
    }
    let empty_k = Map::new();
    let (ak, bk) = (
        a.get("kwargs")
            .and_then(Value::as_object)
            .unwrap_or(&empty_k),
        b.get("kwargs")
            .and_then(Value::as_object)
            .unwrap_or(&empty_k),
    );
    let mut names: Vec<&String> = ak.keys().chain(bk.keys()).collect();
    names.sort();
    names.dedup();
    for k in names {
        let shown = |r: &Value| r.get("pretty_kwargs").and_then(|p| p.get(k)).cloned();
        if cid(ak.get(k)) != cid(bk.get(k)) && !alike(shown(a).as_ref(), shown(b).as_ref()) {
            let at = |r: &Value| {
                r.get("pretty_kwargs")
                    .and_then(|p| p.get(k))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            out.push(Difference {
                part: format!("kwargs.{k}"),
                source: at(a),
                replay: at(b),
            });
        }
    }
    let field = |r: &Value, k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    if field(a, "status") != field(b, "status") {
        out.push(Difference {
            part: "status".into(),
            source: field(a, "status"),
            replay: field(b, "status"),
        });
    }
    if field(a, "result_cid") != field(b, "result_cid")
        && !alike(a.get("pretty_result"), b.get("pretty_result"))
    {
        out.push(Difference {
            part: "result".into(),
            source: field(a, "pretty_result"),
            replay: field(b, "pretty_result"),
        });
    }
    let exc = |r: &Value| (field(r, "exception_type"), field(r, "exception_message"));
    if exc(a) != exc(b) {
        out.push(Difference {
            part: "exception".into(),
            source: field(a, "exception"),
            replay: field(b, "exception"),
        });
    }
    out
}

/// One step of a replay sequence, in brief.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Step {
    pub source_id: String,
    pub record_id: String,
    /// The function called.
    pub function: String,
    pub same: bool,
}

/// A replay sequence: the calls replayed in order up to the first divergence.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ReplayedRun {
    /// This report's id: the web UI shows it at `/runs/replayed/<report_id>` while it is among
    /// the newest (`limits::MAX_REPLAY_REPORTS`).
    pub report_id: String,
    pub run_id: String,
    /// The run the calls were replayed in (`into_run`, or the run itself).
    pub into_run: String,
    /// The calls replayed the same, in order (the diverging one last, when one diverged).
    pub replayed: Vec<Step>,
    /// Every selected call was replayed and none diverged.
    pub completed: bool,
    /// The first call whose replay differs from its source, in full.
    pub divergence: Option<Replayed>,
    /// The replay that could not run (the call, its error code and message): the sequence
    /// stopped there.
    pub stopped: Option<Value>,
    /// The run had more calls than one sequence replays (`limits::MAX_REPLAY_SEQUENCE`).
    pub truncated: bool,
}

/// The run's calls to replay, oldest first: program calls, not client events, not replays.
fn run_calls(shared: &Shared, run_id: &str) -> (Vec<String>, bool) {
    let filter = match super::record_filter(
        |k| match k {
            "process" => Some(run_id),
            "source" => Some("program"),
            _ => None,
        },
        ClientEvents::Hide,
    ) {
        Ok(f) => f,
        Err(_) => return (Vec::new(), false),
    };
    let total = super::call_records(shared, &filter, 0, 1).total_count;
    let window = 1_000;
    let page = super::call_records(shared, &filter, total.saturating_sub(window), window);
    let mut ids: Vec<String> = page
        .calls
        .iter()
        .rev()
        .filter(|c| c.get("replay_of").is_none() && c.get("args").is_some())
        .filter_map(|c| c.get("call_id")?.as_str().map(str::to_owned))
        .collect();
    let truncated = ids.len() > MAX_REPLAY_SEQUENCE || total > window;
    ids.truncate(MAX_REPLAY_SEQUENCE);
    (ids, truncated)
}

/// `POST /api/runs/<run_id>/replay`: replays the run's calls (or those `call_ids` names) in
/// order with their recorded arguments, into a live program of the run (or of `into_run`), and
/// stops at the first divergence or at the first call that cannot be replayed.
pub fn replay_run(
    shared: &Shared,
    run_id: &str,
    body: &Obj,
    timeout: Duration,
) -> Result<ReplayedRun, ApiError> {
    replay_run_with(shared, run_id, body, |id, into| {
        Ok(replay_call(shared, id, into, timeout))
    })
}

/// A replay sequence whose calls `one` replays (the record id, and the body to replay it
/// with): `Ok(Ok(..))` a replayed call, `Ok(Err(..))` a call that could not be replayed (the
/// sequence stops there and reports it), `Err(..)` ends the whole sequence with that error
/// (e.g. its request was cancelled).
pub fn replay_run_with(
    shared: &Shared,
    run_id: &str,
    body: &Obj,
    mut one: impl FnMut(&str, &Obj) -> Result<Result<Replayed, ApiError>, ApiError>,
) -> Result<ReplayedRun, ApiError> {
    let e = edits(body)?;
    if e.args.is_some() || e.kwargs.is_some() {
        return Err(ApiError::bad_request(
            "invalid_args",
            "a replay sequence replays recorded arguments: args and kwargs are not taken here",
        ));
    }
    let (ids, truncated) = match body.get("call_ids") {
        None | Some(Value::Null) => run_calls(shared, run_id),
        Some(Value::Array(a)) => {
            if a.len() > MAX_REPLAY_SEQUENCE {
                return Err(ApiError::bad_request(
                    "too_many_calls",
                    format!(
                        "call_ids names {} calls, at most {MAX_REPLAY_SEQUENCE}",
                        a.len()
                    ),
                ));
            }
            let ids: Option<Vec<String>> =
                a.iter().map(|v| v.as_str().map(str::to_owned)).collect();
            match ids {
                Some(ids) if !ids.is_empty() => (ids, false),
                _ => {
                    return Err(ApiError::bad_request(
                        "invalid_call_ids",
                        "call_ids must be a non-empty list of call record ids",
                    ))
                }
            }
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_call_ids",
                "call_ids must be a non-empty list of call record ids",
            ))
        }
    };
    if ids.is_empty() {
        return Err(ApiError::not_found(
            "run_not_found",
            format!("run {run_id} has no recorded calls to replay"),
        ));
    }
    let into_run = e.into_run.unwrap_or(run_id).to_owned();
    let mut into = Obj::new();
    into.insert("into_run".into(), json!(into_run));
    let mut out = ReplayedRun {
        report_id: ids::uuid4(),
        run_id: run_id.to_owned(),
        into_run,
        replayed: Vec::new(),
        completed: false,
        divergence: None,
        stopped: None,
        truncated,
    };
    let n = ids.len();
    for id in ids {
        match one(&id, &into)? {
            Ok(r) => {
                out.replayed.push(Step {
                    source_id: id,
                    record_id: r.record_id.clone(),
                    function: r.function.clone(),
                    same: r.same,
                });
                if !r.same {
                    out.divergence = Some(r);
                    break;
                }
            }
            Err(err) => {
                out.stopped = Some(json!({
                    "source_id": id,
                    "error": err.body.get("error"),
                    "message": err.body.get("message"),
                }));
                break;
            }
        }
    }
    out.completed = out.divergence.is_none() && out.stopped.is_none() && out.replayed.len() == n;
    if let Ok(kept) = serde_json::to_value(&out) {
        shared
            .lock()
            .replay_reports
            .keep(out.report_id.clone(), kept);
    }
    Ok(out)
}

/// A kept replay sequence report (`None` when unknown or forgotten).
pub fn replay_report(shared: &Shared, report_id: &str) -> Option<ReplayedRun> {
    let kept = shared.lock().replay_reports.get(report_id)?;
    serde_json::from_value(kept).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_alike_but_for_their_addresses_are_no_difference() {
        let ph = |id: &str| json!({"__cideldill_placeholder__": true, "object_id": id, "repr_text": format!("<C at {id}>")});
        let rec = |cid: &str, id: &str, arg: i64| {
            json!({"args": [{"cid": format!("c{arg}")}], "pretty_args": [arg.to_string()],
                   "status": "success", "result_cid": cid, "pretty_result": ph(id)})
        };
        assert_eq!(
            compare(
                &rec("a", "0x7f0000000001", 1),
                &rec("b", "0x7f0000000002", 1)
            ),
            vec![]
        );
        // A plain value that differs still does.
        let d = compare(
            &rec("a", "0x7f0000000001", 1),
            &rec("b", "0x7f0000000002", 2),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].part, "args[0]");
    }

    #[test]
    fn the_same_function_is_called_as_self_another_through_the_client_registry() {
        let lits = vec!["2".to_owned(), "y=3".to_owned()];
        assert_eq!(
            replay_expression("add", "add", &lits),
            "(self if method is object.__getattribute__(self, \"_target\") else \
             getattr(self, name))(2, y=3)"
        );
        assert_eq!(
            replay_expression("add", "divide", &lits),
            "__import__(\"cideldill_client\").debug_call(\"add\", \
             __import__(\"cideldill_client.function_registry\", fromlist=[\"get_function\"])\
             .get_function(\"add\"), 2, y=3)"
        );
        // Any recorded name is written as a string literal, never as code.
        let odd = replay_expression("a\"b).x", "divide", &[]);
        assert!(odd.contains(r#"debug_call("a\"b).x", "#), "{odd}");
        assert!(odd.ends_with(r#".get_function("a\"b).x"))"#), "{odd}");
    }
}
