//! Values a condition reads: the [`CondValue`] trait and its JSON, pickle and either forms,
//! and how each displays as text.

use super::*;

/// What kind of Python value a [`CondValue`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `None`.
    None,
    /// A bool.
    Bool,
    /// An int.
    Int,
    /// A float.
    Float,
    /// A str.
    Str,
    /// `bytes` or `bytearray`.
    Bytes,
    /// A list.
    List,
    /// A tuple.
    Tuple,
    /// A set or frozenset.
    Set,
    /// A dict.
    Dict,
    /// Anything else: an instance, a class, a function.
    Object,
}

/// A key of a dict lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'k> {
    /// A string key.
    Str(&'k str),
    /// An int key.
    Int(i64),
}

/// A read-only view of a decoded value, as the condition language sees it.
pub trait CondValue: Clone {
    /// Its kind.
    fn kind(&self) -> Kind;
    /// Its class name, as `type(x).__name__` (`Point`, `int`, `dict`, `NoneType`).
    fn type_name(&self) -> String;
    /// A bool's value.
    fn to_bool(&self) -> Option<bool>;
    /// An int's value (`None` for ints beyond 64 bits).
    fn to_int(&self) -> Option<i64>;
    /// A float's value.
    fn to_float(&self) -> Option<f64>;
    /// A str's value.
    fn to_str(&self) -> Option<String>;
    /// The length of a str (in characters), bytes, list, tuple, set or dict.
    fn length(&self) -> Option<usize>;
    /// Element `i` (from 0) of a list, tuple or set.
    fn element(&self, i: usize) -> Option<Self>;
    /// The value of a dict's key (the last one pickled, if repeated).
    fn key(&self, key: Key<'_>) -> Option<Self>;
    /// An attribute of an instance (for JSON, an object's key).
    fn attr(&self, name: &str) -> Option<Self>;
    /// How the value reads in a log line, like Python's `str()` of it: a str is its own text,
    /// anything else its repr (for JSON, its compact JSON text). At most
    /// [`LOG_VALUE_CHARS`] characters, then `...`; the work is bounded whatever the value's
    /// size.
    fn display(&self) -> String;
    /// Why this value could not be read (its payload is missing or does not decode), if so:
    /// the evaluator then fails wherever the value is read.
    fn unreadable(&self) -> Option<String> {
        None
    }
}

/// `text` up to `max` characters, then `...` when there is more or when `incomplete` says the
/// text itself was cut short.
pub(super) fn cut_text(text: &str, max: usize, incomplete: bool) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None if incomplete => format!("{text}..."),
        None => text.to_owned(),
    }
}

/// Collects at most `room` bytes, then refuses the rest (ending the serialization).
pub(super) struct Bounded {
    out: Vec<u8>,
    room: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let left = self.room - self.out.len();
        if left == 0 && !buf.is_empty() {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = buf.len().min(left);
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The compact JSON text of a value, cut at [`LOG_VALUE_CHARS`] characters: the serializer
/// stops once it has written enough for that.
pub(super) fn json_display(v: &Value) -> String {
    let mut w = Bounded {
        out: Vec::new(),
        room: DISPLAY_BYTES,
    };
    let complete = serde_json::to_writer(&mut w, v).is_ok();
    let text = match std::str::from_utf8(&w.out) {
        Ok(t) => t,
        // Cut inside a character.
        Err(e) => std::str::from_utf8(&w.out[..e.valid_up_to()]).unwrap_or_default(),
    };
    cut_text(text, LOG_VALUE_CHARS, !complete)
}

/// A pickled str (generalized UTF-8: lone surrogates become U+FFFD) cut at [`LOG_VALUE_CHARS`]
/// characters, reading no more of it than that needs.
pub(super) fn str_display(b: &[u8]) -> String {
    let head = &b[..b.len().min(DISPLAY_BYTES)];
    let mut text = String::new();
    let mut i = 0;
    while i < head.len() {
        match std::str::from_utf8(&head[i..]) {
            Ok(t) => {
                text.push_str(t);
                break;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                text.push_str(std::str::from_utf8(&head[i..i + valid]).unwrap_or_default());
                i += valid;
                let surrogate = head[i] == 0xed
                    && head.get(i + 1).is_some_and(|c| (0xa0..=0xbf).contains(c))
                    && head.get(i + 2).is_some_and(|c| (0x80..=0xbf).contains(c));
                let skip = if surrogate {
                    3
                } else {
                    e.error_len().unwrap_or(head.len() - i)
                };
                text.push('\u{fffd}');
                i += skip;
            }
        }
    }
    cut_text(&text, LOG_VALUE_CHARS, head.len() < b.len())
}

/// Python's `repr()` of a str, by the pickle renderer, cut at [`LOG_VALUE_CHARS`]
/// characters.
pub(super) fn str_repr(s: &str) -> String {
    // Only the head can be shown: the repr of the rest would be cut.
    let head = match s.char_indices().nth(LOG_VALUE_CHARS) {
        Some((i, _)) => &s[..i],
        None => s,
    };
    cut_text(
        &crate::pickle::str_repr(head),
        LOG_VALUE_CHARS,
        head.len() < s.len(),
    )
}

impl CondValue for &Value {
    fn kind(&self) -> Kind {
        match self {
            Value::Null => Kind::None,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_f64() => Kind::Float,
            Value::Number(_) => Kind::Int,
            Value::String(_) => Kind::Str,
            Value::Array(_) => Kind::List,
            Value::Object(_) => Kind::Dict,
        }
    }

    fn type_name(&self) -> String {
        match self.kind() {
            Kind::None => "NoneType",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::List => "list",
            _ => "dict",
        }
        .to_owned()
    }

    fn to_bool(&self) -> Option<bool> {
        self.as_bool()
    }

    fn to_int(&self) -> Option<i64> {
        self.as_i64()
    }

    fn to_float(&self) -> Option<f64> {
        self.as_f64()
    }

    fn to_str(&self) -> Option<String> {
        self.as_str().map(str::to_owned)
    }

    fn length(&self) -> Option<usize> {
        match self {
            Value::String(s) => Some(s.chars().count()),
            Value::Array(a) => Some(a.len()),
            Value::Object(m) => Some(m.len()),
            _ => None,
        }
    }

    fn element(&self, i: usize) -> Option<Self> {
        self.as_array()?.get(i)
    }

    fn key(&self, key: Key<'_>) -> Option<Self> {
        match key {
            Key::Str(s) => self.as_object()?.get(s),
            Key::Int(_) => None,
        }
    }

    fn attr(&self, name: &str) -> Option<Self> {
        self.as_object()?.get(name)
    }

    fn display(&self) -> String {
        match self {
            Value::String(s) => cut_text(s, LOG_VALUE_CHARS, false),
            v => json_display(v),
        }
    }
}

/// A node of a decoded pickle.
#[derive(Debug, Clone, Copy)]
pub struct PickleValue<'t> {
    /// The tree.
    pub tree: &'t Tree,
    /// The node.
    pub id: NodeId,
}

impl<'t> PickleValue<'t> {
    /// The root of a decoded pickle.
    pub fn root(tree: &'t Tree) -> Self {
        PickleValue {
            tree,
            id: tree.root,
        }
    }

