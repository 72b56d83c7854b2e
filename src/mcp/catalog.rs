//! PURE: which commands a mode exposes as tools, their input schemas (read
//! off the clap tree, so a tool's arguments are the command's flags and can
//! never drift from the parser), the server-side check of a call's
//! arguments, and the argv it becomes. No I/O.

use clap::{ArgAction, Command};
use serde_json::{Map, Value, json};

use crate::receipt::rules::Limits;

/// What a session may call; a mode only ever narrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The read-only commands and views.
    #[value(name = "read-only")]
    ReadOnly,
    /// Also the owner's lane, liveness, replacement, topology, evidence and
    /// report mutations, and `init`, acting with the handle named at start.
    Owner,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Owner => "owner",
        }
    }
}

/// The read-only commands and views every mode lists.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "state-root",
    "verify",
    "receipt-diagnose",
    "resume-check",
    "liveness-check",
    "completion-check",
    "approvals",
    "status",
    "log",
    "prove-event",
    "doctor",
    "evidence-digest",
];

/// What `owner` adds: the mutations of the run's owner.
pub const OWNER_TOOLS: &[&str] = &[
    "init",
    "run-start",
    "lane-create",
    "lane-start",
    "startup-ack",
    "probe-ack",
    "lane-complete",
    "lane-fail",
    "lane-block",
    "lane-cancel",
    "lane-resolve",
    "heartbeat",
    "stall-record",
    "stall-clear",
    "probe-sent",
    "interrupt-result",
    "lane-reassign",
    "replacement-repair",
    "replacement-block",
    "replacement-close",
    "topology-register",
    "topology-remove",
    "check-result",
    "component-evidence",
    "complete",
    "handoff-create",
    "live-report-create",
    "resume",
];

/// Never a tool, in any mode: a model must not approve its own plan
/// (`run-approve` is a person's act with their identity, and
/// `approval-statement` writes what that person signs), nothing that
/// makes or uses a signing key, nothing that makes a handle for a new run
/// (recovery) or ends a run on the model's word, nothing that needs a file the
/// model would name (`prove-append --from`, `report --out`, `check-proof`,
/// the bundle commands, `attest`), nothing that moves a git ref (`publish`),
/// nothing that sends the run over the network (`otel-export`).
pub const NEVER_TOOLS: &[&str] = &[
    "run-approve",
    "approval-statement",
    "key-generate",
    "sign-head",
    "recovery-run-create",
    "run-recovery-start",
    "run-recovery-finish",
    "run-fail",
    "run-cancel",
    "run-block",
    "rebuild",
    "report",
    "check-proof",
    "prove-append",
    // Issue 20: they write or read files the model would name (`--out`,
    // the bundle, `--key`) or move a git ref.
    "bundle-export",
    "bundle-verify",
    "publish",
    "attest",
    // contracts/otel.md: it sends the run to a URL or writes a file the
    // model would name, with headers that carry the receiver's key.
    "otel-export",
    "completions",
    "man",
    "mcp",
];

/// Flags no tool takes. `owner-file` is the server's own (named at start,
/// never by the model); the others name files or terminals the model has no
/// business choosing (`--format` is always JSON here, `--follow` never
/// ends). `decision-out` is the one file a read-only command writes
/// (`liveness-check`): a read-only tool writes nothing in any mode
/// (trust-model §2 promise 8), and `stall-record` takes the decision as a
/// JSON value here anyway (`--explain` returns it).
const WITHHELD_FLAGS: &[&str] = &[
    "owner-file",
    "new-owner-file",
    "approval-policy",
    "sign-head-key",
    "key",
    "head",
    "from",
    "out",
    "start",
    "format",
    "color",
    "follow",
    "decision-out",
];

/// Flags whose values are integers.
const INTEGER_FLAGS: &[&str] = &["sequence", "since", "tail"];

/// Largest JSON input, as the files the CLI reads (store::input).
pub const MAX_INPUT_BYTES: usize = 1_048_576;

/// How one argument is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Integer,
    Flag,
    TextList,
    /// A JSON input the CLI reads from a file, by its top-level type.
    JsonList,
    JsonObject,
}

