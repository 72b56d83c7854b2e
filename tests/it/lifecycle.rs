//! Run lifecycle commands through the binary, and the guarded pipeline's
//! refusals: owner fencing, `--expected-head` (syntax and CAS), evidence
//! files, the phase gate. Every refusal leaves the state byte-identical.

use crate::bed as common;

use common::{TestBed, bed_type};
use serde_json::{Value, json};
use std::path::Path;

bed_type!(Run);

fn setup() -> Run {
    Run(TestBed::planned(&["runtime"])
        .with_evidence(r#"[{"kind":"user_approval","summary":"User approved plan — ok ✓"}]"#))
}

impl Run {
    fn head(&self) -> String {
        let out = self.read("verify", &[]);
        out.assert_ok()["checksum"].as_str().unwrap().to_string()
    }

    /// Assert a refusal that changed nothing.
    fn refused(&self, command: &str, extra: &[&str], code: i32, error: &str) -> Value {
        let before = common::snapshot(&self.root);
        let e = self.step(command, extra).assert_error(code, error);
        assert_eq!(
            before,
            common::snapshot(&self.root),
            "{command} {extra:?} changed the state"
        );
        e
    }
}

#[test]
fn a_run_walks_its_lifecycle() {
    let run = setup();
    let out = run
        .step("run-approve", &["--at", "2026-07-14T01:00:00Z"])
        .assert_ok();
    assert_eq!(out["operation"], "run-approve");
    assert_eq!(out["run_state"], "approved");
    assert_eq!(out["sequence"], 2);
    assert_eq!(out.as_object().unwrap().len(), 7);
    // Each step and the state it leaves the run in.
    let steps: [(&str, &[&str], &str); 4] = [
        ("run-start", &[], "running"),
        (
            "run-recovery-start",
            &["--reason", "suspect drift"],
            "recovering",
        ),
        ("run-recovery-finish", &[], "running"),
        ("run-block", &["--reason", "waiting on review"], "blocked"),
    ];
    for (command, extra, state) in steps {
        let out = run.step(command, extra).assert_ok();
        assert_eq!(out["run_state"], state, "{command}");
        assert_eq!(out["checksum"], run.head(), "{command}");
    }
    // Terminal: nothing else moves it.
    let e = run.refused("run-cancel", &["--reason", "x"], 5, "coordinator_conflict");
    assert_eq!(
        e["message"],
        "current state does not allow lifecycle intent"
    );
    assert_eq!(e["next_command"], "resume-check");
    // The caches follow the receipt.
    let cache: Value = serde_json::from_str(
        &std::fs::read_to_string(run.root.join("runs").join(&run.run_id).join("run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cache["state"], "blocked");
    assert_eq!(cache["coordinator"]["state"]["run_state"], "blocked");
    // The recorded event carries the caller's timestamp and the evidence verbatim.
    let receipt = run.receipt();
    let second: Value = serde_json::from_str(receipt.lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["timestamp"], "2026-07-14T01:00:00Z");
    assert_eq!(
        second["evidence_refs"][0]["summary"],
        "User approved plan — ok ✓"
    );
    assert_eq!(second["metadata"], serde_json::json!({"owner_epoch": 1}));
}

#[test]
fn cancel_is_allowed_from_planned() {
    let run = setup();
    assert_eq!(
        run.step("run-cancel", &["--reason", "not needed"])
            .assert_ok()["run_state"],
        "cancelled"
    );
}

#[test]
fn expected_head_guards_the_append() {
    let run = setup();
    let head = run.head();
    let e = run.refused(
        "run-approve",
        &["--expected-head", "ABC"],
        2,
        "contract_error",
    );
    assert_eq!(
        e["message"],
        "expected receipt head must be lowercase SHA-256"
    );
    let stale = "0".repeat(64);
    let e = run.refused(
        "run-approve",
        &["--expected-head", &stale],
        5,
        "coordinator_conflict",
    );
    assert_eq!(e["message"], "receipt head changed before mutation");
    let out = run
        .step("run-approve", &["--expected-head", &head])
        .assert_ok();
    // The old head is stale now.
    run.refused(
        "run-start",
        &["--expected-head", &head],
        5,
        "coordinator_conflict",
    );
    run.step(
        "run-start",
        &["--expected-head", out["checksum"].as_str().unwrap()],
    )
    .assert_ok();
}

#[test]
fn owner_handles_are_fenced() {
    let run = setup();
    // A handle with another token: a stale owner (exit 5).
    let mut handle: Value =
        serde_json::from_str(&std::fs::read_to_string(run.owner()).unwrap()).unwrap();
    let original = std::fs::read(run.owner()).unwrap();
    handle["token"] = "someone-else".into();
    std::fs::write(run.owner(), handle.to_string()).unwrap();
    let e = run.refused("run-approve", &[], 5, "coordinator_conflict");
    assert_eq!(
        e["message"],
        "owner handle does not match the current run owner"
    );
    // The epochs are fields; the hint says which handle acts.
    common::assert_taught(
        &e,
        json!({"handle_owner_epoch": 1, "owner_epoch": 1}),
        |hint| hint.contains("act with the owner handle that init or the last resume wrote"),
    );
    // A newer epoch than the run's: also stale.
    handle["token"] = serde_json::from_slice::<Value>(&original).unwrap()["token"].clone();
    handle["epoch"] = 2.into();
    std::fs::write(run.owner(), handle.to_string()).unwrap();
    let e = run.refused("run-approve", &[], 5, "coordinator_conflict");
    assert_eq!(
        e["fields"],
        json!({"handle_owner_epoch": 2, "owner_epoch": 1})
    );
    std::fs::write(run.owner(), &original).unwrap();
    // Loose modes, a missing handle, one outside handles/: contract errors.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(run.owner(), std::fs::Permissions::from_mode(0o644)).unwrap();
    run.refused("run-approve", &[], 2, "contract_error");
    std::fs::set_permissions(run.owner(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let approve_as = |owner: &Path| {
        run.flow.run(&common::mutation_argv(
            &run.root,
            "run-approve",
            &run.run_id,
            owner,
            &["--evidence", run.evidence.to_str().unwrap()],
        ))
    };
    let outside = run.root.join("main.owner");
    std::fs::copy(run.owner(), &outside).unwrap();
    let e = approve_as(&outside).assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        "owner handle must be a direct child of state-root handles"
    );
    std::fs::remove_file(&outside).unwrap();
    approve_as(&run.root.join("handles/gone.owner")).assert_error(2, "contract_error");
    // And the real owner still works.
    run.step("run-approve", &[]).assert_ok();
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn evidence_files_are_checked() {
    let run = setup();
    for (content, message) in [
        (&b"[]"[..], "lifecycle transition requires evidence"),
        (b"{}", "JSON input has the wrong top-level type"),
        (
            b"[{\"kind\":\"k\",\"summary\":\"s\",\"exit_status\":1.0}]",
            "JSON input must not contain floats, NaN or Infinity",
        ),
        (
            b"[{\"kind\":\"k\",\"summary\":\"s\",\"exit_status\":NaN}]",
            "JSON input is invalid",
        ),
        (b"\xef\xbb\xbf[]", "JSON input is invalid"),
        (b"[\xff]", "JSON input is invalid"),
        (
            b"[{\"kind\":\"k\",\"summary\":\"s\",\"token\":\"x\"}]",
            "evidence reference contains unsupported fields",
        ),
    ] {
        write(&run.evidence, content);
        let e = run.refused("run-approve", &[], 2, "contract_error");
        common::assert_message(&e, message);
    }
    write(&run.evidence, &vec![b' '; 1_048_577]);
    let e = run.refused("run-approve", &[], 2, "contract_error");
    common::assert_message(&e, "JSON input exceeds one MiB");
    let real = run.evidence.with_extension("real");
    write(&real, br#"[{"kind":"k","summary":"s"}]"#);
    std::fs::remove_file(&run.evidence).unwrap();
    std::os::unix::fs::symlink(&real, &run.evidence).unwrap();
    let e = run.refused("run-approve", &[], 2, "contract_error");
    common::assert_message(&e, "JSON input must be a regular non-symlink file");
    // A big integer survives exactly.
    std::fs::remove_file(&run.evidence).unwrap();
    write(
        &run.evidence,
        br#"[{"kind":"k","summary":"s","exit_status":100000000000000000000000000000}]"#,
    );
    run.step("run-approve", &["--reason", "x"])
        .assert_error(2, "contract_error"); // run-approve takes no --reason
    run.step("run-approve", &[]).assert_ok();
    let receipt = run.receipt();
    assert!(receipt.contains("\"exit_status\":100000000000000000000000000000"));
    run.read("verify", &[]).assert_ok();
}

#[test]
fn timestamps_must_be_real_utc_instants() {
    let run = setup();
    for at in [
        "2026-13-01T00:00:00Z",
        "2026-07-14T01:00:00+00:00",
        "yesterday",
    ] {
        let e = run.refused("run-approve", &["--at", at], 2, "contract_error");
        common::assert_message(&e, "decided_at must be a UTC timestamp");
    }
}

#[test]
fn a_live_lock_holder_makes_writers_wait_then_refuse() {
    let run = setup();
    let lock = common::hold_receipt_lock(&run.root, &run.dir);
    let e = run.refused("run-approve", &[], 5, "coordinator_conflict");
    common::assert_message(&e, "state lock owner is live or unknown");
    // The hint comes with the lock's refusal (StoreError::LockHeld), not
    // from reading its message.
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("another writer holds the lock (named above)")),
        "{e}"
    );
    // A dead holder's lock is reclaimed (pid far above pid_max).
    std::fs::write(
        lock.join("owner.json"),
        "{\"pid\":999999999,\"token\":\"t\"}\n",
    )
    .unwrap();
    run.step("run-approve", &[]).assert_ok();
    assert!(!lock.exists());
}
