//! JSON display values: the placeholder dict (protocol doc §4.4), the exception dict (§4.5)
//! and the formatting of nested values inside them, plus `pretty` (§4.2 step 7).
//!
//! Limits: nested values are formatted to depth 3 (beyond: `__cideldill_truncated__`),
//! collections are cut at 50 entries (`__skipped__` / `"<N more items skipped>"`), nested
//! placeholders are expanded to depth 2 and summarized beyond; cycles are marked with
//! `circular_reference: true`. Recursion is bounded by these depths.

use serde_json::{json, Map, Value};

use super::reader::{Node, NodeId, ObjKind, Tree};
use super::render::{self, dict_get, dict_pairs, items, TypeInfo};
use super::{short_repr, Limits};

const MAX_FORMAT_DEPTH: usize = 3;
const MAX_ITEMS: usize = 50;
const MAX_PLACEHOLDER_DEPTH: usize = 2;

/// Placeholder fields in the order the original prints them.
const PLACEHOLDER_FIELDS: &[&str] = &[
    "type_name",
    "module",
    "qualname",
    "object_name",
    "object_path",
    "object_id",
    "repr_text",
    "str_text",
    "pickle_error",
    "pickle_attempts",
    "attributes",
    "failed_attributes",
    "depth",
    "capture_timestamp",
];

/// What the root of a decoded value is, for the JSON forms.
pub enum Kind {
    /// A client placeholder: the node of its field dict.
    Placeholder(NodeId),
    /// An exception of this class with these args, and its `__dict__` state if any.
    Exception(TypeInfo, Vec<NodeId>, Option<NodeId>),
    /// Anything else.
    Other,
}

/// Classifies a node.
pub fn kind(t: &Tree, id: NodeId) -> Kind {
    let Some(o) = t.object_of(id) else {
        return Kind::Other;
    };
    if let Some(("cideldill_client.custom_picklers", "_reconstruct_placeholder")) =
        render::callee(t, o)
    {
        if let Some(&d) = items(t, o.args).first() {
            if matches!(t.get(d), Some(Node::Dict(_))) {
                return Kind::Placeholder(d);
            }
        }
    }
    if let Some(cls) = render::type_info(t, o.callable, 8) {
        if cls.exception && matches!(o.kind, ObjKind::Reduce | ObjKind::NewObj | ObjKind::Inst) {
            let args = items(t, o.args).to_vec();
            return Kind::Exception(cls, args, o.state.last().copied());
        }
    }
    Kind::Other
}

/// `pretty` of a decoded tree.
pub fn pretty_tree(t: &Tree, limits: &Limits) -> Value {
    let mut f = Formatter::new(t, limits);
    match kind(t, t.root) {
        Kind::Placeholder(d) => f.placeholder(d, 0),
        Kind::Exception(cls, args, state) => f.exception(t.root, &cls, &args, state, 0),
        Kind::Other => Value::String(f.repr(t.root)),
    }
}

/// Formats nested values into JSON.
pub struct Formatter<'t> {
    t: &'t Tree,
    limits: &'t Limits,
    active: Vec<NodeId>,
}

impl<'t> Formatter<'t> {
    /// A formatter for `t`.
    pub fn new(t: &'t Tree, limits: &'t Limits) -> Self {
        Formatter {
            t,
            limits,
            active: Vec::new(),
        }
    }

    /// The repr cut at 500 characters, or a marked form if it cannot be rendered.
    pub fn repr(&self, id: NodeId) -> String {
        match short_repr(self.t, id, self.limits) {
            Ok(s) => s,
            Err(_) => "<unreprable: RecursionError>".to_owned(),
        }
    }

    /// The placeholder dict of a placeholder field dict, as the original server formats it at
    /// nesting `depth` (0 for the top level).
    pub fn placeholder(&mut self, d: NodeId, depth: usize) -> Value {
        let t = self.t;
        let mut m = Map::new();
        m.insert("__cideldill_placeholder__".into(), Value::Bool(true));
        m.insert(
            "summary".into(),
            Value::String(render::placeholder_summary(t, d)),
        );
        for &field in PLACEHOLDER_FIELDS {
            let v = match dict_get(t, d, field) {
                None => Value::Null,
                Some(v) => match field {
                    "attributes" => {
                        let pairs = dict_pairs(t, v);
                        let mut a = Map::new();
                        for &(k, val) in pairs.iter().take(MAX_ITEMS) {
                            let key = self.key(k);
                            let fv = self.server_value(val, depth);
                            a.insert(key, fv);
                        }
                        if pairs.len() > MAX_ITEMS {
                            a.insert(
                                "__skipped__".into(),
                                json!(format!(
                                    "{} more attributes skipped",
                                    pairs.len() - MAX_ITEMS
                                )),
                            );
                        }
                        Value::Object(a)
                    }
                    "failed_attributes" => {
                        let mut a = Map::new();
                        for &(k, val) in dict_pairs(t, v) {
                            a.insert(self.key(k), Value::String(self.repr(val)));
                        }
                        Value::Object(a)
                    }
                    "pickle_attempts" => match t.get(v) {
                        Some(Node::List(_) | Node::Tuple(_)) => Value::Array(
                            items(t, v)
                                .iter()
                                .map(|&x| self.server_value(x, MAX_PLACEHOLDER_DEPTH))
                                .collect(),
                        ),
                        _ => self.server_value(v, MAX_PLACEHOLDER_DEPTH),
                    },
                    _ => self.server_value(v, MAX_PLACEHOLDER_DEPTH),
                },
            };
            m.insert(field.into(), v);
        }
        Value::Object(m)
    }

