//! The run lifecycle commands on top of the mutation pipeline.

use crate::coordinator::decide::InputRefusal;
use crate::store::input::JsonArg;

use super::error::{FlowError, FlowResult};
use super::mutate::{MutationAnswer, MutationContext};
use crate::coordinator::breach::require_no_breach;
use crate::coordinator::run_commands::{
    RunCommand, decide_run_transition, precheck_run_transition,
};
use crate::receipt::primitives::parse_timestamp;

/// The context's `--at` (or now, [`MutationContext::stamp`]) as a stored
/// timestamp; it must be a real UTC instant.
pub fn decided_at(ctx: &MutationContext) -> FlowResult<String> {
    let at = ctx.stamp();
    parse_timestamp(&at).ok_or_else(|| {
        FlowError::from(InputRefusal::Timestamp {
            field: "decided_at".into(),
        })
        .taught(crate::coordinator::decide::at_teaching(&at))
    })?;
    Ok(at)
}

/// `run-approve`, `run-start`, `run-recovery-start`, `run-recovery-finish`,
/// `run-fail`, `run-block`, `run-cancel`.
pub fn run_transition(
    ctx: &MutationContext,
    command: RunCommand,
    evidence: &JsonArg,
    reason: Option<&str>,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let at = decided_at(ctx)?;
    precheck_run_transition(&evidence)?;
    ctx.commit_replayed(&run, |input| {
        if command == RunCommand::Start {
            require_no_breach(input.state, "run-start")?;
        }
        decide_run_transition(input.state, command, &at, &evidence, reason)
    })
}
