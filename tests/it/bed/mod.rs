//! The one test bed of every area: the real binary run in a cleared,
//! pinned environment ([`Flow`]), a temp state root and repo with a run
//! ([`TestBed`]), typed decoding of the JSON envelope ([`Success`],
//! [`Failure`]), builders for the common inputs ([`ev`], [`component`],
//! [`lane_input`], [`heartbeat_input`]), a tree snapshot for "nothing
//! changed" ([`snapshot`]) and copies of the reference fixtures
//! ([`prepare_state`], [`scenarios`], [`expand_argv`]).
#![allow(dead_code)]

pub mod forge;
pub mod inputs;
pub mod refusal;
pub mod topo;

pub use inputs::{
    assert_reassigned, checkpoint_evidence, component, ev, reassign_input, with,
    write_scope_refusals,
};

use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::receipt::primitives::{AgentId, LaneId, RunId, Sha256Hex};
use bluetape_flow::store::root::StateRoot;
use bluetape_flow::store::run::{AckHead, RunDir};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference fixtures beside the checkout. Missing fixtures are a test
/// failure, never a silent skip.
pub fn fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-runs");
    assert!(
        dir.join("README.md").is_file(),
        "reference fixtures missing at {}",
        dir.display()
    );
    dir
}

/// Whether `message` is the reference's text `expected`, alone or with the
/// detail DEVIATIONS 61 adds after it (`expected: detail`, `expected (in
/// --flag 'file')`): the reference's words stay the message's first part.
pub fn is_reference_message(message: &str, expected: &str) -> bool {
    message == expected
        || message
            .strip_prefix(expected)
            .is_some_and(|rest| rest.starts_with(": ") || rest.starts_with(" (in "))
}

/// Assert [`is_reference_message`] of an error envelope's `message`.
#[track_caller]
pub fn assert_message(e: &Value, expected: &str) {
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        is_reference_message(message, expected),
        "message {message:?} is not {expected:?} (with detail): {e}"
    );
}

/// Assert what a typed refusal teaches: exactly `fields`, and a hint that
/// `hint` accepts.
#[track_caller]
pub fn assert_taught(e: &Value, fields: Value, hint: impl Fn(&str) -> bool) {
    assert_eq!(e["fields"], fields, "{e}");
    assert!(hint(e["hint"].as_str().unwrap_or_default()), "hint: {e}");
}

/// Names of every scenario directory (with expected.json), plus recovery/.
pub fn scenarios() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in sorted_entries(&fixtures_dir()) {
        if path.join("expected.json").is_file() {
            out.push(path.clone());
            if path.join("recovery/expected.json").is_file() {
                out.push(path.join("recovery"));
            }
        }
    }
    out
}

/// The paths of `dir`'s entries, sorted.
pub fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    entries
}

/// A recorded `argv` with its placeholders filled in: `{STATE}` is the
/// temp copy of the state root, `{INPUT:x}` the scenario's `inputs/x`.
pub fn expand_argv(argv: &[Value], state: &Path, scenario: &Path) -> Vec<String> {
    argv.iter()
        .map(|a| {
            let a = a.as_str().expect("recorded argv items are strings");
            match a.strip_prefix("{INPUT:").and_then(|r| r.strip_suffix('}')) {
                Some(name) => scenario
                    .join("inputs")
                    .join(name)
                    .to_string_lossy()
                    .into_owned(),
                None => a.replace("{STATE}", &state.to_string_lossy()),
            }
        })
        .collect()
}

/// A temp copy of one reference scenario's state root, with what the
/// reference recorded for it (`expected.json`).
pub struct FixtureCopy {
    _tmp: tempfile::TempDir,
    pub scenario: PathBuf,
    pub expected: Value,
    pub state: PathBuf,
    pub flow: Flow,
}

impl FixtureCopy {
    pub fn new(scenario: &Path) -> FixtureCopy {
        let expected =
            serde_json::from_str(&std::fs::read_to_string(scenario.join("expected.json")).unwrap())
                .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        prepare_state(scenario, &state);
        FixtureCopy {
            flow: Flow::new(tmp.path()),
            _tmp: tmp,
            scenario: scenario.to_path_buf(),
            expected,
            state,
        }
    }

    /// `expected.json`'s runs: run id -> what was recorded for it.
    pub fn runs(&self) -> &Map<String, Value> {
        self.expected["runs"].as_object().unwrap()
    }

    /// Run a recorded `argv` (placeholders filled in) on this copy.
    pub fn run_recorded(&self, entry: &Value) -> Output {
        self.flow.run(&expand_argv(
            entry["argv"].as_array().unwrap(),
            &self.state,
            &self.scenario,
        ))
    }

    /// `out` as the reference recorded it in `entry`: the same exit
    /// status; on success the byte-identical stdout (the state root read as
    /// `{STATE}`); on failure the same `keys` of the envelope. Returns the
    /// failure envelope, if any.
    #[track_caller]
    pub fn assert_recorded(
        &self,
        out: &Output,
        entry: &Value,
        keys: &[&str],
        name: &str,
    ) -> Option<Value> {
        assert_eq!(
            out.code as i64,
            entry["exit_status"].as_i64().unwrap(),
            "{name}: {out:?}"
        );
        if out.code == 0 {
            assert_eq!(
                out.stdout
                    .replace(&*self.state.to_string_lossy(), "{STATE}"),
                entry["stdout"].as_str().unwrap(),
                "{name}"
            );
            None
        } else {
            let want: Value = serde_json::from_str(entry["stderr"].as_str().unwrap()).unwrap();
            let got = out.error();
            for key in keys {
                assert_eq!(got[key], want[key], "{name}: {key}");
            }
            Some(got)
        }
    }
}

/// The state root of every reference scenario (its recovery steps aside)
/// prepared under `dir`: (scenario name, state root).
pub fn fixture_states(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for scenario in scenarios() {
        if scenario.ends_with("recovery") {
            continue;
        }
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let state = dir.join(&name);
        prepare_state(&scenario, &state);
        out.push((name, state));
    }
    out
}

/// A [`FixtureCopy`] of every scenario of [`scenarios`].
pub fn fixture_copies() -> impl Iterator<Item = FixtureCopy> {
    scenarios().into_iter().map(|s| FixtureCopy::new(&s))
}

