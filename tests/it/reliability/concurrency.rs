//! Reliability scenario 3 (docs/reliability.md): concurrency. Four writer
//! processes append heartbeats to one run at once (each on its own lane,
//! retrying on the retryable exit 5) while readers run `verify` in a loop.
//! Every heartbeat is present exactly once, sequences are dense, the chain
//! verifies, every acknowledged (sequence, checksum) is the receipt's, and
//! no reader ever reports a false corruption: a reader may get the typed
//! "append in progress" (exit 5, decisions.md 13), never exit 3, and every
//! head it reports is one the receipt really had.
//!
//! With `BENCH_OTHER` naming the Python reference (for example
//! `BENCH_OTHER="python3 /path/to/bluetape-flow.py"`), the reference and
//! our tool also append alternately to one run, each verifying what the
//! other wrote; without it that test says it was skipped.

use crate::reliability;

use reliability::{LaneRun, beat_tag, figure, lines, size};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

const SCENARIO: &str = "3. Concurrency";
const WRITERS: usize = 4;
const READERS: usize = 2;

#[derive(Default, Debug)]
struct Readers {
    verified: u64,
    in_progress: u64,
    other: Vec<String>,
    /// (sequence, checksum) every successful verify reported.
    heads: BTreeSet<(u64, String)>,
}

#[test]
fn reliability_concurrency_four_writers_and_readers_on_one_run() {
    let per_writer = size(25, 200);
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let lanes: Vec<String> = (0..WRITERS).map(|i| format!("w{i}")).collect();
    let lane_refs: Vec<&str> = lanes.iter().map(String::as_str).collect();
    let run = LaneRun::new(&base, &lane_refs);
    let setup_lines = lines(&run.receipt()).len() as u64;
    let done = AtomicBool::new(false);
    let readers = Mutex::new(Readers::default());
    // (lane, beat) -> (sequence, checksum) as printed.
    let acked: Mutex<BTreeMap<String, (u64, String)>> = Mutex::new(BTreeMap::new());
    let retries = Mutex::new(0u64);
    std::thread::scope(|scope| {
        let writers: Vec<_> = lanes
            .iter()
            .map(|lane| {
                let (run, acked, retries) = (&run, &acked, &retries);
                scope.spawn(move || {
                    for beat in 0..per_writer {
                        let tag = format!("{lane}-{beat}");
                        let argv = run.heartbeat_args(lane, &tag);
                        let mut attempts = 0;
                        loop {
                            let out = run.command(&argv).output().unwrap();
                            match out.status.code() {
                                Some(0) => {
                                    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                                    acked.lock().unwrap().insert(
                                        tag.clone(),
                                        (
                                            v["sequence"].as_u64().unwrap(),
                                            v["checksum"].as_str().unwrap().to_string(),
                                        ),
                                    );
                                    break;
                                }
                                Some(5) => {
                                    let e: Value = serde_json::from_slice(&out.stderr).unwrap();
                                    assert_eq!(e["retryable"], true, "{e}");
                                    attempts += 1;
                                    *retries.lock().unwrap() += 1;
                                    assert!(attempts < 100, "{tag}: still busy: {e}");
                                }
                                other => panic!(
                                    "{tag}: exit {other:?}: {}",
                                    String::from_utf8_lossy(&out.stderr)
                                ),
                            }
                        }
                    }
                })
            })
            .collect();
        for _ in 0..READERS {
            let (run, done, readers) = (&run, &done, &readers);
            scope.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let out = run.read("verify", &[]);
                    let mut r = readers.lock().unwrap();
                    match out.code {
                        0 => {
                            let v = out.json();
                            r.verified += 1;
                            r.heads.insert((
                                v["sequence"].as_u64().unwrap(),
                                v["checksum"].as_str().unwrap().to_string(),
                            ));
                        }
                        5 if out.stderr.contains("append in progress") => r.in_progress += 1,
                        code => r.other.push(format!("exit {code}: {}", out.stderr)),
                    }
                }
            });
        }
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let readers = readers.into_inner().unwrap();
    let acked = acked.into_inner().unwrap();
    let total = WRITERS as u64 * per_writer;
    assert!(
        readers.other.is_empty(),
        "false reports by readers: {:?}",
        readers.other
    );
    assert_eq!(acked.len() as u64, total);
    // The receipt: dense, chained, every heartbeat exactly once.
    let v = run.read("verify", &[]).assert_ok();
    assert_eq!(v["sequence"], setup_lines + total);
    let receipt = run.receipt();
    let events: Vec<Value> = lines(&receipt)
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], index as u64 + 1);
        if let Some(tag) = beat_tag(event) {
            *seen.entry(tag).or_default() += 1;
        }
    }
    assert_eq!(seen.len() as u64, total);
    assert!(seen.values().all(|n| *n == 1), "duplicates: {seen:?}");
    for (tag, (sequence, checksum)) in &acked {
        let event = &events[*sequence as usize - 1];
        assert_eq!(beat_tag(event).as_deref(), Some(tag.as_str()));
        assert_eq!(event["checksum"], checksum.as_str());
    }
    // Every head a reader saw is one the receipt really had.
    for (sequence, checksum) in &readers.heads {
        assert_eq!(
            events[*sequence as usize - 1]["checksum"],
            checksum.as_str()
        );
    }
    let retries = retries.into_inner().unwrap();
    figure(
        SCENARIO,
        &format!(
            "{WRITERS} writer processes × {per_writer} heartbeats on one run (retrying on exit 5: {retries} retries), {READERS} readers running verify meanwhile"
        ),
        total,
        &format!(
            "all {total} present exactly once, sequence dense 1–{}, chain valid, every acknowledged sequence/checksum in the receipt; readers: {} verify runs — {} ok (every head they reported is the receipt's), {} 'append in progress' (exit 5), 0 exit 3, 0 other",
            setup_lines + total,
            readers.verified + readers.in_progress,
            readers.verified,
            readers.in_progress
        ),
    );
}