/// One argument of a tool: the flag it becomes.
#[derive(Debug, Clone)]
pub struct Param {
    /// snake_case, as the model sends it.
    pub name: String,
    /// The long flag, as the CLI takes it.
    pub flag: String,
    pub kind: Kind,
    pub required: bool,
    pub help: String,
    pub choices: Vec<String>,
}

/// One tool: a CLI command and its typed arguments.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub read_only: bool,
    /// The command takes `--owner-file`: the server adds its own handle.
    pub takes_owner: bool,
    /// The command takes `--new-owner-file` (`resume`): the server names
    /// the new handle and acts with it afterwards.
    pub makes_owner: bool,
    pub params: Vec<Param>,
}

/// The JSON input flags and their top-level type for `command`.
fn json_kind(command: &str, flag: &str) -> Option<Kind> {
    match flag {
        "evidence" | "changed-paths" => Some(Kind::JsonList),
        "decision" => Some(Kind::JsonObject),
        "input" if command == "topology-register" => Some(Kind::JsonList),
        "input" => Some(Kind::JsonObject),
        _ => None,
    }
}

/// The tools `mode` lists, read off the command tree `tree` (the CLI's,
/// help pages applied).
pub fn tools(tree: &Command, mode: Mode) -> Vec<ToolSpec> {
    let mut names: Vec<&str> = READ_ONLY_TOOLS.to_vec();
    if mode == Mode::Owner {
        names.extend_from_slice(OWNER_TOOLS);
    }
    names
        .into_iter()
        .filter_map(|name| tree.find_subcommand(name).map(|c| spec(c, name)))
        .collect()
}

/// A tool's description (agent-tools.md §4): what it does (the first
/// sentence of its help page), when to call it, and what comes next (the
/// reference's "Safe next"). Not the reference's first line itself: its
/// kind is the read-only annotation, and the rest is the same on every
/// command.
fn describe(about: &str, long_about: &str) -> String {
    let page = long_about
        .strip_prefix(about)
        .unwrap_or(long_about)
        .trim_start();
    let first = page.split("\n\n").next().unwrap_or_default();
    let text = first.split_whitespace().collect::<Vec<_>>().join(" ");
    let sentences: Vec<&str> = text.split_inclusive(". ").map(str::trim).collect();
    let mut out: Vec<String> = Vec::new();
    if let Some(what) = sentences.first() {
        let what = what.split(": ").next().unwrap_or(what);
        out.push(format!("{}.", what.trim_end_matches('.')));
    }
    if let Some(when) = sentences.iter().skip(1).find(|s| s.starts_with("Call it")) {
        out.push(format!("{}.", when.trim_end_matches('.')));
    }
    if let Some(next) = about.split("Safe next: ").nth(1) {
        let next = next
            .split(". ")
            .next()
            .unwrap_or(next)
            .trim_end_matches('.');
        out.push(format!("Next: {next}."));
    }
    out.join(" ")
}

fn spec(command: &Command, name: &str) -> ToolSpec {
    let mut params = Vec::new();
    let mut takes_owner = false;
    let mut makes_owner = false;
    for arg in command.get_arguments() {
        let Some(flag) = arg.get_long() else { continue };
        if flag == "help" {
            continue;
        }
        takes_owner |= flag == "owner-file";
        makes_owner |= flag == "new-owner-file";
        if WITHHELD_FLAGS.contains(&flag) {
            continue;
        }
        let kind = match json_kind(name, flag) {
            Some(kind) => kind,
            None => match arg.get_action() {
                ArgAction::SetTrue => Kind::Flag,
                ArgAction::Append => Kind::TextList,
                _ if INTEGER_FLAGS.contains(&flag) => Kind::Integer,
                _ => Kind::Text,
            },
        };
        params.push(Param {
            name: flag.replace('-', "_"),
            flag: flag.to_string(),
            kind,
            required: arg.is_required_set(),
            help: arg.get_help().map(|h| h.to_string()).unwrap_or_default(),
            choices: arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect(),
        });
    }
    let description = describe(
        &command
            .get_about()
            .map(|t| t.to_string())
            .unwrap_or_default(),
        &command
            .get_long_about()
            .map(|t| t.to_string())
            .unwrap_or_default(),
    );
    ToolSpec {
        name: name.to_string(),
        description,
        read_only: READ_ONLY_TOOLS.contains(&name),
        takes_owner,
        makes_owner,
        params,
    }
}

