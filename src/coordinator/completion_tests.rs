//! Unit tests of the completion evaluation and the `complete` decision on
//! hand-made replayed states: every missing-item kind alone (where the
//! rules allow it) and combined, the sorting, and the gate.

use serde_json::{Value, json};

use super::*;
use crate::coordinator::test_ledger::{LaneEvents, Ledger, component, ev};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A run whose one required component `runtime` (owner `build`, check
/// `unit`) is fully covered: only main verification is missing.
fn covered() -> Ledger {
    let mut ledger = registered(&["unit"]);
    ledger.check("runtime", "unit", true).cover("runtime");
    ledger
}

/// Lane `build` completed, owning the one required component `runtime`
/// with `checks`; nothing checked or covered yet.
fn registered(checks: &[&str]) -> Ledger {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .completed_lane("build", ev("build done"))
        .required("runtime", "build", checks);
    ledger
}

/// Lane `build` completed, required `runtime` covered and optional `docs`
/// (with `docs_checks`, none passed) registered.
fn covered_with_optional_docs(docs_checks: &[&str]) -> Ledger {
    let mut ledger = Ledger::running(&["runtime", "docs"]);
    ledger
        .completed_lane("build", ev("build done"))
        .topology(json!([
            component("runtime", "build", true, &[], &[]),
            component("docs", "build", false, docs_checks, &[]),
        ]))
        .cover("runtime");
    ledger
}

/// The report misses exactly these components, lanes and checks, so the
/// run is not complete.
#[track_caller]
fn assert_missing_only(
    report: &CompletionReport,
    components: &[&str],
    lanes: &[&str],
    failed_checks: &[&str],
) {
    assert_eq!(report.missing_components, strings(components));
    assert_eq!(report.missing_lanes, strings(lanes));
    assert_eq!(report.failed_checks, strings(failed_checks));
    assert!(!report.complete);
}

fn nothing_missing_but_verification() -> CompletionReport {
    CompletionReport {
        missing_main_verification: true,
        ..CompletionReport::default()
    }
}

#[test]
fn only_main_verification_is_missing() {
    let ledger = covered();
    assert_eq!(
        evaluate_completion(&ledger.state),
        nothing_missing_but_verification()
    );
    let done = evaluate(&ledger.state, true);
    assert!(done.complete);
    assert_eq!(done.missing_ids(), Vec::<String>::new());
}

#[test]
fn the_report_has_the_reference_keys() {
    let keys: Vec<String> = evaluate_completion(&covered().state)
        .to_json()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        strings(&[
            "complete",
            "failed_checks",
            "incomplete_replacements",
            "missing_components",
            "missing_lanes",
            "missing_main_verification",
            "resolved_failed_lanes",
            "unresolved_failed_lanes",
        ])
    );
}

#[test]
fn an_approved_component_never_registered_is_missing_alone() {
    // No lanes, no topology: the approved component is the only gap.
    let ledger = Ledger::running(&["runtime"]);
    let report = evaluate(&ledger.state, true);
    assert_missing_only(&report, &["runtime"], &[], &[]);
    assert_eq!(report.missing_ids(), strings(&["runtime"]));
}

#[test]
fn an_uncovered_required_component_is_missing_alone() {
    let ledger = registered(&[]);
    assert_missing_only(&evaluate(&ledger.state, true), &["runtime"], &[], &[]);
}

#[test]
fn a_not_yet_completed_lane_is_missing_alone() {
    // A lane that owns no component still holds completion back.
    let mut ledger = covered();
    ledger.running_lane("docs", Value::Null);
    assert_missing_only(&evaluate(&ledger.state, true), &[], &["docs"], &[]);
}

#[test]
fn every_lane_state_but_completed_is_missing() {
    let mut ledger = covered();
    ledger
        .lane("pending", Value::Null)
        .running_lane("blocked", Value::Null)
        .end_lane("lane_blocked", "blocked", "blocked", ev("blocked"))
        .running_lane("cancelled", Value::Null)
        .end_lane("lane_cancelled", "cancelled", "cancelled", ev("cancelled"));
    let report = evaluate_completion(&ledger.state);
    assert_eq!(
        report.missing_lanes,
        strings(&["blocked", "cancelled", "pending"])
    );
    assert!(report.unresolved_failed_lanes.is_empty());
}

#[test]
fn a_failed_check_is_missing_alone() {
    // Covered first, then the check fails again: last write wins.
    let mut ledger = covered();
    ledger.check("runtime", "unit", false);
    assert_missing_only(&evaluate(&ledger.state, true), &[], &[], &["runtime:unit"]);
    // ... and passes again.
    ledger.check("runtime", "unit", true);
    assert!(evaluate(&ledger.state, true).complete);
}

#[test]
fn a_never_run_check_is_a_failed_check() {
    let mut ledger = registered(&["unit", "lint"]);
    ledger.check("runtime", "unit", true);
    assert_eq!(
        evaluate_completion(&ledger.state).failed_checks,
        strings(&["runtime:lint"])
    );
}

#[test]
fn optional_components_are_ignored() {
    let ledger = covered_with_optional_docs(&["spell"]);
    let report = evaluate(&ledger.state, true);
    assert!(report.complete, "{report:?}");
}

