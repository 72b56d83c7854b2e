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

/// When the table's lane and lineage steps happen.
const AT: &str = "2026-07-14T01:10:00Z";

/// One mutation command: its guard and how its argv after `<command>` is
/// built for the test bed with a given owner handle.
struct Entry {
    command: &'static str,
    guard: Guard,
    args: Args,
}

/// The argv of a table entry after `<command>`, for the bed's run and the
/// given owner handle (inputs are the bed's work files).
#[derive(Clone, Copy)]
enum Args {
    /// [`run_step`]: `--evidence ev.json`, then these.
    Run(&'static [&'static str]),
    /// [`run_step`] with `--input <this work file>`.
    RunInput(&'static str),
    /// [`step`] on lane `build`, then these.
    Lane(&'static [&'static str]),
    /// The owner, `--input <work file>`, `--evidence <work file>`.
    InputEvidence(&'static str, &'static str),
    /// The owner and `--input <work file>` only.
    Input(&'static str),
    /// [`lineage`]: lane `build` replaced by `build-2`.
    Lineage,
    /// Built by hand.
    Custom(fn(&Bed, &Path) -> Vec<String>),
}

impl Args {
    fn build(self, bed: &Bed, owner: &Path) -> Vec<String> {
        match self {
            Args::Run(rest) => run_step(bed, owner, rest),
            Args::RunInput(file) => run_step(bed, owner, &["--input", &bed.work_file(file)]),
            Args::Lane(rest) => step(bed, owner, rest),
            Args::InputEvidence(input, evidence) => owned(
                bed,
                owner,
                &[
                    "--input",
                    &bed.work_file(input),
                    "--evidence",
                    &bed.work_file(evidence),
                ],
            ),
            Args::Input(file) => owned(bed, owner, &["--input", &bed.work_file(file)]),
            Args::Lineage => lineage(bed, owner),
            Args::Custom(build) => build(bed, owner),
        }
    }
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

/// A lane step on the bed's lane `build` (agent `agent-1`) with the
/// evidence file `evidence`.
fn lane_step_with(bed: &Bed, owner: &Path, evidence: &str, rest: &[&str]) -> Vec<String> {
    let mut argv = owned(
        bed,
        owner,
        &[
            "--evidence",
            &bed.work_file(evidence),
            "--lane-id",
            "build",
            "--agent-id",
            "agent-1",
            "--at",
            AT,
        ],
    );
    argv.extend(s(rest));
    argv
}

/// A lane step on the bed's lane `build` (agent `agent-1`).
fn step(bed: &Bed, owner: &Path, rest: &[&str]) -> Vec<String> {
    lane_step_with(bed, owner, "ev.json", rest)
}

fn run_step(bed: &Bed, owner: &Path, rest: &[&str]) -> Vec<String> {
    let mut argv = owned(bed, owner, &["--evidence", &bed.work_file("ev.json")]);
    argv.extend(s(rest));
    argv
}

fn lineage(bed: &Bed, owner: &Path) -> Vec<String> {
    run_step(
        bed,
        owner,
        &[
            "--lane-id",
            "build",
            "--replacement-lane-id",
            "build-2",
            "--at",
            AT,
        ],
    )
}

/// Every mutation command.
fn table() -> Vec<Entry> {
    use Args::*;
    use Guard::*;
    let entries: Vec<(&'static str, Guard, Args)> = vec![
        ("topology-register", Pipeline, RunInput("topology.json")),
        (
            "topology-remove",
            Pipeline,
            Run(&["--component-id", "runtime", "--reason", "out of scope"]),
        ),
        ("check-result", Pipeline, RunInput("check.json")),
        ("component-evidence", Pipeline, RunInput("component.json")),
        ("complete", Pipeline, Run(&[])),
        (
            "lane-resolve",
            Pipeline,
            Run(&[
                "--lane-id",
                "build",
                "--resolution-lane-id",
                "docs",
                "--at",
                AT,
            ]),
        ),
        (
            "init",
            CreatesRun,
            Custom(|bed, owner| {
                let argv = common::init_argv(&bed.root, "A", &bed.repo, owner, &["runtime"]);
                // Without `--state-root <root> init`: `Bed::run` adds them.
                argv[3..]
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect()
            }),
        ),
        (
            "rebuild",
            NoOwner,
            Custom(|bed, _| s(&["--run-id", &bed.run_id])),
        ),
        ("run-approve", Pipeline, Run(&[])),
        ("run-start", Pipeline, Run(&[])),
        ("run-recovery-start", Pipeline, Run(&["--reason", "drift"])),
        ("run-recovery-finish", Pipeline, Run(&[])),
        ("run-fail", Pipeline, Run(&["--reason", "broken"])),
        ("run-block", Pipeline, Run(&["--reason", "waiting"])),
        ("run-cancel", Pipeline, Run(&["--reason", "stop"])),
        (
            "lane-create",
            Pipeline,
            InputEvidence("lane-docs.json", "ev.json"),
        ),
        ("lane-start", Pipeline, Lane(&[])),
        ("startup-ack", Pipeline, Lane(&[])),
        ("probe-ack", Pipeline, Lane(&[])),
        (
            "lane-complete",
            Pipeline,
            Custom(|bed, owner| {
                step(
                    bed,
                    owner,
                    &["--changed-paths", &bed.work_file("changed.json")],
                )
            }),
        ),
        ("lane-fail", Pipeline, Lane(&["--reason", "broken"])),
        ("lane-block", Pipeline, Lane(&["--reason", "waiting"])),
        ("lane-cancel", Pipeline, Lane(&["--reason", "stop"])),
        (
            "lane-reassign",
            Pipeline,
            InputEvidence("reassign.json", "ev-recovery.json"),
        ),
        ("replacement-repair", Pipeline, Lineage),
        ("replacement-block", Pipeline, Lineage),
        ("replacement-close", Pipeline, Lineage),
        (
            "heartbeat",
            Pipeline,
            InputEvidence("heartbeat.json", "ev.json"),
        ),
        (
            "stall-record",
            Pipeline,
            Custom(|bed, owner| {
                let decision = bed.work_file("decision.json");
                let rest = ["--reason", "no fresh evidence", "--decision", &decision];
                lane_step_with(bed, owner, "ev-stall.json", &rest)
            }),
        ),
        ("stall-clear", Pipeline, Lane(&["--reason", "alive again"])),
        (
            "probe-sent",
            Pipeline,
            Lane(&["--deadline", "2026-07-14T01:10:30Z"]),
        ),
        (
            "interrupt-result",
            Pipeline,
            // The native interrupt tool's evidence is a pre-lock rule.
            Custom(|bed, owner| lane_step_with(bed, owner, "ev-interrupt.json", &[])),
        ),
        (
            "resume",
            PlainRead,
            Custom(|bed, owner| {
                let new_owner = bed.root.join("handles/never-created.owner");
                run_step(bed, owner, &["--new-owner-file", &text(&new_owner)])
            }),
        ),
        ("handoff-create", PlainRead, Input("handoff.json")),
        ("live-report-create", PlainRead, Input("handoff.json")),
        (
            "recovery-run-create",
            NewRunOwner,
            InputEvidence("diagnosis.json", "ev.json"),
        ),
    ];
    entries
        .into_iter()
        .map(|(command, guard, args)| Entry {
            command,
            guard,
            args,
        })
        .collect()
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
        let lane = Args::InputEvidence("lane-build.json", "ev.json").build(&bed, &main);
        bed.ok(&lane, "lane-create");
        // Keep a copy of each handle before the resume that fences it.
        bed.copy_handle("main.owner", "epoch1.owner", 0o600);
        bed.resume("main.owner", "owner-2.owner");
        bed.copy_handle("owner-2.owner", "epoch2.owner", 0o600);
        bed.resume("owner-2.owner", "owner-3.owner");
        assert!(!bed.handle("main.owner").exists());
        assert!(!bed.handle("owner-2.owner").exists());
        // Another run in the same state root, with its own handle.
        bed.init_another("other.owner", &bed.repo).assert_ok();
        // The current owner's handle with a loose mode: only the mode is wrong.
        bed.copy_handle("owner-3.owner", "loose.owner", 0o644);
        // The healthy run's own diagnosis (recovery-run-create input).
        let out = bed.read("receipt-diagnose", &[]);
        std::fs::write(bed.work.join("diagnosis.json"), out.assert_ok().to_string()).unwrap();
        bed
    }

    fn copy_handle(&self, from: &str, to: &str, mode: u32) {
        let target = self.handle(to);
        std::fs::copy(self.handle(from), &target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn resume(&self, from: &str, to: &str) {
        let argv = run_step(
            self,
            &self.handle(from),
            &["--new-owner-file", &text(&self.handle(to))],
        );
        self.ok(&argv, "resume");
    }

    fn write_inputs(&self) {
        self.put("ev.json", &crate::bed::user_approval("ok"));
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
    let receipt = bed.receipt_path();
    let receipt_before = std::fs::read(&receipt).unwrap();
    for entry in table() {
        let handle = case.handle(bed);
        let mut argv = entry.args.build(bed, &handle);
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
    let check = bed.read("resume-check", &[]);
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
