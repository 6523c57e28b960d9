//! A small hand-written JSON Schema validator for MCP tool arguments and tool results.
//!
//! Tool arguments are checked against each tool's input schema before its handler runs, and
//! the tests check every tool's real results against its output schema. Full JSON Schema
//! crates pull in dozens of dependencies, so this module implements only the subset the tool
//! table uses:
//!
//! - `type`: one name or an array of names among `object`, `array`, `string`, `integer`,
//!   `number`, `boolean` and `null`. `integer` accepts any number without a fractional part
//!   (so `2.0` too); `number` accepts integers.
//! - `properties`, `required`, and `additionalProperties` (`true`, `false`, or a schema every
//!   property not named in `properties` must match).
//! - `items` (a single schema for every element), `minItems`, `maxItems`.
//! - `enum` and `const` (values compared as JSON: numbers by value, objects ignoring key order).
//! - `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers).
//! - `minLength`, `maxLength`, counted in Unicode scalar values.
//! - `anyOf` and `oneOf` (non-empty lists of schemas).
//! - Annotations, accepted and ignored: `title`, `description`, `default`, `examples`,
//!   `$schema`, `$comment`, `format`, `readOnly`, `deprecated`.
//! - The boolean schemas: `true` (and `{}`) accept everything, `false` rejects everything.
//!
//! Anything else (`pattern`, `$ref`, `allOf`, tuple-form `items`, ...) is refused by
//! [`check_schema`], and [`validate`] fails closed on it: a schema node it cannot honour is
//! reported as a failure rather than silently accepting the value. Validation descends at most
//! 64 schema levels and reports at most 20 failures; it never panics, whatever the schema or
//! the value.

use serde_json::{Map, Number, Value};
use std::cmp::Ordering;
use std::fmt;

/// Most failures one [`validate`] call reports.
const MAX_ERRORS: usize = 20;
/// Deepest schema nesting (the root schema is level 1) that is validated or checked.
const MAX_DEPTH: usize = 64;
/// Longest excerpt of a JSON value quoted in a message, in characters.
const EXCERPT_CHARS: usize = 40;
/// How failures caused by the schema itself, not by the value, begin.
const INVALID_SCHEMA: &str = "invalid schema:";
const TOO_DEEP: &str = "the schema nests deeper than";
/// Most `enum` values listed in one message.
const MAX_LISTED: usize = 10;

const TYPE_NAMES: &[&str] = &[
    "object", "array", "string", "integer", "number", "boolean", "null",
];
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$comment",
    "format",
    "readOnly",
    "deprecated",
];

/// One validation failure: where (a path like `modified_args[0]` or `call_data.method_name`,
/// empty for the root), and what was expected, in words an LLM can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for SchemaError {}

/// Validates `value` against `schema`; returns every failure (empty when valid), in document
/// order, at most 20.
///
/// At each value, failures of the value itself (type, `const`, `enum`, bounds, lengths, counts,
/// missing required properties, `anyOf`/`oneOf`) come first, then those of its elements or
/// properties in the value's own order. A value of the wrong type gets only the type failure.
pub fn validate(schema: &Value, value: &Value) -> Vec<SchemaError> {
    let mut v = Validator {
        errors: Vec::new(),
        limit: MAX_ERRORS,
    };
    v.node(schema, value, "", 1);
    v.errors
}

/// Checks that a schema uses only the keywords above (recursively), for the tool-table test.
///
/// The error names the offending place as a JSON Pointer into the schema, e.g.
/// `at /properties/name: unsupported keyword "pattern"`.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    check_tree(schema, "", 1)
}

// ---------------------------------------------------------------------------------------------
// Schema shape.

fn check_tree(schema: &Value, at: &str, depth: usize) -> Result<(), String> {
    let place = || {
        if at.is_empty() {
            "at the schema root".to_string()
        } else {
            format!("at {at}")
        }
    };
    if depth > MAX_DEPTH {
        return Err(format!("{}: {TOO_DEEP} {MAX_DEPTH} levels", place()));
    }
    check_node(schema).map_err(|e| format!("{}: {e}", place()))?;
    let Value::Object(obj) = schema else {
        return Ok(());
    };
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, sub) in props {
            let at = format!("{at}/properties/{}", pointer_escape(name));
            check_tree(sub, &at, depth + 1)?;
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(sub) = obj.get(key) {
            check_tree(sub, &format!("{at}/{key}"), depth + 1)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = obj.get(key) {
            for (i, sub) in alts.iter().enumerate() {
                check_tree(sub, &format!("{at}/{key}/{i}"), depth + 1)?;
            }
        }
    }
    Ok(())
}

fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Checks one schema node's own keywords (not its subschemas, which are checked when reached).
fn check_node(schema: &Value) -> Result<(), String> {
    let obj = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(obj) => obj,
        other => {
            return Err(format!(
                "a schema must be an object or a boolean, not {}",
                kind(other)
            ))
        }
    };
    for (key, v) in obj {
        let key = key.as_str();
        let ok = match key {
            _ if ANNOTATIONS.contains(&key) => true,
            "const" => true,
            "type" => {
                if type_names(v).is_none() {
                    return Err(format!(
                        "\"type\" must be one of {} or a non-empty array of them",
                        TYPE_NAMES
                            .iter()
                            .map(|t| format!("\"{t}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                true
            }
            "properties" => v.is_object(),
            "required" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            "additionalProperties" => v.is_object() || v.is_boolean(),
            "items" => {
                if v.is_array() {
                    return Err(
                        "\"items\" must be a single schema (the array form is not supported)"
                            .to_string(),
                    );
                }
                v.is_object() || v.is_boolean()
            }
            "enum" | "anyOf" | "oneOf" => v.as_array().is_some_and(|a| !a.is_empty()),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => v.is_number(),
            "minLength" | "maxLength" | "minItems" | "maxItems" => as_count(v).is_some(),
            _ => return Err(format!("unsupported keyword \"{key}\"")),
        };
        if !ok {
            let wanted = match key {
                "properties" => "an object mapping property names to schemas",
                "required" => "an array of property names",
                "additionalProperties" | "items" => "a schema (an object or a boolean)",
                "enum" => "a non-empty array of values",
                "anyOf" | "oneOf" => "a non-empty array of schemas",
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => "a number",
                _ => "a non-negative integer",
            };
            return Err(format!("\"{key}\" must be {wanted}, got {}", got(v)));
        }
    }
    Ok(())
}

/// The names of a `type` keyword's value, or `None` when it is malformed.
fn type_names(t: &Value) -> Option<Vec<&str>> {
    let names: Vec<&str> = match t {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) if !a.is_empty() => a.iter().map(Value::as_str).collect::<Option<_>>()?,
        _ => return None,
    };
    names
        .iter()
        .all(|n| TYPE_NAMES.contains(n))
        .then_some(names)
}

fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

// ---------------------------------------------------------------------------------------------
// Validation.

struct Validator {
    errors: Vec<SchemaError>,
    limit: usize,
}

impl Validator {
    fn full(&self) -> bool {
        self.errors.len() >= self.limit
    }

    fn fail(&mut self, path: &str, message: String) {
        if !self.full() {
            self.errors.push(SchemaError {
                path: path.to_string(),
                message,
            });
        }
    }

    /// The first failure of `value` against `schema`, or `None` when it matches.
    fn first_error(schema: &Value, value: &Value, path: &str, depth: usize) -> Option<SchemaError> {
        let mut sub = Validator {
            errors: Vec::new(),
            limit: 1,
        };
        sub.node(schema, value, path, depth);
        sub.errors.pop()
    }

    fn node(&mut self, schema: &Value, value: &Value, path: &str, depth: usize) {
        if self.full() {
            return;
        }
        if depth > MAX_DEPTH {
            let message = format!("{TOO_DEEP} {MAX_DEPTH} levels; validation stopped here");
            self.fail(path, message);
            return;
        }
        if let Err(e) = check_node(schema) {
            self.fail(path, format!("{INVALID_SCHEMA} {e}"));
            return;
        }
        let obj = match schema {
            Value::Object(obj) => obj,
            Value::Bool(false) => {
                self.fail(
                    path,
                    format!("no value is allowed here, got {}", got(value)),
                );
                return;
            }
            _ => return,
        };
        if let Some(names) = obj.get("type").and_then(type_names) {
            if !names.iter().any(|n| type_accepts(n, value)) {
                let message = format!("expected {}, got {}", join_types(&names), got(value));
                self.fail(path, message);
                return;
            }
        }
        if let Some(c) = obj.get("const") {
            if !json_eq(c, value, 0) {
                self.fail(
                    path,
                    format!("expected {}, got {}", excerpt(c), excerpt(value)),
                );
            }
        }
        if let Some(Value::Array(options)) = obj.get("enum") {
            if !options.iter().any(|o| json_eq(o, value, 0)) {
                let message = format!(
                    "expected one of {}, got {}",
                    list_values(options),
                    excerpt(value)
                );
                self.fail(path, message);
            }
        }
        match value {
            Value::Number(n) => self.bounds(obj, n, path),
            Value::String(s) => self.lengths(obj, s, path),
            Value::Array(items) => self.counts(obj, items.len(), path),
            Value::Object(map) => self.required(obj, map, path),
            _ => {}
        }
        self.alternatives(obj, value, path, depth);
        match value {
            Value::Array(items) => {
                if let Some(item_schema) = obj.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        if self.full() {
                            return;
                        }
                        self.node(item_schema, item, &format!("{path}[{i}]"), depth + 1);
                    }
                }
            }
            Value::Object(map) => self.properties(obj, map, path, depth),
            _ => {}
        }
    }

    fn bounds(&mut self, obj: &Map<String, Value>, n: &Number, path: &str) {
        // Each bound: its keyword, the relation it demands, and the orderings of
        // `value.cmp(limit)` that satisfy it.
        let checks = [
            ("minimum", ">=", [Ordering::Equal, Ordering::Greater]),
            ("maximum", "<=", [Ordering::Less, Ordering::Equal]),
            ("exclusiveMinimum", ">", [Ordering::Greater; 2]),
            ("exclusiveMaximum", "<", [Ordering::Less; 2]),
        ];
        for (key, op, allowed) in checks {
            if let Some(Value::Number(limit)) = obj.get(key) {
                if !allowed.contains(&cmp_numbers(n, limit)) {
                    self.fail(path, format!("must be {op} {limit}, got {n}"));
                }
            }
        }
    }

    fn lengths(&mut self, obj: &Map<String, Value>, s: &str, path: &str) {
        let len = s.chars().count() as u64;
        if let Some(min) = obj.get("minLength").and_then(as_count) {
            if len < min {
                let message = format!(
                    "must be at least {} long, got {len}",
                    plural(min, "character")
                );
                self.fail(path, message);
            }
        }
        if let Some(max) = obj.get("maxLength").and_then(as_count) {
            if len > max {
                let message = format!(
                    "must be at most {} long, got {len}",
                    plural(max, "character")
                );
                self.fail(path, message);
            }
        }
    }

    fn counts(&mut self, obj: &Map<String, Value>, len: usize, path: &str) {
        let len = len as u64;
        if let Some(min) = obj.get("minItems").and_then(as_count) {
            if len < min {
                let message = format!("must have at least {}, got {len}", plural(min, "item"));
                self.fail(path, message);
            }
        }
        if let Some(max) = obj.get("maxItems").and_then(as_count) {
            if len > max {
                let message = format!("must have at most {}, got {len}", plural(max, "item"));
                self.fail(path, message);
            }
        }
    }

    fn required(&mut self, obj: &Map<String, Value>, map: &Map<String, Value>, path: &str) {
        let Some(Value::Array(required)) = obj.get("required") else {
            return;
        };
        let props = obj.get("properties").and_then(Value::as_object);
        let what = if path.is_empty() {
            "parameter"
        } else {
            "property"
        };
        for name in required.iter().filter_map(Value::as_str) {
            if map.contains_key(name) {
                continue;
            }
            let expected = props
                .and_then(|p| p.get(name))
                .and_then(|s| describe(s, 0))
                .filter(|d| d != "any value")
                .map(|d| format!(" (expected {d})"))
                .unwrap_or_default();
            let message = format!("required {what} is missing{expected}");
            self.fail(&key_path(path, name), message);
        }
    }

    fn properties(
        &mut self,
        obj: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let props = obj.get("properties").and_then(Value::as_object);
        let extra = obj.get("additionalProperties");
        for (name, v) in map {
            if self.full() {
                return;
            }
            let sub_path = key_path(path, name);
            match (props.and_then(|p| p.get(name)), extra) {
                (Some(sub), _) => self.node(sub, v, &sub_path, depth + 1),
                (None, Some(Value::Bool(false))) => {
                    self.fail(&sub_path, "unknown property".to_string())
                }
                (None, Some(sub)) => self.node(sub, v, &sub_path, depth + 1),
                (None, None) => {}
            }
        }
    }

    fn alternatives(&mut self, obj: &Map<String, Value>, value: &Value, path: &str, depth: usize) {
        if let Some(Value::Array(alts)) = obj.get("anyOf") {
            let mut firsts = Vec::with_capacity(alts.len());
            for alt in alts {
                match Self::first_error(alt, value, path, depth + 1) {
                    None => {
                        firsts.clear();
                        break;
                    }
                    Some(e) => firsts.push(e),
                }
            }
            if firsts.len() == alts.len() {
                self.fail(path, none_matched(alts, &firsts, value, path));
            }
        }
        if let Some(Value::Array(alts)) = obj.get("oneOf") {
            let mut matching = Vec::new();
            let mut firsts = Vec::with_capacity(alts.len());
            for (i, alt) in alts.iter().enumerate() {
                match Self::first_error(alt, value, path, depth + 1) {
                    None => matching.push(i),
                    Some(e) => firsts.push(e),
                }
            }
            if matching.is_empty() {
                self.fail(path, none_matched(alts, &firsts, value, path));
            } else if matching.len() > 1 {
                let descs: Vec<String> = matching
                    .iter()
                    .map(|&i| describe_alternative(&alts[i], i))
                    .collect();
                let message = format!(
                    "matches {} of the alternatives ({}) but must match exactly one, got {}",
                    matching.len(),
                    descs.join(", and "),
                    got(value)
                );
                self.fail(path, message);
            }
        }
    }
}

/// The message when no alternative of `anyOf`/`oneOf` matched; `firsts` holds each
/// alternative's first failure. When exactly one alternative admits the value's JSON type,
/// its failure is quoted, since that is the one the caller most likely meant.
fn none_matched(alts: &[Value], firsts: &[SchemaError], value: &Value, path: &str) -> String {
    let descs: Vec<String> = alts
        .iter()
        .enumerate()
        .map(|(i, a)| describe_alternative(a, i))
        .collect();
    let mut message = format!(
        "none of the alternatives matched (expected {}), got {}",
        descs.join(", or "),
        got(value)
    );
    // A fault in the schema itself matters more than any guess at the caller's intent.
    if let Some(e) = firsts.iter().find(|e| is_schema_fault(e)) {
        message.push_str(&format!("; {e}"));
        return message;
    }
    let admitting: Vec<usize> = (0..alts.len())
        .filter(|&i| admits_type(&alts[i], value))
        .collect();
    if let ([i], true) = (admitting.as_slice(), alts.len() > 1) {
        if let Some(e) = firsts.get(*i) {
            let detail = if e.path == path {
                e.message.clone()
            } else {
                e.to_string()
            };
            message.push_str(&format!("; as {}: {detail}", descs[*i]));
        }
    }
    message
}

fn is_schema_fault(e: &SchemaError) -> bool {
    e.message.starts_with(INVALID_SCHEMA) || e.message.starts_with(TOO_DEEP)
}

/// Whether `schema`'s `type` (if any) admits `value`'s JSON type.
fn admits_type(schema: &Value, value: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(obj) => match obj.get("type").and_then(type_names) {
            Some(names) => names.iter().any(|n| type_accepts(n, value)),
            None => true,
        },
        _ => false,
    }
}

