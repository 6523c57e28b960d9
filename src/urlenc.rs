//! Percent-encoding for URL paths and queries: decoding what a client sent, encoding names and
//! ids written into links.

use std::fmt::Write as _;

/// Decodes `%XX` escapes; invalid escapes stay as they are, invalid UTF-8 is replaced.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits a query string into decoded pairs (`+` is a space, as in forms; a key without `=`
/// has an empty value).
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    let dec = |s: &str| percent_decode(&s.replace('+', " "));
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (dec(k), dec(v))
        })
        .collect()
}

/// Percent-encodes a path segment: every byte but unreserved ASCII.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_split_into_decoded_pairs() {
        assert_eq!(
            parse_query("limit=5&function=a+b&x&&code=a%2Bb"),
            [
                ("limit".into(), "5".into()),
                ("function".into(), "a b".into()),
                ("x".into(), String::new()),
                ("code".into(), "a+b".into()),
            ]
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("Type.__call__"), "Type.__call__");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%zz1"), "%zz1");
        assert_eq!(percent_decode("x%2"), "x%2");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }

    #[test]
    fn path_segments_are_encoded_and_come_back() {
        assert_eq!(encode_segment("Type.__call__"), "Type.__call__");
        assert_eq!(encode_segment("a b/c\"<"), "a%20b%2Fc%22%3C");
        assert_eq!(percent_decode(&encode_segment("é ü/%")), "é ü/%");
    }
}
