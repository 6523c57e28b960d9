//! Unit tests of `crate::schema`.

use super::*;
use serde_json::json;

fn errs(schema: Value, value: Value) -> Vec<String> {
    validate(&schema, &value)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn one(schema: Value, value: Value) -> SchemaError {
    let e = validate(&schema, &value);
    assert_eq!(e.len(), 1, "expected exactly one failure, got {e:?}");
    e.into_iter().next().unwrap_or_else(|| unreachable!())
}

fn ok(schema: Value, value: Value) {
    let e = validate(&schema, &value);
    assert!(e.is_empty(), "expected {value} to be valid, got {e:?}");
}

/// `{key: inner}`, built without `json!`, which would deep-copy `inner`.
fn wrap(key: &str, inner: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_string(), inner);
    Value::Object(map)
}

fn nested(key: &str, levels: usize) -> Value {
    let mut s = json!({});
    for _ in 1..levels {
        s = wrap(key, s);
    }
    s
}

fn nested_array(levels: usize) -> Value {
    let mut v = json!(0);
    for _ in 1..levels {
        v = Value::Array(vec![v]);
    }
    v
}

#[test]
fn display_with_and_without_path() {
    let e = SchemaError {
        path: "a.b".into(),
        message: "unknown property".into(),
    };
    assert_eq!(e.to_string(), "a.b: unknown property");
    let root = SchemaError {
        path: String::new(),
        message: "expected an object, got null".into(),
    };
    assert_eq!(root.to_string(), "expected an object, got null");
}

#[test]
fn type_single_names() {
    let cases = [
        ("object", json!({})),
        ("array", json!([])),
        ("string", json!("")),
        ("integer", json!(3)),
        ("number", json!(2.5)),
        ("boolean", json!(false)),
        ("null", json!(null)),
    ];
    for (name, good) in &cases {
        ok(json!({ "type": name }), good.clone());
        for (other, bad) in &cases {
            let accepted = other == name || (*name == "number" && *other == "integer");
            let e = validate(&json!({ "type": name }), bad);
            assert_eq!(e.is_empty(), accepted, "type {name} vs {bad}");
        }
    }
}

#[test]
fn type_mismatch_message_names_parameter_and_value() {
    let schema = json!({"type": "object", "properties": {"limit": {"type": "integer"}}});
    let e = one(schema, json!({"limit": "5"}));
    assert_eq!(e.path, "limit");
    assert_eq!(e.message, "expected an integer, got a string (\"5\")");
    assert_eq!(
        one(json!({"type": "object"}), json!(null)).message,
        "expected an object, got null"
    );
    assert_eq!(
        one(json!({"type": "string"}), json!(true)).message,
        "expected a string, got a boolean (true)"
    );
    assert_eq!(
        one(json!({"type": "integer"}), json!(2.5)).message,
        "expected an integer, got a number (2.5)"
    );
    assert_eq!(
        one(json!({"type": "boolean"}), json!([1, 2])).message,
        "expected a boolean, got an array ([1,2])"
    );
}

#[test]
fn integer_accepts_whole_floats_and_number_accepts_integers() {
    ok(json!({"type": "integer"}), json!(2.0));
    ok(json!({"type": "integer"}), json!(-7));
    ok(json!({"type": "integer"}), json!(u64::MAX));
    ok(json!({"type": "integer"}), json!(1e300));
    ok(json!({"type": "number"}), json!(5));
    ok(json!({"type": "number"}), json!(-0.5));
    assert_eq!(errs(json!({"type": "integer"}), json!(0.1)).len(), 1);
}

#[test]
fn type_arrays() {
    let schema = json!({"type": ["string", "null"]});
    ok(schema.clone(), json!("x"));
    ok(schema.clone(), json!(null));
    assert_eq!(
        one(schema, json!(1)).message,
        "expected a string or null, got an integer (1)"
    );
    let three = json!({"type": ["integer", "string", "null"]});
    assert_eq!(
        one(three, json!({})).message,
        "expected an integer, a string or null, got an object ({})"
    );
}

#[test]
fn wrong_type_reports_only_the_type() {
    let schema = json!({"type": "string", "enum": ["a"], "minLength": 3});
    assert_eq!(errs(schema, json!(5)).len(), 1);
}

