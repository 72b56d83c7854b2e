//! The checkpoint never hides the receipt's truth (contracts/receipt.md
//! "Checkpoint"). Each scenario changes the receipt behind the checkpoint's
//! back — an edit of the same size (in place, with the old mtime put back,
//! or through a rename), a cut-off tail, a torn line, lines appended by
//! another writer — and then every read-only command and a mutation must
//! answer exactly as they do on a copy of the state with no checkpoint at
//! all, where the answer can only come from the receipt.

use crate::bed as common;

use common::{Flow, Output};
use serde_json::json;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Bed {
    _tmp: tempfile::TempDir,
    flow: Flow,
    base: PathBuf,
    run_id: String,
}

const DERIVED: [&str; 2] = ["checkpoint.json", "checkpoint-digests.idx"];

impl Bed {
    /// A running lane with three heartbeats: the checkpoint is current.
    fn new() -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        let flow = Flow::new(tmp.path());
        let base = tmp.path().to_path_buf();
        let root = base.join("a");
        let run_id = flow.init(&root, &base.join("repo"));
        let bed = Bed {
            _tmp: tmp,
            flow,
            base,
            run_id,
        };
        bed.write("ev.json", &json!([{"kind": "plan", "summary": "approved"}]));
        bed.write(
            "lane.json",
            &json!({"lane_id": "build", "agent_id": "agent-1", "assignment": "build it",
                    "write_scope": ["src"], "fallback": "stop",
                    "observed_at": "2026-07-14T01:00:00Z",
                    "startup_ack_deadline": "2026-07-14T01:05:00Z",
                    "command_deadline": "2026-07-14T03:00:00Z"}),
        );
        for (command, extra) in [
            ("run-approve", vec![]),
            ("run-start", vec![]),
            ("lane-create", vec!["--input", "lane.json"]),
            (
                "lane-start",
                vec!["--lane-id", "build", "--agent-id", "agent-1"],
            ),
            (
                "startup-ack",
                vec!["--lane-id", "build", "--agent-id", "agent-1"],
            ),
        ] {
            let mut argv = vec!["--evidence", "ev.json"];
            argv.extend(extra);
            if command.starts_with("lane-start") || command.starts_with("startup") {
                argv.extend(["--at", "2026-07-14T01:01:00Z"]);
            }
            bed.mutate("a", command, &argv).assert_ok();
        }
        for n in 0..3 {
            bed.heartbeat("a", n).assert_ok();
        }
        assert!(bed.run_dir("a").join("checkpoint.json").is_file());
        bed
    }

    fn write(&self, name: &str, value: &serde_json::Value) {
        std::fs::write(self.base.join(name), value.to_string()).unwrap();
    }

    fn root(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    fn run_dir(&self, name: &str) -> PathBuf {
        self.root(name).join("runs").join(&self.run_id)
    }

    fn receipt(&self, name: &str) -> PathBuf {
        self.run_dir(name).join("receipt.jsonl")
    }

    fn run(&self, root: &str, argv: &[&str]) -> Output {
        let root = self.root(root);
        let mut full = vec!["--state-root", root.to_str().unwrap()];
        full.extend_from_slice(argv);
        let mut out = self.flow.run(&full);
        // Both copies must answer alike; only their paths differ.
        let path = root.to_str().unwrap().to_string();
        out.stdout = out.stdout.replace(&path, "ROOT");
        out.stderr = out.stderr.replace(&path, "ROOT");
        out
    }

    fn mutate(&self, root: &str, command: &str, extra: &[&str]) -> Output {
        let owner = self.root(root).join("handles/main.owner");
        let mut argv = vec![
            command.to_string(),
            "--run-id".into(),
            self.run_id.clone(),
            "--owner-file".into(),
            owner.to_str().unwrap().into(),
        ];
        for arg in extra {
            argv.push(if arg.ends_with(".json") {
                self.base.join(arg).to_str().unwrap().to_string()
            } else {
                arg.to_string()
            });
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        self.run(root, &argv)
    }

    /// Heartbeat number `n`, with evidence no earlier heartbeat used.
    fn heartbeat(&self, root: &str, n: u32) -> Output {
        let (ev, input) = (format!("hb-ev-{n}.json"), format!("hb-{n}.json"));
        self.write(
            &ev,
            &json!([{"kind": "log", "summary": format!("progress {n}")}]),
        );
        self.write(
            &input,
            &json!({"lane_id": "build", "agent_id": "agent-1",
                    "observed_at": format!("2026-07-14T01:1{n}:00Z"),
                    "silence_lease_deadline": format!("2026-07-14T01:1{n}:30Z"),
                    "reason": "working"}),
        );
        self.mutate(root, "heartbeat", &["--evidence", &ev, "--input", &input])
    }

    /// A copy of state `from` as `to` (modes, contents).
    fn copy(&self, from: &str, to: &str) {
        let status = Command::new("cp")
            .arg("-a")
            .arg(self.root(from))
            .arg(self.root(to))
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Copy `a` to `plain` without any checkpoint file.
    fn plain_copy(&self) {
        let _ = std::fs::remove_dir_all(self.root("plain"));
        self.copy("a", "plain");
        for name in DERIVED {
            std::fs::remove_file(self.run_dir("plain").join(name)).unwrap();
        }
    }

    /// Every read-only command, then a heartbeat, on `a` and on a copy
    /// without checkpoint: the answers must be identical.
    fn assert_checkpoint_hides_nothing(&self, scenario: &str) {
        self.plain_copy();
        let queries: [&[&str]; 5] = [
            &["verify", "--run-id", &self.run_id],
            &["resume-check", "--run-id", &self.run_id],
            &["completion-check", "--run-id", &self.run_id],
            &[
                "liveness-check",
                "--run-id",
                &self.run_id,
                "--lane-id",
                "build",
                "--at",
                "2026-07-14T01:20:00Z",
            ],
            &["receipt-diagnose", "--run-id", &self.run_id],
        ];
        for argv in queries {
            let (with, without) = (self.run("a", argv), self.run("plain", argv));
            assert_eq!(
                (with.code, &with.stdout, &with.stderr),
                (without.code, &without.stdout, &without.stderr),
                "{scenario}: {}",
                argv[0]
            );
        }
        let (with, without) = (self.heartbeat("a", 8), self.heartbeat("plain", 8));
        assert_eq!(
            (with.code, &with.stdout, &with.stderr),
            (without.code, &without.stdout, &without.stderr),
            "{scenario}: heartbeat"
        );
        assert_eq!(
            std::fs::read(self.receipt("a")).unwrap(),
            std::fs::read(self.receipt("plain")).unwrap(),
            "{scenario}: the receipts diverged"
        );
    }
}

/// Byte offset of the `n`-th line (0-based) and its length.
fn line_span(bytes: &[u8], n: usize) -> (usize, usize) {
    let mut start = 0;
    for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        if i == n {
            return (start, line.len());
        }
        start += line.len();
    }
    panic!("no line {n}");
}

/// Overwrite one byte of line `n` in place (same size, same inode): the
/// letter of `"summary":"` values become another letter.
fn edit_in_place(path: &Path, n: usize) {
    let bytes = std::fs::read(path).unwrap();
    let (start, len) = line_span(&bytes, n);
    let line = &bytes[start..start + len];
    let at = line
        .windows(11)
        .position(|w| w == b"\"summary\":\"")
        .expect("a summary")
        + 11;
    let replacement = if line[at] == b'X' { b'Y' } else { b'X' };
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start((start + at) as u64)).unwrap();
    file.write_all(&[replacement]).unwrap();
}

