//! Topology through the binary (reference-coordinator §10):
//! topology-register, topology-remove, check-result, component-evidence.
//!
//! First every recorded topology, check, evidence, resolution and
//! completion command of the reference's scenarios is replayed on a copy
//! of the reference's own state cut back to the line before it: we must
//! write the reference's event (byte for byte where the caller gives the
//! time, all but the timestamp and checksum where the event takes "now")
//! and print its answer, or refuse exactly as it did. Then every rule and
//! refusal on runs our binary made: each refusal asserts exit status,
//! error code, message, `next_command` and an unchanged state root.

use crate::bed as common;

use crate::bed::topo::{cut_state, fixture_lines, recorded_steps};
use crate::bed::{T0, TestBed, component, ev};
use common::Flow;
use serde_json::{Value, json};

/// The event without what depends on the clock.
fn timeless(line: &str) -> Value {
    let mut event: Value = serde_json::from_str(line).unwrap();
    let map = event.as_object_mut().unwrap();
    map.remove("timestamp");
    map.remove("checksum");
    if let Some(intents) = event["metadata"]["intents"].as_array_mut() {
        for intent in intents {
            intent.as_object_mut().unwrap().remove("timestamp");
        }
    }
    event
}

#[test]
fn recorded_reference_commands_write_the_reference_events() {
    let operations = [
        "topology-register",
        "topology-remove",
        "check-result",
        "component-evidence",
        "lane-resolve",
        "complete",
    ];
    let mut seen = std::collections::BTreeMap::new();
    for recorded in recorded_steps(&operations) {
        let step = &recorded.step;
        let operation = step["argv"][2].as_str().unwrap().to_string();
        let name = format!(
            "{} {operation} @{}",
            recorded.scenario.display(),
            recorded.before
        );
        let (tmp, root, run_dir) = cut_state(&recorded.scenario, recorded.before);
        let flow = Flow::new(tmp.path());
        let argv = common::expand_argv(step["argv"].as_array().unwrap(), &root, &recorded.scenario);
        let state_text = root.to_str().unwrap().to_string();
        let before = common::snapshot(&root);
        let out = flow.run(&argv);
        assert_eq!(
            out.code as i64,
            step["exit_status"].as_i64().unwrap(),
            "{name}: {out:?}"
        );
        if out.code == 0 {
            let ours: Vec<String> = std::fs::read_to_string(run_dir.join("receipt.jsonl"))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            assert_eq!(ours.len(), recorded.before + 1, "{name}");
            let theirs = &fixture_lines(&recorded.scenario)[recorded.before];
            let written = &ours[recorded.before];
            if operation == "lane-resolve" {
                assert_eq!(written, theirs, "{name}: caller-timed event differs");
            } else {
                assert_eq!(timeless(written), timeless(theirs), "{name}");
            }
            let mut got: Value =
                serde_json::from_str(&out.stdout.replace(&state_text, "{STATE}")).unwrap();
            let mut want: Value = serde_json::from_str(step["stdout"].as_str().unwrap()).unwrap();
            if operation != "lane-resolve" {
                got.as_object_mut().unwrap().remove("checksum");
                want.as_object_mut().unwrap().remove("checksum");
            }
            assert_eq!(got, want, "{name}");
            // The whole chain still verifies.
            let verify = flow.run(&[
                "--state-root",
                &state_text,
                "verify",
                "--run-id",
                run_dir.file_name().unwrap().to_str().unwrap(),
            ]);
            verify.assert_ok();
        } else {
            common::assert_same_envelope(
                &out.stderr.replace(&state_text, "{STATE}"),
                step["stderr"].as_str().unwrap(),
            );
            assert_eq!(before, common::snapshot(&root), "{name}: refusal wrote");
        }
        *seen.entry(operation).or_insert(0) += 1;
    }
    for operation in operations {
        assert!(
            seen.contains_key(operation),
            "no recorded {operation}: {seen:?}"
        );
    }
    assert!(seen.values().sum::<i32>() >= 25, "{seen:?}");
}

// ---------------------------------------------------------------- register

/// Lanes `a` and `b`, components `api` (owner a, depends on core) and
/// `core` (owner b).
fn api_core(api_required: bool) -> Value {
    json!([
        component("api", "a", api_required, &["unit"], &["core"]),
        component("core", "b", true, &["lint"], &[]),
    ])
}

fn two_lanes() -> TestBed {
    let run = TestBed::running(&["api", "core"]);
    run.running_lane("a", None);
    run.running_lane("b", None);
    run
}

