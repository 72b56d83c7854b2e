//! Decisions of the stalled-lane replacement commands
//! (reference-coordinator §8): `lane-reassign`, `replacement-close`,
//! `replacement-repair` and `replacement-block`.
//!
//! Each command has a pre-lock precheck (input shape, exit 2) and an in-lock
//! decision on the replayed state; the checks run in the reference's order
//! because the first failing one decides the exit status.
//!
//! Fencing: a replacement always goes to a different lane *and* a different
//! agent, and the original lane ends `replaced`, so the interrupted agent
//! can no longer move either lane ([`require_active_lane_owner`]: "lane is not
//! active" on the original, "agent does not own the lane" on the child).
//! A recorded reservation that would hand the child back to the interrupted
//! agent is not repaired (see [`repair`]).

use crate::receipt::vocab::{EventType, StateName};
use serde_json::{Map, Value, json};

use super::decide::{FlowError, Intent, Policy, invalid, refused, require_evidence};
use super::decide::{InputRefusal, InputRule};
use super::inputs::{ReassignInput, checked_input};
use super::lane_commands::{narrowing_refusal, require_active_lane_owner, require_lane_run_state};
pub use super::replacement_refusal::LineageCommand;
use super::replacement_refusal::ReplacementRefusal as Refused;
use super::state::{CoordinatorState, LaneRecord, LaneState};
use crate::receipt::canonical::digest;
use crate::receipt::lax_time::LaxTimeError;
use crate::receipt::primitives::{AgentId, Instant, LaneId, is_identifier, parse_timestamp};
use crate::receipt::schema::keys_of;
use crate::receipt::scope::narrow_scope;

/// A `lane-reassign` request that passed its pre-lock checks; the write
/// scope is already canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassign {
    pub lane_id: String,
    pub replacement_lane_id: String,
    pub replacement_agent_id: String,
    pub decided_at: String,
    pub replacement_assignment: String,
    pub replacement_write_scope: Vec<String>,
    pub replacement_startup_ack_deadline: String,
    pub replacement_command_deadline: String,
}

/// The lane and replacement ids and `--at` of `replacement-close`,
/// `replacement-repair` and `replacement-block`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    pub lane_id: String,
    pub replacement_lane_id: String,
    pub at: String,
}

fn require_identifier<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a str, FlowError> {
    match value.and_then(Value::as_str) {
        Some(text) if is_identifier(text) => Ok(text),
        _ => invalid(InputRefusal::Identifier {
            field: field.into(),
        }),
    }
}

/// Caller timestamps (`decided_at`, deadlines, `--at`) are read with the
/// stored-value rule (shape and calendar). The reference reads them laxly
/// (Python `fromisoformat`) and leaves the shape to the receipt contract,
/// checked after the owner; so a lax-only value (`2026-07-14T01:40Z`) is
/// exit 2 either way, but here it is refused before the in-lock checks.
/// This is the one place to swap in a shared lax reader.
fn parse_caller_timestamp(text: &str) -> Option<Instant> {
    parse_timestamp(text)
}

fn parse_field(value: Option<&Value>, field: &str) -> Result<Instant, FlowError> {
    value
        .and_then(Value::as_str)
        .and_then(parse_caller_timestamp)
        .ok_or_else(|| {
            FlowError::from(InputRefusal::Timestamp {
                field: field.into(),
            })
        })
}

/// `observed_at < startup_ack_deadline <= command_deadline`.
fn require_deadline_order(
    observed_at: Option<&Value>,
    startup: Option<&Value>,
    command: Option<&Value>,
) -> Result<(), FlowError> {
    let observed = parse_field(observed_at, "observed_at")?;
    let startup = parse_field(startup, "startup_ack_deadline")?;
    let command = parse_field(command, "command_deadline")?;
    if !(observed < startup && startup <= command) {
        return invalid(InputRule::DeadlineOrder);
    }
    Ok(())
}

/// Some evidence ref of kind `recovery` whose summary mentions a checkpoint.
fn has_checkpoint_recovery(evidence: &Value) -> bool {
    evidence.as_array().is_some_and(|refs| {
        refs.iter().filter_map(Value::as_object).any(|r| {
            r.get("kind").and_then(Value::as_str) == Some("recovery")
                && r.get("summary")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.to_lowercase().contains("checkpoint"))
        })
    })
}

