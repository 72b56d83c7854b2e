//! Bad input for the run commands `verify` and `rebuild` (reference-runtime
//! §4.1, §6): path-traversal or over-long run ids, symlinked run dirs and
//! receipts, malformed, non-UTF-8 or oversized manifest snapshots, floats
//! and NaN where integers belong, unterminated or oversized receipt lines,
//! invalid UTF-8, a bit flip at every byte, tail truncation, argument
//! errors, and the secrecy of the owner token. Every case drives the real
//! binary, gets its typed error (exit status, `error`, `next_command`) with
//! a clear message and an empty stdout, and leaves every byte on disk as it
//! was (`common::snapshot` before and after) — `rebuild` included: a damaged
//! receipt never gets caches written.

use crate::bed as common;
use crate::bed::refusal;
use bluetape_flow::receipt::primitives::{RunId, Sha256Hex};
use bluetape_flow::store::root::StateRoot;

use bluetape_flow::store::run::{AckHead, RunDir};
use refusal::{Chain, Work, append, assert_unchanged, chmod, expect_error, rewrite};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::symlink;
use std::path::Path;

const LIMIT: usize = 65536;

/// Our init plus two hand-sealed lines (plan_approved, run_started). The
/// acknowledged head stays at init's sequence 1, as if another writer
/// (the Python tool) had appended lines 2 and 3.
fn three_line_run() -> (Work, String, Chain) {
    let (work, run_id) = Work::with_run();
    let mut chain = Chain::of(&work.run_dir(&run_id));
    append(&work.receipt(&run_id), &chain.two_more_lines());
    let out = work.ok(&work.run_args("verify", &run_id));
    assert_eq!(out["sequence"], 3);
    (work, run_id, chain)
}

/// Both commands refuse the same way and write nothing.
fn both_refuse(work: &Work, run_id: impl AsRef<std::ffi::OsStr>, code: i32, needle: &str) {
    for command in ["verify", "rebuild"] {
        work.refused(
            &work.run_args(command, &run_id),
            code,
            common::error_of(code),
            needle,
        );
    }
}

fn corrupt_at(sequence: u64, reason: &str) -> String {
    format!("receipt corruption at sequence {sequence}: {reason}")
}

