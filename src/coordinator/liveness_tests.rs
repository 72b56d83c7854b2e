//! The liveness decision table at and around every boundary, and each
//! liveness command's rules in the reference's order, on hand-made states.
//! Decided intents are fed back through the replay reducer, so what the
//! decisions propose is what a receipt can hold.

use crate::coordinator::decide::{Conflict, ErrorKind, LaneRefusal, lane_refused};
use chrono::TimeDelta;
use serde_json::{Map, Value, json};

use super::*;
use crate::coordinator::state::RunState;
use crate::coordinator::test_ledger::{LaneEvents, Ledger, intents_json, needs_active_run};
use crate::receipt::primitives::parse_timestamp;

fn t(text: &str) -> Instant {
    parse_timestamp(text).unwrap()
}

fn us(n: i64) -> TimeDelta {
    TimeDelta::microseconds(n)
}

fn evidence(summary: &str) -> Value {
    json!([{"kind": "observation", "summary": summary}])
}

fn invalid_msg(message: &str) -> FlowError {
    crate::coordinator::input_refusal::refused_as(message)
}

/// A stall-clear or probe (which need a suspected stall) refused in `state`.
fn not_stalled(state: LaneState) -> FlowError {
    build_in(
        state,
        &[LaneState::SuspectedStall],
        RefusedLaneStep::Lifecycle,
    )
}

/// Lane build's `state` refused a step that `allowed` would take.
fn build_in(state: LaneState, allowed: &[LaneState], step: RefusedLaneStep) -> FlowError {
    lane_refused::state("build", state, allowed, step)
}

/// A running run with lane `build` (agent-1) created at 01:00:00Z:
/// startup ACK due 01:00:30Z, command deadline 01:30:00Z.
fn build_pending() -> Ledger {
    let mut run = Ledger::running(&[]);
    run.lane_with(
        "build",
        "agent-1",
        json!({"assignment": "build it", "fallback": "main",
               "command_deadline": "2026-07-14T01:30:00Z"}),
    );
    run
}

/// Lane `build` after the first `steps` of: pending -> starting
/// (01:00:03Z) -> running (01:00:04Z) -> suspected_stall (01:03:00Z, "no
/// fresh evidence") -> recovering (01:03:10Z, probe due 01:04:00Z).
fn build_after(steps: usize) -> Ledger {
    let stall = json!({"reason": "no fresh evidence", "evidence_refs": evidence("stall")});
    let probe = json!({"metadata": {"probe_deadline": "2026-07-14T01:04:00Z"}});
    let path = [
        ("lane_started", "pending", "starting", "01:00:03", json!({})),
        ("startup_ack", "starting", "running", "01:00:04", json!({})),
        (
            "stall_suspected",
            "running",
            "suspected_stall",
            "01:03:00",
            stall,
        ),
        (
            "probe_sent",
            "suspected_stall",
            "recovering",
            "01:03:10",
            probe,
        ),
    ];
    let mut run = build_pending();
    for (event_type, from, to, time, extra) in path.into_iter().take(steps) {
        run.build_step(event_type, from, to, &format!("2026-07-14T{time}Z"), extra);
    }
    run
}

fn build_running() -> Ledger {
    build_after(2)
}

fn build_stalled() -> Ledger {
    build_after(3)
}

fn build_recovering() -> Ledger {
    build_after(4)
}

/// Lane `build` of agent-1, the one lane of these runs.
impl Ledger {
    /// An event of lane `build` at `at`, with `extra` fields.
    fn build_step(
        &mut self,
        event_type: &str,
        from: &str,
        to: &str,
        at: &str,
        extra: Value,
    ) -> &mut Self {
        let mut fields = json!({
            "lane_id": "build", "agent_id": "agent-1",
            "from_state": from, "to_state": to, "timestamp": at,
        });
        for (k, v) in extra.as_object().unwrap() {
            fields[k] = v.clone();
        }
        self.raw(event_type, fields)
    }

    fn build_record(&self) -> LaneRecord {
        self.state.lane("build").unwrap().clone()
    }
}

fn lane_in(state: LaneState) -> LaneRecord {
    let mut lane = build_pending().build_record();
    lane.state = state;
    lane
}

fn eval(lane: &LaneRecord, now: Instant, command: CommandStatus) -> (LivenessAction, &'static str) {
    let d = evaluate(lane, &Policy::default(), now, command).unwrap();
    (d.action, d.reason)
}

/// The whole evaluation at `now` of a lane whose command state is unknown.
fn evaluate_unknown(lane: &LaneRecord, now: &str) -> Result<LivenessDecision, FlowError> {
    evaluate(lane, &Policy::default(), t(now), CommandStatus::Unknown)
}

/// Under `command`, the lane's action is `actions[0]` until just before
/// `boundary` and `actions[1]` from it on.
#[track_caller]
fn assert_turns_at(
    lane: &LaneRecord,
    command: CommandStatus,
    boundary: Instant,
    actions: [LivenessAction; 2],
) {
    assert_eq!(eval(lane, boundary - us(1), command).0, actions[0]);
    assert_eq!(eval(lane, boundary, command).0, actions[1]);
}

/// Under `command`, the lane's decision is `expected` at `boundary` and
/// just after it.
#[track_caller]
fn assert_from(
    lane: &LaneRecord,
    command: CommandStatus,
    boundary: Instant,
    expected: (LivenessAction, &str),
) {
    for now in [boundary, boundary + us(1)] {
        assert_eq!(eval(lane, now, command), expected, "{command:?} at {now}");
    }
}

const ALL_STATUSES: [CommandStatus; 3] = [
    CommandStatus::Alive,
    CommandStatus::Dead,
    CommandStatus::Unknown,
];

// ------------------------------------------------------------ decision table

#[test]
fn terminal_and_replaced_lanes_need_nothing() {
    for state in [
        LaneState::Completed,
        LaneState::Failed,
        LaneState::Blocked,
        LaneState::Cancelled,
        LaneState::Replaced,
    ] {
        for status in ALL_STATUSES {
            assert_eq!(
                eval(&lane_in(state), t("2026-07-14T05:00:00Z"), status),
                (LivenessAction::None, "lane is terminal")
            );
        }
    }
}

