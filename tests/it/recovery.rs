//! Receipt diagnosis and recovery runs through the binary
//! (reference-coordinator §12): every damaged reference fixture diagnosed
//! exactly as the reference recorded, then superseded by a new run that
//! `verify` accepts, its damaged receipt kept byte for byte in quarantine
//! and never touched; the idempotent retry; a damaged first line and a
//! missing receipt recovered (decisions.md 11 and 17); and every refusal —
//! tampered or stale diagnoses, bad owner paths, live locks, odd quarantine
//! files, a failing new run — with the reference's exit status and error
//! code, leaving no quarantine orphan and the state byte-identical.

use crate::bed as common;

use common::{Output, TestBed, bed_type, fixtures_dir};
use serde_json::{Map, Value, json};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

const DAMAGED: [&str; 11] = [
    "20-bitflip-mid",
    "21-torn-last-line",
    "22-deleted-middle-line",
    "23-duplicated-line",
    "24-swapped-lines",
    "25-oversized-line",
    "26-trailing-garbage",
    "27-deleted-last-line",
    "28-padded-line-at-limit",
    "29-bitflip-first-line",
    "30-empty-receipt",
];

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn sha256(bytes: &[u8]) -> String {
    bluetape_flow::receipt::canonical::sha256_hex(bytes)
}

bed_type!(
    /// A state root with one (damaged or healthy) run to recover.
    Bed
);

impl Bed {
    /// A copy of a reference scenario, `_run.repo_root` pinned to a temp
    /// directory (outside the manifest hash, so diagnoses are unchanged).
    fn fixture(name: &str) -> Bed {
        let bed = Bed::with(TestBed::from_fixture(name));
        bed.pin_repo_root(&bed.repo);
        bed
    }

    /// A fresh run made by this tool.
    fn fresh() -> Bed {
        Bed::with(TestBed::planned(&["runtime"]))
    }

    /// An approved run whose receipt has a bit flipped 30 bytes from its end,
    /// and the path of its diagnosis (the `--input` of recovery-run-create).
    fn damaged() -> (Bed, String) {
        let bed = Bed::approved();
        bed.damage(30);
        let input = bed.diagnosis_file();
        (bed, input)
    }

    /// A fresh run with its plan approved: damage near the end hits line 2,
    /// so line 1 (and whether the run is gated) stays trusted.
    fn approved() -> Bed {
        let bed = Bed::fresh();
        bed.cmd(
            "run-approve",
            &common::ev("approved"),
            &["--at", common::T0],
        )
        .assert_ok();
        bed
    }

