//! Length limits of what a debug client sends besides payloads (`limits::MAX_CLIENT_FIELD_BYTES`):
//! the browser-client and Python-client endpoints can be called by any web page, and what they
//! keep (call records, open calls, interned names, events) must stay bounded by bytes, not only
//! by count. A request with a field over its limit is refused whole, before anything is kept,
//! with 400 `field_too_long` naming the field and the limit.
//!
//! Names and ids (`NAME_KEYS`, keyword-argument names) get `limits::MAX_FUNCTION_NAME_BYTES`;
//! payload texts (`data` of an item, `*_data` of a body) are bounded by the request body alone
//! (they go to the content store); every other field gets `limits::MAX_CLIENT_FIELD_BYTES` as
//! JSON text, whatever its key (so a field a later version starts to keep is bounded too).

use std::borrow::Cow;

use serde_json::Value;

use crate::error::ApiError;
use crate::limits::{MAX_CLIENT_FIELD_BYTES, MAX_FUNCTION_NAME_BYTES};
use crate::node::JsonNode;

use super::Obj;

/// Top-level fields that are names or ids: kept in every record, event and notification.
const NAME_KEYS: &[&str] = &[
    "method_name",
    "function_name",
    "call_id",
    "event_id",
    "status",
    "event_type",
    "exception_type",
    "pause_id",
    "session_id",
    "eval_id",
    "preferred_format",
    "process_pid",
    "process_start_time",
    "timestamp",
    "function_client_ref",
    "function_cid",
    "result_cid",
    "exception_cid",
    "function_serialization_format",
    "result_serialization_format",
    "exception_serialization_format",
];

/// Top-level fields holding items (`{cid, data?, client_ref?, ...}`): each item's fields but
/// its `data` are checked, and keyword names are names.
const ITEM_KEYS: &[&str] = &["args", "kwargs", "target"];

fn too_long(field: &str, len: usize, max: usize) -> ApiError {
    ApiError::bad_request(
        "field_too_long",
        format!(
            "{field} is {len} bytes or more; at most {max} are accepted (limits: \
             docs/limits.md)"
        ),
    )
    .with("field", Value::String(field.to_owned()))
    .with("max_bytes", Value::from(max))
}

/// Names that become function names (of records, breakpoints, registered functions).
const FUNCTION_NAME_KEYS: &[&str] = &["method_name", "function_name", "event_type"];

/// Refuses a function name that is a dot segment (`.` or `..`): the web UI puts function names
/// in URL paths (`/api/breakpoints/<name>/behavior`), and a browser resolves such a segment
/// (percent-encoded or not: `%2E%2E` is a dot segment to it too), so the form of a function
/// named `..` would change `POST /api/behavior`, the global default. No language names a
/// function so; such names are refused wherever a name enters (registration, breakpoints, call
/// reports), with 400 `invalid_function_name`.
pub fn check_function_name(field: &str, name: &str) -> Result<(), ApiError> {
    if name == "." || name == ".." {
        return Err(ApiError::bad_request(
            "invalid_function_name",
            format!(
                "{field} '{name}' is a dot segment, which a URL path cannot carry; no function \
                 is named so"
            ),
        )
        .with("field", Value::String(field.to_owned())));
    }
    Ok(())
}

fn is_payload_key(key: &str) -> bool {
    key == "data" || key.ends_with("_data")
}

fn limit_of(key: &str) -> usize {
    if NAME_KEYS.contains(&key) {
        MAX_FUNCTION_NAME_BYTES
    } else {
        MAX_CLIENT_FIELD_BYTES
    }
}

/// Texts a program may legitimately send long (`str(exc)` of any size, a stack as deep as the
/// recursion limit allows): cut to fit instead of refused, since the Python client exits on
/// any 400. A string is cut to `MAX_CLIENT_FIELD_BYTES` and ends with `...<cut: N bytes>`; a
/// call site keeps the innermost frames of its `stack_trace` that fit.
const CUT_KEYS: &[&str] = &["exception_message", "exception_traceback", "call_site"];
/// The same for a REPL answer (`/api/call/repl-result`): its texts.
const CUT_REPL_KEYS: &[&str] = &["result", "stdout", "error"];

