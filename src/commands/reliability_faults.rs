//! Reliability scenario 6 (docs/reliability.md): failed writes and fsyncs. The
//! store's test-only fault injection (`store::secure::faults`) fails the n-th
//! write or the n-th fsync of this thread; for every n along an `init` and
//! along mutations, driven through the real command functions, the outcome is
//! the old state or the new one:
//!
//! - a command that returned success had its receipt line written and
//!   fsynced (in that order) before it returned;
//! - a command that failed left the receipt byte-identical and verifiable,
//!   no run directory or handle behind, no lock and no temp file, and the
//!   same command succeeds when retried.
//!
//! With `BLUETAPE_TORTURE_REPORT=<dir>` the measured counts are written to
//! `<dir>/faults.jsonl` for `scripts/torture.sh`.

use crate::store::input::JsonArg;
use chrono::TimeZone;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

use super::init::{InitEntropy, InitRequest, init};
use super::lanes::{LaneFlags, lane_create, lane_transition};
use super::lifecycle::run_transition;
use super::liveness::heartbeat;
use super::mutate::{MutationAnswer, MutationContext, OpenMutation};
use super::{FlowResult, verify};
use crate::coordinator::lane_commands::LaneCommand;
use crate::coordinator::run_commands::RunCommand;
use crate::store::discovery::DiscoveryEnv;
use crate::store::handle::OwnerToken;
use crate::store::root::StateRoot;
use crate::store::secure::FaultPoint;
use crate::store::secure::faults::{self, Attempt};

const RUN_ID: &str = "20260714T010000Z-0badc0de";

/// A scratch directory holding `repo/`, `inputs/` and the state root.
struct Scratch {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(base.join("repo")).unwrap();
        std::fs::create_dir(base.join("inputs")).unwrap();
        Scratch { _tmp: tmp, base }
    }

    /// The state root, begun as a command begins it (each call: the next
    /// command).
    fn root(&self) -> StateRoot {
        StateRoot::begin(&self.base.join("state"))
    }

    fn env(&self) -> DiscoveryEnv {
        DiscoveryEnv {
            cwd: self.base.clone(),
            home: Some(self.base.clone().into()),
            ..Default::default()
        }
    }

    /// A JSON input written to a file, as a command line names it.
    fn input(&self, name: &str, value: &Value) -> JsonArg {
        let path = self.base.join("inputs").join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        JsonArg::Given(path)
    }

    /// The input file `name` written before.
    fn given(&self, name: &str) -> JsonArg {
        JsonArg::Given(self.base.join("inputs").join(name))
    }

    fn init_request(&self, owner: &str) -> InitRequest {
        InitRequest {
            workflow_type: "A".into(),
            repo_root: self.base.join("repo"),
            owner_file: self.root().join("handles").join(owner),
            components: vec!["runtime".into()],
        }
    }

    /// `init` of a run whose owner handle is `owner`, drawn from `seed`.
    fn init(&self, owner: &str, seed: &str) -> FlowResult<super::init::InitOutcome> {
        init(
            &self.root(),
            &self.env(),
            &self.init_request(owner),
            &entropy(seed),
        )
    }

    fn ctx(&self) -> MutationContext {
        MutationContext {
            root: self.root(),
            run_id: RUN_ID.into(),
            owner_file: self.root().join("handles/main.owner"),
            expected_head: None,
            now: chrono::Utc.with_ymd_and_hms(2026, 7, 14, 1, 0, 0).unwrap(),
            at: None,
            env: self.env(),
        }
    }

    fn receipt(&self) -> PathBuf {
        self.root().join("runs").join(RUN_ID).join("receipt.jsonl")
    }
}

fn entropy(suffix: &str) -> InitEntropy {
    InitEntropy {
        now: chrono::Utc.with_ymd_and_hms(2026, 7, 14, 1, 0, 0).unwrap(),
        run_suffix: suffix.into(),
        token: OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097"),
        recorded: None,
        staging_suffix: "1".repeat(32),
    }
}

