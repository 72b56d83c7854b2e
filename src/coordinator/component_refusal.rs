//! Why a topology step is refused for the component it names
//! (`topology-register`, `topology-remove`, `component-evidence`): a
//! conflict (exit 5) with the reference's message, whose `fields` say the
//! component and what about it refused the step, and whose hint says what
//! comes first.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};
use super::state::LaneState;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComponentRefusal {
    /// Not in the run's topology (never registered, or removed).
    #[error("topology component does not exist")]
    Missing {
        component_id: String,
        components: Vec<String>,
    },
    /// A re-registration leaves a required component out (`dropped`) or
    /// makes it optional. (`said`: the message, which names it; see
    /// [`ComponentRefusal::required_kept`].)
    #[error("{said}")]
    RequiredKept {
        component_id: String,
        dropped: bool,
        said: String,
    },
    /// Registered components depend on it (`said`: the message, which
    /// names them; see [`ComponentRefusal::has_dependents`]).
    #[error("{said}")]
    HasDependents {
        component_id: String,
        dependents: Vec<String>,
        said: String,
    },
    /// A required component cannot be removed.
    #[error("required topology component cannot be removed; it blocks completion until covered")]
    Required { component_id: String },
    /// Its evidence is attached already.
    #[error("component evidence is already attached")]
    Covered { component_id: String },
    /// Its owner lane has not completed (`None`: no such lane).
    #[error("component owner lane is not completed")]
    OwnerNotCompleted {
        component_id: String,
        owner_lane: String,
        lane_state: Option<LaneState>,
    },
    /// Some required checks have not passed (last result).
    #[error("component required checks are incomplete")]
    ChecksNotPassed {
        component_id: String,
        checks: Vec<String>,
    },
    /// `check-result` for a check the topology does not require of the
    /// component (`required_checks`: `None` when the component is not in
    /// the topology, whose components are `components`).
    #[error("component check is not registered")]
    CheckNotRegistered {
        component_id: String,
        check_id: String,
        components: Vec<String>,
        required_checks: Option<Vec<String>>,
    },
    /// The check's last record has this very result, evidence and reason.
    #[error("duplicate check result")]
    DuplicateCheck {
        component_id: String,
        check_id: String,
    },
    /// A pass after a failure without a non-blank reason (`evidence:
    /// false`) or with the failure's own evidence (`evidence: true`).
    #[error(
        "a recovered check requires {}",
        if *.evidence { "fresh evidence" } else { "a fresh result and reason" }
    )]
    RecoveryUnexplained {
        component_id: String,
        check_id: String,
        evidence: bool,
    },
}

impl ComponentRefusal {
    /// A re-registration that drops (or demotes) required `component_id`.
    pub fn required_kept(component_id: &str, dropped: bool) -> Self {
        let said = format!(
            "topology re-registration cannot {} required component {component_id}; \
             a required component leaves only through topology-remove",
            if dropped { "drop" } else { "demote" }
        );
        Self::RequiredKept {
            component_id: component_id.into(),
            dropped,
            said,
        }
    }

    /// A removal of `component_id`, on which `dependents` depend.
    pub fn has_dependents(component_id: &str, dependents: Vec<String>) -> Self {
        let said = format!(
            "topology component still has dependents: {}",
            dependents.join(", ")
        );
        Self::HasDependents {
            component_id: component_id.into(),
            dependents,
            said,
        }
    }
}

impl ConflictReason for ComponentRefusal {
    /// Its `fields` and hint.
    fn teaching(&self) -> Teaching {
        const SEE: &str =
            "see what each component still needs: bluetape-flow completion-check --run-id {run_id}";
        let (fields, hint) = match self {
            Self::Missing {
                component_id,
                components,
            } => (
                json!({"component_id": component_id, "components": components}),
                if components.is_empty() {
                    "retrying cannot help: the run has no topology yet: bluetape-flow topology-register --run-id {run_id} --owner-file {owner_file} --input topology.json --evidence FILE".to_string()
                } else {
                    format!(
                        "retrying cannot help: component {component_id} is not in the topology ({})",
                        components.join(", ")
                    )
                },
            ),
            Self::RequiredKept { component_id, .. } => (
                json!({"component_id": component_id}),
                format!(
                    "retrying cannot help: keep {component_id} required in the topology, or remove it first with bluetape-flow topology-remove (which refuses a required component: it must be covered)"
                ),
            ),
            Self::HasDependents {
                component_id,
                dependents,
                ..
            } => (
                json!({"component_id": component_id, "dependents": dependents}),
                format!(
                    "retrying cannot help: remove {} first, or register a topology where nothing depends on {component_id}",
                    dependents.join(", ")
                ),
            ),
            Self::Required { component_id } => (
                json!({"component_id": component_id}),
                format!(
                    "retrying cannot help: cover {component_id} instead, with component-evidence once its owner lane completed and its checks passed; {SEE}"
                ),
            ),
            Self::Covered { component_id } => (
                json!({"component_id": component_id}),
                format!("retrying cannot help: {component_id} is covered already; {SEE}"),
            ),
            Self::OwnerNotCompleted {
                component_id,
                owner_lane,
                lane_state,
            } => (
                json!({"component_id": component_id, "owner_lane": owner_lane,
                       "lane_state": lane_state.map(LaneState::as_str)}),
                format!(
                    "component {component_id} is covered once its owner lane {owner_lane} has completed (it is {}): lane-complete it first, or register the lane that did the work as the owner",
                    lane_state.map_or("no lane of this run", LaneState::as_str)
                ),
            ),
            Self::ChecksNotPassed {
                component_id,
                checks,
            } => (
                json!({"component_id": component_id, "checks_not_passed": checks}),
                format!(
                    "report {} of {component_id} as passed with check-result first; {SEE}",
                    checks.join(", ")
                ),
            ),
            Self::CheckNotRegistered {
                component_id,
                check_id,
                components,
                required_checks,
            } => (
                json!({"component_id": component_id, "check_id": check_id,
                       "components": components, "required_checks": required_checks}),
                match required_checks {
                    None if components.is_empty() => "retrying cannot help: register the topology first: bluetape-flow topology-register --run-id {run_id} --owner-file {owner_file} --input topology.json --evidence FILE".to_string(),
                    None => format!(
                        "retrying cannot help: component {component_id} is not in the topology ({}); register it with topology-register",
                        components.join(", ")
                    ),
                    Some(checks) => format!(
                        "retrying cannot help: component {component_id} requires the checks {}; register {check_id} with topology-register, or report one of those",
                        checks.join(", ")
                    ),
                },
            ),
            Self::DuplicateCheck {
                component_id,
                check_id,
            } => (
                json!({"component_id": component_id, "check_id": check_id}),
                format!(
                    "retrying cannot help: check {check_id} of {component_id} already has this result, evidence and reason as its last record; a new result needs new evidence or a new reason"
                ),
            ),
            Self::RecoveryUnexplained {
                component_id,
                check_id,
                evidence,
            } => (
                json!({"component_id": component_id, "check_id": check_id}),
                if *evidence {
                    format!(
                        "check {check_id} of {component_id} failed with this very evidence: a pass needs the evidence of the run that passed"
                    )
                } else {
                    format!(
                        "check {check_id} of {component_id} last failed: a pass needs a non-blank reason saying what changed (the reason field of --input)"
                    )
                },
            ),
        };
        Teaching::reason(fields, hint)
    }
}
