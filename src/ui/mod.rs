//! The web UI: server-rendered HTML pages plus one small CSS and one small JS file, compiled
//! into the binary (no CDN, no framework, no build step). Markup is a type (`markup::Html`,
//! whose only constructors escape text: a program's value cannot reach a page unescaped), and
//! every page is served with a strict
//! Content-Security-Policy (scripts and styles only from this server's files, no inline code, no
//! framing), so even an escaping mistake cannot run script. Pages change state only through the
//! REST API's POST endpoints (from `app.js`), never through a GET. Live updates: `app.js`
//! listens to `GET /api/events` and refetches the page's fragment (`?fragment=1`) when something
//! it shows changed.

mod breakpoints;
mod calls;
mod compare;
mod compat;
mod highlight;
mod lists;
pub(crate) mod markup;
mod object;
mod paused;
mod repl;
mod replayed;
mod runs;
mod servers;
mod source;
mod tree;

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use serde_json::Value;

/// Text of a rendered value, the same on every page and in the text search of records.
pub use crate::search::shown;
use crate::state::Shared;
use crate::urlenc::percent_decode;
pub use markup::Html;
use markup::{html, markup};

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");
const EVENTS_WORKER_JS: &str = include_str!("assets/events-worker.js");
const ICON_SVG: &str = include_str!("assets/icon.svg");

/// The files of the UI: path, content type, content.
const ASSETS: [(&str, &str, &str); 4] = [
    ("/ui/app.css", "text/css; charset=utf-8", APP_CSS),
    ("/ui/app.js", "text/javascript; charset=utf-8", APP_JS),
    (
        "/ui/events-worker.js",
        "text/javascript; charset=utf-8",
        EVENTS_WORKER_JS,
    ),
    ("/ui/icon.svg", "image/svg+xml", ICON_SVG),
];

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

/// A page's content: its title (text), which navigation entry it belongs to, and its `main`.
/// Elements of `main` with an `id` and a `data-live` attribute are what live updates replace.
#[derive(Debug)]
pub struct View {
    pub title: String,
    pub nav: &'static str,
    pub main: Html,
}

impl View {
    pub fn new(title: impl Into<String>, nav: &'static str, main: Html) -> View {
        View {
            title: title.into(),
            nav,
            main,
        }
    }
}

/// A page's answer: its content, or "no such thing" with what was asked for (a 404 page).
pub type Answer = Result<View, String>;

/// The navigation: path and label of every page that has an entry.
const NAV: &[(&str, &str)] = &[
    ("/", "Paused"),
    ("/breakpoints", "Breakpoints"),
    ("/calls", "Calls"),
    ("/call-tree", "Call tree"),
    ("/runs", "Runs"),
    ("/repls", "REPL"),
    ("/mcp-servers", "MCP servers"),
    ("/functions", "Functions"),
    ("/com-errors", "Errors"),
];

/// Path prefixes of the pages other than `/` (a prefix ending in `/` takes ids after it).
const PAGE_PREFIXES: &[&str] = &[
    "/ui/",
    "/breakpoints",
    "/breakpoints/check",
    "/breakpoint/",
    "/calls",
    "/functions",
    "/com-errors",
    "/object/",
    "/repl/",
    "/repls",
    "/mcp-servers",
    "/oauth/callback",
    "/call-tree",
    "/call-tree/",
    "/runs/compare",
    "/runs/replayed/",
    "/runs",
    "/callstack/",
    "/frame/",
    // The original server's addresses (see `compat`).
    "/objects",
    "/repl-help",
    "/docs",
];

/// Whether `path` names a UI page or file (served for `GET` and `HEAD` whatever `Accept`
/// says; `/` only for browsers, see [`wants_html`]).
pub fn is_page_path(path: &str) -> bool {
    PAGE_PREFIXES.iter().any(|p| {
        if p.ends_with('/') {
            path.starts_with(p)
        } else {
            path == *p || path.strip_prefix(p) == Some("/")
        }
    })
}

