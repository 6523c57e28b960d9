//! Markup as a type. An [`Html`] is made only from literals of this source ([`Html::lit`]),
//! from text, which it escapes ([`Html::text`]), and by the [`html!`] and [`markup!`] macros,
//! which escape every argument that is not itself an `Html`. So text can reach a page only
//! escaped, and a page written with them cannot forget to escape: mixing a `String` into markup
//! escapes it, and passing markup where text is expected does not compile.
//!
//! One rule the compiler cannot check: a format string must not name a variable inline
//! (`"{name}"` would be captured as it is, unescaped); arguments go after the string. The tidy
//! test `ui_format_strings_take_no_inline_arguments` checks every `html!` and `markup!`.

use std::borrow::Cow;
use std::fmt::{self, Display, Write as _};

/// HTML markup (see the module's documentation for how one is made).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    pub fn new() -> Html {
        Html(String::new())
    }

    pub fn with_capacity(n: usize) -> Html {
        Html(String::with_capacity(n))
    }

    /// A literal of this source: markup by construction.
    pub fn lit(s: &'static str) -> Html {
        Html(s.to_owned())
    }

    /// Text, escaped (the `html!` and `markup!` macros escape their arguments in place).
    #[cfg(test)]
    pub fn text(s: &str) -> Html {
        let mut out = Html::with_capacity(s.len() + 8);
        out.push_text(s);
        out
    }

    pub fn push(&mut self, m: &Html) {
        self.0.push_str(&m.0);
    }

    pub fn push_lit(&mut self, s: &'static str) {
        self.0.push_str(s);
    }

    pub fn push_text(&mut self, s: &str) {
        escape_into(&mut self.0, s);
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// For the macros: appends `args`, whose arguments they have wrapped in [`Esc`].
    #[doc(hidden)]
    pub fn append_fmt(&mut self, args: fmt::Arguments<'_>) {
        let _ = self.0.write_fmt(args);
    }
}

/// Read as text (tests look into pages with `contains`).
impl std::ops::Deref for Html {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Html {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Html {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Display for Html {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromIterator<Html> for Html {
    fn from_iter<I: IntoIterator<Item = Html>>(iter: I) -> Html {
        let mut out = Html::new();
        for m in iter {
            out.push(&m);
        }
        out
    }
}

/// Escapes text for element content and quoted attribute values.
fn escape_into(out: &mut String, s: &str) {
    let mut rest = s;
    while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

/// What may be written into markup: markup as it is, everything else as escaped text.
pub trait Render {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl Render for Html {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text through a formatter: cut to the format's precision (in characters), escaped, then
/// padded with spaces after it to the format's width.
fn render_text(s: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let cut = match f.precision() {
        Some(p) => s.char_indices().nth(p).map_or(s, |(i, _)| &s[..i]),
        None => s,
    };
    let mut out = String::with_capacity(cut.len() + 8);
    escape_into(&mut out, cut);
    let shown = cut.chars().count();
    if let Some(w) = f.width().filter(|w| *w > shown) {
        out.extend(std::iter::repeat_n(' ', w - shown));
    }
    f.write_str(&out)
}

impl Render for str {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_text(self, f)
    }
}

impl Render for String {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_text(self, f)
    }
}

impl Render for Cow<'_, str> {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_text(self, f)
    }
}

impl Render for char {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_text(self.encode_utf8(&mut [0u8; 4]), f)
    }
}

impl<T: Render + ?Sized> Render for &T {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).render(f)
    }
}

impl<T: Render> Render for Option<T> {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Some(v) => v.render(f),
            None => Ok(()),
        }
    }
}

/// Numbers and booleans print no markup characters: written as `Display` writes them (with the
/// format's precision, say).
macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Render for $t {
            fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                Display::fmt(self, f)
            }
        }
    )*};
}
plain!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, bool);

/// An argument of [`html!`]: displays as [`Render`] says.
#[doc(hidden)]
pub struct Esc<'a, T: ?Sized>(pub &'a T);

impl<T: Render + ?Sized> Display for Esc<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.render(f)
    }
}

/// `html!(out, "<p>{}</p>", x)` appends to the `Html` `out`, escaping `x` unless it is `Html`.
macro_rules! html {
    ($out:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {
        $out.append_fmt(format_args!($fmt $(, $crate::ui::markup::Esc(&$arg))*))
    };
}

/// `markup!("<p>{}</p>", x)`: a new `Html`, escaping `x` unless it is `Html`.
macro_rules! markup {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        let mut out = $crate::ui::markup::Html::new();
        $crate::ui::markup::html!(out, $fmt $(, $arg)*);
        out
    }};
}

pub(crate) use {html, markup};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_markup_is_not() {
        let name = "<b>\"Tom\" & 'Jerry'</b>";
        let inner = markup!("<i>{}</i>", "x<y");
        let m = markup!(
            "<p title=\"{}\">{} {} {:.2}</p>",
            name,
            inner,
            3_u8,
            1.0 / 3.0
        );
        assert_eq!(
            m,
            "<p title=\"&lt;b&gt;&quot;Tom&quot; &amp; &#39;Jerry&#39;&lt;/b&gt;\"><i>x&lt;y</i> 3 0.33</p>"
        );
        assert_eq!(Html::text("a&b"), "a&amp;b");
        let owned: String = "<s>".into();
        let mut out = Html::lit("<div>");
        html!(out, "{}{}", owned, Some("&"));
        out.push_lit("</div>");
        assert_eq!(out, "<div>&lt;s&gt;&amp;</div>");
    }

    #[test]
    fn width_and_precision_shape_the_text_before_it_is_escaped() {
        assert_eq!(markup!("{:.3}", "<<<<"), "&lt;&lt;&lt;");
        assert_eq!(markup!("{:4}|", "<"), "&lt;   |");
    }
}
