//! Focused tests of the reducer on small hand-made event sequences.
//!
//! The reducer trusts that the chain was verified, so these events carry
//! made-up checksums; only `sequence`, the owner fields and the coordinator
//! invariants matter.

use serde_json::{Value, json};

use super::test_ledger::LaneEvents;
use super::{CoordinatorState, ReplayError, ReplayPolicy, RunOrigin, replay};
use crate::receipt::canonical;

const FP1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const FP2: &str = "2222222222222222222222222222222222222222222222222222222222222222";

fn origin() -> RunOrigin {
    RunOrigin {
        owner_fingerprint: Some(FP1.into()),
        owner_epoch: 1,
        approved_component_ids: vec!["runtime".into()],
    }
}

fn policy() -> ReplayPolicy {
    ReplayPolicy {
        max_lanes: 64,
        requires_parent: true,
        approval_file: None,
    }
}

fn evidence(summary: &str) -> Value {
    json!([{"kind": "test", "summary": summary}])
}

/// Builds receipt events with contiguous sequences, signed by the current
/// owner unless a patch says otherwise.
struct Script {
    state: CoordinatorState,
    policy: ReplayPolicy,
    sequence: u64,
    fingerprint: String,
    epoch: u64,
}

impl Script {
    fn new() -> Self {
        Script::with_policy(policy())
    }

    fn with_policy(policy: ReplayPolicy) -> Self {
        Script {
            state: CoordinatorState::new(&origin()),
            policy,
            sequence: 0,
            fingerprint: FP1.into(),
            epoch: 1,
        }
    }

    /// The next event: the 16 receipt keys, overridden by `patch` (whose
    /// `metadata` is merged into `{owner_epoch}`).
    fn event(&self, event_type: &str, patch: Value) -> Value {
        let sequence = self.sequence + 1;
        let mut event = json!({
            "schema_version": 1,
            "run_id": "run-1",
            "lane_id": null,
            "agent_id": null,
            "sequence": sequence,
            "event_type": event_type,
            "from_state": null,
            "to_state": null,
            "timestamp": format!("2026-07-14T01:00:{:02}Z", sequence % 60),
            "owner_token": self.fingerprint,
            "manifest_hash": "0".repeat(64),
            "previous_checksum": "",
            "checksum": format!("{sequence:064x}"),
            "evidence_refs": evidence(&format!("evidence {sequence}")),
            "reason": null,
            "metadata": {"owner_epoch": self.epoch},
        });
        let mut patch = patch;
        match patch.as_object_mut().and_then(|p| p.remove("metadata")) {
            Some(Value::Object(meta)) => {
                let target = event["metadata"].as_object_mut().unwrap();
                for (k, v) in meta {
                    target.insert(k, v);
                }
            }
            Some(other) => event["metadata"] = other,
            None => {}
        }
        for (k, v) in patch.as_object().unwrap() {
            event[k] = v.clone();
        }
        event
    }

    fn try_apply(&mut self, event_type: &str, patch: Value) -> Result<(), ReplayError> {
        let event = self.event(event_type, patch);
        self.state.apply(&event, &self.policy)?;
        self.sequence += 1;
        if event_type == "run_resumed" {
            self.fingerprint = event["metadata"]["new_owner_fingerprint"]
                .as_str()
                .unwrap()
                .into();
            self.epoch += 1;
        }
        Ok(())
    }

    #[track_caller]
    fn ok(&mut self, event_type: &str, patch: Value) -> &mut Self {
        if let Err(error) = self.try_apply(event_type, patch) {
            panic!("{event_type} refused: {error}");
        }
        self
    }

    /// The event must be refused with `message`, leaving the state as it was.
    #[track_caller]
    fn refused(&mut self, event_type: &str, patch: Value, message: &str) {
        let before = self.state.public_json();
        let error = self.try_apply(event_type, patch).unwrap_err();
        assert_eq!(error.message, message);
        assert_eq!(error.sequence, Some(self.sequence + 1));
        assert_eq!(
            canonical::to_string(&self.state.public_json()),
            canonical::to_string(&before),
            "a refused event must not change the state"
        );
    }

    fn running(&mut self) -> &mut Self {
        self.create_run().start_run()
    }

    /// A running run whose lane `lane_id` of agent-1 is running.
    fn with_running_lane(lane_id: &str) -> Self {
        let mut s = Script::new();
        s.running()
            .lane_with(lane_id, "agent-1", json!({}))
            .start_lane(lane_id);
        s
    }

    /// A running run whose lane `build` of agent-1 was interrupted.
    fn with_interrupted_build() -> Self {
        let mut s = Script::with_running_lane("build");
        s.interrupt_lane("build");
        s
    }

    fn lane_json(&self, lane_id: &str) -> Value {
        self.state.lane_records()[lane_id].clone()
    }
}

impl LaneEvents for Script {
    #[track_caller]
    fn accept(&mut self, event_type: &str, fields: Value) -> &mut Self {
        self.ok(event_type, fields)
    }
}

fn intent(event_type: &str, epoch: u64, fields: Value) -> Value {
    let mut intent = json!({
        "event_type": event_type,
        "timestamp": "2026-07-14T01:05:00Z",
        "owner_epoch": epoch,
        "from_state": null,
        "to_state": null,
        "lane_id": null,
        "agent_id": null,
        "reason": null,
        "evidence_refs": evidence("intent evidence"),
        "metadata": {"owner_epoch": epoch},
    });
    for (k, v) in fields.as_object().unwrap() {
        if k == "metadata" {
            for (mk, mv) in v.as_object().unwrap() {
                intent["metadata"][mk] = mv.clone();
            }
        } else {
            intent[k] = v.clone();
        }
    }
    intent
}

/// A transaction of heartbeat intents (evidence "new heartbeat") refused
/// with `message`: refused() checks that the state stays as it was, and
/// the evidence must not be remembered as liveness evidence either.
#[track_caller]
fn refuse_heartbeat_transaction(s: &mut Script, intents: Vec<Value>, message: &str) {
    s.refused("transaction_committed", transaction(intents), message);
    let digest = canonical::digest(&evidence("new heartbeat"));
    assert!(!s.state.is_liveness_digest(&digest));
}

fn transaction(intents: Vec<Value>) -> Value {
    json!({"evidence_refs": [], "metadata": {"intents": intents}})
}

