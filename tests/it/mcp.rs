//! `bluetape-flow mcp` (contracts/commands.md "mcp"), driven by a client
//! nobody here wrote (agent-tools.md §3): the official MCP Python SDK (PyPI
//! `mcp`, pinned and installed into a venv by `.ci/run`, which exports its
//! interpreter as BLUETAPE_CI_PYTHON). Without it these tests fail under
//! CI=true, and say loudly that they did not run otherwise. The framing test
//! speaks raw JSON-RPC lines, as a broken client would.

use crate::bed::{self as common, Flow, T0};
use serde_json::{Map, Value, json};
use sha2::Digest;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use bluetape_flow::mcp::catalog::{Mode, offered};

/// The tools every mode lists (the registry's read-only offers).
fn read_only_tools() -> Vec<&'static str> {
    offered(Mode::ReadOnly).map(|c| c.name).collect()
}

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_client.py");

/// The venv's python with the SDK importable, or None outside CI.
fn python() -> Option<PathBuf> {
    let why = "the MCP Python SDK is missing: run .ci/run (it installs PyPI mcp==2.3.0 into ~/.cache/bluetape-ci/venv and exports BLUETAPE_CI_PYTHON)";
    crate::bed::ci_python("BLUETAPE_CI_PYTHON", "venv", "mcp, mcp.client.stdio", why)
}

/// The SDK's client, talking to one `bluetape-flow mcp` it started.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// What the host puts in the `_meta` of every call from now on.
    host: Value,
}

/// The pinned environment the bed gives the binary, for the server.
fn server_env(flow: &Flow, tmpdir: &Path) -> Map<String, Value> {
    let home = &flow.home;
    let mut env = Map::new();
    for (k, v) in [
        ("HOME", home.clone()),
        ("PATH", PathBuf::from("/usr/bin:/bin")),
        ("XDG_STATE_HOME", home.join(".local/state")),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_CACHE_HOME", home.join(".cache")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("NO_COLOR", PathBuf::from("1")),
        ("TZ", PathBuf::from("UTC")),
        ("TMPDIR", tmpdir.to_path_buf()),
    ] {
        env.insert(k.into(), Value::String(v.to_string_lossy().into_owned()));
    }
    env
}

impl Client {
    /// Start the server with `args` (after `mcp`); None when the SDK is
    /// not installed outside CI. Private input files go under `tmpdir`.
    fn start(flow: &Flow, tmpdir: &Path, args: &[&str]) -> Option<Client> {
        let python = python()?;
        std::fs::create_dir_all(tmpdir).unwrap();
        let mut argv = vec!["mcp".to_string()];
        argv.extend(args.iter().map(|s| s.to_string()));
        let spec = json!({
            "command": env!("CARGO_BIN_EXE_bluetape-flow"),
            "args": argv,
            "env": server_env(flow, tmpdir),
            "cwd": flow.cwd,
        });
        let mut child = Command::new(python)
            .arg(CLIENT)
            .arg(spec.to_string())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &flow.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Some(Client {
            child,
            stdin,
            stdout,
            host: Value::Null,
        })
    }

    /// A server in `owner` mode acting with the handle `owner`.
    fn owner(flow: &Flow, tmpdir: &Path, root: &Path, owner: &Path) -> Option<Client> {
        let (root, owner) = (root.to_str().unwrap(), owner.to_str().unwrap());
        let args = [
            "--mode",
            "owner",
            "--state-root",
            root,
            "--owner-file",
            owner,
        ];
        Client::start(flow, tmpdir, &args)
    }

    /// [`Client::owner`] of the bed's run as its owner, the server's temp
    /// directory `<tmp>/<tmpdir>`.
    fn owner_of(run: &common::TestBed, tmpdir: &str) -> Option<Client> {
        let tmpdir = run.tmp.path().join(tmpdir);
        Client::owner(&run.flow, &tmpdir, &run.root, &run.owner())
    }

    fn ask(&mut self, request: Value) -> Value {
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("client said {line:?} to {request}"))
    }

    fn tools(&mut self) -> Vec<Value> {
        self.ask(json!({"op": "list"}))["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The host's clock for the calls from now on (`_meta`
    /// `bluetape-flow/at`, agent-tools.md §2), as a harness replaying a
    /// run at recorded times would set it.
    fn at(&mut self, at: &str) -> &mut Client {
        self.host = json!({ "bluetape-flow/at": at });
        self
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let meta = self.host.clone();
        self.ask(json!({"op": "call", "name": name, "arguments": arguments, "meta": meta}))
    }

    /// A call that must succeed; its envelope (checked to be the text too).
    fn ok(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.call(name, arguments.clone());
        assert_eq!(answer["is_error"], false, "{name} {arguments}: {answer}");
        let text: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, answer["structured"], "{name}");
        assert_eq!(answer["structured"]["ok"], true, "{name}: {answer}");
        answer["structured"].clone()
    }

    /// A call that must be a tool error carrying the envelope `error`.
    fn refused(&mut self, name: &str, arguments: Value, error: &str) -> Value {
        let answer = self.call(name, arguments.clone());
        assert_eq!(answer["is_error"], true, "{name} {arguments}: {answer}");
        let text: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, answer["structured"], "{name}");
        assert_eq!(answer["structured"]["error"], error, "{name}: {answer}");
        assert_eq!(answer["structured"]["ok"], false);
        answer["structured"].clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn event_types(receipt: &Path) -> Vec<String> {
    std::fs::read_to_string(receipt)
        .unwrap()
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["event_type"].as_str().unwrap().to_string()
        })
        .collect()
}