#[test]
fn properties_and_nested_paths() {
    let schema = json!({
        "type": "object",
        "properties": {
            "call_data": {
                "type": "object",
                "required": ["method_name"],
                "properties": {"method_name": {"type": "string"}, "args": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "integer"}}}}}
            }
        }
    });
    let e = one(schema.clone(), json!({"call_data": {"method_name": 3}}));
    assert_eq!(e.path, "call_data.method_name");
    assert_eq!(
        e.to_string(),
        "call_data.method_name: expected a string, got an integer (3)"
    );
    let e = one(
        schema.clone(),
        json!({"call_data": {"method_name": "f", "args": [{"v": 1}, {"v": "x"}]}}),
    );
    assert_eq!(e.path, "call_data.args[1].v");
    let e = one(schema, json!({"call_data": {}}));
    assert_eq!(e.path, "call_data.method_name");
    assert_eq!(
        e.message,
        "required property is missing (expected a string)"
    );
}

#[test]
fn odd_property_names_are_quoted_in_paths() {
    let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
    assert_eq!(one(schema.clone(), json!({"a b": 1})).path, "[\"a b\"]");
    let deep = json!({"properties": {"x": schema}});
    assert_eq!(
        one(deep.clone(), json!({"x": {"a.b": 1}})).path,
        "x[\"a.b\"]"
    );
    assert_eq!(one(deep, json!({"x": {"": 1}})).path, "x[\"\"]");
}

#[test]
fn required_uses_declared_type() {
    let schema = json!({
        "type": "object",
        "required": ["function_name", "behavior", "anything", "undeclared", "mode", "ok"],
        "properties": {
            "function_name": {"type": "string", "description": "Function name."},
            "behavior": {"enum": ["stop", "go"]},
            "anything": {"description": "no constraint"},
            "mode": {"type": ["string", "null"]},
            "ok": {"const": "ok"}
        }
    });
    let e = validate(&schema, &json!({}));
    let got: Vec<(&str, &str)> = e
        .iter()
        .map(|e| (e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "function_name",
                "required parameter is missing (expected a string)"
            ),
            (
                "behavior",
                "required parameter is missing (expected one of \"stop\", \"go\")"
            ),
            ("anything", "required parameter is missing"),
            ("undeclared", "required parameter is missing"),
            (
                "mode",
                "required parameter is missing (expected a string or null)"
            ),
            ("ok", "required parameter is missing (expected \"ok\")"),
        ]
    );
}

#[test]
fn required_present_is_fine_even_if_null() {
    ok(json!({"required": ["a"]}), json!({"a": null}));
    // `required` only applies to objects.
    ok(json!({"required": ["a"]}), json!([1]));
}

#[test]
fn additional_properties_false_true_and_schema() {
    let closed = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
    ok(closed.clone(), json!({"a": 1}));
    let e = one(closed, json!({"a": 1, "zz": 2}));
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("zz", "unknown property")
    );
    ok(json!({"additionalProperties": true}), json!({"q": 1}));
    ok(json!({"properties": {"a": {}}}), json!({"q": 1}));
    let typed = json!({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}});
    ok(typed.clone(), json!({"a": "s", "b": 1, "c": 2}));
    let e = one(typed, json!({"a": "s", "b": "no"}));
    assert_eq!(
        e.to_string(),
        "b: expected an integer, got a string (\"no\")"
    );
}

#[test]
fn items_and_item_paths() {
    let schema = json!({"type": "object", "properties": {"modified_args": {"type": "array", "items": {"type": "integer"}}}});
    ok(schema.clone(), json!({"modified_args": [1, 2, 3]}));
    let e = validate(&schema, &json!({"modified_args": ["x", 1, null]}));
    let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["modified_args[0]", "modified_args[2]"]);
    assert_eq!(one(json!({"items": false}), json!([1])).path, "[0]");
    ok(json!({"items": false}), json!([]));
}

#[test]
fn min_and_max_items() {
    let schema = json!({"type": "array", "minItems": 1, "maxItems": 2});
    ok(schema.clone(), json!([1]));
    ok(schema.clone(), json!([1, 2]));
    assert_eq!(
        one(schema.clone(), json!([])).message,
        "must have at least 1 item, got 0"
    );
    assert_eq!(
        one(schema, json!([1, 2, 3])).message,
        "must have at most 2 items, got 3"
    );
}