/// The UI's answer to `GET path?query`, or `None` when the path is not a UI page (then the
/// REST routes answer it). `?fragment=1`: only the status line and `main`, which live
/// updates parse to replace the page's `data-live` regions.
pub fn serve(shared: &Shared, path: &str, query: &[(String, String)]) -> Option<Page> {
    let fragment = query.iter().any(|(k, v)| k == "fragment" && v == "1");
    if let Some((_, content_type, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) {
        return Some(Page {
            status: 200,
            content_type,
            body: (*body).to_owned(),
        });
    }
    let answer: Answer = match path {
        "/" => Ok(paused::page(shared, query)),
        "/call-tree" => Ok(tree::processes(shared, query)),
        "/runs/compare" | "/runs/compare/" => Ok(compare::page(shared, query)),
        p if p.starts_with("/runs/replayed/") => replayed::page(shared, p),
        p if p.starts_with("/call-tree/") => tree::process(shared, p, query),
        p if p.starts_with("/callstack/") => source::callstack(shared, p),
        p if p.starts_with("/frame/") => match compat::frame_of_process(shared, p) {
            Some(answer) => answer,
            None => source::frame(shared, p),
        },
        "/calls" | "/calls/" => Ok(calls::page(shared, query)),
        "/runs" | "/runs/" => Ok(runs::page(shared, query)),
        "/breakpoints" | "/breakpoints/" => Ok(breakpoints::page(shared)),
        "/breakpoints/check" => Ok(breakpoints::check(query)),
        "/functions" | "/functions/" => Ok(lists::functions(shared, query)),
        "/com-errors" | "/com-errors/" => Ok(lists::com_errors(shared)),
        "/mcp-servers" | "/mcp-servers/" => Ok(servers::page(shared)),
        "/oauth/callback" => Ok(servers::callback(shared, query)),
        "/repls" | "/repls/" => Ok(repl::sessions(shared, query)),
        p if p.starts_with("/repl/") => {
            repl::session(shared, &percent_decode(&p["/repl/".len()..]))
        }
        p if p.starts_with("/object/ref") => {
            compat::object_ref(shared, &percent_decode(&p["/object/".len()..]))
        }
        p if p.starts_with("/object/") => {
            object::page(shared, &percent_decode(&p["/object/".len()..]), query)
        }
        "/objects" | "/objects/" => Ok(compat::objects(shared, query)),
        "/repl-help" | "/repl-help/" => Ok(compat::repl_help()),
        p if p.starts_with("/breakpoint/")
            && p.split('/').count() == 5
            && p.split('/').nth(3) == Some("history") =>
        {
            let parts: Vec<&str> = p.split('/').collect();
            compat::history_entry(shared, &percent_decode(parts[2]), &percent_decode(parts[4]))
        }
        p if p.len() > "/breakpoint//history".len() - 1
            && p.starts_with("/breakpoint/")
            && p.ends_with("/history") =>
        {
            let name = &p["/breakpoint/".len()..p.len() - "/history".len()];
            breakpoints::history(shared, &percent_decode(name))
        }
        p if is_page_path(p) => Err(percent_decode(p)),
        _ => return None,
    };
    Some(render(shared, answer, fragment))
}

/// The 404 page for `path` (a browser asking for something that is neither a page nor an
/// endpoint gets this rather than the JSON error).
pub fn not_found_page(shared: &Shared, path: &str) -> Page {
    render(shared, Err(percent_decode(path)), false)
}

/// `/docs`: the REST endpoints the HTTP face lists from its route table, as a page.
pub fn api_docs(shared: &Shared, spec: &Value, query: &[(String, String)]) -> Page {
    let fragment = query.iter().any(|(k, v)| k == "fragment" && v == "1");
    render(shared, Ok(compat::docs(spec)), fragment)
}

/// A page's answer in the layout (or as the fragment the live pages fetch).
fn render(shared: &Shared, answer: Answer, fragment: bool) -> Page {
    let (status, view) = match answer {
        Ok(view) => (200, view),
        Err(what) => (404, not_found(&what)),
    };
    let body = if fragment {
        markup!(
            "<div id=\"frag-status\">{}</div><div id=\"frag-pausing\">{}</div>\
             <div id=\"frag-main\">{}</div>",
            shared_status(shared),
            pausing_banner(shared),
            view.main
        )
    } else {
        layout(shared, &view)
    };
    Page {
        status,
        content_type: "text/html; charset=utf-8",
        body: body.into_string(),
    }
}

/// Looks up a query parameter.
pub fn param<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A page for a path or id that does not exist.
pub fn not_found(what: &str) -> View {
    View::new(
        "Not found",
        "",
        markup!(
            "<h1>Not found</h1><p class=\"empty\">There is nothing at <code>{}</code>: it may \
             never have existed, or it is gone.</p><p><a href=\"/\">Go to the paused calls</a></p>",
            what
        ),
    )
}

/// Escapes text as [`Html::text`] does (for tests that look for an escaped value in a page).
#[cfg(test)]
pub fn esc(s: &str) -> String {
    Html::text(s).into_string()
}

/// The whole page: head, header with the status line and navigation, then `main`.
fn layout(shared: &Shared, view: &View) -> Html {
    let status = shared_status(shared);
    // Every page's title says how many calls are paused (`app.js` keeps it current).
    let title = format!("{} · cideldill", view.title);
    let paused = crate::service::server_status(shared).paused;
    let shown_title = if paused > 0 {
        format!("({paused} paused) {title}")
    } else {
        title.clone()
    };
    let mut out = Html::with_capacity(view.main.len() + 2048);
    html!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"icon\" href=\"/ui/icon.svg\"><link rel=\"stylesheet\" href=\"/ui/app.css\">\
         <script src=\"/ui/app.js\" defer></script></head>\
         <body data-page=\"{}\" data-title=\"{}\"><header><nav><a class=\"brand\" href=\"/\">cideldill</a>",
        shown_title,
        view.nav,
        title,
    );
    for (path, label) in NAV {
        let current = if *path == view.nav {
            Html::lit(" aria-current=\"page\"")
        } else {
            Html::new()
        };
        html!(out, "<a href=\"{}\"{}>{}</a>", path, current, label);
    }
    let events = page_events(view.nav).map(|e| markup!(" data-events=\"{}\"", e));
    html!(
        out,
        "</nav><p class=\"status\" id=\"status\">{}</p>\
         <p class=\"live\" id=\"live\" role=\"status\"></p>\
         <button type=\"button\" class=\"keys\" data-help aria-haspopup=\"dialog\" \
         aria-keyshortcuts=\"?\" title=\"Keyboard shortcuts (?)\">Keys <kbd>?</kbd></button>\
         <p class=\"sr-only\" id=\"announce\" aria-live=\"polite\"></p>\
         <div class=\"pausing-banner\" id=\"pausing-banner\">{}</div></header>\
         <main id=\"main\"{}>{}</main>{}</body></html>
",
        status,
        pausing_banner(shared),
        events,
        view.main,
        Html::lit(KEYS_HELP)
    );
    out
}

