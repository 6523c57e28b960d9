//! The condition language of conditional breakpoints: a small, Python-like expression language
//! evaluated on the server from a call's decoded arguments (never by Python, never by running a
//! payload).
//!
//! Grammar, loosest first: `or`, `and`, `not`, comparisons (`== != < <= > >= in not in`, chained
//! like Python's, and `is None` / `is not None` / `is True` / `is False`), `+ -`, `* / // %`,
//! unary `-`, then postfix `.name`, `[expr]` and the string methods `startswith`, `endswith`,
//! `contains`. Atoms: ints, floats, quoted strings, `True`, `False`, `None`, the names `args`,
//! `kwargs`, `result`, `exception`, the calls `len(x)`, `type(x)`, `abs(x)`, and parentheses.
//!
//! Values are read through [`CondValue`], implemented for JSON items (`&serde_json::Value`),
//! decoded pickles ([`PickleValue`]) and either ([`Item`], which also stands for a value that
//! could not be read: reading it fails the evaluation with the reason). Parsing is bounded
//! (4 KiB of text, 64 levels of nesting, which also bounds the evaluator's recursion) and so is
//! evaluation (a budget of steps).
//!
//! [`eval_text`] gives an expression's value as text, as a Python f-string's `{expr}` would
//! show it, and [`Template`] is the log message of a logpoint: text with `{expression}` parts
//! ([`parse_template`], printed back by `Display`, [`Template::render`] never fails). Every
//! text is bounded: a value at most [`LOG_VALUE_CHARS`] characters, a log message at most
//! [`LOG_LINE_BYTES`] bytes. Pure.
//!
//! Its parts, one file each under `condition/`: `ast` (the syntax tree, printed back by
//! `Display`), `parse`, `value` (what a condition reads, and how it shows as text), `eval`,
//! `template` (logpoint messages) and `tests`. Items private to the language are `pub(super)`;
//! each part starts with `use super::*`, so the imports and constants below are the parts'.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use serde_json::Value;

use crate::limits::{
    CONDITION_DEPTH, CONDITION_STEPS, CONDITION_TEXT_BYTES, LOG_LINE_BYTES, LOG_MESSAGE_PARTS,
    LOG_VALUE_CHARS,
};
use crate::pickle::render::{dict_pairs, float_repr, items, Renderer};
use crate::pickle::{Budget, Limits, Node, NodeId, Tree};

/// Bytes of a string an evaluation may copy or build per step of its budget: with
/// `CONDITION_STEPS`, at most 40 MiB in all, however large the call's strings.
const STR_BYTES_PER_STEP: usize = 4096;
/// Output bytes the pickle renderer writes for one displayed value: enough for
/// [`LOG_VALUE_CHARS`] characters of any width, and one more.
const DISPLAY_BYTES: usize = 4 * (LOG_VALUE_CHARS + 1);
/// Node visits (and output bytes) the pickle renderer may spend on one displayed value,
/// whatever the value's size or sharing.
const DISPLAY_WORK: usize = 64 * 1024;

/// Why an int beyond 64 bits cannot take part in arithmetic or ordering.
const BIG_INT: &str = "int too large to compute with (beyond 64 bits)";

/// The names a condition may read.
const NAMES: &str = "args, kwargs, result or exception";

mod ast;
mod eval;
mod parse;
mod template;
mod value;

pub use ast::*;
pub use eval::*;
pub use parse::*;
pub use template::*;
pub use value::*;

#[cfg(test)]
mod tests;
