//! What is wrong with a JSON input, field by field (contracts/refusals.md): the
//! missing keys, the unknown ones (with the allowed ones), and each wrong-typed
//! or out-of-limit field with its limit. Pure: the limits come in as the run's
//! own manifest snapshot values. The refusal's reference text stays the first
//! part of the message; [`Fault::detail`] is what follows it (`message:
//! detail`, rendered by the envelope).

use serde_json::{Map, Value, json};

use super::primitives::{Sha256Hex, as_int, char_len, is_sha256_hex};
use super::rules::Limits;
use super::schema::Integer;

/// One evidence reference (rules E1–E9): what `--evidence` and a live
/// report's `evidence_refs` list. Its limits in the schema are the
/// manifest defaults ([`Limits::DEFAULT`]); [`evidence_fault`] checks the
/// run's. A reference is echoed into the receipt as given, so this type is
/// its schema and keys.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
// A field's doc comment is its prose in the help's field table
// (`surface::help`); notes for the reader of this code are plain comments.
pub struct EvidenceItem {
    /// What kind of evidence (e.g. lifecycle, test, review, tool,
    /// user_approval).
    #[schemars(length(min = 1, max = Limits::DEFAULT.max_evidence_kind_chars))]
    pub kind: String,
    /// May be empty. What it shows, in words. Never raw output, prompts or
    /// secrets.
    #[schemars(length(max = Limits::DEFAULT.max_evidence_summary_chars))]
    pub summary: String,
    /// Where it lives.
    #[serde(default)]
    #[schemars(with = "String", length(max = Limits::DEFAULT.max_evidence_path_chars))]
    pub path: Option<String>,
    /// Binds a file, a decision or an earlier evidence list
    /// (evidence-digest prints a list's digest).
    #[serde(default)]
    #[schemars(with = "Sha256Hex")]
    pub checksum: Option<Sha256Hex>,
    /// The exit status of the command it records.
    // An integer of any size, as written.
    #[serde(default)]
    #[schemars(with = "Integer")]
    pub exit_status: Option<Integer>,
}

/// The keys an evidence reference may hold, the required ones first.
fn evidence_keys() -> &'static [&'static str] {
    static KEYS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| super::schema::keys_of!(EvidenceItem).all())
}

/// One field-level finding set: `detail` for the message, `fields` for the
/// envelope's extra key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub detail: String,
    pub fields: Value,
}

/// One wrong-typed or out-of-limit field.
fn invalid_field(field: String, expected: String, limit: Option<u64>) -> Value {
    let mut item = Map::new();
    item.insert("field".into(), json!(field));
    item.insert("expected".into(), json!(expected));
    if let Some(limit) = limit {
        item.insert("limit".into(), json!(limit));
    }
    Value::Object(item)
}

fn fields_value(
    input: &str,
    missing: &[String],
    unknown: &[String],
    allowed: &[&str],
    invalid: Vec<Value>,
) -> Value {
    let mut out = Map::new();
    out.insert("input".into(), json!(input));
    if !missing.is_empty() {
        out.insert("missing".into(), json!(missing));
    }
    if !unknown.is_empty() {
        out.insert("unknown".into(), json!(unknown));
    }
    if !unknown.is_empty() || !missing.is_empty() {
        out.insert("allowed".into(), json!(allowed));
    }
    if !invalid.is_empty() {
        out.insert("invalid".into(), Value::Array(invalid));
    }
    Value::Object(out)
}

fn describe(missing: &[String], unknown: &[String], allowed: &[&str]) -> String {
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing: {}", missing.join(", ")));
    }
    if !unknown.is_empty() {
        parts.push(format!("unknown: {}", unknown.join(", ")));
    }
    if !parts.is_empty() {
        parts.push(format!("allowed: {}", allowed.join(", ")));
    }
    parts.join("; ")
}

/// The top-level type of the `input` flag's file is not `expected`.
pub fn wrong_type(input: &str, expected: &str, found: &Value) -> Fault {
    let found = type_name(found);
    let mut fields = fields_value(input, &[], &[], &[], Vec::new());
    if let Some(map) = fields.as_object_mut() {
        map.insert("expected_type".into(), json!(expected));
        map.insert("found_type".into(), json!(found));
    }
    Fault {
        detail: format!("{input} must hold a JSON {expected}, not a JSON {found}"),
        fields,
    }
}

/// The JSON type name of a value, as the help pages say it.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// The keys of an input object against its `required` and `optional`
/// ones; `None` when they match.
pub fn object_fault(
    input: &str,
    object: &Map<String, Value>,
    required: &[&str],
    optional: &[&str],
) -> Option<Fault> {
    let missing: Vec<String> = required
        .iter()
        .filter(|k| !object.contains_key(**k))
        .map(|k| k.to_string())
        .collect();
    let unknown: Vec<String> = object
        .keys()
        .filter(|k| !required.contains(&k.as_str()) && !optional.contains(&k.as_str()))
        .cloned()
        .collect();
    if missing.is_empty() && unknown.is_empty() {
        return None;
    }
    let allowed: Vec<&str> = required.iter().chain(optional).copied().collect();
    Some(Fault {
        detail: describe(&missing, &unknown, &allowed),
        fields: fields_value(input, &missing, &unknown, &allowed, Vec::new()),
    })
}

