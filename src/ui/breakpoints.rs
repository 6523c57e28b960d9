//! The Breakpoints page (`/breakpoints`): the master switch (pausing on or off) with a line
//! saying how many breakpoints will pause; add a breakpoint by function name (suggestions from
//! the registered functions, an optional condition), switch one on or off, remove one, set its
//! before- and
//! after-behavior, replacement, condition, hit count condition, log message and one-shot flag,
//! reset its hit count, set the global default behavior; each breakpoint's history
//! (`/breakpoint/<name>/history`); and `/breakpoints/check`, the error of an option's text
//! with its position marked, which the page shows beside the field when saving it failed.

use serde_json::Value;

use super::markup::{html, markup};
use super::{param, shown, time, Answer, Html, View};
use crate::breakpoints::{After, Before, Global};
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// What each global default behavior does, in the words of the page.
const GLOBAL_HELP: [(Global, &str); 4] = [
    (
        Global::Stop,
        "pause before and after every call with a breakpoint",
    ),
    (Global::Go, "let every call run without pausing"),
    (
        Global::Exception,
        "pause only after a call that raised an exception",
    ),
    (
        Global::StopException,
        "pause before every call, and after calls (also those that raised)",
    ),
];

/// Most registered functions a form suggests, and most replacement candidates a breakpoint
/// offers (a registry holds up to 100,000 functions).
pub const SHOWN_FUNCTIONS: usize = 1000;

/// The page: add form and global behavior (static), the table (live).
pub fn page(shared: &Shared) -> View {
    let listing = service::breakpoints(shared);
    let wanted: Vec<&str> = listing.breakpoints.iter().map(String::as_str).collect();
    let functions = service::functions_shown(shared, &wanted, SHOWN_FUNCTIONS);
    let global = service::default_behavior(shared).behavior;
    let mut out = Html::lit("<div class=\"bar\"><h1>Breakpoints</h1></div>");
    // The master switch and what will pause, live (changed from here, by REST or an agent).
    html!(
        out,
        "<section class=\"master\" id=\"pausing-master\" data-live data-carry>{}</section>",
        master(global, &listing)
    );
    // Suggestions: registered functions that have no breakpoint yet.
    out.push_lit(
        "<form class=\"inline add\" data-api=\"/api/breakpoints\" data-then=\"refresh\" data-reset data-check>\
         <label>Function <input name=\"function_name\" list=\"function-names\" required \
         autocomplete=\"off\" placeholder=\"module.function or Class.method\"></label>\
         <label class=\"grow\">Condition (optional) <input name=\"condition\" data-optional \
         autocomplete=\"off\" autocapitalize=\"off\" spellcheck=\"false\" \
         placeholder=\"e.g. args[0] &gt; 100\"></label>\
         <input type=\"hidden\" name=\"keep_signature\" value=\"true\" data-json>\
         <button type=\"submit\">Add breakpoint</button><div class=\"error\" role=\"alert\"></div>\
         <datalist id=\"function-names\">",
    );
    for name in functions
        .names
        .iter()
        .filter(|n| !listing.breakpoints.contains(n))
    {
        html!(out, "<option value=\"{}\">", name);
    }
    out.push_lit("</datalist></form>");
    html!(
        out,
        "<form class=\"inline\" data-api=\"/api/behavior\" data-then=\"refresh\">\
         <label>Global default behavior <select name=\"behavior\" data-submit>{}</select></label>\
         <p class=\"hint\" id=\"global-help\" data-live>{}</p><p class=\"error\" role=\"alert\"></p></form>",
        options(
            GLOBAL_HELP.iter().map(|(g, _)| g.as_str()),
            global.as_str()
        ),
        global_help(global)
    );
    // One <tbody> per breakpoint, each its own keyed part of the live table: a breakpoint
    // being edited waits while its field has the focus, the others stay live; an open options
    // panel, typed text and an error beside a field carry over to the fresh version.
    html!(
        out,
        "<table class=\"grid breakpoints\" id=\"breakpoint-table\" data-live data-keyed data-carry>{}</table>",
        table(global, &listing, &functions.signatures)
    );
    View::new("Breakpoints", "/breakpoints", out)
}

/// Whether a breakpoint of the listing will pause some call (with pausing on): switched on,
/// not a logpoint, and its behaviors stop before or after a call.
fn will_pause(global: Global, listing: &service::BreakpointListing, name: &str) -> bool {
    listing
        .breakpoint_enabled
        .get(name)
        .copied()
        .unwrap_or(true)
        && !listing.breakpoint_log_messages.contains_key(name)
        && crate::breakpoints::may_pause(
            global,
            listing
                .breakpoint_behaviors
                .get(name)
                .copied()
                .unwrap_or(Before::Yield),
            listing
                .breakpoint_after_behaviors
                .get(name)
                .copied()
                .unwrap_or(After::Yield),
        )
}