fn sha256(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

fn evidence(kind: &str, summary: &str) -> Value {
    json!([{"kind": kind, "summary": summary}])
}

// ------------------------------------------------------------ modes

#[test]
fn read_only_lists_no_mutation_and_refuses_one_by_name() {
    let run = common::TestBed::running(&["runtime"]);
    let tmp = run.tmp.path().join("mcp-tmp");
    let root = run.root.to_str().unwrap();
    let Some(mut client) = Client::start(
        &run.flow,
        &tmp,
        &["--mode", "read-only", "--state-root", root],
    ) else {
        return;
    };
    let tools = client.tools();
    let listed = names(&tools);
    let mut expected: Vec<String> = read_only_tools().iter().map(|s| s.to_string()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected);
    let tree = bluetape_flow::surface::command();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let about = tree
            .find_subcommand(name)
            .unwrap()
            .get_about()
            .unwrap()
            .to_string();
        assert!(
            about.starts_with("Read-only"),
            "{name} is listed read-only: {about}"
        );
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}");
    }
    let before = run.snapshot();
    // A mutation called by name anyway: refused, nothing written.
    let answer = client.call(
        "lane-create",
        json!({"run_id": run.run_id, "evidence": evidence("plan", "x"), "input": common::lane_input("l", "a", &[])}),
    );
    assert_eq!(answer["rpc_error"]["code"], -32602, "{answer}");
    assert!(
        answer["rpc_error"]["message"]
            .as_str()
            .unwrap()
            .contains("read-only")
    );
    let answer = client.call("run-approve", json!({"run_id": run.run_id}));
    assert_eq!(answer["rpc_error"]["code"], -32602, "{answer}");
    // Read-only tools answer what the CLI answers.
    let verified = client.ok("verify", json!({"run_id": run.run_id}));
    assert_eq!(verified, run.read("verify", &[]).assert_ok());
    let status = client.at(T0).ok("status", json!({"run_id": run.run_id}));
    assert_eq!(status["operation"], "status");
    let log = client.call("log", json!({"run_id": run.run_id}));
    assert_eq!(log["is_error"], false, "{log}");
    assert_eq!(log["structured"]["lines"][0]["event_type"], "run_created");
    // The digest lane-resolve binds, as the CLI prints it (DEVIATIONS 88).
    let list = evidence("test", "api: tests passed");
    let digest = client.ok("evidence-digest", json!({"evidence": list}));
    let cli = run
        .flow
        .run(&["evidence-digest", "--evidence", &list.to_string()])
        .assert_ok();
    assert_eq!(digest["digest"], cli["digest"], "{digest}");
    assert_eq!(
        digest["digest"],
        sha256(r#"[{"kind":"test","summary":"api: tests passed"}]"#)
    );
    drop(client);
    assert_eq!(run.snapshot(), before, "read-only tools wrote");
    // A read-only server acts with no handle at all.
    let out = run
        .flow
        .run(&["mcp", "--mode", "read-only", "--owner-file", "x"]);
    out.assert_error(2, "contract_error");
    let out = run.flow.run(&["mcp", "--mode", "owner"]);
    out.assert_error(2, "contract_error");
    // A handle whose path is not text: refused at start, not changed later.
    use std::os::unix::ffi::OsStrExt;
    let owner = run.work.join(std::ffi::OsStr::from_bytes(b"caf\xe9.owner"));
    let out = run.flow.run(&[
        std::ffi::OsStr::new("mcp"),
        "--mode".as_ref(),
        "owner".as_ref(),
        "--owner-file".as_ref(),
        owner.as_os_str(),
    ]);
    let e = out.assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        "mcp --owner-file must be a path that is valid UTF-8 text"
    );
}

