//! cli-conventions §5's helpful defaults (DEVIATIONS 91-94), each driven
//! through the binary: bare invocation, `init`'s `.gitignore`, progress on
//! a terminal's stderr only, tables on a terminal for `doctor` and
//! `bundle-verify`, `status`'s next commands uncut, `log --format json`,
//! the MCP handle after `resume` (in `mcp.rs`) and the README's auditor
//! flow. Terminals are real ptys (Python's `pty` module).

use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

use crate::bed::{Flow, Output, init_argv, snapshots};
use crate::real_cause::Bed;

/// Run the binary with stdout and/or stderr on a pty (the other stream,
/// and stdin, piped or closed); returns (exit, stdout, stderr) where a pty
/// stream is what the terminal received.
fn on_pty(
    flow: &Flow,
    args: &[&str],
    stdout_tty: bool,
    stderr_tty: bool,
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    const SCRIPT: &str = r#"
import json, os, pty, select, subprocess, sys
out_tty, err_tty = sys.argv[1] == "1", sys.argv[2] == "1"
master, slave = pty.openpty()
p = subprocess.Popen(sys.argv[3:], stdin=subprocess.DEVNULL,
    stdout=slave if out_tty else subprocess.PIPE,
    stderr=slave if err_tty else subprocess.PIPE)
os.close(slave)
term = b""
while True:
    try:
        data = os.read(master, 65536)
    except OSError:
        break
    if not data:
        break
    term += data
piped_out = b"" if out_tty else p.stdout.read()
piped_err = b"" if err_tty else p.stderr.read()
p.wait()
t = term.decode("utf-8", "replace").replace("\r\n", "\n")
print(json.dumps({"code": p.returncode,
    "stdout": t if out_tty else piped_out.decode(),
    "stderr": t if err_tty else piped_err.decode()}))
"#;
    let binary = flow.command(args);
    let mut cmd = Command::new("python3");
    cmd.env_clear();
    for (k, v) in binary.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    // A terminal that draws (indicatif draws nothing without TERM).
    cmd.env("TERM", "xterm-256color");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.current_dir(binary.get_current_dir().unwrap())
        .arg("-c")
        .arg(SCRIPT)
        .arg(if stdout_tty { "1" } else { "0" })
        .arg(if stderr_tty { "1" } else { "0" })
        .arg(binary.get_program())
        .args(binary.get_args());
    let out = cmd.output().expect("python3 runs the pty helper");
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["code"].as_i64().unwrap() as i32,
        v["stdout"].as_str().unwrap().to_string(),
        v["stderr"].as_str().unwrap().to_string(),
    )
}

#[test]
fn bare_invocation_prints_usage_and_the_command_list() {
    let tmp = tempfile::tempdir().unwrap();
    let flow = Flow::new(tmp.path());
    let out = flow.run::<&str>(&[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("Usage: bluetape-flow"), "{out:?}");
    assert!(out.stderr.contains("Commands:"), "{out:?}");
    for command in ["init", "lane-reassign", "bundle-verify", "status", "doctor"] {
        assert!(
            out.stderr.contains(&format!("\n  {command} ")),
            "{command} not listed: {}",
            out.stderr
        );
    }
    assert!(serde_json::from_str::<Value>(&out.stderr).is_err(), "JSON");
    // Arguments without a command stay the reference's JSON error.
    let out = flow.run(&["--state-root", "x"]);
    assert_eq!(out.code, 2);
    assert_eq!(out.error()["error"], "contract_error");
}

#[test]
fn init_makes_a_new_state_root_ignored_by_git() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let flow = Flow::new(&base);
    let repo = base.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&repo)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("src/lib.rs"), "").unwrap();
    let root = repo.join(".bluetape");
    let owner = root.join("handles/main.owner");
    flow.run(&init_argv(&root, "A", &repo, &owner, &["src"]))
        .assert_ok();
    let ignore = root.join(".gitignore");
    let text = std::fs::read_to_string(&ignore).unwrap();
    assert!(text.lines().any(|l| l == "*"), "{text}");
    // `git add .` would take the source, nothing of the state root.
    assert_eq!(git(&["add", "--dry-run", "-A"]), "add 'src/lib.rs'\n");
    // It is not litter, and a second init leaves it as it is.
    let doctor = flow
        .run(&["--state-root", root.to_str().unwrap(), "doctor"])
        .assert_ok();
    assert_eq!(doctor["count"], 0, "{doctor}");
    std::fs::write(&ignore, "*\n# kept\n").unwrap();
    flow.run(&init_argv(
        &root,
        "A",
        &repo,
        &root.join("handles/b.owner"),
        &["src"],
    ))
    .assert_ok();
    assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "*\n# kept\n");
    // A state root made before (by the reference, or an older version)
    // is not given one.
    std::fs::remove_file(&ignore).unwrap();
    flow.run(&init_argv(
        &root,
        "A",
        &repo,
        &root.join("handles/c.owner"),
        &["src"],
    ))
    .assert_ok();
    assert!(!ignore.exists());
}

