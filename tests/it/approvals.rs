//! Approval gates (our extension, contracts/approvals.md) through the
//! binary: `init --approval-policy`, `run-approve` under a frozen policy
//! (identity from `BLUETAPE_APPROVED_BY` only, four eyes, the designated
//! approver, a pinned credential, the approval window), single use, denial
//! through `run-cancel`, a tampered policy file, and the `approvals` view.
//! Every refusal asserts exit status, error code, message, `retryable` and
//! an unchanged state; a gated receipt still verifies under the reference's
//! rules (and under the reference itself when `BLUETAPE_REFERENCE` names it).

use crate::bed as common;
use crate::bed::TestBed;

use common::{Flow, Output, Snapshot};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const FOUR_EYES: &str = r#"{"required_approver": "alice", "require_different_approver": true,
    "initiated_by": "agent-1", "expires_after_s": 3600}"#;

struct Gate {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    flow: Flow,
    root: PathBuf,
    run_id: String,
    evidence: PathBuf,
}

/// `init --approval-policy` with `policy` (and extra environment).
fn try_init(base: &Path, flow: &Flow, policy: &str, envs: &[(&str, &str)]) -> Output {
    try_init_as(base, flow, policy, envs, "main")
}

/// `init --approval-policy` with the owner handle `handles/<owner>.owner`.
fn try_init_as(
    base: &Path,
    flow: &Flow,
    policy: &str,
    envs: &[(&str, &str)],
    owner: &str,
) -> Output {
    let root = base.join("state");
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let file = base.join("policy.json");
    std::fs::write(&file, policy).unwrap();
    let owner = root.join(format!("handles/{owner}.owner"));
    let mut argv = common::init_argv(&root, "A", &repo, &owner, &["runtime"]);
    argv.extend(["--approval-policy".into(), file.into_os_string()]);
    flow.run_env(&argv, envs)
}

fn gate_with(policy: &str, envs: &[(&str, &str)]) -> Gate {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    let flow = Flow::new(&base);
    let out = try_init(&base, &flow, policy, envs).assert_ok();
    let run_id = out["run_id"].as_str().unwrap().to_string();
    let evidence = base.join("ev.json");
    std::fs::write(
        &evidence,
        r#"[{"kind":"user_approval","summary":"plan reviewed"}]"#,
    )
    .unwrap();
    let gate = Gate {
        _tmp: tmp,
        root: base.join("state"),
        base,
        flow,
        run_id,
        evidence,
    };
    assert_eq!(
        out["approval_policy_checksum"],
        gate.approvals()["policy_checksum"]
    );
    gate
}

/// A gated run like [`gate_with`], made by the library's `init` with its
/// clock pinned to `created` (an RFC 3339 UTC instant).
/// Nor can `--at` record an approval after the window on a fresh run: the
/// recorded time is what replay checks the window against.
#[test]
fn at_cannot_record_an_approval_after_the_window() {
    let g = gate_with(
        r#"{"required_approver": "alice", "expires_after_s": 60}"#,
        &[],
    );
    let created = g.receipt()[0]["timestamp"].as_str().unwrap().to_string();
    let late = (chrono::DateTime::parse_from_rfc3339(&created).unwrap()
        + chrono::Duration::seconds(61))
    .to_utc()
    .format("%Y-%m-%dT%H:%M:%S%.6fZ")
    .to_string();
    let before = g.snapshot();
    let out = g.flow.run_env(
        &g.argv("run-approve", &["--at", &late]),
        &[("BLUETAPE_APPROVED_BY", "alice")],
    );
    assert_eq!(out.code, 5, "{out:?}");
    assert_eq!(out.error()["error"], "approval_expired");
    assert_eq!(before, g.snapshot());
    g.flow
        .run_env(
            &g.argv("run-approve", &["--at", &created]),
            &[("BLUETAPE_APPROVED_BY", "alice")],
        )
        .assert_ok();
}

