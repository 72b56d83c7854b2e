//! The decision layer's shared vocabulary: what a command proposes (one or
//! two [`Intent`]s), why it refuses ([`FlowError`]), and the manifest values
//! decisions need ([`Policy`]). Pure: no I/O, no clock (`now` comes in as a
//! value where a command needs it).

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

use super::approval::ApprovalRefusal;
use super::breach::Breach;
pub use super::input_refusal::{InputRefusal, InputRule};
use super::state::{LaneRecord, LaneState, RunState};
use crate::receipt::primitives::{AgentId, LaneId, as_int};
use crate::receipt::rules::Limits;
use crate::receipt::verify::ReceiptDamage;
use crate::receipt::vocab::{EventType, StateName};
use crate::store::StoreError;

/// One proposed receipt event before the pipeline numbers, chains and
/// seals it. `metadata` excludes `owner_epoch`, which the pipeline adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    pub event_type: EventType,
    /// Caller-supplied instant; `None` means "now" (filled by the pipeline).
    pub timestamp: Option<String>,
    pub from_state: Option<StateName>,
    pub to_state: Option<StateName>,
    pub lane_id: Option<LaneId>,
    pub agent_id: Option<AgentId>,
    pub reason: Option<String>,
    pub evidence_refs: Value,
    pub metadata: Map<String, Value>,
}

impl Intent {
    /// A run-level intent (no lane, no agent).
    pub fn run(
        event_type: EventType,
        from: RunState,
        to: RunState,
        timestamp: Option<String>,
        evidence: Value,
    ) -> Intent {
        Intent {
            event_type,
            timestamp,
            from_state: Some(from.into()),
            to_state: Some(to.into()),
            lane_id: None,
            agent_id: None,
            reason: None,
            evidence_refs: evidence,
            metadata: Map::new(),
        }
    }

    /// An intent about an existing lane, as its agent holds it, moving it
    /// from its state to `to`.
    pub fn on_lane(
        event_type: EventType,
        lane: &LaneRecord,
        to: Option<StateName>,
        timestamp: &str,
        evidence: &Value,
        reason: Option<&str>,
        metadata: Map<String, Value>,
    ) -> Intent {
        Intent {
            event_type,
            timestamp: Some(timestamp.into()),
            from_state: Some(lane.state.into()),
            to_state: to,
            lane_id: Some(lane.id.clone()),
            agent_id: Some(lane.agent_id.clone()),
            reason: reason.map(str::to_string),
            evidence_refs: evidence.clone(),
            metadata,
        }
    }

    /// An intent about the run that changes no state (a verification, a
    /// resume, a report, the topology) at "now".
    pub fn about_run(
        event_type: EventType,
        evidence: Value,
        reason: Option<&str>,
        metadata: Map<String, Value>,
    ) -> Intent {
        Intent {
            event_type,
            timestamp: None,
            from_state: None,
            to_state: None,
            lane_id: None,
            agent_id: None,
            reason: reason.map(str::to_string),
            evidence_refs: evidence,
            metadata,
        }
    }
}

/// Every way a decision or a command refuses: one type from the pure core
/// to the envelope, with what teaches its fix (contracts/refusals.md): the
/// envelope adds its `hint` and `fields`; everything else is the kind's.
/// Equality is of the kind and ignores the teaching: it is advice, not part
/// of what is refused.
#[derive(Debug, Clone)]
pub struct FlowError {
    kind: ErrorKind,
    teaching: Option<Box<Teaching>>,
}

/// What was refused or failed, of a kind that maps to one exit status
/// ([`ErrorKind::classify`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    /// Bad input, of a typed reason (exit 2 `contract_error`): its message
    /// and what it teaches are the reason's (contracts/refusals.md "Bad
    /// input").
    Input(InputRefusal),
    /// Bad input in a lower layer's words (the receipt contract's rules,
    /// the input reader) (exit 2).
    Contract(String),
    /// A bug in bluetape-flow, never a refusal of the input (exit 2
    /// `contract_error`, as the reference's own failures are): its message
    /// says so and what is safe next.
    Internal(Bug),
    /// The receipt or its snapshot is damaged (exit 3).
    ReceiptCorrupt(String),
    /// The receipt is damaged at a known line (exit 3), with its trusted
    /// prefix.
    ReceiptDamaged(ReceiptDamage),
    /// An offline proof (`check-proof`) that does not hold for the event and
    /// keys given (exit 3 `proof_invalid`; our extension, DEVIATIONS 90):
    /// no state root is involved, so nothing to diagnose or recover.
    ProofInvalid(String),
    /// A manifest this tool cannot speak (exit 4).
    IncompatibleManifest(String),
    /// A conflict with the run as it stands (exit 5 `coordinator_conflict`,
    /// retryable, `next_command` resume-check), of one of the families of
    /// typed reasons: its message, `fields` and hint are the reason's.
    Conflict(Conflict),
    /// "receipt head changed before mutation" (exit 5, the reference's
    /// message): the receipt moved on from the head the command was held
    /// to (`--expected-head`, or what `complete` verified) before its
    /// commit; the two heads and the sequence now are its fields.
    HeadMoved {
        expected: String,
        head: String,
        sequence: u64,
    },
    /// "run state does not allow this command" (exit 5, the reference's
    /// message): the run's state and the states the command needs are its
    /// fields, and its hint says both.
    RunStateRefused {
        state: RunState,
        allowed: Vec<RunState>,
    },
    /// "current state does not allow lifecycle intent" for a run
    /// transition (exit 5, the reference's message): the run's state and
    /// the states the transition starts from are its fields; its hint
    /// names both and the way on.
    RunTransitionRefused {
        state: RunState,
        allowed: Vec<RunState>,
    },
    /// Completion evidence is missing (exit 6), or (`attest`) the receipt
    /// records breaches of our rules: the envelope then adds `breaches`
    /// and is not retryable.
    CompletionBlocked {
        message: String,
        missing_ids: Vec<String>,
        breaches: Vec<Breach>,
    },
    /// A Phase 2 command on a Phase 1 run (exit 7).
    Unsupported(String),
    /// What the store refused or failed, of its kind: exit 5 and retryable
    /// where another writer holds the state or the OS failure may pass
    /// (DEVIATIONS 49), exit 2 otherwise; a kind with a fix has its hint
    /// (`surface::teach::default_hint`).
    Store(StoreError),
    /// The approval gate refuses (exit 2 `approval_refused`, exit 5
    /// `approval_expired` or a final exit 5 conflict); our extension.
    Approval(ApprovalRefusal),
    /// A breach of our rules stands in the receipt (exit 5 `rule_breach`,
    /// final); the envelope adds `breaches` and a `hint`.
    Breach {
        message: String,
        breaches: Vec<Breach>,
    },
    /// `otel-export` could not hand the trace to its receiver (exit 5
    /// `export_failed`; contracts/otel.md): `endpoint` is the URL without
    /// its user info and query, `retryable` whether trying again may help
    /// (unreachable, timed out, 429 and 5xx answers).
    Export {
        endpoint: String,
        message: String,
        retryable: bool,
    },
}

