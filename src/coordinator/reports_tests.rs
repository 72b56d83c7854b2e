use super::*;
use crate::coordinator::report_refusal::ReportRefusal;
use crate::coordinator::test_ledger::{needs_active_run, with};
use crate::coordinator::{ReplayPolicy, RunOrigin};

const RUN: &str = "20261130T020310Z-728df1d6";

fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

fn state_with(events: &[(&str, Option<&str>, Value)]) -> CoordinatorState {
    let mut state = CoordinatorState::new(&RunOrigin {
        owner_fingerprint: Some(hex('a')),
        owner_epoch: 1,
        approved_component_ids: vec![],
    });
    for (i, (event_type, to, meta)) in events.iter().enumerate() {
        let mut metadata = meta.as_object().cloned().unwrap_or_default();
        metadata.insert("owner_epoch".into(), json!(1));
        let event = json!({
            "schema_version": 1, "run_id": RUN, "lane_id": null, "agent_id": null,
            "sequence": i + 1, "event_type": event_type, "from_state": null,
            "to_state": to, "timestamp": "2026-07-14T01:00:00Z",
            "owner_token": hex('a'), "manifest_hash": hex('0'),
            "previous_checksum": state.last_checksum(),
            "checksum": format!("{:064x}", i + 1),
            "evidence_refs": [{"kind": "k", "summary": "s"}], "reason": null,
            "metadata": metadata,
        });
        state
            .apply(&event, &ReplayPolicy::default())
            .unwrap_or_else(|e| panic!("{event_type}: {e}"));
    }
    state
}

fn running() -> CoordinatorState {
    state_with(&[
        ("run_created", Some("planned"), json!({})),
        ("plan_approved", Some("approved"), json!({})),
        ("run_started", Some("running"), json!({})),
    ])
}

fn handoff(state: &CoordinatorState) -> Value {
    json!({
        "canonical_sha": hex('1'), "agents_hash": hex('2'), "skill_hash": hex('3'),
        "manifest_hash": hex('0'), "run_id": RUN, "owner_epoch": 1,
        "receipt_head": state.last_checksum(),
        "target_hashes": {"src/lib.rs": hex('4')},
    })
}

fn live(state: &CoordinatorState) -> Value {
    let mut payload = handoff(state);
    let extra = json!({
        "command_ids": ["apply-1"], "timestamps": ["2026-07-14T01:00:00Z"],
        "exit_status": 0, "source_hash": hex('5'), "rendered_hash": hex('6'),
        "live_hash": hex('7'), "evidence_refs": [],
    });
    for (k, v) in extra.as_object().unwrap() {
        payload[k] = v.clone();
    }
    payload
}

fn refused(kind: ReportKind, payload: &Value) -> String {
    match validate_report_payload(kind, payload, &Limits::default()) {
        // Exit 2, a typed input reason or a rule of the receipt contract.
        Err(error) if matches!(error.kind(), ErrorKind::Input(_) | ErrorKind::Contract(_)) => {
            error.message().into_owned()
        }
        other => panic!("{payload}: {other:?}"),
    }
}

#[test]
fn a_valid_handoff_binds_its_bytes_and_the_head() {
    let state = running();
    let payload = handoff(&state);
    let map = validate_report_payload(ReportKind::Handoff, &payload, &Limits::default()).unwrap();
    let report = bind_report(&state, ReportKind::Handoff, RUN, &hex('0'), map).unwrap();
    let mut bytes = canonical::to_vec(&payload);
    bytes.push(b'\n');
    assert_eq!(report.bytes, bytes);
    assert_eq!(report.checksum, canonical::sha256_hex(&bytes));
    assert_eq!(
        report.file_name,
        format!(
            "{RUN}-fresh_session_handoff-{}.json",
            &report.checksum[..16]
        )
    );
    assert_eq!(
        Value::Object(report.metadata.clone()),
        json!({
            "owner_epoch": 1, "report_kind": "fresh_session_handoff",
            "report_path": report.relative_path(), "report_checksum": report.checksum,
            "report_receipt_head": state.last_checksum(),
        })
    );
    assert_eq!(binding_status(&state, &report), Ok(Binding::Unbound));
    let intents = decide_report(&state, &report).unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].event_type, "handoff_recorded");
    assert!(!intents[0].metadata.contains_key("owner_epoch"));
    assert_eq!(
        intents[0].evidence_refs,
        json!([{"kind": "report", "summary": "immutable report bound to receipt head",
                "checksum": report.checksum}])
    );
}

