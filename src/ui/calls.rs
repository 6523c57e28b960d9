//! The Calls page (`/calls`): every recorded call and client event (and every call the server
//! made to an external MCP server), newest first, a page at a time, narrowed by a GET form
//! (function, status, process, source, text search) that `GET /api/call-records` shares, with
//! an export of the same selection as JSON Lines. Each row shows when, what, its outcome and
//! rendered values, arguments named from the function's signature and linking to their object
//! page, and the line a logpoint wrote for it. The client's own events (`records::
//! CLIENT_EVENT_METHODS`) are hidden unless asked for (`client_events=show`), with their count;
//! shown, they are marked "client", never as the program's exceptions. The list is live on the
//! first page.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::markup::{html, markup};
use super::{item_shown, json_shown, param, shown, Html, View};
use crate::limits::{PAGE_SCAN_BUDGET, SCAN_BUDGET, UI_MAX_PAGE_LIMIT};
use crate::records::{self, ClientEvents, RecordFilter, SOURCES};
use crate::service::{self, CallRecordsPage};
use crate::state::Shared;

/// Rows per page unless `limit` says otherwise (at most `UI_MAX_PAGE_LIMIT`).
const DEFAULT_LIMIT: usize = 50;

/// The statuses of the status choice: those of the program's calls (`success`, `exception`),
/// of the client's events (`registered`, `failed`, `serialization_error`, and `event` for an
/// event that names none) and of the server's calls to external MCP servers. A status given in
/// the address that is not among them is offered too, so the choice always shows the filter.
const STATUSES: [(&str, &str); 10] = [
    ("success", "success"),
    ("exception", "exception"),
    ("registered", "registered (client)"),
    ("failed", "failed (client)"),
    ("serialization_error", "serialization error (client)"),
    ("event", "event (client)"),
    ("tool_error", "tool error (MCP)"),
    ("error", "error (MCP)"),
    ("timeout", "timeout (MCP)"),
    ("cancelled", "cancelled (MCP)"),
];

/// The filter fields of the form and of the API, in this order.
const FIELDS: [&str; 5] = ["function", "status", "process", "source", "search"];

/// The query key of the client-events choice; the page hides them unless it says `show`
/// (or `only`).
const CLIENT_EVENTS: &str = "client_events";

/// Arguments shown folded (with "show all") past this many characters or lines.
const FOLD_CHARS: usize = 240;
const FOLD_LINES: usize = 4;

/// The page for `GET /calls?query`.
pub fn page(shared: &Shared, query: &[(String, String)]) -> View {
    let given = |key: &str| param(query, key).filter(|v| !v.is_empty());
    let mut problems = Vec::new();
    let source = match given("source") {
        Some(s) if !SOURCES.contains(&s) => {
            problems.push(format!(
                "There is no source “{s}”: showing calls of every source."
            ));
            None
        }
        s => s,
    };
    let client_events = match given(CLIENT_EVENTS) {
        None => ClientEvents::Hide,
        Some(v) => ClientEvents::parse(v).unwrap_or_else(|| {
            problems.push(format!(
                "There is no choice “{v}” for client events (show, hide or only): hiding them."
            ));
            ClientEvents::Hide
        }),
    };
    let filter = RecordFilter {
        function: given("function"),
        status: given("status"),
        process: given("process"),
        source,
        search: given("search"),
        client_events,
    };
    let number = |key: &str| given(key).and_then(|v| v.parse::<usize>().ok());
    let limit = number("limit")
        .unwrap_or(DEFAULT_LIMIT)
        .clamp(1, UI_MAX_PAGE_LIMIT);
    let offset = number("offset").unwrap_or(0);
    // A search (or a process filter) reads records one by one: the page stops at its own
    // budget or once it is full, unless a longer search was asked for (`scan=long`).
    let long = param(query, "scan") == Some("long");
    let budget = if long { SCAN_BUDGET } else { PAGE_SCAN_BUDGET };
    let records = service::call_records_for_page(shared, &filter, offset, limit, budget);
    // The filters as they stay on every link (the export and the pages).
    let filters: Vec<(&str, &str)> = FIELDS
        .iter()
        .filter_map(|k| {
            let v = if *k == "source" { source } else { given(k) };
            v.map(|v| (*k, v))
        })
        .collect();
    let mut kept = filters.clone();
    if client_events != ClientEvents::Hide {
        kept.push((CLIENT_EVENTS, client_events.as_str()));
    }
    if long {
        kept.push(("scan", "long"));
    }
    // The API lists client events unless told otherwise: the export names the page's choice.
    let export = link(
        "/api/call-records",
        &[
            &[("format", "jsonl")],
            &filters[..],
            &[(CLIENT_EVENTS, client_events.as_str())],
        ]
        .concat(),
    );
    // Positional arguments are named from the signature a call carries, else from the one
    // registered for its function.
    let wanted: Vec<&str> = records
        .calls
        .iter()
        .filter_map(|c| c.get("method_name")?.as_str())
        .collect();
    let functions = service::functions_shown(shared, &wanted, super::breakpoints::SHOWN_FUNCTIONS);
    let mut out = markup!(
        "<div class=\"bar\"><h1>Calls</h1><a class=\"button\" href=\"{}\" download>Export JSON \
         Lines</a></div>",
        export
    );
    form(&mut out, functions.names, &filter, limit);
    for p in &problems {
        html!(out, "<p class=\"error\" role=\"alert\">{}</p>", p);
    }
    let live = if offset == 0 {
        Html::lit(" data-live")
    } else {
        Html::new()
    };
    html!(out, "<div id=\"calls-list\"{}>", live);
    let shown = Shown {
        kept: &kept,
        filters: &filters,
        client_events,
        limit,
        filtered: filter_given(&filter),
        signatures: &functions.signatures,
        long,
    };
    list(&mut out, &records, &shown);
    out.push_lit("</div>");
    View::new("Calls", "/calls", out)
}

