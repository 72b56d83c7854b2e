//! `handoff-create` and `live-report-create` through the binary
//! (reference-coordinator §13): the report's canonical bytes in a 0600 file
//! under `reports/`, its SHA-256 and the pre-event receipt head bound in
//! the receipt; the reference's own reports reproduced byte for byte; the
//! idempotent repeat; and every refusal (a smuggled token first among them)
//! with the reference's exit status and error code, state byte-identical.

use crate::bed as common;

use bluetape_flow::receipt::canonical;
use common::{Output, TestBed, bed_type, fixtures_dir, with};
use serde_json::{Value, json};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

bed_type!(Bed);

impl Bed {
    /// A fresh running run.
    fn running() -> Bed {
        let bed = Bed::with(TestBed::planned(&["runtime"]));
        for command in ["run-approve", "run-start"] {
            bed.mutation(
                command,
                "main.owner",
                &["--evidence", &bed.work_file("ev.json")],
            )
            .assert_ok();
        }
        bed
    }

    /// A reference scenario with its receipt cut to the first `lines`
    /// lines and its reports removed: the state just before the report.
    fn fixture_before(name: &str, lines: usize) -> Bed {
        let bed = Bed::with(TestBed::from_fixture(name));
        bed.truncate(lines);
        for entry in std::fs::read_dir(bed.root.join("reports"))
            .unwrap()
            .flatten()
        {
            std::fs::remove_file(entry.path()).unwrap();
        }
        bed
    }

    fn with(bed: TestBed) -> Bed {
        bed.put("ev.json", &crate::bed::user_approval("ok"));
        Bed(bed)
    }

    fn head(&self) -> String {
        self.last_event()["checksum"].as_str().unwrap().to_string()
    }

    /// The current owner epoch (a `run_resumed` event carries the old one).
    fn epoch(&self) -> u64 {
        let out = self.flow.run(&crate::bed::read_argv(
            &self.root,
            "resume-check",
            &self.run_id,
            &[],
        ));
        out.assert_ok()["owner_epoch"].as_u64().unwrap()
    }

