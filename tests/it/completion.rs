//! Completion through the binary (reference-coordinator §9, §10):
//! `completion-check` for every missing-item kind, alone and combined; the
//! `complete` gate (blocked with exit 6 and nothing written, then recorded
//! in one transaction); failed-lane resolution with `lane-resolve`. Every
//! refusal asserts exit status, error code, message, `next_command` and an
//! unchanged state root.

use crate::bed as common;

use crate::bed::{TestBed, component, ev};
use bluetape_flow::receipt::canonical::digest;
use serde_json::{Value, json};

/// Keys every `completion-check` answer carries besides the report.
fn report(out: &Value) -> Value {
    let mut map = out.as_object().unwrap().clone();
    for key in [
        "ok",
        "operation",
        "state_root",
        "run_id",
        "sequence",
        "checksum",
        "run_state",
    ] {
        assert!(map.remove(key).is_some(), "{key} missing in {out}");
    }
    Value::Object(map)
}

/// `completion-check` of `run` reports [`expect`] of `patch`.
#[track_caller]
fn assert_report(run: &TestBed, patch: Value) {
    assert_eq!(report(&run.completion()), expect(patch));
}

/// The report with everything empty except what `patch` says.
fn expect(patch: Value) -> Value {
    let base = json!({
        "missing_lanes": [], "unresolved_failed_lanes": [], "resolved_failed_lanes": [],
        "missing_components": [], "failed_checks": [], "missing_main_verification": true,
        "incomplete_replacements": [], "complete": false,
    });
    common::patched(base, &patch)
}

/// A running run with `runtime` (required, owner `build`, check `unit`)
/// fully covered: only main verification is missing.
fn covered() -> TestBed {
    let run = checked();
    run.cover("runtime", &ev("runtime verified")).assert_ok();
    run
}

/// Like [`covered`] before the component evidence: `unit` passed.
fn checked() -> TestBed {
    let run = TestBed::running(&["runtime"]);
    run.built_runtime();
    run.check("runtime", "unit", true, None, &ev("unit tests passed"))
        .assert_ok();
    run
}

/// `complete` must be blocked with exactly these missing ids, writing
/// nothing.
#[track_caller]
fn blocked(run: &TestBed, missing: Value) {
    let e = run.refused(
        || run.complete(&ev("main verification")),
        6,
        "required workflow completion evidence is missing",
    );
    assert_eq!(e["missing_ids"], missing, "{e}");
    assert_eq!(e["retryable"], true);
}

#[test]
fn completion_check_is_read_only_and_works_in_any_state() {
    let run = TestBed::planned(&["runtime", "docs"]);
    let out = common::read_only(&run.root, "completion-check", || run.completion());
    assert_eq!(out["operation"], "completion-check");
    assert_eq!(out["run_state"], "planned");
    assert_eq!(out["sequence"], 1);
    assert_eq!(out["checksum"], run.events()[0]["checksum"]);
    // Only the approved components, never registered, are missing.
    assert_eq!(
        report(&out),
        expect(json!({"missing_components": ["docs", "runtime"]}))
    );
}

