//! The decision layer's shared vocabulary: what a command proposes (one or
//! two [`Intent`]s), why it refuses ([`Refusal`]), and the manifest values
//! decisions need ([`Policy`]). Pure: no I/O, no clock (`now` comes in as a
//! value where a command needs it).

use serde_json::{Map, Value};

use super::state::{LaneState, RunState};
use crate::receipt::primitives::as_int;
use crate::receipt::rules::Limits;
use crate::receipt::vocab::{EventType, StateName};

/// One proposed receipt event before the pipeline numbers, chains and
/// seals it. `metadata` excludes `owner_epoch`, which the pipeline adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    pub event_type: EventType,
    /// Caller-supplied instant; `None` means "now" (filled by the pipeline).
    pub timestamp: Option<String>,
    pub from_state: Option<StateName>,
    pub to_state: Option<StateName>,
    pub lane_id: Option<String>,
    pub agent_id: Option<String>,
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
}

/// Why a decision refuses. Each maps to one exit status. Two refusals are
/// equal when they refuse alike: the teaching (hint, fields) is advice, not
/// part of what is refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// The state does not allow it now (exit 5, retryable).
    Conflict(String),
    /// The input breaks a rule (exit 2).
    Invalid(String),
    /// Completion evidence is missing (exit 6).
    Blocked {
        message: String,
        missing_ids: Vec<String>,
    },
    /// The approval gate refuses (our extension; see [`super::approval`]).
    Approval(super::approval::ApprovalRefusal),
    /// A breach of our rules stands in the receipt (issue 13; exit 5
    /// `rule_breach`, final).
    Breach {
        message: String,
        breaches: Vec<super::breach::Breach>,
    },
    /// A refusal with what teaches its fix (issue 15): the envelope adds
    /// `hint` and `fields`; exit status and the reference's keys are the
    /// inner refusal's.
    Taught(Box<Refusal>, Teaching),
}

