//! Errors and flows that teach (contracts/refusals.md, DEVIATIONS 61–66). A
//! lane's life driven from what the tool printed before (never a
//! hand-computed checksum), and every refusal those rows list, each with its
//! `hint`, its `fields` and the reference's keys unchanged.

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::bed::{Flow, Output, hold_receipt_lock, init_argv, lane_argv};

/// A temp workspace with a run made by `init` (its id as `init` printed it).
struct Life {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    flow: Flow,
    root: PathBuf,
    run: String,
    owner: PathBuf,
}

impl Life {
    fn new() -> Life {
        let made = crate::bed::init_run("api");
        Life {
            _tmp: made.tmp,
            base: made.base,
            flow: made.flow,
            root: made.root,
            run: made.run_id,
            owner: made.owner,
        }
    }

    /// A JSON file in the workspace; returns its path.
    fn put(&self, name: &str, value: &Value) -> String {
        let path = self.base.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `--state-root R <command> --run-id RUN [--owner-file O] <rest>`.
    fn argv(&self, command: &str, owner: bool, rest: &[&str]) -> Vec<String> {
        if owner {
            crate::bed::mutation_argv(&self.root, command, &self.run, &self.owner, rest)
        } else {
            crate::bed::read_argv(&self.root, command, &self.run, rest)
        }
    }

    fn mutate(&self, command: &str, rest: &[&str]) -> Output {
        self.flow.run(&self.argv(command, true, rest))
    }

    fn read(&self, command: &str, rest: &[&str]) -> Output {
        self.flow.run(&self.argv(command, false, rest))
    }

    fn ok(&self, command: &str, rest: &[&str]) -> Value {
        self.mutate(command, rest).assert_ok()
    }

    /// The mutation `command` with `--input input --evidence evidence`.
    fn given(&self, command: &str, input: &str, evidence: &str) -> Output {
        self.mutate(command, &["--input", input, "--evidence", evidence])
    }

    /// `liveness-check --explain` of lane `api` at `at`, which must answer.
    fn explain(&self, at: &str) -> Value {
        self.read(
            "liveness-check",
            &["--lane-id", "api", "--at", at, "--explain"],
        )
        .assert_ok()
    }

    /// `liveness-check` of lane `api` after five quiet minutes, writing
    /// its decision to `decision_out`.
    fn decide_quiet(&self, decision_out: &Path) -> Output {
        let at = "2026-07-14T01:06:00Z";
        let out = decision_out.to_str().unwrap();
        self.read(
            "liveness-check",
            &["--lane-id", "api", "--at", at, "--decision-out", out],
        )
    }

    fn evidence(&self, name: &str, kind: &str, summary: &str) -> String {
        self.put(name, &json!([{"kind": kind, "summary": summary}]))
    }

    /// Approved and started, with lane `api` of agent-1 created.
    fn with_lane() -> Life {
        let life = Life::new();
        let ev = life.evidence("approve.json", "user_approval", "plan approved");
        life.ok("run-approve", &["--evidence", &ev]);
        let ev = life.evidence("start.json", "plan", "run started");
        life.ok("run-start", &["--evidence", &ev]);
        let lane = life.put("lane.json", &lane_input());
        let ev = life.evidence("assign.json", "plan", "assign api");
        life.given("lane-create", &lane, &ev).assert_ok();
        life
    }

    /// [`Life::with_lane`], the lane started and acknowledged.
    fn running() -> Life {
        let life = Life::with_lane();
        let ev = life.evidence("spawn.json", "lifecycle", "spawned agent-1");
        life.ok("lane-start", &lane_args("2026-07-14T01:00:05Z", &ev));
        let ev = life.evidence("ack.json", "lifecycle", "agent-1 acknowledged");
        life.ok("startup-ack", &lane_args("2026-07-14T01:00:10Z", &ev));
        life
    }
}

fn lane_input() -> Value {
    json!({"lane_id": "api", "agent_id": "agent-1", "assignment": "Build the API",
        "write_scope": ["src/api"], "fallback": "main session",
        "observed_at": "2026-07-14T01:00:00Z",
        "startup_ack_deadline": "2026-07-14T01:00:30Z",
        "command_deadline": "2026-07-14T01:30:00Z"})
}

/// The lane arguments of lane `api` (agent `agent-1`).
fn lane_args<'a>(at: &'a str, evidence: &'a str) -> Vec<&'a str> {
    lane_argv("api", "agent-1", at, evidence)
}

/// The lane's life from `lane-create` through a stall to `complete`, each
/// step taking what an earlier output printed: the run id from `init`, the
/// decision file, its checksum and reason from `liveness-check
/// --decision-out`, the receipt head from its `checksum`, the probe
/// deadline from its `probe_deadline_max`.
#[test]
fn a_lane_life_is_driven_by_what_the_tool_printed() {
    let life = Life::running();
    // Quiet for five minutes: liveness-check says what to record, and
    // writes the decision file for stall-record.
    let decision_path = life.base.join("decision.json");
    let out = life.decide_quiet(&decision_path).assert_ok();
    assert_eq!(out["action"], "suspect_stall");
    assert_eq!(out["lane_state"], "running");
    assert_eq!(out["agent_id"], "agent-1");
    assert_eq!(out["last_evidence_at"], "2026-07-14T01:00:10Z");
    assert_eq!(out["deadlines"]["fresh_until"], "2026-07-14T01:02:10Z");
    assert_eq!(out["deadlines"]["command_deadline"], "2026-07-14T01:30:00Z");
    assert_eq!(
        out["decision"],
        json!({"action": out["action"], "reason": out["reason"]})
    );
    let written = PathBuf::from(crate::bed::str_field(&out, "decision_out"));
    assert_eq!(written, decision_path);
    let mode = std::fs::metadata(&written).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&written).unwrap()).unwrap();
    assert_eq!(on_disk, out["decision"]);
    // The evidence binds the printed checksum; --reason is the printed
    // reason; --expected-head is the printed head.
    let ev = life.put(
        "stall-ev.json",
        &json!([{"kind": "liveness", "summary": "no output for five minutes",
            "checksum": out["decision_checksum"]}]),
    );
    let mut args = lane_args("2026-07-14T01:06:00Z", &ev);
    args.extend([
        "--reason",
        crate::bed::str_field(&out, "reason"),
        "--decision",
        crate::bed::str_field(&out, "decision_out"),
        "--expected-head",
        crate::bed::str_field(&out, "checksum"),
    ]);
    let recorded = life.ok("stall-record", &args);
    assert_eq!(recorded["operation"], "stall-record", "{recorded}");
    // Now the answer is send_probe, with the latest deadline probe-sent takes.
    let out = life.explain("2026-07-14T01:06:30Z");
    assert_eq!(out["action"], "send_probe");
    assert_eq!(out["lane_state"], "suspected_stall");
    assert!(out.get("decision").is_none());
    let ev = life.evidence("probe.json", "tool", "probe sent to agent-1");
    let mut args = lane_args("2026-07-14T01:06:30Z", &ev);
    args.extend([
        "--deadline",
        crate::bed::str_field(&out, "probe_deadline_max"),
    ]);
    life.ok("probe-sent", &args);
    let out = life.explain("2026-07-14T01:06:40Z");
    assert_eq!(out["action"], "await_probe");
    assert_eq!(out["deadlines"]["probe_deadline"], "2026-07-14T01:07:30Z");
    assert_eq!(out["deadlines"]["command_deadline"], "2026-07-14T01:30:00Z");
    let ev = life.evidence("probe-ack.json", "lifecycle", "agent-1 answered the probe");
    life.ok("probe-ack", &lane_args("2026-07-14T01:06:50Z", &ev));
    // Done: complete the lane, register the topology, report its check
    // and its coverage, and complete the run.
    let ev = life.evidence("done.json", "test", "api tests passed");
    let changed = life.put("changed.json", &json!(["src/api/lib.rs"]));
    let mut args = lane_args("2026-07-14T01:10:00Z", &ev);
    args.extend(["--changed-paths", &changed]);
    life.ok("lane-complete", &args);
    let terminal = life.explain("2026-07-14T01:11:00Z");
    assert_eq!(terminal["reason"], "lane is terminal");
    assert_eq!(terminal["lane_state"], "completed");
    let topology = life.put(
        "topology.json",
        &json!([{"id": "api", "required": true, "description": "The API",
            "owner_lane": "api", "required_checks": ["unit"], "dependencies": [],
            "evidence_refs": [], "coverage_state": "missing"}]),
    );
    let ev = life.evidence("topology-ev.json", "plan", "topology approved");
    life.given("topology-register", &topology, &ev).assert_ok();
    let check = life.put(
        "check.json",
        &json!({"component_id": "api", "check_id": "unit", "passed": true}),
    );
    let ev = life.put(
        "check-ev.json",
        &json!([{"kind": "test", "summary": "unit: all passed", "exit_status": 0}]),
    );
    life.given("check-result", &check, &ev).assert_ok();
    let cover = life.put("cover.json", &json!({"component_id": "api"}));
    let ev = life.evidence("cover-ev.json", "verification", "api verified");
    life.given("component-evidence", &cover, &ev).assert_ok();
    let ev = life.evidence("verify.json", "verification", "main session verified");
    let done = life.ok("complete", &["--evidence", &ev]);
    assert_eq!(done["run_state"], "completed", "{done}");
    life.read("verify", &[]).assert_ok();
}

