//! The Breakpoints page (`/breakpoints`): add a breakpoint by function name (suggestions from
//! the registered functions), remove one, set its before- and after-behavior and replacement,
//! set the global default behavior; and each breakpoint's history
//! (`/breakpoint/<name>/history`).

use std::fmt::Write as _;

use serde_json::Value;

use super::{esc, shown, time, Answer, Html};
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

/// The page: add form and global behavior (static), the table (live).
pub fn page(shared: &Shared) -> Html {
    let functions = service::functions(shared);
    let listing = service::breakpoints(shared);
    let global = service::default_behavior(shared).behavior;
    let mut out = String::from("<div class=\"bar\"><h1>Breakpoints</h1></div>");
    // Suggestions: registered functions that have no breakpoint yet.
    let _ = write!(
        out,
        "<form class=\"inline\" data-api=\"/api/breakpoints\" data-then=\"refresh\" data-reset>\
         <label>Function <input name=\"function_name\" list=\"function-names\" required \
         autocomplete=\"off\" placeholder=\"module.function or Class.method\"></label>\
         <input type=\"hidden\" name=\"keep_signature\" value=\"true\" data-json>\
         <button type=\"submit\">Add breakpoint</button><p class=\"error\" role=\"alert\"></p>\
         <datalist id=\"function-names\">"
    );
    for name in functions
        .functions
        .iter()
        .filter(|n| !listing.breakpoints.contains(n))
    {
        let _ = write!(out, "<option value=\"{}\">", esc(name));
    }
    out.push_str("</datalist></form>");
    let _ = write!(
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
    let _ = write!(
        out,
        "<div id=\"breakpoint-table\" data-live>{}</div>",
        table(global, &listing, &functions.function_signatures)
    );
    Html::new("Breakpoints", "/breakpoints", out)
}

fn global_help(g: Global) -> String {
    let text = GLOBAL_HELP
        .iter()
        .find(|(x, _)| *x == g)
        .map_or("", |(_, t)| t);
    format!(
        "Now: <strong>{}</strong>, {}. A breakpoint's own behavior wins over it; \
         <code>yield</code> defers to it.",
        g.as_str(),
        esc(text)
    )
}

fn options<'a>(names: impl Iterator<Item = &'a str>, selected: &str) -> String {
    options_yielding(names, selected, None)
}

/// Options of a behavior select; `yield` says what it defers to.
fn options_yielding<'a>(
    names: impl Iterator<Item = &'a str>,
    selected: &str,
    global: Option<Global>,
) -> String {
    let mut out = String::new();
    for n in names {
        let sel = if n == selected { " selected" } else { "" };
        match global {
            Some(g) if n == "yield" => {
                let _ = write!(
                    out,
                    "<option value=\"yield\"{sel}>yield (global: {})</option>",
                    g.as_str()
                );
            }
            _ => {
                let _ = write!(out, "<option{sel}>{}</option>", esc(n));
            }
        }
    }
    out
}

