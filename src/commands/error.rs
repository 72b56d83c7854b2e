use std::fmt;

use crate::coordinator::approval::ApprovalRefusal;
use crate::receipt::manifest::ManifestError;
use crate::receipt::verify::ReceiptDamage;
use crate::store::StoreError;
use crate::store::run::RunReadError;

/// Every way a command can refuse. The CLI maps each to its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowError {
    /// Bad input or a broken state-root rule (exit 2).
    Contract(String),
    /// The receipt or its snapshot is damaged (exit 3).
    ReceiptCorrupt(String),
    /// The receipt is damaged at a known line (exit 3), with its trusted
    /// prefix.
    ReceiptDamaged(ReceiptDamage),
    /// A manifest this tool cannot speak (exit 4).
    IncompatibleManifest(String),
    /// Another writer, a stale owner or a state conflict (exit 5).
    Conflict(String),
    /// Completion evidence is missing (exit 6).
    CompletionBlocked {
        message: String,
        missing_ids: Vec<String>,
    },
    /// A Phase 2 command on a Phase 1 run (exit 7).
    Unsupported(String),
    /// The approval gate refuses (exit 2 `approval_refused`, exit 5
    /// `approval_expired` or a final exit 5 conflict); our extension.
    Approval(ApprovalRefusal),
    /// A breach of our rules stands in the receipt (exit 5 `rule_breach`,
    /// final); the envelope adds `breaches` and a `hint`.
    Breach {
        message: String,
        breaches: Vec<crate::coordinator::breach::Breach>,
    },
}

impl FlowError {
    pub fn contract(m: impl Into<String>) -> Self {
        FlowError::Contract(m.into())
    }

    pub fn message(&self) -> &str {
        match self {
            FlowError::Contract(m)
            | FlowError::ReceiptCorrupt(m)
            | FlowError::IncompatibleManifest(m)
            | FlowError::Conflict(m)
            | FlowError::Unsupported(m) => m,
            FlowError::CompletionBlocked { message, .. } | FlowError::Breach { message, .. } => {
                message
            }
            FlowError::ReceiptDamaged(damage) => damage.message(),
            FlowError::Approval(refusal) => refusal.message(),
        }
    }
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for FlowError {}

impl From<StoreError> for FlowError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Busy(m) => FlowError::Conflict(m),
            // A full disk, a quota or a device error: nothing was
            // acknowledged (a failed append is cut back), so the caller
            // may retry once it is fixed (DEVIATIONS 49).
            StoreError::Io(ref failure) if failure.is_transient() => {
                FlowError::Conflict(e.message().to_string())
            }
            other => FlowError::Contract(other.message().to_string()),
        }
    }
}

impl From<ManifestError> for FlowError {
    fn from(e: ManifestError) -> Self {
        match e {
            ManifestError::Corrupt(m) => FlowError::ReceiptCorrupt(m),
            ManifestError::Incompatible(m) => FlowError::IncompatibleManifest(m),
        }
    }
}

impl From<RunReadError> for FlowError {
    fn from(e: RunReadError) -> Self {
        match e {
            RunReadError::Corrupt(m) => FlowError::ReceiptCorrupt(m),
            RunReadError::Store(s) => s.into(),
        }
    }
}

impl From<ApprovalRefusal> for FlowError {
    fn from(refusal: ApprovalRefusal) -> Self {
        match refusal {
            ApprovalRefusal::Corrupt(m) => FlowError::ReceiptCorrupt(m),
            other => FlowError::Approval(other),
        }
    }
}

pub type FlowResult<T> = Result<T, FlowError>;