    fn manifest_hash(&self) -> String {
        self.last_event()["manifest_hash"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn report(&self, command: &str, payload: &Value, rest: &[&str]) -> Output {
        let input = self.put("report.json", payload);
        let mut argv = vec!["--input", &input];
        argv.extend_from_slice(rest);
        self.mutation(command, "main.owner", &argv)
    }

    fn handoff(&self) -> Value {
        json!({
            "canonical_sha": "a".repeat(64), "agents_hash": "b".repeat(64),
            "skill_hash": "c".repeat(64), "manifest_hash": self.manifest_hash(),
            "run_id": self.run_id, "owner_epoch": self.epoch(),
            "receipt_head": self.head(), "target_hashes": {"src/lib.rs": "d".repeat(64)},
        })
    }

    /// Assert a refusal that changed nothing.
    #[track_caller]
    fn refused(&self, out: impl FnOnce() -> Output, code: i32, message: &str) -> Value {
        let before = common::snapshot(&self.root);
        let e = common::assert_conflict_or_contract(&out(), code, message);
        assert_eq!(before, common::snapshot(&self.root), "a refusal wrote");
        e
    }

    /// The recorded CLI steps of the scenario.
    fn steps(&self) -> Vec<Value> {
        let scenario = self.scenario.as_ref().unwrap();
        common::recorded_steps(scenario)
            .into_iter()
            .filter(|s| s["kind"] == "cli")
            .collect()
    }

    fn replay(&self, step: &Value) -> Output {
        let argv = common::expand_argv(
            step["argv"].as_array().unwrap(),
            &self.root,
            self.scenario.as_ref().unwrap(),
        );
        self.flow.run(&argv)
    }
}

#[test]
fn a_handoff_binds_its_file_and_the_pre_event_head() {
    let bed = Bed::running();
    let head = bed.head();
    let payload = bed.handoff();
    let out = bed.report("handoff-create", &payload, &[]).assert_ok();
    crate::bed::assert_answer(
        &out,
        "checksum ok operation report_checksum report_path report_receipt_head run_id run_state sequence state_root",
        json!({"report_receipt_head": head, "sequence": 4}),
        "handoff-create",
    );
    // The file: canonical payload + LF, 0600, named by its checksum.
    let mut bytes = canonical::to_vec(&payload);
    bytes.push(b'\n');
    let checksum = canonical::sha256_hex(&bytes);
    assert_eq!(out["report_checksum"], checksum.as_str());
    let relative = format!(
        "reports/{}-fresh_session_handoff-{}.json",
        bed.run_id,
        &checksum[..16]
    );
    assert_eq!(out["report_path"], relative.as_str());
    let path = bed.root.join(&relative);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
    // The binding: checksum and pre-event head in the receipt.
    let event = bed.last_event();
    assert_eq!(event["event_type"], "handoff_recorded");
    assert_eq!(event["previous_checksum"], head.as_str());
    assert_eq!(event["checksum"], out["checksum"]);
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "report_kind": "fresh_session_handoff",
               "report_path": relative, "report_checksum": checksum,
               "report_receipt_head": head})
    );
    assert_eq!(
        event["evidence_refs"],
        json!([{"kind": "report", "summary": "immutable report bound to receipt head",
                "checksum": checksum}])
    );
    for key in ["lane_id", "agent_id", "from_state", "to_state", "reason"] {
        assert!(event[key].is_null(), "{key}");
    }
    // The same report again: no append, the same answer, even with a wrong
    // --expected-head (the idempotent path has no CAS).
    let receipt = bed.receipt();
    let wrong = "0".repeat(64);
    let again = bed
        .report("handoff-create", &payload, &["--expected-head", &wrong])
        .assert_ok();
    assert_eq!(again, out);
    assert_eq!(bed.receipt(), receipt);
    // One handoff per run: a new one (at the new head) is refused.
    let e = bed.refused(
        || bed.report("handoff-create", &bed.handoff(), &[]),
        5,
        "report kind is already bound",
    );
    assert_eq!(e["fields"]["report_kind"], "fresh_session_handoff");
    assert_eq!(
        e["fields"]["report_path"], out["report_path"],
        "the bound report is named: {e}"
    );
    // The bound file must stay what was bound.
    std::fs::write(&path, b"{}\n").unwrap();
    let e = bed.refused(
        || bed.report("handoff-create", &payload, &[]),
        5,
        "bound report file checksum differs",
    );
    let changed = |found: Value| {
        json!({"report_path": out["report_path"], "report_checksum": out["report_checksum"],
               "file_checksum": found})
    };
    let empty_object = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"{}\n"));
    common::assert_taught(&e, changed(json!(empty_object)), |hint| {
        hint.contains("other bytes")
    });
    std::fs::remove_file(&path).unwrap();
    let e = bed.refused(
        || bed.report("handoff-create", &payload, &[]),
        5,
        "bound report file is missing or unsafe",
    );
    common::assert_taught(&e, changed(Value::Null), |hint| hint.contains("missing"));
}

