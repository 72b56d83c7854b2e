//! `otel-export` (contracts/otel.md) through the binary. The receiver is a
//! real one nobody here wrote: Arize Phoenix (`phoenix serve`, PyPI
//! `arize-phoenix`), read back with Phoenix's own client; the `--out` file
//! is parsed strictly with the OpenTelemetry protos (PyPI
//! `opentelemetry-proto`). Both live in the venv `.ci/run` makes for them
//! (exported as BLUETAPE_CI_OTEL_PYTHON; tests/python/otel_check.py); the
//! tests that need it fail under CI=true without it and say loudly that
//! they did not run otherwise. Transport details (headers, environment
//! variables, refusals) are checked against a minimal HTTP receiver in the
//! test that records what it was sent.

use crate::bed::{self as common, Flow, T0, TestBed};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/otel_check.py");

/// The otel venv's python (Phoenix, its client, the protos), or None
/// outside CI.
fn python() -> Option<PathBuf> {
    let why = "the otel venv is missing: run .ci/run (it installs arize-phoenix, arize-phoenix-client and opentelemetry-proto into ~/.cache/bluetape-ci/otel-venv and exports BLUETAPE_CI_OTEL_PYTHON)";
    crate::bed::ci_python(
        "BLUETAPE_CI_OTEL_PYTHON",
        "otel-venv",
        "phoenix.client, opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        why,
    )
}

/// Run tests/python/otel_check.py; its JSON answer.
fn check(python: &Path, args: &[&str]) -> Value {
    let out = Command::new(python).arg(CHECK).args(args).output().unwrap();
    crate::bed::assert_ran(&out, format!("otel_check.py {args:?}"));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `phoenix serve` of our own: its database in a temp dir, on free
/// ports; killed (by its own pid) when dropped.
struct Phoenix {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

impl Phoenix {
    fn start(python: &Path) -> Phoenix {
        let dir = tempfile::tempdir().unwrap();
        let (http, grpc) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(python.with_file_name("phoenix"))
            .arg("serve")
            .env_clear()
            .env("HOME", dir.path())
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", dir.path())
            .env("PHOENIX_WORKING_DIR", dir.path().join("phoenix"))
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", http.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut phoenix = Phoenix {
            child,
            url: format!("http://127.0.0.1:{http}"),
            _dir: dir,
        };
        // Ready when it answers its health check; a generous bound for a
        // loaded machine (it takes tens of seconds to start).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while http_status(http, "/healthz") != Some(200) {
            let log = || std::fs::read_to_string(phoenix._dir.path().join("phoenix.log"));
            if let Some(status) = phoenix.child.try_wait().unwrap() {
                panic!("phoenix serve exited ({status}): {:?}", log());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "phoenix serve did not start: {:?}",
                log()
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        phoenix
    }

    fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.url)
    }
}

/// A run driven through our binary: the commands of the reference scenario
/// 04-stall-replace (two lanes: `build` starts, stalls, is probed,
/// interrupted and replaced by `build-2`, which completes; the run
/// completes), with their inputs.
struct Run {
    _tmp: tempfile::TempDir,
    flow: Flow,
    root: PathBuf,
    run_id: String,
    work: PathBuf,
}

impl Run {
    fn stall_replace() -> Run {
        let scenario = common::fixtures_dir().join("04-stall-replace");
        let recorded = common::first_run_id(&scenario.join("state"));
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("src/runtime")).unwrap();
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let flow = Flow::new(tmp.path());
        let mut run_id = String::new();
        for step in common::recorded_steps(&scenario) {
            let argv = step["argv"].as_array().unwrap();
            let command = argv[2].as_str().unwrap();
            if step["kind"] != "cli"
                || [
                    "verify",
                    "resume-check",
                    "completion-check",
                    "receipt-diagnose",
                    "liveness-check",
                ]
                .contains(&command)
            {
                continue;
            }
            let argv: Vec<String> = common::expand_argv(argv, &root, &scenario)
                .into_iter()
                .map(|a| a.replace("{REPO}", repo.to_str().unwrap()))
                .map(|a| if a == recorded { run_id.clone() } else { a })
                .collect();
            let out = flow.run(&argv).assert_ok();
            if command == "init" {
                run_id = out["run_id"].as_str().unwrap().to_string();
            }
        }
        Run {
            _tmp: tmp,
            flow,
            root,
            run_id,
            work,
        }
    }

    fn export(&self, extra: &[&str]) -> common::Output {
        self.export_env(extra, &[])
    }

    fn export_env(&self, extra: &[&str], envs: &[(&str, &str)]) -> common::Output {
        let argv = common::read_argv(&self.root, "otel-export", &self.run_id, extra);
        self.flow.run_env(&argv, envs)
    }

    fn events(&self) -> Vec<Value> {
        common::receipt_events(&self.root, &self.run_id)
    }
}

