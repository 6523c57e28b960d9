//! The Paused page (`/`): one card per paused call, newest first, marked before or after the
//! call, with the actions the Python client accepts there (after a call: continue only), and
//! why a conditional breakpoint paused it; below them the newest lines logpoints wrote.

use serde_json::Value;

use super::markup::{html, markup};
use super::{item_shown, json_shown, object_link_named, shown, time, value_html, Html, View};
use crate::calls::PauseCause;
use crate::service::{self, PausedExecution, Payloads, When};
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// Characters of a page's address shown on a card (all of it in its tooltip).
const PAGE_URL_CHARS: usize = 100;

/// Builtin exceptions offered by the Raise action (the client raises builtins only).
const EXCEPTIONS: [&str; 10] = [
    "ValueError",
    "RuntimeError",
    "KeyError",
    "TypeError",
    "IndexError",
    "AttributeError",
    "ZeroDivisionError",
    "PermissionError",
    "TimeoutError",
    "Exception",
];

/// Logpoint lines the page shows, the newest.
const LOG_LINES: usize = 50;

/// The page (its cards and the log are the live regions). `?log_after=N`: the log shows only
/// the lines written after line `N` (its Clear button sets it; the lines stay recorded).
pub fn page(shared: &Shared, query: &[(String, String)]) -> View {
    let log_after = super::param(query, "log_after")
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    View::new(
        "Paused",
        "/",
        markup!(
            "<div class=\"bar\"><h1>Paused calls</h1><button type=\"button\" data-act=\"continue-all\">\
             Continue all</button></div><p class=\"error\" id=\"page-error\" role=\"alert\"></p>\
             <section id=\"origin-requests\" data-live aria-label=\"Pages asking to report calls\">{}</section>\
             <div id=\"cards\" data-live data-keyed>{}</div>\
             <div id=\"polls\" data-live hidden>{}</div>\
             <section class=\"log\" id=\"log\" data-live aria-label=\"Log\">{}</section>",
            origin_requests_html(shared),
            cards_html(shared),
            polls_html(shared),
            log_html(shared, log_after)
        ),
    )
}

/// The web pages refused on the browser-client endpoints, waiting for the person's answer:
/// "<origin> wants to report calls to this debugger: Allow / Deny" (`POST /api/origins`).
/// Nothing at all when none waits.
fn origin_requests_html(shared: &Shared) -> Html {
    let view = service::origins(shared);
    let mut out = Html::new();
    for p in &view.pending {
        let origin = p.origin.as_str();
        let form = |decision: &str, label: &str, class: &str| {
            markup!(
                "<form class=\"inline\" data-api=\"/api/origins?for={}&amp;decision={}\" data-then=\"refresh\">\
                 <input type=\"hidden\" name=\"origin\" value=\"{}\">\
                 <input type=\"hidden\" name=\"decision\" value=\"{}\">\
                 <button type=\"submit\" class=\"{}\" data-origin-decision=\"{}\">{}</button></form>",
                encode_segment(origin),
                decision,
                origin,
                decision,
                class,
                decision,
                label
            )
        };
        html!(
            out,
            "<div class=\"origin-request\" data-origin=\"{}\"><p><strong>{}</strong> \
             wants to report calls to this debugger <span class=\"hint\">({} refused request{}, \
             the first to <code>{}</code>). Allowed, its pages can report their calls, wait on \
             their pauses and answer their REPL; nothing else.</span></p>{}{}\
             <p class=\"error\" role=\"alert\"></p></div>",
            origin,
            origin,
            p.requests,
            super::plural(p.requests as usize),
            p.path,
            form("allow", "Allow", "primary"),
            form("deny", "Deny", "")
        );
    }
    if !view.granted.is_empty() {
        out.push_lit(
            "<div class=\"granted-origins\"><span class=\"hint\">Web pages allowed to report calls:</span>",
        );
        for origin in &view.granted {
            html!(
                out,
                " <span class=\"granted-origin\" data-origin=\"{}\"><code>{}</code>\
                 <form class=\"inline\" data-api=\"/api/origins?for={}&amp;decision=deny\" data-then=\"refresh\">\
                 <input type=\"hidden\" name=\"origin\" value=\"{}\">\
                 <input type=\"hidden\" name=\"decision\" value=\"deny\">\
                 <button type=\"submit\" class=\"small\" data-origin-decision=\"revoke\" \
                 title=\"Deny: its calls are refused again\">Revoke</button></form></span>",
                origin,
                origin,
                encode_segment(origin),
                origin
            );
        }
        out.push_lit("<p class=\"error\" role=\"alert\"></p></div>");
    }
    out
}

