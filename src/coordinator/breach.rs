//! Our rules, whoever writes (`contracts/rules.md` lists every one with
//! its write-time refusal). The reference's replay accepts some events
//! that our commands refuse to write: a `plan_approved` that does not
//! satisfy the run's frozen approval policy, and the events our stricter
//! rules (DEVIATIONS 19–22, 25, 26, 35, 99) forbid. The Python tool, or a
//! hand with the owner handle, can still append them with a valid chain.
//! Replay therefore applies those rules to every event and records an event
//! that breaks one as a [`Breach`] of the run: the chain still verifies
//! (both tools give the same verdict), but every gate refuses to move past
//! a breach, and the views show it.
//!
//! Pure: the rules read the state before the event and the event itself.
//!
//! DEVIATIONS 23, 24 and 27 need no rule here: the reference refuses (or
//! crashes on) those inputs before it writes anything, and replay already
//! rejects a resolution bound to identical evidence or resting on
//! liveness evidence (the reference's own replay rules).

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value};

use crate::receipt::json_ref::{JsonRef, ObjectRef};

use super::decide::{ErrorKind, FlowError};
use super::replay::DigestMemo;
use super::state::{CoordinatorState, LaneState};
use crate::receipt::canonical;
use crate::receipt::rules::Limits;
use crate::receipt::scope::{Narrowing, narrow_scope};

/// The scope rule as replay applies it: the shape of every entry and the
/// narrowing, but not the manifest's length limit (both tools check that
/// when they write; replay does not know the run's limits here).
const SCOPE_SHAPE: Limits = Limits {
    max_evidence_path_chars: u64::MAX,
    ..Limits::DEFAULT
};

/// Rule names, as `verify`, `approvals` and `completion-check` report them.
pub const APPROVAL_GATE: &str = "approval_gate";
pub const INTERRUPTED_PROBE_ACK: &str = "interrupted_probe_ack";
pub const UNFENCED_REPAIR: &str = "unfenced_repair";
pub const LIVENESS_AS_COMPLETION: &str = "liveness_evidence_as_completion";
pub const LIVENESS_AS_CHECK: &str = "liveness_evidence_as_check";
pub const WRITE_SCOPE_WIDENED: &str = "write_scope_widened";
pub const LIVENESS_REUSED: &str = "liveness_evidence_reused";
pub const REQUIRED_COMPONENT_DROPPED: &str = "required_component_dropped";
pub const REQUIRED_COMPONENT_REMOVED: &str = "required_component_removed";

/// What a gate says while a breach stands (the `hint` of the refusal).
pub const HINT: &str = "a breach of this run's rules stands in its receipt and cannot be undone; \
     leave this run and continue in a new one under a fresh gate: init --approval-policy FILE \
     (or, for a damaged receipt, recovery-run-create --approval-policy FILE)";

/// One event that broke one of our rules (kept in the checkpoint's
/// `ours` as `{"found", "rule", "sequence"}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Breach {
    /// The event's (envelope) sequence.
    pub sequence: u64,
    /// One of the rule names above.
    pub rule: String,
    /// What was found, for people.
    pub found: String,
}

impl Breach {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a breach is JSON")
    }

    pub fn from_value(value: &Value) -> Option<Breach> {
        serde::Deserialize::deserialize(value).ok()
    }

    /// One line for a refusal message.
    pub fn describe(&self) -> String {
        format!(
            "rule {} broken at sequence {}: {}",
            self.rule, self.sequence, self.found
        )
    }
}

/// The list as JSON.
pub fn breaches_value(breaches: &[Breach]) -> Value {
    Value::Array(breaches.iter().map(Breach::to_value).collect())
}

fn digest_of<'a>(event: &'a ObjectRef<'a>, memo: &DigestMemo<'a>) -> String {
    match event.get("evidence_refs") {
        Some(JsonRef::Array(list)) => memo.digest(list),
        _ => canonical::digest(&Value::Array(Vec::new())),
    }
}

fn text<'a>(event: &'a ObjectRef<'a>, key: &str) -> Option<&'a str> {
    event.get(key).and_then(JsonRef::as_str)
}

