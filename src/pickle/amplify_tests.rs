//! Regression tests for values shared through the pickle memo: each shape below used to be
//! copied out once per reference (output exponential in the input) or examined again at every
//! visit (time quadratic or exponential in the input). Every rendering of each must now stay
//! within the render budget of its input, with a marker where it was cut, and do work
//! proportional to that budget: counted as node reads of the tree, not timed.

use serde_json::Value;

use super::budget::JSON_MARKER;
use super::builder::{amplifying, P};
use super::reader::node_reads;
use super::{exact_json, pretty, repr, type_name, view, Limits};

/// Node reads allowed per unit of render budget (see `render_all`).
const MAX_READS_PER_BUDGET_UNIT: u64 = 4;

/// What each rendering of `bytes` produced, checked against the budget, its work counted.
struct Shown {
    repr: String,
    pretty: Value,
    view: Value,
}

fn render_all(bytes: &[u8]) -> Shown {
    let budget = Limits::default().render_budget(bytes.len());
    let view_budget = Limits::default().view_budget(bytes.len());
    // Work, counted as node reads (not time, which a loaded machine or an unoptimized build
    // stretches): the four budgeted renderings (repr, pretty, exact JSON, type name) and the
    // view each spend at most their budget of node visits, and a visit reads a few nodes (its
    // children's kinds, a dict's keys: under 2 per unit of budget for every shape here). Each
    // shape examined again at every visit read hundreds to millions of times more; the count
    // stops such a rendering at the first read past the bound.
    let budgets = 4 * budget + view_budget + bytes.len();
    let bound = MAX_READS_PER_BUDGET_UNIT * budgets as u64;
    let (shown, _reads) = node_reads::at_most(bound, || {
        let shown = Shown {
            repr: repr(bytes).unwrap_or_else(|e| e.to_string()),
            pretty: pretty(bytes),
            view: view(bytes),
        };
        let _ = exact_json(bytes, 256);
        let _ = type_name(bytes);
        shown
    });
    // Text is at most the budget (plus the marker and one overshooting token); JSON forms
    // charge each value more than its text, except for quotes and escapes.
    assert!(
        shown.repr.len() <= budget + bytes.len() + 64,
        "repr of {} bytes for a budget of {budget}",
        shown.repr.len()
    );
    for (name, v, budget) in [
        ("pretty", &shown.pretty, budget),
        ("view", &shown.view, view_budget),
    ] {
        let n = v.to_string().len();
        assert!(
            n <= 2 * budget + 64 * 1024,
            "{name} of {n} bytes for a budget of {budget}"
        );
    }
    shown
}

/// The node reads of every rendering of `bytes` (repr, pretty, view, exact JSON, type name),
/// stopped at the first read past `MAX_READS_PER_BUDGET_UNIT` per unit of their budgets.
fn render_counted(bytes: &[u8]) {
    let limits = Limits::default();
    let budgets =
        4 * limits.render_budget(bytes.len()) + limits.view_budget(bytes.len()) + bytes.len();
    node_reads::at_most(MAX_READS_PER_BUDGET_UNIT * budgets as u64, || {
        let _ = repr(bytes);
        let _ = pretty(bytes);
        let _ = view(bytes);
        let _ = exact_json(bytes, 256);
        let _ = type_name(bytes);
    });
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 48, ..Default::default() })]

    /// Generated pickles sharing values level upon level (`tests/pickle_props.rs` bounds the
    /// memory of the same renderings): work within the same bound as the shapes below.
    #[test]
    fn amplifying_pickles_render_within_their_work_bound(bytes in amplifying()) {
        render_counted(&bytes);
    }
}

fn cut_marked(v: &Value) -> bool {
    v.to_string().contains(JSON_MARKER.trim_end_matches('>'))
}