    /// One placeholder attribute value as the original server formats it (§4.4): nested
    /// placeholders expanded while `depth < 2`, scalars as JSON, containers to depth 2 cut at
    /// 50 entries, anything else as its repr.
    fn server_value(&mut self, id: NodeId, depth: usize) -> Value {
        let t = self.t;
        if let Kind::Placeholder(d) = kind(t, id) {
            if depth < MAX_PLACEHOLDER_DEPTH {
                return self.placeholder(d, depth + 1);
            }
            return Value::String(render::placeholder_summary(t, d));
        }
        match t.get(id) {
            None | Some(Node::None) => return Value::Null,
            Some(Node::Bool(b)) => return Value::Bool(*b),
            Some(Node::Int(v)) => return json!(v),
            Some(Node::Float(f)) if f.is_finite() => return json!(f),
            Some(Node::Str(_)) => return Value::String(t.str_of(id).unwrap_or_default()),
            _ => {}
        }
        if depth > MAX_PLACEHOLDER_DEPTH {
            return Value::String(self.repr(id));
        }
        match t.get(id) {
            Some(Node::Dict(d)) => {
                let mut m = Map::new();
                for &(k, v) in d.iter().take(MAX_ITEMS) {
                    let key = self.key(k);
                    let fv = self.server_value(v, depth + 1);
                    m.insert(key, fv);
                }
                if d.len() > MAX_ITEMS {
                    m.insert(
                        "__skipped__".into(),
                        json!(format!("{} more items skipped", d.len() - MAX_ITEMS)),
                    );
                }
                Value::Object(m)
            }
            Some(Node::List(_) | Node::Tuple(_)) => {
                let all = items(t, id);
                let mut out: Vec<Value> = all
                    .iter()
                    .take(MAX_ITEMS)
                    .map(|&c| self.server_value(c, depth + 1))
                    .collect();
                if all.len() > MAX_ITEMS {
                    out.push(json!(format!(
                        "<{} more items skipped>",
                        all.len() - MAX_ITEMS
                    )));
                }
                Value::Array(out)
            }
            Some(Node::Set(s)) => self.set(s, depth),
            Some(Node::FrozenSet(s)) => self.set(s, depth),
            _ => Value::String(self.repr(id)),
        }
    }

