//! JSON display values: the placeholder dict (protocol doc §4.4), the exception dict (§4.5)
//! and the formatting of nested values inside them, plus `pretty` (§4.2 step 7).
//!
//! Limits: nested values are formatted to depth 3 (beyond: `__cideldill_truncated__`),
//! collections are cut at 50 entries (`__skipped__` / `"<N more items skipped>"`), nested
//! placeholders are expanded to depth 2 and summarized beyond; cycles are marked with
//! `circular_reference: true`. Recursion is bounded by these depths. Width times depth is not
//! (a value shared through the memo may appear at every position), so everything one value
//! shows is charged to one [`Budget`]: each JSON value costs a visit and
//! `RENDER_JSON_VALUE_COST` bytes plus its text, and once the budget is spent what is left is
//! shown as `"<cut: render budget>"` (a list ends with `"<cut: render budget, N more>"`, a dict
//! with the key `__cut__`).

use serde_json::{json, Map, Value};

use super::budget::{Budget, JSON_MARKER, RENDER_JSON_VALUE_COST, TEXT_MARKER};
use super::reader::{Node, NodeId, ObjKind, Tree};
use super::render::{self, dict_get, dict_pairs, items, Renderer, TypeInfo, PLACEHOLDER_FIELDS};
use super::{cut, text, Limits, MAX_REPR_CHARS};

const MAX_FORMAT_DEPTH: usize = 3;
const MAX_ITEMS: usize = 50;
const MAX_PLACEHOLDER_DEPTH: usize = 2;
/// Exception dict fields.
const EXCEPTION_FIELDS: [&str; 10] = [
    "__cideldill_exception__",
    "summary",
    "type_name",
    "module",
    "qualname",
    "message",
    "repr_text",
    "args",
    "attributes",
    "failed_attributes",
];
/// The key of a dict whose entries were cut for lack of budget.
pub const CUT_KEY: &str = "__cut__";

/// What the root of a decoded value is, for the JSON forms.
pub enum Kind<'t> {
    /// A client placeholder: the node of its field dict.
    Placeholder(NodeId),
    /// An exception of this class with these args, and its `__dict__` state if any.
    Exception(TypeInfo, &'t [NodeId], Option<NodeId>),
    /// Anything else.
    Other,
}

/// The modules whose `UnpicklablePlaceholder` dataclass the client pickles when its own
/// placeholder pickler cannot be used (the client's and the original server's copies).
const PLACEHOLDER_CLASS_MODULES: [&str; 3] = [
    "cideldill_client.serialization_common",
    "cideldill_server.serialization_common",
    "cideldill_client.custom_picklers",
];

/// Classifies a node.
pub fn kind(t: &Tree, id: NodeId) -> Kind<'_> {
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
        // The client's fallback placeholder, a dataclass pickled by reference (`NEWOBJ`, then
        // its fields as the `BUILD` state): the same fields as the reduced form's dict.
        if &*cls.qualname == "UnpicklablePlaceholder"
            && PLACEHOLDER_CLASS_MODULES.contains(&&*cls.module)
            && matches!(o.kind, ObjKind::NewObj | ObjKind::Reduce)
        {
            if let Some(&d) = o.state.last() {
                if matches!(t.get(d), Some(Node::Dict(_))) {
                    return Kind::Placeholder(d);
                }
            }
        }
        if cls.exception && matches!(o.kind, ObjKind::Reduce | ObjKind::NewObj | ObjKind::Inst) {
            return Kind::Exception(cls, items(t, o.args), o.state.last().copied());
        }
    }
    Kind::Other
}

/// `pretty` of a decoded tree, within `budget`.
pub fn pretty_tree(t: &Tree, limits: &Limits, budget: &Budget) -> Value {
    let mut f = Formatter::new(t, limits, budget);
    match kind(t, t.root) {
        Kind::Placeholder(d) => f.placeholder(d, 0),
        Kind::Exception(cls, args, state) => f.exception(t.root, &cls, args, state, 0),
        Kind::Other => Value::String(f.repr(t.root)),
    }
}

