//! Byte-for-byte comparison of `pickle_write::dumps` with CPython's
//! `pickle.dumps(json.loads(text), protocol=4)`, over fixed tricky cases and pseudo-random values.

use std::io::Write;
use std::process::{Command, Stdio};

use cideldill_server::pickle_write::dumps;
use serde_json::{json, Map, Value};

/// Reads one JSON text per line on stdin (split on '\n' only: U+2028 may appear raw) and prints
/// one hex pickle per line.
const PYTHON_SCRIPT: &str = "\
import sys, json, pickle
out = [pickle.dumps(json.loads(line), protocol=4).hex() for line in sys.stdin.buffer.read().decode('utf-8').split('\\n')]
sys.stdout.write('\\n'.join(out) + '\\n')
";

/// Pickles every value with python3 in one process; panics (failing the test) if python3 is
/// unavailable or misbehaves.
fn python_pickles(texts: &[String]) -> Vec<String> {
    // Compact serde_json output never contains a raw newline, so lines delimit the values.
    let input = texts.join("\n");
    let mut child = Command::new("python3")
        .args(["-I", "-c", PYTHON_SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!("python3 is required for this test but could not be started: {err}")
        });
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Feed stdin from a thread so a large input cannot deadlock against a full stdout pipe.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .expect("python3 runs to completion");
    let written = writer.join().expect("stdin writer thread");
    assert!(
        output.status.success(),
        "python3 failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    written.expect("write python3 stdin");
    let stdout = String::from_utf8(output.stdout).expect("python3 prints ASCII hex");
    let lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert_eq!(
        lines.len(),
        texts.len(),
        "python3 printed one line per value"
    );
    lines
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes total)", &text[..end], text.len())
}

