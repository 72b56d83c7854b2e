//! Unit tests of the lane decisions on hand-made replayed states.

use crate::coordinator::decide::{RefusedLaneStep, lane_refused};
use serde_json::{Value, json};

use super::*;
use crate::coordinator::test_ledger::{
    LaneEvents, Ledger, needs_active_run, with, write_scope_refusals,
};
use crate::receipt::scope::canonicalize_lexical;

/// The lanes of these tests all belong to agent-1 and differ in scope.
impl Ledger {
    fn scoped_lane(&mut self, lane_id: &str, scope: Value) -> &mut Self {
        self.lane_with(
            lane_id,
            "agent-1",
            json!({"assignment": "work", "write_scope": scope, "fallback": "main"}),
        )
    }

    /// A heartbeat as the pipeline seals it (the evidence digest in its
    /// metadata): liveness evidence of the lane.
    fn digested_heartbeat(&mut self, lane_id: &str, evidence: &Value) -> &mut Self {
        self.raw(
            "heartbeat_observed",
            json!({"lane_id": lane_id, "agent_id": "agent-1", "from_state": "running",
                   "to_state": "running", "evidence_refs": evidence,
                   "metadata": {"evidence_digest": canonical::digest(evidence)}}),
        )
    }
}

/// A running run whose lane `l1` is forced into `state` (for the
/// source-state table).
fn state_with_lane_in(state: LaneState) -> CoordinatorState {
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("l1", json!(["src"]));
    let mut state_out = ledger.state;
    state_out.lanes.get_mut("l1").unwrap().state = state;
    state_out
}

fn evidence() -> Value {
    json!([{"kind": "test", "summary": "tests passed"}])
}

fn lexical(value: &Value) -> Result<Vec<String>, FlowError> {
    canonicalize_lexical(value, &Limits::default()).map_err(FlowError::contract)
}

fn create_input() -> Value {
    json!({
        "lane_id": "l1", "agent_id": "agent-1", "assignment": "Implement X",
        "write_scope": ["src/", "./docs", "src"], "fallback": "main session",
        "observed_at": "2026-07-14T01:00:00Z",
        "startup_ack_deadline": "2026-07-14T01:00:30Z",
        "command_deadline": "2026-07-14T01:10:00Z",
    })
}

fn invalid_msg(message: &str) -> FlowError {
    crate::coordinator::input_refusal::refused_as(message)
}

// ---------------------------------------------------------------- lane-create

#[test]
fn create_precheck_canonicalises_the_scope() {
    let request = precheck_lane_create(&create_input(), &evidence(), lexical).unwrap();
    assert_eq!(request.write_scope, vec!["src", "docs"]);
    assert_eq!(request.parent_lane_id, None);
    assert_eq!(request.replacement_count, json!(0));
    assert_eq!(request.observed_at, "2026-07-14T01:00:00Z");
}

#[test]
fn create_input_must_match_the_field_contract() {
    let mismatch = invalid_msg("JSON input fields do not match the command contract");
    let mut missing = create_input();
    missing.as_object_mut().unwrap().remove("fallback");
    assert_eq!(
        precheck_lane_create(&missing, &evidence(), lexical),
        Err(mismatch.clone())
    );
    assert_eq!(
        precheck_lane_create(
            &with(create_input(), "extra", json!(1)),
            &evidence(),
            lexical
        ),
        Err(mismatch)
    );
    // Both optional keys are accepted.
    let full = with(
        with(create_input(), "parent_lane_id", json!("l0")),
        "replacement_count",
        json!(1),
    );
    let request = precheck_lane_create(&full, &evidence(), lexical).unwrap();
    assert_eq!(request.parent_lane_id.as_deref(), Some("l0"));
    assert_eq!(request.replacement_count, json!(1));
}

