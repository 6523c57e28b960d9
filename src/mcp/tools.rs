//! THE tool table: every MCP tool as one `Tool` (name, title, description for an LLM with
//! when-to-use guidance, input schema with examples, output schema, annotations, the longest it
//! may block, handler). `tools/list`, argument validation and the tool reference of docs/mcp.md are
//! generated from it. Handlers are thin: they call `service` (never the state lock or the
//! content store) and shape JSON from its typed results; they never see a transport. Results
//! never carry base64 payloads: items keep their CID and rendered value. The `external_*`
//! entries call `external.rs`, which knows nothing of this table.
//!
//! Long file: the table and its handlers (named like their tools) are read and changed
//! together, one tool at a time: its entry, its schemas and its handler in one file, with the
//! table's invariant tests (and the tool count) at its end.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{external, Ctx};
use crate::breakpoints::{After, Before, Global};
use crate::error::ApiError;
use crate::events::EventKind;
use crate::jsonrpc::RpcError;
use crate::limits::{MAX_BLOCK_S, MAX_BREAKPOINTS_PER_REQUEST, MAX_PAGE_LIMIT};
use crate::pretty;
use crate::records::ClientEvents;
use crate::resolution::Actor;
use crate::schema;
use crate::service::{self, Payloads, Signature};

type Args = Map<String, Value>;
type Handler = fn(&Ctx, &Args) -> Result<Value, ApiError>;

/// A tool failure: an `ApiError` with the status its REST twin would have (tool errors only
/// ever travel as `isError` results, so the status is never sent) and a hint for the agent.
fn tool_error(code: &str, message: impl Into<String>, hint: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message).with_hint(hint)
}

fn cancelled() -> ApiError {
    tool_error("cancelled", "the request was cancelled", "")
}

/// What an agent should do next after an error, by code.
fn hint_for(code: &str) -> &'static str {
    match code {
        "pause_not_found" | "pause_resumed" | "invalid_pause" => {
            "Call breakpoint_list_paused for the current pause ids, or breakpoint_wait_for_pause to wait for the next pause."
        }
        "pause_already_resumed" => "That pause was already resumed; call breakpoint_list_paused for the current pauses.",
        "breakpoint_not_found" => "Add the breakpoint first with breakpoint_add; breakpoint_list_breakpoints shows the existing ones.",
        "signature_mismatch" => {
            "A replacement must have the same signature as the function; compare signatures with breakpoint_list_functions."
        }
        "invalid_action" => {
            "At a pause after the call completed (call_data has pretty_result) only action 'continue' is possible; \
             before a call: continue, modify, skip, raise or replace."
        }
        "program_gone" => {
            "The paused program stopped polling (it was probably killed): nothing can run in it. \
             Remove its pause with breakpoint_continue action dismiss."
        }
        "program_not_gone" => "Its program still polls: resume the pause with breakpoint_continue instead.",
        "invalid_exception_type" => "Use a builtin exception name such as ValueError, KeyError or RuntimeError.",
        "cid_not_found" => "CIDs appear in the items of breakpoint_list_paused and breakpoint_get_call_records.",
        "eval_timeout" => {
            "The program did not answer in time: it evaluates only while the call is paused and its client polls. \
             Check breakpoint_list_paused, then retry with a larger timeout_s (at most 55)."
        }
        "session_not_found" | "session_closed" | "invalid_session_id" => {
            "Omit session_id to open a new REPL session on a current pause."
        }
        "missing_expr" | "missing_expression" => "Pass a non-blank Python expression or statement in expression.",
        "invalid_payload" => "modified_args must be a list and modified_kwargs an object of plain JSON values or items.",
        "invalid_source" => "source is program or mcp_client; omit it for records of every source.",
        "invalid_client_events" => "client_events is hide (the default), show or only.",
        "no_live_program" | "replay_not_run" => {
            "Pause a call of that program (breakpoint_add on the function, then breakpoint_wait_for_pause), \
             then replay while it is paused."
        }
        "run_paused" => "Resume the paused call (breakpoint_continue with the pause_id named), then delete the run.",
        "invalid_args" | "invalid_kwargs" => {
            "Give arguments as JSON values; a stored object that is not a plain value (an instance) cannot be replayed."
        }
        _ => external::hint_for(code)
            .unwrap_or("Check the arguments against the tool's input schema."),
    }
}

/// The tool with this name.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// A tool's input schema, built once (calls validate against it every time).
fn input_schema(tool: &Tool) -> &'static Value {
    static SCHEMAS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| TOOLS.iter().map(|t| (t.input_schema)()).collect());
    let i = TOOLS
        .iter()
        .position(|t| t.name == tool.name)
        .expect("a tool of the table");
    &schemas[i]
}

/// One tool.
pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    pub read_only: bool,
    /// It removes recorded data for good (`destructiveHint`).
    pub destructive: bool,
    pub idempotent: bool,
    /// The longest the tool may block, in seconds (0: it answers at once).
    pub max_block_s: f64,
    pub handler: Handler,
}

impl Tool {
    /// The `tools/list` entry for a negotiated revision.
    pub fn describe(&self, version: &str) -> Value {
        let mut t = json!({"name": self.name, "description": self.description, "inputSchema": (self.input_schema)()});
        if super::version::has_structured_output(version) {
            t["title"] = json!(self.title);
            t["outputSchema"] = (self.output_schema)();
        }
        if super::version::has_annotations(version) {
            t["annotations"] = json!({
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                "openWorldHint": self.name.starts_with("external_"),
            });
        }
        t
    }
}

/// `tools/call`.
pub fn call(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("name is required"))?;
    let Some(tool) = find(name) else {
        return Err(RpcError::invalid_params(format!("unknown tool: {name}")));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Ok(error_result(&tool_error(
                "invalid_arguments",
                "arguments must be an object",
                hint_for(""),
            )))
        }
    };
    let errors = schema::validate(input_schema(tool), &Value::Object(args.clone()));
    if !errors.is_empty() {
        let message = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let hint =
            format!("Fix the arguments and call {name} again; its input schema is in tools/list.");
        let mut e = tool_error(argument_error_code(&errors), message, hint);
        if let [only] = errors.as_slice() {
            if !only.path.is_empty() && !only.path.contains(['.', '[']) {
                e = e.with("parameter", json!(only.path));
            }
        }
        return Ok(error_result(&e));
    }
    let version = ctx.version();
    match (tool.handler)(ctx, &args) {
        Ok(v) => {
            let mut out =
                json!({"content": [{"type": "text", "text": v.to_string()}], "isError": false});
            if super::version::has_structured_output(version) {
                out["structuredContent"] = v;
            }
            Ok(out)
        }
        Err(e) if answered_not_found(tool.name, e.code()) => Ok(not_found_result(&e, version)),
        Err(e) => Ok(error_result(&e)),
    }
}

/// The code of arguments that do not fit the input schema: the original's codes where its
/// tests pin one (a missing required parameter is `missing_parameter`, a bad `limit`
/// `invalid_limit`, as REST says too), else `invalid_arguments`.
fn argument_error_code(errors: &[schema::SchemaError]) -> &'static str {
    if errors.iter().all(|e| e.path == "limit") {
        "invalid_limit"
    } else if errors.iter().all(|e| {
        !e.path.contains(['.', '[']) && e.message.starts_with("required parameter is missing")
    }) {
        "missing_parameter"
    } else {
        "invalid_arguments"
    }
}

/// Lookups by id that the original server answers as a plain result (`isError: false`) whose
/// JSON names the error: `breakpoint_continue` of an unknown pause, `breakpoint_inspect_object`
/// of an unknown CID. Every other failure is an `isError` result.
fn answered_not_found(tool: &str, code: &str) -> bool {
    matches!(
        (tool, code),
        ("breakpoint_continue", "pause_not_found") | ("breakpoint_inspect_object", "cid_not_found")
    )
}

/// The error JSON of [`error_result`] as a normal result (`isError: false`), with
/// `structuredContent` in the revisions that have it: the output schemas allow an `error` key.
fn not_found_result(e: &ApiError, version: &str) -> Value {
    let body = error_body(e);
    let mut out =
        json!({"content": [{"type": "text", "text": body.to_string()}], "isError": false});
    if super::version::has_structured_output(version) {
        out["structuredContent"] = body;
    }
    out
}

