//! Breakpoints with their before/after behaviors and replacements, the global default
//! behavior, and the function registry. Each change is one critical section that emits one
//! `BreakpointsChanged` (or `FunctionsChanged`) event. The typed operations (`add_breakpoint`,
//! `set_before`, ...) serve every face; the `breakpoint_*` functions parse REST bodies. With a
//! database, every change of the breakpoint settings is written before it returns
//! (`settings::persisted`; the function registry and hit counts are not kept).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::settings::persisted;
use super::{quote_list, read_stored, store_blobs, str_field, Ack, Obj};
use crate::breakpoints::{
    After, Before, Breakpoints, Condition, Global, HitCondition, LogLine, LogMessage, Options,
    ReplacementError,
};
use crate::cas;
use crate::condition::ParseError;
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::intern::Interner;
use crate::limits;
use crate::pretty;
use crate::records::{self, HistoryEntry};
use crate::state::Shared;
use crate::store::RecordKind;

/// `GET /api/breakpoints`: names sorted; every breakpoint has a before- and an after-behavior
/// (`yield` when it has none of its own).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct BreakpointListing {
    pub breakpoints: Vec<String>,
    pub breakpoint_behaviors: BTreeMap<String, Before>,
    pub breakpoint_after_behaviors: BTreeMap<String, After>,
    pub breakpoint_replacements: BTreeMap<String, String>,
    /// Conditions, hit conditions and log messages of the breakpoints that have one.
    pub breakpoint_conditions: BTreeMap<String, String>,
    pub breakpoint_hit_conditions: BTreeMap<String, String>,
    pub breakpoint_log_messages: BTreeMap<String, String>,
    /// One-shot breakpoints, sorted.
    pub breakpoint_one_shot: Vec<String>,
    /// Calls counted by every breakpoint (those whose condition held).
    pub breakpoint_hit_counts: BTreeMap<String, u64>,
    /// Whether each breakpoint is switched on (every breakpoint). One switched off keeps its
    /// settings, but calls of its function run as with no breakpoint.
    pub breakpoint_enabled: BTreeMap<String, bool>,
    /// The master switch: while false no call pauses (logpoints still log, replacements
    /// still apply).
    pub pausing: bool,
}

/// A breakpoint with its options, as adding or changing one answers.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct BreakpointSet {
    pub status: Ack,
    pub function_name: String,
    pub condition: Option<String>,
    pub hit_condition: Option<String>,
    pub log_message: Option<String>,
    pub one_shot: bool,
    pub hit_count: u64,
}

/// `GET /api/logpoints`: lines oldest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct LogLines {
    pub lines: Vec<LogLine>,
    /// The newest line's `seq` (0 before any): pass it as `after` to get only newer ones.
    pub last_seq: u64,
}

/// A change of a breakpoint's options: `None` leaves an option as it is; `Some(None)` clears
/// it. Texts are parsed when the change is read, so a bad one changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionsChange {
    pub condition: Option<Option<Condition>>,
    pub hit_condition: Option<Option<HitCondition>>,
    pub log_message: Option<Option<LogMessage>>,
    pub one_shot: Option<bool>,
    pub reset_hits: bool,
}

impl OptionsChange {
    /// Reads the option fields present in `body` (`condition`, `hit_condition`, `log_message`:
    /// a string, `""` or null to clear; `one_shot`: a bool; `reset_hits`: a bool). Errors name
    /// the field and, for a text that does not parse, the position of the mistake.
    pub fn read(body: &Obj) -> Result<OptionsChange, ApiError> {
        let text = |key: &str| -> Result<Option<Option<&str>>, ApiError> {
            match body.get(key) {
                None => Ok(None),
                Some(Value::Null) => Ok(Some(None)),
                Some(Value::String(s)) if s.trim().is_empty() => Ok(Some(None)),
                Some(Value::String(s)) => Ok(Some(Some(s.as_str()))),
                Some(_) => Err(ApiError::bad_request(
                    &format!("invalid_{key}"),
                    format!("{key} must be a string (\"\" or null clears it)"),
                )
                .with("field", key)),
            }
        };
        let flag = |key: &str| -> Result<Option<bool>, ApiError> {
            match body.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(_) => Err(ApiError::bad_request(
                    &format!("invalid_{key}"),
                    format!("{key} must be true or false"),
                )
                .with("field", key)),
            }
        };
        let parsed = |key: &str, e: ParseError| {
            ApiError::bad_request(&format!("invalid_{key}"), format!("{key}: {e}"))
                .with("field", key)
                .with("position", json!({"byte": e.byte, "column": e.column}))
        };
        let condition = match text("condition")? {
            None => None,
            Some(None) => Some(None),
            Some(Some(t)) => Some(Some(
                Condition::parse(t).map_err(|e| parsed("condition", e))?,
            )),
        };
        let hit_condition = match text("hit_condition")? {
            None => None,
            Some(None) => Some(None),
            Some(Some(t)) => Some(Some(HitCondition::parse(t).map_err(|m| {
                ApiError::bad_request("invalid_hit_condition", m).with("field", "hit_condition")
            })?)),
        };
        let log_message = match text("log_message")? {
            None => None,
            Some(None) => Some(None),
            Some(Some(t)) => Some(Some(
                LogMessage::parse(t).map_err(|e| parsed("log_message", e))?,
            )),
        };
        Ok(OptionsChange {
            condition,
            hit_condition,
            log_message,
            one_shot: flag("one_shot")?,
            reset_hits: flag("reset_hits")?.unwrap_or(false),
        })
    }

    pub fn is_empty(&self) -> bool {
        *self == OptionsChange::default()
    }

    /// The options after this change.
    fn applied_to(&self, old: &Options) -> Options {
        Options {
            condition: self
                .condition
                .clone()
                .unwrap_or_else(|| old.condition.clone()),
            hit_condition: self.hit_condition.unwrap_or(old.hit_condition),
            log_message: self
                .log_message
                .clone()
                .unwrap_or_else(|| old.log_message.clone()),
            one_shot: self.one_shot.unwrap_or(old.one_shot),
        }
    }
}