/// What the list shows besides the page itself.
struct Shown<'a> {
    /// The query every page link keeps (the filters and a client-events choice that is not
    /// the default).
    kept: &'a [(&'a str, &'a str)],
    /// The filters alone.
    filters: &'a [(&'a str, &'a str)],
    client_events: ClientEvents,
    limit: usize,
    filtered: bool,
    /// Registered signatures by function name.
    signatures: &'a std::collections::BTreeMap<String, String>,
    /// A longer search was asked for (`scan=long`).
    long: bool,
}

fn filter_given(f: &RecordFilter) -> bool {
    f.function.is_some()
        || f.status.is_some()
        || f.process.is_some()
        || f.source.is_some()
        || f.search.is_some()
        || f.client_events == ClientEvents::Only
}

/// ` selected` when `on`.
fn selected(on: bool) -> Html {
    if on {
        Html::lit(" selected")
    } else {
        Html::new()
    }
}

/// The filter form: a GET to this page (filters change nothing). Its choices apply when one
/// is chosen (with the arrow keys, on Enter or when the field loses the focus).
fn form(out: &mut Html, mut functions: Vec<String>, f: &RecordFilter, limit: usize) {
    if let Some(current) = f.function.filter(|c| !functions.iter().any(|n| n == c)) {
        functions.push(current.to_owned());
    }
    functions.sort();
    out.push_lit(
        "<form class=\"filters\" method=\"get\" action=\"/calls\" role=\"search\">\
         <label>Function <select name=\"function\" data-submit><option value=\"\">any</option>",
    );
    for name in &functions {
        html!(
            out,
            "<option{}>{}</option>",
            selected(f.function == Some(name.as_str())),
            name
        );
    }
    out.push_lit(
        "</select></label><label>Status <select name=\"status\" data-submit>\
         <option value=\"\">any</option>",
    );
    let mut statuses: Vec<(&str, &str)> = STATUSES.to_vec();
    if let Some(other) = f.status.filter(|s| !STATUSES.iter().any(|(v, _)| v == s)) {
        statuses.push((other, other));
    }
    for (value, label) in statuses {
        html!(
            out,
            "<option value=\"{}\"{}>{}</option>",
            value,
            selected(f.status == Some(value)),
            label
        );
    }
    html!(
        out,
        "</select></label><label>Process <input name=\"process\" value=\"{}\" placeholder=\"pid or \
         process key\" size=\"14\"></label><label>Source <select name=\"source\" data-submit>",
        f.process.unwrap_or("")
    );
    for (value, label) in [
        ("", "any"),
        ("program", "the program"),
        ("mcp_client", "external MCP servers"),
    ] {
        html!(
            out,
            "<option value=\"{}\"{}>{}</option>",
            value,
            selected(f.source.unwrap_or("") == value),
            label
        );
    }
    html!(
        out,
        "</select></label><label class=\"grow\">Search <input type=\"search\" name=\"search\" \
         value=\"{}\" placeholder=\"text in arguments, results, exceptions\"></label>",
        f.search.unwrap_or("")
    );
    if limit != DEFAULT_LIMIT {
        html!(
            out,
            "<input type=\"hidden\" name=\"limit\" value=\"{}\">",
            limit
        );
    }
    if f.client_events != ClientEvents::Hide {
        html!(
            out,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            CLIENT_EVENTS,
            f.client_events.as_str()
        );
    }
    out.push_lit(
        "<button type=\"submit\">Apply</button><a class=\"clear\" href=\"/calls\">Clear</a></form>",
    );
}

