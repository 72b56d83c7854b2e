//! Liveness (reference-coordinator §6): the pure evaluation of one lane at
//! an instant ([`evaluate`]) and the decisions of `heartbeat`,
//! `stall-record`, `stall-clear`, `probe-sent` and `interrupt-result`, each
//! split like the run commands into a pre-lock precheck and an in-lock
//! `decide_*`, with the reference's checks in the reference's order.
//!
//! A heartbeat proves that an agent is alive, nothing more: every event
//! written here is a liveness event, so the reducer files its evidence under
//! the lane's liveness history and never under its completion evidence
//! (`evidence_refs`). Completion rules refuse evidence found in that history.
//!
//! Caller timestamps are read with the LAX parser of §1.5
//! ([`crate::receipt::lax_time`]); whatever is stored still has to pass the
//! strict receipt contract when the pipeline seals the event.

use crate::receipt::vocab::EventType;
use chrono::TimeDelta;
use serde_json::{Map, Value, json};

use super::decide::{
    FlowError, Intent, LaneRefusal, Policy, RefusedLaneStep, Teaching, invalid, require_evidence,
};
use super::decide::{InputRefusal, InputRule};
use super::inputs::{HeartbeatInput, checked_input};
use super::lane_commands::{
    identifier, require_active_lane_owner, require_fields, require_lane_run_state,
};
use super::state::{CoordinatorState, LaneRecord, LaneState};
use crate::receipt::canonical;
use crate::receipt::lax_time::LaxTimeError;
use crate::receipt::lax_time::parse_lax_timestamp;
use crate::receipt::primitives::{AgentId, Instant, as_int, format_now};
use crate::receipt::rules::check_evidence;
use crate::receipt::schema::keys_of;

/// What the caller observed about the lane's command (`--command-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandStatus {
    Alive,
    Dead,
    Unknown,
}

impl CommandStatus {
    pub fn parse(text: &str) -> Option<CommandStatus> {
        match text {
            "alive" => Some(CommandStatus::Alive),
            "dead" => Some(CommandStatus::Dead),
            "unknown" => Some(CommandStatus::Unknown),
            _ => None,
        }
    }
}

/// The recommended next step for a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivenessAction {
    Continue,
    SuspectStall,
    ObserveCommand,
    SendProbe,
    AwaitProbe,
    Interrupt,
    MainTakeover,
    None,
}

