//! cli-conventions §5 "Rules by name" and DEVIATIONS 90: every refusal
//! names its real cause and a value that passes. Table-driven: each case
//! keeps the reference's `ok`, `error`, `retryable` and `next_command`
//! (checked by hand against the Python reference for these very calls,
//! `scripts/teach-oracle.py`), says its cause in `hint` (and `fields`), and
//! never sends a caller to recovery for a typo. Where the hint gives a
//! value, the test takes it from the hint and shows that it passes the
//! rule.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

use crate::bed::{Flow, Output, init_argv, lane_argv, mutation_argv, unchanged};

/// A run with lane `api` created (agent-1), approved and started.
pub(crate) struct Bed {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub flow: Flow,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub run: String,
    pub owner: PathBuf,
}

impl Bed {
    pub(crate) fn new() -> Bed {
        let made = crate::bed::init_run("api");
        let bed = Bed {
            _tmp: made.tmp,
            base: made.base,
            flow: made.flow,
            root: made.root,
            repo: made.repo,
            run: made.run_id,
            owner: made.owner,
        };
        bed.ok(
            "run-approve",
            &["--evidence", &bed.ev("user_approval", "ok")],
        );
        bed.ok("run-start", &["--evidence", &bed.ev("plan", "start")]);
        let lane = bed.put(&json!({"lane_id": "api", "agent_id": "agent-1",
            "assignment": "Build the API", "write_scope": ["src/api"],
            "fallback": "main session", "observed_at": "2026-07-14T01:00:00Z",
            "startup_ack_deadline": "2026-07-14T01:00:30Z",
            "command_deadline": "2026-07-14T01:30:00Z"}));
        bed.ok(
            "lane-create",
            &["--input", &lane, "--evidence", &bed.ev("plan", "assign")],
        );
        bed
    }