/// trust-model §2 promise 8: `liveness-check` is a read-only tool in every
/// mode, so it takes no `decision_out` (a file at a path the model would
/// choose): the schema lists none, a call naming it is refused, and no file
/// appears anywhere (contracts/commands.md, the MCP catalog).
#[test]
fn liveness_check_takes_no_decision_out_in_any_mode() {
    let run = common::TestBed::running(&["runtime"]);
    run.running_lane("api", None);
    let tmp = run.tmp.path().join("mcp-tmp");
    let root = run.root.to_str().unwrap();
    let target = run.work.join("decision.json");
    for args in [
        vec!["--mode", "read-only", "--state-root", root],
        vec![
            "--mode",
            "owner",
            "--state-root",
            root,
            "--owner-file",
            run.owner().to_str().unwrap(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(|s| &**s).collect();
        let Some(mut client) = Client::start(&run.flow, &tmp, &args) else {
            return;
        };
        // In owner mode the server names its handle's run itself.
        let mut lane = json!({"lane_id": "api"});
        if args[1] == "read-only" {
            lane["run_id"] = json!(run.run_id);
        }
        let with = |extra: Value| {
            let mut call = lane.clone();
            call.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            call
        };
        let tools = client.tools();
        let check = tools
            .iter()
            .find(|t| t["name"] == "liveness-check")
            .unwrap();
        assert!(
            check["inputSchema"]["properties"]
                .get("decision_out")
                .is_none(),
            "{check}"
        );
        let before = run.snapshot();
        let late = "2026-07-14T02:00:00Z";
        let e = client.at(late).refused(
            "liveness-check",
            with(json!({"decision_out": target.to_str().unwrap()})),
            "contract_error",
        );
        assert!(
            e["message"].as_str().unwrap().contains("decision_out"),
            "{e}"
        );
        assert!(!target.exists(), "liveness-check wrote {target:?}");
        let answer = client.ok("liveness-check", with(json!({"explain": true})));
        assert_eq!(answer["action"], "suspect_stall", "{answer}");
        assert!(answer.get("decision_out").is_none());
        drop(client);
        assert_eq!(run.snapshot(), before, "a read-only tool wrote");
    }
}

#[test]
fn owner_mode_adds_mutations_but_never_approval_keys_or_handles() {
    let (tmp, flow) = crate::bed::flow_elsewhere();
    let root = tmp.path().join("state");
    let owner = root.join("handles/main.owner");
    let Some(mut client) = Client::owner(&flow, &tmp.path().join("mcp-tmp"), &root, &owner) else {
        return;
    };
    let tools = client.tools();
    let listed = names(&tools);
    let mutations = [
        "init",
        "lane-create",
        "heartbeat",
        "lane-reassign",
        "topology-register",
        "check-result",
        "component-evidence",
        "complete",
        "handoff-create",
        "resume",
    ];
    for offered in read_only_tools().into_iter().chain(mutations) {
        assert!(listed.iter().any(|t| t == offered), "{offered}");
    }
    for never in [
        "run-approve",
        "approval-statement",
        "key-generate",
        "sign-head",
        "report",
        "mcp",
    ] {
        assert!(!listed.iter().any(|t| t == never), "{never} is a tool");
        let answer = client.call(never, json!({}));
        assert_eq!(answer["rpc_error"]["code"], -32602, "{never}: {answer}");
    }
    for tool in &tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["additionalProperties"], false, "{}", tool["name"]);
        for key in schema["properties"].as_object().unwrap().keys() {
            assert!(
                !["owner", "token", "approved", "identity", "key"]
                    .iter()
                    .any(|w| key.contains(w)),
                "{} takes {key}",
                tool["name"]
            );
        }
    }
    // The kind is an annotation (agent-tools.md §4): read-only tools say
    // so; a mutation is MCP's default kind and says nothing (that it only
    // appends is said once, in the instructions). Nothing else is said:
    // the catalog is read on every session.
    for tool in &tools {
        let read_only = read_only_tools().contains(&tool["name"].as_str().unwrap());
        let expected = if read_only {
            json!({"readOnlyHint": true})
        } else {
            Value::Null
        };
        assert_eq!(tool["annotations"], expected, "{}", tool["name"]);
    }
    let lane = tools.iter().find(|t| t["name"] == "lane-complete").unwrap();
    let props = &lane["inputSchema"]["properties"];
    assert_eq!(props["evidence"]["type"], "array");
    assert_eq!(props["evidence"]["maxItems"], 8);
    assert_eq!(
        props["evidence"]["items"]["required"],
        json!(["kind", "summary"])
    );
    assert_eq!(props["changed_paths"]["type"], "array");
    // Owner mode is bound to the handle's run (agent-tools.md §2): a
    // mutation takes no run_id, nor does a read that needs one (status,
    // whose run is optional, may still name one). Before init made the
    // handle, such a call is refused naming the handle, as the CLI is, and
    // nothing is written.
    assert!(props.get("run_id").is_none(), "{props}");
    let schema_of =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"].clone();
    assert!(schema_of("verify")["properties"].get("run_id").is_none());
    assert!(schema_of("status")["properties"]["run_id"].is_object());
    for (tool, args) in [
        (
            "lane-start",
            json!({"lane_id": "api", "agent_id": "agent-1", "evidence": evidence("tool", "spawned")}),
        ),
        ("verify", json!({})),
    ] {
        let e = client.refused(tool, args, "contract_error");
        assert!(e["message"].as_str().unwrap().contains("main.owner"), "{e}");
    }
    assert!(!root.join("runs").exists());
}

// ------------------------------------------------------------ a whole run

