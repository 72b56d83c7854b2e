//! Reliability scenario 1 (docs/reliability.md): crash during append. The
//! real binary appends heartbeats in a loop and is killed with SIGKILL at
//! seeded random moments. After every attempt the receipt is compared with
//! everything acknowledged so far:
//!
//! - every append that printed success is present, in order, byte for byte
//!   (the receipt always starts with the acknowledged bytes, and the new
//!   line carries the printed sequence and checksum);
//! - a killed append either left nothing, or its own complete event
//!   (committed, reply lost — never someone else's, never twice), or a torn
//!   last line that `verify` refuses and `receipt-diagnose` names; nothing
//!   unacknowledged is ever reported as valid unless it is complete and
//!   chained;
//! - the lock a killed writer leaves behind is taken over by the next one.
//!
//! Two traces back the design: an append is exactly one write call (a
//! killed process cannot leave half a line from a second write), and every
//! directory is created with mode 0700 (a kill between mkdir and chmod
//! cannot leave a directory every later check refuses).

use crate::reliability;

use reliability::{LaneRun, Rng, beat_tag, figure, lines, seed, size};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

const SCENARIO: &str = "1. Crash during append";

/// The damaged run is superseded by a recovery run: `recovery-run-create`
/// with its diagnosis succeeds, the new run verifies, and its first event
/// names the damaged run's trusted prefix. Returns the new run id.
fn check_recoverable(run: &LaneRun, diagnosis: &Value) -> String {
    let input = run.input("diagnosis.json", diagnosis);
    let approval = run.input(
        "recovery-approval.json",
        &serde_json::json!([{"kind": "user_approval", "summary": "recover the torn run"}]),
    );
    let owner = run
        .root
        .join("handles")
        .join(format!("recovery-{}.owner", run.run_id));
    let (input, approval) = (input.to_str().unwrap(), approval.to_str().unwrap());
    let out = run
        .flow
        .run(&crate::bed::mutation_argv(
            &run.root,
            "recovery-run-create",
            &run.run_id,
            &owner,
            &["--input", input, "--evidence", approval],
        ))
        .assert_ok();
    let new_run = out["new_run_id"].as_str().unwrap().to_string();
    let verified = run
        .flow
        .run(&crate::bed::read_argv(&run.root, "verify", &new_run, &[]))
        .assert_ok();
    assert_eq!(verified["sequence"], 1);
    let receipt =
        std::fs::read(run.root.join("runs").join(&new_run).join("receipt.jsonl")).unwrap();
    let first: Value = serde_json::from_slice(lines(&receipt)[0]).unwrap();
    assert_eq!(
        first["metadata"]["recovery_trusted_sequence"], diagnosis["last_trusted_sequence"],
        "{first}"
    );
    new_run
}

#[derive(Default, Debug)]
struct Tally {
    attempts: u64,
    acked: u64,
    kills: u64,
    before_commit: u64,
    reply_lost: u64,
    torn: u64,
    recovered: u64,
    grace_fast_forwards: u64,
    runs: u64,
    residue: BTreeMap<&'static str, u64>,
}

/// What a killed writer left in `runs/<id>/locks` for the next writer.
fn lock_residue(run: &LaneRun) -> &'static str {
    let locks = run.run_dir().join("locks");
    let lock = locks.join("receipt");
    let names: Vec<String> = std::fs::read_dir(&locks)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    // Retired lock directories are litter of earlier kills (counted at the
    // end), not what this kill left.
    if lock.join("owner.json").exists() {
        "owner.json of the dead writer"
    } else if lock.join(".reclaim.json").exists() {
        "a reclaim claim of the dead writer"
    } else if lock.exists() {
        "an empty lock directory"
    } else if names.iter().any(|n| n.ends_with(".initializing.json")) {
        "an initializer record of the dead writer"
    } else {
        "nothing"
    }
}

/// The 30 s grace of the reference's lock protocol, spent at once: every
/// entry of `locks/` gets an mtime one minute in the past.
fn fast_forward_grace(run: &LaneRun) {
    let past = SystemTime::now() - Duration::from_secs(60);
    let locks = run.run_dir().join("locks");
    for path in std::iter::once(locks.clone()).chain(crate::bed::walk(&locks)) {
        if let Ok(file) = std::fs::File::open(&path) {
            let _ = file.set_modified(past);
        }
    }
}

fn event_of(line: &[u8]) -> Value {
    serde_json::from_slice(line).expect("a complete line is JSON")
}

