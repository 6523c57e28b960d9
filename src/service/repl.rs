//! REPL sessions on paused executions and the eval relay (protocol doc §2.7, §2.8): a person or
//! an agent queues an expression and waits (on its own channel, never on a lock) until the
//! paused program polls it, evaluates it and posts the result, the session closes, or the wait
//! times out.

use std::time::Duration;

use crossbeam_channel::{bounded, RecvTimeoutError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{pair, pretty_pair, str_field, verify_and_store, Ack, Done, Obj};
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::pretty;
use crate::repl::{EvalOutcome, ReplError, SessionFilter};
use crate::state::Shared;

/// A REPL session started.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ReplStarted {
    pub session_id: String,
}

/// What the paused program answered to an eval.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct EvalResult {
    /// The repr of the value, or the error text.
    pub output: String,
    /// What the evaluation printed.
    pub stdout: String,
    pub is_error: bool,
    /// The CID of the pickled value, as the client sent it (arbitrary JSON, usually a string).
    pub result_cid: Value,
}

impl EvalResult {
    /// The result as `repl` keeps and relays it.
    fn to_outcome(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn from_outcome(v: Value) -> Result<EvalResult, ApiError> {
        serde_json::from_value(v)
            .map_err(|e| ApiError::internal(format!("malformed eval result: {e}")))
    }
}

/// Starts a REPL session on a pause whose call reported its process.
pub fn start_session(shared: &Shared, pause_id: &str) -> Result<ReplStarted, ApiError> {
    start_session_asking(shared, pause_id, false)
}

/// Starts a REPL session on a pause; with `ask_scope`, the program of a Python pause is asked
/// at once which names its evaluations see (`dir()`, through the same relay: the session's
/// `scope`). A pause whose program stopped polling is refused at once (410 `program_gone`).
pub fn start_session_asking(
    shared: &Shared,
    pause_id: &str,
    ask_scope: bool,
) -> Result<ReplStarted, ApiError> {
    if let Some(silent) = super::gone_for(shared, pause_id) {
        return Err(super::program_gone(pause_id, silent));
    }
    let resumed = || {
        ApiError::conflict(
            "pause_resumed",
            format!("pause {pause_id} was already resumed"),
        )
    };
    if shared.lock().calls.has_action(pause_id) {
        return Err(resumed());
    }
    // Rendered before the lock; the pause is checked again under it.
    let Some(pause) = super::pause(shared, pause_id, super::Payloads::Included) else {
        return Err(ApiError::not_found(
            "pause_not_found",
            format!("no paused execution {pause_id}"),
        ));
    };
    let mut st = shared.lock();
    if st.calls.paused_by_id(pause_id).is_none() {
        return Err(resumed());
    }
    let pid = json!(pause.call.process.pid);
    let session_id = st.repl.start(pause_id, &pause.call_data, &pid, ids::now());
    // A web page's REPL (the browser client) evaluates JavaScript: `dir()` means nothing there.
    let python = pause.call.origin().is_none() && pause.call.page_url.as_str().is_none();
    if ask_scope && python {
        // The session was just made open: this cannot fail.
        let _ = st.repl.ask_scope(&session_id, ids::uuid4());
    }
    st.emit(EventKind::ReplSession {
        session_id: session_id.clone(),
        pause_id: pause_id.to_owned(),
        state: "started",
    });
    Ok(ReplStarted { session_id })
}

/// `POST /api/repl/start`.
pub fn repl_start(shared: &Shared, body: &Obj) -> Result<ReplStarted, ApiError> {
    match str_field(body, "pause_id") {
        Some(p) if !p.trim().is_empty() => {
            let ask = match body.get("scope") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(ApiError::bad_request(
                        "invalid_scope",
                        "scope must be true or false",
                    ))
                }
            };
            start_session_asking(shared, p, ask)
        }
        _ => Err(ApiError::bad_request(
            "missing_pause_id",
            "pause_id is required",
        )),
    }
}

