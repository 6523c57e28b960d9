//! The call-tree pages: `/call-tree` lists the processes that made calls (filtered with
//! `?filter=`), `/call-tree/<process_key>` shows every call record and client event of one
//! process as a tree, with a details panel for the call chosen by `?selected=<call_id>` and a
//! step-through of the records in time order (`?filter=` narrows the tree to matching records
//! and their callers; `?events=hide` leaves out the client's events).
//!
//! Parents are inferred from stack traces. Like the original server, we match stack-trace
//! suffixes or prefixes, whichever yields more parents; the rest is our own reading. A record's
//! parent is a record whose stack trace is a proper suffix of its own (stack traces list the
//! innermost caller first, so a caller's stack is what remains of its callee's once the callee's
//! inner frames are cut off), or, read the other way round, a proper prefix. Both readings are
//! tried and the one that finds more parents wins (a tie keeps the suffix reading, the order the
//! Python client sends). Frames are compared by file, line and function. Among the records
//! whose stack matches, the longest match is the nearest caller (a caller that was not recorded
//! is skipped over); among records with that same stack (a loop calling from one line), the
//! parent is the latest one that started no later than the child and had not completed before
//! the child started. A record with none is a root.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::markup::{html, markup};
use super::source::{frames, Frame};
use super::{object_link, param, shown, time, value_html_classed, Answer, Html, View};
use crate::service::{self, ProcessRecords, RecordRow};
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// A duration in seconds, short.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return String::new();
    }
    if secs < 1e-3 {
        format!("{:.0} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else if secs < 120.0 {
        format!("{secs:.2} s")
    } else {
        format!("{:.1} min", secs / 60.0)
    }
}

/// The call-tree page of a process, with a call selected.
pub fn call_tree_href(key: &str, selected: Option<&str>) -> String {
    match selected {
        Some(id) => format!(
            "/call-tree/{}?selected={}",
            encode_segment(key),
            encode_segment(id)
        ),
        None => format!("/call-tree/{}", encode_segment(key)),
    }
}

fn contains_ci(hay: &str, needle: &str) -> bool {
    needle.is_empty() || hay.to_lowercase().contains(&needle.to_lowercase())
}

// --- /call-tree ---

/// `/call-tree`: one row per process.
pub fn processes(shared: &Shared, query: &[(String, String)]) -> View {
    let filter = param(query, "filter").unwrap_or("").trim();
    View::new(
        "Call trees",
        "/call-tree",
        markup!(
            "<div class=\"bar\"><h1>Call trees</h1></div>\
             <form class=\"filter\" method=\"get\" action=\"/call-tree\">\
             <input type=\"search\" name=\"filter\" value=\"{}\" placeholder=\"Filter by process key, PID or page\" \
             aria-label=\"Filter processes\" data-filter=\"process-rows\"><button type=\"submit\">Filter</button></form>\
             <div id=\"process-list\" data-live>{}</div>",
            filter,
            process_table(shared, filter)
        ),
    )
}

fn process_table(shared: &Shared, filter: &str) -> Html {
    let listing = service::processes(shared);
    if listing.processes.is_empty() {
        return Html::lit(
            "<section class=\"empty\"><h2>No calls recorded yet</h2><p>Each process of an \
             instrumented program appears here with its calls as soon as one completes.</p>\
             </section>",
        );
    }
    let mut out = Html::lit(
        "<table class=\"list\"><thead><tr><th>Process</th><th>PID</th><th>Started</th>\
         <th>First call</th><th>Last call</th><th class=\"num\">Records</th></tr></thead>\
         <tbody id=\"process-rows\">",
    );
    for p in &listing.processes {
        let who = match (&p.page_url, &p.origin) {
            (_, Some(origin)) => format!(
                "JS {} (page origin {origin})",
                p.page_url.as_deref().unwrap_or("")
            ),
            (Some(url), None) => format!("JS {url}"),
            (None, None) => p.pid.to_string(),
        };
        let text = format!(
            "{} {} {}",
            p.key,
            p.pid,
            p.page_url.as_deref().unwrap_or("")
        );
        let hidden = if contains_ci(&text, filter) {
            Html::new()
        } else {
            Html::lit(" hidden")
        };
        html!(
            out,
            "<tr data-text=\"{}\"{}><td><a href=\"{}\"><code>{}</code></a></td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            text.to_lowercase(),
            hidden,
            call_tree_href(&p.key, None),
            p.key,
            who,
            time(p.start_time),
            time(p.first_at),
            time(p.last_at),
            p.records
        );
    }
    out.push_lit("</tbody></table>");
    if !listing.complete {
        out.push(&incomplete());
    }
    out
}

