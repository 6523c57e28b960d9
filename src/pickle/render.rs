//! The renderer: Python's `repr` of a decoded [`Tree`], exactly for builtin types, and a
//! readable, clearly marked form for everything else.
//!
//! What it knows (see `object` below): builtin scalars and containers with Python's recursion
//! markers; `datetime` (datetime, date, time, timedelta, timezone) from pickled state bytes;
//! `Decimal`, `Fraction`, `UUID`, `complex`, `range`, `slice`; `OrderedDict`, `defaultdict`,
//! `deque`, `Counter`; exceptions (`ValueError('a', 2)`); enum members of classes pickled by
//! value (`<Color.RED: 1>`) — a member of a class pickled by reference is indistinguishable
//! from a call and renders as `module.Color(1)`; instances as a dataclass would print them
//! (`Point(x=1, y=2)`); dill by-value classes and functions (`<class 'm.P'>`,
//! `<function f>`); anything else as a call (`mymodule.make(1, 2)`) or a marked object
//! (`<mymodule.Thing object (state: ...)>`).
//!
//! Limits and invariants:
//! * Recursion is bounded by `Limits::max_depth` (nesting deeper gives
//!   `PickleError::RenderDepth`); cycles print Python's markers (`[...]`, `{...}`, `(...)`).
//! * Output is bounded by each text's `limit` and by the value's shared [`Budget`]: once
//!   either is reached, rendering stops and the caller sees `truncated` (and `budget_stopped`
//!   when it was the budget). A node shared through the memo is written at every reference,
//!   which the budget pays for however many there are.
//! * Time is bounded by the budget's node visits: every visit spends one, and so does every
//!   item copied or scanned without being written (a `Counter`'s pairs, an instance's fields,
//!   a function's states). Lookups that would repeat per visit are memoized per tree
//!   ([`Lookups`]: class descriptions, names, dict keys) or per renderer (enum classes, big
//!   int text), so none costs more than once.
//! * Never panics: all tree accesses go through checked lookups.
//!
//! Its parts, under `render/`: `tables` (Python's names it knows), `access` (checked reads of
//! the tree and class descriptions), `numbers` (float, complex, timedelta reprs), `enums`
//! (enum classes pickled by value) and `tests`; the [`Renderer`] itself stays here.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use super::bigint;
use super::budget::Budget;
use super::reader::{Node, NodeId, ObjKind, Object, Tree};
use super::text;
use super::PickleError;

mod access;
mod enums;
mod numbers;
mod tables;

pub use access::*;
use enums::*;
pub use numbers::*;
pub use tables::*;

/// What a node denotes when it is used as a class. Names are shared: every class naming the
/// same string holds the same allocation, and a copy costs two reference counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// `__module__`.
    pub module: Rc<str>,
    /// `__qualname__`.
    pub qualname: Rc<str>,
    /// A subclass of `BaseException`.
    pub exception: bool,
    /// An `Enum` class pickled by value.
    pub enum_class: bool,
    /// Pickled by value by dill (`_create_type`).
    pub by_value: bool,
}

impl TypeInfo {
    /// `module.qualname`, or just `qualname` for builtins.
    pub fn full_name(&self) -> String {
        if &*self.module == "builtins" || self.module.is_empty() {
            self.qualname.to_string()
        } else {
            format!("{}.{}", self.module, self.qualname)
        }
    }

    /// `__name__`: the last part of the qualname.
    pub fn name(&self) -> &str {
        self.qualname.rsplit('.').next().unwrap_or(&self.qualname)
    }
}

/// Lookups memoized per tree: [`type_info`] by (node, depth), the names it reads as shared
/// strings, and the known keys of larger dicts ([`dict_get`]). Without them a class or dict
/// shared by many nodes would be examined again at every visit, and class bases (a tuple may
/// name the same class many times) would be explored exponentially; with them each is examined
/// once per tree. What they keep is bounded by `room` (sized from the input, see
/// `reader::decode`): class descriptions charge their names, so a name shared through the memo
/// by thousands of classes runs it out, and a class found once it is spent is not described
/// (it renders in the generic forms). Dict indexes are not charged: each is smaller than the
/// pairs it indexes.
#[derive(Debug, Clone)]
pub struct Lookups {
    types: RefCell<NodeMap<(NodeId, u8), Found>>,
    names: RefCell<NodeMap<NodeId, Rc<str>>>,
    keys: RefCell<NodeMap<NodeId, Box<KeyIndex>>>,
    room: Cell<usize>,
}

/// A hash map keyed by node ids.
type NodeMap<K, V> = HashMap<K, V, BuildHasherDefault<NodeHasher>>;

/// Hashes node ids (and small tuples of them) with one multiplication per word, as rustc's
/// `FxHasher` does: they are dense integers chosen by the decoder, not text, so the keyed
/// `SipHash` of the default hasher (a third of the lookup time on small values) buys nothing.
#[derive(Default, Clone, Copy)]
pub struct NodeHasher(u64);

impl NodeHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for NodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

impl Lookups {
    /// Empty lookups that may keep about `room` bytes.
    pub(super) fn new(room: usize) -> Self {
        Lookups {
            types: RefCell::default(),
            names: RefCell::default(),
            keys: RefCell::default(),
            room: Cell::new(room),
        }
    }

