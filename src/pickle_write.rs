//! Protocol-4 pickle writer for JSON values, producing exactly the bytes that CPython 3.11's C
//! pickler emits for `pickle.dumps(json.loads(text), protocol=4)`, where `text` is the JSON text
//! of the value.
//! It reproduces the C pickler's framing, batching and memo decisions, and emulates the object
//! identities `json.loads` creates so that memo references (`BINGET`/`LONG_BINGET`) match too.
//! The writer is iterative (explicit work stack), so arbitrarily deep values cannot overflow the
//! call stack, and it never panics.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

// Opcodes (Lib/pickle.py names).
const MARK: u8 = b'(';
const STOP: u8 = b'.';
const BINFLOAT: u8 = b'G';
const BININT: u8 = b'J';
const BININT1: u8 = b'K';
const BININT2: u8 = b'M';
const NONE: u8 = b'N';
const BINUNICODE: u8 = b'X';
const EMPTY_LIST: u8 = b']';
const APPEND: u8 = b'a';
const APPENDS: u8 = b'e';
const BINGET: u8 = b'h';
const LONG_BINGET: u8 = b'j';
const SETITEM: u8 = b's';
const SETITEMS: u8 = b'u';
const EMPTY_DICT: u8 = b'}';
const PROTO: u8 = 0x80;
const NEWTRUE: u8 = 0x88;
const NEWFALSE: u8 = 0x89;
const LONG1: u8 = 0x8a;
const LONG4: u8 = 0x8b;
const SHORT_BINUNICODE: u8 = 0x8c;
const BINUNICODE8: u8 = 0x8d;
const MEMOIZE: u8 = 0x94;
const FRAME: u8 = 0x95;

/// `FRAME` opcode plus its 8-byte little-endian length.
const FRAME_HEADER_SIZE: usize = 9;
/// Modules/_pickle.c: frames shorter than this are not worth a header and are left unframed.
const FRAME_SIZE_MIN: usize = 4;
/// Modules/_pickle.c: a frame is committed at the first opcode boundary at or past this size, and
/// string payloads at least this large bypass framing altogether.
const FRAME_SIZE_TARGET: usize = 64 * 1024;
/// Modules/_pickle.c: `APPENDS`/`SETITEMS` batches hold at most this many items.
const BATCHSIZE: usize = 1000;

/// Pickles a JSON value as Python's `pickle.dumps(json.loads(text), protocol=4)` would.
#[must_use]
pub fn dumps(value: &Value) -> Vec<u8> {
    let mut pickler = Pickler::default();
    // dump(): PROTO is written before framing is switched on, so it is never inside a frame.
    pickler.out.extend_from_slice(&[PROTO, 4]);
    pickler.framing = true;
    pickler.save_all(value);
    pickler.write(&[STOP]);
    pickler.commit_frame();
    pickler.out
}

/// One step of the emulated recursive `save()` calls, kept on an explicit stack.
enum Task<'a> {
    /// `save()` of a JSON value.
    Save(&'a Value),
    /// `save()` of a dict key (keys have their own identity rules, see [`Pickler::save_str`]).
    Key(&'a str),
    /// A bare opcode written between or after a container's items (`MARK`, `APPENDS`, ...).
    Op(u8),
}

#[derive(Default)]
struct Pickler<'a> {
    out: Vec<u8>,
    /// Whether writes go into frames; switched off while a large payload is written unframed.
    framing: bool,
    /// Offset in `out` of the placeholder header of the open frame, if any.
    frame_start: Option<usize>,
    /// Number of objects memoized so far; the next `MEMOIZE` gets this index.
    memo_len: u64,
    /// Memo indices of dict keys by text: json's scanner memoizes keys per document, so equal keys
    /// are one object and the pickler refers back to the first one.
    keys: HashMap<&'a str, u64>,
    /// Memo indices of CPython's cached singleton strings (empty, or one code point < 256).
    singletons: HashMap<&'a str, u64>,
}

