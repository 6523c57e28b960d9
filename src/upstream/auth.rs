//! MCP authorization, the client side (OAuth 2.1 as the MCP specification's Authorization
//! section describes it, revisions 2025-11-25 and 2026-07-28), for upstream servers reached
//! over Streamable HTTP.
//!
//! - A server that answers 401 names its protected resource metadata (RFC 9728) in the
//!   `WWW-Authenticate: Bearer resource_metadata="…"` challenge ([`parse_challenge`]); without
//!   one, the well-known URLs are tried ([`resource_metadata_urls`]). The metadata names the
//!   authorization server, whose own metadata (RFC 8414, else OpenID Connect discovery) is
//!   fetched from the URLs [`server_metadata_urls`] lists, in the specification's order.
//! - The client is registered in the specification's order: pre-registered credentials (the
//!   entry's `"oauth"`), a client ID metadata document URL (when the authorization server
//!   supports them and one is configured), a registration kept from an earlier run, dynamic
//!   client registration (RFC 7591).
//! - Authorization code with PKCE S256 ([`Pkce`]) and the `resource` parameter (RFC 8707); the
//!   person opens the authorization URL in a browser, which lands on this server's own
//!   `GET /oauth/callback` ([`Auth::finish`]); `state` is single use and expires.
//! - Tokens are kept per server in `$CIDELDILL_HOME/mcp_tokens.json` (0600, written
//!   atomically, read at start; in memory only with `--memory`) and never logged. The HTTP
//!   transport asks [`ServerAuth::bearer`] for the token of every request and hands a 401 or
//!   403 to [`ServerAuth::challenged`]: an expired or refused token is refreshed once, else the
//!   server needs authorizing; a 403 `insufficient_scope` asks for the scopes the challenge
//!   names (step-up).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use ureq::Agent;

use super::config::{OAuthConfig, ServerConfig, Transport};
use crate::error::ApiError;
use crate::ids;
use crate::urlenc::encode_segment;

/// Longest any one exchange with an authorization server (or a metadata fetch) may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an authorization started with [`Auth::start`] may wait for its callback.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// Most authorizations waiting for their callback at once (the oldest is dropped).
const MAX_PENDING: usize = 32;
/// Largest metadata or token answer read.
const MAX_ANSWER: u64 = 256 * 1024;
/// A token this close to its expiry is refreshed before it is sent.
const EXPIRY_MARGIN_S: f64 = 10.0;

/// The file the tokens are kept in, under the data directory.
pub const TOKEN_FILE: &str = "mcp_tokens.json";

// ---------------------------------------------------------------------------------------------
// The pure parts.

/// What a `WWW-Authenticate: Bearer …` challenge says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// The parameters of the `Bearer` challenge in a `WWW-Authenticate` value (which may hold
/// several challenges); `None` when there is no Bearer challenge.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let mut rest = header.trim();
    let mut found: Option<Challenge> = None;
    let mut in_bearer = false;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let token_end = rest.find([' ', ',', '=', '\t']).unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = rest[token_end..].trim_start_matches([' ', '\t']);
        if token.is_empty() {
            break;
        }
        if let Some(value_part) = after.strip_prefix('=') {
            // An auth-param of the current challenge.
            let value_part = value_part.trim_start_matches([' ', '\t']);
            let (value, remaining) = if let Some(quoted) = value_part.strip_prefix('"') {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                value.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            } else {
                let end = value_part.find(',').unwrap_or(value_part.len());
                (value_part[..end].trim().to_owned(), &value_part[end..])
            };
            if in_bearer {
                if let Some(c) = found.as_mut() {
                    let slot = match token.to_ascii_lowercase().as_str() {
                        "resource_metadata" => Some(&mut c.resource_metadata),
                        "scope" => Some(&mut c.scope),
                        "error" => Some(&mut c.error),
                        "error_description" => Some(&mut c.error_description),
                        _ => None,
                    };
                    if let Some(slot) = slot {
                        *slot = Some(value);
                    }
                }
            }
            rest = remaining;
        } else {
            // A new challenge's scheme (or a token68, which Bearer challenges here never use).
            in_bearer = token.eq_ignore_ascii_case("bearer");
            if in_bearer && found.is_none() {
                found = Some(Challenge::default());
            }
            rest = after;
        }
    }
    found
}

/// `scheme://authority` and the path (no query or fragment) of an http(s) URL.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let scheme_end = url.find("://")?;
    let after = &url[scheme_end + 3..];
    let auth_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    if auth_end == 0 {
        return None;
    }
    let origin = &url[..scheme_end + 3 + auth_end];
    let rest = &after[auth_end..];
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    Some((origin, &rest[..path_end]))
}

/// The protected resource metadata URLs to try for a server without a `resource_metadata` in
/// its challenge: the path-aware well-known URL first, then the root one.
pub fn resource_metadata_urls(server_url: &str) -> Vec<String> {
    let Some((origin, path)) = split_url(server_url) else {
        return Vec::new();
    };
    let path = path.trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls
}

