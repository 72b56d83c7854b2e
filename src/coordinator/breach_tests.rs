//! Our rules applied by replay to events any writer appended
//! (contracts/rules.md): each breaking event is recorded, never refused, and
//! never changes what the reference's rules make of the state.

use serde_json::{Value, json};

use super::super::ReplayPolicy;
use super::super::approval::{ApprovalPolicy, PolicyStatus};
use super::super::state::CoordinatorState;
use super::super::test_ledger::{LaneEvents, Ledger, component, ev};
use super::*;

fn rules(ledger: &Ledger) -> Vec<&str> {
    ledger
        .state
        .breaches()
        .iter()
        .map(|b| b.rule.as_str())
        .collect()
}

/// A running lane `a` that has sent two heartbeats, with evidence `hb 1`
/// then `hb 2`.
fn lane_with_two_heartbeats() -> Ledger {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .running_lane("a", Value::Null)
        .heartbeat("a", ev("hb 1"))
        .heartbeat("a", ev("hb 2"));
    ledger
}

#[test]
fn completing_a_lane_with_any_heartbeats_evidence_is_a_breach() {
    let mut ledger = lane_with_two_heartbeats();
    assert!(rules(&ledger).is_empty());
    // The older heartbeat's evidence (the reference checks the latest only).
    ledger.end_lane("lane_completed", "a", "completed", ev("hb 1"));
    assert_eq!(rules(&ledger), [LIVENESS_AS_COMPLETION]);
    let breach = &ledger.state.breaches()[0];
    assert_eq!(breach.sequence, ledger.state.last_sequence());
    // Recorded, not refused: the lane is completed as the reference says.
    assert_eq!(ledger.state.lanes()["a"].state.as_str(), "completed");
    // Fresh evidence on another lane is fine; another lane's heartbeat is not.
    ledger.completed_lane("b", ev("done b"));
    assert_eq!(rules(&ledger).len(), 1);
    ledger.completed_lane("c", ev("hb 2"));
    assert_eq!(
        rules(&ledger),
        [LIVENESS_AS_COMPLETION, LIVENESS_AS_COMPLETION]
    );
}

#[test]
fn liveness_evidence_renews_a_lease_once() {
    let mut ledger = lane_with_two_heartbeats();
    assert!(rules(&ledger).is_empty());
    ledger.heartbeat("a", ev("hb 1"));
    assert_eq!(rules(&ledger), [LIVENESS_REUSED]);
}

/// A lane `a` suspected of a stall and probed.
fn probed_lane() -> Ledger {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .running_lane("a", Value::Null)
        .step("stall_suspected", "a", "running", "suspected_stall")
        .step("probe_sent", "a", "suspected_stall", "recovering");
    ledger
}

#[test]
fn an_interrupted_agent_acknowledging_the_probe_is_a_breach() {
    let mut ledger = probed_lane();
    let mut acked = probed_lane();
    acked.step("probe_acknowledged", "a", "recovering", "running");
    assert!(rules(&acked).is_empty(), "a probe ack before an interrupt");
    ledger
        .step("agent_interrupted", "a", "recovering", "recovering")
        .step("probe_acknowledged", "a", "recovering", "running");
    assert_eq!(rules(&ledger), [INTERRUPTED_PROBE_ACK]);
}

#[test]
fn required_components_stay_until_covered() {
    let mut ledger = Ledger::running(&["runtime", "cli"]);
    ledger.topology(json!([
        component("runtime", "main", true, &[], &[]),
        component("cli", "main", false, &[], &[]),
    ]));
    assert!(rules(&ledger).is_empty());
    // Demoted, then dropped.
    ledger.topology(json!([
        component("runtime", "main", false, &[], &[]),
        component("cli", "main", false, &[], &[]),
    ]));
    assert_eq!(rules(&ledger), [REQUIRED_COMPONENT_DROPPED]);
    let mut dropped = Ledger::running(&["runtime"]);
    dropped
        .required("runtime", "main", &[])
        .topology(json!([component("other", "main", false, &[], &[])]));
    assert_eq!(rules(&dropped), [REQUIRED_COMPONENT_DROPPED]);
    // Removing an optional component is fine, a required one is not.
    let mut removed = Ledger::running(&["runtime", "cli"]);
    removed
        .topology(json!([
            component("runtime", "main", true, &[], &[]),
            component("cli", "main", false, &[], &[]),
        ]))
        .raw(
            "topology_component_removed",
            json!({"metadata": {"component_id": "cli"}, "reason": "r"}),
        );
    assert!(rules(&removed).is_empty());
    removed.raw(
        "topology_component_removed",
        json!({"metadata": {"component_id": "runtime"}, "reason": "r"}),
    );
    assert_eq!(rules(&removed), [REQUIRED_COMPONENT_REMOVED]);
}