/// The long-read commands draw a bar on a terminal's stderr (after the
/// delay, here 0), nothing when it is piped, nothing before the delay; the
/// answer on stdout is the same JSON.
#[test]
fn progress_is_drawn_only_on_a_terminal_stderr() {
    let bed = Bed::new();
    let root = bed.root.to_str().unwrap();
    let tar = bed.base.join("run.tar");
    let tar = tar.to_str().unwrap();
    let run = bed.run.as_str();
    let export = [
        "--state-root",
        root,
        "bundle-export",
        "--run-id",
        run,
        "--out",
        tar,
    ];
    let read = |command| vec!["--state-root", root, command, "--run-id", run];
    let calls: Vec<(&str, Vec<&str>)> = vec![
        ("verify", read("verify")),
        ("receipt-diagnose", read("receipt-diagnose")),
        ("rebuild", read("rebuild")),
        ("log", read("log")),
        ("bundle-export", export.to_vec()),
        ("bundle-verify", vec!["bundle-verify", tar]),
    ];
    let now = [("BLUETAPE_PROGRESS_AFTER_MS", "0")];
    let later = [("BLUETAPE_PROGRESS_AFTER_MS", "600000")];
    // On a terminal stderr, `args` succeeds and draws nothing.
    let draws_nothing = |args: &[&str], envs: &[(&str, &str)]| {
        let (code, _, term) = on_pty(&bed.flow, args, false, true, envs);
        assert_eq!(code, 0, "{args:?}");
        assert!(term.is_empty(), "{args:?}: {term:?}");
    };
    for (name, args) in &calls {
        if *name == "bundle-export" {
            let _ = std::fs::remove_file(tar);
        }
        let (code, stdout, term) = on_pty(&bed.flow, args, false, true, &now);
        assert_eq!(code, 0, "{name}: {stdout} {term}");
        assert!(
            term.contains(&format!("{name} ")) && term.contains('█') && term.contains("B/"),
            "{name}: no bar on the terminal: {term:?}"
        );
        // The bar is cleared at the end (erase line).
        assert!(term.contains("\u{1b}[2K"), "{name}: {term:?}");
        let first = stdout.lines().next().unwrap_or_default();
        assert!(
            serde_json::from_str::<Value>(first).is_ok(),
            "{name}: {stdout}"
        );
        // Piped stderr: nothing, whatever the delay.
        if *name == "bundle-export" {
            std::fs::remove_file(tar).unwrap();
        }
        let out = bed.flow.run_env(args, &now);
        assert_eq!(out.code, 0, "{name}: {out:?}");
        assert!(out.stderr.is_empty(), "{name}: {out:?}");
        // A read shorter than the delay draws nothing.
        if *name == "bundle-export" {
            std::fs::remove_file(tar).unwrap();
        }
        draws_nothing(args, &later);
    }
    // A command that is not a long read never draws one.
    draws_nothing(&read("resume-check"), &now);
    // `log` with its rows on the same terminal draws no bar between them.
    let (_, screen, _) = on_pty(&bed.flow, &read("log"), true, true, &now);
    assert!(!screen.contains('█'), "{screen:?}");
    assert!(screen.contains("SEQ"), "{screen:?}");
}

