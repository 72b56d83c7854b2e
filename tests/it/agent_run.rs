//! An agent's run in one try (contracts/commands.md "JSON inputs", "One
//! clock", "Digests"; cli-conventions §5): a two-lane run with a stall, a
//! probe, an interrupt, a replacement, topology, checks, evidence and
//! `complete`, driven through the CLI with every JSON value inline and
//! `--at` on every step. It writes no file besides the state root, every
//! step succeeds at the first try, and `log` and `report` run forward.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bed::{Flow, Output};

/// A work directory with `src/api` and `src/web` (the lanes' scopes) and
/// the state root `.bluetape` inside it, the binary run from there.
struct Agent {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    work: PathBuf,
    flow: Flow,
    run: String,
}

const OWNER: &str = ".bluetape/handles/main.owner";

/// Every file and directory under `dir` but the state root `.bluetape`:
/// the bed's snapshot of it (kind, mode, content digest).
fn tree(dir: &Path) -> BTreeMap<PathBuf, (char, u32, String)> {
    let state = dir.join(".bluetape");
    crate::bed::snapshot(dir)
        .into_iter()
        .filter(|(path, _)| path != dir && !path.starts_with(&state))
        .map(|(path, e)| (path, (e.kind, e.mode, e.content)))
        .collect()
}

impl Agent {
    fn new() -> Agent {
        let (tmp, base) = crate::bed::canonical_tempdir();
        let work = base.join("work");
        let outside = base.join("outside");
        for dir in [work.join("src/api"), work.join("src/web"), outside.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let flow = Flow::new(&work);
        Agent {
            _tmp: tmp,
            outside,
            work,
            flow,
            run: String::new(),
        }
    }

    /// One step: it must succeed at the first try.
    fn step(&self, args: &[&str]) -> Value {
        let out = self.flow.run(args);
        assert_eq!(out.code, 0, "`{}` failed: {}", args.join(" "), out.stderr);
        serde_json::from_str(&out.stdout).unwrap_or(Value::Null)
    }

    /// `<command> --run-id R --owner-file O <rest>`: an owner step's argv.
    fn owner_argv<'a>(&'a self, command: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
        let mut argv = vec![command, "--run-id", &self.run, "--owner-file", OWNER];
        argv.extend_from_slice(rest);
        argv
    }

    /// An owner step of the run: `<command> --run-id R --owner-file O <rest>`.
    fn owner(&self, command: &str, rest: &[&str]) -> Value {
        self.step(&self.owner_argv(command, rest))
    }

    /// `init` over `components` at 00:59:00 in the state root `.bluetape`
    /// (the work directory its repo); the run is this agent's from then on.
    fn init(&mut self, components: &[&str]) {
        let mut argv = vec![
            "--state-root",
            ".bluetape",
            "init",
            "--workflow-type",
            "A",
            "--repo-root",
            ".",
            "--owner-file",
            OWNER,
        ];
        for component in components {
            argv.extend(["--component", component]);
        }
        argv.extend(["--at", "2026-07-14T00:59:00Z"]);
        let init = self.step(&argv);
        self.run = init["run_id"].as_str().unwrap().to_string();
    }

    /// `run-approve` at 00:59:30 with the user approval `approval`, then
    /// `run-start` at 00:59:40.
    fn approve_and_start(&self, approval: &str) {
        let approved = ev("user_approval", approval);
        self.owner(
            "run-approve",
            &["--at", "2026-07-14T00:59:30Z", "--evidence", &approved],
        );
        let started = ev("plan", "go");
        self.owner(
            "run-start",
            &["--at", "2026-07-14T00:59:40Z", "--evidence", &started],
        );
    }

    fn raw(&self, args: &[&str]) -> Output {
        self.flow.run(args)
    }

    /// The page `report` (plus `extra`) writes outside the work directory;
    /// it must succeed.
    fn report_page(&self, extra: &[&str]) -> String {
        let page = self.outside.join("report.html");
        let mut argv = vec![
            "report",
            "--run-id",
            &self.run,
            "--out",
            page.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        let out = self.raw(&argv);
        assert_eq!(out.code, 0, "{out:?}");
        std::fs::read_to_string(&page).unwrap()
    }

    /// The event rows `log` prints for the run (it must succeed).
    fn log_events(&self) -> Vec<Value> {
        let log = self.raw(&["log", "--run-id", &self.run]);
        assert_eq!(log.code, 0, "{log:?}");
        log.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|row: &Value| row.get("event_type").is_some())
            .collect()
    }
}

