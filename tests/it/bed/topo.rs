//! Helpers for the topology and completion suites (issue 4): a run driven
//! through the real binary, typed refusals that must leave the state root
//! byte-identical, hand-sealed events for states our CLI refuses to write,
//! and the replay of the reference's recorded commands on a copy of its
//! own state cut back to the line before each command.
#![allow(dead_code)]

use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::store::run::{AckHead, RunDir};
use serde_json::{Value, json};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use crate::bed::{self as common, Flow, Output};

pub const T0: &str = "2026-07-14T01:00:00Z";

/// `[{"kind": "test", "summary": summary}]`.
pub fn ev(summary: &str) -> Value {
    json!([{"kind": "test", "summary": summary}])
}

/// A component as `topology-register` takes it (no coverage).
pub fn component(id: &str, owner: &str, required: bool, checks: &[&str], deps: &[&str]) -> Value {
    json!({
        "id": id, "required": required, "description": format!("Component {id}"),
        "owner_lane": owner, "required_checks": checks, "dependencies": deps,
        "evidence_refs": [], "coverage_state": "missing",
    })
}

/// A run made by our binary in a temp dir.
pub struct Run {
    pub tmp: tempfile::TempDir,
    pub flow: Flow,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub run_id: String,
    pub dir: PathBuf,
    files: Cell<u32>,
}

