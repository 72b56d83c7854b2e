//! Unit tests of the topology decisions on hand-made replayed states. Every
//! accepted decision is committed back through the replay reducer.

use serde_json::{Value, json};

use super::*;
use crate::coordinator::component_refusal::ComponentRefusal as Refused;
use crate::coordinator::state::RunState;
use crate::coordinator::test_ledger::{LaneEvents, Ledger, component, ev, needs_active_run};

fn bad<T>(message: &str) -> Result<T, FlowError> {
    Err(crate::coordinator::input_refusal::refused_as(message))
}

/// "topology component does not exist", in a run whose topology is
/// `components`.
fn missing<T>(component_id: &str, components: &[&str]) -> Result<T, FlowError> {
    refused(Refused::Missing {
        component_id: component_id.into(),
        components: components.iter().map(|c| c.to_string()).collect(),
    })
}

/// A running run approving `api` and `core`, with lanes `a` and `b`.
fn two_lanes() -> Ledger {
    let mut ledger = Ledger::running(&["api", "core"]);
    ledger
        .running_lane("a", Value::Null)
        .running_lane("b", Value::Null);
    ledger
}

fn api_core(api_required: bool) -> Value {
    json!([
        component("api", "a", api_required, &["unit"], &["core"]),
        component("core", "b", true, &["lint"], &[]),
    ])
}

fn register(ledger: &Ledger, components: &Value) -> Result<Vec<Intent>, FlowError> {
    decide_register(&ledger.state, &ledger.policy, components, &ev("topology"))
}

fn with(mut value: Value, index: usize, key: &str, item: Value) -> Value {
    value[index][key] = item;
    value
}

#[test]
fn register_writes_the_sorted_snapshot() {
    let mut ledger = two_lanes();
    let input = json!([
        component("core", "b", true, &[], &[]),
        component("api", "a", false, &["unit"], &["core"]),
    ]);
    let intents = register(&ledger, &input).unwrap();
    assert_eq!(intents.len(), 1);
    let intent = &intents[0];
    assert_eq!(intent.event_type, "topology_registered");
    assert_eq!(intent.timestamp, None);
    assert_eq!(intent.reason, None);
    assert_eq!(intent.lane_id, None);
    assert_eq!(
        intent.metadata["components"],
        json!([input[1].clone(), input[0].clone()])
    );
    ledger.commit(intents);
    assert_eq!(
        ledger.state.topology().keys().collect::<Vec<_>>(),
        ["api", "core"]
    );
}

#[test]
fn register_needs_a_running_run_before_validation() {
    let mut ledger = Ledger::running(&["api"]);
    ledger.run_step("run_failed", "running", "failed");
    assert_eq!(
        register(&ledger, &json!([])),
        Err(needs_active_run(RunState::Failed))
    );
    assert_eq!(
        precheck_register(&json!([])),
        bad("lifecycle transition requires evidence")
    );
    assert_eq!(precheck_register(&ev("x")), Ok(()));
}