fn reassign_metadata(child: &str) -> Value {
    json!({
        "replacement_count": 1,
        "previous_agent_id": "agent-1",
        "replacement_lane_id": child,
        "replacement_agent_id": "agent-2",
        "replacement_assignment": "Resume from checkpoint 3",
        "replacement_write_scope": ["src"],
        "replacement_fallback": "main session",
        "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
        "replacement_command_deadline": "2026-07-14T01:30:00Z",
        "checkpoint_digest": "c".repeat(64),
    })
}

fn child_lane_metadata(parent: &str) -> Value {
    json!({
        "assignment": "Resume from checkpoint 3",
        "write_scope": ["src"],
        "fallback": "main session",
        "startup_ack_deadline": "2026-07-14T01:11:30Z",
        "command_deadline": "2026-07-14T01:30:00Z",
        "parent_lane_id": parent,
        "replacement_count": 1,
    })
}

// ---------------------------------------------------------------- run events

#[test]
fn initial_state_is_planned_and_empty() {
    let state = CoordinatorState::new(&RunOrigin {
        owner_fingerprint: Some(FP1.into()),
        owner_epoch: 1,
        approved_component_ids: vec!["b".into(), "a".into()],
    });
    assert_eq!(state.run_state(), "planned");
    assert_eq!(state.last_sequence(), 0);
    assert_eq!(state.last_checksum(), "");
    assert_eq!(state.last_event_type(), None);
    assert_eq!(state.updated_at(), None);
    let json = state.public_json();
    assert_eq!(json["approved_component_ids"], json!(["a", "b"]));
    assert_eq!(json.as_object().unwrap().len(), 18);
    assert_eq!(json["owner_fingerprint"], FP1);
    assert_eq!(json["last_event_type"], Value::Null);
}

#[test]
fn records_head_fields_of_each_event() {
    let mut s = Script::new();
    s.running();
    assert_eq!(s.state.run_state(), "running");
    assert_eq!(s.state.last_sequence(), 3);
    assert_eq!(s.state.last_checksum(), format!("{:064x}", 3));
    assert_eq!(s.state.last_event_type(), Some("run_started"));
    assert_eq!(s.state.updated_at(), Some("2026-07-14T01:00:03Z"));
}

#[test]
fn illegal_run_transition_is_refused_with_its_sequence() {
    let mut s = Script::new();
    s.create_run();
    let event = s.event(
        "run_started",
        json!({"from_state": "planned", "to_state": "running"}),
    );
    let error = s.state.apply(&event, &s.policy).unwrap_err();
    assert_eq!(
        error,
        ReplayError {
            sequence: Some(2),
            message: "run transition source is invalid".into()
        }
    );
    assert_eq!(
        error.to_string(),
        "coordinator corruption at sequence 2: run transition source is invalid"
    );
    assert_eq!(s.state.run_state(), "planned");
    assert_eq!(s.state.last_sequence(), 1);
}

#[test]
fn run_transition_fields_must_agree_with_the_edge() {
    let mut s = Script::new();
    s.create_run();
    for (from, to, message) in [
        ("planned", "running", "run transition target is invalid"),
        (
            "approved",
            "approved",
            "run transition from_state is invalid",
        ),
    ] {
        let fields = json!({"from_state": from, "to_state": to});
        s.refused("plan_approved", fields, message);
    }
    // Null from/to are accepted.
    s.ok("plan_approved", json!({}));
    assert_eq!(s.state.run_state(), "approved");
}

#[test]
fn lifecycle_events_need_evidence_but_run_created_does_not() {
    let mut s = Script::new();
    s.ok("run_created", json!({"evidence_refs": []}));
    s.refused(
        "plan_approved",
        json!({"evidence_refs": []}),
        "event evidence is missing",
    );
}

#[test]
fn sequence_must_be_contiguous() {
    let mut s = Script::new();
    s.running();
    let mut event = s.event("run_recovery_started", json!({}));
    event["sequence"] = json!(5);
    let error = s.state.apply(&event, &s.policy).unwrap_err();
    assert_eq!(error.sequence, Some(5));
    assert_eq!(error.message, "sequence is not contiguous");
    event["sequence"] = json!("4");
    let error = s.state.apply(&event, &s.policy).unwrap_err();
    assert_eq!(error.sequence, None);
    assert_eq!(error.to_string(), "sequence is not contiguous");
}

#[test]
fn non_object_event_is_refused_at_the_next_sequence() {
    let mut s = Script::new();
    s.running();
    let error = s.state.apply(&json!([1, 2]), &s.policy).unwrap_err();
    assert_eq!(error.sequence, Some(4));
    assert_eq!(error.message, "event is not an object");
}

#[test]
fn unknown_event_type_has_no_reducer() {
    let mut s = Script::new();
    s.running();
    s.refused(
        "stall_exploded",
        json!({}),
        "event type has no coordinator reducer",
    );
    // candidate_* events without a resolution kind are accepted and ignored.
    let before = s.state.lane_records();
    s.ok("candidate_proposed", json!({"evidence_refs": []}));
    s.ok("candidate_validated", json!({"evidence_refs": []}));
    assert_eq!(s.state.lane_records(), before);
    assert_eq!(s.state.last_event_type(), Some("candidate_validated"));
}

// ------------------------------------------------------------------- owners

#[test]
fn stale_owner_epoch_or_fingerprint_is_refused() {
    let mut s = Script::new();
    s.running();
    s.refused(
        "run_recovery_started",
        json!({"metadata": {"owner_epoch": 2}}),
        "event owner epoch is stale",
    );
    s.refused(
        "run_recovery_started",
        json!({"owner_token": FP2}),
        "event owner fingerprint is stale",
    );
    s.refused(
        "run_recovery_started",
        json!({"metadata": null}),
        "event owner epoch is stale",
    );
}

#[test]
fn run_resumed_rotates_owner_fingerprint_and_epoch() {
    let mut s = Script::new();
    s.running();
    s.ok(
        "run_resumed",
        json!({"evidence_refs": [], "metadata": {"new_owner_fingerprint": FP2}}),
    );
    assert_eq!(s.state.owner_epoch(), 2);
    assert_eq!(s.state.owner_fingerprint(), Some(FP2));
    assert_eq!(s.state.public_json()["owner_epoch"], 2);

    // The old owner is fenced: its fingerprint and its epoch are stale.
    s.refused(
        "run_recovery_started",
        json!({"owner_token": FP1, "metadata": {"owner_epoch": 1}}),
        "event owner fingerprint is stale",
    );
    s.refused(
        "run_recovery_started",
        json!({"metadata": {"owner_epoch": 1}}),
        "event owner epoch is stale",
    );
    s.ok("run_recovery_started", json!({}));
    assert_eq!(s.state.run_state(), "recovering");
}