/// The steps after init and the approval, as (tool, arguments without
/// run_id); the same list drives the server (which names the run of its
/// handle itself, so only the read-only tools are told it) and the CLI.
fn steps() -> Vec<(&'static str, Value)> {
    let lane = |id: &str, agent: &str, scope: &str| {
        json!({"lane_id": id, "agent_id": agent, "assignment": format!("Work on {id}"), "write_scope": [scope],
               "fallback": "main session", "observed_at": "2026-07-14T01:00:02Z",
               "startup_ack_deadline": "2026-07-14T01:00:30Z", "command_deadline": "2026-07-14T01:10:00Z"})
    };
    let step = |lane: &str, agent: &str, at: &str, what: &str| json!({"lane_id": lane, "agent_id": agent, "at": at, "evidence": evidence("lifecycle", what)});
    let decision = r#"{"action":"suspect_stall","reason":"no fresh evidence"}"#;
    let check = |c: &str| {
        json!({"input": {"component_id": c, "check_id": "unit", "passed": true},
               "evidence": [{"kind": "test", "summary": format!("{c} unit passed"), "exit_status": 0}]})
    };
    let mut complete_cli = step("cli", "agent-2", "2026-07-14T01:03:00Z", "cli tests passed");
    complete_cli["changed_paths"] = json!(["src/cli/main.rs"]);
    let mut complete_p2 = step(
        "parser-2",
        "agent-4",
        "2026-07-14T01:20:00Z",
        "parser tests passed",
    );
    complete_p2["changed_paths"] = json!(["src/parser/grammar/expr.rs"]);
    let mut stall = step("parser", "agent-1", "2026-07-14T01:06:00Z", "");
    stall["decision"] = serde_json::from_str(decision).unwrap();
    stall["reason"] = json!("no fresh evidence");
    stall["evidence"] = json!([{"kind": "liveness", "summary": "liveness-check decision for parser", "checksum": sha256(decision)}]);
    let mut probe = step("parser", "agent-1", "2026-07-14T01:06:10Z", "");
    probe["deadline"] = json!("2026-07-14T01:07:00Z");
    probe["evidence"] = evidence("tool", "send_message status probe to agent-1");
    let mut interrupt = step("parser", "agent-1", "2026-07-14T01:10:30Z", "");
    interrupt["evidence"] = evidence("tool", "interrupt_agent returned interrupted");
    vec![
        (
            "run-start",
            json!({"evidence": evidence("plan", "run started"), "at": "2026-07-14T01:00:01Z"}),
        ),
        (
            "lane-create",
            json!({"input": lane("parser", "agent-1", "src/parser"), "evidence": evidence("plan", "assign parser")}),
        ),
        (
            "lane-create",
            json!({"input": lane("cli", "agent-2", "src/cli"), "evidence": evidence("plan", "assign cli")}),
        ),
        (
            "lane-start",
            step(
                "parser",
                "agent-1",
                "2026-07-14T01:00:03Z",
                "spawned agent-1",
            ),
        ),
        (
            "startup-ack",
            step(
                "parser",
                "agent-1",
                "2026-07-14T01:00:04Z",
                "agent-1 acknowledged",
            ),
        ),
        (
            "lane-start",
            step("cli", "agent-2", "2026-07-14T01:00:03Z", "spawned agent-2"),
        ),
        (
            "startup-ack",
            step(
                "cli",
                "agent-2",
                "2026-07-14T01:00:04Z",
                "agent-2 acknowledged",
            ),
        ),
        (
            "heartbeat",
            json!({"evidence": [{"kind": "log", "summary": "parser compiling", "exit_status": 0}],
            "input": {"lane_id": "parser", "agent_id": "agent-1", "observed_at": "2026-07-14T01:00:05Z",
                      "silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": "still compiling"}}),
        ),
        ("lane-complete", complete_cli),
        (
            "liveness-check",
            json!({"lane_id": "parser", "at": "2026-07-14T01:06:00Z"}),
        ),
        ("stall-record", stall),
        ("probe-sent", probe),
        (
            "liveness-check",
            json!({"lane_id": "parser", "at": "2026-07-14T01:10:30Z", "command_status": "alive"}),
        ),
        ("interrupt-result", interrupt),
        (
            "lane-reassign",
            json!({"evidence": evidence("recovery", "checkpoint 3 recovered"),
            "input": {"lane_id": "parser", "replacement_lane_id": "parser-2", "replacement_agent_id": "agent-4",
                      "decided_at": "2026-07-14T01:11:00Z", "replacement_assignment": "Resume parser from checkpoint 3",
                      "replacement_write_scope": ["src/parser/grammar"],
                      "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
                      "replacement_command_deadline": "2026-07-14T01:30:00Z"}}),
        ),
        (
            "lane-start",
            step(
                "parser-2",
                "agent-4",
                "2026-07-14T01:11:05Z",
                "spawned agent-4",
            ),
        ),
        (
            "startup-ack",
            step(
                "parser-2",
                "agent-4",
                "2026-07-14T01:11:10Z",
                "agent-4 acknowledged",
            ),
        ),
        ("lane-complete", complete_p2),
        (
            "replacement-close",
            json!({"lane_id": "parser", "replacement_lane_id": "parser-2", "at": "2026-07-14T01:21:00Z",
            "evidence": evidence("lineage", "replacement parser-2 completed")}),
        ),
        (
            "topology-register",
            json!({"evidence": evidence("plan", "topology approved"), "input": [
            common::component("parser", "parser-2", true, &["unit"], &[]),
            common::component("cli", "cli", true, &["unit"], &["parser"])]}),
        ),
        ("check-result", check("parser")),
        ("check-result", check("cli")),
        (
            "component-evidence",
            json!({"input": {"component_id": "parser"}, "evidence": evidence("verification", "parser verified")}),
        ),
        (
            "component-evidence",
            json!({"input": {"component_id": "cli"}, "evidence": evidence("verification", "cli verified")}),
        ),
        ("completion-check", json!({})),
        (
            "complete",
            json!({"evidence": evidence("verification", "main session verified the result")}),
        ),
    ]
}

const JSON_ARGS: &[&str] = &["evidence", "input", "decision", "changed_paths"];

