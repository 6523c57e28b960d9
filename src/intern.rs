//! Compact shared values for what the server keeps per recorded call: `Sym` (a thin, shared
//! string), `Cid` (a thin, shared 64-byte SHA-512 digest, printed as 128 hex digits), `Val` (a
//! 16-byte JSON value whose strings and trees are shared) and the `Interner` that makes equal
//! values share one allocation. Pure: no I/O; the interner is a plain struct its owner locks.

use std::borrow::{Borrow, Cow};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::node::JsonNode;

/// A shared string: one pointer wide, compared and hashed by content.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(Arc<Box<str>>);

impl Sym {
    /// A string that is not shared with anything (for values unique to one call).
    pub fn new(s: &str) -> Sym {
        Sym(Arc::new(Box::from(s)))
    }

    /// [`Sym::new`] without copying the text.
    pub fn from_string(s: String) -> Sym {
        Sym(Arc::new(s.into_boxed_str()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// About the heap bytes of the string (its text and two allocations), counted in full by
    /// every holder (see `Val::weight`).
    pub fn weight(&self) -> usize {
        self.0.len() + 32
    }

    /// Its allocation's address (the same for every holder) and its weight (see `Val::part`).
    pub fn part(&self) -> (usize, usize) {
        (Arc::as_ptr(&self.0) as usize, self.weight())
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}

impl From<String> for Sym {
    fn from(s: String) -> Sym {
        Sym::from_string(s)
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Sym {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Sym {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Length of a SHA-512 digest.
pub const DIGEST_LEN: usize = 64;

/// A content id: the SHA-512 digest of a payload, shared by every record that names it.
/// Written on the wire as 128 lowercase hex digits (protocol doc §3).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cid(Arc<[u8; DIGEST_LEN]>);

impl Cid {
    pub fn from_digest(digest: [u8; DIGEST_LEN]) -> Cid {
        Cid(Arc::new(digest))
    }

    /// Parses 128 lowercase hex digits; anything else is not a CID.
    pub fn parse(hex: &str) -> Option<Cid> {
        parse_digest(hex).map(Cid::from_digest)
    }

    pub fn digest(&self) -> &[u8; DIGEST_LEN] {
        &self.0
    }

    pub fn hex(&self) -> String {
        crate::ids::hex(&self.0[..])
    }
}

/// Decodes a 128-character lowercase hex CID into its 64 digest bytes.
pub fn parse_digest(hex: &str) -> Option<[u8; DIGEST_LEN]> {
    /// Nibble values of the lowercase hex digits; 0x10 marks every other byte.
    const NIBBLE: [u8; 256] = {
        let mut t = [0x10u8; 256];
        let mut c = 0;
        while c < 10 {
            t[b'0' as usize + c] = c as u8;
            c += 1;
        }
        let mut c = 0;
        while c < 6 {
            t[b'a' as usize + c] = 10 + c as u8;
            c += 1;
        }
        t
    };
    let s = hex.as_bytes();
    if s.len() != DIGEST_LEN * 2 {
        return None;
    }
    let mut out = [0u8; DIGEST_LEN];
    // Invalid digits are collected and checked once, so the loop has no branch.
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[pair[0] as usize], NIBBLE[pair[1] as usize]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 0x0f);
    }
    (bad & 0x10 == 0).then_some(out)
}

/// The first eight bytes of a digest: uniformly distributed, so a good hash key.
fn prefix(digest: &[u8; DIGEST_LEN]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// A map from CIDs to small values that costs about 28 bytes per entry: keyed by the digest's
/// first eight bytes, with the rare digests sharing a prefix kept in an overflow list.
pub struct CidMap<V> {
    primary: HashMap<u64, (Cid, V), DigestBuild>,
    overflow: Vec<(Cid, V)>,
}

impl<V> Default for CidMap<V> {
    fn default() -> Self {
        CidMap {
            primary: HashMap::default(),
            overflow: Vec::new(),
        }
    }
}

impl<V> CidMap<V> {
    pub fn get(&self, digest: &[u8; DIGEST_LEN]) -> Option<(&Cid, &V)> {
        match self.primary.get(&prefix(digest)) {
            Some((c, v)) if c.digest() == digest => Some((c, v)),
            Some(_) => self
                .overflow
                .iter()
                .find(|(c, _)| c.digest() == digest)
                .map(|(c, v)| (c, v)),
            None => None,
        }
    }

    /// Inserts unless present; returns whether it was new.
    pub fn insert(&mut self, cid: Cid, value: V) -> bool {
        if self.get(cid.digest()).is_some() {
            return false;
        }
        match self.primary.entry(prefix(cid.digest())) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((cid, value));
            }
            std::collections::hash_map::Entry::Occupied(_) => self.overflow.push((cid, value)),
        }
        true
    }

    pub fn len(&self) -> usize {
        self.primary.len() + self.overflow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&Cid, &V) -> bool) {
        self.primary.retain(|_, (c, v)| keep(c, v));
        self.overflow.retain(|(c, v)| keep(c, v));
    }
}

impl fmt::Debug for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cid({})", &self.hex()[..16])
    }
}

impl fmt::Display for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl Serialize for Cid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; DIGEST_LEN * 2];
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for (i, b) in self.0.iter().enumerate() {
            buf[2 * i] = DIGITS[usize::from(b >> 4)];
            buf[2 * i + 1] = DIGITS[usize::from(b & 0x0f)];
        }
        s.serialize_str(std::str::from_utf8(&buf).expect("hex digits are ASCII"))
    }
}

