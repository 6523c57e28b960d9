//! The stateless MCP revision 2026-07-28 (the "modern era"), as far as it differs from the
//! legacy one: which request opens it on a connection, the per-request envelope in
//! `params._meta` and its errors, the fields every result carries (`resultType`, the server's
//! info in `_meta`, cache hints on lists and reads), `server/discover`, the methods the revision
//! removed, and the filter of `subscriptions/listen`. Pure: `Mcp` (mod.rs) holds the state and
//! runs the same handlers for both eras.
//!
//! The rules (MCP specification, revision 2026-07-28): there is no `initialize`; every request
//! carries `io.modelcontextprotocol/protocolVersion` and `…/clientCapabilities` (and optionally
//! `…/clientInfo`) in `params._meta`; a missing key is -32602 naming it, a revision the server
//! does not speak is -32022 with `data.supported` and `data.requested`; `server/discover` needs
//! the envelope as every request does. `initialize`, `ping`, `logging/setLevel`,
//! `resources/subscribe` and `resources/unsubscribe` are not methods of it (-32601); notifications outside a
//! request's own progress reach the client only on `subscriptions/listen` streams, and only those
//! it opted into: the kinds its filter names, `notifications/message` at or above the
//! `io.modelcontextprotocol/logLevel` of the listen request's `_meta` (none without it), and our
//! `notifications/breakpoint/*` when the listen request's client capabilities declare
//! [`super::NOTIFICATIONS_EXTENSION`] (in `extensions` or `experimental`).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::resources;
use super::version;
use crate::jsonrpc::{Request, RequestId, RpcError, INVALID_PARAMS, METHOD_NOT_FOUND};

/// Request `_meta` key: the revision of this request.
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// Request `_meta` key: the client's capabilities for this request.
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// Request `_meta` key (optional): the client's name and version (not read: sessions of this
/// era have no client to name).
#[cfg(test)]
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// Request `_meta` key (optional): the lowest level of `notifications/message` the client wants
/// for this request (a listen stream: for as long as it is open); none without it.
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key: the server's name and version.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// Notification `_meta` key on a listen stream: the id of the `subscriptions/listen` request.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// MCP 2026-07-28, Streamable HTTP: a required header (`MCP-Protocol-Version`, `Mcp-Method`,
/// `Mcp-Name`) is missing or says something else than the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request's revision is not one the server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Methods the modern revision removed: answered -32601 on a modern connection.
pub const REMOVED: [&str; 4] = [
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// How long a client may cache a result that cannot change while the server runs (the tool
/// table, the prompts, the resource templates, what `server/discover` says).
pub const STATIC_TTL_MS: u64 = 300_000;

/// Whether a request opens the modern era on a connection whose era is not fixed yet: its
/// `params._meta` names a revision (whatever its value: a bad one is then answered -32022), or
/// it is `server/discover`.
pub fn marks_modern(req: &Request) -> bool {
    req.method == "server/discover"
        || req
            .params
            .get("_meta")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(PROTOCOL_VERSION_KEY))
}

/// -32022 for a requested revision we do not speak, listing those we do.
pub fn unsupported_version(requested: &Value) -> RpcError {
    RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version {requested}; this server speaks {}",
            version::all_supported().join(", ")
        ),
    )
    .with_data(json!({"supported": version::all_supported(), "requested": requested}))
}

/// `initialize` in the modern era: the revision has no such method, so -32601 (over HTTP: 404),
/// with our revisions in `data.supported` so that a client learns which to use.
pub fn initialize_refused() -> RpcError {
    RpcError::new(
        METHOD_NOT_FOUND,
        "method not found: initialize (the stateless revision 2026-07-28 has no handshake: \
         send the envelope in params._meta instead)",
    )
    .with_data(json!({"supported": version::all_supported()}))
}