#[test]
fn create_field_rules() {
    let cases = [
        (
            "lane_id",
            json!("../x"),
            "lane id must match the identifier contract",
        ),
        (
            "lane_id",
            json!(7),
            "lane id must match the identifier contract",
        ),
        (
            "agent_id",
            json!(""),
            "agent id must match the identifier contract",
        ),
        (
            "parent_lane_id",
            json!("a/b"),
            "parent lane id must match the identifier contract",
        ),
        (
            "assignment",
            json!(" \t\n\u{1c}\u{3000}"),
            "assignment must be non-empty",
        ),
        ("assignment", json!(null), "assignment must be non-empty"),
        ("fallback", json!(""), "fallback must be non-empty"),
        (
            "replacement_count",
            json!(-1),
            "replacement_count must be a non-negative integer",
        ),
        (
            "replacement_count",
            json!(true),
            "replacement_count must be a non-negative integer",
        ),
        (
            "replacement_count",
            json!(null),
            "replacement_count must be a non-negative integer",
        ),
        (
            "replacement_count",
            json!("1"),
            "replacement_count must be a non-negative integer",
        ),
        (
            "observed_at",
            json!("2026-07-14T01:00:00+00:00"),
            "observed_at must be a UTC timestamp",
        ),
        (
            "startup_ack_deadline",
            json!(5),
            "startup_ack_deadline must be a UTC timestamp",
        ),
        (
            "command_deadline",
            json!("2026-02-30T00:00:00Z"),
            "command_deadline must be a UTC timestamp",
        ),
    ];
    let scopes = write_scope_refusals().map(|(value, message)| ("write_scope", value, message));
    for (key, value, message) in cases.into_iter().chain(scopes) {
        assert_eq!(
            precheck_lane_create(
                &with(create_input(), key, value.clone()),
                &evidence(),
                lexical
            ),
            Err(invalid_msg(message)),
            "{key} = {value}"
        );
    }
    // A null parent is "no parent"; a huge count is kept exactly.
    let input = with(
        with(create_input(), "parent_lane_id", json!(null)),
        "replacement_count",
        serde_json::from_str::<Value>("100000000000000000000000000000").unwrap(),
    );
    let request = precheck_lane_create(&input, &evidence(), lexical).unwrap();
    assert_eq!(request.parent_lane_id, None);
    assert_eq!(
        canonical::to_string(&request.replacement_count),
        "100000000000000000000000000000"
    );
    // Printable non-ASCII text is not blank.
    assert!(
        precheck_lane_create(
            &with(create_input(), "assignment", json!("é")),
            &evidence(),
            lexical
        )
        .is_ok()
    );
}

#[test]
fn create_checks_run_in_the_reference_order() {
    // Bad id before bad assignment; bad count before the scope; the scope
    // before the deadlines; deadlines before evidence.
    let input = with(
        with(create_input(), "lane_id", json!("")),
        "assignment",
        json!(""),
    );
    assert_eq!(
        precheck_lane_create(&input, &json!([]), lexical),
        Err(invalid_msg("lane id must match the identifier contract"))
    );
    let input = with(
        with(create_input(), "replacement_count", json!(-1)),
        "write_scope",
        json!(7),
    );
    assert_eq!(
        precheck_lane_create(&input, &evidence(), lexical),
        Err(invalid_msg(
            "replacement_count must be a non-negative integer"
        ))
    );
    let input = with(
        with(create_input(), "write_scope", json!(["a/.."])),
        "observed_at",
        json!("never"),
    );
    assert_eq!(
        precheck_lane_create(&input, &evidence(), lexical),
        Err(invalid_msg("write scope must not contain traversal"))
    );
    let input = with(create_input(), "observed_at", json!("2026-07-14T02:00:00Z"));
    assert_eq!(
        precheck_lane_create(&input, &json!([]), lexical),
        Err(invalid_msg(
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline"
        ))
    );
    assert_eq!(
        precheck_lane_create(&create_input(), &json!([]), lexical),
        Err(invalid_msg("lifecycle transition requires evidence"))
    );
    // The canonicaliser is not consulted before the earlier checks pass.
    let input = with(create_input(), "fallback", json!(" "));
    assert_eq!(
        precheck_lane_create(&input, &evidence(), |_| panic!("called too early")),
        Err(invalid_msg("fallback must be non-empty"))
    );
}

#[test]
fn create_deadline_order() {
    let order = |observed: &str, startup: &str, command: &str| {
        let input = with(
            with(
                with(create_input(), "observed_at", json!(observed)),
                "startup_ack_deadline",
                json!(startup),
            ),
            "command_deadline",
            json!(command),
        );
        precheck_lane_create(&input, &evidence(), lexical).map(|_| ())
    };
    let bad = Err(invalid_msg(
        "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
    ));
    let (t0, t1, t2) = (
        "2026-07-14T01:00:00Z",
        "2026-07-14T01:00:30Z",
        "2026-07-14T01:10:00Z",
    );
    assert_eq!(order(t0, t1, t2), Ok(()));
    assert_eq!(order(t0, t1, t1), Ok(()), "startup == command is allowed");
    assert_eq!(order(t1, t1, t2), bad, "observed == startup is not");
    assert_eq!(order(t0, t2, t1), bad);
    // Instants, not strings: extra fraction digits are truncated.
    assert_eq!(
        order(
            "2026-07-14T01:00:00.0000001Z",
            "2026-07-14T01:00:00.0000009Z",
            t2
        ),
        bad
    );
    assert_eq!(
        order("2026-07-14T01:00:00.9Z", "2026-07-14T01:00:01Z", t2),
        Ok(())
    );
}

