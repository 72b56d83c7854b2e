//! `resume` through the binary (reference-coordinator §11.2): a fresh 0600
//! handle at epoch + 1, one `run_resumed` event signed by the old owner,
//! the old handle removed; and every refusal — with the reference's exit
//! status, error code and message — leaving the state byte-identical (a new
//! handle created before a failed append is removed again).

use crate::bed as common;

use bluetape_flow::receipt::canonical;
use common::{Output, TestBed, bed_type, fixtures_dir};
use serde_json::{Value, json};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

bed_type!(Run);

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

impl Run {
    /// A fresh run, approved.
    fn new() -> Run {
        let run = Run::with_evidence(TestBed::planned(&["runtime"]));
        run.mutation(
            "run-approve",
            "main.owner",
            &["--evidence", &run.work_file("ev.json")],
        )
        .assert_ok();
        run
    }

    /// A copy of a reference scenario (single run).
    fn fixture(name: &str) -> Run {
        Run::with_evidence(TestBed::from_fixture(name))
    }

    fn with_evidence(bed: TestBed) -> Run {
        bed.put(
            "ev.json",
            &json!([{"kind": "user_approval", "summary": "hand over"}]),
        );
        Run(bed)
    }

    fn resume(&self, owner: &str, new_owner: &str, rest: &[&str]) -> Output {
        let new_owner = if new_owner.starts_with('/') {
            new_owner.to_string()
        } else {
            text(&self.handle(new_owner))
        };
        let ev = self.work_file("ev.json");
        let mut argv: Vec<&str> = vec!["--evidence", &ev, "--new-owner-file", &new_owner];
        argv.extend_from_slice(rest);
        self.mutation("resume", owner, &argv)
    }

    fn resume_check(&self) -> Value {
        self.read("resume-check", &[]).assert_ok()
    }

    /// Assert a refusal that changed nothing; returns the error envelope.
    #[track_caller]
    fn refused(&self, out: impl FnOnce() -> Output, code: i32, message: &str) -> Value {
        common::unchanged(&self.root, || {
            let out = out();
            let e = common::assert_refusal(&out, code);
            assert!(
                e["message"] == message || e["message"].as_str().unwrap().contains(message),
                "{out:?}"
            );
            e
        })
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn resume_hands_the_run_to_a_fresh_handle() {
    let run = Run::new();
    let old = read_json(&run.handle("main.owner"));
    let old_fingerprint = canonical::sha256_hex(old["token"].as_str().unwrap().as_bytes());
    let manifest_before = std::fs::read(run.dir.join("manifest.json")).unwrap();
    let head_before = run.resume_check()["last_checksum"].clone();

    let out = run.resume("main.owner", "second.owner", &[]);
    let v = out.assert_ok();
    crate::bed::assert_answer(
        &v,
        "checksum ok operation owner_epoch owner_fingerprint run_id run_state sequence state_root",
        json!({"operation": "resume", "owner_epoch": 2, "sequence": 3, "run_state": "approved"}),
        "resume",
    );

    // The new handle: 0600, epoch 2, a fresh token whose fingerprint is
    // the new owner; the token itself is printed nowhere.
    let new_path = run.handle("second.owner");
    assert_eq!(std::fs::metadata(&new_path).unwrap().mode() & 0o7777, 0o600);
    let new = read_json(&new_path);
    assert_eq!(
        new.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["epoch", "run_id", "token"]
    );
    assert_eq!(new["epoch"], 2);
    assert_eq!(new["run_id"], run.run_id.as_str());
    let token = new["token"].as_str().unwrap();
    assert_ne!(token, old["token"].as_str().unwrap());
    assert_eq!(
        v["owner_fingerprint"],
        canonical::sha256_hex(token.as_bytes())
    );
    assert!(!out.stdout.contains(token) && !run.receipt().contains(token));

    // The old handle is gone; the manifest's `_run` is never rewritten.
    assert!(!run.handle("main.owner").exists());
    assert_eq!(
        std::fs::read(run.dir.join("manifest.json")).unwrap(),
        manifest_before
    );

    // One run_resumed event, signed by the OLD owner at the OLD epoch.
    let event = run.last_event();
    assert_eq!(event["event_type"], "run_resumed");
    assert_eq!(event["owner_token"], old_fingerprint.as_str());
    assert_eq!(event["previous_checksum"], head_before);
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "new_owner_fingerprint": v["owner_fingerprint"]})
    );
    for key in ["lane_id", "agent_id", "from_state", "to_state", "reason"] {
        assert!(event[key].is_null(), "{key}");
    }
    assert_eq!(
        event["evidence_refs"],
        json!([{"kind": "user_approval", "summary": "hand over"}])
    );

    let check = run.resume_check();
    assert_eq!(check["owner_epoch"], 2);
    assert_eq!(check["owner_fingerprint"], v["owner_fingerprint"]);
    assert_eq!(check["last_checksum"], v["checksum"]);

    // The new owner can work; a second hand-over reaches epoch 3.
    run.mutation(
        "run-start",
        "second.owner",
        &["--evidence", &run.work_file("ev.json")],
    )
    .assert_ok();
    let v = run.resume("second.owner", "third.owner", &[]).assert_ok();
    assert_eq!(v["owner_epoch"], 3);
    assert_eq!(run.last_event()["metadata"]["owner_epoch"], 2);
    assert!(!run.handle("second.owner").exists());
}

