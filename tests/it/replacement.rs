//! Stalled-lane replacement through the binary: lane-reassign,
//! replacement-close, replacement-repair, replacement-block.
//!
//! Pre-states come from the reference fixtures: a copy of a scenario's state
//! whose receipt is cut back to the line before the command (caches
//! dropped; `_run.repo_root` re-pinned to a temp dir), then the recorded
//! command is replayed and what we write is compared byte for byte with the
//! line the reference wrote. States the CLI cannot produce (incomplete
//! reservations, decisions.md 10) are hand-built: extra receipt lines are
//! sealed here, in the test, with their checksums computed from canonical
//! JSON. Every refusal asserts exit status, error code, message and
//! `next_command`, and that the state root is byte-identical afterwards.

use crate::bed as common;

use bluetape_flow::receipt::canonical;
use common::{
    Flow, Output, assert_reassigned, checkpoint_evidence, reassign_input, with,
    write_scope_refusals,
};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

struct Scenario {
    _tmp: tempfile::TempDir,
    flow: Flow,
    root: PathBuf,
    repo: PathBuf,
    run_id: String,
    /// The scenario whose `commands.jsonl` and `inputs/` are replayed.
    inputs_of: &'static str,
    work: PathBuf,
}

fn fixture(name: &str) -> PathBuf {
    common::fixtures_dir().join(name)
}

/// The reference's receipt of `scenario`, one string per line (no LF).
fn fixture_lines(scenario: &str) -> Vec<String> {
    common::topo::fixture_lines(&fixture(scenario))
}

/// The `nth` (0-based) recorded step of `operation` in `scenario`.
fn recorded(scenario: &str, operation: &str, nth: usize) -> Value {
    common::recorded_steps(&fixture(scenario))
        .into_iter()
        .filter(|s| s["kind"] == "cli" && s["argv"][2] == operation)
        .nth(nth)
        .unwrap_or_else(|| panic!("{scenario} has no step {operation} #{nth}"))
}

