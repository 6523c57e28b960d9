//! Property and corpus tests of the safe pickle reader (`cideldill_server::pickle`).
//!
//! This file is its own test binary because it installs a counting `#[global_allocator]` to
//! check the memory bounds: the decoder's (at most 8 x input + 1 MiB) and that of decoding and
//! rendering together, every form (repr, pretty, view, exact JSON), at most
//! `RENDER_MEMORY_PER_INPUT_BYTE` x input + `RENDER_MEMORY_SLACK` (`src/limits.rs`), whatever
//! the input shares through the memo (`amplifying_pickles_stay_within_memory_and_output`). The
//! counts are per thread, so tests running in parallel do not disturb each other.
//! `corpus_renders_as_python` checks the renderer against `tests/fixtures/pickles/corpus.jsonl`
//! (made by real Python and dill).
//!
//! The counting allocator is the test support crate's (`tests/support/src/alloc.rs`), shared
//! with the reliability suite.

use std::time::{Duration, Instant};

use base64::Engine as _;
use cideldill_server::limits::{RENDER_MEMORY_PER_INPUT_BYTE, RENDER_MEMORY_SLACK};
use cideldill_server::pickle::{self, Limits};
use cideldill_test_support::alloc::{self, peak_during};
use cideldill_test_support::pickle_builder::amplifying;
use proptest::prelude::*;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// The stated memory bound of decoding and rendering `len` input bytes.
fn render_memory_bound(len: usize) -> usize {
    len.saturating_mul(RENDER_MEMORY_PER_INPUT_BYTE)
        .saturating_add(RENDER_MEMORY_SLACK)
}

/// Decodes and renders; checks the memory bounds of decoding and of decoding plus every
/// rendering (what a request for the value, its view or its exact JSON holds at its peak), and
/// that nothing panics. Returns the total size of what was rendered.
fn check_bytes(bytes: &[u8]) -> usize {
    let limits = Limits::default();
    let (tree, peak) = peak_during(|| pickle::decode(bytes, &limits));
    let bound = limits.max_memory(bytes.len());
    assert!(
        peak <= bound,
        "decoder used {peak} bytes for {} input bytes (bound {bound})",
        bytes.len()
    );
    drop(tree);
    let bound = render_memory_bound(bytes.len());
    let (shown, peak) = peak_during(|| {
        let text = pickle::repr(bytes).map_or(0, |s| s.len());
        let value = pickle::pretty(bytes).to_string().len();
        let view = pickle::view(bytes).to_string().len();
        let exact = pickle::exact_json(bytes, 256).map_or(0, |v| v.to_string().len());
        text + value + view + exact + pickle::type_name(bytes).len()
    });
    assert!(
        peak <= bound,
        "decoding and rendering used {peak} bytes for {} input bytes (bound {bound})",
        bytes.len()
    );
    shown
}

