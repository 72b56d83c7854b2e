//! Our read-only commands give the reference's verdict on every state root
//! the reference wrote, healthy and damaged: same exit status, same error
//! code, same first bad sequence, byte-identical success JSON: `verify`
//! (reference-runtime §4.3), `receipt-diagnose` and `resume-check`, which
//! share its read path, and `completion-check` (reference-coordinator
//! §10.6).

use crate::bed as common;

use common::fixture_copies;
use serde_json::Value;

#[test]
fn verify_matches_the_reference_on_every_fixture() {
    assert!(compare("verify") >= 40);
}

/// The read commands that share `verify`'s read path.
#[test]
fn diagnose_resume_check_and_completion_check_match_the_reference_on_every_fixture() {
    for command in ["receipt-diagnose", "resume-check", "completion-check"] {
        let checked = compare(command);
        assert!(checked >= 40, "{command}: only {checked} runs compared");
    }
}

fn compare(command: &str) -> usize {
    let mut checked = 0;
    for copy in fixture_copies() {
        let what = format!("{command} of {}", copy.scenario.display());
        common::read_only(&copy.state, what, || {
            for (run_id, run) in copy.runs() {
                let entry = &run[command];
                let out = copy.run_recorded(entry);
                let name = format!("{} {run_id}", copy.scenario.display());
                let keys = ["ok", "error", "retryable", "next_command", "message"];
                if out.code == 0 {
                    // The same JSON, and (checked by assert_recorded) the
                    // byte-identical envelope.
                    let state_text = copy.state.to_string_lossy();
                    let want: Value =
                        serde_json::from_str(entry["stdout"].as_str().unwrap()).unwrap();
                    let got: Value =
                        serde_json::from_str(&out.stdout.replace(&*state_text, "{STATE}")).unwrap();
                    assert_eq!(got, want, "{name}");
                }
                // Same first bad sequence: the reference's messages carry it.
                let failure = copy.assert_recorded(&out, entry, &keys, &name);
                // Our extra keys name the trusted prefix; they agree with the
                // reference's own diagnosis of the same bytes.
                if let Some(got) = failure
                    && command == "verify"
                {
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
                checked += 1;
            }
        });
    }
    checked
}