impl Scenario {
    /// `source`'s state with its receipt cut to `keep` lines (all when
    /// `None`), replaying `inputs_of`'s commands.
    fn new(source: &str, inputs_of: &'static str, keep: Option<usize>) -> Scenario {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        common::prepare_state(&fixture(source), &root);
        let run_id = common::first_run_id(&root);
        let run_dir = root.join("runs").join(&run_id);
        if let Some(keep) = keep {
            let lines = fixture_lines(source);
            assert!(keep <= lines.len());
            let text: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(run_dir.join("receipt.jsonl"), text).unwrap();
        }
        // Caches are never read back; drop the ones describing later lines.
        let _ = std::fs::remove_file(run_dir.join("run.json"));
        for lane in std::fs::read_dir(run_dir.join("lanes")).unwrap().flatten() {
            std::fs::remove_file(lane.path()).unwrap();
        }
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("src/runtime")).unwrap();
        let scenario = Scenario {
            flow: Flow::new(tmp.path()),
            work: tmp.path().join("work"),
            _tmp: tmp,
            root,
            repo: repo.clone(),
            run_id,
            inputs_of,
        };
        std::fs::create_dir_all(&scenario.work).unwrap();
        scenario.pin_repo_root(&repo);
        scenario
    }

    fn run_dir(&self) -> PathBuf {
        self.root.join("runs").join(&self.run_id)
    }

    /// Rewrite `_run.repo_root` (outside the manifest hash).
    fn pin_repo_root(&self, repo: &Path) {
        let path = self.run_dir().join("manifest.json");
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["_run"]["repo_root"] = json!(repo.to_str().unwrap());
        std::fs::write(&path, serde_json::to_string(&manifest).unwrap()).unwrap();
        common::set_modes(&self.root);
    }

    fn owner(&self) -> PathBuf {
        self.root.join("handles/main.owner")
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.run_dir().join("receipt.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn expand(&self, argv: &Value) -> Vec<String> {
        let inputs = fixture(self.inputs_of).join("inputs");
        argv.as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let a = a.as_str().unwrap();
                match a.strip_prefix("{INPUT:").and_then(|r| r.strip_suffix('}')) {
                    Some(name) => inputs.join(name).to_string_lossy().into_owned(),
                    None => a.replace("{STATE}", self.root.to_str().unwrap()),
                }
            })
            .collect()
    }

    /// Replay a recorded step and require the reference's exact output.
    fn replay(&self, operation: &str, nth: usize) -> Output {
        let step = recorded(self.inputs_of, operation, nth);
        let before = common::snapshot(&self.root);
        let out = self.flow.run(&self.expand(&step["argv"]));
        let state = self.root.to_str().unwrap();
        assert_eq!(
            out.code as i64,
            step["exit_status"].as_i64().unwrap(),
            "{out:?}"
        );
        assert_eq!(
            out.stdout,
            step["stdout"].as_str().unwrap().replace("{STATE}", state)
        );
        common::assert_same_envelope(
            &out.stderr.replace(state, "{STATE}"),
            step["stderr"].as_str().unwrap(),
        );
        if out.code != 0 {
            assert_eq!(before, common::snapshot(&self.root), "refusal wrote");
        }
        out
    }

    fn file(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.work.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    }

    fn cmd(&self, command: &str, owner: &Path, extra: &[&str]) -> Output {
        self.flow.run(&common::mutation_argv(
            &self.root,
            command,
            &self.run_id,
            owner,
            extra,
        ))
    }

    /// `lane-reassign` as the owner of the handle `owner` with the files
    /// `input` and `evidence`, then `extra`.
    fn reassign_from(&self, owner: &Path, input: &Path, evidence: &Path, extra: &[&str]) -> Output {
        let files = [
            "--input",
            input.to_str().unwrap(),
            "--evidence",
            evidence.to_str().unwrap(),
        ];
        self.cmd("lane-reassign", owner, &[&files[..], extra].concat())
    }

    /// `lane-reassign` as the run's owner with `input` and `evidence`
    /// written to files, then `extra`.
    fn reassign(&self, input: &Value, evidence: &Value, extra: &[&str]) -> Output {
        let input = self.file("reassign.json", input);
        let evidence = self.file("reassign-evidence.json", evidence);
        self.reassign_from(&self.owner(), &input, &evidence, extra)
    }

    fn lineage(&self, command: &str, lane: &str, replacement: &str, evidence: &Value) -> Output {
        let evidence = self.file(&format!("{command}-evidence.json"), evidence);
        self.cmd(
            command,
            &self.owner(),
            &[
                "--lane-id",
                lane,
                "--replacement-lane-id",
                replacement,
                "--at",
                "2026-07-14T01:40:00Z",
                "--evidence",
                evidence.to_str().unwrap(),
            ],
        )
    }

    /// Assert a refusal that changed nothing; returns the error envelope.
    #[track_caller]
    fn refused(&self, run: impl FnOnce() -> Output, code: i32, message: &str) -> Value {
        let before = common::snapshot(&self.root);
        let e = common::assert_conflict_or_contract(&run(), code, message);
        assert_eq!(before, common::snapshot(&self.root), "a refusal wrote");
        e
    }

    /// Replay the reference's first `operation`; the receipt is then the
    /// first `lines` lines of the reference's (the `inputs_of` scenario).
    fn replay_to(&self, operation: &str, lines: usize) -> Output {
        let out = self.replay(operation, 0);
        assert_eq!(self.lines(), fixture_lines(self.inputs_of)[..lines]);
        out
    }

    /// [`Scenario::replay_to`] of an `operation` that ends the lineage:
    /// the original lane `build` ended `state` at the last of the `lines`
    /// lines, and the receipt verifies.
    fn replay_lineage_end(&self, operation: &str, lines: usize, state: &str) {
        self.replay_to(operation, lines);
        common::assert_holds(
            &self.lane_cache("build"),
            json!({"state": state, "terminal_sequence": lines}),
            "the original lane",
        );
        self.verify();
    }

    /// `command` on the lineage `build` -> `build-2` with `evidence` is
    /// refused as a conflict (exit 5) with `message`.
    fn lineage_conflict(&self, command: &str, evidence: &Value, message: &str) -> Value {
        self.refused(
            || self.lineage(command, "build", "build-2", evidence),
            5,
            message,
        )
    }

    fn verify(&self) -> Value {
        self.flow
            .run(&crate::bed::read_argv(
                &self.root,
                "verify",
                &self.run_id,
                &[],
            ))
            .assert_ok()
    }

    fn lane_cache(&self, lane: &str) -> Value {
        let path = self.run_dir().join("lanes").join(format!("{lane}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// Seal and append a hand-built event after the current head (signed
    /// like the head line), computing its checksum here.
    fn append(&self, event_type: &str, fields: Value) {
        let lines = self.lines();
        let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        let mut event = json!({
            "schema_version": 1, "run_id": self.run_id, "lane_id": null, "agent_id": null,
            "sequence": last["sequence"].as_u64().unwrap() + 1, "event_type": event_type,
            "from_state": null, "to_state": null, "timestamp": "2026-07-14T01:30:00Z",
            "owner_token": last["owner_token"], "manifest_hash": last["manifest_hash"],
            "previous_checksum": last["checksum"],
            "evidence_refs": [{"kind": "test", "summary": format!("hand-built {event_type}")}],
            "reason": null, "metadata": {"owner_epoch": last["metadata"]["owner_epoch"]},
        });
        // The metadata given joins the head's owner epoch.
        for (key, value) in fields.as_object().unwrap() {
            match key.as_str() {
                "metadata" => event["metadata"] = common::patched(event["metadata"].take(), value),
                _ => event[key] = value.clone(),
            }
        }
        let checksum = sha256_hex(canonical::to_string(&event).as_bytes());
        event["checksum"] = json!(checksum);
        let mut text = std::fs::read_to_string(self.run_dir().join("receipt.jsonl")).unwrap();
        text.push_str(&canonical::to_string(&event));
        text.push('\n');
        std::fs::write(self.run_dir().join("receipt.jsonl"), text).unwrap();
        self.verify();
    }

    fn lane_step(&self, event_type: &str, lane: &str, agent: &str, from: &str, to: &str) {
        let mut fields = json!({"lane_id": lane, "agent_id": agent, "from_state": from,
                                "to_state": to});
        if event_type == "probe_sent" {
            fields["metadata"] = json!({"probe_deadline": "2026-07-14T01:31:00Z"});
        }
        self.append(event_type, fields);
    }

    /// running lane -> stalled, probed, interrupted (hand-built).
    fn interrupt(&self, lane: &str, agent: &str) {
        self.lane_step("stall_suspected", lane, agent, "running", "suspected_stall");
        self.lane_step("probe_sent", lane, agent, "suspected_stall", "recovering");
        self.lane_step("agent_interrupted", lane, agent, "recovering", "recovering");
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// 04-stall-replace cut after `interrupt-result` (11 lines).
fn interrupted() -> Scenario {
    Scenario::new("04-stall-replace", "04-stall-replace", Some(11))
}

// ------------------------------------------------------- reference parity

#[test]
fn reassign_writes_the_reference_line() {
    let s = interrupted();
    let out = s.replay_to("lane-reassign", 12);
    assert_eq!(out.json()["sequence"], 12);
    s.verify();
    let original = s.lane_cache("build");
    assert_reassigned(&original, &s.lane_cache("build-2"));
    assert_eq!(
        original["replacement_reservation"]["checkpoint_digest"],
        "60c1beda1781b4065b38fc62378ba2fc42de44a0ec821b7d00029d38ee87036c"
    );
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(s.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(
        run["coordinator"]["state"]["incomplete_replacements"],
        json!([])
    );

    // The replaced lane is fenced: it cannot be reassigned again.
    s.refused(
        || s.reassign(&reassign_input(), &checkpoint_evidence(), &[]),
        5,
        "lane is not active",
    );
    // A CLI-written lineage is never incomplete: nothing to repair or block.
    let ev = json!([{"kind": "checkpoint", "summary": "verified",
                     "checksum": "60c1beda1781b4065b38fc62378ba2fc42de44a0ec821b7d00029d38ee87036c"}]);
    for command in ["replacement-repair", "replacement-block"] {
        s.lineage_conflict(command, &ev, "replacement lane already exists");
    }
    s.lineage_conflict("replacement-close", &ev, "replacement lane is not terminal");
}

#[test]
fn close_writes_the_reference_line() {
    // Cut after build-2's lane-complete (line 15).
    let s = Scenario::new("04-stall-replace", "04-stall-replace", Some(15));
    s.replay_lineage_end("replacement-close", 16, "completed");
    s.lineage_conflict(
        "replacement-close",
        &json!([{"kind": "k", "summary": "again"}]),
        "original lane is not awaiting lineage close",
    );
}

#[test]
fn repair_writes_the_reference_line() {
    // Scenario 11 starts from 10's final state: the synthesized stand-alone
    // lane_reassigned with a full reservation, and no child lane.
    let s = Scenario::new("10-replacement-incomplete", "11-replacement-repaired", None);
    assert_eq!(s.lines().len(), 11);
    s.replay_to("replacement-repair", 12);
    assert_eq!(s.lane_cache("build")["state"], "replaced");
    assert_eq!(
        s.lane_cache("build")["last_event_type"],
        "replacement_repaired"
    );
    assert_eq!(s.lane_cache("build-2")["state"], "pending");
    s.verify();
    // Repaired: the child exists now.
    s.lineage_conflict(
        "replacement-repair",
        &json!([{"kind": "k", "summary": "again"}]),
        "replacement lane already exists",
    );
}

#[test]
fn a_repaired_lineage_closes_like_the_reference() {
    let s = Scenario::new(
        "11-replacement-repaired",
        "11-replacement-repaired",
        Some(15),
    );
    s.replay_to("replacement-close", 16);
    s.verify();
}

#[test]
fn a_legacy_reservation_is_refused_then_blocked_like_the_reference() {
    let s = Scenario::new("12-replacement-blocked", "12-replacement-blocked", Some(11));
    // Exit 5 with the reference's keys as it printed them; nothing written.
    let out = s.replay("replacement-repair", 0);
    assert_eq!(s.lines().len(), 11);
    // The reason's fields, and a hint that spells the way on: the block.
    let e: Value = serde_json::from_str(&out.stderr).unwrap();
    assert_eq!(
        e["fields"],
        json!({"lane_id": "build", "replacement_lane_id": "build-2"})
    );
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.contains(&format!(
            "bluetape-flow replacement-block --run-id {} --owner-file {} --lane-id build --replacement-lane-id build-2",
            s.run_id,
            s.owner().display()
        )),
        "{hint}"
    );
    s.replay_lineage_end("replacement-block", 12, "blocked");
    s.lineage_conflict(
        "replacement-block",
        &json!([{"kind": "k", "summary": "s"}]),
        "lane has no incomplete replacement",
    );
    let e = s.lineage_conflict(
        "replacement-close",
        &json!([{"kind": "k", "summary": "s"}]),
        "original lane is not awaiting lineage close",
    );
    common::assert_taught(
        &e,
        json!({"lane_id": "build", "lane_state": "blocked"}),
        |hint| hint.starts_with("lane build is blocked, not replaced"),
    );
}

// ------------------------------------------------------ lane-reassign rules

#[test]
fn reassign_input_refusals_are_contract_errors() {
    let s = interrupted();
    std::os::unix::fs::symlink(s.repo.join("src"), s.repo.join("linked")).unwrap();
    let mut missing = reassign_input();
    missing
        .as_object_mut()
        .unwrap()
        .remove("replacement_write_scope");
    s.refused(
        || s.reassign(&missing, &checkpoint_evidence(), &[]),
        2,
        "JSON input fields do not match the command contract",
    );
    // One field of the input set to `value`, with the checkpoint evidence.
    let scopes =
        write_scope_refusals().map(|(value, message)| ("replacement_write_scope", value, message));
    for (field, value, message) in [
        (
            "extra",
            json!(1),
            "JSON input fields do not match the command contract",
        ),
        (
            "lane_id",
            json!("../build"),
            "lane id must match the identifier contract",
        ),
        (
            "replacement_agent_id",
            json!(null),
            "replacement agent id must match the identifier contract",
        ),
        (
            "replacement_lane_id",
            json!("build"),
            "replacement lane id must differ from original",
        ),
        (
            "replacement_assignment",
            json!(" "),
            "replacement assignment must be non-empty",
        ),
        (
            "replacement_assignment",
            json!("Resume build"),
            "replacement assignment must identify recovered checkpoint context",
        ),
        (
            "replacement_write_scope",
            json!(["linked/x"]),
            "contained path includes a symlink",
        ),
        (
            "replacement_startup_ack_deadline",
            json!("2026-07-14T01:11:00Z"),
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
        ),
        (
            "decided_at",
            json!("2026-07-14T01:11:00"),
            "observed_at must be a UTC timestamp",
        ),
        // In-lock input rules (after the owner check), still exit 2.
        (
            "replacement_agent_id",
            json!("agent-1"),
            "replacement agent must differ from original",
        ),
        (
            "replacement_write_scope",
            json!(["src", "docs"]),
            "replacement write scope must be equal or narrower",
        ),
    ]
    .into_iter()
    .chain(scopes)
    {
        let input = with(reassign_input(), field, value);
        s.refused(
            || s.reassign(&input, &checkpoint_evidence(), &[]),
            2,
            message,
        );
    }
    // The valid input with other evidence.
    for (evidence, message) in [
        (json!([]), "lifecycle transition requires evidence"),
        (
            json!([{"kind": "tool", "summary": "checkpoint 3"}]),
            "checkpoint recovery evidence is required",
        ),
        // Evidence contents are checked when the event is sealed.
        (
            json!([{"kind": "recovery", "summary": "checkpoint", "token": "x"}]),
            "evidence reference contains unsupported fields",
        ),
    ] {
        s.refused(|| s.reassign(&reassign_input(), &evidence, &[]), 2, message);
    }
    // The canonical scope is what gets recorded.
    let input = with(
        reassign_input(),
        "replacement_write_scope",
        json!(["src/runtime/", "./src/runtime", "src//runtime/x"]),
    );
    s.reassign(&input, &checkpoint_evidence(), &[]).assert_ok();
    assert_eq!(
        s.lane_cache("build-2")["write_scope"],
        json!(["src/runtime", "src/runtime/x"])
    );
}

#[test]
fn reassign_resolves_the_pinned_repo_root_strictly() {
    let s = interrupted();
    s.pin_repo_root(&s.repo.join("missing"));
    let e = s.refused(
        || s.reassign(&reassign_input(), &checkpoint_evidence(), &[]),
        2,
        &format!(
            "No such file or directory: '{}' (ENOENT)",
            s.repo.join("missing").display()
        ),
    );
    assert!(e["message"].as_str().unwrap().contains("missing"));
    let file = s.repo.join("file");
    std::fs::write(&file, b"x").unwrap();
    s.pin_repo_root(&file);
    s.refused(
        || s.reassign(&reassign_input(), &checkpoint_evidence(), &[]),
        2,
        "repo_root must be a directory",
    );
}

#[test]
fn reassign_precedence_of_owner_head_and_input() {
    let s = interrupted();
    // A copied handle with another token is a stale owner.
    let stale = s.root.join("handles/stale.owner");
    let mut handle: Value =
        serde_json::from_str(&std::fs::read_to_string(s.owner()).unwrap()).unwrap();
    handle["token"] = json!("someone-else");
    std::fs::write(&stale, handle.to_string()).unwrap();
    common::set_modes(&s.root);
    let input = s.file("in.json", &reassign_input());
    let ev = s.file("ev.json", &checkpoint_evidence());
    let bad_input = s.file(
        "bad.json",
        &with(reassign_input(), "lane_id", json!("../x")),
    );
    let run =
        |owner: &Path, input: &Path, extra: &[&str]| s.reassign_from(owner, input, &ev, extra);
    // Valid input, stale owner: 5. Invalid pre-lock input, stale owner: 2.
    s.refused(
        || run(&stale, &input, &[]),
        5,
        "owner handle does not match the current run owner",
    );
    s.refused(
        || run(&stale, &bad_input, &[]),
        2,
        "lane id must match the identifier contract",
    );
    // In-lock input rules come after the owner check.
    let same_agent = s.file(
        "same.json",
        &with(reassign_input(), "replacement_agent_id", json!("agent-1")),
    );
    s.refused(
        || run(&stale, &same_agent, &[]),
        5,
        "owner handle does not match the current run owner",
    );
    // --expected-head: syntax before any input file is read, CAS in the lock.
    let missing = s.work.join("missing.json");
    s.refused(
        || run(&s.owner(), &missing, &["--expected-head", "HEAD"]),
        2,
        "expected receipt head must be lowercase SHA-256",
    );
    let zero = "0".repeat(64);
    s.refused(
        || run(&s.owner(), &input, &["--expected-head", &zero]),
        5,
        "receipt head changed before mutation",
    );
    let head = s.verify()["checksum"].as_str().unwrap().to_string();
    run(&s.owner(), &input, &["--expected-head", &head]).assert_ok();
}

#[test]
fn reassign_needs_a_recorded_interrupt() {
    // The scenario cut after `lines` lines, and the refusal it gives.
    for (lines, message) in [
        (3, "lane does not exist"),
        // After stall-record: suspected_stall.
        (9, "replacement requires a recovering lane"),
        // After probe-sent: recovering, but no interrupt yet.
        (10, "replacement requires interrupt evidence"),
        // Before run-start there is no active run.
        (2, "run state does not allow this command"),
    ] {
        let s = Scenario::new("04-stall-replace", "04-stall-replace", Some(lines));
        s.refused(
            || s.reassign(&reassign_input(), &checkpoint_evidence(), &[]),
            5,
            message,
        );
    }
}

#[test]
fn one_replacement_per_lineage() {
    let s = interrupted();
    s.reassign(&reassign_input(), &checkpoint_evidence(), &[])
        .assert_ok();
    // Hand-built: build-2 starts, stalls and is interrupted too; an
    // unrelated lane `build-3` (agent-9) exists.
    s.lane_step("lane_started", "build-2", "agent-2", "pending", "starting");
    s.lane_step("startup_ack", "build-2", "agent-2", "starting", "running");
    s.interrupt("build-2", "agent-2");
    s.append(
        "lane_created",
        json!({"lane_id": "build-3", "agent_id": "agent-9", "to_state": "pending",
               "metadata": {"assignment": "Other work", "write_scope": [],
                            "fallback": "main session",
                            "startup_ack_deadline": "2026-07-14T01:31:00Z",
                            "command_deadline": "2026-07-14T01:40:00Z",
                            "parent_lane_id": null, "replacement_count": 0}}),
    );
    let again = |replacement: &str, agent: &str| {
        json!({
            "lane_id": "build-2", "replacement_lane_id": replacement,
            "replacement_agent_id": agent, "decided_at": "2026-07-14T01:35:00Z",
            "replacement_assignment": "Resume again from checkpoint 4",
            "replacement_write_scope": ["src/runtime"],
            "replacement_startup_ack_deadline": "2026-07-14T01:35:30Z",
            "replacement_command_deadline": "2026-07-14T01:50:00Z",
        })
    };
    // Exit-code precedence: same agent (2) before an existing id (5) before
    // the replacement limit (5).
    s.refused(
        || s.reassign(&again("build-3", "agent-2"), &checkpoint_evidence(), &[]),
        2,
        "replacement agent must differ from original",
    );
    s.refused(
        || s.reassign(&again("build-3", "agent-3"), &checkpoint_evidence(), &[]),
        5,
        "identifier already exists",
    );
    s.refused(
        || s.reassign(&again("build-4", "agent-3"), &checkpoint_evidence(), &[]),
        5,
        "replacement limit reached",
    );
}

// ------------------------------- hand-built reservations (decisions.md 10)

const CHECKPOINT_DIGEST: &str = "60c1beda1781b4065b38fc62378ba2fc42de44a0ec821b7d00029d38ee87036c";

/// 04 cut after the interrupt, plus a hand-built stand-alone
/// `lane_reassigned` whose metadata is the full reservation with `patch`.
fn reserved(patch: Value) -> Scenario {
    let s = interrupted();
    let mut metadata: Map<String, Value> = json!({
        "checkpoint_digest": CHECKPOINT_DIGEST, "previous_agent_id": "agent-1",
        "replacement_agent_id": "agent-2",
        "replacement_assignment": "Resume build from checkpoint 3",
        "replacement_command_deadline": "2026-07-14T01:30:00Z", "replacement_count": 1,
        "replacement_fallback": "main session", "replacement_lane_id": "build-2",
        "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
        "replacement_write_scope": ["src/runtime"],
    })
    .as_object()
    .unwrap()
    .clone();
    for (k, v) in patch.as_object().unwrap() {
        metadata.insert(k.clone(), v.clone());
    }
    s.append(
        "lane_reassigned",
        json!({"lane_id": "build", "agent_id": "agent-1", "from_state": "recovering",
               "to_state": "replaced", "reason": "replacement checkpoint accepted",
               "evidence_refs": checkpoint_evidence(), "metadata": metadata}),
    );
    s
}

#[test]
fn hand_built_reservation_is_repaired_from_its_exact_child_proof() {
    let s = reserved(json!({"replacement_agent_id": "agent-7",
                            "replacement_write_scope": ["src/runtime/core"]}));
    let bound = json!([{"kind": "checkpoint", "summary": "checkpoint 3 verified",
                        "checksum": CHECKPOINT_DIGEST}]);
    s.refused(
        || s.lineage("replacement-repair", "build", "build-9", &bound),
        5,
        "replacement reservation does not match",
    );
    s.refused(
        || {
            s.lineage(
                "replacement-repair",
                "build",
                "build-2",
                &json!([{"kind": "checkpoint", "summary": "s", "checksum": "f".repeat(64)}]),
            )
        },
        2,
        "checkpoint verification evidence is missing",
    );
    s.refused(
        || s.lineage("replacement-block", "build", "build-9", &bound),
        5,
        "replacement reservation does not match",
    );
    let out = s
        .lineage("replacement-repair", "build", "build-2", &bound)
        .assert_ok();
    assert_eq!(out["operation"], "replacement-repair");
    let child = s.lane_cache("build-2");
    assert_eq!(child["agent_id"], "agent-7");
    assert_eq!(child["write_scope"], json!(["src/runtime/core"]));
    assert_eq!(child["parent_lane_id"], "build");
    assert_eq!(child["updated_at"], "2026-07-14T01:40:00Z");
    s.verify();
    let last: Value = serde_json::from_str(s.lines().last().unwrap()).unwrap();
    assert_eq!(last["event_type"], "transaction_committed");
    assert_eq!(
        last["metadata"]["intents"][0]["metadata"]["checkpoint_digest"],
        CHECKPOINT_DIGEST
    );
}

#[test]
fn a_reservation_for_the_interrupted_agent_is_not_repaired() {
    // Fencing: recreating the child for agent-1 would hand the lane back to
    // the agent the replacement fenced off. Blocking stays possible.
    let s = reserved(json!({"replacement_agent_id": "agent-1"}));
    let bound = json!([{"kind": "checkpoint", "summary": "s", "checksum": CHECKPOINT_DIGEST}]);
    s.refused(
        || s.lineage("replacement-repair", "build", "build-2", &bound),
        5,
        "reservation does not fence the interrupted agent; block it explicitly",
    );
    s.lineage("replacement-block", "build", "build-2", &bound)
        .assert_ok();
    let original = s.lane_cache("build");
    assert_eq!(original["state"], "blocked");
    s.verify();
    // The block binds the original's evidence (the reassign checkpoint).
    let last: Value = serde_json::from_str(s.lines().last().unwrap()).unwrap();
    assert_eq!(last["metadata"]["checkpoint_digest"], CHECKPOINT_DIGEST);
    assert_eq!(
        last["reason"],
        "incomplete replacement cannot be safely recreated"
    );
}

#[test]
fn lineage_commands_check_ids_and_time_before_the_state() {
    let s = interrupted();
    let ev = s.file("ev.json", &json!([{"kind": "k", "summary": "s"}]));
    for command in [
        "replacement-close",
        "replacement-repair",
        "replacement-block",
    ] {
        let run = |lane: &str, replacement: &str, at: &str, evidence: &Path| {
            s.cmd(
                command,
                &s.owner(),
                &[
                    "--lane-id",
                    lane,
                    "--replacement-lane-id",
                    replacement,
                    "--at",
                    at,
                    "--evidence",
                    evidence.to_str().unwrap(),
                ],
            )
        };
        let at = "2026-07-14T01:40:00Z";
        s.refused(
            || run("../build", "build-2", at, &ev),
            2,
            "lane id must match the identifier contract",
        );
        s.refused(
            || run("build", "", at, &ev),
            2,
            "replacement lane id must match the identifier contract",
        );
        s.refused(
            || run("build", "build-2", "2026-07-14T01:40:00+00:00", &ev),
            2,
            "timestamp must be UTC ISO-8601 ending in Z",
        );
        let empty = s.file("empty.json", &json!([]));
        s.refused(
            || run("build", "build-2", at, &empty),
            2,
            "lifecycle transition requires evidence",
        );
        // The lane is interrupted, not replaced.
        let message = match command {
            "replacement-close" => "original lane is not awaiting lineage close",
            "replacement-repair" => "lane has no repairable replacement",
            _ => "lane has no incomplete replacement",
        };
        s.refused(|| run("build", "build-2", at, &ev), 5, message);
        // --at is required by the parser.
        let e = s
            .cmd(
                command,
                &s.owner(),
                &[
                    "--lane-id",
                    "build",
                    "--replacement-lane-id",
                    "build-2",
                    "--evidence",
                    ev.to_str().unwrap(),
                ],
            )
            .assert_error(2, "contract_error");
        assert!(e["message"].as_str().unwrap().contains("--at"), "{e}");
    }
}

/// The reference repairs a reservation for the interrupted agent itself
/// (its replacement-repair transaction, which ours refuses above); our
/// replay records it as a breach of our rule (`contracts/rules.md`).
#[test]
fn an_unfenced_repair_by_another_writer_is_a_breach() {
    let s = reserved(json!({"replacement_agent_id": "agent-1"}));
    let bound = json!([{"kind": "checkpoint", "summary": "s", "checksum": CHECKPOINT_DIGEST}]);
    let at = "2026-07-14T01:40:00Z";
    let repaired = json!({"agent_id": "agent-1", "event_type": "replacement_repaired",
        "evidence_refs": bound, "from_state": "replaced", "lane_id": "build",
        "metadata": {"checkpoint_digest": CHECKPOINT_DIGEST, "original_lane_id": "build",
                     "owner_epoch": 1, "replacement_lane_id": "build-2"},
        "owner_epoch": 1, "reason": null, "timestamp": at, "to_state": "replaced"});
    let created = json!({"agent_id": "agent-1", "event_type": "lane_created",
        "evidence_refs": bound, "from_state": null, "lane_id": "build-2",
        "metadata": {"assignment": "Resume build from checkpoint 3",
                     "command_deadline": "2026-07-14T01:30:00Z", "fallback": "main session",
                     "owner_epoch": 1, "parent_lane_id": "build", "replacement_count": 1,
                     "startup_ack_deadline": "2026-07-14T01:11:30Z",
                     "write_scope": ["src/runtime"]},
        "owner_epoch": 1, "reason": null, "timestamp": at, "to_state": "pending"});
    s.append(
        "transaction_committed",
        json!({"timestamp": at, "evidence_refs": [],
               "metadata": {"intents": [repaired, created]}}),
    );
    let verify = s.verify();
    assert_eq!(verify["breaches"][0]["rule"], "unfenced_repair", "{verify}");
    assert_eq!(verify["breaches"].as_array().unwrap().len(), 1, "{verify}");
}