fn incomplete() -> Html {
    markup!(
        "<p class=\"notice\">Only the records in memory and the {} before them in the database \
         file were read; older processes and calls are not shown.</p>",
        crate::limits::PROCESS_DISK_SCAN
    )
}

// --- parents ---

/// How stack traces are read when looking for a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A caller's stack is a proper suffix of its callee's (innermost caller first).
    Suffix,
    /// A caller's stack is a proper prefix of its callee's (outermost caller first).
    Prefix,
}

/// The parent of every record, and the reading that found them (see the module
/// documentation). `stacks[i]` are record `i`'s frames as ids (equal frames, equal ids);
/// `times[i]` its start and completion; records are in order of start.
pub fn infer_parents(stacks: &[Vec<u32>], times: &[(f64, f64)]) -> (Vec<Option<usize>>, Reading) {
    let suffix = parents_by(stacks, times, Reading::Suffix);
    let prefix = parents_by(stacks, times, Reading::Prefix);
    let found = |p: &[Option<usize>]| p.iter().filter(|x| x.is_some()).count();
    if found(&prefix) > found(&suffix) {
        (prefix, Reading::Prefix)
    } else {
        (suffix, Reading::Suffix)
    }
}

fn parents_by(stacks: &[Vec<u32>], times: &[(f64, f64)], reading: Reading) -> Vec<Option<usize>> {
    let mut by_stack: HashMap<&[u32], Vec<usize>> = HashMap::new();
    for (i, s) in stacks.iter().enumerate() {
        if !s.is_empty() {
            by_stack.entry(s.as_slice()).or_default().push(i);
        }
    }
    for list in by_stack.values_mut() {
        list.sort_by(|a, b| times[*a].0.total_cmp(&times[*b].0).then(a.cmp(b)));
    }
    let mut parents = vec![None; stacks.len()];
    for (i, s) in stacks.iter().enumerate() {
        let (start, _) = times[i];
        for len in (1..s.len()).rev() {
            let part = match reading {
                Reading::Suffix => &s[s.len() - len..],
                Reading::Prefix => &s[..len],
            };
            let Some(list) = by_stack.get(part) else {
                continue;
            };
            let started = &list[..list.partition_point(|c| times[*c].0 <= start)];
            if let Some(p) = started.iter().rev().find(|c| times[**c].1 >= start) {
                parents[i] = Some(*p);
                break;
            }
        }
    }
    parents
}

/// Frame ids of every row's stack (file, line and function; equal frames get equal ids).
fn stack_ids(rows: &[RecordRow]) -> Vec<Vec<u32>> {
    let mut ids: HashMap<(String, Option<usize>, String), u32> = HashMap::new();
    rows.iter()
        .map(|r| {
            frames(&r.stack)
                .into_iter()
                .map(|f| {
                    let n = ids.len() as u32;
                    *ids.entry((f.filename, f.lineno, f.function)).or_insert(n)
                })
                .collect()
        })
        .collect()
}

// --- /call-tree/<process_key> ---

struct Tree<'a> {
    key: &'a str,
    rows: &'a [RecordRow],
    parents: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    /// Rows the filter shows: matches and their ancestors.
    shown: Vec<bool>,
    matches: Vec<bool>,
    filter: &'a str,
    /// `&filter=...&events=hide` as the page was asked for, kept by its links.
    keep_query: String,
    selected: Option<usize>,
}

