//! The liveness commands through the binary: `liveness-check` against every
//! output the reference recorded, every liveness step of the reference's
//! scenarios replayed byte for byte, and each command's rules and refusals
//! (exit status, error code, message, next command, state unchanged) on
//! copies of the reference's state roots and on hand-built receipts.

use crate::bed as common;
use bluetape_flow::receipt::primitives::{AgentId, LaneId, RunId};
use bluetape_flow::store::root::StateRoot;

use bluetape_flow::receipt::canonical;
use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::store::run::{AckHead, RunDir};
use common::{Flow, Output, TestBed, bed_type, scenarios};
use serde_json::{Value, json};
use std::path::PathBuf;

const LIVENESS_COMMANDS: [&str; 6] = [
    "liveness-check",
    "heartbeat",
    "stall-record",
    "stall-clear",
    "probe-sent",
    "interrupt-result",
];

bed_type!(
    /// A copy of one reference scenario's state root.
    Fixture
);

impl Fixture {
    fn new(name: &str) -> Fixture {
        Fixture(TestBed::from_fixture(name))
    }

    /// A heartbeat of lane `leased` (agent-l) through the binary: its
    /// evidence (a log of `summary`, exit 0) put at `hb-ev.json`, its
    /// input ([`heartbeat_input`]) at `hb.json`. The evidence path and the
    /// answer.
    fn leased_heartbeat(
        &self,
        summary: &str,
        observed: &str,
        lease: &str,
        reason: &str,
    ) -> (String, Value) {
        let ev = self.put(
            "hb-ev.json",
            &json!([{"kind": "log", "summary": summary, "exit_status": 0}]),
        );
        let input = self.put("hb.json", &heartbeat_input(observed, lease, reason));
        let out = self.ok("heartbeat", &["--evidence", &ev, "--input", &input]);
        (ev, out)
    }

    fn owner(&self) -> String {
        self.handle("main.owner").to_string_lossy().into_owned()
    }

    /// `command` on the run, as its owner unless it is read-only.
    fn cli(&self, command: &str, args: &[&str]) -> Output {
        if matches!(command, "liveness-check" | "verify") {
            self.read(command, args)
        } else {
            self.as_owner(&self.owner(), command, args)
        }
    }

    fn ok(&self, command: &str, args: &[&str]) -> Value {
        let out = self.cli(command, args).assert_ok();
        assert_eq!(out["operation"], command);
        out
    }

    /// A refusal with this status, code and message that changed nothing.
    #[track_caller]
    fn refused(&self, command: &str, args: &[&str], code: i32, message: &str) -> Value {
        assert!(matches!(code, 2 | 3 | 5 | 7), "unexpected code {code}");
        common::unchanged(&self.root, || {
            let e = common::assert_refusal(&self.cli(command, args), code);
            common::assert_message(&e, message);
            e
        })
    }

    fn check(&self, lane: &str, at: &str, status: &str) -> (String, String) {
        let out = self.ok(
            "liveness-check",
            &["--lane-id", lane, "--at", at, "--command-status", status],
        );
        (
            out["action"].as_str().unwrap().to_string(),
            out["reason"].as_str().unwrap().to_string(),
        )
    }

    /// A handle for this run with another token: a stale owner.
    fn stale_owner(&self) -> String {
        let mut handle: Value =
            serde_json::from_str(&std::fs::read_to_string(self.owner()).unwrap()).unwrap();
        handle["token"] = json!("not-the-owner");
        let path = self.root.join("handles/stale.owner");
        std::fs::write(&path, handle.to_string()).unwrap();
        common::set_modes(&self.root);
        path.to_string_lossy().into_owned()
    }

