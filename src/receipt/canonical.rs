//! Canonical JSON, byte-identical to the reference's
//! `json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"))`.
//!
//! Keys are sorted by code point (serde_json's `Map` is a `BTreeMap` because
//! the `preserve_order` feature is off), strings are escaped the way Python
//! does (short forms for `\b \f \n \r \t`, lowercase `\u00xx` for the other
//! control characters, everything else raw UTF-8), and integers keep every
//! digit (serde_json's `arbitrary_precision` keeps the source text).

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

/// Canonical bytes of `value` (no trailing newline).
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// Canonical bytes of an object without one of its keys (the checksum
/// pre-image), without copying the object.
pub fn to_vec_without(map: &serde_json::Map<String, Value>, skip: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.push(b'{');
    let mut first = true;
    for (key, item) in map.iter().filter(|(k, _)| k.as_str() != skip) {
        if !first {
            out.push(b',');
        }
        first = false;
        write_string(&mut out, key);
        out.push(b':');
        write_value(&mut out, item);
    }
    out.push(b'}');
    out
}

/// Canonical bytes of an object, and the byte range whose removal gives
/// [`to_vec_without`]`(map, skip)` (`None` when the key is absent): one
/// serialisation serves both the canonical-form check and the checksum.
pub fn object_with_hole(
    map: &serde_json::Map<String, Value>,
    skip: &str,
) -> (Vec<u8>, Option<std::ops::Range<usize>>) {
    let mut out = Vec::with_capacity(2048);
    out.push(b'{');
    let mut hole = None;
    let mut hole_is_first = false;
    for (i, (key, item)) in map.iter().enumerate() {
        let comma = out.len();
        if i > 0 {
            out.push(b',');
        }
        if hole_is_first {
            // The skipped key came first: its following comma goes with it.
            if let Some(range) = &mut hole {
                let range: &mut std::ops::Range<usize> = range;
                range.end = comma + 1;
            }
            hole_is_first = false;
        }
        let start = out.len();
        write_string(&mut out, key);
        out.push(b':');
        write_value(&mut out, item);
        if key == skip {
            hole = Some(if i > 0 {
                comma..out.len()
            } else {
                start..out.len()
            });
            hole_is_first = i == 0;
        }
    }
    out.push(b'}');
    (out, hole)
}

/// Canonical text of `value`.
pub fn to_string(value: &Value) -> String {
    // The writer only ever emits valid UTF-8.
    String::from_utf8(to_vec(value)).unwrap_or_default()
}

/// Lowercase hex SHA-256 of arbitrary bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex32(&Sha256::digest(bytes).into())
}

/// Lowercase hex of a 32-byte digest, written in one go (`hex::encode`
/// pushes it char by char; verification encodes one per event).
pub fn hex32(digest: &[u8; 32]) -> String {
    let mut text = [0u8; 64];
    hex::encode_to_slice(digest, &mut text).expect("64 hex digits for 32 bytes");
    std::str::from_utf8(&text).expect("hex digits").to_owned()
}

/// Lowercase hex SHA-256 of the canonical form of `value`.
pub fn digest(value: &Value) -> String {
    sha256_hex(&to_vec(value))
}

/// True when `n` was written as an integer (no fraction, no exponent).
pub fn is_integer(n: &Number) -> bool {
    integer_text(n).is_some()
}

/// The decimal text of an integer number, or `None` for a float.
pub fn integer_text(n: &Number) -> Option<&str> {
    let text = n.as_str();
    let digits = text.strip_prefix('-').unwrap_or(text);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(text)
}

/// True when the value contains a float anywhere (floats are never valid in
/// our inputs or receipts; see DEVIATIONS.md).
pub fn contains_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => !is_integer(n),
        Value::Array(items) => items.iter().any(contains_float),
        Value::Object(map) => map.values().any(contains_float),
        _ => false,
    }
}

/// The most decimal digits an integer may have: Python's default
/// `sys.int_info.default_max_str_digits`. The reference cannot parse a
/// longer one (it can then neither verify nor write the run), so "either
/// tool verifies what the other wrote" needs this bound on what we accept.
pub const MAX_INTEGER_DIGITS: usize = 4300;

/// Whether `value` holds an integer of more than [`MAX_INTEGER_DIGITS`]
/// digits.
pub fn contains_oversized_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            let text = n.to_string();
            text.trim_start_matches('-').len() > MAX_INTEGER_DIGITS
        }
        Value::Array(items) => items.iter().any(contains_oversized_integer),
        Value::Object(map) => map.values().any(contains_oversized_integer),
        _ => false,
    }
}

