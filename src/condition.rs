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

// ---------------------------------------------------------------------------------------------
// Syntax tree

/// A name of the call's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    /// The positional arguments.
    Args,
    /// The keyword arguments.
    Kwargs,
    /// The return value.
    Result,
    /// The raised exception's type name, or `None`.
    Exception,
}

/// A built-in function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    /// `len(x)`.
    Len,
    /// `type(x)`: the class name, e.g. `"Point"` or `"int"`.
    Type,
    /// `abs(x)`.
    Abs,
}

/// A string method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `s.startswith(p)`.
    StartsWith,
    /// `s.endswith(p)`.
    EndsWith,
    /// `s.contains(p)`: `p in s`.
    Contains,
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `//`.
    FloorDiv,
    /// `%`.
    Mod,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `in`.
    In,
    /// `not in`.
    NotIn,
    /// `is` (only with `None`, `True` or `False` on its right).
    Is,
    /// `is not` (likewise).
    IsNot,
}

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An int literal (never negative: `-5` is `Neg(Int(5))`).
    Int(i64),
    /// A float literal (finite, never negative).
    Float(f64),
    /// A string literal.
    Str(String),
    /// A name of the environment.
    Name(Name),
    /// `x.name`.
    Attr(Box<Expr>, String),
    /// `x[key]`.
    Index(Box<Expr>, Box<Expr>),
    /// `f(x)`.
    Call(Func, Box<Expr>),
    /// `x.method(arg)`.
    Method(Box<Expr>, Method, Box<Expr>),
    /// `-x`.
    Neg(Box<Expr>),
    /// `not x`.
    Not(Box<Expr>),
    /// `a and b`.
    And(Box<Expr>, Box<Expr>),
    /// `a or b`.
    Or(Box<Expr>, Box<Expr>),
    /// `a op b`.
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    /// `a op1 b op2 c ...`, chained like Python's.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
}

impl Name {
    fn text(self) -> &'static str {
        match self {
            Name::Args => "args",
            Name::Kwargs => "kwargs",
            Name::Result => "result",
            Name::Exception => "exception",
        }
    }
}

impl Func {
    fn text(self) -> &'static str {
        match self {
            Func::Len => "len",
            Func::Type => "type",
            Func::Abs => "abs",
        }
    }
}

impl Method {
    fn text(self) -> &'static str {
        match self {
            Method::StartsWith => "startswith",
            Method::EndsWith => "endswith",
            Method::Contains => "contains",
        }
    }
}

impl ArithOp {
    fn text(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::FloorDiv => "//",
            ArithOp::Mod => "%",
        }
    }

    fn prec(self) -> u8 {
        match self {
            ArithOp::Add | ArithOp::Sub => PREC_ADD,
            _ => PREC_MUL,
        }
    }
}

impl CmpOp {
    fn text(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
        }
    }
}

const PREC_OR: u8 = 1;
const PREC_AND: u8 = 2;
const PREC_NOT: u8 = 3;
const PREC_CMP: u8 = 4;
const PREC_ADD: u8 = 5;
const PREC_MUL: u8 = 6;
const PREC_NEG: u8 = 7;
const PREC_ATOM: u8 = 8;

impl Expr {
    /// Whether the expression reads `result` or `exception` anywhere, so that it can only be
    /// evaluated once the call has ended.
    pub fn reads_outcome(&self) -> bool {
        match self {
            Expr::None | Expr::Bool(_) | Expr::Int(_) | Expr::Float(_) | Expr::Str(_) => false,
            Expr::Name(n) => matches!(n, Name::Result | Name::Exception),
            Expr::Attr(x, _) | Expr::Call(_, x) | Expr::Neg(x) | Expr::Not(x) => x.reads_outcome(),
            Expr::Index(a, b)
            | Expr::Method(a, _, b)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Arith(_, a, b) => a.reads_outcome() || b.reads_outcome(),
            Expr::Compare(first, rest) => {
                first.reads_outcome() || rest.iter().any(|(_, x)| x.reads_outcome())
            }
        }
    }

    fn prec(&self) -> u8 {
        match self {
            Expr::Or(..) => PREC_OR,
            Expr::And(..) => PREC_AND,
            Expr::Not(_) => PREC_NOT,
            Expr::Compare(..) => PREC_CMP,
            Expr::Arith(op, ..) => op.prec(),
            Expr::Neg(_) => PREC_NEG,
            _ => PREC_ATOM,
        }
    }
}

/// Writes `e`, parenthesized when it binds looser than `min`.
fn write_at(f: &mut fmt::Formatter<'_>, e: &Expr, min: u8) -> fmt::Result {
    if e.prec() < min {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

fn write_str_literal(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '"' => f.write_str("\\\"")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\x{:02x}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// Prints the condition back as text that parses to the same tree.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::None => f.write_str("None"),
            Expr::Bool(true) => f.write_str("True"),
            Expr::Bool(false) => f.write_str("False"),
            Expr::Int(n) => write!(f, "{n}"),
            Expr::Float(x) => write!(f, "{x:?}"),
            Expr::Str(s) => write_str_literal(f, s),
            Expr::Name(n) => f.write_str(n.text()),
            Expr::Attr(x, name) => {
                write_at(f, x, PREC_ATOM)?;
                write!(f, ".{name}")
            }
            Expr::Index(x, k) => {
                write_at(f, x, PREC_ATOM)?;
                write!(f, "[{k}]")
            }
            Expr::Call(func, x) => write!(f, "{}({x})", func.text()),
            Expr::Method(x, m, a) => {
                write_at(f, x, PREC_ATOM)?;
                write!(f, ".{}({a})", m.text())
            }
            Expr::Neg(x) => {
                f.write_str("-")?;
                write_at(f, x, PREC_NEG)
            }
            Expr::Not(x) => {
                f.write_str("not ")?;
                write_at(f, x, PREC_NOT)
            }
            Expr::And(a, b) | Expr::Or(a, b) => {
                let (p, op) = match self {
                    Expr::And(..) => (PREC_AND, "and"),
                    _ => (PREC_OR, "or"),
                };
                write_at(f, a, p)?;
                write!(f, " {op} ")?;
                write_at(f, b, p + 1)
            }
            Expr::Arith(op, a, b) => {
                write_at(f, a, op.prec())?;
                write!(f, " {} ", op.text())?;
                write_at(f, b, op.prec() + 1)
            }
            Expr::Compare(first, rest) => {
                write_at(f, first, PREC_CMP + 1)?;
                for (op, x) in rest {
                    write!(f, " {} ", op.text())?;
                    write_at(f, x, PREC_CMP + 1)?;
                }
                Ok(())
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser

/// A mistake in a condition's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong, e.g. `expected ')'`.
    pub message: String,
    /// Byte offset of the mistake in the text.
    pub byte: usize,
    /// 1-based position of the mistake in characters.
    pub column: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.column)
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
    End,
}

/// Operators, longest first.
const OPS: [&str; 19] = [
    "==", "!=", "<=", ">=", "//", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ".", ",",
    "=",
];

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    fn err(&self, byte: usize, message: impl Into<String>) -> ParseError {
        error_at(self.text, byte, message)
    }

    fn next(&mut self) -> Result<(Tok, usize), ParseError> {
        let rest = &self.text[self.pos..];
        let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r']);
        self.pos += rest.len() - trimmed.len();
        let start = self.pos;
        let Some(c) = trimmed.chars().next() else {
            return Ok((Tok::End, start));
        };
        if c.is_ascii_digit() {
            return self.number(start).map(|t| (t, start));
        }
        if c == '"' || c == '\'' {
            return self.string(start, c).map(|t| (t, start));
        }
        if c == '_' || c.is_alphabetic() {
            let len = trimmed
                .find(|c: char| !(c == '_' || c.is_alphanumeric()))
                .unwrap_or(trimmed.len());
            self.pos += len;
            return Ok((Tok::Ident(trimmed[..len].to_owned()), start));
        }
        for op in OPS {
            if trimmed.starts_with(op) {
                if op == "=" {
                    return Err(self.err(start, "'=' is not a comparison (use '==')"));
                }
                self.pos += op.len();
                return Ok((Tok::Op(op), start));
            }
        }
        Err(self.err(start, format!("unexpected character {c:?}")))
    }

    fn number(&mut self, start: usize) -> Result<Tok, ParseError> {
        let b = self.text.as_bytes();
        let digits = |mut i: usize| {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
                i += 1;
            }
            i
        };
        let mut i = digits(start);
        let mut float = false;
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            float = true;
            i = digits(i + 1);
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            if j < b.len() && b[j].is_ascii_digit() {
                float = true;
                i = digits(j);
            }
        }
        if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
            return Err(self.err(i, "invalid number"));
        }
        let text: String = self.text[start..i].chars().filter(|&c| c != '_').collect();
        self.pos = i;
        if float {
            match text.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(Tok::Float(x)),
                _ => Err(self.err(start, "float literal out of range")),
            }
        } else {
            text.parse::<i64>()
                .map(Tok::Int)
                .map_err(|_| self.err(start, "integer literal too large"))
        }
    }

    fn string(&mut self, start: usize, quote: char) -> Result<Tok, ParseError> {
        let mut out = String::new();
        let mut chars = self.text[start + 1..].char_indices();
        let at = |i: usize| start + 1 + i;
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.pos = at(i) + 1;
                    return Ok(Tok::Str(out));
                }
                '\n' => break,
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    let hex = |chars: &mut std::str::CharIndices<'_>, n: usize| {
                        let mut v = 0u32;
                        for _ in 0..n {
                            let d = chars.next().and_then(|(_, c)| c.to_digit(16))?;
                            v = v * 16 + d;
                        }
                        char::from_u32(v)
                    };
                    let decoded = match e {
                        '\\' => Some('\\'),
                        '\'' => Some('\''),
                        '"' => Some('"'),
                        'n' => Some('\n'),
                        'r' => Some('\r'),
                        't' => Some('\t'),
                        '0' => Some('\0'),
                        'x' => hex(&mut chars, 2),
                        'u' => hex(&mut chars, 4),
                        'U' => hex(&mut chars, 8),
                        _ => None,
                    };
                    match decoded {
                        Some(c) => out.push(c),
                        None => return Err(self.err(at(i), "invalid escape in string")),
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.err(start, "unterminated string"))
    }
}

fn error_at(text: &str, byte: usize, message: impl Into<String>) -> ParseError {
    let byte = byte.min(text.len());
    let column = text.get(..byte).map_or(byte, |s| s.chars().count()) + 1;
    ParseError {
        message: message.into(),
        byte,
        column,
    }
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Int(n) => n.to_string(),
        Tok::Float(x) => format!("{x:?}"),
        Tok::Str(_) => "a string".to_owned(),
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Op(o) => format!("'{o}'"),
        Tok::End => "the end".to_owned(),
    }
}

/// An expression and the height of its tree.
type Parsed = (Expr, usize);

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    at: usize,
    /// Brackets, parentheses and unary operators entered (bounds the parser's recursion).
    nest: usize,
    /// What to say when a value is missing at the end of the text.
    at_end: &'static str,
}

/// Parses a condition.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > CONDITION_TEXT_BYTES {
        return Err(error_at(
            text,
            CONDITION_TEXT_BYTES,
            format!("condition longer than {CONDITION_TEXT_BYTES} bytes"),
        ));
    }
    parse_text(text, "unexpected end of condition")
}

/// Parses an expression that is all of `text` (whose length the caller bounds); `at_end` is
/// the message when a value is missing at its end.
fn parse_text(text: &str, at_end: &'static str) -> Result<Expr, ParseError> {
    let mut lex = Lexer { text, pos: 0 };
    let (tok, at) = lex.next()?;
    let mut p = Parser {
        lex,
        tok,
        at,
        nest: 0,
        at_end,
    };
    if p.tok == Tok::End {
        return Err(p.err("empty condition"));
    }
    let (e, _) = p.or()?;
    if p.tok != Tok::End {
        return Err(p.err(format!("unexpected {}", tok_text(&p.tok))));
    }
    Ok(e)
}