/// The revision a request's `params._meta` names, if any (whatever its value).
pub fn named_version(req: &Request) -> Option<&str> {
    req.params
        .get("_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION_KEY))
        .and_then(Value::as_str)
}

/// Checks a modern request's envelope and returns its revision.
pub fn envelope(params: &Map<String, Value>) -> Result<&'static str, RpcError> {
    let required = [PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY];
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "params._meta must be an object carrying the required envelope keys {}",
                required.join(" and ")
            ),
        )
        .with_data(json!({"missing": required})));
    };
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "params._meta is missing the required envelope key(s): {}",
                missing.join(", ")
            ),
        )
        .with_data(json!({"missing": missing})));
    }
    requested_version(meta)
}

/// The revision named in `_meta`, when it is one we speak.
fn requested_version(meta: &Map<String, Value>) -> Result<&'static str, RpcError> {
    let requested = &meta[PROTOCOL_VERSION_KEY];
    let Some(text) = requested.as_str() else {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!("{PROTOCOL_VERSION_KEY} must be a string"),
        ));
    };
    version::MODERN
        .iter()
        .copied()
        .find(|v| *v == text)
        .ok_or_else(|| unsupported_version(requested))
}

/// The envelope check a modern request goes through before it is handled: every method but
/// `initialize` and the removed ones (answered -32601 whatever they carry). `server/discover`
/// needs the envelope too (its params are `RequestParams`).
pub fn check_request(req: &Request) -> Result<(), RpcError> {
    if req.method == "initialize" || REMOVED.contains(&req.method.as_str()) {
        return Ok(());
    }
    match &req.params {
        Value::Object(params) => envelope(params).map(drop),
        Value::Null => envelope(&Map::new()).map(drop),
        _ => Err(RpcError::new(INVALID_PARAMS, "params must be an object")),
    }
}

/// How long a client may cache the result of `method` (and so whether it carries the hints).
fn cache_ttl_ms(method: &str) -> Option<u64> {
    match method {
        "server/discover" | "tools/list" | "prompts/list" | "resources/templates/list" => {
            Some(STATIC_TTL_MS)
        }
        // Pauses come and go: these change with every event.
        "resources/list" | "resources/read" => Some(0),
        _ => None,
    }
}

/// What every modern result carries besides its own fields: `resultType`, the server's info in
/// `_meta`, and the cache hints of lists and reads (`cacheScope` private: the state is one
/// user's debugging session).
pub fn complete(mut result: Value, method: &str, server_info: &Value) -> Value {
    if let Value::Object(m) = &mut result {
        m.insert("resultType".into(), json!("complete"));
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(SERVER_INFO_KEY.into(), server_info.clone());
        }
        if let Some(ttl) = cache_ttl_ms(method) {
            m.insert("ttlMs".into(), json!(ttl));
            m.insert("cacheScope".into(), json!("private"));
        }
    }
    result
}

/// What one `subscriptions/listen` stream receives: the kinds its filter asks for, plus what the
/// listen request's envelope opted into (log messages, our custom notifications).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub resources_list_changed: bool,
    /// Normalised URIs whose `notifications/resources/updated` the stream receives.
    pub resource_uris: BTreeSet<String>,
    /// The client declared [`super::NOTIFICATIONS_EXTENSION`]: it gets
    /// `notifications/breakpoint/*`.
    pub custom: bool,
    /// Rank of the lowest `notifications/message` level the stream gets (`_meta` logLevel).
    pub log_level: Option<usize>,
}

impl Filter {
    /// The acknowledged filter, as `notifications/subscriptions/acknowledged` echoes it.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if self.resources_list_changed {
            m.insert("resourcesListChanged".into(), json!(true));
        }
        if !self.resource_uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.resource_uris));
        }
        Value::Object(m)
    }
}

