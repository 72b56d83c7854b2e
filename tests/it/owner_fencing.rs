//! Owner fencing across the whole command surface. A run is resumed twice
//! (epoch 3); then EVERY mutation command `--help` lists is run with owner
//! handles that must not work — copies of the epoch-1 and epoch-2 handles,
//! another run's handle, a 0644 handle, a missing handle, the path a resume
//! removed — and each refusal must carry the reference's exit status and
//! error code and leave the state root byte-identical.
//!
//! The table below maps each mutation command to an argv builder whose
//! input passes the command's pre-lock checks, so the owner check is what
//! refuses. A mutation command in `--help` without a table entry fails the
//! test: a new command must say how it is fenced.

use crate::bed as common;

use bluetape_flow::receipt::canonical;
use common::{Flow, Output, TestBed, bed_type};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How a mutation command proves its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// The receipt pipeline: a contained owner read, then the fingerprint
    /// and epoch compared under the lock.
    Pipeline,
    /// `resume`, `handoff-create`, `live-report-create`: a plain owner read
    /// compared with the replayed owner before the lock (then the pipeline).
    PlainRead,
    /// `recovery-run-create`: `--owner-file` names the NEW run's handle and
    /// the damaged run is never written; on a healthy run every request is
    /// refused before any handle is looked at.
    NewRunOwner,
    /// `init`: `--owner-file` names the handle of a run it creates. An
    /// existing file is refused; a free name starts an independent run and
    /// leaves every existing run untouched.
    CreatesRun,
    /// No `--owner-file` flag at all; passing one is a usage error.
    NoOwner,
}

/// One mutation command: its guard and the argv after `<command>`, built
/// for the test bed with the given owner handle.
struct Entry {
    command: &'static str,
    guard: Guard,
    argv: fn(&Bed, &Path) -> Vec<String>,
}

fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

/// The common prefix of an owner-guarded command.
fn owned(bed: &Bed, owner: &Path, rest: &[&str]) -> Vec<String> {
    let mut argv = s(&["--run-id", &bed.run_id, "--owner-file", &text(owner)]);
    argv.extend(s(rest));
    argv
}

/// A lane step on the bed's lane `build` (agent `agent-1`).
fn step(bed: &Bed, owner: &Path, rest: &[&str]) -> Vec<String> {
    let mut argv = owned(
        bed,
        owner,
        &[
            "--evidence",
            &bed.work_file("ev.json"),
            "--lane-id",
            "build",
            "--agent-id",
            "agent-1",
            "--at",
            "2026-07-14T01:10:00Z",
        ],
    );
    argv.extend(s(rest));
    argv
}

fn run_step(bed: &Bed, owner: &Path, rest: &[&str]) -> Vec<String> {
    let mut argv = owned(bed, owner, &["--evidence", &bed.work_file("ev.json")]);
    argv.extend(s(rest));
    argv
}

fn lineage(bed: &Bed, owner: &Path) -> Vec<String> {
    owned(
        bed,
        owner,
        &[
            "--evidence",
            &bed.work_file("ev.json"),
            "--lane-id",
            "build",
            "--replacement-lane-id",
            "build-2",
            "--at",
            "2026-07-14T01:10:00Z",
        ],
    )
}

