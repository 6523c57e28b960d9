//! Configuration of upstream MCP servers: which servers the client manager connects to at
//! start-up. Pure apart from [`read_fs`]: the environment is passed in as a function and files
//! are read through a function, so every rule is testable without a real environment or disk.
//!
//! Where servers come from:
//! - A JSON file, either our own `{"servers": {NAME: ENTRY}}` or the host format of Claude
//!   Desktop / Claude Code / Cursor `{"mcpServers": {NAME: ENTRY}}`. The path is
//!   `--mcp-clients-config PATH`, else `$CIDELDILL_MCP_CLIENTS_CONFIG`, else
//!   `$CIDELDILL_HOME/mcp_clients.json`, else `~/.cideldill/mcp_clients.json`. A
//!   `--mcp-clients-config` value starting with `{` is the JSON itself.
//! - `--mcp-client NAME:VALUE` (repeatable): split at the first `:`; a VALUE starting with
//!   `http://` or `https://` is a URL (Streamable HTTP first, then legacy SSE), a VALUE starting
//!   with `{` is one JSON entry, anything else is a stdio command split on whitespace (no shell
//!   quoting; the shell has already expanded variables, so VALUE is not expanded).
//!
//! Entry fields: `transport` or `type` (`stdio` | `sse` | `http`, aliases `streamable-http`,
//! `streamableHttp`, `streamable_http`), `command`, `args`, `env`, `cwd`, `url`, `headers`,
//! `timeout_s` (seconds) / `timeoutMs` / `timeout_ms` (milliseconds; several must agree),
//! `auto_reconnect` (default true), `allowed_tools`, `denied_tools` (glob patterns). With no
//! transport, an entry with a `command` is stdio and one with a `url` is [`Transport::Auto`];
//! an explicit `sse` or `http` is honoured. Unknown keys are ignored (hosts ignore ours, we
//! ignore theirs), and so are known keys of the other transport (`headers` on a stdio entry),
//! with a warning in the log.
//!
//! `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env` values, `url` and
//! `headers` values, as Claude Code does; a bare `$VAR` is left alone; an unset variable without
//! a default is an error naming the server, the field and the variable.
//!
//! Choices where the formats leave room:
//! - `transport` is optional: only an entry with neither `command` nor `url` (or with both and
//!   no transport) is an error.
//! - `http` (Streamable HTTP) is a known transport beside `stdio` and `sse`.
//! - JSON objects with a repeated key keep the last value (serde_json's behaviour), so a server
//!   name repeated within one file is not reported.
//!
//! Runtime connections are never written anywhere: nothing in this module writes files.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::names::{validate_server_name, NameError, ToolFilter};
use crate::limits::{UPSTREAM_CALL_TIMEOUT, UPSTREAM_CONNECT_TIMEOUT};

/// Auto-reconnect when an entry does not say.
pub const DEFAULT_AUTO_RECONNECT: bool = true;

/// The config file's name inside the data directory.
pub const CONFIG_FILE_NAME: &str = "mcp_clients.json";

/// Environment variable naming the config file.
pub const CONFIG_ENV_VAR: &str = "CIDELDILL_MCP_CLIENTS_CONFIG";

/// How to reach one upstream server.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// Spawn `command args…` and speak newline-delimited JSON-RPC on its stdio. `env` is merged
    /// over the inherited environment; `cwd` defaults to ours.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// Legacy HTTP+SSE (2024-11-05) at `url`.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// Streamable HTTP at `url`.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A `url` with no transport named: try Streamable HTTP first, fall back to legacy SSE on a
    /// 4xx without an MCP error body (the MCP specification's backwards-compatibility rule for
    /// clients of servers that may only speak the older HTTP+SSE transport).
    Auto {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl Transport {
    /// `"stdio"`, `"sse"`, `"http"` or `"auto"`.
    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Stdio { .. } => TransportKind::Stdio,
            Transport::Sse { .. } => TransportKind::Sse,
            Transport::Http { .. } => TransportKind::Http,
            Transport::Auto { .. } => TransportKind::Auto,
        }
    }

    /// The URL of an HTTP transport.
    pub fn url(&self) -> Option<&str> {
        match self {
            Transport::Stdio { .. } => None,
            Transport::Sse { url, .. }
            | Transport::Http { url, .. }
            | Transport::Auto { url, .. } => Some(url),
        }
    }
}

/// Debug output names headers and environment variables but never shows their values (they
/// carry tokens, and none of them may reach the log).
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn keys(pairs: &[(String, String)]) -> Vec<&str> {
            pairs.iter().map(|(k, _)| k.as_str()).collect()
        }
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env_keys", &keys(env))
                .field("cwd", cwd)
                .finish(),
            Transport::Sse { url, headers }
            | Transport::Http { url, headers }
            | Transport::Auto { url, headers } => f
                .debug_struct(match self {
                    Transport::Sse { .. } => "Sse",
                    Transport::Http { .. } => "Http",
                    _ => "Auto",
                })
                .field("url", url)
                .field("header_names", &keys(headers))
                .finish(),
        }
    }
}

/// One configured upstream server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The catalog prefix; valid per [`validate_server_name`].
    pub name: String,
    pub transport: Transport,
    /// Tool-call timeout (the connection timeout is a separate fixed 30 s).
    pub timeout: Duration,
    /// Whether a lost connection is retried automatically (1, 2, 4, 8, 16 s; then `failed`).
    pub auto_reconnect: bool,
    /// Glob patterns; empty means every tool.
    pub allowed_tools: Vec<String>,
    /// Glob patterns; deny wins over allow.
    pub denied_tools: Vec<String>,
    /// MCP authorization settings of an HTTP server (`"oauth": {…}`); `None` when not given.
    pub oauth: Option<OAuthConfig>,
}

/// An HTTP server's `"oauth"` entry: pre-registered client credentials, the scope to ask for,
/// and the URL of a client ID metadata document to use as the client id where the
/// authorization server accepts one. Every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scope: Option<String>,
    pub client_metadata_url: Option<String>,
}

impl ServerConfig {
    /// A server with the defaults for everything but its transport.
    pub fn new(name: &str, transport: Transport) -> ServerConfig {
        ServerConfig {
            name: name.to_owned(),
            transport,
            timeout: UPSTREAM_CALL_TIMEOUT,
            auto_reconnect: DEFAULT_AUTO_RECONNECT,
            allowed_tools: Vec::new(),
            denied_tools: Vec::new(),
            oauth: None,
        }
    }

    /// The filter built from `allowed_tools` and `denied_tools`.
    pub fn tool_filter(&self) -> ToolFilter {
        ToolFilter {
            allowed: self.allowed_tools.clone(),
            denied: self.denied_tools.clone(),
        }
    }
}