impl<'a> Pickler<'a> {
    /// `_Pickler_Write`: appends bytes, opening a frame (with a placeholder header) if needed.
    fn write(&mut self, bytes: &[u8]) {
        if self.framing && self.frame_start.is_none() {
            self.frame_start = Some(self.out.len());
            self.out.extend_from_slice(&[0; FRAME_HEADER_SIZE]);
        }
        self.out.extend_from_slice(bytes);
    }

    /// `_Pickler_CommitFrame`: fills in the open frame's header, or drops the header when the
    /// frame is shorter than `FRAME_SIZE_MIN`.
    fn commit_frame(&mut self) {
        let Some(start) = self.frame_start.take() else {
            return;
        };
        let frame_len = self.out.len() - start - FRAME_HEADER_SIZE;
        if frame_len >= FRAME_SIZE_MIN {
            self.out[start] = FRAME;
            self.out[start + 1..start + FRAME_HEADER_SIZE]
                .copy_from_slice(&(frame_len as u64).to_le_bytes());
        } else {
            self.out.drain(start..start + FRAME_HEADER_SIZE);
        }
    }

    /// `_Pickler_OpcodeBoundary`: the open frame is committed once it has reached
    /// `FRAME_SIZE_TARGET`. Comparison with CPython 3.11.7 shows the check runs on entry to each
    /// `save()` (including memo hits), not after each opcode: the opcodes written after a
    /// container's last item (`APPEND`, `APPENDS`, `SETITEMS`...) and `STOP` always join the
    /// frame holding that item.
    fn opcode_boundary(&mut self) {
        if let Some(start) = self.frame_start {
            if self.out.len() - start - FRAME_HEADER_SIZE >= FRAME_SIZE_TARGET {
                self.commit_frame();
            }
        }
    }

    /// `memo_put`: protocol 4 memoizes with a bare `MEMOIZE` at the next free index.
    fn memo_put(&mut self) -> u64 {
        let index = self.memo_len;
        self.memo_len += 1;
        self.write(&[MEMOIZE]);
        index
    }

    /// `memo_get`: `BINGET` for indices below 256, `LONG_BINGET` (u32 little-endian) above.
    fn memo_get(&mut self, index: u64) {
        if let Ok(small) = u8::try_from(index) {
            self.write(&[BINGET, small]);
        } else {
            // CPython raises beyond u32::MAX; four billion memoized strings cannot fit anyway.
            let wide = u32::try_from(index).unwrap_or(u32::MAX);
            let mut op = [LONG_BINGET, 0, 0, 0, 0];
            op[1..].copy_from_slice(&wide.to_le_bytes());
            self.write(&op);
        }
    }

    /// Runs the emulated `save()` recursion for `root` on an explicit stack.
    fn save_all(&mut self, root: &'a Value) {
        let mut stack = vec![Task::Save(root)];
        // Scratch buffer for a container's tasks in forward order (pushed reversed).
        let mut pending: Vec<Task<'a>> = Vec::new();
        while let Some(task) = stack.pop() {
            if !matches!(task, Task::Op(_)) {
                self.opcode_boundary();
            }
            match task {
                Task::Save(Value::Array(items)) => {
                    self.start_list(items, &mut pending);
                    stack.extend(pending.drain(..).rev());
                }
                Task::Save(Value::Object(map)) => {
                    self.start_dict(map, &mut pending);
                    stack.extend(pending.drain(..).rev());
                }
                Task::Save(scalar) => self.save_scalar(scalar),
                Task::Key(key) => self.save_str(key, true),
                Task::Op(op) => self.write(&[op]),
            }
        }
    }

    /// `save_list` + `batch_list_exact`: `EMPTY_LIST MEMOIZE`, then a single item as `APPEND`,
    /// or `MARK ... APPENDS` batches of up to 1000 items (a final batch of one item still uses
    /// `MARK`/`APPENDS`).
    fn start_list(&mut self, items: &'a [Value], pending: &mut Vec<Task<'a>>) {
        self.write(&[EMPTY_LIST]);
        self.memo_put();
        if let [only] = items {
            pending.push(Task::Save(only));
            pending.push(Task::Op(APPEND));
        } else {
            for batch in items.chunks(BATCHSIZE) {
                pending.push(Task::Op(MARK));
                pending.extend(batch.iter().map(Task::Save));
                pending.push(Task::Op(APPENDS));
            }
        }
    }