/// The session to evaluate in at a pause: `session_id` when given (it must exist and belong to
/// that pause), else a new session.
pub fn session_for_pause(
    shared: &Shared,
    pause_id: &str,
    session_id: Option<&str>,
) -> Result<String, ApiError> {
    let Some(sid) = session_id else {
        return Ok(start_session(shared, pause_id)?.session_id);
    };
    let st = shared.lock();
    match st.repl.session(sid) {
        None => Err(session_not_found(sid)),
        Some(s) if s.pause_id != pause_id => Err(ApiError::bad_request(
            "invalid_session_id",
            format!(
                "session {sid} belongs to pause {}, not {pause_id}",
                s.pause_id
            ),
        )),
        Some(_) => Ok(sid.to_owned()),
    }
}

/// `GET /api/repl/sessions`.
pub fn repl_sessions(shared: &Shared, filter: &SessionFilter) -> Value {
    json!({"sessions": shared.lock().repl.list(filter)})
}

/// The sessions of the same program started before `session_id`, newest first, at most `n`:
/// each as `GET /api/repl/<sid>` shows it.
pub fn earlier_sessions(shared: &Shared, session_id: &str, n: usize) -> Vec<Value> {
    let st = shared.lock();
    st.repl
        .earlier_sessions(session_id, n)
        .into_iter()
        .map(crate::repl::Session::to_json)
        .collect()
}

/// `GET /api/repl/<sid>`.
pub fn repl_session(shared: &Shared, session_id: &str) -> Result<Value, ApiError> {
    match shared.lock().repl.session(session_id) {
        Some(s) => Ok(json!({"session": s.to_json()})),
        None => Err(session_not_found(session_id)),
    }
}

fn session_not_found(session_id: &str) -> ApiError {
    ApiError::not_found("session_not_found", format!("no REPL session {session_id}"))
}

fn session_closed(session_id: &str) -> ApiError {
    ApiError::conflict(
        "session_closed",
        format!("REPL session {session_id} is closed (its pause was resumed)"),
    )
}

/// A queued eval: wait on `outcome`, then hand what arrived to [`repl_eval_finish`].
#[derive(Debug)]
pub struct PendingEval {
    pub eval_id: String,
    pub session_id: String,
    /// The pause it runs in: a wait gives up early when its program stops polling.
    pub pause_id: String,
    pub outcome: crossbeam_channel::Receiver<EvalOutcome>,
}

/// Queues an expression for the paused program of a REPL session.
pub fn repl_eval_start(
    shared: &Shared,
    session_id: &str,
    expr: Option<&Value>,
) -> Result<PendingEval, ApiError> {
    let expr = match expr {
        Some(Value::String(e)) if !e.trim().is_empty() => e.as_str(),
        _ => {
            return Err(ApiError::bad_request(
                "missing_expr",
                "expr (a non-blank string) is required",
            ))
        }
    };
    let (tx, rx) = bounded(1);
    let eval_id = ids::uuid4();
    let mut st = shared.lock();
    if shared
        .shutting_down
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return Err(ApiError::new(
            503,
            "shutting_down",
            "the server is shutting down",
        ));
    }
    let pause_id = match st.repl.session(session_id) {
        None => return Err(session_not_found(session_id)),
        Some(s) if !s.is_open() => return Err(session_closed(session_id)),
        Some(s) => s.pause_id.clone(),
    };
    match st.calls.paused_by_id(&pause_id) {
        Some(p) if p.is_gone(ids::now(), super::gone_after_s(shared)) => {
            let silent = ids::now() - p.last_poll_at;
            return Err(super::program_gone(&pause_id, silent));
        }
        Some(_) => {}
        _ => {
            return Err(ApiError::bad_request(
                "invalid_pause",
                format!("pause {pause_id} is not paused"),
            ))
        }
    }
    match st.repl.enqueue(session_id, expr, eval_id.clone(), tx) {
        Ok(_) => {}
        Err(ReplError::SessionClosed) => return Err(session_closed(session_id)),
        Err(_) => return Err(session_not_found(session_id)),
    }
    Ok(PendingEval {
        eval_id,
        session_id: session_id.to_owned(),
        pause_id,
        outcome: rx,
    })
}

