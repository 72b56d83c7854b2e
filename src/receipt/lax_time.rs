//! The LAX timestamp reader (reference-coordinator §1.5): what the reference
//! uses for `liveness-check --at`, for the caller timestamps of the liveness
//! commands before they are stored, and for report timestamps.
//!
//! A value is accepted exactly when it ends in `Z` and Python 3.11's
//! `datetime.fromisoformat(value[:-1] + "+00:00")` accepts it AND yields an
//! aware datetime. That parser is far laxer than the stored-value rule of
//! [`super::primitives::parse_timestamp`]: `2026-07-14T01:00Z`,
//! `2026-07-14 01:00:00Z`, `20260714T010000Z`, comma fractions, ISO week
//! dates (`2026-W29-2T01:00Z`), any single byte as the date/time separator,
//! and a few oddities of its C implementation (digits after the sixth
//! fractional digit are skipped, and so is one stray byte in front of the
//! zone). A date without a time (`2026-07-14Z`) parses to a NAIVE datetime
//! (the appended `+00:00` becomes the time `00:00`), which the reference
//! refuses separately ("timestamp must be timezone-aware").
//!
//! The grammar below is written from the observable behaviour of
//! CPython 3.11's `_datetime` module and checked against it case by case
//! (see the tests). It works on the UTF-8 bytes, like CPython, and reads a
//! NUL past the end, like C: a non-ASCII byte is never a digit or a
//! delimiter the grammar wants, so non-ASCII input fails where CPython
//! fails, except as the date/time separator, which may be any character.

use chrono::{NaiveDate, TimeDelta, Weekday};

use super::primitives::Instant;

/// Why a lax timestamp was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaxTimeError {
    /// Not an ISO-8601 instant ending in `Z` (the reference's ValueError).
    Invalid,
    /// It parses, but to a naive datetime (a date with no time part).
    Naive,
}

impl LaxTimeError {
    /// The reference's message for each refusal.
    pub fn message(self) -> &'static str {
        match self {
            LaxTimeError::Invalid => "timestamp must be UTC ISO-8601 ending in Z",
            LaxTimeError::Naive => "timestamp must be timezone-aware",
        }
    }
}

/// Parse a caller timestamp the reference's lax way.
pub fn parse_lax_timestamp(value: &str) -> Result<Instant, LaxTimeError> {
    let body = value.strip_suffix('Z').ok_or(LaxTimeError::Invalid)?;
    let text = format!("{body}+00:00");
    // CPython refuses anything shorter than seven characters up front.
    if text.chars().count() < 7 {
        return Err(LaxTimeError::Invalid);
    }
    Bytes(text.as_bytes())
        .datetime()
        .ok_or(LaxTimeError::Invalid)?
}

/// The string's bytes; reading past the end yields NUL, as in C.
struct Bytes<'a>(&'a [u8]);

/// hour, minute, second, microsecond.
type Clock = (u32, u32, u32, u32);

/// A parsed time of day, with "something follows" (CPython's return 1).
struct TimeOfDay {
    clock: Clock,
    trailing: bool,
}

