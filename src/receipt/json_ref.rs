//! A JSON value that borrows its text: what a receipt line is read into on
//! the verifier's threads and replayed from, without building a
//! `serde_json::Value` per line (its objects are B-trees of owned strings,
//! about 7 KB of nodes for one heartbeat line).
//!
//! Every node lives in an arena ([`Bump`]) and borrows its text, so a value
//! is `Copy`, owns nothing and is 24 bytes: a line is read without an
//! allocation per node and dropped with its arena. Objects are their
//! members in key order (a line read by [`super::canonical_parse`] is
//! canonical, so already sorted and distinct; one made from a `Map` is
//! sorted too); strings without escapes and all numbers stay slices of the
//! line. A list read from a canonical line keeps that text, so its
//! canonical digest is a hash of the line's own bytes ([`ListRef::digest`]).
//!
//! The accessors are those of `serde_json::Value` that the rules and the
//! replay use, with the same answers, so the two read the same whichever
//! form they are given ([`JsonRef::from_value`] reads a `Value`).

use std::ops::Deref;

use bumpalo::Bump;
use serde_json::{Map, Value};

use super::canonical;

/// A JSON value whose nodes and text live for `'a` (a receipt line and its
/// arena, or a `Value` and an arena).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonRef<'a> {
    Null,
    Bool(bool),
    /// The number's text as written (an integer in a canonical line).
    Number(&'a str),
    String(&'a str),
    Array(&'a ListRef<'a>),
    Object(ObjectRef<'a>),
}

/// A list, and its exact canonical text when it was read from a canonical
/// line.
#[derive(Debug)]
pub struct ListRef<'a> {
    items: &'a [JsonRef<'a>],
    canonical: Option<&'a str>,
}

impl PartialEq for ListRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<'a> Deref for ListRef<'a> {
    type Target = [JsonRef<'a>];

    fn deref(&self) -> &Self::Target {
        self.items
    }
}

impl<'a> ListRef<'a> {
    /// A list read from canonical `text` (its exact bytes).
    pub(crate) fn canonical(items: &'a [JsonRef<'a>], text: &'a str) -> ListRef<'a> {
        ListRef {
            items,
            canonical: Some(text),
        }
    }

    /// Lowercase hex SHA-256 of the list's canonical JSON: the line's own
    /// bytes when it came from a canonical line.
    pub fn digest(&self) -> String {
        match self.canonical {
            Some(text) => canonical::sha256_hex(text.as_bytes()),
            None => canonical::digest(&self.to_value()),
        }
    }

    /// The list as a `Value` (for state that keeps it).
    pub fn to_value(&self) -> Value {
        Value::Array(self.to_values())
    }

    /// The items as `Value`s (for state that keeps them).
    pub fn to_values(&self) -> Vec<Value> {
        self.items.iter().map(JsonRef::to_value).collect()
    }
}

impl<'l, 'a> IntoIterator for &'l ListRef<'a> {
    type Item = &'l JsonRef<'a>;
    type IntoIter = std::slice::Iter<'l, JsonRef<'a>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// One member of an object.
pub(crate) type Member<'a> = (&'a str, JsonRef<'a>);

/// An object: its members in key order, keys distinct.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ObjectRef<'a> {
    members: &'a [Member<'a>],
}

impl<'a> ObjectRef<'a> {
    /// Members already in strictly increasing key order (the caller
    /// checked it).
    pub(crate) fn sorted(members: &'a [Member<'a>]) -> ObjectRef<'a> {
        ObjectRef { members }
    }

    /// `map` read into `arena`, its strings borrowed (a `Map` iterates in
    /// key order).
    pub fn from_map(map: &'a Map<String, Value>, arena: &'a Bump) -> ObjectRef<'a> {
        ObjectRef::read(map, arena, &|text| text)
    }

    /// `map` copied into `arena` (a map that does not live as long).
    pub fn copied(map: &Map<String, Value>, arena: &'a Bump) -> ObjectRef<'a> {
        ObjectRef::read(map, arena, &|text| &*arena.alloc_str(text))
    }

    fn read<'v>(
        map: &'v Map<String, Value>,
        arena: &'a Bump,
        text: &dyn Fn(&'v str) -> &'a str,
    ) -> ObjectRef<'a> {
        ObjectRef {
            members: arena.alloc_slice_fill_iter(
                map.iter()
                    .map(|(k, v)| (text(k.as_str()), JsonRef::read(v, arena, text))),
            ),
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a JsonRef<'a>> {
        // A handful of members: a scan beats a search.
        self.members.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.members.iter().map(|(k, _)| *k)
    }

    pub fn values(&self) -> impl Iterator<Item = &'a JsonRef<'a>> {
        self.members.iter().map(|(_, v)| v)
    }

    /// The members in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a JsonRef<'a>)> {
        self.members.iter().map(|(k, v)| (*k, v))
    }

    /// The object as a `Map` (for state that keeps it, or a caller that
    /// reads one).
    pub fn to_map(&self) -> Map<String, Value> {
        self.members
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_value()))
            .collect()
    }
}

impl<'a> IntoIterator for &ObjectRef<'a> {
    type Item = (&'a str, &'a JsonRef<'a>);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, Member<'a>>, fn(&'a Member<'a>) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.members.iter().map(|(k, v)| (*k, v))
    }
}

/// A member that must be there (as `Map`'s index: a missing key panics,
/// so read only keys a check has seen).
impl<'a> std::ops::Index<&str> for ObjectRef<'a> {
    type Output = JsonRef<'a>;

    fn index(&self, key: &str) -> &JsonRef<'a> {
        self.get(key)
            .unwrap_or_else(|| panic!("no member {key:?} in the object"))
    }
}