    fn with(bed: TestBed) -> Bed {
        bed.put(
            "approval.json",
            &crate::bed::user_approval("user approved a recovery run"),
        );
        Bed(bed)
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn pin_repo_root(&self, repo: &Path) {
        let path = self.run_dir().join("manifest.json");
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["_run"]["repo_root"] = json!(text(repo));
        std::fs::write(&path, manifest.to_string()).unwrap();
    }

    /// Flip one bit of the receipt at `offset` from the end.
    fn damage(&self, from_end: usize) {
        let mut bytes = std::fs::read(self.receipt_path()).unwrap();
        let at = bytes.len() - from_end;
        bytes[at] ^= 1;
        std::fs::write(self.receipt_path(), bytes).unwrap();
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.raw(args)
    }

    fn diagnose(&self) -> Output {
        self.cli(&["receipt-diagnose", "--run-id", &self.run_id])
    }

    /// `receipt-diagnose`'s stdout, as a file for `--input`.
    fn diagnosis_file(&self) -> String {
        self.diagnosis_file_named("diagnosis.json")
    }

    fn diagnosis_file_named(&self, name: &str) -> String {
        let out = self.diagnose();
        assert_eq!(out.code, 0, "{out:?}");
        std::fs::write(self.work.join(name), &out.stdout).unwrap();
        text(&self.work.join(name))
    }

    /// Another run in the same state root.
    fn other_run(&self) -> String {
        let out = self.init_another("other.owner", &self.repo);
        out.assert_ok()["run_id"].as_str().unwrap().to_string()
    }

    fn recover_with(&self, input: &str, owner: &str, approval: &str) -> Output {
        self.recovery_run_create(&self.run_id, input, owner, approval, &[])
    }

    /// `recovery-run-create` of `run_id` with the handle `owner` (a path,
    /// or a name under `handles/`) plus `extra`.
    fn recovery_run_create(
        &self,
        run_id: &str,
        input: &str,
        owner: &str,
        approval: &str,
        extra: &[&str],
    ) -> Output {
        let owner = if owner.starts_with('/') {
            owner.to_string()
        } else {
            text(&self.handle(owner))
        };
        let mut argv = vec![
            "recovery-run-create",
            "--run-id",
            run_id,
            "--input",
            input,
            "--owner-file",
            &owner,
            "--evidence",
            approval,
        ];
        argv.extend_from_slice(extra);
        self.cli(&argv)
    }

    fn recover(&self, input: &str) -> Output {
        self.recover_with(input, "recovery.owner", &self.approval())
    }

    /// Write `record` as the run's head record `head` (canonical, no MAC
    /// made for it): verify refuses it naming `rebuild`; the diagnosis,
    /// which must answer.
    #[track_caller]
    fn bad_head_record(&self, head: &Path, record: &Value) -> Value {
        std::fs::write(head, bluetape_flow::receipt::canonical::to_vec(record)).unwrap();
        let e = self.verify(&self.run_id).assert_error(3, "receipt_corrupt");
        assert_eq!(e["message"], "acknowledged receipt head record is invalid");
        assert!(e["hint"].as_str().unwrap().contains("rebuild"), "{e}");
        self.diagnose().assert_ok()
    }

    /// The user approval file a recovery run is created with.
    fn approval(&self) -> String {
        text(&self.work.join("approval.json"))
    }

    fn verify(&self, run_id: &str) -> Output {
        self.cli(&["verify", "--run-id", run_id])
    }

    fn quarantine_files(&self) -> Vec<String> {
        match std::fs::read_dir(self.root.join("quarantine")) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Assert a refusal that changed nothing.
    #[track_caller]
    fn refused(&self, out: impl FnOnce() -> Output, code: i32, message: &str) -> Value {
        common::unchanged(&self.root, || {
            let out = out();
            let e = common::assert_refusal(&out, code);
            common::assert_message(&e, message);
            e
        })
    }
}

fn parse(out: &str) -> Map<String, Value> {
    serde_json::from_str::<Value>(out)
        .unwrap()
        .as_object()
        .cloned()
        .unwrap()
}

/// What the reference printed for a step of a scenario's expected.json.
fn recorded(scenario: &str, run_id: &str, command: &str) -> Value {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures_dir().join(scenario).join("expected.json")).unwrap(),
    )
    .unwrap();
    expected["runs"][run_id][command].clone()
}

