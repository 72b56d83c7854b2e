//! Decisions of the topology commands (reference-coordinator §10.1–§10.4):
//! `topology-register`, `topology-remove`, `check-result` and
//! `component-evidence`.
//!
//! Each command has a pre-lock precheck (input shape, exit 2) and an in-lock
//! decision on the replayed state, in the reference's order: the first
//! failing check decides the exit status.
//!
//! Two deliberate differences close ways to drop a required component
//! silently (decisions.md 8): a re-registration may not demote or drop a
//! registered required component, and `topology-remove` refuses a required
//! component (the reference records the removal, after which the run can
//! never complete). Both are exit 5.

use crate::receipt::vocab::EventType;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::completion::require_completion_evidence;
use super::component_refusal::ComponentRefusal as Refused;
use super::decide::{ErrorKind, FlowError, Intent, Policy, invalid, refused, require_evidence};
use super::decide::{InputRefusal, InputRule};
use super::inputs::{CheckResultInput, ComponentEvidenceInput, checked_input};
use super::lane_commands::{identifier, is_python_space, require_fields, require_lane_run_state};
use super::state::{Component, CoordinatorState, CoverageState, LaneState};
use crate::receipt::canonical;
use crate::receipt::rules::{Limits, check_component, check_evidence};
use crate::receipt::schema::keys_of;

/// A topology-level intent (no lane, no agent, no states) at "now".
fn topology_intent(
    event_type: EventType,
    evidence: &Value,
    reason: Option<&str>,
    metadata: Map<String, Value>,
) -> Intent {
    Intent::about_run(event_type, evidence.clone(), reason, metadata)
}

fn non_blank(text: &str) -> bool {
    !text.chars().all(is_python_space)
}

// ------------------------------------------------------------ register

/// Pre-lock check of `topology-register`: evidence present.
pub fn precheck_register(evidence: &Value) -> Result<(), FlowError> {
    require_evidence(evidence)
}

