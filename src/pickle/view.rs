//! The structured view `{type, repr, attributes}` used for inspection, with the original's
//! limits: nested views to depth 3 and at most 100 attributes per level. `repr` is the
//! renderer's text cut at 500 characters plus `...`.
//!
//! Recursion is bounded by the view depth (3); cycles simply stop at that depth. The whole
//! view is charged to one budget (100 x 100 x 100 nested views of one shared list would
//! otherwise be shown in full): once it is spent, a view or value left out is
//! `"<cut: render budget>"` and the attributes not shown are counted under `__cut__`.

use serde_json::{json, Map, Value};

use super::budget::{Budget, JSON_MARKER, RENDER_JSON_VALUE_COST};
use super::reader::{Node, NodeId, ObjKind, Tree};
use super::render::{self, dict_pairs, global_name, items, type_info};
use super::values::{kind, Formatter, Kind, CUT_KEY};
use super::Limits;

const MAX_VIEW_DEPTH: usize = 3;
const MAX_ATTRIBUTES: usize = 100;

/// The view of the root of a tree, within `budget`, its attributes from the `from`th on (the
/// ones before are counted, not shown: a page of a long list or dict).
pub fn view_tree(t: &Tree, limits: &Limits, budget: &Budget, from: usize) -> Value {
    let mut f = Formatter::new(t, limits, budget);
    view_at(&mut f, t, t.root, 1, from)
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
                let s = |k: &'static str| render::dict_get(t, d, k).and_then(|v| t.str_of(v));
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

fn child(f: &mut Formatter<'_>, t: &Tree, id: NodeId, depth: usize) -> Value {
    if is_scalar(t, id) {
        return f.value(id, 0, 1);
    }
    if depth > MAX_VIEW_DEPTH {
        if !f.enter() {
            return Value::String(JSON_MARKER.to_owned());
        }
        return Value::String(f.repr(id));
    }
    view_node(f, t, id, depth)
}

/// The attributes of one view: at most 100, then `__truncated__` with the count of the others;
/// `__cut__` with that count when the budget ran out first.
struct Attrs {
    map: Map<String, Value>,
    total: usize,
    /// Attributes passed over before the first shown (a later page).
    passed: usize,
}

impl Attrs {
    /// Whether another attribute is wanted (counting it either way).
    fn wants(&mut self, f: &Formatter<'_>) -> bool {
        self.total += 1;
        self.map.len() < MAX_ATTRIBUTES && !f.budget().is_cut()
    }

    fn add(&mut self, f: &Formatter<'_>, k: String, v: Value) {
        // The key's cost (the value paid its own).
        f.budget().charge(k.len() + RENDER_JSON_VALUE_COST);
        self.map.insert(k, v);
    }

    /// Counts `n` attributes not looked at (past the 100 shown or the budget).
    fn skip(&mut self, n: usize) {
        self.total += n;
    }

    /// Whether the attributes still to come can be counted without looking at them.
    fn done(&self, f: &Formatter<'_>) -> bool {
        self.map.len() >= MAX_ATTRIBUTES || f.budget().is_cut()
    }

    fn finish(mut self, f: &Formatter<'_>) -> Map<String, Value> {
        let left = self.total.saturating_sub(self.map.len() + self.passed);
        if left > 0 && f.budget().is_cut() {
            self.map.insert(
                CUT_KEY.to_owned(),
                json!(format!("<cut: render budget, {left} more attributes>")),
            );
        } else if left > 0 && self.map.len() >= MAX_ATTRIBUTES {
            self.map.insert(
                "__truncated__".to_owned(),
                json!(format!("<{left} more attributes>")),
            );
        }
        self.map
    }
}

/// `{type, repr, attributes}` of one node at view depth `depth` (1 = root).
pub fn view_node(f: &mut Formatter<'_>, t: &Tree, id: NodeId, depth: usize) -> Value {
    view_at(f, t, id, depth, 0)
}

/// [`view_node`] with the node's own attributes shown from the `from`th on.
fn view_at(f: &mut Formatter<'_>, t: &Tree, id: NodeId, depth: usize, from: usize) -> Value {
    if !f.enter() {
        return Value::String(JSON_MARKER.to_owned());
    }
    let repr = f.repr(id);
    let mut a = Attrs {
        map: Map::new(),
        total: 0,
        passed: 0,
    };
    let seq = |f: &mut Formatter<'_>, a: &mut Attrs, v: &[NodeId]| {
        let pass = from.saturating_sub(a.passed).min(v.len());
        a.passed += pass;
        a.total += pass;
        for (i, &c) in v.iter().enumerate().skip(pass) {
            if a.done(f) {
                a.skip(v.len() - i);
                break;
            }
            if a.wants(f) {
                let cv = child(f, t, c, depth + 1);
                a.add(f, i.to_string(), cv);
            }
        }
    };
    // Pairs keyed by the key's repr (or its string), added while fewer than 100 distinct keys
    // are shown: duplicate keys replace each other, as in the original.
    let pairs = |f: &mut Formatter<'_>, a: &mut Attrs, d: &[(NodeId, NodeId)], by_str: bool| {
        let pass = from.saturating_sub(a.passed).min(d.len());
        a.passed += pass;
        a.total += pass;
        for (i, &(k, v)) in d.iter().enumerate().skip(pass) {
            if a.done(f) {
                a.skip(d.len() - i);
                break;
            }
            a.total += 1;
            let key = if by_str { f.key(k) } else { f.repr(k) };
            if a.map.len() < MAX_ATTRIBUTES && !f.budget().is_cut() {
                let cv = child(f, t, v, depth + 1);
                a.add(f, key, cv);
            }
        }
    };
    match t.get(id) {
        Some(Node::List(_) | Node::Tuple(_)) => seq(f, &mut a, items(t, id)),
        Some(Node::Set(v)) => seq(f, &mut a, v),
        Some(Node::FrozenSet(v)) => seq(f, &mut a, v),
        Some(Node::Dict(d)) => pairs(f, &mut a, d, false),
        Some(Node::Object(o)) => match kind(t, id) {
            Kind::Placeholder(d) => {
                if let Value::Object(m) = f.placeholder(d, 0) {
                    for (k, v) in m {
                        a.total += 1;
                        if a.map.len() < MAX_ATTRIBUTES {
                            a.add(f, k, v);
                        }
                    }
                }
            }
            Kind::Exception(_, args, state) => {
                if a.wants(f) {
                    let mut shown = Vec::new();
                    for (i, &x) in args.iter().enumerate() {
                        if f.budget().is_cut() {
                            shown.push(json!(format!(
                                "<cut: render budget, {} more>",
                                args.len() - i
                            )));
                            break;
                        }
                        shown.push(f.value(x, 0, 2));
                    }
                    a.add(f, "args".to_owned(), Value::Array(shown));
                }
                let dicts = state.map(|s| state_dicts(f, t, s)).unwrap_or_default();
                for d in dicts {
                    pairs(f, &mut a, dict_pairs(t, d), true);
                }
            }
            Kind::Other => {
                let dicts = o
                    .state
                    .last()
                    .map(|&s| state_dicts(f, t, s))
                    .unwrap_or_default();
                for d in dicts {
                    pairs(f, &mut a, dict_pairs(t, d), true);
                }
                seq(f, &mut a, &o.items);
                pairs(f, &mut a, &o.pairs, false);
            }
        },
        _ => {}
    }
    let attrs = a.finish(f);
    let type_name = type_name(t, id);
    f.fixed(&["type", "repr", "attributes"]);
    f.budget().charge(type_name.len());
    json!({"type": type_name, "repr": repr, "attributes": attrs})
}

/// The dicts of an instance state: the dict itself, or both halves of `(dict, slots)`.
fn state_dicts(f: &Formatter<'_>, t: &Tree, s: NodeId) -> Vec<NodeId> {
    if !f.budget().visits_n(items(t, s).len()) {
        return Vec::new();
    }
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
