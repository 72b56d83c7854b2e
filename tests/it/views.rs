//! The views `status`, `log` and `report` (views.md; contracts/commands.md
//! "Views"). `status` must never disagree with `liveness-check`,
//! `completion-check` and `resume-check` (checked on every reference fixture
//! and on runs built here, at several instants); every view is read-only
//! (byte, mode and mtime identical, and it works on a write-protected copy);
//! `log` prints only verified events; bad input is the usual one-line
//! envelope.

use crate::bed as common;
use crate::reliability::LaneRun;
use common::{Flow, Output, run_ids};
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The instants the parity checks judge at: before any deadline, after the
/// first leases ran out, an hour on, far in the future.
const INSTANTS: [&str; 4] = [
    "2026-07-14T01:00:10Z",
    "2026-07-14T01:06:00Z",
    "2026-07-14T02:00:00Z",
    "2099-06-01T00:00:00Z",
];

/// Hostile strings a receipt may carry in evidence summaries and reasons.
const HOSTILE: [&str; 6] = [
    "<script>alert('x')</script>",
    "<img src=x onerror=alert(1)>",
    "</svg><b id=\"injected\">bold</b>",
    "ansi \u{1b}[31mred\u{1b}[0m bell\u{7} nul\u{0} end",
    "rtl \u{202e}gnp.exe\u{202c} isolate \u{2066}x\u{2069}",
    "quote \" amp & apos ' lt < gt >",
];

fn os(items: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    common::args(items)
}

fn read(flow: &Flow, root: &Path, args: &[&str]) -> Output {
    let mut argv: Vec<OsString> = vec!["--state-root".into(), root.into()];
    argv.extend(args.iter().map(OsString::from));
    flow.run(&argv)
}

/// A temp dir (its canonical path, the base) and a reader's flow working
/// in `<base>/reader`; the dir must outlive the flow's calls.
fn reader() -> (tempfile::TempDir, PathBuf, Flow) {
    let (tmp, base) = crate::bed::canonical_tempdir();
    let flow = Flow::new(&base.join("reader"));
    (tmp, base, flow)
}

/// `status --at <at> --format json` of `run`, which must answer.
fn status_json(run: &LaneRun, at: &str) -> Value {
    run.read("status", &["--at", at, "--format", "json"])
        .assert_ok()
}

/// Every reference fixture, prepared under `base`.
fn fixture_roots(base: &Path) -> Vec<(String, PathBuf)> {
    common::fixture_states(&base.join("fixtures"))
}

/// A run built here: two running lanes with heartbeats, one of them stalled
/// (stall-record with liveness-check's own answer), and a probe sent.
fn stalled_run(base: &Path) -> LaneRun {
    let run = LaneRun::new(base, &["w0", "w1"]);
    for tag in ["a", "b"] {
        run.flow.run(&run.heartbeat_args("w0", tag)).assert_ok();
    }
    let decision = run.read(
        "liveness-check",
        &["--lane-id", "w1", "--at", "2026-07-14T01:06:00Z"],
    );
    let decision = decision.assert_ok();
    assert_eq!(decision["action"], "suspect_stall");
    let decision_value = json!({"action": decision["action"], "reason": decision["reason"]});
    let decision = run.input("decision.json", &decision_value);
    let sum = bluetape_flow::receipt::canonical::digest(&decision_value);
    let evidence = run.input(
        "stall-ev.json",
        &json!([{"kind": "liveness", "summary": "quiet", "checksum": sum}]),
    );
    let lane = |at: &str| -> Vec<OsString> {
        os(&[
            &"--evidence",
            &evidence,
            &"--lane-id",
            &"w1",
            &"--agent-id",
            &"agent-w1",
            &"--at",
            &at,
        ])
    };
    let mut args = lane("2026-07-14T01:06:00Z");
    args.extend(os(&[
        &"--reason",
        &"no fresh evidence",
        &"--decision",
        &decision,
    ]));
    run.mutation("stall-record", &args).assert_ok();
    let mut args = lane("2026-07-14T01:06:10Z");
    args.extend(os(&[&"--deadline", &"2026-07-14T01:07:00Z"]));
    run.mutation("probe-sent", &args).assert_ok();
    run
}