impl LivenessAction {
    pub const ALL: [LivenessAction; 8] = [
        LivenessAction::Continue,
        LivenessAction::SuspectStall,
        LivenessAction::ObserveCommand,
        LivenessAction::SendProbe,
        LivenessAction::AwaitProbe,
        LivenessAction::Interrupt,
        LivenessAction::MainTakeover,
        LivenessAction::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LivenessAction::Continue => "continue",
            LivenessAction::SuspectStall => "suspect_stall",
            LivenessAction::ObserveCommand => "observe_command",
            LivenessAction::SendProbe => "send_probe",
            LivenessAction::AwaitProbe => "await_probe",
            LivenessAction::Interrupt => "interrupt",
            LivenessAction::MainTakeover => "main_takeover",
            LivenessAction::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<LivenessAction> {
        LivenessAction::ALL
            .into_iter()
            .find(|action| action.as_str() == text)
    }
}

/// As its name (the views' typed answers and the decision table carry the
/// action).
impl serde::Serialize for LivenessAction {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The outcome of [`evaluate`]: exactly `{action, reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LivenessDecision {
    pub action: LivenessAction,
    pub reason: &'static str,
}

impl LivenessDecision {
    fn new(action: LivenessAction, reason: &'static str) -> Result<Self, FlowError> {
        Ok(LivenessDecision { action, reason })
    }

    /// The decision object as printed and as bound by `stall-record`.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("action".into(), json!(self.action.as_str()));
        map.insert("reason".into(), json!(self.reason));
        map
    }
}

/// A caller timestamp, read the reference's lax way.
pub fn parse_instant(value: &str) -> Result<Instant, FlowError> {
    parse_lax_timestamp(value).map_err(|error| {
        FlowError::from(InputRefusal::LaxTimestamp(error)).hinted(format!(
            "'{value}' is not a UTC instant: give it like 2026-07-14T01:00:00Z"
        ))
    })
}

/// A JSON input value that must be a lax timestamp.
fn parse_instant_value(value: &Value) -> Result<Instant, FlowError> {
    match value {
        Value::String(text) => parse_instant(text),
        _ => invalid(InputRefusal::LaxTimestamp(LaxTimeError::Invalid)),
    }
}

/// A deadline stored on the lane record (the reference parses it again,
/// laxly; a missing one — `command_deadline` may be null in a receipt — is
/// the same contract error).
fn stored_instant(value: Option<&str>) -> Result<Instant, FlowError> {
    match value {
        Some(text) => parse_instant(text),
        None => invalid(InputRefusal::LaxTimestamp(LaxTimeError::Invalid)),
    }
}

/// The largest `timedelta` Python can build (999 999 999 days).
const MAX_WINDOW_SECONDS: i64 = 999_999_999 * 86_400 + 86_399;

/// `seconds` as a window, within what the reference can represent. Beyond
/// it the reference crashes (OverflowError); we refuse with a typed error
/// (decisions.md 1).
fn window(seconds: i64) -> Result<TimeDelta, FlowError> {
    if seconds > MAX_WINDOW_SECONDS {
        return invalid(InputRule::LivenessWindow);
    }
    TimeDelta::try_seconds(seconds).ok_or_else(|| FlowError::from(InputRule::LivenessWindow))
}

/// `start + seconds`, refused past Python's `datetime.max`
/// (9999-12-31T23:59:59.999999), where the reference crashes.
fn add_window(start: Instant, seconds: i64) -> Result<Instant, FlowError> {
    let out_of_range = || FlowError::from(InputRule::LivenessWindow);
    let end = start
        .checked_add_signed(window(seconds)?)
        .ok_or_else(out_of_range)?;
    let max = chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_micro_opt(23, 59, 59, 999_999))
        .map(|t| t.and_utc())
        .ok_or_else(out_of_range)?;
    if end > max {
        return Err(out_of_range());
    }
    Ok(end)
}

/// The lane's replacement count as an unbounded integer.
fn replacement_count(lane: &LaneRecord) -> i128 {
    as_int(&Value::Number(lane.replacement_count.clone())).unwrap_or(i128::MAX)
}

/// The liveness decision table (§6.2), first match wins; every boundary is
/// a strict `<`, so at exactly a deadline the window has elapsed.
///
/// Refuses (exit 2) only when a stored timestamp the row needs does not
/// parse, or when the silence window ends beyond the representable range.
pub fn evaluate(
    lane: &LaneRecord,
    policy: &Policy,
    now: Instant,
    command: CommandStatus,
) -> Result<LivenessDecision, FlowError> {
    use LivenessAction as A;
    match lane.state {
        // Every lane state has a row, so the reference's fallback ("lane
        // state has no liveness action") cannot be reached with a typed state.
        LaneState::Completed
        | LaneState::Failed
        | LaneState::Blocked
        | LaneState::Cancelled
        | LaneState::Replaced => LivenessDecision::new(A::None, "lane is terminal"),
        LaneState::Pending => LivenessDecision::new(A::Continue, "lane awaits dispatch"),
        LaneState::Starting => {
            let ack = stored_instant(lane.startup_ack_deadline.as_deref())?;
            if now < ack {
                LivenessDecision::new(A::Continue, "startup ACK is pending")
            } else {
                LivenessDecision::new(A::SuspectStall, "startup ACK deadline elapsed")
            }
        }
        LaneState::Running => {
            // The silence window runs from the lane's last event; a recorded
            // lease only ever extends it, and an old lease keeps counting
            // after later events.
            let updated = stored_instant(Some(&lane.updated_at))?;
            let mut fresh_until = add_window(updated, policy.suspected_stall_seconds)?;
            if let Some(lease) = &lane.silence_lease_deadline {
                fresh_until = fresh_until.max(parse_instant(lease)?);
            }
            if now < fresh_until {
                return LivenessDecision::new(A::Continue, "fresh evidence");
            }
            let command_deadline = stored_instant(lane.command_deadline.as_deref())?;
            if command == CommandStatus::Alive && now < command_deadline {
                return LivenessDecision::new(
                    A::ObserveCommand,
                    "command is alive within its deadline",
                );
            }
            // Dead and unknown are the same here.
            LivenessDecision::new(A::SuspectStall, "no fresh evidence")
        }
        LaneState::SuspectedStall => LivenessDecision::new(A::SendProbe, "probe has not been sent"),
        LaneState::Recovering => {
            let probe = stored_instant(lane.probe_deadline.as_deref())?;
            let command_deadline = stored_instant(lane.command_deadline.as_deref())?;
            if now < probe || now < command_deadline {
                return LivenessDecision::new(A::AwaitProbe, "a recovery deadline remains");
            }
            if replacement_count(lane) >= i128::from(policy.max_replacements) {
                return LivenessDecision::new(A::MainTakeover, "replacement limit reached");
            }
            match command {
                // Unlike a running lane, a recovering one needs to know.
                CommandStatus::Unknown => LivenessDecision::new(
                    A::ObserveCommand,
                    "command state must be observed before interrupt",
                ),
                CommandStatus::Alive | CommandStatus::Dead => {
                    LivenessDecision::new(A::Interrupt, "recovery deadlines elapsed")
                }
            }
        }
    }
}

/// What `liveness-check --explain` adds to its answer (cli-conventions §5): the
/// lane's state, its last evidence time, the deadlines that decide the
/// answer, and for `suspect_stall` the exact `decision` object with its
/// `decision_checksum`, so `stall-record` can take them as they are; for
/// `send_probe` the latest `--deadline` that `probe-sent` accepts at `now`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LivenessExplanation {
    pub lane_state: &'static str,
    pub agent_id: AgentId,
    /// When the lane last recorded evidence (its `updated_at`).
    pub last_evidence_at: String,
    /// The digest lane-resolve (and replacement-repair) binds for this
    /// lane's current evidence (DEVIATIONS 88).
    pub evidence_digest: String,
    pub deadlines: ExplainedDeadlines,
    /// Only for `suspect_stall`: the digest `stall-record` binds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_checksum: Option<String>,
    /// Only for `suspect_stall`: the object `stall-record --decision` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<LivenessDecision>,
    /// Only for `send_probe`: the latest `probe-sent --deadline` at `now`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_deadline_max: Option<String>,
}

/// The deadlines that decide a lane's answer in its state: a starting
/// lane's ACK deadline, a running lane's freshness, lease and command
/// deadline, a recovering lane's probe and command deadline. A deadline the
/// lane does not have is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExplainedDeadlines {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_ack_deadline: Option<String>,
    /// The end of the suspected-stall window, or of the silence lease when
    /// that is later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fresh_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silence_lease_deadline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_deadline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_deadline: Option<String>,
}

/// [`LivenessExplanation`] of `lane` and its `decision` at `now`.
pub fn explain(
    lane: &LaneRecord,
    policy: &Policy,
    now: Instant,
    decision: &LivenessDecision,
) -> LivenessExplanation {
    let deadlines = match lane.state {
        LaneState::Starting => ExplainedDeadlines {
            startup_ack_deadline: lane.startup_ack_deadline.clone(),
            ..ExplainedDeadlines::default()
        },
        LaneState::Running => ExplainedDeadlines {
            fresh_until: stored_instant(Some(&lane.updated_at))
                .and_then(|u| add_window(u, policy.suspected_stall_seconds))
                .ok()
                .map(|window| {
                    let lease = lane
                        .silence_lease_deadline
                        .as_deref()
                        .and_then(|l| parse_instant(l).ok());
                    format_now(lease.map_or(window, |l| window.max(l)))
                }),
            silence_lease_deadline: lane.silence_lease_deadline.clone(),
            command_deadline: lane.command_deadline.clone(),
            ..ExplainedDeadlines::default()
        },
        LaneState::Recovering => ExplainedDeadlines {
            probe_deadline: lane.probe_deadline.clone(),
            command_deadline: lane.command_deadline.clone(),
            ..ExplainedDeadlines::default()
        },
        _ => ExplainedDeadlines::default(),
    };
    let stall = decision.action == LivenessAction::SuspectStall;
    LivenessExplanation {
        lane_state: lane.state.as_str(),
        agent_id: lane.agent_id.clone(),
        last_evidence_at: lane.updated_at.clone(),
        evidence_digest: canonical::digest(&Value::Array(lane.evidence_refs.clone())),
        deadlines,
        // The checksum of exactly the object stall-record compares with.
        decision_checksum: stall.then(|| canonical::digest(&Value::Object(decision.to_json()))),
        decision: stall.then_some(*decision),
        probe_deadline_max: (decision.action == LivenessAction::SendProbe)
            .then(|| add_window(now, policy.probe_grace_seconds).ok())
            .flatten()
            .map(format_now),
    }
}

/// `liveness-check` after the state is loaded: the lane must exist (exit 5)
/// before `--at` is parsed (exit 2).
pub fn check_lane(
    state: &CoordinatorState,
    policy: &Policy,
    lane_id: &str,
    at: &str,
    command: CommandStatus,
) -> Result<LivenessDecision, FlowError> {
    let Some(lane) = state.lane(lane_id) else {
        return Err(super::lane_commands::missing_lane(state, lane_id));
    };
    let now = parse_instant(at).map_err(|r| super::decide::at_refusal(r, at))?;
    evaluate(lane, policy, now, command)
}

// ---------------------------------------------------------------------------
// Shared checks

/// "current state does not allow lifecycle intent" for `lane`.
fn lane_state_refusal(lane: &LaneRecord, allowed: &[LaneState]) -> FlowError {
    super::decide::lane_state_refused(lane, allowed, RefusedLaneStep::Lifecycle)
}

/// Python's `str.isspace` over the whole string (empty counts as blank):
/// Unicode White_Space plus the separators U+001C..U+001F.
pub fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

fn require_identifier(value: &str, field: &str) -> Result<(), FlowError> {
    identifier(&Value::String(value.into()), field).map(|_| ())
}

/// The active-lane-owner checks of the shared lane path (§5.2), in order:
/// the run is running or recovering, the lane exists, it is neither
/// terminal nor replaced, and `agent_id` owns it (the lane commands' checks).
pub fn active_lane_owner<'s>(
    state: &'s CoordinatorState,
    lane_id: &str,
    agent_id: &str,
) -> Result<&'s LaneRecord, FlowError> {
    require_lane_run_state(state)?;
    require_active_lane_owner(state, lane_id, agent_id)
}

/// Fresh liveness evidence (heartbeat, stall-clear): some evidence, a
/// non-blank reason, and not BOTH the same evidence digest and the same
/// reason as the lane's last liveness record (the reference's rule). We add:
/// evidence this lane already recorded as liveness evidence cannot renew
/// it again, so the same evidence cannot keep a lane alive forever by
/// changing only the reason. Returns the evidence digest.
pub fn require_fresh_evidence(
    lane: &LaneRecord,
    evidence: &Value,
    reason: Option<&str>,
    policy: &Policy,
) -> Result<String, FlowError> {
    if evidence.as_array().is_none_or(Vec::is_empty) {
        return invalid(InputRule::LivenessEvidenceRequired);
    }
    let reason = match reason {
        Some(reason) if !is_blank(reason) => reason,
        _ => return invalid(InputRule::LivenessReasonRequired),
    };
    // The digest is only taken over a valid evidence list.
    check_evidence(evidence, &policy.limits)
        .map_err(|m| super::decide::evidence_refusal(m, evidence, &policy.limits))?;
    let digest = canonical::digest(evidence);
    if lane.last_evidence_digest.as_deref() == Some(digest.as_str())
        && lane.last_reason.as_deref() == Some(reason)
    {
        return invalid(InputRule::LivenessEvidenceUnchanged);
    }
    // The lane's last liveness evidence is proven with its record (its
    // line is re-read before an append); the earlier ones are asked of the
    // digest history.
    let last_was_liveness = lane.last_event_type.is_liveness()
        && lane.last_evidence_digest.as_deref() == Some(digest.as_str());
    if last_was_liveness || lane.has_liveness_digest(&digest) {
        return invalid(InputRule::LivenessEvidenceRecorded);
    }
    Ok(digest)
}

/// A lane liveness intent (timestamp = the caller's instant as given);
/// its target state is the lane machine's for `event_type`.
fn lane_intent(
    event_type: EventType,
    lane: &LaneRecord,
    timestamp: &str,
    evidence: &Value,
    reason: Option<&str>,
    metadata: Map<String, Value>,
) -> Intent {
    let to = super::machine::lane_edge(event_type).map(|edge| edge.to.into());
    Intent::on_lane(event_type, lane, to, timestamp, evidence, reason, metadata)
}

// ---------------------------------------------------------------------------
// heartbeat (§6.4)

/// A heartbeat input that passed the pre-lock checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    pub lane_id: String,
    pub agent_id: String,
    pub observed_at: String,
    pub observed: Instant,
    pub silence_lease_deadline: String,
    pub lease: Instant,
    /// `None` when the input's reason is not a string.
    pub reason: Option<String>,
}

/// Pre-lock: exactly the five fields, identifiers, both timestamps parse
/// (laxly, as the reference reads them); then the values are the typed
/// input's.
pub fn precheck_heartbeat(value: &Value) -> Result<Heartbeat, FlowError> {
    let input = require_fields(value, &keys_of!(HeartbeatInput).required, &[])?;
    use super::decide::in_field;
    use super::lane_commands::{IDENTIFIER, TIMESTAMP};
    identifier(&input["lane_id"], "lane id").map_err(in_field("lane_id", IDENTIFIER, None))?;
    identifier(&input["agent_id"], "agent id").map_err(in_field("agent_id", IDENTIFIER, None))?;
    let observed = parse_instant_value(&input["observed_at"]).map_err(in_field(
        "observed_at",
        TIMESTAMP,
        None,
    ))?;
    let lease = parse_instant_value(&input["silence_lease_deadline"]).map_err(in_field(
        "silence_lease_deadline",
        TIMESTAMP,
        None,
    ))?;
    let typed: HeartbeatInput = checked_input(value)?;
    Ok(Heartbeat {
        lane_id: typed.lane_id.into(),
        agent_id: typed.agent_id.into(),
        observed_at: typed.observed_at.0,
        observed,
        silence_lease_deadline: typed.silence_lease_deadline.0,
        lease,
        reason: typed.reason.as_str().map(str::to_string),
    })
}

/// In lock: a running lane owned by the agent, `observed_at < lease <=
/// command_deadline`, a lease of at most `max_silence_lease_seconds`, fresh
/// evidence. Two intents: `heartbeat_observed` then `lease_renewed`.
pub fn decide_heartbeat(
    state: &CoordinatorState,
    policy: &Policy,
    heartbeat: &Heartbeat,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    let lane = active_lane_owner(state, &heartbeat.lane_id, &heartbeat.agent_id)?;
    if lane.state != LaneState::Running {
        return Err(super::decide::lane_state_refused(
            lane,
            &[LaneState::Running],
            RefusedLaneStep::Heartbeat,
        ));
    }
    let command_deadline = stored_instant(lane.command_deadline.as_deref())?;
    if !(heartbeat.observed < heartbeat.lease && heartbeat.lease <= command_deadline) {
        return Err(FlowError::from(InputRule::HeartbeatDeadlineOrder)
        .hinted(format!(
            "silence_lease_deadline must be after observed_at {} and not after the lane's command_deadline {}",
            heartbeat.observed_at,
            lane.command_deadline.as_deref().unwrap_or("(none)")
        )));
    }
    let lease_micros = (heartbeat.lease - heartbeat.observed)
        .num_microseconds()
        .map_or(i128::MAX, i128::from);
    if lease_micros > i128::from(policy.max_silence_lease_seconds) * 1_000_000 {
        let max = policy.max_silence_lease_seconds;
        let latest = add_window(heartbeat.observed, max).ok().map(format_now);
        return invalid(InputRefusal::LeaseTooLong { max, latest });
    }
    let digest = require_fresh_evidence(lane, evidence, heartbeat.reason.as_deref(), policy)?;
    let mut observed_meta = Map::new();
    observed_meta.insert("evidence_digest".into(), json!(digest));
    let mut lease_meta = observed_meta.clone();
    lease_meta.insert(
        "silence_lease_deadline".into(),
        json!(heartbeat.silence_lease_deadline),
    );
    Ok(vec![
        lane_intent(
            EventType::HeartbeatObserved,
            lane,
            &heartbeat.observed_at,
            evidence,
            None,
            observed_meta,
        ),
        lane_intent(
            EventType::LeaseRenewed,
            lane,
            &heartbeat.observed_at,
            evidence,
            heartbeat.reason.as_deref(),
            lease_meta,
        ),
    ])
}

// ---------------------------------------------------------------------------
// stall-record (§6.5)

/// How a `stall-record` decision file is made from `liveness-check`.
const DECISION_HINT: &str = "the --decision file is exactly liveness-check's decision object {\"action\": ..., \"reason\": ...}: write it with bluetape-flow liveness-check --run-id {run_id} --lane-id {lane_id} --at TIME --decision-out decision.json, put its decision_checksum as \"checksum\" in an evidence item, and pass its reason as --reason";

/// The checksum that binds a liveness decision object as given: SHA-256 of
/// its canonical JSON; its action must be known and its reason a string.
pub fn decision_checksum(decision: &Map<String, Value>) -> Result<String, FlowError> {
    let known = decision
        .get("action")
        .and_then(Value::as_str)
        .and_then(LivenessAction::parse)
        .is_some();
    if !known || !decision.get("reason").is_some_and(Value::is_string) {
        return invalid(InputRule::LivenessDecisionInvalid);
    }
    Ok(canonical::digest(&Value::Object(decision.clone())))
}

/// A `stall-record` request.
#[derive(Debug, Clone, Copy)]
pub struct StallRecord<'a> {
    pub lane_id: &'a str,
    pub agent_id: &'a str,
    pub at: &'a str,
    pub reason: &'a str,
    pub decision: &'a Map<String, Value>,
    pub evidence: &'a Value,
}

/// Pre-lock: evidence, a non-blank reason, a `suspect_stall` decision whose
/// checksum some evidence ref carries, then `--at`. (The reference does not
/// pre-validate the lane and agent ids here.)
pub fn precheck_stall_record(request: &StallRecord<'_>) -> Result<Instant, FlowError> {
    require_evidence(request.evidence)?;
    if is_blank(request.reason) {
        return invalid(InputRule::StallReasonRequired);
    }
    let unknown: Vec<&String> = request
        .decision
        .keys()
        .filter(|k| !matches!(k.as_str(), "action" | "reason"))
        .collect();
    let decision_fields = |extra: Map<String, Value>| {
        let mut fields = Map::new();
        fields.insert("input".into(), json!("--decision"));
        if !unknown.is_empty() {
            fields.insert("unknown".into(), json!(unknown));
            fields.insert("allowed".into(), json!(["action", "reason"]));
        }
        fields.extend(extra);
        Value::Object(fields)
    };
    if request.decision.get("action").and_then(Value::as_str) != Some("suspect_stall") {
        return Err(
            FlowError::from(InputRule::StallNeedsSuspectStall).taught(Teaching {
                detail: None,
                hint: Some(DECISION_HINT.into()),
                fields: Some(decision_fields(Map::new())),
            }),
        );
    }
    let checksum = decision_checksum(request.decision).map_err(|r| {
        r.taught(Teaching {
            detail: None,
            hint: Some(DECISION_HINT.into()),
            fields: Some(decision_fields(Map::new())),
        })
    })?;
    let bound = request.evidence.as_array().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.get("checksum").and_then(Value::as_str) == Some(checksum.as_str()))
    });
    if !bound {
        let hint = if unknown.is_empty() {
            format!(
                "add \"checksum\": \"{checksum}\" (the decision file's SHA-256, liveness-check's decision_checksum) to an evidence item"
            )
        } else {
            DECISION_HINT.to_string()
        };
        let mut extra = Map::new();
        extra.insert("decision_checksum".into(), json!(checksum));
        return Err(
            FlowError::from(InputRule::StallEvidenceUnbound).taught(Teaching {
                detail: Some(if unknown.is_empty() {
                    "no evidence item has its checksum".to_string()
                } else {
                    "the decision file must hold only action and reason".to_string()
                }),
                hint: Some(hint),
                fields: Some(decision_fields(extra)),
            }),
        );
    }
    parse_instant(request.at).map_err(|r| super::decide::at_refusal(r, request.at))
}

