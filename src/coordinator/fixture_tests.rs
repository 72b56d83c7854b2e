//! Oracle test: replaying every verifiable reference receipt must give exactly
//! the coordinator state and lane records the reference wrote beside it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{CoordinatorState, ReplayPolicy, RunOrigin, replay};
use crate::receipt::canonical;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reference-runs");

/// Scenarios whose receipts verify (the damaged 20-26, 29 and 30 do not).
const SCENARIOS: [&str; 15] = [
    "01-init-only",
    "02-happy-path-complete",
    "03-multi-lane-parallel",
    "04-stall-replace",
    "05-failed-lane-resolved",
    "06-resume-epoch",
    "07-handoff",
    "08-recovering-run",
    "09-terminal-states",
    "10-replacement-incomplete",
    "11-replacement-repaired",
    "12-replacement-blocked",
    "13-liveness-paths",
    "27-deleted-last-line",
    "28-padded-line-at-limit",
];

fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(FIXTURES);
    assert!(
        dir.join("README.md").is_file(),
        "reference fixtures are missing at {} (they are part of the repository)",
        dir.display()
    );
    dir
}

fn read_json(path: &Path) -> Value {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("invalid JSON in {}: {e}", path.display()))
}

fn read_receipt(path: &Path) -> Vec<Value> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

fn run_dirs(scenario: &str) -> Vec<PathBuf> {
    let runs = fixtures_dir().join(scenario).join("state/runs");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", runs.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "{scenario}: no runs");
    dirs
}

/// Parses `manifest.json` into the replay inputs.
fn origin_and_policy(run_dir: &Path) -> (RunOrigin, ReplayPolicy) {
    let mut manifest = read_json(&run_dir.join("manifest.json"));
    let run = manifest
        .as_object_mut()
        .and_then(|m| m.remove("_run"))
        .expect("manifest has _run");
    let origin = RunOrigin::from_run_metadata(&run).expect("valid _run");
    (origin, ReplayPolicy::from_contract(&manifest))
}

fn replay_run(run_dir: &Path) -> (CoordinatorState, Vec<Value>) {
    let (origin, policy) = origin_and_policy(run_dir);
    let events = read_receipt(&run_dir.join("receipt.jsonl"));
    let state = replay(&origin, &policy, &events)
        .unwrap_or_else(|e| panic!("{}: replay failed: {e}", run_dir.display()));
    (state, events)
}

fn lane_files(run_dir: &Path) -> BTreeMap<String, Value> {
    let lanes = run_dir.join("lanes");
    if !lanes.is_dir() {
        return BTreeMap::new(); // git keeps no empty directory
    }
    fs::read_dir(&lanes)
        .expect("lanes dir")
        .map(|entry| entry.expect("lane entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let id = path.file_stem().unwrap().to_string_lossy().into_owned();
            (id, read_json(&path))
        })
        .collect()
}

/// Compares canonically; on failure names the first differing JSON path.
fn assert_same(context: &str, actual: &Value, expected: &Value) {
    if canonical::to_string(actual) != canonical::to_string(expected) {
        let detail = first_difference("$", actual, expected);
        panic!("{context}: replayed JSON differs from the reference at {detail}");
    }
}

fn first_difference(path: &str, actual: &Value, expected: &Value) -> String {
    if let (Value::Object(a), Value::Object(e)) = (actual, expected) {
        for key in a.keys().chain(e.keys()) {
            match (a.get(key), e.get(key)) {
                (Some(x), Some(y)) if canonical::to_string(x) == canonical::to_string(y) => {}
                (Some(x), Some(y)) => return first_difference(&format!("{path}.{key}"), x, y),
                (x, y) => {
                    return format!(
                        "{path}.{key}: replayed {} / reference {}",
                        x.map_or("<absent>".into(), canonical::to_string),
                        y.map_or("<absent>".into(), canonical::to_string)
                    );
                }
            }
        }
    }
    format!(
        "{path}: replayed {} / reference {}",
        canonical::to_string(actual),
        canonical::to_string(expected)
    )
}

/// The `run.json` summary keys must agree with the replay too.
fn assert_summary(context: &str, state: &CoordinatorState, run_json: &Value) {
    assert_eq!(run_json["state"], state.run_state(), "{context}: state");
    assert_eq!(
        run_json["last_sequence"].as_u64(),
        Some(state.last_sequence()),
        "{context}: last_sequence"
    );
    assert_eq!(
        run_json["last_checksum"],
        state.last_checksum(),
        "{context}: last_checksum"
    );
    assert_eq!(
        run_json["last_event_type"].as_str(),
        state.last_event_type(),
        "{context}: last_event_type"
    );
    assert_eq!(
        run_json["updated_at"].as_str(),
        state.updated_at(),
        "{context}: updated_at"
    );
}

