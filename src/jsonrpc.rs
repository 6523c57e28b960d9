//! JSON-RPC 2.0: message types, ids, errors and newline framing. Knows nothing of MCP; the MCP
//! server (and later the MCP client) build on it. Wire text is always compact, one message per
//! line, so a newline inside a string is escaped and never breaks the framing.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::limits::MAX_BATCH_LEN;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined (JSON-RPC reserves -32000 to -32099 for servers): a request that was
/// valid but went past one of the server's limits.
pub const LIMIT_EXCEEDED: i64 = -32000;
/// Implementation-defined: the server is shutting down, so a request in flight was stopped
/// (its message says so).
pub const SHUTTING_DOWN: i64 = -32000;

/// A request id: an integer or a string. `92` and `"92"` are different ids and keep their type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Num(i64),
    Str(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Num(n) => write!(f, "{n}"),
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl RequestId {
    /// Reads an id from JSON; null, floats, booleans and objects are not ids.
    pub fn from_value(v: &Value) -> Option<RequestId> {
        match v {
            Value::Number(n) => n.as_i64().map(RequestId::Num),
            Value::String(s) => Some(RequestId::Str(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Num(n) => json!(n),
            RequestId::Str(s) => json!(s),
        }
    }
}

/// An error object.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("code".into(), json!(self.code));
        m.insert("message".into(), json!(self.message));
        if let Some(d) = &self.data {
            m.insert("data".into(), d.clone());
        }
        Value::Object(m)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A request: it has an id and expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    pub params: Value,
}

impl Request {
    /// The `params._meta.progressToken` the client asked progress notifications with.
    pub fn progress_token(&self) -> Option<&Value> {
        self.params.get("_meta")?.get("progressToken")
    }
}

/// A notification: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// A response: a result or an error for one id (null only for unparseable requests).
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub id: Option<RequestId>,
    pub outcome: Result<Value, RpcError>,
}

impl Response {
    pub fn ok(id: RequestId, result: Value) -> Response {
        Response {
            id: Some(id),
            outcome: Ok(result),
        }
    }

    pub fn err(id: Option<RequestId>, error: RpcError) -> Response {
        Response {
            id,
            outcome: Err(error),
        }
    }
}

/// Any message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

impl Message {
    pub fn to_value(&self) -> Value {
        match self {
            Message::Request(r) => {
                json!({"jsonrpc": "2.0", "id": r.id.to_value(), "method": r.method, "params": r.params})
            }
            Message::Notification(n) => {
                if n.params.is_null() {
                    json!({"jsonrpc": "2.0", "method": n.method})
                } else {
                    json!({"jsonrpc": "2.0", "method": n.method, "params": n.params})
                }
            }
            Message::Response(r) => {
                let id =
                    r.id.as_ref()
                        .map(RequestId::to_value)
                        .unwrap_or(Value::Null);
                match &r.outcome {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()}),
                }
            }
        }
    }

    /// Compact JSON text without a trailing newline: the same text as `to_value()`'s, written
    /// straight from the message (no copy of its tree).
    pub fn to_text(&self) -> String {
        fn put(out: &mut Vec<u8>, key: &str, v: &impl serde::Serialize) {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            // Writing JSON values and strings into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, v);
        }
        let id = |id: Option<&RequestId>| match id {
            Some(RequestId::Num(n)) => Value::from(*n),
            Some(RequestId::Str(s)) => Value::from(s.as_str()),
            None => Value::Null,
        };
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\"");
        match self {
            Message::Request(r) => {
                put(&mut out, "id", &id(Some(&r.id)));
                put(&mut out, "method", &r.method);
                put(&mut out, "params", &r.params);
            }
            Message::Notification(n) => {
                put(&mut out, "method", &n.method);
                if !n.params.is_null() {
                    put(&mut out, "params", &n.params);
                }
            }
            Message::Response(r) => {
                put(&mut out, "id", &id(r.id.as_ref()));
                match &r.outcome {
                    Ok(result) => put(&mut out, "result", result),
                    Err(e) => put(&mut out, "error", &e.to_value()),
                }
            }
        }
        out.push(b'}');
        // serde_json writes UTF-8 only.
        String::from_utf8(out).unwrap_or_default()
    }

    pub fn notification(method: &str, params: Value) -> Message {
        Message::Notification(Notification {
            method: method.to_owned(),
            params,
        })
    }
}

/// What one line (or one HTTP body) held.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// One message.
    Single(Message),
    /// A JSON array of messages; invalid members are answered individually.
    Batch(Vec<Result<Message, Response>>),
    /// Not a message at all: the error response to send (id null unless one could be read).
    Invalid(Response),
}