/// A hasher for keys that are digests or already hashes: it keeps the last `u64` written.
#[derive(Default)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub type DigestBuild = BuildHasherDefault<DigestHasher>;

/// A JSON value as records keep it, 16 bytes: scalars inline, strings, CIDs and trees shared.
/// `Absent` stands for a key the client did not send (written as null where a key is always
/// present on the wire, left out where it is optional). A tree too large to share
/// (`MAX_TREE_NODES`) is kept `Packed`, as its compact JSON text: a tree of `Value`s costs 16 to
/// 60 times its text (a `[0,0,…]` array 64 bytes per element), so what a request leaves behind
/// stays about as large as the request.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Val {
    #[default]
    Absent,
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Sym),
    Cid(Cid),
    Tree(Arc<Value>),
    /// A JSON array or object as compact text.
    Packed(Sym),
}

impl Val {
    pub fn is_absent(&self) -> bool {
        matches!(self, Val::Absent)
    }

    /// Absent or null.
    pub fn is_null(&self) -> bool {
        matches!(self, Val::Absent | Val::Null)
    }

    /// Absent as null (for keys the wire always carries).
    pub fn or_null(self) -> Val {
        if self.is_absent() {
            Val::Null
        } else {
            self
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as JSON (absent as null).
    pub fn to_value(&self) -> Value {
        match self {
            Val::Absent | Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(*b),
            Val::Int(n) => Value::from(*n),
            Val::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Val::Str(s) => Value::String(s.to_string()),
            Val::Cid(c) => Value::String(c.hex()),
            Val::Tree(t) => (**t).clone(),
            Val::Packed(text) => unpack(text),
        }
    }

    /// About how many bytes this value keeps on the heap. A string or tree shared with other
    /// holders counts in full in each record that holds it: counting only unshared ones let a
    /// record keep a value its first holder counted, forever uncounted once that holder was
    /// dropped. So the byte bounds of the records window and the open calls hold whatever is
    /// shared; records sharing a large value are counted more than they use. An estimate, never
    /// a walk of more than `MAX_TREE_NODES` nodes (larger trees are packed).
    pub fn weight(&self) -> usize {
        self.part().map_or(0, |(_, w)| w)
    }

    /// The shared allocation this value holds, if any: its address (the same for every holder)
    /// and its weight. For the records window, which counts each shared part once.
    pub fn part(&self) -> Option<(usize, usize)> {
        match self {
            Val::Str(s) | Val::Packed(s) => Some(s.part()),
            Val::Tree(t) => Some((Arc::as_ptr(t) as usize, value_weight(t))),
            _ => None,
        }
    }

    /// The tree this value holds, unpacked if need be (`None` for scalars and strings).
    pub fn tree(&self) -> Option<Cow<'_, Value>> {
        match self {
            Val::Tree(t) => Some(Cow::Borrowed(&**t)),
            Val::Packed(text) => Some(Cow::Owned(unpack(text))),
            _ => None,
        }
    }

    /// A value that is not shared with anything (strings unique to one call).
    pub fn unshared(v: &Value) -> Val {
        match v {
            Value::String(s) => Val::Str(Sym::new(s)),
            other => Val::scalar(other).unwrap_or_else(|| {
                if nodes_over(other, MAX_TREE_NODES) {
                    pack(other)
                } else {
                    Val::Tree(Arc::new(other.clone()))
                }
            }),
        }
    }

    /// Null, booleans and numbers that fit inline.
    fn scalar(v: &Value) -> Option<Val> {
        match v {
            Value::Null => Some(Val::Null),
            Value::Bool(b) => Some(Val::Bool(*b)),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Some(Val::Int(i))
                } else if n.is_f64() {
                    n.as_f64().map(Val::Float)
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

impl Serialize for Val {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Val::Absent | Val::Null => s.serialize_unit(),
            Val::Bool(b) => s.serialize_bool(*b),
            Val::Int(n) => s.serialize_i64(*n),
            Val::Float(f) if f.is_finite() => s.serialize_f64(*f),
            Val::Float(_) => s.serialize_unit(),
            Val::Str(t) => s.serialize_str(t),
            Val::Cid(c) => c.serialize(s),
            Val::Tree(t) => t.serialize(s),
            Val::Packed(text) => unpack(text).serialize(s),
        }
    }
}

/// The entries of an object, serialized as the object (for packing one without building it).
struct Entries<'r, F>(&'r F);

impl<'e, T, I, F> Serialize for Entries<'_, F>
where
    T: Serialize + 'e,
    I: Iterator<Item = (&'e str, &'e T)>,
    F: Fn() -> I,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map((self.0)())
    }
}

