//! The Object page (`/object/<cid>`): a stored argument, result or exception: format, size,
//! when it was stored, the rendered value, the structured view `{type, repr, attributes}` with
//! nested attributes expandable, and the calls that named it.

use serde_json::Value;

use super::markup::{html, markup};
use super::{json_shown, param, plural, shown, time, Answer, Html, View};
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// How many calls "seen in" lists.
const SEEN_LIMIT: usize = 100;

/// How many top-level entries one page of the structure shows (the view's own bound).
const ENTRIES_PER_PAGE: usize = 100;

/// `/object/<cid>?from=N`: the object, its structure's top-level entries from the `N`th on.
pub fn page(shared: &Shared, cid: &str, query: &[(String, String)]) -> Answer {
    let from = param(query, "from")
        .and_then(|f| f.parse::<usize>().ok())
        .unwrap_or(0);
    let Ok(obj) = service::object_from(shared, cid, false, from) else {
        return Err(format!("/object/{cid}"));
    };
    let python = obj.format != Some("json");
    let mut out = markup!(
        "<div class=\"bar\"><h1>Object <code class=\"cid\">{}…</code></h1><a href=\"/objects\">All objects</a></div>\
         <dl class=\"facts\"><dt>Type</dt><dd><code>{}</code></dd><dt>Format</dt><dd>{}</dd>\
         <dt>Size</dt><dd>{} byte{}</dd><dt>Stored</dt><dd>{}</dd><dt>CID</dt><dd><code class=\"cid\">{}</code></dd></dl>",
        &cid[..cid.len().min(16)],
        obj.view.type_name,
        obj.format.unwrap_or("unknown"),
        obj.size,
        plural(obj.size),
        time(obj.stored_at),
        cid,
    );
    html!(
        out,
        "<h2>Value</h2><pre class=\"value fold\" tabindex=\"0\">{}</pre>",
        pretty_value(&obj.value)
    );
    out.push_lit("<h2>Structure</h2>");
    let more = obj.view.attributes.contains_key("__truncated__");
    let shown_here = obj
        .view
        .attributes
        .keys()
        .filter(|k| !MARKER_KEYS.contains(&k.as_str()))
        .count();
    let pages = entry_pages(cid, from, shown_here, more);
    out.push(&pages);
    out.push_lit("<div class=\"tree\">");
    view_node(
        &mut out,
        "",
        &obj.view.type_name,
        &obj.view.repr,
        &obj.view.attributes,
        0,
        python,
    );
    out.push_lit("</div>");
    out.push(&pages);
    let (seen, looked) = service::object_seen_in(shared, cid, SEEN_LIMIT);
    html!(
        out,
        "<h2>Seen in</h2><div id=\"seen-in\" data-live>{}</div>",
        seen_in(&seen, looked)
    );
    Ok(View::new(
        format!("Object {}", &cid[..cid.len().min(12)]),
        "",
        out,
    ))
}

/// The keys of a view that are notes, not entries: how many more entries there are.
const MARKER_KEYS: [&str; 2] = ["__truncated__", "__cut__"];

/// Links to the entries before and after this page of the structure (nothing when it holds
/// them all).
fn entry_pages(cid: &str, from: usize, shown: usize, more: bool) -> Html {
    if from == 0 && !more {
        return Html::new();
    }
    let mut out = markup!(
        "<p class=\"pages\">Entries {} to {}",
        from + usize::from(shown > 0),
        from + shown
    );
    if from > 0 {
        html!(
            out,
            " · <a href=\"/object/{}?from={}\" rel=\"prev\">Previous {}</a>",
            cid,
            from.saturating_sub(ENTRIES_PER_PAGE),
            ENTRIES_PER_PAGE
        );
    }
    if more {
        html!(
            out,
            " · <a href=\"/object/{}?from={}\" rel=\"next\">Next {}</a>",
            cid,
            from + shown.max(1),
            ENTRIES_PER_PAGE
        );
    }
    out.push_lit("</p>");
    out
}

/// A value of the structure as its language writes it: a Python string quoted (`'198.72'`,
/// never to be taken for the number), `None`, `True`; JSON as JSON. The notes of the view
/// (`<cut: ...>`, `<N more attributes>`) as they are.
fn leaf_text(key: &str, v: &Value, python: bool) -> String {
    if MARKER_KEYS.contains(&key) {
        return shown(v).into_owned();
    }
    match (v, python) {
        (_, false) => json_shown(v).into_owned(),
        (Value::String(s), true) if s.starts_with("<cut: ") => s.clone(),
        (Value::String(s), true) => crate::pickle::str_repr(s),
        (Value::Null, true) => "None".to_owned(),
        (Value::Bool(b), true) => if *b { "True" } else { "False" }.to_owned(),
        (other, true) => shown(other).into_owned(),
    }
}

