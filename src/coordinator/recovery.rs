//! Decisions of `recovery-run-create` (reference-coordinator §12.2): a
//! damaged receipt is never repaired, truncated or continued. Instead its
//! bytes are kept in quarantine and a brand-new run starts whose first
//! event records where it came from (the provenance). The rules here are
//! pure: what a diagnosis must look like, when it is still current, the
//! provenance it yields, and when an existing recovery run is the same one.

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value, json};

use super::decide::{ErrorKind, FlowError, invalid, require_evidence};
use super::decide::{InputRefusal, InputRule};
use super::recovery_refusal::{DiagnosisCheck, RecoveryRefusal};
use crate::receipt::canonical;
use crate::receipt::rules::check_recovery_provenance;

/// Envelope keys of a `receipt-diagnose` output; dropped from the input so
/// the printed output can be passed back as is.
const ENVELOPE_KEYS: [&str; 3] = ["ok", "operation", "state_root"];

/// The diagnosis a caller supplied and the checksum it claims.
#[derive(Debug, Clone, PartialEq)]
pub struct SuppliedDiagnosis {
    pub diagnosis: Map<String, Value>,
    /// The given `diagnosis_checksum` (any JSON value), or the computed one
    /// when none was given.
    pub checksum: Value,
}

/// SHA-256 of the canonical JSON of a diagnosis object.
pub fn diagnosis_checksum(diagnosis: &Map<String, Value>) -> String {
    canonical::digest(&Value::Object(diagnosis.clone()))
}

/// Split an `--input` object into the diagnosis and its checksum.
pub fn supplied_diagnosis(mut input: Map<String, Value>) -> SuppliedDiagnosis {
    let given = input.remove("diagnosis_checksum");
    for key in ENVELOPE_KEYS {
        input.remove(key);
    }
    let checksum = match given {
        Some(value) if !value.is_null() => value,
        _ => json!(diagnosis_checksum(&input)),
    };
    SuppliedDiagnosis {
        diagnosis: input,
        checksum,
    }
}

/// Checks on the request itself, in the reference's order (all exit 2):
/// approval evidence, a blocked diagnosis, a checksum that matches it.
pub fn check_request(supplied: &SuppliedDiagnosis, approval: &Value) -> Result<String, FlowError> {
    require_evidence(approval)?;
    if supplied.diagnosis.get("effective_state") != Some(&json!("blocked")) {
        return invalid(InputRule::RecoveryNeedsBlockedDiagnosis);
    }
    let computed = diagnosis_checksum(&supplied.diagnosis);
    if supplied.checksum != json!(computed) {
        return invalid(InputRule::DiagnosisChecksum);
    }
    Ok(computed)
}

/// The damaged run must still be diagnosed exactly as supplied.
pub fn require_same_diagnosis(
    current: &Map<String, Value>,
    supplied: &Map<String, Value>,
    check: DiagnosisCheck,
) -> Result<(), FlowError> {
    if current != supplied {
        let mut changed: Vec<String> = current
            .keys()
            .chain(supplied.keys())
            .filter(|key| current.get(*key) != supplied.get(*key))
            .cloned()
            .collect();
        changed.sort();
        changed.dedup();
        return Err(FlowError::from(RecoveryRefusal::DiagnosisChanged {
            check,
            changed,
        }));
    }
    Ok(())
}

/// A live process holds the damaged run's receipt lock: it may be in the
/// middle of writing the very bytes we would quarantine. Refused (exit 5,
/// retryable) until it is gone; the reference copies anyway.
pub fn require_no_live_writer(diagnosis: &Map<String, Value>) -> Result<(), FlowError> {
    if diagnosis.get("lock_owner_status") == Some(&json!("locked_alive")) {
        return Err(FlowError::from(RecoveryRefusal::LiveWriter));
    }
    Ok(())
}

/// The receipt bytes on disk are still the diagnosed ones.
pub fn require_receipt_identity(
    diagnosis: &Map<String, Value>,
    hash: &str,
    size: u64,
) -> Result<(), FlowError> {
    if diagnosis.get("receipt_hash") != Some(&json!(hash))
        || diagnosis.get("receipt_size") != Some(&json!(size))
    {
        let diagnosed = (
            diagnosis
                .get("receipt_hash")
                .and_then(Value::as_str)
                .map(str::to_owned),
            diagnosis.get("receipt_size").and_then(Value::as_u64),
        );
        return Err(FlowError::from(RecoveryRefusal::ReceiptChanged {
            diagnosed,
            now: (hash.to_owned(), size),
        }));
    }
    Ok(())
}