#[test]
fn run_resumed_needs_a_sha256_fingerprint() {
    let mut s = Script::new();
    s.running();
    s.refused(
        "run_resumed",
        json!({"metadata": {"new_owner_fingerprint": "ABC"}}),
        "resume owner fingerprint is invalid",
    );
    s.refused(
        "run_resumed",
        json!({"metadata": {"new_owner_fingerprint": "A".repeat(64)}}),
        "resume owner fingerprint is invalid",
    );
    assert_eq!(s.state.owner_epoch(), 1);
    assert_eq!(s.state.owner_fingerprint(), Some(FP1));
}

#[test]
fn origin_without_fingerprint_accepts_no_event() {
    let origin = RunOrigin {
        owner_fingerprint: None,
        owner_epoch: 1,
        approved_component_ids: vec![],
    };
    let event = Script::new().event("run_created", json!({}));
    let error = replay(&origin, &policy(), [&event]).unwrap_err();
    assert_eq!(error.message, "event owner fingerprint is stale");
}

// ----------------------------------------------------------- terminal runs

#[test]
fn completed_run_accepts_only_the_live_report() {
    let mut s = Script::new();
    s.running();
    let report = |kind: &str| {
        json!({"evidence_refs": [{"kind": "report", "summary": "bound",
                                   "checksum": "d".repeat(64)}],
               "metadata": {"report_kind": kind,
                            "report_path": format!("reports/run-1-{kind}-dddddddddddddddd.json"),
                            "report_checksum": "d".repeat(64),
                            "report_receipt_head": "e".repeat(64)}})
    };
    s.ok(
        "transaction_committed",
        transaction(vec![
            intent("main_verification", 1, json!({})),
            intent(
                "run_completed",
                1,
                json!({"from_state": "running", "to_state": "completed"}),
            ),
        ]),
    );
    assert_eq!(s.state.run_state(), "completed");
    assert!(s.state.main_verified());
    s.refused(
        "handoff_recorded",
        report("fresh_session_handoff"),
        "terminal run rejects further mutation",
    );
    s.refused(
        "run_cancelled",
        json!({}),
        "terminal run rejects further mutation",
    );
    s.ok("live_report_recorded", report("live_apply"));
    // Rebinding the same metadata is accepted; different metadata is not.
    s.ok("live_report_recorded", report("live_apply"));
    let mut other = report("live_apply");
    other["metadata"]["report_receipt_head"] = json!("f".repeat(64));
    s.refused(
        "live_report_recorded",
        other,
        "report kind is already bound to different evidence",
    );
    assert_eq!(
        s.state.public_json()["reports"]["live_apply"]["report_receipt_head"],
        "e".repeat(64)
    );
}

#[test]
fn other_terminal_runs_accept_nothing() {
    for (event_type, state) in [
        ("run_failed", "failed"),
        ("run_blocked", "blocked"),
        ("run_cancelled", "cancelled"),
    ] {
        let mut s = Script::new();
        s.running().ok(event_type, json!({"to_state": state}));
        assert_eq!(s.state.run_state(), state);
        s.refused(
            "live_report_recorded",
            json!({"metadata": {"report_kind": "live_apply"}}),
            "terminal run rejects further mutation",
        );
    }
}

#[test]
fn run_can_be_cancelled_before_it_starts() {
    let mut s = Script::new();
    s.ok("run_created", json!({"evidence_refs": []}))
        .ok("run_cancelled", json!({"from_state": "planned"}));
    assert_eq!(s.state.run_state(), "cancelled");
}

// -------------------------------------------------------------------- lanes

#[test]
fn lane_record_has_the_reference_shape() {
    let mut s = Script::new();
    s.running().lane_with("build", "agent-1", json!({}));
    let lane = s.lane_json("build");
    let keys: Vec<&str> = lane
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "agent_id",
            "assignment",
            "changed_paths",
            "command_deadline",
            "evidence_digest",
            "evidence_refs",
            "fallback",
            "id",
            "last_event_type",
            "last_evidence_digest",
            "last_reason",
            "liveness_evidence_digests",
            "liveness_evidence_refs",
            "parent_lane_id",
            "probe_deadline",
            "replacement_count",
            "replacement_lane_id",
            "silence_lease_deadline",
            "startup_ack_deadline",
            "state",
            "terminal_sequence",
            "updated_at",
            "write_scope",
        ]
    );
    assert_eq!(lane["state"], "pending");
    assert_eq!(lane["updated_at"], "2026-07-14T01:00:04Z");
    assert_eq!(lane["evidence_refs"], evidence("evidence 4"));
    assert_eq!(lane["terminal_sequence"], Value::Null);
}

#[test]
fn lanes_need_a_running_run_and_a_fresh_id() {
    let mut s = Script::new();
    s.create_run();
    let a_by_x = json!({"lane_id": "a", "agent_id": "x"});
    let planned = "lane cannot be created in current run state";
    s.refused("lane_created", a_by_x.clone(), planned);
    s.start_run().lane_with("a", "x", json!({}));
    for (fields, message) in [
        (a_by_x, "duplicate lane_created"),
        (json!({"agent_id": "x"}), "lane_created requires lane_id"),
        (
            json!({"lane_id": "b"}),
            "lane_created requires lane_id and agent_id",
        ),
    ] {
        s.refused("lane_created", fields, message);
    }
}

#[test]
fn lane_limit_comes_from_the_policy() {
    let mut s = Script::with_policy(ReplayPolicy {
        max_lanes: 2,
        requires_parent: true,
        approval_file: None,
    });
    s.running()
        .lane_with("a", "x", json!({}))
        .lane_with("b", "x", json!({}));
    s.refused(
        "lane_created",
        json!({"lane_id": "c", "agent_id": "x"}),
        "lane limit exceeded",
    );
    assert_eq!(s.state.lanes().len(), 2);
}