/// What went wrong inside bluetape-flow (a [`ErrorKind::Internal`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Bug {
    /// The event a decision proposed for `sequence` is refused by the
    /// reducer before it is appended.
    EventDoesNotApply { sequence: u64, why: String },
    /// An input that passed its checks does not read as its type.
    CheckedInputUnreadable(String),
    /// Tool arguments held to the tool's parameters do not make its
    /// command: a bug of the catalog.
    ArgumentsMakeNoCommand(String),
    /// A tool call's task did not finish.
    CallUnfinished,
    /// A panic, caught where the command ran.
    Panic(String),
}

impl Bug {
    /// What the envelope says: that it is our bug, what failed, and what
    /// is safe next.
    pub fn message(&self) -> String {
        const BUG: &str = "internal error (a bug in bluetape-flow)";
        const MAY_BE_RECORDED: &str =
            "run verify before retrying, the event may have been recorded";
        match self {
            Bug::EventDoesNotApply { sequence, why } => format!(
                "internal error: the event decided for sequence {sequence} does not apply to the run's state ({why}); nothing was written and the receipt is unchanged"
            ),
            Bug::CheckedInputUnreadable(why) => {
                format!("{BUG}: a checked input does not read as its type: {why}")
            }
            Bug::ArgumentsMakeNoCommand(why) => {
                format!("{BUG}: the arguments do not make the command ({why}); nothing was written")
            }
            Bug::CallUnfinished => format!("{BUG}: the call did not finish; {MAY_BE_RECORDED}"),
            Bug::Panic(what) => format!("{BUG}: {what}; {MAY_BE_RECORDED}"),
        }
    }
}

impl From<ErrorKind> for FlowError {
    fn from(kind: ErrorKind) -> Self {
        FlowError {
            kind,
            teaching: None,
        }
    }
}

impl FlowError {
    pub fn contract(m: impl Into<String>) -> Self {
        ErrorKind::Contract(m.into()).into()
    }

    /// What was refused or failed.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// What was refused or failed, without the teaching.
    pub fn into_kind(self) -> ErrorKind {
        self.kind
    }

    /// This error with `teach` attached (merged over any earlier one).
    pub fn taught(mut self, teach: Teaching) -> Self {
        self.teaching = Some(Box::new(match self.teaching.take() {
            Some(old) => old.merged(teach),
            None => teach,
        }));
        self
    }

    /// This error with a `hint`.
    pub fn hinted(self, hint: impl Into<String>) -> Self {
        self.taught(Teaching::hint(hint))
    }

    /// The teaching attached where the error was made.
    pub fn teaching(&self) -> Option<&Teaching> {
        self.teaching.as_deref()
    }

    /// The message as the envelope shows it: the inner message and the
    /// detail after it (the one attached where the error was made, else
    /// the reason's own).
    pub fn full_message(&self) -> String {
        let detail = self
            .teaching()
            .and_then(|t| t.detail.clone())
            .or_else(|| self.own_teaching().and_then(|t| t.detail));
        match detail {
            Some(detail) => format!("{}: {detail}", self.message()),
            None => self.message().into_owned(),
        }
    }

    /// The typed conflict reason this error carries, if it is one.
    pub fn reason(&self) -> Option<&dyn ConflictReason> {
        self.kind.reason()
    }

    /// See [`ErrorKind::classify`].
    pub fn classify(&self) -> (u8, &'static str, bool, Option<&'static str>) {
        self.kind.classify()
    }

    /// See [`ErrorKind::message`].
    pub fn message(&self) -> Cow<'_, str> {
        self.kind.message()
    }

    /// See [`ErrorKind::own_teaching`].
    pub fn own_teaching(&self) -> Option<Teaching> {
        self.kind.own_teaching()
    }
}

impl ErrorKind {
    /// This kind of error, with `teach` attached.
    pub fn taught(self, teach: Teaching) -> FlowError {
        FlowError::from(self).taught(teach)
    }

    /// This kind of error, with a `hint`.
    pub fn hinted(self, hint: impl Into<String>) -> FlowError {
        FlowError::from(self).hinted(hint)
    }

    /// The typed conflict reason this error carries, if it is one.
    pub fn reason(&self) -> Option<&dyn ConflictReason> {
        match self {
            ErrorKind::Conflict(conflict) => Some(conflict.reason()),
            _ => None,
        }
    }

