//! Breakpoints with their before/after behaviors and replacements, the global default
//! behavior, and the function registry. Each change is one critical section that emits one
//! `BreakpointsChanged` (or `FunctionsChanged`) event. The typed operations (`add_breakpoint`,
//! `set_before`, ...) serve every face; the `breakpoint_*` functions parse REST bodies.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{quote_list, read_stored, store_blobs, str_field, Ack, Obj};
use crate::breakpoints::{After, Before, Global, ReplacementError};
use crate::cas;
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::intern::Interner;
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

/// Adds a breakpoint (idempotent) with an optional before-behavior and registers the function,
/// in one critical section with one `BreakpointsChanged` event.
pub fn add_breakpoint(
    shared: &Shared,
    name: &str,
    signature: Signature,
    behavior: Option<Before>,
) -> NameAck {
    let mut st = shared.lock();
    st.breakpoints.add(name);
    if let Some(b) = behavior {
        st.breakpoints.set_before(name, b);
    }
    match signature {
        Signature::Set(sig) => st.functions.register(name, sig),
        Signature::Keep => {
            let kept = st.functions.signature(name).map(str::to_owned);
            st.functions.register(name, kept.as_deref());
        }
    }
    st.emit(EventKind::BreakpointsChanged);
    NameAck {
        status: Ack::Ok,
        function_name: name.to_owned(),
    }
}

/// `POST /api/breakpoints`: `{function_name, signature?, behavior?}`.
pub fn breakpoint_add(shared: &Shared, body: &Obj) -> Result<NameAck, ApiError> {
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
    let signature = Signature::Set(str_field(body, "signature"));
    Ok(add_breakpoint(shared, name, signature, behavior))
}

/// `DELETE /api/breakpoints/<name>`: always ok.
pub fn breakpoint_remove(shared: &Shared, name: &str) -> NameAck {
    let mut st = shared.lock();
    if st.breakpoints.remove(name) {
        st.emit(EventKind::BreakpointsChanged);
    }
    NameAck {
        status: Ack::Ok,
        function_name: name.to_owned(),
    }
}

/// Sets the before-behavior of an existing breakpoint.
pub fn set_before(
    shared: &Shared,
    name: &str,
    behavior: Before,
) -> Result<BehaviorSet<Before>, BreakpointNotFound> {
    let mut st = shared.lock();
    if !st.breakpoints.set_before(name, behavior) {
        return Err(BreakpointNotFound);
    }
    st.emit(EventKind::BreakpointsChanged);
    Ok(BehaviorSet {
        status: Ack::Ok,
        function_name: name.to_owned(),
        behavior,
    })
}

/// Sets the after-behavior of an existing breakpoint.
pub fn set_after(
    shared: &Shared,
    name: &str,
    behavior: After,
) -> Result<BehaviorSet<After>, BreakpointNotFound> {
    let mut st = shared.lock();
    if !st.breakpoints.set_after(name, behavior) {
        return Err(BreakpointNotFound);
    }
    st.emit(EventKind::BreakpointsChanged);
    Ok(BehaviorSet {
        status: Ack::Ok,
        function_name: name.to_owned(),
        behavior,
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
    Ok(set_before(shared, name, b)?)
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
    Ok(set_after(shared, name, a)?)
}

/// Sets (or clears, with `""` or the function's own name) the replacement of a breakpoint;
/// a replacement needs the same registered signature.
pub fn set_replacement(
    shared: &Shared,
    name: &str,
    replacement: &str,
) -> Result<ReplacementSet, ReplacementRefused> {
    let mut st = shared.lock();
    let st = &mut *st;
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
    set_replacement(shared, name, replacement).map_err(|refused| {
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
    }
}

/// `GET /api/breakpoints/<name>/history?limit=N`, most recent first.
pub fn breakpoint_history(
    shared: &Shared,
    name: &str,
    offset: usize,
    limit: usize,
) -> BreakpointHistory {
    let page = if shared.store.is_durable() {
        let key = records::key_hash(name);
        let mut scratch = Interner::default();
        read_stored(shared, RecordKind::History, &|k| k.a == key, offset, limit)
            .0
            .into_iter()
            .filter_map(|v| HistoryEntry::from_disk(&mut scratch, &v, None))
            .filter(|h| &*h.call.method == name)
            .collect()
    } else {
        shared.lock().records.history(name, offset, limit)
    };
    let render = shared.render();
    BreakpointHistory {
        function_name: name.to_owned(),
        history: page.iter().map(|h| h.to_json(&render)).collect(),
    }
}

/// `GET /api/behavior`.
pub fn default_behavior(shared: &Shared) -> DefaultBehavior {
    DefaultBehavior {
        behavior: shared.lock().breakpoints.global(),
    }
}

/// Sets the global default behavior.
pub fn set_global(shared: &Shared, behavior: Global) -> DefaultBehaviorSet {
    let mut st = shared.lock();
    st.breakpoints.set_global(behavior);
    st.emit(EventKind::BreakpointsChanged);
    DefaultBehaviorSet {
        status: Ack::Ok,
        behavior,
    }
}

/// `POST /api/behavior`.
pub fn set_default_behavior(shared: &Shared, body: &Obj) -> Result<DefaultBehaviorSet, ApiError> {
    let Some(g) = str_field(body, "behavior").and_then(Global::parse) else {
        return Err(ApiError::bad_request(
            "invalid_behavior",
            format!("behavior must be one of {}", quote_list(&Global::NAMES)),
        ));
    };
    Ok(set_global(shared, g))
}

/// `POST /api/functions`: registers a function with its signature and metadata.
pub fn function_register(shared: &Shared, body: &Obj) -> Result<FunctionRegistered, ApiError> {
    let name = match str_field(body, "function_name") {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ApiError::bare(400, "function_name required")),
    };
    let signature = str_field(body, "signature");
    let blob = cas::verify_payload(
        body.get("function_cid"),
        body.get("function_data"),
        body.get("function_serialization_format"),
    )?;
    let mut metadata: Option<Obj> = None;
    if let Some(blob) = blob {
        // Only payloads that could not be pickled are sent here; they are placeholders.
        let decoded = pretty::payload(&blob.bytes, blob.format, None);
        let object_path = match blob.format {
            Some(crate::store::Format::Json) => Value::Null,
            _ => crate::pickle::view(&blob.bytes)
                .get("type")
                .cloned()
                .unwrap_or(Value::Null),
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
    if let Some(client_ref @ (Value::Number(_) | Value::String(_))) =
        body.get("function_client_ref")
    {
        let m = metadata.get_or_insert_with(Map::new);
        m.entry("client_ref").or_insert_with(|| client_ref.clone());
        m.entry("registered_at")
            .or_insert_with(|| json!(ids::now()));
    }
    let mut st = shared.lock();
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

/// `GET /api/functions`.
pub fn functions(shared: &Shared) -> FunctionListing {
    let st = shared.lock();
    FunctionListing {
        functions: st.functions.names().cloned().collect(),
        function_signatures: st.functions.signatures().clone(),
        function_metadata: st.functions.all_metadata().clone(),
    }
}