#[test]
fn enum_compares_as_json() {
    let schema = json!({"type": "object", "properties": {"behavior": {"type": "string", "enum": ["stop", "go", "yield"]}}});
    let e = one(schema, json!({"behavior": "halt"}));
    assert_eq!(e.path, "behavior");
    assert_eq!(
        e.message,
        "expected one of \"stop\", \"go\", \"yield\", got \"halt\""
    );
    let mixed = json!({"enum": [1, null, {"a": [1, 2]}]});
    ok(mixed.clone(), json!(1.0));
    ok(mixed.clone(), json!(null));
    ok(mixed.clone(), json!({"a": [1.0, 2]}));
    assert_eq!(errs(mixed, json!({"a": [2, 1]})).len(), 1);
}

#[test]
fn enum_lists_at_most_ten_values() {
    let options: Vec<Value> = (0..15).map(|i| json!(i)).collect();
    let e = one(json!({ "enum": options }), json!(99));
    assert_eq!(
        e.message,
        "expected one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, and 5 more, got 99"
    );
}

#[test]
fn const_compares_as_json() {
    ok(json!({"const": "ok"}), json!("ok"));
    ok(json!({"const": {"a": 1, "b": 2}}), json!({"b": 2, "a": 1}));
    ok(json!({"const": 3}), json!(3.0));
    let e = one(
        json!({"properties": {"status": {"const": "ok"}}}),
        json!({"status": "error"}),
    );
    assert_eq!(e.to_string(), "status: expected \"ok\", got \"error\"");
    assert_eq!(
        one(json!({"const": null}), json!(0)).message,
        "expected null, got 0"
    );
}

#[test]
fn numeric_bounds() {
    let schema = json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 1000}}});
    let e = one(schema.clone(), json!({"limit": 0}));
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("limit", "must be >= 1, got 0")
    );
    assert_eq!(
        one(schema.clone(), json!({"limit": 1001})).message,
        "must be <= 1000, got 1001"
    );
    ok(schema.clone(), json!({"limit": 1}));
    ok(schema, json!({"limit": 1000}));
    let excl = json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1.5});
    ok(excl.clone(), json!(1));
    ok(excl.clone(), json!(0.001));
    assert_eq!(one(excl.clone(), json!(0)).message, "must be > 0, got 0");
    assert_eq!(one(excl, json!(1.5)).message, "must be < 1.5, got 1.5");
    // Bounds do not apply to other types.
    ok(json!({"minimum": 5}), json!("3"));
}

#[test]
fn numeric_comparison_is_exact_across_representations() {
    ok(json!({"minimum": 0.5}), json!(1));
    ok(json!({"maximum": 2}), json!(2.0));
    ok(json!({"minimum": -1}), json!(u64::MAX));
    assert_eq!(
        errs(
            json!({"maximum": 9007199254740992_u64}),
            json!(9007199254740993_u64)
        )
        .len(),
        1
    );
    assert_eq!(
        errs(
            json!({"maximum": 9007199254740992.0}),
            json!(9007199254740993_u64)
        )
        .len(),
        1
    );
    ok(
        json!({"maximum": 9007199254740992.0}),
        json!(9007199254740992_u64),
    );
    assert_eq!(errs(json!({"minimum": i64::MIN}), json!(-1e300)).len(), 1);
    assert_eq!(
        errs(json!({"exclusiveMaximum": u64::MAX}), json!(1e300)).len(),
        1
    );
}

#[test]
fn string_lengths_count_scalar_values() {
    let schema = json!({"type": "string", "minLength": 2, "maxLength": 3});
    ok(schema.clone(), json!("éé"));
    ok(schema.clone(), json!("😀😀😀"));
    assert_eq!(
        one(schema.clone(), json!("é")).message,
        "must be at least 2 characters long, got 1"
    );
    assert_eq!(
        one(schema, json!("abcd")).message,
        "must be at most 3 characters long, got 4"
    );
    assert_eq!(
        one(json!({"minLength": 1}), json!("")).message,
        "must be at least 1 character long, got 0"
    );
    ok(json!({"minLength": 2.0}), json!("ab"));
}