/// A gated run (frozen approval policy) waiting for its approver.
fn gated_run(base: &Path, root: &Path) -> String {
    let flow = Flow::new(base);
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let policy = base.join("policy.json");
    std::fs::write(&policy, r#"{"required_approver": "alice"}"#).unwrap();
    let owner = root.join("handles/gated.owner");
    let out = flow.run_env(
        &os(&[
            &"--state-root",
            &root,
            &"init",
            &"--workflow-type",
            &"A",
            &"--repo-root",
            &repo,
            &"--owner-file",
            &owner,
            &"--component",
            &"runtime",
            &"--approval-policy",
            &policy,
        ]),
        &[("BLUETAPE_INITIATED_BY", "agent-1")],
    );
    out.assert_ok()["run_id"].as_str().unwrap().to_string()
}

/// A copy of the damaged fixture 20 with its recovery run made.
fn recovered_root(base: &Path) -> (PathBuf, String, String) {
    let scenario = common::fixtures_dir().join("20-bitflip-mid");
    let root = base.join("recovered");
    common::prepare_state(&scenario, &root);
    let damaged = run_ids(&root).remove(0);
    let flow = Flow::new(base);
    let diagnosis = read(&flow, &root, &["receipt-diagnose", "--run-id", &damaged]);
    assert_eq!(diagnosis.code, 0, "{diagnosis:?}");
    let input = base.join("diagnosis.json");
    std::fs::write(&input, &diagnosis.stdout).unwrap();
    let evidence = base.join("recovery-ev.json");
    std::fs::write(
        &evidence,
        r#"[{"kind": "user_approval", "summary": "user approved a recovery run"}]"#,
    )
    .unwrap();
    let out = flow.run(&os(&[
        &"--state-root",
        &root,
        &"recovery-run-create",
        &"--run-id",
        &damaged,
        &"--input",
        &input,
        &"--owner-file",
        &root.join("handles/recovery.owner"),
        &"--evidence",
        &evidence,
    ]));
    let recovery = out.assert_ok()["new_run_id"].as_str().unwrap().to_string();
    (root, damaged, recovery)
}

/// `completion-check`'s own keys: what `status` must carry in `completion`.
const COMPLETION_KEYS: [&str; 8] = [
    "complete",
    "failed_checks",
    "missing_components",
    "missing_lanes",
    "missing_main_verification",
    "incomplete_replacements",
    "unresolved_failed_lanes",
    "resolved_failed_lanes",
];

/// Check `status --run-id` against the single-purpose queries at `at`.
/// Returns the number of lane verdicts compared.
fn check_parity(flow: &Flow, root: &Path, run: &str, at: &str, what: &str) -> usize {
    let status = read(
        flow,
        root,
        &["status", "--run-id", run, "--at", at, "--format", "json"],
    );
    let resume = read(flow, root, &["resume-check", "--run-id", run]);
    let diagnose = read(flow, root, &["receipt-diagnose", "--run-id", run]);
    let damaged = diagnose.code != 0 || diagnose.json().get("first_bad_sequence").is_some();
    if damaged {
        // Like every query that needs the verified state: exit 3.
        let e = status.assert_error(3, "receipt_corrupt");
        if diagnose.code == 0 {
            assert_eq!(
                e["first_bad_sequence"],
                diagnose.json()["first_bad_sequence"],
                "{what}"
            );
        }
        return 0;
    }
    let s = status.assert_ok();
    assert_eq!(s["receipt"], "ok", "{what}");
    if resume.code == 7 {
        // Phase 1: the verified state, the Phase 2 fields null.
        assert_eq!(s["run_state"], diagnose.json()["effective_state"], "{what}");
        for key in ["lanes", "completion", "next", "topology_gaps"] {
            assert!(s[key].is_null(), "{what}: {key}");
        }
        return 0;
    }
    let r = resume.assert_ok();
    for key in [
        "incomplete_replacements",
        "lanes_requiring_observation",
        "topology_gaps",
        "owner_epoch",
        "owner_fingerprint",
        "run_state",
        "manifest_hash",
        "manifest_version",
    ] {
        assert_eq!(s[key], r[key], "{what}: {key}");
    }
    assert_eq!(s["sequence"], r["last_sequence"], "{what}");
    assert_eq!(s["checksum"], r["last_checksum"], "{what}");
    let completion = read(flow, root, &["completion-check", "--run-id", run]).assert_ok();
    let mut expected = Map::new();
    for key in COMPLETION_KEYS {
        expected.insert(key.into(), completion[key].clone());
    }
    assert_eq!(s["completion"], Value::Object(expected), "{what}");
    assert_eq!(
        s["breaches"],
        completion.get("breaches").cloned().unwrap_or(json!([])),
        "{what}"
    );
    let lanes = s["lanes"].as_array().unwrap();
    let lane_files = runs_lanes(root, run);
    assert_eq!(lanes.len(), lane_files.len().max(lanes.len()), "{what}");
    for lane in lanes {
        let id = lane["lane_id"].as_str().unwrap();
        let check = read(
            flow,
            root,
            &[
                "liveness-check",
                "--run-id",
                run,
                "--lane-id",
                id,
                "--at",
                at,
            ],
        );
        if check.code == 0 {
            let c = check.json();
            assert_eq!(
                lane["liveness"],
                json!({"action": c["action"], "reason": c["reason"]}),
                "{what}: lane {id}"
            );
        } else {
            let e = check.error();
            assert_eq!(lane["liveness"]["error"], e["error"], "{what}: lane {id}");
            assert_eq!(lane["liveness"]["message"], e["message"], "{what}: {id}");
        }
        // The next command names this very run and lane, or nothing.
        if let Some(next) = lane["next_command"].as_str() {
            assert!(next.starts_with("bluetape-flow "), "{what}: {next}");
            assert!(next.contains(&format!("--run-id {run}")), "{what}: {next}");
            // A heartbeat names its lane in its --input file.
            assert!(
                next.contains(&format!("--lane-id {id}"))
                    || next.starts_with("bluetape-flow heartbeat "),
                "{what}: {next}"
            );
        }
    }
    lanes.len()
}

fn runs_lanes(root: &Path, run: &str) -> Vec<String> {
    std::fs::read_dir(root.join("runs").join(run).join("lanes"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The listing lists every run, flags exactly the damaged ones with the
/// diagnosis' first bad sequence, and links recovery runs both ways.
fn check_listing(flow: &Flow, root: &Path, what: &str) -> Value {
    let out = read(
        flow,
        root,
        &["status", "--format", "json", "--at", INSTANTS[2]],
    );
    let listing = out.assert_ok();
    let ids: Vec<String> = listing["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, run_ids(root), "{what}");
    for entry in listing["runs"].as_array().unwrap() {
        let id = entry["run_id"].as_str().unwrap();
        let diagnose = read(flow, root, &["receipt-diagnose", "--run-id", id]);
        let bad = if diagnose.code == 0 {
            diagnose.json().get("first_bad_sequence").cloned()
        } else {
            Some(Value::Null)
        };
        match bad {
            Some(first_bad) => {
                assert_eq!(entry["receipt"], "damaged", "{what} {id}: {entry}");
                assert_eq!(entry["first_bad_sequence"], first_bad, "{what} {id}");
                assert_eq!(entry["effective_state"], "blocked", "{what} {id}");
            }
            None => assert_eq!(entry["receipt"], "ok", "{what} {id}: {entry}"),
        }
    }
    listing
}

#[test]
fn status_never_disagrees_with_the_queries_it_summarizes() {
    let (_tmp, base, flow) = reader();
    let mut roots = fixture_roots(&base);
    let stalled = stalled_run(&base.join("built"));
    let gated = gated_run(&base.join("built"), &stalled.root);
    roots.push(("built".into(), stalled.root.clone()));
    let (recovered, damaged, recovery) = recovered_root(&base);
    roots.push(("recovered".into(), recovered.clone()));
    let mut verdicts = 0;
    let mut runs = 0;
    for (name, root) in &roots {
        check_listing(&flow, root, name);
        for run in run_ids(root) {
            runs += 1;
            for at in INSTANTS {
                verdicts += check_parity(&flow, root, &run, at, &format!("{name} {run} {at}"));
            }
        }
    }
    assert!(runs >= 28, "{runs} runs");
    assert!(verdicts >= 120, "{verdicts} lane verdicts compared");

    // The built runs show what they were built to show.
    let s = status_json(&stalled, "2026-07-14T01:06:20Z");
    let w1 = &s["lanes"].as_array().unwrap()[1];
    assert_eq!(w1["state"], "recovering");
    assert_eq!(w1["liveness"]["action"], "await_probe");
    // Both lanes need stall handling, in lane order, before anything else:
    // w0's lease ran out at 01:05, w1 waits for its probe's answer.
    assert_eq!(s["next"][0]["action"], "suspect_stall");
    assert_eq!(s["next"][0]["subject"], "w0");
    assert_eq!(s["next"][1]["action"], "await_probe");
    assert_eq!(s["next"][1]["subject"], "w1");
    let s = status_json(&stalled, "2099-06-01T00:00:00Z");
    let w1 = &s["lanes"].as_array().unwrap()[1];
    assert_eq!(w1["liveness"]["action"], "observe_command");
    assert!(
        crate::bed::str_field(w1, "next_command").contains("--command-status <alive|dead>"),
        "{w1}"
    );
    let g = read(
        &flow,
        &stalled.root,
        &["status", "--run-id", &gated, "--format", "json"],
    )
    .assert_ok();
    assert_eq!(g["run_state"], "planned");
    assert_eq!(g["approval"]["gated"], true);
    assert_eq!(g["approval"]["state"], Value::Null);
    assert_eq!(g["next"][0]["action"], "approve_run");

    // Recovery links, both ways, in the listing and per run.
    let listing = check_listing(&flow, &recovered, "recovered");
    let entry = |id: &str| {
        listing["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(entry(&damaged)["recovered_by"], json!([recovery]));
    assert_eq!(entry(&recovery)["recovery_of"], json!(damaged));
    let r = read(
        &flow,
        &recovered,
        &["status", "--run-id", &recovery, "--format", "json"],
    )
    .assert_ok();
    assert_eq!(r["recovery_of"], json!(damaged));
}

/// A damaged run is listed as damaged and never hides the others; with
/// `--run-id` it is the exit-3 envelope naming the first bad sequence.
#[test]
fn a_damaged_run_is_listed_with_its_first_bad_sequence_and_hides_nothing() {
    let (_tmp, base, run) = LaneRun::in_temp(&["w0"]);
    let other = LaneRun::new_with_owner(&base, &["w1"], "other");
    let mut receipt = run.receipt();
    let at = receipt.len() / 2;
    receipt[at] ^= 0x01;
    std::fs::write(run.receipt_path(), &receipt).unwrap();
    let listing = run
        .flow
        .run(&os(&[
            &"--state-root",
            &run.root,
            &"status",
            &"--format",
            &"json",
        ]))
        .assert_ok();
    let runs = listing["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let find = |id: &str| runs.iter().find(|r| r["run_id"] == id).unwrap();
    assert_eq!(find(&run.run_id)["receipt"], "damaged");
    assert!(find(&run.run_id)["first_bad_sequence"].as_u64().unwrap() >= 1);
    assert_eq!(find(&other.run_id)["receipt"], "ok");
    assert_eq!(find(&other.run_id)["run_state"], "running");
    let out = run.read("status", &["--format", "json"]);
    let e = out.assert_error(3, "receipt_corrupt");
    assert_eq!(
        e["first_bad_sequence"],
        find(&run.run_id)["first_bad_sequence"]
    );
}

/// Every view on every run: nothing in the state root changes (bytes,
/// modes, mtimes), and a write-protected copy reads the same.
#[test]
fn views_are_read_only_even_on_a_write_protected_copy() {
    let (_tmp, base, flow) = reader();
    let stalled = stalled_run(&base.join("built"));
    let mut roots = fixture_roots(&base);
    roots.push(("built".into(), stalled.root.clone()));
    let views = |root: &Path, run: &str| -> Vec<Vec<String>> {
        vec![
            vec!["status".into(), "--format".into(), "json".into()],
            vec!["status".into(), "--run-id".into(), run.into()],
            vec!["log".into(), "--run-id".into(), run.into()],
            vec![
                "log".into(),
                "--run-id".into(),
                run.into(),
                "--format".into(),
                "table".into(),
            ],
            vec![
                "status".into(),
                "--run-id".into(),
                run.into(),
                "--format".into(),
                "table".into(),
            ],
        ]
        .into_iter()
        .map(|mut v| {
            v.insert(0, root.to_string_lossy().into_owned());
            v.insert(0, "--state-root".into());
            v
        })
        .collect()
    };
    let mut results = Vec::new();
    for (name, root) in &roots {
        for run in run_ids(root) {
            for argv in views(root, &run) {
                let before = common::snapshot(root);
                let out = flow.run(&argv);
                assert_eq!(before, common::snapshot(root), "{name}: {argv:?}");
                assert!(matches!(out.code, 0 | 3 | 5), "{name} {argv:?}: {out:?}");
                results.push((argv, out.code, out.stdout));
            }
        }
    }
    // Write-protected: the same answers.
    for (_, root) in &roots {
        common::chmod_dirs(root, 0o500);
    }
    for (argv, code, stdout) in &results {
        let out = flow.run(argv);
        assert_eq!(out.code, *code, "{argv:?}: {out:?}");
        // `status` without --at judges at "now"; compare the rest.
        if !argv.contains(&"status".to_string()) {
            assert_eq!(&out.stdout, stdout, "{argv:?}");
        }
    }
    for (_, root) in &roots {
        common::chmod_dirs(root, 0o700);
    }
}

#[test]
fn bad_input_is_the_usual_envelope_and_writes_nothing() {
    let (_tmp, _, run) = LaneRun::in_temp(&["w0"]);
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["status", "--run-id", "nope-run"], 3, "receipt_corrupt"),
        (vec!["status", "--run-id", "../x"], 2, "contract_error"),
        (vec!["status", "--at", "yesterday"], 2, "contract_error"),
        (
            vec![
                "status",
                "--run-id",
                &run.run_id,
                "--at",
                "2026-13-01T00:00:00Z",
            ],
            2,
            "contract_error",
        ),
        (vec!["status", "--format", "yaml"], 2, "contract_error"),
        (vec!["log", "--run-id", "nope-run"], 3, "receipt_corrupt"),
        (
            vec!["log", "--run-id", &run.run_id, "--type", "no_such_event"],
            2,
            "contract_error",
        ),
        (
            vec!["log", "--run-id", &run.run_id, "--lane", "../w0"],
            2,
            "contract_error",
        ),
        (
            vec!["log", "--run-id", &run.run_id, "--tail", "-1"],
            2,
            "contract_error",
        ),
        (
            vec!["log", "--run-id", &run.run_id, "--since", "x"],
            2,
            "contract_error",
        ),
        (vec!["log"], 2, "contract_error"),
    ];
    for (args, code, error) in cases {
        let before = common::snapshot(&run.root);
        let out = read(&run.flow, &run.root, &args);
        out.assert_error(code, error);
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {out:?}");
        assert_eq!(before, common::snapshot(&run.root), "{args:?}");
    }
}

fn jsonl(out: &Output) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn log_prints_every_verified_event_and_filters() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let run = stalled_run(&base);
    let receipt: Vec<Value> = String::from_utf8(run.receipt())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out = run.read("log", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let rows = jsonl(&out);
    assert_eq!(rows.len(), receipt.len() + 1);
    for (row, event) in rows.iter().zip(&receipt) {
        assert_eq!(row["sequence"], event["sequence"]);
        assert_eq!(row["checksum"], event["checksum"]);
        assert_eq!(row["created_at"], event["timestamp"]);
        assert_eq!(row["event_type"], event["event_type"]);
    }
    let summary = rows.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["events"], receipt.len());
    assert_eq!(summary["checksum"], receipt.last().unwrap()["checksum"]);
    assert_eq!(summary["verified"], true);
    // Heartbeats are transactions: their intents' types are listed.
    let beat = rows
        .iter()
        .find(|r| r["event_type"] == "transaction_committed")
        .unwrap();
    assert_eq!(
        beat["intent_types"],
        json!(["heartbeat_observed", "lease_renewed"])
    );
    assert_eq!(beat["lane_id"], "w0");

    let lane = jsonl(&run.read("log", &["--lane", "w1"]));
    assert!(lane.len() > 2);
    assert!(lane[..lane.len() - 1].iter().all(|r| r["lane_id"] == "w1"));
    let kind = jsonl(&run.read("log", &["--type", "heartbeat_observed"]));
    assert_eq!(kind.len() - 1, 2, "{kind:?}");
    let since = jsonl(&run.read("log", &["--since", "10"]));
    assert_eq!(since[0]["sequence"], 11);
    assert_eq!(since.len() - 1, receipt.len() - 10);
    let tail = jsonl(&run.read("log", &["--tail", "3"]));
    let seqs: Vec<&Value> = tail[..3].iter().map(|r| &r["sequence"]).collect();
    let n = receipt.len();
    assert_eq!(seqs, vec![&json!(n - 2), &json!(n - 1), &json!(n)]);
    assert_eq!(tail[3]["printed"], 3);
    let both = jsonl(&run.read("log", &["--lane", "w1", "--tail", "1"]));
    assert_eq!(both[0]["lane_id"], "w1");
    assert_eq!(both.len(), 2);
    // The table: a header, one line per event, 80 columns at most.
    let table = run.read("log", &["--format", "table"]);
    assert_eq!(table.stdout.lines().count(), receipt.len() + 1);
    assert!(table.stdout.lines().all(|l| l.chars().count() <= 80));
}

/// On a damaged receipt `log` prints the verified prefix, then the exit-3
/// envelope naming the first bad sequence; never a row past it.
#[test]
fn log_on_a_damaged_receipt_prints_only_the_verified_prefix() {
    let (_tmp, base, flow) = reader();
    let mut checked = 0;
    for (name, root) in fixture_roots(&base) {
        for run in run_ids(&root) {
            let diagnose = read(&flow, &root, &["receipt-diagnose", "--run-id", &run]);
            if diagnose.code != 0 {
                continue;
            }
            let d = diagnose.json();
            let Some(first_bad) = d["first_bad_sequence"].as_u64() else {
                continue;
            };
            let out = read(&flow, &root, &["log", "--run-id", &run]);
            assert_eq!(out.code, 3, "{name}: {out:?}");
            let e: Value = serde_json::from_str(&out.stderr).unwrap();
            assert_eq!(e["error"], "receipt_corrupt");
            assert_eq!(e["first_bad_sequence"], first_bad, "{name}");
            let rows = jsonl(&out);
            let trusted = d["last_trusted_sequence"].as_u64().unwrap();
            assert_eq!(rows.len() as u64, trusted, "{name}");
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row["sequence"], i as u64 + 1, "{name}");
                assert!(row.get("type").is_none(), "{name}: no summary line");
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} damaged fixtures");
}

#[test]
fn log_follow_prints_new_events_until_the_run_ends() {
    use std::io::{BufRead, BufReader};
    let (_tmp, _, run) = LaneRun::in_temp(&["w0"]);
    let events = String::from_utf8(run.receipt()).unwrap().lines().count();
    let mut child = run
        .command(&run.read_args("log", &["--follow", "--format", "jsonl"]))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for i in 0..events {
        let row: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(row["sequence"], i as u64 + 1);
    }
    run.flow.run(&run.heartbeat_args("w0", "x")).assert_ok();
    let row: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(row["sequence"], events as u64 + 1);
    assert_eq!(row["intent_types"][0], "heartbeat_observed");
    let evidence = run.input("cancel.json", &json!([{"kind": "plan", "summary": "stop"}]));
    run.mutation(
        "run-cancel",
        &os(&[&"--evidence", &evidence, &"--reason", &"done watching"]),
    )
    .assert_ok();
    let row: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(row["event_type"], "run_cancelled");
    let summary: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(summary["type"], "summary");
    assert!(lines.next().is_none());
    let status = child.wait().unwrap();
    assert!(status.success());
}

/// A run whose receipt carries hostile strings in evidence summaries,
/// reasons and a component description (as long as the rules allow).
pub fn hostile_run(base: &Path) -> LaneRun {
    let run = LaneRun::new(base, &["w0"]);
    for (i, text) in HOSTILE.iter().enumerate() {
        let evidence = run.input(
            &format!("hostile-{i}.json"),
            &json!([{"kind": "log", "summary": text}]),
        );
        let beat = run.input(
            &format!("hbeat-{i}.json"),
            &json!({"lane_id": "w0", "agent_id": "agent-w0",
                    "observed_at": format!("2026-07-14T01:0{}:00Z", i + 1),
                    "silence_lease_deadline": format!("2026-07-14T01:0{}:30Z", i + 1),
                    "reason": text}),
        );
        run.mutation(
            "heartbeat",
            &os(&[&"--evidence", &evidence, &"--input", &beat]),
        )
        .assert_ok();
    }
    let long: String = "<script>".repeat(256 / 8);
    let evidence = run.input("long.json", &json!([{"kind": "log", "summary": long}]));
    let topology = run.input(
        "topology.json",
        &json!([{"id": "runtime", "required": true,
            "description": HOSTILE.join(" ").chars().take(500).collect::<String>(),
            "owner_lane": "w0", "required_checks": ["unit"], "dependencies": [],
            "evidence_refs": [], "coverage_state": "missing"}]),
    );
    run.mutation(
        "topology-register",
        &os(&[&"--evidence", &evidence, &"--input", &topology]),
    )
    .assert_ok();
    run
}

/// Hostile receipt strings are inert in every table: no escape sequence,
/// control character or bidirectional override reaches the terminal.
#[test]
fn hostile_strings_are_inert_in_tables() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let run = hostile_run(&base);
    for args in [
        vec!["log", "--format", "table"],
        vec!["status", "--format", "table", "--color", "never"],
    ] {
        let out = run.read(args[0], &args[1..]);
        assert_eq!(out.code, 0, "{out:?}");
        for c in out.stdout.chars() {
            assert!(
                c == '\n'
                    || !(c.is_control()
                        || ('\u{202a}'..='\u{202e}').contains(&c)
                        || ('\u{2066}'..='\u{2069}').contains(&c)),
                "{args:?}: {c:?} reached the terminal"
            );
        }
        // Every line fits, except the commands `status` recommends: never
        // cut (cli-conventions §5), each on a line of its own.
        assert!(
            out.stdout
                .lines()
                .filter(|l| !l.starts_with("     bluetape-flow "))
                .all(|l| l.chars().count() <= 80)
        );
    }
    let log = run.read("log", &["--format", "table"]).stdout;
    assert!(log.contains("<script>alert("), "{log}");
    // JSON keeps the exact strings (escaped by JSON, not altered).
    let rows = jsonl(&run.read("log", &[]));
    let all: String = rows.iter().map(|r| r["summary"].to_string()).collect();
    assert!(all.contains("\\u001b[31mred"), "{all}");
    let colour = run.read("status", &["--format", "table", "--color", "always"]);
    assert!(colour.stdout.contains("\u{1b}[36m"), "{colour:?}");
    let plain = run.flow.run_env(
        &run.read_args("status", &["--format", "table"]),
        &[("NO_COLOR", "1")],
    );
    assert!(!plain.stdout.contains('\u{1b}'));
}

/// The tables, as a person sees them, on reference fixtures (fixed run
/// ids and times, so the snapshot is stable).
#[test]
fn tables_are_a_snapshot() {
    let (_tmp, base, flow) = reader();
    let mut text = String::new();
    for name in [
        "04-stall-replace",
        "13-liveness-paths",
        "10-replacement-incomplete",
    ] {
        let root = base.join(name);
        common::prepare_state(&common::fixtures_dir().join(name), &root);
        let run = run_ids(&root).remove(0);
        for args in [
            vec![
                "status",
                "--at",
                "2026-07-14T01:06:00Z",
                "--format",
                "table",
            ],
            vec![
                "status",
                "--run-id",
                &run,
                "--at",
                "2026-07-14T01:06:00Z",
                "--format",
                "table",
            ],
            vec!["log", "--run-id", &run, "--format", "table"],
        ] {
            let out = read(&flow, &root, &args);
            assert_eq!(out.code, 0, "{out:?}");
            text.push_str(&format!("$ {name}: {}\n{}\n", args.join(" "), out.stdout));
        }
    }
    common::snapshots().bind(|| insta::assert_snapshot!("views-tables", text));
}

// ---------------------------------------------------------------- report

fn report(flow: &Flow, root: &Path, run: &str, out: &Path, extra: &[&str]) -> Output {
    let mut argv = os(&[
        &"--state-root",
        &root,
        &"report",
        &"--run-id",
        &run,
        &"--out",
        &out,
    ]);
    argv.extend(extra.iter().map(OsString::from));
    flow.run(&argv)
}

/// `report` writes exactly its `--out` file (0600, through a temp file and
/// a rename), describes the head it read, and refuses — writing nothing —
/// a path inside the state root, a symlink, an existing file without
/// `--force`, a missing directory, an unknown run and a bad `--at`.
#[test]
fn report_writes_only_its_out_file_and_refuses_unsafe_paths() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let run = stalled_run(&base.join("built"));
    let out_dir = base.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let page = out_dir.join("run.html");
    let before = common::snapshot(&run.root);
    let v = report(&run.flow, &run.root, &run.run_id, &page, &[]).assert_ok();
    assert_eq!(before, common::snapshot(&run.root));
    let verify = run.read("verify", &[]).assert_ok();
    assert_eq!(v["operation"], "report");
    assert_eq!(v["path"], page.to_string_lossy().as_ref());
    assert_eq!(v["checksum"], verify["checksum"]);
    assert_eq!(v["sequence"], verify["sequence"]);
    let bytes = std::fs::read(&page).unwrap();
    assert_eq!(v["bytes"], bytes.len());
    let meta = std::fs::metadata(&page).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["run.html".to_string()], "no temp file left");
    let html = String::from_utf8(bytes).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'sha256-"
    ));
    for forbidden in [
        "<script", " src=", " href=", "@import", "<link", "<iframe", "style=\"",
    ] {
        assert!(!html.contains(forbidden), "{forbidden} in the page");
    }
    assert_eq!(
        html.matches("url(").count(),
        html.matches("url(#arrow)").count()
    );
    for section in [
        "Lane timeline",
        "Components",
        "Completion",
        "Events",
        "Lanes",
    ] {
        assert!(html.contains(&format!("<h2>{section}</h2>")), "{section}");
    }

    let refuse = |out: &Path, extra: &[&str], code: i32, error: &str| {
        let root_before = common::snapshot(&run.root);
        let dir_before = common::snapshot(&out_dir);
        let o = report(&run.flow, &run.root, &run.run_id, out, extra);
        o.assert_error(code, error);
        assert_eq!(root_before, common::snapshot(&run.root), "{out:?}");
        assert_eq!(dir_before, common::snapshot(&out_dir), "{out:?}");
    };
    // An existing file: refused without --force, replaced with it.
    refuse(&page, &[], 2, "contract_error");
    std::fs::write(&page, "old").unwrap();
    report(&run.flow, &run.root, &run.run_id, &page, &["--force"]).assert_ok();
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .starts_with("<!DOCTYPE")
    );
    // Inside the state root (also through a relative path and a link).
    refuse(&run.root.join("report.html"), &[], 2, "contract_error");
    refuse(
        &run.run_dir().join("report.html"),
        &["--force"],
        2,
        "contract_error",
    );
    let into_root = out_dir.join("into-root");
    std::os::unix::fs::symlink(&run.root, &into_root).unwrap();
    refuse(&into_root.join("r.html"), &[], 2, "contract_error");
    std::fs::remove_file(&into_root).unwrap();
    // A symlink at the path, even with --force: the target is untouched.
    let target = base.join("target.txt");
    std::fs::write(&target, "keep").unwrap();
    let link = out_dir.join("link.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refuse(&link, &["--force"], 2, "contract_error");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    std::fs::remove_file(&link).unwrap();
    // A directory that does not exist; a directory in the way.
    refuse(&out_dir.join("no/such/dir.html"), &[], 2, "contract_error");
    std::fs::create_dir(out_dir.join("dir.html")).unwrap();
    refuse(&out_dir.join("dir.html"), &["--force"], 2, "contract_error");
    std::fs::remove_dir(out_dir.join("dir.html")).unwrap();
    // Bad --at, unknown run: nothing written either.
    refuse(
        &out_dir.join("x.html"),
        &["--at", "soon"],
        2,
        "contract_error",
    );
    let root_before = common::snapshot(&run.root);
    let o = report(
        &run.flow,
        &run.root,
        "nope-run",
        &out_dir.join("y.html"),
        &[],
    );
    o.assert_error(3, "receipt_corrupt");
    assert_eq!(root_before, common::snapshot(&run.root));
    assert!(!out_dir.join("y.html").exists());
}