/// The authorization server metadata URLs of `issuer`, in the specification's order: for an
/// issuer with a path, OAuth (path inserted), OpenID Connect (path inserted), OpenID Connect
/// (path appended); without one, OAuth then OpenID Connect.
pub fn server_metadata_urls(issuer: &str) -> Vec<String> {
    let Some((origin, path)) = split_url(issuer) else {
        return Vec::new();
    };
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// The canonical URI of an MCP server (RFC 8707 as the MCP specification uses it): lowercase
/// scheme and host, no fragment, no trailing slash on the path.
pub fn canonical_resource(url: &str) -> String {
    let url = url.split('#').next().unwrap_or(url);
    let Some((origin, _)) = split_url(url) else {
        return url.to_owned();
    };
    let rest = &url[origin.len()..];
    let rest = if rest.len() > 1 && !rest.contains('?') {
        rest.trim_end_matches('/')
    } else if rest == "/" {
        ""
    } else {
        rest
    };
    format!("{}{rest}", origin.to_ascii_lowercase())
}

/// Whether the protected resource `resource` (from its metadata) covers the server at
/// `server_url`: the same origin, and the server's path at or under the resource's.
pub fn resource_covers(resource: &str, server_url: &str) -> bool {
    let (r, s) = (canonical_resource(resource), canonical_resource(server_url));
    match (split_url(&r), split_url(&s)) {
        (Some((ro, rp)), Some((so, sp))) => {
            let rp = rp.trim_end_matches('/');
            ro == so && (sp == rp || sp.starts_with(&format!("{rp}/")) || rp.is_empty())
        }
        _ => false,
    }
}

/// A PKCE pair: the verifier kept until the code is exchanged, and its S256 challenge.
#[derive(Clone, Debug)]
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Default for Pkce {
    fn default() -> Pkce {
        Pkce::new()
    }
}

impl Pkce {
    /// A new verifier of 64 characters (256 random bits) and its challenge.
    pub fn new() -> Pkce {
        Pkce::from_verifier(ids::random_hex(32))
    }

    /// The pair of a given verifier: challenge = BASE64URL(SHA-256(verifier)), unpadded.
    pub fn from_verifier(verifier: String) -> Pkce {
        let digest = Sha256::digest(verifier.as_bytes());
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        Pkce {
            verifier,
            challenge,
        }
    }
}

/// `base?k=v&…` with every value percent-encoded (`&` when `base` has a query already).
pub fn with_query(base: &str, params: &[(&str, &str)]) -> String {
    let mut out = base.to_owned();
    let mut sep = if base.contains('?') { '&' } else { '?' };
    for (k, v) in params {
        out.push(sep);
        out.push_str(&encode_segment(k));
        out.push('=');
        out.push_str(&encode_segment(v));
        sep = '&';
    }
    out
}

/// Tokens as an authorization server handed them out.
#[derive(Clone, Debug, PartialEq)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds since the epoch.
    pub expires_at: Option<f64>,
    pub scope: Option<String>,
}

impl Tokens {
    fn to_json(&self) -> Value {
        json!({
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
            "scope": self.scope,
        })
    }

    fn from_json(v: &Value) -> Option<Tokens> {
        Some(Tokens {
            access_token: v.get("access_token")?.as_str()?.to_owned(),
            refresh_token: v
                .get("refresh_token")
                .and_then(Value::as_str)
                .map(str::to_owned),
            expires_at: v.get("expires_at").and_then(Value::as_f64),
            scope: v.get("scope").and_then(Value::as_str).map(str::to_owned),
        })
    }

    fn expired(&self, now: f64) -> bool {
        self.expires_at.is_some_and(|t| now + EXPIRY_MARGIN_S >= t)
    }
}

/// Reads a token endpoint's answer (`now`: seconds since the epoch). A refresh that hands out
/// no new refresh token keeps `previous_refresh`.
pub fn parse_token_response(
    status: u16,
    body: &str,
    now: f64,
    previous_refresh: Option<&str>,
) -> Result<Tokens, String> {
    let v: Value = serde_json::from_str(body).map_err(|_| {
        format!(
            "the token endpoint answered HTTP {status} with a body that is not JSON: {}",
            super::peer::preview(body)
        )
    })?;
    if !(200..300).contains(&status) || v.get("error").is_some() {
        let error = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no error code");
        let desc = v
            .get("error_description")
            .and_then(Value::as_str)
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Err(format!(
            "the token endpoint refused (HTTP {status}, {error}{desc})"
        ));
    }
    let access_token = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    if let Some(t) = v.get("token_type").and_then(Value::as_str) {
        if !t.eq_ignore_ascii_case("bearer") {
            return Err(format!(
                "the token endpoint handed out a {t:?} token; only Bearer tokens are supported"
            ));
        }
    }
    if access_token.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
        return Err("the access token holds characters a header cannot carry".to_owned());
    }
    let expires_at = v
        .get("expires_in")
        .and_then(|e| {
            e.as_f64()
                .or_else(|| e.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|e| e.is_finite() && *e >= 0.0)
        .map(|e| now + e);
    Ok(Tokens {
        access_token: access_token.to_owned(),
        refresh_token: v
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| previous_refresh.map(str::to_owned)),
        expires_at,
        scope: v.get("scope").and_then(Value::as_str).map(str::to_owned),
    })
}

