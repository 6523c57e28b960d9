//! Two plain lists: the registered functions (`/functions`) and the communication errors the
//! debug client reported (`/com-errors`).

use serde_json::Value;

use super::markup::{html, markup};
use super::{shown, time, Html, View};
use crate::limits::UI_MAX_PAGE_LIMIT;
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// `/functions`: the registered functions, a page at a time (`limit`, at most
/// `UI_MAX_PAGE_LIMIT`, and `offset`), each with its signature, whether it has a breakpoint
/// (and a button to add one), and what the client told about it.
pub fn functions(shared: &Shared, query: &[(String, String)]) -> View {
    let number = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let limit = number("limit")
        .unwrap_or(UI_MAX_PAGE_LIMIT)
        .clamp(1, UI_MAX_PAGE_LIMIT);
    let offset = number("offset").unwrap_or(0);
    let listing = service::functions_page(shared, offset, limit);
    let breakpoints = service::breakpoints(shared).breakpoints;
    let live = if offset == 0 {
        Html::lit(" data-live")
    } else {
        Html::new()
    };
    let mut out = markup!(
        "<div class=\"bar\"><h1>Functions</h1></div><div id=\"function-list\"{}>",
        live
    );
    if listing.total > listing.functions.len() {
        let first = (offset + 1).min(listing.total);
        let last = offset + listing.functions.len();
        html!(
            out,
            "<p class=\"count\">Functions {} to {} of {}.</p><nav class=\"pager\" \
             aria-label=\"Pages\">",
            first,
            last,
            listing.total
        );
        let to = |o: usize| format!("/functions?offset={o}&limit={limit}");
        if offset > 0 {
            html!(
                out,
                "<a href=\"{}\" rel=\"prev\">← Previous</a>",
                to(offset.saturating_sub(limit))
            );
        }
        if last < listing.total {
            html!(
                out,
                "<a href=\"{}\" rel=\"next\">Next →</a>",
                to(offset + limit)
            );
        }
        out.push_lit("</nav>");
    }
    if listing.functions.is_empty() && listing.total == 0 {
        out.push_lit(
            "<section class=\"empty\"><h2>No function registered</h2><p>A program registers \
             each function it wraps with <code>with_debug</code> when it starts.</p></section>",
        );
    } else {
        out.push_lit(
            "<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th scope=\"col\">Function</th>\
             <th scope=\"col\">Signature</th><th scope=\"col\">Registered</th><th scope=\"col\">About</th>\
             <th scope=\"col\">Breakpoint</th></tr></thead><tbody>",
        );
        for name in &listing.functions {
            let meta = listing.function_metadata.get(name);
            let registered = meta
                .and_then(|m| m.get("registered_at"))
                .and_then(Value::as_f64)
                .map(time)
                .unwrap_or_default();
            let about = meta
                .and_then(|m| m.get("summary"))
                .map(shown)
                .unwrap_or_default();
            let breakpoint = if breakpoints.contains(name) {
                markup!(
                    "<a href=\"/breakpoint/{}/history\">has one</a>",
                    encode_segment(name)
                )
            } else {
                markup!(
                    "<form class=\"inline\" data-api=\"/api/breakpoints\"><input type=\"hidden\" \
                     name=\"function_name\" value=\"{}\"><input type=\"hidden\" name=\"keep_signature\" \
                     value=\"true\" data-json><button type=\"submit\" class=\"quiet\">Add</button>\
                     <p class=\"error\" role=\"alert\"></p></form>",
                    name
                )
            };
            html!(
                out,
                "<tr><th scope=\"row\"><code>{}</code></th><td><code>{}</code></td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                name,
                listing
                    .function_signatures
                    .get(name)
                    .map_or("", String::as_str),
                registered,
                about,
                breakpoint,
            );
        }
        out.push_lit("</tbody></table></div>");
    }
    out.push_lit("</div>");
    View::new("Functions", "/functions", out)
}

