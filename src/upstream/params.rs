//! Tool parameters mirrored into HTTP headers (revision 2026-07-28, Streamable HTTP "Custom
//! Headers from Tool Parameters").
//!
//! A modern server may mark a property of a tool's `inputSchema` with `x-mcp-header: "Name"`;
//! a client calling that tool over Streamable HTTP must then send the argument's value as the
//! header `Mcp-Param-Name`, and must leave out of its catalog every tool whose annotations
//! break the rules. [`bindings`] checks a schema's annotations and says where each header's
//! value comes from; [`headers`] computes a call's headers from its arguments.
//!
//! The rules: the name is a non-empty HTTP token (RFC 9110 `1*tchar`: no space, colon, control
//! or non-ASCII character), unique ignoring case within the schema; the property's `type` is
//! `string`, `integer` or `boolean` (a list of types may add `"null"`; `number`, `object`,
//! `array` and `null` alone are refused); and the property is reached from the root through
//! `properties` keys only (an annotation under `items`, a composition, a condition, `$ref` or a
//! definition makes the tool invalid). A value is mirrored as its string form (a string as is,
//! a number in decimal, a boolean as `true`/`false`), encoded like `Mcp-Name` (base64 when it
//! is not plain visible ASCII, see [`super::http::header_value`]); a missing or `null` value
//! sends no header.

use serde_json::Value;

use super::http::header_value;

/// The annotation's key in a property schema.
pub const ANNOTATION: &str = "x-mcp-header";

/// The prefix of a mirrored parameter's header name.
pub const HEADER_PREFIX: &str = "Mcp-Param-";

/// One valid annotation: header `Mcp-Param-{header}` takes the argument at `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub header: String,
    pub path: Vec<String>,
}

/// Keywords whose values are data, not schemas: an `x-mcp-header` key inside them is no
/// annotation.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// Keywords whose values map names to schemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The annotations of a tool's `inputSchema`, or why the tool must be left out. A schema
/// without annotations (or no schema) gives no bindings.
pub fn bindings(schema: &Value) -> Result<Vec<Binding>, String> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found)?;
    let everywhere = count_annotations(schema);
    if everywhere > found.len() {
        return Err(format!(
            "an {ANNOTATION} annotation is not reached from the schema's root through \
             `properties` alone (it sits under items, a composition, a condition, $ref or a \
             definition)"
        ));
    }
    for (i, b) in found.iter().enumerate() {
        if let Some(other) = found[..i]
            .iter()
            .find(|o| o.header.eq_ignore_ascii_case(&b.header))
        {
            return Err(format!(
                "{ANNOTATION} {:?} (property {}) repeats {:?} (property {}) ignoring case",
                b.header,
                b.path.join("."),
                other.header,
                other.path.join(".")
            ));
        }
    }
    Ok(found)
}

/// Walks the `properties` chain from `schema`, checking and collecting annotations.
fn collect(schema: &Value, path: &mut Vec<String>, found: &mut Vec<Binding>) -> Result<(), String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (name, prop) in props {
        path.push(name.clone());
        if let Some(annotation) = prop.get(ANNOTATION) {
            let where_ = path.join(".");
            let header = check_name(annotation).map_err(|e| format!("property {where_}: {e}"))?;
            check_type(prop.get("type")).map_err(|e| format!("property {where_}: {e}"))?;
            found.push(Binding {
                header,
                path: path.clone(),
            });
        }
        collect(prop, path, found)?;
        path.pop();
    }
    Ok(())
}

/// Every `x-mcp-header` key at a schema position anywhere in `schema`.
fn count_annotations(schema: &Value) -> usize {
    match schema {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| {
                if k == ANNOTATION {
                    1
                } else if DATA_KEYWORDS.contains(&k.as_str()) {
                    0
                } else if SCHEMA_MAPS.contains(&k.as_str()) {
                    v.as_object()
                        .map_or(0, |m| m.values().map(count_annotations).sum())
                } else {
                    count_annotations(v)
                }
            })
            .sum(),
        Value::Array(a) => a.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

/// An annotation's header name: a non-empty RFC 9110 token.
fn check_name(annotation: &Value) -> Result<String, String> {
    let Some(name) = annotation.as_str() else {
        return Err(format!("{ANNOTATION} is not a string: {annotation}"));
    };
    if name.is_empty() {
        return Err(format!("{ANNOTATION} is empty"));
    }
    if let Some(c) = name.chars().find(|&c| !is_tchar(c)) {
        return Err(format!(
            "{ANNOTATION} {name:?} holds {c:?}, which an HTTP header name cannot (RFC 9110 token)"
        ));
    }
    Ok(name.to_owned())
}

/// RFC 9110 `tchar`.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The annotated property's `type`: `string`, `integer` or `boolean` (also in a list with
/// `"null"`).
fn check_type(ty: Option<&Value>) -> Result<(), String> {
    const PRIMITIVE: [&str; 3] = ["string", "integer", "boolean"];
    let ok = match ty {
        Some(Value::String(t)) => PRIMITIVE.contains(&t.as_str()),
        Some(Value::Array(list)) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            names.len() == list.len()
                && names.iter().filter(|t| **t != "null").count() == 1
                && names.iter().all(|t| *t == "null" || PRIMITIVE.contains(t))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{ANNOTATION} is only allowed on a string, integer or boolean property (its type is {})",
            ty.map_or_else(|| "not given".to_owned(), Value::to_string)
        ))
    }
}