impl Tree<'_> {
    fn href(&self, i: usize) -> String {
        let mut h = call_tree_href(self.key, Some(&self.rows[i].call_id));
        h.push_str(&self.keep_query);
        h
    }

    fn node(&self, out: &mut Html, i: usize) {
        let r = &self.rows[i];
        let mut class = String::from("call");
        if r.event {
            class.push_str(" event");
        }
        if r.raised {
            class.push_str(" raised");
        }
        if !self.filter.is_empty() && !self.matches[i] {
            class.push_str(" context");
        }
        let current = if self.selected == Some(i) {
            Html::lit(" aria-current=\"true\"")
        } else {
            Html::new()
        };
        html!(
            out,
            "<li><a class=\"{}\" href=\"{}\"{}><span class=\"fn\">{}</span>",
            class,
            self.href(i),
            current,
            r.method
        );
        if r.event || r.status != "success" {
            html!(out, " <span class=\"st\">{}</span>", r.status);
        }
        if r.repl {
            out.push_lit(" <span class=\"badge repl\">REPL</span>");
        }
        if let Some(a) = r.resolution {
            html!(
                out,
                " <span class=\"badge {}\" title=\"the debugger changed this call\">{}</span>",
                a.as_str(),
                a.as_str()
            );
        }
        if !r.event {
            html!(
                out,
                " <span class=\"dur\">{}</span>",
                duration(r.completed_at - r.started_at)
            );
        }
        out.push_lit("</a>");
        let kids: Vec<usize> = self.children[i]
            .iter()
            .copied()
            .filter(|c| self.shown[*c])
            .collect();
        if !kids.is_empty() {
            out.push_lit("<ul>");
            for c in kids {
                self.node(out, c);
            }
            out.push_lit("</ul>");
        }
        out.push_lit("</li>");
    }
}

/// `/call-tree/<process_key>`.
pub fn process(shared: &Shared, path: &str, query: &[(String, String)]) -> Answer {
    let raw = path.strip_prefix("/call-tree/").unwrap_or("");
    if raw.is_empty() || raw.contains('/') {
        return Err(path.to_owned());
    }
    let key = crate::urlenc::percent_decode(raw);
    let selected_id = param(query, "selected").filter(|s| !s.is_empty());
    let filter = param(query, "filter").unwrap_or("").trim();
    let hide_events = param(query, "events") == Some("hide");
    let Some(recs) = service::process_records(shared, &key, selected_id) else {
        return Err(path.to_owned());
    };
    let ProcessRecords {
        process: p,
        rows,
        selected,
        complete,
    } = &recs;
    let stacks = stack_ids(rows);
    let times: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.started_at, r.completed_at))
        .collect();
    let (parents, _) = infer_parents(&stacks, &times);
    let mut children = vec![Vec::new(); rows.len()];
    for (i, p) in parents.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    let matches: Vec<bool> = rows
        .iter()
        .map(|r| {
            (!hide_events || !r.event)
                && (contains_ci(&r.method, filter)
                    || contains_ci(&r.status, filter)
                    || contains_ci(&r.call_id, filter))
        })
        .collect();
    let mut shown = vec![false; rows.len()];
    for i in (0..rows.len()).filter(|i| matches[*i]) {
        let mut at = Some(i);
        while let Some(j) = at {
            if shown[j] {
                break;
            }
            shown[j] = true;
            at = parents[j];
        }
    }
    let selected_row = selected_id.and_then(|id| rows.iter().rposition(|r| r.call_id == id));
    let mut keep_query = String::new();
    if !filter.is_empty() {
        let _ = write!(keep_query, "&filter={}", encode_segment(filter));
    }
    if hide_events {
        keep_query.push_str("&events=hide");
    }
    let tree = Tree {
        key: &key,
        rows,
        parents,
        children,
        shown,
        matches,
        filter,
        keep_query,
        selected: selected_row,
    };

    let who = match (&p.page_url, &p.origin) {
        (url, Some(origin)) => markup!(
            "JS page {} <span class=\"badge origin\">page origin {}</span>",
            url.as_deref().unwrap_or(""),
            origin
        ),
        (Some(url), None) => markup!("JS page {}", url),
        (None, None) => markup!("PID {}", p.pid),
    };
    let mut main = markup!(
        "<div class=\"bar\"><h1>Call tree <code class=\"key\">{}</code></h1>\
         <a href=\"/call-tree\">All processes</a></div>\
         <p class=\"meta\" id=\"tree-meta\" data-live>{} · process started {} · {} record{} · \
         first {} · last {}</p>\
         <form class=\"filter\" method=\"get\" action=\"{}\"><input type=\"search\" name=\"filter\" \
         value=\"{}\" placeholder=\"Filter by function, status or call id\" aria-label=\"Filter calls\">",
        p.key,
        who,
        time(p.start_time),
        p.records,
        if p.records == 1 { "" } else { "s" },
        time(p.first_at),
        time(p.last_at),
        call_tree_href(&key, None),
        filter,
    );
    if let Some(id) = selected_id {
        html!(
            main,
            "<input type=\"hidden\" name=\"selected\" value=\"{}\">",
            id
        );
    }
    if hide_events {
        main.push_lit("<input type=\"hidden\" name=\"events\" value=\"hide\">");
    }
    // The other choice of client events, keeping the rest of the query.
    let mut toggle = call_tree_href(&key, selected_id);
    let mut sep = if selected_id.is_some() { '&' } else { '?' };
    if !filter.is_empty() {
        let _ = write!(toggle, "{sep}filter={}", encode_segment(filter));
        sep = '&';
    }
    let toggle_label = if hide_events {
        "Show client events"
    } else {
        let _ = write!(toggle, "{sep}events=hide");
        "Hide client events"
    };
    html!(
        main,
        "<button type=\"submit\">Filter</button><a class=\"toggle\" href=\"{}\">{}</a></form>",
        toggle,
        toggle_label
    );
    if !complete {
        main.push(&incomplete());
    }
    html!(
        main,
        "<nav class=\"stepper\" id=\"tree-stepper\" data-live aria-label=\"Step through the calls\">{}</nav>\
         <div class=\"tree-cols\"><section class=\"tree-pane\" id=\"tree-nodes\" data-live tabindex=\"0\" aria-label=\"Calls\">{}</section>\
         <aside class=\"details\" id=\"tree-details\" data-live>{}</aside></div>",
        stepper(&tree),
        nodes(&tree),
        details(&tree, selected_id, selected.as_ref()),
    );
    Ok(View::new(
        format!("Call tree {}", p.key),
        "/call-tree",
        main,
    ))
}