#[test]
fn lane_events_check_lane_agent_and_edges() {
    let mut s = Script::new();
    s.running().lane_with("a", "agent-1", json!({}));
    s.refused(
        "lane_started",
        json!({"lane_id": "zz"}),
        "lane event references an unknown lane",
    );
    s.refused("lane_started", json!({}), "lane_started requires lane_id");
    s.refused(
        "lane_started",
        json!({"lane_id": "a", "agent_id": "agent-2"}),
        "lane event agent does not own the lane",
    );
    s.refused(
        "startup_ack",
        json!({"lane_id": "a"}),
        "lane transition source is invalid",
    );
    s.refused(
        "lane_started",
        json!({"lane_id": "a", "from_state": "running"}),
        "lane transition from_state is invalid",
    );
    s.refused(
        "lane_started",
        json!({"lane_id": "a", "to_state": "running"}),
        "lane transition target is invalid",
    );
    s.refused(
        "lane_started",
        json!({"lane_id": "a", "evidence_refs": []}),
        "event evidence is missing",
    );
    s.start_lane("a");
    s.ok(
        "lane_completed",
        json!({"lane_id": "a", "agent_id": "agent-1",
               "metadata": {"changed_paths": ["src/lib.rs"]}}),
    );
    let lane = s.lane_json("a");
    assert_eq!(lane["state"], "completed");
    assert_eq!(lane["terminal_sequence"], 7);
    assert_eq!(lane["changed_paths"], json!(["src/lib.rs"]));
    assert_eq!(lane["last_event_type"], "lane_completed");
    s.refused(
        "lane_failed",
        json!({"lane_id": "a"}),
        "lane transition source is invalid",
    );
}

#[test]
fn liveness_evidence_is_kept_apart_from_completion_evidence() {
    let mut s = Script::with_running_lane("a");
    let completion_evidence = s.lane_json("a")["evidence_refs"].clone();
    s.ok(
        "stall_suspected",
        json!({"lane_id": "a", "reason": "silent", "evidence_refs": evidence("quiet")}),
    );
    let digest = canonical::digest(&evidence("quiet"));
    let lane = s.lane_json("a");
    assert_eq!(lane["evidence_refs"], completion_evidence);
    assert_eq!(lane["liveness_evidence_refs"], evidence("quiet"));
    assert_eq!(lane["liveness_evidence_digests"], json!([digest]));
    assert_eq!(lane["last_evidence_digest"], digest);
    assert_eq!(lane["last_reason"], "silent");
    assert!(s.state.is_liveness_digest(&digest));
    assert!(s.state.is_liveness_evidence(&evidence("quiet")));
    assert!(!s.state.is_liveness_evidence(&completion_evidence));

    // The same evidence again is not recorded twice.
    s.ok(
        "lane_recovered",
        json!({"lane_id": "a", "evidence_refs": evidence("quiet")}),
    );
    assert_eq!(
        s.lane_json("a")["liveness_evidence_digests"],
        json!([digest])
    );
    assert_eq!(s.lane_json("a")["last_reason"], "silent");
}

#[test]
fn heartbeat_transaction_renews_the_lease() {
    let mut s = Script::with_running_lane("a");
    let refs = json!([{"exit_status": 0, "kind": "log", "summary": "compiler output seen"}]);
    let digest = canonical::digest(&refs);
    let common = json!({"lane_id": "a", "agent_id": "agent-1", "from_state": "running",
                        "to_state": "running", "evidence_refs": refs});
    let mut renewed = common.clone();
    renewed["reason"] = json!("still compiling");
    renewed["metadata"] = json!({"evidence_digest": digest,
                                 "silence_lease_deadline": "2026-07-14T01:05:00Z"});
    let mut observed = common;
    observed["metadata"] = json!({"evidence_digest": digest});
    s.ok(
        "transaction_committed",
        transaction(vec![
            intent("heartbeat_observed", 1, observed),
            intent("lease_renewed", 1, renewed),
        ]),
    );
    let lane = s.lane_json("a");
    assert_eq!(lane["silence_lease_deadline"], "2026-07-14T01:05:00Z");
    assert_eq!(lane["evidence_digest"], digest);
    assert_eq!(lane["last_evidence_digest"], digest);
    assert_eq!(lane["liveness_evidence_digests"], json!([digest]));
    assert_eq!(lane["last_reason"], "still compiling");
    assert_eq!(lane["last_event_type"], "lease_renewed");
    assert_eq!(lane["updated_at"], "2026-07-14T01:05:00Z");
    assert_eq!(s.state.last_event_type(), Some("transaction_committed"));
}

#[test]
fn transaction_is_all_or_nothing() {
    let mut s = Script::with_running_lane("a");
    let fields = json!({"lane_id": "a", "from_state": "running", "to_state": "running",
                        "evidence_refs": evidence("new heartbeat"),
                        "metadata": {"evidence_digest": "b".repeat(64)}});
    let mut wrong_agent = fields.clone();
    wrong_agent["agent_id"] = json!("agent-2");
    wrong_agent["metadata"]["silence_lease_deadline"] = json!("2026-07-14T01:05:00Z");
    // The first intent applies; the second does not, so neither may stick.
    refuse_heartbeat_transaction(
        &mut s,
        vec![
            intent("heartbeat_observed", 1, fields),
            intent("lease_renewed", 1, wrong_agent),
        ],
        "lane event agent does not own the lane",
    );
    assert_eq!(s.state.last_sequence(), 6);
}

/// One lane snapshot per event: a lane changed by two intents comes back
/// whole when a third one fails.
#[test]
fn transaction_changing_a_lane_twice_is_all_or_nothing() {
    let mut s = Script::with_running_lane("a");
    let fields = json!({"lane_id": "a", "agent_id": "agent-1", "from_state": "running",
                        "to_state": "running", "reason": "still compiling",
                        "evidence_refs": evidence("new heartbeat"),
                        "metadata": {"evidence_digest": "b".repeat(64),
                                     "silence_lease_deadline": "2026-07-14T01:05:00Z"}});
    let mut unknown = fields.clone();
    unknown["lane_id"] = json!("nowhere");
    refuse_heartbeat_transaction(
        &mut s,
        vec![
            intent("heartbeat_observed", 1, fields.clone()),
            intent("lease_renewed", 1, fields),
            intent("lease_renewed", 1, unknown),
        ],
        "lane event references an unknown lane",
    );
}