#[test]
fn a_reference_run_at_epoch_three_is_handed_on() {
    // 06-resume-epoch: the reference resumed twice (owner-3.owner, epoch 3).
    let run = Run::fixture("06-resume-epoch");
    assert_eq!(run.resume_check()["owner_epoch"], 3);
    let v = run
        .resume("owner-3.owner", "owner-4.owner", &[])
        .assert_ok();
    assert_eq!(v["owner_epoch"], 4);
    assert!(!run.handle("owner-3.owner").exists());
    run.mutation(
        "run-block",
        "owner-4.owner",
        &[
            "--evidence",
            &run.work_file("ev.json"),
            "--reason",
            "handed on",
        ],
    )
    .assert_ok();
}

#[test]
fn an_incomplete_replacement_blocks_the_transfer_as_recorded() {
    // The reference's own refusal, every key as it printed it; ours names
    // the lane whose replacement was never made.
    let scenario = fixtures_dir().join("10-replacement-incomplete");
    let run = Run::fixture("10-replacement-incomplete");
    let steps = common::recorded_steps(&scenario);
    let step = steps
        .iter()
        .find(|s| s["kind"] == "cli" && s["argv"][2] == "resume")
        .unwrap();
    let out = common::assert_replays_read_only(&run.flow, &run.root, &scenario, step);
    let incomplete = &run.resume_check()["incomplete_replacements"];
    assert_eq!(incomplete.as_array().map(Vec::len), Some(1), "{incomplete}");
    common::assert_taught(
        &out.error(),
        json!({"incomplete_replacements": incomplete}),
        |hint| hint.contains("replacement-repair") && hint.contains("replacement-block"),
    );
}

