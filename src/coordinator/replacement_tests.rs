//! Unit tests of the replacement decisions on hand-made states. Decisions
//! that succeed are committed back through the replay reducer (as the
//! pipeline would seal them), so every test also proves the reducer accepts
//! what the decision proposes.

use crate::coordinator::decide::lane_refused;
use crate::coordinator::replacement_refusal::ReplacementRefusal as Refused;
use serde_json::{Value, json};

use super::*;
use crate::coordinator::state::RunState;
use crate::coordinator::test_ledger::{
    LaneEvents, Ledger, assert_reassigned, checkpoint_evidence, ev, intents_json, needs_active_run,
    reassign_input, with,
};
use LineageCommand::{Block, Close, Repair};

/// The lane stages a replacement starts from.
impl Ledger {
    /// Run, lane `build` (agent-1, scope `src`) interrupted.
    fn interrupted() -> Ledger {
        let mut ledger = Ledger::running(&["runtime"]);
        ledger
            .lane_with("build", "agent-1", json!({}))
            .start_lane("build")
            .interrupt_lane("build");
        ledger
    }

    fn lane_json(&self, id: &str) -> Value {
        self.state.lane(id).unwrap().to_json()
    }
}

/// `reassign_input()` with `key` set to `value`.
fn reassign_with(key: &str, value: Value) -> Value {
    with(reassign_input(), key, value)
}

/// The scope canonicaliser stand-in: lists of strings pass unchanged.
fn identity_scope(value: &Value) -> Result<Vec<String>, FlowError> {
    match value {
        Value::Array(items) => Ok(items
            .iter()
            .map(|i| i.as_str().unwrap().to_string())
            .collect()),
        _ => Err(crate::coordinator::input_refusal::refused_as(
            "write_scope must be a bounded list",
        )),
    }
}

fn precheck(input: &Value, evidence: &Value) -> Result<Reassign, FlowError> {
    precheck_reassign(input, evidence, identity_scope)
}

fn bad<T>(message: &str) -> Result<T, FlowError> {
    Err(crate::coordinator::input_refusal::refused_as(message))
}

fn refused<T>(reason: Refused) -> Result<T, FlowError> {
    Err(FlowError::from(reason))
}

/// A lineage step refused because `lane_id` is not `replaced` (`state`).
fn not_replaced<T>(
    command: LineageCommand,
    lane_id: &str,
    state: Option<LaneState>,
) -> Result<T, FlowError> {
    refused(Refused::NotReplaced {
        command,
        lane_id: lane_id.into(),
        state,
    })
}

/// A repair or block of build naming `given`, where build reserved build-2.
fn not_reserved<T>(command: LineageCommand, given: &str) -> Result<T, FlowError> {
    refused(Refused::NotReserved {
        command,
        lane_id: "build".into(),
        given: given.into(),
        reserved: Some("build-2".into()),
    })
}

/// The reserved child `replacement_lane_id` exists (pending).
fn exists<T>(replacement_lane_id: &str) -> Result<T, FlowError> {
    refused(Refused::ReplacementExists {
        replacement_lane_id: replacement_lane_id.into(),
        state: LaneState::Pending,
    })
}

fn request() -> Reassign {
    precheck(&reassign_input(), &checkpoint_evidence()).unwrap()
}

/// The reassign decision for `request()` under the default policy, with
/// checkpoint evidence.
fn reassign(ledger: &Ledger) -> Result<Vec<Intent>, FlowError> {
    decide_reassign(
        &ledger.state,
        &Policy::default(),
        &request(),
        &checkpoint_evidence(),
    )
}

/// The creation metadata of the replacement `build-2` that a reassign, or
/// a repair of its reservation, proposes.
fn child_metadata() -> Value {
    json!({
        "assignment": "Resume build from checkpoint 3", "write_scope": ["src/runtime"],
        "fallback": "main session", "startup_ack_deadline": "2026-07-14T01:11:30Z",
        "command_deadline": "2026-07-14T01:30:00Z", "parent_lane_id": "build",
        "replacement_count": 1,
    })
}