#[test]
fn failed_reassign_transaction_leaves_the_original_recovering() {
    let mut s = Script::new();
    s.running()
        .lane_with("build", "agent-1", json!({}))
        .lane_with("taken", "agent-9", json!({}))
        .start_lane("build")
        .interrupt_lane("build");
    let reassigned = intent(
        "lane_reassigned",
        1,
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "recovering",
               "to_state": "replaced", "reason": "replacement checkpoint accepted",
               "metadata": reassign_metadata("taken")}),
    );
    let created = intent(
        "lane_created",
        1,
        json!({"lane_id": "taken", "agent_id": "agent-2", "to_state": "pending",
               "metadata": child_lane_metadata("build")}),
    );
    s.refused(
        "transaction_committed",
        transaction(vec![reassigned, created]),
        "duplicate lane_created",
    );
    assert_eq!(s.lane_json("build")["state"], "recovering");
    assert!(
        s.lane_json("build")
            .get("replacement_reservation")
            .is_none()
    );
    assert!(s.state.incomplete_replacements().is_empty());
}

// -------------------------------------------------------- replacement lineage

/// A run whose lane `build` was reassigned to `build-2` (child created in the
/// same transaction when `with_child`).
fn reassigned(with_child: bool, reservation: bool) -> Script {
    let mut s = Script::with_interrupted_build();
    let mut metadata = reassign_metadata("build-2");
    if !reservation {
        metadata = json!({"replacement_count": 1, "previous_agent_id": "agent-1",
                          "replacement_lane_id": "build-2"});
    }
    let reassign = json!({"lane_id": "build", "agent_id": "agent-1",
                          "from_state": "recovering", "to_state": "replaced",
                          "reason": "replacement checkpoint accepted",
                          "evidence_refs": evidence("checkpoint 3"),
                          "metadata": metadata});
    if with_child {
        let child = json!({"lane_id": "build-2", "agent_id": "agent-2", "to_state": "pending",
                           "evidence_refs": evidence("checkpoint 3"),
                           "metadata": child_lane_metadata("build")});
        s.ok(
            "transaction_committed",
            transaction(vec![
                intent("lane_reassigned", 1, reassign),
                intent("lane_created", 1, child),
            ]),
        );
    } else {
        s.ok("lane_reassigned", reassign);
    }
    s
}

#[test]
fn reassign_stores_the_reservation_and_closes_the_lineage() {
    let mut s = reassigned(true, true);
    let original = s.lane_json("build");
    assert_eq!(original["state"], "replaced");
    assert_eq!(original["replacement_lane_id"], "build-2");
    assert_eq!(original["replacement_count"], 1);
    assert_eq!(original["terminal_sequence"], Value::Null);
    let reservation = original["replacement_reservation"].as_object().unwrap();
    assert_eq!(reservation.len(), 9);
    assert!(!reservation.contains_key("previous_agent_id"));
    assert_eq!(s.lane_json("build-2")["parent_lane_id"], "build");
    assert!(s.state.incomplete_replacements().is_empty());

    s.start_lane("build-2").ok(
        "lane_completed",
        json!({"lane_id": "build-2", "metadata": {"changed_paths": []}}),
    );
    let close = |replacement: &str, to: &str, terminal: &str| {
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "replaced",
               "to_state": to,
               "metadata": {"original_lane_id": "build", "replacement_lane_id": replacement,
                            "replacement_terminal_state": terminal}})
    };
    s.refused(
        "replacement_lineage_closed",
        close("other", "completed", "completed"),
        "replacement close lineage is invalid",
    );
    s.refused(
        "replacement_lineage_closed",
        close("build-2", "failed", "failed"),
        "replacement close lineage is invalid",
    );
    s.refused(
        "replacement_lineage_closed",
        close("build-2", "failed", "completed"),
        "replacement close lineage is invalid",
    );
    let mut wrong_agent = close("build-2", "completed", "completed");
    wrong_agent["agent_id"] = json!("agent-2");
    s.refused(
        "replacement_lineage_closed",
        wrong_agent,
        "replacement close lineage is invalid",
    );
    let mut wrong_original = close("build-2", "completed", "completed");
    wrong_original["metadata"]["original_lane_id"] = json!("build-2");
    s.refused(
        "replacement_lineage_closed",
        wrong_original,
        "replacement close original lane is invalid",
    );
    s.ok(
        "replacement_lineage_closed",
        close("build-2", "completed", "completed"),
    );
    let original = s.lane_json("build");
    assert_eq!(original["state"], "completed");
    assert_eq!(original["terminal_sequence"], s.state.last_sequence());
    assert_eq!(original["last_event_type"], "replacement_lineage_closed");
    // A closed lineage cannot be closed again.
    s.refused(
        "replacement_lineage_closed",
        close("build-2", "completed", "completed"),
        "replacement close original lane is invalid",
    );
}

#[test]
fn stand_alone_reassign_leaves_an_incomplete_replacement_to_repair() {
    let mut s = reassigned(false, true);
    assert_eq!(s.state.incomplete_replacements(), ["build".to_owned()]);
    assert_eq!(
        s.state.public_json()["incomplete_replacements"],
        json!(["build"])
    );

    let repair = |replacement: &str| {
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "replaced",
               "to_state": "replaced",
               "metadata": {"original_lane_id": "build", "replacement_lane_id": replacement,
                            "checkpoint_digest": "c".repeat(64)}})
    };
    s.refused(
        "replacement_repaired",
        repair("build-3"),
        "replacement repair identity is invalid",
    );
    let child = json!({"lane_id": "build-2", "agent_id": "agent-2", "to_state": "pending",
                       "timestamp": "2026-07-14T01:12:00Z",
                       "metadata": child_lane_metadata("build")});
    s.ok(
        "transaction_committed",
        transaction(vec![
            intent("replacement_repaired", 1, repair("build-2")),
            intent("lane_created", 1, child),
        ]),
    );
    assert!(s.state.incomplete_replacements().is_empty());
    assert_eq!(s.lane_json("build")["state"], "replaced");
    assert_eq!(
        s.lane_json("build")["last_event_type"],
        "replacement_repaired"
    );
    assert_eq!(s.lane_json("build-2")["state"], "pending");
    // The child exists now: repairing again is an identity error.
    s.refused(
        "replacement_repaired",
        repair("build-2"),
        "replacement repair identity is invalid",
    );
}