#[test]
fn create_decision() {
    let request = precheck_lane_create(&create_input(), &evidence(), lexical).unwrap();
    let policy = Policy::default();
    let intents =
        decide_lane_create(&Ledger::running(&[]).state, &policy, &request, &evidence()).unwrap();
    assert_eq!(intents.len(), 1);
    let intent = &intents[0];
    assert_eq!(intent.event_type, "lane_created");
    assert_eq!(intent.timestamp.as_deref(), Some("2026-07-14T01:00:00Z"));
    assert_eq!(intent.from_state, None);
    assert_eq!(intent.to_state.map(|s| s.as_str()), Some("pending"));
    assert_eq!(intent.lane_id.as_deref(), Some("l1"));
    assert_eq!(intent.agent_id.as_deref(), Some("agent-1"));
    assert_eq!(intent.reason, None);
    assert_eq!(intent.evidence_refs, evidence());
    assert_eq!(
        Value::Object(intent.metadata.clone()),
        json!({"assignment": "Implement X", "write_scope": ["src", "docs"],
               "fallback": "main session", "startup_ack_deadline": "2026-07-14T01:00:30Z",
               "command_deadline": "2026-07-14T01:10:00Z", "parent_lane_id": null,
               "replacement_count": 0})
    );
}

#[test]
fn create_needs_an_active_run_a_new_id_and_room() {
    let request = precheck_lane_create(&create_input(), &evidence(), lexical).unwrap();
    let policy = Policy::default();
    assert_eq!(
        decide_lane_create(&Ledger::planned(&[]).state, &policy, &request, &evidence()),
        Err(needs_active_run(RunState::Planned))
    );
    let mut ledger = Ledger::running(&[]);
    ledger.run_step("run_recovery_started", "running", "recovering");
    assert!(decide_lane_create(&ledger.state, &policy, &request, &evidence()).is_ok());
    ledger.scoped_lane("l1", json!([]));
    assert_eq!(
        decide_lane_create(&ledger.state, &policy, &request, &evidence()),
        Err(lane_refused::exists("l1", LaneState::Pending))
    );
    // The limit comes from the run's policy, and counts every lane.
    let mut small = Policy::default();
    small.limits.max_lanes = 2;
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("a", json!([]));
    ledger.step("lane_cancelled", "a", "pending", "cancelled");
    let other = LaneCreate {
        lane_id: crate::receipt::primitives::LaneId::parse("l2").unwrap(),
        ..request.clone()
    };
    assert!(decide_lane_create(&ledger.state, &small, &request, &evidence()).is_ok());
    ledger.scoped_lane("l1", json!([]));
    assert_eq!(
        decide_lane_create(&ledger.state, &small, &other, &evidence()),
        Err(FlowError::from(LaneRefusal::LimitReached {
            max_lanes: small.limits.max_lanes
        }))
    );
    // A duplicate id is reported before the limit.
    assert_eq!(
        decide_lane_create(&ledger.state, &small, &request, &evidence()),
        Err(lane_refused::exists("l1", LaneState::Pending))
    );
}

