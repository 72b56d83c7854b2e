use super::*;

fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

/// The 20-bitflip-mid diagnosis the reference printed.
fn printed() -> Map<String, Value> {
    json!({
        "diagnosis_checksum": "0751c18db08f35d52e8d652328d688f6d7be7704bf9b636b8d498bb9e71ad0a3",
        "effective_state": "blocked", "first_bad_sequence": 6,
        "last_trusted_checksum": "8bf5534cf355bebcdacef1e1e091f5444dfe0370fda6aca0206512f40bf3f125",
        "last_trusted_sequence": 5, "lock_owner_status": "unlocked",
        "manifest_hash": "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6",
        "manifest_version": "1.1.0", "ok": true, "operation": "receipt-diagnose",
        "receipt_hash": "1f2143862553639e64b0c199d85da823e32921c68dac108134f6226a9d611452",
        "receipt_size": 9231, "run_id": "20261130T023052Z-a431d9d7", "state_root": "{STATE}",
    })
    .as_object()
    .cloned()
    .unwrap()
}

fn approval() -> Value {
    json!([{"kind": "user_approval", "summary": "user approved a recovery run"}])
}

#[test]
fn the_printed_diagnosis_is_accepted_as_is() {
    let supplied = supplied_diagnosis(printed());
    assert!(!supplied.diagnosis.contains_key("ok"));
    assert!(!supplied.diagnosis.contains_key("state_root"));
    assert_eq!(
        check_request(&supplied, &approval()).unwrap(),
        "0751c18db08f35d52e8d652328d688f6d7be7704bf9b636b8d498bb9e71ad0a3"
    );
    // Without a checksum (or with null) it is computed from the object.
    let mut bare = printed();
    bare.remove("diagnosis_checksum");
    assert!(check_request(&supplied_diagnosis(bare), &approval()).is_ok());
    let mut null = printed();
    null.insert("diagnosis_checksum".into(), Value::Null);
    assert!(check_request(&supplied_diagnosis(null), &approval()).is_ok());
}

#[test]
fn requests_are_refused_in_order() {
    let refuse = |input: Map<String, Value>, approval: &Value| {
        check_request(&supplied_diagnosis(input), approval).unwrap_err()
    };
    assert_eq!(
        refuse(printed(), &json!([])),
        crate::coordinator::input_refusal::refused_as("lifecycle transition requires evidence")
    );
    let mut healthy = printed();
    healthy.insert("effective_state".into(), json!("running"));
    assert_eq!(
        refuse(healthy, &approval()),
        crate::coordinator::input_refusal::refused_as(
            "recovery run requires a blocked receipt diagnosis"
        )
    );
    let mut tampered = printed();
    tampered.insert("first_bad_sequence".into(), json!(7));
    assert_eq!(
        refuse(tampered, &approval()),
        crate::coordinator::input_refusal::refused_as("receipt diagnosis checksum does not match")
    );
    let mut odd = printed();
    odd.insert("diagnosis_checksum".into(), json!(5));
    assert_eq!(
        refuse(odd, &approval()),
        crate::coordinator::input_refusal::refused_as("receipt diagnosis checksum does not match")
    );
}

#[test]
fn a_diagnosis_must_still_be_current() {
    let supplied = supplied_diagnosis(printed()).diagnosis;
    let check = DiagnosisCheck::BeforeLock;
    assert_eq!(require_same_diagnosis(&supplied, &supplied, check), Ok(()));
    let mut locked = supplied.clone();
    locked.insert("lock_owner_status".into(), json!("locked_dead"));
    locked.insert("diagnosed_by".into(), json!("someone"));
    let changed = require_same_diagnosis(&locked, &supplied, check).unwrap_err();
    assert_eq!(
        changed,
        FlowError::from(RecoveryRefusal::DiagnosisChanged {
            check,
            changed: vec!["diagnosed_by".into(), "lock_owner_status".into()],
        })
    );
    assert_eq!(
        changed.message(),
        "damaged run changed after receipt diagnosis"
    );
    let mut alive = supplied.clone();
    alive.insert("lock_owner_status".into(), json!("locked_alive"));
    assert_eq!(
        require_no_live_writer(&alive),
        Err(FlowError::from(RecoveryRefusal::LiveWriter))
    );
    assert_eq!(require_no_live_writer(&supplied), Ok(()));
    let hash = supplied["receipt_hash"].as_str().unwrap().to_string();
    assert_eq!(require_receipt_identity(&supplied, &hash, 9231), Ok(()));
    assert_eq!(
        require_receipt_identity(&supplied, &hash, 9230),
        Err(FlowError::from(RecoveryRefusal::ReceiptChanged {
            diagnosed: (Some(hash.clone()), Some(9231)),
            now: (hash, 9230),
        }))
    );
}

fn input<'a>(name: &'a str) -> ProvenanceInput<'a> {
    ProvenanceInput {
        original_run_id: "20261130T023052Z-a431d9d7",
        diagnosis_checksum: "0751c18db08f35d52e8d652328d688f6d7be7704bf9b636b8d498bb9e71ad0a3",
        manifest_version: "1.1.0",
        manifest_hash: "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6",
        quarantine_path: name,
        quarantine_hash: "1f2143862553639e64b0c199d85da823e32921c68dac108134f6226a9d611452",
    }
}