/// A report of a damaged run is the exit-3 envelope, and writes nothing.
#[test]
fn report_of_a_damaged_run_writes_nothing() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let (root, damaged, _) = recovered_root(&base);
    let flow = Flow::new(&base.join("reader"));
    let out = base.join("damaged.html");
    let o = report(&flow, &root, &damaged, &out, &[]);
    o.assert_error(3, "receipt_corrupt");
    assert!(!out.exists());
}

fn chromium() -> PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let path = Path::new(dir).join("chromium");
        if path.is_file() {
            return path;
        }
    }
    panic!("chromium is required for the browser test (.ci/run installs Debian's chromium)");
}

/// Run headless Chromium on `page` with `mode` (`--screenshot=..` or
/// `--dump-dom`); returns its stdout.
fn browse(page: &Path, work: &Path, mode: &str) -> String {
    let profile = tempfile::tempdir_in(work).unwrap();
    let out = std::process::Command::new("timeout")
        .arg("120")
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--window-size=1200,900")
        .arg(mode)
        .arg(format!("file://{}", page.display()))
        .env_clear()
        .env("HOME", work)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(work)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium {mode}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Distinct colours and the share of non-white pixels of a PNG.
fn png_stats(path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0usize;
    let pixels = bytes.chunks(channels);
    let total = pixels.len();
    for px in pixels {
        let rgb = (px[0], px[1 % channels], px[2 % channels]);
        colours.insert(rgb);
        if rgb != (255, 255, 255) {
            non_white += 1;
        }
    }
    (colours.len(), non_white as f64 / total.max(1) as f64)
}

/// Real browser: headless Chromium renders each report (a demo run, a run
/// with a replacement, a recovery run, one full of hostile strings) to a
/// PNG that is not blank, and its DOM holds the hostile strings as text and
/// no element they tried to inject.
#[test]
fn reports_render_in_a_real_browser_and_hostile_strings_stay_text() {
    let (_tmp, base, flow) = reader();
    let demo = stalled_run(&base.join("demo"));
    let replaced = base.join("replaced");
    common::prepare_state(&common::fixtures_dir().join("04-stall-replace"), &replaced);
    let replaced_run = run_ids(&replaced).remove(0);
    let (recovered, _, recovery) = recovered_root(&base);
    let hostile = hostile_run(&base.join("hostile"));
    let pages = base.join("pages");
    std::fs::create_dir(&pages).unwrap();
    let cases = [
        ("demo", demo.root.clone(), demo.run_id.clone()),
        ("replaced", replaced, replaced_run),
        ("recovery", recovered, recovery),
        ("hostile", hostile.root.clone(), hostile.run_id.clone()),
    ];
    for (name, root, run) in &cases {
        let page = pages.join(format!("{name}.html"));
        report(&flow, root, run, &page, &["--at", "2026-07-14T02:00:00Z"]).assert_ok();
        let shot = pages.join(format!("{name}.png"));
        browse(&page, &base, &format!("--screenshot={}", shot.display()));
        let (colours, share) = png_stats(&shot);
        assert!(colours >= 16, "{name}: {colours} colours: blank page?");
        assert!(
            share > 0.03,
            "{name}: only {share:.3} of the pixels are not white"
        );
        let dom = browse(&page, &base, "--dump-dom");
        assert!(dom.contains("<h2>Lane timeline</h2>"), "{name}: {dom}");
        let html = std::fs::read_to_string(&page).unwrap();
        // The browser built exactly the elements we wrote: no more svg,
        // script, img or injected b.
        for tag in ["<svg", "<script", "<img", "<b id=", "<iframe", "<style"] {
            assert_eq!(
                dom.matches(tag).count(),
                html.matches(tag).count(),
                "{name}: {tag}"
            );
        }
        assert!(!dom.contains("<script"), "{name}");
    }
    let dom = browse(&pages.join("hostile.html"), &base, "--dump-dom");
    for text in [
        "&lt;script&gt;alert('x')&lt;/script&gt;",
        "&lt;img src=x onerror=alert(1)&gt;",
        "&lt;/svg&gt;&lt;b id=\"injected\"&gt;bold&lt;/b&gt;",
        "ansi \u{241b}[31mred\u{241b}[0m bell\u{2407} nul\u{2400} end",
        "rtl [U+202E]gnp.exe[U+202C] isolate [U+2066]x[U+2069]",
        "quote \" amp &amp; apos ' lt &lt; gt &gt;",
    ] {
        assert!(dom.contains(text), "hostile text {text:?} not in the DOM");
    }
    assert!(!dom.contains("<b id=\"injected\""));
    assert!(!dom.contains('\u{202e}') && !dom.contains('\u{1b}'));
}

/// A run whose gate the Python tool bypassed (an `approval_gate` breach)
/// opens its report with the breach banner: in the DOM headless Chromium
/// builds, the banner is the body's first element, it lists the breach,
/// and the event's row is marked; the page is not blank.
#[test]
fn a_breached_runs_report_opens_with_its_banner_in_a_real_browser() {
    let run = crate::guards::Run::completed_past_a_bypassed_gate();
    let (_tmp, base, flow) = reader();
    let page = base.join("breached.html");
    report(
        &flow,
        &run.root,
        &run.run_id,
        &page,
        &["--at", "2026-07-14T02:00:00Z"],
    )
    .assert_ok();
    let dom = browse(&page, &base, "--dump-dom");
    let body = dom.split("<body>").nth(1).unwrap().trim_start();
    assert!(
        body.starts_with(
            "<div class=\"breach\" role=\"alert\"><b>This run breaks our rules in 1 event(s).</b>"
        ),
        "{body}"
    );
    assert!(body.contains("<code>approval_gate</code>"), "{body}");
    assert!(body.contains("<tr class=\"breach\"><td>2</td>"), "{body}");
    let shot = base.join("breached.png");
    browse(&page, &base, &format!("--screenshot={}", shot.display()));
    let (colours, share) = png_stats(&shot);
    assert!(
        colours >= 16 && share > 0.03,
        "blank page? {colours} {share}"
    );
}

// ------------------------------------------------------------- Phase 1

const PHASE1_RUN: &str = common::PHASE1_RUN_ID;

/// A manifest 1.0 (Phase 1) run: run_created, plan_approved.
fn write_phase1_run(root: &Path) -> String {
    common::write_phase1_run(
        root,
        &[
            ("run_created", None, Some("planned")),
            ("plan_approved", Some("planned"), Some("approved")),
        ],
        None,
    )
}

/// A Phase 1 run is not an error for the views: its verified state, the
/// Phase 2 fields null; log and report read it too.
#[test]
fn views_read_a_phase1_run() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let root = base.join("state");
    let head = write_phase1_run(&root);
    let flow = Flow::new(&base);
    let before = common::snapshot(&root);
    let s = read(
        &flow,
        &root,
        &["status", "--run-id", PHASE1_RUN, "--format", "json"],
    )
    .assert_ok();
    assert_eq!(s["run_state"], "approved");
    assert_eq!(s["manifest_version"], "1.0.0");
    assert_eq!(s["checksum"], head);
    for key in ["lanes", "components", "completion", "next", "owner_epoch"] {
        assert!(s[key].is_null(), "{key}: {s}");
    }
    check_parity(&flow, &root, PHASE1_RUN, INSTANTS[0], "phase 1");
    let listing = check_listing(&flow, &root, "phase 1");
    assert_eq!(listing["runs"][0]["run_state"], "approved");
    let rows = jsonl(&read(&flow, &root, &["log", "--run-id", PHASE1_RUN]));
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["checksum"], head);
    let page = base.join("phase1.html");
    report(&flow, &root, PHASE1_RUN, &page, &[]).assert_ok();
    assert!(std::fs::read_to_string(&page).unwrap().contains("1.0.0"));
    assert_eq!(before, common::snapshot(&root));
}

