//! PURE: the JSON Schema of a typed JSON input and the keys it names, both
//! derived from its serde type (architecture.md §3a, agent-tools.md §4).
//!
//! An input is one Rust type, `#[derive(Deserialize, JsonSchema)]` with
//! `#[serde(deny_unknown_fields)]`, whose leaves carry their rules: the
//! checked text types of [`super::primitives`] here (ids, SHA-256, any-size
//! integers), the text leaves of `coordinator::inputs` (timestamps,
//! non-blank text, paths), each with a hand-written schema that is its rule
//! as a regular expression. From the type come the schema the MCP catalog
//! and the help show ([`schema_of`]) and the keys the decisions check
//! ([`InputKeys::of`]).
//!
//! The decisions still check an input as a JSON value first, in the
//! reference's order and with its messages (contracts/refusals.md): a
//! refusal never comes from serde. The types accept whatever those checks
//! pass, so deserialising a checked input cannot fail; a leaf checks at
//! most the rule every check of it shares (an identifier, SHA-256 hex, an
//! integer), never a limit, which is the run's manifest's.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde::de::{self, DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

use super::canonical::is_integer;
use super::primitives::{AgentId, Identifier, LaneId, RunId, Sha256Hex};

/// `receipt::primitives::is_identifier`.
pub const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$";

/// `receipt::primitives::is_sha256_hex`.
pub const SHA256_PATTERN: &str = "^[0-9a-f]{64}$";

/// The schema of `T` as the catalog shows it: every subschema inlined (an
/// input is read whole, and `$defs` are the catalog's to factor), no
/// `$schema`, and none of the titles, descriptions and defaults schemars
/// takes from Rust names, doc comments and `#[serde(default)]`: the
/// catalog's descriptions are the help's, and every byte is read by a
/// model on every session (agent-tools.md §4).
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = root_schema::<T>();
    RecursiveTransform(strip_annotations).transform(&mut schema);
    schema.to_value()
}

/// The schema of `T` as the help reads it ([`schema_of`]'s, with the
/// annotations kept): each field's doc comment as its `description`, its
/// `default`, and each leaf's rule in words under [`RULE`].
pub fn annotated_schema_of<T: JsonSchema>() -> Value {
    root_schema::<T>().to_value()
}

fn root_schema<T: JsonSchema>() -> Schema {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>()
}

fn strip_annotations(schema: &mut Schema) {
    for annotation in ["title", "description", "default", RULE] {
        schema.remove(annotation);
    }
}

/// The keyword under which a leaf's schema carries its rule in words, for
/// the help's field tables (`surface::help`): `[short, long]`, the long
/// form for a section's first mention and the short one after, or one
/// string for both. [`schema_of`] strips it, as it strips descriptions.
pub const RULE: &str = "x-rule";

/// `(short, long)`: a rule in words, as [`RULE`] holds it.
pub type Rule = (&'static str, &'static str);

/// [`IDENTIFIER_PATTERN`] in words.
pub const IDENTIFIER_RULE: Rule = (
    "identifier",
    "identifier (1-128 characters of [A-Za-z0-9._-], starting with a letter or digit)",
);

/// [`SHA256_PATTERN`] in words.
pub const SHA256_RULE: Rule = ("64 lowercase hex", "64 lowercase hex (a SHA-256)");

/// `schema` with `rule` under [`RULE`].
pub fn with_rule(mut schema: Schema, (short, long): (&str, &str)) -> Schema {
    let rule = if short == long {
        Value::from(short)
    } else {
        Value::from(vec![short, long])
    };
    schema.insert(RULE.to_string(), rule);
    schema
}

/// The keys of an input object type, each list in the type's declaration
/// order: what the decisions check and name (a refusal's `missing`,
/// `unknown` and `allowed`, its hint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputKeys {
    /// The keys its schema requires.
    pub required: Vec<&'static str>,
    /// The others.
    pub optional: Vec<&'static str>,
}

