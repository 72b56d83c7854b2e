//! The reference's JSON envelopes: `json.dumps(obj, ensure_ascii=False,
//! sort_keys=True)`, i.e. sorted keys with `", "` and `": "` separators.

use super::teach::Given;
use serde_json::{Map, Value};

use crate::commands::{ErrorKind, FlowError};
use crate::receipt::canonical;

/// Render like Python's default `json.dumps` with sorted keys.
pub fn render(value: &Value) -> String {
    let mut out = Vec::new();
    write(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                canonical::write_string(out, key);
                out.extend_from_slice(b": ");
                write(out, item);
            }
            out.push(b'}');
        }
        scalar => out.extend_from_slice(&canonical::to_vec(scalar)),
    }
}

/// A command's typed answer as the keys of its success envelope: the one
/// place an answer struct becomes JSON (architecture §3a). serde_json's map
/// is sorted, so the keys come out in the order `render` prints anyway.
pub fn data(answer: &impl serde::Serialize) -> Map<String, Value> {
    match serde_json::to_value(answer) {
        Ok(Value::Object(map)) => map,
        // An answer is a struct of strings, numbers, lists and maps with
        // string keys: serde_json writes such a value as an object and
        // cannot fail on it, so anything else is a bug in the answer's type.
        other => panic!("a command's answer must serialise to a JSON object, not {other:?}"),
    }
}

/// The success envelope: `ok`, `operation`, `state_root` plus the data.
pub fn success(operation: &str, state_root: &str, data: Map<String, Value>) -> String {
    success_in(operation, Some(state_root), data)
}

/// [`success`], without `state_root` when the command used none.
pub fn success_in(
    operation: &str,
    state_root: Option<&str>,
    mut data: Map<String, Value>,
) -> String {
    data.insert("ok".into(), Value::Bool(true));
    data.insert("operation".into(), Value::String(operation.to_string()));
    if let Some(state_root) = state_root {
        data.insert("state_root".into(), Value::String(state_root.to_string()));
    }
    render(&Value::Object(data))
}

/// The failure envelope and its exit status.
pub fn failure(error: &FlowError) -> (u8, String) {
    failure_with(error, Given::NOTHING)
}

