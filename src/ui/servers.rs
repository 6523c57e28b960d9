//! The External MCP servers page (`/mcp-servers`): each server's status, transport and error,
//! connect / disconnect / reconnect, its tools with their input schemas, and a form to call a
//! tool with JSON arguments and see the result (`app.js` `showAnswer`: a result with
//! `isError: true` reads as a failure, its error text first).

use serde_json::Value;

use super::markup::{html, markup};
use super::{plural, shown, time, Html, View};
use crate::service;
use crate::state::Shared;
use crate::urlenc::encode_segment;

pub fn page(shared: &Shared) -> View {
    let mut out = Html::lit("<div class=\"bar\"><h1>External MCP servers</h1></div>");
    let clients =
        service::external::clients(shared).unwrap_or_else(|_| serde_json::json!({"clients": {}}));
    out.push_lit(CONNECT_FORM);
    html!(
        out,
        "<p class=\"hint\">Servers connected here are not saved. To connect some at every start, \
         list them in <code>{}</code> and start the server with <code>--mcp-clients</code> \
         (or name another file with <code>--mcp-clients-config PATH</code>, or one server with \
         <code>--mcp-client NAME:COMMAND</code>).</p>",
        shared.config.mcp_clients_file.display().to_string()
    );
    html!(
        out,
        "<div id=\"server-list\" data-live>{}</div>",
        servers(shared, &clients["clients"])
    );
    View::new("External MCP servers", "/mcp-servers", out)
}

const CONNECT_FORM: &str = "<details class=\"panel\"><summary>Connect a server</summary>\
    <form class=\"inline\" data-api=\"/api/mcp-clients/connect\" data-then=\"refresh\" data-reset>\
    <label>Name <input name=\"name\" required placeholder=\"files\"></label>\
    <label>Command (stdio) <input name=\"command\" data-optional placeholder=\"npx\"></label>\
    <label>Arguments (JSON list) <input name=\"args\" data-json data-optional placeholder='[\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]'></label>\
    <label>or URL <input name=\"url\" type=\"url\" data-optional placeholder=\"http://127.0.0.1:8000/mcp\"></label>\
    <label>Transport <select name=\"transport\" data-optional><option value=\"\">from command or URL</option>\
    <option>stdio</option><option value=\"http\">Streamable HTTP</option><option value=\"sse\">legacy SSE</option>\
    <option value=\"auto\">auto (HTTP, then SSE)</option></select></label>\
    <button type=\"submit\">Connect</button><p class=\"hint\">Not saved: the server is forgotten when \
    this one stops.</p><p class=\"error\" role=\"alert\"></p></form></details>";

