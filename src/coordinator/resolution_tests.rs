//! Unit tests of the `lane-resolve` decision on hand-made replayed states.

use serde_json::{Value, json};

use super::*;
use crate::coordinator::completion::evaluate_completion;
use crate::coordinator::resolution_refusal::ResolutionRefusal as Refused;
use crate::coordinator::state::RunState;
use crate::coordinator::test_ledger::{LaneEvents, Ledger, ev, needs_active_run};

fn bad<T>(message: &str) -> Result<T, FlowError> {
    Err(crate::coordinator::input_refusal::refused_as(message))
}

fn not_failed<T>(lane_id: &str, state: Option<LaneState>) -> Result<T, FlowError> {
    refused(Refused::NotFailed {
        lane_id: lane_id.into(),
        state,
    })
}

fn not_completed<T>(resolution_lane_id: &str, state: Option<LaneState>) -> Result<T, FlowError> {
    refused(Refused::ResolverNotCompleted {
        resolution_lane_id: resolution_lane_id.into(),
        state,
    })
}

const AT: &str = "2026-07-14T01:30:00Z";

fn failure() -> Value {
    ev("review found a wrong head")
}

fn correction() -> Value {
    ev("re-review passed at the exact head")
}

/// `review` failed with `failure()`.
fn failed_review() -> Ledger {
    let mut ledger = Ledger::running(&["report"]);
    ledger.failed_lane("review", failure());
    ledger
}

/// `review` failed; `rereview` (child of review) completed afterwards.
fn failed_then_rereviewed() -> Ledger {
    let mut ledger = failed_review();
    ledger.completed_child("rereview", "review", correction());
    ledger
}

/// Evidence binding both lanes' evidence digests.
fn binding(original: &Value, resolution: &Value) -> Value {
    json!([
        {"kind": "review", "summary": "failed review", "checksum": canonical::digest(original)},
        {"kind": "review", "summary": "re-review", "checksum": canonical::digest(resolution)},
    ])
}

fn request(lane: &str, resolver: &str) -> Resolve {
    Resolve {
        lane_id: lane.into(),
        resolution_lane_id: resolver.into(),
        at: AT.into(),
    }
}

fn resolve(
    ledger: &Ledger,
    lane: &str,
    resolver: &str,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    decide_resolve(
        &ledger.state,
        &ledger.policy,
        &request(lane, resolver),
        evidence,
    )
}

#[test]
fn prechecks_ids_then_time_then_evidence() {
    let e = ev("x");
    assert_eq!(
        precheck_resolve("bad id", "r", AT, &e),
        bad("lane id must match the identifier contract")
    );
    assert_eq!(
        precheck_resolve("l", "", AT, &e),
        bad("resolution lane id must match the identifier contract")
    );
    assert_eq!(
        precheck_resolve("l", "r", "2026-07-14T01:30:00", &e),
        bad("timestamp must be UTC ISO-8601 ending in Z")
    );
    assert_eq!(
        precheck_resolve("l", "r", AT, &json!([])),
        bad("lifecycle transition requires evidence")
    );
    // Self-reference is an in-lock rule (after "lane is not a failed lane").
    assert_eq!(precheck_resolve("l", "l", AT, &e), Ok(request("l", "l")));
}

#[test]
fn a_later_child_lane_resolves_a_failed_lane() {
    let mut ledger = failed_then_rereviewed();
    let evidence = binding(&failure(), &correction());
    let intents = resolve(&ledger, "review", "rereview", &evidence).unwrap();
    assert_eq!(intents.len(), 1);
    let intent = &intents[0];
    assert_eq!(intent.event_type, "candidate_validated");
    assert_eq!(intent.lane_id.as_deref(), Some("review"));
    assert_eq!(intent.agent_id.as_deref(), Some("agent-review"));
    assert_eq!(intent.from_state.map(|s| s.as_str()), Some("failed"));
    assert_eq!(intent.to_state.map(|s| s.as_str()), Some("failed"));
    assert_eq!(intent.timestamp.as_deref(), Some(AT));
    assert_eq!(intent.reason, None);
    assert_eq!(
        Value::Object(intent.metadata.clone()),
        json!({
            "candidate_kind": "failed_lane_resolution",
            "original_lane_id": "review", "resolution_lane_id": "rereview",
            "original_evidence_digest": canonical::digest(&failure()),
            "resolution_evidence_digest": canonical::digest(&correction()),
        })
    );
    ledger.commit(intents);
    let resolution = &ledger.state.failure_resolutions()["review"];
    assert_eq!(resolution.resolution_lane_id, "rereview");
    assert_eq!(resolution.resolved_at, AT);
    // History stays: the lane is still failed, but no longer blocks.
    assert_eq!(
        ledger.state.lane("review").unwrap().state,
        LaneState::Failed
    );
    let report = evaluate_completion(&ledger.state);
    assert_eq!(report.resolved_failed_lanes, ["review"]);
    assert!(report.unresolved_failed_lanes.is_empty());
    assert!(report.missing_lanes.is_empty());
    // Only once.
    assert_eq!(
        resolve(&ledger, "review", "rereview", &evidence),
        refused(Refused::AlreadyResolved {
            lane_id: "review".into(),
            resolution_lane_id: "rereview".into()
        })
    );
}