#[test]
fn a_pending_lane_awaits_dispatch() {
    for status in ALL_STATUSES {
        assert_eq!(
            eval(
                &lane_in(LaneState::Pending),
                t("2026-07-14T09:00:00Z"),
                status
            ),
            (LivenessAction::Continue, "lane awaits dispatch")
        );
    }
}

#[test]
fn a_starting_lane_stalls_at_its_startup_deadline() {
    let lane = lane_in(LaneState::Starting);
    let ack = t("2026-07-14T01:00:30Z");
    for status in ALL_STATUSES {
        assert_eq!(
            eval(&lane, ack - us(1), status),
            (LivenessAction::Continue, "startup ACK is pending")
        );
        let elapsed = (LivenessAction::SuspectStall, "startup ACK deadline elapsed");
        assert_from(&lane, status, ack, elapsed);
    }
}

#[test]
fn a_running_lane_is_fresh_for_the_stall_window_after_its_last_event() {
    let lane = build_running().build_record();
    assert_eq!(lane.updated_at, "2026-07-14T01:00:04Z");
    let fresh_until = t("2026-07-14T01:02:04Z");
    for status in ALL_STATUSES {
        assert_eq!(
            eval(&lane, fresh_until - us(1), status),
            (LivenessAction::Continue, "fresh evidence")
        );
    }
    // At exactly the end of the window it has elapsed.
    assert_eq!(
        eval(&lane, fresh_until, CommandStatus::Alive),
        (
            LivenessAction::ObserveCommand,
            "command is alive within its deadline"
        )
    );
    // Dead and unknown are the same for a running lane.
    for status in [CommandStatus::Dead, CommandStatus::Unknown] {
        assert_eq!(
            eval(&lane, fresh_until, status),
            (LivenessAction::SuspectStall, "no fresh evidence")
        );
    }
}

#[test]
fn an_alive_command_is_observed_only_before_its_deadline() {
    let lane = build_running().build_record();
    let command = t("2026-07-14T01:30:00Z");
    assert_eq!(
        eval(&lane, command - us(1), CommandStatus::Alive).0,
        LivenessAction::ObserveCommand
    );
    let stale = (LivenessAction::SuspectStall, "no fresh evidence");
    assert_from(&lane, CommandStatus::Alive, command, stale);
}

#[test]
fn a_lease_extends_the_window_and_never_shortens_it() {
    let mut lane = build_running().build_record();
    // A lease beyond updated_at + 120 s ends the window.
    let stall_after = [LivenessAction::Continue, LivenessAction::SuspectStall];
    lane.silence_lease_deadline = Some("2026-07-14T01:10:00Z".into());
    let lease = t("2026-07-14T01:10:00Z");
    assert_turns_at(&lane, CommandStatus::Unknown, lease, stall_after);
    // A lease before updated_at + 120 s changes nothing.
    lane.silence_lease_deadline = Some("2026-07-14T01:01:00Z".into());
    let window_end = t("2026-07-14T01:02:04Z");
    assert_turns_at(&lane, CommandStatus::Unknown, window_end, stall_after);
}

#[test]
fn an_old_lease_keeps_counting_after_later_events() {
    // Heartbeat at 01:01:00Z with a lease to 01:10:00Z, then a stall cycle
    // ending in lane_recovered at 01:04:00Z: the old lease still holds.
    let mut run = build_running();
    let hb = Heartbeat {
        lane_id: "build".into(),
        agent_id: "agent-1".into(),
        observed_at: "2026-07-14T01:01:00Z".into(),
        observed: t("2026-07-14T01:01:00Z"),
        silence_lease_deadline: "2026-07-14T01:10:00Z".into(),
        lease: t("2026-07-14T01:10:00Z"),
        reason: Some("long build".into()),
    };
    let intents = decide_heartbeat(&run.state, &Policy::default(), &hb, &evidence("hb")).unwrap();
    run.commit(intents);
    run.build_step(
        "stall_suspected",
        "running",
        "suspected_stall",
        "2026-07-14T01:03:00Z",
        json!({"reason": "suspect"}),
    );
    run.build_step(
        "lane_recovered",
        "suspected_stall",
        "running",
        "2026-07-14T01:04:00Z",
        json!({"reason": "answered"}),
    );
    let lane = run.build_record();
    assert_eq!(lane.updated_at, "2026-07-14T01:04:00Z");
    assert_eq!(
        lane.silence_lease_deadline.as_deref(),
        Some("2026-07-14T01:10:00Z")
    );
    let lease = t("2026-07-14T01:10:00Z");
    let stall_after = [LivenessAction::Continue, LivenessAction::SuspectStall];
    assert_turns_at(&lane, CommandStatus::Dead, lease, stall_after);
}

#[test]
fn a_suspected_stall_needs_a_probe() {
    for status in ALL_STATUSES {
        assert_eq!(
            eval(
                &build_stalled().build_record(),
                t("2026-07-14T09:00:00Z"),
                status
            ),
            (LivenessAction::SendProbe, "probe has not been sent")
        );
    }
}

#[test]
fn a_recovering_lane_waits_for_both_deadlines() {
    let mut lane = build_recovering().build_record();
    let probe = t("2026-07-14T01:04:00Z");
    let command = t("2026-07-14T01:30:00Z");
    for status in ALL_STATUSES {
        for now in [probe - us(1), probe, command - us(1)] {
            assert_eq!(
                eval(&lane, now, status),
                (LivenessAction::AwaitProbe, "a recovery deadline remains")
            );
        }
    }
    // Both passed: dead and unknown now differ.
    let observe = (
        LivenessAction::ObserveCommand,
        "command state must be observed before interrupt",
    );
    assert_from(&lane, CommandStatus::Unknown, command, observe);
    for status in [CommandStatus::Alive, CommandStatus::Dead] {
        let interrupt = (LivenessAction::Interrupt, "recovery deadlines elapsed");
        assert_from(&lane, status, command, interrupt);
    }
    // A probe deadline after the command deadline is the one that counts.
    lane.probe_deadline = Some("2026-07-14T01:40:00Z".into());
    let late_probe = t("2026-07-14T01:40:00Z");
    let interrupt_after = [LivenessAction::AwaitProbe, LivenessAction::Interrupt];
    assert_turns_at(&lane, CommandStatus::Dead, late_probe, interrupt_after);
}

