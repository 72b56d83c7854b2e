//! The state root held once per command (DEVIATIONS 78): every file inside
//! the root — `handles/`, `reports/`, `quarantine/`, `locks/`, the lock's
//! own files — is reached from the descriptor the command opened, never by
//! resolving the root's path again. The races wait on what the writer is
//! seen doing (`/proc/<pid>/fd` holding the run open, a live holder's lock),
//! never on a fixed delay alone.

use crate::bed::copy_tree;
use crate::bed::{Entry, files};
use crate::path_swap::{Holder, finish, waiting};
use crate::reliability::{self, LaneRun, tree, tree_diff};
use serde_json::json;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Child;

fn assert_root_moved_refusal(out: &crate::bed::Output, root: &Path) {
    let e = out.assert_error(2, "contract_error");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "state root {} was moved or replaced after this command opened it; nothing was written",
            root.display()
        )),
        "{e}"
    );
}

/// Swap the state root while `child` waits for a lock: the root is
/// renamed to `moved`, and a symlink to `copy` (a copy of it in which
/// `free` — the held lock, relative to the root — is removed, so a writer
/// resolving paths finds the lock free there) takes its place; the copy
/// is snapshotted right after the swap.
fn swap_root(run: &LaneRun, base: &Path, free: &str) -> Swapped {
    let moved = base.join("root-moved");
    let copy = base.join("root-copy");
    copy_tree(&run.root, &copy);
    std::fs::remove_dir_all(copy.join(free)).unwrap();
    // The symlink is made first and renamed into place, so the root's
    // name is missing only between two renames.
    let link = base.join("root-link");
    std::os::unix::fs::symlink(&copy, &link).unwrap();
    std::fs::rename(&run.root, &moved).unwrap();
    std::fs::rename(&link, &run.root).unwrap();
    let copy_before = tree(&copy);
    Swapped {
        moved,
        copy,
        copy_before,
    }
}

/// The state root swapped by [`swap_root`]: where the real root went, the
/// copy now behind the root's path, and the copy as it was then.
struct Swapped {
    moved: PathBuf,
    copy: PathBuf,
    copy_before: BTreeMap<PathBuf, Entry>,
}

impl Swapped {
    /// `child`, which waited through the swap, refuses as the root moved;
    /// nothing was written through the copy, and the moved root holds the
    /// files `before` lists (the root's, moved along) plus, when
    /// `made_since` names one, those under that directory made after them.
    #[track_caller]
    fn assert_refused_untouched(
        &self,
        run: &LaneRun,
        child: Child,
        before: BTreeMap<PathBuf, (char, u32, String)>,
        made_since: Option<&str>,
        what: &str,
    ) {
        let out = finish(child);
        assert_eq!(
            tree_diff(&self.copy_before, &tree(&self.copy)),
            Vec::<String>::new(),
            "{what}: written through the swapped root ({out:?})"
        );
        let mut expected: BTreeMap<_, _> = before
            .into_iter()
            .map(|(p, v)| (self.moved.join(p.strip_prefix(&run.root).unwrap()), v))
            .collect();
        if let Some(dir) = made_since {
            expected.extend(files(&tree(&self.moved.join(dir))));
        }
        assert_eq!(
            files(&tree(&self.moved)),
            expected,
            "{what}: the moved root changed ({out:?})"
        );
        assert_root_moved_refusal(&out, &run.root);
    }
}

// Mutations whose write lands inside a run (`heartbeat`: the receipt), in
// `reports/` (`handoff-create`) and in `handles/` (`resume`: the new
// handle, and the old one removed after the append) wait for the run's
// lock while the state root is swapped for a symlink to a copy whose lock
// is free. A writer that resolved the root's path again would take the
// copy's lock and write beside (or into) it while the real holder still
// holds the real lock; the held root refuses instead, and neither the copy
// nor the moved root gains, loses or changes a file.

#[test]
fn a_state_root_swapped_during_a_heartbeats_lock_wait_redirects_no_write() {
    root_swap_rounds("heartbeat");
}

#[test]
fn a_state_root_swapped_during_a_reports_lock_wait_redirects_no_write() {
    root_swap_rounds("handoff-create");
}

#[test]
fn a_state_root_swapped_during_a_resumes_lock_wait_redirects_no_write() {
    root_swap_rounds("resume");
}

fn root_swap_rounds(command: &str) {
    let rounds = reliability::size(1, 10);
    for _ in 0..rounds {
        root_swap_round(command);
    }
    reliability::figure(
        "path swap",
        &format!(
            "state root swapped for a symlink to a lock-free copy during the run-lock wait ({command})"
        ),
        rounds,
        "refused every time; no file created, removed or changed in the copy or the moved root",
    );
}