fn attr<'s>(span: &'s Value, key: &str) -> &'s Value {
    &span["attributes"][key]
}

/// The Done-when of contracts/otel.md: one invoke_workflow span, one
/// invoke_agent span per lane under it, the interrupted lane in ERROR,
/// every receipt event a span event, and a second export adds no span.
#[test]
fn phoenix_reads_back_one_trace_of_the_run_and_a_second_export_adds_no_span() {
    let Some(python) = python() else { return };
    let run = Run::stall_replace();
    let events = run.events();
    assert_eq!(events.len(), 19);
    let phoenix = Phoenix::start(&python);
    let before = common::snapshot(&run.root);
    let first = run
        .export(&["--endpoint", &phoenix.traces_url()])
        .assert_ok();
    assert_eq!(first["spans"], 3, "{first}");
    assert_eq!(first["span_events"], 19);
    assert_eq!(first["sequence"], 19);
    assert_eq!(first["endpoint"], json!(phoenix.traces_url()));
    let trace = first["trace_id"].as_str().unwrap().to_string();
    let spans = check(&python, &["spans", &phoenix.url, &trace, "3"]);
    let spans = spans.as_array().unwrap();
    assert_eq!(spans.len(), 3, "{spans:?}");
    let of = |op: &str| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| attr(s, "gen_ai.operation.name") == op)
            .collect()
    };
    let roots = of("invoke_workflow");
    assert_eq!(roots.len(), 1, "{spans:?}");
    let root = roots[0];
    assert_eq!(root["parent_id"], Value::Null);
    assert_eq!(root["name"], "invoke_workflow A");
    assert_eq!(attr(root, "bluetape.run.id"), &json!(run.run_id));
    assert_eq!(attr(root, "bluetape.run.state"), "completed");
    assert_eq!(
        attr(root, "bluetape.receipt.head_checksum"),
        &events[18]["checksum"]
    );
    assert_eq!(root["status_code"], "UNSET");
    let agents = of("invoke_agent");
    assert_eq!(agents.len(), 2, "one invoke_agent span per lane: {spans:?}");
    let lane = |id: &str| {
        *agents
            .iter()
            .find(|s| attr(s, "bluetape.lane.id") == id)
            .unwrap_or_else(|| panic!("no span for lane {id}: {agents:?}"))
    };
    for span in &agents {
        assert_eq!(span["parent_id"], root["span_id"], "{span}");
    }
    let build = lane("build");
    assert_eq!(attr(build, "gen_ai.agent.id"), "agent-1");
    assert_eq!(attr(build, "bluetape.lane.write_scope"), &json!(["src"]));
    assert_eq!(build["status_code"], "ERROR", "the interrupted lane");
    assert!(
        crate::bed::str_field(build, "status_message").starts_with("interrupted at sequence 11"),
        "{build}"
    );
    let replacement = lane("build-2");
    assert_eq!(attr(replacement, "gen_ai.agent.id"), "agent-2");
    assert_eq!(replacement["status_code"], "UNSET");
    assert_eq!(
        attr(replacement, "bluetape.lane.parent_lane_id"),
        "build",
        "{replacement}"
    );
    // Every receipt event is a span event, once, with its checksum.
    let mut seen: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for span in spans {
        for event in span["events"].as_array().unwrap() {
            let sequence = event["attributes"]["bluetape.event.sequence"]
                .as_u64()
                .unwrap();
            let checksum = event["attributes"]["bluetape.event.checksum"]
                .as_str()
                .unwrap()
                .to_string();
            let previous =
                seen.insert(sequence, (event["name"].as_str().unwrap().into(), checksum));
            assert!(previous.is_none(), "sequence {sequence} twice");
        }
    }
    assert_eq!(seen.len(), events.len());
    for event in &events {
        let sequence = event["sequence"].as_u64().unwrap();
        assert_eq!(
            seen[&sequence],
            (
                event["event_type"].as_str().unwrap().to_string(),
                event["checksum"].as_str().unwrap().to_string()
            )
        );
    }
    // The stall, probe and interrupt are events on the stalled lane's span.
    let names: BTreeSet<&str> = crate::bed::string_column(&build["events"], "name")
        .into_iter()
        .collect();
    for name in ["stall_suspected", "probe_sent", "agent_interrupted"] {
        assert!(names.contains(name), "{name} on build: {names:?}");
    }

    // Again: the same ids, so Phoenix keeps what it has. Another run's
    // trace sent after it marks when Phoenix has taken the second export
    // in (it stores in the order it receives).
    let second = run
        .export(&["--endpoint", &phoenix.traces_url()])
        .assert_ok();
    assert_eq!(second["trace_id"], first["trace_id"]);
    let marker = TestBed::running(&["runtime"]);
    let marked = marker
        .read("otel-export", &["--endpoint", &phoenix.traces_url()])
        .assert_ok();
    let marker_trace = marked["trace_id"].as_str().unwrap();
    assert_ne!(marker_trace, trace);
    let count = marked["spans"].as_u64().unwrap().to_string();
    let arrived = check(&python, &["spans", &phoenix.url, marker_trace, &count]);
    assert_eq!(arrived.as_array().unwrap().len().to_string(), count);
    let again = check(&python, &["spans", &phoenix.url, &trace, "0"]);
    let ids = |spans: &[Value]| -> BTreeSet<String> {
        spans
            .iter()
            .map(|s| s["span_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(again.as_array().unwrap().len(), 3, "no new span: {again}");
    assert_eq!(ids(again.as_array().unwrap()), ids(spans));
    assert_eq!(
        before,
        common::snapshot(&run.root),
        "the state root changed"
    );
}

/// `--out` writes OTLP/JSON that the official protos parse strictly, with
/// hex ids, the same spans as the endpoint gets, and the replacement's
/// link to the lane it replaced.
#[test]
fn the_out_file_parses_strictly_with_the_opentelemetry_protos() {
    let Some(python) = python() else { return };
    let run = Run::stall_replace();
    let before = common::snapshot(&run.root);
    let file = run.work.join("run.otlp.json");
    let out = run.export(&["--out", file.to_str().unwrap()]).assert_ok();
    assert_eq!(out["format"], "otlp-json");
    assert_eq!(out["path"], json!(file.to_string_lossy()));
    let parsed = check(&python, &["parse", file.to_str().unwrap()]);
    let spans = parsed.as_array().unwrap();
    assert_eq!(spans.len(), 3);
    let trace = out["trace_id"].as_str().unwrap();
    assert!(spans.iter().all(|s| s["trace_id"] == trace));
    let by_lane = |id: &str| {
        spans
            .iter()
            .find(|s| s["attributes"]["bluetape.lane.id"]["stringValue"] == id)
            .unwrap()
    };
    let build = by_lane("build");
    let replacement = by_lane("build-2");
    assert_eq!(replacement["links"], json!([build["span_id"]]));
    assert_eq!(build["status_code"], 2, "STATUS_CODE_ERROR");
    assert_eq!(build["kind"], 1, "SPAN_KIND_INTERNAL");
    let events: usize = spans
        .iter()
        .map(|s| s["events"].as_array().unwrap().len())
        .sum();
    assert_eq!(events, 19);
    // The same receipt gives the same bytes.
    let again = run.work.join("again.otlp.json");
    run.export(&["--out", again.to_str().unwrap()]).assert_ok();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );
    assert_eq!(before, common::snapshot(&run.root));
}

// ------------------------------------------------------ a receiver of ours

/// One request a [`Receiver`] was sent.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn request(&self) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest::decode(&self.body[..]).unwrap()
    }
}

