//! `/runs`: every run (what one process recorded), newest first, with its label and notes
//! editable in place (forms that call `POST /api/runs/<id>/label` and `/notes`), each linking
//! to its call tree, and a Delete… disclosure whose second button (`DELETE /api/runs/<id>`)
//! deletes the run: a confirmation step without a script dialog, reachable by keyboard.

use super::markup::{html, markup};
use super::tree::call_tree_href;
use super::{param, time, Html, View};
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// Runs shown on one page.
const PER_PAGE: usize = 100;

/// `/runs`. Live: the table is keyed by run (one `<tbody>` each), so a new run, a deleted one
/// or changed counts update the page while a label or notes being typed, and an open Delete…
/// confirmation, stay with their own run.
pub fn page(shared: &Shared, query: &[(String, String)]) -> View {
    let offset = param(query, "offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    let listing = service::runs(shared, offset, PER_PAGE);
    View::new(
        "Runs",
        "/runs",
        markup!(
            "<div class=\"bar\"><h1>Runs</h1></div>\
             <p class=\"meta\">A run is what one process of the program recorded, from its first \
             call to its last. Label the ones to find again; notes say what they were.</p>\
             <table class=\"list grid runs\" id=\"run-list\" data-live data-keyed data-carry>{}</table>\
             <div id=\"run-pager\" data-live>{}</div>{}",
            table(&listing),
            pager(&listing, offset),
            super::replayed::run_form(shared)
        ),
    )
}

/// What names a run's program for a person.
fn program(r: &service::Run) -> String {
    match (&r.program, &r.page_url) {
        (_, Some(url)) => format!("JS {url}"),
        (Some(script), None) => script.clone(),
        (None, None) => "(unknown program)".to_owned(),
    }
}

fn table(listing: &service::RunListing) -> Html {
    if listing.runs.is_empty() {
        return Html::lit(
            "<tbody data-key=\"empty\"><tr><td><section class=\"empty\"><h2>No runs recorded yet</h2>\
             <p>Each run of an instrumented program appears here as soon as one of its calls \
             completes.</p></section></td></tr></tbody>",
        );
    }
    let mut out = Html::lit(
        "<thead data-key=\"head\"><tr><th scope=\"col\">Run</th><th scope=\"col\">PID</th>\
         <th scope=\"col\">Started</th><th scope=\"col\">Last call</th><th scope=\"col\" class=\"num\">Calls</th>\
         <th scope=\"col\" class=\"num\">Exceptions</th><th scope=\"col\">Label</th><th scope=\"col\">Notes</th>\
         </tr></thead>",
    );
    for (i, r) in listing.runs.iter().enumerate() {
        let api = format!("/api/runs/{}", encode_segment(&r.run_id));
        let name = program(r);
        let mut label = if r.label.is_empty() {
            Html::new()
        } else {
            markup!(" <span class=\"badge run-label\">{}</span>", r.label)
        };
        // The run of the same program before it on this page, to compare with.
        let before = listing.runs[i + 1..]
            .iter()
            .find(|o| (&o.program, &o.page_url) == (&r.program, &r.page_url));
        if let Some(o) = before {
            html!(
                label,
                " <a class=\"run-compare\" href=\"{}\" title=\"Compare run {} with run {}\">Compare with the run before</a>",
                super::compare::href(&o.run_id, &r.run_id, None),
                o.run_id,
                r.run_id
            );
        }
        // The run as the confirmation names it: by its label when it has one.
        let doomed = if r.label.is_empty() {
            r.run_id.clone()
        } else {
            format!("“{}”", r.label)
        };
        html!(
            out,
            "<tbody data-key=\"run:{}\"><tr data-run=\"{}\"><td><a href=\"{}\" title=\"run {}\">{}</a>{}\
             <details class=\"run-delete\"><summary>Delete…</summary>\
             <form data-api=\"{}\" data-method=\"DELETE\"><p>Its records, label, notes and the objects only \
             it used go for good.</p><button type=\"submit\" class=\"danger\" title=\"run {}\">Really delete run {} ({} {})?</button>\
             <span class=\"error\" role=\"alert\"></span></form></details></td><td data-label=\"PID\">{}</td>\
             <td data-label=\"Started\">{}</td><td data-label=\"Last call\">{}</td>\
             <td class=\"num\" data-label=\"Calls\">{}</td><td class=\"num\" data-label=\"Exceptions\">{}</td>\
             <td data-label=\"Label\"><form class=\"run-edit\" data-api=\"{}/label\"><input name=\"label\" value=\"{}\" \
             maxlength=\"200\" aria-label=\"Label of the run of {} (pid {})\">\
             <button type=\"submit\">Save label</button><span class=\"error\" role=\"alert\"></span></form></td>\
             <td data-label=\"Notes\"><form class=\"run-edit\" data-api=\"{}/notes\"><textarea name=\"notes\" rows=\"2\" \
             aria-label=\"Notes on the run of {} (pid {})\">{}</textarea>\
             <button type=\"submit\">Save notes</button><span class=\"error\" role=\"alert\"></span></form></td></tr></tbody>",
            r.run_id,
            r.run_id,
            call_tree_href(&r.run_id, None),
            r.run_id,
            name,
            label,
            api,
            r.run_id,
            doomed,
            r.calls,
            if r.calls == 1 { "call" } else { "calls" },
            r.pid,
            time(r.start),
            time(r.end),
            r.calls,
            r.exceptions,
            api,
            r.label,
            name,
            r.pid,
            api,
            name,
            r.pid,
            r.notes,
        );
    }
    out
}

/// Links to newer and older runs when they do not fit on one page.
fn pager(listing: &service::RunListing, offset: usize) -> Html {
    let mut out = Html::new();
    let shown_to = offset + listing.runs.len();
    if offset > 0 || shown_to < listing.total {
        html!(
            out,
            "<nav class=\"pager\" aria-label=\"More runs\"><span>runs {}–{} of {}</span>",
            (offset + 1).min(listing.total),
            shown_to,
            listing.total
        );
        if offset > 0 {
            html!(
                out,
                " <a href=\"/runs?offset={}\">Newer runs</a>",
                offset.saturating_sub(PER_PAGE)
            );
        }
        if shown_to < listing.total {
            html!(out, " <a href=\"/runs?offset={}\">Older runs</a>", shown_to);
        }
        out.push_lit("</nav>");
    }
    out
}

/// A run as a person names it: by its label when it has one, with its key beside it in small
/// print (its key alone otherwise).
pub fn run_name(shared: &Shared, run_id: &str) -> Html {
    match service::run_meta(shared, run_id) {
        Some(meta) if !meta.label.is_empty() => markup!(
            "<span class=\"run-name\" title=\"run {}\">{}</span> <small class=\"run-key\">{}</small>",
            run_id,
            meta.label,
            run_id
        ),
        _ => markup!("<code>{}</code>", run_id),
    }
}

/// The label and notes of a run, for its call tree page (nothing when it has none).
pub fn summary(shared: &Shared, run_id: &str) -> Html {
    let Some(meta) = service::run_meta(shared, run_id) else {
        return Html::new();
    };
    let mut out = Html::lit("<div class=\"run-meta\" id=\"run-meta\">");
    if !meta.label.is_empty() {
        html!(
            out,
            "<p><span class=\"badge run-label\">{}</span></p>",
            meta.label
        );
    }
    if !meta.notes.is_empty() {
        html!(out, "<p class=\"run-notes\">{}</p>", meta.notes);
    }
    out.push_lit("<p><a href=\"/runs\">Label or notes on the Runs page</a></p></div>");
    out
}