    /// `save_dict` + `batch_dict_exact`: like lists, except that CPython's loop runs again
    /// whenever a batch was full, so a dict whose size is a non-zero multiple of 1000 ends with
    /// an empty `MARK SETITEMS` batch.
    fn start_dict(&mut self, map: &'a Map<String, Value>, pending: &mut Vec<Task<'a>>) {
        self.write(&[EMPTY_DICT]);
        self.memo_put();
        if map.len() == 1 {
            for (key, value) in map {
                pending.push(Task::Key(key));
                pending.push(Task::Save(value));
            }
            pending.push(Task::Op(SETITEM));
        } else if !map.is_empty() {
            let mut in_batch = 0;
            pending.push(Task::Op(MARK));
            for (key, value) in map {
                if in_batch == BATCHSIZE {
                    pending.push(Task::Op(SETITEMS));
                    pending.push(Task::Op(MARK));
                    in_batch = 0;
                }
                pending.push(Task::Key(key));
                pending.push(Task::Save(value));
                in_batch += 1;
            }
            pending.push(Task::Op(SETITEMS));
            if in_batch == BATCHSIZE {
                pending.push(Task::Op(MARK));
                pending.push(Task::Op(SETITEMS));
            }
        }
    }

    /// Saves a non-container value (containers are handled by `save_all`).
    fn save_scalar(&mut self, value: &'a Value) {
        match value {
            Value::Null => self.write(&[NONE]),
            Value::Bool(true) => self.write(&[NEWTRUE]),
            Value::Bool(false) => self.write(&[NEWFALSE]),
            Value::Number(number) => self.save_number(number),
            Value::String(text) => self.save_str(text, false),
            Value::Array(_) | Value::Object(_) => {}
        }
    }