fn nodes(tree: &Tree) -> Html {
    let roots: Vec<usize> = (0..tree.rows.len())
        .filter(|i| tree.parents[*i].is_none() && tree.shown[*i])
        .collect();
    if roots.is_empty() {
        return markup!(
            "<p class=\"empty\">No call matches <code>{}</code>.</p>",
            tree.filter
        );
    }
    let mut out = Html::lit("<ul class=\"tree\">");
    for i in roots {
        tree.node(&mut out, i);
    }
    out.push_lit("</ul>");
    out
}

/// Previous and next call in time order (among the matches when filtered).
fn stepper(tree: &Tree) -> Html {
    let order: Vec<usize> = (0..tree.rows.len()).filter(|i| tree.matches[*i]).collect();
    if order.is_empty() {
        return Html::new();
    }
    let pos = tree
        .selected
        .and_then(|s| order.iter().position(|i| *i == s));
    let link = |i: usize, rel: &str, label: &str| {
        markup!(
            "<a href=\"{}\" rel=\"{}\" data-step=\"{}\">{}</a>",
            tree.href(i),
            rel,
            rel,
            label
        )
    };
    let (prev, here, next) = match pos {
        Some(p) => (
            p.checked_sub(1).map(|q| order[q]),
            format!("record {} of {}", p + 1, order.len()),
            order.get(p + 1).copied(),
        ),
        None => (
            None,
            format!(
                "{} record{}",
                order.len(),
                if order.len() == 1 { "" } else { "s" }
            ),
            order.first().copied(),
        ),
    };
    let mut out = Html::new();
    match prev {
        Some(i) => out.push(&link(i, "prev", "◀ Previous")),
        None => out.push_lit("<span class=\"off\">◀ Previous</span>"),
    }
    html!(out, " <span class=\"pos\">{} in time order</span> ", here);
    match next {
        Some(i) => out.push(&link(
            i,
            "next",
            if pos.is_some() {
                "Next ▶"
            } else {
                "First ▶"
            },
        )),
        None => out.push_lit("<span class=\"off\">Next ▶</span>"),
    }
    out.push_lit(" <span class=\"keys\">(keys j and k)</span>");
    out
}

