//! Help that teaches, and the usual companions (cli-conventions §2, §3):
//! every command's `--help` describes every option, documents its input
//! files, shows an example and its exit statuses; the examples run, in
//! order, against the real binary; the whole help tree is a snapshot;
//! `--version`, `completions` and `man` work and refuse bad arguments with
//! the usual envelope.

use crate::bed as common;

use common::{Flow, Output};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/surface/help/examples");

/// The exit statuses and error codes of the README's table.
const EXIT_TABLE: &[(&str, &str)] = &[
    ("0", "ok"),
    ("2", "contract_error"),
    ("2", "approval_refused"),
    ("3", "receipt_corrupt"),
    ("3", "proof_invalid"),
    ("4", "incompatible_manifest"),
    ("5", "coordinator_conflict"),
    ("5", "approval_expired"),
    ("5", "rule_breach"),
    ("5", "export_failed"),
    ("6", "completion_blocked"),
    ("7", "unsupported_by_run_manifest"),
];

fn tree() -> clap::Command {
    let mut tree = bluetape_flow::surface::command();
    tree.build();
    tree
}

fn help(flow: &Flow, command: &str) -> Output {
    let out = flow.run(&[command, "--help"]);
    assert_eq!(out.code, 0, "{command}: {out:?}");
    assert!(out.stderr.is_empty(), "{command}: {out:?}");
    out
}