/// A configuration error. `path` fields are dotted locations such as
/// `servers.time.timeout_s`, `mcpServers.gh.headers.Authorization` or `--mcp-client gh.url`;
/// the second component is always the server name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not JSON.
    Json { message: String, comments: bool },
    /// The top level is not an object with exactly one of `servers` / `mcpServers`.
    Root { message: String },
    /// A field has the wrong type or value.
    Invalid {
        path: String,
        expected: &'static str,
        got: String,
    },
    /// A required field is missing.
    Missing { path: String, message: String },
    /// Two fields disagree.
    Conflict { path: String, message: String },
    /// `transport` / `type` names no transport we know.
    UnknownTransport { path: String, got: String },
    /// `${VAR}` with `VAR` unset and no default.
    UndefinedVariable { path: String, var: String },
    /// A malformed `${…}`.
    BadExpansion { path: String, message: String },
    /// An invalid server name.
    BadName {
        path: String,
        name: String,
        reason: NameError,
    },
    /// A malformed `--mcp-client` value.
    Inline { flag: String, message: String },
    /// An explicitly named config file does not exist.
    NotFound { path: PathBuf },
    /// A config file exists but could not be read.
    Read { path: PathBuf, message: String },
    /// An error inside the config file at `path`.
    InFile {
        path: PathBuf,
        error: Box<ConfigError>,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Json { message, comments } => {
                write!(f, "invalid JSON: {message}")?;
                if *comments {
                    f.write_str(" (JSON does not allow comments)")?;
                }
                Ok(())
            }
            ConfigError::Root { message } => f.write_str(message),
            ConfigError::Invalid {
                path,
                expected,
                got,
            } => write!(f, "{path}: expected {expected}, got {got}"),
            ConfigError::Missing { path, message } | ConfigError::Conflict { path, message } => {
                write!(f, "{path}: {message}")
            }
            ConfigError::UnknownTransport { path, got } => write!(
                f,
                "{path}: unknown transport {got}; expected \"stdio\", \"sse\" or \"http\""
            ),
            ConfigError::UndefinedVariable { path, var } => write!(
                f,
                "{path}: environment variable {var} is not set (write ${{{var}:-default}} to \
                 give a default)"
            ),
            ConfigError::BadExpansion { path, message } => write!(f, "{path}: {message}"),
            ConfigError::BadName { path, name, reason } => {
                write!(f, "{path}: invalid server name {name:?}: {reason}")
            }
            ConfigError::Inline { flag, message } => {
                write!(f, "--mcp-client {flag:?}: {message}")
            }
            ConfigError::NotFound { path } => {
                write!(f, "MCP clients config file not found: {}", path.display())
            }
            ConfigError::Read { path, message } => write!(
                f,
                "cannot read MCP clients config file {}: {message}",
                path.display()
            ),
            ConfigError::InFile { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for ConfigError {}

// ---------------------------------------------------------------------------------------------
// ${VAR} expansion

/// Why a `${…}` expansion failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpandError {
    /// `${VAR}` with `VAR` unset and no default.
    Undefined(String),
    /// `${` without a closing `}`.
    Unterminated,
    /// `${…}` whose name is not `[A-Za-z_][A-Za-z0-9_]*`.
    BadName(String),
}

/// Expands `${VAR}` and `${VAR:-default}` (the default is used when `VAR` is unset or empty,
/// as in the shell). A `$` not followed by `{` is literal.
pub fn expand_vars(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ExpandError::Unterminated)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(ExpandError::BadName(name.to_owned()));
        }
        match (env(name), default) {
            (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(ExpandError::Undefined(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// Renders a JSON value for an error message, cut to about 60 characters.
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 60 {
        s
    } else {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    }
}

/// Which transport a server entry names (`Auto`: a URL without one, Streamable HTTP first,
/// then legacy SSE), or which one a live connection uses (never `Auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Stdio,
    Sse,
    Http,
    Auto,
}

impl TransportKind {
    fn parse(s: &str) -> Option<TransportKind> {
        match s {
            "stdio" => Some(Kind::Stdio),
            "sse" => Some(Kind::Sse),
            "http" | "streamable-http" | "streamableHttp" | "streamable_http" => Some(Kind::Http),
            _ => None,
        }
    }

    /// The name shown in listings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Sse => "sse",
            Kind::Http => "http",
            Kind::Auto => "auto",
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use TransportKind as Kind;

const STDIO_KEYS: [&str; 4] = ["command", "args", "env", "cwd"];
const HTTP_KEYS: [&str; 2] = ["url", "headers"];

/// Parses the entries of one server: `prefix` is its location (`servers.fs`).
struct Entry<'a> {
    prefix: String,
    obj: &'a Map<String, Value>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Entry<'_> {
    fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }

    fn expand(&self, path: String, text: &str) -> Result<String, ConfigError> {
        expand_vars(text, self.env).map_err(|e| match e {
            ExpandError::Undefined(var) => ConfigError::UndefinedVariable { path, var },
            ExpandError::Unterminated => ConfigError::BadExpansion {
                path,
                message: "\"${\" without a closing \"}\"".to_owned(),
            },
            ExpandError::BadName(name) => ConfigError::BadExpansion {
                path,
                message: format!("invalid variable name {name:?} in \"${{…}}\""),
            },
        })
    }

    fn string(&self, key: &str) -> Result<Option<&str>, ConfigError> {
        match self.obj.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(ConfigError::Invalid {
                path: self.path(key),
                expected: "a string",
                got: show(v),
            }),
        }
    }

    /// A string field that must not be empty after expansion.
    fn nonempty_expanded(&self, key: &str) -> Result<Option<String>, ConfigError> {
        let Some(raw) = self.string(key)? else {
            return Ok(None);
        };
        let s = self.expand(self.path(key), raw)?;
        if s.trim().is_empty() {
            return Err(ConfigError::Invalid {
                path: self.path(key),
                expected: "a non-empty string",
                got: show(&Value::String(s)),
            });
        }
        Ok(Some(s))
    }

    fn string_list(&self, key: &str, expand: bool) -> Result<Vec<String>, ConfigError> {
        let items = match self.obj.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    path: self.path(key),
                    expected: "an array of strings",
                    got: show(v),
                })
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.path(key));
            match item {
                Value::String(s) if expand => out.push(self.expand(path, s)?),
                Value::String(s) => out.push(s.clone()),
                v => {
                    return Err(ConfigError::Invalid {
                        path,
                        expected: "a string",
                        got: show(v),
                    })
                }
            }
        }
        Ok(out)
    }

    /// An object of strings with expanded values. `secret` hides values in messages.
    fn string_map(&self, key: &str, secret: bool) -> Result<Vec<(String, String)>, ConfigError> {
        let map = match self.obj.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Object(map)) => map,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    path: self.path(key),
                    expected: "an object of strings",
                    got: show(v),
                })
            }
        };
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            let path = format!("{}.{k}", self.path(key));
            let Value::String(raw) = v else {
                return Err(ConfigError::Invalid {
                    path,
                    expected: "a string",
                    got: if secret {
                        crate::schema::type_phrase(v).to_owned()
                    } else {
                        show(v)
                    },
                });
            };
            if k.is_empty() {
                return Err(ConfigError::Invalid {
                    path,
                    expected: "a non-empty name",
                    got: "\"\"".to_owned(),
                });
            }
            let value = self.expand(path.clone(), raw)?;
            if secret && (value.contains('\r') || value.contains('\n')) {
                return Err(ConfigError::Invalid {
                    path,
                    expected: "a header value without line breaks",
                    got: "a value with a line break".to_owned(),
                });
            }
            out.push((k.clone(), value));
        }
        Ok(out)
    }

    fn kind(&self) -> Result<Option<Kind>, ConfigError> {
        let mut found: Option<(&str, &str, Kind)> = None;
        for key in ["transport", "type"] {
            let Some(s) = self.string(key)? else {
                continue;
            };
            let kind = Kind::parse(s).ok_or_else(|| ConfigError::UnknownTransport {
                path: self.path(key),
                got: show(&Value::String(s.to_owned())),
            })?;
            match found {
                Some((k0, s0, kind0)) if kind0 != kind => {
                    return Err(ConfigError::Conflict {
                        path: self.path(key),
                        message: format!("{s:?} contradicts \"{k0}\": {s0:?}"),
                    })
                }
                _ => found = Some((key, s, kind)),
            }
        }
        Ok(found.map(|(_, _, k)| k))
    }

    fn url(&self, kind_name: &str) -> Result<String, ConfigError> {
        let raw = self.string("url")?.ok_or_else(|| ConfigError::Missing {
            path: self.path("url"),
            message: format!("required for the {kind_name} transport"),
        })?;
        let url = self.expand(self.path("url"), raw)?;
        if !is_http_url(&url) {
            return Err(ConfigError::Invalid {
                path: self.path("url"),
                expected: "an http:// or https:// URL",
                got: show(&Value::String(raw.to_owned())),
            });
        }
        Ok(url)
    }

    fn timeout(&self) -> Result<Duration, ConfigError> {
        let mut found: Option<(&str, Duration)> = None;
        for (key, scale) in [
            ("timeout_s", 1.0),
            ("timeoutMs", 1e-3),
            ("timeout_ms", 1e-3),
        ] {
            let Some(v) = self.obj.get(key) else {
                continue;
            };
            let invalid = || ConfigError::Invalid {
                path: self.path(key),
                expected: "a positive number",
                got: show(v),
            };
            let n = v.as_f64().ok_or_else(invalid)?;
            if n <= 0.0 || !n.is_finite() {
                return Err(invalid());
            }
            let d = Duration::try_from_secs_f64(n * scale).map_err(|_| invalid())?;
            if d.is_zero() {
                return Err(invalid());
            }
            match found {
                Some((k0, d0)) if d0 != d => {
                    return Err(ConfigError::Conflict {
                        path: self.path(key),
                        message: format!("{d:?} contradicts \"{k0}\" ({d0:?})"),
                    })
                }
                _ => found = Some((key, d)),
            }
        }
        Ok(found.map_or(UPSTREAM_CALL_TIMEOUT, |(_, d)| d))
    }

    fn auto_reconnect(&self) -> Result<bool, ConfigError> {
        match self.obj.get("auto_reconnect") {
            None => Ok(DEFAULT_AUTO_RECONNECT),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(ConfigError::Invalid {
                path: self.path("auto_reconnect"),
                expected: "true or false",
                got: show(v),
            }),
        }
    }

    fn patterns(&self, key: &str) -> Result<Vec<String>, ConfigError> {
        let list = self.string_list(key, false)?;
        if let Some(i) = list.iter().position(|p| p.is_empty()) {
            return Err(ConfigError::Invalid {
                path: format!("{}[{i}]", self.path(key)),
                expected: "a non-empty glob pattern",
                got: "\"\"".to_owned(),
            });
        }
        Ok(list)
    }

    fn warn_ignored(&self, keys: &[&str], what: &str) {
        for key in keys {
            if self.obj.contains_key(*key) {
                log::warn!("{}: ignored ({what})", self.path(key));
            }
        }
    }

    fn parse(&self, name: &str) -> Result<ServerConfig, ConfigError> {
        let has = |k: &str| self.obj.contains_key(k);
        let kind = match self.kind()? {
            Some(k) => k,
            None => match (has("command"), has("url")) {
                (true, false) => Kind::Stdio,
                (false, true) => Kind::Auto,
                (true, true) => {
                    return Err(ConfigError::Conflict {
                        path: self.prefix.clone(),
                        message: "has both \"command\" and \"url\"; add \"type\": \"stdio\", \
                                  \"sse\" or \"http\" to choose"
                            .to_owned(),
                    })
                }
                (false, false) => {
                    return Err(ConfigError::Missing {
                        path: self.prefix.clone(),
                        message: "needs a \"command\" (stdio) or a \"url\" (Streamable HTTP, \
                                  falling back to SSE), or a \"transport\""
                            .to_owned(),
                    })
                }
            },
        };
        let transport = match kind {
            Kind::Stdio => {
                self.warn_ignored(&HTTP_KEYS, "not used by the stdio transport");
                let command =
                    self.nonempty_expanded("command")?
                        .ok_or_else(|| ConfigError::Missing {
                            path: self.path("command"),
                            message: "required for the stdio transport".to_owned(),
                        })?;
                let cwd = match self.string("cwd")? {
                    None => None,
                    Some("") => {
                        return Err(ConfigError::Invalid {
                            path: self.path("cwd"),
                            expected: "a non-empty path",
                            got: "\"\"".to_owned(),
                        })
                    }
                    Some(s) => Some(PathBuf::from(s)),
                };
                Transport::Stdio {
                    command,
                    args: self.string_list("args", true)?,
                    env: self.string_map("env", false)?,
                    cwd,
                }
            }
            Kind::Sse | Kind::Http | Kind::Auto => {
                let kind_name = match kind {
                    Kind::Sse => "sse",
                    Kind::Http => "http",
                    _ => "url",
                };
                self.warn_ignored(&STDIO_KEYS, "not used by an HTTP transport");
                let url = self.url(kind_name)?;
                let headers = self.string_map("headers", true)?;
                match kind {
                    Kind::Sse => Transport::Sse { url, headers },
                    Kind::Http => Transport::Http { url, headers },
                    _ => Transport::Auto { url, headers },
                }
            }
        };
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            timeout: self.timeout()?,
            auto_reconnect: self.auto_reconnect()?,
            allowed_tools: self.patterns("allowed_tools")?,
            denied_tools: self.patterns("denied_tools")?,
            oauth: self.oauth()?,
        })
    }

    /// The `"oauth"` object: strings (with `${VAR}` expansion), each optional.
    fn oauth(&self) -> Result<Option<OAuthConfig>, ConfigError> {
        let obj = match self.obj.get("oauth") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(o)) => o,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    path: self.path("oauth"),
                    expected: "an object",
                    got: show(v),
                })
            }
        };
        let inner = Entry {
            prefix: self.path("oauth"),
            obj,
            env: self.env,
        };
        let oauth = OAuthConfig {
            client_id: inner.nonempty_expanded("client_id")?,
            client_secret: inner.nonempty_expanded("client_secret")?,
            scope: inner.nonempty_expanded("scope")?,
            client_metadata_url: inner.nonempty_expanded("client_metadata_url")?,
        };
        if oauth.client_secret.is_some() && oauth.client_id.is_none() {
            return Err(ConfigError::Missing {
                path: inner.path("client_id"),
                message: "required with \"client_secret\"".to_owned(),
            });
        }
        if let Some(u) = &oauth.client_metadata_url {
            if !is_http_url(u) {
                return Err(ConfigError::Invalid {
                    path: inner.path("client_metadata_url"),
                    expected: "an http:// or https:// URL",
                    got: show(&Value::String(u.clone())),
                });
            }
        }
        Ok(Some(oauth))
    }
}

