//! Syntax highlighting of the source views, on the server (the page loads no script for it):
//! a line-at-a-time lexer for Python and for JavaScript/TypeScript that marks keywords,
//! strings, comments, numbers, decorators and the names `def`/`class`/`function` define.
//! It is a reader's aid, not a parser: a regular expression literal in JavaScript reads as
//! operators, an f-string's fields as string. Text keeps every character, escaped: the marks
//! are `<span class="t?">` around runs of it.
//!
//! A string or comment may span lines (Python's triple quotes, JavaScript's `/* */` and
//! template literals): the [`Highlighter`] carries that state from one line to the next, so a
//! view that starts inside a file first runs the lines before it through [`Highlighter::skip`].

use super::markup::Html;

/// What a file is highlighted as, by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Python,
    Js,
    /// Anything else: shown as it is.
    Plain,
}

impl Lang {
    pub fn of(filename: &str) -> Lang {
        let ext = filename
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "py" | "pyw" | "pyi" | "pyx" | "pxd" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => Lang::Js,
            _ => Lang::Plain,
        }
    }

    fn keywords(self) -> &'static [&'static str] {
        match self {
            Lang::Python => &[
                "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
                "continue", "def", "del", "elif", "else", "except", "finally", "for", "from",
                "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
                "raise", "return", "try", "while", "with", "yield", "match", "case",
            ],
            Lang::Js => &[
                "async",
                "await",
                "break",
                "case",
                "catch",
                "class",
                "const",
                "continue",
                "debugger",
                "default",
                "delete",
                "do",
                "else",
                "export",
                "extends",
                "false",
                "finally",
                "for",
                "from",
                "function",
                "if",
                "import",
                "in",
                "instanceof",
                "let",
                "new",
                "null",
                "of",
                "return",
                "static",
                "super",
                "switch",
                "this",
                "throw",
                "true",
                "try",
                "typeof",
                "undefined",
                "var",
                "void",
                "while",
                "with",
                "yield",
                "interface",
                "type",
                "enum",
                "implements",
            ],
            Lang::Plain => &[],
        }
    }

    /// Keywords after which the next name is the one being defined.
    fn defines(self, word: &str) -> bool {
        match self {
            Lang::Python => word == "def" || word == "class",
            Lang::Js => word == "function" || word == "class",
            Lang::Plain => false,
        }
    }
}

/// A construct left open at the end of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    /// A string that ends at this delimiter (`"""`, `'''`, or a template literal's backquote).
    Str(&'static str),
    /// A `/* */` comment.
    Comment,
}

/// Highlights the lines of one file in order.
#[derive(Debug)]
pub struct Highlighter {
    lang: Lang,
    open: Option<Open>,
}

/// The kinds of marked text, with their classes.
const KEYWORD: &str = "tk";
const COMMENT: &str = "tc";
const NUMBER: &str = "tn";
const DECORATOR: &str = "td";
const DEFINED: &str = "tf";

impl Highlighter {
    pub fn new(lang: Lang) -> Highlighter {
        Highlighter { lang, open: None }
    }

    /// Moves past a line without showing it (keeps the state of what it leaves open).
    pub fn skip(&mut self, line: &str) {
        if self.lang != Lang::Plain {
            self.line(&mut Html::new(), line);
        }
    }

