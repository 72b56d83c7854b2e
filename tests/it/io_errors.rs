//! I/O failures are reported as I/O failures (DEVIATIONS 49, 113): a real
//! full disk — a tiny tmpfs mounted for the test (this project's machines
//! and CI run the tests as root; without the privilege the test fails, it
//! does not skip) — gives exit 5 `coordinator_conflict`, retryable, with the
//! OS's errno text and the path, and nothing acknowledged is lost; once
//! space is freed the same command succeeds.

use crate::reliability::{LaneRun, lines};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted at `path`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(path)
            .status()
            .expect("mount (util-linux) is installed");
        assert!(status.success(), "mounting a tmpfs needs root");
        Tmpfs(path.to_path_buf())
    }

    /// Fill the filesystem (write until the kernel says ENOSPC), then give
    /// back one page: room for the lock's record, not for a new receipt
    /// page.
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(28), "{e}");
                    break;
                }
            }
        }
        let len = file.metadata().unwrap().len();
        file.set_len(len - 4096).unwrap();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn assert_no_space(out: &crate::bed::Output, root: &Path) {
    let e = out.assert_error(5, "coordinator_conflict");
    assert_eq!(e["retryable"], true, "{e}");
    let message = e["message"].as_str().unwrap();
    let prefix = format!("No space left on device: '{}/", root.display());
    assert!(message.starts_with(&prefix), "{e}");
    assert!(message.ends_with("' (ENOSPC)"), "{e}");
    // The kind reaches the envelope as fields, not only as text.
    assert_eq!(e["fields"]["errno"], "ENOSPC", "{e}");
    let path = e["fields"]["path"].as_str().unwrap();
    assert!(message.contains(&format!("'{path}'")), "{e}");
}

/// A file the caller names that the OS refuses to give (a missing key or
/// head file) keeps the OS error's kind: the message says which file, and
/// the errno and path are fields; a file that is there is read as before.
#[test]
fn a_file_the_os_refuses_is_named_with_its_errno() {
    let bed = crate::bed::TestBed::from_fixture("01-init-only");
    let root = bed.root.to_string_lossy().into_owned();
    let missing = bed.work.join("missing.vkey");
    let verify = |key: &Path, head: Option<&Path>| {
        let mut args = vec![
            "--state-root".to_string(),
            root.clone(),
            "verify".into(),
            "--run-id".into(),
            bed.run_id.clone(),
            "--key".into(),
            key.to_string_lossy().into_owned(),
        ];
        if let Some(head) = head {
            args.extend(["--head".to_string(), head.to_string_lossy().into_owned()]);
        }
        bed.flow.run(&args)
    };
    let e = verify(&missing, None).assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        format!(
            "verifier key file refused: No such file or directory: '{}' (ENOENT)",
            missing.display()
        )
    );
    assert_eq!(e["fields"]["errno"], "ENOENT", "{e}");
    assert_eq!(e["fields"]["path"], missing.to_string_lossy().as_ref());
    // With a real key, the head file is the one refused.
    let printed = bed
        .flow
        .run(&[
            "key-generate",
            "--name",
            "t",
            "--out",
            &bed.work.join("t.skey").to_string_lossy(),
        ])
        .assert_ok();
    let vkey = bed.work.join("t.vkey");
    std::fs::write(&vkey, printed["verifier_key"].as_str().unwrap()).unwrap();
    let head = bed.work.join("missing.head");
    let e = verify(&vkey, Some(&head)).assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        format!(
            "head file refused: No such file or directory: '{}' (ENOENT)",
            head.display()
        )
    );
    assert_eq!(e["fields"]["errno"], "ENOENT", "{e}");
}