/// A program value in a `code` block (long ones fold), with more classes (a leading space).
fn value_html(v: &Value, class: &str) -> Html {
    value_html_classed(&shown(v), class)
}

fn details(tree: &Tree, selected_id: Option<&str>, sel: Option<&Value>) -> Html {
    let (Some(i), Some(sel)) = (tree.selected, sel) else {
        return match selected_id {
            Some(id) => markup!(
                "<p class=\"empty\">This process has no call <code>{}</code>.</p>",
                id
            ),
            None => Html::lit(
                "<p class=\"empty\">Select a call to see its arguments, result and stack. \
                 The tree nests each call under the call it was made from, as far as \
                 the stack traces tell.</p>",
            ),
        };
    };
    let r = &tree.rows[i];
    let mut out = markup!("<h2><span class=\"fn\">{}</span>", r.method);
    let kind = if r.event { "event" } else { "call" };
    html!(
        out,
        " <span class=\"badge {}\">{}</span>",
        if r.raised { "raised" } else { kind },
        if r.event {
            r.status.as_str()
        } else if r.raised {
            "raised"
        } else {
            "returned"
        }
    );
    out.push_lit("</h2><dl class=\"facts\">");
    html!(
        out,
        "<dt>{}</dt><dd><code>{}</code></dd>",
        if r.event { "Event" } else { "Call" },
        r.call_id
    );
    if r.event {
        html!(out, "<dt>At</dt><dd>{}</dd>", time(r.started_at));
    } else {
        html!(
            out,
            "<dt>Started</dt><dd>{}</dd><dt>Completed</dt><dd>{}</dd><dt>Duration</dt><dd>{}</dd>",
            time(r.started_at),
            time(r.completed_at),
            duration(r.completed_at - r.started_at)
        );
    }
    if let Some(p) = tree.parents[i] {
        html!(
            out,
            "<dt>Called from</dt><dd><a href=\"{}\"><span class=\"fn\">{}</span></a></dd>",
            tree.href(p),
            tree.rows[p].method
        );
    }
    let n = tree.children[i].len();
    if n > 0 {
        html!(out, "<dt>Calls made</dt><dd>{}</dd>", n);
    }
    if let Some(sessions) = sel.get("repl_sessions").and_then(Value::as_array) {
        if !sessions.is_empty() {
            out.push_lit("<dt>REPL</dt><dd>");
            for s in sessions.iter().filter_map(Value::as_str) {
                html!(
                    out,
                    "<a href=\"/repl/{}\"><code>{}</code></a> ",
                    encode_segment(s),
                    s
                );
            }
            out.push_lit("</dd>");
        }
    }
    out.push_lit("</dl>");
    if let Some(sig) = sel.get("signature").and_then(Value::as_str) {
        html!(out, "<p class=\"sig\"><code>{}{}</code></p>", r.method, sig);
    }
    arguments(&mut out, sel);
    outcome(&mut out, sel, r);
    if let Some(m) = sel.as_object() {
        out.push(&super::resolution_html(&r.method, m));
    }
    if let Some(line) = sel.get("log").and_then(Value::as_str) {
        html!(
            out,
            "<h3>Log</h3><p class=\"logline\"><code>{}</code></p>",
            line
        );
    }
    stack(&mut out, r);
    out
}

fn arguments(out: &mut Html, sel: &Value) {
    let args = sel.get("pretty_args").and_then(Value::as_array);
    let kwargs = sel.get("pretty_kwargs").and_then(Value::as_object);
    let target = sel.get("pretty_target").filter(|t| !t.is_null());
    if args.is_none_or(Vec::is_empty) && kwargs.is_none_or(|k| k.is_empty()) && target.is_none() {
        return;
    }
    out.push_lit("<h3>Arguments</h3><dl class=\"args\">");
    if let Some(t) = target {
        html!(
            out,
            "<dt>target</dt><dd>{}{}</dd>",
            value_html(t, ""),
            object_link(sel.get("target"))
        );
    }
    for (i, a) in args.into_iter().flatten().enumerate() {
        html!(
            out,
            "<dt>{}</dt><dd>{}{}</dd>",
            i,
            value_html(a, ""),
            object_link(sel.get("args").and_then(|x| x.get(i)))
        );
    }
    for (k, v) in kwargs.into_iter().flatten() {
        html!(
            out,
            "<dt>{}</dt><dd>{}{}</dd>",
            k,
            value_html(v, ""),
            object_link(sel.get("kwargs").and_then(|x| x.get(k)))
        );
    }
    out.push_lit("</dl>");
}

