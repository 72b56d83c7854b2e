//! Reliability scenario 4 (docs/reliability.md): a hostile filesystem. Each
//! case puts one hostile object where the state root expects its own — a
//! symlink (to a real, valid target elsewhere), a directory or file with a
//! wider mode, a FIFO, a hard-linked handle — and runs a mutation
//! (`heartbeat`) or `init` through the binary. Every case is refused with a
//! typed error before anything is written: the whole tree, the symlink
//! targets included, keeps every byte, mode, link, mtime and ctime. No
//! command hangs on a FIFO (each call has a deadline).

use crate::bed as common;
use crate::reliability;

use nix::sys::stat::Mode;
use reliability::{LaneRun, figure, tree, tree_diff};
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SCENARIO: &str = "4. Hostile filesystem";

/// The template every case copies: a run with a running lane (so run.json,
/// lanes/, checkpoint.json and receipt-head.json all exist).
struct Template {
    _tmp: tempfile::TempDir,
    run: LaneRun,
}

fn template() -> Template {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap().join("template");
    std::fs::create_dir(&base).unwrap();
    let run = LaneRun::new(&base, &["w0"]);
    run.beat("w0", "template");
    assert!(run.run_dir().join("checkpoint.json").is_file());
    Template { _tmp: tmp, run }
}

/// A fresh copy of the template under `<tmp>/case`, plus `<tmp>/case/elsewhere`
/// for symlink targets and hard links.
struct Case {
    _tmp: tempfile::TempDir,
    run: LaneRun,
    base: PathBuf,
    elsewhere: PathBuf,
}

impl Case {
    fn new(template: &Template) -> Case {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap().join("case");
        common::copy_tree(&template.run.base, &base);
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let t = &template.run;
        let run = LaneRun {
            base: base.clone(),
            flow: common::Flow::new(&base),
            root: base.join("state"),
            run_id: t.run_id.clone(),
            owner: base.join("state/handles/main.owner"),
            inputs: base.join(t.inputs.file_name().unwrap()),
        };
        Case {
            _tmp: tmp,
            run,
            base,
            elsewhere,
        }
    }

    fn run_dir(&self) -> PathBuf {
        self.run.run_dir()
    }

    /// Move `path` to `elsewhere/<name>` and put a symlink to it in its place.
    fn symlink_away(&self, path: &Path) {
        let target = self.elsewhere.join(path.file_name().unwrap());
        std::fs::rename(path, &target).unwrap();
        symlink(&target, path).unwrap();
    }

    /// Replace the file at `path` with a FIFO (mode 0600).
    fn fifo(&self, path: &Path) {
        std::fs::remove_file(path).unwrap();
        nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    }