#[test]
fn refusals_change_nothing() {
    let run = Run::new();
    // Evidence: present and non-empty.
    run.put("empty.json", &json!([]));
    run.refused(
        || {
            run.mutation(
                "resume",
                "main.owner",
                &[
                    "--evidence",
                    &run.work_file("empty.json"),
                    "--new-owner-file",
                    &text(&run.handle("n.owner")),
                ],
            )
        },
        2,
        "lifecycle transition requires evidence",
    );
    // The new owner file: not there yet, directly in handles, an identifier
    // stem, not a symlink, not the current handle.
    std::fs::write(run.handle("taken.owner"), "x").unwrap();
    common::set_modes(&run.root);
    run.refused(
        || run.resume("main.owner", "taken.owner", &[]),
        2,
        "owner handle already exists",
    );
    run.refused(
        || run.resume("main.owner", "main.owner", &[]),
        2,
        "owner handle already exists",
    );
    std::os::unix::fs::symlink(run.work.join("nowhere"), run.handle("link.owner")).unwrap();
    run.refused(
        || run.resume("main.owner", "link.owner", &[]),
        2,
        "owner handle already exists",
    );
    let outside = text(&run.work.join("escaped.owner"));
    let traversal = format!("{}/../escaped.owner", text(&run.root.join("handles")));
    let nested = text(&run.root.join("handles/sub/n.owner"));
    for path in [&outside, &traversal, &nested] {
        run.refused(
            || run.resume("main.owner", path, &[]),
            2,
            "owner handle must be a direct child of state-root handles",
        );
    }
    run.refused(
        || run.resume("main.owner", ".owner", &[]),
        2,
        "owner handle name must match the identifier contract",
    );
    // A CAS that fails after the new handle was created: the handle is
    // removed again, the receipt is unchanged.
    let stale_head = "0".repeat(64);
    let now = run.resume_check();
    let e = run.refused(
        || run.resume("main.owner", "n.owner", &["--expected-head", &stale_head]),
        5,
        "receipt head changed before mutation",
    );
    common::assert_taught(
        &e,
        json!({"expected_head": stale_head, "head": now["last_checksum"],
               "sequence": now["last_sequence"]}),
        |hint| {
            hint.contains(&format!(
                "--expected-head {}",
                now["last_checksum"].as_str().unwrap()
            )) && hint.contains("resume-check --run-id 2026")
        },
    );
    run.refused(
        || run.resume("main.owner", "n.owner", &["--expected-head", "HEAD"]),
        2,
        "expected receipt head must be lowercase SHA-256",
    );
    // An owner handle outside handles/ passes the plain read but not the
    // pipeline's contained read: exit 2, and the new handle is gone again.
    let copy = run.work.join("main.owner");
    std::fs::copy(run.handle("main.owner"), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    run.refused(
        || {
            let ev = run.work_file("ev.json");
            let new_owner = text(&run.handle("n.owner"));
            run.flow.run(&crate::bed::read_argv(
                &run.root,
                "resume",
                &run.run_id,
                &[
                    "--owner-file",
                    &text(&copy),
                    "--evidence",
                    &ev,
                    "--new-owner-file",
                    &new_owner,
                ],
            ))
        },
        2,
        "owner handle must be a direct child of state-root handles",
    );
    // A live process holds the receipt lock.
    let lock = common::hold_receipt_lock(&run.root, &run.dir);
    run.refused(
        || run.resume("main.owner", "n.owner", &[]),
        5,
        "state lock owner is live or unknown",
    );
    std::fs::remove_dir_all(&lock).unwrap();
    // The run still moves with its real owner afterwards.
    run.resume("main.owner", "n.owner", &[]).assert_ok();
}

#[test]
fn terminal_and_damaged_runs_keep_their_owner() {
    let run = Run::new();
    run.mutation(
        "run-cancel",
        "main.owner",
        &["--evidence", &run.work_file("ev.json"), "--reason", "stop"],
    )
    .assert_ok();
    run.refused(
        || run.resume("main.owner", "n.owner", &[]),
        5,
        "run state does not allow this command",
    );

    let run = Run::new();
    let receipt = run.receipt_path();
    let mut bytes = std::fs::read(&receipt).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 1;
    std::fs::write(&receipt, &bytes).unwrap();
    run.refused(|| run.resume("main.owner", "n.owner", &[]), 3, "");
}

#[test]
fn stale_foreign_and_unusable_current_handles_are_refused() {
    let run = Run::new();
    std::fs::copy(run.handle("main.owner"), run.handle("epoch1.owner")).unwrap();
    run.resume("main.owner", "second.owner", &[]).assert_ok();
    // A copy of the epoch-1 handle: stale (plain read, before the lock);
    // the hint names the handle the resume wrote.
    let e = run.refused(
        || run.resume("epoch1.owner", "n.owner", &[]),
        5,
        "owner handle is stale",
    );
    common::assert_taught(
        &e,
        json!({"handle_owner_epoch": 1, "owner_epoch": 2}),
        |hint| hint.contains("a resume has made the run's owner epoch 2"),
    );
    // The path the resume removed.
    run.refused(
        || run.resume("main.owner", "n.owner", &[]),
        2,
        "No such file or directory",
    );
    // Another run's handle is just as stale here.
    run.init_another("other.owner", &run.work).assert_ok();
    run.refused(
        || run.resume("other.owner", "n.owner", &[]),
        5,
        "owner handle is stale",
    );
    // The current handle with a loose mode.
    std::fs::set_permissions(
        run.handle("second.owner"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    run.refused(
        || run.resume("second.owner", "n.owner", &[]),
        2,
        "owner handle does not have the required secure mode",
    );
}
