//! Writers exclude each other through the reference's directory lock:
//! parallel mutations on one run never lose or duplicate an event, and the
//! chain stays valid. A writer that cannot get the lock in time answers
//! exit 5 (retryable) and writes nothing.

use crate::bed as common;

use common::Flow;
use serde_json::{Value, json};
use std::process::Command;

#[test]
fn parallel_writers_keep_one_valid_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let flow = Flow::new(tmp.path());
    let root = tmp.path().join("state");
    let repo = tmp.path().join("repo");
    let run_id = flow.init(&root, &repo);
    let owner = root.join("handles/main.owner");
    let evidence = tmp.path().join("ev.json");
    std::fs::write(&evidence, r#"[{"kind":"plan","summary":"go"}]"#).unwrap();
    let base = |cmd: &str| -> Vec<String> {
        vec![
            "--state-root".into(),
            root.to_string_lossy().into(),
            cmd.into(),
            "--run-id".into(),
            run_id.clone(),
            "--owner-file".into(),
            owner.to_string_lossy().into(),
            "--evidence".into(),
            evidence.to_string_lossy().into(),
        ]
    };
    flow.run(&base("run-approve")).assert_ok();
    flow.run(&base("run-start")).assert_ok();
    // Eight processes create eight different lanes at once.
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let input = tmp.path().join(format!("lane-{i}.json"));
            std::fs::write(
                &input,
                json!({"lane_id": format!("lane-{i}"), "agent_id": format!("agent-{i}"), "assignment": "work",
                       "write_scope": [], "fallback": "main", "observed_at": "2026-07-14T01:00:00Z",
                       "startup_ack_deadline": "2026-07-14T01:00:30Z", "command_deadline": "2026-07-14T01:10:00Z"})
                .to_string(),
            )
            .unwrap();
            let mut argv = base("lane-create");
            argv.extend(["--input".into(), input.to_string_lossy().into()]);
            Command::new(env!("CARGO_BIN_EXE_bluetape-flow"))
                .args(&argv)
                .env_clear()
                .env("HOME", &flow.home)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut created = 0;
    for child in writers {
        let out = child.wait_with_output().unwrap();
        match out.status.code() {
            Some(0) => created += 1,
            Some(5) => {
                let e: Value = serde_json::from_slice(&out.stderr).unwrap();
                assert_eq!(e["retryable"], true);
            }
            other => panic!(
                "unexpected exit {other:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    assert!(created >= 1);
    let v = flow
        .run(&[
            "--state-root",
            root.to_str().unwrap(),
            "verify",
            "--run-id",
            &run_id,
        ])
        .assert_ok();
    // init + approve + start + one event per successful writer, no more, no less.
    assert_eq!(v["event_count"], 3 + created);
    let receipt =
        std::fs::read_to_string(root.join("runs").join(&run_id).join("receipt.jsonl")).unwrap();
    let lanes: std::collections::BTreeSet<String> = receipt
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event_type"] == "lane_created")
        .map(|e| e["lane_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(lanes.len() as i64, created);
    // No lock or temp file is left behind.
    let run_dir = root.join("runs").join(&run_id);
    assert!(!run_dir.join("locks/receipt").exists());
    let stray: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}