/// The keyboard help every page has (`?` or the header's Keys button opens it; Escape or
/// Close closes it, without script too).
const KEYS_HELP: &str = "<dialog id=\"help\" aria-labelledby=\"help-title\"><h2 id=\"help-title\">\
    Keyboard</h2><dl class=\"keys\">\
    <dt><kbd>?</kbd></dt><dd>This help</dd>\
    <dt><kbd>j</kbd> <kbd>k</kbd></dt><dd>Next or previous paused call (Paused), or call (Call tree)</dd>\
    <dt><kbd>c</kbd></dt><dd>Continue the paused call that has the focus</dd>\
    <dt><kbd>Enter</kbd></dt><dd>In the REPL: run what is typed (<kbd>Shift</kbd>+<kbd>Enter</kbd>: \
    a new line; <kbd>↑</kbd> <kbd>↓</kbd>: earlier input)</dd>\
    <dt><kbd>↑</kbd> <kbd>↓</kbd> then <kbd>Enter</kbd></dt><dd>On a choice (a breakpoint's behavior): \
    pick a value, then apply it; moving away applies it too</dd>\
    <dt><kbd>Esc</kbd></dt><dd>Close this help</dd></dl>\
    <form method=\"dialog\"><button>Close</button></form></dialog>";

/// The events a page shows something of, when not every event (`app.js` refreshes the page
/// only for these): the Paused page shows pauses, the log, the origins asking, REPL sessions
/// and what the actions offer, not the calls that complete meanwhile.
fn page_events(nav: &str) -> Option<&'static str> {
    match nav {
        "/" => Some(
            "execution_paused execution_resumed log origins_changed repl_session \
             breakpoints_changed functions_changed",
        ),
        // Every page's status line and title count the paused calls.
        "/mcp-servers" => Some("execution_paused execution_resumed external_server"),
        "/functions" => Some("execution_paused execution_resumed functions_changed"),
        "/repls" => Some("execution_paused execution_resumed repl_session repl_output"),
        // A run appears, grows or ends with the records; it goes when deleted; its label and
        // notes change from any face.
        "/runs" => {
            Some("execution_paused execution_resumed call_completed run_deleted run_changed")
        }
        _ => None,
    }
}