#[test]
fn register_records_the_sorted_snapshot() {
    let run = two_lanes();
    let input = json!([
        component("core", "b", true, &["lint"], &[]),
        component("api", "a", true, &["unit"], &["core"]),
    ]);
    let out = run.register(&input).assert_ok();
    assert_eq!(out["operation"], "topology-register");
    assert_eq!(out["run_state"], "running");
    let event = run.events().pop().unwrap();
    assert_eq!(event["event_type"], "topology_registered");
    assert_eq!(event["reason"], Value::Null);
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "components": [input[1].clone(), input[0].clone()]})
    );
    assert_eq!(out["sequence"], event["sequence"]);
    run.verify();
}

#[test]
fn register_refusals() {
    let run = two_lanes();
    let good = api_core(true);
    let with = |index: usize, key: &str, value: Value| {
        let mut v = good.clone();
        v[index][key] = value;
        v
    };
    let cases: Vec<(Value, &str)> = vec![
        (json!([]), "topology component count is outside the limit"),
        (
            with(0, "coverage", json!("missing")),
            "component metadata fields do not match contract",
        ),
        (
            with(0, "id", json!("../api")),
            "component id must match the identifier contract",
        ),
        (
            with(0, "required_checks", json!(["a b"])),
            "component required_checks must match the identifier contract",
        ),
        (
            with(0, "evidence_refs", ev("early")),
            "topology snapshot evidence_refs must be empty",
        ),
        (with(1, "id", json!("api")), "duplicate component id: api"),
        (
            with(0, "owner_lane", json!("ghost")),
            "unknown topology owner lane: ghost",
        ),
        (
            with(1, "coverage_state", json!("covered")),
            "registered topology must begin without coverage evidence",
        ),
        (
            json!([good[1].clone()]),
            "topology must match the approved component snapshot",
        ),
        (
            with(0, "dependencies", json!(["nope"])),
            "unknown component dependencies: nope",
        ),
        (
            with(1, "dependencies", json!(["api"])),
            "topology dependency cycle",
        ),
        (
            with(1, "dependencies", json!(["core"])),
            "topology dependency cycle",
        ),
    ];
    for (input, message) in cases {
        run.refused(|| run.register(&input), 2, message);
    }
    // The input must be a JSON list; evidence must be present.
    run.refused(
        || run.register(&json!({"components": good})),
        2,
        "JSON input has the wrong top-level type",
    );
    run.refused(
        || run.input("topology-register", &json!([]), &good),
        2,
        "lifecycle transition requires evidence",
    );
    run.register(&good).assert_ok();
}

#[test]
fn register_needs_a_running_run_and_the_owner() {
    let run = TestBed::planned(&["api"]);
    let input = json!([component("api", "a", true, &[], &[])]);
    run.refused(
        || run.register(&input),
        5,
        "run state does not allow this command",
    );
    // A stale owner handle: valid input is refused by the owner check
    // (5); invalid pre-lock input answers first (2).
    let run = two_lanes();
    let owner = run.owner();
    let mut handle: Value =
        serde_json::from_str(&std::fs::read_to_string(&owner).unwrap()).unwrap();
    handle["token"] = json!("someone-else");
    let stale = run.root.join("handles/stale.owner");
    std::fs::write(&stale, handle.to_string()).unwrap();
    common::set_modes(&run.root);
    let topology = run.file(&api_core(true));
    let evidence = run.file(&ev("t"));
    let empty = run.file(&json!([]));
    let argv = |evidence: &str| {
        vec![
            "topology-register".to_string(),
            "--run-id".into(),
            run.run_id.clone(),
            "--owner-file".into(),
            stale.to_str().unwrap().into(),
            "--evidence".into(),
            evidence.to_string(),
            "--input".into(),
            topology.clone(),
        ]
    };
    let call = |evidence: &str| {
        let args = argv(evidence);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run.raw(&args)
    };
    run.refused(
        || call(&evidence),
        5,
        "owner handle does not match the current run owner",
    );
    run.refused(|| call(&empty), 2, "lifecycle transition requires evidence");
}