/// `ValueError(*[s] * n)`: one string, referenced by every argument.
#[test]
fn exception_args_sharing_one_long_string_are_cut() {
    let mut p = P::new();
    let s = p.str(&"x".repeat(100_000)).put();
    p.op(b"0").global("builtins", "ValueError");
    p.op(b"(").refs(s, 50_000).op(b"tR");
    let bytes = p.done();
    assert!(bytes.len() < 210_000);
    let shown = render_all(&bytes);
    assert!(shown.repr.ends_with("...<output limit>"));
    assert!(
        cut_marked(&shown.pretty),
        "the exception dict says it was cut: {}",
        &shown.pretty.to_string()[..200]
    );
    assert!(cut_marked(&shown.view));
    let args = shown.pretty["args"].as_array().map_or(0, Vec::len);
    assert!(args < 100, "{args} args shown");
    let summary = shown.pretty["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("builtins.ValueError: ('xxx"),
        "{}",
        &summary[..80.min(summary.len())]
    );
}

/// `a = [s]; b = [a] * 100; c = [b] * 100; ...`: exponential in the depth, from 1.6 KB.
#[test]
fn nested_lists_sharing_one_list_are_cut() {
    let mut p = P::new();
    let s = p.str(&"y".repeat(400)).put();
    let mut top = p.list_of(s, 1);
    for _ in 0..6 {
        top = p.list_of(top, 100);
    }
    let bytes = p.done();
    let shown = render_all(&bytes);
    assert!(shown.repr.ends_with("...<output limit>"));
    assert!(shown.view.to_string().contains("__cut__"));
    assert_eq!(shown.pretty.as_str().map(|s| s.chars().count()), Some(503));
}

/// The same through dicts, tuples and instance state.
#[test]
fn nested_dicts_tuples_and_object_state_sharing_are_cut() {
    // Dicts: {k0: d, k1: d, ...} five levels deep.
    let mut p = P::new();
    let mut top = p.str(&"z".repeat(300)).put();
    for _ in 0..5 {
        p.op(b"}(");
        for j in 0..100 {
            p.str(&format!("k{j}")).get(top);
        }
        p.op(b"u");
        top = p.put();
    }
    let shown = render_all(&p.done());
    assert!(shown.view.to_string().contains("__cut__"));

    // Tuples: (t,) * 100, six levels deep.
    let mut p = P::new();
    let mut top = p.str(&"w".repeat(300)).put();
    for _ in 0..6 {
        p.op(b"(").refs(top, 100).op(b"t");
        top = p.put();
    }
    let shown = render_all(&p.done());
    assert!(shown.view.to_string().contains("__cut__"));

    // Instances whose state names the previous instance 100 times.
    let mut p = P::new();
    let cls = {
        p.global("mod", "Thing");
        p.put()
    };
    let mut top = p.str(&"q".repeat(300)).put();
    for _ in 0..5 {
        p.get(cls).op(b")\x81}(");
        for j in 0..100 {
            p.str(&format!("a{j}")).get(top);
        }
        p.op(b"ub");
        top = p.put();
    }
    let shown = render_all(&p.done());
    assert!(shown.view.to_string().contains("__cut__"));
    assert!(shown.repr.ends_with("...<output limit>"));
}

/// Exceptions whose args, and placeholders whose attributes, attempts and failed attributes,
/// share nested values (the JSON forms expand those).
#[test]
fn exception_and_placeholder_dicts_sharing_nested_values_are_cut() {
    let mut p = P::new();
    let mut inner = p.str(&"e".repeat(300)).put();
    for _ in 0..4 {
        inner = p.list_of(inner, 100);
    }
    p.global("builtins", "ValueError")
        .op(b"(")
        .refs(inner, 100)
        .op(b"tR");
    let shown = render_all(&p.done());
    assert!(cut_marked(&shown.pretty));

    let mut p = P::new();
    let ctor = {
        p.global(
            "cideldill_client.custom_picklers",
            "_reconstruct_placeholder",
        );
        p.put()
    };
    let mut leaf = p.str(&"v".repeat(200)).put();
    for _ in 0..3 {
        leaf = p.list_of(leaf, 50);
    }
    let mut ph = leaf;
    for level in 0..4 {
        p.get(ctor).op(b"}(");
        p.str("type_name").str("T").str("module").str("m");
        p.str("qualname").str("T");
        for (field, n) in [("attributes", 50), ("failed_attributes", 50)] {
            p.str(field).op(b"}(");
            for j in 0..n {
                p.str(&format!("a{j}")).get(ph);
            }
            p.op(b"u");
        }
        if level > 0 {
            p.str("pickle_attempts");
            p.op(b"](").refs(ph, 50).op(b"e");
        }
        p.op(b"u\x85R");
        ph = p.put();
    }
    let shown = render_all(&p.done());
    assert_eq!(shown.pretty["__cideldill_placeholder__"], true);
    assert!(cut_marked(&shown.pretty));
    assert!(cut_marked(&shown.view));
}

/// A set of many references to one list: every member's repr is made to sort them.
#[test]
fn sets_of_shared_members_are_cut() {
    let mut p = P::new();
    let big = p.str(&"s".repeat(1000)).put();
    let l = p.list_of(big, 5);
    p.global("builtins", "ValueError");
    p.op(b"\x8f(").refs(l, 50_000).op(b"\x90\x85R");
    let shown = render_all(&p.done());
    assert!(cut_marked(&shown.pretty), "{}", shown.pretty);
}

/// A class pickled by value by dill whose bases name the previous class 60 times, eight
/// levels: its description used to be worked out 60^7 times.
#[test]
fn class_bases_naming_one_class_many_times_are_examined_once() {
    let mut p = P::new();
    let create = {
        p.global("dill._dill", "_create_type");
        p.put()
    };
    let meta = {
        p.global("builtins", "type");
        p.put()
    };
    p.get(create).op(b"(").get(meta).str("C0").op(b")}(");
    p.str("__module__").str("m").op(b"utR");
    let mut top = p.put();
    for k in 1..9 {
        p.get(create).op(b"(").get(meta).str(&format!("C{k}"));
        p.op(b"(").refs(top, 60).op(b"t}tR");
        top = p.put();
    }
    p.op(b"](").refs(top, 1000).op(b"e");
    let shown = render_all(&p.done());
    assert!(
        shown.repr.starts_with("[<class '__main__.C8'>, "),
        "{}",
        &shown.repr[..80.min(shown.repr.len())]
    );
}

/// Many instances of a by-value class with a large class dict, and a placeholder with a large
/// field dict, each referenced many times: the dict used to be scanned at every visit.
#[test]
fn large_class_and_placeholder_dicts_are_scanned_once() {
    let mut p = P::new();
    p.global("dill._dill", "_create_type").op(b"(");
    p.global("builtins", "type").str("Big").op(b")}(");
    p.str("__module__").str("m");
    for j in 0..30_000 {
        p.str(&format!("f{j}")).op(b"N");
    }
    p.op(b"utR");
    let cls = p.put();
    p.get(cls).op(b")\x81");
    let obj = p.put();
    p.op(b"](").refs(obj, 30_000).op(b"e");
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("[Big(), Big(), "));

    let mut p = P::new();
    p.global(
        "cideldill_client.custom_picklers",
        "_reconstruct_placeholder",
    );
    p.op(b"}(").str("module").str("m").str("qualname").str("T");
    for j in 0..30_000 {
        p.str(&format!("x{j}")).op(b"N");
    }
    p.op(b"u\x85R");
    let ph = p.put();
    p.op(b"](").refs(ph, 30_000).op(b"e");
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("[<Unpicklable m.T attrs=0"));
}