#[test]
fn any_of() {
    let schema =
        json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]});
    ok(schema.clone(), json!("a"));
    ok(schema.clone(), json!(["a"]));
    let e = one(schema.clone(), json!(true));
    assert_eq!(
        e.message,
        "none of the alternatives matched (expected a string, or an array of strings), got a boolean (true)"
    );
    // Only the array alternative admits an array, so its failure is quoted.
    let e = one(
        json!({"properties": {"names": schema}}),
        json!({"names": ["a", 2]}),
    );
    assert_eq!(e.path, "names");
    assert!(
        e.message
            .ends_with("; as an array of strings: names[1]: expected a string, got an integer (2)"),
        "{}",
        e.message
    );
}

#[test]
fn any_of_describes_consts_objects_and_unknowns() {
    let schema = json!({"anyOf": [
        {"const": "all"},
        {"type": "object", "required": ["id"]},
        {"minimum": 3}
    ]});
    let e = one(schema, json!(2));
    assert_eq!(
        e.message,
        "none of the alternatives matched (expected \"all\", or an object with \"id\", or alternative 3), got an integer (2)"
    );
}

#[test]
fn any_of_with_null_quotes_the_object_failure() {
    let pause = json!({
        "type": "object",
        "required": ["id", "call_data"],
        "properties": {
            "id": {"type": "string"},
            "call_data": {"type": "object", "required": ["method_name"], "properties": {"method_name": {"type": "string"}}}
        }
    });
    let schema =
        json!({"type": "object", "properties": {"pause": {"anyOf": [{"type": "null"}, pause]}}});
    ok(schema.clone(), json!({"pause": null}));
    ok(
        schema.clone(),
        json!({"pause": {"id": "p", "call_data": {"method_name": "f"}}}),
    );
    let e = one(
        schema.clone(),
        json!({"pause": {"id": "p", "call_data": {}}}),
    );
    assert_eq!(e.path, "pause");
    assert_eq!(
        e.message,
        "none of the alternatives matched (expected null, or an object with \"id\", \"call_data\"), \
         got an object ({\"id\":\"p\",\"call_data\":{}}); as an object with \"id\", \"call_data\": \
         pause.call_data.method_name: required property is missing (expected a string)"
    );
    // A value no alternative admits by type gets the summary alone.
    let e = one(schema, json!({"pause": 3}));
    assert_eq!(
        e.message,
        "none of the alternatives matched (expected null, or an object with \"id\", \"call_data\"), got an integer (3)"
    );
}

#[test]
fn one_of() {
    let schema = json!({"oneOf": [{"type": "integer"}, {"type": "number", "maximum": 10}]});
    ok(schema.clone(), json!(11));
    ok(schema.clone(), json!(2.5));
    let e = one(schema.clone(), json!(3));
    assert_eq!(
        e.message,
        "matches 2 of the alternatives (an integer, and a number) but must match exactly one, got an integer (3)"
    );
    let e = one(schema, json!("x"));
    assert!(
        e.message
            .starts_with("none of the alternatives matched (expected an integer, or a number)"),
        "{}",
        e.message
    );
}

#[test]
fn boolean_and_empty_schemas() {
    ok(json!({}), json!({"anything": [1, null]}));
    ok(json!(true), json!(3));
    ok(
        json!({"title": "t", "description": "d", "default": 1, "examples": [1], "$schema": "x", "$comment": "c", "format": "uri", "readOnly": true, "deprecated": false}),
        json!("not a uri"),
    );
    assert_eq!(
        one(json!(false), json!(3)).message,
        "no value is allowed here, got an integer (3)"
    );
    let e = one(json!({"properties": {"gone": false}}), json!({"gone": 1}));
    assert_eq!(e.path, "gone");
}

#[test]
fn failures_come_in_document_order() {
    let schema = json!({
        "type": "object",
        "required": ["z"],
        "additionalProperties": false,
        "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}, "z": {}}
    });
    let e = errs(schema, json!({"b": [1, "x"], "extra": 1, "a": 3}));
    assert_eq!(
        e,
        vec![
            "z: required parameter is missing",
            "b[1]: expected an integer, got a string (\"x\")",
            "extra: unknown property",
            "a: expected a string, got an integer (3)",
        ]
    );
}

