//! The call-tree pages: `/call-tree` lists the processes that made calls, named by their
//! program (filtered with `?filter=`), and `/call-tree/<process_key>` shows one process's call
//! records and events as a tree, a window of `limits::TREE_WINDOW` rows at a time, with a
//! details panel for the call chosen by `?selected=<call_id>` and a step-through of the records
//! in time order. The window is placed around the selected call, or starts at `?from=<record>`;
//! `?collapsed=<record>,...` folds nodes away; `?filter=` narrows the tree to matching records
//! and their callers; the client's own events are left out unless `?events=show`. Records are
//! named in addresses by where they are kept (the process index's `loc`). The page's links that
//! change only the tree (`data-swap`) are followed by app.js without a reload: it fetches the
//! page's fragment and swaps the four live regions. Parents are inferred from stack traces
//! (`process_index.rs`).

use std::fmt::Write as _;

use serde_json::Value;

use super::markup::{html, markup};
use super::source::{frames, Frame};
use super::{object_link_named, param, shown, time, value_html_classed, Answer, Html, View};
use crate::limits::TREE_WINDOW;
use crate::service::{self, ProcessSummary, TreeAsk, TreeLink, TreeRow, TreeWindow};
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

/// What names a process for a person: its program (or a web page), with its pid.
fn program(p: &ProcessSummary) -> String {
    match (&p.script, &p.page_url) {
        (_, Some(url)) => format!("JS {url}"),
        (Some(script), None) => script.clone(),
        (None, None) => "(unknown program)".to_owned(),
    }
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
             <input type=\"search\" name=\"filter\" value=\"{}\" placeholder=\"Filter by program, PID or key\" \
             aria-label=\"Filter processes\" data-filter=\"process-rows\"><button type=\"submit\">Filter</button></form>\
             <p class=\"compare-link\"><a href=\"/runs/compare\">Compare two runs</a> side by side</p>\
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
        "<table class=\"list procs\"><thead><tr><th>Program</th><th>PID</th><th>Started</th>\
         <th>Last call</th><th class=\"num\">Records</th></tr></thead>\
         <tbody id=\"process-rows\">",
    );
    for (p, run_label) in listing.processes.iter().zip(&listing.labels) {
        let name = program(p);
        let text = format!(
            "{} {} {} {} {}",
            name,
            run_label,
            p.key,
            p.pid,
            p.origin.as_deref().unwrap_or("")
        );
        let hidden = if contains_ci(&text, filter) {
            Html::new()
        } else {
            Html::lit(" hidden")
        };
        let mut origin = match &p.origin {
            Some(o) => markup!(" <span class=\"badge origin\">page origin {}</span>", o),
            None => Html::new(),
        };
        if !run_label.is_empty() {
            html!(
                origin,
                " <span class=\"badge run-label\">{}</span>",
                run_label
            );
        }
        html!(
            out,
            "<tr data-text=\"{}\"{}><td><a href=\"{}\" title=\"process {}\">{}</a>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            text.to_lowercase(),
            hidden,
            call_tree_href(&p.key, None),
            p.key,
            name,
            origin,
            p.pid,
            time(p.start_time),
            time(p.last_at),
            p.records
        );
    }
    out.push_lit("</tbody></table>");
    if listing.more > 0 {
        html!(
            out,
            "<p class=\"notice\">{} less recently active processes are not listed.</p>",
            listing.more
        );
    }
    out
}

// --- /call-tree/<process_key> ---

/// The page's address with its choices (filter, client events, folded nodes), kept by every
/// link of the page.
struct Addr<'a> {
    key: &'a str,
    filter: &'a str,
    show_client: bool,
    collapsed: Vec<u64>,
}

impl Addr<'_> {
    fn href(&self, selected: Option<&str>, from: Option<u64>, collapsed: &[u64]) -> String {
        let mut h = format!("/call-tree/{}", encode_segment(self.key));
        let mut sep = '?';
        let mut add = |h: &mut String, k: &str, v: &str| {
            let _ = write!(h, "{sep}{k}={}", encode_segment(v));
            sep = '&';
        };
        if let Some(id) = selected {
            add(&mut h, "selected", id);
        }
        if let Some(f) = from {
            add(&mut h, "from", &f.to_string());
        }
        if !self.filter.is_empty() {
            add(&mut h, "filter", self.filter);
        }
        if self.show_client {
            add(&mut h, "events", "show");
        }
        if !collapsed.is_empty() {
            let list: Vec<String> = collapsed.iter().map(u64::to_string).collect();
            add(&mut h, "collapsed", &list.join(","));
        }
        h
    }
    /// The same view with another call selected.
    fn select(&self, id: &str) -> String {
        self.href(Some(id), None, &self.collapsed)
    }
}