/// Applies a change to an existing breakpoint under the caller's lock; `Err` with the reason
/// when the options would not make sense together (nothing changed then).
fn change_options(
    bp: &mut Breakpoints,
    name: &str,
    change: &OptionsChange,
) -> Result<(), ApiError> {
    let options = change.applied_to(&bp.options(name));
    options
        .check()
        .map_err(|m| ApiError::bad_request("invalid_options", m))?;
    bp.set_options(name, options);
    if change.reset_hits {
        bp.reset_hits(name);
    }
    Ok(())
}

fn breakpoint_set(bp: &Breakpoints, name: &str) -> BreakpointSet {
    let o = bp.options(name);
    BreakpointSet {
        status: Ack::Ok,
        function_name: name.to_owned(),
        condition: o.condition.as_ref().map(|c| c.text.clone()),
        hit_condition: o.hit_condition.map(|h| h.to_string()),
        log_message: o.log_message.as_ref().map(|m| m.text.clone()),
        one_shot: o.one_shot,
        hit_count: bp.hits(name),
    }
}

/// Adds a breakpoint (idempotent) with options, in one critical section: a change that does
/// not make sense adds nothing. Every change of the settings (this and the functions below)
/// is written to the database before it returns (`settings::persisted`).
pub fn add_with_options(
    shared: &Shared,
    name: &str,
    signature: Signature,
    behavior: Option<Before>,
    change: &OptionsChange,
) -> Result<BreakpointSet, ApiError> {
    super::fields::check_function_name("function_name", name)?;
    persisted(shared, |st| {
        let existed = st.breakpoints.contains(name);
        st.breakpoints.add(name);
        if let Err(e) = change_options(&mut st.breakpoints, name, change) {
            if !existed {
                st.breakpoints.remove(name);
            }
            return Err(e);
        }
        if let Some(b) = behavior {
            st.breakpoints.set_before(name, b);
        }
        register(&mut st.functions, name, signature);
        st.emit(EventKind::BreakpointsChanged);
        Ok(breakpoint_set(&st.breakpoints, name))
    })?
}

/// Changes the options of an existing breakpoint.
pub fn change_breakpoint(
    shared: &Shared,
    name: &str,
    change: &OptionsChange,
) -> Result<BreakpointSet, ApiError> {
    persisted(shared, |st| {
        if !st.breakpoints.contains(name) {
            return Err(BreakpointNotFound.into());
        }
        change_options(&mut st.breakpoints, name, change)?;
        st.emit(EventKind::BreakpointsChanged);
        Ok(breakpoint_set(&st.breakpoints, name))
    })?
}

/// `POST /api/breakpoints/<name>/<field>`: changes one option (`{<field>: value}`), or with
/// `reset_hits`, restarts the count.
pub fn breakpoint_set_option(
    shared: &Shared,
    name: &str,
    field: &str,
    body: &Obj,
) -> Result<BreakpointSet, ApiError> {
    if !body.contains_key(field) {
        return Err(ApiError::bad_request(
            &format!("missing_{field}"),
            format!("{{\"{field}\": ...}} is required"),
        ));
    }
    let mut only = Obj::new();
    only.insert(field.to_owned(), body[field].clone());
    change_breakpoint(shared, name, &OptionsChange::read(&only)?)
}

/// `DELETE /api/breakpoints/<name>/hits`: the hit count starts again from 0.
pub fn breakpoint_reset_hits(shared: &Shared, name: &str) -> Result<BreakpointSet, ApiError> {
    change_breakpoint(
        shared,
        name,
        &OptionsChange {
            reset_hits: true,
            ..OptionsChange::default()
        },
    )
}

/// `GET /api/logpoints?after=N&limit=N`.
pub fn logpoint_lines(shared: &Shared, after: u64, limit: usize) -> LogLines {
    let st = shared.lock();
    LogLines {
        lines: st.logbook.after(after, limit),
        last_seq: st.logbook.last_seq(),
    }
}

/// A breakpoint added or removed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct NameAck {
    pub status: Ack,
    pub function_name: String,
}

/// A before- or after-behavior set.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct BehaviorSet<B> {
    pub status: Ack,
    pub function_name: String,
    pub behavior: B,
}

/// A replacement set (or cleared: `""`).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ReplacementSet {
    pub status: Ack,
    pub function_name: String,
    pub replacement_function: String,
}

/// A breakpoint switched on or off.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct EnabledSet {
    pub status: Ack,
    pub function_name: String,
    pub enabled: bool,
}

/// `GET /api/pausing`: the master switch, and what it means now.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Pausing {
    pub pausing: bool,
    /// Breakpoints that may pause a call now (switched on, not logpoints, with behaviors that
    /// stop before or after a call); 0 while pausing is off.
    pub will_pause: usize,
    pub breakpoints: usize,
}

/// `POST /api/pausing`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct PausingSet {
    pub status: Ack,
    pub pausing: bool,
}

/// `GET /api/behavior`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct DefaultBehavior {
    pub behavior: Global,
}

/// `POST /api/behavior`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct DefaultBehaviorSet {
    pub status: Ack,
    pub behavior: Global,
}

/// `GET /api/functions`: names sorted.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FunctionListing {
    pub functions: Vec<String>,
    pub function_signatures: BTreeMap<String, String>,
    pub function_metadata: BTreeMap<String, Map<String, Value>>,
}

/// `GET /api/functions?limit=&offset=`: a page of the registered functions, by name, with the
/// signatures and metadata of those on it (the listing without `limit` has the original's
/// shape: the whole registry, bounded by `limits::MAX_FUNCTIONS_BYTES`).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FunctionPage {
    pub functions: Vec<String>,
    pub function_signatures: BTreeMap<String, String>,
    pub function_metadata: BTreeMap<String, Map<String, Value>>,
    /// Registered functions in all.
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
}