/// Interprets one JSON value as a message, or the error response it deserves.
pub fn message_from_value(v: Value) -> Result<Message, Response> {
    let Value::Object(mut m) = v else {
        return Err(Response::err(
            None,
            RpcError::new(INVALID_REQUEST, "a JSON-RPC message must be an object"),
        ));
    };
    let raw_id = m.remove("id");
    let id = raw_id.as_ref().and_then(RequestId::from_value);
    let invalid = |msg: &str| {
        Err(Response::err(
            id.clone(),
            RpcError::new(INVALID_REQUEST, msg),
        ))
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(method) = m.get("method") {
        let Some(method) = method.as_str().map(str::to_owned) else {
            return invalid("\"method\" must be a string");
        };
        let params = m.remove("params").unwrap_or(Value::Null);
        if !matches!(params, Value::Null | Value::Object(_) | Value::Array(_)) {
            return invalid("\"params\" must be an object or an array");
        }
        return match (raw_id, id) {
            (None, _) => Ok(Message::Notification(Notification { method, params })),
            (Some(_), Some(id)) => Ok(Message::Request(Request { id, method, params })),
            (Some(_), None) => Err(Response::err(
                None,
                RpcError::new(INVALID_REQUEST, "\"id\" must be a string or an integer"),
            )),
        };
    }
    let Some(id_value) = raw_id else {
        return invalid(
            "a message needs \"method\" (request or notification) or \"id\" (response)",
        );
    };
    let id = RequestId::from_value(&id_value);
    let outcome = match (m.remove("result"), m.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(err)) => {
            let code = err
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR);
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            Err(RpcError {
                code,
                message,
                data: err.get("data").cloned(),
            })
        }
        _ => {
            return Err(Response::err(
                id,
                RpcError::new(
                    INVALID_REQUEST,
                    "a response needs exactly one of result and error",
                ),
            ))
        }
    };
    Ok(Message::Response(Response { id, outcome }))
}

/// Parses one line or body. A batch longer than [`MAX_BATCH_LEN`] is refused whole, and its
/// members past the limit are not even parsed (each parsed message costs many times its text).
pub fn parse(text: &str) -> Incoming {
    parse_with_limit(text, MAX_BATCH_LEN)
}

fn parse_with_limit(text: &str, max_batch: usize) -> Incoming {
    let too_long = std::cell::Cell::new(false);
    let parsed = if text.trim_start().starts_with('[') {
        let mut de = serde_json::Deserializer::from_str(text);
        serde::Deserializer::deserialize_seq(
            &mut de,
            BatchItems {
                max: max_batch,
                too_long: &too_long,
            },
        )
        .and_then(|items| de.end().map(|()| Value::Array(items)))
    } else {
        serde_json::from_str(text)
    };
    let value = match parsed {
        Ok(v) => v,
        Err(_) if too_long.get() => {
            let message = format!(
                "batch too long: a JSON-RPC batch may hold at most {max_batch} messages; \
                 send fewer at a time"
            );
            return Incoming::Invalid(Response::err(
                None,
                RpcError::new(INVALID_REQUEST, message)
                    .with_data(json!({"max_batch_len": max_batch})),
            ));
        }
        Err(e) => {
            return Incoming::Invalid(Response::err(
                None,
                RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
            ))
        }
    };
    match value {
        Value::Array(items) if items.is_empty() => Incoming::Invalid(Response::err(
            None,
            RpcError::new(INVALID_REQUEST, "an empty batch is invalid"),
        )),
        Value::Array(items) => Incoming::Batch(items.into_iter().map(message_from_value).collect()),
        other => match message_from_value(other) {
            Ok(m) => Incoming::Single(m),
            Err(r) => Incoming::Invalid(r),
        },
    }
}

/// The members of a batch, at most `max` of them: one more stops the parse (and sets
/// `too_long`) before it is built.
struct BatchItems<'a> {
    max: usize,
    too_long: &'a std::cell::Cell<bool>,
}

impl<'de> serde::de::Visitor<'de> for BatchItems<'_> {
    type Value = Vec<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array of JSON-RPC messages")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
        let mut items = Vec::new();
        loop {
            if items.len() == self.max {
                // Peek at one more member without building it: `IgnoredAny` skips it.
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    self.too_long.set(true);
                    return Err(serde::de::Error::custom("batch too long"));
                }
                return Ok(items);
            }
            match seq.next_element::<Value>()? {
                Some(v) => items.push(v),
                None => return Ok(items),
            }
        }
    }
}

