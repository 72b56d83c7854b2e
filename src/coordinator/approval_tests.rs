use super::*;
use crate::coordinator::RunOrigin;
use chrono::TimeZone;
use serde_json::json;

fn planned() -> CoordinatorState {
    CoordinatorState::new(&RunOrigin {
        owner_fingerprint: Some("a".repeat(64)),
        owner_epoch: 1,
        approved_component_ids: vec![],
    })
}

fn policy(value: Value) -> ApprovalPolicy {
    ApprovalPolicy::from_input(&value, None).unwrap()
}

fn four_eyes() -> ApprovalPolicy {
    policy(
        json!({"required_approver": "alice", "require_different_approver": true,
                  "initiated_by": "agent-1", "expires_after_s": 3600}),
    )
}

fn frozen(policy: &ApprovalPolicy) -> (PolicyStatus, ApprovalLedger) {
    let ledger = ApprovalLedger {
        binding: Some(policy.checksum()),
        malformed_binding: None,
        created_at: Some("2026-07-14T01:00:00Z".into()),
        decisions: vec![],
    };
    let status = PolicyStatus::resolve(&ledger, Some(Ok(policy.file_bytes())));
    (status, ledger)
}

fn at(minutes: u32) -> Instant {
    chrono::Utc
        .with_ymd_and_hms(2026, 7, 14, 1, minutes, 0)
        .unwrap()
}

fn ev() -> Value {
    json!([{"kind": "user_approval", "summary": "ok"}])
}

fn claim(identity: Option<&str>) -> Claim {
    Claim {
        identity: identity.map(str::to_string),
        credential: Credential::NotGiven,
        signature: None,
    }
}

fn approve(
    status: &PolicyStatus,
    ledger: &ApprovalLedger,
    claim: &Claim,
    now: Instant,
) -> Result<Vec<Intent>, FlowError> {
    approve_with(&planned(), Gate { status, ledger }, claim, now, &ev())
}

/// The approval decision on `state` with the caller's `evidence`.
fn approve_with(
    state: &CoordinatorState,
    gate: Gate,
    claim: &Claim,
    now: Instant,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    decide_approve(
        state,
        gate,
        claim,
        now,
        "2026-07-14T01:00:00Z",
        evidence,
        &Limits::default(),
    )
}

fn refused_with(message: &str) -> Result<Vec<Intent>, FlowError> {
    Err(ErrorKind::Approval(ApprovalRefusal::Refused(message.into())).into())
}

// ------------------------------------------------------------ the policy