/// A page of the registered functions, by name: `limit` names from `offset`.
pub fn functions_page(shared: &Shared, offset: usize, limit: usize) -> FunctionPage {
    let st = shared.lock();
    let f = &st.functions;
    let functions: Vec<String> = f.names().skip(offset).take(limit).cloned().collect();
    let function_signatures = functions
        .iter()
        .filter_map(|n| Some((n.clone(), f.signature(n)?.to_owned())))
        .collect();
    let function_metadata = functions
        .iter()
        .filter_map(|n| Some((n.clone(), f.metadata(n)?.clone())))
        .collect();
    FunctionPage {
        functions,
        function_signatures,
        function_metadata,
        total: f.len(),
        offset,
        limit,
    }
}

/// `POST /api/functions`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FunctionRegistered {
    pub status: Ack,
    pub function_name: String,
    pub signature: Option<String>,
}

/// `GET /api/breakpoints/<name>/history`: each entry in its wire shape.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct BreakpointHistory {
    pub function_name: String,
    pub history: Vec<Value>,
}

/// The operation named a function without a breakpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakpointNotFound;

impl From<BreakpointNotFound> for ApiError {
    fn from(_: BreakpointNotFound) -> ApiError {
        ApiError::bare(404, "breakpoint_not_found")
    }
}

/// Why a replacement was refused: both conditions are reported, each face decides which one
/// it names first (REST the signature, as the original; MCP the missing breakpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplacementRefused {
    pub breakpoint_missing: bool,
    pub signature_mismatch: bool,
}

/// What adding a breakpoint does to the function's registered signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature<'a> {
    /// Keep the registered one (agents and people adding a breakpoint by name).
    Keep,
    /// Register this one; `None` or `""` erases it (the debug client's rule).
    Set(Option<&'a str>),
}

#[cfg(test)]
/// Adds a breakpoint (idempotent) with an optional before-behavior and registers the function,
/// in one critical section with one `BreakpointsChanged` event.
pub fn add_breakpoint(
    shared: &Shared,
    name: &str,
    signature: Signature,
    behavior: Option<Before>,
) -> Result<NameAck, ApiError> {
    super::fields::check_function_name("function_name", name)?;
    persisted(shared, |st| {
        st.breakpoints.add(name);
        if let Some(b) = behavior {
            st.breakpoints.set_before(name, b);
        }
        register(&mut st.functions, name, signature);
        st.emit(EventKind::BreakpointsChanged);
    })?;
    Ok(NameAck {
        status: Ack::Ok,
        function_name: name.to_owned(),
    })
}

fn register(functions: &mut crate::breakpoints::Functions, name: &str, signature: Signature) {
    match signature {
        Signature::Set(sig) => functions.register(name, sig),
        Signature::Keep => {
            let kept = functions.signature(name).map(str::to_owned);
            functions.register(name, kept.as_deref());
        }
    }
}

/// What `POST /api/breakpoints` answers: exactly the original's `{status, function_name}` to a
/// request without options (every registration of the client), the breakpoint with its options
/// to one that sets some.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum Added {
    Plain(NameAck),
    WithOptions(BreakpointSet),
}

/// `POST /api/breakpoints`: `{function_name, signature?, behavior?, keep_signature?}` and the
/// options `condition`, `hit_condition`, `log_message`, `one_shot`, `reset_hits` (absent ones
/// stay as they are: the client re-registers with the name alone).
/// `POST /api/breakpoints` with a JSON array: each item is the body of a single add, done in
/// order; the answer has one entry per item, what the single add answers or its error object
/// (with `index`). At most `MAX_BREAKPOINTS_PER_REQUEST` items; a list with an item that is
/// not an object is refused whole (400 `invalid_body`), nothing added.
pub fn breakpoints_add(shared: &Shared, items: &[Value]) -> Result<Vec<Value>, ApiError> {
    check_bulk_len(items.len())?;
    if let Some(i) = items.iter().position(|v| !v.is_object()) {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("item {i} of the list is not a JSON object (the body of one breakpoint)"),
        )
        .with("index", i));
    }
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let done = match item {
                Value::Object(body) => breakpoint_add(shared, body).and_then(|a| {
                    serde_json::to_value(a).map_err(|e| ApiError::internal(e.to_string()))
                }),
                _ => Err(ApiError::bad_request("invalid_body", "not a JSON object")),
            };
            done.unwrap_or_else(|e| {
                let mut v = e.to_json();
                if let Some(m) = v.as_object_mut() {
                    m.insert("index".into(), json!(i));
                }
                v
            })
        })
        .collect())
}

/// Refuses an empty list or one longer than `MAX_BREAKPOINTS_PER_REQUEST`.
pub fn check_bulk_len(n: usize) -> Result<(), ApiError> {
    let max = crate::limits::MAX_BREAKPOINTS_PER_REQUEST;
    if n == 0 || n > max {
        return Err(ApiError::bad_request(
            "invalid_breakpoints",
            format!("a list of breakpoints holds 1 to {max} items, not {n}"),
        )
        .with("field", "breakpoints"));
    }
    Ok(())
}

pub fn breakpoint_add(shared: &Shared, body: &Obj) -> Result<Added, ApiError> {
    let name = match str_field(body, "function_name") {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ApiError::bare(400, "function_name required")),
    };
    // Compat: an unknown behavior is silently ignored here, and no alias is accepted
    // (protocol doc §2.2).
    let behavior = str_field(body, "behavior").and_then(|b| match b {
        "stop" => Some(Before::Stop),
        "go" => Some(Before::Go),
        "yield" => Some(Before::Yield),
        _ => None,
    });
    // The client's rule: a missing signature erases the registered one. People adding a
    // breakpoint by name (the web UI) ask to keep it.
    let signature = if body.get("keep_signature") == Some(&Value::Bool(true)) {
        Signature::Keep
    } else {
        Signature::Set(str_field(body, "signature"))
    };
    let change = OptionsChange::read(body)?;
    let set = add_with_options(shared, name, signature, behavior, &change)?;
    Ok(if change.is_empty() {
        Added::Plain(NameAck {
            status: Ack::Ok,
            function_name: set.function_name,
        })
    } else {
        Added::WithOptions(set)
    })
}

/// `DELETE /api/breakpoints/<name>`: ok for unknown names too (`Err` only when the database
/// cannot be written).
pub fn breakpoint_remove(shared: &Shared, name: &str) -> Result<NameAck, ApiError> {
    persisted(shared, |st| {
        if st.breakpoints.remove(name) {
            st.emit(EventKind::BreakpointsChanged);
        }
    })?;
    Ok(NameAck {
        status: Ack::Ok,
        function_name: name.to_owned(),
    })
}