impl Parser<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        self.lex.err(self.at, message)
    }

    fn bump(&mut self) -> Result<Tok, ParseError> {
        let (tok, at) = self.lex.next()?;
        self.at = at;
        Ok(std::mem::replace(&mut self.tok, tok))
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.tok, Tok::Op(o) if o == op)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.tok, Tok::Ident(s) if s == w)
    }

    fn expect(&mut self, op: &'static str) -> Result<(), ParseError> {
        if !self.is_op(op) {
            return Err(self.err(format!("expected '{op}'")));
        }
        self.bump()?;
        Ok(())
    }

    /// A node of height `h`, refused past [`CONDITION_DEPTH`].
    fn node(&self, e: Expr, h: usize, at: usize) -> Result<Parsed, ParseError> {
        if h > CONDITION_DEPTH {
            return Err(self.lex.err(at, too_deep()));
        }
        Ok((e, h))
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.nest += 1;
        if self.nest > CONDITION_DEPTH {
            return Err(self.err(too_deep()));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Parsed, ParseError> {
        let (mut a, mut ha) = self.and()?;
        while self.is_word("or") {
            let at = self.at;
            self.bump()?;
            let (b, hb) = self.and()?;
            (a, ha) = self.node(Expr::Or(Box::new(a), Box::new(b)), 1 + ha.max(hb), at)?;
        }
        Ok((a, ha))
    }

    fn and(&mut self) -> Result<Parsed, ParseError> {
        let (mut a, mut ha) = self.not()?;
        while self.is_word("and") {
            let at = self.at;
            self.bump()?;
            let (b, hb) = self.not()?;
            (a, ha) = self.node(Expr::And(Box::new(a), Box::new(b)), 1 + ha.max(hb), at)?;
        }
        Ok((a, ha))
    }

    fn not(&mut self) -> Result<Parsed, ParseError> {
        if !self.is_word("not") {
            return self.compare();
        }
        let at = self.at;
        self.bump()?;
        self.enter()?;
        let (x, h) = self.not()?;
        self.nest -= 1;
        self.node(Expr::Not(Box::new(x)), h + 1, at)
    }

    fn cmp_op(&mut self) -> Result<Option<CmpOp>, ParseError> {
        let op = match &self.tok {
            Tok::Op("==") => CmpOp::Eq,
            Tok::Op("!=") => CmpOp::Ne,
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op("<=") => CmpOp::Le,
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op(">=") => CmpOp::Ge,
            Tok::Ident(w) if w == "in" => CmpOp::In,
            Tok::Ident(w) if w == "is" => {
                self.bump()?;
                if self.is_word("not") {
                    self.bump()?;
                    return Ok(Some(CmpOp::IsNot));
                }
                return Ok(Some(CmpOp::Is));
            }
            Tok::Ident(w) if w == "not" => {
                self.bump()?;
                if !self.is_word("in") {
                    return Err(self.err("expected 'in' after 'not'"));
                }
                CmpOp::NotIn
            }
            _ => return Ok(None),
        };
        self.bump()?;
        Ok(Some(op))
    }

    fn compare(&mut self) -> Result<Parsed, ParseError> {
        let first_at = self.at;
        let (first, mut h) = self.arith(PREC_ADD)?;
        let mut rest = Vec::new();
        while let Some(op) = self.cmp_op()? {
            let at = self.at;
            let (x, hx) = self.arith(PREC_ADD)?;
            if matches!(op, CmpOp::Is | CmpOp::IsNot) && !matches!(x, Expr::None | Expr::Bool(_)) {
                return Err(self
                    .lex
                    .err(at, "'is' compares only with None, True or False"));
            }
            h = h.max(hx);
            rest.push((op, x));
        }
        if rest.is_empty() {
            return Ok((first, h));
        }
        self.node(Expr::Compare(Box::new(first), rest), h + 1, first_at)
    }

    fn arith_op(&self, prec: u8) -> Option<ArithOp> {
        let op = match self.tok {
            Tok::Op("+") => ArithOp::Add,
            Tok::Op("-") => ArithOp::Sub,
            Tok::Op("*") => ArithOp::Mul,
            Tok::Op("/") => ArithOp::Div,
            Tok::Op("//") => ArithOp::FloorDiv,
            Tok::Op("%") => ArithOp::Mod,
            _ => return None,
        };
        (op.prec() == prec).then_some(op)
    }

    /// `+ -` (at [`PREC_ADD`]) or `* / // %` (at [`PREC_MUL`]), left-associative.
    fn arith(&mut self, prec: u8) -> Result<Parsed, ParseError> {
        let operand = |p: &mut Self| {
            if prec == PREC_ADD {
                p.arith(PREC_MUL)
            } else {
                p.unary()
            }
        };
        let (mut a, mut ha) = operand(self)?;
        while let Some(op) = self.arith_op(prec) {
            let at = self.at;
            self.bump()?;
            let (b, hb) = operand(self)?;
            (a, ha) = self.node(
                Expr::Arith(op, Box::new(a), Box::new(b)),
                1 + ha.max(hb),
                at,
            )?;
        }
        Ok((a, ha))
    }

    fn unary(&mut self) -> Result<Parsed, ParseError> {
        if !self.is_op("-") {
            return self.postfix();
        }
        let at = self.at;
        self.bump()?;
        self.enter()?;
        let (x, h) = self.unary()?;
        self.nest -= 1;
        self.node(Expr::Neg(Box::new(x)), h + 1, at)
    }

    /// `( expr )` after the opening parenthesis or bracket was seen: the inner expression.
    fn inner(&mut self, close: &'static str) -> Result<Parsed, ParseError> {
        self.bump()?;
        self.enter()?;
        let x = self.or()?;
        self.expect(close)?;
        self.nest -= 1;
        Ok(x)
    }

    fn postfix(&mut self) -> Result<Parsed, ParseError> {
        let (mut x, mut h) = self.primary()?;
        loop {
            let at = self.at;
            if self.is_op(".") {
                self.bump()?;
                let Tok::Ident(name) = self.tok.clone() else {
                    return Err(self.err("expected an attribute name after '.'"));
                };
                self.bump()?;
                if self.is_op("(") {
                    let m = match name.as_str() {
                        "startswith" => Method::StartsWith,
                        "endswith" => Method::EndsWith,
                        "contains" => Method::Contains,
                        _ => {
                            return Err(self.lex.err(
                                at + 1,
                                format!(
                                    "unknown method '{name}' (only startswith, endswith and \
                                     contains)"
                                ),
                            ))
                        }
                    };
                    let (a, ha) = self.inner(")")?;
                    (x, h) =
                        self.node(Expr::Method(Box::new(x), m, Box::new(a)), 1 + h.max(ha), at)?;
                } else {
                    (x, h) = self.node(Expr::Attr(Box::new(x), name), h + 1, at)?;
                }
            } else if self.is_op("[") {
                let (k, hk) = self.inner("]")?;
                (x, h) = self.node(Expr::Index(Box::new(x), Box::new(k)), 1 + h.max(hk), at)?;
            } else {
                return Ok((x, h));
            }
        }
    }

    fn primary(&mut self) -> Result<Parsed, ParseError> {
        let at = self.at;
        let e = match self.tok.clone() {
            Tok::Int(n) => Expr::Int(n),
            Tok::Float(x) => Expr::Float(x),
            Tok::Str(s) => Expr::Str(s),
            Tok::Op("(") => return self.inner(")"),
            Tok::Ident(w) => match w.as_str() {
                "True" => Expr::Bool(true),
                "False" => Expr::Bool(false),
                "None" => Expr::None,
                "args" => Expr::Name(Name::Args),
                "kwargs" => Expr::Name(Name::Kwargs),
                "result" => Expr::Name(Name::Result),
                "exception" => Expr::Name(Name::Exception),
                "len" | "type" | "abs" => {
                    let func = match w.as_str() {
                        "len" => Func::Len,
                        "type" => Func::Type,
                        _ => Func::Abs,
                    };
                    self.bump()?;
                    if !self.is_op("(") {
                        return Err(self.err(format!("expected '(' after '{w}'")));
                    }
                    let (x, h) = self.inner(")")?;
                    return self.node(Expr::Call(func, Box::new(x)), h + 1, at);
                }
                "and" | "or" | "not" | "in" | "is" => {
                    return Err(self.err(format!("expected a value before '{w}'")))
                }
                _ => {
                    return Err(self.err(format!(
                        "unknown name '{w}': a condition reads {NAMES} (functions: len, type, \
                         abs)"
                    )))
                }
            },
            Tok::End => return Err(self.err(self.at_end)),
            t => return Err(self.err(format!("expected a value, found {}", tok_text(&t)))),
        };
        self.bump()?;
        Ok((e, 1))
    }
}

fn too_deep() -> String {
    format!("condition nested too deeply (more than {CONDITION_DEPTH} levels)")
}

// ---------------------------------------------------------------------------------------------
// Values

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
fn cut_text(text: &str, max: usize, incomplete: bool) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None if incomplete => format!("{text}..."),
        None => text.to_owned(),
    }
}