/// Short form of a wire text for trace logs (about 2 KiB).
pub fn excerpt(text: &str) -> &str {
    match text.char_indices().nth(2048) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_type() {
        assert_ne!(RequestId::Num(92), RequestId::Str("92".into()));
        assert_eq!(RequestId::Num(92).to_string(), "92");
        assert_eq!(RequestId::Str("92".into()).to_string(), "\"92\"");
        let Incoming::Single(Message::Request(r)) =
            parse(r#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#)
        else {
            panic!("not a request")
        };
        assert_eq!(r.id, RequestId::Str("7".into()));
        let resp = Message::Response(Response::ok(r.id, json!({})));
        assert_eq!(resp.to_text(), r#"{"jsonrpc":"2.0","id":"7","result":{}}"#);
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":{}}"#),
            Incoming::Single(Message::Request(_))
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"a"}"#),
            Incoming::Single(Message::Notification(_))
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Single(Message::Response(_))
        ));
        let Incoming::Single(Message::Response(r)) =
            parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#)
        else {
            panic!()
        };
        assert_eq!(r.outcome.unwrap_err().code, -32601);
    }

    #[test]
    fn invalid_input_gets_the_right_codes() {
        let code = |text: &str| match parse(text) {
            Incoming::Invalid(r) => r.outcome.unwrap_err().code,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(code("{not json"), PARSE_ERROR);
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code("3"), INVALID_REQUEST);
        assert_eq!(code(r#"{"id":1,"method":"a"}"#), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#),
            INVALID_REQUEST
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        // The id is echoed when it could be read.
        let Incoming::Invalid(r) = parse(r#"{"jsonrpc":"1.0","id":5,"method":"a"}"#) else {
            panic!()
        };
        assert_eq!(r.id, Some(RequestId::Num(5)));
    }

    #[test]
    fn batches_are_split_with_per_member_errors() {
        let Incoming::Batch(items) = parse(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5]"#) else {
            panic!()
        };
        assert!(items[0].is_ok());
        assert!(items[1].is_err());
    }

    #[test]
    fn batches_past_the_limit_are_refused_whole_without_parsing_the_rest() {
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let batch = |n: usize, tail: &str| format!("[{}{tail}]", vec![ping; n].join(","));
        let Incoming::Batch(items) = parse_with_limit(&batch(3, ""), 3) else {
            panic!("three fit")
        };
        assert_eq!(items.len(), 3);
        // One more is too many, whatever follows (even text that is not JSON).
        for tail in ["", ",{not json", ",5"] {
            let Incoming::Invalid(r) = parse_with_limit(&batch(4, tail), 3) else {
                panic!("four are too many")
            };
            let e = r.outcome.unwrap_err();
            assert_eq!(e.code, INVALID_REQUEST);
            assert!(e.message.contains("at most 3 messages"), "{}", e.message);
            assert_eq!(e.data, Some(json!({"max_batch_len": 3})));
            assert_eq!(r.id, None);
        }
        // Broken JSON inside the limit is still a parse error, and so is trailing text.
        let code = |text: &str| match parse_with_limit(text, 3) {
            Incoming::Invalid(r) => r.outcome.unwrap_err().code,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(code(&format!("[{ping},{{bad")), PARSE_ERROR);
        assert_eq!(code(&format!("[{ping}] x")), PARSE_ERROR);
        assert_eq!(code("  [ "), PARSE_ERROR);
        assert_eq!(code(" []"), INVALID_REQUEST);
        assert!(matches!(
            parse(&batch(MAX_BATCH_LEN, "")),
            Incoming::Batch(_)
        ));
        assert!(matches!(
            parse(&batch(MAX_BATCH_LEN + 1, "")),
            Incoming::Invalid(_)
        ));
    }

    #[test]
    fn framing_is_one_line() {
        let m = Message::notification("n", json!({"text": "two\nlines"}));
        let text = m.to_text();
        assert!(!text.contains('\n'));
        assert_eq!(parse(&text), Incoming::Single(m));
    }

    #[test]
    fn text_is_the_value_tree_written_compactly() {
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap();
        let messages = [
            Message::Request(Request {
                id: RequestId::Num(-3),
                method: "tools/call".into(),
                params: json!({"name": "x", "arguments": {"n": big, "s": "é\"\u{1}"}}),
            }),
            Message::notification("notifications/initialized", Value::Null),
            Message::notification("n", json!([1, 2.5, null])),
            Message::Response(Response::ok(
                RequestId::Str("a\"b".into()),
                json!({"z": 1, "a": [] }),
            )),
            Message::Response(Response::err(
                None,
                RpcError::new(PARSE_ERROR, "bad").with_data(json!({"line": 1})),
            )),
            Message::Response(Response::err(
                Some(RequestId::Num(7)),
                RpcError::new(INTERNAL_ERROR, "x"),
            )),
        ];
        for m in messages {
            assert_eq!(m.to_text(), m.to_value().to_string());
        }
    }
}
