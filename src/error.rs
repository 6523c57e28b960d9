//! Errors: `Error` for start-up and I/O failures, `ApiError` for answers to a request, the one
//! error shape of every face and layer (REST handlers, MCP tools, the external MCP server
//! manager). An `ApiError` carries the exact JSON body the protocol doc prescribes (the original
//! server's shapes differ from route to route), the HTTP status REST answers with, and an
//! optional hint that MCP tool errors show to agents.

use std::fmt;
use std::io;

use serde_json::{json, Map, Value};

/// Failures that end an operation of the server itself (start-up, persistence, sockets).
#[derive(Debug)]
pub enum Error {
    Io {
        context: String,
        source: io::Error,
    },
    Config(String),
    /// A `--mcp` process that joined a running server lost its session.
    Joined(String),
}

impl Error {
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Config(msg) => f.write_str(msg),
            Error::Joined(why) => write!(f, "mcp bridge: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// An error answer to one request: an HTTP status and a JSON object body that always has an
/// `"error"` key (a snake_case code, or the original's literal text where the protocol doc says so).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub body: Map<String, Value>,
    /// What to do next, for an agent: MCP tool errors carry it as `hint` (a default by code
    /// when `None`); REST bodies never show it.
    pub hint: Option<String>,
}

impl ApiError {
    /// `{"error": code, "message": message}` with the given status.
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> ApiError {
        let mut body = Map::new();
        body.insert("error".into(), json!(code));
        body.insert("message".into(), json!(message.into()));
        ApiError {
            status,
            body,
            hint: None,
        }
    }

    /// `{"error": code}` alone, for the routes whose original answer has no message.
    pub fn bare(status: u16, code: &str) -> ApiError {
        let mut body = Map::new();
        body.insert("error".into(), json!(code));
        ApiError {
            status,
            body,
            hint: None,
        }
    }

    /// Adds one more field to the body.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.body.insert(key.into(), value.into());
        self
    }

    /// Sets the hint for agents.
    pub fn with_hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hint = Some(hint.into());
        self
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, code, message)
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(404, code, message)
    }

    pub fn conflict(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, code, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "internal_error", message)
    }

    pub fn storage(err: &io::Error) -> ApiError {
        ApiError::new(
            500,
            "storage_error",
            format!("could not write to the database: {err}"),
        )
    }

    /// The machine-readable code (`"error"` field).
    pub fn code(&self) -> &str {
        self.body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("error")
    }

    /// The human-readable message, falling back to the code.
    pub fn message(&self) -> &str {
        self.body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_else(|| self.code())
    }

    pub fn to_json(&self) -> Value {
        Value::Object(self.body.clone())
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code(), self.message())
    }
}
