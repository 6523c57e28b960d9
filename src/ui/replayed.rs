//! Replay sequences in the web UI: the Runs page's "Replay a run" form (it calls
//! `POST /api/runs/<id>/replay`, then opens the report), the report page
//! `/runs/replayed/<report_id>` (the calls replayed, the first divergence with its
//! differences, or where the sequence stopped), and the names of replay differences
//! (`args[0]` named from the function's signature, as the call tree names arguments).

use serde_json::Value;

use super::markup::{html, markup};
use super::paused::positional_names;
use super::tree::call_tree_href;
use super::{shown, value_html, Answer, Html, View};
use crate::service::{self, Difference, ReplayedRun};
use crate::state::Shared;

/// Runs offered by the form (the newest).
const FORM_RUNS: usize = 100;

/// What a difference's part is called: `args[i]` by the parameter it binds to when the
/// signature names it (`x`), else the part as the API names it.
pub fn difference_label(part: &str, signature: Option<&str>) -> String {
    let index = part
        .strip_prefix("args[")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|i| i.parse::<usize>().ok());
    match (index, signature) {
        (Some(i), Some(sig)) => positional_names(sig)
            .get(i)
            .cloned()
            .unwrap_or_else(|| part.to_owned()),
        (None, _) => part.strip_prefix("kwargs.").unwrap_or(part).to_owned(),
        _ => part.to_owned(),
    }
}

/// The differences of a replay from its source, as a table (`signature`: the function's).
pub fn differences_table(differences: &[Difference], signature: Option<&str>) -> Html {
    let mut out = Html::lit(
        "<table class=\"differences\"><thead><tr><th scope=\"col\">Differs</th>\
         <th scope=\"col\">Recorded</th><th scope=\"col\">Replayed</th></tr></thead><tbody>",
    );
    for d in differences {
        html!(
            out,
            "<tr><th scope=\"row\" title=\"{}\">{}</th><td>{}</td><td>{}</td></tr>",
            d.part,
            difference_label(&d.part, signature),
            value_html(&shown(&d.source)),
            value_html(&shown(&d.replay))
        );
    }
    out.push_lit("</tbody></table>");
    out
}

/// The Runs page's form: replay a run's calls in order, in its live program or another's.
pub fn run_form(shared: &Shared) -> Html {
    let listing = service::runs(shared, 0, FORM_RUNS);
    if listing.runs.is_empty() {
        return Html::new();
    }
    let mut runs = Html::new();
    let mut into = Html::lit("<option value=\"\">the same run</option>");
    for r in &listing.runs {
        let name = match (&r.label, &r.program) {
            (l, _) if !l.is_empty() => format!("{l} ({})", r.run_id),
            (_, Some(p)) => format!("{p} ({})", r.run_id),
            _ => r.run_id.clone(),
        };
        html!(runs, "<option value=\"{}\">{}</option>", r.run_id, name);
        html!(into, "<option value=\"{}\">{}</option>", r.run_id, name);
    }
    markup!(
        "<section class=\"replay-run\" aria-labelledby=\"replay-run-h\">\
         <h2 id=\"replay-run-h\">Replay a run</h2>\
         <p class=\"hint\">Calls the run's recorded calls again, in order, in a live program \
         (never on the server), and stops at the first call whose replay differs from its \
         record. A call of that program must be paused, for example by a breakpoint.</p>\
         <form class=\"replay-run\" data-api=\"/api/runs/{{run}}/replay\" \
         data-then=\"go:/runs/replayed/{{report_id}}\" data-busy=\"Replaying…\">\
         <label>Run <select name=\"run\" data-path>{}</select></label> \
         <label>In the live program of <select name=\"into_run\" data-optional>{}</select></label> \
         <button type=\"submit\">Replay run</button><p class=\"error\" role=\"alert\"></p></form>\
         </section>",
        runs,
        into
    )
}

/// `/runs/replayed/<report_id>`.
pub fn page(shared: &Shared, path: &str) -> Answer {
    let id = path.trim_start_matches("/runs/replayed/");
    let Some(r) = service::replay_report(shared, id) else {
        return Err(path.to_owned());
    };
    Ok(View::new(
        "Replay of a run",
        "/runs",
        markup!(
            "<div class=\"bar\"><h1>Replay of a run</h1></div>{}",
            report(shared, &r)
        ),
    ))
}