/// The newest lines logpoints wrote, oldest first (the list keeps to its bottom as lines come);
/// nothing at all before the first line.
fn log_html(shared: &Shared, after: u64) -> Html {
    let log = service::logpoint_lines(shared, after, LOG_LINES);
    if log.lines.is_empty() && after == 0 {
        return Html::new();
    }
    let n = log.lines.len();
    let written = log.last_seq.saturating_sub(after);
    let what = if written > n as u64 {
        format!("the newest {n} of {written} lines written by logpoints")
    } else {
        format!("{n} line{} written by logpoints", super::plural(n))
    };
    let mut out = markup!(
        "<div class=\"bar\"><h2>Log</h2><span class=\"hint\">{}{}, newest last</span>",
        what,
        if after > 0 {
            " since it was cleared"
        } else {
            ""
        }
    );
    if after > 0 {
        out.push_lit(" <a href=\"/\" class=\"hint\">Show the earlier lines</a>");
    }
    if n > 0 {
        html!(
            out,
            " <button type=\"button\" class=\"small\" data-clear-log=\"{}\">Clear</button>",
            log.last_seq
        );
    }
    out.push_lit(
        "</div><ol class=\"log-lines\" data-stick=\"bottom\" tabindex=\"0\" \
         aria-label=\"Lines written by logpoints\">",
    );
    for l in &log.lines {
        html!(
            out,
            "<li data-seq=\"{}\" title=\"call {}\">{} <span class=\"fn\">{}</span> \
             <code class=\"msg\">{}</code></li>",
            l.seq,
            l.call_id,
            time(l.logged_at),
            l.function_name,
            l.message
        );
    }
    out.push_lit("</ol>");
    out
}

/// Why a conditional breakpoint paused the call: its condition and hit count, or, when the
/// condition could not be decided, that (prominently: the call did not pass its condition).
fn pause_cause(out: &mut Html, cause: &PauseCause) {
    let condition = cause.condition.as_deref();
    if cause.reason == "condition_error" || cause.error.is_some() {
        html!(
            out,
            "<div class=\"cond-error\" role=\"alert\"><strong>Paused because the condition could \
             not be decided:</strong> <code>{}</code>",
            cause.error.as_deref().unwrap_or("no reason given")
        );
        if let Some(c) = condition {
            html!(out, "<br>Condition: <code>{}</code>", c);
        }
        out.push_lit("</div>");
        return;
    }
    let hits = cause.hit_count;
    if condition.is_none() && hits.is_none() {
        return;
    }
    out.push_lit("<p class=\"meta cause\">");
    if let Some(c) = condition {
        html!(out, "Condition <code>{}</code> held", c);
    }
    if let Some(n) = hits {
        html!(
            out,
            "{}hit count {}",
            if condition.is_some() { " · " } else { "" },
            n
        );
    }
    out.push_lit("</p>");
}

/// When each paused program last polled, read by `app.js` to say so on its card ("last polled
/// 2 s ago"). Apart from the cards, so that a card does not change at every refresh.
fn polls_html(shared: &Shared) -> Html {
    let mut out = Html::new();
    for p in service::paused(shared, Payloads::Omitted).paused {
        html!(
            out,
            "<span data-poll-of=\"{}\" data-polled=\"{}\"{}></span>",
            p.id,
            p.last_poll_at,
            if p.gone { " data-gone" } else { "" }
        );
    }
    out
}

fn cards_html(shared: &Shared) -> Html {
    let mut paused = service::paused(shared, Payloads::Omitted).paused;
    if paused.is_empty() {
        return empty(&shared.config.port_file);
    }
    paused.sort_by(|a, b| b.paused_at.total_cmp(&a.paused_at));
    let methods: Vec<&str> = paused.iter().map(|p| p.method_name()).collect();
    let functions = service::functions_shown(shared, &methods, super::breakpoints::SHOWN_FUNCTIONS);
    let mut out = Html::new();
    for p in &paused {
        let prefill = (p.when == When::Before).then(|| service::modify_prefill(shared, &p.call));
        card(&mut out, p, &functions.signatures, prefill);
    }
    out
}