/// The live region: what matched, the client events left out, the rows, the pages.
fn list(out: &mut Html, page: &CallRecordsPage, shown: &Shown) {
    let filtered = shown.filtered;
    client_events_note(out, page, shown);
    let stopped = page.search_truncated == Some(true);
    let full = page.calls.len() >= shown.limit;
    if stopped && full {
        html!(
            out,
            "<p class=\"notice\" role=\"status\">The search stopped at a full page, after \
             looking at the newest {} records: older pages search further.</p>",
            count(page.scanned.unwrap_or(0))
        );
    } else if stopped && !shown.long {
        let mut again: Vec<(&str, &str)> = shown.kept.to_vec();
        again.push(("scan", "long"));
        let offset = page.offset.to_string();
        if page.offset > 0 {
            again.push(("offset", &offset));
        }
        let limit = shown.limit.to_string();
        if shown.limit != DEFAULT_LIMIT {
            again.push(("limit", &limit));
        }
        html!(
            out,
            "<p class=\"notice\" role=\"status\">The search stopped at a page's time limit \
             ({} s) after looking at the newest {} records: the matches below are among those. \
             <a href=\"{}\">Search longer</a> (up to {} s), or add a function, status or \
             process filter to look further.</p>",
            PAGE_SCAN_BUDGET.as_secs_f64(),
            count(page.scanned.unwrap_or(0)),
            link("/calls", &again),
            SCAN_BUDGET.as_secs_f64()
        );
    } else if stopped {
        html!(
            out,
            "<p class=\"notice\" role=\"status\">The search stopped at its time limit after \
             looking at the newest {} records: the matches below are among those. A function, \
             status or process filter makes it look further.</p>",
            count(page.scanned.unwrap_or(0))
        );
    }
    if page.calls.is_empty() {
        out.push(&empty(page, filtered));
        return;
    }
    let noun = match (shown.client_events, filtered) {
        (ClientEvents::Only, _) => "client events",
        (_, true) => "matching calls",
        _ => "calls",
    };
    let first = page.offset + 1;
    let last = page.offset + page.calls.len();
    html!(
        out,
        "<p class=\"summary\">{}–{} of {}{} {}{}</p>",
        count(first),
        count(last),
        if stopped { "the first " } else { "" },
        count(page.total_count),
        noun,
        if page.offset == 0 {
            ", newest first; new calls appear here as they complete"
        } else {
            ", newest first"
        }
    );
    out.push_lit(
        "<table class=\"calls\"><thead><tr><th class=\"when\">Time</th><th class=\"what\">Call\
         </th><th class=\"status\">Status</th><th>Arguments</th><th>Result or exception</th>\
         </tr></thead><tbody>",
    );
    for call in &page.calls {
        if let Some(m) = call.as_object() {
            row(out, m, shown.signatures);
        }
    }
    out.push_lit("</tbody></table>");
    pager(out, page, shown.kept, shown.limit);
}

/// How many client events are hidden, with the link that shows them; or, when they are shown,
/// the link that hides them. Every other filter stays.
fn client_events_note(out: &mut Html, page: &CallRecordsPage, shown: &Shown) {
    let limit = shown.limit.to_string();
    let with = |choice: Option<&'static str>| {
        let mut q = shown.filters.to_vec();
        if let Some(c) = choice {
            q.push((CLIENT_EVENTS, c));
        }
        if shown.limit != DEFAULT_LIMIT {
            q.push(("limit", &limit));
        }
        link("/calls", &q)
    };
    match shown.client_events {
        ClientEvents::Hide => {
            let hidden = page.client_events_hidden.unwrap_or(0);
            if hidden == 0 {
                return;
            }
            html!(
                out,
                "<p class=\"client-events\" role=\"status\"><span class=\"badge client\">client\
                 </span> {} {} hidden{}: the client's own registrations and attribute probes, not \
                 your program's calls. <a href=\"{}\">Show them</a></p>",
                count(hidden),
                if hidden == 1 {
                    "client event"
                } else {
                    "client events"
                },
                if page.scanned.is_some() && shown.filters.iter().any(|(k, _)| *k == "search") {
                    " (and not searched)"
                } else {
                    ""
                },
                with(Some("show"))
            );
        }
        ClientEvents::Show => html!(
            out,
            "<p class=\"client-events\" role=\"status\">The client's own events are shown, marked \
             <span class=\"badge client\">client</span>. <a href=\"{}\">Hide them</a> · \
             <a href=\"{}\">Only them</a></p>",
            with(None),
            with(Some("only"))
        ),
        ClientEvents::Only => html!(
            out,
            "<p class=\"client-events\" role=\"status\">Only the client's own events are shown. \
             <a href=\"{}\">Hide them</a> · <a href=\"{}\">Show them with the calls</a></p>",
            with(None),
            with(Some("show"))
        ),
    }
}

fn empty(page: &CallRecordsPage, filtered: bool) -> Html {
    if page.client_events_hidden.is_some_and(|n| n > 0) && !filtered && page.offset == 0 {
        return Html::lit(
            "<section class=\"empty\"><h2>No program calls recorded yet</h2><p>Only the \
             client's own events arrived so far. Every call of a function your program wraps is \
             listed here once it completes, newest first, without a reload.</p></section>",
        );
    }
    if filtered || page.offset > 0 {
        return markup!(
            "<section class=\"empty\"><h2>No call matches</h2><p>{} <a href=\"/calls\">Show \
             every call</a>.</p></section>",
            if page.total_count > 0 {
                "This page is past the last match."
            } else if page.search_truncated == Some(true) {
                "None of the records searched matches these filters."
            } else {
                "Nothing recorded matches these filters."
            }
        );
    }
    Html::lit(
        "<section class=\"empty\"><h2>No calls recorded yet</h2><p>Every call of a function your \
         program wraps is listed here once it completes, newest first, without a reload; so are the \
         client's events and the calls this server makes to external MCP servers.</p><p>Try the \
         demo: <code>python3 scripts/demo_app.py</code>.</p></section>",
    )
}