/// The reference's snapshot validation (all exit 2), in its order: the
/// component count; per component its field contract, a unique id, an
/// existing owner lane and no coverage; the id set equal to the approved
/// components minus the removed ones; known dependencies; no cycle.
/// Returns the components sorted by id, exactly as supplied.
pub fn validate_topology(
    components: &Value,
    state: &CoordinatorState,
    limits: &Limits,
) -> Result<Vec<Value>, FlowError> {
    let items = match components.as_array() {
        Some(items) if !items.is_empty() && items.len() as u64 <= limits.max_components => items,
        _ => return invalid(InputRule::TopologyCount),
    };
    let mut by_id: BTreeMap<&str, &Value> = BTreeMap::new();
    for component in items {
        check_component(component, limits).map_err(ErrorKind::Contract)?;
        // check_component guarantees the shape read below.
        let text = |key: &str| component.get(key).and_then(Value::as_str).unwrap_or("");
        let id = text("id");
        if by_id.contains_key(id) {
            return invalid(InputRefusal::DuplicateComponent { id: id.into() });
        }
        let owner = text("owner_lane");
        if state.lane(owner).is_none() {
            return invalid(InputRefusal::UnknownOwnerLane {
                owner: owner.into(),
            });
        }
        if text("coverage_state") != CoverageState::Missing.as_str()
            || component
                .get("evidence_refs")
                .and_then(Value::as_array)
                .is_none_or(|refs| !refs.is_empty())
        {
            return invalid(InputRule::TopologyCoverage);
        }
        by_id.insert(id, component);
    }
    let removed: BTreeSet<&str> = state
        .removed_components()
        .iter()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = state
        .approved_component_ids()
        .iter()
        .map(String::as_str)
        .filter(|id| !removed.contains(id))
        .collect();
    if by_id.keys().copied().collect::<BTreeSet<_>>() != expected {
        return invalid(InputRule::TopologySnapshot);
    }
    let dependencies = |component: &Value| -> Vec<String> {
        component
            .get("dependencies")
            .and_then(Value::as_array)
            .map(|deps| {
                deps.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    for component in items {
        let unknown: BTreeSet<String> = dependencies(component)
            .into_iter()
            .filter(|dep| !by_id.contains_key(dep.as_str()))
            .collect();
        if !unknown.is_empty() {
            let names: Vec<String> = unknown.into_iter().collect();
            return invalid(InputRefusal::UnknownDependencies { names });
        }
    }
    if has_cycle(&by_id, dependencies) {
        return invalid(InputRule::TopologyCycle);
    }
    Ok(by_id.into_values().cloned().collect())
}

/// Kahn's topological sort: a cycle (a self-dependency included) leaves
/// some component unvisited.
fn has_cycle(by_id: &BTreeMap<&str, &Value>, dependencies: impl Fn(&Value) -> Vec<String>) -> bool {
    let mut indegree: BTreeMap<&str, usize> = by_id.keys().map(|id| (*id, 0)).collect();
    let mut dependents: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (id, component) in by_id {
        for dependency in dependencies(component) {
            *indegree.entry(id).or_default() += 1;
            dependents.entry(dependency).or_default().push(id);
        }
    }
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, degree)| **degree == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut visited = 0;
    while let Some(current) = ready.pop() {
        visited += 1;
        for dependent in dependents.get(current).into_iter().flatten() {
            if let Some(degree) = indegree.get_mut(dependent) {
                *degree -= 1;
                if *degree == 0 {
                    ready.push(dependent);
                }
            }
        }
    }
    visited != by_id.len()
}

/// In-lock decision of `topology-register`: run running or recovering; the
/// snapshot validation; then (decisions.md 8) no registered required
/// component may be demoted to optional or left out. Re-registration keeps
/// check results, and the reducer carries coverage and evidence over for
/// surviving ids. One `topology_registered` event at "now".
pub fn decide_register(
    state: &CoordinatorState,
    policy: &Policy,
    components: &Value,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let validated = validate_topology(components, state, &policy.limits)?;
    let required_now: BTreeMap<&str, bool> = validated
        .iter()
        .filter_map(|c| {
            let id = c.get("id").and_then(Value::as_str)?;
            let required = c.get("required").and_then(Value::as_bool)?;
            Some((id, required))
        })
        .collect();
    for (id, current) in state.topology() {
        if !current.required {
            continue;
        }
        match required_now.get(id.as_str()) {
            Some(true) => {}
            Some(false) => return refused(Refused::required_kept(id, false)),
            None => return refused(Refused::required_kept(id, true)),
        }
    }
    let mut metadata = Map::new();
    metadata.insert("components".into(), Value::Array(validated));
    Ok(vec![topology_intent(
        EventType::TopologyRegistered,
        evidence,
        None,
        metadata,
    )])
}

/// The registered component `component_id`, or the refusal naming the
/// run's components.
fn registered<'s>(
    state: &'s CoordinatorState,
    component_id: &str,
) -> Result<&'s Component, FlowError> {
    match state.topology().get(component_id) {
        Some(component) => Ok(component),
        None => refused(Refused::Missing {
            component_id: component_id.into(),
            components: state.topology().keys().cloned().collect(),
        }),
    }
}

// ------------------------------------------------------------ remove

/// Pre-lock checks of `topology-remove` (exit 2): the component id,
/// evidence present, a non-blank reason.
pub fn precheck_remove(
    component_id: &str,
    evidence: &Value,
    reason: &str,
) -> Result<(), FlowError> {
    identifier(&json!(component_id), "component id")?;
    require_evidence(evidence)?;
    if !non_blank(reason) {
        return invalid(InputRule::RemovalNeedsReason);
    }
    Ok(())
}