/// The empty page; `port_file` is the one this server writes.
fn empty(port_file: &std::path::Path) -> Html {
    markup!(
        "<section class=\"empty\"><h2>Nothing is paused</h2><p>Calls of the functions your program \
         wraps appear here as soon as they pause, without a reload.</p><p>Instrument a program with \
         the CID el Dill client:</p><pre><code>from cideldill_client import with_debug\n\
         with_debug(\"ON\")\nadd = with_debug(add)</code></pre><p>It finds this server through \
         its port file <code>{}</code> (the client reads <code>$CIDELDILL_PORT_FILE</code>, else \
         <code>$CIDELDILL_HOME/port</code>, else <code>~/.cideldill/port</code>), or set \
         <code>CIDELDILL_SERVER_URL</code> to this page's address. Or try the demo: \
         <code>python3 scripts/demo_app.py</code>.</p></section>",
        port_file.display().to_string()
    )
}

/// `file:line` of the frame nearest the call (stacks list the innermost caller first), when
/// the client sent a stack.
fn call_site(call_site: &Value) -> Option<String> {
    let frames = call_site.get("stack_trace")?.as_array()?;
    let f = frames.first()?;
    let file = f.get("filename")?.as_str()?;
    let line = f.get("lineno").map(|l| l.to_string()).unwrap_or_default();
    let func = f.get("function").and_then(Value::as_str).unwrap_or("");
    Some(format!("{file}:{line} in {func}"))
}

/// The names of the parameters a positional argument can bind to, in order, from a Python
/// signature such as `(self, x, y=1, *args, z, **kw)`: up to `*args` (whose name is not
/// one argument's) or a bare `*`.
pub fn positional_names(signature: &str) -> Vec<String> {
    let inner = signature
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.rsplit_once(')'))
        .map_or("", |(params, _)| params);
    let mut names = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    let mut parts = Vec::new();
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    for p in parts {
        let p = p.trim();
        if p.is_empty() || p == "/" {
            continue;
        }
        if p.starts_with('*') {
            break;
        }
        let name = p.split([':', '=']).next().unwrap_or("").trim();
        if !name.is_empty() {
            names.push(name.to_owned());
        }
    }
    names
}

