//! Display values of stored items (protocol doc §4): what the UI, the REST API and MCP show
//! for arguments, results, exceptions and REPL output. JSON items render as their JSON value;
//! pickles go through the safe reader in `pickle`, which never executes anything. Pure: it
//! renders the bytes it is given; reading them from the content store is `render.rs`'s job.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::pickle;
use crate::store::Format;

/// Prefix of the value shown for a payload that could not be rendered.
pub const UNAVAILABLE_PREFIX: &str = "<unavailable: ";

/// The value shown for an item without a CID string.
pub fn missing_cid() -> Value {
    json!("<missing cid>")
}

/// The value shown in place of a rendered value once a response has shown
/// `MAX_RENDERED_PER_RESPONSE` bytes of them (the value itself is fetched by its CID).
pub fn cut_response() -> Value {
    json!("<cut: response budget>")
}

/// The value shown for a CID whose payload is not stored.
pub fn cid_missing(cid: &dyn std::fmt::Display) -> Value {
    json!(format!("<cid:{cid} missing>"))
}

/// The value shown when the content store could not be read.
pub fn storage_unavailable(err: &dyn std::fmt::Display) -> Value {
    json!(format!("{UNAVAILABLE_PREFIX}storage error: {err}>"))
}

/// Renders one payload: `bytes` stored as `stored`, read as `format` when given. A pickle's
/// value is bounded by its render budget (`pickle::Limits::render_budget`), however much of it
/// is shared through the memo; a JSON item's is its own value (no sharing: linear in its size).
pub fn payload(bytes: &[u8], stored: Option<Format>, format: Option<&Value>) -> Value {
    let format = match format {
        Some(Value::String(s)) if s == "json" => Some(Format::Json),
        Some(Value::String(s)) if s == "dill" => Some(Format::Dill),
        None | Some(Value::Null) => stored,
        Some(other) => {
            let name = other
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| other.to_string());
            return json!(format!("<unavailable: invalid format {name}>"));
        }
    };
    match format {
        Some(Format::Json) => match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => v,
            Err(_) => json!("<unavailable: JSONDecodeError>"),
        },
        // An unknown format tries JSON first, like the original (pickles never parse as JSON).
        None => match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => v,
            Err(_) => pickle::pretty(bytes),
        },
        Some(Format::Dill) => pickle::pretty(bytes),
    }
}

/// The structured view of a payload for inspection (`GET /api/objects/<cid>`, MCP's
/// `breakpoint_inspect_object`). A pickle's view is bounded by its render budget
/// (`pickle::Limits::view_budget`); a JSON item's is at most 100 of its members.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct View {
    /// Python's type name (`int`, `mymod.Point`).
    #[serde(rename = "type")]
    pub type_name: String,
    pub repr: String,
    /// At most 100 attributes, nested views to depth 3.
    pub attributes: Map<String, Value>,
}

/// The view of `bytes` stored as `stored`.
pub fn view(bytes: &[u8], stored: Option<Format>) -> View {
    view_from(bytes, stored, 0)
}

/// [`view`] with the top level's attributes from the `from`th on: the next page of a long
/// dict or list (`__truncated__` counts those after the page).
pub fn view_from(bytes: &[u8], stored: Option<Format>, from: usize) -> View {
    let json_value = match stored {
        Some(Format::Json) | None => serde_json::from_slice::<Value>(bytes).ok(),
        Some(Format::Dill) => None,
    };
    match json_value {
        Some(v) => {
            let type_name = match &v {
                Value::Null => "None",
                Value::Bool(_) => "bool",
                Value::Number(n) if n.is_f64() => "float",
                Value::Number(_) => "int",
                Value::String(_) => "str",
                Value::Array(_) => "list",
                Value::Object(_) => "dict",
            };
            let mut attributes: Map<String, Value> = match &v {
                Value::Object(m) => m
                    .iter()
                    .skip(from)
                    .take(100)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                _ => Map::new(),
            };
            if let Value::Object(m) = &v {
                let left = m.len().saturating_sub(from + attributes.len());
                if left > 0 {
                    attributes.insert(
                        "__truncated__".to_owned(),
                        Value::String(format!("<{left} more attributes>")),
                    );
                }
            }
            View {
                type_name: type_name.to_owned(),
                repr: cut(&v.to_string()),
                attributes,
            }
        }
        None => {
            // Taken apart rather than copied: a view may be as large as its render budget.
            let Value::Object(mut v) = pickle::view_from(bytes, from) else {
                return View {
                    type_name: "<unavailable>".to_owned(),
                    repr: String::new(),
                    attributes: Map::new(),
                };
            };
            let mut text = |key: &str| match v.remove(key) {
                Some(Value::String(s)) => s,
                _ => String::new(),
            };
            let (type_name, repr) = (text("type"), text("repr"));
            View {
                type_name,
                repr,
                attributes: match v.remove("attributes") {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                },
            }
        }
    }
}

