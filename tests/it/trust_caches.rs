//! Caches never vouch (trust-model §2 promises 1–3; `contracts/receipt.md`
//! "Checkpoint"): a party holding `derived.key` (same uid) can write any
//! derived file with a valid MAC. Every auditor verdict is then still what
//! a full replay of the receipt says, and no mutation of ours appends an
//! event that its own full replay rejects or records as a breach.

use crate::bed::forge::{
    assert_same_answers, auditor_answers, read_json, remac_checkpoint, stale_checkpoint,
    write_macced, zero_digest_slots,
};
use crate::bed::{T0, TestBed, bed_type, component, ev};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

bed_type!(Run);

impl Run {
    /// A running run whose lane `a` (agent `agent-a`) is created, not yet
    /// started.
    fn with_lane_a_created() -> Run {
        let run = Run(TestBed::running(&["runtime"]));
        run.input(
            "lane-create",
            &ev("assign a"),
            &crate::bed::lane_input("a", "agent-a", &[]),
        )
        .assert_ok();
        run
    }

    fn checkpoint_path(&self) -> PathBuf {
        self.dir.join("checkpoint.json")
    }

    /// A copy of the state root with every derived file removed: what a
    /// full replay of the same receipt answers.
    fn untouched_copy(&self) -> PathBuf {
        let marker = PathBuf::from(self.file(&json!(0)));
        let copy = self.tmp.path().join(format!(
            "copy-{}",
            marker.file_stem().unwrap().to_string_lossy()
        ));
        crate::bed::copy_tree(&self.root, &copy);
        strip_derived(&copy.join("runs").join(&self.run_id));
        copy
    }

    fn answers(&self, root: &Path) -> Vec<(String, i32, String)> {
        auditor_answers(&self.flow, root, &self.run_id, &self.work)
    }

    /// Full replay of the receipt (no derived file): no rejection, no
    /// breach.
    fn assert_replays_clean(&self, after: &str) {
        let copy = self.untouched_copy();
        let root = copy.to_string_lossy().into_owned();
        let verify = self
            .flow
            .run(&["--state-root", &root, "verify", "--run-id", &self.run_id]);
        let verify = verify.assert_ok();
        assert!(verify.get("breaches").is_none(), "after {after}: {verify}");
        let rebuild = self
            .flow
            .run(&["--state-root", &root, "rebuild", "--run-id", &self.run_id]);
        assert_eq!(rebuild.code, 0, "after {after}: {rebuild:?}");
    }
}

/// Remove every derived file of a run directory.
fn strip_derived(dir: &Path) {
    for name in [
        "checkpoint.json",
        "checkpoint-digests.idx",
        "receipt-head.json",
        "run.json",
        "tree-hashes",
    ] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_dir_all(dir.join("lanes"));
}