#[test]
fn incomplete_replacement_can_be_blocked() {
    let mut s = reassigned(false, false);
    assert!(
        s.lane_json("build")
            .get("replacement_reservation")
            .is_none()
    );
    let block = |to: &str| {
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "replaced",
               "to_state": to, "reason": "incomplete replacement cannot be safely recreated",
               "metadata": {"original_lane_id": "build", "replacement_lane_id": "build-2",
                            "checkpoint_digest": "c".repeat(64)}})
    };
    s.refused(
        "replacement_blocked",
        block("failed"),
        "replacement block identity is invalid",
    );
    s.ok("replacement_blocked", block("blocked"));
    let lane = s.lane_json("build");
    assert_eq!(lane["state"], "blocked");
    assert_eq!(lane["terminal_sequence"], s.state.last_sequence());
    // The reason of a replacement event is not recorded as last_reason.
    assert_eq!(lane["last_reason"], "replacement checkpoint accepted");
    assert!(s.state.incomplete_replacements().is_empty());
    s.refused(
        "replacement_blocked",
        block("blocked"),
        "replacement block original lane is invalid",
    );
}

// ----------------------------------------------------- failed-lane resolution

/// `review` failed, then `rereview` (parent `review`) completed.
fn failed_and_resolved(rereview_evidence: Value) -> Script {
    let mut s = Script::new();
    s.running()
        .lane_with("review", "agent-1", json!({}))
        .start_lane("review")
        .ok(
            "lane_failed",
            json!({"lane_id": "review", "reason": "found defects",
                   "evidence_refs": evidence("review failed")}),
        )
        .lane_with("rereview", "agent-2", json!({"parent_lane_id": "review"}))
        .start_lane("rereview")
        .ok(
            "lane_completed",
            json!({"lane_id": "rereview", "evidence_refs": rereview_evidence,
                   "metadata": {"changed_paths": []}}),
        );
    s
}

fn resolution(failed_digest: &str, resolved_digest: &str, refs: Value) -> Value {
    json!({"lane_id": "review", "agent_id": "agent-1", "from_state": "failed",
           "to_state": "failed", "evidence_refs": refs,
           "metadata": {"candidate_kind": "failed_lane_resolution",
                        "original_lane_id": "review", "resolution_lane_id": "rereview",
                        "original_evidence_digest": failed_digest,
                        "resolution_evidence_digest": resolved_digest}})
}

fn binding(digests: &[&str]) -> Value {
    Value::Array(
        digests
            .iter()
            .map(|d| json!({"kind": "binding", "summary": "bind", "checksum": d}))
            .collect(),
    )
}

#[test]
fn failed_lane_resolution_binds_both_evidence_digests() {
    let mut s = failed_and_resolved(evidence("rereview passed"));
    let failed = canonical::digest(&evidence("review failed"));
    let resolved = canonical::digest(&evidence("rereview passed"));
    // Both digests must appear among the refs' checksums.
    s.refused(
        "candidate_validated",
        resolution(&failed, &resolved, binding(&[&failed])),
        "failure resolution evidence binding is invalid",
    );
    let mut unbound = resolution(&failed, &resolved, binding(&[&failed, &resolved]));
    unbound["metadata"]["original_evidence_digest"] = json!("a".repeat(64));
    s.refused(
        "candidate_validated",
        unbound,
        "failure resolution evidence binding is invalid",
    );
    s.ok(
        "candidate_validated",
        resolution(&failed, &resolved, binding(&[&failed, &resolved])),
    );
    let record = &s.state.public_json()["failure_resolutions"]["review"];
    assert_eq!(record["resolution_lane_id"], "rereview");
    assert_eq!(record["resolved_at"], s.state.updated_at().unwrap());
    assert_eq!(record["evidence_refs"], binding(&[&failed, &resolved]));
    assert_eq!(s.lane_json("review")["state"], "failed");
    s.refused(
        "candidate_validated",
        resolution(&failed, &resolved, binding(&[&failed, &resolved])),
        "failure resolution lineage is invalid",
    );
}

#[test]
fn failed_lane_resolution_with_identical_digests_is_corruption() {
    // Both lanes recorded byte-identical evidence: one digest, bound twice.
    let mut s = failed_and_resolved(evidence("review failed"));
    let digest = canonical::digest(&evidence("review failed"));
    s.refused(
        "candidate_validated",
        resolution(&digest, &digest, binding(&[&digest])),
        "failure resolution evidence binding is invalid",
    );
    assert!(s.state.failure_resolutions().is_empty());
}

#[test]
fn failed_lane_resolution_rejects_liveness_evidence_and_bad_lineage() {
    let mut s = failed_and_resolved(evidence("rereview passed"));
    let failed = canonical::digest(&evidence("review failed"));
    let resolved = canonical::digest(&evidence("rereview passed"));
    // Another lane recorded exactly this evidence as liveness evidence.
    s.lane_with("watch", "agent-3", json!({}))
        .start_lane("watch")
        .ok(
            "stall_suspected",
            json!({"lane_id": "watch", "evidence_refs": binding(&[&failed, &resolved])}),
        );
    s.refused(
        "candidate_validated",
        resolution(&failed, &resolved, binding(&[&failed, &resolved])),
        "liveness evidence cannot resolve a failed lane",
    );
    let refs = json!([{"kind": "a", "summary": "x", "checksum": failed},
                      {"kind": "b", "summary": "y", "checksum": resolved}]);
    let mut self_resolution = resolution(&failed, &resolved, refs.clone());
    self_resolution["metadata"]["resolution_lane_id"] = json!("review");
    let mut not_failed = resolution(&failed, &resolved, refs.clone());
    not_failed["metadata"]["original_lane_id"] = json!("rereview");
    let mut wrong_states = resolution(&failed, &resolved, refs.clone());
    wrong_states["to_state"] = json!("completed");
    for (event, message) in [
        (self_resolution, "failure resolution lineage is invalid"),
        (not_failed, "failure resolution original lane is invalid"),
        (wrong_states, "failure resolution lineage is invalid"),
    ] {
        s.refused("candidate_validated", event, message);
    }
    s.ok("candidate_validated", resolution(&failed, &resolved, refs));
}

#[test]
fn failed_lane_resolution_requires_the_parent_link_only_by_policy() {
    let build = |requires_parent: bool| {
        let mut s = Script::with_policy(ReplayPolicy {
            max_lanes: 64,
            requires_parent,
            approval_file: None,
        });
        s.running()
            .lane_with("review", "agent-1", json!({}))
            .start_lane("review")
            .ok(
                "lane_failed",
                json!({"lane_id": "review", "evidence_refs": evidence("review failed")}),
            )
            .lane_with("rereview", "agent-2", json!({}))
            .start_lane("rereview")
            .ok(
                "lane_completed",
                json!({"lane_id": "rereview", "evidence_refs": evidence("ok"),
                       "metadata": {"changed_paths": []}}),
            );
        s
    };
    let failed = canonical::digest(&evidence("review failed"));
    let resolved = canonical::digest(&evidence("ok"));
    let event = resolution(&failed, &resolved, binding(&[&failed, &resolved]));
    build(true).refused(
        "candidate_validated",
        event.clone(),
        "failure resolution lineage is invalid",
    );
    build(false).ok("candidate_validated", event);
}