// ---------------------------------------------------------------------------------------------
// The state of each server.

/// A server's authorization state, as `GET /api/mcp-clients` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The server asked for no authorization.
    None,
    /// It answered 401 (or 403 `insufficient_scope`) and needs a person to authorize.
    Required,
    /// An authorization URL was handed out; its callback has not come yet.
    Authorizing,
    /// A token is held.
    Authorized,
    /// The last authorization or refresh failed (see the message).
    Error,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::None => "none",
            State::Required => "required",
            State::Authorizing => "authorizing",
            State::Authorized => "authorized",
            State::Error => "error",
        }
    }
}

/// The scopes of several space-separated lists, each once, in the order first named.
fn scope_union<'a>(lists: impl IntoIterator<Item = &'a str>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for s in lists.into_iter().flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out.join(" ")
}

/// How the client authenticates at the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ClientInfo {
    client_id: String,
    client_secret: Option<String>,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    auth_method: String,
}

impl ClientInfo {
    fn to_json(&self) -> Value {
        json!({"client_id": self.client_id, "client_secret": self.client_secret, "auth_method": self.auth_method})
    }

    fn from_json(v: &Value) -> Option<ClientInfo> {
        Some(ClientInfo {
            client_id: v.get("client_id")?.as_str()?.to_owned(),
            client_secret: v
                .get("client_secret")
                .and_then(Value::as_str)
                .map(str::to_owned),
            auth_method: v
                .get("auth_method")
                .and_then(Value::as_str)
                .unwrap_or("none")
                .to_owned(),
        })
    }
}

/// What a refresh needs: where the tokens came from and as whom.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Grant {
    issuer: String,
    token_endpoint: String,
    resource: String,
    client: ClientInfo,
}

/// One server's authorization.
pub struct ServerAuth {
    name: String,
    url: String,
    oauth: Option<OAuthConfig>,
    auth: Arc<Auth>,
    inner: Mutex<Inner>,
    /// Held while refreshing, so concurrent 401s refresh once.
    refreshing: Mutex<()>,
}

struct Inner {
    state: State,
    message: Option<String>,
    challenge: Option<Challenge>,
    tokens: Option<Tokens>,
    grant: Option<Grant>,
    /// The scope the last authorization asked for: a step-up asks for it again with the new
    /// one, so that what was granted before is not dropped.
    requested_scope: Option<String>,
}

impl ServerAuth {
    /// The access token to send (refreshed first when it has expired and can be).
    pub fn bearer(&self) -> Option<String> {
        let (token, expired) = {
            let inner = lock(&self.inner);
            let t = inner.tokens.as_ref()?;
            (
                t.access_token.clone(),
                t.expired(ids::now()) && t.refresh_token.is_some(),
            )
        };
        if expired && self.refresh(Some(&token)) {
            return lock(&self.inner)
                .tokens
                .as_ref()
                .map(|t| t.access_token.clone());
        }
        Some(token)
    }

    /// A 401 or 403 answer (`sent`: the token the request carried). True when the request
    /// should be sent once more (the token was refreshed meanwhile or now).
    pub fn challenged(
        &self,
        status: u16,
        www_authenticate: Option<&str>,
        sent: Option<&str>,
    ) -> bool {
        let challenge = www_authenticate.and_then(parse_challenge);
        if status == 403 {
            let Some(c) = challenge.filter(|c| c.error.as_deref() == Some("insufficient_scope"))
            else {
                return false;
            };
            let mut inner = lock(&self.inner);
            inner.state = State::Required;
            inner.message = Some(match &c.scope {
                Some(s) => format!("the server needs more scope ({s}): authorize again"),
                None => "the server needs more scope: authorize again".to_owned(),
            });
            log::info!(
                "upstream {}: the server asks for more scope (step-up authorization)",
                self.name
            );
            inner.challenge = Some(c);
            return false;
        }
        if status != 401 {
            return false;
        }
        {
            let mut inner = lock(&self.inner);
            if let Some(c) = &challenge {
                inner.challenge = Some(c.clone());
            }
            let current = inner.tokens.as_ref().map(|t| t.access_token.clone());
            if current.is_some() && current.as_deref() != sent {
                // Another request refreshed it meanwhile.
                return true;
            }
        }
        if sent.is_some() && self.refresh(sent) {
            return true;
        }
        let mut inner = lock(&self.inner);
        if inner.state != State::Authorizing {
            inner.state = State::Required;
            inner.message = Some(if sent.is_some() {
                "the server refused the token: authorize again".to_owned()
            } else {
                "the server needs authorization".to_owned()
            });
        }
        if sent.is_some() {
            inner.tokens = None;
        }
        log::info!("upstream {}: the server needs authorization", self.name);
        false
    }

