//! Our rules hold whoever writes (contracts/rules.md,
//! contracts/approvals.md, trust-model §2), through the binary: lines
//! another writer (the Python reference, or a hand with the owner handle)
//! appends with a valid chain are judged by our rules on replay, recovery
//! fails closed, and edited derived files are never believed. The other
//! writer is played by hand-appended, correctly chained receipt lines (tests
//! never run the reference).

use crate::bed as common;

use common::{Flow, Output, init_argv};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

const FOUR_EYES: &str = r#"{"required_approver": "alice", "require_different_approver": true,
    "initiated_by": "agent-1"}"#;

pub(crate) struct Run {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    flow: Flow,
    pub(crate) root: PathBuf,
    pub(crate) run_id: String,
}

impl Run {
    /// A run created by `agent-1`, under `policy` when given.
    fn new(policy: Option<&str>) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let flow = Flow::new(&base);
        let root = base.join("state");
        let repo = base.join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        let mut argv = init_argv(
            &root,
            "A",
            &repo,
            &root.join("handles/main.owner"),
            &["runtime"],
        );
        if let Some(policy) = policy {
            let file = base.join("policy.json");
            std::fs::write(&file, policy).unwrap();
            argv.extend(["--approval-policy".into(), file.into_os_string()]);
        }
        let out = flow
            .run_env(&argv, &[("BLUETAPE_INITIATED_BY", "agent-1")])
            .assert_ok();
        let run_id = out["run_id"].as_str().unwrap().to_string();
        Run {
            _tmp: tmp,
            base,
            flow,
            root,
            run_id,
        }
    }

    fn dir(&self) -> PathBuf {
        self.root.join("runs").join(&self.run_id)
    }

    fn owner(&self) -> PathBuf {
        self.root.join("handles/main.owner")
    }

    /// Write an input file and return its path.
    fn input(&self, name: &str, value: &Value) -> String {
        let path = self.base.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn evidence(&self, summary: &str) -> String {
        self.input(
            &format!("ev-{}", summary.replace(' ', "-")),
            &json!([{"kind": "test", "summary": summary}]),
        )
    }

    /// A mutation as the owner, with `--run-id` and `--owner-file`.
    fn cmd_env(&self, command: &str, extra: &[&str], envs: &[(&str, &str)]) -> Output {
        let argv = common::mutation_argv(&self.root, command, &self.run_id, &self.owner(), extra);
        self.flow.run_env(&argv, envs)
    }

    fn cmd(&self, command: &str, extra: &[&str]) -> Output {
        self.cmd_env(command, extra, &[])
    }

    /// `<command> --input <input> --evidence <evidence>`.
    fn with_input(&self, command: &str, input: &str, evidence: &str) -> Output {
        self.cmd(command, &["--input", input, "--evidence", evidence])
    }

    /// `lane-complete` of lane `a` (agent-1) at `at` with `evidence`, no
    /// changed paths.
    fn complete_lane_a(&self, at: &str, evidence: &str) -> Output {
        let changed = self.input("changed", &json!([]));
        let mut argv = common::lane_argv("a", "agent-1", at, evidence);
        argv.extend(["--changed-paths", &changed]);
        self.cmd("lane-complete", &argv)
    }

    /// A read-only query (no owner file).
    fn query(&self, command: &str, extra: &[&str]) -> Output {
        self.flow
            .run(&common::read_argv(&self.root, command, &self.run_id, extra))
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("receipt.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Another writer appends a correctly chained event: `fields` override
    /// a draft built from the last line (same owner, epoch 1).
    fn append(&self, event_type: &str, fields: Value) {
        let last = self.events().pop().unwrap();
        let mut fields = fields;
        let mut metadata = json!({"owner_epoch": 1});
        if let Some(extra) = fields.get("metadata").and_then(Value::as_object) {
            for (k, v) in extra {
                metadata[k] = v.clone();
            }
        }
        fields["metadata"] = metadata;
        let sealed = common::draft_after(&last, event_type, &fields, "by hand").seal();
        std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir().join("receipt.jsonl"))
            .unwrap()
            .write_all(&sealed.line)
            .unwrap();
    }

    fn policy_checksum(&self) -> String {
        self.query("approvals", &[]).assert_ok()["policy_checksum"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Approve through our binary as `alice` (the policy's approver).
    fn approve_as(&self, who: &str) -> Output {
        let ev = self.evidence("plan reviewed");
        self.cmd_env(
            "run-approve",
            &["--evidence", &ev],
            &[("BLUETAPE_APPROVED_BY", who)],
        )
    }

    /// A run approved and started through our binary, with the running
    /// lane `a` of `agent-1`: where most breach tests start.
    fn running_with_lane_a() -> Run {
        let run = Run::new(None);
        run.cmd("run-approve", &["--evidence", &run.evidence("ok")])
            .assert_ok();
        run.start().assert_ok();
        run.running_lane("a", "agent-1");
        run
    }

    /// `topology-register` of the one required component `runtime`,
    /// owned by lane `a`, with the required `checks`.
    fn register_runtime(&self, checks: &[&str]) {
        let components = self.input(
            "topology",
            &json!([{"id": "runtime", "required": true, "description": "Runtime",
                     "owner_lane": "a", "required_checks": checks, "dependencies": [],
                     "evidence_refs": [], "coverage_state": "missing"}]),
        );
        let evidence = self.evidence("topology");
        self.with_input("topology-register", &components, &evidence)
            .assert_ok();
    }

    /// `complete` is refused for the breach of `rule`.
    #[track_caller]
    fn assert_complete_refused_by(&self, rule: &str) {
        let evidence = self.evidence("all done");
        assert_breach_refusal(
            &self.cmd("complete", &["--evidence", &evidence]),
            "complete",
            rule,
        );
    }

    fn start(&self) -> Output {
        let ev = self.evidence("run started");
        self.cmd("run-start", &["--evidence", &ev])
    }

    /// A running lane `id` of `agent` (created, started, acknowledged).
    fn running_lane(&self, id: &str, agent: &str) {
        let lane = self.input(
            &format!("lane-{id}"),
            &json!({"lane_id": id, "agent_id": agent, "assignment": format!("Work on {id}"),
                    "write_scope": ["src"], "fallback": "main session",
                    "observed_at": "2026-07-14T01:00:02Z",
                    "startup_ack_deadline": "2026-07-14T01:00:30Z",
                    "command_deadline": "2026-07-14T01:10:00Z"}),
        );
        let ev = self.evidence(&format!("assign {id}"));
        self.with_input("lane-create", &lane, &ev).assert_ok();
        for (command, at) in [
            ("lane-start", "2026-07-14T01:00:03Z"),
            ("startup-ack", "2026-07-14T01:00:04Z"),
        ] {
            let ev = self.evidence(&format!("{command} {id}"));
            self.cmd(command, &common::lane_argv(id, agent, at, &ev))
                .assert_ok();
        }
    }

    fn heartbeat(&self, id: &str, agent: &str, n: u32) -> Value {
        let evidence = json!([{"kind": "log", "summary": format!("heartbeat {n} of {id}")}]);
        let ev = self.input(&format!("hb-ev-{id}-{n}"), &evidence);
        let hb = self.input(
            &format!("hb-{id}-{n}"),
            &json!({"lane_id": id, "agent_id": agent,
                    "observed_at": format!("2026-07-14T01:00:{:02}Z", 5 + n),
                    "silence_lease_deadline": "2026-07-14T01:05:00Z",
                    "reason": format!("alive {n}")}),
        );
        self.with_input("heartbeat", &hb, &ev).assert_ok();
        evidence
    }
}

fn breach_rules(value: &Value) -> Vec<String> {
    value["breaches"]
        .as_array()
        .unwrap_or_else(|| panic!("no breaches in {value}"))
        .iter()
        .map(|b| b["rule"].as_str().unwrap().to_string())
        .collect()
}

/// A gate refusing because of a standing breach.
fn assert_breach_refusal(out: &Output, gate: &str, rule: &str) {
    assert_eq!(out.code, 5, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "rule_breach", "{e}");
    assert_eq!(
        e["retryable"], false,
        "a breach does not go away by retrying"
    );
    assert!(
        crate::bed::str_field(&e, "message").starts_with(&format!("{gate} refused")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains(rule), "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("--approval-policy"),
        "{e}"
    );
    assert_eq!(breach_rules(&e), [rule]);
}

// ------------- replay applies the gate and our rules (contracts/rules.md)

#[test]
fn an_approval_the_reference_wrote_without_the_gate_is_a_breach() {
    let run = Run::new(Some(FOUR_EYES));
    // Our run-approve refuses the initiator.
    run.approve_as("agent-1")
        .assert_error(2, "approval_refused");
    // The reference's run-approve: the owner's plan_approved, no record.
    run.append(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved",
               "evidence_refs": [{"kind": "user_approval", "summary": "plan reviewed"}]}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(verify["sequence"], 2);
    assert_eq!(breach_rules(&verify), ["approval_gate"]);
    assert_eq!(verify["breaches"][0]["sequence"], 2);
    assert!(
        crate::bed::str_field(&verify["breaches"][0], "found")
            .contains("without the gate's approver record"),
        "{verify}"
    );
    let before = std::fs::read(run.dir().join("receipt.jsonl")).unwrap();
    assert_breach_refusal(&run.start(), "run-start", "approval_gate");
    // Under a policy, run-approve names itself when a breach stands.
    assert_breach_refusal(&run.approve_as("alice"), "run-approve", "approval_gate");
    assert_eq!(
        std::fs::read(run.dir().join("receipt.jsonl")).unwrap(),
        before,
        "a refused gate writes nothing"
    );
    let approvals = run.query("approvals", &[]).assert_ok();
    assert_eq!(approvals["decisions"][0]["by"], Value::Null);
    assert!(
        approvals["decisions"][0]["breach"].is_string(),
        "{approvals}"
    );
    assert_eq!(breach_rules(&approvals), ["approval_gate"]);
    let table = run.query("approvals", &["--format", "table"]);
    assert!(
        table
            .stdout
            .contains("BREACH at sequence 2 (approval_gate): plan_approved"),
        "{}",
        table.stdout
    );
    // The chain is still good: rebuild and completion-check work and show it.
    run.query("rebuild", &[]).assert_ok();
    let check = run.query("completion-check", &[]).assert_ok();
    assert_eq!(breach_rules(&check), ["approval_gate"]);
    // Stopping is always allowed.
    let ev = run.evidence("stop");
    run.cmd("run-cancel", &["--evidence", &ev, "--reason", "breach"])
        .assert_ok();
}

#[test]
fn a_forged_approver_record_is_shown_as_a_breach_not_as_alice() {
    let run = Run::new(Some(FOUR_EYES));
    let checksum = run.policy_checksum();
    run.append(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved",
               "evidence_refs": [{"kind": "user_approval", "summary": "ok"},
                                 {"kind": "approver_identity",
                                  "summary": "approved_by=alice source=credential",
                                  "checksum": checksum}]}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["approval_gate"]);
    assert!(
        crate::bed::str_field(&verify["breaches"][0], "found").contains("claims source=credential"),
        "{verify}"
    );
    let table = run.query("approvals", &["--format", "table"]);
    assert_eq!(table.code, 0, "{table:?}");
    assert!(
        !table.stdout.contains("approved  alice"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("BREACH    alice"), "{}", table.stdout);
    assert!(
        table.stdout.contains("identity asserted, not signed"),
        "{}",
        table.stdout
    );
    assert_breach_refusal(&run.start(), "run-start", "approval_gate");
}

/// The approval window is a rule of replay too: an approval another writer
/// recorded after `expires_after_s` is a breach, one inside it is not.
#[test]
fn an_approval_recorded_after_the_window_is_a_breach() {
    const WINDOW: &str = r#"{"required_approver": "alice", "expires_after_s": 3600}"#;
    // The record our binary writes, taken from a run that approved in time.
    let model = Run::new(Some(WINDOW));
    model.approve_as("alice").assert_ok();
    let approved = model.events().pop().unwrap();
    assert!(
        model
            .query("verify", &[])
            .assert_ok()
            .get("breaches")
            .is_none(),
        "an approval inside the window is no breach"
    );
    for (after_s, breach) in [(3599, false), (3601, true)] {
        let run = Run::new(Some(WINDOW));
        let created = run.events()[0]["timestamp"].as_str().unwrap().to_string();
        let created = chrono::DateTime::parse_from_rfc3339(&created).unwrap();
        let at = (created + chrono::Duration::seconds(after_s))
            .to_utc()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let mut refs = approved["evidence_refs"].clone();
        for item in refs.as_array_mut().unwrap() {
            if item["kind"] == "approver_identity" {
                item["checksum"] = json!(run.policy_checksum());
            }
        }
        run.append(
            "plan_approved",
            json!({"from_state": "planned", "to_state": "approved",
                   "timestamp": at, "evidence_refs": refs}),
        );
        let verify = run.query("verify", &[]).assert_ok();
        if !breach {
            assert!(verify.get("breaches").is_none(), "{after_s} s: {verify}");
            continue;
        }
        assert_eq!(breach_rules(&verify), ["approval_gate"]);
        assert_eq!(
            verify["breaches"][0]["found"],
            "plan_approved 3601 s after run_created, beyond the policy's expires_after_s 3600"
        );
        assert_breach_refusal(&run.start(), "run-start", "approval_gate");
    }
}

#[test]
fn our_own_approval_verifies_exactly_as_before() {
    let run = Run::new(Some(FOUR_EYES));
    run.approve_as("alice").assert_ok();
    let verify = run.query("verify", &[]).assert_ok();
    assert!(verify.get("breaches").is_none(), "{verify}");
    crate::bed::assert_keys(
        &verify,
        "checksum event_count ok operation run_id sequence state_root",
        "verify",
    );
    let approvals = run.query("approvals", &[]).assert_ok();
    assert!(approvals.get("breaches").is_none(), "{approvals}");
    assert_eq!(approvals["decisions"][0]["by"], "alice");
    assert!(approvals["decisions"][0].get("breach").is_none());
    assert_eq!(approvals["identity_proof"], "identity asserted, not signed");
    run.start().assert_ok();
    // A run without a policy: no gate, no identity_proof key.
    let plain = Run::new(None);
    plain
        .cmd("run-approve", &["--evidence", &plain.evidence("ok")])
        .assert_ok();
    let approvals = plain.query("approvals", &[]).assert_ok();
    assert!(approvals.get("identity_proof").is_none(), "{approvals}");
    assert!(
        plain
            .query("verify", &[])
            .assert_ok()
            .get("breaches")
            .is_none()
    );
}

#[test]
fn an_older_heartbeat_completing_a_lane_by_another_writer_is_a_breach() {
    let run = Run::running_with_lane_a();
    let older = run.heartbeat("a", "agent-1", 1);
    run.heartbeat("a", "agent-1", 2);
    // Our lane-complete refuses it...
    let ev = run.input("older", &older);
    run.complete_lane_a("2026-07-14T01:01:00Z", &ev)
        .assert_error(2, "contract_error");
    // ...the reference's (which checks the latest heartbeat only) writes it.
    run.append(
        "lane_completed",
        json!({"lane_id": "a", "agent_id": "agent-1", "from_state": "running",
               "to_state": "completed", "evidence_refs": older,
               "timestamp": "2026-07-14T01:01:00Z",
               "metadata": {"changed_paths": []}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["liveness_evidence_as_completion"]);
    run.query("rebuild", &[]).assert_ok();
    let check = run.query("completion-check", &[]).assert_ok();
    assert_eq!(breach_rules(&check), ["liveness_evidence_as_completion"]);
    run.assert_complete_refused_by("liveness_evidence_as_completion");
    let new_owner = run.root.join("handles/next.owner");
    assert_breach_refusal(
        &run.cmd(
            "resume",
            &[
                "--evidence",
                &run.evidence("hand over"),
                "--new-owner-file",
                new_owner.to_str().unwrap(),
            ],
        ),
        "resume",
        "liveness_evidence_as_completion",
    );
    assert!(!new_owner.exists());
}

#[test]
fn a_required_component_removed_by_another_writer_is_a_breach() {
    let run = Run::running_with_lane_a();
    run.register_runtime(&[]);
    run.append(
        "topology_component_removed",
        json!({"reason": "not needed", "metadata": {"component_id": "runtime"}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["required_component_removed"]);
}

// -------------------- recovery keeps the gate (contracts/approvals.md)

impl Run {
    /// Change one byte inside line `n` (1-based) of the receipt.
    fn damage_line(&self, n: usize, from: &str, to: &str) {
        let path = self.dir().join("receipt.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert!(lines[n - 1].contains(from), "{}", lines[n - 1]);
        lines[n - 1] = lines[n - 1].replacen(from, to, 1);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }

    /// receipt-diagnose, then recovery-run-create (with `extra` flags).
    fn recover(&self, owner: &str, extra: &[&str]) -> Output {
        let diagnosis = self.query("receipt-diagnose", &[]).assert_ok();
        let input = self.input("diagnosis", &diagnosis);
        let ev = self.evidence("recovery approved");
        let owner = self.root.join("handles").join(owner);
        let mut argv: Vec<String> = [
            "--state-root",
            self.root.to_str().unwrap(),
            "recovery-run-create",
            "--run-id",
            &self.run_id,
            "--input",
            &input,
            "--owner-file",
            owner.to_str().unwrap(),
            "--evidence",
            &ev,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(extra.iter().map(|s| s.to_string()));
        self.flow.run(&argv)
    }

    /// The recovery run `id`, owned by `handles/<owner>`, seen as a Run.
    fn approve_other(&self, id: &str, owner: &str, who: &str) -> Output {
        let ev = self.evidence("recovery plan reviewed");
        let argv = [
            "--state-root".to_string(),
            self.root.to_string_lossy().into(),
            "run-approve".into(),
            "--run-id".into(),
            id.into(),
            "--owner-file".into(),
            self.root
                .join("handles")
                .join(owner)
                .to_string_lossy()
                .into(),
            "--evidence".into(),
            ev,
        ];
        self.flow.run_env(&argv, &[("BLUETAPE_APPROVED_BY", who)])
    }

    fn approvals_of(&self, id: &str) -> Value {
        self.flow
            .run(&crate::bed::read_argv(&self.root, "approvals", id, &[]))
            .assert_ok()
    }

    fn quarantine_is_empty(&self) -> bool {
        std::fs::read_dir(self.root.join("quarantine"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    }
}

/// A refusal of a recovery whose source's gate cannot be read (exit 3,
/// nothing written: no quarantine copy, no handle).
fn assert_gate_unreadable(run: &Run, out: &Output, contains: &str) -> Value {
    assert_eq!(out.code, 3, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "receipt_corrupt");
    assert!(e["message"].as_str().unwrap().contains(contains), "{e}");
    assert!(run.quarantine_is_empty(), "no quarantine copy on a refusal");
    assert!(!run.root.join("handles/recovery.owner").exists());
    e
}

const UNTRUSTED_LINE_1: &str = "first line cannot be trusted, so whether it had an approval gate can be neither read nor proven absent";

#[test]
fn recovery_does_not_shed_a_gate_whose_first_line_and_file_are_gone() {
    let run = Run::new(Some(FOUR_EYES));
    // One byte inside approver=alice on line 1, and the policy file gone.
    run.damage_line(1, "approver=alice", "approver=alicf");
    std::fs::remove_file(run.dir().join("approval-policy.json")).unwrap();
    let diagnosis = run.query("receipt-diagnose", &[]).assert_ok();
    assert_eq!(diagnosis["last_trusted_sequence"], 0);
    let out = run.recover("recovery.owner", &[]);
    assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
    // Naming a fresh gate does not make a lost one go away.
    let fresh = run.input("fresh", &json!({"required_approver": "carol"}));
    let out = run.recover("recovery.owner", &["--approval-policy", &fresh]);
    assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
}

/// trust-model §2 promise 5: no search of raw bytes decides whether the
/// source was gated. Renaming the two key names the old search looked for
/// (which damages line 1) and deleting the policy file used to let
/// `--approval-policy` replace alice's gate with mallory's; so did one
/// byte of line 1's timestamp with the policy file in place. Both are
/// refused now: line 1 is not trusted, so the gate cannot be read.
#[test]
fn trust_recovery_never_loses_a_gate_to_renamed_keys_or_one_byte_of_line_1() {
    let mallory = json!({"required_approver": "mallory"});
    // Renamed key names, policy file gone.
    let run = Run::new(Some(FOUR_EYES));
    run.approve_as("alice").assert_ok();
    let path = run.dir().join("receipt.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"approval_policy\"") && text.contains("\"approver_identity\""));
    let renamed = text
        .replace("\"approval_policy\"", "\"approval_polic_\"")
        .replace("\"approver_identity\"", "\"approver_identit_\"");
    std::fs::write(&path, renamed).unwrap();
    std::fs::remove_file(run.dir().join("approval-policy.json")).unwrap();
    let fresh = run.input("mallory", &mallory);
    let out = run.recover("recovery.owner", &["--approval-policy", &fresh]);
    assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
    // One byte of line 1's timestamp, the policy file intact.
    let run = Run::new(Some(FOUR_EYES));
    let stamp = run.events()[0]["timestamp"].as_str().unwrap().to_string();
    let mut edited = stamp.clone().into_bytes();
    let last = edited.len() - 2;
    edited[last] = if edited[last] == b'1' { b'2' } else { b'1' };
    run.damage_line(1, &stamp, std::str::from_utf8(&edited).unwrap());
    let fresh = run.input("mallory", &mallory);
    let out = run.recover("recovery.owner", &["--approval-policy", &fresh]);
    let e = assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
    assert_eq!(e["fields"]["next_command"], "init", "{e}");
}

#[test]
fn a_first_line_that_cannot_be_trusted_is_refused_even_with_a_gate_named() {
    // Ungated or gated: line 1 damaged, the gate can be neither read nor
    // proven absent, and a fresh gate cannot add to an unknown one.
    for policy in [None, Some(FOUR_EYES)] {
        let run = Run::new(policy);
        run.damage_line(1, "\"planned\"", "\"plannet\"");
        let out = run.recover("recovery.owner", &[]);
        let e = assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
        assert!(
            e["hint"].as_str().unwrap().contains("bluetape-flow init"),
            "{e}"
        );
        let fresh = run.input("fresh", &json!({"required_approver": "carol"}));
        let out = run.recover("recovery.owner", &["--approval-policy", &fresh]);
        assert_gate_unreadable(&run, &out, UNTRUSTED_LINE_1);
    }
}

/// A trusted first line: the frozen policy is carried, and
/// `--approval-policy` may only add constraints to it
/// (contracts/approvals.md "Recovery"), breach or no breach.
#[test]
fn a_carried_gate_is_kept_unless_a_breach_stands() {
    let run = Run::new(Some(FOUR_EYES));
    run.approve_as("alice").assert_ok();
    run.damage_line(2, "plan reviewed", "plan reviewee");
    let mut carried: Value = serde_json::from_str(FOUR_EYES).unwrap();
    for (name, loosened, names) in [
        (
            "weaker",
            json!({"expires_after_s": 600}),
            "required_approver must stay 'alice'",
        ),
        (
            "carol",
            json!({"required_approver": "carol", "require_different_approver": true,
                         "initiated_by": "agent-1", "expires_after_s": 3600}),
            "required_approver must stay 'alice'",
        ),
        (
            "two-eyes",
            json!({"required_approver": "alice", "initiated_by": "agent-1",
                            "expires_after_s": 3600}),
            "require_different_approver must stay true",
        ),
        (
            "any-initiator",
            json!({"required_approver": "alice", "require_different_approver": true,
                   "initiated_by": "agent-2"}),
            "initiated_by must stay 'agent-1'",
        ),
    ] {
        let file = run.input(name, &loosened);
        let out = run.recover("recovery.owner", &["--approval-policy", &file]);
        let e = out.assert_error(2, "contract_error");
        assert!(
            e["message"].as_str().unwrap().ends_with(names),
            "{name}: {e}"
        );
        assert!(run.quarantine_is_empty());
    }
    let out = run.recover("recovery.owner", &[]).assert_ok();
    let new_run = out["new_run_id"].as_str().unwrap();
    assert_eq!(
        run.approvals_of(new_run)["policy"]["required_approver"],
        "alice"
    );

    // A breach in the trusted prefix: the recovery must name the gate, and
    // the named gate must still add to the carried one.
    let run = Run::new(Some(FOUR_EYES));
    run.append(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved"}),
    );
    run.append(
        "run_started",
        json!({"from_state": "approved", "to_state": "running"}),
    );
    run.damage_line(3, "by hand", "by hanx");
    let out = run.recover("recovery.owner", &[]);
    assert_breach_refusal(
        &out,
        "recovery-run-create without --approval-policy",
        "approval_gate",
    );
    assert!(run.quarantine_is_empty());
    let carol = run.input(
        "carol",
        &json!({"required_approver": "carol",
        "require_different_approver": true, "initiated_by": "agent-1", "expires_after_s": 3600}),
    );
    run.recover("recovery.owner", &["--approval-policy", &carol])
        .assert_error(2, "contract_error");
    assert!(run.quarantine_is_empty());
    carried["expires_after_s"] = json!(600);
    let stricter = run.input("stricter", &carried);
    let out = run
        .recover("recovery.owner", &["--approval-policy", &stricter])
        .assert_ok();
    let new_run = out["new_run_id"].as_str().unwrap();
    let policy = &run.approvals_of(new_run)["policy"];
    assert_eq!(policy["required_approver"], "alice");
    assert_eq!(policy["expires_after_s"], 600);
    run.approve_other(new_run, "recovery.owner", "agent-1")
        .assert_error(2, "approval_refused");
    run.approve_other(new_run, "recovery.owner", "alice")
        .assert_ok();
}

// ------------- signed approvals (contracts/approvals.md `approver_key`)

/// A real ssh-keygen; missing is a test failure (`.ci/run` installs it).
fn ssh_keygen(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new("ssh-keygen")
        .args(args)
        .output()
        .expect("ssh-keygen is required (Debian openssh-client; .ci/run installs it)");
    assert!(out.status.success(), "ssh-keygen {args:?}: {out:?}");
    out
}

/// A fresh Ed25519 key pair `dir/name` (comment `name`); the public line.
fn keypair(dir: &std::path::Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    ssh_keygen(&[
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-C",
        name,
        "-f",
        key.to_str().unwrap(),
    ]);
    let public = std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap();
    (key, public.trim().to_string())
}

/// Sign `file` with `key` in the approval namespace; the `.sig` path.
fn sign(key: &std::path::Path, file: &std::path::Path) -> PathBuf {
    ssh_keygen(&[
        "-Y",
        "sign",
        "-n",
        "bluetape-flow-approval",
        "-f",
        key.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    PathBuf::from(format!("{}.sig", file.display()))
}

impl Run {
    fn statement(&self, name: &str) -> PathBuf {
        let path = self.base.join(name);
        let out = self.query("approval-statement", &["--out", path.to_str().unwrap()]);
        let out = out.assert_ok();
        assert_eq!(out["namespace"], "bluetape-flow-approval");
        path
    }

    fn approve_signed(&self, who: &str, signature: &std::path::Path) -> Output {
        let ev = self.evidence("plan reviewed");
        self.cmd_env(
            "run-approve",
            &[
                "--evidence",
                &ev,
                "--signature",
                signature.to_str().unwrap(),
            ],
            &[("BLUETAPE_APPROVED_BY", who)],
        )
    }
}

fn signed_policy(alice_public: &str) -> String {
    json!({"required_approver": "alice", "require_different_approver": true,
           "initiated_by": "agent-1", "approver_key": alice_public})
    .to_string()
}

fn assert_signature_refused(out: &Output, run: &Run, contains: &str) {
    assert_eq!(out.code, 2, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "approval_refused", "{e}");
    assert_eq!(e["retryable"], false);
    assert!(e["message"].as_str().unwrap().contains(contains), "{e}");
    assert_eq!(run.events().len(), 1, "a refusal writes nothing");
}

#[test]
fn signed_approvals_pass_once_with_the_right_key_only() {
    let keys = tempfile::tempdir().unwrap();
    let (alice, alice_public) = keypair(keys.path(), "alice");
    let (agent, _) = keypair(keys.path(), "agent-1");
    let run = Run::new(Some(&signed_policy(&alice_public)));
    let other = Run::new(Some(&signed_policy(&alice_public)));
    let statement = run.statement("statement");
    let text = std::fs::read_to_string(&statement).unwrap();
    assert!(text.contains(&run.run_id) && text.ends_with('\n'), "{text}");

    // No signature, the initiator's key, another run's statement, another
    // head, a truncated and a bit-flipped signature: each refused.
    assert_signature_refused(
        &run.approve_as("alice"),
        &run,
        "requires a signature by the pinned approver key",
    );
    let by_agent = sign(&agent, &statement);
    assert_signature_refused(
        &run.approve_signed("alice", &by_agent),
        &run,
        "not made with the policy's approver key",
    );
    std::fs::remove_file(&by_agent).unwrap();
    let other_statement = other.statement("other-statement");
    let for_other = sign(&alice, &other_statement);
    assert_signature_refused(
        &run.approve_signed("alice", &for_other),
        &run,
        "does not verify over this run's approval statement",
    );
    let head = run.events()[0]["checksum"].as_str().unwrap().to_string();
    let moved = run.base.join("moved-head");
    std::fs::write(&moved, text.replace(&head, &"0".repeat(64))).unwrap();
    let for_moved = sign(&alice, &moved);
    assert_signature_refused(
        &run.approve_signed("alice", &for_moved),
        &run,
        "does not verify",
    );
    let good = sign(&alice, &statement);
    let pem = std::fs::read_to_string(&good).unwrap();
    let truncated = run.base.join("truncated.sig");
    std::fs::write(&truncated, &pem[..pem.len() / 2]).unwrap();
    assert_signature_refused(
        &run.approve_signed("alice", &truncated),
        &run,
        "not an SSH signature",
    );
    // Flip one bit of the last base64 character before the footer: the
    // Ed25519 signature's tail.
    let lines: Vec<&str> = pem.lines().collect();
    let mut body: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let last = body.len() - 2;
    let mut bytes = body[last].clone().into_bytes();
    let at = bytes.iter().rposition(|b| *b != b'=').unwrap() - 1;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    body[last] = String::from_utf8(bytes).unwrap();
    let flipped = run.base.join("flipped.sig");
    std::fs::write(&flipped, body.join("\n") + "\n").unwrap();
    let out = run.approve_signed("alice", &flipped);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.error()["error"], "approval_refused");
    // The initiator cannot approve even with alice's signature.
    assert_signature_refused(
        &run.approve_signed("agent-1", &good),
        &run,
        "someone other than 'agent-1'",
    );

    // The right key: once.
    let out = run.approve_signed("alice", &good).assert_ok();
    assert_eq!(out["run_state"], "approved");
    let event = run.events().pop().unwrap();
    assert_eq!(
        crate::bed::string_column(&event["evidence_refs"], "kind"),
        ["test", "approver_identity", "approver_signature"]
    );
    let out = run.approve_signed("alice", &good);
    assert_eq!(out.code, 5, "{out:?}");
    assert!(
        out.error()["message"]
            .as_str()
            .unwrap()
            .contains("already consumed")
    );
    // Replay re-verifies it: no breach; the view says it is signed.
    assert!(
        run.query("verify", &[])
            .assert_ok()
            .get("breaches")
            .is_none()
    );
    let approvals = run.query("approvals", &[]).assert_ok();
    assert_eq!(approvals["decisions"][0]["source"], "signature");
    assert!(
        crate::bed::str_field(&approvals, "identity_proof").starts_with("identity signed"),
        "{approvals}"
    );
    // A signed approval is shown with its key: the fingerprint ssh-keygen
    // prints for alice's public key (trust model §2 promise 4).
    let listed = ssh_keygen(&[
        "-l",
        "-E",
        "sha256",
        "-f",
        &format!("{}.pub", alice.display()),
    ]);
    let fingerprint = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(approvals["decisions"][0]["proof"], "signed", "{approvals}");
    assert_eq!(approvals["decisions"][0]["key"], fingerprint.as_str());
    let table = run.query("approvals", &["--format", "table"]);
    assert!(
        table
            .stdout
            .contains(&format!("signed by key {fingerprint}")),
        "{}",
        table.stdout
    );
    run.start().assert_ok();
    // Approved and started: there is nothing left to sign.
    let late = run.base.join("late-statement");
    let out = run.query("approval-statement", &["--out", late.to_str().unwrap()]);
    let e = out.assert_error(5, "coordinator_conflict");
    assert_eq!(e["message"], "run state does not allow this command");
    assert_eq!(e["fields"]["run_state"], "running");
    assert_eq!(e["fields"]["allowed_run_states"], json!(["planned"]));
    assert!(!late.exists());

    // A replayed signature: the same stored signature appended by another
    // writer to the other run is a breach there.
    other.append(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved",
               "evidence_refs": event["evidence_refs"]}),
    );
    let verify = other.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["approval_gate"]);
    assert_breach_refusal(&other.start(), "run-start", "approval_gate");
    let breached = other.base.join("breached-statement");
    assert_breach_refusal(
        &other.query("approval-statement", &["--out", breached.to_str().unwrap()]),
        "approval-statement",
        "approval_gate",
    );
    assert!(!breached.exists());
}

#[test]
fn a_signature_without_a_pinned_key_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let (alice, alice_public) = keypair(keys.path(), "alice");
    let run = Run::new(Some(FOUR_EYES));
    // No key pinned: nothing to sign, and a signature is refused, typed.
    let path = run.base.join("statement");
    let out = run.query("approval-statement", &["--out", path.to_str().unwrap()]);
    out.assert_error(2, "contract_error");
    assert!(!path.exists());
    std::fs::write(&path, "anything\n").unwrap();
    let sig = sign(&alice, &path);
    assert_signature_refused(
        &run.approve_signed("alice", &sig),
        &run,
        "pins no approver_key",
    );
    run.approve_as("alice").assert_ok();
    // approval-statement never writes inside the state root.
    let signed = Run::new(Some(&signed_policy(&alice_public)));
    let inside = signed.root.join("statement");
    signed
        .query("approval-statement", &["--out", inside.to_str().unwrap()])
        .assert_error(2, "contract_error");
    assert!(!inside.exists());
    // A policy pinning a key that is not ssh-ed25519 is refused at init.
    let bad = json!({"required_approver": "alice", "approver_key": "ssh-rsa AAAA alice"});
    let file = signed.base.join("bad-policy.json");
    std::fs::write(&file, bad.to_string()).unwrap();
    let out = signed.flow.run(&[
        "--state-root",
        signed.root.to_str().unwrap(),
        "init",
        "--workflow-type",
        "A",
        "--repo-root",
        signed.base.join("repo").to_str().unwrap(),
        "--owner-file",
        signed.root.join("handles/bad.owner").to_str().unwrap(),
        "--component",
        "runtime",
        "--approval-policy",
        file.to_str().unwrap(),
    ]);
    out.assert_error(2, "contract_error");
}

// ------- forged derived files are never believed (trust-model §2.1, §2.3)

impl Run {
    fn checkpoint(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir().join("checkpoint.json")).unwrap()).unwrap()
    }

    /// Edit checkpoint.json's state and recompute its unkeyed
    /// `state_digest`, as an attacker with write access can.
    fn forge_checkpoint(&self, edit: impl FnOnce(&mut Value)) {
        let mut checkpoint = self.checkpoint();
        edit(&mut checkpoint);
        checkpoint["state_digest"] = json!(bluetape_flow::receipt::canonical::digest(
            &checkpoint["state"]
        ));
        std::fs::write(
            self.dir().join("checkpoint.json"),
            bluetape_flow::receipt::canonical::to_vec(&checkpoint),
        )
        .unwrap();
    }

    /// `rebuild` succeeds and `verify` finds no breach of ours.
    fn assert_replayable(&self, after: &str) {
        let out = self.query("rebuild", &[]);
        assert_eq!(out.code, 0, "rebuild after {after}: {out:?}");
        let verify = self.query("verify", &[]).assert_ok();
        assert!(verify.get("breaches").is_none(), "after {after}: {verify}");
    }
}

#[test]
fn a_forged_checkpoint_cannot_steer_a_run_transition() {
    let run = Run::new(None);
    run.cmd("run-approve", &["--evidence", &run.evidence("ok")])
        .assert_ok();
    assert!(
        run.checkpoint()["mac"].is_string(),
        "the checkpoint is keyed"
    );
    let key = run.root.join("derived.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    run.forge_checkpoint(|c| c["state"]["run_state"] = json!("running"));
    // The run is approved, not running: the transition is refused...
    let out = run.cmd(
        "run-recovery-start",
        &["--evidence", &run.evidence("r"), "--reason", "r"],
    );
    assert_eq!(out.code, 5, "{out:?}");
    // ...the queries answer from the receipt, and nothing was bricked.
    assert_eq!(
        run.query("resume-check", &[]).assert_ok()["run_state"],
        "approved"
    );
    run.assert_replayable("a forged run_state");
    run.start().assert_ok();
    run.assert_replayable("run-start");
}

#[test]
fn forged_derived_files_are_never_believed() {
    // Each forgery, then each command; every command that exits 0 must
    // leave a receipt that a full replay accepts without a breach.
    type Forgery = fn(&Run);
    let forgeries: [(&str, Forgery); 3] = [
        ("all lanes completed", |run| {
            run.forge_checkpoint(|c| {
                c["state"]["lanes"]["a"]["state"] = json!("completed");
                c["state"]["lanes"]["a"]["terminal_sequence"] = json!(9);
            })
        }),
        ("a zeroed digest table", |run| {
            common::forge::zero_digest_slots(&run.dir())
        }),
        ("a checkpoint without its MAC", |run| {
            let mut c = run.checkpoint();
            c.as_object_mut().unwrap().remove("mac");
            std::fs::write(
                run.dir().join("checkpoint.json"),
                bluetape_flow::receipt::canonical::to_vec(&c),
            )
            .unwrap();
        }),
    ];
    for (name, forge) in forgeries {
        let run = Run::running_with_lane_a();
        let first = run.heartbeat("a", "agent-1", 1);
        run.heartbeat("a", "agent-1", 2);
        forge(&run);
        let check = run.query("completion-check", &[]).assert_ok();
        assert_eq!(check["missing_lanes"], json!(["a"]), "{name}: {check}");
        // Completing the lane with a heartbeat's evidence is refused.
        let ev = run.input("first", &first);
        let out = run.complete_lane_a("2026-07-14T01:01:00Z", &ev);
        assert_eq!(out.code, 2, "{name}: {out:?}");
        assert!(
            crate::bed::str_field(&out.error(), "message")
                .contains("liveness evidence cannot complete a lane"),
            "{name}: {out:?}"
        );
        forge(&run);
        let out = run.cmd("complete", &["--evidence", &run.evidence("done")]);
        assert_eq!(out.code, 6, "{name}: {out:?}");
        forge(&run);
        // A fresh heartbeat and a real completion still work.
        run.heartbeat("a", "agent-1", 3);
        run.assert_replayable(&format!("{name}: heartbeat"));
        forge(&run);
        let done = run.evidence("lane a done");
        run.complete_lane_a("2026-07-14T01:02:00Z", &done)
            .assert_ok();
        run.assert_replayable(&format!("{name}: lane-complete"));
    }
}

#[test]
fn a_forged_checkpoint_cannot_hide_a_breach() {
    let run = Run::new(Some(FOUR_EYES));
    run.append(
        "plan_approved",
        json!({"from_state": "planned", "to_state": "approved"}),
    );
    // A command of ours writes a checkpoint holding the breach...
    run.query("rebuild", &[]).assert_ok();
    assert_eq!(breach_rules(&run.checkpoint()["ours"]), ["approval_gate"]);
    // ...which an attacker empties.
    let mut c = run.checkpoint();
    c["ours"]["breaches"] = json!([]);
    std::fs::write(
        run.dir().join("checkpoint.json"),
        bluetape_flow::receipt::canonical::to_vec(&c),
    )
    .unwrap();
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["approval_gate"]);
    assert_breach_refusal(&run.start(), "run-start", "approval_gate");
    assert_eq!(
        breach_rules(&run.query("completion-check", &[]).assert_ok()),
        ["approval_gate"]
    );
}

// ----------------------------------- every write rule is a replay rule
// (`contracts/rules.md`, "Our rules, whoever writes"; trust model §2
// promise 2). Each test: our binary refuses the step, the line the
// reference writes for it (its shape checked against the real reference by
// hand: same keys, `null` where it writes `null`) is recorded as a breach.

impl Run {
    /// A running run with a running lane `a`, one heartbeat of it (whose
    /// evidence is returned) and component `runtime` owned by `a` with the
    /// required check `unit`.
    fn with_checked_component() -> (Run, Value) {
        let run = Run::running_with_lane_a();
        let heartbeat = run.heartbeat("a", "agent-1", 1);
        run.register_runtime(&["unit"]);
        (run, heartbeat)
    }

    fn check_result(&self, passed: bool, evidence: &Value) -> Output {
        let input = self.input(
            &format!("check-{passed}"),
            &json!({"component_id": "runtime", "check_id": "unit", "passed": passed}),
        );
        let ev = self.input(&format!("check-ev-{passed}"), evidence);
        self.with_input("check-result", &input, &ev)
    }

    /// `out` is refused with `code` and `error` and the receipt is the
    /// same bytes afterwards; the error envelope.
    #[track_caller]
    fn refused_appending_nothing(
        &self,
        out: impl FnOnce() -> Output,
        code: i32,
        error: &str,
    ) -> Value {
        let before = self.receipt_bytes();
        let e = out().assert_error(code, error);
        assert_eq!(self.receipt_bytes(), before, "{e}");
        e
    }

    /// A contract error with exactly `message` that appended nothing.
    fn refused_contract(&self, out: impl FnOnce() -> Output, message: &str) -> Value {
        let e = self.refused_appending_nothing(out, 2, "contract_error");
        assert_eq!(e["message"], message, "{e}");
        e
    }

    fn receipt_bytes(&self) -> Vec<u8> {
        std::fs::read(self.dir().join("receipt.jsonl")).unwrap()
    }
}

#[test]
fn a_check_passed_on_a_heartbeat_is_refused_and_a_breach_when_another_writer_records_it() {
    let (run, heartbeat) = Run::with_checked_component();
    // Our check-result refuses it (the reference records it), writing nothing.
    let e = run.refused_contract(
        || run.check_result(true, &heartbeat),
        "liveness evidence cannot pass a check",
    );
    assert!(
        crate::bed::str_field(&e, "hint").contains("check unit of component runtime"),
        "{e}"
    );
    // A failing result satisfies nothing: it may cite the heartbeat.
    run.check_result(false, &heartbeat).assert_ok();
    assert!(
        run.query("verify", &[])
            .assert_ok()
            .get("breaches")
            .is_none()
    );
    // The reference's check-result line.
    run.append(
        "check_passed",
        json!({"evidence_refs": heartbeat, "timestamp": "2026-07-14T01:00:40Z",
               "reason": "recovered on the heartbeat",
               "metadata": {"check_id": "unit", "component_id": "runtime"}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["liveness_evidence_as_check"]);
    assert_eq!(verify["breaches"][0]["sequence"], run.events().len());
    run.query("rebuild", &[]).assert_ok();
    let check = run.query("completion-check", &[]).assert_ok();
    assert_eq!(breach_rules(&check), ["liveness_evidence_as_check"]);
    run.assert_complete_refused_by("liveness_evidence_as_check");
}

#[test]
fn a_component_covered_by_a_heartbeat_by_hand_is_a_breach() {
    let (run, heartbeat) = Run::with_checked_component();
    run.check_result(true, &json!([{"kind": "test", "summary": "unit green"}]))
        .assert_ok();
    run.complete_lane_a("2026-07-14T01:01:00Z", &run.evidence("done a"))
        .assert_ok();
    // Both tools refuse component-evidence on a heartbeat...
    let ce = run.input("ce", &json!({"component_id": "runtime"}));
    let hb = run.input("hb-again", &heartbeat);
    run.refused_contract(
        || run.with_input("component-evidence", &ce, &hb),
        "liveness evidence cannot satisfy completion evidence",
    );
    // ...neither replay said a word about a hand writing it.
    run.append(
        "evidence_attached",
        json!({"evidence_refs": heartbeat, "timestamp": "2026-07-14T01:01:10Z",
               "metadata": {"component_id": "runtime", "coverage_state": "covered"}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["liveness_evidence_as_completion"]);
    assert!(
        crate::bed::str_field(&verify["breaches"][0], "found")
            .contains("evidence_attached for component runtime"),
        "{verify}"
    );
    run.assert_complete_refused_by("liveness_evidence_as_completion");
}

#[test]
fn a_child_lane_wider_than_its_parent_is_refused_and_a_breach_by_hand() {
    let run = Run::running_with_lane_a();
    std::fs::create_dir_all(run.base.join("repo/lib")).unwrap();
    let child = json!({"lane_id": "b", "agent_id": "agent-2", "assignment": "Work on b",
                       "write_scope": ["lib"], "fallback": "main session",
                       "observed_at": "2026-07-14T01:00:07Z",
                       "startup_ack_deadline": "2026-07-14T01:00:30Z",
                       "command_deadline": "2026-07-14T01:10:00Z", "parent_lane_id": "a"});
    let input = run.input("lane-b", &child);
    let e = run.refused_appending_nothing(
        || {
            let evidence = run.evidence("assign b");
            run.with_input("lane-create", &input, &evidence)
        },
        2,
        "contract_error",
    );
    assert!(
        crate::bed::str_field(&e, "message").contains("narrower than its parent"),
        "{e}"
    );
    // The reference's lane-create line for it.
    run.append(
        "lane_created",
        json!({"lane_id": "b", "agent_id": "agent-2", "to_state": "pending",
               "timestamp": "2026-07-14T01:00:07Z",
               "evidence_refs": [{"kind": "test", "summary": "assign b"}],
               "metadata": {"assignment": "Work on b", "command_deadline": "2026-07-14T01:10:00Z",
                            "fallback": "main session", "parent_lane_id": "a",
                            "replacement_count": 0,
                            "startup_ack_deadline": "2026-07-14T01:00:30Z",
                            "write_scope": ["lib"]}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["write_scope_widened"]);
    assert!(
        crate::bed::str_field(&verify["breaches"][0], "found").contains("lib lies outside it"),
        "{verify}"
    );
}

// ------------------------- breaches shown wherever the run is shown, and
// `attest` (trust model §2 promise 4)

impl Run {
    /// A four-eyes run that the reference took from approval to
    /// completion: its `plan_approved` and `run_started` (no gate record:
    /// an `approval_gate` breach at sequence 2), our lane and component
    /// work in between (our non-gate commands carry on), and its `complete`
    /// transaction at the end (ours refuses while the breach stands).
    pub(crate) fn completed_past_a_bypassed_gate() -> Run {
        let run = Run::new(Some(FOUR_EYES));
        run.append(
            "plan_approved",
            json!({"from_state": "planned", "to_state": "approved",
                   "timestamp": "2026-07-14T01:00:00Z"}),
        );
        run.append(
            "run_started",
            json!({"from_state": "approved", "to_state": "running",
                   "timestamp": "2026-07-14T01:00:01Z"}),
        );
        run.running_lane("a", "agent-1");
        run.register_runtime(&[]);
        run.complete_lane_a("2026-07-14T01:01:00Z", &run.evidence("done a"))
            .assert_ok();
        let ce = run.input("ce", &json!({"component_id": "runtime"}));
        run.cmd(
            "component-evidence",
            &[
                "--input",
                &ce,
                "--evidence",
                &run.evidence("runtime covered"),
            ],
        )
        .assert_ok();
        run.assert_complete_refused_by("approval_gate");
        let main =
            json!([{"kind": "main", "summary": "main session verified the integrated result"}]);
        let intent = |event_type: &str, from: Value, to: Value| {
            json!({"agent_id": null, "event_type": event_type, "evidence_refs": main,
                   "from_state": from, "lane_id": null, "metadata": {"owner_epoch": 1},
                   "owner_epoch": 1, "reason": null, "timestamp": "2026-07-14T01:02:00Z",
                   "to_state": to})
        };
        run.append(
            "transaction_committed",
            json!({"evidence_refs": [], "timestamp": "2026-07-14T01:02:00Z",
            "metadata": {"intents": [
                intent("main_verification", Value::Null, Value::Null),
                intent("run_completed", json!("running"), json!("completed")),
            ]}}),
        );
        let verify = run.query("verify", &[]).assert_ok();
        assert_eq!(breach_rules(&verify), ["approval_gate"]);
        run
    }

    /// The signer key of `attest` (made once) and what `key-generate`
    /// printed for it.
    fn key(&self) -> (PathBuf, Value) {
        let key = self.base.join("attest.key");
        let printed = self.base.join("attest.key.json");
        if !key.exists() {
            let out = self
                .flow
                .run(&[
                    "key-generate",
                    "--name",
                    "ci.example/attest",
                    "--out",
                    key.to_str().unwrap(),
                ])
                .assert_ok();
            std::fs::write(&printed, out.to_string()).unwrap();
        }
        let printed = serde_json::from_slice(&std::fs::read(printed).unwrap()).unwrap();
        (key, printed)
    }

    pub(crate) fn attest(&self, out: &str, extra: &[&str]) -> Output {
        let (key, _) = self.key();
        let out = self.base.join(out);
        let mut args = vec![
            "--key",
            key.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.query("attest", &args)
    }
}

/// The statement inside an attest envelope (the envelope is checked with
/// securesystemslib in `bundle.rs`; here only what it says).
fn statement_of(file: &std::path::Path) -> Value {
    use base64::Engine;
    let envelope: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&payload).unwrap()
}

#[test]
fn attest_refuses_a_breached_run_unless_told_to_sign_the_breaches() {
    let run = Run::completed_past_a_bypassed_gate();
    let out = run.attest("clean.intoto.json", &[]);
    assert_eq!(out.code, 6, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "completion_blocked", "{e}");
    assert_eq!(e["retryable"], false, "a breach does not go away: {e}");
    assert_eq!(e["next_command"], "verify", "{e}");
    assert_eq!(breach_rules(&e), ["approval_gate"]);
    assert_eq!(e["breaches"][0]["sequence"], 2);
    assert!(
        e["message"].as_str().unwrap().contains("approval_gate"),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap();
    assert!(hint.contains("--allow-breaches"), "{e}");
    assert!(hint.contains(&run.run_id), "{e}");
    assert!(!run.base.join("clean.intoto.json").exists());
    // With the flag it signs, and the statement says what it signs.
    let out = run
        .attest("breached.intoto.json", &["--allow-breaches"])
        .assert_ok();
    let breached = "https://github.com/bluetape4k/bluetape-skills/bluetape-flow/run-completion-with-breaches/v1";
    assert_eq!(out["predicate_type"], breached);
    assert_eq!(breach_rules(&out), ["approval_gate"]);
    let statement = statement_of(&run.base.join("breached.intoto.json"));
    assert_eq!(statement["predicateType"], breached);
    let predicate = &statement["predicate"];
    assert_eq!(predicate["run_state"], "completed");
    assert_eq!(breach_rules(predicate), ["approval_gate"]);
    // The approval nobody the policy admits made is shown as asserted.
    assert_eq!(predicate["approvals"][0]["by"], Value::Null);
    assert_eq!(predicate["approvals"][0]["proof"], "asserted");
    assert_eq!(predicate["approvals"][0]["key"], Value::Null);
    // Verifiers nobody here wrote accept the envelope and its statement.
    let (_, key) = run.key();
    let Some(python) = crate::bundle::python() else {
        return;
    };
    let checked =
        crate::bundle::attest_check(&python, &run.base.join("breached.intoto.json"), &key);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let parsed: Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(parsed["predicate_type"], breached);
    assert_eq!(parsed["predicate"]["breaches"][0]["rule"], "approval_gate");
}

/// A view through the binary: `--state-root ROOT <args>` (no run id added).
fn view(run: &Run, args: &[&str]) -> Output {
    let mut argv = vec!["--state-root", run.root.to_str().unwrap()];
    argv.extend_from_slice(args);
    run.flow.run(&argv)
}

#[test]
fn a_breach_is_shown_wherever_the_run_is_shown() {
    let run = Run::completed_past_a_bypassed_gate();
    let id = run.run_id.as_str();
    let at = "2026-07-14T02:00:00Z";
    // status: the listing and the run, JSON and table.
    let listing = view(&run, &["status", "--at", at, "--format", "json"]).assert_ok();
    let entry = &listing["runs"][0];
    assert_eq!(entry["run_state"], "completed", "{listing}");
    assert_eq!(breach_rules(entry), ["approval_gate"]);
    assert_eq!(entry["approval"]["proof"], "asserted");
    let table = view(&run, &["status", "--at", at, "--format", "table"]);
    assert!(
        table.stdout.contains("  BREACHES 1: approval_gate at 2"),
        "{}",
        table.stdout
    );
    let detail = view(
        &run,
        &["status", "--run-id", id, "--at", at, "--format", "json"],
    )
    .assert_ok();
    assert_eq!(breach_rules(&detail), ["approval_gate"]);
    assert_eq!(detail["approval"]["by"], Value::Null);
    assert_eq!(detail["approval"]["proof"], "asserted");
    let table = view(
        &run,
        &["status", "--run-id", id, "--at", at, "--format", "table"],
    )
    .stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[2].starts_with("BREACHES   1: approval_gate at 2"),
        "the breach is shown right under the run's state:\n{table}"
    );
    assert!(
        lines[3].contains("approval_gate at 2: plan_approved without the gate's approver record"),
        "{table}"
    );
    assert!(
        table.contains(
            "approval   approved by - at 2026-07-14T01:00:00Z (gated), asserted by its writer"
        ),
        "{table}"
    );
    // log: the event is marked, in JSON and in the table.
    let log = view(&run, &["log", "--run-id", id, "--format", "jsonl"]);
    let rows: Vec<Value> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let marked: Vec<&Value> = rows
        .iter()
        .filter(|r| r.get("breaches").is_some())
        .collect();
    assert_eq!(marked.len(), 1, "{}", log.stdout);
    assert_eq!(marked[0]["sequence"], 2);
    assert_eq!(marked[0]["breaches"][0]["rule"], "approval_gate");
    let log = view(&run, &["log", "--run-id", id, "--format", "table"]).stdout;
    let at_two = log.lines().position(|l| l.starts_with("2 ")).unwrap();
    assert!(
        log.lines()
            .nth(at_two + 1)
            .unwrap()
            .starts_with("      BREACH approval_gate: plan_approved without"),
        "{log}"
    );
    assert_eq!(log.matches("BREACH").count(), 1, "{log}");
    // report: a banner first, and the event's row marked.
    let page = run.base.join("report.html");
    let out = view(
        &run,
        &[
            "report",
            "--run-id",
            id,
            "--out",
            page.to_str().unwrap(),
            "--at",
            at,
        ],
    )
    .assert_ok();
    assert_eq!(breach_rules(&out), ["approval_gate"]);
    let html = std::fs::read_to_string(&page).unwrap();
    let body = html.split("<body>\n").nth(1).unwrap();
    assert!(
        body.starts_with(
            "<div class=\"breach\" role=\"alert\"><b>This run breaks our rules in 1 event(s).</b>"
        ),
        "{body}"
    );
    assert!(
        body.contains("<li>sequence 2 — <code>approval_gate</code>: plan_approved without"),
        "{body}"
    );
    assert!(body.contains("<tr class=\"breach\"><td>2</td>"), "{body}");
    assert!(
        body.contains("asserted by its writer, not signed"),
        "{body}"
    );
    // approvals: the decision is the breach, asserted by its writer.
    let approvals = run.query("approvals", &[]).assert_ok();
    assert_eq!(breach_rules(&approvals), ["approval_gate"]);
    assert_eq!(approvals["decisions"][0]["proof"], "asserted");
    assert!(approvals["decisions"][0]["breach"].is_string());
    // bundle-verify: the run as a bundle says the same.
    let bundle = run.base.join("run.tar");
    run.query("bundle-export", &["--out", bundle.to_str().unwrap()])
        .assert_ok();
    let verified = view(
        &run,
        &["bundle-verify", bundle.to_str().unwrap(), "--at", at],
    )
    .assert_ok();
    assert_eq!(verified["verified"], true);
    assert_eq!(breach_rules(&verified), ["approval_gate"]);
    assert_eq!(verified["approval"]["proof"], "asserted");
}

/// The tables of a breached run as a person sees them (`status`, `status
/// --run-id`, `log`), with the run id, the checksums and the wall-clock
/// times of the run's events redacted so the snapshot is stable.
#[test]
fn the_tables_of_a_breached_run_are_a_snapshot() {
    let run = Run::completed_past_a_bypassed_gate();
    let id = run.run_id.clone();
    let at = "2026-07-14T02:00:00Z";
    let mut redactions: Vec<(String, String)> = vec![(id.clone(), "[run-id]".into())];
    for event in run.events() {
        let n = event["sequence"].as_u64().unwrap();
        let checksum = event["checksum"].as_str().unwrap();
        redactions.push((checksum[..12].to_string(), format!("[checksum {n:>2}]")));
        let time = event["timestamp"].as_str().unwrap();
        if !time.starts_with("2026-07-14") {
            // A wall-clock time (the table shows it to the second).
            redactions.push((time[5..19].to_string(), "[wall clock  ]".into()));
        }
    }
    let detail = view(
        &run,
        &["status", "--run-id", &id, "--at", at, "--format", "json"],
    )
    .assert_ok();
    let fingerprint = detail["owner_fingerprint"].as_str().unwrap();
    redactions.push((fingerprint[..12].to_string(), "[owner]".into()));
    let redactions: Vec<(&str, &str)> = redactions
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut text = String::new();
    for args in [
        vec!["status", "--at", at, "--format", "table"],
        vec!["status", "--run-id", &id, "--at", at, "--format", "table"],
        vec!["log", "--run-id", &id, "--format", "table"],
    ] {
        let out = view(&run, &args);
        assert_eq!(out.code, 0, "{out:?}");
        text.push_str(&format!(
            "$ {}\n{}\n",
            args.join(" "),
            out.human(&redactions)
        ));
    }
    let text = redactions
        .iter()
        .fold(text, |text, (from, to)| text.replace(from, to));
    common::snapshots().bind(|| insta::assert_snapshot!("breached-tables", text));
}

#[test]
fn a_heartbeat_reusing_evidence_by_another_writer_is_a_breach() {
    let run = Run::running_with_lane_a();
    let evidence = run.heartbeat("a", "agent-1", 1);
    // Our heartbeat refuses the same evidence with another reason...
    let ev = run.input("hb-again-ev", &evidence);
    let hb = run.input(
        "hb-again",
        &json!({"lane_id": "a", "agent_id": "agent-1",
                "observed_at": "2026-07-14T01:00:20Z",
                "silence_lease_deadline": "2026-07-14T01:06:00Z",
                "reason": "alive again"}),
    );
    run.refused_contract(
        || run.with_input("heartbeat", &hb, &ev),
        "liveness evidence was already recorded for this lane",
    );
    // ...the reference writes it: its heartbeat transaction.
    let digest = bluetape_flow::receipt::canonical::digest(&evidence);
    let intent = |event_type: &str, reason: Value, extra: Value| {
        let mut metadata = json!({"evidence_digest": digest, "owner_epoch": 1});
        for (k, v) in extra.as_object().unwrap() {
            metadata[k] = v.clone();
        }
        json!({"agent_id": "agent-1", "event_type": event_type, "evidence_refs": evidence,
               "from_state": "running", "lane_id": "a", "metadata": metadata,
               "owner_epoch": 1, "reason": reason, "timestamp": "2026-07-14T01:00:20Z",
               "to_state": "running"})
    };
    run.append(
        "transaction_committed",
        json!({"evidence_refs": [], "timestamp": "2026-07-14T01:00:20Z",
        "metadata": {"intents": [
            intent("heartbeat_observed", Value::Null, json!({})),
            intent("lease_renewed", json!("alive again"),
                   json!({"silence_lease_deadline": "2026-07-14T01:06:00Z"})),
        ]}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["liveness_evidence_reused"]);
}

#[test]
fn a_required_component_demoted_by_another_writer_is_a_breach() {
    let run = Run::running_with_lane_a();
    let component = |required: bool| {
        json!([{"id": "runtime", "required": required, "description": "Runtime",
                "owner_lane": "a", "required_checks": [], "dependencies": [],
                "evidence_refs": [], "coverage_state": "missing"}])
    };
    let topology = run.input("topology", &component(true));
    run.cmd(
        "topology-register",
        &[
            "--input",
            &topology,
            "--evidence",
            &run.evidence("topology"),
        ],
    )
    .assert_ok();
    let demoted = run.input("demoted", &component(false));
    run.refused_appending_nothing(
        || {
            let evidence = run.evidence("demote");
            run.with_input("topology-register", &demoted, &evidence)
        },
        5,
        "coordinator_conflict",
    );
    // The reference's topology-register line for it.
    run.append(
        "topology_registered",
        json!({"evidence_refs": [{"kind": "test", "summary": "demote"}],
               "timestamp": "2026-07-14T01:00:30Z",
               "metadata": {"components": component(false)}}),
    );
    let verify = run.query("verify", &[]).assert_ok();
    assert_eq!(breach_rules(&verify), ["required_component_dropped"]);
}