    /// The exit status, the reference's `error` name, whether a retry may
    /// help, and the `next_command` the envelope names: all functions of
    /// the variant.
    pub fn classify(&self) -> (u8, &'static str, bool, Option<&'static str>) {
        match self {
            ErrorKind::Contract(_) | ErrorKind::Input(_) | ErrorKind::Internal(_) => {
                (2, "contract_error", false, None)
            }
            ErrorKind::ReceiptCorrupt(_) | ErrorKind::ReceiptDamaged(_) => {
                (3, "receipt_corrupt", false, Some("receipt-diagnose"))
            }
            ErrorKind::ProofInvalid(_) => (3, "proof_invalid", false, None),
            ErrorKind::IncompatibleManifest(_) => (4, "incompatible_manifest", false, None),
            ErrorKind::Conflict(_)
            | ErrorKind::HeadMoved { .. }
            | ErrorKind::RunStateRefused { .. }
            | ErrorKind::RunTransitionRefused { .. } => {
                (5, "coordinator_conflict", true, Some("resume-check"))
            }
            ErrorKind::CompletionBlocked { breaches, .. } if !breaches.is_empty() => {
                (6, "completion_blocked", false, Some("verify"))
            }
            ErrorKind::CompletionBlocked { .. } => {
                (6, "completion_blocked", true, Some("completion-check"))
            }
            ErrorKind::Unsupported(_) => (7, "unsupported_by_run_manifest", false, Some("init")),
            ErrorKind::Store(e) if e.is_retryable() => {
                (5, "coordinator_conflict", true, Some("resume-check"))
            }
            ErrorKind::Store(_) => (2, "contract_error", false, None),
            ErrorKind::Breach { .. } => (5, "rule_breach", false, Some("verify")),
            ErrorKind::Export { retryable, .. } => (5, "export_failed", *retryable, None),
            ErrorKind::Approval(refusal) => match refusal {
                ApprovalRefusal::Refused(_) => (2, "approval_refused", false, Some("approvals")),
                ApprovalRefusal::Expired(_) => (5, "approval_expired", false, Some("run-cancel")),
                ApprovalRefusal::Consumed(_) => {
                    (5, "coordinator_conflict", false, Some("approvals"))
                }
                ApprovalRefusal::Corrupt(_) => {
                    (3, "receipt_corrupt", false, Some("receipt-diagnose"))
                }
            },
        }
    }

    /// The message, without the teaching's detail. A typed reason's is its
    /// `Display` (made from its fields), so this may be owned.
    pub fn message(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            ErrorKind::Input(refusal) => return Cow::Owned(refusal.to_string()),
            ErrorKind::Internal(bug) => return Cow::Owned(bug.message()),
            ErrorKind::Conflict(conflict) => return Cow::Owned(conflict.reason().to_string()),
            ErrorKind::Contract(m)
            | ErrorKind::ReceiptCorrupt(m)
            | ErrorKind::ProofInvalid(m)
            | ErrorKind::IncompatibleManifest(m)
            | ErrorKind::Unsupported(m) => m,
            ErrorKind::CompletionBlocked { message, .. }
            | ErrorKind::Breach { message, .. }
            | ErrorKind::Export { message, .. } => message,
            ErrorKind::ReceiptDamaged(damage) => damage.message(),
            ErrorKind::Approval(refusal) => refusal.message(),
            ErrorKind::Store(e) => e.message(),
            ErrorKind::HeadMoved { .. } => "receipt head changed before mutation",
            ErrorKind::RunStateRefused { .. } => "run state does not allow this command",
            ErrorKind::RunTransitionRefused { .. } => {
                "current state does not allow lifecycle intent"
            }
        })
    }

    /// What the reason itself teaches (`fields`, a hint), before any
    /// teaching attached where the error was made.
    pub fn own_teaching(&self) -> Option<Teaching> {
        if let Some(reason) = self.reason() {
            return Some(reason.teaching());
        }
        match self {
            ErrorKind::Input(refusal) => refusal.teaching(),
            ErrorKind::HeadMoved {
                expected,
                head,
                sequence,
            } => Some(Teaching::reason(
                serde_json::json!({"expected_head": expected, "head": head, "sequence": sequence}),
                format!(
                    "another write moved the run to sequence {sequence} after this command read it: see where it stands with bluetape-flow resume-check --run-id {{run_id}}, and if the step still applies, retry it with --expected-head {head}"
                ),
            )),
            ErrorKind::RunStateRefused { state, allowed } => {
                Some(run_state_teaching(*state, allowed, |state, needs| {
                    format!(
                        "the run is {state}; this command needs it {needs}: see where it stands with bluetape-flow status --run-id {{run_id}}"
                    )
                }))
            }
            ErrorKind::RunTransitionRefused { state, allowed } => {
                Some(run_state_teaching(*state, allowed, |shown, needs| {
                    format!(
                        "the run is {shown}, this command needs {needs}: {}",
                        run_state_hint(*state, allowed)
                    )
                }))
            }
            // An OS error names the path and the errno (DEVIATIONS 49), as
            // fields a caller can act on without reading the message.
            ErrorKind::Store(StoreError::Io(failure)) => Some(Teaching {
                detail: None,
                hint: None,
                fields: Some(serde_json::json!({
                    "path": failure.path.to_string_lossy(),
                    "errno": failure.errno_name(),
                })),
            }),
            _ => None,
        }
    }
}