/// The CLI command line of a step: JSON values as files under `work`.
fn cli_argv(
    root: &Path,
    work: &Path,
    owner: Option<&Path>,
    tool: &str,
    args: &Value,
) -> Vec<String> {
    let mut argv = vec![
        "--state-root".to_string(),
        root.to_string_lossy().into_owned(),
        tool.to_string(),
    ];
    if let Some(owner) = owner {
        argv.extend([
            "--owner-file".to_string(),
            owner.to_string_lossy().into_owned(),
        ]);
    }
    for (key, value) in args.as_object().unwrap() {
        let flag = format!("--{}", key.replace('_', "-"));
        match value {
            _ if JSON_ARGS.contains(&key.as_str()) => {
                let n = std::fs::read_dir(work).unwrap().count();
                let file = work.join(format!("{n}-{key}.json"));
                std::fs::write(&file, value.to_string()).unwrap();
                argv.extend([flag, file.to_string_lossy().into_owned()]);
            }
            Value::Array(items) => {
                for item in items {
                    argv.extend([flag.clone(), item.as_str().unwrap().to_string()]);
                }
            }
            Value::String(s) => argv.extend([flag, s.clone()]),
            other => argv.extend([flag, other.to_string()]),
        }
    }
    argv
}

fn with_run(args: &Value, run_id: &str) -> Value {
    let mut args = args.clone();
    args["run_id"] = json!(run_id);
    args
}

fn make_repo(repo: &Path) {
    for dir in ["src/parser/grammar", "src/cli"] {
        std::fs::create_dir_all(repo.join(dir)).unwrap();
    }
}

fn approve(flow: &Flow, root: &Path, run_id: &str, owner: &Path, work: &Path) {
    let args = json!({"run_id": run_id, "evidence": evidence("user_approval", "plan approved by the user"), "at": "2026-07-14T01:00:00Z"});
    flow.run(&cli_argv(root, work, Some(owner), "run-approve", &args))
        .assert_ok();
}

#[test]
fn a_whole_run_through_the_server_verifies_and_matches_the_cli() {
    let (tmp, flow) = crate::bed::flow_elsewhere();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let private = tmp.path().join("mcp-tmp");
    let components = json!(["parser", "cli"]);

    // Through the server: init with the server's handle, the approval by a
    // person through the CLI, then every step as a tool call.
    let root = tmp.path().join("server/state");
    let repo = tmp.path().join("server/repo");
    make_repo(&repo);
    let owner = root.join("handles/main.owner");
    let Some(mut client) = Client::owner(&flow, &private, &root, &owner) else {
        return;
    };
    let init = json!({"workflow_type": "A", "repo_root": repo, "component": components});
    let run_id = client.ok("init", init.clone())["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&flow, &root, &run_id, &owner, &work);
    let mut answers = Vec::new();
    for (tool, mut args) in steps() {
        // The CLI's --at is the host's clock here (agent-tools.md §2);
        // a step without one happens at the server's clock. The server
        // names the run itself.
        client.host = match args.as_object_mut().unwrap().remove("at") {
            Some(at) => json!({ "bluetape-flow/at": at }),
            None => Value::Null,
        };
        answers.push((tool, client.ok(tool, args)));
    }
    drop(client);
    let stall = &answers
        .iter()
        .find(|(t, _)| *t == "liveness-check")
        .unwrap()
        .1;
    assert_eq!(stall["action"], "suspect_stall", "{stall}");
    let verified = flow
        .run(&crate::bed::read_argv(&root, "verify", &run_id, &[]))
        .assert_ok();
    let check = flow
        .run(&crate::bed::read_argv(
            &root,
            "completion-check",
            &run_id,
            &[],
        ))
        .assert_ok();
    assert_eq!(check["complete"], true, "{check}");
    assert_eq!(
        std::fs::read_dir(&private).unwrap().count(),
        0,
        "the server left private input files behind"
    );

    // The same steps through the CLI, in another state root.
    let cli_root = tmp.path().join("cli/state");
    let cli_repo = tmp.path().join("cli/repo");
    make_repo(&cli_repo);
    let cli_owner = cli_root.join("handles/main.owner");
    let mut init = init;
    init["repo_root"] = json!(cli_repo);
    let cli_run = flow
        .run(&cli_argv(&cli_root, &work, Some(&cli_owner), "init", &init))
        .assert_ok()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&flow, &cli_root, &cli_run, &cli_owner, &work);
    for (tool, args) in steps() {
        let reads = read_only_tools().contains(&tool);
        let owner = (!reads).then_some(cli_owner.as_path());
        flow.run(&cli_argv(
            &cli_root,
            &work,
            owner,
            tool,
            &with_run(&args, &cli_run),
        ))
        .assert_ok();
    }
    let server_types = event_types(&root.join("runs").join(&run_id).join("receipt.jsonl"));
    let cli_types = event_types(&cli_root.join("runs").join(&cli_run).join("receipt.jsonl"));
    assert_eq!(server_types, cli_types);
    assert_eq!(verified["event_count"], server_types.len());
    for wanted in [
        "stall_suspected",
        "probe_sent",
        "agent_interrupted",
        "replacement_lineage_closed",
        "check_passed",
        "evidence_attached",
    ] {
        assert!(
            server_types.iter().any(|t| t == wanted),
            "{wanted} missing: {server_types:?}"
        );
    }
}

// ------------------------------------------------------------ refusals