fn command_argv(run: &LaneRun, command: &str) -> Vec<OsString> {
    match command {
        "heartbeat" => run.heartbeat_args("a", "root-swap"),
        "handoff-create" => {
            let last = reliability::lines(&run.receipt())
                .last()
                .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap())
                .unwrap();
            let manifest_hash = last["manifest_hash"].clone();
            let input = run.input(
                "handoff.json",
                &json!({
                    "canonical_sha": "a".repeat(64), "agents_hash": "b".repeat(64),
                    "skill_hash": "c".repeat(64), "manifest_hash": manifest_hash,
                    "run_id": run.run_id, "owner_epoch": 1,
                    "receipt_head": last["checksum"],
                    "target_hashes": {"src/lib.rs": "d".repeat(64)},
                }),
            );
            run.mutation_args("handoff-create", &["--input".into(), input.into()])
        }
        "resume" => {
            let evidence = run.input("resume-ev.json", &crate::bed::user_approval("hand over"));
            run.mutation_args(
                "resume",
                &[
                    "--evidence".into(),
                    evidence.into(),
                    "--new-owner-file".into(),
                    run.root.join("handles/next.owner").into(),
                ],
            )
        }
        other => unreachable!("{other}"),
    }
}

fn root_swap_round(command: &str) {
    let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
    // The command works when nothing is swapped (so a refusal below is the
    // swap's doing, not a bad argv).
    {
        let (_tmp, _base, probe) = LaneRun::in_temp(&["a"]);
        probe.flow.run(&command_argv(&probe, command)).assert_ok();
    }
    let argv = command_argv(&run, command);
    let before = files(&tree(&run.root));
    let holder = Holder::hold(&run);
    let child = waiting(&run, &argv);
    let lock = format!("runs/{}/locks/receipt", run.run_id);
    // The holder's lock was made after the snapshot.
    swap_root(&run, &base, &lock).assert_refused_untouched(
        &run,
        child,
        before,
        Some(&lock),
        command,
    );
    drop(holder);
}

/// `recovery-run-create` waits for the state root's recovery lock while
/// the root is swapped for a symlink to a copy whose recovery lock is
/// free. Reached from the held root, the lock stays the live holder's and
/// the refusal creates nothing: not a lock, a quarantine copy, a run or a
/// handle in the copy, nothing in the moved root.
#[test]
fn a_state_root_swapped_during_the_recovery_lock_wait_creates_nothing() {
    let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
    damage_last_line(&run);
    let argv = recovery_argv(&run);
    let lock_rel = format!("locks/recovery-{}", run.run_id);
    let holder = Holder::hold_at(&run, &run.root.join(&lock_rel));
    let before = files(&tree(&run.root));
    let child = waiting(&run, &argv);
    swap_root(&run, &base, &lock_rel).assert_refused_untouched(
        &run,
        child,
        before,
        None,
        "recovery-run-create",
    );
    drop(holder);
    reliability::figure(
        "path swap",
        "state root swapped for a symlink to a lock-free copy during the recovery-lock wait",
        1,
        "refused; no lock, quarantine copy, run or handle created in either",
    );
}

/// Change one byte of the receipt's last line (a damaged run).
fn damage_last_line(run: &LaneRun) {
    let mut bytes = run.receipt();
    let at = bytes.len() - 10;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(run.receipt_path(), bytes).unwrap();
}

fn recovery_argv(run: &LaneRun) -> Vec<OsString> {
    let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
    let input = run.input("diagnosis.json", &diagnosis);
    let evidence = run.input(
        "recovery-ev.json",
        &crate::bed::user_approval("recovery approved"),
    );
    vec![
        "--state-root".into(),
        run.root.clone().into(),
        "recovery-run-create".into(),
        "--run-id".into(),
        run.run_id.clone().into(),
        "--input".into(),
        input.into(),
        "--owner-file".into(),
        run.root.join("handles/recovered.owner").into(),
        "--evidence".into(),
        evidence.into(),
    ]
}