fn outcome(out: &mut Html, sel: &Value, r: &RecordRow) {
    let exception = sel.get("exception").filter(|e| !e.is_null());
    if let Some(e) = exception {
        out.push_lit("<h3>Exception</h3>");
        let kind = sel.get("exception_type").and_then(Value::as_str);
        let message = sel.get("exception_message").and_then(Value::as_str);
        if let Some(kind) = kind {
            html!(
                out,
                "<p class=\"outcome raised\"><code>{}</code>{}{}</p>",
                kind,
                message.map(|m| format!(": {m}")),
                object_link(sel.get("exception_cid"))
            );
        } else {
            html!(
                out,
                "<div class=\"with-obj\">{}{}</div>",
                value_html(e, " raised"),
                object_link(sel.get("exception_cid"))
            );
        }
        if let Some(tb) = sel
            .get("exception_traceback")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            html!(
                out,
                "<h3>Traceback</h3><pre class=\"traceback\">{}</pre>",
                tb
            );
        }
    }
    let result = sel.get("pretty_result").filter(|v| !v.is_null());
    if exception.is_none() || result.is_some() {
        if let Some(v) = result.or(if r.event { None } else { Some(&Value::Null) }) {
            html!(
                out,
                "<h3>Result</h3><div class=\"with-obj\">{}{}</div>",
                value_html(v, ""),
                object_link(sel.get("result_cid"))
            );
        }
    }
}