/// `"<cut: render budget, N more>"`: what stands for `n` entries left out.
fn more(n: usize) -> Value {
    Value::String(format!("<cut: render budget, {n} more>"))
}

fn marker() -> Value {
    Value::String(JSON_MARKER.to_owned())
}

/// Formats nested values into JSON, every part charged to one budget.
pub struct Formatter<'t> {
    t: &'t Tree,
    budget: &'t Budget,
    r: Renderer<'t>,
    active: Vec<NodeId>,
}

impl<'t> Formatter<'t> {
    /// A formatter for `t` spending `budget`.
    pub fn new(t: &'t Tree, limits: &Limits, budget: &'t Budget) -> Self {
        Formatter {
            t,
            budget,
            r: Renderer::new(t, budget, (MAX_REPR_CHARS + 1) * 4, limits.max_depth),
            active: Vec::new(),
        }
    }

    /// The budget this formatter spends.
    pub fn budget(&self) -> &'t Budget {
        self.budget
    }

    /// Spends what one JSON value costs; false when the budget is spent.
    pub fn enter(&self) -> bool {
        self.budget.visit() && self.budget.spend(RENDER_JSON_VALUE_COST)
    }

    /// Spends what the fixed entries of an object with these keys cost (their values pay for
    /// themselves when they are more than a constant); false when the budget is spent.
    pub fn fixed(&self, keys: &[&str]) -> bool {
        let cost: usize = keys
            .iter()
            .map(|k| 2 * RENDER_JSON_VALUE_COST + k.len())
            .sum();
        self.budget.visits_n(keys.len()) && self.budget.spend(cost)
    }

    /// The repr cut at 500 characters, or a marked form if it cannot be rendered; text cut by
    /// the budget ends with `...<output limit>`, and once the budget is spent the repr is
    /// `"<cut: render budget>"`.
    pub fn repr(&mut self, id: NodeId) -> String {
        if self.budget.is_cut() {
            return JSON_MARKER.to_owned();
        }
        match self.r.render(id) {
            Ok(s) => self.cut_text(&s),
            Err(_) => "<unreprable: RecursionError>".to_owned(),
        }
    }

    /// `cut` of a text the renderer just made, marked when the budget stopped it.
    fn cut_text(&self, s: &str) -> String {
        let mut s = cut(s);
        if self.r.budget_stopped {
            s.push_str(TEXT_MARKER);
        }
        s
    }

    /// A text shown in full (a str value, a key, a message), charged; the part that fits with
    /// `...<cut: render budget>` when it does not.
    fn text(&self, s: String) -> String {
        if self.budget.is_cut() {
            return JSON_MARKER.to_owned();
        }
        let left = self.budget.bytes_left();
        if self.budget.spend(s.len()) {
            return s;
        }
        let mut end = left.min(s.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...{JSON_MARKER}", &s[..end])
    }

    /// A str node as a string (lossily, as `str_of`), converting no more than the budget holds.
    fn str_text(&self, id: NodeId) -> Option<String> {
        let Some(Node::Str(b)) = self.t.get(id) else {
            return None;
        };
        // Lossy conversion never shortens, so a prefix of the bytes is enough to fill what is
        // left (and a cut multi-byte sequence at its end becomes one U+FFFD).
        let keep = self.budget.bytes_left().saturating_add(4);
        Some(self.text(text::lossy(b.get(..keep).unwrap_or(b))))
    }

    /// The placeholder dict of a placeholder field dict, as the original server formats it at
    /// nesting `depth` (0 for the top level).
    pub fn placeholder(&mut self, d: NodeId, depth: usize) -> Value {
        let t = self.t;
        if !self.enter()
            || !self.fixed(&PLACEHOLDER_FIELDS)
            || !self.fixed(&["placeholder", "summary"])
        {
            return marker();
        }
        let mut m = Map::new();
        m.insert("__cideldill_placeholder__".into(), Value::Bool(true));
        let summary = self.text(render::placeholder_summary(t, d));
        m.insert("summary".into(), Value::String(summary));
        for field in PLACEHOLDER_FIELDS {
            let v = match dict_get(t, d, field) {
                None => Value::Null,
                Some(v) => match field {
                    "attributes" => self.pairs_map(
                        dict_pairs(t, v),
                        |f, val| f.server_value(val, depth),
                        |n| json!(format!("{n} more attributes skipped")),
                    ),
                    "failed_attributes" => {
                        let pairs = dict_pairs(t, v);
                        let mut a = Map::new();
                        for (i, &(k, val)) in pairs.iter().enumerate() {
                            if self.budget.is_cut() || !self.enter() {
                                a.insert(CUT_KEY.into(), more(pairs.len() - i));
                                break;
                            }
                            let key = self.key(k);
                            a.insert(key, Value::String(self.repr(val)));
                        }
                        Value::Object(a)
                    }
                    "pickle_attempts" => match t.get(v) {
                        Some(Node::List(_) | Node::Tuple(_)) => {
                            Value::Array(self.values(items(t, v), |f, x| {
                                f.server_value(x, MAX_PLACEHOLDER_DEPTH)
                            }))
                        }
                        _ => self.server_value(v, MAX_PLACEHOLDER_DEPTH),
                    },
                    _ => self.server_value(v, MAX_PLACEHOLDER_DEPTH),
                },
            };
            m.insert(field.into(), v);
        }
        Value::Object(m)
    }

    /// Formats each of `ids` with `each`, stopping with a marker when the budget is spent.
    fn values(
        &mut self,
        ids: &[NodeId],
        mut each: impl FnMut(&mut Self, NodeId) -> Value,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for (i, &x) in ids.iter().enumerate() {
            if self.budget.is_cut() {
                out.push(more(ids.len() - i));
                break;
            }
            out.push(each(self, x));
        }
        out
    }

    /// A scalar as JSON (`None` for a node that is not one).
    fn scalar(&self, id: NodeId) -> Option<Value> {
        Some(match self.t.get(id) {
            None | Some(Node::None) => Value::Null,
            Some(Node::Bool(b)) => Value::Bool(*b),
            Some(Node::Int(v)) => json!(v),
            Some(Node::Float(f)) if f.is_finite() => json!(f),
            Some(Node::Str(_)) => Value::String(self.str_text(id).unwrap_or_default()),
            _ => return None,
        })
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
            if !self.enter() {
                return marker();
            }
            return Value::String(self.text(render::placeholder_summary(t, d)));
        }
        if !self.enter() {
            return marker();
        }
        if let Some(v) = self.scalar(id) {
            return v;
        }
        if depth > MAX_PLACEHOLDER_DEPTH {
            return Value::String(self.repr(id));
        }
        match t.get(id) {
            Some(Node::Dict(d)) => self.pairs_map(
                d,
                |f, v| f.server_value(v, depth + 1),
                |n| json!(format!("{n} more items skipped")),
            ),
            Some(Node::List(_) | Node::Tuple(_)) => {
                let all = items(t, id);
                let shown = all.get(..MAX_ITEMS).unwrap_or(all);
                let mut out = self.values(shown, |f, c| f.server_value(c, depth + 1));
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

    /// The first [`MAX_ITEMS`] pairs as an object, each value made by `value`; a cut budget
    /// ends it with [`CUT_KEY`] (how many were left), and `skipped` writes the note under
    /// `__skipped__` of the pairs past [`MAX_ITEMS`].
    fn pairs_map(
        &mut self,
        pairs: &[(NodeId, NodeId)],
        mut value: impl FnMut(&mut Self, NodeId) -> Value,
        skipped: impl Fn(usize) -> Value,
    ) -> Value {
        let mut m = Map::new();
        for (i, &(k, v)) in pairs.iter().take(MAX_ITEMS).enumerate() {
            if self.budget.is_cut() {
                m.insert(CUT_KEY.into(), more(pairs.len().min(MAX_ITEMS) - i));
                break;
            }
            let key = self.key(k);
            let fv = value(self, v);
            m.insert(key, fv);
        }
        if pairs.len() > MAX_ITEMS {
            m.insert("__skipped__".into(), skipped(pairs.len() - MAX_ITEMS));
        }
        Value::Object(m)
    }

    fn set(&mut self, s: &[NodeId], depth: usize) -> Value {
        // Members are shown sorted by repr, so every member's repr is made (and charged).
        let mut keyed: Vec<(String, NodeId)> = Vec::new();
        for &c in s {
            if !self.enter() {
                break;
            }
            let key = self.repr(c);
            if self.budget.is_cut() {
                break;
            }
            keyed.push((key, c));
        }
        let left_out = s.len() - keyed.len();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let shown: Vec<NodeId> = keyed.iter().take(MAX_ITEMS).map(|&(_, c)| c).collect();
        drop(keyed);
        let mut members = self.values(&shown, |f, c| f.server_value(c, depth + 1));
        if left_out > 0 {
            members.push(more(left_out));
        } else if s.len() > MAX_ITEMS {
            members.push(json!(format!(
                "<{} more items skipped>",
                s.len() - MAX_ITEMS
            )));
        }
        self.fixed(&["__cideldill_set__"]);
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
        if !self.enter() || !self.fixed(&EXCEPTION_FIELDS) {
            return marker();
        }
        let module = if cls.module.is_empty() {
            "builtins".to_owned()
        } else {
            cls.module.to_string()
        };
        // The short fields first, so that they show even when the args spend the budget.
        let repr_text = self.repr(id);
        let message = self.message(cls, args);
        let summary = if message.is_empty() {
            format!("{module}.{}", cls.qualname)
        } else {
            format!("{module}.{}: {message}", cls.qualname)
        };
        let summary = self.text(summary);
        self.active.push(id);
        let args_json = self.values(args, |f, a| f.value(a, depth + 1, depth + 1));
        let mut attrs = Map::new();
        if let Some(s) = state {
            let single = [s];
            let dicts: &[NodeId] = match t.get(s) {
                Some(Node::Dict(_)) => &single,
                Some(Node::Tuple(p)) => p,
                _ => &[],
            };
            'dicts: for &d in dicts {
                if !self.budget.visit() {
                    break;
                }
                for &(k, v) in dict_pairs(t, d).iter().take(100) {
                    if self.budget.is_cut() {
                        attrs.insert(CUT_KEY.into(), marker());
                        break 'dicts;
                    }
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
            "qualname": &*cls.qualname,
            "message": message,
            "repr_text": repr_text,
            "args": args_json,
            "attributes": attrs,
            "failed_attributes": {},
        })
    }

    /// `str(a)`: the string of a str, the repr of anything else.
    fn str_or_repr(&mut self, a: NodeId) -> String {
        match self.str_text(a) {
            Some(s) => s,
            None => self.repr(a),
        }
    }

    /// `str(exc)`.
    fn message(&mut self, cls: &TypeInfo, args: &[NodeId]) -> String {
        let t = self.t;
        let shown = render::exception_args(t, cls, args);
        if shown.len() == 2 && shown.len() < args.len() || (shown.len() == 2 && is_os_error(cls)) {
            if let (Some(e), Some(s)) = (render::int_of(t, shown[0]), shown.get(1)) {
                let mut m = format!("[Errno {e}] {}", self.str_or_repr(*s));
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
            [a] => self.str_or_repr(*a),
            _ => {
                if self.budget.is_cut() {
                    return JSON_MARKER.to_owned();
                }
                let s = self.r.render_args(args);
                self.cut_text(&s)
            }
        }
    }

    /// A dict key as shown: its string, or its repr (charged, with the cost of a value).
    pub fn key(&mut self, k: NodeId) -> String {
        if !self.enter() {
            return JSON_MARKER.to_owned();
        }
        self.str_or_repr(k)
    }

    /// A nested value as JSON (§4.4 "Collections", "Other values").
    pub fn value(&mut self, id: NodeId, depth: usize, level: usize) -> Value {
        let t = self.t;
        let Some(node) = t.get(id) else {
            return Value::Null;
        };
        if !self.enter() {
            return marker();
        }
        if let Some(v) = self.scalar(id) {
            return v;
        }
        if self.active.contains(&id) {
            self.fixed(&["circular_reference", "summary"]);
            return json!({"circular_reference": true, "summary": self.repr(id)});
        }
        if level > MAX_FORMAT_DEPTH {
            self.fixed(&["__cideldill_truncated__", "summary"]);
            return json!({"__cideldill_truncated__": true, "summary": self.repr(id)});
        }
        self.active.push(id);
        let v = match node {
            Node::List(_) | Node::Tuple(_) => {
                let all = items(t, id);
                let shown = all.get(..MAX_ITEMS).unwrap_or(all);
                let mut out = self.values(shown, |f, c| f.value(c, depth, level + 1));
                if all.len() > MAX_ITEMS {
                    out.push(Value::String(format!(
                        "<{} more items skipped>",
                        all.len() - MAX_ITEMS
                    )));
                }
                Value::Array(out)
            }
            Node::Dict(d) => self.pairs_map(d, |f, v| f.value(v, depth, level + 1), |n| json!(n)),
            Node::Set(s) => self.set(s, 0),
            Node::FrozenSet(s) => self.set(s, 0),
            Node::Object(_) => match kind(t, id) {
                Kind::Placeholder(d) => self.placeholder(d, MAX_PLACEHOLDER_DEPTH.min(depth)),
                Kind::Exception(cls, args, state) => self.exception(id, &cls, args, state, level),
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

#[cfg(test)]
mod tests {
    /// `dill.dumps` of the client's `serialization_common.UnpicklablePlaceholder` dataclass
    /// (dill 0.4.1): shown as the placeholder dict, as the reduced form is.
    #[test]
    fn the_placeholder_dataclass_is_a_placeholder() {
        const B64: &str = "gASVegEAAAAAAACMJWNpZGVsZGlsbF9jbGllbnQuc2VyaWFsaXphdGlvbl9jb21tb26UjBZVbnBpY2tsYWJsZVBsYWNlaG9sZGVylJOUKYGUfZQojAl0eXBlX25hbWWUjAJDRpSMBm1vZHVsZZSMAW2UjAhxdWFsbmFtZZRoBowJb2JqZWN0X2lklIwDMHgxlIwJcmVwcl90ZXh0lIwEPENGPpSMCHN0cl90ZXh0lE6MCmF0dHJpYnV0ZXOUfZSMAWGUSwFzjBFmYWlsZWRfYXR0cmlidXRlc5R9lIwBYpSMDFR5cGVFcnJvcjogeJRzjAxwaWNrbGVfZXJyb3KUjA1UeXBlRXJyb3I6IG5vlIwPcGlja2xlX2F0dGVtcHRzlF2UjARkaWxslGGMEWNhcHR1cmVfdGltZXN0YW1wlEc/+AAAAAAAAIwFZGVwdGiUSwCMC29iamVjdF9uYW1llIwKYXNzZXRfdG9vbJSMC29iamVjdF9wYXRolIwEbS5DRpR1Yi4=";
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(B64)
            .expect("base64");
        let p = crate::pickle::pretty(&bytes);
        assert_eq!(p["__cideldill_placeholder__"], true, "{p}");
        assert_eq!(p["object_name"], "asset_tool", "{p}");
        assert_eq!(p["object_path"], "m.CF");
        assert_eq!(p["attributes"]["a"], 1, "{p}");
        assert_eq!(p["failed_attributes"]["b"], "'TypeError: x'", "{p}");
        assert_eq!(
            p["summary"], "<Unpicklable asset_tool m.CF attrs=1 failed=1 error=TypeError: no>",
            "{p}"
        );
    }
}