#[test]
fn unknown_and_wrong_typed_arguments_are_refused_and_write_nothing() {
    let run = common::TestBed::running(&["runtime"]);
    let Some(mut client) = Client::owner_of(&run, "mcp-tmp") else {
        return;
    };
    let good = json!({"evidence": evidence("plan", "assign"), "input": common::lane_input("api", "agent-1", &[])});
    let before = run.snapshot();
    // The run is the server's handle's: naming it is an unknown argument
    // like the handle itself (agent-tools.md §2).
    for (key, value) in [
        ("owner_file", json!(run.owner())),
        ("approved_by", json!("ssh:alice")),
        ("token", json!("t")),
        ("run_id", json!(run.run_id)),
    ] {
        let mut args = good.clone();
        args[key] = value;
        let e = client.refused("lane-create", args, "contract_error");
        assert!(e["message"].as_str().unwrap().contains(key), "{e}");
    }
    for (key, value) in [
        ("agent_id", json!(5)),
        ("evidence", json!("[]")),
        ("input", json!([1])),
    ] {
        let mut args = good.clone();
        args[key] = value;
        let e = client.refused("lane-create", args, "contract_error");
        assert!(e["message"].as_str().unwrap().contains(key), "{e}");
    }
    // The command's own checks, with the CLI's messages and codes.
    let mut floats = good.clone();
    floats["evidence"] = json!([{"kind": "test", "summary": "x", "exit_status": 1.5}]);
    let e = client.refused("lane-create", floats, "contract_error");
    assert_eq!(
        e["message"],
        "JSON input must not contain floats, NaN or Infinity: the evidence argument"
    );
    assert_eq!(
        e["fields"],
        json!({"input": "--evidence", "source": "inline"}),
        "{e}"
    );
    let mut big = good.clone();
    big["input"]["assignment"] = json!("x".repeat(1_100_000));
    let e = client.refused("lane-create", big, "contract_error");
    assert_eq!(
        e["message"],
        "JSON input exceeds one MiB: the input argument"
    );
    assert_eq!(run.snapshot(), before);
    client.ok("lane-create", good);
    // One clock: a step whose command needs --at, called without one,
    // happens now by the server's clock.
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    client.ok(
        "lane-start",
        json!({"lane_id": "api", "agent_id": "agent-1", "evidence": evidence("tool", "spawned")}),
    );
    let last = run.last_event();
    assert_eq!(last["event_type"], "lane_started", "{last}");
    let stamped: chrono::DateTime<chrono::Utc> =
        last["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(stamped >= before && stamped <= chrono::Utc::now(), "{last}");
}

/// agent-tools.md §2: the clock and the head fence are the host's, not the
/// model's. A call's `_meta` `bluetape-flow/at` is the event's time (held to
/// the skew as the CLI holds `--at`), `bluetape-flow/expected_head` fences
/// the write to that head, and `at` sent as an argument is refused saying
/// where it goes. A refusal writes nothing.
#[test]
fn the_host_sets_the_clock_and_the_head_fence_in_meta() {
    let run = common::TestBed::running(&["runtime"]);
    let Some(mut client) = Client::owner_of(&run, "mcp-tmp") else {
        return;
    };
    client.at(T0).ok(
        "lane-create",
        json!({"evidence": evidence("plan", "assign"), "input": common::lane_input("api", "agent-1", &[])}),
    );
    let head = run.last_event()["checksum"].as_str().unwrap().to_string();
    let start =
        json!({"lane_id": "api", "agent_id": "agent-1", "evidence": evidence("tool", "spawned")});
    let before = run.snapshot();
    let mut named = start.clone();
    named["at"] = json!("2026-07-14T01:01:00Z");
    let e = client.refused("lane-start", named, "contract_error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("in the call's _meta as bluetape-flow/at"),
        "{e}"
    );
    client.host = json!({"bluetape-flow/expected_head": "0".repeat(64)});
    let e = client.refused("lane-start", start.clone(), "coordinator_conflict");
    assert_eq!(e["message"], "receipt head changed before mutation");
    let e =
        client
            .at("2099-01-01T00:00:00Z")
            .refused("lane-start", start.clone(), "contract_error");
    assert_eq!(e["fields"]["input"], "--at", "{e}");
    assert_eq!(run.snapshot(), before, "a refusal wrote");
    client.host = json!({"bluetape-flow/at": "2026-07-14T01:01:00Z",
                         "bluetape-flow/expected_head": head});
    client.ok("lane-start", start);
    let last = run.last_event();
    assert_eq!(last["event_type"], "lane_started", "{last}");
    assert_eq!(last["timestamp"], "2026-07-14T01:01:00Z", "{last}");
    assert_eq!(last["previous_checksum"], head.as_str(), "{last}");
    // status answers the clock a step would happen at: the host's, else
    // the server's.
    let status = json!({"run_id": run.run_id});
    let answer = client
        .at("2026-07-14T01:02:00Z")
        .ok("status", status.clone());
    assert_eq!(answer["at"], "2026-07-14T01:02:00Z", "{answer}");
    client.host = Value::Null;
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    let answer = client.ok("status", status);
    let now: chrono::DateTime<chrono::Utc> = answer["at"].as_str().unwrap().parse().unwrap();
    assert!(now >= before && now <= chrono::Utc::now(), "{answer}");
}

/// agent-tools.md §4 "Values, not files": a tool's JSON arguments reach
/// the command as values, so a call makes no file at all. With the
/// server's temp dir taken away (a plain file where it was), calls with
/// JSON arguments still succeed, and the file is untouched.
#[test]
fn json_arguments_reach_the_command_without_a_file() {
    let run = common::TestBed::running(&["runtime"]);
    let tmpdir = run.tmp.path().join("mcp-tmp");
    let Some(mut client) = Client::owner(&run.flow, &tmpdir, &run.root, &run.owner()) else {
        return;
    };
    std::fs::remove_dir(&tmpdir).unwrap();
    std::fs::write(&tmpdir, "not a directory").unwrap();
    client.ok(
        "lane-create",
        json!({"evidence": evidence("plan", "assign"), "input": common::lane_input("api", "agent-1", &[])}),
    );
    client.ok(
        "lane-start",
        json!({"lane_id": "api", "agent_id": "agent-1", "evidence": evidence("tool", "spawned")}),
    );
    drop(client);
    assert_eq!(std::fs::read(&tmpdir).unwrap(), b"not a directory");
    run.read("verify", &[]).assert_ok();
}

#[test]
fn a_cli_writer_and_the_server_are_fenced_by_the_same_lock() {
    let run = common::TestBed::running(&["runtime"]);
    let Some(mut client) = Client::owner_of(&run, "mcp-tmp") else {
        return;
    };
    let create = |lane: &str| json!({"evidence": evidence("plan", lane), "input": common::lane_input(lane, lane, &[])});
    // A writer holds the receipt lock: the server waits, then refuses as
    // the CLI does, and nothing is written.
    let lock = common::hold_receipt_lock(&run.root, &run.dir);
    let receipt = run.receipt();
    let e = client.refused("lane-create", create("a"), "coordinator_conflict");
    let input = run.file(&common::lane_input("b", "b", &[]));
    let cli = run.step("lane-create", &["--input", &input]);
    let cli_e = cli.assert_error(5, "coordinator_conflict");
    assert_eq!(e["message"], cli_e["message"]);
    assert_eq!(e["retryable"], true);
    assert_eq!(run.receipt(), receipt);
    std::fs::remove_dir_all(&lock).unwrap();
    // Both at once: every write lands once, the chain holds.
    let writers: Vec<_> = (0..3)
        .map(|i| {
            let argv = run.lane_create_argv(&format!("cli-{i}"), "c");
            run.flow
                .command(&argv)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut created = 0;
    for i in 0..3 {
        let answer = client.call("lane-create", create(&format!("mcp-{i}")));
        if answer["is_error"] == false {
            created += 1;
        } else {
            assert_eq!(
                answer["structured"]["error"], "coordinator_conflict",
                "{answer}"
            );
        }
    }
    for mut w in writers {
        if w.wait().unwrap().success() {
            created += 1;
        }
    }
    let lanes = run
        .events()
        .iter()
        .filter(|e| e["event_type"] == "lane_created")
        .count();
    assert_eq!(lanes, created);
    run.read("verify", &[]).assert_ok();
}

// ------------------------------------------------------------ framing

/// A raw JSON-RPC peer: one line out, answers read by id.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the server stopped"
        );
        serde_json::from_str(&line).unwrap()
    }
}

