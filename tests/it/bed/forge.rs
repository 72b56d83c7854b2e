//! Forging derived files the way a party holding `derived.key` can (same
//! uid, same state root): edit `checkpoint.json` and re-MAC it, so that
//! every check that rests on the key alone passes (trust-model §1: such a
//! writer can produce any byte, validly MACed).
#![allow(dead_code)]

use hmac::Mac;
use serde_json::{Value, json};
use std::path::Path;

use bluetape_flow::receipt::canonical;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The state root's derived-file key (what any same-uid reader can get).
pub fn key(root: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(root.join("derived.key")).unwrap();
    hex::decode(text.trim_end()).unwrap()
}

/// HMAC-SHA256 (hex) of the canonical `value` under `key`.
pub fn mac(key: &[u8], value: &Value) -> String {
    let mut mac = HmacSha256::new_from_slice(key).unwrap();
    mac.update(&canonical::to_vec(value));
    hex::encode(mac.finalize().into_bytes())
}

/// Write `value` to `path` as canonical JSON + LF with a fresh `mac` key
/// over the rest (what our binary writes for an authenticated file).
pub fn write_macced(root: &Path, path: &Path, mut value: Value) {
    if let Some(map) = value.as_object_mut() {
        map.remove("mac");
    }
    let tag = mac(&key(root), &value);
    value["mac"] = json!(tag);
    let mut bytes = canonical::to_vec(&value);
    bytes.push(b'\n');
    std::fs::write(path, bytes).unwrap();
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Edit `runs/<id>/checkpoint.json`, recompute its unkeyed `state_digest`
/// and re-MAC it with the state root's key.
pub fn remac_checkpoint(root: &Path, run_dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = run_dir.join("checkpoint.json");
    let mut checkpoint = read_json(&path);
    edit(&mut checkpoint);
    checkpoint["state_digest"] = json!(canonical::digest(&checkpoint["state"]));
    write_macced(root, &path, checkpoint);
}

/// A checkpoint whose replayed content (the state and what replay adds,
/// with each lane's source line) is `older`'s, bound to the receipt and to
/// the digest files as `current` is: the most consistent stale checkpoint
/// a key holder can make (head, stamps, tail and digest counts current).
pub fn stale_checkpoint(older: &Value, current: &Value) -> Value {
    let mut forged = current.clone();
    for key in ["state", "ours"] {
        forged[key] = older[key].clone();
    }
    // The state must name the current head to be loaded at all.
    for key in ["last_sequence", "last_checksum"] {
        forged["state"][key] = current["state"][key].clone();
    }
    forged["state_digest"] = json!(canonical::digest(&forged["state"]));
    forged
}

/// Zero the slots of `checkpoint-digests.idx` (after its 4096-byte
/// header, up to the log that follows them).
pub fn zero_digest_slots(run_dir: &Path) {
    zero_digest_bytes(run_dir, |bytes| 4096..digest_log_start(bytes));
}

/// Zero the log of `checkpoint-digests.idx` (after the table), its length
/// kept.
pub fn zero_digest_log(run_dir: &Path) {
    zero_digest_bytes(run_dir, |bytes| digest_log_start(bytes)..bytes.len());
}

/// Where the table ends: 4096 + 32 bytes per slot, the slot count a
/// little-endian word at offset 8 of the header.
fn digest_log_start(bytes: &[u8]) -> usize {
    let slots = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    4096 + 32 * slots as usize
}

fn zero_digest_bytes(run_dir: &Path, range: impl Fn(&[u8]) -> std::ops::Range<usize>) {
    let path = run_dir.join("checkpoint-digests.idx");
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 4096, "the table has slots");
    let range = range(&bytes);
    bytes[range].fill(0);
    std::fs::write(&path, bytes).unwrap();
}

/// What every auditor command answers about `run_id` (exit status and
/// output, the report page's bytes included): two state roots whose
/// receipts are equal must give equal answers, whatever their derived
/// files say (trust-model §2 promise 1).
pub fn auditor_answers(
    flow: &crate::bed::Flow,
    root: &Path,
    run_id: &str,
    out_dir: &Path,
) -> Vec<(String, i32, String)> {
    let root_text = root.to_string_lossy().into_owned();
    let page = out_dir.join("auditor-report.html");
    let page_text = page.to_string_lossy().into_owned();
    let at = "2026-07-14T01:03:00Z";
    let commands: Vec<Vec<&str>> = vec![
        vec!["verify", "--run-id", run_id],
        vec!["completion-check", "--run-id", run_id],
        vec!["status", "--run-id", run_id, "--at", at],
        vec!["status", "--at", at],
        vec!["log", "--run-id", run_id],
        vec!["approvals", "--run-id", run_id],
        vec![
            "report", "--run-id", run_id, "--at", at, "--out", &page_text, "--force",
        ],
    ];
    let mut answers = Vec::new();
    for argv in commands {
        let mut all = vec!["--state-root", root_text.as_str()];
        all.extend_from_slice(&argv);
        let out = flow.run(&all);
        let mut text = format!("{}\n{}", out.stdout, out.stderr);
        if argv[0] == "report" {
            text.push_str(&std::fs::read_to_string(&page).unwrap_or_default());
        }
        answers.push((argv.join(" "), out.code, text.replace(&root_text, "<root>")));
    }
    answers
}

/// Assert two lists of [`auditor_answers`] are equal, naming the first
/// command that differs (the outputs are long).
#[track_caller]
pub fn assert_same_answers(
    got: &[(String, i32, String)],
    expected: &[(String, i32, String)],
    what: &str,
) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!(
            g == e,
            "{what}: `{}` answers differently:\n got {} {}\n expected {} {}",
            e.0,
            g.1,
            g.2,
            e.1,
            e.2
        );
    }
}