#[test]
fn only_main_verification_missing_then_complete() {
    let run = covered();
    assert_report(&run, json!({}));
    // The reference accepts and ignores `--at`; ours is the events' time
    // (DEVIATIONS 87), so a malformed one is refused, naming the flag.
    let before = run.events().len();
    let e = run
        .cmd(
            "complete",
            &ev("main verified the integrated result"),
            &["--at", "not a time"],
        )
        .assert_error(2, "contract_error");
    assert_eq!(e["fields"]["input"], "--at", "{e}");
    assert_eq!(run.events().len(), before);
    let out = run
        .cmd(
            "complete",
            &ev("main verified the integrated result"),
            &["--at", "2026-07-14T01:20:00Z"],
        )
        .assert_ok();
    assert_eq!(out["operation"], "complete");
    assert_eq!(out["run_state"], "completed");
    let event = run.events().pop().unwrap();
    assert_eq!(event["event_type"], "transaction_committed");
    assert_eq!(out["sequence"], event["sequence"]);
    assert_eq!(out["checksum"], event["checksum"]);
    assert_eq!(event["timestamp"], "2026-07-14T01:20:00Z");
    let intents = event["metadata"]["intents"].as_array().unwrap();
    assert_eq!(intents.len(), 2);
    assert_eq!(intents[0]["event_type"], "main_verification");
    assert_eq!(intents[0]["from_state"], Value::Null);
    assert_eq!(intents[1]["event_type"], "run_completed");
    assert_eq!(intents[1]["from_state"], "running");
    assert_eq!(intents[1]["to_state"], "completed");
    for intent in intents {
        assert_eq!(
            intent["evidence_refs"],
            ev("main verified the integrated result")
        );
        assert_ne!(intent["timestamp"], "not a time");
    }
    let after = run.completion();
    assert_eq!(after["run_state"], "completed");
    assert_eq!(
        report(&after),
        expect(json!({"missing_main_verification": false, "complete": true}))
    );
    run.verify();
    // A completed run takes no further mutation.
    run.refused(
        || run.complete(&ev("again")),
        5,
        "run state does not allow this command",
    );
    run.refused(
        || run.check("runtime", "unit", false, None, &ev("late failure")),
        5,
        "run state does not allow this command",
    );
}

// ------------------------------------------------------- each kind alone

#[test]
fn a_missing_lane_alone() {
    // A lane that owns no component still holds completion back.
    let run = covered();
    run.running_lane("docs", None);
    assert_report(&run, json!({"missing_lanes": ["docs"]}));
    blocked(&run, json!(["docs"]));
    run.complete_lane("docs", &ev("docs done")).assert_ok();
    run.complete(&ev("main verification")).assert_ok();
}

#[test]
fn a_failed_check_alone() {
    // Covered, then the check fails again: last write wins.
    let run = covered();
    run.check("runtime", "unit", false, None, &ev("unit regressed"))
        .assert_ok();
    assert_report(&run, json!({"failed_checks": ["runtime:unit"]}));
    blocked(&run, json!(["runtime:unit"]));
    run.check(
        "runtime",
        "unit",
        true,
        Some("flaky test fixed"),
        &ev("unit green again"),
    )
    .assert_ok();
    run.complete(&ev("main verification")).assert_ok();
}

#[test]
fn a_missing_component_alone() {
    let run = checked();
    assert_report(&run, json!({"missing_components": ["runtime"]}));
    blocked(&run, json!(["runtime"]));
}

#[test]
fn an_unregistered_topology_alone() {
    let run = TestBed::running(&["runtime"]);
    run.completed_lane("build", None, &ev("build done"));
    assert_report(&run, json!({"missing_components": ["runtime"]}));
    blocked(&run, json!(["runtime"]));
}

#[test]
fn an_unresolved_failed_lane() {
    let run = covered();
    run.running_lane("review", None);
    run.fail_lane("review", &ev("review found a wrong head"));
    assert_report(
        &run,
        json!({"missing_lanes": ["review"], "unresolved_failed_lanes": ["review"]}),
    );
    blocked(&run, json!(["review"]));
}