/// A rendered value: strings as they are, anything else as indented JSON.
fn pretty_value(v: &Value) -> String {
    match v {
        Value::String(_) => shown(v).into_owned(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// One node of the structured view, its attributes as expandable children (open at the top).
fn view_node(
    out: &mut Html,
    name: &str,
    type_name: &str,
    repr: &str,
    attributes: &serde_json::Map<String, Value>,
    depth: usize,
    python: bool,
) {
    let label = if name.is_empty() {
        Html::new()
    } else {
        markup!("<span class=\"attr\">{}</span> ", name)
    };
    if attributes.is_empty() {
        html!(
            out,
            "<div class=\"leaf\">{}<span class=\"type\">{}</span> <code>{}</code></div>",
            label,
            type_name,
            repr
        );
        return;
    }
    let open = if depth == 0 {
        Html::lit(" open")
    } else {
        Html::new()
    };
    html!(
        out,
        "<details{}><summary>{}<span class=\"type\">{}</span> <code>{}</code></summary><div class=\"children\">",
        open,
        label,
        type_name,
        repr
    );
    for (k, v) in attributes {
        match v {
            Value::Object(m) if m.contains_key("type") && m.contains_key("repr") => {
                let empty = serde_json::Map::new();
                view_node(
                    out,
                    k,
                    m["type"].as_str().unwrap_or(""),
                    &shown(&m["repr"]),
                    m.get("attributes")
                        .and_then(Value::as_object)
                        .unwrap_or(&empty),
                    depth + 1,
                    python,
                );
            }
            other if MARKER_KEYS.contains(&k.as_str()) => html!(
                out,
                "<div class=\"leaf more\">{}</div>",
                leaf_text(k, other, python)
            ),
            other => html!(
                out,
                "<div class=\"leaf\"><span class=\"attr\">{}</span> <code>{}</code></div>",
                k,
                leaf_text(k, other, python)
            ),
        }
    }
    out.push_lit("</div></details>");
}

fn seen_in(seen: &[service::SeenIn], looked: usize) -> Html {
    if seen.is_empty() {
        return markup!(
            "<p class=\"empty\">No call among the {} in memory names this object.</p>",
            looked
        );
    }
    let mut out = Html::lit(
        "<table class=\"grid\"><thead><tr><th scope=\"col\">When</th><th scope=\"col\">Function</th>\
         <th scope=\"col\">As</th><th scope=\"col\">Call</th></tr></thead><tbody>",
    );
    for s in seen {
        let call = if s.open {
            markup!("{} (running or paused)", s.call_id)
        } else {
            markup!(
                "<a href=\"/call-tree/{}?selected={}\">{}</a>",
                encode_segment(&s.process_key),
                encode_segment(&s.call_id),
                s.call_id
            )
        };
        html!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            time(s.at),
            s.method_name,
            s.roles.join(", "),
            call,
        );
    }
    out.push_lit("</tbody></table>");
    if seen.len() >= SEEN_LIMIT {
        html!(
            out,
            "<p class=\"hint\">The newest {} are listed.</p>",
            SEEN_LIMIT
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{item, paused_call, shared};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    #[test]
    fn unknown_and_malformed_cids_are_not_found() {
        let s = shared();
        assert!(page(&s, &"0".repeat(128), &[]).is_err());
        assert!(page(&s, "../../etc/passwd", &[]).is_err());
    }

    #[test]
    fn a_stored_argument_shows_escaped_with_the_call_that_named_it() {
        let s = shared();
        let (_, call_id) = paused_call(&s, "f", &[json!({"k": HOSTILE, "n": [1, 2]})]);
        let cid = item(&json!({"k": HOSTILE, "n": [1, 2]}))["cid"]
            .as_str()
            .unwrap()
            .to_owned();
        let html = page(&s, &cid, &[]).unwrap().main;
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(html.contains(&crate::ui::esc(&call_id)), "{html}");
        assert!(html.contains("arg:0"));
        assert!(html.contains("running or paused"));
    }

    #[test]
    fn every_entry_of_a_long_dict_is_reached_a_page_at_a_time_and_strings_are_quoted() {
        let s = shared();
        let entries: serde_json::Map<String, Value> = (0..250)
            .map(|i| (format!("k{i:03}"), json!(format!("{i}.5"))))
            .collect();
        let value = Value::Object(entries);
        paused_call(&s, "f", std::slice::from_ref(&value));
        let cid = item(&value)["cid"].as_str().unwrap().to_owned();
        let at = |from: &str| {
            let q = [("from".to_owned(), from.to_owned())];
            page(&s, &cid, &q).unwrap().main.into_string()
        };
        let first = page(&s, &cid, &[]).unwrap().main.into_string();
        assert!(first.contains("Entries 1 to 100"), "{first}");
        assert!(first.contains(&format!("href=\"/object/{cid}?from=100\" rel=\"next\"")));
        // The string '0.5' is quoted: it is not the number 0.5.
        assert!(
            first.contains("<span class=\"attr\">&#39;k000&#39;</span> <code>&#39;0.5&#39;</code>"),
            "{first}"
        );
        assert!(!first.contains("k100"));
        let second = at("100");
        assert!(second.contains("Entries 101 to 200"), "{second}");
        assert!(second.contains("k100") && second.contains("k199") && !second.contains("k200"));
        assert!(second.contains("rel=\"prev\"") && second.contains("from=200"));
        let last = at("200");
        assert!(
            last.contains("Entries 201 to 250") && last.contains("k249"),
            "{last}"
        );
        assert!(!last.contains("rel=\"next\""), "{last}");
        // A bad offset is the first page; one past the end shows no entries and no next.
        assert!(at("x").contains("Entries 1 to 100"));
        assert!(!at("999").contains("rel=\"next\""));
    }
}
