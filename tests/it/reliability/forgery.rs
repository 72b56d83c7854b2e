//! Scenario "8. Forged derived files" (trust-model §2 promises 1–3): one holding
//! `derived.key` (same uid) rewrites each derived file of a run in many
//! ways — stale state, zeroed, swapped with another run's, an older copy,
//! pointers moved — re-MACing the checkpoint (and re-binding the stamps of
//! the files it binds) so that every check resting on the key passes.
//! Then:
//!
//! - every auditor command (`verify`, `completion-check`, `status` with and
//!   without `--run-id`, `log`, `approvals`, `report`) answers byte for
//!   byte what it answers on a copy without any derived file;
//! - a sequence of following mutations (legal and illegal ones, the forgery
//!   applied again before each) answers as on the untouched copy (same exit
//!   status and error), and a full replay of the result has no rejection
//!   and no breach.
//!
//! Not in the group (contracts/receipt.md "What a mutation proves", the
//! residual): a key holder's table that drops older digests of a lane, with
//! a heartbeat then repeating such older evidence.

use serde_json::{Value, json};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{figure, size};
use crate::bed::forge::{
    assert_same_answers, auditor_answers, read_json, stale_checkpoint, write_macced,
};
use crate::bed::{Output, T0, TestBed, component, copy_tree, ev, heartbeat_input, lane_input};

const SCENARIO: &str = "8. Forged derived files";

const DERIVED: [&str; 5] = [
    "checkpoint.json",
    "checkpoint-digests.idx",
    "receipt-head.json",
    "run.json",
    "tree-hashes",
];