fn card(
    out: &mut Html,
    p: &PausedExecution,
    signatures: &std::collections::BTreeMap<String, String>,
    prefill: Option<(Value, Value)>,
) {
    let d = &p.call_data;
    let method = p.method_name();
    let (when, when_text) = match p.when {
        When::Before => ("before", "before the call"),
        When::After => ("after", "after the call"),
    };
    let id = p.id.as_str();
    let call = &p.call;
    let mut undecided = if p.cause.reason == "condition_error" {
        Html::lit(" <span class=\"badge cond-error\">condition error</span>")
    } else {
        Html::new()
    };
    if p.gone {
        undecided.push_lit(
            " <span class=\"badge gone\" title=\"Its program stopped polling: it was probably \
             killed. Nothing can run in it; dismiss the pause.\">program gone</span>",
        );
    }
    html!(
        out,
        "<article class=\"card {}{}\" tabindex=\"0\" data-key=\"{}\" data-pause-id=\"{}\" data-when=\"{}\">\
         <h2><span class=\"fn\">{}</span> <span class=\"badge {}\">{}</span>{}</h2>\
         <p class=\"meta\"><span data-since=\"{}\">paused</span> · <span class=\"polled\" \
         data-last-poll=\"{}\"{}>{}</span>",
        when,
        if p.gone { " gone" } else { "" },
        id,
        id,
        when,
        method,
        when,
        when_text,
        undecided,
        p.paused_at,
        id,
        if p.gone { " data-gone" } else { "" },
        if p.gone {
            "program gone: it stopped polling"
        } else {
            "polling"
        }
    );
    // A web page's call shows the page's origin, as its browser said it (the `Origin` header):
    // a page cannot pass for a program, or for a page of another origin.
    if let Some(origin) = call.origin() {
        html!(
            out,
            " · <span class=\"badge origin\" title=\"Reported by a web page of this origin (the \
             browser's Origin header)\">page origin {}</span>",
            origin
        );
    }
    // A web page (the browser debug client, whose pid is 0) by its address; a program by pid.
    match call.page_url.as_str().filter(|u| !u.is_empty()) {
        Some(url) => {
            let short: String = url.chars().take(PAGE_URL_CHARS).collect();
            let more = if short.len() < url.len() { "…" } else { "" };
            html!(
                out,
                " · page <span class=\"page\" title=\"{}\">{}{}</span>",
                url,
                short,
                more
            );
        }
        None => html!(out, " · process {}", call.process.pid),
    }
    if let Some(site) = call_site(&call.call_site.to_value()) {
        html!(
            out,
            " · <a class=\"site\" href=\"/callstack/{}\">{}</a>",
            id,
            site
        );
    }
    out.push_lit("</p>");
    pause_cause(out, &p.cause);
    let signature = call.signature.as_str();
    if let Some(sig) = signature {
        html!(out, "<p class=\"sig\"><code>{}{}</code></p>", method, sig);
    }
    // The object the call was made on: a proxied object's method call names the object (its
    // `self`), a wrapped function the function.
    if let Some(target) = d.get("pretty_target").filter(|t| !t.is_null()) {
        let item = d.get("target");
        html!(
            out,
            "<p class=\"target\"><span class=\"label\" title=\"The object the call was made on: \
             self, for a method\">target</span> {}{}</p>",
            value_html(&item_shown(target, item)),
            object_link_named(item, "the target")
        );
    }
    out.push_lit("<dl class=\"args\">");
    let names = signature.map(positional_names).unwrap_or_default();
    // After a modified call, the arguments it ran with (the resolution line names the ones it
    // was called with).
    let ran = d.get("resolution").filter(|r| {
        p.when == When::After && r.get("action").and_then(Value::as_str) == Some("modify")
    });
    let d = ran.and_then(Value::as_object).unwrap_or(d);
    if let Some(args) = d.get("pretty_args").and_then(Value::as_array) {
        for (i, a) in args.iter().enumerate() {
            let cid = d.get("args").and_then(|x| x.get(i));
            let name = names.get(i).cloned().unwrap_or_else(|| i.to_string());
            html!(
                out,
                "<dt>{}</dt><dd>{}{}</dd>",
                name,
                value_html(&item_shown(a, cid)),
                object_link_named(cid, &name)
            );
        }
    }
    if let Some(kwargs) = d.get("pretty_kwargs").and_then(Value::as_object) {
        for (k, v) in kwargs {
            let cid = d.get("kwargs").and_then(|x| x.get(k));
            html!(
                out,
                "<dt>{}</dt><dd>{}{}</dd>",
                k,
                value_html(&item_shown(v, cid)),
                object_link_named(cid, k)
            );
        }
    }
    out.push_lit("</dl>");
    let d = &p.call_data;
    out.push(&super::resolution_html(method, d));
    if p.when == When::After {
        // The result is a JSON item when the caller prefers JSON (the browser client).
        let json = call.preferred_json;
        let text = |v| if json { json_shown(v) } else { shown(v) };
        match d.get("exception").filter(|e| !e.is_null()) {
            Some(e) => html!(
                out,
                "<div class=\"outcome raised\">raised {}</div>",
                value_html(&text(e))
            ),
            None => {
                let result = d.get("pretty_result").map(text).unwrap_or_default();
                html!(
                    out,
                    "<div class=\"outcome\">returned {}</div>",
                    value_html(&result)
                );
            }
        }
    }
    if !p.repl_sessions.is_empty() {
        out.push_lit("<p class=\"meta\">REPL sessions:");
        for sid in &p.repl_sessions {
            html!(
                out,
                " <a href=\"/repl/{}\">{}</a>",
                encode_segment(sid),
                &sid[..sid.len().min(8)]
            );
        }
        out.push_lit("</p>");
    }
    out.push_lit("<div class=\"actions\">");
    if p.gone {
        out.push_lit(
            "<button type=\"button\" data-act=\"dismiss\" class=\"primary\" title=\"Remove this \
             pause and the other pauses of its program that stopped polling (if it comes back, \
             it continues)\">Dismiss</button>",
        );
    }
    out.push_lit("<button type=\"button\" data-act=\"continue\">Continue</button>");
    if let Some(prefill) = prefill {
        actions_before(out, p, signature, method, signatures, &prefill);
    }
    html!(
        out,
        "<form class=\"inline\" data-api=\"/api/repl/start\" data-then=\"go:/repl/{{session_id}}\">\
         <input type=\"hidden\" name=\"pause_id\" value=\"{}\">\
         <input type=\"hidden\" name=\"scope\" value=\"true\" data-json>\
         <button type=\"submit\" class=\"quiet\">Open REPL</button></form>",
        id
    );
    out.push_lit("</div><p class=\"error\" role=\"alert\"></p></article>");
}