/// Collects at most `room` bytes, then refuses the rest (ending the serialization).
struct Bounded {
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
fn json_display(v: &Value) -> String {
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
fn str_display(b: &[u8]) -> String {
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
fn str_repr(s: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// Evaluator

/// How the call ended, as far as the condition can see.
#[derive(Debug, Clone)]
pub enum Outcome<V> {
    /// Not yet (a condition before the call): `result` and `exception` cannot be read.
    Pending,
    /// It returned this value (`exception` is `None`).
    Returned(V),
    /// It raised an exception of this type name (`result` is `None`).
    Raised(String),
}

/// What a condition reads.
#[derive(Debug, Clone)]
pub struct Env<V> {
    /// The positional arguments, if known.
    pub args: Option<Vec<V>>,
    /// The keyword arguments, if known.
    pub kwargs: Option<Vec<(String, V)>>,
    /// How the call ended.
    pub outcome: Outcome<V>,
}

/// Why a condition could not be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// What went wrong, naming the sub-expression, e.g. ``args[0].x: no attribute 'x' on int``.
    pub message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

fn fail<T>(e: &Expr, what: impl fmt::Display) -> Result<T, EvalError> {
    let mut text = e.to_string();
    if text.len() > 200 {
        let cut = (0..=200)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    Err(EvalError {
        message: format!("{text}: {what}"),
    })
}

/// A value met during evaluation.
#[derive(Debug, Clone)]
enum Val<V> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A container or instance of the environment.
    Host(V),
    Args,
    Kwargs,
}

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

impl<V: CondValue> Val<V> {
    /// An int beyond 64 bits, which arithmetic and ordering cannot use.
    fn is_big_int(&self) -> bool {
        matches!(self, Val::Host(h) if h.kind() == Kind::Int)
    }

    fn type_name(&self) -> String {
        match self {
            Val::None => "NoneType".to_owned(),
            Val::Bool(_) => "bool".to_owned(),
            Val::Int(_) => "int".to_owned(),
            Val::Float(_) => "float".to_owned(),
            Val::Str(_) => "str".to_owned(),
            Val::Host(v) => v.type_name(),
            Val::Args => "tuple".to_owned(),
            Val::Kwargs => "dict".to_owned(),
        }
    }

    fn num(&self) -> Option<Num> {
        match self {
            Val::Bool(b) => Some(Num::I(i64::from(*b))),
            Val::Int(n) => Some(Num::I(*n)),
            Val::Float(x) => Some(Num::F(*x)),
            _ => None,
        }
    }
}

/// `name[key]`, the expression that reads an element of `args` or `kwargs`.
fn element_expr(name: Name, key: Expr) -> Expr {
    Expr::Index(Box::new(Expr::Name(name)), Box::new(key))
}

/// A host value as a scalar when it is one. Every host value the evaluator reads comes
/// through here, so this is where a value that could not be read fails the evaluation.
fn lift<V: CondValue>(e: &Expr, v: V) -> Result<Val<V>, EvalError> {
    if let Some(why) = v.unreadable() {
        return fail(
            e,
            format!(
                "unreadable value ({})",
                cut_text(&why, LOG_VALUE_CHARS, false)
            ),
        );
    }
    let unreadable = |what: &str| fail(e, format!("unreadable {what} value"));
    Ok(match v.kind() {
        Kind::None => Val::None,
        Kind::Bool => match v.to_bool() {
            Some(b) => Val::Bool(b),
            None => return unreadable("bool"),
        },
        // An int beyond 64 bits stays a host value: its type and truth can be read.
        Kind::Int => match v.to_int() {
            Some(n) => Val::Int(n),
            None => Val::Host(v),
        },
        Kind::Float => match v.to_float() {
            Some(x) => Val::Float(x),
            None => return unreadable("float"),
        },
        Kind::Str => match v.to_str() {
            Some(s) => Val::Str(s),
            None => return unreadable("str"),
        },
        _ => Val::Host(v),
    })
}

fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2^63: every i64 is below it, and at least -2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    Some(i.cmp(&(t as i64)).then_with(|| {
        if f > t {
            Ordering::Less
        } else if f < t {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }))
}

fn cmp_num(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(x), Num::F(y)) => cmp_int_float(x, y),
        (Num::F(x), Num::I(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

/// Evaluates a condition with the default step budget ([`CONDITION_STEPS`]): its value's truth.
pub fn eval<V: CondValue>(expr: &Expr, env: &Env<V>) -> Result<bool, EvalError> {
    eval_with_budget(expr, env, CONDITION_STEPS)
}

/// Evaluates a condition within `steps` steps.
pub fn eval_with_budget<V: CondValue>(
    expr: &Expr,
    env: &Env<V>,
    steps: usize,
) -> Result<bool, EvalError> {
    let mut ev = Evaluator { env, steps };
    let v = ev.eval(expr)?;
    ev.truth(expr, &v)
}

/// The value of an expression as text, as a Python f-string's `{expr}` shows it: `None`,
/// `True`, `42`, floats as Python prints them, a str as its own text, `args` as a tuple
/// (`(1, 'a')`) and `kwargs` as a dict (`{'x': 1}`) of their elements' reprs, and any other
/// value of the call through [`CondValue::display`]. At most [`LOG_VALUE_CHARS`] characters,
/// then `...`. Within the step budget of [`eval`] ([`CONDITION_STEPS`]), each element shown of
/// `args` or `kwargs` costing a step.
pub fn eval_text<V: CondValue>(expr: &Expr, env: &Env<V>) -> Result<String, EvalError> {
    let mut ev = Evaluator {
        env,
        steps: CONDITION_STEPS,
    };
    let v = ev.eval(expr)?;
    ev.text(expr, &v)
}

struct Evaluator<'e, V> {
    env: &'e Env<V>,
    steps: usize,
}

impl<V: CondValue> Evaluator<'_, V> {
    fn step(&mut self, e: &Expr) -> Result<(), EvalError> {
        if self.steps == 0 {
            return fail(e, "evaluation step budget spent");
        }
        self.steps -= 1;
        Ok(())
    }

    /// A value of the call read as a scalar. A string is copied out of its payload: it costs a
    /// step per [`STR_BYTES_PER_STEP`] bytes, so that the budget bounds the bytes an evaluation
    /// copies and keeps as well as its steps.
    fn lift(&mut self, e: &Expr, v: V) -> Result<Val<V>, EvalError> {
        let v = lift(e, v)?;
        self.charge_text(e, &v)?;
        Ok(v)
    }

    /// Charges a string made or copied by the evaluation (see [`Evaluator::lift`]).
    fn charge_text(&mut self, e: &Expr, v: &Val<V>) -> Result<(), EvalError> {
        if let Val::Str(s) = v {
            let cost = s.len() / STR_BYTES_PER_STEP;
            if cost > self.steps {
                return fail(
                    e,
                    format!(
                        "a string of {} bytes: evaluation step budget spent",
                        s.len()
                    ),
                );
            }
            self.steps -= cost;
        }
        Ok(())
    }

    /// `v` as `str(v)` shows it, cut at [`LOG_VALUE_CHARS`] characters.
    fn text(&mut self, e: &Expr, v: &Val<V>) -> Result<String, EvalError> {
        Ok(match v {
            Val::None => "None".to_owned(),
            Val::Bool(true) => "True".to_owned(),
            Val::Bool(false) => "False".to_owned(),
            Val::Int(n) => n.to_string(),
            Val::Float(x) => float_repr(*x),
            Val::Str(s) => cut_text(s, LOG_VALUE_CHARS, false),
            Val::Host(h) => h.display(),
            Val::Args => {
                let env = self.env;
                let args = env.args.as_deref().unwrap_or_default();
                let close = if args.len() == 1 { ",)" } else { ")" };
                let items = args.iter().enumerate().map(|(i, a)| {
                    let i = Expr::Int(i64::try_from(i).unwrap_or(i64::MAX));
                    (None, element_expr(Name::Args, i), a)
                });
                self.elements(e, "(", close, items)?
            }
            Val::Kwargs => {
                let env = self.env;
                let kwargs = env.kwargs.as_deref().unwrap_or_default();
                let items = kwargs.iter().map(|(k, a)| {
                    let key = Expr::Str(k.clone());
                    (Some(k.as_str()), element_expr(Name::Kwargs, key), a)
                });
                self.elements(e, "{", "}", items)?
            }
        })
    }

    /// The elements of `args` or `kwargs` between `open` and `close`, each as `repr` shows it
    /// after its key if any, and each read as the expression given with it (`args[1]`) and
    /// costing a step; cut at [`LOG_VALUE_CHARS`] characters, and none read past the cut.
    fn elements<'a>(
        &mut self,
        e: &Expr,
        open: &str,
        close: &str,
        items: impl Iterator<Item = (Option<&'a str>, Expr, &'a V)>,
    ) -> Result<String, EvalError>
    where
        V: 'a,
    {
        let mut out = String::from(open);
        let mut chars = open.chars().count();
        for (i, (key, at, x)) in items.enumerate() {
            if chars > LOG_VALUE_CHARS {
                return Ok(cut_text(&out, LOG_VALUE_CHARS, true));
            }
            self.step(e)?;
            let x = self.lift(&at, x.clone())?;
            let mut part = String::new();
            if i > 0 {
                part.push_str(", ");
            }
            if let Some(k) = key {
                part.push_str(&str_repr(k));
                part.push_str(": ");
            }
            part.push_str(&self.repr(&at, &x)?);
            chars += part.chars().count();
            out.push_str(&part);
        }
        out.push_str(close);
        Ok(cut_text(&out, LOG_VALUE_CHARS, false))
    }

    /// `v` as `repr(v)` shows it (a str quoted), as an element of `args` or `kwargs`.
    fn repr(&mut self, e: &Expr, v: &Val<V>) -> Result<String, EvalError> {
        match v {
            Val::Str(s) => Ok(str_repr(s)),
            _ => self.text(e, v),
        }
    }

    fn length(&self, e: &Expr, v: &Val<V>) -> Result<usize, EvalError> {
        let n = match v {
            Val::Str(s) => Some(s.chars().count()),
            Val::Host(h) => h.length(),
            Val::Args => self.env.args.as_ref().map(Vec::len),
            Val::Kwargs => self.env.kwargs.as_ref().map(Vec::len),
            _ => None,
        };
        match n {
            Some(n) => Ok(n),
            None => fail(
                e,
                format!("object of type '{}' has no len()", v.type_name()),
            ),
        }
    }

    fn truth(&self, e: &Expr, v: &Val<V>) -> Result<bool, EvalError> {
        Ok(match v {
            Val::None => false,
            Val::Bool(b) => *b,
            Val::Int(n) => *n != 0,
            Val::Float(x) => *x != 0.0,
            Val::Str(s) => !s.is_empty(),
            Val::Host(h) if h.kind() == Kind::Int => true,
            Val::Host(h) if h.kind() == Kind::Object && h.length().is_none() => true,
            _ => self.length(e, v)? > 0,
        })
    }

    fn name(&mut self, e: &Expr, n: Name) -> Result<Val<V>, EvalError> {
        match (n, &self.env.outcome) {
            (Name::Args, _) if self.env.args.is_some() => Ok(Val::Args),
            (Name::Kwargs, _) if self.env.kwargs.is_some() => Ok(Val::Kwargs),
            (Name::Args | Name::Kwargs, _) => fail(e, "not available for this call"),
            (Name::Result | Name::Exception, Outcome::Pending) => {
                fail(e, "not available before the call returns")
            }
            (Name::Result, Outcome::Returned(v)) => self.lift(e, v.clone()),
            (Name::Result, Outcome::Raised(_)) | (Name::Exception, Outcome::Returned(_)) => {
                Ok(Val::None)
            }
            (Name::Exception, Outcome::Raised(t)) => Ok(Val::Str(t.clone())),
        }
    }

    fn eval(&mut self, e: &Expr) -> Result<Val<V>, EvalError> {
        self.step(e)?;
        match e {
            Expr::None => Ok(Val::None),
            Expr::Bool(b) => Ok(Val::Bool(*b)),
            Expr::Int(n) => Ok(Val::Int(*n)),
            Expr::Float(x) => Ok(Val::Float(*x)),
            Expr::Str(s) => Ok(Val::Str(s.clone())),
            Expr::Name(n) => self.name(e, *n),
            Expr::Attr(x, name) => {
                let v = self.eval(x)?;
                let found = match &v {
                    Val::Host(h) => h.attr(name),
                    _ => None,
                };
                match found {
                    Some(h) => self.lift(e, h),
                    None => fail(e, format!("no attribute '{name}' on {}", v.type_name())),
                }
            }
            Expr::Index(x, k) => {
                let v = self.eval(x)?;
                let k = self.eval(k)?;
                self.index(e, v, k)
            }
            Expr::Call(func, x) => {
                let v = self.eval(x)?;
                match func {
                    Func::Len => {
                        let n = self.length(e, &v)?;
                        Ok(Val::Int(i64::try_from(n).unwrap_or(i64::MAX)))
                    }
                    Func::Type => Ok(Val::Str(v.type_name())),
                    Func::Abs => match v.num() {
                        Some(Num::I(n)) => match n.checked_abs() {
                            Some(a) => Ok(Val::Int(a)),
                            None => fail(e, "integer overflow"),
                        },
                        Some(Num::F(x)) => Ok(Val::Float(x.abs())),
                        None if v.is_big_int() => fail(e, BIG_INT),
                        None => fail(
                            e,
                            format!("bad operand type for abs(): '{}'", v.type_name()),
                        ),
                    },
                }
            }
            Expr::Method(x, m, a) => {
                let v = self.eval(x)?;
                let a = self.eval(a)?;
                let (Val::Str(s), Val::Str(p)) = (&v, &a) else {
                    return fail(
                        e,
                        format!(
                            "{}() needs a str and a str argument, not {} and {}",
                            m.text(),
                            v.type_name(),
                            a.type_name()
                        ),
                    );
                };
                Ok(Val::Bool(match m {
                    Method::StartsWith => s.starts_with(p.as_str()),
                    Method::EndsWith => s.ends_with(p.as_str()),
                    Method::Contains => s.contains(p.as_str()),
                }))
            }
            Expr::Neg(x) => {
                let v = self.eval(x)?;
                match v.num() {
                    Some(Num::I(n)) => match n.checked_neg() {
                        Some(m) => Ok(Val::Int(m)),
                        None => fail(e, "integer overflow"),
                    },
                    Some(Num::F(x)) => Ok(Val::Float(-x)),
                    None if v.is_big_int() => fail(e, BIG_INT),
                    None => fail(
                        e,
                        format!("bad operand type for unary -: '{}'", v.type_name()),
                    ),
                }
            }
            Expr::Not(x) => {
                let v = self.eval(x)?;
                Ok(Val::Bool(!self.truth(x, &v)?))
            }
            Expr::And(a, b) => {
                let v = self.eval(a)?;
                if self.truth(a, &v)? {
                    self.eval(b)
                } else {
                    Ok(v)
                }
            }
            Expr::Or(a, b) => {
                let v = self.eval(a)?;
                if self.truth(a, &v)? {
                    Ok(v)
                } else {
                    self.eval(b)
                }
            }
            Expr::Arith(op, a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                let v = arith(e, *op, &x, &y)?;
                self.charge_text(e, &v)?;
                Ok(v)
            }
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first)?;
                for (op, x) in rest {
                    let right = self.eval(x)?;
                    if !self.compare(e, *op, &left, &right)? {
                        return Ok(Val::Bool(false));
                    }
                    left = right;
                }
                Ok(Val::Bool(true))
            }
        }
    }

    fn index(&mut self, e: &Expr, v: Val<V>, k: Val<V>) -> Result<Val<V>, EvalError> {
        let position = |n: usize| -> Result<usize, EvalError> {
            let Some(Num::I(i)) = (match &k {
                Val::Int(_) | Val::Bool(_) => k.num(),
                _ => None,
            }) else {
                return fail(
                    e,
                    format!(
                        "{} indices must be integers, not {}",
                        v.type_name(),
                        k.type_name()
                    ),
                );
            };
            let j = if i < 0 {
                i.checked_add(n as i64)
            } else {
                Some(i)
            };
            match j.and_then(|j| usize::try_from(j).ok()).filter(|&j| j < n) {
                Some(j) => Ok(j),
                None => fail(e, format!("index {i} out of range (length {n})")),
            }
        };
        let key_text = || match &k {
            Val::Str(s) => format!("{s:?}"),
            Val::Int(n) => n.to_string(),
            _ => k.type_name(),
        };
        match &v {
            Val::Args => {
                let args = self.env.args.as_deref().unwrap_or_default();
                let j = position(args.len())?;
                self.lift(e, args[j].clone())
            }
            Val::Kwargs => {
                let Val::Str(s) = &k else {
                    return fail(e, format!("no key {} in kwargs", key_text()));
                };
                let kwargs = self.env.kwargs.as_deref().unwrap_or_default();
                match kwargs.iter().rev().find(|(n, _)| n == s) {
                    Some((_, x)) => self.lift(e, x.clone()),
                    None => fail(e, format!("no key {} in kwargs", key_text())),
                }
            }
            Val::Str(s) => {
                let j = position(s.chars().count())?;
                Ok(Val::Str(
                    s.chars().nth(j).map(String::from).unwrap_or_default(),
                ))
            }
            Val::Host(h) => match h.kind() {
                Kind::List | Kind::Tuple => {
                    let j = position(h.length().unwrap_or(0))?;
                    match h.element(j) {
                        Some(x) => self.lift(e, x),
                        None => fail(e, "unreadable element"),
                    }
                }
                Kind::Dict | Kind::Object => {
                    let key = match &k {
                        Val::Str(s) => Some(Key::Str(s)),
                        Val::Int(n) => Some(Key::Int(*n)),
                        Val::Bool(b) => Some(Key::Int(i64::from(*b))),
                        _ => None,
                    };
                    match key.and_then(|key| h.key(key)) {
                        Some(x) => self.lift(e, x),
                        None => fail(e, format!("no key {}", key_text())),
                    }
                }
                _ => fail(
                    e,
                    format!("'{}' object is not subscriptable", h.type_name()),
                ),
            },
            _ => fail(
                e,
                format!("'{}' object is not subscriptable", v.type_name()),
            ),
        }
    }

    fn equal(&self, e: &Expr, a: &Val<V>, b: &Val<V>) -> Result<bool, EvalError> {
        if let (Some(x), Some(y)) = (a.num(), b.num()) {
            return Ok(cmp_num(x, y) == Some(Ordering::Equal));
        }
        match (a, b) {
            (Val::None, Val::None) => Ok(true),
            (Val::Str(x), Val::Str(y)) => Ok(x == y),
            (Val::Host(_) | Val::Args | Val::Kwargs, Val::Host(_) | Val::Args | Val::Kwargs) => {
                fail(
                    e,
                    format!(
                        "comparing {} with {} is not supported (compare their parts)",
                        a.type_name(),
                        b.type_name()
                    ),
                )
            }
            _ => Ok(false),
        }
    }

    fn contains(&mut self, e: &Expr, item: &Val<V>, c: &Val<V>) -> Result<bool, EvalError> {
        let unsupported = || {
            fail(
                e,
                format!(
                    "'in <{}>' needs a matching left operand, not {}",
                    c.type_name(),
                    item.type_name()
                ),
            )
        };
        match c {
            Val::Str(s) => match item {
                Val::Str(p) => Ok(s.contains(p.as_str())),
                _ => unsupported(),
            },
            Val::Args => {
                let args = self.env.args.as_deref().unwrap_or_default();
                for a in args {
                    self.step(e)?;
                    let a = self.lift(e, a.clone())?;
                    if self.equal(e, item, &a)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Val::Kwargs => match item {
                Val::Str(s) => Ok(self
                    .env
                    .kwargs
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|(n, _)| n == s)),
                _ => Ok(false),
            },
            Val::Host(h) => match h.kind() {
                Kind::List | Kind::Tuple | Kind::Set => {
                    for i in 0..h.length().unwrap_or(0) {
                        self.step(e)?;
                        let Some(x) = h.element(i) else {
                            return fail(e, "unreadable element");
                        };
                        let x = self.lift(e, x)?;
                        if self.equal(e, item, &x)? {
                            return Ok(true);
                        }
                    }
                    Ok(false)
                }
                Kind::Dict => Ok(match item {
                    Val::Str(s) => h.key(Key::Str(s)).is_some(),
                    Val::Int(n) => h.key(Key::Int(*n)).is_some(),
                    Val::Bool(b) => h.key(Key::Int(i64::from(*b))).is_some(),
                    _ => false,
                }),
                _ => fail(
                    e,
                    format!("argument of type '{}' is not iterable", h.type_name()),
                ),
            },
            _ => fail(
                e,
                format!("argument of type '{}' is not iterable", c.type_name()),
            ),
        }
    }

    fn compare(&mut self, e: &Expr, op: CmpOp, a: &Val<V>, b: &Val<V>) -> Result<bool, EvalError> {
        let order = |o: Option<Ordering>| -> Result<bool, EvalError> {
            let Some(o) = o else {
                return Ok(false);
            };
            Ok(match op {
                CmpOp::Lt => o.is_lt(),
                CmpOp::Le => o.is_le(),
                CmpOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            })
        };
        match op {
            CmpOp::Eq => self.equal(e, a, b),
            CmpOp::Ne => Ok(!self.equal(e, a, b)?),
            CmpOp::In => self.contains(e, a, b),
            CmpOp::NotIn => Ok(!self.contains(e, a, b)?),
            CmpOp::Is | CmpOp::IsNot => {
                let same = match (a, b) {
                    (Val::None, Val::None) => true,
                    (Val::Bool(x), Val::Bool(y)) => x == y,
                    _ => false,
                };
                Ok(same == (op == CmpOp::Is))
            }
            CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                if let (Some(x), Some(y)) = (a.num(), b.num()) {
                    return order(cmp_num(x, y));
                }
                if let (Val::Str(x), Val::Str(y)) = (a, b) {
                    return order(Some(x.cmp(y)));
                }
                if a.is_big_int() || b.is_big_int() {
                    return fail(e, BIG_INT);
                }
                fail(
                    e,
                    format!(
                        "'{}' not supported between {} and {}",
                        op.text(),
                        a.type_name(),
                        b.type_name()
                    ),
                )
            }
        }
    }
}

fn arith<V: CondValue>(e: &Expr, op: ArithOp, a: &Val<V>, b: &Val<V>) -> Result<Val<V>, EvalError> {
    if let (ArithOp::Add, Val::Str(x), Val::Str(y)) = (op, a, b) {
        return Ok(Val::Str(format!("{x}{y}")));
    }
    let (Some(x), Some(y)) = (a.num(), b.num()) else {
        if a.is_big_int() || b.is_big_int() {
            return fail(e, BIG_INT);
        }
        return fail(
            e,
            format!(
                "unsupported operand types for {}: {} and {}",
                op.text(),
                a.type_name(),
                b.type_name()
            ),
        );
    };
    let zero = matches!(y, Num::I(0)) || matches!(y, Num::F(z) if z == 0.0);
    if zero && matches!(op, ArithOp::Div | ArithOp::FloorDiv | ArithOp::Mod) {
        return fail(e, "division by zero");
    }
    if let (Num::I(x), Num::I(y)) = (x, y) {
        let r = match op {
            ArithOp::Add => x.checked_add(y),
            ArithOp::Sub => x.checked_sub(y),
            ArithOp::Mul => x.checked_mul(y),
            ArithOp::Div => return Ok(Val::Float(x as f64 / y as f64)),
            // Python floors the quotient; Rust truncates it.
            ArithOp::FloorDiv => x.checked_div(y).map(|q| {
                if x % y != 0 && (x < 0) != (y < 0) {
                    q - 1
                } else {
                    q
                }
            }),
            ArithOp::Mod => x.checked_rem(y).map(|r| {
                if r != 0 && (r < 0) != (y < 0) {
                    r + y
                } else {
                    r
                }
            }),
        };
        return match r {
            Some(r) => Ok(Val::Int(r)),
            None => fail(e, "integer overflow"),
        };
    }
    let f = |n: Num| match n {
        Num::I(i) => i as f64,
        Num::F(x) => x,
    };
    let (x, y) = (f(x), f(y));
    Ok(Val::Float(match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => x / y,
        ArithOp::FloorDiv => (x / y).floor(),
        ArithOp::Mod => {
            let r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else {
                r
            }
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// Log message templates

/// The log message of a logpoint: text with `{expression}` parts, each an expression of the
/// condition language shown as [`eval_text`] shows it. `{{` and `}}` stand for literal braces.
/// Built by [`parse_template`], printed back by `Display`.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Never two texts in a row, never an empty text.
    parts: Vec<Part>,
}

/// A part of a [`Template`].
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Literal text (braces already unescaped).
    Text(String),
    /// An `{expression}`.
    Expr(Expr),
}

/// Parses a log message template: text with `{expression}` parts (at most 64), `{{` and `}}`
/// for literal braces, at most [`CONDITION_TEXT_BYTES`] bytes in all. A `}` inside a string literal
/// of an expression does not end it. Errors give their position in the whole text.
pub fn parse_template(text: &str) -> Result<Template, ParseError> {
    if text.len() > CONDITION_TEXT_BYTES {
        return Err(error_at(
            text,
            CONDITION_TEXT_BYTES,
            format!("log message longer than {CONDITION_TEXT_BYTES} bytes"),
        ));
    }
    let b = text.as_bytes();
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut exprs = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => {
                literal.push('{');
                i += 2;
            }
            b'}' if b.get(i + 1) == Some(&b'}') => {
                literal.push('}');
                i += 2;
            }
            b'}' => {
                return Err(error_at(
                    text,
                    i,
                    "single '}' is not allowed (write '}}' for a literal brace)",
                ))
            }
            b'{' => {
                exprs += 1;
                if exprs > LOG_MESSAGE_PARTS {
                    return Err(error_at(
                        text,
                        i,
                        format!("more than {LOG_MESSAGE_PARTS} expressions in a log message"),
                    ));
                }
                let end = expr_end(b, i + 1);
                let e = template_expr(text, i, end)?;
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Expr(e));
                i = end + 1;
            }
            _ => {
                let next = text[i..].find(['{', '}']).map_or(text.len(), |j| i + j);
                literal.push_str(&text[i..next]);
                i = next;
            }
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Text(literal));
    }
    Ok(Template { parts })
}

