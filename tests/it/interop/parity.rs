//! Our read-only commands give the reference's verdict on every state root
//! the reference wrote, healthy and damaged: same exit status, same error
//! code, same first bad sequence, byte-identical success JSON. Issue 2 needs
//! `verify`; `receipt-diagnose` and `resume-check` share its read path;
//! issue 4 adds `completion-check`.

use crate::bed as common;

use common::{Flow, prepare_state, scenarios};
use serde_json::Value;

#[test]
fn verify_matches_the_reference_on_every_fixture() {
    assert!(compare("verify") >= 40);
}

#[test]
fn receipt_diagnose_matches_the_reference_on_every_fixture() {
    assert!(compare("receipt-diagnose") >= 40);
}

#[test]
fn resume_check_matches_the_reference_on_every_fixture() {
    assert!(compare("resume-check") >= 40);
}

#[test]
fn completion_check_matches_the_reference_on_every_fixture() {
    assert!(compare("completion-check") >= 40);
}

fn compare(command: &str) -> usize {
    let mut checked = 0;
    for scenario in scenarios() {
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(scenario.join("expected.json")).unwrap())
                .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        prepare_state(&scenario, &state);
        let flow = Flow::new(tmp.path());
        let before = common::snapshot(&state);
        for (run_id, run) in expected["runs"].as_object().unwrap() {
            let entry = &run[command];
            let argv = common::expand_argv(entry["argv"].as_array().unwrap(), &state, &scenario);
            let out = flow.run(&argv);
            let name = format!("{} {run_id}", scenario.display());
            assert_eq!(
                out.code as i64,
                entry["exit_status"].as_i64().unwrap(),
                "{name}: {out:?}"
            );
            let state_text = state.to_string_lossy();
            if out.code == 0 {
                let want: Value = serde_json::from_str(entry["stdout"].as_str().unwrap()).unwrap();
                let got: Value =
                    serde_json::from_str(&out.stdout.replace(&*state_text, "{STATE}")).unwrap();
                assert_eq!(got, want, "{name}");
                // Byte-identical envelope, not just the same JSON.
                assert_eq!(
                    out.stdout.replace(&*state_text, "{STATE}"),
                    entry["stdout"].as_str().unwrap(),
                    "{name}"
                );
            } else {
                let want: Value = serde_json::from_str(entry["stderr"].as_str().unwrap()).unwrap();
                let got = out.error();
                for key in ["ok", "error", "retryable", "next_command"] {
                    assert_eq!(got[key], want[key], "{name}: {key}");
                }
                // Same first bad sequence: the reference's messages carry it.
                assert_eq!(got["message"], want["message"], "{name}");
                // Our extra keys name the trusted prefix; they agree with the
                // reference's own diagnosis of the same bytes.
                if command == "verify" {
                    let diagnosis: Value =
                        serde_json::from_str(run["receipt-diagnose"]["stdout"].as_str().unwrap())
                            .unwrap();
                    for key in [
                        "first_bad_sequence",
                        "last_trusted_sequence",
                        "last_trusted_checksum",
                    ] {
                        assert_eq!(got[key], diagnosis[key], "{name}: {key}");
                    }
                }
            }
            checked += 1;
        }
        assert_eq!(
            before,
            common::snapshot(&state),
            "verify changed {}",
            scenario.display()
        );
    }
    checked
}
