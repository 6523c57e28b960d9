//! The REPL pages: one session (`/repl/<session_id>`: transcript, input with history, output
//! and stdout; the input is disabled once the pause is resumed) and the list of sessions
//! (`/repls`).

use serde_json::Value;

use super::markup::{html, markup};
use super::{item_shown, object_link_named, param, shown, time, value_html, Answer, Html, View};
use crate::repl::SessionFilter;
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// Earlier sessions of the same program shown above a session's transcript.
const EARLIER_SESSIONS: usize = 3;

/// `/repl/<session_id>`.
pub fn session(shared: &Shared, session_id: &str) -> Answer {
    let Ok(found) = service::repl_session(shared, session_id) else {
        return Err(format!("/repl/{session_id}"));
    };
    let s = &found["session"];
    let text = |k: &str| s.get(k).filter(|v| !v.is_null()).map(shown);
    let function = text("function_name").unwrap_or_default();
    let mut out = markup!(
        "<div class=\"bar\"><h1>REPL in <code>{}</code></h1><a href=\"/repls\">All sessions</a></div>\
         <p class=\"meta\">Session <code>{}</code> · pause <code>{}</code>{} · started {}</p>",
        function,
        session_id,
        text("pause_id").unwrap_or_default(),
        text("pid").map(|p| format!(" · process {p}")),
        time(s["started_at"].as_f64().unwrap_or(0.0)),
    );
    let mut earlier = service::earlier_sessions(shared, session_id, EARLIER_SESSIONS);
    earlier.retain(|e| e["transcript"].as_array().is_some_and(|t| !t.is_empty()));
    earlier.reverse();
    html!(
        out,
        "<div class=\"repl-layout\"><div class=\"repl-main\">{}\
         <div id=\"transcript\" data-live>{}</div><div id=\"repl-input\" data-live>{}</div></div>\
         <aside class=\"repl-side\" id=\"repl-side\" data-live aria-label=\"The paused call\">{}</aside></div>",
        earlier_html(&earlier),
        transcript(s),
        input(s, session_id),
        side(s)
    );
    Ok(View::new(format!("REPL in {function}"), "/repls", out))
}

/// What was evaluated at the program's earlier pauses, oldest first: readable, and recalled
/// with up/down like this session's own input.
fn earlier_html(earlier: &[Value]) -> Html {
    let mut out = Html::new();
    for e in earlier {
        let sid = e["session_id"].as_str().unwrap_or("");
        html!(
            out,
            "<section class=\"earlier\" aria-label=\"An earlier pause of this program\"><p class=\"meta\">\
             At an earlier pause of this program, in <code>{}</code> (<a href=\"/repl/{}\">session</a>, \
             started {}): names assigned there are not kept here.</p>{}</section>",
            e.get("function_name").map(shown).unwrap_or_default(),
            encode_segment(sid),
            time(e["started_at"].as_f64().unwrap_or(0.0)),
            entries(e)
        );
    }
    out
}