/// Pre-lock checks of `lane-reassign`, in the reference's order (all exit
/// 2): the field contract, the three ids, distinct lane ids, an assignment
/// that names the recovered checkpoint, evidence with a checkpoint
/// `recovery` ref, the canonical scope (`canonicalize_scope` resolves it
/// under the pinned repo root; it is the only step that touches files) and
/// the deadline order.
pub fn precheck_reassign(
    input: &Value,
    evidence: &Value,
    canonicalize_scope: impl FnOnce(&Value) -> Result<Vec<String>, FlowError>,
) -> Result<Reassign, FlowError> {
    let Some(fields) = input.as_object() else {
        return invalid(InputRule::WrongTopLevelType);
    };
    let keys = &keys_of!(ReassignInput).required;
    if fields.len() != keys.len() || !keys.iter().all(|k| fields.contains_key(*k)) {
        return invalid(InputRule::FieldsMismatch);
    }
    let lane_id = require_identifier(fields.get("lane_id"), "lane id")?;
    let replacement_lane_id =
        require_identifier(fields.get("replacement_lane_id"), "replacement lane id")?;
    require_identifier(fields.get("replacement_agent_id"), "replacement agent id")?;
    if lane_id == replacement_lane_id {
        return invalid(InputRule::ReplacementLaneSame);
    }
    let assignment = match fields.get("replacement_assignment") {
        Some(Value::String(text)) if !text.trim().is_empty() => text,
        _ => return invalid(InputRule::ReplacementAssignmentBlank),
    };
    if !assignment.to_lowercase().contains("checkpoint") {
        return invalid(InputRule::ReplacementCheckpointContext);
    }
    require_evidence(evidence)?;
    if !has_checkpoint_recovery(evidence) {
        return invalid(InputRule::CheckpointRecoveryEvidence);
    }
    let scope = canonicalize_scope(
        fields
            .get("replacement_write_scope")
            .unwrap_or(&Value::Null),
    )?;
    let decided_at = fields.get("decided_at");
    let startup = fields.get("replacement_startup_ack_deadline");
    let command = fields.get("replacement_command_deadline");
    require_deadline_order(decided_at, startup, command)?;
    let typed: ReassignInput = checked_input(input)?;
    Ok(Reassign {
        lane_id: typed.lane_id.into(),
        replacement_lane_id: typed.replacement_lane_id.into(),
        replacement_agent_id: typed.replacement_agent_id.into(),
        decided_at: typed.decided_at.0,
        replacement_assignment: typed.replacement_assignment,
        replacement_write_scope: scope,
        replacement_startup_ack_deadline: typed.replacement_startup_ack_deadline.0,
        replacement_command_deadline: typed.replacement_command_deadline.0,
    })
}

/// Pre-lock checks of `replacement-close`, `-repair` and `-block` (exit 2):
/// both ids, `--at`, evidence present.
pub fn precheck_lineage(
    lane_id: &str,
    replacement_lane_id: &str,
    at: &str,
    evidence: &Value,
) -> Result<Lineage, FlowError> {
    for (value, field) in [
        (lane_id, "lane id"),
        (replacement_lane_id, "replacement lane id"),
    ] {
        if !is_identifier(value) {
            return invalid(InputRefusal::Identifier {
                field: field.into(),
            });
        }
    }
    if parse_caller_timestamp(at).is_none() {
        return invalid(InputRefusal::LaxTimestamp(LaxTimeError::Invalid))
            .map_err(|r| super::decide::at_refusal(r, at));
    }
    require_evidence(evidence)?;
    Ok(Lineage {
        lane_id: lane_id.to_string(),
        replacement_lane_id: replacement_lane_id.to_string(),
        at: at.to_string(),
    })
}

fn strings(values: &[String]) -> Value {
    Value::Array(values.iter().cloned().map(Value::String).collect())
}

fn metadata(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A lane-level intent at a caller-supplied instant.
/// Which lane an intent moves, whose agent, and along which edge.
struct LaneStep<'a> {
    event_type: EventType,
    lane_id: &'a str,
    agent_id: Option<&'a str>,
    from: Option<LaneState>,
    to: LaneState,
}

