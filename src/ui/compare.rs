//! `/runs/compare?a=<run>&b=<run>`: two runs (processes) side by side, a row per aligned pair
//! of calls (`service::compare_runs`), each side's call with its arguments and its result or
//! exception; the pairs that differ carry a mark and a word (not colour alone), and the values
//! that differ are marked too; each stored value links to its object page. The first
//! divergence is linked at the top, and a page opens a few pairs before it. A run is named by
//! its label when it has one (its key beside it, smaller). A page stays under
//! `COMPARE_PAGE_BYTES` whatever the runs hold: values are previews (the object page shows
//! all), each side shows its first arguments, and the rows end at the last that fits. A form
//! picks the two runs. On a narrow screen the two sides stack.

use serde_json::Value;

use super::markup::{html, markup};
use super::tree::call_tree_href;
use super::{object_link_named, param, shown, value_html_classed, Html, View};
use crate::limits::{COMPARE_PAGE_BYTES, COMPARE_PAGE_PAIRS, COMPARE_PICKER_RUNS};
use crate::service::{
    self, AlignedPair, ComparedCall, ComparedValue, Mark, PageStart, RunComparison, RunSide,
};
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// Pairs shown before the first divergence on the page that opens at it.
const BEFORE_DIVERGENCE: usize = 5;
/// Characters of a value, an argument's name or a function's name shown (the object page
/// shows a whole value).
const VALUE_CHARS: usize = 240;
const VALUE_LINES: usize = 4;
const NAME_CHARS: usize = 80;
/// Arguments shown on each side of a pair (the call tree shows them all).
const SIDE_ARGS: usize = 12;
/// What the layout, the pickers and the header may take of `COMPARE_PAGE_BYTES` at most is
/// measured; this is kept for the layout around `main` (status line, navigation, scripts).
const LAYOUT_BYTES: usize = 16 * 1024;

/// The page's address: a page of pairs from `offset`, or (`None`) the page that opens a few
/// pairs before the first divergence.
pub(super) fn href(a: &str, b: &str, offset: Option<usize>) -> String {
    let mut h = format!(
        "/runs/compare?a={}&b={}",
        encode_segment(a),
        encode_segment(b)
    );
    if let Some(offset) = offset {
        h.push_str(&format!("&offset={offset}"));
    }
    h
}

/// `text` cut to `chars` characters and `lines` lines, with "…" when cut.
fn cut(text: &str, chars: usize, lines: usize) -> std::borrow::Cow<'_, str> {
    let at = super::fold_at(text, chars, lines);
    if at >= text.len() {
        text.into()
    } else {
        format!("{}…", &text[..at]).into()
    }
}