/// About the heap bytes of a JSON tree: each node's `Value` and the texts of its strings,
/// numbers and keys (a number keeps its text), with allocator overhead.
pub fn value_weight(v: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    const HEAP: usize = 16;
    NODE + match v {
        Value::Null | Value::Bool(_) => 0,
        Value::Number(_) | Value::String(_) => {
            HEAP + match v {
                Value::String(s) => s.len(),
                _ => 8,
            }
        }
        Value::Array(a) => HEAP + a.iter().map(value_weight).sum::<usize>(),
        Value::Object(m) => {
            HEAP + m
                .iter()
                .map(|(k, x)| k.len() + 2 * HEAP + value_weight(x))
                .sum::<usize>()
        }
    }
}

/// A JSON tree as its compact text (`Val::Packed`).
fn pack<T: Serialize + ?Sized>(tree: &T) -> Val {
    // Serializing a tree of JSON values cannot fail.
    Val::Packed(Sym::from_string(
        serde_json::to_string(tree).unwrap_or_else(|_| "null".to_owned()),
    ))
}

/// The tree of a `Val::Packed` text (written by `pack`, so it parses).
fn unpack(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Whether a tree has more than `max` nodes (counting stops there).
fn nodes_over(v: &Value, max: usize) -> bool {
    fn count(v: &Value, left: &mut usize) -> bool {
        if *left == 0 {
            return true;
        }
        *left -= 1;
        match v {
            Value::Array(a) => a.iter().any(|x| count(x, left)),
            Value::Object(m) => m.values().any(|x| count(x, left)),
            _ => false,
        }
    }
    let mut left = max;
    count(v, &mut left)
}

/// Makes equal strings, CIDs and JSON trees share one allocation. Entries nobody else holds any
/// more are dropped by `sweep`, which runs by itself as the tables grow.
#[derive(Default)]
pub struct Interner {
    strings: HashSet<Sym>,
    cids: CidMap<()>,
    trees: HashMap<u64, Vec<Arc<Value>>, DigestBuild>,
    n_trees: usize,
    next_sweep: usize,
    /// Bytes of the strings and trees in the tables (`Sym::weight`, `value_weight`), and the
    /// bytes at which the next sweep runs: entries few but large (a client's long names) are
    /// swept by bytes as others are by count.
    bytes: usize,
    next_sweep_bytes: usize,
}

/// Trees larger than this (in nodes) are kept unshared: hashing them costs more than it saves.
const MAX_TREE_NODES: usize = 4096;
/// Sweeping starts once the tables hold this many entries.
const FIRST_SWEEP: usize = 4096;

impl Interner {
    pub fn sym(&mut self, s: &str) -> Sym {
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        let sym = Sym::new(s);
        self.bytes += sym.weight();
        self.strings.insert(sym.clone());
        self.maybe_sweep();
        sym
    }

    pub fn cid(&mut self, digest: [u8; DIGEST_LEN]) -> Cid {
        if let Some((found, ())) = self.cids.get(&digest) {
            return found.clone();
        }
        let cid = Cid::from_digest(digest);
        self.cids.insert(cid.clone(), ());
        self.maybe_sweep();
        cid
    }

    /// The shared copy of a CID made elsewhere.
    pub fn share(&mut self, cid: &Cid) -> Cid {
        if let Some((found, ())) = self.cids.get(cid.digest()) {
            return found.clone();
        }
        self.cids.insert(cid.clone(), ());
        self.maybe_sweep();
        cid.clone()
    }

    /// A CID given as text, shared; `None` unless it is 128 lowercase hex digits.
    pub fn cid_text(&mut self, hex: &str) -> Option<Cid> {
        parse_digest(hex).map(|d| self.cid(d))
    }

    /// Any JSON value, shared: strings that are CIDs become `Cid`s.
    pub fn val(&mut self, v: &Value) -> Val {
        match v {
            Value::String(s) => match self.cid_text(s) {
                Some(c) => Val::Cid(c),
                None => Val::Str(self.sym(s)),
            },
            Value::Array(_) | Value::Object(_) => self.tree(v),
            other => Val::scalar(other).unwrap_or_else(|| self.tree(other)),
        }
    }

    /// An optional field: `Absent` when missing.
    pub fn field(&mut self, v: Option<&Value>) -> Val {
        v.map_or(Val::Absent, |v| self.val(v))
    }

    /// [`Interner::val`] for a value of a parsed request body: strings are looked up without
    /// copying them first.
    pub fn node_val(&mut self, n: &JsonNode<'_>) -> Val {
        match n {
            JsonNode::Str(s) => match self.cid_text(s) {
                Some(c) => Val::Cid(c),
                None => Val::Str(self.sym(s)),
            },
            JsonNode::Arr(_) | JsonNode::Obj(_) => self.node_tree(n),
            other => self.val(&other.to_value()),
        }
    }

    /// [`Interner::field`] for a parsed request body.
    pub fn node_field(&mut self, n: Option<&JsonNode<'_>>) -> Val {
        n.map_or(Val::Absent, |n| self.node_val(n))
    }

    /// A JSON tree, shared with every equal tree seen before; packed when too large to share.
    pub fn tree(&mut self, v: &Value) -> Val {
        let mut h = TreeHash::new();
        if !h.tree(v) {
            return pack(v);
        }
        let bucket = self.trees.entry(h.0).or_default();
        if let Some(found) = bucket.iter().find(|t| ***t == *v) {
            return Val::Tree(found.clone());
        }
        let tree = Arc::new(v.clone());
        Val::Tree(self.add_tree(h.0, tree))
    }

    /// [`Interner::tree`] for a value of a parsed request body.
    pub fn node_tree(&mut self, n: &JsonNode<'_>) -> Val {
        let mut h = TreeHash::new();
        if !h.tree(n) {
            return pack(n);
        }
        let bucket = self.trees.entry(h.0).or_default();
        if let Some(found) = bucket.iter().find(|t| n.same_as(t)) {
            return Val::Tree(found.clone());
        }
        let tree = Arc::new(n.to_value());
        Val::Tree(self.add_tree(h.0, tree))
    }

    /// The object `m` without its key `skip`, shared like [`Interner::tree`]: nothing is copied
    /// when an equal object is already known (a call site without its timestamp).
    pub fn object_without(&mut self, m: &Map<String, Value>, skip: &str) -> Val {
        self.share_object(|| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v))
                .filter(|(k, _)| *k != skip)
        })
    }

    /// [`Interner::object_without`] for the entries of a parsed request object.
    pub fn node_object_without(
        &mut self,
        entries: &[(Cow<'_, str>, JsonNode<'_>)],
        skip: &str,
    ) -> Val {
        self.share_object(|| {
            entries
                .iter()
                .map(|(k, v)| (&**k, v))
                .filter(|(k, _)| *k != skip)
        })
    }

    /// The object of these entries, shared like [`Interner::tree`].
    fn share_object<'e, T, I>(&mut self, rest: impl Fn() -> I) -> Val
    where
        T: JsonTree + Serialize + 'e,
        I: Iterator<Item = (&'e str, &'e T)>,
    {
        let len = rest().count();
        let mut h = TreeHash::new();
        h.mix(7);
        h.mix(len as u64);
        let hashed = rest().all(|(k, x)| {
            h.bytes(k.as_bytes());
            h.tree(x)
        });
        let owned = || {
            Arc::new(Value::Object(
                rest().map(|(k, x)| (k.to_owned(), x.to_value())).collect(),
            ))
        };
        if !hashed {
            return pack(&Entries(&rest));
        }
        let bucket = self.trees.entry(h.0).or_default();
        let same = |t: &Value| match t {
            Value::Object(o) => {
                o.len() == len
                    && o.iter()
                        .zip(rest())
                        .all(|((ka, va), (kb, vb))| ka == kb && vb.same_as(va))
            }
            _ => false,
        };
        if let Some(found) = bucket.iter().find(|t| same(t)) {
            return Val::Tree(found.clone());
        }
        let tree = owned();
        Val::Tree(self.add_tree(h.0, tree))
    }

    fn add_tree(&mut self, key: u64, tree: Arc<Value>) -> Arc<Value> {
        self.bytes += value_weight(&tree);
        self.trees.entry(key).or_default().push(tree.clone());
        self.n_trees += 1;
        self.maybe_sweep();
        tree
    }

    /// Entries in the tables.
    pub fn len(&self) -> usize {
        self.strings.len() + self.cids.len() + self.n_trees
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn maybe_sweep(&mut self) {
        if self.len() >= self.next_sweep.max(FIRST_SWEEP)
            || self.bytes
                >= self
                    .next_sweep_bytes
                    .max(crate::limits::INTERNER_SWEEP_BYTES)
        {
            self.sweep();
            self.next_sweep = 2 * self.len();
            self.next_sweep_bytes = 2 * self.bytes;
        }
    }

    /// Bytes of the strings and trees in the tables.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops the entries only the interner still holds.
    pub fn sweep(&mut self) {
        let mut bytes = 0;
        self.strings.retain(|s| {
            let keep = Arc::strong_count(&s.0) > 1;
            if keep {
                bytes += s.weight();
            }
            keep
        });
        self.cids.retain(|c, ()| Arc::strong_count(&c.0) > 1);
        let mut n = 0;
        self.trees.retain(|_, bucket| {
            bucket.retain(|t| Arc::strong_count(t) > 1);
            n += bucket.len();
            bytes += bucket.iter().map(|t| value_weight(t)).sum::<usize>();
            !bucket.is_empty()
        });
        self.n_trees = n;
        self.bytes = bytes;
    }
}