fn policy(value: Value) -> ApprovalPolicy {
    ApprovalPolicy::from_input(&value, None).unwrap()
}

/// A planned run created under `policy`, replayed with its file `file`.
fn gated(policy: &ApprovalPolicy, file: Result<Vec<u8>, String>) -> Ledger {
    let mut ledger = Ledger::new(&["runtime"]);
    ledger.replay = ReplayPolicy::default().with_approval_file(file);
    ledger.raw(
        "run_created",
        json!({"to_state": "planned", "evidence_refs": [policy.evidence_item()]}),
    );
    ledger
}

fn approve(ledger: &mut Ledger, evidence: Value) -> Vec<Breach> {
    ledger.raw(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved", "evidence_refs": evidence}),
    );
    ledger.state.breaches().to_vec()
}

fn record(summary: &str, checksum: &str) -> Value {
    json!({"kind": "approver_identity", "summary": summary, "checksum": checksum})
}

#[test]
fn replay_applies_the_approval_gate_to_every_plan_approved() {
    let frozen = policy(json!({"required_approver": "alice",
        "require_different_approver": true, "initiated_by": "agent-1"}));
    let sum = frozen.checksum();
    let user = json!({"kind": "user_approval", "summary": "ok"});
    let cases: Vec<(Value, Option<&str>)> = vec![
        // What our run-approve writes for alice.
        (
            json!([user, record("approved_by=alice source=env", &sum)]),
            None,
        ),
        // The reference's run-approve: no record at all.
        (json!([user]), Some("without the gate's approver record")),
        // A forged record: the policy pins no credential.
        (
            json!([user, record("approved_by=alice source=credential", &sum)]),
            Some("admits only source=env"),
        ),
        (
            json!([user, record("approved_by=agent-1 source=env", &sum)]),
            Some("the initiator 'agent-1'"),
        ),
        (
            json!([user, record("approved_by=bob source=env", &sum)]),
            Some("requires approver 'alice'"),
        ),
        (
            json!([
                user,
                record("approved_by=alice source=env", &"0".repeat(64))
            ]),
            Some("not bound"),
        ),
        (
            json!([
                user,
                record("approved_by=alice source=env", &sum),
                record("approved_by=alice source=env", &sum)
            ]),
            Some("2 approver records"),
        ),
        (
            json!([user, frozen.evidence_item()]),
            Some("approval_policy item"),
        ),
    ];
    for (evidence, expected) in cases {
        let mut ledger = gated(&frozen, Ok(frozen.file_bytes()));
        assert!(matches!(ledger.state.gate(), PolicyStatus::Frozen { .. }));
        let breaches = approve(&mut ledger, evidence.clone());
        assert_eq!(ledger.state.run_state(), "approved");
        match expected {
            None => assert!(breaches.is_empty(), "{evidence}: {breaches:?}"),
            Some(text) => {
                assert_eq!(breaches.len(), 1, "{evidence}");
                assert_eq!(breaches[0].rule, APPROVAL_GATE);
                assert_eq!(breaches[0].sequence, 2);
                assert!(breaches[0].found.contains(text), "{:?}", breaches[0]);
            }
        }
    }
}

#[test]
fn a_gate_whose_file_cannot_be_read_still_needs_a_bound_record() {
    let frozen = policy(json!({"required_approver": "alice"}));
    let sum = frozen.checksum();
    let mut ledger = gated(&frozen, Err("approval policy file is missing".into()));
    assert!(matches!(ledger.state.gate(), PolicyStatus::Tampered { .. }));
    let breaches = approve(
        &mut ledger,
        json!([record("approved_by=bob source=env", &sum)]),
    );
    assert!(
        breaches.is_empty(),
        "the identity cannot be judged without the policy"
    );
    let mut ledger = gated(&frozen, Err("approval policy file is missing".into()));
    assert_eq!(approve(&mut ledger, ev("plain")).len(), 1);
    // A run without a policy has no gate: the reference's rule.
    let mut plain = Ledger::running(&["runtime"]);
    assert_eq!(plain.state.gate(), &PolicyStatus::Absent);
    assert!(plain.state.breaches().is_empty());
    plain.run_step("run_cancelled", "running", "cancelled");
    assert!(plain.state.breaches().is_empty());
}