/// Every mutation command.
fn table() -> Vec<Entry> {
    vec![
        Entry {
            command: "topology-register",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--input", &bed.work_file("topology.json")]),
        },
        Entry {
            command: "topology-remove",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                run_step(
                    bed,
                    owner,
                    &["--component-id", "runtime", "--reason", "out of scope"],
                )
            },
        },
        Entry {
            command: "check-result",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--input", &bed.work_file("check.json")]),
        },
        Entry {
            command: "component-evidence",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--input", &bed.work_file("component.json")]),
        },
        Entry {
            command: "complete",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &[]),
        },
        Entry {
            command: "lane-resolve",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                run_step(
                    bed,
                    owner,
                    &[
                        "--lane-id",
                        "build",
                        "--resolution-lane-id",
                        "docs",
                        "--at",
                        "2026-07-14T01:10:00Z",
                    ],
                )
            },
        },
        Entry {
            command: "init",
            guard: Guard::CreatesRun,
            argv: |bed, owner| {
                s(&[
                    "--workflow-type",
                    "A",
                    "--repo-root",
                    &text(&bed.repo),
                    "--owner-file",
                    &text(owner),
                    "--component",
                    "runtime",
                ])
            },
        },
        Entry {
            command: "rebuild",
            guard: Guard::NoOwner,
            argv: |bed, _| s(&["--run-id", &bed.run_id]),
        },
        Entry {
            command: "run-approve",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &[]),
        },
        Entry {
            command: "run-start",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &[]),
        },
        Entry {
            command: "run-recovery-start",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--reason", "drift"]),
        },
        Entry {
            command: "run-recovery-finish",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &[]),
        },
        Entry {
            command: "run-fail",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--reason", "broken"]),
        },
        Entry {
            command: "run-block",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--reason", "waiting"]),
        },
        Entry {
            command: "run-cancel",
            guard: Guard::Pipeline,
            argv: |bed, owner| run_step(bed, owner, &["--reason", "stop"]),
        },
        Entry {
            command: "lane-create",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                owned(
                    bed,
                    owner,
                    &[
                        "--input",
                        &bed.work_file("lane-docs.json"),
                        "--evidence",
                        &bed.work_file("ev.json"),
                    ],
                )
            },
        },
        Entry {
            command: "lane-start",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &[]),
        },
        Entry {
            command: "startup-ack",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &[]),
        },
        Entry {
            command: "probe-ack",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &[]),
        },
        Entry {
            command: "lane-complete",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                step(
                    bed,
                    owner,
                    &["--changed-paths", &bed.work_file("changed.json")],
                )
            },
        },
        Entry {
            command: "lane-fail",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &["--reason", "broken"]),
        },
        Entry {
            command: "lane-block",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &["--reason", "waiting"]),
        },
        Entry {
            command: "lane-cancel",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &["--reason", "stop"]),
        },
        Entry {
            command: "lane-reassign",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                owned(
                    bed,
                    owner,
                    &[
                        "--input",
                        &bed.work_file("reassign.json"),
                        "--evidence",
                        &bed.work_file("ev-recovery.json"),
                    ],
                )
            },
        },
        Entry {
            command: "replacement-repair",
            guard: Guard::Pipeline,
            argv: lineage,
        },
        Entry {
            command: "replacement-block",
            guard: Guard::Pipeline,
            argv: lineage,
        },
        Entry {
            command: "replacement-close",
            guard: Guard::Pipeline,
            argv: lineage,
        },
        Entry {
            command: "heartbeat",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                owned(
                    bed,
                    owner,
                    &[
                        "--input",
                        &bed.work_file("heartbeat.json"),
                        "--evidence",
                        &bed.work_file("ev.json"),
                    ],
                )
            },
        },
        Entry {
            command: "stall-record",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                let mut argv = owned(
                    bed,
                    owner,
                    &[
                        "--evidence",
                        &bed.work_file("ev-stall.json"),
                        "--lane-id",
                        "build",
                        "--agent-id",
                        "agent-1",
                        "--at",
                        "2026-07-14T01:10:00Z",
                    ],
                );
                argv.extend(s(&[
                    "--reason",
                    "no fresh evidence",
                    "--decision",
                    &bed.work_file("decision.json"),
                ]));
                argv
            },
        },
        Entry {
            command: "stall-clear",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &["--reason", "alive again"]),
        },
        Entry {
            command: "probe-sent",
            guard: Guard::Pipeline,
            argv: |bed, owner| step(bed, owner, &["--deadline", "2026-07-14T01:10:30Z"]),
        },
        Entry {
            command: "interrupt-result",
            guard: Guard::Pipeline,
            argv: |bed, owner| {
                let mut argv = step(bed, owner, &[]);
                // The native interrupt tool's evidence is a pre-lock rule.
                let at = argv.iter().position(|a| a == "--evidence").unwrap();
                argv[at + 1] = bed.work_file("ev-interrupt.json");
                argv
            },
        },
        Entry {
            command: "resume",
            guard: Guard::PlainRead,
            argv: |bed, owner| {
                let new_owner = bed.root.join("handles/never-created.owner");
                owned(
                    bed,
                    owner,
                    &[
                        "--evidence",
                        &bed.work_file("ev.json"),
                        "--new-owner-file",
                        &text(&new_owner),
                    ],
                )
            },
        },
        Entry {
            command: "handoff-create",
            guard: Guard::PlainRead,
            argv: |bed, owner| owned(bed, owner, &["--input", &bed.work_file("handoff.json")]),
        },
        Entry {
            command: "live-report-create",
            guard: Guard::PlainRead,
            argv: |bed, owner| owned(bed, owner, &["--input", &bed.work_file("handoff.json")]),
        },
        Entry {
            command: "recovery-run-create",
            guard: Guard::NewRunOwner,
            argv: |bed, owner| {
                owned(
                    bed,
                    owner,
                    &[
                        "--input",
                        &bed.work_file("diagnosis.json"),
                        "--evidence",
                        &bed.work_file("ev.json"),
                    ],
                )
            },
        },
    ]
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The mutation commands `--help` lists ("Mutation." descriptions).
fn help_mutations(flow: &Flow) -> Vec<String> {
    let out = flow.run(&["--help"]);
    assert_eq!(out.code, 0, "{out:?}");
    let mut in_commands = false;
    let mut names = Vec::new();
    for line in out.stdout.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands && line.trim().is_empty() {
            break;
        }
        if in_commands {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap_or_default();
            let description: Vec<&str> = words.collect();
            if description.first() == Some(&"Mutation.") {
                names.push(name.to_string());
            }
        }
    }
    assert!(names.len() > 10, "could not parse --help: {}", out.stdout);
    names
}

