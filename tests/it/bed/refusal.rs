//! Helpers for the bad-input tests: a throw-away workspace, a refused call
//! that must leave every byte on disk alone, and receipt lines sealed by
//! hand with valid checksums.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::bed::{Flow, Output, Snapshot, snapshot};
use bluetape_flow::receipt::event::{EventDraft, SealedEvent};

/// A temp directory holding `home/`, `repo/` and (once created) `state/`.
pub struct Work {
    _tmp: tempfile::TempDir,
    /// The temp directory, symlinks resolved: everything a call could touch.
    pub base: PathBuf,
    pub flow: Flow,
    pub state: PathBuf,
    pub repo: PathBuf,
}

impl Work {
    /// A workspace whose state root does not exist yet.
    pub fn new() -> Work {
        let (tmp, base) = crate::bed::canonical_tempdir();
        let flow = Flow::new(&base);
        let repo = base.join("repo");
        std::fs::create_dir(&repo).unwrap();
        Work {
            _tmp: tmp,
            state: base.join("state"),
            repo,
            base,
            flow,
        }
    }

    /// A workspace with one run created by our `init`; returns its id.
    pub fn with_run() -> (Work, String) {
        let work = Work::new();
        let run_id = work.flow.init(&work.state, &work.repo);
        (work, run_id)
    }

    /// A workspace whose state root is a copy of a reference fixture;
    /// returns the id of its (first) run.
    pub fn from_fixture(name: &str) -> (Work, String) {
        let work = Work::new();
        crate::bed::prepare_state(&crate::bed::fixtures_dir().join(name), &work.state);
        let run_id = crate::bed::first_run_id(&work.state);
        (work, run_id)
    }

    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.state.join("runs").join(run_id)
    }

    pub fn receipt(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("receipt.jsonl")
    }

    pub fn manifest(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("manifest.json")
    }

    /// `--state-root <state> <command> --run-id <id>`.
    pub fn run_args(&self, command: &str, run_id: impl AsRef<OsStr>) -> Vec<OsString> {
        vec![
            "--state-root".into(),
            self.state.clone().into_os_string(),
            command.into(),
            "--run-id".into(),
            run_id.as_ref().to_os_string(),
        ]
    }

    /// `--state-root <state> init ...` with explicit pieces.
    pub fn init_args(
        &self,
        owner: &Path,
        workflow: &str,
        repo: &Path,
        components: &[&str],
    ) -> Vec<OsString> {
        crate::bed::init_argv(&self.state, workflow, repo, owner, components)
    }

    /// A well-formed init of a new handle `handles/<name>.owner`.
    pub fn init_named(&self, name: &str) -> Vec<OsString> {
        self.init_args(
            &self.state.join("handles").join(format!("{name}.owner")),
            "A",
            &self.repo,
            &["runtime"],
        )
    }

    /// Run the binary; it must fail with `code`/`error`, a message containing
    /// `needle`, nothing on stdout, and no change anywhere under the temp dir.
    pub fn refused<S: AsRef<OsStr> + std::fmt::Debug>(
        &self,
        args: &[S],
        code: i32,
        error: &str,
        needle: &str,
    ) -> Value {
        let before = snapshot(&self.base);
        let out = self.flow.run(args);
        let e = expect_error(&out, code, error, needle, &format!("{args:?}"));
        assert_unchanged(&before, &snapshot(&self.base), &format!("{args:?}"));
        e
    }

    /// `init` of a new handle `handles/<handle>.owner` (see
    /// [`Work::init_named`]) is refused as a contract error whose message
    /// contains `needle`, changing nothing.
    pub fn init_refused(&self, handle: &str, needle: &str) -> Value {
        self.refused(&self.init_named(handle), 2, "contract_error", needle)
    }

    /// Run the binary; it must succeed.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> Value {
        self.flow.run(args).assert_ok()
    }
}