/// `--decision-out` writes a new 0600 file only: never over an existing
/// file, never inside the state root, never through a symlink; a refusal
/// leaves everything as it was.
#[test]
fn decision_out_never_replaces_and_stays_outside_the_state_root() {
    let life = Life::running();
    let existing = life.base.join("taken.json");
    std::fs::write(&existing, "keep").unwrap();
    let link = life.base.join("link.json");
    std::os::unix::fs::symlink(life.base.join("elsewhere.json"), &link).unwrap();
    let inside = life.root.join("decision.json");
    for target in [&existing, &link, &inside] {
        let out = life.decide_quiet(target);
        let e = out.assert_error(2, "contract_error");
        assert_eq!(e["fields"]["input"], "--decision-out", "{e}");
        assert!(
            crate::bed::str_field(&e, "hint").contains("never replaces"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
    assert!(!life.base.join("elsewhere.json").exists());
    assert!(!inside.exists());
}

/// One refusal of the table: the reference's keys it keeps, and what must be
/// in its `hint`, `message` and `fields`.
type Case = crate::bed::RefusalCase;

fn run_case(case: &Case, out: &Output, run: &str) {
    let e = out.assert_error(case.exit, case.error);
    let name = case.name;
    case.assert_retry_keys(&e);
    assert!(
        crate::bed::str_field(&e, "message").contains(case.message),
        "{name}: message {e}"
    );
    let hint = e["hint"].as_str().unwrap_or_default().replace(run, "RUN");
    assert!(
        case.hint.is_empty() || e.get("hint").is_some(),
        "{name}: no hint in {e}"
    );
    for part in case.hint {
        assert!(hint.contains(part), "{name}: hint lacks {part:?}: {hint}");
    }
    for part in case.not_in_hint {
        assert!(!hint.contains(part), "{name}: hint says {part:?}: {hint}");
    }
    case.assert_fields(&e);
}

/// Every refusal DEVIATIONS 61–65 and contracts/refusals.md list,
/// table-driven: its `hint`, its `fields`, and `ok`, `error`, `retryable`,
/// `next_command` as the reference prints them (checked against the Python
/// reference for these very calls).
#[test]
fn every_listed_refusal_names_its_fix() {
    let life = Life::with_lane();
    let run = life.run.clone();
    let lane_only = life.put("lane-only.json", &json!({"lane_id": "api"}));
    let assign = life.evidence("assign2.json", "plan", "assign again");
    let object_ev = life.put("object.json", &json!({"kind": "plan", "summary": "x"}));
    let extra_ev = life.put(
        "extra.json",
        &json!([{"kind": "plan", "summary": "x", "note": "y"}]),
    );
    let spawn = life.evidence("spawn.json", "lifecycle", "spawned");
    let check = life.put(
        "check.json",
        &json!({"component_id": "api", "check_id": "unit", "passed": true}),
    );
    let check_ev = life.evidence("check-ev.json", "test", "unit passed");
    let lane = life.put("lane.json", &lane_input());
    let mut long = lane_input();
    long["lane_id"] = json!("api-2");
    long["assignment"] = json!("x".repeat(501));
    let long = life.put("long.json", &long);
    let mut bad_id = lane_input();
    bad_id["lane_id"] = json!("api 2");
    let bad_id = life.put("bad-id.json", &bad_id);
    let missing_file = life.base.join("user approved");
    let missing_file = missing_file.to_str().unwrap();
    let cases: Vec<(Case, Output)> = vec![
        (
            Case {
                name: "lane-create with only lane_id",
                message: "JSON input fields do not match the command contract: missing: agent_id, assignment",
                hint: &[
                    "exactly the keys lane_id, agent_id",
                    "optional: parent_lane_id",
                ],
                fields: Some(json!({"input": "--input", "file": lane_only,
                    "missing": ["agent_id", "assignment", "write_scope", "fallback", "observed_at",
                        "startup_ack_deadline", "command_deadline"]})),
                ..Case::typed(2)
            },
            life.given("lane-create", &lane_only, &assign),
        ),
        (
            Case {
                name: "an assignment over the manifest's limit",
                message: "assignment must be at most 500 characters: the limit of this run's manifest is 500",
                hint: &[],
                fields: Some(json!({"input": "--input", "file": long,
                    "invalid": [{"field": "assignment", "expected": "a string of at most 500 characters", "limit": 500}]})),
                ..Case::typed(2)
            },
            life.given("lane-create", &long, &assign),
        ),
        (
            Case {
                name: "a lane id that is no identifier",
                message: "lane id must match the identifier contract: --input field lane_id must be an identifier",
                hint: &[],
                fields: Some(json!({"input": "--input", "file": bad_id,
                    "invalid": [{"field": "lane_id", "expected": "an identifier: a letter or digit, then letters, digits, '.', '_' or '-', at most 128 characters"}]})),
                ..Case::typed(2)
            },
            life.given("lane-create", &bad_id, &assign),
        ),
        (
            Case {
                name: "evidence given as text",
                message: "evidence file '",
                hint: &["takes one JSON list: inline"],
                fields: Some(json!({"input": "--evidence", "file": missing_file})),
                ..Case::typed(2)
            },
            life.mutate("run-approve", &["--evidence", missing_file]),
        ),
        (
            Case {
                name: "evidence object instead of a list",
                message: "holds a JSON object, a JSON list is expected",
                hint: &["wrap the evidence in a list"],
                fields: Some(json!({"input": "--evidence", "file": object_ev,
                    "expected_type": "list", "found_type": "object"})),
                ..Case::typed(2)
            },
            life.given("lane-create", &lane, &object_ev),
        ),
        (
            Case {
                name: "evidence with an extra key",
                message: "evidence reference contains unsupported fields: unknown: [0].note",
                hint: &["\"kind\"", "\"summary\"", "\"checksum\""],
                fields: Some(json!({"input": "--evidence", "file": extra_ev,
                    "unknown": ["[0].note"],
                    "allowed": ["kind", "summary", "path", "checksum", "exit_status"]})),
                ..Case::typed(2)
            },
            life.mutate("lane-start", &lane_args("2026-07-14T01:00:05Z", &extra_ev)),
        ),
        (
            Case {
                name: "check-result before topology-register",
                message: "component check is not registered",
                hint: &[
                    "retrying cannot help",
                    "bluetape-flow topology-register --run-id RUN --owner-file",
                ],
                fields: Some(json!({"component_id": "api", "check_id": "unit",
                                    "components": [], "required_checks": null})),
                ..Case::typed(5)
            },
            life.given("check-result", &check, &check_ev),
        ),
        (
            Case {
                name: "lane id in use",
                message: "identifier already exists",
                hint: &["retrying cannot help", "lane api exists already (pending)"],
                fields: Some(json!({"lane_id": "api", "lane_state": "pending"})),
                ..Case::typed(5)
            },
            life.given("lane-create", &lane, &assign),
        ),
        (
            Case {
                name: "another agent",
                message: "agent does not own the lane",
                hint: &["owned by agent-1, not agent-9", "--agent-id agent-1"],
                fields: Some(
                    json!({"lane_id": "api", "agent_id": "agent-9", "lane_agent_id": "agent-1"}),
                ),
                ..Case::typed(5)
            },
            life.mutate(
                "lane-start",
                &crate::bed::lane_argv("api", "agent-9", "2026-07-14T01:00:05Z", &spawn),
            ),
        ),
        (
            Case {
                name: "unknown lane",
                message: "lane does not exist",
                hint: &["no lane ghost", "the run's lanes are api"],
                fields: Some(json!({"lane_id": "ghost", "lanes": ["api"]})),
                ..Case::typed(5)
            },
            life.mutate(
                "lane-start",
                &crate::bed::lane_argv("ghost", "agent-1", "2026-07-14T01:00:05Z", &spawn),
            ),
        ),
        (
            Case {
                name: "a lane step its state does not allow",
                message: "current state does not allow lifecycle intent",
                hint: &[
                    "lane api is pending, this command needs starting",
                    "bluetape-flow lane-start --run-id RUN",
                ],
                fields: Some(
                    json!({"lane_id": "api", "lane_state": "pending", "allowed_lane_states": ["starting"]}),
                ),
                ..Case::typed(5)
            },
            life.mutate("startup-ack", &lane_args("2026-07-14T01:00:10Z", &spawn)),
        ),
        (
            Case {
                name: "a run step its state does not allow",
                message: "current state does not allow lifecycle intent",
                hint: &[
                    "the run is running, this command needs planned",
                    "running already",
                ],
                fields: Some(json!({"run_state": "running", "allowed_run_states": ["planned"]})),
                ..Case::typed(5)
            },
            life.mutate("run-approve", &["--evidence", &assign]),
        ),
        (
            Case {
                name: "a bad --at",
                message: "decided_at must be a UTC timestamp: --at 'yesterday' is not one",
                hint: &["--at 2026-07-14T01:00:00Z"],
                fields: Some(json!({"input": "--at"})),
                ..Case::typed(2)
            },
            life.mutate(
                "run-block",
                &["--evidence", &assign, "--reason", "r", "--at", "yesterday"],
            ),
        ),
        (
            Case {
                name: "an unknown workflow type",
                message: "unknown workflow type: 'Z' (known: A, B, C, D, E, P, F)",
                hint: &["--workflow-type A | B"],
                fields: Some(json!({"input": "--workflow-type",
                    "allowed": ["A", "B", "C", "D", "E", "P", "F"]})),
                ..Case::typed(2)
            },
            life.flow.run(&init_argv(
                &life.root,
                "Z",
                &life.base.join("repo"),
                &life.root.join("handles/other.owner"),
                &["api"],
            )),
        ),
    ];
    for (case, out) in &cases {
        run_case(case, out, &run);
    }
    stall_record_refusals(&run);
    // A busy lock names its holder.
    let life = Life::with_lane();
    hold_receipt_lock(&life.root, &life.root.join("runs").join(&life.run));
    let out = life.mutate("lane-start", &lane_args("2026-07-14T01:00:05Z", &spawn));
    let pid = std::process::id().to_string();
    let busy = Case {
        name: "a busy lock",
        exit: 5,
        error: "coordinator_conflict",
        retryable: true,
        next_command: Some("resume-check"),
        message: "state lock owner is live or unknown: held by pid ",
        hint: &["another writer holds the lock", "bluetape-flow doctor"],
        fields: None,
        not_in_hint: &[],
    };
    run_case(&busy, &out, &life.run);
    assert!(
        crate::bed::str_field(&out.error(), "message").contains(&pid),
        "{}",
        out.error()
    );
}

/// The stall-record refusals (DEVIATIONS 62): the liveness-check envelope as
/// the decision file, and a free-text reason.
fn stall_record_refusals(_run: &str) {
    let life = Life::running();
    let check = life
        .read(
            "liveness-check",
            &["--lane-id", "api", "--at", "2026-07-14T01:06:00Z"],
        )
        .assert_ok();
    let envelope = life.put("envelope.json", &check);
    let ev = life.evidence("stall-ev.json", "liveness", "quiet");
    let mut args = lane_args("2026-07-14T01:06:00Z", &ev);
    args.extend(["--reason", "no fresh evidence", "--decision", &envelope]);
    let out = life.mutate("stall-record", &args);
    let unknown = json!([
        "checksum",
        "ok",
        "operation",
        "run_id",
        "run_state",
        "sequence",
        "state_root"
    ]);
    run_case(
        &Case {
            name: "the liveness-check envelope as the decision",
            message: "stall evidence must bind the liveness decision checksum: the decision file must hold only action and reason",
            hint: &[
                "--decision-out decision.json",
                "decision_checksum",
                "--lane-id api",
            ],
            fields: Some(
                json!({"input": "--decision", "file": envelope, "unknown": unknown,
                "allowed": ["action", "reason"]}),
            ),
            ..Case::typed(2)
        },
        &out,
        &life.run,
    );
    let decision = life.put(
        "decision.json",
        &json!({"action": check["action"], "reason": check["reason"]}),
    );
    // The hint of an unbound decision gives the checksum to bind.
    let mut args = lane_args("2026-07-14T01:06:00Z", &ev);
    args.extend(["--reason", "agent is quiet", "--decision", &decision]);
    let out = life.mutate("stall-record", &args);
    let e = out.assert_error(2, "contract_error");
    let checksum = e["fields"]["decision_checksum"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        crate::bed::str_field(&e, "hint").contains(&format!("\"checksum\": \"{checksum}\"")),
        "{e}"
    );
    let bound = life.put(
        "bound-ev.json",
        &json!([{"kind": "liveness", "summary": "quiet", "checksum": checksum}]),
    );
    let mut args = lane_args("2026-07-14T01:06:00Z", &bound);
    args.extend(["--reason", "agent is quiet", "--decision", &decision]);
    let out = life.mutate("stall-record", &args);
    run_case(
        &Case {
            name: "a free-text --reason",
            message: "liveness decision is stale or mismatched",
            hint: &["--reason must be the decision's reason: --reason 'no fresh evidence'"],
            fields: Some(json!({"input": "--decision",
                "current_decision": {"action": "suspect_stall", "reason": "no fresh evidence"}})),
            ..Case::typed(5)
        },
        &out,
        &life.run,
    );
    // A heartbeat whose lease is longer than the manifest allows.
    let beat = life.put(
        "beat.json",
        &json!({"lane_id": "api", "agent_id": "agent-1", "observed_at": "2026-07-14T01:01:00Z",
            "silence_lease_deadline": "2026-07-14T01:11:01Z", "reason": "compiling"}),
    );
    let beat_ev = life.evidence("beat-ev.json", "log", "cargo build running");
    let out = life.given("heartbeat", &beat, &beat_ev);
    run_case(
        &Case {
            name: "a silence lease over the manifest's maximum",
            message: "silence lease exceeds manifest maximum: at most 600 s after observed_at",
            hint: &["silence_lease_deadline at most 2026-07-14T01:11:00Z"],
            fields: Some(json!({"input": "--input", "file": beat, "invalid": [{
                "field": "silence_lease_deadline", "expected": "at most 600 seconds after observed_at",
                "limit": 600}]})),
            ..Case::typed(2)
        },
        &out,
        &life.run,
    );
    // The same call with the printed reason records the stall.
    let mut args = lane_args("2026-07-14T01:06:00Z", &bound);
    args.extend(["--reason", "no fresh evidence", "--decision", &decision]);
    life.ok("stall-record", &args);
}

/// One row of the README's exit-code table.
#[derive(Debug)]
struct ExitRow {
    exit: i32,
    error: Option<String>,
    meaning: String,
    retryable: Option<bool>,
    next_command: Option<String>,
}

/// The rows of the table under `## Exit codes` in the README.
fn readme_exit_rows() -> Vec<ExitRow> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = readme
        .split("## Exit codes\n")
        .nth(1)
        .expect("README has an exit-code section");
    let cell = |text: &str| -> Option<String> {
        let text = text.trim().trim_matches('`');
        (text != "–" && text != "-").then(|| text.to_string())
    };
    let rows: Vec<ExitRow> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 5, "{line}");
            ExitRow {
                exit: cells[0].trim().parse().unwrap(),
                error: cell(cells[1]),
                meaning: cells[2].trim().to_string(),
                retryable: cell(cells[3]).map(|r| r.parse().unwrap()),
                next_command: cell(cells[4]),
            }
        })
        .collect();
    assert!(rows.len() >= 10, "{rows:?}");
    rows
}

