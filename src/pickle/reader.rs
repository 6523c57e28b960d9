//! The pickle virtual machine: reads protocol 0 to 5 pickles into a [`Tree`] arena without
//! importing, calling or executing anything.
//!
//! Invariants and limits:
//! * Every node lives in `Tree::nodes`; children are `NodeId` indices into it, so shared and
//!   cyclic structure (memo references, `APPEND` into a list that contains itself) is just two
//!   indices pointing at the same node. Nothing is reference counted, nothing leaks.
//! * Every opcode costs O(1) amortized plus the bytes it reads or the stack items it consumes,
//!   so decoding time is linear in the input.
//! * Memory is accounted as it is reserved (`MemoryBudget`): every `Vec` growth is checked *before*
//!   it happens against `Limits::max_memory(len)` (8 x input + 1 MiB by default, less a small
//!   reserve), so a hostile pickle gets `PickleError::MemoryLimit` instead of an allocation.
//! * The mark stack is bounded by `Limits::max_depth`, the memo by `Limits::max_memo`.
//! * Every read is bounds-checked; truncated input yields `PickleError::Truncated`.
//! * Strings keep Python's `surrogatepass` semantics: `Node::Str` holds generalized UTF-8
//!   (lone surrogates encoded as 3-byte sequences are allowed), see [`super::text`].

use std::collections::HashMap;

use super::{Limits, PickleError};

/// Index of a node in [`Tree::nodes`].
pub type NodeId = u32;

/// Well-known node ids, allocated first in every tree.
pub const NONE_ID: NodeId = 0;
/// `True`.
pub const TRUE_ID: NodeId = 1;
/// `False`.
pub const FALSE_ID: NodeId = 2;
/// `()`, shared like CPython's empty tuple.
pub const EMPTY_TUPLE_ID: NodeId = 3;

/// A reference to a module-level name (`GLOBAL`, `STACK_GLOBAL`, `INST`), after Python 2 name
/// mapping for protocols below 3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    /// Module, e.g. `builtins`.
    pub module: Box<str>,
    /// Possibly dotted name, e.g. `OrderedDict` or `Outer.Inner`.
    pub name: Box<str>,
}

/// How an object node was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjKind {
    /// `REDUCE`: `callable(*args)`.
    Reduce,
    /// `NEWOBJ` / `NEWOBJ_EX`: `cls.__new__(cls, *args, **kwargs)`.
    NewObj,
    /// `INST` / `OBJ` (protocols 0 and 1): `cls(*args)`.
    Inst,
}

/// An object produced by calling something, plus everything later applied to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// How it was created.
    pub kind: ObjKind,
    /// The callable or class.
    pub callable: NodeId,
    /// The positional arguments (usually a tuple node).
    pub args: NodeId,
    /// `NEWOBJ_EX` keyword arguments.
    pub kwargs: Option<NodeId>,
    /// `BUILD` states, in order.
    pub state: Vec<NodeId>,
    /// Items added with `APPEND(S)` / `ADDITEMS`.
    pub items: Vec<NodeId>,
    /// Pairs added with `SETITEM(S)`.
    pub pairs: Vec<(NodeId, NodeId)>,
}

/// One value of the display tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An int that fits in 64 bits.
    Int(i64),
    /// An int from `LONG1`/`LONG4`: little-endian two's complement bytes.
    BigInt(Box<[u8]>),
    /// An int from protocol-0 text that does not fit in 64 bits: `-`? followed by digits.
    IntText(Box<str>),
    /// A float.
    Float(f64),
    /// A str, as generalized UTF-8 (lone surrogates allowed).
    Str(Box<[u8]>),
    /// `bytes`.
    Bytes(Box<[u8]>),
    /// `bytearray`.
    ByteArray(Box<[u8]>),
    /// A list (mutable: `APPEND` may add to it after it is referenced).
    List(Vec<NodeId>),
    /// A tuple.
    Tuple(Box<[NodeId]>),
    /// A dict, in insertion order (duplicate keys are kept as pickled).
    Dict(Vec<(NodeId, NodeId)>),
    /// A set, in pickled order.
    Set(Vec<NodeId>),
    /// A frozenset, in pickled order.
    FrozenSet(Box<[NodeId]>),
    /// A global reference.
    Global(Box<Global>),
    /// An object built by a call.
    Object(Box<Object>),
}

