//! Replaying a recorded call in the live program (`POST /api/call-records/<id>/replay`): the
//! Python literals the server writes for the arguments (from JSON values, or from a stored
//! pickle read by the safe reader: nothing is unpickled or run here), and what the server
//! remembers while a replay's evaluation runs in a program. Pure: no I/O, no locks.

use serde_json::Value;

use crate::limits::{MAX_REPLAY_LITERAL_DEPTH, MAX_REPLAY_REPORTS};
use crate::pickle::{bigint, Node, NodeId, Tree};

/// A replay whose evaluation is running in a program (one per process at a time): every call
/// that program starts meanwhile runs without pausing (the program is itself paused, in the
/// REPL relay; a nested pause would wait on itself), and the first call of `function` is the
/// replayed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    /// The function replayed (its `method_name`).
    pub function: String,
    /// The record replayed.
    pub source: String,
    /// The call id of the replayed call, once it started.
    pub call_id: Option<String>,
}

/// The newest replay sequences' reports, by id, for the web UI to show after it asked for one
/// (in memory; at most `MAX_REPLAY_REPORTS`, the oldest forgotten first). The replayed calls
/// themselves are call records.
#[derive(Debug, Clone)]
pub struct Reports<T> {
    items: std::collections::VecDeque<(String, T)>,
}

impl<T> Default for Reports<T> {
    fn default() -> Self {
        Reports {
            items: std::collections::VecDeque::new(),
        }
    }
}

impl<T: Clone> Reports<T> {
    /// Keeps `report` as `id`, forgetting the oldest past the limit.
    pub fn keep(&mut self, id: String, report: T) {
        while self.items.len() >= MAX_REPLAY_REPORTS {
            self.items.pop_front();
        }
        self.items.push_back((id, report));
    }

    pub fn get(&self, id: &str) -> Option<T> {
        self.items
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, r)| r.clone())
    }
}

/// A Python string literal for `s`, in ASCII only (every other character escaped).
pub fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFF => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A Python bytes literal.
fn py_bytes(b: &[u8]) -> String {
    let mut out = String::from("b\"");
    for &x in b {
        match x {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b' '..=b'~' => out.push(x as char),
            _ => out.push_str(&format!("\\x{x:02x}")),
        }
    }
    out.push('"');
    out
}

/// A Python float literal (finite floats only: `inf` and `nan` have no literal).
fn py_float(f: f64) -> Result<String, String> {
    if !f.is_finite() {
        return Err(format!("the float {f} has no Python literal"));
    }
    // `{:?}` always writes a decimal point or an exponent, as Python reads a float.
    Ok(format!("{f:?}"))
}

/// Whether `s` is a Python identifier (ASCII letters, digits and `_`, not starting with a
/// digit).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The Python literal of a JSON value: `null` is `None`, `true` `True`, objects dicts with
/// string keys.
pub fn from_json(v: &Value) -> Result<String, String> {
    from_json_at(v, 0)
}

fn from_json_at(v: &Value, depth: usize) -> Result<String, String> {
    if depth > MAX_REPLAY_LITERAL_DEPTH {
        return Err(format!(
            "nested deeper than {MAX_REPLAY_LITERAL_DEPTH} levels"
        ));
    }
    Ok(match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => py_float(f)?,
            _ => return Err(format!("the number {n} has no Python literal")),
        },
        Value::String(s) => py_str(s),
        Value::Array(items) => {
            let parts: Result<Vec<String>, String> =
                items.iter().map(|x| from_json_at(x, depth + 1)).collect();
            format!("[{}]", parts?.join(", "))
        }
        Value::Object(m) => {
            let mut parts = Vec::with_capacity(m.len());
            for (k, x) in m {
                parts.push(format!("{}: {}", py_str(k), from_json_at(x, depth + 1)?));
            }
            format!("{{{}}}", parts.join(", "))
        }
    })
}

/// The Python literal of a decoded pickle: None, booleans, ints, finite floats, str, bytes,
/// and lists, tuples, dicts, sets and frozensets of those. Anything else (an instance, a
/// class, a function) is refused with the reason: the server cannot write it.
pub fn from_pickle(tree: &Tree) -> Result<String, String> {
    from_node(tree, tree.root, 0)
}