#[test]
fn refusals_in_the_reference_order() {
    let good = binding(&failure(), &correction());
    let ledger = failed_then_rereviewed();
    for (lane, resolver, refusal) in [
        ("ghost", "rereview", not_failed("ghost", None)),
        (
            "rereview",
            "review",
            not_failed("rereview", Some(LaneState::Completed)),
        ),
        // Self-resolution is a contract error (exit 2), after the failed check.
        ("review", "review", bad("failed lane cannot resolve itself")),
        ("review", "ghost", not_completed("ghost", None)),
    ] {
        assert_eq!(
            resolve(&ledger, lane, resolver, &good),
            refusal,
            "{lane} by {resolver}"
        );
    }
    let mut stopped = failed_then_rereviewed();
    stopped.run_step("run_blocked", "running", "blocked");
    assert_eq!(
        resolve(&stopped, "review", "rereview", &good),
        Err(needs_active_run(RunState::Blocked))
    );
}

#[test]
fn the_resolver_must_be_completed() {
    let mut ledger = failed_review();
    ledger
        .running_lane("running", json!("review"))
        .running_lane("failed-too", json!("review"))
        .end_lane("lane_failed", "failed-too", "failed", ev("also failed"))
        .running_lane("blocked", json!("review"))
        .end_lane("lane_blocked", "blocked", "blocked", ev("blocked"));
    for (resolver, state) in [
        ("running", LaneState::Running),
        ("failed-too", LaneState::Failed),
        ("blocked", LaneState::Blocked),
    ] {
        assert_eq!(
            resolve(
                &ledger,
                "review",
                resolver,
                &binding(&failure(), &correction())
            ),
            not_completed(resolver, Some(state)),
            "{resolver}"
        );
    }
}

#[test]
fn the_resolver_must_declare_the_failed_parent_when_the_snapshot_says_so() {
    let mut ledger = failed_review();
    ledger.completed_lane("other", correction());
    let evidence = binding(&failure(), &correction());
    assert_eq!(
        resolve(&ledger, "review", "other", &evidence),
        refused(Refused::NotItsParent {
            lane_id: "review".into(),
            resolution_lane_id: "other".into(),
            parent: None
        })
    );
    // A pre-policy snapshot (no `failure_resolution`) does not require it.
    ledger.policy.requires_parent = false;
    ledger.replay.requires_parent = false;
    let intents = resolve(&ledger, "review", "other", &evidence).unwrap();
    ledger.commit(intents);
}

#[test]
fn the_resolver_must_complete_after_the_failure() {
    let mut ledger = Ledger::running(&["report"]);
    ledger
        .running_lane("rereview", json!("review"))
        .running_lane("review", Value::Null)
        .end_lane("lane_completed", "rereview", "completed", correction())
        .end_lane("lane_failed", "review", "failed", failure());
    assert_eq!(
        resolve(
            &ledger,
            "review",
            "rereview",
            &binding(&failure(), &correction())
        ),
        refused(Refused::CompletedBefore {
            lane_id: "review".into(),
            resolution_lane_id: "rereview".into()
        })
    );
}

#[test]
fn liveness_evidence_cannot_resolve() {
    let mut ledger = failed_then_rereviewed();
    ledger.running_lane("watcher", Value::Null);
    // A heartbeat that happens to carry the binding refs is still only
    // liveness evidence.
    let beat = binding(&failure(), &correction());
    ledger.heartbeat("watcher", beat.clone());
    assert_eq!(
        resolve(&ledger, "review", "rereview", &beat),
        bad("liveness evidence cannot satisfy completion evidence")
    );
}

#[test]
fn the_evidence_must_bind_both_lanes() {
    let ledger = failed_then_rereviewed();
    for evidence in [
        binding(&failure(), &failure()),
        binding(&correction(), &correction()),
        binding(&failure(), &ev("something else")),
        ev("no checksums at all"),
    ] {
        assert_eq!(
            resolve(&ledger, "review", "rereview", &evidence),
            bad("resolution evidence must bind failed and completed lane evidence"),
            "{evidence}"
        );
    }
}

#[test]
fn identical_evidence_on_both_lanes_is_a_conflict_not_a_corruption() {
    // decisions.md 7: the reference passes this to its pre-append replay,
    // which refuses it as corruption (exit 3); we refuse it first (exit 5).
    let same = ev("one report for both lanes");
    let mut ledger = Ledger::running(&["report"]);
    ledger
        .failed_lane("review", same.clone())
        .completed_child("rereview", "review", same.clone());
    let evidence = binding(&same, &same);
    assert_eq!(
        resolve(&ledger, "review", "rereview", &evidence),
        refused(Refused::SameEvidence {
            lane_id: "review".into(),
            resolution_lane_id: "rereview".into()
        })
    );
    // The reducer would indeed refuse the event.
    let proposal = {
        let mut metadata = serde_json::Map::new();
        metadata.insert("candidate_kind".into(), json!("failed_lane_resolution"));
        metadata.insert("original_lane_id".into(), json!("review"));
        metadata.insert("resolution_lane_id".into(), json!("rereview"));
        metadata.insert(
            "original_evidence_digest".into(),
            json!(canonical::digest(&same)),
        );
        metadata.insert(
            "resolution_evidence_digest".into(),
            json!(canonical::digest(&same)),
        );
        Intent {
            event_type: EventType::CandidateValidated,
            timestamp: Some(AT.into()),
            from_state: Some(LaneState::Failed.into()),
            to_state: Some(LaneState::Failed.into()),
            lane_id: crate::receipt::primitives::LaneId::parse("review"),
            agent_id: crate::receipt::primitives::AgentId::parse("agent-review"),
            reason: None,
            evidence_refs: evidence,
            metadata,
        }
    };
    let event = ledger.sealed(&[proposal]);
    assert!(ledger.state.apply(&event, &ledger.replay).is_err());
}