fn gate_created_at(policy: &str, created: &str) -> Gate {
    let made = common::init_gated(policy, created, &["runtime"], None);
    let evidence = made.base.join("ev.json");
    std::fs::write(
        &evidence,
        r#"[{"kind":"user_approval","summary":"plan reviewed"}]"#,
    )
    .unwrap();
    Gate {
        _tmp: made.tmp,
        root: made.root,
        base: made.base,
        flow: made.flow,
        run_id: made.run_id,
        evidence,
    }
}

fn gate() -> Gate {
    gate_with(FOUR_EYES, &[])
}

impl Gate {
    fn owner(&self) -> PathBuf {
        self.root.join("handles/main.owner")
    }

    fn argv(&self, command: &str, extra: &[&str]) -> Vec<String> {
        let mut rest = vec!["--evidence", self.evidence.to_str().unwrap()];
        rest.extend_from_slice(extra);
        common::mutation_argv(&self.root, command, &self.run_id, &self.owner(), &rest)
    }

    fn approve(&self, envs: &[(&str, &str)]) -> Output {
        self.flow.run_env(&self.argv("run-approve", &[]), envs)
    }

    fn cancel(&self, envs: &[(&str, &str)]) -> Output {
        self.flow.run_env(
            &self.argv("run-cancel", &["--reason", "plan rejected"]),
            envs,
        )
    }

    fn approvals_with(&self, extra: &[&str]) -> Output {
        self.flow.run(&common::read_argv(
            &self.root,
            "approvals",
            &self.run_id,
            extra,
        ))
    }

    fn approvals(&self) -> Value {
        self.approvals_with(&[]).assert_ok()
    }

    fn run_dir(&self) -> PathBuf {
        self.root.join("runs").join(&self.run_id)
    }

    fn policy_file(&self) -> PathBuf {
        self.run_dir().join("approval-policy.json")
    }

    fn receipt(&self) -> Vec<Value> {
        common::receipt_events(&self.root, &self.run_id)
    }

    /// Assert a final refusal that changed nothing.
    /// `run-approve` by `who` (BLUETAPE_APPROVED_BY) is refused as
    /// [`Gate::refused`] checks.
    fn refused_approval_by(
        &self,
        who: &str,
        before: &Snapshot,
        code: i32,
        error: &str,
        message: &str,
    ) {
        let out = self.approve(&[("BLUETAPE_APPROVED_BY", who)]);
        self.refused(out, before, code, error, message);
    }

    /// `run-approve` by each of `approvers` is refused for `cause`, the
    /// message naming the caller: `<cause>; run-approve by '<who>' refused`.
    fn refused_naming_the_caller(
        &self,
        approvers: &[&str],
        before: &Snapshot,
        code: i32,
        error: &str,
        cause: &str,
    ) {
        for who in approvers {
            let message = format!("{cause}; run-approve by '{who}' refused");
            self.refused_approval_by(who, before, code, error, &message);
        }
    }

    fn refused(&self, out: Output, before: &Snapshot, code: i32, error: &str, message: &str) {
        assert_refusal(&out, code, error, message);
        assert_eq!(
            *before,
            common::snapshot(&self.root),
            "the refusal changed the state"
        );
    }

    fn snapshot(&self) -> Snapshot {
        common::snapshot(&self.root)
    }

