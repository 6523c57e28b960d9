//! Prompts rendered from live state (`debug-session-start`, `inspect-paused-call`) and
//! `completion/complete`, which offers current pause ids, call ids and CIDs.

use serde_json::{json, Map, Value};

use crate::jsonrpc::RpcError;
use crate::records::{ClientEvents, RecordFilter};
use crate::service::{self, Payloads};
use crate::state::Shared;

/// `prompts/list`.
pub fn list() -> Vec<Value> {
    vec![
        json!({
            "name": "debug-session-start",
            "description": "Context for a debugging session: breakpoints, registered functions, recent calls and paused calls, with how to proceed.",
            "arguments": [],
        }),
        json!({
            "name": "inspect-paused-call",
            "description": "Everything about one paused call (function, arguments, call site, REPL sessions) and what can be done with it.",
            "arguments": [{"name": "pause_id", "description": "The paused call (see breakpoint_list_paused).", "required": true}],
        }),
    ]
}

fn message(description: &str, text: String) -> Value {
    json!({"description": description, "messages": [{"role": "user", "content": {"type": "text", "text": text}}]})
}

/// `prompts/get` under `version` (the session's revision: `debug-session-start` says how that
/// era hears of pauses).
pub fn get(shared: &Shared, params: &Map<String, Value>, version: &str) -> Result<Value, RpcError> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let args = params
        .get("arguments")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match name {
        "debug-session-start" => {
            let bp = service::breakpoints(shared);
            // A page of the registry (it may hold 100,000 functions): the agent lists the
            // rest with breakpoint_list_functions.
            let functions = service::functions_page(shared, 0, 100);
            // The program's recent calls, without the client's own events.
            let program = RecordFilter::default().with_client_events(ClientEvents::Hide);
            let recent = service::call_records(shared, &program, 0, 10);
            let paused = service::paused(shared, Payloads::Omitted).paused;
            let state = json!({
                "breakpoints": {"breakpoints": bp.breakpoints, "behaviors": bp.breakpoint_behaviors,
                                "after_behaviors": bp.breakpoint_after_behaviors, "replacements": bp.breakpoint_replacements},
                "functions": {"functions": functions.functions, "signatures": functions.function_signatures,
                              "total": functions.total},
                "recent_calls": recent.calls,
                "paused": paused,
            });
            let text = format!(
                "You are debugging a running Python program through the CID el Dill breakpoint server. \
Wrapped functions pause before they run and after they return, depending on breakpoint behaviors. \
Use breakpoint_wait_for_pause to wait for a pause, breakpoint_inspect_object and breakpoint_repl_eval to look inside it, \
and breakpoint_continue to resume it (continue, modified arguments, a fake result or an exception). \
{}\n\n\
Current state:\n{}",
                super::hearing_of_pauses(version),
                serde_json::to_string_pretty(&state).unwrap_or_default()
            );
            Ok(message("The current debugging session", text))
        }
        "inspect-paused-call" => {
            let pause_id = args
                .get("pause_id")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .ok_or_else(|| RpcError::invalid_params("missing required argument pause_id"))?;
            let p = service::pause(shared, pause_id, Payloads::Omitted).ok_or_else(|| {
                RpcError::invalid_params(format!("pause_not_found: no paused call {pause_id}"))
                    .with_data(json!({"pause_id": pause_id}))
            })?;
            let after = p.is_after();
            let doc = json!({"pause_id": pause_id, "call_data": p.call_data, "repl_sessions": p.repl_sessions});
            let text = format!(
                "Inspect this paused call of {}. It is paused {}. Look at its arguments (pretty_args, pretty_kwargs; \
CIDs can be opened with breakpoint_inspect_object), evaluate expressions in it with breakpoint_repl_eval (pause_id {pause_id}), \
then resume it with breakpoint_continue{}.\n\n{}",
                p.call_data
                    .get("method_name")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                if after { "after the call completed (see pretty_result or exception)" } else { "before the call runs" },
                if after { " (only action 'continue' is possible here)" } else { "" },
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            );
            Ok(message("A paused call", text))
        }
        other => Err(RpcError::invalid_params(format!("unknown prompt: {other}"))),
    }
}

/// `completion/complete`: current pause ids for `pause_id`, call ids and CIDs for the templates.
pub fn complete(shared: &Shared, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let argument = params.get("argument").cloned().unwrap_or(Value::Null);
    let arg_name = argument.get("name").and_then(Value::as_str).unwrap_or("");
    let prefix = argument.get("value").and_then(Value::as_str).unwrap_or("");
    let candidates: Vec<String> = match (reference.get("type").and_then(Value::as_str), arg_name) {
        (Some("ref/prompt"), "pause_id") | (Some("ref/resource"), "pause_id") => {
            service::paused_ids(shared)
        }
        (Some("ref/resource"), "call_id") => {
            service::call_records(shared, &RecordFilter::default(), 0, 100).call_ids()
        }
        (Some("ref/resource"), "cid") => service::objects(shared, 0, 1000)
            .objects
            .into_iter()
            .map(|m| m.cid.hex())
            .collect(),
        (Some("ref/prompt" | "ref/resource"), _) => Vec::new(),
        _ => {
            return Err(RpcError::invalid_params(
                "ref must be {type: ref/prompt | ref/resource, ...}",
            ))
        }
    };
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    let total = matching.len();
    let values: Vec<String> = matching.into_iter().take(100).collect();
    Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > 100}}))
}