fn breach_rules(value: &Value) -> Vec<String> {
    value["breaches"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|b| b["rule"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A run whose required component `runtime` (owner lane `a`, running) the
/// other writer removed: replay records `required_component_removed`.
fn run_with_a_foreign_breach() -> Run {
    let run = Run(TestBed::running(&["runtime"]));
    run.running_lane("a", None);
    run.register(&json!([component("runtime", "a", true, &[], &[])]))
        .assert_ok();
    run.append_sealed(&[(
        "topology_component_removed",
        json!({"reason": "not needed", "metadata": {"owner_epoch": 1, "component_id": "runtime"}}),
    )]);
    // A command of ours writes a checkpoint holding the breach.
    run.read("rebuild", &[]).assert_ok();
    assert_eq!(
        breach_rules(&read_json(&run.checkpoint_path())["ours"]),
        ["required_component_removed"]
    );
    run
}

#[test]
fn a_remaced_checkpoint_cannot_hide_a_breach_from_any_auditor() {
    let run = run_with_a_foreign_breach();
    let untouched = run.untouched_copy();
    let expected = run.answers(&untouched);
    assert_eq!(
        breach_rules(&serde_json::from_str(expected[0].2.lines().next().unwrap()).unwrap()),
        ["required_component_removed"],
        "{expected:?}"
    );
    // The key holder empties the breaches and re-MACs the checkpoint.
    remac_checkpoint(&run.root, &run.dir, |c| c["ours"]["breaches"] = json!([]));
    assert_same_answers(&run.answers(&run.root), &expected, "a re-MACed checkpoint");
    assert_eq!(breach_rules(&run.verify()), ["required_component_removed"]);
    assert_eq!(
        breach_rules(&run.completion()),
        ["required_component_removed"]
    );
}

/// A lane state the checkpoint claims, validly MACed, for a lane whose
/// receipt says otherwise: `startup-ack` must answer what a full replay
/// answers, and append nothing the full replay rejects.
#[test]
fn a_forged_lane_state_cannot_make_startup_ack_append_a_rejected_event() {
    // (1) a state that no line of the lane produced: the lane is pending.
    let run = Run::with_lane_a_created();
    let untouched = run.untouched_copy();
    remac_checkpoint(&run.root, &run.dir, |c| {
        c["state"]["lanes"]["a"]["state"] = json!("starting");
        c["state"]["lanes"]["a"]["last_event_type"] = json!("lane_started");
    });
    let ack = |root: &Path| {
        let evidence = run.file(&ev("ack a"));
        run.flow.run(&crate::bed::mutation_argv(
            root,
            "startup-ack",
            &run.run_id,
            &root.join("handles/main.owner"),
            &crate::bed::lane_argv("a", "agent-a", T0, &evidence),
        ))
    };
    let expected = ack(&untouched);
    let got = ack(&run.root);
    assert_eq!(
        (got.code, &got.stdout),
        (expected.code, &expected.stdout),
        "{got:?}"
    );
    assert_ne!(got.code, 0, "the lane is pending: {got:?}");
    run.assert_replays_clean("a forged lane state");
    let block = run.cmd("run-block", &ev("blocked"), &["--reason", "waiting"]);
    block.assert_ok();
    run.assert_replays_clean("run-block");

    // (2) a real but older state of the lane (the checkpoint right after
    // lane-start, re-bound to the current receipt): the lane is running.
    let run = Run::with_lane_a_created();
    run.lane_step("lane-start", "a", &ev("spawn a"), &[])
        .assert_ok();
    let older = read_json(&run.checkpoint_path());
    run.lane_step("startup-ack", "a", &ev("ack a"), &[])
        .assert_ok();
    let receipt = run.receipt();
    let current = read_json(&run.checkpoint_path());
    write_macced(
        &run.root,
        &run.checkpoint_path(),
        stale_checkpoint(&older, &current),
    );
    let out = run.lane_step("startup-ack", "a", &ev("ack a again"), &[]);
    assert_ne!(out.code, 0, "the lane is running already: {out:?}");
    assert_eq!(run.receipt(), receipt, "nothing was appended");
    run.assert_replays_clean("an older lane state");
    run.cmd("run-block", &ev("blocked"), &["--reason", "waiting"])
        .assert_ok();
    run.assert_replays_clean("run-block after an older lane state");
}

/// The digest table's slots zeroed (header kept): no heartbeat evidence
/// becomes component evidence, no heartbeat repeats evidence, and `verify`
/// answers the same with the checkpoint as without it.
#[test]
fn a_zeroed_digest_table_is_never_believed() {
    let run = Run(TestBed::running(&["runtime"]));
    run.running_lane("a", None);
    run.register(&json!([component("runtime", "a", true, &[], &[])]))
        .assert_ok();
    let first = ev("heartbeat 1 of a");
    run.numbered_heartbeat("a", &first, 1).assert_ok();
    run.numbered_heartbeat("a", &ev("heartbeat 2 of a"), 2)
        .assert_ok();
    zero_digest_slots(&run.dir);
    let receipt = run.receipt();
    let out = run.numbered_heartbeat("a", &first, 3);
    assert_eq!(out.code, 2, "evidence already recorded: {out:?}");
    assert!(
        crate::bed::str_field(&out.error(), "message").contains("already recorded"),
        "{out:?}"
    );
    assert_eq!(run.receipt(), receipt, "nothing was appended");
    run.complete_lane("a", &ev("lane a done")).assert_ok();
    zero_digest_slots(&run.dir);
    let receipt = run.receipt();
    let out = run.cover("runtime", &first);
    assert_eq!(
        out.code, 2,
        "a heartbeat's evidence covers no component: {out:?}"
    );
    assert_eq!(run.receipt(), receipt, "nothing was appended");
    // The run cannot complete on that evidence either.
    zero_digest_slots(&run.dir);
    assert_eq!(run.complete(&ev("all done")).code, 6);
    let with_checkpoint = run.verify();
    run.assert_replays_clean("a zeroed digest table");
    std::fs::rename(run.checkpoint_path(), run.dir.join("moved-away.json")).unwrap();
    assert_eq!(run.verify(), with_checkpoint);
}