/// One lineage decision, called as the command it stands for.
fn decide(
    command: LineageCommand,
) -> impl Fn(&CoordinatorState, &Lineage, &Value) -> Result<Vec<Intent>, FlowError> {
    move |state, request, evidence| decide_lineage(state, command, request, evidence)
}

fn lineage(lane: &str, replacement: &str) -> Lineage {
    Lineage {
        lane_id: lane.into(),
        replacement_lane_id: replacement.into(),
        at: "2026-07-14T01:21:00Z".into(),
    }
}

// ------------------------------------------------------------- prechecks

#[test]
fn reassign_input_must_match_the_field_contract() {
    let mut missing = reassign_input();
    missing.as_object_mut().unwrap().remove("decided_at");
    let extra = reassign_with("fallback", json!("x"));
    for input in [missing, extra, json!({})] {
        assert_eq!(
            precheck(&input, &checkpoint_evidence()),
            bad("JSON input fields do not match the command contract")
        );
    }
}

#[test]
fn reassign_ids_are_checked_first_and_in_order() {
    let ev = checkpoint_evidence();
    // Even with every later field broken, the first id decides.
    let mut worst = reassign_with("lane_id", json!("../x"));
    worst["replacement_agent_id"] = json!(7);
    worst["replacement_assignment"] = json!("");
    assert_eq!(
        precheck(&worst, &json!([])),
        bad("lane id must match the identifier contract")
    );
    assert_eq!(
        precheck(&reassign_with("lane_id", json!(null)), &ev),
        bad("lane id must match the identifier contract")
    );
    assert_eq!(
        precheck(&reassign_with("replacement_lane_id", json!("")), &ev),
        bad("replacement lane id must match the identifier contract")
    );
    assert_eq!(
        precheck(&reassign_with("replacement_agent_id", json!(["a"])), &ev),
        bad("replacement agent id must match the identifier contract")
    );
    assert_eq!(
        precheck(&reassign_with("replacement_lane_id", json!("build")), &ev),
        bad("replacement lane id must differ from original")
    );
}

#[test]
fn reassign_assignment_must_name_the_checkpoint() {
    let ev = checkpoint_evidence();
    for empty in [json!(""), json!("  \n"), json!(null), json!(3)] {
        assert_eq!(
            precheck(&reassign_with("replacement_assignment", empty), &ev),
            bad("replacement assignment must be non-empty")
        );
    }
    assert_eq!(
        precheck(
            &reassign_with("replacement_assignment", json!("Resume build")),
            &ev
        ),
        bad("replacement assignment must identify recovered checkpoint context")
    );
    // Case-insensitive.
    let upper = reassign_with("replacement_assignment", json!("Resume from CHECKPOINT 3"));
    assert!(precheck(&upper, &ev).is_ok());
}

#[test]
fn reassign_needs_checkpoint_recovery_evidence() {
    let input = reassign_input();
    assert_eq!(
        precheck(&input, &json!([])),
        bad("lifecycle transition requires evidence")
    );
    for evidence in [
        json!([{"kind": "tool", "summary": "checkpoint 3"}]),
        json!([{"kind": "recovery", "summary": "notes recovered"}]),
        json!([{"kind": "recovery"}]),
        json!([{"kind": "recovery", "summary": 3}]),
        json!(["recovery checkpoint"]),
        json!([{"kind": "Recovery", "summary": "checkpoint"}]),
    ] {
        assert_eq!(
            precheck(&input, &evidence),
            bad("checkpoint recovery evidence is required"),
            "{evidence}"
        );
    }
    let mixed = json!([{"kind": "tool", "summary": "x"},
                       {"kind": "recovery", "summary": "CheckPoint 3 restored"}]);
    assert!(precheck(&input, &mixed).is_ok());
}

