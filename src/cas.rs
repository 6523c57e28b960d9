//! Content addressing: CIDs (lowercase hex SHA-512 of the raw bytes) and validation of the
//! `{cid, data, serialization_format}` items the clients send (protocol doc §3). Pure: it
//! turns request JSON into verified blobs ready for the store, or into the exact 400 bodies
//! the original server answers with.

use std::collections::HashMap;

use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha512};

use crate::error::ApiError;
use crate::ids::hex;
use crate::intern::{parse_digest, Cid, DigestBuild, DIGEST_LEN};
use crate::limits::VERIFIED_BYTES;
use crate::store::{Format, NewBlob};

/// The CID of `bytes`: 128 lowercase hex characters of their SHA-512 digest.
pub fn cid_of(bytes: &[u8]) -> String {
    hex(&Sha512::digest(bytes))
}

/// The SHA-512 digest of `bytes`, as a `Cid`.
pub fn cid_value(bytes: &[u8]) -> Cid {
    Cid::from_digest(Sha512::digest(bytes).into())
}

/// Standard padded base64, as Python's `base64.b64encode` writes it.
pub fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes base64 exactly as CPython's non-strict `binascii.a2b_base64` (behind
/// `base64.b64decode`) does: characters outside the alphabet are skipped, a complete pad
/// sequence ends the input, and only an unfinished quantum fails ("Incorrect padding").
pub fn decode_base64_lenient(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut quad_pos, mut pads, mut left) = (0u8, 0u8, 0u8);
    for &c in text.as_bytes() {
        if c == b'=' {
            pads += 1;
            if quad_pos >= 2 && quad_pos + pads >= 4 {
                return Some(out);
            }
            continue;
        }
        let Some(v) = value(c) else { continue };
        pads = 0;
        match quad_pos {
            0 => left = v,
            1 => {
                out.push((left << 2) | (v >> 4));
                left = v & 0x0f;
            }
            2 => {
                out.push((left << 4) | (v >> 2));
                left = v & 0x03;
            }
            _ => {
                out.push((left << 6) | v);
                left = 0;
            }
        }
        quad_pos = (quad_pos + 1) % 4;
    }
    (quad_pos == 0).then_some(out)
}

/// The serialization format named by an item's `serialization_format` field.
/// Absent or null means dill, the Python client's only format.
pub fn parse_format(value: Option<&Value>) -> Result<Format, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Format::Dill),
        Some(Value::String(s)) if s == "dill" => Ok(Format::Dill),
        Some(Value::String(s)) if s == "json" => Ok(Format::Json),
        Some(other) => Err(ApiError::bad_request(
            "invalid_serialization_format",
            format!("serialization_format must be 'dill' or 'json', got {other}"),
        )),
    }
}

/// Verifies one payload (`cid` plus `data`) and returns the blob to store.
///
/// Returns `Ok(None)` when there is nothing to store: no `data`, or a `cid` that is not a
/// string (the original skips those too). Errors are the original's 400 bodies:
/// `invalid_serialization_format`, `invalid_json`, `invalid_dill`, `cid_mismatch`.
pub fn verify_payload(
    cid: Option<&Value>,
    data: Option<&Value>,
    format: Option<&Value>,
) -> Result<Option<NewBlob>, ApiError> {
    let data = match data {
        None | Some(Value::Null) => Data::Missing,
        Some(Value::String(text)) => Data::Text(text),
        Some(_) => Data::NotText,
    };
    verify_parts(cid.and_then(Value::as_str), data, format)
}

/// A payload's `data`, as far as verifying it goes.
#[derive(Clone, Copy, Debug)]
pub enum Data<'a> {
    /// Absent or null: nothing to store.
    Missing,
    Text(&'a str),
    /// Neither a string nor null: refused.
    NotText,
}