#[test]
fn reregistration_keeps_checks_coverage_and_evidence() {
    let run = two_lanes();
    run.register(&api_core(false)).assert_ok();
    run.complete_lane("b", &ev("core done")).assert_ok();
    run.check("core", "lint", true, None, &ev("lint clean"))
        .assert_ok();
    run.cover("core", &ev("core verified")).assert_ok();
    run.check("api", "unit", false, None, &ev("unit red"))
        .assert_ok();
    // Promote api, move it to lane b, rename core's description.
    let mut again = json!([
        component("api", "b", true, &["unit", "e2e"], &["core"]),
        component("core", "b", true, &["lint"], &[]),
    ]);
    again[1]["description"] = json!("The core, renamed");
    run.register(&again).assert_ok();
    let state = run.cached_state();
    assert_eq!(state["topology"]["core"]["coverage_state"], "covered");
    assert_eq!(
        state["topology"]["core"]["evidence_refs"],
        ev("core verified")
    );
    assert_eq!(
        state["topology"]["core"]["description"],
        "The core, renamed"
    );
    assert_eq!(state["topology"]["api"]["required"], true);
    assert_eq!(
        state["checks"],
        json!({"api": {"unit": false}, "core": {"lint": true}})
    );
    assert_eq!(
        state["check_history"]["api"]["unit"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let completion = run.completion();
    assert_eq!(completion["missing_components"], json!(["api"]));
    assert_eq!(completion["failed_checks"], json!(["api:e2e", "api:unit"]));
    assert_eq!(completion["missing_lanes"], json!(["a"]));
}

#[test]
fn reregistration_cannot_demote_a_required_component() {
    // decisions.md 8: the reference lets a re-registration flip `required`
    // to false, silently dropping the component from completion.
    let run = two_lanes();
    run.register(&api_core(true)).assert_ok();
    run.refused(
        || run.register(&api_core(false)),
        5,
        "topology re-registration cannot demote required component api; \
         a required component leaves only through topology-remove",
    );
    assert_eq!(
        run.completion()["missing_components"],
        json!(["api", "core"])
    );
}

#[test]
fn reregistration_cannot_drop_a_required_component_even_with_a_shrunk_snapshot() {
    // `_run.component_ids` is outside every hash: shrinking it after the
    // registration would let the snapshot rule accept a topology without
    // `api`. The explicit rule still refuses the drop.
    let run = two_lanes();
    run.register(&api_core(true)).assert_ok();
    let path = run.dir.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["_run"]["component_ids"] = json!(["core"]);
    std::fs::write(&path, manifest.to_string()).unwrap();
    // Our checkpoint still carries the approved set replayed before the
    // edit; without it the state is replayed from the edited manifest.
    std::fs::remove_file(run.dir.join("checkpoint.json")).unwrap();
    common::set_modes(&run.root);
    run.verify();
    run.refused(
        || run.register(&json!([component("core", "b", true, &["lint"], &[])])),
        5,
        "topology re-registration cannot drop required component api; \
         a required component leaves only through topology-remove",
    );
}

// ---------------------------------------------------------------- remove

fn remove(run: &TestBed, id: &str, reason: &str) -> common::Output {
    run.cmd(
        "topology-remove",
        &ev(&format!("remove {id}")),
        &["--component-id", id, "--reason", reason],
    )
}

/// `api` (required, depends on core), `core` (required), `docs`
/// (optional, depends on guide), `guide` (optional).
fn four_components() -> TestBed {
    let run = TestBed::running(&["api", "core", "docs", "guide"]);
    run.running_lane("a", None);
    run.register(&json!([
        component("api", "a", true, &[], &["core"]),
        component("core", "a", true, &[], &[]),
        component("docs", "a", false, &[], &["guide"]),
        component("guide", "a", false, &[], &[]),
    ]))
    .assert_ok();
    run
}

#[test]
fn remove_an_optional_leaf_with_a_reason() {
    let run = four_components();
    remove(&run, "docs", "docs move to a follow-up run").assert_ok();
    let event = run.events().pop().unwrap();
    assert_eq!(event["event_type"], "topology_component_removed");
    assert_eq!(event["reason"], "docs move to a follow-up run");
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "component_id": "docs"})
    );
    let state = run.cached_state();
    assert_eq!(state["removed_components"], json!(["docs"]));
    assert_eq!(
        state["removed_component_records"]["docs"]["required"],
        false
    );
    // guide is a leaf now; the removed docs cannot come back.
    remove(&run, "guide", "not needed").assert_ok();
    run.refused(
        || {
            run.register(&json!([
                component("api", "a", true, &[], &["core"]),
                component("core", "a", true, &[], &[]),
                component("docs", "a", false, &[], &[]),
            ]))
        },
        2,
        "topology must match the approved component snapshot",
    );
    run.verify();
}

