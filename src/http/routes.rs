//! THE route table: every HTTP endpoint as one `Route` (method, path pattern, summary, query
//! parameters, handler). Routing, the OpenAPI document and the REST reference of docs/rest.md are all
//! generated from it. Handlers are thin: parse the request, call `service`, serialize its typed
//! result (the original server's wire shape).

use serde::Serialize;
use serde_json::Value;

use super::openapi::{self, Endpoint};
use super::{index, Reply, Req};
use crate::error::ApiError;
use crate::limits::MAX_PAGE_LIMIT;
use crate::records::{ClientEvents, RecordFilter};
use crate::repl::SessionFilter;
use crate::service::{self, Payloads};
use crate::state::Shared;

type Handler = fn(&Shared, &Req) -> Result<Value, ApiError>;

/// Who may call an endpoint from a browser (see `guard`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A browser-client endpoint (what the original's browser JS client calls): CORS `*` with
    /// preflight, as the original server; a page may use it only from the server's own origins,
    /// an `--allow-origin` one or an origin granted in the web UI (`http::decide`; else 403 and a
    /// pending request), except the debug client script, open to every origin.
    Anyone,
    /// Everything else: a browser request must come from the server's own origin or an
    /// `--allow-origin` one (403 otherwise); requests without `Origin` pass.
    Guarded,
}

use Access::{Anyone, Guarded};

/// One endpoint. Path segments in braces capture one segment into `Req::params`, in order.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
    pub summary: &'static str,
    /// Query parameters: name and description.
    pub query: &'static [(&'static str, &'static str)],
    pub handler: Handler,
}

const PAGE: &[(&str, &str)] = &[
    ("limit", "page size (default 100, at most 1000)"),
    ("offset", "records to skip (default 0)"),
];