/// Whether a display value says the payload could not be rendered.
pub fn is_unrendered(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with(UNAVAILABLE_PREFIX))
}

/// Cuts text at 500 characters, appending `...` when cut (the original's rule).
pub fn cut(text: &str) -> String {
    pickle::cut(text)
}

/// The text form of an exception reported at completion (protocol doc §4.3).
pub fn exception_text(exception_type: &str, message: &str, traceback: Option<&Value>) -> Value {
    let (module, name) = match exception_type.rsplit_once('.') {
        Some((m, n)) => (m, n),
        None => ("builtins", exception_type),
    };
    let summary = if message.is_empty() {
        exception_type.to_owned()
    } else {
        format!("{exception_type}: {message}")
    };
    let mut out = Map::new();
    out.insert("__cideldill_exception__".into(), json!(true));
    out.insert("summary".into(), json!(summary));
    out.insert("type_name".into(), json!(name));
    out.insert("module".into(), json!(module));
    out.insert("qualname".into(), json!(name));
    out.insert("message".into(), json!(message));
    out.insert(
        "traceback".into(),
        traceback.cloned().unwrap_or(Value::Null),
    );
    Value::Object(out)
}

/// Whether a decoded value is a client placeholder (an object the client could not pickle).
pub fn is_placeholder(value: &Value) -> bool {
    value
        .get("__cideldill_placeholder__")
        .and_then(Value::as_bool)
        == Some(true)
}

/// What two runs' placeholders are compared by: the placeholder (and those nested in its
/// attributes) without what names one process's object (`object_id`, its memory address, and
/// `capture_timestamp`), and with memory addresses in its texts (`<X object at 0x7f...>`)
/// written `0x…`. `None` when `value` holds no placeholder (a plain value is compared as is).
pub fn placeholder_key(value: &Value) -> Option<Value> {
    fn walk(v: &Value, inside: bool) -> Value {
        match v {
            Value::Object(m) => {
                let here = inside || is_placeholder(v);
                Value::Object(
                    m.iter()
                        .filter(|(k, _)| {
                            !(here && matches!(k.as_str(), "object_id" | "capture_timestamp"))
                        })
                        .map(|(k, x)| (k.clone(), walk(x, here)))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, inside)).collect()),
            Value::String(s) if inside => Value::String(without_addresses(s)),
            other => other.clone(),
        }
    }
    fn holds(v: &Value) -> bool {
        match v {
            Value::Object(m) => is_placeholder(v) || m.values().any(holds),
            Value::Array(a) => a.iter().any(holds),
            _ => false,
        }
    }
    holds(value).then(|| walk(value, false))
}