#[test]
fn remove_refusals() {
    let run = four_components();
    let e = run.refused(
        || remove(&run, "guide", "x"),
        5,
        "topology component still has dependents: docs",
    );
    // The component and what refused it are fields; the hint says what
    // comes first.
    common::assert_taught(
        &e,
        json!({"component_id": "guide", "dependents": ["docs"]}),
        |hint| hint.contains("remove docs first"),
    );
    let e = run.refused(
        || remove(&run, "ghost", "x"),
        5,
        "topology component does not exist",
    );
    assert_eq!(
        e["fields"],
        json!({"component_id": "ghost", "components": ["api", "core", "docs", "guide"]})
    );
    for (id, reason, code, message) in [
        (
            "core",
            "x",
            5,
            "topology component still has dependents: api",
        ),
        // A required leaf: the reference records it and the run can never
        // complete; we refuse it.
        (
            "api",
            "scope cut",
            5,
            "required topology component cannot be removed; it blocks completion until covered",
        ),
        (
            "docs",
            " \t ",
            2,
            "topology component removal requires a reason",
        ),
        (
            "bad id",
            "x",
            2,
            "component id must match the identifier contract",
        ),
    ] {
        run.refused(|| remove(&run, id, reason), code, message);
    }
    run.refused(
        || {
            run.cmd(
                "topology-remove",
                &json!([]),
                &["--component-id", "docs", "--reason", "x"],
            )
        },
        2,
        "lifecycle transition requires evidence",
    );
    let e = run
        .cmd("topology-remove", &ev("x"), &["--component-id", "docs"])
        .assert_error(2, "contract_error");
    assert!(e["message"].as_str().unwrap().contains("--reason"), "{e}");
}

// ---------------------------------------------------------------- check-result

fn checked() -> TestBed {
    let run = TestBed::running(&["core"]);
    run.running_lane("b", None);
    run.register(&json!([component("core", "b", true, &["lint"], &[])]))
        .assert_ok();
    run
}

#[test]
fn a_failed_check_then_a_passed_one() {
    let run = checked();
    let red = ev("lint: 3 warnings");
    run.check("core", "lint", false, Some("warnings"), &red)
        .assert_ok();
    assert_eq!(run.events().pop().unwrap()["event_type"], "check_failed");
    assert_eq!(run.completion()["failed_checks"], json!(["core:lint"]));
    run.refused(
        || run.check("core", "lint", false, Some("warnings"), &red),
        5,
        "duplicate check result",
    );
    let green = ev("lint clean");
    run.refused(
        || run.check("core", "lint", true, None, &green),
        5,
        "a recovered check requires a fresh result and reason",
    );
    run.refused(
        || run.check("core", "lint", true, Some("  "), &green),
        5,
        "a recovered check requires a fresh result and reason",
    );
    run.refused(
        || run.check("core", "lint", true, Some("fixed"), &red),
        5,
        "a recovered check requires fresh evidence",
    );
    run.check("core", "lint", true, Some("fixed the warnings"), &green)
        .assert_ok();
    let event = run.events().pop().unwrap();
    assert_eq!(event["event_type"], "check_passed");
    assert_eq!(event["reason"], "fixed the warnings");
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "component_id": "core", "check_id": "lint"})
    );
    assert_eq!(run.completion()["failed_checks"], json!([]));
    // Last write wins, and the history keeps every result.
    run.check("core", "lint", false, None, &ev("lint regressed"))
        .assert_ok();
    assert_eq!(run.completion()["failed_checks"], json!(["core:lint"]));
    let history = &run.cached_state()["check_history"]["core"]["lint"];
    assert_eq!(
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["passed"].clone())
            .collect::<Vec<_>>(),
        [json!(false), json!(true), json!(false)]
    );
    run.verify();
}

#[test]
fn check_result_refusals() {
    let run = checked();
    let e = ev("c");
    let call = |input: Value| run.input("check-result", &e, &input);
    run.refused(
        || call(json!({"component_id": "core", "check_id": "unit", "passed": true})),
        5,
        "component check is not registered",
    );
    run.refused(
        || call(json!({"component_id": "ghost", "check_id": "lint", "passed": true})),
        5,
        "component check is not registered",
    );
    run.refused(
        || call(json!({"component_id": "core", "check_id": "lint", "passed": "yes"})),
        2,
        "check result passed must be a boolean",
    );
    run.refused(
        || call(json!({"component_id": "core", "check_id": "lint"})),
        2,
        "JSON input fields do not match the command contract",
    );
    run.refused(
        || call(json!({"component_id": "core", "check_id": "lint", "passed": true, "note": "x"})),
        2,
        "JSON input fields do not match the command contract",
    );
    run.refused(
        || call(json!({"component_id": "core", "check_id": "l int", "passed": true})),
        2,
        "check id must match the identifier contract",
    );
    run.refused(
        || run.check("core", "lint", true, None, &json!([])),
        2,
        "lifecycle transition requires evidence",
    );
}

// ---------------------------------------------------------------- component-evidence

