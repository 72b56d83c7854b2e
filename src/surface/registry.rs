//! Every command, defined once (architecture.md §3a): its name, what it
//! does to the state root, whether the MCP server offers it, and its help
//! page (its one line in the top-level help first) and example. The
//! parser's derive structs say only its arguments. The help pages, man pages and completions
//! ([`super::help`]), the allocator a process starts (`src/main.rs`), the
//! answer-lost rule ([`super`]) and the MCP catalog (`mcp::catalog`) read
//! this table, and a test holds it to the parser: a command named here is a
//! command of the parser and the reverse, in the order of the top-level
//! help, and whether it writes agrees with the reference's first line.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::coordinator::inputs::{
    ApprovalPolicyInput, ChangedPaths, CheckResultInput, ComponentEvidenceInput, Evidence,
    HandoffReport, HeartbeatInput, LaneCreateInput, LiveReport, ReassignInput,
    RecoveryDiagnosisInput, StallDecision, TimedInput, Topology,
};
use crate::receipt::schema::{annotated_schema_of, object_fields, schema_of};

/// What a command does to the state root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Reads only: takes no lock and writes nothing there.
    ReadOnly,
    /// Appends one event to a run (or makes one), loading the run from its
    /// proven checkpoint: a short process whose allocations fit one small
    /// heap (it runs on the C library's allocator, `src/main.rs`).
    OneEvent,
    /// Changes state otherwise: a run made from another, derived files, a
    /// key, a signed head, a git ref.
    Other,
}

/// Where the MCP server offers a command as a tool (agent-tools.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// In every mode: it reads only.
    EveryMode,
    /// In `owner` mode: a mutation of the run's owner.
    Owner,
    /// Never: a model must not approve its own plan (`run-approve` is a
    /// person's act with their identity, and `approval-statement` writes
    /// what that person signs); nothing that makes or uses a signing key,
    /// makes a handle for a new run (recovery) or ends a run on the model's
    /// word; nothing that needs a file the model would name
    /// (`prove-append --from`, `report --out`, `check-proof`, the bundle
    /// commands, `attest`); nothing that moves a git ref (`publish`);
    /// nothing that sends the run over the network (`otel-export`,
    /// contracts/otel.md).
    Never,
}

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

/// The JSON Schema of a JSON input, typed to its leaves, derived from its
/// type (`coordinator::inputs`) with the manifest's default limits.
pub type InputSchema = fn() -> Value;

/// What the help's field table of an input is made from
/// (`surface::help`): its type's schema with the annotations the catalog
/// strips (each field's doc comment, default and leaf rule in words), and
/// its keys (or its items' keys) in declaration order.
pub struct InputDoc {
    pub schema: Value,
    pub fields: &'static [&'static str],
}

/// `T`'s [`InputDoc`].
pub fn doc_of<T: JsonSchema + DeserializeOwned>() -> InputDoc {
    InputDoc {
        schema: annotated_schema_of::<T>(),
        fields: object_fields::<T>(),
    }
}

/// A flag that takes JSON (inline, `-` or a file; cli-conventions §5).
pub struct JsonInput {
    pub flag: &'static str,
    /// Its schema, as the MCP catalog shows it.
    pub schema: InputSchema,
    /// Its type's documentation, from which its help section's field table
    /// is generated.
    pub doc: fn() -> InputDoc,
    /// The key that `--at` fills when the input leaves it out (the event's
    /// time; `commands::mutate`'s timed inputs), so the help says it is
    /// required "unless --at gives it".
    pub at_key: Option<&'static str>,
}

/// `flag` takes JSON of type `T`.
const fn json<T: JsonSchema + DeserializeOwned>(flag: &'static str) -> JsonInput {
    JsonInput {
        flag,
        schema: schema_of::<T>,
        doc: doc_of::<T>,
        at_key: None,
    }
}

/// `flag` takes JSON of type `T`, whose time key `--at` may fill.
const fn timed<T: JsonSchema + DeserializeOwned + TimedInput>(flag: &'static str) -> JsonInput {
    JsonInput {
        at_key: Some(T::AT_KEY),
        ..json::<T>(flag)
    }
}

/// This step's evidence list, the same for every command that takes it.
const EVIDENCE: JsonInput = json::<Evidence>("evidence");

/// A new run's approval gate (a person's file: no tool takes it).
const POLICY: JsonInput = json::<ApprovalPolicyInput>("approval-policy");

/// One command's definition.
pub struct CommandDef {
    pub name: &'static str,
    pub effect: Effect,
    pub offer: Offer,
    /// Its flags that take JSON, with their schemas.
    pub inputs: &'static [JsonInput],
    /// Its help page (`help/<name>.txt`): the reference's one line for it
    /// (the top-level help's), a blank line, then the page.
    pub text: &'static str,
    /// Its runnable example (`help/examples/<name>.sh`).
    pub example: &'static str,
}

