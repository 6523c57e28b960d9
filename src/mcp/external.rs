//! Handlers of the five `external_*` proxy tools (`tools.rs` lists them in its table and turns
//! their `ApiError`s into tool errors; this module knows nothing of the table): they reach the
//! external MCP servers through `service::external`, exactly as the REST API does, and shape the
//! answers for an agent. The only difference from REST: a very large tool result is cut for the
//! agent (hosts reject huge tool results) and says so, with the CID of the full result.

use serde_json::{json, Map, Value};

use super::Ctx;
use crate::error::ApiError;
use crate::limits::{AGENT_RESULT_LIMIT, MAX_SETTLE};
use crate::service::external as api;

type Args = Map<String, Value>;

/// What an agent should do next after an external-tool error, by code.
pub fn hint_for(code: &str) -> Option<&'static str> {
    Some(match code {
        "server_not_found" => {
            "Call external_list_servers for the connected server names. A user connects more on the debugger's \
             web UI page /mcp-servers (or with --mcp-client NAME:COMMAND at start)."
        }
        "server_not_connected" => {
            "The server is not connected (see its status and error in external_list_servers); it reconnects by \
             itself unless its status is failed. Try again shortly."
        }
        "tool_not_found" | "ambiguous_tool" | "invalid_tool_name" => {
            "Call external_list_tools and use the exact name it lists (server/tool)."
        }
        "tool_denied" => "The server's configuration does not allow this tool (allowed_tools / denied_tools).",
        "call_timeout" => {
            "The external tool did not answer within its server's timeout_s and was cancelled. Retry with smaller \
             inputs, or ask the user to raise timeout_s for that server."
        }
        "call_failed" => "The external server failed the request; read the message, fix the arguments or retry.",
        "resource_not_found" => "Call external_list_resources for the URIs the server offers.",
        _ => return None,
    })
}

fn server_arg(args: &Args) -> Option<&str> {
    args.get("server")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Waits (briefly) for servers still connecting at start-up, so a first listing is complete.
fn settle(ctx: &Ctx) {
    let m = &ctx.shared().upstream;
    m.wait_settled(m.timing().connect_timeout.min(MAX_SETTLE));
}

pub fn list_servers(ctx: &Ctx, _args: &Args) -> Result<Value, ApiError> {
    settle(ctx);
    let mut clients = api::clients(ctx.shared())?;
    // Each server's authorization state, flat, as the REST listing's `auth.state`.
    if let Some(servers) = clients["clients"].as_object_mut() {
        for s in servers.values_mut() {
            let state = s.pointer("/auth/state").cloned().unwrap_or(json!("none"));
            s["auth_state"] = state;
        }
    }
    Ok(json!({"servers": clients["clients"]}))
}

pub fn list_tools(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    settle(ctx);
    api::tools(ctx.shared(), server_arg(args))
}

pub fn call_tool(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let tool = args.get("tool").and_then(Value::as_str).unwrap_or("");
    let arguments = api::arguments_of(args)?;
    let called = call_forwarding_progress(ctx, tool, arguments)?;
    let is_error = called.result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut out = json!({
        "tool": called.tool,
        "server": called.server,
        "call_id": called.call_id,
        "result_cid": called.result_cid,
        "result_size": called.result_size,
        "is_error": is_error,
        "content": called.result.get("content").cloned().unwrap_or(json!([])),
        "truncated": false,
    });
    if let Some(sc) = called.result.get("structuredContent") {
        out["structured_content"] = sc.clone();
    }
    if called.result_size > AGENT_RESULT_LIMIT {
        cut(&mut out, AGENT_RESULT_LIMIT);
    }
    Ok(out)
}

/// Calls the tool; when our client asked for progress, on a helper thread while this thread
/// relays the external server's progress, scaled to the total the server gives.
fn call_forwarding_progress(
    ctx: &Ctx,
    tool: &str,
    arguments: Value,
) -> Result<api::Called, ApiError> {
    if !ctx.wants_progress() {
        // Nobody to relay progress to: call on this thread.
        return api::call(ctx.shared(), tool, arguments, Some(ctx.cancel), None);
    }
    let (progress_tx, progress_rx) = crossbeam_channel::unbounded::<Value>();
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let shared = ctx.shared();
    let cancel = ctx.cancel;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = done_tx.send(api::call(
                shared,
                tool,
                arguments,
                Some(cancel),
                Some(progress_tx),
            ));
        });
        // The progress channel disconnects when the call returns; then only the answer is left.
        while let Ok(p) = progress_rx.recv() {
            relay_progress(ctx, &p);
        }
        done_rx.recv().unwrap_or_else(|_| {
            Err(ApiError::new(
                502,
                "call_failed",
                "the call ended without an answer",
            ))
        })
    })
}