#[test]
fn a_removed_required_component_blocks_forever() {
    // Our topology-remove refuses a required component; a receipt another
    // writer produced (the reference allows it) still blocks completion, and
    // replay records the removal as a breach of our rule (contracts/rules.md
    // `required_component_removed`), which `complete` names before any
    // missing evidence.
    let run = covered();
    run.append_sealed(&[(
        "topology_component_removed",
        json!({"reason": "scope cut", "metadata": {"owner_epoch": 1, "component_id": "runtime"}}),
    )]);
    run.verify();
    let mut report = report(&run.completion());
    let breaches = report.as_object_mut().unwrap().remove("breaches");
    assert_eq!(report, expect(json!({"missing_components": ["runtime"]})));
    assert_eq!(
        breaches.unwrap()[0]["rule"],
        "required_component_removed",
        "the breach is shown"
    );
    let before = common::snapshot(&run.root);
    let out = run.complete(&ev("main verification"));
    assert_eq!(out.code, 5, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "rule_breach", "{e}");
    assert_eq!(e["retryable"], false);
    assert_eq!(
        e["message"],
        "complete refused: the receipt breaks our rules: rule required_component_removed broken at sequence 11: topology_component_removed removes required component runtime"
    );
    assert_eq!(common::snapshot(&run.root), before, "nothing written");
    // It cannot come back through a re-registration either.
    run.refused(
        || run.register(&json!([component("runtime", "build", true, &[], &[])])),
        2,
        "topology must match the approved component snapshot",
    );
}

#[test]
fn an_incomplete_replacement_blocks_with_its_lane() {
    // Only a receipt our CLI cannot write has one (a lone lane_reassigned):
    // the reference-written fixture. The replaced lane is a missing lane
    // too, so this kind is never alone.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let scenario = common::fixtures_dir().join("10-replacement-incomplete");
    common::prepare_state(&scenario, &root);
    let run_id = common::first_run_id(&root);
    let flow = common::Flow::new(tmp.path());
    let r = root.to_str().unwrap();
    let out = flow
        .run(&["--state-root", r, "completion-check", "--run-id", &run_id])
        .assert_ok();
    assert_eq!(out["incomplete_replacements"], json!(["build"]));
    assert!(
        out["missing_lanes"]
            .as_array()
            .unwrap()
            .contains(&json!("build"))
    );
    let evidence = tmp.path().join("ev.json");
    std::fs::write(&evidence, ev("main verification").to_string()).unwrap();
    let before = common::snapshot(&root);
    let owner = root.join("handles/main.owner");
    let evidence = ["--evidence", evidence.to_str().unwrap()];
    let e = flow
        .run(&common::mutation_argv(
            &root, "complete", &run_id, &owner, &evidence,
        ))
        .assert_error(6, "completion_blocked");
    let missing = e["missing_ids"].as_array().unwrap();
    assert_eq!(missing.last().unwrap(), "build", "{e}");
    assert_eq!(e["next_command"], "completion-check");
    assert_eq!(before, common::snapshot(&root));
}

#[test]
fn everything_missing_at_once() {
    let run = TestBed::running(&["zeta", "alpha", "docs"]);
    run.running_lane("z-lane", None);
    run.running_lane("a-lane", None);
    run.completed_lane("d-lane", None, &ev("docs written"));
    run.register(&json!([
        component("zeta", "z-lane", true, &["unit", "e2e"], &[]),
        component("alpha", "a-lane", true, &["lint"], &["zeta"]),
        component("docs", "d-lane", false, &["spell"], &[]),
    ]))
    .assert_ok();
    run.fail_lane("a-lane", &ev("alpha failed"));
    run.check("zeta", "unit", true, None, &ev("unit ok"))
        .assert_ok();
    assert_report(
        &run,
        json!({
            "missing_lanes": ["a-lane", "z-lane"],
            "unresolved_failed_lanes": ["a-lane"],
            "missing_components": ["alpha", "zeta"],
            "failed_checks": ["alpha:lint", "zeta:e2e"],
        }),
    );
    // Lanes, then components, then checks (incomplete replacements last).
    blocked(
        &run,
        json!([
            "a-lane",
            "z-lane",
            "alpha",
            "zeta",
            "alpha:lint",
            "zeta:e2e"
        ]),
    );
}

// ------------------------------------------------------- complete refusals