    /// Run as another owner file.
    fn as_owner(&self, owner: &str, command: &str, args: &[&str]) -> Output {
        let owner = std::path::Path::new(owner);
        self.flow.run(&common::mutation_argv(
            &self.root,
            command,
            &self.run_id,
            owner,
            args,
        ))
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// ------------------------------------------------------- reference parity

/// Every `liveness-check` the reference ran at the end of every scenario
/// (each lane, `--at 2026-07-14T02:00:00Z`, unknown/alive/dead): the same
/// exit status; on success byte-identical stdout; on failure the same code,
/// message and next command. Nothing is written.
#[test]
fn liveness_check_reproduces_every_recorded_output() {
    let mut checked = 0;
    for copy in common::fixture_copies() {
        let what = format!("liveness-check of {}", copy.scenario.display());
        common::read_only(&copy.state, what, || {
            for (run_id, run) in copy.runs() {
                let Some(lanes) = run.get("liveness-check").and_then(Value::as_object) else {
                    continue;
                };
                for (lane, statuses) in lanes {
                    for (status, entry) in statuses.as_object().unwrap() {
                        let out = copy.run_recorded(entry);
                        let name = format!("{} {run_id} {lane} {status}", copy.scenario.display());
                        copy.assert_recorded(
                            &out,
                            entry,
                            &["ok", "error", "retryable", "next_command", "message"],
                            &name,
                        );
                        checked += 1;
                    }
                }
            }
        });
    }
    assert_eq!(checked, 147);
}

/// Every liveness step the reference ran while building its scenarios,
/// replayed on the state as it was just before (the receipt cut back to
/// that point): the same stdout, and for mutations the very same receipt
/// bytes the reference appended (heartbeat transactions, stall records,
/// lane_recovered, probes, interrupts).
#[test]
fn every_recorded_liveness_step_replays_byte_for_byte() {
    let mut replayed = std::collections::BTreeMap::<String, usize>::new();
    for scenario in scenarios() {
        let Ok(text) = std::fs::read_to_string(scenario.join("commands.jsonl")) else {
            continue;
        };
        if scenario.ends_with("recovery") {
            continue;
        }
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        for line in text.lines() {
            let step: Value = serde_json::from_str(line).unwrap();
            if step["kind"] != "cli" || step["phase"] != "setup" {
                continue;
            }
            let argv = step["argv"].as_array().unwrap();
            let command = argv[2].as_str().unwrap();
            if !LIVENESS_COMMANDS.contains(&command) {
                continue;
            }
            assert_eq!(step["exit_status"], 0);
            let recorded: Value = serde_json::from_str(step["stdout"].as_str().unwrap()).unwrap();
            let sequence = recorded["sequence"].as_u64().unwrap() as usize;
            let fixture = Fixture::new(&name);
            let reference_receipt: String = fixture
                .receipt()
                .split_inclusive('\n')
                .take(sequence)
                .collect();
            let before = if command == "liveness-check" {
                sequence
            } else {
                sequence - 1
            };
            fixture.truncate(before);
            let out = fixture.flow.run(&common::expand_argv(
                argv,
                &fixture.root,
                fixture.scenario.as_ref().unwrap(),
            ));
            assert_eq!(out.code, 0, "{name} {argv:?}: {out:?}");
            assert_eq!(
                out.stdout
                    .replace(&*fixture.root.to_string_lossy(), "{STATE}"),
                step["stdout"].as_str().unwrap(),
                "{name} {argv:?}"
            );
            assert_eq!(fixture.receipt(), reference_receipt, "{name} {argv:?}");
            *replayed.entry(command.to_string()).or_default() += 1;
        }
    }
    let want: std::collections::BTreeMap<String, usize> = [
        ("heartbeat", 4),
        ("interrupt-result", 3),
        ("liveness-check", 15),
        ("probe-sent", 7),
        ("stall-clear", 1),
        ("stall-record", 9),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(replayed, want);
}

// ------------------------------------------------------------ liveness-check

#[test]
fn liveness_check_reads_at_laxly_and_refuses_in_order() {
    let f = Fixture::new("13-liveness-paths");
    // Lax --at values are the same instant.
    for at in [
        "2026-07-14T02:00:00Z",
        "2026-07-14T02:00Z",
        "2026-07-14 02:00:00Z",
        "20260714T020000Z",
        "2026-07-14T02:00:00,000000Z",
    ] {
        assert_eq!(
            f.check("leased", at, "unknown"),
            ("continue".to_string(), "fresh evidence".to_string()),
            "{at}"
        );
    }
    let out = f.ok(
        "liveness-check",
        &["--lane-id", "leased", "--at", "2026-07-14T02:05:00Z"],
    );
    crate::bed::assert_answer(
        &out,
        "action checksum ok operation reason run_id run_state sequence state_root",
        json!({"action": "suspect_stall", "sequence": 43}),
        "liveness-check",
    );
    // Refusals, in the reference's order: the lane exists before --at parses.
    f.refused(
        "liveness-check",
        &["--lane-id", "ghost", "--at", "never"],
        5,
        "lane does not exist",
    );
    f.refused(
        "liveness-check",
        &["--lane-id", "../x", "--at", "2026-07-14T02:00:00Z"],
        5,
        "lane does not exist",
    );
    for (at, message) in [
        ("never", "timestamp must be UTC ISO-8601 ending in Z"),
        (
            "2026-07-14T02:00:00+00:00",
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            "2026-07-14T24:00:00Z",
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        ("2026-07-14Z", "timestamp must be timezone-aware"),
    ] {
        f.refused(
            "liveness-check",
            &["--lane-id", "done", "--at", at],
            2,
            message,
        );
    }
    let e = f
        .cli(
            "liveness-check",
            &[
                "--lane-id",
                "done",
                "--at",
                "2026-07-14T02:00:00Z",
                "--command-status",
                "maybe",
            ],
        )
        .assert_error(2, "contract_error");
    assert!(e["message"].as_str().unwrap().contains("maybe"), "{e}");
    f.cli("liveness-check", &["--lane-id", "done"])
        .assert_error(2, "contract_error");
    // A live writer holding the receipt lock does not stop a reader.
    let lock = common::hold_receipt_lock(&f.root, &f.dir);
    f.refused(
        "liveness-check",
        &["--lane-id", "ghost", "--at", "2026-07-14T02:00:00Z"],
        5,
        "lane does not exist",
    );
    assert_eq!(
        f.check("overdue", "2026-07-14T02:00:00Z", "dead").0,
        "interrupt"
    );
    std::fs::remove_dir_all(&lock).unwrap();
    // An unknown run is exit 3, a bad run id exit 2.
    let argv = |run: &str| {
        vec![
            "--state-root".to_string(),
            f.root.to_string_lossy().into_owned(),
            "liveness-check".into(),
            "--run-id".into(),
            run.into(),
            "--lane-id".into(),
            "x".into(),
            "--at".into(),
            "2026-07-14T02:00:00Z".into(),
        ]
    };
    f.flow
        .run(&argv("20260101T000000Z-00000000"))
        .assert_error(3, "receipt_corrupt");
    f.flow.run(&argv("../x")).assert_error(2, "contract_error");
}

// ---------------------------------------------------------------- heartbeat

fn heartbeat_input(observed: &str, lease: &str, reason: &str) -> Value {
    common::heartbeat_input("leased", "agent-l", observed, lease, reason)
}

#[test]
fn heartbeat_extends_the_silence_window() {
    let f = Fixture::new("13-liveness-paths");
    let (_, out) = f.leased_heartbeat(
        "benchmark iteration 55/60",
        "2026-07-14T02:04:00Z",
        "2026-07-14T02:14:00Z",
        "long benchmark",
    );
    assert_eq!(out["sequence"], 44);
    assert_eq!(out["run_state"], "running");
    assert_eq!(out.as_object().unwrap().len(), 7);
    let event = f.last_event();
    assert_eq!(event["event_type"], "transaction_committed");
    let intents = event["metadata"]["intents"].as_array().unwrap();
    assert_eq!(intents[0]["event_type"], "heartbeat_observed");
    assert_eq!(intents[1]["event_type"], "lease_renewed");
    assert_eq!(
        intents[1]["metadata"]["silence_lease_deadline"],
        "2026-07-14T02:14:00Z"
    );
    let lease = "2026-07-14T02:14:00Z";
    assert_eq!(
        f.check("leased", "2026-07-14T02:13:59.999999Z", "dead").0,
        "continue"
    );
    assert_eq!(
        f.check("leased", lease, "unknown"),
        ("suspect_stall".to_string(), "no fresh evidence".to_string())
    );
    assert_eq!(f.check("leased", lease, "alive").0, "observe_command");
    // The lane cache follows the receipt; completion evidence is untouched.
    let lane: Value =
        serde_json::from_str(&std::fs::read_to_string(f.dir.join("lanes/leased.json")).unwrap())
            .unwrap();
    assert_eq!(lane["silence_lease_deadline"], lease);
    assert_eq!(lane["last_reason"], "long benchmark");
    assert_eq!(
        lane["evidence_refs"],
        serde_json::from_str::<Value>(
            &std::fs::read_to_string(f.scenario_input("startup-ack-leased.json")).unwrap()
        )
        .unwrap()
    );
    f.ok("verify", &[]);
}

#[test]
fn heartbeat_refusals() {
    let f = Fixture::new("13-liveness-paths");
    // The reference's own last heartbeat of this lane.
    let same_ev = f.scenario_input("heartbeat-leased-evidence.json");
    let new_ev = f.put_evidence("ev.json", "log", "benchmark iteration 41/60");
    // Each input its own file, named after its case.
    let files = std::cell::Cell::new(0);
    let put = |value: Value| {
        files.set(files.get() + 1);
        f.put(&format!("case-{}.json", files.get()), &value)
    };
    // A heartbeat of `lane` (owned by `agent`) observed at 01:56, with
    // its lease to 02:06 and reason "r".
    let of = |lane: &str, agent: &str| {
        put(common::heartbeat_input(
            lane,
            agent,
            "2026-07-14T01:56:00Z",
            "2026-07-14T02:06:00Z",
            "r",
        ))
    };
    // A heartbeat of the leased lane observed at `at`, leased to `lease`.
    let hb = |at: &str, lease: &str, reason: &str| put(heartbeat_input(at, lease, reason));
    let (at, lease) = ("2026-07-14T01:56:00Z", "2026-07-14T02:06:00Z");
    let deadlines = "heartbeat deadlines must satisfy observed_at < lease <= command_deadline";
    let empty = f.put("empty.json", &json!([]));
    let object = f.put("list.json", &json!({}));
    let bad_ev = f.put("bad-ev.json", &json!([{"kind": "log"}]));
    let few_keys = json!({"lane_id": "leased", "agent_id": "agent-l",
        "observed_at": at, "silence_lease_deadline": lease});
    let new_ev = &new_ev;
    #[rustfmt::skip]
    let cases: Vec<(&String, String, i32, &str)> = vec![
        (&same_ev, hb(at, "2026-07-14T02:06:00Z", "long benchmark"), 2, "liveness evidence is unchanged"),
        (new_ev, hb("2026-07-14T02:56:00Z", "2026-07-14T03:00:00.000001Z", "r"), 2, deadlines),
        (new_ev, hb(at, at, "r"), 2, deadlines),
        (new_ev, hb(at, "2026-07-14T02:06:00.000001Z", "r"), 2, "silence lease exceeds manifest maximum"),
        (&empty, hb(at, lease, "r"), 2, "liveness evidence is required"),
        (new_ev, hb(at, lease, " "), 2, "liveness reason is required"),
        (&bad_ev, hb(at, lease, "r"), 2, "evidence summary must be at most 256 characters"),
        (new_ev, of("stalled-start", "agent-s"), 5, "heartbeat requires a running lane"),
        (new_ev, of("leased", "agent-x"), 5, "agent does not own the lane"),
        (new_ev, of("done", "agent-d"), 5, "lane is not active"),
        (new_ev, of("ghost", "agent-l"), 5, "lane does not exist"),
        (new_ev, put(few_keys), 2, "JSON input fields do not match the command contract"),
        (new_ev, hb("2026-07-14T01:56:00", lease, "r"), 2, "timestamp must be UTC ISO-8601 ending in Z"),
        (new_ev, hb(at, "2026-07-14Z", "r"), 2, "timestamp must be timezone-aware"),
        // A lax timestamp passes every rule but cannot be stored.
        (new_ev, hb("2026-07-14T01:56Z", lease, "r"), 2, "timestamp must be a UTC ISO-8601 timestamp ending in Z"),
        (&object, hb(at, lease, "r"), 2, "JSON input has the wrong top-level type"),
        (new_ev, put(json!([])), 2, "JSON input has the wrong top-level type"),
    ];
    for (ev, input, code, message) in &cases {
        f.refused(
            "heartbeat",
            &["--evidence", ev, "--input", input],
            *code,
            message,
        );
    }
    // Changing only the reason does not make used evidence fresh (stricter
    // than the reference): the same evidence cannot renew a lease forever.
    let renewed = f.put(
        "ok.json",
        &heartbeat_input(
            "2026-07-14T01:56:00Z",
            "2026-07-14T02:06:00Z",
            "still benchmarking",
        ),
    );
    f.refused(
        "heartbeat",
        &["--evidence", &same_ev, "--input", &renewed],
        2,
        "liveness evidence was already recorded for this lane",
    );
    // New evidence renews it.
    let fresh = f.put_evidence("fresh.json", "log", "benchmark 7 of 9 done");
    f.ok("heartbeat", &["--evidence", &fresh, "--input", &renewed]);
}

/// `--evidence <evidence>` on lane `cleared` (agent `agent-c`, at 01:00),
/// then `extra`.
fn on_cleared<'a>(evidence: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let cleared = ["--lane-id", "cleared", "--agent-id", "agent-c"];
    let mut argv = vec!["--evidence", evidence];
    argv.extend(cleared);
    argv.extend(["--at", "2026-07-14T01:00:00Z"]);
    argv.extend_from_slice(extra);
    argv
}

#[test]
fn liveness_mutations_fence_the_owner_before_their_in_lock_rules() {
    let f = Fixture::new("13-liveness-paths");
    let stale = f.stale_owner();
    let ev = f.put_evidence("ev.json", "log", "new");
    let empty = f.put("empty.json", &json!([]));
    // Valid pre-lock input, stale owner: exit 5 for each command.
    let hb = f.put(
        "hb.json",
        &heartbeat_input("2026-07-14T01:56:00Z", "2026-07-14T02:06:00Z", "r"),
    );
    let decision = f.put(
        "decision.json",
        &json!({"action": "suspect_stall", "reason": "no fresh evidence"}),
    );
    let bound = f.put(
        "bound.json",
        &json!([{"kind": "liveness", "summary": "decision",
                 "checksum": canonical::sha256_hex(br#"{"action":"suspect_stall","reason":"no fresh evidence"}"#)}]),
    );
    let tool = f.put_evidence("tool.json", "tool", "interrupt sent");
    let stale_cases: Vec<(&str, Vec<&str>)> = vec![
        ("heartbeat", vec!["--evidence", &empty, "--input", &hb]),
        (
            "stall-record",
            on_cleared(
                &bound,
                &["--reason", "no fresh evidence", "--decision", &decision],
            ),
        ),
        ("stall-clear", on_cleared(&empty, &["--reason", ""])),
        (
            "probe-sent",
            on_cleared(&ev, &["--deadline", "2026-07-14T09:00:00Z"]),
        ),
        ("interrupt-result", on_cleared(&tool, &[])),
    ];
    for (command, args) in &stale_cases {
        let before = common::snapshot(&f.root);
        let e = f
            .as_owner(&stale, command, args)
            .assert_error(5, "coordinator_conflict");
        assert_eq!(
            e["message"], "owner handle does not match the current run owner",
            "{command}"
        );
        assert_eq!(before, common::snapshot(&f.root));
    }
    // Invalid pre-lock input beats the stale owner: exit 2.
    let unparsable = f.put("x.json", &heartbeat_input("soon", "later", "r"));
    let bad_cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "heartbeat",
            vec!["--evidence", &ev, "--input", &unparsable],
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            "stall-record",
            on_cleared(
                &ev,
                &["--reason", "no fresh evidence", "--decision", &decision],
            ),
            "stall evidence must bind the liveness decision checksum",
        ),
        (
            "stall-clear",
            vec![
                "--evidence",
                &ev,
                "--lane-id",
                "a b",
                "--agent-id",
                "agent-c",
                "--at",
                "2026-07-14T01:00:00Z",
                "--reason",
                "r",
            ],
            "lane id must match the identifier contract",
        ),
        (
            "probe-sent",
            on_cleared(&empty, &["--deadline", "2026-07-14T01:00:30Z"]),
            "lifecycle transition requires evidence",
        ),
        (
            "interrupt-result",
            on_cleared(&ev, &[]),
            "native interrupt tool evidence is required",
        ),
    ];
    for (command, args, message) in &bad_cases {
        let e = f
            .as_owner(&stale, command, args)
            .assert_error(2, "contract_error");
        common::assert_message(&e, message);
    }
    // --expected-head: syntax before any input file, CAS after the owner.
    let head = f.ok("verify", &[])["checksum"]
        .as_str()
        .unwrap()
        .to_string();
    f.refused(
        "heartbeat",
        &[
            "--evidence",
            "/nonexistent",
            "--input",
            "/nonexistent",
            "--expected-head",
            "ABC",
        ],
        2,
        "expected receipt head must be lowercase SHA-256",
    );
    let probe_expecting = |head: &str| {
        [
            "--evidence",
            &ev,
            "--lane-id",
            "stalled-start",
            "--agent-id",
            "agent-s",
            "--at",
            "2026-07-14T02:00:00Z",
            "--deadline",
            "2026-07-14T02:01:00Z",
            "--expected-head",
            head,
        ]
        .map(str::to_string)
    };
    f.refused(
        "probe-sent",
        &strs(&probe_expecting(&"0".repeat(64))),
        5,
        "receipt head changed before mutation",
    );
    f.ok("probe-sent", &strs(&probe_expecting(&head)));
}

// ------------------------------------------------------------- stall-record

#[test]
fn a_stall_is_recorded_from_the_liveness_check_it_binds() {
    let f = Fixture::new("13-liveness-paths");
    let at = "2026-07-14T01:05:30Z";
    // The lane's last event was 01:03:30: one microsecond before the window
    // ends it is fresh.
    assert_eq!(
        f.check("cleared", "2026-07-14T01:05:29.999999Z", "unknown")
            .0,
        "continue"
    );
    let out = f.ok("liveness-check", &["--lane-id", "cleared", "--at", at]);
    let decision = json!({"action": out["action"], "reason": out["reason"]});
    assert_eq!(decision["action"], "suspect_stall");
    let checksum = canonical::digest(&decision);
    let decision_file = f.put("decision.json", &decision);
    let ev = f.put(
        "ev.json",
        &json!([{"kind": "liveness", "summary": "liveness-check decision", "checksum": checksum}]),
    );
    // Evidence, lane and agent sit at indexes 1, 3 and 5: the refusals
    // below replace them there.
    let args = |at: &'static str, reason: &'static str, decision: &str| -> Vec<String> {
        [
            "--evidence",
            &ev,
            "--lane-id",
            "cleared",
            "--agent-id",
            "agent-c",
            "--at",
            at,
            "--reason",
            reason,
            "--decision",
            decision,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let stale = "liveness decision is stale or mismatched";
    // Recomputed one microsecond earlier it is "continue".
    let a = args(
        "2026-07-14T01:05:29.999999Z",
        "no fresh evidence",
        &decision_file,
    );
    f.refused("stall-record", &strs(&a), 5, stale);
    let a = args("2026-07-14T01:05:30Z", "looks stuck", &decision_file);
    f.refused("stall-record", &strs(&a), 5, stale);
    // Exactly two keys: an extra key breaks the match even when bound.
    let extra =
        json!({"action": "suspect_stall", "reason": "no fresh evidence", "lane": "cleared"});
    let extra_file = f.put("extra.json", &extra);
    let extra_ev = f.put(
        "extra-ev.json",
        &json!([{"kind": "liveness", "summary": "d", "checksum": canonical::digest(&extra)}]),
    );
    let mut a = args("2026-07-14T01:05:30Z", "no fresh evidence", &extra_file);
    a[1] = extra_ev.clone();
    f.refused("stall-record", &strs(&a), 5, stale);
    // Pre-lock rules.
    let a = args("2026-07-14T01:05:30Z", " ", &decision_file);
    f.refused("stall-record", &strs(&a), 2, "stall reason is required");
    let a = args(
        "2026-07-14T01:05:30Z",
        "no fresh evidence",
        &f.put(
            "c.json",
            &json!({"action": "continue", "reason": "fresh evidence"}),
        ),
    );
    f.refused(
        "stall-record",
        &strs(&a),
        2,
        "stall recording requires a suspect_stall decision",
    );
    let a = args(
        "2026-07-14T01:05:30Z",
        "no fresh evidence",
        &f.put("l.json", &json!([decision])),
    );
    f.refused(
        "stall-record",
        &strs(&a),
        2,
        "JSON input has the wrong top-level type",
    );
    let a = args(
        "2026-07-14T01:05:30Z",
        "no fresh evidence",
        &f.put("r.json", &json!({"action": "suspect_stall", "reason": 1})),
    );
    f.refused("stall-record", &strs(&a), 2, "liveness decision is invalid");
    let mut a = args("2026-07-14T01:05:30Z", "no fresh evidence", &decision_file);
    a[1] = f.put_evidence("unbound.json", "liveness", "no checksum");
    f.refused(
        "stall-record",
        &strs(&a),
        2,
        "stall evidence must bind the liveness decision checksum",
    );
    // Lane and agent are only checked in the lock.
    let mut a = args("2026-07-14T01:05:30Z", "no fresh evidence", &decision_file);
    a[3] = "no such lane".into();
    f.refused("stall-record", &strs(&a), 5, "lane does not exist");
    let mut a = args("2026-07-14T01:05:30Z", "no fresh evidence", &decision_file);
    a[5] = "agent-x".into();
    f.refused("stall-record", &strs(&a), 5, "agent does not own the lane");
    // The recorded decision.
    let a = args("2026-07-14T01:05:30Z", "no fresh evidence", &decision_file);
    let out = f.ok("stall-record", &strs(&a));
    assert_eq!(out["sequence"], 44);
    let event = f.last_event();
    assert_eq!(event["event_type"], "stall_suspected");
    assert_eq!(event["from_state"], "running");
    assert_eq!(event["to_state"], "suspected_stall");
    assert_eq!(event["reason"], "no fresh evidence");
    assert_eq!(event["timestamp"], at);
    assert_eq!(event["metadata"], json!({"owner_epoch": 1}));
    assert_eq!(
        f.check("cleared", "2026-07-14T02:00:00Z", "alive"),
        (
            "send_probe".to_string(),
            "probe has not been sent".to_string()
        )
    );
    // Not twice: the decision for a stalled lane is send_probe.
    f.refused("stall-record", &strs(&a), 5, stale);
}

// -------------------------------------------------------------- stall-clear

#[test]
fn stall_clear_writes_lane_recovered() {
    let f = Fixture::new("13-liveness-paths");
    let stall_ev = f.scenario_input("stall-stalled-start-2026-07-14T010100Z-evidence.json");
    let new_ev = f.put_evidence("ev.json", "message", "agent replied");
    let empty = f.put("empty.json", &json!([]));
    let args = |ev: &str, lane: &str, agent: &str, reason: &str| -> Vec<String> {
        let mut argv = common::lane_argv(lane, agent, "2026-07-14T01:20:00Z", ev);
        argv.extend(["--reason", reason]);
        argv.iter().map(|s| s.to_string()).collect()
    };
    let lifecycle = "current state does not allow lifecycle intent";
    #[rustfmt::skip]
    let cases: Vec<(&String, &str, &str, &str, i32, &str)> = vec![
        // The stall record's own evidence and reason are not fresh.
        (&stall_ev, "stalled-start", "agent-s", "startup ACK deadline elapsed", 2, "liveness evidence is unchanged"),
        (&empty, "stalled-start", "agent-s", "replied", 2, "liveness evidence is required"),
        (&new_ev, "stalled-start", "agent-s", "\t", 2, "liveness reason is required"),
        (&new_ev, "leased", "agent-l", "replied", 5, lifecycle),
        (&new_ev, "awaiting", "agent-w", "replied", 5, lifecycle),
        (&new_ev, "stalled-start", "an agent", "replied", 2, "agent id must match the identifier contract"),
        // ... a valid but wrong agent is a conflict.
        (&new_ev, "stalled-start", "agent-t", "replied", 5, "agent does not own the lane"),
        // The stall record's evidence with another reason is still used
        // evidence (stricter than the reference); new evidence clears.
        (&stall_ev, "stalled-start", "agent-s", "agent replied to status query", 2, "liveness evidence was already recorded for this lane"),
    ];
    for (ev, lane, agent, reason, code, message) in cases {
        let a = args(ev, lane, agent, reason);
        f.refused("stall-clear", &strs(&a), code, message);
    }
    let a = args(
        &new_ev,
        "stalled-start",
        "agent-s",
        "agent replied to status query",
    );
    f.ok("stall-clear", &strs(&a));
    let event = f.last_event();
    assert_eq!(event["event_type"], "lane_recovered");
    assert_eq!(event["from_state"], "suspected_stall");
    assert_eq!(event["to_state"], "running");
    assert_eq!(event["reason"], "agent replied to status query");
    assert_eq!(
        f.check("stalled-start", "2026-07-14T01:21:59.999999Z", "unknown")
            .0,
        "continue"
    );
    assert_eq!(
        f.check("stalled-start", "2026-07-14T01:22:00Z", "dead").0,
        "suspect_stall"
    );
}

// --------------------------------------------------------------- probe-sent

#[test]
fn probe_sent_deadline_within_the_grace() {
    let f = Fixture::new("13-liveness-paths");
    let ev = f.put_evidence("ev.json", "tool", "send_message probe");
    let args = |lane: &str, agent: &str, deadline: &str| -> Vec<String> {
        let mut argv = common::lane_argv(lane, agent, "2026-07-14T01:20:00Z", &ev);
        argv.extend(["--deadline", deadline]);
        argv.iter().map(|s| s.to_string()).collect()
    };
    let grace = "probe deadline must be within the manifest probe grace";
    let not_now = "current state does not allow lifecycle intent";
    let at = "2026-07-14T01:21:00Z";
    for (lane, agent, deadline, code, message) in [
        ("stalled-start", "agent-s", "2026-07-14T01:20:00Z", 2, grace),
        ("stalled-start", "agent-s", "2026-07-14T01:19:00Z", 2, grace),
        (
            "stalled-start",
            "agent-s",
            "2026-07-14T01:21:00.000001Z",
            2,
            grace,
        ),
        (
            "stalled-start",
            "agent-s",
            "2026-07-14T01:21Z",
            2,
            "probe_deadline must be a UTC ISO-8601 timestamp ending in Z",
        ),
        (
            "stalled-start",
            "agent-s",
            "tomorrow",
            2,
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        ("overdue", "agent-o", at, 5, not_now),
        ("pending", "agent-p", at, 5, not_now),
    ] {
        f.refused(
            "probe-sent",
            &strs(&args(lane, agent, deadline)),
            code,
            message,
        );
    }
    // Exactly the grace is allowed.
    f.ok(
        "probe-sent",
        &strs(&args("stalled-start", "agent-s", "2026-07-14T01:21:00Z")),
    );
    let event = f.last_event();
    assert_eq!(event["event_type"], "probe_sent");
    assert_eq!(event["to_state"], "recovering");
    assert_eq!(event["reason"], Value::Null);
    assert_eq!(
        event["metadata"],
        json!({"owner_epoch": 1, "probe_deadline": "2026-07-14T01:21:00Z"})
    );
    // The command deadline (03:00) still holds the interrupt back.
    assert_eq!(
        f.check("stalled-start", "2026-07-14T01:21:00Z", "dead"),
        (
            "await_probe".to_string(),
            "a recovery deadline remains".to_string()
        )
    );
}

// --------------------------------------------------------- interrupt-result

#[test]
fn interrupt_result_only_when_liveness_authorizes_it() {
    let f = Fixture::new("13-liveness-paths");
    let tool = f.put_evidence("tool.json", "tool", "Native INTERRUPT delivered");
    let args = |ev: &str, lane: &str, agent: &str, at: &str| -> Vec<String> {
        common::lane_argv(lane, agent, at, ev)
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let not_authorized = "liveness policy does not authorize interrupt";
    // overdue: probe 01:04, command deadline 01:30.
    f.refused(
        "interrupt-result",
        &strs(&args(
            &tool,
            "overdue",
            "agent-o",
            "2026-07-14T01:29:59.999999Z",
        )),
        5,
        not_authorized,
    );
    // exhausted: replacement limit reached, the main session takes over.
    assert_eq!(
        f.check("exhausted", "2026-07-14T02:00:00Z", "alive").0,
        "main_takeover"
    );
    let e = f.refused(
        "interrupt-result",
        &strs(&args(&tool, "exhausted", "agent-x", "2026-07-14T02:00:00Z")),
        5,
        not_authorized,
    );
    // What liveness answers instead is a field, and the hint says so.
    assert_eq!(
        e["fields"]["decision"],
        json!({"action": "main_takeover", "reason": "replacement limit reached"})
    );
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .starts_with("at 2026-07-14T02:00:00Z liveness answers main_takeover"),
        "{e}"
    );
    // awaiting: its command deadline (03:00) remains.
    f.refused(
        "interrupt-result",
        &strs(&args(&tool, "awaiting", "agent-w", "2026-07-14T02:00:00Z")),
        5,
        not_authorized,
    );
    f.refused(
        "interrupt-result",
        &strs(&args(
            &tool,
            "stalled-start",
            "agent-s",
            "2026-07-14T02:00:00Z",
        )),
        5,
        "interrupt requires a recovering lane",
    );
    let probe = f.put_evidence("p.json", "tool", "send_message probe");
    f.refused(
        "interrupt-result",
        &strs(&args(&probe, "overdue", "agent-o", "2026-07-14T01:30:00Z")),
        2,
        "native interrupt tool evidence is required",
    );
    // At exactly the command deadline it is authorized; and repeatable.
    f.ok(
        "interrupt-result",
        &strs(&args(&tool, "overdue", "agent-o", "2026-07-14T01:30:00Z")),
    );
    let event = f.last_event();
    assert_eq!(event["event_type"], "agent_interrupted");
    assert_eq!(event["from_state"], "recovering");
    assert_eq!(event["to_state"], "recovering");
    assert_eq!(event["reason"], "native interrupt recorded");
    assert_eq!(event["metadata"], json!({"owner_epoch": 1}));
    f.ok(
        "interrupt-result",
        &strs(&args(&tool, "overdue", "agent-o", "2026-07-14T01:31:00Z")),
    );
    assert_eq!(f.last_event()["sequence"], 45);
}

// ------------------------------------------------------------ hand-built runs

/// A fresh run, started by the binary, with lane events appended as sealed
/// receipt lines (the acknowledged head kept in step).
struct Built {
    _tmp: tempfile::TempDir,
    flow: Flow,
    root: PathBuf,
    run_id: String,
    token: String,
    hash: String,
    head: String,
    sequence: u64,
}

impl Built {
    fn new() -> Built {
        let (tmp, flow) = crate::bed::flow_elsewhere();
        let root = tmp.path().join("state");
        let run_id = flow.init(&root, &tmp.path().join("repo"));
        let ev = tmp.path().join("ev.json");
        std::fs::write(&ev, r#"[{"kind":"user_approval","summary":"ok"}]"#).unwrap();
        for command in ["run-approve", "run-start"] {
            let rest = ["--evidence", ev.to_str().unwrap(), "--at", common::T0];
            let owner = root.join("handles/main.owner");
            flow.run(&common::mutation_argv(
                &root, command, &run_id, &owner, &rest,
            ))
            .assert_ok();
        }
        let receipt =
            std::fs::read_to_string(root.join("runs").join(&run_id).join("receipt.jsonl")).unwrap();
        let last: Value = serde_json::from_str(receipt.lines().last().unwrap()).unwrap();
        Built {
            _tmp: tmp,
            flow,
            root,
            run_id,
            token: last["owner_token"].as_str().unwrap().into(),
            hash: last["manifest_hash"].as_str().unwrap().into(),
            head: last["checksum"].as_str().unwrap().into(),
            sequence: last["sequence"].as_u64().unwrap(),
        }
    }

    fn append(
        &mut self,
        event_type: &str,
        from: Option<&str>,
        to: &str,
        at: &str,
        metadata: Value,
    ) {
        let dir = RunDir::new(
            &StateRoot::begin(&self.root),
            &RunId::parse(&self.run_id).unwrap(),
        );
        let sealed = EventDraft {
            run_id: self.run_id.clone(),
            lane_id: LaneId::parse("build"),
            agent_id: AgentId::parse("agent-1"),
            sequence: self.sequence + 1,
            event_type: bluetape_flow::receipt::vocab::EventType::parse(event_type)
                .expect("a known event type"),
            from_state: from.map(str::to_string),
            to_state: Some(to.into()),
            timestamp: at.into(),
            owner_token: self.token.clone(),
            manifest_hash: self.hash.clone(),
            previous_checksum: self.head.clone(),
            evidence_refs: json!([{"kind": "note", "summary": format!("{event_type} at {at}")}]),
            reason: None,
            metadata: Some(metadata),
        }
        .seal();
        let path = dir.receipt_path();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&sealed.line);
        std::fs::write(&path, &bytes).unwrap();
        dir.write_head(&AckHead {
            sequence: self.sequence + 1,
            checksum: sealed.checksum.clone(),
            byte_length: bytes.len() as u64,
            canonical_through: self.sequence + 1,
        })
        .unwrap();
        self.sequence += 1;
        self.head = sealed.checksum.into();
    }

    fn lane(&mut self, command_deadline: Value, at: &str) {
        self.append(
            "lane_created",
            None,
            "pending",
            at,
            json!({"owner_epoch": 1, "assignment": "build", "write_scope": [], "fallback": "main",
                   "startup_ack_deadline": "2026-07-14T01:00:30Z", "command_deadline": command_deadline,
                   "parent_lane_id": null, "replacement_count": 0}),
        );
        self.append(
            "lane_started",
            Some("pending"),
            "starting",
            at,
            json!({"owner_epoch": 1}),
        );
        self.append(
            "startup_ack",
            Some("starting"),
            "running",
            at,
            json!({"owner_epoch": 1}),
        );
    }

    fn check(&self, at: &str) -> Output {
        self.flow.run(&common::read_argv(
            &self.root,
            "liveness-check",
            &self.run_id,
            &["--lane-id", "build", "--at", at],
        ))
    }
}

#[test]
fn hand_built_lanes_the_cli_cannot_make() {
    // A receipt may carry a null command deadline: fresh lanes still answer,
    // stale ones cannot be judged (the reference's contract error).
    let mut b = Built::new();
    b.lane(Value::Null, "2026-07-14T01:00:01Z");
    let out = b.check("2026-07-14T01:02:00.999999Z");
    out.assert_ok();
    assert_eq!(out.json()["action"], "continue");
    assert_eq!(out.json()["sequence"], b.sequence);
    assert_eq!(out.json()["checksum"], b.head);
    let e = b
        .check("2026-07-14T01:03:01Z")
        .assert_error(2, "contract_error");
    assert_eq!(e["message"], "timestamp must be UTC ISO-8601 ending in Z");
    // A lane whose last event is a minute before the end of representable
    // time: the reference crashes, we refuse.
    let mut b = Built::new();
    b.lane(json!("9999-12-31T23:59:59Z"), "9999-12-31T23:59:00Z");
    let e = b
        .check("9999-12-31T23:59:30Z")
        .assert_error(2, "contract_error");
    assert_eq!(e["message"], "liveness window exceeds the timestamp range");
}

// ------------------------------------------------------------------ Phase 1

#[test]
fn phase1_runs_are_refused_by_every_liveness_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let run_id = common::PHASE1_RUN_ID;
    common::write_phase1_run(&root, &[("run_created", None, Some("planned"))], None);
    let flow = Flow::new(tmp.path());
    let owner = root.join("handles/main.owner");
    let owner = owner.to_str().unwrap();
    let file = tmp.path().join("f.json");
    std::fs::write(&file, "[]").unwrap();
    let file = file.to_str().unwrap();
    let lane = common::PHASE1_LANE_ARGS;
    // The mutations as an owner with evidence; the lane commands with
    // the lane's arguments after their own.
    let owned = |command, rest: &[_]| {
        let mut argv = vec![command, "--owner-file", owner, "--evidence", file];
        argv.extend_from_slice(rest);
        argv
    };
    let of_lane = |command, rest| [owned(command, rest), lane.to_vec()].concat();
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "liveness-check",
            "--lane-id",
            "l",
            "--at",
            "2026-07-14T01:00:00Z",
        ],
        owned("heartbeat", &["--input", file]),
        of_lane("stall-record", &["--reason", "r", "--decision", file]),
        of_lane("stall-clear", &["--reason", "r"]),
        of_lane("probe-sent", &["--deadline", "x"]),
        of_lane("interrupt-result", &[]),
    ];
    let before = common::snapshot(&root);
    // No handle file exists: the manifest is refused before any owner is read.
    for case in cases {
        let argv = common::read_argv(&root, case[0], run_id, &case[1..]);
        common::assert_phase1_unsupported(&flow.run(&argv), case[0]);
    }
    assert_eq!(before, common::snapshot(&root));
}

// --------------------------------------------------------------------- help

#[test]
fn help_texts_name_the_safe_next_step() {
    let (_tmp, flow) = crate::bed::flow_elsewhere();
    common::assert_helps_say(
        &flow,
        &[
            (
                "heartbeat",
                "Mutation. Capability: Phase 2 only. Safe next: liveness-check.",
            ),
            (
                "stall-record",
                "Mutation. Capability: Phase 2 only. Safe next: probe-sent.",
            ),
            ("stall-clear", "Safe next: heartbeat or liveness-check."),
            (
                "probe-sent",
                "Safe next: perform the native probe, then probe-ack or interrupt-result.",
            ),
            ("interrupt-result", "Safe next: lane-reassign."),
            (
                "liveness-check",
                "Read-only. Capability: Phase 2 only. Safe next: the recommended bounded lifecycle command.",
            ),
        ],
    );
}

// ------------------------------------------- liveness is never completion

/// A heartbeat (or a cleared stall) proves that the agent is alive, never
/// that its lane is done: the evidence it recorded cannot complete the lane.
#[test]
fn liveness_evidence_cannot_complete_its_lane() {
    let f = Fixture::new("13-liveness-paths");
    let changed = f.put("changed.json", &json!([]));
    let complete = |lane: &str, agent: &str, ev: &str| -> Vec<String> {
        [
            "--lane-id",
            lane,
            "--agent-id",
            agent,
            "--at",
            "2026-07-14T02:10:00Z",
            "--evidence",
            ev,
            "--changed-paths",
            &changed,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let refusal = "liveness evidence cannot complete a lane";
    // The reference's own heartbeat.
    let reference_hb = f.scenario_input("heartbeat-leased-evidence.json");
    f.refused(
        "lane-complete",
        &strs(&complete("leased", "agent-l", &reference_hb)),
        2,
        refusal,
    );
    // One written by us.
    let (ev, _) = f.leased_heartbeat(
        "benchmark finished 60/60",
        "2026-07-14T02:01:00Z",
        "2026-07-14T02:11:00Z",
        "benchmark done",
    );
    f.refused(
        "lane-complete",
        &strs(&complete("leased", "agent-l", &ev)),
        2,
        refusal,
    );
    // The evidence that cleared a stall.
    let cleared = f.put_evidence("cleared.json", "message", "all done");
    f.ok(
        "stall-clear",
        &[
            "--evidence",
            &cleared,
            "--lane-id",
            "stalled-start",
            "--agent-id",
            "agent-s",
            "--at",
            "2026-07-14T02:02:00Z",
            "--reason",
            "agent replied",
        ],
    );
    f.refused(
        "lane-complete",
        &strs(&complete("stalled-start", "agent-s", &cleared)),
        2,
        refusal,
    );
    // Stricter than the reference: an OLDER heartbeat of the lane (not its
    // latest liveness record) and another lane's liveness evidence are
    // refused as completion evidence too.
    f.refused(
        "lane-complete",
        &strs(&complete("leased", "agent-l", &reference_hb)),
        2,
        refusal,
    );
    f.refused(
        "lane-complete",
        &strs(&complete("stalled-start", "agent-s", &ev)),
        2,
        refusal,
    );
}