/// `check_node`, after cutting the long texts of `CUT_KEYS` (see there): `Some` body when
/// something was cut, to be used instead of `body`.
pub fn fit_node<'a>(body: &JsonNode<'a>) -> Result<Option<JsonNode<'a>>, ApiError> {
    let over = |k: &str, v: &JsonNode<'_>| {
        CUT_KEYS.contains(&k) && node_len(v, MAX_CLIENT_FIELD_BYTES + 1) > MAX_CLIENT_FIELD_BYTES
    };
    let JsonNode::Obj(entries) = body else {
        return Ok(None);
    };
    if !entries.iter().any(|(k, v)| over(k, v)) {
        check_node(body)?;
        return Ok(None);
    }
    let mut entries = entries.clone();
    for (k, v) in entries.iter_mut() {
        if over(k, v) {
            *v = cut_node(k, v);
        }
    }
    let fitted = JsonNode::Obj(entries);
    check_node(&fitted)?;
    Ok(Some(fitted))
}

/// `check_obj`, after cutting the long texts of a REPL answer (`CUT_REPL_KEYS`).
pub fn fit_repl(body: &Obj) -> Result<Option<Obj>, ApiError> {
    let over = |k: &str, v: &Value| {
        CUT_REPL_KEYS.contains(&k)
            && matches!(v, Value::String(s) if s.len() > MAX_CLIENT_FIELD_BYTES)
    };
    if !body.iter().any(|(k, v)| over(k, v)) {
        check_obj(body)?;
        return Ok(None);
    }
    let mut fitted = body.clone();
    for (k, v) in fitted.iter_mut() {
        if over(k, v) {
            if let Value::String(s) = v {
                *v = Value::String(cut_text(s));
            }
        }
    }
    check_obj(&fitted)?;
    Ok(Some(fitted))
}

/// A text cut to `MAX_CLIENT_FIELD_BYTES`, ending with `...<cut: N bytes>`.
fn cut_text(s: &str) -> String {
    let mut keep = MAX_CLIENT_FIELD_BYTES - 64;
    while !s.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}...<cut: {} bytes>", &s[..keep], s.len() - keep)
}

fn cut_node<'a>(key: &str, v: &JsonNode<'a>) -> JsonNode<'a> {
    match v {
        JsonNode::Str(s) => JsonNode::Str(Cow::Owned(cut_text(s))),
        JsonNode::Obj(site) if key == "call_site" => {
            let others: usize = site
                .iter()
                .filter(|(k, _)| k != "stack_trace")
                .map(|(k, x)| k.len() + 4 + node_len(x, MAX_CLIENT_FIELD_BYTES + 1))
                .sum();
            let mut budget = MAX_CLIENT_FIELD_BYTES.saturating_sub(others + 64);
            let site = site
                .iter()
                .map(|(k, x)| match x {
                    JsonNode::Arr(frames) if k == "stack_trace" => {
                        let mut kept = Vec::new();
                        for f in frames {
                            let len = node_len(f, budget + 1) + 1;
                            if len > budget {
                                break;
                            }
                            budget -= len;
                            kept.push(f.clone());
                        }
                        (k.clone(), JsonNode::Arr(kept))
                    }
                    _ => (k.clone(), x.clone()),
                })
                .collect();
            JsonNode::Obj(site)
        }
        other => other.clone(),
    }
}

/// Checks a body parsed as a `JsonNode` (`/api/call/start`, `/api/call/complete`).
pub fn check_node(body: &JsonNode<'_>) -> Result<(), ApiError> {
    let JsonNode::Obj(entries) = body else {
        return Ok(());
    };
    for (key, value) in entries {
        let key: &str = key;
        if is_payload_key(key) {
            continue;
        }
        if ITEM_KEYS.contains(&key) {
            check_node_items(key, value)?;
            continue;
        }
        let max = limit_of(key);
        let len = node_len(value, max + 1);
        if len > max {
            return Err(too_long(key, len, max));
        }
        if let (true, JsonNode::Str(name)) = (FUNCTION_NAME_KEYS.contains(&key), value) {
            check_function_name(key, name)?;
        }
    }
    Ok(())
}