#[test]
fn at_most_twenty_failures() {
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    let value = Value::Array((0..30).map(|i| json!(format!("s{i}"))).collect());
    let e = validate(&schema, &value);
    assert_eq!(e.len(), 20);
    assert_eq!(e[0].path, "[0]");
    assert_eq!(e[19].path, "[19]");
    let props: Map<String, Value> = (0..50).map(|i| (format!("p{i}"), json!(i))).collect();
    let closed = json!({"additionalProperties": false});
    assert_eq!(validate(&closed, &Value::Object(props)).len(), 20);
}

#[test]
fn excerpts_are_at_most_forty_characters() {
    let long = "x".repeat(100);
    let e = one(json!({"type": "integer"}), json!(long));
    let quoted = format!("\"{}...", "x".repeat(36));
    assert_eq!(
        e.message,
        format!("expected an integer, got a string ({quoted})")
    );
    assert_eq!(excerpt(&json!(long)).chars().count(), 40);
    assert_eq!(excerpt(&json!("a\"b\n")), "\"a\\\"b\\n\"");
    assert_eq!(
        excerpt(&json!({"k": [1, 2.5, null]})),
        "{\"k\":[1,2.5,null]}"
    );
    let big: Vec<Value> = (0..10_000).map(|i| json!(i)).collect();
    assert_eq!(excerpt(&Value::Array(big)).chars().count(), 40);
    assert_eq!(excerpt(&json!("😀".repeat(50))).chars().count(), 40);
    assert_eq!(excerpt(&nested_array(1000)).chars().count(), 40);
}

#[test]
fn malformed_schemas_fail_without_panicking() {
    let cases = [
        (
            json!(5),
            "invalid schema: a schema must be an object or a boolean, not an integer",
        ),
        (
            json!(null),
            "invalid schema: a schema must be an object or a boolean, not null",
        ),
        (
            json!("string"),
            "invalid schema: a schema must be an object or a boolean, not a string",
        ),
        (
            json!({"type": "float"}),
            "invalid schema: \"type\" must be one of",
        ),
        (
            json!({"type": 5}),
            "invalid schema: \"type\" must be one of",
        ),
        (
            json!({"type": []}),
            "invalid schema: \"type\" must be one of",
        ),
        (
            json!({"type": ["string", 1]}),
            "invalid schema: \"type\" must be one of",
        ),
        (
            json!({"required": "a"}),
            "invalid schema: \"required\" must be an array of property names, got a string (\"a\")",
        ),
        (
            json!({"required": [1]}),
            "invalid schema: \"required\" must be an array",
        ),
        (
            json!({"properties": []}),
            "invalid schema: \"properties\" must be an object",
        ),
        (
            json!({"additionalProperties": 1}),
            "invalid schema: \"additionalProperties\" must be a schema",
        ),
        (
            json!({"items": [{}]}),
            "invalid schema: \"items\" must be a single schema",
        ),
        (
            json!({"items": "x"}),
            "invalid schema: \"items\" must be a schema",
        ),
        (
            json!({"enum": []}),
            "invalid schema: \"enum\" must be a non-empty array",
        ),
        (
            json!({"enum": "a"}),
            "invalid schema: \"enum\" must be a non-empty array",
        ),
        (
            json!({"anyOf": []}),
            "invalid schema: \"anyOf\" must be a non-empty array of schemas",
        ),
        (
            json!({"oneOf": {}}),
            "invalid schema: \"oneOf\" must be a non-empty array of schemas",
        ),
        (
            json!({"minimum": "1"}),
            "invalid schema: \"minimum\" must be a number",
        ),
        (
            json!({"exclusiveMinimum": true}),
            "invalid schema: \"exclusiveMinimum\" must be a number",
        ),
        (
            json!({"minLength": -1}),
            "invalid schema: \"minLength\" must be a non-negative integer",
        ),
        (
            json!({"maxItems": 1.5}),
            "invalid schema: \"maxItems\" must be a non-negative integer",
        ),
        (
            json!({"pattern": "^a"}),
            "invalid schema: unsupported keyword \"pattern\"",
        ),
        (
            json!({"$ref": "#/x"}),
            "invalid schema: unsupported keyword \"$ref\"",
        ),
    ];
    for (schema, prefix) in cases {
        for value in [
            json!(null),
            json!("a"),
            json!([1]),
            json!({"a": 1}),
            json!(1.5),
        ] {
            let e = validate(&schema, &value);
            assert_eq!(e.len(), 1, "{schema} on {value}: {e:?}");
            assert!(
                e[0].message.starts_with(prefix),
                "{schema}: {}",
                e[0].message
            );
            assert!(e[0].path.is_empty());
        }
        assert!(check_schema(&schema).is_err(), "{schema}");
    }
    // A bad subschema is reported where it is reached.
    let e = one(json!({"properties": {"a": 7}}), json!({"a": 1}));
    assert_eq!(e.path, "a");
    assert!(e.message.starts_with("invalid schema"));
    let e = one(json!({"anyOf": [{"type": "nope"}]}), json!(1));
    assert!(e.message.contains("invalid schema"), "{}", e.message);
}