    /// Refreshes the tokens if they are still those of `sent`; true when a usable token is held
    /// afterwards (refreshed here or by another thread).
    fn refresh(&self, sent: Option<&str>) -> bool {
        let _guard = lock(&self.refreshing);
        let (refresh_token, grant) = {
            let inner = lock(&self.inner);
            let Some(t) = &inner.tokens else {
                return false;
            };
            if Some(t.access_token.as_str()) != sent && !t.expired(ids::now()) {
                return true;
            }
            match (&t.refresh_token, &inner.grant) {
                (Some(r), Some(g)) => (r.clone(), g.clone()),
                _ => return false,
            }
        };
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
            ("resource", grant.resource.clone()),
        ];
        let result = token_request(&grant.token_endpoint, &grant.client, &mut form).and_then(
            |(status, body)| parse_token_response(status, &body, ids::now(), Some(&refresh_token)),
        );
        match result {
            Ok(tokens) => {
                log::info!("upstream {}: access token refreshed", self.name);
                {
                    let mut inner = lock(&self.inner);
                    inner.tokens = Some(tokens);
                    inner.state = State::Authorized;
                    inner.message = None;
                }
                self.auth.save(self);
                true
            }
            Err(why) => {
                log::warn!(
                    "upstream {}: refreshing the access token failed: {why}",
                    self.name
                );
                let mut inner = lock(&self.inner);
                inner.tokens = None;
                inner.state = State::Required;
                inner.message = Some(format!(
                    "refreshing the token failed ({why}): authorize again"
                ));
                drop(inner);
                self.auth.save(self);
                false
            }
        }
    }

    /// `{"state", "message"?, "scopes"?}`.
    pub fn describe(&self) -> Value {
        let inner = lock(&self.inner);
        let mut v = json!({"state": inner.state.as_str()});
        if let Some(m) = &inner.message {
            v["message"] = json!(m);
        }
        if let Some(s) = inner.tokens.as_ref().and_then(|t| t.scope.as_deref()) {
            v["scopes"] = json!(s.split_whitespace().collect::<Vec<_>>());
        }
        v
    }

    pub fn state(&self) -> State {
        lock(&self.inner).state
    }

    fn saved(&self) -> Option<Value> {
        let inner = lock(&self.inner);
        let grant = inner.grant.as_ref()?;
        Some(json!({
            "url": self.url,
            "issuer": grant.issuer,
            "token_endpoint": grant.token_endpoint,
            "resource": grant.resource,
            "client": grant.client.to_json(),
            "tokens": inner.tokens.as_ref().map(Tokens::to_json),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// The registry: every server's authorization, the token file and the pending authorizations.

/// An authorization waiting for its callback.
struct Pending {
    server: Arc<ServerAuth>,
    pkce: Pkce,
    redirect_uri: String,
    grant: Grant,
    /// Whether the authorization server promised an `iss` parameter in its redirect (RFC 9207).
    iss_expected: bool,
    started: Instant,
}

/// Every server's authorization (see the module documentation). One per MCP client manager.
pub struct Auth {
    /// The token file; `None` keeps tokens in memory only (`--memory`).
    path: Mutex<Option<PathBuf>>,
    /// This server's own callback URL, once its port is known.
    redirect_uri: Mutex<Option<String>>,
    /// What the token file held at start and what was written since, by server name.
    saved: Mutex<Map<String, Value>>,
    servers: Mutex<HashMap<String, Arc<ServerAuth>>>,
    pending: Mutex<HashMap<String, Pending>>,
}

impl Auth {
    pub fn new() -> Arc<Auth> {
        Arc::new(Auth {
            path: Mutex::new(None),
            redirect_uri: Mutex::new(None),
            saved: Mutex::new(Map::new()),
            servers: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Sets the callback URL and the token file (`None`: memory only) and reads the file.
    pub fn configure(&self, redirect_uri: String, path: Option<PathBuf>) {
        *lock(&self.redirect_uri) = Some(redirect_uri);
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(Value::Object(mut o)) => {
                        if let Some(Value::Object(servers)) = o.remove("servers") {
                            *lock(&self.saved) = servers;
                        }
                    }
                    _ => log::warn!(
                        "{}: not a JSON object of servers; ignored (and replaced at the next authorization)",
                        p.display()
                    ),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => log::warn!("cannot read {}: {e}", p.display()),
            }
        }
        *lock(&self.path) = path;
    }

    /// The authorization of an HTTP server (made on first use, with what the token file kept
    /// for it when its URL is the same); `None` for other transports.
    pub fn server(self: &Arc<Auth>, config: &ServerConfig) -> Option<Arc<ServerAuth>> {
        let url = match &config.transport {
            Transport::Http { url, .. } | Transport::Auto { url, .. } => url,
            _ => return None,
        };
        let mut servers = lock(&self.servers);
        if let Some(s) = servers.get(&config.name) {
            if &s.url == url && s.oauth == config.oauth {
                return Some(s.clone());
            }
        }
        let saved = lock(&self.saved)
            .get(&config.name)
            .filter(|v| v.get("url").and_then(Value::as_str) == Some(url))
            .cloned();
        let grant = saved.as_ref().and_then(|v| {
            Some(Grant {
                issuer: v.get("issuer")?.as_str()?.to_owned(),
                token_endpoint: v.get("token_endpoint")?.as_str()?.to_owned(),
                resource: v.get("resource")?.as_str()?.to_owned(),
                client: ClientInfo::from_json(v.get("client")?)?,
            })
        });
        let tokens = saved
            .as_ref()
            .and_then(|v| v.get("tokens"))
            .and_then(Tokens::from_json)
            .filter(|_| grant.is_some());
        let state = if tokens.is_some() {
            State::Authorized
        } else {
            State::None
        };
        let s = Arc::new(ServerAuth {
            name: config.name.clone(),
            url: url.clone(),
            oauth: config.oauth.clone(),
            auth: self.clone(),
            inner: Mutex::new(Inner {
                state,
                message: None,
                challenge: None,
                tokens,
                grant,
                requested_scope: None,
            }),
            refreshing: Mutex::new(()),
        });
        servers.insert(config.name.clone(), s.clone());
        Some(s)
    }

    /// The `auth` object of a server (`{"state": "none"}` for one never seen over HTTP). One
    /// that a person must authorize (again) names how to start it: `authorize_url`, the
    /// address to `POST` (`authorize_method`), which answers the `authorization_url` to open.
    pub fn describe(&self, name: &str) -> Value {
        let mut v = match lock(&self.servers).get(name) {
            Some(s) => s.describe(),
            None => return json!({"state": "none"}),
        };
        if matches!(v["state"].as_str(), Some("required" | "error")) {
            v["authorize_url"] = json!(format!(
                "/api/mcp-clients/{}/authorize",
                encode_segment(name)
            ));
            v["authorize_method"] = json!("POST");
        }
        v
    }

    /// Writes the token file (atomically, 0600) with `server`'s entry updated.
    fn save(&self, server: &ServerAuth) {
        let entry = server.saved();
        let doc = {
            let mut saved = lock(&self.saved);
            match entry {
                Some(e) => {
                    saved.insert(server.name.clone(), e);
                }
                None => {
                    saved.remove(&server.name);
                }
            }
            json!({"servers": Value::Object(saved.clone())})
        };
        let Some(path) = lock(&self.path).clone() else {
            return;
        };
        if let Err(e) = write_private_atomically(&path, &doc) {
            log::warn!("cannot write {}: {e}", path.display());
        }
    }

    /// Starts authorizing `config`'s server: discovery, registration, PKCE. Returns the URL
    /// the person opens.
    pub fn start(self: &Arc<Auth>, config: &ServerConfig) -> Result<String, ApiError> {
        let name = config.name.as_str();
        let server = self.server(config).ok_or_else(|| {
            ApiError::bad_request(
                "not_http",
                format!("upstream server {name:?} is not reached over HTTP: MCP authorization applies to HTTP servers only"),
            )
            .with("name", name)
        })?;
        let redirect_uri = lock(&self.redirect_uri)
            .clone()
            .ok_or_else(|| ApiError::new(503, "not_ready", "the callback URL is not known yet"))?;
        let failed = |why: String| {
            let mut inner = lock(&server.inner);
            inner.state = State::Error;
            inner.message = Some(why.clone());
            ApiError::new(
                502,
                "authorization_failed",
                format!("cannot authorize {name:?}: {why}"),
            )
            .with("name", name)
        };
        let challenge = match lock(&server.inner).challenge.clone() {
            Some(c) => c,
            None => probe(&server.url).map_err(&failed)?,
        };
        let discovered = discover(&server.url, &challenge).map_err(&failed)?;
        let client = self
            .register(&server, &discovered, &redirect_uri)
            .map_err(&failed)?;
        let scope = challenge
            .scope
            .clone()
            .or_else(|| server.oauth.as_ref().and_then(|o| o.scope.clone()))
            .or_else(|| {
                let s = discovered.scopes_supported.join(" ");
                (!s.is_empty()).then_some(s)
            });
        // A step-up (403 insufficient_scope) asks for the new scope together with what was
        // asked for and granted before, so the new token does not lose them.
        let scope = {
            let inner = lock(&server.inner);
            let before = [
                inner.requested_scope.as_deref(),
                inner.tokens.as_ref().and_then(|t| t.scope.as_deref()),
            ];
            let step_up = challenge.error.as_deref() == Some("insufficient_scope");
            match scope {
                Some(s) if step_up => Some(scope_union(
                    before.into_iter().flatten().chain([s.as_str()]),
                )),
                other => other,
            }
        };
        lock(&server.inner).requested_scope = scope.clone();
        let pkce = Pkce::new();
        let state = ids::random_hex(16);
        let mut params = vec![
            ("response_type", "code"),
            ("client_id", client.client_id.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_challenge", pkce.challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", state.as_str()),
            ("resource", discovered.resource.as_str()),
        ];
        if let Some(s) = &scope {
            params.push(("scope", s));
        }
        let url = with_query(&discovered.authorization_endpoint, &params);
        let grant = Grant {
            issuer: discovered.issuer.clone(),
            token_endpoint: discovered.token_endpoint.clone(),
            resource: discovered.resource.clone(),
            client,
        };
        {
            let mut pending = lock(&self.pending);
            pending.retain(|_, p| p.started.elapsed() < PENDING_TTL);
            if pending.len() >= MAX_PENDING {
                if let Some(oldest) = pending
                    .iter()
                    .min_by_key(|(_, p)| p.started)
                    .map(|(k, _)| k.clone())
                {
                    pending.remove(&oldest);
                }
            }
            pending.insert(
                state,
                Pending {
                    server: server.clone(),
                    pkce,
                    redirect_uri,
                    grant,
                    iss_expected: discovered.iss_supported,
                    started: Instant::now(),
                },
            );
        }
        {
            let mut inner = lock(&server.inner);
            inner.state = State::Authorizing;
            inner.message = Some("waiting for the person to authorize in the browser".to_owned());
        }
        log::info!(
            "upstream {name}: authorization started at {}",
            discovered.issuer
        );
        Ok(url)
    }

    /// The client to authorize as, in the specification's order (see the module
    /// documentation).
    fn register(
        &self,
        server: &ServerAuth,
        d: &Discovered,
        redirect_uri: &str,
    ) -> Result<ClientInfo, String> {
        let supports = |m: &str| d.auth_methods.is_empty() || d.auth_methods.iter().any(|x| x == m);
        if let Some(o) = &server.oauth {
            if let Some(id) = &o.client_id {
                let auth_method = match &o.client_secret {
                    None => "none",
                    Some(_) if d.auth_methods.iter().any(|m| m == "client_secret_basic") => {
                        "client_secret_basic"
                    }
                    Some(_) if d.auth_methods.iter().any(|m| m == "client_secret_post") => {
                        "client_secret_post"
                    }
                    Some(_) => "client_secret_basic",
                };
                return Ok(ClientInfo {
                    client_id: id.clone(),
                    client_secret: o.client_secret.clone(),
                    auth_method: auth_method.to_owned(),
                });
            }
            if let (Some(url), true) = (&o.client_metadata_url, d.cimd_supported) {
                return Ok(ClientInfo {
                    client_id: url.clone(),
                    client_secret: None,
                    auth_method: "none".to_owned(),
                });
            }
        }
        // A registration kept from before, with the same authorization server.
        if let Some(g) = &lock(&server.inner).grant {
            if g.issuer == d.issuer {
                return Ok(g.client.clone());
            }
        }
        let Some(endpoint) = &d.registration_endpoint else {
            return Err("the authorization server offers no dynamic client registration, and no \
                        client_id is configured (add \"oauth\": {\"client_id\": …} to the server's entry)"
                .to_owned());
        };
        let method = if supports("none") {
            "none"
        } else if supports("client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let body = json!({
            "client_name": "CID el Dill server",
            "application_type": application_type(redirect_uri),
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        });
        let (status, text) = send(
            agent()
                .post(endpoint)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json")
                .send(body.to_string()),
        )
        .map_err(|e| format!("dynamic client registration at {endpoint} failed: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|_| {
            format!("dynamic client registration at {endpoint} answered HTTP {status} without JSON")
        })?;
        if !(200..300).contains(&status) {
            return Err(format!(
                "dynamic client registration at {endpoint} refused (HTTP {status}): {}",
                v.get("error_description")
                    .or(v.get("error"))
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
            ));
        }
        let client_id = v
            .get("client_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("the registration answer has no client_id")?;
        let client_secret = v
            .get("client_secret")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let auth_method = v
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .unwrap_or(if client_secret.is_some() {
                "client_secret_basic"
            } else {
                "none"
            })
            .to_owned();
        Ok(ClientInfo {
            client_id: client_id.to_owned(),
            client_secret,
            auth_method,
        })
    }

    /// The callback: checks `state` (single use, unexpired) and `iss`, exchanges the code and
    /// keeps the tokens. Returns the server's name.
    pub fn finish(&self, query: &[(String, String)]) -> Result<String, String> {
        let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let state = get("state").ok_or("the callback has no state parameter")?;
        let pending = {
            let mut all = lock(&self.pending);
            all.retain(|_, p| p.started.elapsed() < PENDING_TTL);
            all.remove(state)
        }
        .ok_or("no authorization is waiting for this state (it was used already, expired, or never started here)")?;
        let server = pending.server.clone();
        let fail = |why: String| {
            let mut inner = lock(&server.inner);
            inner.state = State::Error;
            inner.message = Some(why.clone());
            why
        };
        if let Some(error) = get("error") {
            let desc = get("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(fail(format!(
                "the authorization server refused ({error}{desc})"
            )));
        }
        match get("iss") {
            Some(iss) if iss != pending.grant.issuer => {
                return Err(fail(format!(
                    "the redirect names issuer {iss:?}, not {:?}: refused (RFC 9207)",
                    pending.grant.issuer
                )))
            }
            None if pending.iss_expected => {
                return Err(fail(
                    "the authorization server promised an iss parameter in its redirect and sent none: refused (RFC 9207)".to_owned(),
                ))
            }
            _ => {}
        }
        let code =
            get("code").ok_or_else(|| fail("the callback has no code parameter".to_owned()))?;
        let mut form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", pending.redirect_uri.clone()),
            ("code_verifier", pending.pkce.verifier.clone()),
            ("resource", pending.grant.resource.clone()),
        ];
        let tokens = token_request(
            &pending.grant.token_endpoint,
            &pending.grant.client,
            &mut form,
        )
        .and_then(|(status, body)| parse_token_response(status, &body, ids::now(), None))
        .map_err(&fail)?;
        {
            let mut inner = lock(&server.inner);
            inner.tokens = Some(tokens);
            inner.grant = Some(pending.grant);
            inner.state = State::Authorized;
            inner.message = None;
            inner.challenge = None;
        }
        self.save(&server);
        log::info!("upstream {}: authorized", server.name);
        Ok(server.name.clone())
    }
}

/// What discovery found.
struct Discovered {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    resource: String,
    scopes_supported: Vec<String>,
    auth_methods: Vec<String>,
    cimd_supported: bool,
    iss_supported: bool,
}

/// An unauthenticated POST of `initialize` to learn the server's challenge (when no request
/// has met one yet).
fn probe(url: &str) -> Result<Challenge, String> {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "cideldill-server", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(body.to_string())
        .map_err(|e| format!("{url}: {e}"))?;
    let header = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let status = resp.status().as_u16();
    super::http::drain(resp);
    match header.as_deref().and_then(parse_challenge) {
        Some(c) => Ok(c),
        None if status == 401 => Ok(Challenge::default()),
        None => Err(format!(
            "the server answered HTTP {status} without asking for authorization"
        )),
    }
}

fn discover(server_url: &str, challenge: &Challenge) -> Result<Discovered, String> {
    // Protected resource metadata: the challenge's URL, else the well-known ones.
    let prm_urls = match &challenge.resource_metadata {
        Some(u) => vec![u.clone()],
        None => resource_metadata_urls(server_url),
    };
    let mut prm = None;
    for u in &prm_urls {
        if let Some(v) = get_json(u)? {
            prm = Some(v);
            break;
        }
    }
    let (issuer, resource, scopes_supported) = match &prm {
        Some(v) => {
            let issuer = v
                .get("authorization_servers")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .ok_or("the protected resource metadata names no authorization server")?
                .to_owned();
            let resource = match v.get("resource").and_then(Value::as_str) {
                Some(r) if resource_covers(r, server_url) => r.to_owned(),
                Some(r) => {
                    return Err(format!(
                        "the protected resource metadata is for {r:?}, which does not cover {server_url:?}: refused"
                    ))
                }
                None => canonical_resource(server_url),
            };
            let scopes = crate::node::strings(v.get("scopes_supported"));
            (issuer, resource, scopes)
        }
        // No protected resource metadata: the server's origin is its authorization server
        // (the 2025-03-26 revision's rule).
        None => {
            let (origin, _) = split_url(server_url).ok_or("the server URL has no host")?;
            (
                origin.to_owned(),
                canonical_resource(server_url),
                Vec::new(),
            )
        }
    };
    check_http_url(&issuer)?;
    let mut meta = None;
    for u in server_metadata_urls(&issuer) {
        if let Some(v) = get_json(&u)? {
            meta = Some(v);
            break;
        }
    }
    let endpoint = |m: &Value, k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    let d = match meta {
        Some(m) => {
            let named = m.get("issuer").and_then(Value::as_str).unwrap_or("");
            if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
                return Err(format!(
                    "the authorization server metadata names issuer {named:?}, not {issuer:?}: refused (RFC 8414)"
                ));
            }
            let methods = m
                .get("code_challenge_methods_supported")
                .and_then(Value::as_array);
            if !methods.is_some_and(|a| a.iter().any(|x| x == "S256")) {
                return Err(
                    "the authorization server does not advertise PKCE with S256 \
                            (code_challenge_methods_supported): refused"
                        .to_owned(),
                );
            }
            Discovered {
                issuer: named.to_owned(),
                authorization_endpoint: endpoint(&m, "authorization_endpoint")
                    .ok_or("the authorization server metadata has no authorization_endpoint")?,
                token_endpoint: endpoint(&m, "token_endpoint")
                    .ok_or("the authorization server metadata has no token_endpoint")?,
                registration_endpoint: endpoint(&m, "registration_endpoint"),
                resource,
                scopes_supported,
                auth_methods: m
                    .get("token_endpoint_auth_methods_supported")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                cimd_supported: m.get("client_id_metadata_document_supported")
                    == Some(&json!(true)),
                iss_supported: m.get("authorization_response_iss_parameter_supported")
                    == Some(&json!(true)),
            }
        }
        None if prm.is_none() => {
            // The 2025-03-26 revision's default endpoints.
            let (origin, _) = split_url(&issuer).ok_or("the issuer has no host")?;
            Discovered {
                issuer: issuer.clone(),
                authorization_endpoint: format!("{origin}/authorize"),
                token_endpoint: format!("{origin}/token"),
                registration_endpoint: Some(format!("{origin}/register")),
                resource,
                scopes_supported,
                auth_methods: Vec::new(),
                cimd_supported: false,
                iss_supported: false,
            }
        }
        None => {
            return Err(format!(
                "no authorization server metadata found for {issuer} (tried {})",
                server_metadata_urls(&issuer).join(", ")
            ))
        }
    };
    for u in [&d.authorization_endpoint, &d.token_endpoint] {
        check_http_url(u)?;
    }
    Ok(d)
}

fn check_http_url(url: &str) -> Result<(), String> {
    super::http::check_url(url)
}

/// The agent for metadata, registration and token requests: no redirects, errors as answers,
/// a timeout on everything.
fn agent() -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(EXCHANGE_TIMEOUT))
        .user_agent(concat!("cideldill-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Status and body (at most [`MAX_ANSWER`] bytes) of an answer.
fn send(
    result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<(u16, String), String> {
    let resp = result.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let text = resp
        .into_body()
        .into_with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .map_err(|e| format!("reading the answer failed: {e}"))?;
    Ok((status, text))
}

/// A metadata document: `None` for a 4xx answer (try the next URL), an error for anything
/// else that is not a JSON object.
fn get_json(url: &str) -> Result<Option<Value>, String> {
    check_http_url(url)?;
    let (status, text) = send(
        agent()
            .get(url)
            .header("Accept", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .call(),
    )
    .map_err(|e| format!("{url}: {e}"))?;
    if (400..500).contains(&status) {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        return Err(format!("{url}: HTTP {status}"));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        _ => Err(format!("{url}: the answer is not a JSON object")),
    }
}

/// POSTs a token request, authenticating the client as it registered.
fn token_request(
    endpoint: &str,
    client: &ClientInfo,
    form: &mut Vec<(&str, String)>,
) -> Result<(u16, String), String> {
    check_http_url(endpoint)?;
    let mut rq = agent().post(endpoint).header("Accept", "application/json");
    match (client.auth_method.as_str(), &client.client_secret) {
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        (_, Some(secret)) if client.auth_method != "none" => {
            // RFC 6749 §2.3.1: each part form-encoded, then Basic.
            let creds = format!(
                "{}:{}",
                encode_segment(&client.client_id),
                encode_segment(secret)
            );
            rq = rq.header(
                "Authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(creds)
                ),
            );
        }
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    send(rq.send_form(pairs)).map_err(|e| format!("the token request to {endpoint} failed: {e}"))
}

/// Writes `doc` to `path` through a temporary file (0600) renamed over it.
fn write_private_atomically(path: &Path, doc: &Value) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::files::create_dirs(dir)?;
    let tmp = dir.join(format!(".{TOKEN_FILE}.{}", ids::random_hex(6)));
    let result = (|| {
        let mut f = crate::files::private_options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        crate::files::restrict(&f)?;
        let bytes = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `application_type` a dynamic registration names (required since SEP-837): `native` for
/// a client whose redirect lands on a loopback address (this server, run on the person's own
/// machine, as OAuth for native apps, RFC 8252, describes), `web` for one served from another
/// host.
pub fn application_type(redirect_uri: &str) -> &'static str {
    let rest = redirect_uri
        .split_once("://")
        .map_or(redirect_uri, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        "native"
    } else {
        "web"
    }
}

#[cfg(test)]
mod tests;