/// The master switch and the line that says what will pause.
fn master(global: Global, listing: &service::BreakpointListing) -> Html {
    let total = listing.breakpoints.len();
    let pausing = listing.pausing;
    let pause = listing
        .breakpoints
        .iter()
        .filter(|n| will_pause(global, listing, n))
        .count();
    let off = listing
        .breakpoint_enabled
        .values()
        .filter(|on| !**on)
        .count();
    let logs = listing
        .breakpoint_log_messages
        .keys()
        .filter(|n| listing.breakpoint_enabled.get(*n).copied().unwrap_or(true))
        .count();
    let mut details = Vec::new();
    if off > 0 {
        details.push(format!("{off} switched off"));
    }
    if logs > 0 {
        details.push(format!(
            "{logs} only log{}",
            if logs == 1 { "s" } else { "" }
        ));
    }
    let details = if details.is_empty() {
        String::new()
    } else {
        format!(" · {}", details.join(" · "))
    };
    let plural = if total == 1 { "" } else { "s" };
    let summary = if pausing {
        markup!(
            "<strong>{} of {} breakpoint{} will pause</strong>{}",
            pause,
            total,
            plural,
            details
        )
    } else {
        markup!(
            "<strong>Pausing is off: no call pauses.</strong> Every breakpoint keeps its settings; \
             logpoints still log and replacements still apply. With pausing on, {} of {} \
             breakpoint{} will pause{}.",
            pause,
            total,
            plural,
            details
        )
    };
    markup!(
        "<form class=\"master-switch{}\" data-api=\"/api/pausing\" data-then=\"refresh\">\
         <label class=\"switch\"><input type=\"checkbox\" role=\"switch\" name=\"pausing\" \
         data-submit{}> Pause at breakpoints</label>\
         <p class=\"summary\" id=\"pausing-summary\">{}</p><p class=\"error\" role=\"alert\"></p></form>",
        attr(!pausing, " off"),
        attr(pausing, " checked"),
        summary
    )
}

fn global_help(g: Global) -> Html {
    let text = GLOBAL_HELP
        .iter()
        .find(|(x, _)| *x == g)
        .map_or("", |(_, t)| t);
    markup!(
        "Now: <strong>{}</strong>, {}. A breakpoint's own behavior wins over it; \
         <code>yield</code> defers to it.",
        g.as_str(),
        text
    )
}

/// ` selected` (or another attribute) when `on`.
fn attr(on: bool, attribute: &'static str) -> Html {
    if on {
        Html::lit(attribute)
    } else {
        Html::new()
    }
}

fn options<'a>(names: impl Iterator<Item = &'a str>, selected: &str) -> Html {
    options_yielding(names, selected, None)
}

/// Options of a behavior select; `yield` says what it defers to.
fn options_yielding<'a>(
    names: impl Iterator<Item = &'a str>,
    selected: &str,
    global: Option<Global>,
) -> Html {
    let mut out = Html::new();
    for n in names {
        let sel = attr(n == selected, " selected");
        match global {
            Some(g) if n == "yield" => html!(
                out,
                "<option value=\"yield\"{}>yield (global: {})</option>",
                sel,
                g.as_str()
            ),
            _ => html!(out, "<option{}>{}</option>", sel, n),
        }
    }
    out
}

