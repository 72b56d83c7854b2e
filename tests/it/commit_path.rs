//! One commit per mutation (contracts/receipt.md "One commit"): the
//! append's fsync, the head rewritten in place with one more sync, no
//! rename but the receipt lock's; and a checkpoint whose size does not grow
//! with the breaches another writer recorded.

use crate::bed::{TestBed, ev, heartbeat_input};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The `n`th heartbeat's input of lane `build`, `n` seconds after T0.
fn beat(n: u32) -> Value {
    heartbeat_input(
        "build",
        "agent-build",
        &format!("2026-07-14T01:{:02}:{:02}Z", n / 60, n % 60),
        "2026-07-14T01:09:59Z",
        "still working",
    )
}

fn heartbeat_at(bed: &TestBed, n: u32, evidence: &Value) -> Value {
    bed.input("heartbeat", evidence, &beat(n)).assert_ok()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Counts of one traced call: (syncs, renames, opens).
fn counts(trace: &str) -> (usize, usize, usize) {
    let calls = |names: &[&str]| {
        trace
            .lines()
            .filter(|l| {
                let call = l.split_whitespace().nth(1).unwrap_or("");
                names.iter().any(|n| call.starts_with(&format!("{n}(")))
            })
            .count()
    };
    (
        calls(&["fsync", "fdatasync"]),
        calls(&["rename", "renameat", "renameat2"]),
        calls(&["open", "openat", "openat2"]),
    )
}

/// A running run with a running lane `build`, and its run directory.
fn running_build() -> (TestBed, std::path::PathBuf) {
    let bed = TestBed::running(&["runtime"]);
    bed.running_lane("build", None);
    let run = bed.root.join("runs").join(&bed.run_id);
    (bed, run)
}

/// How many times the traced command opened a file named `name`.
fn opened(trace: &str, name: &str) -> usize {
    trace
        .lines()
        .filter(|l| l.contains(" open(") || l.contains(" openat("))
        .filter(|l| l.contains(&format!("\"{name}\"")) || l.contains(&format!("/{name}\"")))
        .count()
}

/// The `n`th heartbeat of lane `build`, fed from two files, under
/// `strace -f`: its trace.
fn traced_heartbeat(bed: &TestBed, n: u32) -> String {
    let trace = bed.work.join(format!("heartbeat-{n}.trace"));
    let input = bed.file(&beat(n));
    let evidence = bed.file(&ev(&format!("the traced beat {n}")));
    let argv = crate::bed::mutation_argv(
        &bed.root,
        "heartbeat",
        &bed.run_id,
        &bed.owner(),
        &["--evidence", &evidence, "--input", &input],
    );
    let status = bed
        .flow
        .strace(&["-f"], &trace, &argv)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("strace is required (.ci/run installs it)");
    assert!(status.success());
    std::fs::read_to_string(&trace).unwrap()
}

/// Wait until `path` last changed more than two seconds ago: only then may
/// a checkpoint keep a copy of it under its stamp (contracts/receipt.md
/// "Checkpoint"). A wait for a condition, not a timing assumption.
fn settle(path: &Path) {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let meta = std::fs::symlink_metadata(path).unwrap();
    let changed = UNIX_EPOCH + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
    let settled = changed + Duration::from_millis(2100);
    if let Ok(wait) = settled.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// Whether `path` changed less than two seconds ago (now, after the
/// command that read it returned: so also when it read it).
fn young(path: &Path) -> bool {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let meta = std::fs::symlink_metadata(path).unwrap();
    let changed = UNIX_EPOCH + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
    SystemTime::now()
        .duration_since(changed)
        .is_ok_and(|age| age < Duration::from_millis(1900))
}

#[test]
fn a_heartbeat_commits_with_two_syncs_and_only_the_locks_rename() {
    let (bed, run) = running_build();
    settle(&run.join("manifest.json"));
    // Grow the run past the size where every mutation rewrites the caches,
    // then pick a heartbeat the cache rule lets pass (DEVIATIONS 36).
    let mut n = 0;
    loop {
        n += 1;
        let out = heartbeat_at(&bed, n, &ev(&format!("beat {n}")));
        let sequence = out["sequence"].as_u64().unwrap();
        let caches = read_json(&run.join("checkpoint.json"))["caches_sequence"]
            .as_u64()
            .unwrap();
        if sequence >= 32 && sequence + 1 < caches + caches / 8 {
            break;
        }
        assert!(n < 100, "the caches never lag");
    }
    let head_before = std::fs::metadata(run.join("receipt-head.json")).unwrap();
    let checkpoint_before = std::fs::metadata(run.join("checkpoint.json")).unwrap();
    let run_cache = std::fs::read(run.join("run.json")).unwrap();
    n += 1;
    let trace = traced_heartbeat(&bed, n);
    let (syncs, renames, opens) = counts(&trace);
    assert_eq!(syncs, 2, "the append and the head, nothing else");
    assert_eq!(renames, 1, "the receipt lock's rename only");
    // Fifteen opens: the root, the run, the checkpoint (read before the
    // lock for its manifest copy, rewritten under it through the same
    // descriptor), derived.key, the boot id, the two input files, the
    // handle; `locks`, the lock's initializer and directory; the receipt,
    // the digest table, the head and the tree.
    assert_eq!(opens, 15, "a file-fed heartbeat makes 15 opens:\n{trace}");
    // The manifest snapshot is the checkpoint's copy (its file unchanged
    // since, by its stamp): not opened.
    assert_eq!(opened(&trace, "manifest.json"), 0, "the copy stands for it");
    // Each derived file it reads and rewrites is opened once (read-write);
    // the binary maps no shared object and asks the kernel for its random
    // token directly.
    let opened = |name: &str| opened(&trace, name);
    // The receipt too: read under the lock through a descriptor opened to
    // append, which the append then writes through; and the lock's
    // directory is released through the descriptor that published it.
    for name in [
        "checkpoint.json",
        "receipt-head.json",
        "checkpoint-digests.idx",
        "receipt.jsonl",
        "receipt",
    ] {
        assert_eq!(opened(name), 1, "{name} is opened once");
    }
    // The digest log lives in the table's file (contracts/receipt.md).
    assert_eq!(opened("checkpoint-digests.log"), 0, "no file of its own");
    // The run directory is reached from the held root in one `openat2`
    // (no symlink at any component), `runs` only looked at.
    assert_eq!(opened("runs"), 0, "runs is not opened on its own");
    // So is the owner handle: `handles` is only looked at.
    assert_eq!(opened("handles"), 0, "handles is not opened on its own");
    assert!(
        trace.contains("openat2(") && trace.contains("RESOLVE_NO_SYMLINKS"),
        "the run is opened beneath the root, following no symlink"
    );
    assert!(!trace.contains(".so"), "no shared object is opened");
    assert!(!trace.contains("/dev/urandom"), "no random device is read");
    // No allocator starts in a constructor to read the kernel's memory
    // settings: a one-event mutation allocates with the C library's.
    assert!(
        !trace.contains("\"/proc/sys/vm/") && !trace.contains("\"/sys/kernel/mm/"),
        "no allocator start reads the kernel's memory settings"
    );
    // The head and the checkpoint were rewritten in place (same inode),
    // the head as one 512-byte record naming the new event.
    let head_after = std::fs::metadata(run.join("receipt-head.json")).unwrap();
    assert_eq!(head_after.ino(), head_before.ino());
    assert_eq!(head_after.len(), 512);
    let head = read_json(&run.join("receipt-head.json"));
    let receipt = std::fs::read(run.join("receipt.jsonl")).unwrap();
    assert_eq!(head["byte_length"].as_u64(), Some(receipt.len() as u64));
    let checkpoint_after = std::fs::metadata(run.join("checkpoint.json")).unwrap();
    assert_eq!(checkpoint_after.ino(), checkpoint_before.ino());
    let checkpoint = read_json(&run.join("checkpoint.json"));
    assert_eq!(checkpoint["sequence"], head["sequence"]);
    // Its tail fingerprint, made from the bytes this command read and the
    // line it appended, is that of the receipt's tail.
    let tail = &receipt[receipt.len().saturating_sub(65536)..];
    assert_eq!(
        checkpoint["tail_sha256"].as_str(),
        Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(tail)).as_str())
    );
    // The caches lag; `rebuild` brings them up to the receipt.
    assert_eq!(std::fs::read(run.join("run.json")).unwrap(), run_cache);
    bed.read("rebuild", &[]).assert_ok();
    assert_eq!(
        read_json(&run.join("run.json"))["last_sequence"],
        head["sequence"]
    );
    // And the run verifies, by us and (when it is at hand) the reference.
    bed.read("verify", &[]).assert_ok();
}