/// `http://` or `https://` (any case) followed by at least one character.
fn is_http_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") && url.len() > 7)
        || (lower.starts_with("https://") && url.len() > 8)
}

fn parse_entry(
    prefix: String,
    name: &str,
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let Value::Object(obj) = value else {
        return Err(ConfigError::Invalid {
            path: prefix,
            expected: "an object",
            got: show(value),
        });
    };
    Entry { prefix, obj, env }.parse(name)
}

/// Parses a config file's text: `{"servers": {…}}` or `{"mcpServers": {…}}` (exactly one of
/// them; other top-level keys are ignored). Servers come back in file order.
pub fn parse_file(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let root: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json {
        message: e.to_string(),
        comments: text.contains("//") || text.contains("/*"),
    })?;
    let Value::Object(root) = root else {
        return Err(ConfigError::Root {
            message: format!(
                "expected a JSON object with a \"servers\" or \"mcpServers\" object, got {}",
                show(&root)
            ),
        });
    };
    let (key, servers) = match (root.get("servers"), root.get("mcpServers")) {
        (Some(s), None) => ("servers", s),
        (None, Some(s)) => ("mcpServers", s),
        (Some(_), Some(_)) => {
            return Err(ConfigError::Root {
                message: "has both \"servers\" and \"mcpServers\"; use one".to_owned(),
            })
        }
        (None, None) => {
            return Err(ConfigError::Root {
                message: "no \"servers\" or \"mcpServers\" object at the top level".to_owned(),
            })
        }
    };
    let Value::Object(servers) = servers else {
        return Err(ConfigError::Invalid {
            path: key.to_owned(),
            expected: "an object of server entries",
            got: show(servers),
        });
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        let prefix = format!("{key}.{name}");
        validate_server_name(name).map_err(|reason| ConfigError::BadName {
            path: prefix.clone(),
            name: name.clone(),
            reason,
        })?;
        out.push(parse_entry(prefix, name, entry, env)?);
    }
    Ok(out)
}

/// Parses one `--mcp-client NAME:VALUE` flag. VALUE is a URL (`http://`, `https://`: Streamable
/// HTTP, then SSE), a JSON entry (`{…}`, expanded with `env`), or a stdio command line split on
/// whitespace.
pub fn parse_inline(
    flag: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let err = |message: String| ConfigError::Inline {
        flag: flag.to_owned(),
        message,
    };
    let Some((name, value)) = flag.split_once(':') else {
        return Err(err(
            "expected NAME:COMMAND or NAME:URL (no ':' found)".to_owned()
        ));
    };
    if name.is_empty() {
        return Err(err("the server name before ':' is empty".to_owned()));
    }
    validate_server_name(name)
        .map_err(|reason| err(format!("invalid server name {name:?}: {reason}")))?;
    let value = value.trim();
    if value.is_empty() {
        return Err(err(format!(
            "nothing after \"{name}:\"; give a command or an http(s):// URL"
        )));
    }
    if value.starts_with("//") {
        return Err(err(
            "looks like a URL without a server name; write NAME:URL".to_owned(),
        ));
    }
    if value.starts_with('{') {
        let entry: Value =
            serde_json::from_str(value).map_err(|e| err(format!("invalid JSON entry: {e}")))?;
        return parse_entry(format!("--mcp-client {name}"), name, &entry, env);
    }
    let lower = value.get(..8).unwrap_or(value).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        if !is_http_url(value) {
            return Err(err(format!("{value:?} has no host")));
        }
        return Ok(ServerConfig::new(
            name,
            Transport::Auto {
                url: value.to_owned(),
                headers: Vec::new(),
            },
        ));
    }
    let mut words = value.split_whitespace().map(str::to_owned);
    let command = words.next().unwrap_or_default();
    Ok(ServerConfig::new(
        name,
        Transport::Stdio {
            command,
            args: words.collect(),
            env: Vec::new(),
            cwd: None,
        },
    ))
}