#[test]
fn provenance_matches_the_reference_recovery_run() {
    let name = format!(
        "quarantine/{}",
        quarantine_name(
            "20261130T023052Z-a431d9d7",
            "1f2143862553639e64b0c199d85da823e32921c68dac108134f6226a9d611452"
        )
    );
    let diagnosis = supplied_diagnosis(printed()).diagnosis;
    let provenance = provenance(&input(&name), &diagnosis).unwrap();
    // The metadata of the new run's run_created in 20-bitflip-mid/recovery.
    assert_eq!(
        canonical::to_string(&Value::Object(first_event_metadata(&provenance))),
        r#"{"owner_epoch":1,"recovery_diagnose_checksum":"0751c18db08f35d52e8d652328d688f6d7be7704bf9b636b8d498bb9e71ad0a3","recovery_first_bad_sequence":6,"recovery_manifest_hash":"63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6","recovery_manifest_version":"1.1.0","recovery_original_run_id":"20261130T023052Z-a431d9d7","recovery_quarantine_hash":"1f2143862553639e64b0c199d85da823e32921c68dac108134f6226a9d611452","recovery_quarantine_path":"quarantine/20261130T023052Z-a431d9d7-1f2143862553639e64b0c199d85da823e32921c68dac108134f6226a9d611452.receipt.jsonl","recovery_trusted_checksum":"8bf5534cf355bebcdacef1e1e091f5444dfe0370fda6aca0206512f40bf3f125","recovery_trusted_sequence":5}"#
    );
}

#[test]
fn a_first_line_damage_is_recoverable() {
    // decisions.md 11: trusted sequence 0, empty trusted checksum.
    let mut diagnosis = supplied_diagnosis(printed()).diagnosis;
    diagnosis.insert("first_bad_sequence".into(), json!(1));
    diagnosis.insert("last_trusted_sequence".into(), json!(0));
    diagnosis.insert("last_trusted_checksum".into(), json!(""));
    let provenance = provenance(&input("quarantine/x.receipt.jsonl"), &diagnosis).unwrap();
    assert_eq!(provenance["recovery_trusted_checksum"], "");
    // An empty checksum after a trusted prefix is still refused.
    diagnosis.insert("last_trusted_sequence".into(), json!(3));
    assert_eq!(
        super::provenance(&input("quarantine/x.receipt.jsonl"), &diagnosis),
        Err(crate::coordinator::input_refusal::refused_as(
            "recovery_trusted_checksum must be lowercase SHA-256"
        ))
    );
}

#[test]
fn a_retry_returns_the_same_recovery_run_only() {
    let diagnosis = supplied_diagnosis(printed()).diagnosis;
    let provenance = provenance(&input("quarantine/x.receipt.jsonl"), &diagnosis).unwrap();
    let damaged_run = json!({"workflow_type": "A", "repo_root": "/r", "component_ids": ["runtime"],
                             "owner_fingerprint": hex('a'), "owner_epoch": 1})
    .as_object()
    .cloned()
    .unwrap();
    let mut run = damaged_run.clone();
    run.insert("owner_fingerprint".into(), json!(hex('b')));
    let first = json!({"event_type": "run_created", "evidence_refs": approval(),
                       "metadata": first_event_metadata(&provenance)})
    .as_object()
    .cloned()
    .unwrap();
    let existing = ExistingRecovery {
        run_id: "20261130T023052Z-0a0b0c0d",
        first_event: &first,
        run: &run,
        handle_fingerprint: &hex('b'),
        handle_epoch: 1,
    };
    assert_eq!(
        require_same_recovery(&existing, &provenance, &approval(), &damaged_run),
        Ok(())
    );
    let mismatch = Err(FlowError::from(RecoveryRefusal::OtherRecovery {
        run_id: "20261130T023052Z-0a0b0c0d".into(),
    }));
    // Another approval, another handle, another repo, another provenance.
    let other_approval = json!([{"kind": "user_approval", "summary": "someone else"}]);
    assert_eq!(
        require_same_recovery(&existing, &provenance, &other_approval, &damaged_run),
        mismatch
    );
    let wrong_handle = ExistingRecovery {
        handle_fingerprint: &hex('c'),
        ..existing.clone()
    };
    assert_eq!(
        require_same_recovery(&wrong_handle, &provenance, &approval(), &damaged_run),
        mismatch
    );
    let mut moved = damaged_run.clone();
    moved.insert("repo_root".into(), json!("/elsewhere"));
    assert_eq!(
        require_same_recovery(&existing, &provenance, &approval(), &moved),
        mismatch
    );
    let mut other = provenance.clone();
    other.insert("recovery_first_bad_sequence".into(), json!(7));
    assert_eq!(
        require_same_recovery(&existing, &other, &approval(), &damaged_run),
        mismatch
    );
}