/// Each row's `created_at`.
fn created_at(rows: &[Value]) -> Vec<&str> {
    rows.iter()
        .map(|row| row["created_at"].as_str().unwrap())
        .collect()
}

fn ev(kind: &str, summary: &str) -> String {
    json!([{"kind": kind, "summary": summary}]).to_string()
}

#[test]
fn a_two_lane_run_with_a_replacement_in_one_try_inline_and_on_one_clock() {
    let mut agent = Agent::new();
    let before = tree(&agent.work);
    agent.init(&["api", "web"]);
    // The run id says when it was made: the --at it was given.
    assert!(agent.run.starts_with("20260714T005900Z-"), "{}", agent.run);
    let a = &agent;
    a.approve_and_start("plan approved");
    // Two lanes; --at gives their observed_at.
    for (lane, agent_id, at, deadline) in [
        (
            "api",
            "agent-1",
            "2026-07-14T01:00:00Z",
            "2026-07-14T01:30:00Z",
        ),
        (
            "web",
            "agent-2",
            "2026-07-14T01:00:01Z",
            "2026-07-14T01:10:00Z",
        ),
    ] {
        let input = json!({"lane_id": lane, "agent_id": agent_id,
            "assignment": format!("Build the {lane}"), "write_scope": [format!("src/{lane}")],
            "fallback": "main session", "startup_ack_deadline": "2026-07-14T01:00:30Z",
            "command_deadline": deadline});
        a.owner(
            "lane-create",
            &[
                "--at",
                at,
                "--input",
                &input.to_string(),
                "--evidence",
                &ev("plan", &format!("assign {lane}")),
            ],
        );
    }
    let lane_step = |command: &str, lane: &str, agent_id: &str, at: &str, evidence: &str| {
        a.owner(
            command,
            &crate::bed::lane_argv(lane, agent_id, at, evidence),
        )
    };
    lane_step(
        "lane-start",
        "api",
        "agent-1",
        "2026-07-14T01:00:05Z",
        &ev("lifecycle", "spawned agent-1"),
    );
    lane_step(
        "lane-start",
        "web",
        "agent-2",
        "2026-07-14T01:00:06Z",
        &ev("lifecycle", "spawned agent-2"),
    );
    lane_step(
        "startup-ack",
        "api",
        "agent-1",
        "2026-07-14T01:00:10Z",
        &ev("lifecycle", "agent-1 acknowledged"),
    );
    lane_step(
        "startup-ack",
        "web",
        "agent-2",
        "2026-07-14T01:00:11Z",
        &ev("lifecycle", "agent-2 acknowledged"),
    );
    // api keeps beating (its observed_at from --at); web goes silent.
    a.owner(
        "heartbeat",
        &[
            "--at",
            "2026-07-14T01:04:00Z",
            "--input",
            r#"{"lane_id": "api", "agent_id": "agent-1",
                "silence_lease_deadline": "2026-07-14T01:09:00Z", "reason": "compiling"}"#,
            "--evidence",
            &ev("log", "cargo build running"),
        ],
    );
    // The stall: what liveness-check --explain printed is all stall-record
    // needs (the decision and its checksum), passed on inline.
    let check = a.step(&[
        "liveness-check",
        "--run-id",
        &a.run,
        "--lane-id",
        "web",
        "--at",
        "2026-07-14T01:06:00Z",
        "--explain",
    ]);
    assert_eq!(check["action"], "suspect_stall", "{check}");
    let evidence = json!([{"kind": "liveness", "summary": "liveness decision for web",
        "checksum": check["decision_checksum"]}])
    .to_string();
    a.owner(
        "stall-record",
        &[
            "--lane-id",
            "web",
            "--agent-id",
            "agent-2",
            "--at",
            "2026-07-14T01:06:00Z",
            "--reason",
            check["reason"].as_str().unwrap(),
            "--decision",
            &check["decision"].to_string(),
            "--evidence",
            &evidence,
        ],
    );
    a.owner(
        "probe-sent",
        &[
            "--lane-id",
            "web",
            "--agent-id",
            "agent-2",
            "--at",
            "2026-07-14T01:06:10Z",
            "--deadline",
            "2026-07-14T01:07:00Z",
            "--evidence",
            &ev("tool", "send_message status probe to agent-2"),
        ],
    );
    lane_step(
        "interrupt-result",
        "web",
        "agent-2",
        "2026-07-14T01:10:30Z",
        &ev("tool", "interrupt_agent returned interrupted"),
    );
    // The replacement: decided_at from --at.
    let reassign = json!({"lane_id": "web", "replacement_lane_id": "web-2",
        "replacement_agent_id": "agent-3",
        "replacement_assignment": "Resume the web pages from checkpoint 2",
        "replacement_write_scope": ["src/web"],
        "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
        "replacement_command_deadline": "2026-07-14T01:30:00Z"});
    a.owner(
        "lane-reassign",
        &[
            "--at",
            "2026-07-14T01:11:00Z",
            "--input",
            &reassign.to_string(),
            "--evidence",
            &ev("recovery", "checkpoint 2 recovered from agent-2 notes"),
        ],
    );
    lane_step(
        "lane-start",
        "web-2",
        "agent-3",
        "2026-07-14T01:11:05Z",
        &ev("lifecycle", "spawned agent-3"),
    );
    lane_step(
        "startup-ack",
        "web-2",
        "agent-3",
        "2026-07-14T01:11:10Z",
        &ev("lifecycle", "agent-3 acknowledged"),
    );
    // The topology, stamped by --at (the reference stamps the wall clock).
    let topology = json!([
        {"id": "api", "required": true, "description": "HTTP api", "owner_lane": "api",
         "required_checks": ["unit"], "dependencies": [], "evidence_refs": [],
         "coverage_state": "missing"},
        {"id": "web", "required": true, "description": "Web pages", "owner_lane": "web-2",
         "required_checks": ["unit"], "dependencies": ["api"], "evidence_refs": [],
         "coverage_state": "missing"}]);
    a.owner(
        "topology-register",
        &[
            "--at",
            "2026-07-14T01:12:00Z",
            "--input",
            &topology.to_string(),
            "--evidence",
            &ev("plan", "topology approved"),
        ],
    );
    for (lane, agent_id, path, at) in [
        (
            "api",
            "agent-1",
            "src/api/routes.rs",
            "2026-07-14T01:15:00Z",
        ),
        (
            "web-2",
            "agent-3",
            "src/web/index.html",
            "2026-07-14T01:15:05Z",
        ),
    ] {
        a.owner(
            "lane-complete",
            &[
                "--lane-id",
                lane,
                "--agent-id",
                agent_id,
                "--at",
                at,
                "--evidence",
                &ev("test", &format!("{lane}: tests passed")),
                "--changed-paths",
                &json!([path]).to_string(),
            ],
        );
    }
    a.owner(
        "replacement-close",
        &[
            "--lane-id",
            "web",
            "--replacement-lane-id",
            "web-2",
            "--at",
            "2026-07-14T01:16:00Z",
            "--evidence",
            &ev("lineage", "replacement web-2 completed"),
        ],
    );
    for (component, at_check) in [
        ("api", "2026-07-14T01:17:00Z"),
        ("web", "2026-07-14T01:17:05Z"),
    ] {
        a.owner(
            "check-result",
            &[
                "--at",
                at_check,
                "--input",
                &json!({"component_id": component, "check_id": "unit", "passed": true}).to_string(),
                "--evidence",
                &ev("test", &format!("{component} unit: all passed")),
            ],
        );
    }
    for (component, at) in [
        ("api", "2026-07-14T01:17:10Z"),
        ("web", "2026-07-14T01:17:15Z"),
    ] {
        a.owner(
            "component-evidence",
            &[
                "--at",
                at,
                "--input",
                &json!({"component_id": component}).to_string(),
                "--evidence",
                &ev("verification", &format!("{component} verified at the head")),
            ],
        );
    }
    let gaps = a.step(&["completion-check", "--run-id", &a.run]);
    // Only the main session's verification is missing: complete adds it.
    assert_eq!(gaps["missing_main_verification"], true, "{gaps}");
    assert_eq!(gaps["missing_components"], json!([]), "{gaps}");
    assert_eq!(gaps["missing_lanes"], json!([]), "{gaps}");
    let done = a.owner(
        "complete",
        &[
            "--at",
            "2026-07-14T01:20:00Z",
            "--evidence",
            &ev("verification", "main session verified the result"),
        ],
    );
    assert_eq!(done["run_state"], "completed", "{done}");

    // Nothing but the state root was written in the work directory.
    assert_eq!(
        tree(&a.work),
        before,
        "the run wrote a file outside .bluetape"
    );

    // log runs forward, every event at the --at it was given.
    let rows = a.log_events();
    let times = created_at(&rows);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(times.first(), Some(&"2026-07-14T00:59:00Z"));
    assert_eq!(times.last(), Some(&"2026-07-14T01:20:00Z"));
    for (event, at) in [
        ("lane_created", "2026-07-14T01:00:00Z"),
        ("topology_registered", "2026-07-14T01:12:00Z"),
        ("check_passed", "2026-07-14T01:17:00Z"),
        ("evidence_attached", "2026-07-14T01:17:10Z"),
    ] {
        let row = rows.iter().find(|r| r["event_type"] == event).unwrap();
        assert_eq!(row["created_at"], at, "{event}");
    }
    // ... and so does the report (written outside the work directory).
    let html = a.report_page(&["--at", "2026-07-14T01:20:00Z"]);
    assert!(!html.contains("Time runs backwards in"), "{html}");
    assert!(!html.contains("runs backwards (an earlier"), "{html}");
    let verify = a.step(&["verify", "--run-id", &a.run]);
    assert_eq!(verify["event_count"], rows.len() as u64);
}