#[test]
fn a_child_lane_stays_within_its_parents_scope() {
    let policy = Policy::default();
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("build", json!(["src"]));
    // A write scope that only a hand-made receipt could hold.
    ledger.scoped_lane("odd", json!(["src/"]));
    let create_child = |state: &CoordinatorState, parent: &str, scope: Value| {
        let input = with(
            with(
                with(create_input(), "lane_id", json!("fix")),
                "write_scope",
                scope,
            ),
            "parent_lane_id",
            json!(parent),
        );
        let request = precheck_lane_create(&input, &evidence(), lexical).unwrap();
        decide_lane_create(state, &policy, &request, &evidence())
    };
    assert!(create_child(&ledger.state, "build", json!(["src/a"])).is_ok());
    assert!(create_child(&ledger.state, "build", json!([])).is_ok());
    assert_eq!(
        create_child(&ledger.state, "build", json!(["src/a", "lib"])),
        Err(invalid_msg(
            "child lane write scope must be equal to or narrower than its parent's"
        ))
    );
    assert_eq!(
        create_child(&ledger.state, "odd", json!(["src"])),
        Err(FlowError::from(InputRefusal::MalformedScope {
            parent: true,
            rule: "write scope must be canonical and relative"
        }))
    );
    // As in the reference, the parent need not exist; then nothing narrows.
    assert!(create_child(&ledger.state, "elsewhere", json!(["lib"])).is_ok());
    // The reference's in-lock refusals keep their precedence.
    ledger.scoped_lane("fix", json!([]));
    assert_eq!(
        create_child(&ledger.state, "build", json!(["lib"])),
        Err(lane_refused::exists("fix", LaneState::Pending))
    );
}

// ------------------------------------------------------------ transitions

fn transition<'a>(command: LaneCommand, evidence: &'a Value) -> LaneTransition<'a> {
    LaneTransition {
        command,
        lane_id: "l1",
        agent_id: "agent-1",
        at: "2026-07-14T01:05:00Z",
        evidence,
        reason: if command.takes_reason() {
            Some("because")
        } else {
            None
        },
        changed_paths: None,
    }
}

const ALL_COMMANDS: [LaneCommand; 7] = [
    LaneCommand::Start,
    LaneCommand::StartupAck,
    LaneCommand::ProbeAck,
    LaneCommand::Complete,
    LaneCommand::Fail,
    LaneCommand::Block,
    LaneCommand::Cancel,
];

#[test]
fn the_transition_table() {
    use LaneState::*;
    let ev = evidence();
    let paths = json!([]);
    let expected: [(LaneCommand, &[LaneState], &str, LaneState); 7] = [
        (LaneCommand::Start, &[Pending], "lane_started", Starting),
        (LaneCommand::StartupAck, &[Starting], "startup_ack", Running),
        (
            LaneCommand::ProbeAck,
            &[Recovering],
            "probe_acknowledged",
            Running,
        ),
        (
            LaneCommand::Complete,
            &[Running],
            "lane_completed",
            Completed,
        ),
        (
            LaneCommand::Fail,
            &[Starting, Running, SuspectedStall, Recovering],
            "lane_failed",
            Failed,
        ),
        (
            LaneCommand::Block,
            &[Starting, Running, SuspectedStall, Recovering],
            "lane_blocked",
            Blocked,
        ),
        (
            LaneCommand::Cancel,
            &[Pending, Starting, Running, SuspectedStall, Recovering],
            "lane_cancelled",
            Cancelled,
        ),
    ];
    for (command, sources, event_type, target) in expected {
        for from in LaneState::ALL {
            let state = state_with_lane_in(from);
            let mut request = transition(command, &ev);
            request.changed_paths = Some(&paths);
            let result = decide_lane_transition(&state, &request, lexical);
            if from.is_terminal() || from == Replaced {
                assert_eq!(
                    result,
                    Err(lane_refused::inactive("l1", from)),
                    "{command:?} {from:?}"
                );
            } else if sources.contains(&from) {
                let intents = result.unwrap();
                assert_eq!(intents.len(), 1);
                let intent = &intents[0];
                assert_eq!(intent.event_type, event_type);
                assert_eq!(intent.from_state.map(|s| s.as_str()), Some(from.as_str()));
                assert_eq!(intent.to_state.map(|s| s.as_str()), Some(target.as_str()));
                assert_eq!(intent.lane_id.as_deref(), Some("l1"));
                assert_eq!(intent.agent_id.as_deref(), Some("agent-1"));
                assert_eq!(intent.timestamp.as_deref(), Some("2026-07-14T01:05:00Z"));
                assert_eq!(intent.evidence_refs, ev);
                assert_eq!(intent.reason.as_deref(), request.reason);
                let metadata = Value::Object(intent.metadata.clone());
                if command == LaneCommand::Complete {
                    assert_eq!(metadata, json!({"changed_paths": []}));
                } else {
                    assert_eq!(metadata, json!({}));
                }
            } else {
                assert_eq!(
                    result,
                    Err(lane_refused::state(
                        "l1",
                        from,
                        sources,
                        RefusedLaneStep::Lifecycle
                    )),
                    "{command:?} {from:?}"
                );
            }
        }
    }
    for command in ALL_COMMANDS {
        assert_eq!(
            command.takes_reason(),
            matches!(
                command,
                LaneCommand::Fail | LaneCommand::Block | LaneCommand::Cancel
            )
        );
    }
}

