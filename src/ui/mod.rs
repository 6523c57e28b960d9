//! The web UI: server-rendered HTML pages plus one small CSS and one small JS file, compiled
//! into the binary (no CDN, no framework, no build step). Every value of the debugged program is
//! HTML-escaped where it is written (`esc`), and every page is served with a strict
//! Content-Security-Policy (scripts and styles only from this server's files, no inline code, no
//! framing), so even an escaping mistake cannot run script. Pages change state only through the
//! REST API's POST endpoints (from `app.js`), never through a GET. Live updates: `app.js`
//! listens to `GET /api/events` and refetches the page's fragment (`?fragment=1`) when something
//! it shows changed.

mod paused;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::state::Shared;

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");

/// The Content-Security-Policy of every page.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A page or file of the UI: status, content type and body.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// The headers every UI answer carries.
pub fn headers() -> [(&'static str, &'static str); 5] {
    [
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]
}

/// Whether a request asks for a page rather than JSON (a browser navigating).
pub fn wants_html(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("text/html"))
}

/// The UI's answer to `GET path`, or `None` when the path is not a UI page (then the REST
/// routes answer it). `fragment`: only the part of the page that live updates replace.
pub fn serve(shared: &Shared, path: &str, fragment: bool) -> Option<Page> {
    let html = |status, body| Page {
        status,
        content_type: "text/html; charset=utf-8",
        body,
    };
    match path {
        "/ui/app.css" => Some(Page {
            status: 200,
            content_type: "text/css; charset=utf-8",
            body: APP_CSS.to_owned(),
        }),
        "/ui/app.js" => Some(Page {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: APP_JS.to_owned(),
        }),
        "/" if fragment => Some(html(200, paused::cards(shared))),
        "/" => Some(html(
            200,
            layout(shared, "Paused", "paused", &paused::page(shared)),
        )),
        p if p.starts_with("/ui/") => Some(html(404, not_found(shared, p))),
        _ => None,
    }
}

/// A page for a path or id that does not exist.
pub fn not_found(shared: &Shared, what: &str) -> String {
    let body = format!(
        "<h1>Not found</h1><p class=\"empty\">There is no page at <code>{}</code>.</p>\
         <p><a href=\"/\">Go to the paused calls</a></p>",
        esc(what)
    );
    layout(shared, "Not found", "", &body)
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page: head, header with the status line and navigation, then `main`.
fn layout(shared: &Shared, title: &str, page: &str, main: &str) -> String {
    let status = shared_status(shared);
    let mut out = String::with_capacity(main.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · cideldill</title><link rel=\"stylesheet\" href=\"/ui/app.css\">\
         <script src=\"/ui/app.js\" defer></script></head>\
         <body data-page=\"{}\"><header><nav><a class=\"brand\" href=\"/\">cideldill</a>\
         <a href=\"/\"{}>Paused</a></nav><p class=\"status\" id=\"status\">{}</p>\
         <p class=\"live\" id=\"live\" role=\"status\"></p></header><main id=\"main\">{}</main>\
         </body></html>\n",
        esc(title),
        esc(page),
        if page == "paused" {
            " aria-current=\"page\""
        } else {
            ""
        },
        status,
        main
    );
    out
}

/// The status line: breakpoints, paused calls, recorded calls, external servers, agents.
fn shared_status(shared: &Shared) -> String {
    let s = crate::service::server_status(shared);
    let external = shared.upstream.get().map(|m| {
        let servers = m.servers();
        let connected = servers.as_object().map_or(0, |o| {
            o.values().filter(|v| v["status"] == "connected").count()
        });
        format!(" · {connected} external MCP server{}", plural(connected))
    });
    let agents = shared.mcp_sessions.load(Ordering::SeqCst);
    format!(
        "{} breakpoint{} · {} paused · {} recorded call{}{} · {} agent{} connected",
        s.breakpoints,
        plural(s.breakpoints),
        s.paused,
        s.total_calls,
        plural(s.total_calls as usize),
        external.unwrap_or_default(),
        agents,
        plural(agents)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_every_html_special_character() {
        assert_eq!(
            esc(r#"</script><img src=x onerror="alert('x')">&"#),
            "&lt;/script&gt;&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;"
        );
        assert_eq!(esc("plain é"), "plain é");
    }

    #[test]
    fn the_policy_allows_no_inline_code_and_no_framing() {
        assert!(CSP.contains("script-src 'self'"));
        assert!(CSP.contains("frame-ancestors 'none'"));
        assert!(!CSP.contains("unsafe-inline"));
        assert!(!CSP.contains("unsafe-eval"));
        assert!(
            !APP_JS.contains("innerHTML +="),
            "no string-built markup in the script"
        );
    }

    #[test]
    fn only_browsers_asking_for_html_get_pages() {
        assert!(wants_html(Some(
            "text/html,application/xhtml+xml,*/*;q=0.8"
        )));
        assert!(!wants_html(Some("*/*")));
        assert!(!wants_html(None));
    }
}
