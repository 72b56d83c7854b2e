//! Decisions of the lane lifecycle commands (reference-coordinator §5):
//! `lane-create` and the shared lane-transition path of `lane-start`,
//! `startup-ack`, `probe-ack`, `lane-complete`, `lane-fail`, `lane-block`,
//! `lane-cancel`.
//!
//! Write-scope canonicalisation touches the filesystem (symlinks under the
//! repo root), so the decisions take it as a function argument: the command
//! layer passes the store's canonicaliser, tests pass a pure one. The
//! decision calls it exactly where the reference canonicalises, so the
//! exit-code precedence is the reference's.

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value, json};

use super::decide::{
    FlowError, Intent, LaneRefusal, Policy, Teaching, evidence_refusal, in_field, invalid,
    require_evidence, run_state_refused,
};
use super::decide::{InputRefusal, InputRule};
use super::inputs::{LaneCreateInput, checked_input};
use super::machine::{Edge, LaneEdge, lane_edge};
use super::state::{CoordinatorState, LaneRecord, LaneState, RunState};
use crate::receipt::canonical;
use crate::receipt::faults;
use crate::receipt::primitives::{
    AgentId, Instant, LaneId, as_int, is_identifier, parse_timestamp,
};
use crate::receipt::rules::{Limits, check_evidence};
use crate::receipt::schema::keys_of;
use crate::receipt::scope::{Narrowing, entry_covers, narrow_scope};

/// What an identifier input must be (`fields.invalid`, contracts/refusals.md).
pub const IDENTIFIER: &str = "an identifier: a letter or digit, then letters, digits, '.', '_' or '-', at most 128 characters";

/// What a timestamp input must be.
pub const TIMESTAMP: &str = "a UTC timestamp ending in Z, e.g. 2026-07-14T01:00:00Z";

trait InField {
    fn map_in_field(self, key: &'static str, expected: &'static str) -> FlowError;
}

impl InField for FlowError {
    fn map_in_field(self, key: &'static str, expected: &'static str) -> FlowError {
        in_field(key, expected, None)(self)
    }
}

/// An input object must hold every required key and nothing beyond the
/// optional ones (reference-coordinator §1.4).
pub fn require_fields<'a>(
    input: &'a Value,
    required: &[&str],
    optional: &[&str],
) -> Result<&'a Map<String, Value>, FlowError> {
    let Some(object) = input.as_object() else {
        let fault = faults::wrong_type("--input", "object", input);
        return Err(FlowError::from(InputRule::FieldsMismatch).taught(Teaching::fault(fault, None)));
    };
    if let Some(fault) = faults::object_fault("--input", object, required, optional) {
        let hint = format!(
            "give --input exactly the keys {}{}; see this command's --help for an example",
            required.join(", "),
            if optional.is_empty() {
                String::new()
            } else {
                format!(" (optional: {})", optional.join(", "))
            }
        );
        return Err(
            FlowError::from(InputRule::FieldsMismatch).taught(Teaching::fault(fault, Some(hint)))
        );
    }
    Ok(object)
}

/// An identifier-valued input, named `field` in the message.
pub fn identifier(value: &Value, field: &str) -> Result<String, FlowError> {
    typed_identifier(value, field, |text| {
        is_identifier(text).then(|| text.to_string())
    })
}