#[test]
fn transition_checks_run_in_the_reference_order() {
    let ev = evidence();
    // Run state first, even for a lane that does not exist.
    let mut request = transition(LaneCommand::Start, &ev);
    request.lane_id = "ghost";
    assert_eq!(
        decide_lane_transition(&Ledger::planned(&[]).state, &request, lexical),
        Err(needs_active_run(RunState::Planned))
    );
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("l1", json!(["src"]));
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(lane_refused::missing("ghost", &["l1"]))
    );
    // A foreign agent on a live lane; on a terminal lane "not active" wins.
    let mut request = transition(LaneCommand::Start, &ev);
    request.agent_id = "agent-2";
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(lane_refused::not_owner("l1", "agent-2", "agent-1"))
    );
    ledger.step("lane_cancelled", "l1", "pending", "cancelled");
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(lane_refused::inactive("l1", LaneState::Cancelled))
    );
    // Agent ownership before the source state.
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("l1", json!(["src"]));
    let mut request = transition(LaneCommand::StartupAck, &ev);
    request.agent_id = "agent-2";
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(lane_refused::not_owner("l1", "agent-2", "agent-1"))
    );
    // Lanes move in a recovering run too.
    ledger.run_step("run_recovery_started", "running", "recovering");
    assert!(
        decide_lane_transition(&ledger.state, &transition(LaneCommand::Start, &ev), lexical)
            .is_ok()
    );
}

#[test]
fn probe_ack_after_an_interrupt_is_fenced() {
    let ev = evidence();
    let mut ledger = Ledger::running(&[]);
    ledger
        .scoped_lane("l1", json!(["src"]))
        .start_lane("l1")
        .probe_lane("l1");
    let probe_ack = |state: &CoordinatorState| {
        decide_lane_transition(state, &transition(LaneCommand::ProbeAck, &ev), lexical)
    };
    // Before any interrupt the ACK revives the lane.
    let intents = probe_ack(&ledger.state).unwrap();
    assert_eq!(intents[0].event_type, "probe_acknowledged");
    // decisions.md 9: after interrupt-result, refused (exit 5).
    ledger.step("agent_interrupted", "l1", "recovering", "recovering");
    assert_eq!(
        probe_ack(&ledger.state),
        Err(FlowError::from(LaneRefusal::Fenced {
            lane_id: "l1".into(),
            agent_id: "agent-1".into()
        }))
    );
    // A second interrupt keeps the fence; fail/block/cancel stay possible.
    ledger.step("agent_interrupted", "l1", "recovering", "recovering");
    assert!(probe_ack(&ledger.state).is_err());
    for command in [LaneCommand::Fail, LaneCommand::Block, LaneCommand::Cancel] {
        assert!(decide_lane_transition(&ledger.state, &transition(command, &ev), lexical).is_ok());
    }
    // The ordinary checks still come first.
    let mut request = transition(LaneCommand::ProbeAck, &ev);
    request.agent_id = "agent-2";
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(lane_refused::not_owner("l1", "agent-2", "agent-1"))
    );
}

// ----------------------------------------------------------- lane-complete

fn complete(
    state: &CoordinatorState,
    evidence: &Value,
    paths: Value,
) -> Result<Vec<Intent>, FlowError> {
    let mut request = transition(LaneCommand::Complete, evidence);
    request.changed_paths = Some(&paths);
    decide_lane_transition(state, &request, lexical)
}

/// Completing lane l1 with each of `changed_paths` is refused with
/// `refusal`.
#[track_caller]
fn assert_completion_refused(
    state: &CoordinatorState,
    changed_paths: &[&[&str]],
    refusal: &Result<Vec<Intent>, FlowError>,
) {
    for paths in changed_paths {
        assert_eq!(
            &complete(state, &evidence(), json!(paths)),
            refusal,
            "{paths:?}"
        );
    }
}

fn running_lane(scope: Value) -> Ledger {
    let mut ledger = Ledger::running(&[]);
    ledger.scoped_lane("l1", scope).start_lane("l1");
    ledger
}