/// The answer of a behavior change: `Err` when the database cannot be written, else the
/// change's own answer.
pub type Persisted<T, E> = Result<Result<T, E>, ApiError>;

/// Sets the before-behavior of an existing breakpoint.
pub fn set_before(
    shared: &Shared,
    name: &str,
    behavior: Before,
) -> Persisted<BehaviorSet<Before>, BreakpointNotFound> {
    set_behavior(shared, name, behavior, |b, n, v| b.set_before(n, v))
}

/// Sets the after-behavior of an existing breakpoint.
pub fn set_after(
    shared: &Shared,
    name: &str,
    behavior: After,
) -> Persisted<BehaviorSet<After>, BreakpointNotFound> {
    set_behavior(shared, name, behavior, |b, n, v| b.set_after(n, v))
}

/// Sets a behavior of an existing breakpoint with `set`, then tells the subscribers once.
fn set_behavior<B: Copy>(
    shared: &Shared,
    name: &str,
    behavior: B,
    set: impl FnOnce(&mut Breakpoints, &str, B) -> bool,
) -> Persisted<BehaviorSet<B>, BreakpointNotFound> {
    persisted(shared, |st| {
        if !set(&mut st.breakpoints, name, behavior) {
            return Err(BreakpointNotFound);
        }
        st.emit(EventKind::BreakpointsChanged);
        Ok(BehaviorSet {
            status: Ack::Ok,
            function_name: name.to_owned(),
            behavior,
        })
    })
}

/// `POST /api/breakpoints/<name>/behavior` (strict values: stop, go, yield, continue).
pub fn breakpoint_set_behavior(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<BehaviorSet<Before>, ApiError> {
    let Some(b) = str_field(body, "behavior").and_then(Before::parse_strict) else {
        return Err(ApiError::bare(
            400,
            "behavior must be 'stop', 'go', or 'yield'",
        ));
    };
    Ok(set_before(shared, name, b)??)
}

/// `POST /api/breakpoints/<name>/after_behavior`.
pub fn breakpoint_set_after_behavior(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<BehaviorSet<After>, ApiError> {
    let Some(a) = str_field(body, "behavior").and_then(After::parse) else {
        return Err(ApiError::bad_request(
            "invalid_behavior",
            format!("behavior must be one of {}", quote_list(&After::NAMES)),
        ));
    };
    Ok(set_after(shared, name, a)??)
}

/// Sets (or clears, with `""` or the function's own name) the replacement of a breakpoint;
/// a replacement needs the same registered signature.
pub fn set_replacement(
    shared: &Shared,
    name: &str,
    replacement: &str,
) -> Persisted<ReplacementSet, ReplacementRefused> {
    persisted(shared, |st| {
        let breakpoint_missing = !st.breakpoints.contains(name);
        match st
            .breakpoints
            .set_replacement(name, replacement, &st.functions)
        {
            Ok(()) => {
                st.emit(EventKind::BreakpointsChanged);
                Ok(ReplacementSet {
                    status: Ack::Ok,
                    function_name: name.to_owned(),
                    replacement_function: replacement.to_owned(),
                })
            }
            Err(ReplacementError::SignatureMismatch) => Err(ReplacementRefused {
                breakpoint_missing,
                signature_mismatch: true,
            }),
            Err(ReplacementError::BreakpointNotFound) => Err(ReplacementRefused {
                breakpoint_missing: true,
                signature_mismatch: false,
            }),
        }
    })
}

/// Switches an existing breakpoint on or off; its settings and hit count stay as they are.
pub fn set_enabled(
    shared: &Shared,
    name: &str,
    enabled: bool,
) -> Persisted<EnabledSet, BreakpointNotFound> {
    persisted(shared, |st| {
        if !st.breakpoints.set_enabled(name, enabled) {
            return Err(BreakpointNotFound);
        }
        st.emit(EventKind::BreakpointsChanged);
        Ok(EnabledSet {
            status: Ack::Ok,
            function_name: name.to_owned(),
            enabled,
        })
    })
}

/// Reads a required boolean field: 400 `missing_<key>` or `invalid_<key>` otherwise.
fn bool_field(body: &Obj, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        Some(Value::Bool(b)) => Ok(*b),
        None | Some(Value::Null) => Err(ApiError::bad_request(
            &format!("missing_{key}"),
            format!("{{\"{key}\": true}} or {{\"{key}\": false}} is required"),
        )
        .with("field", key)),
        Some(other) => Err(ApiError::bad_request(
            &format!("invalid_{key}"),
            format!("{key} must be true or false, got {other}"),
        )
        .with("field", key)),
    }
}

/// `POST /api/breakpoints/<name>/enabled`: `{enabled: bool}`.
pub fn breakpoint_set_enabled(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<EnabledSet, ApiError> {
    let enabled = bool_field(body, "enabled")?;
    Ok(set_enabled(shared, name, enabled)??)
}

/// `GET /api/pausing`.
pub fn pausing(shared: &Shared) -> Pausing {
    let st = shared.lock();
    let bp = &st.breakpoints;
    Pausing {
        pausing: bp.pausing(),
        will_pause: bp.names().filter(|n| bp.may_pause(n)).count(),
        breakpoints: bp.len(),
    }
}

/// Turns the master switch on or off. Every breakpoint keeps its settings; calls paused
/// already stay paused.
pub fn set_pausing(shared: &Shared, on: bool) -> Result<PausingSet, ApiError> {
    persisted(shared, |st| {
        if st.breakpoints.pausing() != on {
            st.breakpoints.set_pausing(on);
            st.emit(EventKind::BreakpointsChanged);
        }
    })?;
    Ok(PausingSet {
        status: Ack::Ok,
        pausing: on,
    })
}

/// `POST /api/pausing`: `{pausing: bool}`.
pub fn rest_set_pausing(shared: &Shared, body: &Obj) -> Result<PausingSet, ApiError> {
    set_pausing(shared, bool_field(body, "pausing")?)
}

/// `POST /api/breakpoints/<name>/replacement`.
pub fn breakpoint_set_replacement(
    shared: &Shared,
    name: &str,
    body: &Obj,
) -> Result<ReplacementSet, ApiError> {
    let replacement = match body.get("replacement_function") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Null) => "",
        _ => {
            return Err(ApiError::bad_request(
                "missing_replacement_function",
                "replacement_function (a function name, or \"\" to clear) is required",
            ))
        }
    };
    set_replacement(shared, name, replacement)?.map_err(|refused| {
        if refused.signature_mismatch {
            ApiError::bare(400, "signature_mismatch")
        } else {
            BreakpointNotFound.into()
        }
    })
}