/// The schema of a text flag, typed by what its value must be (the same
/// rules the JSON inputs' keys follow, coordinator::inputs).
fn text_schema(param: &Param, limits: &Limits) -> Value {
    use crate::coordinator::inputs;
    match param.flag.as_str() {
        _ if !param.choices.is_empty() => json!({"type": "string", "enum": param.choices}),
        "run-id"
        | "lane-id"
        | "agent-id"
        | "replacement-lane-id"
        | "resolution-lane-id"
        | "component-id"
        | "lane" => inputs::identifier(),
        // The bundled manifest's, as init checks them.
        "workflow-type" => json!({"type": "string", "enum": crate::receipt::manifest::bundled()
            .map(|m| m.contract["workflow_types"].clone())
            .unwrap_or_default()}),
        "at" | "deadline" => inputs::timestamp(),
        "expected-head" => inputs::sha256(),
        "reason" => inputs::non_blank(limits.max_assignment_chars),
        _ => json!({"type": "string", "minLength": 1}),
    }
}

fn param_schema(tool: &str, param: &Param, limits: &Limits) -> Value {
    let json_input = crate::coordinator::inputs::schema(tool, &param.flag, limits);
    let mut schema = match param.kind {
        Kind::Text => text_schema(param, limits),
        Kind::Integer => json!({"type": "integer", "minimum": 0}),
        Kind::Flag => json!({"type": "boolean"}),
        Kind::TextList if param.flag == "component" => {
            json!({"type": "array", "items": crate::coordinator::inputs::identifier(), "minItems": 1})
        }
        Kind::TextList => json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
        Kind::JsonList | Kind::JsonObject => json_input.unwrap_or_else(|| {
            if param.kind == Kind::JsonList {
                json!({"type": "array"})
            } else {
                json!({"type": "object"})
            }
        }),
    };
    let help = match SHARED_HELP.iter().find(|(flag, _)| *flag == param.flag) {
        Some((_, help)) => help.to_string(),
        None => short_help(&param.help),
    };
    if let Value::Object(map) = &mut schema
        && !help.is_empty()
    {
        map.insert("description".into(), Value::String(help));
    }
    schema
}

/// The arguments most tools take: their schema says what they must be, and
/// [`SHARED_ARGUMENTS`] what they mean, once.
const SHARED_HELP: &[(&str, &str)] = &[
    ("run-id", ""),
    ("lane-id", ""),
    ("agent-id", ""),
    ("at", ""),
    ("expected-head", ""),
    ("evidence", ""),
    ("reason", "Why, in one line"),
];

/// What [`SHARED_HELP`] leaves out, said once for every tool (the
/// server's instructions).
pub const SHARED_ARGUMENTS: &str = "run_id is the id init printed; at is when the step happened (UTC, at most 300 s after the server's clock; now when left out); expected_head refuses the write unless the receipt's last checksum is that one; evidence is this step's bounded proof (a fresh list for every step).";