/// What a run-state refusal teaches: the run's state and the states the
/// command needs as fields, and the hint `say(state, "a or b")`.
fn run_state_teaching(
    state: RunState,
    allowed: &[RunState],
    say: impl FnOnce(&str, &str) -> String,
) -> Teaching {
    let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
    Teaching::reason(
        serde_json::json!({"run_state": state.as_str(), "allowed_run_states": names}),
        say(state.as_str(), &names.join(" or ")),
    )
}

/// A lane step that `lane`'s state does not allow (`allowed` would).
pub fn lane_state_refused(
    lane: &LaneRecord,
    allowed: &[LaneState],
    step: RefusedLaneStep,
) -> FlowError {
    FlowError::from(LaneRefusal::State {
        lane_id: lane.id.to_string(),
        state: lane.state,
        allowed: allowed.to_vec(),
        step,
    })
}

/// Why a lane step is refused for its lane (the reference's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneRefusal {
    /// The run's lanes (at most 32) are named.
    #[error("lane does not exist")]
    Missing { lane_id: String, lanes: Vec<String> },
    /// Terminal or replaced.
    #[error("lane is not active")]
    Inactive { lane_id: String, state: LaneState },
    #[error("agent does not own the lane")]
    NotOwner {
        lane_id: String,
        agent_id: String,
        owner: String,
    },
    /// The lane id is in use.
    #[error("identifier already exists")]
    Exists { lane_id: String, state: LaneState },
    /// The lane's state does not allow the step: the states it would are
    /// `allowed`, and `step` says which of the reference's messages.
    #[error("{}", .step.message())]
    State {
        lane_id: String,
        state: LaneState,
        allowed: Vec<LaneState>,
        step: RefusedLaneStep,
    },
    /// The run has as many lanes as its manifest allows (terminal lanes
    /// count).
    #[error("lane limit reached")]
    LimitReached { max_lanes: u64 },
    /// The agent was fenced by interrupt-result (decisions.md 9).
    #[error("an interrupted agent cannot acknowledge the probe")]
    Fenced { lane_id: String, agent_id: String },
    /// Liveness at `at` (the command alive) answers `decision`, not
    /// interrupt.
    #[error("liveness policy does not authorize interrupt")]
    InterruptNotDue {
        lane_id: String,
        at: String,
        decision: super::liveness::LivenessDecision,
    },
    /// `stall-record`'s `--decision` (or only its `--reason`, when
    /// `reason_only`) is not what liveness answers for the lane at `at`,
    /// which is `current`.
    #[error("liveness decision is stale or mismatched")]
    StaleDecision {
        lane_id: String,
        at: String,
        current: super::liveness::LivenessDecision,
        reason_only: bool,
    },
    /// `outside` are not within the lane's `write_scope`.
    #[error("changed paths exceed the pinned lane scope")]
    OutsideScope {
        lane_id: String,
        outside: Vec<String>,
        write_scope: Vec<String>,
    },
}

/// Which step a lane's state refused, for the reference's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedLaneStep {
    /// A lane transition or liveness step.
    Lifecycle,
    Heartbeat,
    Interrupt,
}

impl RefusedLaneStep {
    /// The reference's message for a lane whose state refused this step.
    fn message(self) -> &'static str {
        match self {
            RefusedLaneStep::Lifecycle => "current state does not allow lifecycle intent",
            RefusedLaneStep::Heartbeat => "heartbeat requires a running lane",
            RefusedLaneStep::Interrupt => "interrupt requires a recovering lane",
        }
    }
}

/// The lane refusals as tests expect them.
#[cfg(test)]
pub mod lane_refused {
    use super::{ErrorKind, FlowError, LaneRefusal};
    use crate::coordinator::state::LaneState;

    pub fn missing(lane_id: &str, lanes: &[&str]) -> FlowError {
        FlowError::from(LaneRefusal::Missing {
            lane_id: lane_id.into(),
            lanes: lanes.iter().map(|l| l.to_string()).collect(),
        })
    }

    pub fn inactive(lane_id: &str, state: LaneState) -> FlowError {
        FlowError::from(LaneRefusal::Inactive {
            lane_id: lane_id.into(),
            state,
        })
    }

    pub fn not_owner(lane_id: &str, agent_id: &str, owner: &str) -> FlowError {
        FlowError::from(LaneRefusal::NotOwner {
            lane_id: lane_id.into(),
            agent_id: agent_id.into(),
            owner: owner.into(),
        })
    }

    pub fn state(
        lane_id: &str,
        state: LaneState,
        allowed: &[LaneState],
        step: super::RefusedLaneStep,
    ) -> FlowError {
        FlowError::from(LaneRefusal::State {
            lane_id: lane_id.into(),
            state,
            allowed: allowed.to_vec(),
            step,
        })
    }

    pub fn run_state(
        state: crate::coordinator::state::RunState,
        allowed: &[crate::coordinator::state::RunState],
    ) -> FlowError {
        ErrorKind::RunStateRefused {
            state,
            allowed: allowed.to_vec(),
        }
        .into()
    }

    pub fn exists(lane_id: &str, state: LaneState) -> FlowError {
        FlowError::from(LaneRefusal::Exists {
            lane_id: lane_id.into(),
            state,
        })
    }
}