    /// A JSON file in the workspace (a new name each call).
    pub(crate) fn put(&self, value: &Value) -> String {
        let n = std::fs::read_dir(&self.base).unwrap().count();
        let path = self.base.join(format!("in-{n}.json"));
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    pub(crate) fn ev(&self, kind: &str, summary: &str) -> String {
        self.put(&json!([{"kind": kind, "summary": summary}]))
    }

    pub(crate) fn mutate(&self, command: &str, rest: &[&str]) -> Output {
        self.flow.run(&mutation_argv(
            &self.root,
            command,
            &self.run,
            &self.owner,
            rest,
        ))
    }

    pub(crate) fn ok(&self, command: &str, rest: &[&str]) -> Value {
        self.mutate(command, rest).assert_ok()
    }

    pub(crate) fn lane_step(&self, command: &str, at: &str, evidence: &str) -> Output {
        self.mutate(command, &lane_argv("api", "agent-1", at, evidence))
    }

    /// The lane started and acknowledged.
    pub(crate) fn running(self) -> Bed {
        self.lane_step(
            "lane-start",
            "2026-07-14T01:00:05Z",
            &self.ev("lifecycle", "spawned"),
        )
        .assert_ok();
        self.lane_step(
            "startup-ack",
            "2026-07-14T01:00:10Z",
            &self.ev("lifecycle", "ack"),
        )
        .assert_ok();
        self
    }

    fn reassign(&self, assignment: &str, evidence: &Value) -> Output {
        let input = self.put(&json!({"lane_id": "api", "replacement_lane_id": "api-2",
            "replacement_agent_id": "agent-2", "decided_at": "2026-07-14T01:40:00Z",
            "replacement_assignment": assignment, "replacement_write_scope": ["src/api"],
            "replacement_startup_ack_deadline": "2026-07-14T01:41:00Z",
            "replacement_command_deadline": "2026-07-14T02:10:00Z"}));
        let evidence = self.put(evidence);
        self.mutate(
            "lane-reassign",
            &["--input", &input, "--evidence", &evidence],
        )
    }

    fn heartbeat(&self, reason: &str, evidence: &str) -> Output {
        let input = self.put(&json!({"lane_id": "api", "agent_id": "agent-1",
            "observed_at": "2026-07-14T01:01:00Z",
            "silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": reason}));
        self.mutate("heartbeat", &["--input", &input, "--evidence", evidence])
    }
}

/// One refusal: the reference's keys it keeps, the start of its message,
/// what its `hint` must and must not say, and the `fields` it carries.
type Case = crate::bed::RefusalCase;

/// What a hint must never say to a caller whose input was only wrong.
const NO_RECOVERY: &[&str] = &["recovery-run-create", "receipt-diagnose", "trust ends"];

#[track_caller]
fn check(case: &Case, out: &Output) -> Value {
    let name = case.name;
    assert_eq!(out.code, case.exit, "{name}: {out:?}");
    let e = out.error();
    assert_eq!(e["error"], case.error, "{name}: {e}");
    case.assert_retry_keys(&e);
    let message = e["message"].as_str().unwrap();
    assert!(message.starts_with(case.message), "{name}: message {e}");
    let hint = e["hint"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no hint in {e}"));
    for part in case.hint {
        assert!(hint.contains(part), "{name}: hint lacks {part:?}: {hint}");
    }
    for part in case.not_in_hint {
        assert!(!hint.contains(part), "{name}: hint says {part:?}: {hint}");
    }
    case.assert_fields(&e);
    e
}

/// A refusal of input that was only wrong: exit `exit`, its hint free of
/// recovery advice.
fn only_wrong(exit: i32) -> Case {
    Case {
        not_in_hint: NO_RECOVERY,
        ..Case::typed(exit)
    }
}

/// An input refusal (exit 2) whose `fields` name one invalid field of one
/// input, its hint free of recovery advice.
fn one_invalid_field(
    name: &'static str,
    message: &'static str,
    hint: &'static [&'static str],
    (input, field): (&str, &str),
    expected: &str,
) -> Case {
    Case {
        name,
        message,
        hint,
        fields: Some(json!({"input": input,
            "invalid": [{"field": field, "expected": expected}]})),
        ..only_wrong(2)
    }
}

/// The JSON value a hint gives after "e.g. " (to its end).
fn example(e: &Value) -> Value {
    let hint = e["hint"].as_str().unwrap();
    let at = hint.find("e.g. ").expect("the hint gives an example") + 5;
    serde_json::from_str(&hint[at..]).unwrap_or_else(|_| panic!("no JSON example in {hint}"))
}

/// The literal-word rules of `lane-reassign` and `interrupt-result`, and
/// the heartbeat's "new evidence" rule: the word is named, the example the
/// hint gives passes the rule, and nothing is written by the refusal.
#[test]
fn literal_word_rules_name_the_word_and_a_value_that_passes() {
    let bed = Bed::new();
    let recovery = json!([{"kind": "recovery", "summary": "recovered checkpoint: handlers done"}]);
    let out = unchanged(&bed.root, || {
        bed.reassign("Continue the API work", &recovery)
    });
    let e = check(
        &one_invalid_field(
            "a replacement assignment without the word",
            "replacement assignment must identify recovered checkpoint context",
            &["the word \"checkpoint\"", "replacement_assignment"],
            ("--input", "replacement_assignment"),
            "a text containing the word \"checkpoint\" (any case)",
        ),
        &out,
    );
    // The hint's example assignment passes this rule: the next refusal is
    // another one (the lane is not recovering).
    let hint = e["hint"].as_str().unwrap();
    let at = hint.find("e.g. ").unwrap() + 5;
    let given: Value = serde_json::from_str(&format!("{{{}}}", &hint[at..])).unwrap();
    let assignment = given["replacement_assignment"].as_str().unwrap();
    let out = bed.reassign(assignment, &recovery);
    assert_eq!(out.code, 5, "{out:?}");
    assert!(!out.stderr.contains("checkpoint context"), "{out:?}");

    let out = unchanged(&bed.root, || {
        bed.reassign(
            assignment,
            &json!([{"kind": "recovery", "summary": "state recovered"}]),
        )
    });
    let e = check(
        &one_invalid_field(
            "recovery evidence without the word",
            "checkpoint recovery evidence is required",
            &["kind \"recovery\"", "the word \"checkpoint\""],
            ("--evidence", "summary"),
            "an item of kind \"recovery\" whose summary contains the word \"checkpoint\" (any case)",
        ),
        &out,
    );
    let out = bed.reassign(assignment, &example(&e));
    assert_eq!(out.code, 5, "{out:?}");
    assert!(!out.stderr.contains("recovery evidence"), "{out:?}");

    let bed = bed.running();
    let tool = bed.ev("tool", "the agent was stopped");
    let out = unchanged(&bed.root, || {
        bed.lane_step("interrupt-result", "2026-07-14T01:40:00Z", &tool)
    });
    let e = check(
        &one_invalid_field(
            "interrupt evidence without the word",
            "native interrupt tool evidence is required",
            &["kind \"tool\"", "the word \"interrupt\""],
            ("--evidence", "summary"),
            "an item of kind \"tool\" whose summary contains the word \"interrupt\" (any case)",
        ),
        &out,
    );
    let out = bed.lane_step(
        "interrupt-result",
        "2026-07-14T01:40:00Z",
        &bed.put(&example(&e)),
    );
    assert_eq!(out.code, 5, "{out:?}");
    assert!(
        out.stderr.contains("interrupt requires a recovering lane"),
        "{out:?}"
    );

    // Heartbeat: the same evidence and reason are refused; the hint says
    // new evidence is needed, not a new reason (which is refused too).
    let beat = bed.ev("log", "compiling");
    bed.heartbeat("compiling", &beat).assert_ok();
    let out = unchanged(&bed.root, || bed.heartbeat("compiling", &beat));
    let e = check(
        &Case {
            name: "a heartbeat with nothing new",
            message: "liveness evidence is unchanged",
            hint: &[
                "need new evidence",
                "a new reason with the same evidence is refused",
            ],
            not_in_hint: &["or a new reason"],
            fields: None,
            ..Case::typed(2)
        },
        &out,
    );
    // What the hint says holds: a new reason alone is refused ...
    let out = bed.heartbeat("still compiling", &beat);
    assert_eq!(out.code, 2, "{out:?}");
    // ... and the new evidence it gives passes.
    bed.heartbeat("compiling", &bed.put(&example(&e)))
        .assert_ok();
}

/// A wrong `--state-root` or a mistyped run id: the reference's exit 3
/// `receipt_corrupt` stays, the hint names the real cause and how to find
/// the right value, never recovery.
#[test]
fn a_missing_state_root_or_run_is_named_not_sent_to_recovery() {
    let bed = Bed::new();
    let verify = |root: &Path, run: &str| {
        bed.flow
            .run(&crate::bed::read_argv(root, "verify", run, &[]))
    };
    let missing = bed.base.join("no-such-root");
    let out = verify(&missing, &bed.run);
    check(
        &Case {
            name: "a wrong --state-root",
            message: "run manifest snapshot is missing or invalid",
            hint: &[
                "there is no state root at",
                "no-such-root",
                "--state-root",
                "bluetape-flow state-root",
                "not damage",
            ],
            ..only_wrong(3)
        },
        &out,
    );
    assert!(!missing.exists(), "a read created the state root");
    let out = verify(&bed.repo, &bed.run);
    check(
        &Case {
            name: "a --state-root that is no state root",
            message: "run manifest snapshot is missing or invalid",
            hint: &["holds no runs/ directory", "--state-root"],
            ..only_wrong(3)
        },
        &out,
    );
    let typo = format!("{}x", bed.run);
    // A mutation, a read-only command, a diagnosis and a view: the same
    // answer, nothing written.
    let owner = bed.owner.to_str().unwrap();
    let root = bed.root.to_str().unwrap();
    let ev = bed.ev("plan", "x");
    // `receipt-diagnose` of a run that is not there: the reference's exit
    // 2 `contract_error` on the first missing path, with the same hint.
    let diagnose = |root: &str, run: &str| {
        unchanged(&bed.root, || {
            bed.flow
                .run(&["--state-root", root, "receipt-diagnose", "--run-id", run])
        })
    };
    let no_root = missing.to_string_lossy().into_owned();
    let no_runs = bed.repo.to_string_lossy().into_owned();
    let cases: [(
        &'static str,
        &str,
        &str,
        std::path::PathBuf,
        &'static [&'static str],
    ); 3] = [
        (
            "a mistyped run id",
            root,
            typo.as_str(),
            bed.root.join("runs").join(&typo),
            &["no run ", "not damage"],
        ),
        (
            "a wrong --state-root",
            no_root.as_str(),
            bed.run.as_str(),
            missing.clone(),
            &["there is no state root at", "not damage"],
        ),
        (
            "no runs/",
            no_runs.as_str(),
            bed.run.as_str(),
            bed.repo.join("runs"),
            &["holds no runs/ directory", "not damage"],
        ),
    ];
    for (name, root, run, path, hint) in cases {
        let out = diagnose(root, run);
        let e = check(
            &Case {
                name,
                message: "No such file or directory: '",
                hint,
                // The OS error's kind reaches the envelope (DEVIATIONS 49).
                fields: Some(json!({"errno": "ENOENT", "path": path.to_string_lossy()})),
                ..only_wrong(2)
            },
            &out,
        );
        let message = format!("No such file or directory: '{}' (ENOENT)", path.display());
        assert_eq!(e["message"], message.as_str(), "{name}");
    }
    let calls: Vec<Vec<&str>> = vec![
        vec!["verify"],
        vec!["resume-check"],
        vec!["status"],
        vec!["log"],
        vec![
            "run-block",
            "--owner-file",
            owner,
            "--evidence",
            &ev,
            "--reason",
            "r",
        ],
    ];
    for call in calls {
        let mut argv = vec!["--state-root", root, call[0], "--run-id", &typo];
        argv.extend_from_slice(&call[1..]);
        let out = unchanged(&bed.root, || bed.flow.run(&argv));
        let e = check(
            &Case {
                name: "a mistyped run id",
                message: "run manifest snapshot is missing or invalid",
                hint: &["no run ", "check --run-id", "status lists every run"],
                ..only_wrong(3)
            },
            &out,
        );
        // The run ids it lists are the real ones.
        let hint = e["hint"].as_str().unwrap();
        assert!(
            hint.contains(&format!("its runs are {}", bed.run)),
            "{}: {hint}",
            call[0]
        );
    }
}