/// A run with an approval policy (alice approves, the initiator may not),
/// created through the library at `created` so an expiry can be in the past.
fn gated_run(policy: &str, created: &str) -> (Life, Vec<(&'static str, &'static str)>) {
    let made = crate::bed::init_gated(policy, created, &["api"], Some("agent-1"));
    let life = Life {
        _tmp: made.tmp,
        base: made.base,
        flow: made.flow,
        owner: made.root.join("handles/main.owner"),
        root: made.root,
        run: made.run_id,
    };
    (life, vec![("BLUETAPE_APPROVED_BY", "alice")])
}

/// Drive the binary into the case of one README row; returns what it printed.
fn reach(row: &ExitRow) -> Output {
    let now_ish = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    match (row.exit, row.error.as_deref(), row.retryable) {
        (0, None, _) => Life::new().read("verify", &[]),
        (2, Some("contract_error"), _) => Life::new().read("verify", &["--no-such-flag"]),
        (2, Some("approval_refused"), _) => {
            let (life, _) = gated_run(r#"{"required_approver": "alice"}"#, &now_ish);
            let ev = life.evidence("ap.json", "user_approval", "approved");
            life.flow.run_env(
                &life.argv("run-approve", true, &["--evidence", &ev]),
                &[("BLUETAPE_APPROVED_BY", "agent-1")],
            )
        }
        (3, Some("receipt_corrupt"), _) => {
            let life = Life::new();
            life.flow.run(&crate::bed::read_argv(
                &life.root,
                "verify",
                "20990101T000000Z-00000000",
                &[],
            ))
        }
        (3, Some("proof_invalid"), _) => {
            let life = Life::new();
            let key = life.base.join("k.key");
            let made = life
                .flow
                .run(&[
                    "key-generate",
                    "--name",
                    "k",
                    "--out",
                    key.to_str().unwrap(),
                ])
                .assert_ok();
            let vkey = life.put("k.pub", &made["verifier_key"]);
            std::fs::write(&vkey, made["verifier_key"].as_str().unwrap()).unwrap();
            let proof = life.base.join("p.txt");
            std::fs::write(&proof, "not a proof\n").unwrap();
            let event = life.put("e.json", &json!({}));
            life.flow.run(&[
                "check-proof",
                "--proof",
                proof.to_str().unwrap(),
                "--event",
                &event,
                "--key",
                &vkey,
            ])
        }
        (4, Some("incompatible_manifest"), _) => {
            let life = Life::new();
            let manifest = life.root.join("runs").join(&life.run).join("manifest.json");
            let text = std::fs::read_to_string(&manifest).unwrap();
            let edited = text.replace(
                "\"manifest_version\":\"1.1.0\"",
                "\"manifest_version\":\"2.0.0\"",
            );
            assert_ne!(text, edited);
            std::fs::write(&manifest, edited).unwrap();
            life.read("verify", &[])
        }
        (5, Some("coordinator_conflict"), Some(true)) => {
            let life = Life::new();
            let ev = life.evidence("s.json", "plan", "start");
            life.mutate("run-start", &["--evidence", &ev])
        }
        (5, Some("coordinator_conflict"), Some(false)) => {
            let (life, alice) = gated_run(r#"{"required_approver": "alice"}"#, &now_ish);
            let ev = life.evidence("ap.json", "user_approval", "approved");
            let argv = life.argv("run-approve", true, &["--evidence", &ev]);
            life.flow.run_env(&argv, &alice).assert_ok();
            life.flow.run_env(&argv, &alice)
        }
        (5, Some("approval_expired"), _) => {
            let (life, alice) = gated_run(
                r#"{"required_approver": "alice", "expires_after_s": 1}"#,
                "2020-01-01T00:00:00Z",
            );
            let ev = life.evidence("ap.json", "user_approval", "approved");
            life.flow.run_env(
                &life.argv("run-approve", true, &["--evidence", &ev]),
                &alice,
            )
        }
        (5, Some("rule_breach"), _) => {
            // A required component removed by another writer is a breach
            // of our rules; the `complete` gate names it.
            let run = crate::bed::TestBed::running(&["runtime"]);
            run.built_runtime();
            run.append_sealed(&[(
                "topology_component_removed",
                json!({"reason": "scope cut", "metadata": {"owner_epoch": 1, "component_id": "runtime"}}),
            )]);
            run.complete(&crate::bed::ev("main verification"))
        }
        (6, Some("completion_blocked"), Some(false)) => {
            crate::guards::Run::completed_past_a_bypassed_gate().attest("run.intoto.json", &[])
        }
        (5, Some("export_failed"), Some(retryable)) => {
            // A receiver that is not there, or one that answers 401.
            let run = crate::bed::TestBed::running(&["runtime"]);
            let url = if retryable {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port();
                format!("http://127.0.0.1:{port}/v1/traces")
            } else {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
                std::thread::spawn(move || {
                    use std::io::{BufRead, Read, Write};
                    let (stream, _) = listener.accept().unwrap();
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let mut stream = stream;
                    let _ =
                        stream.write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
                });
                url
            };
            run.read("otel-export", &["--endpoint", &url])
        }
        (6, Some("completion_blocked"), _) => {
            let life = Life::running();
            let ev = life.evidence("v.json", "verification", "verified");
            life.mutate("complete", &["--evidence", &ev])
        }
        (7, Some("unsupported_by_run_manifest"), _) => {
            let bed = crate::bed::Phase1Bed::new();
            bed.read(
                "liveness-check",
                &["--lane-id", "api", "--at", "2026-07-14T01:00:00Z"],
            )
        }
        _ => panic!("README row with no known way to reach it: {row:?}"),
    }
}

/// Each row of the README's exit-code table is what the binary does: its
/// exit status, `error`, `retryable` and `next_command` (DEVIATIONS 66).
#[test]
fn the_readme_exit_table_is_what_the_binary_does() {
    for row in readme_exit_rows() {
        let out = reach(&row);
        assert_eq!(out.code, row.exit, "{row:?}: {out:?}");
        if row.exit == 0 {
            assert_eq!(out.assert_ok()["ok"], true);
            continue;
        }
        let e = out.error();
        assert_eq!(e["ok"], false, "{row:?}: {e}");
        assert_eq!(e["error"].as_str(), row.error.as_deref(), "{row:?}: {e}");
        assert_eq!(e["retryable"].as_bool(), row.retryable, "{row:?}: {e}");
        assert_eq!(
            e.get("next_command").and_then(Value::as_str),
            row.next_command.as_deref(),
            "{}: {e}",
            row.meaning
        );
    }
}

/// The README's claim about `--expected-head`: every command of the
/// mutation families of its commands table takes it; `init` and the
/// read-only commands do not.
#[test]
fn the_readme_names_the_commands_that_take_expected_head() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let families = [
        "run lifecycle",
        "lanes",
        "liveness",
        "replacement",
        "topology and completion",
        "owner transfer and recovery",
    ];
    let cli = bluetape_flow::surface::command();
    let takes = |name: &str| {
        let command = cli
            .get_subcommands()
            .find(|c| c.get_name() == name)
            .unwrap_or_else(|| panic!("README names {name}, the binary has no such command"));
        command
            .get_arguments()
            .any(|a| a.get_long() == Some("expected-head"))
    };
    let mut checked = 0;
    for line in readme.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let family = cells[1];
        let commands: Vec<&str> = cells[2]
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, c)| c)
            .filter(|c| !c.starts_with('-'))
            .collect();
        if families.contains(&family) {
            for command in commands {
                if command == "recovery-run-create" {
                    assert!(!takes(command), "{command} takes --expected-head");
                    checked += 1;
                    continue;
                }
                assert!(takes(command), "{command} ({family}) lacks --expected-head");
                checked += 1;
            }
        } else if family == "workspace" || family == "audit" || family == "views" {
            for command in commands {
                assert!(
                    !takes(command),
                    "{command} ({family}) takes --expected-head"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "only {checked} commands checked");
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("Every mutation but `init` takes `--run-id`"));
    assert!(flat.contains("except `recovery-run-create` (it never appends to the damaged run)"));
}