/// A decoded pickle.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The arena.
    pub nodes: Vec<Node>,
    /// The value `STOP` returned.
    pub root: NodeId,
    /// Lookups memoized while rendering (class descriptions, dict keys), so that a class or
    /// dict shared by many nodes is examined once.
    pub(super) lookups: super::render::Lookups,
}

impl Tree {
    /// The node with this id, if any. The renderers read nodes only through here (test builds
    /// count the reads, see [`node_reads`]).
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        #[cfg(test)]
        node_reads::count();
        self.nodes.get(id as usize)
    }

    /// The string value of a `Str` node, lossily (lone surrogates become U+FFFD).
    pub fn str_of(&self, id: NodeId) -> Option<String> {
        match self.get(id)? {
            Node::Str(b) => Some(super::text::lossy(b)),
            _ => None,
        }
    }

    /// The global reference of a `Global` node.
    pub fn global_of(&self, id: NodeId) -> Option<&Global> {
        match self.get(id)? {
            Node::Global(g) => Some(g),
            _ => None,
        }
    }

    /// The elements of a tuple or list node.
    pub fn seq_of(&self, id: NodeId) -> Option<&[NodeId]> {
        match self.get(id)? {
            Node::Tuple(t) => Some(t),
            Node::List(l) => Some(l),
            _ => None,
        }
    }

    /// The object of an `Object` node.
    pub fn object_of(&self, id: NodeId) -> Option<&Object> {
        match self.get(id)? {
            Node::Object(o) => Some(o),
            _ => None,
        }
    }
}

/// The work a rendering does, counted in test builds as node reads ([`Tree::get`]) on this
/// thread: a measure of work that a loaded machine or an unoptimized build does not change, for
/// the tests that bound the work of renderings of shared values. A limit stops a runaway
/// rendering at once (a panic naming the limit) instead of letting it run for minutes.
#[cfg(test)]
pub(crate) mod node_reads {
    use std::cell::Cell;

    thread_local! {
        static READS: Cell<u64> = const { Cell::new(0) };
        static LIMIT: Cell<u64> = const { Cell::new(u64::MAX) };
    }

    pub(super) fn count() {
        let n = READS.with(|r| {
            let n = r.get().saturating_add(1);
            r.set(n);
            n
        });
        let limit = LIMIT.with(Cell::get);
        if n > limit {
            LIMIT.with(|l| l.set(u64::MAX));
            panic!("more than {limit} node reads");
        }
    }

    /// Runs `f` and returns its result with the number of node reads it made on this thread;
    /// panics at the first read past `limit`.
    pub fn at_most<T>(limit: u64, f: impl FnOnce() -> T) -> (T, u64) {
        READS.with(|r| r.set(0));
        LIMIT.with(|l| l.set(limit));
        let out = f();
        LIMIT.with(|l| l.set(u64::MAX));
        (out, READS.with(Cell::get))
    }
}

/// Bytes reserved out of the memory budget for fixed costs (preallocated nodes, error text,
/// hash map overhead) that are not tracked one by one.
const RESERVE: usize = 64 * 1024;
/// Charged per sparse memo entry (hash map slot with load factor and growth slack).
const SPARSE_MEMO_COST: usize = 48;

/// Tracks heap bytes reserved by the decoder against the budget.
struct MemoryBudget {
    used: usize,
    limit: usize,
}

impl MemoryBudget {
    fn charge(&mut self, bytes: usize, at: usize) -> Result<(), PickleError> {
        let used = self.used.saturating_add(bytes);
        if used > self.limit {
            return Err(PickleError::MemoryLimit { offset: at });
        }
        self.used = used;
        Ok(())
    }

    /// Makes room for `add` more elements in `v`, growing geometrically while the budget
    /// allows, exactly otherwise, and failing before allocating past the budget.
    fn room<T>(&mut self, v: &mut Vec<T>, add: usize, at: usize) -> Result<(), PickleError> {
        let cap = v.capacity();
        let need = v.len().saturating_add(add);
        if need <= cap {
            return Ok(());
        }
        let size = std::mem::size_of::<T>().max(1);
        let mut want = need.max(cap.saturating_mul(2)).max(4);
        let cost = |w: usize| (w - cap).saturating_mul(size);
        if self.used.saturating_add(cost(want)) > self.limit {
            want = need;
        }
        self.charge(cost(want), at)?;
        v.reserve_exact(want - v.len());
        Ok(())
    }