/// Where the quarantined copy of a damaged receipt lives, relative to the
/// state root: named by the run and the SHA-256 of its bytes.
pub fn quarantine_name(run_id: &str, receipt_hash: &str) -> String {
    format!("{run_id}-{receipt_hash}.receipt.jsonl")
}

/// What the recovery run's first event records about its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvenanceInput<'a> {
    pub original_run_id: &'a str,
    pub diagnosis_checksum: &'a str,
    pub manifest_version: &'a str,
    pub manifest_hash: &'a str,
    pub quarantine_path: &'a str,
    pub quarantine_hash: &'a str,
}

/// The nine provenance fields, checked against the receipt contract before
/// anything is written (so a refusal leaves no quarantine file behind).
/// A diagnosis whose first line is bad has trusted sequence 0 and an empty
/// trusted checksum; that is accepted (decisions.md 11).
pub fn provenance(
    input: &ProvenanceInput<'_>,
    diagnosis: &Map<String, Value>,
) -> Result<Map<String, Value>, FlowError> {
    let field = |key: &str| {
        diagnosis
            .get(key)
            .cloned()
            .ok_or_else(|| FlowError::from(InputRefusal::DiagnosisKey { key: key.into() }))
    };
    let map: Map<String, Value> = [
        ("recovery_original_run_id", json!(input.original_run_id)),
        (
            "recovery_diagnose_checksum",
            json!(input.diagnosis_checksum),
        ),
        ("recovery_manifest_version", json!(input.manifest_version)),
        ("recovery_manifest_hash", json!(input.manifest_hash)),
        ("recovery_quarantine_path", json!(input.quarantine_path)),
        ("recovery_quarantine_hash", json!(input.quarantine_hash)),
        ("recovery_first_bad_sequence", field("first_bad_sequence")?),
        ("recovery_trusted_sequence", field("last_trusted_sequence")?),
        ("recovery_trusted_checksum", field("last_trusted_checksum")?),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect();
    check_recovery_provenance(&map).map_err(ErrorKind::Contract)?;
    Ok(map)
}

/// The `metadata` of the recovery run's `run_created`.
pub fn first_event_metadata(provenance: &Map<String, Value>) -> Map<String, Value> {
    let mut metadata = provenance.clone();
    metadata.insert("owner_epoch".into(), json!(1));
    metadata
}

/// What an existing recovery run (found through the owner handle given
/// again) must match for a retry to return it instead of creating another.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingRecovery<'a> {
    /// The existing run's first receipt event.
    /// The run the handle names.
    pub run_id: &'a str,
    pub first_event: &'a Map<String, Value>,
    /// Its manifest `_run` object.
    pub run: &'a Map<String, Value>,
    /// The handle's fingerprint and epoch.
    pub handle_fingerprint: &'a str,
    pub handle_epoch: u64,
}

/// The retry rule (§12.2 step 7): same provenance, same approval, same
/// workflow, repo and components as the damaged run, owned by this handle.
pub fn require_same_recovery(
    existing: &ExistingRecovery<'_>,
    provenance: &Map<String, Value>,
    approval: &Value,
    damaged_run: &Map<String, Value>,
) -> Result<(), FlowError> {
    let first = existing.first_event;
    let same = EventType::of(first) == Some(EventType::RunCreated)
        && first.get("metadata") == Some(&Value::Object(first_event_metadata(provenance)))
        && first.get("evidence_refs") == Some(approval)
        && ["workflow_type", "repo_root", "component_ids"]
            .iter()
            .all(|key| existing.run.get(*key) == damaged_run.get(*key))
        && existing.run.get("owner_fingerprint") == Some(&json!(existing.handle_fingerprint))
        && existing.run.get("owner_epoch") == Some(&json!(existing.handle_epoch));
    if !same {
        return Err(FlowError::from(RecoveryRefusal::OtherRecovery {
            run_id: existing.run_id.to_owned(),
        }));
    }
    Ok(())
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
