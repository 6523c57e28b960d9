//! A small bignum for display: decimal text of `LONG1`/`LONG4` little-endian two's complement
//! bytes, by repeated division by 10^9 over 32-bit limbs (quadratic, fine for the capped size).
//!
//! Limit: magnitudes above [`MAX_DECIMAL_BYTES`] bytes (about 20,000 decimal digits) are not
//! converted; they render as a clearly marked `<int of N bits>` form so time stays bounded.

use crate::limits::MAX_DECIMAL_BYTES;

/// Splits two's complement little-endian bytes into (negative, magnitude little-endian bytes).
pub fn magnitude(raw: &[u8]) -> (bool, Vec<u8>) {
    let neg = raw.last().is_some_and(|&b| b & 0x80 != 0);
    let mut mag = raw.to_vec();
    if neg {
        // Two's complement negate: invert and add one.
        let mut carry = true;
        for b in &mut mag {
            *b = !*b;
            if carry {
                let (v, c) = b.overflowing_add(1);
                *b = v;
                carry = c;
            }
        }
    }
    while mag.last() == Some(&0) {
        mag.pop();
    }
    (neg, mag)
}

/// Decimal text of two's complement little-endian bytes (`int.from_bytes(raw, 'little',
/// signed=True)`), or the marked form when too large.
pub fn to_decimal(raw: &[u8]) -> String {
    let (neg, mag) = magnitude(raw);
    if mag.len() > MAX_DECIMAL_BYTES {
        let bits = mag.len() * 8 - mag.last().map_or(8, |b| b.leading_zeros() as usize);
        return format!(
            "<int of {bits} bits{}>",
            if neg { ", negative" } else { "" }
        );
    }
    // Little-endian u32 limbs.
    let mut limbs: Vec<u32> = mag
        .chunks(4)
        .map(|c| {
            let mut a = [0u8; 4];
            a[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(a)
        })
        .collect();
    let mut chunks: Vec<u32> = Vec::new();
    while !limbs.is_empty() {
        let mut rem: u64 = 0;
        for limb in limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }
    let mut out = String::with_capacity(chunks.len() * 9 + 1);
    if neg {
        out.push('-');
    }
    match chunks.split_last() {
        None => out.push('0'),
        Some((first, rest)) => {
            out.push_str(&first.to_string());
            for c in rest.iter().rev() {
                out.push_str(&format!("{c:09}"));
            }
        }
    }
    out
}

/// The value as u128 when it is non-negative and fits (e.g. a UUID's int).
pub fn to_u128(raw: &[u8]) -> Option<u128> {
    let (neg, mag) = magnitude(raw);
    if neg || mag.len() > 16 {
        return None;
    }
    let mut a = [0u8; 16];
    a[..mag.len()].copy_from_slice(&mag);
    Some(u128::from_le_bytes(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        assert_eq!(to_decimal(&[]), "0");
        assert_eq!(to_decimal(&[0xff]), "-1");
        assert_eq!(to_decimal(&[0x00, 0x80]), "-32768");
        let v: i128 = -123_456_789_012_345_678_901_234_567;
        assert_eq!(to_decimal(&v.to_le_bytes()), v.to_string());
        let v: u128 = u128::MAX;
        let mut b = v.to_le_bytes().to_vec();
        b.push(0);
        assert_eq!(to_decimal(&b), v.to_string());
        assert_eq!(to_u128(&b), Some(u128::MAX));
    }

    #[test]
    fn big_is_fast_and_marked() {
        // 10**4300 has 4301 digits; about 1786 bytes.
        let mut b = vec![0u8; 1786];
        b.push(1);
        let s = to_decimal(&b);
        assert!(s.len() > 4000);
        let huge = vec![0x11u8; MAX_DECIMAL_BYTES + 1];
        assert!(to_decimal(&huge).starts_with("<int of "));
    }
}
