//! Writers exclude each other through the reference's directory lock:
//! parallel mutations on one run never lose or duplicate an event, and the
//! chain stays valid. A writer that cannot get the lock in time answers
//! exit 5 (retryable) and writes nothing.

use crate::bed::{TestBed, lane_input};
use std::collections::BTreeSet;

/// Spawn one `lane-create` per lane id at once; returns (created, refused)
/// lane ids, every refusal checked as a typed, retryable lock conflict.
fn create_at_once(run: &TestBed, lanes: &[String]) -> (BTreeSet<String>, BTreeSet<String>) {
    let owner = run.owner();
    let writers: Vec<_> = lanes
        .iter()
        .map(|lane| {
            let input = run.file(&lane_input(lane, &format!("agent-{lane}"), &[]));
            let argv = [
                "--state-root",
                run.root.to_str().unwrap(),
                "lane-create",
                "--run-id",
                &run.run_id,
                "--owner-file",
                owner.to_str().unwrap(),
                "--evidence",
                run.evidence.to_str().unwrap(),
                "--input",
                &input,
            ];
            let child = run
                .flow
                .command(&argv)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (lane.clone(), child)
        })
        .collect();
    let (mut created, mut refused) = (BTreeSet::new(), BTreeSet::new());
    for (lane, child) in writers {
        let out = crate::bed::Output::of(&child.wait_with_output().unwrap());
        match out.code {
            0 => {
                assert_eq!(out.assert_ok()["operation"], "lane-create", "{out:?}");
                created.insert(lane);
            }
            5 => {
                let e = out.failure();
                assert_eq!(
                    (e.error.as_str(), e.retryable),
                    ("coordinator_conflict", true),
                    "{out:?}"
                );
                assert!(
                    crate::bed::is_reference_message(
                        &e.message,
                        "state lock owner is live or unknown"
                    ),
                    "{out:?}"
                );
                refused.insert(lane);
            }
            _ => panic!("{lane}: unexpected exit: {out:?}"),
        }
    }
    (created, refused)
}

/// The lane ids the receipt records as created, each exactly once.
fn recorded_lanes(run: &TestBed) -> BTreeSet<String> {
    let ids: Vec<String> = run
        .events()
        .iter()
        .filter(|e| e["event_type"] == "lane_created")
        .map(|e| e["lane_id"].as_str().unwrap().to_string())
        .collect();
    let set: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(set.len(), ids.len(), "a lane was created twice: {ids:?}");
    set
}

#[test]
fn parallel_writers_keep_one_valid_chain() {
    let run = TestBed::running(&["runtime"]);
    let lanes: Vec<String> = (0..8).map(|i| format!("lane-{i}")).collect();

    // While a live process (this test) holds the receipt lock, every one
    // of four writers waits out its patience and is refused, writing
    // nothing.
    let lock = crate::bed::hold_receipt_lock(&run.root, &run.dir);
    let before = run.snapshot();
    let (created, refused) = create_at_once(&run, &lanes[..4]);
    assert_eq!(created, BTreeSet::new());
    assert_eq!(refused, lanes[..4].iter().cloned().collect());
    assert_eq!(before, run.snapshot(), "a refused writer wrote");
    std::fs::remove_file(lock.join("owner.json")).unwrap();
    std::fs::remove_dir(&lock).unwrap();

    // Eight processes create eight different lanes at once. Each waits up
    // to 1.5 s for the lock, far longer than seven appends take, so every
    // one of them wins: none lost, none refused, none duplicated.
    let (created, refused) = create_at_once(&run, &lanes);
    assert_eq!(refused, BTreeSet::new());
    assert_eq!(created, lanes.iter().cloned().collect());
    assert_eq!(recorded_lanes(&run), created);
    let v = run.read("verify", &[]).assert_ok();
    // init + approve + start + one event per writer, no more, no less.
    assert_eq!(v["event_count"], 3 + lanes.len() as u64);
    // No lock or temp file is left behind.
    assert!(!run.dir.join("locks/receipt").exists());
    let stray: Vec<_> = std::fs::read_dir(&run.dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}
