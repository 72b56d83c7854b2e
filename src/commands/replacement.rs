//! The stalled-lane replacement commands on top of the mutation pipeline:
//! `lane-reassign`, `replacement-close`, `replacement-repair`,
//! `replacement-block` (reference-coordinator §8).

use crate::store::input::JsonArg;
use serde_json::Value;

use super::error::FlowResult;
use super::mutate::{MutationAnswer, MutationContext};
use crate::coordinator::inputs::ReassignInput;
pub use crate::coordinator::replacement::LineageCommand;
use crate::coordinator::replacement::{
    decide_lineage, decide_reassign, precheck_lineage, precheck_reassign,
};

/// `lane-reassign`: replace an interrupted lane's agent by a new lane and
/// agent resuming from a recovered checkpoint.
pub fn lane_reassign(
    ctx: &MutationContext,
    evidence: &JsonArg,
    input: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let input = ctx.read_timed_input::<ReassignInput>(input)?;
    let limits = &run.manifest.contract.limits;
    let repo_root = run.repo_root()?;
    let canonicalize =
        |scope: &Value| super::lanes::canonicalize(repo_root.as_deref(), scope, limits);
    let request = precheck_reassign(&input, &evidence, canonicalize)?;
    ctx.commit(&run, |decision| {
        decide_reassign(decision.state, decision.policy, &request, &evidence)
    })
}

/// `replacement-close`, `replacement-repair`, `replacement-block`.
pub fn lineage(
    ctx: &MutationContext,
    command: LineageCommand,
    lane_id: &str,
    replacement_lane_id: &str,
    at: &str,
    evidence: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let request = precheck_lineage(lane_id, replacement_lane_id, at, &evidence)?;
    ctx.commit(&run, |decision| {
        decide_lineage(decision.state, command, &request, &evidence)
    })
}