    fn push<T>(&mut self, v: &mut Vec<T>, x: T, at: usize) -> Result<(), PickleError> {
        self.room(v, 1, at)?;
        v.push(x);
        Ok(())
    }
}

/// The memo: dense for the sequential ids picklers use, sparse otherwise.
struct Memo {
    dense: Vec<NodeId>,
    sparse: HashMap<u32, NodeId>,
    count: usize,
}

const EMPTY_SLOT: NodeId = NodeId::MAX;

impl Memo {
    fn put(
        &mut self,
        key: u64,
        val: NodeId,
        budget: &mut MemoryBudget,
        limits: &Limits,
        at: usize,
    ) -> Result<(), PickleError> {
        let Ok(key) = u32::try_from(key) else {
            return Err(PickleError::Invalid {
                offset: at,
                what: "memo key too large",
            });
        };
        let k = key as usize;
        if let Some(slot) = self.dense.get_mut(k) {
            if *slot == EMPTY_SLOT {
                self.count += 1;
            }
            *slot = val;
        } else if k <= self.dense.len().max(255) && !self.sparse.contains_key(&key) {
            let fill = k + 1 - self.dense.len();
            budget.room(&mut self.dense, fill, at)?;
            self.dense.resize(k, EMPTY_SLOT);
            self.dense.push(val);
            self.count += 1;
        } else {
            if !self.sparse.contains_key(&key) {
                budget.charge(SPARSE_MEMO_COST, at)?;
                self.count += 1;
            }
            self.sparse.insert(key, val);
        }
        if self.count > limits.max_memo {
            return Err(PickleError::MemoLimit { offset: at });
        }
        Ok(())
    }

    fn get(&self, key: u64, at: usize) -> Result<NodeId, PickleError> {
        let found = u32::try_from(key)
            .ok()
            .and_then(|k| match self.dense.get(k as usize) {
                Some(&v) if v != EMPTY_SLOT => Some(v),
                Some(_) => None,
                None => self.sparse.get(&k).copied(),
            });
        found.ok_or(PickleError::MemoMissing { offset: at, key })
    }
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    /// Offset of the opcode being executed (for errors).
    op_at: usize,
    nodes: Vec<Node>,
    stack: Vec<NodeId>,
    marks: Vec<usize>,
    memo: Memo,
    budget: MemoryBudget,
    limits: &'a Limits,
    protocol: u8,
    extra_state: Vec<(NodeId, NodeId)>,
    /// The node of each small int `0..=255` once one was read (`EMPTY_SLOT` before): shared,
    /// like CPython's small ints, and made on first use (a small pickle reads a few of them,
    /// and making all 256 up front cost more than decoding it).
    small_ints: [NodeId; 256],
}

/// Decodes a pickle into a tree. See the module doc for the limits.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Tree, PickleError> {
    let mut m = Machine {
        data: bytes,
        pos: 0,
        op_at: 0,
        nodes: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Memo {
            dense: Vec::new(),
            sparse: HashMap::new(),
            count: 0,
        },
        budget: MemoryBudget {
            used: 0,
            limit: limits.max_memory(bytes.len()).saturating_sub(RESERVE),
        },
        limits,
        protocol: 0,
        extra_state: Vec::new(),
        small_ints: [EMPTY_SLOT; 256],
    };
    m.prealloc()?;
    let root = m.run()?;
    Ok(Tree {
        nodes: m.nodes,
        root,
        lookups: super::render::Lookups::new(
            bytes
                .len()
                .saturating_mul(crate::limits::RENDER_LOOKUP_PER_INPUT_BYTE)
                .saturating_add(crate::limits::RENDER_LOOKUP_SLACK),
        ),
    })
}

fn err_trunc(at: usize) -> PickleError {
    PickleError::Truncated { offset: at }
}

