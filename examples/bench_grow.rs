//! Grows a benchmark run for `scripts/bench.sh`.
//!
//!   bench_grow STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT...
//!   bench_grow --reuse-evidence STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT
//!
//! The default mode calls the real CLI in-process (no process start per
//! event, so the bench can reach 100,000 events quickly): heartbeats with
//! fresh evidence each time, like real agents, spread over the given lanes.
//! Every event goes through the guarded pipeline.
//!
//! `--reuse-evidence` grows the breach-heavy series: a run as the Python
//! reference writes it when every heartbeat repeats the previous evidence
//! list with a new reason (the reference refuses only the same evidence
//! *and* the same reason; our replay records each repeat as a
//! `liveness_evidence_reused` breach, and our binary refuses to write one).
//! The first heartbeat goes through the CLI (fresh evidence E); every later
//! line is that heartbeat's `transaction_committed` with E again, sealed by
//! the library (`EventDraft::seal`: canonical JSON, checksum, chain) and
//! appended to `receipt.jsonl` as another writer would: our derived files
//! (checkpoint, tree hashes, receipt head) are not updated, so the first
//! mutation by the binary afterwards rebuilds them. One lane only.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bluetape_flow::cli::run_with;
use bluetape_flow::receipt::event::EventDraft;
use bluetape_flow::store::discovery::DiscoveryEnv;
use serde_json::{Value, json};

/// Observations one second apart from a fixed origin; the lease ends five
/// minutes after each.
const ORIGIN: i64 = 1_784_000_000;
const LEASE: i64 = 300;

fn at(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

struct Grower<'a> {
    root: &'a str,
    run_id: &'a str,
    owner: &'a str,
    env: DiscoveryEnv,
    evidence: PathBuf,
    input: PathBuf,
}

impl Grower<'_> {
    /// One heartbeat through the CLI with evidence list `ev` and reason
    /// `reason`; the receipt's sequence after it.
    fn heartbeat(&self, n: u64, lane: &str, agent: &str, ev: &str) -> Result<u64, String> {
        let observed = ORIGIN + n as i64;
        let hb = format!(
            "{{\"lane_id\":\"{lane}\",\"agent_id\":\"{agent}\",\"observed_at\":\"{}\",\"silence_lease_deadline\":\"{}\",\"reason\":\"still working\"}}\n",
            at(observed),
            at(observed + LEASE)
        );
        std::fs::write(&self.evidence, ev)
            .and_then(|()| std::fs::write(&self.input, hb))
            .map_err(|e| format!("cannot write scratch inputs: {e}"))?;
        let argv: Vec<OsString> = [
            "bluetape-flow",
            "--state-root",
            self.root,
            "heartbeat",
            "--run-id",
            self.run_id,
            "--owner-file",
            self.owner,
            "--evidence",
            self.evidence.to_str().unwrap_or_default(),
            "--input",
            self.input.to_str().unwrap_or_default(),
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(argv, &self.env, &mut out, &mut err);
        if code != 0 {
            return Err(format!(
                "heartbeat {n} failed ({code}): {}",
                String::from_utf8_lossy(&err)
            ));
        }
        let answer: Value = serde_json::from_slice(&out).unwrap_or_default();
        Ok(answer["sequence"].as_u64().unwrap_or(u64::MAX))
    }
}

fn fresh_evidence(lane: &str, n: u64) -> String {
    format!(
        "[{{\"kind\":\"log\",\"summary\":\"{lane} progress note {n}\",\"checksum\":\"{n:064x}\"}}]\n"
    )
}

/// The last line of the receipt, parsed.
fn last_event(receipt: &Path) -> Result<serde_json::Map<String, Value>, String> {
    let bytes = std::fs::read(receipt).map_err(|e| format!("cannot read the receipt: {e}"))?;
    let line = bytes
        .strip_suffix(b"\n")
        .unwrap_or(&bytes)
        .rsplit(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    match serde_json::from_slice(line) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err("the receipt's last line is not an object".into()),
    }
}

fn text(event: &serde_json::Map<String, Value>, key: &str) -> Result<String, String> {
    event
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("the last event has no {key}"))
}