fn type_accepts(name: &str, value: &Value) -> bool {
    match (name, value) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("number", Value::Number(_))
        | ("boolean", Value::Bool(_))
        | ("null", Value::Null) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        _ => false,
    }
}

fn article(name: &str) -> String {
    match name {
        "null" => "null".to_string(),
        "object" | "array" | "integer" => format!("an {name}"),
        _ => format!("a {name}"),
    }
}

/// `a string`, `a string or null`, `an integer, a string or null`.
fn join_types(names: &[&str]) -> String {
    let words: Vec<String> = names.iter().map(|n| article(n)).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => "nothing".to_string(),
    }
}

fn describe_alternative(schema: &Value, i: usize) -> String {
    describe(schema, 0).unwrap_or_else(|| format!("alternative {}", i + 1))
}

/// A short description of what `schema` accepts, when one can be given.
fn describe(schema: &Value, depth: usize) -> Option<String> {
    let obj = match schema {
        Value::Bool(true) => return Some("any value".to_string()),
        Value::Bool(false) => return Some("nothing".to_string()),
        Value::Object(obj) => obj,
        _ => return None,
    };
    if let Some(c) = obj.get("const") {
        return Some(excerpt(c));
    }
    if let Some(Value::Array(options)) = obj.get("enum") {
        return Some(format!("one of {}", list_values(options)));
    }
    if let Some(t) = obj.get("type") {
        let names = type_names(t)?;
        if let ["array"] = names.as_slice() {
            let item = obj
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(type_names);
            if let Some(["null"]) = item.as_deref() {
                return Some("an array of nulls".to_string());
            }
            if let Some([item]) = item.as_deref() {
                return Some(format!("an array of {item}s"));
            }
        }
        if let ["object"] = names.as_slice() {
            let required: Vec<String> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(excerpt_str)
                        .collect()
                })
                .unwrap_or_default();
            if !required.is_empty() {
                return Some(format!("an object with {}", required.join(", ")));
            }
        }
        return Some(join_types(&names));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = obj.get(key) {
            if depth >= 3 {
                return None;
            }
            let parts: Option<Vec<String>> = alts.iter().map(|a| describe(a, depth + 1)).collect();
            return parts.map(|p| p.join(" or "));
        }
    }
    let constrains = obj.keys().any(|k| !ANNOTATIONS.contains(&k.as_str()));
    if constrains {
        None
    } else {
        Some("any value".to_string())
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Path of property `key` below `parent`: `a.b`, or `a["odd key"]` when the key is not a
/// plain name.
fn key_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '$');
    if !plain {
        format!("{parent}[{}]", excerpt_str(key))
    } else if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