/// In-lock decision of `topology-remove` (all exit 5): run state; the
/// component is registered; no registered component depends on it; it is
/// not required (a deviation: the reference records the removal of a
/// required component, which then blocks completion forever). One
/// `topology_component_removed` event at "now" with the reason.
pub fn decide_remove(
    state: &CoordinatorState,
    component_id: &str,
    reason: &str,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let component = registered(state, component_id)?;
    let dependents: Vec<String> = state
        .topology()
        .iter()
        .filter(|(_, c)| c.dependencies.iter().any(|d| d == component_id))
        .map(|(id, _)| id.clone())
        .collect();
    if !dependents.is_empty() {
        return refused(Refused::has_dependents(component_id, dependents));
    }
    if component.required {
        return refused(Refused::Required {
            component_id: component_id.into(),
        });
    }
    let mut metadata = Map::new();
    metadata.insert("component_id".into(), json!(component_id));
    Ok(vec![topology_intent(
        EventType::TopologyComponentRemoved,
        evidence,
        Some(reason),
        metadata,
    )])
}

// ------------------------------------------------------------ check-result

/// A `check-result` request that passed its pre-lock checks. `reason` is
/// the input's value as given (absent = null); a non-string reason is
/// refused only where the reference refuses it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub component_id: String,
    pub check_id: String,
    pub passed: bool,
    pub reason: Value,
}

/// Pre-lock checks of `check-result` (exit 2): the field contract, the
/// component and check ids, a boolean `passed`, evidence present.
pub fn precheck_check_result(input: &Value, evidence: &Value) -> Result<CheckResult, FlowError> {
    let keys = keys_of!(CheckResultInput);
    let fields = require_fields(input, &keys.required, &keys.optional)?;
    let field = |key: &str| fields.get(key).unwrap_or(&Value::Null);
    identifier(field("component_id"), "component id")?;
    identifier(field("check_id"), "check id")?;
    if !field("passed").is_boolean() {
        return invalid(InputRule::CheckPassedNotBool);
    }
    require_evidence(evidence)?;
    let typed: CheckResultInput = checked_input(input)?;
    Ok(CheckResult {
        component_id: typed.component_id.into(),
        check_id: typed.check_id.into(),
        passed: typed.passed,
        reason: typed.reason,
    })
}

fn same(a: &Value, b: &Value) -> bool {
    canonical::to_vec(a) == canonical::to_vec(b)
}

/// In-lock decision of `check-result` (exit 5 unless noted): run state;
/// the check is a required check of a registered component; the result
/// differs from the last one recorded; a recovery (failed, now passing)
/// carries a non-blank reason and evidence other than the failure's. Last
/// write wins; the history keeps every result. A passing result never
/// rests on liveness evidence (exit 2; our rule, not the reference's).
pub fn decide_check_result(
    state: &CoordinatorState,
    request: &CheckResult,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let registered = state
        .topology()
        .get(&request.component_id)
        .is_some_and(|c| c.required_checks.contains(&request.check_id));
    if !registered {
        return refused(Refused::CheckNotRegistered {
            component_id: request.component_id.clone(),
            check_id: request.check_id.clone(),
            components: state.topology().keys().cloned().collect(),
            required_checks: state
                .topology()
                .get(&request.component_id)
                .map(|c| c.required_checks.clone()),
        });
    }
    let last = state
        .check_history()
        .get(&request.component_id)
        .and_then(|checks| checks.get(&request.check_id))
        .and_then(|history| history.last());
    if let Some(last) = last {
        let record = json!({
            "passed": request.passed, "evidence_refs": evidence, "reason": request.reason,
        });
        let check = || (request.component_id.clone(), request.check_id.clone());
        if same(&last.to_json(), &record) {
            let (component_id, check_id) = check();
            return refused(Refused::DuplicateCheck {
                component_id,
                check_id,
            });
        }
        if !last.passed && request.passed {
            if !request.reason.as_str().is_some_and(non_blank) {
                let (component_id, check_id) = check();
                return refused(Refused::RecoveryUnexplained {
                    component_id,
                    check_id,
                    evidence: false,
                });
            }
            let failed = Value::Array(last.evidence_refs.clone());
            check_evidence(&failed, &Limits::default())
                .map_err(|m| super::decide::evidence_refusal(m, &failed, &Limits::default()))?;
            check_evidence(evidence, &Limits::default())
                .map_err(|m| super::decide::evidence_refusal(m, evidence, &Limits::default()))?;
            if canonical::digest(&failed) == canonical::digest(evidence) {
                let (component_id, check_id) = check();
                return refused(Refused::RecoveryUnexplained {
                    component_id,
                    check_id,
                    evidence: true,
                });
            }
        }
    }
    let reason = match &request.reason {
        Value::Null => None,
        Value::String(reason) => Some(reason.as_str()),
        _ => return invalid(InputRule::ReceiptReasonTooLong),
    };
    // Our rule (DEVIATIONS 99), checked after every refusal the reference
    // gives: a heartbeat proves that an agent was alive, never that a
    // check passed.
    if request.passed {
        check_evidence(evidence, &Limits::default())
            .map_err(|m| super::decide::evidence_refusal(m, evidence, &Limits::default()))?;
        if state.rests_on_liveness(&canonical::digest(evidence)) {
            return Err(FlowError::from(InputRule::LivenessCannotPassCheck).hinted(
                format!(
                    "retrying cannot help: this evidence list was recorded as liveness evidence (a heartbeat, stall-clear or probe of a lane), which proves only that an agent was alive; report check {} of component {} with the check's own output as --evidence",
                    request.check_id, request.component_id
                ),
            ));
        }
    }
    let event_type = if request.passed {
        EventType::CheckPassed
    } else {
        EventType::CheckFailed
    };
    let mut metadata = Map::new();
    metadata.insert("component_id".into(), json!(request.component_id));
    metadata.insert("check_id".into(), json!(request.check_id));
    Ok(vec![topology_intent(
        event_type, evidence, reason, metadata,
    )])
}