#[test]
fn reassign_scope_comes_after_evidence_and_before_deadlines() {
    let broken_deadline = reassign_with("decided_at", json!("yesterday"));
    let refuse_scope = |_: &Value| -> Result<Vec<String>, FlowError> {
        Err(crate::coordinator::input_refusal::refused_as(
            "contained path includes a symlink",
        ))
    };
    assert_eq!(
        precheck_reassign(&broken_deadline, &checkpoint_evidence(), refuse_scope),
        bad("contained path includes a symlink")
    );
    // The canonicaliser is not consulted when an earlier check fails.
    let untouched = |_: &Value| -> Result<Vec<String>, FlowError> { panic!("scope consulted") };
    assert_eq!(
        precheck_reassign(&reassign_input(), &json!([]), untouched),
        bad("lifecycle transition requires evidence")
    );
    // The canonical form is what the request keeps.
    let canonical = precheck_reassign(&reassign_input(), &checkpoint_evidence(), |_| {
        Ok(vec!["src/runtime".into(), "docs".into()])
    })
    .unwrap();
    assert_eq!(canonical.replacement_write_scope, ["src/runtime", "docs"]);
}

#[test]
fn reassign_deadlines_must_be_ordered() {
    let ev = checkpoint_evidence();
    let cases = [
        (
            "decided_at",
            json!("2026-07-14 01:11:00Z"),
            "observed_at must be a UTC timestamp",
        ),
        (
            "decided_at",
            json!(null),
            "observed_at must be a UTC timestamp",
        ),
        (
            "replacement_startup_ack_deadline",
            json!("2026-02-30T00:00:00Z"),
            "startup_ack_deadline must be a UTC timestamp",
        ),
        (
            "replacement_command_deadline",
            json!(5),
            "command_deadline must be a UTC timestamp",
        ),
        (
            "replacement_startup_ack_deadline",
            json!("2026-07-14T01:11:00Z"),
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
        ),
        (
            "replacement_command_deadline",
            json!("2026-07-14T01:11:29.999999Z"),
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
        ),
    ];
    for (key, value, message) in cases {
        assert_eq!(
            precheck(&reassign_with(key, value), &ev),
            bad(message),
            "{key}"
        );
    }
    // startup == command is allowed; fractions beyond microseconds are cut.
    let equal = reassign_with(
        "replacement_command_deadline",
        json!("2026-07-14T01:11:30.0000009Z"),
    );
    assert!(precheck(&equal, &ev).is_ok());
}

#[test]
fn lineage_prechecks_ids_then_time_then_evidence() {
    let ev = ev("x");
    let at = "2026-07-14T01:21:00Z";
    assert_eq!(
        precheck_lineage("../x", "-", "never", &json!([])),
        bad("lane id must match the identifier contract")
    );
    assert_eq!(
        precheck_lineage("build", "-", "never", &json!([])),
        bad("replacement lane id must match the identifier contract")
    );
    assert_eq!(
        precheck_lineage("build", "build-2", "2026-07-14T01:21:00", &json!([])),
        bad("timestamp must be UTC ISO-8601 ending in Z")
    );
    assert_eq!(
        precheck_lineage("build", "build-2", at, &json!([])),
        bad("lifecycle transition requires evidence")
    );
    // The same id twice is not a precheck failure (the state decides).
    assert_eq!(
        precheck_lineage("build", "build", at, &ev),
        Ok(lineage("build", "build"))
    );
}

// ------------------------------------------------------------ lane-reassign

#[test]
fn reassign_writes_the_lineage_transaction() {
    let mut ledger = Ledger::interrupted();
    let intents = reassign(&ledger).unwrap();
    assert_eq!(
        intents_json(&intents),
        json!([{"event_type": "lane_reassigned", "lane_id": "build", "agent_id": "agent-1",
                "from_state": "recovering", "to_state": "replaced",
                "timestamp": "2026-07-14T01:11:00Z", "reason": "replacement checkpoint accepted",
                "evidence_refs": checkpoint_evidence(),
                // with the digest of the reference fixture's reassign evidence
                "metadata": reservation_metadata(json!({}))},
               {"event_type": "lane_created", "lane_id": "build-2", "agent_id": "agent-2",
                "from_state": null, "to_state": "pending",
                "timestamp": "2026-07-14T01:11:00Z", "reason": null,
                "evidence_refs": checkpoint_evidence(), "metadata": child_metadata()}])
    );

    ledger.commit(intents);
    assert_reassigned(&ledger.lane_json("build"), &ledger.lane_json("build-2"));
    assert!(ledger.state.incomplete_replacements().is_empty());
}

