use crate::coordinator::approval::ApprovalRefusal;
use crate::coordinator::decide::Teaching;
pub use crate::coordinator::decide::{ErrorKind, FlowError, FlowResult};
use crate::receipt::manifest::ManifestError;
use crate::store::StoreError;
use crate::store::run::RunReadError;

/// What to do about a lock another writer holds.
/// What to do about a state-root path with another owner or a looser mode
/// (`StoreError::Insecure`): the reference's message names the path's
/// kind; this says the rule and the fix.
pub const INSECURE_HINT: &str = "files this tool keeps (the state root's, owner handles, signer keys) are 0600 in directories of 0700, owned by the uid that runs the command: restore the mode (chmod 600 FILE, chmod 700 DIR) or the owner of the path named, then run the command again";

pub const LOCK_HELD_HINT: &str = "another writer holds the lock (named above): retry when it has finished; if that process is gone, bluetape-flow doctor lists the dead lock and how to remove it";

impl From<StoreError> for FlowError {
    /// The store's refusal keeps its kind up to the envelope.
    fn from(e: StoreError) -> Self {
        ErrorKind::Store(e).into()
    }
}

impl From<crate::store::input::InputError> for FlowError {
    fn from(e: crate::store::input::InputError) -> Self {
        ErrorKind::Contract(e.message).taught(Teaching {
            detail: None,
            hint: e.hint,
            fields: Some(e.fields),
        })
    }
}

impl From<ManifestError> for FlowError {
    fn from(e: ManifestError) -> Self {
        match e {
            ManifestError::Corrupt(m) => ErrorKind::ReceiptCorrupt(m).into(),
            ManifestError::Incompatible(m) => ErrorKind::IncompatibleManifest(m).into(),
        }
    }
}

impl From<RunReadError> for FlowError {
    fn from(e: RunReadError) -> Self {
        match e {
            RunReadError::Corrupt(m) => ErrorKind::ReceiptCorrupt(m).into(),
            RunReadError::Store(s) => s.into(),
            RunReadError::Missing(missing) => {
                ErrorKind::ReceiptCorrupt(missing.message).hinted(missing.hint)
            }
        }
    }
}

impl From<ApprovalRefusal> for FlowError {
    fn from(refusal: ApprovalRefusal) -> Self {
        match refusal {
            ApprovalRefusal::Corrupt(m) => ErrorKind::ReceiptCorrupt(m).into(),
            other => ErrorKind::Approval(other).into(),
        }
    }
}