bed_type!(
    /// A run at epoch 3 (resumed twice) with one started lane, a second run
    /// in the same state root, and every input file the table needs.
    Bed
);

impl Bed {
    fn new() -> Bed {
        let bed = Bed(TestBed::planned(&["runtime"]));
        bed.write_inputs();
        let main = bed.handle("main.owner");
        for command in ["run-approve", "run-start"] {
            bed.ok(&run_step(&bed, &main, &[]), command);
        }
        let lane = owned(
            &bed,
            &main,
            &[
                "--input",
                &bed.work_file("lane-build.json"),
                "--evidence",
                &bed.work_file("ev.json"),
            ],
        );
        bed.ok(&lane, "lane-create");
        // Keep a copy of each handle before the resume that fences it.
        bed.copy_handle("main.owner", "epoch1.owner", 0o600);
        bed.resume("main.owner", "owner-2.owner");
        bed.copy_handle("owner-2.owner", "epoch2.owner", 0o600);
        bed.resume("owner-2.owner", "owner-3.owner");
        assert!(!bed.handle("main.owner").exists());
        assert!(!bed.handle("owner-2.owner").exists());
        // Another run in the same state root, with its own handle.
        let other = common::init_argv(
            &bed.root,
            "A",
            &bed.repo,
            &bed.handle("other.owner"),
            &["runtime"],
        );
        bed.flow.run(&other).assert_ok();
        // The current owner's handle with a loose mode: only the mode is wrong.
        bed.copy_handle("owner-3.owner", "loose.owner", 0o644);
        // The healthy run's own diagnosis (recovery-run-create input).
        let out = bed.flow.run(&[
            "--state-root",
            &text(&bed.root),
            "receipt-diagnose",
            "--run-id",
            &bed.run_id,
        ]);
        std::fs::write(bed.work.join("diagnosis.json"), out.assert_ok().to_string()).unwrap();
        bed
    }

