//! Why an owner handle may not act on a run: it is not the run's current
//! owner's (a conflict, exit 5, with the reference's message). Its epochs
//! are `fields`, and the hint says which handle acts now.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}",
    if *.before_lock {
        "owner handle is stale"
    } else {
        "owner handle does not match the current run owner"
    }
)]
pub struct OwnerRefusal {
    /// Read before the lock (`resume`, the reports) or under it (every
    /// other mutation): the reference words the two differently.
    pub before_lock: bool,
    /// The epoch the handle carries.
    pub handle_epoch: u64,
    /// The run's current owner epoch.
    pub owner_epoch: u64,
}

impl ConflictReason for OwnerRefusal {
    /// Its `fields` (the two epochs) and hint.
    fn teaching(&self) -> Teaching {
        let (handle, owner) = (self.handle_epoch, self.owner_epoch);
        let hint = if handle < owner {
            format!(
                "retrying cannot help: this handle is of owner epoch {handle}, and a resume has made the run's owner epoch {owner}: act with the handle that resume wrote (its new_owner_file); bluetape-flow resume-check --run-id {{run_id}} shows the current owner"
            )
        } else {
            format!(
                "retrying cannot help: this handle is not the one of the run's current owner (epoch {owner}): act with the owner handle that init or the last resume wrote for this run; bluetape-flow resume-check --run-id {{run_id}} shows the current owner"
            )
        };
        Teaching::reason(
            json!({"handle_owner_epoch": handle, "owner_epoch": owner}),
            hint,
        )
    }
}