fn last_checksum(receipt: &[u8]) -> String {
    lines(receipt)
        .last()
        .map(|l| event_of(l)["checksum"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn reliability_crash_sigkill_during_appends_never_loses_or_invents_history() {
    let target = size(25, 1000);
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let mut tally = Tally::default();
    let mut run = LaneRun::new(&base.join("run-0"), &["w0"]);
    tally.runs = 1;
    // Calibrate: how long one heartbeat takes on this machine.
    let started = Instant::now();
    for i in 0..5 {
        run.beat("w0", &format!("calibrate-{i}"));
    }
    // The kill window follows the machine: 1.2 × a moving average of the
    // uninterrupted heartbeats (fsync times drift with load and receipt size).
    let mut typical = started.elapsed() / 5;
    let (mut window_min, mut window_max) = (Duration::MAX, Duration::ZERO);
    let mut known = run.receipt();
    // (run, sequence, checksum) of every acknowledged append.
    let mut acked: Vec<(usize, u64, String)> = Vec::new();
    let mut finished_runs: Vec<LaneRun> = Vec::new();
    while tally.kills < target {
        tally.attempts += 1;
        let tag = format!("attempt-{}", tally.attempts);
        let argv = run.heartbeat_args("w0", &tag);
        let window = typical * 6 / 5;
        window_min = window_min.min(window);
        window_max = window_max.max(window);
        let kill_after = rng
            .percent(85)
            .then(|| Duration::from_micros(rng.below(window.as_micros() as u64)));
        let mut busy_retries = 0;
        let out = loop {
            let spawned = Instant::now();
            let mut child = run
                .command(&argv)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            if let Some(delay) = kill_after {
                std::thread::sleep(delay);
                let _ = child.kill();
            }
            let out = child.wait_with_output().unwrap();
            if kill_after.is_none() && out.status.success() {
                typical = (typical * 7 + spawned.elapsed()) / 8;
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            let grace = [
                "initialization is active",
                "not readable yet",
                "already claimed",
            ];
            if out.status.code() == Some(5) && grace.iter().any(|g| stderr.contains(g)) {
                // A dead writer's lock inside the reference's 30 s grace.
                assert!(busy_retries < 3, "still busy after the grace: {stderr}");
                busy_retries += 1;
                tally.grace_fast_forwards += 1;
                fast_forward_grace(&run);
                continue;
            }
            break out;
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed: Option<Value> = serde_json::from_str(stdout.trim())
            .ok()
            .filter(|v: &Value| v["ok"] == true && stdout.ends_with('\n'));
        let receipt = run.receipt();
        assert!(
            receipt.starts_with(&known),
            "attempt {}: acknowledged history changed",
            tally.attempts
        );
        let extra = &receipt[known.len()..];
        let known_sequence = lines(&known).len() as u64;
        if let Some(printed) = printed {
            // Printed success (possibly killed right after printing).
            let new = lines(extra);
            assert_eq!(new.len(), 1, "attempt {}: {printed}", tally.attempts);
            assert!(new[0].ends_with(b"\n"));
            let event = event_of(new[0]);
            assert_eq!(printed["sequence"], known_sequence + 1);
            assert_eq!(event["sequence"], printed["sequence"]);
            assert_eq!(event["checksum"], printed["checksum"]);
            assert_eq!(beat_tag(&event).as_deref(), Some(tag.as_str()));
            acked.push((
                finished_runs.len(),
                known_sequence + 1,
                event["checksum"].as_str().unwrap().to_string(),
            ));
            tally.acked += 1;
            known = receipt;
            continue;
        }
        assert_eq!(
            out.status.signal(),
            Some(9),
            "attempt {}: neither success nor SIGKILL: {out:?}",
            tally.attempts
        );
        tally.kills += 1;
        *tally.residue.entry(lock_residue(&run)).or_default() += 1;
        let verify = run.read("verify", &[]);
        if extra.is_empty() {
            tally.before_commit += 1;
            let v = verify.assert_ok();
            assert_eq!(v["sequence"], known_sequence);
        } else if extra.ends_with(b"\n") && lines(extra).len() == 1 {
            // Committed before the kill, reply lost: it must be this
            // attempt's own event, chained to the last acknowledged one.
            let event = event_of(extra);
            assert_eq!(beat_tag(&event).as_deref(), Some(tag.as_str()));
            assert_eq!(event["sequence"], known_sequence + 1);
            assert_eq!(
                event["previous_checksum"].as_str().unwrap(),
                last_checksum(&known)
            );
            let v = verify.assert_ok();
            assert_eq!(v["sequence"], known_sequence + 1);
            assert_eq!(v["checksum"], event["checksum"]);
            tally.reply_lost += 1;
            known = receipt;
        } else {
            assert!(
                !extra.contains(&b'\n'),
                "attempt {}: more than one new line",
                tally.attempts
            );
            // A torn last line: never valid, always diagnosed.
            tally.torn += 1;
            let e = verify.assert_error(3, "receipt_corrupt");
            assert_eq!(
                e["message"],
                format!(
                    "receipt corruption at sequence {}: incomplete final event",
                    known_sequence + 1
                )
            );
            let d = run.read("receipt-diagnose", &[]).assert_ok();
            assert_eq!(d["effective_state"], "blocked");
            assert_eq!(d["first_bad_sequence"], known_sequence + 1);
            assert_eq!(d["last_trusted_sequence"], known_sequence);
            assert_eq!(d["last_trusted_checksum"], last_checksum(&known));
            check_recoverable(&run, &d);
            tally.recovered += 1;
            // Carry on in a fresh run.
            let next = LaneRun::new(&base.join(format!("run-{}", tally.runs)), &["w0"]);
            tally.runs += 1;
            finished_runs.push(std::mem::replace(&mut run, next));
            known = run.receipt();
        }
    }
    finished_runs.push(run);
    // Every acknowledged append is still where it was acknowledged.
    for (index, sequence, checksum) in &acked {
        let receipt = finished_runs[*index].receipt();
        let line = lines(&receipt)[*sequence as usize - 1];
        assert_eq!(event_of(line)["checksum"], checksum.as_str());
    }
    let last = finished_runs.last().unwrap();
    last.read("verify", &[]).assert_ok();
    // What the killed writers left lying around (never read by anything).
    let mut temp_files = 0;
    let mut retired_locks = 0;
    for run in &finished_runs {
        let mut stack = vec![run.run_dir()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".tmp") {
                    temp_files += 1;
                } else if name.contains(".retired.") || name.contains(".stale.") {
                    retired_locks += 1;
                } else if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                }
            }
        }
    }
    eprintln!("{tally:?}");
    assert_eq!(
        tally.kills,
        tally.before_commit + tally.reply_lost + tally.torn
    );
    figure(
        SCENARIO,
        &format!(
            "SIGKILL at seeded random moments of a heartbeat append (seed {seed}; delay uniform in 0 to 1.2 × the moving average of an uninterrupted heartbeat, that bound ranging {}–{} µs), {} attempts in {} run(s)",
            window_min.as_micros(),
            window_max.as_micros(),
            tally.attempts,
            tally.runs
        ),
        tally.kills,
        &format!(
            "acknowledged appends: {} — all present, in order, byte for byte; killed before the commit: {} (receipt unchanged); committed but reply lost: {} (each the killed attempt's own complete event, exactly once, chained); torn last line: {} (verify exit 3, receipt-diagnose names it; recovery checked: {}); events lost or invented: 0",
            tally.acked, tally.before_commit, tally.reply_lost, tally.torn, tally.recovered
        ),
    );
    figure(
        SCENARIO,
        "locks left by the killed writers, taken over by the next writer",
        tally.kills,
        &format!(
            "{}; the reference's 30 s grace was met {} time(s) (mtimes backdated instead of waiting); never a lock that stayed refused; litter left at the end: {temp_files} temp file(s) of interrupted atomic writes and {retired_locks} retired lock director(y/ies), read by nothing",
            reliability::counts(&tally.residue, ": "),
            tally.grace_fast_forwards
        ),
    );
}

/// What a kill in the middle of the single write call leaves (the kernel may
/// cut a write short): a torn last line, at every tenth offset of it. Each
/// is diagnosed with the acknowledged prefix and superseded by a recovery
/// run that verifies. (The random kills above rarely hit this window.)
#[test]
fn reliability_crash_a_torn_append_is_diagnosed_and_recoverable() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let mut recovered = 0;
    let template = LaneRun::new(&base.join("template"), &["w0"]);
    template
        .flow
        .run(&template.heartbeat_args("w0", "torn-0"))
        .assert_ok();
    let whole = template.receipt();
    let last = lines(&whole).last().unwrap().len();
    for cut in (1..last).step_by(10) {
        let run = LaneRun::new(&base.join(format!("cut-{cut}")), &["w0"]);
        let acknowledged = run.receipt();
        run.flow
            .run(&run.heartbeat_args("w0", "torn-0"))
            .assert_ok();
        let full = run.receipt();
        std::fs::write(run.receipt_path(), &full[..acknowledged.len() + cut]).unwrap();
        let d = run.read("receipt-diagnose", &[]).assert_ok();
        assert_eq!(d["effective_state"], "blocked");
        assert_eq!(d["first_bad_sequence"], lines(&acknowledged).len() + 1);
        assert_eq!(d["last_trusted_sequence"], lines(&acknowledged).len());
        check_recoverable(&run, &d);
        recovered += 1;
    }
    figure(
        SCENARIO,
        "a torn last line (the append's single write cut short), at every tenth byte offset",
        recovered,
        "each diagnosed with the acknowledged prefix as trusted, superseded by a recovery run that verifies",
    );
}

/// The lines of an strace output file.
fn strace(args: &[&str], program: &[std::ffi::OsString], home: &Path) -> String {
    let trace = home.join(format!(
        "trace-{}.txt",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let status = crate::bed::Flow::new(home)
        .strace(args, &trace, program)
        .stdout(Stdio::null())
        .status()
        .expect("strace is required (.ci/run installs it)");
    assert!(status.success());
    std::fs::read_to_string(&trace).unwrap()
}

#[test]
fn reliability_crash_an_append_is_one_write_call() {
    let (_tmp, base, run) = LaneRun::in_temp(&["w0"]);
    let mut appends = 0;
    for i in 0..3 {
        let before = run.receipt().len();
        let trace = strace(
            &[
                "-f",
                "-y",
                "-e",
                "trace=write,writev,pwrite64,pwritev,pwritev2",
            ],
            &run.heartbeat_args("w0", &format!("traced-{i}")),
            &base,
        );
        let line_len = run.receipt().len() - before;
        let writes: Vec<&str> = trace
            .lines()
            .filter(|l| l.contains("receipt.jsonl>"))
            .collect();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert!(
            writes[0].trim_end().ends_with(&format!("= {line_len}")),
            "{}",
            writes[0]
        );
        appends += 1;
    }
    figure(
        SCENARIO,
        "heartbeat appends traced with strace: write calls to receipt.jsonl per append",
        appends,
        "exactly 1 write per append, carrying the whole line with its LF",
    );
}

#[test]
fn reliability_crash_every_directory_is_created_with_mode_0700() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    std::fs::create_dir(base.join("repo")).unwrap();
    let root = base.join("state");
    let init: Vec<std::ffi::OsString> = vec![
        "--state-root".into(),
        root.clone().into(),
        "init".into(),
        "--workflow-type".into(),
        "A".into(),
        "--repo-root".into(),
        base.join("repo").into(),
        "--owner-file".into(),
        root.join("handles/main.owner").into(),
        "--component".into(),
        "runtime".into(),
    ];
    let flags = ["-f", "-e", "trace=mkdir,mkdirat"];
    let mut trace = strace(&flags, &init, &base);
    // A mutation that has to recreate the run's locks/ and lanes/.
    let run_id = crate::bed::first_run_id(&root);
    let run_dir = root.join("runs").join(&run_id);
    std::fs::remove_dir(run_dir.join("locks")).unwrap();
    std::fs::remove_dir(run_dir.join("lanes")).unwrap();
    let evidence = base.join("ev.json");
    std::fs::write(&evidence, r#"[{"kind":"plan","summary":"go"}]"#).unwrap();
    let approve: Vec<std::ffi::OsString> = vec![
        "--state-root".into(),
        root.clone().into(),
        "run-approve".into(),
        "--run-id".into(),
        run_id.clone().into(),
        "--owner-file".into(),
        root.join("handles/main.owner").into(),
        "--evidence".into(),
        evidence.into(),
    ];
    trace.push_str(&strace(&flags, &approve, &base));
    let mkdirs: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("mkdir") && l.contains("= 0"))
        .collect();
    assert!(mkdirs.len() >= 12, "{mkdirs:?}");
    for call in &mkdirs {
        assert!(call.contains(", 0700)"), "{call}");
    }
    assert!(run_dir.join("locks").is_dir() && run_dir.join("lanes").is_dir());
    figure(
        SCENARIO,
        "mkdir calls of init (new state root) and of a mutation that recreates locks/ and lanes/, traced",
        mkdirs.len() as u64,
        "every directory is created with mode 0700 (never visible with a wider mode between mkdir and chmod)",
    );
}