#[test]
fn the_reference_reports_are_reproduced() {
    for (scenario, lines, command) in [
        ("07-handoff", 9, "handoff-create"),
        ("02-happy-path-complete", 11, "live-report-create"),
    ] {
        let bed = Bed::fixture_before(scenario, lines);
        let fixture = fixtures_dir().join(scenario);
        let steps = bed.steps();
        let step = steps.iter().find(|s| s["argv"][2] == command).unwrap();
        let out = bed.replay(step);
        let ours = out.assert_ok();
        let recorded: Value = serde_json::from_str(step["stdout"].as_str().unwrap()).unwrap();
        for key in [
            "report_path",
            "report_checksum",
            "report_receipt_head",
            "sequence",
            "run_state",
            "run_id",
        ] {
            assert_eq!(ours[key], recorded[key], "{scenario} {key}");
        }
        // The report file is the reference's, byte for byte.
        let relative = ours["report_path"].as_str().unwrap();
        assert_eq!(
            std::fs::read(bed.root.join(relative)).unwrap(),
            std::fs::read(fixture.join("state").join(relative)).unwrap(),
            "{scenario}"
        );
        // The event matches the reference's but for the clock.
        let reference: Value = serde_json::from_str(
            std::fs::read_to_string(
                fixture
                    .join("state/runs")
                    .join(&bed.run_id)
                    .join("receipt.jsonl"),
            )
            .unwrap()
            .lines()
            .nth(lines)
            .unwrap(),
        )
        .unwrap();
        let event = bed.last_event();
        for key in [
            "event_type",
            "metadata",
            "evidence_refs",
            "previous_checksum",
            "owner_token",
            "sequence",
        ] {
            assert_eq!(event[key], reference[key], "{scenario} {key}");
        }
    }
}