impl Bytes<'_> {
    fn at(&self, i: usize) -> u8 {
        self.0.get(i).copied().unwrap_or(0)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// Exactly `n` ASCII digits at `p`.
    fn digits(&self, p: usize, n: usize) -> Option<u32> {
        let mut value = 0u32;
        for i in 0..n {
            let b = self.at(p + i);
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
        }
        Some(value)
    }

    /// `Some(Ok(instant))`, `Some(Err(Naive))` or `None` (invalid).
    fn datetime(&self) -> Option<Result<Instant, LaxTimeError>> {
        let sep = self.separator()?;
        let date = self.date(sep)?;
        let mut clock = (0, 0, 0, 0);
        let mut offset_micros: Option<i64> = None;
        if self.len() > sep {
            // The separator is one character, whatever its UTF-8 length.
            let skip = match self.at(sep) {
                b if b < 0x80 => 1,
                b if b >= 0xf0 => 4,
                b if b >= 0xe0 => 3,
                _ => 2,
            };
            let (time, offset) = self.time(sep + skip)?;
            clock = time;
            offset_micros = offset;
        }
        let (hour, minute, second, micros) = clock;
        let local = date.and_hms_micro_opt(hour, minute, second, micros)?;
        if !(1..=9999).contains(&chrono::Datelike::year(&local)) {
            return None;
        }
        let Some(offset) = offset_micros else {
            return Some(Err(LaxTimeError::Naive));
        };
        // An offset must lie strictly within one day.
        if offset.abs() >= 86_400_000_000 {
            return None;
        }
        let utc = local.checked_sub_signed(TimeDelta::microseconds(offset))?;
        Some(Ok(utc.and_utc()))
    }

    /// Where the date ends (the index of the separator byte).
    fn separator(&self) -> Option<usize> {
        let len = self.len();
        if len == 7 {
            return Some(7);
        }
        if self.at(4) == b'-' {
            if self.at(5) != b'W' {
                return Some(10);
            }
            if len < 8 {
                return None;
            }
            if len > 8 && self.at(8) == b'-' {
                if len == 9 {
                    return None;
                }
                if len > 10 && self.at(10).is_ascii_digit() {
                    return Some(8);
                }
                return Some(10);
            }
            return Some(8);
        }
        if self.at(4) == b'W' {
            let mut idx = 7;
            while idx < len && self.at(idx).is_ascii_digit() {
                idx += 1;
            }
            if idx < 9 {
                return Some(idx);
            }
            return Some(if idx % 2 == 0 { 7 } else { 8 });
        }
        Some(8)
    }

    /// `YYYY-MM-DD`, `YYYYMMDD`, `YYYY-Www[-D]` or `YYYYWww[D]`.
    fn date(&self, len: usize) -> Option<NaiveDate> {
        let year = self.digits(0, 4)?;
        let dashed = self.at(4) == b'-';
        let mut p = if dashed { 5 } else { 4 };
        if self.at(p) == b'W' {
            p += 1;
            let week = self.digits(p, 2)?;
            p += 2;
            let mut weekday = 1;
            if p < len {
                if dashed {
                    if self.at(p) != b'-' {
                        return None;
                    }
                    p += 1;
                }
                weekday = self.digits(p, 1)?;
            }
            return iso_week_date(year, week, weekday);
        }
        let month = self.digits(p, 2)?;
        p += 2;
        if dashed {
            if self.at(p) != b'-' {
                return None;
            }
            p += 1;
        }
        let day = self.digits(p, 2)?;
        if year == 0 {
            return None;
        }
        NaiveDate::from_ymd_opt(year as i32, month, day)
    }

    /// The time part from `start`: the clock and the zone offset in
    /// microseconds (`None` when there is no zone: a naive time).
    fn time(&self, start: usize) -> Option<(Clock, Option<i64>)> {
        let end = self.len();
        if start >= end {
            return None;
        }
        let zone = (start..end)
            .find(|&i| matches!(self.at(i), b'Z' | b'+' | b'-'))
            .unwrap_or(end);
        let time = self.clock(start, zone)?;
        if zone == end {
            return if time.trailing {
                None
            } else {
                Some((time.clock, None))
            };
        }
        if self.at(zone) == b'Z' {
            return if self.at(zone + 1) != 0 {
                None
            } else {
                Some((time.clock, Some(0)))
            };
        }
        let sign: i64 = if self.at(zone) == b'-' { -1 } else { 1 };
        let offset = self.clock(zone + 1, end)?;
        if offset.trailing {
            return None;
        }
        let (h, m, s, us) = offset.clock;
        let seconds = i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s);
        // CPython builds UTC itself when the whole-second offset is zero,
        // ignoring any fractional part of the offset.
        let micros = if seconds == 0 {
            0
        } else {
            seconds * 1_000_000 + i64::from(us)
        };
        Some((time.clock, Some(sign * micros)))
    }

    /// `HH[[:]MM[[:]SS[(.|,)ffffff…]]]` between `start` and `end`.
    fn clock(&self, start: usize, end: usize) -> Option<TimeOfDay> {
        let mut values = [0u32; 3];
        let mut p = start;
        let mut colons = true;
        for (i, value) in values.iter_mut().enumerate() {
            *value = self.digits(p, 2)?;
            p += 2;
            let c = self.at(p);
            p += 1;
            if i == 0 {
                colons = c == b':';
            }
            if p >= end {
                let [hour, minute, second] = values;
                return Some(TimeOfDay {
                    clock: (hour, minute, second, 0),
                    trailing: c != 0,
                });
            }
            if colons && c == b':' {
                continue;
            }
            if c == b'.' || c == b',' {
                break;
            }
            if colons {
                return None;
            }
            p -= 1;
        }
        let take = (end - p).min(6);
        let mut micros = self.digits(p, take)?;
        for _ in take..6 {
            micros *= 10;
        }
        p += take;
        while self.at(p).is_ascii_digit() {
            p += 1;
        }
        let [hour, minute, second] = values;
        Some(TimeOfDay {
            clock: (hour, minute, second, micros),
            trailing: self.at(p) != 0,
        })
    }
}