fn table(
    global: Global,
    listing: &service::BreakpointListing,
    signatures: &std::collections::BTreeMap<String, String>,
) -> Html {
    if listing.breakpoints.is_empty() {
        return Html::lit(
            "<tbody data-key=\"empty\"><tr><td><section class=\"empty\"><h2>No breakpoints</h2>\
             <p>Add one above by function name. A program wrapped with <code>with_debug</code> \
             also adds one for each function it wraps.</p></section></td></tr></tbody>",
        );
    }
    let mut out = Html::lit(
        "<thead data-key=\"head\"><tr><th scope=\"col\"><span class=\"visually-hidden\">On</span></th>\
         <th scope=\"col\">Function</th>\
         <th scope=\"col\">Before the call</th><th scope=\"col\">After the call</th>\
         <th scope=\"col\">Replace with</th><th scope=\"col\">Hits</th>\
         <th scope=\"col\"><span class=\"visually-hidden\">Actions</span></th></tr></thead>",
    );
    for name in &listing.breakpoints {
        let before = listing
            .breakpoint_behaviors
            .get(name)
            .copied()
            .unwrap_or(Before::Yield);
        let after = listing
            .breakpoint_after_behaviors
            .get(name)
            .copied()
            .unwrap_or(After::Yield);
        let replacement = listing
            .breakpoint_replacements
            .get(name)
            .map(String::as_str)
            .unwrap_or("");
        let sig = signatures.get(name);
        let api = format!("/api/breakpoints/{}", encode_segment(name));
        let sig_html = sig.map(|s| markup!("<code class=\"sig\" title=\"Signature\">{}</code>", s));
        let enabled = listing
            .breakpoint_enabled
            .get(name)
            .copied()
            .unwrap_or(true);
        let (state, state_text) = if !enabled {
            ("off", "off")
        } else if listing.breakpoint_log_messages.contains_key(name) {
            ("logs", "logs")
        } else if will_pause(global, listing, name) {
            ("pauses", "pauses")
        } else {
            ("runs", "never pauses")
        };
        html!(
            out,
            "<tbody class=\"bp {}\" data-key=\"bp:{}\"><tr data-breakpoint=\"{}\">\
             <td class=\"on\"><form data-api=\"{}/enabled\" data-then=\"refresh\">\
             <input type=\"checkbox\" role=\"switch\" name=\"enabled\" data-submit{} aria-label=\"{}\" \
             title=\"Switch this breakpoint on or off (it keeps its settings)\"><p class=\"error\" role=\"alert\"></p></form></td>\
             <th scope=\"row\"><code class=\"fn\">{}</code> <span class=\"will {}\">{}</span></th>\
             <td data-label=\"Before the call\"><form data-api=\"{}/behavior\" data-then=\"refresh\"><select name=\"behavior\" \
             data-submit aria-label=\"Before {}\">{}</select><p class=\"error\" role=\"alert\"></p></form></td>\
             <td data-label=\"After the call\"><form data-api=\"{}/after_behavior\" data-then=\"refresh\"><select name=\"behavior\" \
             data-submit aria-label=\"After {}\">{}</select><p class=\"error\" role=\"alert\"></p></form></td>\
             <td data-label=\"Replace with\"><form data-api=\"{}/replacement\" data-then=\"refresh\"><select \
             name=\"replacement_function\" data-submit aria-label=\"Replacement of {}\">{}</select>\
             <p class=\"error\" role=\"alert\"></p></form></td>{}\
             <td class=\"row-actions\"><a href=\"/breakpoint/{}/history\">History</a> \
             <form class=\"inline\" data-api=\"{}\" data-method=\"DELETE\" data-then=\"refresh\">\
             <button type=\"submit\" class=\"quiet\">Remove</button><p class=\"error\" role=\"alert\"></p></form></td></tr>\
             <tr class=\"bp-options\" data-breakpoint-options=\"{}\"><td></td><td colspan=\"6\"><div class=\"bp-more\">{}{}</div></td></tr></tbody>",
            state,
            name,
            name,
            api,
            attr(enabled, " checked"),
            name,
            name,
            state,
            state_text,
            api,
            name,
            options_yielding(Before::NAMES.iter().copied(), before.as_str(), Some(global)),
            api,
            name,
            options_yielding(After::NAMES.iter().copied(), after.as_str(), Some(global)),
            api,
            name,
            replacement_options(name, sig.map(String::as_str), replacement, signatures),
            hits_cell(name, &api, listing),
            encode_segment(name),
            api,
            name,
            sig_html,
            options_html(name, &api, listing),
        );
    }
    out
}

/// Whether a breakpoint counts its calls: only one with a condition, hit count or log message.
fn counts(name: &str, listing: &service::BreakpointListing) -> bool {
    listing.breakpoint_conditions.contains_key(name)
        || listing.breakpoint_hit_conditions.contains_key(name)
        || listing.breakpoint_log_messages.contains_key(name)
}

/// The hit count and its reset button.
fn hits_cell(name: &str, api: &str, listing: &service::BreakpointListing) -> Html {
    let n = listing
        .breakpoint_hit_counts
        .get(name)
        .copied()
        .unwrap_or(0);
    let (class, title) = if counts(name, listing) {
        (
            "count",
            "Calls counted so far: those for which the condition held",
        )
    } else {
        (
            "count muted",
            "Only a breakpoint with a condition, hit count or log message counts its calls",
        )
    };
    markup!(
        "<td data-label=\"Hits\" class=\"hits\"><form class=\"inline\" data-api=\"{}/hits\" \
         data-method=\"DELETE\" data-then=\"refresh\"><span class=\"{}\" title=\"{}\" \
         data-hits=\"{}\">{}</span><button type=\"submit\" class=\"quiet small\"{} \
         aria-label=\"Reset the hit count of {}\">Reset</button><p class=\"error\" role=\"alert\"></p></form></td>",
        api,
        class,
        title,
        n,
        n,
        attr(n == 0, " disabled"),
        name,
    )
}

