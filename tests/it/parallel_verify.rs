//! `verify` examines long receipts on two worker threads. Whatever the
//! damage, its verdict must be exactly the one the line-by-line verifier
//! gives: same first bad sequence, same trusted prefix, same reason.

use crate::bed as common;
use bluetape_flow::store::root::StateRoot;

use bluetape_flow::cli::run_with;
use bluetape_flow::commands::ledger::{Verdict, open_run, verify_chain, verify_receipt};
use bluetape_flow::store::discovery::DiscoveryEnv;
use common::Flow;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A run whose receipt is well over the parallel threshold (1 MiB).
pub(crate) fn long_run(base: &Path) -> (PathBuf, String) {
    let flow = Flow::new(base);
    let root = base.join("state");
    let run_id = flow.init(&root, &base.join("repo"));
    let owner = root.join("handles/main.owner");
    let env = DiscoveryEnv {
        home: Some(flow.home.clone().into()),
        cwd: base.to_path_buf(),
        ..DiscoveryEnv::default()
    };
    let call = |argv: Vec<String>| {
        let mut full: Vec<OsString> = vec!["bluetape-flow".into(), "--state-root".into()];
        full.push(root.clone().into());
        full.extend(argv.into_iter().map(OsString::from));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(full, &env, &mut out, &mut err);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    };
    let file = |name: &str, value: serde_json::Value| {
        let path = base.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    };
    let owned = |command: &str, rest: &[&str]| {
        let mut argv = vec![
            command.to_string(),
            "--run-id".into(),
            run_id.clone(),
            "--owner-file".into(),
            owner.to_string_lossy().into(),
        ];
        argv.extend(rest.iter().map(|s| s.to_string()));
        argv
    };
    let ev = file("ev.json", json!([{"kind": "plan", "summary": "ok"}]));
    let lane = file(
        "lane.json",
        json!({"lane_id": "build", "agent_id": "agent-1", "assignment": "build",
               "write_scope": ["src"], "fallback": "stop",
               "observed_at": "2026-07-14T01:00:00Z",
               "startup_ack_deadline": "2026-07-14T01:05:00Z",
               "command_deadline": "2099-01-01T00:00:00Z"}),
    );
    let at = ["--at", "2026-07-14T01:01:00Z"];
    call(owned("run-approve", &["--evidence", &ev]));
    call(owned("run-start", &["--evidence", &ev]));
    call(owned("lane-create", &["--input", &lane, "--evidence", &ev]));
    for command in ["lane-start", "startup-ack"] {
        let mut rest = vec![
            "--lane-id",
            "build",
            "--agent-id",
            "agent-1",
            "--evidence",
            &ev,
        ];
        rest.extend(at);
        call(owned(command, &rest));
    }
    for n in 0..800 {
        let ev = file(
            "hb-ev.json",
            json!((0..4)
                .map(|i| json!({"kind": "log", "summary": format!("note {n}.{i} {}", "x".repeat(200))}))
                .collect::<Vec<_>>()),
        );
        let hb = file(
            "hb.json",
            json!({"lane_id": "build", "agent_id": "agent-1",
                   "observed_at": "2026-07-14T02:00:00Z",
                   "silence_lease_deadline": "2026-07-14T02:05:00Z", "reason": "working"}),
        );
        call(owned("heartbeat", &["--evidence", &ev, "--input", &hb]));
    }
    (root, run_id)
}

fn verdicts(root: &Path, run_id: &str) -> (String, String) {
    let run = open_run(&StateRoot::begin(root), run_id).unwrap();
    let parallel = verify_chain(&run).unwrap();
    let sequential = verify_receipt(&run, |_| Ok(())).unwrap();
    let show = |v: Verdict| format!("{v:?}");
    (show(parallel), show(sequential))
}

#[test]
fn parallel_and_sequential_verdicts_agree_on_every_kind_of_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, run_id) = long_run(tmp.path());
    let receipt = root.join("runs").join(&run_id).join("receipt.jsonl");
    let original = std::fs::read(&receipt).unwrap();
    assert!(
        original.len() > 1 << 20,
        "the receipt must take the parallel path"
    );
    let lines: Vec<&[u8]> = original.split_inclusive(|b| *b == b'\n').collect();
    let (parallel, sequential) = verdicts(&root, &run_id);
    assert!(parallel.starts_with("Intact"), "{parallel}");
    assert_eq!(parallel, sequential);
    let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
    // A flipped byte in lines across the whole receipt (both workers' batches).
    for n in [
        0,
        1,
        7,
        150,
        151,
        400,
        401,
        lines.len() / 2,
        lines.len() - 2,
        lines.len() - 1,
    ] {
        let start: usize = lines[..n].iter().map(|l| l.len()).sum();
        for offset in [2, lines[n].len() / 2, lines[n].len() - 3] {
            let mut bytes = original.clone();
            bytes[start + offset] ^= 0x01;
            damaged.push((format!("byte flip in line {} at {offset}", n + 1), bytes));
        }
    }
    // Deleted, duplicated and swapped lines; a torn and a cut tail.
    for n in [3, 200, 600] {
        let mut without = lines.clone();
        without.remove(n);
        damaged.push((format!("line {} deleted", n + 1), without.concat()));
        let mut doubled = lines.clone();
        doubled.insert(n, lines[n]);
        damaged.push((format!("line {} doubled", n + 1), doubled.concat()));
        let mut swapped = lines.clone();
        swapped.swap(n, n + 1);
        damaged.push((
            format!("lines {} and {} swapped", n + 1, n + 2),
            swapped.concat(),
        ));
    }
    damaged.push(("torn tail".into(), original[..original.len() - 9].to_vec()));
    let cut: usize = lines[..lines.len() - 3].iter().map(|l| l.len()).sum();
    damaged.push(("cut tail".into(), original[..cut].to_vec()));
    for (what, bytes) in &damaged {
        std::fs::write(&receipt, bytes).unwrap();
        let (parallel, sequential) = verdicts(&root, &run_id);
        assert!(!parallel.starts_with("Intact"), "{what}: {parallel}");
        assert_eq!(parallel, sequential, "{what}");
    }
}
