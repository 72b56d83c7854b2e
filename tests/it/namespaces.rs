//! The lock across PID namespaces (DEVIATIONS 40): a writer in another PID
//! namespace (a container sharing the state root through a bind mount) has a
//! pid that means nothing on the host, where it may look dead. The holder's
//! flock on `owner.json` is what proves it alive, so the host never reclaims
//! a lock that is still held, and writers on both sides never fork the
//! chain. Needs `unshare` (util-linux) and the privilege to create a PID
//! namespace (root, as on this project's machines and CI); without them
//! these tests fail, they do not skip.

use crate::reliability;

use reliability::{LaneRun, beat_tag, lines};
use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A pid that no host process has now (a pid inside the namespace that
/// equals it looks dead to the host's `kill(pid, 0)`).
fn dead_host_pid() -> u32 {
    (3000..30000)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .expect("a free pid")
}

/// `sh -c script` as the child of pid 1 of a new PID namespace, whose
/// next pid is `pid` (so the script's `$$` is `pid`).
fn in_namespace(pid: u32, script: &str) -> Command {
    let mut cmd = Command::new("unshare");
    // The outer sh is the namespace's pid 1; it forks the script, which
    // gets `pid`. --kill-child: when unshare dies, so does the namespace.
    cmd.args([
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
    ])
    .arg(format!(
        "echo {} > /proc/sys/kernel/ns_last_pid && sh -c \"$0\"",
        pid - 1
    ))
    .arg(script);
    cmd
}

fn wait_for(path: &Path, child: &mut Child) {
    let start = Instant::now();
    while !path.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the namespaced holder exited early ({status}): it needs root (unshare) and a debug build (its pause is a test hook only debug builds have)"
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "holder never ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A holder in another namespace records its namespace pid (dead on the
/// host) and holds the flock, as our binary does: the host writer waits
/// and answers busy instead of reclaiming; once the holder is gone the lock
/// is reclaimed and the write lands.
#[test]
fn a_holder_in_another_pid_namespace_is_not_reclaimed() {
    let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
    let lock = run.run_dir().join("locks/receipt");
    let ready = base.join("ready");
    let pid = dead_host_pid();
    let script = format!(
        "mkdir -m 700 '{lock}' && printf '{{\"pid\": %s, \"token\": \"ns\"}}\\n' $$ > '{lock}/owner.json' \
         && chmod 600 '{lock}/owner.json' && exec flock '{lock}/owner.json' sh -c \"touch '{ready}'; sleep 30\"",
        lock = lock.display(),
        ready = ready.display()
    );
    let mut holder = in_namespace(pid, &script)
        .stdout(Stdio::null())
        .spawn()
        .expect("unshare (util-linux) is installed");
    wait_for(&ready, &mut holder);
    let owner: Value =
        serde_json::from_slice(&std::fs::read(lock.join("owner.json")).unwrap()).unwrap();
    assert_eq!(owner["pid"], pid, "the holder's pid is its namespace pid");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "and dead on the host"
    );
    let before = run.receipt();

    let out = run.flow.run(&run.heartbeat_args("a", "host-1"));
    let holder_done = holder.try_wait().unwrap();
    let e = out.assert_error(5, "coordinator_conflict");
    crate::bed::assert_message(&e, "state lock owner is live or unknown");
    assert!(holder_done.is_none(), "the holder was still running");
    assert_eq!(run.receipt(), before, "nothing appended while held");
    assert!(
        lock.join("owner.json").exists(),
        "the holder's lock is untouched"
    );
    let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
    assert_eq!(
        diagnosis["lock_owner_status"], "locked_alive",
        "{diagnosis}"
    );

    let _ = holder.kill();
    let _ = holder.wait();
    // unshare is gone; wait until nothing holds the flock any more.
    let start = Instant::now();
    loop {
        let out = run.flow.run(&run.heartbeat_args("a", "host-2"));
        if out.code == 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(lines(&run.receipt()).len(), lines(&before).len() + 1);
    run.read("verify", &[]).assert_ok();
}

/// Writers on both sides, many rounds: every acknowledged heartbeat is in
/// the receipt exactly once and the chain verifies.
#[test]
fn writers_on_both_sides_of_a_pid_namespace_never_fork_the_chain() {
    let (_tmp, _, run) = LaneRun::in_temp(&["host", "ns"]);
    let rounds = reliability::size(6, 40);
    let start_lines = lines(&run.receipt()).len();
    let mut acknowledged = Vec::new();
    for round in 0..rounds {
        let mut children = Vec::new();
        for (side, lane) in [("ns", "ns"), ("host", "host")] {
            for writer in 0..2 {
                let tag = format!("{side}-{round}-{writer}");
                let argv = run.heartbeat_args(lane, &tag);
                let child = if side == "ns" {
                    let script = retrying(&shell_command(&argv));
                    pinned(&mut in_namespace(dead_host_pid() + writer, &script), &run)
                        .spawn()
                        .expect("unshare is installed")
                } else {
                    retrying_host_writer(&run, argv)
                };
                children.push((tag, child));
            }
        }
        for (tag, child) in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{tag}: {} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            let ack: Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
            acknowledged.push((tag, ack["sequence"].as_u64().unwrap()));
        }
    }
    let receipt = run.receipt();
    let events = lines(&receipt);
    assert_eq!(events.len(), start_lines + acknowledged.len());
    let mut sequences: Vec<u64> = acknowledged.iter().map(|(_, s)| *s).collect();
    sequences.sort();
    sequences.dedup();
    assert_eq!(
        sequences.len(),
        acknowledged.len(),
        "a sequence acknowledged twice"
    );
    let text = String::from_utf8_lossy(&receipt);
    for (tag, _) in &acknowledged {
        let needle = format!("beat {tag}\"");
        let holding = text.lines().filter(|l| l.contains(&needle)).count();
        assert_eq!(holding, 1, "{tag} is in {holding} receipt lines");
    }
    run.read("verify", &[]).assert_ok();
    reliability::figure(
        "PID namespaces",
        &format!(
            "{rounds} rounds of 2 writers in `unshare --pid --fork --mount-proc` and 2 on the host"
        ),
        acknowledged.len() as u64,
        "every acknowledged event present exactly once, no sequence twice, verify ok",
    );
}

/// A host writer that retries on exit 5 (a shell loop, like the namespaced
/// ones, so both sides race the same way).
fn retrying_host_writer(run: &LaneRun, argv: Vec<OsString>) -> Child {
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(retrying(&shell_command(&argv)));
    pinned(&mut sh, run).spawn().unwrap()
}

/// The binary with `argv` as one shell command, each word single-quoted.
fn shell_command(argv: &[OsString]) -> String {
    let words: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_bluetape-flow").to_string())
        .chain(argv.iter().map(|a| a.to_string_lossy().into_owned()))
        .map(|w| format!("'{w}'"))
        .collect();
    words.join(" ")
}

/// `command` in a shell loop that retries on the retryable exit 5, as a
/// caller would.
fn retrying(command: &str) -> String {
    format!(
        "for i in $(seq 200); do {command}; s=$?; [ $s -ne 5 ] && exit $s; sleep 0.05; done; exit 5"
    )
}

/// `cmd` in the run's pinned environment (only HOME and PATH, its working
/// directory), stdout and stderr piped.
fn pinned<'c>(cmd: &'c mut Command, run: &LaneRun) -> &'c mut Command {
    cmd.env_clear()
        .env("HOME", &run.flow.home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(&run.flow.cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
}

/// The Python reference as the other writer, played by
/// `tests/it/reference_lock.py` (its lock steps, written from reading the
/// reference; CI has no copy of it).
const REFERENCE_LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/reference_lock.py");

/// A heartbeat line as another writer would append it on the receipt's
/// current end: the last heartbeat's event, one sequence on, with new
/// evidence, re-chained and re-sealed.
fn foreign_heartbeat(run: &LaneRun, summary: &str) -> Vec<u8> {
    use bluetape_flow::receipt::canonical;
    let receipt = run.receipt();
    let events: Vec<Value> = lines(&receipt)
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let last = events.last().unwrap().clone();
    // Our last line is the seed heartbeat; its evidence sits in its intent.
    let mut event = last.clone();
    assert!(beat_tag(&event).is_some(), "{event}");
    event["sequence"] = Value::from(last["sequence"].as_u64().unwrap() + 1);
    event["previous_checksum"] = last["checksum"].clone();
    event["metadata"]["intents"][0]["evidence_refs"] =
        serde_json::json!([{"kind": "log", "summary": summary}]);
    let map = event.as_object_mut().unwrap();
    map.remove("checksum");
    let checksum = canonical::sha256_hex(&canonical::to_vec_without(map, "checksum"));
    map.insert("checksum".into(), Value::String(checksum));
    let mut line = canonical::to_vec(&event);
    line.push(b'\n');
    line
}

/// Our heartbeat in another PID namespace, paused (the test-only hook)
/// while it holds the receipt lock with its line sealed.
fn paused_namespaced_writer(run: &LaneRun, base: &Path, tag: &str) -> Paused {
    let go = base.join(format!("go-{tag}"));
    let command = shell_command(&run.heartbeat_args("a", tag));
    let mut child = pinned(&mut in_namespace(dead_host_pid(), &command), run)
        .env("BLUETAPE_TEST_PAUSE_BEFORE_APPEND", &go)
        .spawn()
        .expect("unshare is installed");
    let mut ready = go.clone().into_os_string();
    ready.push(".ready");
    wait_for(Path::new(&ready), &mut child);
    Paused { child, go }
}

/// A writer paused before its append; it goes on once `go` exists.
struct Paused {
    child: Child,
    go: std::path::PathBuf,
}

impl Paused {
    /// Let the writer go on and wait for it.
    fn release(self) -> std::process::Output {
        std::fs::write(&self.go, b"").unwrap();
        self.child.wait_with_output().unwrap()
    }
}

/// Our writer paused in another PID namespace holding the receipt lock
/// (its heartbeat sealed) after a seed heartbeat, and the reference's
/// lock script ready to append a foreign heartbeat line.
struct Race {
    _tmp: tempfile::TempDir,
    run: LaneRun,
    /// Receipt lines before either writer appends.
    before: usize,
    /// Our paused writer.
    ours: Paused,
    /// `python3 reference_lock.py <lock> <receipt> <line>`, not yet run.
    reference: Command,
}

impl Race {
    fn paused(summary: &str) -> Race {
        let (_tmp, base, run) = LaneRun::in_temp(&["a"]);
        run.flow.run(&run.heartbeat_args("a", "seed")).assert_ok();
        let line = base.join("reference-line");
        std::fs::write(&line, foreign_heartbeat(&run, summary)).unwrap();
        let before = lines(&run.receipt()).len();
        let ours = paused_namespaced_writer(&run, &base, "ns");
        let mut reference = Command::new("python3");
        reference
            .arg(REFERENCE_LOCK)
            .arg(run.run_dir().join("locks/receipt"))
            .arg(run.receipt_path())
            .arg(&line);
        Race {
            _tmp,
            run,
            before,
            ours,
            reference,
        }
    }
}

/// trust-model §2 promise 7 (DEVIATIONS 40): our writer in another PID
/// namespace holds the receipt lock; the reference on the host tests only
/// `kill(pid, 0)`, and a namespace pid is dead there, so it used to reclaim
/// the lock and append the next sequence, and ours appended the same
/// sequence: both said ok, the chain forked. Our lock record's `pid` is 0
/// now (`kill(0, 0)` always succeeds): the reference waits.
#[test]
fn the_reference_waits_for_our_lock_held_in_another_pid_namespace() {
    let mut race = Race::paused("reference beat");
    let (run, before) = (&race.run, race.before);
    let lock = run.run_dir().join("locks/receipt");
    let owner: Value =
        serde_json::from_slice(&std::fs::read(lock.join("owner.json")).unwrap()).unwrap();
    let reference = race.reference.output().expect("python3");
    let said = String::from_utf8_lossy(&reference.stdout).to_string();
    let ours = race.ours.release();
    assert_eq!(
        said.trim(),
        "busy: state lock owner is live or unknown",
        "the reference took our lock (record {owner})"
    );
    assert_eq!(reference.status.code(), Some(5));
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    assert_eq!(lines(&run.receipt()).len(), before + 1);
    run.read("verify", &[]).assert_ok();
}

/// trust-model §2 promise 7: a writer that appends without honouring the
/// lock at all, while ours holds it with its line sealed: our append
/// checks the receipt is exactly the length it loaded, on the descriptor
/// it writes through, and refuses (exit 5, retryable), so the chain does
/// not fork; the retry appends on the new end.
#[test]
fn our_append_refuses_when_the_receipt_grew_under_our_lock() {
    let mut race = Race::paused("lockless beat");
    let (run, before) = (&race.run, race.before);
    let other = race
        .reference
        .arg("--ignore-lock")
        .output()
        .expect("python3");
    assert!(other.status.success(), "{other:?}");
    let ours = race.ours.release();
    assert_eq!(ours.status.code(), Some(5), "{ours:?}");
    let e: Value = serde_json::from_slice(&ours.stderr).unwrap();
    assert_eq!(e["error"], "coordinator_conflict");
    assert_eq!(e["retryable"], true);
    assert!(
        crate::bed::str_field(&e, "message").starts_with("the receipt changed under the lock"),
        "{e}"
    );
    assert_eq!(
        lines(&run.receipt()).len(),
        before + 1,
        "only the other line"
    );
    run.read("verify", &[]).assert_ok();
    run.flow.run(&run.heartbeat_args("a", "retry")).assert_ok();
    assert_eq!(lines(&run.receipt()).len(), before + 2);
    run.read("verify", &[]).assert_ok();
}