/// The run ids under `root/runs`, sorted (none when there is no such
/// directory).
pub fn run_ids(root: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(root.join("runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    runs.sort();
    runs
}

/// The events of run `run_id`'s receipt under `root`, one per line.
pub fn receipt_events(root: &Path, run_id: &str) -> Vec<Value> {
    std::fs::read_to_string(root.join("runs").join(run_id).join("receipt.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Copy a tree with `cp -a` (modes and times kept) to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// A fresh temp dir and its canonical path (no symlink in it, as the
/// binary resolves the paths it is given).
pub fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    (tmp, base)
}

/// The first run id under `root/runs` (a fixture copy holds one).
pub fn first_run_id(root: &Path) -> String {
    run_ids(root)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no run under {}", root.display()))
}

/// Copy a scenario's state into `target` (created), recreate the empty
/// directories git dropped, and set modes 0700/0600.
pub fn prepare_state(scenario: &Path, target: &Path) {
    let tree: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(scenario.join("state-tree.json")).unwrap())
            .unwrap();
    std::fs::create_dir_all(target).unwrap();
    for entry in tree {
        let rel = entry["path"].as_str().unwrap();
        match entry["type"].as_str().unwrap() {
            "file" => {
                let dest = target.join(rel);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::copy(scenario.join("state").join(rel), &dest).unwrap();
            }
            "dir" => std::fs::create_dir_all(target.join(rel)).unwrap(),
            _ => {}
        }
    }
    set_modes(target);
}

/// 0700 on every directory, 0600 on every file under (and including) `root`.
pub fn set_modes(root: &Path) {
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700)).unwrap();
    for entry in walk(root) {
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = if meta.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// insta's settings for every snapshot of the binary: the `.snap` files
/// live in `tests/it/snapshots/`, whatever module asserts them. CI
/// (`CI=true`) never writes new ones: review with `cargo insta review` or
/// run with `INSTA_UPDATE=always` and commit the files.
pub fn snapshots() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

/// One path of a tree snapshot: kind, mode, link count, modification and
/// change times (ns), size and content digest (files) or target (links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: char,
    pub mode: u32,
    pub nlink: u64,
    pub mtime: i128,
    pub ctime: i128,
    pub len: u64,
    pub content: String,
}

/// Every path under `root` (not `root` itself), sorted, never following a
/// symlink.
pub fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .flatten()
        .map(walkdir::DirEntry::into_path)
        .collect();
    out.sort();
    out
}

/// chmod every directory under (and including) `root`.
pub fn chmod_dirs(root: &Path, mode: u32) {
    let dirs = std::iter::once(root.to_path_buf()).chain(walk(root));
    for dir in dirs.filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir())) {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Every path under (and including) `root`, never following a symlink and
/// never opening anything but regular files.
pub fn tree(root: &Path) -> BTreeMap<PathBuf, Entry> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = BTreeMap::new();
    for path in std::iter::once(root.to_path_buf()).chain(walk(root)) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        let (tag, content) = if kind.is_symlink() {
            (
                'l',
                std::fs::read_link(&path)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            )
        } else if kind.is_dir() {
            ('d', String::new())
        } else if kind.is_fifo() {
            ('p', String::new())
        } else if kind.is_file() {
            (
                'f',
                std::fs::read(&path)
                    .map(|b| bluetape_flow::receipt::canonical::sha256_hex(&b))
                    .unwrap_or_else(|e| format!("unreadable: {e}")),
            )
        } else {
            ('?', String::new())
        };
        out.insert(
            path,
            Entry {
                kind: tag,
                mode: meta.mode(),
                nlink: meta.nlink(),
                mtime: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
                ctime: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
                len: if kind.is_file() { meta.len() } else { 0 },
                content,
            },
        );
    }
    out
}

/// Human-readable differences between two snapshots (empty when equal).
pub fn tree_diff(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, entry) in before {
        match after.get(path) {
            None => out.push(format!("removed {}", path.display())),
            Some(other) if other != entry => out.push(format!(
                "changed {}: {entry:?} -> {other:?}",
                path.display()
            )),
            _ => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("created {}", path.display()));
    }
    out
}

/// What [`snapshot`] returns.
pub type Snapshot = BTreeMap<PathBuf, Entry>;

/// [`tree`] without the directories' times (which a lock taken and
/// released moves): equal snapshots mean nothing was created, removed,
/// modified, linked or chmod-ed.
pub fn snapshot(root: &Path) -> Snapshot {
    let mut tree = tree(root);
    for entry in tree.values_mut().filter(|e| e.kind == 'd') {
        (entry.mtime, entry.ctime) = (0, 0);
    }
    tree
}

/// The files (and links) of a snapshot with their mode and content,
/// without the directories and the times: what a command created, removed,
/// rewrote differently or chmod-ed.
pub fn files(tree: &Snapshot) -> BTreeMap<PathBuf, (char, u32, String)> {
    tree.iter()
        .filter(|(_, e)| e.kind != 'd')
        .map(|(p, e)| (p.clone(), (e.kind, e.mode, e.content.clone())))
        .collect()
}

/// The result of one CLI call.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn of(out: &std::process::Output) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// The success envelope on stdout: `ok` true, the rest by name.
#[derive(Debug, Deserialize)]
pub struct Success {
    pub ok: bool,
    pub operation: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// The failure envelope on stderr: every key of the contract typed, any
/// extra key (`first_bad_sequence`, ...) in `rest`.
#[derive(Debug, Deserialize)]
pub struct Failure {
    pub ok: bool,
    pub error: String,
    pub message: String,
    pub retryable: bool,
    pub next_command: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Output {
    /// The stdout of a successful call, decoded.
    pub fn success(&self) -> Success {
        assert_eq!(self.code, 0, "{self:?}");
        assert!(self.stderr.is_empty(), "{self:?}");
        let s: Success = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not a success envelope ({e}): {self:?}"));
        assert!(s.ok, "{self:?}");
        s
    }

    /// The stderr of a refused call, decoded (stdout must be empty).
    pub fn failure(&self) -> Failure {
        assert!(
            self.stdout.is_empty(),
            "failure printed on stdout: {self:?}"
        );
        let f: Failure = serde_json::from_str(&self.stderr)
            .unwrap_or_else(|e| panic!("stderr is not a failure envelope ({e}): {self:?}"));
        assert!(!f.ok, "{self:?}");
        f
    }

    /// Exit status, stdout and stderr as one text for a snapshot of
    /// human-facing output, with each `(text, placeholder)` replaced
    /// (run ids, temp paths).
    pub fn human(&self, redactions: &[(&str, &str)]) -> String {
        let mut text = format!(
            "exit status: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        );
        for (from, to) in redactions {
            text = text.replace(from, to);
        }
        text
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|_| panic!("stdout is not JSON: {self:?}"))
    }

    /// The failure envelope as JSON, after checking it decodes as a
    /// [`Failure`].
    pub fn error(&self) -> Value {
        self.failure();
        serde_json::from_str(&self.stderr).unwrap()
    }

    /// Assert a typed failure with this exit status and error code.
    pub fn assert_error(&self, code: i32, error: &str) -> Value {
        assert_eq!(self.code, code, "{self:?}");
        let e = self.error();
        assert_eq!(e["error"], error, "{self:?}");
        assert_eq!(e["ok"], false);
        assert_eq!(e["retryable"], matches!(code, 5 | 6), "{self:?}");
        e
    }

    pub fn assert_ok(&self) -> Value {
        self.success();
        self.json()
    }
}

/// A pinned environment (see [`Flow::command`]): HOME inside `home`, no
/// BLUETAPE_* variable unless a test adds it.
pub struct Flow {
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub envs: Vec<(String, String)>,
}

impl Flow {
    pub fn new(base: &Path) -> Flow {
        let home = base.join("home");
        std::fs::create_dir_all(&home).unwrap();
        Flow {
            home,
            cwd: base.to_path_buf(),
            envs: Vec::new(),
        }
    }