/// What the options panel offers for each text option: field, label, placeholder, help.
const TEXT_OPTIONS: [(&str, &str, &str, &str); 3] = [
    (
        "condition",
        "Condition",
        "e.g. args[0] > 100 and kwargs[\"label\"].startswith(\"item-\")",
        "Only calls for which this expression is true pause (or log). It reads <code>args</code> \
         and <code>kwargs</code>, and <code>result</code> or <code>exception</code> after the call. \
         Empty: every call.",
    ),
    (
        "hit_condition",
        "Hit count",
        "5, >5, >=5 or %5",
        "Which counted calls pause (or log): <code>5</code>: the 5th; <code>&gt;5</code>: those \
         after the 5th; <code>&gt;=5</code>: from the 5th on; <code>%5</code>: every 5th. Empty: all.",
    ),
    (
        "log_message",
        "Log message",
        "e.g. scale={kwargs['scale']} -> {result}",
        "Log a line instead of pausing; each <code>{expression}</code> is replaced by its value. \
         The lines show on the Paused page. Empty: pause as usual.",
    ),
];

/// A breakpoint's options: what is set shows in the summary line (visible without opening
/// it); the panel edits each option with its own form, whose errors show beside the field.
fn options_html(name: &str, api: &str, listing: &service::BreakpointListing) -> Html {
    let values = [
        listing.breakpoint_conditions.get(name),
        listing.breakpoint_hit_conditions.get(name),
        listing.breakpoint_log_messages.get(name),
    ];
    let one_shot = listing.breakpoint_one_shot.iter().any(|n| n == name);
    let mut summary = Html::new();
    for ((_, label, _, _), value) in TEXT_OPTIONS.iter().zip(&values) {
        if let Some(v) = value {
            html!(
                summary,
                "<span class=\"opt\"><span class=\"opt-name\">{}</span> <code>{}</code></span>",
                label,
                v
            );
        }
    }
    if one_shot {
        summary
            .push_lit("<span class=\"opt\"><span class=\"badge one-shot\">one-shot</span></span>");
    }
    if summary.is_empty() {
        summary.push_lit("<span class=\"opt-none\">Condition, hit count, log message</span>");
    }
    let mut out = markup!(
        "<details class=\"bp-options\"><summary><span class=\"opts\">{}</span></summary>\
         <div class=\"option-forms\">",
        summary
    );
    for ((field, label, placeholder, help), value) in TEXT_OPTIONS.iter().zip(&values) {
        html!(
            out,
            "<form class=\"option {}\" data-api=\"{}/{}\" data-then=\"refresh\"{}>\
             <label>{} <input name=\"{}\" value=\"{}\" placeholder=\"{}\" \
             autocomplete=\"off\" autocapitalize=\"off\" spellcheck=\"false\"></label>\
             <button type=\"submit\" class=\"quiet\">Save</button><div class=\"error\" role=\"alert\"></div>\
             <p class=\"hint\">{}</p></form>",
            field,
            api,
            field,
            attr(*field != "hit_condition", " data-check"),
            label,
            field,
            value.map_or("", String::as_str),
            placeholder,
            Html::lit(help),
        );
    }
    html!(
        out,
        "<form class=\"option one-shot\" data-api=\"{}/one_shot\" data-then=\"refresh\">\
         <label class=\"check\"><input type=\"checkbox\" name=\"one_shot\" data-submit{}> \
         One-shot: after its first pause, let every call run</label>\
         <div class=\"error\" role=\"alert\"></div></form></div></details>",
        api,
        attr(one_shot, " checked"),
    );
    out
}

/// `/breakpoints/check?field=condition&text=...`: what the server says of an option's text,
/// as the Breakpoints page shows it beside the field when saving it failed: nothing when it
/// is valid, else the message and, for a parse error, the text with the mistake marked.
pub fn check(query: &[(String, String)]) -> View {
    let field = param(query, "field").unwrap_or("");
    let text = param(query, "text").unwrap_or("");
    let mut out = Html::lit(
        "<div class=\"bar\"><h1>Check a breakpoint option</h1>\
         <a href=\"/breakpoints\">All breakpoints</a></div>",
    );
    let result = if TEXT_OPTIONS.iter().any(|(f, _, _, _)| *f == field) {
        let mut body = serde_json::Map::new();
        body.insert(field.to_owned(), Value::String(text.to_owned()));
        match service::OptionsChange::read(&body) {
            Ok(_) => None,
            Err(e) => {
                let message = e.body.get("message").and_then(Value::as_str).unwrap_or("");
                let column = e
                    .body
                    .get("position")
                    .and_then(|p| p.get("column"))
                    .and_then(Value::as_u64)
                    .and_then(|c| usize::try_from(c).ok());
                Some(option_error(message, text, column))
            }
        }
    } else {
        Some(markup!(
            "<span class=\"error-msg\">There is no option “{}” to check: field is one of \
             condition, hit_condition, log_message.</span>",
            field
        ))
    };
    html!(out, "<div id=\"check-result\">{}</div>", result.clone());
    if result.is_none() {
        html!(
            out,
            "<p class=\"hint\">This {} is valid.</p>",
            field.replace('_', " ")
        );
    }
    View::new("Check a breakpoint option", "/breakpoints", out)
}