fn report(shared: &Shared, r: &ReplayedRun) -> Html {
    let mut out = Html::new();
    html!(
        out,
        "<p class=\"meta\">Run <a href=\"{}\">{}</a>, replayed in the live program \
         of run <a href=\"{}\">{}</a>. <a href=\"/runs\">All runs</a></p>",
        call_tree_href(&r.run_id, None),
        super::runs::run_name(shared, &r.run_id),
        call_tree_href(&r.into_run, None),
        super::runs::run_name(shared, &r.into_run)
    );
    let n = r.replayed.len();
    let calls = |k: usize| if k == 1 { "call" } else { "calls" };
    if r.completed {
        html!(
            out,
            "<p class=\"replay-summary same\" id=\"replay-outcome\">All {} {} replayed the same as recorded.</p>",
            n,
            calls(n)
        );
    } else if let Some(d) = &r.divergence {
        html!(
            out,
            "<p class=\"replay-summary diverged\" id=\"replay-outcome\">Diverged at call {} of the sequence: \
             <a href=\"{}\"><code>{}</code></a> replayed differently. <a href=\"{}\">Open the replay</a></p>",
            n,
            call_tree_href(&r.run_id, Some(&d.source_id)),
            d.function,
            call_tree_href(&d.run_id, Some(&d.record_id))
        );
        let signature = d.record.get("signature").and_then(Value::as_str);
        out.push(&differences_table(&d.differences, signature));
    } else if let Some(s) = &r.stopped {
        let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        html!(
            out,
            "<p class=\"replay-summary stopped\" id=\"replay-outcome\">Stopped after {} {}: call \
             <a href=\"{}\"><code>{}</code></a> could not be replayed: <code>{}</code> {}</p>",
            n,
            calls(n),
            call_tree_href(&r.run_id, Some(&text("source_id"))),
            text("source_id"),
            text("error"),
            text("message")
        );
    }
    if r.truncated {
        out.push_lit(
            "<p class=\"meta\">The run has more calls than one sequence replays; name the \
             rest with <code>call_ids</code> (<code>POST /api/runs/&lt;id&gt;/replay</code>).</p>",
        );
    }
    if n > 0 {
        out.push_lit(
            "<table class=\"list grid replayed\"><thead><tr><th scope=\"col\" class=\"num\">#</th>\
             <th scope=\"col\">Function</th><th scope=\"col\">Recorded call</th>\
             <th scope=\"col\">Replay</th><th scope=\"col\">Compared</th></tr></thead><tbody>",
        );
        for (i, s) in r.replayed.iter().enumerate() {
            html!(
                out,
                "<tr><td class=\"num\" data-label=\"#\">{}</td><td data-label=\"Function\"><code>{}</code></td>\
                 <td data-label=\"Recorded call\"><a href=\"{}\" title=\"{}\" aria-label=\"call {} ({}) as recorded\">recorded</a></td>\
                 <td data-label=\"Replay\"><a href=\"{}\" title=\"{}\" aria-label=\"call {} ({}) replayed\">replay</a></td>\
                 <td data-label=\"Compared\">{}</td></tr>",
                i + 1,
                s.function,
                call_tree_href(&r.run_id, Some(&s.source_id)),
                s.source_id,
                i + 1,
                s.function,
                call_tree_href(&r.into_run, Some(&s.record_id)),
                s.record_id,
                i + 1,
                s.function,
                if s.same { "same" } else { "differs" }
            );
        }
        out.push_lit("</tbody></table>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_named_from_the_signature() {
        let sig = Some("(x, label, scale=2)");
        assert_eq!(difference_label("args[0]", sig), "x");
        assert_eq!(difference_label("args[1]", sig), "label");
        assert_eq!(difference_label("args[5]", sig), "args[5]");
        assert_eq!(difference_label("args[0]", None), "args[0]");
        assert_eq!(difference_label("kwargs.scale", sig), "scale");
        assert_eq!(difference_label("result", sig), "result");
    }
}