    /// JSON numbers without fraction or exponent are Python ints, all others floats.
    fn save_number(&mut self, number: &Number) {
        if let Some(int) = number.as_i64() {
            self.save_int(i128::from(int));
        } else if let Some(int) = number.as_u64() {
            self.save_int(i128::from(int));
        } else {
            // Only reachable for floats, or (with serde_json's `arbitrary_precision` feature)
            // for integers beyond 64 bits, whose text is then kept verbatim.
            let text = number.to_string();
            let digits = text.strip_prefix('-').unwrap_or(&text);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                self.save_long_decimal(text.starts_with('-'), digits);
            } else {
                let float = number
                    .as_f64()
                    .or_else(|| text.parse().ok())
                    .unwrap_or(f64::NAN);
                // save_float: BINFLOAT with the IEEE 754 double in big-endian order.
                let mut op = [BINFLOAT, 0, 0, 0, 0, 0, 0, 0, 0];
                op[1..].copy_from_slice(&float.to_be_bytes());
                self.write(&op);
            }
        }
    }

    /// `save_long`: values that fit in a C int32 use BININT1 (0..=255), BININT2 (256..=65535)
    /// or BININT (everything else, including all negatives); larger ones use LONG1.
    fn save_int(&mut self, int: i128) {
        if let Ok(small) = i32::try_from(int) {
            let bytes = small.to_le_bytes();
            if bytes[2] != 0 || bytes[3] != 0 {
                self.write(&[BININT, bytes[0], bytes[1], bytes[2], bytes[3]]);
            } else if bytes[1] != 0 {
                self.write(&[BININT2, bytes[0], bytes[1]]);
            } else {
                self.write(&[BININT1, bytes[0]]);
            }
        } else {
            self.save_long_bytes(&minimal_twos_complement(int.to_le_bytes().to_vec()));
        }
    }

    /// Big integer given as decimal digits (only with `arbitrary_precision`).
    fn save_long_decimal(&mut self, negative: bool, digits: &str) {
        if let Ok(int) = digits.parse::<i128>() {
            self.save_int(if negative { -int } else { int });
            return;
        }
        // Magnitude in little-endian base 256, built by repeated multiply-add.
        let mut magnitude: Vec<u8> = Vec::new();
        for digit in digits.bytes() {
            // The caller passes ASCII digits only; anything else is skipped rather than panicking.
            let mut carry = u16::from(digit.wrapping_sub(b'0'));
            if carry > 9 {
                continue;
            }
            for byte in &mut magnitude {
                // At most 255 * 10 + 9, so the high byte is the next carry.
                let [low, high] = (u16::from(*byte) * 10 + carry).to_le_bytes();
                *byte = low;
                carry = u16::from(high);
            }
            if let [low, 0] = carry.to_le_bytes() {
                if low != 0 {
                    magnitude.push(low);
                }
            }
        }
        // One extra byte so the sign bit is free, then two's complement negation if needed.
        magnitude.push(0);
        if negative {
            let mut carry = true;
            for byte in &mut magnitude {
                let (sum, overflow) = (!*byte).overflowing_add(u8::from(carry));
                *byte = sum;
                carry = overflow;
            }
        }
        self.save_long_bytes(&minimal_twos_complement(magnitude));
    }

    /// LONG1 (length < 256) or LONG4 with little-endian two's complement bytes.
    fn save_long_bytes(&mut self, bytes: &[u8]) {
        if let Ok(len) = u8::try_from(bytes.len()) {
            self.write(&[LONG1, len]);
        } else {
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            let mut op = [LONG4, 0, 0, 0, 0];
            op[1..].copy_from_slice(&len.to_le_bytes());
            self.write(&op);
        }
        self.write(bytes);
    }

    /// `save_unicode`, preceded by the memo lookup `save()` does for non-atomic objects.
    ///
    /// Identity follows what `json.loads` builds: CPython caches the empty string and all
    /// one-character strings below U+0100, so every occurrence is one object; dict keys are
    /// deduplicated by the scanner's per-document key memo; every other string value is a fresh
    /// object and is written out again in full.
    fn save_str(&mut self, text: &'a str, is_key: bool) {
        let mut chars = text.chars();
        let singleton = match (chars.next(), chars.next()) {
            (None, _) => true,
            (Some(only), None) => u32::from(only) < 256,
            _ => false,
        };
        let seen = if singleton {
            self.singletons.get(text)
        } else if is_key {
            self.keys.get(text)
        } else {
            None
        };
        if let Some(&index) = seen {
            self.memo_get(index);
            return;
        }
        // write_unicode_binary: SHORT_BINUNICODE up to 255 bytes, BINUNICODE up to u32::MAX,
        // BINUNICODE8 beyond.
        let payload = text.as_bytes();
        let len = payload.len();
        let mut header = Vec::with_capacity(9);
        if let Ok(short) = u8::try_from(len) {
            header.extend_from_slice(&[SHORT_BINUNICODE, short]);
        } else if let Ok(medium) = u32::try_from(len) {
            header.push(BINUNICODE);
            header.extend_from_slice(&medium.to_le_bytes());
        } else {
            header.push(BINUNICODE8);
            header.extend_from_slice(&(len as u64).to_le_bytes());
        }
        self.write_bytes(&header, payload);
        let index = self.memo_put();
        if singleton {
            self.singletons.insert(text, index);
        } else if is_key {
            self.keys.insert(text, index);
        }
    }

    /// `_Pickler_write_bytes`: payloads of at least `FRAME_SIZE_TARGET` bytes commit the open
    /// frame and are written (header included) outside any frame; the next write opens a new one.
    fn write_bytes(&mut self, header: &[u8], payload: &[u8]) {
        if payload.len() >= FRAME_SIZE_TARGET {
            self.commit_frame();
            self.framing = false;
            self.write(header);
            self.write(payload);
            self.framing = true;
        } else {
            self.write(header);
            self.write(payload);
        }
    }
}