fn table(
    global: Global,
    listing: &service::BreakpointListing,
    signatures: &std::collections::BTreeMap<String, String>,
) -> String {
    if listing.breakpoints.is_empty() {
        return "<section class=\"empty\"><h2>No breakpoints</h2><p>Add one above by function \
                name. A program wrapped with <code>with_debug</code> also adds one for each \
                function it wraps.</p></section>"
            .to_owned();
    }
    let mut out = String::from(
        "<table class=\"grid\"><thead><tr><th scope=\"col\">Function</th>\
         <th scope=\"col\">Before the call</th><th scope=\"col\">After the call</th>\
         <th scope=\"col\">Replace with</th><th scope=\"col\"></th></tr></thead><tbody>",
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
        let _ = write!(
            out,
            "<tr data-breakpoint=\"{name_attr}\"><th scope=\"row\"><code>{name_html}</code>{sig}</th>\
             <td data-label=\"Before the call\"><form data-api=\"{api}/behavior\" data-then=\"refresh\"><select name=\"behavior\" \
             data-submit aria-label=\"Before {name_attr}\">{before}</select><p class=\"error\" role=\"alert\"></p></form></td>\
             <td data-label=\"After the call\"><form data-api=\"{api}/after_behavior\" data-then=\"refresh\"><select name=\"behavior\" \
             data-submit aria-label=\"After {name_attr}\">{after}</select><p class=\"error\" role=\"alert\"></p></form></td>\
             <td data-label=\"Replace with\"><form data-api=\"{api}/replacement\" data-then=\"refresh\"><select \
             name=\"replacement_function\" data-submit aria-label=\"Replacement of {name_attr}\">{repl}</select>\
             <p class=\"error\" role=\"alert\"></p></form></td>\
             <td class=\"row-actions\"><a href=\"/breakpoint/{seg}/history\">History</a> \
             <form class=\"inline\" data-api=\"{api}\" data-method=\"DELETE\" data-then=\"refresh\">\
             <button type=\"submit\" class=\"quiet\">Remove</button><p class=\"error\" role=\"alert\"></p></form></td></tr>",
            name_attr = esc(name),
            name_html = esc(name),
            sig = sig.map_or(String::new(), |s| format!(
                "<br><code class=\"sig\">{}</code>",
                esc(s)
            )),
            before = options_yielding(Before::NAMES.iter().copied(), before.as_str(), Some(global)),
            after = options_yielding(After::NAMES.iter().copied(), after.as_str(), Some(global)),
            repl = replacement_options(name, sig.map(String::as_str), replacement, signatures),
            seg = encode_segment(name),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// "none" plus every other function with the same signature (the only ones the server takes).
fn replacement_options(
    name: &str,
    sig: Option<&str>,
    current: &str,
    signatures: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut out = format!(
        "<option value=\"\"{}>none</option>",
        if current.is_empty() { " selected" } else { "" }
    );
    for (other, s) in signatures {
        if other == name || Some(s.as_str()) != sig {
            continue;
        }
        let sel = if other == current { " selected" } else { "" };
        let _ = write!(out, "<option{sel}>{}</option>", esc(other));
    }
    if !current.is_empty() && !signatures.contains_key(current) {
        let _ = write!(out, "<option selected>{}</option>", esc(current));
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
    if h.history.is_empty() && !exists {
        return Err(format!("/breakpoint/{name}/history"));
    }
    let mut out = format!(
        "<div class=\"bar\"><h1>History of <code>{}</code></h1><a href=\"/breakpoints\">All breakpoints</a></div>",
        esc(name)
    );
    out.push_str("<div id=\"history\" data-live>");
    if h.history.is_empty() {
        out.push_str("<p class=\"empty\">No call of this function has completed yet.</p>");
    } else {
        out.push_str(
            "<table class=\"grid\"><thead><tr><th scope=\"col\">Completed</th><th scope=\"col\">Status</th>\
             <th scope=\"col\">Arguments</th><th scope=\"col\">Result or exception</th></tr></thead><tbody>",
        );
        for e in &h.history {
            let d = &e["call_data"];
            let at = e["completed_at"].as_f64().unwrap_or(0.0);
            let status = d["status"].as_str().unwrap_or("");
            let outcome = match d.get("exception").filter(|x| !x.is_null()) {
                Some(x) => format!("<code class=\"value raised\">{}</code>", esc(&shown(x))),
                None => format!(
                    "<code class=\"value\">{}</code>",
                    esc(&d.get("pretty_result").map(shown).unwrap_or_default())
                ),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td><code class=\"value\">{}</code></td><td>{outcome}</td></tr>",
                time(at),
                esc(status),
                esc(&arguments_text(d)),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</div>");
    Ok(Html::new(format!("History of {name}"), "/breakpoints", out))
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
        assert!(!html.contains(&format!("<option value=\"{}\">", esc(HOSTILE))));
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

    #[test]
    fn history_of_an_unknown_breakpoint_is_not_found_and_a_known_one_lists_calls() {
        let s = shared();
        assert!(history(&s, "nope").is_err());
        let (pause, call) = crate::service::testing::paused_call(&s, "f", &[json!(HOSTILE)]);
        crate::service::continue_pause(&s, &pause, &serde_json::Map::new()).unwrap();
        crate::service::testing::complete(
            &s,
            &crate::service::testing::complete_body(&call, &json!(HOSTILE)),
        )
        .unwrap();
        let html = history(&s, "f").unwrap().main;
        assert!(html.contains("data-time="), "{html}");
        assert!(!html.contains("<img"));
        assert!(html.contains("&lt;img"));
    }
}