/// Copy a tree, keeping modes (the state root's 0700/0600 contract).
fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(from).unwrap();
    if meta.is_dir() {
        std::fs::create_dir(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
    std::fs::set_permissions(
        to,
        std::fs::Permissions::from_mode(meta.permissions().mode()),
    )
    .unwrap();
}

/// Every path under `dir` (sorted), for "nothing was left behind".
fn listing(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .flatten()
        .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

/// Did the log write `path` and then fsync it, with no failure in between
/// and no write to it after the fsync?
fn written_then_fsynced(log: &[Attempt], path: &Path) -> bool {
    let last_write = log
        .iter()
        .rposition(|a| a.point == FaultPoint::Write && a.path == path);
    let last_sync = log
        .iter()
        .rposition(|a| a.point == FaultPoint::Fsync && a.path == path);
    match (last_write, last_sync) {
        (Some(w), Some(s)) => {
            w < s
                && !log
                    .iter()
                    .any(|a| a.failed && a.path == path && a.point == FaultPoint::Write)
                && !log[s].failed
        }
        _ => false,
    }
}

/// The counts of one fault sweep.
#[derive(Debug, Default)]
struct Sweep {
    cases: usize,
    old_state: usize,
    new_state: usize,
    retried_ok: usize,
}

fn report(scenario: &str, case: &str, sweep: &Sweep) {
    let Some(dir) = std::env::var_os("BLUETAPE_TORTURE_REPORT") else {
        return;
    };
    use std::io::Write;
    let line = json!({
        "scenario": scenario,
        "case": case,
        "count": sweep.cases,
        "result": format!(
            "{} old state (all retried successfully: {}), {} new state (receipt written and fsynced before success), 0 other",
            sweep.old_state, sweep.retried_ok, sweep.new_state
        ),
    });
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&dir).join("faults.jsonl"))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

/// Run `command` once per write and once per fsync it performs, failing
/// exactly that one, on a fresh copy of `template`; `check` classifies the
/// outcome. Returns the sweep counts.
fn sweep<Answer: std::fmt::Debug>(
    template: &Scratch,
    command: impl Fn(&Scratch) -> FlowResult<Answer>,
    check: impl Fn(&Scratch, &FlowResult<Answer>, &[Attempt], &str) -> bool,
) -> Sweep {
    // A dry run counts the operations along the path.
    let dry = Scratch::new();
    std::fs::remove_dir_all(&dry.base).unwrap();
    copy_tree(&template.base, &dry.base);
    faults::arm(None);
    let result = command(&dry);
    let log = faults::disarm();
    assert!(result.is_ok(), "dry run failed: {result:?}");
    let writes = log.iter().filter(|a| a.point == FaultPoint::Write).count();
    let fsyncs = log.iter().filter(|a| a.point == FaultPoint::Fsync).count();
    assert!(writes > 0 && fsyncs > 0, "{log:?}");
    let mut out = Sweep::default();
    for (point, total) in [(FaultPoint::Write, writes), (FaultPoint::Fsync, fsyncs)] {
        for n in 1..=total {
            let scratch = Scratch::new();
            std::fs::remove_dir_all(&scratch.base).unwrap();
            copy_tree(&template.base, &scratch.base);
            faults::arm(Some((point, n)));
            let result = command(&scratch);
            let log = faults::disarm();
            let what = format!("{point:?} #{n} of {total}");
            assert!(
                log.iter().any(|a| a.failed),
                "{what}: the fault was not reached: {log:?}"
            );
            out.cases += 1;
            if check(&scratch, &result, &log, &what) {
                out.new_state += 1;
            } else {
                out.old_state += 1;
                // The old state is usable: the same command now succeeds.
                let retry = command(&scratch);
                assert!(retry.is_ok(), "{what}: retry failed: {retry:?}");
                out.retried_ok += 1;
            }
        }
    }
    out
}

/// The outcome check of a mutation: old receipt or old + one fsynced line,
/// never a failure that left the new line, never a lock or a temp file.
fn check_mutation(
    old_receipt: &[u8],
    scratch: &Scratch,
    result: &FlowResult<MutationAnswer>,
    log: &[Attempt],
    what: &str,
) -> bool {
    let receipt = std::fs::read(scratch.receipt()).unwrap();
    let run_dir = scratch.root().join("runs").join(RUN_ID);
    let leftovers: Vec<String> = listing(&run_dir)
        .into_iter()
        .filter(|p| p.ends_with(".tmp") || p.starts_with("locks/receipt") || p.contains(".init"))
        .collect();
    assert!(leftovers.is_empty(), "{what}: left behind {leftovers:?}");
    let verified = verify(&scratch.root(), RUN_ID);
    let old_sequence = old_receipt.iter().filter(|b| **b == b'\n').count() as u64;
    match result {
        Ok(out) => {
            assert!(
                written_then_fsynced(log, &scratch.receipt()),
                "{what}: success without a written and fsynced receipt line: {log:?}"
            );
            assert!(receipt.starts_with(old_receipt), "{what}: history changed");
            assert_eq!(
                receipt[old_receipt.len()..]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count(),
                1,
                "{what}"
            );
            let v = verified.unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(v.sequence, old_sequence + 1, "{what}");
            assert_eq!(json!(out.checksum), json!(v.checksum), "{what}");
            true
        }
        Err(e) => {
            assert!(
                receipt == old_receipt,
                "{what}: failed ({e:?}) but the receipt changed ({} -> {} bytes)",
                old_receipt.len(),
                receipt.len()
            );
            let v = verified.unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(v.sequence, old_sequence, "{what}");
            false
        }
    }
}

/// The template of the mutation sweeps: a run with a running lane.
fn running_run() -> Scratch {
    let scratch = Scratch::new();
    scratch.init("main.owner", "0badc0de").unwrap();
    let evidence = scratch.input("ev.json", &json!([{"kind": "plan", "summary": "go"}]));
    let open = || scratch.ctx().open_with_evidence(&evidence).unwrap();
    run_transition(&open(), RunCommand::Approve, None).unwrap();
    run_transition(&open(), RunCommand::Start, None).unwrap();
    let lane = scratch.input(
        "lane.json",
        &json!({"lane_id": "l1", "agent_id": "a1", "assignment": "work",
                "write_scope": [], "fallback": "main", "observed_at": "2026-07-14T01:00:00Z",
                "startup_ack_deadline": "2026-07-14T01:00:30Z",
                "command_deadline": "2099-01-01T00:00:00Z"}),
    );
    lane_create(&open(), &lane).unwrap();
    for (command, at) in [
        (LaneCommand::Start, "2026-07-14T01:00:05Z"),
        (LaneCommand::StartupAck, "2026-07-14T01:00:06Z"),
    ] {
        let flags = LaneFlags {
            lane_id: "l1",
            agent_id: "a1",
            at,
        };
        lane_transition(&open(), command, flags, None, None).unwrap();
    }
    scratch.input("beat-ev.json", &json!([{"kind": "log", "summary": "beat"}]));
    scratch.input(
        "beat.json",
        &json!({"lane_id": "l1", "agent_id": "a1", "observed_at": "2026-07-14T01:01:00Z",
                "silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": "alive"}),
    );
    scratch
}

/// Every failed write or fsync of one mutation of the running run (opened
/// with the evidence file `evidence`), each outcome held to
/// [`check_mutation`].
fn sweep_running_run(
    evidence: &str,
    command: impl Fn(&Scratch, &OpenMutation) -> FlowResult<MutationAnswer>,
) -> Sweep {
    let template = running_run();
    let old = std::fs::read(template.receipt()).unwrap();
    let open_and_run = |s: &Scratch| command(s, &s.ctx().open_with_evidence(&s.given(evidence))?);
    sweep(&template, open_and_run, |s, r, log, what| {
        check_mutation(&old, s, r, log, what)
    })
}

#[test]
fn reliability_faults_every_failed_write_or_fsync_of_a_heartbeat_keeps_old_or_new_state() {
    let sweep = sweep_running_run("beat-ev.json", |s, mutation| {
        heartbeat(mutation, &s.given("beat.json"))
    });
    assert_eq!(sweep.cases, sweep.old_state + sweep.new_state);
    assert!(sweep.old_state > 0 && sweep.new_state > 0, "{sweep:?}");
    report(
        "6. Failed writes",
        "heartbeat: every write and fsync failed in turn",
        &sweep,
    );
}

#[test]
fn reliability_faults_every_failed_write_or_fsync_of_a_run_transition_keeps_old_or_new_state() {
    // run-recovery-start on the running run: a plain (single-intent) event.
    let sweep = sweep_running_run("ev.json", |_, mutation| {
        run_transition(mutation, RunCommand::RecoveryStart, Some("fault sweep"))
    });
    assert_eq!(sweep.cases, sweep.old_state + sweep.new_state);
    report(
        "6. Failed writes",
        "run-recovery-start: every write and fsync failed in turn",
        &sweep,
    );
}

/// The outcome check of `init`: either a complete, verifiable run with its
/// published handle (and its receipt fsynced before success), or no new
/// run directory, no new handle and no staging file.
fn check_init(
    before_runs: &[String],
    before_handles: &[String],
    scratch: &Scratch,
    result: &FlowResult<super::init::InitAnswer>,
    log: &[Attempt],
    what: &str,
) -> bool {
    let root = scratch.root();
    let runs = listing(&root.join("runs"));
    let handles = listing(&root.join("handles"));
    let lock_litter: Vec<String> = listing(&root)
        .into_iter()
        .filter(|p| p.ends_with(".tmp") || p.contains("locks/receipt") || p.contains(".init"))
        .collect();
    assert!(
        lock_litter.is_empty(),
        "{what}: left behind {lock_litter:?}"
    );
    match result {
        Ok(_) => {
            let receipt = root.join("runs").join(RUN_ID).join("receipt.jsonl");
            assert!(
                written_then_fsynced(log, &receipt),
                "{what}: success without a fsynced receipt: {log:?}"
            );
            let v = verify(&root, RUN_ID).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(v.sequence, 1);
            assert!(root.join("handles/main.owner").is_file(), "{what}");
            true
        }
        Err(e) => {
            assert_eq!(runs, before_runs, "{what}: failed ({e:?}) but left a run");
            assert_eq!(
                handles, before_handles,
                "{what}: failed ({e:?}) but left a handle"
            );
            false
        }
    }
}

fn run_init(s: &Scratch) -> FlowResult<super::init::InitAnswer> {
    s.init("main.owner", "0badc0de")
        .map(|outcome| outcome.answer(None))
}

#[test]
fn reliability_faults_every_failed_write_or_fsync_of_init_keeps_old_or_new_state() {
    // A new state root: nothing exists yet.
    let template = Scratch::new();
    let sweep_new = sweep(&template, run_init, |s, r, log, what| {
        check_init(&[], &[], s, r, log, what)
    });
    assert_eq!(sweep_new.cases, sweep_new.old_state + sweep_new.new_state);
    report(
        "6. Failed writes",
        "init of a new state root: every write and fsync failed in turn",
        &sweep_new,
    );

    // An existing state root that already holds another run and handle.
    let template = Scratch::new();
    template.init("other.owner", "00000001").unwrap();
    let runs = listing(&template.root().join("runs"));
    let handles = listing(&template.root().join("handles"));
    let sweep_existing = sweep(&template, run_init, |s, r, log, what| {
        check_init(&runs, &handles, s, r, log, what)
    });
    assert_eq!(
        sweep_existing.cases,
        sweep_existing.old_state + sweep_existing.new_state
    );
    report(
        "6. Failed writes",
        "init beside an existing run: every write and fsync failed in turn",
        &sweep_existing,
    );
}