#[test]
fn every_damaged_fixture_is_diagnosed_as_recorded_and_recovered() {
    for scenario in DAMAGED {
        let bed = Bed::fixture(scenario);
        let damaged_bytes = std::fs::read(bed.receipt_path()).unwrap();

        // receipt-diagnose: exactly the reference's output, and read-only.
        let what = format!("{scenario}: receipt-diagnose");
        let out = common::read_only(&bed.root, what, || bed.diagnose());
        let want = recorded(scenario, &bed.run_id, "receipt-diagnose");
        assert_eq!(out.code, 0, "{scenario}: {out:?}");
        assert_eq!(
            out.stdout.replace(&text(&bed.root), "{STATE}"),
            want["stdout"].as_str().unwrap(),
            "{scenario}"
        );
        let diagnosis = parse(&out.stdout);
        let input = bed.diagnosis_file();

        if diagnosis["effective_state"] != "blocked" {
            // 27 and 28 verify: there is nothing to recover.
            bed.refused(
                || bed.recover(&input),
                2,
                "recovery run requires a blocked receipt diagnosis",
            );
            continue;
        }

        if diagnosis["last_trusted_sequence"] == 0 {
            // 29 and 30: no event is trusted, so whether the run had a gate
            // can be neither read nor proven absent (trust-model §2
            // promise 5): refused, naming the command that goes on.
            refused_naming_init(&bed, &input);
            continue;
        }
        let out = bed.recover(&input).assert_ok();
        crate::bed::assert_keys(
            &out,
            "diagnosis_checksum new_run_id ok operation owner_epoch owner_file quarantine_hash quarantine_path state_root",
            scenario,
        );
        let hash = sha256(&damaged_bytes);
        let quarantine = format!("quarantine/{}-{hash}.receipt.jsonl", bed.run_id);
        assert_eq!(out["quarantine_path"], quarantine.as_str());
        assert_eq!(out["quarantine_hash"], hash.as_str());
        assert_eq!(out["diagnosis_checksum"], diagnosis["diagnosis_checksum"]);
        assert_eq!(out["owner_epoch"], 1);
        assert_eq!(
            out["owner_file"],
            text(&bed.handle("recovery.owner")).as_str()
        );
        // Where the reference recovered too, it printed the same answer
        // (but for the new run's id and the state root).
        let reference: Value = serde_json::from_str::<Value>(
            &std::fs::read_to_string(fixtures_dir().join(scenario).join("expected.json")).unwrap(),
        )
        .unwrap()["recovery-run-create"]
            .clone();
        assert_eq!(reference["exit_status"], 0, "{scenario}");
        {
            let mut theirs = parse(reference["stdout"].as_str().unwrap());
            let mut ours = out.as_object().cloned().unwrap();
            for key in ["new_run_id", "owner_file", "state_root"] {
                theirs.remove(key);
                ours.remove(key);
            }
            assert_eq!(ours, theirs, "{scenario}");
        }

        // The damaged receipt is untouched; its copy is exact and 0600.
        assert_eq!(std::fs::read(bed.receipt_path()).unwrap(), damaged_bytes);
        let copy = bed.root.join(&quarantine);
        assert_eq!(std::fs::read(&copy).unwrap(), damaged_bytes, "{scenario}");
        assert_eq!(std::fs::metadata(&copy).unwrap().mode() & 0o7777, 0o600);

        // The new run: independent, planned, epoch 1, verified; its first
        // event carries the approval and the provenance.
        let new_run = out["new_run_id"].as_str().unwrap();
        assert_ne!(new_run, bed.run_id);
        let verified = bed.verify(new_run).assert_ok();
        assert_eq!(verified["event_count"], 1, "{scenario}");
        let first: Value = serde_json::from_str(
            std::fs::read_to_string(bed.root.join("runs").join(new_run).join("receipt.jsonl"))
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(first["event_type"], "run_created");
        assert_eq!(first["to_state"], "planned");
        let evidence = first["evidence_refs"].as_array().unwrap().clone();
        assert_eq!(
            evidence,
            [json!({"kind": "user_approval", "summary": "user approved a recovery run"})]
        );
        assert_eq!(
            first["metadata"],
            json!({
                "owner_epoch": 1,
                "recovery_original_run_id": bed.run_id,
                "recovery_diagnose_checksum": diagnosis["diagnosis_checksum"],
                "recovery_manifest_version": diagnosis["manifest_version"],
                "recovery_manifest_hash": diagnosis["manifest_hash"],
                "recovery_quarantine_path": quarantine,
                "recovery_quarantine_hash": hash,
                "recovery_first_bad_sequence": diagnosis["first_bad_sequence"],
                "recovery_trusted_sequence": diagnosis["last_trusted_sequence"],
                "recovery_trusted_checksum": diagnosis["last_trusted_checksum"],
            }),
            "{scenario}"
        );
        let check = bed.cli(&["resume-check", "--run-id", new_run]).assert_ok();
        assert_eq!(check["run_state"], "planned");
        assert_eq!(check["owner_epoch"], 1);
        let handle = bed.handle("recovery.owner");
        assert_eq!(std::fs::metadata(&handle).unwrap().mode() & 0o7777, 0o600);
        // The damaged run is still diagnosed the same way.
        assert_eq!(
            bed.diagnose().stdout.replace(&text(&bed.root), "{STATE}"),
            want["stdout"].as_str().unwrap()
        );

        // A retry with the same owner file returns the same run and
        // changes nothing.
        let before = common::snapshot(&bed.root);
        let again = bed.recover(&input).assert_ok();
        assert_eq!(again, out, "{scenario}");
        assert_eq!(
            before,
            common::snapshot(&bed.root),
            "{scenario}: retry wrote"
        );

        // The new run is a run like any other: its owner approves it (and,
        // under the gate named for a line-1 recovery, its approver).
        let approval = bed.approval();
        let argv = [
            "--state-root".to_string(),
            text(&bed.root),
            "run-approve".into(),
            "--run-id".into(),
            new_run.into(),
            "--owner-file".into(),
            text(&handle),
            "--evidence".into(),
            approval,
        ];
        bed.flow
            .run_env(&argv, &[("BLUETAPE_APPROVED_BY", "recovery-approver")])
            .assert_ok();
        bed.verify(new_run).assert_ok();
    }
}

#[test]
fn the_reference_recovery_run_is_recognised_on_retry() {
    // 20-bitflip-mid/recovery: the reference's recovery run exists; our
    // retry with its owner file returns it, exactly as the reference did.
    let scenario = fixtures_dir().join("20-bitflip-mid/recovery");
    let bed = Bed::fixture("20-bitflip-mid/recovery");
    // Pin every run's repo root the same way (workflow, repo and
    // components must match between the two runs).
    for entry in std::fs::read_dir(bed.root.join("runs")).unwrap().flatten() {
        let path = entry.path().join("manifest.json");
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["_run"]["repo_root"] = json!(text(&bed.repo));
        std::fs::write(&path, manifest.to_string()).unwrap();
    }
    let steps = common::recorded_steps(&scenario);
    let repeat = steps
        .iter()
        .rfind(|s| s["kind"] == "cli" && s["argv"][2] == "recovery-run-create")
        .unwrap();
    assert_eq!(repeat["exit_status"], 0);
    common::assert_replays_read_only(&bed.flow, &bed.root, &scenario, repeat);
}

/// A recovery with no trusted event is refused (exit 3, nothing written)
/// and names `init`, the way on (DEVIATIONS 29, 46).
fn refused_naming_init(bed: &Bed, input: &str) {
    let e = bed.refused(
        || bed.recover(input),
        3,
        "the damaged run's first line cannot be trusted, so whether it had an approval gate can be neither read nor proven absent: a recovery run could lose it",
    );
    assert_eq!(e["fields"]["next_command"], "init", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("bluetape-flow init"),
        "{e}"
    );
}

#[test]
fn a_missing_receipt_is_diagnosed_damaged_and_refused_naming_init() {
    // decisions.md 17: the reference exits 2 and leaves no way forward; we
    // diagnose it and name the way on (a new run: nothing is trusted).
    let bed = Bed::fresh();
    std::fs::remove_file(bed.receipt_path()).unwrap();
    let input = bed.diagnosis_file();
    let diagnosis = parse(&std::fs::read_to_string(&input).unwrap());
    assert_eq!(diagnosis["effective_state"], "blocked");
    assert_eq!(diagnosis["first_bad_sequence"], 1);
    assert_eq!(diagnosis["last_trusted_sequence"], 0);
    assert_eq!(diagnosis["last_trusted_checksum"], "");
    assert_eq!(diagnosis["receipt_size"], 0);
    refused_naming_init(&bed, &input);
    assert!(bed.quarantine_files().is_empty());
}

#[test]
fn a_diagnosis_must_be_the_current_one_untampered() {
    let bed = Bed::approved();
    let other = bed.other_run();
    bed.damage(30);
    let input = bed.diagnosis_file();
    let diagnosis = parse(&std::fs::read_to_string(&input).unwrap());

    // A changed value under the original checksum.
    let mut tampered = diagnosis.clone();
    tampered.insert("first_bad_sequence".into(), json!(3));
    let file = bed.put("tampered.json", &Value::Object(tampered.clone()));
    bed.refused(
        || bed.recover(&file),
        2,
        "receipt diagnosis checksum does not match",
    );
    // Swapped values with a recomputed checksum: well-formed, but not what
    // the run looks like now.
    let mut swapped = diagnosis.clone();
    swapped.insert("first_bad_sequence".into(), json!(0));
    swapped.insert("last_trusted_sequence".into(), json!(1));
    swapped.remove("diagnosis_checksum");
    let file = bed.put("swapped.json", &Value::Object(swapped));
    let e = bed.refused(
        || bed.recover(&file),
        5,
        "damaged run changed after receipt diagnosis",
    );
    common::assert_taught(&e, json!({"changed": ["first_bad_sequence"]}), |hint| {
        hint.contains(&format!("receipt-diagnose --run-id {}", bed.run_id))
    });
    // Another run's diagnosis (healthy): refused before anything else.
    let out = bed.cli(&["receipt-diagnose", "--run-id", &other]);
    let file = bed.put("other.json", &out.json());
    bed.refused(
        || bed.recover(&file),
        2,
        "recovery run requires a blocked receipt diagnosis",
    );
    // Another damaged run's diagnosis names that run.
    let mut foreign = diagnosis.clone();
    foreign.insert("run_id".into(), json!(other));
    foreign.remove("diagnosis_checksum");
    let file = bed.put("foreign.json", &Value::Object(foreign));
    bed.refused(
        || bed.recover(&file),
        5,
        "damaged run changed after receipt diagnosis",
    );
    // The receipt changed after the diagnosis.
    let original = std::fs::read(bed.receipt_path()).unwrap();
    bed.damage(40);
    bed.refused(
        || bed.recover(&input),
        5,
        "damaged run changed after receipt diagnosis",
    );
    std::fs::write(bed.receipt_path(), &original).unwrap();
    // Approval evidence: present, non-empty, valid.
    let empty = bed.put("empty.json", &json!([]));
    bed.refused(
        || bed.recover_with(&input, "recovery.owner", &empty),
        2,
        "lifecycle transition requires evidence",
    );
    let bad = bed.put("bad.json", &json!([{"kind": "", "summary": "x"}]));
    bed.refused(
        || bed.recover_with(&input, "recovery.owner", &bad),
        2,
        "evidence kind must be a bounded non-empty string",
    );
    assert!(bed.quarantine_files().is_empty());

    // The same diagnosis with its keys in another order is the same object.
    let mut reordered = String::from("{");
    let entries: Vec<(&String, &Value)> = diagnosis.iter().rev().collect();
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            reordered.push_str(", ");
        }
        reordered.push_str(&format!("{}: {}", json!(key), value));
    }
    reordered.push('}');
    std::fs::write(bed.work.join("reordered.json"), reordered).unwrap();
    let out = bed
        .recover(&text(&bed.work.join("reordered.json")))
        .assert_ok();
    assert_eq!(out["diagnosis_checksum"], diagnosis["diagnosis_checksum"]);
}

