//! Grows a benchmark run by calling the real CLI in-process (no process
//! start per event, so `scripts/bench.sh` can reach 100,000 events quickly):
//! heartbeats with fresh evidence each time, like real agents, spread over
//! the given lanes. Every event goes through the guarded pipeline.
//!
//!   bench_grow STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT...

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use bluetape_flow::cli::run_with;
use bluetape_flow::store::discovery::DiscoveryEnv;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: bench_grow STATE_ROOT RUN_ID OWNER_FILE TARGET_EVENTS LANE:AGENT...");
        return ExitCode::from(2);
    }
    let (root, run_id, owner) = (&args[0], &args[1], &args[2]);
    let Ok(target) = args[3].parse::<u64>() else {
        eprintln!("TARGET_EVENTS must be a number");
        return ExitCode::from(2);
    };
    let lanes: Vec<(&str, &str)> = args[4..]
        .iter()
        .filter_map(|spec| spec.split_once(':'))
        .collect();
    let env = DiscoveryEnv::from_process();
    let scratch = PathBuf::from(root).with_extension("grow");
    if std::fs::create_dir_all(&scratch).is_err() {
        eprintln!("cannot create {}", scratch.display());
        return ExitCode::from(2);
    }
    let (evidence, input) = (scratch.join("ev.json"), scratch.join("hb.json"));
    let mut sequence = 0u64;
    let mut n = 0u64;
    while sequence < target {
        let (lane, agent) = lanes[(n as usize) % lanes.len()];
        // Observations one second apart from a fixed origin; the lease ends
        // five minutes after each.
        let observed = 1_784_000_000 + n as i64;
        let at = |t: i64| {
            chrono::DateTime::from_timestamp(t, 0)
                .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default()
        };
        let ev = format!(
            "[{{\"kind\":\"log\",\"summary\":\"{lane} progress note {n}\",\"checksum\":\"{:064x}\"}}]\n",
            n
        );
        let hb = format!(
            "{{\"lane_id\":\"{lane}\",\"agent_id\":\"{agent}\",\"observed_at\":\"{}\",\"silence_lease_deadline\":\"{}\",\"reason\":\"still working\"}}\n",
            at(observed),
            at(observed + 300)
        );
        if std::fs::write(&evidence, ev).is_err() || std::fs::write(&input, hb).is_err() {
            eprintln!("cannot write scratch inputs");
            return ExitCode::from(2);
        }
        let argv: Vec<OsString> = [
            "bluetape-flow",
            "--state-root",
            root,
            "heartbeat",
            "--run-id",
            run_id,
            "--owner-file",
            owner,
            "--evidence",
            evidence.to_str().unwrap_or_default(),
            "--input",
            input.to_str().unwrap_or_default(),
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(argv, &env, &mut out, &mut err);
        if code != 0 {
            eprintln!("heartbeat {n} failed: {}", String::from_utf8_lossy(&err));
            return ExitCode::from(code);
        }
        let answer: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        sequence = answer["sequence"].as_u64().unwrap_or(u64::MAX);
        n += 1;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    println!("{sequence}");
    ExitCode::SUCCESS
}
