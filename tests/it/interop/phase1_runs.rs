//! Family 1.0 (Phase 1) runs are readable by verify and rebuild
//! (reference-runtime §6.4, §6.5): 15-key events without metadata, the raw
//! owner token in the receipt, default limits.

use crate::bed as common;

use common::{Flow, PHASE1_RUN_ID, write_phase1_run};
use serde_json::{Value, json};

const RUN_ID: &str = PHASE1_RUN_ID;

/// A Phase 1 run of `events` in a temp state root and our binary pinned
/// beside it.
struct Phase1Run {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    flow: Flow,
    /// The receipt's last checksum.
    head: String,
}

impl Phase1Run {
    fn new(events: &[(&str, Option<&str>, Option<&str>)], metadata: Option<Value>) -> Phase1Run {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let head = write_phase1_run(&root, events, metadata);
        Phase1Run {
            flow: Flow::new(tmp.path()),
            _tmp: tmp,
            root,
            head,
        }
    }

    /// A run created (planned), then `events`, none with metadata.
    fn created_then(events: &[(&str, Option<&str>, Option<&str>)]) -> Phase1Run {
        let mut all = vec![("run_created", None, Some("planned"))];
        all.extend_from_slice(events);
        Phase1Run::new(&all, None)
    }

    /// `<command> --run-id <the run>` (a command that takes no owner).
    fn read(&self, command: &str) -> common::Output {
        self.flow
            .run(&common::read_argv(&self.root, command, RUN_ID, &[]))
    }

    /// `verify` refuses the receipt: its event at `sequence` breaks the
    /// Phase 1 event contract.
    #[track_caller]
    fn assert_contract_mismatch_at(&self, sequence: u64) {
        let e = self.read("verify").assert_error(3, "receipt_corrupt");
        assert_eq!(
            e["message"],
            format!("receipt corruption at sequence {sequence}: event contract mismatch")
        );
    }
}

#[test]
fn verify_and_rebuild_read_phase1_runs() {
    let run = Phase1Run::created_then(&[
        ("plan_approved", Some("planned"), Some("approved")),
        ("run_started", None, None),
    ]);
    let v = run.read("verify").assert_ok();
    assert_eq!(v["checksum"], run.head);
    assert_eq!(v["event_count"], 3);
    let r = run.read("rebuild").assert_ok();
    assert_eq!(r["sequence"], 3);
    let cache: Value = serde_json::from_str(
        &std::fs::read_to_string(run.root.join("runs").join(RUN_ID).join("run.json")).unwrap(),
    )
    .unwrap();
    // The simple cache: a null to_state falls back to the event type's state.
    assert_eq!(cache["state"], "running");
    assert_eq!(cache["last_event_type"], "run_started");
    assert!(cache.get("coordinator").is_none());
}

#[test]
fn phase1_events_may_not_carry_metadata() {
    let run = Phase1Run::new(
        &[("run_created", None, Some("planned"))],
        Some(json!({"owner_epoch": 1})),
    );
    run.assert_contract_mismatch_at(1);
}

#[test]
fn phase2_only_event_types_are_refused_in_phase1() {
    let run = Phase1Run::created_then(&[("run_cancelled", Some("planned"), Some("cancelled"))]);
    run.assert_contract_mismatch_at(2);
}

#[test]
fn phase1_runs_are_diagnosable_and_refused_by_phase2_commands() {
    let run = Phase1Run::created_then(&[("plan_approved", Some("planned"), Some("approved"))]);
    let d = run.read("receipt-diagnose").assert_ok();
    assert_eq!(d["effective_state"], "approved");
    assert_eq!(d["last_trusted_checksum"], run.head);
    assert_eq!(d["manifest_version"], "1.0.0");
    let before = common::snapshot(&run.root);
    let e = run
        .read("resume-check")
        .assert_error(7, "unsupported_by_run_manifest");
    assert_eq!(e["next_command"], "init");
    assert_eq!(
        e["message"],
        "the selected run manifest does not support coordinator commands"
    );
    assert_eq!(before, common::snapshot(&run.root));
}

#[test]
fn every_phase2_mutation_answers_exit_7_on_a_phase1_run() {
    let bed = common::Phase1Bed::new();
    let f = bed.evidence.to_str().unwrap();
    let lane = common::PHASE1_LANE_ARGS;
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("run-approve", vec![]),
        ("run-start", vec![]),
        ("run-cancel", vec!["--reason", "r"]),
        ("lane-create", vec!["--input", f]),
        ("lane-start", lane.to_vec()),
        ("heartbeat", vec!["--input", f]),
        ("lane-reassign", vec!["--input", f]),
        (
            "replacement-close",
            vec![
                "--lane-id",
                "l",
                "--replacement-lane-id",
                "m",
                "--at",
                "2026-07-14T01:00:00Z",
            ],
        ),
    ];
    common::unchanged(&bed.root, || {
        for (command, extra) in cases {
            common::assert_phase1_unsupported(&bed.mutate(command, &extra), command);
        }
        let liveness = bed.read("liveness-check", &["--lane-id", "l", "--at", common::T0]);
        common::assert_phase1_unsupported(&liveness, "liveness-check");
    });
}
