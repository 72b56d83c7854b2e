//! Lane lifecycle commands through the binary: a lane's whole life, every
//! refusal of lane-create and of the shared transition path (exit status,
//! error code, message, next_command, state byte-identical), the lane
//! limit, the lane-complete rules, and the probe-ack fence after an
//! interrupt (decisions.md 9) on a hand-sealed receipt.

use crate::bed as common;

use bluetape_flow::receipt::canonical;

use common::{Flow, Output, T0, TestBed, bed_type};
use serde_json::{Value, json};

bed_type!(Run);

/// A fresh run, approved and started, with `src/` and `docs/` in its repo.
fn setup() -> Run {
    let run = planned();
    run.step("run-approve", &[]).assert_ok();
    run.step("run-start", &[]).assert_ok();
    run
}

fn planned() -> Run {
    let bed = TestBed::planned(&["runtime"])
        .with_evidence(r#"[{"kind":"test","summary":"tests passed ✓"}]"#);
    std::fs::create_dir_all(bed.repo.join("src")).unwrap();
    std::fs::create_dir_all(bed.repo.join("docs")).unwrap();
    Run(bed)
}

fn lane_input(lane_id: &str, agent_id: &str, scope: Value) -> Value {
    json!({
        "lane_id": lane_id, "agent_id": agent_id, "assignment": "Implement the parser",
        "write_scope": scope, "fallback": "main session takes over",
        "observed_at": T0,
        "startup_ack_deadline": "2026-07-14T01:00:30Z",
        "command_deadline": "2026-07-14T01:10:00Z",
    })
}

impl Run {
    fn create(&self, input: &Value) -> Output {
        let path = self.file(input);
        self.step("lane-create", &["--input", &path])
    }

    /// A lane transition at `at` with extra flags.
    fn lane(&self, command: &str, lane: &str, agent: &str, at: &str, extra: &[&str]) -> Output {
        let mut argv = vec!["--lane-id", lane, "--agent-id", agent, "--at", at];
        argv.extend_from_slice(extra);
        self.step(command, &argv)
    }

    fn complete(&self, lane: &str, agent: &str, paths: &Value) -> Output {
        let path = self.file(paths);
        self.lane(
            "lane-complete",
            lane,
            agent,
            "2026-07-14T01:05:00Z",
            &["--changed-paths", &path],
        )
    }

    /// lane-create: a pending lane.
    fn pending_lane(&self, lane: &str, agent: &str, scope: Value) {
        self.create(&lane_input(lane, agent, scope)).assert_ok();
    }

    /// create -> lane-start -> startup-ack.
    fn running_lane(&self, lane: &str, agent: &str, scope: Value) {
        self.pending_lane(lane, agent, scope);
        self.lane("lane-start", lane, agent, "2026-07-14T01:00:05Z", &[])
            .assert_ok();
        self.lane("startup-ack", lane, agent, "2026-07-14T01:00:06Z", &[])
            .assert_ok();
    }

    fn lane_cache(&self, lane: &str) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.dir.join("lanes").join(format!("{lane}.json"))).unwrap(),
        )
        .unwrap()
    }
}