#[test]
fn gate_and_breaches_round_trip_through_the_checkpoint_form() {
    let frozen = policy(json!({"required_approver": "alice"}));
    let mut ledger = gated(&frozen, Ok(frozen.file_bytes()));
    approve(&mut ledger, ev("plain"));
    let ours = ledger.state.ours_json();
    let mut restored = CoordinatorState::from_public_json(&ledger.state.public_json()).unwrap();
    assert!(restored.breaches().is_empty());
    restored.restore_ours(&ours).unwrap();
    assert_eq!(restored.breaches(), ledger.state.breaches());
    assert_eq!(restored.gate(), ledger.state.gate());
    // A frozen gate whose policy does not hash to its checksum is refused.
    let mut forged = ours.clone();
    forged["gate"]["policy"]["required_approver"] = json!("mallory");
    assert!(restored.restore_ours(&forged).is_err());
    assert!(restored.restore_ours(&json!({})).is_err());
}

#[test]
fn a_gate_refuses_while_a_breach_stands() {
    let frozen = policy(json!({"required_approver": "alice"}));
    let mut ledger = gated(&frozen, Ok(frozen.file_bytes()));
    assert!(require_no_breach(&ledger.state, "run-start").is_ok());
    approve(&mut ledger, ev("plain"));
    match require_no_breach(&ledger.state, "run-start").map_err(FlowError::into_kind) {
        Err(ErrorKind::Breach { message, breaches }) => {
            assert!(message.starts_with("run-start refused"), "{message}");
            assert!(message.contains("approval_gate"), "{message}");
            assert_eq!(breaches.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_heartbeat_never_passes_a_check_or_covers_a_component() {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .running_lane("a", Value::Null)
        .heartbeat("a", ev("hb 1"))
        .required("runtime", "a", &["unit"]);
    // A failing result on a heartbeat satisfies nothing; a passing one does.
    ledger.raw(
        "check_failed",
        json!({"evidence_refs": ev("hb 1"),
               "metadata": {"component_id": "runtime", "check_id": "unit"}}),
    );
    assert!(rules(&ledger).is_empty());
    ledger.raw(
        "check_passed",
        json!({"evidence_refs": ev("hb 1"), "reason": "green",
               "metadata": {"component_id": "runtime", "check_id": "unit"}}),
    );
    assert_eq!(rules(&ledger), [LIVENESS_AS_CHECK]);
    // Recorded, not refused: the check passes as the reference says.
    assert!(ledger.state.checks()["runtime"]["unit"]);
    ledger.end_lane("lane_completed", "a", "completed", ev("done a"));
    ledger.raw(
        "evidence_attached",
        json!({"evidence_refs": ev("hb 1"),
               "metadata": {"component_id": "runtime", "coverage_state": "covered"}}),
    );
    assert_eq!(rules(&ledger), [LIVENESS_AS_CHECK, LIVENESS_AS_COMPLETION]);
    assert!(
        ledger.state.breaches()[1]
            .found
            .contains("component runtime")
    );
    // The run's main verification on a heartbeat, written alone by hand.
    ledger.raw("main_verification", json!({"evidence_refs": ev("hb 1")}));
    assert_eq!(
        rules(&ledger),
        [
            LIVENESS_AS_CHECK,
            LIVENESS_AS_COMPLETION,
            LIVENESS_AS_COMPLETION
        ]
    );
    assert!(ledger.state.main_verified());
}

#[test]
fn a_lane_under_a_parent_stays_within_its_scope() {
    let mut ledger = Ledger::running(&["runtime"]);
    ledger.lane("a", Value::Null);
    let child = |ledger: &mut Ledger, id: &str, scope: Value| {
        ledger.lane_with(
            id,
            &format!("agent-{id}"),
            json!({"write_scope": scope, "parent_lane_id": "a"}),
        );
    };
    child(&mut ledger, "b", json!(["src/x", "src"]));
    child(&mut ledger, "c", json!([]));
    assert!(rules(&ledger).is_empty());
    child(&mut ledger, "d", json!(["src/x", "srcx"]));
    assert_eq!(rules(&ledger), [WRITE_SCOPE_WIDENED]);
    assert!(
        ledger.state.breaches()[0]
            .found
            .contains("srcx lies outside it"),
        "{:?}",
        ledger.state.breaches()
    );
    // A lane without a parent has no scope to keep.
    ledger.lane("e", Value::Null);
    assert_eq!(rules(&ledger).len(), 1);
}
