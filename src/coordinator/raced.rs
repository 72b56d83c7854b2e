//! What another writer changed under a command, and what a published git
//! ref refuses: conflicts (exit 5) whose `fields` and hint are functions
//! of the reason. A race is retryable: the same command run again reads
//! the state anew.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};

/// Another writer changed what this command was reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Raced {
    /// A reader met the receipt's last line half-written by a live writer
    /// (decisions.md 13).
    #[error("append in progress: the receipt's last line is being written")]
    AppendInProgress,
    /// `checkpoint.json` held a copy of the run manifest that is not
    /// `manifest.json` (`removed`: under the lock, the checkpoint is gone).
    #[error("checkpoint.json held a copy of the run manifest that is not manifest.json; {}nothing was written", if *.removed { "the checkpoint was removed and " } else { "" })]
    CheckpointManifest { removed: bool },
    /// A receipt appeared for the run `init` was creating.
    #[error("receipt head changed before mutation")]
    ReceiptAppeared,
    /// The receipt moved on while `otel-export` streamed it.
    #[error("the receipt changed while it was exported; run otel-export again")]
    OtelExport,
    /// The receipt moved on while `report` read it.
    #[error("the receipt moved on while the report was read; run it again")]
    ReportRead,
    /// The receipt moved on while `bundle-export` or `publish` read it.
    #[error("the receipt changed while it was read; run it again")]
    BundleRead,
    /// A bundle member changed while it was exported.
    #[error("a bundle member changed while it was exported; run it again")]
    MemberChanged { member: String },
}

impl ConflictReason for Raced {
    fn teaching(&self) -> Teaching {
        let (fields, hint) = match self {
            Self::AppendInProgress => (
                json!({"changed": "receipt"}),
                "another writer is appending: retry in a moment",
            ),
            Self::CheckpointManifest { .. } => (
                json!({"changed": "checkpoint"}),
                "run the same command again: it reads manifest.json itself",
            ),
            Self::MemberChanged { member } => (
                json!({"changed": member}),
                "run the same command again: it reads every member anew",
            ),
            _ => (
                json!({"changed": "receipt"}),
                "another writer appended meanwhile: run the same command again",
            ),
        };
        Teaching::reason(fields, hint.to_string())
    }
}

/// `publish` refuses the git ref it would move.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishRefusal {
    /// The ref publishes another run.
    #[error("the git ref publishes another run")]
    OtherRun { reference: String, run_id: String },
    /// The run's receipt does not extend the published one.
    #[error(
        "the receipt does not extend the one published: a rewrite is never published over history"
    )]
    NotExtending {
        reference: String,
        sequence: u64,
        checksum: String,
    },
    /// The ref moved between its read and its update.
    #[error("the git ref moved while the run was published; run publish again")]
    RefMoved { reference: String },
}

impl ConflictReason for PublishRefusal {
    fn teaching(&self) -> Teaching {
        let (fields, hint) = match self {
            Self::OtherRun { reference, run_id } => (
                json!({"ref": reference, "published_run_id": run_id}),
                format!(
                    "retrying cannot help: {reference} publishes run {run_id}; publish this run under its own ref (the default is refs/bluetape/runs/<run-id>)"
                ),
            ),
            Self::NotExtending {
                reference,
                sequence,
                checksum,
            } => (
                json!({"ref": reference, "published_sequence": sequence, "published_checksum": checksum}),
                format!(
                    "retrying cannot help: {reference} published event {sequence} as {checksum}, and this receipt holds another event there; a rewritten history is never published over the old one (bluetape-flow bundle-verify --git REPO --ref {reference} checks what was published)"
                ),
            ),
            Self::RefMoved { reference } => (
                json!({"ref": reference}),
                format!("another writer moved {reference} meanwhile: run publish again"),
            ),
        };
        Teaching::reason(fields, hint)
    }
}
