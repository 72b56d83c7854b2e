//! Why a report (`handoff-create`, `live-report-create`) cannot be bound
//! to the receipt as it is: a conflict (exit 5) with the reference's
//! message, whose `fields` say what the payload named and what the run
//! has now, and whose hint says what to make the report against.

use serde_json::{Value, json};

use super::decide::{ConflictReason, Teaching};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportRefusal {
    /// The payload's `owner_epoch` is not the run's current one.
    #[error("report owner epoch is stale")]
    StaleEpoch { given: Value, current: u64 },
    /// The payload's `manifest_hash` is not the run's manifest's.
    #[error("report manifest hash is stale")]
    StaleManifest { given: Value, current: String },
    /// The payload's `receipt_head` is not the receipt's head.
    #[error("report receipt head is stale")]
    StaleHead { given: String, current: String },
    /// Another writer appended between the check and the commit.
    #[error("report receipt head changed before commit")]
    HeadMoved { given: String, current: String },
    /// The receipt binds another report of this kind already.
    #[error("report kind is already bound")]
    AlreadyBound { kind: String, path: Value },
    /// The report is bound already, but its file under `reports/` is
    /// missing or unsafe (`found` `None`), or holds other bytes.
    #[error(
        "bound report file {}",
        if .found.is_some() { "checksum differs" } else { "is missing or unsafe" }
    )]
    BoundFileChanged {
        path: String,
        bound: String,
        found: Option<String>,
    },
    /// No binding yet, and a file of the report's name holds other bytes.
    #[error("orphan report content differs")]
    OrphanDiffers { path: String },
}

impl ConflictReason for ReportRefusal {
    /// Its `fields` and hint.
    fn teaching(&self) -> Teaching {
        const AGAIN: &str = "write the report again with the run's current values (bluetape-flow resume-check --run-id {run_id} shows the owner epoch and the head)";
        let (fields, hint) = match self {
            Self::StaleEpoch { given, current } => (
                json!({"owner_epoch": given, "current_owner_epoch": current}),
                format!(
                    "the report names owner epoch {given}, the run's owner is at epoch {current}: {AGAIN}"
                ),
            ),
            Self::StaleManifest { given, current } => (
                json!({"manifest_hash": given, "current_manifest_hash": current}),
                format!("the report names another manifest than the run's ({current}): {AGAIN}"),
            ),
            Self::StaleHead { given, current } | Self::HeadMoved { given, current } => (
                json!({"receipt_head": given, "current_receipt_head": current}),
                if matches!(self, Self::StaleHead { .. }) {
                    format!(
                        "the report names receipt head {given}, the receipt's head is {current}: {AGAIN}"
                    )
                } else {
                    format!(
                        "another writer appended to the run while this report was bound (head {current} now): {AGAIN}"
                    )
                },
            ),
            Self::AlreadyBound { kind, path } => (
                json!({"report_kind": kind, "report_path": path}),
                format!(
                    "retrying cannot help: the run binds one {kind} report and has one already ({}); the same report again is answered as bound, another is refused",
                    path.as_str().unwrap_or("see status")
                ),
            ),
            Self::BoundFileChanged { path, bound, found } => (
                json!({"report_path": path, "report_checksum": bound, "file_checksum": found}),
                format!(
                    "retrying cannot help: the receipt binds {path} at checksum {bound}, and the file {}; only the bound bytes, 0600, can stand there",
                    if found.is_some() {
                        "now holds other bytes"
                    } else {
                        "is missing or not 0600 and ours"
                    }
                ),
            ),
            Self::OrphanDiffers { path } => (
                json!({"report_path": path}),
                format!(
                    "retrying cannot help: {path} exists with other bytes and no event binds it; move it out of the state root, then bind the report again"
                ),
            ),
        };
        Teaching::reason(fields, hint)
    }
}