#[test]
fn an_unresolved_failed_lane_is_missing() {
    let mut ledger = covered();
    ledger.failed_lane("review", ev("review failed"));
    let report = evaluate(&ledger.state, true);
    assert_eq!(report.unresolved_failed_lanes, strings(&["review"]));
    assert_eq!(report.missing_lanes, strings(&["review"]));
    assert!(report.resolved_failed_lanes.is_empty());
    assert!(!report.complete);
    assert_eq!(report.missing_ids(), strings(&["review"]));
}

/// `covered()` plus `review` failed and `rereview` (its child) completed.
fn failed_and_rereviewed() -> Ledger {
    let mut ledger = covered();
    ledger
        .failed_lane("review", ev("review failed"))
        .completed_child("rereview", "review", ev("rereview passed"));
    ledger
}

#[test]
fn a_resolved_failed_lane_no_longer_blocks() {
    let mut ledger = failed_and_rereviewed();
    // Completed but not yet linked: still unresolved.
    assert_eq!(
        evaluate_completion(&ledger.state).unresolved_failed_lanes,
        strings(&["review"])
    );
    let binding = json!([
        {"kind": "review", "summary": "failure",
         "checksum": canonical::digest(&ev("review failed"))},
        {"kind": "review", "summary": "correction",
         "checksum": canonical::digest(&ev("rereview passed"))},
    ]);
    ledger.raw(
        "candidate_validated",
        json!({"lane_id": "review", "agent_id": "agent-review",
               "from_state": "failed", "to_state": "failed", "evidence_refs": binding,
               "metadata": {"candidate_kind": "failed_lane_resolution",
                            "original_lane_id": "review", "resolution_lane_id": "rereview",
                            "original_evidence_digest": canonical::digest(&ev("review failed")),
                            "resolution_evidence_digest": canonical::digest(&ev("rereview passed"))}}),
    );
    let report = evaluate(&ledger.state, true);
    assert_eq!(report.resolved_failed_lanes, strings(&["review"]));
    assert!(report.unresolved_failed_lanes.is_empty());
    assert!(report.missing_lanes.is_empty());
    assert!(report.complete, "{report:?}");
    // The failed lane stays failed history.
    assert_eq!(
        ledger.state.lane("review").unwrap().state,
        LaneState::Failed
    );
}

#[test]
fn a_removed_required_component_blocks_forever() {
    // Only a hand-written (or reference-written) receipt can remove a
    // required component; our topology-remove refuses it.
    let mut ledger = covered();
    ledger.raw(
        "topology_component_removed",
        json!({"reason": "dropped", "metadata": {"component_id": "runtime"}}),
    );
    let report = evaluate(&ledger.state, true);
    assert_eq!(report.missing_components, strings(&["runtime"]));
    assert!(report.failed_checks.is_empty());
    assert!(!report.complete);
}

#[test]
fn a_removed_optional_component_is_not_missing() {
    let mut ledger = covered_with_optional_docs(&[]);
    ledger.raw(
        "topology_component_removed",
        json!({"reason": "later", "metadata": {"component_id": "docs"}}),
    );
    assert!(evaluate(&ledger.state, true).complete);
}

#[test]
fn an_incomplete_replacement_is_missing_with_its_lane() {
    // A lone lane_reassigned (no child) leaves the original `replaced` and
    // the reservation incomplete: it is a missing lane as well, so this
    // kind can never be the only gap.
    let mut ledger = covered();
    ledger
        .running_lane("parser", Value::Null)
        .step("stall_suspected", "parser", "running", "suspected_stall")
        .raw(
            "probe_sent",
            json!({"lane_id": "parser", "from_state": "suspected_stall",
                   "to_state": "recovering",
                   "metadata": {"probe_deadline": "2026-07-14T01:07:00Z"}}),
        )
        .step("agent_interrupted", "parser", "recovering", "recovering")
        .raw(
            "lane_reassigned",
            json!({"lane_id": "parser", "from_state": "recovering", "to_state": "replaced",
                   "metadata": {"replacement_lane_id": "parser-2", "replacement_count": 1}}),
        );
    let report = evaluate(&ledger.state, true);
    assert_eq!(report.incomplete_replacements, strings(&["parser"]));
    assert_eq!(report.missing_lanes, strings(&["parser"]));
    assert!(!report.complete);
    assert_eq!(report.missing_ids(), strings(&["parser", "parser"]));
}

#[test]
fn everything_missing_at_once_is_sorted_and_ordered() {
    let mut ledger = Ledger::running(&["zeta", "alpha", "mid"]);
    ledger
        .running_lane("z-lane", Value::Null)
        .failed_lane("a-lane", ev("a failed"))
        .topology(json!([
            component("zeta", "z-lane", true, &["unit", "e2e"], &[]),
            component("alpha", "a-lane", true, &["lint"], &[]),
            component("mid", "z-lane", false, &["x"], &[]),
        ]));
    let report = evaluate_completion(&ledger.state);
    assert_eq!(report.missing_lanes, strings(&["a-lane", "z-lane"]));
    assert_eq!(report.unresolved_failed_lanes, strings(&["a-lane"]));
    assert_eq!(report.missing_components, strings(&["alpha", "zeta"]));
    assert_eq!(
        report.failed_checks,
        strings(&["alpha:lint", "zeta:e2e", "zeta:unit"])
    );
    assert!(report.missing_main_verification);
    assert!(!report.complete);
    assert_eq!(
        report.missing_ids(),
        strings(&[
            "a-lane",
            "z-lane",
            "alpha",
            "zeta",
            "alpha:lint",
            "zeta:e2e",
            "zeta:unit"
        ])
    );
}

