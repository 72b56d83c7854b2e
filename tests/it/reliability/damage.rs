//! Reliability scenario 2 (docs/reliability.md): damage. Receipts written by
//! the real binary (with their acknowledged head `receipt-head.json`) are
//! damaged in every way of one family — the last line truncated at every
//! byte offset, every single bit flipped, every line deleted, duplicated,
//! every pair of lines swapped, the tail cut off after every line, every
//! line grown past the size limit — and each variant must be detected
//! (100 %), without a panic, with the first bad sequence named exactly, by
//! `verify` and by `receipt-diagnose`. The library functions carry the
//! exhaustive counts; a sample of every family also goes through the binary
//! (exit 3 for verify, a diagnosis naming the line, never exit 1 or 101,
//! nothing written).
//!
//! The single-byte-change property lives here only (bad_input and properties
//! carry no copy of it): every byte of four receipts — ours with its head,
//! ours with lines another writer appended beyond the head, the reference's
//! own, and a hand-acknowledged one full of escapes and a 30-digit integer —
//! changed several ways.

use crate::bed::refusal::{Chain, Work, append};
use crate::bed::{Flow, Output, snapshot};
use crate::reliability::{LaneRun, Rng, figure, full, lines, seed, size};
use bluetape_flow::commands::init::{InitEntropy, InitRequest, init};
use bluetape_flow::commands::inspect::diagnose;
use bluetape_flow::commands::{ErrorKind, FlowError, verify};
use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::receipt::primitives::RunId;
use bluetape_flow::store::discovery::DiscoveryEnv;
use bluetape_flow::store::handle::OwnerToken;
use bluetape_flow::store::root::StateRoot;
use bluetape_flow::store::run::{AckHead, RunDir};
use serde_json::json;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

const SCENARIO: &str = "2. Damage";
const LIMIT: usize = 65536;

/// A run whose receipt is damaged, variant by variant, and put back.
struct Subject {
    flow: Flow,
    root: PathBuf,
    run_id: String,
}

impl Subject {
    fn of(run: &LaneRun) -> Subject {
        Subject::new(&run.base, &run.root, &run.run_id)
    }

    /// A run with `beats` heartbeats ([`run_with_beats`]) in a fresh temp
    /// dir, which must outlive the subject.
    fn beaten(beats: usize) -> (tempfile::TempDir, Subject) {
        let tmp = tempfile::tempdir().unwrap();
        let run = run_with_beats(tmp.path(), beats);
        (tmp, Subject::of(&run))
    }

    fn new(base: &Path, root: &Path, run_id: &str) -> Subject {
        Subject {
            flow: Flow::new(base),
            root: root.to_path_buf(),
            run_id: run_id.to_string(),
        }
    }

    fn receipt_path(&self) -> PathBuf {
        self.root
            .join("runs")
            .join(&self.run_id)
            .join("receipt.jsonl")
    }

    fn receipt(&self) -> Vec<u8> {
        std::fs::read(self.receipt_path()).unwrap()
    }

    fn read(&self, command: &str) -> Output {
        let root = self.root.to_str().unwrap();
        self.flow
            .run(&["--state-root", root, command, "--run-id", &self.run_id])
    }
}

/// One damage family under test.
struct Family<'a> {
    run: &'a Subject,
    original: Vec<u8>,
    detected: u64,
    failures: Vec<String>,
    binary_sampled: u64,
    /// Every n-th variant also goes through the binary.
    binary_every: u64,
}