/// Opcodes with plausible operands, to build pickles that get deep into the VM.
fn op() -> impl Strategy<Value = Vec<u8>> {
    let simple = prop::sample::select(vec![
        b"(".to_vec(),
        b".".to_vec(),
        b"0".to_vec(),
        b"1".to_vec(),
        b"2".to_vec(),
        b"N".to_vec(),
        b"R".to_vec(),
        b"a".to_vec(),
        b"b".to_vec(),
        b"d".to_vec(),
        b"}".to_vec(),
        b"e".to_vec(),
        b"l".to_vec(),
        b"]".to_vec(),
        b"o".to_vec(),
        b"s".to_vec(),
        b"u".to_vec(),
        b"t".to_vec(),
        b")".to_vec(),
        vec![0x81],
        vec![0x85],
        vec![0x86],
        vec![0x87],
        vec![0x88],
        vec![0x89],
        vec![0x8f],
        vec![0x90],
        vec![0x91],
        vec![0x92],
        vec![0x93],
        vec![0x94],
        vec![0x98],
        b"I01\n".to_vec(),
        b"I-7\n".to_vec(),
        b"L99999999999999999999L\n".to_vec(),
        b"F1.5\n".to_vec(),
        b"S'a\\x00b'\n".to_vec(),
        b"Vx\\u20ac\n".to_vec(),
        b"cbuiltins\nset\n".to_vec(),
        b"c__builtin__\nlist\n".to_vec(),
        b"ccopy_reg\n_reconstructor\n".to_vec(),
        b"cdatetime\ndatetime\n".to_vec(),
        b"ccollections\nOrderedDict\n".to_vec(),
        b"ccollections\ndeque\n".to_vec(),
        b"cbuiltins\nValueError\n".to_vec(),
        b"idatetime\ndate\n".to_vec(),
        b"p3\n".to_vec(),
        b"g3\n".to_vec(),
        vec![0x80, 4],
        vec![0x80, 2],
        vec![0x95, 5, 0, 0, 0, 0, 0, 0, 0],
    ]);
    prop_oneof![
        4 => simple,
        1 => any::<u8>().prop_map(|b| vec![b'K', b]),
        1 => any::<[u8; 2]>().prop_map(|b| vec![b'M', b[0], b[1]]),
        1 => any::<[u8; 4]>().prop_map(|b| vec![b'J', b[0], b[1], b[2], b[3]]),
        1 => any::<[u8; 8]>().prop_map(|b| { let mut v = vec![b'G']; v.extend(b); v }),
        1 => (0u8..12).prop_map(|n| { let mut v = vec![0x8a, n]; v.extend((0..n).map(|i| i.wrapping_mul(37))); v }),
        1 => "[a-z'\"\\\\é]{0,6}".prop_map(|s| { let mut v = vec![0x8c, s.len() as u8]; v.extend(s.bytes()); v }),
        1 => prop::collection::vec(any::<u8>(), 0..6).prop_map(|b| { let mut v = vec![b'C', b.len() as u8]; v.extend(b); v }),
        1 => (0u8..8).prop_map(|k| vec![b'h', k]),
        1 => (0u8..8).prop_map(|k| vec![b'q', k]),
        1 => any::<u8>().prop_map(|k| vec![b'j', k, 0, 0, 0]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Memory within the stated bound (checked by `check_bytes`) and output within the render
    /// budget, however much the pickle shares. (The work of the same renderings, counted as node
    /// reads, is checked by the crate's unit tests: `src/pickle/amplify_tests.rs`.)
    #[test]
    fn amplifying_pickles_stay_within_memory_and_output(bytes in amplifying()) {
        let shown = check_bytes(&bytes);
        // Five forms (text, value, view, exact JSON, type), each within its budget; JSON text
        // may exceed the budget by its quotes and escapes.
        let budget = Limits::default().view_budget(bytes.len());
        prop_assert!(shown <= 5 * 2 * budget, "{shown} bytes shown for a budget of {budget}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_bytes(&bytes);
    }

    #[test]
    fn opcode_soup_never_panics(ops in prop::collection::vec(op(), 0..80)) {
        let mut bytes: Vec<u8> = ops.concat();
        bytes.push(b'.');
        check_bytes(&bytes);
    }

    #[test]
    fn truncations_of_valid_pickles_error(cut in 0usize..200) {
        let b = base64::engine::general_purpose::STANDARD
            .decode("gASVQgAAAAAAAABdlCiMAWGUSwFHQAQAAAAAAACMAmJjlEMCAAGUXZRoAGGGlH2UjAFrlGgFc4+UKEsBSwKQTokojoJ0lGUu")
            .unwrap_or_default();
        let n = cut.min(b.len().saturating_sub(1));
        let part = b.get(..n).unwrap_or_default();
        prop_assert!(pickle::decode(part, &Limits::default()).is_err());
        check_bytes(part);
    }
}

/// Hostile inputs: each must finish fast, within the memory bound, with a value or an error.
#[test]
fn hostile_inputs_are_bounded() {
    let mut cases: Vec<Vec<u8>> = vec![
        // Many empty lists (each a node from one byte).
        [vec![0x80, 4], vec![b']'; 3_000_000], vec![b'.']].concat(),
        // A memo entry per byte.
        [vec![0x80, 4, b'N'], vec![0x94; 2_000_000], vec![b'.']].concat(),
        // DUP bombs.
        [vec![b'N'], vec![b'2'; 3_000_000], vec![b'.']].concat(),
        // Deeply nested tuples without marks.
        [vec![b'N'], vec![0x85; 1_000_000], vec![b'.']].concat(),
    ];
    // Exponential sharing: l0 = [], l(k+1) = [lk, lk].
    let mut share = vec![0x80, 4, b']', 0x94];
    for k in 0..60u32 {
        share.extend([b'(', b'j']);
        share.extend(k.to_le_bytes());
        share.push(b'j');
        share.extend(k.to_le_bytes());
        share.extend([b'l', 0x94]);
    }
    share.push(b'.');
    cases.push(share);
    // A huge long int, referenced many times.
    let mut big = vec![0x80, 4, b'(', 0x8b];
    big.extend(200_000u32.to_le_bytes());
    big.extend(vec![0x5a; 200_000]);
    big.push(0x94);
    big.extend([b'h', 0].repeat(10_000));
    big.extend([b'l', b'.']);
    cases.push(big);
    // Sparse memo keys.
    let mut sparse = vec![b'N'];
    for k in 0..200_000u32 {
        sparse.push(b'r');
        sparse.extend((k.wrapping_mul(2_654_435_761) | 0x100_0000).to_le_bytes());
    }
    sparse.push(b'.');
    cases.push(sparse);
    // Lying lengths.
    cases.push(vec![
        0x80, 4, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ]);
    cases.push(vec![
        0x80, 4, 0x95, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]);
    cases.push(vec![b'T', 0xff, 0xff, 0xff, 0xff]);

    for (i, bytes) in cases.iter().enumerate() {
        let start = Instant::now();
        check_bytes(bytes);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "case {i} took {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn corpus_renders_as_python() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/pickles/corpus.jsonl"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        panic!("missing corpus {path}");
    };
    let (mut total, mut exact_total, mut exact_ok, mut other_ok) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("corpus line is JSON");
        total += 1;
        let name = v["name"].as_str().unwrap_or("?").to_owned();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["pickle"].as_str().unwrap_or(""))
            .expect("corpus pickle is base64");
        let exact = v["exact"].as_bool().unwrap_or(false);
        let expected = v["expected_repr"].as_str();
        let placeholder = v["group"].as_str() == Some("placeholder");
        let got = pickle::repr(&bytes);
        let ok = match (expected, &got) {
            (_, Err(e)) => {
                failures.push(format!("{name}: error {e}"));
                false
            }
            (None, Ok(_)) => true,
            (Some(exp), Ok(_)) if placeholder => {
                let want: serde_json::Value = serde_json::from_str(exp).unwrap_or_default();
                let have = pickle::pretty(&bytes);
                if want != have {
                    failures.push(format!("{name}:\n  want {want}\n  got  {have}"));
                }
                want == have
            }
            (Some(exp), Ok(g)) => {
                if exp != g {
                    failures.push(format!("{name}:\n  want {exp}\n  got  {g}"));
                }
                exp == g
            }
        };
        check_bytes(&bytes);
        if exact {
            exact_total += 1;
            exact_ok += usize::from(ok);
        } else {
            other_ok += usize::from(ok);
        }
    }
    let summary = format!(
        "corpus: {exact_ok}/{exact_total} exact lines match, {other_ok}/{} other lines pass, {total} lines",
        total - exact_total
    );
    assert!(failures.is_empty(), "{summary}\n{}", failures.join("\n"));
}