impl<'a> Machine<'a> {
    fn prealloc(&mut self) -> Result<(), PickleError> {
        self.budget.room(&mut self.nodes, 4, 0)?;
        self.nodes.push(Node::None);
        self.nodes.push(Node::Bool(true));
        self.nodes.push(Node::Bool(false));
        self.nodes.push(Node::Tuple(Box::new([])));
        Ok(())
    }

    fn invalid(&self, what: &'static str) -> PickleError {
        PickleError::Invalid {
            offset: self.op_at,
            what,
        }
    }

    // ---- input ----

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self.pos.checked_add(n).ok_or(err_trunc(self.pos))?;
        let s = self.data.get(self.pos..end).ok_or(err_trunc(self.pos))?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u16(&mut self) -> Result<u16, PickleError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, PickleError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, PickleError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length that must fit in the remaining input.
    fn len_of(&self, n: u64) -> Result<usize, PickleError> {
        match usize::try_from(n) {
            Ok(n) if n <= self.data.len().saturating_sub(self.pos) => Ok(n),
            _ => Err(err_trunc(self.pos)),
        }
    }

    /// A newline-terminated line (without the newline).
    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(err_trunc(self.data.len()))?;
        let line = &rest[..n];
        self.pos += n + 1;
        Ok(line)
    }

    // ---- stack ----

    fn base(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, id: NodeId) -> Result<(), PickleError> {
        let at = self.op_at;
        self.budget.push(&mut self.stack, id, at)
    }

    fn pop(&mut self) -> Result<NodeId, PickleError> {
        if self.stack.len() <= self.base() {
            return Err(PickleError::StackUnderflow { offset: self.op_at });
        }
        self.stack
            .pop()
            .ok_or(PickleError::StackUnderflow { offset: self.op_at })
    }

    fn top(&self) -> Result<NodeId, PickleError> {
        if self.stack.len() <= self.base() {
            return Err(PickleError::StackUnderflow { offset: self.op_at });
        }
        self.stack
            .last()
            .copied()
            .ok_or(PickleError::StackUnderflow { offset: self.op_at })
    }

    /// Pops everything above the last mark, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<NodeId>, PickleError> {
        let base = self
            .marks
            .pop()
            .ok_or(PickleError::MarkMissing { offset: self.op_at })?;
        Ok(self.stack.split_off(base.min(self.stack.len())))
    }

    fn new_node(&mut self, node: Node) -> Result<NodeId, PickleError> {
        let at = self.op_at;
        let id = NodeId::try_from(self.nodes.len())
            .map_err(|_| PickleError::MemoryLimit { offset: at })?;
        if id == EMPTY_SLOT {
            return Err(PickleError::MemoryLimit { offset: at });
        }
        self.budget.push(&mut self.nodes, node, at)?;
        Ok(id)
    }

    fn push_new(&mut self, node: Node) -> Result<(), PickleError> {
        let id = self.new_node(node)?;
        self.push(id)
    }

    fn push_int(&mut self, v: i64) -> Result<(), PickleError> {
        let Some(small) = usize::try_from(v).ok().filter(|&n| n < 256) else {
            return self.push_new(Node::Int(v));
        };
        let id = match self.small_ints[small] {
            EMPTY_SLOT => {
                let id = self.new_node(Node::Int(v))?;
                self.small_ints[small] = id;
                id
            }
            known => known,
        };
        self.push(id)
    }

    fn push_str(&mut self, raw: &[u8]) -> Result<(), PickleError> {
        if !super::text::is_generalized_utf8(raw) {
            return Err(self.invalid("invalid UTF-8 in str"));
        }
        self.budget.charge(raw.len(), self.op_at)?;
        self.push_new(Node::Str(raw.into()))
    }

    fn push_bytes(&mut self, raw: &[u8], bytearray: bool) -> Result<(), PickleError> {
        self.budget.charge(raw.len(), self.op_at)?;
        if bytearray {
            self.push_new(Node::ByteArray(raw.into()))
        } else {
            self.push_new(Node::Bytes(raw.into()))
        }
    }

    /// Python 2 `str` (`STRING`, `BINSTRING`): decoded as ASCII like `pickle.loads`' default.
    fn push_py2_str(&mut self, raw: &[u8]) -> Result<(), PickleError> {
        if !raw.is_ascii() {
            return Err(self.invalid("non-ASCII Python 2 str (encoding='ASCII')"));
        }
        self.push_str(raw)
    }

    fn push_long_bytes(&mut self, raw: &[u8]) -> Result<(), PickleError> {
        if raw.len() <= 8 {
            let fill = if raw.last().is_some_and(|&b| b & 0x80 != 0) {
                0xff
            } else {
                0
            };
            let mut a = [fill; 8];
            a[..raw.len()].copy_from_slice(raw);
            return self.push_int(i64::from_le_bytes(a));
        }
        self.budget.charge(raw.len(), self.op_at)?;
        self.push_new(Node::BigInt(raw.into()))
    }

    fn push_int_text(&mut self, text: &[u8]) -> Result<(), PickleError> {
        let digits = parse_int_text(text).ok_or_else(|| self.invalid("invalid int text"))?;
        if let Ok(v) = digits.parse::<i64>() {
            return self.push_int(v);
        }
        self.budget.charge(digits.len(), self.op_at)?;
        self.push_new(Node::IntText(digits.into_boxed_str()))
    }

    fn memo_put(&mut self, key: u64) -> Result<(), PickleError> {
        let top = self.top()?;
        let at = self.op_at;
        self.memo.put(key, top, &mut self.budget, self.limits, at)
    }

    fn memo_get(&mut self, key: u64) -> Result<(), PickleError> {
        let id = self.memo.get(key, self.op_at)?;
        self.push(id)
    }

    fn global(&mut self, module: &str, name: &str) -> Result<NodeId, PickleError> {
        let (module, name) = if self.protocol < 3 {
            super::compat::map_global(module, name)
        } else {
            (module.to_owned(), name.to_owned())
        };
        self.budget
            .charge(module.len() + name.len() + 32, self.op_at)?;
        self.new_node(Node::Global(Box::new(Global {
            module: module.into_boxed_str(),
            name: name.into_boxed_str(),
        })))
    }

    fn new_object(
        &mut self,
        kind: ObjKind,
        callable: NodeId,
        args: NodeId,
        kwargs: Option<NodeId>,
    ) -> Result<(), PickleError> {
        self.budget
            .charge(std::mem::size_of::<Object>(), self.op_at)?;
        self.push_new(Node::Object(Box::new(Object {
            kind,
            callable,
            args,
            kwargs,
            state: Vec::new(),
            items: Vec::new(),
            pairs: Vec::new(),
        })))
    }

    fn tuple_of(&mut self, items: Vec<NodeId>) -> Result<NodeId, PickleError> {
        if items.is_empty() {
            return Ok(EMPTY_TUPLE_ID);
        }
        self.budget
            .charge(items.len() * std::mem::size_of::<NodeId>(), self.op_at)?;
        self.new_node(Node::Tuple(items.into_boxed_slice()))
    }

    fn append_items(&mut self, target: NodeId, items: &[NodeId]) -> Result<(), PickleError> {
        let at = self.op_at;
        let Some(node) = self.nodes.get_mut(target as usize) else {
            return Err(self.invalid("bad node"));
        };
        match node {
            Node::List(v) => {
                self.budget.room(v, items.len(), at)?;
                v.extend_from_slice(items);
            }
            Node::Object(o) => {
                self.budget.room(&mut o.items, items.len(), at)?;
                o.items.extend_from_slice(items);
            }
            _ => return Err(self.invalid("APPEND to a non-list")),
        }
        Ok(())
    }

    fn add_set_items(&mut self, target: NodeId, items: &[NodeId]) -> Result<(), PickleError> {
        let at = self.op_at;
        let Some(node) = self.nodes.get_mut(target as usize) else {
            return Err(self.invalid("bad node"));
        };
        match node {
            Node::Set(v) => {
                self.budget.room(v, items.len(), at)?;
                v.extend_from_slice(items);
            }
            Node::Object(o) => {
                self.budget.room(&mut o.items, items.len(), at)?;
                o.items.extend_from_slice(items);
            }
            _ => return Err(self.invalid("ADDITEMS to a non-set")),
        }
        Ok(())
    }

    fn set_items(&mut self, target: NodeId, items: &[NodeId]) -> Result<(), PickleError> {
        if items.len() % 2 != 0 {
            return Err(self.invalid("odd number of items for SETITEMS"));
        }
        let at = self.op_at;
        let pairs = items.chunks_exact(2).map(|c| (c[0], c[1]));
        let Some(node) = self.nodes.get_mut(target as usize) else {
            return Err(self.invalid("bad node"));
        };
        match node {
            Node::Dict(v) => {
                self.budget.room(v, items.len() / 2, at)?;
                v.extend(pairs);
            }
            Node::Object(o) => {
                self.budget.room(&mut o.pairs, items.len() / 2, at)?;
                o.pairs.extend(pairs);
            }
            _ => return Err(self.invalid("SETITEM on a non-dict")),
        }
        Ok(())
    }

    fn mark(&mut self) -> Result<(), PickleError> {
        if self.marks.len() >= self.limits.max_depth {
            return Err(PickleError::DepthLimit { offset: self.op_at });
        }
        let len = self.stack.len();
        let at = self.op_at;
        self.budget.push(&mut self.marks, len, at)
    }

    fn run(&mut self) -> Result<NodeId, PickleError> {
        loop {
            self.op_at = self.pos;
            let op = self.u8()?;
            match op {
                // ---- protocol 0 and 1 ----
                b'(' => self.mark()?,
                b'.' => return self.pop(),
                b'0' => {
                    if self.stack.len() > self.base() {
                        self.pop()?;
                    } else {
                        self.pop_mark()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let top = self.top()?;
                    self.push(top)?;
                }
                b'F' => {
                    let line = self.line()?;
                    let v = std::str::from_utf8(line)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| self.invalid("invalid float text"))?;
                    self.push_new(Node::Float(v))?;
                }
                b'I' => {
                    let line = self.line()?;
                    match line {
                        b"00" => self.push(FALSE_ID)?,
                        b"01" => self.push(TRUE_ID)?,
                        _ => self.push_int_text(line)?,
                    }
                }
                b'J' => {
                    let v = self.i32()?;
                    self.push_int(i64::from(v))?;
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push_int(i64::from(v))?;
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push_int(i64::from(v))?;
                }
                b'L' => {
                    let line = self.line()?;
                    let line = line.strip_suffix(b"L").unwrap_or(line);
                    self.push_int_text(line)?;
                }
                b'N' => self.push(NONE_ID)?,
                b'P' | b'Q' => {
                    return Err(PickleError::Unsupported {
                        offset: self.op_at,
                        what: "persistent id",
                    })
                }
                b'R' => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.new_object(ObjKind::Reduce, func, args, None)?;
                }
                b'S' => {
                    let line = self.line()?;
                    let raw = super::text::py2_string_literal(line)
                        .ok_or_else(|| self.invalid("invalid STRING literal"))?;
                    self.push_py2_str(&raw)?;
                }
                b'T' => {
                    let n = self.i32()?;
                    let n = u64::try_from(n).map_err(|_| self.invalid("negative length"))?;
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_py2_str(raw)?;
                }
                b'U' => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    self.push_py2_str(raw)?;
                }
                b'V' => {
                    let line = self.line()?;
                    let raw = super::text::raw_unicode_escape(line);
                    self.push_str(&raw)?;
                }
                b'X' => {
                    let n = u64::from(self.u32()?);
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_str(raw)?;
                }
                b'a' => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.append_items(list, &[item])?;
                }
                b'b' => {
                    let state = self.pop()?;
                    let target = self.top()?;
                    let at = self.op_at;
                    match self.nodes.get_mut(target as usize) {
                        Some(Node::Object(o)) => self.budget.push(&mut o.state, state, at)?,
                        Some(Node::Global(_)) => {
                            self.budget
                                .push(&mut self.extra_state, (target, state), at)?
                        }
                        _ => return Err(self.invalid("BUILD on a builtin value")),
                    }
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let (module, name) = (utf8_line(module), utf8_line(name));
                    let (Some(module), Some(name)) = (module, name) else {
                        return Err(self.invalid("invalid GLOBAL text"));
                    };
                    let id = self.global(module, name)?;
                    self.push(id)?;
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let id = self.new_node(Node::Dict(Vec::new()))?;
                    self.set_items(id, &items)?;
                    self.push(id)?;
                }
                b'}' => self.push_new(Node::Dict(Vec::new()))?,
                b'e' => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.append_items(list, &items)?;
                }
                b'g' => {
                    let line = self.line()?;
                    let key = parse_memo_key(line).ok_or_else(|| self.invalid("bad GET"))?;
                    self.memo_get(key)?;
                }
                b'h' => {
                    let key = self.u8()?;
                    self.memo_get(u64::from(key))?;
                }
                b'i' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let (Some(module), Some(name)) = (utf8_line(module), utf8_line(name)) else {
                        return Err(self.invalid("invalid INST text"));
                    };
                    let items = self.pop_mark()?;
                    let cls = self.global(module, name)?;
                    let args = self.tuple_of(items)?;
                    self.new_object(ObjKind::Inst, cls, args, None)?;
                }
                b'j' => {
                    let key = self.u32()?;
                    self.memo_get(u64::from(key))?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.budget
                        .charge(items.len() * std::mem::size_of::<NodeId>(), self.op_at)?;
                    self.push_new(Node::List(items))?;
                }
                b']' => self.push_new(Node::List(Vec::new()))?,
                b'o' => {
                    let mut items = self.pop_mark()?;
                    if items.is_empty() {
                        return Err(PickleError::StackUnderflow { offset: self.op_at });
                    }
                    let cls = items.remove(0);
                    let args = self.tuple_of(items)?;
                    self.new_object(ObjKind::Inst, cls, args, None)?;
                }
                b'p' => {
                    let line = self.line()?;
                    let key = parse_memo_key(line).ok_or_else(|| self.invalid("bad PUT"))?;
                    self.memo_put(key)?;
                }
                b'q' => {
                    let key = self.u8()?;
                    self.memo_put(u64::from(key))?;
                }
                b'r' => {
                    let key = self.u32()?;
                    self.memo_put(u64::from(key))?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    let dict = self.top()?;
                    self.set_items(dict, &[key, value])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let dict = self.top()?;
                    self.set_items(dict, &items)?;
                }
                b't' => {
                    let items = self.pop_mark()?;
                    let id = self.tuple_of(items)?;
                    self.push(id)?;
                }
                b')' => self.push(EMPTY_TUPLE_ID)?,
                b'G' => {
                    let v = f64::from_be_bytes(self.array()?);
                    self.push_new(Node::Float(v))?;
                }
                // ---- protocol 2 ----
                0x80 => {
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(PickleError::Unsupported {
                            offset: self.op_at,
                            what: "protocol above 5",
                        });
                    }
                    self.protocol = v;
                }
                0x81 => {
                    let args = self.pop()?;
                    let cls = self.pop()?;
                    self.new_object(ObjKind::NewObj, cls, args, None)?;
                }
                0x82..=0x84 => {
                    return Err(PickleError::Unsupported {
                        offset: self.op_at,
                        what: "extension registry code",
                    })
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < self.base() + n {
                        return Err(PickleError::StackUnderflow { offset: self.op_at });
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let id = self.tuple_of(items)?;
                    self.push(id)?;
                }
                0x88 => self.push(TRUE_ID)?,
                0x89 => self.push(FALSE_ID)?,
                0x8a => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    self.push_long_bytes(raw)?;
                }
                0x8b => {
                    let n = self.i32()?;
                    let n = u64::try_from(n).map_err(|_| self.invalid("negative length"))?;
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_long_bytes(raw)?;
                }
                // ---- protocol 3 ----
                b'B' => {
                    let n = u64::from(self.u32()?);
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_bytes(raw, false)?;
                }
                b'C' => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    self.push_bytes(raw, false)?;
                }
                // ---- protocol 4 ----
                0x8c => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    self.push_str(raw)?;
                }
                0x8d => {
                    let n = self.u64()?;
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_str(raw)?;
                }
                0x8e => {
                    let n = self.u64()?;
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_bytes(raw, false)?;
                }
                0x8f => self.push_new(Node::Set(Vec::new()))?,
                0x90 => {
                    let items = self.pop_mark()?;
                    let set = self.top()?;
                    self.add_set_items(set, &items)?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.budget
                        .charge(items.len() * std::mem::size_of::<NodeId>(), self.op_at)?;
                    self.push_new(Node::FrozenSet(items.into_boxed_slice()))?;
                }
                0x92 => {
                    let kwargs = self.pop()?;
                    let args = self.pop()?;
                    let cls = self.pop()?;
                    self.new_object(ObjKind::NewObj, cls, args, Some(kwargs))?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Some(Node::Str(m)), Some(Node::Str(n))) = (
                        self.nodes.get(module as usize),
                        self.nodes.get(name as usize),
                    ) else {
                        return Err(self.invalid("STACK_GLOBAL requires str"));
                    };
                    let (m, n) = (super::text::lossy(m), super::text::lossy(n));
                    let id = self.global(&m, &n)?;
                    self.push(id)?;
                }
                0x94 => {
                    let key = self.memo.count as u64;
                    self.memo_put(key)?;
                }
                0x95 => {
                    let n = self.u64()?;
                    // Frames only group bytes; a frame longer than the rest is truncation.
                    self.len_of(n)?;
                }
                // ---- protocol 5 ----
                0x96 => {
                    let n = self.u64()?;
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push_bytes(raw, true)?;
                }
                0x97 => {
                    return Err(PickleError::Unsupported {
                        offset: self.op_at,
                        what: "out-of-band buffer",
                    })
                }
                0x98 => {
                    self.top()?;
                }
                _ => {
                    return Err(PickleError::UnknownOpcode {
                        offset: self.op_at,
                        opcode: op,
                    })
                }
            }
        }
    }
}