    fn take(&self, n: usize) -> bool {
        match self.room.get().checked_sub(n) {
            Some(left) => {
                self.room.set(left);
                true
            }
            None => {
                self.room.set(0);
                false
            }
        }
    }
}

/// The fields of a client placeholder's dict (protocol doc §4.4), in the order the original
/// prints them: the placeholder dict shows them (`values.rs`), and [`dict_get`] indexes them.
pub(super) const PLACEHOLDER_FIELDS: [&str; 14] = [
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

/// The str keys [`dict_get`] is asked for besides [`PLACEHOLDER_FIELDS`].
const CLASS_KEYS: [&str; 4] = ["__module__", "__qualname__", "_member_map_", "int"];

/// The str keys [`dict_get`] is asked for, indexed once per larger dict.
const KEYS: [&str; CLASS_KEYS.len() + PLACEHOLDER_FIELDS.len()] = {
    let mut keys = [""; CLASS_KEYS.len() + PLACEHOLDER_FIELDS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = if i < CLASS_KEYS.len() {
            CLASS_KEYS[i]
        } else {
            PLACEHOLDER_FIELDS[i - CLASS_KEYS.len()]
        };
        i += 1;
    }
    keys
};

/// The value of the last pair with each of [`KEYS`] in one dict.
type KeyIndex = [Option<NodeId>; KEYS.len()];

/// A memoized [`type_info`]: the class, or `None` for a node that denotes none.
type Found = Option<TypeInfo>;

/// Globals whose module and name together are at most this long are described afresh each
/// time (the cost of two small strings) rather than memoized.
const SHORT_GLOBAL: usize = 128;

/// What one class description costs in [`Lookups`], beyond its names.
const TYPE_ENTRY_COST: usize = 128;

/// Dicts up to this many pairs are scanned rather than indexed.
const SCAN_PAIRS: usize = 16;
/// Enum classes of one name considered when naming a member (real programs have one).
const MAX_ENUM_CANDIDATES: usize = 8;
/// Single-bit members considered for a `Flag` combination (64 bits, a few aliases).
const MAX_FLAG_MEMBERS: usize = 128;

/// Renders trees; reusable across calls on one tree (caches big int text, enum classes, and
/// the recursion marks, one slot per node, allocated once).
///
/// Every text it renders is charged to the shared [`Budget`]: a text stops at its own limit or
/// at what is left of the budget, whichever is smaller, and every node visit (and scan of items
/// that writes nothing) spends a visit.
pub struct Renderer<'t> {
    tree: &'t Tree,
    budget: &'t Budget,
    out: String,
    /// The limit of each text rendered by [`Renderer::render`].
    base_limit: usize,
    /// The limit of the text being rendered (its own limit or the budget left).
    limit: usize,
    /// Whether `limit` is what is left of the budget.
    limit_is_budget: bool,
    max_depth: usize,
    /// The nesting level (1 for a text, 2 for a text rendered inside it) that made each node
    /// active, 0 for none: a nested text sees only its own recursion. One byte per node: each
    /// nested text is at least one level deeper than its caller, so levels stay below
    /// `max_depth` + 2 (checked in `nested`).
    active: Vec<u8>,
    level: u8,
    big: NodeMap<NodeId, String>,
    enums: Option<EnumIndex>,
    /// Set once the output limit was reached.
    pub truncated: bool,
    /// Set when the text stopped because the budget ran out.
    pub budget_stopped: bool,
}

type R = Result<(), PickleError>;

impl<'t> Renderer<'t> {
    /// A renderer writing texts of at most about `limit` bytes each, and in all no more than
    /// `budget` allows, nesting at most `max_depth` levels.
    pub fn new(tree: &'t Tree, budget: &'t Budget, limit: usize, max_depth: usize) -> Self {
        Renderer {
            tree,
            budget,
            out: String::new(),
            base_limit: limit,
            limit,
            limit_is_budget: false,
            max_depth,
            active: vec![0; tree.nodes.len()],
            level: 0,
            big: NodeMap::default(),
            enums: None,
            truncated: false,
            budget_stopped: false,
        }
    }

    /// Renders one node to a fresh string, charged to the budget.
    pub fn render(&mut self, id: NodeId) -> Result<String, PickleError> {
        self.start(self.base_limit);
        let r = self.node(id, 0);
        let text = self.finish();
        r.map(|()| text)
    }

    /// `(a, b, c)` for these nodes (each rendered as if alone: one that fails to render is left
    /// empty, like `render(a).unwrap_or_default()`), as one text within the renderer's limit.
    pub fn render_args(&mut self, args: &[NodeId]) -> String {
        self.start(self.base_limit);
        self.w("(");
        for (i, &a) in args.iter().enumerate() {
            if self.full() {
                break;
            }
            if i > 0 {
                self.w(", ");
            }
            let before = self.out.len();
            if self.node(a, 0).is_err() {
                self.out.truncate(before);
            }
        }
        self.w(")");
        self.finish()
    }

    fn start(&mut self, limit: usize) {
        self.out.clear();
        self.truncated = false;
        self.budget_stopped = false;
        self.level = 1;
        let left = self.budget.bytes_left();
        self.limit_is_budget = left < limit;
        self.limit = limit.min(left);
    }

    fn finish(&mut self) -> String {
        self.level = 0;
        self.budget.charge(self.out.len());
        if self.budget_stopped {
            self.budget.set_cut();
        }
        std::mem::take(&mut self.out)
    }