/// A receipt whose every line verifies but whose last event the replay
/// refuses (another writer's lane step for a lane that does not exist):
/// the listing shows the run as damaged at that event with the state of
/// the lines before it, as it was before the line was appended (the replay
/// of a view keeps no undo journal, so that prefix is replayed again).
#[test]
fn a_refused_last_event_is_listed_with_the_state_before_it() {
    let run = common::TestBed::running(&["runtime"]);
    run.running_lane("build", None);
    let entry = |run: &common::TestBed| {
        let listing = run.raw(&["status", "--format", "json"]).assert_ok();
        listing["runs"][0].as_object().unwrap().clone()
    };
    let before = entry(&run);
    assert_eq!(before["receipt"], "ok", "{before:?}");
    run.append_sealed(&[(
        "lane_started",
        json!({"lane_id": "ghost", "agent_id": "agent-ghost", "from_state": "pending",
               "to_state": "starting", "metadata": {"owner_epoch": 1}}),
    )]);
    let after = entry(&run);
    let refused = before["sequence"].as_u64().unwrap() + 1;
    assert_eq!(after["receipt"], "damaged", "{after:?}");
    assert_eq!(after["first_bad_sequence"], refused, "{after:?}");
    assert_eq!(after["sequence"], before["sequence"], "{after:?}");
    let damage = [
        "receipt",
        "first_bad_sequence",
        "effective_state",
        "last_trusted_checksum",
        "error",
        "next",
    ];
    for (key, value) in &before {
        if !damage.contains(&key.as_str()) {
            assert_eq!(after.get(key), Some(value), "{key}: {after:?}");
        }
    }
}