#[test]
fn an_unchanged_receipt_answers_alike_from_the_checkpoint() {
    let bed = Bed::new();
    bed.assert_checkpoint_hides_nothing("unchanged");
}

#[test]
fn an_early_line_edited_in_place_is_seen() {
    let bed = Bed::new();
    edit_in_place(&bed.receipt("a"), 1);
    bed.assert_checkpoint_hides_nothing("edit of line 2");
}

#[test]
fn the_checkpoint_line_itself_edited_is_seen() {
    let bed = Bed::new();
    let lines = std::fs::read(bed.receipt("a"))
        .unwrap()
        .split(|b| *b == b'\n')
        .count()
        - 1;
    edit_in_place(&bed.receipt("a"), lines - 1);
    bed.assert_checkpoint_hides_nothing("edit of the last line");
}

#[test]
fn an_edit_with_the_old_mtime_put_back_is_seen() {
    let bed = Bed::new();
    let receipt = bed.receipt("a");
    let mtime = std::fs::metadata(&receipt).unwrap().modified().unwrap();
    edit_in_place(&receipt, 2);
    std::fs::File::options()
        .write(true)
        .open(&receipt)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&receipt).unwrap().modified().unwrap(),
        mtime
    );
    bed.assert_checkpoint_hides_nothing("edit, mtime restored");
}

