//! Reliability scenario 7 (docs/reliability.md): read-only means read-only.
//! Every command the binary's `--help` calls "Read-only." (found at run
//! time, so commands added later — completion-check, the approvals view —
//! are covered without editing this file) runs on every run of many state
//! roots: ours healthy (head, checkpoint, caches), ours with a torn tail,
//! ours with a dead writer's lock left behind, and every state root the
//! Python reference wrote (no head, no checkpoint — a read must not add
//! them). Each call must change no byte, mode, link count, mtime or ctime of
//! anything in the tree (compared before and after, which works even as
//! root). Then again with write permission removed from every directory
//! (`chmod a-w`); root ignores that, so there the comparison is the proof.

use crate::bed as common;
use crate::reliability;

use reliability::{LaneRun, figure, tree, tree_diff};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const SCENARIO: &str = "7. Read-only means read-only";

/// Every subcommand whose help starts with "Read-only.".
fn read_only_commands() -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::bed::Flow::new(tmp.path()).run(&["--help"]);
    assert_eq!(out.code, 0, "{out:?}");
    let help = out.stdout;
    let commands: Vec<String> = help
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            (words.next() == Some("Read-only.")).then(|| name.to_string())
        })
        .collect();
    for known in [
        "state-root",
        "doctor",
        "verify",
        "receipt-diagnose",
        "resume-check",
        "liveness-check",
    ] {
        assert!(commands.iter().any(|c| c == known), "{known}: {help}");
    }
    commands
}

/// A state root to read and the runs in it.
struct Root {
    name: String,
    state: PathBuf,
    runs: Vec<String>,
}

fn runs_of(state: &Path) -> Vec<String> {
    crate::bed::run_ids(state)
}