#[test]
fn component_evidence_covers_once_the_owner_completed_and_checks_pass() {
    let run = checked();
    let proof = ev("core verified at the exact head");
    run.refused(
        || run.cover("core", &proof),
        5,
        "component owner lane is not completed",
    );
    run.complete_lane("b", &ev("core done")).assert_ok();
    let e = run.refused(
        || run.cover("core", &proof),
        5,
        "component required checks are incomplete",
    );
    common::assert_taught(
        &e,
        json!({"component_id": "core", "checks_not_passed": ["lint"]}),
        |hint| hint.starts_with("report lint of core as passed with check-result first"),
    );
    run.check("core", "lint", true, None, &ev("lint clean"))
        .assert_ok();
    run.cover("core", &proof).assert_ok();
    let event = run.events().pop().unwrap();
    assert_eq!(event["event_type"], "evidence_attached");
    assert_eq!(event["evidence_refs"], proof);
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "component_id": "core", "coverage_state": "covered"})
    );
    run.refused(
        || run.cover("core", &ev("again")),
        5,
        "component evidence is already attached",
    );
    assert_eq!(run.completion()["missing_components"], json!([]));
}

#[test]
fn heartbeat_evidence_never_covers_a_component() {
    let run = checked();
    let beat = ev("agent-b still alive");
    run.heartbeat("b", &beat);
    run.complete_lane("b", &ev("core done")).assert_ok();
    run.check("core", "lint", true, None, &ev("lint clean"))
        .assert_ok();
    run.refused(
        || run.cover("core", &beat),
        2,
        "liveness evidence cannot satisfy completion evidence",
    );
    // The evidence rule answers before the component rules.
    run.refused(
        || run.cover("ghost", &beat),
        2,
        "liveness evidence cannot satisfy completion evidence",
    );
}

#[test]
fn component_evidence_refusals() {
    let run = checked();
    run.refused(
        || run.cover("ghost", &ev("x")),
        5,
        "topology component does not exist",
    );
    run.refused(
        || run.cover("core", &json!([])),
        2,
        "lifecycle transition requires evidence",
    );
    run.refused(
        || {
            run.input(
                "component-evidence",
                &ev("x"),
                &json!({"component_id": "core", "x": 1}),
            )
        },
        2,
        "JSON input fields do not match the command contract",
    );
    run.refused(
        || {
            run.input(
                "component-evidence",
                &ev("x"),
                &json!({"component_id": "c/d"}),
            )
        },
        2,
        "component id must match the identifier contract",
    );
}

// ---------------------------------------------------------------- surface

#[test]
fn help_texts_are_the_reference_ones() {
    let (_tmp, flow) = crate::bed::flow_elsewhere();
    common::assert_helps_say(
        &flow,
        &[
            (
                "completion-check",
                "Read-only. Capability: Phase 2 only. Safe next: complete or repair the reported evidence gap. In-place migration is unavailable.",
            ),
            (
                "topology-register",
                "Mutation. Capability: Phase 2 only. Safe next: check-result. In-place migration is unavailable.",
            ),
            (
                "topology-remove",
                "Mutation. Capability: Phase 2 only. Safe next: completion-check. In-place migration is unavailable.",
            ),
            (
                "check-result",
                "Mutation. Capability: Phase 2 only. Safe next: component-evidence. In-place migration is unavailable.",
            ),
            (
                "component-evidence",
                "Mutation. Capability: Phase 2 only. Safe next: completion-check. In-place migration is unavailable.",
            ),
            (
                "lane-resolve",
                "Mutation. Capability: Phase 2 only. Safe next: completion-check. In-place migration is unavailable.",
            ),
            (
                "complete",
                "Mutation. Capability: Phase 2 only. Safe next: live-report-create after separately approved live apply. In-place migration is unavailable.",
            ),
        ],
    );
}

#[test]
fn every_new_command_answers_exit_7_on_a_phase1_run() {
    let bed = common::Phase1Bed::new();
    let mutations: Vec<(&str, &[&str])> = vec![
        ("topology-register", &["--input", "/nonexistent.json"]),
        (
            "topology-remove",
            &["--component-id", "runtime", "--reason", "r"],
        ),
        ("check-result", &["--input", "/nonexistent.json"]),
        ("component-evidence", &["--input", "/nonexistent.json"]),
        (
            "lane-resolve",
            &["--lane-id", "l", "--resolution-lane-id", "m", "--at", T0],
        ),
        ("complete", &[]),
    ];
    common::unchanged(&bed.root, || {
        for (command, extra) in mutations {
            common::assert_phase1_unsupported(&bed.mutate(command, extra), command);
        }
        let check = bed.read("completion-check", &[]);
        common::assert_phase1_unsupported(&check, "completion-check");
    });
}