    fn credential(&self, name: &str, approver: &str, token: &str, mode: u32) -> PathBuf {
        let path = self.base.join(name);
        std::fs::write(
            &path,
            format!("{{\"approver\":\"{approver}\",\"token\":\"{token}\"}}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }
}

fn assert_refusal(out: &Output, code: i32, error: &str, message: &str) {
    assert_eq!(out.code, code, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], error, "{out:?}");
    common::assert_message(&e, message);
    assert_eq!(e["ok"], false);
    assert_eq!(e["retryable"], false, "{out:?}");
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The gated receipt verifies under the reference's rules, as our `verify`
/// applies them; when `BLUETAPE_REFERENCE` names the Python reference
/// (`python3 path/to/bluetape-flow.py`), the reference itself verifies it too.
/// The project cannot ship the reference, so the suite never requires it.
fn reference_verifies(root: &Path, run_id: &str) {
    let mut verifiers = vec![vec![env!("CARGO_BIN_EXE_bluetape-flow").to_string()]];
    if let Ok(other) = std::env::var("BLUETAPE_REFERENCE") {
        let words: Vec<String> = other.split_whitespace().map(str::to_string).collect();
        if !words.is_empty() {
            verifiers.push(words);
        }
    }
    for words in verifiers {
        let out = std::process::Command::new(&words[0])
            .args(&words[1..])
            .arg("--state-root")
            .arg(root)
            .args(["verify", "--run-id", run_id])
            .output()
            .unwrap();
        crate::bed::assert_ran(&out, format!("{} verify", words.join(" ")));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], true);
    }
}

// ------------------------------------------------------------ run-approve

#[test]
fn only_the_designated_approver_approves_and_refusals_consume_nothing() {
    let g = gate();
    let before = g.snapshot();
    g.refused(
        g.approve(&[]),
        &before,
        2,
        "approval_refused",
        "run-approve requires approver identity; set BLUETAPE_APPROVED_BY",
    );
    // (BLUETAPE_APPROVED_BY, the refusal's message): each refused (exit 2)
    // with nothing written.
    let refusals = [
        (
            "   ",
            "run-approve requires approver identity; set BLUETAPE_APPROVED_BY",
        ),
        (
            "agent-1",
            "approval must be granted by someone other than 'agent-1'",
        ),
        ("bob", "approval requires approver 'alice', got 'bob'"),
        (
            "al ice",
            "approver identity 'al?ice' is not valid: BLUETAPE_APPROVED_BY must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
    ];
    for (approved_by, message) in refusals {
        g.refused_approval_by(approved_by, &before, 2, "approval_refused", message);
    }
    // After four refusals the designated approver still can (the value is
    // trimmed).
    let out = g
        .approve(&[("BLUETAPE_APPROVED_BY", " alice\n")])
        .assert_ok();
    assert_eq!(out["run_state"], "approved");
    assert_eq!(out["sequence"], 2);
    let receipt = g.receipt();
    assert_eq!(receipt.len(), 2);
    let checksum = g.approvals()["policy_checksum"].clone();
    assert_eq!(
        receipt[1]["evidence_refs"],
        json!([{"kind": "user_approval", "summary": "plan reviewed"},
               {"kind": "approver_identity", "summary": "approved_by=alice source=env",
                "checksum": checksum}])
    );
    // Only evidence items carry the extension: the metadata is the reference's.
    assert_eq!(receipt[1]["metadata"], json!({"owner_epoch": 1}));
    assert_eq!(
        receipt[0]["evidence_refs"][0]["kind"], "approval_policy",
        "{:?}",
        receipt[0]
    );
    assert_eq!(
        receipt[0]["evidence_refs"][0]["path"],
        "approval-policy.json"
    );
    reference_verifies(&g.root, &g.run_id);
    let view = g.approvals();
    assert_eq!(
        view["decisions"],
        json!([{"decision": "approved", "by": "alice", "source": "env",
                "at": receipt[1]["timestamp"], "sequence": 2, "proof": "asserted", "key": null}])
    );
}

#[test]
fn an_approval_is_single_use() {
    let g = gate();
    g.approve(&[("BLUETAPE_APPROVED_BY", "alice")]).assert_ok();
    let before = g.snapshot();
    g.refused_naming_the_caller(
        &["alice", "bob"],
        &before,
        5,
        "coordinator_conflict",
        "approval was already consumed: the plan was approved at sequence 2 by 'alice'",
    );
    g.refused(
        g.approve(&[]),
        &before,
        5,
        "coordinator_conflict",
        "approval was already consumed: the plan was approved at sequence 2 by 'alice'; run-approve by an unidentified caller refused",
    );
}

#[test]
fn two_racing_approvals_exactly_one_wins() {
    for _ in 0..3 {
        let g = gate();
        let spawn = || {
            g.flow
                .command(&g.argv("run-approve", &[]))
                .env("BLUETAPE_APPROVED_BY", "alice")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap()).collect();
        assert_eq!(
            codes.iter().filter(|c| **c == 0).count(),
            1,
            "{codes:?} {outs:?}"
        );
        let loser = outs.iter().find(|o| !o.status.success()).unwrap();
        assert_eq!(loser.status.code(), Some(5), "{loser:?}");
        let approvals = g
            .receipt()
            .iter()
            .filter(|e| e["event_type"] == "plan_approved")
            .count();
        assert_eq!(approvals, 1);
        assert_eq!(g.approvals()["decisions"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn identity_never_travels_in_argv() {
    let g = gate();
    let before = g.snapshot();
    let out = g.flow.run_env(
        &g.argv("run-approve", &["--approved-by", "alice"]),
        &[("BLUETAPE_APPROVED_BY", "alice")],
    );
    assert_eq!(out.code, 2, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "contract_error");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("unexpected argument '--approved-by'"),
        "{message}"
    );
    assert_eq!(before, g.snapshot());
}

#[test]
fn an_expired_request_cannot_be_approved_whatever_at_claims() {
    // The window runs on the clock, not on `--at`: a run created (through
    // the library, which takes `now` as a value) in 2020 is long past a
    // 1 s window, with no waiting.
    let g = gate_created_at(
        r#"{"required_approver": "alice", "expires_after_s": 1}"#,
        "2020-01-01T00:00:00Z",
    );
    let created = g.receipt()[0]["timestamp"].as_str().unwrap().to_string();
    assert_eq!(created, "2020-01-01T00:00:00Z");
    let before = g.snapshot();
    let out = g.flow.run_env(
        &g.argv("run-approve", &["--at", &created]),
        &[("BLUETAPE_APPROVED_BY", "alice")],
    );
    assert_eq!(out.code, 5, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "approval_expired");
    assert_eq!(e["retryable"], false);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("approval request expired: ")
            && message.ends_with(
                " s since run_created exceed expires_after_s 1; approval by 'alice' refused"
            ),
        "{message}"
    );
    assert_eq!(before, g.snapshot());
    // Identity is checked before the window.
    g.refused_approval_by(
        "bob",
        &before,
        2,
        "approval_refused",
        "approval requires approver 'alice', got 'bob'",
    );
    // Stopping is still allowed.
    g.cancel(&[]).assert_ok();
}

#[test]
fn a_pinned_credential_is_required_and_must_match() {
    let token = "approver-secret-1";
    let policy = format!(
        r#"{{"required_approver": "alice", "approver_fingerprint": "{}"}}"#,
        sha256_hex(token)
    );
    let g = gate_with(&policy, &[]);
    let before = g.snapshot();
    let alice = ("BLUETAPE_APPROVED_BY", "alice");
    // Approval by alice with the credential file `file`, refused (exit 2)
    // with `message` and nothing written.
    let refused_with = |file: &Path, message: &str| {
        let credential = ("BLUETAPE_APPROVER_FILE", file.to_str().unwrap());
        let out = g.approve(&[alice, credential]);
        g.refused(out, &before, 2, "approval_refused", message);
    };
    g.refused(
        g.approve(&[alice]),
        &before,
        2,
        "approval_refused",
        "approval by 'alice' requires the pinned approver credential; set BLUETAPE_APPROVER_FILE",
    );
    let missing = g.base.join("nowhere.cred");
    refused_with(
        &missing,
        "approver credential of 'alice' is unusable: approver credential file is missing",
    );
    let wrong = g.credential("wrong.cred", "alice", "guessed", 0o600);
    refused_with(
        &wrong,
        "approver credential of 'alice' does not match the pinned fingerprint",
    );
    let loose = g.credential("loose.cred", "alice", token, 0o644);
    refused_with(
        &loose,
        "approver credential of 'alice' is unusable: approver credential does not have the required secure mode",
    );
    let carol = g.credential("carol.cred", "carol", token, 0o600);
    refused_with(&carol, "approver credential names 'carol', not 'alice'");
    let link = g.base.join("link.cred");
    let right = g.credential("alice.cred", "alice", token, 0o600);
    std::os::unix::fs::symlink(&right, &link).unwrap();
    refused_with(
        &link,
        "approver credential of 'alice' is unusable: approver credential must not be a symlink",
    );
    g.approve(&[alice, ("BLUETAPE_APPROVER_FILE", right.to_str().unwrap())])
        .assert_ok();
    let decisions = g.approvals()["decisions"].clone();
    assert_eq!(decisions[0]["source"], "credential");
    assert_eq!(decisions[0]["by"], "alice");
    // The secret never reaches the receipt.
    let receipt = std::fs::read_to_string(g.run_dir().join("receipt.jsonl")).unwrap();
    assert!(!receipt.contains(token));
    reference_verifies(&g.root, &g.run_id);
}

// ------------------------------------------------------------ tampering

#[test]
fn an_edited_policy_file_makes_approvals_refuse() {
    let g = gate();
    let file = g.policy_file();
    let original = std::fs::read(&file).unwrap();
    let edited = String::from_utf8(original.clone())
        .unwrap()
        .replace("\"alice\"", "\"bob\"");
    std::fs::write(&file, edited).unwrap();
    let before = g.snapshot();
    g.refused_naming_the_caller(
        &["bob", "alice"],
        &before,
        3,
        "receipt_corrupt",
        "approval policy file does not match its chained checksum",
    );
    // The view reports the tampering and exits 0.
    let view = g.approvals();
    assert_eq!(view["policy_file_matches"], false);
    assert_eq!(view["policy"], Value::Null);
    assert_eq!(
        view["policy_problem"],
        "approval policy file does not match its chained checksum"
    );
    assert_eq!(before, g.snapshot(), "the view wrote something");
    // A deleted file is no way around the policy.
    std::fs::remove_file(&file).unwrap();
    let before = g.snapshot();
    g.refused_naming_the_caller(
        &["alice"],
        &before,
        3,
        "receipt_corrupt",
        "approval policy file is missing",
    );
    assert_eq!(g.approvals()["policy_file_matches"], false);
    // Restoring the exact bytes restores the gate.
    std::fs::write(&file, &original).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(g.approvals()["policy_file_matches"], true);
    g.approve(&[("BLUETAPE_APPROVED_BY", "alice")]).assert_ok();
}

#[test]
fn a_tampered_policy_does_not_block_stopping() {
    let g = gate();
    std::fs::write(g.policy_file(), b"{}\n").unwrap();
    g.cancel(&[("BLUETAPE_APPROVED_BY", "bob")]).assert_ok();
    let view = g.approvals();
    assert_eq!(view["policy_file_matches"], false);
    assert_eq!(view["decisions"][0]["decision"], "denied");
    assert_eq!(view["decisions"][0]["by"], "bob");
}

// ------------------------------------------------------------ denial

#[test]
fn a_denial_needs_no_identity() {
    let g = gate();
    g.cancel(&[]).assert_ok();
    let view = g.approvals();
    let at = g.receipt()[1]["timestamp"].clone();
    assert_eq!(
        view["decisions"],
        json!([{"decision": "denied", "by": null, "source": null, "at": at, "sequence": 2,
                "proof": "asserted", "key": null}])
    );
    // A denied request cannot be approved afterwards.
    let before = g.snapshot();
    g.refused_naming_the_caller(
        &["alice"],
        &before,
        5,
        "coordinator_conflict",
        "approval was already consumed: the plan was denied at sequence 2",
    );
    reference_verifies(&g.root, &g.run_id);
}

#[test]
fn a_denial_records_who_decided_when_known() {
    let g = gate();
    g.approve(&[("BLUETAPE_APPROVED_BY", "alice")]).assert_ok();
    g.cancel(&[("BLUETAPE_APPROVED_BY", "carol")]).assert_ok();
    let decisions = g.approvals()["decisions"].clone();
    assert_eq!(decisions.as_array().unwrap().len(), 2);
    assert_eq!(decisions[1]["decision"], "denied");
    assert_eq!(decisions[1]["by"], "carol");
    assert_eq!(decisions[1]["source"], "env");
    assert_eq!(decisions[1]["sequence"], 3);
    reference_verifies(&g.root, &g.run_id);
    // A malformed identity is refused rather than recorded.
    let g = gate();
    let before = g.snapshot();
    let out = g.cancel(&[("BLUETAPE_APPROVED_BY", "carol smith")]);
    assert_refusal(
        &out,
        2,
        "contract_error",
        "BLUETAPE_APPROVED_BY must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
    );
    assert_eq!(before, g.snapshot());
}

#[test]
fn caller_evidence_cannot_forge_a_decision_record() {
    let g = gate();
    std::fs::write(
        &g.evidence,
        r#"[{"kind":"approver_identity","summary":"approved_by=alice source=env"}]"#,
    )
    .unwrap();
    let before = g.snapshot();
    g.refused_approval_by(
        "alice",
        &before,
        2,
        "contract_error",
        "evidence kinds approval_policy, approver_identity and approver_signature are reserved for the approval gate",
    );
}

// ------------------------------------------------------------ init

#[test]
fn bad_policies_are_refused_at_init_with_nothing_created() {
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&str, Env, &str)] = &[
        ("{}", &[], "approval policy must not be empty"),
        (
            r#"{"required_approver": "alice", "approvers": ["bob"]}"#,
            &[],
            "approval policy contains unsupported fields: approvers",
        ),
        (
            r#"{"required_approver": "alice!"}"#,
            &[],
            "required_approver must be an approver identity ([A-Za-z0-9._@-], 1-128 characters)",
        ),
        (
            r#"{"approver_fingerprint": "abc"}"#,
            &[],
            "approver_fingerprint must be lowercase SHA-256",
        ),
        (
            r#"{"required_approver": "alice", "require_different_approver": true}"#,
            &[],
            "require_different_approver needs an initiator: set initiated_by or BLUETAPE_INITIATED_BY",
        ),
        (
            r#"{"required_approver": "alice", "require_different_approver": true}"#,
            &[("BLUETAPE_INITIATED_BY", "alice")],
            "required_approver 'alice' is the initiator and require_different_approver is on: nobody could approve",
        ),
        (
            r#"{"initiated_by": "agent-1"}"#,
            &[],
            "approval policy is vacuous: it must name a required_approver, require a different approver, pin an approver_fingerprint or set expires_after_s",
        ),
        (
            r#"{"expires_after_s": 0}"#,
            &[],
            "expires_after_s must be a positive integer of at most 315360000 seconds",
        ),
        (
            r#"{"expires_after_s": 1.5}"#,
            &[],
            "JSON input must not contain floats, NaN or Infinity",
        ),
        (
            r#"["alice"]"#,
            &[],
            "JSON input has the wrong top-level type",
        ),
    ];
    for (policy, envs, message) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let flow = Flow::new(tmp.path());
        let out = try_init(tmp.path(), &flow, policy, envs);
        assert_refusal(&out, 2, "contract_error", message);
        assert!(
            !tmp.path().join("state").exists(),
            "{policy}: the state root was created"
        );
    }
    // On an existing state root, a refused policy leaves it byte-identical.
    let g = gate();
    let before = g.snapshot();
    let out = try_init_as(&g.base, &g.flow, "{}", &[], "second");
    assert_refusal(
        &out,
        2,
        "contract_error",
        "approval policy must not be empty",
    );
    assert_eq!(before, g.snapshot());
}

#[test]
fn the_initiator_may_come_from_the_environment() {
    let g = gate_with(
        r#"{"require_different_approver": true}"#,
        &[("BLUETAPE_INITIATED_BY", " agent-7 ")],
    );
    let policy = g.approvals()["policy"].clone();
    assert_eq!(
        policy,
        json!({"required_approver": null, "require_different_approver": true,
               "initiated_by": "agent-7", "approver_fingerprint": null,
               "expires_after_s": null})
    );
    let mode = std::fs::metadata(g.policy_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let before = g.snapshot();
    g.refused_approval_by(
        "agent-7",
        &before,
        2,
        "approval_refused",
        "approval must be granted by someone other than 'agent-7'",
    );
    // Four eyes alone: anyone else may approve.
    g.approve(&[("BLUETAPE_APPROVED_BY", "agent-8")])
        .assert_ok();
}

// ------------------------------------------------------------ no policy

#[test]
fn a_run_without_a_policy_behaves_like_the_reference() {
    let bed = TestBed::planned(&["runtime"]);
    let (tmp, flow, root, run_id) = (&bed.tmp, &bed.flow, &bed.root, &bed.run_id);
    assert!(!bed.dir.join("approval-policy.json").exists());
    let evidence = tmp.path().join("ev.json");
    std::fs::write(&evidence, r#"[{"kind":"user_approval","summary":"ok"}]"#).unwrap();
    let argv = common::mutation_argv(
        root,
        "run-approve",
        run_id,
        &root.join("handles/main.owner"),
        &["--evidence", evidence.to_str().unwrap()],
    );
    // No identity needed, and an identity given is not recorded.
    flow.run_env(&argv, &[("BLUETAPE_APPROVED_BY", "bob")])
        .assert_ok();
    let receipt =
        std::fs::read_to_string(root.join("runs").join(run_id).join("receipt.jsonl")).unwrap();
    let approved: Value = serde_json::from_str(receipt.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        approved["evidence_refs"],
        json!([{"kind": "user_approval", "summary": "ok"}])
    );
    // The second approval is the reference's retryable state conflict.
    let out = flow.run(&argv);
    out.assert_error(5, "coordinator_conflict");
    assert_eq!(
        out.error()["message"],
        "current state does not allow lifecycle intent"
    );
    let view = flow
        .run(&crate::bed::read_argv(root, "approvals", run_id, &[]))
        .assert_ok();
    assert_eq!(view["policy"], Value::Null);
    assert_eq!(view["policy_checksum"], Value::Null);
    assert_eq!(view["policy_file_matches"], Value::Null);
    assert_eq!(
        view["decisions"],
        json!([{"decision": "approved", "by": null, "source": null,
                "at": approved["timestamp"], "sequence": 2, "proof": "asserted", "key": null}])
    );
}

// ------------------------------------------------------------ the view

#[test]
fn the_view_has_a_table_for_people() {
    let g = gate();
    let approve = g.argv("run-approve", &["--at", "2026-07-14T01:00:00Z"]);
    g.flow
        .run_env(&approve, &[("BLUETAPE_APPROVED_BY", "alice")])
        .assert_ok();
    let out = g.approvals_with(&["--format", "table"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("policy file matches           yes"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  required_approver           alice"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("approved  alice"), "{}", out.stdout);
    // The whole table, exit status included, as people see it.
    common::snapshots().bind(|| {
        insta::assert_snapshot!(
            "approvals_table",
            out.human(&[(g.run_id.as_str(), "[run-id]")])
        )
    });
    let out = g.approvals_with(&["--format", "xml"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.error()["error"], "contract_error");
    // A run that does not exist is the usual exit 3.
    let out = g
        .flow
        .run(&crate::bed::read_argv(&g.root, "approvals", "nope", &[]));
    assert_eq!(out.code, 3, "{out:?}");
}

/// trust-model §2 promise 11: an `approver_key` comment is the policy
/// writer's text; the table shows its control characters as `?` (like
/// `status` and `log`), so it cannot set the terminal's title or clear it.
#[test]
fn the_table_makes_an_approver_key_comment_inert() {
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("alice");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen is required (Debian openssh-client; .ci/run installs it)");
    assert!(out.status.success(), "{out:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let mut words = public.split_whitespace();
    let hostile = format!(
        "{} {} alice\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{202e}",
        words.next().unwrap(),
        words.next().unwrap()
    );
    let policy = json!({"required_approver": "alice", "approver_key": hostile}).to_string();
    let g = gate_with(&policy, &[]);
    let json = g.approvals();
    assert!(
        crate::bed::str_field(&json["policy"], "approver_key").contains('\u{1b}'),
        "the JSON keeps the text as written: {json}"
    );
    let out = g.approvals_with(&["--format", "table"]);
    assert_eq!(out.code, 0, "{out:?}");
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!out.stdout.contains(c), "{c:?} raw in {:?}", out.stdout);
    }
    assert!(
        out.stdout.contains("alice?]0;owned??[2J?31m?"),
        "{}",
        out.stdout
    );
}

/// Make line `n` (1-based) of the gate's receipt invalid JSON, in place.
fn damage_line(gate: &Gate, n: usize) {
    let path = gate.run_dir().join("receipt.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[n - 1] = lines[n - 1].replacen('{', "[", 1);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

/// Diagnose the gate's run and ask for a recovery run owned by `owner`.
fn recover(gate: &Gate, owner: &str) -> Output {
    let diagnosis = gate
        .flow
        .run(&common::read_argv(
            &gate.root,
            "receipt-diagnose",
            &gate.run_id,
            &[],
        ))
        .assert_ok();
    let input = gate.base.join("diagnosis.json");
    std::fs::write(&input, diagnosis.to_string()).unwrap();
    gate.flow.run(&common::mutation_argv(
        &gate.root,
        "recovery-run-create",
        &gate.run_id,
        &gate.root.join("handles").join(owner),
        &[
            "--input",
            input.to_str().unwrap(),
            "--evidence",
            gate.evidence.to_str().unwrap(),
        ],
    ))
}

#[test]
fn a_recovery_run_keeps_the_damaged_runs_gate() {
    let gate = gate();
    gate.approve(&[("BLUETAPE_APPROVED_BY", "alice")])
        .assert_ok();
    let policy = gate.approvals()["policy"].clone();
    damage_line(&gate, 2);
    let out = recover(&gate, "recovery.owner").assert_ok();
    let new_run = out["new_run_id"].as_str().unwrap().to_string();
    let recovered = Gate {
        _tmp: tempfile::tempdir().unwrap(),
        base: gate.base.clone(),
        flow: Flow::new(&gate.base),
        root: gate.root.clone(),
        run_id: new_run.clone(),
        evidence: gate.evidence.clone(),
    };
    // The same frozen policy, bound into the new run's first event.
    assert_eq!(recovered.approvals()["policy"], policy);
    assert_eq!(recovered.approvals()["policy_file_matches"], true);
    let argv = |who: &str| {
        let owner = gate.root.join("handles/recovery.owner");
        let argv = vec![
            "--state-root".to_string(),
            gate.root.to_string_lossy().into(),
            "run-approve".into(),
            "--run-id".into(),
            new_run.clone(),
            "--owner-file".into(),
            owner.to_string_lossy().into(),
            "--evidence".into(),
            gate.evidence.to_string_lossy().into(),
        ];
        gate.flow.run_env(&argv, &[("BLUETAPE_APPROVED_BY", who)])
    };
    let before = recovered.snapshot();
    recovered.refused(
        argv("agent-1"),
        &before,
        2,
        "approval_refused",
        "approval must be granted by someone other than 'agent-1'",
    );
    argv("alice").assert_ok();
    // A retry of the same recovery names the same run.
    let again = recover(&gate, "recovery.owner").assert_ok();
    assert_eq!(again["new_run_id"], new_run.as_str());
    reference_verifies(&gate.root, &new_run);
}

#[test]
fn a_gate_that_cannot_be_verified_is_not_shed_by_recovery() {
    let gate = gate();
    // Line 1 binds the policy; damaged, the policy file cannot be verified
    // and the gate cannot be proven absent: no recovery (trust-model §2
    // promise 5; tests/guards.rs shows a named gate does not help).
    damage_line(&gate, 1);
    let before = gate.snapshot();
    let out = recover(&gate, "recovery.owner");
    assert_eq!(out.code, 3, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "receipt_corrupt");
    assert!(
        crate::bed::str_field(&e, "message")
            .contains("whether it had an approval gate can be neither read nor proven absent"),
        "{e}"
    );
    assert_eq!(before, gate.snapshot(), "no quarantine copy, no new run");
}