/// Characters of the text shown before and after the mistake (longer texts are cut there).
const EXCERPT_BEFORE: usize = 48;
const EXCERPT_AFTER: usize = 32;

/// An option's error: the message, then (with the 1-based character column of the mistake)
/// the text around it with the character there marked, or a mark after its end.
pub fn option_error(message: &str, text: &str, column: Option<usize>) -> Html {
    let mut out = markup!("<span class=\"error-msg\">{}</span>", message);
    let Some(column) = column.filter(|c| *c >= 1) else {
        return out;
    };
    let chars: Vec<char> = text.chars().collect();
    let at = (column - 1).min(chars.len());
    let start = at.saturating_sub(EXCERPT_BEFORE);
    let end = (at + 1 + EXCERPT_AFTER).min(chars.len());
    let part = |a: usize, b: usize| chars[a..b.max(a)].iter().collect::<String>();
    out.push_lit("<code class=\"error-at\">");
    if start > 0 {
        out.push_lit("<span class=\"cut\">…</span>");
    }
    out.push_text(&part(start, at));
    match chars.get(at) {
        Some(c) => html!(
            out,
            "<mark title=\"column {}\">{}</mark>{}",
            column,
            *c,
            part(at + 1, end)
        ),
        None => html!(
            out,
            "<mark class=\"end\" title=\"column {}: after the end of the text\"> </mark>",
            column
        ),
    }
    if end < chars.len() {
        out.push_lit("<span class=\"cut\">…</span>");
    }
    out.push_lit("</code>");
    out
}

/// "none" plus every other function with the same signature (the only ones the server takes).
fn replacement_options(
    name: &str,
    sig: Option<&str>,
    current: &str,
    signatures: &std::collections::BTreeMap<String, String>,
) -> Html {
    let mut out = markup!(
        "<option value=\"\"{}>none</option>",
        attr(current.is_empty(), " selected")
    );
    for (other, s) in signatures {
        if other == name || Some(s.as_str()) != sig {
            continue;
        }
        html!(
            out,
            "<option{}>{}</option>",
            attr(other == current, " selected"),
            other
        );
    }
    if !current.is_empty() && !signatures.contains_key(current) {
        html!(out, "<option selected>{}</option>", current);
    }
    out
}

/// `/breakpoint/<name>/history`: the breakpoint's recorded calls, most recent first.
pub fn history(shared: &Shared, name: &str) -> Answer {
    let h = service::breakpoint_history(shared, name, 0, 200);
    let exists = service::breakpoints(shared)
        .breakpoints
        .iter()
        .any(|n| n == name);
    let mut out = markup!(
        "<div class=\"bar\"><h1>History of <code>{}</code></h1><a href=\"/breakpoints\">All breakpoints</a></div>",
        name
    );
    if !exists {
        // What was recorded while it had one stays (the original shows it too).
        out.push_lit(
            "<p class=\"meta\">This function has no breakpoint now; its calls are recorded in \
             this history only while it has one.</p>",
        );
    }
    out.push_lit("<div id=\"history\" data-live>");
    if h.history.is_empty() {
        out.push_lit(if exists {
            "<p class=\"empty\">No call of this function has completed yet.</p>"
        } else {
            "<p class=\"empty\">No call of this function was recorded.</p>"
        });
    } else {
        out.push_lit(
            "<table class=\"grid\"><thead><tr><th scope=\"col\">Completed</th><th scope=\"col\">Status</th>\
             <th scope=\"col\">Arguments</th><th scope=\"col\">Result or exception</th></tr></thead><tbody>",
        );
        for e in &h.history {
            let d = &e["call_data"];
            let at = e["completed_at"].as_f64().unwrap_or(0.0);
            let when = match e["id"].as_str() {
                Some(id) => markup!("<a href=\"{}\">{}</a>", entry_href(name, id), time(at)),
                None => time(at),
            };
            let status = d["status"].as_str().unwrap_or("");
            let outcome = match d.get("exception").filter(|x| !x.is_null()) {
                Some(x) => markup!("<code class=\"value raised\">{}</code>", shown(x)),
                None => markup!(
                    "<code class=\"value\">{}</code>",
                    d.get("pretty_result").map(shown).unwrap_or_default()
                ),
            };
            let resolution = d
                .as_object()
                .map(|m| super::resolution_html(name, m))
                .unwrap_or_default();
            html!(
                out,
                "<tr><td>{}</td><td>{}</td><td><code class=\"value\">{}</code></td><td>{}{}</td></tr>",
                when,
                status,
                arguments_text(d),
                outcome,
                resolution
            );
        }
        out.push_lit("</tbody></table>");
    }
    out.push_lit("</div>");
    Ok(View::new(format!("History of {name}"), "/breakpoints", out))
}