/// An identifier-valued input as the id type `parse` makes (`LaneId`,
/// `AgentId`), named `field` in the message.
pub fn typed_identifier<T>(
    value: &Value,
    field: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T, FlowError> {
    value.as_str().and_then(parse).ok_or_else(|| {
        FlowError::from(InputRefusal::Identifier {
            field: field.into(),
        })
    })
}

/// A caller-supplied instant (stored shape and a real calendar instant).
pub fn instant(value: &Value, field: &str) -> Result<Instant, FlowError> {
    value.as_str().and_then(parse_timestamp).ok_or_else(|| {
        FlowError::from(InputRefusal::Timestamp {
            field: field.into(),
        })
    })
}

/// Python's `str.isspace` for one character (Unicode White_Space plus the
/// four information separators U+001C..U+001F).
pub(crate) fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A string with at least one non-whitespace character.
fn non_blank(value: &Value, rule: InputRule) -> Result<String, FlowError> {
    match value.as_str() {
        Some(text) if !text.chars().all(is_python_space) => Ok(text.to_string()),
        _ => invalid(rule),
    }
}

/// Lanes are created, and move, only while the run is running or recovering.
pub fn require_lane_run_state(state: &CoordinatorState) -> Result<(), FlowError> {
    match state.run_state_enum() {
        RunState::Running | RunState::Recovering => Ok(()),
        other => run_state_refused(other, &[RunState::Running, RunState::Recovering]),
    }
}

/// The lane exists, is neither terminal nor replaced, and `agent_id` owns it.
pub fn require_active_lane_owner<'s>(
    state: &'s CoordinatorState,
    lane_id: &str,
    agent_id: &str,
) -> Result<&'s LaneRecord, FlowError> {
    let Some(lane) = state.lane(lane_id) else {
        return Err(missing_lane(state, lane_id));
    };
    if lane.state.is_terminal() || lane.state == LaneState::Replaced {
        return Err(FlowError::from(LaneRefusal::Inactive {
            lane_id: lane_id.to_string(),
            state: lane.state,
        }));
    }
    if lane.agent_id != agent_id {
        return Err(FlowError::from(LaneRefusal::NotOwner {
            lane_id: lane_id.to_string(),
            agent_id: agent_id.to_string(),
            owner: lane.agent_id.to_string(),
        }));
    }
    Ok(lane)
}

/// "lane does not exist", naming the run's lanes (contracts/refusals.md).
pub fn missing_lane(state: &CoordinatorState, lane_id: &str) -> FlowError {
    FlowError::from(LaneRefusal::Missing {
        lane_id: lane_id.to_string(),
        lanes: state
            .lanes()
            .keys()
            .take(32)
            .map(LaneId::to_string)
            .collect(),
    })
}

/// "identifier already exists" for a lane id in use (contracts/refusals.md).
pub fn existing_lane(lane_id: &str, lane_state: LaneState) -> FlowError {
    FlowError::from(LaneRefusal::Exists {
        lane_id: lane_id.to_string(),
        state: lane_state,
    })
}

/// A validated `lane-create` request (write scope already canonical).
#[derive(Debug, Clone, PartialEq)]
pub struct LaneCreate {
    pub lane_id: LaneId,
    pub agent_id: AgentId,
    pub assignment: String,
    pub write_scope: Vec<String>,
    pub fallback: String,
    pub observed_at: String,
    pub startup_ack_deadline: String,
    pub command_deadline: String,
    pub parent_lane_id: Option<String>,
    /// A non-negative JSON integer of any size.
    pub replacement_count: Value,
}