/// The actions the client accepts before a call: skip, raise, modify, replace.
fn actions_before(
    out: &mut Html,
    p: &PausedExecution,
    sig: Option<&str>,
    method: &str,
    signatures: &std::collections::BTreeMap<String, String>,
    (shown, items): &(Value, Value),
) {
    // Modify starts from each argument's value where JSON holds it exactly, else from its item
    // (`{"cid": ...}`, which the client resolves from its own object cache); `app.js` sends the
    // item for every argument left as it was, so an unchanged argument keeps its exact value.
    let modify = serde_json::to_string_pretty(shown).unwrap_or_default();
    let exceptions: Html = EXCEPTIONS
        .iter()
        .map(|e| markup!("<option>{}</option>", e))
        .collect();
    let fields = modify_fields(p, sig, shown, items);
    html!(
        out,
        "<details><summary>Skip with a result</summary><label>Result (JSON) \
         <textarea name=\"fake_result\" rows=\"2\">null</textarea></label>\
         <button type=\"button\" data-act=\"skip\">Skip the call</button></details>\
         <details><summary>Raise</summary><label>Exception <select name=\"exception_type\">{}</select></label>\
         <label>Message <input name=\"exception_message\" value=\"raised by the debugger\"></label>\
         <button type=\"button\" data-act=\"raise\">Raise</button></details>\
         <details><summary>Modify arguments</summary>{}<label>Or all arguments at once (JSON; \
         edited, it is sent instead of the fields above; an argument left as it is keeps its \
         exact value, a <code>{{\"cid\": ...}}</code> item stands for a value JSON cannot hold) \
         <textarea name=\"modified\" rows=\"6\" data-shown=\"{}\" \
         data-items=\"{}\">{}</textarea></label>\
         <button type=\"button\" data-act=\"modify\">Run with these</button></details>",
        exceptions,
        fields,
        shown.to_string(),
        items.to_string(),
        modify
    );
    let same: Html = signatures
        .iter()
        .filter(|(name, s)| name.as_str() != method && Some(s.as_str()) == sig)
        .map(|(name, _)| markup!("<option>{}</option>", name))
        .collect();
    if !same.is_empty() {
        html!(
            out,
            "<details><summary>Replace with</summary><label>Function <select name=\"replacement_function\">{}</select></label>\
             <button type=\"button\" data-act=\"replace\">Run it instead</button></details>",
            same
        );
    }
}

