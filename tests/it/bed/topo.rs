//! The replay of the reference's recorded commands (topology and completion
//! suites) on a copy of its own state cut back to the line before each
//! command.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::bed as common;

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
    let run_dir = root.join("runs").join(common::first_run_id(&root));
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
