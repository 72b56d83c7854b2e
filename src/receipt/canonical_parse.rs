//! A one-pass reader of lines that are already in canonical form
//! ([`super::canonical`]): it reads the bytes into a [`JsonRef`] that
//! borrows them (what `serde_json` would give, without a `Value`) and, in
//! the same pass, checks that they are
//! exactly the bytes the canonical writer would produce, so a verifier can
//! hash the line as it stands instead of writing the event out again.
//!
//! It accepts only the canonical grammar: no whitespace, object keys in
//! strictly increasing code-point order (so no duplicates), strings with
//! raw UTF-8 except the escapes the writer uses (`\" \\ \b \f \n \r \t` and
//! lowercase `\u00xx` for the other control characters), integers in their
//! shortest form (`-0` is not: the writer prints `0`), no floats. Anything
//! else, valid JSON or not, is `None`: the caller then takes the general
//! path (`serde_json` and the canonical writer), which decides as before.
//! So `Some` promises: `serde_json::from_slice(bytes)` is this object, and
//! the canonical form of it is `bytes` itself.

use std::ops::Range;

use bumpalo::Bump;

use super::json_ref::{JsonRef, ListRef, Member, ObjectRef};

/// Nesting deeper than this is left to the general path (serde_json's own
/// limit is 128).
const MAX_DEPTH: usize = 64;

/// A parsed object and the byte range of one of its top-level members.
pub type ObjectWithHole<'a> = (ObjectRef<'a>, Option<Range<usize>>);

/// The object that canonical `bytes` hold, and the byte range of its
/// top-level member `hole` as [`super::canonical::object_with_hole`] gives
/// it (with the comma before it, or after it when it is the first
/// member); `None` unless `bytes` are exactly canonical JSON of an object.
/// Its nodes (and any string with an escape) are made in `arena`.
pub fn parse_canonical_object<'a>(
    bytes: &'a [u8],
    hole: &str,
    arena: &'a Bump,
) -> Option<ObjectWithHole<'a>> {
    parse_canonical_object_with(bytes, hole, arena, &mut Scratch::default())
}

/// The stacks the reader builds objects and lists on: kept by a caller
/// that reads many lines, so a line costs no allocation of its own.
#[derive(Default)]
pub struct Scratch<'a> {
    /// The members of the objects being read, innermost last; each object
    /// copies its own into the arena when it closes.
    members: Vec<Member<'a>>,
    /// The same for the items of the lists being read.
    items: Vec<JsonRef<'a>>,
}

/// [`parse_canonical_object`] on the caller's `scratch`.
pub fn parse_canonical_object_with<'a>(
    bytes: &'a [u8],
    hole: &str,
    arena: &'a Bump,
    scratch: &mut Scratch<'a>,
) -> Option<ObjectWithHole<'a>> {
    let text = std::str::from_utf8(bytes).ok()?;
    scratch.members.clear();
    scratch.items.clear();
    let mut reader = Reader {
        text,
        bytes,
        at: 0,
        depth: 0,
        arena,
        members: &mut scratch.members,
        items: &mut scratch.items,
    };
    let mut range = None;
    if reader.next()? != b'{' {
        return None;
    }
    let map = reader.object(Some((hole, &mut range)))?;
    (reader.at == bytes.len()).then_some((map, range))
}

/// The first index at or after `at` whose byte may end a run of plain
/// string bytes (a quote, a backslash or a control character), eight bytes
/// at a time; at most `bytes.len()`, and possibly a few bytes before such a
/// byte near the end (the caller checks byte by byte from there).
fn skip_plain(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        // Bytes below 0x20, equal to '"', equal to '\\' (the lowest flag
        // is exact: a borrow only flags bytes above a flagged one).
        let found = (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
            | zero_in(x ^ (ONES * u64::from(b'"')))
            | zero_in(x ^ (ONES * u64::from(b'\\')));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at
}

struct Reader<'a, 's> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    depth: usize,
    arena: &'a Bump,
    members: &'s mut Vec<Member<'a>>,
    items: &'s mut Vec<JsonRef<'a>>,
}