    /// The binary with `args` in the pinned environment: nothing of the
    /// caller's environment, `HOME` and every `XDG_*` base inside the temp
    /// dir (`XDG_STATE_HOME` where discovery would look anyway), `NO_COLOR`,
    /// UTC, then this flow's extra variables. For spawning; most tests
    /// want [`Flow::run`].
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bluetape-flow"));
        self.pin(&mut cmd);
        cmd.args(args);
        cmd
    }

    /// The binary with `args` under `strace <strace_args> -o <trace>`, in
    /// the pinned environment.
    pub fn strace<S: AsRef<std::ffi::OsStr>>(
        &self,
        strace_args: &[&str],
        trace: &Path,
        args: &[S],
    ) -> Command {
        let mut cmd = Command::new("strace");
        self.pin(&mut cmd);
        cmd.args(strace_args)
            .arg("-o")
            .arg(trace)
            .arg(env!("CARGO_BIN_EXE_bluetape-flow"))
            .args(args);
        cmd
    }

    fn pin(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("NO_COLOR", "1")
            .env("TZ", "UTC")
            .current_dir(&self.cwd);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
    }

    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        Output::of(&self.command(args).output().unwrap())
    }

    /// Like [`Flow::run`], with extra environment variables for this call
    /// only (the pinned environment is otherwise unchanged).
    pub fn run_env<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], envs: &[(&str, &str)]) -> Output {
        let flow = Flow {
            home: self.home.clone(),
            cwd: self.cwd.clone(),
            envs: self
                .envs
                .iter()
                .cloned()
                .chain(envs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
                .collect(),
        };
        flow.run(args)
    }

    /// `init` a fresh run under `root`; returns the run id.
    pub fn init(&self, root: &Path, repo: &Path) -> String {
        std::fs::create_dir_all(repo).unwrap();
        let owner = root.join("handles/main.owner");
        let out = self.run(&init_argv(root, "A", repo, &owner, &["runtime"]));
        out.assert_ok()["run_id"].as_str().unwrap().to_string()
    }
}

/// A temp directory with no state root and a [`Flow`] working in it; the
/// directory must outlive the flow's calls.
pub fn flow_elsewhere() -> (tempfile::TempDir, Flow) {
    let tmp = tempfile::tempdir().unwrap();
    let flow = Flow::new(tmp.path());
    (tmp, flow)
}

/// `--state-root <root> init --workflow-type <workflow> --repo-root <repo>
/// --owner-file <owner>` and a `--component` per component.
pub fn init_argv(
    root: &Path,
    workflow: &str,
    repo: &Path,
    owner: &Path,
    components: &[&str],
) -> Vec<std::ffi::OsString> {
    let mut argv: Vec<std::ffi::OsString> = vec![
        "--state-root".into(),
        root.into(),
        "init".into(),
        "--workflow-type".into(),
        workflow.into(),
        "--repo-root".into(),
        repo.into(),
        "--owner-file".into(),
        owner.into(),
    ];
    for c in components {
        argv.push("--component".into());
        argv.push((*c).into());
    }
    argv
}

/// `--state-root <root> <command> --run-id <run_id> --owner-file <owner>`
/// plus `extra`: the shape of every guarded mutation.
pub fn mutation_argv(
    root: &Path,
    command: &str,
    run_id: &str,
    owner: &Path,
    extra: &[&str],
) -> Vec<String> {
    let mut argv = read_argv(root, command, run_id, &["--owner-file"]);
    argv.push(owner.to_string_lossy().into());
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv
}

/// `--state-root <root> <command> --run-id <run_id>` plus `extra`: the
/// shape of every read-only run command.
pub fn read_argv(root: &Path, command: &str, run_id: &str, extra: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "--state-root".into(),
        root.to_string_lossy().into(),
        command.into(),
        "--run-id".into(),
        run_id.into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv
}

/// The lane of the Phase 1 refusal tests (`l`, agent `a`, at [`T0`]): a
/// Phase 1 run refuses the command before it looks for the lane.
pub const PHASE1_LANE_ARGS: [&str; 6] = ["--lane-id", "l", "--agent-id", "a", "--at", T0];

/// `--lane-id <lane> --agent-id <agent> --at <at> --evidence <evidence>`:
/// what every lane command takes after the owner file.
pub fn lane_argv<'a>(
    lane: &'a str,
    agent: &'a str,
    at: &'a str,
    evidence: &'a str,
) -> Vec<&'a str> {
    vec![
        "--lane-id",
        lane,
        "--agent-id",
        agent,
        "--at",
        at,
        "--evidence",
        evidence,
    ]
}

/// Hold the receipt lock of run directory `run_dir` as this (live) test
/// process does: writers wait, then refuse with a retryable conflict.
/// Returns the lock directory; modes under `root` are set again.
pub fn hold_receipt_lock(root: &Path, run_dir: &Path) -> PathBuf {
    let lock = run_dir.join("locks/receipt");
    std::fs::create_dir_all(&lock).unwrap();
    std::fs::write(
        lock.join("owner.json"),
        format!("{{\"pid\":{},\"token\":\"t\"}}\n", std::process::id()),
    )
    .unwrap();
    set_modes(root);
    lock
}

/// The recorded steps (`commands.jsonl`) of a reference scenario.
pub fn recorded_steps(scenario: &Path) -> Vec<Value> {
    std::fs::read_to_string(scenario.join("commands.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Replay the recorded `step` of `scenario` on the state root `root`: the
/// exit status, stdout and stderr the reference printed (the root read as
/// `{STATE}`), and a state root left exactly as it was.
#[track_caller]
pub fn assert_replays_read_only(flow: &Flow, root: &Path, scenario: &Path, step: &Value) -> Output {
    let argv = expand_argv(step["argv"].as_array().unwrap(), root, scenario);
    let before = snapshot(root);
    let out = flow.run(&argv);
    let state = root.to_string_lossy();
    assert_eq!(
        out.code as i64,
        step["exit_status"].as_i64().unwrap(),
        "{out:?}"
    );
    assert_eq!(
        out.stdout.replace(&*state, "{STATE}"),
        step["stdout"].as_str().unwrap(),
        "stdout: {out:?}"
    );
    assert_same_envelope(
        &out.stderr.replace(&*state, "{STATE}"),
        step["stderr"].as_str().unwrap(),
    );
    assert_eq!(before, snapshot(root), "the replayed step wrote");
    out
}

/// What we printed on stderr is what the reference printed, byte for
/// byte; a refusal that teaches may add its `hint` and `fields`, every
/// other key as the reference printed it (DEVIATIONS 61, 62).
#[track_caller]
pub fn assert_same_envelope(ours: &str, reference: &str) {
    let mut got: Value = match serde_json::from_str(ours) {
        Ok(got) => got,
        Err(_) => return assert_eq!(ours, reference),
    };
    let taught = ["hint", "fields"].map(|key| got.as_object_mut().and_then(|e| e.remove(key)));
    if taught.iter().all(Option::is_none) {
        assert_eq!(ours, reference);
    } else {
        let want: Value = serde_json::from_str(reference).unwrap();
        assert_eq!(got, want, "{ours}");
    }
}

/// The error code the exit-status table gives a refusal of `code`
/// (approval refusals aside).
pub fn error_of(code: i32) -> &'static str {
    match code {
        2 => "contract_error",
        3 => "receipt_corrupt",
        4 => "incompatible_manifest",
        5 => "coordinator_conflict",
        6 => "completion_blocked",
        7 => "unsupported_by_run_manifest",
        _ => panic!("no typed refusal has exit status {code}"),
    }
}

/// A typed refusal of exit status `code`: its error code and
/// `next_command` as the exit-status table says. Returns the envelope.
#[track_caller]
pub fn assert_refusal(out: &Output, code: i32) -> Value {
    let e = out.assert_error(code, error_of(code));
    assert_next_command(&e, code);
    e
}

/// The string `value[key]`; a failure names both when it is not one.
#[track_caller]
pub fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key} in {value}"))
}