/// The call's arguments (named from its signature), and the names evaluations see.
fn side(s: &Value) -> Html {
    let mut out = Html::lit("<h2>The paused call</h2>");
    let signature = s.get("signature").and_then(Value::as_str);
    if let Some(sig) = signature {
        html!(
            out,
            "<p class=\"sig\"><code>{}{}</code></p>",
            s.get("function_name").map(shown).unwrap_or_default(),
            sig
        );
    }
    let names = signature
        .map(super::paused::positional_names)
        .unwrap_or_default();
    out.push_lit("<dl class=\"args\">");
    let mut any = false;
    if let Some(args) = s.get("pretty_args").and_then(Value::as_array) {
        for (i, a) in args.iter().enumerate() {
            let item = s.get("args").and_then(|x| x.get(i));
            any = true;
            let name = names.get(i).cloned().unwrap_or_default();
            html!(
                out,
                "<dt>{} <span class=\"muted\">args[{}]</span></dt><dd>{}{}</dd>",
                name,
                i,
                value_html(&item_shown(a, item)),
                object_link_named(item, &format!("args[{i}]"))
            );
        }
    }
    if let Some(kwargs) = s.get("pretty_kwargs").and_then(Value::as_object) {
        for (k, v) in kwargs {
            let item = s.get("kwargs").and_then(|x| x.get(k));
            any = true;
            html!(
                out,
                "<dt>{} <span class=\"muted\">kwargs[{}]</span></dt><dd>{}{}</dd>",
                k,
                format!("{k:?}"),
                value_html(&item_shown(v, item)),
                object_link_named(item, k)
            );
        }
    }
    out.push_lit("</dl>");
    if !any {
        out.push_lit("<p class=\"muted\">No arguments.</p>");
    }
    out.push_lit("<h2>In scope</h2>");
    let scope = &s["scope"];
    if let Some(names) = scope.get("names").and_then(Value::as_array) {
        out.push_lit("<p class=\"scope\" id=\"scope-names\">");
        for (i, n) in names.iter().enumerate() {
            html!(
                out,
                "{}<code>{}</code>",
                if i > 0 { " " } else { "" },
                n.as_str().unwrap_or("")
            );
        }
        out.push_lit(
            "</p><p class=\"hint\">What <code>dir()</code> answered when the session opened: \
             the debug client evaluates in its own wrapper around the call, not in the \
             function's body, so the function's parameters are not names here: read them from \
             <code>args</code> and <code>kwargs</code> (and <code>self</code> for a method); \
             after the call, <code>result</code>.</p>",
        );
    } else if let Some(e) = scope.get("error") {
        html!(
            out,
            "<p class=\"error-text\">The program could not list them: <code>{}</code></p>",
            shown(e)
        );
    } else if scope.get("asked").is_some() {
        let closed = !s["closed_at"].is_null();
        out.push_lit(if closed {
            "<p class=\"muted\">The program did not answer before the session closed.</p>"
        } else {
            "<p class=\"muted\" id=\"scope-pending\">Asking the program (<code>dir()</code>)…</p>"
        });
    } else if s["pid"].as_i64() == Some(0) {
        out.push_lit(
            "<p class=\"hint\">A web page's REPL evaluates JavaScript with the call's \
             parameters by name, <code>$args</code> and <code>$this</code>.</p>",
        );
    } else {
        out.push_lit(
            "<p class=\"hint\">Evaluate <code>dir()</code> to list them: for a Python program \
             they are <code>args</code>, <code>kwargs</code>, <code>self</code> and the debug \
             client's own names, not the function's parameters.</p>",
        );
    }
    out
}

/// The entries of a session's transcript, oldest first.
fn entries(s: &Value) -> Html {
    let mut out = Html::lit("<ol class=\"transcript\" tabindex=\"0\" aria-label=\"Transcript\">");
    let entries = s["transcript"].as_array().map_or(&[][..], Vec::as_slice);
    for e in entries {
        let is_error = e["is_error"].as_bool().unwrap_or(false);
        let input = e.get("input").map(shown).unwrap_or_default();
        html!(
            out,
            "<li data-expr=\"{}\"><pre class=\"in\"><span class=\"prompt\" aria-hidden=\"true\">&gt;&gt;&gt; </span>{}</pre>",
            input,
            input
        );
        if let Some(stdout) = e
            .get("stdout")
            .and_then(Value::as_str)
            .filter(|x| !x.is_empty())
        {
            html!(out, "<pre class=\"stdout\">{}</pre>", stdout);
        }
        // A value the program sent (its CID) opens as an object, with its structure.
        let link = if is_error {
            Html::new()
        } else {
            object_link_named(e.get("result_cid"), "the result")
        };
        html!(
            out,
            "<pre class=\"out{}\">{}</pre>{}</li>",
            if is_error { " error-text" } else { "" },
            e.get("output").map(shown).unwrap_or_default(),
            link
        );
    }
    out.push_lit("</ol>");
    out
}

/// What was evaluated and answered, oldest first.
fn transcript(s: &Value) -> Html {
    let mut out = entries(s);
    if s["transcript"].as_array().is_none_or(Vec::is_empty) {
        out.push_lit(
            "<p class=\"empty\">Nothing evaluated yet. Expressions and statements run inside the \
             paused program, with the names listed beside (In scope): the call's arguments are \
             <code>args</code> and <code>kwargs</code>.</p>",
        );
    }
    out
}

/// The input, or why there is none.
fn input(s: &Value, session_id: &str) -> Html {
    if s["closed_at"].is_null() {
        markup!(
            "<form class=\"repl-input\" data-api=\"/api/repl/{}/eval\" data-then=\"refresh\" data-reset data-busy=\"Running…\">\
             <label for=\"expr\">Evaluate in the paused program (Enter runs it, Shift+Enter adds a \
             line, ↑/↓ recall earlier input)</label>\
             <textarea id=\"expr\" name=\"expr\" rows=\"2\" required autocomplete=\"off\" \
             spellcheck=\"false\" data-history></textarea><button type=\"submit\">Run</button>\
             <p class=\"error\" role=\"alert\"></p></form>",
            encode_segment(session_id)
        )
    } else {
        markup!(
            "<p class=\"closed-note\" role=\"status\">This session closed {}: the call went on \
             (or the session was closed), so there is no paused frame to evaluate in any more. \
             The transcript stays.</p>",
            time(s["closed_at"].as_f64().unwrap_or(0.0))
        )
    }
}