/// One row: a call record, a client event, or an external tool call, in its wire shape.
/// `signatures` are the registered ones by function name.
fn row(
    out: &mut Html,
    m: &Map<String, Value>,
    signatures: &std::collections::BTreeMap<String, String>,
) {
    let text = |k: &str| m.get(k).and_then(Value::as_str);
    let number = |k: &str| m.get(k).and_then(Value::as_f64);
    let external = text("source") == Some("mcp_client");
    let function = text("method_name").unwrap_or("");
    let client = !external && records::is_client_event(function);
    let status = text("status").unwrap_or("");
    let call_id = m.get("call_id").map(shown).unwrap_or_default();
    let when = number("started_at").or_else(|| number("completed_at"));
    html!(
        out,
        "<tr data-call-id=\"{}\"{}><td class=\"when\">",
        call_id,
        if client {
            Html::lit(" class=\"client\"")
        } else {
            Html::new()
        }
    );
    if let Some(t) = when {
        let iso = crate::ids::utc_iso(t);
        html!(
            out,
            "<time data-time=\"{}\" datetime=\"{}\">{}</time>",
            t,
            iso,
            iso.replace('T', " ")
        );
    }
    html!(
        out,
        "</td><td class=\"what\"><div class=\"what-line\"><a class=\"fn\" href=\"{}\" title=\"Only calls of this \
         function\">{}</a>",
        link("/calls", &[("function", function)]),
        function
    );
    if let (Some(key), Some(pid)) = (text("process_key"), m.get("process_pid")) {
        html!(
            out,
            "<a class=\"meta\" href=\"{}\" title=\"Only calls of process {}\">pid {}</a>",
            link("/calls", &[("process", key)]),
            key,
            pid.to_string()
        );
        if let Some(origin) = text("origin") {
            html!(
                out,
                "<span class=\"meta origin\" title=\"Reported by a web page of this origin \
                 (the browser's Origin header)\">page origin {}</span>",
                origin
            );
        }
    } else if let Some(server) = text("server") {
        html!(
            out,
            "<span class=\"meta\">external server {}</span>",
            server
        );
    }
    // A long status breaks after an underscore, not inside a word.
    let mut status_shown = Html::new();
    for (i, part) in (if status.is_empty() { "—" } else { status })
        .split('_')
        .enumerate()
    {
        if i > 0 {
            status_shown.push_lit("_<wbr>");
        }
        status_shown.push_text(part);
    }
    html!(
        out,
        "{}</div></td><td class=\"status\"><span class=\"badge {}\">{}</span>",
        short_id(&call_id),
        if client {
            "client"
        } else {
            status_class(status, m)
        },
        status_shown
    );
    if client {
        out.push_lit(
            "<span class=\"badge client\" title=\"An event of the debug client itself, not a call \
             of your program\">client</span>",
        );
    }
    if let Some(d) = duration(m) {
        html!(out, "<span class=\"dur\">{}</span>", d);
    }
    out.push_lit("</td><td>");
    if external {
        values(out, m.get("arguments"), None);
    } else {
        // A client event's arguments are the client's, not the function's parameters.
        let names = if client || m.contains_key("event_type") {
            Vec::new()
        } else {
            text("signature")
                .or_else(|| signatures.get(function).map(String::as_str))
                .map(super::paused::positional_names)
                .unwrap_or_default()
        };
        arguments(out, m, &names);
    }
    // The outcome and its Replay on one line; then what the debugger did, and what it replays.
    out.push_lit("</td><td><div class=\"outcome-line\"><div class=\"result\">");
    outcome(out, m, client);
    out.push_lit("</div>");
    // A program's call (not an event) can be called again in its live program.
    if !external && !client && m.contains_key("args") && !m.contains_key("event_type") {
        html!(
            out,
            "<form class=\"row-replay\" data-api=\"/api/call-records/{}/replay\" \
             data-then=\"go:/call-tree/{{run_id}}?selected={{record_id}}\" data-busy=\"Replaying…\">\
             <button type=\"submit\" class=\"quiet\" title=\"Call it again with the recorded \
             arguments in its live program (a call of that program must be paused)\">Replay</button>\
             <span class=\"error\" role=\"alert\"></span></form>",
            crate::urlenc::encode_segment(call_id.as_ref())
        );
    }
    out.push_lit("</div>");
    out.push(&super::resolution_html(function, m));
    if let Some(source) = text("replay_of") {
        html!(out, "<p class=\"meta\">Replay of {}</p>", short_id(source));
    }
    if let Some(line) = text("log") {
        html!(
            out,
            "<p class=\"logline\"><span class=\"label\">Log</span> <code>{}</code></p>",
            line
        );
    }
    if let Some(note) = text("note") {
        html!(
            out,
            "<p class=\"record-note\"><span class=\"label\">Note</span> {}</p>",
            note
        );
    }
    out.push_lit("</td></tr>");
}

/// Characters of a call id the row shows (the id is in its title and its copy button).
const ID_CHARS: usize = 21;

