//! The field tables of the help's input-file sections, generated from the
//! input types (architecture.md §3a: "every `--help` page's input
//! section" is derived from the definition). A row is a key, its type and
//! whether it is required (from the schema, and `--at` from the
//! registry), its rules (from the schema's keywords and each leaf type's
//! rule in words, `receipt::schema::RULE`), then the field's doc comment.
//! So a key, its type, its required-ness and its leaf rule cannot drift
//! from the type the command reads.

use std::collections::HashSet;

use serde_json::Value;

use crate::receipt::schema::RULE;
use crate::surface::registry::JsonInput;

/// The width the tables are wrapped to (the hand-written parts of the
/// pages keep to it as well).
const WIDTH: usize = 79;

/// Whether a key must be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    Required,
    /// Required unless `--at` gives it (the event's time).
    RequiredUnlessAt,
    /// Optional, with the default the schema shows, if any.
    Optional(Option<Value>),
    /// The row for each entry of a list of strings.
    Entry,
}

impl Presence {
    pub fn is_required(&self) -> bool {
        matches!(self, Presence::Required | Presence::RequiredUnlessAt)
    }
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The key, or `(each entry)` for a list of strings.
    pub key: String,
    pub presence: Presence,
    /// Its type, presence, rules and prose, as one sentence or more.
    pub text: String,
}

/// An input's generated section: its heading's description (after
/// `<FILE>: `) and its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub shape: String,
    pub rows: Vec<Row>,
}

