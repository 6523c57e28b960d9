//! The operations on external MCP servers that the REST API and the MCP proxy tools share:
//! they take the shared state, reach the manager, record every tool call as a call record
//! (`source: "mcp_client"`) with its result in the content store, and answer JSON or an
//! [`ApiError`] carrying the design's error code and a fitting HTTP status.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cas;
use crate::error::ApiError;
use crate::events::EventKind;
use crate::ids;
use crate::records::Record;
use crate::state::Shared;
use crate::store::{Format, NewBlob};
use crate::upstream::config::parse_runtime;
use crate::upstream::manager::{CallFailure, CallOutcome, Manager};

use super::Obj;

/// The manager (always there: idle until a server is connected).
fn manager(shared: &Shared) -> &Manager {
    &shared.upstream
}

/// `GET /api/mcp-clients`.
pub fn clients(shared: &Shared) -> Result<Value, ApiError> {
    Ok(json!({"clients": manager(shared).servers()}))
}

/// `GET /api/mcp-tools`.
pub fn tools(shared: &Shared, server: Option<&str>) -> Result<Value, ApiError> {
    Ok(json!({"tools": manager(shared).tools(server)?}))
}

/// A tool call's answer: the server's result untouched, plus where it was recorded.
pub struct Called {
    pub call_id: String,
    pub server: String,
    pub tool: String,
    pub result: Value,
    pub result_cid: String,
    pub result_size: usize,
}

/// Calls a tool and records the call (whatever its outcome).
pub fn call(
    shared: &Shared,
    tool: &str,
    arguments: Value,
    cancel: Option<&crossbeam_channel::Receiver<()>>,
    progress: Option<crossbeam_channel::Sender<Value>>,
) -> Result<Called, ApiError> {
    let manager = manager(shared);
    let started_at = ids::now();
    let t0 = Instant::now();
    let outcome = manager.call_tool(tool, arguments.clone(), cancel, progress);
    let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let call_id = format!("mcp-{}", ids::uuid4());
    let mut record = json!({
        "call_id": call_id,
        "source": "mcp_client",
        "method_name": tool,
        "tool": tool,
        "arguments": arguments,
        "started_at": started_at,
        "completed_at": ids::now(),
        "duration_ms": duration_ms,
    });
    let mut blob = None;
    let answer = match outcome {
        Ok(CallOutcome {
            server,
            original_name,
            result,
        }) => {
            let bytes = serde_json::to_vec(&result).unwrap_or_default();
            let cid = cas::cid_value(&bytes);
            let size = bytes.len();
            let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
            record["server"] = json!(server);
            record["original_name"] = json!(original_name);
            record["tool"] = json!(crate::upstream::names::catalog_name(
                &server,
                &original_name
            ));
            record["status"] = json!(if is_error { "tool_error" } else { "success" });
            record["is_error"] = json!(is_error);
            record["error"] = Value::Null;
            record["result_cid"] = json!(cid);
            record["result_size"] = json!(size);
            record["pretty_result"] = json!(preview_content(&result));
            blob = Some(NewBlob {
                cid: cid.clone(),
                bytes,
                format: Some(Format::Json),
            });
            Ok(Called {
                call_id: call_id.clone(),
                tool: crate::upstream::names::catalog_name(&server, &original_name),
                server,
                result,
                result_cid: cid.hex(),
                result_size: size,
            })
        }
        Err(CallFailure {
            error,
            server,
            original_name,
            sent,
        }) => {
            record["server"] = json!(server);
            record["original_name"] = json!(original_name);
            record["status"] = json!(match error.code() {
                "call_timeout" => "timeout",
                "cancelled" => "cancelled",
                _ => "error",
            });
            record["is_error"] = json!(true);
            record["error"] = json!({"code": error.code(), "message": error.message()});
            record["reached_server"] = json!(sent);
            record["result_cid"] = Value::Null;
            Err(error.with("call_id", call_id.as_str()))
        }
    };
    store_record(shared, &call_id, tool, record, blob)?;
    answer
}

