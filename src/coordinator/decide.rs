//! The decision layer's shared vocabulary: what a command proposes (one or
//! two [`Intent`]s), why it refuses ([`Refusal`]), and the manifest values
//! decisions need ([`Policy`]). Pure: no I/O, no clock (`now` comes in as a
//! value where a command needs it).

use serde_json::{Map, Value};

use crate::receipt::primitives::as_int;
use crate::receipt::rules::Limits;
use crate::receipt::vocab::{EventType, RunState, StateName};

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

/// Why a decision refuses. Each maps to one exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
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
