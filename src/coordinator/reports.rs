//! Decisions of the bound reports (reference-coordinator §13):
//! `handoff-create` and `live-report-create`. A report is a fixed-shape
//! object of hashes — never a secret, a prompt or raw output — whose
//! canonical bytes are stored once under `reports/` and whose SHA-256 and
//! the receipt head it was made at are bound into the receipt. One report
//! per kind per run; repeating the same binding is idempotent.

use serde_json::{Map, Value, json};

use super::decide::{ErrorKind, FlowError, Intent, invalid, refused};
use super::decide::{InputRefusal, InputRule};
use super::inputs::{HandoffReport, LiveReport};
use super::report_refusal::ReportRefusal;
use super::state::{CoordinatorState, RunState};
use crate::receipt::canonical;
use crate::receipt::lax_time::{LaxTimeError, parse_lax_timestamp};
use crate::receipt::primitives::{as_int, char_len, is_sha256_hex};
use crate::receipt::rules::{Limits, check_evidence};
use crate::receipt::schema::keys_of;

pub use crate::receipt::vocab::ReportKind;

/// Substrings no report may contain anywhere (keys or values), compared
/// with the lower-cased canonical JSON: a report binds hashes, it never
/// carries a credential, a prompt or raw command output.
pub const FORBIDDEN_REPORT_TERMS: [&str; 6] = [
    "token",
    "password",
    "secret",
    "prompt",
    "raw_output",
    "fencing",
];

/// Most `target_hashes` entries and `command_ids` a report may list.
const MAX_TARGETS: usize = 64;
const MAX_COMMANDS: usize = 64;

impl ReportKind {
    /// The run states the report can be made in.
    pub fn run_states(self) -> &'static [RunState] {
        match self {
            ReportKind::Handoff => &[RunState::Running, RunState::Recovering],
            ReportKind::Live => &[RunState::Completed],
        }
    }

    /// The report's keys (all required).
    fn keys(self) -> &'static [&'static str] {
        match self {
            ReportKind::Handoff => &keys_of!(HandoffReport).required,
            ReportKind::Live => &keys_of!(LiveReport).required,
        }
    }

    fn has_field(self, key: &str) -> bool {
        self.keys().contains(&key)
    }

    fn field_count(self) -> usize {
        self.keys().len()
    }
}

/// The run state allows this kind of report now.
pub fn require_report_state(state: &CoordinatorState, kind: ReportKind) -> Result<(), FlowError> {
    if !kind.run_states().contains(&state.run_state_enum()) {
        return super::decide::run_state_refused(state.run_state_enum(), kind.run_states());
    }
    Ok(())
}

fn checksum_field(payload: &Map<String, Value>, field: &str) -> Result<(), FlowError> {
    match payload.get(field).and_then(Value::as_str) {
        Some(text) if is_sha256_hex(text) => Ok(()),
        _ => invalid(InputRefusal::Sha256 {
            field: field.into(),
        }),
    }
}

/// A `target_hashes` key: a bounded relative path without `..`.
pub(crate) fn is_target_path(path: &str) -> bool {
    !path.is_empty()
        && char_len(path) <= 256
        && !path.starts_with('/')
        && !path.split('/').any(|part| part == "..")
}

/// Validate the payload's shape, in the reference's order (all exit 2).
pub fn validate_report_payload(
    kind: ReportKind,
    payload: &Value,
    limits: &Limits,
) -> Result<Map<String, Value>, FlowError> {
    let Some(map) = payload.as_object() else {
        return invalid(InputRule::ReportFields);
    };
    if map.len() != kind.field_count() || !map.keys().all(|k| kind.has_field(k)) {
        return invalid(InputRule::ReportFields);
    }
    let lowered = canonical::to_string(payload).to_lowercase();
    if FORBIDDEN_REPORT_TERMS
        .iter()
        .any(|term| lowered.contains(term))
    {
        return invalid(InputRule::ReportForbiddenTerms);
    }
    for field in [
        "canonical_sha",
        "agents_hash",
        "skill_hash",
        "manifest_hash",
        "receipt_head",
    ] {
        checksum_field(map, field)?;
    }
    if as_int(&map["owner_epoch"]).is_none_or(|epoch| epoch < 1) {
        return invalid(InputRule::OwnerEpochNotPositive);
    }
    let targets_ok = match &map["target_hashes"] {
        Value::Object(targets) => {
            targets.len() <= MAX_TARGETS
                && targets.iter().all(|(path, checksum)| {
                    is_target_path(path) && checksum.as_str().is_some_and(is_sha256_hex)
                })
        }
        _ => false,
    };
    if !targets_ok {
        return invalid(InputRule::TargetHashes);
    }
    if kind == ReportKind::Live {
        for field in ["source_hash", "rendered_hash", "live_hash"] {
            checksum_field(map, field)?;
        }
        let commands = match &map["command_ids"] {
            Value::Array(ids)
                if (1..=MAX_COMMANDS).contains(&ids.len())
                    && ids.iter().all(|id| {
                        id.as_str()
                            .is_some_and(|id| (1..=128).contains(&char_len(id)))
                    }) =>
            {
                ids.len()
            }
            _ => return invalid(InputRule::CommandIds),
        };
        let Value::Array(timestamps) = &map["timestamps"] else {
            return invalid(InputRule::TimestampsAlign);
        };
        if timestamps.len() != commands {
            return invalid(InputRule::TimestampsAlign);
        }
        for timestamp in timestamps {
            // The reference parses report timestamps laxly and does not
            // insist on a time part.
            let parsed = timestamp
                .as_str()
                .map(parse_lax_timestamp)
                .unwrap_or(Err(LaxTimeError::Invalid));
            if matches!(parsed, Err(LaxTimeError::Invalid)) {
                return invalid(InputRule::ReportTimestamp);
            }
        }
        if as_int(&map["exit_status"]).is_none() {
            return invalid(InputRule::ExitStatusNotInteger);
        }
        check_evidence(&map["evidence_refs"], limits).map_err(ErrorKind::Contract)?;
    }
    Ok(map.clone())
}

