//! Help that teaches (cli-conventions §2). Each command keeps the
//! reference's first line (`about`); its page `help/<command>.txt` adds what
//! the command records or answers, its options, its input files and its exit
//! statuses, and `help/examples/<command>.sh` is a runnable example (the
//! test suite runs every one of them in order, so they cannot rot). The pages
//! are applied to the clap tree here, in one place, so parsing and help
//! never disagree and completions and man pages carry the same text.

use clap::{Arg, Command};

use super::registry::{COMMANDS, CommandDef};

pub mod fields;

/// Options whose meaning is the same wherever they appear; a page's
/// `Options:` block overrides one for its command.
const SHARED_OPTIONS: &[(&str, &str)] = &[
    (
        "run-id",
        "The run, by the <RUN_ID> that init printed (e.g. 20260714T010000Z-1a2b3c4d)",
    ),
    (
        "owner-file",
        "The run's owner handle <FILE> (0600, written by init or resume); it proves you own the run and its token is never printed",
    ),
    (
        "expected-head",
        "Refuse to write unless the receipt's last checksum is this <SHA256> (64 lowercase hex, e.g. the checksum verify printed)",
    ),
    (
        "evidence",
        "This step's evidence: a JSON list of 1 to 8 items, inline, - or a <FILE> (see \"JSON values\" and \"Evidence file\" below)",
    ),
    ("lane-id", "The lane, by the <LANE_ID> given to lane-create"),
    (
        "agent-id",
        "The agent that owns the lane, by the <AGENT_ID> given to lane-create (or lane-reassign)",
    ),
    (
        "at",
        "When it happened: a UTC timestamp ending in Z, e.g. 2026-07-14T01:00:00Z (at most 300 seconds after this machine's clock)",
    ),
    (
        "reason",
        "Why, as one line of <TEXT> (at most 500 characters, stored in the receipt)",
    ),
];