#[test]
fn register_validates_in_the_reference_order() {
    let ledger = two_lanes();
    let good = api_core(true);
    let cases: Vec<(Value, &str)> = vec![
        (json!([]), "topology component count is outside the limit"),
        (
            json!(
                (0..9)
                    .map(|i| component(&format!("c{i}"), "a", true, &[], &[]))
                    .collect::<Vec<_>>()
            ),
            "topology component count is outside the limit",
        ),
        (
            with(good.clone(), 0, "extra", json!(1)),
            "component metadata fields do not match contract",
        ),
        (
            with(good.clone(), 0, "required", json!("yes")),
            "component required must be a boolean",
        ),
        (
            with(good.clone(), 0, "description", json!("")),
            "component description is invalid",
        ),
        (
            with(good.clone(), 0, "required_checks", json!(["bad id"])),
            "component required_checks must match the identifier contract",
        ),
        (
            with(good.clone(), 0, "dependencies", json!("core")),
            "component dependencies exceeds its limit",
        ),
        (
            with(good.clone(), 0, "required_checks", json!(["unit", "unit"])),
            "component required_checks contains duplicates",
        ),
        (
            with(good.clone(), 0, "evidence_refs", ev("early")),
            "topology snapshot evidence_refs must be empty",
        ),
        (
            with(good.clone(), 1, "id", json!("api")),
            "duplicate component id: api",
        ),
        (
            with(good.clone(), 0, "owner_lane", json!("ghost")),
            "unknown topology owner lane: ghost",
        ),
        (
            with(good.clone(), 0, "coverage_state", json!("covered")),
            "registered topology must begin without coverage evidence",
        ),
        (
            with(good.clone(), 0, "coverage_state", json!("partial")),
            "registered topology must begin without coverage evidence",
        ),
        (
            json!([good[0].clone()]),
            "topology must match the approved component snapshot",
        ),
        (
            with(good.clone(), 1, "id", json!("extra")),
            "topology must match the approved component snapshot",
        ),
        (
            with(good.clone(), 0, "dependencies", json!(["zz", "core", "yy"])),
            "unknown component dependencies: yy, zz",
        ),
        (
            with(good.clone(), 1, "dependencies", json!(["api"])),
            "topology dependency cycle",
        ),
        (
            with(good.clone(), 1, "dependencies", json!(["core"])),
            "topology dependency cycle",
        ),
    ];
    // The order of the rules is the table's: each row is refused with its
    // message (a typed reason, or a component rule of the receipt contract).
    for (input, message) in cases {
        let refused = register(&ledger, &input).unwrap_err();
        assert_eq!(
            (refused.classify().0, refused.message().as_ref()),
            (2, message),
            "{input}"
        );
    }
    assert!(register(&ledger, &good).is_ok());
}

#[test]
fn a_diamond_is_not_a_cycle() {
    let mut ledger = Ledger::running(&["a", "b", "c", "d"]);
    ledger.running_lane("l", Value::Null);
    let input = json!([
        component("a", "l", true, &[], &["b", "c"]),
        component("b", "l", true, &[], &["d"]),
        component("c", "l", true, &[], &["d"]),
        component("d", "l", true, &[], &[]),
    ]);
    assert!(register(&ledger, &input).is_ok());
    let cyclic = with(input, 3, "dependencies", json!(["a"]));
    assert_eq!(register(&ledger, &cyclic), bad("topology dependency cycle"));
}

#[test]
fn reregistration_keeps_coverage_checks_and_may_promote() {
    let mut ledger = two_lanes();
    let first = register(&ledger, &api_core(false)).unwrap();
    ledger.commit(first);
    ledger
        .step("lane_completed", "b", "running", "completed")
        .check("core", "lint", true)
        .cover("core");
    // Promote api to required and change its owner and checks.
    let again = json!([
        component("api", "b", true, &["unit", "e2e"], &["core"]),
        component("core", "b", true, &["lint"], &[]),
    ]);
    let intents = register(&ledger, &again).unwrap();
    ledger.commit(intents);
    let core = &ledger.state.topology()["core"];
    assert_eq!(core.coverage_state, CoverageState::Covered);
    assert!(!core.evidence_refs.is_empty());
    assert!(ledger.state.checks()["core"]["lint"]);
    assert!(ledger.state.topology()["api"].required);
    assert_eq!(ledger.state.topology()["api"].owner_lane, "b");
}

#[test]
fn reregistration_cannot_demote_a_required_component() {
    let mut ledger = two_lanes();
    let first = register(&ledger, &api_core(true)).unwrap();
    ledger.commit(first);
    assert_eq!(
        register(&ledger, &api_core(false)),
        refused(Refused::required_kept("api", false))
    );
    // The snapshot rules still answer first (exit 2 before exit 5).
    let demoted_and_bad = with(api_core(false), 0, "owner_lane", json!("ghost"));
    assert_eq!(
        register(&ledger, &demoted_and_bad),
        crate::coordinator::decide::invalid(InputRefusal::UnknownOwnerLane {
            owner: "ghost".into()
        })
    );
}

#[test]
fn reregistration_cannot_drop_a_required_component() {
    // Only an approved set that changed behind the receipt's back
    // (`_run.component_ids` is not hashed) lets a snapshot leave a
    // registered id out; a required one is still refused.
    let mut ledger = two_lanes();
    let first = register(&ledger, &api_core(true)).unwrap();
    ledger.commit(first);
    let mut shrunk = ledger.state.clone();
    shrunk.approved_component_ids = vec!["core".into()];
    let only_core = json!([component("core", "b", true, &["lint"], &[])]);
    assert_eq!(
        decide_register(&shrunk, &ledger.policy, &only_core, &ev("t")),
        refused(Refused::required_kept("api", true))
    );
}

