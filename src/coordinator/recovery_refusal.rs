//! Why `recovery-run-create` is refused once its request is well formed
//! (reference-coordinator §12.2): a conflict (exit 5) with the reference's
//! message, whose `fields` (what changed, which file or run) and hint are
//! functions of the reason.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};

/// When the damaged run was found to differ from its diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosisCheck {
    /// Before anything was written.
    BeforeLock,
    /// Under the recovery lock, just before the quarantine copy.
    BeforeQuarantine,
}

impl DiagnosisCheck {
    /// When the change was found, as the reference's message says it.
    fn since(self) -> &'static str {
        match self {
            DiagnosisCheck::BeforeLock => "after receipt diagnosis",
            DiagnosisCheck::BeforeQuarantine => "before quarantine",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryRefusal {
    /// `receipt-diagnose` now says otherwise than the diagnosis supplied:
    /// `changed` are the keys whose values differ.
    #[error("damaged run changed {}", .check.since())]
    DiagnosisChanged {
        check: DiagnosisCheck,
        changed: Vec<String>,
    },
    /// A live process holds the damaged run's receipt lock.
    #[error("damaged run receipt lock is held by a live process")]
    LiveWriter,
    /// The damaged receipt's bytes are not the diagnosed ones.
    #[error("damaged receipt bytes changed after diagnosis")]
    ReceiptChanged {
        diagnosed: (Option<String>, Option<u64>),
        now: (String, u64),
    },
    /// A quarantine copy of that name holds other bytes.
    #[error("existing quarantine receipt does not match")]
    QuarantineDiffers { name: String },
    /// The copy just written does not hold the damaged receipt's bytes.
    #[error("quarantine receipt verification failed")]
    QuarantineUnverified { name: String },
    /// `--owner-file` exists but is not a recovery run's handle.
    #[error("existing recovery owner handle is invalid")]
    ExistingHandleInvalid,
    /// The handle names a run that is missing or does not verify.
    #[error("existing recovery run is invalid")]
    ExistingRunInvalid { run_id: String },
    /// The handle's run is a recovery of something else.
    #[error("existing recovery run provenance does not match")]
    OtherRecovery { run_id: String },
}

impl ConflictReason for RecoveryRefusal {
    /// Its `fields` and hint; `{run_id}`-style placeholders are filled by
    /// the envelope.
    fn teaching(&self) -> Teaching {
        let diagnose_again = "diagnose the run again (bluetape-flow receipt-diagnose --run-id {run_id} > diagnosis.json) and pass that as --input";
        let (fields, hint) = match self {
            Self::DiagnosisChanged { changed, .. } => (
                json!({"changed": changed}),
                format!(
                    "the damaged run no longer matches the diagnosis ({} changed): {diagnose_again}",
                    changed.join(", ")
                ),
            ),
            Self::LiveWriter => (
                json!({"lock_owner_status": "locked_alive"}),
                format!(
                    "a live process holds the damaged run's receipt lock and may still be writing: let it finish or stop it, then {diagnose_again}"
                ),
            ),
            Self::ReceiptChanged { diagnosed, now } => (
                json!({"diagnosed_receipt_hash": diagnosed.0, "diagnosed_receipt_size": diagnosed.1,
                       "receipt_hash": now.0, "receipt_size": now.1}),
                format!("the damaged receipt was written to since: {diagnose_again}"),
            ),
            Self::QuarantineDiffers { name } => (
                json!({"quarantine": name}),
                format!(
                    "retrying cannot help: quarantine/{name} holds other bytes than the damaged receipt; see it with bluetape-flow doctor"
                ),
            ),
            Self::QuarantineUnverified { name } => (
                json!({"quarantine": name}),
                format!(
                    "the damaged receipt changed while it was copied to quarantine/{name} (the copy was removed): {diagnose_again}"
                ),
            ),
            Self::ExistingHandleInvalid => (
                json!({"input": "--owner-file"}),
                "retrying cannot help: --owner-file names a file that is not a recovery run's owner handle; name a new handle under handles/".to_string(),
            ),
            Self::ExistingRunInvalid { run_id } => (
                json!({"input": "--owner-file", "recovery_run_id": run_id}),
                format!(
                    "retrying cannot help: --owner-file belongs to run {run_id}, which is missing or does not verify (bluetape-flow verify --run-id {run_id}); name a new handle under handles/"
                ),
            ),
            Self::OtherRecovery { run_id } => (
                json!({"input": "--owner-file", "recovery_run_id": run_id}),
                format!(
                    "retrying cannot help: --owner-file belongs to recovery run {run_id}, made from another diagnosis, evidence or run; name a new handle under handles/"
                ),
            ),
        };
        Teaching::reason(fields, hint)
    }
}