/// A call id shortened as a browser's developer tools do (a prefix and an ellipsis), the whole
/// id in its title, and a button that copies the whole id (`app.js`, no dialog).
fn short_id(id: &str) -> Html {
    let shown = match id.char_indices().nth(ID_CHARS) {
        Some((i, _)) => format!("{}…", &id[..i]),
        None => id.to_owned(),
    };
    markup!(
        "<span class=\"call-id\"><code class=\"id\" title=\"call id {}\">{}</code>\
         <button type=\"button\" class=\"copy\" data-copy=\"{}\" title=\"Copy the call id {}\" \
         aria-label=\"Copy the call id\">copy</button></span>",
        id,
        shown,
        id,
        id
    )
}

fn status_class(status: &str, m: &Map<String, Value>) -> &'static str {
    let failed = m.get("exception").is_some_and(|e| !e.is_null())
        || m.get("is_error").and_then(Value::as_bool) == Some(true);
    match status {
        "success" if !failed => "ok",
        "exception" | "error" | "tool_error" | "timeout" | "cancelled" => "failed",
        _ if failed => "failed",
        _ => "other",
    }
}

/// How long the call took: by the client's clock, or as an external call measured it.
fn duration(m: &Map<String, Value>) -> Option<String> {
    let ms = match m.get("duration_ms").and_then(Value::as_f64) {
        Some(ms) => ms,
        None => {
            let start = m.get("started_at").and_then(Value::as_f64)?;
            let end = m.get("completed_at").and_then(Value::as_f64)?;
            (end - start) * 1e3
        }
    };
    if !ms.is_finite() || ms <= 0.0 || m.contains_key("event_type") {
        return None;
    }
    Some(if ms < 1.0 {
        format!("{ms:.2} ms")
    } else if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    })
}

/// Positional and keyword arguments, each linking to its object page when it has a CID; a
/// positional one named as `names` says (its index past them).
fn arguments(out: &mut Html, m: &Map<String, Value>, names: &[String]) {
    let shown_args = m.get("pretty_args").and_then(Value::as_array);
    let items = m.get("args").and_then(Value::as_array);
    let shown_kwargs = m.get("pretty_kwargs").and_then(Value::as_object);
    let kw_items = m.get("kwargs").and_then(Value::as_object);
    let n_args = shown_args.map_or(0, Vec::len);
    let n_kwargs = shown_kwargs.map_or(0, Map::len);
    if n_args + n_kwargs == 0 {
        out.push_lit("<span class=\"none\">no arguments</span>");
        return;
    }
    out.push_lit("<dl class=\"args\">");
    for (i, v) in shown_args.into_iter().flatten().enumerate() {
        let item = items.and_then(|a| a.get(i));
        let cid = item.and_then(|it| it.get("cid"));
        let name = names.get(i).cloned().unwrap_or_else(|| i.to_string());
        entry(out, &name, &item_shown(v, item), cid);
    }
    for (k, v) in shown_kwargs.into_iter().flatten() {
        let item = kw_items.and_then(|a| a.get(k));
        let cid = item.and_then(|it| it.get("cid"));
        entry(out, k, &item_shown(v, item), cid);
    }
    out.push_lit("</dl>");
}

/// A dict of plain values (an external call's arguments), or nothing.
fn values(out: &mut Html, v: Option<&Value>, cid: Option<&Value>) {
    match v {
        Some(Value::Object(o)) if !o.is_empty() => {
            out.push_lit("<dl class=\"args\">");
            for (k, x) in o {
                entry(out, k, &shown(x), None);
            }
            out.push_lit("</dl>");
        }
        Some(x) if !x.is_null() && !matches!(x, Value::Object(_)) => value(out, x, cid),
        _ => out.push_lit("<span class=\"none\">no arguments</span>"),
    }
}

/// One argument: its name and value, grouped (a `div` in the `dl`) so that a row's arguments
/// flow on one line when they fit.
fn entry(out: &mut Html, name: &str, text: &str, cid: Option<&Value>) {
    html!(out, "<div class=\"arg\"><dt>{}</dt><dd>", name);
    value_text(out, text, cid);
    out.push_lit("</dd></div>");
}

/// A shown value, linking to `/object/<cid>` when it has one.
fn value(out: &mut Html, v: &Value, cid: Option<&Value>) {
    value_text(out, &shown(v), cid);
}

/// The text of a shown value, linking to `/object/<cid>` when it has one. A long value is
/// folded to its first lines with "show all" (then its object link follows it), so that a row
/// stays short and no value runs over the next one.
fn value_text(out: &mut Html, text: &str, cid: Option<&Value>) {
    let cid = cid.and_then(Value::as_str);
    if super::folds(text, FOLD_CHARS, FOLD_LINES) {
        out.push_lit("<div class=\"long\">");
        out.push(&super::value_html_folded(text, "", FOLD_CHARS, FOLD_LINES));
        if let Some(cid) = cid {
            html!(
                out,
                "<a class=\"obj-link\" href=\"/object/{}\" title=\"Inspect this object\">object\
                 </a>",
                encode(cid)
            );
        }
        out.push_lit("</div>");
        return;
    }
    let code = markup!("<code class=\"value\">{}</code>", text);
    match cid {
        Some(cid) => html!(
            out,
            "<a class=\"obj\" href=\"/object/{}\" title=\"Inspect this object\">{}</a>",
            encode(cid),
            code
        ),
        None => out.push(&code),
    }
}

