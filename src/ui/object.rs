//! The Object page (`/object/<cid>`): a stored argument, result or exception: format, size,
//! when it was stored, the rendered value, the structured view `{type, repr, attributes}` with
//! nested attributes expandable, and the calls that named it.

use serde_json::Value;

use super::markup::{html, markup};
use super::{plural, shown, time, Answer, Html, View};
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

/// How many calls "seen in" lists.
const SEEN_LIMIT: usize = 100;

pub fn page(shared: &Shared, cid: &str) -> Answer {
    let Ok(obj) = service::object(shared, cid, false) else {
        return Err(format!("/object/{cid}"));
    };
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
    out.push_lit("<h2>Structure</h2><div class=\"tree\">");
    view_node(
        &mut out,
        "",
        &obj.view.type_name,
        &obj.view.repr,
        &obj.view.attributes,
        0,
    );
    out.push_lit("</div>");
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
                );
            }
            other => html!(
                out,
                "<div class=\"leaf\"><span class=\"attr\">{}</span> <code>{}</code></div>",
                k,
                shown(other)
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
        assert!(page(&s, &"0".repeat(128)).is_err());
        assert!(page(&s, "../../etc/passwd").is_err());
    }

    #[test]
    fn a_stored_argument_shows_escaped_with_the_call_that_named_it() {
        let s = shared();
        let (_, call_id) = paused_call(&s, "f", &[json!({"k": HOSTILE, "n": [1, 2]})]);
        let cid = item(&json!({"k": HOSTILE, "n": [1, 2]}))["cid"]
            .as_str()
            .unwrap()
            .to_owned();
        let html = page(&s, &cid).unwrap().main;
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(html.contains(&crate::ui::esc(&call_id)), "{html}");
        assert!(html.contains("arg:0"));
        assert!(html.contains("running or paused"));
    }
}