/// Append, as the Python tool may, `count` heartbeats of `lane` that each
/// repeat the evidence of the receipt's last line (a heartbeat): each is a
/// `liveness_evidence_reused` breach to our replay (the intents, their
/// evidence and times, are copied as they are).
fn append_reused_heartbeats(run: &Path, count: usize) {
    let receipt = run.join("receipt.jsonl");
    let mut bytes = std::fs::read(&receipt).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    // A heartbeat is a transaction of two intents (liveness, lease).
    assert_eq!(last["event_type"], "transaction_committed");
    let event_type = last["event_type"].as_str().unwrap().to_string();
    let mut previous = last.clone();
    for _ in 0..count {
        // Every field but the chain is the last line's own.
        let sealed = crate::bed::draft_after(&previous, &event_type, &last, "").seal();
        bytes.extend_from_slice(&sealed.line);
        previous = Value::Object(sealed.event);
    }
    std::fs::write(&receipt, &bytes).unwrap();
}

#[test]
fn breaches_another_writer_recorded_do_not_grow_the_checkpoint() {
    let (bed, run) = running_build();
    heartbeat_at(&bed, 1, &ev("first beat"));
    heartbeat_at(&bed, 2, &ev("second beat"));
    let clean = std::fs::metadata(run.join("checkpoint.json"))
        .unwrap()
        .len();
    append_reused_heartbeats(&run, 300);
    // Auditors list every breach (a full replay).
    let verified = bed.read("verify", &[]).assert_ok();
    let breaches = verified["breaches"].as_array().unwrap();
    assert_eq!(breaches.len(), 300, "{verified}");
    assert!(
        breaches
            .iter()
            .all(|b| b["rule"] == "liveness_evidence_reused")
    );
    // Our next heartbeats (the first replays in full, the next starts from
    // the checkpoint) keep a count and the latest few, not the list.
    heartbeat_at(&bed, 3, &ev("fresh beat"));
    heartbeat_at(&bed, 4, &ev("another fresh beat"));
    let checkpoint = read_json(&run.join("checkpoint.json"));
    assert_eq!(checkpoint["ours"]["breach_count"], 300);
    let kept = checkpoint["ours"]["breaches"].as_array().unwrap();
    assert_eq!(kept.len(), 16);
    assert_eq!(kept.last(), breaches.last());
    let size = std::fs::metadata(run.join("checkpoint.json"))
        .unwrap()
        .len();
    assert!(
        size < clean + 16 * 512,
        "checkpoint grew with the breaches: {clean} -> {size} bytes"
    );
    // A heartbeat repeating the latest evidence is still refused, and the
    // auditors still see all 300 breaches, none of ours.
    bed.input("heartbeat", &ev("another fresh beat"), &beat(5))
        .assert_error(2, "contract_error");
    let verified = bed.read("verify", &[]).assert_ok();
    assert_eq!(verified["breaches"].as_array().unwrap().len(), 300);
}