/// What every page shows while pausing is off (nothing otherwise): that no call pauses, and the
/// button that turns pausing on. `app.js` keeps it current with the status line.
fn pausing_banner(shared: &Shared) -> Html {
    if crate::service::pausing(shared).pausing {
        return Html::new();
    }
    Html::lit(
        "<form class=\"pausing-off\" data-api=\"/api/pausing\" data-then=\"refresh\">\
         <p><strong>Pausing is off</strong>: no call pauses, whatever the breakpoints say \
         (they keep their settings; logpoints still log). \
         <input type=\"hidden\" name=\"pausing\" value=\"true\" data-json>\
         <button type=\"submit\">Turn pausing on</button></p>\
         <p class=\"error\" role=\"alert\"></p></form>",
    )
}

/// The status line (text): pausing off, breakpoints, paused calls, recorded calls, external
/// servers, agents.
fn shared_status(shared: &Shared) -> String {
    let s = crate::service::server_status(shared);
    // External servers once there are any (the manager is idle until one is connected).
    let servers = shared.upstream.servers();
    let external = servers.as_object().filter(|o| !o.is_empty()).map(|o| {
        let connected = o.values().filter(|v| v["status"] == "connected").count();
        format!(" · {connected} external MCP server{}", plural(connected))
    });
    let agents = shared.mcp_sessions.load(Ordering::SeqCst);
    let asking = shared.lock().origins.pending().count();
    let asking = if asking > 0 {
        format!(
            " · {asking} web page origin{} asking to report calls (see Paused)",
            plural(asking)
        )
    } else {
        String::new()
    };
    let off = if s.pausing { "" } else { "Pausing is off · " };
    format!(
        "{off}{} breakpoint{} · {} paused · {} record{} (calls and client events){}{asking} · {} agent{} connected",
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

/// The text of a value shown from a JSON item (the browser debug client's, protocol doc
/// §2.12): compact JSON, so that the string "1" and the number 1 differ (a pickle's value is
/// a Python repr already, and goes through `shown`), with every placeholder (a value JSON
/// cannot hold, §4.4) written as its bare summary, nested ones too; the server's own markers
/// (`<cid:… missing>`, `<unavailable: …>`) as they are.
pub fn json_shown(v: &Value) -> Cow<'_, str> {
    const MARKERS: [&str; 4] = ["<cid:", "<unavailable: ", "<missing cid>", "<cut: "];
    fn write(out: &mut String, v: &Value) {
        match v {
            Value::Object(_) if crate::pretty::is_placeholder(v) => out.push_str(&shown(v)),
            Value::Array(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    out.push_str(if i > 0 { "," } else { "" });
                    write(out, x);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    out.push_str(if i > 0 { "," } else { "" });
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(out, x);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    match v {
        Value::String(s) if MARKERS.iter().any(|m| s.starts_with(m)) => shown(v),
        _ => {
            let mut out = String::new();
            write(&mut out, v);
            Cow::Owned(out)
        }
    }
}

/// The text of a value rendered from `item`: `json_shown` for a JSON item, else `shown`.
pub fn item_shown<'a>(v: &'a Value, item: Option<&Value>) -> Cow<'a, str> {
    let format = item.and_then(|i| i.get("serialization_format"));
    if format.and_then(Value::as_str) == Some("json") {
        json_shown(v)
    } else {
        shown(v)
    }
}

/// Characters of a value shown before "show more".
const FOLD_CHARS: usize = 600;
/// Lines of a value shown before "show more".
const FOLD_LINES: usize = 8;

/// A program value as text in a `code` block; a long one shows its start and folds the rest
/// behind "show more" (a `<details>`: no script, no layout shift before it is opened).
/// What the debugger did to a call (the `resolution` of its record), for people: one marked
/// line saying what ran, through which face, and with what (the arguments that ran beside
/// the ones called, the fake result, the raised exception, the replacement). Empty for a
/// call that ran as called without anything deciding it.
pub fn resolution_html(method: &str, record: &serde_json::Map<String, Value>) -> Html {
    use crate::resolution::{Action, Actor};
    let Some(r) = record.get("resolution").filter(|r| r.is_object()) else {
        return Html::new();
    };
    let text = |k: &str| r.get(k).and_then(Value::as_str);
    let action = text("action").and_then(Action::parse);
    let by = text("by").and_then(Actor::parse);
    let (Some(action), Some(by)) = (action, by) else {
        return Html::new();
    };
    let verb = match action {
        Action::Continue => "continued",
        Action::Modify => "modified",
        Action::Skip => "skipped",
        Action::Raise => "raised",
        Action::Replace => "replaced",
    };
    let mut out = markup!(
        "<p class=\"resolution {}\" data-action=\"{}\" data-by=\"{}\"><span class=\"badge {}\">{}</span> ",
        action.as_str(),
        action.as_str(),
        by.as_str(),
        action.as_str(),
        verb,
    );
    let how = match by {
        Actor::Breakpoint
        | Actor::Condition
        | Actor::Logpoint
        | Actor::PauseLimit
        | Actor::Replay => "by",
        _ => "through",
    };
    html!(out, "{} {}", how, by.describe());
    let call = |d: &Value| format!("{}({})", method, breakpoints::arguments_text(d));
    match action {
        Action::Continue => {}
        Action::Modify => html!(
            out,
            ": ran as <code class=\"value ran\">{}</code>, called as <code class=\"value called\">{}</code>",
            call(r),
            call(&Value::Object(record.clone()))
        ),
        Action::Skip => {
            let fake = r.get("pretty_fake_result").map(shown).unwrap_or_default();
            html!(
                out,
                ": the function did not run; it returned <code class=\"value\">{}</code>",
                if fake.is_empty() { "None" } else { &fake }
            );
        }
        Action::Raise => html!(
            out,
            ": the function did not run; it raised <code class=\"value\">{}: {}</code>",
            text("exception_type").unwrap_or("Exception"),
            text("exception_message").unwrap_or("")
        ),
        Action::Replace => html!(
            out,
            ": <code>{}</code> ran instead",
            text("replacement_function").unwrap_or("?")
        ),
    }
    out.push_lit("</p>");
    out
}

pub fn value_html(text: &str) -> Html {
    value_html_classed(text, "")
}

/// [`value_html`] with more classes on its `code` elements (`class` starts with a space).
pub fn value_html_classed(text: &str, class: &str) -> Html {
    value_html_folded(text, class, FOLD_CHARS, FOLD_LINES)
}

/// Where a value longer than `chars` characters or `lines` lines is cut for its folded form
/// (its length when it is not).
fn fold_at(text: &str, chars: usize, lines: usize) -> usize {
    let mut cut = text.len();
    if let Some((i, _)) = text.char_indices().nth(chars) {
        cut = i;
    }
    if let Some((i, _)) = text.match_indices('\n').nth(lines.max(1) - 1) {
        cut = cut.min(i);
    }
    cut
}

/// Whether [`value_html_folded`] folds this text.
pub fn folds(text: &str, chars: usize, lines: usize) -> bool {
    fold_at(text, chars, lines) < text.len()
}

/// [`value_html_classed`] folded past `chars` characters or `lines` lines.
pub fn value_html_folded(text: &str, class: &str, chars: usize, lines: usize) -> Html {
    let cut = fold_at(text, chars, lines);
    if cut >= text.len() {
        return markup!("<code class=\"value{}\">{}</code>", class, text);
    }
    markup!(
        "<details class=\"more\"><summary><code class=\"value{}\">{}…</code>\
         <span class=\"more-label\">show all {} characters</span></summary>\
         <code class=\"value{}\">{}</code></details>",
        class,
        &text[..cut],
        text.chars().count(),
        class,
        text
    )
}

/// The link to the object page of an item (`{"cid": ...}` or a bare CID), named for a screen
/// reader by what it is (`what`: "y", "the result"); nothing for an item without a valid CID.
pub fn object_link_named(item: Option<&Value>, what: &str) -> Html {
    let cid = item
        .and_then(|i| i.get("cid"))
        .and_then(Value::as_str)
        .or_else(|| item.and_then(Value::as_str));
    match cid {
        Some(c) if crate::intern::Cid::parse(c).is_some() => markup!(
            " <a class=\"obj\" href=\"/object/{}\" title=\"{}\" aria-label=\"object of {}\">object</a>",
            c,
            c,
            what
        ),
        _ => Html::new(),
    }
}

/// A point in time: UTC in the markup, shown in the browser's local time by `app.js`
/// (`data-time` holds epoch seconds).
pub fn time(at: f64) -> Html {
    if !at.is_finite() || at <= 0.0 {
        return Html::lit("<span class=\"muted\">unknown time</span>");
    }
    let iso = iso_utc(at);
    markup!(
        "<time datetime=\"{}\" data-time=\"{}\">{}</time>",
        iso,
        at,
        iso
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` for epoch seconds (proleptic Gregorian; before 1970 too).
pub fn iso_utc(at: f64) -> String {
    let secs = if at.is_finite() { at.floor() as i64 } else { 0 };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = crate::ids::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn plural(n: usize) -> &'static str {
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
    fn json_values_are_shown_as_json_with_placeholders_by_their_summary() {
        use serde_json::json;
        let f = json!({"__cideldill_placeholder__": true, "summary": "<function f>"});
        assert_eq!(json_shown(&json!("1")), "\"1\"");
        assert_eq!(json_shown(&json!(1)), "1");
        assert_eq!(json_shown(&f), "<function f>");
        assert_eq!(
            json_shown(&json!({"a b": [f, null, "x"]})),
            "{\"a b\":[<function f>,null,\"x\"]}"
        );
        // The server's own markers are not values of the program.
        assert_eq!(json_shown(&json!("<cid:ab missing>")), "<cid:ab missing>");
        // Pickled values are Python reprs already.
        let dill = json!({"serialization_format": "dill"});
        assert_eq!(item_shown(&json!("'x'"), Some(&dill)), "'x'");
        let item = json!({"serialization_format": "json"});
        assert_eq!(item_shown(&json!("x"), Some(&item)), "\"x\"");
    }

    #[test]
    fn times_are_utc_in_the_markup() {
        assert_eq!(iso_utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_795_000_000.5), "2026-11-18T11:06:40Z");
        assert_eq!(iso_utc(951_782_400.0), "2000-02-29T00:00:00Z");
        assert!(time(1.5).contains("data-time=\"1.5\""));
        assert!(time(0.0).contains("unknown time"));
    }

    #[test]
    fn long_values_fold_behind_show_more() {
        assert_eq!(value_html("<b>"), "<code class=\"value\">&lt;b&gt;</code>");
        let long = "é".repeat(1000);
        let html = value_html(&long);
        assert!(html.contains("show all 1000 characters"), "{html}");
        assert!(html.starts_with("<details class=\"more\">"));
        let lines = "x\n".repeat(20);
        assert!(value_html(&lines).contains("show all 40 characters"));
    }

    #[test]
    fn the_stylesheet_closes_every_block() {
        let mut depth = 0i32;
        for (i, c) in APP_CSS.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            assert!(depth >= 0, "app.css: '}}' without a block at byte {i}");
            assert!(depth <= 2, "app.css: a block left open before byte {i}");
        }
        assert_eq!(depth, 0, "app.css: a block is never closed");
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