/// The requested filter of a `subscriptions/listen`: which notification kinds, and which
/// resource URIs (normalised, at most `max_uris`). `toolsListChanged` and `promptsListChanged`
/// are accepted but never honoured: our tools and prompts do not change while the server runs
/// (the capabilities say `listChanged: false`). From the envelope in `_meta`: the log level
/// (`io.modelcontextprotocol/logLevel`, one of the RFC 5424 names) and whether the client
/// capabilities declare our custom notifications.
pub fn requested_filter(params: &Map<String, Value>, max_uris: usize) -> Result<Filter, RpcError> {
    let Some(n) = params.get("notifications").and_then(Value::as_object) else {
        return Err(RpcError::invalid_params(
            "notifications (the subscription filter) is required and must be an object",
        ));
    };
    let meta = params.get("_meta");
    let log_level = match meta.and_then(|m| m.get(LOG_LEVEL_KEY)) {
        None | Some(Value::Null) => None,
        Some(level) => Some(level.as_str().and_then(super::level_rank).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "{LOG_LEVEL_KEY} must be one of {}",
                super::LOG_LEVELS.join(", ")
            ))
        })?),
    };
    let mut filter = Filter {
        resources_list_changed: n.get("resourcesListChanged") == Some(&json!(true)),
        custom: super::wants_custom_notifications(
            meta.and_then(|m| m.get(CLIENT_CAPABILITIES_KEY)),
        ),
        log_level,
        ..Filter::default()
    };
    match n.get("resourceSubscriptions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(uris)) => {
            if uris.len() > max_uris {
                return Err(RpcError::invalid_params(format!(
                    "a listen stream may subscribe to at most {max_uris} resources"
                )));
            }
            for u in uris {
                let u = u.as_str().ok_or_else(|| {
                    RpcError::invalid_params("resourceSubscriptions must hold URI strings")
                })?;
                filter.resource_uris.insert(resources::normalize(u));
            }
        }
        Some(_) => {
            return Err(RpcError::invalid_params(
                "resourceSubscriptions must be an array of URIs",
            ))
        }
    }
    Ok(filter)
}

