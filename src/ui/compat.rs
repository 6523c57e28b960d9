//! Pages at the original server's UI addresses that our other pages do not have: `/objects`
//! (client objects and stored objects), `/object/ref:<process_key>:<client_ref>` (one client
//! object's snapshots), `/repl-help`, `/docs` (the REST API from the route table),
//! `/frame/call/<process_key>/<call_id>/<i>` (the original's form of our
//! `/frame/call/<call_id>/<i>`) and `/breakpoint/<name>/history/<record_id>` (one history
//! entry). Every value is escaped; no page has inline code.

use serde_json::Value;

use super::breakpoints::arguments_text;
use super::markup::{html, markup};
use super::tree::call_tree_href;
use super::{param, plural, shown, time, Answer, Html, View};
use crate::service;
use crate::state::Shared;
use crate::urlenc::{encode_segment, percent_decode};

/// Stored objects listed on a page of `/objects`.
const OBJECTS_PAGE: usize = 100;
/// Client objects listed on `/objects` (the newest).
const CLIENT_OBJECTS: usize = 200;

/// The page of a client object: `/object/ref:<process_key>:<client_ref>`.
pub fn ref_href(process_key: &str, client_ref: &str) -> String {
    format!(
        "/object/{}",
        encode_segment(&format!("ref:{process_key}:{client_ref}"))
    )
}