#[test]
fn a_replaced_lineage_falls_back_to_the_main_session() {
    let mut lane = build_recovering().build_record();
    let after = t("2026-07-14T01:30:00Z");
    for count in [
        json!(1),
        json!(2),
        json!(100000000000000000000000000000u128),
    ] {
        lane.replacement_count = serde_json::from_value(count).unwrap();
        for status in ALL_STATUSES {
            assert_eq!(
                eval(&lane, after, status),
                (LivenessAction::MainTakeover, "replacement limit reached")
            );
        }
        // Not before the deadlines, though.
        assert_eq!(
            eval(&lane, after - us(1), CommandStatus::Dead).0,
            LivenessAction::AwaitProbe
        );
    }
    // The limit comes from the run's manifest.
    lane.replacement_count = serde_json::from_value(json!(1)).unwrap();
    let policy = Policy {
        max_replacements: 2,
        ..Policy::default()
    };
    assert_eq!(
        evaluate(&lane, &policy, after, CommandStatus::Dead)
            .unwrap()
            .action,
        LivenessAction::Interrupt
    );
}

#[test]
fn the_windows_come_from_the_run_manifest() {
    let lane = build_running().build_record();
    let updated = t("2026-07-14T01:00:04Z");
    let policy = Policy {
        suspected_stall_seconds: 0,
        ..Policy::default()
    };
    assert_eq!(
        evaluate(&lane, &policy, updated - us(1), CommandStatus::Unknown)
            .unwrap()
            .action,
        LivenessAction::Continue
    );
    assert_eq!(
        evaluate(&lane, &policy, updated, CommandStatus::Unknown)
            .unwrap()
            .action,
        LivenessAction::SuspectStall
    );
    // Bools are numbers in the reference's manifest rules.
    let contract = json!({"liveness": {
        "suspected_stall_seconds": true, "max_silence_lease_seconds": 600,
        "probe_grace_seconds": false, "max_replacements": 1,
    }});
    let policy = Policy::from_contract(&contract, &Default::default());
    assert_eq!(policy.suspected_stall_seconds, 1);
    assert_eq!(policy.probe_grace_seconds, 0);
}

#[test]
fn unusable_stored_timestamps_are_contract_errors() {
    let timestamp = invalid_msg("timestamp must be UTC ISO-8601 ending in Z");
    // A receipt may carry a null command deadline: only the rows that need
    // it fail.
    let mut lane = build_running().build_record();
    lane.command_deadline = None;
    assert_eq!(
        eval(&lane, t("2026-07-14T01:01:00Z"), CommandStatus::Alive).0,
        LivenessAction::Continue
    );
    for status in ALL_STATUSES {
        assert_eq!(
            evaluate(&lane, &Policy::default(), t("2026-07-14T01:03:00Z"), status),
            Err(timestamp.clone())
        );
    }
    // The stored shape passes the receipt regex but is no calendar day.
    let mut lane = build_running().build_record();
    lane.silence_lease_deadline = Some("2026-02-30T00:00:00Z".into());
    assert_eq!(
        evaluate_unknown(&lane, "2026-07-14T01:00:05Z"),
        Err(timestamp.clone())
    );
    let mut lane = build_recovering().build_record();
    lane.probe_deadline = None;
    assert_eq!(
        evaluate_unknown(&lane, "2026-07-14T01:00:05Z"),
        Err(timestamp)
    );
}

#[test]
fn a_window_past_the_representable_range_is_refused_not_a_crash() {
    let out = invalid_msg("liveness window exceeds the timestamp range");
    let mut lane = build_running().build_record();
    lane.updated_at = "9999-12-31T23:58:00Z".into();
    assert_eq!(
        evaluate_unknown(&lane, "9999-12-31T23:59:00Z"),
        Err(out.clone())
    );
    // The last representable window end is fine.
    lane.updated_at = "9999-12-31T23:57:59.999999Z".into();
    assert_eq!(
        eval(&lane, t("9999-12-31T23:59:00Z"), CommandStatus::Unknown).0,
        LivenessAction::Continue
    );
    let policy = Policy {
        suspected_stall_seconds: i64::MAX,
        ..Policy::default()
    };
    assert_eq!(
        evaluate(
            &lane,
            &policy,
            t("2026-07-14T01:00:00Z"),
            CommandStatus::Unknown
        ),
        Err(out)
    );
}

