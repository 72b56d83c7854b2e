//! Mutations load state from a checkpoint proven against the receipt and
//! replay only the tail (contracts/receipt.md "Checkpoint"); anything that
//! does not match falls back to a full replay. The checkpoint is a cache,
//! never believed.

use crate::bed as common;
use bluetape_flow::store::root::StateRoot;

use bluetape_flow::commands::checkpoint::{LoadPath, load_state};
use bluetape_flow::commands::ledger::open_run;
use bluetape_flow::commands::rebuild::replay_run;
use bluetape_flow::receipt::event::EventDraft;
use common::{TestBed, bed_type};
use serde_json::{Value, json};

bed_type!(Run);

fn setup() -> Run {
    Run(TestBed::planned(&["runtime"])
        .with_evidence(r#"[{"kind":"user_approval","summary":"approved"}]"#))
}

impl Run {
    /// The loaded state (digest lists aside: a checkpoint keeps those in
    /// the digest table) with its digest counts, and where it came from.
    fn load(&self) -> (Value, LoadPath) {
        let run = open_run(&StateRoot::begin(&self.root), &self.run_id).unwrap();
        let (state, _, basis) = load_state(&run, false).unwrap();
        (comparable(&state), basis.path)
    }

    fn full(&self) -> Value {
        let run = open_run(&StateRoot::begin(&self.root), &self.run_id).unwrap();
        comparable(&replay_run(&run, false).unwrap().0)
    }
}

fn comparable(state: &bluetape_flow::coordinator::CoordinatorState) -> Value {
    let mut value = state.public_json_with_digests(false);
    value["digest_counts"] = json!(state.liveness_digest_counts());
    value
}

#[test]
fn mutations_continue_from_a_proven_checkpoint() {
    let run = setup();
    run.step("run-approve", &[]).assert_ok();
    assert!(run.dir.join("checkpoint.json").is_file());
    let (state, path) = run.load();
    assert_eq!(path, LoadPath::Checkpoint);
    assert_eq!(state, run.full());
    run.step("run-start", &[]).assert_ok();
    run.step("run-recovery-start", &["--reason", "r"])
        .assert_ok();
    let (state, path) = run.load();
    assert_eq!(path, LoadPath::Checkpoint);
    assert_eq!(state, run.full());
    assert_eq!(state["run_state"], "recovering");
}

#[test]
fn lines_appended_by_another_writer_mean_a_full_replay() {
    let run = setup();
    let out = run.step("run-approve", &[]).assert_ok();
    // Another writer (such as the Python tool) appends run_started.
    let handle: Value = serde_json::from_str(
        &std::fs::read_to_string(run.root.join("handles/main.owner")).unwrap(),
    )
    .unwrap();
    let fingerprint =
        bluetape_flow::store::handle::OwnerToken::from_secret(handle["token"].as_str().unwrap())
            .fingerprint();
    let sealed = EventDraft {
        run_id: run.run_id.clone(),
        lane_id: None,
        agent_id: None,
        sequence: 3,
        event_type: bluetape_flow::receipt::vocab::EventType::RunStarted,
        from_state: Some("approved".into()),
        to_state: Some("running".into()),
        timestamp: "2026-07-14T01:00:00Z".into(),
        owner_token: fingerprint,
        manifest_hash: "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6".into(),
        previous_checksum: out["checksum"].as_str().unwrap().into(),
        evidence_refs: json!([{"kind": "k", "summary": "s"}]),
        reason: None,
        metadata: Some(json!({"owner_epoch": 1})),
    }
    .seal();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(run.dir.join("receipt.jsonl"))
        .unwrap()
        .write_all(&sealed.line)
        .unwrap();
    // The receipt's stamp moved: the checkpoint is not used, and the state
    // comes from the whole receipt.
    let (state, path) = run.load();
    assert_eq!(path, LoadPath::FullReplay);
    assert_eq!(state["run_state"], "running");
    assert_eq!(state, run.full());
    let out = run
        .step("run-recovery-start", &["--reason", "r"])
        .assert_ok();
    assert_eq!(out["sequence"], 4);
    assert_eq!(run.load().1, LoadPath::Checkpoint);
}

#[test]
fn a_checkpoint_the_receipt_does_not_prove_is_not_used() {
    let run = setup();
    run.step("run-approve", &[]).assert_ok();
    let path = run.dir.join("checkpoint.json");
    let original = std::fs::read_to_string(&path).unwrap();
    let mut checkpoint: Value = serde_json::from_str(&original).unwrap();
    // A state edited without fixing its digest.
    checkpoint["state"]["run_state"] = "running".into();
    std::fs::write(&path, checkpoint.to_string()).unwrap();
    let (state, load) = run.load();
    assert_eq!(load, LoadPath::FullReplay);
    assert_eq!(state["run_state"], "approved");
    // An offset that does not hold the claimed line.
    let mut checkpoint: Value = serde_json::from_str(&original).unwrap();
    checkpoint["byte_length"] = (checkpoint["byte_length"].as_u64().unwrap() - 1).into();
    std::fs::write(&path, checkpoint.to_string()).unwrap();
    assert_eq!(run.load().1, LoadPath::FullReplay);
    // Garbage.
    std::fs::write(&path, "not json").unwrap();
    assert_eq!(run.load().1, LoadPath::FullReplay);
    // The command still works, from the receipt, and writes a fresh checkpoint.
    assert_eq!(
        run.step("run-start", &[]).assert_ok()["run_state"],
        "running"
    );
    assert_eq!(run.load().1, LoadPath::Checkpoint);
}

#[test]
fn damage_below_or_after_the_checkpoint_is_still_reported() {
    let run = setup();
    run.step("run-approve", &[]).assert_ok();
    run.step("run-start", &[]).assert_ok();
    let receipt = run.dir.join("receipt.jsonl");
    let bytes = std::fs::read(&receipt).unwrap();
    // A torn tail after the checkpoint.
    let mut torn = bytes.clone();
    torn.extend_from_slice(b"{\"agent_id\"");
    std::fs::write(&receipt, &torn).unwrap();
    let before = common::snapshot(&run.root);
    let e = run
        .step("run-recovery-start", &["--reason", "r"])
        .assert_error(3, "receipt_corrupt");
    assert_eq!(
        e["message"],
        "receipt corruption at sequence 4: incomplete final event"
    );
    assert_eq!(before, common::snapshot(&run.root));
    // A receipt cut below the checkpoint: the proof fails, the full replay
    // reports the cut against the acknowledged head.
    let cut = bytes.len()
        - 1
        - bytes[..bytes.len() - 1]
            .iter()
            .rev()
            .position(|b| *b == b'\n')
            .unwrap();
    std::fs::write(&receipt, &bytes[..cut]).unwrap();
    let e = run
        .step("run-recovery-start", &["--reason", "r"])
        .assert_error(3, "receipt_corrupt");
    assert!(
        e["message"].as_str().unwrap().contains("acknowledged head"),
        "{e}"
    );
}