    fn set(&mut self, s: &[NodeId], depth: usize) -> Value {
        let mut keyed: Vec<(String, NodeId)> = s.iter().map(|&c| (self.repr(c), c)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut members: Vec<Value> = keyed
            .iter()
            .take(MAX_ITEMS)
            .map(|&(_, c)| self.server_value(c, depth + 1))
            .collect();
        if keyed.len() > MAX_ITEMS {
            members.push(json!(format!(
                "<{} more items skipped>",
                keyed.len() - MAX_ITEMS
            )));
        }
        json!({"__cideldill_set__": members})
    }

    /// The exception dict.
    pub fn exception(
        &mut self,
        id: NodeId,
        cls: &TypeInfo,
        args: &[NodeId],
        state: Option<NodeId>,
        depth: usize,
    ) -> Value {
        let t = self.t;
        let module = if cls.module.is_empty() {
            "builtins".to_owned()
        } else {
            cls.module.clone()
        };
        let message = self.message(cls, args);
        let summary = if message.is_empty() {
            format!("{module}.{}", cls.qualname)
        } else {
            format!("{module}.{}: {message}", cls.qualname)
        };
        self.active.push(id);
        let args_json: Vec<Value> = args
            .iter()
            .map(|&a| self.value(a, depth + 1, depth + 1))
            .collect();
        let mut attrs = Map::new();
        if let Some(s) = state {
            let dicts: Vec<NodeId> = match t.get(s) {
                Some(Node::Dict(_)) => vec![s],
                Some(Node::Tuple(p)) => p.to_vec(),
                _ => Vec::new(),
            };
            for d in dicts {
                for &(k, v) in dict_pairs(t, d).iter().take(100) {
                    let key = self.key(k);
                    let fv = self.value(v, depth + 1, depth + 1);
                    attrs.insert(key, fv);
                }
            }
        }
        self.active.pop();
        json!({
            "__cideldill_exception__": true,
            "summary": summary,
            "type_name": cls.name(),
            "module": module,
            "qualname": cls.qualname,
            "message": message,
            "repr_text": self.repr(id),
            "args": args_json,
            "attributes": attrs,
            "failed_attributes": {},
        })
    }

    /// `str(exc)`.
    fn message(&self, cls: &TypeInfo, args: &[NodeId]) -> String {
        let t = self.t;
        let str_of = |a: NodeId| t.str_of(a).unwrap_or_else(|| self.repr(a));
        let shown = render::exception_args(t, cls, args);
        if shown.len() == 2 && shown.len() < args.len() || (shown.len() == 2 && is_os_error(cls)) {
            if let (Some(e), Some(s)) = (render::int_of(t, shown[0]), shown.get(1)) {
                let mut m = format!("[Errno {e}] {}", str_of(*s));
                if let Some(&f) = args
                    .get(2)
                    .filter(|&&f| !matches!(t.get(f), Some(Node::None)))
                {
                    m.push_str(&format!(": {}", self.repr(f)));
                    if let Some(&f2) = args
                        .get(4)
                        .filter(|&&f| !matches!(t.get(f), Some(Node::None)))
                    {
                        m.push_str(&format!(" -> {}", self.repr(f2)));
                    }
                }
                return m;
            }
        }
        match args {
            [] => String::new(),
            [a] if cls.name() == "KeyError" => self.repr(*a),
            [a] => str_of(*a),
            _ => {
                let mut r = render::Renderer::new(
                    t,
                    (super::MAX_REPR_CHARS + 1) * 4,
                    self.limits.max_depth,
                );
                let parts: Vec<String> = args
                    .iter()
                    .map(|&a| r.render(a).unwrap_or_default())
                    .collect();
                super::cut(&format!("({})", parts.join(", ")))
            }
        }
    }

    fn key(&self, k: NodeId) -> String {
        self.t.str_of(k).unwrap_or_else(|| self.repr(k))
    }

    /// A nested value as JSON (§4.4 "Collections", "Other values").
    pub fn value(&mut self, id: NodeId, depth: usize, level: usize) -> Value {
        let t = self.t;
        let Some(node) = t.get(id) else {
            return Value::Null;
        };
        match node {
            Node::None => return Value::Null,
            Node::Bool(b) => return Value::Bool(*b),
            Node::Int(v) => return json!(v),
            Node::Float(f) if f.is_finite() => return json!(f),
            Node::Str(_) => return Value::String(t.str_of(id).unwrap_or_default()),
            _ => {}
        }
        if self.active.contains(&id) {
            return json!({"circular_reference": true, "summary": self.repr(id)});
        }
        if level > MAX_FORMAT_DEPTH {
            return json!({"__cideldill_truncated__": true, "summary": self.repr(id)});
        }
        self.active.push(id);
        let v = match node {
            Node::List(_) | Node::Tuple(_) => {
                let all = items(t, id);
                let mut out: Vec<Value> = all
                    .iter()
                    .take(MAX_ITEMS)
                    .map(|&c| self.value(c, depth, level + 1))
                    .collect();
                if all.len() > MAX_ITEMS {
                    out.push(Value::String(format!(
                        "<{} more items skipped>",
                        all.len() - MAX_ITEMS
                    )));
                }
                Value::Array(out)
            }
            Node::Dict(d) => {
                let mut m = Map::new();
                for &(k, v) in d.iter().take(MAX_ITEMS) {
                    let key = self.key(k);
                    let fv = self.value(v, depth, level + 1);
                    m.insert(key, fv);
                }
                if d.len() > MAX_ITEMS {
                    m.insert("__skipped__".into(), json!(d.len() - MAX_ITEMS));
                }
                Value::Object(m)
            }
            Node::Set(s) => self.set(s, 0),
            Node::FrozenSet(s) => self.set(s, 0),
            Node::Object(_) => match kind(t, id) {
                Kind::Placeholder(d) => self.placeholder(d, MAX_PLACEHOLDER_DEPTH.min(depth)),
                Kind::Exception(cls, args, state) => self.exception(id, &cls, &args, state, level),
                Kind::Other => Value::String(self.repr(id)),
            },
            _ => Value::String(self.repr(id)),
        };
        self.active.pop();
        v
    }
}

fn is_os_error(cls: &TypeInfo) -> bool {
    cls.name().ends_with("Error") && render::exception_args_is_os(cls)
}