/// `/repls?search=&status=`: every REPL session, newest first.
pub fn sessions(shared: &Shared, query: &[(String, String)]) -> View {
    let search = param(query, "search").filter(|s| !s.is_empty());
    let status = param(query, "status").filter(|s| !s.is_empty());
    let filter = SessionFilter {
        search,
        active: match status {
            Some("active") => Some(true),
            Some("closed") => Some(false),
            _ => None,
        },
        from: None,
        to: None,
    };
    let list = service::repl_sessions(shared, &filter);
    let rows = list["sessions"].as_array().map_or(&[][..], Vec::as_slice);
    let options: Html = ["", "active", "closed"]
        .iter()
        .map(|v| {
            let selected = if Some(*v) == status || (v.is_empty() && status.is_none()) {
                Html::lit(" selected")
            } else {
                Html::new()
            };
            markup!(
                "<option value=\"{}\"{}>{}</option>",
                v,
                selected,
                if v.is_empty() { "any" } else { v }
            )
        })
        .collect();
    let mut out = markup!(
        "<div class=\"bar\"><h1>REPL sessions</h1><a href=\"/repl-help\">REPL help</a></div>\
         <form class=\"inline\" method=\"get\" action=\"/repls\"><label>Search <input name=\"search\" \
         value=\"{}\" placeholder=\"function, session, pause, process\"></label><label>Status \
         <select name=\"status\">{}</select></label><button type=\"submit\">Filter</button></form>",
        search.unwrap_or(""),
        options
    );
    out.push_lit("<div id=\"repl-list\" data-live>");
    if rows.is_empty() {
        out.push_lit(
            "<section class=\"empty\"><h2>No REPL sessions</h2><p>Open one from a paused call \
             on the <a href=\"/\">Paused</a> page.</p></section>",
        );
    } else {
        out.push_lit(
            "<table class=\"grid\"><thead><tr><th scope=\"col\">Started</th><th scope=\"col\">Function</th>\
             <th scope=\"col\">Process</th><th scope=\"col\">Evaluations</th><th scope=\"col\">Status</th>\
             </tr></thead><tbody>",
        );
        for r in rows {
            let sid = r["session_id"].as_str().unwrap_or("");
            html!(
                out,
                "<tr><td>{}</td><td><a href=\"/repl/{}\"><code>{}</code></a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                time(r["started_at"].as_f64().unwrap_or(0.0)),
                encode_segment(sid),
                r.get("function_name").map(shown).unwrap_or_default(),
                r.get("pid").map(shown).unwrap_or_default(),
                r["eval_count"].as_u64().unwrap_or(0),
                r["status"].as_str().unwrap_or(""),
            );
        }
        out.push_lit("</tbody></table>");
    }
    out.push_lit("</div>");
    View::new("REPL sessions", "/repls", out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, paused_call, shared};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    #[test]
    fn unknown_sessions_are_not_found_and_the_empty_list_says_where_to_start() {
        let s = shared();
        assert!(session(&s, "nope").is_err());
        assert!(sessions(&s, &[]).main.contains("No REPL sessions"));
    }

    #[test]
    fn a_transcript_is_escaped_and_a_resumed_pause_disables_the_input() {
        let s = shared();
        let (pause, _) = paused_call(&s, HOSTILE, &[json!(1)]);
        let sid = service::start_session(&s, &pause).unwrap().session_id;
        let pending = service::repl_eval_start(&s, &sid, Some(&json!(HOSTILE))).unwrap();
        let req = service::poll_repl(&s, &pause);
        service::repl_result(
            &s,
            &body(
                json!({"eval_id": req["eval_id"], "session_id": sid, "pause_id": pause,
                         "result": HOSTILE, "stdout": HOSTILE}),
            ),
        )
        .unwrap();
        drop(pending);
        let html = session(&s, &sid).unwrap().main;
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("data-api=\"/api/repl/"), "{html}");
        assert!(sessions(&s, &[]).main.contains(&sid));
        crate::service::testing::resume(&s, &pause);
        let html = session(&s, &sid).unwrap().main;
        assert!(!html.contains("<textarea"), "{html}");
        assert!(html.contains("This session closed"));
        let closed = sessions(&s, &[("status".into(), "active".into())]).main;
        assert!(!closed.contains(&sid));
    }
}