#[test]
fn resolver_must_complete_after_the_failure() {
    let mut s = Script::new();
    s.running()
        .lane_with("review", "agent-1", json!({}))
        .lane_with("rereview", "agent-2", json!({"parent_lane_id": "review"}))
        .start_lane("rereview")
        .ok(
            "lane_completed",
            json!({"lane_id": "rereview", "evidence_refs": evidence("ok"),
                   "metadata": {"changed_paths": []}}),
        )
        .start_lane("review")
        .ok(
            "lane_failed",
            json!({"lane_id": "review", "evidence_refs": evidence("review failed")}),
        );
    let failed = canonical::digest(&evidence("review failed"));
    let resolved = canonical::digest(&evidence("ok"));
    s.refused(
        "candidate_validated",
        resolution(&failed, &resolved, binding(&[&failed, &resolved])),
        "failure resolution lineage is invalid",
    );
}

// ------------------------------------------------------------------ topology

fn component(id: &str, owner: &str, checks: &[&str]) -> Value {
    json!({"id": id, "required": true, "description": format!("Component {id}"),
           "owner_lane": owner, "required_checks": checks, "dependencies": [],
           "evidence_refs": [], "coverage_state": "missing"})
}

#[test]
fn duplicate_check_result_is_refused() {
    let mut s = Script::new();
    s.running().lane_with("build", "agent-1", json!({})).ok(
        "topology_registered",
        json!({"metadata": {"components": [component("runtime", "build", &["unit"])]}}),
    );
    let check = |passed_evidence: &str, reason: Value| {
        json!({"reason": reason, "evidence_refs": evidence(passed_evidence),
               "metadata": {"component_id": "runtime", "check_id": "unit"}})
    };
    s.ok("check_failed", check("red", Value::Null));
    s.refused(
        "check_failed",
        check("red", Value::Null),
        "duplicate check result",
    );
    // Same evidence, different outcome or reason: a new result.
    s.ok("check_passed", check("red", json!("fixed")));
    s.ok("check_passed", check("red", Value::Null));
    s.refused(
        "check_passed",
        check("red", Value::Null),
        "duplicate check result",
    );
    let mut unknown = check("green", Value::Null);
    unknown["metadata"]["check_id"] = json!("lint");
    s.refused(
        "check_passed",
        unknown,
        "check result references an unknown required check",
    );
    let json = s.state.public_json();
    assert_eq!(json["checks"], json!({"runtime": {"unit": true}}));
    let history = json["check_history"]["runtime"]["unit"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(
        history[0],
        json!({"passed": false, "evidence_refs": evidence("red"), "reason": null})
    );
}

#[test]
fn topology_reregistration_keeps_coverage_and_removal_moves_records() {
    let mut s = Script::new();
    s.running().lane_with("build", "agent-1", json!({})).ok(
        "topology_registered",
        json!({"metadata": {"components": [component("runtime", "build", &[]),
                                           component("docs", "build", &[])]}}),
    );
    s.ok(
        "evidence_attached",
        json!({"evidence_refs": evidence("covered"),
               "metadata": {"component_id": "runtime", "coverage_state": "covered"}}),
    );
    s.ok(
        "topology_registered",
        json!({"metadata": {"components": [component("runtime", "other", &["unit"]),
                                           component("docs", "build", &[])]}}),
    );
    let runtime = &s.state.public_json()["topology"]["runtime"];
    assert_eq!(runtime["coverage_state"], "covered");
    assert_eq!(runtime["evidence_refs"], evidence("covered"));
    assert_eq!(runtime["owner_lane"], "other");
    assert_eq!(runtime["required_checks"], json!(["unit"]));

    s.ok(
        "topology_component_removed",
        json!({"reason": "not needed", "metadata": {"component_id": "docs"}}),
    );
    s.refused(
        "topology_component_removed",
        json!({"metadata": {"component_id": "docs"}}),
        "topology removal references an unknown component",
    );
    s.refused(
        "evidence_attached",
        json!({"metadata": {"component_id": "docs", "coverage_state": "covered"}}),
        "component evidence references an unknown component",
    );
    let json = s.state.public_json();
    assert_eq!(json["removed_components"], json!(["docs"]));
    assert_eq!(
        json["removed_component_records"]["docs"],
        component("docs", "build", &[])
    );
    assert!(json["topology"].get("docs").is_none());
}

// ------------------------------------------------------------ origin, policy

#[test]
fn origin_comes_from_the_run_metadata() {
    let origin = RunOrigin::from_run_metadata(&json!({
        "component_ids": ["cli", "runtime", "api"],
        "initial_owner_epoch": 1,
        "owner_epoch": 7,
        "owner_fingerprint": FP1,
        "manifest_hash": "0".repeat(64),
    }))
    .unwrap();
    assert_eq!(origin.owner_epoch, 1);
    assert_eq!(origin.owner_fingerprint.as_deref(), Some(FP1));
    assert_eq!(origin.approved_component_ids, ["api", "cli", "runtime"]);

    let fallback =
        RunOrigin::from_run_metadata(&json!({"owner_epoch": 3, "owner_fingerprint": FP1})).unwrap();
    assert_eq!(fallback.owner_epoch, 3);
    assert!(fallback.approved_component_ids.is_empty());

    for bad in [
        json!({"owner_fingerprint": FP1}),
        json!({"owner_epoch": 1}),
        json!({"initial_owner_epoch": null, "owner_epoch": 1, "owner_fingerprint": FP1}),
        json!({"owner_epoch": true, "owner_fingerprint": FP1}),
    ] {
        let error = RunOrigin::from_run_metadata(&bad).unwrap_err();
        assert_eq!(error.message, "run owner metadata is invalid");
        assert_eq!(error.sequence, None);
        assert_eq!(error.to_string(), "run owner metadata is invalid");
    }
    assert_eq!(
        RunOrigin::from_run_metadata(&json!(null))
            .unwrap_err()
            .message,
        "run metadata is missing"
    );
}

#[test]
fn policy_comes_from_the_run_manifest() {
    let policy = ReplayPolicy::from_contract(&json!({
        "resource_limits": {"max_lanes": 3},
        "failure_resolution": {"requires_parent": true},
    }));
    assert_eq!(
        policy,
        ReplayPolicy {
            max_lanes: 3,
            requires_parent: true,
            approval_file: None,
        }
    );
    let limit = |value: Value| {
        ReplayPolicy::from_contract(&json!({"resource_limits": {"max_lanes": value}})).max_lanes
    };
    assert_eq!(limit(json!(-1)), 0);
    assert_eq!(limit(json!("64")), 0);
    assert_eq!(
        limit(serde_json::from_str("100000000000000000000000000000").unwrap()),
        usize::MAX
    );
    // Pre-policy 1.1.0 snapshots lack failure_resolution.
    assert_eq!(
        ReplayPolicy::from_contract(&json!({})),
        ReplayPolicy::default()
    );
    assert_eq!(ReplayPolicy::default().max_lanes, 64);
}

#[test]
fn replay_of_nothing_is_refused() {
    let events: [&Value; 0] = [];
    let error = replay(&origin(), &policy(), events).unwrap_err();
    assert_eq!(error.message, "receipt contains no events");
}

#[test]
fn big_replacement_count_round_trips() {
    let mut s = Script::new();
    s.running().lane_with(
        "a",
        "x",
        json!({"replacement_count": serde_json::from_str::<Value>("100000000000000000000000000000").unwrap()}),
    );
    let lane = s.state.lane("a").unwrap();
    assert_eq!(lane.replacement_count_u64(), None);
    assert_eq!(
        canonical::to_string(&s.lane_json("a")["replacement_count"]),
        "100000000000000000000000000000"
    );
}

/// DEVIATIONS 20: a repair that recreates the reserved child
/// for the interrupted agent itself is replayed as the reference does, and
/// recorded as a breach of our fencing rule; a fencing repair is not.
#[test]
fn a_repair_that_does_not_fence_the_interrupted_agent_is_a_breach() {
    for (child_agent, breached) in [("agent-2", false), ("agent-1", true)] {
        let mut s = Script::with_interrupted_build();
        let mut metadata = reassign_metadata("build-2");
        metadata["replacement_agent_id"] = json!(child_agent);
        s.ok(
            "lane_reassigned",
            json!({"lane_id": "build", "agent_id": "agent-1",
                   "from_state": "recovering", "to_state": "replaced",
                   "reason": "replacement checkpoint accepted",
                   "evidence_refs": evidence("checkpoint 3"), "metadata": metadata}),
        );
        s.ok(
            "replacement_repaired",
            json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "replaced",
                   "to_state": "replaced",
                   "metadata": {"original_lane_id": "build", "replacement_lane_id": "build-2",
                                "checkpoint_digest": "c".repeat(64)}}),
        );
        let rules: Vec<&str> = s.state.breaches().iter().map(|b| b.rule.as_str()).collect();
        if breached {
            assert_eq!(rules, [crate::coordinator::breach::UNFENCED_REPAIR]);
        } else {
            assert!(rules.is_empty(), "{rules:?}");
        }
    }
}

