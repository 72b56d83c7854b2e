//! Completion (reference-coordinator §10.5–§10.7): the pure evaluation of
//! the weakest-required-component rule, the completion-evidence rule shared
//! by `component-evidence`, `lane-resolve` and `complete`, and the in-lock
//! decision of `complete`.
//!
//! "The run is only as complete as its least complete required component"
//! is an all-or-nothing gate over sets computed from the replayed state; no
//! component is ranked. Every list is sorted (byte order, which is Python's
//! code-point order for the UTF-8 identifiers).

use crate::receipt::vocab::EventType;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::decide::InputRule;
use super::decide::{ErrorKind, FlowError, Intent, invalid, require_evidence};
use super::state::{CoordinatorState, CoverageState, LaneState, RunState};
use crate::receipt::canonical;
use crate::receipt::rules::{Limits, check_evidence};

/// `complete` reports at most this many missing ids.
pub const MAX_MISSING_IDS: usize = 64;

/// What completion still lacks; the keys of `completion-check`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct CompletionReport {
    /// Every lane that is not `completed` and not a resolved failed lane
    /// (whether or not it owns a component), plus owner lanes of required
    /// components that are neither.
    pub missing_lanes: Vec<String>,
    /// `failed` lanes without a resolution by a completed lane.
    pub unresolved_failed_lanes: Vec<String>,
    /// `failed` lanes resolved by a lane that is currently `completed`.
    pub resolved_failed_lanes: Vec<String>,
    /// Approved ids never registered (nor removed), removed components that
    /// were required, and registered required components not covered by
    /// evidence.
    pub missing_components: Vec<String>,
    /// `component:check` for every required check of every registered
    /// required component whose latest result is not a pass.
    pub failed_checks: Vec<String>,
    pub missing_main_verification: bool,
    /// `replaced` lanes whose reserved child lane does not exist.
    pub incomplete_replacements: Vec<String>,
    pub complete: bool,
}

impl CompletionReport {
    /// The `completion-check` keys: the fields, as they are named.
    pub fn to_json(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("a completion report is a JSON object"),
        }
    }

    /// The `missing_ids` of a blocked `complete`: missing lanes, missing
    /// components, failed checks, incomplete replacements, in that order
    /// (an id may repeat across the lists, as in the reference), at most
    /// [`MAX_MISSING_IDS`].
    pub fn missing_ids(&self) -> Vec<String> {
        self.missing_lanes
            .iter()
            .chain(&self.missing_components)
            .chain(&self.failed_checks)
            .chain(&self.incomplete_replacements)
            .take(MAX_MISSING_IDS)
            .cloned()
            .collect()
    }
}

/// The completion evaluation of the replayed state (`completion-check`).
pub fn evaluate_completion(state: &CoordinatorState) -> CompletionReport {
    evaluate(state, state.main_verified())
}

