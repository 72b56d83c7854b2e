//! Primitive value rules shared by every receipt and input check:
//! identifiers, SHA-256 hex, UTC timestamps and Python-style lengths.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;
use std::sync::OnceLock;

use super::canonical::is_integer;

fn timestamp_re() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"\A([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?Z\z",
        )
        .expect("static regex")
    })
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, ASCII only, full match. By hand:
/// verification asks it several times per event, and the regex crate's
/// cache pool is a lock the parsing threads shared (proptests hold it to
/// the regex).
pub fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=128).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// A newtype for text that meets one contract (`$check`: the identifier
/// contract, [`is_identifier`], or SHA-256 hex): built only by `parse` (or
/// from text the caller checked), so a value of the type is checked
/// wherever it goes; compared with and read as text.
macro_rules! checked_text_type {
    ($(#[$doc:meta])* $name:ident, $check:path, $contract:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// `text` as this type, if it meets its contract.
            pub fn parse(text: &str) -> Option<$name> {
                $check(text).then(|| $name(text.to_string()))
            }

            /// `text`, which the caller has checked against the contract
            /// already (a validated input, a verified receipt's field);
            /// checked again in debug builds.
            #[allow(dead_code)] // run ids and hashes are always parsed
            pub(crate) fn from_checked(text: &str) -> $name {
                debug_assert!($check(text), "{text:?} does not meet its contract");
                $name(text.to_string())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let text = String::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom($contract)
                })
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

checked_text_type!(
    /// A run id: what a run's directory `runs/<id>` is named by, so that
    /// no path of the store is ever built from an unchecked id (a `/` or
    /// `..` cannot be one).
    RunId,
    is_identifier,
    "a run id must match the identifier contract"
);

impl AsRef<std::path::Path> for RunId {
    fn as_ref(&self) -> &std::path::Path {
        self.0.as_ref()
    }
}

checked_text_type!(
    /// A lane id, as `lane-create` records it and every lane step names it.
    LaneId,
    is_identifier,
    "a lane id must match the identifier contract"
);

checked_text_type!(
    /// An agent id: the sub-agent a lane is assigned to.
    AgentId,
    is_identifier,
    "an agent id must match the identifier contract"
);

checked_text_type!(
    /// An identifier that names neither a run, a lane nor an agent: a
    /// topology component, a required check.
    Identifier,
    is_identifier,
    "an identifier must match the identifier contract"
);

checked_text_type!(
    /// A SHA-256 as the receipt writes it, 64 lowercase hex digits: an
    /// event's checksum, a receipt head.
    Sha256Hex,
    is_sha256_hex,
    "a SHA-256 must be 64 lowercase hex digits"
);

impl Sha256Hex {
    /// The SHA-256 of `bytes`.
    pub fn digest(bytes: &[u8]) -> Sha256Hex {
        Sha256Hex(super::canonical::sha256_hex(bytes))
    }
}

/// 64 lowercase hex characters.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The stored-value timestamp rule: the shape of `timestamp_re`, no
/// calendar check; by hand, as [`is_identifier`].
pub fn is_timestamp_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    if b.len() < 20 || b[b.len() - 1] != b'Z' {
        return false;
    }
    let fixed = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    let fraction = &b[19..b.len() - 1];
    fixed
        && (fraction.is_empty()
            || (fraction.len() >= 2
                && fraction[0] == b'.'
                && fraction[1..].iter().all(u8::is_ascii_digit)))
}

/// An instant with microsecond precision (extra fractional digits are
/// truncated, as the reference's parser does).
pub type Instant = DateTime<Utc>;

/// The command-argument timestamp rule: the stored shape AND a valid calendar
/// instant. Returns the instant.
pub fn parse_timestamp(s: &str) -> Option<Instant> {
    let caps = timestamp_re().captures(s)?;
    let num = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let (year, month, day) = (num(1)?, num(2)?, num(3)?);
    let (hour, minute, second) = (num(4)?, num(5)?, num(6)?);
    if year == 0 {
        return None;
    }
    let micros = match caps.get(7) {
        Some(fraction) => {
            let digits = &fraction.as_str()[1..];
            let mut padded: String = digits.chars().take(6).collect();
            while padded.len() < 6 {
                padded.push('0');
            }
            padded.parse::<u32>().ok()?
        }
        None => 0,
    };
    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    let time = date.and_hms_micro_opt(hour, minute, second, micros)?;
    // chrono accepts a leap second 60 via and_hms_micro_opt? It does not for
    // second 60 (only via nanosecond overflow), which matches Python.
    Some(time.and_utc())
}

/// Render "now" like the reference: microseconds, fraction dropped when zero.
pub fn format_now(now: Instant) -> String {
    let micros = now.timestamp_subsec_micros();
    if micros == 0 {
        now.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        format!("{}.{:06}Z", now.format("%Y-%m-%dT%H:%M:%S"), micros)
    }
}

/// Python `len()` of a string: code points.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// A JSON integer (not a bool, not a float). Returns it when it fits in i128;
/// bigger integers are `Some(i128::MAX)`/`Some(i128::MIN)` so range checks
/// behave like Python's unbounded comparisons.
pub fn as_int(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) if is_integer(n) => {
            let text = n.as_str();
            Some(text.parse::<i128>().unwrap_or(if text.starts_with('-') {
                i128::MIN
            } else {
                i128::MAX
            }))
        }
        _ => None,
    }
}