/// An ISO week date; CPython's week-53 rule is the ISO one, and year 0
/// never yields a valid date.
fn iso_week_date(year: u32, week: u32, weekday: u32) -> Option<NaiveDate> {
    if year == 0 {
        return None;
    }
    let weekday = match weekday {
        1 => Weekday::Mon,
        2 => Weekday::Tue,
        3 => Weekday::Wed,
        4 => Weekday::Thu,
        5 => Weekday::Fri,
        6 => Weekday::Sat,
        7 => Weekday::Sun,
        _ => return None,
    };
    NaiveDate::from_isoywd_opt(year as i32, week, weekday)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::primitives::parse_timestamp;

    fn lax(value: &str) -> Result<String, LaxTimeError> {
        parse_lax_timestamp(value).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string())
    }

    /// Every case was run through `datetime.fromisoformat(v[:-1] + "+00:00")`
    /// under CPython 3.11.7; the right column is its answer in UTC.
    #[test]
    fn accepts_what_python_311_accepts() {
        for (value, want) in [
            ("2026-07-14T01:00:00Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14T01:00Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14T01Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14 01:00:00Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14x01:00Z", "2026-07-14T01:00:00.000000"),
            ("20260714T010000Z", "2026-07-14T01:00:00.000000"),
            ("20260714T0100Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14T01:00:00,5Z", "2026-07-14T01:00:00.500000"),
            ("2026-07-14T01:00:00.5Z", "2026-07-14T01:00:00.500000"),
            ("2026-07-14T01:00:00.123456Z", "2026-07-14T01:00:00.123456"),
            // Digits beyond the sixth are dropped, not rounded.
            ("2026-07-14T01:00:00.1234567Z", "2026-07-14T01:00:00.123456"),
            ("2026-07-14T01:00:00.9999999Z", "2026-07-14T01:00:00.999999"),
            // CPython quirks.
            ("2026-07-14T01:00:00:123Z", "2026-07-14T01:00:00.123000"),
            ("2026-07-14T0100001234Z", "2026-07-14T01:00:00.123400"),
            ("2026-07-14T01:00:00.Z", "2026-07-14T01:00:00.000000"),
            (
                "2026-07-14T01:00:00.1234567aZ",
                "2026-07-14T01:00:00.123456",
            ),
            (
                "2026-07-14T01:00:00.1234567éZ",
                "2026-07-14T01:00:00.123456",
            ),
            ("2026-07-14T01:00:00 Z", "2026-07-14T01:00:00.000000"),
            ("2026-07-14é01:00Z", "2026-07-14T01:00:00.000000"),
            ("20260714€0100Z", "2026-07-14T01:00:00.000000"),
            ("2026W29🕐0100Z", "2026-07-13T01:00:00.000000"),
            (
                "2026-05-14T01:00:00.123456\u{0}Z",
                "2026-05-14T01:00:00.123456",
            ),
            // An embedded NUL ends C's reading, so a zone can slip in.
            (
                "0100-12-27T11:23:02-08:73:12.125199\u{0}Z",
                "0100-12-27T20:36:14.125199",
            ),
            // ISO week dates.
            ("2026-W01-1T01:00Z", "2025-12-29T01:00:00.000000"),
            ("2026W011T01Z", "2025-12-29T01:00:00.000000"),
            ("2026-W01T01Z", "2025-12-29T01:00:00.000000"),
            ("2026W01T00Z", "2025-12-29T00:00:00.000000"),
            ("2026-W53-7T00:00Z", "2027-01-03T00:00:00.000000"),
            ("2026-W01-1-00Z", "2025-12-29T00:00:00.000000"),
            ("2026-W01-10Z", "2025-12-29T10:00:00.000000"),
            ("0001-W01-1T00Z", "0001-01-01T00:00:00.000000"),
            ("9999-W52-5T00Z", "9999-12-31T00:00:00.000000"),
            ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000"),
            ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999"),
            ("2024-02-29T00:00Z", "2024-02-29T00:00:00.000000"),
        ] {
            assert_eq!(lax(value), Ok(want.to_string()), "{value}");
        }
    }

    #[test]
    fn refuses_what_python_311_refuses() {
        for value in [
            "",
            "Z",
            "2026-07-14T01:00:00",
            "2026-07-14T01:00:00+00:00",
            "2026-07-14T24:00Z",
            "2026-07-14T01:00:60Z",
            "2026-07-14T01:60Z",
            "2026-07-14T01:00:00.12a456Z",
            "2026-07-14T01:00:00ZZ",
            "2026-07-14T01:00:00+01:00Z",
            "2026-07-14T01:00:00-05:00Z",
            "0000-01-01T00:00Z",
            "0000-W01-1T00Z",
            "0000-W52-7T00Z",
            "9999-W52-6T00Z",
            "9999-W52-7T00Z",
            "2026-W54-1T00:00Z",
            "2025-W53-1T00:00Z",
            "2026-W01-8T00:00Z",
            "2026-W00-1T00:00Z",
            "2026-TZ",
            "2026-07-14TZ",
            "2026-07-14T01:0Z",
            "2026-07-14T1:00Z",
            "2026W0112Z",
            "2026-W011T00Z",
            "2026-W0112Z",
            "2026-0714T00Z",
            "202607-14T00Z",
            "2026-07-1Z",
            "2026-07Z",
            "20267Z",
            "2026-02-29T00:00Z",
            "2026-13-01T00:00Z",
            "2026-00-01T00:00Z",
            "2026-07-14T01:00:00.123456789+00:00Z",
            "2026-07-14T01:00:0000Z",
            "2026-07-14T01:0000Z",
            "２０２６-07-14T01:00Z",
            "2026-07-14T01:00\u{0}Zx",
        ] {
            assert_eq!(lax(value), Err(LaxTimeError::Invalid), "{value:?}");
        }
    }

    #[test]
    fn a_date_alone_is_naive() {
        for value in ["2026-07-14Z", "20260714Z", "2026-W01-1Z"] {
            assert_eq!(lax(value), Err(LaxTimeError::Naive), "{value}");
        }
        assert_eq!(
            LaxTimeError::Naive.message(),
            "timestamp must be timezone-aware"
        );
        assert_eq!(
            LaxTimeError::Invalid.message(),
            "timestamp must be UTC ISO-8601 ending in Z"
        );
    }

    /// Everything the strict stored-value rule accepts, the lax reader
    /// accepts as the same instant.
    #[test]
    fn agrees_with_the_strict_rule_on_stored_shapes() {
        for value in [
            "2026-07-14T01:00:00Z",
            "2026-07-14T01:00:00.1Z",
            "2026-07-14T01:00:00.1234569Z",
            "2024-02-29T23:59:59.999999Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert_eq!(
                parse_lax_timestamp(value).ok(),
                parse_timestamp(value),
                "{value}"
            );
        }
    }
}