fn relay_progress(ctx: &Ctx, p: &Value) {
    if let Some(progress) = p.get("progress").and_then(Value::as_f64) {
        let total = p.get("total").and_then(Value::as_f64);
        let message = p.get("message").and_then(Value::as_str).unwrap_or("");
        ctx.progress(progress, total, message);
    }
}

/// Shrinks `out` so its content fits about `limit` bytes, saying what was cut.
fn cut(out: &mut Value, limit: usize) {
    let mut budget = limit;
    let mut items = Vec::new();
    if let Some(content) = out["content"].as_array() {
        for item in content {
            match item.get("text").and_then(Value::as_str) {
                Some(text) if text.len() > budget => {
                    let mut end = budget;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    let mut kept = item.clone();
                    kept["text"] = json!(format!(
                        "{}\n[… cut: {} of {} bytes shown]",
                        &text[..end],
                        end,
                        text.len()
                    ));
                    items.push(kept);
                    budget = 0;
                }
                Some(text) => {
                    budget -= text.len();
                    items.push(item.clone());
                }
                None => {
                    let size = item.to_string().len();
                    if size <= budget {
                        budget -= size;
                        items.push(item.clone());
                    } else {
                        let kind = item.get("type").and_then(Value::as_str).unwrap_or("item");
                        items.push(json!({"type": "text", "text": format!("[{kind} content of {size} bytes omitted]")}));
                    }
                }
            }
        }
    }
    out["content"] = Value::Array(items);
    if out
        .get("structured_content")
        .is_some_and(|s| s.to_string().len() > limit)
    {
        out.as_object_mut().map(|o| o.remove("structured_content"));
    }
    out["truncated"] = json!(true);
    out["note"] = json!(format!(
        "The result ({} bytes) was cut to about {limit} bytes for you. The full result is stored whole: \
         GET /api/objects/{}?data=true on the debugger's HTTP port returns it.",
        out["result_size"], out["result_cid"].as_str().unwrap_or("")
    ));
}

pub fn list_resources(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    settle(ctx);
    api::resources(ctx.shared(), server_arg(args))
}

pub fn read_resource(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    api::read_resource(ctx.shared(), args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_keeps_the_start_marks_the_cut_and_respects_char_boundaries() {
        let text = "é".repeat(40_000); // 80 000 bytes
        let mut out = json!({"content": [{"type": "text", "text": text}, {"type": "image", "data": "x".repeat(100)}],
            "result_size": 80_150, "result_cid": "abc", "truncated": false});
        cut(&mut out, 1001);
        let first = out["content"][0]["text"].as_str().unwrap();
        assert!(first.starts_with("éé"));
        assert!(
            first.contains("[… cut: 1000 of 80000 bytes shown]"),
            "{first}"
        );
        assert_eq!(
            out["content"][1]["text"],
            json!("[image content of 126 bytes omitted]")
        );
        assert_eq!(out["truncated"], true);
        assert!(out["note"].as_str().unwrap().contains("/api/objects/abc"));
    }
}