/// The items of the JSON array `list`; a failure names it when it is not one.
#[track_caller]
pub fn items(list: &Value) -> &Vec<Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
}

/// The strings of the JSON array `list`.
#[track_caller]
pub fn strings(list: &Value) -> Vec<&str> {
    items(list)
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| panic!("not a string: {item}"))
        })
        .collect()
}

/// The string `key` of each item of the JSON array `list`.
#[track_caller]
pub fn string_column<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    items(list)
        .iter()
        .map(|item| str_field(item, key))
        .collect()
}

/// Each key of the object `want` holds the same value in `value` (its
/// other keys are free); `what` names it in the failure.
#[track_caller]
pub fn assert_holds(value: &Value, want: Value, what: &str) {
    for (key, expected) in want.as_object().unwrap() {
        assert_eq!(&value[key], expected, "{what}: {key} in {value}");
    }
}

/// Assert `value` is an object with exactly the space-separated `keys`,
/// in that (sorted) order; `what` names it in the failure.
#[track_caller]
pub fn assert_keys(value: &Value, keys: &str, what: &str) {
    let got: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    let want: Vec<&str> = keys.split_whitespace().collect();
    assert_eq!(got, want, "{what}: {value}");
}

/// `base` with each key of the object `patch` set to its value (one level
/// deep: a nested object in `patch` replaces the one in `base`).
pub fn patched(mut base: Value, patch: &Value) -> Value {
    for (key, value) in patch.as_object().unwrap() {
        base[key] = value.clone();
    }
    base
}

/// Assert `answer` has exactly the space-separated `keys` (see
/// [`assert_keys`]) and holds `values` (see [`assert_holds`]); `what`
/// names it in the failure.
#[track_caller]
pub fn assert_answer(answer: &Value, keys: &str, values: Value, what: &str) {
    assert_keys(answer, keys, what);
    assert_holds(answer, values, what);
}

/// One refusal a table-driven test expects: the reference's keys it keeps
/// (exit status, `error`, `retryable`, `next_command`), the start or part
/// of its `message`, what its `hint` must and must not say, and the
/// `fields` it carries (none when `None`).
pub struct RefusalCase {
    pub name: &'static str,
    pub exit: i32,
    pub error: &'static str,
    pub retryable: bool,
    pub next_command: Option<&'static str>,
    pub message: &'static str,
    pub hint: &'static [&'static str],
    pub not_in_hint: &'static [&'static str],
    pub fields: Option<Value>,
}

impl RefusalCase {
    /// The keys of a refusal of exit status `exit` as the exit-status
    /// table types it: [`error_of`], [`next_command`], retryable only at 5.
    /// A case sets the rest with struct update syntax (`..typed(5)`); the
    /// base has an empty name and message, no hint and no fields.
    pub fn typed(exit: i32) -> RefusalCase {
        RefusalCase {
            name: "",
            exit,
            error: error_of(exit),
            retryable: exit == 5,
            next_command: next_command(exit),
            message: "",
            hint: &[],
            not_in_hint: &[],
            fields: None,
        }
    }

    /// `e`'s `retryable` and `next_command` as this case says.
    #[track_caller]
    pub fn assert_retry_keys(&self, e: &Value) {
        let name = self.name;
        assert_eq!(e["ok"], false, "{name}: {e}");
        assert_eq!(e["retryable"], self.retryable, "{name}: {e}");
        assert_eq!(
            e.get("next_command").and_then(Value::as_str),
            self.next_command,
            "{name}: {e}"
        );
    }

    /// `e`'s `fields` hold this case's (or `e` has none).
    #[track_caller]
    pub fn assert_fields(&self, e: &Value) {
        let name = self.name;
        match &self.fields {
            Some(want) => {
                for (key, value) in want.as_object().unwrap() {
                    assert_eq!(&e["fields"][key], value, "{name}: fields.{key} in {e}");
                }
            }
            None => assert!(e.get("fields").is_none(), "{name}: {e}"),
        }
    }
}

/// `<command> --help` succeeds and says `text`; its help text.
#[track_caller]
pub fn assert_help_says(flow: &Flow, command: &str, text: &str) -> String {
    let out = flow.run(&[command, "--help"]);
    assert_eq!(out.code, 0, "{command}: {out:?}");
    assert!(out.stdout.contains(text), "{command}: {}", out.stdout);
    out.stdout
}

/// Each `<command> --help` says its text and that in-place migration is
/// unavailable.
#[track_caller]
pub fn assert_helps_say(flow: &Flow, helps: &[(&str, &str)]) {
    for (command, text) in helps {
        let help = assert_help_says(flow, command, text);
        assert!(
            help.contains("In-place migration is unavailable."),
            "{command}"
        );
    }
}

/// Run `f` and assert that it wrote nothing under `root`; `what` names it
/// in the failure.
#[track_caller]
pub fn read_only<T>(root: &Path, what: impl std::fmt::Display, f: impl FnOnce() -> T) -> T {
    let before = snapshot(root);
    let value = f();
    assert_eq!(
        before,
        snapshot(root),
        "{what} wrote under {}",
        root.display()
    );
    value
}

/// Run `f` and assert that nothing under `root` changed meanwhile.
#[track_caller]
pub fn unchanged<T>(root: &Path, f: impl FnOnce() -> T) -> T {
    read_only(root, "a refusal", f)
}

/// A refusal of the lane and run commands: exit 2 `contract_error` or
/// 5 `coordinator_conflict` with exactly `message` and the table's
/// `next_command`. Returns the envelope.
#[track_caller]
pub fn assert_conflict_or_contract(out: &Output, code: i32, message: &str) -> Value {
    assert!(matches!(code, 2 | 5), "{code}");
    let e = assert_refusal(out, code);
    assert_message(&e, message);
    e
}