#[test]
fn a_lane_lives_its_whole_life() {
    let run = setup();
    let out = run
        .create(&lane_input(
            "parser",
            "agent-1",
            json!(["src/", "./docs", "src"]),
        ))
        .assert_ok();
    assert_eq!(out["operation"], "lane-create");
    assert_eq!(out["sequence"], 4);
    assert_eq!(out["run_state"], "running");
    assert_eq!(out.as_object().unwrap().len(), 7);
    let cache = run.lane_cache("parser");
    assert_eq!(cache["state"], "pending");
    assert_eq!(cache["write_scope"], json!(["src", "docs"]));
    // An ACK after the startup deadline is accepted (no deadline enforced).
    for (command, at, state) in [
        ("lane-start", "2026-07-14T01:00:05Z", "starting"),
        ("startup-ack", "2026-07-14T01:00:45Z", "running"),
    ] {
        let out = run.lane(command, "parser", "agent-1", at, &[]).assert_ok();
        assert_eq!(out["operation"], command);
        assert_eq!(run.lane_cache("parser")["state"], state);
    }
    let done = json!([{"kind": "test", "summary": "cargo test: 12 passed", "exit_status": 0}]);
    std::fs::write(&run.evidence, done.to_string()).unwrap();
    let out = run
        .complete("parser", "agent-1", &json!(["src/lexer.rs", "docs"]))
        .assert_ok();
    assert_eq!(out["operation"], "lane-complete");
    assert_eq!(out["sequence"], 7);
    assert_eq!(out["checksum"], run.verify()["checksum"]);

    let events = run.events();
    let created = &events[3];
    assert_eq!(created["event_type"], "lane_created");
    assert_eq!(created["timestamp"], T0);
    assert_eq!(created["from_state"], Value::Null);
    assert_eq!(created["to_state"], "pending");
    assert_eq!(created["reason"], Value::Null);
    assert_eq!(
        created["metadata"],
        json!({"owner_epoch": 1, "assignment": "Implement the parser",
               "write_scope": ["src", "docs"], "fallback": "main session takes over",
               "startup_ack_deadline": "2026-07-14T01:00:30Z",
               "command_deadline": "2026-07-14T01:10:00Z",
               "parent_lane_id": null, "replacement_count": 0})
    );
    let kinds: Vec<_> = events[4..]
        .iter()
        .map(|e| {
            (
                e["event_type"].as_str().unwrap(),
                e["from_state"].as_str().unwrap(),
                e["to_state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("lane_started", "pending", "starting"),
            ("startup_ack", "starting", "running"),
            ("lane_completed", "running", "completed"),
        ]
    );
    common::assert_holds(
        &events[6],
        json!({
            "lane_id": "parser", "agent_id": "agent-1",
            "timestamp": "2026-07-14T01:05:00Z", "evidence_refs": done,
            "metadata": {"owner_epoch": 1, "changed_paths": ["src/lexer.rs", "docs"]},
        }),
        "lane_completed",
    );
    let cache = run.lane_cache("parser");
    assert_eq!(cache["state"], "completed");
    assert_eq!(cache["changed_paths"], json!(["src/lexer.rs", "docs"]));
    assert_eq!(cache["terminal_sequence"], 7);
    assert_eq!(cache["evidence_refs"], done);
    // The caches a mutation writes are exactly what rebuild derives.
    let before = common::snapshot(&run.dir.join("lanes"));
    let run_json = std::fs::read(run.dir.join("run.json")).unwrap();
    run.read("rebuild", &[]).assert_ok();
    // rebuild rewrites the files: the same names, modes and bytes.
    let after = common::snapshot(&run.dir.join("lanes"));
    assert_eq!(common::files(&before), common::files(&after));
    assert_eq!(run_json, std::fs::read(run.dir.join("run.json")).unwrap());
    // A completed lane is no longer active.
    run.refused(
        || {
            run.lane(
                "lane-cancel",
                "parser",
                "agent-1",
                T0,
                &["--reason", "late"],
            )
        },
        5,
        "lane is not active",
    );
}

#[test]
fn fail_block_and_cancel_record_their_reason() {
    let run = setup();
    run.pending_lane("a", "agent-a", json!(["src"]));
    // Cancel straight from pending.
    run.lane(
        "lane-cancel",
        "a",
        "agent-a",
        T0,
        &["--reason", "not needed"],
    )
    .assert_ok();
    run.running_lane("b", "agent-b", json!(["src"]));
    run.lane("lane-fail", "b", "agent-b", T0, &["--reason", "tests fail"])
        .assert_ok();
    run.pending_lane("c", "agent-c", json!(["src"]));
    run.lane("lane-start", "c", "agent-c", T0, &[]).assert_ok();
    run.lane(
        "lane-block",
        "c",
        "agent-c",
        T0,
        &["--reason", "needs review"],
    )
    .assert_ok();
    let events = run.events();
    let tail: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e["event_type"].as_str(),
                Some("lane_cancelled" | "lane_failed" | "lane_blocked")
            )
        })
        .map(|e| {
            (
                e["event_type"].as_str().unwrap(),
                e["from_state"].as_str().unwrap(),
                e["reason"].as_str().unwrap(),
                e["metadata"].clone(),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            (
                "lane_cancelled",
                "pending",
                "not needed",
                json!({"owner_epoch": 1})
            ),
            (
                "lane_failed",
                "running",
                "tests fail",
                json!({"owner_epoch": 1})
            ),
            (
                "lane_blocked",
                "starting",
                "needs review",
                json!({"owner_epoch": 1})
            ),
        ]
    );
    for (lane, state, reason) in [
        ("a", "cancelled", "not needed"),
        ("b", "failed", "tests fail"),
        ("c", "blocked", "needs review"),
    ] {
        let cache = run.lane_cache(lane);
        assert_eq!(cache["state"], state);
        assert_eq!(cache["last_reason"], reason);
    }
    // --reason is required by the parser for these three, absent elsewhere.
    for command in ["lane-fail", "lane-block", "lane-cancel"] {
        let before = common::snapshot(&run.root);
        run.lane(command, "a", "agent-a", T0, &[])
            .assert_error(2, "contract_error");
        assert_eq!(before, common::snapshot(&run.root));
    }
    run.lane("lane-start", "a", "agent-a", T0, &["--reason", "x"])
        .assert_error(2, "contract_error");
}

