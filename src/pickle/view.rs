//! The structured view `{type, repr, attributes}` used for inspection, with the original's
//! limits: nested views to depth 3 and at most 100 attributes per level. `repr` is the
//! renderer's text cut at 500 characters plus `...`.
//!
//! Recursion is bounded by the view depth (3); cycles simply stop at that depth.

use serde_json::{json, Map, Value};

use super::reader::{Node, NodeId, ObjKind, Tree};
use super::render::{self, dict_pairs, global_name, items, type_info};
use super::values::{kind, Formatter, Kind};
use super::Limits;

const MAX_VIEW_DEPTH: usize = 3;
const MAX_ATTRIBUTES: usize = 100;

/// The view of the root of a tree.
pub fn view_tree(t: &Tree, limits: &Limits) -> Value {
    view_node(t, t.root, limits, 1)
}

/// Python's type name of a node (`int`, `list`, `mymod.Point`).
pub fn type_name(t: &Tree, id: NodeId) -> String {
    let Some(node) = t.get(id) else {
        return "NoneType".to_owned();
    };
    match node {
        Node::None => "NoneType",
        Node::Bool(_) => "bool",
        Node::Int(_) | Node::BigInt(_) | Node::IntText(_) => "int",
        Node::Float(_) => "float",
        Node::Str(_) => "str",
        Node::Bytes(_) => "bytes",
        Node::ByteArray(_) => "bytearray",
        Node::List(_) => "list",
        Node::Tuple(_) => "tuple",
        Node::Dict(_) => "dict",
        Node::Set(_) => "set",
        Node::FrozenSet(_) => "frozenset",
        Node::Global(g) => {
            let r = render::global_repr(&g.module, &g.name);
            return if r.starts_with("<class") {
                "type"
            } else if r.starts_with("<built-in") {
                "builtin_function_or_method"
            } else {
                "function"
            }
            .to_owned();
        }
        Node::Object(o) => {
            if let Kind::Placeholder(d) = kind(t, id) {
                let s = |k: &str| render::dict_get(t, d, k).and_then(|v| t.str_of(v));
                return match (s("module"), s("qualname")) {
                    (Some(m), Some(q)) => format!("{m}.{q}"),
                    _ => "UnpicklablePlaceholder".to_owned(),
                };
            }
            match render::callee(t, o) {
                Some(("dill._dill", "_load_type" | "_create_type")) => {
                    return match type_info(t, id, 8) {
                        Some(ti) if ti.enum_class => "enum.EnumType",
                        _ => "type",
                    }
                    .to_owned()
                }
                Some(("dill._dill", "_create_function")) => return "function".to_owned(),
                Some(("dill._dill", "_create_code")) => return "code".to_owned(),
                Some(("_codecs", "encode")) => return "bytes".to_owned(),
                Some(("copyreg", "_reconstructor" | "__newobj__")) => {
                    if let Some(ti) = items(t, o.args).first().and_then(|&c| type_info(t, c, 8)) {
                        return ti.full_name();
                    }
                }
                Some(("builtins", n)) if n != "getattr" => return n.to_owned(),
                _ => {}
            }
            if let Some(ti) = type_info(t, o.callable, 8) {
                if matches!(o.kind, ObjKind::NewObj | ObjKind::Inst) || ti.exception {
                    return ti.full_name();
                }
                return ti.full_name();
            }
            if let Some((m, n)) = global_name(t, o.callable) {
                return format!("{m}.{n}");
            }
            "object"
        }
    }
    .to_owned()
}

fn is_scalar(t: &Tree, id: NodeId) -> bool {
    matches!(
        t.get(id),
        Some(Node::None | Node::Bool(_) | Node::Int(_) | Node::Str(_))
    ) || matches!(t.get(id), Some(Node::Float(f)) if f.is_finite())
}

fn child(t: &Tree, id: NodeId, limits: &Limits, depth: usize) -> Value {
    if is_scalar(t, id) {
        return Formatter::new(t, limits).value(id, 0, 1);
    }
    if depth > MAX_VIEW_DEPTH {
        return Value::String(Formatter::new(t, limits).repr(id));
    }
    view_node(t, id, limits, depth)
}

