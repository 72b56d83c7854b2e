//! Shared pieces of the reliability suite (docs/reliability.md): the size of
//! a run (quick for CI, full for `scripts/torture.sh`), a seeded random
//! source, the figures each scenario reports, and a run with running lanes
//! built through the real binary (tree snapshots are the bed's).
//!
//! Sizes: `BLUETAPE_TORTURE=full` selects the full counts. Figures: every
//! scenario prints `[figure] scenario | case | count | result` on stderr
//! and, with `BLUETAPE_TORTURE_REPORT=<dir>`, appends it as a JSON line to
//! `<dir>/<test binary>.jsonl`; counts are what the test measured.
#![allow(dead_code)]

mod concurrency;
mod crash;
mod damage;
mod forgery;
mod hostile_fs;
mod hostile_input;
mod readonly;

use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub use crate::bed::{Entry, tree, tree_diff};
use crate::bed::{Flow, Output};

/// True for the full torture size.
pub fn full() -> bool {
    std::env::var("BLUETAPE_TORTURE").is_ok_and(|v| v == "full")
}

/// `quick` in CI, `full` under `BLUETAPE_TORTURE=full`.
pub fn size(quick: u64, full_size: u64) -> u64 {
    if full() { full_size } else { quick }
}

/// The seed of every random choice (`BLUETAPE_TORTURE_SEED`, default fixed).
pub fn seed() -> u64 {
    std::env::var("BLUETAPE_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0008_5eed)
}

/// splitmix64: small, seeded, good enough to place kills.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Counts by name for a figure: `name<sep>count`, comma-separated.
pub fn counts(by_name: &std::collections::BTreeMap<&str, u64>, sep: &str) -> String {
    let listed: Vec<String> = by_name
        .iter()
        .map(|(k, v)| format!("{k}{sep}{v}"))
        .collect();
    listed.join(", ")
}

/// Report one measured figure.
pub fn figure(scenario: &str, case: &str, count: u64, result: &str) {
    eprintln!("[figure] {scenario} | {case} | {count} | {result}");
    let Some(dir) = std::env::var_os("BLUETAPE_TORTURE_REPORT") else {
        return;
    };
    use std::io::Write;
    let exe = std::env::current_exe().unwrap();
    let name = exe
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .split('-')
        .next()
        .unwrap()
        .to_string();
    let line = json!({"scenario": scenario, "case": case, "count": count, "result": result});
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&dir).join(format!("{name}.jsonl")))
        .unwrap();
    // One write per line: every area of the one test binary appends here.
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// The receipt lines of a run directory, LF included.
pub fn lines(receipt: &[u8]) -> Vec<&[u8]> {
    receipt.split_inclusive(|b| *b == b'\n').collect()
}

/// A run whose lanes are all running, built through the binary, with
/// helpers to append heartbeats with fresh evidence.
pub struct LaneRun {
    pub base: PathBuf,
    pub flow: Flow,
    pub root: PathBuf,
    pub run_id: String,
    pub owner: PathBuf,
    pub inputs: PathBuf,
}

pub const OBSERVED: &str = "2026-07-14T01:01:00Z";
pub const LEASE: &str = "2026-07-14T01:05:00Z";

impl LaneRun {
    /// `init` under `<base>/state` (which may already hold other runs),
    /// then approve, start, and create/start/ack each lane (agent
    /// `agent-<lane>`, command deadline far away).
    pub fn new(base: &Path, lanes: &[&str]) -> LaneRun {
        Self::new_with_owner(base, lanes, "main")
    }