impl<'a> Reader<'a, '_> {
    fn next(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let end = self.at + rest.len();
        (self.bytes.get(self.at..end)? == rest).then(|| self.at = end)
    }

    /// After the opening `{`. `hole`: the key whose member's range to note.
    fn object(
        &mut self,
        mut hole: Option<(&str, &mut Option<Range<usize>>)>,
    ) -> Option<ObjectRef<'a>> {
        self.enter()?;
        let base = self.members.len();
        if self.peek()? == b'}' {
            self.at += 1;
            self.depth -= 1;
            return Some(ObjectRef::default());
        }
        let mut first_hole = false;
        loop {
            let comma = self.at - 1;
            let start = self.at;
            if self.next()? != b'"' {
                return None;
            }
            let key = self.string()?;
            if self.members.len() > base && self.members[self.members.len() - 1].0 >= key {
                return None;
            }
            if self.next()? != b':' {
                return None;
            }
            let value = self.value()?;
            if let Some((name, range)) = hole.as_mut() {
                if first_hole {
                    // The first member was the hole: its comma goes with it.
                    if let Some(r) = range.as_mut() {
                        r.end = start;
                    }
                    first_hole = false;
                }
                if key == *name {
                    first_hole = self.members.len() == base;
                    **range = Some(if first_hole { start } else { comma }..self.at);
                }
            }
            self.members.push((key, value));
            if !self.another(b'}')? {
                break;
            }
        }
        self.depth -= 1;
        // Sorted and distinct, as checked above.
        // Nodes are `Copy`: the run is copied into the arena in one go.
        let members = self.arena.alloc_slice_copy(&self.members[base..]);
        self.members.truncate(base);
        Some(ObjectRef::sorted(members))
    }

    /// After a member or an item: `,` means another follows, `close` ends
    /// the container; anything else is not canonical JSON.
    fn another(&mut self, close: u8) -> Option<bool> {
        match self.next()? {
            b',' => Some(true),
            c if c == close => Some(false),
            _ => None,
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn value(&mut self) -> Option<JsonRef<'a>> {
        Some(match self.next()? {
            b'{' => JsonRef::Object(self.object(None)?),
            b'[' => {
                let start = self.at - 1;
                self.enter()?;
                let base = self.items.len();
                if self.peek()? == b']' {
                    self.at += 1;
                } else {
                    loop {
                        let item = self.value()?;
                        self.items.push(item);
                        if !self.another(b']')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                let items = self.arena.alloc_slice_copy(&self.items[base..]);
                self.items.truncate(base);
                let text = &self.text[start..self.at];
                JsonRef::Array(self.arena.alloc(ListRef::canonical(items, text)))
            }
            b'"' => JsonRef::String(self.string()?),
            b't' => self.literal(b"rue").map(|()| JsonRef::Bool(true))?,
            b'f' => self.literal(b"alse").map(|()| JsonRef::Bool(false))?,
            b'n' => self.literal(b"ull").map(|()| JsonRef::Null)?,
            b'-' | b'0'..=b'9' => JsonRef::Number(self.integer()?),
            _ => return None,
        })
    }

    /// After the opening quote: the string up to its closing quote, with
    /// only the canonical escapes.
    fn string(&mut self) -> Option<&'a str> {
        let start = self.at;
        self.at = skip_plain(self.bytes, self.at);
        // The common case: no escape at all, the line's own text.
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    let s = self.text.get(start..self.at)?;
                    self.at += 1;
                    return Some(s);
                }
                b'\\' => break,
                0..0x20 => return None,
                _ => self.at += 1,
            }
        }
        let mut out = String::from(self.text.get(start..self.at)?);
        loop {
            let run = self.at;
            self.at = skip_plain(self.bytes, self.at);
            loop {
                match *self.bytes.get(self.at)? {
                    b'"' | b'\\' => break,
                    0..0x20 => return None,
                    _ => self.at += 1,
                }
            }
            out.push_str(self.text.get(run..self.at)?);
            if self.next()? == b'"' {
                // In the arena, as every node: nothing read owns memory.
                return Some(self.arena.alloc_str(&out));
            }
            out.push(match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let digits = self.bytes.get(self.at..self.at + 4)?;
                    self.at += 4;
                    let hex = |b: u8| match b {
                        b'0'..=b'9' => Some(b - b'0'),
                        b'a'..=b'f' => Some(b - b'a' + 10),
                        _ => None,
                    };
                    if digits[0] != b'0' || digits[1] != b'0' || digits[2] > b'1' {
                        return None;
                    }
                    let c = hex(digits[2])? << 4 | hex(digits[3])?;
                    // The five with a short form are written short.
                    if matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                        return None;
                    }
                    char::from(c)
                }
                _ => return None,
            });
        }
    }

    /// After the first character of a number (a sign or a digit): an
    /// integer in its shortest form, as serde_json keeps its text.
    fn integer(&mut self) -> Option<&'a str> {
        let start = self.at - 1;
        let negative = self.bytes[start] == b'-';
        let first = if negative {
            self.next()?
        } else {
            self.bytes[start]
        };
        let digits_start = self.at - 1;
        match first {
            b'0' => {}
            b'1'..=b'9' => {
                while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.at += 1;
                }
            }
            _ => return None,
        }
        // A fraction or an exponent: a float, never canonical here.
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let digits = &self.text[digits_start..self.at];
        if negative && digits == "0" {
            return None;
        }
        // The text serde_json keeps for it (`arbitrary_precision`).
        Some(&self.text[start..self.at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::canonical;
    use serde_json::{Map, Value};

    type MapWithHole = (Map<String, Value>, Option<Range<usize>>);

    /// The fast reader's answer as a `Map` (what the general path gives).
    fn fast(bytes: &[u8]) -> Option<MapWithHole> {
        parse_canonical_object(bytes, "checksum", &Bump::new())
            .map(|(object, hole)| (object.to_map(), hole))
    }

    /// The general path's answer: the object and the hole, when the bytes
    /// are canonical.
    fn general(bytes: &[u8]) -> Option<MapWithHole> {
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(bytes) else {
            return None;
        };
        let (full, hole) = canonical::object_with_hole(&map, "checksum");
        (full == bytes).then_some((map, hole))
    }

    fn agrees(text: &str) {
        let fast = fast(text.as_bytes());
        let slow = general(text.as_bytes());
        match (&fast, &slow) {
            // The fast reader may leave a canonical line to the general
            // path (deep nesting), never the other way round.
            (None, _) => {}
            (Some(f), Some(s)) => {
                assert_eq!(f, s, "{text}");
                // The same text serde_json keeps for every number.
                assert_eq!(
                    serde_json::to_string(&f.0).unwrap(),
                    serde_json::to_string(&s.0).unwrap()
                );
            }
            (Some(_), None) => panic!("fast path accepted a non-canonical line: {text}"),
        }
    }

    #[test]
    fn reads_canonical_lines_as_serde_json_does() {
        for text in [
            r#"{}"#,
            r#"{"a":1}"#,
            r#"{"checksum":"x"}"#,
            r#"{"checksum":"x","z":2}"#,
            r#"{"a":1,"checksum":"x"}"#,
            r#"{"a":1,"checksum":"x","z":[1,{"b":2}]}"#,
            r#"{"a":[],"b":{},"c":[true,false,null],"d":-12,"e":0}"#,
            r#"{"a":100000000000000000000000000000,"b":-100000000000000000000000000000}"#,
            r#"{"a":9223372036854775807,"b":-9223372036854775808,"c":18446744073709551615}"#,
            r#"{"a":999999999999999999,"b":-999999999999999999,"c":1000000000000000000}"#,
            "{\"a\":\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}/\u{2028}é✓😀\"}",
            "{\"～\":2,\"😀\":1}",
            r#"{"":1,"a":"","b":"\u0000"}"#,
        ] {
            let arena = Bump::new();
            let fast = parse_canonical_object(text.as_bytes(), "checksum", &arena);
            assert!(fast.is_some(), "{text}");
            agrees(text);
        }
    }

    #[test]
    fn leaves_everything_else_to_the_general_path() {
        for text in [
            r#"{ "a":1}"#,
            r#"{"a":1 }"#,
            r#"{"a": 1}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e2}"#,
            r#"{"a":1E2}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"a":"\u000A"}"#,
            r#"{"a":"\u000a"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            "{\"a\":\"\t\"}",
            "{\"a\":\"\u{1}\"}",
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1}x"#,
            r#"{"a":1}{}"#,
            r#"[1]"#,
            r#""a""#,
            r#"{"a""#,
            r#"{"a":"#,
            r#"{"a":1"#,
            "",
            "\u{feff}{\"a\":1}",
            r#"{"～":2,"😀":1,"b":0}"#,
            r#"{"😀":1,"～":2}"#,
        ] {
            assert!(
                parse_canonical_object(text.as_bytes(), "checksum", &Bump::new()).is_none(),
                "{text}"
            );
            agrees(text);
        }
        assert!(parse_canonical_object(b"{\"a\":\"\xff\"}", "checksum", &Bump::new()).is_none());
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(100), "]".repeat(100));
        assert!(parse_canonical_object(deep.as_bytes(), "checksum", &Bump::new()).is_none());
    }

    #[test]
    fn a_receipt_line_is_read_whole() {
        let line = r#"{"agent_id":null,"checksum":"8d62","event_type":"transaction_committed","evidence_refs":[],"metadata":{"intents":[{"agent_id":"agent-1","evidence_refs":[{"checksum":"00c348","kind":"log","summary":"build progress note 49992"}],"metadata":{"owner_epoch":1},"owner_epoch":1,"reason":null}],"owner_epoch":1},"sequence":50000,"to_state":null}"#;
        let arena = Bump::new();
        let (object, hole) = parse_canonical_object(line.as_bytes(), "checksum", &arena).unwrap();
        assert_eq!(object.len(), 7);
        // A list's digest is that of its own bytes, the canonical digest.
        let intents = object.get("metadata").and_then(|m| m.get("intents"));
        let intents = intents.and_then(JsonRef::as_array).unwrap();
        let value: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            intents.digest(),
            canonical::digest(&value["metadata"]["intents"])
        );
        assert_eq!(&line[hole.unwrap()], r#","checksum":"8d62""#);
        agrees(line);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                "-?[1-9][0-9]{18,40}".prop_map(|d| serde_json::from_str::<Value>(&d).unwrap()),
                "(\\PC|[\u{0}-\u{1f}\u{7f}\"\\\\/])*".prop_map(Value::String),
            ]
        }

        fn value() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop_oneof![Just("checksum".to_string()), "[a-z_]{0,6}", "\\PC{0,3}"],
                        inner,
                        0..6
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn object() -> impl Strategy<Value = Map<String, Value>> {
            prop::collection::btree_map(
                prop_oneof![Just("checksum".to_string()), "[a-z_]{0,6}"],
                value(),
                0..8,
            )
            .prop_map(|m| m.into_iter().collect())
        }

        proptest! {
            #[test]
            fn skip_plain_stops_at_the_first_special_byte(
                bytes in prop::collection::vec(
                    prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0x1fu8..0x21, 0x7fu8..0x81],
                    0..40,
                ),
                from in 0usize..8,
            ) {
                let from = from.min(bytes.len());
                let first = bytes[from..]
                    .iter()
                    .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
                    .map_or(bytes.len(), |i| from + i);
                let stop = skip_plain(&bytes, from);
                // Never past the first special byte, and only the last
                // few bytes left to the byte-by-byte loop.
                prop_assert!(stop <= first);
                prop_assert!(stop == first || first - stop < 8 && bytes.len() - stop < 8);
            }

            #[test]
            fn every_canonical_object_is_read_exactly(map in object()) {
                let bytes = canonical::to_vec(&Value::Object(map.clone()));
                let arena = Bump::new();
                let (object, _) = parse_canonical_object(&bytes, "checksum", &arena).unwrap();
                // Every list's digest is the canonical digest of its value.
                for (key, value) in &map {
                    if let (Some(list), Value::Array(_)) = (object.get(key).and_then(JsonRef::as_array), value) {
                        prop_assert_eq!(list.digest(), canonical::digest(value));
                    }
                }
                let fast = fast(&bytes);
                prop_assert!(fast.is_some());
                prop_assert_eq!(fast, general(&bytes));
            }

            #[test]
            fn an_edited_line_is_never_taken_for_canonical(
                map in object(),
                at in any::<prop::sample::Index>(),
                edit in prop_oneof![
                    Just(" "), Just("\\"), Just("\""), Just(","), Just("-"), Just("0"),
                    Just("."), Just("e"), Just("}"), Just("]"), Just("u00"), Just("\\/"),
                    Just("\t"), Just("A"), Just("\u{1}"),
                ],
                remove in any::<bool>(),
            ) {
                let mut bytes = canonical::to_vec(&Value::Object(map));
                let i = at.index(bytes.len() + 1);
                if remove && i < bytes.len() {
                    bytes.remove(i);
                } else {
                    bytes.splice(i..i, edit.bytes());
                }
                let fast = fast(&bytes);
                if fast.is_some() {
                    prop_assert_eq!(fast, general(&bytes));
                }
            }
        }
    }
}