    /// Appends `line` to `out`, escaped and marked.
    pub fn line(&mut self, out: &mut Html, line: &str) {
        if self.lang == Lang::Plain {
            out.push_text(line);
            return;
        }
        let b = line.as_bytes();
        let mut i = 0;
        let mut defining = false;
        // Leading whitespace, then a decorator in Python.
        if let Some(open) = self.open.take() {
            i = self.finish(out, line, 0, open);
        }
        while i < b.len() {
            let c = b[i];
            let rest = &line[i..];
            if self.lang == Lang::Python && c == b'#'
                || self.lang == Lang::Js && rest.starts_with("//")
            {
                mark(out, COMMENT, rest);
                return;
            }
            if self.lang == Lang::Js && rest.starts_with("/*") {
                out.push_lit("<span class=\"tc\">");
                out.push_text("/*");
                i = self.close(out, line, i + 2, Open::Comment);
                continue;
            }
            if let Some((prefix, quote)) = self.string_start(line, i) {
                out.push_lit("<span class=\"ts\">");
                out.push_text(&line[i..i + prefix + quote.len()]);
                let at = i + prefix + quote.len();
                i = if quote.len() == 3 || quote == "`" {
                    self.close(out, line, at, Open::Str(quote))
                } else {
                    let end = single_end(b, at, quote.as_bytes()[0]);
                    out.push_text(&line[at..end]);
                    out.push_lit("</span>");
                    end
                };
                continue;
            }
            if c == b'@' && self.lang == Lang::Python && line[..i].trim().is_empty() {
                let end = i + 1 + word_len(&line[i + 1..], true);
                mark(out, DECORATOR, &line[i..end]);
                i = end;
                continue;
            }
            if c.is_ascii_digit() || c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                let end = i + word_len(rest, true);
                mark(out, NUMBER, &line[i..end]);
                i = end;
                continue;
            }
            let n = word_len(rest, false);
            if n > 0 {
                let word = &line[i..i + n];
                if defining {
                    mark(out, DEFINED, word);
                    defining = false;
                } else if self.lang.keywords().contains(&word) {
                    mark(out, KEYWORD, word);
                    defining = self.lang.defines(word);
                } else {
                    out.push_text(word);
                }
                i += n;
                continue;
            }
            // One character of anything else (whole, however many bytes it takes).
            let n = rest.chars().next().map_or(1, char::len_utf8);
            if !c.is_ascii_whitespace() {
                defining = false;
            }
            out.push_text(&line[i..i + n]);
            i += n;
        }
    }

    /// Where a string starts at `i`: the length of its prefix letters and its opening quote.
    fn string_start(&self, line: &str, i: usize) -> Option<(usize, &'static str)> {
        let b = line.as_bytes();
        // A prefix (r, b, f, u, rb, br, fr, rf...) belongs to a string only right before its
        // quote and not as the end of a longer name.
        let mut p = 0;
        if self.lang == Lang::Python {
            while p < 2 && b.get(i + p).is_some_and(|c| b"rRbBuUfF".contains(c)) {
                p += 1;
            }
            if p > 0 && i > 0 && is_word_byte(b[i - 1]) {
                return None;
            }
        }
        let at = &line[i + p..];
        let quote = if self.lang == Lang::Python && at.starts_with("\"\"\"") {
            "\"\"\""
        } else if self.lang == Lang::Python && at.starts_with("'''") {
            "'''"
        } else if at.starts_with('"') {
            "\""
        } else if at.starts_with('\'') {
            "'"
        } else if self.lang == Lang::Js && at.starts_with('`') {
            "`"
        } else {
            return None;
        };
        Some((p, quote))
    }

    /// Writes from `at` to where `open` closes on this line (the mark's `</span>` included),
    /// or to the line's end, leaving it open. Answers where the text after it starts.
    fn close(&mut self, out: &mut Html, line: &str, at: usize, open: Open) -> usize {
        let end = match open {
            Open::Comment => line[at..].find("*/").map(|n| at + n + 2),
            Open::Str(quote) => closing(line.as_bytes(), at, quote.as_bytes()),
        };
        match end {
            Some(end) => {
                out.push_text(&line[at..end]);
                out.push_lit("</span>");
                end
            }
            None => {
                out.push_text(&line[at..]);
                out.push_lit("</span>");
                self.open = Some(open);
                line.len()
            }
        }
    }

    /// Continues what the previous line left open.
    fn finish(&mut self, out: &mut Html, line: &str, at: usize, open: Open) -> usize {
        out.push_lit(match open {
            Open::Comment => "<span class=\"tc\">",
            Open::Str(_) => "<span class=\"ts\">",
        });
        self.close(out, line, at, open)
    }
}