/// The page of one history entry.
pub fn entry_href(name: &str, id: &str) -> String {
    format!(
        "/breakpoint/{}/history/{}",
        encode_segment(name),
        encode_segment(id)
    )
}

/// `a, b, k=v` from a call's rendered arguments.
pub fn arguments_text(d: &Value) -> String {
    let mut parts: Vec<String> = d
        .get("pretty_args")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| shown(v).into_owned()).collect())
        .unwrap_or_default();
    if let Some(kw) = d.get("pretty_kwargs").and_then(Value::as_object) {
        parts.extend(kw.iter().map(|(k, v)| format!("{k}={}", shown(v))));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, shared};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    #[test]
    fn the_empty_page_says_how_to_add_one() {
        let s = shared();
        let html = page(&s).main;
        assert!(html.contains("No breakpoints"), "{html}");
        assert!(html.contains("data-api=\"/api/breakpoints\""));
    }

    #[test]
    fn names_and_signatures_are_escaped_and_links_encoded() {
        let s = shared();
        service::breakpoint_add(
            &s,
            &body(json!({"function_name": HOSTILE, "signature": HOSTILE})),
        )
        .unwrap();
        service::function_register(
            &s,
            &body(json!({"function_name": "other", "signature": HOSTILE})),
        )
        .unwrap();
        let html = page(&s).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains(
            "/breakpoint/%3C%2Fscript%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/history"
        ));
        // The same-signature function is offered as a replacement; the suggestions list only
        // functions without a breakpoint.
        assert!(html.contains("<option>other</option>"), "{html}");
        assert!(html.contains("<option value=\"other\">"));
        assert!(!html.contains(&format!("<option value=\"{}\">", crate::ui::esc(HOSTILE))));
    }

    #[test]
    fn behaviors_show_as_selected() {
        let s = shared();
        service::breakpoint_add(&s, &body(json!({"function_name": "f", "behavior": "go"})))
            .unwrap();
        service::breakpoint_set_after_behavior(&s, "f", &body(json!({"behavior": "exception"})))
            .unwrap();
        service::set_default_behavior(&s, &body(json!({"behavior": "stop_exception"}))).unwrap();
        let html = page(&s).main;
        assert!(html.contains("<option selected>go</option>"), "{html}");
        assert!(html.contains("<option selected>exception</option>"));
        assert!(html.contains("<option selected>stop_exception</option>"));
    }

    /// A condition that parses and holds markup and both kinds of quotes in its strings.
    const TRICKY: &str =
        r#"kwargs["k"] == '</script><img src=x onerror="alert(1)">' or args[0] == "it's""#;

    #[test]
    fn options_show_in_the_summary_and_their_fields_escaped() {
        let s = shared();
        service::breakpoint_add(
            &s,
            &body(
                json!({"function_name": "f", "condition": TRICKY, "hit_condition": ">=2",
                         "log_message": format!("{HOSTILE} {{kwargs['k']}}")}),
            ),
        )
        .unwrap();
        service::breakpoint_add(&s, &body(json!({"function_name": "g", "one_shot": true})))
            .unwrap();
        let html = page(&s).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("</script>"), "{html}");
        let shown = crate::ui::esc(TRICKY);
        assert!(shown.contains("&quot;alert(1)&quot;") && shown.contains("&#39;"));
        // Visible without opening the panel (its summary), and in the field to edit it.
        let f = &html[html.find("data-key=\"bp:f\"").unwrap()..];
        let f = &f[..f.find("</tbody>").unwrap()];
        let summary = &f[f.find("<summary>").unwrap()..f.find("</summary>").unwrap()];
        assert!(
            summary.contains(&format!("Condition</span> <code>{shown}</code>")),
            "{summary}"
        );
        assert!(summary.contains("Hit count</span> <code>&gt;=2</code>"));
        assert!(summary.contains("Log message</span> <code>&lt;/script&gt;&lt;img"));
        assert!(
            f.contains(&format!("name=\"condition\" value=\"{shown}\"")),
            "{f}"
        );
        assert!(f.contains("name=\"hit_condition\" value=\"&gt;=2\""));
        assert!(f.contains(
            "data-api=\"/api/breakpoints/f/condition\" data-then=\"refresh\" data-check"
        ));
        // f counts its calls (none yet: nothing to reset); g is one-shot and counts none.
        assert!(f.contains("<span class=\"count\" "), "{f}");
        assert!(f.contains(
            "data-hits=\"0\">0</span><button type=\"submit\" class=\"quiet small\" disabled"
        ));
        let g = &html[html.find("data-key=\"bp:g\"").unwrap()..];
        assert!(
            g.contains("<span class=\"badge one-shot\">one-shot</span>"),
            "{g}"
        );
        assert!(g.contains("name=\"one_shot\" data-submit checked"));
        assert!(g.contains("<span class=\"count muted\""));
        assert!(!g[..g.find("</summary>").unwrap()].contains("opt-none"));
    }

    #[test]
    fn a_breakpoint_without_options_offers_them_in_a_closed_panel() {
        let s = shared();
        service::breakpoint_add(&s, &body(json!({"function_name": "f"}))).unwrap();
        let html = page(&s).main;
        assert!(
            html.contains(
                "<details class=\"bp-options\"><summary><span class=\"opts\">\
             <span class=\"opt-none\">Condition, hit count, log message</span>"
            ),
            "{html}"
        );
        assert!(html.contains("name=\"condition\" value=\"\""));
        // One-shot is not checked (the checked switches are the breakpoint's and pausing's).
        assert!(
            html.contains("name=\"one_shot\" data-submit> One-shot"),
            "{html}"
        );
        assert_eq!(html.matches(" checked").count(), 2, "{html}");
        // The live table is keyed by breakpoint and carries what is being edited.
        assert!(html.contains("id=\"breakpoint-table\" data-live data-keyed data-carry>"));
        // The add form takes an optional condition.
        assert!(html.contains("<input name=\"condition\" data-optional"));
    }

    #[test]
    fn each_row_has_a_switch_and_the_top_says_what_will_pause() {
        let s = shared();
        for (name, extra) in [
            ("a", json!({})),
            ("b", json!({"behavior": "go"})),
            ("c", json!({"log_message": "x"})),
            ("d", json!({})),
            (HOSTILE, json!({})),
        ] {
            let mut b = extra.as_object().unwrap().clone();
            b.insert("function_name".into(), json!(name));
            service::breakpoint_add(&s, &b).unwrap();
        }
        service::breakpoint_set_after_behavior(&s, "b", &body(json!({"behavior": "go"}))).unwrap();
        service::set_enabled(&s, "d", false).unwrap().unwrap();
        let html = page(&s).main;
        assert!(!html.contains("<img"), "{html}");
        let row = |name: &str| {
            let at = html.find(&format!("data-key=\"bp:{name}\"")).unwrap();
            let start = html[..at].rfind("<tbody").unwrap();
            html[start..start + html[start..].find("</tbody>").unwrap()].to_owned()
        };
        let a = row("a");
        assert!(a.starts_with("<tbody class=\"bp pauses\""), "{a}");
        assert!(
            a.contains(
                "<form data-api=\"/api/breakpoints/a/enabled\" data-then=\"refresh\">\
                 <input type=\"checkbox\" role=\"switch\" name=\"enabled\" data-submit checked aria-label=\"a\""
            ),
            "{a}"
        );
        assert!(a.contains("<span class=\"will pauses\">pauses</span>"));
        assert!(row("b").contains("<span class=\"will runs\">never pauses</span>"));
        assert!(row("c").contains("<span class=\"will logs\">logs</span>"));
        let d = row("d");
        assert!(d.starts_with("<tbody class=\"bp off\""), "{d}");
        assert!(
            d.contains("name=\"enabled\" data-submit aria-label=\"d\""),
            "{d}"
        );
        // The switch is labelled with the name, escaped.
        assert!(row(&crate::ui::esc(HOSTILE))
            .contains(&format!("aria-label=\"{}\"", crate::ui::esc(HOSTILE))));
        // The master switch, on, and what will pause: a and the hostile one.
        let top =
            &html[html.find("id=\"pausing-master\"").unwrap()..html.find("</section>").unwrap()];
        assert!(
            top.contains(
                "role=\"switch\" name=\"pausing\" data-submit checked> Pause at breakpoints"
            ),
            "{top}"
        );
        assert!(
            top.contains(
                "<strong>2 of 5 breakpoints will pause</strong> · 1 switched off · 1 only logs"
            ),
            "{top}"
        );
        service::set_pausing(&s, false).unwrap();
        let html = page(&s).main;
        let top =
            &html[html.find("id=\"pausing-master\"").unwrap()..html.find("</section>").unwrap()];
        assert!(top.contains("class=\"master-switch off\""), "{top}");
        assert!(
            top.contains("name=\"pausing\" data-submit> Pause at breakpoints"),
            "{top}"
        );
        assert!(
            top.contains("<strong>Pausing is off: no call pauses.</strong>"),
            "{top}"
        );
        assert!(
            top.contains("With pausing on, 2 of 5 breakpoints will pause"),
            "{top}"
        );
    }

    #[test]
    fn the_error_markup_marks_the_position_in_characters() {
        // After the end of the text (the column counts from 1).
        assert_eq!(
            option_error("expected ')' at column 13", "args[0] > (1", Some(13)),
            "<span class=\"error-msg\">expected &#39;)&#39; at column 13</span><code class=\"error-at\">\
             args[0] &gt; (1<mark class=\"end\" title=\"column 13: after the end of the text\"> </mark></code>"
        );
        // On a character, counted in characters, with markup in the text and the message.
        assert_eq!(
            option_error("<b>", "é<\"x'", Some(3)),
            "<span class=\"error-msg\">&lt;b&gt;</span><code class=\"error-at\">é&lt;\
             <mark title=\"column 3\">&quot;</mark>x&#39;</code>"
        );
        // No position: the message alone.
        assert_eq!(
            option_error("bad", "x", None),
            "<span class=\"error-msg\">bad</span>"
        );
        // A long text shows the part around the mistake.
        let long = format!("{}X{}", "a".repeat(100), "b".repeat(100));
        let html = option_error("m", &long, Some(101));
        assert!(
            html.contains(&format!(
                "…</span>{}<mark title=\"column 101\">X</mark>{}<span class=\"cut\">…",
                "a".repeat(48),
                "b".repeat(32)
            )),
            "{html}"
        );
    }

    #[test]
    fn check_shows_the_servers_error_of_an_option() {
        let q = |f: &str, t: &str| {
            vec![
                ("field".to_owned(), f.to_owned()),
                ("text".to_owned(), t.to_owned()),
            ]
        };
        let html = check(&q("condition", "args[0] > (1")).main;
        assert!(html.contains("<div id=\"check-result\"><span class=\"error-msg\">condition: expected &#39;)&#39; at column 13</span>"), "{html}");
        assert!(html.contains("<mark class=\"end\""));
        let html = check(&q("log_message", &format!("{HOSTILE} {{args[0] +}}"))).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("<mark title=\"column 49\">}</mark>"),
            "{html}"
        );
        let html = check(&q("condition", "args[0] > 1")).main;
        assert!(html.contains("<div id=\"check-result\"></div>"), "{html}");
        assert!(html.contains("This condition is valid."));
        let html = check(&q("hit_condition", "x5")).main;
        assert!(html.contains("hit_condition must be"), "{html}");
        assert!(!html.contains("<code class=\"error-at\">"));
        let html = check(&q(HOSTILE, "x")).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("There is no option"));
    }

    #[test]
    fn history_of_an_unknown_breakpoint_is_empty_and_a_known_one_lists_calls() {
        let s = shared();
        let html = history(&s, "nope").unwrap().main;
        assert!(
            html.contains("No call of this function was recorded"),
            "{html}"
        );
        assert!(html.contains("has no breakpoint now"), "{html}");
        let (pause, call) = crate::service::testing::paused_call(&s, "f", &[json!(HOSTILE)]);
        crate::service::testing::resume(&s, &pause);
        crate::service::testing::complete(
            &s,
            &crate::service::testing::complete_body(&call, &json!(HOSTILE)),
        )
        .unwrap();
        let html = history(&s, "f").unwrap().main;
        assert!(html.contains("data-time="), "{html}");
        assert!(!html.contains("<img"));
        assert!(html.contains("&lt;img"));
        assert!(!html.contains("has no breakpoint now"));
        // Each entry links to its page; a removed breakpoint keeps what was recorded.
        let id = crate::service::breakpoint_history(&s, "f", 0, 1).history[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            html.contains(&format!("href=\"/breakpoint/f/history/{id}\"")),
            "{html}"
        );
        crate::service::breakpoint_remove(&s, "f").unwrap();
        let html = history(&s, "f").unwrap().main;
        assert!(html.contains("&lt;img") && html.contains("has no breakpoint now"));
    }
}