/// Pre-lock checks of `lane-create`, in the reference's order: the field
/// contract, ids, parent id, assignment, fallback, replacement count, write
/// scope (via `canonicalize`), deadline order, evidence.
pub fn precheck_lane_create(
    input: &Value,
    evidence: &Value,
    canonicalize: impl FnOnce(&Value) -> Result<Vec<String>, FlowError>,
) -> Result<LaneCreate, FlowError> {
    let keys = keys_of!(LaneCreateInput);
    let fields = require_fields(input, &keys.required, &keys.optional)?;
    let field = |key: &str| fields.get(key).unwrap_or(&Value::Null);
    typed_identifier(field("lane_id"), "lane id", LaneId::parse)
        .map_err(in_field("lane_id", IDENTIFIER, None))?;
    typed_identifier(field("agent_id"), "agent id", AgentId::parse)
        .map_err(in_field("agent_id", IDENTIFIER, None))?;
    if let Some(parent) = fields.get("parent_lane_id").filter(|p| !p.is_null()) {
        identifier(parent, "parent lane id").map_err(in_field(
            "parent_lane_id",
            "null or an existing lane's id",
            None,
        ))?;
    }
    non_blank(field("assignment"), InputRule::AssignmentBlank).map_err(in_field(
        "assignment",
        "a non-blank string",
        None,
    ))?;
    non_blank(field("fallback"), InputRule::FallbackBlank).map_err(in_field(
        "fallback",
        "a non-blank string",
        None,
    ))?;
    if let Some(count) = fields.get("replacement_count")
        && as_int(count).is_none_or(|n| n < 0)
    {
        return Err(FlowError::from(InputRule::ReplacementCountNegative)
            .map_in_field("replacement_count", "a non-negative integer"));
    }
    let write_scope = canonicalize(field("write_scope")).map_err(in_field(
        "write_scope",
        "a list of repository paths (e.g. [\"src/api\"])",
        None,
    ))?;
    let observed = instant(field("observed_at"), "observed_at").map_err(in_field(
        "observed_at",
        TIMESTAMP,
        None,
    ))?;
    let startup = instant(field("startup_ack_deadline"), "startup_ack_deadline")
        .map_err(in_field("startup_ack_deadline", TIMESTAMP, None))?;
    let command = instant(field("command_deadline"), "command_deadline").map_err(in_field(
        "command_deadline",
        TIMESTAMP,
        None,
    ))?;
    if !(observed < startup && startup <= command) {
        return Err(FlowError::from(InputRule::DeadlineOrder)
        .hinted(format!(
            "give instants in that order: observed_at {} must be before startup_ack_deadline {}, which must not be after command_deadline {}",
            field("observed_at"),
            field("startup_ack_deadline"),
            field("command_deadline")
        )));
    }
    require_evidence(evidence)?;
    let typed: LaneCreateInput = checked_input(input)?;
    Ok(LaneCreate {
        lane_id: typed.lane_id,
        agent_id: typed.agent_id,
        assignment: typed.assignment.0,
        write_scope,
        fallback: typed.fallback.0,
        observed_at: typed.observed_at.0,
        startup_ack_deadline: typed.startup_ack_deadline.0,
        command_deadline: typed.command_deadline.0,
        parent_lane_id: typed.parent_lane_id.map(String::from),
        // Absent is 0; a count is kept as written (any size).
        replacement_count: typed
            .replacement_count
            .map_or(json!(0), |count| Value::Number(count.0)),
    })
}

/// In-lock decision of `lane-create`: run state, a new lane id, the run's
/// lane limit, and (our extension) a child of an existing parent lane
/// within its parent's write scope. One `lane_created` event at
/// `observed_at`.
pub fn decide_lane_create(
    state: &CoordinatorState,
    policy: &Policy,
    request: &LaneCreate,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    if let Some(lane) = state.lane(&request.lane_id) {
        return Err(existing_lane(&lane.id, lane.state));
    }
    if state.lanes().len() as u64 >= policy.limits.max_lanes {
        return Err(FlowError::from(LaneRefusal::LimitReached {
            max_lanes: policy.limits.max_lanes,
        }));
    }
    // Scopes only narrow (our extension): a child of an existing lane stays
    // within its parent's scope. The reference lets a child widen it.
    if let Some(parent) = request
        .parent_lane_id
        .as_deref()
        .and_then(|p| state.lane(p))
    {
        narrow_scope(&parent.write_scope, &request.write_scope, &policy.limits)
            .map_err(|n| narrowing_refusal(n, InputRule::ChildScopeWider))?;
    }
    let mut metadata = Map::new();
    metadata.insert("assignment".into(), json!(request.assignment));
    metadata.insert("write_scope".into(), json!(request.write_scope));
    metadata.insert("fallback".into(), json!(request.fallback));
    metadata.insert(
        "startup_ack_deadline".into(),
        json!(request.startup_ack_deadline),
    );
    metadata.insert("command_deadline".into(), json!(request.command_deadline));
    metadata.insert("parent_lane_id".into(), json!(request.parent_lane_id));
    metadata.insert(
        "replacement_count".into(),
        request.replacement_count.clone(),
    );
    Ok(vec![Intent {
        event_type: EventType::LaneCreated,
        timestamp: Some(request.observed_at.clone()),
        from_state: None,
        to_state: Some(LaneState::Pending.into()),
        lane_id: Some(request.lane_id.clone()),
        agent_id: Some(request.agent_id.clone()),
        reason: None,
        evidence_refs: evidence.clone(),
        metadata,
    }])
}

