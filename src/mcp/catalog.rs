//! PURE: which commands a mode exposes as tools, their input schemas (read
//! off the clap tree, so a tool's arguments are the command's flags and can
//! never drift from the parser), the server-side check of a call's
//! arguments, and the argv it becomes. No I/O.

use clap::{ArgAction, Command};
use serde_json::{Map, Value, json};

use crate::receipt::schema::schema_of;
pub use crate::surface::registry::Mode;
use crate::surface::registry::{COMMANDS, CommandDef, Offer};

/// The tools `mode` offers (`surface::registry`): the read-only commands in
/// every mode, the owner's mutations in `owner` mode, in the order of the
/// top-level help.
pub fn offered(mode: Mode) -> impl Iterator<Item = &'static CommandDef> {
    COMMANDS.iter().filter(move |c| match c.offer {
        Offer::EveryMode => true,
        Offer::Owner => mode == Mode::Owner,
        Offer::Never => false,
    })
}

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

/// Flags whose values are the host's, not the model's (agent-tools.md §2:
/// authority comes from the host): when a step happens and the receipt
/// head a write must follow. No tool lists them, so the catalog a model
/// reads carries neither (agent-tools.md §4 "Small"); a host names them in
/// the call's `_meta` as `bluetape-flow/at` and `bluetape-flow/expected_head`
/// ([`HOST_META_PREFIX`]). Left out, a step happens at the server's clock
/// (cli-conventions §5 "One clock") and no head is fenced.
pub const HOST_FLAGS: &[&str] = &["at", "expected-head"];

/// The namespace of the host's values in a call's `_meta` (MCP's `_meta`
/// key prefix: labels, then a slash).
pub const HOST_META_PREFIX: &str = "bluetape-flow/";

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
    /// One of [`HOST_FLAGS`]: read from the call's `_meta`, never listed.
    pub hosted: bool,
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
    /// The server names the run its handle belongs to, and no argument
    /// does: the command takes `--owner-file` and `--run-id`, or (in
    /// `owner` mode, where the server is bound to one run) it is a read
    /// that requires `--run-id`.
    pub acts_on_the_handles_run: bool,
    /// The command requires `--at`: left out, the server gives its own
    /// clock (cli-conventions §5 "One clock"), so the argument is optional.
    pub at_defaults_to_now: bool,
    pub params: Vec<Param>,
}

/// The top-level type of `def`'s JSON input `flag` (`surface::registry`), if
/// that flag takes JSON: read off its schema.
fn json_kind(def: &CommandDef, flag: &str) -> Option<Kind> {
    let input = def.input(flag)?;
    let list = (input.schema)()["type"] == "array";
    Some(if list {
        Kind::JsonList
    } else {
        Kind::JsonObject
    })
}

/// The tools `mode` lists, read off the command tree `tree` (the CLI's,
/// help pages applied).
pub fn tools(tree: &Command, mode: Mode) -> Vec<ToolSpec> {
    offered(mode)
        .filter_map(|def| tree.find_subcommand(def.name).map(|c| spec(c, def, mode)))
        .collect()
}

/// A tool's description (agent-tools.md §4): what it does (the first
/// sentence of its help page, to its first colon or semicolon, without
/// asides in parentheses), when to call it and what comes next (the
/// reference's "Safe next"). When to call a read-only tool is the page's
/// "Call it …" sentence, to its first semicolon; a mutation's first
/// sentence, what it records, says when already (right after that
/// happened), so its page's "Call it" stays in `--help`. Not the
/// reference's first line itself: its kind is the read-only annotation,
/// and the rest is the same on every command.
fn describe(about: &str, long_about: &str, read_only: bool) -> String {
    let page = long_about
        .strip_prefix(about)
        .unwrap_or(long_about)
        .trim_start();
    let first = page.split("\n\n").next().unwrap_or_default();
    let text = first.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = sentences(&text);
    let mut out: Vec<String> = Vec::new();
    if let Some(what) = said.first() {
        out.push(format!("{}.", without_asides(clause(what, &[": ", "; "]))));
    }
    if let Some(when) = said
        .iter()
        .skip(1)
        .find(|s| read_only && s.starts_with("Call it"))
    {
        // Its colon introduces what to do after it (liveness-check's
        // actions): kept.
        out.push(format!("{}.", clause(when, &["; "])));
    }
    if let Some(next) = about.split("Safe next: ").nth(1) {
        let next = sentences(next).first().copied().unwrap_or(next);
        out.push(format!("Next: {}.", next.trim_end_matches('.')));
    }
    out.join(" ")
}

/// Where `text` is inside parentheses: the depth before each byte.
fn depths(text: &str) -> impl Iterator<Item = (usize, char, usize)> + '_ {
    let mut depth = 0usize;
    text.char_indices().map(move |(i, c)| {
        let before = depth;
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        (i, c, before)
    })
}