/// The failure envelope, with the hint's `{run_id}`-style placeholders
/// filled from what the caller gave (the command's own flags) where it has
/// them.
pub fn failure_with(error: &FlowError, given: Given) -> (u8, String) {
    let (code, name, retryable, next) = error.classify();
    let teach = error.teaching();
    // What was attached where the error was made, over what its reason
    // teaches, over its class's default.
    let own = error.own_teaching();
    let hint = teach
        .and_then(|t| t.hint.clone())
        .or_else(|| own.as_ref().and_then(|t| t.hint.clone()))
        .or_else(|| super::teach::default_hint(error.kind()))
        .map(|hint| super::teach::fill(&hint, given));
    let mut fields = teach
        .and_then(|t| t.fields.clone())
        .or_else(|| own.and_then(|t| t.fields));
    let mut full_message = error.full_message();
    let input_error = name == "contract_error";
    super::teach::name_the_file(&mut full_message, fields.as_mut(), given, input_error);
    let kind = error.kind();
    let mut map = Map::new();
    map.insert("error".into(), Value::String(name.to_string()));
    let message: String = full_message.chars().take(500).collect();
    map.insert("message".into(), Value::String(message));
    map.insert("ok".into(), Value::Bool(false));
    map.insert("retryable".into(), Value::Bool(retryable));
    if let Some(next) = next {
        map.insert("next_command".into(), Value::String(next.to_string()));
    }
    if let ErrorKind::ReceiptDamaged(damage) = kind {
        // Extra keys beyond the reference's envelope: where trust ends.
        map.insert(
            "first_bad_sequence".into(),
            Value::from(damage.first_bad_sequence),
        );
        map.insert(
            "last_trusted_sequence".into(),
            Value::from(damage.last_trusted_sequence),
        );
        map.insert(
            "last_trusted_checksum".into(),
            Value::String(damage.last_trusted_checksum.clone()),
        );
    }
    if let ErrorKind::Breach { breaches, .. } = kind {
        // Extra keys: which events broke which rule, and the way on.
        let shown: Vec<_> = breaches.iter().take(16).cloned().collect();
        map.insert(
            "breaches".into(),
            crate::coordinator::breach::breaches_value(&shown),
        );
        map.insert(
            "hint".into(),
            Value::String(crate::coordinator::breach::HINT.to_string()),
        );
    }
    if let ErrorKind::Export { endpoint, .. } = kind {
        // Extra key: the receiver that failed (no user info, no query).
        map.insert("endpoint".into(), Value::String(endpoint.clone()));
    }
    if let ErrorKind::CompletionBlocked {
        missing_ids,
        breaches,
        ..
    } = kind
    {
        map.insert(
            "missing_ids".into(),
            Value::from(missing_ids.iter().take(64).cloned().collect::<Vec<_>>()),
        );
        if !breaches.is_empty() {
            let shown: Vec<_> = breaches.iter().take(16).cloned().collect();
            map.insert(
                "breaches".into(),
                crate::coordinator::breach::breaches_value(&shown),
            );
        }
    }
    // Extra keys (contracts/refusals.md): the fix, and the input fields at
    // fault.
    if let Some(hint) = hint {
        map.insert("hint".into(), Value::String(hint));
    }
    if let Some(fields) = fields {
        map.insert("fields".into(), fields);
    }
    (code, render(&Value::Object(map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer becomes the envelope's keys as its fields are named,
    /// flattened parts merged in, absent options left out.
    #[test]
    fn an_answer_becomes_the_envelopes_keys() {
        #[derive(serde::Serialize)]
        struct Part {
            b: u64,
        }
        #[derive(serde::Serialize)]
        struct Answer {
            a: &'static str,
            #[serde(flatten)]
            part: Part,
            #[serde(skip_serializing_if = "Option::is_none")]
            absent: Option<u64>,
            null: Option<u64>,
        }
        let answer = Answer {
            a: "x",
            part: Part { b: 1 },
            absent: None,
            null: None,
        };
        assert_eq!(
            success("op", "/r", data(&answer)),
            r#"{"a": "x", "b": 1, "null": null, "ok": true, "operation": "op", "state_root": "/r"}"#
        );
    }

    #[test]
    fn python_default_separators() {
        let v: Value = serde_json::from_str(r#"{"b":[1,{"c":"✓"}],"a":null}"#).unwrap();
        assert_eq!(render(&v), r#"{"a": null, "b": [1, {"c": "✓"}]}"#);
    }

    #[test]
    fn failure_envelope_shape() {
        let (code, text) = failure(&FlowError::from(ErrorKind::ReceiptCorrupt(
            "receipt contains no events".into(),
        )));
        assert_eq!(code, 3);
        assert_eq!(
            text,
            r#"{"error": "receipt_corrupt", "hint": "find where trust ends: bluetape-flow receipt-diagnose --run-id <run_id>; a damaged run goes on in a new one made by recovery-run-create", "message": "receipt contains no events", "next_command": "receipt-diagnose", "ok": false, "retryable": false}"#
        );
        let long = "x".repeat(600);
        let (_, text) = failure(&FlowError::contract(long));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["message"].as_str().unwrap().len(), 500);
    }
    /// A store refusal keeps its kind up to here: the exit status, the
    /// reference's keys and the hint follow from it, and a kind without a
    /// fix to teach carries no hint.
    #[test]
    fn store_refusals_keep_their_kind_to_the_envelope() {
        use crate::store::StoreError;
        let envelope = |e: StoreError| {
            let error = FlowError::from(e);
            assert!(matches!(error.kind(), ErrorKind::Store(_)), "{error:?}");
            let (code, text) = failure(&error);
            (code, serde_json::from_str::<Value>(&text).unwrap())
        };
        let (code, held) = envelope(StoreError::LockHeld("state lock owner is live".into()));
        assert_eq!(
            (code, &held["error"], &held["retryable"]),
            (5, &Value::from("coordinator_conflict"), &Value::Bool(true))
        );
        assert_eq!(held["hint"], crate::commands::error::LOCK_HELD_HINT);
        assert_eq!(held["next_command"], "resume-check");
        let (code, insecure) = envelope(StoreError::Insecure("run directory is not 0700".into()));
        assert_eq!(
            (code, &insecure["error"], &insecure["retryable"]),
            (2, &Value::from("contract_error"), &Value::Bool(false))
        );
        assert_eq!(insecure["hint"], crate::commands::error::INSECURE_HINT);
        for kind in [
            StoreError::Moved("run directory moved".into()),
            StoreError::Invalid("not a regular file".into()),
        ] {
            let (code, moved) = envelope(kind);
            assert_eq!((code, &moved["error"]), (2, &Value::from("contract_error")));
            assert!(
                moved.get("hint").is_none() && moved.get("next_command").is_none(),
                "{moved}"
            );
        }
        let (code, busy) = envelope(StoreError::Busy("another writer".into()));
        assert_eq!((code, &busy["retryable"]), (5, &Value::Bool(true)));
    }

    /// What a reason teaches reaches the envelope: the detail after the
    /// message, its `fields` and hint; teaching attached where it was made
    /// wins over it.
    #[test]
    fn the_reason_teaches_in_the_envelope() {
        use crate::coordinator::decide::{InputRefusal, InputRule};
        let lease = FlowError::from(InputRefusal::LeaseTooLong {
            max: 60,
            latest: Some("2026-07-14T01:06:00Z".into()),
        });
        let (code, text) = failure(&lease);
        assert_eq!(code, 2);
        assert_eq!(
            text,
            r#"{"error": "contract_error", "fields": {"input": "--input", "invalid": [{"expected": "at most 60 seconds after observed_at", "field": "silence_lease_deadline", "limit": 60}]}, "hint": "give silence_lease_deadline at most 2026-07-14T01:06:00Z", "message": "silence lease exceeds manifest maximum: at most 60 s after observed_at", "ok": false, "retryable": false}"#
        );
        let word = FlowError::from(InputRule::InterruptToolEvidence);
        let (_, text) = failure(&word);
        assert!(
            text.contains(r#""fields": {"input": "--evidence", "invalid": [{"expected": "an item of kind \"tool\" whose summary contains the word \"interrupt\" (any case)", "field": "summary"}]}"#),
            "{text}"
        );
        let overridden = word.hinted("another hint");
        let (_, text) = failure(&overridden);
        assert!(text.contains(r#""hint": "another hint""#), "{text}");
        let (_, plain) = failure(&FlowError::from(InputRule::TopologyCycle));
        assert_eq!(
            plain,
            r#"{"error": "contract_error", "message": "topology dependency cycle", "ok": false, "retryable": false}"#
        );
    }
}