#[test]
fn an_edited_copy_renamed_over_the_receipt_is_seen() {
    let bed = Bed::new();
    let receipt = bed.receipt("a");
    let edited = receipt.with_extension("edited");
    std::fs::copy(&receipt, &edited).unwrap();
    edit_in_place(&edited, 3);
    std::fs::rename(&edited, &receipt).unwrap();
    bed.assert_checkpoint_hides_nothing("edited copy renamed");
}

#[test]
fn a_cut_off_tail_is_seen() {
    let bed = Bed::new();
    let receipt = bed.receipt("a");
    let bytes = std::fs::read(&receipt).unwrap();
    let lines = bytes.split(|b| *b == b'\n').count() - 1;
    let (start, _) = line_span(&bytes, lines - 1);
    std::fs::File::options()
        .write(true)
        .open(&receipt)
        .unwrap()
        .set_len(start as u64)
        .unwrap();
    bed.assert_checkpoint_hides_nothing("last line cut off");
}

#[test]
fn a_torn_last_line_is_seen() {
    let bed = Bed::new();
    let receipt = bed.receipt("a");
    let len = std::fs::metadata(&receipt).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&receipt)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    bed.assert_checkpoint_hides_nothing("torn last line");
}

#[test]
fn lines_another_writer_appended_are_seen() {
    let bed = Bed::new();
    // The other writer's line: the same heartbeat made on a scratch copy.
    bed.copy("a", "other");
    let before = std::fs::metadata(bed.receipt("other")).unwrap().len() as usize;
    bed.heartbeat("other", 5).assert_ok();
    let line = std::fs::read(bed.receipt("other")).unwrap()[before..].to_vec();
    std::fs::OpenOptions::new()
        .append(true)
        .open(bed.receipt("a"))
        .unwrap()
        .write_all(&line)
        .unwrap();
    bed.assert_checkpoint_hides_nothing("appended by another writer");
    // The appended heartbeat is in the state: its evidence cannot renew the
    // lease again.
    let again = bed.heartbeat("a", 5);
    again.assert_error(2, "contract_error");
}

#[test]
fn an_edited_run_section_of_the_manifest_is_seen() {
    // `_run` seeds the replay (approved components); it is outside every
    // hash, so the checkpoint must not freeze an older version of it.
    let bed = Bed::new();
    let path = bed.run_dir("a").join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["_run"]["component_ids"]
        .as_array_mut()
        .unwrap()
        .push(json!("docs"));
    let mut bytes = bluetape_flow::receipt::canonical::to_vec(&manifest);
    bytes.push(b'\n');
    std::fs::write(&path, bytes).unwrap();
    let check = bed.run("a", &["completion-check", "--run-id", &bed.run_id]);
    assert!(check.stdout.contains("\"docs\""), "{check:?}");
    bed.assert_checkpoint_hides_nothing("component added to _run");
}
