//! A safe pickle reader and renderer: decodes untrusted pickle bytes (protocols 0 to 5, every
//! opcode) into a display tree without importing, calling or executing anything, and renders
//! it the way the original Python server shows values (protocol doc §4.2): Python's `repr`,
//! the placeholder dict (§4.4) or the exception dict (§4.5), and a structured view.
//!
//! Submodules: `reader` (the VM and the arena [`Tree`]), `render` (repr), `values` (the JSON
//! forms: placeholders, exceptions, nested values), `view` (`{type, repr, attributes}`),
//! `text` (str/bytes escapes and the `isprintable` table), `bigint` (decimal of long ints),
//! `compat` (Python 2 global names).
//!
//! Limits (all enforced, see [`Limits`]): nesting depth 200 (mark stack while decoding,
//! recursion while rendering), memo 1,000,000 entries, decoder memory 8 x input + 1 MiB
//! (checked before each allocation), big ints converted to decimal up to 8 KiB of magnitude.
//! Rendering: each rendered value (a [`repr`] text, a [`pretty`] value, a [`view`]) has one
//! [`Budget`] of output bytes and node visits, `min(16 MiB, 16 x input + 32 KiB)` each
//! ([`Limits::render_budget`]; 256 KiB instead of 32 for a view, [`Limits::view_budget`]),
//! because a node shared through the memo is shown once per reference and width times depth
//! can be exponential in the input; a repr text is also cut at about 2 KiB inside [`pretty`]
//! and views. Decoding is linear in the input; rendering is
//! linear in its budget. Nothing here panics on any input: every failure is a [`PickleError`]
//! value carrying the byte offset.

#[cfg(test)]
mod amplify_tests;
pub mod bigint;
pub mod budget;
// The pickle builder of the tests (in the test support crate), under its old name for the unit
// tests of other modules.
#[cfg(test)]
pub(crate) use cideldill_test_support::pickle_builder as builder;
mod compat;
pub mod reader;
pub mod render;
mod text;
pub mod values;
pub mod view;

use std::fmt;

pub use budget::Budget;
pub use reader::{Global, Node, NodeId, ObjKind, Object, Tree};

use crate::limits::{
    PICKLE_MAX_DEPTH, PICKLE_MAX_MEMO, PICKLE_MEMORY_PER_INPUT_BYTE, PICKLE_MEMORY_SLACK,
};
use crate::limits::{RENDER_MAX, RENDER_PER_INPUT_BYTE, RENDER_SLACK, RENDER_VIEW_SLACK};

/// Longest `pretty` text before it is cut with `...`, as in the original.
pub const MAX_REPR_CHARS: usize = 500;

/// Resource limits for decoding and rendering untrusted pickles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting: MARK stack while decoding, recursion while rendering.
    pub max_depth: usize,
    /// Most memo entries.
    pub max_memo: usize,
    /// Decoder memory allowed per input byte.
    pub memory_per_byte: usize,
    /// Decoder memory allowed on top of `memory_per_byte * len`.
    pub memory_slack: usize,
    /// Render budget at most (bytes, and node visits), whatever the input; also the longest
    /// text [`repr`] produces before it stops with a marked cut.
    pub max_output: usize,
    /// Render budget per input byte.
    pub render_per_byte: usize,
    /// Render budget on top of `render_per_byte * len`.
    pub render_slack: usize,
    /// Render budget of a view on top of `render_per_byte * len`.
    pub view_slack: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: PICKLE_MAX_DEPTH,
            max_memo: PICKLE_MAX_MEMO,
            memory_per_byte: PICKLE_MEMORY_PER_INPUT_BYTE,
            memory_slack: PICKLE_MEMORY_SLACK,
            max_output: RENDER_MAX,
            render_per_byte: RENDER_PER_INPUT_BYTE,
            render_slack: RENDER_SLACK,
            view_slack: RENDER_VIEW_SLACK,
        }
    }
}

impl Limits {
    /// Decoder memory budget for an input of `len` bytes.
    pub fn max_memory(&self, len: usize) -> usize {
        len.saturating_mul(self.memory_per_byte)
            .saturating_add(self.memory_slack)
    }

    /// Render budget (output bytes, and node visits) of one value rendered from an input of
    /// `len` bytes: `min(max_output, render_per_byte * len + render_slack)`.
    pub fn render_budget(&self, len: usize) -> usize {
        len.saturating_mul(self.render_per_byte)
            .saturating_add(self.render_slack)
            .min(self.max_output)
    }

