//! Display values of stored items (protocol doc §4): what the UI, the REST API and MCP show
//! for arguments, results, exceptions and REPL output. JSON items render as their JSON value;
//! pickles go through the safe reader in `pickle`, which never executes anything.

use serde_json::{json, Map, Value};

use crate::pickle;
use crate::store::{Blob, Format, Store};

/// Prefix of the value shown for a payload that could not be rendered.
pub const UNAVAILABLE_PREFIX: &str = "<unavailable: ";

/// The display value of an item object (`{"cid", "serialization_format"?}`).
pub fn item(store: &Store, item: &Value) -> Value {
    cid(store, item.get("cid"), item.get("serialization_format"))
}

/// The display value of the payload stored under `cid`, read as `format` when given.
pub fn cid(store: &Store, cid: Option<&Value>, format: Option<&Value>) -> Value {
    let Some(Value::String(cid)) = cid else {
        return json!("<missing cid>");
    };
    match store.get(cid) {
        Ok(Some(blob)) => payload(&blob, format),
        Ok(None) => json!(format!("<cid:{cid} missing>")),
        Err(err) => json!(format!("<unavailable: storage error: {err}>")),
    }
}

/// Renders one stored payload.
pub fn payload(blob: &Blob, format: Option<&Value>) -> Value {
    let format = match format {
        Some(Value::String(s)) if s == "json" => Some(Format::Json),
        Some(Value::String(s)) if s == "dill" => Some(Format::Dill),
        None | Some(Value::Null) => blob.format,
        Some(other) => {
            let name = other
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| other.to_string());
            return json!(format!("<unavailable: invalid format {name}>"));
        }
    };
    match format {
        Some(Format::Json) => match serde_json::from_slice::<Value>(&blob.bytes) {
            Ok(v) => v,
            Err(_) => json!("<unavailable: JSONDecodeError>"),
        },
        // An unknown format tries JSON first, like the original (pickles never parse as JSON).
        None => match serde_json::from_slice::<Value>(&blob.bytes) {
            Ok(v) => v,
            Err(_) => pickle::pretty(&blob.bytes),
        },
        Some(Format::Dill) => pickle::pretty(&blob.bytes),
    }
}

/// The structured view of a stored payload for inspection: `{type, repr, attributes}`.
pub fn view(blob: &Blob) -> Value {
    let json_value = match blob.format {
        Some(Format::Json) | None => serde_json::from_slice::<Value>(&blob.bytes).ok(),
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
            let attributes = match &v {
                Value::Object(m) => Value::Object(
                    m.iter()
                        .take(100)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                _ => json!({}),
            };
            json!({"type": type_name, "repr": cut(&v.to_string()), "attributes": attributes})
        }
        None => pickle::view(&blob.bytes),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::cid_of;
    use crate::store::NewBlob;

    fn store_with(bytes: &[u8], format: Option<Format>) -> (Store, String) {
        let store = Store::memory();
        let cid = cid_of(bytes);
        store
            .put_blobs(
                vec![NewBlob {
                    cid: crate::intern::Cid::parse(&cid).expect("a CID"),
                    bytes: bytes.to_vec(),
                    format,
                }],
                1.0,
            )
            .unwrap();
        (store, cid)
    }

    #[test]
    fn json_items_render_as_their_value() {
        let (store, cid) = store_with(br#"{"a": [1, 2]}"#, Some(Format::Json));
        assert_eq!(item(&store, &json!({"cid": cid})), json!({"a": [1, 2]}));
        let (store, cid) = store_with(b"{", Some(Format::Json));
        assert_eq!(
            item(&store, &json!({"cid": cid})),
            json!("<unavailable: JSONDecodeError>")
        );
    }

    #[test]
    fn pickles_render_as_python_repr() {
        let (store, cid) = store_with(&[0x80, 4, 0x4b, 2, 0x2e], Some(Format::Dill));
        assert_eq!(item(&store, &json!({"cid": cid})), json!("2"));
        let (store, cid) = store_with(&[0x80, 4, 0xff], Some(Format::Dill));
        let v = item(&store, &json!({"cid": cid}));
        assert!(is_unrendered(&v), "corrupt pickles are marked: {v}");
    }

    #[test]
    fn missing_and_unknown_cids_render_like_the_original() {
        let store = Store::memory();
        assert_eq!(item(&store, &json!({})), json!("<missing cid>"));
        assert_eq!(
            item(&store, &json!({"cid": "ab"})),
            json!("<cid:ab missing>")
        );
        let (store, cid) = store_with(b"1", None);
        assert_eq!(
            cid_fn(&store, &cid, Some(json!("yaml"))),
            json!("<unavailable: invalid format yaml>")
        );
        assert_eq!(
            cid_fn(&store, &cid, None),
            json!(1),
            "unknown format tries JSON first"
        );
    }

    fn cid_fn(store: &Store, c: &str, format: Option<Value>) -> Value {
        cid(store, Some(&json!(c)), format.as_ref())
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
