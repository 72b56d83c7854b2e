//! No path swapped under us (DEVIATIONS 50). A mutation opens the state root
//! once and reaches `runs/<id>` and every file in it from held descriptors,
//! never following a symlink; after waiting for the lock it checks that
//! `runs/<id>`, reached again from the held root, is still the directory it
//! holds. The races are made deterministic: a separate process holds the
//! receipt lock (a live pid with the flock, as our binary holds it), the
//! waiting writer is seen holding the run directory open (`/proc/<pid>/fd`),
//! and only then is the directory swapped.

use crate::reliability::{self, LaneRun, tree, tree_diff};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A live process holding the run's receipt lock (pid and flock) until
/// killed.
pub struct Holder(Child);

impl Holder {
    pub fn hold(run: &LaneRun) -> Holder {
        Holder::hold_at(run, &run.run_dir().join("locks/receipt"))
    }

    /// Hold the lock directory `lock` (its parent must exist).
    pub fn hold_at(run: &LaneRun, lock: &Path) -> Holder {
        let ready = run.base.join(format!("ready-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let script = format!(
            "mkdir -m 700 '{lock}' && printf '{{\"pid\": %s, \"token\": \"holder\"}}\\n' $$ > '{lock}/owner.json' \
             && chmod 600 '{lock}/owner.json' && exec flock '{lock}/owner.json' sh -c \"touch '{ready}'; sleep 60\"",
            lock = lock.display(),
            ready = ready.display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !ready.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the lock holder exited early ({status})");
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "holder never ready"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid` is inside a sleep system call: the lock wait is
/// the only place a command sleeps, so with the run directory held this is
/// the wait itself (holding the directory alone is also true of the reads
/// before the run is validated, which a swap then tests instead).
fn sleeping(pid: u32) -> bool {
    #[cfg(target_arch = "x86_64")]
    const SLEEPS: [&str; 2] = ["35", "230"]; // nanosleep, clock_nanosleep
    #[cfg(target_arch = "aarch64")]
    const SLEEPS: [&str; 2] = ["101", "115"];
    std::fs::read_to_string(format!("/proc/{pid}/syscall")).is_ok_and(|s| {
        s.split_whitespace()
            .next()
            .is_some_and(|n| SLEEPS.contains(&n))
    })
}

/// Start `heartbeat` and return once it holds the run directory open and
/// sleeps: it has validated the run and is waiting for the lock.
fn waiting_heartbeat(run: &LaneRun, tag: &str) -> Child {
    waiting(run, &run.heartbeat_args("a", tag))
}

/// A one-lane run in a fresh temp dir (the temp dir, its base, the run),
/// a [`Holder`] of its receipt lock, and a heartbeat `tag` waiting for it.
fn held_with_a_waiting_heartbeat(
    tag: &str,
) -> (tempfile::TempDir, PathBuf, LaneRun, Holder, Child) {
    let (tmp, base, run) = LaneRun::in_temp(&["a"]);
    let holder = Holder::hold(&run);
    let child = waiting_heartbeat(&run, tag);
    (tmp, base, run, holder, child)
}

/// Start the binary with `argv` and return once it holds the run
/// directory open and waits for the lock (see [`waiting_heartbeat`]).
pub fn waiting(run: &LaneRun, argv: &[std::ffi::OsString]) -> Child {
    let mut child = run.spawn_piped(argv);
    let dir = run.run_dir();
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let start = Instant::now();
    loop {
        let holds = std::fs::read_dir(&fds)
            .map(|entries| {
                entries
                    .flatten()
                    .any(|e| std::fs::read_link(e.path()).is_ok_and(|target| target == dir))
            })
            .unwrap_or(false);
        if holds && sleeping(child.id()) {
            return child;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "heartbeat finished before it waited ({status}): {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        // No fallback on time: on a loaded machine a writer may take longer
        // than any fixed delay to open the run, and a swap before it has
        // would test the open, not the wait. (A writer that holds no
        // descriptor, as older builds, ends busy and fails above.)
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "heartbeat never held the run directory open"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub fn finish(child: Child) -> crate::bed::Output {
    crate::bed::Output::of(&child.wait_with_output().unwrap())
}

fn assert_moved_refusal(out: &crate::bed::Output, run_id: &str) {
    let e = out.assert_error(2, "contract_error");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "run directory runs/{run_id} was moved or replaced after this command opened it; nothing was written"
        )),
        "{e}"
    );
}

/// The race of DEVIATIONS 50: while a live process holds the lock,
/// `runs/<id>` is renamed away and a symlink to a copy takes its place. The
/// waiting heartbeat refuses (exit 2) instead of appending to the copy; the
/// copy and the moved original are unchanged.
#[test]
fn a_run_directory_swapped_for_a_symlink_during_the_lock_wait_is_refused() {
    let rounds = reliability::size(2, 20);
    for _ in 0..rounds {
        swap_round();
    }
    reliability::figure(
        "path swap",
        "runs/<id> swapped for a symlink to a copy during the lock wait",
        rounds,
        "refused every time, copy and original unchanged",
    );
}

fn swap_round() {
    let (_tmp, base, run, holder, child) = held_with_a_waiting_heartbeat("swap");
    let before = run.receipt();

    let moved = base.join("moved");
    swap_for_a_copy_is_refused(&run, child, &run.run_dir(), &moved, &base.join("copy"));
    assert_eq!(std::fs::read(moved.join("receipt.jsonl")).unwrap(), before);
    drop(holder);
}

/// Swap `dir`, while `child` waits for the lock, for a symlink to a copy
/// of it (the original renamed to `moved`); `child` must refuse as the
/// run moved, changing neither the copy nor the original.
fn swap_for_a_copy_is_refused(run: &LaneRun, child: Child, dir: &Path, moved: &Path, copy: &Path) {
    std::fs::rename(dir, moved).unwrap();
    crate::bed::copy_tree(moved, copy);
    std::os::unix::fs::symlink(copy, dir).unwrap();
    let copy_before = tree(copy);
    let moved_before = tree(moved);

    let out = finish(child);
    assert_moved_refusal(&out, &run.run_id);
    assert_eq!(tree_diff(&copy_before, &tree(copy)), Vec::<String>::new());
    assert_eq!(tree_diff(&moved_before, &tree(moved)), Vec::<String>::new());
}

/// Moving the run away during the wait: the refused writer creates
/// nothing, neither inside the moved run nor a ghost `runs/<id>/locks`.
#[test]
fn a_run_moved_away_during_the_lock_wait_is_not_recreated() {
    let (_tmp, base, run, holder, child) = held_with_a_waiting_heartbeat("away");
    let before = run.receipt();

    let moved = base.join("moved");
    std::fs::rename(run.run_dir(), &moved).unwrap();
    let moved_before = tree(&moved);
    let root_before = tree(&run.root);

    let out = finish(child);
    assert_moved_refusal(&out, &run.run_id);
    assert!(
        std::fs::symlink_metadata(run.run_dir()).is_err(),
        "a ghost run directory was recreated"
    );
    assert_eq!(
        tree_diff(&root_before, &tree(&run.root)),
        Vec::<String>::new()
    );
    assert_eq!(
        tree_diff(&moved_before, &tree(&moved)),
        Vec::<String>::new()
    );
    assert_eq!(std::fs::read(moved.join("receipt.jsonl")).unwrap(), before);

    // Once the holder is gone and its lock removed, a new writer reports
    // the missing run as before (exit 3) and still recreates nothing.
    drop(holder);
    std::fs::remove_dir_all(moved.join("locks/receipt")).unwrap();
    run.flow
        .run(&run.heartbeat_args("a", "after"))
        .assert_error(3, "receipt_corrupt");
    assert!(std::fs::symlink_metadata(run.run_dir()).is_err());
    reliability::figure(
        "path swap",
        "runs/<id> renamed out of the state root during the lock wait",
        1,
        "refused; nothing created inside or outside (no ghost runs/<id>/locks)",
    );
}

/// A parent swapped during the wait: `runs` itself renamed away and
/// replaced by a symlink to a copy. The held state root reaches `runs`
/// without following the symlink, so the writer refuses; nothing changes.
#[test]
fn a_runs_directory_swapped_for_a_symlink_during_the_wait_is_refused() {
    let (_tmp, base, run, holder, child) = held_with_a_waiting_heartbeat("runs-swap");

    swap_for_a_copy_is_refused(
        &run,
        child,
        &run.root.join("runs"),
        &base.join("runs-moved"),
        &base.join("runs-copy"),
    );
    drop(holder);
    reliability::figure(
        "path swap",
        "state-root runs/ swapped for a symlink to a copy during the lock wait",
        1,
        "refused, copy and original unchanged",
    );
}

/// Symlinked parents with no race at all: `runs`, and the run's own
/// `locks` and `lanes`, each replaced by a symlink to a directory outside
/// the state root. Every mutation refuses with exit 2 and nothing is
/// written through the link.
#[test]
fn symlinked_parents_are_refused_and_never_written_through() {
    for parent in ["runs", "locks", "lanes"] {
        let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
        let path = if parent == "runs" {
            run.root.join("runs")
        } else {
            run.run_dir().join(parent)
        };
        let outside = base.join(format!("outside-{parent}"));
        std::fs::rename(&path, &outside).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let outside_before = tree(&outside);
        let before = run.receipt();
        let out = run.flow.run(&run.heartbeat_args("a", parent));
        assert_eq!(out.code, 2, "{parent}: {out:?}");
        assert_eq!(
            tree_diff(&outside_before, &tree(&outside)),
            Vec::<String>::new(),
            "{parent}"
        );
        assert_eq!(run.receipt(), before, "{parent}: nothing appended");
    }
    reliability::figure(
        "path swap",
        "runs/, runs/<id>/locks, runs/<id>/lanes replaced by a symlink out of the root",
        3,
        "exit 2, nothing written through the link",
    );
}