/// In lock: the active lane owner; the liveness decision recomputed at
/// `--at` with the command status unknown must equal the decision object
/// exactly (two keys) and `--reason` must be its reason.
pub fn decide_stall_record(
    state: &CoordinatorState,
    policy: &Policy,
    request: &StallRecord<'_>,
    at: Instant,
) -> Result<Vec<Intent>, FlowError> {
    let lane = active_lane_owner(state, request.lane_id, request.agent_id)?;
    let current = evaluate(lane, policy, at, CommandStatus::Unknown)?;
    if current.to_json() != *request.decision || request.reason != current.reason {
        return Err(FlowError::from(LaneRefusal::StaleDecision {
            lane_id: lane.id.to_string(),
            at: request.at.to_string(),
            reason_only: current.to_json() == *request.decision,
            current,
        }));
    }
    if !matches!(lane.state, LaneState::Starting | LaneState::Running) {
        return Err(lane_state_refusal(
            lane,
            &[LaneState::Starting, LaneState::Running],
        ));
    }
    Ok(vec![lane_intent(
        EventType::StallSuspected,
        lane,
        request.at,
        request.evidence,
        Some(request.reason),
        Map::new(),
    )])
}

// ---------------------------------------------------------------------------
// stall-clear, probe-sent, interrupt-result (§6.6-6.8)

