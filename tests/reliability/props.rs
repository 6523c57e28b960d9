//! Shared pieces of the property tests: a fixed case count, and strategies for hostile JSON and
//! hostile text.
//!
//! Every property checks all of its cases, however long a loaded machine takes: no time cap
//! passes cases unchecked (proptest, without its `fork`/`timeout` features, has no wall-clock
//! limit for a run, and none is added). Liveness comes from the bounds of each case instead (a
//! parse within its time and memory, a request within its deadline). Shrinking a failure is
//! capped by `max_shrink_time`.

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Number, Value};

/// A fixed number of cases, all checked; shrinking gives up after 10 s.
pub fn config(cases: u32) -> Config {
    Config {
        cases,
        max_shrink_time: 10_000,
        max_shrink_iters: 2_000,
        ..Config::default()
    }
}

/// Strings that break naive handling: control characters, quotes, backslashes, line and
/// paragraph separators, a BOM, non-BMP characters, percent signs and traversal pieces.
pub fn hostile_string() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "",
        "a",
        "2.0",
        "jsonrpc",
        "id",
        "method",
        "params",
        "result",
        "error",
        "\n",
        "\r\n",
        "\r",
        "\0",
        "\u{1}",
        "\u{7f}",
        "\"",
        "\\",
        "\\u0000",
        "\u{2028}",
        "\u{2029}",
        "\u{feff}",
        "😀",
        "é",
        "%",
        "%00",
        "%2e%2e%2f",
        "../",
        "${HOME}",
        "${A:-x}",
        "$",
        "{",
        "}",
        "[",
        "]",
        ":",
        "/",
        "*",
        "NaN",
        "Infinity",
        " ",
        "\t",
    ]);
    prop_oneof![
        prop::collection::vec(pieces, 0..6).prop_map(|v| v.concat()),
        any::<String>(),
        "[a-z_/]{0,24}",
    ]
}

/// Numbers, including the ones other parsers choke on (kept as text by `arbitrary_precision`).
pub fn number() -> impl Strategy<Value = Value> {
    let odd = prop::sample::select(vec![
        "0",
        "-0",
        "1e999999",
        "-1e-999999",
        "18446744073709551616",
        "-9223372036854775809",
        "9223372036854775807",
        "0.1",
        "1.7976931348623157e308",
        "5e-324",
        "123456789012345678901234567890.5",
    ]);
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter_map("finite", Number::from_f64)
            .prop_map(Value::Number),
        odd.prop_map(|t| serde_json::from_str(t).expect("a JSON number")),
    ]
}

/// Any JSON value, a few levels deep.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((hostile_string(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// `value` serialized, then possibly cut at a random character or with random text spliced in.
pub fn mangled(value: impl Strategy<Value = Value>) -> impl Strategy<Value = String> {
    (
        value,
        any::<prop::sample::Index>(),
        0u8..4,
        hostile_string(),
    )
        .prop_map(|(v, at, how, splice)| {
            let text = v.to_string();
            let cut = text
                .char_indices()
                .map(|(i, _)| i)
                .nth(at.index(text.chars().count().max(1)))
                .unwrap_or(text.len());
            match how {
                0 => text[..cut].to_owned(),
                1 => format!("{}{splice}{}", &text[..cut], &text[cut..]),
                _ => text,
            }
        })
}

/// JSON-ish token soup.
pub fn token_soup() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"jsonrpc\"",
        "\"2.0\"",
        "\"id\"",
        "\"method\"",
        "\"params\"",
        "\"result\"",
        "\"error\"",
        "1",
        "-1",
        "1.5",
        "1e999",
        "null",
        "true",
        "false",
        "tru",
        "NaN",
        "Infinity",
        "\"\\ud800\"",
        "\"\\u0000\"",
        "\"x\"",
        " ",
        "\n",
        "\u{feff}",
        "//",
        "/*",
        "'",
        "\\",
    ]);
    prop::collection::vec(tokens, 0..40).prop_map(|v| v.concat())
}