#[test]
fn missing_ids_are_capped_at_64() {
    // 60 lanes (the reducer's limit is 64) and 8 approved components.
    let components: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let names: Vec<&str> = components.iter().map(String::as_str).collect();
    let mut ledger = Ledger::running(&names);
    for i in 0..60 {
        ledger.lane(&format!("lane-{i:02}"), Value::Null);
    }
    let report = evaluate(&ledger.state, true);
    assert_eq!(report.missing_lanes.len(), 60);
    assert_eq!(report.missing_components.len(), 8);
    let ids = report.missing_ids();
    assert_eq!(ids.len(), MAX_MISSING_IDS);
    assert_eq!(ids[0], "lane-00");
    assert_eq!(ids[59], "lane-59");
    assert_eq!(ids[60..], strings(&["c0", "c1", "c2", "c3"]));
}

// ---------------------------------------------------------------- complete

#[test]
fn complete_records_verification_and_completion_together() {
    let mut ledger = covered();
    let evidence = ev("main verified the integrated result");
    let intents = decide_complete(&ledger.state, &evidence).unwrap();
    assert_eq!(intents.len(), 2);
    assert_eq!(intents[0].event_type, "main_verification");
    assert_eq!(intents[0].from_state, None);
    assert_eq!(intents[1].event_type, "run_completed");
    assert_eq!(intents[1].from_state.map(|s| s.as_str()), Some("running"));
    assert_eq!(intents[1].to_state.map(|s| s.as_str()), Some("completed"));
    assert!(intents.iter().all(|i| i.evidence_refs == evidence));
    assert!(intents.iter().all(|i| i.timestamp.is_none()));
    ledger.commit(intents);
    assert_eq!(ledger.state.run_state(), "completed");
    assert!(evaluate_completion(&ledger.state).complete);
}

#[test]
fn complete_is_blocked_with_the_missing_ids() {
    let mut ledger = covered();
    ledger.running_lane("docs", Value::Null);
    assert_eq!(
        decide_complete(&ledger.state, &ev("verified")),
        Err(ErrorKind::CompletionBlocked {
            message: "required workflow completion evidence is missing".into(),
            missing_ids: strings(&["docs"]),
            breaches: Vec::new(),
        }
        .into())
    );
}

#[test]
fn complete_needs_a_running_run_first() {
    let mut ledger = covered();
    ledger.run_step("run_recovery_started", "running", "recovering");
    // Run state is checked before the evidence (even empty evidence).
    assert_eq!(
        decide_complete(&ledger.state, &json!([])),
        Err(crate::coordinator::decide::lane_refused::run_state(
            crate::coordinator::state::RunState::Recovering,
            &[crate::coordinator::state::RunState::Running]
        ))
    );
}

#[test]
fn complete_refuses_missing_and_liveness_evidence_before_evaluating() {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger.running_lane("build", Value::Null);
    // Not complete at all, yet the evidence rules answer first.
    assert_eq!(
        decide_complete(&ledger.state, &json!([])),
        Err(crate::coordinator::input_refusal::refused_as(
            "lifecycle transition requires evidence"
        ))
    );
    let beat = ev("agent-1 still alive");
    ledger.heartbeat("build", beat.clone());
    assert_eq!(
        decide_complete(&ledger.state, &beat),
        Err(crate::coordinator::input_refusal::refused_as(
            "liveness evidence cannot satisfy completion evidence"
        ))
    );
}

#[test]
fn completion_evidence_rules() {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .running_lane("a", Value::Null)
        .running_lane("b", Value::Null);
    let old = ev("older heartbeat");
    let latest = ev("latest heartbeat");
    ledger
        .heartbeat("a", old.clone())
        .heartbeat("a", latest.clone());
    // Any lane's liveness evidence, old or latest, is refused.
    for evidence in [&old, &latest] {
        assert_eq!(
            require_completion_evidence(&ledger.state, evidence),
            Err(crate::coordinator::input_refusal::refused_as(
                "liveness evidence cannot satisfy completion evidence"
            ))
        );
    }
    // Invalid evidence is refused by its own rule first.
    assert!(matches!(
        require_completion_evidence(&ledger.state, &json!([{"kind": "test"}])).map_err(FlowError::into_kind),
        Err(ErrorKind::Contract(m)) if m != "liveness evidence cannot satisfy completion evidence"
    ));
    let fresh = ev("integration tests passed");
    assert_eq!(
        require_completion_evidence(&ledger.state, &fresh),
        Ok(canonical::digest(&fresh))
    );
}