/// Our three state roots and a copy of every reference fixture.
fn roots(base: &Path) -> Vec<Root> {
    let mut out = Vec::new();
    let healthy = LaneRun::new(&base.join("ours-healthy"), &["w0", "w1"]);
    for i in 0..3 {
        let lane = if i % 2 == 0 { "w0" } else { "w1" };
        let o = healthy
            .command(&healthy.heartbeat_args(lane, &format!("{i}")))
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    assert!(healthy.run_dir().join("checkpoint.json").is_file());
    signed_head(&healthy);
    out.push(Root {
        name: "ours, healthy".into(),
        state: healthy.root.clone(),
        runs: vec![healthy.run_id.clone()],
    });

    let torn = LaneRun::new(&base.join("ours-torn"), &["w0"]);
    let mut receipt = torn.receipt();
    receipt.extend_from_slice(b"{\"agent_id\":\"agent-w0\",\"chec");
    std::fs::write(torn.receipt_path(), &receipt).unwrap();
    out.push(Root {
        name: "ours, torn last line".into(),
        state: torn.root.clone(),
        runs: vec![torn.run_id.clone()],
    });

    let locked = LaneRun::new(&base.join("ours-locked"), &["w0"]);
    let lock = locked.run_dir().join("locks/receipt");
    std::fs::create_dir(&lock).unwrap();
    std::fs::write(
        lock.join("owner.json"),
        "{\"created_at\":\"2026-01-01T00:00:00Z\",\"pid\":2147483646,\"session_id\":0,\"token\":\"t\"}\n",
    )
    .unwrap();
    std::fs::write(
        locked.run_dir().join("locks/.receipt.initializing.json"),
        "{\"created_at\":\"2026-01-01T00:00:00Z\",\"pid\":2147483646,\"session_id\":0,\"token\":\"u\"}\n",
    )
    .unwrap();
    common::set_modes(&locked.root);
    out.push(Root {
        name: "ours, a dead writer's lock left behind".into(),
        state: locked.root.clone(),
        runs: vec![locked.run_id.clone()],
    });

    for (name, state) in common::fixture_states(&base.join("reference")) {
        let runs = runs_of(&state);
        out.push(Root {
            name: format!("reference {name}"),
            state,
            runs,
        });
    }
    out
}

/// A signed head (contracts/transparency.md §3) on the healthy run (so the
/// proof commands read clean there) and, beside its state root, the files
/// `check-proof` reads.
fn signed_head(run: &LaneRun) {
    let files = run.root.parent().unwrap().join("transparency");
    std::fs::create_dir_all(&files).unwrap();
    let cli = |args: &[&std::ffi::OsStr]| {
        let mut argv: Vec<OsString> = vec!["--state-root".into(), run.root.clone().into()];
        argv.extend(args.iter().map(|a| a.to_os_string()));
        let o = run.command(&argv).output().unwrap();
        assert!(o.status.success(), "{o:?}");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let key = files.join("head.key");
    let out = cli(&[
        "key-generate".as_ref(),
        "--name".as_ref(),
        "readonly".as_ref(),
        "--out".as_ref(),
        key.as_os_str(),
    ]);
    let vkey = out["verifier_key"].as_str().unwrap().to_string();
    std::fs::write(files.join("head.pub"), format!("{vkey}\n")).unwrap();
    let out = cli(&[
        "sign-head".as_ref(),
        "--run-id".as_ref(),
        run.run_id.as_ref(),
        "--key".as_ref(),
        key.as_os_str(),
    ]);
    let head = run.root.join(out["path"].as_str().unwrap());
    std::fs::copy(&head, files.join("head.note")).unwrap();
    cli(&[
        "prove-append".as_ref(),
        "--run-id".as_ref(),
        run.run_id.as_ref(),
        "--from".as_ref(),
        head.as_os_str(),
        "--out".as_ref(),
        files.join("append.json").as_os_str(),
    ]);
}

/// The argv of `command` on `run` of `root`.
fn argv(command: &str, root: &Root, run: &str) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["--state-root".into(), root.state.clone().into()];
    argv.push(command.into());
    // Commands of the whole state root take no run.
    if command == "state-root" || command == "doctor" {
        return argv;
    }
    // evidence-digest reads only the value it is given.
    if command == "evidence-digest" {
        argv.extend([
            "--evidence".into(),
            r#"[{"kind": "test", "summary": "ok"}]"#.into(),
        ]);
        return argv;
    }
    argv.extend(["--run-id".into(), run.into()]);
    if command == "report" {
        // The page goes outside the state root, one new file per call.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.state.parent().unwrap().join("report-out");
        std::fs::create_dir_all(&dir).unwrap();
        argv.extend(["--out".into(), dir.join(format!("{n}.html")).into()]);
    }
    // The proof commands (contracts/transparency.md §4; files of
    // `signed_head`, present beside the healthy root only).
    let files = root.state.parent().unwrap().join("transparency");
    match command {
        "prove-event" => argv.extend(["--sequence".into(), "1".into()]),
        "prove-append" => argv.extend(["--from".into(), files.join("head.note").into()]),
        "check-proof" => argv.extend([
            "--append".into(),
            files.join("append.json").into(),
            "--key".into(),
            files.join("head.pub").into(),
        ]),
        _ => {}
    }
    // contracts/bundle.md: a bundle or an envelope goes outside the state
    // root, one new file per call; bundle-verify reads a bundle of the
    // healthy run. contracts/otel.md: otel-export writes its trace the same
    // way.
    if command == "bundle-export" || command == "attest" || command == "otel-export" {
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.state.parent().unwrap().join("bundle-out");
        std::fs::create_dir_all(&dir).unwrap();
        argv.extend(["--out".into(), dir.join(format!("{command}-{n}")).into()]);
        if command == "attest" {
            argv.extend(["--key".into(), files.join("head.key").into()]);
        }
    }
    if command == "bundle-verify" {
        argv.truncate(argv.len() - 3);
        argv.push(command.into());
        let bundle = root
            .state
            .parent()
            .unwrap()
            .join("bundle-out/bundle-export-0");
        argv.push(bundle.into());
    }
    if command == "approval-statement" {
        // Its one write is a new file outside the state root
        // (contracts/approvals.md, "Signed approvals").
        argv.extend(["--out".into(), fresh_outside("statement").into()]);
    }
    if command == "liveness-check" {
        let lane = std::fs::read_dir(root.state.join("runs").join(run).join("lanes"))
            .ok()
            .and_then(|d| {
                d.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .strip_suffix(".json")
                            .map(str::to_string)
                    })
                    .min()
            })
            .unwrap_or_else(|| "w0".into());
        argv.extend([
            "--lane-id".into(),
            lane.into(),
            "--at".into(),
            "2026-07-14T02:00:00Z".into(),
        ]);
        // Its one write (DEVIATIONS 64) is a new decision file outside the
        // state root.
        let out = fresh_outside("decision");
        argv.extend(["--decision-out".into(), out.into()]);
    }
    argv
}

/// A path in the system temp dir, outside every state root, that no file
/// holds yet and no other call of this process gets: where a read-only
/// command's one write (`kind`) goes.
fn fresh_outside(kind: &str) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!(
        "bluetape-readonly-{kind}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&out);
    out
}