/// The manifest snapshot a mutation takes from the checkpoint's copy is
/// the file's bytes: the copy is kept only under a stamp older than the
/// clock's tick, and used only while `manifest.json` still has it.
#[test]
fn a_mutation_takes_the_manifest_copy_only_under_the_files_stamp() {
    let (bed, run) = running_build();
    let manifest = run.join("manifest.json");
    // A manifest changed less than two seconds ago is not copied.
    heartbeat_at(&bed, 1, &ev("beat 1"));
    if young(&manifest) {
        let checkpoint = read_json(&run.join("checkpoint.json"));
        assert_eq!(checkpoint["manifest_snapshot"], Value::Null);
    }
    settle(&manifest);
    heartbeat_at(&bed, 2, &ev("beat 2"));
    let checkpoint = read_json(&run.join("checkpoint.json"));
    let bytes = std::fs::read(&manifest).unwrap();
    assert_eq!(
        checkpoint["manifest_snapshot"].as_str().map(str::as_bytes),
        Some(&bytes[..]),
        "the copy is the file's bytes"
    );
    let meta = std::fs::metadata(&manifest).unwrap();
    assert_eq!(checkpoint["manifest_stamp"]["ino"], meta.ino());
    assert_eq!(opened(&traced_heartbeat(&bed, 3), "manifest.json"), 0);
    // The same bytes written again move the file's change time: the next
    // mutation reads the file, and keeps no copy of a change this young.
    std::fs::write(&manifest, &bytes).unwrap();
    assert_eq!(opened(&traced_heartbeat(&bed, 4), "manifest.json"), 1);
    if young(&manifest) {
        let checkpoint = read_json(&run.join("checkpoint.json"));
        assert_eq!(checkpoint["manifest_snapshot"], Value::Null);
    }
    // Once it has settled, the copy is taken again and the file left shut.
    settle(&manifest);
    heartbeat_at(&bed, 5, &ev("beat 5"));
    assert_eq!(opened(&traced_heartbeat(&bed, 6), "manifest.json"), 0);
    bed.read("verify", &[]).assert_ok();
}