/// Stores the result blob and the call record (fsynced with a database), then announces it.
fn store_record(
    shared: &Shared,
    call_id: &str,
    tool: &str,
    record: Value,
    blob: Option<NewBlob>,
) -> Result<(), ApiError> {
    if let Some(b) = blob {
        shared.store.put_blobs(vec![b], ids::now()).map_err(|e| {
            log::error!("content store write failed: {e}");
            ApiError::storage(&e)
        })?;
    }
    let status = record["status"].as_str().unwrap_or("").to_owned();
    let stored = Record::Other(Arc::new(record));
    let event = EventKind::CallCompleted {
        call_id: call_id.to_owned(),
        method_name: tool.to_owned(),
        status,
        process_key: None,
    };
    super::keep_record(shared, shared.lock(), stored, None, event).map(|_| ())
}

/// The first text of a result, shortened, for listings.
fn preview_content(result: &Value) -> String {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .find_map(|i| i.get("text").and_then(Value::as_str))
        })
        .unwrap_or("");
    crate::upstream::peer::preview(text)
}

/// `POST /api/mcp-tools/call`: `{tool, arguments?}`.
pub fn call_rest(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let tool = match body.get("tool") {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request(
                "missing_tool",
                "tool is required: the catalog name server/tool (see GET /api/mcp-tools)",
            ))
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_tool",
                "tool must be a non-empty string such as \"server/tool\"",
            ))
        }
    };
    let arguments = arguments_of(body)?;
    let called = call(shared, &tool, arguments, None, None)?;
    Ok(json!({
        "result": called.result,
        "call_id": called.call_id,
        "server": called.server,
        "tool": called.tool,
        "result_cid": called.result_cid,
    }))
}

/// `arguments`: absent or null is `{}`; anything else must be an object.
pub fn arguments_of(body: &Obj) -> Result<Value, ApiError> {
    match body.get("arguments") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(ApiError::bad_request(
            "invalid_arguments",
            "arguments must be an object of the tool's parameters",
        )),
    }
}

/// `GET /api/mcp-resources`.
pub fn resources(shared: &Shared, server: Option<&str>) -> Result<Value, ApiError> {
    manager(shared).resources(server)
}

/// `POST /api/mcp-resources/read`: `{server, uri}`.
pub fn read_resource(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let server = required_str(body, "server")?;
    let uri = required_str(body, "uri")?;
    manager(shared).read_resource(server, uri)
}

fn required_str<'a>(body: &'a Obj, key: &str) -> Result<&'a str, ApiError> {
    match body.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(ApiError::bad_request(
            &format!("missing_{key}"),
            format!("{key} is required"),
        )),
        Some(_) => Err(ApiError::bad_request(
            &format!("invalid_{key}"),
            format!("{key} must be a string"),
        )),
    }
}

/// `POST /api/mcp-clients/connect`: a server entry plus `name`; never written to any file.
pub fn connect(shared: &Shared, body: &Obj) -> Result<Value, ApiError> {
    let manager = manager(shared);
    let env = |k: &str| std::env::var(k).ok();
    let config = parse_runtime(body, &env).map_err(|e| {
        ApiError::bad_request("invalid_config", e.to_string())
            .with("name", body.get("name").cloned().unwrap_or(Value::Null))
    })?;
    let name = config.name.clone();
    let tools = manager.connect(config)?;
    Ok(json!({"status": "ok", "name": name, "tools": tools}))
}

/// `POST /api/mcp-clients/<name>/disconnect`.
pub fn disconnect(shared: &Shared, name: &str) -> Result<Value, ApiError> {
    manager(shared).disconnect(name)?;
    Ok(json!({"status": "ok", "name": name}))
}

/// `POST /api/mcp-clients/<name>/reconnect`.
/// `POST /api/mcp-clients/{name}/authorize`: starts an MCP authorization.
pub fn authorize(shared: &Shared, name: &str) -> Result<Value, ApiError> {
    let url = manager(shared).authorize(name)?;
    Ok(json!({"name": name, "authorization_url": url}))
}

/// `GET /oauth/callback`: finishes an authorization and reconnects its server. The server's
/// name, or why it failed.
pub fn authorization_callback(
    shared: &Shared,
    query: &[(String, String)],
) -> Result<String, String> {
    let m = manager(shared);
    let name = m.auth().finish(query)?;
    if let Err(e) = m.reconnect(&name) {
        return Err(format!(
            "authorized, but reconnecting {name:?} failed: {}",
            e.message()
        ));
    }
    Ok(name)
}

pub fn reconnect(shared: &Shared, name: &str) -> Result<Value, ApiError> {
    let tools = manager(shared).reconnect(name)?;
    Ok(json!({"status": "ok", "name": name, "tools": tools}))
}