impl InputKeys {
    /// The keys of the struct `T`: serde's field names, split by its
    /// schema's `required`.
    pub fn of<T: JsonSchema + DeserializeOwned>() -> InputKeys {
        let schema = schema_of::<T>();
        let required = |key: &&str| {
            schema["required"]
                .as_array()
                .is_some_and(|keys| keys.iter().any(|k| k == *key))
        };
        let (required, optional) = declared_fields::<T>().iter().copied().partition(required);
        InputKeys { required, optional }
    }

    /// Every key, the required ones first.
    pub fn all(&self) -> Vec<&'static str> {
        self.required
            .iter()
            .chain(&self.optional)
            .copied()
            .collect()
    }
}

/// `InputKeys::of::<$type>()`, worked out once per process (the verifier
/// asks for a component's keys per registered component).
macro_rules! keys_of {
    ($type:ty) => {{
        static KEYS: std::sync::OnceLock<$crate::receipt::schema::InputKeys> =
            std::sync::OnceLock::new();
        KEYS.get_or_init($crate::receipt::schema::InputKeys::of::<$type>)
    }};
}
pub(crate) use keys_of;

/// The field names serde's derive gives the struct `T` (its `FIELDS`, in
/// declaration order): what `T::deserialize` hands `deserialize_struct`.
/// Empty when `T` is not a struct.
fn declared_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = None;
    // The capture always ends in an error, once it has the names.
    let _ = T::deserialize(FieldNames {
        fields: &mut fields,
        into_items: false,
    });
    fields.unwrap_or(&[])
}

/// The field names of the struct `T`, or of its items when `T` is a list
/// of structs (`Evidence`, `Topology`), in declaration order: the order
/// the help lists them in (a schema's `properties` are sorted).
pub fn object_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(FieldNames {
        fields: &mut fields,
        into_items: true,
    });
    fields.unwrap_or(&[])
}

/// A deserializer that only records the field names a struct asks for
/// (with `into_items`, also those its first item asks for when it is a
/// list).
struct FieldNames<'a> {
    fields: &'a mut Option<&'static [&'static str]>,
    into_items: bool,
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.into_items {
            visitor.visit_seq(FirstItem(self.fields))
        } else {
            Err(de::Error::custom("not a struct"))
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.fields = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A list whose first item records the field names its type asks for.
struct FirstItem<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::SeqAccess<'de> for FirstItem<'_> {
    type Error = de::value::Error;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        seed.deserialize(FieldNames {
            fields: self.0,
            into_items: false,
        })
        .map(Some)
    }
}

/// A JSON integer of any size, as written (`serde_json`'s
/// `arbitrary_precision`: an `exit_status` of 10^29 is echoed exactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Integer(pub Number);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Integer, D::Error> {
        let number = Number::deserialize(d)?;
        if is_integer(&number) {
            Ok(Integer(number))
        } else {
            Err(de::Error::custom("an integer"))
        }
    }
}

/// The leaf `$type`'s schema is `$schema` (inlined wherever it is used),
/// with its `$rule` in words ([`RULE`]) when the schema's keywords do not
/// say it plainly (a pattern).
macro_rules! leaf_schema {
    ($($type:ty => $schema:tt $(, $rule:expr)?;)*) => {$(
        impl schemars::JsonSchema for $type {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($type).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let schema = schemars::json_schema!($schema);
                $(let schema = $crate::receipt::schema::with_rule(schema, $rule);)?
                schema
            }
        }
    )*};
}
pub(crate) use leaf_schema;

leaf_schema! {
    RunId => {"type": "string", "pattern": IDENTIFIER_PATTERN}, IDENTIFIER_RULE;
    LaneId => {"type": "string", "pattern": IDENTIFIER_PATTERN}, IDENTIFIER_RULE;
    AgentId => {"type": "string", "pattern": IDENTIFIER_PATTERN}, IDENTIFIER_RULE;
    Identifier => {"type": "string", "pattern": IDENTIFIER_PATTERN}, IDENTIFIER_RULE;
    Sha256Hex => {"type": "string", "pattern": SHA256_PATTERN}, SHA256_RULE;
    Integer => {"type": "integer"};
}