/// The `next_command` the exit status table names for a typed refusal
/// of `code` (approval refusals aside).
pub fn next_command(code: i32) -> Option<&'static str> {
    match code {
        3 => Some("receipt-diagnose"),
        5 => Some("resume-check"),
        6 => Some("completion-check"),
        7 => Some("init"),
        _ => None,
    }
}

/// `e` names [`next_command`] of `code`, or no next command at all.
#[track_caller]
pub fn assert_next_command(e: &Value, code: i32) {
    match next_command(code) {
        Some(next) => assert_eq!(e["next_command"], next, "{e}"),
        None => assert!(e.get("next_command").is_none(), "{e}"),
    }
}

/// Arguments as owned strings (paths included).
pub fn args(items: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
    items.iter().map(|i| i.as_ref().to_os_string()).collect()
}

// ------------------------------------------------------------ builders

/// A lane as `lane-create` takes it: agent `agent`, write scope `scope`,
/// observed at [`T0`], startup ack due 30 s later, command deadline 10 min.
pub fn lane_input(lane: &str, agent: &str, scope: &[&str]) -> Value {
    json!({
        "lane_id": lane, "agent_id": agent, "assignment": format!("Work on {lane}"),
        "write_scope": scope, "fallback": "main session", "observed_at": T0,
        "startup_ack_deadline": "2026-07-14T01:00:30Z",
        "command_deadline": "2026-07-14T01:10:00Z",
    })
}

/// A heartbeat as `heartbeat` takes it.
pub fn heartbeat_input(
    lane: &str,
    agent: &str,
    observed: &str,
    lease: &str,
    reason: &str,
) -> Value {
    json!({"lane_id": lane, "agent_id": agent, "observed_at": observed,
           "silence_lease_deadline": lease, "reason": reason})
}

// ------------------------------------------------------------ Phase 1 runs

/// The run id of [`write_phase1_run`].
pub const PHASE1_RUN_ID: &str = "20260101T000000Z-0000beef";
const RUN_ID: &str = PHASE1_RUN_ID;
/// The raw owner token a Phase 1 receipt carries.
pub const PHASE1_TOKEN: &str = "legacy-secret";

/// The bundled manifest as family 1.0 (Phase 1) had it.
pub fn phase1_manifest() -> Value {
    let mut m: Value =
        serde_json::from_str(bluetape_flow::receipt::manifest::BUNDLED_MANIFEST).unwrap();
    let map = m.as_object_mut().unwrap();
    map.insert("manifest_version".into(), json!("1.0.0"));
    for key in [
        "resource_limits",
        "compatible_manifest_versions",
        "failure_resolution",
    ] {
        map.remove(key);
    }
    m["receipt"]["event_types"] = json!(bluetape_flow::receipt::vocab::EventType::of_family(
        bluetape_flow::receipt::rules::Family::V1_0
    ));
    m
}

/// A Phase 1 run under `root` (with `handles/`, no owner file) whose
/// receipt holds `events` (type, from, to), all at 2026-01-01, with
/// `metadata`; returns the last checksum.
pub fn write_phase1_run(
    root: &Path,
    events: &[(&str, Option<&str>, Option<&str>)],
    metadata: Option<Value>,
) -> String {
    let manifest = phase1_manifest();
    let hash = bluetape_flow::receipt::canonical::digest(&manifest);
    let mut snapshot = manifest.clone();
    snapshot["_run"] = json!({"component_ids": ["runtime"], "manifest_hash": hash, "owner_token": PHASE1_TOKEN,
                              "repo_root": "/tmp", "workflow_type": "A"});
    let dir = root.join("runs").join(RUN_ID);
    std::fs::create_dir_all(dir.join("lanes")).unwrap();
    std::fs::create_dir_all(root.join("handles")).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        bluetape_flow::receipt::canonical::to_string(&snapshot) + "\n",
    )
    .unwrap();
    let mut receipt = Vec::new();
    let mut previous = String::new();
    for (i, (event_type, from, to)) in events.iter().enumerate() {
        let sealed = EventDraft {
            run_id: RUN_ID.into(),
            lane_id: None,
            agent_id: None,
            sequence: i as u64 + 1,
            event_type: bluetape_flow::receipt::vocab::EventType::parse(event_type)
                .expect("a known event type"),
            from_state: from.map(str::to_string),
            to_state: to.map(str::to_string),
            timestamp: "2026-01-01T00:00:00Z".into(),
            owner_token: PHASE1_TOKEN.into(),
            manifest_hash: hash.clone(),
            previous_checksum: previous.clone(),
            evidence_refs: if i == 0 {
                json!([])
            } else {
                json!([{"kind": "user_approval", "summary": "ok"}])
            },
            reason: None,
            metadata: metadata.clone(),
        }
        .seal();
        receipt.extend_from_slice(&sealed.line);
        previous = sealed.checksum.into();
    }
    std::fs::write(dir.join("receipt.jsonl"), receipt).unwrap();
    set_modes(root);
    previous
}

/// A Phase 1 run with only `run_created`, its owner handle
/// `handles/main.owner` and an evidence file: what the exit-7 tests of every
/// Phase 2 command start from.
pub struct Phase1Bed {
    pub tmp: tempfile::TempDir,
    pub flow: Flow,
    pub root: PathBuf,
    pub owner: PathBuf,
    pub evidence: PathBuf,
}

impl Phase1Bed {
    pub fn new() -> Phase1Bed {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        write_phase1_run(&root, &[("run_created", None, Some("planned"))], None);
        let owner = root.join("handles/main.owner");
        std::fs::write(
            &owner,
            format!(
                "{{\"epoch\":1,\"run_id\":\"{PHASE1_RUN_ID}\",\"token\":\"{PHASE1_TOKEN}\"}}\n"
            ),
        )
        .unwrap();
        let evidence = tmp.path().join("ev.json");
        std::fs::write(&evidence, r#"[{"kind":"k","summary":"s"}]"#).unwrap();
        set_modes(&root);
        Phase1Bed {
            flow: Flow::new(tmp.path()),
            tmp,
            root,
            owner,
            evidence,
        }
    }
}

impl Phase1Bed {
    /// `<command> --run-id <the run>` plus `extra` (a read-only command).
    pub fn read(&self, command: &str, extra: &[&str]) -> Output {
        self.flow
            .run(&read_argv(&self.root, command, PHASE1_RUN_ID, extra))
    }