/// Everything wrong with an `evidence_refs` list (rules E1–E9), with the
/// limits of `limits`; `None` when nothing is.
pub fn evidence_fault(input: &str, value: &Value, limits: &Limits) -> Option<Fault> {
    let Value::Array(items) = value else {
        return Some(wrong_type(input, "list", value));
    };
    let mut unknown = Vec::new();
    let mut missing = Vec::new();
    let mut invalid = Vec::new();
    if items.len() as u64 > limits.max_evidence_refs {
        invalid.push(invalid_field(
            "[]".into(),
            format!("at most {} evidence references", limits.max_evidence_refs),
            Some(limits.max_evidence_refs),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let Value::Object(map) = item else {
            invalid.push(invalid_field(
                format!("[{i}]"),
                format!("an object, not a {}", type_name(item)),
                None,
            ));
            continue;
        };
        for key in map.keys() {
            if !evidence_keys().contains(&key.as_str()) {
                unknown.push(format!("[{i}].{key}"));
            }
        }
        for key in &super::schema::keys_of!(EvidenceItem).required {
            if !map.contains_key(*key) {
                missing.push(format!("[{i}].{key}"));
            }
        }
        let bounded =
            |key: &str, limit: u64, non_empty: bool, invalid: &mut Vec<Value>| match map.get(key) {
                None => {}
                Some(Value::String(s))
                    if char_len(s) as u64 <= limit && (!non_empty || !s.is_empty()) => {}
                Some(_) => invalid.push(invalid_field(
                    format!("[{i}].{key}"),
                    format!(
                        "a {}string of at most {limit} characters",
                        if non_empty { "non-empty " } else { "" }
                    ),
                    Some(limit),
                )),
            };
        bounded("kind", limits.max_evidence_kind_chars, true, &mut invalid);
        bounded(
            "summary",
            limits.max_evidence_summary_chars,
            false,
            &mut invalid,
        );
        bounded("path", limits.max_evidence_path_chars, false, &mut invalid);
        if let Some(checksum) = map.get("checksum")
            && !matches!(checksum, Value::String(c) if is_sha256_hex(c))
        {
            invalid.push(invalid_field(
                format!("[{i}].checksum"),
                "lowercase SHA-256 hex (64 characters)".into(),
                None,
            ));
        }
        if let Some(status) = map.get("exit_status")
            && as_int(status).is_none()
        {
            invalid.push(invalid_field(
                format!("[{i}].exit_status"),
                "an integer".into(),
                None,
            ));
        }
    }
    if unknown.is_empty() && missing.is_empty() && invalid.is_empty() {
        return None;
    }
    let mut detail = describe(&missing, &unknown, evidence_keys());
    for item in &invalid {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        detail.push_str(&format!(
            "{} must be {}",
            item["field"].as_str().unwrap_or_default(),
            item["expected"].as_str().unwrap_or_default()
        ));
    }
    Some(Fault {
        detail,
        fields: fields_value(input, &missing, &unknown, evidence_keys(), invalid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_unknown_keys_are_named_with_the_allowed_ones() {
        let object = json!({"lane_id": "api", "colour": 1});
        let fault = object_fault(
            "--input",
            object.as_object().unwrap(),
            &["lane_id", "agent_id"],
            &["x"],
        )
        .unwrap();
        assert_eq!(
            fault.detail,
            "missing: agent_id; unknown: colour; allowed: lane_id, agent_id, x"
        );
        assert_eq!(
            fault.fields,
            json!({"input": "--input", "missing": ["agent_id"], "unknown": ["colour"], "allowed": ["lane_id", "agent_id", "x"]})
        );
        assert!(
            object_fault(
                "--input",
                json!({"lane_id": 1, "agent_id": 2}).as_object().unwrap(),
                &["lane_id", "agent_id"],
                &[]
            )
            .is_none()
        );
    }

    #[test]
    fn evidence_limits_come_from_the_given_limits() {
        let limits = Limits {
            max_evidence_summary_chars: 4,
            ..Limits::default()
        };
        let fault = evidence_fault(
            "--evidence",
            &json!([{"kind": "log", "summary": "too long"}]),
            &limits,
        )
        .unwrap();
        assert_eq!(
            fault.fields["invalid"][0],
            json!({"field": "[0].summary", "expected": "a string of at most 4 characters", "limit": 4})
        );
        let fault = evidence_fault("--evidence", &json!({"kind": "log"}), &limits).unwrap();
        assert_eq!(fault.fields["expected_type"], "list");
        assert_eq!(
            fault.detail,
            "--evidence must hold a JSON list, not a JSON object"
        );
        assert!(
            evidence_fault(
                "--evidence",
                &json!([{"kind": "log", "summary": ""}]),
                &limits
            )
            .is_none()
        );
    }
}