/// Every endpoint, in the order of the reference in docs/rest.md. Literal paths come before patterns
/// that would also match them.
pub static ROUTES: &[Route] = &[
    Route { method: "GET", path: "/api/breakpoints", access: Guarded, summary: "List breakpoints with their before/after behaviors, replacements, conditions, hit conditions, log messages, one-shot flags, hit counts and switches (breakpoint_enabled), and the master switch (pausing).", query: &[], handler: |s, _| wire(service::breakpoints(s)) },
    Route { method: "POST", path: "/api/breakpoints", access: Guarded, summary: "Add a breakpoint (idempotent) and register the function: {function_name, signature?, behavior?, keep_signature?, condition?, hit_condition?, log_message?, one_shot?, reset_hits?}; without signature the registered one is erased, unless keep_signature is true. Options left out stay as they are; \"\" or null clears one. A request that sets options is answered with the breakpoint, its options and hit_count (otherwise exactly {status, function_name}); a condition or log message that does not parse is 400 with its position. A JSON array of such bodies (1 to 1000, each an object, else 400 invalid_body) adds each in order and answers an array with one entry per item: what the single form answers, or its error object {error, message, index}.", query: &[], handler: breakpoints_add },
    Route { method: "DELETE", path: "/api/breakpoints/{name}", access: Guarded, summary: "Remove a breakpoint with its behaviors and replacement (ok for unknown names).", query: &[], handler: |s, r| wire(service::breakpoint_remove(s, r.param(0))?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/behavior", access: Guarded, summary: "Set the before-behavior: {behavior: stop|go|yield} (continue = go).", query: &[], handler: |s, r| wire(service::breakpoint_set_behavior(s, r.param(0), &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/after_behavior", access: Guarded, summary: "Set the after-behavior: {behavior: stop|go|exception|stop_exception|yield}.", query: &[], handler: |s, r| wire(service::breakpoint_set_after_behavior(s, r.param(0), &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/replacement", access: Guarded, summary: "Set or clear (\"\") the replacement function: {replacement_function}; signatures must match.", query: &[], handler: |s, r| wire(service::breakpoint_set_replacement(s, r.param(0), &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/condition", access: Guarded, summary: "Set or clear (\"\" or null) the condition: {condition}, e.g. args[0] > 100 and kwargs[\"label\"].startswith(\"item-\"). Calls for which it does not hold neither pause nor log; one for which it cannot be decided pauses with pause_reason condition_error.", query: &[], handler: |s, r| wire(service::breakpoint_set_option(s, r.param(0), "condition", &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/hit_condition", access: Guarded, summary: "Set or clear the hit condition: {hit_condition: \"5\" (the 5th counted call), \">5\" (after the 5th), \">=5\", \"%5\" (every 5th)}; counted calls are those whose condition holds.", query: &[], handler: |s, r| wire(service::breakpoint_set_option(s, r.param(0), "hit_condition", &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/log_message", access: Guarded, summary: "Set or clear the log message: {log_message: \"scale={kwargs['scale']} -> {result}\"}; a breakpoint with one logs a line per hit instead of pausing.", query: &[], handler: |s, r| wire(service::breakpoint_set_option(s, r.param(0), "log_message", &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/one_shot", access: Guarded, summary: "Make the breakpoint one-shot or not: {one_shot: bool}; after its first pause it switches to go before and after.", query: &[], handler: |s, r| wire(service::breakpoint_set_option(s, r.param(0), "one_shot", &r.json()?)?) },
    Route { method: "POST", path: "/api/breakpoints/{name}/enabled", access: Guarded, summary: "Switch the breakpoint on or off: {enabled: bool}. One switched off keeps every setting and its hit count, but calls of its function run as with no breakpoint: no pause, no log line, no replacement, no count; 404 for an unknown breakpoint.", query: &[], handler: |s, r| wire(service::breakpoint_set_enabled(s, r.param(0), &r.json()?)?) },
    Route { method: "DELETE", path: "/api/breakpoints/{name}/hits", access: Guarded, summary: "Reset the breakpoint's hit count to 0.", query: &[], handler: |s, r| wire(service::breakpoint_reset_hits(s, r.param(0))?) },
    Route { method: "GET", path: "/api/breakpoints/{name}/history", access: Guarded, summary: "Execution history of one breakpoint, most recent first.", query: &[("offset", "entries to skip (default 0)"), ("limit", "entries to return (default 100)")], handler: |s, r| wire(service::breakpoint_history(s, r.param(0), offset(r)?, limit(r, 100)?)) },
    Route { method: "GET", path: "/api/logpoints", access: Guarded, summary: "The newest lines logpoints wrote, oldest first: {lines: [{seq, logged_at, function_name, call_id, message}], last_seq}.", query: &[("after", "only lines with a greater seq (default 0)"), ("limit", "the newest lines to return (default 100, at most 1000)")], handler: |s, r| wire(service::logpoint_lines(s, number(r, "after", 0, usize::MAX)? as u64, limit(r, 100)?)) },
    Route { method: "GET", path: "/api/behavior", access: Guarded, summary: "The global default behavior.", query: &[], handler: |s, _| wire(service::default_behavior(s)) },
    Route { method: "POST", path: "/api/behavior", access: Guarded, summary: "Set the global default behavior: {behavior: stop|go|exception|stop_exception}.", query: &[], handler: |s, r| wire(service::set_default_behavior(s, &r.json()?)?) },
    Route { method: "GET", path: "/api/pausing", access: Guarded, summary: "The master switch: {pausing, will_pause, breakpoints}; will_pause counts the breakpoints that may pause a call now.", query: &[], handler: |s, _| wire(service::pausing(s)) },
    Route { method: "POST", path: "/api/pausing", access: Guarded, summary: "Turn pausing on or off: {pausing: bool}. While off no call pauses, whatever the breakpoints and the global default behavior say; every breakpoint keeps its settings, logpoints still log, replacements still apply, and calls paused already stay paused.", query: &[], handler: |s, r| wire(service::rest_set_pausing(s, &r.json()?)?) },
    Route { method: "GET", path: "/api/functions", access: Guarded, summary: "Registered functions with signatures and metadata, by name; with limit, a page of them (then total, offset and limit say where it is). Without limit, every registered function (the registry is bounded in bytes).", query: &[("limit", "page size (at most 1000); without it, every function"), ("offset", "functions to skip, by name (default 0)")], handler: functions_listing },
    Route { method: "POST", path: "/api/functions", access: Anyone, summary: "Register a function: {function_name, signature?, function_client_ref?, function_cid?, function_data?}.", query: &[], handler: |s, r| wire(service::function_register(s, &r.json()?)?) },
    Route { method: "POST", path: "/api/call/start", access: Anyone, summary: "A wrapped call starts: answers continue, replace, or poll (paused); 400 cid_not_found asks for a resend.", query: &[], handler: |s, r| service::call_start_from(s, &r.node()?, r.origin.as_deref()) },
    Route { method: "POST", path: "/api/call/complete", access: Anyone, summary: "A call completed: records it; answers ok or poll (after-pause). Only from the browser origin that started the call (a program: none); process_pid and process_start_time may be omitted, and when sent must be the call's (else 403 not_owner).", query: &[], handler: |s, r| service::call_complete_from(s, &r.node()?, r.origin.as_deref()) },
    Route { method: "POST", path: "/api/call/event", access: Guarded, summary: "A client event (registration, attribute error, pickle error): recorded as a call record.", query: &[], handler: |s, r| service::call_event(s, &r.json()?) },
    Route { method: "POST", path: "/api/call/repl-result", access: Anyone, summary: "The debugged program answers a REPL eval (only from the browser origin of the pause, else 403 not_owner).", query: &[], handler: |s, r| wire(service::repl_result_from(s, &r.json()?, r.origin.as_deref())?) },
    Route { method: "GET", path: "/api/poll/{pause_id}", access: Anyone, summary: "Poll a pause: {status: waiting} or {status: ready, action}; unknown ids wait; a pause of another browser origin is 403 not_owner.", query: &[], handler: |s, r| service::poll_from(s, r.param(0), r.origin.as_deref()) },
    Route { method: "GET", path: "/api/poll-repl/{pause_id}", access: Anyone, summary: "The next REPL eval queued for a pause, or {eval_id: null}.", query: &[], handler: |s, r| service::poll_repl_from(s, r.param(0), r.origin.as_deref()) },
    Route { method: "GET", path: "/api/origins", access: Guarded, summary: "Browser origins: granted (in the web UI, kept with --db), allow_origin (--allow-origin), pending (pages refused on the browser-client endpoints, waiting for an answer: origin, first_at, last_at, requests, path; the newest 16) and denied.", query: &[], handler: |s, _| wire(service::origins(s)) },
    Route { method: "POST", path: "/api/origins", access: Guarded, summary: "Allow or deny a browser origin: {origin, decision: allow|deny}. Allow lets its pages use the browser-client endpoints (report calls, poll their pauses, answer their REPL) for the session, kept with --db (at most 64, else 409 too_many_origins); deny revokes it and keeps refusing it without asking again.", query: &[], handler: |s, r| wire(service::decide_origin(s, &r.json()?)?) },
    Route { method: "GET", path: "/api/debug-client.js", access: Anyone, summary: "The browser debug client: an ES module (application/javascript) with this server's URL baked in, which a web page imports to debug its own functions (withDebug, debugCall, ...).", query: &[], handler: |_, _| Err(ApiError::new(405, "method_not_allowed", "the debug client answers GET only (it is served before routing)")) },
    Route { method: "GET", path: "/api/paused", access: Guarded, summary: "Paused executions: id, when (before or after the call; an after-pause takes only continue), call data, REPL sessions, last_poll_at (when its program last polled) and gone (it stopped polling: see limits).", query: &[], handler: |s, _| wire(service::paused(s, Payloads::Included)) },
    Route { method: "POST", path: "/api/paused/continue-all", access: Guarded, summary: "Resume every current pause with continue: {status, resumed: [pause_id]}.", query: &[], handler: |s, _| wire(service::continue_all(s)) },
    Route { method: "POST", path: "/api/paused/{pause_id}/continue", access: Guarded, summary: "Resume a pause: {action: continue|modify|skip|raise|replace, modified_args?, modified_kwargs?, fake_result?, exception_type?, exception_message?, replacement_function?}.", query: &[], handler: |s, r| wire(service::continue_pause(s, r.param(0), &r.json()?, r.actor())?) },
    Route { method: "POST", path: "/api/paused/{pause_id}/dismiss", access: Guarded, summary: "Remove the pause of a program that stopped polling (gone), with its program's other gone pauses: {status, dismissed: [pause_id]}. Each is resumed with continue, so a program that polls again goes on. 409 program_not_gone while it still polls.", query: &[], handler: |s, r| wire(service::dismiss_pause(s, r.param(0), r.actor())?) },
    Route { method: "POST", path: "/api/repl/start", access: Guarded, summary: "Start a REPL session on a pause: {pause_id, scope?}; with scope true a Python program is asked for dir() first (the session's scope: the names evaluations see). 410 program_gone when its program stopped polling.", query: &[], handler: |s, r| wire(service::repl_start(s, &r.json()?)?) },
    Route { method: "GET", path: "/api/repl/sessions", access: Guarded, summary: "REPL sessions, newest first.", query: &[("search", "substring of session, pause, function, call or process"), ("status", "active or closed"), ("from", "started at or after (epoch seconds)"), ("to", "started at or before (epoch seconds)")], handler: repl_sessions },
    Route { method: "GET", path: "/api/repl/{session_id}", access: Guarded, summary: "One REPL session with its transcript.", query: &[], handler: |s, r| service::repl_session(s, r.param(0)) },
    Route { method: "POST", path: "/api/repl/{session_id}/eval", access: Guarded, summary: "Evaluate {expr} in the paused program; blocks until it answers (default 30 s, then 504; 410 program_gone as soon as its program stops polling).", query: &[], handler: |s, r| wire(service::repl_eval(s, r.param(0), r.json()?.get("expr"), s.config.repl_timeout)?) },
    Route { method: "POST", path: "/api/repl/{session_id}/close", access: Guarded, summary: "Close a REPL session, releasing waiting evals.", query: &[], handler: |s, r| wire(service::repl_close(s, r.param(0))?) },
    Route { method: "POST", path: "/api/report-com-error", access: Guarded, summary: "A client reports a failed request to the server (the last 500 are kept).", query: &[], handler: |s, r| wire(service::report_com_error(s, r.json()?)) },
    Route { method: "GET", path: "/api/com-errors", access: Guarded, summary: "Reported communication errors, oldest first.", query: &[], handler: |s, _| Ok(service::com_errors(s)) },
    Route { method: "GET", path: "/api/call-records", access: Guarded, summary: "Call records (completed calls, client events, external tool calls), newest first; with format=jsonl every matching record as JSON Lines. A search or process filter reads records one by one for at most 1.5 s: then scanned and search_truncated say how far it got.", query: &[("limit", "page size (default 100, at most 1000)"), ("offset", "records to skip (default 0)"), ("function", "only this method_name"), ("status", "only this status (success, exception, ...)"), ("process", "only this process: its process_key or its pid"), ("source", "program (the debugged program's calls and events) or mcp_client (the server's calls to external MCP servers)"), ("search", "text in the rendered arguments, keyword arguments, result or exception, in any case"), ("client_events", "the client's own events (with_debug.register, the _cideldill_alias_name attribute probe): show (default), hide (then client_events_hidden counts them) or only; when given, they are marked client_event: true"), ("format", "json (default: a page) or jsonl (every matching record, one per line; limit and offset do not apply)")], handler: call_records },
    Route { method: "GET", path: "/api/runs/compare", access: Guarded, summary: "Compare two runs (a run is what one process recorded; its id is the process_key): their calls in call-tree order (without the client's own events) aligned by function and depth, so an inserted or missing call shifts nothing else; each aligned pair marked same, different_arguments, different_result, different_exception (one or several), only_in_a or only_in_b, by the CIDs of the stored values (placeholders of unpicklable objects by their type, texts and attributes, memory addresses left out). Answers {a, b (run_id, label, script, page_url, calls, compared), truncated, total_pairs, offset, limit, counts (of every mark over all pairs), first_divergence {index, function, marks} or null, pairs [{index, function, marks, a, b}] (each side: call_id, function, depth, status, signature, args, result, exception; values {name, cid, shown})}. At most 1,000 calls of each run are compared (truncated says when a run has more); 404 run_not_found for an unknown run.", query: &[("a", "the first run's process_key (required)"), ("b", "the second run's process_key (required)"), ("offset", "aligned pairs to skip (default 0)"), ("limit", "aligned pairs to return (default 100, at most 1000)")], handler: |s, r| wire(service::compare_runs(s, r.query("a"), r.query("b"), offset(r)?, limit(r, 100)?)?) },
    Route { method: "POST", path: "/api/call-records/{call_id}/note", access: Guarded, summary: "Write a note on a call record (or event): {note} (\"\" removes it). The record's JSON then carries note, the text search finds it, and the export includes it. Answers {status, call_id, note}; 404 record_not_found for an unknown call id.", query: &[], handler: |s, r| wire(service::rest_record_note(s, r.param(0), &r.json()?)?) },
    Route { method: "GET", path: "/api/runs", access: Guarded, summary: "Runs (what one process recorded; run_id is its process key), newest first: run_id, program, page_url, pid, start, end, calls, events (the program's), client_events (the client's own), exceptions (calls that raised), label, notes; with total, offset and limit.", query: &[("limit", "page size (default 100, at most 1000)"), ("offset", "runs to skip (default 0)")], handler: |s, r| wire(service::runs(s, offset(r)?, limit(r, 100)?)) },
    Route { method: "DELETE", path: "/api/runs/{run_id}", access: Guarded, summary: "Delete a run for good: its call records and events, the execution-history entries of its calls, its label and notes, and the stored objects no other record (kept, in flight or paused) uses (GET /api/objects/<cid> answers 404 for them afterwards; with --db their bytes stay in the append-only file, unreachable). With --db a tombstone is synced to disk before the answer, so the run stays deleted after a crash. Answers {status, run_id, records, history_entries, objects, object_bytes, had_label_or_notes}; 404 run_not_found for an unknown run; 409 run_paused (with pause_id) while one of its calls is paused. A program still running may go on calling: what it records afterwards starts the run again under the same run_id. Publishes run_deleted.", query: &[], handler: |s, r| wire(service::delete_run(s, r.param(0))?) },
    Route { method: "POST", path: "/api/runs/{run_id}/label", access: Guarded, summary: "Label a run: {label} (one line, \"\" clears it). Answers {status, run_id, label, notes}; 404 run_not_found for an unknown run.", query: &[], handler: |s, r| wire(service::rest_label_run(s, r.param(0), &r.json()?)?) },
    Route { method: "POST", path: "/api/runs/{run_id}/notes", access: Guarded, summary: "Set a run's notes: {notes} (\"\" clears them). Answers {status, run_id, label, notes}; 404 run_not_found for an unknown run.", query: &[], handler: |s, r| wire(service::rest_notes_run(s, r.param(0), &r.json()?)?) },
    Route { method: "POST", path: "/api/call-records/{record_id}/replay", access: Guarded, summary: "Replay a recorded call in a live program, never on the server: {args?, kwargs?, into_run?}, arguments as JSON values or {\"cid\": ...} of a stored object (default: the record's own, which must be plain values: None, bool, int, float, str, bytes, list, tuple, dict, set). The call is sent as a Python expression through the REPL relay of a paused call of the record's run (or of into_run): in a pause of the same function it calls self, in a pause of another function it finds the function in the client's function registry and calls it through debug_call; calls the program makes meanwhile run without pausing. Answers the new record (replay_of names the source), its result or exception and the differences from the source; 409 no_live_program when no program of that run is paused and polling, replay_not_run when the program did not call the function (e.g. a method of a wrapped object, which the registry does not hold), 410 program_gone, 504 when it does not answer in time.", query: &[], handler: |s, r| wire(service::replay_call(s, r.param(0), &r.json()?, s.config.repl_timeout)?) },
    Route { method: "POST", path: "/api/runs/{run_id}/replay", access: Guarded, summary: "Replay sequence: replays the run's calls (or {call_ids}, at most 100) in order with their recorded arguments, into a live paused program of the run (or of into_run), and stops at the first divergence (divergence: the replay in full) or at the first call that cannot be replayed (stopped: its error). Answers {report_id (the web UI's report: /runs/replayed/<report_id>), run_id, into_run, replayed [{source_id, record_id, function, same}], completed, divergence, stopped, truncated}.", query: &[], handler: |s, r| wire(service::replay_run(s, r.param(0), &r.json()?, s.config.repl_timeout)?) },
    Route { method: "GET", path: "/api/objects", access: Guarded, summary: "Stored objects (CID, size, format), newest first.", query: PAGE, handler: |s, r| wire(service::objects(s, offset(r)?, limit(r, 100)?)) },
    Route { method: "GET", path: "/api/objects/{cid}", access: Guarded, summary: "One stored object: format, size, rendered value, and the structured view {type, repr, attributes} (data with ?data=true).", query: &[("data", "true to include the payload (base64 for pickles)")], handler: |s, r| wire(service::object(s, r.param(0), matches!(r.query("data"), Some("1" | "true" | "yes")))?) },
    Route { method: "GET", path: "/api/snapshots", access: Guarded, summary: "Object snapshots: every argument, target and result seen with a client_ref, oldest first.", query: &[("process_key", "only this process"), ("client_ref", "only this client object")], handler: |s, r| Ok(service::snapshots(s, r.query("process_key"), r.query("client_ref"))) },
    Route { method: "GET", path: "/api/mcp-clients", access: Guarded, summary: "External MCP servers with status (connecting, connected, disconnected, error, failed), transport, tools, last error and auth {state: none|required|authorizing|authorized|error, message?, scopes?; authorize_url and authorize_method (POST) while required or error}.", query: &[], handler: |s, _| service::external::clients(s) },
    Route { method: "POST", path: "/api/mcp-clients/connect", access: Guarded, summary: "Connect an external MCP server at run time (not persisted): {name, command?, args?, env?, cwd?, url?, transport|type?, headers?, timeout_s?, auto_reconnect?, allowed_tools?, denied_tools?}.", query: &[], handler: |s, r| service::external::connect(s, &r.json()?) },
    Route { method: "POST", path: "/api/mcp-clients/{name}/disconnect", access: Guarded, summary: "Disconnect an external MCP server, keeping its definition; in-flight calls fail at once.", query: &[], handler: |s, r| service::external::disconnect(s, r.param(0)) },
    Route { method: "POST", path: "/api/mcp-clients/{name}/reconnect", access: Guarded, summary: "Reconnect an external MCP server with its retained definition (resets the automatic retry count).", query: &[], handler: |s, r| service::external::reconnect(s, r.param(0)) },
    Route { method: "POST", path: "/api/mcp-clients/{name}/authorize", access: Guarded, summary: "Start the MCP authorization (OAuth 2.1) of an external HTTP server: discovery, client registration, PKCE; answers {name, authorization_url}. A person opens the URL in a browser; the authorization server sends it back to GET /oauth/callback, which keeps the tokens (in $CIDELDILL_HOME/mcp_tokens.json, 0600) and reconnects the server.", query: &[], handler: |s, r| service::external::authorize(s, r.param(0)) },
    Route { method: "GET", path: "/api/mcp-tools", access: Guarded, summary: "Tools of the connected external MCP servers: {name: server/tool, server, original_name, description, input_schema}.", query: &[("server", "only this server's tools")], handler: |s, r| service::external::tools(s, r.query("server").filter(|v| !v.is_empty())) },
    Route { method: "POST", path: "/api/mcp-tools/call", access: Guarded, summary: "Call an external tool: {tool: server/tool (or a bare name unique across servers), arguments?}; the full result is returned, recorded and stored.", query: &[], handler: |s, r| service::external::call_rest(s, &r.json()?) },
    Route { method: "GET", path: "/api/mcp-resources", access: Guarded, summary: "Resources of the connected external MCP servers, each with its server.", query: &[("server", "only this server's resources")], handler: |s, r| service::external::resources(s, r.query("server").filter(|v| !v.is_empty())) },
    Route { method: "POST", path: "/api/mcp-resources/read", access: Guarded, summary: "Read an external resource: {server, uri} -> {content, mime_type, contents}.", query: &[], handler: |s, r| service::external::read_resource(s, &r.json()?) },
    Route { method: "GET", path: "/api/events", access: Guarded, summary: "Server-sent events: execution_paused, execution_resumed, call_completed, breakpoints_changed, functions_changed, repl_session, repl_output, external_server, log, origins_changed, run_deleted, run_changed, each with id = seq and data {seq, type, ...}; Last-Event-ID (or ?last_event_id) replays what was missed, or sends resync.", query: &[("last_event_id", "resume after this event id (like the Last-Event-ID header)")], handler: |_, _| Err(ApiError::new(405, "method_not_allowed", "the event stream answers GET only (it is served before routing)")) },
    Route { method: "GET", path: "/api/status", access: Guarded, summary: "Server summary: version, database, counts.", query: &[("join_nonce", "hex nonce; the answer carries X-Cideldill-Join-Proof, the HMAC of the server's join secret (see docs/trust.md)")], handler: |s, _| wire(service::server_status(s)) },
    Route { method: "GET", path: "/api/openapi.json", access: Guarded, summary: "This API as an OpenAPI 3.1 document.", query: &[], handler: |_, r| Ok(openapi_document(r)) },
    Route { method: "GET", path: "/openapi.json", access: Guarded, summary: "Same as /api/openapi.json.", query: &[], handler: |_, r| Ok(openapi_document(r)) },
    Route { method: "GET", path: "/", access: Guarded, summary: "Server summary and a pointer to the API description.", query: &[], handler: |s, _| Ok(index(s)) },
];

/// A typed result of `service` in its wire shape.
fn wire<T: Serialize>(result: T) -> Result<Value, ApiError> {
    serde_json::to_value(result).map_err(|e| ApiError::internal(format!("unserializable: {e}")))
}

/// `POST /api/breakpoints`: one breakpoint (an object), or a list of them (an array).
fn breakpoints_add(s: &Shared, r: &Req) -> Result<Value, ApiError> {
    if r.body.trim_ascii_start().first() == Some(&b'[') {
        return match super::parse_json_tolerant(&r.body) {
            Ok(Value::Array(items)) => wire(service::breakpoints_add(s, &items)?),
            Ok(_) => Err(ApiError::bad_request(
                "invalid_json",
                "request body is not valid JSON",
            )),
            Err(e) => Err(ApiError::bad_request(
                "invalid_json",
                format!("request body is not valid JSON: {e}"),
            )),
        };
    }
    wire(service::breakpoint_add(s, &r.json()?)?)
}

fn number(r: &Req, key: &str, default: usize, max: usize) -> Result<usize, ApiError> {
    match r.query(key) {
        None | Some("") => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(ApiError::bad_request(
                &format!("invalid_{key}"),
                format!("{key} must be an integer between 0 and {max}"),
            )),
        },
    }
}

fn limit(r: &Req, default: usize) -> Result<usize, ApiError> {
    number(r, "limit", default, MAX_PAGE_LIMIT)
}

fn offset(r: &Req) -> Result<usize, ApiError> {
    number(r, "offset", 0, usize::MAX)
}

/// The filters of a call-record listing, from its query (empty values filter nothing).
/// Client events are listed unless `client_events` says otherwise, as the original listed them.
pub(super) fn record_filter(r: &Req) -> Result<RecordFilter<'_>, ApiError> {
    service::record_filter(|key| r.query(key), ClientEvents::Show)
}

/// Whether a call-record listing names its choice of client events (then they are marked
/// `"client_event": true`).
pub(super) fn names_client_events(r: &Req) -> bool {
    r.query("client_events").is_some_and(|v| !v.is_empty())
}

/// Whether a call-record listing asks for JSON Lines (`format=jsonl`); any other format but
/// `json` is refused.
pub(super) fn wants_jsonl(r: &Req) -> Result<bool, ApiError> {
    match r.query("format") {
        None | Some("" | "json") => Ok(false),
        Some("jsonl") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            "invalid_format",
            format!("format must be 'json' or 'jsonl', got '{other}'"),
        )),
    }
}

fn functions_listing(s: &Shared, r: &Req) -> Result<Value, ApiError> {
    if r.query("limit").is_some() {
        wire(service::functions_page(s, offset(r)?, limit(r, 100)?))
    } else {
        wire(service::functions(s))
    }
}

fn call_records(s: &Shared, r: &Req) -> Result<Value, ApiError> {
    if wants_jsonl(r)? {
        return Err(ApiError::internal("JSON Lines are served before routing"));
    }
    let mut page = service::call_records(s, &record_filter(r)?, offset(r)?, limit(r, 100)?);
    if names_client_events(r) {
        service::mark_client_events(&mut page.calls);
    }
    wire(page)
}

fn repl_sessions(s: &Shared, r: &Req) -> Result<Value, ApiError> {
    let time = |key: &str| -> Result<Option<f64>, ApiError> {
        match r.query(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite())
                .map(Some)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_timestamp",
                        format!("{key} must be epoch seconds, got '{v}'"),
                    )
                }),
        }
    };
    let active = match r.query("status").filter(|v| !v.is_empty()) {
        None => None,
        Some("active") => Some(true),
        Some("closed") => Some(false),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_status",
                format!("status must be 'active' or 'closed', got '{other}'"),
            ))
        }
    };
    let filter = SessionFilter {
        search: r.query("search").filter(|v| !v.is_empty()),
        active,
        from: time("from")?,
        to: time("to")?,
    };
    Ok(service::repl_sessions(s, &filter))
}

/// Matches `path` against a pattern, returning the captured segments.
fn match_path(pattern: &str, path: &str) -> Option<Vec<String>> {
    // Most patterns are rejected by their literal start, without splitting either string.
    match pattern.find('{') {
        None => return (pattern == path).then(Vec::new),
        Some(i) if !path.starts_with(&pattern[..i]) => return None,
        Some(_) => {}
    }
    let mut pat = pattern.split('/');
    let mut seg = path.split('/');
    let mut params = Vec::new();
    loop {
        match (pat.next(), seg.next()) {
            (None, None) => return Some(params),
            (Some(p), Some(s)) if p.starts_with('{') => {
                if s.is_empty() {
                    return None;
                }
                params.push(crate::urlenc::percent_decode(s));
            }
            (Some(p), Some(s)) if p == s => {}
            _ => return None,
        }
    }
}

/// The access rule of a request: its route's; for a bare `OPTIONS` (a preflight that does not
/// name its method) the most open rule of the routes on that path; unknown paths are guarded.
pub fn access(method: &str, path: &str) -> Access {
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    let mut on_path = ROUTES.iter().filter(|r| match_path(r.path, path).is_some());
    let method = if method == "HEAD" { "GET" } else { method };
    let open = |r: &&Route| r.access == Anyone && (method == "OPTIONS" || r.method == method);
    if on_path.any(|r| open(&r)) {
        Anyone
    } else {
        Guarded
    }
}

/// Routes one request; also says the access rule of the route it went to (`Guarded` when none).
pub(super) fn route(shared: &Shared, req: &mut Req) -> (Reply, Access) {
    let mut access = Guarded;
    let reply = route_to(shared, req, &mut access);
    (reply, access)
}

fn route_to(shared: &Shared, req: &mut Req, access: &mut Access) -> Reply {
    let path = if req.path.len() > 1 {
        req.path.trim_end_matches('/').to_owned()
    } else {
        req.path.clone()
    };
    let is_api = path == "/api" || path.starts_with("/api/");
    let matching: Vec<(&Route, Vec<String>)> = ROUTES
        .iter()
        .filter_map(|r| match_path(r.path, &path).map(|p| (r, p)))
        .collect();
    if req.method == "OPTIONS" && is_api {
        // Compat: 200 on paths with a real route, 204 on the others.
        return Reply::empty(if matching.is_empty() { 204 } else { 200 });
    }
    if matching.is_empty() {
        return Reply::error(&ApiError::not_found(
            "not_found",
            format!("no such endpoint: {} {}", req.method, req.path),
        ));
    }
    let method = if req.method == "HEAD" {
        "GET"
    } else {
        req.method.as_str()
    };
    let Some((route, params)) = matching.iter().find(|(r, _)| r.method == method) else {
        let allowed: Vec<&str> = matching.iter().map(|(r, _)| r.method).collect();
        return Reply::error(&ApiError::new(
            405,
            "method_not_allowed",
            format!(
                "{} {} is not supported; allowed: {}",
                req.method,
                req.path,
                allowed.join(", ")
            ),
        ))
        .with_header("Allow", &allowed.join(", "));
    };
    req.params = params.clone();
    *access = route.access;
    match (route.handler)(shared, req) {
        Ok(v) => Reply::json(200, &v),
        Err(e) => {
            if e.status >= 500 {
                log::warn!(
                    "http: {} {} -> {e}",
                    req.method,
                    super::logging::loggable(&req.path)
                );
            }
            Reply::error(&e)
        }
    }
}

/// The REST reference of docs/rest.md, generated from `ROUTES`.
pub fn reference_markdown() -> String {
    let mut out =
        String::from("| Method | Path | Browser origins | What it does |\n|---|---|---|---|\n");
    for r in ROUTES {
        let mut what = r.summary.replace('|', "\\|");
        if !r.query.is_empty() {
            let q: Vec<String> = r.query.iter().map(|(k, _)| format!("`{k}`")).collect();
            what.push_str(&format!(" Query: {}.", q.join(", ")));
        }
        let origins = match r.access {
            Anyone if r.path == "/api/debug-client.js" => "any (CORS `*`)",
            Anyone => "own, --allow-origin and granted ones (CORS `*`)",
            Guarded => "own only",
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            r.method, r.path, origins, what
        ));
    }
    out
}

/// The OpenAPI document of the route table.
fn openapi_document(r: &Req) -> Value {
    openapi_for(r.host.as_deref())
}

/// The OpenAPI document of the route table, its server named by `host` (the request's Host).
pub(super) fn openapi_for(host: Option<&str>) -> Value {
    let endpoints: Vec<Endpoint> = ROUTES
        .iter()
        .map(|r| Endpoint {
            method: r.method,
            path: r.path,
            summary: r.summary,
            query: r.query,
        })
        .collect();
    openapi::document(host, &endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The route table's texts are literals; they must state the limits of `limits.rs`.
    #[test]
    fn route_texts_state_the_limits() {
        use crate::limits::{DEFAULT_REPL_TIMEOUT_S, MAX_COM_ERRORS, SCAN_BUDGET};
        let summary = |path: &str, method: &str| {
            ROUTES
                .iter()
                .find(|r| r.path == path && r.method == method)
                .unwrap()
                .summary
        };
        for r in ROUTES {
            for (name, text) in r.query {
                if *name == "limit" && text.contains("at most") {
                    assert!(
                        text.contains(&format!("at most {MAX_PAGE_LIMIT})")),
                        "{text}"
                    );
                }
            }
        }
        let scan = format!("at most {} s", SCAN_BUDGET.as_secs_f64());
        assert!(summary("/api/call-records", "GET").contains(&scan));
        let kept = format!("the last {MAX_COM_ERRORS} are kept");
        assert!(summary("/api/report-com-error", "POST").contains(&kept));
        let pending = format!("the newest {})", crate::limits::MAX_PENDING_ORIGINS);
        assert!(summary("/api/origins", "GET").contains(&pending));
        let granted = format!("at most {}, else 409", crate::limits::MAX_GRANTED_ORIGINS);
        assert!(summary("/api/origins", "POST").contains(&granted));
        let eval = format!("default {DEFAULT_REPL_TIMEOUT_S} s");
        assert!(summary("/api/repl/{session_id}/eval", "POST").contains(&eval));
    }

    #[test]
    fn patterns_capture_segments() {
        assert_eq!(
            match_path("/api/poll/{id}", "/api/poll/abc"),
            Some(vec!["abc".into()])
        );
        assert_eq!(match_path("/api/poll/{id}", "/api/poll/"), None);
        assert_eq!(match_path("/api/poll/{id}", "/api/poll/a/b"), None);
        assert_eq!(
            match_path(
                "/api/breakpoints/{name}/behavior",
                "/api/breakpoints/Type.__call__/behavior"
            ),
            Some(vec!["Type.__call__".into()])
        );
        assert_eq!(
            match_path("/api/breakpoints/{name}", "/api/breakpoints/a%20b"),
            Some(vec!["a b".into()])
        );
    }

    #[test]
    fn table_has_unique_method_path_pairs() {
        let mut seen = std::collections::HashSet::new();
        for r in ROUTES {
            assert!(
                seen.insert((r.method, r.path)),
                "duplicate route {} {}",
                r.method,
                r.path
            );
            assert!(!r.summary.is_empty());
            assert!(["GET", "POST", "DELETE"].contains(&r.method));
        }
    }

    #[test]
    fn literal_routes_win_over_patterns() {
        let first = ROUTES
            .iter()
            .position(|r| r.path == "/api/repl/sessions")
            .unwrap();
        let pattern = ROUTES
            .iter()
            .position(|r| r.path == "/api/repl/{session_id}")
            .unwrap();
        assert!(first < pattern);
    }
}