fn check_node_items(key: &str, value: &JsonNode<'_>) -> Result<(), ApiError> {
    let check_item = |name: &str, item: &JsonNode<'_>| -> Result<(), ApiError> {
        match item {
            JsonNode::Obj(fields) => {
                for (k, v) in fields {
                    if &**k == "data" {
                        continue;
                    }
                    let len = k.len() + node_len(v, MAX_CLIENT_FIELD_BYTES + 1);
                    if len > MAX_CLIENT_FIELD_BYTES {
                        return Err(too_long(
                            &format!("{name}.{k}"),
                            len,
                            MAX_CLIENT_FIELD_BYTES,
                        ));
                    }
                }
                Ok(())
            }
            other => {
                let len = node_len(other, MAX_CLIENT_FIELD_BYTES + 1);
                if len > MAX_CLIENT_FIELD_BYTES {
                    return Err(too_long(name, len, MAX_CLIENT_FIELD_BYTES));
                }
                Ok(())
            }
        }
    };
    match value {
        JsonNode::Arr(items) => {
            for (n, item) in items.iter().enumerate() {
                check_item(&format!("{key}[{n}]"), item)?;
            }
        }
        JsonNode::Obj(entries) if key == "kwargs" => {
            for (name, item) in entries {
                if name.len() > MAX_FUNCTION_NAME_BYTES {
                    return Err(too_long(
                        "a keyword name in kwargs",
                        name.len(),
                        MAX_FUNCTION_NAME_BYTES,
                    ));
                }
                check_item(&format!("kwargs.{name}"), item)?;
            }
        }
        item => check_item(key, item)?,
    }
    Ok(())
}

/// Checks a body parsed as a JSON object (`/api/call/event`, `/api/functions`,
/// `/api/call/repl-result`).
pub fn check_obj(body: &Obj) -> Result<(), ApiError> {
    // The same rules as `check_node`; bodies parsed as `Value` are the rarer ones, so they are
    // walked as `JsonNode`s without copying their strings.
    for (key, value) in body {
        if is_payload_key(key) {
            continue;
        }
        // These bodies carry no items: `args` or `kwargs` here are kept whole.
        let max = limit_of(key);
        let len = value_len(value, max + 1);
        if len > max {
            return Err(too_long(key, len, max));
        }
        if let (true, Value::String(name)) = (FUNCTION_NAME_KEYS.contains(&key.as_str()), value) {
            check_function_name(key, name)?;
        }
    }
    Ok(())
}

/// About the length of a node as JSON text (escapes not counted), counting stops past `stop`.
fn node_len(n: &JsonNode<'_>, stop: usize) -> usize {
    fn walk(n: &JsonNode<'_>, total: &mut usize, stop: usize) {
        if *total > stop {
            return;
        }
        match n {
            JsonNode::Null | JsonNode::Bool(_) => *total += 5,
            JsonNode::Num(x) => *total += x.as_str().len(),
            JsonNode::Str(s) => *total += s.len() + 2,
            JsonNode::Arr(a) => {
                *total += 2;
                for x in a {
                    *total += 1;
                    walk(x, total, stop);
                    if *total > stop {
                        return;
                    }
                }
            }
            JsonNode::Obj(entries) => {
                *total += 2;
                for (k, v) in entries {
                    *total += k.len() + 4;
                    walk(v, total, stop);
                    if *total > stop {
                        return;
                    }
                }
            }
        }
    }
    let mut total = 0;
    walk(n, &mut total, stop);
    // A bare string counts its text only (the limit is on the name, not its quotes).
    match n {
        JsonNode::Str(s) => s.len(),
        _ => total,
    }
}