fn utf8_line(line: &[u8]) -> Option<&str> {
    std::str::from_utf8(line).ok()
}

fn parse_memo_key(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse::<u64>().ok()
}

/// Normalizes protocol-0 int text (`int(text, 0)` for what picklers write): optional sign,
/// decimal digits, surrounding whitespace. Returns `-`? followed by digits without leading
/// zeros.
fn parse_int_text(text: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(text).ok()?.trim();
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, s.get(1..)?),
        b'+' => (false, s.get(1..)?),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    let mut out = String::with_capacity(trimmed.len() + 1);
    if neg && trimmed != "0" {
        out.push('-');
    }
    out.push_str(trimmed);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(b: &[u8]) -> Result<Tree, PickleError> {
        decode(b, &Limits::default())
    }

    #[test]
    fn small_values() {
        let t = dec(b"\x80\x04K\x05.").unwrap();
        assert_eq!(t.get(t.root), Some(&Node::Int(5)));
        let t = dec(b"I01\n.").unwrap();
        assert_eq!(t.get(t.root), Some(&Node::Bool(true)));
        let t = dec(b"L123456789012345678901234567890L\n.").unwrap();
        assert_eq!(
            t.get(t.root),
            Some(&Node::IntText("123456789012345678901234567890".into()))
        );
    }

    #[test]
    fn errors_not_panics() {
        assert!(matches!(dec(b""), Err(PickleError::Truncated { .. })));
        assert!(matches!(
            dec(b"\xff"),
            Err(PickleError::UnknownOpcode { .. })
        ));
        assert!(matches!(dec(b"."), Err(PickleError::StackUnderflow { .. })));
        assert!(matches!(
            dec(b"h\x00."),
            Err(PickleError::MemoMissing { .. })
        ));
        assert!(matches!(dec(b"e"), Err(PickleError::MarkMissing { .. })));
        assert!(matches!(
            dec(&[b'('; 300]),
            Err(PickleError::DepthLimit { .. })
        ));
        let mut big = vec![b']'; 2_000_000];
        big.push(b'.');
        assert!(matches!(dec(&big), Err(PickleError::MemoryLimit { .. })));
    }

    #[test]
    fn memo_limit() {
        let limits = Limits {
            max_memo: 3,
            ..Limits::default()
        };
        let r = decode(b"N\x94\x94\x94\x94.", &limits);
        assert!(matches!(r, Err(PickleError::MemoLimit { .. })));
    }

    #[test]
    fn cyclic_list() {
        // l = []; l.append(l)
        let t = dec(b"\x80\x04]\x94h\x00a.").unwrap();
        assert_eq!(t.get(t.root), Some(&Node::List(vec![t.root])));
    }
}