/// A lane liveness step addressed by `--lane-id --agent-id --at`.
#[derive(Debug, Clone, Copy)]
pub struct LaneStep<'a> {
    pub lane_id: &'a str,
    pub agent_id: &'a str,
    pub at: &'a str,
    pub evidence: &'a Value,
}

fn precheck_step(step: &LaneStep<'_>) -> Result<Instant, FlowError> {
    require_identifier(step.lane_id, "lane id")?;
    require_identifier(step.agent_id, "agent id")?;
    parse_instant(step.at).map_err(|r| super::decide::at_refusal(r, step.at))
}

/// Pre-lock for `stall-clear`: ids and `--at` (evidence is checked in lock,
/// by the freshness rule).
pub fn precheck_stall_clear(step: &LaneStep<'_>) -> Result<Instant, FlowError> {
    precheck_step(step)
}

/// In lock: the lane is `suspected_stall` and the evidence is fresh against
/// the stall record. Writes `lane_recovered` (never `stall_cleared`).
pub fn decide_stall_clear(
    state: &CoordinatorState,
    policy: &Policy,
    step: &LaneStep<'_>,
    reason: &str,
) -> Result<Vec<Intent>, FlowError> {
    let lane = active_lane_owner(state, step.lane_id, step.agent_id)?;
    if lane.state != LaneState::SuspectedStall {
        return Err(lane_state_refusal(lane, &[LaneState::SuspectedStall]));
    }
    require_fresh_evidence(lane, step.evidence, Some(reason), policy)?;
    Ok(vec![lane_intent(
        EventType::LaneRecovered,
        lane,
        step.at,
        step.evidence,
        Some(reason),
        Map::new(),
    )])
}