impl PartialEq for Refusal {
    fn eq(&self, other: &Refusal) -> bool {
        use Refusal::*;
        match (self.untaught().0, other.untaught().0) {
            (Conflict(a), Conflict(b)) | (Invalid(a), Invalid(b)) => a == b,
            (
                Blocked {
                    message: a,
                    missing_ids: x,
                },
                Blocked {
                    message: b,
                    missing_ids: y,
                },
            ) => a == b && x == y,
            (Approval(a), Approval(b)) => a == b,
            (
                Breach {
                    message: a,
                    breaches: x,
                },
                Breach {
                    message: b,
                    breaches: y,
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}

impl Eq for Refusal {}

/// What a refusal adds to teach its fix (issue 15): a `hint` (the concrete
/// fix or the command to run first) and `fields` (which input fields are
/// missing, unknown, of the wrong type or out of limit). Hints may hold
/// `{run_id}` and `{owner_file}`, filled in by the CLI from its own argv.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Teaching {
    /// What the message says after the reference's text (`message: detail`).
    pub detail: Option<String>,
    pub hint: Option<String>,
    pub fields: Option<Value>,
}

impl Teaching {
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

    /// `message` followed by the detail, as the envelope shows it.
    pub fn message(&self, message: &str) -> String {
        match &self.detail {
            Some(detail) => format!("{message}: {detail}"),
            None => message.to_string(),
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
) -> Result<crate::receipt::primitives::Instant, Refusal> {
    let parsed = crate::receipt::primitives::parse_timestamp(at)
        .or_else(|| crate::receipt::lax_time::parse_lax_timestamp(at).ok());
    let Some(instant) = parsed else {
        return Err(Refusal::Invalid("--at must be a UTC timestamp".into()).taught(at_teaching(at)));
    };
    if instant > now + chrono::Duration::seconds(MAX_AT_SKEW_SECONDS) {
        let clock = now.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        return Err(Refusal::Invalid(format!(
            "--at must not be in the future: '{at}' is more than {MAX_AT_SKEW_SECONDS} seconds after this machine's clock ({clock})"
        ))
        .taught(Teaching {
            detail: None,
            hint: Some(format!(
                "give --at as the time the step happened, e.g. --at {clock} (or leave it out for now)"
            )),
            fields: Some(serde_json::json!({
                "input": "--at",
                "invalid": [{"field": "--at", "expected": "a UTC timestamp at most 300 seconds after the clock", "limit": MAX_AT_SKEW_SECONDS}],
                "clock": clock,
            })),
        }));
    }
    Ok(instant)
}

/// `refusal` (a bad `--at`) taught by [`at_teaching`], replacing any hint
/// that named an internal field.
pub fn at_refusal(refusal: Refusal, at: &str) -> Refusal {
    let inner = match refusal {
        Refusal::Taught(inner, _) => *inner,
        other => other,
    };
    inner.taught(at_teaching(at))
}

impl Refusal {
    /// This refusal with `teach` attached (merged over any earlier one).
    pub fn taught(self, teach: Teaching) -> Refusal {
        match self {
            Refusal::Taught(inner, old) => Refusal::Taught(inner, old.merged(teach)),
            other => Refusal::Taught(Box::new(other), teach),
        }
    }

    /// This refusal with a `hint`.
    pub fn hinted(self, hint: impl Into<String>) -> Refusal {
        self.taught(Teaching::hint(hint))
    }

    /// The refusal without its teaching, and the teaching.
    pub fn untaught(&self) -> (&Refusal, Option<&Teaching>) {
        match self {
            Refusal::Taught(inner, teach) => (inner, Some(teach)),
            other => (other, None),
        }
    }
}

/// A refusal about one `--input` key: the detail names the key and what it
/// must be, `fields.invalid` holds `{field, expected, limit}` (issue 15).
pub fn in_field(
    key: &'static str,
    expected: &'static str,
    limit: Option<u64>,
) -> impl FnOnce(Refusal) -> Refusal {
    move |refusal| {
        // A refusal that already says what is wrong (the repo root it was
        // resolved against is missing, say) is not about the key's shape.
        if refusal.untaught().1.is_some_and(|t| t.detail.is_some()) {
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
pub fn metadata_refusal(fault: crate::receipt::rules::MetadataFault, limits: &Limits) -> Refusal {
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
        return Refusal::Invalid(message);
    };
    let expected = match key.as_str() {
        "write_scope" | "replacement_write_scope" => {
            format!("a list of at most {limit} non-empty paths of at most 256 characters")
        }
        _ => format!("a string of at most {limit} characters"),
    };
    let fields = serde_json::json!({"input": "--input", "invalid": [{"field": key, "expected": expected, "limit": limit}]});
    Refusal::Invalid(message).taught(Teaching {
        detail: Some(format!("the limit of this run's manifest is {limit}")),
        hint: None,
        fields: Some(fields),
    })
}

/// An evidence refusal of `check_evidence` (its reference `message` first),
/// with every field at fault and the limits of `limits` (issue 15).
pub fn evidence_refusal(message: String, evidence: &Value, limits: &Limits) -> Refusal {
    let hint = "each evidence item is an object {\"kind\": \"...\", \"summary\": \"...\"} with optional \"path\", \"checksum\" (SHA-256 hex) and \"exit_status\"; the file holds a list of them: [{\"kind\": \"plan\", \"summary\": \"plan approved\"}]";
    match crate::receipt::faults::evidence_fault("--evidence", evidence, limits) {
        Some(fault) => Refusal::Invalid(message).taught(Teaching::fault(fault, Some(hint.into()))),
        None => Refusal::Invalid(message).hinted(hint),
    }
}

/// "current state does not allow lifecycle intent" (the reference's
/// message), with a hint naming the state, the states the command needs
/// and the way on (issue 15).
pub fn state_refusal(what: &str, current: &str, allowed: &[&str], hint: String) -> Refusal {
    Refusal::Conflict("current state does not allow lifecycle intent".into()).hinted(format!(
        "{what} is {current}, this command needs {}: {hint}",
        allowed.join(" or ")
    ))
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

/// A conflict refusal with a hint.
pub fn conflict_hint<T>(message: &str, hint: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::Conflict(message.into()).hinted(hint))
}

/// An invalid-input refusal with a hint.
pub fn invalid_hint<T>(message: &str, hint: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::Invalid(message.into()).hinted(hint))
}

/// A rule that wants a literal word (cli-conventions §5 "Rules by name"):
/// the reference's `message`, a `hint` that says the word and gives a value
/// that passes, and `fields` naming the flag and the field (`{field,
/// expected}`) the word must be in.
pub fn invalid_word<T>(
    message: &str,
    input: &'static str,
    field: &'static str,
    expected: &'static str,
    hint: impl Into<String>,
) -> Result<T, Refusal> {
    Err(Refusal::Invalid(message.into()).taught(Teaching {
        detail: None,
        hint: Some(hint.into()),
        fields: Some(serde_json::json!({
            "input": input,
            "invalid": [{"field": field, "expected": expected}],
        })),
    }))
}

pub fn conflict<T>(message: &str) -> Result<T, Refusal> {
    Err(Refusal::Conflict(message.into()))
}

pub fn invalid<T>(message: &str) -> Result<T, Refusal> {
    Err(Refusal::Invalid(message.into()))
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
pub fn require_evidence(evidence: &Value) -> Result<(), Refusal> {
    match evidence.as_array() {
        Some(items) if !items.is_empty() => Ok(()),
        _ => invalid("lifecycle transition requires evidence"),
    }
}