    pub fn new_with_owner(base: &Path, lanes: &[&str], owner_name: &str) -> LaneRun {
        let flow = Flow::new(base);
        let root = base.join("state");
        let repo = base.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let inputs = base.join(format!("inputs-{owner_name}"));
        std::fs::create_dir_all(&inputs).unwrap();
        let owner = root.join("handles").join(format!("{owner_name}.owner"));
        let out = flow.run(&crate::bed::init_argv(
            &root,
            "A",
            &repo,
            &owner,
            &["runtime"],
        ));
        let run_id = out.assert_ok()["run_id"].as_str().unwrap().to_string();
        let run = LaneRun {
            base: base.to_path_buf(),
            flow,
            root,
            run_id,
            owner,
            inputs,
        };
        let evidence = run.input("setup-ev.json", &json!([{"kind": "plan", "summary": "go"}]));
        for command in ["run-approve", "run-start"] {
            run.mutation(command, &["--evidence".into(), evidence.clone().into()])
                .assert_ok();
        }
        for lane in lanes {
            let agent = format!("agent-{lane}");
            let input = run.input(
                &format!("lane-{lane}.json"),
                &json!({"lane_id": lane, "agent_id": agent, "assignment": "work",
                        "write_scope": [], "fallback": "main", "observed_at": "2026-07-14T01:00:00Z",
                        "startup_ack_deadline": "2026-07-14T01:00:30Z",
                        "command_deadline": "2099-01-01T00:00:00Z"}),
            );
            run.mutation(
                "lane-create",
                &[
                    "--evidence".into(),
                    evidence.clone().into(),
                    "--input".into(),
                    input.into(),
                ],
            )
            .assert_ok();
            for (command, at) in [
                ("lane-start", "2026-07-14T01:00:05Z"),
                ("startup-ack", "2026-07-14T01:00:06Z"),
            ] {
                run.mutation(
                    command,
                    &[
                        "--evidence".into(),
                        evidence.clone().into(),
                        "--lane-id".into(),
                        (*lane).into(),
                        "--agent-id".into(),
                        agent.clone().into(),
                        "--at".into(),
                        at.into(),
                    ],
                )
                .assert_ok();
            }
            run.input(
                &format!("beat-{lane}.json"),
                &json!({"lane_id": lane, "agent_id": agent, "observed_at": OBSERVED,
                        "silence_lease_deadline": LEASE, "reason": "alive"}),
            );
        }
        run
    }

    pub fn run_dir(&self) -> PathBuf {
        self.root.join("runs").join(&self.run_id)
    }

    pub fn receipt_path(&self) -> PathBuf {
        self.run_dir().join("receipt.jsonl")
    }

    pub fn receipt(&self) -> Vec<u8> {
        std::fs::read(self.receipt_path()).unwrap()
    }

    /// Write a JSON input file outside the state root.
    pub fn input(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.inputs.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    }

    /// `--state-root R <command> --run-id ID --owner-file O <extra>`.
    pub fn mutation_args(&self, command: &str, extra: &[OsString]) -> Vec<OsString> {
        let mut argv = self.read_args(command, &["--owner-file"]);
        argv.push(self.owner.clone().into());
        argv.extend_from_slice(extra);
        argv
    }

    pub fn mutation(&self, command: &str, extra: &[OsString]) -> Output {
        self.flow.run(&self.mutation_args(command, extra))
    }

    /// `--state-root R <command> --run-id ID <extra>` (read-only commands).
    pub fn read_args(&self, command: &str, extra: &[&str]) -> Vec<OsString> {
        crate::bed::read_argv(&self.root, command, &self.run_id, extra)
            .into_iter()
            .map(OsString::from)
            .collect()
    }

    pub fn read(&self, command: &str, extra: &[&str]) -> Output {
        self.flow.run(&self.read_args(command, extra))
    }

    /// A heartbeat on `lane` whose evidence (summary `beat <tag>`) has never
    /// been used: the argv, ready to run.
    pub fn heartbeat_args(&self, lane: &str, tag: &str) -> Vec<OsString> {
        let evidence = self.input(
            &format!("ev-{lane}-{tag}.json"),
            &json!([{"kind": "log", "summary": format!("beat {tag}")}]),
        );
        self.mutation_args(
            "heartbeat",
            &[
                "--evidence".into(),
                evidence.into(),
                "--input".into(),
                self.inputs.join(format!("beat-{lane}.json")).into(),
            ],
        )
    }

    /// A run of [`LaneRun::new`] in a fresh temp dir (its canonical path
    /// the base): the temp dir, which must outlive the run, and the base.
    pub fn in_temp(lanes: &[&str]) -> (tempfile::TempDir, PathBuf, LaneRun) {
        let (tmp, base) = crate::bed::canonical_tempdir();
        let run = LaneRun::new(&base, lanes);
        (tmp, base, run)
    }

    /// A heartbeat on `lane` (see [`LaneRun::heartbeat_args`]) that must
    /// succeed.
    pub fn beat(&self, lane: &str, tag: &str) {
        let out = self
            .command(&self.heartbeat_args(lane, tag))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// The binary with `argv` in the bed's pinned environment, to spawn.
    pub fn command(&self, argv: &[OsString]) -> Command {
        self.flow.command(argv)
    }

    /// The binary with `argv` started, its stdout and stderr piped.
    pub fn spawn_piped(&self, argv: &[OsString]) -> Child {
        self.command(argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// The evidence summary of a heartbeat line (`beat <tag>`), if it is one.
pub fn beat_tag(event: &Value) -> Option<String> {
    let intents = event["metadata"]["intents"].as_array()?;
    let summary = intents.first()?["evidence_refs"][0]["summary"].as_str()?;
    summary.strip_prefix("beat ").map(str::to_string)
}