impl Agent {
    /// A fresh run made at `2026-07-14T00:59:00Z`, approved and started;
    /// lane `api` (agent-1) created at 01:00:00.
    fn running() -> Agent {
        let mut agent = Agent::new();
        agent.init(&["api"]);
        agent.approve_and_start("ok");
        agent.owner(
            "lane-create",
            &[
                "--at",
                "2026-07-14T01:00:00Z",
                "--input",
                &json!({"lane_id": "api", "agent_id": "agent-1", "assignment": "Build the api",
                    "write_scope": ["src/api"], "fallback": "main session",
                    "startup_ack_deadline": "2026-07-14T01:00:30Z",
                    "command_deadline": "2026-07-14T01:30:00Z"})
                .to_string(),
                "--evidence",
                &ev("plan", "assign api"),
            ],
        );
        agent
    }

    fn receipt(&self) -> Vec<u8> {
        std::fs::read(
            self.work
                .join(".bluetape/runs")
                .join(&self.run)
                .join("receipt.jsonl"),
        )
        .unwrap()
    }

    /// An owner step that must be refused with `code`; nothing is written.
    fn refused(&self, command: &str, rest: &[&str], code: i32) -> Value {
        let before = self.receipt();
        let out = self.flow.run(&self.owner_argv(command, rest));
        assert_eq!(out.code, code, "{command}: {out:?}");
        assert_eq!(self.receipt(), before, "{command} wrote on a refusal");
        serde_json::from_str(out.stderr.trim()).unwrap()
    }

