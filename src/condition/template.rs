//! Log message templates: text with `{expression}` parts.

use super::*;

/// The log message of a logpoint: text with `{expression}` parts, each an expression of the
/// condition language shown as [`eval_text`] shows it. `{{` and `}}` stand for literal braces.
/// Built by [`parse_template`], printed back by `Display`.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Never two texts in a row, never an empty text.
    pub(super) parts: Vec<Part>,
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
pub(super) fn expr_end(b: &[u8], start: usize) -> usize {
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
pub(super) fn template_expr(text: &str, open: usize, end: usize) -> Result<Expr, ParseError> {
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