    /// `<command> --run-id <the run> --owner-file <its handle> --evidence
    /// <the evidence file>` plus `extra`.
    pub fn mutate(&self, command: &str, extra: &[&str]) -> Output {
        let mut rest = vec!["--evidence", self.evidence.to_str().unwrap()];
        rest.extend_from_slice(extra);
        self.flow.run(&mutation_argv(
            &self.root,
            command,
            PHASE1_RUN_ID,
            &self.owner,
            &rest,
        ))
    }
}

/// The refusal of a Phase 2 command on a Phase 1 run: exit 7
/// `unsupported_by_run_manifest`, the reference's message, `init` next.
#[track_caller]
pub fn assert_phase1_unsupported(out: &Output, what: &str) -> Value {
    let e = out.assert_error(7, "unsupported_by_run_manifest");
    assert_eq!(
        e["message"], "the selected run manifest does not support coordinator commands",
        "{what}"
    );
    assert_eq!(e["next_command"], "init", "{what}");
    e
}

// ------------------------------------------------------------ test bed

pub const T0: &str = "2026-07-14T01:00:00Z";

/// The next event after the line `last` (its run, owner, manifest and
/// chain), as another writer appends it: its own fields from `fields`
/// (`lane_id`, `agent_id`, `from_state`, `to_state`, `timestamp` ([`T0`]
/// when absent), `evidence_refs` (`ev(summary)` when absent), `reason`,
/// `metadata`).
pub fn draft_after(last: &Value, event_type: &str, fields: &Value, summary: &str) -> EventDraft {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    EventDraft {
        run_id: text(last, "run_id").unwrap(),
        lane_id: text(fields, "lane_id").map(|t| LaneId::parse(&t).expect("a lane id")),
        agent_id: text(fields, "agent_id").map(|t| AgentId::parse(&t).expect("an agent id")),
        sequence: last["sequence"].as_u64().unwrap() + 1,
        event_type: bluetape_flow::receipt::vocab::EventType::parse(event_type)
            .expect("a known event type"),
        from_state: text(fields, "from_state"),
        to_state: text(fields, "to_state"),
        timestamp: text(fields, "timestamp").unwrap_or_else(|| T0.into()),
        owner_token: text(last, "owner_token").unwrap(),
        manifest_hash: text(last, "manifest_hash").unwrap(),
        previous_checksum: text(last, "checksum").unwrap(),
        evidence_refs: fields
            .get("evidence_refs")
            .cloned()
            .unwrap_or_else(|| ev(summary)),
        reason: text(fields, "reason"),
        metadata: fields.get("metadata").cloned(),
    }
}

/// A temp workspace with a run made by `init` through the binary (its id
/// as `init` printed it), its handle `handles/main.owner`.
pub struct InitRun {
    pub tmp: tempfile::TempDir,
    /// The temp dir's canonical path.
    pub base: PathBuf,
    pub flow: Flow,
    pub repo: PathBuf,
    pub root: PathBuf,
    pub run_id: String,
    pub owner: PathBuf,
}

/// [`InitRun`] of workflow `A` with one component, whose source directory
/// `src/<component>` the repository has.
pub fn init_run(component: &str) -> InitRun {
    let (tmp, base) = canonical_tempdir();
    let flow = Flow::new(&base);
    let repo = base.join("repo");
    std::fs::create_dir_all(repo.join("src").join(component)).unwrap();
    let root = base.join("state");
    let owner = root.join("handles/main.owner");
    let out = flow.run(&init_argv(&root, "A", &repo, &owner, &[component]));
    let run_id = out.assert_ok()["run_id"].as_str().unwrap().to_string();
    InitRun {
        tmp,
        base,
        flow,
        repo,
        root,
        run_id,
        owner,
    }
}

/// A run made through the library as `init --approval-policy` makes it.
pub struct GatedRun {
    pub tmp: tempfile::TempDir,
    /// The temp dir's canonical path.
    pub base: PathBuf,
    pub flow: Flow,
    pub root: PathBuf,
    pub run_id: String,
}

/// A run of workflow `A` over `components` with the approval policy whose
/// JSON text is `policy`, created at `created` (so an expiry can lie in
/// the past) by `initiated_by`; its handle is `handles/main.owner`.
pub fn init_gated(
    policy: &str,
    created: &str,
    components: &[&str],
    initiated_by: Option<&str>,
) -> GatedRun {
    use bluetape_flow::commands::init::{
        InitEntropy, InitRequest, PolicyRequest, init_with_policy,
    };
    let (tmp, base) = canonical_tempdir();
    let flow = Flow::new(&base);
    let root = base.join("state");
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let file = base.join("policy.json");
    std::fs::write(&file, policy).unwrap();
    let env = bluetape_flow::store::discovery::DiscoveryEnv {
        home: Some(flow.home.clone().into_os_string()),
        cwd: base.clone(),
        ..Default::default()
    };
    let entropy = InitEntropy {
        now: chrono::DateTime::parse_from_rfc3339(created)
            .unwrap()
            .with_timezone(&chrono::Utc),
        ..InitEntropy::fresh()
    };
    let request = InitRequest {
        workflow_type: "A".into(),
        repo_root: repo,
        owner_file: root.join("handles/main.owner"),
        components: components.iter().map(|c| c.to_string()).collect(),
    };
    let policy = PolicyRequest {
        file: bluetape_flow::store::input::JsonArg::Given(file),
        initiated_by: initiated_by.map(str::to_string),
    };
    let (outcome, _) = init_with_policy(
        &StateRoot::begin(&root),
        &env,
        &request,
        &entropy,
        Some(&policy),
    )
    .unwrap();
    GatedRun {
        tmp,
        base,
        flow,
        root,
        run_id: outcome.run_id,
    }
}

/// `[{"kind": "user_approval", "summary": summary}]`.
pub fn user_approval(summary: &str) -> Value {
    json!([{"kind": "user_approval", "summary": summary}])
}

/// A temp dir with a state root, a repo and (from `planned`/`running`) a
/// run made by the real binary: the bed every area builds on.
pub struct TestBed {
    pub tmp: tempfile::TempDir,
    pub flow: Flow,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub run_id: String,
    pub dir: PathBuf,
    /// The evidence file of [`TestBed::step`]: `[{"kind": "test", ...}]`
    /// until a test writes its own with [`TestBed::with_evidence`].
    pub evidence: PathBuf,
    /// A directory outside the state root for a test's own files.
    pub work: PathBuf,
    /// The reference scenario a fixture bed was copied from.
    pub scenario: Option<PathBuf>,
    files: Cell<u32>,
}

impl TestBed {
    /// `init` approving `components`, not yet approved.
    pub fn planned(components: &[&str]) -> TestBed {
        let tmp = tempfile::tempdir().unwrap();
        let flow = Flow::new(tmp.path());
        let root = tmp.path().join("state");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let argv = init_argv(
            &root,
            "A",
            &repo,
            &root.join("handles/main.owner"),
            components,
        );
        let run_id = flow.run(&argv).assert_ok()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        TestBed::around(tmp, flow, root, repo, run_id, None)
    }

    /// A copy of the reference scenario `name` (its first run), its inputs
    /// at [`TestBed::scenario_input`].
    pub fn from_fixture(name: &str) -> TestBed {
        let scenario = fixtures_dir().join(name);
        let tmp = tempfile::tempdir().unwrap();
        let flow = Flow::new(tmp.path());
        let root = tmp.path().join("state");
        prepare_state(&scenario, &root);
        let run_id = first_run_id(&root);
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        TestBed::around(tmp, flow, root, repo, run_id, Some(scenario))
    }

