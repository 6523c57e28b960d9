//! The syntax tree of a condition: names, functions, methods, operators, expressions, and
//! printing an expression back as text.

use super::*;

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
    pub(super) fn text(self) -> &'static str {
        match self {
            Name::Args => "args",
            Name::Kwargs => "kwargs",
            Name::Result => "result",
            Name::Exception => "exception",
        }
    }
}

impl Func {
    pub(super) fn text(self) -> &'static str {
        match self {
            Func::Len => "len",
            Func::Type => "type",
            Func::Abs => "abs",
        }
    }
}

impl Method {
    pub(super) fn text(self) -> &'static str {
        match self {
            Method::StartsWith => "startswith",
            Method::EndsWith => "endswith",
            Method::Contains => "contains",
        }
    }
}

impl ArithOp {
    pub(super) fn text(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::FloorDiv => "//",
            ArithOp::Mod => "%",
        }
    }

    pub(super) fn prec(self) -> u8 {
        match self {
            ArithOp::Add | ArithOp::Sub => PREC_ADD,
            _ => PREC_MUL,
        }
    }
}

impl CmpOp {
    pub(super) fn text(self) -> &'static str {
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

pub(super) const PREC_OR: u8 = 1;
pub(super) const PREC_AND: u8 = 2;
pub(super) const PREC_NOT: u8 = 3;
pub(super) const PREC_CMP: u8 = 4;
pub(super) const PREC_ADD: u8 = 5;
pub(super) const PREC_MUL: u8 = 6;
pub(super) const PREC_NEG: u8 = 7;
pub(super) const PREC_ATOM: u8 = 8;

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

    pub(super) fn prec(&self) -> u8 {
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
pub(super) fn write_at(f: &mut fmt::Formatter<'_>, e: &Expr, min: u8) -> fmt::Result {
    if e.prec() < min {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

pub(super) fn write_str_literal(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
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
