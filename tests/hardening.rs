//! Crash and path safety through the binary (issue 14): a panic ends in the
//! envelope; a broken `receipt-head.json` is refused before any append and
//! diagnosed rather than failed on; integers the reference could not read
//! back are refused.

mod common;
mod reliability;

use reliability::{LaneRun, lines};
use std::os::unix::fs::PermissionsExt;

fn lane_run() -> (tempfile::TempDir, LaneRun) {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let run = LaneRun::new(&base, &["a"]);
    (tmp, run)
}

#[test]
fn a_panic_ends_in_the_envelope_with_an_exit_status_of_the_table() {
    let (_tmp, run) = lane_run();
    let before = run.receipt();
    for argv in [
        run.read_args("verify", &[]),
        run.heartbeat_args("a", "panic"),
    ] {
        let mut flow = common::Flow::new(&run.base);
        flow.envs.push(("BLUETAPE_TEST_PANIC".into(), "1".into()));
        let out = flow.run(&argv);
        let e = out.assert_error(2, "contract_error");
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "one line, no panic text: {out:?}"
        );
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with("internal error (a bug in bluetape-flow): test-only panic trigger"),
            "{message}"
        );
        assert!(message.contains("run verify before retrying"), "{message}");
    }
    assert_eq!(run.receipt(), before);
}

/// The broken head records of the issue: a directory, then a file with a
/// wider mode. Each is refused before the append (exit 2, nothing written),
/// `verify` names it as a state-root rule (exit 2), `receipt-diagnose`
/// still answers with it as a finding, and once it is repaired the run goes
/// on with a fresh head.
#[test]
fn a_broken_head_record_is_refused_before_the_append_and_diagnosed() {
    let (_tmp, run) = lane_run();
    let head = run.run_dir().join("receipt-head.json");
    assert!(head.is_file(), "our appends keep a head");
    for (i, (case, break_it, repair)) in [
        (
            "directory",
            Box::new(|p: &std::path::Path| {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
            }) as Box<dyn Fn(&std::path::Path)>,
            Box::new(|p: &std::path::Path| std::fs::remove_dir(p).unwrap())
                as Box<dyn Fn(&std::path::Path)>,
        ),
        (
            "mode 0644",
            Box::new(|p: &std::path::Path| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap()
            }),
            Box::new(|p: &std::path::Path| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap()
            }),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        break_it(&head);
        let before = run.receipt();
        let out = run
            .flow
            .run(&run.heartbeat_args("a", &format!("broken-{i}")));
        let e = out.assert_error(2, "contract_error");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("acknowledged receipt head record"),
            "{case}: {e}"
        );
        assert_eq!(run.receipt(), before, "{case}: nothing appended");
        let e = run.read("verify", &[]).assert_error(2, "contract_error");
        assert!(
            e["message"].as_str().unwrap().contains("receipt-head.json"),
            "{case}: {e}"
        );
        let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
        assert_eq!(
            diagnosis["effective_state"], "running",
            "{case}: {diagnosis}"
        );
        assert_eq!(
            diagnosis["last_trusted_sequence"],
            lines(&before).len(),
            "{case}"
        );
        assert!(
            diagnosis["head_record_finding"]
                .as_str()
                .unwrap()
                .contains("acknowledged receipt head record"),
            "{case}: {diagnosis}"
        );
        repair(&head);
        run.flow
            .run(&run.heartbeat_args("a", &format!("repaired-{i}")))
            .assert_ok();
        assert!(head.is_file(), "{case}: a fresh head is written");
        run.read("verify", &[]).assert_ok();
        let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
        assert!(
            diagnosis.get("head_record_finding").is_none(),
            "{diagnosis}"
        );
    }
}

/// Python cannot parse an integer of more than 4,300 digits, so the
/// reference could neither verify nor write a run holding one: such input
/// is refused (exit 2), the limit itself is accepted and stored exactly.
#[test]
fn integers_are_bounded_to_what_the_reference_can_read() {
    let (_tmp, run) = lane_run();
    let evidence = |digits: usize| {
        let path = run.inputs.join(format!("digits-{digits}.json"));
        let text = format!(
            "[{{\"kind\": \"test\", \"summary\": \"digits {digits}\", \"exit_status\": {}}}]",
            "7".repeat(digits)
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let beat = |path: &std::path::Path| {
        run.mutation(
            "heartbeat",
            &[
                "--evidence".into(),
                path.into(),
                "--input".into(),
                run.inputs.join("beat-a.json").into(),
            ],
        )
    };
    let before = run.receipt();
    let e = beat(&evidence(4301)).assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        "JSON input integers must have at most 4300 digits (the reference cannot read longer ones)"
    );
    assert_eq!(run.receipt(), before);
    beat(&evidence(4300)).assert_ok();
    let receipt = String::from_utf8(run.receipt()).unwrap();
    let last: serde_json::Value = serde_json::from_str(receipt.lines().last().unwrap()).unwrap();
    let intent = &last["metadata"]["intents"][0];
    assert_eq!(intent["event_type"], "heartbeat_observed", "{last}");
    assert_eq!(
        intent["evidence_refs"][0]["exit_status"].to_string(),
        "7".repeat(4300)
    );
}