/// The `Mcp-Param-*` headers of a call with `arguments`: one per binding whose argument is
/// present and not `null`.
pub fn headers(bindings: &[Binding], arguments: &Value) -> Vec<(String, String)> {
    bindings
        .iter()
        .filter_map(|b| {
            let value = b
                .path
                .iter()
                .try_fold(arguments, |v, key| v.as_object().and_then(|o| o.get(key)))?;
            let text = match value {
                Value::Null => return None,
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            Some((format!("{HEADER_PREFIX}{}", b.header), header_value(&text)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prop(ty: Value, header: Value) -> Value {
        json!({"type": "object", "properties": {"p": {"type": ty, "x-mcp-header": header}}})
    }

    fn err(schema: &Value) -> String {
        bindings(schema).expect_err("invalid")
    }

    #[test]
    fn valid_annotations_give_their_paths() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
                "n": {"type": ["integer", "null"], "x-mcp-header": "N"},
                "nested": {"type": "object", "properties": {
                    "flag": {"type": "boolean", "x-mcp-header": "Flag"}
                }},
                "odd": {"type": "string", "default": {"x-mcp-header": "data, not a schema"}},
                "x-mcp-header": {"type": "string"}
            }
        });
        let got = bindings(&schema).unwrap();
        let got: Vec<(String, String)> = got
            .into_iter()
            .map(|b| (b.header, b.path.join(".")))
            .collect();
        assert_eq!(
            got,
            [
                ("Region".into(), "region".into()),
                ("N".into(), "n".into()),
                ("Flag".into(), "nested.flag".into()),
            ]
        );
        assert_eq!(bindings(&json!({})), Ok(vec![]));
        assert_eq!(bindings(&Value::Null), Ok(vec![]));
    }

    #[test]
    fn invalid_annotations_say_why() {
        for (schema, why) in [
            (prop(json!("string"), json!("")), "is empty"),
            (prop(json!("string"), json!(7)), "is not a string"),
            (prop(json!("string"), json!("My Region")), "holds ' '"),
            (prop(json!("string"), json!("Region:Primary")), "holds ':'"),
            (prop(json!("string"), json!("Région")), "holds 'é'"),
            (prop(json!("string"), json!("Region\t1")), "holds '\\t'"),
            (
                prop(json!("object"), json!("Data")),
                "its type is \"object\"",
            ),
            (
                prop(json!("array"), json!("Items")),
                "its type is \"array\"",
            ),
            (prop(json!("null"), json!("Nil")), "its type is \"null\""),
            (prop(json!("number"), json!("F")), "its type is \"number\""),
            (
                prop(json!(["string", "integer"]), json!("Two")),
                "only allowed",
            ),
            (
                json!({"properties": {"p": {"x-mcp-header": "P"}}}),
                "type is not given",
            ),
        ] {
            let e = err(&schema);
            assert!(e.contains(why), "{schema}: {e}");
            assert!(e.starts_with("property p: "), "{e}");
        }
        for dup in [["Region", "Region"], ["MyField", "myfield"]] {
            let schema = json!({"properties": {
                "a": {"type": "string", "x-mcp-header": dup[0]},
                "b": {"type": "string", "x-mcp-header": dup[1]},
            }});
            assert!(err(&schema).contains("ignoring case"), "{dup:?}");
        }
        for hidden in [
            json!({"properties": {"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}, "properties": {"d": {"$ref": "#/$defs/d"}}}),
            json!({"if": {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}}),
        ] {
            assert!(err(&hidden).contains("not reached"), "{hidden}");
        }
    }

    #[test]
    fn headers_mirror_present_values_encoded() {
        let schema = json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "text": {"type": "string", "x-mcp-header": "Text"},
            "method": {"type": "string", "x-mcp-header": "Method"},
            "missing": {"type": "string", "x-mcp-header": "Missing"},
            "nested": {"type": "object", "properties": {"deep": {"type": "string", "x-mcp-header": "Deep"}}},
            "query": {"type": "string"}
        }});
        let b = bindings(&schema).unwrap();
        let args = json!({"region": "us-west1", "priority": 42, "verbose": false,
            "text": "Hello, 世界", "method": null, "nested": {"deep": " padded "}, "query": "SELECT 1"});
        assert_eq!(
            headers(&b, &args),
            [
                ("Mcp-Param-Region".into(), "us-west1".into()),
                ("Mcp-Param-Priority".into(), "42".into()),
                ("Mcp-Param-Verbose".into(), "false".into()),
                (
                    "Mcp-Param-Text".into(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".into()
                ),
                ("Mcp-Param-Deep".into(), "=?base64?IHBhZGRlZCA=?=".into()),
            ]
        );
        let tricky = json!({"text": "line1\nline2", "region": "=?base64?literal?=", "priority": -7, "verbose": true});
        let h = headers(&b, &tricky);
        assert_eq!(
            h,
            [
                (
                    "Mcp-Param-Region".into(),
                    "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=".into()
                ),
                ("Mcp-Param-Priority".into(), "-7".into()),
                ("Mcp-Param-Verbose".into(), "true".into()),
                (
                    "Mcp-Param-Text".into(),
                    "=?base64?bGluZTEKbGluZTI=?=".into()
                ),
            ]
        );
        assert!(headers(&b, &json!(null)).is_empty());
    }
}