/// `/com-errors`: requests the debug client could not complete, newest first.
pub fn com_errors(shared: &Shared) -> View {
    let all = service::com_errors(shared);
    let errors = all["errors"].as_array().map_or(&[][..], Vec::as_slice);
    let mut out = Html::lit(
        "<div class=\"bar\"><h1>Communication errors</h1></div><div id=\"com-error-list\" data-live>",
    );
    if errors.is_empty() {
        out.push_lit(
            "<section class=\"empty\"><h2>No communication errors</h2><p>When the debug client \
             fails to talk to this server, it reports the failed request here before it exits \
             (the last 500 are kept).</p></section>",
        );
    } else {
        for e in errors.iter().rev() {
            let text = |k: &str| e.get(k).map(shown).unwrap_or_default();
            let at = e
                .get("timestamp")
                .or_else(|| e.get("received_at"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            let status = e
                .get("status_code")
                .filter(|s| !s.is_null())
                .map(|s| format!(" · HTTP {}", shown(s)));
            html!(
                out,
                "<article class=\"card\"><h2>{}</h2><p class=\"meta\">{} · {} {} · process {}{}</p>",
                text("summary"),
                time(at),
                text("method"),
                text("path"),
                text("process_pid"),
                status,
            );
            let exception = [text("exception_type"), text("exception_message")]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            if !exception.is_empty() {
                html!(out, "<p class=\"error-text\">{}</p>", exception);
            }
            for (key, label) in [
                ("response_text", "Response"),
                ("traceback", "Traceback"),
                ("payload", "Request body"),
            ] {
                if let Some(v) = e.get(key).filter(|v| !v.is_null()) {
                    html!(
                        out,
                        "<details><summary>{}</summary><pre class=\"value\">{}</pre></details>",
                        label,
                        shown(v)
                    );
                }
            }
            out.push_lit("</article>");
        }
    }
    out.push_lit("</div>");
    View::new("Communication errors", "/com-errors", out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, shared};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    #[test]
    fn empty_lists_say_what_would_be_there() {
        let s = shared();
        assert!(functions(&s, &[]).main.contains("No function registered"));
        assert!(com_errors(&s).main.contains("No communication errors"));
    }

    #[test]
    fn functions_and_errors_escape_program_data() {
        let s = shared();
        service::function_register(
            &s,
            &body(json!({"function_name": HOSTILE, "signature": HOSTILE})),
        )
        .unwrap();
        service::report_com_error(
            &s,
            body(
                json!({"summary": HOSTILE, "method": "POST", "path": HOSTILE,
                         "process_pid": 7, "traceback": HOSTILE, "status_code": 500}),
            ),
        );
        for html in [functions(&s, &[]).main, com_errors(&s).main] {
            assert!(!html.contains("<img"), "{html}");
            assert!(
                html.contains("&lt;img src=x onerror=alert(1)&gt;"),
                "{html}"
            );
        }
        assert!(com_errors(&s).main.contains("HTTP 500"));
        assert!(functions(&s, &[])
            .main
            .contains("data-api=\"/api/breakpoints\""));
    }

    #[test]
    fn the_functions_page_shows_a_page_at_a_time() {
        let s = shared();
        for n in 0..30 {
            s.lock()
                .functions
                .register(&format!("f{n:02}"), Some("(x)"));
        }
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let html = functions(&s, &q(&[("limit", "10"), ("offset", "10")])).main;
        assert!(html.contains("<code>f10</code>") && html.contains("<code>f19</code>"));
        assert!(!html.contains("<code>f09</code>") && !html.contains("<code>f20</code>"));
        assert!(html.contains("Functions 11 to 20 of 30."), "{html}");
        assert!(html.contains("href=\"/functions?offset=0&amp;limit=10\" rel=\"prev\""));
        assert!(html.contains("href=\"/functions?offset=20&amp;limit=10\" rel=\"next\""));
        let all = functions(&s, &[]).main;
        assert!(all.contains("<code>f29</code>") && !all.contains("rel=\"next\""));
    }
}