fn meta<'a>(event: &'a ObjectRef<'a>, key: &str) -> Option<&'a JsonRef<'a>> {
    event.get("metadata").and_then(|m| m.get(key))
}

/// The stricter lane and topology rules for one logical event (a plain
/// event or one transaction intent), against the state before it. Returns
/// `(rule, found)` pairs; the approval gate is checked by
/// [`super::approval::gate_breach`].
pub fn stricter_rules(
    state: &CoordinatorState,
    event: &Map<String, Value>,
) -> Vec<(String, String)> {
    let arena = bumpalo::Bump::new();
    stricter_rules_with(
        state,
        &ObjectRef::from_map(event, &arena),
        &DigestMemo::default(),
    )
}

/// [`stricter_rules`] with the digests already computed for this receipt
/// event.
pub(crate) fn stricter_rules_with<'a>(
    state: &CoordinatorState,
    event: &'a ObjectRef<'a>,
    memo: &DigestMemo<'a>,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut breach = |rule: &str, what: String| found.push((rule.to_string(), what));
    let Some(event_type) = text(event, "event_type").and_then(EventType::parse) else {
        return found;
    };
    let lane = text(event, "lane_id").and_then(|id| state.lanes().get(id));
    match event_type {
        // DEVIATIONS 19: an interrupted agent cannot revive its lane.
        EventType::ProbeAcknowledged => {
            if let Some(lane) = lane.filter(|l| l.last_event_type == EventType::AgentInterrupted) {
                breach(
                    INTERRUPTED_PROBE_ACK,
                    format!(
                        "probe_acknowledged for lane {} after agent_interrupted: an interrupted agent cannot acknowledge the probe",
                        lane.id
                    ),
                );
            }
        }
        // DEVIATIONS 20: a repair must fence the interrupted agent.
        EventType::ReplacementRepaired => {
            let original = meta(event, "original_lane_id")
                .and_then(JsonRef::as_str)
                .and_then(|id| state.lanes().get(id));
            if let Some(original) = original {
                let child_agent = original
                    .replacement_reservation
                    .as_ref()
                    .and_then(|r| r.get("replacement_agent_id"))
                    .and_then(Value::as_str);
                if child_agent == Some(original.agent_id.as_str()) {
                    breach(
                        UNFENCED_REPAIR,
                        format!(
                            "replacement_repaired recreates lane {}'s reserved child for the interrupted agent {} itself",
                            original.id, original.agent_id
                        ),
                    );
                }
            }
        }
        // DEVIATIONS 21, 99: a heartbeat proves liveness only. It never
        // completes a lane, a component or the run (a resolution resting on
        // it is damage for both tools: the reference's own replay rule).
        EventType::LaneCompleted
        | EventType::EvidenceAttached
        | EventType::MainVerification
        | EventType::RunCompleted
            if state.rests_on_liveness(&digest_of(event, memo)) =>
        {
            let subject = match (text(event, "lane_id"), meta(event, "component_id")) {
                (Some(lane), _) => format!(" for lane {lane}"),
                (None, Some(JsonRef::String(component))) => format!(" for component {component}"),
                _ => String::new(),
            };
            breach(
                LIVENESS_AS_COMPLETION,
                format!(
                    "{event_type}{subject} uses evidence recorded as liveness evidence: a heartbeat is never completion evidence"
                ),
            );
        }
        // DEVIATIONS 99: a heartbeat never passes a check.
        EventType::CheckPassed if state.rests_on_liveness(&digest_of(event, memo)) => {
            let name = |key| meta(event, key).and_then(JsonRef::as_str).unwrap_or("?");
            breach(
                LIVENESS_AS_CHECK,
                format!(
                    "check_passed for component {} check {} uses evidence recorded as liveness evidence: a heartbeat never passes a check",
                    name("component_id"),
                    name("check_id")
                ),
            );
        }
        // DEVIATIONS 35: a lane created under a parent (a child, a
        // replacement, a repaired replacement) stays within its scope.
        EventType::LaneCreated => {
            let parent = meta(event, "parent_lane_id")
                .and_then(JsonRef::as_str)
                .and_then(|id| state.lanes().get(id));
            if let Some(parent) = parent {
                let scope: Vec<String> = meta(event, "write_scope")
                    .and_then(JsonRef::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|entry| entry.as_str().map(str::to_string))
                    .collect();
                if let Err(narrowing) = narrow_scope(&parent.write_scope, &scope, &SCOPE_SHAPE) {
                    let child = text(event, "lane_id").unwrap_or("?");
                    let why = match narrowing {
                        Narrowing::Wider { entry } => format!("{entry} lies outside it"),
                        Narrowing::MalformedParent { entry, rule }
                        | Narrowing::MalformedChild { entry, rule } => {
                            format!("entry {entry}: {rule}")
                        }
                    };
                    breach(
                        WRITE_SCOPE_WIDENED,
                        format!(
                            "lane_created for lane {child} widens its parent lane {}'s write_scope {}: {why}",
                            parent.id,
                            parent.write_scope.join(", ")
                        ),
                    );
                }
            }
        }
        // DEVIATIONS 22: liveness evidence renews a lease once. A heartbeat
        // is heartbeat_observed + lease_renewed with one evidence list, so
        // the first of the pair is the one checked; a stall-clear is a
        // lane_recovered from suspected_stall.
        EventType::HeartbeatObserved | EventType::LaneRecovered => {
            let checked = lane.filter(|l| {
                event_type == EventType::HeartbeatObserved || l.state == LaneState::SuspectedStall
            });
            if let Some(lane) = checked
                && lane.has_liveness_digest(&digest_of(event, memo))
            {
                breach(
                    LIVENESS_REUSED,
                    format!(
                        "{event_type} for lane {} repeats liveness evidence the lane already recorded",
                        lane.id
                    ),
                );
            }
        }
        // DEVIATIONS 25: a re-registration keeps every required component.
        EventType::TopologyRegistered => {
            let registered: Vec<(&str, Option<bool>)> = meta(event, "components")
                .and_then(JsonRef::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    Some((
                        c.get("id")?.as_str()?,
                        c.get("required").and_then(JsonRef::as_bool),
                    ))
                })
                .collect();
            for (id, component) in state.topology() {
                if !component.required {
                    continue;
                }
                match registered.iter().find(|(rid, _)| rid == id) {
                    Some((_, Some(true))) => {}
                    Some(_) => breach(
                        REQUIRED_COMPONENT_DROPPED,
                        format!("topology_registered demotes required component {id}"),
                    ),
                    None => breach(
                        REQUIRED_COMPONENT_DROPPED,
                        format!("topology_registered drops required component {id}"),
                    ),
                }
            }
        }
        // DEVIATIONS 26: a required component stays until covered.
        EventType::TopologyComponentRemoved => {
            let id = meta(event, "component_id").and_then(JsonRef::as_str);
            if let Some(id) = id
                && state.topology().get(id).is_some_and(|c| c.required)
            {
                breach(
                    REQUIRED_COMPONENT_REMOVED,
                    format!("topology_component_removed removes required component {id}"),
                );
            }
        }
        _ => {}
    }
    found
}

/// A gate's check: no breach stands in the replayed state. `gate` names
/// the command that refuses.
pub fn require_no_breach(state: &CoordinatorState, gate: &str) -> Result<(), FlowError> {
    refuse_breaches(state.breaches(), gate)
}

/// [`require_no_breach`] for a list of breaches.
pub fn refuse_breaches(breaches: &[Breach], gate: &str) -> Result<(), FlowError> {
    let Some(first) = breaches.first() else {
        return Ok(());
    };
    let more = match breaches.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Err(ErrorKind::Breach {
        message: format!(
            "{gate} refused: the receipt breaks our rules: {}{more}",
            first.describe()
        ),
        breaches: breaches.to_vec(),
    }
    .into())
}

#[cfg(test)]
#[path = "breach_tests.rs"]
mod tests;
