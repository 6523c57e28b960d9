//! Builds protocol 4 pickles opcode by opcode, for tests: the unit tests of shared values
//! (`src/pickle/amplify_tests.rs`) and the integration tests that send such pickles to the real
//! server (`tests/it/render_limits.rs`).

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