#[test]
fn complete_records_the_changed_paths() {
    let ledger = running_lane(json!(["src", "docs/api"]));
    let intents = complete(
        &ledger.state,
        &evidence(),
        json!(["src/a.rs", "docs/api", "src"]),
    )
    .unwrap();
    assert_eq!(intents[0].event_type, "lane_completed");
    assert_eq!(intents[0].reason, None);
    assert_eq!(
        Value::Object(intents[0].metadata.clone()),
        json!({"changed_paths": ["src/a.rs", "docs/api", "src"]})
    );
}

#[test]
fn a_heartbeat_is_never_completion_evidence() {
    let beat = json!([{"kind": "heartbeat", "summary": "still working"}]);
    let later = json!([{"kind": "heartbeat", "summary": "still working, later"}]);
    let mut ledger = running_lane(json!(["src"]));
    ledger.digested_heartbeat("l1", &beat);
    assert_eq!(
        complete(&ledger.state, &beat, json!(["src/a.rs"])),
        Err(invalid_msg("liveness evidence cannot complete a lane"))
    );
    // Stricter than the reference (which only compares with this lane's
    // latest liveness evidence, §7): an older heartbeat of the same lane...
    ledger.digested_heartbeat("l1", &later);
    assert_eq!(
        complete(&ledger.state, &later, json!(["src/a.rs"])),
        Err(invalid_msg("liveness evidence cannot complete a lane"))
    );
    assert_eq!(
        complete(&ledger.state, &beat, json!(["src/a.rs"])),
        Err(invalid_msg("liveness evidence cannot complete a lane"))
    );
    // ...and another lane's liveness evidence are refused too.
    let mut ledger = running_lane(json!(["src"]));
    ledger
        .scoped_lane("l2", json!(["src"]))
        .start_lane("l2")
        .digested_heartbeat("l2", &beat);
    assert_eq!(
        complete(&ledger.state, &beat, json!(["src/a.rs"])),
        Err(invalid_msg("liveness evidence cannot complete a lane"))
    );
    // Completion evidence of its own completes the lane.
    let result = json!([{"kind": "test", "summary": "tests passed"}]);
    assert!(complete(&ledger.state, &result, json!(["src/a.rs"])).is_ok());
    // The liveness check comes before the changed-path rules.
    let mut ledger = running_lane(json!(["src"]));
    ledger.digested_heartbeat("l1", &beat);
    assert_eq!(
        complete(&ledger.state, &beat, json!(["elsewhere"])),
        Err(invalid_msg("liveness evidence cannot complete a lane"))
    );
}

#[test]
fn complete_validates_the_evidence_before_digesting_it() {
    let ledger = running_lane(json!(["src"]));
    let bad = json!([{"kind": "k", "summary": "s", "token": "x"}]);
    assert_eq!(
        complete(&ledger.state, &bad, json!(["elsewhere"])),
        Err(invalid_msg(
            "evidence reference contains unsupported fields"
        ))
    );
}

#[test]
fn changed_paths_must_already_be_canonical() {
    let ledger = running_lane(json!(["src"]));
    assert_completion_refused(
        &ledger.state,
        &[
            &["./src/a"],
            &["src/a/"],
            &["src//a"],
            &["src/./a"],
            &["src/a", "src/a"],
        ],
        &Err(invalid_msg("changed paths must already be canonical")),
    );
    // Canonicaliser refusals pass through with their own message (exit 2).
    assert_eq!(
        complete(&ledger.state, &evidence(), json!(["src/../x"])),
        Err(invalid_msg("write scope must not contain traversal"))
    );
    let many: Vec<String> = (0..33).map(|i| format!("src/{i}")).collect();
    assert_eq!(
        complete(&ledger.state, &evidence(), json!(many)),
        Err(invalid_msg("write_scope must be a bounded list"))
    );
    // Non-canonical beats out-of-scope (2 before 5).
    assert_eq!(
        complete(&ledger.state, &evidence(), json!(["./other"])),
        Err(invalid_msg("changed paths must already be canonical"))
    );
    // A missing list is refused.
    let ev = evidence();
    let request = transition(LaneCommand::Complete, &ev);
    assert_eq!(
        decide_lane_transition(&ledger.state, &request, lexical),
        Err(invalid_msg(
            "lane completion requires verified changed paths"
        ))
    );
}

