//! `breakpoint://` resources: five fixed views of the session, one resource per current pause,
//! templates for pauses, calls and stored objects, and which resources an event changes (for
//! `notifications/resources/updated`). Contents are JSON text, never base64 payloads.

use serde_json::{json, Map, Value};

use crate::events::EventKind;
use crate::jsonrpc::RpcError;
use crate::records::{ClientEvents, RecordFilter};
use crate::service::{self, Payloads};
use crate::state::Shared;

use super::RESOURCE_NOT_FOUND;

const MIME: &str = "application/json";

/// The fixed resources: URI, name, description.
const FIXED: [(&str, &str, &str); 5] = [
    (
        "breakpoint://status",
        "Breakpoint Status",
        "Summary of breakpoint server status: breakpoints, paused calls, recorded calls, and whether pausing is on.",
    ),
    (
        "breakpoint://breakpoints",
        "Breakpoints",
        "Breakpoints with their before/after behaviors, replacements and switches (enabled), and the master switch (pausing).",
    ),
    (
        "breakpoint://paused",
        "Paused Executions",
        "Calls paused right now, with their rendered arguments.",
    ),
    (
        "breakpoint://call-history",
        "Call History",
        "The 50 most recent call records, newest first, without the client's own events (client_events_hidden counts them).",
    ),
    (
        "breakpoint://functions",
        "Registered Functions",
        "Functions the program wrapped, with signatures and metadata.",
    ),
];

/// Strips a query, a fragment and a trailing `/` (as the original did before matching).
pub fn normalize(uri: &str) -> String {
    let uri = uri.split(['?', '#']).next().unwrap_or(uri);
    uri.trim_end_matches('/').to_owned()
}

/// `resources/list`: the fixed ones plus one per current pause.
pub fn list(shared: &Shared) -> Vec<Value> {
    let mut out: Vec<Value> = FIXED
        .iter()
        .map(|(uri, name, description)| json!({"uri": uri, "name": name, "description": description, "mimeType": MIME}))
        .collect();
    for p in service::paused(shared, Payloads::Omitted).paused {
        let kind = if p.is_after() { "after" } else { "before" };
        out.push(json!({
            "uri": format!("breakpoint://paused/{}", p.id),
            "name": format!("Paused {} ({kind})", p.method_name()),
            "description": format!("The call of {} paused {kind} it ran, with its arguments and REPL sessions.", p.method_name()),
            "mimeType": MIME,
        }));
    }
    out
}

/// `resources/templates/list`.
pub fn templates() -> Vec<Value> {
    vec![
        json!({"uriTemplate": "breakpoint://paused/{pause_id}", "name": "Paused call", "description": "One paused call with its call data and REPL sessions.", "mimeType": MIME}),
        json!({"uriTemplate": "breakpoint://call/{call_id}", "name": "Call record", "description": "One recorded call (completed call or client event).", "mimeType": MIME}),
        json!({"uriTemplate": "breakpoint://object/{cid}", "name": "Stored object", "description": "A stored argument, result or exception: type, repr and attributes.", "mimeType": MIME}),
    ]
}

pub fn not_found(uri: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("resource not found: {uri}"))
        .with_data(json!({"uri": uri}))
}