impl<'a> JsonRef<'a> {
    /// `value` read into `arena`, its strings borrowed.
    pub fn from_value(value: &'a Value, arena: &'a Bump) -> JsonRef<'a> {
        JsonRef::read(value, arena, &|text| text)
    }

    /// `value` copied into `arena`, strings too (a value that does not
    /// live as long: a line that is not canonical, read by serde_json).
    pub fn copied(value: &Value, arena: &'a Bump) -> JsonRef<'a> {
        JsonRef::read(value, arena, &|text| &*arena.alloc_str(text))
    }

    /// `value`'s nodes in `arena`, each string (keys too) as `text` keeps
    /// it: borrowed, or copied into the arena.
    fn read<'v>(
        value: &'v Value,
        arena: &'a Bump,
        text: &dyn Fn(&'v str) -> &'a str,
    ) -> JsonRef<'a> {
        match value {
            Value::Null => JsonRef::Null,
            Value::Bool(b) => JsonRef::Bool(*b),
            Value::Number(n) => JsonRef::Number(text(n.as_str())),
            Value::String(s) => JsonRef::String(text(s)),
            Value::Array(items) => {
                JsonRef::Array(arena.alloc(ListRef {
                    items:
                        arena.alloc_slice_fill_iter(
                            items.iter().map(|v| JsonRef::read(v, arena, text)),
                        ),
                    canonical: None,
                }))
            }
            Value::Object(map) => JsonRef::Object(ObjectRef::read(map, arena, text)),
        }
    }

    /// Whether `value` is this value (numbers by their text, as
    /// `arbitrary_precision` compares them).
    pub fn matches(&self, value: &Value) -> bool {
        match (self, value) {
            (JsonRef::Null, Value::Null) => true,
            (JsonRef::Bool(a), Value::Bool(b)) => a == b,
            (JsonRef::Number(a), Value::Number(b)) => *a == b.as_str(),
            (JsonRef::String(a), Value::String(b)) => *a == b.as_str(),
            (JsonRef::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.matches(b))
            }
            (JsonRef::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka == kb && va.matches(vb))
            }
            _ => false,
        }
    }

    /// The value as a `Value`.
    pub fn to_value(&self) -> Value {
        match self {
            JsonRef::Null => Value::Null,
            JsonRef::Bool(b) => Value::Bool(*b),
            JsonRef::Number(text) => text
                .parse::<serde_json::Number>()
                .map(Value::Number)
                .unwrap_or(Value::Null),
            JsonRef::String(s) => Value::String(s.to_string()),
            JsonRef::Array(list) => list.to_value(),
            JsonRef::Object(object) => Value::Object(object.to_map()),
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a JsonRef<'a>> {
        match self {
            JsonRef::Object(object) => object.get(key),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            JsonRef::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            JsonRef::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// An integer that fits `u64`, as `Value::as_u64` answers.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            JsonRef::Number(text) => text.parse().ok(),
            _ => None,
        }
    }

    /// An integer that fits `i64`, as `Value::as_i64` answers.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            JsonRef::Number(text) => text.parse().ok(),
            _ => None,
        }
    }

    /// A JSON integer (not a bool, not a float), clamped to `i128` as
    /// `primitives::as_int` does.
    pub fn as_int(&self) -> Option<i128> {
        match self {
            JsonRef::Number(text) if is_integer_text(text) => {
                Some(text.parse::<i128>().unwrap_or(if text.starts_with('-') {
                    i128::MIN
                } else {
                    i128::MAX
                }))
            }
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&'a ListRef<'a>> {
        match self {
            JsonRef::Array(list) => Some(list),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&ObjectRef<'a>> {
        match self {
            JsonRef::Object(object) => Some(object),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, JsonRef::Null)
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self, JsonRef::Bool(_))
    }

    /// Whether a float is anywhere in it (never valid in a receipt).
    pub fn contains_float(&self) -> bool {
        match self {
            JsonRef::Number(text) => !is_integer_text(text),
            JsonRef::Array(list) => list.iter().any(JsonRef::contains_float),
            JsonRef::Object(object) => object.values().any(JsonRef::contains_float),
            _ => false,
        }
    }
}

fn is_integer_text(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_borrowed_value_answers_as_the_value_does() {
        let mut value = json!({
            "a": [1, -2, "x", null, true, {"k": 18446744073709551615u64}],
            "b": {"c": "d"},
            "f": 1.5,
        });
        // Wider than i128: clamped, as the reference's unbounded compare.
        value["n"] = serde_json::from_str("1234567890123456789012345678901234567890123").unwrap();
        let arena = Bump::new();
        let view = JsonRef::from_value(&value, &arena);
        assert_eq!(view.to_value(), value);
        let a = view.get("a").and_then(JsonRef::as_array).unwrap();
        assert_eq!(a.len(), 6);
        assert_eq!(a[0].as_u64(), Some(1));
        assert_eq!(a[1].as_i64(), Some(-2));
        assert_eq!(a[1].as_u64(), None);
        assert_eq!(a[5].get("k").and_then(JsonRef::as_u64), Some(u64::MAX));
        assert_eq!(view.get("n").and_then(JsonRef::as_int), Some(i128::MAX));
        assert_eq!(view.get("n").and_then(JsonRef::as_u64), None);
        assert_eq!(view.get("f").and_then(JsonRef::as_int), None);
        assert!(view.contains_float());
        assert!(!view.get("a").unwrap().contains_float());
        assert_eq!(a.digest(), canonical::digest(&value["a"]));
        let keys: Vec<&str> = view.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a", "b", "f", "n"]);
        assert_eq!(
            view.get("b")
                .and_then(|b| b.get("c"))
                .and_then(JsonRef::as_str),
            Some("d")
        );
        assert!(view.get("z").is_none());
    }
}
