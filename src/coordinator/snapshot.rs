//! Restoring a [`CoordinatorState`] from its public JSON (the inverse of
//! [`CoordinatorState::public_json`]), so a checkpoint can stand in for the
//! replay of a receipt prefix. Pure; any shape error refuses the snapshot
//! (the caller then replays the whole receipt).

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

use super::state::{
    CheckRecord, Component, CoordinatorState, CoverageState, FailureResolution, LaneRecord,
    LaneState, RunState,
};

type Shape<T> = Result<T, String>;

fn bad<T>(what: &str) -> Shape<T> {
    Err(format!("checkpoint state field {what} is malformed"))
}

fn obj<'a>(v: &'a Value, what: &str) -> Shape<&'a Map<String, Value>> {
    v.as_object().map_or_else(|| bad(what), Ok)
}

fn text(v: &Value, what: &str) -> Shape<String> {
    v.as_str().map(str::to_string).map_or_else(|| bad(what), Ok)
}

fn event_type(v: &Value, what: &str) -> Shape<EventType> {
    v.as_str()
        .and_then(EventType::parse)
        .map_or_else(|| bad(what), Ok)
}

fn opt_text(v: &Value, what: &str) -> Shape<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => bad(what),
    }
}

fn texts(v: &Value, what: &str) -> Shape<Vec<String>> {
    v.as_array()
        .and_then(|a| {
            a.iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .map_or_else(|| bad(what), Ok)
}

fn values(v: &Value, what: &str) -> Shape<Vec<Value>> {
    v.as_array().cloned().map_or_else(|| bad(what), Ok)
}

fn field<'a>(m: &'a Map<String, Value>, key: &str) -> Shape<&'a Value> {
    m.get(key).map_or_else(|| bad(key), Ok)
}

fn run_state(text: &str) -> Option<RunState> {
    use RunState::*;
    [
        Planned, Approved, Running, Recovering, Completed, Failed, Blocked, Cancelled,
    ]
    .into_iter()
    .find(|s| s.as_str() == text)
}

fn component(v: &Value) -> Shape<Component> {
    let m = obj(v, "component")?;
    Ok(Component {
        id: text(field(m, "id")?, "id")?,
        required: field(m, "required")?
            .as_bool()
            .map_or_else(|| bad("required"), Ok)?,
        description: text(field(m, "description")?, "description")?,
        owner_lane: text(field(m, "owner_lane")?, "owner_lane")?,
        required_checks: texts(field(m, "required_checks")?, "required_checks")?,
        dependencies: texts(field(m, "dependencies")?, "dependencies")?,
        evidence_refs: values(field(m, "evidence_refs")?, "evidence_refs")?,
        coverage_state: field(m, "coverage_state")?
            .as_str()
            .and_then(CoverageState::parse)
            .map_or_else(|| bad("coverage_state"), Ok)?,
    })
}

fn lane(v: &Value) -> Shape<LaneRecord> {
    let m = obj(v, "lane")?;
    let o = |k: &str| -> Shape<Option<String>> { opt_text(field(m, k)?, k) };
    let digests = texts(
        field(m, "liveness_evidence_digests")?,
        "liveness_evidence_digests",
    )?;
    let replacement_count = match field(m, "replacement_count")? {
        Value::Number(n) => n.clone(),
        _ => return bad("replacement_count"),
    };
    let terminal_sequence = match field(m, "terminal_sequence")? {
        Value::Null => None,
        v => Some(v.as_u64().map_or_else(|| bad("terminal_sequence"), Ok)?),
    };
    let replacement_reservation = match m.get("replacement_reservation") {
        None => None,
        Some(Value::Object(r)) => Some(r.clone()),
        Some(_) => return bad("replacement_reservation"),
    };
    Ok(LaneRecord {
        id: text(field(m, "id")?, "id")?,
        state: field(m, "state")?
            .as_str()
            .and_then(LaneState::parse)
            .map_or_else(|| bad("state"), Ok)?,
        agent_id: text(field(m, "agent_id")?, "agent_id")?,
        assignment: o("assignment")?,
        write_scope: texts(field(m, "write_scope")?, "write_scope")?,
        changed_paths: texts(field(m, "changed_paths")?, "changed_paths")?,
        fallback: o("fallback")?,
        startup_ack_deadline: o("startup_ack_deadline")?,
        silence_lease_deadline: o("silence_lease_deadline")?,
        command_deadline: o("command_deadline")?,
        probe_deadline: o("probe_deadline")?,
        evidence_digest: o("evidence_digest")?,
        parent_lane_id: o("parent_lane_id")?,
        replacement_count,
        replacement_lane_id: o("replacement_lane_id")?,
        last_evidence_digest: o("last_evidence_digest")?,
        last_reason: o("last_reason")?,
        liveness_evidence_refs: values(
            field(m, "liveness_evidence_refs")?,
            "liveness_evidence_refs",
        )?,
        digest_index: digests.iter().cloned().collect::<HashSet<_>>(),
        liveness_evidence_digests: digests,
        last_event_type: event_type(field(m, "last_event_type")?, "last_event_type")?,
        terminal_sequence,
        updated_at: text(field(m, "updated_at")?, "updated_at")?,
        evidence_refs: values(field(m, "evidence_refs")?, "evidence_refs")?,
        replacement_reservation,
        earlier: Default::default(),
    })
}

