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
use crate::limits::UPSTREAM_CALL_TIMEOUT;

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

#[cfg(test)]
mod tests;