#[test]
fn complete_refusals() {
    let run = covered();
    run.running_lane("watch", None);
    let beat = ev("watch is alive");
    run.heartbeat("watch", &beat);
    run.complete_lane("watch", &ev("watch done")).assert_ok();
    // Evidence rules come before the evaluation.
    run.refused(
        || run.complete(&beat),
        2,
        "liveness evidence cannot satisfy completion evidence",
    );
    run.refused(
        || run.complete(&json!([])),
        2,
        "lifecycle transition requires evidence",
    );
    run.refused(
        || run.cmd("complete", &ev("v"), &["--expected-head", "abc"]),
        2,
        "expected receipt head must be lowercase SHA-256",
    );
    run.refused(
        || run.cmd("complete", &ev("v"), &["--expected-head", &"0".repeat(64)]),
        5,
        "receipt head changed before mutation",
    );
    // Recovering is not running.
    run.cmd(
        "run-recovery-start",
        &ev("r"),
        &["--reason", "check the head"],
    )
    .assert_ok();
    run.refused(
        || run.complete(&ev("v")),
        5,
        "run state does not allow this command",
    );
    run.cmd("run-recovery-finish", &ev("r2"), &[]).assert_ok();
    let head = run.verify()["checksum"].as_str().unwrap().to_string();
    run.cmd("complete", &ev("verified"), &["--expected-head", &head])
        .assert_ok();
}

#[test]
fn complete_fails_closed_on_a_damaged_receipt() {
    // The gate verifies the whole receipt, not just a checkpoint's tail:
    // damage in an early line (same length, so the checkpoint still proves
    // the head line at its offset) stops it.
    let run = covered();
    let receipt = run.dir.join("receipt.jsonl");
    let text = std::fs::read_to_string(&receipt).unwrap();
    let damaged = text.replacen("\"approved\"", "\"Approved\"", 1);
    assert_ne!(damaged, text);
    assert_eq!(damaged.len(), text.len());
    std::fs::write(&receipt, damaged).unwrap();
    let verdict = run.read("verify", &[]).error();
    let message = verdict["message"].as_str().unwrap();
    assert!(message.contains("sequence 2"), "{verdict}");
    run.refused(|| run.complete(&ev("v")), 3, message);
}

// ------------------------------------------------------- lane-resolve

fn failure() -> Value {
    ev("review found a wrong head")
}

fn correction() -> Value {
    ev("re-review passed at the exact head")
}

/// Evidence naming both lanes' evidence digests.
fn binding(original: &Value, resolution: &Value) -> Value {
    json!([
        {"kind": "review", "summary": "failed review", "checksum": digest(original)},
        {"kind": "review", "summary": "re-review", "checksum": digest(resolution)},
    ])
}

/// `covered()` plus `review` failed and `rereview` (its child) completed.
fn reviewed() -> TestBed {
    let run = covered();
    run.running_lane("review", None);
    run.fail_lane("review", &failure());
    run.completed_lane("rereview", Some("review"), &correction());
    run
}

#[test]
fn a_failed_lane_resolved_by_a_later_correction() {
    let run = reviewed();
    assert_report(
        &run,
        json!({"missing_lanes": ["review"], "unresolved_failed_lanes": ["review"]}),
    );
    let evidence = binding(&failure(), &correction());
    let out = run.resolve("review", "rereview", &evidence).assert_ok();
    assert_eq!(out["operation"], "lane-resolve");
    common::assert_holds(
        &run.events().pop().unwrap(),
        json!({
            "event_type": "candidate_validated", "lane_id": "review",
            "agent_id": "agent-review", "from_state": "failed", "to_state": "failed",
            "timestamp": "2026-07-14T01:30:00Z", "evidence_refs": evidence,
            "metadata": {
                "owner_epoch": 1, "candidate_kind": "failed_lane_resolution",
                "original_lane_id": "review", "resolution_lane_id": "rereview",
                "original_evidence_digest": digest(&failure()),
                "resolution_evidence_digest": digest(&correction()),
            },
        }),
        "the resolution event",
    );
    // The failed lane stays failed history; it no longer blocks.
    assert_eq!(run.cached_state()["lanes"]["review"]["state"], "failed");
    assert_report(&run, json!({"resolved_failed_lanes": ["review"]}));
    let e = run.refused(
        || run.resolve("review", "rereview", &evidence),
        5,
        "failed lane is already resolved",
    );
    // The lanes are fields; retrying cannot help.
    common::assert_taught(
        &e,
        json!({"lane_id": "review", "resolution_lane_id": "rereview"}),
        |hint| hint.starts_with("retrying cannot help: lane review is resolved already"),
    );
    run.complete(&ev("main verification")).assert_ok();
    run.verify();
}