/// Thousands of enum classes of one name, none of which has the member shown thousands of
/// times: every class used to be examined again for every visit of the member.
#[test]
fn many_enum_classes_of_one_name_are_indexed_once() {
    let mut p = P::new();
    let create = {
        p.global("dill._dill", "_create_type");
        p.put()
    };
    let meta = {
        p.global("enum", "EnumMeta");
        p.put()
    };
    p.op(b"](");
    for _ in 0..5000 {
        p.get(create).op(b"(").get(meta).str("Color").op(b")}(");
        p.str("__module__").str("m").str("_member_map_").op(b"}utR");
    }
    p.op(b"e");
    let classes = p.put();
    let member = {
        p.global("m", "Color").int(1).op(b"\x85R");
        p.put()
    };
    p.op(b"(")
        .get(classes)
        .op(b"](")
        .refs(member, 5000)
        .op(b"et");
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("([<enum 'Color'>, "));
    assert!(shown.repr.contains("], [m.Color(1), m.Color(1), "));
}

/// A dill class whose member map names the member: still named (the index is exact).
#[test]
fn enum_members_are_still_named() {
    let mut p = P::new();
    let member = {
        p.global("m", "Color").int(1).op(b"\x85R");
        p.put()
    };
    p.global("dill._dill", "_create_type").op(b"(");
    p.global("enum", "EnumMeta").str("Color").op(b")}(");
    p.str("__module__").str("m").str("_member_map_").op(b"}(");
    p.str("RED").get(member).op(b"uutR");
    p.put();
    p.op(b"\x86");
    assert_eq!(
        repr(&p.done()).ok().as_deref(),
        Some("(<Color.RED: 1>, <enum 'Color'>)")
    );
}

