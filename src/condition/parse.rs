//! The parser: text to a syntax tree, bounded in length and nesting.

use super::*;

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
pub(super) enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
    End,
}

/// Operators, longest first.
pub(super) const OPS: [&str; 19] = [
    "==", "!=", "<=", ">=", "//", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ".", ",",
    "=",
];

pub(super) struct Lexer<'a> {
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

pub(super) fn error_at(text: &str, byte: usize, message: impl Into<String>) -> ParseError {
    let byte = byte.min(text.len());
    let column = text.get(..byte).map_or(byte, |s| s.chars().count()) + 1;
    ParseError {
        message: message.into(),
        byte,
        column,
    }
}

pub(super) fn tok_text(t: &Tok) -> String {
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
pub(super) type Parsed = (Expr, usize);

pub(super) struct Parser<'a> {
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
pub(super) fn parse_text(text: &str, at_end: &'static str) -> Result<Expr, ParseError> {
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

pub(super) fn too_deep() -> String {
    format!("condition nested too deeply (more than {CONDITION_DEPTH} levels)")
}