/// A structural hash of JSON trees (word-at-a-time FNV-style mixing), counting nodes: trees of
/// more than `MAX_TREE_NODES` nodes are not hashed.
struct TreeHash(u64, usize);

impl TreeHash {
    fn new() -> TreeHash {
        TreeHash(0xcbf2_9ce4_8422_2325, 0)
    }

    fn mix(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }

    fn bytes(&mut self, b: &[u8]) {
        let mut words = b.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.mix(u64::from_le_bytes(word));
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        self.mix(u64::from_le_bytes(tail));
        self.mix(b.len() as u64);
    }

    /// False when the tree is too large to share.
    fn tree<T: JsonTree>(&mut self, t: &T) -> bool {
        self.1 += 1;
        if self.1 > MAX_TREE_NODES {
            return false;
        }
        match t.shape() {
            Shape::Null => self.mix(1),
            Shape::Bool(b) => self.mix(2 + u64::from(b)),
            Shape::Num(n) => {
                self.mix(4);
                // The number's JSON text, without allocating it.
                let _ = fmt::write(self, format_args!("{n}"));
            }
            Shape::Str(s) => {
                self.mix(5);
                self.bytes(s.as_bytes());
            }
            Shape::Arr(a) => {
                self.mix(6);
                self.mix(a.len() as u64);
                return a.iter().all(|x| self.tree(x));
            }
            Shape::Obj(len) => {
                self.mix(7);
                self.mix(len as u64);
                return t.entries(&mut |k, x| {
                    self.bytes(k.as_bytes());
                    self.tree(x)
                });
            }
        }
        true
    }
}