    /// Render budget of one view of an input of `len` bytes: the same with `view_slack`.
    pub fn view_budget(&self, len: usize) -> usize {
        len.saturating_mul(self.render_per_byte)
            .saturating_add(self.view_slack)
            .min(self.max_output)
    }

    /// A fresh budget for one value rendered from `len` input bytes.
    pub fn budget(&self, len: usize) -> Budget {
        Budget::new(self.render_budget(len))
    }
}

/// Why a pickle could not be decoded or rendered. Offsets are byte offsets of the opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PickleError {
    /// The input ended inside an opcode, or before `STOP`.
    Truncated { offset: usize },
    /// A byte that is not an opcode.
    UnknownOpcode { offset: usize, opcode: u8 },
    /// More nested marks than `Limits::max_depth`.
    DepthLimit { offset: usize },
    /// More memo entries than `Limits::max_memo`.
    MemoLimit { offset: usize },
    /// The decoder would exceed its memory budget.
    MemoryLimit { offset: usize },
    /// An opcode needed more stack items than there are (above the last mark).
    StackUnderflow { offset: usize },
    /// An opcode needed a mark and there is none.
    MarkMissing { offset: usize },
    /// A memo get of a key never put.
    MemoMissing { offset: usize, key: u64 },
    /// Malformed operands or an operation Python would reject.
    Invalid { offset: usize, what: &'static str },
    /// A valid feature this reader does not provide (persistent ids, extension codes,
    /// out-of-band buffers).
    Unsupported { offset: usize, what: &'static str },
    /// The value nests deeper than the renderer's depth limit.
    RenderDepth { max_depth: usize },
}

impl fmt::Display for PickleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PickleError::Truncated { offset } => write!(f, "pickle truncated at byte {offset}"),
            PickleError::UnknownOpcode { offset, opcode } => {
                write!(f, "unknown opcode 0x{opcode:02x} at byte {offset}")
            }
            PickleError::DepthLimit { offset } => {
                write!(f, "nesting too deep at byte {offset}")
            }
            PickleError::MemoLimit { offset } => write!(f, "memo too large at byte {offset}"),
            PickleError::MemoryLimit { offset } => {
                write!(f, "memory limit exceeded at byte {offset}")
            }
            PickleError::StackUnderflow { offset } => {
                write!(f, "stack underflow at byte {offset}")
            }
            PickleError::MarkMissing { offset } => {
                write!(f, "could not find MARK at byte {offset}")
            }
            PickleError::MemoMissing { offset, key } => {
                write!(f, "memo key {key} not found at byte {offset}")
            }
            PickleError::Invalid { offset, what } => write!(f, "{what} at byte {offset}"),
            PickleError::Unsupported { offset, what } => {
                write!(f, "unsupported {what} at byte {offset}")
            }
            PickleError::RenderDepth { max_depth } => {
                write!(f, "value nests deeper than {max_depth} levels")
            }
        }
    }
}

impl std::error::Error for PickleError {}

/// Decodes a pickle into a display tree.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Tree, PickleError> {
    reader::decode(bytes, limits)
}

/// The full `repr` text of a pickle (the caller cuts it with [`cut`]). Text longer than the
/// render budget ([`Limits::render_budget`]) ends with `...<output limit>`.
pub fn repr(bytes: &[u8]) -> Result<String, PickleError> {
    let limits = Limits::default();
    let tree = decode(bytes, &limits)?;
    repr_tree(
        &tree,
        tree.root,
        &limits.budget(bytes.len()),
        limits.max_depth,
    )
}

/// Renders one node of a tree within `budget` (then marked `...<output limit>`).
pub fn repr_tree(
    tree: &Tree,
    id: NodeId,
    budget: &Budget,
    max_depth: usize,
) -> Result<String, PickleError> {
    let mut r = render::Renderer::new(tree, budget, budget.bytes_left(), max_depth);
    let mut s = r.render(id)?;
    if r.truncated {
        s.push_str(budget::TEXT_MARKER);
    }
    Ok(s)
}