    /// An owner step fed `stdin`.
    fn piped(&self, command: &str, rest: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .flow
            .command(&self.owner_argv(command, rest))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A command refused before it reads standard input may exit before
        // this write: its closed pipe is then what the test expects, not an
        // error of the test (whichever comes first must not matter).
        let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        if let Err(e) = written {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
        Output::of(&child.wait_with_output().unwrap())
    }
}

/// Inline values and `-` (DEVIATIONS 86): the JSON itself, standard input
/// once per call, and refusals that call neither a file.
#[test]
fn json_options_take_inline_values_and_standard_input_once() {
    let a = Agent::running();
    // Standard input feeds one option.
    let out = a.piped(
        "lane-start",
        &crate::bed::lane_argv("api", "agent-1", "2026-07-14T01:00:05Z", "-"),
        r#"[{"kind": "lifecycle", "summary": "spawned agent-1"}]"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    // Two options on standard input: refused before anything is read.
    let before = a.receipt();
    let out = a.piped(
        "heartbeat",
        &["--input", "-", "--evidence", "-"],
        r#"{"lane_id": "api"}"#,
    );
    assert_eq!(out.code, 2, "{out:?}");
    let e: Value = serde_json::from_str(out.stderr.trim()).unwrap();
    assert_eq!(e["error"], "contract_error");
    assert!(
        crate::bed::str_field(&e, "message")
            .starts_with("standard input can feed one JSON option per call"),
        "{e}"
    );
    assert_eq!(e["fields"]["stdin_flags"], json!(["--evidence", "--input"]));
    assert!(e["hint"].as_str().unwrap().contains("inline"), "{e}");
    assert_eq!(a.receipt(), before);
    // startup-ack of lane api with this --evidence, refused (exit 2).
    let refused_ack = |evidence: &str| {
        let argv = crate::bed::lane_argv("api", "agent-1", "2026-07-14T01:00:06Z", evidence);
        a.refused("startup-ack", &argv, 2)
    };
    // Inline JSON that does not parse: named as a value, not a file.
    let e = refused_ack(r#"[{"kind": "lifecycle""#);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("JSON input is invalid: --evidence value: "),
        "{e}"
    );
    assert!(!message.contains("file"), "{e}");
    assert_eq!(
        e["fields"],
        json!({"input": "--evidence", "source": "inline"})
    );
    assert!(
        crate::bed::str_field(&e, "hint").contains("inline (--evidence '[{"),
        "{e}"
    );
    // A rule about the content of an inline value says where it was.
    let e = refused_ack(r#"  [{"kind": "lifecycle", "summary": "ok", "extra": 1}]"#);
    assert!(
        crate::bed::str_field(&e, "message").ends_with("(in the --evidence value)"),
        "{e}"
    );
    assert_eq!(e["fields"]["source"], "inline");
    assert!(e["fields"].get("file").is_none(), "{e}");
    // Anything else is a path, as in the reference.
    let e = refused_ack("ack.json");
    assert_eq!(e["message"], "evidence file 'ack.json' does not exist");
    assert_eq!(
        e["fields"],
        json!({"input": "--evidence", "file": "ack.json"})
    );
}

/// One clock (DEVIATIONS 87): `--at` on a command the reference stamps
/// itself is recorded; one more than 300 s ahead of the clock is refused
/// naming `--at` with a value that passes; a bad `--at` names the flag on
/// every command, the reference's message first; `--at` and an input's
/// own time must agree.
#[test]
fn at_is_recorded_bounded_and_taught_on_every_mutation() {
    let a = Agent::running();
    let evidence = ev("lifecycle", "spawned agent-1");
    // Far ahead of the clock: refused, the hint's value passes.
    let e = a.refused(
        "lane-start",
        &crate::bed::lane_argv("api", "agent-1", "2099-01-01T00:00:00Z", &evidence),
        2,
    );
    assert!(
        crate::bed::str_field(&e, "message")
            .starts_with("--at must not be in the future: '2099-01-01T00:00:00Z'"),
        "{e}"
    );
    assert_eq!(e["fields"]["input"], "--at");
    assert_eq!(e["fields"]["invalid"][0]["limit"], 300);
    let clock = e["fields"]["clock"].as_str().unwrap().to_string();
    assert!(
        crate::bed::str_field(&e, "hint").contains(&format!("--at {clock}")),
        "{e}"
    );
    a.owner(
        "lane-start",
        &crate::bed::lane_argv("api", "agent-1", &clock, &evidence),
    );
    // The same bound on a command that newly takes --at.
    let e = a.refused(
        "topology-register",
        &[
            "--at",
            "2099-01-01T00:00:00Z",
            "--input",
            "[]",
            "--evidence",
            &ev("plan", "t"),
        ],
        2,
    );
    assert_eq!(e["fields"]["input"], "--at", "{e}");
    // A bad --at, on each family of commands: the reference's text first,
    // then the flag and a value that passes.
    let lane = ["--lane-id", "api", "--agent-id", "agent-1", "--at", "nope"];
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "startup-ack",
            lane.to_vec(),
            "decided_at must be a UTC timestamp",
        ),
        (
            "lane-block",
            [&lane[..], &["--reason", "r"]].concat(),
            "decided_at must be a UTC timestamp",
        ),
        (
            "stall-clear",
            [&lane[..], &["--reason", "r"]].concat(),
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            "replacement-close",
            vec![
                "--lane-id",
                "api",
                "--replacement-lane-id",
                "b",
                "--at",
                "nope",
            ],
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            "lane-resolve",
            vec![
                "--lane-id",
                "api",
                "--resolution-lane-id",
                "b",
                "--at",
                "nope",
            ],
            "timestamp must be UTC ISO-8601 ending in Z",
        ),
        (
            "run-block",
            vec!["--reason", "r", "--at", "nope"],
            "decided_at must be a UTC timestamp",
        ),
        (
            "check-result",
            vec![
                "--input",
                r#"{"component_id": "api", "check_id": "unit", "passed": true}"#,
                "--at",
                "nope",
            ],
            "--at must be a UTC timestamp",
        ),
        (
            "complete",
            vec!["--at", "nope"],
            "--at must be a UTC timestamp",
        ),
    ];
    for (command, mut rest, reference) in cases {
        let evidence = ev("test", "e");
        rest.extend(["--evidence", evidence.as_str()]);
        let e = a.refused(command, &rest, 2);
        assert_eq!(e["error"], "contract_error", "{command}: {e}");
        assert_eq!(
            e["message"],
            format!("{reference}: --at 'nope' is not one"),
            "{command}"
        );
        assert_eq!(e["fields"]["input"], "--at", "{command}: {e}");
        assert!(
            crate::bed::str_field(&e, "hint").contains("--at 2026-07-14T01:00:00Z"),
            "{command}: {e}"
        );
    }
    // Where --at is new, it must have the stored shape (the reference's
    // lax reading of other commands' --at stays theirs).
    let e = a.refused(
        "topology-register",
        &[
            "--at",
            "2026-07-14T01:40Z",
            "--input",
            "[]",
            "--evidence",
            &ev("plan", "t"),
        ],
        2,
    );
    assert_eq!(
        e["message"],
        "--at must be a UTC timestamp: --at '2026-07-14T01:40Z' is not one"
    );
    // --at and an input's own time must name one instant.
    let e = a.refused(
        "heartbeat",
        &[
            "--at",
            "2026-07-14T01:02:00Z",
            "--input",
            r#"{"lane_id": "api", "agent_id": "agent-1", "observed_at": "2026-07-14T01:01:00Z",
                "silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": "r"}"#,
            "--evidence",
            &ev("log", "b"),
        ],
        2,
    );
    assert!(
        crate::bed::str_field(&e, "message")
            .starts_with("--at and the input's observed_at disagree"),
        "{e}"
    );
    assert!(
        crate::bed::str_field(&e, "hint").contains("leave observed_at out"),
        "{e}"
    );
}