/// `doctor` and `bundle-verify`: a table when stdout is a terminal (JSON
/// when piped), `--format` overriding either way; the tables' text is
/// snapshotted.
#[test]
fn doctor_and_bundle_verify_print_tables_on_a_terminal() {
    let bed = Bed::new();
    let root = bed.root.to_str().unwrap();
    // A temp file a killed writer left an hour ago.
    let run_dir = bed.root.join("runs").join(&bed.run);
    let litter = run_dir.join(".run.json.0badcafe.tmp");
    let file = std::fs::File::create(&litter).unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    drop(file);
    let tar = bed.base.join("run.tar");
    bed.flow
        .run(&[
            "--state-root",
            root,
            "bundle-export",
            "--run-id",
            &bed.run,
            "--out",
            tar.to_str().unwrap(),
        ])
        .assert_ok();
    let doctor = ["--state-root", root, "doctor"];
    let verify = [
        "bundle-verify",
        tar.to_str().unwrap(),
        "--at",
        "2026-07-14T02:00:00Z",
    ];
    let mut tables = String::new();
    for (name, args) in [("doctor", &doctor[..]), ("bundle-verify", &verify[..])] {
        let (code, screen, _) = on_pty(&bed.flow, args, true, false, &[]);
        assert_eq!(code, 0, "{screen}");
        assert!(serde_json::from_str::<Value>(&screen).is_err(), "{screen}");
        let mut json_args = args.to_vec();
        json_args.extend(["--format", "json"]);
        let (_, screen_json, _) = on_pty(&bed.flow, &json_args, true, false, &[]);
        let envelope: Value = serde_json::from_str(screen_json.trim()).unwrap();
        assert_eq!(envelope["operation"], name);
        // Piped: the envelope; --format table: the terminal's table.
        assert_eq!(bed.flow.run(args).assert_ok(), envelope);
        let mut table_args = args.to_vec();
        table_args.extend(["--format", "table"]);
        let piped = bed.flow.run(&table_args);
        assert_eq!(piped.code, 0);
        assert_eq!(piped.stdout.trim_end(), screen.trim_end());
        tables.push_str(&format!("$ {name}\n{}\n", piped.stdout));
    }
    assert!(tables.contains(&format!("  remedy: rm -- '{}'", litter.to_str().unwrap())));
    let text = tables
        .replace(&bed.run, "<RUN>")
        .replace(bed.base.to_str().unwrap(), "<TMP>");
    let mut text = text;
    for (pattern, with) in [
        (r"[0-9a-f]{12}\)|[A-Za-z0-9+/]{43}=", "<HASH>"),
        (r"\d{4}-\d\d-\d\dT[0-9:.]+Z", "<TIME>"),
        (r"\b\d+s ", "<AGE> "),
        (r"…[^ ]*/\.run\.json", "…<TAIL>/.run.json"),
    ] {
        text = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, with)
            .into_owned();
    }
    snapshots().bind(|| insta::assert_snapshot!("doctor-bundle-tables", text));
}

/// `status --run-id` in a table shows every recommended command in full,
/// on a line of its own, exactly as the JSON carries it.
#[test]
fn status_shows_the_full_next_command() {
    let bed = Bed::new();
    let root = bed.root.to_str().unwrap();
    let args = ["--state-root", root, "status", "--run-id", &bed.run];
    let data = bed.flow.run(&args).assert_ok();
    let next = data["next"].as_array().unwrap();
    assert!(!next.is_empty(), "{data}");
    let mut table_args = args.to_vec();
    table_args.extend(["--format", "table"]);
    let table = bed.flow.run(&table_args);
    let lines: Vec<&str> = table.stdout.lines().map(str::trim).collect();
    let mut long = false;
    for action in next {
        let command = action["command"].as_str().unwrap();
        long |= command.chars().count() > 80;
        assert!(
            lines.contains(&command),
            "{command} cut in:\n{}",
            table.stdout
        );
    }
    assert!(long, "no command longer than the table: {data}");
}