/// [`verify_payload`] on the parts of a payload: `cid` only when it is a string.
pub fn verify_parts(
    cid: Option<&str>,
    data: Data<'_>,
    format: Option<&Value>,
) -> Result<Option<NewBlob>, ApiError> {
    let Some(cid) = cid else {
        return Ok(None);
    };
    if let Data::Missing = data {
        return Ok(None);
    }
    let format = parse_format(format)?;
    let bytes = match (format, data) {
        (Format::Json, Data::Text(text)) if serde_json::from_str::<Value>(text).is_ok() => {
            text.as_bytes().to_vec()
        }
        (Format::Json, _) => {
            return Err(ApiError::bad_request(
                "invalid_json",
                "Invalid JSON payload",
            ));
        }
        (Format::Dill, Data::Text(text)) => match decode_base64_lenient(text) {
            Some(bytes) => bytes,
            None => {
                return Err(ApiError::bad_request(
                    "invalid_dill",
                    "Invalid dill payload",
                ))
            }
        },
        (Format::Dill, _) => {
            return Err(ApiError::bad_request(
                "invalid_dill",
                "Invalid dill payload",
            ));
        }
    };
    let actual = cid_value(&bytes);
    if parse_digest(cid).as_ref() != Some(actual.digest()) {
        return Err(ApiError::bad_request(
            "cid_mismatch",
            "Provided CID does not match SHA-512 hash of data",
        )
        .with("expected_cid", actual.hex())
        .with("provided_cid", cid));
    }
    Ok(Some(NewBlob {
        cid: actual,
        bytes,
        format: Some(format),
    }))
}

/// Payload texts already verified against their CID. The Python client sends an argument's
/// data every time it passes it, so the same text arrives again and again: when it is
/// byte-for-byte a text verified before, decoding and hashing it again can only give the same
/// answer. Bounded by the bytes of text it holds; it forgets everything when full.
#[derive(Default)]
pub struct Verified {
    /// By the first eight bytes of the digest: the digest, the format and the text.
    texts: HashMap<u64, VerifiedText, DigestBuild>,
    bytes: usize,
}

type VerifiedText = (Box<[u8; DIGEST_LEN]>, Format, Box<str>);

impl Verified {
    /// The digest of a text verified before for this CID and format.
    pub fn knows(&self, cid: &str, format: Format, text: &str) -> Option<[u8; DIGEST_LEN]> {
        let digest = parse_digest(cid)?;
        let (known, f, t) = self.texts.get(&prefix(&digest))?;
        (**known == digest && *f == format && &**t == text).then_some(digest)
    }