/// Pre-lock for `probe-sent`: ids, `--at`, `--deadline`, evidence.
pub fn precheck_probe_sent(
    step: &LaneStep<'_>,
    deadline: &str,
) -> Result<(Instant, Instant), FlowError> {
    let at = precheck_step(step)?;
    let probe = parse_instant(deadline)?;
    require_evidence(step.evidence)?;
    Ok((at, probe))
}

/// In lock: the lane is `suspected_stall`; `at < deadline <= at + probe
/// grace`. Writes `probe_sent` with the deadline as given.
pub fn decide_probe_sent(
    state: &CoordinatorState,
    policy: &Policy,
    step: &LaneStep<'_>,
    deadline: &str,
    (at, probe): (Instant, Instant),
) -> Result<Vec<Intent>, FlowError> {
    let lane = active_lane_owner(state, step.lane_id, step.agent_id)?;
    if lane.state != LaneState::SuspectedStall {
        return Err(lane_state_refusal(lane, &[LaneState::SuspectedStall]));
    }
    let grace = window(policy.probe_grace_seconds)?;
    if at >= probe || probe - at > grace {
        return invalid(InputRule::ProbeDeadlineGrace);
    }
    let mut metadata = Map::new();
    metadata.insert("probe_deadline".into(), json!(deadline));
    Ok(vec![lane_intent(
        EventType::ProbeSent,
        lane,
        step.at,
        step.evidence,
        None,
        metadata,
    )])
}