/// The seven commands of the shared lane-transition path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneCommand {
    Start,
    StartupAck,
    ProbeAck,
    Complete,
    Fail,
    Block,
    Cancel,
}

impl LaneCommand {
    /// The event the command records.
    pub fn event_type(self) -> EventType {
        match self {
            LaneCommand::Start => EventType::LaneStarted,
            LaneCommand::StartupAck => EventType::StartupAck,
            LaneCommand::ProbeAck => EventType::ProbeAcknowledged,
            LaneCommand::Complete => EventType::LaneCompleted,
            LaneCommand::Fail => EventType::LaneFailed,
            LaneCommand::Block => EventType::LaneBlocked,
            LaneCommand::Cancel => EventType::LaneCancelled,
        }
    }

    /// The command's edge of the lane state machine ([`lane_edge`]); a
    /// command never moves a `replaced` lane (the replacement commands do).
    pub fn edge(self) -> LaneEdge {
        lane_edge(self.event_type()).expect("every lane command is a lane transition")
    }

    /// Whether the parser requires `--reason`.
    pub fn takes_reason(self) -> bool {
        matches!(
            self,
            LaneCommand::Fail | LaneCommand::Block | LaneCommand::Cancel
        )
    }
}

/// One lane transition as the caller asked for it.
#[derive(Debug, Clone, Copy)]
pub struct LaneTransition<'a> {
    pub command: LaneCommand,
    pub lane_id: &'a str,
    pub agent_id: &'a str,
    /// `--at`, the event timestamp.
    pub at: &'a str,
    pub evidence: &'a Value,
    pub reason: Option<&'a str>,
    /// `--changed-paths` (lane-complete only), exactly as read.
    pub changed_paths: Option<&'a Value>,
}

/// The `--changed-paths` file must be a list of non-empty strings (checked
/// right after it is read, before anything else about the transition).
pub fn check_changed_paths_input(changed: &Value) -> Result<(), FlowError> {
    match changed.as_array() {
        Some(items)
            if items
                .iter()
                .all(|p| p.as_str().is_some_and(|s| !s.is_empty())) =>
        {
            Ok(())
        }
        _ => invalid(InputRule::ChangedPathsNotStrings),
    }
}

/// Pre-lock checks of a lane transition: ids, `--at`, evidence present.
pub fn precheck_lane_transition(request: &LaneTransition<'_>) -> Result<(), FlowError> {
    identifier(&json!(request.lane_id), "lane id")?;
    identifier(&json!(request.agent_id), "agent id")?;
    instant(&json!(request.at), "decided_at")
        .map_err(|r| crate::coordinator::decide::at_refusal(r, request.at))?;
    require_evidence(request.evidence)
}

/// Whether a canonical path equals a scope entry or lies below one
/// (`srcx/a` is not below `src`).
pub fn within_scope(path: &str, scope: &[String]) -> bool {
    scope.iter().any(|entry| entry_covers(entry, path))
}

/// The refusal for a scope that cannot be combined with its parent's
/// ([`narrow_scope`]): `wider` is the command's own rule.
pub fn narrowing_refusal(narrowing: Narrowing, wider: InputRule) -> FlowError {
    FlowError::from(match narrowing {
        Narrowing::Wider { .. } => InputRefusal::Rule(wider),
        Narrowing::MalformedParent { rule, .. } => {
            InputRefusal::MalformedScope { parent: true, rule }
        }
        Narrowing::MalformedChild { rule, .. } => InputRefusal::MalformedScope {
            parent: false,
            rule,
        },
    })
}