fn strip_derived(dir: &Path) {
    for name in DERIVED {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_dir_all(dir.join("lanes"));
}

/// `{"ctime_ns","dev","ino","mtime_ns","size"}` of a file, as the binary
/// stamps it.
fn stamp(path: &Path) -> Value {
    let m = std::fs::symlink_metadata(path).unwrap();
    json!({"ctime_ns": m.ctime() * 1_000_000_000 + m.ctime_nsec(), "dev": m.dev(),
           "ino": m.ino(), "mtime_ns": m.mtime() * 1_000_000_000 + m.mtime_nsec(), "size": m.size()})
}

/// The base: a run with a running lane `a` (three heartbeats), a pending
/// lane `b`, a starting lane `c`, a required component with a check; the
/// checkpoint and every derived file saved after each step (older copies),
/// and a second run in the same state root (for swaps).
struct Base {
    bed: TestBed,
    other: String,
    /// (step, copy of the run directory's derived files)
    older: Vec<(String, PathBuf)>,
    heartbeats: Vec<Value>,
}

fn save_derived(bed: &TestBed, name: &str) -> PathBuf {
    let to = bed.tmp.path().join(format!("older-{name}"));
    std::fs::create_dir_all(&to).unwrap();
    for file in DERIVED {
        let from = bed.dir.join(file);
        if from.exists() {
            std::fs::copy(&from, to.join(file)).unwrap();
        }
    }
    if bed.dir.join("lanes").exists() {
        copy_tree(&bed.dir.join("lanes"), &to.join("lanes"));
    }
    to
}

fn base() -> Base {
    let bed = TestBed::running(&["runtime"]);
    let mut older = Vec::new();
    let mut heartbeats = Vec::new();
    older.push(("started".to_string(), save_derived(&bed, "started")));
    bed.running_lane("a", None);
    older.push(("lane a running".into(), save_derived(&bed, "a-running")));
    bed.register(&json!([component("runtime", "a", true, &["unit"], &[])]))
        .assert_ok();
    for n in 1..=3 {
        let evidence = ev(&format!("heartbeat {n} of a"));
        bed.numbered_heartbeat("a", &evidence, n).assert_ok();
        heartbeats.push(evidence);
        older.push((
            format!("heartbeat {n}"),
            save_derived(&bed, &format!("hb{n}")),
        ));
    }
    bed.input(
        "lane-create",
        &ev("assign b"),
        &lane_input("b", "agent-b", &[]),
    )
    .assert_ok();
    bed.input(
        "lane-create",
        &ev("assign c"),
        &lane_input("c", "agent-c", &[]),
    )
    .assert_ok();
    older.push(("lanes b, c pending".into(), save_derived(&bed, "bc")));
    bed.lane_step("lane-start", "c", &ev("spawn c"), &[])
        .assert_ok();
    // A second run of the same state root, for swapped files.
    let init = crate::bed::init_argv(
        &bed.root,
        "A",
        &bed.repo,
        &bed.handle("other.owner"),
        &["runtime"],
    );
    let other = bed.flow.run(&init).assert_ok()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    for (command, summary) in [("run-approve", "approved"), ("run-start", "started")] {
        let evidence = bed.file(&ev(summary));
        bed.flow
            .run(&crate::bed::mutation_argv(
                &bed.root,
                command,
                &other,
                &bed.handle("other.owner"),
                &["--evidence", &evidence, "--at", T0],
            ))
            .assert_ok();
    }
    Base {
        bed,
        other,
        older,
        heartbeats,
    }
}

/// A forged copy of the base's state root.
struct Copy {
    root: PathBuf,
    dir: PathBuf,
    other_dir: PathBuf,
}

impl Copy {
    fn checkpoint(&self) -> PathBuf {
        self.dir.join("checkpoint.json")
    }

    /// Re-MAC the checkpoint after `edit`, binding the digest file's stamp
    /// as they are now (what a key holder does after editing them).
    fn rebind(&self, edit: impl FnOnce(&mut Value)) {
        let mut c = read_json(&self.checkpoint());
        edit(&mut c);
        if c.get("digest_stamps").is_some() {
            c["digest_stamps"] = json!({
                "index": stamp(&self.dir.join("checkpoint-digests.idx")),
            });
        }
        c["state_digest"] = json!(bluetape_flow::receipt::canonical::digest(&c["state"]));
        write_macced(&self.root, &self.checkpoint(), c);
    }
}

type Forge = Box<dyn Fn(&Base, &Copy)>;
/// An edit of a copy's derived files.
type Edit = fn(&Copy);

fn forgeries(base: &Base) -> Vec<(String, String, Forge)> {
    let mut out: Vec<(String, String, Forge)> = Vec::new();
    let mut add = |file: &str, name: String, forge: Forge| out.push((file.into(), name, forge));
    // checkpoint.json
    for (i, (step, _)) in base.older.iter().enumerate() {
        add(
            "checkpoint.json",
            format!("the checkpoint after \"{step}\", re-bound to the current receipt"),
            Box::new(move |b, c| {
                let older = read_json(&b.older[i].1.join("checkpoint.json"));
                let current = read_json(&c.checkpoint());
                write_macced(&c.root, &c.checkpoint(), stale_checkpoint(&older, &current));
            }),
        );
        add(
            "checkpoint.json",
            format!("the checkpoint after \"{step}\", as it was"),
            Box::new(move |b, c| {
                std::fs::copy(b.older[i].1.join("checkpoint.json"), c.checkpoint()).unwrap();
            }),
        );
    }
    for lane in ["a", "b", "c"] {
        for state in [
            "pending",
            "starting",
            "running",
            "completed",
            "failed",
            "suspected_stall",
            "blocked",
        ] {
            add(
                "checkpoint.json",
                format!("lane {lane} claimed {state}"),
                Box::new(move |_, c| {
                    c.rebind(|cp| {
                        let record = &mut cp["state"]["lanes"][lane];
                        record["state"] = json!(state);
                        record["last_event_type"] = json!(match state {
                            "pending" => "lane_created",
                            "starting" => "lane_started",
                            "running" => "startup_ack",
                            "completed" => "lane_completed",
                            "failed" => "lane_failed",
                            "suspected_stall" => "stall_suspected",
                            _ => "lane_blocked",
                        });
                    })
                }),
            );
        }
    }
    for lane in ["a", "b", "c"] {
        for sequence in 1..=16u64 {
            add(
                "checkpoint.json",
                format!("lane {lane}'s source moved to sequence {sequence}"),
                Box::new(move |_, c| {
                    c.rebind(|cp| cp["ours"]["lane_sources"][lane] = json!(sequence))
                }),
            );
        }
    }
    for run_state in ["planned", "approved", "blocked", "completed", "cancelled"] {
        add(
            "checkpoint.json",
            format!("run state claimed {run_state}"),
            Box::new(move |_, c| c.rebind(|cp| cp["state"]["run_state"] = json!(run_state))),
        );
    }
    add(
        "checkpoint.json",
        "owner epoch raised".into(),
        Box::new(|_, c| {
            c.rebind(|cp| {
                let epoch = cp["state"]["owner_epoch"].as_u64().unwrap();
                cp["state"]["owner_epoch"] = json!(epoch + 1)
            })
        }),
    );
    add(
        "checkpoint.json",
        "liveness digests of lane a dropped".into(),
        Box::new(|_, c| {
            c.rebind(|cp| {
                let a = cp["digest_counts"]["a"].as_u64().unwrap_or(0);
                cp["digest_counts"]["a"] = json!(0);
                let entries = cp["digest_entries"].as_u64().unwrap();
                cp["digest_entries"] = json!(entries - a);
            })
        }),
    );
    add(
        "checkpoint.json",
        "swapped with the other run's".into(),
        Box::new(|_, c| {
            std::fs::copy(c.other_dir.join("checkpoint.json"), c.checkpoint()).unwrap();
        }),
    );
    add(
        "checkpoint.json",
        "zeroed".into(),
        Box::new(|_, c| {
            let len = std::fs::metadata(c.checkpoint()).unwrap().len();
            std::fs::write(c.checkpoint(), vec![0u8; len as usize]).unwrap();
        }),
    );
    add(
        "checkpoint.json",
        "breaches invented".into(),
        Box::new(|_, c| {
            c.rebind(|cp| {
                cp["ours"]["breaches"] =
                    json!([{"found": "invented", "rule": "approval_gate", "sequence": 2}])
            })
        }),
    );
    // The digest table and its log.
    for (file, rebound) in [
        ("checkpoint-digests.idx", false),
        ("checkpoint-digests.idx", true),
    ] {
        let how = if rebound {
            ", the checkpoint re-bound"
        } else {
            ""
        };
        let edits: [(&str, Edit); 3] = [
            ("slots zeroed (header kept)", |c| {
                crate::bed::forge::zero_digest_slots(&c.dir)
            }),
            ("swapped with the other run's", |c| {
                let f = "checkpoint-digests.idx";
                std::fs::copy(c.other_dir.join(f), c.dir.join(f)).unwrap();
            }),
            ("log zeroed (the table kept)", |c| {
                crate::bed::forge::zero_digest_log(&c.dir)
            }),
        ];
        for (what, edit) in edits {
            add(
                file,
                format!("{what}{how}"),
                Box::new(move |_, c| {
                    edit(c);
                    if rebound {
                        c.rebind(|_| {});
                    }
                }),
            );
        }
    }
    // The other derived files: older copies, zeroed, swapped.
    for file in [
        "receipt-head.json",
        "run.json",
        "tree-hashes",
        "lanes/a.json",
    ] {
        for (i, (step, _)) in base.older.iter().enumerate() {
            add(
                file,
                format!("the copy after \"{step}\""),
                Box::new(move |b, c| {
                    let from = b.older[i].1.join(file);
                    if from.exists() {
                        std::fs::copy(from, c.dir.join(file)).unwrap();
                    }
                }),
            );
        }
        if file == "receipt-head.json" {
            // A head record names what the receipt must hold: one claiming
            // more is damage by design, so only true (older) heads here.
            continue;
        }
        add(
            file,
            "zeroed".into(),
            Box::new(move |_, c| {
                let path = c.dir.join(file);
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(64);
                std::fs::write(&path, vec![0u8; len as usize]).unwrap();
            }),
        );
        add(
            file,
            "swapped with the other run's".into(),
            Box::new(move |_, c| {
                let from = c.other_dir.join(file);
                if from.exists() {
                    std::fs::copy(from, c.dir.join(file)).unwrap();
                }
            }),
        );
    }
    out
}

/// The following mutations: (name, argv builder) run in order.
fn mutations(base: &Base) -> Vec<(&'static str, Vec<String>, Value)> {
    let hb = |n: u32, evidence: &Value| {
        (
            heartbeat_input(
                "a",
                "agent-a",
                &format!("2026-07-14T01:00:{:02}Z", 10 + n),
                "2026-07-14T01:05:00Z",
                &format!("still alive {n}"),
            ),
            evidence.clone(),
        )
    };
    let lane = |l: &str| {
        vec![
            "--lane-id".to_string(),
            l.to_string(),
            "--agent-id".into(),
            format!("agent-{l}"),
            "--at".into(),
            T0.into(),
        ]
    };
    let mut out = Vec::new();
    let latest = base.heartbeats.last().unwrap().clone();
    let (input, evidence) = hb(1, &latest);
    out.push((
        "heartbeat repeating the latest evidence",
        vec!["heartbeat".into(), "--input".into(), input.to_string()],
        evidence,
    ));
    let (input, evidence) = hb(2, &ev("fresh observation"));
    out.push((
        "heartbeat with fresh evidence",
        vec!["heartbeat".into(), "--input".into(), input.to_string()],
        evidence,
    ));
    let mut ack_b = vec!["startup-ack".to_string()];
    ack_b.extend(lane("b"));
    out.push(("startup-ack of the pending lane b", ack_b, ev("ack b")));
    let mut ack_c = vec!["startup-ack".to_string()];
    ack_c.extend(lane("c"));
    out.push(("startup-ack of the starting lane c", ack_c, ev("ack c")));
    let mut start_b = vec!["lane-start".to_string()];
    start_b.extend(lane("b"));
    out.push(("lane-start of b", start_b, ev("spawn b")));
    out.push((
        "check-result",
        vec![
            "check-result".into(),
            "--input".into(),
            json!({"component_id": "runtime", "check_id": "unit", "passed": true}).to_string(),
        ],
        ev("unit tests"),
    ));
    let mut again = vec!["lane-start".to_string()];
    again.extend(lane("c"));
    out.push(("lane-start of c again", again, ev("spawn c again")));
    out
}

/// Run one following mutation on `root` (`--input` values are written to
/// files first).
fn mutate(bed: &TestBed, root: &Path, argv: &[String], evidence: &Value) -> Output {
    let mut rest: Vec<String> = Vec::new();
    let mut args = argv[1..].iter();
    while let Some(arg) = args.next() {
        rest.push(arg.clone());
        if arg == "--input" {
            let value: Value = serde_json::from_str(args.next().unwrap()).unwrap();
            rest.push(bed.file(&value));
        }
    }
    rest.push("--evidence".into());
    rest.push(bed.file(evidence));
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    bed.flow.run(&crate::bed::mutation_argv(
        root,
        &argv[0],
        &bed.run_id,
        &root.join("handles/main.owner"),
        &rest,
    ))
}

/// The error code and message of a refusal, or "ok".
fn outcome(out: &Output) -> String {
    if out.code == 0 {
        return "ok".into();
    }
    let e = out.error();
    format!("{} {} {}", out.code, e["error"], e["message"])
}

#[test]
fn reliability_forgery_no_forged_derived_file_changes_a_verdict_or_lets_an_illegal_event_in() {
    let base = base();
    let bed = &base.bed;
    let work = bed.tmp.path().join("forgery");
    std::fs::create_dir_all(&work).unwrap();
    // The untouched answers: the same receipt with no derived file at all.
    let clean = work.join("clean");
    copy_tree(&bed.root, &clean);
    strip_derived(&clean.join("runs").join(&bed.run_id));
    let expected = auditor_answers(&bed.flow, &clean, &bed.run_id, &work);
    // The following mutations on an untouched copy (their answers).
    let follow = mutations(&base);
    let reference = work.join("reference");
    copy_tree(&bed.root, &reference);
    let expected_outcomes: Vec<String> = follow
        .iter()
        .map(|(_, argv, evidence)| outcome(&mutate(bed, &reference, argv, evidence)))
        .collect();
    assert!(
        expected_outcomes.iter().any(|o| o == "ok") && expected_outcomes.iter().any(|o| o != "ok"),
        "the following mutations mix legal and illegal ones: {expected_outcomes:?}"
    );
    let all = forgeries(&base);
    let quick = size(12, all.len() as u64) as usize;
    // Quick size: an even spread over the list.
    let step = all.len().div_ceil(quick.max(1)).max(1);
    let mut by_file: std::collections::BTreeMap<String, (u64, u64, u64)> = Default::default();
    for (i, (file, name, forge)) in all.iter().enumerate() {
        if i % step != 0 {
            continue;
        }
        let copy_root = work.join(format!("forged-{i}"));
        copy_tree(&bed.root, &copy_root);
        let copy = Copy {
            dir: copy_root.join("runs").join(&bed.run_id),
            other_dir: copy_root.join("runs").join(&base.other),
            root: copy_root.clone(),
        };
        forge(&base, &copy);
        let what = format!("{file}: {name}");
        assert_same_answers(
            &auditor_answers(&bed.flow, &copy_root, &bed.run_id, &work),
            &expected,
            &what,
        );
        let mut answered = 0u64;
        for ((label, argv, evidence), expected) in follow.iter().zip(&expected_outcomes) {
            forge(&base, &copy);
            let got = outcome(&mutate(bed, &copy_root, argv, evidence));
            assert_eq!(&got, expected, "{what}: {label} answered differently");
            answered += 1;
        }
        // A full replay of what was appended: no rejection, no breach.
        let replayed = work.join(format!("replayed-{i}"));
        copy_tree(&copy_root, &replayed);
        strip_derived(&replayed.join("runs").join(&bed.run_id));
        let root = replayed.to_string_lossy().into_owned();
        let verify = bed
            .flow
            .run(&["--state-root", &root, "verify", "--run-id", &bed.run_id])
            .assert_ok();
        assert!(verify.get("breaches").is_none(), "{what}: {verify}");
        let rebuild = bed
            .flow
            .run(&["--state-root", &root, "rebuild", "--run-id", &bed.run_id]);
        assert_eq!(rebuild.code, 0, "{what}: {rebuild:?}");
        let entry = by_file.entry(file.clone()).or_default();
        entry.0 += 1;
        entry.1 += expected.len() as u64;
        entry.2 += answered;
        for dir in [&copy_root, &replayed] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
    for (file, (forgeries, answers, mutations)) in by_file {
        figure(
            SCENARIO,
            &format!(
                "{file} forged with the key (stale state, zeroed, swapped between runs, older copies, moved pointers)"
            ),
            forgeries,
            &format!(
                "{answers} of {answers} auditor answers equal to those on a copy without derived files; {mutations} following mutations ({} legal, {} illegal on the untouched copy) answered as there; a full replay of each result: no rejection, no breach",
                expected_outcomes.iter().filter(|o| *o == "ok").count() * forgeries as usize,
                expected_outcomes.iter().filter(|o| *o != "ok").count() * forgeries as usize,
            ),
        );
    }
}