/// The lines of the `heading` section of a help text (up to a blank line
/// followed by an unindented line).
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    let mut out: Vec<&str> = lines.next().into_iter().collect();
    for line in lines {
        if !line.is_empty() && !line.starts_with(' ') {
            break;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

/// The registry walked through the binary: every command defined there
/// is one the top-level help lists, in the registry's order, with its
/// first line saying "Mutation" exactly where it writes; its
/// help shows its page's first line; it has its man page (and nothing else
/// has one); and the bash completion names it. The MCP catalog's tools and
/// annotations are held to the same table (`mcp::catalog` unit tests, and
/// `mcp::` through the server).
#[test]
fn every_generated_artefact_agrees_with_the_registry() {
    use bluetape_flow::surface::registry::COMMANDS;
    let (tmp, flow) = common::flow_elsewhere();
    assert!(
        COMMANDS.len() >= 45,
        "the reference's 43, approvals, ours: {}",
        COMMANDS.len()
    );
    let top = flow.run(&["--help"]);
    assert_eq!(top.code, 0, "{top:?}");
    let listed: Vec<(&str, &str)> = section(&top.stdout, "Commands:")
        .iter()
        .filter_map(|l| l.trim().split_once(' '))
        .map(|(name, about)| (name, about.trim()))
        .filter(|(name, _)| *name != "help")
        .collect();
    let names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
    let defined: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    assert_eq!(names, defined, "the top-level help lists the registry");
    for (def, (_, about)) in COMMANDS.iter().zip(&listed) {
        assert_eq!(
            about.starts_with("Mutation"),
            def.writes(),
            "{}: {about}",
            def.name
        );
        let page = help(&flow, def.name);
        let first = def.text.lines().next().unwrap_or_default();
        assert!(page.stdout.contains(first), "{}: {first}", def.name);
    }
    let dir = tmp.path().join("man");
    let mut pages: Vec<String> = man_pages(&flow, &dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = COMMANDS
        .iter()
        .map(|c| format!("bluetape-flow-{}.1", c.name))
        .chain(["bluetape-flow.1".to_string()])
        .collect();
    expected.sort();
    assert_eq!(pages, expected, "one man page per command and the tool's");
    let bash = flow.run(&["completions", "bash"]);
    assert_eq!(bash.code, 0, "{bash:?}");
    for def in COMMANDS {
        assert!(
            bash.stdout.contains(&format!(
                "bluetape__flow__subcmd__{}",
                def.name.replace('-', "__")
            )) || bash.stdout.contains(&format!(" {} ", def.name)),
            "{} is not completed",
            def.name
        );
    }
}

#[test]
fn every_option_is_described_and_every_command_teaches() {
    let (_tmp, flow) = common::flow_elsewhere();
    for command in tree().get_subcommands() {
        let name = command.get_name();
        let text = help(&flow, name).stdout;
        let about = command.get_about().unwrap().to_string();
        assert_eq!(text.lines().next(), Some(about.as_str()), "{name}");
        let description = text.lines().nth(2).unwrap_or_default();
        assert!(
            !description.is_empty() && !description.starts_with("Usage:"),
            "{name}: no description after the reference's line:\n{text}"
        );
        assert!(!text.contains("PLACEHOLDER"), "{name}");
        for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long() else {
                continue;
            };
            let described = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                described.trim().len() > 10,
                "{name} --{long} has no description"
            );
            assert!(text.contains(&format!("--{long}")), "{name} --{long}");
        }
        for input in ["input", "decision", "changed-paths", "approval-policy"] {
            if command.get_arguments().any(|a| a.get_long() == Some(input)) {
                let lines = section(&text, &format!("Input file --{input} "));
                assert!(
                    lines.iter().any(|l| l.trim() == "Minimal valid example:"),
                    "{name} --{input}: no input-file section with an example:\n{text}"
                );
            }
        }
        if command
            .get_arguments()
            .any(|a| a.get_long() == Some("evidence"))
        {
            assert!(text.contains("Evidence file --evidence <FILE>"), "{name}");
        }
        let examples = section(&text, "Examples:");
        let invocation = format!("bluetape-flow {name}");
        let invokes = examples
            .iter()
            .any(|l| l.trim_start().starts_with("bluetape-flow") && l.contains(&invocation))
            || examples.iter().any(|l| l.contains(&format!(" {name} ")));
        assert!(invokes, "{name}: the example does not run it:\n{text}");
        let page = std::fs::read_to_string(format!("{EXAMPLES}/{name}.sh")).unwrap();
        let shown = bluetape_flow::surface::help::render_example(&page);
        assert!(text.contains(&shown), "{name}: help shows another example");
        let exits = section(&text, "Exit statuses:");
        assert!(exits.len() > 1, "{name}: no exit statuses:\n{text}");
        let mut listed = Vec::new();
        for line in &exits[1..] {
            let words: Vec<&str> = line.split_whitespace().collect();
            if line.starts_with("  ") && !line.starts_with("   ") && words.len() >= 2 {
                assert!(
                    EXIT_TABLE.contains(&(words[0], words[1])),
                    "{name}: '{line}' is not in the exit-code table"
                );
                listed.push(words[0]);
            }
        }
        assert_eq!(listed.first(), Some(&"0"), "{name}: {exits:?}");
        assert!(listed.contains(&"2"), "{name}: bad arguments are exit 2");
    }
}

#[test]
fn short_help_points_to_the_long_one() {
    let (_tmp, flow) = common::flow_elsewhere();
    let out = flow.run(&["heartbeat", "-h"]);
    assert_eq!(out.code, 0);
    assert!(
        out.stdout
            .starts_with("Mutation. Capability: Phase 2 only.")
    );
    assert!(
        out.stdout
            .contains("Input files, examples and exit statuses: --help")
    );
}

/// Every JSON flag of every command in the registry shows its field
/// table through the binary (and in its man page), generated from its
/// type: the table names exactly the keys of the schema the catalog
/// gives, each said required exactly where that schema requires it.
#[test]
fn every_json_flag_shows_its_types_fields() {
    use bluetape_flow::surface::registry::{COMMANDS, input_schema};
    let (tmp, flow) = common::flow_elsewhere();
    let dir = tmp.path().join("man");
    man_pages(&flow, &dir);
    let mut tables = 0;
    for def in COMMANDS.iter().filter(|c| built(c.name)) {
        let text = help(&flow, def.name).stdout;
        let man =
            std::fs::read_to_string(dir.join(format!("bluetape-flow-{}.1", def.name))).unwrap();
        for input in def.inputs {
            let Some(schema) = input_schema(def.name, input.flag) else {
                continue;
            };
            let label = if input.flag == "evidence" {
                "Evidence file"
            } else {
                "Input file"
            };
            let lines = section(&text, &format!("{label} --{} <FILE>: ", input.flag));
            assert!(!lines.is_empty(), "{} --{}:\n{text}", def.name, input.flag);
            // A row is `  key  type, required...`; the page's closing lines
            // are prose, one space between words.
            let rows: Vec<(&str, &str)> = lines[1..]
                .iter()
                .filter_map(|l| l.strip_prefix("  "))
                .filter(|l| !l.starts_with(' '))
                .filter_map(|l| match l.strip_prefix("(each entry)") {
                    Some(rest) => Some(("(each entry)", rest.trim_start())),
                    None => {
                        let (key, rest) = l.split_once("  ")?;
                        (!key.contains(' ')).then_some((key, rest.trim_start()))
                    }
                })
                .collect();
            let object = if schema["type"] == "array" {
                &schema["items"]
            } else {
                &schema
            };
            let Some(properties) = object["properties"].as_object() else {
                let keys: Vec<&str> = rows.iter().map(|(k, _)| *k).collect();
                assert_eq!(keys, ["(each entry)"], "{}", def.name);
                continue;
            };
            let mut keys: Vec<&str> = rows.iter().map(|(k, _)| *k).collect();
            keys.sort_unstable();
            let expected: Vec<&str> = properties.keys().map(String::as_str).collect();
            assert_eq!(keys, expected, "{} --{}", def.name, input.flag);
            // An object whose keys are all optional has no `required`.
            let required = match &object["required"] {
                serde_json::Value::Null => Vec::new(),
                keys => crate::bed::strings(keys),
            };
            for (key, rest) in rows {
                // The type and presence end at the first `;` or sentence
                // end (a range such as `1..8` is no sentence end).
                let said = rest.split("; ").next().unwrap();
                let said = said.split(". ").next().unwrap();
                let words = if required.contains(&key) {
                    ", required"
                } else {
                    ", optional"
                };
                assert!(said.contains(words), "{} {key}: {rest}", def.name);
                let row = format!("  {key}");
                assert!(
                    man.contains(&row.replace('-', "\\-")),
                    "{}: {key}",
                    def.name
                );
            }
            tables += 1;
        }
    }
    assert!(tables >= 35, "every --evidence and --input: {tables}");
}

/// The whole help tree, as a newcomer reads it: a change to any help text
/// is a visible diff of this snapshot.
/// The snapshot is of the default build; a build without the `mcp` feature
/// lacks that one command and its line in the list.
#[cfg(feature = "mcp")]
#[test]
fn the_help_tree_is_a_snapshot() {
    let (_tmp, flow) = common::flow_elsewhere();
    let mut text = String::new();
    let mut commands = vec![None];
    commands.extend(
        tree()
            .get_subcommands()
            .map(|c| Some(c.get_name().to_string())),
    );
    for command in commands {
        let args: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .chain(["--help"])
            .collect();
        let out = flow.run(&args);
        text.push_str(&format!(
            "$ bluetape-flow {}\n[exit {}]\n{}\n",
            args.join(" "),
            out.code,
            out.stdout
        ));
    }
    common::snapshots().bind(|| insta::assert_snapshot!("help-tree", text));
}

// ------------------------------------------------------------- examples

/// Every example in `ORDER`, run as a newcomer would paste them: one bash,
/// `set -euo pipefail`, in an empty project directory, with a pinned
/// environment and `bluetape-flow` on PATH. Examples that need a state no
/// command can make (`#! fixture <scenario>`) run alone in a copy of that
/// reference fixture.
#[test]
fn every_example_runs() {
    let order = std::fs::read_to_string(format!("{EXAMPLES}/ORDER")).unwrap();
    let order: Vec<&str> = order
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| built(l))
        .collect();
    let listed: BTreeSet<&str> = order.iter().copied().collect();
    assert_eq!(listed.len(), order.len(), "ORDER lists a command twice");
    let pages: BTreeSet<&str> = bluetape_flow::surface::registry::COMMANDS
        .iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(listed, pages, "ORDER must list every command once");
    let files: BTreeSet<String> = std::fs::read_dir(EXAMPLES)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "ORDER")
        .filter(|n| built(n.trim_end_matches(".sh")))
        .collect();
    let expected: BTreeSet<String> = pages.iter().map(|p| format!("{p}.sh")).collect();
    assert_eq!(files, expected, "an example file without a command");

    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_bluetape-flow"),
        bin.join("bluetape-flow"),
    )
    .unwrap();
    let mut story = String::from("set -euo pipefail\n");
    let mut fixtures = Vec::new();
    for name in &order {
        let script = std::fs::read_to_string(format!("{EXAMPLES}/{name}.sh")).unwrap();
        match script
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#! fixture "))
        {
            Some(scenario) => {
                fixtures.push((name.to_string(), scenario.trim().to_string(), script))
            }
            None => story.push_str(&format!("echo '### {name}' >&2\n{script}\n")),
        }
    }
    let work = tmp.path().join("story");
    for dir in ["src/api", "src/web", "docs"] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
    }
    run_script(&bin, tmp.path(), &work, &story, "the story");
    // One clock (contracts/commands.md): every run the examples made, the
    // one whose receipt they damage aside, runs forward in log and report.
    let views = "set -euo pipefail
