//! Builds protocol 4 pickles opcode by opcode, for tests: the unit tests of shared values
//! (`src/pickle/amplify_tests.rs`) and the integration tests that send such pickles to the real
//! server (`tests/it/render_limits.rs`); and [`amplifying`], the proptest strategy of pickles
//! that share values level upon level, whose renderings `tests/pickle_props.rs` bounds in memory
//! and the unit tests bound in work.

use proptest::prelude::*;

/// A pickle under construction: the bytes so far and the number of memo entries put.
pub struct P {
    b: Vec<u8>,
    memo: u32,
}

impl Default for P {
    fn default() -> Self {
        P::new()
    }
}

impl P {
    /// The protocol 4 header.
    pub fn new() -> Self {
        P {
            b: vec![0x80, 4],
            memo: 0,
        }
    }

    /// Raw opcodes.
    pub fn op(&mut self, ops: &[u8]) -> &mut Self {
        self.b.extend_from_slice(ops);
        self
    }

    /// A str as `BINUNICODE`, whatever its length.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.b.push(b'X');
        self.b.extend((s.len() as u32).to_le_bytes());
        self.b.extend(s.as_bytes());
        self
    }

    /// A str as `SHORT_BINUNICODE` when it is shorter than 256 bytes (as Python writes it),
    /// as `BINUNICODE` otherwise.
    pub fn short_str(&mut self, s: &str) -> &mut Self {
        match u8::try_from(s.len()) {
            Ok(short) => {
                self.b.extend([0x8c, short]);
                self.b.extend(s.as_bytes());
                self
            }
            Err(_) => self.str(s),
        }
    }

    /// A 32-bit int (`BININT`).
    pub fn int(&mut self, v: i32) -> &mut Self {
        self.b.push(b'J');
        self.b.extend(v.to_le_bytes());
        self
    }

    /// `module.name` (`STACK_GLOBAL`), its names written with [`P::str`].
    pub fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.str(module).str(name).op(&[0x93])
    }

    /// `module.name` (`STACK_GLOBAL`), its names written with [`P::short_str`].
    pub fn short_global(&mut self, module: &str, name: &str) -> &mut Self {
        self.short_str(module).short_str(name).op(&[0x93])
    }

    /// Memoizes the top of the stack; returns its memo index.
    pub fn put(&mut self) -> u32 {
        self.b.push(0x94);
        self.memo += 1;
        self.memo - 1
    }

    /// Pushes memo entry `i` (`BINGET`, or `LONG_BINGET` past 255).
    pub fn get(&mut self, i: u32) -> &mut Self {
        match u8::try_from(i) {
            Ok(small) => self.op(&[b'h', small]),
            Err(_) => {
                self.b.push(b'j');
                self.b.extend(i.to_le_bytes());
                self
            }
        }
    }

    /// `n` references to memo entry `i`.
    pub fn refs(&mut self, i: u32, n: usize) -> &mut Self {
        for _ in 0..n {
            self.get(i);
        }
        self
    }

    /// A list of `n` references to memo entry `i`, memoized.
    pub fn list_of(&mut self, i: u32, n: usize) -> u32 {
        self.op(b"](").refs(i, n).op(b"e");
        self.put()
    }

    /// Ends the pickle (`STOP`) and hands over its bytes.
    pub fn done(&mut self) -> Vec<u8> {
        self.b.push(b'.');
        std::mem::take(&mut self.b)
    }
}

/// Pickles that share values through the memo, level upon level: a leaf string, then levels of
/// lists, tuples, dicts, sets, exception args, instance states or client placeholders, each
/// naming the level below up to 200 times; the last few levels are wrapped in an exception and
/// a list of references. Their renderings are exponential in the depth without a budget.
pub fn amplifying() -> impl Strategy<Value = Vec<u8>> {
    let level = (0u8..8, 1usize..200);
    (
        1usize..20_000,
        prop::collection::vec(level, 1..7),
        1usize..2000,
    )
        .prop_map(|(leaf, levels, top)| {
            let mut b = vec![0x80, 4];
            let mut memo = 0u32;
            let mut put = |b: &mut Vec<u8>| {
                b.push(0x94);
                memo += 1;
                memo - 1
            };
            let get = |b: &mut Vec<u8>, i: u32| {
                b.push(b'j');
                b.extend(i.to_le_bytes());
            };
            let text = |b: &mut Vec<u8>, s: &str| {
                b.push(b'X');
                b.extend((s.len() as u32).to_le_bytes());
                b.extend(s.as_bytes());
            };
            let global = |b: &mut Vec<u8>, m: &str, n: &str| {
                text(b, m);
                text(b, n);
                b.push(0x93);
            };
            text(&mut b, &"\u{e9}x'".repeat(leaf / 4 + 1));
            let mut below = put(&mut b);
            for (kind, width) in levels {
                let refs = |b: &mut Vec<u8>| (0..width).for_each(|_| get(b, below));
                match kind {
                    0 => {
                        b.extend(*b"](");
                        refs(&mut b);
                        b.push(b'e');
                    }
                    1 => {
                        b.push(b'(');
                        refs(&mut b);
                        b.push(b't');
                    }
                    2 | 6 | 7 => {
                        match kind {
                            6 => {
                                global(&mut b, "mod", "Thing");
                                b.extend(*b")\x81");
                            }
                            7 => global(
                                &mut b,
                                "cideldill_client.custom_picklers",
                                "_reconstruct_placeholder",
                            ),
                            _ => {}
                        }
                        b.extend(*b"}(");
                        for j in 0..width {
                            let key = match kind {
                                7 if j % 3 == 0 => "attributes".to_owned(),
                                7 if j % 3 == 1 => "pickle_attempts".to_owned(),
                                _ => format!("k{j}"),
                            };
                            text(&mut b, &key);
                            get(&mut b, below);
                        }
                        b.push(b'u');
                        match kind {
                            6 => b.push(b'b'),
                            7 => b.extend(*b"\x85R"),
                            _ => {}
                        }
                    }
                    3 => {
                        b.extend(*b"\x8f(");
                        refs(&mut b);
                        b.push(0x90);
                    }
                    _ => {
                        global(
                            &mut b,
                            "builtins",
                            if kind == 4 { "ValueError" } else { "KeyError" },
                        );
                        b.push(b'(');
                        refs(&mut b);
                        b.extend(*b"tR");
                    }
                }
                below = put(&mut b);
            }
            global(&mut b, "builtins", "RuntimeError");
            b.extend(*b"](");
            (0..top).for_each(|_| get(&mut b, below));
            b.extend(*b"e\x85R.");
            b
        })
}