fn check_run(scenario: &str, run_dir: &Path) -> usize {
    let context = format!(
        "{scenario}/{}",
        run_dir.file_name().unwrap().to_string_lossy()
    );
    let (state, events) = replay_run(run_dir);
    let run_json = read_json(&run_dir.join("run.json"));
    let last = events.last().expect("receipt has events");
    assert_eq!(state.last_sequence(), events.len() as u64, "{context}");
    assert_eq!(state.last_checksum(), last["checksum"], "{context}");

    let Some(cached) = run_json.get("coordinator") else {
        // Simple run.json (init only): no coordinator snapshot to compare.
        assert_summary(&context, &state, &run_json);
        assert_eq!(state.run_state(), "planned", "{context}");
        assert!(state.lanes().is_empty(), "{context}");
        return 0;
    };
    assert_eq!(cached["cache_version"], 1, "{context}: cache_version");
    let mut expected = cached["state"].clone();
    let cached_sequence = expected["last_sequence"].as_u64().expect("cached sequence");

    if cached_sequence != state.last_sequence() {
        // Only 27 is stale: its receipt lost its last line (the live report
        // binding of 02), which the caches copied from 02 still reflect.
        assert_eq!(scenario, "27-deleted-last-line", "{context}: stale cache");
        assert_eq!(cached_sequence, state.last_sequence() + 1, "{context}");
        assert_eq!(expected["last_event_type"], "live_report_recorded");
        let expected = expected.as_object_mut().unwrap();
        let reports = expected["reports"].as_object_mut().unwrap();
        assert!(reports.remove("live_apply").is_some(), "{context}");
        expected.insert("last_sequence".into(), last["sequence"].clone());
        expected.insert("last_checksum".into(), last["checksum"].clone());
        expected.insert("last_event_type".into(), last["event_type"].clone());
        expected.insert("updated_at".into(), last["timestamp"].clone());
    } else {
        assert_summary(&context, &state, &run_json);
    }
    assert_same(
        &format!("{context} coordinator.state"),
        &state.public_json(),
        &expected,
    );

    let replayed = state.lane_records();
    let files = lane_files(run_dir);
    assert_eq!(
        replayed.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>(),
        "{context}: lane ids"
    );
    for (id, record) in &replayed {
        assert_same(&format!("{context} lanes/{id}.json"), record, &files[id]);
        // The lane record in run.json is the same object.
        assert_same(
            &format!("{context} state.lanes.{id}"),
            record,
            &state.public_json()["lanes"][id],
        );
    }
    replayed.len()
}

#[test]
fn replay_matches_every_reference_cache() {
    let mut runs = 0;
    let mut lanes = 0;
    for scenario in SCENARIOS {
        let dirs = run_dirs(scenario);
        if scenario == "09-terminal-states" {
            assert_eq!(
                dirs.len(),
                3,
                "09 holds a cancelled, a blocked and a failed run"
            );
        }
        for dir in dirs {
            lanes += check_run(scenario, &dir);
            runs += 1;
        }
    }
    assert_eq!(runs, 17, "runs checked");
    assert_eq!(lanes, 31, "lane records checked");
}

#[test]
fn terminal_states_scenario_has_the_three_terminal_runs() {
    let mut states: Vec<String> = run_dirs("09-terminal-states")
        .iter()
        .map(|dir| replay_run(dir).0.run_state().to_owned())
        .collect();
    states.sort();
    assert_eq!(states, ["blocked", "cancelled", "failed"]);
}

#[test]
fn replay_stops_at_the_first_bad_event_of_a_reference_receipt() {
    // Re-applying a verified line (a duplicated line) is a sequence error.
    let dir = &run_dirs("02-happy-path-complete")[0];
    let (origin, policy) = origin_and_policy(dir);
    let events = read_receipt(&dir.join("receipt.jsonl"));
    let mut duplicated: Vec<&Value> = events.iter().take(6).collect();
    duplicated.push(&events[5]);
    let error = replay(&origin, &policy, duplicated).unwrap_err();
    assert_eq!(error.sequence, Some(6));
    assert_eq!(error.message, "sequence is not contiguous");
    assert_eq!(
        error.to_string(),
        "coordinator corruption at sequence 6: sequence is not contiguous"
    );
}