/// The display value of a pickle (§4.2 step 7): the placeholder dict, the exception dict, or
/// the repr cut at 500 characters plus `...`; `"<unavailable: PickleError: ...>"` when the
/// bytes do not decode. Bounded by the render budget of the input.
pub fn pretty(bytes: &[u8]) -> serde_json::Value {
    let limits = Limits::default();
    match decode(bytes, &limits) {
        Ok(tree) => values::pretty_tree(&tree, &limits, &limits.budget(bytes.len())),
        Err(e) => serde_json::Value::String(format!("<unavailable: PickleError: {e}>")),
    }
}

/// Python's type name of a pickled value (`int`, `mymod.Point`), the `type` of its [`view`]
/// without the rest; `<unavailable>` when the bytes do not decode.
pub fn type_name(bytes: &[u8]) -> String {
    match decode(bytes, &Limits::default()) {
        Ok(tree) => view::type_name(&tree, tree.root),
        Err(_) => "<unavailable>".to_owned(),
    }
}

/// The pickled value as JSON when JSON holds it exactly and it is small: `None`, bools, ints
/// of 64 bits, finite floats, valid Unicode strings, lists and dicts with string keys of such
/// values, at most `max_nodes` values. A tuple, a set, bytes, an object, a container referenced
/// twice (shared or cyclic), a duplicate key or anything bigger (more strings than the render
/// budget, as a str shared through the memo may be) is `None` (the caller keeps the item).
pub fn exact_json(bytes: &[u8], max_nodes: usize) -> Option<serde_json::Value> {
    use serde_json::Value;
    fn go(
        tree: &Tree,
        id: NodeId,
        budget: &mut usize,
        bytes: &Budget,
        seen: &mut Vec<bool>,
    ) -> Option<Value> {
        *budget = budget.checked_sub(1)?;
        let node = tree.get(id)?;
        if matches!(node, Node::List(_) | Node::Dict(_))
            && std::mem::replace(seen.get_mut(id as usize)?, true)
        {
            return None; // a shared or cyclic container: JSON would copy it
        }
        Some(match node {
            Node::None => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::from(*i),
            Node::Float(f) => Value::Number(serde_json::Number::from_f64(*f)?),
            Node::Str(b) if bytes.spend(b.len()) => {
                Value::String(String::from_utf8(b.to_vec()).ok()?)
            }
            Node::List(items) => Value::Array(
                items
                    .iter()
                    .map(|i| go(tree, *i, budget, bytes, seen))
                    .collect::<Option<_>>()?,
            ),
            Node::Dict(pairs) => {
                let mut m = serde_json::Map::new();
                for (k, v) in pairs {
                    let Value::String(k) = go(tree, *k, budget, bytes, seen)? else {
                        return None;
                    };
                    if m.insert(k, go(tree, *v, budget, bytes, seen)?).is_some() {
                        return None;
                    }
                }
                Value::Object(m)
            }
            _ => return None,
        })
    }
    let limits = Limits::default();
    let tree = decode(bytes, &limits).ok()?;
    let mut seen = vec![false; tree.nodes.len()];
    let mut budget = max_nodes;
    go(
        &tree,
        tree.root,
        &mut budget,
        &limits.budget(bytes.len()),
        &mut seen,
    )
}

#[cfg(test)]
mod exact_json_tests {
    use super::exact_json;
    use serde_json::json;

    #[test]
    fn what_json_holds_exactly_comes_back_and_nothing_else() {
        let v = json!({"a": [1, 2.5, "é", null, true], "b": {"c": -3}, "k": [{"a": 1}, {"a": 2}]});
        let bytes = crate::pickle_write::dumps(&v);
        assert_eq!(exact_json(&bytes, 100), Some(v));
        assert_eq!(exact_json(&bytes, 5), None, "over the budget");
        // A tuple and bytes are not JSON: (1, 2) and b"x" from CPython's pickle.dumps.
        assert_eq!(
            exact_json(
                b"\x80\x04\x95\x07\x00\x00\x00\x00\x00\x00\x00K\x01K\x02\x86\x94.",
                10
            ),
            None
        );
        assert_eq!(
            exact_json(
                b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00C\x01x\x94.",
                10
            ),
            None
        );
        // A list referenced twice, [l, l] with l = []: the copy would lose the sharing.
        assert_eq!(
            exact_json(
                b"\x80\x04\x95\t\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94h\x01e.",
                10
            ),
            None
        );
        assert_eq!(exact_json(b"not a pickle", 10), None);
    }
}

/// Python's `repr()` of a string (`'it'`, `"it's"`, escapes as Python writes them).
pub fn str_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    text::repr_str(s.as_bytes(), &mut out);
    out
}