#[test]
fn changed_paths_must_stay_in_the_pinned_scope() {
    let ledger = running_lane(json!(["src", "docs/api"]));
    for (paths, outside) in [
        (&["srcx/a"][..], &["srcx/a"][..]),
        (&["srcx"], &["srcx"]),
        (&["docs"], &["docs"]),
        (&["docs/apix"], &["docs/apix"]),
        (&["src/a", "lib/b"], &["lib/b"]),
        (&["."], &["."]),
    ] {
        let refused = outside_scope(outside, &["src", "docs/api"]);
        assert_completion_refused(&ledger.state, &[paths], &refused);
    }
    // An empty scope allows only an empty change list.
    let ledger = running_lane(json!([]));
    assert!(complete(&ledger.state, &evidence(), json!([])).is_ok());
    assert_eq!(
        complete(&ledger.state, &evidence(), json!(["a"])),
        outside_scope(&["a"], &[])
    );
    // A "." scope entry allows exactly "." (as in the reference).
    let ledger = running_lane(json!(["."]));
    assert!(complete(&ledger.state, &evidence(), json!(["."])).is_ok());
    assert_eq!(
        complete(&ledger.state, &evidence(), json!(["a"])),
        outside_scope(&["a"], &["."])
    );
}

/// Lane l1's completion refused: `outside` lie outside `write_scope`.
fn outside_scope(outside: &[&str], write_scope: &[&str]) -> Result<Vec<Intent>, FlowError> {
    let owned = |paths: &[&str]| paths.iter().map(|p| p.to_string()).collect();
    Err(FlowError::from(LaneRefusal::OutsideScope {
        lane_id: "l1".into(),
        outside: owned(outside),
        write_scope: owned(write_scope),
    }))
}

#[test]
fn within_scope_is_component_wise() {
    let scope = vec!["src".to_string(), "a/b".to_string()];
    assert!(within_scope("src", &scope));
    assert!(within_scope("src/x/y", &scope));
    assert!(within_scope("a/b/c", &scope));
    assert!(!within_scope("a", &scope));
    assert!(!within_scope("a/bc", &scope));
    assert!(!within_scope("srcx", &scope));
    assert!(!within_scope("x/src", &scope));
    assert!(!within_scope("src", &[]));
}

#[test]
fn transition_prechecks() {
    let ev = evidence();
    let ok = transition(LaneCommand::Start, &ev);
    assert_eq!(precheck_lane_transition(&ok), Ok(()));
    let cases: [(LaneTransition<'_>, &str); 4] = [
        (
            LaneTransition {
                lane_id: "../x",
                ..ok
            },
            "lane id must match the identifier contract",
        ),
        (
            LaneTransition { agent_id: "", ..ok },
            "agent id must match the identifier contract",
        ),
        (
            LaneTransition {
                at: "2026-07-14T01:00Z",
                ..ok
            },
            "decided_at must be a UTC timestamp",
        ),
        (
            LaneTransition {
                evidence: &Value::Array(vec![]),
                ..ok
            },
            "lifecycle transition requires evidence",
        ),
    ];
    for (request, message) in cases {
        assert_eq!(
            precheck_lane_transition(&request),
            Err(invalid_msg(message))
        );
    }
    // Ids before --at before evidence.
    let all_bad = LaneTransition {
        lane_id: "",
        at: "x",
        evidence: &Value::Null,
        ..ok
    };
    assert_eq!(
        precheck_lane_transition(&all_bad),
        Err(invalid_msg("lane id must match the identifier contract"))
    );
}

#[test]
fn changed_paths_input_shape() {
    assert_eq!(check_changed_paths_input(&json!([])), Ok(()));
    assert_eq!(check_changed_paths_input(&json!(["a", "./b"])), Ok(()));
    for bad in [json!([""]), json!(["a", 1]), json!([null]), json!({})] {
        assert_eq!(
            check_changed_paths_input(&bad),
            Err(invalid_msg("changed paths must be non-empty strings")),
            "{bad}"
        );
    }
}

#[test]
fn require_fields_rule() {
    let input = json!({"a": 1, "b": 2});
    assert!(require_fields(&input, &["a", "b"], &[]).is_ok());
    assert!(require_fields(&input, &["a"], &["b", "c"]).is_ok());
    assert!(require_fields(&input, &["a", "b", "c"], &[]).is_err());
    assert!(require_fields(&input, &["a"], &[]).is_err());
    assert!(require_fields(&json!([]), &[], &[]).is_err());
}