/// The evaluation with main verification taken as `main_verified` (what
/// `complete` asks: would the run be complete once it verifies?).
pub fn evaluate(state: &CoordinatorState, main_verified: bool) -> CompletionReport {
    let lane_state = |id: &str| state.lane(id).map(|lane| lane.state);
    let completed = |id: &str| lane_state(id) == Some(LaneState::Completed);

    let resolved: BTreeSet<&str> = state
        .failure_resolutions()
        .iter()
        .filter(|(failed, resolution)| {
            lane_state(failed) == Some(LaneState::Failed)
                && completed(&resolution.resolution_lane_id)
        })
        .map(|(failed, _)| failed.as_str())
        .collect();
    let unresolved: BTreeSet<&str> = state
        .lanes()
        .values()
        .filter(|lane| lane.state == LaneState::Failed && !resolved.contains(lane.id.as_str()))
        .map(|lane| lane.id.as_str())
        .collect();

    let required: Vec<_> = state
        .topology()
        .values()
        .filter(|component| component.required)
        .collect();

    let mut missing_lanes: BTreeSet<&str> = state
        .lanes()
        .values()
        .filter(|lane| lane.state != LaneState::Completed && !resolved.contains(lane.id.as_str()))
        .map(|lane| lane.id.as_str())
        .collect();
    missing_lanes.extend(
        required
            .iter()
            .map(|component| component.owner_lane.as_str())
            .filter(|owner| !completed(owner) && !resolved.contains(owner)),
    );

    let registered = state.topology();
    let removed = state.removed_component_records();
    let mut missing_components: BTreeSet<&str> = state
        .approved_component_ids()
        .iter()
        .map(String::as_str)
        .filter(|id| !registered.contains_key(*id) && !removed.contains_key(*id))
        .collect();
    // A removed component that was required keeps blocking completion.
    missing_components.extend(
        removed
            .values()
            .filter(|component| component.required)
            .map(|component| component.id.as_str()),
    );
    missing_components.extend(
        required
            .iter()
            .filter(|component| {
                component.coverage_state != CoverageState::Covered
                    || component.evidence_refs.is_empty()
            })
            .map(|component| component.id.as_str()),
    );

    let mut failed_checks: Vec<String> = required
        .iter()
        .flat_map(|component| {
            let results = state.checks().get(&component.id);
            component
                .required_checks
                .iter()
                .filter(move |check| results.and_then(|r| r.get(*check)) != Some(&true))
                .map(move |check| format!("{}:{check}", component.id))
        })
        .collect();
    failed_checks.sort();

    let owned = |set: BTreeSet<&str>| set.into_iter().map(str::to_string).collect::<Vec<_>>();
    let mut report = CompletionReport {
        missing_lanes: owned(missing_lanes),
        unresolved_failed_lanes: owned(unresolved),
        resolved_failed_lanes: owned(resolved),
        missing_components: owned(missing_components),
        failed_checks,
        missing_main_verification: !main_verified,
        incomplete_replacements: state.incomplete_replacements().to_vec(),
        complete: false,
    };
    report.complete = report.missing_lanes.is_empty()
        && report.missing_components.is_empty()
        && report.failed_checks.is_empty()
        && !report.missing_main_verification
        && report.incomplete_replacements.is_empty();
    report
}

/// Evidence that completes something (component coverage, a failed lane's
/// resolution, the run itself): some evidence, and never liveness evidence.
/// A heartbeat proves that an agent was alive, not that its work is done:
/// the evidence list may not be one any lane recorded as liveness evidence
/// (its liveness history or its latest liveness digest). Returns the
/// evidence digest.
pub fn require_completion_evidence(
    state: &CoordinatorState,
    evidence: &Value,
) -> Result<String, FlowError> {
    require_evidence(evidence)?;
    // The digest is taken of validated evidence (the reference's digest
    // helper validates with the default limits first).
    check_evidence(evidence, &Limits::default())
        .map_err(|m| super::decide::evidence_refusal(m, evidence, &Limits::default()))?;
    let digest = canonical::digest(evidence);
    if state.rests_on_liveness(&digest) {
        return invalid(InputRule::LivenessCannotSatisfyCompletion);
    }
    Ok(digest)
}

/// In-lock decision of `complete`, in the reference's order: the run is
/// exactly `running`; the evidence is completion evidence; the run would be
/// complete once main verification is recorded (else exit 6 with the
/// missing ids, nothing written). Two intents, sealed as one
/// `transaction_committed`: `main_verification` and `run_completed`, both
/// with the evidence and the current time.
pub fn decide_complete(
    state: &CoordinatorState,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    if state.run_state_enum() != RunState::Running {
        return super::decide::run_state_refused(state.run_state_enum(), &[RunState::Running]);
    }
    require_completion_evidence(state, evidence)?;
    let report = evaluate(state, true);
    if !report.complete {
        return Err(ErrorKind::CompletionBlocked {
            message: "required workflow completion evidence is missing".into(),
            missing_ids: report.missing_ids(),
            breaches: Vec::new(),
        }
        .into());
    }
    let verification = Intent::about_run(
        EventType::MainVerification,
        evidence.clone(),
        None,
        Map::new(),
    );
    let completed = Intent::run(
        EventType::RunCompleted,
        RunState::Running,
        RunState::Completed,
        None,
        evidence.clone(),
    );
    Ok(vec![verification, completed])
}

#[cfg(test)]
#[path = "completion_tests.rs"]
mod tests;