fn from_node(tree: &Tree, id: NodeId, depth: usize) -> Result<String, String> {
    if depth > MAX_REPLAY_LITERAL_DEPTH {
        return Err(format!(
            "nested deeper than {MAX_REPLAY_LITERAL_DEPTH} levels"
        ));
    }
    let seq = |ids: &[NodeId]| -> Result<Vec<String>, String> {
        ids.iter().map(|i| from_node(tree, *i, depth + 1)).collect()
    };
    let Some(node) = tree.get(id) else {
        return Err("the pickle refers to a value it does not hold".to_owned());
    };
    Ok(match node {
        Node::None => "None".to_owned(),
        Node::Bool(true) => "True".to_owned(),
        Node::Bool(false) => "False".to_owned(),
        Node::Int(i) => i.to_string(),
        Node::BigInt(raw) => bigint::to_decimal(raw),
        Node::IntText(t) => t.to_string(),
        Node::Float(f) => py_float(*f)?,
        Node::Str(b) => match std::str::from_utf8(b) {
            Ok(s) => py_str(s),
            Err(_) => return Err("a str with lone surrogates has no literal here".to_owned()),
        },
        Node::Bytes(b) => py_bytes(b),
        Node::ByteArray(b) => format!("bytearray({})", py_bytes(b)),
        Node::List(items) => format!("[{}]", seq(items)?.join(", ")),
        Node::Tuple(items) => match items.len() {
            1 => format!("({},)", seq(items)?.join("")),
            _ => format!("({})", seq(items)?.join(", ")),
        },
        Node::Set(items) if items.is_empty() => "set()".to_owned(),
        Node::Set(items) => format!("{{{}}}", seq(items)?.join(", ")),
        Node::FrozenSet(items) => format!("frozenset([{}])", seq(items)?.join(", ")),
        Node::Dict(pairs) => {
            let mut parts = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                parts.push(format!(
                    "{}: {}",
                    from_node(tree, *k, depth + 1)?,
                    from_node(tree, *v, depth + 1)?
                ));
            }
            format!("{{{}}}", parts.join(", "))
        }
        Node::Global(g) => {
            return Err(format!(
                "it is a reference to {}.{}, which the server cannot write as a literal",
                g.module, g.name
            ))
        }
        Node::Object(_) => return Err(
            "it is an object (an instance of a class), which the server cannot write as a literal"
                .to_owned(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_values_become_python_literals() {
        assert_eq!(
            from_json(&json!([1, -2.5, "a\"b\\\n\u{e9}\u{1F600}", null, true, {"k": [false]}]))
                .unwrap(),
            r#"[1, -2.5, "a\"b\\\n\xe9\U0001f600", None, True, {"k": [False]}]"#
        );
        assert_eq!(from_json(&json!(1e300)).unwrap(), "1e300");
        assert_eq!(from_json(&json!(u64::MAX)).unwrap(), u64::MAX.to_string());
        let mut deep = json!(1);
        for _ in 0..=MAX_REPLAY_LITERAL_DEPTH + 1 {
            deep = json!([deep]);
        }
        assert!(from_json(&deep).unwrap_err().contains("nested deeper"));
    }

    #[test]
    fn pickles_of_plain_values_become_literals_and_objects_are_refused() {
        use crate::pickle::builder::P;
        let limits = crate::pickle::Limits::default();
        // (1, "x") as protocol 2: PROTO 2, BININT1 1, SHORT_BINUNICODE "x", TUPLE2, STOP.
        let tuple = P::new().op(&[0x80, 2]).int(1).str("x").op(&[0x86]).done();
        let tree = crate::pickle::decode(&tuple, &limits).unwrap();
        assert_eq!(from_pickle(&tree).unwrap(), r#"(1, "x")"#);
        let object = P::new()
            .op(&[0x80, 2])
            .global("collections", "OrderedDict")
            .op(&[b')', 0x81])
            .done();
        let tree = crate::pickle::decode(&object, &limits).unwrap();
        assert!(from_pickle(&tree).unwrap_err().contains("object"));
    }

    #[test]
    fn reports_keep_the_newest() {
        let mut r = Reports::default();
        for i in 0..MAX_REPLAY_REPORTS + 1 {
            r.keep(i.to_string(), i);
        }
        assert_eq!(r.get("0"), None);
        assert_eq!(r.get("1"), Some(1));
        assert_eq!(
            r.get(&MAX_REPLAY_REPORTS.to_string()),
            Some(MAX_REPLAY_REPORTS)
        );
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("y") && is_identifier("_x1"));
        assert!(!is_identifier("1x") && !is_identifier("a b") && !is_identifier(""));
    }
}