for run in $(ls .bluetape/runs); do
  if bluetape-flow verify --run-id \"$run\" >/dev/null 2>&1; then
    bluetape-flow log --run-id \"$run\"
    bluetape-flow report --run-id \"$run\" --out \"../report-$run.html\" >/dev/null
    cat \"../report-$run.html\"
  fi
done";
    let out = run_script(&bin, tmp.path(), &work, views, "the story's views");
    let pages = out.matches("<html").count();
    // The main run, $OTHER, $KEYED and the recovery run ($DROPPED is damaged).
    assert_eq!(pages, 4, "every good run has its page");
    assert!(!out.contains("Time runs backwards in"), "{out}");
    assert!(!out.contains("runs backwards (an earlier"), "{out}");
    // Rows come run by run, each from sequence 1.
    let mut previous = String::new();
    for row in out
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|row| row.get("event_type").is_some())
    {
        let time = row["created_at"].as_str().unwrap().to_string();
        let sequence = row["sequence"].as_u64().unwrap();
        if sequence == 1 {
            previous.clear();
        }
        assert!(
            previous <= time,
            "time goes back at #{sequence}: {time} after {previous}"
        );
        previous = time;
    }
    for (name, scenario, script) in fixtures {
        let work = tmp.path().join(format!("fixture-{name}"));
        let scenario_dir = common::fixtures_dir().join(&scenario);
        common::prepare_state(&scenario_dir, &work.join(".bluetape"));
        std::fs::create_dir_all("/tmp/bluetape-fixture-repo").unwrap();
        let runs: Vec<_> = std::fs::read_dir(work.join(".bluetape/runs"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(runs.len(), 1, "{scenario} has one run");
        let run = runs[0].file_name().to_string_lossy().into_owned();
        let script = format!("set -euo pipefail\nRUN={run}\n{script}");
        run_script(&bin, tmp.path(), &work, &script, &name);
    }
}

/// Whether this build has the command: `mcp` is behind a default feature.
fn built(command: &str) -> bool {
    command != "mcp" || cfg!(feature = "mcp")
}

/// The README's "A first run" block, pasted into a shell in an empty
/// directory, runs to the end and leaves a verified run with a live lane.
#[test]
fn the_readme_first_run_works() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split("<!-- first-run -->\n```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a first-run block");
    let tmp = tempfile::tempdir().unwrap();
    let bin = binary_dir(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let script = format!("set -euo pipefail\n{block}");
    let out = run_script(&bin, tmp.path(), &work, &script, "README");
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["operation"], "verify");
    assert_eq!(last["event_count"], 7);
    assert!(out.contains(r#""action": "continue""#), "{out}");
    // One clock (contracts/commands.md): the documented run runs forward in
    // every view of it.
    let views = "set -euo pipefail\nRUN=$(ls .bluetape/runs)\nbluetape-flow log --run-id \"$RUN\"\nbluetape-flow report --run-id \"$RUN\" --out ../report.html --at 2026-07-14T01:02:00Z >/dev/null\ncat ../report.html";
    let out = run_script(&bin, tmp.path(), &work, views, "README views");
    assert_runs_forward(&out, 7);
}

/// `log` rows (JSON lines, then the HTML `report` page) of a run whose
/// `events` times never go back, and no view flags one that does.
pub fn assert_runs_forward(out: &str, events: usize) {
    let times: Vec<String> = out
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|row| row.get("sequence").is_some() && row.get("event_type").is_some())
        .map(|row| row["created_at"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(times.len(), events, "{out}");
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "event times go back: {times:?}"
    );
    assert!(out.contains("<html"), "the report page is in the output");
    assert!(!out.contains("Time runs backwards in"), "{out}");
    assert!(!out.contains("runs backwards (an earlier"), "{out}");
}

/// A directory holding `bluetape-flow`, for PATH.
fn binary_dir(base: &Path) -> PathBuf {
    let bin = base.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_bluetape-flow"),
        bin.join("bluetape-flow"),
    )
    .unwrap();
    bin
}

/// Run `script` in bash with a pinned environment; returns its stdout.
fn run_script(bin: &Path, base: &Path, cwd: &Path, script: &str, what: &str) -> String {
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("LANG", "C.UTF-8")
        .env("NO_COLOR", "1")
        .current_dir(cwd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rfind(|l| l.starts_with("### "));
    assert!(
        out.status.success(),
        "{what}: example {} failed ({}):\nstdout (tail): {}\nstderr: {stderr}",
        last.unwrap_or("?"),
        out.status,
        tail(&String::from_utf8_lossy(&out.stdout)),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

// ------------------------------------------------------------ companions

#[test]
fn version_names_the_tool_and_the_manifest() {
    let (_tmp, flow) = common::flow_elsewhere();
    let expected = format!(
        "bluetape-flow {} (manifest 1.1.0)\n",
        env!("CARGO_PKG_VERSION")
    );
    for flag in ["--version", "-V"] {
        let out = flow.run(&[flag]);
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(out.stdout, expected);
        assert!(out.stderr.is_empty());
    }
}

#[test]
fn completions_load_in_bash_and_exist_for_every_shell() {
    let (tmp, flow) = common::flow_elsewhere();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = flow.run(&["completions", shell]);
        assert_eq!(out.code, 0, "{shell}: {out:?}");
        assert!(out.stdout.contains("bluetape-flow"), "{shell}");
        for command in ["heartbeat", "lane-create", "recovery-run-create"] {
            assert!(out.stdout.contains(command), "{shell} lacks {command}");
        }
    }
    let script = tmp.path().join("bluetape-flow.bash");
    std::fs::write(&script, flow.run(&["completions", "bash"]).stdout).unwrap();
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{syntax:?}");
    let loaded = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p bluetape-flow",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(loaded.status.success(), "{loaded:?}");
    let registered = String::from_utf8_lossy(&loaded.stdout);
    assert!(
        registered.starts_with("complete ")
            && registered.contains(" -F _bluetape__flow ")
            && registered.trim_end().ends_with(" bluetape-flow"),
        "{registered}"
    );
    // The completion function offers the commands for `bluetape-flow lane-<TAB>`.
    let offered = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}'; COMP_WORDS=(bluetape-flow lane-); COMP_CWORD=1; \
             _bluetape__flow bluetape-flow lane- bluetape-flow; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&offered.stdout);
    for command in ["lane-create", "lane-start", "lane-complete"] {
        assert!(offered.lines().any(|l| l == command), "{offered}");
    }
}

#[test]
fn utilities_refuse_bad_arguments_with_the_envelope() {
    let (_tmp, flow) = common::flow_elsewhere();
    for args in [
        vec!["completions"],
        vec!["completions", "tcsh"],
        vec!["completions", "bash", "zsh"],
        vec!["man"],
        vec!["man", "--out"],
        vec!["man", "--out", "x", "--bogus"],
    ] {
        let out = flow.run(&args);
        let e = out.assert_error(2, "contract_error");
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {out:?}");
        assert!(e.get("next_command").is_none(), "{args:?}");
    }
}

fn man_pages(flow: &Flow, dir: &Path) -> Vec<PathBuf> {
    let out = flow.run(&["man".as_ref(), "--out".as_ref(), dir.as_os_str()]);
    let v = out.assert_ok();
    assert_eq!(v["operation"], "man");
    let pages: Vec<PathBuf> = v["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| dir.join(p.as_str().unwrap()))
        .collect();
    assert_eq!(
        pages.len(),
        1 + tree().get_subcommands().count(),
        "one page for the tool and one per command"
    );
    pages
}

#[test]
fn man_pages_render_without_warnings() {
    let (tmp, flow) = common::flow_elsewhere();
    let dir = tmp.path().join("man");
    let pages = man_pages(&flow, &dir);
    for page in &pages {
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .output()
            .expect("man (man-db) is installed: .ci/run installs it");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{}: {} {stderr}",
            page.display(),
            out.status
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{}",
            page.display()
        );
        if page.file_name().unwrap() != "bluetape-flow.1" {
            assert!(text.contains("EXAMPLES"), "{}", page.display());
            assert!(text.contains("EXIT STATUSES"), "{}", page.display());
        }
    }
    let top = std::fs::read_to_string(dir.join("bluetape-flow.1")).unwrap();
    assert!(
        top.contains("heartbeat"),
        "the tool's page lists the commands"
    );
    // Regenerating replaces the pages in place.
    assert_eq!(man_pages(&flow, &dir), pages);
}

#[test]
fn man_refuses_a_file_or_a_symlink_and_writes_nothing() {
    let (tmp, flow) = common::flow_elsewhere();
    let file = tmp.path().join("file");
    std::fs::write(&file, "keep").unwrap();
    let target = tmp.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for out_dir in [&file, &link] {
        let before = common::snapshot(tmp.path());
        let out = flow.run(&["man".as_ref(), "--out".as_ref(), out_dir.as_os_str()]);
        out.assert_error(2, "contract_error");
        assert_eq!(
            common::snapshot(tmp.path()),
            before,
            "{}",
            out_dir.display()
        );
    }
    // A page that is a symlink is not followed, and nothing is written.
    let dir = tmp.path().join("man");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&file, dir.join("bluetape-flow-verify.1")).unwrap();
    let before = common::snapshot(tmp.path());
    let out = flow.run(&["man".as_ref(), "--out".as_ref(), dir.as_os_str()]);
    out.assert_error(2, "contract_error");
    assert_eq!(common::snapshot(tmp.path()), before);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}

#[test]
fn utilities_never_touch_a_state_root() {
    let (tmp, mut flow) = common::flow_elsewhere();
    let root = tmp.path().join("state");
    flow.envs.push((
        "BLUETAPE_STATE_ROOT".into(),
        root.to_string_lossy().into_owned(),
    ));
    assert_eq!(flow.run(&["completions", "zsh"]).code, 0);
    let dir = tmp.path().join("pages");
    man_pages(&flow, &dir);
    assert!(!root.exists(), "a utility created the state root");
}