#[test]
fn one_failed_lane_resolved_and_one_left_unresolved() {
    let run = reviewed();
    run.running_lane("audit", None);
    run.fail_lane("audit", &ev("audit failed"));
    run.resolve("review", "rereview", &binding(&failure(), &correction()))
        .assert_ok();
    assert_report(
        &run,
        json!({
            "missing_lanes": ["audit"], "unresolved_failed_lanes": ["audit"],
            "resolved_failed_lanes": ["review"],
        }),
    );
    blocked(&run, json!(["audit"]));
}

#[test]
fn liveness_only_claims_never_resolve() {
    let run = reviewed();
    // A heartbeat that carried the binding refs is liveness evidence only.
    run.running_lane("watch", None);
    let claim = binding(&failure(), &correction());
    run.heartbeat("watch", &claim);
    run.refused(
        || run.resolve("review", "rereview", &claim),
        2,
        "liveness evidence cannot satisfy completion evidence",
    );
    // A lane whose only evidence is its heartbeat never completes, so it
    // can never become a resolver.
    run.running_lane("idle", Some("review"));
    let beat = ev("idle is alive");
    run.heartbeat("idle", &beat);
    run.refused(
        || run.complete_lane("idle", &beat),
        2,
        "liveness evidence cannot complete a lane",
    );
    run.refused(
        || run.resolve("review", "idle", &binding(&failure(), &beat)),
        5,
        "resolution lane is not completed",
    );
}

#[test]
fn self_referential_claims_are_refused() {
    let run = reviewed();
    // The failed lane as its own resolver.
    run.refused(
        || run.resolve("review", "review", &binding(&failure(), &failure())),
        2,
        "failed lane cannot resolve itself",
    );
    // Evidence that binds only the failure (or only the correction).
    for evidence in [
        binding(&failure(), &failure()),
        binding(&correction(), &correction()),
        binding(&failure(), &ev("something else")),
        ev("trust me"),
    ] {
        run.refused(
            || run.resolve("review", "rereview", &evidence),
            2,
            "resolution evidence must bind failed and completed lane evidence",
        );
    }
}

#[test]
fn identical_evidence_on_both_lanes_is_a_conflict() {
    // decisions.md 7: the reference lets this through to its pre-append
    // replay and answers exit 3 receipt_corrupt; nothing is corrupt, so we
    // refuse it up front with exit 5.
    let run = covered();
    let same = ev("one report for both lanes");
    run.running_lane("review", None);
    run.fail_lane("review", &same);
    run.completed_lane("rereview", Some("review"), &same);
    run.refused(
        || run.resolve("review", "rereview", &binding(&same, &same)),
        5,
        "resolution lane evidence is identical to the failed lane evidence; \
         a resolution needs independent evidence",
    );
}

#[test]
fn resolution_lineage_refusals() {
    let run = reviewed();
    let evidence = binding(&failure(), &correction());
    run.refused(
        || run.resolve("rereview", "review", &evidence),
        5,
        "lane is not a failed lane",
    );
    run.refused(
        || run.resolve("ghost", "rereview", &evidence),
        5,
        "lane is not a failed lane",
    );
    run.refused(
        || run.resolve("review", "ghost", &evidence),
        5,
        "resolution lane is not completed",
    );
    // The run's own snapshot requires the resolver to name the failed
    // lane as its parent (decisions.md 5).
    run.completed_lane("stranger", None, &ev("unrelated work"));
    run.refused(
        || {
            run.resolve(
                "review",
                "stranger",
                &binding(&failure(), &ev("unrelated work")),
            )
        },
        5,
        "resolution lane does not declare failed parent",
    );
    run.refused(
        || run.resolve("review", "rereview", &json!([])),
        2,
        "lifecycle transition requires evidence",
    );
    run.refused(
        || {
            run.cmd(
                "lane-resolve",
                &evidence,
                &[
                    "--lane-id",
                    "review",
                    "--resolution-lane-id",
                    "rereview",
                    "--at",
                    "yesterday",
                ],
            )
        },
        2,
        "timestamp must be UTC ISO-8601 ending in Z",
    );
}