/// The structured view `{type, repr, attributes}` of a pickle (depth 3, 100 attributes),
/// bounded by the render budget of the input.
pub fn view(bytes: &[u8]) -> serde_json::Value {
    view_from(bytes, 0)
}

/// [`view`] with the root's attributes from the `from`th on (the page of a long list or dict
/// after its first `from` entries).
pub fn view_from(bytes: &[u8], from: usize) -> serde_json::Value {
    let limits = Limits::default();
    match decode(bytes, &limits) {
        Ok(tree) => view::view_tree(
            &tree,
            &limits,
            &Budget::new(limits.view_budget(bytes.len())),
            from,
        ),
        Err(e) => serde_json::json!({
            "type": "<unavailable>",
            "repr": format!("<unavailable: PickleError: {e}>"),
            "attributes": {},
        }),
    }
}

/// Cuts text at [`MAX_REPR_CHARS`] characters, appending `...` when longer (the original's
/// `repr[:500] + "..."`).
pub fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_REPR_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap_or_default()
    }

    /// `dill.dumps(ZeroDivisionError('division by zero'), protocol=4)`.
    const ZDE: &str = "gASVSwAAAAAAAACMCmRpbGwuX2RpbGyUjApfbG9hZF90eXBllJOUjBFaZXJvRGl2aXNpb25FcnJvcpSFlFKUjBBkaXZpc2lvbiBieSB6ZXJvlIWUUpQu";

    #[test]
    fn exception_dict() {
        let v = pretty(&b64(ZDE));
        assert_eq!(
            v,
            json!({"__cideldill_exception__":true,"summary":"builtins.ZeroDivisionError: division by zero",
             "type_name":"ZeroDivisionError","module":"builtins","qualname":"ZeroDivisionError",
             "message":"division by zero","repr_text":"ZeroDivisionError('division by zero')",
             "args":["division by zero"],"attributes":{},"failed_attributes":{}})
        );
        assert_eq!(
            repr(&b64(ZDE)).unwrap(),
            "ZeroDivisionError('division by zero')"
        );
    }

    #[test]
    fn pretty_cuts_and_reports() {
        // ['a' * 600] at protocol 4.
        let mut b = vec![0x80, 4, b']', b'X'];
        b.extend(600u32.to_le_bytes());
        b.extend([b'a'; 600]);
        b.extend([b'a', b'.']);
        let p = pretty(&b);
        let s = p.as_str().unwrap_or_default();
        assert_eq!(s.chars().count(), 503);
        assert!(s.starts_with("['aaa") && s.ends_with("..."));
        assert_eq!(
            pretty(b"\x80\x04K"),
            json!("<unavailable: PickleError: pickle truncated at byte 3>")
        );
        assert_eq!(cut("abc"), "abc");
    }

    #[test]
    fn view_shape() {
        // {'y': [1, 2]} at protocol 4.
        let b = b"\x80\x04}\x94\x8c\x01y\x94]\x94(K\x01K\x02es.";
        let v = view(b);
        assert_eq!(v["type"], "dict");
        assert_eq!(v["repr"], "{'y': [1, 2]}");
        assert_eq!(v["attributes"]["'y'"]["type"], "list");
        assert_eq!(v["attributes"]["'y'"]["attributes"]["1"], 2);
    }

    #[test]
    fn deep_nesting_fits_a_small_stack() {
        // 199 nested lists, each also in a tuple and a dict: rendered on a 1 MiB stack.
        let mut b = vec![0x80, 4];
        for _ in 0..66 {
            b.extend([b'}', b'N', b']', b'(']);
        }
        b.push(b'N');
        for _ in 0..66 {
            b.extend([b'e', 0x85, b's']);
        }
        b.push(b'.');
        let handle = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || (repr(&b), pretty(&b), view(&b)))
            .expect("spawn");
        let (r, _, _) = handle.join().expect("no stack overflow");
        let r = r.expect("renders");
        assert!(r.starts_with("{None: ([{None: ([{"), "{}", &r[..40]);
        // Deeper than the limit: an error, not a crash.
        let mut deep = vec![b'N'];
        deep.extend([0x85; 300]);
        deep.push(b'.');
        assert!(matches!(repr(&deep), Err(PickleError::RenderDepth { .. })));
        assert_eq!(pretty(&deep), json!("<unreprable: RecursionError>"));
    }
}
