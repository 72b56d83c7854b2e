//! Completion (reference-coordinator §9, §10.5–§10.7): the read-only
//! `completion-check`, `lane-resolve` and the `complete` gate.

use crate::store::root::StateRoot;
use serde::Serialize;

use super::error::FlowResult;
use super::ledger::open_run;
use super::mutate::{MutationAnswer, OpenMutation};
use super::rebuild::replay_run;
use crate::coordinator::breach::Breach;
use crate::coordinator::completion::{CompletionReport, decide_complete, evaluate_completion};
use crate::coordinator::decide::ErrorKind;
use crate::coordinator::resolution::{decide_resolve, precheck_resolve};
use crate::store::handle::{check_contained, read_handle};
use crate::store::paths::expand_tilde;

/// What `completion-check` answers (contracts/commands.md "Topology,
/// checks, evidence and completion"): what completion still lacks, at the
/// head it was judged on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompletionCheckAnswer {
    #[serde(flatten)]
    pub completion: CompletionReport,
    /// The run and the head judged (nothing is committed).
    #[serde(flatten)]
    pub head: MutationAnswer,
    /// Our extension (contracts/rules.md): the breaches that stand in the
    /// receipt, while the run cannot complete; left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<Breach>,
}

/// `completion-check`: read-only (no lock, no writes). An auditor verdict:
/// verifies and replays the whole receipt, never a checkpoint
/// (contracts/receipt.md "Checkpoint"); then evaluates completion. Works in
/// every run state, terminal ones included.
pub fn completion_check(root: &StateRoot, run_id: &str) -> FlowResult<CompletionCheckAnswer> {
    let run = open_run(root, run_id)?;
    run.require_phase2()?;
    let (state, _) = replay_run(&run, false)?;
    Ok(CompletionCheckAnswer {
        completion: evaluate_completion(&state),
        head: MutationAnswer::at_head(run_id, &state),
        breaches: state.breaches().to_vec(),
    })
}

/// `complete --evidence [--at]` (`--at` is accepted and ignored, as in the
/// reference: both events are stamped with the current time).
///
/// A gate command verifies the WHOLE receipt (architecture §3), not just
/// the tail after a checkpoint: after the run directory and owner-handle
/// file checks (so their exit-2 answers keep the reference's precedence)
/// the receipt is streamed, verified and replayed from line 1, and the
/// decision is taken on that fully replayed state. In the lock the pipeline
/// loads the state again; if the head moved in between, `complete` answers
/// "receipt head changed before mutation" (exit 5, retry) rather than
/// decide on a state it did not fully verify.
pub fn complete(mutation: &OpenMutation) -> FlowResult<MutationAnswer> {
    let ctx = &mutation.ctx;
    mutation.run.dir.validate()?;
    let owner_file = expand_tilde(&ctx.owner_file, ctx.env.home.as_ref());
    let owner_file = check_contained(&ctx.root, &owner_file, &ctx.env.cwd)?;
    read_handle(ctx.root.at(&owner_file), Some(&ctx.run_id))?;
    let (verified, _) = replay_run(&mutation.run, false)?;
    // In the lock too the gate decides, pre-applies and checks for a
    // breach on a full replay: never on the checkpoint or its digest table
    // (contracts/receipt.md "What a mutation proves").
    mutation.commit_replayed(|d| {
        if d.state.last_checksum() != verified.last_checksum() {
            return Err(ErrorKind::HeadMoved {
                expected: verified.last_checksum().to_string(),
                head: d.state.last_checksum().to_string(),
                sequence: d.state.last_sequence(),
            }
            .into());
        }
        crate::coordinator::breach::require_no_breach(&verified, "complete")?;
        decide_complete(&verified, &mutation.evidence)
    })
}

/// `lane-resolve --lane-id --resolution-lane-id --at --evidence`.
pub fn lane_resolve(
    mutation: &OpenMutation,
    lane_id: &str,
    resolution_lane_id: &str,
    at: &str,
) -> FlowResult<MutationAnswer> {
    let request = precheck_resolve(lane_id, resolution_lane_id, at, &mutation.evidence)?;
    // Liveness history decides the binding: a full replay (contracts/rules.md).
    mutation.commit_replayed(|d| decide_resolve(d.state, d.policy, &request, &mutation.evidence))
}