    /// Renders `id` as a separate text inside the one being rendered (a callable's name, a
    /// fraction's terms): its own limit and recursion marks, the same budget. It continues the
    /// caller's nesting (`id` is at `depth`, at most `max_depth`): a text that restarted at
    /// depth 0 would let a chain of objects, each calling the previous one, recurse without
    /// bound and overflow the stack.
    fn nested(
        &mut self,
        id: NodeId,
        limit: usize,
        depth: usize,
        max_depth: usize,
    ) -> Result<String, PickleError> {
        let out = std::mem::take(&mut self.out);
        let saved = (
            self.limit,
            self.limit_is_budget,
            self.max_depth,
            self.truncated,
        );
        let Some(level) = self.level.checked_add(1) else {
            return Err(PickleError::RenderDepth {
                max_depth: self.max_depth,
            });
        };
        let left = self.budget.bytes_left().saturating_sub(out.len());
        self.limit_is_budget = left < limit;
        self.limit = limit.min(left);
        self.max_depth = max_depth;
        self.truncated = false;
        self.level = level;
        let r = self.node(id, depth);
        self.level -= 1;
        let text = std::mem::replace(&mut self.out, out);
        (
            self.limit,
            self.limit_is_budget,
            self.max_depth,
            self.truncated,
        ) = saved;
        if self.budget_stopped {
            self.truncated = true;
        }
        r.map(|()| text)
    }

    fn full(&mut self) -> bool {
        if self.out.len() >= self.limit {
            self.truncated = true;
            self.budget_stopped |= self.limit_is_budget;
        }
        self.truncated
    }

    /// Spends `n` visits on work that writes nothing (copying or scanning `n` items); false,
    /// and the text stops, when the budget has no more.
    fn work(&mut self, n: usize) -> bool {
        if self.budget.visits_n(n) {
            return true;
        }
        self.truncated = true;
        self.budget_stopped = true;
        false
    }