#[test]
fn a_resolver_must_complete_after_the_failure() {
    let run = covered();
    run.running_lane("review", None);
    run.running_lane("early", Some("review"));
    run.complete_lane("early", &correction()).assert_ok();
    run.fail_lane("review", &failure());
    run.refused(
        || run.resolve("review", "early", &binding(&failure(), &correction())),
        5,
        "resolution lane did not complete after failure",
    );
}

#[test]
fn a_pre_policy_snapshot_does_not_require_the_parent() {
    // decisions.md 5: the rule comes from the run's own manifest snapshot.
    // A 1.1.0 snapshot from before the resolution policy lacks the key.
    // The snapshot is edited and the first receipt line re-sealed under
    // its new hash.
    let fresh = TestBed::planned(&["runtime"]);
    let fresh_path = fresh.dir.join("manifest.json");
    let mut snapshot: Value =
        serde_json::from_str(&std::fs::read_to_string(&fresh_path).unwrap()).unwrap();
    snapshot
        .as_object_mut()
        .unwrap()
        .remove("failure_resolution");
    let mut contract = snapshot.clone();
    contract.as_object_mut().unwrap().remove("_run");
    let hash = digest(&contract);
    snapshot["_run"]["manifest_hash"] = json!(hash);
    std::fs::write(&fresh_path, snapshot.to_string()).unwrap();
    // The first receipt line carries the old manifest hash: rewrite it.
    let receipt = fresh.dir.join("receipt.jsonl");
    let mut first: serde_json::Map<String, Value> = serde_json::from_str(
        std::fs::read_to_string(&receipt)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    first.insert("manifest_hash".into(), json!(hash));
    first.remove("checksum");
    let checksum = bluetape_flow::receipt::canonical::sha256_hex(
        &bluetape_flow::receipt::canonical::to_vec(&Value::Object(first.clone())),
    );
    first.insert("checksum".into(), json!(checksum));
    let line = bluetape_flow::receipt::canonical::to_string(&Value::Object(first)) + "\n";
    std::fs::write(&receipt, &line).unwrap();
    let _ = std::fs::remove_file(fresh.dir.join("checkpoint.json"));
    bluetape_flow::store::run::RunDir::new(
        &bluetape_flow::store::root::StateRoot::begin(&fresh.root),
        &bluetape_flow::receipt::primitives::RunId::parse(&fresh.run_id).unwrap(),
    )
    .write_head(&bluetape_flow::store::run::AckHead {
        sequence: 1,
        checksum: bluetape_flow::receipt::primitives::Sha256Hex::parse(&checksum).unwrap(),
        byte_length: line.len() as u64,
        canonical_through: 1,
    })
    .unwrap();
    common::set_modes(&fresh.root);
    fresh.verify();
    fresh
        .cmd("run-approve", &ev("a"), &["--at", common::T0])
        .assert_ok();
    fresh
        .cmd("run-start", &ev("s"), &["--at", common::T0])
        .assert_ok();
    fresh.running_lane("review", None);
    fresh.fail_lane("review", &failure());
    fresh.completed_lane("stranger", None, &correction());
    fresh
        .resolve("review", "stranger", &binding(&failure(), &correction()))
        .assert_ok();
    assert_eq!(
        fresh.completion()["resolved_failed_lanes"],
        json!(["review"])
    );
    fresh.verify();
}