/// One field per argument for Modify, named from the signature, with the value's repr beside
/// it: prefilled with the argument's JSON value where JSON holds it exactly, else empty. A field
/// left as it is sends the argument's own item (`app.js`), so only the changed ones change.
fn modify_fields(p: &PausedExecution, sig: Option<&str>, shown: &Value, items: &Value) -> Html {
    let d = &p.call_data;
    let names = sig.map(positional_names).unwrap_or_default();
    let mut out = Html::lit("<div class=\"modify-args\">");
    let mut field = |label: String,
                     key: (&str, String),
                     repr: Html,
                     plain: Option<&Value>,
                     item: &Value| {
        let is_plain = plain.is_some_and(|v| v.get("cid").is_none());
        let text = if is_plain {
            plain.map(Value::to_string).unwrap_or_default()
        } else {
            String::new()
        };
        html!(
            out,
            "<label class=\"modify-arg\"><span class=\"arg-name\">{}</span> <span class=\"arg-repr\">{}</span>\
             <textarea rows=\"1\" {}=\"{}\" data-item=\"{}\" data-start=\"{}\" placeholder=\"{}\" \
             spellcheck=\"false\">{}</textarea></label>",
            label,
            repr,
            key.0,
            key.1,
            item.to_string(),
            text.clone(),
            if is_plain {
                "a JSON value"
            } else {
                "unchanged (JSON cannot hold this value): write a JSON value to replace it"
            },
            text
        );
    };
    let pretty_args = d.get("pretty_args").and_then(Value::as_array);
    for (i, item) in items["args"].as_array().into_iter().flatten().enumerate() {
        let repr = pretty_args
            .and_then(|a| a.get(i))
            .map(|v| value_html(&item_shown(v, Some(item))))
            .unwrap_or_default();
        let label = names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("argument {i}"));
        field(
            label,
            ("data-arg", i.to_string()),
            repr,
            shown["args"].get(i),
            item,
        );
    }
    let pretty_kwargs = d.get("pretty_kwargs").and_then(Value::as_object);
    for (k, item) in items["kwargs"].as_object().into_iter().flatten() {
        let repr = pretty_kwargs
            .and_then(|m| m.get(k))
            .map(|v| value_html(&item_shown(v, Some(item))))
            .unwrap_or_default();
        field(
            k.clone(),
            ("data-kwarg", k.clone()),
            repr,
            shown["kwargs"].get(k),
            item,
        );
    }
    out.push_lit("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{paused_call, shared};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    #[test]
    fn positional_arguments_are_named_from_the_signature() {
        assert_eq!(positional_names("(x, y=1)"), ["x", "y"]);
        assert_eq!(
            positional_names("(self, a: dict[str, int] = {'k': (1, 2)}, /, b='x,y', *args, c)"),
            ["self", "a", "b"]
        );
        assert_eq!(positional_names("(*, k)"), Vec::<String>::new());
        assert_eq!(positional_names("() -> None"), Vec::<String>::new());
        assert_eq!(positional_names("nonsense"), Vec::<String>::new());
    }

    #[test]
    fn an_empty_session_says_how_to_instrument_a_program() {
        let s = shared();
        let html = page(&s, &[]).main;
        assert!(html.contains("Nothing is paused"));
        assert!(html.contains("with_debug"));
        assert!(html.contains("CIDELDILL_SERVER_URL"));
    }

    #[test]
    fn program_data_is_escaped_in_every_field() {
        let s = shared();
        paused_call(&s, HOSTILE, &[json!(HOSTILE), json!({"k": HOSTILE})]);
        let html = page(&s, &[]).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("</script>"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("before the call"));
        assert!(html.contains("data-act=\"skip\""));
    }

    #[test]
    fn modify_starts_from_plain_values_and_keeps_the_items() {
        let s = shared();
        paused_call(&s, "f", &[json!(5), json!({"k": [1, "x"]})]);
        let html = page(&s, &[]).main;
        let start = html.find("name=\"modified\"").unwrap();
        let editor = &html[start..html[start..].find("</textarea>").unwrap() + start];
        // What is shown is the plain values; the items stay beside them for unchanged ones.
        assert!(
            editor.contains("data-shown=\"{&quot;args&quot;:[5,{&quot;k&quot;:[1,&quot;x&quot;]}]"),
            "{editor}"
        );
        assert!(
            editor.contains("data-items=\"{&quot;args&quot;:[{&quot;cid&quot;:"),
            "{editor}"
        );
        assert!(
            editor.contains("&quot;k&quot;: ["),
            "pretty-printed: {editor}"
        );
    }

    #[test]
    fn a_conditional_pause_says_which_condition_held_and_the_hit_count() {
        let s = shared();
        let condition = format!("args[0] == {HOSTILE:?}");
        crate::service::breakpoint_add(
            &s,
            &crate::service::testing::body(json!({"function_name": "f", "condition": condition})),
        )
        .unwrap();
        paused_call(&s, "f", &[json!(HOSTILE)]);
        let html = page(&s, &[]).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains(&format!(
                "<p class=\"meta cause\">Condition <code>{}</code> held · hit count 1</p>",
                crate::ui::esc(&condition)
            )),
            "{html}"
        );
        assert!(!html.contains("cond-error"));
    }

    #[test]
    fn a_pause_whose_condition_could_not_be_decided_says_so_prominently() {
        let s = shared();
        crate::service::breakpoint_add(
            &s,
            &crate::service::testing::body(
                json!({"function_name": "f", "condition": "kwargs[\"<b>\"] > 1"}),
            ),
        )
        .unwrap();
        paused_call(&s, "f", &[json!(1)]);
        let html = page(&s, &[]).main;
        assert!(
            html.contains("<span class=\"badge cond-error\">condition error</span>"),
            "{html}"
        );
        assert!(html.contains(
            "<div class=\"cond-error\" role=\"alert\"><strong>Paused because the condition could \
             not be decided:</strong> <code>"
        ));
        assert!(html.contains("<br>Condition: <code>kwargs[&quot;&lt;b&gt;&quot;] &gt; 1</code>"));
        assert!(!html.contains("<b>"), "{html}");
    }

    #[test]
    fn the_log_shows_the_newest_lines_escaped_and_nothing_before_the_first() {
        let s = shared();
        let html = page(&s, &[]).main;
        assert!(
            html.contains(
                "<section class=\"log\" id=\"log\" data-live aria-label=\"Log\"></section>"
            ),
            "{html}"
        );
        crate::service::breakpoint_add(
            &s,
            &crate::service::testing::body(
                json!({"function_name": HOSTILE, "log_message": "got {args[0]}"}),
            ),
        )
        .unwrap();
        for i in 0..(LOG_LINES + 2) {
            let arg = if i == LOG_LINES + 1 {
                json!(HOSTILE)
            } else {
                json!(i)
            };
            let started = crate::service::testing::start(
                &s,
                &crate::service::testing::start_body(HOSTILE, &[arg]),
            )
            .unwrap();
            let call_id = started["call_id"].as_str().unwrap().to_owned();
            crate::service::testing::complete(
                &s,
                &crate::service::testing::complete_body(&call_id, &json!(null)),
            )
            .unwrap();
        }
        let html = page(&s, &[]).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("the newest 50 of 52 lines written by logpoints, newest last"));
        assert_eq!(html.matches("<li data-seq=").count(), LOG_LINES);
        assert!(
            !html.contains("<code class=\"msg\">got 1</code>"),
            "the oldest are left out"
        );
        let last = html.rfind("<li data-seq=").unwrap();
        assert!(
            html[last..].contains("<code class=\"msg\">got &lt;/script&gt;&lt;img"),
            "newest last: {}",
            &html[last..]
        );
        assert!(html.contains("data-stick=\"bottom\""));
        // Cleared: only the lines after the one named; the others are still there to show.
        assert!(html.contains("data-clear-log=\"52\""), "{html}");
        let q = [("log_after".to_owned(), "51".to_owned())];
        let html = page(&s, &q).main;
        assert!(html.contains("1 line written by logpoints since it was cleared"));
        assert_eq!(html.matches("<li data-seq=").count(), 1);
        assert!(html.contains("Show the earlier lines"));
        let q = [("log_after".to_owned(), "52".to_owned())];
        let html = page(&s, &q).main;
        assert_eq!(html.matches("<li data-seq=").count(), 0);
        assert!(
            html.contains("0 lines written by logpoints since it was cleared"),
            "{html}"
        );
        assert!(!html.contains("data-clear-log"));
    }

    #[test]
    fn a_web_pages_call_shows_its_address_and_json_values() {
        use crate::service::testing::{body, start};
        let s = shared();
        crate::service::breakpoint_add(&s, &body(json!({"function_name": "add"}))).unwrap();
        let item = |v: Value| {
            let text = v.to_string();
            json!({"cid": crate::cas::cid_of(text.as_bytes()), "data": text, "serialization_format": "json"})
        };
        let f = json!({"__cideldill_placeholder__": true, "summary": "<function f>"});
        let answer = start(
            &s,
            &body(json!({
                "method_name": "add", "args": [item(json!("1")), item(json!([1, f]))], "kwargs": {},
                "process_pid": 0, "process_start_time": 1795311683.5, "signature": "(a, b)",
                "page_url": format!("http://127.0.0.1:8000/{HOSTILE}"), "preferred_format": "json",
            })),
        )
        .unwrap();
        assert_eq!(answer["action"], "poll");
        let html = page(&s, &[]).main;
        assert!(html.contains(" · page <span class=\"page\""), "{html}");
        assert!(
            html.contains("http://127.0.0.1:8000/&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("process 0"), "{html}");
        // The string "1" is not the number 1; a placeholder shows its summary.
        assert!(
            html.contains("<code class=\"value\">&quot;1&quot;</code>"),
            "{html}"
        );
        assert!(
            html.contains("<code class=\"value\">[1,&lt;function f&gt;]</code>"),
            "{html}"
        );
    }

    #[test]
    fn an_after_pause_offers_continue_only() {
        let s = shared();
        let (pause_id, call_id) = paused_call(&s, "f", &[json!(1)]);
        crate::service::testing::resume(&s, &pause_id);
        crate::service::testing::complete(
            &s,
            &crate::service::testing::complete_body(&call_id, &json!(HOSTILE)),
        )
        .unwrap();
        let html = page(&s, &[]).main;
        assert!(html.contains("after the call"), "{html}");
        assert!(html.contains("returned"));
        assert!(html.contains("data-act=\"continue\""));
        assert!(!html.contains("data-act=\"skip\""));
        assert!(!html.contains("<img"));
    }
}