#[test]
fn reassign_keeps_the_original_fallback_unless_empty() {
    for (fallback, expected) in [
        (json!("page the lead"), "page the lead"),
        (json!(""), "main session"),
        (json!(null), "main session"),
    ] {
        let mut ledger = Ledger::running(&["runtime"]);
        ledger
            .lane_with("build", "agent-1", json!({"fallback": fallback}))
            .start_lane("build")
            .interrupt_lane("build");
        let intents = reassign(&ledger).unwrap();
        assert_eq!(intents[0].metadata["replacement_fallback"], expected);
        assert_eq!(intents[1].metadata["fallback"], expected);
    }
}

#[test]
fn reassign_needs_an_active_run_and_an_interrupted_lane() {
    let mut ledger = Ledger::interrupted();
    ledger.run_step("run_recovery_started", "running", "recovering");
    assert!(reassign(&ledger).is_ok());
    ledger.run_step("run_blocked", "recovering", "blocked");
    assert_eq!(reassign(&ledger), Err(needs_active_run(RunState::Blocked)));

    let mut ledger = Ledger::running(&["runtime"]);
    assert_eq!(reassign(&ledger), Err(lane_refused::missing("build", &[])));
    ledger
        .lane_with("build", "agent-1", json!({}))
        .start_lane("build");
    assert_eq!(
        reassign(&ledger),
        refused(Refused::NotRecovering {
            lane_id: "build".into(),
            state: LaneState::Running
        })
    );
    ledger.probe_lane("build");
    // Recovering, but the probe is still out: no interrupt recorded.
    assert_eq!(
        reassign(&ledger),
        refused(Refused::NotInterrupted {
            lane_id: "build".into(),
            last_event: EventType::ProbeSent
        })
    );
    ledger.step("lane_failed", "build", "recovering", "failed");
    assert_eq!(
        reassign(&ledger),
        Err(lane_refused::inactive("build", LaneState::Failed))
    );
}

#[test]
fn reassign_replacement_must_differ_and_stay_inside_the_scope() {
    let ledger = Ledger::interrupted();
    let policy = Policy::default();
    let ev = checkpoint_evidence();
    let decide = |r: &Reassign| decide_reassign(&ledger.state, &policy, r, &ev);

    let mut same_agent = request();
    same_agent.replacement_agent_id = "agent-1".into();
    assert_eq!(
        decide(&same_agent),
        bad("replacement agent must differ from original")
    );
    let mut same_work = request();
    same_work.replacement_assignment = "Work on build".into();
    assert_eq!(
        decide(&same_work),
        bad("replacement assignment must describe resumed work")
    );
    for wider in [vec!["lib"], vec!["src", "lib"], vec!["srcx"]] {
        let mut r = request();
        r.replacement_write_scope = wider.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            decide(&r),
            bad("replacement write scope must be equal or narrower")
        );
    }
    for narrower in [vec![], vec!["src"], vec!["src/a", "src/b"]] {
        let mut r = request();
        r.replacement_write_scope = narrower.iter().map(|s| s.to_string()).collect();
        assert!(decide(&r).is_ok());
    }
}

#[test]
fn reassign_exit_code_precedence() {
    // The replacement id exists (5) AND the agent is the original (2): the
    // agent check runs first, so the answer is exit 2.
    let mut ledger = Ledger::interrupted();
    ledger.lane_with("build-2", "agent-9", json!({}));
    let policy = Policy::default();
    let ev = checkpoint_evidence();
    let mut r = request();
    r.replacement_agent_id = "agent-1".into();
    assert_eq!(
        decide_reassign(&ledger.state, &policy, &r, &ev),
        bad("replacement agent must differ from original")
    );
    assert_eq!(
        reassign(&ledger),
        Err(lane_refused::exists("build-2", LaneState::Pending))
    );
    // An existing id beats the replacement limit.
    assert_eq!(
        decide_reassign(
            &ledger.state,
            &Policy {
                max_replacements: 0,
                ..Policy::default()
            },
            &request(),
            &ev
        ),
        Err(lane_refused::exists("build-2", LaneState::Pending))
    );
}

