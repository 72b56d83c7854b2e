//! The run lifecycle commands on top of the mutation pipeline.

use crate::coordinator::decide::InputRefusal;

use super::error::{FlowError, FlowResult};
use super::mutate::{MutationAnswer, MutationContext, OpenMutation};
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
    mutation: &OpenMutation,
    command: RunCommand,
    reason: Option<&str>,
) -> FlowResult<MutationAnswer> {
    let at = decided_at(&mutation.ctx)?;
    precheck_run_transition(&mutation.evidence)?;
    mutation.commit_replayed(|input| {
        if command == RunCommand::Start {
            require_no_breach(input.state, "run-start")?;
        }
        decide_run_transition(input.state, command, &at, &mutation.evidence, reason)
    })
}