// ---------------------------------------------------------------------------------------------
// JSON values: comparison and excerpts.

/// JSON equality: numbers by value (`1 == 1.0`), objects regardless of key order.
fn json_eq(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > 2 * MAX_DEPTH {
        return false;
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q, depth + 1))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q, depth + 1)))
        }
        _ => a == b,
    }
}

enum Num {
    Int(i128),
    Float(f64),
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else {
        Num::Float(n.as_f64().unwrap_or(0.0))
    }
}

/// Exact numeric comparison of two JSON numbers, whatever their representation.
fn cmp_numbers(a: &Number, b: &Number) -> Ordering {
    match (num(a), num(b)) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

fn cmp_int_float(i: i128, f: f64) -> Ordering {
    match (i as f64).partial_cmp(&f) {
        // Equal after rounding: `f` is then a whole number within i128 range, so the cast is
        // exact and the integer comparison settles it.
        Some(Ordering::Equal) => i.cmp(&(f as i128)),
        Some(o) => o,
        None => Ordering::Equal,
    }
}

/// `a string ("5")`, `an integer (3)`, `null`.
fn got(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        _ => format!("{} ({})", kind(v), excerpt(v)),
    }
}

/// "a string", "an array", ...: a JSON value's type as error messages name it.
pub fn type_phrase(v: &Value) -> &'static str {
    match v {
        Value::Number(_) => "a number",
        other => kind(other),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn list_values(options: &[Value]) -> String {
    let mut parts: Vec<String> = options.iter().take(MAX_LISTED).map(excerpt).collect();
    if options.len() > MAX_LISTED {
        parts.push(format!("and {} more", options.len() - MAX_LISTED));
    }
    parts.join(", ")
}

/// Compact JSON text of `v`, cut to at most 40 characters (ending in `...` when cut).
/// Only as much of the value as fits is ever visited.
fn excerpt(v: &Value) -> String {
    let mut e = Excerpt {
        out: String::new(),
        chars: 0,
        cut: false,
    };
    e.value(v);
    e.finish()
}

fn excerpt_str(s: &str) -> String {
    let mut e = Excerpt {
        out: String::new(),
        chars: 0,
        cut: false,
    };
    e.string(s);
    e.finish()
}

struct Excerpt {
    out: String,
    chars: usize,
    cut: bool,
}

impl Excerpt {
    fn push(&mut self, c: char) {
        if self.chars >= EXCERPT_CHARS {
            self.cut = true;
        } else if !self.cut {
            self.out.push(c);
            self.chars += 1;
        }
    }

    fn text(&mut self, s: &str) {
        for c in s.chars() {
            if self.cut {
                return;
            }
            self.push(c);
        }
    }

    fn string(&mut self, s: &str) {
        self.push('"');
        for c in s.chars() {
            if self.cut {
                return;
            }
            match c {
                '"' => self.text("\\\""),
                '\\' => self.text("\\\\"),
                '\n' => self.text("\\n"),
                '\r' => self.text("\\r"),
                '\t' => self.text("\\t"),
                c if (c as u32) < 0x20 => self.text(&format!("\\u{:04x}", c as u32)),
                c => self.push(c),
            }
        }
        self.push('"');
    }

    fn value(&mut self, v: &Value) {
        if self.cut {
            return;
        }
        match v {
            Value::Null => self.text("null"),
            Value::Bool(b) => self.text(if *b { "true" } else { "false" }),
            Value::Number(n) => self.text(&n.to_string()),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.push('[');
                for (i, item) in items.iter().enumerate() {
                    if self.cut {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.value(item);
                }
                self.push(']');
            }
            Value::Object(map) => {
                self.push('{');
                for (i, (k, item)) in map.iter().enumerate() {
                    if self.cut {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.string(k);
                    self.push(':');
                    self.value(item);
                }
                self.push('}');
            }
        }
    }

    fn finish(mut self) -> String {
        if self.cut {
            let keep: String = self.out.chars().take(EXCERPT_CHARS - 3).collect();
            self.out = keep + "...";
        }
        self.out
    }
}

#[cfg(test)]
mod tests;