/// A `Counter` with many pairs, shown many times (its pairs used to be copied and sorted at
/// every visit), and objects whose callable is not a global (each used to allocate a mark per
/// node of the tree to render the callable's name).
#[test]
fn counters_and_odd_callables_shown_many_times_are_bounded() {
    let mut p = P::new();
    p.global("collections", "Counter").op(b"}(");
    for j in 0..20_000 {
        p.str(&format!("k{j}")).int(j);
    }
    p.op(b"u\x85R");
    let counter = p.put();
    let mid = p.list_of(counter, 100);
    p.list_of(mid, 100);
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("[[Counter({'k19999': 19999, "));

    let mut p = P::new();
    p.op(b"(");
    for _ in 0..20_000 {
        p.op(b"]");
    }
    p.op(b"l");
    p.put();
    p.op(b"])R");
    let odd = p.put();
    p.op(b"](").refs(odd, 50_000).op(b"e");
    let shown = render_all(&p.done());
    assert!(
        shown.repr.starts_with("[([])(), ([])(), "),
        "{}",
        &shown.repr[..80.min(shown.repr.len())]
    );
}

/// Bytes built from a long str (`_codecs.encode`), shown many times, and a dill function with
/// many `BUILD` states: each visit used to copy the whole string or walk every state.
#[test]
fn long_encoded_bytes_and_many_function_states_are_bounded() {
    let mut p = P::new();
    p.global("_codecs", "encode")
        .str(&"\u{e9}".repeat(100_000))
        .str("latin1")
        .op(b"\x86R");
    let enc = p.put();
    let mid = p.list_of(enc, 100);
    p.list_of(mid, 100);
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("[[b'\\xe9\\xe9"));

    let mut p = P::new();
    p.global("dill._dill", "_create_function").op(b")R");
    for _ in 0..30_000 {
        p.op(b"Nb");
    }
    let f = p.put();
    p.op(b"](").refs(f, 30_000).op(b"e");
    let shown = render_all(&p.done());
    assert!(shown.repr.starts_with("[<function ?>, "));
}

/// A view of 100 x 100 references to one long list: each nested view used to walk the whole
/// list to count its attributes.
#[test]
fn views_of_a_long_shared_list_count_without_walking_it() {
    let mut p = P::new();
    p.op(b"](");
    for j in 0..200_000 {
        p.op(&[b'K', (j % 256) as u8]);
        if j % 1000 == 999 {
            p.op(b"e(");
        }
    }
    p.op(b"e");
    let big = p.put();
    let mid = p.list_of(big, 100);
    p.list_of(mid, 100);
    let shown = render_all(&p.done());
    let first = &shown.view["attributes"]["0"]["attributes"]["0"];
    assert_eq!(
        first["attributes"]["__truncated__"],
        "<199900 more attributes>"
    );
}

/// `exact_json` of a list of one long string referenced many times: JSON would copy it each
/// time.
#[test]
fn exact_json_of_shared_strings_is_bounded() {
    let mut p = P::new();
    let s = p.str(&"j".repeat(100_000)).put();
    p.list_of(s, 200);
    let bytes = p.done();
    assert_eq!(exact_json(&bytes, 256), None);
    let mut p = P::new();
    let s = p.str("short").put();
    p.list_of(s, 3);
    assert_eq!(
        exact_json(&p.done(), 256),
        Some(serde_json::json!(["short", "short", "short"]))
    );
}

/// Chains of objects each calling the previous one, and of fractions of fractions: each link
/// used to be rendered as a new text from depth 0, so a long chain (a large payload pays the
/// decoder for many links) overflowed the stack and aborted the process.
#[test]
fn chains_of_nested_texts_stop_at_the_depth_limit() {
    let chain = |fraction: bool, n: usize| {
        let mut p = P::new();
        // A megabyte of padding pays the decoder for the links.
        p.str(&"p".repeat(1_000_000)).op(b"0");
        let class = {
            p.global("fractions", "Fraction");
            p.put()
        };
        p.op(b"0]");
        for _ in 0..n {
            if fraction {
                let previous = p.put();
                p.op(b"0").get(class).get(previous).int(1).op(b"\x86R");
            } else {
                p.op(b")R");
            }
        }
        p.done()
    };
    let calls = chain(false, 20_000);
    let fractions = chain(true, 20_000);
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            [&calls, &fractions].map(|b| (repr(b).is_err(), pretty(b), view(b)["type"].clone()))
        })
        .expect("spawn");
    let shown = handle.join().expect("no stack overflow");
    for (is_err, pretty, _) in &shown {
        assert!(is_err, "deeper than the depth limit");
        assert_eq!(pretty, "<unreprable: RecursionError>");
    }
    assert_eq!(shown[1].2, "fractions.Fraction");
    // Short chains still render.
    let mut p = P::new();
    p.op(b"])R)R");
    assert_eq!(repr(&p.done()).ok().as_deref(), Some("(([])())()"));
}