#[test]
fn owner_paths_and_locks_are_checked() {
    let (bed, input) = Bed::damaged();
    let approval = bed.approval();
    let outside = text(&bed.work.join("recovery.owner"));
    bed.refused(
        || bed.recover_with(&input, &outside, &approval),
        2,
        "owner handle must be a direct child of state-root handles",
    );
    std::os::unix::fs::symlink(bed.work.join("nowhere"), bed.handle("link.owner")).unwrap();
    bed.refused(
        || bed.recover_with(&input, "link.owner", &approval),
        2,
        "owner handle already exists",
    );
    // A live process holds the recovery lock.
    let lock = bed
        .root
        .join("locks")
        .join(format!("recovery-{}", bed.run_id));
    std::fs::create_dir(&lock).unwrap();
    std::fs::write(
        lock.join("owner.json"),
        format!("{{\"pid\":{},\"token\":\"t\"}}\n", std::process::id()),
    )
    .unwrap();
    common::set_modes(&bed.root);
    bed.refused(
        || bed.recover(&input),
        5,
        "state lock owner is live or unknown",
    );
    std::fs::remove_dir_all(&lock).unwrap();
    // A live process holds the damaged run's receipt lock: diagnosed after
    // it was taken, the diagnosis says so and recovery waits for it (the
    // reference would copy a receipt that may still be written).
    let receipt_lock = common::hold_receipt_lock(&bed.root, &bed.run_dir());
    bed.refused(
        || bed.recover(&input),
        5,
        "damaged run changed after receipt diagnosis",
    );
    let locked = bed.diagnosis_file_named("locked.json");
    assert_eq!(
        parse(&std::fs::read_to_string(&locked).unwrap())["lock_owner_status"],
        "locked_alive"
    );
    let e = bed.refused(
        || bed.recover(&locked),
        5,
        "damaged run receipt lock is held by a live process",
    );
    common::assert_taught(&e, json!({"lock_owner_status": "locked_alive"}), |hint| {
        hint.contains("live process")
    });
    std::fs::remove_dir_all(&receipt_lock).unwrap();
    assert!(bed.quarantine_files().is_empty());
    bed.recover(&input).assert_ok();
}