/// The result, or the exception with its traceback folded; a client event's exception (an
/// attribute its proxy did not find) is not the program's, and is not shown as raised.
fn outcome(out: &mut Html, m: &Map<String, Value>, client: bool) {
    let present = |k: &str| m.get(k).filter(|v| !v.is_null());
    if let Some(error) = present("error") {
        let message = error.get("message").unwrap_or(error);
        out.push_lit("<p class=\"raised\">");
        value(out, message, None);
        out.push_lit("</p>");
        return;
    }
    let raised = present("exception")
        .or_else(|| present("exception_type"))
        .or_else(|| present("exception_message"));
    if let Some(e) = raised {
        out.push_lit(if client {
            "<div class=\"client-note\">"
        } else {
            "<div class=\"raised\">"
        });
        match exception_line(e) {
            Some(line) => {
                value(out, &Value::String(line), present("exception_cid"));
                let whole = serde_json::to_string_pretty(e).unwrap_or_default();
                html!(
                    out,
                    "<details class=\"tb\"><summary>Details</summary><pre>{}</pre></details>",
                    whole
                );
            }
            None => value(out, e, present("exception_cid")),
        }
        if let Some(tb) = present("exception_traceback") {
            let text: String = match tb {
                Value::Array(lines) => lines.iter().map(|l| shown(l).into_owned()).collect(),
                other => shown(other).into_owned(),
            };
            html!(
                out,
                "<details class=\"tb\"><summary>Traceback</summary><pre>{}</pre></details>",
                text
            );
        }
        out.push_lit("</div>");
        return;
    }
    match present("pretty_result") {
        // A JSON result when the caller prefers JSON (the browser debug client).
        Some(r) if m.get("preferred_format").and_then(Value::as_str) == Some("json") => {
            value_text(out, &json_shown(r), present("result_cid"));
        }
        Some(r) => value(out, r, present("result_cid")),
        None => out.push_lit("<span class=\"none\">—</span>"),
    }
}

/// `Type: message` of an exception a client event describes as `{type, message, ...}`.
fn exception_line(e: &Value) -> Option<String> {
    let kind = e.get("type")?.as_str()?;
    let message = e.get("message").map(shown).unwrap_or_default();
    Some(format!("{kind}: {message}"))
}

/// Page links that keep the filters.
fn pager(out: &mut Html, page: &CallRecordsPage, kept: &[(&str, &str)], limit: usize) {
    let to = |offset: usize| {
        let mut q: Vec<(&str, String)> = kept.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        if offset > 0 {
            q.push(("offset", offset.to_string()));
        }
        if limit != DEFAULT_LIMIT {
            q.push(("limit", limit.to_string()));
        }
        let q: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
        link("/calls", &q)
    };
    let newer = page.offset > 0;
    // A search that stopped at a full page may find more further back.
    let older = page.offset + page.calls.len() < page.total_count
        || (page.search_truncated == Some(true) && page.calls.len() >= limit);
    if !newer && !older {
        return;
    }
    out.push_lit("<nav class=\"pager\" aria-label=\"Pages\">");
    if newer {
        html!(
            out,
            "<a href=\"{}\">Newest</a><a href=\"{}\" rel=\"prev\">← Newer</a>",
            to(0),
            to(page.offset.saturating_sub(limit))
        );
    }
    if older {
        html!(
            out,
            "<a href=\"{}\" rel=\"next\">Older →</a>",
            to(page.offset + limit)
        );
    }
    out.push_lit("</nav>");
}