fn servers(shared: &Shared, clients: &Value) -> Html {
    let Some(map) = clients.as_object().filter(|m| !m.is_empty()) else {
        return Html::lit(
            "<section class=\"empty\"><h2>No external servers</h2><p>Connect one above \
             (a filesystem, git or database MCP server, ...): agents and this page can then use \
             its tools during a debugging session.</p></section>",
        );
    };
    let mut out = Html::new();
    for (name, s) in map {
        let status = s["status"].as_str().unwrap_or("");
        let seg = encode_segment(name);
        let status_class = match status {
            "connected" => "after",
            "connecting" => "before",
            _ => "down",
        };
        html!(
            out,
            "<article class=\"card server {}\"><h2><span class=\"fn\">{}</span> \
             <span class=\"badge {}\">{}</span></h2><p class=\"meta\">{}",
            status_class,
            name,
            status_class,
            status,
            s["transport"].as_str().unwrap_or(""),
        );
        if let Some(cmd) = s.get("command").and_then(Value::as_str) {
            let args: Vec<String> = s["args"]
                .as_array()
                .map(|a| a.iter().map(|v| shown(v).into_owned()).collect())
                .unwrap_or_default();
            html!(
                out,
                " · <code>{}</code>",
                format!("{cmd} {}", args.join(" "))
            );
        }
        if let Some(url) = s.get("url").and_then(Value::as_str) {
            html!(out, " · <code>{}</code>", url);
        }
        if let Some(v) = s
            .get("server_info")
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
        {
            let version = s["server_info"]["version"].as_str().unwrap_or("");
            html!(out, " · {} {}", v, version);
        }
        if let Some(at) = s.get("connected_at").and_then(Value::as_f64) {
            html!(out, " · connected {}", time(at));
        }
        out.push_lit("</p>");
        if let Some(e) = s.get("error").and_then(Value::as_str) {
            html!(out, "<p class=\"error-text\">{}</p>", e);
        }
        let auth_state = s
            .pointer("/auth/state")
            .and_then(Value::as_str)
            .unwrap_or("none");
        if auth_state != "none" {
            let scopes: Vec<&str> = s
                .pointer("/auth/scopes")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            html!(
                out,
                "<p class=\"auth\">Authorization: <span class=\"badge auth-{}\">{}</span>{}{}</p>",
                auth_state,
                auth_state,
                if scopes.is_empty() {
                    String::new()
                } else {
                    format!(" · scopes {}", scopes.join(" "))
                },
                s.pointer("/auth/message")
                    .and_then(Value::as_str)
                    .map(|m| format!(" · {m}"))
                    .unwrap_or_default(),
            );
        }
        if let Some(secs) = s.get("next_retry_in_s").and_then(Value::as_f64) {
            html!(out, "<p class=\"hint\">Retrying in {:.0} s.</p>", secs);
        }
        // Tools the server listed that were left out (hostile or surplus names).
        if let Some(n) = s
            .get("skipped_tools")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            let why: Vec<String> = s
                .get("skipped_tools_by_reason")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter(|(_, v)| v.as_u64() != Some(0))
                        .map(|(k, v)| format!("{} {}", shown(v), k.replace('_', " ")))
                        .collect()
                })
                .unwrap_or_default();
            html!(
                out,
                "<p class=\"hint skipped\">{} tool{} this server listed left out ({}).</p>",
                n,
                plural(n as usize),
                why.join(", ")
            );
        }
        let disconnect = if status == "connected" || status == "connecting" {
            markup!(
                "<form class=\"inline\" data-api=\"/api/mcp-clients/{}/disconnect\">\
                 <button type=\"submit\" class=\"quiet\">Disconnect</button></form>",
                seg
            )
        } else {
            Html::new()
        };
        // Reconnecting is the main action only of a server that is down.
        let reconnect_class = if status == "connected" || status == "connecting" {
            Html::lit(" class=\"quiet\"")
        } else {
            Html::new()
        };
        // Authorizing opens the authorization server's page in this tab; its callback page
        // links back here.
        let authorize = if s.get("url").is_some() && auth_state != "none" {
            let class = if matches!(auth_state, "required" | "error" | "authorizing") {
                Html::new()
            } else {
                Html::lit(" class=\"quiet\"")
            };
            markup!(
                "<form class=\"inline\" data-api=\"/api/mcp-clients/{}/authorize\" \
                 data-then=\"open:authorization_url\" data-busy=\"Discovering…\">\
                 <button type=\"submit\"{}>Authorize</button></form>",
                seg,
                class
            )
        } else {
            Html::new()
        };
        html!(
            out,
            "<div class=\"actions\">{}<form class=\"inline\" data-api=\"/api/mcp-clients/{}/reconnect\">\
             <button type=\"submit\"{}>Reconnect</button></form>{}</div><p class=\"error\" role=\"alert\"></p>",
            authorize,
            seg,
            reconnect_class,
            disconnect
        );
        if status == "connected" {
            tools(&mut out, shared, name);
        }
        out.push_lit("</article>");
    }
    out
}