/// A minimal HTTP/1.1 server on a free port that answers every request
/// with `status` and records it. The export returns only after the
/// answers, so what it holds then is everything that was sent.
struct Receiver {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(status: u16) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let store = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let store = store.clone();
                std::thread::spawn(move || serve(stream, status, &store));
            }
        });
        Receiver { port, received }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, status: u16, store: &Mutex<Vec<Received>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        store.lock().unwrap().push(Received {
            path,
            headers,
            body,
        });
        let _ = write!(
            writer,
            "HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
        );
    }
}

/// The refusal of a receiver: exit 5 `export_failed`, its `retryable`
/// depending on why (the bed's `assert_error` knows only the reference's
/// exit-5 errors, all retryable).
fn export_failed(out: &common::Output) -> Value {
    assert_eq!(out.code, 5, "{out:?}");
    let e = out.error();
    assert_eq!(e["error"], "export_failed", "{out:?}");
    assert_eq!(e["ok"], false);
    assert!(e.get("next_command").is_none(), "{e}");
    e
}

/// A small run of our binary: two lanes, one of them interrupted.
fn small_run() -> TestBed {
    let bed = TestBed::running(&["runtime"]);
    bed.running_lane("a", None);
    bed.running_lane("b", None);
    bed
}

fn export(bed: &TestBed, extra: &[&str], envs: &[(&str, &str)]) -> common::Output {
    let argv = common::read_argv(&bed.root, "otel-export", &bed.run_id, extra);
    bed.flow.run_env(&argv, envs)
}