/// Our own offline commands (`check-proof`, `bundle-verify`) and `publish`
/// answer with their own error codes and causes, and the offline ones
/// print no `state_root` they never used.
#[test]
fn proofs_bundles_and_publish_answer_their_own_causes() {
    let bed = Bed::new();
    let w = |name: &str| bed.base.join(name).to_string_lossy().into_owned();
    // Two signers; the run is signed by the first only.
    let mut vkeys = Vec::new();
    for name in ["one", "two"] {
        let out = bed
            .flow
            .run(&["key-generate", "--name", name, "--out", &w(name)]);
        let made = out.assert_ok();
        assert!(made.get("state_root").is_none(), "{made}");
        std::fs::write(
            w(&format!("{name}.pub")),
            made["verifier_key"].as_str().unwrap(),
        )
        .unwrap();
        vkeys.push(w(&format!("{name}.pub")));
    }
    let root = bed.root.to_str().unwrap();
    let read = |args: &[&str]| {
        let mut argv = vec!["--state-root", root];
        argv.extend_from_slice(args);
        bed.flow.run(&argv)
    };
    read(&["sign-head", "--run-id", &bed.run, "--key", &w("one")]).assert_ok();
    read(&[
        "prove-event",
        "--run-id",
        &bed.run,
        "--sequence",
        "1",
        "--out",
        &w("proof.txt"),
    ])
    .assert_ok();
    let line = std::fs::read_to_string(bed.root.join("runs").join(&bed.run).join("receipt.jsonl"))
        .unwrap();
    std::fs::write(w("event.jsonl"), line.lines().next().unwrap()).unwrap();
    let proof = |key: &str| {
        bed.flow.run(&[
            "check-proof",
            "--proof",
            &w("proof.txt"),
            "--event",
            &w("event.jsonl"),
            "--key",
            key,
        ])
    };
    let good = proof(&vkeys[0]).assert_ok();
    assert!(good.get("state_root").is_none(), "{good}");
    check(
        &Case {
            name: "a proof checked with another key",
            exit: 3,
            error: "proof_invalid",
            retryable: false,
            next_command: None,
            message: "proof does not verify: ",
            hint: &["no state-root damage", "prove-event", "--key"],
            not_in_hint: NO_RECOVERY,
            fields: None,
        },
        &proof(&vkeys[1]),
    );
    // A bundle of a run that was never signed, checked with --key.
    let unsigned = bed.flow.run(&init_argv(
        &bed.root,
        "A",
        &bed.repo,
        &bed.root.join("handles/second.owner"),
        &["api"],
    ));
    let second = unsigned.assert_ok()["run_id"].as_str().unwrap().to_string();
    read(&["bundle-export", "--run-id", &second, "--out", &w("b.tar")]).assert_ok();
    let plain = bed.flow.run(&["bundle-verify", &w("b.tar")]).assert_ok();
    assert!(plain.get("state_root").is_none(), "{plain}");
    check(
        &Case {
            name: "a bundle with no heads checked with --key",
            message: "bundle refused: the bundle holds no signed head",
            hint: &["has none", "sign-head", "drop --key"],
            fields: Some(json!({"input": "--key", "heads": 0})),
            ..only_wrong(2)
        },
        &bed.flow
            .run(&["bundle-verify", &w("b.tar"), "--key", &vkeys[0]]),
    );
    // publish onto a branch: refused before anything, the branch untouched.
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&bed.repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q", "-b", "master"]);
    git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    let refs = git(&["for-each-ref"]);
    for reference in ["refs/heads/master", "refs/heads/new", "refs/tags/v1"] {
        let out = read(&["publish", "--run-id", &bed.run, "--ref", reference]);
        let e = check(
            &Case {
                name: "publish onto a non-publication ref",
                message: "refs/",
                hint: &["drop --ref", "refs/bluetape/runs/", "never written"],
                fields: Some(json!({"input": "--ref"})),
                ..only_wrong(2)
            },
            &out,
        );
        assert!(
            crate::bed::str_field(&e, "message").contains("is not a publication ref"),
            "{e}"
        );
        assert_eq!(git(&["for-each-ref"]), refs, "{reference} was written");
    }
    read(&["publish", "--run-id", &bed.run]).assert_ok();
}
