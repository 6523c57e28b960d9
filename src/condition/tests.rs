//! Unit tests of `crate::condition`.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::pickle;
use crate::pickle::builder::P;

fn json_env(outcome: Outcome<&Value>) -> (Value, Value, Outcome<&Value>) {
    let args = json!([150, [], {"x": -1, "label": "item-3", "tags": ["a", "b"]}, "hello", 2.5,
        null, true, [1, 2, 3], 7, -7]);
    let kwargs = json!({"label": "item-7", "n": 3, "ratio": 0.5});
    (args, kwargs, outcome)
}

fn env<'a>(args: &'a Value, kwargs: &'a Value, outcome: Outcome<&'a Value>) -> Env<&'a Value> {
    Env {
        args: Some(args.as_array().unwrap().iter().collect()),
        kwargs: Some(
            kwargs
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v))
                .collect(),
        ),
        outcome,
    }
}

fn check(text: &str) -> Result<bool, String> {
    let (a, k, o) = json_env(Outcome::Pending);
    let e = parse(text).map_err(|e| e.to_string())?;
    eval(&e, &env(&a, &k, o)).map_err(|e| e.to_string())
}

#[test]
fn strings_cost_steps_by_their_size_so_big_ones_stay_bounded() {
    let one_mib = json!(["a".repeat(1 << 20)]);
    let huge = json!(["a".repeat(64 << 20)]);
    let no_kwargs = json!({});
    let holds = |args: &Value, text: &str| {
        eval(
            &parse(text).unwrap(),
            &env(args, &no_kwargs, Outcome::Pending),
        )
    };
    // 1 MiB is 256 steps a read: a few reads are fine.
    assert_eq!(holds(&one_mib, "len(args[0]) == 1048576"), Ok(true));
    assert_eq!(
        holds(
            &one_mib,
            "args[0].startswith('a') and args[0].endswith('a')"
        ),
        Ok(true)
    );
    // Doubling it again and again runs out of budget instead of memory.
    let t0 = Instant::now();
    let grow = "len(args[0] + args[0] + args[0] + args[0] + args[0] + args[0] + args[0] \
                + args[0] + args[0] + args[0] + args[0] + args[0] + args[0]) > 0";
    let e = holds(&one_mib, grow).unwrap_err();
    assert!(e.message.contains("step budget spent"), "{e}");
    // A string too large for the whole budget cannot be read at all.
    let e = holds(&huge, "args[0] == 'a'").unwrap_err();
    assert!(e.message.contains("a string of 67108864 bytes"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

/// Evaluated by `python3` on the same values (`type(x)` as `type(x).__name__`).
const PYTHON_TABLE: &[(&str, bool)] = &[
    (
        "args[0] > 100 and kwargs[\"label\"].startswith(\"item-\")",
        true,
    ),
    ("args[0] > 200 or kwargs[\"n\"] == 3", true),
    ("len(args[1]) == 0", true),
    ("len(args[3]) == 5", true),
    ("len(args[2]) == 3", true),
    ("len(args) == 10", true),
    ("len(kwargs) == 3", true),
    ("type(args[0]) == \"int\"", true),
    ("type(args[4]) == \"float\"", true),
    ("type(args[3]) == \"str\"", true),
    ("type(args[1]) == \"list\"", true),
    ("type(args[2]) == \"dict\"", true),
    ("type(args[5]) == \"NoneType\"", true),
    ("type(args[6]) == \"bool\"", true),
    ("type(args) == \"tuple\"", true),
    ("args[0] % 2 == 1", false),
    ("args[8] % 2 == 1", true),
    ("args[9] % 2 == 1", true),
    ("args[9] % 4", true),
    ("args[9] // 2 == -4", true),
    ("args[8] // -2 == -4", true),
    ("-args[9] % 3 == 1", true),
    ("7.5 % 2 == 1.5", true),
    ("-7.5 % 2 == 0.5", true),
    ("7 // 2.0 == 3.0", true),
    ("args[0] / 4 == 37.5", true),
    ("1 + 2 * 3 == 7", true),
    ("(1 + 2) * 3 == 9", true),
    ("10 - 2 - 3 == 5", true),
    ("0 < args[8] < 10", true),
    ("0 < args[0] < 10", false),
    ("1 < 2 > 0", true),
    ("args[4] == 2.5", true),
    ("args[0] == 150.0", true),
    ("1 == 1.0000000000000002", false),
    ("args[5] is None", true),
    ("args[5] is not None", false),
    ("args[6] is True", true),
    ("args[6] == 1", true),
    ("args[6] + 1 == 2", true),
    ("not args[1]", true),
    ("not args[0]", false),
    ("args[1] or args[3]", true),
    ("args[1] and args[3]", false),
    ("\"item\" in kwargs[\"label\"]", true),
    ("\"label\" in kwargs", true),
    ("\"missing\" not in kwargs", true),
    ("2 in args[7]", true),
    ("2.0 in args[7]", true),
    ("5 in args[7]", false),
    ("\"x\" in args[2]", true),
    ("\"a\" in args[2][\"tags\"]", true),
    ("150 in args", true),
    ("\"hello\" in args", true),
    ("args[-1] == -7", true),
    ("args[7][-1] == 3", true),
    ("args[7][-3] == 1", true),
    ("args[3][0] == \"h\"", true),
    ("args[3][-1] == \"o\"", true),
    ("args[2][\"tags\"][1] == \"b\"", true),
    ("abs(args[9]) == 7", true),
    ("abs(-2.5) == 2.5", true),
    ("\"abc\" < \"abd\"", true),
    ("\"b\" > \"abc\"", true),
    ("\"\" < \"a\"", true),
    ("kwargs[\"label\"].endswith(\"-7\")", true),
    ("args[3] + \" world\" == \"hello world\"", true),
    ("not not args[0]", true),
    ("args[0] != 150", false),
    ("args[0] != 151", true),
    ("True and 0", false),
    ("0 or \"\"", false),
    ("None", false),
    ("\"s\"", true),
    ("0.0", false),
    ("-0.0 == 0", true),
    ("1e3 == 1000", true),
    ("1_000 == 1000", true),
    ("'it\\'s' == \"it's\"", true),
    ("\"\\x41\\u00e9\" == \"Aé\"", true),
    ("len(\"é€\") == 2", true),
    ("not 1 == 2", true),
    ("not (1 == 2) and 3 > 2", true),
    ("1 < 2 == 2 < 3", true),
    ("args[0] >= 150 >= 149", true),
    ("kwargs[\"ratio\"] * 2 == 1", true),
];

#[test]
fn evaluates_as_python_on_json() {
    for &(text, want) in PYTHON_TABLE {
        assert_eq!(check(text), Ok(want), "{text}");
    }
}

#[test]
fn language_specific_forms() {
    for (text, want) in [
        ("type(args[2]) == \"dict\" and args[2].x < 0", true),
        ("args[2].label.contains(\"m-\")", true),
        ("args[2].label.contains(\"zz\")", false),
        ("args[2].tags[0] == \"a\"", true),
        ("kwargs[\"label\"].contains(\"7\")", true),
        ("args[0] is not None and args[0] > 1", true),
        ("args[5] is None or args[5].x", true),
        ("False and args[99]", false),
        ("True or args[99]", true),
        ("args[-10] == 150", true),
        ("9223372036854775807 > 9.2e18", true),
        ("9007199254740993 == 9007199254740992.0", false),
        ("9007199254740993 > 9007199254740992.0", true),
    ] {
        assert_eq!(check(text), Ok(want), "{text}");
    }
}

#[test]
fn result_and_exception() {
    let (a, k, _) = json_env(Outcome::Pending);
    let r = json!({"ok": true, "items": [1]});
    let run = |text: &str, o: Outcome<&Value>| eval(&parse(text).unwrap(), &env(&a, &k, o));
    assert_eq!(
        run(
            "result.ok and len(result.items) == 1",
            Outcome::Returned(&r)
        ),
        Ok(true)
    );
    assert_eq!(run("exception is None", Outcome::Returned(&r)), Ok(true));
    assert_eq!(
        run("result is None", Outcome::Raised("ValueError".into())),
        Ok(true)
    );
    assert_eq!(
        run(
            "exception == \"ValueError\"",
            Outcome::Raised("ValueError".into())
        ),
        Ok(true)
    );
    let e = run("result is None", Outcome::Pending).unwrap_err();
    assert_eq!(e.message, "result: not available before the call returns");
    let none: Env<&Value> = Env {
        args: None,
        kwargs: None,
        outcome: Outcome::Pending,
    };
    let e = eval(&parse("args[0]").unwrap(), &none).unwrap_err();
    assert_eq!(e.message, "args: not available for this call");
}

#[test]
fn eval_errors_name_the_sub_expression() {
    for (text, want) in [
        ("args[0].x > 1", "args[0].x: no attribute 'x' on int"),
        ("args[10] == 1", "args[10]: index 10 out of range (length 10)"),
        ("args[7][-4]", "args[7][-4]: index -4 out of range (length 3)"),
        ("kwargs[\"nope\"]", "kwargs[\"nope\"]: no key \"nope\" in kwargs"),
        ("args[2][\"y\"]", "args[2][\"y\"]: no key \"y\""),
        ("args[0] < \"a\"", "args[0] < \"a\": '<' not supported between int and str"),
        ("len(args[0])", "len(args[0]): object of type 'int' has no len()"),
        ("args[0][0]", "args[0][0]: 'int' object is not subscriptable"),
        ("args[7][\"a\"]", "args[7][\"a\"]: list indices must be integers, not str"),
        ("1 % 0", "1 % 0: division by zero"),
        ("args[1] == args[7]", "args[1] == args[7]: comparing list with list is not supported (compare their parts)"),
        ("args[0].startswith(\"1\")", "args[0].startswith(\"1\"): startswith() needs a str and a str argument, not int and str"),
        ("9223372036854775807 + 1", "9223372036854775807 + 1: integer overflow"),
        ("1 in args[0]", "1 in args[0]: argument of type 'int' is not iterable"),
        ("abs(\"x\")", "abs(\"x\"): bad operand type for abs(): 'str'"),
    ] {
        assert_eq!(check(text), Err(want.to_owned()), "{text}");
    }
}

#[test]
fn parse_errors_with_their_columns() {
    for (text, msg, byte, column) in [
        ("(args[0] > 1", "expected ')'", 12, 13),
        ("args[0] > 1)", "unexpected ')'", 11, 12),
        ("args[0", "expected ']'", 6, 7),
        ("foo > 1", "unknown name 'foo': a condition reads args, kwargs, result or exception (functions: len, type, abs)", 0, 1),
        ("args.x.upper(1)", "unknown method 'upper' (only startswith, endswith and contains)", 7, 8),
        ("len args", "expected '(' after 'len'", 4, 5),
        ("", "empty condition", 0, 1),
        ("   ", "empty condition", 3, 4),
        ("args[0] >", "unexpected end of condition", 9, 10),
        ("args ! 1", "unexpected character '!'", 5, 6),
        ("args = 1", "'=' is not a comparison (use '==')", 5, 6),
        ("\"abc", "unterminated string", 0, 1),
        ("'a\\q'", "invalid escape in string", 2, 3),
        ("99999999999999999999", "integer literal too large", 0, 1),
        ("1e999", "float literal out of range", 0, 1),
        ("12ab", "invalid number", 2, 3),
        ("result is 3", "'is' compares only with None, True or False", 10, 11),
        ("args not 1", "expected 'in' after 'not'", 9, 10),
        ("and 1", "expected a value before 'and'", 0, 1),
        ("args.", "expected an attribute name after '.'", 5, 6),
        ("len()", "expected a value, found ')'", 4, 5),
        ("\"é\" == x", "unknown name 'x': a condition reads args, kwargs, result or exception (functions: len, type, abs)", 8, 8),
    ] {
        let e = parse(text).unwrap_err();
        assert_eq!((e.message.as_str(), e.byte, e.column), (msg, byte, column), "{text}");
        assert_eq!(e.to_string(), format!("{msg} at column {column}"));
    }
}

#[test]
fn bounds() {
    let long = format!("args[0] == \"{}\"", "a".repeat(CONDITION_TEXT_BYTES));
    let e = parse(&long).unwrap_err();
    assert_eq!(e.message, "condition longer than 4096 bytes");
    let ok = format!(
        "{}1{}",
        "(".repeat(CONDITION_DEPTH),
        ")".repeat(CONDITION_DEPTH)
    );
    assert_eq!(parse(&ok), Ok(Expr::Int(1)));
    let deep = format!(
        "{}1{}",
        "(".repeat(CONDITION_DEPTH + 1),
        ")".repeat(CONDITION_DEPTH + 1)
    );
    assert_eq!(parse(&deep).unwrap_err().message, too_deep());
    assert_eq!(parse(&"not ".repeat(100)).unwrap_err().message, too_deep());
    assert_eq!(parse(&"-".repeat(100)).unwrap_err().message, too_deep());
    // A long flat chain is a deep tree: refused by its height.
    let chain = vec!["1"; 100].join(" + ");
    assert_eq!(parse(&chain).unwrap_err().message, too_deep());
    let chain = vec!["1"; CONDITION_DEPTH].join(" + ");
    assert!(parse(&chain).is_ok());
    // The step budget.
    let (a, k, o) = json_env(Outcome::Pending);
    let env = env(&a, &k, o);
    let e = parse("1 + 1 + 1 == 3").unwrap();
    assert_eq!(eval_with_budget(&e, &env, 7), Ok(true));
    assert_eq!(
        eval_with_budget(&e, &env, 6).unwrap_err().message,
        "3: evaluation step budget spent"
    );
    let big = json!((0..20_000).collect::<Vec<_>>());
    let env = Env {
        args: Some(vec![&big]),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    let e = parse("-1 in args[0]").unwrap();
    assert_eq!(
        eval(&e, &env).unwrap_err().message,
        "-1 in args[0]: evaluation step budget spent"
    );
}

#[test]
fn prints_back() {
    for text in [
        "args[0] > 100 and kwargs[\"label\"].startswith(\"item-\")",
        "not (a or b)"
            .replace("a", "args")
            .replace("b", "result")
            .as_str(),
        "(1 + 2) * -3 - (4 - 5) == 0",
        "(args or kwargs) and not result",
        "not not -(-1) in args",
        "(1 < 2) < 3",
        "\"a\\n\\\"\\x01\" + 'é' != str0"
            .replace("str0", "exception")
            .as_str(),
    ] {
        let e = parse(text).unwrap();
        assert_eq!(parse(&e.to_string()), Ok(e.clone()), "{text} -> {e}");
    }
    assert_eq!(parse("((1)+(2))*3").unwrap().to_string(), "(1 + 2) * 3");
    assert_eq!(parse("1 - (2 - 3)").unwrap().to_string(), "1 - (2 - 3)");
}

fn tree(hex: &str) -> Tree {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    pickle::decode(&bytes, &pickle::Limits::default()).unwrap()
}

/// Point(-1, 2.5) of a class `Point` in `__main__`, protocol 4.
const POINT: &str = "80049534000000000000008c085f5f6d61696e5f5f948c05506f696e749493942981947d94288c0178944affffffff8c01799447400400000000000075622e";
/// {"k": [1, "two", None], 3: "three"}
const DICT: &str =
    "80049520000000000000007d94288c016b945d94284b018c0374776f944e654b038c05746872656594752e";
/// An instance of a class with `__slots__ = ('a',)`, a = 5, protocol 2.
const SLOTTED: &str =
    "8002635f5f6d61696e5f5f0a536c6f747465640a7100298171014e7d710258010000006171034b0573867104622e";
/// 10**30
const BIG: &str = "80049510000000000000008a0d00000040eaed7446d09c2c9f0c2e";

/// The decoded arguments of a call (a point, a dict, a slotted instance, a big int) and its
/// JSON keyword argument `label`.
fn pickled_call() -> ([Tree; 4], Value) {
    (
        [tree(POINT), tree(DICT), tree(SLOTTED), tree(BIG)],
        json!("item-1"),
    )
}

fn pickled_env<'a>(
    trees: &'a [Tree; 4],
    label: &'a Value,
    outcome: impl Fn(&'a [Tree; 4]) -> Outcome<Item<'a>>,
) -> Env<Item<'a>> {
    Env {
        args: Some(
            trees
                .iter()
                .map(|t| Item::Pickle(PickleValue::root(t)))
                .collect(),
        ),
        kwargs: Some(vec![("label".to_owned(), Item::Json(label))]),
        outcome: outcome(trees),
    }
}

#[test]
fn reads_decoded_pickles() {
    let (trees, label) = pickled_call();
    let env = pickled_env(&trees, &label, |_| Outcome::Pending);
    let run = |text: &str| eval(&parse(text).unwrap(), &env).map_err(|e| e.message);
    for (text, want) in [
        ("type(args[0]) == \"Point\" and args[0].x < 0", true),
        ("args[0].y == 2.5", true),
        ("args[0]", true),
        ("type(args[1]) == \"dict\" and len(args[1]) == 2", true),
        (
            "args[1][\"k\"][1].startswith(\"tw\") and args[1][\"k\"][-1] is None",
            true,
        ),
        (
            "args[1][3] == \"three\" and \"k\" in args[1] and 4 not in args[1]",
            true,
        ),
        ("2 in args[1][\"k\"] or 1 in args[1][\"k\"]", true),
        ("type(args[2]) == \"Slotted\" and args[2].a == 5", true),
        (
            "type(args[3]) == \"int\" and args[3] and args[3] != 1",
            true,
        ),
        ("kwargs[\"label\"].endswith(\"-1\")", true),
    ] {
        assert_eq!(run(text), Ok(want), "{text}");
    }
    assert_eq!(
        run("args[0].z"),
        Err("args[0].z: no attribute 'z' on Point".into())
    );
    assert_eq!(run("args[3] > 1"), Err(format!("args[3] > 1: {BIG_INT}")));
}

#[test]
fn reads_outcome() {
    for (text, want) in [
        ("args[0] > 1 and kwargs[\"n\"]", false),
        ("\"result\" in kwargs", false),
        ("-abs(len(args))", false),
        ("result", true),
        ("exception is None", true),
        ("len(result.items) > 0", true),
        ("args[0].startswith(exception)", true),
        ("args[result]", true),
        ("1 < 2 < -result", true),
        ("not (args or exception)", true),
        ("type(args[0] + result[1]) == \"int\"", true),
    ] {
        assert_eq!(parse(text).unwrap().reads_outcome(), want, "{text}");
    }
    for (text, want) in [
        ("", false),
        ("result and exception", false),
        ("{args} {{result}}", false),
        ("n={args[0]} r={result}", true),
        ("{exception}", true),
    ] {
        assert_eq!(
            parse_template(text).unwrap().reads_outcome(),
            want,
            "{text}"
        );
    }
}

/// The length of `text` in characters.
fn chars_of(text: &str) -> usize {
    text.chars().count()
}

#[test]
fn display_of_json() {
    for (v, want) in [
        (json!("it's \"raw\"\n"), "it's \"raw\"\n"),
        (json!(""), ""),
        (json!(null), "null"),
        (json!(true), "true"),
        (json!(-7), "-7"),
        (json!(2.5), "2.5"),
        (json!([]), "[]"),
        (
            json!({"a": [1, 2.5, "é\n"], "b": null, "c": {"d": "x"}}),
            "{\"a\":[1,2.5,\"é\\n\"],\"b\":null,\"c\":{\"d\":\"x\"}}",
        ),
    ] {
        assert_eq!((&v).display(), want, "{v}");
        assert_eq!((&v).unreadable(), None);
    }
    // 10**30 as a JSON number keeps its digits.
    let big: Value = serde_json::from_str("1000000000000000000000000000000").unwrap();
    assert_eq!((&big).display(), "1000000000000000000000000000000");
    // A str of exactly the limit is whole; one more character is cut.
    let s = json!("é".repeat(LOG_VALUE_CHARS));
    assert_eq!((&s).display(), "é".repeat(LOG_VALUE_CHARS));
    let s = json!("é".repeat(LOG_VALUE_CHARS + 1));
    assert_eq!(
        (&s).display(),
        format!("{}...", "é".repeat(LOG_VALUE_CHARS))
    );
    // A huge value: the serializer stops early, cut inside a character or not.
    for v in [
        json!((0..1_000_000).collect::<Vec<_>>()),
        json!(vec!["€"; 100_000]),
    ] {
        let start = Instant::now();
        let shown = (&v).display();
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(chars_of(&shown), LOG_VALUE_CHARS + 3);
        assert!(shown.ends_with("..."));
        let whole = v.to_string();
        assert!(whole.starts_with(shown.trim_end_matches("...")));
    }
}

#[test]
fn display_of_decoded_pickles() {
    for (hex, want) in [
        (POINT, "Point(x=-1, y=2.5)"),
        (DICT, "{'k': [1, 'two', None], 3: 'three'}"),
        (SLOTTED, "Slotted(a=5)"),
        (BIG, "1000000000000000000000000000000"),
    ] {
        let t = tree(hex);
        let v = PickleValue::root(&t);
        assert_eq!(v.display(), want);
        assert_eq!(v.unreadable(), None);
        assert_eq!(Item::Pickle(v).display(), want);
    }
    // A str is its own text; inside a container it is quoted.
    let t = tree(DICT);
    let two = PickleValue::root(&t)
        .key(Key::Str("k"))
        .and_then(|l| l.element(1))
        .unwrap();
    assert_eq!(two.display(), "two");
    let decoded = |bytes: &[u8]| pickle::decode(bytes, &pickle::Limits::default()).unwrap();
    let t = decoded(&P::new().str("it's \"é\"\n").done());
    assert_eq!(PickleValue::root(&t).display(), "it's \"é\"\n");
    // A lone surrogate reads as U+FFFD, as `str_of` has it.
    let t = decoded(&P::new().op(b"X\x05\x00\x00\x00a\xed\xa0\x80b.").done());
    let v = PickleValue::root(&t);
    assert_eq!(v.display(), "a\u{fffd}b");
    assert_eq!(Some(v.display()), v.to_str());
    // Long strs: only the head is read.
    let t = decoded(&P::new().str(&"é".repeat(1_000_000)).done());
    let start = Instant::now();
    let shown = PickleValue::root(&t).display();
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(shown, format!("{}...", "é".repeat(LOG_VALUE_CHARS)));
    let t = decoded(&P::new().str(&"x".repeat(LOG_VALUE_CHARS)).done());
    assert_eq!(PickleValue::root(&t).display(), "x".repeat(LOG_VALUE_CHARS));
    // A value shared through the memo, exponentially large when shown: cut, in bounded
    // time.
    let mut p = P::new();
    let s = p.str(&"y".repeat(400)).put();
    let mut top = p.list_of(s, 1);
    for _ in 0..6 {
        top = p.list_of(top, 100);
    }
    let t = decoded(&p.done());
    let start = Instant::now();
    let shown = PickleValue::root(&t).display();
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(chars_of(&shown), LOG_VALUE_CHARS + 3);
    assert!(shown.starts_with("[[[[[[['yyyy") && shown.ends_with("..."));
    // Nested deeper than the renderer goes: said, not shown.
    let t = decoded(&P::new().op(&[b']'; 300]).op(&[b'a'; 299]).done());
    assert_eq!(
        PickleValue::root(&t).display(),
        "<unavailable: PickleError: value nests deeper than 200 levels>"
    );
}

const MISSING: &str = "payload missing from the store";
const BROKEN: &str = "<unavailable: PickleError: pickle truncated at byte 3>";

#[test]
fn unreadable_values_fail_where_they_are_read() {
    let n = json!(150);
    let env = Env {
        args: Some(vec![Item::Json(&n), Item::Unreadable(MISSING)]),
        kwargs: Some(vec![("k".to_owned(), Item::Unreadable(BROKEN))]),
        outcome: Outcome::Returned(Item::Unreadable(MISSING)),
    };
    let run = |text: &str| eval(&parse(text).unwrap(), &env).map_err(|e| e.message);
    let text = |text: &str| eval_text(&parse(text).unwrap(), &env).map_err(|e| e.message);
    let missing = format!("args[1]: unreadable value ({MISSING})");
    for text in [
        "args[1]",
        "args[1] == 1",
        "args[1] is None",
        "not args[1]",
        "args[1].x",
        "args[1][0]",
        "args[1][\"k\"]",
        "len(args[1])",
        "type(args[1])",
        "abs(args[1])",
        "-args[1]",
        "args[1] + 1",
        "args[1].startswith(\"a\")",
        "\"a\" in args[1]",
        "args[0] > 1 and args[1]",
    ] {
        assert_eq!(run(text), Err(missing.clone()), "{text}");
    }
    assert_eq!(
        run("1 in args"),
        Err(format!("1 in args: unreadable value ({MISSING})"))
    );
    assert_eq!(
        run("kwargs[\"k\"] == 1"),
        Err(format!("kwargs[\"k\"]: unreadable value ({BROKEN})"))
    );
    assert_eq!(
        run("result"),
        Err(format!("result: unreadable value ({MISSING})"))
    );
    // What does not read the value still works.
    for text in [
        "args[0] == 150",
        "150 in args",
        "len(args) == 2",
        "\"k\" in kwargs",
        "len(kwargs) == 1",
        "exception is None",
        "True or args[1]",
    ] {
        assert_eq!(run(text), Ok(true), "{text}");
    }
    // As text.
    assert_eq!(text("args[1]"), Err(missing.clone()));
    assert_eq!(text("args"), Err(missing.clone()));
    assert_eq!(
        text("kwargs"),
        Err(format!("kwargs[\"k\"]: unreadable value ({BROKEN})"))
    );
    assert_eq!(text("args[0]"), Ok("150".to_owned()));
    let t = parse_template("{args[0]} then {args[1]}").unwrap();
    assert_eq!(t.render(&env), format!("150 then <error: {missing}>"));
    // The item itself.
    let u = Item::Unreadable(MISSING);
    assert_eq!(u.display(), format!("<unreadable: {MISSING}>"));
    assert_eq!(u.unreadable(), Some(MISSING.to_owned()));
    assert_eq!(Item::Json(&n).unreadable(), None);
    // A long reason is cut in the message.
    let long = "r".repeat(5000);
    let env = Env {
        args: Some(vec![Item::Unreadable(&long)]),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    let e = eval(&parse("args[0]").unwrap(), &env).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "args[0]: unreadable value ({}...)",
            "r".repeat(LOG_VALUE_CHARS)
        )
    );
}

fn text_of(text: &str) -> Result<String, String> {
    let (a, k, o) = json_env(Outcome::Pending);
    eval_text(&parse(text).unwrap(), &env(&a, &k, o)).map_err(|e| e.message)
}

#[test]
fn values_as_text_on_json() {
    // As Python's f"{...}" shows the same values (JSON containers as compact JSON).
    for (text, want) in [
        ("None", "None"),
        ("True", "True"),
        ("False", "False"),
        ("args[5]", "None"),
        ("args[6]", "True"),
        ("args[0]", "150"),
        ("-args[9]", "7"),
        ("args[4]", "2.5"),
        ("args[0] / 4", "37.5"),
        ("args[0] / 3", "50.0"),
        ("1 / 3", "0.3333333333333333"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("1e16", "1e+16"),
        ("1e22", "1e+22"),
        ("123456789012345.6", "123456789012345.6"),
        ("1e-5", "1e-05"),
        ("0.0001", "0.0001"),
        ("-0.0", "-0.0"),
        ("2.0 * 3", "6.0"),
        ("args[3]", "hello"),
        ("kwargs[\"label\"] + \" it's\"", "item-7 it's"),
        ("\"\"", ""),
        ("args[1]", "[]"),
        ("args[7]", "[1,2,3]"),
        (
            "args[2]",
            "{\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}",
        ),
        ("args[2].tags", "[\"a\",\"b\"]"),
        ("len(args)", "10"),
        ("type(args[0])", "int"),
        ("args[0] > 100", "True"),
        ("args[1] or \"empty\"", "empty"),
        ("args[3] and args[1]", "[]"),
        ("9223372036854775807", "9223372036854775807"),
        (
            "args",
            "(150, [], {\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}, 'hello', \
             2.5, None, True, [1,2,3], 7, -7)",
        ),
        ("kwargs", "{'label': 'item-7', 'n': 3, 'ratio': 0.5}"),
    ] {
        assert_eq!(text_of(text), Ok(want.to_owned()), "{text}");
    }
    assert_eq!(
        text_of("args[10]"),
        Err("args[10]: index 10 out of range (length 10)".to_owned())
    );
}

#[test]
fn tuples_and_dicts_as_python_shows_them() {
    let texts = |args: Vec<Value>, kwargs: Vec<(&str, Value)>| {
        let env = Env {
            args: Some(args.iter().collect()),
            kwargs: Some(kwargs.iter().map(|(k, v)| ((*k).to_owned(), v)).collect()),
            outcome: Outcome::Pending,
        };
        (
            eval_text(&parse("args").unwrap(), &env).unwrap(),
            eval_text(&parse("kwargs").unwrap(), &env).unwrap(),
        )
    };
    assert_eq!(texts(vec![], vec![]), ("()".to_owned(), "{}".to_owned()));
    assert_eq!(
        texts(vec![json!(1)], vec![("it's", json!("x"))]),
        ("(1,)".to_owned(), "{\"it's\": 'x'}".to_owned())
    );
    // Python's repr of str: quotes chosen as Python does, escapes of the unprintable.
    assert_eq!(
        texts(
            vec![
                json!("it's"),
                json!("a\"b'c"),
                json!("tab\there\n"),
                json!("\u{200b}é\u{7f}"),
                json!(0.1),
                json!(1e16)
            ],
            vec![]
        )
        .0,
        "(\"it's\", 'a\"b\\'c', 'tab\\there\\n', '\\u200bé\\x7f', 0.1, 1e+16)"
    );
    // Long elements are cut, and so is the whole.
    let (args, kwargs) = texts(
        vec![json!("é".repeat(3000)), json!(2)],
        vec![("k", json!("é".repeat(3000)))],
    );
    assert_eq!(args, format!("('{}...", "é".repeat(LOG_VALUE_CHARS - 2)));
    assert_eq!(
        kwargs,
        format!("{{'k': '{}...", "é".repeat(LOG_VALUE_CHARS - 7))
    );
    // Many arguments: only those shown are read, each a step.
    let many: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
    let start = Instant::now();
    let (args, _) = texts(many, vec![]);
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(chars_of(&args), LOG_VALUE_CHARS + 3);
    assert!(args.starts_with("(0, 1, 2, 3, ") && args.ends_with("..."));
    // The step budget of `eval`.
    let big = json!((0..20_000).collect::<Vec<_>>());
    let env = Env {
        args: Some(vec![&big]),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    assert_eq!(
        eval_text(&parse("-1 in args[0]").unwrap(), &env)
            .unwrap_err()
            .message,
        "-1 in args[0]: evaluation step budget spent"
    );
}

#[test]
fn values_as_text_on_decoded_pickles() {
    let (trees, label) = pickled_call();
    let env = pickled_env(&trees, &label, |t| {
        Outcome::Returned(Item::Pickle(PickleValue::root(&t[1])))
    });
    let run = |text: &str| eval_text(&parse(text).unwrap(), &env).map_err(|e| e.message);
    for (text, want) in [
        ("args[0]", "Point(x=-1, y=2.5)"),
        ("args[0].x", "-1"),
        ("args[0].y * 2", "5.0"),
        ("args[1]", "{'k': [1, 'two', None], 3: 'three'}"),
        ("args[1][\"k\"]", "[1, 'two', None]"),
        ("args[1][\"k\"][1]", "two"),
        ("args[1][\"k\"][2]", "None"),
        ("args[1][3]", "three"),
        ("args[2]", "Slotted(a=5)"),
        ("args[3]", "1000000000000000000000000000000"),
        ("type(args[3])", "int"),
        ("result[3]", "three"),
        ("exception", "None"),
        (
            "args",
            "(Point(x=-1, y=2.5), {'k': [1, 'two', None], 3: 'three'}, Slotted(a=5), \
             1000000000000000000000000000000)",
        ),
        ("kwargs", "{'label': 'item-1'}"),
    ] {
        assert_eq!(run(text), Ok(want.to_owned()), "{text}");
    }
    // A pickled str inside `args` is quoted as Python would.
    let s = pickle::decode(&P::new().str("it's").done(), &pickle::Limits::default()).unwrap();
    let env = Env {
        args: Some(vec![Item::Pickle(PickleValue::root(&s))]),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    assert_eq!(
        eval_text(&parse("args").unwrap(), &env),
        Ok("(\"it's\",)".to_owned())
    );
}

#[test]
fn templates_parse_into_parts() {
    let x = |t: &str| Part::Expr(parse(t).unwrap());
    let text = |t: &str| Part::Text(t.to_owned());
    for (src, want) in [
        ("", vec![]),
        ("plain text", vec![text("plain text")]),
        ("{args[0]}", vec![x("args[0]")]),
        (
            "x = {args[0]}, y = {kwargs[\"a}\"]}!",
            vec![
                text("x = "),
                x("args[0]"),
                text(", y = "),
                x("kwargs[\"a}\"]"),
                text("!"),
            ],
        ),
        (
            "{{literal}} and {{{ args[0] + 1 }}}",
            vec![text("{literal} and {"), x("args[0] + 1"), text("}")],
        ),
        ("{'}'}{\"{\"}", vec![x("'}'"), x("\"{\"")]),
        ("{'\\'}'}", vec![x("\"'}\"")]),
        ("{\"\\\\\"}}}", vec![x("'\\\\'"), text("}")]),
        ("é{len(args)}é", vec![text("é"), x("len(args)"), text("é")]),
        ("{\nresult\n}", vec![x("result")]),
    ] {
        let t = parse_template(src).unwrap();
        assert_eq!(t.parts(), &want[..], "{src}");
        assert_eq!(
            parse_template(&t.to_string()),
            Ok(t.clone()),
            "{src} -> {t}"
        );
    }
    for (src, printed) in [
        ("{ args[0]+1 }{{x}}", "{args[0] + 1}{{x}}"),
        ("a {'}'} b", "a {\"}\"} b"),
        ("}}{{", "}}{{"),
        ("{(result)}", "{result}"),
    ] {
        assert_eq!(parse_template(src).unwrap().to_string(), printed);
    }
    let max = "{args}".repeat(64);
    assert_eq!(parse_template(&max).unwrap().parts().len(), 64);
    let long = "a".repeat(CONDITION_TEXT_BYTES);
    assert_eq!(parse_template(&long).unwrap().parts(), &[text(&long)]);
}

#[test]
fn template_errors_with_their_columns() {
    let unknown = "unknown name 'foo': a condition reads args, kwargs, result or exception \
                   (functions: len, type, abs)";
    for (src, msg, byte, column) in [
        ("value: {args[0]", "expected '}'", 15, 16),
        ("value: {args[0] {args[1]}", "expected '}'", 16, 17),
        (
            "a } b",
            "single '}' is not allowed (write '}}' for a literal brace)",
            2,
            3,
        ),
        (
            "{args}}",
            "single '}' is not allowed (write '}}' for a literal brace)",
            6,
            7,
        ),
        (
            "a {} b",
            "empty expression in '{}' (write '{{' for a literal brace)",
            2,
            3,
        ),
        (
            "a { \n } b",
            "empty expression in '{}' (write '{{' for a literal brace)",
            2,
            3,
        ),
        ("a {", "unclosed '{' (write '{{' for a literal brace)", 2, 3),
        (
            "a { {args}",
            "unclosed '{' (write '{{' for a literal brace)",
            2,
            3,
        ),
        ("x = {foo}", unknown, 5, 6),
        ("é = {args[0] >}", "expected a value, found '}'", 15, 15),
        ("ok {args[0]} {len(}", "expected a value, found '}'", 18, 19),
        (
            "{args[0] + {args[1]}",
            "expected a value, found '{'",
            11,
            12,
        ),
        ("{args[0] +", "unexpected end of log message", 10, 11),
        ("{args[0] = 1}", "'=' is not a comparison (use '==')", 9, 10),
        ("{\"abc}", "unterminated string", 1, 2),
        ("{'a\\q'}", "invalid escape in string", 3, 4),
        ("{(args[0]}", "expected ')'", 9, 10),
        ("{args ! 1}", "unexpected character '!'", 6, 7),
        (
            "{args[0] is the value",
            unknown.replace("'foo'", "'the'").as_str(),
            12,
            13,
        ),
        (
            "{args[0] is 3}",
            "'is' compares only with None, True or False",
            12,
            13,
        ),
        ("{args[0] 1}", "unexpected 1", 9, 10),
        ("{a {args}}", unknown.replace("'foo'", "'a'").as_str(), 1, 2),
    ] {
        let e = parse_template(src).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.byte, e.column),
            (msg, byte, column),
            "{src}"
        );
        assert_eq!(e.to_string(), format!("{msg} at column {column}"));
    }
    let long = "a".repeat(CONDITION_TEXT_BYTES + 1);
    let e = parse_template(&long).unwrap_err();
    assert_eq!(
        (e.message.as_str(), e.byte, e.column),
        ("log message longer than 4096 bytes", 4096, 4097)
    );
    let e = parse_template(&"{args}".repeat(65)).unwrap_err();
    assert_eq!(
        (e.message.as_str(), e.byte, e.column),
        ("more than 64 expressions in a log message", 384, 385)
    );
    let deep = format!(
        "{{{}1{}}}",
        "(".repeat(CONDITION_DEPTH + 1),
        ")".repeat(CONDITION_DEPTH + 1)
    );
    let e = parse_template(&deep).unwrap_err();
    let inner = parse(&deep[1..deep.len() - 1]).unwrap_err();
    assert_eq!(
        (e.message, e.byte, e.column),
        (too_deep(), inner.byte + 1, inner.column + 1)
    );
}

#[test]
fn templates_render_on_json() {
    let (a, k, _) = json_env(Outcome::Pending);
    let r = json!({"ok": true});
    let render =
        |src: &str, o: Outcome<&Value>| parse_template(src).unwrap().render(&env(&a, &k, o));
    let p = Outcome::Pending;
    assert_eq!(render("", p.clone()), "");
    assert_eq!(render("just text {{}}", p.clone()), "just text {}");
    assert_eq!(
        render(
            "n={args[0]} label={kwargs['label']} r={args[0] / 4} ok={args[0] > 100} \
             x={args[2].x} {{braces}} none={args[5]}",
            p.clone()
        ),
        "n=150 label=item-7 r=37.5 ok=True x=-1 {braces} none=None"
    );
    assert_eq!(
        render("missing={args[99]} after", p.clone()),
        "missing=<error: args[99]: index 99 out of range (length 10)> after"
    );
    assert_eq!(
        render("{result}", p.clone()),
        "<error: result: not available before the call returns>"
    );
    assert_eq!(
        render("{result} {exception}", Outcome::Returned(&r)),
        "{\"ok\":true} None"
    );
    assert_eq!(
        render("{result} {exception}", Outcome::Raised("KeyError".into())),
        "None KeyError"
    );
    assert_eq!(
        render("{args[7]} of {len(args)}: {args}", p),
        "[1,2,3] of 10: (150, [], {\"x\":-1,\"label\":\"item-3\",\"tags\":[\"a\",\"b\"]}, \
         'hello', 2.5, None, True, [1,2,3], 7, -7)"
    );
}

#[test]
fn templates_render_on_decoded_pickles() {
    let point = tree(POINT);
    let dict = tree(DICT);
    let env = Env {
        args: Some(vec![
            Item::Pickle(PickleValue::root(&point)),
            Item::Pickle(PickleValue::root(&dict)),
            Item::Unreadable(MISSING),
        ]),
        kwargs: Some(vec![]),
        outcome: Outcome::Raised("ValueError".into()),
    };
    let t = parse_template(
        "p={args[0]} x={args[0].x} k={args[1]['k']} two={args[1]['k'][1]} \
         e={exception} r={result} u={args[2]} kw={kwargs}",
    )
    .unwrap();
    assert_eq!(
        t.render(&env),
        format!(
            "p=Point(x=-1, y=2.5) x=-1 k=[1, 'two', None] two=two e=ValueError r=None \
             u=<error: args[2]: unreadable value ({MISSING})> kw={{}}"
        )
    );
}

#[test]
fn rendered_messages_are_capped() {
    // Values of two-byte characters: the cut falls on a character boundary.
    let long = json!("é".repeat(5000));
    let env = Env {
        args: Some(vec![&long]),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    let t = parse_template(&"{args[0]}|".repeat(64)).unwrap();
    let start = Instant::now();
    let out = t.render(&env);
    assert!(start.elapsed() < Duration::from_millis(500));
    assert!(out.len() <= LOG_LINE_BYTES && out.len() >= LOG_LINE_BYTES - 4);
    assert!(out.ends_with("...") && out.starts_with("é"));
    assert_eq!(
        out.trim_end_matches("..."),
        &format!("{}...|", "é".repeat(LOG_VALUE_CHARS)).repeat(3)[..out.len() - 3]
    );
    // Exactly at the cap, one byte over, and over with the cut inside a character.
    let values = [
        json!("c".repeat(9)),
        json!("c".repeat(10)),
        json!(format!("x{}", "é".repeat(5))),
    ];
    let env = Env {
        args: Some(values.iter().collect()),
        kwargs: None,
        outcome: Outcome::Pending,
    };
    let a = "a".repeat(LOG_LINE_BYTES - 9);
    let render = |i: usize| {
        let t = parse_template(&format!("{a}{{args[{i}]}}")).unwrap();
        t.render(&env)
    };
    assert_eq!(render(0), format!("{a}{}", "c".repeat(9)));
    assert_eq!(render(0).len(), LOG_LINE_BYTES);
    assert_eq!(render(1), format!("{a}cccccc..."));
    assert_eq!(render(1).len(), LOG_LINE_BYTES);
    assert_eq!(render(2), format!("{a}xéé..."));
    let text = "b".repeat(LOG_LINE_BYTES);
    assert_eq!(parse_template(&text).unwrap().render(&env), text);
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e20..1e20f64).prop_map(|x| json!(x)),
        "\\PC{0,12}".prop_map(Value::String),
        // Values too long to show whole.
        Just(json!("é".repeat(3000))),
        Just(json!((0..3000).collect::<Vec<_>>())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,3}", inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// How an argument reaches the evaluator: as JSON, as the decoded pickle of the same
/// value, or unreadable.
#[derive(Debug, Clone, Copy)]
enum Form {
    Json,
    Pickle,
    Unreadable,
}

fn arb_form() -> impl Strategy<Value = Form> {
    prop_oneof![
        4 => Just(Form::Json),
        4 => Just(Form::Pickle),
        1 => Just(Form::Unreadable),
    ]
}

/// Arguments, keyword arguments and a result, each in its form.
type Call = (
    Vec<(Value, Form)>,
    Vec<(String, Value, Form)>,
    Option<(Value, Form)>,
);

fn arb_call() -> impl Strategy<Value = Call> {
    (
        prop::collection::vec((arb_json(), arb_form()), 0..5),
        prop::collection::vec(("[a-z]{1,3}", arb_json(), arb_form()), 0..4),
        prop::option::of((arb_json(), arb_form())),
    )
}

/// The decoded pickle of each value in the pickle form (`None` for the others), in the
/// order [`call_env`] takes them.
fn call_trees(call: &Call) -> Vec<Option<Tree>> {
    let (args, kwargs, result) = call;
    let tree = |v: &Value, f: &Form| {
        matches!(f, Form::Pickle).then(|| {
            let bytes = crate::pickle_write::dumps(v);
            pickle::decode(&bytes, &pickle::Limits::default()).unwrap()
        })
    };
    args.iter()
        .map(|(v, f)| tree(v, f))
        .chain(kwargs.iter().map(|(_, v, f)| tree(v, f)))
        .chain(result.iter().map(|(v, f)| tree(v, f)))
        .collect()
}

fn call_env<'a>(call: &'a Call, trees: &'a [Option<Tree>]) -> Env<Item<'a>> {
    let (args, kwargs, result) = call;
    let mut trees = trees.iter();
    let mut item = |v: &'a Value, f: Form| {
        let t = trees.next().unwrap();
        match (f, t) {
            (Form::Pickle, Some(t)) => Item::Pickle(PickleValue::root(t)),
            (Form::Unreadable, _) => Item::Unreadable(MISSING),
            _ => Item::Json(v),
        }
    };
    let args = args.iter().map(|(v, f)| item(v, *f)).collect();
    let kwargs = kwargs
        .iter()
        .map(|(k, v, f)| (k.clone(), item(v, *f)))
        .collect();
    let outcome = match result {
        Some((v, f)) => Outcome::Returned(item(v, *f)),
        None => Outcome::Raised("ValueError".into()),
    };
    Env {
        args: Some(args),
        kwargs: Some(kwargs),
        outcome,
    }
}

/// A template of these parts: texts in a row joined, empty ones left out, as parsed.
fn template_of(parts: Vec<Part>) -> Template {
    let mut out: Vec<Part> = Vec::new();
    for p in parts {
        match (out.last_mut(), p) {
            (_, Part::Text(t)) if t.is_empty() => {}
            (Some(Part::Text(a)), Part::Text(t)) => a.push_str(&t),
            (_, p) => out.push(p),
        }
    }
    Template { parts: out }
}

fn arb_template() -> impl Strategy<Value = Template> {
    let part = prop_oneof![
        2 => any::<String>().prop_map(Part::Text),
        3 => arb_text_expr().prop_map(Part::Expr),
    ];
    prop::collection::vec(part, 0..20).prop_map(template_of)
}

/// Expressions of every form, and more often ones that read the call's values.
fn arb_text_expr() -> impl Strategy<Value = Expr> {
    let readable = prop_oneof![
        Just("args"),
        Just("kwargs"),
        Just("result"),
        Just("args[0]"),
        Just("args[-1]"),
        Just("args[0][0]"),
        Just("len(args[1])"),
        Just("type(result)"),
        Just("kwargs[\"a\"]"),
    ]
    .prop_map(|t| parse(t).unwrap());
    prop_oneof![1 => arb_expr(), 2 => readable]
}

/// Evaluates `e` as text within `steps` steps: the answer and the steps left.
fn text_within(e: &Expr, env: &Env<Item<'_>>, steps: usize) -> (Result<String, EvalError>, usize) {
    let mut ev = Evaluator { env, steps };
    let r = ev.eval(e).and_then(|v| ev.text(e, &v));
    (r, ev.steps)
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::None),
        any::<bool>().prop_map(Expr::Bool),
        (0..=i64::MAX).prop_map(Expr::Int),
        (0.0..1e300f64).prop_map(Expr::Float),
        any::<String>().prop_map(Expr::Str),
        prop_oneof![
            Just(Name::Args),
            Just(Name::Kwargs),
            Just(Name::Result),
            Just(Name::Exception)
        ]
        .prop_map(Expr::Name),
    ];
    leaf.prop_recursive(6, 48, 3, |inner| {
        let b = |e| Box::new(e);
        let arith = prop_oneof![
            Just(ArithOp::Add),
            Just(ArithOp::Sub),
            Just(ArithOp::Mul),
            Just(ArithOp::Div),
            Just(ArithOp::FloorDiv),
            Just(ArithOp::Mod)
        ];
        let cmp = prop_oneof![
            Just(CmpOp::Eq),
            Just(CmpOp::Ne),
            Just(CmpOp::Lt),
            Just(CmpOp::Le),
            Just(CmpOp::Gt),
            Just(CmpOp::Ge),
            Just(CmpOp::In),
            Just(CmpOp::NotIn)
        ];
        let func = prop_oneof![Just(Func::Len), Just(Func::Type), Just(Func::Abs)];
        let method = prop_oneof![
            Just(Method::StartsWith),
            Just(Method::EndsWith),
            Just(Method::Contains)
        ];
        prop_oneof![
            (inner.clone(), "[a-z_][a-z0-9_]{0,5}")
                .prop_filter("keyword", |(_, n)| !matches!(
                    n.as_str(),
                    "and" | "or" | "not" | "in" | "is"
                ))
                .prop_map(move |(x, n)| Expr::Attr(b(x), n)),
            (inner.clone(), inner.clone()).prop_map(move |(x, k)| Expr::Index(b(x), b(k))),
            (func, inner.clone()).prop_map(move |(f, x)| Expr::Call(f, b(x))),
            (inner.clone(), method, inner.clone()).prop_map(move |(x, m, a)| Expr::Method(
                b(x),
                m,
                b(a)
            )),
            inner.clone().prop_map(move |x| Expr::Neg(b(x))),
            inner.clone().prop_map(move |x| Expr::Not(b(x))),
            (inner.clone(), inner.clone()).prop_map(move |(x, y)| Expr::And(b(x), b(y))),
            (inner.clone(), inner.clone()).prop_map(move |(x, y)| Expr::Or(b(x), b(y))),
            (arith, inner.clone(), inner.clone()).prop_map(move |(op, x, y)| Expr::Arith(
                op,
                b(x),
                b(y)
            )),
            (
                inner.clone(),
                prop::collection::vec((cmp, inner.clone()), 1..3),
                any::<bool>()
            )
                .prop_map(move |(x, mut rest, is)| {
                    if is {
                        rest.push((CmpOp::IsNot, Expr::None));
                    }
                    Expr::Compare(b(x), rest)
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}|[a-z0-9()\\[\\].,'\"<>=!%*/+ -]{0,300}") {
        let start = Instant::now();
        if let Ok(e) = parse(&text) {
            let (a, k, o) = json_env(Outcome::Pending);
            let _ = eval(&e, &env(&a, &k, o));
        }
        prop_assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn printed_trees_parse_back(e in arb_expr()) {
        let text = e.to_string();
        prop_assert_eq!(parse(&text), Ok(e), "{}", text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_template_text_never_panics(
        text in "\\PC{0,200}|[a-z0-9(){}\\[\\].,'\"<>=!%*/+ \\\\-]{0,300}|\
                 (\\{|\\}|\\{\\{|\\}\\}|args|kwargs|result|\\[0\\]|'|\"|\\\\| |\\+|1|len\\(|\\)){0,40}"
    ) {
        let start = Instant::now();
        match parse_template(&text) {
            Ok(t) => {
                let printed = t.to_string();
                prop_assert_eq!(parse_template(&printed), Ok(t.clone()), "{}", printed);
                let (a, k, o) = json_env(Outcome::Pending);
                prop_assert!(t.render(&env(&a, &k, o)).len() <= LOG_LINE_BYTES);
            }
            Err(e) => {
                prop_assert!(e.byte <= text.len());
                if let Some(head) = text.get(..e.byte) {
                    prop_assert_eq!(e.column, head.chars().count() + 1);
                }
            }
        }
        prop_assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn printed_templates_parse_back(t in arb_template()) {
        let text = t.to_string();
        prop_assume!(text.len() <= CONDITION_TEXT_BYTES);
        prop_assert_eq!(parse_template(&text), Ok(t), "{}", text);
    }

    #[test]
    fn rendered_messages_stay_under_the_cap(t in arb_template(), call in arb_call()) {
        let trees = call_trees(&call);
        let env = call_env(&call, &trees);
        let start = Instant::now();
        let out = t.render(&env);
        prop_assert!(out.len() <= LOG_LINE_BYTES, "{}", out.len());
        prop_assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn evaluation_stays_within_its_budget(e in arb_text_expr(), call in arb_call()) {
        let trees = call_trees(&call);
        let env = call_env(&call, &trees);
        let start = Instant::now();
        let (full, left) = text_within(&e, &env, CONDITION_STEPS);
        if let Ok(text) = &full {
            prop_assert!(text.chars().count() <= LOG_VALUE_CHARS + 3);
        }
        prop_assert_eq!(&eval_text(&e, &env), &full);
        // The steps it used give the same answer; one fewer spends the budget.
        let used = CONDITION_STEPS - left;
        prop_assert_eq!(text_within(&e, &env, used), (full, 0));
        if used > 0 {
            let (short, _) = text_within(&e, &env, used - 1);
            prop_assert!(short.is_err_and(|e| e.message.ends_with("evaluation step budget spent")));
        }
        let _ = eval(&e, &env);
        prop_assert!(start.elapsed() < Duration::from_secs(1));
    }
}