#[test]
fn one_replacement_per_lineage() {
    let ev = checkpoint_evidence();
    let mut ledger = Ledger::interrupted();
    let intents = reassign(&ledger).unwrap();
    ledger
        .commit(intents)
        .start_lane("build-2")
        .interrupt_lane("build-2");
    let mut again = request();
    again.lane_id = "build-2".into();
    again.replacement_lane_id = "build-3".into();
    again.replacement_agent_id = "agent-3".into();
    again.replacement_assignment = "Resume again from checkpoint 4".into();
    assert_eq!(
        decide_reassign(&ledger.state, &Policy::default(), &again, &ev),
        refused(Refused::LimitReached {
            lane_id: "build-2".into(),
            max: 1
        })
    );
    // The limit is the run's own manifest value.
    let two = Policy {
        max_replacements: 2,
        ..Policy::default()
    };
    let intents = decide_reassign(&ledger.state, &two, &again, &ev).unwrap();
    assert_eq!(intents[1].metadata["replacement_count"], 2);
    ledger.commit(intents);
    assert_eq!(ledger.lane_json("build-3")["parent_lane_id"], "build-2");

    // A lane created with an absurd count never gets a replacement.
    let mut ledger = Ledger::running(&["runtime"]);
    ledger
        .lane_with(
            "build",
            "agent-1",
            json!({"replacement_count": serde_json::Number::from_string_unchecked(
                "100000000000000000000000000000".into())}),
        )
        .start_lane("build")
        .interrupt_lane("build");
    assert_eq!(
        reassign(&ledger),
        refused(Refused::LimitReached {
            lane_id: "build".into(),
            max: 1
        })
    );
}

// ---------------------------------------------------------------- fencing

#[test]
fn the_replaced_agent_is_fenced_off_both_lanes() {
    let ev = checkpoint_evidence();
    let mut ledger = Ledger::interrupted();
    // Before the replacement the interrupted agent still owns its lane (the
    // lane transition table then refuses completion from `recovering`).
    assert!(
        crate::coordinator::lane_commands::require_active_lane_owner(
            &ledger.state,
            "build",
            "agent-1"
        )
        .is_ok()
    );
    let intents = reassign(&ledger).unwrap();
    ledger.commit(intents);

    // A late lane-complete of agent-1: neither lane accepts it.
    let fenced = |ledger: &Ledger, lane: &str, agent: &str| {
        crate::coordinator::lane_commands::require_active_lane_owner(&ledger.state, lane, agent)
            .map(|l| l.id.to_string())
            .map_err(|r| r.message().to_string())
    };
    assert_eq!(
        fenced(&ledger, "build", "agent-1"),
        Err("lane is not active".into())
    );
    assert_eq!(
        fenced(&ledger, "build-2", "agent-1"),
        Err("agent does not own the lane".into())
    );
    assert_eq!(fenced(&ledger, "build-2", "agent-2"), Ok("build-2".into()));
    // Nor can the replaced lane be reassigned a second time.
    assert_eq!(
        reassign(&ledger),
        Err(lane_refused::inactive("build", LaneState::Replaced))
    );
    // The reducer itself refuses the old agent on the child lane.
    ledger.start_lane("build-2");
    let late = ledger.try_raw(
        "lane_completed",
        json!({"lane_id": "build-2", "agent_id": "agent-1", "from_state": "running",
               "to_state": "completed", "metadata": {"changed_paths": []}}),
    );
    assert_eq!(
        late.unwrap_err().message,
        "lane event agent does not own the lane"
    );
    // After the lineage is closed the original stays fenced.
    ledger.raw(
        "lane_completed",
        json!({"lane_id": "build-2", "agent_id": "agent-2", "from_state": "running",
               "to_state": "completed", "metadata": {"changed_paths": []}}),
    );
    let close = decide(Close)(&ledger.state, &lineage("build", "build-2"), &ev).unwrap();
    ledger.commit(close);
    assert_eq!(
        fenced(&ledger, "build", "agent-1"),
        Err("lane is not active".into())
    );
}

