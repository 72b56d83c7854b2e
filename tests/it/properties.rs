//! Property tests of issue 2: canonical JSON is a fixed point (and equals
//! Python's json.dumps), and any single-byte change to a receipt this tool
//! acknowledged is detected by verify.

use bluetape_flow::commands::init::{InitEntropy, InitRequest, init};
use bluetape_flow::commands::{FlowError, verify};
use bluetape_flow::receipt::canonical;
use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::store::discovery::DiscoveryEnv;
use bluetape_flow::store::handle::OwnerToken;
use bluetape_flow::store::run::{AckHead, RunDir};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Integers far beyond 64 bits must survive exactly.
        "-?[1-9][0-9]{18,40}".prop_map(|s| serde_json::from_str(&s).unwrap()),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x1f\\x7f\"\\\\/\u{2028}é✓😀a-z]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn canonical_is_a_fixed_point(value in json_value()) {
        let once = canonical::to_vec(&value);
        let reparsed: Value = serde_json::from_slice(&once).unwrap();
        prop_assert_eq!(canonical::to_vec(&reparsed), once);
    }
}

#[test]
fn canonical_equals_python_json_dumps() {
    // Python's stdlib json (not reference code) is the definition of the
    // format; python3 is part of every machine this project runs on.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let values: Vec<Value> = (0..300)
        .map(|_| json_value().new_tree(&mut runner).unwrap().current())
        .collect();
    let input: String = values
        .iter()
        .map(|v| canonical::to_string(v) + "\n")
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("values.jsonl");
    std::fs::write(&path, &input).unwrap();
    let script = "import json,sys\nfor line in open(sys.argv[1], encoding='utf-8'):\n    sys.stdout.write(json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True, separators=(',', ':')) + '\\n')\n";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&path)
        .output()
        .expect("python3 must be installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python = String::from_utf8(out.stdout).unwrap();
    for (ours, theirs) in input.lines().zip(python.lines()) {
        assert_eq!(ours, theirs);
    }
    assert_eq!(input.lines().count(), python.lines().count());
}

/// A run with a few events whose strings need escapes, acknowledged by a
/// head record: the receipt bytes and where they live.
fn acknowledged_receipt() -> (tempfile::TempDir, PathBuf, String, Vec<u8>) {
    use chrono::TimeZone;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let env = DiscoveryEnv {
        cwd: tmp.path().to_path_buf(),
        home: Some(tmp.path().into()),
        ..Default::default()
    };
    let token = OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097");
    let entropy = InitEntropy {
        now: chrono::Utc.with_ymd_and_hms(2026, 7, 14, 1, 0, 0).unwrap(),
        run_suffix: "0badc0de".into(),
        token: token.clone(),
        staging_suffix: "1".repeat(32),
    };
    let request = InitRequest {
        workflow_type: "A".into(),
        repo_root: repo,
        owner_file: root.join("handles/main.owner"),
        components: vec!["runtime".into()],
    };
    let outcome = init(&root, &env, &request, &entropy).unwrap();
    let run = RunDir::new(&root, &outcome.run_id);
    let mut bytes = std::fs::read(run.receipt_path()).unwrap();
    let mut previous = outcome.checksum.clone();
    let hash = "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6".to_string();
    for (sequence, (event_type, from, to, reason)) in [
        (
            "plan_approved",
            "planned",
            "approved",
            "ok \u{1}\u{1f}\t\"q\" ✓",
        ),
        ("run_started", "approved", "running", "start\n\u{7f}"),
    ]
    .into_iter()
    .enumerate()
    {
        let sealed = EventDraft {
            run_id: outcome.run_id.clone(),
            lane_id: None,
            agent_id: None,
            sequence: sequence as u64 + 2,
            event_type: event_type.into(),
            from_state: Some(from.into()),
            to_state: Some(to.into()),
            timestamp: "2026-07-14T01:00:00Z".into(),
            owner_token: token.fingerprint(),
            manifest_hash: hash.clone(),
            previous_checksum: previous.clone(),
            evidence_refs: json!([{"kind": "user_approval", "summary": "approved \u{2}", "exit_status": 100000000000000000000000000000u128}]),
            reason: Some(reason.into()),
            metadata: Some(json!({"owner_epoch": 1})),
        }
        .seal();
        bytes.extend_from_slice(&sealed.line);
        previous = sealed.checksum;
    }
    std::fs::write(run.receipt_path(), &bytes).unwrap();
    run.write_head(&AckHead {
        sequence: 3,
        checksum: previous,
        byte_length: bytes.len() as u64,
    })
    .unwrap();
    verify(&root, &outcome.run_id).expect("the hand-built receipt verifies");
    (tmp, root, outcome.run_id, bytes)
}

#[test]
fn every_single_byte_change_is_detected() {
    let (_tmp, root, run_id, bytes) = acknowledged_receipt();
    let path = RunDir::new(&root, &run_id).receipt_path();
    // Exhaustive over positions, three replacement values each (a bit flip,
    // a case flip and a neighbour), plus the proptest below for the rest.
    for index in 0..bytes.len() {
        let original = bytes[index];
        for replacement in [original ^ 0x01, original ^ 0x20, original.wrapping_add(1)] {
            let mut changed = bytes.clone();
            changed[index] = replacement;
            std::fs::write(&path, &changed).unwrap();
            let result = verify(&root, &run_id);
            assert!(
                matches!(
                    result,
                    Err(FlowError::ReceiptCorrupt(_) | FlowError::ReceiptDamaged(_))
                ),
                "byte {index} {original:#04x} -> {replacement:#04x} went undetected: {result:?}"
            );
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    verify(&root, &run_id).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn any_single_byte_change_is_detected(position in any::<prop::sample::Index>(), delta in 1u8..=255) {
        thread_local! {
            static RECEIPT: (tempfile::TempDir, PathBuf, String, Vec<u8>) = acknowledged_receipt();
        }
        RECEIPT.with(|(_tmp, root, run_id, bytes)| {
            let index = position.index(bytes.len());
            let mut changed = bytes.clone();
            changed[index] = changed[index].wrapping_add(delta);
            let path = RunDir::new(root, run_id).receipt_path();
            std::fs::write(&path, &changed).unwrap();
            let result = verify(root, run_id);
            std::fs::write(&path, bytes).unwrap();
            prop_assert!(matches!(result, Err(FlowError::ReceiptCorrupt(_) | FlowError::ReceiptDamaged(_))), "byte {} +{}: {:?}", index, delta, result);
            Ok(())
        })?;
    }
}