#[test]
fn the_reference_idempotent_repeat_is_reproduced_byte_for_byte() {
    // 07-handoff as the reference left it: the handoff is bound; repeating
    // it prints exactly what the reference printed and appends nothing.
    let bed = Bed::fixture_before("07-handoff", usize::MAX);
    let fixture = fixtures_dir().join("07-handoff/state/reports");
    for entry in std::fs::read_dir(&fixture).unwrap().flatten() {
        let target = bed.root.join("reports").join(entry.file_name());
        std::fs::copy(entry.path(), &target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let steps = bed.steps();
    let repeat = steps
        .iter()
        .rfind(|s| s["argv"][2] == "handoff-create")
        .unwrap();
    assert_eq!(repeat["exit_status"], 0);
    common::assert_replays_read_only(&bed.flow, &bed.root, bed.scenario.as_ref().unwrap(), repeat);
}

#[test]
fn a_report_that_smuggles_a_secret_is_refused() {
    let bed = Bed::running();
    let forbidden = "report contains forbidden secret or raw-output fields";
    // A target path that names a secret or raw output, hashed like any file.
    let secrets = "tokenizer.py config/Secret.env prompts/system.md logs/raw_output.txt PASSWORD fencing-notes";
    for path in secrets.split(' ') {
        let payload = with(
            bed.handoff(),
            "target_hashes",
            json!({path: "d".repeat(64)}),
        );
        bed.refused(|| bed.report("handoff-create", &payload, &[]), 2, forbidden);
    }
    // A smuggled key is a contract mismatch before anything else.
    let mut smuggled = bed.handoff();
    smuggled["owner_token"] = json!("5b12fa0b8bfd4c589bbd6c3637d25097");
    bed.refused(
        || bed.report("handoff-create", &smuggled, &[]),
        2,
        "report fields do not match the fixed contract",
    );
    assert!(!bed.root.join("reports").read_dir().unwrap().any(|_| true));
}

#[test]
fn refusals_in_the_reference_order_change_nothing() {
    let bed = Bed::running();
    let h = || bed.handoff();
    bed.refused(
        || bed.report("handoff-create", &with(h(), "run_id", json!("other")), &[]),
        2,
        "report run_id does not match",
    );
    let e = bed.refused(
        || bed.report("handoff-create", &with(h(), "owner_epoch", json!(2)), &[]),
        5,
        "report owner epoch is stale",
    );
    // What the report named and what the run has now are fields.
    assert_eq!(
        e["fields"],
        json!({"owner_epoch": 2, "current_owner_epoch": 1})
    );
    bed.refused(
        || {
            bed.report(
                "handoff-create",
                &with(h(), "manifest_hash", json!("e".repeat(64))),
                &[],
            )
        },
        5,
        "report manifest hash is stale",
    );
    let e = bed.refused(
        || {
            bed.report(
                "handoff-create",
                &with(h(), "receipt_head", json!("e".repeat(64))),
                &[],
            )
        },
        5,
        "report receipt head is stale",
    );
    common::assert_taught(
        &e,
        json!({"receipt_head": "e".repeat(64), "current_receipt_head": bed.head()}),
        |hint| {
            hint.contains(&format!(
                "bluetape-flow resume-check --run-id {}",
                bed.run_id
            ))
        },
    );
    bed.refused(
        || bed.report("handoff-create", &with(h(), "skill_hash", json!("x")), &[]),
        2,
        "skill_hash must be lowercase SHA-256",
    );
    bed.refused(
        || bed.report("live-report-create", &h(), &[]),
        5,
        "run state does not allow this command",
    );
    // The CAS runs in the lock, before the file is written.
    let wrong = "0".repeat(64);
    bed.refused(
        || bed.report("handoff-create", &h(), &["--expected-head", &wrong]),
        5,
        "receipt head changed before mutation",
    );
    // An orphan file from an earlier attempt: 0600 and identical is reused,
    // anything else is refused.
    let payload = h();
    let mut bytes = canonical::to_vec(&payload);
    bytes.push(b'\n');
    let checksum = canonical::sha256_hex(&bytes);
    let orphan = bed.root.join(format!(
        "reports/{}-fresh_session_handoff-{}.json",
        bed.run_id,
        &checksum[..16]
    ));
    std::fs::write(&orphan, b"{\"other\":1}\n").unwrap();
    common::set_modes(&bed.root);
    let e = bed.refused(
        || bed.report("handoff-create", &payload, &[]),
        5,
        "orphan report content differs",
    );
    let relative = orphan.strip_prefix(&bed.root).unwrap().to_str().unwrap();
    common::assert_taught(&e, json!({"report_path": relative}), |hint| {
        hint.contains("move it out of the state root")
    });
    std::fs::write(&orphan, &bytes).unwrap();
    std::fs::set_permissions(&orphan, std::fs::Permissions::from_mode(0o644)).unwrap();
    bed.refused(
        || bed.report("handoff-create", &payload, &[]),
        2,
        "report does not have the required secure mode",
    );
    std::fs::set_permissions(&orphan, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = bed.report("handoff-create", &payload, &[]).assert_ok();
    assert_eq!(out["report_checksum"], checksum.as_str());
    assert_eq!(std::fs::read(&orphan).unwrap(), bytes);
}

#[test]
fn owners_are_checked_before_the_payload() {
    let bed = Bed::running();
    std::fs::copy(bed.handle("main.owner"), bed.handle("epoch1.owner")).unwrap();
    let new_owner = text(&bed.handle("second.owner"));
    bed.mutation(
        "resume",
        "main.owner",
        &[
            "--evidence",
            &bed.work_file("ev.json"),
            "--new-owner-file",
            &new_owner,
        ],
    )
    .assert_ok();
    // A stale owner with a payload that would also be refused: exit 5.
    let smuggled = with(
        bed.handoff(),
        "target_hashes",
        json!({"tokenizer.py": "d".repeat(64)}),
    );
    let input = bed.put("smuggled.json", &smuggled);
    bed.refused(
        || bed.mutation("handoff-create", "epoch1.owner", &["--input", &input]),
        5,
        "owner handle is stale",
    );
    // The new owner's report carries the new epoch.
    let payload = bed.handoff();
    assert_eq!(payload["owner_epoch"], 2);
    let input = bed.put("handoff.json", &payload);
    let out = bed
        .mutation("handoff-create", "second.owner", &["--input", &input])
        .assert_ok();
    assert_eq!(bed.last_event()["metadata"]["owner_epoch"], 2);
    assert_eq!(out["report_receipt_head"], payload["receipt_head"]);
    // A list is not a report.
    let list = bed.put("list.json", &json!([]));
    bed.refused(
        || bed.mutation("handoff-create", "second.owner", &["--input", &list]),
        2,
        "JSON input has the wrong top-level type",
    );
}

#[test]
fn a_live_report_follows_completion() {
    let bed = Bed::fixture_before("02-happy-path-complete", 11);
    let payload: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixtures_dir().join("02-happy-path-complete/inputs/live-report.json"),
        )
        .unwrap(),
    )
    .unwrap();
    bed.refused(
        || bed.report("handoff-create", &payload, &[]),
        5,
        "run state does not allow this command",
    );
    for (key, value, message) in [
        (
            "command_ids",
            json!([]),
            "command_ids must be a bounded non-empty list",
        ),
        (
            "timestamps",
            json!(["2026-07-14T01:30:00Z"]),
            "timestamps must align with command_ids",
        ),
        (
            "timestamps",
            json!(["2026-07-14T01:30:00Z", "yesterday"]),
            "report timestamp must be a UTC timestamp",
        ),
        ("exit_status", json!("0"), "exit_status must be an integer"),
        (
            "live_hash",
            json!("1"),
            "live_hash must be lowercase SHA-256",
        ),
    ] {
        bed.refused(
            || {
                bed.report(
                    "live-report-create",
                    &with(payload.clone(), key, value),
                    &[],
                )
            },
            2,
            message,
        );
    }
    let out = bed.report("live-report-create", &payload, &[]).assert_ok();
    assert_eq!(out["run_state"], "completed");
    assert_eq!(bed.last_event()["event_type"], "live_report_recorded");
    // The live report is the last event a completed run takes.
    bed.refused(
        || bed.report("live-report-create", &bed.handoff(), &[]),
        2,
        "report fields do not match the fixed contract",
    );
}

/// A publication is a bundle, a verdict an auditor reads: what it holds
/// rests on a full replay, not on the checkpoint. A checkpoint re-MACed
/// by a key holder to forget the bound handoff does not make `publish`
/// leave the report out (which `bundle-verify --git` would then refuse).
#[test]
fn publish_binds_the_reports_the_receipt_binds_under_a_forged_checkpoint() {
    let bed = Bed::running();
    bed.report("handoff-create", &bed.handoff(), &[])
        .assert_ok();
    crate::bed::forge::remac_checkpoint(&bed.root, &bed.dir, |checkpoint| {
        let reports = checkpoint["state"]["reports"]
            .as_object_mut()
            .expect("the checkpoint's state lists the bound reports");
        assert_eq!(reports.len(), 1, "{reports:?}");
        reports.clear();
    });
    let repo = bed.tmp.path().join("publication");
    let git = |args: &[&str]| crate::bed::git(&repo, args);
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q"]);
    let root = text(&bed.root);
    let repo_arg = text(&repo);
    let published = bed
        .flow
        .run(&[
            "--state-root",
            &root,
            "publish",
            "--run-id",
            &bed.run_id,
            "--repo",
            &repo_arg,
        ])
        .assert_ok();
    let reference = published["ref"].as_str().unwrap().to_string();
    let files = git(&["ls-tree", "-r", "--name-only", &reference]);
    assert!(
        files
            .lines()
            .any(|name| name.ends_with("reports/fresh_session_handoff.json")),
        "the bound report is published: {files}"
    );
    bed.flow
        .run(&["bundle-verify", "--git", &repo_arg, "--ref", &reference])
        .assert_ok();
}

/// A reports directory with a looser mode is the 0600/0700 rule broken:
/// the report is refused as the store refuses it (exit 2, the rule's
/// hint), and nothing is appended.
#[test]
fn a_report_directory_with_a_looser_mode_is_refused_with_its_rule() {
    use std::os::unix::fs::PermissionsExt;
    let bed = Bed::running();
    let reports = bed.root.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::set_permissions(&reports, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = bed.refused(
        || bed.report("handoff-create", &bed.handoff(), &[]),
        2,
        "state-root reports does not have the required secure mode",
    );
    let hint = e["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("0600 in directories of 0700"), "{e}");
}