/// Compares our pickles of `values` with python3's, which sees serde_json's text of each value
/// (so e.g. a parsed `-0`, an f64 in serde_json, reaches Python as `-0.0`). Reports how many
/// values differ and details the first five.
fn assert_matches_python(values: &[Value]) {
    let texts: Vec<String> = values
        .iter()
        .map(|v| serde_json::to_string(v).expect("value serializes"))
        .collect();
    let expected = python_pickles(&texts);
    let mut failures = Vec::new();
    for (text, (value, theirs)) in texts.iter().zip(values.iter().zip(&expected)) {
        let ours = hex(&dumps(value));
        if &ours == theirs {
            continue;
        }
        let first_diff = ours
            .bytes()
            .zip(theirs.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(ours.len().min(theirs.len()));
        let window = first_diff.saturating_sub(40) & !1;
        failures.push(format!(
            "json: {}\n  first difference at byte {}\n  ours:   {}\n  python: {}",
            clip(text, 300),
            first_diff / 2,
            clip(&ours[window.min(ours.len())..], 200),
            clip(&theirs[window.min(theirs.len())..], 200),
        ));
    }
    assert!(
        failures.is_empty(),
        "{} of {} values differ from python3:\n{}",
        failures.len(),
        values.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// splitmix64: tiny deterministic PRNG so the random cases are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Characters for random strings: JSON escapes, controls, Latin-1 singletons, U+0100, CJK,
/// non-BMP, a combining mark and U+2028 (which serde_json leaves unescaped).
const ALPHABET: &str =
    "abz0 \"\\/\n\t\u{0}\u{1f}\u{7f}\u{80}éÿĀ中😀\u{301}\u{2028}\u{ffff}\u{10ffff}";

fn random_string(rng: &mut Rng) -> String {
    let len = match rng.below(10) {
        0 => 0,
        1..=4 => 1,
        5..=7 => 2 + rng.below(10),
        8 => 250 + rng.below(10),
        _ => rng.below(400),
    };
    let alphabet: Vec<char> = ALPHABET.chars().collect();
    (0..len)
        .map(|_| alphabet[rng.below(alphabet.len())])
        .collect()
}

fn random_key(rng: &mut Rng) -> String {
    // A pool of 300 names makes repeated keys (and memo indices above 255) common.
    if rng.below(3) == 0 {
        random_string(rng)
    } else {
        format!("k{}", rng.below(300))
    }
}

fn random_number(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 => json!(rng.below(300)),
        1 => json!(rng.below(70_000) as i64 - 35_000),
        2 => json!(rng.next() as i64),
        3 => json!(rng.next()),
        4 => json!((rng.next() as i64) >> rng.below(64)),
        5 => json!(rng.below(2_000) as f64 / 8.0 - 100.0),
        _ => {
            let float = f64::from_bits(rng.next());
            if float.is_finite() {
                json!(float)
            } else {
                json!(0.5)
            }
        }
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let choice = if depth == 0 {
        rng.below(6)
    } else {
        rng.below(9)
    };
    match choice {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 | 3 => random_number(rng),
        4 | 5 => Value::String(random_string(rng)),
        6 | 7 => {
            let len = rng.below(6);
            Value::Array((0..len).map(|_| random_value(rng, depth - 1)).collect())
        }
        _ => {
            let len = rng.below(6);
            let mut map = Map::new();
            for _ in 0..len {
                map.insert(random_key(rng), random_value(rng, depth - 1));
            }
            Value::Object(map)
        }
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("fixed case is valid JSON")
}

fn nested(depth: usize, leaf: Value) -> Value {
    let mut value = leaf;
    for level in 0..depth {
        // Built by hand: `json!` would deep-copy `value` through `to_value` at every level.
        value = if level % 2 == 0 {
            Value::Array(vec![value])
        } else {
            let mut map = Map::new();
            map.insert("d".to_owned(), value);
            Value::Object(map)
        };
    }
    value
}

const FRAME_TARGET: usize = 64 * 1024;

fn tricky_values() -> Vec<Value> {
    let mut values: Vec<Value> = [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "10",
        "255",
        "256",
        "65535",
        "65536",
        "-1",
        "-128",
        "-129",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "-9223372036854775808",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "1e2",
        "1.0",
        "-0.0",
        "1e308",
        "5e-324",
        "0.1",
        "\"\"",
        "\"a\"",
        "\"\\u00ff\"",
        "\"\\u0100\"",
        "\"\\n\"",
        "\"😀\"",
        "\"e\\u0301\"",
        "[]",
        "{}",
        "[[]]",
        "[{}]",
        "{\"\":{}}",
        "[\"\",\"\",\"a\",\"a\",\"ab\",\"ab\",\"ÿ\",\"ÿ\",\"Ā\",\"Ā\",\"\\n\",\"\\n\"]",
        "{\"a\":\"a\",\"ab\":\"ab\",\"\":\"\"}",
        "[{\"ab\":\"ab\"},{\"ab\":\"ab\"},{\"a\":\"ab\"}]",
        "[\"ab\",{\"ab\":1}]",
        "{\"x\":[1,2,3],\"y\":{\"z\":null}}",
    ]
    .iter()
    .map(|text| parse(text))
    .collect();

    for len in [254, 255, 256, 257, 65_535, 65_536, 65_537, 100_000] {
        values.push(json!("x".repeat(len)));
    }
    // Multi-byte characters straddling the 255/256 byte SHORT_BINUNICODE limit.
    values.push(json!(format!("{}é", "x".repeat(253))));
    values.push(json!(format!("{}é", "x".repeat(254))));
    values.push(json!(format!("{}😀", "x".repeat(252))));
    for len in [1, 2, 999, 1000, 1001, 2000, 2001] {
        values.push(Value::Array((0..len).map(|i| json!(i)).collect()));
        let map: Map<String, Value> = (0..len).map(|i| (format!("k{i}"), json!(i))).collect();
        values.push(Value::Object(map));
    }
    values.push(nested(100, json!("leaf")));
    values.push(nested(1, Value::Null));
    // Many distinct keys repeated across objects: memo indices beyond 255 (LONG_BINGET).
    let rows: Vec<Value> = (0..5)
        .map(|row| {
            let map: Map<String, Value> = (0..400)
                .map(|k| (format!("key{k}"), json!(row * k)))
                .collect();
            Value::Object(map)
        })
        .collect();
    values.push(Value::Array(rows));
    // Framing: long lists of short strings, large strings around frame boundaries, and nested
    // containers whose ends fall near 64 KiB.
    values.push(Value::Array(
        (0..30_000).map(|i| json!(format!("s{i}"))).collect(),
    ));
    for len in [65_530, 65_536] {
        values.push(json!(["a", "x".repeat(len), "bc", "x".repeat(len), 1]));
        values.push(json!([["x".repeat(len)], {"k": "x".repeat(len - 20)}, []]));
    }
    for inner in [1, 7, 100, 999, 1000, 1001] {
        let chunk: Vec<Value> = (0..inner).map(|i| json!(format!("v{i}"))).collect();
        values.push(Value::Array(
            (0..(12_000 / inner + 2)).map(|_| json!(chunk)).collect(),
        ));
        let dict: Map<String, Value> = (0..inner).map(|i| (format!("q{i}"), json!([i]))).collect();
        values.push(Value::Array(
            (0..(10_000 / inner + 2)).map(|_| json!(dict)).collect(),
        ));
    }
    // Slide the 64 KiB frame boundary across every opcode of a varied tail, one byte at a time:
    // the frame holds 9 bytes of list/string overhead plus the in-frame string payload.
    for shortfall in 0..56 {
        values.push(json!([
            "p".repeat(FRAME_TARGET - 9 - shortfall),
            null,
            true,
            1,
            300,
            70_000,
            1e9,
            [],
            {},
            [1],
            {"k": [2, 3]},
            "t",
            "tu",
            "tu"
        ]));
    }
    // The same inside repeated dicts, where keys become memo references.
    for shortfall in 0..20 {
        let mut filler: Vec<Value> = vec![json!("q".repeat(FRAME_TARGET - 2_000 + shortfall))];
        filler.extend((0..200).map(|i| json!({"a": [i, "é"], "bb": null})));
        values.push(Value::Array(filler));
    }
    values
}

#[test]
fn pickle_writer_matches_python_on_tricky_values() {
    assert_matches_python(&tricky_values());
}

#[test]
fn pickle_writer_matches_python_byte_for_byte_on_random_values() {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let mut values: Vec<Value> = (0..400).map(|_| random_value(&mut rng, 5)).collect();
    // A few large documents so frame boundaries land on varied opcodes.
    for _ in 0..8 {
        let len = 200 + rng.below(1_200);
        values.push(Value::Array(
            (0..len).map(|_| random_value(&mut rng, 2)).collect(),
        ));
    }
    assert_matches_python(&values);
}

/// Integers wider than 64 bits reach the program exactly, whichever face resumes the pause:
/// REST `modify` and `skip`, and the MCP tool, pickle them as python3 does (not as floats).
#[test]
fn wide_integers_in_modify_and_skip_are_pickled_exactly_over_rest_and_mcp() {
    use cideldill_server::cas::decode_base64_lenient;

    let s = crate::mcp_support::McpServer::initialized("2025-11-25");
    let http = s.http();
    s.call_ok(
        "breakpoint_add",
        serde_json::json!({"function_name": "wide"}),
    );
    let texts = [
        "1000000000000000000000000000000",
        "-1180591620717411303424",
        "18446744073709551616",
        "[1000000000000000000000000000000, {\"k\": -99999999999999999999999}]",
    ];
    let expected = python_pickles(&texts.iter().map(|t| t.to_string()).collect::<Vec<_>>());
    let pickled = |item: &Value| hex(&decode_base64_lenient(item.as_str().unwrap()).unwrap());

    // REST: raw text, so nothing on our side could have rounded the numbers.
    // Pauses a call, continues it with `body` as raw text, and returns what the program polls.
    let continue_raw = |body: String| -> Value {
        let (p, _) = crate::mcp_stdio::start_paused_call(&s, "wide");
        let r = http.request(
            "POST",
            &format!("/api/paused/{p}/continue"),
            Some(body.as_bytes()),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        http.get_ok(&format!("/api/poll/{p}"))["action"].clone()
    };
    let action = continue_raw(format!(
        r#"{{"action": "modify", "modified_args": [{}, {}], "modified_kwargs": {{"y": {}}}}}"#,
        texts[0], texts[1], texts[2]
    ));
    assert_eq!(pickled(&action["modified_args"][0]["data"]), expected[0]);
    assert_eq!(pickled(&action["modified_args"][1]["data"]), expected[1]);
    assert_eq!(
        pickled(&action["modified_kwargs"]["y"]["data"]),
        expected[2]
    );

    let action = continue_raw(format!(
        r#"{{"action": "skip", "fake_result": {}}}"#,
        texts[3]
    ));
    assert_eq!(pickled(&action["fake_result_data"]), expected[3]);

    // MCP: the agent's JSON-RPC line carries the same text.
    let (p, _) = crate::mcp_stdio::start_paused_call(&s, "wide");
    let fake: Value = serde_json::from_str(texts[3]).unwrap();
    s.call_ok(
        "breakpoint_continue",
        serde_json::json!({"pause_id": p, "fake_result": fake}),
    );
    let action = http.get_ok(&format!("/api/poll/{p}"))["action"].clone();
    assert_eq!(pickled(&action["fake_result_data"]), expected[3]);
}