#[test]
fn quarantine_files_are_never_replaced_and_never_orphaned() {
    let (bed, input) = Bed::damaged();
    let diagnosis = parse(&std::fs::read_to_string(&input).unwrap());
    let name = format!(
        "{}-{}.receipt.jsonl",
        bed.run_id,
        diagnosis["receipt_hash"].as_str().unwrap()
    );
    let quarantine = bed.root.join("quarantine").join(&name);

    // Another file under the quarantine name is kept, and refused.
    std::fs::write(&quarantine, b"something else\n").unwrap();
    common::set_modes(&bed.root);
    let e = bed.refused(
        || bed.recover(&input),
        5,
        "existing quarantine receipt does not match",
    );
    common::assert_taught(&e, json!({"quarantine": name}), |hint| {
        hint.contains(&format!("quarantine/{name} holds other bytes"))
    });
    std::fs::set_permissions(&quarantine, std::fs::Permissions::from_mode(0o644)).unwrap();
    bed.refused(
        || bed.recover(&input),
        2,
        "quarantine receipt does not have the required secure mode",
    );
    std::fs::remove_file(&quarantine).unwrap();

    // The new run cannot be created (its repo root is gone): no run, no
    // handle and no quarantine copy are left (decisions.md 11).
    bed.pin_repo_root(&bed.work.join("gone"));
    let before = common::snapshot(&bed.root);
    let out = bed.recover(&input);
    let e = out.assert_error(2, "contract_error");
    assert!(
        e["message"].as_str().unwrap().contains("No such file"),
        "{e}"
    );
    assert_eq!(before, common::snapshot(&bed.root));
    assert!(bed.quarantine_files().is_empty());
    bed.pin_repo_root(&bed.repo);

    // The owner file names another run: not this recovery (a healthy
    // run's provenance differs; the damaged run does not even verify). The
    // copy made for the attempt is removed again.
    bed.other_run();
    let approval = bed.approval();
    bed.refused(
        || bed.recover_with(&input, "other.owner", &approval),
        5,
        "existing recovery run provenance does not match",
    );
    let e = bed.refused(
        || bed.recover_with(&input, "main.owner", &approval),
        5,
        "existing recovery run is invalid",
    );
    common::assert_taught(
        &e,
        json!({"input": "--owner-file", "recovery_run_id": bed.run_id}),
        |hint| hint.contains("name a new handle"),
    );
    assert!(bed.quarantine_files().is_empty());

    // A successful recovery; a retry with other approval evidence is not
    // the same recovery, and the existing copy stays.
    let out = bed.recover(&input).assert_ok();
    let other = bed.put(
        "other-approval.json",
        &crate::bed::user_approval("someone else"),
    );
    bed.refused(
        || bed.recover_with(&input, "recovery.owner", &other),
        5,
        "existing recovery run provenance does not match",
    );
    assert_eq!(bed.quarantine_files(), [name]);
    bed.verify(out["new_run_id"].as_str().unwrap()).assert_ok();
}