#[test]
fn policy_validation_refuses_bad_shapes() {
    let cases = [
        (json!({}), "approval policy must not be empty"),
        (
            json!({"required_approver": "alice", "approver": "x", "a": 1}),
            "approval policy contains unsupported fields: a, approver",
        ),
        (
            json!({"required_approver": "al ice"}),
            "required_approver must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
        (
            json!({"required_approver": ""}),
            "required_approver must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
        (
            json!({"required_approver": "a".repeat(129)}),
            "required_approver must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
        (
            json!({"required_approver": "alice", "initiated_by": 7}),
            "initiated_by must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
        (
            json!({"required_approver": "alice", "require_different_approver": "yes"}),
            "require_different_approver must be true or false",
        ),
        (
            json!({"approver_fingerprint": "ABC"}),
            "approver_fingerprint must be lowercase SHA-256",
        ),
        (
            json!({"approver_fingerprint": "A".repeat(64)}),
            "approver_fingerprint must be lowercase SHA-256",
        ),
        (
            json!({"expires_after_s": 0}),
            "expires_after_s must be a positive integer of at most 315360000 seconds",
        ),
        (
            json!({"expires_after_s": true}),
            "expires_after_s must be a positive integer of at most 315360000 seconds",
        ),
        (
            json!({"expires_after_s": 315_360_001u64}),
            "expires_after_s must be a positive integer of at most 315360000 seconds",
        ),
        (
            json!({"require_different_approver": true}),
            "require_different_approver needs an initiator: set initiated_by or BLUETAPE_INITIATED_BY",
        ),
        (
            json!({"required_approver": "bob", "initiated_by": "bob",
                   "require_different_approver": true}),
            "required_approver 'bob' is the initiator and require_different_approver is on: nobody could approve",
        ),
        (
            json!({"initiated_by": "agent-1"}),
            "approval policy is vacuous: it must name a required_approver, require a different approver, pin an approver_fingerprint or set expires_after_s",
        ),
        (
            json!({"required_approver": null, "require_different_approver": false}),
            "approval policy is vacuous: it must name a required_approver, require a different approver, pin an approver_fingerprint or set expires_after_s",
        ),
        (json!([]), "approval policy must be a JSON object"),
    ];
    for (input, message) in cases {
        assert_eq!(
            ApprovalPolicy::from_input(&input, None),
            Err(message.to_string()),
            "{input}"
        );
    }
}

#[test]
fn the_initiator_may_come_from_the_environment() {
    let p = ApprovalPolicy::from_input(
        &json!({"require_different_approver": true}),
        Some("agent-1"),
    )
    .unwrap();
    assert_eq!(p.initiated_by.as_deref(), Some("agent-1"));
    // Agreeing values are fine, disagreeing ones are refused.
    assert!(
        ApprovalPolicy::from_input(
            &json!({"require_different_approver": true, "initiated_by": "agent-1"}),
            Some("agent-1")
        )
        .is_ok()
    );
    assert_eq!(
        ApprovalPolicy::from_input(
            &json!({"require_different_approver": true, "initiated_by": "agent-1"}),
            Some("agent-2")
        ),
        Err("initiated_by 'agent-1' in the approval policy disagrees with BLUETAPE_INITIATED_BY 'agent-2'".into())
    );
    assert_eq!(
        ApprovalPolicy::from_input(&json!({"required_approver": "alice"}), Some("a b")),
        Err("BLUETAPE_INITIATED_BY must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)".into())
    );
    // An environment initiator equal to the required approver under four
    // eyes is just as unsatisfiable.
    assert!(
        ApprovalPolicy::from_input(
            &json!({"required_approver": "alice", "require_different_approver": true}),
            Some("alice")
        )
        .is_err()
    );
}

#[test]
fn the_canonical_policy_round_trips_through_its_file() {
    let p = four_eyes();
    assert_eq!(
        p.to_value(),
        json!({"approver_fingerprint": null, "expires_after_s": 3600, "initiated_by": "agent-1",
               "require_different_approver": true, "required_approver": "alice"})
    );
    assert_eq!(p.checksum(), canonical::digest(&p.to_value()));
    let bytes = p.file_bytes();
    assert_eq!(bytes.last(), Some(&b'\n'));
    assert_eq!(
        ApprovalPolicy::from_frozen(&bytes, &p.checksum()),
        Ok(p.clone())
    );
    // Any edit, even whitespace or a missing LF, is a mismatch.
    let mismatch = Err("approval policy file does not match its chained checksum".to_string());
    assert_eq!(
        ApprovalPolicy::from_frozen(&bytes[..bytes.len() - 1], &p.checksum()),
        mismatch
    );
    let edited = String::from_utf8(bytes.clone())
        .unwrap()
        .replace("alice", "mallory");
    assert_eq!(
        ApprovalPolicy::from_frozen(edited.as_bytes(), &p.checksum()),
        mismatch
    );
    let mut spaced = b" ".to_vec();
    spaced.extend_from_slice(&bytes);
    assert_eq!(
        ApprovalPolicy::from_frozen(&spaced, &p.checksum()),
        mismatch
    );
    // The binding item fits the evidence contract.
    let item = p.evidence_item();
    assert_eq!(item["kind"], POLICY_KIND);
    assert_eq!(item["path"], POLICY_FILE);
    assert_eq!(item["checksum"], p.checksum());
    assert_eq!(
        item["summary"],
        "approver=alice four_eyes=on initiator=agent-1 credential=none expires_after_s=3600"
    );
    crate::receipt::rules::check_evidence(&json!([item]), &Limits::default()).unwrap();
    let long = policy(
        json!({"required_approver": "a".repeat(128), "initiated_by": "b".repeat(128),
                             "require_different_approver": true}),
    );
    assert_eq!(long.summary().chars().count(), 256);
}

// ------------------------------------------------------------ run-approve

#[test]
fn without_a_policy_the_reference_rule_applies() {
    let ledger = ApprovalLedger::default();
    let intents = approve(&PolicyStatus::Absent, &ledger, &claim(None), at(0)).unwrap();
    assert_eq!(intents[0].evidence_refs, ev());
    assert_eq!(intents[0].event_type, "plan_approved");
}

#[test]
fn the_identity_checks_run_in_order() {
    let (status, ledger) = frozen(&four_eyes());
    assert_eq!(
        approve(&status, &ledger, &claim(None), at(1)),
        refused_with("run-approve requires approver identity; set BLUETAPE_APPROVED_BY")
    );
    assert_eq!(
        approve(&status, &ledger, &claim(Some("al ice")), at(1)),
        refused_with(
            "approver identity 'al?ice' is not valid: BLUETAPE_APPROVED_BY must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)"
        )
    );
    assert_eq!(
        approve(&status, &ledger, &claim(Some("agent-1")), at(1)),
        refused_with("approval must be granted by someone other than 'agent-1'")
    );
    assert_eq!(
        approve(&status, &ledger, &claim(Some("bob")), at(1)),
        refused_with("approval requires approver 'alice', got 'bob'")
    );
    let intents = approve(&status, &ledger, &claim(Some("alice")), at(1)).unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].evidence_refs,
        json!([{"kind": "user_approval", "summary": "ok"},
               {"kind": "approver_identity", "summary": "approved_by=alice source=env",
                "checksum": four_eyes().checksum()}])
    );
    // The timestamp is the caller's `at`.
    assert_eq!(
        intents[0].timestamp.as_deref(),
        Some("2026-07-14T01:00:00Z")
    );
}

#[test]
fn four_eyes_alone_admits_anyone_but_the_initiator() {
    let p = policy(json!({"require_different_approver": true, "initiated_by": "agent-1"}));
    let (status, ledger) = frozen(&p);
    assert!(approve(&status, &ledger, &claim(Some("agent-2")), at(1)).is_ok());
    assert_eq!(
        approve(&status, &ledger, &claim(Some("agent-1")), at(1)),
        refused_with("approval must be granted by someone other than 'agent-1'")
    );
}

#[test]
fn the_window_is_measured_on_the_wall_clock() {
    let (status, ledger) = frozen(&four_eyes());
    // 60 minutes = 3600 s is still inside the window; one more is not,
    // whatever `at` the caller claims.
    let alice_after = |seconds: i64| {
        approve(
            &status,
            &ledger,
            &claim(Some("alice")),
            at(0) + chrono::Duration::seconds(seconds),
        )
    };
    assert!(alice_after(3600).is_ok());
    assert_eq!(
        alice_after(3601),
        Err(ErrorKind::Approval(ApprovalRefusal::Expired(
            "approval request expired: 3601 s since run_created exceed expires_after_s 3600; approval by 'alice' refused".into()
        )).into())
    );
    // Identity is checked before the window.
    assert_eq!(
        approve(
            &status,
            &ledger,
            &claim(Some("bob")),
            at(0) + chrono::Duration::days(1)
        ),
        refused_with("approval requires approver 'alice', got 'bob'")
    );
}

#[test]
fn a_pinned_credential_must_be_given_and_match() {
    let fingerprint = canonical::sha256_hex(b"s3cret");
    let p = policy(json!({"required_approver": "alice", "approver_fingerprint": fingerprint}));
    let (status, ledger) = frozen(&p);
    assert!(status.pins_credential());
    let with = |credential: Credential| Claim {
        identity: Some("alice".into()),
        credential,
        signature: None,
    };
    assert_eq!(
        approve(&status, &ledger, &with(Credential::NotGiven), at(1)),
        refused_with(
            "approval by 'alice' requires the pinned approver credential; set BLUETAPE_APPROVER_FILE"
        )
    );
    assert_eq!(
        approve(
            &status,
            &ledger,
            &with(Credential::Unusable(
                "approver credential file is missing".into()
            )),
            at(1)
        ),
        refused_with(
            "approver credential of 'alice' is unusable: approver credential file is missing"
        )
    );
    assert_eq!(
        approve(
            &status,
            &ledger,
            &with(Credential::Read {
                approver: "carol".into(),
                fingerprint: fingerprint.clone()
            }),
            at(1)
        ),
        refused_with("approver credential names 'carol', not 'alice'")
    );
    assert_eq!(
        approve(
            &status,
            &ledger,
            &with(Credential::Read {
                approver: "alice".into(),
                fingerprint: "b".repeat(64)
            }),
            at(1)
        ),
        refused_with("approver credential of 'alice' does not match the pinned fingerprint")
    );
    let intents = approve(
        &status,
        &ledger,
        &with(Credential::Read {
            approver: "alice".into(),
            fingerprint,
        }),
        at(1),
    )
    .unwrap();
    assert_eq!(
        intents[0].evidence_refs[1]["summary"],
        "approved_by=alice source=credential"
    );
}

#[test]
fn a_tampered_policy_refuses_before_identity() {
    let p = four_eyes();
    let ledger = ApprovalLedger {
        binding: Some(p.checksum()),
        ..Default::default()
    };
    for file in [
        None,
        Some(Err("approval policy file is missing".to_string())),
        Some(Ok(b"{}\n".to_vec())),
    ] {
        let status = PolicyStatus::resolve(&ledger, file);
        assert!(
            matches!(status, PolicyStatus::Tampered { .. }),
            "{status:?}"
        );
        assert!(matches!(
            approve(&status, &ledger, &claim(Some("alice")), at(1)).map_err(FlowError::into_kind),
            Err(ErrorKind::ReceiptCorrupt(m)) if m.ends_with("; run-approve by 'alice' refused")
        ));
    }
    let malformed = ApprovalLedger {
        malformed_binding: Some("bad".into()),
        ..Default::default()
    };
    assert!(matches!(
        PolicyStatus::resolve(&malformed, None),
        PolicyStatus::Tampered { checksum: None, .. }
    ));
}

#[test]
fn an_approval_is_used_once() {
    let (status, mut ledger) = frozen(&four_eyes());
    let intents = approve(&status, &ledger, &claim(Some("alice")), at(1)).unwrap();
    let mut state = planned();
    state.run_state = RunState::Approved;
    ledger.decisions.push(Decision {
        decision: "approved",
        by: Some("alice".into()),
        source: Some("env".into()),
        at: "2026-07-14T01:00:00Z".into(),
        sequence: 2,
    });
    assert_eq!(intents[0].to_state.map(|s| s.as_str()), Some("approved"));
    let gate = Gate {
        status: &status,
        ledger: &ledger,
    };
    let second = approve_with(&state, gate, &claim(Some("alice")), at(1), &ev());
    assert_eq!(
        second,
        Err(ErrorKind::Approval(ApprovalRefusal::Consumed(
            "approval was already consumed: the plan was approved at sequence 2 by 'alice'; run-approve by 'alice' refused".into()
        )).into())
    );
}

#[test]
fn a_run_past_planned_with_no_decision_is_a_run_transition_refusal() {
    // No decision on record (a recovery run's first owner, say) and the run
    // not planned: the refusal a run without a policy gets, typed.
    let (status, ledger) = frozen(&four_eyes());
    let mut state = planned();
    state.run_state = RunState::Cancelled;
    let gate = Gate {
        status: &status,
        ledger: &ledger,
    };
    let refused = approve_with(&state, gate, &claim(Some("alice")), at(1), &ev()).unwrap_err();
    assert_eq!(
        refused,
        ErrorKind::RunTransitionRefused {
            state: RunState::Cancelled,
            allowed: vec![RunState::Planned],
        }
        .into()
    );
    assert_eq!(
        refused.message(),
        "current state does not allow lifecycle intent"
    );
    let fields = refused.own_teaching().unwrap().fields.unwrap();
    assert_eq!(fields["run_state"], "cancelled");
    assert_eq!(fields["allowed_run_states"], json!(["planned"]));
}

#[test]
fn caller_evidence_cannot_forge_the_gate_records() {
    let (status, ledger) = frozen(&four_eyes());
    let alice_with = |evidence: &Value| {
        let gate = Gate {
            status: &status,
            ledger: &ledger,
        };
        approve_with(&planned(), gate, &claim(Some("alice")), at(1), evidence)
    };
    for kind in [
        IDENTITY_KIND,
        POLICY_KIND,
        crate::coordinator::signed::SIGNATURE_KIND,
    ] {
        let forged = json!([{"kind": kind, "summary": "approved_by=mallory source=env"}]);
        assert_eq!(
            alice_with(&forged),
            invalid(InputRule::ReservedEvidenceKinds)
        );
    }
    let full: Vec<Value> = (0..8)
        .map(|i| json!({"kind": "k", "summary": format!("{i}")}))
        .collect();
    assert_eq!(
        alice_with(&json!(full)),
        invalid(InputRefusal::EvidenceRoom {
            max: 7,
            signed: false,
        })
    );
}

// ------------------------------------------------------------ run-cancel

#[test]
fn a_denial_needs_no_identity_and_records_one_when_given() {
    let (_, ledger) = frozen(&four_eyes());
    let limits = Limits::default();
    let deny = |ledger: &ApprovalLedger, identity: Option<&str>| {
        decide_deny(
            &planned(),
            ledger,
            identity,
            "2026-07-14T01:00:00Z",
            &ev(),
            Some("no"),
            &limits,
        )
    };
    let plain = deny(&ledger, None).unwrap();
    assert_eq!(plain[0].evidence_refs, ev());
    assert_eq!(plain[0].event_type, "run_cancelled");
    let named = deny(&ledger, Some("bob")).unwrap();
    assert_eq!(
        named[0].evidence_refs[1],
        json!({"kind": "approver_identity", "summary": "denied_by=bob source=env",
               "checksum": four_eyes().checksum()})
    );
    assert_eq!(
        deny(&ledger, Some("b b")),
        invalid(InputRefusal::ApproverIdentity {
            rule: IDENTITY_RULE
        })
    );
    // Without a policy, the identity is not recorded (reference behaviour).
    let none = deny(&ApprovalLedger::default(), Some("bob")).unwrap();
    assert_eq!(none[0].evidence_refs, ev());
}

// ------------------------------------------------------------ the ledger fold

#[test]
fn the_ledger_reads_bindings_and_decisions() {
    let p = four_eyes();
    let event = |v: Value| v.as_object().unwrap().clone();
    let mut ledger = ApprovalLedger::default();
    ledger.observe(&event(json!({"sequence": 1, "event_type": "run_created",
        "timestamp": "2026-07-14T01:00:00Z", "evidence_refs": [p.evidence_item()]})));
    assert_eq!(ledger.binding, Some(p.checksum()));
    assert!(ledger.has_policy());
    ledger.observe(&event(json!({"sequence": 2, "event_type": "plan_approved",
        "timestamp": "2026-07-14T01:01:00Z", "from_state": "planned",
        "evidence_refs": [
            {"kind": "approver_identity", "summary": "approved_by=mallory source=env"},
            {"kind": "approver_identity", "summary": "approved_by=alice source=env",
             "checksum": p.checksum()}]})));
    ledger.observe(&event(json!({"sequence": 3, "event_type": "run_cancelled",
        "timestamp": "2026-07-14T01:02:00Z", "from_state": "approved",
        "evidence_refs": [{"kind": "k", "summary": "s"}]})));
    // A cancel of a running run is no denial.
    ledger.observe(&event(json!({"sequence": 4, "event_type": "run_cancelled",
        "timestamp": "2026-07-14T01:03:00Z", "from_state": "running", "evidence_refs": []})));
    assert_eq!(
        ledger.decisions,
        vec![
            Decision {
                decision: "approved",
                by: Some("alice".into()),
                source: Some("env".into()),
                at: "2026-07-14T01:01:00Z".into(),
                sequence: 2
            },
            Decision {
                decision: "denied",
                by: None,
                source: None,
                at: "2026-07-14T01:02:00Z".into(),
                sequence: 3
            },
        ]
    );
    // Two policy items, or one without its checksum, fail closed.
    for items in [
        json!([p.evidence_item(), p.evidence_item()]),
        json!([{"kind": "approval_policy", "summary": "x", "path": "approval-policy.json"}]),
        json!([{"kind": "approval_policy", "summary": "x", "path": "elsewhere.json",
                "checksum": p.checksum()}]),
    ] {
        let mut ledger = ApprovalLedger::default();
        ledger.observe(&event(json!({"sequence": 1, "event_type": "run_created",
            "timestamp": "2026-07-14T01:00:00Z", "evidence_refs": items})));
        assert!(ledger.has_policy() && ledger.binding.is_none(), "{items}");
    }
}

#[test]
fn identities_follow_the_character_rule() {
    for good in ["alice", "a", "A.b_c@d-e", &"x".repeat(128)] {
        assert!(is_approver_identity(good), "{good}");
    }
    for bad in ["", "a b", "é", "a/b", "a\n", &"x".repeat(129)] {
        assert!(!is_approver_identity(bad), "{bad}");
    }
}

#[test]
fn replay_counts_the_window_from_the_recorded_times() {
    let window = |created, approved| ApprovalWindow {
        created_at: created,
        approved_at: approved,
    };
    let created = Some("2026-01-01T00:00:00.500000Z");
    assert_eq!(
        window(created, Some("2026-01-01T01:00:00.500000Z")).breach(Some(3600)),
        None
    );
    assert_eq!(
        window(created, Some("2026-01-01T01:00:01.500000Z")).breach(Some(3600)),
        Some(
            "plan_approved 3601 s after run_created, beyond the policy's expires_after_s 3600"
                .into()
        )
    );
    // No window, no rule; a window with times that cannot be read fails closed.
    assert_eq!(window(None, None).breach(None), None);
    assert!(
        window(created, Some("yesterday"))
            .breach(Some(60))
            .is_some()
    );
    assert!(
        window(None, Some("2026-01-01T00:00:01Z"))
            .breach(Some(60))
            .is_some()
    );
}

#[test]
fn a_fresh_policy_adds_to_a_carried_one_only_by_keeping_every_constraint() {
    let carried = policy(
        json!({"required_approver": "alice", "require_different_approver": true,
                                "initiated_by": "agent-1", "expires_after_s": 3600}),
    );
    assert_eq!(carried.adds_to(&carried), Ok(()));
    let stricter = policy(
        json!({"required_approver": "alice", "require_different_approver": true,
                                 "initiated_by": "agent-1", "expires_after_s": 60}),
    );
    assert_eq!(stricter.adds_to(&carried), Ok(()));
    for (fresh, loosened) in [
        (
            json!({"required_approver": "mallory", "require_different_approver": true,
                "initiated_by": "agent-1", "expires_after_s": 3600}),
            "required_approver must stay 'alice'",
        ),
        (
            json!({"require_different_approver": true, "initiated_by": "agent-1",
                "expires_after_s": 3600}),
            "required_approver must stay 'alice'",
        ),
        (
            json!({"required_approver": "alice", "initiated_by": "agent-1",
                "expires_after_s": 3600}),
            "require_different_approver must stay true",
        ),
        (
            json!({"required_approver": "alice", "require_different_approver": true,
                "initiated_by": "agent-2", "expires_after_s": 3600}),
            "initiated_by must stay 'agent-1'",
        ),
        (
            json!({"required_approver": "alice", "require_different_approver": true,
                "initiated_by": "agent-1", "expires_after_s": 3601}),
            "expires_after_s must stay at most 3600",
        ),
        (
            json!({"required_approver": "alice", "require_different_approver": true,
                "initiated_by": "agent-1"}),
            "expires_after_s must stay at most 3600",
        ),
    ] {
        assert_eq!(policy(fresh).adds_to(&carried), Err(loosened.to_string()));
    }
    // What the carried policy leaves open may be set.
    let open = policy(json!({"required_approver": "alice"}));
    assert_eq!(carried.adds_to(&open), Ok(()));
    assert!(open.adds_to(&carried).is_err());
}

/// The policy's type (`ApprovalPolicyInput`: its help table and schema)
/// is the reader's shape: every key it names is read, every key optional,
/// and a value its schema refuses the reader refuses too.
#[test]
fn the_policy_type_is_the_readers_shape() {
    use crate::receipt::schema::{InputKeys, schema_of};
    let keys = InputKeys::of::<ApprovalPolicyInput>();
    assert!(keys.required.is_empty(), "{keys:?}");
    let base = json!({"required_approver": "alice", "expires_after_s": 60});
    let with = |key: &str, value: Value| {
        let mut policy = base.clone();
        policy[key] = value;
        ApprovalPolicy::from_input(&policy, None)
    };
    for key in keys.all() {
        assert!(with(key, Value::Null).is_ok(), "{key}: null is read");
    }
    assert!(with("surprise", Value::Null).is_err());
    let schema = schema_of::<ApprovalPolicyInput>();
    let props = &schema["properties"];
    assert_eq!(props["expires_after_s"]["minimum"], 1);
    assert_eq!(props["expires_after_s"]["maximum"], MAX_EXPIRES_AFTER_S);
    for (n, read) in [(1, true), (MAX_EXPIRES_AFTER_S, true), (0, false)] {
        assert_eq!(with("expires_after_s", json!(n)).is_ok(), read, "{n}");
    }
    assert!(with("expires_after_s", json!(MAX_EXPIRES_AFTER_S + 1)).is_err());
    assert!(with("approver_fingerprint", json!("a".repeat(64))).is_ok());
    assert!(with("approver_fingerprint", json!("A".repeat(64))).is_err());
    assert!(with("require_different_approver", json!(false)).is_ok());
    assert!(with("require_different_approver", json!("yes")).is_err());
    assert!(with("approver_key", json!(7)).is_err());
    for key in ["required_approver", "initiated_by"] {
        assert!(with(key, json!("bob@example.org")).is_ok(), "{key}");
        assert!(with(key, json!("bob smith")).is_err(), "{key}");
    }
}