/// The names of a signature's parameters, in order, as far as positional arguments can take
/// them (`(a, b=1, *rest, c)` gives `a`, `b`; `self` and `cls` are left out).
pub fn param_names(signature: &str) -> Vec<String> {
    let Some(open) = signature.find('(') else {
        return Vec::new();
    };
    let mut depth = 0usize;
    let mut parts = Vec::new();
    let mut cur = String::new();
    for ch in signature[open + 1..].chars() {
        match ch {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    parts.push(cur);
    let mut names = Vec::new();
    for part in parts {
        let part = part.trim();
        if part.is_empty() || part == "/" {
            continue;
        }
        if part.starts_with('*') {
            break;
        }
        let name = part.split([':', '=']).next().unwrap_or("").trim();
        if name == "self" || name == "cls" || name.is_empty() {
            continue;
        }
        names.push(name.to_owned());
    }
    names
}

/// At most `max` characters of `text`, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// A node's arguments in one short line: named from the signature when it is known.
fn args_line(r: &TreeRow) -> String {
    let names = r.signature.as_deref().map(param_names).unwrap_or_default();
    let mut out = String::new();
    let mut positional = 0;
    for (name, v) in &r.args {
        if !out.is_empty() {
            out.push_str(", ");
        }
        let name = name.clone().or_else(|| {
            let n = names.get(positional).cloned();
            positional += 1;
            n
        });
        if let Some(n) = name {
            let _ = write!(out, "{n}=");
        }
        out.push_str(&cut(&shown(v), 40));
        if out.chars().count() > 160 {
            break;
        }
    }
    cut(&out, 160)
}

fn row_html(out: &mut Html, addr: &Addr, r: &TreeRow, selected: Option<&str>) {
    let mut class = String::from("call");
    if r.event {
        class.push_str(" event");
    }
    if r.client {
        class.push_str(" client");
    } else if r.raised {
        class.push_str(" raised");
    }
    if !addr.filter.is_empty() && !r.matched {
        class.push_str(" context");
    }
    let depth = r.depth.min(24);
    html!(out, "<li class=\"d{}\" data-loc=\"{}\">", depth, r.loc);
    if r.descendants > 0 {
        let mut toggled: Vec<u64> = addr
            .collapsed
            .iter()
            .copied()
            .filter(|l| *l != r.loc)
            .collect();
        if !r.collapsed {
            toggled.push(r.loc);
        }
        html!(
            out,
            "<a class=\"twist\" data-swap href=\"{}\" aria-expanded=\"{}\" title=\"{} the {} record{} below\">{}</a>",
            addr.href(selected, Some(r.loc), &toggled),
            if r.collapsed { "false" } else { "true" },
            if r.collapsed { "Show" } else { "Fold" },
            r.descendants,
            if r.descendants == 1 { "" } else { "s" },
            if r.collapsed { "▸" } else { "▾" }
        );
    } else {
        out.push_lit("<span class=\"twist\"></span>");
    }
    let current = if selected == Some(r.call_id.as_str()) {
        Html::lit(" aria-current=\"true\"")
    } else {
        Html::new()
    };
    html!(
        out,
        "<a class=\"{}\" data-swap href=\"{}\"{}><span class=\"fn\">{}</span><span class=\"args\">({})</span>",
        class,
        addr.select(&r.call_id),
        current,
        r.method,
        args_line(r)
    );
    if r.client {
        out.push_lit(" <span class=\"badge client\">client</span>");
    }
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
        html!(out, " <span class=\"dur\">{}</span>", duration(r.took));
    }
    if r.collapsed {
        html!(out, " <span class=\"folded\">+{}</span>", r.descendants);
    }
    out.push_lit("</a></li>");
}

/// The locations named by `?collapsed=` (numbers separated by commas; others are ignored).
fn locs(text: Option<&str>) -> Vec<u64> {
    text.unwrap_or("")
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect()
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
    let show_client = param(query, "events") == Some("show");
    let ask = TreeAsk {
        selected: selected_id,
        from: param(query, "from").and_then(|f| f.parse().ok()),
        collapsed: locs(param(query, "collapsed")),
        show_client,
        filter,
        size: TREE_WINDOW,
    };
    let Some(w) = service::process_tree(shared, &key, &ask) else {
        return Err(path.to_owned());
    };
    // A replayed call is compared with the call it replays.
    let replay = w.selected.as_ref().and_then(|s| {
        let source_id = s.record.get("replay_of")?.as_str()?;
        let source = service::find_record(shared, source_id)?;
        let differences = service::compare(&source, &s.record);
        Some(differences)
    });
    let addr = Addr {
        key: &key,
        filter,
        show_client,
        collapsed: w.collapsed.clone(),
    };
    let p = &w.process;
    let mut main = markup!(
        "<div class=\"bar\" data-process=\"{}\"><h1>Call tree <span class=\"prog\" title=\"process {}\">{}</span></h1>\
         <a href=\"/call-tree\">All processes</a></div>{}",
        p.key,
        p.key,
        program(p),
        super::runs::summary(shared, &key)
    );
    html!(
        main,
        "<p class=\"meta\" id=\"tree-meta\" data-live>{}</p>",
        meta(&addr, &w, selected_id)
    );
    html!(
        main,
        "<form class=\"filter\" method=\"get\" action=\"{}\"><input type=\"search\" name=\"filter\" \
         value=\"{}\" placeholder=\"Filter by function, status or call id\" aria-label=\"Filter calls\">",
        call_tree_href(&key, None),
        filter,
    );
    if show_client {
        main.push_lit("<input type=\"hidden\" name=\"events\" value=\"show\">");
    }
    main.push_lit("<button type=\"submit\">Filter</button></form>");
    html!(
        main,
        "<nav class=\"stepper\" id=\"tree-stepper\" data-live aria-label=\"Step through the calls\">{}</nav>\
         <div class=\"tree-cols\"><section class=\"tree-pane\" id=\"tree-nodes\" data-live tabindex=\"0\" aria-label=\"Calls\">{}</section>\
         <aside class=\"details\" id=\"tree-details\" data-live>{}</aside></div>",
        stepper(&addr, &w),
        nodes(&addr, &w, selected_id),
        details(&addr, &w, selected_id, replay.as_deref()),
    );
    Ok(View::new(
        format!("Call tree {} ({})", program(p), p.pid),
        "/call-tree",
        main,
    ))
}

fn meta(addr: &Addr, w: &TreeWindow, selected: Option<&str>) -> Html {
    let p = &w.process;
    let who = match (&p.page_url, &p.origin) {
        (url, Some(origin)) => markup!(
            "JS page {} <span class=\"badge origin\">page origin {}</span>",
            url.as_deref().unwrap_or(""),
            origin
        ),
        (Some(url), None) => markup!("JS page {}", url),
        (None, None) => markup!("PID {}", p.pid),
    };
    let mut out = markup!(
        "{} · started {} · {} record{} · first {} · last {}",
        who,
        time(p.start_time),
        p.records,
        if p.records == 1 { "" } else { "s" },
        time(p.first_at),
        time(p.last_at)
    );
    let flip = Addr {
        key: addr.key,
        filter: addr.filter,
        show_client: !addr.show_client,
        collapsed: Vec::new(),
    };
    if addr.show_client {
        html!(
            out,
            " · <span class=\"client-count\">client events shown</span> <a class=\"toggle\" href=\"{}\">Hide client events</a>",
            flip.href(selected, None, &addr.collapsed)
        );
    } else if w.client_hidden > 0 {
        html!(
            out,
            " · <span class=\"client-count\">{} client event{} hidden</span> <a class=\"toggle\" href=\"{}\">Show</a>",
            w.client_hidden,
            if w.client_hidden == 1 { "" } else { "s" },
            flip.href(selected, None, &addr.collapsed)
        );
    }
    out
}

fn nodes(addr: &Addr, w: &TreeWindow, selected: Option<&str>) -> Html {
    if w.rows.is_empty() {
        return if addr.filter.is_empty() {
            Html::lit("<p class=\"empty\">Only client events were recorded; they are hidden.</p>")
        } else {
            markup!(
                "<p class=\"empty\">No call matches <code>{}</code>.</p>",
                addr.filter
            )
        };
    }
    let mut out = Html::new();
    let pager = pager(addr, w, selected);
    out.push(&pager);
    if !w.ancestors.is_empty() {
        out.push_lit("<p class=\"inside\">Inside ");
        for (i, a) in w.ancestors.iter().enumerate() {
            if i > 0 {
                out.push_lit(" › ");
            }
            html!(
                out,
                "<a data-swap href=\"{}\"><span class=\"fn\">{}</span></a>",
                addr.select(&a.call_id),
                a.method
            );
        }
        out.push_lit("</p>");
    }
    out.push_lit("<ul class=\"tree flat\">");
    for r in &w.rows {
        row_html(&mut out, addr, r, selected);
    }
    out.push_lit("</ul>");
    if w.earlier.is_some() || w.later.is_some() {
        out.push(&pager);
    }
    out
}

/// Links to the first, earlier, later and last windows.
fn pager(addr: &Addr, w: &TreeWindow, selected: Option<&str>) -> Html {
    if w.earlier.is_none() && w.later.is_none() {
        return Html::new();
    }
    let link = |from: Option<u64>, rel: &str, label: &str| match from {
        Some(f) => markup!(
            "<a data-swap data-page=\"{}\" href=\"{}\">{}</a>",
            rel,
            addr.href(selected, Some(f), &addr.collapsed),
            label
        ),
        None => markup!("<span class=\"off\">{}</span>", label),
    };
    let first = if w.earlier.is_some() {
        markup!(
            "<a data-swap data-page=\"first\" href=\"{}\">⏮ First</a>",
            addr.href(selected, Some(0), &addr.collapsed)
        )
    } else {
        Html::lit("<span class=\"off\">⏮ First</span>")
    };
    markup!(
        "<nav class=\"pager\" aria-label=\"Parts of the tree\">{} {} <span class=\"pos\">rows {}–{} of {}</span> {} {}</nav>",
        first,
        link(w.earlier, "earlier", "◀ Earlier"),
        w.first + 1,
        w.first + w.rows.len(),
        w.shown,
        link(w.later, "later", "Later ▶"),
        link(w.last, "last", "Last ⏭")
    )
}

/// Previous and next call in time order (among the matches when filtered).
fn stepper(addr: &Addr, w: &TreeWindow) -> Html {
    if w.time_total == 0 {
        return Html::new();
    }
    let link = |l: &TreeLink, rel: &str, label: &str| {
        markup!(
            "<a href=\"{}\" rel=\"{}\" data-step=\"{}\" data-swap>{}</a>",
            addr.select(&l.call_id),
            rel,
            rel,
            label
        )
    };
    let here = match w.time_index {
        Some(i) => format!("record {} of {}", i, w.time_total),
        None => format!(
            "{} record{}",
            w.time_total,
            if w.time_total == 1 { "" } else { "s" }
        ),
    };
    let mut out = Html::new();
    match &w.prev {
        Some(l) => out.push(&link(l, "prev", "◀ Previous")),
        None => out.push_lit("<span class=\"off\">◀ Previous</span>"),
    }
    html!(out, " <span class=\"pos\">{} in time order</span> ", here);
    match &w.next {
        Some(l) => out.push(&link(
            l,
            "next",
            if w.time_index.is_some() {
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

/// A rendered program value (JSON, shown as the language writes it) in a `code` block, as
/// [`value_html_classed`]: long ones fold; `class` adds classes (with a leading space).
fn shown_value_html(v: &Value, class: &str) -> Html {
    value_html_classed(&shown(v), class)
}

fn details(
    addr: &Addr,
    w: &TreeWindow,
    selected_id: Option<&str>,
    replay: Option<&[service::Difference]>,
) -> Html {
    let Some(s) = &w.selected else {
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
    let r = &s.row;
    let sel = &s.record;
    let mut out = markup!("<h2><span class=\"fn\">{}</span>", r.method);
    let (badge, label) = if r.client {
        ("client", "client event")
    } else if r.raised {
        ("raised", if r.event { r.status.as_str() } else { "raised" })
    } else if r.event {
        ("event", r.status.as_str())
    } else {
        ("call", "returned")
    };
    html!(out, " <span class=\"badge {}\">{}</span>", badge, label);
    out.push_lit("</h2><dl class=\"facts\">");
    html!(
        out,
        "<dt>{}</dt><dd><code>{}</code></dd>",
        if r.event { "Event" } else { "Call" },
        r.call_id
    );
    if r.event {
        html!(out, "<dt>At</dt><dd>{}</dd>", time(s.started_at));
    } else {
        html!(
            out,
            "<dt>Started</dt><dd>{}</dd><dt>Completed</dt><dd>{}</dd><dt>Duration</dt><dd>{}</dd>",
            time(s.started_at),
            time(s.started_at + r.took),
            duration(r.took)
        );
    }
    if let Some(p) = &s.parent {
        html!(
            out,
            "<dt>Called from</dt><dd><a data-swap href=\"{}\"><span class=\"fn\">{}</span></a></dd>",
            addr.select(&p.call_id),
            p.method
        );
    }
    if s.children > 0 {
        html!(out, "<dt>Calls made</dt><dd>{}</dd>", s.children);
    }
    if let Some(source) = sel.get("replay_of").and_then(Value::as_str) {
        html!(
            out,
            "<dt>Replay of</dt><dd><a data-swap href=\"{}\"><code>{}</code></a></dd>",
            addr.select(source),
            source
        );
    }
    if let Some(sessions) = sel.get("repl_sessions").and_then(Value::as_array) {
        if !sessions.is_empty() {
            out.push_lit("<dt>REPL</dt><dd>");
            for x in sessions.iter().filter_map(Value::as_str) {
                html!(
                    out,
                    "<a href=\"/repl/{}\"><code>{}</code></a> ",
                    encode_segment(x),
                    x
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
    if let Some(id) = sel.get("call_id").and_then(Value::as_str) {
        let note = sel.get("note").and_then(Value::as_str).unwrap_or("");
        html!(
            out,
            "<h3>Note</h3><form class=\"note-edit\" data-api=\"/api/call-records/{}/note\">\
             <textarea name=\"note\" rows=\"2\" aria-label=\"Note on this call\">{}</textarea>\
             <button type=\"submit\">Save note</button><span class=\"error\" role=\"alert\"></span></form>",
            crate::urlenc::encode_segment(id),
            note
        );
    }
    if let (Some(differences), Some(source)) =
        (replay, sel.get("replay_of").and_then(Value::as_str))
    {
        let signature = sel.get("signature").and_then(Value::as_str);
        compared(&mut out, addr, source, differences, signature);
    }
    if !r.event && !r.client {
        replay_form(&mut out, &r.call_id);
    }
    stack(&mut out, r, &s.stack);
    out
}

/// What differs between a replayed call and the call it replays.
fn compared(
    out: &mut Html,
    addr: &Addr,
    source: &str,
    differences: &[service::Difference],
    signature: Option<&str>,
) {
    out.push_lit("<h3>Compared with the recorded call</h3>");
    if differences.is_empty() {
        html!(
            out,
            "<p class=\"same\">Same arguments, outcome and result as <a data-swap href=\"{}\"><code>{}</code></a>.</p>",
            addr.select(source),
            source
        );
        return;
    }
    html!(
        out,
        "<table class=\"differences\"><thead><tr><th scope=\"col\">Differs</th>\
         <th scope=\"col\">Recorded (<a data-swap href=\"{}\">call</a>)</th><th scope=\"col\">Replayed</th></tr></thead><tbody>",
        addr.select(source)
    );
    for d in differences {
        html!(
            out,
            "<tr><th scope=\"row\" title=\"{}\">{}</th><td>{}</td><td>{}</td></tr>",
            d.part,
            super::replayed::difference_label(&d.part, signature),
            shown_value_html(&d.source, ""),
            shown_value_html(&d.replay, "")
        );
    }
    out.push_lit("</tbody></table>");
}

/// Replays the call in its live program (`POST /api/call-records/<id>/replay`), with the
/// recorded arguments or edited ones; the page then shows the new call, compared with this one.
fn replay_form(out: &mut Html, call_id: &str) {
    html!(
        out,
        "<h3>Replay</h3><form class=\"replay\" data-api=\"/api/call-records/{}/replay\" \
         data-then=\"go:/call-tree/{{run_id}}?selected={{record_id}}\" data-busy=\"Replaying…\">\
         <p class=\"hint\">Calls the function again in the live program, never on the server: \
         a call of this program must be paused (e.g. by a breakpoint on this function). Leave \
         the arguments empty to use the recorded ones.</p>\
         <label>Arguments (JSON list) <input name=\"args\" data-json data-optional \
         placeholder=\"recorded, e.g. [7]\"></label> \
         <label>Keyword arguments (JSON object) <input name=\"kwargs\" data-json data-optional \
         placeholder='recorded, e.g. {{\"scale\": 3}}'></label> \
         <button type=\"submit\">Replay</button><p class=\"error\" role=\"alert\"></p></form>",
        encode_segment(call_id)
    );
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
            shown_value_html(t, ""),
            object_link_named(sel.get("target"), "the target")
        );
    }
    // Named from the signature, as on the Paused cards.
    let names = sel
        .get("signature")
        .and_then(Value::as_str)
        .map(super::paused::positional_names)
        .unwrap_or_default();
    for (i, a) in args.into_iter().flatten().enumerate() {
        let name = names.get(i).cloned().unwrap_or_else(|| i.to_string());
        html!(
            out,
            "<dt>{}</dt><dd>{}{}</dd>",
            name,
            shown_value_html(a, ""),
            object_link_named(sel.get("args").and_then(|x| x.get(i)), &name)
        );
    }
    for (k, v) in kwargs.into_iter().flatten() {
        html!(
            out,
            "<dt>{}</dt><dd>{}{}</dd>",
            k,
            shown_value_html(v, ""),
            object_link_named(sel.get("kwargs").and_then(|x| x.get(k)), k)
        );
    }
    out.push_lit("</dl>");
}

fn outcome(out: &mut Html, sel: &Value, r: &TreeRow) {
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
                object_link_named(sel.get("exception_cid"), "the exception")
            );
        } else {
            html!(
                out,
                "<div class=\"with-obj\">{}{}</div>",
                shown_value_html(e, " raised"),
                object_link_named(sel.get("exception_cid"), "the exception")
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
                shown_value_html(v, ""),
                object_link_named(sel.get("result_cid"), "the result")
            );
        }
    }
}

fn stack(out: &mut Html, r: &TreeRow, stack: &Value) {
    let frames: Vec<Frame> = frames(stack);
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
        // inner is the row after outer's, one level deeper.
        let o = html.find("<li class=\"d0\"").unwrap();
        let i = html.find("<span class=\"fn\">inner</span>").unwrap();
        assert!(i > o);
        assert!(html[o..i].contains("<li class=\"d1\""), "{html}");
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
        // The client's own events: hidden and counted, shown when asked, never as raised.
        crate::service::call_event(
            &s,
            &body(
                json!({"method_name": "with_debug.register", "status": "registered",
                         "timestamp": 4.0, "process_pid": 4242,
                         "process_start_time": 1795311683.5, "event_id": "ev-client",
                         "exception": {"message": "x"}, "call_site": {"stack_trace": []}}),
            ),
        )
        .unwrap();
        let html = page(&s, &[("selected", &id)]);
        assert!(html.contains("1 client event hidden"), "{html}");
        assert!(!html.contains("with_debug.register"), "{html}");
        let html = page(&s, &[("events", "show"), ("selected", &id)]);
        assert!(html.contains("Hide client events"));
        assert!(html.contains("&amp;events=show"), "links keep the choice");
        assert!(html.contains("class=\"call event client\""), "{html}");
        assert!(html.contains("<span class=\"badge client\">client</span>"));
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
        assert!(html.contains("data-time=\"2\""), "last call");
        assert!(
            html.contains("title=\"process 1795311683.500000+4242\""),
            "the key in a title"
        );
        assert!(!html.contains(" hidden>"));
        let q = vec![("filter".to_owned(), HOSTILE.to_owned())];
        let html = processes(&s, &q).main;
        assert!(html.contains(" hidden>"));
        assert!(!html.contains("<img"));
    }

    #[test]
    fn arguments_are_named_from_the_signature() {
        assert_eq!(
            param_names("(self, a, b: dict[str, int] = {}, *rest, c=1) -> None"),
            ["a", "b"]
        );
        assert_eq!(param_names("(x, /, y)"), ["x", "y"]);
        assert!(param_names("no parentheses").is_empty());
        assert_eq!(cut("abcdef", 3), "abc…");
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(0.0123), "12.3 ms");
        assert_eq!(duration(0.0000042), "4 µs");
        assert_eq!(duration(3.0), "3.00 s");
    }
}