/// `{type, repr, attributes}` of one node at view depth `depth` (1 = root).
pub fn view_node(t: &Tree, id: NodeId, limits: &Limits, depth: usize) -> Value {
    let f = Formatter::new(t, limits);
    let repr = f.repr(id);
    let mut attrs = Map::new();
    let add = |attrs: &mut Map<String, Value>, k: String, v: &dyn Fn() -> Value| {
        if attrs.len() < MAX_ATTRIBUTES {
            attrs.insert(k, v());
        }
    };
    let mut total = 0usize;
    match t.get(id) {
        Some(Node::List(_) | Node::Tuple(_)) => {
            for (i, &c) in items(t, id).iter().enumerate() {
                total += 1;
                add(&mut attrs, i.to_string(), &|| {
                    child(t, c, limits, depth + 1)
                });
            }
        }
        Some(Node::Set(v)) => {
            for (i, &c) in v.iter().enumerate() {
                total += 1;
                add(&mut attrs, i.to_string(), &|| {
                    child(t, c, limits, depth + 1)
                });
            }
        }
        Some(Node::FrozenSet(v)) => {
            for (i, &c) in v.iter().enumerate() {
                total += 1;
                add(&mut attrs, i.to_string(), &|| {
                    child(t, c, limits, depth + 1)
                });
            }
        }
        Some(Node::Dict(d)) => {
            for &(k, v) in d.iter() {
                total += 1;
                let key = f.repr(k);
                add(&mut attrs, key, &|| child(t, v, limits, depth + 1));
            }
        }
        Some(Node::Object(o)) => match kind(t, id) {
            Kind::Placeholder(d) => {
                let mut fm = Formatter::new(t, limits);
                if let Value::Object(m) = fm.placeholder(d, 0) {
                    for (k, v) in m {
                        total += 1;
                        add(&mut attrs, k, &|| v.clone());
                    }
                }
            }
            Kind::Exception(_, args, state) => {
                total += 1;
                add(&mut attrs, "args".to_owned(), &|| {
                    let mut fm = Formatter::new(t, limits);
                    Value::Array(args.iter().map(|&a| fm.value(a, 0, 2)).collect())
                });
                for d in state.into_iter().flat_map(|s| state_dicts(t, s)) {
                    for &(k, v) in dict_pairs(t, d) {
                        total += 1;
                        let key = t.str_of(k).unwrap_or_else(|| f.repr(k));
                        add(&mut attrs, key, &|| child(t, v, limits, depth + 1));
                    }
                }
            }
            Kind::Other => {
                for d in o.state.last().into_iter().flat_map(|&s| state_dicts(t, s)) {
                    for &(k, v) in dict_pairs(t, d) {
                        total += 1;
                        let key = t.str_of(k).unwrap_or_else(|| f.repr(k));
                        add(&mut attrs, key, &|| child(t, v, limits, depth + 1));
                    }
                }
                for (i, &c) in o.items.iter().enumerate() {
                    total += 1;
                    add(&mut attrs, i.to_string(), &|| {
                        child(t, c, limits, depth + 1)
                    });
                }
                for &(k, v) in &o.pairs {
                    total += 1;
                    let key = f.repr(k);
                    add(&mut attrs, key, &|| child(t, v, limits, depth + 1));
                }
            }
        },
        _ => {}
    }
    if total > attrs.len() && attrs.len() >= MAX_ATTRIBUTES {
        attrs.insert(
            "__truncated__".to_owned(),
            json!(format!("<{} more attributes>", total - attrs.len())),
        );
    }
    json!({"type": type_name(t, id), "repr": repr, "attributes": attrs})
}

/// The dicts of an instance state: the dict itself, or both halves of `(dict, slots)`.
fn state_dicts(t: &Tree, s: NodeId) -> Vec<NodeId> {
    match t.get(s) {
        Some(Node::Dict(_)) => vec![s],
        Some(Node::Tuple(p)) => p
            .iter()
            .copied()
            .filter(|&x| matches!(t.get(x), Some(Node::Dict(_))))
            .collect(),
        _ => Vec::new(),
    }
}