/// Appends heartbeat lines repeating the last heartbeat's evidence until the
/// receipt holds `target` events; the sequence reached.
fn grow_reused(receipt: &Path, target: u64, first_n: u64) -> Result<u64, String> {
    let template = last_event(receipt)?;
    if template.get("event_type").and_then(Value::as_str) != Some("transaction_committed") {
        return Err("the last event is not a heartbeat transaction".into());
    }
    let metadata = template.get("metadata").cloned().unwrap_or(Value::Null);
    let intents = metadata["intents"].as_array().cloned().unwrap_or_default();
    let [observed_intent, renewed_intent] = intents.as_slice() else {
        return Err("the last event is not a two-intent heartbeat".into());
    };
    let mut sequence = template
        .get("sequence")
        .and_then(Value::as_u64)
        .ok_or("the last event has no sequence")?;
    let mut previous = text(&template, "checksum")?;
    let (run_id, owner_token) = (text(&template, "run_id")?, text(&template, "owner_token")?);
    let manifest_hash = text(&template, "manifest_hash")?;
    let file = OpenOptions::new()
        .append(true)
        .open(receipt)
        .map_err(|e| format!("cannot open the receipt: {e}"))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut n = first_n;
    while sequence < target {
        let stamp = at(ORIGIN + n as i64);
        let lease = at(ORIGIN + n as i64 + LEASE);
        let mut observed = observed_intent.clone();
        observed["timestamp"] = json!(stamp);
        let mut renewed = renewed_intent.clone();
        renewed["timestamp"] = json!(stamp);
        // A new reason each time: the reference refuses the same evidence
        // only with the same reason.
        renewed["reason"] = json!(format!("still working, step {n}"));
        renewed["metadata"]["silence_lease_deadline"] = json!(lease);
        let mut meta = metadata.clone();
        meta["intents"] = json!([observed, renewed]);
        sequence += 1;
        let sealed = EventDraft {
            run_id: run_id.clone(),
            lane_id: None,
            agent_id: None,
            sequence,
            event_type: bluetape_flow::receipt::vocab::EventType::TransactionCommitted,
            from_state: None,
            to_state: None,
            timestamp: stamp,
            owner_token: owner_token.clone(),
            manifest_hash: manifest_hash.clone(),
            previous_checksum: previous,
            evidence_refs: json!([]),
            reason: None,
            metadata: Some(meta),
        }
        .seal();
        out.write_all(&sealed.line)
            .map_err(|e| format!("cannot append: {e}"))?;
        previous = sealed.checksum.into();
        n += 1;
    }
    let file = out
        .into_inner()
        .map_err(|e| format!("cannot append: {e}"))?;
    file.sync_all().map_err(|e| format!("cannot fsync: {e}"))?;
    Ok(sequence)
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let reuse = args.first().is_some_and(|a| a == "--reuse-evidence");
    if reuse {
        args.remove(0);
    }
    if args.len() < 5 || (reuse && args.len() != 5) {
        eprintln!("usage: bench_grow STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT...");
        eprintln!(
            "       bench_grow --reuse-evidence STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT"
        );
        return ExitCode::from(2);
    }
    let Ok(target) = args[3].parse::<u64>() else {
        eprintln!("TARGET_EVENTS must be a number");
        return ExitCode::from(2);
    };
    let lanes: Vec<(&str, &str)> = args[4..]
        .iter()
        .filter_map(|spec| spec.split_once(':'))
        .collect();
    if lanes.is_empty() {
        eprintln!("LANE:AGENT expected");
        return ExitCode::from(2);
    }
    let scratch = PathBuf::from(&args[0]).with_extension("grow");
    if std::fs::create_dir_all(&scratch).is_err() {
        eprintln!("cannot create {}", scratch.display());
        return ExitCode::from(2);
    }
    let grower = Grower {
        root: &args[0],
        run_id: &args[1],
        owner: &args[2],
        env: DiscoveryEnv::from_process(),
        evidence: scratch.join("ev.json"),
        input: scratch.join("hb.json"),
    };
    let result = if reuse {
        let (lane, agent) = lanes[0];
        let receipt = Path::new(&args[0])
            .join("runs")
            .join(&args[1])
            .join("receipt.jsonl");
        grower
            .heartbeat(0, lane, agent, &fresh_evidence(lane, 0))
            .and_then(|sequence| {
                if sequence >= target {
                    Ok(sequence)
                } else {
                    grow_reused(&receipt, target, 1)
                }
            })
    } else {
        let mut sequence = 0u64;
        let mut n = 0u64;
        let mut result = Ok(0);
        while sequence < target {
            let (lane, agent) = lanes[(n as usize) % lanes.len()];
            match grower.heartbeat(n, lane, agent, &fresh_evidence(lane, n)) {
                Ok(s) => sequence = s,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            n += 1;
            result = Ok(sequence);
        }
        result
    };
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok(sequence) => {
            println!("{sequence}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