#[test]
fn forbidden_terms_are_refused_in_keys_and_values() {
    let state = running();
    let message = "report contains forbidden secret or raw-output fields";
    for (key, value) in [
        ("target_hashes", json!({"tokenizer.py": hex('4')})),
        ("target_hashes", json!({"docs/PASSWORD.md": hex('4')})),
        ("target_hashes", json!({"Secret/x": hex('4')})),
        ("target_hashes", json!({"prompts/a": hex('4')})),
        ("target_hashes", json!({"raw_output.log": hex('4')})),
        ("target_hashes", json!({"fencing/x": hex('4')})),
        ("run_id", json!("TOKEN-run")),
    ] {
        assert_eq!(
            refused(ReportKind::Handoff, &with(handoff(&state), key, value)),
            message
        );
    }
    // A smuggled extra key is a contract mismatch first.
    let mut smuggled = handoff(&state);
    smuggled["token"] = json!("abc");
    assert_eq!(
        refused(ReportKind::Handoff, &smuggled),
        "report fields do not match the fixed contract"
    );
    // Live evidence is part of the payload too.
    let payload = with(
        live(&state),
        "evidence_refs",
        json!([{"kind": "log", "summary": "the bearer token was x"}]),
    );
    assert_eq!(refused(ReportKind::Live, &payload), message);
}

#[test]
fn shapes_are_checked_in_order() {
    let state = running();
    let h = || handoff(&state);
    assert_eq!(
        refused(ReportKind::Handoff, &live(&state)),
        "report fields do not match the fixed contract"
    );
    assert_eq!(
        refused(ReportKind::Live, &h()),
        "report fields do not match the fixed contract"
    );
    assert_eq!(
        refused(ReportKind::Handoff, &json!([])),
        "report fields do not match the fixed contract"
    );
    assert_eq!(
        refused(ReportKind::Handoff, &with(h(), "agents_hash", json!("ABC"))),
        "agents_hash must be lowercase SHA-256"
    );
    // canonical_sha is checked before agents_hash.
    let both = with(
        with(h(), "agents_hash", json!(1)),
        "canonical_sha",
        json!(1),
    );
    assert_eq!(
        refused(ReportKind::Handoff, &both),
        "canonical_sha must be lowercase SHA-256"
    );
    for epoch in [json!(true), json!(0), json!("1"), json!(-3)] {
        assert_eq!(
            refused(ReportKind::Handoff, &with(h(), "owner_epoch", epoch)),
            "owner_epoch must be a positive integer"
        );
    }
    let targets = "target_hashes must contain bounded SHA-256 entries";
    let many: Map<String, Value> = (0..65)
        .map(|i| (format!("f{i}"), json!(hex('4'))))
        .collect();
    for bad in [
        json!([]),
        json!({"/etc/passwd-like": hex('4')}),
        json!({"a/../b": hex('4')}),
        json!({"": hex('4')}),
        json!({"x".repeat(257): hex('4')}),
        json!({"a": "ABC"}),
        Value::Object(many),
    ] {
        assert_eq!(
            refused(ReportKind::Handoff, &with(h(), "target_hashes", bad)),
            targets
        );
    }
    let l = || live(&state);
    assert_eq!(
        refused(ReportKind::Live, &with(l(), "rendered_hash", json!(""))),
        "rendered_hash must be lowercase SHA-256"
    );
    for bad in [json!([]), json!([""]), json!(["x".repeat(129)]), json!("a")] {
        assert_eq!(
            refused(ReportKind::Live, &with(l(), "command_ids", bad)),
            "command_ids must be a bounded non-empty list"
        );
    }
    assert_eq!(
        refused(ReportKind::Live, &with(l(), "timestamps", json!([]))),
        "timestamps must align with command_ids"
    );
    for bad in [
        json!(["2026-07-14T01:00:00"]),
        json!([5]),
        json!(["never Z"]),
    ] {
        assert_eq!(
            refused(ReportKind::Live, &with(l(), "timestamps", bad)),
            "report timestamp must be a UTC timestamp"
        );
    }
    // Lax: the reference's fromisoformat reading.
    for good in ["2026-07-14T01:00Z", "2026-07-14 01:00:00Z", "2026-07-14Z"] {
        let payload = with(l(), "timestamps", json!([good]));
        assert!(
            validate_report_payload(ReportKind::Live, &payload, &Limits::default()).is_ok(),
            "{good}"
        );
    }
    assert_eq!(
        refused(ReportKind::Live, &with(l(), "exit_status", json!(false))),
        "exit_status must be an integer"
    );
    let big: Value = serde_json::from_str("100000000000000000000000000000").unwrap();
    assert!(
        validate_report_payload(
            ReportKind::Live,
            &with(l(), "exit_status", big),
            &Limits::default()
        )
        .is_ok()
    );
    assert_eq!(
        refused(
            ReportKind::Live,
            &with(l(), "evidence_refs", json!([{"kind": "k"}]))
        ),
        "evidence summary must be at most 256 characters"
    );
}