/// `--at` on the commands the reference stamps with the wall clock is the
/// event's time; `complete --at` too (the reference ignores it).
#[test]
fn commands_the_reference_stamps_itself_record_at() {
    let a = Agent::running();
    a.owner(
        "topology-register",
        &[
            "--at",
            "2026-07-14T01:01:00Z",
            "--input",
            &json!([{"id": "api", "required": true, "description": "api", "owner_lane": "api",
                "required_checks": [], "dependencies": [], "evidence_refs": [],
                "coverage_state": "missing"}])
            .to_string(),
            "--evidence",
            &ev("plan", "topology"),
        ],
    );
    let rows = a.log_events();
    let times = created_at(&rows);
    assert_eq!(
        times,
        [
            "2026-07-14T00:59:00Z",
            "2026-07-14T00:59:30Z",
            "2026-07-14T00:59:40Z",
            "2026-07-14T01:00:00Z",
            "2026-07-14T01:01:00Z"
        ]
    );
}

/// `lane-resolve`'s arguments: lane `api` resolved by `fix` with `evidence`.
fn resolve_api_by_fix(evidence: &str) -> Vec<&str> {
    let mut argv = vec!["--lane-id", "api", "--resolution-lane-id", "fix"];
    argv.extend(["--at", "2026-07-14T01:06:00Z", "--evidence", evidence]);
    argv
}