/// `GET /api/breakpoints`.
pub fn breakpoints(shared: &Shared) -> BreakpointListing {
    let st = shared.lock();
    let bp = &st.breakpoints;
    BreakpointListing {
        breakpoints: bp.names().cloned().collect(),
        breakpoint_behaviors: bp.names().map(|n| (n.clone(), bp.before(n))).collect(),
        breakpoint_after_behaviors: bp.names().map(|n| (n.clone(), bp.after(n))).collect(),
        breakpoint_replacements: bp.replacements().clone(),
        breakpoint_conditions: options_of(bp, |o| o.condition.as_ref().map(|c| c.text.clone())),
        breakpoint_hit_conditions: options_of(bp, |o| o.hit_condition.map(|h| h.to_string())),
        breakpoint_log_messages: options_of(bp, |o| o.log_message.as_ref().map(|m| m.text.clone())),
        breakpoint_one_shot: bp
            .names()
            .filter(|n| bp.options(n).one_shot)
            .cloned()
            .collect(),
        breakpoint_hit_counts: bp.names().map(|n| (n.clone(), bp.hits(n))).collect(),
        breakpoint_enabled: bp.names().map(|n| (n.clone(), bp.is_enabled(n))).collect(),
        pausing: bp.pausing(),
    }
}

/// One option of every breakpoint that has it.
fn options_of(
    bp: &Breakpoints,
    get: impl Fn(&Options) -> Option<String>,
) -> BTreeMap<String, String> {
    bp.names()
        .filter_map(|n| get(&bp.options(n)).map(|v| (n.clone(), v)))
        .collect()
}

/// `GET /api/breakpoints/<name>/history?limit=N`, most recent first.
pub fn breakpoint_history(
    shared: &Shared,
    name: &str,
    offset: usize,
    limit: usize,
) -> BreakpointHistory {
    let (page, _) = history_entries(shared, name, offset, limit);
    let store_render = shared.render();
    let render = store_render.limited();
    BreakpointHistory {
        function_name: name.to_owned(),
        history: page.iter().map(|h| h.to_json(&render)).collect(),
    }
}

/// One history entry of a function by its id, in its wire shape (the entries are searched
/// newest first; the function need not have a breakpoint now).
pub fn breakpoint_history_entry(shared: &Shared, name: &str, id: &str) -> Option<Value> {
    const STEP: usize = 500;
    let mut offset = 0;
    loop {
        let (page, read) = history_entries(shared, name, offset, STEP);
        if let Some(h) = page.iter().find(|h| &*h.id == id) {
            let store_render = shared.render();
            return Some(h.to_json(&store_render.limited()));
        }
        if read < STEP {
            return None;
        }
        offset += STEP;
    }
}

/// A page of a function's history entries, newest first, and how many entries were read for
/// it (more than the page holds when other functions share the name's index key).
fn history_entries(
    shared: &Shared,
    name: &str,
    offset: usize,
    limit: usize,
) -> (Vec<HistoryEntry>, usize) {
    if shared.store.is_durable() {
        let key = records::key_hash(name);
        let mut scratch = Interner::default();
        let (stored, _) = read_stored(shared, RecordKind::History, &|k| k.a == key, offset, limit);
        let read = stored.len();
        let page = stored
            .into_iter()
            .filter_map(|v| HistoryEntry::from_disk(&mut scratch, &v, None))
            .filter(|h| &*h.call.method == name)
            .collect();
        (page, read)
    } else {
        let page = shared.lock().records.history(name, offset, limit);
        let read = page.len();
        (page, read)
    }
}

/// `GET /api/behavior`.
pub fn default_behavior(shared: &Shared) -> DefaultBehavior {
    DefaultBehavior {
        behavior: shared.lock().breakpoints.global(),
    }
}

/// Sets the global default behavior.
pub fn set_global(shared: &Shared, behavior: Global) -> Result<DefaultBehaviorSet, ApiError> {
    persisted(shared, |st| {
        st.breakpoints.set_global(behavior);
        st.emit(EventKind::BreakpointsChanged);
    })?;
    Ok(DefaultBehaviorSet {
        status: Ack::Ok,
        behavior,
    })
}

/// `POST /api/behavior`.
pub fn set_default_behavior(shared: &Shared, body: &Obj) -> Result<DefaultBehaviorSet, ApiError> {
    let Some(g) = str_field(body, "behavior").and_then(Global::parse) else {
        return Err(ApiError::bad_request(
            "invalid_behavior",
            format!("behavior must be one of {}", quote_list(&Global::NAMES)),
        ));
    };
    set_global(shared, g)
}