impl<'a> Family<'a> {
    fn new(run: &'a Subject, binary_samples: u64, expected_variants: u64) -> Family<'a> {
        Family {
            run,
            original: run.receipt(),
            detected: 0,
            failures: Vec::new(),
            binary_sampled: 0,
            binary_every: (expected_variants / binary_samples.max(1)).max(1),
        }
    }

    fn variants(&self) -> u64 {
        self.detected + self.failures.len() as u64
    }

    /// Install `bytes` as the receipt and check both verdicts.
    fn check(&mut self, bytes: &[u8], first_bad: u64, what: &str) {
        let path = self.run.receipt_path();
        std::fs::write(&path, bytes).unwrap();
        let root = self.run.root.clone();
        let run_id = self.run.run_id.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| library_verdicts(&root, &run_id)));
        let through_binary = self.variants().is_multiple_of(self.binary_every);
        let result = match outcome {
            Err(_) => Err("panicked".to_string()),
            Ok((verified, diagnosed)) => match (verified, diagnosed) {
                (Some(v), Some(d)) if v == first_bad && d == first_bad => Ok(()),
                other => Err(format!("(verify, diagnose) first bad = {other:?}")),
            },
        };
        let result = result.and_then(|()| {
            if through_binary {
                self.binary_sampled += 1;
                binary_verdicts(self.run, first_bad)
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => self.detected += 1,
            Err(e) => self
                .failures
                .push(format!("{what}: expected {first_bad}: {e}")),
        }
        std::fs::write(&path, &self.original).unwrap();
    }

    fn report(self, case: &str) {
        let total = self.variants();
        assert!(
            self.failures.is_empty(),
            "{case}: {} of {total} variants not detected as expected: {:#?}",
            self.failures.len(),
            &self.failures[..self.failures.len().min(20)]
        );
        figure(
            SCENARIO,
            case,
            total,
            &format!(
                "{} of {total} detected (100 %), first bad sequence named exactly by verify and receipt-diagnose, 0 panics; {} also through the binary (verify exit 3, receipt-diagnose exit 0 naming the line)",
                self.detected, self.binary_sampled
            ),
        );
    }
}

/// The first bad sequence as `verify` and `receipt-diagnose` name it.
fn library_verdicts(root: &Path, run_id: &str) -> (Option<u64>, Option<u64>) {
    let verified = match verify(&StateRoot::begin(root), run_id).map_err(FlowError::into_kind) {
        Err(ErrorKind::ReceiptDamaged(damage)) => Some(damage.first_bad_sequence),
        _ => None,
    };
    let diagnosed = match diagnose(&StateRoot::begin(root), run_id).map(|d| json!(d)) {
        Ok(map) if map["effective_state"] == "blocked" => map["first_bad_sequence"].as_u64(),
        _ => None,
    };
    (verified, diagnosed)
}

/// Both verdicts through the binary: verify refuses with the typed
/// envelope (exit 3, one JSON line on stderr, `receipt_corrupt`, not
/// retryable, `next_command` receipt-diagnose) naming the line, the
/// diagnosis names it too, and neither writes anything.
fn binary_verdicts(run: &Subject, first_bad: u64) -> Result<(), String> {
    let before = snapshot(&run.root);
    let out = run.read("verify");
    if out.code != 3 || !out.stdout.is_empty() || out.stderr.trim_end().lines().count() != 1 {
        return Err(format!("binary verify: {out:?}"));
    }
    let e = out.failure();
    let named = e.message == "receipt contains no events" && first_bad == 1
        || e.message
            .starts_with(&format!("receipt corruption at sequence {first_bad}:"));
    if e.error != "receipt_corrupt"
        || e.retryable
        || e.next_command.as_deref() != Some("receipt-diagnose")
        || !named
    {
        return Err(format!("binary verify said {e:?}"));
    }
    let out = run.read("receipt-diagnose");
    if out.code != 0 {
        return Err(format!("binary diagnose exit {}: {}", out.code, out.stderr));
    }
    let d = out.json();
    if d["first_bad_sequence"] != first_bad || d["effective_state"] != "blocked" {
        return Err(format!("binary diagnose said {d}"));
    }
    if before != snapshot(&run.root) {
        return Err("a refused read changed the state root".into());
    }
    Ok(())
}

/// A run with `beats` heartbeats after its setup lines, head up to date.
fn run_with_beats(base: &Path, beats: usize) -> LaneRun {
    let run = LaneRun::new(base, &["w0"]);
    for i in 0..beats {
        run.beat("w0", &format!("{i}"));
    }
    let v = run.read("verify", &[]).assert_ok();
    assert_eq!(v["sequence"], 6 + beats as u64);
    run
}

fn join(lines: &[&[u8]]) -> Vec<u8> {
    lines.concat()
}

#[test]
fn reliability_damage_truncating_the_last_line_at_every_byte_offset_is_detected() {
    let (_tmp, subject) = Subject::beaten(2);
    let receipt = subject.receipt();
    let all = lines(&receipt);
    let n = all.len() as u64;
    let last_start = receipt.len() - all.last().unwrap().len();
    let offsets = all.last().unwrap().len() as u64;
    let mut family = Family::new(&subject, size(10, 100), offsets);
    // Offset 0 removes the whole line (only the head can tell); every other
    // offset leaves an unterminated line.
    for cut in last_start..receipt.len() {
        family.check(&receipt[..cut], n, &format!("cut at byte {cut}"));
    }
    family.report(&format!(
        "last line ({offsets} bytes) of a {n}-line receipt truncated at every byte offset"
    ));
}

/// The replacement values of the byte at `position`: one bit, rotating
/// through the eight, and a second change rotating through another bit, a
/// case flip (0x20), the neighbour value and a random non-zero delta. The
/// first and last byte of every line (`{` and the LF), and every byte in
/// the full run, get all eleven: each bit, the case flip, the neighbour
/// and the delta.
fn byte_changes(position: usize, byte: u8, edge: bool, rng: &mut Rng) -> Vec<u8> {
    let delta = 1 + rng.below(255) as u8;
    let mut values = if full() || edge {
        let mut all: Vec<u8> = (0..8).map(|bit| byte ^ (1 << bit)).collect();
        all.extend([byte ^ 0x20, byte.wrapping_add(1), byte.wrapping_add(delta)]);
        all
    } else {
        let second = match position % 4 {
            0 => byte ^ (1 << ((position + 4) % 8)),
            1 => byte ^ 0x20,
            2 => byte.wrapping_add(1),
            _ => byte.wrapping_add(delta),
        };
        vec![byte ^ (1 << (position % 8)), second]
    };
    values.sort_unstable();
    values.dedup();
    values
}

/// Change every byte of `run`'s receipt (see [`byte_changes`]); each
/// variant must name the line the byte is in.
fn change_every_byte(run: &Subject, what: &str) {
    let receipt = run.receipt();
    let all = lines(&receipt);
    let per_byte: u64 = if full() { 11 } else { 2 };
    let mut rng = Rng::new(seed() ^ receipt.len() as u64);
    let mut family = Family::new(run, size(8, 200), receipt.len() as u64 * per_byte);
    let mut first = 0usize;
    for (index, line) in all.iter().enumerate() {
        for byte in first..first + line.len() {
            let edge = byte == first || byte == first + line.len() - 1;
            for value in byte_changes(byte, receipt[byte], edge, &mut rng) {
                let mut changed = receipt.clone();
                changed[byte] = value;
                family.check(
                    &changed,
                    index as u64 + 1,
                    &format!("byte {byte} {:#04x} -> {value:#04x}", receipt[byte]),
                );
            }
        }
        first += line.len();
    }
    family.report(&format!(
        "single byte changes in {what}, a {}-line, {}-byte receipt ({})",
        all.len(),
        receipt.len(),
        if full() {
            "every bit of every byte, a case flip, the neighbour value and a random delta"
        } else {
            "two changes of every byte: one bit rotating, then another bit, a case flip, the neighbour value or a random delta; all of them at the first and last byte of every line"
        }
    ));
    // Put back, the receipt verifies again.
    let v = run.read("verify").assert_ok();
    assert_eq!(v["event_count"], all.len() as u64);
}

#[test]
fn reliability_damage_every_single_byte_change_is_detected_in_our_receipt() {
    // init, run-approve, run-start through the binary (head at 3).
    let tmp = tempfile::tempdir().unwrap();
    let run = LaneRun::new(tmp.path(), &[]);
    change_every_byte(&Subject::of(&run), "our receipt");
}

#[test]
fn reliability_damage_every_single_byte_change_is_detected_beyond_the_head() {
    // Line 1 is covered by our acknowledged head; lines 2-3, sealed by
    // hand as another writer (the Python tool) would append them, are
    // verified the reference's way (parse, re-canonicalize, hash).
    let (work, run_id) = Work::with_run();
    let mut chain = Chain::of(&work.run_dir(&run_id));
    append(&work.receipt(&run_id), &chain.two_more_lines());
    let subject = Subject::new(&work.base, &work.state, &run_id);
    assert_eq!(subject.read("verify").assert_ok()["sequence"], 3);
    change_every_byte(&subject, "our init and two lines beyond the head");
}

#[test]
fn reliability_damage_every_single_byte_change_is_detected_in_a_reference_receipt() {
    // Fixture 01: a receipt the Python tool wrote, no head record.
    let (work, run_id) = Work::from_fixture("01-init-only");
    let subject = Subject::new(&work.base, &work.state, &run_id);
    change_every_byte(&subject, "the reference's receipt of fixture 01");
}

/// A run with a few events whose strings need escapes, acknowledged by a
/// head record: the receipt bytes and where they live.
fn acknowledged_receipt() -> (tempfile::TempDir, PathBuf, String) {
    use chrono::TimeZone;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let env = DiscoveryEnv {
        cwd: tmp.path().to_path_buf(),
        home: Some(tmp.path().into()),
        ..Default::default()
    };
    let token = OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097");
    let entropy = InitEntropy {
        now: chrono::Utc.with_ymd_and_hms(2026, 7, 14, 1, 0, 0).unwrap(),
        run_suffix: "0badc0de".into(),
        token: token.clone(),
        recorded: None,
        staging_suffix: "1".repeat(32),
    };
    let request = InitRequest {
        workflow_type: "A".into(),
        repo_root: repo,
        owner_file: root.join("handles/main.owner"),
        components: vec!["runtime".into()],
    };
    let outcome = init(&StateRoot::begin(&root), &env, &request, &entropy).unwrap();
    let run = RunDir::new(
        &StateRoot::begin(&root),
        &RunId::parse(&outcome.run_id).unwrap(),
    );
    let mut bytes = std::fs::read(run.receipt_path()).unwrap();
    let mut previous = outcome.checksum.clone();
    let hash = "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6".to_string();
    for (sequence, (event_type, from, to, reason)) in [
        (
            "plan_approved",
            "planned",
            "approved",
            "ok \u{1}\u{1f}\t\"q\" ✓",
        ),
        ("run_started", "approved", "running", "start\n\u{7f}"),
    ]
    .into_iter()
    .enumerate()
    {
        let sealed = EventDraft {
            run_id: outcome.run_id.clone(),
            lane_id: None,
            agent_id: None,
            sequence: sequence as u64 + 2,
            event_type: bluetape_flow::receipt::vocab::EventType::parse(event_type).expect("a known event type"),
            from_state: Some(from.into()),
            to_state: Some(to.into()),
            timestamp: "2026-07-14T01:00:00Z".into(),
            owner_token: token.fingerprint(),
            manifest_hash: hash.clone(),
            previous_checksum: previous.clone(),
            evidence_refs: json!([{"kind": "user_approval", "summary": "approved \u{2}", "exit_status": 100000000000000000000000000000u128}]),
            reason: Some(reason.into()),
            metadata: Some(json!({"owner_epoch": 1})),
        }
        .seal();
        bytes.extend_from_slice(&sealed.line);
        previous = sealed.checksum.into();
    }
    std::fs::write(run.receipt_path(), &bytes).unwrap();
    run.write_head(&AckHead {
        sequence: 3,
        checksum: bluetape_flow::receipt::primitives::Sha256Hex::parse(&previous).unwrap(),
        byte_length: bytes.len() as u64,
        canonical_through: 3,
    })
    .unwrap();
    verify(&StateRoot::begin(&root), &outcome.run_id).expect("the hand-built receipt verifies");
    (tmp, root, outcome.run_id)
}

#[test]
fn reliability_damage_every_single_byte_change_is_detected_in_an_escaped_receipt() {
    let (tmp, root, run_id) = acknowledged_receipt();
    let subject = Subject::new(tmp.path(), &root, &run_id);
    change_every_byte(
        &subject,
        "a hand-acknowledged receipt of control characters, escapes and a 30-digit integer",
    );
}

#[test]
fn reliability_damage_deleting_duplicating_and_swapping_lines_is_detected() {
    let (_tmp, subject) = Subject::beaten(3);
    let receipt = subject.receipt();
    let all = lines(&receipt);
    let n = all.len();

    let mut family = Family::new(&subject, size(3, 9), n as u64);
    for i in 0..n {
        let mut kept = all.clone();
        kept.remove(i);
        // A deleted last line is only visible to the acknowledged head.
        family.check(
            &join(&kept),
            i as u64 + 1,
            &format!("delete line {}", i + 1),
        );
    }
    family.report(&format!("every line of a {n}-line receipt deleted"));

    let mut family = Family::new(&subject, size(3, 9), n as u64);
    for i in 0..n {
        let mut doubled = all.clone();
        doubled.insert(i + 1, all[i]);
        family.check(
            &join(&doubled),
            i as u64 + 2,
            &format!("duplicate line {}", i + 1),
        );
    }
    family.report(&format!("every line of a {n}-line receipt duplicated"));

    let pairs = (n * (n - 1) / 2) as u64;
    let mut family = Family::new(&subject, size(3, 36), pairs);
    for i in 0..n {
        for j in i + 1..n {
            let mut swapped = all.clone();
            swapped.swap(i, j);
            family.check(
                &join(&swapped),
                i as u64 + 1,
                &format!("swap lines {} and {}", i + 1, j + 1),
            );
        }
    }
    family.report(&format!(
        "every pair of lines of a {n}-line receipt swapped"
    ));
}

#[test]
fn reliability_damage_a_cut_off_tail_is_caught_by_the_acknowledged_head() {
    let (_tmp, subject) = Subject::beaten(3);
    let receipt = subject.receipt();
    let all = lines(&receipt);
    let n = all.len();
    let mut family = Family::new(&subject, size(3, 9), n as u64);
    // Keep the first `keep` lines (0..n): a chain that is valid in itself.
    for keep in 0..n {
        family.check(
            &join(&all[..keep]),
            keep as u64 + 1,
            &format!("keep {keep} lines"),
        );
    }
    family.report(&format!(
        "the tail of a {n}-line receipt cut off after every line (each remaining chain valid on its own; receipt-head.json names the loss)"
    ));
}

#[test]
fn reliability_damage_a_line_grown_past_the_size_limit_is_detected() {
    let (_tmp, subject) = Subject::beaten(1);
    let receipt = subject.receipt();
    let all = lines(&receipt);
    let n = all.len();
    let mut family = Family::new(&subject, size(2, 7), n as u64 * 2);
    for i in 0..n {
        // The same event padded with insignificant whitespace, so only its
        // size is wrong: just past the limit, and far past it.
        for content in [LIMIT + 1, 4 * LIMIT] {
            let line = all[i];
            let body = &line[..line.len() - 1];
            let mut grown = body[..body.len() - 1].to_vec();
            grown.resize(content - 1, b' ');
            grown.push(b'}');
            grown.push(b'\n');
            let mut changed = all.clone();
            changed[i] = &grown;
            family.check(
                &join(&changed),
                i as u64 + 1,
                &format!("line {} grown to {content} bytes", i + 1),
            );
        }
    }
    family.report(&format!(
        "every line of a {n}-line receipt grown past max_receipt_line_bytes ({LIMIT}): to {} and to {} bytes",
        LIMIT + 1,
        4 * LIMIT
    ));
}