/// Turns what a waiting eval received (`None`: it gave up after `waited`) into the answer.
pub fn repl_eval_finish(
    shared: &Shared,
    pending: &PendingEval,
    received: Option<EvalOutcome>,
    waited: Duration,
) -> Result<EvalResult, ApiError> {
    match received {
        Some(EvalOutcome::Result(v)) => EvalResult::from_outcome(v),
        Some(EvalOutcome::Closed) => Err(session_closed(&pending.session_id)),
        None => {
            shared.lock().repl.expire(&pending.eval_id);
            // The result may have arrived between giving up and the expiry.
            if let Ok(EvalOutcome::Result(v)) = pending.outcome.try_recv() {
                return EvalResult::from_outcome(v);
            }
            Err(ApiError::new(
                504,
                "eval_timeout",
                format!(
                    "Debug client did not respond within {}s",
                    waited.as_secs_f64()
                ),
            ))
        }
    }
}

/// How often a waiting eval looks whether its program is still there.
pub const GONE_CHECK: Duration = Duration::from_millis(250);

/// Ends a waiting eval whose program stopped polling: `Some` (a result that arrived meanwhile,
/// or 410 `program_gone`, the eval forgotten) when it is gone, `None` while it polls.
pub fn repl_eval_if_gone(
    shared: &Shared,
    pending: &PendingEval,
) -> Option<Result<EvalResult, ApiError>> {
    let silent = super::gone_for(shared, &pending.pause_id)?;
    shared.lock().repl.expire(&pending.eval_id);
    if let Ok(EvalOutcome::Result(v)) = pending.outcome.try_recv() {
        return Some(EvalResult::from_outcome(v));
    }
    Some(Err(super::program_gone(&pending.pause_id, silent)))
}

/// Gives up a waiting eval (its requester went away or cancelled): it leaves the queue, and a
/// late result is answered `eval_not_found`.
pub fn repl_eval_abandon(shared: &Shared, pending: &PendingEval) {
    shared.lock().repl.expire(&pending.eval_id);
}

/// `POST /api/repl/<sid>/eval`: queues an expression for the paused program and waits up to
/// `timeout` for its answer, or until its program stops polling (410 `program_gone`).
pub fn repl_eval(
    shared: &Shared,
    session_id: &str,
    expr: Option<&Value>,
    timeout: Duration,
) -> Result<EvalResult, ApiError> {
    let pending = repl_eval_start(shared, session_id, expr)?;
    let deadline = std::time::Instant::now() + timeout;
    let received = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break None;
        }
        match pending.outcome.recv_timeout(left.min(GONE_CHECK)) {
            Ok(outcome) => break Some(outcome),
            Err(RecvTimeoutError::Timeout) => {
                if let Some(ended) = repl_eval_if_gone(shared, &pending) {
                    return ended;
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ApiError::new(
                    500,
                    "eval_missing",
                    "the eval was dropped before the debug client answered",
                ))
            }
        }
    };
    repl_eval_finish(shared, &pending, received, timeout)
}

/// `POST /api/repl/<sid>/close`.
pub fn repl_close(shared: &Shared, session_id: &str) -> Result<Done, ApiError> {
    let mut st = shared.lock();
    let pause_id = st.repl.session(session_id).map(|s| s.pause_id.clone());
    if st.repl.close(session_id, ids::now()) {
        st.emit(EventKind::ReplSession {
            session_id: session_id.to_owned(),
            pause_id: pause_id.unwrap_or_default(),
            state: "closed",
        });
        Ok(Done { status: Ack::Ok })
    } else {
        Err(session_not_found(session_id))
    }
}

#[cfg(test)]
/// `GET /api/poll-repl/<pause_id>`: the next queued eval, or `{"eval_id": null}` (always 200).
pub fn poll_repl(shared: &Shared, pause_id: &str) -> Value {
    poll_repl_from(shared, pause_id, None).unwrap_or_else(|e| e.to_json())
}

/// `GET /api/poll-repl/<pause_id>` from `origin`: the REPL requests of a pause go only to the
/// origin that owns it (403 `not_owner` otherwise, and the queue is left as it is).
pub fn poll_repl_from(
    shared: &Shared,
    pause_id: &str,
    origin: Option<&str>,
) -> Result<Value, ApiError> {
    let mut st = shared.lock();
    st.calls
        .check_pause_owner(pause_id, origin)
        .map_err(|e| super::calls::not_yours("pause", &e))?;
    Ok(match st.repl.next_request(pause_id) {
        Some(req) => req.to_json(),
        None => json!({"eval_id": null}),
    })
}