fn mark(out: &mut Html, class: &'static str, text: &str) {
    out.push_lit("<span class=\"");
    out.push_lit(class);
    out.push_lit("\">");
    out.push_text(text);
    out.push_lit("</span>");
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// The length in bytes of the name (or, with `number`, the number's characters, dots
/// included) at the start of `s`.
fn word_len(s: &str, number: bool) -> usize {
    let mut n = 0;
    for ch in s.chars() {
        let ok = ch.is_alphanumeric() || ch == '_' || ch == '$' || number && ch == '.';
        if !ok {
            break;
        }
        n += ch.len_utf8();
    }
    n
}

/// The end (exclusive) of a one-line string whose body starts at `at`: past its closing quote,
/// or the line's end. A backslash escapes the next character.
fn single_end(b: &[u8], at: usize, quote: u8) -> usize {
    let mut i = at;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The end (exclusive) of a multi-line string's closing delimiter on this line, if it is here.
fn closing(b: &[u8], at: usize, quote: &[u8]) -> Option<usize> {
    let mut i = at;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i..].starts_with(quote) {
            return Some(i + quote.len());
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(lang: Lang, text: &str) -> Vec<String> {
        let mut h = Highlighter::new(lang);
        text.lines()
            .map(|l| {
                let mut out = Html::new();
                h.line(&mut out, l);
                out.to_string()
            })
            .collect()
    }

    #[test]
    fn python_keywords_strings_comments_numbers_and_definitions_are_marked() {
        let got = lines(
            Lang::Python,
            "@dataclass\ndef add(x, y=1.5):  # sum\n    return f\"{x}\" + 'a\\'b' if x else None",
        );
        assert_eq!(got[0], "<span class=\"td\">@dataclass</span>");
        assert_eq!(
            got[1],
            "<span class=\"tk\">def</span> <span class=\"tf\">add</span>(x, y=<span \
             class=\"tn\">1.5</span>):  <span class=\"tc\"># sum</span>"
        );
        assert_eq!(
            got[2],
            "    <span class=\"tk\">return</span> <span class=\"ts\">f&quot;{x}&quot;</span> + \
             <span class=\"ts\">&#39;a\\&#39;b&#39;</span> <span class=\"tk\">if</span> x \
             <span class=\"tk\">else</span> <span class=\"tk\">None</span>"
        );
    }

    #[test]
    fn a_triple_quoted_string_carries_over_lines_and_a_skipped_line_keeps_the_state() {
        let got = lines(
            Lang::Python,
            "x = \"\"\"one\n# not a comment\ntwo\"\"\" # yes",
        );
        assert_eq!(
            got[0],
            "x = <span class=\"ts\">&quot;&quot;&quot;one</span>"
        );
        assert_eq!(got[1], "<span class=\"ts\"># not a comment</span>");
        assert_eq!(
            got[2],
            "<span class=\"ts\">two&quot;&quot;&quot;</span> <span class=\"tc\"># yes</span>"
        );
        let mut h = Highlighter::new(Lang::Python);
        h.skip("'''");
        let mut out = Html::new();
        h.line(&mut out, "def f(): '''");
        assert_eq!(
            out.to_string(),
            "<span class=\"ts\">def f(): &#39;&#39;&#39;</span>"
        );
    }

    #[test]
    fn a_name_ending_in_a_prefix_letter_is_not_a_string_prefix_and_hostile_text_stays_text() {
        let got = lines(Lang::Python, "bar'x' <script>alert(1)</script> ü=1");
        assert_eq!(
            got[0],
            "bar<span class=\"ts\">&#39;x&#39;</span> &lt;script&gt;alert(<span \
             class=\"tn\">1</span>)&lt;/script&gt; ü=<span class=\"tn\">1</span>"
        );
    }

    #[test]
    fn javascript_comments_templates_and_keywords_are_marked() {
        let got = lines(
            Lang::Js,
            "function f(a) { /* c */ return `t\nu` } // end\n/* open\nclosed */ const x = 0x1f;",
        );
        assert_eq!(
            got[0],
            "<span class=\"tk\">function</span> <span class=\"tf\">f</span>(a) { <span \
             class=\"tc\">/* c */</span> <span class=\"tk\">return</span> <span \
             class=\"ts\">`t</span>"
        );
        assert_eq!(
            got[1],
            "<span class=\"ts\">u`</span> } <span class=\"tc\">// end</span>"
        );
        assert_eq!(got[2], "<span class=\"tc\">/* open</span>");
        assert_eq!(
            got[3],
            "<span class=\"tc\">closed */</span> <span class=\"tk\">const</span> x = <span \
             class=\"tn\">0x1f</span>;"
        );
    }

    #[test]
    fn other_files_are_plain_text_and_languages_go_by_extension() {
        assert_eq!(Lang::of("/a/b.PY"), Lang::Python);
        assert_eq!(Lang::of("x.tsx"), Lang::Js);
        assert_eq!(Lang::of("README"), Lang::Plain);
        assert_eq!(lines(Lang::Plain, "def <b>")[0], "def &lt;b&gt;");
    }
}
