//! Decisions of the run lifecycle commands (reference-coordinator §4).

use crate::receipt::vocab::EventType;
use serde_json::Value;

use super::decide::{ErrorKind, FlowError, Intent, require_evidence};
use super::machine::{RunEdge, run_edge};
use super::state::CoordinatorState;

/// The seven run transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCommand {
    Approve,
    Start,
    RecoveryStart,
    RecoveryFinish,
    Fail,
    Block,
    Cancel,
}

impl RunCommand {
    /// The event the command records.
    pub fn event_type(self) -> EventType {
        match self {
            RunCommand::Approve => EventType::PlanApproved,
            RunCommand::Start => EventType::RunStarted,
            RunCommand::RecoveryStart => EventType::RunRecoveryStarted,
            RunCommand::RecoveryFinish => EventType::RunRecoveryFinished,
            RunCommand::Fail => EventType::RunFailed,
            RunCommand::Block => EventType::RunBlocked,
            RunCommand::Cancel => EventType::RunCancelled,
        }
    }

    /// The command's edge of the run state machine ([`run_edge`]).
    pub fn edge(self) -> RunEdge {
        run_edge(self.event_type()).expect("every run command is a run transition")
    }

    /// Whether the parser requires `--reason`.
    pub fn takes_reason(self) -> bool {
        matches!(
            self,
            RunCommand::RecoveryStart | RunCommand::Fail | RunCommand::Block | RunCommand::Cancel
        )
    }
}

/// Pre-lock checks: evidence present.
pub fn precheck_run_transition(evidence: &Value) -> Result<(), FlowError> {
    require_evidence(evidence)
}

/// In-lock decision: the run's current state must be a legal source.
pub fn decide_run_transition(
    state: &CoordinatorState,
    command: RunCommand,
    at: &str,
    evidence: &Value,
    reason: Option<&str>,
) -> Result<Vec<Intent>, FlowError> {
    require_evidence(evidence)?;
    let edge = command.edge();
    let current = state.run_state_enum();
    if !edge.from.contains(&Some(current)) {
        // Only run_created leaves the empty run (None); no command does.
        return Err(ErrorKind::RunTransitionRefused {
            state: current,
            allowed: edge.from.iter().flatten().copied().collect(),
        }
        .into());
    }
    let mut intent = Intent::run(
        command.event_type(),
        current,
        edge.to,
        Some(at.to_string()),
        evidence.clone(),
    );
    intent.reason = reason.map(str::to_string);
    Ok(vec![intent])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::RunOrigin;
    use crate::coordinator::state::RunState;
    use serde_json::json;

    fn planned() -> CoordinatorState {
        CoordinatorState::new(&RunOrigin {
            owner_fingerprint: Some("a".repeat(64)),
            owner_epoch: 1,
            approved_component_ids: vec![],
        })
    }

    #[test]
    fn approve_from_planned() {
        let ev = json!([{"kind": "user_approval", "summary": "ok"}]);
        let intents = decide_run_transition(
            &planned(),
            RunCommand::Approve,
            "2026-07-14T01:00:00Z",
            &ev,
            None,
        )
        .unwrap();
        assert_eq!(intents.len(), 1);
        assert_eq!(intents[0].event_type, "plan_approved");
        assert_eq!(intents[0].from_state.map(|s| s.as_str()), Some("planned"));
        assert_eq!(intents[0].to_state.map(|s| s.as_str()), Some("approved"));
    }

    #[test]
    fn illegal_sources_conflict() {
        let ev = json!([{"kind": "k", "summary": "s"}]);
        for command in [
            RunCommand::Start,
            RunCommand::RecoveryStart,
            RunCommand::Fail,
            RunCommand::Block,
        ] {
            assert_eq!(
                decide_run_transition(&planned(), command, "2026-07-14T01:00:00Z", &ev, Some("r")),
                Err(ErrorKind::RunTransitionRefused {
                    state: RunState::Planned,
                    allowed: command.edge().from.iter().flatten().copied().collect()
                }
                .into())
            );
        }
        // Cancel is allowed straight from planned (decisions.md 6).
        assert!(
            decide_run_transition(
                &planned(),
                RunCommand::Cancel,
                "2026-07-14T01:00:00Z",
                &ev,
                Some("r")
            )
            .is_ok()
        );
    }

    #[test]
    fn evidence_is_required() {
        assert_eq!(
            decide_run_transition(
                &planned(),
                RunCommand::Approve,
                "2026-07-14T01:00:00Z",
                &json!([]),
                None
            ),
            Err(crate::coordinator::input_refusal::refused_as(
                "lifecycle transition requires evidence"
            ))
        );
    }
}