/// Where the expression starting at byte `start` ends: the first `}` (or `{`, which no
/// expression holds) outside a string literal, or the end of the text. Strings are skipped as
/// the lexer reads them (a backslash escapes the next character, a newline ends an
/// unterminated one), so for any expression that parses, this is its true end.
fn expr_end(b: &[u8], start: usize) -> usize {
    let mut quote = None;
    let mut i = start;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(_) if c == b'\\' => i += 1,
            Some(q) if c == q || c == b'\n' => quote = None,
            Some(_) => {}
            None if c == b'{' || c == b'}' => return i,
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None => {}
        }
        i += 1;
    }
    b.len()
}

/// The expression of the `{` at byte `open`, which ends at byte `end` (a `}` when closed).
fn template_expr(text: &str, open: usize, end: usize) -> Result<Expr, ParseError> {
    let inner = &text[open + 1..end];
    let next = text.as_bytes().get(end).copied();
    if inner.trim_start_matches([' ', '\t', '\n', '\r']).is_empty() {
        let message = if next == Some(b'}') {
            "empty expression in '{}' (write '{{' for a literal brace)"
        } else {
            "unclosed '{' (write '{{' for a literal brace)"
        };
        return Err(error_at(text, open, message));
    }
    let at_end = match next {
        Some(b'}') => "expected a value, found '}'",
        Some(_) => "expected a value, found '{'",
        None => "unexpected end of log message",
    };
    match parse_text(inner, at_end) {
        Ok(e) if next == Some(b'}') => Ok(e),
        Ok(_) => Err(error_at(text, end, "expected '}'")),
        Err(e) => Err(error_at(text, open + 1 + e.byte, e.message)),
    }
}

impl Template {
    /// Its parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Whether an expression of it reads `result` or `exception`.
    pub fn reads_outcome(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Text(_) => false,
            Part::Expr(e) => e.reads_outcome(),
        })
    }

    /// The log message: the text with each expression's value as [`eval_text`] gives it, or
    /// `<error: message>` for one that cannot be evaluated; never fails. At most
    /// [`LOG_LINE_BYTES`] bytes, its closing `...` included when it is cut (on a character
    /// boundary). Each expression is evaluated as [`eval_text`] does, with a budget of
    /// [`CONDITION_STEPS`] steps of its own (not shared, so that one costly part does not starve
    /// the others), so rendering costs at most 64 such evaluations; none is evaluated once
    /// the message is already too long.
    pub fn render<V: CondValue>(&self, env: &Env<V>) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if out.len() > LOG_LINE_BYTES {
                break;
            }
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) => match eval_text(e, env) {
                    Ok(v) => out.push_str(&v),
                    Err(err) => {
                        out.push_str("<error: ");
                        out.push_str(&err.message);
                        out.push('>');
                    }
                },
            }
        }
        if out.len() > LOG_LINE_BYTES {
            let mut cut = LOG_LINE_BYTES - "...".len();
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str("...");
        }
        out
    }
}