    fn chmod(&self, path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A lock directory left by a dead writer (pid that cannot exist).
    fn dead_lock(&self) -> PathBuf {
        let lock = self.run_dir().join("locks/receipt");
        std::fs::create_dir(&lock).unwrap();
        self.chmod(&lock, 0o700);
        let owner = lock.join("owner.json");
        std::fs::write(
            &owner,
            "{\"created_at\":\"2026-01-01T00:00:00Z\",\"pid\":2147483646,\"session_id\":0,\"token\":\"t\"}\n",
        )
        .unwrap();
        self.chmod(&owner, 0o600);
        lock
    }

    fn heartbeat(&self) -> Vec<OsString> {
        self.run.heartbeat_args("w0", "hostile")
    }

    /// `init` of a second run into this state root.
    fn init(&self) -> Vec<OsString> {
        vec![
            "--state-root".into(),
            self.run.root.clone().into(),
            "init".into(),
            "--workflow-type".into(),
            "A".into(),
            "--repo-root".into(),
            self.base.join("repo").into(),
            "--owner-file".into(),
            self.run.root.join("handles/second.owner").into(),
            "--component".into(),
            "runtime".into(),
        ]
    }
}

/// Run with a deadline: (exit code, stderr); a hang fails the test.
fn run_bounded(run: &LaneRun, argv: &[OsString]) -> (Option<i32>, String, String) {
    let mut child = run.spawn_piped(argv);
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the command hung: {argv:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What a case puts at its target.
#[derive(Clone, Copy)]
enum Hostile {
    /// The object moved elsewhere, a symlink to it in its place.
    Symlink,
    /// A symlink to a missing sibling `nowhere.owner`.
    Dangling,
    /// The object's mode widened to this.
    Mode(u32),
    /// A FIFO in place of the file.
    Fifo,
    /// A second hard link to the object, at this path under the case.
    HardLink(&'static str),
}

/// The object a case makes hostile (targets under a dead writer's lock
/// create that lock first).
type Target = fn(&Case) -> PathBuf;

/// The command run on the hostile copy.
#[derive(Clone, Copy)]
enum Command {
    Heartbeat,
    Init,
    /// A heartbeat whose input files are made hostile after its command
    /// line wrote them.
    HeartbeatInputs,
}

impl Case {
    fn put(&self, hostile: Hostile, target: &Path) {
        match hostile {
            Hostile::Symlink => self.symlink_away(target),
            Hostile::Dangling => symlink(target.with_file_name("nowhere.owner"), target).unwrap(),
            Hostile::Mode(mode) => self.chmod(target, mode),
            Hostile::Fifo => self.fifo(target),
            Hostile::HardLink(link) => std::fs::hard_link(target, self.base.join(link)).unwrap(),
        }
    }

    /// Make `target` hostile and give the argv of `command`, each in the
    /// order the command needs.
    fn prepare(&self, hostile: Hostile, target: Target, command: Command) -> Vec<OsString> {
        match command {
            Command::Heartbeat => {
                self.put(hostile, &target(self));
                self.heartbeat()
            }
            Command::Init => {
                self.put(hostile, &target(self));
                self.init()
            }
            Command::HeartbeatInputs => {
                let argv = self.heartbeat();
                self.put(hostile, &target(self));
                argv
            }
        }
    }

    /// An empty regular file at `path`.
    fn empty_file(&self, path: PathBuf) -> PathBuf {
        std::fs::write(&path, "").unwrap();
        path
    }
}

/// (name, what, where, command, expected exit, message fragment)
type Row = (&'static str, Hostile, Target, Command, i32, &'static str);

fn cases() -> Vec<Row> {
    use Command::{Heartbeat, HeartbeatInputs, Init};
    use Hostile::{Dangling, Fifo, HardLink, Mode, Symlink};
    #[rustfmt::skip]
    let cases: Vec<Row> = vec![
        // ------------------------------------------------------- symlinks
        ("symlink: state root (heartbeat)", Symlink, |c| c.run.root.clone(), Heartbeat, 2, "state root must not be a symlink"),
        ("symlink: state root (init)", Symlink, |c| c.run.root.clone(), Init, 2, "state root must not be a symlink"),
        ("symlink: runs/", Symlink, |c| c.run.root.join("runs"), Heartbeat, 2, "state-root runs must not be a symlink"),
        ("symlink: run directory", Symlink, |c| c.run_dir(), Heartbeat, 3, "run directory snapshot is unsafe"),
        ("symlink: receipt.jsonl", Symlink, |c| c.run_dir().join("receipt.jsonl"), Heartbeat, 3, "receipt is missing or unsafe"),
        ("symlink: manifest.json", Symlink, |c| c.run_dir().join("manifest.json"), Heartbeat, 3, "run manifest snapshot is unsafe"),
        ("symlink: receipt-head.json", Symlink, |c| c.run_dir().join("receipt-head.json"), Heartbeat, 2, "acknowledged receipt head record must be a regular file"),
        ("symlink: owner handle", Symlink, |c| c.run.owner.clone(), Heartbeat, 2, "owner handle must not be a symlink"),
        ("symlink: handles/ (heartbeat)", Symlink, |c| c.run.root.join("handles"), Heartbeat, 2, "must not be a symlink"),
        ("symlink: handles/ (init)", Symlink, |c| c.run.root.join("handles"), Init, 2, "must not be a symlink"),
        ("symlink: dangling at the new handle's path (init)", Dangling, |c| c.run.root.join("handles/second.owner"), Init, 2, "owner handle already exists"),
        ("symlink: run locks/ directory", Symlink, |c| c.run_dir().join("locks"), Heartbeat, 2, "lock parent directory"),
        ("symlink: lock directory locks/receipt", Symlink, |c| c.dead_lock(), Heartbeat, 5, "state lock path is unsafe"),
        ("symlink: lock owner.json", Symlink, |c| c.dead_lock().join("owner.json"), Heartbeat, 5, "state lock path is unsafe"),
        ("symlink: run.json", Symlink, |c| c.run_dir().join("run.json"), Heartbeat, 2, "run cache must not be a symlink"),
        ("symlink: checkpoint.json", Symlink, |c| c.run_dir().join("checkpoint.json"), Heartbeat, 2, "run checkpoint must not be a symlink"),
        ("symlink: lanes/", Symlink, |c| c.run_dir().join("lanes"), Heartbeat, 2, "state path contains a symlink"),
        ("symlink: lane cache lanes/w0.json", Symlink, |c| c.run_dir().join("lanes/w0.json"), Heartbeat, 2, "lane cache must not be a symlink"),
        ("symlink: --evidence input file", Symlink, |c| c.run.inputs.join("ev-w0-hostile.json"), HeartbeatInputs, 2, "JSON input must be a regular non-symlink file"),
        // ---------------------------------------------------------- modes
        ("mode 0755: state root", Mode(0o755), |c| c.run.root.clone(), Heartbeat, 2, "state root does not have the required secure mode"),
        ("mode 0755: state root (init)", Mode(0o755), |c| c.run.root.clone(), Init, 2, "state root does not have the required secure mode"),
        ("mode 0755: runs/", Mode(0o755), |c| c.run.root.join("runs"), Heartbeat, 2, "does not have the required secure mode"),
        ("mode 0755: run directory", Mode(0o755), |c| c.run_dir(), Heartbeat, 2, "run directory does not have the required secure mode"),
        ("mode 0755: handles/", Mode(0o755), |c| c.run.root.join("handles"), Heartbeat, 2, "does not have the required secure mode"),
        ("mode 0755: handles/ (init)", Mode(0o755), |c| c.run.root.join("handles"), Init, 2, "does not have the required secure mode"),
        ("mode 0755: quarantine/ (init)", Mode(0o755), |c| c.run.root.join("quarantine"), Init, 2, "does not have the required secure mode"),
        ("mode 0644: owner handle", Mode(0o644), |c| c.run.owner.clone(), Heartbeat, 2, "owner handle does not have the required secure mode"),
        ("mode 0755: run locks/ directory", Mode(0o755), |c| c.run_dir().join("locks"), Heartbeat, 2, "lock parent directory does not have the required secure mode"),
        ("mode 0755: lock directory of a dead writer", Mode(0o755), |c| c.dead_lock(), Heartbeat, 5, "state lock path is insecure"),
        ("mode 0644: lock owner.json of a dead writer", Mode(0o644), |c| c.dead_lock().join("owner.json"), Heartbeat, 5, "state lock path is insecure"),
        ("mode 0644: run.json", Mode(0o644), |c| c.run_dir().join("run.json"), Heartbeat, 2, "run cache does not have the required secure mode"),
        ("mode 0644: checkpoint.json", Mode(0o644), |c| c.run_dir().join("checkpoint.json"), Heartbeat, 2, "run checkpoint does not have the required secure mode"),
        ("mode 0755: lanes/", Mode(0o755), |c| c.run_dir().join("lanes"), Heartbeat, 2, "directory does not have the required secure mode"),
        ("mode 0644: lane cache lanes/w0.json", Mode(0o644), |c| c.run_dir().join("lanes/w0.json"), Heartbeat, 2, "lane cache does not have the required secure mode"),
        ("mode 0644: receipt-head.json", Mode(0o644), |c| c.run_dir().join("receipt-head.json"), Heartbeat, 2, "acknowledged receipt head record does not have the required secure mode"),
        // ---------------------------------------------------------- FIFOs
        ("FIFO: receipt.jsonl", Fifo, |c| c.run_dir().join("receipt.jsonl"), Heartbeat, 3, "receipt is missing or unsafe"),
        ("FIFO: manifest.json", Fifo, |c| c.run_dir().join("manifest.json"), Heartbeat, 3, "run manifest snapshot is missing or invalid"),
        ("FIFO: receipt-head.json", Fifo, |c| c.run_dir().join("receipt-head.json"), Heartbeat, 2, "acknowledged receipt head record must be a regular file"),
        ("FIFO: owner handle", Fifo, |c| c.run.owner.clone(), Heartbeat, 2, "owner handle must be a regular file"),
        ("FIFO: --evidence input file", Fifo, |c| c.run.inputs.join("ev-w0-hostile.json"), HeartbeatInputs, 2, "JSON input must be a regular non-symlink file"),
        ("FIFO: --input file", Fifo, |c| c.run.inputs.join("beat-w0.json"), HeartbeatInputs, 2, "JSON input must be a regular non-symlink file"),
        ("FIFO: run.json", Fifo, |c| c.run_dir().join("run.json"), Heartbeat, 2, "run cache does not have the required secure mode"),
        ("FIFO: checkpoint.json", Fifo, |c| c.run_dir().join("checkpoint.json"), Heartbeat, 2, "run checkpoint does not have the required secure mode"),
        ("FIFO: lane cache lanes/w0.json", Fifo, |c| c.run_dir().join("lanes/w0.json"), Heartbeat, 2, "lane cache does not have the required secure mode"),
        ("FIFO: lock owner.json", Fifo, |c| c.dead_lock().join("owner.json"), Heartbeat, 5, "state lock"),
        ("FIFO: lock initializer", Fifo, |c| c.empty_file(c.run_dir().join("locks/.receipt.initializing.json")), Heartbeat, 5, "state lock initializer is unsafe"),
        // ----------------------------------------------------- hard links
        ("hard link: owner handle linked from outside the state root", HardLink("elsewhere/copy.owner"), |c| c.run.owner.clone(), Heartbeat, 2, "owner handle must not have other hard links"),
        ("hard link: owner handle linked under a second name in handles/", HardLink("state/handles/twin.owner"), |c| c.run.owner.clone(), Heartbeat, 2, "owner handle must not have other hard links"),
    ];
    cases
}

/// Refusals found under the receipt lock (a damaged receipt, an unsafe
/// cache path) take and release the lock first, as the reference does: the
/// one trace they may leave is the time stamps of `runs/<id>/locks`, where
/// the lock directory came and went. Everything else is compared exactly.
fn unlocked(
    mut snapshot: std::collections::BTreeMap<PathBuf, reliability::Entry>,
    case: &Case,
) -> std::collections::BTreeMap<PathBuf, reliability::Entry> {
    if let Some(entry) = snapshot.get_mut(&case.run_dir().join("locks")) {
        entry.mtime = 0;
        entry.ctime = 0;
    }
    snapshot
}

/// One case: prepare it on a fresh copy, run it, compare the trees.
fn run_case(
    template: &Template,
    &(name, hostile, target, command, code, fragment): &Row,
) -> Result<&'static str, String> {
    let case = Case::new(template);
    let argv = case.prepare(hostile, target, command);
    let before = unlocked(tree(&case.base), &case);
    let (status, stdout, stderr) = run_bounded(&case.run, &argv);
    let after = unlocked(tree(&case.base), &case);
    let diff = tree_diff(&before, &after);
    let error: Value = serde_json::from_str(&stderr).unwrap_or(Value::Null);
    let typed = stdout.is_empty()
        && error["ok"] == false
        && error["retryable"] == (code == 5)
        && error["message"]
            .as_str()
            .is_some_and(|m| m.contains(fragment));
    if status == Some(code) && typed && diff.is_empty() {
        Ok(name)
    } else {
        Err(format!(
            "{name}: exit {status:?} (expected {code} '{fragment}'), stderr {stderr}, changes {diff:?}"
        ))
    }
}

#[test]
fn reliability_hostile_fs_every_hostile_object_is_refused_before_any_write() {
    let template = template();
    let mut refused = 0u64;
    let mut by_kind: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut failures = Vec::new();
    let all = cases();
    // Refusals met under a busy lock wait the lock's patience (1.5 s):
    // four cases at a time keep the suite quick.
    let outcomes: Vec<Result<&str, String>> = std::thread::scope(|scope| {
        let template = &template;
        let handles: Vec<_> = all
            .chunks(all.len().div_ceil(4))
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|row| run_case(template, row))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for outcome in outcomes {
        match outcome {
            Ok(name) => {
                refused += 1;
                *by_kind.entry(name.split(':').next().unwrap()).or_default() += 1;
            }
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    figure(
        SCENARIO,
        &format!(
            "hostile objects in place of the state root's own ({}), then a heartbeat or init through the binary",
            reliability::counts(&by_kind, " ")
        ),
        all.len() as u64,
        &format!(
            "{refused} of {} refused with the expected typed error before any write (exit 2, 3 or 5; 0 panics, 0 hangs); every byte, mode, link, mtime and ctime of the tree and of the symlink targets unchanged (the one exception allowed: the time stamps of runs/<id>/locks when the refusal came under the lock, which was taken and released)",
            all.len()
        ),
    );
}

#[test]
fn reliability_hostile_fs_loosened_receipt_and_manifest_modes_are_handled_like_the_reference() {
    // The reference re-tightens a 0644 receipt on the next append and never
    // checks manifest.json's mode; we do the same (nothing is followed).
    let template = template();
    let case = Case::new(&template);
    let receipt = case.run_dir().join("receipt.jsonl");
    let manifest = case.run_dir().join("manifest.json");
    case.chmod(&receipt, 0o644);
    case.chmod(&manifest, 0o644);
    let (status, _, stderr) = run_bounded(&case.run, &case.heartbeat());
    assert_eq!(status, Some(0), "{stderr}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&receipt), 0o600);
    assert_eq!(mode(&manifest), 0o644);
    figure(
        SCENARIO,
        "a 0644 receipt and a 0644 manifest.json (modes the reference does not refuse)",
        2,
        "accepted like the reference: the append re-tightens the receipt to 0600; manifest.json is read, never written",
    );
}