#[test]
fn reliability_concurrency_alternating_with_the_reference_skipped_without_bench_other() {
    let Some(other) = std::env::var("BENCH_OTHER")
        .ok()
        .filter(|s| !s.trim().is_empty())
    else {
        eprintln!(
            "SKIPPED: set BENCH_OTHER to the Python reference (e.g. BENCH_OTHER=\"python3 /tmp/ref/skills/bluetape-workflow/scripts/bluetape-flow.py\") to run our tool and the reference alternately on one run"
        );
        figure(
            SCENARIO,
            "the Python reference and our tool appending alternately to one run",
            0,
            "SKIPPED: BENCH_OTHER does not name the reference",
        );
        return;
    };
    let rounds = size(5, 50);
    let words: Vec<&str> = other.split_whitespace().collect();
    let (_tmp, _, run) = LaneRun::in_temp(&["ours", "theirs"]);
    let reference = |argv: &[std::ffi::OsString]| {
        let out = std::process::Command::new(words[0])
            .args(&words[1..])
            .args(argv)
            .env_clear()
            .env("HOME", &run.flow.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&run.flow.cwd)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let mut appended = 0u64;
    for round in 0..rounds {
        let (code, stdout, stderr) =
            reference(&run.heartbeat_args("theirs", &format!("theirs-{round}")));
        assert_eq!(code, Some(0), "reference heartbeat: {stdout} {stderr}");
        let out = run
            .command(&run.heartbeat_args("ours", &format!("ours-{round}")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        appended += 2;
        // Each tool verifies what both wrote.
        let ours = run.read("verify", &[]).assert_ok();
        let (code, stdout, stderr) = reference(&run.read_args("verify", &[]));
        assert_eq!(code, Some(0), "reference verify: {stdout} {stderr}");
        let theirs: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(ours["sequence"], theirs["sequence"]);
        assert_eq!(ours["checksum"], theirs["checksum"]);
    }
    let receipt = run.receipt();
    let tags: Vec<String> = lines(&receipt)
        .iter()
        .filter_map(|l| beat_tag(&serde_json::from_slice(l).unwrap()))
        .collect();
    let expected: Vec<String> = (0..rounds)
        .flat_map(|r| [format!("theirs-{r}"), format!("ours-{r}")])
        .collect();
    assert_eq!(tags, expected);
    figure(
        SCENARIO,
        &format!(
            "the Python reference and our tool appending heartbeats alternately to one run ({rounds} rounds)"
        ),
        appended,
        "all present in order; after every round both tools verify the same sequence and checksum",
    );
}