// ---------------------------------------------------------------- remove

#[test]
fn remove_prechecks() {
    let e = ev("r");
    assert_eq!(
        precheck_remove("../x", &e, "why"),
        bad("component id must match the identifier contract")
    );
    assert_eq!(
        precheck_remove("docs", &json!([]), "why"),
        bad("lifecycle transition requires evidence")
    );
    for blank in ["", "  \t\n", "\u{1f}\u{3000}"] {
        assert_eq!(
            precheck_remove("docs", &e, blank),
            bad("topology component removal requires a reason")
        );
    }
    assert_eq!(precheck_remove("docs", &e, "deferred"), Ok(()));
}

/// `api` (required, depends on core), `core` (required), `docs` (optional
/// leaf), `guide` (optional, depended on by docs).
fn four_components() -> Ledger {
    let mut ledger = Ledger::running(&["api", "core", "docs", "guide"]);
    ledger.running_lane("a", Value::Null).topology(json!([
        component("api", "a", true, &[], &["core"]),
        component("core", "a", true, &[], &[]),
        component("docs", "a", false, &[], &["guide"]),
        component("guide", "a", false, &[], &[]),
    ]));
    ledger
}

#[test]
fn remove_an_optional_leaf_with_its_reason() {
    let mut ledger = four_components();
    let intents = decide_remove(&ledger.state, "docs", "deferred", &ev("r")).unwrap();
    assert_eq!(intents[0].event_type, "topology_component_removed");
    assert_eq!(intents[0].reason.as_deref(), Some("deferred"));
    assert_eq!(intents[0].metadata["component_id"], "docs");
    assert_eq!(intents[0].timestamp, None);
    ledger.commit(intents);
    assert_eq!(ledger.state.removed_components(), ["docs"]);
    // Now guide is a leaf.
    assert!(decide_remove(&ledger.state, "guide", "deferred", &ev("r2")).is_ok());
    // A removed component cannot be removed again.
    assert_eq!(
        decide_remove(&ledger.state, "docs", "again", &ev("r3")),
        missing("docs", &["api", "core", "guide"])
    );
}

#[test]
fn remove_refusals() {
    let ledger = four_components();
    let e = ev("r");
    let dependents = |id: &str, on: &str| refused(Refused::has_dependents(id, vec![on.into()]));
    for (component, refusal) in [
        ("ghost", missing("ghost", &["api", "core", "docs", "guide"])),
        ("guide", dependents("guide", "docs")),
        // Dependents are named before the required rule.
        ("core", dependents("core", "api")),
        (
            "api",
            refused(Refused::Required {
                component_id: "api".into(),
            }),
        ),
    ] {
        assert_eq!(
            decide_remove(&ledger.state, component, "x", &e),
            refusal,
            "{component}"
        );
    }
    assert_eq!(
        FlowError::from(Refused::has_dependents("core", vec!["api".into()])).message(),
        "topology component still has dependents: api"
    );
    let mut stopped = four_components();
    stopped.run_step("run_blocked", "running", "blocked");
    assert_eq!(
        decide_remove(&stopped.state, "docs", "x", &e),
        Err(needs_active_run(RunState::Blocked))
    );
}

// ---------------------------------------------------------------- check-result

fn check_input(passed: Value, reason: Option<Value>) -> Value {
    let mut input = json!({"component_id": "core", "check_id": "lint", "passed": passed});
    if let Some(reason) = reason {
        input["reason"] = reason;
    }
    input
}

#[test]
fn check_result_prechecks() {
    let e = ev("c");
    assert_eq!(
        precheck_check_result(&json!({"component_id": "core", "check_id": "lint"}), &e),
        bad("JSON input fields do not match the command contract")
    );
    assert_eq!(
        precheck_check_result(
            &json!({"component_id": "core", "check_id": "lint", "passed": true, "x": 1}),
            &e
        ),
        bad("JSON input fields do not match the command contract")
    );
    let mut input = check_input(json!(true), None);
    input["component_id"] = json!("bad id");
    assert_eq!(
        precheck_check_result(&input, &e),
        bad("component id must match the identifier contract")
    );
    let mut input = check_input(json!(true), None);
    input["check_id"] = json!(7);
    assert_eq!(
        precheck_check_result(&input, &e),
        bad("check id must match the identifier contract")
    );
    assert_eq!(
        precheck_check_result(&check_input(json!(1), None), &e),
        bad("check result passed must be a boolean")
    );
    assert_eq!(
        precheck_check_result(&check_input(json!(true), None), &json!([])),
        bad("lifecycle transition requires evidence")
    );
    let ok = precheck_check_result(&check_input(json!(false), Some(json!("flaky"))), &e).unwrap();
    assert_eq!(ok.reason, json!("flaky"));
    assert!(!ok.passed);
}