impl Run {
    /// `init` approving `components`, not yet approved.
    pub fn planned(components: &[&str]) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let flow = Flow::new(tmp.path());
        let root = tmp.path().join("state");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let owner = root.join("handles/main.owner");
        let mut argv: Vec<String> = vec![
            "--state-root".into(),
            root.to_str().unwrap().into(),
            "init".into(),
            "--workflow-type".into(),
            "A".into(),
            "--repo-root".into(),
            repo.to_str().unwrap().into(),
            "--owner-file".into(),
            owner.to_str().unwrap().into(),
        ];
        for c in components {
            argv.push("--component".into());
            argv.push((*c).into());
        }
        let run_id = flow.run(&argv).assert_ok()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        let dir = root.join("runs").join(&run_id);
        Run {
            tmp,
            flow,
            root,
            repo,
            run_id,
            dir,
            files: Cell::new(0),
        }
    }

    /// `init`, `run-approve`, `run-start`.
    pub fn running(components: &[&str]) -> Run {
        let run = Run::planned(components);
        run.cmd("run-approve", &ev("approved"), &["--at", T0])
            .assert_ok();
        run.cmd("run-start", &ev("started"), &["--at", T0])
            .assert_ok();
        run
    }

    pub fn owner(&self) -> PathBuf {
        self.root.join("handles/main.owner")
    }

    /// Write `value` to a fresh input file outside the state root.
    pub fn file(&self, value: &Value) -> String {
        let n = self.files.get() + 1;
        self.files.set(n);
        let path = self.tmp.path().join(format!("input-{n}.json"));
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `--state-root <root>` + argv.
    pub fn raw(&self, argv: &[&str]) -> Output {
        let mut all = vec!["--state-root", self.root.to_str().unwrap()];
        all.extend_from_slice(argv);
        self.flow.run(&all)
    }

    /// `command --run-id --owner-file --evidence <file>` plus `extra`.
    pub fn cmd(&self, command: &str, evidence: &Value, extra: &[&str]) -> Output {
        let evidence = self.file(evidence);
        let owner = self.owner();
        let mut argv = vec![
            command,
            "--run-id",
            &self.run_id,
            "--owner-file",
            owner.to_str().unwrap(),
            "--evidence",
            &evidence,
        ];
        argv.extend_from_slice(extra);
        self.raw(&argv)
    }

    /// A command with `--input <value>`.
    pub fn input(&self, command: &str, evidence: &Value, input: &Value) -> Output {
        let input = self.file(input);
        self.cmd(command, evidence, &["--input", &input])
    }

    pub fn lane_step(&self, command: &str, lane: &str, evidence: &Value, extra: &[&str]) -> Output {
        let agent = format!("agent-{lane}");
        let mut argv = vec!["--lane-id", lane, "--agent-id", &agent, "--at", T0];
        argv.extend_from_slice(extra);
        self.cmd(command, evidence, &argv)
    }

    /// A running lane `lane` (agent `agent-<lane>`, empty write scope).
    pub fn running_lane(&self, lane: &str, parent: Option<&str>) {
        let mut input = json!({
            "lane_id": lane, "agent_id": format!("agent-{lane}"),
            "assignment": format!("Work on {lane}"), "write_scope": [],
            "fallback": "main session", "observed_at": T0,
            "startup_ack_deadline": "2026-07-14T01:00:30Z",
            "command_deadline": "2026-07-14T01:10:00Z",
        });
        if let Some(parent) = parent {
            input["parent_lane_id"] = json!(parent);
        }
        self.input("lane-create", &ev(&format!("assign {lane}")), &input)
            .assert_ok();
        self.lane_step("lane-start", lane, &ev(&format!("spawn {lane}")), &[])
            .assert_ok();
        self.lane_step("startup-ack", lane, &ev(&format!("ack {lane}")), &[])
            .assert_ok();
    }

    /// Completes a running lane with `evidence` (no changed paths).
    pub fn complete_lane(&self, lane: &str, evidence: &Value) -> Output {
        let changed = self.file(&json!([]));
        self.lane_step(
            "lane-complete",
            lane,
            evidence,
            &["--changed-paths", &changed],
        )
    }

    pub fn fail_lane(&self, lane: &str, evidence: &Value) {
        self.lane_step("lane-fail", lane, evidence, &["--reason", "review failed"])
            .assert_ok();
    }

    /// A lane created, started and completed with `evidence`.
    pub fn completed_lane(&self, lane: &str, parent: Option<&str>, evidence: &Value) {
        self.running_lane(lane, parent);
        self.complete_lane(lane, evidence).assert_ok();
    }

    /// A heartbeat of a running lane (its evidence becomes liveness evidence).
    pub fn heartbeat(&self, lane: &str, evidence: &Value) {
        let input = json!({
            "lane_id": lane, "agent_id": format!("agent-{lane}"),
            "observed_at": "2026-07-14T01:00:05Z",
            "silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": "still working",
        });
        self.input("heartbeat", evidence, &input).assert_ok();
    }

    pub fn register(&self, components: &Value) -> Output {
        self.input("topology-register", &ev("topology approved"), components)
    }

    pub fn check(
        &self,
        component: &str,
        check: &str,
        passed: bool,
        reason: Option<&str>,
        evidence: &Value,
    ) -> Output {
        let mut input = json!({"component_id": component, "check_id": check, "passed": passed});
        if let Some(reason) = reason {
            input["reason"] = json!(reason);
        }
        self.input("check-result", evidence, &input)
    }

    pub fn cover(&self, component: &str, evidence: &Value) -> Output {
        self.input(
            "component-evidence",
            evidence,
            &json!({"component_id": component}),
        )
    }

    pub fn complete(&self, evidence: &Value) -> Output {
        self.cmd("complete", evidence, &[])
    }

    pub fn resolve(&self, lane: &str, resolver: &str, evidence: &Value) -> Output {
        self.cmd(
            "lane-resolve",
            evidence,
            &[
                "--lane-id",
                lane,
                "--resolution-lane-id",
                resolver,
                "--at",
                "2026-07-14T01:30:00Z",
            ],
        )
    }

    pub fn completion(&self) -> Value {
        self.raw(&["completion-check", "--run-id", &self.run_id])
            .assert_ok()
    }

    pub fn verify(&self) -> Value {
        self.raw(&["verify", "--run-id", &self.run_id]).assert_ok()
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("receipt.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The coordinator state our last mutation cached in `run.json` (tests
    /// only look at it; commands never read it back).
    pub fn cached_state(&self) -> Value {
        let cache: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("run.json")).unwrap())
                .unwrap();
        cache["coordinator"]["state"].clone()
    }

    /// Run `out`, assert the typed refusal (exit status, error code,
    /// exact message, `next_command`, `retryable`), and that nothing under
    /// the state root changed.
    #[track_caller]
    pub fn refused(
        &self,
        out: impl FnOnce() -> Output,
        code: i32,
        error: &str,
        message: &str,
    ) -> Value {
        let before = common::snapshot(&self.root);
        let e = out().assert_error(code, error);
        assert_eq!(e["message"], message, "{e}");
        let next = match code {
            3 => Some("receipt-diagnose"),
            5 => Some("resume-check"),
            6 => Some("completion-check"),
            7 => Some("init"),
            _ => None,
        };
        match next {
            Some(next) => assert_eq!(e["next_command"], next, "{e}"),
            None => assert!(e.get("next_command").is_none(), "{e}"),
        }
        assert_eq!(
            before,
            common::snapshot(&self.root),
            "a refusal changed the state root"
        );
        e
    }

    /// Append hand-sealed events after the head (as another writer would:
    /// states our own commands refuse to write) and record the head.
    pub fn append_sealed(&self, events: &[(&str, Value)]) {
        let mut last = self.events().pop().unwrap();
        let receipt = self.dir.join("receipt.jsonl");
        let mut bytes = std::fs::read(&receipt).unwrap();
        for (event_type, fields) in events {
            let text = |k: &str| fields.get(k).and_then(Value::as_str).map(str::to_string);
            let sealed = EventDraft {
                run_id: self.run_id.clone(),
                lane_id: text("lane_id"),
                agent_id: text("agent_id"),
                sequence: last["sequence"].as_u64().unwrap() + 1,
                event_type: event_type.to_string(),
                from_state: text("from_state"),
                to_state: text("to_state"),
                timestamp: text("timestamp").unwrap_or_else(|| T0.into()),
                owner_token: last["owner_token"].as_str().unwrap().into(),
                manifest_hash: last["manifest_hash"].as_str().unwrap().into(),
                previous_checksum: last["checksum"].as_str().unwrap().into(),
                evidence_refs: fields.get("evidence_refs").cloned().unwrap_or(ev("sealed")),
                reason: text("reason"),
                metadata: Some(fields["metadata"].clone()),
            }
            .seal();
            bytes.extend_from_slice(&sealed.line);
            last = Value::Object(sealed.event);
        }
        std::fs::write(&receipt, &bytes).unwrap();
        RunDir::new(&self.root, &self.run_id)
            .write_head(&AckHead {
                sequence: last["sequence"].as_u64().unwrap(),
                checksum: last["checksum"].as_str().unwrap().into(),
                byte_length: bytes.len() as u64,
            })
            .unwrap();
    }
}