/// Trims redundant sign-extension bytes from little-endian two's complement, as `save_long`'s
/// `nbits / 8 + 1` sizing plus its one-byte trim for negatives amounts to.
fn minimal_twos_complement(mut bytes: Vec<u8>) -> Vec<u8> {
    while bytes.len() > 1 {
        let top = bytes[bytes.len() - 1];
        let next_sign = bytes[bytes.len() - 2] & 0x80;
        if (top == 0 && next_sign == 0) || (top == 0xff && next_sign != 0) {
            bytes.pop();
        } else {
            break;
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Decodes the hex of a pickle as printed by python3's `pickle.dumps(...).hex()`.
    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("valid hex"))
            .collect()
    }

    fn pickled(json_text: &str) -> Vec<u8> {
        dumps(&serde_json::from_str(json_text).expect("valid JSON"))
    }

    #[test]
    fn scalars_match_python() {
        // Expected bytes from `pickle.dumps(json.loads(text), protocol=4).hex()` on Python 3.11.7.
        let cases = [
            ("10", "80044b0a2e"),
            ("null", "80044e2e"),
            ("true", "8004882e"),
            ("false", "8004892e"),
            ("256", "80049504000000000000004d00012e"),
            ("65536", "80049506000000000000004a000001002e"),
            ("-1", "80049506000000000000004affffffff2e"),
            (
                "-9223372036854775808",
                "8004950b000000000000008a0800000000000000802e",
            ),
            (
                "18446744073709551615",
                "8004950c000000000000008a09ffffffffffffffff002e",
            ),
            ("100.0", "8004950a000000000000004740590000000000002e"),
            ("1e2", "8004950a000000000000004740590000000000002e"),
            ("1.0", "8004950a00000000000000473ff00000000000002e"),
            ("-0.0", "8004950a000000000000004780000000000000002e"),
            ("1e308", "8004950a00000000000000477fe1ccf385ebc8a02e"),
            ("5e-324", "8004950a000000000000004700000000000000012e"),
        ];
        for (text, hex) in cases {
            assert_eq!(pickled(text), unhex(hex), "{text}");
        }
    }

    #[test]
    fn negative_zero_literal_follows_serde_json_number_kind() {
        // serde_json parses `-0` as f64 -0.0 (JSON text `-0.0`, a Python float); with its
        // `arbitrary_precision` feature it stays the integer text `-0` (a Python int 0).
        let value: Value = serde_json::from_str("-0").expect("valid JSON");
        let expected = if value.is_f64() {
            "8004950a000000000000004780000000000000002e"
        } else {
            "80044b002e"
        };
        assert_eq!(dumps(&value), unhex(expected));
    }

    #[test]
    fn strings_match_python() {
        let cases = [
            ("\"\"", "80049504000000000000008c00942e"),
            ("\"a\"", "80049505000000000000008c0161942e"),
            ("\"😀\"", "80049508000000000000008c04f09f9880942e"),
            ("\"e\\u0301\"", "80049507000000000000008c0365cc81942e"),
        ];
        for (text, hex) in cases {
            assert_eq!(pickled(text), unhex(hex), "{text}");
        }
    }

    #[test]
    fn containers_match_python() {
        let cases = [
            ("[]", "80045d942e"),
            ("{}", "80047d942e"),
            ("[1]", "80049506000000000000005d944b01612e"),
            ("[1,2]", "80049509000000000000005d94284b014b02652e"),
            ("{\"a\":1}", "8004950a000000000000007d948c0161944b01732e"),
        ];
        for (text, hex) in cases {
            assert_eq!(pickled(text), unhex(hex), "{text}");
        }
    }

    #[test]
    fn memo_references_follow_json_loads_identity() {
        // Equal non-singleton values are distinct objects: written twice.
        assert_eq!(
            pickled("[\"ab\",\"ab\"]"),
            unhex("8004950f000000000000005d94288c026162948c02616294652e")
        );
        // One-character Latin-1 strings are CPython singletons: BINGET on reuse.
        assert_eq!(
            pickled("[\"a\",\"a\"]"),
            unhex("8004950b000000000000005d94288c0161946801652e")
        );
        // Equal keys share one object through json's key memo.
        assert_eq!(
            pickled("[{\"ab\":1},{\"ab\":2}]"),
            unhex("80049516000000000000005d94287d948c026162944b01737d9468024b0273652e")
        );
    }

    #[test]
    fn memo_indices_from_256_use_long_binget() {
        let first: Map<String, Value> = (0..300).map(|i| (format!("k{i}"), json!(0))).collect();
        let bytes = dumps(&json!([first, {"k299": 1}]));
        // From python3: k299 is memo index 301 (list 0, dict 1, keys 2..=301).
        assert_eq!(bytes.len(), 2620);
        assert_eq!(bytes[bytes.len() - 12..], unhex("7d946a2d0100004b0173652e"));
    }

    #[test]
    fn dict_of_exactly_1000_items_ends_with_an_empty_batch() {
        let map: Map<String, Value> = (0..1000).map(|i| (i.to_string(), json!(i))).collect();
        let bytes = dumps(&Value::Object(map));
        // From python3: `... SETITEMS MARK SETITEMS STOP`, 8652 bytes in all.
        assert_eq!(bytes.len(), 8652);
        assert_eq!(bytes[bytes.len() - 6..], unhex("e7037528752e"));
    }

    #[test]
    fn short_binunicode_ends_at_255_bytes() {
        let bytes = dumps(&json!(["x".repeat(255), "x".repeat(256)]));
        assert_eq!(bytes.len(), 536);
        assert_eq!(
            bytes[..20],
            unhex("8004950d020000000000005d94288cff78787878")
        );
        assert_eq!(bytes[270..285], unhex("789458000100007878787878787878"));
    }

    #[test]
    fn strings_of_64_kib_bypass_framing() {
        let bytes = dumps(&json!("x".repeat(65_536)));
        assert_eq!(bytes.len(), 65_545);
        assert_eq!(bytes[..8], unhex("8004580000010078"));
        // MEMOIZE + STOP is under FRAME_SIZE_MIN, so it stays unframed.
        assert_eq!(bytes[bytes.len() - 4..], unhex("7878942e"));

        let bytes = dumps(&json!("x".repeat(65_535)));
        assert_eq!(bytes.len(), 65_553);
        assert_eq!(bytes[..16], unhex("800495060001000000000058ffff0000"));
        assert_eq!(bytes[bytes.len() - 4..], unhex("7878942e"));
    }

    #[test]
    fn big_decimal_integers_use_long1_and_long4() {
        // From python3: `pickle.dumps(n, protocol=2)[2:-1].hex()`.
        let cases = [
            (
                "10000000000000000000000000000000000000000",
                false,
                "8a11000000000061f5b9abbfa45cc3f129631d",
            ),
            (
                "10000000000000000000000000000000000000000",
                true,
                "8a1100000000009f0a4654405ba33c0ed69ce2",
            ),
            (
                "43556142965880123323311949751266331066368",
                true,
                "8a110000000000000000000000000000000080",
            ),
            (
                "43556142965880123323311949751266331066367",
                false,
                "8a11ffffffffffffffffffffffffffffffff7f",
            ),
            (
                "43556142965880123323311949751266331066368",
                false,
                "8a12000000000000000000000000000000008000",
            ),
            (
                "43556142965880123323311949751266331066369",
                true,
                "8a12ffffffffffffffffffffffffffffffff7fff",
            ),
            ("9223372036854775808", true, "8a080000000000000080"),
        ];
        for (digits, negative, hex) in cases {
            let mut pickler = Pickler::default();
            pickler.save_long_decimal(negative, digits);
            assert_eq!(pickler.out, unhex(hex), "{digits} negative={negative}");
        }
        let huge = format!("1{}", "0".repeat(700));
        let mut pickler = Pickler::default();
        pickler.save_long_decimal(false, &huge);
        assert_eq!(pickler.out.len(), 296);
        assert_eq!(pickler.out[..6], unhex("8b2301000000"));
        assert_eq!(pickler.out[293..], unhex("c9c628"));
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let mut value = json!(1);
        for level in 0..1_000 {
            value = if level % 2 == 0 {
                Value::Array(vec![value])
            } else {
                let mut map = Map::new();
                map.insert("d".to_owned(), value);
                Value::Object(map)
            };
        }
        let bytes = dumps(&value);
        // From python3 (with a raised recursion limit).
        assert_eq!(bytes.len(), 4_016);
        assert_eq!(
            bytes[..24],
            unhex("800495a50f0000000000007d948c0164945d947d9468015d")
        );
        assert_eq!(bytes.last(), Some(&STOP));
    }
}