#[test]
fn unknown_runs_and_bad_inputs_are_refused_first() {
    let (bed, input) = Bed::damaged();
    let approval = bed.approval();
    let unknown = "20990101T000000Z-00000000";
    let out = bed.recovery_run_create(unknown, &input, "recovery.owner", &approval, &[]);
    out.assert_error(3, "receipt_corrupt");
    let list = bed.put("list.json", &json!([]));
    bed.refused(
        || bed.recover(&list),
        2,
        "JSON input has the wrong top-level type",
    );
    let missing = text(&bed.work.join("missing.json"));
    let before = common::snapshot(&bed.root);
    bed.recover(&missing).assert_error(2, "contract_error");
    assert_eq!(before, common::snapshot(&bed.root));
    // recovery-run-create takes no --expected-head.
    let before = common::snapshot(&bed.root);
    let head = ["--expected-head", &"0".repeat(64)];
    let out = bed.recovery_run_create(&bed.run_id, &input, "recovery.owner", &approval, &head);
    out.assert_error(2, "contract_error");
    assert_eq!(before, common::snapshot(&bed.root));
}

#[test]
fn a_phase1_run_is_diagnosed_but_not_recovered_or_handed_over() {
    // The phase gate (exit 7) comes first for every command of this family;
    // receipt-diagnose works on Phase 1 runs too.
    let bed = Bed::fresh();
    let mut manifest = common::phase1_manifest();
    let hash = bluetape_flow::receipt::canonical::digest(&manifest);
    manifest["_run"] = json!({"component_ids": ["runtime"], "manifest_hash": hash,
                              "owner_token": "legacy", "repo_root": text(&bed.repo),
                              "workflow_type": "A"});
    std::fs::write(bed.run_dir().join("manifest.json"), manifest.to_string()).unwrap();
    let input = bed.diagnosis_file();
    assert_eq!(
        parse(&std::fs::read_to_string(&input).unwrap())["manifest_version"],
        "1.0.0"
    );
    let owner = bed.handle("main.owner");
    let approval = bed.approval();
    let new_owner = bed.handle("n.owner");
    let new_owner_file = text(&new_owner);
    let input_and_approval = vec!["--input", &input, "--evidence", &approval];
    let cases: Vec<(&str, &Path, Vec<&str>)> = vec![
        ("recovery-run-create", &new_owner, input_and_approval),
        (
            "resume",
            &owner,
            vec!["--evidence", &approval, "--new-owner-file", &new_owner_file],
        ),
        ("handoff-create", &owner, vec!["--input", &input]),
        ("live-report-create", &owner, vec!["--input", &input]),
    ];
    for (command, owner, rest) in cases {
        let argv = common::mutation_argv(&bed.root, command, &bed.run_id, owner, &rest);
        let out = common::read_only(&bed.root, command, || bed.flow.run(&argv));
        let e = out.assert_error(7, "unsupported_by_run_manifest");
        assert_eq!(e["next_command"], "init", "{argv:?}");
    }
}