fn map_of<T>(
    v: &Value,
    what: &str,
    each: impl Fn(&Value) -> Shape<T>,
) -> Shape<BTreeMap<String, T>> {
    obj(v, what)?
        .iter()
        .map(|(k, v)| Ok((k.clone(), each(v)?)))
        .collect()
}

impl CoordinatorState {
    /// Rebuild a state from [`CoordinatorState::public_json`] output.
    pub fn from_public_json(value: &Value) -> Result<CoordinatorState, String> {
        let m = obj(value, "state")?;
        let check_history = map_of(field(m, "check_history")?, "check_history", |checks| {
            map_of(checks, "check_history", |history| {
                values(history, "check_history")?
                    .iter()
                    .map(|record| {
                        let r = obj(record, "check record")?;
                        Ok(CheckRecord {
                            passed: field(r, "passed")?
                                .as_bool()
                                .map_or_else(|| bad("passed"), Ok)?,
                            evidence_refs: values(field(r, "evidence_refs")?, "evidence_refs")?,
                            reason: opt_text(field(r, "reason")?, "reason")?,
                        })
                    })
                    .collect()
            })
        })?;
        let checks = map_of(field(m, "checks")?, "checks", |checks| {
            map_of(checks, "checks", |passed| {
                passed.as_bool().map_or_else(|| bad("checks"), Ok)
            })
        })?;
        let failure_resolutions = map_of(
            field(m, "failure_resolutions")?,
            "failure_resolutions",
            |r| {
                let r = obj(r, "failure resolution")?;
                Ok(FailureResolution {
                    resolution_lane_id: text(
                        field(r, "resolution_lane_id")?,
                        "resolution_lane_id",
                    )?,
                    resolved_at: text(field(r, "resolved_at")?, "resolved_at")?,
                    evidence_refs: values(field(r, "evidence_refs")?, "evidence_refs")?,
                })
            },
        )?;
        let reports = map_of(field(m, "reports")?, "reports", |r| {
            obj(r, "report").cloned()
        })?;
        Ok(CoordinatorState {
            run_state: field(m, "run_state")?
                .as_str()
                .and_then(run_state)
                .map_or_else(|| bad("run_state"), Ok)?,
            owner_epoch: field(m, "owner_epoch")?
                .as_u64()
                .map_or_else(|| bad("owner_epoch"), Ok)?,
            owner_fingerprint: opt_text(field(m, "owner_fingerprint")?, "owner_fingerprint")?,
            lanes: map_of(field(m, "lanes")?, "lanes", lane)?,
            topology: map_of(field(m, "topology")?, "topology", component)?,
            removed_components: texts(field(m, "removed_components")?, "removed_components")?,
            removed_component_records: map_of(
                field(m, "removed_component_records")?,
                "removed_component_records",
                component,
            )?,
            approved_component_ids: texts(
                field(m, "approved_component_ids")?,
                "approved_component_ids",
            )?,
            checks,
            check_history,
            reports,
            main_verified: field(m, "main_verified")?
                .as_bool()
                .map_or_else(|| bad("main_verified"), Ok)?,
            incomplete_replacements: texts(
                field(m, "incomplete_replacements")?,
                "incomplete_replacements",
            )?,
            failure_resolutions,
            last_sequence: field(m, "last_sequence")?
                .as_u64()
                .map_or_else(|| bad("last_sequence"), Ok)?,
            last_checksum: text(field(m, "last_checksum")?, "last_checksum")?,
            last_event_type: match field(m, "last_event_type")? {
                Value::Null => None,
                other => Some(event_type(other, "last_event_type")?),
            },
            updated_at: opt_text(field(m, "updated_at")?, "updated_at")?,
            gate: super::approval::PolicyStatus::Absent,
            breaches: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_state_round_trips() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-runs");
        assert!(root.is_dir(), "fixtures missing at {}", root.display());
        let mut seen = 0;
        for scenario in std::fs::read_dir(&root).unwrap().flatten() {
            let runs = scenario.path().join("state/runs");
            let Ok(runs) = std::fs::read_dir(runs) else {
                continue;
            };
            for run in runs.flatten() {
                let Ok(text) = std::fs::read_to_string(run.path().join("run.json")) else {
                    continue;
                };
                let cache: Value = serde_json::from_str(&text).unwrap();
                let Some(state) = cache.get("coordinator").map(|c| &c["state"]) else {
                    continue;
                };
                let restored = CoordinatorState::from_public_json(state).unwrap();
                assert_eq!(&restored.public_json(), state, "{}", run.path().display());
                seen += 1;
            }
        }
        assert!(seen >= 15, "only {seen} states");
    }

    #[test]
    fn malformed_states_are_refused() {
        assert!(CoordinatorState::from_public_json(&serde_json::json!({})).is_err());
        assert!(CoordinatorState::from_public_json(&serde_json::json!([])).is_err());
    }
}
