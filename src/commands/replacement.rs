//! The stalled-lane replacement commands on top of the mutation pipeline:
//! `lane-reassign`, `replacement-close`, `replacement-repair`,
//! `replacement-block` (reference-coordinator §8).

use crate::store::input::JsonArg;
use serde_json::Value;

use super::error::FlowResult;
use super::mutate::{MutationAnswer, OpenMutation};
use crate::coordinator::inputs::ReassignInput;
pub use crate::coordinator::replacement::LineageCommand;
use crate::coordinator::replacement::{
    decide_lineage, decide_reassign, precheck_lineage, precheck_reassign,
};

/// `lane-reassign`: replace an interrupted lane's agent by a new lane and
/// agent resuming from a recovered checkpoint.
pub fn lane_reassign(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let input = mutation.ctx.read_timed_input::<ReassignInput>(input)?;
    let limits = &mutation.run.manifest.contract.limits;
    let repo_root = mutation.run.repo_root()?;
    let canonicalize =
        |scope: &Value| super::lanes::canonicalize(repo_root.as_deref(), scope, limits);
    let request = precheck_reassign(&input, &mutation.evidence, canonicalize)?;
    mutation.commit(|decision| {
        decide_reassign(
            decision.state,
            decision.policy,
            &request,
            &mutation.evidence,
        )
    })
}

/// `replacement-close`, `replacement-repair`, `replacement-block`.
pub fn lineage(
    mutation: &OpenMutation,
    command: LineageCommand,
    lane_id: &str,
    replacement_lane_id: &str,
    at: &str,
) -> FlowResult<MutationAnswer> {
    let request = precheck_lineage(lane_id, replacement_lane_id, at, &mutation.evidence)?;
    mutation
        .commit(|decision| decide_lineage(decision.state, command, &request, &mutation.evidence))
}