fn stack(out: &mut Html, r: &RecordRow) {
    let frames: Vec<Frame> = frames(&r.stack);
    if frames.is_empty() {
        return;
    }
    html!(
        out,
        "<h3>Stack <a class=\"more\" href=\"/callstack/call/{}\">with source</a></h3>\
         <ol class=\"frames\" start=\"0\">",
        encode_segment(&r.call_id)
    );
    for (i, f) in frames.iter().enumerate() {
        html!(
            out,
            "<li><a href=\"/frame/call/{}/{}{}\"><span class=\"fn\">{}</span></a> \
             <span class=\"loc\">{}</span>",
            encode_segment(&r.call_id),
            i,
            f.anchor(),
            f.function,
            f.location()
        );
        if let Some(code) = &f.code_context {
            html!(out, "<code class=\"ctx\">{}</code>", code);
        }
        out.push_lit("</li>");
    }
    out.push_lit("</ol>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete, complete_body, shared, start, start_body};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    fn times(n: usize) -> Vec<(f64, f64)> {
        // Nested: record i starts at i and ends after every later record.
        (0..n).map(|i| (i as f64, 100.0 - i as f64)).collect()
    }

    #[test]
    fn parents_are_the_longest_proper_suffix_of_the_stack() {
        // Innermost first: main (9) calls a from line 1; a calls b from 2, b calls c from 3;
        // main then calls d from 4; a record with an empty stack is a root.
        let stacks = vec![
            vec![1, 9],
            vec![2, 5, 1, 9],
            vec![3, 2, 5, 1, 9],
            vec![4, 9],
            vec![],
        ];
        let (parents, reading) = infer_parents(&stacks, &times(5));
        assert_eq!(reading, Reading::Suffix);
        assert_eq!(parents, [None, Some(0), Some(1), None, None]);
    }

    #[test]
    fn stacks_sent_outermost_first_are_read_as_prefixes() {
        let stacks = vec![
            vec![9, 1],
            vec![9, 1, 5, 2],
            vec![9, 1, 5, 2, 3],
            vec![9, 4],
        ];
        let (parents, reading) = infer_parents(&stacks, &times(4));
        assert_eq!(reading, Reading::Prefix);
        assert_eq!(parents, [None, Some(0), Some(1), None]);
    }

    #[test]
    fn a_tie_keeps_the_suffix_reading() {
        // [1, 2] is both a prefix of [1, 2, 3] (prefix reading) and, for [0, 1, 2], a suffix.
        let stacks = vec![vec![1, 2], vec![1, 2, 3], vec![0, 1, 2]];
        let (parents, reading) = infer_parents(&stacks, &times(3));
        assert_eq!(reading, Reading::Suffix);
        assert_eq!(parents, [None, None, Some(0)]);
    }

    #[test]
    fn among_calls_from_one_line_the_parent_is_the_one_running() {
        // A loop calls a three times from one line; the second call of a calls b.
        let stacks = vec![vec![1, 9], vec![1, 9], vec![2, 1, 9], vec![1, 9]];
        let times = vec![(0.0, 1.0), (2.0, 5.0), (3.0, 4.0), (6.0, 7.0)];
        let (parents, _) = infer_parents(&stacks, &times);
        assert_eq!(parents, [None, None, Some(1), None]);
        // A candidate that ended before the child started, or started after it, is not a parent.
        let times = vec![(0.0, 1.0), (2.0, 2.5), (3.0, 4.0), (2.9, 7.0)];
        let (parents, _) = infer_parents(&stacks, &times);
        assert_eq!(parents, [None, None, Some(3), None]);
        let times = vec![(0.0, 1.0), (4.0, 5.0), (3.0, 4.0), (6.0, 7.0)];
        assert_eq!(infer_parents(&stacks, &times).0, [None, None, None, None]);
    }

    #[test]
    fn a_missing_level_links_to_the_nearest_recorded_ancestor() {
        // b is called from an unwrapped helper called by a: a's stack is still a suffix.
        let stacks = vec![vec![1, 9], vec![7, 6, 2, 1, 9]];
        assert_eq!(infer_parents(&stacks, &times(2)).0, [None, Some(0)]);
    }

    fn frame(file: &str, line: u64, function: &str) -> Value {
        json!({"filename": file, "lineno": line, "function": function, "code_context": HOSTILE})
    }

    fn call(s: &Shared, method: &str, at: f64, end: f64, stack: Value, result: &Value) -> String {
        let mut b = start_body(method, &[json!(HOSTILE)]);
        b.insert(
            "call_site".into(),
            json!({"timestamp": at, "stack_trace": stack}),
        );
        let id = start(s, &b).unwrap()["call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut done = complete_body(&id, result);
        done.insert("timestamp".into(), json!(end));
        complete(s, &done).unwrap();
        id
    }

    const KEY: &str = "1795311683.500000+4242";

    fn page(s: &Shared, q: &[(&str, &str)]) -> String {
        let q: Vec<(String, String)> = q
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        process(s, &format!("/call-tree/{}", encode_segment(KEY)), &q)
            .unwrap()
            .main
            .into_string()
    }

    #[test]
    fn the_tree_nests_calls_and_escapes_every_field() {
        let s = shared();
        let outer = call(
            &s,
            HOSTILE,
            1.0,
            10.0,
            json!([frame(HOSTILE, 5, "<module>")]),
            &json!(HOSTILE),
        );
        let inner = call(
            &s,
            "inner",
            2.0,
            3.0,
            json!([frame("/app.py", 2, HOSTILE), frame(HOSTILE, 5, "<module>")]),
            &json!(1),
        );
        let html = page(&s, &[("selected", &inner)]);
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("</script>"), "{html}");
        // inner is inside outer's list item.
        let o = html
            .find("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</span>")
            .unwrap();
        let i = html.find("<span class=\"fn\">inner</span>").unwrap();
        let nested = &html[o..];
        assert!(i > o && nested.find("<ul>").unwrap() < nested.find("inner").unwrap());
        assert!(html.contains("aria-current=\"true\""));
        assert!(html.contains("Called from"));
        assert!(html.contains(&format!(
            "href=\"/frame/call/{}/0#L2\"",
            encode_segment(&inner)
        )));
        assert!(html.contains(&format!(
            "href=\"/frame/call/{}/1#L5\"",
            encode_segment(&inner)
        )));
        assert!(html.contains("record 2 of 2 in time order"));
        assert!(html.contains("data-step=\"prev\""));
        assert!(
            html.contains("href=\"/object/"),
            "argument CIDs link to the object view"
        );
        // The outer call's details: its hostile result escaped.
        let html = page(&s, &[("selected", &outer)]);
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("Calls made</dt><dd>1"));
        assert!(html.contains("data-step=\"next\""));
        // Unknown process, empty key, extra segment: not found.
        assert!(process(&s, "/call-tree/nope", &[]).is_err());
        assert!(process(&s, "/call-tree/", &[]).is_err());
        assert!(process(&s, &format!("/call-tree/{}/x", encode_segment(KEY)), &[]).is_err());
        // An unknown selection is a notice, not an error.
        assert!(page(&s, &[("selected", HOSTILE)])
            .contains("This process has no call <code>&lt;/script&gt;"));
    }

    #[test]
    fn the_details_show_the_line_a_logpoint_wrote() {
        let s = shared();
        crate::service::breakpoint_add(
            &s,
            &body(json!({"function_name": "f", "log_message": "saw {args[0]}"})),
        )
        .unwrap();
        let id = call(&s, "f", 1.0, 2.0, json!([]), &json!(1));
        let html = page(&s, &[("selected", &id)]);
        assert!(
            html.contains("<h3>Log</h3><p class=\"logline\"><code>saw &lt;/script&gt;&lt;img"),
            "{html}"
        );
        assert!(!html.contains("<img"), "{html}");
    }

    #[test]
    fn exceptions_events_and_filters() {
        let s = shared();
        let mut b = start_body("boom", &[]);
        b.insert(
            "call_site".into(),
            json!({"timestamp": 1.0, "stack_trace": []}),
        );
        let id = start(&s, &b).unwrap()["call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        complete(
            &s,
            &body(
                json!({"call_id": id, "timestamp": 2.0, "status": "exception",
                         "process_pid": 4242, "process_start_time": 1795311683.5,
                         "exception_type": HOSTILE, "exception_message": HOSTILE,
                         "exception_traceback": HOSTILE}),
            ),
        )
        .unwrap();
        crate::service::call_event(
            &s,
            &body(
                json!({"method_name": HOSTILE, "status": HOSTILE, "timestamp": 3.0,
                         "process_pid": 4242, "process_start_time": 1795311683.5,
                         "event_id": HOSTILE, "pretty_args": [HOSTILE],
                         "exception": {"message": HOSTILE},
                         "call_site": {"stack_trace": [frame(HOSTILE, 1, HOSTILE)]}}),
            ),
        )
        .unwrap();
        let html = page(&s, &[("selected", &id)]);
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("<h3>Exception</h3>"));
        assert!(html.contains("class=\"traceback\""));
        let html = page(&s, &[("selected", HOSTILE)]);
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("class=\"call event"));
        // Filtered: only matches (and their callers) stay, and the stepper walks the matches.
        let html = page(&s, &[("filter", "BOOM")]);
        assert!(html.contains("<span class=\"fn\">boom</span>"));
        assert!(!html.contains("class=\"call event"), "{html}");
        assert!(html.contains("1 record in time order"));
        let html = page(&s, &[("events", "hide"), ("selected", &id)]);
        assert!(!html.contains("class=\"call event"), "{html}");
        assert!(html.contains("Show client events"));
        assert!(html.contains("&amp;events=hide"), "links keep the choice");
        assert!(page(&s, &[("filter", "zzz")]).contains("No call matches"));
    }

    #[test]
    fn the_process_list_shows_each_process_and_filters() {
        let s = shared();
        assert!(processes(&s, &[]).main.contains("No calls recorded yet"));
        call(&s, "f", 1.0, 2.0, json!([]), &json!(1));
        let html = processes(&s, &[]).main;
        assert!(html.contains(&format!("href=\"/call-tree/{}\"", encode_segment(KEY))));
        assert!(html.contains("<td>4242</td>"));
        assert!(html.contains("data-time=\"1\""), "first call");
        assert!(!html.contains(" hidden>"));
        let q = vec![("filter".to_owned(), HOSTILE.to_owned())];
        let html = processes(&s, &q).main;
        assert!(html.contains(" hidden>"));
        assert!(!html.contains("<img"));
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(0.0123), "12.3 ms");
        assert_eq!(duration(0.0000042), "4 µs");
        assert_eq!(duration(3.0), "3.00 s");
    }
}