/// `POST /api/functions`: registers a function with its signature and metadata.
pub fn function_register(shared: &Shared, body: &Obj) -> Result<FunctionRegistered, ApiError> {
    let name = match str_field(body, "function_name") {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ApiError::bare(400, "function_name required")),
    };
    // A browser-client endpoint: any web page can call it, so what it keeps is bounded.
    if name.len() > limits::MAX_FUNCTION_NAME_BYTES {
        return Err(ApiError::bad_request(
            "invalid_function_name",
            format!(
                "function_name is {} bytes long; at most {} are accepted",
                name.len(),
                limits::MAX_FUNCTION_NAME_BYTES
            ),
        ));
    }
    super::fields::check_obj(body)?;
    {
        let st = shared.lock();
        if !st.functions.contains(name) && st.functions.len() >= limits::MAX_FUNCTIONS {
            return Err(ApiError::bad_request(
                "too_many_functions",
                format!(
                    "{} functions are registered already, the most this server keeps",
                    limits::MAX_FUNCTIONS
                ),
            ));
        }
    }
    let signature =
        str_field(body, "signature").filter(|s| s.len() <= limits::MAX_FUNCTION_SIGNATURE_BYTES);
    let blob = cas::verify_payload(
        body.get("function_cid"),
        body.get("function_data"),
        body.get("function_serialization_format"),
    )?;
    let mut metadata: Option<Obj> = None;
    if let Some(blob) = blob {
        // Only payloads that could not be pickled are sent here; they are placeholders.
        let decoded = pretty::payload(&blob.bytes, blob.format, None);
        // The view's type alone: the whole view was built (and thrown away) before.
        let object_path = match blob.format {
            Some(crate::store::Format::Json) => Value::Null,
            _ => Value::String(crate::pickle::type_name(&blob.bytes)),
        };
        store_blobs(shared, vec![blob])?;
        metadata = match decoded {
            Value::Object(m) if pretty::is_placeholder(&Value::Object(m.clone())) => Some(m),
            other if !pretty::is_unrendered(&other) => {
                let summary = match &other {
                    Value::String(s) => s.clone(),
                    v => pretty::cut(&v.to_string()),
                };
                let mut m = Map::new();
                m.insert("summary".into(), json!(summary));
                m.insert("object_name".into(), json!(name));
                m.insert("object_path".into(), object_path);
                Some(m)
            }
            _ => None,
        };
    }
    if metadata.is_none() {
        metadata = body
            .get("function_metadata")
            .and_then(Value::as_object)
            .cloned();
    }
    if let Some(m) = &mut metadata {
        let size = serde_json::to_string(&*m).map_or(usize::MAX, |t| t.len());
        if size > limits::MAX_FUNCTION_METADATA_BYTES {
            *m = Map::new();
            m.insert(
                "shrunk".into(),
                json!(format!(
                    "function metadata of {size} bytes not kept (at most {} are)",
                    limits::MAX_FUNCTION_METADATA_BYTES
                )),
            );
        }
    }
    if let Some(client_ref @ (Value::Number(_) | Value::String(_))) =
        body.get("function_client_ref")
    {
        let m = metadata.get_or_insert_with(Map::new);
        m.entry("client_ref").or_insert_with(|| client_ref.clone());
        m.entry("registered_at")
            .or_insert_with(|| json!(ids::now()));
    }
    let mut st = shared.lock();
    // The registry is bounded in bytes too: what this registration would keep, beyond what the
    // name keeps already, must fit.
    let adds = name.len() * 3
        + 3 * 64
        + signature.map_or(0, str::len)
        + metadata
            .as_ref()
            .map_or(0, |m| serde_json::to_vec(m).map_or(0, |t| t.len()));
    let kept = st.functions.entry_bytes(name);
    if st.functions.bytes().saturating_sub(kept) + adds > limits::MAX_FUNCTIONS_BYTES {
        return Err(ApiError::bad_request(
            "too_many_functions",
            format!(
                "the registered functions keep {} bytes; this one would pass the {} bytes this \
                 server keeps",
                st.functions.bytes(),
                limits::MAX_FUNCTIONS_BYTES
            ),
        ));
    }
    st.functions.register(name, signature);
    if let Some(m) = metadata {
        st.functions.set_metadata(name, m);
    }
    st.emit(EventKind::FunctionsChanged);
    Ok(FunctionRegistered {
        status: Ack::Ok,
        function_name: name.to_owned(),
        signature: st.functions.signature(name).map(str::to_owned),
    })
}

/// What the web UI's forms and cards show of the registry, bounded whatever its size: the
/// first `limit` names, and the signatures of the `wanted` functions and of at
/// most `limit` others sharing one of theirs (the candidates to replace them).
#[derive(Debug, Clone, Default)]
pub struct FunctionsShown {
    pub names: Vec<String>,
    pub signatures: BTreeMap<String, String>,
}

pub fn functions_shown(shared: &Shared, wanted: &[&str], limit: usize) -> FunctionsShown {
    let st = shared.lock();
    let f = &st.functions;
    let mut signatures = BTreeMap::new();
    let mut theirs = std::collections::HashSet::new();
    for name in wanted {
        if let Some(sig) = f.signature(name) {
            signatures.insert((*name).to_owned(), sig.to_owned());
            theirs.insert(sig);
        }
    }
    if !theirs.is_empty() {
        let mut others = 0;
        for (name, sig) in f.signatures() {
            if others >= limit {
                break;
            }
            if theirs.contains(sig.as_str()) && !signatures.contains_key(name) {
                signatures.insert(name.clone(), sig.clone());
                others += 1;
            }
        }
    }
    FunctionsShown {
        names: f.names().take(limit).cloned().collect(),
        signatures,
    }
}