fn receipt_lines(work: &Work, run_id: &str) -> Vec<Vec<u8>> {
    std::fs::read(work.receipt(run_id))
        .unwrap()
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

// ---------------------------------------------------------------- run ids

#[test]
fn run_ids_that_are_not_identifiers_are_contract_errors() {
    let (work, _) = Work::with_run();
    let long = "r".repeat(129);
    for bad in [
        "../escape",
        "..",
        ".",
        "a/b",
        "/etc",
        "runs/../x",
        "",
        ".hidden",
        "x\n",
        "é",
        &long,
    ] {
        both_refuse(&work, bad, 2, "run id must match the identifier contract");
    }
    // Not UTF-8: refused at argument parsing, same typed error.
    both_refuse(
        &work,
        OsString::from_vec(b"run-\xff".to_vec()),
        2,
        "invalid UTF-8",
    );
}

#[test]
fn an_unknown_run_id_says_the_run_does_not_exist() {
    let (work, _) = Work::with_run();
    let max = "r".repeat(128);
    for id in ["20260101T000000Z-00000000", max.as_str()] {
        let e = work.refused(
            &work.run_args("verify", id),
            3,
            "receipt_corrupt",
            "does not exist under the state root",
        );
        assert!(e["message"].as_str().unwrap().contains(id));
        work.refused(
            &work.run_args("rebuild", id),
            3,
            "receipt_corrupt",
            "does not exist under the state root",
        );
    }
    // A state root that does not exist at all is not created by a reader.
    let fresh = Work::new();
    both_refuse(
        &fresh,
        "20260101T000000Z-00000000",
        3,
        "does not exist under the state root",
    );
    assert!(!fresh.state.exists());
}

// ------------------------------------------------------- run dir and modes

#[test]
fn a_symlinked_run_dir_is_refused() {
    let (work, run_id) = Work::with_run();
    let moved = work.base.join("moved-run");
    std::fs::rename(work.run_dir(&run_id), &moved).unwrap();
    symlink(&moved, work.run_dir(&run_id)).unwrap();
    both_refuse(&work, &run_id, 3, "run directory snapshot is unsafe");
    // A run dir that is a plain file.
    let (work, run_id) = Work::with_run();
    std::fs::remove_dir_all(work.run_dir(&run_id)).unwrap();
    std::fs::write(work.run_dir(&run_id), b"").unwrap();
    both_refuse(
        &work,
        &run_id,
        3,
        "run manifest snapshot is missing or invalid",
    );
}

#[test]
fn verify_and_rebuild_do_not_check_directory_modes_like_the_reference() {
    // reference-runtime §1.3: verify and rebuild validate no directory mode
    // and no uid; only run mutations do. Loose modes are therefore accepted
    // here, verify writes nothing, and rebuild rewrites run.json as 0600.
    use std::os::unix::fs::MetadataExt;
    let (work, run_id) = Work::with_run();
    chmod(&work.state.join("runs"), 0o755);
    chmod(&work.run_dir(&run_id), 0o755);
    chmod(&work.receipt(&run_id), 0o644);
    chmod(&work.manifest(&run_id), 0o644);
    if refusal::is_root() {
        // Nor the uid of the files they read.
        for file in [work.receipt(&run_id), work.manifest(&run_id)] {
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        }
    }
    let before = common::snapshot(&work.base);
    work.ok(&work.run_args("verify", &run_id));
    assert_unchanged(&before, &common::snapshot(&work.base), "verify");
    std::fs::remove_file(work.run_dir(&run_id).join("run.json")).unwrap();
    work.ok(&work.run_args("rebuild", &run_id));
    let meta = std::fs::metadata(work.run_dir(&run_id).join("run.json")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    // A symlinked runs/, which the reference follows, is refused: every
    // file inside the state root is reached from the held root without
    // following a symlink (DEVIATIONS 79), so a verify cannot be pointed
    // at a copy. Nothing is written.
    let (work, run_id) = Work::with_run();
    let elsewhere = work.base.join("runs-elsewhere");
    std::fs::rename(work.state.join("runs"), &elsewhere).unwrap();
    symlink(&elsewhere, work.state.join("runs")).unwrap();
    let before = common::snapshot(&work.base);
    let out = work.flow.run(&work.run_args("verify", &run_id));
    let e = out.assert_error(2, "contract_error");
    assert_eq!(e["message"], "state-root runs must not be a symlink");
    assert_unchanged(&before, &common::snapshot(&work.base), "verify");
}

#[test]
fn a_foreign_owned_head_record_is_refused_chown_when_root() {
    // Our acknowledged-head file is read with the secure-mode check (0600,
    // current uid, no symlink); the reference's files are not. A broken
    // mode or owner is a state-root rule (exit 2, DEVIATIONS 41), not a
    // damaged receipt.
    let (work, run_id) = Work::with_run();
    let head = work.run_dir(&run_id).join("receipt-head.json");
    if refusal::is_root() {
        std::os::unix::fs::chown(&head, Some(65534), None).unwrap();
    } else {
        // Without root no foreign uid can be produced; a loosened mode goes
        // through the same secure-mode check.
        chmod(&head, 0o644);
    }
    let needle = if refusal::is_root() {
        "acknowledged receipt head record must be owned by the current uid"
    } else {
        "acknowledged receipt head record does not have the required secure mode"
    };
    both_refuse(&work, &run_id, 2, needle);
    let (work, run_id) = Work::with_run();
    let head = work.run_dir(&run_id).join("receipt-head.json");
    chmod(&head, 0o644);
    both_refuse(
        &work,
        &run_id,
        2,
        "acknowledged receipt head record does not have the required secure mode",
    );
    // The refusal's kind (a mode or owner, not a malformed file) brings
    // its fix.
    let e = work.refused(
        &work.run_args("verify", &run_id),
        2,
        "contract_error",
        "does not have the required secure mode",
    );
    let hint = e["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("0600") && hint.contains("chmod"), "{e}");
}

// ------------------------------------------------------- manifest snapshot

#[test]
fn a_missing_malformed_or_unsafe_manifest_is_refused() {
    let (work, run_id) = Work::with_run();
    let manifest = work.manifest(&run_id);
    let original = std::fs::read(&manifest).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "empty",
            b"".to_vec(),
            "run manifest snapshot is missing or invalid",
        ),
        (
            "not JSON",
            b"{not json".to_vec(),
            "run manifest snapshot is missing or invalid",
        ),
        (
            "truncated",
            original[..original.len() / 2].to_vec(),
            "run manifest snapshot is missing or invalid",
        ),
        (
            "array",
            b"[1,2,3]\n".to_vec(),
            "run manifest snapshot must be an object",
        ),
        (
            "string",
            b"\"manifest\"\n".to_vec(),
            "run manifest snapshot must be an object",
        ),
        (
            "null",
            b"null\n".to_vec(),
            "run manifest snapshot must be an object",
        ),
        (
            "BOM",
            [b"\xef\xbb\xbf".as_slice(), &original].concat(),
            "run manifest snapshot is missing or invalid",
        ),
    ];
    for (label, bytes, needle) in cases {
        // Shown with the failure: `refused` reports the argv only.
        eprintln!("manifest case: {label}");
        rewrite(&manifest, &bytes);
        both_refuse(&work, &run_id, 3, needle);
    }
    rewrite(&manifest, &original);
    work.ok(&work.run_args("verify", &run_id));

    // Missing, a directory, a symlink (even to the genuine bytes).
    std::fs::remove_file(&manifest).unwrap();
    both_refuse(
        &work,
        &run_id,
        3,
        "run manifest snapshot is missing or invalid",
    );
    std::fs::create_dir(&manifest).unwrap();
    both_refuse(
        &work,
        &run_id,
        3,
        "run manifest snapshot is missing or invalid",
    );
    std::fs::remove_dir(&manifest).unwrap();
    let genuine = work.base.join("genuine-manifest.json");
    std::fs::write(&genuine, &original).unwrap();
    symlink(&genuine, &manifest).unwrap();
    both_refuse(&work, &run_id, 3, "run manifest snapshot is unsafe");
}

#[test]
fn a_non_utf8_manifest_is_damage_not_a_contract_error() {
    // The reference's decode error is a ValueError (exit 2); damaged stored
    // data is corruption for us: exit 3 (contracts/DEVIATIONS.md row 3).
    let (work, run_id) = Work::with_run();
    let manifest = work.manifest(&run_id);
    let mut bytes = std::fs::read(&manifest).unwrap();
    let at = bytes
        .windows(20)
        .position(|w| w == b"\"workflow_types\":[\"A")
        .unwrap();
    bytes[at + 19] = 0xff;
    rewrite(&manifest, &bytes);
    both_refuse(
        &work,
        &run_id,
        3,
        "run manifest snapshot is missing or invalid",
    );
}

#[test]
fn an_oversized_manifest_is_refused_with_its_size() {
    // Valid JSON padded past 1 MiB: we refuse to read it (the reference has
    // no cap; the manifest it writes is under 5 KiB).
    let (work, run_id) = Work::with_run();
    let manifest = work.manifest(&run_id);
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.extend(std::iter::repeat_n(b' ', 1 << 20));
    rewrite(&manifest, &bytes);
    both_refuse(&work, &run_id, 3, "larger than 1048576 bytes");
}

/// Edit the manifest as JSON text; `_run` is kept, so its hash no longer
/// matches unless the edit is refused earlier.
fn edit_manifest(work: &Work, run_id: &str, edit: impl Fn(&str) -> String) {
    let path = work.manifest(run_id);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "edit did not apply");
    rewrite(&path, edited.as_bytes());
}