impl CommandDef {
    /// Whether it changes state ([`Effect::OneEvent`] or [`Effect::Other`]).
    pub fn writes(&self) -> bool {
        self.effect != Effect::ReadOnly
    }

    /// Its JSON input `flag`, if that flag takes JSON.
    pub fn input(&self, flag: &str) -> Option<&'static JsonInput> {
        self.inputs.iter().find(|i| i.flag == flag)
    }
}

macro_rules! commands {
    ($($(#[$attr:meta])* $name:literal: $effect:ident, $offer:ident $([$($input:expr),* $(,)?])?;)*) => {
        &[$($(#[$attr])* CommandDef {
            name: $name,
            effect: Effect::$effect,
            offer: Offer::$offer,
            inputs: &[$($($input),*)?],
            text: include_str!(concat!("help/", $name, ".txt")),
            example: include_str!(concat!("help/examples/", $name, ".sh")),
        }),*]
    };
}

/// Every command, in the parser's order (that of the top-level help). The
/// help pages are applied in this order, so the taught tree, its man pages
/// and the MCP catalog keep it.
pub const COMMANDS: &[CommandDef] = commands![
    "state-root": ReadOnly, EveryMode;
    "init": OneEvent, Owner [POLICY];
    "verify": ReadOnly, EveryMode;
    "rebuild": Other, Never;
    "receipt-diagnose": ReadOnly, EveryMode;
    "resume-check": ReadOnly, EveryMode;
    "run-approve": OneEvent, Never [EVIDENCE];
    "run-start": OneEvent, Owner [EVIDENCE];
    "run-recovery-finish": OneEvent, Never [EVIDENCE];
    "run-recovery-start": OneEvent, Never [EVIDENCE];
    "run-fail": OneEvent, Never [EVIDENCE];
    "run-block": OneEvent, Never [EVIDENCE];
    "run-cancel": OneEvent, Never [EVIDENCE];
    "lane-create": OneEvent, Owner [EVIDENCE, timed::<LaneCreateInput>("input")];
    "lane-start": OneEvent, Owner [EVIDENCE];
    "startup-ack": OneEvent, Owner [EVIDENCE];
    "probe-ack": OneEvent, Owner [EVIDENCE];
    "lane-complete": OneEvent, Owner [EVIDENCE, json::<ChangedPaths>("changed-paths")];
    "lane-fail": OneEvent, Owner [EVIDENCE];
    "lane-block": OneEvent, Owner [EVIDENCE];
    "lane-cancel": OneEvent, Owner [EVIDENCE];
    "lane-reassign": OneEvent, Owner [EVIDENCE, timed::<ReassignInput>("input")];
    "replacement-repair": OneEvent, Owner [EVIDENCE];
    "replacement-block": OneEvent, Owner [EVIDENCE];
    "replacement-close": OneEvent, Owner [EVIDENCE];
    "heartbeat": OneEvent, Owner [EVIDENCE, timed::<HeartbeatInput>("input")];
    "stall-record": OneEvent, Owner [EVIDENCE, json::<StallDecision>("decision")];
    "stall-clear": OneEvent, Owner [EVIDENCE];
    "probe-sent": OneEvent, Owner [EVIDENCE];
    "interrupt-result": OneEvent, Owner [EVIDENCE];
    "liveness-check": ReadOnly, EveryMode;
    "approvals": ReadOnly, EveryMode;
    "approval-statement": ReadOnly, Never;
    "completion-check": ReadOnly, EveryMode;
    "topology-register": OneEvent, Owner [EVIDENCE, json::<Topology>("input")];
    "check-result": OneEvent, Owner [EVIDENCE, json::<CheckResultInput>("input")];
    "component-evidence": OneEvent, Owner [EVIDENCE, json::<ComponentEvidenceInput>("input")];
    "lane-resolve": OneEvent, Owner [EVIDENCE];
    "topology-remove": OneEvent, Owner [EVIDENCE];
    "complete": OneEvent, Owner [EVIDENCE];
    "resume": OneEvent, Owner [EVIDENCE];
    "recovery-run-create": Other, Never [EVIDENCE, POLICY, json::<RecoveryDiagnosisInput>("input")];
    "handoff-create": OneEvent, Owner [json::<HandoffReport>("input")];
    "live-report-create": OneEvent, Owner [json::<LiveReport>("input")];
    "key-generate": Other, Never;
    "sign-head": Other, Never;
    "prove-event": ReadOnly, EveryMode;
    "prove-append": ReadOnly, Never;
    "check-proof": ReadOnly, Never;
    "bundle-export": ReadOnly, Never;
    "bundle-verify": ReadOnly, Never;
    "attest": ReadOnly, Never;
    "publish": Other, Never;
    "otel-export": ReadOnly, Never;
    "status": ReadOnly, EveryMode;
    "log": ReadOnly, EveryMode;
    "report": ReadOnly, Never;
    "doctor": ReadOnly, EveryMode;
    "evidence-digest": ReadOnly, EveryMode [EVIDENCE];
    "completions": ReadOnly, Never;
    "man": ReadOnly, Never;
    #[cfg(feature = "mcp")]
    "mcp": ReadOnly, Never;
];

/// The command called `name`.
pub fn named(name: &str) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// The schema of `command`'s JSON input `flag`, when it has one.
pub fn input_schema(command: &str, flag: &str) -> Option<Value> {
    Some((named(command)?.input(flag)?.schema)())
}

/// Whether the command `name` changes state.
pub fn is_mutation(name: &str) -> bool {
    named(name).is_some_and(CommandDef::writes)
}

/// Whether the process arguments `args` (after the program's name) run a
/// [`Effect::OneEvent`] command: the command is the first argument after
/// the one global option, `--state-root`. Allocates nothing (the binary
/// asks before its first allocation).
pub fn is_one_event_mutation<'a>(mut args: impl Iterator<Item = &'a [u8]>) -> bool {
    let command = loop {
        match args.next() {
            Some(b"--state-root") => {
                args.next();
            }
            Some(arg) if arg.starts_with(b"--state-root=") => {}
            Some(arg) => break arg,
            None => return false,
        }
    };
    COMMANDS
        .iter()
        .any(|c| c.effect == Effect::OneEvent && c.name.as_bytes() == command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn asks(args: &[&str]) -> bool {
        is_one_event_mutation(args.iter().map(|a| a.as_bytes()))
    }

    #[test]
    fn the_command_is_found_after_the_global_option() {
        assert!(asks(&["heartbeat", "--run-id", "x"]));
        assert!(asks(&["--state-root", "verify", "heartbeat"]));
        assert!(asks(&["--state-root=/s", "lane-start"]));
        assert!(!asks(&["--state-root", "heartbeat", "verify"]));
        assert!(!asks(&["verify", "heartbeat"]));
        assert!(!asks(&["rebuild"]), "a mutation of another kind");
        assert!(!asks(&["--state-root"]));
        assert!(!asks(&[]));
    }

    /// The table and the parser name the same commands in the same order
    /// (teaching the tree keeps it), and each command's kind is what the
    /// reference's first line says ("Mutation." or not).
    #[test]
    fn the_registry_is_the_parsers_command_list() {
        let parser = crate::surface::Cli::command();
        let parsed: Vec<&str> = parser.get_subcommands().map(|c| c.get_name()).collect();
        let defined: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        assert_eq!(defined, parsed, "one definition per command, in its order");
        let taught = crate::surface::command();
        let listed: Vec<&str> = taught.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(listed, defined, "teaching keeps the order");
        for command in taught.get_subcommands() {
            let about = command
                .get_about()
                .map(|a| a.to_string())
                .unwrap_or_default();
            let def = named(command.get_name()).unwrap();
            assert_eq!(def.writes(), about.starts_with("Mutation"), "{about}");
        }
    }

    /// The flags that take JSON are the registry's inputs, command by
    /// command, and every command a mode offers has a schema for each.
    #[test]
    fn json_inputs_are_the_parsers_json_flags() {
        const JSON_FLAGS: [&str; 5] = [
            "evidence",
            "input",
            "decision",
            "changed-paths",
            "approval-policy",
        ];
        let parser = crate::surface::Cli::command();
        for command in parser.get_subcommands() {
            let def = named(command.get_name()).unwrap();
            let mut parsed: Vec<&str> = command
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|long| JSON_FLAGS.contains(long))
                .collect();
            let mut defined: Vec<&str> = def.inputs.iter().map(|i| i.flag).collect();
            parsed.sort_unstable();
            defined.sort_unstable();
            assert_eq!(defined, parsed, "{}", def.name);
            for input in def.inputs {
                let schema = (input.schema)();
                assert!(
                    matches!(schema["type"].as_str(), Some("array" | "object")),
                    "{} --{}: {schema}",
                    def.name,
                    input.flag
                );
            }
        }
    }

    /// A read-only command is offered in every mode or never, a mutation
    /// only to the owner or never: no mode lists a writer as read-only.
    #[test]
    fn offers_agree_with_effects() {
        for def in COMMANDS {
            match def.offer {
                Offer::EveryMode => assert_eq!(def.effect, Effect::ReadOnly, "{}", def.name),
                Offer::Owner => assert!(def.writes(), "{}", def.name),
                Offer::Never => {}
            }
        }
    }
}