/// Heartbeats on a full disk: each either is acknowledged (its line fits
/// in the receipt's last page) or fails with the retryable ENOSPC error
/// and appends nothing; after freeing space the refused one succeeds, the
/// receipt holds every acknowledged line exactly once, and verifies.
#[test]
fn a_full_disk_is_a_retryable_io_error_with_the_path() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    // Only the state root is on the small disk (inputs and repo are not).
    let fs = Tmpfs::mount(&base.join("state"), "4m");
    let run = LaneRun::new(&base, &["a"]);
    assert_eq!(run.root, fs.0);
    let filler = fs.fill();
    let mut acknowledged = Vec::new();
    let mut refused = None;
    for beat in 0..64 {
        let tag = format!("full-{beat}");
        let before = run.receipt();
        let out = run.flow.run(&run.heartbeat_args("a", &tag));
        if out.code == 0 {
            acknowledged.push(tag);
            continue;
        }
        assert_no_space(&out, &run.root);
        // The lock's record fits in the page given back; the append's
        // line does not fit in the receipt's last page: the append fails
        // and is cut back.
        assert!(
            out.stderr
                .contains(&format!("{}'", run.receipt_path().display())),
            "{out:?}"
        );
        assert_eq!(run.receipt(), before, "a refused append left bytes");
        eprintln!(
            "refused after {beat} acknowledged: {}{}",
            out.stdout.trim(),
            out.stderr.trim()
        );
        refused = Some(tag);
        break;
    }
    let refused = refused.expect("the disk never filled up");

    // A new run on the full disk: the same error, and no half-made run.
    let runs_before = std::fs::read_dir(run.root.join("runs")).unwrap().count();
    let repo_b = base.join("repo-b");
    std::fs::create_dir_all(&repo_b).unwrap();
    let out = run.flow.run(&crate::bed::init_argv(
        &run.root,
        "B",
        &repo_b,
        &run.root.join("handles/b.owner"),
        &["runtime"],
    ));
    assert_no_space(&out, &run.root);
    assert_eq!(
        std::fs::read_dir(run.root.join("runs")).unwrap().count(),
        runs_before,
        "init left a run behind"
    );
    assert!(!run.root.join("handles/b.owner").exists());

    std::fs::remove_file(filler).unwrap();
    run.flow.run(&run.heartbeat_args("a", &refused)).assert_ok();
    acknowledged.push(refused);
    let receipt = run.receipt();
    let text = String::from_utf8_lossy(&receipt);
    for tag in &acknowledged {
        let needle = format!("beat {tag}\"");
        assert_eq!(
            text.lines().filter(|l| l.contains(&needle)).count(),
            1,
            "{tag}"
        );
    }
    assert!(lines(&receipt).len() > acknowledged.len());
    run.read("verify", &[]).assert_ok();
    crate::reliability::figure(
        "full disk",
        "heartbeats on a full tmpfs until one is refused, then retried",
        acknowledged.len() as u64,
        "ENOSPC is exit 5 retryable with the path; every acknowledged line once",
    );
}

/// contracts/commands.md "Answers are not lost": a mutation that committed
/// but could not write its answer — stdout on a full disk (`/dev/full`) or
/// a pipe whose reader is gone — says so on stderr (`answer_lost`, what was
/// recorded and the command that shows it) and exits 74, never 0; the
/// event is in the receipt and verifies.
#[test]
fn a_committed_mutation_whose_answer_is_lost_says_so_and_exits_74() {
    use crate::bed::TestBed;
    use std::process::Stdio;
    let run = TestBed::running(&["runtime"]);
    // lane-create of `lane` with its answer written to `stdout`.
    let lane_create = |lane: &str, stdout: Stdio| {
        run.flow
            .command(&run.lane_create_argv(lane, "agent-1"))
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let check = |out: std::process::Output, lane: &str| {
        assert_eq!(out.status.code(), Some(74), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let e: serde_json::Value = serde_json::from_str(stderr.trim()).unwrap();
        assert_eq!(e["error"], "answer_lost", "{e}");
        assert_eq!(e["retryable"], false);
        let status = format!("bluetape-flow status --run-id {}", run.run_id);
        assert_eq!(e["next_command"], status.as_str());
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("was recorded") && message.contains(&status),
            "{message}"
        );
        let events = run.events();
        let last = events.last().unwrap();
        assert_eq!(last["event_type"], "lane_created");
        assert_eq!(last["lane_id"], lane);
        assert_eq!(e["sequence"], last["sequence"], "{e}");
        run.read("verify", &[]).assert_ok();
    };
    // A full disk under the redirected stdout.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    check(lane_create("api", full.into()), "api");
    // A pipe whose reader has gone.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    check(lane_create("web", writer.into()), "web");
}
