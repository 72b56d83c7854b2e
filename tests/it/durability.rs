//! Decisions 13 and 15: readers during an append, and fsyncs beyond the
//! reference (directory fsync after every create or rename, file fsync
//! before success is printed). The fsync test traces the real binary.

use crate::bed as common;
use crate::bed::TestBed;
use bluetape_flow::store::root::StateRoot;

use common::Flow;
use std::path::Path;

/// A reader that saw a half-written line, and looks at the lock only after
/// the writer finished and released it, still answers "append in
/// progress" (retryable), never a false corruption.
#[test]
fn a_torn_tail_completed_before_the_reader_looks_at_the_lock_is_not_corruption() {
    use bluetape_flow::commands::ledger::{Verdict, damage_error, open_run, verify_receipt};
    use bluetape_flow::commands::{ErrorKind, FlowError};
    use bluetape_flow::coordinator::raced::Raced;
    let bed = TestBed::planned(&["runtime"]);
    let (root, run_id) = (&bed.root, &bed.run_id);
    let receipt = root.join("runs").join(run_id).join("receipt.jsonl");
    let whole = std::fs::read(&receipt).unwrap();
    // What the reader saw: the line without its last bytes.
    std::fs::write(&receipt, &whole[..whole.len() - 5]).unwrap();
    let run = open_run(&StateRoot::begin(root), run_id).unwrap();
    let Verdict::Damaged(damage) = verify_receipt(&run, |_| Ok(())).unwrap() else {
        panic!("a torn line is damage")
    };
    assert!(matches!(
        damage_error(&run, &damage, false).kind(),
        ErrorKind::ReceiptDamaged(_)
    ));
    // The writer completes the line and releases the lock.
    std::fs::write(&receipt, &whole).unwrap();
    let in_progress = damage_error(&run, &damage, false);
    assert_eq!(in_progress, FlowError::from(Raced::AppendInProgress));
    assert!(in_progress.message().contains("append in progress"));
    let teaching = in_progress.own_teaching().unwrap();
    assert!(
        teaching
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("appending"))
    );
    // A lock holder's own view is never softened.
    assert!(matches!(
        damage_error(&run, &damage, true).kind(),
        ErrorKind::ReceiptDamaged(_)
    ));
}

#[test]
fn torn_tail_under_a_live_writer_is_an_append_in_progress() {
    let bed = TestBed::planned(&["runtime"]);
    let (root, run_id) = (&bed.root, &bed.run_id);
    let run = root.join("runs").join(run_id);
    let receipt = run.join("receipt.jsonl");
    let mut bytes = std::fs::read(&receipt).unwrap();
    bytes.extend_from_slice(b"{\"agent_id\":null,\"chec");
    std::fs::write(&receipt, &bytes).unwrap();
    // Without a writer: a torn tail is damage at sequence 2.
    let out = bed.read("verify", &[]);
    let e = out.assert_error(3, "receipt_corrupt");
    assert_eq!(
        e["message"],
        "receipt corruption at sequence 2: incomplete final event"
    );
    // With a live lock holder (this test process): retry later, not corrupt.
    let lock = run.join("locks/receipt");
    std::fs::create_dir(&lock).unwrap();
    let owner = format!(
        "{{\"created_at\":\"2026-01-01T00:00:00Z\",\"pid\":{},\"session_id\":0,\"token\":\"t\"}}\n",
        std::process::id()
    );
    std::fs::write(lock.join("owner.json"), owner).unwrap();
    common::set_modes(root);
    let before = common::snapshot(root);
    let out = bed.read("verify", &[]);
    let e = out.assert_error(5, "coordinator_conflict");
    assert_eq!(e["next_command"], "resume-check");
    assert!(
        crate::bed::str_field(&e, "message").contains("append in progress"),
        "{e}"
    );
    assert_eq!(
        e["hint"], "another writer is appending: retry in a moment",
        "the hint is made with the refusal: {e}"
    );
    assert_eq!(before, common::snapshot(root));
}

fn fsynced_paths(trace: &str) -> Vec<String> {
    // strace -y prints fsync(3</path>) = 0
    trace
        .lines()
        .filter(|l| l.contains("fsync(") && l.trim_end().ends_with("= 0"))
        .filter_map(|l| {
            let start = l.find('<')? + 1;
            let end = l[start..].find('>')? + start;
            Some(l[start..end].to_string())
        })
        .collect()
}

#[test]
fn init_fsyncs_files_and_the_directories_it_changes() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let root = base.join("state");
    std::fs::create_dir(base.join("repo")).unwrap();
    let trace = base.join("trace.txt");
    let init = common::init_argv(
        &root,
        "A",
        &base.join("repo"),
        &root.join("handles/main.owner"),
        &["runtime"],
    );
    let status = Flow::new(&base)
        .strace(&["-f", "-y", "-e", "trace=fsync,fdatasync"], &trace, &init)
        .status()
        .expect("strace is required (.ci/run installs it)");
    assert!(status.success());
    let synced = fsynced_paths(&std::fs::read_to_string(&trace).unwrap());
    let run_id = common::first_run_id(&root);
    let run = root.join("runs").join(&run_id);
    let has = |p: &Path| synced.iter().any(|s| Path::new(s) == p);
    for path in [
        root.clone(),              // new subdirectories and config.json
        root.join("runs"),         // the new run directory
        run.clone(),               // receipt.jsonl, manifest.json, run.json created
        run.join("receipt.jsonl"), // the append itself
        root.join("handles"),      // the published handle
    ] {
        assert!(has(&path), "no fsync of {}: {synced:?}", path.display());
    }
    // A new state root's .gitignore is written like config.json: its
    // bytes fsynced under the temp name before the rename, then the root
    // (DEVIATIONS 8, 92).
    let ignore_temp = root.join("..gitignore.");
    assert!(
        synced
            .iter()
            .any(|s| s.starts_with(ignore_temp.to_str().unwrap())),
        "{synced:?}"
    );
    assert!(root.join(".gitignore").is_file());
    // The handle's bytes are fsynced under the staging name before the
    // hard link publishes the same inode.
    let staging = root.join("handles").join("init-");
    assert!(
        synced
            .iter()
            .any(|s| s.starts_with(staging.to_str().unwrap())),
        "{synced:?}"
    );
}