#[test]
fn metadata_of_the_wrong_type_is_named_once_the_reducer_needs_it() {
    // Each event's metadata is decoded where the reducer first needs it: a
    // field of the wrong type is named, unless a rule checked before (an
    // unknown lane or component, a broken lineage) refuses the event first.
    let mut s = Script::with_running_lane("build");
    let lane_step = |meta: Value| json!({"lane_id": "build", "metadata": meta});
    let unknown_lane = json!({"lane_id": "ghost", "metadata": {"probe_deadline": 5}});
    for (event_type, patch, message) in [
        (
            "lane_created",
            json!({"lane_id": "next", "agent_id": "agent-2",
                   "metadata": {"write_scope": "src", "fallback": 1}}),
            "event metadata field write_scope is malformed",
        ),
        (
            "lane_created",
            json!({"metadata": {"write_scope": "src"}}),
            "lane_created requires lane_id",
        ),
        (
            "lane_created",
            json!({"lane_id": "next", "agent_id": "agent-2",
                   "metadata": {"replacement_count": "1"}}),
            "event metadata field replacement_count is malformed",
        ),
        (
            "heartbeat_observed",
            lane_step(json!({"silence_lease_deadline": ["x"]})),
            "event metadata field silence_lease_deadline is malformed",
        ),
        (
            "heartbeat_observed",
            unknown_lane,
            "lane event references an unknown lane",
        ),
        (
            "transaction_committed",
            json!({"metadata": {"intents": {}}}),
            "event metadata field intents is malformed",
        ),
        (
            "topology_registered",
            json!({"metadata": {"components": [component("runtime", "build", &[]), 7]}}),
            "event metadata field components is malformed",
        ),
        (
            "evidence_attached",
            json!({"metadata": {"component_id": "runtime", "coverage_state": 3}}),
            "component evidence references an unknown component",
        ),
        (
            "replacement_repaired",
            json!({"metadata": {"original_lane_id": ["build"]}}),
            "event metadata field original_lane_id is malformed",
        ),
        (
            "handoff_recorded",
            json!({"metadata": {"report_kind": null}}),
            "event metadata field report_kind is malformed",
        ),
    ] {
        s.refused(event_type, patch, message);
    }
    s.ok(
        "topology_registered",
        json!({"metadata": {"components": [component("runtime", "build", &[])]}}),
    );
    s.refused(
        "evidence_attached",
        json!({"metadata": {"component_id": "runtime", "coverage_state": "everywhere"}}),
        "event metadata field coverage_state is malformed",
    );

    // A resolution's digests are checked after its lineage.
    let mut s = failed_and_resolved(evidence("rereview passed"));
    let failed = canonical::digest(&evidence("review failed"));
    let resolved = canonical::digest(&evidence("rereview passed"));
    let refs = binding(&[&failed, &resolved]);
    let mut bad_digest = resolution(&failed, &resolved, refs.clone());
    bad_digest["metadata"]["resolution_evidence_digest"] = json!(1);
    let mut bad_digest_and_lineage = bad_digest.clone();
    bad_digest_and_lineage["to_state"] = json!("completed");
    s.refused(
        "candidate_validated",
        bad_digest_and_lineage,
        "failure resolution lineage is invalid",
    );
    s.refused(
        "candidate_validated",
        bad_digest,
        "event metadata field resolution_evidence_digest is malformed",
    );
}