#[test]
fn manifest_contents_that_break_the_contract_are_refused() {
    type Edit = Box<dyn Fn(&str) -> String>;
    // The first `from` written as `to`.
    let replace = |from: &'static str, to: &'static str| -> Edit {
        Box::new(move |t| t.replacen(from, to, 1))
    };
    // `probe_grace_seconds` written as `to` (`${1}` is its number).
    let grace = |to: &'static str| -> Edit {
        Box::new(move |t| {
            let re = regex::Regex::new(r#""probe_grace_seconds":(\d+)"#).unwrap();
            re.replace(t, format!(r#""probe_grace_seconds":{to}"#))
                .into_owned()
        })
    };
    const INCOMPATIBLE: i32 = 4;
    const CORRUPT: i32 = 3;
    const INVALID: &str = "run manifest contract is invalid";
    const HASH: &str = "run manifest metadata hash mismatch";
    let cases: Vec<(&str, Edit, i32, &str)> = vec![
        (
            "manifest_version 2.0.0",
            replace(
                r#""manifest_version":"1.1.0""#,
                r#""manifest_version":"2.0.0""#,
            ),
            INCOMPATIBLE,
            "unsupported manifest version",
        ),
        (
            "schema_version 2",
            replace(r#""schema_version":1,"#, r#""schema_version":2,"#),
            INCOMPATIBLE,
            "unsupported manifest schema version",
        ),
        (
            "_run.manifest_hash mismatch",
            Box::new(|t| {
                let at = t.find("\"manifest_hash\":\"").unwrap() + 17;
                let mut s = t.to_string();
                let flipped = if &t[at..at + 1] == "0" { "1" } else { "0" };
                s.replace_range(at..at + 1, flipped);
                s
            }),
            CORRUPT,
            HASH,
        ),
        ("a liveness number changed", grace("1${1}"), CORRUPT, HASH),
        ("a float liveness number", grace("${1}.5"), CORRUPT, INVALID),
        ("an integral float", grace("${1}.0"), CORRUPT, INVALID),
        // serde_json refuses NaN while parsing; the reference parses it and
        // refuses it in validation ("run manifest contract is invalid").
        // Same exit, same code.
        (
            "NaN liveness number",
            grace("NaN"),
            CORRUPT,
            "run manifest snapshot is missing or invalid",
        ),
        ("a string number", grace(r#""${1}""#), CORRUPT, INVALID),
        (
            "_run not an object",
            Box::new(|t| {
                let start = t.find("\"_run\":{").unwrap() + 7;
                let end = start + t[start..].find('}').unwrap() + 1;
                format!("{}[]{}", &t[..start], &t[end..])
            }),
            CORRUPT,
            "run manifest metadata is invalid",
        ),
        (
            "a missing contract key",
            replace(r#""token_audit":"#, r#""token_audit_":"#),
            CORRUPT,
            INVALID,
        ),
    ];
    for (label, edit, code, needle) in cases {
        let (work, run_id) = Work::with_run();
        eprintln!("manifest case: {label}");
        edit_manifest(&work, &run_id, &edit);
        both_refuse(&work, &run_id, code, needle);
    }
}

// ---------------------------------------------------------------- receipt

#[test]
fn a_missing_symlinked_or_empty_receipt_is_damaged() {
    let (work, run_id) = Work::with_run();
    let receipt = work.receipt(&run_id);
    let original = std::fs::read(&receipt).unwrap();
    std::fs::remove_file(&receipt).unwrap();
    both_refuse(&work, &run_id, 3, "receipt is missing or unsafe");
    let genuine = work.base.join("genuine.jsonl");
    std::fs::write(&genuine, &original).unwrap();
    symlink(&genuine, &receipt).unwrap();
    both_refuse(&work, &run_id, 3, "receipt is missing or unsafe");
    std::fs::remove_file(&receipt).unwrap();
    symlink(work.base.join("nowhere"), &receipt).unwrap();
    both_refuse(&work, &run_id, 3, "receipt is missing or unsafe");
    std::fs::remove_file(&receipt).unwrap();
    std::fs::create_dir(&receipt).unwrap();
    both_refuse(&work, &run_id, 3, "receipt is missing or unsafe");
    std::fs::remove_dir(&receipt).unwrap();
    std::fs::write(&receipt, b"").unwrap();
    chmod(&receipt, 0o600);
    for command in ["verify", "rebuild"] {
        let e = work.refused(
            &work.run_args(command, &run_id),
            3,
            "receipt_corrupt",
            "receipt contains no events",
        );
        assert_eq!(e["message"], "receipt contains no events");
    }
    // The same on a reference run without our head record.
    let (work, run_id) = Work::from_fixture("01-init-only");
    rewrite(&work.receipt(&run_id), b"");
    both_refuse(&work, &run_id, 3, "receipt contains no events");
}

#[test]
fn unterminated_and_blank_lines_are_damaged() {
    let (work, run_id, _) = three_line_run();
    let receipt = work.receipt(&run_id);
    let original = std::fs::read(&receipt).unwrap();
    // The last line without its LF (a torn append).
    rewrite(&receipt, &original[..original.len() - 1]);
    both_refuse(&work, &run_id, 3, &corrupt_at(3, "incomplete final event"));
    // Half of the last line.
    let lines = receipt_lines(&work, &run_id);
    let keep = original.len() - lines[2].len() / 2;
    rewrite(&receipt, &original[..keep]);
    both_refuse(&work, &run_id, 3, &corrupt_at(3, "incomplete final event"));
    // A partial fourth line after three good ones.
    rewrite(
        &receipt,
        &[original.as_slice(), b"{\"agent_id\":null,"].concat(),
    );
    both_refuse(&work, &run_id, 3, &corrupt_at(4, "incomplete final event"));
    // A blank line, a CR-only line, garbage.
    for tail in [b"\n".as_slice(), b"\r\n", b"garbage\n", b"[]\n", b"null\n"] {
        rewrite(&receipt, &[original.as_slice(), tail].concat());
        let reason = if tail.starts_with(b"[") || tail.starts_with(b"n") {
            "invalid event"
        } else {
            "invalid JSON"
        };
        both_refuse(&work, &run_id, 3, &corrupt_at(4, reason));
    }
}

/// Line 2 of a three-line run, padded with JSON whitespace to `content`
/// bytes (LF excluded): still valid JSON with a valid checksum.
fn padded_line(line: &[u8], content: usize) -> Vec<u8> {
    let body = &line[..line.len() - 1];
    let mut out = body[..1].to_vec();
    out.extend(std::iter::repeat_n(b' ', content - body.len()));
    out.extend_from_slice(&body[1..]);
    out
}

#[test]
fn oversized_lines_are_damaged_and_the_limit_itself_is_fine() {
    let (work, run_id, _) = three_line_run();
    let receipt = work.receipt(&run_id);
    let lines = receipt_lines(&work, &run_id);
    let with_line2 = |line2: &[u8], terminated: bool| {
        let mut bytes = lines[0].clone();
        bytes.extend_from_slice(line2);
        if terminated {
            bytes.push(b'\n');
            bytes.extend_from_slice(&lines[2]);
        }
        bytes
    };
    // Exactly the limit: accepted (fixture 28 behaviour).
    rewrite(&receipt, &with_line2(&padded_line(&lines[1], LIMIT), true));
    let out = work.ok(&work.run_args("verify", &run_id));
    assert_eq!(out["sequence"], 3);
    // One byte over, and far over: too large.
    for size in [LIMIT + 1, LIMIT + 2, 4 * LIMIT] {
        rewrite(&receipt, &with_line2(&padded_line(&lines[1], size), true));
        both_refuse(&work, &run_id, 3, &corrupt_at(2, "event too large"));
    }
    // Unterminated at EOF: limit+1 bytes is "incomplete", more is too large.
    rewrite(
        &receipt,
        &with_line2(&padded_line(&lines[1], LIMIT + 1), false),
    );
    both_refuse(&work, &run_id, 3, &corrupt_at(2, "incomplete final event"));
    rewrite(
        &receipt,
        &with_line2(&padded_line(&lines[1], LIMIT + 2), false),
    );
    both_refuse(&work, &run_id, 3, &corrupt_at(2, "event too large"));
    // A huge line without any LF at all.
    let mut bytes = lines[0].clone();
    bytes.extend(std::iter::repeat_n(b'x', 3 * LIMIT));
    rewrite(&receipt, &bytes);
    both_refuse(&work, &run_id, 3, &corrupt_at(2, "event too large"));
}

/// Line 2 re-sealed after replacing `from` with the raw JSON text `to` in
/// its canonical form: the checksum is the one the reference computes over
/// that text, so only the number rule can refuse it.
fn resealed_line2(chain: &Chain, from: &str, to: &str) -> Vec<u8> {
    let draft = chain.draft(
        "plan_approved",
        "planned",
        "approved",
        json!([{"exit_status": 987654321, "kind": "log", "summary": "x"}]),
    );
    let sealed = draft.seal();
    let mut without = sealed.event.clone();
    without.remove("checksum");
    let canonical = |v: Value| bluetape_flow::receipt::canonical::to_string(&v);
    let preimage = canonical(Value::Object(without));
    assert_eq!(preimage.matches(from).count(), 1, "{from} not unique");
    let preimage = preimage.replace(from, to);
    let checksum = bluetape_flow::receipt::canonical::sha256_hex(preimage.as_bytes());
    let mut event = sealed.event.clone();
    event.insert("checksum".into(), Value::String(checksum));
    let mut line = canonical(Value::Object(event))
        .replace(from, to)
        .into_bytes();
    line.push(b'\n');
    line
}

/// A run made by our init whose line 2 is `make(chain)`.
fn run_with_line2(make: impl Fn(&Chain) -> Vec<u8>) -> (Work, String) {
    let (work, run_id) = Work::with_run();
    let chain = Chain::of(&work.run_dir(&run_id));
    append(&work.receipt(&run_id), &make(&chain));
    (work, run_id)
}

const PLACEHOLDER: &str = "\"exit_status\":987654321";

#[test]
fn a_resealed_line_with_an_ordinary_integer_verifies() {
    // Control for the number cases below: the resealing itself is sound.
    for to in ["0", "-1", "100000000000000000000000000000"] {
        let (work, run_id) = run_with_line2(|chain| {
            resealed_line2(chain, PLACEHOLDER, &format!("\"exit_status\":{to}"))
        });
        let out = work.ok(&work.run_args("verify", &run_id));
        assert_eq!(out["sequence"], 2, "{to}");
    }
}

#[test]
fn floats_where_integers_belong_are_contract_mismatches() {
    let cases = [
        (PLACEHOLDER, "\"exit_status\":1.5"),
        (PLACEHOLDER, "\"exit_status\":1.0"),
        (PLACEHOLDER, "\"exit_status\":1e3"),
        (PLACEHOLDER, "\"exit_status\":-0.0"),
        ("\"sequence\":2", "\"sequence\":2.0"),
        ("\"owner_epoch\":1", "\"owner_epoch\":1.0"),
        // The reference accepts 1.0 here (Python equality); floats are never
        // valid for us (decisions.md 3).
        ("\"schema_version\":1", "\"schema_version\":1.0"),
    ];
    for (from, to) in cases {
        let (work, run_id) = run_with_line2(|chain| resealed_line2(chain, from, to));
        both_refuse(&work, &run_id, 3, &corrupt_at(2, "event contract mismatch"));
    }
}

#[test]
fn nan_and_infinity_where_integers_belong_are_damaged() {
    for to in ["NaN", "Infinity", "-Infinity"] {
        let (work, run_id) = run_with_line2(|chain| {
            resealed_line2(chain, PLACEHOLDER, &format!("\"exit_status\":{to}"))
        });
        for command in ["verify", "rebuild"] {
            let e = work.refused(
                &work.run_args(command, &run_id),
                3,
                "receipt_corrupt",
                &corrupt_at(2, ""),
            );
            // The reference parses NaN and refuses it as "event contract
            // mismatch"; serde_json refuses it while parsing ("invalid
            // JSON"). Same exit, same code, same first bad line
            // (reference-runtime §10.2).
            let message = e["message"].as_str().unwrap();
            assert!(
                message.ends_with("event contract mismatch") || message.ends_with("invalid JSON"),
                "{to}: {message}"
            );
        }
    }
}

#[test]
fn invalid_utf8_in_a_line_is_damaged() {
    let (work, run_id, _) = three_line_run();
    let receipt = work.receipt(&run_id);
    let original = std::fs::read(&receipt).unwrap();
    let check = original
        .windows(3)
        .position(|w| w == "✓".as_bytes())
        .unwrap();
    type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
    let mutations: Vec<Mutation> = vec![
        // A lone 0xff, a truncated sequence, an overlong '/', a surrogate
        // encoded in UTF-8.
        Box::new(move |b| b[check] = 0xff),
        Box::new(move |b| {
            b.remove(check + 2);
        }),
        Box::new(move |b| b.splice(check..check + 3, [0xc0, 0xaf]).for_each(drop)),
        Box::new(move |b| b[check..check + 3].copy_from_slice(&[0xed, 0xa0, 0x80])),
    ];
    for mutate in mutations {
        let mut bytes = original.clone();
        mutate(&mut bytes);
        rewrite(&receipt, &bytes);
        both_refuse(&work, &run_id, 3, &corrupt_at(2, "invalid JSON"));
    }
    // A lone surrogate as a JSON escape: the reference cannot hash it and
    // exits 2 (contract_error); we refuse it while parsing (exit 3).
    let mut bytes = original.clone();
    bytes.splice(check..check + 3, *b"\\ud800").for_each(drop);
    rewrite(&receipt, &bytes);
    both_refuse(&work, &run_id, 3, &corrupt_at(2, "invalid JSON"));
}

/// A head record that names no head (DEVIATIONS 104): `verify` refuses
/// (it cannot vouch the receipt is whole) and names the way out; `rebuild`
/// judges the receipt without it and rewrites it, and the run verifies.
fn refused_then_rebuilt(work: &Work, run_id: &str) {
    work.refused(
        &work.run_args("verify", run_id),
        3,
        "receipt_corrupt",
        "acknowledged receipt head record is invalid",
    );
    work.ok(&work.run_args("rebuild", run_id));
    work.ok(&work.run_args("verify", run_id));
}

#[test]
fn a_malformed_head_record_is_refused() {
    let cases: Vec<&[u8]> = vec![
        b"",
        b"{",
        b"[]\n",
        b"{\"byte_length\":537}\n",
        b"\xff\xfe\n",
    ];
    for bytes in cases {
        let (work, run_id) = Work::with_run();
        rewrite(&work.run_dir(&run_id).join("receipt-head.json"), bytes);
        refused_then_rebuilt(&work, &run_id);
    }
    // Oversized (valid JSON padded past 4 KiB).
    let (work, run_id) = Work::with_run();
    let head = work.run_dir(&run_id).join("receipt-head.json");
    let mut bytes = std::fs::read(&head).unwrap();
    bytes.extend(std::iter::repeat_n(b' ', 5000));
    rewrite(&head, &bytes);
    refused_then_rebuilt(&work, &run_id);
    // A symlink to the genuine record.
    let (work, run_id) = Work::with_run();
    let head = work.run_dir(&run_id).join("receipt-head.json");
    let genuine = work.base.join("genuine-head.json");
    std::fs::rename(&head, &genuine).unwrap();
    symlink(&genuine, &head).unwrap();
    both_refuse(
        &work,
        &run_id,
        2,
        "acknowledged receipt head record must be a regular file",
    );
}

#[test]
fn non_canonical_bytes_pass_only_where_nothing_was_acknowledged() {
    // The reference re-canonicalizes before hashing, so a BOM, CRLF or extra
    // spaces still verify (decisions.md 2; fixture 01 below). Lines our tool
    // acknowledged (init's line 1, pinned by receipt-head.json) must stay
    // byte-canonical: any re-encoding of them is reported.
    type Edit = fn(&[u8]) -> Vec<u8>;
    let edits: [(&str, Edit); 3] = [
        ("BOM", |l| [b"\xef\xbb\xbf".as_slice(), l].concat()),
        ("CRLF", |l| [&l[..l.len() - 1], b"\r\n".as_slice()].concat()),
        ("spaces", |l| [b"{ ".as_slice(), &l[1..]].concat()),
    ];
    for (label, edit) in edits {
        eprintln!("edit: {label}");
        let (work, run_id) = Work::from_fixture("01-init-only");
        let line = std::fs::read(work.receipt(&run_id)).unwrap();
        rewrite(&work.receipt(&run_id), &edit(&line));
        work.ok(&work.run_args("verify", &run_id));

        let (work, run_id) = Work::with_run();
        let line = std::fs::read(work.receipt(&run_id)).unwrap();
        rewrite(&work.receipt(&run_id), &edit(&line));
        both_refuse(
            &work,
            &run_id,
            3,
            &corrupt_at(
                1,
                "event bytes differ from their acknowledged canonical form",
            ),
        );
    }
}

/// trust-model §2 promise 10 (DEVIATIONS 105): a line another tool wrote
/// in non-canonical spacing verifies under the reference's rule; after our
/// next append it still does (the head record pins as canonical only the
/// lines before it: `canonical_through`), and our own lines below it stay
/// pinned (a re-encoded line 1 is still damage).
#[test]
fn a_foreign_non_canonical_line_stays_accepted_after_our_appends() {
    let (work, run_id) = Work::with_run();
    let mut chain = Chain::of(&work.run_dir(&run_id));
    let approve = chain.draft(
        "plan_approved",
        "planned",
        "approved",
        json!([{"kind": "user_approval", "summary": "approved elsewhere"}]),
    );
    let line = chain.seal(&approve).line;
    let spaced = [b"{ ".as_slice(), &line[1..]].concat();
    append(&work.receipt(&run_id), &spaced);
    work.ok(&work.run_args("verify", &run_id));
    let owner = work.state.join("handles/main.owner");
    let evidence = work.base.join("started.json");
    std::fs::write(&evidence, r#"[{"kind": "log", "summary": "started"}]"#).unwrap();
    let argv = common::mutation_argv(
        &work.state,
        "run-start",
        &run_id,
        &owner,
        &["--evidence", evidence.to_str().unwrap()],
    );
    work.flow.run(&argv).assert_ok();
    let verified = work.ok(&work.run_args("verify", &run_id));
    assert_eq!(verified["sequence"], 3);
    let head: Value = serde_json::from_slice(
        &std::fs::read(work.run_dir(&run_id).join("receipt-head.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(head["sequence"], 3, "{head}");
    assert_eq!(head["canonical_through"], 1, "{head}");
    // What stays pinned: our line 1, re-encoded, is damage.
    let receipt = std::fs::read(work.receipt(&run_id)).unwrap();
    rewrite(
        &work.receipt(&run_id),
        &[b"{ ".as_slice(), &receipt[1..]].concat(),
    );
    work.refused(
        &work.run_args("verify", &run_id),
        3,
        "receipt_corrupt",
        &corrupt_at(
            1,
            "event bytes differ from their acknowledged canonical form",
        ),
    );
}

// ---------------------------------------------------------------- bit flips

/// Flip one bit at a time in `file` (each position with each mask from
/// `masks(position)`, none for a skipped position), run verify, restore. Returns the flips verify did
/// not refuse with exit 3, as (position, mask, exit, stderr). Each refusal
/// must be typed and leave the state untouched.
fn flip_every_byte(
    work: &Work,
    run_id: &str,
    file: &Path,
    masks: impl Fn(usize) -> Vec<u8>,
) -> Vec<(usize, u8, i32, String)> {
    let original = std::fs::read(file).unwrap();
    let mut survivors = Vec::new();
    for position in 0..original.len() {
        for mask in masks(position) {
            let mut bytes = original.clone();
            bytes[position] ^= mask;
            rewrite(file, &bytes);
            let before = common::snapshot(&work.state);
            let out = work.flow.run(&work.run_args("verify", run_id));
            let what = format!("flip {mask:#04x} at byte {position}");
            assert_unchanged(&before, &common::snapshot(&work.state), &what);
            if out.code == 3 {
                expect_error(&out, 3, "receipt_corrupt", "", &what);
            } else {
                survivors.push((position, mask, out.code, out.stderr.clone()));
            }
        }
    }
    rewrite(file, &original);
    survivors
}

/// Two different bits per position, rotating so every bit gets flipped.
fn two_bits(position: usize) -> Vec<u8> {
    vec![1 << (position % 8), 1 << ((position + 4) % 8)]
}

// That every single-byte change of a receipt (ours, beyond the head, the
// reference's) is detected is proved once, in `reliability::damage`.

#[test]
fn bit_flips_in_the_manifest_are_detected_outside_the_unhashed_run_fields() {
    // The contract is bound by `_run.manifest_hash`, and the receipt binds
    // `manifest_hash` and `owner_fingerprint`, so flips there are refused
    // (exit 3; exit 4 when the flip hits `manifest_version` or
    // `schema_version`, which are checked first). `_run.repo_root`,
    // `workflow_type`, `component_ids`, `owner_epoch` (and the *name* of
    // `initial_owner_epoch`, which then defaults to 1) are outside every
    // hash, in the reference too: verify cannot see flips there.
    let (work, run_id) = Work::with_run();
    let manifest = work.manifest(&run_id);
    let text = std::fs::read_to_string(&manifest).unwrap();
    let run_start = text.find("\"_run\":{").unwrap();
    let run_end = run_start + text[run_start..].find('}').unwrap();
    let member = |key: &str| {
        let start = run_start + text[run_start..].find(&format!("\"{key}\":")).unwrap();
        let len = text[start..].find([',', '}']).unwrap();
        start..start + len
    };
    let protected = [
        member("manifest_hash"),
        member("owner_fingerprint"),
        // The value of initial_owner_epoch (not its name).
        {
            let r = member("initial_owner_epoch");
            r.end - 1..r.end
        },
    ];
    let version = text.find("\"manifest_version\":").unwrap();
    let schema = text.rfind("\"schema_version\":").unwrap();
    // Every byte of `_run` and its neighbourhood; the contract around it is
    // bound by one hash, so every 5th byte there (bit 0) is enough to show it.
    let dense = run_start.saturating_sub(64)..run_end + 64;
    let survivors = flip_every_byte(&work, &run_id, &manifest, |position| {
        if dense.contains(&position) || position % 5 == 0 {
            vec![1]
        } else {
            vec![]
        }
    });
    let mut unprotected = 0;
    for (position, mask, code, stderr) in survivors {
        let what = format!(
            "flip {mask:#04x} at byte {position} ({:?}): {code} {stderr}",
            &text[position.saturating_sub(20)..position + 1]
        );
        match code {
            4 => assert!(
                (version..version + 27).contains(&position)
                    || (schema..schema + 18).contains(&position),
                "{what}"
            ),
            0 => {
                assert!((run_start..run_end).contains(&position), "{what}");
                assert!(!protected.iter().any(|r| r.contains(&position)), "{what}");
                unprotected += 1;
            }
            _ => panic!("{what}"),
        }
    }
    assert!(
        unprotected > 0,
        "the unhashed _run fields are no longer unhashed: update this test"
    );
}

#[test]
fn a_zero_or_non_integer_initial_owner_epoch_is_refused_like_the_reference() {
    // The reference starts verification at `_run.initial_owner_epoch`; with
    // 0 or "1" no event's owner_epoch (an integer >= 1) can match, so line 1
    // is refused. rebuild (the coordinator replay) may refuse the metadata
    // itself first; either way exit 3 and nothing written.
    for value in ["0", "\"1\"", "null", "-1"] {
        let (work, run_id) = Work::with_run();
        edit_manifest(&work, &run_id, |t| {
            t.replace(
                "\"initial_owner_epoch\":1",
                &format!("\"initial_owner_epoch\":{value}"),
            )
        });
        work.refused(
            &work.run_args("verify", &run_id),
            3,
            "receipt_corrupt",
            &corrupt_at(1, "event contract mismatch"),
        );
        let e = work.refused(&work.run_args("rebuild", &run_id), 3, "receipt_corrupt", "");
        let message = e["message"].as_str().unwrap();
        assert!(
            message == corrupt_at(1, "event contract mismatch")
                || message == "run owner metadata is invalid",
            "{value}: {message}"
        );
    }
}

#[test]
fn bit_flips_in_the_head_record_are_all_detected() {
    // The record carries its own MAC (contracts/receipt.md "Appends and the
    // acknowledged head"), so no flip survives, not even in a field that is
    // not read back (`schema_version`), the padding, or the MAC's own hex
    // digits turned uppercase.
    let (work, run_id, _) = three_line_run();
    let head = work.run_dir(&run_id).join("receipt-head.json");
    assert_eq!(std::fs::metadata(&head).unwrap().len(), 512);
    let survivors = flip_every_byte(&work, &run_id, &head, two_bits);
    assert!(survivors.is_empty(), "{survivors:?}");
}

// ---------------------------------------------------------- tail truncation

/// Record the acknowledged head at the receipt's current end, as our own
/// appends do (init writes it for line 1).
fn acknowledge_all(work: &Work, run_id: &str, chain: &Chain) {
    let length = std::fs::metadata(work.receipt(run_id)).unwrap().len();
    RunDir::new(
        &StateRoot::begin(&work.state),
        &RunId::parse(run_id).unwrap(),
    )
    .write_head(&AckHead {
        sequence: chain.sequence,
        checksum: Sha256Hex::parse(&chain.checksum).unwrap(),
        byte_length: length,
        canonical_through: chain.sequence,
    })
    .unwrap();
}

#[test]
fn deleting_acknowledged_lines_is_detected() {
    // Only line written by our init: deleting it leaves no events.
    let (work, run_id) = Work::with_run();
    rewrite(&work.receipt(&run_id), b"");
    both_refuse(&work, &run_id, 3, "receipt contains no events");

    // Three acknowledged lines: cutting the last one, or the last two, is
    // damage at the first missing sequence.
    let (work, run_id, chain) = three_line_run();
    acknowledge_all(&work, &run_id, &chain);
    work.ok(&work.run_args("verify", &run_id));
    let lines = receipt_lines(&work, &run_id);
    rewrite(&work.receipt(&run_id), &lines[..2].concat());
    both_refuse(
        &work,
        &run_id,
        3,
        &corrupt_at(3, "receipt ends before its acknowledged head (sequence 3)"),
    );
    rewrite(&work.receipt(&run_id), &lines[..1].concat());
    both_refuse(
        &work,
        &run_id,
        3,
        &corrupt_at(2, "receipt ends before its acknowledged head (sequence 3)"),
    );

    // Replacing the acknowledged last line with another validly sealed one.
    rewrite(&work.receipt(&run_id), &lines[..2].concat());
    let mut forged = Chain::of(&work.run_dir(&run_id));
    let mut draft = forged.draft(
        "run_started",
        "approved",
        "running",
        json!([{"kind": "log", "summary": "forged"}]),
    );
    draft.timestamp = "2026-07-14T02:00:00Z".into();
    let forged_line = forged.seal(&draft).line;
    rewrite(
        &work.receipt(&run_id),
        &[lines[..2].concat(), forged_line].concat(),
    );
    both_refuse(
        &work,
        &run_id,
        3,
        &corrupt_at(3, "receipt disagrees with its acknowledged head"),
    );
}

#[test]
fn deleting_unacknowledged_lines_cannot_be_detected() {
    // The limits of decisions.md 16, stated as tests: a hash chain cannot see
    // a cut tail the tool never acknowledged.
    // (a) Fixture 27: the reference's run with its last line deleted passes.
    let (work, run_id) = Work::from_fixture("27-deleted-last-line");
    let out = work.ok(&work.run_args("verify", &run_id));
    assert_eq!(out["sequence"], 11);
    // (b) Lines appended by another writer after our head, then cut.
    let (work, run_id, _) = three_line_run();
    let lines = receipt_lines(&work, &run_id);
    rewrite(&work.receipt(&run_id), &lines[..2].concat());
    let out = work.ok(&work.run_args("verify", &run_id));
    assert_eq!(out["sequence"], 2);
}

// --------------------------------------------------- rebuild writes nothing

#[test]
fn rebuild_on_a_damaged_receipt_writes_no_cache() {
    type Damage = Box<dyn Fn(&Work, &str)>;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "flip",
            Box::new(|w, r| {
                let mut b = std::fs::read(w.receipt(r)).unwrap();
                let n = b.len();
                b[n / 2] ^= 1;
                rewrite(&w.receipt(r), &b);
            }),
        ),
        (
            "torn",
            Box::new(|w, r| {
                let b = std::fs::read(w.receipt(r)).unwrap();
                rewrite(&w.receipt(r), &b[..b.len() - 10]);
            }),
        ),
        ("empty", Box::new(|w, r| rewrite(&w.receipt(r), b""))),
        (
            "missing",
            Box::new(|w, r| std::fs::remove_file(w.receipt(r)).unwrap()),
        ),
        (
            "garbage",
            Box::new(|w, r| append(&w.receipt(r), b"garbage\n")),
        ),
        (
            "oversized",
            Box::new(|w, r| append(&w.receipt(r), &vec![b' '; LIMIT + 5])),
        ),
    ];
    for (label, damage) in damages {
        for without_cache in [false, true] {
            let (work, run_id, _) = three_line_run();
            if without_cache {
                std::fs::remove_file(work.run_dir(&run_id).join("run.json")).unwrap();
            }
            damage(&work, &run_id);
            let e = work.refused(&work.run_args("rebuild", &run_id), 3, "receipt_corrupt", "");
            assert!(
                e["message"].as_str().unwrap().starts_with("receipt"),
                "{label}: {e}"
            );
            assert_eq!(
                work.run_dir(&run_id).join("run.json").exists(),
                !without_cache,
                "{label}"
            );
        }
    }
}

// --------------------------------------------------------------- arguments

#[test]
fn argument_errors_are_contract_errors_on_stderr() {
    let (work, run_id) = Work::with_run();
    let root = work.state.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--state-root", &root, "verify"], "--run-id"),
        (vec!["--state-root", &root, "rebuild"], "--run-id"),
        (
            vec!["--state-root", &root, "verify", "--run-id"],
            "--run-id",
        ),
        (vec!["--state-root", &root, "frobnicate"], "frobnicate"),
        (
            vec![
                "--state-root",
                &root,
                "verify",
                "--run-id",
                &run_id,
                "--bogus",
            ],
            "--bogus",
        ),
        (
            vec![
                "--state-root",
                &root,
                "--bogus",
                "verify",
                "--run-id",
                &run_id,
            ],
            "--bogus",
        ),
        (
            vec!["verify", "--state-root", &root, "--run-id", &run_id],
            "--state-root",
        ),
        (vec!["--state-root", &root], "subcommand"),
        (vec!["--state-root", &root, "init"], "required"),
        // A bare invocation prints the usage instead (DEVIATIONS 91,
        // tests/it/defaults.rs).
    ];
    for (args, needle) in cases {
        work.refused(&args, 2, "contract_error", needle);
    }
}

#[test]
fn help_goes_to_stdout_with_exit_0() {
    let work = Work::new();
    for args in [
        vec!["--help"],
        vec!["verify", "--help"],
        vec!["init", "--help"],
        vec!["rebuild", "-h"],
    ] {
        let before = common::snapshot(&work.base);
        let out = work.flow.run(&args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
        assert!(out.stdout.contains("Usage"), "{args:?}: {out:?}");
        assert_unchanged(&before, &common::snapshot(&work.base), "help");
    }
    let out = work.flow.run(&["--help"]);
    assert!(out.stdout.contains("UTC timestamps end in Z."));
    assert!(
        out.stdout
            .contains("Phase 1 supports only verify, rebuild, and receipt-diagnose.")
    );
}

// ------------------------------------------------------------- owner token

#[test]
fn the_owner_token_never_appears_in_any_output() {
    let work = Work::new();
    let mut outputs = Vec::new();
    let init = work.flow.run(&work.init_named("main"));
    outputs.push(init.stdout.clone() + &init.stderr);
    let run_id = init.assert_ok()["run_id"].as_str().unwrap().to_string();
    let handle: Value =
        serde_json::from_slice(&std::fs::read(work.state.join("handles/main.owner")).unwrap())
            .unwrap();
    let token = handle["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 32);
    let calls: Vec<Vec<OsString>> = vec![
        work.run_args("verify", &run_id),
        work.run_args("rebuild", &run_id),
        work.init_named("main"),
        work.init_args(
            &work.state.join("handles/main.owner"),
            "Z",
            &work.repo,
            &["x"],
        ),
        work.run_args("verify", "../escape"),
    ];
    for args in &calls {
        let out = work.flow.run(args);
        outputs.push(out.stdout + &out.stderr);
    }
    // And on a damaged receipt, whose error quotes the failing position.
    append(&work.receipt(&run_id), b"garbage\n");
    for command in ["verify", "rebuild"] {
        let out = work.flow.run(&work.run_args(command, &run_id));
        outputs.push(out.stdout + &out.stderr);
    }
    for text in &outputs {
        assert!(!text.is_empty());
        assert!(!text.contains(&token), "token leaked: {text}");
    }
    // Only the handle file holds it; the receipt and snapshot carry its
    // fingerprint.
    for (path, _) in common::snapshot(&work.state) {
        if path.is_file() && path != work.state.join("handles/main.owner") {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "token stored in {}",
                path.display()
            );
        }
    }
}