#[test]
fn lane_create_refusals() {
    let run = setup();
    std::os::unix::fs::symlink(run.tmp.path(), run.repo.join("outside")).unwrap();
    let base = || lane_input("l1", "agent-1", json!(["src"]));
    let with = |key: &str, value: Value| {
        let mut input = base();
        input[key] = value;
        input
    };
    let mut missing = base();
    missing.as_object_mut().unwrap().remove("command_deadline");
    let cases: Vec<(Value, &str)> = vec![
        (
            missing,
            "JSON input fields do not match the command contract",
        ),
        (
            with("observed", json!(T0)),
            "JSON input fields do not match the command contract",
        ),
        (
            with("lane_id", json!("../x")),
            "lane id must match the identifier contract",
        ),
        (
            with("agent_id", json!(1)),
            "agent id must match the identifier contract",
        ),
        (
            with("parent_lane_id", json!("a b")),
            "parent lane id must match the identifier contract",
        ),
        (
            with("assignment", json!("   ")),
            "assignment must be non-empty",
        ),
        (with("fallback", json!("")), "fallback must be non-empty"),
        (
            with("replacement_count", json!(-1)),
            "replacement_count must be a non-negative integer",
        ),
        (
            with("write_scope", json!("src")),
            "write_scope must be a bounded list",
        ),
        (
            with("write_scope", json!(["src", "a/../b"])),
            "write scope must not contain traversal",
        ),
        (
            with("write_scope", json!(["src/*.rs"])),
            "write scope must be canonical and relative",
        ),
        (
            with("write_scope", json!(["outside/x"])),
            "contained path includes a symlink",
        ),
        (
            with(
                "write_scope",
                json!((0..33).map(|i| format!("p{i}")).collect::<Vec<_>>()),
            ),
            "write_scope must be a bounded list",
        ),
        (
            with("observed_at", json!("2026-07-14T01:00:30Z")),
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
        ),
        (
            with("command_deadline", json!("2026-07-14T01:00:29Z")),
            "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
        ),
        (
            with("startup_ack_deadline", json!("soon")),
            "startup_ack_deadline must be a UTC timestamp",
        ),
        // Too long for the metadata contract: refused before writing.
        (
            with("assignment", json!("x".repeat(501))),
            "assignment must be at most 500 characters",
        ),
    ];
    for (input, message) in cases {
        run.refused(|| run.create(&input), 2, message);
    }
    // The input must be an object; evidence must be non-empty.
    let list = run.file(&json!([]));
    run.refused(
        || run.step("lane-create", &["--input", &list]),
        2,
        "JSON input has the wrong top-level type",
    );
    std::fs::write(&run.evidence, "[]").unwrap();
    run.refused(
        || run.create(&base()),
        2,
        "lifecycle transition requires evidence",
    );
    std::fs::write(&run.evidence, r#"[{"kind":"k","summary":"s"}]"#).unwrap();
    // In the lock: a duplicate id.
    run.create(&base()).assert_ok();
    run.refused(|| run.create(&base()), 5, "identifier already exists");
    // A stale owner with valid input is 5; with invalid pre-lock input, 2.
    let handle = std::fs::read(run.owner()).unwrap();
    let mut stale: Value = serde_json::from_slice(&handle).unwrap();
    stale["token"] = json!("not-the-owner");
    std::fs::write(run.owner(), stale.to_string()).unwrap();
    run.refused(
        || run.create(&lane_input("l2", "agent-2", json!(["src"]))),
        5,
        "owner handle does not match the current run owner",
    );
    run.refused(
        || run.create(&with("lane_id", json!(""))),
        2,
        "lane id must match the identifier contract",
    );
    std::fs::write(run.owner(), &handle).unwrap();
    // The pinned repo root must still exist.
    std::fs::rename(&run.repo, run.tmp.path().join("moved")).unwrap();
    let before = common::snapshot(&run.root);
    let e = run
        .create(&lane_input("l2", "agent-2", json!(["src"])))
        .assert_error(2, "contract_error");
    assert!(
        e["message"].as_str().unwrap().starts_with(&format!(
            "No such file or directory: '{}' (ENOENT): the run's pinned repo_root",
            run.repo.display()
        )),
        "{e}"
    );
    // The hint is about the missing root, not the shape of write_scope.
    assert!(
        crate::bed::str_field(&e, "hint").contains("restore the repository"),
        "{e}"
    );
    assert_eq!(
        e["fields"],
        json!({"errno": "ENOENT", "path": run.repo.to_string_lossy()}),
        "{e}"
    );
    assert_eq!(before, common::snapshot(&run.root));
}

#[test]
fn lanes_need_a_running_or_recovering_run() {
    let run = planned();
    let e = run.refused(
        || run.create(&lane_input("l1", "agent-1", json!([]))),
        5,
        "run state does not allow this command",
    );
    // The reason is typed: the run's state and the states the command
    // needs are its fields, and its hint says both.
    assert_eq!(
        e["fields"],
        json!({"run_state": "planned", "allowed_run_states": ["running", "recovering"]}),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.starts_with("the run is planned; this command needs it running or recovering"),
        "{hint}"
    );
    assert!(
        hint.contains(&format!("status --run-id {}", run.run_id)),
        "{hint}"
    );
    run.step("run-approve", &[]).assert_ok();
    run.step("run-start", &[]).assert_ok();
    run.step("run-recovery-start", &["--reason", "drift"])
        .assert_ok();
    // Recovering: lanes are still created and moved.
    run.pending_lane("l1", "agent-1", json!([]));
    run.lane("lane-start", "l1", "agent-1", T0, &[]).assert_ok();
    run.step("run-block", &["--reason", "stop"]).assert_ok();
    run.refused(
        || run.lane("startup-ack", "l1", "agent-1", T0, &[]),
        5,
        "run state does not allow this command",
    );
    run.refused(
        || run.create(&lane_input("l2", "agent-2", json!([]))),
        5,
        "run state does not allow this command",
    );
}

#[test]
fn lane_transition_refusals() {
    let run = setup();
    run.pending_lane("l1", "agent-1", json!(["src"]));
    let conflict = |command: &str, lane: &str, agent: &str, message: &str| {
        run.refused(|| run.lane(command, lane, agent, T0, &[]), 5, message);
    };
    conflict("lane-start", "ghost", "agent-1", "lane does not exist");
    conflict("lane-start", "l1", "agent-2", "agent does not own the lane");
    for command in ["startup-ack", "probe-ack"] {
        conflict(
            command,
            "l1",
            "agent-1",
            "current state does not allow lifecycle intent",
        );
    }
    let paths = run.file(&json!([]));
    run.refused(
        || {
            run.lane(
                "lane-complete",
                "l1",
                "agent-1",
                T0,
                &["--changed-paths", &paths],
            )
        },
        5,
        "current state does not allow lifecycle intent",
    );
    run.refused(
        || run.lane("lane-fail", "l1", "agent-1", T0, &["--reason", "x"]),
        5,
        "current state does not allow lifecycle intent",
    );
    // Pre-lock input checks.
    let invalid = |lane: &str, agent: &str, at: &str, message: &str| {
        run.refused(|| run.lane("lane-start", lane, agent, at, &[]), 2, message);
    };
    invalid(
        "../l1",
        "agent-1",
        T0,
        "lane id must match the identifier contract",
    );
    invalid(
        "l1",
        "agent 1",
        T0,
        "agent id must match the identifier contract",
    );
    for at in ["2026-07-14T01:00:00", "2026-02-30T00:00:00Z", "now"] {
        invalid("l1", "agent-1", at, "decided_at must be a UTC timestamp");
    }
    std::fs::write(&run.evidence, "[]").unwrap();
    invalid(
        "l1",
        "agent-1",
        T0,
        "lifecycle transition requires evidence",
    );
    std::fs::write(&run.evidence, r#"[{"kind":"k","summary":"s","raw":1}]"#).unwrap();
    invalid(
        "l1",
        "agent-1",
        T0,
        "evidence reference contains unsupported fields",
    );
    std::fs::write(&run.evidence, r#"[{"kind":"k","summary":"s"}]"#).unwrap();
    // Missing required flags are parser errors.
    for (command, missing) in [("lane-start", "--at"), ("lane-complete", "--changed-paths")] {
        let mut argv = vec!["--lane-id", "l1", "--agent-id", "agent-1"];
        if missing != "--at" {
            argv.extend_from_slice(&["--at", T0]);
        }
        let before = common::snapshot(&run.root);
        run.step(command, &argv).assert_error(2, "contract_error");
        assert_eq!(before, common::snapshot(&run.root));
    }
    // A stale owner: the lane checks never run.
    let handle = std::fs::read(run.owner()).unwrap();
    let mut stale: Value = serde_json::from_slice(&handle).unwrap();
    stale["epoch"] = json!(2);
    std::fs::write(run.owner(), stale.to_string()).unwrap();
    conflict(
        "lane-start",
        "ghost",
        "agent-1",
        "owner handle does not match the current run owner",
    );
    std::fs::write(run.owner(), &handle).unwrap();
    // --expected-head guards transitions too.
    let stale_head = "0".repeat(64);
    run.refused(
        || {
            run.lane(
                "lane-start",
                "l1",
                "agent-1",
                T0,
                &["--expected-head", &stale_head],
            )
        },
        5,
        "receipt head changed before mutation",
    );
    let head = run.verify()["checksum"].as_str().unwrap().to_string();
    run.lane(
        "lane-start",
        "l1",
        "agent-1",
        T0,
        &["--expected-head", &head],
    )
    .assert_ok();
}

#[test]
fn lane_complete_rules() {
    let run = setup();
    std::os::unix::fs::symlink(run.tmp.path(), run.repo.join("src/escape")).unwrap();
    run.running_lane("l1", "agent-1", json!(["src", "docs/api"]));
    let refused = |paths: Value, code: i32, message: &str| {
        run.refused(|| run.complete("l1", "agent-1", &paths), code, message);
    };
    let outside = "changed paths exceed the pinned lane scope";
    refused(json!(["lib/x.rs"]), 5, outside);
    refused(json!(["srcx/a.rs"]), 5, outside);
    refused(json!(["docs/apix"]), 5, outside);
    refused(json!(["docs"]), 5, outside);
    refused(json!(["src/a.rs", "README.md"]), 5, outside);
    let canonical = "changed paths must already be canonical";
    refused(json!(["./src/a.rs"]), 2, canonical);
    refused(json!(["src/a/"]), 2, canonical);
    refused(json!(["src//a"]), 2, canonical);
    refused(json!(["src/a", "src/a"]), 2, canonical);
    // Non-canonical wins over outside (2 before 5).
    refused(json!(["./lib"]), 2, canonical);
    refused(
        json!(["src/../lib"]),
        2,
        "write scope must not contain traversal",
    );
    refused(
        json!(["src/escape/x"]),
        2,
        "contained path includes a symlink",
    );
    refused(
        json!(["/etc/passwd"]),
        2,
        "write scope must be canonical and relative",
    );
    refused(
        json!(["src/a", 1]),
        2,
        "changed paths must be non-empty strings",
    );
    refused(json!([""]), 2, "changed paths must be non-empty strings");
    refused(
        json!({"src": 1}),
        2,
        "JSON input has the wrong top-level type",
    );
    refused(
        json!((0..33).map(|i| format!("src/{i}")).collect::<Vec<_>>()),
        2,
        "write_scope must be a bounded list",
    );
    // The changed-path rules run in the lock: a stale owner is told so
    // first, even for non-canonical paths (P1).
    let handle = std::fs::read(run.owner()).unwrap();
    let mut stale: Value = serde_json::from_slice(&handle).unwrap();
    stale["token"] = json!("someone-else");
    std::fs::write(run.owner(), stale.to_string()).unwrap();
    refused(
        json!(["./src/a.rs"]),
        5,
        "owner handle does not match the current run owner",
    );
    std::fs::write(run.owner(), &handle).unwrap();
    // Inside the scope, in any order; an existing or a new path.
    run.complete(
        "l1",
        "agent-1",
        &json!(["src/escapee", "docs/api/x.md", "src"]),
    )
    .assert_ok();
    // An empty scope allows only an empty change list.
    run.running_lane("l2", "agent-2", json!([]));
    run.refused(
        || run.complete("l2", "agent-2", &json!(["src"])),
        5,
        outside,
    );
    run.complete("l2", "agent-2", &json!([])).assert_ok();
    assert_eq!(run.lane_cache("l2")["changed_paths"], json!([]));
}

#[test]
fn a_heartbeat_cannot_complete_a_lane() {
    let run = setup();
    run.running_lane("l1", "agent-1", json!(["src"]));
    // A heartbeat transaction as the heartbeat command writes it.
    let beat = json!([{"kind": "heartbeat", "summary": "still compiling"}]);
    let digest = canonical::digest(&beat);
    let at = "2026-07-14T01:01:00Z";
    let intent = |event_type: &str, reason: Value, metadata: Value| {
        json!({"event_type": event_type, "timestamp": at, "owner_epoch": 1,
               "from_state": "running", "to_state": "running", "lane_id": "l1",
               "agent_id": "agent-1", "reason": reason, "evidence_refs": beat,
               "metadata": metadata})
    };
    run.append_sealed(&[(
        "transaction_committed",
        json!({"timestamp": at, "evidence_refs": [], "metadata": {"owner_epoch": 1, "intents": [
            intent("heartbeat_observed", Value::Null,
                   json!({"owner_epoch": 1, "evidence_digest": digest})),
            intent("lease_renewed", json!("working"),
                   json!({"owner_epoch": 1, "evidence_digest": digest,
                          "silence_lease_deadline": "2026-07-14T01:05:00Z"})),
        ]}}),
    )]);
    run.verify();
    std::fs::write(&run.evidence, beat.to_string()).unwrap();
    run.refused(
        || run.complete("l1", "agent-1", &json!(["src/a"])),
        2,
        "liveness evidence cannot complete a lane",
    );
    // Even with out-of-scope paths the liveness rule answers first.
    run.refused(
        || run.complete("l1", "agent-1", &json!(["lib"])),
        2,
        "liveness evidence cannot complete a lane",
    );
    // Real completion evidence works.
    std::fs::write(&run.evidence, r#"[{"kind":"test","summary":"done"}]"#).unwrap();
    run.complete("l1", "agent-1", &json!(["src/a"])).assert_ok();
}

/// A started run whose running lane `l1` (agent-1) went through
/// [`to_recovering`]; the receipt verifies.
fn recovering_l1(interrupt: bool) -> Run {
    let run = setup();
    run.running_lane("l1", "agent-1", json!(["src"]));
    to_recovering(&run, "l1", "agent-1", interrupt);
    run.verify();
    run
}

/// Seal stall -> probe -> (optionally) interrupt on a running lane, as the
/// liveness commands write them.
fn to_recovering(run: &Run, lane: &str, agent: &str, interrupt: bool) {
    let ev = |s: &str| json!([{"kind": "liveness", "summary": s}]);
    let step = |at: &str, from: &str, to: &str, reason: Value, summary: &str, meta: Value| {
        json!({"lane_id": lane, "agent_id": agent, "from_state": from, "to_state": to,
               "timestamp": at, "reason": reason, "evidence_refs": ev(summary),
               "metadata": meta})
    };
    let mut events = vec![
        (
            "stall_suspected",
            step(
                "2026-07-14T01:03:00Z",
                "running",
                "suspected_stall",
                json!("no fresh evidence"),
                "stall",
                json!({"owner_epoch": 1}),
            ),
        ),
        (
            "probe_sent",
            step(
                "2026-07-14T01:09:30Z",
                "suspected_stall",
                "recovering",
                Value::Null,
                "probe",
                json!({"owner_epoch": 1, "probe_deadline": "2026-07-14T01:10:00Z"}),
            ),
        ),
    ];
    if interrupt {
        events.push((
            "agent_interrupted",
            step(
                "2026-07-14T01:11:00Z",
                "recovering",
                "recovering",
                json!("native interrupt recorded"),
                "native interrupt",
                json!({"owner_epoch": 1}),
            ),
        ));
    }
    run.append_sealed(&events);
}

#[test]
fn probe_ack_revives_a_recovering_lane() {
    let run = recovering_l1(false);
    let out = run
        .lane("probe-ack", "l1", "agent-1", "2026-07-14T01:09:45Z", &[])
        .assert_ok();
    assert_eq!(out["operation"], "probe-ack");
    let last = run.events().pop().unwrap();
    assert_eq!(last["event_type"], "probe_acknowledged");
    assert_eq!(last["from_state"], "recovering");
    assert_eq!(last["to_state"], "running");
    assert_eq!(run.lane_cache("l1")["state"], "running");
}

#[test]
fn probe_ack_after_an_interrupt_is_refused() {
    // decisions.md 9 (a deviation: the reference accepts it).
    let run = recovering_l1(true);
    run.refused(
        || run.lane("probe-ack", "l1", "agent-1", "2026-07-14T01:12:00Z", &[]),
        5,
        "an interrupted agent cannot acknowledge the probe",
    );
    // The reference writes it; replay records it as a breach of our rule
    // (contracts/rules.md), recorded, not refused: the lane runs again.
    run.append_sealed(&[(
        "probe_acknowledged",
        json!({"lane_id": "l1", "agent_id": "agent-1", "from_state": "recovering",
               "to_state": "running", "timestamp": "2026-07-14T01:12:00Z",
               "reason": null, "evidence_refs": [{"kind": "test", "summary": "ack"}],
               "metadata": {"owner_epoch": 1}}),
    )]);
    let verify = run.verify();
    assert_eq!(
        verify["breaches"][0]["rule"], "interrupted_probe_ack",
        "{verify}"
    );
    assert_eq!(verify["breaches"][0]["sequence"], run.events().len());
    // The lane can still be ended explicitly.
    run.lane(
        "lane-fail",
        "l1",
        "agent-1",
        "2026-07-14T01:12:00Z",
        &["--reason", "interrupted"],
    )
    .assert_ok();
    assert_eq!(run.lane_cache("l1")["state"], "failed");
}

#[test]
fn the_run_manifest_caps_the_lane_count() {
    let run = setup();
    for i in 0..64 {
        run.pending_lane(&format!("lane-{i}"), "agent", json!([]));
    }
    let e = run.refused(
        || run.create(&lane_input("lane-64", "agent", json!([]))),
        5,
        "lane limit reached",
    );
    // The manifest's limit is a field; the hint says finished lanes count.
    common::assert_taught(&e, json!({"max_lanes": 64}), |hint| {
        hint.contains("finished ones too")
    });
    // Terminal lanes still count.
    run.lane("lane-cancel", "lane-0", "agent", T0, &["--reason", "x"])
        .assert_ok();
    run.refused(
        || run.create(&lane_input("lane-64", "agent", json!([]))),
        5,
        "lane limit reached",
    );
    assert_eq!(run.verify()["sequence"], 3 + 64 + 1);
}

#[test]
fn lane_commands_are_phase2_only_and_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let flow = Flow::new(tmp.path());
    for (command, next) in [
        ("lane-create", "lane-start"),
        ("lane-start", "perform native spawn, then startup-ack"),
        ("startup-ack", "heartbeat or liveness-check"),
        ("probe-ack", "heartbeat or liveness-check"),
        ("lane-complete", "check-result"),
        ("lane-fail", "lane-resolve or completion-check"),
        ("lane-block", "replacement-close or completion-check"),
        ("lane-cancel", "replacement-close or completion-check"),
    ] {
        let text = format!(
            "Mutation. Capability: Phase 2 only. Safe next: {next}. In-place migration is unavailable."
        );
        crate::bed::assert_help_says(&flow, command, &text);
    }
    // An unknown run id is exit 3, before any input is read.
    let run = setup();
    let out = run.raw(&[
        "lane-start",
        "--run-id",
        "missing-run",
        "--owner-file",
        run.owner().to_str().unwrap(),
        "--evidence",
        "/nonexistent.json",
        "--lane-id",
        "l1",
        "--agent-id",
        "a",
        "--at",
        T0,
    ]);
    let e = out.assert_error(3, "receipt_corrupt");
    assert_eq!(e["next_command"], "receipt-diagnose");
}