#[test]
fn malformed_oversized_and_wrong_typed_messages_get_errors_and_serving_goes_on() {
    let run = common::TestBed::running(&["runtime"]);
    let mut child = run
        .flow
        .command(&[
            "mcp",
            "--mode",
            "read-only",
            "--state-root",
            run.root.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut raw = Raw {
        child,
        stdin,
        stdout,
    };
    raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
    assert_eq!(raw.next()["id"], 1);
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let call = |id: u64, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "verify", "arguments": args}}).to_string()
    };
    // Not JSON; JSON but not JSON-RPC; a message over the limit.
    raw.send(b"{this is not json");
    let e = raw.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{e}"
    );
    raw.send(br#"[1, 2, 3]"#);
    assert_eq!(raw.next()["error"]["code"], -32600);
    raw.send(br#"{"jsonrpc":"1.0","id":7,"method":"tools/list"}"#);
    let e = raw.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(7), json!(-32600)),
        "{e}"
    );
    let huge = call(8, json!({"run_id": "x".repeat(5 * 1024 * 1024)}));
    raw.send(huge.as_bytes());
    let e = raw.next();
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("exceeds"));
    // Wrong-typed arguments: a tool error with the envelope.
    raw.send(call(9, json!({"run_id": 5})).as_bytes());
    let e = raw.next();
    assert_eq!(e["id"], 9);
    assert_eq!(e["result"]["isError"], true, "{e}");
    assert_eq!(e["result"]["structuredContent"]["error"], "contract_error");
    raw.send(br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"verify","arguments":"run"}}"#);
    let e = raw.next();
    assert!(
        e.get("error").is_some() || e["result"]["isError"] == true,
        "{e}"
    );
    // And it still serves.
    raw.send(call(11, json!({"run_id": run.run_id})).as_bytes());
    let e = raw.next();
    assert_eq!(e["id"], 11, "{e}");
    assert_eq!(e["result"]["structuredContent"]["operation"], "verify");
    drop(raw.stdin.take());
    let status = raw.child.wait().unwrap();
    let mut stderr = String::new();
    raw.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}: {stderr}");
}