#[test]
fn repair_does_not_hand_the_lane_back_to_the_interrupted_agent() {
    let mut ledger = reserved(json!({"replacement_agent_id": "agent-1"}));
    let digest = reservation_digest(&ledger);
    assert_eq!(
        decide(Repair)(
            &ledger.state,
            &lineage("build", "build-2"),
            &json!([{"kind": "checkpoint", "summary": "s", "checksum": digest}])
        ),
        refused(Refused::Unfenced {
            lane_id: "build".into(),
            replacement_lane_id: "build-2".into(),
            agent_id: "agent-1".into()
        })
    );
    // Blocking stays possible.
    let block = decide(Block)(&ledger.state, &lineage("build", "build-2"), &ev("x")).unwrap();
    ledger.commit(block);
    assert_eq!(ledger.lane_json("build")["state"], "blocked");
}

// ------------------------------------------------------- replacement-close

/// Interrupted `build` replaced by `build-2` (child created).
fn replaced() -> Ledger {
    let mut ledger = Ledger::interrupted();
    let intents = reassign(&ledger).unwrap();
    ledger.commit(intents);
    ledger
}

#[test]
fn close_follows_the_replacement_terminal_state() {
    for (event, to) in [
        ("lane_completed", "completed"),
        ("lane_failed", "failed"),
        ("lane_blocked", "blocked"),
        ("lane_cancelled", "cancelled"),
    ] {
        let mut ledger = replaced();
        ledger.start_lane("build-2");
        let mut fields = json!({"lane_id": "build-2", "from_state": "running", "to_state": to});
        if to == "completed" {
            fields["metadata"] = json!({"changed_paths": []});
        }
        ledger.raw(event, fields);
        let evidence = ev("closing");
        let intents =
            decide(Close)(&ledger.state, &lineage("build", "build-2"), &evidence).unwrap();
        assert_eq!(
            intents_json(&intents),
            json!([{"event_type": "replacement_lineage_closed", "lane_id": "build",
                    "agent_id": "agent-1", "from_state": "replaced", "to_state": to,
                    "timestamp": "2026-07-14T01:21:00Z", "reason": null, "evidence_refs": evidence,
                    "metadata": {"original_lane_id": "build", "replacement_lane_id": "build-2",
                                 "replacement_terminal_state": to}}]),
            "{to}"
        );
        ledger.commit(intents);
        let original = ledger.lane_json("build");
        assert_eq!(original["state"], to);
        assert_eq!(original["terminal_sequence"], ledger.state.last_sequence());
    }
}

#[test]
fn close_refusals() {
    let evidence = ev("closing");
    let close = |ledger: &Ledger, lane: &str, replacement: &str| {
        decide(Close)(&ledger.state, &lineage(lane, replacement), &evidence)
    };
    let mut ledger = replaced();
    for (lane, replacement, refusal) in [
        ("nope", "build-2", not_replaced(Close, "nope", None)),
        (
            "build-2",
            "build",
            not_replaced(Close, "build-2", Some(LaneState::Pending)),
        ),
        ("build", "build-3", not_reserved(Close, "build-3")),
    ] {
        assert_eq!(
            close(&ledger, lane, replacement),
            refusal,
            "{lane} by {replacement}"
        );
    }
    ledger.start_lane("build-2");
    assert_eq!(
        close(&ledger, "build", "build-2"),
        refused(Refused::NotTerminal {
            replacement_lane_id: "build-2".into(),
            state: Some(LaneState::Running)
        })
    );
    ledger.run_step("run_failed", "running", "failed");
    assert_eq!(
        close(&ledger, "build", "build-2"),
        Err(needs_active_run(RunState::Failed))
    );
}

// ------------------------------------------ replacement-repair and -block

/// The reservation metadata the reference's lane-reassign writes, with
/// `overrides`.
fn reservation_metadata(overrides: Value) -> Value {
    let mut metadata = json!({
        "replacement_count": 1, "previous_agent_id": "agent-1",
        "replacement_lane_id": "build-2", "replacement_agent_id": "agent-2",
        "replacement_assignment": "Resume build from checkpoint 3",
        "replacement_write_scope": ["src/runtime"],
        "replacement_fallback": "main session",
        "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
        "replacement_command_deadline": "2026-07-14T01:30:00Z",
        "checkpoint_digest": "60c1beda1781b4065b38fc62378ba2fc42de44a0ec821b7d00029d38ee87036c",
    });
    for (k, v) in overrides.as_object().unwrap() {
        metadata[k] = v.clone();
    }
    metadata
}