    /// Remembers a text whose digest was checked.
    pub fn remember(&mut self, digest: &[u8; DIGEST_LEN], format: Format, text: &str) {
        if text.len() > VERIFIED_BYTES / 64 {
            return;
        }
        if self.bytes + text.len() > VERIFIED_BYTES {
            self.texts.clear();
            self.bytes = 0;
        }
        let old = self
            .texts
            .insert(prefix(digest), (Box::new(*digest), format, text.into()));
        self.bytes = self.bytes + text.len() - old.map_or(0, |(_, _, t)| t.len());
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

fn prefix(digest: &[u8; DIGEST_LEN]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verifies an item object (`{"cid", "data"?, "serialization_format"?}`); see [`verify_payload`].
    fn verify_item(item: &Value) -> Result<Option<NewBlob>, ApiError> {
        verify_payload(
            item.get("cid"),
            item.get("data"),
            item.get("serialization_format"),
        )
    }
    use serde_json::json;

    #[test]
    fn cid_is_sha512_hex() {
        assert_eq!(
            cid_of(b"abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
    }

    #[test]
    fn verified_texts_are_matched_exactly_and_bounded() {
        let mut v = Verified::default();
        let cid = cid_of(b"abc");
        let digest = parse_digest(&cid).unwrap();
        assert_eq!(v.knows(&cid, Format::Dill, "YWJj"), None);
        v.remember(&digest, Format::Dill, "YWJj");
        assert_eq!(v.knows(&cid, Format::Dill, "YWJj"), Some(digest));
        assert_eq!(v.knows(&cid, Format::Dill, "YWJj\n"), None, "another text");
        assert_eq!(v.knows(&cid, Format::Json, "YWJj"), None, "another format");
        assert_eq!(
            v.knows(&cid_of(b"abd"), Format::Dill, "YWJj"),
            None,
            "another CID"
        );
        // Filling it past its bound forgets everything, and a huge text is never kept.
        let big = "A".repeat(VERIFIED_BYTES / 64);
        for i in 0..70u32 {
            let d = parse_digest(&cid_of(&i.to_le_bytes())).unwrap();
            v.remember(&d, Format::Dill, &big);
            assert!(v.bytes <= VERIFIED_BYTES);
        }
        assert!(v.len() < 70);
        let mut v = Verified::default();
        let huge = "A".repeat(VERIFIED_BYTES / 64 + 1);
        v.remember(&digest, Format::Dill, &huge);
        assert_eq!(v.knows(&cid, Format::Dill, &huge), None);
    }

    #[test]
    fn base64_decoding_is_lenient_like_python() {
        assert_eq!(
            decode_base64_lenient("gARLCi4="),
            Some(vec![0x80, 4, 0x4b, 10, 0x2e])
        );
        assert_eq!(
            decode_base64_lenient("gARL\nCi4="),
            Some(vec![0x80, 4, 0x4b, 10, 0x2e])
        );
        assert_eq!(
            decode_base64_lenient("gAR!LCi4="),
            Some(vec![0x80, 4, 0x4b, 10, 0x2e])
        );
        assert_eq!(decode_base64_lenient("QQ"), None, "missing padding fails");
        assert_eq!(decode_base64_lenient("QQ=="), Some(b"A".to_vec()));
        assert_eq!(
            decode_base64_lenient("QR=="),
            Some(b"A".to_vec()),
            "trailing bits ignored"
        );
        assert_eq!(decode_base64_lenient("QUJD="), Some(b"ABC".to_vec()));
        assert_eq!(decode_base64_lenient("Q"), None);
        assert_eq!(decode_base64_lenient(""), Some(vec![]));
        // Cases checked against CPython 3.11's base64.b64decode.
        assert_eq!(decode_base64_lenient("QQ==QUJD"), Some(b"A".to_vec()));
        assert_eq!(decode_base64_lenient("QQ="), None);
        assert_eq!(decode_base64_lenient("Q==="), None);
        assert_eq!(decode_base64_lenient("QQ=a="), Some(b"A\x06".to_vec()));
        assert_eq!(decode_base64_lenient("QUJ=D"), Some(b"AB".to_vec()));
    }

    #[test]
    fn verify_accepts_matching_dill_and_json_items() {
        let bytes = [0x80, 4, 0x4b, 10, 0x2e];
        let item = json!({"cid": cid_of(&bytes), "data": "gARLCi4="});
        let blob = verify_item(&item).unwrap().unwrap();
        assert_eq!(blob.bytes, bytes);
        assert_eq!(blob.format, Some(Format::Dill));

        let item =
            json!({"cid": cid_of(b"[1, 2]"), "data": "[1, 2]", "serialization_format": "json"});
        let blob = verify_item(&item).unwrap().unwrap();
        assert_eq!(blob.bytes, b"[1, 2]");
        assert_eq!(blob.format, Some(Format::Json));
    }

    #[test]
    fn verify_skips_items_without_data_or_string_cid() {
        assert!(verify_item(&json!({"cid": "x"})).unwrap().is_none());
        assert!(verify_item(&json!({"cid": 5, "data": "gARLCi4="}))
            .unwrap()
            .is_none());
        assert!(verify_item(&json!({"cid": "x", "data": null}))
            .unwrap()
            .is_none());
    }

    #[test]
    fn verify_reports_the_original_error_bodies() {
        let err = verify_item(&json!({"cid": "abc", "data": "gARLCi4="})).unwrap_err();
        assert_eq!(err.status, 400);
        assert_eq!(err.code(), "cid_mismatch");
        assert_eq!(err.body["provided_cid"], "abc");
        assert_eq!(err.body["expected_cid"], cid_of(&[0x80, 4, 0x4b, 10, 0x2e]));

        let err = verify_item(&json!({"cid": "abc", "data": "Q"})).unwrap_err();
        assert_eq!(err.code(), "invalid_dill");
        let err = verify_item(&json!({"cid": "a", "data": "{", "serialization_format": "json"}))
            .unwrap_err();
        assert_eq!(err.code(), "invalid_json");
        let err = verify_item(&json!({"cid": "a", "data": "x", "serialization_format": "yaml"}))
            .unwrap_err();
        assert_eq!(err.code(), "invalid_serialization_format");
    }
}