impl ConflictReason for LaneRefusal {
    /// Its `fields` (the lane, and what about it refused the step) and
    /// hint; `{run_id}`-style placeholders are filled by the envelope.
    fn teaching(&self) -> Teaching {
        let (fields, hint) = match self {
            LaneRefusal::Missing { lane_id, lanes } => (
                serde_json::json!({"lane_id": lane_id, "lanes": lanes}),
                if lanes.is_empty() {
                    format!(
                        "no lane {lane_id}: retrying cannot help: the run has no lanes yet; create one with bluetape-flow lane-create --run-id {{run_id}} --owner-file {{owner_file}} --input lane.json --evidence assign.json"
                    )
                } else {
                    format!(
                        "no lane {lane_id}: retrying cannot help: the run's lanes are {}; a new lane is created with lane-create",
                        lanes.join(", ")
                    )
                },
            ),
            LaneRefusal::Inactive { lane_id, state } => (
                serde_json::json!({"lane_id": lane_id, "lane_state": state.as_str()}),
                format!(
                    "lane {lane_id} is {}: retrying cannot help; see the run's lanes: bluetape-flow status --run-id {{run_id}}",
                    state.as_str()
                ),
            ),
            LaneRefusal::NotOwner {
                lane_id,
                agent_id,
                owner,
            } => (
                serde_json::json!({"lane_id": lane_id, "agent_id": agent_id, "lane_agent_id": owner}),
                format!(
                    "retrying cannot help: lane {lane_id} is owned by {owner}, not {agent_id}; pass --agent-id {owner}, or hand the lane over with lane-reassign"
                ),
            ),
            LaneRefusal::Exists { lane_id, state } => (
                serde_json::json!({"lane_id": lane_id, "lane_state": state.as_str()}),
                format!(
                    "retrying cannot help: lane {lane_id} exists already ({}); choose another lane_id, or see it with bluetape-flow liveness-check --run-id {{run_id}} --lane-id {lane_id} --at TIME",
                    state.as_str()
                ),
            ),
            LaneRefusal::LimitReached { max_lanes } => (
                serde_json::json!({"max_lanes": max_lanes}),
                format!(
                    "retrying cannot help: the run's manifest allows {max_lanes} lanes and they all count, finished ones too; go on with the lanes there are (bluetape-flow status --run-id {{run_id}}), or in a new run"
                ),
            ),
            LaneRefusal::Fenced { lane_id, agent_id } => (
                serde_json::json!({"lane_id": lane_id, "agent_id": agent_id}),
                format!(
                    "retrying cannot help: {agent_id} was interrupted, so lane {lane_id} no longer takes its answers; replace the lane (lane-reassign) or end it (lane-fail, lane-block, lane-cancel)"
                ),
            ),
            LaneRefusal::InterruptNotDue {
                lane_id,
                at,
                decision,
            } => (
                serde_json::json!({"lane_id": lane_id, "at": at,
                                   "decision": Value::Object(decision.to_json())}),
                format!(
                    "at {at} liveness answers {} for lane {lane_id} ({}), not interrupt: follow that answer; bluetape-flow liveness-check --run-id {{run_id}} --lane-id {lane_id} --at TIME says when an interrupt is due",
                    decision.action.as_str(),
                    decision.reason
                ),
            ),
            LaneRefusal::StaleDecision {
                lane_id,
                at,
                current,
                reason_only,
            } => (
                serde_json::json!({"input": "--decision",
                                   "current_decision": Value::Object(current.to_json())}),
                if *reason_only {
                    format!(
                        "--reason must be the decision's reason: --reason '{}'",
                        current.reason
                    )
                } else {
                    format!(
                        "at --at the lane's decision is {}: ask again with bluetape-flow liveness-check --run-id {{run_id}} --lane-id {lane_id} --at {at} --decision-out decision.json",
                        Value::Object(current.to_json()),
                    )
                },
            ),
            LaneRefusal::OutsideScope {
                lane_id,
                outside,
                write_scope,
            } => (
                serde_json::json!({"input": "--changed-paths", "outside_scope": outside,
                                   "write_scope": write_scope}),
                format!(
                    "retrying cannot help: {} lie outside lane {lane_id}'s write_scope {}; leave them to a lane whose write_scope covers them",
                    outside.join(", "),
                    write_scope.join(", ")
                ),
            ),
            LaneRefusal::State {
                lane_id,
                state,
                allowed,
                ..
            } => {
                let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
                (
                    serde_json::json!({"lane_id": lane_id, "lane_state": state.as_str(),
                                       "allowed_lane_states": names}),
                    format!(
                        "lane {lane_id} is {}, this command needs {}: {}",
                        state.as_str(),
                        names.join(" or "),
                        lane_state_hint(lane_id, *state, allowed)
                    ),
                )
            }
        };
        Teaching::reason(fields, hint)
    }
}

impl PartialEq for FlowError {
    fn eq(&self, other: &FlowError) -> bool {
        self.kind == other.kind
    }
}

impl Eq for FlowError {}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for FlowError {}

pub type FlowResult<T> = Result<T, FlowError>;