fn checked() -> Ledger {
    let mut ledger = Ledger::running(&["core"]);
    ledger
        .running_lane("b", Value::Null)
        .required("core", "b", &["lint"]);
    ledger
}

/// `checked()` after a heartbeat of lane b carrying `beat`.
fn checked_after_heartbeat(beat: &Value) -> Ledger {
    let mut ledger = checked();
    ledger.heartbeat("b", beat.clone());
    ledger
}

fn result(
    ledger: &Ledger,
    passed: bool,
    reason: Value,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    let request = CheckResult {
        component_id: "core".into(),
        check_id: "lint".into(),
        passed,
        reason,
    };
    decide_check_result(&ledger.state, &request, evidence)
}

#[test]
fn a_failed_check_then_a_passed_one_with_history() {
    let mut ledger = checked();
    let failed_ev = ev("lint: 3 warnings");
    let intents = result(&ledger, false, json!("warnings"), &failed_ev).unwrap();
    assert_eq!(intents[0].event_type, "check_failed");
    assert_eq!(intents[0].metadata["component_id"], "core");
    assert_eq!(intents[0].metadata["check_id"], "lint");
    assert_eq!(intents[0].reason.as_deref(), Some("warnings"));
    ledger.commit(intents);
    assert!(!ledger.state.checks()["core"]["lint"]);
    // The same failure again is a duplicate.
    assert_eq!(
        result(&ledger, false, json!("warnings"), &failed_ev),
        refused(Refused::DuplicateCheck {
            component_id: "core".into(),
            check_id: "lint".into()
        })
    );
    let unexplained = |evidence| {
        refused(Refused::RecoveryUnexplained {
            component_id: "core".into(),
            check_id: "lint".into(),
            evidence,
        })
    };
    // A recovery needs a non-blank reason...
    let fixed = ev("lint clean");
    for reason in [Value::Null, json!(""), json!(" \n"), json!(5)] {
        assert_eq!(result(&ledger, true, reason, &fixed), unexplained(false));
    }
    // ... and evidence other than the failure's.
    assert_eq!(
        result(&ledger, true, json!("fixed"), &failed_ev),
        unexplained(true)
    );
    let intents = result(&ledger, true, json!("fixed the warnings"), &fixed).unwrap();
    assert_eq!(intents[0].event_type, "check_passed");
    ledger.commit(intents);
    assert!(ledger.state.checks()["core"]["lint"]);
    assert_eq!(ledger.state.check_history()["core"]["lint"].len(), 2);
    // Last write wins: it may fail again (no reason needed).
    let intents = result(&ledger, false, Value::Null, &ev("lint regressed")).unwrap();
    ledger.commit(intents);
    assert!(!ledger.state.checks()["core"]["lint"]);
    assert_eq!(ledger.state.check_history()["core"]["lint"].len(), 3);
}

#[test]
fn check_result_refusals() {
    let ledger = checked();
    let e = ev("c");
    // A check the component does not register; a component that does not
    // exist (no checks to list).
    for (component, check, required_checks) in [
        ("core", "unit", Some(vec!["lint".to_string()])),
        ("ghost", "lint", None),
    ] {
        let request = CheckResult {
            component_id: component.into(),
            check_id: check.into(),
            passed: true,
            reason: Value::Null,
        };
        assert_eq!(
            decide_check_result(&ledger.state, &request, &e),
            refused(Refused::CheckNotRegistered {
                component_id: component.into(),
                check_id: check.into(),
                components: vec!["core".into()],
                required_checks,
            })
        );
    }
    // A first result with a non-string reason fails the receipt contract.
    assert_eq!(
        result(&ledger, true, json!(["why"]), &e),
        bad("receipt reason must be at most 500 characters")
    );
}