/// The typed-failure contract of every refusal: exit status, `error` code,
/// `retryable`, the table's `next_command`, a one-line JSON envelope on
/// stderr and an empty stdout.
pub fn expect_error(out: &Output, code: i32, error: &str, needle: &str, what: &str) -> Value {
    assert_eq!(out.code, code, "{what}: {out:?}");
    assert!(out.stdout.is_empty(), "{what}: stdout on failure: {out:?}");
    assert!(
        out.stderr.ends_with('\n') && out.stderr.trim_end().lines().count() == 1,
        "{what}: stderr must be one JSON line: {out:?}"
    );
    let e = out.assert_error(code, error);
    crate::bed::assert_next_command(&e, code);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(needle),
        "{what}: message {message:?} lacks {needle:?}"
    );
    e
}

/// Equal snapshots, with a readable list of differences when not.
pub fn assert_unchanged(before: &Snapshot, after: &Snapshot, what: &str) {
    let diff = crate::bed::tree_diff(before, after);
    assert!(
        diff.is_empty(),
        "{what}: the state on disk changed:\n  {}",
        diff.join("\n  ")
    );
}

/// What a hand-built event needs to chain onto a run's receipt.
pub struct Chain {
    pub run_id: String,
    pub manifest_hash: String,
    pub fingerprint: String,
    pub sequence: u64,
    pub checksum: String,
}

impl Chain {
    /// Read the run's snapshot and receipt (assumed intact).
    pub fn of(run_dir: &Path) -> Chain {
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("manifest.json")).unwrap()).unwrap();
        let receipt = std::fs::read_to_string(run_dir.join("receipt.jsonl")).unwrap();
        let last: Value = serde_json::from_str(receipt.lines().last().unwrap()).unwrap();
        Chain {
            run_id: run_dir.file_name().unwrap().to_str().unwrap().to_string(),
            manifest_hash: manifest["_run"]["manifest_hash"].as_str().unwrap().into(),
            fingerprint: manifest["_run"]["owner_fingerprint"]
                .as_str()
                .unwrap()
                .into(),
            sequence: last["sequence"].as_u64().unwrap(),
            checksum: last["checksum"].as_str().unwrap().into(),
        }
    }

    /// The next Phase 2 run-level event (all 16 keys), not yet sealed.
    pub fn draft(&self, event_type: &str, from: &str, to: &str, evidence: Value) -> EventDraft {
        EventDraft {
            run_id: self.run_id.clone(),
            lane_id: None,
            agent_id: None,
            sequence: self.sequence + 1,
            event_type: bluetape_flow::receipt::vocab::EventType::parse(event_type)
                .expect("a known event type"),
            from_state: Some(from.into()),
            to_state: Some(to.into()),
            timestamp: "2026-07-14T01:00:00Z".into(),
            owner_token: self.fingerprint.clone(),
            manifest_hash: self.manifest_hash.clone(),
            previous_checksum: self.checksum.clone(),
            evidence_refs: evidence,
            reason: None,
            metadata: Some(json!({"owner_epoch": 1})),
        }
    }

    /// Seal `draft` and advance the chain past it.
    pub fn seal(&mut self, draft: &EventDraft) -> SealedEvent {
        let sealed = draft.seal();
        self.sequence = draft.sequence;
        self.checksum = sealed.checksum.to_string();
        sealed
    }

    /// plan_approved then run_started, with a non-ASCII evidence summary.
    pub fn two_more_lines(&mut self) -> Vec<u8> {
        let approve = self.draft(
            "plan_approved",
            "planned",
            "approved",
            json!([{"kind": "user_approval", "summary": "User approved plan — ok ✓"}]),
        );
        let mut bytes = self.seal(&approve).line;
        let start = self.draft(
            "run_started",
            "approved",
            "running",
            json!([{"exit_status": 0, "kind": "log", "summary": "started"}]),
        );
        bytes.extend(self.seal(&start).line);
        bytes
    }
}

/// Replace the file's bytes, keeping its mode.
pub fn rewrite(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

pub fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn is_root() -> bool {
    nix::unistd::getuid().is_root()
}