#[test]
fn liveness_check_finds_the_lane_before_reading_at() {
    let run = build_running();
    let policy = Policy::default();
    assert_eq!(
        check_lane(
            &run.state,
            &policy,
            "nope",
            "garbage",
            CommandStatus::Unknown
        ),
        Err(lane_refused::missing("nope", &["build"]))
    );
    assert_eq!(
        check_lane(
            &run.state,
            &policy,
            "build",
            "garbage",
            CommandStatus::Unknown
        ),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
    assert_eq!(
        check_lane(
            &run.state,
            &policy,
            "build",
            "2026-07-14Z",
            CommandStatus::Unknown
        ),
        Err(invalid_msg("timestamp must be timezone-aware"))
    );
    // The lax reader: minutes only, a space separator, basic format.
    for at in [
        "2026-07-14T01:03Z",
        "2026-07-14 01:02:04Z",
        "20260714T010204Z",
    ] {
        assert_eq!(
            check_lane(&run.state, &policy, "build", at, CommandStatus::Unknown)
                .unwrap()
                .to_json(),
            *json!({"action": "suspect_stall", "reason": "no fresh evidence"})
                .as_object()
                .unwrap(),
            "{at}"
        );
    }
    // Even a terminal lane needs a readable instant.
    let mut run = run;
    run.build_step(
        "lane_cancelled",
        "running",
        "cancelled",
        "2026-07-14T01:05:00Z",
        json!({"reason": "x"}),
    );
    assert_eq!(
        check_lane(&run.state, &policy, "build", "soon", CommandStatus::Unknown),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
}

// ------------------------------------------------------- shared lane checks

#[test]
fn active_lane_owner_checks_in_order() {
    let mut run = build_pending();
    assert_eq!(
        active_lane_owner(&run.state, "nope", "agent-1").unwrap_err(),
        lane_refused::missing("nope", &["build"])
    );
    assert_eq!(
        active_lane_owner(&run.state, "build", "agent-2").unwrap_err(),
        lane_refused::not_owner("build", "agent-2", "agent-1")
    );
    assert!(active_lane_owner(&run.state, "build", "agent-1").is_ok());
    // Replaced and terminal lanes are not active (checked before the agent).
    let mut replaced = run.state.clone();
    replaced.lanes.get_mut("build").unwrap().state = LaneState::Replaced;
    assert_eq!(
        active_lane_owner(&replaced, "build", "agent-2").unwrap_err(),
        lane_refused::inactive("build", LaneState::Replaced)
    );
    run.build_step(
        "lane_cancelled",
        "pending",
        "cancelled",
        "2026-07-14T01:05:00Z",
        json!({"reason": "x"}),
    );
    assert_eq!(
        active_lane_owner(&run.state, "build", "agent-2").unwrap_err(),
        lane_refused::inactive("build", LaneState::Cancelled)
    );
    // The run state comes first.
    run.run_step("run_blocked", "running", "blocked");
    assert_eq!(
        active_lane_owner(&run.state, "nope", "agent-1").unwrap_err(),
        needs_active_run(RunState::Blocked)
    );
    // Recovering runs are fine.
    let mut run = build_pending();
    run.run_step("run_recovery_started", "running", "recovering");
    assert!(active_lane_owner(&run.state, "build", "agent-1").is_ok());
}

#[test]
fn blank_is_pythons_isspace() {
    for blank in [
        "",
        " ",
        "\t\n\r\u{b}\u{c}",
        "\u{1c}\u{1d}\u{1e}\u{1f}",
        "\u{85}\u{a0}\u{3000}",
    ] {
        assert!(is_blank(blank), "{blank:?}");
    }
    for text in ["x", " x ", "\u{200b}", "\u{180e}"] {
        assert!(!is_blank(text), "{text:?}");
    }
}

// ---------------------------------------------------------------- heartbeat

fn heartbeat_input(patch: Value) -> Value {
    let mut input = json!({
        "lane_id": "build", "agent_id": "agent-1",
        "observed_at": "2026-07-14T01:05:00Z",
        "silence_lease_deadline": "2026-07-14T01:15:00Z",
        "reason": "long build",
    });
    for (k, v) in patch.as_object().unwrap() {
        if v.is_null() && k.starts_with('-') {
            input.as_object_mut().unwrap().remove(&k[1..]);
        } else {
            input[k] = v.clone();
        }
    }
    input
}

#[test]
fn heartbeat_prechecks_in_order() {
    let fields = invalid_msg("JSON input fields do not match the command contract");
    for patch in [json!({"-reason": null}), json!({"extra": 1})] {
        assert_eq!(
            precheck_heartbeat(&heartbeat_input(patch)),
            Err(fields.clone())
        );
    }
    let cases = [
        (
            json!({"lane_id": "../x", "agent_id": "bad id"}),
            "lane id must match the identifier contract",
        ),
        (
            json!({"lane_id": 7}),
            "lane id must match the identifier contract",
        ),
        (
            json!({"agent_id": "bad id", "observed_at": "x"}),
            "agent id must match the identifier contract",
        ),
        (
            json!({"observed_at": "2026-07-14T01:05:00", "silence_lease_deadline": "x"}),
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            json!({"observed_at": 5}),
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            json!({"observed_at": "2026-07-14Z"}),
            "timestamp must be timezone-aware",
        ),
        (
            json!({"silence_lease_deadline": "2026-07-14T25:00Z"}),
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
    ];
    for (patch, message) in cases {
        assert_eq!(
            precheck_heartbeat(&heartbeat_input(patch.clone())),
            Err(invalid_msg(message)),
            "{patch}"
        );
    }
    // Lax timestamps pass here (the receipt contract refuses them later);
    // the reason is only checked in the lock.
    let hb = precheck_heartbeat(&heartbeat_input(
        json!({"observed_at": "2026-07-14T01:05Z", "reason": 3}),
    ))
    .unwrap();
    assert_eq!(hb.observed_at, "2026-07-14T01:05Z");
    assert_eq!(hb.observed, t("2026-07-14T01:05:00Z"));
    assert_eq!(hb.reason, None);
}

fn heartbeat(patch: Value) -> Heartbeat {
    precheck_heartbeat(&heartbeat_input(patch)).unwrap()
}

#[test]
fn heartbeat_renews_the_lease_in_one_transaction() {
    let mut run = build_running();
    let ev = evidence("tests still running");
    let intents =
        decide_heartbeat(&run.state, &Policy::default(), &heartbeat(json!({})), &ev).unwrap();
    let digest = canonical::digest(&ev);
    assert_eq!(intents.len(), 2);
    let (observed, renewed) = (&intents[0], &intents[1]);
    assert_eq!(observed.event_type, "heartbeat_observed");
    assert_eq!(renewed.event_type, "lease_renewed");
    for intent in &intents {
        assert_eq!(intent.lane_id.as_deref(), Some("build"));
        assert_eq!(intent.agent_id.as_deref(), Some("agent-1"));
        assert_eq!(intent.from_state.map(|s| s.as_str()), Some("running"));
        assert_eq!(intent.to_state.map(|s| s.as_str()), Some("running"));
        assert_eq!(intent.timestamp.as_deref(), Some("2026-07-14T01:05:00Z"));
        assert_eq!(intent.evidence_refs, ev);
    }
    assert_eq!(observed.reason, None);
    assert_eq!(
        Value::Object(observed.metadata.clone()),
        json!({"evidence_digest": digest})
    );
    assert_eq!(renewed.reason.as_deref(), Some("long build"));
    assert_eq!(
        Value::Object(renewed.metadata.clone()),
        json!({"evidence_digest": digest, "silence_lease_deadline": "2026-07-14T01:15:00Z"})
    );
    let completion_evidence = run.build_record().evidence_refs;
    run.commit(intents);
    let lane = run.build_record();
    assert_eq!(lane.state, LaneState::Running);
    assert_eq!(lane.updated_at, "2026-07-14T01:05:00Z");
    assert_eq!(
        lane.silence_lease_deadline.as_deref(),
        Some("2026-07-14T01:15:00Z")
    );
    assert_eq!(lane.last_evidence_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(lane.last_reason.as_deref(), Some("long build"));
    // A heartbeat proves liveness only: its evidence is liveness evidence
    // for the whole run and never the lane's completion evidence.
    assert_eq!(lane.evidence_refs, completion_evidence);
    assert_eq!(lane.liveness_evidence_refs, ev.as_array().unwrap().clone());
    assert!(run.state.is_liveness_evidence(&ev));
}

#[test]
fn heartbeat_needs_a_running_lane_of_an_active_run() {
    let heartbeat_in = |state| build_in(state, &[LaneState::Running], RefusedLaneStep::Heartbeat);
    let policy = Policy::default();
    let ev = evidence("alive");
    let run = build_pending();
    assert_eq!(
        decide_heartbeat(&run.state, &policy, &heartbeat(json!({})), &ev),
        Err(heartbeat_in(LaneState::Pending))
    );
    assert_eq!(
        decide_heartbeat(
            &run.state,
            &policy,
            &heartbeat(json!({"agent_id": "agent-2"})),
            &ev
        ),
        Err(lane_refused::not_owner("build", "agent-2", "agent-1"))
    );
    for (run, state) in [
        (build_stalled(), LaneState::SuspectedStall),
        (build_recovering(), LaneState::Recovering),
    ] {
        assert_eq!(
            decide_heartbeat(&run.state, &policy, &heartbeat(json!({})), &ev),
            Err(heartbeat_in(state))
        );
    }
    // The state conflicts come before any input rule.
    assert_eq!(
        decide_heartbeat(
            &build_pending().state,
            &policy,
            &heartbeat(json!({"silence_lease_deadline": "2026-07-14T01:00:00Z", "reason": ""})),
            &json!([])
        ),
        Err(heartbeat_in(LaneState::Pending))
    );
}

#[test]
fn heartbeat_lease_bounds() {
    let run = build_running();
    let policy = Policy::default();
    let ev = evidence("alive");
    let order =
        invalid_msg("heartbeat deadlines must satisfy observed_at < lease <= command_deadline");
    let cases = [
        ("2026-07-14T01:05:00Z", Err(order.clone())),
        ("2026-07-14T01:04:59Z", Err(order.clone())),
        ("2026-07-14T01:30:00.000001Z", Err(order.clone())),
        ("2026-07-14T01:05:00.000001Z", Ok(())),
        // Exactly the maximum lease is allowed; one microsecond more is not.
        ("2026-07-14T01:15:00Z", Ok(())),
        (
            "2026-07-14T01:15:00.000001Z",
            Err(FlowError::from(InputRefusal::LeaseTooLong {
                max: 600,
                latest: Some("2026-07-14T01:15:00Z".into()),
            })),
        ),
    ];
    for (lease, want) in cases {
        let got = decide_heartbeat(
            &run.state,
            &policy,
            &heartbeat(json!({"silence_lease_deadline": lease})),
            &ev,
        )
        .map(|_| ());
        assert_eq!(got, want, "{lease}");
    }
    // The lease may end exactly at the command deadline.
    let hb = heartbeat(json!({
        "observed_at": "2026-07-14T01:25:00Z", "silence_lease_deadline": "2026-07-14T01:30:00Z"
    }));
    assert!(decide_heartbeat(&run.state, &policy, &hb, &ev).is_ok());
    // The maximum comes from the run's manifest.
    let short = Policy {
        max_silence_lease_seconds: 60,
        ..Policy::default()
    };
    let hb = heartbeat(json!({"silence_lease_deadline": "2026-07-14T01:06:00.000001Z"}));
    assert_eq!(
        decide_heartbeat(&run.state, &short, &hb, &ev),
        Err(FlowError::from(InputRefusal::LeaseTooLong {
            max: 60,
            latest: Some("2026-07-14T01:06:00Z".into()),
        }))
    );
}

#[test]
fn heartbeat_needs_fresh_evidence_and_a_reason() {
    let mut run = build_running();
    let policy = Policy::default();
    let ev = evidence("tests still running");
    assert_eq!(
        decide_heartbeat(&run.state, &policy, &heartbeat(json!({})), &json!([])),
        Err(invalid_msg("liveness evidence is required"))
    );
    for reason in [json!(""), json!(" \u{1f}\t"), json!(7), json!(null)] {
        assert_eq!(
            decide_heartbeat(
                &run.state,
                &policy,
                &heartbeat(json!({"reason": reason})),
                &ev
            ),
            Err(invalid_msg("liveness reason is required")),
            "{reason}"
        );
    }
    // The digest is taken over a valid list only.
    assert_eq!(
        decide_heartbeat(
            &run.state,
            &policy,
            &heartbeat(json!({})),
            &json!([{"kind": "x", "summary": "s", "extra": 1}])
        ),
        Err(invalid_msg(
            "evidence reference contains unsupported fields"
        ))
    );
    run.commit(decide_heartbeat(&run.state, &policy, &heartbeat(json!({})), &ev).unwrap());
    // Same evidence AND same reason: unchanged.
    let later = json!({
        "observed_at": "2026-07-14T01:06:00Z", "silence_lease_deadline": "2026-07-14T01:16:00Z"
    });
    assert_eq!(
        decide_heartbeat(&run.state, &policy, &heartbeat(later.clone()), &ev),
        Err(invalid_msg("liveness evidence is unchanged"))
    );
    // Changing only the reason does not make used evidence fresh (stricter
    // than the reference): the same evidence cannot renew a lease forever.
    let mut other_reason = later.clone();
    other_reason["reason"] = json!("still building");
    assert_eq!(
        decide_heartbeat(&run.state, &policy, &heartbeat(other_reason), &ev),
        Err(invalid_msg(
            "liveness evidence was already recorded for this lane"
        ))
    );
    assert!(
        decide_heartbeat(
            &run.state,
            &policy,
            &heartbeat(later),
            &evidence("new output")
        )
        .is_ok()
    );
}

// ------------------------------------------------------------- stall-record

fn stall_decision(reason: &str) -> Map<String, Value> {
    json!({"action": "suspect_stall", "reason": reason})
        .as_object()
        .unwrap()
        .clone()
}

fn bound_evidence(decision: &Map<String, Value>) -> Value {
    json!([{"kind": "liveness", "summary": "decision", "checksum": decision_checksum(decision).unwrap()}])
}

/// A stall decision for `reason` and the evidence binding it.
fn bound_stall(reason: &str) -> (Map<String, Value>, Value) {
    let decision = stall_decision(reason);
    let evidence = bound_evidence(&decision);
    (decision, evidence)
}

/// Agent-1's stall record of lane build at `at`, with `decision`'s reason.
fn stall_record<'a>(
    decision: &'a Map<String, Value>,
    evidence: &'a Value,
    at: &'a str,
) -> StallRecord<'a> {
    StallRecord {
        lane_id: "build",
        agent_id: "agent-1",
        at,
        reason: decision["reason"].as_str().unwrap(),
        decision,
        evidence,
    }
}

#[test]
fn the_decision_checksum_binds_the_object_as_given() {
    let decision = stall_decision("no fresh evidence");
    assert_eq!(
        decision_checksum(&decision).unwrap(),
        canonical::sha256_hex(br#"{"action":"suspect_stall","reason":"no fresh evidence"}"#)
    );
    for bad in [
        json!({"action": "nap", "reason": "x"}),
        json!({"action": "continue", "reason": 1}),
        json!({"reason": "x"}),
    ] {
        assert_eq!(
            decision_checksum(bad.as_object().unwrap()),
            Err(invalid_msg("liveness decision is invalid"))
        );
    }
}

#[test]
fn stall_record_prechecks_in_order() {
    let (decision, ev) = bound_stall("no fresh evidence");
    let request = StallRecord {
        lane_id: "any id at all",
        agent_id: "not checked here",
        ..stall_record(&decision, &ev, "2026-07-14T01:03:00Z")
    };
    assert_eq!(
        precheck_stall_record(&request),
        Ok(t("2026-07-14T01:03:00Z"))
    );
    let empty = json!([]);
    assert_eq!(
        precheck_stall_record(&StallRecord {
            evidence: &empty,
            reason: " ",
            at: "x",
            ..request
        }),
        Err(invalid_msg("lifecycle transition requires evidence"))
    );
    assert_eq!(
        precheck_stall_record(&StallRecord {
            reason: "\u{1c} ",
            at: "x",
            ..request
        }),
        Err(invalid_msg("stall reason is required"))
    );
    let continue_decision = json!({"action": "continue", "reason": "fresh evidence"});
    let no_action = json!({"reason": "fresh evidence"});
    for d in [&continue_decision, &no_action] {
        assert_eq!(
            precheck_stall_record(&StallRecord {
                decision: d.as_object().unwrap(),
                at: "x",
                ..request
            }),
            Err(invalid_msg(
                "stall recording requires a suspect_stall decision"
            ))
        );
    }
    let bad_reason = json!({"action": "suspect_stall", "reason": ["x"]});
    assert_eq!(
        precheck_stall_record(&StallRecord {
            decision: bad_reason.as_object().unwrap(),
            at: "x",
            ..request
        }),
        Err(invalid_msg("liveness decision is invalid"))
    );
    let unbound =
        json!([{"kind": "liveness", "summary": "decision", "checksum": "0".repeat(64)}, "x"]);
    assert_eq!(
        precheck_stall_record(&StallRecord {
            evidence: &unbound,
            at: "x",
            ..request
        }),
        Err(invalid_msg(
            "stall evidence must bind the liveness decision checksum"
        ))
    );
    assert_eq!(
        precheck_stall_record(&StallRecord {
            at: "2026-07-14T01:03:00",
            ..request
        }),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
}

#[test]
fn stall_record_must_match_the_recomputed_decision_exactly() {
    let run = build_running();
    let policy = Policy::default();
    let (decision, ev) = bound_stall("no fresh evidence");
    let request = stall_record(&decision, &ev, "2026-07-14T01:02:04Z");
    // Refused as stale, naming the decision liveness gives at --at.
    let stale = |result: Result<_, FlowError>,
                 at: &str,
                 current: (LivenessAction, &str),
                 reason_only: bool| {
        let (action, reason) = current;
        let Err(ErrorKind::Conflict(Conflict::Lane(LaneRefusal::StaleDecision {
            lane_id,
            at: said_at,
            current,
            reason_only: said,
        }))) = result.as_ref().map_err(FlowError::kind)
        else {
            panic!("not a stale decision: {result:?}");
        };
        assert_eq!((lane_id.as_str(), said_at.as_str()), ("build", at));
        assert_eq!(
            (current.action, current.reason, *said),
            (action, reason, reason_only)
        );
    };
    let suspect = (LivenessAction::SuspectStall, "no fresh evidence");
    // One microsecond earlier the lane was still fresh.
    stale(
        decide_stall_record(
            &run.state,
            &policy,
            &request,
            t("2026-07-14T01:02:03.999999Z"),
        ),
        "2026-07-14T01:02:04Z",
        (LivenessAction::Continue, "fresh evidence"),
        false,
    );
    // The reason must be the decision's.
    stale(
        decide_stall_record(
            &run.state,
            &policy,
            &StallRecord {
                reason: "looks stuck",
                ..request
            },
            t("2026-07-14T01:02:04Z"),
        ),
        "2026-07-14T01:02:04Z",
        suspect,
        true,
    );
    // Exactly two keys: an extra key is a mismatch (its checksum binds).
    let extra = json!({"action": "suspect_stall", "reason": "no fresh evidence", "note": 1});
    let extra = extra.as_object().unwrap();
    let extra_ev = bound_evidence(extra);
    let request_extra = StallRecord {
        decision: extra,
        evidence: &extra_ev,
        ..request
    };
    assert!(precheck_stall_record(&request_extra).is_ok());
    stale(
        decide_stall_record(
            &run.state,
            &policy,
            &request_extra,
            t("2026-07-14T01:02:04Z"),
        ),
        "2026-07-14T01:02:04Z",
        suspect,
        false,
    );
    // The decision is recomputed with the command status unknown.
    let intents =
        decide_stall_record(&run.state, &policy, &request, t("2026-07-14T01:02:04Z")).unwrap();
    assert_eq!(
        intents_json(&intents),
        json!([{"event_type": "stall_suspected", "lane_id": "build", "agent_id": "agent-1",
                "from_state": "running", "to_state": "suspected_stall",
                "timestamp": "2026-07-14T01:02:04Z", "reason": "no fresh evidence",
                "evidence_refs": ev, "metadata": {}}])
    );
    let mut run = run;
    run.commit(intents);
    assert_eq!(run.build_record().state, LaneState::SuspectedStall);
    // A stalled lane cannot be recorded again (its decision is send_probe).
    stale(
        decide_stall_record(&run.state, &policy, &request, t("2026-07-14T01:02:04Z")),
        "2026-07-14T01:02:04Z",
        (LivenessAction::SendProbe, "probe has not been sent"),
        false,
    );
}

#[test]
fn stall_record_from_a_starting_lane() {
    let mut run = build_after(1);
    let (decision, ev) = bound_stall("startup ACK deadline elapsed");
    let request = stall_record(&decision, &ev, "2026-07-14T01:00:30Z");
    let intents = decide_stall_record(
        &run.state,
        &Policy::default(),
        &request,
        t("2026-07-14T01:00:30Z"),
    )
    .unwrap();
    assert_eq!(intents[0].from_state.map(|s| s.as_str()), Some("starting"));
    run.commit(intents);
    assert_eq!(run.build_record().state, LaneState::SuspectedStall);
    // The owner checks come first.
    assert_eq!(
        decide_stall_record(
            &run.state,
            &Policy::default(),
            &StallRecord {
                agent_id: "agent-9",
                ..request
            },
            t("2026-07-14T01:00:30Z")
        ),
        Err(lane_refused::not_owner("build", "agent-9", "agent-1"))
    );
}

// -------------------------------------------------------------- stall-clear

fn step<'a>(evidence: &'a Value) -> LaneStep<'a> {
    LaneStep {
        lane_id: "build",
        agent_id: "agent-1",
        at: "2026-07-14T01:03:30Z",
        evidence,
    }
}

#[test]
fn stall_clear_prechecks() {
    let ev = evidence("x");
    assert_eq!(
        precheck_stall_clear(&step(&ev)),
        Ok(t("2026-07-14T01:03:30Z"))
    );
    let empty = json!([]);
    // Evidence is not needed before the lock.
    assert!(precheck_stall_clear(&step(&empty)).is_ok());
    let bad_lane = LaneStep {
        lane_id: "a/b",
        agent_id: "",
        at: "x",
        ..step(&ev)
    };
    assert_eq!(
        precheck_stall_clear(&bad_lane),
        Err(invalid_msg("lane id must match the identifier contract"))
    );
    let bad_agent = LaneStep {
        agent_id: "",
        at: "x",
        ..step(&ev)
    };
    assert_eq!(
        precheck_stall_clear(&bad_agent),
        Err(invalid_msg("agent id must match the identifier contract"))
    );
    let bad_at = LaneStep {
        at: "2026-07-14T01:03:30+00:00",
        ..step(&ev)
    };
    assert_eq!(
        precheck_stall_clear(&bad_at),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
}

#[test]
fn stall_clear_writes_lane_recovered_with_fresh_evidence() {
    let policy = Policy::default();
    let ev = evidence("agent answered");
    assert_eq!(
        decide_stall_clear(&build_running().state, &policy, &step(&ev), "answered"),
        Err(not_stalled(LaneState::Running))
    );
    assert_eq!(
        decide_stall_clear(&build_recovering().state, &policy, &step(&ev), "answered"),
        Err(not_stalled(LaneState::Recovering))
    );
    let mut run = build_stalled();
    assert_eq!(
        decide_stall_clear(&run.state, &policy, &step(&json!([])), "answered"),
        Err(invalid_msg("liveness evidence is required"))
    );
    assert_eq!(
        decide_stall_clear(&run.state, &policy, &step(&ev), "  "),
        Err(invalid_msg("liveness reason is required"))
    );
    // Freshness is measured against the stall record itself.
    let stall_evidence = evidence("stall");
    assert_eq!(
        decide_stall_clear(
            &run.state,
            &policy,
            &step(&stall_evidence),
            "no fresh evidence"
        ),
        Err(invalid_msg("liveness evidence is unchanged"))
    );
    assert_eq!(
        decide_stall_clear(&run.state, &policy, &step(&stall_evidence), "answered"),
        Err(invalid_msg(
            "liveness evidence was already recorded for this lane"
        ))
    );
    let intents = decide_stall_clear(&run.state, &policy, &step(&ev), "answered").unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].event_type, "lane_recovered");
    assert_eq!(
        intents[0].from_state.map(|s| s.as_str()),
        Some("suspected_stall")
    );
    assert_eq!(intents[0].to_state.map(|s| s.as_str()), Some("running"));
    assert_eq!(intents[0].reason.as_deref(), Some("answered"));
    assert_eq!(
        intents[0].timestamp.as_deref(),
        Some("2026-07-14T01:03:30Z")
    );
    run.commit(intents);
    let lane = run.build_record();
    assert_eq!(lane.state, LaneState::Running);
    assert_eq!(lane.last_event_type, "lane_recovered");
    assert!(run.state.is_liveness_evidence(&ev));
}

// --------------------------------------------------------------- probe-sent

#[test]
fn probe_sent_prechecks_in_order() {
    let ev = evidence("probe");
    let empty = json!([]);
    assert_eq!(
        precheck_probe_sent(&step(&ev), "2026-07-14T01:04:00Z"),
        Ok((t("2026-07-14T01:03:30Z"), t("2026-07-14T01:04:00Z")))
    );
    assert_eq!(
        precheck_probe_sent(
            &LaneStep {
                lane_id: "",
                ..step(&empty)
            },
            "x"
        ),
        Err(invalid_msg("lane id must match the identifier contract"))
    );
    assert_eq!(
        precheck_probe_sent(
            &LaneStep {
                at: "x",
                ..step(&empty)
            },
            "x"
        ),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
    assert_eq!(
        precheck_probe_sent(&step(&empty), "2026-07-14Z"),
        Err(invalid_msg("timestamp must be timezone-aware"))
    );
    assert_eq!(
        precheck_probe_sent(&step(&empty), "2026-07-14T01:04Z"),
        Err(invalid_msg("lifecycle transition requires evidence"))
    );
}

#[test]
fn probe_sent_deadline_within_the_grace() {
    let policy = Policy::default();
    let ev = evidence("probe");
    let s = LaneStep {
        at: "2026-07-14T01:03:10Z",
        ..step(&ev)
    };
    let at = t("2026-07-14T01:03:10Z");
    let decide = |state: &CoordinatorState, deadline: &str| {
        decide_probe_sent(state, &policy, &s, deadline, (at, t(deadline)))
    };
    assert_eq!(
        decide(&build_running().state, "2026-07-14T01:04:00Z"),
        Err(not_stalled(LaneState::Running))
    );
    assert_eq!(
        decide(&build_recovering().state, "2026-07-14T01:04:00Z"),
        Err(not_stalled(LaneState::Recovering))
    );
    let run = build_stalled();
    let grace = invalid_msg("probe deadline must be within the manifest probe grace");
    for deadline in [
        "2026-07-14T01:03:10Z",
        "2026-07-14T01:03:00Z",
        "2026-07-14T01:04:10.000001Z",
    ] {
        assert_eq!(
            decide(&run.state, deadline),
            Err(grace.clone()),
            "{deadline}"
        );
    }
    // Exactly the grace is allowed; so is any later command deadline.
    for deadline in ["2026-07-14T01:03:10.000001Z", "2026-07-14T01:04:10Z"] {
        assert!(decide(&run.state, deadline).is_ok(), "{deadline}");
    }
    let intents = decide(&run.state, "2026-07-14T01:04:10Z").unwrap();
    assert_eq!(intents[0].event_type, "probe_sent");
    assert_eq!(
        intents[0].from_state.map(|s| s.as_str()),
        Some("suspected_stall")
    );
    assert_eq!(intents[0].to_state.map(|s| s.as_str()), Some("recovering"));
    assert_eq!(intents[0].reason, None);
    assert_eq!(
        Value::Object(intents[0].metadata.clone()),
        json!({"probe_deadline": "2026-07-14T01:04:10Z"})
    );
    let mut run = run;
    run.commit(intents);
    let lane = run.build_record();
    assert_eq!(lane.state, LaneState::Recovering);
    assert_eq!(lane.probe_deadline.as_deref(), Some("2026-07-14T01:04:10Z"));
    // The grace comes from the run's manifest.
    let run = build_stalled();
    let tight = Policy {
        probe_grace_seconds: 10,
        ..Policy::default()
    };
    assert_eq!(
        decide_probe_sent(
            &run.state,
            &tight,
            &s,
            "x",
            (at, t("2026-07-14T01:03:20.000001Z"))
        ),
        Err(grace)
    );
}

// --------------------------------------------------------- interrupt-result

fn tool(summary: Value) -> Value {
    json!([{"kind": "note", "summary": "interrupt"}, {"kind": "tool", "summary": summary}])
}

#[test]
fn interrupt_result_needs_the_native_tool_evidence() {
    let ok = tool(json!("Native INTERRUPT sent to agent-1"));
    assert_eq!(
        precheck_interrupt_result(&step(&ok)),
        Ok(t("2026-07-14T01:03:30Z"))
    );
    let required = invalid_msg("native interrupt tool evidence is required");
    for ev in [
        tool(json!("sent a probe")),
        tool(json!(null)),
        json!([{"kind": "tool"}]),
        json!([{"kind": "Tool", "summary": "interrupt"}]),
    ] {
        assert_eq!(
            precheck_interrupt_result(&step(&ev)),
            Err(required.clone()),
            "{ev}"
        );
    }
    let empty = json!([]);
    assert_eq!(
        precheck_interrupt_result(&step(&empty)),
        Err(invalid_msg("lifecycle transition requires evidence"))
    );
    assert_eq!(
        precheck_interrupt_result(&LaneStep {
            at: "late",
            ..step(&empty)
        }),
        Err(invalid_msg("timestamp must be UTC ISO-8601 ending in Z"))
    );
    assert_eq!(
        precheck_interrupt_result(&LaneStep {
            agent_id: "-x",
            ..step(&empty)
        }),
        Err(invalid_msg("agent id must match the identifier contract"))
    );
}

#[test]
fn interrupt_result_only_when_liveness_authorizes_it() {
    let policy = Policy::default();
    let ev = tool(json!("interrupt tool called"));
    let at_text = "2026-07-14T01:30:00Z";
    let s = LaneStep {
        at: at_text,
        ..step(&ev)
    };
    let at = t(at_text);
    assert_eq!(
        decide_interrupt_result(&build_stalled().state, &policy, &s, at),
        Err(build_in(
            LaneState::SuspectedStall,
            &[LaneState::Recovering],
            RefusedLaneStep::Interrupt
        ))
    );
    let mut run = build_recovering();
    let not_due = |at: &str, action, reason| {
        Err(FlowError::from(LaneRefusal::InterruptNotDue {
            lane_id: "build".into(),
            at: at.into(),
            decision: LivenessDecision { action, reason },
        }))
    };
    // The command deadline has not passed one microsecond earlier.
    let earlier = LaneStep {
        at: "2026-07-14T01:29:59.999999Z",
        ..s
    };
    assert_eq!(
        decide_interrupt_result(&run.state, &policy, &earlier, at - us(1)),
        not_due(
            "2026-07-14T01:29:59.999999Z",
            LivenessAction::AwaitProbe,
            "a recovery deadline remains"
        )
    );
    // A lineage at its replacement limit goes to the main session instead.
    let mut exhausted = run.state.clone();
    exhausted.lanes.get_mut("build").unwrap().replacement_count =
        serde_json::from_value(json!(1)).unwrap();
    assert_eq!(
        decide_interrupt_result(&exhausted, &policy, &s, at),
        not_due(
            at_text,
            LivenessAction::MainTakeover,
            "replacement limit reached"
        )
    );
    let intents = decide_interrupt_result(&run.state, &policy, &s, at).unwrap();
    assert_eq!(
        intents_json(&intents),
        json!([{"event_type": "agent_interrupted", "lane_id": "build", "agent_id": "agent-1",
                "from_state": "recovering", "to_state": "recovering", "timestamp": at_text,
                "reason": "native interrupt recorded", "evidence_refs": ev, "metadata": {}}])
    );
    run.commit(intents);
    assert_eq!(run.build_record().last_event_type, "agent_interrupted");
    // Repeatable.
    let again = LaneStep {
        at: "2026-07-14T01:31:00Z",
        ..s
    };
    assert!(
        decide_interrupt_result(&run.state, &policy, &again, t("2026-07-14T01:31:00Z")).is_ok()
    );
}

#[test]
fn liveness_actions_round_trip() {
    for action in LivenessAction::ALL {
        assert_eq!(LivenessAction::parse(action.as_str()), Some(action));
    }
    assert_eq!(LivenessAction::parse("stall"), None);
    assert_eq!(CommandStatus::parse("alive"), Some(CommandStatus::Alive));
    assert_eq!(CommandStatus::parse("dead"), Some(CommandStatus::Dead));
    assert_eq!(
        CommandStatus::parse("unknown"),
        Some(CommandStatus::Unknown)
    );
    assert_eq!(CommandStatus::parse("Alive"), None);
}