/// Interrupted `build` with a stand-alone `lane_reassigned` (no child):
/// an incomplete reservation, as only a legacy writer leaves it.
fn reserved_with(metadata: Value) -> Ledger {
    let mut ledger = Ledger::interrupted();
    ledger.raw(
        "lane_reassigned",
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "recovering",
               "to_state": "replaced", "reason": "replacement checkpoint accepted",
               "evidence_refs": checkpoint_evidence(), "metadata": metadata}),
    );
    ledger
}

fn reserved(overrides: Value) -> Ledger {
    reserved_with(reservation_metadata(overrides))
}

/// A reservation as the reference's legacy writer left it: no child
/// proof (assignment, scope, deadlines, digest).
fn legacy_reserved() -> Ledger {
    reserved_with(
        json!({"replacement_count": 1, "previous_agent_id": "agent-1",
                         "replacement_lane_id": "build-2"}),
    )
}

fn reservation_digest(ledger: &Ledger) -> String {
    ledger.lane_json("build")["replacement_reservation"]["checkpoint_digest"]
        .as_str()
        .unwrap()
        .to_string()
}

fn repair_evidence(digest: &str) -> Value {
    json!([{"kind": "checkpoint", "summary": "checkpoint 3 verified", "checksum": digest}])
}

#[test]
fn repair_recreates_the_reserved_child() {
    let mut ledger = reserved(json!({}));
    assert_eq!(
        ledger.state.incomplete_replacements(),
        ["build".to_string()]
    );
    let evidence = json!([{"kind": "tool", "summary": "other"},
                          {"kind": "checkpoint", "summary": "verified",
                           "checksum": reservation_digest(&ledger)}]);
    let mut request = lineage("build", "build-2");
    request.at = "2026-07-14T01:12:00Z".into();
    let intents = decide(Repair)(&ledger.state, &request, &evidence).unwrap();
    assert_eq!(
        intents_json(&intents),
        json!([{"event_type": "replacement_repaired", "lane_id": "build", "agent_id": "agent-1",
                "from_state": "replaced", "to_state": "replaced",
                "timestamp": "2026-07-14T01:12:00Z", "reason": null, "evidence_refs": evidence,
                "metadata": {"original_lane_id": "build", "replacement_lane_id": "build-2",
                             "checkpoint_digest": reservation_digest(&ledger)}},
               {"event_type": "lane_created", "lane_id": "build-2", "agent_id": "agent-2",
                "from_state": null, "to_state": "pending",
                "timestamp": "2026-07-14T01:12:00Z", "reason": null, "evidence_refs": evidence,
                "metadata": child_metadata()}])
    );
    ledger.commit(intents);
    assert!(ledger.state.incomplete_replacements().is_empty());
    assert_eq!(ledger.lane_json("build")["state"], "replaced");
    assert_eq!(ledger.lane_json("build-2")["state"], "pending");
    assert_eq!(ledger.lane_json("build-2")["agent_id"], "agent-2");
    // Repaired once: the child exists now.
    assert_eq!(
        decide(Repair)(&ledger.state, &request, &evidence),
        exists("build-2")
    );
}

#[test]
fn repair_refusals_in_order() {
    let repair = |ledger: &Ledger, replacement: &str, evidence: &Value| {
        decide(Repair)(&ledger.state, &lineage("build", replacement), evidence)
    };
    let ledger = reserved(json!({}));
    let good = repair_evidence(&reservation_digest(&ledger));
    assert_eq!(
        decide(Repair)(&ledger.state, &lineage("nope", "build-2"), &good),
        not_replaced(LineageCommand::Repair, "nope", None)
    );
    // The child check comes before the reservation match.
    let mut with_other = reserved(json!({}));
    with_other.lane_with("build-3", "agent-3", json!({}));
    let no_match = not_reserved(LineageCommand::Repair, "build-4");
    assert_eq!(repair(&with_other, "build-3", &good), exists("build-3"));
    assert_eq!(repair(&ledger, "build-4", &good), no_match);
    // The reservation match (5) beats missing checkpoint evidence (2).
    assert_eq!(repair(&ledger, "build-4", &ev("x")), no_match);
    for evidence in [
        ev("no checksum"),
        repair_evidence(&"0".repeat(64)),
        json!([reservation_digest(&ledger)]),
    ] {
        assert_eq!(
            repair(&ledger, "build-2", &evidence),
            bad("checkpoint verification evidence is missing"),
            "{evidence}"
        );
    }
    // A legacy reservation without the exact child proof cannot be repaired.
    assert_eq!(
        repair(&legacy_reserved(), "build-2", &good),
        refused(Refused::NoChildProof {
            lane_id: "build".into(),
            replacement_lane_id: "build-2".into()
        })
    );
    // A CLI-written lineage (child created with the reassign) has nothing
    // to repair.
    assert_eq!(repair(&replaced(), "build-2", &good), exists("build-2"));
}

