use std::fmt;

use crate::coordinator::approval::ApprovalRefusal;
use crate::coordinator::decide::Teaching;
use crate::receipt::manifest::ManifestError;
use crate::receipt::verify::ReceiptDamage;
use crate::store::StoreError;
use crate::store::run::RunReadError;

/// Every way a command can refuse. The CLI maps each to its exit status.
/// Equality ignores the teaching (hint, fields): it is advice, not part of
/// what is refused.
#[derive(Debug, Clone)]
pub enum FlowError {
    /// Bad input or a broken state-root rule (exit 2).
    Contract(String),
    /// The receipt or its snapshot is damaged (exit 3).
    ReceiptCorrupt(String),
    /// The receipt is damaged at a known line (exit 3), with its trusted
    /// prefix.
    ReceiptDamaged(ReceiptDamage),
    /// An offline proof (`check-proof`) that does not hold for the event and
    /// keys given (exit 3 `proof_invalid`; our extension, DEVIATIONS 90):
    /// no state root is involved, so nothing to diagnose or recover.
    ProofInvalid(String),
    /// A manifest this tool cannot speak (exit 4).
    IncompatibleManifest(String),
    /// Another writer, a stale owner or a state conflict (exit 5).
    Conflict(String),
    /// Completion evidence is missing (exit 6), or (`attest`) the receipt
    /// records breaches of our rules: the envelope then adds `breaches`
    /// and is not retryable.
    CompletionBlocked {
        message: String,
        missing_ids: Vec<String>,
        breaches: Vec<crate::coordinator::breach::Breach>,
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
    /// `otel-export` could not hand the trace to its receiver (exit 5
    /// `export_failed`; contracts/otel.md): `endpoint` is the URL without
    /// its user info and query, `retryable` whether trying again may help
    /// (unreachable, timed out, 429 and 5xx answers).
    Export {
        endpoint: String,
        message: String,
        retryable: bool,
    },
    /// Any of the above with what teaches its fix (issue 15): the envelope
    /// adds `hint` and `fields`; everything else is the inner error's.
    Taught(Box<FlowError>, Box<Teaching>),
}

impl FlowError {
    pub fn contract(m: impl Into<String>) -> Self {
        FlowError::Contract(m.into())
    }

    /// This error with `teach` attached (merged over any earlier one).
    pub fn taught(self, teach: Teaching) -> Self {
        match self {
            FlowError::Taught(inner, old) => FlowError::Taught(inner, Box::new(old.merged(teach))),
            other => FlowError::Taught(Box::new(other), Box::new(teach)),
        }
    }

    /// This error with a `hint`.
    pub fn hinted(self, hint: impl Into<String>) -> Self {
        self.taught(Teaching::hint(hint))
    }

    /// The error without its teaching, and the teaching.
    pub fn untaught(&self) -> (&FlowError, Option<&Teaching>) {
        match self {
            FlowError::Taught(inner, teach) => (inner, Some(teach)),
            other => (other, None),
        }
    }

    /// The message as the envelope shows it: the inner message and the
    /// teaching's detail after it.
    pub fn full_message(&self) -> String {
        match self {
            FlowError::Taught(inner, teach) => teach.message(inner.message()),
            other => other.message().to_string(),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            FlowError::Taught(inner, _) => inner.message(),
            FlowError::Contract(m)
            | FlowError::ReceiptCorrupt(m)
            | FlowError::ProofInvalid(m)
            | FlowError::IncompatibleManifest(m)
            | FlowError::Conflict(m)
            | FlowError::Unsupported(m) => m,
            FlowError::CompletionBlocked { message, .. }
            | FlowError::Breach { message, .. }
            | FlowError::Export { message, .. } => message,
            FlowError::ReceiptDamaged(damage) => damage.message(),
            FlowError::Approval(refusal) => refusal.message(),
        }
    }
}

impl PartialEq for FlowError {
    fn eq(&self, other: &FlowError) -> bool {
        use FlowError::*;
        match (self.untaught().0, other.untaught().0) {
            (Contract(a), Contract(b))
            | (ReceiptCorrupt(a), ReceiptCorrupt(b))
            | (ProofInvalid(a), ProofInvalid(b))
            | (IncompatibleManifest(a), IncompatibleManifest(b))
            | (Conflict(a), Conflict(b))
            | (Unsupported(a), Unsupported(b)) => a == b,
            (ReceiptDamaged(a), ReceiptDamaged(b)) => a == b,
            (
                CompletionBlocked {
                    message: a,
                    missing_ids: x,
                    breaches: p,
                },
                CompletionBlocked {
                    message: b,
                    missing_ids: y,
                    breaches: q,
                },
            ) => a == b && x == y && p == q,
            (Approval(a), Approval(b)) => a == b,
            (
                Export {
                    endpoint: a,
                    message: x,
                    ..
                },
                Export {
                    endpoint: b,
                    message: y,
                    ..
                },
            ) => a == b && x == y,
            (
                Breach {
                    message: a,
                    breaches: x,
                },
                Breach {
                    message: b,
                    breaches: y,
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}

impl Eq for FlowError {}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for FlowError {}

/// What to do about a lock another writer holds.
/// What to do about a state-root path with another owner or a looser mode
/// (`StoreError::Insecure`): the reference's message names the path's
/// kind; this says the rule and the fix.
pub const INSECURE_HINT: &str = "files this tool keeps (the state root's, owner handles, signer keys) are 0600 in directories of 0700, owned by the uid that runs the command: restore the mode (chmod 600 FILE, chmod 700 DIR) or the owner of the path named, then run the command again";

pub const LOCK_HELD_HINT: &str = "another writer holds the lock (named above): retry when it has finished; if that process is gone, bluetape-flow doctor lists the dead lock and how to remove it";

impl From<StoreError> for FlowError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Busy(m) => FlowError::Conflict(m),
            StoreError::LockHeld(m) => FlowError::Conflict(m).hinted(LOCK_HELD_HINT),
            // A full disk, a quota or a device error: nothing was
            // acknowledged (a failed append is cut back), so the caller
            // may retry once it is fixed (DEVIATIONS 49).
            StoreError::Io(ref failure) if failure.is_transient() => {
                FlowError::Conflict(e.message().to_string())
            }
            StoreError::Insecure(m) => FlowError::Contract(m).hinted(INSECURE_HINT),
            other => FlowError::Contract(other.message().to_string()),
        }
    }
}

impl From<crate::store::input::InputError> for FlowError {
    fn from(e: crate::store::input::InputError) -> Self {
        FlowError::Contract(e.message).taught(Teaching {
            detail: None,
            hint: e.hint,
            fields: Some(e.fields),
        })
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
            RunReadError::Missing(missing) => {
                FlowError::ReceiptCorrupt(missing.message).hinted(missing.hint)
            }
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