/// The sentences of `text`: split after a `.` that is followed by a space,
/// outside parentheses and not ending an abbreviation ("e.g.", "i.e.").
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c, depth) in depths(text) {
        let abbreviation = ["e.g", "i.e"].iter().any(|a| text[..i].ends_with(a));
        if c == '.' && depth == 0 && !abbreviation && text[i + 1..].starts_with(' ') {
            out.push(text[start..=i].trim());
            start = i + 1;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(text[start..].trim());
    }
    out
}

/// A sentence to the first of `marks` outside parentheses, without its
/// final period.
fn clause<'a>(sentence: &'a str, marks: &[&str]) -> &'a str {
    let end = depths(sentence)
        .find(|&(i, _, depth)| depth == 0 && marks.iter().any(|m| sentence[i..].starts_with(m)))
        .map_or(sentence.len(), |(i, _, _)| i);
    sentence[..end].trim_end_matches('.').trim_end()
}

/// `text` without its asides in parentheses (nested ones included).
fn without_asides(text: &str) -> String {
    let mut out = String::new();
    for (_, c, depth) in depths(text) {
        if depth == 0 && c != '(' {
            out.push(c);
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn spec(command: &Command, def: &CommandDef, mode: Mode) -> ToolSpec {
    let name = def.name;
    let mut params = Vec::new();
    let flags = || command.get_arguments().filter_map(|a| a.get_long());
    let takes_owner = flags().any(|flag| flag == "owner-file");
    let makes_owner = flags().any(|flag| flag == "new-owner-file");
    let run_id = command
        .get_arguments()
        .find(|a| a.get_long() == Some("run-id"));
    let acts_on_the_handles_run =
        run_id.is_some_and(|arg| takes_owner || (mode == Mode::Owner && arg.is_required_set()));
    for arg in command.get_arguments() {
        let Some(flag) = arg.get_long() else { continue };
        // A tool acting with the server's handle acts on the handle's run:
        // the server names it (agent-tools.md §2).
        let servers =
            WITHHELD_FLAGS.contains(&flag) || (acts_on_the_handles_run && flag == "run-id");
        if flag == "help" || servers {
            continue;
        }
        let kind = match json_kind(def, flag) {
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
            required: arg.is_required_set() && flag != "at",
            hosted: HOST_FLAGS.contains(&flag),
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
        !def.writes(),
    );
    ToolSpec {
        name: name.to_string(),
        description,
        read_only: !def.writes(),
        takes_owner,
        makes_owner,
        acts_on_the_handles_run,
        at_defaults_to_now: command
            .get_arguments()
            .any(|a| a.get_long() == Some("at") && a.is_required_set()),
        params,
    }
}

/// The schema of a text flag, typed by what its value must be (the same
/// rules the JSON inputs' keys follow, coordinator::inputs).
fn text_schema(param: &Param) -> Value {
    use crate::coordinator::inputs::{Assignment, UtcTimestamp};
    use crate::receipt::primitives::Identifier;
    match param.flag.as_str() {
        // An enum of strings says the type.
        _ if !param.choices.is_empty() => json!({"enum": param.choices}),
        "run-id"
        | "lane-id"
        | "agent-id"
        | "replacement-lane-id"
        | "resolution-lane-id"
        | "component-id"
        | "lane" => schema_of::<Identifier>(),
        // The bundled manifest's, as init checks them.
        "workflow-type" => json!({"enum": crate::receipt::manifest::bundled()
            .map(|m| m.contract["workflow_types"].clone())
            .unwrap_or_default()}),
        "deadline" => schema_of::<UtcTimestamp>(),
        "reason" => schema_of::<Assignment>(),
        _ => json!({"type": "string", "minLength": 1}),
    }
}

fn param_schema(tool: &str, param: &Param) -> Value {
    let json_input = crate::surface::registry::input_schema(tool, &param.flag);
    let mut schema = match param.kind {
        Kind::Text => text_schema(param),
        Kind::Integer => json!({"type": "integer", "minimum": 0}),
        Kind::Flag => json!({"type": "boolean"}),
        Kind::TextList if param.flag == "component" => {
            json!({"type": "array", "items": schema_of::<crate::receipt::primitives::Identifier>(), "minItems": 1})
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
    let help = if SHARED_FLAGS.contains(&param.flag.as_str()) {
        String::new()
    } else {
        short_help(&param.help)
    };
    // "The workflow_type" says nothing the name does not.
    let help = match help.strip_prefix("The ") {
        Some(name) if name == param.name => String::new(),
        _ => help,
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
const SHARED_FLAGS: &[&str] = &["run-id", "lane-id", "agent-id", "evidence"];

/// What [`SHARED_FLAGS`] leave out, said once for every tool (the
/// server's instructions).
pub const SHARED_ARGUMENTS: &str = "run_id names the run a read-only server's tool reads (an owner server acts on, and reads, the run of its handle, and only status may name another); evidence is this step's bounded proof (a fresh list for every step). A step happens at the server's clock (status answers it as at): the time and the head a write must follow are the host's, in the call's _meta (bluetape-flow/at: UTC, at most 300 s after the server's clock; bluetape-flow/expected_head: the receipt's last checksum), never arguments.";

/// A flag's help as a tool argument's description: its first clause,
/// without what only a command line needs (files, `-`, "see below") or what
/// the schema says already (a leading `<TEXT>:` or `a|b|c:`, "a JSON
/// object", "one of", limits); placeholders and flags named as the
/// arguments are.
fn short_help(help: &str) -> String {
    let help = match help.split_once(": ") {
        Some((kind, rest)) if !kind.contains(' ') => rest,
        _ => help,
    };
    let text = as_arguments(help);
    let cut = [
        ": inline, -",
        " (",
        "; ",
        ", a JSON ",
        ", e.g",
        ", one line",
        ", one of",
        ", an identifier",
    ];
    let end = depths(&text)
        .find(|&(i, _, depth)| depth == 0 && cut.iter().any(|m| text[i..].starts_with(m)))
        .map_or(text.len(), |(i, _, _)| i);
    let text = text[..end].trim().trim_end_matches([',', ';', ':', '.']);
    let first = sentences(text).first().copied().unwrap_or_default();
    let mut chars = first.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Help text with its `<PLACEHOLDER>`s and `--flags` as a model knows
/// them: `<LANE_ID>` is lane_id, `--lane-id` is lane_id, `<N>` stays N, a
/// placeholder that only abbreviates the word before it (`sequence <SEQ>`)
/// goes, and so does `<FILE>`.
fn as_arguments(help: &str) -> String {
    let mut out = String::new();
    let mut rest = help.replace("<FILE> with ", "").replace(" <FILE>", "");
    while let Some(open) = rest.find(['<', '-']) {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        let name_end = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(s.len())
        };
        if let Some(inner) = from.strip_prefix('<')
            && let Some(close) = inner.find('>')
            && inner[..close]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            let name = &inner[..close];
            let word = name.to_lowercase();
            let previous = out.split_whitespace().last().unwrap_or_default();
            if name.len() == 1 {
                out.push_str(name);
            } else if previous.len() > word.len() && previous.starts_with(&word) {
                out.truncate(out.trim_end().len());
            } else {
                out.push_str(&word);
            }
            rest = inner[close + 1..].to_string();
        } else if let Some(flag) = from.strip_prefix("--")
            && flag.starts_with(|c: char| c.is_ascii_lowercase())
        {
            let end = name_end(flag);
            out.push_str(&flag[..end].replace('-', "_"));
            rest = flag[end..].to_string();
        } else {
            let mut chars = from.chars();
            out.extend(chars.next());
            rest = chars.as_str().to_string();
        }
    }
    out.push_str(&rest);
    out
}

/// The tool's input schema: its flags in snake case, nothing else
/// (`additionalProperties: false`, checked again by [`checked`]), with the
/// leaves it repeats named once in `$defs` ([`factor`]).
pub fn input_schema(tool: &ToolSpec) -> Map<String, Value> {
    let mut schema = spelled_out_schema(tool);
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        let defs = factor(properties);
        if !defs.is_empty() {
            schema.insert("$defs".into(), Value::Object(defs));
        }
    }
    schema
}

/// [`input_schema`] with every leaf spelled out where it applies.
fn spelled_out_schema(tool: &ToolSpec) -> Map<String, Value> {
    let listed = || tool.params.iter().filter(|p| !p.hosted);
    let properties: Map<String, Value> = listed()
        .map(|p| (p.name.clone(), param_schema(&tool.name, p)))
        .collect();
    let required: Vec<Value> = listed()
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

/// The leaf schemas many arguments share (coordinator::inputs): ids,
/// timestamps, SHA-256 hex.
fn shared_leaves() -> [(&'static str, Value); 3] {
    use crate::coordinator::inputs::UtcTimestamp;
    use crate::receipt::primitives::{Identifier, Sha256Hex};
    [
        ("id", schema_of::<Identifier>()),
        ("time", schema_of::<UtcTimestamp>()),
        ("sha256", schema_of::<Sha256Hex>()),
    ]
}

/// Name a shared leaf once in the tool's `$defs` and refer to it
/// (`{"$ref": "#/$defs/id"}`, a description kept beside the reference)
/// wherever that is shorter than spelling it out each time. Returns the
/// definitions used.
fn factor(properties: &mut Map<String, Value>) -> Map<String, Value> {
    let length = |value: &Value| serde_json::to_string(value).map_or(0, |s| s.len());
    let mut defs = Map::new();
    for (name, leaf) in shared_leaves() {
        let reference = json!({"$ref": format!("#/$defs/{name}")});
        let uses = properties
            .values_mut()
            .map(|schema| leaves(schema, &leaf, None))
            .sum::<usize>();
        // `"name":` and a comma; the first also pays for `"$defs":{}`.
        let defined = length(&leaf) + name.len() + 4 + if defs.is_empty() { 11 } else { 0 };
        if uses * length(&leaf).saturating_sub(length(&reference)) > defined {
            for schema in properties.values_mut() {
                leaves(schema, &leaf, Some(&reference));
            }
            defs.insert(name.to_string(), leaf);
        }
    }
    defs
}

/// How many schemas in `schema` are `leaf` (a description aside); with
/// `reference`, each becomes it (its description kept).
fn leaves(schema: &mut Value, leaf: &Value, reference: Option<&Value>) -> usize {
    match schema {
        Value::Object(map) => {
            let mut bare = map.clone();
            let description = bare.remove("description");
            if Value::Object(bare) == *leaf {
                if let Some(Value::Object(reference)) = reference {
                    let mut replaced = reference.clone();
                    replaced.extend(description.map(|d| ("description".to_string(), d)));
                    *map = replaced;
                }
                return 1;
            }
            map.values_mut().map(|v| leaves(v, leaf, reference)).sum()
        }
        Value::Array(items) => items.iter_mut().map(|v| leaves(v, leaf, reference)).sum(),
        _ => 0,
    }
}

/// Check a call's arguments against the tool, server-side (a client need
/// not have checked the schema): every key must be a parameter, of its
/// type, and every required parameter present. The host's values
/// ([`HOST_FLAGS`]) come from the call's `_meta` (`host`), and only from
/// there; a host may stamp every call alike, so one the tool does not take
/// is passed over, but a name under [`HOST_META_PREFIX`] that is none of
/// them is refused. Returns the arguments the command is built from
/// (`null` and `false` left out, as not given), or the refusal's message.
pub fn checked(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    host: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let hosted_name = |flag: &str| flag.replace('-', "_");
    if let Some(key) = host.keys().find(|k| {
        k.strip_prefix(HOST_META_PREFIX)
            .is_some_and(|name| !HOST_FLAGS.iter().any(|f| hosted_name(f) == name))
    }) {
        return Err(format!(
            "_meta names `{key}`: a host names only {}",
            HOST_FLAGS
                .iter()
                .map(|f| format!("{HOST_META_PREFIX}{}", hosted_name(f)))
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }
    let names: Vec<&str> = tool
        .params
        .iter()
        .filter(|p| !p.hosted)
        .map(|p| p.name.as_str())
        .collect();
    if let Some(unknown) = args.keys().find(|k| !names.contains(&k.as_str())) {
        if unknown == "run_id" && tool.acts_on_the_handles_run {
            return Err(format!(
                "{} takes no argument `run_id`: it acts on the run of the server's owner handle; drop run_id",
                tool.name
            ));
        }
        if tool.params.iter().any(|p| p.hosted && &p.name == unknown) {
            return Err(format!(
                "{} takes no argument `{unknown}`: {} is the host's, in the call's _meta as {HOST_META_PREFIX}{unknown}; drop {unknown}",
                tool.name,
                if unknown == "at" {
                    "a step happens at the server's clock, and another time"
                } else {
                    "the head a write must follow"
                }
            ));
        }
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
    let mut out = Map::new();
    for param in &tool.params {
        let (given, label) = if param.hosted {
            let key = format!("{HOST_META_PREFIX}{}", param.name);
            (host.get(&key), format!("_meta `{key}`"))
        } else {
            (args.get(&param.name), format!("argument `{}`", param.name))
        };
        // `null` is taken as "not given" (clients send it for optional
        // arguments); for a required one it is missing.
        let Some(value) = given.filter(|v| !v.is_null()) else {
            if param.required {
                return Err(format!("{} needs the argument `{}`", tool.name, param.name));
            }
            continue;
        };
        let wrong = |what: &str| format!("{label} must be {what}");
        match param.kind {
            Kind::Text => {
                let Value::String(text) = value else {
                    return Err(wrong("a string"));
                };
                if !param.choices.is_empty() && !param.choices.contains(text) {
                    return Err(wrong(&format!("one of {}", param.choices.join(", "))));
                }
            }
            Kind::Integer if value.as_u64().is_none() => {
                return Err(wrong("a non-negative integer"));
            }
            Kind::Integer => {}
            Kind::Flag if !value.is_boolean() => return Err(wrong("a boolean")),
            Kind::Flag if value == &Value::Bool(false) => continue,
            Kind::Flag => {}
            Kind::TextList => {
                let Value::Array(items) = value else {
                    return Err(wrong("a list of strings"));
                };
                if items.is_empty() && param.required {
                    return Err(wrong("a non-empty list of strings"));
                }
                if !items.iter().all(Value::is_string) {
                    return Err(wrong("a list of strings"));
                }
            }
            Kind::JsonList if !value.is_array() => return Err(wrong("a JSON list")),
            Kind::JsonObject if !value.is_object() => return Err(wrong("a JSON object")),
            Kind::JsonList | Kind::JsonObject => {}
        }
        out.insert(param.name.clone(), value.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Command {
        crate::surface::command()
    }

    fn tool(mode: Mode, name: &str) -> ToolSpec {
        tools(&tree(), mode)
            .into_iter()
            .find(|t| t.name == name)
            .unwrap()
    }

    /// Each mode lists exactly what the registry offers it, read-only
    /// annotations where the command writes nothing.
    #[test]
    fn each_mode_lists_what_the_registry_offers_it() {
        let tree = tree();
        for mode in [Mode::ReadOnly, Mode::Owner] {
            let listed: Vec<(String, bool)> = tools(&tree, mode)
                .into_iter()
                .map(|t| (t.name, t.read_only))
                .collect();
            let offered: Vec<(String, bool)> = COMMANDS
                .iter()
                .filter(|c| {
                    c.offer == Offer::EveryMode || (mode == Mode::Owner && c.offer == Offer::Owner)
                })
                .map(|c| (c.name.to_string(), !c.writes()))
                .collect();
            assert_eq!(listed, offered, "{}", mode.name());
        }
    }

    /// Every JSON argument of every tool has its command's schema from the
    /// registry (no untyped fallback), its top-level type the argument's.
    #[test]
    fn every_json_argument_has_its_registry_schema() {
        for tool in tools(&tree(), Mode::Owner) {
            for param in &tool.params {
                let kind = match param.kind {
                    Kind::JsonList => "array",
                    Kind::JsonObject => "object",
                    _ => continue,
                };
                let schema = crate::surface::registry::input_schema(&tool.name, &param.flag)
                    .unwrap_or_else(|| panic!("{} --{} has no schema", tool.name, param.flag));
                assert_eq!(schema["type"], kind, "{} --{}", tool.name, param.flag);
            }
        }
    }

    /// The instructions say what `at` is once for all tools: it is the
    /// host's, never required, the server's clock stands in where the
    /// command needs one, and the shared text says so.
    #[test]
    fn the_shared_text_of_at_holds_for_every_tool() {
        let tree = tree();
        let mut stamped = 0;
        for t in tools(&tree, Mode::Owner) {
            let Some(at) = t.params.iter().find(|p| p.flag == "at") else {
                continue;
            };
            assert!(!at.required && at.hosted, "{}", t.name);
            let command = tree.find_subcommand(&t.name).unwrap();
            let required = command
                .get_arguments()
                .any(|a| a.get_long() == Some("at") && a.is_required_set());
            assert_eq!(t.at_defaults_to_now, required, "{}", t.name);
            stamped += usize::from(required);
        }
        assert!(stamped > 0);
        assert!(
            SHARED_ARGUMENTS.contains("A step happens at the server's clock"),
            "{SHARED_ARGUMENTS}"
        );
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
                        || (long == "run-id" && t.acts_on_the_handles_run)
                        || (long == "at" && t.at_defaults_to_now)
                        || t.params.iter().any(|p| p.flag == long),
                    "{} requires --{long}, which no argument supplies",
                    t.name
                );
            }
        }
    }

    /// `schema` with every `$ref` replaced by the definition it names
    /// (its siblings kept) and no `$defs`.
    fn inlined(schema: &Map<String, Value>) -> Map<String, Value> {
        fn walk(value: &Value, defs: &Map<String, Value>) -> Value {
            match value {
                Value::Object(map) => {
                    let mut out = Map::new();
                    if let Some(Value::String(target)) = map.get("$ref") {
                        let name = target.strip_prefix("#/$defs/").unwrap();
                        out.extend(defs[name].as_object().unwrap().clone());
                    }
                    for (key, value) in map {
                        if key != "$ref" {
                            out.insert(key.clone(), walk(value, defs));
                        }
                    }
                    Value::Object(out)
                }
                Value::Array(items) => Value::Array(items.iter().map(|v| walk(v, defs)).collect()),
                other => other.clone(),
            }
        }
        let mut schema = schema.clone();
        let defs = match schema.remove("$defs") {
            Some(Value::Object(defs)) => defs,
            _ => Map::new(),
        };
        walk(&Value::Object(schema), &defs)
            .as_object()
            .unwrap()
            .clone()
    }

    /// A definition is only a name for what it replaces: with every
    /// reference inlined, each schema is the one spelled out, and it is
    /// shorter than that one.
    #[test]
    fn defs_only_name_what_they_replace() {
        let mut referred = 0;
        for t in tools(&tree(), Mode::Owner) {
            let schema = input_schema(&t);
            let spelled_out = spelled_out_schema(&t);
            assert_eq!(inlined(&schema), spelled_out, "{}", t.name);
            let text = Value::Object(schema.clone()).to_string();
            assert!(
                text.len() <= Value::Object(spelled_out).to_string().len(),
                "{}",
                t.name
            );
            for name in schema
                .get("$defs")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|d| d.keys())
            {
                let uses = text.matches(&format!("\"#/$defs/{name}\"")).count();
                assert!(uses >= 2, "{}: $defs/{name} used {uses} time(s)", t.name);
                referred += uses;
            }
        }
        assert!(referred > 0);
    }

    #[test]
    fn schemas_are_typed_and_closed() {
        let lane = tool(Mode::Owner, "lane-complete");
        let schema = inlined(&input_schema(&lane));
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["properties"]["evidence"]["type"], "array");
        assert_eq!(schema["properties"]["evidence"]["maxItems"], 8);
        assert_eq!(schema["properties"]["changed_paths"]["type"], "array");
        // It acts with the server's handle, on the handle's run.
        assert!(schema["properties"].get("run_id").is_none());
        assert!(lane.takes_owner && lane.acts_on_the_handles_run);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in ["lane_id", "agent_id", "evidence", "changed_paths"] {
            assert!(required.contains(&name), "{name}");
        }
        let topology = tool(Mode::Owner, "topology-register");
        let schema = inlined(&input_schema(&topology));
        assert_eq!(schema["properties"]["input"]["type"], "array");
        let check = tool(Mode::ReadOnly, "liveness-check");
        let schema = inlined(&input_schema(&check));
        assert!(schema["properties"]["command_status"]["enum"].is_array());
    }

    #[test]
    fn calls_are_checked_server_side() {
        let lane = tool(Mode::Owner, "lane-start");
        let none = Map::new();
        let good =
            json!({"lane_id": "l", "agent_id": "a", "evidence": [{"kind": "k", "summary": ""}]});
        let good = good.as_object().unwrap();
        let with = |key: &str, value: Value| {
            let mut args = good.clone();
            args.insert(key.into(), value);
            args
        };
        assert_eq!(
            &checked(&lane, &with("reason", Value::Null), &none).unwrap_err(),
            "lane-start takes no argument `reason` (it takes: evidence, lane_id, agent_id); the owner handle, tokens and identities are never arguments"
        );
        assert_eq!(&checked(&lane, good, &none).unwrap(), good);
        for (extra, value) in [
            ("owner_file", json!("/tmp/x")),
            ("approved_by", json!("me")),
            ("token", json!("t")),
            ("run_id", json!("r")),
        ] {
            let e = checked(&lane, &with(extra, value), &none).unwrap_err();
            assert!(e.contains(extra), "{e}");
        }
        assert_eq!(
            checked(&lane, &with("run_id", json!("r")), &none).unwrap_err(),
            "lane-start takes no argument `run_id`: it acts on the run of the server's owner handle; drop run_id"
        );
        assert_eq!(
            checked(&lane, &with("agent_id", json!(5)), &none).unwrap_err(),
            "argument `agent_id` must be a string"
        );
        assert!(
            checked(&lane, &with("evidence", json!("[]")), &none)
                .unwrap_err()
                .contains("JSON list")
        );
        let mut missing = good.clone();
        missing.remove("lane_id");
        assert!(
            checked(&lane, &missing, &none)
                .unwrap_err()
                .contains("lane_id")
        );
    }

    /// The clock and the head fence are the host's (agent-tools.md §2):
    /// no schema lists them, a model naming one as an argument is told
    /// where it goes, and a host's `_meta` values reach the command (a
    /// tool that takes neither passes them over; `null` is not given).
    #[test]
    fn the_clock_and_the_head_fence_come_only_from_the_host() {
        for mode in [Mode::ReadOnly, Mode::Owner] {
            for t in tools(&tree(), mode) {
                let schema = Value::Object(input_schema(&t));
                for flag in HOST_FLAGS {
                    let name = flag.replace('-', "_");
                    assert!(schema["properties"].get(&name).is_none(), "{}", t.name);
                }
            }
        }
        let lane = tool(Mode::Owner, "lane-start");
        let args =
            json!({"lane_id": "l", "agent_id": "a", "evidence": [{"kind": "k", "summary": ""}]});
        let args = args.as_object().unwrap();
        let head = "0".repeat(64);
        let host = json!({"bluetape-flow/at": "2026-07-14T01:00:00Z",
                          "bluetape-flow/expected_head": head, "progressToken": 7});
        let built = checked(&lane, args, host.as_object().unwrap()).unwrap();
        assert_eq!(built["at"], "2026-07-14T01:00:00Z");
        assert_eq!(built["expected_head"], head.as_str());
        assert!(built.get("progressToken").is_none());
        let nulls = json!({"bluetape-flow/at": null});
        let built = checked(&lane, args, nulls.as_object().unwrap()).unwrap();
        assert!(built.get("at").is_none());
        for (name, said) in [
            (
                "at",
                "a step happens at the server's clock, and another time",
            ),
            ("expected_head", "the head a write must follow"),
        ] {
            let mut sent = args.clone();
            sent.insert(name.into(), json!("x"));
            let e = checked(&lane, &sent, &Map::new()).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "lane-start takes no argument `{name}`: {said} is the host's, in the call's _meta as bluetape-flow/{name}; drop {name}"
                )
            );
        }
        let e = checked(
            &lane,
            args,
            json!({"bluetape-flow/at": 5}).as_object().unwrap(),
        )
        .unwrap_err();
        assert_eq!(e, "_meta `bluetape-flow/at` must be a string");
        let e = checked(
            &lane,
            args,
            json!({"bluetape-flow/owner_file": "/x"})
                .as_object()
                .unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "_meta names `bluetape-flow/owner_file`: a host names only bluetape-flow/at and bluetape-flow/expected_head"
        );
        // A host stamping every call alike: a tool that takes no clock
        // passes it over.
        let verify = tool(Mode::ReadOnly, "verify");
        let built = checked(
            &verify,
            json!({"run_id": "r"}).as_object().unwrap(),
            host.as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(Value::Object(built), json!({"run_id": "r"}));
    }

    /// In owner mode the server is bound to its handle's run: a read that
    /// requires a run takes none there (the server names it), and names
    /// it in read-only mode; `status`, whose run is optional, keeps it.
    #[test]
    fn owner_mode_reads_the_handles_run() {
        for name in ["verify", "liveness-check", "completion-check", "log"] {
            let owner = tool(Mode::Owner, name);
            assert!(
                owner.acts_on_the_handles_run && !owner.takes_owner,
                "{name}"
            );
            assert!(!owner.params.iter().any(|p| p.name == "run_id"), "{name}");
            let read_only = tool(Mode::ReadOnly, name);
            assert!(!read_only.acts_on_the_handles_run, "{name}");
            assert!(
                read_only
                    .params
                    .iter()
                    .any(|p| p.name == "run_id" && p.required)
            );
        }
        let status = tool(Mode::Owner, "status");
        assert!(!status.acts_on_the_handles_run);
        assert!(
            status
                .params
                .iter()
                .any(|p| p.name == "run_id" && !p.required)
        );
    }

    /// agent-tools.md §4: every description, a tool's or an argument's, is
    /// whole: its parentheses and quotes balance, and it was not cut after
    /// an abbreviation or on a word that needs another after it.
    #[test]
    fn descriptions_are_whole_sentences() {
        fn check(tool: &str, text: &str, sentences_of_a_tool: bool) {
            let mut depth = 0i32;
            for c in text.chars() {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                assert!(depth >= 0, "{tool}: {text:?}");
            }
            assert_eq!(depth, 0, "{tool}: unbalanced parentheses in {text:?}");
            for quote in ['"', '`'] {
                assert!(text.matches(quote).count() % 2 == 0, "{tool}: {text:?}");
            }
            assert!(text.starts_with(char::is_uppercase), "{tool}: {text:?}");
            let pieces = if sentences_of_a_tool {
                sentences(text)
            } else {
                vec![text]
            };
            for piece in pieces {
                let body = if sentences_of_a_tool {
                    piece
                        .strip_suffix('.')
                        .unwrap_or_else(|| panic!("{tool}: {piece:?} does not end a sentence"))
                } else {
                    assert!(!piece.ends_with(['.', ',', ';', ':']), "{tool}: {piece:?}");
                    piece
                };
                let last = body.rsplit([' ', '(']).next().unwrap_or_default();
                assert!(
                    !["a", "an", "the", "and", "or", "e.g", "i.e", ""].contains(&last),
                    "{tool}: {piece:?} is cut mid-sentence"
                );
            }
        }
        for t in tools(&tree(), Mode::Owner) {
            check(&t.name, &t.description, true);
            let schema = input_schema(&t);
            let described = schema["properties"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|p| p["description"].as_str());
            for text in described {
                check(&t.name, text, false);
            }
        }
        assert_eq!(
            tool(Mode::Owner, "lane-fail").description,
            "Records that the lane's work failed. Next: lane-resolve or completion-check."
        );
    }

    /// A value for each argument of `tool`, of its kind (the JSON inputs
    /// as their schemas' smallest instances do not matter here: what is
    /// compared is the command built, not what it does).
    fn sample(tool: &ToolSpec) -> Map<String, Value> {
        tool.params
            .iter()
            .map(|p| {
                let value = match p.kind {
                    Kind::Text if !p.choices.is_empty() => json!(p.choices.last().unwrap()),
                    Kind::Text => json!(format!("{}-value", p.name)),
                    Kind::Integer => json!(7),
                    Kind::Flag => json!(true),
                    Kind::TextList => json!([format!("{}-1", p.name), format!("{}-2", p.name)]),
                    Kind::JsonList => json!([{"kind": "k", "summary": p.name}]),
                    Kind::JsonObject => json!({"key": p.name}),
                };
                (p.name.clone(), value)
            })
            .collect()
    }

    /// The command line the arguments `values` of `tool` spell, with the
    /// flags the server adds: JSON inputs inline, `--flag=value` form.
    fn command_line(tool: &ToolSpec, values: &Map<String, Value>) -> Vec<String> {
        let mut argv = vec!["bluetape-flow".to_string(), tool.name.clone()];
        for (name, value) in values {
            let flag = format!("--{}", name.replace('_', "-"));
            match value {
                Value::Bool(true) => argv.push(flag),
                Value::Array(items) if items.iter().all(Value::is_string) => argv.extend(
                    items
                        .iter()
                        .map(|i| format!("{flag}={}", i.as_str().unwrap())),
                ),
                Value::String(text) => argv.push(format!("{flag}={text}")),
                other => argv.push(format!("{flag}={other}")),
            }
        }
        argv
    }

    /// agent-tools.md §4 "Values, not files": every tool of every mode,
    /// given a value for each argument (and the server's own flags), is
    /// the very command its command line parses to, field for field, JSON
    /// inputs included (a received value and the same JSON inline print
    /// alike). A field the values missed or named otherwise than its flag
    /// would show here.
    #[test]
    fn a_call_builds_the_command_its_command_line_parses_to() {
        use clap::FromArgMatches;
        let tree = tree();
        for mode in [Mode::ReadOnly, Mode::Owner] {
            for tool in tools(&tree, mode) {
                let mut values = sample(&tool);
                if tool.takes_owner {
                    values.insert("owner_file".into(), json!("/s/handles/main.owner"));
                }
                if tool.acts_on_the_handles_run {
                    values.insert("run_id".into(), json!("run-1"));
                }
                if tool.makes_owner {
                    values.insert("new_owner_file".into(), json!("/s/handles/main-r1.owner"));
                }
                let built = crate::surface::command_from(&tool.name, values.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", tool.name));
                let argv = command_line(&tool, &values);
                let matches = crate::surface::command()
                    .try_get_matches_from(&argv)
                    .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let parsed = crate::surface::Cli::from_arg_matches(&matches)
                    .unwrap()
                    .command;
                assert_eq!(format!("{built:?}"), format!("{parsed:?}"), "{}", tool.name);
            }
        }
        // Defaults a call leaves out are the command line's.
        let check = tool(Mode::ReadOnly, "liveness-check");
        let mut values = sample(&check);
        values.remove("command_status");
        values.remove("explain");
        let built = crate::surface::command_from(&check.name, values.clone()).unwrap();
        let parsed = crate::surface::Cli::from_arg_matches(
            &crate::surface::command()
                .try_get_matches_from(command_line(&check, &values))
                .unwrap(),
        )
        .unwrap()
        .command;
        assert_eq!(format!("{built:?}"), format!("{parsed:?}"));
        assert!(format!("{built:?}").contains("command_status: \"unknown\""));
    }

    #[test]
    fn sentences_end_outside_parentheses_and_abbreviations() {
        assert_eq!(
            sentences("It failed (e.g. a review. Or not) here. Call it now."),
            ["It failed (e.g. a review. Or not) here.", "Call it now."]
        );
        assert_eq!(sentences("Use e.g. this. Then"), ["Use e.g. this.", "Then"]);
        assert_eq!(
            clause("Do it (a: b; c): then; more", &[": ", "; "]),
            "Do it (a: b; c)"
        );
        assert_eq!(without_asides("Go (x (y) z) on"), "Go on");
        assert_eq!(short_help("<TEXT>: why it is (required)"), "Why it is");
        assert_eq!(
            short_help("Only events after sequence <SEQ>, not --lane-id (x)"),
            "Only events after sequence, not lane_id"
        );
    }
}