/// Parses the body of a run-time connect request: one server entry (either file format's
/// fields) plus its `name`.
pub fn parse_runtime(
    body: &Map<String, Value>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let name = match body.get("name") {
        Some(Value::String(n)) => n.clone(),
        None | Some(Value::Null) => {
            return Err(ConfigError::Missing {
                path: "name".to_owned(),
                message: "the server name is required".to_owned(),
            })
        }
        Some(other) => {
            return Err(ConfigError::Invalid {
                path: "name".to_owned(),
                expected: "a string",
                got: show(other),
            })
        }
    };
    validate_server_name(&name).map_err(|reason| ConfigError::BadName {
        path: "name".to_owned(),
        name: name.clone(),
        reason,
    })?;
    let mut entry = body.clone();
    entry.remove("name");
    parse_entry(name.clone(), &name, &Value::Object(entry), env)
}

// ---------------------------------------------------------------------------------------------
// Where the file is, which flags create the manager, and merging

fn var(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    env(key).filter(|v| !v.is_empty())
}

/// Replaces a leading `~` with `$HOME` (when set).
fn expand_tilde(path: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let rest = if path == "~" {
        Some("")
    } else {
        path.strip_prefix("~/")
    };
    match (rest, var(env, "HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The default config file: `$CIDELDILL_MCP_CLIENTS_CONFIG`, else
/// `$CIDELDILL_HOME/mcp_clients.json`, else `~/.cideldill/mcp_clients.json` (else
/// `.cideldill/mcp_clients.json` with no home at all). Empty variables count as unset.
pub fn config_path(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(p) = var(env, CONFIG_ENV_VAR) {
        return expand_tilde(&p, env);
    }
    if let Some(h) = var(env, "CIDELDILL_HOME") {
        return expand_tilde(&h, env).join(CONFIG_FILE_NAME);
    }
    match var(env, "HOME") {
        Some(home) => Path::new(&home).join(".cideldill").join(CONFIG_FILE_NAME),
        None => Path::new(".cideldill").join(CONFIG_FILE_NAME),
    }
}

/// The three command-line flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientFlags {
    /// `--mcp-clients`: load the default config file.
    pub mcp_clients: bool,
    /// `--mcp-clients-config PATH` (or inline JSON starting with `{`).
    pub config: Option<String>,
    /// `--mcp-client NAME:VALUE`, in order.
    pub inline: Vec<String>,
}

/// Which config file (if any) start-up reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileSource {
    /// The default path (`--mcp-clients`): a missing file means zero servers, silently.
    Default(PathBuf),
    /// `--mcp-clients-config PATH`: a missing file is an error.
    Explicit(PathBuf),
    /// `--mcp-clients-config '{…}'`: the flag's value is the JSON.
    InlineJson(String),
}

/// What start-up does about upstream servers, decided from the flags alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The config file to read, if any (`--mcp-client` alone reads none).
    pub file: Option<FileSource>,
}

/// Decides from the flags: `None` when no flag asks for upstream servers (no client manager is
/// created); otherwise a manager is created and `file` says which file to read.
/// `--mcp-clients-config` wins over `--mcp-clients` (the named file replaces the default; it is
/// not read in addition); `--mcp-client` alone reads no file.
pub fn plan(flags: &ClientFlags, env: &dyn Fn(&str) -> Option<String>) -> Option<Plan> {
    let file = match &flags.config {
        Some(v) if v.trim_start().starts_with('{') => Some(FileSource::InlineJson(v.clone())),
        Some(v) => Some(FileSource::Explicit(expand_tilde(v, env))),
        None if flags.mcp_clients => Some(FileSource::Default(config_path(env))),
        None if !flags.inline.is_empty() => None,
        None => return None,
    };
    Some(Plan { file })
}

/// The outcome of reading a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRead {
    Text(String),
    Missing,
    Failed(String),
}