/// The canonical form as a `serde_json` formatter. serde_json's compact
/// output already is Python's `separators=(",", ":")`, and its string
/// escapes are Python's with `ensure_ascii=False` (`\"`, `\\`, the short
/// forms `\b \f \n \r \t`, lowercase `\u00xx` for the other control
/// characters, everything else raw UTF-8). What it adds: an integer is
/// written as its source text (`arbitrary_precision` keeps every digit),
/// except that `-0` is `0`, as Python parses and prints it. Keys come out
/// sorted by code point because serde_json's `Map` is a `BTreeMap`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Canonical;

impl serde_json::ser::Formatter for Canonical {
    fn write_number_str<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: &str,
    ) -> std::io::Result<()> {
        match value.strip_prefix('-') {
            // Python parses "-0" as the int 0 and prints "0". (JSON forbids
            // leading zeros, so any other integer text is already the
            // shortest decimal form; floats never pass validation and are
            // written as they came.)
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b == b'0') => {
                writer.write_all(b"0")
            }
            _ => writer.write_all(value.as_bytes()),
        }
    }
}

/// Canonical bytes of any serialisable value, appended to `out`.
pub fn write_serialize<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let mut serializer = serde_json::Serializer::with_formatter(out, Canonical);
    // Writing into a Vec cannot fail, and our values have string keys.
    value
        .serialize(&mut serializer)
        .expect("canonical JSON of a value with string keys");
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    write_serialize(out, value);
}

pub(crate) fn write_string(out: &mut Vec<u8>, s: &str) {
    write_serialize(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(text: &str) -> String {
        to_string(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn sorts_keys_and_drops_whitespace() {
        assert_eq!(
            canon(r#"{ "b": 1, "a": [ true, null ] }"#),
            r#"{"a":[true,null],"b":1}"#
        );
    }

    #[test]
    fn escapes_like_python() {
        let v = json!("q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}/\u{2028}é✓😀");
        assert_eq!(
            to_string(&v),
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}/\u{2028}é✓😀\""
        );
    }

    #[test]
    fn keeps_big_integers_and_normalises_negative_zero() {
        assert_eq!(
            canon("[100000000000000000000000000000,-0,-12]"),
            "[100000000000000000000000000000,0,-12]"
        );
    }

    #[test]
    fn sorts_non_bmp_keys_by_code_point() {
        // U+FF5E sorts before U+1F600 by code point and by UTF-8 bytes, but
        // after it by UTF-16 units: Python (and we) use code points.
        assert_eq!(canon(r#"{"😀":1,"～":2}"#), "{\"～\":2,\"😀\":1}");
    }

    #[test]
    fn worked_example_evidence_digest() {
        let v = json!([{"exit_status":0,"kind":"log","summary":"compiler output seen"}]);
        assert_eq!(
            digest(&v),
            "bd6d4e1d37d148f790ff1bfe7b2784ba4d24c94fbad31cdeb749f02209c43611"
        );
    }

    #[test]
    fn the_hole_is_exactly_the_skipped_member() {
        for text in [
            r#"{"a":1,"checksum":"x","z":[1,{"b":2}]}"#,
            r#"{"checksum":"x","z":2}"#,
            r#"{"a":1,"checksum":"x"}"#,
            r#"{"checksum":"x"}"#,
            r#"{"a":1,"b":2}"#,
        ] {
            let Value::Object(map) = serde_json::from_str(text).unwrap() else {
                unreachable!()
            };
            let (full, hole) = object_with_hole(&map, "checksum");
            assert_eq!(full, to_vec(&Value::Object(map.clone())));
            let mut without = full.clone();
            if let Some(range) = hole {
                without.drain(range);
            }
            assert_eq!(without, to_vec_without(&map, "checksum"), "{text}");
        }
    }

    #[test]
    fn detects_floats() {
        assert!(contains_float(
            &serde_json::from_str("{\"a\":[1.0]}").unwrap()
        ));
        assert!(contains_float(&serde_json::from_str("1e2").unwrap()));
        let digits = |n: usize| format!("[{{\"exit_status\": -{}}}]", "9".repeat(n));
        let at_limit: Value = serde_json::from_str(&digits(MAX_INTEGER_DIGITS)).unwrap();
        let over: Value = serde_json::from_str(&digits(MAX_INTEGER_DIGITS + 1)).unwrap();
        assert!(!contains_oversized_integer(&at_limit));
        assert!(contains_oversized_integer(&over));
        assert!(!contains_float(
            &serde_json::from_str("{\"a\":[10,-3]}").unwrap()
        ));
    }
}

#[cfg(test)]
mod hex32_tests {
    #[test]
    fn hex32_is_hex_encode() {
        for seed in 0u8..=255 {
            let bytes: [u8; 32] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 7));
            assert_eq!(super::hex32(&bytes), hex::encode(bytes));
        }
    }
}
