//! The Paused page (`/`): one card per paused call, newest first, marked before or after the
//! call, with the actions the Python client accepts there (after a call: continue only).

use std::fmt::Write as _;

use serde_json::Value;

use super::{esc, Html};
use crate::service::{self, PausedExecution, Payloads, When};
use crate::state::Shared;

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

/// The page (its cards are the live region).
pub fn page(shared: &Shared) -> Html {
    Html::new(
        "Paused",
        "/",
        format!(
            "<div class=\"bar\"><h1>Paused calls</h1><button type=\"button\" data-act=\"continue-all\">\
             Continue all</button></div><p class=\"error\" id=\"page-error\" role=\"alert\"></p>\
             <div id=\"cards\" data-live>{}</div>",
            cards_html(shared)
        ),
    )
}

fn cards_html(shared: &Shared) -> String {
    let mut paused = service::paused(shared, Payloads::Omitted).paused;
    if paused.is_empty() {
        return empty();
    }
    paused.sort_by(|a, b| b.paused_at.total_cmp(&a.paused_at));
    let functions = service::functions(shared);
    let mut out = String::new();
    for p in &paused {
        card(&mut out, p, &functions.function_signatures);
    }
    out
}

fn empty() -> String {
    "<section class=\"empty\"><h2>Nothing is paused</h2><p>Calls of the functions your program \
     wraps appear here as soon as they pause, without a reload.</p><p>Instrument a program with \
     the CID el Dill client:</p><pre><code>from cideldill_client import with_debug\n\
     with_debug(\"ON\")\nadd = with_debug(add)</code></pre><p>It finds this server through \
     <code>~/.cideldill/port</code>, or set <code>CIDELDILL_SERVER_URL</code> to this page's \
     address. Or try the demo: <code>python3 scripts/demo_app.py</code>.</p></section>"
        .to_owned()
}

/// Text of a rendered value (strings are shown as they are, anything else as JSON).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => match m.get("summary").and_then(Value::as_str) {
            Some(s) => s.to_owned(),
            None => v.to_string(),
        },
        other => other.to_string(),
    }
}

/// `file:line` of the frame nearest the call (stacks list the innermost caller first), when
/// the client sent a stack.
fn call_site(data: &serde_json::Map<String, Value>) -> Option<String> {
    let frames = data.get("call_site")?.get("stack_trace")?.as_array()?;
    let f = frames.first()?;
    let file = f.get("filename")?.as_str()?;
    let line = f.get("lineno").map(|l| l.to_string()).unwrap_or_default();
    let func = f.get("function").and_then(Value::as_str).unwrap_or("");
    Some(format!("{file}:{line} in {func}"))
}

fn card(
    out: &mut String,
    p: &PausedExecution,
    signatures: &std::collections::BTreeMap<String, String>,
) {
    let d = &p.call_data;
    let method = p.method_name();
    let (when, when_text) = match p.when {
        When::Before => ("before", "before the call"),
        When::After => ("after", "after the call"),
    };
    let id = esc(&p.id);
    let _ = write!(
        out,
        "<article class=\"card {when}\" tabindex=\"0\" data-pause-id=\"{id}\" data-when=\"{when}\">\
         <h2><span class=\"fn\">{}</span> <span class=\"badge {when}\">{when_text}</span></h2>\
         <p class=\"meta\"><span data-since=\"{}\">paused</span>",
        esc(method),
        p.paused_at
    );
    if let Some(pid) = d.get("process_pid") {
        let _ = write!(out, " · process {}", esc(&pid.to_string()));
    }
    if let Some(site) = call_site(d) {
        let _ = write!(
            out,
            " · <a class=\"site\" href=\"/callstack/{id}\">{}</a>",
            esc(&site)
        );
    }
    out.push_str("</p>");
    if let Some(sig) = d.get("signature").and_then(Value::as_str) {
        let _ = write!(
            out,
            "<p class=\"sig\"><code>{}{}</code></p>",
            esc(method),
            esc(sig)
        );
    }
    out.push_str("<dl class=\"args\">");
    if let Some(args) = d.get("pretty_args").and_then(Value::as_array) {
        for (i, a) in args.iter().enumerate() {
            let _ = write!(
                out,
                "<dt>{i}</dt><dd><code class=\"value\">{}</code></dd>",
                esc(&shown(a))
            );
        }
    }
    if let Some(kwargs) = d.get("pretty_kwargs").and_then(Value::as_object) {
        for (k, v) in kwargs {
            let _ = write!(
                out,
                "<dt>{}</dt><dd><code class=\"value\">{}</code></dd>",
                esc(k),
                esc(&shown(v))
            );
        }
    }
    out.push_str("</dl>");
    if p.when == When::After {
        match d.get("exception").filter(|e| !e.is_null()) {
            Some(e) => {
                let _ = write!(
                    out,
                    "<p class=\"outcome raised\">raised <code class=\"value\">{}</code></p>",
                    esc(&shown(e))
                );
            }
            None => {
                let result = d.get("pretty_result").map(shown).unwrap_or_default();
                let _ = write!(
                    out,
                    "<p class=\"outcome\">returned <code class=\"value\">{}</code></p>",
                    esc(&result)
                );
            }
        }
    }
    out.push_str("<div class=\"actions\">");
    out.push_str("<button type=\"button\" data-act=\"continue\">Continue</button>");
    if p.when == When::Before {
        actions_before(out, d, method, signatures);
    }
    out.push_str("</div><p class=\"error\" role=\"alert\"></p></article>");
}