/// trust-model §2 promise 9 (DEVIATIONS 104): `"sequence": 0` in the head
/// record of an intact run names no head. Every command used to say
/// "corruption at sequence 0", `recovery-run-create` refused the
/// diagnosis's own answer and `doctor` listed nothing. Now: the refusal
/// names the way out, the diagnosis judges the receipt without the record
/// and names `rebuild`, recovery refuses by naming `rebuild` (nothing
/// written), `doctor` lists the record with that remedy, and `rebuild`
/// rewrites it, after which everything verifies and nothing is listed.
/// The head record carries its own MAC (trust-model §2 promise 1): one
/// rewritten without `derived.key` to claim more than the receipt holds
/// is a damaged cache of ours with `rebuild` as its way out, not receipt
/// damage sending the run to recovery; the same claim re-MACed with the key
/// is what it says (the receipt then ends before an acknowledged head).
#[test]
fn a_head_record_forged_without_the_key_is_a_damaged_cache_not_receipt_damage() {
    let bed = Bed::fresh();
    let head = bed.run_dir().join("receipt-head.json");
    let genuine = std::fs::read(&head).unwrap();
    assert_eq!(genuine.len(), 512, "one sector, rewritten in place");
    let mut record: Value = serde_json::from_slice(&genuine).unwrap();
    assert!(record["mac"].is_string(), "{record}");
    record["sequence"] = json!(record["sequence"].as_u64().unwrap() + 5);
    record["byte_length"] = json!(record["byte_length"].as_u64().unwrap() + 7000);
    let diagnosis = bed.bad_head_record(&head, &record);
    assert_eq!(diagnosis["next_command"], "rebuild", "{diagnosis}");
    // Re-MACed with the key, the claim stands and the receipt is short.
    let key = crate::bed::forge::key(bed.run_dir().parent().unwrap().parent().unwrap());
    record.as_object_mut().unwrap().remove("mac");
    record["mac"] = json!(crate::bed::forge::mac(&key, &record));
    std::fs::write(&head, bluetape_flow::receipt::canonical::to_vec(&record)).unwrap();
    let e = bed.verify(&bed.run_id).assert_error(3, "receipt_corrupt");
    assert_ne!(
        e["message"], "acknowledged receipt head record is invalid",
        "{e}"
    );
    // `rebuild` answers the forged record without the key, not this one.
    std::fs::write(&head, &genuine).unwrap();
    bed.verify(&bed.run_id).assert_ok();
}