#[test]
fn never_panics_on_odd_schemas_and_values() {
    let schemas = [
        json!(null),
        json!(0),
        json!(-1.5),
        json!("x"),
        json!([]),
        json!([{}]),
        json!(true),
        json!(false),
        json!({"type": null}),
        json!({"type": ["null", "null"]}),
        json!({"type": [[]]}),
        json!({"properties": {"a": null, "b": [], "c": {"type": 1}}}),
        json!({"properties": null}),
        json!({"required": [null, "a", 3]}),
        json!({"required": {}}),
        json!({"additionalProperties": null}),
        json!({"additionalProperties": {"type": []}}),
        json!({"items": null}),
        json!({"items": {"items": 3}}),
        json!({"enum": [[], {}, null]}),
        json!({"const": [[[[{"a": null}]]]]}),
        json!({"anyOf": [null, 1]}),
        json!({"oneOf": [true, true]}),
        json!({"oneOf": [false, {"type": "x"}]}),
        json!({"anyOf": [{"anyOf": [{"anyOf": [{"anyOf": [{}]}]}]}]}),
        json!({"minimum": 1e308, "maximum": -1e308, "exclusiveMinimum": u64::MAX, "exclusiveMaximum": i64::MIN}),
        json!({"minLength": u64::MAX, "maxLength": 0, "minItems": 1e300, "maxItems": 0.0}),
        json!({"": {}, "type": "object"}),
        json!({"description": 5, "title": [], "format": {}}),
    ];
    let values = [
        json!(null),
        json!(true),
        json!(0),
        json!(-0.0),
        json!(1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("\u{0}\u{1f}\"\\😀"),
        json!([]),
        json!([null, [[]]]),
        json!({}),
        json!({"a": {"b": []}, "": null}),
        nested_array(200),
        nested("a", 200),
    ];
    for schema in &schemas {
        let _ = check_schema(schema);
        for value in &values {
            let e = validate(schema, value);
            assert!(e.len() <= 20);
            for err in e {
                assert!(!err.message.is_empty());
            }
        }
    }
}

#[test]
fn depth_is_limited_to_sixty_four_levels() {
    // 64 levels of `items`, value nested just as deep: fine.
    ok(nested("items", 64), nested_array(64));
    assert!(check_schema(&nested("items", 64)).is_ok());
    // 65 levels: a failure at the 65th, not a recursion.
    let e = one(nested("items", 65), nested_array(65));
    assert_eq!(e.path, format!("{}", "[0]".repeat(64)));
    assert!(e.message.contains("deeper than 64 levels"), "{}", e.message);
    let err = check_schema(&nested("items", 65)).unwrap_err();
    assert!(err.contains("deeper than 64 levels"), "{err}");
    // Far deeper schemas and values, through anyOf as well, stay bounded.
    let deep_items = nested("items", 1000);
    assert_eq!(validate(&deep_items, &nested_array(1000)).len(), 1);
    let mut any = json!({});
    for _ in 0..1000 {
        any = wrap("anyOf", Value::Array(vec![json!({"type": "null"}), any]));
    }
    let e = validate(&any, &json!(1));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].message.contains("deeper than 64 levels"),
        "{}",
        e[0].message
    );
    assert!(check_schema(&any).is_err());
    let mut props = json!({});
    for _ in 0..1000 {
        props = wrap("properties", wrap("a", props));
    }
    let value = nested("a", 1000);
    assert_eq!(validate(&props, &value).len(), 1);
    assert!(check_schema(&props).is_err());
}