/// `log --format json` (the README lists it): one envelope whose rows are
/// the jsonl rows and whose counts are the summary's; not with --follow.
#[test]
fn log_format_json_is_one_envelope() {
    let bed = Bed::new().running();
    let root = bed.root.to_str().unwrap();
    let args = ["--state-root", root, "log", "--run-id", &bed.run];
    let lines: Vec<Value> = bed
        .flow
        .run(&args)
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, rows) = lines.split_last().unwrap();
    for (extra, want) in [
        (vec![], rows.to_vec()),
        (vec!["--tail", "2"], rows[rows.len() - 2..].to_vec()),
    ] {
        let mut json_args = args.to_vec();
        json_args.extend(["--format", "json"]);
        json_args.extend(extra);
        let out = bed.flow.run(&json_args);
        assert_eq!(out.stdout.lines().count(), 1, "{out:?}");
        let doc = out.assert_ok();
        assert_eq!(doc["operation"], "log");
        assert_eq!(doc["run_id"], json!(bed.run));
        assert_eq!(doc["rows"], json!(want));
        assert_eq!(doc["printed"], json!(want.len()));
        assert_eq!(doc["events"], summary["events"]);
        assert_eq!(doc["checksum"], summary["checksum"]);
        assert_eq!(doc["verified"], true);
    }
    let mut follow = args.to_vec();
    follow.extend(["--format", "json", "--follow"]);
    let out: Output = bed.flow.run(&follow);
    let e = out.assert_error(2, "contract_error");
    assert!(
        e["hint"].as_str().unwrap().contains("--format jsonl"),
        "{e}"
    );
}

/// The README's auditor flow, run as written: publish, push, a fresh
/// clone, the README's fetch of `refs/bluetape/*`, then `bundle-verify
/// --git` (which the clone alone cannot do).
#[test]
fn the_readme_auditor_flow_fetches_the_publication_refs() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let line = |start: &str| {
        readme
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("the README has no `{start}` line"))
            .to_string()
    };
    let push = line("git push origin 'refs/bluetape/");
    let fetch = line("git fetch origin 'refs/bluetape/");
    let bed = Bed::new();
    let sh = |dir: &Path, script: &str| {
        let out = Command::new("sh")
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .args(["-c", script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}: {out:?}");
    };
    let origin = bed.base.join("origin.git");
    sh(
        &bed.base,
        &format!("git init -q --bare '{}'", origin.display()),
    );
    sh(
        &bed.repo,
        &format!(
            "git init -q -b main && git commit -q --allow-empty -m work && git remote add origin '{}' && git push -q origin main",
            origin.display()
        ),
    );
    let root = bed.root.to_str().unwrap();
    bed.flow
        .run(&["--state-root", root, "publish", "--run-id", &bed.run])
        .assert_ok();
    sh(&bed.repo, &push);
    let audit = bed.base.join("audit");
    sh(
        &bed.base,
        &format!("git clone -q '{}' '{}'", origin.display(), audit.display()),
    );
    let reference = format!("refs/bluetape/runs/{}", bed.run);
    let verify = |dir: &Path| {
        bed.flow.run(&[
            "bundle-verify",
            "--git",
            dir.to_str().unwrap(),
            "--ref",
            &reference,
            "--format",
            "json",
        ])
    };
    // A plain clone has no publication, and the refusal says to fetch it.
    let e = verify(&audit).assert_error(2, "contract_error");
    assert!(e["hint"].as_str().unwrap().contains(&fetch), "{e}");
    sh(&audit, &fetch);
    let verified = verify(&audit).assert_ok();
    assert_eq!(verified["run_id"], json!(bed.run));
    assert_eq!(verified["publications"], 1);
}