    fn at(&self, id: NodeId) -> Self {
        PickleValue {
            tree: self.tree,
            id,
        }
    }

    fn node(&self) -> Option<&'t Node> {
        self.tree.get(self.id)
    }

    fn key_matches(&self, k: NodeId, key: Key<'_>) -> bool {
        match (self.tree.get(k), key) {
            (Some(Node::Str(b)), Key::Str(s)) => &b[..] == s.as_bytes(),
            (Some(Node::Int(n)), Key::Int(i)) => *n == i,
            (Some(Node::Bool(b)), Key::Int(i)) => i64::from(*b) == i,
            _ => false,
        }
    }

    fn find(&self, pairs: &[(NodeId, NodeId)], key: Key<'_>) -> Option<Self> {
        pairs
            .iter()
            .rev()
            .find(|&&(k, _)| self.key_matches(k, key))
            .map(|&(_, v)| self.at(v))
    }
}

impl CondValue for PickleValue<'_> {
    fn kind(&self) -> Kind {
        match self.node() {
            None | Some(Node::None) => Kind::None,
            Some(Node::Bool(_)) => Kind::Bool,
            Some(Node::Int(_) | Node::BigInt(_) | Node::IntText(_)) => Kind::Int,
            Some(Node::Float(_)) => Kind::Float,
            Some(Node::Str(_)) => Kind::Str,
            Some(Node::Bytes(_) | Node::ByteArray(_)) => Kind::Bytes,
            Some(Node::List(_)) => Kind::List,
            Some(Node::Tuple(_)) => Kind::Tuple,
            Some(Node::Dict(_)) => Kind::Dict,
            Some(Node::Set(_) | Node::FrozenSet(_)) => Kind::Set,
            Some(Node::Global(_) | Node::Object(_)) => Kind::Object,
        }
    }

    fn type_name(&self) -> String {
        let full = crate::pickle::view::type_name(self.tree, self.id);
        match full.rsplit_once('.') {
            Some((_, last)) => last.to_owned(),
            None => full,
        }
    }

    fn to_bool(&self) -> Option<bool> {
        match self.node()? {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn to_int(&self) -> Option<i64> {
        match self.node()? {
            Node::Int(n) => Some(*n),
            _ => None,
        }
    }

    fn to_float(&self) -> Option<f64> {
        match self.node()? {
            Node::Float(x) => Some(*x),
            _ => None,
        }
    }

    fn to_str(&self) -> Option<String> {
        self.tree.str_of(self.id)
    }

    fn length(&self) -> Option<usize> {
        Some(match self.node()? {
            Node::Str(_) => self.tree.str_of(self.id)?.chars().count(),
            Node::Bytes(b) | Node::ByteArray(b) => b.len(),
            Node::List(v) => v.len(),
            Node::Tuple(v) | Node::FrozenSet(v) => v.len(),
            Node::Set(v) => v.len(),
            Node::Dict(d) => d.len(),
            Node::Object(o) if !o.pairs.is_empty() => o.pairs.len(),
            Node::Object(o) if !o.items.is_empty() => o.items.len(),
            _ => return None,
        })
    }

    fn element(&self, i: usize) -> Option<Self> {
        let v: &[NodeId] = match self.node()? {
            Node::List(v) => v,
            Node::Tuple(v) | Node::FrozenSet(v) => v,
            Node::Set(v) => v,
            Node::Object(o) => &o.items,
            _ => return None,
        };
        v.get(i).map(|&c| self.at(c))
    }

    fn key(&self, key: Key<'_>) -> Option<Self> {
        match self.node()? {
            Node::Dict(d) => self.find(d, key),
            Node::Object(o) => self.find(&o.pairs, key),
            _ => None,
        }
    }

    fn attr(&self, name: &str) -> Option<Self> {
        let Node::Object(o) = self.node()? else {
            return None;
        };
        let state = *o.state.last()?;
        // The state dict, or `(dict, slots)`: slots are looked up first, as Python's
        // descriptors come before the instance dict.
        let dicts: Vec<NodeId> = match self.tree.get(state)? {
            Node::Dict(_) => vec![state],
            Node::Tuple(_) => items(self.tree, state).iter().rev().copied().collect(),
            _ => return None,
        };
        dicts
            .into_iter()
            .filter(|&d| matches!(self.tree.get(d), Some(Node::Dict(_))))
            .find_map(|d| self.find(dict_pairs(self.tree, d), Key::Str(name)))
    }

    fn display(&self) -> String {
        if let Some(Node::Str(b)) = self.node() {
            return str_display(b);
        }
        let budget = Budget::new(DISPLAY_WORK);
        let mut r = Renderer::new(
            self.tree,
            &budget,
            DISPLAY_BYTES,
            Limits::default().max_depth,
        );
        match r.render(self.id) {
            Ok(text) => cut_text(&text, LOG_VALUE_CHARS, r.truncated),
            Err(e) => cut_text(
                &format!("<unavailable: PickleError: {e}>"),
                LOG_VALUE_CHARS,
                false,
            ),
        }
    }
}

/// A value of either format, so that one call's arguments may mix them, or one that could not
/// be read.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    /// A JSON item.
    Json(&'a Value),
    /// A node of a decoded pickle.
    Pickle(PickleValue<'a>),
    /// A value that could not be read, and why (e.g. `payload missing from the store`, or
    /// `<unavailable: PickleError: ...>`): reading it fails the evaluation with this reason.
    Unreadable(&'a str),
}

/// Calls the method of a JSON item or a pickle node; `$u` for an unreadable value (which the
/// evaluator never reads: it fails first).
macro_rules! delegate {
    ($self:ident, $v:ident => $e:expr, unreadable => $u:expr) => {
        match $self {
            Item::Json($v) => $e,
            Item::Pickle($v) => $e,
            Item::Unreadable(_) => $u,
        }
    };
}

impl CondValue for Item<'_> {
    fn kind(&self) -> Kind {
        delegate!(self, v => v.kind(), unreadable => Kind::Object)
    }
    fn type_name(&self) -> String {
        delegate!(self, v => v.type_name(), unreadable => "unreadable".to_owned())
    }
    fn to_bool(&self) -> Option<bool> {
        delegate!(self, v => v.to_bool(), unreadable => None)
    }
    fn to_int(&self) -> Option<i64> {
        delegate!(self, v => v.to_int(), unreadable => None)
    }
    fn to_float(&self) -> Option<f64> {
        delegate!(self, v => v.to_float(), unreadable => None)
    }
    fn to_str(&self) -> Option<String> {
        delegate!(self, v => v.to_str(), unreadable => None)
    }
    fn length(&self) -> Option<usize> {
        delegate!(self, v => v.length(), unreadable => None)
    }
    fn element(&self, i: usize) -> Option<Self> {
        match self {
            Item::Json(v) => v.element(i).map(Item::Json),
            Item::Pickle(v) => v.element(i).map(Item::Pickle),
            Item::Unreadable(_) => None,
        }
    }
    fn key(&self, key: Key<'_>) -> Option<Self> {
        match self {
            Item::Json(v) => v.key(key).map(Item::Json),
            Item::Pickle(v) => v.key(key).map(Item::Pickle),
            Item::Unreadable(_) => None,
        }
    }
    fn attr(&self, name: &str) -> Option<Self> {
        match self {
            Item::Json(v) => v.attr(name).map(Item::Json),
            Item::Pickle(v) => v.attr(name).map(Item::Pickle),
            Item::Unreadable(_) => None,
        }
    }
    fn display(&self) -> String {
        let unreadable = || {
            let why = self.unreadable().unwrap_or_default();
            cut_text(&format!("<unreadable: {why}>"), LOG_VALUE_CHARS, false)
        };
        delegate!(self, v => v.display(), unreadable => unreadable())
    }
    fn unreadable(&self) -> Option<String> {
        match self {
            Item::Unreadable(why) => Some((*why).to_owned()),
            _ => None,
        }
    }
}
