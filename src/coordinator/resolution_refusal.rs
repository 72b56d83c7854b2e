//! Why `lane-resolve` refuses to bind a failed lane to its resolution
//! lane (reference-coordinator §9): a conflict (exit 5) with the
//! reference's message, whose `fields` name the two lanes and what about
//! them refused it, and whose hint says what must happen first.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};
use super::state::LaneState;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolutionRefusal {
    /// The lane to resolve is not `failed` (`None`: no such lane).
    #[error("lane is not a failed lane")]
    NotFailed {
        lane_id: String,
        state: Option<LaneState>,
    },
    /// The resolution lane is not `completed` (`None`: no such lane).
    #[error("resolution lane is not completed")]
    ResolverNotCompleted {
        resolution_lane_id: String,
        state: Option<LaneState>,
    },
    /// The run's manifest asks the resolution lane to name the failed
    /// lane as its parent, and it names another (or none).
    #[error("resolution lane does not declare failed parent")]
    NotItsParent {
        lane_id: String,
        resolution_lane_id: String,
        parent: Option<String>,
    },
    /// The resolution lane completed before the lane failed.
    #[error("resolution lane did not complete after failure")]
    CompletedBefore {
        lane_id: String,
        resolution_lane_id: String,
    },
    /// The failed lane is resolved already.
    #[error("failed lane is already resolved")]
    AlreadyResolved {
        lane_id: String,
        resolution_lane_id: String,
    },
    /// Both lanes recorded the same evidence.
    #[error(
        "resolution lane evidence is identical to the failed lane evidence; a resolution needs independent evidence"
    )]
    SameEvidence {
        lane_id: String,
        resolution_lane_id: String,
    },
}

impl ConflictReason for ResolutionRefusal {
    /// Its `fields` and hint.
    fn teaching(&self) -> Teaching {
        let shown = |state: &Option<LaneState>| state.map_or("no lane of this run", |s| s.as_str());
        let (fields, hint) = match self {
            Self::NotFailed { lane_id, state } => (
                json!({"lane_id": lane_id, "lane_state": state.map(LaneState::as_str)}),
                format!(
                    "retrying cannot help: lane {lane_id} is {}; lane-resolve binds a failed lane to the lane that redid its work",
                    shown(state)
                ),
            ),
            Self::ResolverNotCompleted {
                resolution_lane_id,
                state,
            } => (
                json!({"resolution_lane_id": resolution_lane_id,
                       "resolution_lane_state": state.map(LaneState::as_str)}),
                format!(
                    "lane {resolution_lane_id} is {}: resolve with a lane that has completed (lane-complete it first)",
                    shown(state)
                ),
            ),
            Self::NotItsParent {
                lane_id,
                resolution_lane_id,
                parent,
            } => (
                json!({"lane_id": lane_id, "resolution_lane_id": resolution_lane_id,
                       "parent_lane_id": parent}),
                format!(
                    "retrying cannot help: this run's manifest resolves a failed lane only with a lane created for it: create the resolution lane with parent_lane_id {lane_id} in its lane-create input (lane {resolution_lane_id} names {})",
                    parent.as_deref().unwrap_or("no parent")
                ),
            ),
            Self::CompletedBefore {
                lane_id,
                resolution_lane_id,
            } => (
                json!({"lane_id": lane_id, "resolution_lane_id": resolution_lane_id}),
                format!(
                    "retrying cannot help: lane {resolution_lane_id} completed before lane {lane_id} failed, so it cannot have redone its work; resolve with a lane that completes after the failure"
                ),
            ),
            Self::AlreadyResolved {
                lane_id,
                resolution_lane_id,
            } => (
                json!({"lane_id": lane_id, "resolution_lane_id": resolution_lane_id}),
                format!(
                    "retrying cannot help: lane {lane_id} is resolved already; see bluetape-flow completion-check --run-id {{run_id}}"
                ),
            ),
            Self::SameEvidence {
                lane_id,
                resolution_lane_id,
            } => (
                json!({"lane_id": lane_id, "resolution_lane_id": resolution_lane_id}),
                format!(
                    "retrying cannot help: lanes {lane_id} and {resolution_lane_id} recorded the same evidence; the resolution lane must record its own (a new lane-complete of a new lane)"
                ),
            ),
        };
        Teaching::reason(fields, hint)
    }
}