fn lane_intent(
    step: LaneStep<'_>,
    at: &str,
    evidence: &Value,
    reason: Option<&str>,
    metadata: Map<String, Value>,
) -> Intent {
    let LaneStep {
        event_type,
        lane_id,
        agent_id,
        from,
        to,
    } = step;
    Intent {
        event_type,
        timestamp: Some(at.into()),
        from_state: from.map(StateName::from),
        to_state: Some(to.into()),
        // Ids the request's checks or the verified receipt vouch for.
        lane_id: Some(LaneId::from_checked(lane_id)),
        agent_id: agent_id.map(AgentId::from_checked),
        reason: reason.map(str::to_string),
        evidence_refs: evidence.clone(),
        metadata,
    }
}

/// In-lock decision of `lane-reassign`: the transaction
/// (`lane_reassigned` on the original, `lane_created` for the child).
pub fn decide_reassign(
    state: &CoordinatorState,
    policy: &Policy,
    request: &Reassign,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let agent = state
        .lane(&request.lane_id)
        .map(|lane| lane.agent_id.as_str())
        .unwrap_or_default();
    let original = require_active_lane_owner(state, &request.lane_id, agent)?;
    if original.state != LaneState::Recovering {
        return refused(Refused::NotRecovering {
            lane_id: original.id.to_string(),
            state: original.state,
        });
    }
    if original.last_event_type != EventType::AgentInterrupted {
        return refused(Refused::NotInterrupted {
            lane_id: original.id.to_string(),
            last_event: original.last_event_type,
        });
    }
    if request.replacement_agent_id == original.agent_id {
        return invalid(InputRule::ReplacementAgentSame);
    }
    if original.assignment.as_deref() == Some(request.replacement_assignment.as_str()) {
        return invalid(InputRule::ReplacementAssignmentSame);
    }
    narrow_scope(
        &original.write_scope,
        &request.replacement_write_scope,
        &policy.limits,
    )
    .map_err(|n| narrowing_refusal(n, InputRule::ReplacementScopeWider))?;
    if let Some(lane) = state.lane(&request.replacement_lane_id) {
        return Err(super::lane_commands::existing_lane(&lane.id, lane.state));
    }
    let count = original
        .replacement_count_u64()
        .and_then(|c| c.checked_add(1))
        .filter(|c| *c <= policy.max_replacements);
    let Some(count) = count else {
        return refused(Refused::LimitReached {
            lane_id: original.id.to_string(),
            max: policy.max_replacements,
        });
    };
    let fallback = match original.fallback.as_deref() {
        Some(text) if !text.is_empty() => text,
        _ => "main session",
    };
    let scope = strings(&request.replacement_write_scope);
    let reassigned = lane_intent(
        LaneStep {
            event_type: EventType::LaneReassigned,
            lane_id: &request.lane_id,
            agent_id: Some(&original.agent_id),
            from: Some(LaneState::Recovering),
            to: LaneState::Replaced,
        },
        &request.decided_at,
        evidence,
        Some("replacement checkpoint accepted"),
        metadata(vec![
            ("replacement_count", json!(count)),
            ("previous_agent_id", json!(original.agent_id)),
            ("replacement_lane_id", json!(request.replacement_lane_id)),
            ("replacement_agent_id", json!(request.replacement_agent_id)),
            (
                "replacement_assignment",
                json!(request.replacement_assignment),
            ),
            ("replacement_write_scope", scope.clone()),
            ("replacement_fallback", json!(fallback)),
            (
                "replacement_startup_ack_deadline",
                json!(request.replacement_startup_ack_deadline),
            ),
            (
                "replacement_command_deadline",
                json!(request.replacement_command_deadline),
            ),
            ("checkpoint_digest", json!(digest(evidence))),
        ]),
    );
    let created = lane_intent(
        LaneStep {
            event_type: EventType::LaneCreated,
            lane_id: &request.replacement_lane_id,
            agent_id: Some(&request.replacement_agent_id),
            from: None,
            to: LaneState::Pending,
        },
        &request.decided_at,
        evidence,
        None,
        metadata(vec![
            ("assignment", json!(request.replacement_assignment)),
            ("write_scope", scope),
            ("fallback", json!(fallback)),
            (
                "startup_ack_deadline",
                json!(request.replacement_startup_ack_deadline),
            ),
            (
                "command_deadline",
                json!(request.replacement_command_deadline),
            ),
            ("parent_lane_id", json!(request.lane_id)),
            ("replacement_count", json!(count)),
        ]),
    );
    Ok(vec![reassigned, created])
}