/// A notification's params with the listen stream's id added to its `_meta`.
pub fn stamped(params: &Value, subscription: &RequestId) -> Value {
    let mut params = match params {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(SUBSCRIPTION_ID_KEY.into(), subscription.to_value());
    }
    Value::Object(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::INVALID_PARAMS;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn env(version: Value) -> Map<String, Value> {
        params(json!({"_meta": {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: {}}}))
    }

    #[test]
    fn a_good_envelope_gives_its_revision() {
        assert_eq!(envelope(&env(json!("2026-07-28"))), Ok("2026-07-28"));
        let mut with_info = env(json!("2026-07-28"));
        with_info["_meta"][CLIENT_INFO_KEY] = json!({"name": "t", "version": "1"});
        assert_eq!(envelope(&with_info), Ok("2026-07-28"));
    }

    #[test]
    fn missing_envelope_keys_are_named() {
        let e = envelope(&params(json!({}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(
            e.message.contains(PROTOCOL_VERSION_KEY) && e.message.contains(CLIENT_CAPABILITIES_KEY)
        );
        let e = envelope(&params(
            json!({"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", "progressToken": 1}}),
        ))
        .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains(CLIENT_CAPABILITIES_KEY), "{}", e.message);
        assert!(!e.message.contains(PROTOCOL_VERSION_KEY), "{}", e.message);
        assert_eq!(e.data.unwrap()["missing"], json!([CLIENT_CAPABILITIES_KEY]));
        let e = envelope(&params(json!({"_meta": {CLIENT_CAPABILITIES_KEY: {}}}))).unwrap_err();
        assert_eq!(e.data.unwrap()["missing"], json!([PROTOCOL_VERSION_KEY]));
    }

    #[test]
    fn an_unsupported_revision_is_32022_listing_ours() {
        for bad in ["2099-01-01", "2025-11-25", ""] {
            let e = envelope(&env(json!(bad))).unwrap_err();
            assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION, "{bad}");
            let data = e.data.unwrap();
            assert_eq!(data["requested"], bad);
            assert_eq!(data["supported"], json!(version::all_supported()));
            assert_eq!(data["supported"][0], "2026-07-28");
        }
        let e = envelope(&env(json!(20260728))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS, "a number is a shape error");
    }

    #[test]
    fn the_era_is_marked_by_the_envelope_version_or_discover() {
        let req = |method: &str, params: Value| Request {
            id: RequestId::Num(1),
            method: method.into(),
            params,
        };
        assert!(marks_modern(&req("server/discover", Value::Null)));
        assert!(marks_modern(&req(
            "tools/list",
            Value::Object(env(json!("2026-07-28")))
        )));
        assert!(marks_modern(&req(
            "tools/list",
            Value::Object(env(json!("1999-01-01")))
        )));
        assert!(!marks_modern(&req(
            "tools/list",
            json!({"_meta": {"progressToken": 1}})
        )));
        assert!(!marks_modern(&req(
            "initialize",
            json!({"protocolVersion": "2025-11-25"})
        )));
        assert!(!marks_modern(&req("ping", Value::Null)));
    }

    #[test]
    fn discover_needs_the_envelope_and_initialize_is_not_a_method() {
        let req = |method: &str, params: Value| Request {
            id: RequestId::Num(1),
            method: method.into(),
            params,
        };
        let e = check_request(&req("server/discover", json!({}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        let e = check_request(&req("server/discover", Value::Null)).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        let good = Value::Object(env(json!("2026-07-28")));
        assert!(check_request(&req("server/discover", good)).is_ok());
        let bad = Value::Object(env(json!("2030-01-01")));
        let e = check_request(&req("server/discover", bad)).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert!(check_request(&req("ping", json!({}))).is_ok());
        assert!(check_request(&req("initialize", json!({}))).is_ok());
        let e = check_request(&req("tools/list", json!([1]))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        let e = initialize_refused();
        assert_eq!(e.code, METHOD_NOT_FOUND);
        assert_eq!(e.data.unwrap()["supported"][0], "2026-07-28");
    }

    #[test]
    fn results_are_completed_with_type_server_info_and_cache_hints() {
        let info = json!({"name": "s", "version": "1"});
        let r = complete(json!({"tools": []}), "tools/list", &info);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"][SERVER_INFO_KEY], info);
        assert_eq!(r["ttlMs"], STATIC_TTL_MS);
        assert_eq!(r["cacheScope"], "private");
        let r = complete(json!({"contents": []}), "resources/read", &info);
        assert_eq!(r["ttlMs"], 0);
        let r = complete(
            json!({"content": [], "_meta": {"x": 1}}),
            "tools/call",
            &info,
        );
        assert!(r.get("ttlMs").is_none() && r.get("cacheScope").is_none());
        assert_eq!(r["_meta"]["x"], 1, "the result's own _meta is kept");
    }

    #[test]
    fn listen_filters_are_read_normalised_and_bounded() {
        let f = requested_filter(
            &params(
                json!({"notifications": {"resourcesListChanged": true, "toolsListChanged": true,
                "resourceSubscriptions": ["breakpoint://paused/", "breakpoint://status"]}}),
            ),
            10,
        )
        .unwrap();
        assert!(f.resources_list_changed);
        assert_eq!(
            f.to_value(),
            json!({"resourcesListChanged": true,
                   "resourceSubscriptions": ["breakpoint://paused", "breakpoint://status"]})
        );
        assert_eq!(
            requested_filter(&params(json!({})), 10).unwrap_err().code,
            INVALID_PARAMS
        );
        let many = json!({"notifications": {"resourceSubscriptions": ["a", "b", "c"]}});
        assert_eq!(
            requested_filter(&params(many), 2).unwrap_err().code,
            INVALID_PARAMS
        );
        let bad = json!({"notifications": {"resourceSubscriptions": [1]}});
        assert_eq!(
            requested_filter(&params(bad), 2).unwrap_err().code,
            INVALID_PARAMS
        );
        let id = RequestId::Str("l-1".into());
        let s = stamped(&json!({"uri": "u"}), &id);
        assert_eq!(
            s,
            json!({"uri": "u", "_meta": {SUBSCRIPTION_ID_KEY: "l-1"}})
        );
        assert_eq!(
            stamped(&Value::Null, &RequestId::Num(3))["_meta"][SUBSCRIPTION_ID_KEY],
            3
        );
    }
}