/// `GET /api/functions`.
pub fn functions(shared: &Shared) -> FunctionListing {
    let st = shared.lock();
    FunctionListing {
        functions: st.functions.names().cloned().collect(),
        function_signatures: st.functions.signatures().clone(),
        function_metadata: st.functions.all_metadata().clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::service::testing::{body, shared};

    fn events(rx: &crossbeam_channel::Receiver<Event>) -> Vec<EventKind> {
        rx.try_iter().map(|e| (*e.kind).clone()).collect()
    }

    #[test]
    fn what_the_ui_shows_of_the_registry_is_bounded() {
        let s = shared();
        for i in 0..50 {
            let sig = if i % 2 == 0 { "(x)" } else { "(y)" };
            let f = format!("f{i:02}");
            function_register(&s, &body(json!({"function_name": f, "signature": sig}))).unwrap();
        }
        let shown = functions_shown(&s, &["f00", "f01"], 5);
        assert_eq!(shown.names.len(), 5);
        // The wanted ones, and at most 5 others sharing one of their signatures.
        assert!(shown.signatures.contains_key("f00") && shown.signatures.contains_key("f01"));
        assert_eq!(shown.signatures.len(), 7);
        assert!(functions_shown(&s, &[], 5).signatures.is_empty());
        assert!(functions_shown(&s, &["nope"], 5).signatures.is_empty());
    }

    #[test]
    fn adding_sets_behavior_and_registers_in_one_section_with_one_event() {
        let s = shared();
        function_register(&s, &body(json!({"function_name": "f", "signature": "(x)"}))).unwrap();
        let rx = s.bus.subscribe();
        let added = add_breakpoint(&s, "f", Signature::Keep, Some(Before::Go)).unwrap();
        assert_eq!(
            serde_json::to_value(&added).unwrap(),
            json!({"status": "ok", "function_name": "f"})
        );
        assert_eq!(events(&rx), [EventKind::BreakpointsChanged]);
        let l = breakpoints(&s);
        assert_eq!(l.breakpoints, ["f"]);
        assert_eq!(l.breakpoint_behaviors["f"], Before::Go);
        assert_eq!(l.breakpoint_after_behaviors["f"], After::Yield);
        assert_eq!(
            functions(&s).function_signatures["f"],
            "(x)",
            "Keep keeps the signature"
        );
        // The client's rule: no signature erases it; an unknown behavior is ignored.
        breakpoint_add(
            &s,
            &body(json!({"function_name": "f", "behavior": "later"})),
        )
        .unwrap();
        assert!(functions(&s).function_signatures.is_empty());
        assert_eq!(breakpoints(&s).breakpoint_behaviors["f"], Before::Go);
    }

    #[test]
    fn rest_add_accepts_no_alias_and_requires_a_name() {
        let s = shared();
        breakpoint_add(
            &s,
            &body(json!({"function_name": "g", "behavior": "continue"})),
        )
        .unwrap();
        assert_eq!(breakpoints(&s).breakpoint_behaviors["g"], Before::Yield);
        let e = breakpoint_add(&s, &body(json!({"function_name": ""}))).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "function_name required"));
    }

    #[test]
    fn behaviors_need_an_existing_breakpoint() {
        let s = shared();
        assert_eq!(
            set_before(&s, "f", Before::Stop),
            Ok(Err(BreakpointNotFound))
        );
        assert_eq!(
            set_after(&s, "f", After::Global(Global::Exception)),
            Ok(Err(BreakpointNotFound))
        );
        let e = breakpoint_set_behavior(&s, "f", &body(json!({"behavior": "stop"}))).unwrap_err();
        assert_eq!(e.status, 404);
        assert_eq!(e.to_json(), json!({"error": "breakpoint_not_found"}));
        add_breakpoint(&s, "f", Signature::Keep, None).unwrap();
        let set =
            breakpoint_set_after_behavior(&s, "f", &body(json!({"behavior": "both"}))).unwrap();
        assert_eq!(
            serde_json::to_value(&set).unwrap(),
            json!({"status": "ok", "function_name": "f", "behavior": "stop_exception"})
        );
        let e = breakpoint_set_behavior(&s, "f", &body(json!({"behavior": "defer"}))).unwrap_err();
        assert_eq!(e.status, 400, "REST is strict about before-behaviors");
        let e =
            breakpoint_set_after_behavior(&s, "f", &body(json!({"behavior": "x"}))).unwrap_err();
        assert_eq!(e.code(), "invalid_behavior");
    }

    #[test]
    fn replacements_report_both_refusals_and_rest_names_the_signature_first() {
        let s = shared();
        function_register(&s, &body(json!({"function_name": "f", "signature": "(x)"}))).unwrap();
        function_register(&s, &body(json!({"function_name": "g", "signature": "(y)"}))).unwrap();
        assert_eq!(
            set_replacement(&s, "f", "g"),
            Ok(Err(ReplacementRefused {
                breakpoint_missing: true,
                signature_mismatch: true
            }))
        );
        let e = breakpoint_set_replacement(&s, "f", &body(json!({"replacement_function": "g"})))
            .unwrap_err();
        assert_eq!((e.status, e.code()), (400, "signature_mismatch"));
        add_breakpoint(&s, "f", Signature::Keep, None).unwrap();
        function_register(&s, &body(json!({"function_name": "g", "signature": "(x)"}))).unwrap();
        let rx = s.bus.subscribe();
        let set = set_replacement(&s, "f", "g").unwrap().unwrap();
        assert_eq!(set.replacement_function, "g");
        assert_eq!(events(&rx), [EventKind::BreakpointsChanged]);
        assert_eq!(breakpoints(&s).breakpoint_replacements["f"], "g");
        breakpoint_set_replacement(&s, "f", &body(json!({"replacement_function": null}))).unwrap();
        assert!(breakpoints(&s).breakpoint_replacements.is_empty());
        let e = breakpoint_set_replacement(&s, "f", &body(json!({}))).unwrap_err();
        assert_eq!(e.code(), "missing_replacement_function");
        assert_eq!(
            set_replacement(&s, "nope", ""),
            Ok(Err(ReplacementRefused {
                breakpoint_missing: true,
                signature_mismatch: false
            }))
        );
    }

    #[test]
    fn listings_serialize_in_the_rest_wire_shape() {
        let s = shared();
        add_breakpoint(&s, "b", Signature::Set(Some("(x)")), Some(Before::Stop)).unwrap();
        add_breakpoint(&s, "a", Signature::Keep, None).unwrap();
        assert_eq!(
            serde_json::to_string(&breakpoints(&s)).unwrap(),
            r#"{"breakpoints":["a","b"],"breakpoint_behaviors":{"a":"yield","b":"stop"},"breakpoint_after_behaviors":{"a":"yield","b":"yield"},"breakpoint_replacements":{},"breakpoint_conditions":{},"breakpoint_hit_conditions":{},"breakpoint_log_messages":{},"breakpoint_one_shot":[],"breakpoint_hit_counts":{"a":0,"b":0},"breakpoint_enabled":{"a":true,"b":true},"pausing":true}"#
        );
        assert_eq!(
            serde_json::to_string(&functions(&s)).unwrap(),
            r#"{"functions":["a","b"],"function_signatures":{"b":"(x)"},"function_metadata":{}}"#
        );
        let r = breakpoint_remove(&s, "b").unwrap();
        assert_eq!(r.function_name, "b");
        assert_eq!(breakpoints(&s).breakpoints, ["a"]);
        assert_eq!(
            breakpoint_remove(&s, "b").unwrap().status,
            Ack::Ok,
            "removing again is ok"
        );
    }

    #[test]
    fn the_default_behavior_is_read_and_set() {
        let s = shared();
        assert_eq!(default_behavior(&s).behavior, Global::Stop);
        let set = set_default_behavior(&s, &body(json!({"behavior": "exceptions"}))).unwrap();
        assert_eq!(
            serde_json::to_value(set).unwrap(),
            json!({"status": "ok", "behavior": "exception"})
        );
        assert_eq!(
            serde_json::to_value(default_behavior(&s)).unwrap(),
            json!({"behavior": "exception"})
        );
        let e = set_default_behavior(&s, &body(json!({"behavior": "yield"}))).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "invalid_behavior"));
        assert_eq!(set_global(&s, Global::Go).unwrap().behavior, Global::Go);
    }

    #[test]
    fn breakpoints_switch_on_and_off_and_the_master_switch_too() {
        let s = shared();
        let e = breakpoint_set_enabled(&s, "f", &body(json!({"enabled": false}))).unwrap_err();
        assert_eq!((e.status, e.code()), (404, "breakpoint_not_found"));
        add_breakpoint(&s, "f", Signature::Keep, Some(Before::Stop)).unwrap();
        for (bad, code) in [
            (json!({}), "missing_enabled"),
            (json!({"enabled": "no"}), "invalid_enabled"),
            (json!({"enabled": 0}), "invalid_enabled"),
        ] {
            let e = breakpoint_set_enabled(&s, "f", &body(bad)).unwrap_err();
            assert_eq!((e.status, e.code()), (400, code));
        }
        let rx = s.bus.subscribe();
        let set = breakpoint_set_enabled(&s, "f", &body(json!({"enabled": false}))).unwrap();
        assert_eq!(
            serde_json::to_value(&set).unwrap(),
            json!({"status": "ok", "function_name": "f", "enabled": false})
        );
        assert_eq!(events(&rx), [EventKind::BreakpointsChanged]);
        let l = breakpoints(&s);
        assert!(!l.breakpoint_enabled["f"]);
        assert_eq!(l.breakpoint_behaviors["f"], Before::Stop, "kept");
        assert_eq!(
            serde_json::to_value(pausing(&s)).unwrap(),
            json!({"pausing": true, "will_pause": 0, "breakpoints": 1})
        );
        set_enabled(&s, "f", true).unwrap().unwrap();
        assert_eq!(events(&rx), [EventKind::BreakpointsChanged]);
        assert_eq!(pausing(&s).will_pause, 1);
        let e = rest_set_pausing(&s, &body(json!({"pausing": "off"}))).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "invalid_pausing"));
        let set = rest_set_pausing(&s, &body(json!({"pausing": false}))).unwrap();
        assert_eq!(
            serde_json::to_value(set).unwrap(),
            json!({"status": "ok", "pausing": false})
        );
        assert_eq!(events(&rx), [EventKind::BreakpointsChanged]);
        set_pausing(&s, false).unwrap();
        assert!(events(&rx).is_empty(), "no change, no event");
        assert_eq!(
            (
                pausing(&s).pausing,
                pausing(&s).will_pause,
                breakpoints(&s).pausing
            ),
            (false, 0, false)
        );
    }

    #[test]
    fn registering_a_function_keeps_metadata_and_client_refs() {
        let s = shared();
        let r = function_register(
            &s,
            &body(json!({"function_name": "f", "signature": "(x)", "function_client_ref": 7})),
        )
        .unwrap();
        assert_eq!(r.signature.as_deref(), Some("(x)"));
        let meta = &functions(&s).function_metadata["f"];
        assert_eq!(meta["client_ref"], 7);
        assert!(meta["registered_at"].is_number());
        let e = function_register(&s, &body(json!({}))).unwrap_err();
        assert_eq!(e.status, 400);
    }

    #[test]
    fn what_a_registration_keeps_is_bounded() {
        let s = shared();
        let long = "n".repeat(limits::MAX_FUNCTION_NAME_BYTES + 1);
        let e = function_register(&s, &body(json!({"function_name": long}))).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "invalid_function_name"));
        let big = "x".repeat(limits::MAX_FUNCTION_METADATA_BYTES);
        function_register(
            &s,
            &body(json!({"function_name": "f", "function_metadata": {"doc": big}})),
        )
        .unwrap();
        let meta = &functions(&s).function_metadata["f"];
        assert_eq!(meta.len(), 1, "{meta:?}");
        assert!(meta["shrunk"].as_str().unwrap().contains("not kept"));
        let sig = format!("({})", "a".repeat(limits::MAX_FUNCTION_SIGNATURE_BYTES));
        let r = function_register(&s, &body(json!({"function_name": "f", "signature": sig})));
        assert_eq!(r.unwrap().signature, None, "a longer signature is not kept");
        for n in 1..limits::MAX_FUNCTIONS {
            s.lock().functions.register(&format!("g{n}"), None);
        }
        let e = function_register(&s, &body(json!({"function_name": "new"}))).unwrap_err();
        assert_eq!((e.status, e.code()), (400, "too_many_functions"));
        // Registering a known name again is fine at the cap.
        function_register(&s, &body(json!({"function_name": "f", "signature": "(x)"}))).unwrap();
    }

    #[test]
    fn history_lists_completed_calls_of_a_breakpoint() {
        let s = shared();
        assert!(breakpoint_history(&s, "f", 0, 10).history.is_empty());
        let (pause, call_id) = crate::service::testing::paused_call(&s, "f", &[json!(1)]);
        crate::service::testing::resume(&s, &pause);
        set_global(&s, Global::Go).unwrap();
        crate::service::testing::complete(
            &s,
            &crate::service::testing::complete_body(&call_id, &json!(2)),
        )
        .unwrap();
        let h = breakpoint_history(&s, "f", 0, 10);
        assert_eq!(h.function_name, "f");
        assert_eq!(h.history.len(), 1);
    }
}