/// A validated report ready to be stored and bound.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundReport {
    pub kind: ReportKind,
    /// Canonical JSON of the payload plus LF: the file's exact bytes.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`.
    pub checksum: String,
    /// `<run_id>-<kind>-<first 16 hex of checksum>.json`.
    pub file_name: String,
    /// The receipt head the payload names (the pre-event head).
    pub receipt_head: String,
    /// The binding metadata, `owner_epoch` included.
    pub metadata: Map<String, Value>,
}

impl BoundReport {
    /// The path recorded in the receipt, relative to the state root.
    pub fn relative_path(&self) -> String {
        format!("reports/{}", self.file_name)
    }

    /// The keys a report command adds to its success output.
    pub fn output(&self) -> ReportOutput {
        ReportOutput {
            report_path: self.relative_path(),
            report_checksum: self.checksum.clone(),
            report_receipt_head: self.receipt_head.clone(),
        }
    }
}

/// What a report command tells about the report it bound
/// (contracts/commands.md "Owner transfer, recovery and bound reports"):
/// the same values the receipt binds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReportOutput {
    /// The report file, relative to the state root (`reports/<name>`).
    pub report_path: String,
    /// SHA-256 of the file's bytes.
    pub report_checksum: String,
    /// The receipt head the report names (the head before its event).
    pub report_receipt_head: String,
}

/// Check the payload against the run (its id, current epoch and manifest)
/// and build the binding.
pub fn bind_report(
    state: &CoordinatorState,
    kind: ReportKind,
    run_id: &str,
    manifest_hash: &str,
    payload: Map<String, Value>,
) -> Result<BoundReport, FlowError> {
    if payload.get("run_id").and_then(Value::as_str) != Some(run_id) {
        return invalid(InputRule::ReportRunId);
    }
    if as_int(&payload["owner_epoch"]) != Some(i128::from(state.owner_epoch())) {
        return refused(ReportRefusal::StaleEpoch {
            given: payload["owner_epoch"].clone(),
            current: state.owner_epoch(),
        });
    }
    if payload.get("manifest_hash").and_then(Value::as_str) != Some(manifest_hash) {
        return refused(ReportRefusal::StaleManifest {
            given: payload.get("manifest_hash").cloned().unwrap_or(Value::Null),
            current: manifest_hash.to_string(),
        });
    }
    let receipt_head = payload
        .get("receipt_head")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut bytes = canonical::to_vec(&Value::Object(payload));
    bytes.push(b'\n');
    let checksum = canonical::sha256_hex(&bytes);
    let file_name = format!("{run_id}-{}-{}.json", kind.as_str(), &checksum[..16]);
    let mut metadata = Map::new();
    metadata.insert("owner_epoch".into(), json!(state.owner_epoch()));
    metadata.insert("report_kind".into(), json!(kind.as_str()));
    metadata.insert("report_path".into(), json!(format!("reports/{file_name}")));
    metadata.insert("report_checksum".into(), json!(checksum));
    metadata.insert("report_receipt_head".into(), json!(receipt_head));
    Ok(BoundReport {
        kind,
        bytes,
        checksum,
        file_name,
        receipt_head,
        metadata,
    })
}

/// Whether this report still has to be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The same binding is already in the receipt: nothing to append.
    AlreadyBound,
    /// Not bound yet, and the payload names the current head.
    Unbound,
}

/// Compare with what the receipt already binds for this kind.
pub fn binding_status(
    state: &CoordinatorState,
    report: &BoundReport,
) -> Result<Binding, FlowError> {
    if let Some(existing) = state.reports().get(report.kind.as_str()) {
        if *existing != report.metadata {
            return refused(ReportRefusal::AlreadyBound {
                kind: report.kind.as_str().to_string(),
                path: existing.get("report_path").cloned().unwrap_or(Value::Null),
            });
        }
        return Ok(Binding::AlreadyBound);
    }
    if report.receipt_head != state.last_checksum() {
        return refused(ReportRefusal::StaleHead {
            given: report.receipt_head.clone(),
            current: state.last_checksum().to_string(),
        });
    }
    Ok(Binding::Unbound)
}

/// In-lock decision: same state rules, and the head has not moved since
/// the payload named it. The evidence is the report's checksum.
pub fn decide_report(
    state: &CoordinatorState,
    report: &BoundReport,
) -> Result<Vec<Intent>, FlowError> {
    require_report_state(state, report.kind)?;
    if state.last_checksum() != report.receipt_head {
        return refused(ReportRefusal::HeadMoved {
            given: report.receipt_head.clone(),
            current: state.last_checksum().to_string(),
        });
    }
    let mut metadata = report.metadata.clone();
    metadata.remove("owner_epoch");
    let evidence = json!([{
        "kind": "report",
        "summary": "immutable report bound to receipt head",
        "checksum": report.checksum,
    }]);
    Ok(vec![Intent::about_run(
        report.kind.event_type(),
        evidence,
        None,
        metadata,
    )])
}

#[cfg(test)]
#[path = "reports_tests.rs"]
mod tests;
