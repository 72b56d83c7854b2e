//! Reliability scenario 2 (issue 8): damage. Receipts written by the real
//! binary (with their acknowledged head `receipt-head.json`) are damaged in
//! every way of one family — the last line truncated at every byte offset,
//! every single bit flipped, every line deleted, duplicated, every pair of
//! lines swapped, the tail cut off after every line, every line grown past
//! the size limit — and each variant must be detected (100 %), without a
//! panic, with the first bad sequence named exactly, by `verify` and by
//! `receipt-diagnose`. The library functions carry the exhaustive counts;
//! a sample of every family also goes through the binary (exit 3 for
//! verify, a diagnosis naming the line, never exit 1 or 101).

use crate::reliability;

use bluetape_flow::commands::inspect::receipt_diagnose;
use bluetape_flow::commands::{FlowError, verify};
use reliability::{LaneRun, figure, full, lines, size};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

const SCENARIO: &str = "2. Damage";
const LIMIT: usize = 65536;

/// One damage family under test.
struct Family<'a> {
    run: &'a LaneRun,
    original: Vec<u8>,
    detected: u64,
    failures: Vec<String>,
    binary_sampled: u64,
    /// Every n-th variant also goes through the binary.
    binary_every: u64,
}

impl<'a> Family<'a> {
    fn new(run: &'a LaneRun, binary_samples: u64, expected_variants: u64) -> Family<'a> {
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
    let verified = match verify(root, run_id) {
        Err(FlowError::ReceiptDamaged(damage)) => Some(damage.first_bad_sequence),
        _ => None,
    };
    let diagnosed = match receipt_diagnose(root, run_id) {
        Ok(map) if map["effective_state"] == "blocked" => map["first_bad_sequence"].as_u64(),
        _ => None,
    };
    (verified, diagnosed)
}

fn binary_verdicts(run: &LaneRun, first_bad: u64) -> Result<(), String> {
    let out = run.read("verify", &[]);
    if out.code != 3 {
        return Err(format!("binary verify exit {}: {}", out.code, out.stderr));
    }
    let e = out.error();
    let message = e["message"].as_str().unwrap_or_default();
    let named = message == "receipt contains no events" && first_bad == 1
        || message.starts_with(&format!("receipt corruption at sequence {first_bad}:"));
    if e["error"] != "receipt_corrupt" || !named {
        return Err(format!("binary verify said {e}"));
    }
    let out = run.read("receipt-diagnose", &[]);
    if out.code != 0 {
        return Err(format!("binary diagnose exit {}: {}", out.code, out.stderr));
    }
    let d = out.json();
    if d["first_bad_sequence"] != first_bad || d["effective_state"] != "blocked" {
        return Err(format!("binary diagnose said {d}"));
    }
    Ok(())
}

/// A run with `beats` heartbeats after its setup lines, head up to date.
fn run_with_beats(base: &Path, beats: usize) -> LaneRun {
    let run = LaneRun::new(base, &["w0"]);
    for i in 0..beats {
        let out = run
            .command(&run.heartbeat_args("w0", &format!("{i}")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
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
    let tmp = tempfile::tempdir().unwrap();
    let run = run_with_beats(tmp.path(), 2);
    let receipt = run.receipt();
    let all = lines(&receipt);
    let n = all.len() as u64;
    let last_start = receipt.len() - all.last().unwrap().len();
    let offsets = all.last().unwrap().len() as u64;
    let mut family = Family::new(&run, size(10, 100), offsets);
    // Offset 0 removes the whole line (only the head can tell); every other
    // offset leaves an unterminated line.
    for cut in last_start..receipt.len() {
        family.check(&receipt[..cut], n, &format!("cut at byte {cut}"));
    }
    family.report(&format!(
        "last line ({offsets} bytes) of a {n}-line receipt truncated at every byte offset"
    ));
}

#[test]
fn reliability_damage_every_single_bit_flip_is_detected() {
    // A small receipt: init, run-approve, run-start (head at 3).
    let tmp = tempfile::tempdir().unwrap();
    let run = LaneRun::new(tmp.path(), &[]);
    let receipt = run.receipt();
    let all = lines(&receipt);
    // CI flips one bit of every byte (rotating through the 8 positions);
    // the full run flips every bit of every byte.
    let per_byte: u64 = if full() { 8 } else { 1 };
    let mut family = Family::new(&run, size(10, 200), receipt.len() as u64 * per_byte);
    let mut first = 0u64;
    for (index, line) in all.iter().enumerate() {
        for offset in 0..line.len() {
            let byte = first as usize + offset;
            for k in 0..per_byte {
                let bit = (byte as u64 + k) % 8;
                let mut changed = receipt.clone();
                changed[byte] ^= 1 << bit;
                family.check(
                    &changed,
                    index as u64 + 1,
                    &format!("bit {bit} of byte {byte}"),
                );
            }
        }
        first += line.len() as u64;
    }
    family.report(&format!(
        "single bit flips in a {}-line, {}-byte receipt ({})",
        all.len(),
        receipt.len(),
        if full() {
            "every bit of every byte"
        } else {
            "one bit of every byte, rotating"
        }
    ));
}

#[test]
fn reliability_damage_deleting_duplicating_and_swapping_lines_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_with_beats(tmp.path(), 3);
    let receipt = run.receipt();
    let all = lines(&receipt);
    let n = all.len();

    let mut family = Family::new(&run, size(3, 9), n as u64);
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

    let mut family = Family::new(&run, size(3, 9), n as u64);
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
    let mut family = Family::new(&run, size(3, 36), pairs);
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
    let tmp = tempfile::tempdir().unwrap();
    let run = run_with_beats(tmp.path(), 3);
    let receipt = run.receipt();
    let all = lines(&receipt);
    let n = all.len();
    let mut family = Family::new(&run, size(3, 9), n as u64);
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
    let tmp = tempfile::tempdir().unwrap();
    let run = run_with_beats(tmp.path(), 1);
    let receipt = run.receipt();
    let all = lines(&receipt);
    let n = all.len();
    let mut family = Family::new(&run, size(2, 7), n as u64 * 2);
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