/// `path?k=v&...` with every key and value percent-encoded (not yet HTML-escaped).
fn link(path: &str, query: &[(&str, &str)]) -> String {
    let mut out = path.to_owned();
    for (i, (k, v)) in query.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(&encode(k));
        out.push('=');
        out.push_str(&encode(v));
    }
    out
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A count with thousands separators.
fn count(n: usize) -> String {
    crate::limits::count(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{body, complete_body, shared, start, start_body};
    use serde_json::json;

    const HOSTILE: &str = "</script><img src=x onerror=alert(1)>\"'&";

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn call(s: &Shared, method: &str, args: &[Value], result: &Value) -> String {
        let started = start(s, &start_body(method, args)).unwrap();
        let call_id = started["call_id"].as_str().unwrap().to_owned();
        crate::service::testing::complete(s, &complete_body(&call_id, result)).unwrap();
        call_id
    }

    fn assert_inert(html: &str) {
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("</script>"), "{html}");
        assert!(!html.contains("onerror=alert(1)>"), "{html}");
    }

    #[test]
    fn an_empty_session_says_what_will_appear_here() {
        let s = shared();
        let html = page(&s, &[]).main;
        assert!(html.contains("No calls recorded yet"), "{html}");
        assert!(html.contains("id=\"calls-list\" data-live"));
        let html = page(&s, &q(&[("search", "x")])).main;
        assert!(html.contains("No call matches"), "{html}");
    }

    #[test]
    fn program_values_are_escaped_in_every_field() {
        let s = shared();
        let mut b = start_body(HOSTILE, &[json!(HOSTILE)]);
        b.insert(
            "kwargs".into(),
            json!({HOSTILE: crate::service::testing::item(&json!(HOSTILE))}),
        );
        let started = start(&s, &b).unwrap();
        let call_id = started["call_id"].as_str().unwrap().to_owned();
        let mut done = complete_body(&call_id, &json!(null));
        done.insert("status".into(), json!(HOSTILE));
        done.insert("exception_type".into(), json!(HOSTILE));
        done.insert("exception_message".into(), json!(HOSTILE));
        done.insert("exception_traceback".into(), json!(HOSTILE));
        crate::service::testing::complete(&s, &done).unwrap();
        crate::service::call_event(
            &s,
            &body(json!({
                "event_id": HOSTILE, "method_name": HOSTILE, "status": HOSTILE,
                "pretty_args": [HOSTILE], "pretty_kwargs": {HOSTILE: HOSTILE},
                "pretty_result": HOSTILE, "exception": HOSTILE,
                "process_pid": 4242, "process_start_time": 1795311683.5,
            })),
        )
        .unwrap();
        let query = q(&[
            ("function", HOSTILE),
            ("status", HOSTILE),
            ("process", HOSTILE),
            ("source", HOSTILE),
            ("search", HOSTILE),
        ]);
        for query in [Vec::new(), query] {
            let html = page(&s, &query).main;
            assert_inert(&html);
        }
        let html = page(&s, &[]).main;
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;"));
        assert!(html.contains("<details class=\"tb\"><summary>Traceback</summary>"));
        assert!(html.contains("data-time=\""));
    }

    #[test]
    fn the_line_a_logpoint_wrote_shows_with_its_call() {
        let s = shared();
        crate::service::breakpoint_add(
            &s,
            &body(json!({"function_name": "f", "log_message": "x={args[0]} -> {result}"})),
        )
        .unwrap();
        call(&s, "f", &[json!(HOSTILE)], &json!(2));
        let html = page(&s, &[]).main;
        assert_inert(&html);
        assert!(
            html.contains("<p class=\"logline\"><span class=\"label\">Log</span> <code>x=&lt;/script&gt;&lt;img"),
            "{html}"
        );
        assert!(html.contains("-&gt; 2</code></p>"), "{html}");
    }

    #[test]
    fn filters_narrow_the_rows_and_stay_on_every_link() {
        let s = shared();
        let a = call(&s, "add", &[json!("apple pie")], &json!(1));
        let b = call(&s, "mul", &[json!(2)], &json!("banana"));
        for _ in 0..3 {
            call(&s, "add", &[json!(3)], &json!(3));
        }
        let html = page(&s, &q(&[("search", "APPLE")])).main;
        assert!(html.contains(&a) && !html.contains(&b), "{html}");
        assert!(html.contains("1–1 of 1 matching calls"), "{html}");
        assert!(html.contains("/api/call-records?format=jsonl&amp;search=APPLE"));
        let html = page(&s, &q(&[("function", "mul"), ("search", "banana")])).main;
        assert!(html.contains(&b) && !html.contains(&a));
        assert!(html.contains("<option selected>mul</option>"), "{html}");
        // Pages keep the filters; only the first page is live.
        let html = page(&s, &q(&[("function", "add"), ("limit", "2")])).main;
        assert!(html.contains("1–2 of 4 matching calls"), "{html}");
        assert!(html.contains("href=\"/calls?function=add&amp;offset=2&amp;limit=2\""));
        let html = page(
            &s,
            &q(&[("function", "add"), ("limit", "2"), ("offset", "2")]),
        )
        .main;
        assert!(html.contains("3–4 of 4"), "{html}");
        assert!(
            html.contains("<div id=\"calls-list\">"),
            "not live past the first page"
        );
        // Arguments and results link to their objects.
        let html = page(&s, &q(&[("search", "apple")])).main;
        assert!(html.contains("<a class=\"obj\" href=\"/object/"), "{html}");
        let unknown = page(&s, &q(&[("source", "nope")])).main;
        assert!(unknown.contains("There is no source"), "{unknown}");
    }

    /// The real client's attribute probe on a proxy, as it posts it.
    fn probe(s: &Shared) {
        crate::service::call_event(
            s,
            &body(json!({
                "method_name": "__getattr__('_cideldill_alias_name')", "status": "exception",
                "timestamp": 1795311683.6, "call_site": {"timestamp": 1795311683.6},
                "process_pid": 4242, "process_start_time": 1795311683.5,
                "pretty_args": [], "pretty_kwargs": {},
                "exception": {"type": "AttributeError", "message": "no alias",
                              "requested_attribute": "_cideldill_alias_name"},
            })),
        )
        .unwrap();
    }

    #[test]
    fn client_events_are_hidden_with_a_count_and_shown_muted_on_request() {
        let s = shared();
        let a = call(&s, "add", &[json!(1)], &json!(2));
        for _ in 0..3 {
            probe(&s);
        }
        let html = page(&s, &[]).main;
        assert!(html.contains("3 client events hidden"), "{html}");
        assert!(
            html.contains("href=\"/calls?client_events=show\">Show them</a>"),
            "{html}"
        );
        assert!(html.contains("1–1 of 1 calls"), "{html}");
        assert!(!html.contains("_cideldill_alias_name"), "{html}");
        assert!(html.contains(&a));
        // The export names the page's choice; the toggle keeps the filters.
        assert!(html.contains("/api/call-records?format=jsonl&amp;client_events=hide"));
        let html = page(&s, &q(&[("status", "exception")])).main;
        assert!(html.contains("3 client events hidden"), "{html}");
        assert!(html.contains("No call matches"), "{html}");
        assert!(html.contains("href=\"/calls?status=exception&amp;client_events=show\""));
        // Shown: muted, marked client, never the red of an exception.
        let html = page(&s, &q(&[("client_events", "show")])).main;
        assert!(html.contains("1–4 of 4 calls"), "{html}");
        assert!(html.contains("<tr data-call-id=") && html.contains(" class=\"client\">"));
        assert_eq!(
            html.matches("<span class=\"badge client\">exception</span>")
                .count(),
            3
        );
        assert!(!html.contains("badge failed"), "{html}");
        assert!(html.contains("<div class=\"client-note\">") && !html.contains("class=\"raised\""));
        assert!(html.contains("<input type=\"hidden\" name=\"client_events\" value=\"show\">"));
        assert!(html.contains("href=\"/calls\">Hide them</a>"), "{html}");
        let html = page(&s, &q(&[("client_events", "only")])).main;
        assert!(
            html.contains("1–3 of 3 client events") && !html.contains(&a),
            "{html}"
        );
        let html = page(&s, &q(&[("client_events", "nope")])).main;
        assert!(
            html.contains("There is no choice “nope” for client events"),
            "{html}"
        );
        // A search leaves them out, and says so.
        let html = page(&s, &q(&[("search", "alias")])).main;
        assert!(
            html.contains("3 client events hidden (and not searched)"),
            "{html}"
        );
        assert!(html.contains("No call matches"), "{html}");
        let html = page(&s, &q(&[("search", "alias"), ("client_events", "show")])).main;
        assert!(html.contains("1–3 of 3 matching calls"), "{html}");
    }

    #[test]
    fn only_client_events_so_far_is_not_an_empty_session() {
        let s = shared();
        probe(&s);
        let html = page(&s, &[]).main;
        assert!(html.contains("No program calls recorded yet"), "{html}");
        assert!(html.contains("1 client event hidden"), "{html}");
    }

    #[test]
    fn the_status_is_a_choice_that_keeps_any_status_given() {
        let s = shared();
        let html = page(&s, &q(&[("status", "exception")])).main;
        assert!(
            html.contains("<select name=\"status\" data-submit><option value=\"\">any</option>")
        );
        assert!(
            html.contains("<option value=\"exception\" selected>exception</option>"),
            "{html}"
        );
        assert!(html.contains("<option value=\"registered\">registered (client)</option>"));
        assert!(html.contains("<option value=\"tool_error\">tool error (MCP)</option>"));
        let html = page(&s, &q(&[("status", "weird")])).main;
        assert!(
            html.contains("<option value=\"weird\" selected>weird</option>"),
            "{html}"
        );
    }

    #[test]
    fn arguments_are_named_from_the_signature_and_long_values_fold() {
        let s = shared();
        crate::service::function_register(
            &s,
            &body(json!({"function_name": "scale", "signature": "(value, factor=2)"})),
        )
        .unwrap();
        // The call's own signature names them; without one, the registered signature does.
        let long = "x".repeat(2000);
        call(&s, "add", &[json!(long), json!(3)], &json!(1));
        for (method, arg) in [("scale", 5), ("unknown", 6)] {
            let mut b = start_body(method, &[json!(arg)]);
            b.remove("signature");
            let started = start(&s, &b).unwrap();
            let id = started["call_id"].as_str().unwrap().to_owned();
            crate::service::testing::complete(&s, &complete_body(&id, &json!(1))).unwrap();
        }
        let html = page(&s, &[]).main;
        assert!(
            html.contains("<dt>x</dt>") && html.contains("<dt>y</dt>"),
            "{html}"
        );
        assert!(html.contains("<dt>value</dt>"), "{html}");
        assert!(
            html.contains("<dt>0</dt>"),
            "a function without a signature: {html}"
        );
        // A long value folds, with its object link beside it.
        assert!(html.contains("<details class=\"more\">"), "{html}");
        assert!(html.contains("show all 503 characters"), "{html}");
        assert!(
            html.contains("<a class=\"obj-link\" href=\"/object/"),
            "{html}"
        );
    }

    #[test]
    fn links_are_percent_encoded() {
        assert_eq!(
            link("/calls", &[("search", "a b&c=d/é")]),
            "/calls?search=a%20b%26c%3Dd%2F%C3%A9"
        );
        assert_eq!(count(1234567), "1,234,567");
    }
}