// ------------------------------------------------------------ fixtures

/// One recorded CLI step of a reference scenario.
pub struct Recorded {
    pub scenario: PathBuf,
    pub step: Value,
    /// Receipt lines before the step (the last sequence printed before it).
    pub before: usize,
}

/// Every recorded step of `operations` in every scenario, with the receipt
/// length it ran on. Only single-run scenarios are used.
pub fn recorded_steps(operations: &[&str]) -> Vec<Recorded> {
    let mut out = Vec::new();
    for scenario in common::scenarios() {
        let commands = scenario.join("commands.jsonl");
        let Ok(text) = std::fs::read_to_string(&commands) else {
            continue;
        };
        if std::fs::read_dir(scenario.join("state/runs"))
            .unwrap()
            .count()
            != 1
        {
            continue;
        }
        let mut sequence = 0usize;
        for line in text.lines() {
            let step: Value = serde_json::from_str(line).unwrap();
            if step["kind"] != "cli" {
                continue;
            }
            let operation = step["argv"][2].as_str().unwrap_or("");
            if operations.contains(&operation) {
                out.push(Recorded {
                    scenario: scenario.clone(),
                    step: step.clone(),
                    before: sequence,
                });
            }
            if let Some(stdout) = step["stdout"].as_str()
                && let Ok(printed) = serde_json::from_str::<Value>(stdout)
                && let Some(n) = printed["sequence"].as_u64()
            {
                sequence = n as usize;
            }
        }
    }
    out
}

/// The reference's receipt lines of a single-run scenario.
pub fn fixture_lines(scenario: &Path) -> Vec<String> {
    let runs = scenario.join("state/runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    std::fs::read_to_string(run.path().join("receipt.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A copy of the scenario's state with the receipt cut to `keep` lines and
/// the caches (which describe later lines) dropped. Returns (tmp, root,
/// run dir).
pub fn cut_state(scenario: &Path, keep: usize) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    common::prepare_state(scenario, &root);
    let run_dir = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let lines = fixture_lines(scenario);
    let text: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(run_dir.join("receipt.jsonl"), text).unwrap();
    let _ = std::fs::remove_file(run_dir.join("run.json"));
    if let Ok(lanes) = std::fs::read_dir(run_dir.join("lanes")) {
        for lane in lanes.flatten() {
            std::fs::remove_file(lane.path()).unwrap();
        }
    }
    common::set_modes(&root);
    (tmp, root, run_dir)
}
