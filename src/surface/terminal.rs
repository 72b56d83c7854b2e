//! Tables on a terminal for `doctor` and `bundle-verify` (cli-conventions
//! §5 "Views everywhere a person looks"; DEVIATIONS 93): like `status`,
//! a table when stdout is a terminal and the JSON envelope otherwise,
//! `--format table|json` overriding; and `approvals --format table`. The
//! renderer is chosen by the parsed command, never by an operation name,
//! and the data is the JSON envelope's, so the two never say different
//! things.

use serde_json::{Map, Value};

use super::approvals::{self, ApprovalCommands};
use super::table::{self, cell, fit, row};
use super::views::{StatusFormat, Terminal, detail_table};
use super::{Command, bundle::BundleCommands};

/// A renderer of a command's data as a table.
pub type Render = fn(&Map<String, Value>, bool) -> String;

/// The table `command` prints instead of its envelope, if any: `--format
/// table`, or no `--format` and stdout a terminal.
pub fn chosen(command: &Command, term: Terminal) -> Option<Render> {
    let (format, render): (Option<StatusFormat>, Render) = match command {
        Command::Doctor(args) => (args.format, doctor_table),
        Command::Bundle(BundleCommands::BundleVerify(args)) => (args.format, bundle_table),
        // Its own --format, whose default is the envelope on a terminal too.
        Command::Approvals(ApprovalCommands::Approvals(args)) => {
            return approvals::wants_table(args).then_some(approvals::table);
        }
        _ => return None,
    };
    let table = match format {
        Some(StatusFormat::Table) => true,
        Some(StatusFormat::Json) => false,
        None => term.stdout_is_tty(),
    };
    table.then_some(render)
}

fn get<'a>(map: &'a Map<String, Value>, key: &str) -> &'a Value {
    map.get(key).unwrap_or(&Value::Null)
}

/// `text` cut to its last `width` characters, starting with `…` when cut.
fn tail(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count - width + 1).collect();
    format!("…{kept}")
}

/// `doctor`: one row per piece of litter, its remedy in full on a line of
/// its own (a command to copy is never cut).
pub fn doctor_table(data: &Map<String, Value>, _colour: bool) -> String {
    let items = get(data, "litter").as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "no litter: nothing a killed writer left behind".into();
    }
    let mut lines = vec![
        format!(
            "litter: {} (each with its remedy)",
            cell(get(data, "count"))
        ),
        row(&[
            ("KIND".into(), 18),
            ("AGE".into(), 8),
            ("DEAD".into(), 5),
            ("PATH".into(), 0),
        ]),
    ];
    for item in &items {
        let Some(item) = item.as_object() else {
            continue;
        };
        // A long path keeps its end (the file's name), cut at the left.
        lines.push(row(&[
            (cell(get(item, "kind")), 18),
            (format!("{}s", cell(get(item, "age_s"))), 8),
            (cell(get(item, "dead")), 5),
            (tail(&cell(get(item, "path")), table::WIDTH - 34), 0),
        ]));
        lines.push(format!("  remedy: {}", cell(get(item, "remedy"))));
    }
    lines.join("\n")
}

/// `bundle-verify`: what was verified (the bundle or publication, its
/// heads and root), then the run as `status --run-id` shows it.
pub fn bundle_table(data: &Map<String, Value>, colour: bool) -> String {
    let mut lines = vec![fit(
        &format!(
            "verified   {} through sequence {}, {} signed heads",
            if get(data, "ref").is_null() {
                "bundle".to_string()
            } else {
                format!(
                    "{} publications on {}",
                    cell(get(data, "publications")),
                    cell(get(data, "ref"))
                )
            },
            cell(get(data, "sequence")),
            cell(get(data, "heads")),
        ),
        table::WIDTH,
    )];
    lines.push(fit(
        &format!("tree root  {}", cell(get(data, "root_hash"))),
        table::WIDTH,
    ));
    let breaches = get(data, "breaches").as_array().map_or(0, Vec::len);
    if breaches > 0 {
        lines.push(format!(
            "breaches   {breaches} events break the rules (see --format json)"
        ));
    }
    lines.push(detail_table(data, colour));
    lines.join("\n")
}