/// A run as a person names it: its label when it has one, its key beside it in small print
/// (the key alone otherwise); linking to its call tree.
fn run_name(run: &RunSide) -> Html {
    let tree = call_tree_href(&run.run_id, None);
    if run.label.is_empty() {
        return markup!("<a href=\"{}\"><code>{}</code></a>", tree, run.run_id);
    }
    markup!(
        "<a href=\"{}\" title=\"run {}\">{}</a> <small class=\"run-key\">{}</small>",
        tree,
        run.run_id,
        run.label,
        run.run_id
    )
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

/// What names a run's program.
fn program(script: Option<&String>, page_url: Option<&String>) -> String {
    match (script, page_url) {
        (_, Some(url)) => format!("JS {url}"),
        (Some(s), None) => s.clone(),
        (None, None) => "(unknown program)".to_owned(),
    }
}

/// The form choosing the two runs: the newest ones, labelled ones by their label, each with
/// its program, PID, calls and key; the two compared (`compared`) are offered even when older.
fn picker(shared: &Shared, a: &str, b: &str, compared: &[&RunSide]) -> Html {
    let listing = service::runs(shared, 0, COMPARE_PICKER_RUNS);
    if listing.runs.is_empty() {
        return Html::lit(
            "<section class=\"empty\"><h2>No runs recorded yet</h2><p>Each run of an \
             instrumented program (one process) can be compared here once it recorded calls.\
             </p></section>",
        );
    }
    let runs = listing.runs;
    let mut older = Vec::new();
    for side in compared {
        let listed = runs.iter().any(|r| r.run_id == side.run_id);
        if !listed && !older.iter().any(|o: &&RunSide| o.run_id == side.run_id) {
            older.push(*side);
        }
    }
    let options = |chosen: &str| {
        let mut out = Html::new();
        for side in &older {
            let name = cut(
                &program(side.script.as_ref(), side.page_url.as_ref()),
                NAME_CHARS,
                1,
            )
            .into_owned();
            let name = if side.label.is_empty() {
                name
            } else {
                format!("{} · {name}", cut(&side.label, NAME_CHARS, 1))
            };
            let selected = if side.run_id == chosen {
                Html::lit(" selected")
            } else {
                Html::new()
            };
            html!(
                out,
                "<option value=\"{}\"{}>{} · {} · {}</option>",
                side.run_id,
                selected,
                name,
                plural(side.calls, "call"),
                side.run_id
            );
        }
        for r in &runs {
            let name = cut(
                &program(r.program.as_ref(), r.page_url.as_ref()),
                NAME_CHARS,
                1,
            )
            .into_owned();
            let name = if r.label.is_empty() {
                name
            } else {
                format!("{} · {name}", cut(&r.label, NAME_CHARS, 1))
            };
            let selected = if r.run_id == chosen {
                Html::lit(" selected")
            } else {
                Html::new()
            };
            html!(
                out,
                "<option value=\"{}\"{}>{} · pid {} · {} · {}</option>",
                r.run_id,
                selected,
                name,
                r.pid,
                // What the comparison counts: its calls and its program's events.
                plural(r.calls + r.events, "call"),
                r.run_id
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
    let whole = shown(&v.shown);
    let text = cut(&whole, VALUE_CHARS, VALUE_LINES);
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
    let rest = if text.len() == whole.len() {
        Html::new()
    } else {
        markup!(
            " <span class=\"muted cut\">({} characters; its object page shows all)</span>",
            whole.chars().count()
        )
    };
    markup!(
        "{}{}{}{}",
        mark,
        value_html_classed(&text, class),
        rest,
        link
    )
}

/// One side of a pair.
fn side(c: Option<&ComparedCall>, other: Option<&ComparedCall>, marks: &[Mark], run: &str) -> Html {
    let Some(c) = c else {
        return Html::lit("<span class=\"muted\">no such call in this run</span>");
    };
    let mut out = markup!("<div class=\"call d{}\">", c.depth.min(8));
    let function = cut(&c.function, NAME_CHARS, 1);
    html!(
        out,
        "<a class=\"fn\" href=\"{}\">{}</a>",
        call_tree_href(run, Some(&c.call_id)),
        function
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
        for (i, a) in c.args.iter().enumerate().take(SIDE_ARGS) {
            let label = match &a.name {
                Some(n) => n.clone(),
                None => names.get(i).cloned().unwrap_or_else(|| format!("arg {i}")),
            };
            let label = cut(&label, NAME_CHARS, 1).into_owned();
            let what = format!("{function} {label}");
            html!(
                out,
                "<dt>{}</dt><dd>{}</dd>",
                label,
                value(a, &what, arg_differs(a, i, other))
            );
        }
        out.push_lit("</dl>");
        if c.args.len() > SIDE_ARGS {
            html!(
                out,
                "<p class=\"muted\">and {} more arguments (<a href=\"{}\">in the call tree</a>)</p>",
                c.args.len() - SIDE_ARGS,
                call_tree_href(run, Some(&c.call_id))
            );
        }
    }
    if let Some(e) = &c.exception {
        let differs = marks.contains(&Mark::DifferentException);
        html!(
            out,
            "<p class=\"outcome\"><span class=\"label\">raised</span> {}</p>",
            value(e, &format!("{function} exception"), differs)
        );
    } else if let Some(r) = &c.result {
        let differs = marks.contains(&Mark::DifferentResult);
        html!(
            out,
            "<p class=\"outcome\"><span class=\"label\">returned</span> {}</p>",
            value(r, &format!("{function} result"), differs)
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

/// The header of a comparison: the runs, the counts, the first divergence.
fn header(c: &RunComparison) -> Html {
    let n = &c.counts;
    let mut out = markup!(
        "<p class=\"runs\">Run A {} ({}) · Run B {} ({})</p>\
         <p class=\"counts\">{}: {} same, {} with different arguments, {} with a different result, \
         {} with a different exception, {} only in run A, {} only in run B.</p>",
        run_name(&c.a),
        plural(c.a.calls, "call"),
        run_name(&c.b),
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
                format!("{}#pair-{}", href(&c.a.run_id, &c.b.run_id, None), d.index)
            };
            html!(
                out,
                "<p class=\"first-divergence\"><span class=\"diff-sign\" aria-hidden=\"true\">≠</span> \
                 First divergence: <a href=\"{}\">pair {}, {}</a> ({})</p>",
                target,
                d.index + 1,
                cut(&d.function, NAME_CHARS, 1),
                words(&d.marks)
            );
        }
        None => out.push_lit(
            "<p class=\"first-divergence same\">The two runs made the same calls with the same \
             arguments and outcomes.</p>",
        ),
    }
    out
}

/// The table of the page's pairs, ending at the last row that fits in `budget` bytes (one row
/// at least), and the links to the other pages.
fn pairs(c: &RunComparison, budget: usize) -> Html {
    if c.pairs.is_empty() {
        return Html::lit("<p class=\"muted\">No pairs on this page.</p>");
    }
    let head =
        "<table class=\"grid compare\"><thead><tr><th class=\"num\">#</th><th>Difference</th>\
         <th>Run A</th><th>Run B</th></tr></thead><tbody>";
    let mut rows = Html::new();
    let mut shown = 0;
    let mut left = budget.saturating_sub(head.len() + 1024);
    for p in &c.pairs {
        let r = row(p, c);
        if shown > 0 && r.len() > left {
            break;
        }
        left = left.saturating_sub(r.len());
        rows.push(&r);
        shown += 1;
    }
    let end = c.offset + shown;
    let mut out = Html::lit(head);
    out.push(&rows);
    out.push_lit("</tbody></table>");
    let (a, b) = (&c.a.run_id, &c.b.run_id);
    let mut pager = markup!(
        "<span>pairs {}–{} of {}</span>",
        c.offset + 1,
        end,
        c.total_pairs
    );
    if c.offset > 0 {
        html!(
            pager,
            " <a href=\"{}\">First pairs</a>",
            href(a, b, Some(0))
        );
    }
    if c.offset > COMPARE_PAGE_PAIRS {
        html!(
            pager,
            " <a href=\"{}\">Earlier pairs</a>",
            href(a, b, Some(c.offset - COMPARE_PAGE_PAIRS))
        );
    }
    if end < c.total_pairs {
        html!(
            pager,
            " <a href=\"{}\">Later pairs</a>",
            href(a, b, Some(end))
        );
    }
    html!(
        out,
        "<nav class=\"pager\" aria-label=\"Pairs\">{}</nav>",
        pager
    );
    out
}

/// The page. Without `offset` it opens a few pairs before the first divergence.
pub fn page(shared: &Shared, query: &[(String, String)]) -> View {
    let a = param(query, "a").unwrap_or("").trim().replace(' ', "+");
    let b = param(query, "b").unwrap_or("").trim().replace(' ', "+");
    let offset = param(query, "offset");
    let start = match offset.map(|o| o.trim().parse::<usize>()) {
        None => Ok(PageStart::BeforeFirstDivergence(BEFORE_DIVERGENCE)),
        Some(Ok(o)) => Ok(PageStart::At(o)),
        Some(Err(_)) => Err(markup!(
            "<p class=\"notice\" role=\"alert\">offset must be a number of pairs (0 or more), not \
             “{}”.</p>",
            cut(offset.unwrap_or(""), NAME_CHARS, 1)
        )),
    };
    let compared = if a.is_empty() && b.is_empty() {
        None
    } else {
        Some(start.and_then(|start| {
            service::compare_runs_from(shared, Some(&a), Some(&b), start, COMPARE_PAGE_PAIRS)
                .map_err(|e| markup!("<p class=\"notice\" role=\"alert\">{}</p>", e.message()))
        }))
    };
    let sides: Vec<&RunSide> = match &compared {
        Some(Ok(c)) => vec![&c.a, &c.b],
        _ => Vec::new(),
    };
    let mut main = markup!(
        "<div class=\"bar\"><h1>Compare runs</h1></div>{}",
        picker(shared, &a, &b, &sides)
    );
    match &compared {
        None => main.push_lit("<p class=\"muted\">Choose two runs to compare.</p>"),
        Some(Err(message)) => main.push(message),
        Some(Ok(c)) => {
            main.push(&header(c));
            let budget = COMPARE_PAGE_BYTES.saturating_sub(LAYOUT_BYTES + main.len());
            main.push(&pairs(c, budget));
        }
    }
    View::new("Compare runs", "/runs", main)
}