/// Directories of the state root outside any run, each replaced by a
/// symlink to a directory outside the root (no race): the command that
/// writes there refuses with exit 2, nothing is written through the link,
/// and the receipt is unchanged.
#[test]
fn symlinked_state_root_directories_are_refused_and_never_written_through() {
    let cases: [(&str, &str); 4] = [
        ("handles", "heartbeat"),
        ("reports", "handoff-create"),
        ("quarantine", "recovery-run-create"),
        ("locks", "recovery-run-create"),
    ];
    for (dir, command) in cases {
        let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
        let argv = if command == "recovery-run-create" {
            damage_last_line(&run);
            recovery_argv(&run)
        } else {
            command_argv(&run, command)
        };
        let path = run.root.join(dir);
        let outside = base.join(format!("outside-{dir}"));
        std::fs::rename(&path, &outside).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let outside_before = tree(&outside);
        let root_before = files(&tree(&run.root));
        let out = run.flow.run(&argv);
        assert_eq!(out.code, 2, "{dir}/{command}: {out:?}");
        let message = out.error()["message"].as_str().unwrap().to_string();
        assert!(
            message.contains("must not be a symlink")
                || message.contains("does not have the required secure mode"),
            "{dir}/{command}: {message}"
        );
        assert_eq!(
            tree_diff(&outside_before, &tree(&outside)),
            Vec::<String>::new(),
            "{dir}/{command}: written through the link"
        );
        assert_eq!(
            files(&tree(&run.root)),
            root_before,
            "{dir}/{command}: the root changed"
        );
    }
    reliability::figure(
        "path swap",
        "handles/, reports/, quarantine/, locks/ of the state root replaced by a symlink out of it",
        4,
        "exit 2, nothing written through the link",
    );
}

/// The lock is released where it was taken. A heartbeat is paused (strace
/// delays its first fsync, the receipt's, by 2 s) while it holds the lock
/// and has written its line; seen in that state (its `owner.json` present,
/// the receipt longer), `runs/<id>` is swapped for a prepared copy without
/// a lock. Taken and released through the held run directory, the lock
/// leaves the moved run unlocked and the copy untouched; a lock released
/// by path would look for its `owner.json` in the copy, find none, and
/// leave the moved run locked by a dead writer.
#[test]
fn a_run_directory_swapped_while_the_lock_is_held_is_released_in_the_held_directory() {
    let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
    let copy = base.join("run-copy");
    copy_tree(&run.run_dir(), &copy);
    let moved = base.join("run-moved");
    let argv = run.heartbeat_args("a", "held-swap");
    let before = run.receipt().len();
    let trace = base.join("trace");
    let mut child = run
        .flow
        .strace(
            &[
                "-f",
                "-e",
                "trace=fsync",
                "-e",
                "inject=fsync:delay_enter=2000000:when=1",
            ],
            &trace,
            &argv,
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("strace is required (.ci/run installs it)");
    let owner = run.run_dir().join("locks/receipt/owner.json");
    let start = std::time::Instant::now();
    while !(owner.exists() && run.receipt().len() > before) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the heartbeat ended before it was seen holding the lock ({status})");
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the heartbeat was never seen holding the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::fs::rename(run.run_dir(), &moved).unwrap();
    std::fs::rename(&copy, run.run_dir()).unwrap();
    let copy_before = tree(&run.run_dir());
    let out = finish(child);
    out.assert_ok();
    assert_eq!(
        tree_diff(&copy_before, &tree(&run.run_dir())),
        Vec::<String>::new(),
        "the copy now at runs/<id> was touched"
    );
    assert!(
        std::fs::symlink_metadata(moved.join("locks/receipt")).is_err(),
        "the lock taken in the held run directory was not released there: {:?}",
        std::fs::read_to_string(moved.join("locks/receipt/owner.json"))
    );
    assert!(
        std::fs::read_dir(moved.join("locks"))
            .unwrap()
            .next()
            .is_none(),
        "litter left in the held run's locks/"
    );
    reliability::figure(
        "path swap",
        "runs/<id> swapped for a copy while a writer holds its lock",
        1,
        "the lock is released in the directory it was taken in; the copy untouched",
    );
}

/// A handle is opened from the held root in one `openat2`, its directory
/// only looked at (contracts/receipt.md "Files"): the directory's rule
/// still holds, so `handles` open to others refuses an owner's command
/// and nothing is written.
#[test]
fn a_handles_directory_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, _base, run) = LaneRun::in_temp(&["a"]);
    let handles = run.root.join("handles");
    std::fs::set_permissions(&handles, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = files(&tree(&run.root));
    let out = run.flow.run(&command_argv(&run, "heartbeat"));
    let e = out.assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        "state-root handles does not have the required secure mode"
    );
    assert_eq!(files(&tree(&run.root)), before, "nothing written");
    std::fs::set_permissions(&handles, std::fs::Permissions::from_mode(0o700)).unwrap();
    run.flow.run(&command_argv(&run, "heartbeat")).assert_ok();
}
