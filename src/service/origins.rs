//! Browser origins the user grants or denies (`GET`/`POST /api/origins`, the web UI's pending
//! requests): a granted origin's pages may use the browser-client endpoints (report their
//! calls, poll their pauses, answer their REPL), nothing more. Grants are kept with `--db`.

use serde::Serialize;
use serde_json::Value;

use super::Obj;
use crate::error::ApiError;
use crate::origins::{GrantError, Pending};
use crate::state::Shared;

/// The origins: granted in the web UI, given with `--allow-origin`, waiting for an answer,
/// denied.
#[derive(Serialize, Debug)]
pub struct OriginsView {
    pub granted: Vec<String>,
    pub allow_origin: Vec<String>,
    pub pending: Vec<Pending>,
    pub denied: Vec<String>,
}

/// `GET /api/origins`.
pub fn origins(shared: &Shared) -> OriginsView {
    let st = shared.lock();
    OriginsView {
        granted: st.origins.granted().to_vec(),
        allow_origin: shared.config.allow_origins.clone(),
        pending: st.origins.pending().cloned().collect(),
        denied: st.origins.denied().cloned().collect(),
    }
}

/// What `POST /api/origins` did.
#[derive(Serialize, Debug)]
pub struct Decided {
    pub status: &'static str,
    pub origin: String,
    pub decision: &'static str,
}

/// `POST /api/origins` `{origin, decision: allow|deny}`: allow grants the origin (for this
/// session, and kept with `--db`); deny revokes a grant, drops its pending request and keeps
/// refusing it without asking again.
pub fn decide_origin(shared: &Shared, body: &Obj) -> Result<Decided, ApiError> {
    let Some(origin) = body.get("origin").and_then(Value::as_str) else {
        return Err(ApiError::bad_request(
            "missing_origin",
            "origin is required, e.g. \"http://localhost:3000\"",
        ));
    };
    let decision = match body.get("decision").and_then(Value::as_str) {
        Some("allow") => "allow",
        Some("deny") => "deny",
        _ => {
            return Err(ApiError::bad_request(
                "invalid_decision",
                "decision must be 'allow' or 'deny'",
            ))
        }
    };
    let done = super::settings::persisted_origins(shared, |st| match decision {
        "allow" => st.origins.allow(origin),
        _ => st.origins.deny(origin),
    })?;
    match done {
        Ok(origin) => {
            log::info!("browser origin {origin}: {decision} (from the REST API or web UI)");
            Ok(Decided {
                status: "ok",
                origin,
                decision,
            })
        }
        Err(GrantError::Invalid(o)) => Err(ApiError::bad_request(
            "invalid_origin",
            format!(
                "{o:?} is not an origin: scheme://host[:port] with http or https, at most {} bytes",
                crate::limits::MAX_ORIGIN_BYTES
            ),
        )),
        Err(GrantError::Full) => Err(ApiError::new(
            409,
            "too_many_origins",
            format!(
                "{} origins are granted already: deny one first, or use --allow-origin",
                crate::limits::MAX_GRANTED_ORIGINS
            ),
        )),
    }
}