// ------------------------------------------------------------ component-evidence

/// Pre-lock checks of `component-evidence` (exit 2): exactly
/// `{component_id}`, an identifier. Returns the id.
pub fn precheck_component_evidence(input: &Value) -> Result<String, FlowError> {
    let fields = require_fields(input, &keys_of!(ComponentEvidenceInput).required, &[])?;
    identifier(
        fields.get("component_id").unwrap_or(&Value::Null),
        "component id",
    )?;
    let typed: ComponentEvidenceInput = checked_input(input)?;
    Ok(typed.component_id.into())
}

/// In-lock decision of `component-evidence`, in the reference's order:
/// run state (5); completion evidence, never liveness evidence (2); the
/// component is registered (5), not yet covered (5), its owner lane is
/// `completed` (5: a failed-but-resolved owner does not qualify; register
/// the resolver as owner) and every required check currently passes (5).
/// One `evidence_attached` event at "now" marking it covered.
pub fn decide_component_evidence(
    state: &CoordinatorState,
    component_id: &str,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    require_completion_evidence(state, evidence)?;
    let component = registered(state, component_id)?;
    if component.coverage_state == CoverageState::Covered {
        return refused(Refused::Covered {
            component_id: component_id.into(),
        });
    }
    let owner_state = state.lane(&component.owner_lane).map(|lane| lane.state);
    if owner_state != Some(LaneState::Completed) {
        return refused(Refused::OwnerNotCompleted {
            component_id: component_id.into(),
            owner_lane: component.owner_lane.clone(),
            lane_state: owner_state,
        });
    }
    let results = state.checks().get(component_id);
    let not_passed: Vec<String> = component
        .required_checks
        .iter()
        .filter(|check| results.and_then(|r| r.get(*check)) != Some(&true))
        .cloned()
        .collect();
    if !not_passed.is_empty() {
        return refused(Refused::ChecksNotPassed {
            component_id: component_id.into(),
            checks: not_passed,
        });
    }
    let mut metadata = Map::new();
    metadata.insert("component_id".into(), json!(component_id));
    metadata.insert(
        "coverage_state".into(),
        json!(CoverageState::Covered.as_str()),
    );
    Ok(vec![topology_intent(
        EventType::EvidenceAttached,
        evidence,
        None,
        metadata,
    )])
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