/// Some evidence ref is the native interrupt tool's: `kind` "tool" and
/// "interrupt" (any case) in its summary.
fn has_interrupt_tool_evidence(evidence: &Value) -> bool {
    evidence.as_array().is_some_and(|refs| {
        refs.iter().any(|r| {
            r.get("kind").and_then(Value::as_str) == Some("tool")
                && r.get("summary")
                    .map_or(Some(""), Value::as_str)
                    .is_some_and(|s| s.to_lowercase().contains("interrupt"))
        })
    })
}

/// Pre-lock for `interrupt-result`: ids, `--at`, evidence that includes the
/// native interrupt tool's.
pub fn precheck_interrupt_result(step: &LaneStep<'_>) -> Result<Instant, FlowError> {
    let at = precheck_step(step)?;
    require_evidence(step.evidence)?;
    if !has_interrupt_tool_evidence(step.evidence) {
        return invalid(InputRule::InterruptToolEvidence);
    }
    Ok(at)
}

/// In lock: the lane is `recovering` and liveness at `--at` with the command
/// alive says `interrupt` (both deadlines passed, replacements left).
/// Writes `agent_interrupted` (repeatable).
pub fn decide_interrupt_result(
    state: &CoordinatorState,
    policy: &Policy,
    step: &LaneStep<'_>,
    at: Instant,
) -> Result<Vec<Intent>, FlowError> {
    let lane = active_lane_owner(state, step.lane_id, step.agent_id)?;
    if lane.state != LaneState::Recovering {
        return Err(super::decide::lane_state_refused(
            lane,
            &[LaneState::Recovering],
            RefusedLaneStep::Interrupt,
        ));
    }
    let decision = evaluate(lane, policy, at, CommandStatus::Alive)?;
    if decision.action != LivenessAction::Interrupt {
        return Err(FlowError::from(
            super::decide::LaneRefusal::InterruptNotDue {
                lane_id: lane.id.to_string(),
                at: step.at.to_string(),
                decision,
            },
        ));
    }
    Ok(vec![lane_intent(
        EventType::AgentInterrupted,
        lane,
        step.at,
        step.evidence,
        Some("native interrupt recorded"),
        Map::new(),
    )])
}

#[cfg(test)]
#[path = "liveness_tests.rs"]
mod tests;