/// What the receiver gets: OTLP/HTTP protobuf, POSTed with its content
/// type; the spans decode with the official protos.
#[test]
fn the_endpoint_gets_otlp_protobuf_with_the_run_as_one_trace() {
    let bed = small_run();
    let receiver = Receiver::start(200);
    let out = export(&bed, &["--endpoint", &receiver.url("/v1/traces")], &[]).assert_ok();
    let received = receiver.received();
    assert_eq!(received.len() as u64, out["batches"].as_u64().unwrap());
    let first = &received[0];
    assert_eq!(first.path, "/v1/traces");
    assert_eq!(first.header("content-type"), Some("application/x-protobuf"));
    let spans: Vec<_> = received
        .iter()
        .flat_map(|r| r.request().resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    assert_eq!(spans.len(), 3);
    let trace = hex::decode(out["trace_id"].as_str().unwrap()).unwrap();
    assert!(
        spans
            .iter()
            .all(|s| s.trace_id == trace && s.span_id.len() == 8)
    );
    let events: usize = spans.iter().map(|s| s.events.len()).sum();
    assert_eq!(events, bed.receipt().lines().count());
    assert_eq!(out["rejected_spans"], 0);
    assert_eq!(out["headers"], json!([]));
}

/// The SDKs' order: `--endpoint`, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
/// as given, else OTEL_EXPORTER_OTLP_ENDPOINT plus `/v1/traces`; `--out`
/// ignores them all; no receiver at all is a contract error.
#[test]
fn the_endpoint_comes_from_the_flag_then_the_sdk_variables() {
    let bed = small_run();
    let (flag, traces, base) = (
        Receiver::start(200),
        Receiver::start(200),
        Receiver::start(200),
    );
    let traces_url = traces.url("/custom/path");
    let base_url = base.url("/otlp");
    let both = [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces_url.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", base_url.as_str()),
    ];
    let out = export(&bed, &["--endpoint", &flag.url("/v1/traces")], &both).assert_ok();
    assert_eq!(out["endpoint_source"], "--endpoint");
    assert_eq!(flag.received().len(), 1);
    assert!(traces.received().is_empty() && base.received().is_empty());

    let out = export(&bed, &[], &both).assert_ok();
    assert_eq!(out["endpoint_source"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    assert_eq!(out["endpoint"], json!(traces_url));
    assert_eq!(traces.received()[0].path, "/custom/path", "used as given");
    assert!(base.received().is_empty());

    let out = export(
        &bed,
        &[],
        &[both[1], ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")],
    )
    .assert_ok();
    assert_eq!(out["endpoint_source"], "OTEL_EXPORTER_OTLP_ENDPOINT");
    assert_eq!(base.received()[0].path, "/otlp/v1/traces");
    let slash = base.url("/");
    export(
        &bed,
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", slash.as_str())],
    )
    .assert_ok();
    assert_eq!(base.received()[1].path, "/v1/traces");

    let file = bed.work.join("t.json");
    let out = export(&bed, &["--out", file.to_str().unwrap()], &both).assert_ok();
    assert_eq!(out["format"], "otlp-json");
    assert_eq!(traces.received().len(), 1, "--out sends nothing");

    let before = bed.snapshot();
    let e = export(&bed, &[], &[]).assert_error(2, "contract_error");
    assert!(
        crate::bed::str_field(&e, "message").contains("--endpoint URL or --out FILE"),
        "{e}"
    );
    for protocol in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        let e = export(&bed, &[], &[both[0], (protocol, "grpc")]).assert_error(2, "contract_error");
        assert!(
            crate::bed::str_field(&e, "message").contains("only http/protobuf"),
            "{e}"
        );
    }
    let e = export(
        &bed,
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")],
    )
    .assert_error(2, "contract_error");
    assert!(
        e["message"].as_str().unwrap().contains("absolute http"),
        "{e}"
    );
    assert_eq!(traces.received().len(), 1);
    assert_eq!(before, bed.snapshot());
}

/// Header values reach the receiver and nothing else: not stdout, not
/// stderr, not the refusal of a malformed one.
#[test]
fn header_values_are_sent_and_never_echoed() {
    let bed = small_run();
    let secret = "s3cr3t-token-VALUE";
    let env_secret = "env-secret-VALUE";
    for status in [200, 401] {
        let receiver = Receiver::start(status);
        let header = format!("Authorization=Bearer {secret}");
        let env_list = format!("x-api-key={}", env_secret.replace('-', "%2D"));
        let out = export(
            &bed,
            &[
                "--endpoint",
                &receiver.url("/v1/traces"),
                "--header",
                &header,
            ],
            &[("OTEL_EXPORTER_OTLP_HEADERS", env_list.as_str())],
        );
        for text in [&out.stdout, &out.stderr] {
            assert!(
                !text.contains(secret) && !text.contains(env_secret),
                "{out:?}"
            );
        }
        let got = &receiver.received()[0];
        assert_eq!(
            got.header("authorization"),
            Some(format!("Bearer {secret}").as_str())
        );
        assert_eq!(got.header("x-api-key"), Some(env_secret));
        if status == 200 {
            assert_eq!(
                out.assert_ok()["headers"],
                json!(["authorization", "x-api-key"])
            );
        } else {
            let e = export_failed(&out);
            assert_eq!(e["retryable"], false);
            assert!(e["message"].as_str().unwrap().contains("HTTP 401"), "{e}");
        }
    }
    let receiver = Receiver::start(200);
    for bad in [
        format!("x-key={secret}\u{7f}"),
        format!("bad name={secret}"),
        secret.to_string(),
    ] {
        let out = export(
            &bed,
            &["--endpoint", &receiver.url("/"), "--header", &bad],
            &[],
        );
        let e = out.assert_error(2, "contract_error");
        assert!(
            !out.stderr.contains(secret) && !out.stdout.contains(secret),
            "{e}"
        );
    }
    assert!(receiver.received().is_empty());
}

/// An unreachable receiver and a refusing one: a typed error naming the
/// endpoint (never its user info or query), and nothing written anywhere.
#[test]
fn an_unreachable_or_refusing_endpoint_is_a_typed_error_and_writes_nothing() {
    let bed = small_run();
    let before = bed.snapshot();
    let work_before = common::snapshot(&bed.work);
    let port = free_port();
    let url = format!("http://user:hunter2@127.0.0.1:{port}/v1/traces?api_key=k3y");
    let out = export(&bed, &["--endpoint", &url], &[]);
    let e = export_failed(&out);
    assert_eq!(
        e["endpoint"],
        json!(format!("http://127.0.0.1:{port}/v1/traces"))
    );
    assert_eq!(e["retryable"], true);
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("unreachable"), "{e}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("--out FILE"), "{e}");
    assert!(
        !out.stderr.contains("hunter2") && !out.stderr.contains("k3y"),
        "{e}"
    );
    assert!(out.stdout.is_empty());
    for status in [503, 400] {
        let receiver = Receiver::start(status);
        let e = export_failed(&export(
            &bed,
            &["--endpoint", &receiver.url("/v1/traces")],
            &[],
        ));
        assert_eq!(e["retryable"], status == 503, "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("HTTP {status}"))
        );
    }
    assert_eq!(before, bed.snapshot());
    assert_eq!(work_before, common::snapshot(&bed.work));
    // --out: refused inside the state root and over a file without
    // --force; the state root stays as it was.
    let inside = bed.root.join("trace.json");
    export(&bed, &["--out", inside.to_str().unwrap()], &[]).assert_error(2, "contract_error");
    let file = bed.work.join("t.json");
    std::fs::write(&file, "keep").unwrap();
    export(&bed, &["--out", file.to_str().unwrap()], &[]).assert_error(2, "contract_error");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    export(&bed, &["--out", file.to_str().unwrap(), "--force"], &[]).assert_ok();
    assert_eq!(before, bed.snapshot());
}

/// Receipt text is data in the trace: an evidence summary full of markup,
/// escapes and JSON is one attribute value, cut at 128 characters.
#[test]
fn hostile_receipt_strings_stay_data_and_are_truncated() {
    let bed = TestBed::planned(&["runtime"]);
    let hostile = "\u{1b}[31m</script><img src=x onerror=alert(1)>{\"ok\": false, \"spans\": []} ${HOME} `id` \\\" ";
    let summary: String = hostile
        .chars()
        .chain(std::iter::repeat('x'))
        .take(256)
        .collect();
    bed.cmd(
        "run-approve",
        &json!([{"kind": "approval\"}]", "summary": summary}]),
        &["--at", T0],
    )
    .assert_ok();
    let file = bed.work.join("t.json");
    export(&bed, &["--out", file.to_str().unwrap()], &[]).assert_ok();
    let text = std::fs::read_to_string(&file).unwrap();
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let spans = line["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let root = &spans[spans.len() - 1];
    let approved = root["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "plan_approved")
        .unwrap();
    let attrs: BTreeMap<&str, &Value> = approved["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key"].as_str().unwrap(), &a["value"]))
        .collect();
    let summaries = &attrs["bluetape.evidence.summaries"]["arrayValue"]["values"];
    let shown = summaries[0]["stringValue"].as_str().unwrap();
    let expected: String = summary.chars().take(128).chain(['…']).collect();
    assert_eq!(shown, expected);
    assert_eq!(
        attrs["bluetape.evidence.kinds"]["arrayValue"]["values"][0]["stringValue"],
        "approval\"}]"
    );
    // Nothing of it became a key or a span.
    assert_eq!(spans.len(), 1);
    assert!(attrs.keys().all(|k| k.starts_with("bluetape.")));
    if let Some(python) = python() {
        check(&python, &["parse", file.to_str().unwrap()]);
    }
}

/// A Phase 1 run has no lanes to trace: exit 7, nothing sent.
#[test]
fn a_phase1_run_is_unsupported() {
    let bed = common::Phase1Bed::new();
    let receiver = Receiver::start(200);
    let out = bed.read("otel-export", &["--endpoint", &receiver.url("/v1/traces")]);
    out.assert_error(7, "unsupported_by_run_manifest");
    assert!(receiver.received().is_empty());
}