/// A flag's help as a tool argument's description: its first sentence,
/// without what only a command line needs (files, `-`, "see below").
fn short_help(help: &str) -> String {
    let text = help
        .replace("<FILE> with ", "")
        .replace("<FILE>", "")
        .replace("<RUN_ID>", "run_id")
        .replace("<LANE_ID>", "lane_id")
        .replace("<AGENT_ID>", "agent_id")
        .replace("<TEXT>", "text")
        .replace("<SHA256>", "SHA-256");
    let cut = [": inline, -", " (", "; ", ": a JSON ", ", e.g"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    let text = text[..cut].trim().trim_end_matches([',', ';', ':', '.']);
    text.split(". ")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The tool's input schema: its flags in snake case, nothing else
/// (`additionalProperties: false`, checked again by [`argv`]).
pub fn input_schema(tool: &ToolSpec, limits: &Limits) -> Map<String, Value> {
    let properties: Map<String, Value> = tool
        .params
        .iter()
        .map(|p| (p.name.clone(), param_schema(&tool.name, p, limits)))
        .collect();
    let required: Vec<Value> = tool
        .params
        .iter()
        .filter(|p| p.required)
        .map(|p| Value::String(p.name.clone()))
        .collect();
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    schema
}

/// One piece of the command line a call becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// `--flag=value` (the `=` form, so no value is ever read as a flag).
    Value(String, String),
    /// `--flag`.
    Switch(String),
    /// `--flag=<path of a private file holding this JSON value>`.
    Json(String, Value),
}

/// Check a call's arguments against the tool, server-side (a client need
/// not have checked the schema): every key must be a parameter, of its
/// type, and every required parameter present. Returns the flags in the
/// tool's parameter order, or the refusal's message.
pub fn pieces(tool: &ToolSpec, args: &Map<String, Value>) -> Result<Vec<Piece>, String> {
    let names: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
    if let Some(unknown) = args.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(format!(
            "{} takes no argument `{unknown}` (it takes: {}); the owner handle, tokens and identities are never arguments",
            tool.name,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    }
    let mut out = Vec::new();
    for param in &tool.params {
        // `null` is taken as "not given" (clients send it for optional
        // arguments); for a required one it is missing.
        let Some(value) = args.get(&param.name).filter(|v| !v.is_null()) else {
            if param.required {
                return Err(format!("{} needs the argument `{}`", tool.name, param.name));
            }
            continue;
        };
        let wrong = |what: &str| format!("argument `{}` must be {what}", param.name);
        match param.kind {
            Kind::Text => {
                let Value::String(text) = value else {
                    return Err(wrong("a string"));
                };
                if !param.choices.is_empty() && !param.choices.contains(text) {
                    return Err(wrong(&format!("one of {}", param.choices.join(", "))));
                }
                out.push(Piece::Value(param.flag.clone(), text.clone()));
            }
            Kind::Integer => match value.as_u64() {
                Some(n) => out.push(Piece::Value(param.flag.clone(), n.to_string())),
                None => return Err(wrong("a non-negative integer")),
            },
            Kind::Flag => match value {
                Value::Bool(true) => out.push(Piece::Switch(param.flag.clone())),
                Value::Bool(false) => {}
                _ => return Err(wrong("a boolean")),
            },
            Kind::TextList => {
                let Value::Array(items) = value else {
                    return Err(wrong("a list of strings"));
                };
                if items.is_empty() && param.required {
                    return Err(wrong("a non-empty list of strings"));
                }
                for item in items {
                    let Value::String(text) = item else {
                        return Err(wrong("a list of strings"));
                    };
                    out.push(Piece::Value(param.flag.clone(), text.clone()));
                }
            }
            Kind::JsonList if !value.is_array() => return Err(wrong("a JSON list")),
            Kind::JsonObject if !value.is_object() => return Err(wrong("a JSON object")),
            Kind::JsonList | Kind::JsonObject => {
                out.push(Piece::Json(param.flag.clone(), value.clone()))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Command {
        crate::cli::command()
    }

    fn tool(mode: Mode, name: &str) -> ToolSpec {
        tools(&tree(), mode)
            .into_iter()
            .find(|t| t.name == name)
            .unwrap()
    }

    #[test]
    fn every_command_is_placed_exactly_once() {
        let tree = tree();
        for command in tree.get_subcommands() {
            let name = command.get_name();
            let places = [READ_ONLY_TOOLS, OWNER_TOOLS, NEVER_TOOLS]
                .iter()
                .filter(|list| list.contains(&name))
                .count();
            assert_eq!(places, 1, "{name} must be in exactly one list");
        }
        for name in READ_ONLY_TOOLS.iter().chain(OWNER_TOOLS) {
            assert!(tree.find_subcommand(name).is_some(), "{name}");
        }
    }

    #[test]
    fn modes_only_narrow() {
        let read_only: Vec<String> = tools(&tree(), Mode::ReadOnly)
            .into_iter()
            .map(|t| t.name)
            .collect();
        let owner: Vec<String> = tools(&tree(), Mode::Owner)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(read_only.iter().all(|t| owner.contains(t)));
        for never in ["run-approve", "key-generate", "sign-head"] {
            assert!(!owner.iter().any(|t| t == never), "{never}");
        }
        for t in tools(&tree(), Mode::ReadOnly) {
            assert!(t.read_only && !t.takes_owner, "{}", t.name);
            assert!(
                tree()
                    .find_subcommand(&t.name)
                    .unwrap()
                    .get_about()
                    .unwrap()
                    .to_string()
                    .starts_with("Read-only"),
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn no_tool_takes_an_owner_file_or_misses_a_required_flag() {
        let tree = tree();
        for t in tools(&tree, Mode::Owner) {
            assert!(
                t.params.iter().all(|p| !p.name.contains("owner")),
                "{}",
                t.name
            );
            let command = tree.find_subcommand(&t.name).unwrap();
            for arg in command.get_arguments().filter(|a| a.is_required_set()) {
                let long = arg.get_long().unwrap();
                assert!(
                    long == "owner-file"
                        || (long == "new-owner-file" && t.makes_owner)
                        || t.params.iter().any(|p| p.flag == long),
                    "{} requires --{long}, which no argument supplies",
                    t.name
                );
            }
        }
    }

    #[test]
    fn schemas_are_typed_and_closed() {
        let lane = tool(Mode::Owner, "lane-complete");
        let schema = input_schema(&lane, &Limits::default());
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["properties"]["evidence"]["type"], "array");
        assert_eq!(schema["properties"]["evidence"]["maxItems"], 8);
        assert_eq!(schema["properties"]["changed_paths"]["type"], "array");
        assert_eq!(schema["properties"]["run_id"]["type"], "string");
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in [
            "run_id",
            "lane_id",
            "agent_id",
            "at",
            "evidence",
            "changed_paths",
        ] {
            assert!(required.contains(&name), "{name}");
        }
        let topology = tool(Mode::Owner, "topology-register");
        let schema = input_schema(&topology, &Limits::default());
        assert_eq!(schema["properties"]["input"]["type"], "array");
        let check = tool(Mode::ReadOnly, "liveness-check");
        let schema = input_schema(&check, &Limits::default());
        assert!(schema["properties"]["command_status"]["enum"].is_array());
    }

    #[test]
    fn calls_are_checked_server_side() {
        let lane = tool(Mode::Owner, "lane-start");
        let good = json!({"run_id": "r", "lane_id": "l", "agent_id": "a", "at": "2026-07-14T01:00:00Z", "evidence": [{"kind": "k", "summary": ""}]});
        let pieces = pieces(&lane, good.as_object().unwrap()).unwrap();
        assert!(pieces.contains(&Piece::Value("run-id".into(), "r".into())));
        assert!(
            matches!(pieces.last(), Some(Piece::Json(flag, _)) if flag == "evidence")
                || pieces
                    .iter()
                    .any(|p| matches!(p, Piece::Json(f, _) if f == "evidence"))
        );
        for (extra, value) in [
            ("owner_file", json!("/tmp/x")),
            ("approved_by", json!("me")),
            ("token", json!("t")),
        ] {
            let mut bad = good.as_object().unwrap().clone();
            bad.insert(extra.into(), value);
            let e = super::pieces(&lane, &bad).unwrap_err();
            assert!(e.contains(extra), "{e}");
        }
        let mut bad = good.as_object().unwrap().clone();
        bad.insert("run_id".into(), json!(5));
        assert_eq!(
            super::pieces(&lane, &bad).unwrap_err(),
            "argument `run_id` must be a string"
        );
        let mut bad = good.as_object().unwrap().clone();
        bad.insert("evidence".into(), json!("[]"));
        assert!(
            super::pieces(&lane, &bad)
                .unwrap_err()
                .contains("JSON list")
        );
        let mut missing = good.as_object().unwrap().clone();
        missing.remove("lane_id");
        assert!(
            super::pieces(&lane, &missing)
                .unwrap_err()
                .contains("lane_id")
        );
    }
}