    fn around(
        tmp: tempfile::TempDir,
        flow: Flow,
        root: PathBuf,
        repo: PathBuf,
        run_id: String,
        scenario: Option<PathBuf>,
    ) -> TestBed {
        let dir = root.join("runs").join(&run_id);
        let evidence = tmp.path().join("ev.json");
        std::fs::write(&evidence, ev("ok").to_string()).unwrap();
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        TestBed {
            tmp,
            flow,
            root,
            repo,
            run_id,
            dir,
            evidence,
            work,
            scenario,
            files: Cell::new(0),
        }
    }

    /// A file of the scenario's `inputs/` (fixture beds only).
    pub fn scenario_input(&self, name: &str) -> String {
        let scenario = self.scenario.as_ref().expect("a fixture bed");
        scenario
            .join("inputs")
            .join(name)
            .to_string_lossy()
            .into_owned()
    }

    /// `init` of another run (component `runtime`) in this state root over
    /// `repo`, its handle `handles/<handle>`.
    pub fn init_another(&self, handle: &str, repo: &Path) -> Output {
        let owner = self.handle(handle);
        self.flow
            .run(&init_argv(&self.root, "A", repo, &owner, &["runtime"]))
    }

    /// Write `value` to `work/<name>` (outside the state root); its path.
    pub fn put(&self, name: &str, value: &Value) -> String {
        std::fs::write(self.work.join(name), value.to_string()).unwrap();
        self.work_file(name)
    }

    /// The one-item evidence list of `kind` and `summary` at `work/<name>`;
    /// its path.
    pub fn put_evidence(&self, name: &str, kind: &str, summary: &str) -> String {
        self.put(name, &json!([{"kind": kind, "summary": summary}]))
    }

    /// The path of `work/<name>`.
    pub fn work_file(&self, name: &str) -> String {
        self.work.join(name).to_string_lossy().into_owned()
    }

    /// `handles/<name>` under the state root.
    pub fn handle(&self, name: &str) -> PathBuf {
        self.root.join("handles").join(name)
    }

    pub fn receipt_path(&self) -> PathBuf {
        self.dir.join("receipt.jsonl")
    }

    pub fn receipt(&self) -> String {
        std::fs::read_to_string(self.receipt_path()).unwrap()
    }

    pub fn last_event(&self) -> Value {
        serde_json::from_str(self.receipt().lines().last().unwrap()).unwrap()
    }

    /// Keep only the first `lines` receipt lines: the state as it was then.
    pub fn truncate(&self, lines: usize) {
        let kept: String = self.receipt().split_inclusive('\n').take(lines).collect();
        std::fs::write(self.receipt_path(), kept).unwrap();
    }

    /// `command --run-id --owner-file handles/<owner>` plus `rest`.
    pub fn mutation(&self, command: &str, owner: &str, rest: &[&str]) -> Output {
        self.flow.run(&mutation_argv(
            &self.root,
            command,
            &self.run_id,
            &self.handle(owner),
            rest,
        ))
    }

    /// Replace the evidence file of [`TestBed::step`] (raw JSON text).
    pub fn with_evidence(self, json: &str) -> TestBed {
        std::fs::write(&self.evidence, json).unwrap();
        self
    }

    /// `command --run-id --owner-file --evidence <the bed's evidence>` plus
    /// `extra`.
    pub fn step(&self, command: &str, extra: &[&str]) -> Output {
        let mut rest = vec!["--evidence", self.evidence.to_str().unwrap()];
        rest.extend_from_slice(extra);
        self.mutation(command, "main.owner", &rest)
    }

    /// `command --run-id <id>` plus `extra` (read-only commands).
    pub fn read(&self, command: &str, extra: &[&str]) -> Output {
        let mut argv = vec![command, "--run-id", &self.run_id];
        argv.extend_from_slice(extra);
        self.raw(&argv)
    }

    /// A snapshot of everything under the state root.
    pub fn snapshot(&self) -> Snapshot {
        snapshot(&self.root)
    }

    /// `init`, `run-approve`, `run-start`.
    pub fn running(components: &[&str]) -> TestBed {
        let run = TestBed::planned(components);
        run.cmd("run-approve", &ev("approved"), &["--at", T0])
            .assert_ok();
        run.cmd("run-start", &ev("started"), &["--at", T0])
            .assert_ok();
        run
    }

    pub fn owner(&self) -> PathBuf {
        self.root.join("handles/main.owner")
    }