#[test]
fn check_schema_accepts_the_supported_subset() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "args", "description": "d", "$comment": "c",
        "type": "object",
        "required": ["a"],
        "additionalProperties": false,
        "properties": {
            "a": {"type": ["string", "null"], "minLength": 1, "maxLength": 9, "format": "uri", "default": "x", "examples": ["y"]},
            "b": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 0, "maxItems": 3},
            "c": {"enum": ["x", 1]}, "d": {"const": {"k": 1}},
            "e": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5, "readOnly": true, "deprecated": true},
            "f": {"anyOf": [{"type": "string"}, true]}, "g": {"oneOf": [false, {}]},
            "h": {"type": "object", "additionalProperties": {"type": "boolean"}}
        }
    });
    assert_eq!(check_schema(&schema), Ok(()));
    assert_eq!(check_schema(&json!(true)), Ok(()));
    assert_eq!(check_schema(&json!({})), Ok(()));
}

#[test]
fn check_schema_rejects_unsupported_keywords_with_their_place() {
    let cases = [
        (
            json!({"pattern": "^a$"}),
            "at the schema root: unsupported keyword \"pattern\"",
        ),
        (
            json!({"$ref": "#/$defs/x"}),
            "at the schema root: unsupported keyword \"$ref\"",
        ),
        (
            json!({"properties": {"name": {"type": "string", "pattern": "x"}}}),
            "at /properties/name: unsupported keyword \"pattern\"",
        ),
        (
            json!({"properties": {"a/b~": {"allOf": []}}}),
            "at /properties/a~1b~0: unsupported keyword \"allOf\"",
        ),
        (
            json!({"items": {"uniqueItems": true}}),
            "at /items: unsupported keyword \"uniqueItems\"",
        ),
        (
            json!({"additionalProperties": {"minProperties": 1}}),
            "at /additionalProperties: unsupported keyword \"minProperties\"",
        ),
        (
            json!({"anyOf": [{}, {"not": {}}]}),
            "at /anyOf/1: unsupported keyword \"not\"",
        ),
        (
            json!({"oneOf": [3]}),
            "at /oneOf/0: a schema must be an object or a boolean, not an integer",
        ),
        (
            json!({"type": "float"}),
            "at the schema root: \"type\" must be one of",
        ),
    ];
    for (schema, prefix) in cases {
        let err = check_schema(&schema).unwrap_err();
        assert!(err.starts_with(prefix), "{schema}: {err}");
    }
}

#[test]
fn validate_fails_closed_on_unsupported_keywords() {
    let schema = json!({"properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}}});
    let e = one(schema, json!({"name": "ABC"}));
    assert_eq!(e.path, "name");
    assert_eq!(e.message, "invalid schema: unsupported keyword \"pattern\"");
}

#[test]
fn tool_like_schema_end_to_end() {
    let schema = json!({
        "type": "object",
        "required": ["pause_id"],
        "additionalProperties": false,
        "properties": {
            "pause_id": {"type": "string", "minLength": 1},
            "action": {"type": "string", "enum": ["continue", "modify", "skip"]},
            "modified_args": {"type": "array", "description": "Positional arguments."},
            "modified_kwargs": {"type": "object"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
        }
    });
    ok(
        schema.clone(),
        json!({"pause_id": "p1", "action": "modify", "modified_args": [10, "x"], "modified_kwargs": {"y": 20}, "limit": 5.0}),
    );
    let e = errs(
        schema,
        json!({"action": "halt", "modified_args": {}, "limit": 0, "verbose": true}),
    );
    assert_eq!(
        e,
        vec![
            "pause_id: required parameter is missing (expected a string)",
            "action: expected one of \"continue\", \"modify\", \"skip\", got \"halt\"",
            "modified_args: expected an array, got an object ({})",
            "limit: must be >= 1, got 0",
            "verbose: unknown property",
        ]
    );
}