/// The actions the client accepts before a call: skip, raise, modify, replace.
fn actions_before(
    out: &mut String,
    d: &serde_json::Map<String, Value>,
    method: &str,
    signatures: &std::collections::BTreeMap<String, String>,
) {
    // Modify starts from the call's own items: the client resolves `{"cid": ...}` from its
    // object cache, so an argument left as it is keeps its exact value.
    let args = d.get("args").cloned().unwrap_or(Value::Array(Vec::new()));
    let kwargs = d
        .get("kwargs")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let modify = serde_json::to_string_pretty(&serde_json::json!({"args": args, "kwargs": kwargs}))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<details><summary>Skip with a result</summary><label>Result (JSON) \
         <textarea name=\"fake_result\" rows=\"2\">null</textarea></label>\
         <button type=\"button\" data-act=\"skip\">Skip the call</button></details>\
         <details><summary>Raise</summary><label>Exception <select name=\"exception_type\">{}</select></label>\
         <label>Message <input name=\"exception_message\" value=\"raised by the debugger\"></label>\
         <button type=\"button\" data-act=\"raise\">Raise</button></details>\
         <details><summary>Modify arguments</summary><label>Arguments (JSON: plain values, or \
         items as listed) <textarea name=\"modified\" rows=\"6\">{}</textarea></label>\
         <button type=\"button\" data-act=\"modify\">Run with these</button></details>",
        EXCEPTIONS
            .iter()
            .map(|e| format!("<option>{e}</option>"))
            .collect::<String>(),
        esc(&modify)
    );
    let sig = d.get("signature").and_then(Value::as_str);
    let same: Vec<&String> = signatures
        .iter()
        .filter(|(name, s)| name.as_str() != method && Some(s.as_str()) == sig)
        .map(|(name, _)| name)
        .collect();
    if !same.is_empty() {
        let _ = write!(
            out,
            "<details><summary>Replace with</summary><label>Function <select name=\"replacement_function\">{}</select></label>\
             <button type=\"button\" data-act=\"replace\">Run it instead</button></details>",
            same.iter()
                .map(|n| format!("<option>{}</option>", esc(n)))
                .collect::<String>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{paused_call, shared};
    use serde_json::json;

    const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

    #[test]
    fn an_empty_session_says_how_to_instrument_a_program() {
        let s = shared();
        let html = page(&s).main;
        assert!(html.contains("Nothing is paused"));
        assert!(html.contains("with_debug"));
        assert!(html.contains("CIDELDILL_SERVER_URL"));
    }

    #[test]
    fn program_data_is_escaped_in_every_field() {
        let s = shared();
        paused_call(&s, HOSTILE, &[json!(HOSTILE), json!({"k": HOSTILE})]);
        let html = page(&s).main;
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("</script>"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("before the call"));
        assert!(html.contains("data-act=\"skip\""));
    }

    #[test]
    fn an_after_pause_offers_continue_only() {
        let s = shared();
        let (pause_id, call_id) = paused_call(&s, "f", &[json!(1)]);
        crate::service::continue_pause(&s, &pause_id, &serde_json::Map::new()).unwrap();
        crate::service::testing::complete(
            &s,
            &crate::service::testing::complete_body(&call_id, &json!(HOSTILE)),
        )
        .unwrap();
        let html = page(&s).main;
        assert!(html.contains("after the call"), "{html}");
        assert!(html.contains("returned"));
        assert!(html.contains("data-act=\"continue\""));
        assert!(!html.contains("data-act=\"skip\""));
        assert!(!html.contains("<img"));
    }
}