/// The tools of one connected server, each with its schema and a call form.
fn tools(out: &mut Html, shared: &Shared, server: &str) {
    let Ok(listed) = service::external::tools(shared, Some(server)) else {
        return;
    };
    let list = listed["tools"].as_array().map_or(&[][..], Vec::as_slice);
    html!(out, "<h3>{} tool{}</h3>", list.len(), plural(list.len()));
    for (i, t) in list.iter().enumerate() {
        let name = t["name"].as_str().unwrap_or("");
        let original = t["original_name"].as_str().unwrap_or(name);
        let schema = t.get("input_schema").cloned().unwrap_or(Value::Null);
        let result_id = format!(
            "tool-result-{}-{i}",
            encode_segment(server).replace('%', "_")
        );
        html!(
            out,
            "<details class=\"tool\"><summary><code>{}</code> <span class=\"hint\">{}</span></summary>\
             <details class=\"schema\"><summary>Input schema</summary><pre class=\"value fold\" tabindex=\"0\">{}</pre></details>\
             <form data-api=\"/api/mcp-tools/call\" data-then=\"show:{}\" data-busy=\"Calling…\">\
             <input type=\"hidden\" name=\"tool\" value=\"{}\">\
             <label>Arguments (JSON object) <textarea name=\"arguments\" rows=\"3\" data-json>{}</textarea></label>\
             <button type=\"submit\">Call</button><p class=\"error\" role=\"alert\"></p></form>\
             <pre class=\"value fold\" id=\"{}\" tabindex=\"0\" hidden></pre></details>",
            original,
            first_line(t["description"].as_str().unwrap_or("")),
            serde_json::to_string_pretty(&schema).unwrap_or_default(),
            result_id,
            name,
            skeleton(&schema),
            result_id,
        );
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(120).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// Arguments to start from: the schema's required properties with empty values of their type.
fn skeleton(schema: &Value) -> String {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = serde_json::Map::new();
    if let Some(props) = props {
        for (k, p) in props {
            if !required.contains(&k.as_str()) {
                continue;
            }
            let empty = match p.get("type").and_then(Value::as_str) {
                Some("string") => Value::String(String::new()),
                Some("integer" | "number") => Value::from(0),
                Some("boolean") => Value::Bool(false),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(serde_json::Map::new()),
                _ => Value::Null,
            };
            args.insert(k.clone(), empty);
        }
    }
    serde_json::to_string_pretty(&Value::Object(args)).unwrap_or_else(|_| "{}".to_owned())
}

/// `GET /oauth/callback`: where an authorization server sends the browser back. Finishes the
/// authorization (see `crate::upstream::auth`) and says how it went.
pub fn callback(shared: &Shared, query: &[(String, String)]) -> View {
    let mut out = Html::lit("<div class=\"bar\"><h1>MCP server authorization</h1></div>");
    match service::external::authorization_callback(shared, query) {
        Ok(name) => html!(
            out,
            "<section class=\"card\"><p class=\"ok\">Authorized: <span class=\"fn\">{}</span> \
             is connected with its new token.</p><p><a href=\"/mcp-servers\">Back to the MCP servers</a></p></section>",
            name
        ),
        Err(why) => html!(
            out,
            "<section class=\"card\"><p class=\"error-text\">Authorization failed: {}</p>\
             <p><a href=\"/mcp-servers\">Back to the MCP servers</a> (Authorize starts again)</p></section>",
            why
        ),
    }
    View::new("MCP server authorization", "/oauth/callback", out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::shared;
    use serde_json::json;

    #[test]
    fn with_no_server_the_page_offers_the_connect_form_and_names_the_config_file() {
        let s = shared();
        let html = page(&s).main;
        assert!(
            html.contains("data-api=\"/api/mcp-clients/connect\""),
            "{html}"
        );
        assert!(html.contains("No external servers"), "{html}");
        let file = s.config.mcp_clients_file.display().to_string();
        assert!(file.ends_with("mcp_clients.json"), "{file}");
        assert!(
            html.contains(&format!("<code>{}</code>", crate::ui::esc(&file))),
            "{html}"
        );
        assert!(!html.contains("mcp-clients.json"), "{html}");
    }

    #[test]
    fn the_skeleton_holds_the_required_properties() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"},
            "n": {"type": "integer"}, "opt": {"type": "string"}}, "required": ["path", "n"]});
        let v: Value = serde_json::from_str(&skeleton(&schema)).unwrap();
        assert_eq!(v, json!({"path": "", "n": 0}));
        assert_eq!(skeleton(&Value::Null), "{}");
    }
}