/// A client ref as text (`7`, or a string as it is).
fn ref_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `/objects`: the client objects (items sent with a `client_ref`), each with its newest
/// snapshot, and the stored objects by CID, newest first (`?offset=N` pages them).
pub fn objects(shared: &Shared, query: &[(String, String)]) -> View {
    let mut out = Html::lit("<div class=\"bar\"><h1>Objects</h1></div>");
    let (rows, total) = service::client_objects(shared, CLIENT_OBJECTS);
    html!(
        out,
        "<h2>Client objects</h2><p class=\"meta\">Values the program sent with a client ref \
         (the same object in later calls), {} in all{}; each with what it was last seen as.</p>",
        total,
        (total > rows.len()).then(|| format!(", the newest {} shown", rows.len()))
    );
    if rows.is_empty() {
        out.push_lit("<p class=\"empty\">No client object was seen yet.</p>");
    } else {
        out.push_lit(
            "<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th scope=\"col\">Ref</th>\
             <th scope=\"col\">Process</th><th scope=\"col\">Last seen</th><th scope=\"col\">As</th>\
             <th scope=\"col\">In</th><th scope=\"col\">Value</th></tr></thead><tbody>",
        );
        for s in &rows {
            let process = s["process_key"].as_str().unwrap_or("");
            let client_ref = ref_text(&s["client_ref"]);
            html!(
                out,
                "<tr><td><a href=\"{}\"><code>ref:{}</code></a></td><td><code>{}</code></td>\
                 <td>{}</td><td>{}</td><td><code>{}</code></td><td><code class=\"value\">{}</code></td></tr>",
                ref_href(process, &client_ref),
                client_ref,
                process,
                time(s["at"].as_f64().unwrap_or(0.0)),
                s["role"].as_str().unwrap_or(""),
                s["method_name"].as_str().unwrap_or(""),
                shown(&s["pretty"]),
            );
        }
        out.push_lit("</tbody></table></div>");
    }
    let offset = param(query, "offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    let page = service::objects(shared, offset, OBJECTS_PAGE);
    html!(
        out,
        "<h2>Stored objects</h2><p class=\"meta\">{} object{} stored by CID, newest first.</p>",
        page.total_count,
        plural(page.total_count)
    );
    if page.objects.is_empty() {
        out.push_lit("<p class=\"empty\">No object on this page.</p>");
    } else {
        out.push_lit(
            "<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th scope=\"col\">CID</th>\
             <th scope=\"col\">Format</th><th scope=\"col\">Size</th><th scope=\"col\">Stored</th>\
             </tr></thead><tbody>",
        );
        for o in &page.objects {
            let cid = o.cid.hex();
            html!(
                out,
                "<tr><td><a href=\"/object/{}\"><code class=\"cid\">{}…</code></a></td><td>{}</td>\
                 <td>{} byte{}</td><td>{}</td></tr>",
                cid,
                &cid[..cid.len().min(16)],
                o.format.unwrap_or("unknown"),
                o.size,
                plural(o.size as usize),
                time(o.stored_at),
            );
        }
        out.push_lit("</tbody></table></div>");
    }
    let mut pager = Vec::new();
    if offset > 0 {
        pager.push(markup!(
            "<a href=\"/objects?offset={}\" rel=\"prev\">Newer</a>",
            offset.saturating_sub(OBJECTS_PAGE)
        ));
    }
    if offset + page.objects.len() < page.total_count {
        pager.push(markup!(
            "<a href=\"/objects?offset={}\" rel=\"next\">Older</a>",
            offset + OBJECTS_PAGE
        ));
    }
    if !pager.is_empty() {
        out.push_lit("<p class=\"meta\">");
        for (i, link) in pager.iter().enumerate() {
            if i > 0 {
                out.push_lit(" · ");
            }
            out.push(link);
        }
        out.push_lit("</p>");
    }
    View::new("Objects", "", out)
}

/// `/object/ref:<process_key>:<client_ref>` (or `ref:<client_ref>`: every process): every
/// snapshot of one client object, newest first, each linking to its stored value.
pub fn object_ref(shared: &Shared, reference: &str) -> Answer {
    let not_found = || format!("/object/{reference}");
    let rest = reference.strip_prefix("ref:").ok_or_else(not_found)?;
    let (process, client_ref) = match rest.split_once(':') {
        Some((p, r)) => (Some(p), r),
        None => (None, rest),
    };
    if client_ref.is_empty() {
        return Err(not_found());
    }
    let found = service::snapshots(shared, process, Some(client_ref));
    let list = found["snapshots"].as_array().map_or(&[][..], Vec::as_slice);
    if list.is_empty() {
        return Err(not_found());
    }
    let mut out = markup!(
        "<div class=\"bar\"><h1>Client object <code>ref:{}</code></h1><a href=\"/objects\">All objects</a></div>\
         <p class=\"meta\">{} · {} snapshot{}: what the object was each time the program sent it.</p>",
        client_ref,
        match process {
            Some(p) => markup!("Process <code>{}</code>", p),
            None => Html::lit("Every process"),
        },
        list.len(),
        plural(list.len()),
    );
    out.push_lit(
        "<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th scope=\"col\">Seen</th>\
         <th scope=\"col\">As</th><th scope=\"col\">In</th><th scope=\"col\">Value</th>\
         <th scope=\"col\">Stored object</th></tr></thead><tbody>",
    );
    for s in list.iter().rev() {
        let process_key = s["process_key"].as_str().unwrap_or("");
        let call_id = s["call_id"].as_str().unwrap_or("");
        let stored = s["cid"].as_str().map(|cid| {
            markup!(
                "<a href=\"/object/{}\"><code class=\"cid\">{}…</code></a>",
                cid,
                &cid[..cid.len().min(16)]
            )
        });
        html!(
            out,
            "<tr><td>{}</td><td>{}</td><td><a href=\"{}\"><code>{}</code></a></td>\
             <td><code class=\"value\">{}</code></td><td>{}</td></tr>",
            time(s["at"].as_f64().unwrap_or(0.0)),
            s["role"].as_str().unwrap_or(""),
            call_tree_href(process_key, Some(call_id)),
            s["method_name"].as_str().unwrap_or(""),
            shown(&s["pretty"]),
            stored,
        );
    }
    out.push_lit("</tbody></table></div>");
    Ok(View::new(
        format!("Client object ref:{client_ref}"),
        "",
        out,
    ))
}

/// `/repl-help`: how the REPL of a paused call is used.
pub fn repl_help() -> View {
    let main = Html::lit(
        "<div class=\"bar\"><h1>REPL help</h1><a href=\"/repls\">All sessions</a></div>\
        <p>A REPL session evaluates Python in the paused program: open one with <b>REPL</b> on a \
        paused call (on the <a href=\"/\">Paused</a> page). The debug client runs each input in \
        the frame of the paused call, so its arguments and locals are names you can use; the \
        answer shows the value's repr and anything printed.</p>\
        <h2>Examples</h2>\
        <pre class=\"value\">x + 1\nprint(x)\nmy_list.append(42)\nimport math\nmath.sqrt(9)\n\n\
        def foo(a):\n    return a * 2\n\nfoo(3)</pre>\
        <h2>Keys</h2><ul><li><kbd>Enter</kbd> runs the input.</li>\
        <li><kbd>Shift</kbd>+<kbd>Enter</kbd> adds a line (for a multi-line input such as a \
        <code>def</code>).</li><li><kbd>Up</kbd> and <kbd>Down</kbd> recall earlier inputs.</li></ul>\
        <p>The session stays open while the call is paused; once the call is continued its \
        transcript is kept and the input goes away. Agents evaluate through the MCP tools and \
        programs through <code>POST /api/repl/&lt;session_id&gt;/eval</code> (see the \
        <a href=\"/docs\">API</a>).</p>",
    );
    View::new("REPL help", "/repls", main)
}

/// `/docs`: the OpenAPI document of `/openapi.json` (built from the route table) as a page:
/// every operation with its parameters, request body and answers, each with a form that sends
/// it from this page (`app.js`, `form[data-try]`). The page is this server's own origin, so
/// what it sends passes the same trust rules as every other page of the web UI; nothing is
/// loaded from anywhere else.
pub fn docs(spec: &Value) -> View {
    let title = spec["info"]["title"].as_str().unwrap_or("REST API");
    let version = spec["info"]["version"].as_str().unwrap_or("");
    let mut out = markup!(
        "<div class=\"bar\"><h1>REST API</h1><a href=\"/openapi.json\">OpenAPI document</a></div>\
         <p class=\"meta\">{} {}: every operation that <a href=\"/openapi.json\">/openapi.json</a> \
         describes (also at <code>/api/openapi.json</code>), OpenAPI {}. Open one to read its \
         parameters and answers and to send it from this page: <b>Send</b> makes the request \
         as this page (this server's own origin) and shows the answer. Bodies and answers are \
         JSON, but for the browser debug client's script.</p>",
        title,
        version,
        spec["openapi"].as_str().unwrap_or("")
    );
    let Some(paths) = spec["paths"].as_object() else {
        out.push_lit("<p class=\"empty\">The document lists no operations.</p>");
        return View::new("API", "", out);
    };
    // Grouped by the first segment after /api (the original's addresses and the rest apart).
    let group_of = |path: &str| -> String {
        let mut segs = path.trim_start_matches('/').split('/');
        match (segs.next(), segs.next()) {
            (Some("api"), Some(g)) if !g.starts_with('{') => format!("/api/{g}"),
            (Some(first), _) => format!("/{first}"),
            _ => "/".to_owned(),
        }
    };
    let mut groups: Vec<(String, Vec<(&String, &Value)>)> = Vec::new();
    for (path, ops) in paths {
        let g = group_of(path);
        match groups.iter_mut().find(|(name, _)| *name == g) {
            Some((_, v)) => v.push((path, ops)),
            None => groups.push((g, vec![(path, ops)])),
        }
    }
    let n_ops: usize = paths
        .values()
        .map(|o| o.as_object().map_or(0, |m| m.len()))
        .sum();
    html!(
        out,
        "<nav class=\"toc\" aria-label=\"Groups of operations\"><p>{} operations in {} groups:</p><ul>",
        n_ops,
        groups.len()
    );
    for (g, _) in &groups {
        html!(
            out,
            "<li><a href=\"#{}\"><code>{}</code></a></li>",
            group_id(g),
            g
        );
    }
    out.push_lit("</ul></nav>");
    for (g, entries) in &groups {
        html!(out, "<h2 id=\"{}\"><code>{}</code></h2>", group_id(g), g);
        for (path, ops) in entries {
            let Some(ops) = ops.as_object() else { continue };
            for (method, op) in ops {
                out.push(&operation(path, method, op));
            }
        }
    }
    View::new("API", "", out)
}

fn group_id(group: &str) -> String {
    let slug: String = group
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("g{slug}")
}

/// One operation of the OpenAPI document: what it is, and a form that sends it.
fn operation(path: &str, method: &str, op: &Value) -> Html {
    let verb = method.to_ascii_uppercase();
    let summary = op["summary"].as_str().unwrap_or("");
    let id = op["operationId"].as_str().unwrap_or("");
    let mut out = markup!(
        "<details class=\"op\" id=\"op-{}\"><summary><code class=\"verb verb-{}\">{}</code> \
         <code>{}</code> <span class=\"op-summary\">{}</span></summary><div class=\"op-body\">",
        id,
        method,
        verb,
        path,
        summary
    );
    let params: Vec<&Value> = op["parameters"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // Without scripts, a GET without path parameters still works as a plain form.
    if verb == "GET" && !path.contains('{') {
        html!(
            out,
            "<form class=\"try\" data-try data-method=\"{}\" data-path=\"{}\" method=\"get\" action=\"{}\">",
            verb,
            path,
            path
        );
    } else {
        html!(
            out,
            "<form class=\"try\" data-try data-method=\"{}\" data-path=\"{}\">",
            verb,
            path
        );
    }
    if params.is_empty() {
        out.push_lit("<p class=\"meta\">No parameters.</p>");
    } else {
        out.push_lit("<fieldset><legend>Parameters</legend>");
        for p in &params {
            let name = p["name"].as_str().unwrap_or("");
            let place = p["in"].as_str().unwrap_or("query");
            let required = p["required"].as_bool().unwrap_or(false);
            let field = format!("{id}-{place}-{name}");
            html!(
                out,
                "<div class=\"param\"><label for=\"{}\"><code>{}</code> <span class=\"meta\">{}{}, {}</span></label>",
                field,
                name,
                place,
                if required { ", required" } else { "" },
                p["schema"]["type"].as_str().unwrap_or("string"),
            );
            // A query parameter keeps its name, so that a GET form sends it without scripts.
            let name_attr = if place == "query" {
                markup!(" name=\"{}\"", name)
            } else {
                Html::new()
            };
            let required_attr = Html::lit(if required { " required" } else { "" });
            html!(
                out,
                "<input id=\"{}\" data-in=\"{}\" data-name=\"{}\"{}{}>",
                field,
                place,
                name,
                name_attr,
                required_attr
            );
            if let Some(d) = p["description"].as_str() {
                html!(out, "<p class=\"meta\">{}</p>", d);
            }
            out.push_lit("</div>");
        }
        out.push_lit("</fieldset>");
    }
    if let Some(body) = op.get("requestBody") {
        let schema = &body["content"]["application/json"]["schema"];
        html!(
            out,
            "<div class=\"param\"><label for=\"{}-body\">Request body <span class=\"meta\">\
             application/json, {}{}; the summary above names its fields</span></label>\
             <textarea id=\"{}-body\" data-in=\"body\" rows=\"3\" spellcheck=\"false\">{{}}</textarea></div>",
            id,
            schema["type"].as_str().unwrap_or("any"),
            if body["required"].as_bool() == Some(true) { ", required" } else { ", optional" },
            id
        );
    }
    html!(
        out,
        "<div class=\"actions\"><button type=\"submit\">Send {}</button></div></form>\
         <div class=\"try-answer\" aria-live=\"polite\" hidden></div>",
        verb
    );
    out.push_lit("<h3>Answers</h3><ul class=\"answers\">");
    if let Some(responses) = op["responses"].as_object() {
        for (code, r) in responses {
            let types: Vec<String> = r["content"]
                .as_object()
                .map(|c| {
                    c.iter()
                        .map(|(t, v)| {
                            let schema = &v["schema"];
                            match (schema["type"].as_str(), schema["$ref"].as_str()) {
                                (Some(ty), _) => format!("{t} ({ty})"),
                                (None, Some(r)) => {
                                    format!("{t} ({})", r.rsplit('/').next().unwrap_or(r))
                                }
                                _ => t.clone(),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            html!(
                out,
                "<li><code>{}</code> {}: {}</li>",
                code,
                r["description"].as_str().unwrap_or(""),
                types.join(", ")
            );
        }
    }
    out.push_lit("</ul></div></details>");
    out
}

/// `/frame/call/<process_key>/<call_id>/<i>`: the page of `/frame/call/<call_id>/<i>` (call ids
/// are unique on this server) when the call is of that process. `None` for other paths.
pub fn frame_of_process(shared: &Shared, path: &str) -> Option<Answer> {
    let rest = path.strip_prefix("/frame/call/")?;
    let [process, call_id, index] = rest.split('/').collect::<Vec<_>>()[..] else {
        return None;
    };
    let record = service::find_record(shared, &percent_decode(call_id));
    let same_process = record
        .as_ref()
        .and_then(|r| r["process_key"].as_str())
        .is_some_and(|k| k == percent_decode(process));
    if !same_process {
        return Some(Err(percent_decode(path)));
    }
    Some(super::source::frame(
        shared,
        &format!("/frame/call/{call_id}/{index}"),
    ))
}

/// `/breakpoint/<name>/history/<record_id>`: one completed call of the history.
pub fn history_entry(shared: &Shared, name: &str, id: &str) -> Answer {
    let not_found = || format!("/breakpoint/{name}/history/{id}");
    let entry = service::breakpoint_history_entry(shared, name, id).ok_or_else(not_found)?;
    let d = &entry["call_data"];
    let text = |k: &str| d.get(k).filter(|v| !v.is_null()).map(shown);
    let call_id = text("call_id").unwrap_or_default();
    let process_key = text("process_key").unwrap_or_default();
    let mut out = markup!(
        "<div class=\"bar\"><h1><code>{}({})</code></h1><a href=\"{}\">History of <code>{}</code></a></div>\
         <dl class=\"facts\"><dt>Status</dt><dd>{}</dd><dt>Completed</dt><dd>{}</dd>\
         <dt>Call</dt><dd><code>{}</code></dd><dt>Process</dt><dd><code>{}</code></dd>",
        name,
        arguments_text(d),
        format!("/breakpoint/{}/history", encode_segment(name)),
        name,
        text("status").unwrap_or_default(),
        time(entry["completed_at"].as_f64().unwrap_or(0.0)),
        call_id,
        process_key,
    );
    if let Some(sig) = text("signature") {
        html!(out, "<dt>Signature</dt><dd><code>{}</code></dd>", sig);
    }
    out.push_lit("</dl>");
    match d.get("exception").filter(|x| !x.is_null()) {
        Some(x) => html!(
            out,
            "<h2>Exception</h2><pre class=\"value raised\">{}</pre>",
            shown(x)
        ),
        None => html!(
            out,
            "<h2>Result</h2><pre class=\"value\">{}</pre>",
            d.get("pretty_result").map(shown).unwrap_or_default()
        ),
    }
    if !call_id.is_empty() {
        html!(
            out,
            "<p class=\"meta\"><a href=\"/callstack/call/{}\">Call stack</a> · \
             <a href=\"{}\">In the call tree</a></p>",
            encode_segment(&call_id),
            call_tree_href(&process_key, Some(&call_id)),
        );
    }
    Ok(View::new(format!("{name} call"), "/breakpoints", out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{complete, complete_body, item, paused_call, shared};
    use serde_json::json;

    const HOSTILE: &str = "</script><img src=x onerror=alert(1)>";

    #[test]
    fn a_history_entry_shows_its_call_also_after_the_breakpoint_is_gone() {
        let s = shared();
        let (pause, call_id) = paused_call(&s, "f", &[json!(HOSTILE)]);
        crate::service::testing::resume(&s, &pause);
        complete(&s, &complete_body(&call_id, &json!(42))).unwrap();
        service::breakpoint_remove(&s, "f").unwrap();
        let entries = service::breakpoint_history(&s, "f", 0, 10).history;
        let id = entries[0]["id"].as_str().unwrap().to_owned();
        let html = history_entry(&s, "f", &id).unwrap().main;
        assert!(html.contains("&lt;img") && !html.contains("<img"), "{html}");
        assert!(html.contains(&call_id), "{html}");
        assert!(history_entry(&s, "f", "nope").is_err());
        assert!(history_entry(&s, "g", &id).is_err());
    }

    #[test]
    fn client_objects_list_and_show_their_snapshots() {
        let s = shared();
        let mut arg = item(&json!(HOSTILE));
        arg["client_ref"] = json!(7);
        let mut start = crate::service::testing::start_body("f", &[]);
        start.insert("args".into(), json!([arg]));
        crate::service::set_global(&s, crate::breakpoints::Global::Go).unwrap();
        crate::service::testing::start(&s, &start).unwrap();
        let list = objects(&s, &[]).main;
        let key = service::snapshots(&s, None, None)["snapshots"][0]["process_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let href = ref_href(&key, "7");
        assert!(list.contains(&crate::ui::esc(&href)), "{list}");
        assert!(list.contains("1 object stored"), "{list}");
        assert!(!list.contains("<img"));
        let page = object_ref(&s, &format!("ref:{key}:7")).unwrap().main;
        assert!(page.contains("arg:0") && page.contains("&lt;img"), "{page}");
        assert!(object_ref(&s, "ref:7").is_ok(), "every process");
        assert!(object_ref(&s, &format!("ref:{key}:8")).is_err());
        assert!(object_ref(&s, "nothing").is_err());
    }

    #[test]
    fn the_docs_show_every_operation_escaped_with_a_form() {
        let spec = serde_json::json!({
            "openapi": "3.1.0",
            "info": {"title": "T", "version": "1"},
            "paths": {
                "/api/a": {"get": {"summary": "lists <a>", "operationId": "get_api_a",
                    "parameters": [{"name": "limit", "in": "query", "description": "page <size>",
                                    "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "Success",
                        "content": {"application/json": {"schema": {"type": "object"}}}}}}},
                "/api/b/{x}": {"post": {"summary": "b", "operationId": "post_api_b_x",
                    "parameters": [{"name": "x", "in": "path", "required": true,
                                    "schema": {"type": "string"}}],
                    "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                    "responses": {}}},
            },
        });
        let html = docs(&spec).main.into_string();
        assert!(html.contains("<code>/api/a</code>") && html.contains("<code>/api/b/{x}</code>"));
        assert!(html.contains("lists &lt;a&gt;") && html.contains("page &lt;size&gt;"));
        assert!(
            html.contains("data-method=\"POST\" data-path=\"/api/b/{x}\""),
            "{html}"
        );
        assert!(
            html.contains("data-in=\"path\" data-name=\"x\" required>"),
            "{html}"
        );
        assert!(
            html.contains("data-path=\"/api/b/{x}\">"),
            "no plain-form fallback for a POST"
        );
        assert!(
            html.contains("method=\"get\" action=\"/api/a\""),
            "a GET works without scripts"
        );
        assert!(html.contains("data-in=\"query\" data-name=\"limit\" name=\"limit\""));
        assert!(html.contains("data-in=\"body\""), "a POST has a body field");
        assert_eq!(
            html.matches("data-in=\"body\"").count(),
            1,
            "a GET has none"
        );
        assert!(html.contains("2 operations in 2 groups"), "{html}");
        assert!(!html.contains("<script"));
    }
}