#[test]
fn the_payload_must_name_this_run_epoch_and_manifest() {
    let state = running();
    let bind = |payload: Value| {
        let map = payload.as_object().unwrap().clone();
        bind_report(&state, ReportKind::Handoff, RUN, &hex('0'), map)
    };
    assert_eq!(
        bind(with(handoff(&state), "run_id", json!("other-run"))),
        Err(crate::coordinator::input_refusal::refused_as(
            "report run_id does not match"
        ))
    );
    assert_eq!(
        bind(with(handoff(&state), "owner_epoch", json!(2))),
        Err(FlowError::from(ReportRefusal::StaleEpoch {
            given: json!(2),
            current: 1
        }))
    );
    assert_eq!(
        bind(with(handoff(&state), "manifest_hash", json!(hex('9')))),
        Err(FlowError::from(ReportRefusal::StaleManifest {
            given: json!(hex('9')),
            current: hex('0')
        }))
    );
    let stale = bind(with(handoff(&state), "receipt_head", json!(hex('8')))).unwrap();
    let heads = (hex('8'), state.last_checksum().to_string());
    assert_eq!(
        binding_status(&state, &stale),
        Err(FlowError::from(ReportRefusal::StaleHead {
            given: heads.0.clone(),
            current: heads.1.clone()
        }))
    );
    assert_eq!(
        decide_report(&state, &stale),
        Err(FlowError::from(ReportRefusal::HeadMoved {
            given: heads.0,
            current: heads.1
        }))
    );
}

#[test]
fn one_binding_per_kind_and_repeats_are_idempotent() {
    let before = running();
    let map = handoff(&before).as_object().unwrap().clone();
    let report = bind_report(&before, ReportKind::Handoff, RUN, &hex('0'), map).unwrap();
    let mut meta = report.metadata.clone();
    meta.remove("owner_epoch");
    let after = state_with(&[
        ("run_created", Some("planned"), json!({})),
        ("plan_approved", Some("approved"), json!({})),
        ("run_started", Some("running"), json!({})),
        ("handoff_recorded", None, Value::Object(meta)),
    ]);
    // The same payload again: bound already, whatever the head is now.
    assert_eq!(binding_status(&after, &report), Ok(Binding::AlreadyBound));
    // A different handoff at the new head: the kind is taken.
    let map = handoff(&after).as_object().unwrap().clone();
    let other = bind_report(&after, ReportKind::Handoff, RUN, &hex('0'), map).unwrap();
    assert_eq!(
        binding_status(&after, &other),
        Err(FlowError::from(ReportRefusal::AlreadyBound {
            kind: "fresh_session_handoff".into(),
            path: report.metadata["report_path"].clone()
        }))
    );
}

#[test]
fn each_kind_has_its_run_states() {
    let planned = state_with(&[("run_created", Some("planned"), json!({}))]);
    assert_eq!(
        require_report_state(&planned, ReportKind::Handoff),
        Err(needs_active_run(RunState::Planned))
    );
    assert_eq!(
        require_report_state(&running(), ReportKind::Live),
        Err(crate::coordinator::decide::lane_refused::run_state(
            crate::coordinator::state::RunState::Running,
            &[crate::coordinator::state::RunState::Completed]
        ))
    );
    assert_eq!(
        require_report_state(&running(), ReportKind::Handoff),
        Ok(())
    );
}