#[test]
fn a_head_record_naming_sequence_zero_is_rebuilt_not_a_dead_end() {
    let bed = Bed::fresh();
    let head = bed.run_dir().join("receipt-head.json");
    let genuine = std::fs::read(&head).unwrap();
    let mut record: Value = serde_json::from_slice(&genuine).unwrap();
    record["sequence"] = json!(0);
    let diagnosis = bed.bad_head_record(&head, &record);
    assert_eq!(diagnosis["effective_state"], "planned", "{diagnosis}");
    assert_eq!(diagnosis["last_trusted_sequence"], 1);
    assert_eq!(diagnosis["next_command"], "rebuild");
    assert!(diagnosis["head_record_finding"].is_string());
    let input = bed.diagnosis_file();
    let e = bed.refused(
        || bed.recover(&input),
        2,
        "recovery run requires a blocked receipt diagnosis: the receipt verifies; only its head record receipt-head.json (ours, derived) names no head",
    );
    assert_eq!(e["fields"]["next_command"], "rebuild");
    let doctor = bed.cli(&["doctor"]).assert_ok();
    assert_eq!(doctor["count"], 1, "{doctor}");
    assert_eq!(doctor["litter"][0]["kind"], "damaged_head_record");
    assert!(
        crate::bed::str_field(&doctor["litter"][0], "remedy")
            .contains(&format!("rebuild --run-id {}", bed.run_id)),
        "{doctor}"
    );
    bed.cli(&["rebuild", "--run-id", &bed.run_id]).assert_ok();
    assert_eq!(
        std::fs::read(&head).unwrap(),
        genuine,
        "the record as init wrote it"
    );
    bed.verify(&bed.run_id).assert_ok();
    assert_eq!(bed.cli(&["doctor"]).assert_ok()["count"], 0);
    assert!(
        bed.diagnose()
            .assert_ok()
            .get("head_record_finding")
            .is_none()
    );
}

/// The `--input` type of recovery-run-create (its help table and schema)
/// is what receipt-diagnose prints for a damaged run: every key printed is
/// one of its keys, every key it requires is printed, and the printed
/// values satisfy its leaf rules — a damaged head record's finding too.
#[test]
fn the_diagnosis_input_type_is_what_receipt_diagnose_prints() {
    use bluetape_flow::surface::registry::input_schema;
    let schema = input_schema("recovery-run-create", "input").unwrap();
    let properties = schema["properties"].as_object().unwrap();
    let mut diagnoses: Vec<Map<String, Value>> = DAMAGED
        .iter()
        .map(|scenario| parse(&Bed::fixture(scenario).diagnose().stdout))
        .filter(|d| d["effective_state"] == "blocked")
        .collect();
    assert!(diagnoses.len() >= 8, "{}", diagnoses.len());
    // A damaged receipt under a head record that cannot be read.
    let bed = Bed::fixture(DAMAGED[0]);
    std::fs::write(bed.run_dir().join("receipt-head.json"), b"{").unwrap();
    let finding = parse(&bed.diagnose().stdout);
    assert!(finding["head_record_finding"].is_string(), "{finding:?}");
    diagnoses.push(finding);
    for diagnosis in diagnoses {
        for (key, value) in &diagnosis {
            let property = properties.get(key).unwrap_or_else(|| panic!("{key}"));
            let rule = &property["pattern"];
            if let (Some(pattern), Some(text)) = (rule.as_str(), value.as_str()) {
                let matches = fancy_regex::Regex::new(pattern).unwrap().is_match(text);
                assert!(matches.unwrap(), "{key}: {text}");
            }
        }
        for key in schema["required"].as_array().unwrap() {
            assert!(diagnosis.contains_key(key.as_str().unwrap()), "{key}");
        }
    }
}