/// `text` with each memory address (`0x` and at least 6 hex digits) written `0x…`.
pub fn without_addresses(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 1 < b.len() {
        if b[i] == b'0' && (b[i + 1] == b'x' || b[i + 1] == b'X') {
            let digits = b[i + 2..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            if digits >= 6 {
                out.push_str(&text[copied..i]);
                out.push_str("0x…");
                i += 2 + digits;
                copied = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_keyed_without_what_names_one_process() {
        let run = |id: &str, at: f64, sock: &str| {
            json!({"__cideldill_placeholder__": true, "type_name": "Channel", "object_id": id,
                   "capture_timestamp": at, "repr_text": format!("<Channel object at {id}>"),
                   "attributes": {"sock": {"__cideldill_placeholder__": true, "object_id": sock,
                                           "repr_text": "<socket.socket fd=3>"}}})
        };
        let a = run("0x7fe02325fed0", 1.0, "0x7fe0229ebee0");
        let b = run("0x7f3c6c87f8d0", 2.0, "0x7f3c6c897ee0");
        assert_ne!(a, b);
        assert_eq!(placeholder_key(&a), placeholder_key(&b));
        assert_eq!(
            placeholder_key(&a).unwrap()["repr_text"],
            "<Channel object at 0x…>"
        );
        // A real difference in a placeholder's attributes still shows.
        let mut c = b.clone();
        c["attributes"]["sock"]["repr_text"] = json!("<socket.socket fd=4>");
        assert_ne!(placeholder_key(&a), placeholder_key(&c));
        // Plain values have no key: they are compared as they are.
        assert_eq!(placeholder_key(&json!("0x7fe02325fed0")), None);
        assert_eq!(placeholder_key(&json!({"a": [1]})), None);
        assert_eq!(
            without_addresses("at 0x1f and 0xABCDEF12!"),
            "at 0x1f and 0x…!"
        );
    }

    #[test]
    fn json_payloads_render_as_their_value() {
        let json = Some(Format::Json);
        assert_eq!(
            payload(br#"{"a": [1, 2]}"#, json, None),
            json!({"a": [1, 2]})
        );
        assert_eq!(
            payload(b"{", json, None),
            json!("<unavailable: JSONDecodeError>")
        );
    }

    #[test]
    fn pickles_render_as_python_repr() {
        let dill = Some(Format::Dill);
        assert_eq!(payload(&[0x80, 4, 0x4b, 2, 0x2e], dill, None), json!("2"));
        let v = payload(&[0x80, 4, 0xff], dill, None);
        assert!(is_unrendered(&v), "corrupt pickles are marked: {v}");
    }

    #[test]
    fn formats_are_read_like_the_original() {
        assert_eq!(
            payload(b"1", None, Some(&json!("yaml"))),
            json!("<unavailable: invalid format yaml>")
        );
        assert_eq!(
            payload(b"1", None, None),
            json!(1),
            "unknown format tries JSON first"
        );
        assert_eq!(
            payload(b"1", Some(Format::Dill), Some(&json!("json"))),
            json!(1),
            "the requested format wins over the stored one"
        );
        assert_eq!(missing_cid(), json!("<missing cid>"));
        assert_eq!(cid_missing(&"ab"), json!("<cid:ab missing>"));
        assert!(is_unrendered(&storage_unavailable(&"disk on fire")));
    }

    #[test]
    fn views_of_json_and_pickles() {
        let v = view(br#"{"a": 1}"#, Some(Format::Json));
        assert_eq!(
            (v.type_name.as_str(), v.repr.as_str()),
            ("dict", r#"{"a":1}"#)
        );
        assert_eq!(v.attributes.get("a"), Some(&json!(1)));
        let v = view(&[0x80, 4, 0x4b, 2, 0x2e], Some(Format::Dill));
        assert_eq!((v.type_name.as_str(), v.repr.as_str()), ("int", "2"));
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            json!({"type": "int", "repr": "2", "attributes": {}}),
            "serialized in the wire shape"
        );
        let v = view(&[0x80, 4, 0xff], Some(Format::Dill));
        assert_eq!(v.type_name, "<unavailable>");
    }

    #[test]
    fn exception_text_form() {
        let v = exception_text("ZeroDivisionError", "division by zero", Some(&json!("tb")));
        assert_eq!(v["summary"], "ZeroDivisionError: division by zero");
        assert_eq!(v["module"], "builtins");
        let v = exception_text("pkg.mod.Custom", "", None);
        assert_eq!(v["summary"], "pkg.mod.Custom");
        assert_eq!(v["module"], "pkg.mod");
        assert_eq!(v["type_name"], "Custom");
    }

    #[test]
    fn cut_appends_ellipsis_past_500_chars() {
        assert_eq!(cut("abc"), "abc");
        let long = "é".repeat(501);
        let c = cut(&long);
        assert_eq!(c.chars().count(), 503);
        assert!(c.ends_with("..."));
    }
}