/// What follows the generated table of the evidence list every
/// `--evidence` takes ([`fields`]), documented once.
const EVIDENCE_CLOSING: &str =
    "  Any other key is refused. At most 1 MiB, inline, - or a file (see \"JSON
  values\" above). Evidence is bounded proof, not a log: record what a
  reviewer needs, and a fresh list for every step (a list already recorded
  on the lane, or a heartbeat's, does not complete anything).
  Minimal valid example:
    [{\"kind\": \"test\", \"summary\": \"cargo test: 42 passed\", \"exit_status\": 0}]";

/// How every JSON option takes its value, documented once
/// (contracts/commands.md "JSON inputs").
const JSON_VALUES: &str = "\
JSON values (--evidence, --input, --decision, --changed-paths,
--approval-policy): each takes the JSON itself, standard input or a file.
  [ or {       a value whose first non-blank character is [ or { is the JSON
               itself; quote it for the shell:
               --evidence '[{\"kind\": \"test\", \"summary\": \"ok\"}]'
  -            reads the JSON from standard input (one option per call)
  anything else  the path of a regular file (not a symlink) holding it
  Whatever the source: at most 1 MiB of UTF-8 JSON, no floats. A refusal
  names the flag and the file, or says the value was inline or piped.";

/// What the top-level `--help` adds after the reference's epilog.
const GETTING_STARTED: &str = "\
Getting started (each command's --help has a runnable example):
  bluetape-flow --state-root .bluetape init --workflow-type A --repo-root . \\
      --owner-file .bluetape/handles/main.owner --component api
  bluetape-flow verify --run-id <run_id printed by init>
  bluetape-flow completion-check --run-id <run_id>

Every JSON option takes the JSON itself ('[...]', '{...}'), - for standard
input, or a file path; every mutation takes --at, the time it records.
Every command prints one line of JSON: success on stdout, a refusal on stderr
with \"error\", \"message\", \"retryable\" and \"next_command\". Exit statuses:
0 ok, 2 contract_error or approval_refused, 3 receipt_corrupt,
4 incompatible_manifest, 5 coordinator_conflict or approval_expired,
6 completion_blocked, 7 unsupported_by_run_manifest.
Without --state-root the state root is BLUETAPE_STATE_ROOT, else the nearest
ancestor holding .bluetape/config.json, else ~/work/bluetape4k/.bluetape,
else $XDG_STATE_HOME/bluetape-skills (default ~/.local/state/bluetape-skills).";

/// A page split into the parts clap shows in different places.
#[derive(Debug, Default, PartialEq)]
pub struct PageParts {
    /// The reference's one line for the command (the page's first line):
    /// its kind, capability and safe next step, as the top-level help
    /// lists it.
    pub about: String,
    /// What the command records or answers (after the reference's line).
    pub description: String,
    /// `(long option name, description)` from the `Options:` block.
    pub options: Vec<(String, String)>,
    /// Input-file sections, in the page's order.
    pub inputs: String,
    /// The `Exit statuses:` section, heading included.
    pub exits: String,
}

/// Split a page into its parts: the first line is the reference's line for
/// the command, then a blank line; the description runs to the first
/// section heading; `Options:` lines are `  --name  text`; `Exit statuses:`
/// runs to the end; everything else is input-file documentation.
pub fn parse_page(text: &str) -> PageParts {
    let (about, text) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut parts = PageParts {
        about: about.to_string(),
        ..PageParts::default()
    };
    let mut section = "description";
    let mut description = Vec::new();
    let mut inputs = Vec::new();
    let mut exits = Vec::new();
    for line in text.lines() {
        if line == "Options:" {
            section = "options";
            continue;
        }
        if line.starts_with("Exit statuses:") {
            section = "exits";
        } else if line.starts_with("Input file") {
            section = "inputs";
        }
        match section {
            "description" => description.push(line),
            "options" => {
                let entry = line.trim_start().strip_prefix("--").and_then(|rest| {
                    let (name, text) = rest.split_once("  ")?;
                    Some((name.trim().to_string(), text.trim().to_string()))
                });
                match entry {
                    Some(entry) => parts.options.push(entry),
                    None if line.trim().is_empty() => section = "between",
                    None => {
                        if let Some(last) = parts.options.last_mut() {
                            last.1.push(' ');
                            last.1.push_str(line.trim());
                        }
                    }
                }
            }
            "inputs" => inputs.push(line),
            "exits" => exits.push(line),
            _ if line.trim().is_empty() => {}
            _ => {
                section = "inputs";
                inputs.push(line);
            }
        }
    }
    parts.description = description.join("\n").trim().to_string();
    parts.inputs = inputs.join("\n").trim().to_string();
    parts.exits = exits.join("\n").trim_end().to_string();
    parts
}

/// The example as help shows it: indented, without `#!` harness directives.
pub fn render_example(example: &str) -> String {
    example
        .lines()
        .filter(|line| !line.starts_with("#!"))
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("  {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

fn option_help(page: &PageParts, arg: &Arg) -> Option<String> {
    let long = arg.get_long()?;
    if let Some((_, text)) = page.options.iter().find(|(name, _)| name == long) {
        return Some(text.clone());
    }
    if arg.get_help().is_some() {
        return None;
    }
    SHARED_OPTIONS
        .iter()
        .find(|(name, _)| *name == long)
        .map(|(_, text)| text.to_string())
}

fn teach_command(command: Command, page: &CommandDef, pages: Pages) -> Command {
    let parts = parse_page(page.text);
    // Repeating an option takes the last value, as the reference's
    // argparse does.
    let mut command = command
        .args_override_self(true)
        .about(parts.about.clone())
        .long_about(format!("{}\n\n{}", parts.about, parts.description));
    let helps: Vec<(String, String)> = command
        .get_arguments()
        .filter_map(|arg| option_help(&parts, arg).map(|h| (arg.get_id().to_string(), h)))
        .collect();
    for (id, help) in helps {
        command = command.mut_arg(id, |arg| arg.help(help));
    }
    let command = command.after_help("Input files, examples and exit statuses: --help");
    if pages == Pages::ForParsing {
        return command;
    }
    let takes_json = !page.inputs.is_empty();
    let mut after = Vec::new();
    if takes_json {
        after.push(JSON_VALUES.to_string());
    }
    after.extend(input_sections(page, &parts.inputs));
    if let Some(evidence) = page.input("evidence") {
        after.push(fields::section("Evidence file", evidence, EVIDENCE_CLOSING));
    }
    after.push(format!("Examples:\n{}", render_example(page.example)));
    if !parts.exits.is_empty() {
        after.push(parts.exits.clone());
    }
    command.after_long_help(after.join("\n\n"))
}

/// The page's input-file sections, each of a typed input with its field
/// table generated ([`fields`]): the page gives such a section as its
/// heading alone, `Input file --<flag> <FILE>`, followed by what the table
/// does not say (what is refused, a minimal valid example). A section
/// whose heading names no input of the command is the page's as written.
fn input_sections(page: &CommandDef, inputs: &str) -> Vec<String> {
    let mut sections: Vec<Vec<&str>> = Vec::new();
    for line in inputs.lines() {
        match sections.last_mut() {
            Some(section) if !line.starts_with("Input file") => section.push(line),
            _ => sections.push(vec![line]),
        }
    }
    sections
        .into_iter()
        .map(|lines| {
            let heading = lines[0].trim_end();
            let closing = lines[1..].join("\n");
            let generated = page
                .inputs
                .iter()
                .find(|input| heading == stub_heading(input.flag))
                .map(|input| fields::section("Input file", input, &closing));
            generated.unwrap_or_else(|| lines.join("\n").trim_end().to_string())
        })
        .collect()
}

/// The heading a page gives a typed input's section, whose table is
/// generated.
fn stub_heading(flag: &str) -> String {
    format!("Input file --{flag} <FILE>")
}

/// How much of the pages a command tree carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Everything `--help` and the man pages show.
    Full,
    /// All but the long help's closing sections (input tables, examples,
    /// exit statuses): a call that shows no `--help` parses with this tree,
    /// so a heartbeat does not generate every command's field tables.
    ForParsing,
}

impl Pages {
    /// What a call with `args` needs: the full pages when any argument may
    /// ask for the long help (`-h`, `--help` or, as long flags may be
    /// abbreviated, a prefix of it), the parsing tree otherwise.
    pub fn for_args<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Pages {
        let asks_help = args.iter().any(|arg| {
            let arg = arg.as_ref().to_string_lossy();
            arg == "-h" || (arg.starts_with("--h") && "--help".starts_with(arg.as_ref()))
        });
        if asks_help {
            Pages::Full
        } else {
            Pages::ForParsing
        }
    }
}

/// The whole command tree with its help pages applied, as much as `pages`
/// asks. `epilog` is the reference's top-level epilog, kept as the first
/// paragraph.
pub fn teach(mut command: Command, epilog: &str, pages: Pages) -> Command {
    for page in COMMANDS {
        command = command.mut_subcommand(page.name, |sub| teach_command(sub, page, pages));
    }
    command.after_long_help(format!("{epilog}\n\n{GETTING_STARTED}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_call_that_may_ask_for_the_long_help_builds_the_full_pages() {
        for args in [
            &["bluetape-flow", "heartbeat", "--help"][..],
            &["bluetape-flow", "heartbeat", "-h"],
            &["bluetape-flow", "heartbeat", "--hel"],
            &["bluetape-flow", "--h"],
        ] {
            assert_eq!(Pages::for_args(args), Pages::Full, "{args:?}");
        }
        for args in [
            &["bluetape-flow", "heartbeat", "--input", "{}"][..],
            &["bluetape-flow", "log", "--head"],
            &["bluetape-flow", "--helps"],
        ] {
            assert_eq!(Pages::for_args(args), Pages::ForParsing, "{args:?}");
        }
    }

    #[test]
    fn the_parsing_tree_takes_the_same_arguments_as_the_full_one() {
        let shape = |pages| {
            let tree = teach(
                <crate::surface::Cli as clap::CommandFactory>::command(),
                "",
                pages,
            );
            tree.get_subcommands()
                .map(|c| {
                    let args: Vec<String> =
                        c.get_arguments().map(|a| a.get_id().to_string()).collect();
                    (
                        c.get_name().to_string(),
                        args,
                        c.get_about().map(|a| a.to_string()),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(Pages::ForParsing), shape(Pages::Full));
    }

    #[test]
    fn a_page_splits_into_description_options_inputs_and_exits() {
        let page = "Mutation. Capability: all. Safe next: verify.\n\nWhat it does.\nSecond line.\n\nOptions:\n  --input  The lane <FILE>\n    continued\n  --deadline  When\n\nInput file --input <FILE>: a JSON object\n  lane_id  string\n\nExit statuses:\n  0  ok\n  2  contract_error  bad input\n";
        let parts = parse_page(page);
        assert_eq!(parts.about, "Mutation. Capability: all. Safe next: verify.");
        assert_eq!(parts.description, "What it does.\nSecond line.");
        assert_eq!(
            parts.options,
            vec![
                ("input".to_string(), "The lane <FILE> continued".to_string()),
                ("deadline".to_string(), "When".to_string()),
            ]
        );
        assert_eq!(
            parts.inputs,
            "Input file --input <FILE>: a JSON object\n  lane_id  string"
        );
        assert_eq!(
            parts.exits,
            "Exit statuses:\n  0  ok\n  2  contract_error  bad input"
        );
    }

    #[test]
    fn examples_lose_their_directives_and_are_indented() {
        assert_eq!(
            render_example("#! fixture 10\n# Say hello.\n\necho hi\n"),
            "  # Say hello.\n\n  echo hi"
        );
    }
}