    /// Write `value` to a fresh input file outside the state root.
    pub fn file(&self, value: &Value) -> String {
        let n = self.files.get() + 1;
        self.files.set(n);
        let path = self.tmp.path().join(format!("input-{n}.json"));
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `--state-root <root>` + argv.
    pub fn raw(&self, argv: &[&str]) -> Output {
        let mut all = vec!["--state-root", self.root.to_str().unwrap()];
        all.extend_from_slice(argv);
        self.flow.run(&all)
    }

    /// `command --run-id --owner-file --evidence <file>` plus `extra`.
    pub fn cmd(&self, command: &str, evidence: &Value, extra: &[&str]) -> Output {
        let evidence = self.file(evidence);
        let mut rest = vec!["--evidence", evidence.as_str()];
        rest.extend_from_slice(extra);
        self.mutation(command, "main.owner", &rest)
    }

    /// A command with `--input <value>`.
    pub fn input(&self, command: &str, evidence: &Value, input: &Value) -> Output {
        let input = self.file(input);
        self.cmd(command, evidence, &["--input", &input])
    }

    pub fn lane_step(&self, command: &str, lane: &str, evidence: &Value, extra: &[&str]) -> Output {
        let agent = format!("agent-{lane}");
        let mut argv = vec!["--lane-id", lane, "--agent-id", &agent, "--at", T0];
        argv.extend_from_slice(extra);
        self.cmd(command, evidence, &argv)
    }

    /// The full argv of `lane-create` for lane `lane` (agent `agent`),
    /// for tests that run it their own way (a pipe, a tool call).
    pub fn lane_create_argv(&self, lane: &str, agent: &str) -> Vec<String> {
        let input = self.file(&lane_input(lane, agent, &[]));
        mutation_argv(
            &self.root,
            "lane-create",
            &self.run_id,
            &self.owner(),
            &[
                "--evidence",
                self.evidence.to_str().unwrap(),
                "--input",
                &input,
            ],
        )
    }

    /// A running lane `lane` (agent `agent-<lane>`, empty write scope).
    pub fn running_lane(&self, lane: &str, parent: Option<&str>) {
        let mut input = lane_input(lane, &format!("agent-{lane}"), &[]);
        if let Some(parent) = parent {
            input["parent_lane_id"] = json!(parent);
        }
        self.input("lane-create", &ev(&format!("assign {lane}")), &input)
            .assert_ok();
        self.lane_step("lane-start", lane, &ev(&format!("spawn {lane}")), &[])
            .assert_ok();
        self.lane_step("startup-ack", lane, &ev(&format!("ack {lane}")), &[])
            .assert_ok();
    }

    /// Completes a running lane with `evidence` (no changed paths).
    pub fn complete_lane(&self, lane: &str, evidence: &Value) -> Output {
        let changed = self.file(&json!([]));
        self.lane_step(
            "lane-complete",
            lane,
            evidence,
            &["--changed-paths", &changed],
        )
    }

    pub fn fail_lane(&self, lane: &str, evidence: &Value) {
        self.lane_step("lane-fail", lane, evidence, &["--reason", "review failed"])
            .assert_ok();
    }

    /// A lane created, started and completed with `evidence`.
    pub fn completed_lane(&self, lane: &str, parent: Option<&str>, evidence: &Value) {
        self.running_lane(lane, parent);
        self.complete_lane(lane, evidence).assert_ok();
    }

    /// A heartbeat of a running lane (its evidence becomes liveness evidence).
    pub fn heartbeat(&self, lane: &str, evidence: &Value) {
        let input = heartbeat_input(
            lane,
            &format!("agent-{lane}"),
            "2026-07-14T01:00:05Z",
            "2026-07-14T01:05:00Z",
            "still working",
        );
        self.input("heartbeat", evidence, &input).assert_ok();
    }

    /// Heartbeat number `n` of running lane `lane`: observed `n` seconds
    /// after the first [`TestBed::heartbeat`], reason `alive <n>`.
    pub fn numbered_heartbeat(&self, lane: &str, evidence: &Value, n: u32) -> Output {
        let input = heartbeat_input(
            lane,
            &format!("agent-{lane}"),
            &format!("2026-07-14T01:00:{:02}Z", 5 + n),
            "2026-07-14T01:05:00Z",
            &format!("alive {n}"),
        );
        self.input("heartbeat", evidence, &input)
    }

    /// Lane `build` completed ("build done") and the one required
    /// component `runtime` it owns, with required check `unit`, registered:
    /// where the completion gate's tests start.
    pub fn built_runtime(&self) {
        self.completed_lane("build", None, &ev("build done"));
        self.register(&json!([component(
            "runtime",
            "build",
            true,
            &["unit"],
            &[]
        )]))
        .assert_ok();
    }

    pub fn register(&self, components: &Value) -> Output {
        self.input("topology-register", &ev("topology approved"), components)
    }

    pub fn check(
        &self,
        component: &str,
        check: &str,
        passed: bool,
        reason: Option<&str>,
        evidence: &Value,
    ) -> Output {
        let mut input = json!({"component_id": component, "check_id": check, "passed": passed});
        if let Some(reason) = reason {
            input["reason"] = json!(reason);
        }
        self.input("check-result", evidence, &input)
    }

    pub fn cover(&self, component: &str, evidence: &Value) -> Output {
        self.input(
            "component-evidence",
            evidence,
            &json!({"component_id": component}),
        )
    }

    pub fn complete(&self, evidence: &Value) -> Output {
        self.cmd("complete", evidence, &[])
    }

    pub fn resolve(&self, lane: &str, resolver: &str, evidence: &Value) -> Output {
        self.cmd(
            "lane-resolve",
            evidence,
            &[
                "--lane-id",
                lane,
                "--resolution-lane-id",
                resolver,
                "--at",
                "2026-07-14T01:30:00Z",
            ],
        )
    }

    pub fn completion(&self) -> Value {
        self.raw(&["completion-check", "--run-id", &self.run_id])
            .assert_ok()
    }

    pub fn verify(&self) -> Value {
        self.raw(&["verify", "--run-id", &self.run_id]).assert_ok()
    }

    pub fn events(&self) -> Vec<Value> {
        receipt_events(&self.root, &self.run_id)
    }

    /// The coordinator state our last mutation cached in `run.json` (tests
    /// only look at it; commands never read it back).
    pub fn cached_state(&self) -> Value {
        let cache: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("run.json")).unwrap())
                .unwrap();
        cache["coordinator"]["state"].clone()
    }

    /// Run `out`, assert the typed refusal of exit status `code` (its error
    /// code and `next_command` as the exit-status table says, `retryable`,
    /// the exact message), and that nothing under the state root changed.
    #[track_caller]
    pub fn refused(&self, out: impl FnOnce() -> Output, code: i32, message: &str) -> Value {
        let before = snapshot(&self.root);
        let e = assert_refusal(&out(), code);
        assert_message(&e, message);
        assert_eq!(
            before,
            snapshot(&self.root),
            "a refusal changed the state root"
        );
        e
    }

    /// Append hand-sealed events after the head (as another writer would:
    /// states our own commands refuse to write) and record the head.
    pub fn append_sealed(&self, events: &[(&str, Value)]) {
        let mut last = self.events().pop().unwrap();
        let receipt = self.dir.join("receipt.jsonl");
        let mut bytes = std::fs::read(&receipt).unwrap();
        for (event_type, fields) in events {
            let sealed = draft_after(&last, event_type, fields, "sealed").seal();
            bytes.extend_from_slice(&sealed.line);
            last = Value::Object(sealed.event);
        }
        std::fs::write(&receipt, &bytes).unwrap();
        RunDir::new(
            &StateRoot::begin(&self.root),
            &RunId::parse(&self.run_id).unwrap(),
        )
        .write_head(&AckHead {
            sequence: last["sequence"].as_u64().unwrap(),
            checksum: Sha256Hex::parse(last["checksum"].as_str().unwrap()).unwrap(),
            byte_length: bytes.len() as u64,
            canonical_through: last["sequence"].as_u64().unwrap(),
        })
        .unwrap();
    }
}

/// `bed_type!(Run)`: a local `Run` that is a [`TestBed`] (by `Deref`) and
/// can carry an area's own helper methods without clashing with another
/// area's.
macro_rules! bed_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        struct $name(crate::bed::TestBed);
        impl std::ops::Deref for $name {
            type Target = crate::bed::TestBed;
            fn deref(&self) -> &crate::bed::TestBed {
                &self.0
            }
        }
    };
}
pub(crate) use bed_type;

/// The python of the CI venv `venv` (`$<var>`, else
/// `~/.cache/bluetape-ci/<venv>/bin/python`) if it can `import <imports>`;
/// otherwise None, and under `CI=true` a failure saying `why`.
pub fn ci_python(var: &str, venv: &str, imports: &str, why: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(format!(".cache/bluetape-ci/{venv}/bin/python")))
    });
    let works = candidate.as_ref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", &format!("import {imports}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if works {
        return candidate;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("NOT RUN: {why}");
    None
}

/// Assert that the helper process `what` (git, go, a script) succeeded,
/// with its stderr in the failure.
#[track_caller]
pub fn assert_ran(out: &std::process::Output, what: impl std::fmt::Display) {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run the real `git` in `dir` (author and committer set), asserting it
/// succeeds; its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("`git` is required (.ci/run installs it)");
    assert_ran(&out, format!("git {args:?}"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