/// In-lock decision of the shared lane-transition path, in the reference's
/// order: run state, lane exists, lane active, agent owns the lane, legal
/// source state; then the probe-ack fence (decisions.md 9) and the
/// lane-complete rules (§5.3): liveness evidence, canonical changed paths
/// (via `canonicalize`), containment in the lane's write scope.
pub fn decide_lane_transition(
    state: &CoordinatorState,
    request: &LaneTransition<'_>,
    canonicalize: impl FnOnce(&Value) -> Result<Vec<String>, FlowError>,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let lane = require_active_lane_owner(state, request.lane_id, request.agent_id)?;
    let event_type = request.command.event_type();
    let Edge { from, to: target } = request.command.edge();
    // A command never moves a replaced lane (the replacement commands do).
    let sources: Vec<LaneState> = from
        .iter()
        .copied()
        .filter(|s| *s != LaneState::Replaced)
        .collect();
    if !sources.contains(&lane.state) {
        return Err(super::decide::lane_state_refused(
            lane,
            &sources,
            super::decide::RefusedLaneStep::Lifecycle,
        ));
    }
    // decisions.md 9: once an interrupt is recorded the agent is fenced; a
    // late probe ACK cannot revive the lane (the reference accepts it).
    if request.command == LaneCommand::ProbeAck
        && lane.last_event_type == EventType::AgentInterrupted
    {
        return Err(FlowError::from(LaneRefusal::Fenced {
            lane_id: lane.id.to_string(),
            agent_id: lane.agent_id.to_string(),
        }));
    }
    let mut metadata = Map::new();
    if request.command == LaneCommand::Complete {
        let changed = complete_paths(state, lane, request, canonicalize)?;
        metadata.insert("changed_paths".into(), json!(changed));
    }
    // The lane found by the request's id, owned by its agent.
    Ok(vec![Intent::on_lane(
        event_type,
        lane,
        Some(target.into()),
        request.at,
        request.evidence,
        request.reason,
        metadata,
    )])
}

/// The lane-complete rules: the evidence is no liveness evidence of any
/// lane, ever (a heartbeat proves liveness only — stricter than the
/// reference, which compares with this lane's latest liveness evidence
/// only), the changed paths are already canonical, and every one lies
/// within the pinned write scope.
fn complete_paths(
    state: &CoordinatorState,
    lane: &LaneRecord,
    request: &LaneTransition<'_>,
    canonicalize: impl FnOnce(&Value) -> Result<Vec<String>, FlowError>,
) -> Result<Vec<String>, FlowError> {
    // Computing the digest validates the evidence first (with the default
    // limits, as the reference's digest helper does).
    check_evidence(request.evidence, &Limits::default())
        .map_err(|m| evidence_refusal(m, request.evidence, &Limits::default()))?;
    let digest = canonical::digest(request.evidence);
    if state.rests_on_liveness(&digest) {
        return invalid(InputRule::LivenessCannotComplete);
    }
    let Some(supplied) = request.changed_paths else {
        return invalid(InputRule::CompletionNeedsChangedPaths);
    };
    let changed = canonicalize(supplied)?;
    if json!(changed) != *supplied {
        return invalid(InputRule::ChangedPathsNotCanonical);
    }
    let outside: Vec<String> = changed
        .iter()
        .filter(|path| !within_scope(path, &lane.write_scope))
        .cloned()
        .collect();
    if !outside.is_empty() {
        return Err(FlowError::from(LaneRefusal::OutsideScope {
            lane_id: lane.id.to_string(),
            outside,
            write_scope: lane.write_scope.clone(),
        }));
    }
    Ok(changed)
}

#[cfg(test)]
#[path = "lane_commands_tests.rs"]
mod tests;
