//! Identifiers and clocks: UUID4 strings, random hex, float epoch seconds and UTC timestamps.
//! Every id the wire carries is made here, so their formats are in one place (protocol doc §1).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch as a float, like Python's `time.time()`.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `N` bytes of the OS random source (getrandom: `getrandom(2)` on Linux). Pause ids, call ids
/// and eval ids are capabilities (whoever knows one can resume or complete what it names), so
/// there is no fallback: if the OS cannot give random bytes, making an id fails (a panic,
/// answered 500) rather than making a guessable one.
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    if let Err(err) = getrandom::fill(&mut buf) {
        panic!("the OS random source failed ({err}): refusing to make a guessable id");
    }
    buf
}

/// 128 random bits (the secret part of a call id).
pub fn random_u128() -> u128 {
    u128::from_le_bytes(random_bytes::<16>())
}

/// A random version-4 UUID in its canonical lowercase hyphenated form.
pub fn uuid4() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut out = String::with_capacity(n * 2);
    let mut left = n;
    while left > 0 {
        let chunk = random_bytes::<16>();
        let take = left.min(16);
        out.push_str(&hex(&chunk[..take]));
        left -= take;
    }
    out
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// `YYYYmmdd-HHMMSS-ffffff` in UTC for the given epoch seconds (used in default db file names).
pub fn file_timestamp(epoch: f64) -> String {
    let micros_total = (epoch.max(0.0) * 1e6) as u64;
    let secs = micros_total / 1_000_000;
    let micros = micros_total % 1_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{micros:06}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `YYYY-mm-ddTHH:MM:SS.mmmZ` (ISO 8601, UTC) for the given epoch seconds.
pub fn utc_iso(epoch: f64) -> String {
    let millis_total = (epoch.max(0.0) * 1e3) as u64;
    let secs = millis_total / 1000;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        millis_total % 1000
    )
}

/// Howard Hinnant's days-to-civil algorithm: proleptic Gregorian date (year, month, day) of a
/// day count since 1970-01-01 (negative before it). The crate's one calendar conversion.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_count_to_gregorian_dates_both_sides_of_1970() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-25_508), (1900, 3, 1));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
    }

    #[test]
    fn utc_times_are_iso_8601() {
        assert_eq!(utc_iso(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_iso(1795311683.7845), "2026-11-22T01:41:23.784Z");
    }

    #[test]
    fn uuid4_has_canonical_shape() {
        let u = uuid4();
        assert_eq!(u.len(), 36);
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert_eq!(&parts[2][..1], "4");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(uuid4(), uuid4());
    }

    #[test]
    fn random_hex_has_requested_length() {
        assert_eq!(random_hex(16).len(), 32);
        assert_eq!(random_hex(40).len(), 80);
    }

    #[test]
    fn file_timestamp_formats_utc() {
        assert_eq!(file_timestamp(0.0), "19700101-000000-000000");
        // 2024-02-29T12:34:56.5Z
        assert_eq!(file_timestamp(1_709_210_096.5), "20240229-123456-500000");
    }
}