/// A copy rewritten by a holder of `derived.key` (validly MACed, under the
/// file's real stamp) is never what a full replay stands on: the command
/// that replays reads `manifest.json`, finds the copy is not it, removes
/// the checkpoint and is refused with nothing written; run again, it reads
/// the file and succeeds.
#[test]
fn a_forged_manifest_copy_is_refused_by_the_replay_that_reads_the_file() {
    let (bed, run) = running_build();
    let manifest = run.join("manifest.json");
    settle(&manifest);
    heartbeat_at(&bed, 1, &ev("beat 1"));
    let real = std::fs::read_to_string(&manifest).unwrap();
    // Same length, another repo root: what the stamp cannot see.
    let repo = bed.repo.to_str().unwrap();
    let other = format!("{}X", &repo[..repo.len() - 1]);
    let forged = real.replace(repo, &other);
    assert_ne!(forged, real);
    assert_eq!(forged.len(), real.len());
    crate::bed::forge::remac_checkpoint(&bed.root, &run, |checkpoint| {
        assert_eq!(
            checkpoint["manifest_snapshot"].as_str(),
            Some(real.as_str())
        );
        checkpoint["manifest_snapshot"] = Value::String(forged.clone());
    });
    let receipt = std::fs::read(run.join("receipt.jsonl")).unwrap();
    // `lane-create` decides on a full replay.
    let argv = bed.lane_create_argv("second", "agent-second");
    let refused = bed.flow.run(&argv).assert_error(5, "coordinator_conflict");
    assert!(
        crate::bed::str_field(&refused, "message").contains("not manifest.json"),
        "{refused}"
    );
    assert_eq!(std::fs::read(run.join("receipt.jsonl")).unwrap(), receipt);
    assert!(
        !run.join("checkpoint.json").exists(),
        "the forged copy is gone"
    );
    bed.flow.run(&argv).assert_ok();
    let checkpoint = read_json(&run.join("checkpoint.json"));
    assert_eq!(
        checkpoint["manifest_snapshot"].as_str(),
        Some(real.as_str())
    );
    bed.read("verify", &[]).assert_ok();
}