/// Prints the template back as text that parses to the same template.
impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Text(t) => {
                    for c in t.chars() {
                        match c {
                            '{' => f.write_str("{{")?,
                            '}' => f.write_str("}}")?,
                            c => f.write_char(c)?,
                        }
                    }
                }
                Part::Expr(e) => write!(f, "{{{e}}}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::pickle;
    use crate::pickle::builder::P;

    fn json_env(outcome: Outcome<&Value>) -> (Value, Value, Outcome<&Value>) {
        let args = json!([150, [], {"x": -1, "label": "item-3", "tags": ["a", "b"]}, "hello", 2.5,
            null, true, [1, 2, 3], 7, -7]);
        let kwargs = json!({"label": "item-7", "n": 3, "ratio": 0.5});
        (args, kwargs, outcome)
    }

    fn env<'a>(args: &'a Value, kwargs: &'a Value, outcome: Outcome<&'a Value>) -> Env<&'a Value> {
        Env {
            args: Some(args.as_array().unwrap().iter().collect()),
            kwargs: Some(
                kwargs
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v))
                    .collect(),
            ),
            outcome,
        }
    }

    fn check(text: &str) -> Result<bool, String> {
        let (a, k, o) = json_env(Outcome::Pending);
        let e = parse(text).map_err(|e| e.to_string())?;
        eval(&e, &env(&a, &k, o)).map_err(|e| e.to_string())
    }

    #[test]
    fn strings_cost_steps_by_their_size_so_big_ones_stay_bounded() {
        let one_mib = json!(["a".repeat(1 << 20)]);
        let huge = json!(["a".repeat(64 << 20)]);
        let no_kwargs = json!({});
        let holds = |args: &Value, text: &str| {
            eval(
                &parse(text).unwrap(),
                &env(args, &no_kwargs, Outcome::Pending),
            )
        };
        // 1 MiB is 256 steps a read: a few reads are fine.
        assert_eq!(holds(&one_mib, "len(args[0]) == 1048576"), Ok(true));
        assert_eq!(
            holds(
                &one_mib,
                "args[0].startswith('a') and args[0].endswith('a')"
            ),
            Ok(true)
        );
        // Doubling it again and again runs out of budget instead of memory.
        let t0 = Instant::now();
        let grow = "len(args[0] + args[0] + args[0] + args[0] + args[0] + args[0] + args[0] \
                    + args[0] + args[0] + args[0] + args[0] + args[0] + args[0]) > 0";
        let e = holds(&one_mib, grow).unwrap_err();
        assert!(e.message.contains("step budget spent"), "{e}");
        // A string too large for the whole budget cannot be read at all.
        let e = holds(&huge, "args[0] == 'a'").unwrap_err();
        assert!(e.message.contains("a string of 67108864 bytes"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    /// Evaluated by `python3` on the same values (`type(x)` as `type(x).__name__`).
    const PYTHON_TABLE: &[(&str, bool)] = &[
        (
            "args[0] > 100 and kwargs[\"label\"].startswith(\"item-\")",
            true,
        ),
        ("args[0] > 200 or kwargs[\"n\"] == 3", true),
        ("len(args[1]) == 0", true),
        ("len(args[3]) == 5", true),
        ("len(args[2]) == 3", true),
        ("len(args) == 10", true),
        ("len(kwargs) == 3", true),
        ("type(args[0]) == \"int\"", true),
        ("type(args[4]) == \"float\"", true),
        ("type(args[3]) == \"str\"", true),
        ("type(args[1]) == \"list\"", true),
        ("type(args[2]) == \"dict\"", true),
        ("type(args[5]) == \"NoneType\"", true),
        ("type(args[6]) == \"bool\"", true),
        ("type(args) == \"tuple\"", true),
        ("args[0] % 2 == 1", false),
        ("args[8] % 2 == 1", true),
        ("args[9] % 2 == 1", true),
        ("args[9] % 4", true),
        ("args[9] // 2 == -4", true),
        ("args[8] // -2 == -4", true),
        ("-args[9] % 3 == 1", true),
        ("7.5 % 2 == 1.5", true),
        ("-7.5 % 2 == 0.5", true),
        ("7 // 2.0 == 3.0", true),
        ("args[0] / 4 == 37.5", true),
        ("1 + 2 * 3 == 7", true),
        ("(1 + 2) * 3 == 9", true),
        ("10 - 2 - 3 == 5", true),
        ("0 < args[8] < 10", true),
        ("0 < args[0] < 10", false),
        ("1 < 2 > 0", true),
        ("args[4] == 2.5", true),
        ("args[0] == 150.0", true),
        ("1 == 1.0000000000000002", false),
        ("args[5] is None", true),
        ("args[5] is not None", false),
        ("args[6] is True", true),
        ("args[6] == 1", true),
        ("args[6] + 1 == 2", true),
        ("not args[1]", true),
        ("not args[0]", false),
        ("args[1] or args[3]", true),
        ("args[1] and args[3]", false),
        ("\"item\" in kwargs[\"label\"]", true),
        ("\"label\" in kwargs", true),
        ("\"missing\" not in kwargs", true),
        ("2 in args[7]", true),
        ("2.0 in args[7]", true),
        ("5 in args[7]", false),
        ("\"x\" in args[2]", true),
        ("\"a\" in args[2][\"tags\"]", true),
        ("150 in args", true),
        ("\"hello\" in args", true),
        ("args[-1] == -7", true),
        ("args[7][-1] == 3", true),
        ("args[7][-3] == 1", true),
        ("args[3][0] == \"h\"", true),
        ("args[3][-1] == \"o\"", true),
        ("args[2][\"tags\"][1] == \"b\"", true),
        ("abs(args[9]) == 7", true),
        ("abs(-2.5) == 2.5", true),
        ("\"abc\" < \"abd\"", true),
        ("\"b\" > \"abc\"", true),
        ("\"\" < \"a\"", true),
        ("kwargs[\"label\"].endswith(\"-7\")", true),
        ("args[3] + \" world\" == \"hello world\"", true),
        ("not not args[0]", true),
        ("args[0] != 150", false),
        ("args[0] != 151", true),
        ("True and 0", false),
        ("0 or \"\"", false),
        ("None", false),
        ("\"s\"", true),
        ("0.0", false),
        ("-0.0 == 0", true),
        ("1e3 == 1000", true),
        ("1_000 == 1000", true),
        ("'it\\'s' == \"it's\"", true),
        ("\"\\x41\\u00e9\" == \"Aé\"", true),
        ("len(\"é€\") == 2", true),
        ("not 1 == 2", true),
        ("not (1 == 2) and 3 > 2", true),
        ("1 < 2 == 2 < 3", true),
        ("args[0] >= 150 >= 149", true),
        ("kwargs[\"ratio\"] * 2 == 1", true),
    ];

    #[test]
    fn evaluates_as_python_on_json() {
        for &(text, want) in PYTHON_TABLE {
            assert_eq!(check(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn language_specific_forms() {
        for (text, want) in [
            ("type(args[2]) == \"dict\" and args[2].x < 0", true),
            ("args[2].label.contains(\"m-\")", true),
            ("args[2].label.contains(\"zz\")", false),
            ("args[2].tags[0] == \"a\"", true),
            ("kwargs[\"label\"].contains(\"7\")", true),
            ("args[0] is not None and args[0] > 1", true),
            ("args[5] is None or args[5].x", true),
            ("False and args[99]", false),
            ("True or args[99]", true),
            ("args[-10] == 150", true),
            ("9223372036854775807 > 9.2e18", true),
            ("9007199254740993 == 9007199254740992.0", false),
            ("9007199254740993 > 9007199254740992.0", true),
        ] {
            assert_eq!(check(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn result_and_exception() {
        let (a, k, _) = json_env(Outcome::Pending);
        let r = json!({"ok": true, "items": [1]});
        let run = |text: &str, o: Outcome<&Value>| eval(&parse(text).unwrap(), &env(&a, &k, o));
        assert_eq!(
            run(
                "result.ok and len(result.items) == 1",
                Outcome::Returned(&r)
            ),
            Ok(true)
        );
        assert_eq!(run("exception is None", Outcome::Returned(&r)), Ok(true));
        assert_eq!(
            run("result is None", Outcome::Raised("ValueError".into())),
            Ok(true)
        );
        assert_eq!(
            run(
                "exception == \"ValueError\"",
                Outcome::Raised("ValueError".into())
            ),
            Ok(true)
        );
        let e = run("result is None", Outcome::Pending).unwrap_err();
        assert_eq!(e.message, "result: not available before the call returns");
        let none: Env<&Value> = Env {
            args: None,
            kwargs: None,
            outcome: Outcome::Pending,
        };
        let e = eval(&parse("args[0]").unwrap(), &none).unwrap_err();
        assert_eq!(e.message, "args: not available for this call");
    }

    #[test]
    fn eval_errors_name_the_sub_expression() {
        for (text, want) in [
            ("args[0].x > 1", "args[0].x: no attribute 'x' on int"),
            ("args[10] == 1", "args[10]: index 10 out of range (length 10)"),
            ("args[7][-4]", "args[7][-4]: index -4 out of range (length 3)"),
            ("kwargs[\"nope\"]", "kwargs[\"nope\"]: no key \"nope\" in kwargs"),
            ("args[2][\"y\"]", "args[2][\"y\"]: no key \"y\""),
            ("args[0] < \"a\"", "args[0] < \"a\": '<' not supported between int and str"),
            ("len(args[0])", "len(args[0]): object of type 'int' has no len()"),
            ("args[0][0]", "args[0][0]: 'int' object is not subscriptable"),
            ("args[7][\"a\"]", "args[7][\"a\"]: list indices must be integers, not str"),
            ("1 % 0", "1 % 0: division by zero"),
            ("args[1] == args[7]", "args[1] == args[7]: comparing list with list is not supported (compare their parts)"),
            ("args[0].startswith(\"1\")", "args[0].startswith(\"1\"): startswith() needs a str and a str argument, not int and str"),
            ("9223372036854775807 + 1", "9223372036854775807 + 1: integer overflow"),
            ("1 in args[0]", "1 in args[0]: argument of type 'int' is not iterable"),
            ("abs(\"x\")", "abs(\"x\"): bad operand type for abs(): 'str'"),
        ] {
            assert_eq!(check(text), Err(want.to_owned()), "{text}");
        }
    }

    #[test]
    fn parse_errors_with_their_columns() {
        for (text, msg, byte, column) in [
            ("(args[0] > 1", "expected ')'", 12, 13),
            ("args[0] > 1)", "unexpected ')'", 11, 12),
            ("args[0", "expected ']'", 6, 7),
            ("foo > 1", "unknown name 'foo': a condition reads args, kwargs, result or exception (functions: len, type, abs)", 0, 1),
            ("args.x.upper(1)", "unknown method 'upper' (only startswith, endswith and contains)", 7, 8),
            ("len args", "expected '(' after 'len'", 4, 5),
            ("", "empty condition", 0, 1),
            ("   ", "empty condition", 3, 4),
            ("args[0] >", "unexpected end of condition", 9, 10),
            ("args ! 1", "unexpected character '!'", 5, 6),
            ("args = 1", "'=' is not a comparison (use '==')", 5, 6),
            ("\"abc", "unterminated string", 0, 1),
            ("'a\\q'", "invalid escape in string", 2, 3),
            ("99999999999999999999", "integer literal too large", 0, 1),
            ("1e999", "float literal out of range", 0, 1),
            ("12ab", "invalid number", 2, 3),
            ("result is 3", "'is' compares only with None, True or False", 10, 11),
            ("args not 1", "expected 'in' after 'not'", 9, 10),
            ("and 1", "expected a value before 'and'", 0, 1),
            ("args.", "expected an attribute name after '.'", 5, 6),
            ("len()", "expected a value, found ')'", 4, 5),
            ("\"é\" == x", "unknown name 'x': a condition reads args, kwargs, result or exception (functions: len, type, abs)", 8, 8),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.message.as_str(), e.byte, e.column), (msg, byte, column), "{text}");
            assert_eq!(e.to_string(), format!("{msg} at column {column}"));
        }
    }

    #[test]
    fn bounds() {
        let long = format!("args[0] == \"{}\"", "a".repeat(CONDITION_TEXT_BYTES));
        let e = parse(&long).unwrap_err();
        assert_eq!(e.message, "condition longer than 4096 bytes");
        let ok = format!(
            "{}1{}",
            "(".repeat(CONDITION_DEPTH),
            ")".repeat(CONDITION_DEPTH)
        );
        assert_eq!(parse(&ok), Ok(Expr::Int(1)));
        let deep = format!(
            "{}1{}",
            "(".repeat(CONDITION_DEPTH + 1),
            ")".repeat(CONDITION_DEPTH + 1)
        );
        assert_eq!(parse(&deep).unwrap_err().message, too_deep());
        assert_eq!(parse(&"not ".repeat(100)).unwrap_err().message, too_deep());
        assert_eq!(parse(&"-".repeat(100)).unwrap_err().message, too_deep());
        // A long flat chain is a deep tree: refused by its height.
        let chain = vec!["1"; 100].join(" + ");
        assert_eq!(parse(&chain).unwrap_err().message, too_deep());
        let chain = vec!["1"; CONDITION_DEPTH].join(" + ");
        assert!(parse(&chain).is_ok());
        // The step budget.
        let (a, k, o) = json_env(Outcome::Pending);
        let env = env(&a, &k, o);
        let e = parse("1 + 1 + 1 == 3").unwrap();
        assert_eq!(eval_with_budget(&e, &env, 7), Ok(true));
        assert_eq!(
            eval_with_budget(&e, &env, 6).unwrap_err().message,
            "3: evaluation step budget spent"
        );
        let big = json!((0..20_000).collect::<Vec<_>>());
        let env = Env {
            args: Some(vec![&big]),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        let e = parse("-1 in args[0]").unwrap();
        assert_eq!(
            eval(&e, &env).unwrap_err().message,
            "-1 in args[0]: evaluation step budget spent"
        );
    }

    #[test]
    fn prints_back() {
        for text in [
            "args[0] > 100 and kwargs[\"label\"].startswith(\"item-\")",
            "not (a or b)"
                .replace("a", "args")
                .replace("b", "result")
                .as_str(),
            "(1 + 2) * -3 - (4 - 5) == 0",
            "(args or kwargs) and not result",
            "not not -(-1) in args",
            "(1 < 2) < 3",
            "\"a\\n\\\"\\x01\" + 'é' != str0"
                .replace("str0", "exception")
                .as_str(),
        ] {
            let e = parse(text).unwrap();
            assert_eq!(parse(&e.to_string()), Ok(e.clone()), "{text} -> {e}");
        }
        assert_eq!(parse("((1)+(2))*3").unwrap().to_string(), "(1 + 2) * 3");
        assert_eq!(parse("1 - (2 - 3)").unwrap().to_string(), "1 - (2 - 3)");
    }

    fn tree(hex: &str) -> Tree {
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        pickle::decode(&bytes, &pickle::Limits::default()).unwrap()
    }

    /// Point(-1, 2.5) of a class `Point` in `__main__`, protocol 4.
    const POINT: &str = "80049534000000000000008c085f5f6d61696e5f5f948c05506f696e749493942981947d94288c0178944affffffff8c01799447400400000000000075622e";
    /// {"k": [1, "two", None], 3: "three"}
    const DICT: &str =
        "80049520000000000000007d94288c016b945d94284b018c0374776f944e654b038c05746872656594752e";
    /// An instance of a class with `__slots__ = ('a',)`, a = 5, protocol 2.
    const SLOTTED: &str = "8002635f5f6d61696e5f5f0a536c6f747465640a7100298171014e7d710258010000006171034b0573867104622e";
    /// 10**30
    const BIG: &str = "80049510000000000000008a0d00000040eaed7446d09c2c9f0c2e";

    /// The decoded arguments of a call (a point, a dict, a slotted instance, a big int) and its
    /// JSON keyword argument `label`.
    fn pickled_call() -> ([Tree; 4], Value) {
        (
            [tree(POINT), tree(DICT), tree(SLOTTED), tree(BIG)],
            json!("item-1"),
        )
    }

    fn pickled_env<'a>(
        trees: &'a [Tree; 4],
        label: &'a Value,
        outcome: impl Fn(&'a [Tree; 4]) -> Outcome<Item<'a>>,
    ) -> Env<Item<'a>> {
        Env {
            args: Some(
                trees
                    .iter()
                    .map(|t| Item::Pickle(PickleValue::root(t)))
                    .collect(),
            ),
            kwargs: Some(vec![("label".to_owned(), Item::Json(label))]),
            outcome: outcome(trees),
        }
    }

    #[test]
    fn reads_decoded_pickles() {
        let (trees, label) = pickled_call();
        let env = pickled_env(&trees, &label, |_| Outcome::Pending);
        let run = |text: &str| eval(&parse(text).unwrap(), &env).map_err(|e| e.message);
        for (text, want) in [
            ("type(args[0]) == \"Point\" and args[0].x < 0", true),
            ("args[0].y == 2.5", true),
            ("args[0]", true),
            ("type(args[1]) == \"dict\" and len(args[1]) == 2", true),
            (
                "args[1][\"k\"][1].startswith(\"tw\") and args[1][\"k\"][-1] is None",
                true,
            ),
            (
                "args[1][3] == \"three\" and \"k\" in args[1] and 4 not in args[1]",
                true,
            ),
            ("2 in args[1][\"k\"] or 1 in args[1][\"k\"]", true),
            ("type(args[2]) == \"Slotted\" and args[2].a == 5", true),
            (
                "type(args[3]) == \"int\" and args[3] and args[3] != 1",
                true,
            ),
            ("kwargs[\"label\"].endswith(\"-1\")", true),
        ] {
            assert_eq!(run(text), Ok(want), "{text}");
        }
        assert_eq!(
            run("args[0].z"),
            Err("args[0].z: no attribute 'z' on Point".into())
        );
        assert_eq!(run("args[3] > 1"), Err(format!("args[3] > 1: {BIG_INT}")));
    }

    #[test]
    fn reads_outcome() {
        for (text, want) in [
            ("args[0] > 1 and kwargs[\"n\"]", false),
            ("\"result\" in kwargs", false),
            ("-abs(len(args))", false),
            ("result", true),
            ("exception is None", true),
            ("len(result.items) > 0", true),
            ("args[0].startswith(exception)", true),
            ("args[result]", true),
            ("1 < 2 < -result", true),
            ("not (args or exception)", true),
            ("type(args[0] + result[1]) == \"int\"", true),
        ] {
            assert_eq!(parse(text).unwrap().reads_outcome(), want, "{text}");
        }
        for (text, want) in [
            ("", false),
            ("result and exception", false),
            ("{args} {{result}}", false),
            ("n={args[0]} r={result}", true),
            ("{exception}", true),
        ] {
            assert_eq!(
                parse_template(text).unwrap().reads_outcome(),
                want,
                "{text}"
            );
        }
    }

    /// The length of `text` in characters.
    fn chars_of(text: &str) -> usize {
        text.chars().count()
    }

    #[test]
    fn display_of_json() {
        for (v, want) in [
            (json!("it's \"raw\"\n"), "it's \"raw\"\n"),
            (json!(""), ""),
            (json!(null), "null"),
            (json!(true), "true"),
            (json!(-7), "-7"),
            (json!(2.5), "2.5"),
            (json!([]), "[]"),
            (
                json!({"a": [1, 2.5, "é\n"], "b": null, "c": {"d": "x"}}),
                "{\"a\":[1,2.5,\"é\\n\"],\"b\":null,\"c\":{\"d\":\"x\"}}",
            ),
        ] {
            assert_eq!((&v).display(), want, "{v}");
            assert_eq!((&v).unreadable(), None);
        }
        // 10**30 as a JSON number keeps its digits.
        let big: Value = serde_json::from_str("1000000000000000000000000000000").unwrap();
        assert_eq!((&big).display(), "1000000000000000000000000000000");
        // A str of exactly the limit is whole; one more character is cut.
        let s = json!("é".repeat(LOG_VALUE_CHARS));
        assert_eq!((&s).display(), "é".repeat(LOG_VALUE_CHARS));
        let s = json!("é".repeat(LOG_VALUE_CHARS + 1));
        assert_eq!(
            (&s).display(),
            format!("{}...", "é".repeat(LOG_VALUE_CHARS))
        );
        // A huge value: the serializer stops early, cut inside a character or not.
        for v in [
            json!((0..1_000_000).collect::<Vec<_>>()),
            json!(vec!["€"; 100_000]),
        ] {
            let start = Instant::now();
            let shown = (&v).display();
            assert!(start.elapsed() < Duration::from_millis(500));
            assert_eq!(chars_of(&shown), LOG_VALUE_CHARS + 3);
            assert!(shown.ends_with("..."));
            let whole = v.to_string();
            assert!(whole.starts_with(shown.trim_end_matches("...")));
        }
    }

    #[test]
    fn display_of_decoded_pickles() {
        for (hex, want) in [
            (POINT, "Point(x=-1, y=2.5)"),
            (DICT, "{'k': [1, 'two', None], 3: 'three'}"),
            (SLOTTED, "Slotted(a=5)"),
            (BIG, "1000000000000000000000000000000"),
        ] {
            let t = tree(hex);
            let v = PickleValue::root(&t);
            assert_eq!(v.display(), want);
            assert_eq!(v.unreadable(), None);
            assert_eq!(Item::Pickle(v).display(), want);
        }
        // A str is its own text; inside a container it is quoted.
        let t = tree(DICT);
        let two = PickleValue::root(&t)
            .key(Key::Str("k"))
            .and_then(|l| l.element(1))
            .unwrap();
        assert_eq!(two.display(), "two");
        let decoded = |bytes: &[u8]| pickle::decode(bytes, &pickle::Limits::default()).unwrap();
        let t = decoded(&P::new().str("it's \"é\"\n").done());
        assert_eq!(PickleValue::root(&t).display(), "it's \"é\"\n");
        // A lone surrogate reads as U+FFFD, as `str_of` has it.
        let t = decoded(&P::new().op(b"X\x05\x00\x00\x00a\xed\xa0\x80b.").done());
        let v = PickleValue::root(&t);
        assert_eq!(v.display(), "a\u{fffd}b");
        assert_eq!(Some(v.display()), v.to_str());
        // Long strs: only the head is read.
        let t = decoded(&P::new().str(&"é".repeat(1_000_000)).done());
        let start = Instant::now();
        let shown = PickleValue::root(&t).display();
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(shown, format!("{}...", "é".repeat(LOG_VALUE_CHARS)));
        let t = decoded(&P::new().str(&"x".repeat(LOG_VALUE_CHARS)).done());
        assert_eq!(PickleValue::root(&t).display(), "x".repeat(LOG_VALUE_CHARS));
        // A value shared through the memo, exponentially large when shown: cut, in bounded
        // time.
        let mut p = P::new();
        let s = p.str(&"y".repeat(400)).put();
        let mut top = p.list_of(s, 1);
        for _ in 0..6 {
            top = p.list_of(top, 100);
        }
        let t = decoded(&p.done());
        let start = Instant::now();
        let shown = PickleValue::root(&t).display();
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(chars_of(&shown), LOG_VALUE_CHARS + 3);
        assert!(shown.starts_with("[[[[[[['yyyy") && shown.ends_with("..."));
        // Nested deeper than the renderer goes: said, not shown.
        let t = decoded(&P::new().op(&[b']'; 300]).op(&[b'a'; 299]).done());
        assert_eq!(
            PickleValue::root(&t).display(),
            "<unavailable: PickleError: value nests deeper than 200 levels>"
        );
    }

    const MISSING: &str = "payload missing from the store";
    const BROKEN: &str = "<unavailable: PickleError: pickle truncated at byte 3>";

    #[test]
    fn unreadable_values_fail_where_they_are_read() {
        let n = json!(150);
        let env = Env {
            args: Some(vec![Item::Json(&n), Item::Unreadable(MISSING)]),
            kwargs: Some(vec![("k".to_owned(), Item::Unreadable(BROKEN))]),
            outcome: Outcome::Returned(Item::Unreadable(MISSING)),
        };
        let run = |text: &str| eval(&parse(text).unwrap(), &env).map_err(|e| e.message);
        let text = |text: &str| eval_text(&parse(text).unwrap(), &env).map_err(|e| e.message);
        let missing = format!("args[1]: unreadable value ({MISSING})");
        for text in [
            "args[1]",
            "args[1] == 1",
            "args[1] is None",
            "not args[1]",
            "args[1].x",
            "args[1][0]",
            "args[1][\"k\"]",
            "len(args[1])",
            "type(args[1])",
            "abs(args[1])",
            "-args[1]",
            "args[1] + 1",
            "args[1].startswith(\"a\")",
            "\"a\" in args[1]",
            "args[0] > 1 and args[1]",
        ] {
            assert_eq!(run(text), Err(missing.clone()), "{text}");
        }
        assert_eq!(
            run("1 in args"),
            Err(format!("1 in args: unreadable value ({MISSING})"))
        );
        assert_eq!(
            run("kwargs[\"k\"] == 1"),
            Err(format!("kwargs[\"k\"]: unreadable value ({BROKEN})"))
        );
        assert_eq!(
            run("result"),
            Err(format!("result: unreadable value ({MISSING})"))
        );
        // What does not read the value still works.
        for text in [
            "args[0] == 150",
            "150 in args",
            "len(args) == 2",
            "\"k\" in kwargs",
            "len(kwargs) == 1",
            "exception is None",
            "True or args[1]",
        ] {
            assert_eq!(run(text), Ok(true), "{text}");
        }
        // As text.
        assert_eq!(text("args[1]"), Err(missing.clone()));
        assert_eq!(text("args"), Err(missing.clone()));
        assert_eq!(
            text("kwargs"),
            Err(format!("kwargs[\"k\"]: unreadable value ({BROKEN})"))
        );
        assert_eq!(text("args[0]"), Ok("150".to_owned()));
        let t = parse_template("{args[0]} then {args[1]}").unwrap();
        assert_eq!(t.render(&env), format!("150 then <error: {missing}>"));
        // The item itself.
        let u = Item::Unreadable(MISSING);
        assert_eq!(u.display(), format!("<unreadable: {MISSING}>"));
        assert_eq!(u.unreadable(), Some(MISSING.to_owned()));
        assert_eq!(Item::Json(&n).unreadable(), None);
        // A long reason is cut in the message.
        let long = "r".repeat(5000);
        let env = Env {
            args: Some(vec![Item::Unreadable(&long)]),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        let e = eval(&parse("args[0]").unwrap(), &env).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "args[0]: unreadable value ({}...)",
                "r".repeat(LOG_VALUE_CHARS)
            )
        );
    }

    fn text_of(text: &str) -> Result<String, String> {
        let (a, k, o) = json_env(Outcome::Pending);
        eval_text(&parse(text).unwrap(), &env(&a, &k, o)).map_err(|e| e.message)
    }

    #[test]
    fn values_as_text_on_json() {
        // As Python's f"{...}" shows the same values (JSON containers as compact JSON).
        for (text, want) in [
            ("None", "None"),
            ("True", "True"),
            ("False", "False"),
            ("args[5]", "None"),
            ("args[6]", "True"),
            ("args[0]", "150"),
            ("-args[9]", "7"),
            ("args[4]", "2.5"),
            ("args[0] / 4", "37.5"),
            ("args[0] / 3", "50.0"),
            ("1 / 3", "0.3333333333333333"),
            ("0.1 + 0.2", "0.30000000000000004"),
            ("1e16", "1e+16"),
            ("1e22", "1e+22"),
            ("123456789012345.6", "123456789012345.6"),
            ("1e-5", "1e-05"),
            ("0.0001", "0.0001"),
            ("-0.0", "-0.0"),
            ("2.0 * 3", "6.0"),
            ("args[3]", "hello"),
            ("kwargs[\"label\"] + \" it's\"", "item-7 it's"),
            ("\"\"", ""),
            ("args[1]", "[]"),
            ("args[7]", "[1,2,3]"),
            (
                "args[2]",
                "{\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}",
            ),
            ("args[2].tags", "[\"a\",\"b\"]"),
            ("len(args)", "10"),
            ("type(args[0])", "int"),
            ("args[0] > 100", "True"),
            ("args[1] or \"empty\"", "empty"),
            ("args[3] and args[1]", "[]"),
            ("9223372036854775807", "9223372036854775807"),
            (
                "args",
                "(150, [], {\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}, 'hello', \
                 2.5, None, True, [1,2,3], 7, -7)",
            ),
            ("kwargs", "{'label': 'item-7', 'n': 3, 'ratio': 0.5}"),
        ] {
            assert_eq!(text_of(text), Ok(want.to_owned()), "{text}");
        }
        assert_eq!(
            text_of("args[10]"),
            Err("args[10]: index 10 out of range (length 10)".to_owned())
        );
    }

    #[test]
    fn tuples_and_dicts_as_python_shows_them() {
        let texts = |args: Vec<Value>, kwargs: Vec<(&str, Value)>| {
            let env = Env {
                args: Some(args.iter().collect()),
                kwargs: Some(kwargs.iter().map(|(k, v)| ((*k).to_owned(), v)).collect()),
                outcome: Outcome::Pending,
            };
            (
                eval_text(&parse("args").unwrap(), &env).unwrap(),
                eval_text(&parse("kwargs").unwrap(), &env).unwrap(),
            )
        };
        assert_eq!(texts(vec![], vec![]), ("()".to_owned(), "{}".to_owned()));
        assert_eq!(
            texts(vec![json!(1)], vec![("it's", json!("x"))]),
            ("(1,)".to_owned(), "{\"it's\": 'x'}".to_owned())
        );
        // Python's repr of str: quotes chosen as Python does, escapes of the unprintable.
        assert_eq!(
            texts(
                vec![
                    json!("it's"),
                    json!("a\"b'c"),
                    json!("tab\there\n"),
                    json!("\u{200b}é\u{7f}"),
                    json!(0.1),
                    json!(1e16)
                ],
                vec![]
            )
            .0,
            "(\"it's\", 'a\"b\\'c', 'tab\\there\\n', '\\u200bé\\x7f', 0.1, 1e+16)"
        );
        // Long elements are cut, and so is the whole.
        let (args, kwargs) = texts(
            vec![json!("é".repeat(3000)), json!(2)],
            vec![("k", json!("é".repeat(3000)))],
        );
        assert_eq!(args, format!("('{}...", "é".repeat(LOG_VALUE_CHARS - 2)));
        assert_eq!(
            kwargs,
            format!("{{'k': '{}...", "é".repeat(LOG_VALUE_CHARS - 7))
        );
        // Many arguments: only those shown are read, each a step.
        let many: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
        let start = Instant::now();
        let (args, _) = texts(many, vec![]);
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(chars_of(&args), LOG_VALUE_CHARS + 3);
        assert!(args.starts_with("(0, 1, 2, 3, ") && args.ends_with("..."));
        // The step budget of `eval`.
        let big = json!((0..20_000).collect::<Vec<_>>());
        let env = Env {
            args: Some(vec![&big]),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        assert_eq!(
            eval_text(&parse("-1 in args[0]").unwrap(), &env)
                .unwrap_err()
                .message,
            "-1 in args[0]: evaluation step budget spent"
        );
    }

    #[test]
    fn values_as_text_on_decoded_pickles() {
        let (trees, label) = pickled_call();
        let env = pickled_env(&trees, &label, |t| {
            Outcome::Returned(Item::Pickle(PickleValue::root(&t[1])))
        });
        let run = |text: &str| eval_text(&parse(text).unwrap(), &env).map_err(|e| e.message);
        for (text, want) in [
            ("args[0]", "Point(x=-1, y=2.5)"),
            ("args[0].x", "-1"),
            ("args[0].y * 2", "5.0"),
            ("args[1]", "{'k': [1, 'two', None], 3: 'three'}"),
            ("args[1][\"k\"]", "[1, 'two', None]"),
            ("args[1][\"k\"][1]", "two"),
            ("args[1][\"k\"][2]", "None"),
            ("args[1][3]", "three"),
            ("args[2]", "Slotted(a=5)"),
            ("args[3]", "1000000000000000000000000000000"),
            ("type(args[3])", "int"),
            ("result[3]", "three"),
            ("exception", "None"),
            (
                "args",
                "(Point(x=-1, y=2.5), {'k': [1, 'two', None], 3: 'three'}, Slotted(a=5), \
                 1000000000000000000000000000000)",
            ),
            ("kwargs", "{'label': 'item-1'}"),
        ] {
            assert_eq!(run(text), Ok(want.to_owned()), "{text}");
        }
        // A pickled str inside `args` is quoted as Python would.
        let s = pickle::decode(&P::new().str("it's").done(), &pickle::Limits::default()).unwrap();
        let env = Env {
            args: Some(vec![Item::Pickle(PickleValue::root(&s))]),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        assert_eq!(
            eval_text(&parse("args").unwrap(), &env),
            Ok("(\"it's\",)".to_owned())
        );
    }

    #[test]
    fn templates_parse_into_parts() {
        let x = |t: &str| Part::Expr(parse(t).unwrap());
        let text = |t: &str| Part::Text(t.to_owned());
        for (src, want) in [
            ("", vec![]),
            ("plain text", vec![text("plain text")]),
            ("{args[0]}", vec![x("args[0]")]),
            (
                "x = {args[0]}, y = {kwargs[\"a}\"]}!",
                vec![
                    text("x = "),
                    x("args[0]"),
                    text(", y = "),
                    x("kwargs[\"a}\"]"),
                    text("!"),
                ],
            ),
            (
                "{{literal}} and {{{ args[0] + 1 }}}",
                vec![text("{literal} and {"), x("args[0] + 1"), text("}")],
            ),
            ("{'}'}{\"{\"}", vec![x("'}'"), x("\"{\"")]),
            ("{'\\'}'}", vec![x("\"'}\"")]),
            ("{\"\\\\\"}}}", vec![x("'\\\\'"), text("}")]),
            ("é{len(args)}é", vec![text("é"), x("len(args)"), text("é")]),
            ("{\nresult\n}", vec![x("result")]),
        ] {
            let t = parse_template(src).unwrap();
            assert_eq!(t.parts(), &want[..], "{src}");
            assert_eq!(
                parse_template(&t.to_string()),
                Ok(t.clone()),
                "{src} -> {t}"
            );
        }
        for (src, printed) in [
            ("{ args[0]+1 }{{x}}", "{args[0] + 1}{{x}}"),
            ("a {'}'} b", "a {\"}\"} b"),
            ("}}{{", "}}{{"),
            ("{(result)}", "{result}"),
        ] {
            assert_eq!(parse_template(src).unwrap().to_string(), printed);
        }
        let max = "{args}".repeat(64);
        assert_eq!(parse_template(&max).unwrap().parts().len(), 64);
        let long = "a".repeat(CONDITION_TEXT_BYTES);
        assert_eq!(parse_template(&long).unwrap().parts(), &[text(&long)]);
    }

    #[test]
    fn template_errors_with_their_columns() {
        let unknown = "unknown name 'foo': a condition reads args, kwargs, result or exception \
                       (functions: len, type, abs)";
        for (src, msg, byte, column) in [
            ("value: {args[0]", "expected '}'", 15, 16),
            ("value: {args[0] {args[1]}", "expected '}'", 16, 17),
            (
                "a } b",
                "single '}' is not allowed (write '}}' for a literal brace)",
                2,
                3,
            ),
            (
                "{args}}",
                "single '}' is not allowed (write '}}' for a literal brace)",
                6,
                7,
            ),
            (
                "a {} b",
                "empty expression in '{}' (write '{{' for a literal brace)",
                2,
                3,
            ),
            (
                "a { \n } b",
                "empty expression in '{}' (write '{{' for a literal brace)",
                2,
                3,
            ),
            ("a {", "unclosed '{' (write '{{' for a literal brace)", 2, 3),
            (
                "a { {args}",
                "unclosed '{' (write '{{' for a literal brace)",
                2,
                3,
            ),
            ("x = {foo}", unknown, 5, 6),
            ("é = {args[0] >}", "expected a value, found '}'", 15, 15),
            ("ok {args[0]} {len(}", "expected a value, found '}'", 18, 19),
            (
                "{args[0] + {args[1]}",
                "expected a value, found '{'",
                11,
                12,
            ),
            ("{args[0] +", "unexpected end of log message", 10, 11),
            ("{args[0] = 1}", "'=' is not a comparison (use '==')", 9, 10),
            ("{\"abc}", "unterminated string", 1, 2),
            ("{'a\\q'}", "invalid escape in string", 3, 4),
            ("{(args[0]}", "expected ')'", 9, 10),
            ("{args ! 1}", "unexpected character '!'", 6, 7),
            (
                "{args[0] is the value",
                unknown.replace("'foo'", "'the'").as_str(),
                12,
                13,
            ),
            (
                "{args[0] is 3}",
                "'is' compares only with None, True or False",
                12,
                13,
            ),
            ("{args[0] 1}", "unexpected 1", 9, 10),
            ("{a {args}}", unknown.replace("'foo'", "'a'").as_str(), 1, 2),
        ] {
            let e = parse_template(src).unwrap_err();
            assert_eq!(
                (e.message.as_str(), e.byte, e.column),
                (msg, byte, column),
                "{src}"
            );
            assert_eq!(e.to_string(), format!("{msg} at column {column}"));
        }
        let long = "a".repeat(CONDITION_TEXT_BYTES + 1);
        let e = parse_template(&long).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.byte, e.column),
            ("log message longer than 4096 bytes", 4096, 4097)
        );
        let e = parse_template(&"{args}".repeat(65)).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.byte, e.column),
            ("more than 64 expressions in a log message", 384, 385)
        );
        let deep = format!(
            "{{{}1{}}}",
            "(".repeat(CONDITION_DEPTH + 1),
            ")".repeat(CONDITION_DEPTH + 1)
        );
        let e = parse_template(&deep).unwrap_err();
        let inner = parse(&deep[1..deep.len() - 1]).unwrap_err();
        assert_eq!(
            (e.message, e.byte, e.column),
            (too_deep(), inner.byte + 1, inner.column + 1)
        );
    }

    #[test]
    fn templates_render_on_json() {
        let (a, k, _) = json_env(Outcome::Pending);
        let r = json!({"ok": true});
        let render =
            |src: &str, o: Outcome<&Value>| parse_template(src).unwrap().render(&env(&a, &k, o));
        let p = Outcome::Pending;
        assert_eq!(render("", p.clone()), "");
        assert_eq!(render("just text {{}}", p.clone()), "just text {}");
        assert_eq!(
            render(
                "n={args[0]} label={kwargs['label']} r={args[0] / 4} ok={args[0] > 100} \
                 x={args[2].x} {{braces}} none={args[5]}",
                p.clone()
            ),
            "n=150 label=item-7 r=37.5 ok=True x=-1 {braces} none=None"
        );
        assert_eq!(
            render("missing={args[99]} after", p.clone()),
            "missing=<error: args[99]: index 99 out of range (length 10)> after"
        );
        assert_eq!(
            render("{result}", p.clone()),
            "<error: result: not available before the call returns>"
        );
        assert_eq!(
            render("{result} {exception}", Outcome::Returned(&r)),
            "{\"ok\":true} None"
        );
        assert_eq!(
            render("{result} {exception}", Outcome::Raised("KeyError".into())),
            "None KeyError"
        );
        assert_eq!(
            render("{args[7]} of {len(args)}: {args}", p),
            "[1,2,3] of 10: (150, [], {\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}, \
             'hello', 2.5, None, True, [1,2,3], 7, -7)"
        );
    }

    #[test]
    fn templates_render_on_decoded_pickles() {
        let point = tree(POINT);
        let dict = tree(DICT);
        let env = Env {
            args: Some(vec![
                Item::Pickle(PickleValue::root(&point)),
                Item::Pickle(PickleValue::root(&dict)),
                Item::Unreadable(MISSING),
            ]),
            kwargs: Some(vec![]),
            outcome: Outcome::Raised("ValueError".into()),
        };
        let t = parse_template(
            "p={args[0]} x={args[0].x} k={args[1]['k']} two={args[1]['k'][1]} \
             e={exception} r={result} u={args[2]} kw={kwargs}",
        )
        .unwrap();
        assert_eq!(
            t.render(&env),
            format!(
                "p=Point(x=-1, y=2.5) x=-1 k=[1, 'two', None] two=two e=ValueError r=None \
                 u=<error: args[2]: unreadable value ({MISSING})> kw={{}}"
            )
        );
    }

    #[test]
    fn rendered_messages_are_capped() {
        // Values of two-byte characters: the cut falls on a character boundary.
        let long = json!("é".repeat(5000));
        let env = Env {
            args: Some(vec![&long]),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        let t = parse_template(&"{args[0]}|".repeat(64)).unwrap();
        let start = Instant::now();
        let out = t.render(&env);
        assert!(start.elapsed() < Duration::from_millis(500));
        assert!(out.len() <= LOG_LINE_BYTES && out.len() >= LOG_LINE_BYTES - 4);
        assert!(out.ends_with("...") && out.starts_with("é"));
        assert_eq!(
            out.trim_end_matches("..."),
            &format!("{}...|", "é".repeat(LOG_VALUE_CHARS)).repeat(3)[..out.len() - 3]
        );
        // Exactly at the cap, one byte over, and over with the cut inside a character.
        let values = [
            json!("c".repeat(9)),
            json!("c".repeat(10)),
            json!(format!("x{}", "é".repeat(5))),
        ];
        let env = Env {
            args: Some(values.iter().collect()),
            kwargs: None,
            outcome: Outcome::Pending,
        };
        let a = "a".repeat(LOG_LINE_BYTES - 9);
        let render = |i: usize| {
            let t = parse_template(&format!("{a}{{args[{i}]}}")).unwrap();
            t.render(&env)
        };
        assert_eq!(render(0), format!("{a}{}", "c".repeat(9)));
        assert_eq!(render(0).len(), LOG_LINE_BYTES);
        assert_eq!(render(1), format!("{a}cccccc..."));
        assert_eq!(render(1).len(), LOG_LINE_BYTES);
        assert_eq!(render(2), format!("{a}xéé..."));
        let text = "b".repeat(LOG_LINE_BYTES);
        assert_eq!(parse_template(&text).unwrap().render(&env), text);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e20..1e20f64).prop_map(|x| json!(x)),
            "\\PC{0,12}".prop_map(Value::String),
            // Values too long to show whole.
            Just(json!("é".repeat(3000))),
            Just(json!((0..3000).collect::<Vec<_>>())),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// How an argument reaches the evaluator: as JSON, as the decoded pickle of the same
    /// value, or unreadable.
    #[derive(Debug, Clone, Copy)]
    enum Form {
        Json,
        Pickle,
        Unreadable,
    }

    fn arb_form() -> impl Strategy<Value = Form> {
        prop_oneof![
            4 => Just(Form::Json),
            4 => Just(Form::Pickle),
            1 => Just(Form::Unreadable),
        ]
    }

    /// Arguments, keyword arguments and a result, each in its form.
    type Call = (
        Vec<(Value, Form)>,
        Vec<(String, Value, Form)>,
        Option<(Value, Form)>,
    );

    fn arb_call() -> impl Strategy<Value = Call> {
        (
            prop::collection::vec((arb_json(), arb_form()), 0..5),
            prop::collection::vec(("[a-z]{1,3}", arb_json(), arb_form()), 0..4),
            prop::option::of((arb_json(), arb_form())),
        )
    }

    /// The decoded pickle of each value in the pickle form (`None` for the others), in the
    /// order [`call_env`] takes them.
    fn call_trees(call: &Call) -> Vec<Option<Tree>> {
        let (args, kwargs, result) = call;
        let tree = |v: &Value, f: &Form| {
            matches!(f, Form::Pickle).then(|| {
                let bytes = crate::pickle_write::dumps(v);
                pickle::decode(&bytes, &pickle::Limits::default()).unwrap()
            })
        };
        args.iter()
            .map(|(v, f)| tree(v, f))
            .chain(kwargs.iter().map(|(_, v, f)| tree(v, f)))
            .chain(result.iter().map(|(v, f)| tree(v, f)))
            .collect()
    }

    fn call_env<'a>(call: &'a Call, trees: &'a [Option<Tree>]) -> Env<Item<'a>> {
        let (args, kwargs, result) = call;
        let mut trees = trees.iter();
        let mut item = |v: &'a Value, f: Form| {
            let t = trees.next().unwrap();
            match (f, t) {
                (Form::Pickle, Some(t)) => Item::Pickle(PickleValue::root(t)),
                (Form::Unreadable, _) => Item::Unreadable(MISSING),
                _ => Item::Json(v),
            }
        };
        let args = args.iter().map(|(v, f)| item(v, *f)).collect();
        let kwargs = kwargs
            .iter()
            .map(|(k, v, f)| (k.clone(), item(v, *f)))
            .collect();
        let outcome = match result {
            Some((v, f)) => Outcome::Returned(item(v, *f)),
            None => Outcome::Raised("ValueError".into()),
        };
        Env {
            args: Some(args),
            kwargs: Some(kwargs),
            outcome,
        }
    }

    /// A template of these parts: texts in a row joined, empty ones left out, as parsed.
    fn template_of(parts: Vec<Part>) -> Template {
        let mut out: Vec<Part> = Vec::new();
        for p in parts {
            match (out.last_mut(), p) {
                (_, Part::Text(t)) if t.is_empty() => {}
                (Some(Part::Text(a)), Part::Text(t)) => a.push_str(&t),
                (_, p) => out.push(p),
            }
        }
        Template { parts: out }
    }

    fn arb_template() -> impl Strategy<Value = Template> {
        let part = prop_oneof![
            2 => any::<String>().prop_map(Part::Text),
            3 => arb_text_expr().prop_map(Part::Expr),
        ];
        prop::collection::vec(part, 0..20).prop_map(template_of)
    }

    /// Expressions of every form, and more often ones that read the call's values.
    fn arb_text_expr() -> impl Strategy<Value = Expr> {
        let readable = prop_oneof![
            Just("args"),
            Just("kwargs"),
            Just("result"),
            Just("args[0]"),
            Just("args[-1]"),
            Just("args[0][0]"),
            Just("len(args[1])"),
            Just("type(result)"),
            Just("kwargs[\"a\"]"),
        ]
        .prop_map(|t| parse(t).unwrap());
        prop_oneof![1 => arb_expr(), 2 => readable]
    }

    /// Evaluates `e` as text within `steps` steps: the answer and the steps left.
    fn text_within(
        e: &Expr,
        env: &Env<Item<'_>>,
        steps: usize,
    ) -> (Result<String, EvalError>, usize) {
        let mut ev = Evaluator { env, steps };
        let r = ev.eval(e).and_then(|v| ev.text(e, &v));
        (r, ev.steps)
    }

    fn arb_expr() -> impl Strategy<Value = Expr> {
        let leaf = prop_oneof![
            Just(Expr::None),
            any::<bool>().prop_map(Expr::Bool),
            (0..=i64::MAX).prop_map(Expr::Int),
            (0.0..1e300f64).prop_map(Expr::Float),
            any::<String>().prop_map(Expr::Str),
            prop_oneof![
                Just(Name::Args),
                Just(Name::Kwargs),
                Just(Name::Result),
                Just(Name::Exception)
            ]
            .prop_map(Expr::Name),
        ];
        leaf.prop_recursive(6, 48, 3, |inner| {
            let b = |e| Box::new(e);
            let arith = prop_oneof![
                Just(ArithOp::Add),
                Just(ArithOp::Sub),
                Just(ArithOp::Mul),
                Just(ArithOp::Div),
                Just(ArithOp::FloorDiv),
                Just(ArithOp::Mod)
            ];
            let cmp = prop_oneof![
                Just(CmpOp::Eq),
                Just(CmpOp::Ne),
                Just(CmpOp::Lt),
                Just(CmpOp::Le),
                Just(CmpOp::Gt),
                Just(CmpOp::Ge),
                Just(CmpOp::In),
                Just(CmpOp::NotIn)
            ];
            let func = prop_oneof![Just(Func::Len), Just(Func::Type), Just(Func::Abs)];
            let method = prop_oneof![
                Just(Method::StartsWith),
                Just(Method::EndsWith),
                Just(Method::Contains)
            ];
            prop_oneof![
                (inner.clone(), "[a-z_][a-z0-9_]{0,5}")
                    .prop_filter("keyword", |(_, n)| !matches!(
                        n.as_str(),
                        "and" | "or" | "not" | "in" | "is"
                    ))
                    .prop_map(move |(x, n)| Expr::Attr(b(x), n)),
                (inner.clone(), inner.clone()).prop_map(move |(x, k)| Expr::Index(b(x), b(k))),
                (func, inner.clone()).prop_map(move |(f, x)| Expr::Call(f, b(x))),
                (inner.clone(), method, inner.clone()).prop_map(move |(x, m, a)| Expr::Method(
                    b(x),
                    m,
                    b(a)
                )),
                inner.clone().prop_map(move |x| Expr::Neg(b(x))),
                inner.clone().prop_map(move |x| Expr::Not(b(x))),
                (inner.clone(), inner.clone()).prop_map(move |(x, y)| Expr::And(b(x), b(y))),
                (inner.clone(), inner.clone()).prop_map(move |(x, y)| Expr::Or(b(x), b(y))),
                (arith, inner.clone(), inner.clone()).prop_map(move |(op, x, y)| Expr::Arith(
                    op,
                    b(x),
                    b(y)
                )),
                (
                    inner.clone(),
                    prop::collection::vec((cmp, inner.clone()), 1..3),
                    any::<bool>()
                )
                    .prop_map(move |(x, mut rest, is)| {
                        if is {
                            rest.push((CmpOp::IsNot, Expr::None));
                        }
                        Expr::Compare(b(x), rest)
                    }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_text_never_panics(text in "\\PC{0,200}|[a-z0-9()\\[\\].,'\"<>=!%*/+ -]{0,300}") {
            let start = Instant::now();
            if let Ok(e) = parse(&text) {
                let (a, k, o) = json_env(Outcome::Pending);
                let _ = eval(&e, &env(&a, &k, o));
            }
            prop_assert!(start.elapsed() < Duration::from_secs(1));
        }

        #[test]
        fn printed_trees_parse_back(e in arb_expr()) {
            let text = e.to_string();
            prop_assert_eq!(parse(&text), Ok(e), "{}", text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_template_text_never_panics(
            text in "\\PC{0,200}|[a-z0-9(){}\\[\\].,'\"<>=!%*/+ \\\\-]{0,300}|\
                     (\\{|\\}|\\{\\{|\\}\\}|args|kwargs|result|\\[0\\]|'|\"|\\\\| |\\+|1|len\\(|\\)){0,40}"
        ) {
            let start = Instant::now();
            match parse_template(&text) {
                Ok(t) => {
                    let printed = t.to_string();
                    prop_assert_eq!(parse_template(&printed), Ok(t.clone()), "{}", printed);
                    let (a, k, o) = json_env(Outcome::Pending);
                    prop_assert!(t.render(&env(&a, &k, o)).len() <= LOG_LINE_BYTES);
                }
                Err(e) => {
                    prop_assert!(e.byte <= text.len());
                    if let Some(head) = text.get(..e.byte) {
                        prop_assert_eq!(e.column, head.chars().count() + 1);
                    }
                }
            }
            prop_assert!(start.elapsed() < Duration::from_secs(1));
        }

        #[test]
        fn printed_templates_parse_back(t in arb_template()) {
            let text = t.to_string();
            prop_assume!(text.len() <= CONDITION_TEXT_BYTES);
            prop_assert_eq!(parse_template(&text), Ok(t), "{}", text);
        }

        #[test]
        fn rendered_messages_stay_under_the_cap(t in arb_template(), call in arb_call()) {
            let trees = call_trees(&call);
            let env = call_env(&call, &trees);
            let start = Instant::now();
            let out = t.render(&env);
            prop_assert!(out.len() <= LOG_LINE_BYTES, "{}", out.len());
            prop_assert!(start.elapsed() < Duration::from_secs(2));
        }

        #[test]
        fn evaluation_stays_within_its_budget(e in arb_text_expr(), call in arb_call()) {
            let trees = call_trees(&call);
            let env = call_env(&call, &trees);
            let start = Instant::now();
            let (full, left) = text_within(&e, &env, CONDITION_STEPS);
            if let Ok(text) = &full {
                prop_assert!(text.chars().count() <= LOG_VALUE_CHARS + 3);
            }
            prop_assert_eq!(&eval_text(&e, &env), &full);
            // The steps it used give the same answer; one fewer spends the budget.
            let used = CONDITION_STEPS - left;
            prop_assert_eq!(text_within(&e, &env, used), (full, 0));
            if used > 0 {
                let (short, _) = text_within(&e, &env, used - 1);
                prop_assert!(short.is_err_and(|e| e.message.ends_with("evaluation step budget spent")));
            }
            let _ = eval(&e, &env);
            prop_assert!(start.elapsed() < Duration::from_secs(1));
        }
    }
}