#[cfg(test)]
/// `POST /api/call/repl-result` (protocol doc §2.8), for a request without a browser origin.
pub fn repl_result(shared: &Shared, body: &Obj) -> Result<Done, ApiError> {
    repl_result_from(shared, body, None)
}

/// `POST /api/call/repl-result` (protocol doc §2.8) from `origin`: only the origin that owns
/// the session's pause may answer its evals (403 `not_owner`, nothing changes).
pub fn repl_result_from(
    shared: &Shared,
    body: &Obj,
    origin: Option<&str>,
) -> Result<Done, ApiError> {
    let fitted = super::fields::fit_repl(body)?;
    let body = fitted.as_ref().unwrap_or(body);
    let field = |k: &str| match body.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let (Some(eval_id), Some(session_id), Some(_pause_id)) =
        (field("eval_id"), field("session_id"), field("pause_id"))
    else {
        return Err(ApiError::bad_request(
            "missing_fields",
            "eval_id, session_id and pause_id are required",
        ));
    };
    let check = |st: &crate::state::State| match st.repl.check_delivery(&session_id, &eval_id) {
        Ok(()) => {
            let pause = st.repl.session(&session_id).map(|s| s.pause_id.as_str());
            st.calls
                .check_pause_owner(pause.unwrap_or(""), origin)
                .map_err(|e| super::calls::not_yours("pause", &e))
        }
        Err(ReplError::SessionNotFound) => Err(session_not_found(&session_id)),
        Err(ReplError::SessionClosed) => Err(session_closed(&session_id)),
        Err(ReplError::EvalNotFound) => Err(ApiError::not_found(
            "eval_not_found",
            format!("no pending eval {eval_id} (expired or answered)"),
        )),
    };
    check(&shared.lock())?;
    verify_and_store(shared, &[pair(body, "result")])?;

    let error = body.get("error").filter(|e| !e.is_null());
    let (output, is_error) = match error {
        Some(Value::String(s)) => (s.clone(), true),
        Some(other) => (other.to_string(), true),
        None => {
            let client_text = body
                .get("result")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let output = match (pretty_pair(shared, body, "result"), client_text) {
                // The client's own repr is exact; the stored pickle is not rendered here yet.
                (Some(v), Some(text)) if pretty::is_unrendered(&v) => text.to_owned(),
                (Some(Value::String(s)), _) => s,
                (Some(v), _) => v.to_string(),
                (None, _) => match body.get("result") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => "None".to_owned(),
                    Some(other) => other.to_string(),
                },
            };
            (output, false)
        }
    };
    let stdout = match body.get("stdout") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    let result = EvalResult {
        output,
        stdout,
        is_error,
        result_cid: body.get("result_cid").cloned().unwrap_or(Value::Null),
    };
    let mut st = shared.lock();
    check(&st)?;
    st.repl
        .deliver(&session_id, &eval_id, result.to_outcome(), ids::now())
        .map_err(|_| ApiError::internal("eval vanished"))?;
    st.emit(EventKind::ReplOutput {
        session_id,
        eval_id,
        is_error,
    });
    Ok(Done { status: Ack::Ok })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, paused_call, shared};

    fn answer(s: &Shared, pause_id: &str, fields: Value) -> Result<Done, ApiError> {
        let req = poll_repl(s, pause_id);
        let mut b = body(json!({
            "eval_id": req["eval_id"], "session_id": req["session_id"], "pause_id": pause_id,
        }));
        b.extend(body(fields));
        repl_result(s, &b)
    }

    #[test]
    fn an_eval_is_relayed_to_the_program_and_its_answer_is_typed() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[json!(1)]);
        let sid = session_for_pause(&s, &pause_id, None).unwrap();
        let pending = repl_eval_start(&s, &sid, Some(&json!("x + 1"))).unwrap();
        let req = poll_repl(&s, &pause_id);
        assert_eq!(req["expr"], "x + 1");
        assert_eq!(req["eval_id"], json!(pending.eval_id));
        let mut b = body(
            json!({"eval_id": pending.eval_id, "session_id": sid, "pause_id": pause_id,
            "result": "2", "stdout": "hi\n", "result_cid": null}),
        );
        assert_eq!(repl_result(&s, &b).unwrap().status, Ack::Ok);
        let got = pending.outcome.try_recv().ok();
        let r = repl_eval_finish(&s, &pending, got, Duration::from_secs(1)).unwrap();
        assert_eq!(
            r,
            EvalResult {
                output: "2".into(),
                stdout: "hi\n".into(),
                is_error: false,
                result_cid: Value::Null
            }
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"output":"2","stdout":"hi\n","is_error":false,"result_cid":null}"#
        );
        // Answered: a second delivery is refused.
        b.insert("result".into(), json!("3"));
        assert_eq!(repl_result(&s, &b).unwrap_err().code(), "eval_not_found");
        let session = repl_session(&s, &sid).unwrap();
        assert_eq!(session["session"]["transcript"][0]["output"], "2");
    }

    #[test]
    fn errors_from_the_program_are_results_with_is_error() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[]);
        let sid = start_session(&s, &pause_id).unwrap().session_id;
        let pending = repl_eval_start(&s, &sid, Some(&json!("boom"))).unwrap();
        answer(&s, &pause_id, json!({"error": "NameError: boom"})).unwrap();
        let r = repl_eval_finish(
            &s,
            &pending,
            pending.outcome.try_recv().ok(),
            Duration::ZERO,
        )
        .unwrap();
        assert!(r.is_error);
        assert_eq!(r.output, "NameError: boom");
        assert_eq!(r.stdout, "");
    }

    #[test]
    fn sessions_belong_to_their_pause() {
        let s = shared();
        let (p1, _) = paused_call(&s, "f", &[]);
        let (p2, _) = paused_call(&s, "g", &[]);
        let sid = repl_start(&s, &body(json!({"pause_id": p1})))
            .unwrap()
            .session_id;
        assert_eq!(session_for_pause(&s, &p1, Some(&sid)).unwrap(), sid);
        let e = session_for_pause(&s, &p2, Some(&sid)).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "invalid_session_id"));
        let e = session_for_pause(&s, &p1, Some("nope")).unwrap_err();
        assert_eq!((e.status, e.code()), (404, "session_not_found"));
        let e = start_session(&s, "nope").unwrap_err();
        assert_eq!(e.code(), "pause_not_found");
        let e = repl_start(&s, &body(json!({"pause_id": " "}))).unwrap_err();
        assert_eq!(e.code(), "missing_pause_id");
        let e = repl_eval_start(&s, &sid, Some(&json!("  "))).unwrap_err();
        assert_eq!(e.code(), "missing_expr");
    }

    #[test]
    fn timeouts_abandoned_evals_and_closed_sessions() {
        let s = shared();
        let (pause_id, _) = paused_call(&s, "f", &[]);
        let sid = start_session(&s, &pause_id).unwrap().session_id;
        let e = repl_eval(&s, &sid, Some(&json!("1")), Duration::from_millis(1)).unwrap_err();
        assert_eq!((e.status, e.code()), (504, "eval_timeout"));
        assert_eq!(poll_repl(&s, &pause_id), json!({"eval_id": null}));
        let pending = repl_eval_start(&s, &sid, Some(&json!("2"))).unwrap();
        repl_eval_abandon(&s, &pending);
        assert_eq!(
            poll_repl(&s, &pause_id),
            json!({"eval_id": null}),
            "an abandoned eval leaves the queue"
        );
        let pending = repl_eval_start(&s, &sid, Some(&json!("3"))).unwrap();
        assert_eq!(repl_close(&s, &sid).unwrap().status, Ack::Ok);
        let e = repl_eval_finish(
            &s,
            &pending,
            pending.outcome.try_recv().ok(),
            Duration::ZERO,
        )
        .unwrap_err();
        assert_eq!((e.status, e.code()), (409, "session_closed"));
        let e = repl_eval_start(&s, &sid, Some(&json!("4"))).unwrap_err();
        assert_eq!(e.code(), "session_closed");
        assert_eq!(repl_close(&s, "nope").unwrap_err().status, 404);
        let listed = repl_sessions(&s, &SessionFilter::default());
        assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    }
}