/// [`node_len`] for a `Value`.
fn value_len(v: &Value, stop: usize) -> usize {
    fn walk(v: &Value, total: &mut usize, stop: usize) {
        if *total > stop {
            return;
        }
        match v {
            Value::Null | Value::Bool(_) => *total += 5,
            Value::Number(x) => *total += x.to_string().len(),
            Value::String(s) => *total += s.len() + 2,
            Value::Array(a) => {
                *total += 2;
                for x in a {
                    *total += 1;
                    walk(x, total, stop);
                    if *total > stop {
                        return;
                    }
                }
            }
            Value::Object(m) => {
                *total += 2;
                for (k, x) in m {
                    *total += k.len() + 4;
                    walk(x, total, stop);
                    if *total > stop {
                        return;
                    }
                }
            }
        }
    }
    let mut total = 0;
    walk(v, &mut total, stop);
    match v {
        Value::String(s) => s.len(),
        _ => total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: Value) -> JsonNode<'static> {
        JsonNode::from_value(v)
    }

    #[test]
    fn a_long_name_is_refused_naming_the_field() {
        let long = "m".repeat(MAX_FUNCTION_NAME_BYTES + 1);
        let e = check_node(&node(json!({"method_name": long}))).unwrap_err();
        let text = format!("{e:?}");
        assert!(
            text.contains("method_name") && text.contains("field_too_long"),
            "{text}"
        );
        let ok = "m".repeat(MAX_FUNCTION_NAME_BYTES);
        assert!(check_node(&node(json!({"method_name": ok}))).is_ok());
    }

    #[test]
    fn payloads_are_not_counted_but_the_rest_of_an_item_is() {
        let big = "x".repeat(MAX_CLIENT_FIELD_BYTES + 10);
        let body = json!({"args": [{"cid": "c", "data": big.clone()}], "result_data": big});
        assert!(check_node(&node(body)).is_ok());
        let body = json!({"function_data": big.clone(), "result_data": big.clone()});
        assert!(check_obj(body.as_object().unwrap()).is_ok());
        let bad = json!({"args": [{"cid": "c", "client_ref": big}]});
        let e = format!("{:?}", check_node(&node(bad)).unwrap_err());
        assert!(e.contains("args[0].client_ref"), "{e}");
        let kw = json!({"kwargs": {"k".repeat(MAX_FUNCTION_NAME_BYTES + 1): {"cid": "c"}}});
        assert!(check_node(&node(kw)).is_err());
    }

    #[test]
    fn long_exception_texts_and_deep_stacks_are_cut_to_fit() {
        let big = "é".repeat(MAX_CLIENT_FIELD_BYTES);
        let frames: Vec<Value> = (0..40_000)
            .map(|n| json!({"filename": "/a.py", "lineno": n, "function": "f"}))
            .collect();
        let body = node(json!({
            "exception_message": big, "exception_traceback": "t",
            "call_site": {"timestamp": 1.0, "stack_trace": frames},
        }));
        let fitted = fit_node(&body).unwrap().expect("cut");
        let msg = fitted
            .get("exception_message")
            .and_then(JsonNode::as_str)
            .unwrap();
        assert!(msg.len() <= MAX_CLIENT_FIELD_BYTES && msg.ends_with(" bytes>"));
        let site = fitted.get("call_site").unwrap();
        let Some(JsonNode::Arr(kept)) = site.get("stack_trace") else {
            panic!("a stack")
        };
        assert!(kept.len() > 1000 && kept.len() < 40_000, "{}", kept.len());
        assert_eq!(
            kept[0].get("lineno").map(JsonNode::to_value),
            Some(json!(0)),
            "innermost"
        );
        assert!(fit_node(&node(json!({"exception_message": "short"})))
            .unwrap()
            .is_none());
        // Names are still refused.
        let name =
            json!({"method_name": "m".repeat(5000), "exception_message": "x".repeat(2 << 20)});
        assert!(fit_node(&node(name)).is_err());
        let repl = json!({"stdout": "s".repeat(2 << 20), "eval_id": "e"});
        let fitted = fit_repl(repl.as_object().unwrap()).unwrap().expect("cut");
        assert!(fitted["stdout"].as_str().unwrap().len() <= MAX_CLIENT_FIELD_BYTES);
    }

    #[test]
    fn dot_segments_are_no_function_names() {
        for name in [".", ".."] {
            let e = check_node(&node(json!({"method_name": name}))).unwrap_err();
            assert!(format!("{e:?}").contains("invalid_function_name"));
            let body = json!({"function_name": name});
            assert!(check_obj(body.as_object().unwrap()).is_err());
        }
        for name in ["...", "a.b", ".x", "%2E%2E"] {
            assert!(check_function_name("function_name", name).is_ok(), "{name}");
        }
    }

    #[test]
    fn other_fields_are_bounded_as_json_text() {
        let site = json!({"call_site": {"stack": vec!["frame"; MAX_CLIENT_FIELD_BYTES / 4]}});
        assert!(check_node(&node(site.clone())).is_err());
        assert!(check_obj(site.as_object().unwrap()).is_err());
        let small = json!({"call_site": {"stack": ["f"]}, "page_url": "http://x/"});
        assert!(check_obj(small.as_object().unwrap()).is_ok());
    }
}