/// The original lane of a lineage step: `replaced`, or the step is refused.
fn replaced_original<'s>(
    state: &'s CoordinatorState,
    request: &Lineage,
    command: LineageCommand,
) -> Result<&'s LaneRecord, FlowError> {
    state
        .lane_in(&request.lane_id, LaneState::Replaced)
        .or_else(|state| {
            refused(Refused::NotReplaced {
                command,
                lane_id: request.lane_id.clone(),
                state,
            })
        })
}

/// The replacement lane named is the one the original reserved.
fn require_reserved(
    original: &LaneRecord,
    request: &Lineage,
    command: LineageCommand,
) -> Result<(), FlowError> {
    if original.replacement_lane_id.as_deref() == Some(request.replacement_lane_id.as_str()) {
        return Ok(());
    }
    refused(Refused::NotReserved {
        command,
        lane_id: request.lane_id.clone(),
        given: request.replacement_lane_id.clone(),
        reserved: original.replacement_lane_id.clone(),
    })
}

/// The reserved replacement lane was never made (a repair or a block is
/// only for an incomplete reservation).
fn require_no_replacement(state: &CoordinatorState, request: &Lineage) -> Result<(), FlowError> {
    match state.lane(&request.replacement_lane_id) {
        Some(lane) => refused(Refused::ReplacementExists {
            replacement_lane_id: lane.id.to_string(),
            state: lane.state,
        }),
        None => Ok(()),
    }
}

/// In-lock decision of `replacement-close`, `replacement-repair` or
/// `replacement-block`: each moves a `replaced` original lane of a run that
/// admits lane steps.
pub fn decide_lineage(
    state: &CoordinatorState,
    command: LineageCommand,
    request: &Lineage,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let step = LineageStep {
        original: replaced_original(state, request, command)?,
        request,
        evidence,
    };
    match command {
        LineageCommand::Close => close(state, step),
        LineageCommand::Repair => repair(state, step),
        LineageCommand::Block => block(state, step),
    }
}

/// What every lineage decision reads: the `replaced` original and the
/// request with its evidence.
#[derive(Clone, Copy)]
struct LineageStep<'a> {
    original: &'a LaneRecord,
    request: &'a Lineage,
    evidence: &'a Value,
}

impl LineageStep<'_> {
    /// The original's lineage event: it leaves `replaced` for `to`, its
    /// metadata names both lanes and one fact of the step.
    fn intent(
        &self,
        event_type: EventType,
        to: LaneState,
        reason: Option<&str>,
        (key, value): (&str, Value),
    ) -> Intent {
        let request = self.request;
        lane_intent(
            LaneStep {
                event_type,
                lane_id: &request.lane_id,
                agent_id: Some(&self.original.agent_id),
                from: Some(LaneState::Replaced),
                to,
            },
            &request.at,
            self.evidence,
            reason,
            metadata(vec![
                ("original_lane_id", json!(request.lane_id)),
                ("replacement_lane_id", json!(request.replacement_lane_id)),
                (key, value),
            ]),
        )
    }
}

/// `replacement-close`: the original takes its terminal replacement's
/// state.
fn close(state: &CoordinatorState, step: LineageStep<'_>) -> Result<Vec<Intent>, FlowError> {
    let request = step.request;
    require_reserved(step.original, request, LineageCommand::Close)?;
    let terminal = match state.lane(&request.replacement_lane_id) {
        Some(lane) if lane.state.is_terminal() => lane.state,
        other => {
            return refused(Refused::NotTerminal {
                replacement_lane_id: request.replacement_lane_id.clone(),
                state: other.map(|lane| lane.state),
            });
        }
    };
    Ok(vec![step.intent(
        EventType::ReplacementLineageClosed,
        terminal,
        None,
        ("replacement_terminal_state", json!(terminal)),
    )])
}