#[test]
fn a_passing_check_never_rests_on_liveness_evidence() {
    // Our rule (DEVIATIONS 99; the reference records it): a heartbeat
    // proves that an agent was alive, not that a check passed. A failing
    // result satisfies nothing and may cite it.
    let beat = ev("heartbeat");
    let ledger = checked_after_heartbeat(&beat);
    let refused = result(&ledger, true, Value::Null, &beat).unwrap_err();
    assert_eq!(
        refused,
        crate::coordinator::input_refusal::refused_as("liveness evidence cannot pass a check")
    );
    let hint = refused.teaching().and_then(|t| t.hint.clone()).unwrap();
    assert!(hint.contains("check lint of component core"), "{hint}");
    assert!(result(&ledger, false, Value::Null, &beat).is_ok());
    assert!(result(&ledger, true, Value::Null, &ev("lint green")).is_ok());
}

// ---------------------------------------------------------------- component-evidence

#[test]
fn component_evidence_prechecks() {
    assert_eq!(
        precheck_component_evidence(&json!({"component_id": "core"})),
        Ok("core".into())
    );
    for input in [json!({}), json!({"component_id": "core", "reason": "x"})] {
        assert_eq!(
            precheck_component_evidence(&input),
            bad("JSON input fields do not match the command contract")
        );
    }
    assert_eq!(
        precheck_component_evidence(&json!({"component_id": ""})),
        bad("component id must match the identifier contract")
    );
}

#[test]
fn component_evidence_covers_a_component_once() {
    let mut ledger = checked();
    ledger
        .step("lane_completed", "b", "running", "completed")
        .check("core", "lint", true);
    let evidence = ev("core verified");
    let intents = decide_component_evidence(&ledger.state, "core", &evidence).unwrap();
    assert_eq!(intents[0].event_type, "evidence_attached");
    assert_eq!(
        Value::Object(intents[0].metadata.clone()),
        json!({"component_id": "core", "coverage_state": "covered"})
    );
    ledger.commit(intents);
    assert_eq!(
        ledger.state.topology()["core"].coverage_state,
        CoverageState::Covered
    );
    assert_eq!(
        decide_component_evidence(&ledger.state, "core", &ev("again")),
        refused(Refused::Covered {
            component_id: "core".into()
        })
    );
}

#[test]
fn component_evidence_refusals_in_order() {
    let beat = ev("still alive");
    let mut ledger = checked_after_heartbeat(&beat);
    let e = ev("core verified");
    // Evidence rules come before the component rules.
    assert_eq!(
        decide_component_evidence(&ledger.state, "ghost", &json!([])),
        bad("lifecycle transition requires evidence")
    );
    assert_eq!(
        decide_component_evidence(&ledger.state, "ghost", &beat),
        bad("liveness evidence cannot satisfy completion evidence")
    );
    assert_eq!(
        decide_component_evidence(&ledger.state, "ghost", &e),
        missing("ghost", &["core"])
    );
    assert_eq!(
        decide_component_evidence(&ledger.state, "core", &e),
        refused(Refused::OwnerNotCompleted {
            component_id: "core".into(),
            owner_lane: "b".into(),
            lane_state: Some(LaneState::Running)
        })
    );
    ledger.step("lane_completed", "b", "running", "completed");
    let lint_not_passed = refused(Refused::ChecksNotPassed {
        component_id: "core".into(),
        checks: vec!["lint".into()],
    });
    assert_eq!(
        decide_component_evidence(&ledger.state, "core", &e),
        lint_not_passed
    );
    ledger.check("core", "lint", false);
    assert_eq!(
        decide_component_evidence(&ledger.state, "core", &e),
        lint_not_passed
    );
    ledger.check("core", "lint", true);
    assert!(decide_component_evidence(&ledger.state, "core", &e).is_ok());
}

#[test]
fn a_failed_but_resolved_owner_does_not_qualify() {
    let mut ledger = Ledger::running(&["core"]);
    ledger
        .failed_lane("b", ev("failed"))
        .required("core", "b", &[]);
    assert_eq!(
        decide_component_evidence(&ledger.state, "core", &ev("x")),
        refused(Refused::OwnerNotCompleted {
            component_id: "core".into(),
            owner_lane: "b".into(),
            lane_state: Some(LaneState::Failed)
        })
    );
}