/// One level of a JSON tree, as `TreeHash` reads it.
enum Shape<'a, T> {
    Null,
    Bool(bool),
    Num(&'a serde_json::Number),
    Str(&'a str),
    Arr(&'a [T]),
    /// An object with this many entries (read through `JsonTree::entries`).
    Obj(usize),
}

/// What the interner reads of a JSON tree: a `Value`, or a request's `JsonNode` (which hashes and
/// compares as the `Value` it stands for).
trait JsonTree: Sized {
    fn shape(&self) -> Shape<'_, Self>;
    /// Calls `f` on each entry of an object in order, while it returns true.
    fn entries(&self, f: &mut dyn FnMut(&str, &Self) -> bool) -> bool;
    fn to_value(&self) -> Value;
    fn same_as(&self, v: &Value) -> bool;
}

impl JsonTree for Value {
    fn shape(&self) -> Shape<'_, Value> {
        match self {
            Value::Null => Shape::Null,
            Value::Bool(b) => Shape::Bool(*b),
            Value::Number(n) => Shape::Num(n),
            Value::String(s) => Shape::Str(s),
            Value::Array(a) => Shape::Arr(a),
            Value::Object(m) => Shape::Obj(m.len()),
        }
    }

    fn entries(&self, f: &mut dyn FnMut(&str, &Value) -> bool) -> bool {
        match self {
            Value::Object(m) => m.iter().all(|(k, v)| f(k, v)),
            _ => true,
        }
    }

    fn to_value(&self) -> Value {
        self.clone()
    }

    fn same_as(&self, v: &Value) -> bool {
        self == v
    }
}

impl<'b> JsonTree for JsonNode<'b> {
    fn shape(&self) -> Shape<'_, JsonNode<'b>> {
        match self {
            JsonNode::Null => Shape::Null,
            JsonNode::Bool(b) => Shape::Bool(*b),
            JsonNode::Num(n) => Shape::Num(n),
            JsonNode::Str(s) => Shape::Str(s),
            JsonNode::Arr(a) => Shape::Arr(a),
            JsonNode::Obj(entries) => Shape::Obj(entries.len()),
        }
    }

    fn entries(&self, f: &mut dyn FnMut(&str, &JsonNode<'b>) -> bool) -> bool {
        match self {
            JsonNode::Obj(entries) => entries.iter().all(|(k, v)| f(k, v)),
            _ => true,
        }
    }

    fn to_value(&self) -> Value {
        JsonNode::to_value(self)
    }

    fn same_as(&self, v: &Value) -> bool {
        JsonNode::same_as(self, v)
    }
}

impl fmt::Write for TreeHash {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_sixteen_bytes_and_names_one_pointer() {
        assert_eq!(std::mem::size_of::<Val>(), 16);
        assert_eq!(std::mem::size_of::<Sym>(), 8);
        assert_eq!(std::mem::size_of::<Cid>(), 8);
    }

    #[test]
    fn trees_too_large_to_share_are_packed_and_read_back_the_same() {
        let mut i = Interner::default();
        let big = json!({"k": (0..5000).collect::<Vec<u32>>(), "s": "x", "n": 1.5});
        let packed = i.val(&big);
        let Val::Packed(text) = &packed else {
            panic!("not packed: {packed:?}")
        };
        assert_eq!(**text, *big.to_string());
        assert_eq!(packed.to_value(), big);
        assert_eq!(serde_json::to_value(&packed).unwrap(), big);
        assert_eq!(packed.tree().unwrap().into_owned(), big);
        // From a request body, and without the key an object is kept without.
        let body = big.to_string();
        let node = JsonNode::parse(body.as_bytes()).unwrap();
        assert_eq!(i.node_val(&node), packed);
        let JsonNode::Obj(entries) = &node else {
            panic!()
        };
        let without = i.node_object_without(entries, "s");
        let mut expected = big.clone();
        expected.as_object_mut().unwrap().shift_remove("s");
        assert!(matches!(without, Val::Packed(_)));
        assert_eq!(without.to_value(), expected);
        // It weighs about its text, not the tree's 30 and more bytes per number.
        assert!(packed.weight() < text.len() + 64);
        let small = i.val(&json!([1, 2, 3]));
        assert!(matches!(small, Val::Tree(_)));
    }

    #[test]
    fn equal_values_share_one_allocation() {
        let mut i = Interner::default();
        let a = i.sym("add");
        let b = i.sym("add");
        assert!(Arc::ptr_eq(&a.0, &b.0));
        let stack = json!([{"filename": "/app.py", "lineno": 3}]);
        let (Val::Tree(x), Val::Tree(y)) = (i.val(&stack), i.val(&stack.clone())) else {
            panic!("trees")
        };
        assert!(Arc::ptr_eq(&x, &y));
        let hex = "ab".repeat(64);
        let (Val::Cid(c), Val::Cid(d)) = (i.val(&json!(hex)), i.val(&json!(hex))) else {
            panic!("cids")
        };
        assert!(Arc::ptr_eq(&c.0, &d.0));
        assert_eq!(c.hex(), hex);
    }

    #[test]
    fn values_round_trip_to_the_same_json() {
        let mut i = Interner::default();
        for v in [
            json!(null),
            json!(true),
            json!(-3),
            json!(u64::MAX),
            json!(1795311683.7775),
            json!("x"),
            json!("AB".repeat(64)),
            json!({"a": [1, 2.5, null]}),
        ] {
            let val = i.val(&v);
            assert_eq!(val.to_value(), v);
            assert_eq!(serde_json::to_value(&val).unwrap(), v);
        }
        assert_eq!(Val::Absent.to_value(), Value::Null);
    }

    #[test]
    fn digests_are_parsed_from_lowercase_hex_only() {
        let hex: String = (0..64).map(|i| format!("{:02x}", i * 4)).collect();
        let d = parse_digest(&hex).unwrap();
        assert_eq!(d[0], 0);
        assert_eq!(d[1], 4);
        assert_eq!(d[63], 252);
        assert_eq!(crate::ids::hex(&d), hex);
        assert_eq!(parse_digest(&hex.to_uppercase()), None);
        assert_eq!(parse_digest(&hex[1..]), None);
        for bad in ["g", "/", ":", "`", " ", "\u{e9}"] {
            let text = format!("{bad}{}", &hex[bad.len()..]);
            assert_eq!(parse_digest(&text), None, "{text}");
        }
    }

    #[test]
    fn an_object_without_one_key_is_shared_with_the_same_tree() {
        let mut i = Interner::default();
        let site = json!({"timestamp": 1.5, "stack_trace": [{"lineno": 3}], "target_cid": null});
        let Value::Object(m) = &site else { panic!() };
        let a = shared(i.object_without(m, "timestamp"));
        assert_eq!(
            *a,
            json!({"stack_trace": [{"lineno": 3}], "target_cid": null})
        );
        let later = json!({"timestamp": 9.25, "stack_trace": [{"lineno": 3}], "target_cid": null});
        let Value::Object(m2) = &later else { panic!() };
        assert!(Arc::ptr_eq(&a, &shared(i.object_without(m2, "timestamp"))));
        assert!(Arc::ptr_eq(&a, &shared(i.tree(&a.clone()))));
        // The same call site parsed from a request body shares the tree too.
        let text = br#"{"timestamp": 7.0, "stack_trace": [{"lineno": 3}], "target_cid": null}"#;
        let JsonNode::Obj(entries) = JsonNode::parse(text).unwrap() else {
            panic!()
        };
        assert!(Arc::ptr_eq(
            &a,
            &shared(i.node_object_without(&entries, "timestamp"))
        ));
        let text = br#"{"stack_trace": [{"lineno": 3.0}], "target_cid": null, "timestamp": 7}"#;
        let JsonNode::Obj(entries) = JsonNode::parse(text).unwrap() else {
            panic!()
        };
        let b = shared(i.node_object_without(&entries, "timestamp"));
        assert!(!Arc::ptr_eq(&a, &b), "3.0 is not 3");
        assert_eq!(
            *b,
            json!({"stack_trace": [{"lineno": 3.0}], "target_cid": null})
        );
        let other = json!({"timestamp": 1.5, "stack_trace": [{"lineno": 4}], "target_cid": null});
        let Value::Object(m3) = &other else { panic!() };
        assert!(!Arc::ptr_eq(&a, &shared(i.object_without(m3, "timestamp"))));
    }

    #[test]
    fn the_interner_is_swept_by_bytes_too() {
        let mut i = Interner::default();
        let big = 1 << 20;
        // Twenty large strings nobody holds: far fewer entries than the count that sweeps.
        for n in 0..20 {
            i.sym(&format!("{n}{}", "x".repeat(big)));
        }
        assert!(
            i.bytes() <= crate::limits::INTERNER_SWEEP_BYTES + big + 64,
            "{} bytes kept",
            i.bytes()
        );
        assert!(i.len() < 20);
    }

    #[test]
    fn sweeping_drops_what_nobody_holds() {
        let mut i = Interner::default();
        let kept = i.sym("kept");
        i.sym("dropped");
        i.val(&json!({"t": 1}));
        let tree = shared(i.tree(&json!({"t": 2})));
        i.sweep();
        assert_eq!(i.len(), 2);
        assert!(Arc::ptr_eq(&kept.0, &i.sym("kept").0));
        assert!(Arc::ptr_eq(&tree, &shared(i.tree(&json!({"t": 2})))));
    }

    /// The shared tree of a value that must be one.
    fn shared(v: Val) -> Arc<Value> {
        match v {
            Val::Tree(t) => t,
            other => panic!("not a shared tree: {other:?}"),
        }
    }
}