    /// Bytes of input worth rendering before the output limit (the rest is cut anyway).
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.out.len()).saturating_add(8)
    }

    /// The part of `b` worth rendering before the output limit (the rest is cut anyway);
    /// marks the output truncated when `b` is shortened.
    fn budgeted<'b>(&mut self, b: &'b [u8]) -> (&'b [u8], bool) {
        let room = self.room();
        if b.len() > room {
            // `repr_str` stops cleanly at a cut multi-byte sequence.
            (b.get(..room).unwrap_or(b), true)
        } else {
            (b, false)
        }
    }

    fn w(&mut self, s: &str) {
        if !self.full() {
            self.out.push_str(s);
        }
    }

    fn node(&mut self, id: NodeId, depth: usize) -> R {
        if self.full() || !self.work(1) {
            return Ok(());
        }
        if depth > self.max_depth {
            return Err(PickleError::RenderDepth {
                max_depth: self.max_depth,
            });
        }
        let t = self.tree;
        let Some(node) = t.get(id) else {
            self.w("<missing>");
            return Ok(());
        };
        let level = self.level;
        let before = self.active.get(id as usize).copied().unwrap_or(0);
        if before == level {
            let marker = match node {
                Node::List(_) => "[...]",
                Node::Dict(_) => "{...}",
                Node::Tuple(_) => "(...)",
                Node::Set(_) => "set(...)",
                Node::FrozenSet(_) => "frozenset(...)",
                Node::Object(o) => match callee(t, o) {
                    Some(("collections", "deque")) => "[...]",
                    Some(("collections", "defaultdict" | "Counter")) => "{...}",
                    _ => "...",
                },
                _ => "...",
            };
            self.w(marker);
            return Ok(());
        }
        if let Some(a) = self.active.get_mut(id as usize) {
            *a = level;
        }
        let r = self.node_inner(id, node, depth);
        if let Some(a) = self.active.get_mut(id as usize) {
            *a = before;
        }
        r
    }

    fn node_inner(&mut self, id: NodeId, node: &'t Node, depth: usize) -> R {
        match node {
            Node::None => self.w("None"),
            Node::Bool(true) => self.w("True"),
            Node::Bool(false) => self.w("False"),
            Node::Int(v) => self.w(&v.to_string()),
            Node::IntText(s) => self.w(s),
            Node::BigInt(raw) => {
                let s = self
                    .big
                    .entry(id)
                    .or_insert_with(|| bigint::to_decimal(raw))
                    .clone();
                self.w(&s);
            }
            Node::Float(f) => self.w(&float_repr(*f)),
            Node::Str(b) => {
                let (b, cut) = self.budgeted(b);
                if !self.full() {
                    text::repr_str(b, &mut self.out);
                }
                self.truncated |= cut;
            }
            Node::Bytes(b) => {
                let (b, cut) = self.budgeted(b);
                if !self.full() {
                    text::repr_bytes(b, &mut self.out);
                }
                self.truncated |= cut;
            }
            Node::ByteArray(b) => {
                self.w("bytearray(");
                let (b, cut) = self.budgeted(b);
                if !self.full() {
                    text::repr_bytes(b, &mut self.out);
                }
                self.truncated |= cut;
                self.w(")");
            }
            Node::List(v) => self.seq("[", v, "]", depth)?,
            Node::Tuple(v) => {
                if v.len() == 1 {
                    self.seq("(", v, ",)", depth)?;
                } else {
                    self.seq("(", v, ")", depth)?;
                }
            }
            Node::Set(v) => self.set_like("set", v, depth)?,
            Node::FrozenSet(v) => self.set_like("frozenset", v, depth)?,
            Node::Dict(d) => self.dict(d, depth)?,
            Node::Global(g) => {
                let s = global_repr(&g.module, &g.name);
                self.w(&s);
            }
            Node::Object(o) => self.object(id, o, depth)?,
        }
        Ok(())
    }

    fn seq(&mut self, open: &str, v: &[NodeId], close: &str, depth: usize) -> R {
        self.w(open);
        for (i, &c) in v.iter().enumerate() {
            if self.full() {
                return Ok(());
            }
            if i > 0 {
                self.w(", ");
            }
            self.node(c, depth + 1)?;
        }
        self.w(close);
        Ok(())
    }

    fn set_like(&mut self, name: &str, v: &[NodeId], depth: usize) -> R {
        if v.is_empty() {
            self.w(name);
            self.w("()");
            return Ok(());
        }
        if name == "set" {
            return self.seq("{", v, "}", depth);
        }
        self.w(name);
        self.w("(");
        self.seq("{", v, "}", depth)?;
        self.w(")");
        Ok(())
    }

    fn dict(&mut self, d: &[(NodeId, NodeId)], depth: usize) -> R {
        self.w("{");
        self.pairs(d, ": ", depth)?;
        self.w("}");
        Ok(())
    }

    fn pairs(&mut self, d: &[(NodeId, NodeId)], sep: &str, depth: usize) -> R {
        for (i, &(k, v)) in d.iter().enumerate() {
            if self.full() {
                return Ok(());
            }
            if i > 0 {
                self.w(", ");
            }
            self.node(k, depth + 1)?;
            self.w(sep);
            self.node(v, depth + 1)?;
        }
        Ok(())
    }

    /// `name(args, k=v)`.
    fn call(
        &mut self,
        name: &str,
        args: &[NodeId],
        kwargs: &[(NodeId, NodeId)],
        depth: usize,
    ) -> R {
        self.w(name);
        self.w("(");
        for (i, &a) in args.iter().enumerate() {
            if self.full() {
                return Ok(());
            }
            if i > 0 {
                self.w(", ");
            }
            self.node(a, depth + 1)?;
        }
        for (i, &(k, v)) in kwargs.iter().enumerate() {
            if self.full() {
                return Ok(());
            }
            if i > 0 || !args.is_empty() {
                self.w(", ");
            }
            match self.tree.str_of(k) {
                Some(s) => self.w(&s),
                None => self.node(k, depth + 1)?,
            }
            self.w("=");
            self.node(v, depth + 1)?;
        }
        self.w(")");
        Ok(())
    }

    fn object(&mut self, id: NodeId, o: &'t Object, depth: usize) -> R {
        let t = self.tree;
        let args = items(t, o.args);
        let arg = |i: usize| args.get(i).copied();
        if let Some(known) = callee(t, o) {
            if self.known(id, o, known, args, depth)? {
                return Ok(());
            }
        }
        let cls = type_info(t, o.callable, 8);
        // Instances: NEWOBJ / INST of a class.
        if matches!(o.kind, ObjKind::NewObj | ObjKind::Inst) {
            if let Some(cls) = cls {
                return self.instance(&cls, o, args, depth);
            }
        }
        if let Some(cls) = cls {
            if cls.exception {
                return self.exception(&cls, o, args, depth);
            }
            if let Some(name) = self.enum_member(id, o) {
                let value = arg(0).unwrap_or(super::reader::NONE_ID);
                self.w("<");
                self.w(&name);
                self.w(": ");
                self.node(value, depth + 1)?;
                self.w(">");
                return Ok(());
            }
        }
        // Generic call.
        let name = self.callable_name(o.callable, depth)?;
        let kwargs = o.kwargs.map(|k| dict_pairs(t, k)).unwrap_or(&[]);
        let has_extra = !o.state.is_empty() || !o.items.is_empty() || !o.pairs.is_empty();
        if has_extra {
            self.w("<");
        }
        self.call(&name, args, kwargs, depth)?;
        if has_extra {
            self.extras(o.state.last().copied(), &o.items, &o.pairs, depth)?;
            self.w(">");
        }
        Ok(())
    }

    /// ` state=..., items=[...], pairs={...}` for the marked forms.
    fn extras(
        &mut self,
        state: Option<NodeId>,
        list: &[NodeId],
        pairs: &[(NodeId, NodeId)],
        depth: usize,
    ) -> R {
        if let Some(s) = state {
            self.w(" state=");
            self.node(s, depth + 1)?;
        }
        if !list.is_empty() {
            self.seq(" items=[", list, "]", depth)?;
        }
        if !pairs.is_empty() {
            self.w(" items={");
            self.pairs(pairs, ": ", depth)?;
            self.w("}");
        }
        Ok(())
    }

    /// A readable name for a callable that has no special meaning.
    fn callable_name(&mut self, id: NodeId, depth: usize) -> Result<String, PickleError> {
        let t = self.tree;
        if let Some((m, n)) = global_name(t, id) {
            return Ok(if m == "builtins" {
                n.to_owned()
            } else {
                format!("{m}.{n}")
            });
        }
        if let Some(ti) = type_info(t, id, 8) {
            return Ok(ti.full_name());
        }
        if let Some(Node::Object(o)) = t.get(id) {
            if let Some(("dill._dill", "_create_function")) = callee(t, o) {
                if let Some(name) = self.function_name(o) {
                    return Ok(name);
                }
            }
        }
        let s = self.nested(id, 200, depth + 1, self.max_depth)?;
        Ok(format!("({s})"))
    }

    fn function_name(&mut self, o: &Object) -> Option<String> {
        let t = self.tree;
        let a = items(t, o.args);
        if let Some(q) = a.first().and_then(|&c| t.object_of(c)).and_then(|c| {
            self.work(items(t, c.args).len())
                .then(|| code_qualname(t, c))?
        }) {
            return Some(q);
        }
        // State dicts carry __qualname__ (dill >= 0.3.6 BUILDs it).
        for &s in o.state.iter().rev() {
            if !self.work(1 + items(t, s).len()) {
                return None;
            }
            let dicts = std::iter::once(s).chain(items(t, s).iter().copied());
            for d in dicts {
                if let Some(q) = dict_get(t, d, "__qualname__").and_then(|q| t.str_of(q)) {
                    return Some(q);
                }
            }
        }
        if let Some(n) = a.get(2).and_then(|&n| t.str_of(n)) {
            return Some(n);
        }
        let code = t.object_of(*a.first()?)?;
        code_name(t, code)
    }

    /// Handles globals with a known meaning; false to fall back to the generic forms.
    fn known(
        &mut self,
        id: NodeId,
        o: &'t Object,
        known: (&str, &str),
        args: &'t [NodeId],
        depth: usize,
    ) -> Result<bool, PickleError> {
        let t = self.tree;
        let arg = |i: usize| args.get(i).copied();
        match known {
            ("cideldill_client.custom_picklers", "_reconstruct_placeholder") => {
                let Some(d) = arg(0) else { return Ok(false) };
                let s = placeholder_summary(t, d);
                self.w(&s);
            }
            ("dill._dill", "_load_type" | "_create_type") => {
                let Some(ti) = type_info(t, id, 8) else {
                    return Ok(false);
                };
                if ti.enum_class {
                    self.w(&format!("<enum '{}'>", ti.name()));
                } else {
                    self.w(&format!("<class '{}'>", ti.full_name()));
                }
            }
            ("dill._dill", "_create_function") => {
                let name = self.function_name(o).unwrap_or_else(|| "?".to_owned());
                self.w(&format!("<function {name}>"));
            }
            ("dill._dill", "_create_code") => {
                if !self.work(args.len()) {
                    return Ok(true);
                }
                let name = code_name(t, o).unwrap_or_else(|| "?".to_owned());
                self.w(&format!("<code object {name}>"));
            }
            ("dill._dill", "_create_cell") => self.w("<cell>"),
            ("dill._dill", "_import_module") => {
                let Some(n) = arg(0).and_then(|a| t.str_of(a)) else {
                    return Ok(false);
                };
                self.w(&format!("<module '{n}'>"));
            }
            ("dill._dill", "_eval_repr") => {
                let Some(n) = arg(0).and_then(|a| t.str_of(a)) else {
                    return Ok(false);
                };
                self.w(&n);
            }
            ("dill._dill", "_get_attr") | ("builtins", "getattr") => {
                let (Some(obj), Some(name)) = (arg(0), arg(1).and_then(|a| t.str_of(a))) else {
                    return Ok(false);
                };
                if let Some(ti) = type_info(t, id, 8) {
                    self.w(&format!("<attribute {}>", ti.full_name()));
                } else {
                    self.w("<attribute ");
                    self.w(&name);
                    self.w(" of ");
                    self.node(obj, depth + 1)?;
                    self.w(">");
                }
            }
            ("copyreg", "_reconstructor") | ("copyreg", "__newobj__") => {
                let Some(cls) = arg(0).and_then(|c| type_info(t, c, 8)) else {
                    return Ok(false);
                };
                let rest = if known.1 == "__newobj__" {
                    args.get(1..).unwrap_or(&[])
                } else {
                    &[]
                };
                self.instance(&cls, o, rest, depth)?;
            }
            ("_codecs", "encode") | ("builtins", "bytes") => {
                let Some((b, cut)) = bytes_value(t, id, self.room()) else {
                    return Ok(false);
                };
                if !o.state.is_empty() {
                    return Ok(false);
                }
                if !self.full() {
                    text::repr_bytes(&b, &mut self.out);
                }
                self.truncated |= cut;
            }
            ("builtins", "bytearray") => {
                let (b, cut) = match arg(0) {
                    None => (Vec::new(), false),
                    Some(a) => match bytes_value(t, a, self.room()) {
                        Some(b) => b,
                        None => return Ok(false),
                    },
                };
                self.w("bytearray(");
                if !self.full() {
                    text::repr_bytes(&b, &mut self.out);
                }
                self.truncated |= cut;
                self.w(")");
            }
            ("builtins", "set" | "frozenset" | "list" | "tuple") => {
                let elems = match arg(0) {
                    None => &[][..],
                    Some(a) => match t.get(a) {
                        Some(Node::List(v)) => v.as_slice(),
                        Some(Node::Tuple(v)) => v,
                        Some(Node::Set(v)) => v.as_slice(),
                        Some(Node::FrozenSet(v)) => v,
                        _ => return Ok(false),
                    },
                };
                match known.1 {
                    "list" => self.seq("[", elems, "]", depth)?,
                    "tuple" if elems.len() == 1 => self.seq("(", elems, ",)", depth)?,
                    "tuple" => self.seq("(", elems, ")", depth)?,
                    n => self.set_like(n, elems, depth)?,
                }
            }
            ("builtins", "dict") => {
                let Some(d) = arg(0).or(Some(super::reader::NONE_ID)) else {
                    return Ok(false);
                };
                match t.get(d) {
                    Some(Node::Dict(p)) => self.dict(p, depth)?,
                    Some(Node::None) if args.is_empty() => self.dict(&o.pairs, depth)?,
                    _ => return Ok(false),
                }
            }
            ("builtins", "complex") => {
                let f = |i: usize| match arg(i).and_then(|a| t.get(a)) {
                    Some(Node::Float(f)) => Some(*f),
                    Some(Node::Int(v)) => Some(*v as f64),
                    Some(Node::Bool(b)) => Some(f64::from(u8::from(*b))),
                    None => Some(0.0),
                    _ => None,
                };
                let (Some(re), Some(im)) = (f(0), f(1)) else {
                    return Ok(false);
                };
                self.w(&complex_repr(re, im));
            }
            ("builtins", "range") => {
                if !self.work(args.len()) {
                    return Ok(true);
                }
                let v: Vec<i64> = args.iter().filter_map(|&a| int_of(t, a)).collect();
                let s = match v.as_slice() {
                    [stop] if args.len() == 1 => format!("range(0, {stop})"),
                    [a, b] if args.len() == 2 => format!("range({a}, {b})"),
                    [a, b, 1] if args.len() == 3 => format!("range({a}, {b})"),
                    [a, b, c] if args.len() == 3 => format!("range({a}, {b}, {c})"),
                    _ => return Ok(false),
                };
                self.w(&s);
            }
            ("builtins", "slice") => {
                if !self.work(args.len()) {
                    return Ok(true);
                }
                let mut a: Vec<NodeId> = args.to_vec();
                while a.len() < 3 {
                    a.insert(0, super::reader::NONE_ID);
                }
                self.call("slice", &a, &[], depth)?;
            }
            ("builtins", "object") if args.is_empty() => self.w("<object object>"),
            ("datetime", which) => return self.datetime(which, args, depth),
            ("re", "RegexFlag") => {
                let Some(v) = arg(0).and_then(|a| int_of(t, a)) else {
                    return Ok(false);
                };
                let s = if v == 0 {
                    "re.NOFLAG".to_owned()
                } else {
                    match regex_flags(v, REGEX_FLAGS) {
                        Some(s) => s,
                        None => return Ok(false),
                    }
                };
                self.w(&s);
            }
            ("re", "_compile") => {
                let (Some(p), Some(f)) = (arg(0), arg(1).and_then(|a| int_of(t, a))) else {
                    return Ok(false);
                };
                let mut f = f;
                if matches!(t.get(p), Some(Node::Str(_))) && f & (4 | 32 | 256) == 32 {
                    f &= !32;
                }
                self.w("re.compile(");
                self.node(p, depth + 1)?;
                if f != 0 {
                    let Some(names) = regex_flags(f, PATTERN_FLAGS) else {
                        return Ok(false);
                    };
                    self.w(", ");
                    self.w(&names);
                }
                self.w(")");
            }
            ("http", "HTTPStatus") => {
                let v = arg(0).and_then(|a| int_of(t, a));
                let Some((v, n)) = HTTP_STATUS.iter().find(|&&(c, _)| Some(c) == v) else {
                    return Ok(false);
                };
                self.w(&format!("<HTTPStatus.{n}: {v}>"));
            }
            ("pathlib", cls) => {
                if !self.work(args.len()) {
                    return Ok(true);
                }
                let parts: Option<Vec<String>> = args.iter().map(|&a| t.str_of(a)).collect();
                let Some(parts) = parts else { return Ok(false) };
                let sep = if cls.contains("Windows") { '\\' } else { '/' };
                let mut path = String::new();
                for p in &parts {
                    if !path.is_empty() && !path.ends_with(sep) {
                        path.push(sep);
                    }
                    path.push_str(p);
                }
                if path.is_empty() {
                    path.push('.');
                }
                self.w(cls);
                self.w("(");
                let (b, cut) = self.budgeted(path.as_bytes());
                if !self.full() {
                    text::repr_str(b, &mut self.out);
                }
                self.truncated |= cut;
                self.w(")");
            }
            ("decimal", "Decimal") => {
                let Some(s) = arg(0).and_then(|a| t.str_of(a)) else {
                    return Ok(false);
                };
                self.w(&format!("Decimal('{s}')"));
            }
            ("fractions", "Fraction") => {
                let s = match (arg(0), arg(1)) {
                    (Some(a), Some(b)) => {
                        // Two levels below the terms, as many as their own text allowed.
                        let limit = self.room().min(200_000);
                        let max = self.max_depth.min(depth + 3);
                        let a = self.nested(a, limit, depth + 1, max)?;
                        let b = self.nested(b, limit, depth + 1, max)?;
                        format!("Fraction({a}, {b})")
                    }
                    (Some(a), None) => match t.str_of(a) {
                        Some(s) => match s.split_once('/') {
                            Some((n, d)) => format!("Fraction({}, {})", n.trim(), d.trim()),
                            None => format!("Fraction({}, 1)", s.trim()),
                        },
                        None => return Ok(false),
                    },
                    _ => return Ok(false),
                };
                self.w(&s);
            }
            ("uuid", "UUID") => {
                let int = o
                    .state
                    .last()
                    .and_then(|&s| dict_get(t, s, "int"))
                    .and_then(|i| match t.get(i)? {
                        Node::Int(v) => u128::try_from(*v).ok(),
                        Node::BigInt(b) => bigint::to_u128(b),
                        _ => None,
                    });
                let Some(v) = int else { return Ok(false) };
                let h = format!("{v:032x}");
                self.w(&format!(
                    "UUID('{}-{}-{}-{}-{}')",
                    &h[0..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..32]
                ));
            }
            ("collections", "OrderedDict") => {
                let pairs: &[(NodeId, NodeId)] = match arg(0).map(|a| (a, t.get(a))) {
                    None => &o.pairs,
                    _ => return Ok(false),
                };
                if pairs.is_empty() {
                    self.w("OrderedDict()");
                } else {
                    self.w("OrderedDict([");
                    for (i, &(k, v)) in pairs.iter().enumerate() {
                        if self.full() {
                            return Ok(true);
                        }
                        if i > 0 {
                            self.w(", ");
                        }
                        self.w("(");
                        self.node(k, depth + 2)?;
                        self.w(", ");
                        self.node(v, depth + 2)?;
                        self.w(")");
                    }
                    self.w("])");
                }
            }
            ("collections", "defaultdict") => {
                if !self.work(arg(1).map_or(0, |d| dict_pairs(t, d).len()) + o.pairs.len()) {
                    return Ok(true);
                }
                self.w("defaultdict(");
                match arg(0) {
                    Some(f) => self.node(f, depth + 1)?,
                    None => self.w("None"),
                }
                self.w(", ");
                let mut pairs: Vec<(NodeId, NodeId)> = arg(1)
                    .map(|d| dict_pairs(t, d).to_vec())
                    .unwrap_or_default();
                pairs.extend_from_slice(&o.pairs);
                self.dict(&pairs, depth)?;
                self.w(")");
            }
            ("collections", "deque") => {
                if !self.work(arg(0).map_or(0, |a| items(t, a).len()) + o.items.len()) {
                    return Ok(true);
                }
                let mut elems: Vec<NodeId> =
                    arg(0).map(|a| items(t, a).to_vec()).unwrap_or_default();
                elems.extend_from_slice(&o.items);
                self.w("deque(");
                self.seq("[", &elems, "]", depth)?;
                if let Some(m) = arg(1).filter(|&m| m != super::reader::NONE_ID) {
                    self.w(", maxlen=");
                    self.node(m, depth + 1)?;
                }
                self.w(")");
            }
            ("collections", "Counter") => {
                let n = arg(0).map_or(0, |d| dict_pairs(t, d).len()) + o.pairs.len();
                // Copying, checking and sorting the pairs: about 2 n log n steps.
                if !self.work(n.saturating_mul(2 + n.max(1).ilog2() as usize)) {
                    return Ok(true);
                }
                let mut pairs: Vec<(NodeId, NodeId)> = arg(0)
                    .map(|d| dict_pairs(t, d).to_vec())
                    .unwrap_or_default();
                pairs.extend_from_slice(&o.pairs);
                if pairs.is_empty() {
                    self.w("Counter()");
                } else {
                    if pairs.iter().all(|&(_, v)| int_of(t, v).is_some()) {
                        // most_common(): stable sort by count, descending.
                        pairs.sort_by_key(|&(_, v)| std::cmp::Reverse(int_of(t, v).unwrap_or(0)));
                    }
                    self.w("Counter(");
                    self.dict(&pairs, depth)?;
                    self.w(")");
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn datetime(
        &mut self,
        which: &str,
        args: &[NodeId],
        depth: usize,
    ) -> Result<bool, PickleError> {
        let t = self.tree;
        let arg = |i: usize| args.get(i).copied();
        let tz = arg(1).filter(|&z| z != super::reader::NONE_ID);
        match which {
            "timedelta" => {
                if !self.work(args.len()) {
                    return Ok(true);
                }
                let v: Vec<i64> = args.iter().filter_map(|&a| int_of(t, a)).collect();
                let [d, s, us] = v.as_slice() else {
                    return Ok(false);
                };
                self.w(&timedelta_repr(*d, *s, *us));
            }
            "timezone" => {
                let Some(td) = arg(0).and_then(|a| t.object_of(a)) else {
                    return Ok(false);
                };
                if !self.work(items(t, td.args).len()) {
                    return Ok(true);
                }
                let v: Vec<i64> = items(t, td.args)
                    .iter()
                    .filter_map(|&a| int_of(t, a))
                    .collect();
                let name = arg(1);
                if v.iter().all(|&x| x == 0) && name.is_none() {
                    self.w("datetime.timezone.utc");
                } else {
                    self.w("datetime.timezone(");
                    self.node(arg(0).unwrap_or(0), depth + 1)?;
                    if let Some(n) = name {
                        self.w(", ");
                        self.node(n, depth + 1)?;
                    }
                    self.w(")");
                }
            }
            "datetime" | "date" | "time" => {
                let Some((b, false)) = arg(0).and_then(|a| bytes_value(t, a, 16)) else {
                    return Ok(false);
                };
                let mut fold = false;
                let fields: Vec<u32> = match (which, b.as_slice()) {
                    ("datetime", &[y1, y2, mo, d, h, mi, s, u1, u2, u3]) => {
                        fold = mo & 0x80 != 0;
                        let us = (u32::from(u1) << 16) | (u32::from(u2) << 8) | u32::from(u3);
                        let mut f = vec![
                            u32::from(y1) * 256 + u32::from(y2),
                            u32::from(mo & 0x7f),
                            u32::from(d),
                            u32::from(h),
                            u32::from(mi),
                            u32::from(s),
                            us,
                        ];
                        for _ in 0..2 {
                            if f.last() == Some(&0) {
                                f.pop();
                            }
                        }
                        f
                    }
                    ("date", &[y1, y2, mo, d]) => vec![
                        u32::from(y1) * 256 + u32::from(y2),
                        u32::from(mo),
                        u32::from(d),
                    ],
                    ("time", &[h, mi, s, u1, u2, u3]) => {
                        fold = h & 0x80 != 0;
                        let us = (u32::from(u1) << 16) | (u32::from(u2) << 8) | u32::from(u3);
                        let mut f = vec![u32::from(h & 0x7f), u32::from(mi), s.into(), us];
                        for _ in 0..2 {
                            if f.last() == Some(&0) {
                                f.pop();
                            }
                        }
                        f
                    }
                    _ => return Ok(false),
                };
                let list: Vec<String> = fields.iter().map(u32::to_string).collect();
                self.w(&format!("datetime.{which}({}", list.join(", ")));
                if let Some(z) = tz.filter(|_| which != "date") {
                    self.w(", tzinfo=");
                    self.node(z, depth + 1)?;
                }
                if fold {
                    self.w(", fold=1");
                }
                self.w(")");
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// An instance of `cls`: exceptions, dict/list subclasses, or a dataclass-style repr.
    fn instance(&mut self, cls: &TypeInfo, o: &'t Object, args: &[NodeId], depth: usize) -> R {
        let t = self.tree;
        if cls.exception {
            return self.exception(cls, o, args, depth);
        }
        let state = o.state.last().copied();
        let size = |s: NodeId| match t.get(s) {
            Some(Node::Dict(d)) => d.len(),
            Some(Node::Tuple(p)) if p.len() == 2 => p.iter().map(|&x| dict_pairs(t, x).len()).sum(),
            _ => 0,
        };
        // Gathering and checking the fields.
        if !self.work(state.map_or(0, size)) {
            return Ok(());
        }
        let mut fields: Vec<(NodeId, NodeId)> = Vec::new();
        let mut odd_state = None;
        if let Some(s) = state {
            match t.get(s) {
                Some(Node::Dict(d)) => fields.extend_from_slice(d),
                Some(Node::None) => {}
                Some(Node::Tuple(p)) if p.len() == 2 => {
                    for &part in p.iter() {
                        match t.get(part) {
                            Some(Node::Dict(d)) => fields.extend_from_slice(d),
                            Some(Node::None) => {}
                            _ => odd_state = Some(s),
                        }
                    }
                }
                _ => odd_state = Some(s),
            }
        }
        let str_keys = fields
            .iter()
            .all(|&(k, _)| matches!(t.get(k), Some(Node::Str(_))));
        let plain = odd_state.is_none() && str_keys && args.is_empty();
        if plain && fields.is_empty() && !o.items.is_empty() && o.pairs.is_empty() {
            return self.seq("[", &o.items, "]", depth);
        }
        if plain && fields.is_empty() && o.items.is_empty() && !o.pairs.is_empty() {
            return self.dict(&o.pairs, depth);
        }
        if plain && o.items.is_empty() && o.pairs.is_empty() {
            return self.call(&cls.qualname, &[], &fields, depth);
        }
        self.w("<");
        self.w(&cls.full_name());
        self.w(" object");
        if !args.is_empty() {
            self.seq(" (args: (", args, "))", depth)?;
        }
        if let Some(s) = state {
            self.w(" (state: ");
            self.node(s, depth + 1)?;
            self.w(")");
        }
        if !o.items.is_empty() || !o.pairs.is_empty() {
            self.extras(None, &o.items, &o.pairs, depth)?;
        }
        self.w(">");
        Ok(())
    }

    fn exception(&mut self, cls: &TypeInfo, _o: &Object, args: &[NodeId], depth: usize) -> R {
        let shown = exception_args(self.tree, cls, args);
        self.w(cls.name());
        // One arg: `Name(repr(arg))`; otherwise `Name` + repr(args): the same text.
        self.seq("(", shown, ")", depth)
    }

    /// `Color.RED` when `id` is `REDUCE(Color, (value,))` and `Color` was pickled by value with
    /// this node in its `_member_map_`. The enum classes are found once per renderer, each
    /// class's members indexed once, and each object's answer kept.
    fn enum_member(&mut self, id: NodeId, o: &Object) -> Option<String> {
        let t = self.tree;
        let (module, name) = global_name(t, o.callable)?;
        if items(t, o.args).len() != 1 {
            return None;
        }
        if self.enums.is_none() {
            // One scan of the tree, paid once per renderer.
            self.work(t.nodes.len());
            self.enums = Some(EnumIndex::new(t, self.budget));
        }
        let index = self.enums.as_mut()?;
        if let Some(found) = index.found.get(&id) {
            return found.clone();
        }
        let found = index.member(t, id, o, module, name);
        index.found.insert(id, found.clone());
        found
    }
}

#[cfg(test)]
mod tests;