/// `replacement-repair`: recreate the reserved child of an incomplete
/// reservation from the stored exact child proof (the transaction
/// `replacement_repaired`, `lane_created`).
///
/// Beyond the reference: a reservation whose child agent is the interrupted
/// agent itself is not repaired (it would hand the lane back to the agent
/// the replacement fenced off); it has to be blocked instead.
fn repair(state: &CoordinatorState, step: LineageStep<'_>) -> Result<Vec<Intent>, FlowError> {
    let LineageStep {
        original,
        request,
        evidence,
    } = step;
    require_no_replacement(state, request)?;
    let Some(reservation) = &original.replacement_reservation else {
        return refused(Refused::NoChildProof {
            lane_id: request.lane_id.clone(),
            replacement_lane_id: request.replacement_lane_id.clone(),
        });
    };
    let reserved = reservation
        .get("replacement_lane_id")
        .and_then(Value::as_str);
    if reserved != Some(request.replacement_lane_id.as_str()) {
        return refused(Refused::NotReserved {
            command: LineageCommand::Repair,
            lane_id: request.lane_id.clone(),
            given: request.replacement_lane_id.clone(),
            reserved: reserved.map(str::to_owned),
        });
    }
    let child_agent = reservation
        .get("replacement_agent_id")
        .and_then(Value::as_str);
    if child_agent == Some(original.agent_id.as_str()) {
        return refused(Refused::Unfenced {
            lane_id: request.lane_id.clone(),
            replacement_lane_id: request.replacement_lane_id.clone(),
            agent_id: original.agent_id.to_string(),
        });
    }
    let checkpoint = reservation
        .get("checkpoint_digest")
        .cloned()
        .unwrap_or(Value::Null);
    // A ref without a checksum compares as null, as in the reference.
    let bound = evidence.as_array().is_some_and(|refs| {
        refs.iter()
            .filter_map(Value::as_object)
            .any(|r| r.get("checksum").unwrap_or(&Value::Null) == &checkpoint)
    });
    if !bound {
        return invalid(InputRule::CheckpointVerificationMissing);
    }
    let field = |key: &str| reservation.get(key).cloned().unwrap_or(Value::Null);
    let repaired = step.intent(
        EventType::ReplacementRepaired,
        LaneState::Replaced,
        None,
        ("checkpoint_digest", checkpoint),
    );
    let created = lane_intent(
        LaneStep {
            event_type: EventType::LaneCreated,
            lane_id: &request.replacement_lane_id,
            agent_id: child_agent,
            from: None,
            to: LaneState::Pending,
        },
        &request.at,
        evidence,
        None,
        metadata(vec![
            ("assignment", field("replacement_assignment")),
            ("write_scope", field("replacement_write_scope")),
            ("fallback", field("replacement_fallback")),
            (
                "startup_ack_deadline",
                field("replacement_startup_ack_deadline"),
            ),
            ("command_deadline", field("replacement_command_deadline")),
            ("parent_lane_id", json!(request.lane_id)),
            ("replacement_count", field("replacement_count")),
        ]),
    );
    Ok(vec![repaired, created])
}

/// `replacement-block`: an incomplete reservation that cannot be safely
/// recreated ends the original `blocked`.
fn block(state: &CoordinatorState, step: LineageStep<'_>) -> Result<Vec<Intent>, FlowError> {
    let LineageStep {
        original, request, ..
    } = step;
    require_reserved(original, request, LineageCommand::Block)?;
    require_no_replacement(state, request)?;
    if !state.incomplete_replacements().contains(&request.lane_id) {
        return refused(Refused::Complete {
            lane_id: request.lane_id.clone(),
            replacement_lane_id: request.replacement_lane_id.clone(),
        });
    }
    let checkpoint = digest(&Value::Array(original.evidence_refs.clone()));
    Ok(vec![step.intent(
        EventType::ReplacementBlocked,
        LaneState::Blocked,
        Some("incomplete replacement cannot be safely recreated"),
        ("checkpoint_digest", json!(checkpoint)),
    )])
}

#[cfg(test)]
#[path = "replacement_tests.rs"]
mod tests;
