//! `/runs/compare?a=<run>&b=<run>`: two runs (processes) side by side, a row per aligned pair
//! of calls (`service::compare_runs`), each side's call with its arguments and its result or
//! exception; the pairs that differ carry a mark and a word (not colour alone), and the values
//! that differ are marked too; each stored value links to its object page. The first
//! divergence is linked at the top. A form picks the two runs from the known processes. On a
//! narrow screen the two sides stack.

use serde_json::Value;

use super::markup::{html, markup};
use super::tree::call_tree_href;
use super::{object_link_named, param, shown, value_html_classed, Html, View};
use crate::limits::COMPARE_PAGE_PAIRS;
use crate::service::{self, AlignedPair, ComparedCall, ComparedValue, Mark, RunComparison};
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// The page's address for a page of pairs from `offset`.
pub(super) fn href(a: &str, b: &str, offset: usize) -> String {
    let mut h = format!(
        "/runs/compare?a={}&b={}",
        encode_segment(a),
        encode_segment(b)
    );
    if offset > 0 {
        h.push_str(&format!("&offset={offset}"));
    }
    h
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn words(marks: &[Mark]) -> String {
    marks
        .iter()
        .map(|m| match m {
            Mark::Same => "same",
            Mark::DifferentArguments => "different arguments",
            Mark::DifferentResult => "different result",
            Mark::DifferentException => "different exception",
            Mark::OnlyInA => "only in run A",
            Mark::OnlyInB => "only in run B",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The form choosing the two runs among the known processes.
fn picker(shared: &Shared, a: &str, b: &str) -> Html {
    let listing = service::processes(shared);
    if listing.processes.is_empty() {
        return Html::lit(
            "<section class=\"empty\"><h2>No runs recorded yet</h2><p>Each run of an \
             instrumented program (one process) can be compared here once it recorded calls.\
             </p></section>",
        );
    }
    let options = |chosen: &str| {
        let mut out = Html::new();
        for p in &listing.processes {
            let program = match (&p.script, &p.page_url) {
                (_, Some(url)) => format!("JS {url}"),
                (Some(s), None) => s.clone(),
                (None, None) => "(unknown program)".to_owned(),
            };
            let selected = if p.key == chosen {
                Html::lit(" selected")
            } else {
                Html::new()
            };
            html!(
                out,
                "<option value=\"{}\"{}>{} · pid {} · {} · {}</option>",
                p.key,
                selected,
                program,
                p.pid,
                plural(p.records, "record"),
                p.key
            );
        }
        out
    };
    markup!(
        "<form class=\"compare-pick\" method=\"get\" action=\"/runs/compare\">\
         <label>Run A <select name=\"a\">{}</select></label>\
         <label>Run B <select name=\"b\">{}</select></label>\
         <button type=\"submit\">Compare</button></form>",
        options(a),
        options(b)
    )
}

/// Whether the value at `i` of `args` differs from the other side's (by name, else position).
fn arg_differs(v: &ComparedValue, i: usize, other: Option<&ComparedCall>) -> bool {
    let Some(o) = other else {
        return false;
    };
    let peer = match &v.name {
        Some(n) => o.args.iter().find(|x| x.name.as_ref() == Some(n)),
        None => o.args.get(i).filter(|x| x.name.is_none()),
    };
    // The pickle_error event's object_id is the object's address (compared without it).
    let address = o.function == "pickle_error" && v.name.as_deref() == Some("object_id");
    match peer {
        Some(p) if address => match (p.shown.as_str(), v.shown.as_str()) {
            (Some(x), Some(y)) => {
                crate::pretty::without_addresses(x) != crate::pretty::without_addresses(y)
            }
            _ => p.shown != v.shown,
        },
        // Placeholders of two processes differ in their addresses only: compared as the
        // comparison does (`pretty::placeholder_key`).
        Some(p) if p.cid != v.cid && crate::pretty::placeholder_key(&v.shown).is_some() => {
            crate::pretty::placeholder_key(&p.shown) != crate::pretty::placeholder_key(&v.shown)
        }
        Some(p) => p.cid != v.cid || (v.cid.is_none() && p.shown != v.shown),
        None => true,
    }
}

fn value(v: &ComparedValue, what: &str, differs: bool) -> Html {
    let text = shown(&v.shown);
    let class = if differs { " changed" } else { "" };
    let mark = if differs {
        Html::lit("<span class=\"diff-mark\" title=\"differs from the other run\">≠</span> ")
    } else {
        Html::new()
    };
    let link = object_link_named(
        v.cid.as_ref().map(|c| Value::String(c.clone())).as_ref(),
        what,
    );
    markup!("{}{}{}", mark, value_html_classed(&text, class), link)
}

/// One side of a pair.
fn side(c: Option<&ComparedCall>, other: Option<&ComparedCall>, marks: &[Mark], run: &str) -> Html {
    let Some(c) = c else {
        return Html::lit("<span class=\"muted\">no such call in this run</span>");
    };
    let mut out = markup!("<div class=\"call d{}\">", c.depth.min(8));
    html!(
        out,
        "<a class=\"fn\" href=\"{}\">{}</a>",
        call_tree_href(run, Some(&c.call_id)),
        c.function
    );
    if c.args.is_empty() {
        out.push_lit("<span class=\"muted\">()</span>");
    } else {
        out.push_lit("<dl class=\"args\">");
        // Positional arguments named from the signature, as in the call tree.
        let names = c
            .signature
            .as_deref()
            .map(super::paused::positional_names)
            .unwrap_or_default();
        for (i, a) in c.args.iter().enumerate() {
            let label = match &a.name {
                Some(n) => n.clone(),
                None => names.get(i).cloned().unwrap_or_else(|| format!("arg {i}")),
            };
            let what = format!("{} {label}", c.function);
            html!(
                out,
                "<dt>{}</dt><dd>{}</dd>",
                label,
                value(a, &what, arg_differs(a, i, other))
            );
        }
        out.push_lit("</dl>");
    }
    if let Some(e) = &c.exception {
        let differs = marks.contains(&Mark::DifferentException);
        html!(
            out,
            "<p class=\"outcome\"><span class=\"label\">raised</span> {}</p>",
            value(e, &format!("{} exception", c.function), differs)
        );
    } else if let Some(r) = &c.result {
        let differs = marks.contains(&Mark::DifferentResult);
        html!(
            out,
            "<p class=\"outcome\"><span class=\"label\">returned</span> {}</p>",
            value(r, &format!("{} result", c.function), differs)
        );
    }
    out.push_lit("</div>");
    out
}

fn row(p: &AlignedPair, c: &RunComparison) -> Html {
    let same = p.marks == [Mark::Same];
    let (class, mark) = if same {
        ("same", "=")
    } else if p.marks.contains(&Mark::OnlyInA) || p.marks.contains(&Mark::OnlyInB) {
        ("diff only", "±")
    } else {
        ("diff", "≠")
    };
    markup!(
        "<tr id=\"pair-{}\" class=\"{}\"><td class=\"num\" data-label=\"Pair\">{}</td>\
         <td class=\"mark\" data-label=\"Difference\"><span class=\"diff-sign\" aria-hidden=\"true\">{}</span> {}</td>\
         <td data-label=\"Run A\">{}</td><td data-label=\"Run B\">{}</td></tr>",
        p.index,
        class,
        p.index + 1,
        mark,
        words(&p.marks),
        side(p.a.as_ref(), p.b.as_ref(), &p.marks, &c.a.run_id),
        side(p.b.as_ref(), p.a.as_ref(), &p.marks, &c.b.run_id)
    )
}

fn comparison(c: &RunComparison) -> Html {
    let n = &c.counts;
    let mut out = markup!(
        "<p class=\"runs\">Run A <a href=\"{}\">{}</a> ({}) · Run B <a href=\"{}\">{}</a> ({})</p>\
         <p class=\"counts\">{}: {} same, {} with different arguments, {} with a different result, \
         {} with a different exception, {} only in run A, {} only in run B.</p>",
        call_tree_href(&c.a.run_id, None),
        c.a.run_id,
        plural(c.a.calls, "call"),
        call_tree_href(&c.b.run_id, None),
        c.b.run_id,
        plural(c.b.calls, "call"),
        plural(c.total_pairs, "pair"),
        n.same,
        n.different_arguments,
        n.different_result,
        n.different_exception,
        n.only_in_a,
        n.only_in_b
    );
    if c.truncated {
        html!(
            out,
            "<p class=\"notice\">Only the first {} calls of each run are compared.</p>",
            crate::limits::MAX_COMPARE_CALLS
        );
    }
    match &c.first_divergence {
        Some(d) => {
            let on_page = d.index >= c.offset && d.index < c.offset + c.pairs.len();
            let target = if on_page {
                format!("#pair-{}", d.index)
            } else {
                format!(
                    "{}#pair-{}",
                    href(&c.a.run_id, &c.b.run_id, d.index),
                    d.index
                )
            };
            html!(
                out,
                "<p class=\"first-divergence\"><span class=\"diff-sign\" aria-hidden=\"true\">≠</span> \
                 First divergence: <a href=\"{}\">pair {}, {}</a> ({})</p>",
                target,
                d.index + 1,
                d.function,
                words(&d.marks)
            );
        }
        None => out.push_lit(
            "<p class=\"first-divergence same\">The two runs made the same calls with the same \
             arguments and outcomes.</p>",
        ),
    }
    if c.pairs.is_empty() {
        out.push_lit("<p class=\"muted\">No pairs on this page.</p>");
        return out;
    }
    out.push_lit(
        "<table class=\"grid compare\"><thead><tr><th class=\"num\">#</th><th>Difference</th>\
         <th>Run A</th><th>Run B</th></tr></thead><tbody>",
    );
    for p in &c.pairs {
        out.push(&row(p, c));
    }
    out.push_lit("</tbody></table>");
    let mut pager = Html::new();
    if c.offset > 0 {
        html!(
            pager,
            "<a href=\"{}\">Earlier pairs</a> ",
            href(&c.a.run_id, &c.b.run_id, c.offset.saturating_sub(c.limit))
        );
    }
    let end = c.offset + c.pairs.len();
    if end < c.total_pairs {
        html!(
            pager,
            "<a href=\"{}\">Later pairs</a>",
            href(&c.a.run_id, &c.b.run_id, end)
        );
    }
    if c.offset > 0 || end < c.total_pairs {
        html!(
            out,
            "<nav class=\"pager\" aria-label=\"Pairs\">{}</nav>",
            pager
        );
    }
    out
}

/// The page.
pub fn page(shared: &Shared, query: &[(String, String)]) -> View {
    let a = param(query, "a").unwrap_or("").trim().replace(' ', "+");
    let b = param(query, "b").unwrap_or("").trim().replace(' ', "+");
    let offset = param(query, "offset")
        .and_then(|o| o.parse::<usize>().ok())
        .unwrap_or(0);
    let body = if a.is_empty() && b.is_empty() {
        Html::lit("<p class=\"muted\">Choose two runs to compare.</p>")
    } else {
        match service::compare_runs(shared, Some(&a), Some(&b), offset, COMPARE_PAGE_PAIRS) {
            Ok(c) => comparison(&c),
            Err(e) => markup!("<p class=\"notice\" role=\"alert\">{}</p>", e.message()),
        }
    };
    View::new(
        "Compare runs",
        "/call-tree",
        markup!(
            "<div class=\"bar\"><h1>Compare runs</h1></div>{}{}",
            picker(shared, &a, &b),
            body
        ),
    )
}