/// The table of `input`, from its type (`JsonInput::doc`).
pub fn table(input: &JsonInput) -> Table {
    let doc = (input.doc)();
    let schema = &doc.schema;
    let mut seen = HashSet::new();
    let (shape, object) = match schema["type"].as_str() {
        Some("array") => {
            let items = &schema["items"];
            let count = count(schema, "Items");
            let count = if count.is_empty() {
                count
            } else {
                format!("{count} ")
            };
            if items["type"] == "object" {
                (format!("a JSON list of {count}objects"), items)
            } else {
                let (kind, rules) = describe(items, &mut seen);
                let distinct = if schema["uniqueItems"] == true {
                    "distinct "
                } else {
                    ""
                };
                let shape = format!("a JSON list of {count}{distinct}{kind}s");
                let row = Row {
                    key: "(each entry)".to_string(),
                    presence: Presence::Entry,
                    text: sentence(&kind, &rules, items),
                };
                return Table {
                    shape,
                    rows: vec![row],
                };
            }
        }
        _ => ("a JSON object".to_string(), schema),
    };
    let required: Vec<&str> = object["required"]
        .as_array()
        .map(|keys| keys.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let rows = doc
        .fields
        .iter()
        .map(|&key| {
            let field = &object["properties"][key];
            let presence = if !required.contains(&key) {
                Presence::Optional(field.get("default").cloned())
            } else if input.at_key == Some(key) {
                Presence::RequiredUnlessAt
            } else {
                Presence::Required
            };
            let (kind, rules) = describe(field, &mut seen);
            let head = format!("{kind}, {}", presence_text(&presence, &kind));
            Row {
                key: key.to_string(),
                text: sentence(&head, &rules, field),
                presence,
            }
        })
        .collect();
    Table { shape, rows }
}

/// `head; rule, rule. Prose.`
fn sentence(head: &str, rules: &[String], field: &Value) -> String {
    let mut text = head.to_string();
    if !rules.is_empty() {
        text.push_str("; ");
        text.push_str(&rules.join(", "));
    }
    text.push('.');
    if let Some(prose) = field["description"].as_str() {
        text.push(' ');
        text.push_str(prose);
    }
    text
}

fn presence_text(presence: &Presence, kind: &str) -> String {
    match presence {
        Presence::Required | Presence::Entry => "required".to_string(),
        Presence::RequiredUnlessAt => "required (unless --at gives it)".to_string(),
        // A null default is only worth saying where null may be given.
        Presence::Optional(Some(default)) if !default.is_null() || kind.ends_with("or null") => {
            format!("optional (default {default})")
        }
        Presence::Optional(_) => "optional".to_string(),
    }
}

/// `schema`'s type in words and its rules: the leaf's rule in words
/// (long at a section's first mention, short after), then its limits.
fn describe(schema: &Value, seen: &mut HashSet<String>) -> (String, Vec<String>) {
    if let Some(variants) = schema["anyOf"].as_array() {
        let nullable = variants.iter().any(|v| v["type"] == "null");
        let mut described = variants
            .iter()
            .filter(|v| v["type"] != "null")
            .map(|v| describe(v, seen));
        let (mut kind, rules) = described.next().unwrap_or_default();
        if nullable {
            kind.push_str(" or null");
        }
        return (kind, rules);
    }
    if let Some(value) = schema.get("const") {
        return (type_of(value), vec![format!("must be {value}")]);
    }
    if let Some(values) = schema["enum"].as_array() {
        let kind = values.first().map(type_of).unwrap_or_default();
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        return (kind, vec![format!("one of {}", or_list(&values))]);
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut rules = Vec::new();
    if let Some(rule) = rule(schema, seen) {
        rules.push(rule);
    }
    let mut kinds = Vec::new();
    for kind in &types {
        kinds.push(match *kind {
            "integer" => integer(schema),
            "array" => {
                let items = &schema["items"];
                let count = count(schema, "Items");
                if schema["maxItems"] == 0 {
                    rules.push("must be []".to_string());
                } else if !count.is_empty() {
                    rules.push(format!("{count} entries"));
                }
                if schema["uniqueItems"] == true {
                    rules.push("no duplicates".to_string());
                }
                if items.is_null() {
                    "list".to_string()
                } else if items["type"] == "object" {
                    "list of objects".to_string()
                } else {
                    let (kind, each) = describe(items, seen);
                    if !each.is_empty() {
                        rules.push(format!("each {}", each.join(", ")));
                    }
                    format!("list of {kind}s")
                }
            }
            "object" => {
                let count = count(schema, "Properties");
                if !count.is_empty() {
                    rules.insert(0, format!("{count} entries"));
                }
                "object".to_string()
            }
            other => other.to_string(),
        });
    }
    if types.contains(&"string") {
        let length = count(schema, "Length");
        if !length.is_empty() {
            rules.push(format!("{length} characters"));
        }
        if schema.get("pattern").is_some() && schema.get(RULE).is_none() {
            // A pattern nobody put in words: shown as it is rather than
            // hidden (a unit test keeps the help free of them).
            rules.push(format!("matching {}", schema["pattern"]));
        }
    }
    (kinds.join(" or "), rules)
}

/// The leaf's rule in words: `[short, long]` or one string.
fn rule(schema: &Value, seen: &mut HashSet<String>) -> Option<String> {
    match schema.get(RULE)? {
        Value::String(rule) => Some(rule.clone()),
        Value::Array(forms) => {
            let short = forms.first()?.as_str()?;
            let long = forms.get(1)?.as_str()?;
            let form = if seen.insert(long.to_string()) {
                long
            } else {
                short
            };
            Some(form.to_string())
        }
        _ => None,
    }
}

fn integer(schema: &Value) -> String {
    match (schema.get("minimum"), schema.get("maximum")) {
        (Some(min), Some(max)) => format!("integer {min}..{max}"),
        (Some(min), None) => format!("integer >= {min}"),
        (None, Some(max)) => format!("integer <= {max}"),
        (None, None) => "integer".to_string(),
    }
}

/// `minX`/`maxX` in words: "1 to 8", "at most 32", "at least 1", "".
fn count(schema: &Value, what: &str) -> String {
    let min = schema[format!("min{what}")].as_u64();
    let max = schema[format!("max{what}")].as_u64();
    match (min, max) {
        (Some(min), Some(max)) if min == max => format!("exactly {min}"),
        (Some(min), Some(max)) => format!("{min} to {max}"),
        (Some(min), None) if min > 0 => format!("at least {min}"),
        (_, Some(max)) => format!("at most {max}"),
        _ => String::new(),
    }
}

fn type_of(value: &Value) -> String {
    match value {
        Value::String(_) => "string",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
    .to_string()
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(values: &[String]) -> String {
    match values.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The table as the help shows it: `  key  text`, the keys in a column
/// as wide as the longest, the text wrapped to [`WIDTH`] under itself.
pub fn render(table: &Table) -> String {
    let column = table.rows.iter().map(|r| r.key.len()).max().unwrap_or(0) + 2;
    let mut out = Vec::new();
    for row in &table.rows {
        let indent = 2 + column;
        let lines = wrap(&row.text, WIDTH.saturating_sub(indent).max(20));
        for (i, line) in lines.iter().enumerate() {
            if i == 0 {
                out.push(format!("  {:column$}{line}", row.key));
            } else {
                out.push(format!("{:indent$}{line}", ""));
            }
        }
    }
    out.join("\n")
}

/// `text`'s words in lines of at most `width` characters (a longer word
/// alone on its line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The section of `input` headed `label` (`Input file`, `Evidence file`),
/// with the page's own closing lines (already indented) after the table.
pub fn section(label: &str, input: &JsonInput, closing: &str) -> String {
    let table = table(input);
    let mut text = format!(
        "{label} --{} <FILE>: {}\n{}",
        input.flag,
        table.shape,
        render(&table)
    );
    if !closing.trim().is_empty() {
        text.push('\n');
        text.push_str(closing.trim_end());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::inputs::{
        ApprovalPolicyInput, ChangedPaths, CheckResultInput, ComponentEvidenceInput, Evidence,
        HandoffReport, HeartbeatInput, LaneCreateInput, LiveReport, ReassignInput,
        RecoveryDiagnosisInput, StallDecision, Topology,
    };
    use crate::receipt::faults::EvidenceItem;
    use crate::receipt::rules::Component;
    use crate::receipt::schema::{InputKeys, schema_of};
    use crate::surface::registry::COMMANDS;
    use schemars::JsonSchema;
    use serde::de::DeserializeOwned;
    use serde_json::json;

    /// What each typed input's table must say, found independently of the
    /// registry: the keys of its type (or of its items' type), and whether
    /// a value reads as that type.
    struct Expected {
        keys: Option<InputKeys>,
        reads: fn(&Value) -> bool,
    }

    fn reads<T: DeserializeOwned>(value: &Value) -> bool {
        T::deserialize(value).is_ok()
    }

    /// An object input of type `T`: its keys, and whether a value reads as it.
    fn object<T: JsonSchema + DeserializeOwned>() -> (Option<InputKeys>, fn(&Value) -> bool) {
        (Some(InputKeys::of::<T>()), reads::<T>)
    }

    fn expected(command: &str, flag: &str) -> Expected {
        let (keys, reads): (Option<InputKeys>, fn(&Value) -> bool) = match (command, flag) {
            (_, "evidence") => (Some(InputKeys::of::<EvidenceItem>()), reads::<Evidence>),
            ("lane-complete", "changed-paths") => (None, reads::<ChangedPaths>),
            ("lane-create", "input") => object::<LaneCreateInput>(),
            ("heartbeat", "input") => object::<HeartbeatInput>(),
            ("lane-reassign", "input") => object::<ReassignInput>(),
            ("stall-record", "decision") => object::<StallDecision>(),
            ("topology-register", "input") => {
                (Some(InputKeys::of::<Component>()), reads::<Topology>)
            }
            ("check-result", "input") => object::<CheckResultInput>(),
            ("component-evidence", "input") => object::<ComponentEvidenceInput>(),
            ("handoff-create", "input") => object::<HandoffReport>(),
            ("live-report-create", "input") => object::<LiveReport>(),
            (_, "approval-policy") => object::<ApprovalPolicyInput>(),
            ("recovery-run-create", "input") => object::<RecoveryDiagnosisInput>(),
            other => panic!("{other:?}: a typed input this test does not know"),
        };
        Expected { keys, reads }
    }

    /// Every typed JSON flag of every command, with its command.
    fn typed_inputs() -> Vec<(&'static str, &'static JsonInput)> {
        COMMANDS
            .iter()
            .flat_map(|c| c.inputs.iter().map(move |i| (c.name, i)))
            .collect()
    }

    /// Each table names exactly its type's keys, each required exactly
    /// where the type requires it (and "unless --at gives it" exactly for
    /// the key `--at` fills).
    #[test]
    fn each_table_names_exactly_the_types_keys() {
        let inputs = typed_inputs();
        assert!(inputs.len() >= 20, "{}", inputs.len());
        for (command, input) in inputs {
            let table = table(input);
            let keys: Vec<&str> = table.rows.iter().map(|r| r.key.as_str()).collect();
            let Some(expected) = expected(command, input.flag).keys else {
                assert_eq!(keys, ["(each entry)"], "{command} --{}", input.flag);
                continue;
            };
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            let mut all = expected.all();
            all.sort_unstable();
            assert_eq!(sorted, all, "{command} --{}", input.flag);
            for row in &table.rows {
                let required = expected.required.contains(&row.key.as_str());
                assert_eq!(row.presence.is_required(), required, "{command} {row:?}");
                let at = input.at_key == Some(row.key.as_str());
                assert_eq!(
                    row.presence == Presence::RequiredUnlessAt,
                    at,
                    "{command} {row:?}"
                );
                let words = if required { "required" } else { "optional" };
                assert!(row.text.contains(&format!(", {words}")), "{row:?}");
            }
            if let Some(key) = input.at_key {
                assert!(expected.required.contains(&key), "{command}: {key}");
                // The page's --at says the same of the key it fills.
                let def = crate::surface::registry::named(command).unwrap();
                let page = super::super::parse_page(def.text);
                let at = page.options.iter().find(|(name, _)| name == "at");
                let said = at.is_some_and(|(_, text)| text.contains(&format!("input's {key}")));
                assert!(said, "{command}: --at does not say it fills {key}");
            }
        }
    }

    /// Every JSON flag's section in the taught help is the generated one,
    /// the page giving only its heading and closing lines.
    #[test]
    fn every_json_flag_has_its_generated_section() {
        let tree = crate::surface::command();
        for def in COMMANDS {
            let Some(command) = tree.find_subcommand(def.name) else {
                continue;
            };
            let help = command
                .get_after_long_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            for input in def.inputs {
                let label = if input.flag == "evidence" {
                    "Evidence file"
                } else {
                    "Input file"
                };
                let heading = format!("{label} --{} <FILE>: ", input.flag);
                assert_eq!(
                    help.matches(&heading).count(),
                    1,
                    "{} --{}:\n{help}",
                    def.name,
                    input.flag
                );
                let hand_written = def.text.contains(&heading);
                assert!(!hand_written, "{}: the page writes a table", def.name);
                let generated = render(&table(input));
                assert!(help.contains(&generated), "{}:\n{help}", def.name);
            }
        }
    }

    /// Every pattern is said in words, by its leaf type or its field.
    #[test]
    fn no_table_shows_a_bare_pattern() {
        for (command, input) in typed_inputs() {
            let text = render(&table(input));
            assert!(!text.contains("matching "), "{command}:\n{text}");
            assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        }
    }

    /// A leaf's rule is long at its first mention and short after.
    #[test]
    fn a_rule_is_long_once_then_short() {
        let lane = crate::surface::registry::named("lane-create")
            .and_then(|c| c.input("input"))
            .unwrap();
        let rows = table(lane).rows;
        let text = |key: &str| rows.iter().find(|r| r.key == key).unwrap().text.clone();
        assert!(text("lane_id").starts_with("string, required; identifier (1-128"));
        assert!(text("agent_id").starts_with("string, required; identifier. "));
        assert!(
            text("parent_lane_id")
                .starts_with("string or null, optional (default null); identifier.")
        );
        assert!(text("replacement_count").starts_with("integer >= 0, optional (default 0). How"));
        assert!(text("observed_at").starts_with("string, required (unless --at gives it); UTC"));
        assert!(text("assignment").contains("non-blank, at most 500 characters. What"));
    }

    #[test]
    fn lines_wrap_under_their_column() {
        let table = Table {
            shape: String::new(),
            rows: vec![
                Row {
                    key: "a".into(),
                    presence: Presence::Required,
                    text: "word ".repeat(30),
                },
                Row {
                    key: "longer".into(),
                    presence: Presence::Required,
                    text: "short.".into(),
                },
            ],
        };
        let text = render(&table);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("  a       word word"), "{text}");
        assert!(lines[1].starts_with("          word"), "{text}");
        assert!(lines.iter().all(|l| l.len() <= WIDTH), "{text}");
        assert_eq!(lines.last(), Some(&"  longer  short."));
        assert_eq!(wrap("x", 10), ["x"]);
        assert_eq!(wrap("", 10), Vec::<String>::new());
    }

    /// Each section's minimal example (its placeholders filled in) is a
    /// valid input: it reads as the type and its schema, the catalog's,
    /// accepts it.
    #[test]
    fn the_minimal_examples_are_valid_inputs() {
        let tree = crate::surface::command();
        let hex = "0".repeat(64);
        for (command, input) in typed_inputs() {
            let help = tree
                .find_subcommand(command)
                .and_then(|c| c.get_after_long_help())
                .unwrap()
                .to_string();
            let label = if input.flag == "evidence" {
                "Evidence file"
            } else {
                "Input file"
            };
            let section = help
                .split("\n\n")
                .find(|s| s.starts_with(&format!("{label} --{} ", input.flag)))
                .unwrap();
            let example = section
                .split_once("Minimal valid example:\n")
                .unwrap_or_else(|| panic!("{command} --{}: no example", input.flag))
                .1;
            let example = example
                .replace("<64 hex>", &hex)
                .replace("<manifest hash>", &hex)
                .replace("<current head>", &hex)
                .replace("<run id>", "run-1");
            let value: Value = serde_json::from_str(&example)
                .unwrap_or_else(|e| panic!("{command} --{}: {e}: {example}", input.flag));
            let expected = expected(command, input.flag);
            assert!((expected.reads)(&value), "{command}: {value}");
            let schema = (input.schema)();
            assert_eq!(valid(&schema, &value), Ok(()), "{command} --{}", input.flag);
        }
        // The validator refuses what it should.
        let schema = schema_of::<CheckResultInput>();
        assert!(valid(&schema, &json!({"component_id": "a", "check_id": "b"})).is_err());
        assert!(
            valid(
                &schema,
                &json!({"component_id": "-a", "check_id": "b", "passed": true})
            )
            .is_err()
        );
        assert!(
            valid(
                &schema,
                &json!({"component_id": "a", "check_id": "b", "passed": true, "x": 1})
            )
            .is_err()
        );
    }

    /// `value` against the keywords the input schemas use.
    fn valid(schema: &Value, value: &Value) -> Result<(), String> {
        let fail = |what: &str| Err(format!("{what}: {value} against {schema}"));
        if let Some(variants) = schema["anyOf"].as_array() {
            if variants.iter().any(|v| valid(v, value).is_ok()) {
                return Ok(());
            }
            return fail("anyOf");
        }
        if schema.get("const").is_some_and(|c| c != value) {
            return fail("const");
        }
        if let Some(values) = schema["enum"].as_array()
            && !values.contains(value)
        {
            return fail("enum");
        }
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let typed = match &schema["type"] {
            Value::Null => true,
            Value::String(t) => t == kind,
            Value::Array(ts) => ts.iter().any(|t| t == kind),
            _ => false,
        };
        if !typed {
            return fail("type");
        }
        let at_most = |key: &str, n: usize| schema[key].as_u64().is_none_or(|m| n as u64 <= m);
        let at_least = |key: &str, n: usize| schema[key].as_u64().is_none_or(|m| n as u64 >= m);
        match value {
            Value::String(text) => {
                let n = text.chars().count();
                if !at_most("maxLength", n) || !at_least("minLength", n) {
                    return fail("length");
                }
                if let Some(pattern) = schema["pattern"].as_str() {
                    let regex = fancy_regex::Regex::new(pattern).unwrap();
                    if !regex.is_match(text).unwrap() {
                        return fail("pattern");
                    }
                }
            }
            Value::Number(n) => {
                let n = n.as_i64().unwrap();
                if schema["minimum"].as_i64().is_some_and(|m| n < m) {
                    return fail("minimum");
                }
            }
            Value::Array(items) => {
                if !at_most("maxItems", items.len()) || !at_least("minItems", items.len()) {
                    return fail("items");
                }
                if let Some(each) = schema.get("items") {
                    items.iter().try_for_each(|item| valid(each, item))?;
                }
            }
            Value::Object(map) => {
                if !at_most("maxProperties", map.len()) {
                    return fail("properties");
                }
                for key in schema["required"].as_array().into_iter().flatten() {
                    if !map.contains_key(key.as_str().unwrap()) {
                        return fail("required");
                    }
                }
                for (key, item) in map {
                    match schema["properties"].get(key) {
                        Some(property) => valid(property, item)?,
                        None if schema["additionalProperties"] == false => {
                            return fail("additional");
                        }
                        None => {
                            if let Some(each) = schema.get("additionalProperties") {
                                valid(each, item)?;
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