/// The JSON a resource shows, if it exists.
fn content(shared: &Shared, uri: &str) -> Option<Value> {
    Some(match uri {
        "breakpoint://status" => {
            let s = service::server_status(shared);
            json!({"breakpoints": s.breakpoints, "paused": s.paused, "total_calls": s.total_calls,
                   "pausing": s.pausing})
        }
        "breakpoint://breakpoints" => super::tools::breakpoints_view(shared),
        "breakpoint://paused" => {
            serde_json::to_value(service::paused(shared, Payloads::Omitted)).ok()?
        }
        "breakpoint://call-history" => {
            // The program's calls: the client's own events are hidden, and counted.
            let filter = RecordFilter::default().with_client_events(ClientEvents::Hide);
            let page = service::call_records(shared, &filter, 0, 50);
            let truncated = page.truncated();
            json!({"calls": page.calls, "total_count": page.total_count, "truncated": truncated,
                   "client_events_hidden": page.client_events_hidden.unwrap_or(0)})
        }
        "breakpoint://functions" => {
            // The first 1,000 (the registry may hold 100,000): breakpoint_list_functions pages.
            let l = service::functions_page(shared, 0, 1000);
            json!({"functions": l.functions, "signatures": l.function_signatures,
                   "metadata": l.function_metadata, "total": l.total})
        }
        _ => {
            if let Some(id) = uri.strip_prefix("breakpoint://paused/") {
                return serde_json::to_value(service::pause(shared, id, Payloads::Omitted)?).ok();
            }
            if let Some(id) = uri.strip_prefix("breakpoint://call/") {
                return service::call_record(shared, id);
            }
            if let Some(cid) = uri.strip_prefix("breakpoint://object/") {
                let v = service::object_view(shared, cid).ok()?;
                return Some(
                    json!({"type": v.type_name, "repr": v.repr, "attributes": v.attributes, "cid": cid}),
                );
            }
            return None;
        }
    })
}

/// Whether a URI names an existing resource (for subscriptions).
pub fn exists(shared: &Shared, uri: &str) -> bool {
    FIXED.iter().any(|(u, _, _)| *u == uri) || content(shared, uri).is_some()
}

/// `resources/read`.
pub fn read(shared: &Shared, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let requested = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("uri is required"))?;
    let uri = normalize(requested);
    let value = content(shared, &uri).ok_or_else(|| not_found(requested))?;
    Ok(json!({"contents": [{"uri": requested, "mimeType": MIME, "text": value.to_string()}]}))
}

/// The resources whose content an event changes.
pub fn affected(kind: &EventKind) -> Vec<String> {
    let fixed = |uris: &[&str]| uris.iter().map(|u| (*u).to_owned()).collect::<Vec<_>>();
    match kind {
        EventKind::BreakpointsChanged => {
            fixed(&["breakpoint://breakpoints", "breakpoint://status"])
        }
        EventKind::FunctionsChanged => fixed(&["breakpoint://functions"]),
        EventKind::ExecutionPaused { pause_id, .. }
        | EventKind::ExecutionResumed { pause_id, .. } => {
            let mut v = fixed(&["breakpoint://paused", "breakpoint://status"]);
            v.push(format!("breakpoint://paused/{pause_id}"));
            v
        }
        EventKind::CallCompleted { call_id, .. } => {
            let mut v = fixed(&["breakpoint://call-history", "breakpoint://status"]);
            v.push(format!("breakpoint://call/{call_id}"));
            v
        }
        EventKind::ReplSession { .. }
        | EventKind::ReplOutput { .. }
        | EventKind::ExternalServer { .. }
        | EventKind::Log { .. }
        | EventKind::OriginsChanged
        | EventKind::RunChanged { .. } => Vec::new(),
        EventKind::RunDeleted { .. } => {
            fixed(&["breakpoint://call-history", "breakpoint://status"])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_normalized_like_the_original() {
        assert_eq!(normalize("breakpoint://status/"), "breakpoint://status");
        assert_eq!(
            normalize("breakpoint://paused?x=1#y"),
            "breakpoint://paused"
        );
    }

    #[test]
    fn events_map_to_the_resources_they_change() {
        let paused = affected(&EventKind::ExecutionPaused {
            pause_id: "p".into(),
            method_name: "f".into(),
            pause_reason: "breakpoint".into(),
            paused_at: 1.0,
        });
        assert!(paused.contains(&"breakpoint://paused/p".to_owned()));
        assert!(paused.contains(&"breakpoint://status".to_owned()));
        assert_eq!(
            affected(&EventKind::FunctionsChanged),
            vec!["breakpoint://functions".to_owned()]
        );
    }
}