    fn copy_handle(&self, from: &str, to: &str, mode: u32) {
        let target = self.handle(to);
        std::fs::copy(self.handle(from), &target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn resume(&self, from: &str, to: &str) {
        let argv = owned(
            self,
            &self.handle(from),
            &[
                "--evidence",
                &self.work_file("ev.json"),
                "--new-owner-file",
                &text(&self.handle(to)),
            ],
        );
        self.ok(&argv, "resume");
    }

    fn write_inputs(&self) {
        self.put(
            "ev.json",
            &json!([{"kind": "user_approval", "summary": "ok"}]),
        );
        let lane = |id: &str| {
            json!({"lane_id": id, "agent_id": "agent-1", "assignment": "build it",
                   "write_scope": ["src"], "fallback": "stop",
                   "observed_at": "2026-07-14T01:00:00Z",
                   "startup_ack_deadline": "2026-07-14T01:05:00Z",
                   "command_deadline": "2026-07-14T02:00:00Z"})
        };
        self.put("lane-build.json", &lane("build"));
        self.put("lane-docs.json", &lane("docs"));
        self.put("changed.json", &json!(["src/lib.rs"]));
        self.put(
            "heartbeat.json",
            &json!({"lane_id": "build", "agent_id": "agent-1",
                    "observed_at": "2026-07-14T01:10:00Z",
                    "silence_lease_deadline": "2026-07-14T01:15:00Z", "reason": "working"}),
        );
        let decision = json!({"action": "suspect_stall", "reason": "no fresh evidence"});
        self.put("decision.json", &decision);
        self.put(
            "ev-stall.json",
            &json!([{"kind": "liveness", "summary": "decision",
                     "checksum": canonical::digest(&decision)}]),
        );
        self.put(
            "reassign.json",
            &json!({"lane_id": "build", "replacement_lane_id": "build-2",
                    "replacement_agent_id": "agent-2", "decided_at": "2026-07-14T01:10:00Z",
                    "replacement_assignment": "resume from checkpoint",
                    "replacement_write_scope": ["src"],
                    "replacement_startup_ack_deadline": "2026-07-14T01:15:00Z",
                    "replacement_command_deadline": "2026-07-14T02:00:00Z"}),
        );
        self.put(
            "ev-interrupt.json",
            &json!([{"kind": "tool", "summary": "native interrupt sent"}]),
        );
        self.put(
            "ev-recovery.json",
            &json!([{"kind": "recovery", "summary": "checkpoint recovered"}]),
        );
        self.put(
            "topology.json",
            &json!([{"id": "runtime", "required": true, "description": "the runtime",
                     "owner_lane": "build", "required_checks": ["unit"], "dependencies": [],
                     "evidence_refs": [], "coverage_state": "missing"}]),
        );
        self.put(
            "check.json",
            &json!({"component_id": "runtime", "check_id": "unit", "passed": true}),
        );
        self.put("component.json", &json!({"component_id": "runtime"}));
        // The owner check comes before the report payload is validated.
        self.put("handoff.json", &json!({"run_id": "whatever"}));
    }

    fn run(&self, command: &str, argv: &[String]) -> Output {
        let mut full = s(&["--state-root", &text(&self.root), command]);
        full.extend(argv.iter().cloned());
        self.flow.run(&full)
    }

    fn ok(&self, argv: &[String], command: &str) -> Value {
        self.run(command, argv).assert_ok()
    }
}

/// A handle that must not work, and what each guard answers for it.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// A copy of the handle of an earlier epoch (fenced by a resume).
    Stale(&'static str),
    /// (a) another run's handle.
    OtherRun,
    /// (b) the current owner's handle with mode 0644.
    LooseMode,
    /// (c) a handle file that does not exist.
    Missing,
    /// (d) the path of a handle a resume removed.
    RemovedByResume(&'static str),
}

impl Case {
    fn handle(self, bed: &Bed) -> PathBuf {
        match self {
            Case::Stale(name) => bed.handle(name),
            Case::OtherRun => bed.handle("other.owner"),
            Case::LooseMode => bed.handle("loose.owner"),
            Case::Missing => bed.handle("ghost.owner"),
            Case::RemovedByResume(name) => bed.handle(name),
        }
    }

    /// What the guard answers for this handle.
    fn expected(self, guard: Guard) -> Outcome {
        let refused = |code, error, message| Outcome::Refused(code, error, message);
        match (guard, self) {
            (Guard::NoOwner, _) => refused(2, "contract_error", "--owner-file"),
            (Guard::CreatesRun, Case::Missing | Case::RemovedByResume(_)) => Outcome::NewRunOnly,
            (Guard::CreatesRun, _) => refused(2, "contract_error", "owner handle already exists"),
            (Guard::NewRunOwner, _) => refused(
                2,
                "contract_error",
                "recovery run requires a blocked receipt diagnosis",
            ),
            (Guard::Pipeline, Case::Stale(_)) => refused(
                5,
                "coordinator_conflict",
                "owner handle does not match the current run owner",
            ),
            (Guard::PlainRead, Case::Stale(_) | Case::OtherRun) => {
                refused(5, "coordinator_conflict", "owner handle is stale")
            }
            (Guard::Pipeline, Case::OtherRun) => {
                refused(2, "contract_error", "owner handle belongs to another run")
            }
            (_, Case::LooseMode) => refused(
                2,
                "contract_error",
                "owner handle does not have the required secure mode",
            ),
            (_, Case::Missing | Case::RemovedByResume(_)) => {
                refused(2, "contract_error", "No such file or directory")
            }
        }
    }
}

/// What a command does with a handle that must not work.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Refused: exit status, error code, message (or a fragment of it).
    Refused(i32, &'static str, &'static str),
    /// `init` with a free handle name: a new, independent run and nothing
    /// else.
    NewRunOnly,
}

/// Run every table entry with the case's handle: each is refused as
/// expected and the state root is byte-identical afterwards.
fn every_mutation_refuses(bed: &Bed, case: Case) {
    let receipt = bed
        .root
        .join("runs")
        .join(&bed.run_id)
        .join("receipt.jsonl");
    let receipt_before = std::fs::read(&receipt).unwrap();
    for entry in table() {
        let handle = case.handle(bed);
        let mut argv = (entry.argv)(bed, &handle);
        if entry.guard == Guard::NoOwner {
            argv.extend(s(&["--owner-file", &text(&handle)]));
        }
        let before = common::snapshot(&bed.root);
        let out = bed.run(entry.command, &argv);
        match case.expected(entry.guard) {
            Outcome::Refused(code, error, message) => {
                let e = out.assert_error(code, error);
                let got = e["message"].as_str().unwrap();
                assert!(
                    got == message || got.contains(message),
                    "{} with {case:?}: {got}",
                    entry.command
                );
            }
            Outcome::NewRunOnly => {
                // Undo exactly the new run and its handle; then nothing
                // else may differ.
                let new_run = out.assert_ok()["run_id"].as_str().unwrap().to_string();
                assert_ne!(new_run, bed.run_id);
                std::fs::remove_dir_all(bed.root.join("runs").join(&new_run)).unwrap();
                std::fs::remove_file(&handle).unwrap();
            }
        }
        assert_eq!(
            before,
            common::snapshot(&bed.root),
            "{} with {case:?} changed the state",
            entry.command
        );
    }
    assert_eq!(std::fs::read(&receipt).unwrap(), receipt_before);
}

#[test]
fn help_lists_no_mutation_without_a_table_entry() {
    let bed = Bed::new();
    let listed = help_mutations(&bed.flow);
    let table: Vec<&str> = table().iter().map(|e| e.command).collect();
    let missing: Vec<&String> = listed
        .iter()
        .filter(|c| !table.contains(&c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "mutation commands without an owner-fencing entry: {missing:?}"
    );
    let unknown: Vec<&&str> = table
        .iter()
        .filter(|c| !listed.iter().any(|l| l == *c))
        .collect();
    assert!(
        unknown.is_empty(),
        "table entries --help does not list as mutations: {unknown:?}"
    );
}

#[test]
fn handles_of_epochs_one_and_two_change_nothing_after_two_resumes() {
    let bed = Bed::new();
    let check = bed.flow.run(&[
        "--state-root",
        &text(&bed.root),
        "resume-check",
        "--run-id",
        &bed.run_id,
    ]);
    assert_eq!(check.assert_ok()["owner_epoch"], 3);
    every_mutation_refuses(&bed, Case::Stale("epoch1.owner"));
    every_mutation_refuses(&bed, Case::Stale("epoch2.owner"));
    // The bed is live: the epoch-3 handle still works.
    let out = bed.run("lane-start", &step(&bed, &bed.handle("owner-3.owner"), &[]));
    assert_eq!(out.assert_ok()["sequence"], 7);
}

#[test]
fn another_runs_handle_changes_nothing() {
    every_mutation_refuses(&Bed::new(), Case::OtherRun);
}

#[test]
fn a_handle_with_mode_0644_changes_nothing() {
    every_mutation_refuses(&Bed::new(), Case::LooseMode);
}

#[test]
fn a_missing_handle_changes_nothing() {
    every_mutation_refuses(&Bed::new(), Case::Missing);
}

#[test]
fn the_handle_paths_a_resume_removed_change_nothing() {
    let bed = Bed::new();
    every_mutation_refuses(&bed, Case::RemovedByResume("main.owner"));
    every_mutation_refuses(&bed, Case::RemovedByResume("owner-2.owner"));
}