#[test]
fn repair_with_a_null_checkpoint_digest_matches_refs_without_checksum() {
    // The reference compares `ref.get("checksum")` with the stored digest,
    // so a null digest is matched by any ref that carries no checksum.
    let ledger = reserved(json!({"checkpoint_digest": null}));
    let intents = decide(Repair)(&ledger.state, &lineage("build", "build-2"), &ev("x")).unwrap();
    assert_eq!(intents[0].metadata["checkpoint_digest"], Value::Null);
}

#[test]
fn block_ends_an_incomplete_reservation() {
    for legacy in [false, true] {
        let mut ledger = if legacy {
            legacy_reserved()
        } else {
            reserved(json!({}))
        };
        let evidence = ev("cannot recreate");
        let intents =
            decide(Block)(&ledger.state, &lineage("build", "build-2"), &evidence).unwrap();
        assert_eq!(
            intents_json(&intents),
            json!([{"event_type": "replacement_blocked", "lane_id": "build", "agent_id": "agent-1",
                    "from_state": "replaced", "to_state": "blocked",
                    "timestamp": "2026-07-14T01:21:00Z",
                    "reason": "incomplete replacement cannot be safely recreated",
                    "evidence_refs": evidence,
                    // The digest of the original's current (reassign) evidence.
                    "metadata": {"original_lane_id": "build", "replacement_lane_id": "build-2",
                                 "checkpoint_digest": digest(&checkpoint_evidence())}}]),
            "legacy: {legacy}"
        );
        ledger.commit(intents);
        assert_eq!(ledger.lane_json("build")["state"], "blocked");
        assert!(ledger.state.incomplete_replacements().is_empty());
        assert_eq!(
            decide(Block)(&ledger.state, &lineage("build", "build-2"), &evidence),
            not_replaced(LineageCommand::Block, "build", Some(LaneState::Blocked))
        );
    }
}

#[test]
fn block_refusals_in_order() {
    let evidence = ev("x");
    let block = |ledger: &Ledger, lane: &str, replacement: &str| {
        decide(Block)(&ledger.state, &lineage(lane, replacement), &evidence)
    };
    let ledger = reserved(json!({}));
    for (lane, replacement, refusal) in [
        (
            "build-2",
            "build",
            not_replaced(LineageCommand::Block, "build-2", None),
        ),
        (
            "build",
            "build-3",
            not_reserved(LineageCommand::Block, "build-3"),
        ),
    ] {
        assert_eq!(
            block(&ledger, lane, replacement),
            refusal,
            "{lane} by {replacement}"
        );
    }
    assert_eq!(block(&replaced(), "build", "build-2"), exists("build-2"));
    // Unreachable through replay (the list is recomputed after every
    // lineage event), kept as the reference's last guard.
    let mut stale = reserved(json!({}));
    stale.state.incomplete_replacements.clear();
    assert_eq!(
        block(&stale, "build", "build-2"),
        refused(Refused::Complete {
            lane_id: "build".into(),
            replacement_lane_id: "build-2".into()
        })
    );
    let mut stopped = reserved(json!({}));
    stopped.run_step("run_cancelled", "running", "cancelled");
    let cancelled = Err(needs_active_run(RunState::Cancelled));
    assert_eq!(block(&stopped, "build", "build-2"), cancelled);
    assert_eq!(
        decide(Repair)(&stopped.state, &lineage("build", "build-2"), &evidence),
        cancelled
    );
}