/// Reads a file from disk, telling "does not exist" apart from other failures.
pub fn read_fs(path: &Path) -> FileRead {
    match std::fs::read_to_string(path) {
        Ok(text) => FileRead::Text(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileRead::Missing,
        Err(e) => FileRead::Failed(e.to_string()),
    }
}

/// The servers of one file source, applying the missing-file rules: a missing default file is
/// zero servers, a missing named file is [`ConfigError::NotFound`].
pub fn load_source(
    source: &FileSource,
    read: &dyn Fn(&Path) -> FileRead,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let path = match source {
        FileSource::InlineJson(text) => return parse_file(text, env),
        FileSource::Default(p) | FileSource::Explicit(p) => p,
    };
    match (read(path), source) {
        (FileRead::Text(text), _) => parse_file(&text, env).map_err(|e| ConfigError::InFile {
            path: path.clone(),
            error: Box::new(e),
        }),
        (FileRead::Missing, FileSource::Default(_)) => {
            log::debug!(
                "no MCP clients config at {}; no servers from a file",
                path.display()
            );
            Ok(Vec::new())
        }
        (FileRead::Missing, _) => Err(ConfigError::NotFound { path: path.clone() }),
        (FileRead::Failed(message), _) => Err(ConfigError::Read {
            path: path.clone(),
            message,
        }),
    }
}

/// Merges file servers and inline servers: an inline server replaces a file server of the same
/// name (in its place); among either list a later entry replaces an earlier one; new names keep
/// their order after the file's.
pub fn merge(file: Vec<ServerConfig>, inline: Vec<ServerConfig>) -> Vec<ServerConfig> {
    let mut out: Vec<ServerConfig> = Vec::with_capacity(file.len() + inline.len());
    for server in file.into_iter().chain(inline) {
        match out.iter_mut().find(|s| s.name == server.name) {
            Some(slot) => {
                log::info!(
                    "upstream server {:?}: a later definition replaces an earlier one",
                    server.name
                );
                *slot = server;
            }
            None => out.push(server),
        }
    }
    out
}

/// Everything start-up needs: `Ok(None)` when no flag asks for upstream servers (no client
/// manager); otherwise the merged servers (possibly none). Inline flags are checked first so a
/// typo in one is reported before any file is read.
pub fn startup_servers(
    flags: &ClientFlags,
    read: &dyn Fn(&Path) -> FileRead,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Vec<ServerConfig>>, ConfigError> {
    let Some(plan) = plan(flags, env) else {
        return Ok(None);
    };
    let inline = flags
        .inline
        .iter()
        .map(|f| parse_inline(f, env))
        .collect::<Result<Vec<_>, _>>()?;
    let file = match &plan.file {
        Some(src) => load_source(src, read, env)?,
        None => Vec::new(),
    };
    Ok(Some(merge(file, inline)))
}

/// The timing constants. The defaults are the design's; tests shorten them.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Spawn or HTTP handshake plus `initialize` plus the first `tools/list`.
    pub connect_timeout: Duration,
    /// How often a connected server is pinged.
    pub ping_interval: Duration,
    /// How long a ping may take before the connection counts as lost.
    pub ping_timeout: Duration,
    /// Delays before each automatic reconnection attempt; its length is the attempt limit.
    pub backoff: Vec<Duration>,
    /// Between closing a child's stdin, SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            connect_timeout: UPSTREAM_CONNECT_TIMEOUT,
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(10),
            backoff: [1, 2, 4, 8, 16].map(Duration::from_secs).to_vec(),
            kill_grace: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// The defaults with the backoff schedule scaled so its first delay is `base`
    /// (1, 2, 4, 8, 16 × base).
    pub fn with_backoff_base(mut self, base: Duration) -> Timing {
        self.backoff = [1u32, 2, 4, 8, 16].map(|k| base * k).to_vec();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn parse(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
        parse_file(text, &no_env)
    }

    fn parse_err(text: &str) -> String {
        match parse(text) {
            Ok(s) => format!("unexpectedly parsed: {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn one(entry: &str) -> Result<ServerConfig, ConfigError> {
        parse(&format!(r#"{{"servers": {{"s": {entry}}}}}"#)).map(|mut v| v.remove(0))
    }

    fn one_err(entry: &str) -> String {
        match one(entry) {
            Ok(s) => format!("unexpectedly parsed: {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn oauth_entries_are_parsed_and_checked() {
        let s = one(r#"{"url": "http://h/mcp", "oauth": {"client_id": "id", "client_secret": "sec", "scope": "a b"}}"#)
            .unwrap();
        let o = s.oauth.unwrap();
        assert_eq!(o.client_id.as_deref(), Some("id"));
        assert_eq!(o.client_secret.as_deref(), Some("sec"));
        assert_eq!(o.scope.as_deref(), Some("a b"));
        assert_eq!(one(r#"{"url": "http://h/mcp"}"#).unwrap().oauth, None);
        assert_eq!(
            one(r#"{"url": "http://h", "oauth": {}}"#).unwrap().oauth,
            Some(OAuthConfig::default())
        );
        assert_eq!(
            one_err(r#"{"url": "http://h", "oauth": "x"}"#),
            "servers.s.oauth: expected an object, got \"x\""
        );
        assert_eq!(
            one_err(r#"{"url": "http://h", "oauth": {"client_secret": "s"}}"#),
            "servers.s.oauth.client_id: required with \"client_secret\""
        );
        assert_eq!(
            one_err(r#"{"url": "http://h", "oauth": {"scope": 3}}"#),
            "servers.s.oauth.scope: expected a string, got 3"
        );
        assert!(
            one_err(r#"{"url": "http://h", "oauth": {"client_metadata_url": "ftp://x"}}"#)
                .contains("expected an http:// or https:// URL")
        );
    }

    fn stdio(command: &str, args: &[&str]) -> Transport {
        Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: vec![],
            cwd: None,
        }
    }

    // A `servers` file with one stdio entry and one sse entry.
    #[test]
    fn parses_the_documented_example() {
        let text = r#"{
          "servers": {
            "filesystem": {
              "command": "npx",
              "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/user"],
              "env": {},
              "transport": "stdio"
            },
            "remote-db": {
              "url": "http://db-server:8080/mcp/sse",
              "transport": "sse"
            }
          }
        }"#;
        let servers = parse(text).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "filesystem");
        assert_eq!(
            servers[0].transport,
            stdio(
                "npx",
                &[
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "/home/user"
                ]
            )
        );
        assert_eq!(servers[1].name, "remote-db");
        assert_eq!(
            servers[1].transport,
            Transport::Sse {
                url: "http://db-server:8080/mcp/sse".into(),
                headers: vec![]
            }
        );
        assert_eq!(servers[1].transport.kind(), TransportKind::Sse);
        assert_eq!(
            servers[1].transport.url(),
            Some("http://db-server:8080/mcp/sse")
        );
        assert_eq!(servers[0].transport.url(), None);
    }

    // An empty server object, under either root key, is no servers.
    #[test]
    fn empty_servers() {
        assert_eq!(parse(r#"{"servers": {}}"#).unwrap(), vec![]);
        assert_eq!(parse(r#"{"mcpServers": {}}"#).unwrap(), vec![]);
    }

    // Invalid JSON is an error, with a hint when the text has comments.
    #[test]
    fn invalid_json() {
        let e = parse("{").unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::Json {
                    comments: false,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("invalid JSON: "), "{e}");
        let e = parse("{\"servers\": {} // note\n}").unwrap_err();
        assert!(
            e.to_string().ends_with("(JSON does not allow comments)"),
            "{e}"
        );
        let e = parse("/* c */ {\"servers\": {}}").unwrap_err();
        assert!(matches!(e, ConfigError::Json { comments: true, .. }));
        assert!(parse("")
            .unwrap_err()
            .to_string()
            .starts_with("invalid JSON"));
    }

    #[test]
    fn root_shape_errors() {
        assert_eq!(
            parse_err("[]"),
            "expected a JSON object with a \"servers\" or \"mcpServers\" object, got []"
        );
        assert_eq!(
            parse_err("{}"),
            "no \"servers\" or \"mcpServers\" object at the top level"
        );
        assert_eq!(
            parse_err(r#"{"servers": {}, "mcpServers": {}}"#),
            "has both \"servers\" and \"mcpServers\"; use one"
        );
        assert_eq!(
            parse_err(r#"{"servers": []}"#),
            "servers: expected an object of server entries, got []"
        );
        assert_eq!(
            parse_err(r#"{"mcpServers": {"fs": "npx"}}"#),
            "mcpServers.fs: expected an object, got \"npx\""
        );
        // Other top-level keys are ignored (VS Code's "inputs", Claude Code's "projects"...).
        assert_eq!(parse(r#"{"inputs": [], "servers": {}}"#).unwrap(), vec![]);
    }

    // Server names are validated when the file is loaded: letters, digits, `_` and `-` only,
    // not empty, no `__`.
    #[test]
    fn server_names_validated() {
        assert_eq!(
            parse_err(r#"{"servers": {"a/b": {"command": "x"}}}"#),
            "servers.a/b: invalid server name \"a/b\": a server name may only contain letters, \
             digits, '_' and '-', not '/'"
        );
        assert_eq!(
            parse_err(r#"{"servers": {"": {"command": "x"}}}"#),
            "servers.: invalid server name \"\": a server name must not be empty"
        );
        assert_eq!(
            parse_err(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#),
            "mcpServers.a__b: invalid server name \"a__b\": a server name must not contain \
             \"__\" (the tool-name separator)"
        );
        assert!(
            parse(r#"{"servers": {"my-server": {"command": "x"}, "db_1": {"command": "y"}}}"#)
                .is_ok()
        );
    }

    // No transport is fine with exactly one of command / url; neither (or both) is an error.
    #[test]
    fn transport_inferred_or_missing() {
        assert_eq!(
            one(r#"{"command": "srv"}"#).unwrap().transport,
            stdio("srv", &[])
        );
        assert_eq!(
            one(r#"{"url": "http://h/mcp"}"#).unwrap().transport,
            Transport::Auto {
                url: "http://h/mcp".into(),
                headers: vec![]
            }
        );
        assert_eq!(
            one_err("{}"),
            "servers.s: needs a \"command\" (stdio) or a \"url\" (Streamable HTTP, falling back \
             to SSE), or a \"transport\""
        );
        assert_eq!(
            one_err(r#"{"command": "x", "url": "http://h"}"#),
            "servers.s: has both \"command\" and \"url\"; add \"type\": \"stdio\", \"sse\" or \
             \"http\" to choose"
        );
        // With a transport, the other transport's keys are ignored (with a warning).
        let s =
            one(r#"{"type": "stdio", "command": "x", "url": "http://h", "headers": {}}"#).unwrap();
        assert_eq!(s.transport, stdio("x", &[]));
        let s =
            one(r#"{"type": "http", "command": "x", "url": "http://h", "env": {"A": 1}}"#).unwrap();
        assert_eq!(s.transport.kind(), TransportKind::Http);
    }

    // A stdio entry needs a non-empty string `command`.
    #[test]
    fn stdio_missing_command() {
        assert_eq!(
            one_err(r#"{"transport": "stdio"}"#),
            "servers.s.command: required for the stdio transport"
        );
        assert_eq!(
            one_err(r#"{"transport": "stdio", "url": "http://h"}"#),
            "servers.s.command: required for the stdio transport"
        );
        assert_eq!(
            one_err(r#"{"command": "  "}"#),
            "servers.s.command: expected a non-empty string, got \"  \""
        );
        assert_eq!(
            one_err(r#"{"command": ["npx"]}"#),
            "servers.s.command: expected a string, got [\"npx\"]"
        );
    }

    // An sse or http entry needs an http:// or https:// `url` with a host.
    #[test]
    fn http_missing_url() {
        assert_eq!(
            one_err(r#"{"transport": "sse"}"#),
            "servers.s.url: required for the sse transport"
        );
        assert_eq!(
            one_err(r#"{"type": "http", "command": "x"}"#),
            "servers.s.url: required for the http transport"
        );
        assert_eq!(
            one_err(r#"{"url": "ftp://h"}"#),
            "servers.s.url: expected an http:// or https:// URL, got \"ftp://h\""
        );
        assert_eq!(
            one_err(r#"{"type": "sse", "url": "http://"}"#),
            "servers.s.url: expected an http:// or https:// URL, got \"http://\""
        );
        assert_eq!(
            one_err(r#"{"url": 5}"#),
            "servers.s.url: expected a string, got 5"
        );
    }

    // An unknown transport is an error; the Streamable HTTP aliases that hosts write are
    // accepted; `transport` and `type` must agree.
    #[test]
    fn transport_names() {
        assert_eq!(
            one_err(r#"{"transport": "ws", "url": "http://h"}"#),
            "servers.s.transport: unknown transport \"ws\"; expected \"stdio\", \"sse\" or \"http\""
        );
        assert_eq!(
            one_err(r#"{"type": 3, "url": "http://h"}"#),
            "servers.s.type: expected a string, got 3"
        );
        for alias in [
            "http",
            "streamable-http",
            "streamableHttp",
            "streamable_http",
        ] {
            let s = one(&format!(r#"{{"type": "{alias}", "url": "https://h/mcp"}}"#)).unwrap();
            assert_eq!(s.transport.kind(), TransportKind::Http, "{alias}");
        }
        // `transport` and `type` may both be present if they agree.
        assert!(one(r#"{"type": "sse", "transport": "sse", "url": "http://h"}"#).is_ok());
        assert_eq!(
            one_err(r#"{"transport": "sse", "type": "http", "url": "http://h"}"#),
            "servers.s.type: \"http\" contradicts \"transport\": \"sse\""
        );
    }

    // Optional fields take their defaults: 30 s timeout, auto-reconnect, no tool filter.
    #[test]
    fn optional_fields_defaulted() {
        let s = one(r#"{"command": "x"}"#).unwrap();
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert!(s.auto_reconnect);
        assert!(s.allowed_tools.is_empty() && s.denied_tools.is_empty());
        assert!(s.tool_filter().is_empty());
        assert_eq!(s, ServerConfig::new("s", stdio("x", &[])));
    }

    // `timeout_s` (seconds), `timeoutMs` and `timeout_ms` (milliseconds): positive numbers, and
    // several given must agree.
    #[test]
    fn timeouts() {
        assert_eq!(
            one(r#"{"command": "x", "timeout_s": 5}"#).unwrap().timeout,
            Duration::from_secs(5)
        );
        assert_eq!(
            one(r#"{"command": "x", "timeout_s": 0.25}"#)
                .unwrap()
                .timeout,
            Duration::from_millis(250)
        );
        assert_eq!(
            one(r#"{"command": "x", "timeoutMs": 1500}"#)
                .unwrap()
                .timeout,
            Duration::from_millis(1500)
        );
        assert_eq!(
            one(r#"{"command": "x", "timeout_ms": 60000}"#)
                .unwrap()
                .timeout,
            Duration::from_secs(60)
        );
        assert_eq!(
            one(r#"{"command": "x", "timeout_s": 2, "timeout_ms": 2000}"#)
                .unwrap()
                .timeout,
            Duration::from_secs(2)
        );
        assert_eq!(
            one_err(r#"{"command": "x", "timeout_s": 2, "timeoutMs": 3000}"#),
            "servers.s.timeoutMs: 3s contradicts \"timeout_s\" (2s)"
        );
        for (bad, shown) in [
            ("0", "0"),
            ("-1", "-1"),
            ("\"x\"", "\"x\""),
            ("null", "null"),
            ("true", "true"),
            ("1e300", "1e+300"),
        ] {
            assert_eq!(
                one_err(&format!(r#"{{"command": "x", "timeout_s": {bad}}}"#)),
                format!("servers.s.timeout_s: expected a positive number, got {shown}")
            );
        }
        assert_eq!(
            one_err(r#"{"command": "x", "timeout_ms": 0.0000001}"#),
            // Numbers are shown as written (serde_json keeps their text).
            "servers.s.timeout_ms: expected a positive number, got 0.0000001"
        );
        // The whole message, with the server's name in the path.
        assert_eq!(
            parse_err(r#"{"servers": {"time": {"command": "t", "timeout_s": "x"}}}"#),
            "servers.time.timeout_s: expected a positive number, got \"x\""
        );
    }

    // `env` is an object of strings with non-empty names, kept in order; `cwd` is kept.
    #[test]
    fn env_must_be_object_of_strings() {
        assert_eq!(
            one_err(r#"{"command": "x", "env": ["A=1"]}"#),
            "servers.s.env: expected an object of strings, got [\"A=1\"]"
        );
        assert_eq!(
            one_err(r#"{"command": "x", "env": {"A": 1}}"#),
            "servers.s.env.A: expected a string, got 1"
        );
        assert_eq!(
            one_err(r#"{"command": "x", "env": {"": "v"}}"#),
            "servers.s.env.: expected a non-empty name, got \"\""
        );
        let s = one(r#"{"command": "x", "env": {"B": "2", "A": "1"}, "cwd": "/tmp"}"#).unwrap();
        assert_eq!(
            s.transport,
            Transport::Stdio {
                command: "x".into(),
                args: vec![],
                env: vec![("B".into(), "2".into()), ("A".into(), "1".into())],
                cwd: Some(PathBuf::from("/tmp")),
            }
        );
    }

    #[test]
    fn other_field_types() {
        assert_eq!(
            one_err(r#"{"command": "x", "args": "-y"}"#),
            "servers.s.args: expected an array of strings, got \"-y\""
        );
        assert_eq!(
            one_err(r#"{"command": "x", "args": ["a", 2]}"#),
            "servers.s.args[1]: expected a string, got 2"
        );
        assert_eq!(
            one_err(r#"{"command": "x", "cwd": 1}"#),
            "servers.s.cwd: expected a string, got 1"
        );
        assert_eq!(
            one_err(r#"{"command": "x", "cwd": ""}"#),
            "servers.s.cwd: expected a non-empty path, got \"\""
        );
        assert_eq!(
            one_err(r#"{"command": "x", "auto_reconnect": "yes"}"#),
            "servers.s.auto_reconnect: expected true or false, got \"yes\""
        );
        assert!(
            !one(r#"{"command": "x", "auto_reconnect": false}"#)
                .unwrap()
                .auto_reconnect
        );
        assert_eq!(
            one_err(r#"{"url": "http://h", "headers": []}"#),
            "servers.s.headers: expected an object of strings, got []"
        );
        // Header values are never shown: they hold tokens.
        assert_eq!(
            one_err(r#"{"url": "http://h", "headers": {"X-Key": 12345}}"#),
            "servers.s.headers.X-Key: expected a string, got a number"
        );
        assert_eq!(
            one_err(r#"{"url": "http://h", "headers": {"X": "a\r\nEvil: 1"}}"#),
            "servers.s.headers.X: expected a header value without line breaks, got a value with \
             a line break"
        );
        // Unknown keys are ignored.
        assert!(one(r#"{"command": "x", "disabled": false, "alwaysAllow": []}"#).is_ok());
        // A long value is cut in messages.
        let long = "y".repeat(100);
        let msg = one_err(&format!(r#"{{"command": "x", "cwd": [{long:?}]}}"#));
        assert!(msg.ends_with("...") && msg.len() < 120, "{msg}");
    }

    #[test]
    fn tool_lists() {
        let s = one(
            r#"{"command": "x", "allowed_tools": ["read_*", "list"], "denied_tools": ["read_secret"]}"#,
        )
        .unwrap();
        assert_eq!(s.allowed_tools, ["read_*", "list"]);
        assert_eq!(s.denied_tools, ["read_secret"]);
        let f = s.tool_filter();
        assert!(f.allows("read_file") && f.allows("list"));
        assert!(!f.allows("read_secret") && !f.allows("write"));
        assert_eq!(
            one_err(r#"{"command": "x", "denied_tools": "write_*"}"#),
            "servers.s.denied_tools: expected an array of strings, got \"write_*\""
        );
        assert_eq!(
            one_err(r#"{"command": "x", "allowed_tools": [1]}"#),
            "servers.s.allowed_tools[0]: expected a string, got 1"
        );
        assert_eq!(
            one_err(r#"{"command": "x", "allowed_tools": ["a", ""]}"#),
            "servers.s.allowed_tools[1]: expected a non-empty glob pattern, got \"\""
        );
        // Patterns are not expanded.
        let s = one(r#"{"command": "x", "denied_tools": ["${X}"]}"#).unwrap();
        assert_eq!(s.denied_tools, ["${X}"]);
    }

    #[test]
    fn expansion_rules() {
        let env = env_of(&[("A", "1"), ("EMPTY", ""), ("P", "/p")]);
        let x = |s: &str| expand_vars(s, &env);
        assert_eq!(x("plain $A $ {A}").unwrap(), "plain $A $ {A}");
        assert_eq!(x("${A}${A}-${P}/x").unwrap(), "11-/p/x");
        assert_eq!(x("${NOPE:-dflt}").unwrap(), "dflt");
        assert_eq!(x("${EMPTY:-dflt}").unwrap(), "dflt");
        assert_eq!(x("${EMPTY}").unwrap(), "");
        assert_eq!(x("${A:-dflt}").unwrap(), "1");
        assert_eq!(x("${NOPE:-}").unwrap(), "");
        assert_eq!(x("${NOPE:-a:-b}").unwrap(), "a:-b");
        assert_eq!(x("é${A}ü").unwrap(), "é1ü");
        assert_eq!(x("${NOPE}"), Err(ExpandError::Undefined("NOPE".into())));
        assert_eq!(x("${A"), Err(ExpandError::Unterminated));
        assert_eq!(x("${}"), Err(ExpandError::BadName(String::new())));
        assert_eq!(x("${1A}"), Err(ExpandError::BadName("1A".into())));
        assert_eq!(x("${A B}"), Err(ExpandError::BadName("A B".into())));
    }

    #[test]
    fn expansion_in_fields() {
        let env = env_of(&[("BIN", "/usr/bin/srv"), ("TOKEN", "t0k"), ("HOST", "h:1")]);
        let text = r#"{"mcpServers": {
            "a": {"command": "${BIN}", "args": ["--x=${TOKEN}", "${NOPE:-d}"],
                  "env": {"KEY_${BIN}": "${TOKEN}"}, "cwd": "${BIN}"},
            "b": {"type": "http", "url": "http://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#;
        let servers = parse_file(text, &env).unwrap();
        assert_eq!(
            servers[0].transport,
            Transport::Stdio {
                command: "/usr/bin/srv".into(),
                args: vec!["--x=t0k".into(), "d".into()],
                // Keys and cwd are not expanded.
                env: vec![("KEY_${BIN}".into(), "t0k".into())],
                cwd: Some(PathBuf::from("${BIN}")),
            }
        );
        assert_eq!(
            servers[1].transport,
            Transport::Http {
                url: "http://h:1/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer t0k".into())],
            }
        );
        // Debug output hides header and env values.
        let dbg = format!("{servers:?}");
        assert!(
            !dbg.contains("Bearer") && dbg.contains("Authorization"),
            "{dbg}"
        );

        let err =
            |field: &str| match parse_file(&format!(r#"{{"servers": {{"gh": {field}}}}}"#), &env) {
                Ok(_) => String::from("parsed"),
                Err(e) => e.to_string(),
            };
        assert_eq!(
            err(r#"{"command": "${NOPE}"}"#),
            "servers.gh.command: environment variable NOPE is not set (write ${NOPE:-default} to \
             give a default)"
        );
        assert_eq!(
            err(r#"{"command": "x", "args": ["ok", "${NOPE}"]}"#),
            "servers.gh.args[1]: environment variable NOPE is not set (write ${NOPE:-default} to \
             give a default)"
        );
        assert_eq!(
            err(r#"{"command": "x", "env": {"K": "${NOPE}"}}"#),
            "servers.gh.env.K: environment variable NOPE is not set (write ${NOPE:-default} to \
             give a default)"
        );
        assert_eq!(
            err(r#"{"url": "${NOPE}"}"#),
            "servers.gh.url: environment variable NOPE is not set (write ${NOPE:-default} to \
             give a default)"
        );
        assert_eq!(
            err(r#"{"url": "http://h", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}"#),
            "servers.gh.headers.Authorization: environment variable GH_TOKEN is not set (write \
             ${GH_TOKEN:-default} to give a default)"
        );
        assert_eq!(
            err(r#"{"command": "${BIN"}"#),
            "servers.gh.command: \"${\" without a closing \"}\""
        );
        assert_eq!(
            err(r#"{"command": "${B-N}"}"#),
            "servers.gh.command: invalid variable name \"B-N\" in \"${…}\""
        );
        assert_eq!(
            err(r#"{"command": "${EMPTY:-}"}"#),
            "servers.gh.command: expected a non-empty string, got \"\""
        );
        // The message shows the URL as written, not its expansion.
        assert_eq!(
            err(r#"{"url": "${TOKEN}"}"#),
            "servers.gh.url: expected an http:// or https:// URL, got \"${TOKEN}\""
        );
    }

    // The Claude Desktop / Claude Code `mcpServers` shape, with `type`, `headers` and `${VAR}`.
    #[test]
    fn claude_style_config() {
        let env = env_of(&[("TOKEN", "abc")]);
        let text = r#"{
          "mcpServers": {
            "everything": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": { "LOG": "1" } },
            "local-http": { "type": "http", "url": "http://127.0.0.1:3001/mcp", "headers": { "Authorization": "Bearer ${TOKEN}" } },
            "old-sse":    { "type": "sse",  "url": "http://127.0.0.1:3002/sse" },
            "bare-url":   { "url": "https://example.com/mcp/" }
          }
        }"#;
        let s = parse_file(text, &env).unwrap();
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["everything", "local-http", "old-sse", "bare-url"]);
        let kinds: Vec<&str> = s.iter().map(|s| s.transport.kind().as_str()).collect();
        assert_eq!(kinds, ["stdio", "http", "sse", "auto"]);
        // The URL is kept exactly, trailing slash or not.
        assert_eq!(s[3].transport.url(), Some("https://example.com/mcp/"));
        assert_eq!(s[2].transport.url(), Some("http://127.0.0.1:3002/sse"));
    }

    // `--mcp-client NAME:VALUE`: split at the first colon; a URL or a stdio command; the error
    // messages.
    #[test]
    fn inline_flags() {
        let p = |f: &str| parse_inline(f, &no_env);
        let s = p("filesystem:npx -y @modelcontextprotocol/server-filesystem /tmp").unwrap();
        assert_eq!(s.name, "filesystem");
        assert_eq!(
            s.transport,
            stdio(
                "npx",
                &["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
            )
        );
        assert_eq!(s.timeout, UPSTREAM_CALL_TIMEOUT);
        assert!(s.auto_reconnect);
        // First colon only; later colons belong to the value.
        assert_eq!(
            p("remote-db:http://db-server:8080/mcp/sse")
                .unwrap()
                .transport,
            Transport::Auto {
                url: "http://db-server:8080/mcp/sse".into(),
                headers: vec![]
            }
        );
        assert_eq!(
            p("secure-api:https://api.example.com/mcp/sse")
                .unwrap()
                .transport
                .kind(),
            TransportKind::Auto
        );
        assert_eq!(
            p("x:HTTPS://h/").unwrap().transport.kind(),
            TransportKind::Auto
        );
        assert_eq!(
            p("x:  srv  --a:b  ").unwrap().transport,
            stdio("srv", &["--a:b"])
        );

        let e = |f: &str| p(f).unwrap_err().to_string();
        assert_eq!(
            e("no-colon"),
            "--mcp-client \"no-colon\": expected NAME:COMMAND or NAME:URL (no ':' found)"
        );
        assert_eq!(
            e(":command"),
            "--mcp-client \":command\": the server name before ':' is empty"
        );
        assert_eq!(
            e("name:"),
            "--mcp-client \"name:\": nothing after \"name:\"; give a command or an http(s):// URL"
        );
        assert_eq!(
            e("name:   "),
            "--mcp-client \"name:   \": nothing after \"name:\"; give a command or an http(s):// URL"
        );
        assert_eq!(
            e("my server:cmd"),
            "--mcp-client \"my server:cmd\": invalid server name \"my server\": a server name \
             may only contain letters, digits, '_' and '-', not ' '"
        );
        assert_eq!(
            e("a__b:cmd"),
            "--mcp-client \"a__b:cmd\": invalid server name \"a__b\": a server name must not \
             contain \"__\" (the tool-name separator)"
        );
        assert_eq!(
            e("http://host/mcp"),
            "--mcp-client \"http://host/mcp\": looks like a URL without a server name; write \
             NAME:URL"
        );
        assert_eq!(
            e("x:http://"),
            "--mcp-client \"x:http://\": \"http://\" has no host"
        );
    }

    #[test]
    fn inline_json_entry() {
        let env = env_of(&[("T", "tok")]);
        let s = parse_inline(
            r#"gh:{"type": "http", "url": "https://api/mcp", "headers": {"Authorization": "Bearer ${T}"}, "timeout_s": 5}"#,
            &env,
        )
        .unwrap();
        assert_eq!(s.name, "gh");
        assert_eq!(s.timeout, Duration::from_secs(5));
        assert_eq!(
            s.transport,
            Transport::Http {
                url: "https://api/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer tok".into())]
            }
        );
        assert_eq!(
            parse_inline(r#"gh:{"type": "sse"}"#, &env)
                .unwrap_err()
                .to_string(),
            "--mcp-client gh.url: required for the sse transport"
        );
        let e = parse_inline("gh:{nope", &env).unwrap_err().to_string();
        assert!(
            e.starts_with("--mcp-client \"gh:{nope\": invalid JSON entry: "),
            "{e}"
        );
    }

    // Where the config file is looked for: `$CIDELDILL_MCP_CLIENTS_CONFIG`, then
    // `$CIDELDILL_HOME`, then `~/.cideldill`; `~` is expanded and empty values count as unset.
    #[test]
    fn config_paths() {
        assert_eq!(
            config_path(&env_of(&[("HOME", "/home/u")])),
            PathBuf::from("/home/u/.cideldill/mcp_clients.json")
        );
        assert_eq!(
            config_path(&env_of(&[
                ("HOME", "/home/u"),
                ("CIDELDILL_HOME", "/data/cd")
            ])),
            PathBuf::from("/data/cd/mcp_clients.json")
        );
        assert_eq!(
            config_path(&env_of(&[("HOME", "/home/u"), ("CIDELDILL_HOME", "~/cd")])),
            PathBuf::from("/home/u/cd/mcp_clients.json")
        );
        assert_eq!(
            config_path(&env_of(&[
                ("HOME", "/home/u"),
                ("CIDELDILL_HOME", "/data/cd"),
                ("CIDELDILL_MCP_CLIENTS_CONFIG", "/etc/mcp.json")
            ])),
            PathBuf::from("/etc/mcp.json")
        );
        assert_eq!(
            config_path(&env_of(&[
                ("HOME", "/home/u"),
                ("CIDELDILL_MCP_CLIENTS_CONFIG", "~/.claude.json")
            ])),
            PathBuf::from("/home/u/.claude.json")
        );
        // Empty values count as unset.
        assert_eq!(
            config_path(&env_of(&[
                ("HOME", "/home/u"),
                ("CIDELDILL_HOME", ""),
                ("CIDELDILL_MCP_CLIENTS_CONFIG", "")
            ])),
            PathBuf::from("/home/u/.cideldill/mcp_clients.json")
        );
        assert_eq!(
            config_path(&no_env),
            PathBuf::from(".cideldill/mcp_clients.json")
        );
    }

    fn flags(mcp_clients: bool, config: Option<&str>, inline: &[&str]) -> ClientFlags {
        ClientFlags {
            mcp_clients,
            config: config.map(str::to_owned),
            inline: inline.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    // Which config file, if any, the flags select.
    #[test]
    fn which_file() {
        let env = env_of(&[("HOME", "/h")]);
        let file = |f: Option<FileSource>| Some(Plan { file: f });
        assert_eq!(plan(&flags(false, None, &[]), &env), None);
        assert_eq!(
            plan(&flags(true, None, &[]), &env),
            file(Some(FileSource::Default(
                "/h/.cideldill/mcp_clients.json".into()
            )))
        );
        assert_eq!(plan(&flags(false, None, &["a:b"]), &env), file(None));
        assert_eq!(
            plan(&flags(false, Some("/x.json"), &[]), &env),
            file(Some(FileSource::Explicit("/x.json".into())))
        );
        assert_eq!(
            plan(&flags(true, Some("~/x.json"), &["a:b"]), &env),
            file(Some(FileSource::Explicit("/h/x.json".into())))
        );
        assert_eq!(
            plan(&flags(false, Some(r#" {"servers": {}}"#), &[]), &env),
            file(Some(FileSource::InlineJson(r#" {"servers": {}}"#.into())))
        );
    }

    fn reader(files: &'static [(&'static str, &'static str)]) -> impl Fn(&Path) -> FileRead {
        move |p| match files.iter().find(|(n, _)| Path::new(n) == p) {
            Some((_, "EACCES")) => FileRead::Failed("permission denied".into()),
            Some((_, t)) => FileRead::Text((*t).to_owned()),
            None => FileRead::Missing,
        }
    }

    // A missing default file is no servers; a missing explicit file, an unreadable file or a bad
    // entry is an error.
    #[test]
    fn missing_file_rules() {
        let env = env_of(&[("HOME", "/h")]);
        let none = reader(&[]);
        assert_eq!(
            load_source(&FileSource::Default("/h/m.json".into()), &none, &env),
            Ok(vec![])
        );
        let e = load_source(&FileSource::Explicit("/nonexistent".into()), &none, &env).unwrap_err();
        assert_eq!(
            e,
            ConfigError::NotFound {
                path: "/nonexistent".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "MCP clients config file not found: /nonexistent"
        );
        let locked = reader(&[("/h/m.json", "EACCES")]);
        assert_eq!(
            load_source(&FileSource::Default("/h/m.json".into()), &locked, &env)
                .unwrap_err()
                .to_string(),
            "cannot read MCP clients config file /h/m.json: permission denied"
        );
        let bad = reader(&[(
            "/c.json",
            r#"{"servers": {"t": {"command": "x", "timeout_s": "x"}}}"#,
        )]);
        assert_eq!(
            load_source(&FileSource::Explicit("/c.json".into()), &bad, &env)
                .unwrap_err()
                .to_string(),
            "/c.json: servers.t.timeout_s: expected a positive number, got \"x\""
        );
        assert_eq!(
            startup_servers(&flags(true, None, &[]), &none, &env),
            Ok(Some(vec![]))
        );
        assert_eq!(
            startup_servers(&flags(false, Some("/nonexistent"), &[]), &none, &env),
            Err(ConfigError::NotFound {
                path: "/nonexistent".into()
            })
        );
        assert_eq!(
            startup_servers(&flags(false, None, &[]), &none, &env),
            Ok(None)
        );
    }

    // File and inline servers are merged, and an inline server replaces the file's server of the
    // same name.
    #[test]
    fn startup_merge() {
        let env = env_of(&[("HOME", "/h")]);
        let files = reader(&[(
            "/h/.cideldill/mcp_clients.json",
            r#"{"servers": {"a": {"command": "file-a"}, "b": {"command": "file-b"}}}"#,
        )]);
        let got = startup_servers(
            &flags(true, None, &["b:inline-b", "c:http://c/", "c:inline-c"]),
            &files,
            &env,
        )
        .unwrap()
        .unwrap();
        let summary: Vec<(&str, &str)> = got
            .iter()
            .map(|s| match &s.transport {
                Transport::Stdio { command, .. } => (s.name.as_str(), command.as_str()),
                t => (s.name.as_str(), t.url().unwrap_or("")),
            })
            .collect();
        assert_eq!(
            summary,
            [("a", "file-a"), ("b", "inline-b"), ("c", "inline-c")]
        );

        // Inline alone creates the manager with just those servers.
        let got = startup_servers(&flags(false, None, &["x:srv"]), &reader(&[]), &env)
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![ServerConfig::new("x", stdio("srv", &[]))]);

        // A bad inline flag is reported even when the file is missing.
        assert!(matches!(
            startup_servers(&flags(false, Some("/none"), &["bad"]), &reader(&[]), &env),
            Err(ConfigError::Inline { .. })
        ));

        // Inline JSON in --mcp-clients-config.
        let got = startup_servers(
            &flags(
                false,
                Some(r#"{"mcpServers": {"m": {"command": "m"}}}"#),
                &[],
            ),
            &reader(&[]),
            &env,
        )
        .unwrap()
        .unwrap();
        assert_eq!(got[0].name, "m");
    }

    #[test]
    fn merge_order() {
        let s = |n: &str, c: &str| ServerConfig::new(n, stdio(c, &[]));
        assert_eq!(
            merge(
                vec![s("a", "1"), s("b", "1")],
                vec![s("c", "2"), s("a", "2")]
            ),
            vec![s("a", "2"), s("b", "1"), s("c", "2")]
        );
        assert_eq!(merge(vec![], vec![]), vec![]);
    }

    #[test]
    fn read_fs_missing_and_present() {
        assert_eq!(
            read_fs(Path::new("/nonexistent-dir-for-upstream-test/x.json")),
            FileRead::Missing
        );
        let dir = std::env::temp_dir().join(format!("upstream-cfg-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join("mcp_clients.json");
        std::fs::write(&file, r#"{"servers": {}}"#).unwrap();
        assert_eq!(read_fs(&file), FileRead::Text(r#"{"servers": {}}"#.into()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_panics_on_odd_input() {
        let valid = r#"{"mcpServers": {"é": {"url": "hTtP://ü/${A:-é}", "headers": {"h": "${"}}, "a": {"command": "${}", "timeout_s": 1e-320}}}"#;
        for end in 0..=valid.len() {
            if let Some(prefix) = valid.get(..end) {
                let _ = parse_file(prefix, &no_env);
                let _ = parse_inline(prefix, &no_env);
                let _ = parse_inline(&format!("n:{prefix}"), &no_env);
                let _ = expand_vars(prefix, &no_env);
            }
        }
        for odd in [
            "é", "ü:", "x:ü", "x:h", "x:httpé", "x:{", "x:{}", "x:[]", ":", "::",
        ] {
            let _ = parse_inline(odd, &no_env);
        }
        assert!(is_http_url("http://é"));
        assert!(!is_http_url("httpé"));
        assert!(!is_http_url("é"));
    }
}