/// A string of at most `max` code points.
pub fn is_bounded_string(value: &Value, max: usize) -> bool {
    matches!(value, Value::String(s) if char_len(s) <= max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn ids_and_hashes_exist_only_checked() {
        assert_eq!(LaneId::parse("build-2").unwrap(), "build-2");
        for bad in ["", "../x", "a/b", "-lead", "x y"] {
            assert!(LaneId::parse(bad).is_none(), "{bad:?}");
            assert!(AgentId::parse(bad).is_none(), "{bad:?}");
        }
        // A checkpoint (or any JSON) cannot smuggle one in either.
        assert!(serde_json::from_str::<LaneId>("\"../x\"").is_err());
        let lane: LaneId = serde_json::from_str("\"api\"").unwrap();
        assert_eq!(serde_json::to_string(&lane).unwrap(), "\"api\"");
        let head = Sha256Hex::digest(b"abc");
        assert_eq!(
            head,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Sha256Hex::parse(&head).as_ref(), Some(&head));
        assert!(Sha256Hex::parse(&head.to_uppercase()).is_none());
        assert!(Sha256Hex::parse(&head[1..]).is_none());
    }

    #[test]
    fn a_run_id_names_one_directory_and_nothing_else() {
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "a b",
            "é",
            &"a".repeat(129),
        ] {
            assert_eq!(RunId::parse(bad), None, "{bad:?}");
        }
        let id = RunId::parse("20261206T110535Z-4651c2d9").unwrap();
        assert_eq!(id, "20261206T110535Z-4651c2d9");
        assert_eq!(
            std::path::Path::new("runs").join(&id).components().count(),
            2
        );
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"20261206T110535Z-4651c2d9\""
        );
        assert!(RunId::parse(&"a".repeat(128)).is_some());
    }

    #[test]
    fn identifiers() {
        for good in ["a", "a..b", "A-1_x.y", &"x".repeat(128)] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".x",
            "a/b",
            "a\\b",
            "x\n",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
    }

    #[test]
    fn timestamps_need_a_real_calendar_instant() {
        assert!(parse_timestamp("2026-07-14T01:00:00Z").is_some());
        assert!(parse_timestamp("2026-07-14T01:00:00.123456789Z").is_some());
        assert!(is_timestamp_shape("2026-13-45T99:99:99Z"));
        for bad in [
            "2026-13-45T99:99:99Z",
            "2026-02-30T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:60Z",
            "0000-01-01T00:00:00Z",
            "2026-01-01T00:00:00+00:00",
            "2026-01-01t00:00:00Z",
            "2026-01-01T00:00:00Z\n",
        ] {
            assert!(parse_timestamp(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn fraction_is_truncated_to_micros() {
        let a = parse_timestamp("2026-07-14T01:00:00.1234569Z").unwrap();
        let b = parse_timestamp("2026-07-14T01:00:00.123456Z").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn now_drops_a_zero_fraction() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(format_now(t), "2026-01-01T00:00:00Z");
        let t = t + chrono::Duration::microseconds(292358);
        assert_eq!(format_now(t), "2026-01-01T00:00:00.292358Z");
    }
}

#[cfg(test)]
mod shape_tests {
    use proptest::prelude::*;

    fn identifier_re() -> regex::Regex {
        regex::Regex::new(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\z").unwrap()
    }

    proptest! {
        #[test]
        fn identifier_is_the_regex(s in "[A-Za-z0-9._-]{0,130}|.{0,12}|[a-z]{127,129}") {
            prop_assert_eq!(super::is_identifier(&s), identifier_re().is_match(&s));
        }

        #[test]
        fn timestamp_shape_is_the_regex(
            s in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,8})?Z?.?|[0-9T:.Z-]{0,30}|.{0,24}"
        ) {
            prop_assert_eq!(super::is_timestamp_shape(&s), super::timestamp_re().is_match(&s));
        }
    }

    #[test]
    fn timestamp_examples() {
        for (s, ok) in [
            ("2026-07-14T01:00:00Z", true),
            ("2026-07-14T01:00:00.5Z", true),
            ("2026-07-14T01:00:00.Z", false),
            ("2026-07-14T01:00:00", false),
            ("2026-07-14 01:00:00Z", false),
            ("\u{661}026-07-14T01:00:00Z", false),
            ("2026-07-14T01:00:00.123456789Z", true),
        ] {
            assert_eq!(super::is_timestamp_shape(s), ok, "{s}");
            assert_eq!(super::timestamp_re().is_match(s), ok, "{s}");
        }
    }
}