/// An `isError` result whose text is `{"error", "message", "hint", ...the error's other fields}`.
fn error_result(e: &ApiError) -> Value {
    let text = error_body(e).to_string();
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// `{"error", "message", "hint", ...the error's other fields}`.
fn error_body(e: &ApiError) -> Value {
    let mut m = Map::new();
    m.insert("error".into(), json!(e.code()));
    m.insert("message".into(), json!(e.message()));
    let hint = e.hint.as_deref().unwrap_or_else(|| hint_for(e.code()));
    m.insert("hint".into(), json!(hint));
    for (k, v) in &e.body {
        if !matches!(k.as_str(), "error" | "message") {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

fn str_arg<'a>(args: &'a Args, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A required string argument that must not be blank (the schema has checked its type).
fn required<'a>(args: &'a Args, key: &str) -> Result<&'a str, ApiError> {
    match str_arg(args, key) {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(tool_error(
            "missing_parameter",
            format!("{key} must be a non-blank string"),
            "Pass a non-blank value for it.",
        )
        .with("parameter", json!(key))),
    }
}

// ---------------------------------------------------------------------------------------------
// Schemas.

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn fn_and_behavior(values: &str, example: &str) -> Value {
    json!({
        "type": "object",
        "required": ["function_name", "behavior"],
        "properties": {
            "function_name": {"type": "string", "description": "Function (breakpoint) name, as listed by breakpoint_list_breakpoints.", "examples": ["add"]},
            "behavior": {"type": "string", "description": values, "examples": [example]},
        },
    })
}

fn fn_behavior_out() -> Value {
    json!({"type": "object", "required": ["status", "function_name", "behavior"], "properties": {
        "status": {"const": "ok"}, "function_name": {"type": "string"}, "behavior": {"type": "string"}}})
}

fn pause_out() -> Value {
    json!({
        "type": "object",
        "required": ["id", "when", "call_data", "paused_at", "repl_sessions", "last_poll_at", "gone"],
        "properties": {
            "id": {"type": "string"},
            "when": {"enum": ["before", "after"]},
            "call_data": {"type": "object", "required": ["method_name"], "properties": {"method_name": {"type": "string"}}},
            "paused_at": {"type": "number"},
            "repl_sessions": {"type": "array", "items": {"type": "string"}},
            "last_poll_at": {"type": "number", "description": "When its program last polled (epoch seconds)."},
            "gone": {"type": "boolean", "description": "Its program stopped polling (probably killed): dismiss it with breakpoint_continue action dismiss."},
        },
    })
}

fn call_records_out() -> Value {
    json!({"type": "object", "required": ["calls", "total_count", "truncated"], "properties": {
        "calls": {"type": "array", "items": {"type": "object", "required": ["call_id", "method_name", "status"]}},
        "total_count": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean"},
        "scanned": {"type": "integer", "minimum": 0},
        "search_truncated": {"type": "boolean"},
        "client_events_hidden": {"type": "integer", "minimum": 0}}})
}

fn compare_runs_out() -> Value {
    let marks = json!({"type": "array", "items": {"enum": ["same", "different_arguments", "different_result", "different_exception", "only_in_a", "only_in_b"]}});
    let value = json!({"type": "object", "required": ["cid", "shown"], "properties": {
        "name": {"type": ["string", "null"]}, "cid": {"type": ["string", "null"]}, "shown": {}}});
    let call = json!({"anyOf": [{"type": "null"}, {"type": "object",
        "required": ["call_id", "function", "depth", "status", "args", "result", "exception"], "properties": {
        "call_id": {"type": "string"}, "function": {"type": "string"}, "depth": {"type": "integer", "minimum": 0},
        "status": {"type": "string"}, "args": {"type": "array", "items": value},
        "result": {"anyOf": [{"type": "null"}, value]}, "exception": {"anyOf": [{"type": "null"}, value]}}}]});
    let side = json!({"type": "object", "required": ["run_id", "calls", "compared"], "properties": {
        "run_id": {"type": "string"}, "script": {"type": ["string", "null"]}, "page_url": {"type": ["string", "null"]},
        "calls": {"type": "integer", "minimum": 0}, "compared": {"type": "integer", "minimum": 0}}});
    let count = json!({"type": "integer", "minimum": 0});
    json!({"type": "object",
        "required": ["a", "b", "truncated", "total_pairs", "offset", "limit", "counts", "first_divergence", "pairs"],
        "properties": {
        "a": side, "b": side, "truncated": {"type": "boolean"}, "total_pairs": count, "offset": count, "limit": count,
        "counts": {"type": "object", "required": ["same", "different_arguments", "different_result", "different_exception", "only_in_a", "only_in_b"],
            "properties": {"same": count, "different_arguments": count, "different_result": count,
            "different_exception": count, "only_in_a": count, "only_in_b": count}},
        "first_divergence": {"anyOf": [{"type": "null"}, {"type": "object", "required": ["index", "function", "marks"],
            "properties": {"index": count, "function": {"type": "string"}, "marks": marks}}]},
        "pairs": {"type": "array", "items": {"type": "object", "required": ["index", "function", "marks", "a", "b"], "properties": {
            "index": count, "function": {"type": "string"}, "marks": marks, "a": call, "b": call}}}}})
}

/// Every tool, in the order of the reference in docs/mcp.md.
pub static TOOLS: &[Tool] = &[
    Tool {
        name: "breakpoint_list_breakpoints",
        title: "List breakpoints",
        description: "List every breakpoint with its before-behavior (stop, go, yield = use the global default), \
after-behavior (stop, go, exception, stop_exception, yield), replacement function, and the options of conditional \
breakpoints: condition, hit condition, log message (logpoints), one-shot flag and hit count, whether each is switched \
on (enabled), and the master switch (pausing: while false nothing pauses). Use it to see what will pause. The \
instrumented program creates a breakpoint for every function it wraps.",
        input_schema: no_args,
        output_schema: || json!({"type": "object", "required": ["breakpoints", "behaviors", "after_behaviors", "replacements", "conditions", "hit_conditions", "log_messages", "one_shot", "hit_counts", "enabled", "pausing"], "properties": {
            "breakpoints": {"type": "array", "items": {"type": "string"}},
            "behaviors": {"type": "object"}, "after_behaviors": {"type": "object"}, "replacements": {"type": "object"},
            "conditions": {"type": "object"}, "hit_conditions": {"type": "object"}, "log_messages": {"type": "object"},
            "one_shot": {"type": "array", "items": {"type": "string"}}, "hit_counts": {"type": "object"},
            "enabled": {"type": "object", "additionalProperties": {"type": "boolean"}}, "pausing": {"type": "boolean"}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_list_breakpoints,
    },
    Tool {
        name: "breakpoint_add",
        title: "Add or change a breakpoint",
        description: "Add a breakpoint on a function by name (idempotent), or change the options of an existing one. \
Calls of that function then follow its behavior: 'stop' pauses before the call, 'go' runs it, 'yield' (default) uses \
the global default behavior, which starts as 'stop'. The name is the wrapped function's name or alias as the program \
reports it (see breakpoint_list_functions). To find the one call that matters without pausing the others, give a \
condition: it is evaluated on the server from the call's arguments (never by running code in the program), and calls \
for which it does not hold run without waiting, before and after. A condition that reads result or exception is \
decided when the call returns (it then pauses after the call). hit_condition pauses only on the Nth counted call ('5'), \
after it ('>5') or on every Nth ('%5'). log_message turns the breakpoint into a logpoint: each hit writes a line \
(notifications/breakpoint/log, call records, web UI) and the program never waits. Options left out stay as they are; \
pass \"\" to clear one. A condition that does not parse is an error naming the column of the mistake. To add \
several at once, pass breakpoints: a list of such argument objects (1 to 1000); the answer then has results, one per \
item in order: the breakpoint as a single add answers it, or an error object with its index.",
        input_schema: || json!({"type": "object", "properties": {
            "function_name": {"type": "string", "description": "Function name to break on (required unless breakpoints is given).", "examples": ["add"]},
            "breakpoints": {"type": "array", "minItems": 1, "maxItems": MAX_BREAKPOINTS_PER_REQUEST, "description": "Several breakpoints at once: each item takes the arguments of a single add (function_name, behavior, condition, ...).",
                "items": {"type": "object", "required": ["function_name"], "properties": {"function_name": {"type": "string"}}},
                "examples": [[{"function_name": "load"}, {"function_name": "save", "condition": "args[0] > 1"}]]},
            "behavior": {"type": "string", "description": "stop, go or yield (default yield).", "examples": ["stop"]},
            "condition": {"type": "string", "description": "Pause only when this holds. Python-like: args[i], \
kwargs['name'], result, exception (type name), literals, == != < <= > >= in, not in, is None, and/or/not, + - * / // %, \
.attr, [index], len(), type(x) (class name), abs(), s.startswith(p), s.endswith(p), s.contains(p). \"\" clears it.",
                "examples": ["kwargs['label'].startswith('item-00') and args[0] % 2 == 1", "result is None", "exception == 'ValueError'"]},
            "hit_condition": {"type": "string", "description": "Which counted calls (those whose condition holds) are hits: \
'5' the 5th, '>5' after the 5th, '>=5', '%5' every 5th. \"\" clears it.", "examples": ["%10"]},
            "log_message": {"type": "string", "description": "Log instead of pausing: text with {expression} parts \
({{ and }} are literal braces). \"\" clears it.", "examples": ["scale={kwargs['scale']} -> {result}"]},
            "one_shot": {"type": "boolean", "description": "After its first pause, the breakpoint switches to go before and after (it stays listed)."},
            "reset_hits": {"type": "boolean", "description": "Start the hit count again from 0."}}}),
        output_schema: || json!({"type": "object",
            "anyOf": [{"required": ["status", "function_name", "condition", "hit_condition", "log_message", "one_shot", "hit_count"]}, {"required": ["results"]}],
            "properties": {
            "status": {"const": "ok"}, "function_name": {"type": "string"},
            "condition": {"type": ["string", "null"]}, "hit_condition": {"type": ["string", "null"]},
            "log_message": {"type": ["string", "null"]}, "one_shot": {"type": "boolean"},
            "hit_count": {"type": "integer", "minimum": 0},
            "results": {"type": "array", "items": {"type": "object", "anyOf": [{"required": ["status", "function_name"]}, {"required": ["error", "index"]}]}}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_add,
    },
    Tool {
        name: "breakpoint_remove",
        title: "Remove a breakpoint",
        description: "Remove a breakpoint with its behaviors and replacement. Removing an unknown name succeeds. \
Note that the program re-creates the breakpoint when it wraps the function again.",
        input_schema: || json!({"type": "object", "required": ["function_name"], "properties": {
            "function_name": {"type": "string", "description": "Function name.", "examples": ["add"]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "function_name"], "properties": {
            "status": {"const": "ok"}, "function_name": {"type": "string"}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_remove,
    },
    Tool {
        name: "breakpoint_set_behavior",
        title: "Set a breakpoint's before-behavior",
        description: "Set whether calls of one function pause before running: 'stop' pauses, 'go' runs, 'yield' uses \
the global default. Aliases: continue = go, defer/default = yield.",
        input_schema: || fn_and_behavior("stop, go or yield", "stop"),
        output_schema: fn_behavior_out,
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_behavior,
    },
    Tool {
        name: "breakpoint_set_after_behavior",
        title: "Set a breakpoint's after-behavior",
        description: "Set whether calls of one function pause after they return: 'stop' after successful calls, \
'exception' after calls that raise, 'stop_exception' after both, 'go' never, 'yield' uses the global default.",
        input_schema: || fn_and_behavior("stop, go, exception, stop_exception or yield", "exception"),
        output_schema: fn_behavior_out,
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_after_behavior,
    },
    Tool {
        name: "breakpoint_set_replacement",
        title: "Replace a function",
        description: "Make calls of a function run another wrapped function of the program instead (same signature \
required, see breakpoint_list_functions). An empty replacement_function clears it. It applies when the call does not pause.",
        input_schema: || json!({"type": "object", "required": ["function_name", "replacement_function"], "properties": {
            "function_name": {"type": "string", "examples": ["slow_add"]},
            "replacement_function": {"type": "string", "description": "Function to run instead, or \"\" to clear.", "examples": ["fast_add"]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "function_name", "replacement_function"], "properties": {
            "status": {"const": "ok"}, "function_name": {"type": "string"}, "replacement_function": {"type": "string"}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_replacement,
    },
    Tool {
        name: "breakpoint_set_enabled",
        title: "Switch a breakpoint on or off",
        description: "Switch one breakpoint off (enabled false) or on again. A breakpoint switched off keeps every \
setting (behaviors, condition, hit condition, log message, replacement, hit count), but calls of its function run as if \
it had none: no pause, no log line, no replacement, and no count. Use it to silence a breakpoint for a while without \
losing how it was set up; to stop every pause at once, use breakpoint_set_pausing.",
        input_schema: || json!({"type": "object", "required": ["function_name", "enabled"], "properties": {
            "function_name": {"type": "string", "description": "Function (breakpoint) name, as listed by breakpoint_list_breakpoints.", "examples": ["add"]},
            "enabled": {"type": "boolean", "description": "true switches it on, false off.", "examples": [false]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "function_name", "enabled"], "properties": {
            "status": {"const": "ok"}, "function_name": {"type": "string"}, "enabled": {"type": "boolean"}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_enabled,
    },
    Tool {
        name: "breakpoint_set_pausing",
        title: "Turn pausing on or off",
        description: "The master switch. With pausing false no call pauses, whatever the breakpoints and the global \
default behavior say; every breakpoint keeps its settings, logpoints still log, replacements still apply, and calls \
paused already stay paused (resume them with breakpoint_continue_all). Use it to let a program run freely for a while; \
pausing true restores every breakpoint as it was. breakpoint_list_breakpoints shows the switch as pausing.",
        input_schema: || json!({"type": "object", "required": ["pausing"], "properties": {
            "pausing": {"type": "boolean", "description": "false: nothing pauses; true: breakpoints pause again.", "examples": [false]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "pausing"], "properties": {
            "status": {"const": "ok"}, "pausing": {"type": "boolean"}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_pausing,
    },
    Tool {
        name: "breakpoint_get_default_behavior",
        title: "Get the global default behavior",
        description: "The global default behavior used by breakpoints whose behavior is 'yield': stop (pause before and \
after calls), go, exception (pause only after calls that raise), stop_exception.",
        input_schema: no_args,
        output_schema: || json!({"type": "object", "required": ["behavior"], "properties": {"behavior": {"enum": ["stop", "go", "exception", "stop_exception"]}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_get_default_behavior,
    },
    Tool {
        name: "breakpoint_set_default_behavior",
        title: "Set the global default behavior",
        description: "Set the global default: 'stop' pauses every breakpointed call before and after, 'go' lets \
everything run, 'exception' pauses only after calls that raise, 'stop_exception' does both. Use 'go' to let a program run \
freely, 'exception' to catch failures.",
        input_schema: || json!({"type": "object", "required": ["behavior"], "properties": {
            "behavior": {"type": "string", "description": "stop, go, exception or stop_exception", "examples": ["go"]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "behavior"], "properties": {
            "status": {"const": "ok"}, "behavior": {"enum": ["stop", "go", "exception", "stop_exception"]}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_set_default_behavior,
    },
    Tool {
        name: "breakpoint_list_paused",
        title: "List paused calls",
        description: "List the calls paused right now, with their call data: method_name, pretty_args and \
pretty_kwargs (rendered argument values), args/kwargs items with their CIDs (inspect them with breakpoint_inspect_object), \
signature, call_site stack, and for pauses after the call completed pretty_result or exception. Use the id with \
breakpoint_continue and breakpoint_repl_eval.",
        input_schema: no_args,
        output_schema: || json!({"type": "object", "required": ["paused"], "properties": {"paused": {"type": "array", "items": pause_out()}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_list_paused,
    },
    Tool {
        name: "breakpoint_continue",
        title: "Resume a paused call",
        description: "Resume a paused call. Actions: 'continue' (run as is); modified_args / modified_kwargs (run \
with these plain JSON values instead; the list you omit keeps the original arguments); fake_result (skip the call and \
return this value); exception_type + exception_message (raise a builtin exception such as ValueError); \
replacement_function (run another wrapped function). At a pause after the call completed (call_data has pretty_result) \
only 'continue' is possible. 'dismiss' removes the pause of a program that stopped polling (gone: true in \
breakpoint_list_paused), with that program's other gone pauses (dismissed lists them). An unknown pause_id is answered (not as an error result) with {\"error\": \"pause_not_found\", \
\"pause_id\", \"message\", \"hint\"}, as the original server does.",
        input_schema: || json!({"type": "object", "required": ["pause_id"], "properties": {
            "pause_id": {"type": "string", "description": "Id from breakpoint_list_paused or breakpoint_wait_for_pause."},
            "action": {"type": "string", "description": "continue (default), modify, skip, raise, replace or dismiss (a gone program's pause); inferred from the other arguments when omitted.", "examples": ["continue"]},
            "modified_args": {"type": "array", "description": "Positional arguments to use instead (plain JSON values).", "examples": [[10, "x"]]},
            "modified_kwargs": {"type": "object", "description": "Keyword arguments to use instead.", "examples": [{"y": 20}]},
            "fake_result": {"description": "Return value to use without running the call (action skip).", "examples": [42]},
            "exception_type": {"type": "string", "description": "Builtin exception to raise (action raise).", "examples": ["ValueError"]},
            "exception_message": {"type": "string", "examples": ["injected by the debugger"]},
            "replacement_function": {"type": "string", "description": "Wrapped function to run instead (action replace)."}}}),
        // Resumed, or the original's answer for an unknown pause (`not_found_result`).
        output_schema: || json!({"type": "object",
            "anyOf": [{"required": ["status", "pause_id", "action"]}, {"required": ["error", "pause_id", "message"]}],
            "properties": {
            "status": {"const": "ok"}, "pause_id": {"type": "string"}, "action": {"type": "string"},
            "error": {"const": "pause_not_found"}, "message": {"type": "string"}, "hint": {"type": "string"},
            "dismissed": {"type": "array", "items": {"type": "string"}}}}),
        read_only: false,
        destructive: false,
        idempotent: false,
        max_block_s: 0.0,
        handler: breakpoint_continue,
    },
    Tool {
        name: "breakpoint_continue_all",
        title: "Resume every paused call",
        description: "Resume every current pause with 'continue' (before-pauses run the call as is, after-pauses \
return its result). Returns the pause ids resumed.",
        input_schema: || json!({"type": "object", "properties": {}}),
        output_schema: || json!({"type": "object", "required": ["status", "resumed"], "properties": {
            "status": {"const": "ok"}, "resumed": {"type": "array", "items": {"type": "string"}}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: |ctx, _| out(service::continue_all(ctx.shared())),
    },
    Tool {
        name: "breakpoint_list_functions",
        title: "List registered functions",
        description: "Functions the program has wrapped, with signatures and metadata, by name, a page at a time \
(total says how many there are). Use it to pick replacement functions (same signature) and breakpoint names.",
        input_schema: || json!({"type": "object", "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 100, "description": "At most this many functions."},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Functions to skip, by name."}}}),
        output_schema: || json!({"type": "object", "required": ["functions", "signatures", "metadata", "total"], "properties": {
            "functions": {"type": "array", "items": {"type": "string"}}, "signatures": {"type": "object"}, "metadata": {"type": "object"},
            "total": {"type": "integer"}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_list_functions,
    },
    Tool {
        name: "breakpoint_get_call_records",
        title: "Get call records",
        description: "Completed calls and client events, newest first: method, status, rendered arguments and \
result or exception, timings. total_count says how many matched and truncated whether more exist than returned. \
The client's own events (registrations, its internal attribute probes) are hidden unless client_events is show or \
only; client_events_hidden counts them. \
The filters are those of GET /api/call-records; a process or search filter reads records one by one for at most \
1.5 s, and then scanned and search_truncated say how far it got.",
        input_schema: || json!({"type": "object", "properties": {
            "function_name": {"type": "string", "description": "Only calls of this function.", "examples": ["add"]},
            "status": {"type": "string", "description": "Only records with this status (success, exception, event, ...).", "examples": ["exception"]},
            "process": {"type": "string", "description": "Only this process: its process_key or its pid.", "examples": ["16759"]},
            "source": {"type": "string", "description": "program (the debugged program's calls and events) or mcp_client (the server's calls to external MCP servers).", "examples": ["program"]},
            "search": {"type": "string", "description": "Text in the rendered arguments, keyword arguments, result or exception, in any case.", "examples": ["zero"]},
            "client_events": {"enum": ["hide", "show", "only"], "default": "hide", "description": "The client's own events (its with_debug.register registrations and _cideldill_alias_name attribute probes, marked client_event: true): hidden by default (client_events_hidden counts them), show to list them with the program's calls, only for nothing else."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 100, "description": "At most this many records."}}}),
        output_schema: call_records_out,
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_get_call_records,
    },
    Tool {
        name: "breakpoint_compare_runs",
        title: "Compare two runs",
        description: "Compare two runs of the program side by side. A run is what one process recorded; its id is the \
process_key (from the process_key of breakpoint_get_call_records' records). The calls of each run, in call-tree order \
without the client's own events, are aligned by function and depth, so an inserted or missing call shifts nothing else; \
each aligned pair is marked same, different_arguments, different_result, different_exception (one or several), \
only_in_a or only_in_b, comparing the CIDs of the stored values (placeholders of unpicklable objects with their memory addresses left out). first_divergence names the first pair that is not \
same; counts covers every pair; pairs is one page (offset, limit). Use it to find where a failing run departs from a \
good one; open a value with breakpoint_inspect_object and its cid. At most 1,000 calls of each run are compared \
(truncated says when a run has more).",
        input_schema: || json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "string", "description": "The first run's process_key.", "examples": ["1795311683.500000+4242"]},
            "b": {"type": "string", "description": "The second run's process_key.", "examples": ["1795311690.250000+4250"]},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Aligned pairs to skip."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 100, "description": "At most this many aligned pairs."}}}),
        output_schema: compare_runs_out,
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_compare_runs,
    },
    Tool {
        name: "breakpoint_list_runs",
        title: "List runs",
        description: "List the runs, newest first. A run is what one process of the program recorded from its first \
call to its last; run_id is its process key (pass it as process to breakpoint_get_call_records for its calls). Each has \
its program (script name), pid, start and end (seconds since the epoch), calls, events, client_events (the client's \
own), exceptions (calls that raised), and the label and \
notes a person or agent gave it (breakpoint_label_run). Use it to find a run again (a baseline, a failing one) before \
comparing or inspecting it.",
        input_schema: || json!({"type": "object", "properties": {
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Runs to skip."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 100, "description": "At most this many runs."}}}),
        output_schema: || json!({"type": "object", "required": ["runs", "total", "offset", "limit"], "properties": {
            "runs": {"type": "array", "items": {"type": "object", "required": ["run_id", "program", "pid", "start", "end", "calls", "events", "client_events", "exceptions", "label", "notes"], "properties": {
                "run_id": {"type": "string"}, "program": {"type": ["string", "null"]}, "page_url": {"type": ["string", "null"]},
                "pid": {"type": "integer"}, "start": {"type": "number"}, "end": {"type": "number"},
                "calls": {"type": "integer", "minimum": 0}, "events": {"type": "integer", "minimum": 0},
                "client_events": {"type": "integer", "minimum": 0},
                "exceptions": {"type": "integer", "minimum": 0}, "label": {"type": "string"}, "notes": {"type": "string"}}}},
            "total": {"type": "integer", "minimum": 0}, "offset": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 0}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_list_runs,
    },
    Tool {
        name: "breakpoint_label_run",
        title: "Label a run or write notes on it",
        description: "Give a run (run_id from breakpoint_list_runs) a label, notes, or both; an argument left out \
stays as it is and \"\" clears it. A label is one line of at most 200 characters, notes at most 10,000. They are kept \
with the database and shown in the web UI's Runs page and the run's call tree.",
        input_schema: || json!({"type": "object", "required": ["run_id"], "properties": {
            "run_id": {"type": "string", "description": "The run's id (its process key).", "examples": ["1795311683.7211661+16759"]},
            "label": {"type": "string", "description": "One line; \"\" clears it.", "examples": ["baseline"]},
            "notes": {"type": "string", "description": "Free text; \"\" clears it.", "examples": ["before the cache fix"]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "run_id", "label", "notes"], "properties": {
            "status": {"const": "ok"}, "run_id": {"type": "string"}, "label": {"type": "string"}, "notes": {"type": "string"}}}),
        read_only: false,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_label_run,
    },
    Tool {
        name: "breakpoint_delete_run",
        title: "Delete a run and what it recorded",
        description: "Delete a run (run_id from breakpoint_list_runs) for good: its call records and events, the \
execution-history entries of its calls, its label and notes, and the stored objects no other record uses (they answer \
cid_not_found afterwards). With a database file the deletion is on disk before it answers. Refused (run_paused, naming \
the pause) while one of its calls is paused: resume it first. A program still running may go on calling; what it \
records afterwards starts the run again under the same run_id. Answers what was removed.",
        input_schema: || json!({"type": "object", "required": ["run_id"], "properties": {
            "run_id": {"type": "string", "description": "The run's id (its process key).", "examples": ["1795311683.7211661+16759"]}}}),
        output_schema: || json!({"type": "object", "required": ["status", "run_id", "records", "history_entries", "objects", "object_bytes", "had_label_or_notes"], "properties": {
            "status": {"const": "ok"}, "run_id": {"type": "string"},
            "records": {"type": "integer", "minimum": 0}, "history_entries": {"type": "integer", "minimum": 0},
            "objects": {"type": "integer", "minimum": 0}, "object_bytes": {"type": "integer", "minimum": 0},
            "had_label_or_notes": {"type": "boolean"}}}),
        read_only: false,
        destructive: true,
        idempotent: false,
        max_block_s: 0.0,
        handler: breakpoint_delete_run,
    },
    Tool {
        name: "breakpoint_repl_eval",
        title: "Evaluate Python in a paused call",
        description: "Evaluate a Python expression or statement inside the paused program (names available: args, \
kwargs, and at an after-pause result). The program evaluates it and answers with its repr (output), captured stdout and \
whether it raised (is_error). Omit session_id to open a session; pass it again to keep assigned names. Blocks until the \
program answers or timeout_s (default 30, at most 55).",
        input_schema: || json!({"type": "object", "required": ["pause_id", "expression"], "properties": {
            "pause_id": {"type": "string"},
            "expression": {"type": "string", "examples": ["args[0]", "len(kwargs)"]},
            "session_id": {"type": "string", "description": "A session from an earlier call, to keep its names."},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 55, "default": 30}}}),
        output_schema: || json!({"type": "object", "required": ["session_id", "output", "stdout", "is_error"], "properties": {
            "session_id": {"type": "string"}, "output": {"type": "string"}, "stdout": {"type": "string"},
            "is_error": {"type": "boolean"}, "result_cid": {"type": ["string", "null"]}}}),
        read_only: false,
        destructive: false,
        idempotent: false,
        max_block_s: MAX_BLOCK_S,
        handler: breakpoint_repl_eval,
    },
    Tool {
        name: "breakpoint_replay_call",
        title: "Replay a recorded call in the live program",
        description: "Call the function of a recorded call again, in a live program of its run (never on the server), \
with the recorded arguments or edited ones (args, kwargs: JSON values, or {\"cid\": ...} of a stored plain value). \
The program must have a paused call that still polls, preferably of the same function (e.g. pause it with \
breakpoint_add on that function): the call is sent through that pause's REPL relay, and calls it makes meanwhile run \
without pausing. Answers the new record (replay_of names the source), its status, result or exception, and what \
differs from the source (differences, same). Blocks until the program answers or timeout_s (default 30, at most 55).",
        input_schema: || json!({"type": "object", "required": ["call_id"], "properties": {
            "call_id": {"type": "string", "description": "The record to replay (call_id from breakpoint_get_call_records)."},
            "args": {"type": "array", "description": "Positional arguments instead of the recorded ones: JSON values, or {\"cid\": ...} of a stored object.", "examples": [[10]]},
            "kwargs": {"type": "object", "description": "Keyword arguments instead of the recorded ones.", "examples": [{"y": 20}]},
            "into_run": {"type": "string", "description": "Replay in this run (process_key) instead of the record's own."},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 55, "default": 30}}}),
        output_schema: || json!({"type": "object", "required": ["source_id", "function", "run_id", "pause_id", "expression", "record_id", "status", "differences", "same"], "properties": {
            "source_id": {"type": "string"}, "function": {"type": "string"}, "run_id": {"type": "string"},
            "pause_id": {"type": "string"}, "expression": {"type": "string"}, "record_id": {"type": "string"},
            "status": {"type": "string"}, "result": {}, "exception": {},
            "differences": {"type": "array", "items": {"type": "object", "required": ["part"], "properties": {
                "part": {"type": "string"}, "source": {}, "replay": {}}}},
            "same": {"type": "boolean"}, "record": {"type": "object"}}}),
        read_only: false,
        destructive: false,
        idempotent: false,
        max_block_s: MAX_BLOCK_S,
        handler: breakpoint_replay_call,
    },
    Tool {
        name: "breakpoint_replay_run",
        title: "Replay a run's calls in order",
        description: "Replay sequence: call the recorded calls of a run (run_id from breakpoint_list_runs), or those \
call_ids names (at most 100), again in order with their recorded arguments, in a live program of that run (or of \
into_run), as breakpoint_replay_call does one by one. Stops at the first call whose replay differs from its source \
(divergence: that replay in full, with its differences) or at the first call that cannot be replayed (stopped: its \
error code and message). The program must have a paused call that still polls. Blocks until the sequence ends or \
timeout_s (default 30, at most 55) for the whole sequence; the calls left then are reported in stopped.",
        input_schema: || json!({"type": "object", "required": ["run_id"], "properties": {
            "run_id": {"type": "string", "description": "The run whose calls are replayed (its process key).", "examples": ["1795311683.7211661+16759"]},
            "call_ids": {"type": "array", "items": {"type": "string"}, "description": "Only these records, in this order (default: the run's program calls, oldest first)."},
            "into_run": {"type": "string", "description": "Replay in this run (process_key) instead of run_id."},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 55, "default": 30}}}),
        output_schema: || json!({"type": "object", "required": ["report_id", "run_id", "into_run", "replayed", "completed", "truncated"], "properties": {
            "report_id": {"type": "string"}, "run_id": {"type": "string"}, "into_run": {"type": "string"},
            "replayed": {"type": "array", "items": {"type": "object", "required": ["source_id", "record_id", "same"], "properties": {
                "source_id": {"type": "string"}, "record_id": {"type": "string"}, "function": {"type": "string"}, "same": {"type": "boolean"}}}},
            "completed": {"type": "boolean"},
            "divergence": {"type": ["object", "null"]},
            "stopped": {"type": ["object", "null"], "properties": {
                "source_id": {"type": "string"}, "error": {}, "message": {}}},
            "truncated": {"type": "boolean"}}}),
        read_only: false,
        destructive: false,
        idempotent: false,
        max_block_s: MAX_BLOCK_S,
        handler: breakpoint_replay_run,
    },
    Tool {
        name: "breakpoint_inspect_object",
        title: "Inspect a stored object",
        description: "Show a stored argument, result or exception by its CID (from the items of breakpoint_list_paused \
or breakpoint_get_call_records): its type, repr and attributes (depth 3, at most 100). Never executes anything. \
A payload that does not decode is shown as far as possible with \"error\": \"deserialization_failed\"; an unknown CID \
is answered (not as an error result) with {\"error\": \"cid_not_found\", \"cid\", \"message\", \"hint\"}, as the \
original server does.",
        input_schema: || json!({"type": "object", "required": ["cid"], "properties": {
            "cid": {"type": "string", "description": "128 hex characters."}}}),
        // The object (with `error` when its payload does not decode), or the original's answer
        // for an unknown CID (`not_found_result`).
        output_schema: || json!({"type": "object",
            "anyOf": [{"required": ["cid", "type", "repr", "attributes"]}, {"required": ["error", "cid", "message"]}],
            "properties": {
            "cid": {"type": "string"}, "type": {"type": "string"}, "repr": {"type": "string"}, "attributes": {"type": "object"},
            "error": {"enum": ["deserialization_failed", "cid_not_found"]}, "message": {"type": "string"},
            "hint": {"type": "string"}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: 0.0,
        handler: breakpoint_inspect_object,
    },
    Tool {
        name: "breakpoint_wait_for_pause",
        title: "Wait for a call to pause",
        description: "Return a paused call: at once if one is paused already (optionally of function_name), else \
wait until one pauses or timeout_s passes (default 20, at most 55). A timeout is a normal result with paused false: call \
again to keep waiting. Use it after starting or resuming the program instead of polling breakpoint_list_paused.",
        input_schema: || json!({"type": "object", "properties": {
            "function_name": {"type": "string", "description": "Only a pause of this function.", "examples": ["add"]},
            "timeout_s": {"type": "number", "minimum": 0, "maximum": 55, "default": 20}}}),
        output_schema: || json!({"type": "object", "required": ["paused", "pause", "waited_s"], "properties": {
            "paused": {"type": "boolean"}, "pause": {"anyOf": [{"type": "null"}, pause_out()]}, "waited_s": {"type": "number"}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: MAX_BLOCK_S,
        handler: breakpoint_wait_for_pause,
    },
    Tool {
        name: "external_list_servers",
        title: "List external MCP servers",
        description: "List the external MCP servers this debugger is connected to (filesystem, git, databases...) with \
their status (connecting, connected, disconnected, error, failed), transport, tool names, last error and auth_state (none, \
required, authorizing, authorized, error: required means a person must authorize the server on the debugger's web UI page \
/mcp-servers before it can be used). Use it first when \
you want to use external tools, or when an external_* call says a server is not connected. An empty list means \
no server is connected yet (a user connects them on the debugger's web UI or with its --mcp-client flags).",
        input_schema: no_args,
        output_schema: || json!({"type": "object", "required": ["servers"], "properties": {
            "servers": {"type": "object", "additionalProperties": {"type": "object", "required": ["status", "tools"], "properties": {
                "status": {"enum": ["connecting", "connected", "disconnected", "error", "failed"]},
                "tools": {"type": "array", "items": {"type": "string"}}, "tool_count": {"type": "integer"},
                "error": {"type": ["string", "null"]}, "transport": {"type": "string"},
                "auth_state": {"enum": ["none", "required", "authorizing", "authorized", "error"]},
                "auth": {"type": "object", "properties": {"state": {"type": "string"}, "message": {"type": "string"}, "scopes": {"type": "array", "items": {"type": "string"}}}}}}}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: MAX_BLOCK_S,
        handler: |ctx, args| external::list_servers(ctx, args),
    },
    Tool {
        name: "external_list_tools",
        title: "List external tools",
        description: "List the tools of the connected external MCP servers: name (server/tool, the name to pass to \
external_call_tool), server, original_name, description and input_schema (the arguments the tool expects). Pass server \
to list one server's tools.",
        input_schema: || json!({"type": "object", "properties": {
            "server": {"type": "string", "description": "Only this server's tools (a name from external_list_servers).", "examples": ["filesystem"]}}}),
        output_schema: || json!({"type": "object", "required": ["tools"], "properties": {
            "tools": {"type": "array", "items": {"type": "object", "required": ["name", "server", "original_name", "description", "input_schema"], "properties": {
                "name": {"type": "string"}, "server": {"type": "string"}, "original_name": {"type": "string"},
                "description": {"type": "string"}, "input_schema": {"type": "object"}}}}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: MAX_BLOCK_S,
        handler: |ctx, args| external::list_tools(ctx, args),
    },
    Tool {
        name: "external_call_tool",
        title: "Call an external tool",
        description: "Call a tool of a connected external MCP server and return its content. tool is the name from \
external_list_tools (server/tool; a bare tool name works when exactly one server has it); arguments must match the tool's \
input_schema. The external tool may have side effects (writing files, committing...): check its description first. The call \
is recorded in the call records (source mcp_client) and its full result stored under result_cid. is_error true means the \
tool itself reported a failure. Results over about 50 KB are cut for you (truncated true, with a note on how to fetch the \
whole result). Waits at most the server's timeout_s (default 30 s).",
        input_schema: || json!({"type": "object", "required": ["tool"], "properties": {
            "tool": {"type": "string", "description": "server/tool as listed by external_list_tools.", "examples": ["filesystem/read_text_file"]},
            "arguments": {"type": "object", "description": "The tool's arguments, per its input_schema.", "examples": [{"path": "/tmp/notes.txt"}]}}}),
        output_schema: || json!({"type": "object", "required": ["tool", "server", "call_id", "result_cid", "is_error", "content", "truncated"], "properties": {
            "tool": {"type": "string"}, "server": {"type": "string"}, "call_id": {"type": "string"}, "result_cid": {"type": "string"},
            "result_size": {"type": "integer"}, "is_error": {"type": "boolean"}, "content": {"type": "array", "items": {"type": "object"}},
            "structured_content": {"type": "object"}, "truncated": {"type": "boolean"}, "note": {"type": "string"}}}),
        read_only: false,
        destructive: false,
        idempotent: false,
        max_block_s: MAX_BLOCK_S,
        handler: |ctx, args| external::call_tool(ctx, args),
    },
    Tool {
        name: "external_list_resources",
        title: "List external resources",
        description: "List the resources (files, records, documents...) of the connected external MCP servers: uri, \
server, name, description, mime_type. Read one with external_read_resource. A server that fails to list is named in errors.",
        input_schema: || json!({"type": "object", "properties": {
            "server": {"type": "string", "description": "Only this server's resources.", "examples": ["filesystem"]}}}),
        output_schema: || json!({"type": "object", "required": ["resources", "errors"], "properties": {
            "resources": {"type": "array", "items": {"type": "object", "required": ["uri", "server"], "properties": {
                "uri": {"type": "string"}, "server": {"type": "string"}, "name": {"type": ["string", "null"]},
                "description": {"type": ["string", "null"]}, "mime_type": {"type": ["string", "null"]}}}},
            "errors": {"type": "object"}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: MAX_BLOCK_S,
        handler: |ctx, args| external::list_resources(ctx, args),
    },
    Tool {
        name: "external_read_resource",
        title: "Read an external resource",
        description: "Read one resource of an external MCP server by its URI (from external_list_resources): content is \
the first text (or base64 blob), mime_type its type, contents the server's full answer.",
        input_schema: || json!({"type": "object", "required": ["server", "uri"], "properties": {
            "server": {"type": "string", "description": "The server offering the resource.", "examples": ["filesystem"]},
            "uri": {"type": "string", "description": "The resource URI.", "examples": ["file:///tmp/notes.txt"]}}}),
        output_schema: || json!({"type": "object", "required": ["server", "uri", "content", "mime_type", "contents"], "properties": {
            "server": {"type": "string"}, "uri": {"type": "string"}, "content": {"type": ["string", "null"]}, "mime_type": {"type": ["string", "null"]},
            "contents": {"type": "array", "items": {"type": "object"}}}}),
        read_only: true,
        destructive: false,
        idempotent: true,
        max_block_s: MAX_BLOCK_S,
        handler: |ctx, args| external::read_resource(ctx, args),
    },
];

// ---------------------------------------------------------------------------------------------
// Handlers, named like their tools.

/// A typed result of `service` whose shape the tool shares with REST.
fn out<T: Serialize>(result: T) -> Result<Value, ApiError> {
    serde_json::to_value(result).map_err(|e| {
        tool_error(
            "internal_error",
            format!("unserializable result: {e}"),
            hint_for(""),
        )
    })
}

fn breakpoint_list_breakpoints(ctx: &Ctx, _: &Args) -> Result<Value, ApiError> {
    Ok(breakpoints_view(ctx.shared()))
}

/// What `breakpoint_list_breakpoints` answers, and the `breakpoint://breakpoints` resource
/// holds: one view, so the tool and the resource never disagree.
pub(super) fn breakpoints_view(shared: &crate::state::Shared) -> Value {
    let l = service::breakpoints(shared);
    json!({
        "breakpoints": l.breakpoints,
        "behaviors": l.breakpoint_behaviors,
        "after_behaviors": l.breakpoint_after_behaviors,
        "replacements": l.breakpoint_replacements,
        "conditions": l.breakpoint_conditions,
        "hit_conditions": l.breakpoint_hit_conditions,
        "log_messages": l.breakpoint_log_messages,
        "one_shot": l.breakpoint_one_shot,
        "hit_counts": l.breakpoint_hit_counts,
        "enabled": l.breakpoint_enabled,
        "pausing": l.pausing,
    })
}

fn invalid_behavior(value: &str, names: &[&str]) -> ApiError {
    tool_error(
        "invalid_behavior",
        format!("invalid behavior {value:?}"),
        format!("Use one of: {}.", names.join(", ")),
    )
}

fn breakpoint_not_found(name: &str) -> ApiError {
    tool_error(
        "breakpoint_not_found",
        format!("no breakpoint on {name}"),
        hint_for("breakpoint_not_found"),
    )
    .with("function_name", json!(name))
}

fn breakpoint_add(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let Some(list) = args.get("breakpoints") else {
        return add_one(ctx, args);
    };
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    service::check_bulk_len(items.len())?;
    let results: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let done = match item {
                Value::Object(one) => add_one(ctx, one),
                _ => Err(tool_error(
                    "invalid_arguments",
                    "each item of breakpoints must be an object",
                    "Give each item the arguments of a single breakpoint_add.",
                )),
            };
            done.unwrap_or_else(|e| {
                let mut v = e.to_json();
                if let Some(m) = v.as_object_mut() {
                    m.insert("index".into(), json!(i));
                }
                v
            })
        })
        .collect();
    Ok(json!({"results": results}))
}

/// One breakpoint of `breakpoint_add`.
fn add_one(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let name = required(args, "function_name")?;
    let behavior = match str_arg(args, "behavior") {
        None => None,
        Some(b) => Some(Before::parse(b).ok_or_else(|| invalid_behavior(b, &Before::NAMES))?),
    };
    let change = service::OptionsChange::read(args).map_err(|e| {
        let hint = match e.code() {
            "invalid_hit_condition" => "Use N, >N, >=N or %N with N a whole number from 1.",
            "invalid_options" => "Use hit_condition \"1\" to log only once.",
            _ => "Fix the text at the position given; \"\" clears the option.",
        };
        e.with_hint(hint)
    })?;
    // Keep a registered signature: the REST rule "no signature erases it" is for the client.
    out(service::add_with_options(
        ctx.shared(),
        name,
        Signature::Keep,
        behavior,
        &change,
    )?)
}

fn breakpoint_remove(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    out(service::breakpoint_remove(
        ctx.shared(),
        required(args, "function_name")?,
    )?)
}

fn breakpoint_set_behavior(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let name = required(args, "function_name")?;
    let raw = required(args, "behavior")?;
    let b = Before::parse(raw).ok_or_else(|| invalid_behavior(raw, &Before::NAMES))?;
    out(service::set_before(ctx.shared(), name, b)?.map_err(|_| breakpoint_not_found(name))?)
}

fn breakpoint_set_after_behavior(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let name = required(args, "function_name")?;
    let raw = required(args, "behavior")?;
    let a = After::parse(raw).ok_or_else(|| invalid_behavior(raw, &After::NAMES))?;
    out(service::set_after(ctx.shared(), name, a)?.map_err(|_| breakpoint_not_found(name))?)
}

fn breakpoint_set_replacement(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let name = required(args, "function_name")?;
    let replacement = str_arg(args, "replacement_function").unwrap_or("");
    match service::set_replacement(ctx.shared(), name, replacement)? {
        Ok(set) => out(set),
        // MCP names the missing breakpoint first (the REST route names the signature first).
        Err(refused) if refused.breakpoint_missing => Err(breakpoint_not_found(name)),
        Err(_) => Err(tool_error(
            "signature_mismatch",
            format!("{replacement} does not have the registered signature of {name}"),
            hint_for("signature_mismatch"),
        )),
    }
}

/// A required boolean argument (the schema has checked its type).
fn required_bool(args: &Args, key: &str) -> Result<bool, ApiError> {
    args.get(key).and_then(Value::as_bool).ok_or_else(|| {
        tool_error(
            "missing_parameter",
            format!("{key} must be true or false"),
            "Pass true or false.",
        )
        .with("parameter", json!(key))
    })
}

fn breakpoint_set_enabled(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let name = required(args, "function_name")?;
    let enabled = required_bool(args, "enabled")?;
    out(service::set_enabled(ctx.shared(), name, enabled)?
        .map_err(|_| breakpoint_not_found(name))?)
}

fn breakpoint_set_pausing(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    out(service::set_pausing(
        ctx.shared(),
        required_bool(args, "pausing")?,
    )?)
}

fn breakpoint_get_default_behavior(ctx: &Ctx, _: &Args) -> Result<Value, ApiError> {
    out(service::default_behavior(ctx.shared()))
}

fn breakpoint_set_default_behavior(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let raw = required(args, "behavior")?;
    let g = Global::parse(raw).ok_or_else(|| invalid_behavior(raw, &Global::NAMES))?;
    out(service::set_global(ctx.shared(), g)?)
}

fn breakpoint_list_paused(ctx: &Ctx, _: &Args) -> Result<Value, ApiError> {
    out(service::paused(ctx.shared(), Payloads::Omitted))
}

fn breakpoint_continue(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let pause_id = required(args, "pause_id")?;
    let has = |k: &str| args.get(k).is_some_and(|v| !v.is_null());
    let explicit = str_arg(args, "action").filter(|a| !a.is_empty());
    let action = match explicit {
        Some("continue") | None if has("modified_args") || has("modified_kwargs") => "modify",
        Some("continue") | None if has("fake_result") => "skip",
        None if has("exception_type") => "raise",
        Some(a) => a,
        None => "continue",
    };
    if action == "dismiss" {
        let done = service::dismiss_pause(ctx.shared(), pause_id, Actor::Mcp)?;
        return Ok(
            json!({"status": done.status, "pause_id": pause_id, "action": "dismiss",
                         "dismissed": done.dismissed}),
        );
    }
    let mut body = args.clone();
    body.insert("action".into(), json!(action));
    if action == "modify" {
        // The Python client calls with exactly the lists it gets: fill the missing one from the
        // call's original items.
        let original = service::original_items(ctx.shared(), pause_id).unwrap_or_default();
        if !has("modified_args") {
            body.insert("modified_args".into(), json!(original.args));
        }
        if !has("modified_kwargs") {
            body.insert("modified_kwargs".into(), Value::Object(original.kwargs));
        }
    }
    let done = service::continue_pause(ctx.shared(), pause_id, &body, Actor::Mcp)?;
    // Compat with the first release: any replacement_function argument reports "replace".
    let action = if has("replacement_function") {
        "replace"
    } else {
        action
    };
    Ok(json!({"status": done.status, "pause_id": done.pause_id, "action": action}))
}

fn breakpoint_list_functions(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let number = |k: &str, default: u64| args.get(k).and_then(Value::as_u64).unwrap_or(default);
    let limit = number("limit", 100) as usize;
    let offset = usize::try_from(number("offset", 0)).unwrap_or(usize::MAX);
    let l = service::functions_page(ctx.shared(), offset, limit);
    Ok(json!({
        "functions": l.functions,
        "signatures": l.function_signatures,
        "metadata": l.function_metadata,
        "total": l.total,
    }))
}

fn breakpoint_list_runs(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let number = |k: &str, default: u64| args.get(k).and_then(Value::as_u64).unwrap_or(default);
    let limit = usize::try_from(number("limit", 100)).unwrap_or(MAX_PAGE_LIMIT);
    let offset = usize::try_from(number("offset", 0)).unwrap_or(usize::MAX);
    out(service::runs(ctx.shared(), offset, limit))
}

fn breakpoint_delete_run(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let run_id = required(args, "run_id")?;
    out(service::delete_run(ctx.shared(), run_id)?)
}

fn breakpoint_label_run(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let run_id = required(args, "run_id")?;
    let label = str_arg(args, "label");
    let notes = str_arg(args, "notes");
    if label.is_none() && notes.is_none() {
        return Err(tool_error(
            "missing_parameter",
            "give label, notes or both",
            "Pass label and/or notes (\"\" clears one).",
        ));
    }
    out(
        service::label_run(ctx.shared(), run_id, label, notes).map_err(|e| match e.code() {
            "run_not_found" => e.with_hint("Call breakpoint_list_runs for the run ids."),
            _ => e,
        })?,
    )
}

fn breakpoint_get_call_records(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(100) as usize;
    // The REST filters, named as there but for the function.
    // The client's own events are hidden unless asked for: an agent looks for the program's
    // calls, and in a real session half the records are the client's attribute probes.
    let filter = service::record_filter(
        |key| match key {
            "function" => str_arg(args, "function_name"),
            other => str_arg(args, other),
        },
        ClientEvents::Hide,
    )?;
    let mut page = service::call_records(ctx.shared(), &filter, 0, limit);
    service::mark_client_events(&mut page.calls);
    let truncated = page.truncated();
    let mut out =
        json!({"calls": page.calls, "total_count": page.total_count, "truncated": truncated});
    if let Some(hidden) = page.client_events_hidden {
        out["client_events_hidden"] = json!(hidden);
    }
    if let Some(scanned) = page.scanned {
        out["scanned"] = json!(scanned);
    }
    if let Some(cut) = page.search_truncated {
        out["search_truncated"] = json!(cut);
    }
    Ok(out)
}

fn breakpoint_compare_runs(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(100) as usize;
    let a = required(args, "a")?;
    let b = required(args, "b")?;
    let c = service::compare_runs(ctx.shared(), Some(a), Some(b), offset, limit)?;
    serde_json::to_value(c).map_err(|e| ApiError::internal(format!("unserializable: {e}")))
}

fn breakpoint_replay_call(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let call_id = required(args, "call_id")?;
    let timeout = timeout_arg(args);
    let mut body = serde_json::Map::new();
    for key in ["args", "kwargs", "into_run"] {
        if let Some(v) = args.get(key) {
            body.insert(key.into(), v.clone());
        }
    }
    let replayed = replay_waiting(ctx, call_id, &body, Instant::now() + timeout, timeout)??;
    serde_json::to_value(replayed).map_err(|e| ApiError::internal(format!("unserializable: {e}")))
}

/// `timeout_s` (default 30, at most `MAX_BLOCK_S`).
fn timeout_arg(args: &Args) -> Duration {
    Duration::from_secs_f64(
        args.get("timeout_s")
            .and_then(Value::as_f64)
            .unwrap_or(30.0)
            .clamp(0.001, MAX_BLOCK_S),
    )
}

/// One replay, waited on until `deadline` (`total`: the request's whole wait, for progress):
/// `Err` when the request was cancelled (the replay is given up), else the replay's answer.
fn replay_waiting(
    ctx: &Ctx,
    call_id: &str,
    body: &serde_json::Map<String, Value>,
    deadline: Instant,
    total: Duration,
) -> Result<Result<service::Replayed, ApiError>, ApiError> {
    let shared = ctx.shared();
    let started = match service::replay_start(shared, call_id, body) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let timeout = deadline.saturating_duration_since(Instant::now());
    // As breakpoint_repl_eval: a second at a time, so that a program that stops polling ends
    // the wait (410 program_gone) and a cancelled request gives the replay up.
    let evaluated = loop {
        let step = deadline.min(Instant::now() + Duration::from_secs(1));
        match ctx.wait(
            &started.pending.outcome,
            step,
            total,
            "waiting for the program to replay the call",
        ) {
            Some(Ok(outcome)) => {
                break service::repl_eval_finish(shared, &started.pending, Some(outcome), timeout)
            }
            Some(Err(())) => {
                service::replay_abandon(shared, started);
                return Err(cancelled());
            }
            None if Instant::now() >= deadline || Instant::now() < step => {
                break service::repl_eval_finish(shared, &started.pending, None, timeout)
            }
            None => {
                if let Some(ended) = service::repl_eval_if_gone(shared, &started.pending) {
                    break ended;
                }
            }
        }
    };
    Ok(service::replay_finish(shared, started, evaluated))
}

fn breakpoint_replay_run(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let run_id = required(args, "run_id")?;
    let timeout = timeout_arg(args);
    let deadline = Instant::now() + timeout;
    let mut body = serde_json::Map::new();
    for key in ["call_ids", "into_run"] {
        if let Some(v) = args.get(key) {
            body.insert(key.into(), v.clone());
        }
    }
    let run = service::replay_run_with(ctx.shared(), run_id, &body, |id, into| {
        if Instant::now() >= deadline {
            return Ok(Err(tool_error(
                "sequence_timeout",
                format!(
                    "the sequence used up its timeout_s ({}s) before this call; replay the rest \
                     with call_ids, or a larger timeout_s (at most {MAX_BLOCK_S})",
                    timeout.as_secs_f64()
                ),
                "",
            )));
        }
        replay_waiting(ctx, id, into, deadline, timeout)
    })?;
    serde_json::to_value(run).map_err(|e| ApiError::internal(format!("unserializable: {e}")))
}

fn breakpoint_repl_eval(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let pause_id = required(args, "pause_id")?;
    let expression = match str_arg(args, "expression") {
        Some(e) if !e.trim().is_empty() => e,
        _ => {
            return Err(tool_error(
                "missing_expression",
                "expression must be non-blank",
                hint_for("missing_expression"),
            ))
        }
    };
    let timeout = Duration::from_secs_f64(
        args.get("timeout_s")
            .and_then(Value::as_f64)
            .unwrap_or(30.0)
            .clamp(0.001, MAX_BLOCK_S),
    );
    let session_id = service::session_for_pause(
        ctx.shared(),
        pause_id,
        str_arg(args, "session_id").filter(|s| !s.is_empty()),
    )?;
    let pending = service::repl_eval_start(ctx.shared(), &session_id, Some(&json!(expression)))?;
    let deadline = Instant::now() + timeout;
    // Waits a second at a time (as progress is reported), so that a program that stops
    // polling ends the wait (410 program_gone).
    let r = loop {
        let step = deadline.min(Instant::now() + Duration::from_secs(1));
        match ctx.wait(
            &pending.outcome,
            step,
            timeout,
            "waiting for the program to evaluate",
        ) {
            Some(Ok(outcome)) => {
                break service::repl_eval_finish(ctx.shared(), &pending, Some(outcome), timeout)?
            }
            Some(Err(())) => {
                service::repl_eval_abandon(ctx.shared(), &pending);
                return Err(cancelled());
            }
            // The deadline passed, or the eval was dropped (the wait ended before its step).
            None if Instant::now() >= deadline || Instant::now() < step => {
                break service::repl_eval_finish(ctx.shared(), &pending, None, timeout)?
            }
            None => {
                if let Some(ended) = service::repl_eval_if_gone(ctx.shared(), &pending) {
                    break ended?;
                }
            }
        }
    };
    Ok(json!({
        "output": r.output,
        "stdout": r.stdout,
        "is_error": r.is_error,
        "result_cid": r.result_cid,
        "session_id": session_id,
    }))
}

/// The view of a stored object with the CID as the agent gave it.
fn view_with_cid(view: pretty::View, cid: &str) -> Value {
    json!({"type": view.type_name, "repr": view.repr, "attributes": view.attributes, "cid": cid})
}

fn breakpoint_inspect_object(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let cid = required(args, "cid")?;
    let view = service::object_view(ctx.shared(), cid)?;
    // A payload that does not decode renders as `<unavailable>`: the original names that.
    let undecoded = view.type_name == "<unavailable>";
    let mut out = view_with_cid(view, cid);
    if undecoded {
        out["error"] = json!("deserialization_failed");
    }
    Ok(out)
}

fn breakpoint_wait_for_pause(ctx: &Ctx, args: &Args) -> Result<Value, ApiError> {
    let function = str_arg(args, "function_name").filter(|f| !f.is_empty());
    let timeout = Duration::from_secs_f64(
        args.get("timeout_s")
            .and_then(Value::as_f64)
            .unwrap_or(20.0)
            .clamp(0.0, MAX_BLOCK_S),
    );
    // Subscribe before looking, so a pause between the look and the wait is not missed.
    let events = ctx.shared().bus.subscribe();
    let started = Instant::now();
    let find = |pause_id: Option<&str>| -> Option<service::PausedExecution> {
        service::paused(ctx.shared(), Payloads::Omitted)
            .paused
            .into_iter()
            .find(|p| {
                pause_id.is_none_or(|id| p.id == id)
                    && function.is_none_or(|f| p.method_name() == f)
            })
    };
    let found = |p: service::PausedExecution| json!({"paused": true, "pause": p, "waited_s": started.elapsed().as_secs_f64()});
    if let Some(p) = find(None) {
        return Ok(found(p));
    }
    loop {
        match ctx.wait(
            &events,
            started + timeout,
            timeout,
            "waiting for a call to pause",
        ) {
            Some(Ok(e)) => {
                if let EventKind::ExecutionPaused { pause_id, .. } = &*e.kind {
                    if let Some(p) = find(Some(pause_id)) {
                        return Ok(found(p));
                    }
                }
            }
            Some(Err(())) => return Err(cancelled()),
            None => {
                return Ok(json!({
                    "paused": false,
                    "pause": null,
                    "waited_s": started.elapsed().as_secs_f64(),
                    "message": format!("nothing paused within {} s; call again to keep waiting", timeout.as_secs_f64()),
                }))
            }
        }
    }
}

/// The tool reference of docs/mcp.md, generated from `TOOLS`.
pub fn reference_markdown() -> String {
    let mut out = String::from("| Tool | What it does | Arguments |\n|---|---|---|\n");
    for t in TOOLS {
        let schema = (t.input_schema)();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props: Vec<String> = schema["properties"]
            .as_object()
            .map(|p| {
                p.keys()
                    .map(|k| {
                        if required.contains(&k.as_str()) {
                            format!("`{k}`")
                        } else {
                            format!("`{k}`?")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let first_sentence = t
            .description
            .split(". ")
            .next()
            .unwrap_or(t.description)
            .trim_end_matches('.');
        out.push_str(&format!(
            "| `{}` | {}. | {} |\n",
            t.name,
            first_sentence.replace('|', "\\|"),
            props.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_SETTLE;

    #[test]
    fn table_invariants_hold() {
        let mut names = std::collections::HashSet::new();
        for t in TOOLS {
            assert!(names.insert(t.name), "duplicate tool {}", t.name);
            assert!(
                t.name.starts_with("breakpoint_") || t.name.starts_with("external_"),
                "{}",
                t.name
            );
            assert!(
                t.name.len() <= 40
                    && t.name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
            assert!(!t.description.is_empty() && !t.title.is_empty());
            for schema in [(t.input_schema)(), (t.output_schema)()] {
                assert_eq!(schema["type"], "object", "{}", t.name);
                schema::check_schema(&schema).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            }
            assert!(t.max_block_s <= MAX_BLOCK_S);
            // The schemas and descriptions are literals: they must state `MAX_BLOCK_S`.
            let timeout = &(t.input_schema)()["properties"]["timeout_s"];
            if let Some(max) = timeout.get("maximum") {
                assert_eq!(max.as_f64(), Some(MAX_BLOCK_S), "{}", t.name);
                let said = format!("at most {MAX_BLOCK_S})");
                assert!(t.description.contains(&said), "{}", t.name);
            }
        }
        let hint = hint_for("eval_timeout");
        assert!(hint.contains(&format!("at most {MAX_BLOCK_S})")), "{hint}");
        assert!(
            MAX_SETTLE.as_secs_f64() <= MAX_BLOCK_S,
            "external listings wait for connecting servers within a tool's block limit"
        );
        assert_eq!(
            TOOLS.len(),
            29,
            "the 14 tools of the design, breakpoint_wait_for_pause, breakpoint_continue_all, \
             the two switches (breakpoint_set_enabled, breakpoint_set_pausing), \
             breakpoint_compare_runs, the three of runs (breakpoint_list_runs, breakpoint_label_run, \
             breakpoint_delete_run), \
             breakpoint_replay_call, breakpoint_replay_run and the 5 external_* proxies"
        );
        // The five proxy tools, all prefixed external_.
        let proxies: Vec<&str> = TOOLS
            .iter()
            .map(|t| t.name)
            .filter(|n| n.starts_with("external_"))
            .collect();
        assert_eq!(
            proxies,
            [
                "external_list_servers",
                "external_list_tools",
                "external_call_tool",
                "external_list_resources",
                "external_read_resource"
            ]
        );
    }

    #[test]
    fn every_error_code_has_an_actionable_hint() {
        for code in [
            "pause_not_found",
            "eval_timeout",
            "cid_not_found",
            "breakpoint_not_found",
            "invalid_action",
        ] {
            let h = hint_for(code);
            assert!(
                h.contains("breakpoint_") || h.contains("continue"),
                "{code}: {h}"
            );
        }
    }
}