/// The families of typed conflict reasons (contracts/refusals.md), each a
/// variant of [`Conflict`] and convertible into a [`FlowError`]: a new
/// family is one line here and its `impl ConflictReason`.
macro_rules! conflict_families {
    ($($(#[$doc:meta])* $family:ident($reason:ty),)*) => {
        /// A conflict's typed reason, by family.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Conflict {
            $($(#[$doc])* $family($reason),)*
        }

        impl Conflict {
            /// The reason, whichever family it is of.
            pub fn reason(&self) -> &dyn ConflictReason {
                match self {
                    $(Conflict::$family(reason) => reason,)*
                }
            }
        }

        $(impl From<$reason> for FlowError {
            fn from(reason: $reason) -> Self {
                ErrorKind::Conflict(Conflict::$family(reason)).into()
            }
        })*
    };
}

conflict_families! {
    /// A lane step refused for the lane it names.
    Lane(LaneRefusal),
    /// A replacement step refused for the lanes it names.
    Replacement(super::replacement_refusal::ReplacementRefusal),
    /// The caller's owner handle is not the run's current owner's.
    Owner(super::owner_refusal::OwnerRefusal),
    /// A report that cannot be bound as it is.
    Report(super::report_refusal::ReportRefusal),
    /// A topology step refused for the component it names.
    Component(super::component_refusal::ComponentRefusal),
    /// `lane-resolve` refused for the lanes it names.
    Resolution(super::resolution_refusal::ResolutionRefusal),
    /// `recovery-run-create` refused for what changed since the diagnosis
    /// or what its handle names.
    Recovery(super::recovery_refusal::RecoveryRefusal),
    /// Another writer changed what the command read: run it again.
    Raced(super::raced::Raced),
    /// `publish` cannot move the git ref it names.
    Publish(super::raced::PublishRefusal),
}

/// A conflict family's reason (exit 5 `coordinator_conflict`, the
/// reference's `error`, retryable, `next_command` resume-check): the
/// reference's message is its `Display` (each variant's `#[error]`), and
/// the `fields` and hint are functions of the reason (contracts/refusals.md).
pub trait ConflictReason: fmt::Display {
    fn teaching(&self) -> Teaching;
}

/// What a refusal adds to teach its fix (contracts/refusals.md): a `hint` (the
/// concrete fix or the command to run first) and `fields` (which input fields
/// are missing, unknown, of the wrong type or out of limit). Hints may hold
/// `{run_id}` and `{owner_file}`, filled in by the CLI from its own argv.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Teaching {
    /// What the message says after the reference's text (`message: detail`).
    pub detail: Option<String>,
    pub hint: Option<String>,
    pub fields: Option<Value>,
}

impl Teaching {
    /// What a typed reason teaches: the fields at fault and the way on.
    pub fn reason(fields: Value, hint: String) -> Teaching {
        Teaching {
            detail: None,
            hint: Some(hint),
            fields: Some(fields),
        }
    }

    pub fn hint(hint: impl Into<String>) -> Teaching {
        Teaching {
            detail: None,
            hint: Some(hint.into()),
            fields: None,
        }
    }

    /// The teaching of a field-level input fault.
    pub fn fault(fault: crate::receipt::faults::Fault, hint: Option<String>) -> Teaching {
        Teaching {
            detail: Some(fault.detail).filter(|d| !d.is_empty()),
            hint,
            fields: Some(fault.fields),
        }
    }

    /// Merge `other` over `self` (its keys win where both have one).
    pub fn merged(self, other: Teaching) -> Teaching {
        Teaching {
            detail: other.detail.or(self.detail),
            hint: other.hint.or(self.hint),
            fields: other.fields.or(self.fields),
        }
    }
}

/// A value of `--at` that passes, for hints.
pub const AT_EXAMPLE: &str = "2026-07-14T01:00:00Z";

/// What a refused `--at` teaches, on every command (contracts/commands.md
/// "One clock"): the reference's message stays first, the detail names the
/// flag and its value, the hint gives a value that passes.
pub fn at_teaching(at: &str) -> Teaching {
    Teaching {
        detail: Some(format!("--at '{at}' is not one")),
        hint: Some(format!(
            "give --at as a UTC instant ending in Z, e.g. --at {AT_EXAMPLE} (or leave it out for now)"
        )),
        fields: Some(serde_json::json!({
            "input": "--at",
            "invalid": [{"field": "--at", "expected": "a UTC timestamp YYYY-MM-DDTHH:MM:SS[.ffffff]Z"}],
        })),
    }
}

/// How far `--at` may run ahead of this machine's clock (DEVIATIONS 87):
/// clocks of two machines drift, a step's time may be read a moment before
/// it is recorded, but a day ahead is a typo or a fabrication.
pub const MAX_AT_SKEW_SECONDS: i64 = 300;

/// The shared `--at` check of every mutation (contracts/commands.md "One
/// clock"): a UTC instant, at most [`MAX_AT_SKEW_SECONDS`] after `now` (the
/// wall clock, passed in). Returns the instant.
pub fn check_at(
    at: &str,
    now: crate::receipt::primitives::Instant,
) -> Result<crate::receipt::primitives::Instant, FlowError> {
    let parsed = crate::receipt::primitives::parse_timestamp(at)
        .or_else(|| crate::receipt::lax_time::parse_lax_timestamp(at).ok());
    let Some(instant) = parsed else {
        return Err(FlowError::from(InputRefusal::Timestamp {
            field: "--at".into(),
        })
        .taught(at_teaching(at)));
    };
    if instant > now + chrono::Duration::seconds(MAX_AT_SKEW_SECONDS) {
        return Err(InputRefusal::AtInFuture {
            at: at.to_string(),
            clock: now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }
        .into());
    }
    Ok(instant)
}

/// `refusal` (a bad `--at`) taught by [`at_teaching`], replacing any hint
/// that named an internal field.
pub fn at_refusal(refusal: FlowError, at: &str) -> FlowError {
    refusal.into_kind().taught(at_teaching(at))
}

/// A refusal about one `--input` key: the detail names the key and what it
/// must be, `fields.invalid` holds `{field, expected, limit}`
/// (contracts/refusals.md).
pub fn in_field(
    key: &'static str,
    expected: &'static str,
    limit: Option<u64>,
) -> impl FnOnce(FlowError) -> FlowError {
    move |refusal| {
        // A refusal that already says what is wrong (the repo root it was
        // resolved against is missing, say) is not about the key's shape.
        if refusal.teaching().is_some_and(|t| t.detail.is_some())
            || refusal.own_teaching().is_some_and(|t| t.detail.is_some())
        {
            return refusal;
        }
        let mut item = serde_json::Map::new();
        item.insert("field".into(), Value::from(key));
        item.insert("expected".into(), Value::from(expected));
        if let Some(limit) = limit {
            item.insert("limit".into(), Value::from(limit));
        }
        refusal.taught(Teaching {
            detail: Some(format!("--input field {key} must be {expected}")),
            hint: None,
            fields: Some(serde_json::json!({"input": "--input", "invalid": [Value::Object(item)]})),
        })
    }
}

/// A refusal of the metadata rules at the append (e.g. "assignment must be
/// at most 500 characters"), naming the field the rule found at fault and
/// the limit of the run's own manifest snapshot.
pub fn metadata_refusal(fault: crate::receipt::rules::MetadataFault, limits: &Limits) -> FlowError {
    let crate::receipt::rules::MetadataFault { field, message } = fault;
    let key = field.unwrap_or_default();
    let limit = match key.as_str() {
        "assignment" | "fallback" | "replacement_assignment" | "replacement_fallback" => {
            Some(limits.max_assignment_chars)
        }
        "write_scope" | "replacement_write_scope" => Some(limits.max_write_scopes),
        "description" => Some(limits.max_description_chars),
        _ => None,
    };
    let Some(limit) = limit else {
        return FlowError::contract(message);
    };
    let expected = match key.as_str() {
        "write_scope" | "replacement_write_scope" => {
            format!("a list of at most {limit} non-empty paths of at most 256 characters")
        }
        _ => format!("a string of at most {limit} characters"),
    };
    let fields = serde_json::json!({"input": "--input", "invalid": [{"field": key, "expected": expected, "limit": limit}]});
    ErrorKind::Contract(message).taught(Teaching {
        detail: Some(format!("the limit of this run's manifest is {limit}")),
        hint: None,
        fields: Some(fields),
    })
}

/// An evidence refusal of `check_evidence` (its reference `message` first),
/// with every field at fault and the limits of `limits`
/// (contracts/refusals.md).
pub fn evidence_refusal(message: String, evidence: &Value, limits: &Limits) -> FlowError {
    let hint = "each evidence item is an object {\"kind\": \"...\", \"summary\": \"...\"} with optional \"path\", \"checksum\" (SHA-256 hex) and \"exit_status\"; the file holds a list of them: [{\"kind\": \"plan\", \"summary\": \"plan approved\"}]";
    match crate::receipt::faults::evidence_fault("--evidence", evidence, limits) {
        Some(fault) => {
            ErrorKind::Contract(message).taught(Teaching::fault(fault, Some(hint.into())))
        }
        None => ErrorKind::Contract(message).hinted(hint),
    }
}

/// The way on for a run in `current` when a command needs `allowed`.
pub fn run_state_hint(current: RunState, allowed: &[RunState]) -> String {
    let needs = |s: RunState| allowed.contains(&s);
    match current {
        RunState::Planned if needs(RunState::Approved) => "approve the run first: bluetape-flow run-approve --run-id {run_id} --owner-file {owner_file} --evidence approval.json".into(),
        RunState::Approved if needs(RunState::Planned) => "the run is approved already (a second approval cannot be recorded): go on with bluetape-flow run-start --run-id {run_id} --owner-file {owner_file} --evidence start.json".into(),
        RunState::Running | RunState::Recovering if needs(RunState::Planned) || needs(RunState::Approved) => format!("the run is {} already: retrying cannot help; see its next command with bluetape-flow status --run-id {{run_id}}", current.as_str()),
        RunState::Approved if needs(RunState::Running) => "start the run first: bluetape-flow run-start --run-id {run_id} --owner-file {owner_file} --evidence start.json".into(),
        RunState::Recovering if needs(RunState::Running) => "finish the recovery first: bluetape-flow run-recovery-finish --run-id {run_id} --owner-file {owner_file} --evidence FILE".into(),
        RunState::Completed | RunState::Failed | RunState::Blocked | RunState::Cancelled => format!(
            "the run is {}, a final state: retrying cannot help; go on in a new run (bluetape-flow init)",
            current.as_str()
        ),
        _ => "retrying cannot help while the state stays; see the run's state and its next command: bluetape-flow status --run-id {run_id}".into(),
    }
}

/// The way on for a lane in `current` when a command needs `allowed`.
pub fn lane_state_hint(lane_id: &str, current: LaneState, allowed: &[LaneState]) -> String {
    let needs = |s: LaneState| allowed.contains(&s);
    match current {
        LaneState::Pending if needs(LaneState::Starting) => format!(
            "start the lane first: bluetape-flow lane-start --run-id {{run_id}} --owner-file {{owner_file}} --lane-id {lane_id} --agent-id {{agent_id}} --at TIME --evidence spawn.json"
        ),
        LaneState::Starting if needs(LaneState::Running) => format!(
            "record the agent's startup ACK first: bluetape-flow startup-ack --run-id {{run_id}} --owner-file {{owner_file}} --lane-id {lane_id} --agent-id {{agent_id}} --at TIME --evidence ack.json"
        ),
        _ => format!(
            "retrying cannot help while the lane stays {}; ask what the lane needs: bluetape-flow liveness-check --run-id {{run_id}} --lane-id {lane_id} --at TIME",
            current.as_str()
        ),
    }
}

/// "run state does not allow this command": the run is `state`, the
/// command needs one of `allowed`.
pub fn run_state_refused<T>(state: RunState, allowed: &[RunState]) -> Result<T, FlowError> {
    Err(ErrorKind::RunStateRefused {
        state,
        allowed: allowed.to_vec(),
    }
    .into())
}

/// An input refused by `reason` (a rule, or a reason with its fields).
pub fn invalid<T>(reason: impl Into<InputRefusal>) -> Result<T, FlowError> {
    Err(ErrorKind::Input(reason.into()).into())
}

/// A decision refused for a typed reason (a conflict, exit 5).
pub fn refused<T>(reason: impl Into<FlowError>) -> Result<T, FlowError> {
    Err(reason.into())
}

/// The manifest values decisions use, always from the run's own snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub suspected_stall_seconds: i64,
    pub max_silence_lease_seconds: i64,
    pub probe_grace_seconds: i64,
    pub max_replacements: u64,
    pub requires_parent: bool,
    pub limits: Limits,
}

impl Policy {
    pub fn from_contract(contract: &Value, limits: &Limits) -> Policy {
        // The manifest rules let a bool through as a liveness number, and
        // Python then computes with it as 0 or 1; so do we.
        let liveness = |key: &str, default: i64| -> i64 {
            contract
                .get("liveness")
                .and_then(|l| l.get(key))
                .and_then(|v| match v {
                    Value::Bool(b) => Some(i128::from(*b)),
                    other => as_int(other),
                })
                .map(|v| v.clamp(0, i64::MAX as i128) as i64)
                .unwrap_or(default)
        };
        Policy {
            suspected_stall_seconds: liveness("suspected_stall_seconds", 120),
            max_silence_lease_seconds: liveness("max_silence_lease_seconds", 600),
            probe_grace_seconds: liveness("probe_grace_seconds", 60),
            max_replacements: liveness("max_replacements", 1) as u64,
            requires_parent: contract.get("failure_resolution")
                == Some(&serde_json::json!({"requires_parent": true})),
            limits: limits.clone(),
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            suspected_stall_seconds: 120,
            max_silence_lease_seconds: 600,
            probe_grace_seconds: 60,
            max_replacements: 1,
            requires_parent: true,
            limits: Limits::default(),
        }
    }
}

/// Lifecycle commands always need some evidence.
pub fn require_evidence(evidence: &Value) -> Result<(), FlowError> {
    match evidence.as_array() {
        Some(items) if !items.is_empty() => Ok(()),
        _ => invalid(InputRule::LifecycleNeedsEvidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::component_refusal::ComponentRefusal;
    use crate::coordinator::owner_refusal::OwnerRefusal;
    use crate::coordinator::raced::Raced;
    use crate::coordinator::recovery_refusal::{DiagnosisCheck, RecoveryRefusal};
    use crate::coordinator::replacement_refusal::{LineageCommand, ReplacementRefusal};
    use crate::coordinator::report_refusal::ReportRefusal;

    /// The reasons the reference words by one of their fields say its
    /// words for each value of that field, as the envelope's message.
    #[test]
    fn a_conflicts_message_follows_the_field_the_reference_words_it_by() {
        let state = |step| LaneRefusal::State {
            lane_id: "api".into(),
            state: LaneState::Pending,
            allowed: vec![],
            step,
        };
        let not_replaced = |command| ReplacementRefusal::NotReplaced {
            command,
            lane_id: "api".into(),
            state: None,
        };
        let not_reserved = |command| ReplacementRefusal::NotReserved {
            command,
            lane_id: "api".into(),
            given: "api-3".into(),
            reserved: None,
        };
        let changed = |check| RecoveryRefusal::DiagnosisChanged {
            check,
            changed: vec![],
        };
        let unexplained = |evidence| ComponentRefusal::RecoveryUnexplained {
            component_id: "cli".into(),
            check_id: "unit".into(),
            evidence,
        };
        let bound = |found: Option<&str>| ReportRefusal::BoundFileChanged {
            path: "reports/handoff.json".into(),
            bound: "a".repeat(64),
            found: found.map(String::from),
        };
        let owner = |before_lock| OwnerRefusal {
            before_lock,
            handle_epoch: 1,
            owner_epoch: 2,
        };
        let reasons: Vec<FlowError> = vec![
            state(RefusedLaneStep::Lifecycle).into(),
            state(RefusedLaneStep::Heartbeat).into(),
            state(RefusedLaneStep::Interrupt).into(),
            not_replaced(LineageCommand::Close).into(),
            not_replaced(LineageCommand::Repair).into(),
            not_replaced(LineageCommand::Block).into(),
            not_reserved(LineageCommand::Close).into(),
            not_reserved(LineageCommand::Repair).into(),
            not_reserved(LineageCommand::Block).into(),
            changed(DiagnosisCheck::BeforeLock).into(),
            changed(DiagnosisCheck::BeforeQuarantine).into(),
            unexplained(false).into(),
            unexplained(true).into(),
            bound(None).into(),
            bound(Some("b")).into(),
            owner(true).into(),
            owner(false).into(),
            Raced::CheckpointManifest { removed: true }.into(),
            Raced::CheckpointManifest { removed: false }.into(),
        ];
        let messages = [
            "current state does not allow lifecycle intent",
            "heartbeat requires a running lane",
            "interrupt requires a recovering lane",
            "original lane is not awaiting lineage close",
            "lane has no repairable replacement",
            "lane has no incomplete replacement",
            "replacement lane does not match reservation",
            "replacement reservation does not match",
            "replacement reservation does not match",
            "damaged run changed after receipt diagnosis",
            "damaged run changed before quarantine",
            "a recovered check requires a fresh result and reason",
            "a recovered check requires fresh evidence",
            "bound report file is missing or unsafe",
            "bound report file checksum differs",
            "owner handle is stale",
            "owner handle does not match the current run owner",
            "checkpoint.json held a copy of the run manifest that is not manifest.json; the checkpoint was removed and nothing was written",
            "checkpoint.json held a copy of the run manifest that is not manifest.json; nothing was written",
        ];
        assert_eq!(reasons.len(), messages.len());
        for (error, message) in reasons.iter().zip(messages) {
            assert_eq!(error.message(), message, "{error:?}");
            assert_eq!(error.full_message(), message, "{error:?}");
            assert_eq!(error.classify().1, "coordinator_conflict", "{error:?}");
        }
    }
}