/// After `resume` the new handle is back at the path the server was
/// started with (DEVIATIONS 94): the server goes on, and a server started
/// again with the same config (the README's) acts with it too.
#[test]
fn after_resume_the_server_acts_with_the_new_handle_it_made() {
    let run = common::TestBed::running(&["runtime"]);
    let Some(mut client) = Client::owner_of(&run, "mcp-tmp") else {
        return;
    };
    let copy = run.handle("old-copy.owner");
    std::fs::copy(run.owner(), &copy).unwrap();
    let resumed = client.ok(
        "resume",
        json!({"evidence": evidence("user_approval", "the user approved the hand-over")}),
    );
    assert_eq!(resumed["owner_epoch"], 2, "{resumed}");
    assert!(
        !run.handle("main-r1.owner").exists(),
        "the new handle keeps its temporary name"
    );
    let new_handle = run.owner();
    assert!(new_handle.exists(), "no handle at the server's path");
    let handle: Value =
        serde_json::from_str(&std::fs::read_to_string(&new_handle).unwrap()).unwrap();
    assert_eq!(handle["epoch"], 2, "{handle}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&new_handle).unwrap().permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o600);
    let token = handle["token"].as_str().unwrap();
    assert!(
        token.len() >= 32 && !resumed.to_string().contains(token),
        "a secret in the result"
    );
    client.ok(
        "lane-create",
        json!({"evidence": evidence("plan", "assign"), "input": common::lane_input("api", "agent-1", &[])}),
    );
    run.mutation(
        "lane-create",
        "old-copy.owner",
        &[
            "--evidence",
            run.evidence.to_str().unwrap(),
            "--input",
            &run.file(&common::lane_input("web", "agent-2", &[])),
        ],
    )
    .assert_error(5, "coordinator_conflict");
    // A new server with the same config acts with the live handle.
    drop(client);
    let mut again = Client::owner_of(&run, "mcp-tmp2").unwrap();
    again.ok(
        "lane-create",
        json!({"evidence": evidence("plan", "assign web"), "input": common::lane_input("web", "agent-2", &[])}),
    );
}

// ------------------------------------------------------------ the catalog

const SCHEMA_CHECK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/python/mcp_schema_check.py"
);

/// agent-tools.md §4: every owner-mode tool is called with instances
/// hypothesis-jsonschema (pinned in .ci/run's venv) generates from the
/// tool's own input schema, on a running run with a running lane; none is
/// refused for its shape (a key missing, unknown or mistyped, a pattern or
/// a length), only for what the run's state, clock or bindings say. An
/// unknown key is refused at the top and inside every JSON argument.
#[test]
fn every_owner_tool_takes_every_instance_of_its_own_schema() {
    let Some(python) = python() else { return };
    let hypothesis = Command::new(&python)
        .args(["-c", "import hypothesis_jsonschema"])
        .current_dir(std::env::temp_dir())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        hypothesis,
        "hypothesis-jsonschema is missing from {python:?}: run .ci/run (it installs hypothesis-jsonschema==0.23.1)"
    );
    let run = common::TestBed::running(&["runtime"]);
    run.running_lane("api", None);
    let tmp = run.tmp.path().join("mcp-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let spec = json!({
        "command": env!("CARGO_BIN_EXE_bluetape-flow"),
        "args": ["mcp", "--mode", "owner", "--state-root", run.root,
                 "--owner-file", run.owner()],
        "env": server_env(&run.flow, &tmp),
        "cwd": run.flow.cwd,
        "run_id": run.run_id,
        "examples": 12,
    });
    // Hypothesis keeps its caches (`.hypothesis/`) in the working
    // directory: the test's, never the checkout.
    let out = Command::new(python)
        .arg(SCHEMA_CHECK)
        .arg(spec.to_string())
        .current_dir(run.tmp.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &run.flow.home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    if let Ok(path) = std::env::var("BLUETAPE_SCHEMA_REPORT") {
        std::fs::write(path, &out.stdout).unwrap();
    }
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let owner_tools = offered(Mode::Owner).count();
    assert_eq!(report["tools"], owner_tools, "{report}");
    assert!(
        report["calls"].as_u64().unwrap() >= 8 * owner_tools as u64,
        "{report}"
    );
    assert_eq!(
        report["shape"],
        json!([]),
        "refused for their shape: {report}"
    );
    assert_eq!(report["open"], json!([]), "unknown keys taken: {report}");
    assert!(report["ok"].as_u64().unwrap() > 0, "{report}");
    // The run took what it was given and still verifies.
    run.read("verify", &[]).assert_ok();
}

/// agent-tools.md §4: the owner-mode catalog a model reads before any work
/// is within 32 KB of compact JSON (32,509 bytes for 40 tools when this
/// was written), and says no "see below" that is not there.
#[test]
fn the_owner_catalog_is_small_and_says_nothing_of_files_below() {
    let (tmp, flow) = crate::bed::flow_elsewhere();
    let root = tmp.path().join("state");
    let Some(mut client) = Client::owner(
        &flow,
        &tmp.path().join("mcp-tmp"),
        &root,
        &root.join("handles/main.owner"),
    ) else {
        return;
    };
    let tools = client.tools();
    let text = serde_json::to_string(&tools).unwrap();
    eprintln!(
        "owner-mode catalog: {} bytes, {} tools",
        text.len(),
        tools.len()
    );
    // "<": a help page's placeholder (<FILE>, <LANE_ID>) left unnamed.
    for phrase in ["below", "<", "Capability:", "In-place migration"] {
        assert!(!text.contains(phrase), "the catalog says {phrase:?}");
    }
    for tool in &tools {
        let schema = tool["inputSchema"].to_string();
        assert!(
            !schema.contains(r#"{"type":"object"}"#),
            "{}: {schema}",
            tool["name"]
        );
    }
    assert!(text.len() <= 32 * 1024, "{} bytes", text.len());
}