/// No digest by hand (DEVIATIONS 88): `evidence-digest` prints the digest
/// `lane-resolve` binds, for the value the lane recorded, whatever its
/// spacing; a resolution missing one names both digests.
#[test]
fn evidence_digest_prints_what_lane_resolve_binds() {
    let a = Agent::running();
    let lane_step =
        |command: &str, lane: &str, agent: &str, at: &str, extra: &[&str], evidence: &str| {
            let mut rest = vec!["--lane-id", lane, "--agent-id", agent, "--at", at];
            rest.extend_from_slice(extra);
            rest.extend(["--evidence", evidence]);
            a.owner(command, &rest)
        };
    lane_step(
        "lane-start",
        "api",
        "agent-1",
        "2026-07-14T01:00:05Z",
        &[],
        &ev("lifecycle", "s"),
    );
    lane_step(
        "startup-ack",
        "api",
        "agent-1",
        "2026-07-14T01:00:06Z",
        &[],
        &ev("lifecycle", "a"),
    );
    let failed = r#"[{"kind": "test", "summary": "api tests fail"}]"#;
    lane_step(
        "lane-fail",
        "api",
        "agent-1",
        "2026-07-14T01:01:00Z",
        &["--reason", "tests fail"],
        failed,
    );
    a.owner(
        "lane-create",
        &[
            "--at",
            "2026-07-14T01:02:00Z",
            "--input",
            r#"{"lane_id": "fix", "agent_id": "agent-2", "assignment": "Fix the api",
                "write_scope": ["src/api"], "fallback": "main session", "parent_lane_id": "api",
                "startup_ack_deadline": "2026-07-14T01:02:30Z",
                "command_deadline": "2026-07-14T01:30:00Z"}"#,
            "--evidence",
            &ev("plan", "assign fix"),
        ],
    );
    lane_step(
        "lane-start",
        "fix",
        "agent-2",
        "2026-07-14T01:02:05Z",
        &[],
        &ev("lifecycle", "s"),
    );
    lane_step(
        "startup-ack",
        "fix",
        "agent-2",
        "2026-07-14T01:02:06Z",
        &[],
        &ev("lifecycle", "a"),
    );
    let fixed = r#"[{"summary": "api tests pass", "kind": "test", "exit_status": 0}]"#;
    lane_step(
        "lane-complete",
        "fix",
        "agent-2",
        "2026-07-14T01:05:00Z",
        &["--changed-paths", r#"["src/api/lib.rs"]"#],
        fixed,
    );
    let digest = |value: &str| {
        let out = a.step(&["evidence-digest", "--evidence", value]);
        assert_eq!(out["operation"], "evidence-digest");
        assert!(out.get("state_root").is_none(), "{out}");
        out["digest"].as_str().unwrap().to_string()
    };
    // Spacing and key order do not change it.
    let failed_digest = digest(failed);
    assert_eq!(
        digest(r#"[ {"summary":"api tests fail","kind":"test"} ]"#),
        failed_digest
    );
    let fixed_digest = digest(fixed);
    // liveness-check --explain prints the same digest of a lane's evidence,
    // for a caller who no longer has the value.
    for (lane, expected) in [("api", &failed_digest), ("fix", &fixed_digest)] {
        let explained = a.step(&[
            "liveness-check",
            "--run-id",
            &a.run,
            "--lane-id",
            lane,
            "--at",
            "2026-07-14T01:05:30Z",
            "--explain",
        ]);
        assert_eq!(
            explained["evidence_digest"],
            expected.as_str(),
            "{explained}"
        );
    }
    // One digest missing: the refusal names both.
    let only_one = json!([{"kind": "review", "summary": "failure", "checksum": failed_digest}]);
    let e = a.refused(
        "lane-resolve",
        &resolve_api_by_fix(&only_one.to_string()),
        2,
    );
    assert_eq!(
        e["message"],
        "resolution evidence must bind failed and completed lane evidence (in the --evidence value)"
    );
    assert_eq!(
        e["fields"]["expected_checksums"]["api"],
        failed_digest.as_str()
    );
    assert_eq!(
        e["fields"]["expected_checksums"]["fix"],
        fixed_digest.as_str()
    );
    assert_eq!(e["fields"]["missing_checksums"], json!([fixed_digest]));
    assert!(
        e["hint"].as_str().unwrap().contains("evidence-digest"),
        "{e}"
    );
    // Both: accepted at the first try.
    let both = json!([
        {"kind": "review", "summary": "failure", "checksum": failed_digest},
        {"kind": "review", "summary": "fix", "checksum": fixed_digest}]);
    a.owner("lane-resolve", &resolve_api_by_fix(&both.to_string()));
    // A value that is no list is refused like any --evidence.
    let out = a.raw(&["evidence-digest", "--evidence", r#"{"kind": "x"}"#]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("a JSON list is expected"), "{out:?}");
}

/// An `--at` earlier than the run's last event is recorded, as by the
/// reference (DEVIATIONS 87: a run may mix clocks), and the views flag it
/// rather than draw it in order.
#[test]
fn an_at_before_the_last_event_is_recorded_and_flagged() {
    let a = Agent::running();
    a.owner(
        "lane-start",
        &crate::bed::lane_argv(
            "api",
            "agent-1",
            "2026-07-14T00:30:00Z",
            &ev("lifecycle", "spawned agent-1"),
        ),
    );
    let html = a.report_page(&[]);
    assert!(html.contains("Time runs backwards in 1 event(s)"), "{html}");
}