#[derive(Default)]
struct Pass {
    calls: u64,
    /// command -> exit status -> count
    exits: BTreeMap<String, BTreeMap<i32, u64>>,
}

impl Pass {
    fn summary(&self) -> String {
        self.exits
            .iter()
            .map(|(command, exits)| {
                let codes: Vec<String> = exits
                    .iter()
                    .map(|(code, n)| format!("exit {code} ×{n}"))
                    .collect();
                format!("{command}: {}", codes.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Run every read-only command on every run of every root; any change to
/// the tree fails the test.
fn pass(flow: &common::Flow, roots: &[Root], commands: &[String]) -> Pass {
    let mut out = Pass::default();
    for root in roots {
        for run in &root.runs {
            for command in commands {
                let argv = argv(command, root, run);
                let before = tree(&root.state);
                let result = flow.run(&argv);
                let after = tree(&root.state);
                let diff = tree_diff(&before, &after);
                assert!(
                    diff.is_empty(),
                    "{command} on {} / {run} changed the tree: {diff:#?}",
                    root.name
                );
                assert!(
                    matches!(result.code, 0 | 2 | 3 | 4 | 5 | 6 | 7),
                    "{command} on {} / {run}: {result:?}",
                    root.name
                );
                if result.code == 0 && command == "log" {
                    // One JSON row per event, then the summary line.
                    let last: serde_json::Value =
                        serde_json::from_str(result.stdout.lines().last().unwrap()).unwrap();
                    assert_eq!(last["type"], "summary", "{result:?}");
                } else if result.code == 0 {
                    assert!(result.json()["ok"] == true);
                } else {
                    // `log` prints the verified prefix before the error.
                    let e: serde_json::Value = if command == "log" {
                        serde_json::from_str(&result.stderr).unwrap()
                    } else {
                        result.error()
                    };
                    assert!(
                        !e["message"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("required argument"),
                        "{command} needs arguments this test does not give it: {e}"
                    );
                }
                out.calls += 1;
                *out.exits
                    .entry(command.clone())
                    .or_default()
                    .entry(result.code)
                    .or_default() += 1;
            }
        }
    }
    out
}

#[test]
fn reliability_readonly_commands_change_nothing_even_on_a_write_protected_tree() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let commands = read_only_commands();
    let roots = roots(&base);
    let flow = common::Flow::new(&base.join("reader"));
    let runs: usize = roots.iter().map(|r| r.runs.len()).sum();

    // Our healthy run reads clean with every command.
    for command in &commands {
        let out = flow.run(&argv(command, &roots[0], &roots[0].runs[0]));
        if command == "approval-statement" {
            // Only a run whose policy pins approver_key has a statement to
            // sign (tests/guards.rs); elsewhere it is a typed refusal.
            assert_eq!(out.code, 2, "{command}: {out:?}");
            continue;
        }
        if command == "attest" {
            // The healthy run is still running: nothing to attest (exit 6).
            assert_eq!(out.code, 6, "{command}: {out:?}");
            continue;
        }
        assert_eq!(out.code, 0, "{command}: {out:?}");
    }

    let normal = pass(&flow, &roots, &commands);
    figure(
        SCENARIO,
        &format!(
            "every read-only command ({}) on {runs} runs in {} state roots (ours healthy, torn, with a dead writer's lock; every reference fixture), modes as written",
            commands.join(", "),
            roots.len()
        ),
        normal.calls,
        &format!(
            "0 changes to any byte, mode, link count, mtime or ctime (whole tree compared before and after each call); {}",
            normal.summary()
        ),
    );

    for root in &roots {
        common::chmod_dirs(&root.state, 0o500);
    }
    let root_user = nix::unistd::geteuid().is_root();
    let protected = pass(&flow, &roots, &commands);
    for root in &roots {
        common::chmod_dirs(&root.state, 0o700);
    }
    figure(
        SCENARIO,
        &format!(
            "the same calls with write permission removed from every directory (chmod a-w){}",
            if root_user {
                " — running as root, which the kernel does not hold to it, so the before/after comparison is the proof"
            } else {
                ""
            }
        ),
        protected.calls,
        &format!(
            "0 changes to any byte, mode, link count, mtime or ctime; {} (receipt-diagnose and resume-check validate the 0700 run-directory contract as the reference does, so a 0500 tree is refused with exit 2 — a refusal, not a write)",
            protected.summary()
        ),
    );
}
