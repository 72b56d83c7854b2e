//! Tables on a terminal for `doctor` and `bundle-verify` (cli-conventions
//! §5 "Views everywhere a person looks"; DEVIATIONS 93): like `status`,
//! a table when stdout is a terminal and the JSON envelope otherwise,
//! `--format table|json` overriding; and `approvals --format table`. The
//! renderer is chosen by the parsed command, never by an operation name,
//! and the data is the JSON envelope's, so the two never say different
//! things.

use super::approvals::{self, ApprovalCommands};
use super::table::{self, fit, inert, row, yes_no};
use super::views::{StatusFormat, Terminal, detail_table};
use super::{Command, bundle::BundleCommands};
use crate::commands::bundle::BundleVerified;
use crate::commands::doctor::LitterReport;

/// Whether `command` prints its table instead of its envelope: `--format
/// table`, or no `--format` and stdout a terminal. The table itself is
/// drawn from the command's typed answer (`Success::tabled`).
pub fn wants_table(command: &Command, term: Terminal) -> bool {
    let format = match command {
        Command::Doctor(args) => args.format,
        Command::Bundle(BundleCommands::BundleVerify(args)) => args.format,
        // Its own --format, whose default is the envelope on a terminal too.
        Command::Approvals(ApprovalCommands::Approvals(args)) => {
            return approvals::wants_table(args);
        }
        _ => return false,
    };
    match format {
        Some(StatusFormat::Table) => true,
        Some(StatusFormat::Json) => false,
        None => term.stdout_is_tty(),
    }
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
pub fn doctor_table(report: &LitterReport, _colour: bool) -> String {
    if report.litter.is_empty() {
        return "no litter: nothing a killed writer left behind".into();
    }
    let mut lines = vec![
        format!("litter: {} (each with its remedy)", report.count),
        row(&[
            ("KIND".into(), 18),
            ("AGE".into(), 8),
            ("DEAD".into(), 5),
            ("PATH".into(), 0),
        ]),
    ];
    for item in &report.litter {
        // A long path keeps its end (the file's name), cut at the left.
        lines.push(row(&[
            (inert(item.kind), 18),
            (format!("{}s", item.age_s), 8),
            (yes_no(item.dead), 5),
            (tail(&inert(&item.path), table::WIDTH - 34), 0),
        ]));
        lines.push(format!("  remedy: {}", inert(&item.remedy)));
    }
    lines.join("\n")
}

/// `bundle-verify`: what was verified (the bundle or publication, its
/// heads and root), then the run as `status --run-id` shows it.
pub fn bundle_table(verified: &BundleVerified, colour: bool) -> String {
    let what = match &verified.publication {
        None => "bundle".to_string(),
        Some(p) => format!("{} publications on {}", p.publications, inert(&p.reference)),
    };
    let mut lines = vec![fit(
        &format!(
            "verified   {what} through sequence {}, {} signed heads",
            verified.status.sequence, verified.heads,
        ),
        table::WIDTH,
    )];
    lines.push(fit(
        &format!("tree root  {}", inert(&verified.root_hash)),
        table::WIDTH,
    ));
    let breaches = verified.status.breaches().len();
    if breaches > 0 {
        lines.push(format!(
            "breaches   {breaches} events break the rules (see --format json)"
        ));
    }
    lines.push(detail_table(&verified.status, colour));
    lines.join("\n")
}
