//! The views (views.md): `status`, `log` and `report`. Read-only: they
//! never lock or write in the state root. Like `gh`/`kubectl`, they print a
//! table when stdout is a terminal and JSON otherwise; `--format`
//! overrides. `log` streams its rows as the receipt is verified.

use crate::coordinator::decide::InputRule;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;

use super::envelope;
use super::table::{self, cell, fit, inert, number_or_dash, pad, paint, row, text_or_dash, yes_no};
use crate::commands::views::{self as view_commands, ApprovalView, RunStatus, StatusListing};
use crate::commands::{ErrorKind, FlowError, FlowResult};
use crate::coordinator::breach::Breach;
use crate::coordinator::views::LaneVerdict;
use crate::coordinator::views::{LogRow, has_type, log_row, touches_lane};
use crate::receipt::primitives::{format_now, is_identifier};
use crate::receipt::verify::INCOMPLETE;
use crate::receipt::vocab::LaneState;
use crate::store::discovery::DiscoveryEnv;
use serde::Serialize;

/// What the process knows about its terminal (captured once in `main`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal {
    pub stdout: Tty,
    /// stderr is a terminal: long reads may draw progress there.
    pub stderr: Tty,
    /// How long a read runs before its progress bar is drawn.
    pub progress_after: std::time::Duration,
    /// `NO_COLOR` is set to a non-empty value (no-color.org).
    pub no_color: bool,
}

/// Whether a descriptor is a terminal: known, or asked the first time it
/// matters (one `ioctl`; a mutation, whose answer is JSON either way,
/// never asks).
#[derive(Debug, Clone, Copy, Default)]
pub enum Tty {
    #[default]
    No,
    Yes,
    /// Ask the process's descriptor 1 or 2.
    Ask(Stdio),
}

/// stdout or stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdio {
    Out,
    Err,
}

impl Tty {
    pub fn is_terminal(self) -> bool {
        use std::io::IsTerminal;
        use std::sync::OnceLock;
        static OUT: OnceLock<bool> = OnceLock::new();
        static ERR: OnceLock<bool> = OnceLock::new();
        match self {
            Tty::No => false,
            Tty::Yes => true,
            Tty::Ask(Stdio::Out) => *OUT.get_or_init(|| std::io::stdout().is_terminal()),
            Tty::Ask(Stdio::Err) => *ERR.get_or_init(|| std::io::stderr().is_terminal()),
        }
    }
}

impl Terminal {
    pub fn stdout_is_tty(&self) -> bool {
        self.stdout.is_terminal()
    }

    pub fn stderr_is_tty(&self) -> bool {
        self.stderr.is_terminal()
    }
}

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViewCommands {
    Status(StatusArgs),
    Log(LogArgs),
    Report(ReportArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StatusFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    Table,
    Jsonl,
    // One envelope at the end: `rows` and the summary's keys (DEVIATIONS 93).
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// The default of `--color`, for a call that names none.
    fn auto() -> ColorChoice {
        ColorChoice::Auto
    }

    fn wanted(self, term: Terminal) -> bool {
        let choice = match self {
            ColorChoice::Auto => "auto",
            ColorChoice::Always => "always",
            ColorChoice::Never => "never",
        };
        table::colour_wanted(choice, term.stdout_is_tty(), term.no_color)
    }
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct StatusArgs {
    /// One run in detail (default: every run under runs/, oldest first).
    #[arg(long = "run-id", value_name = "RUN_ID")]
    pub run_id: Option<String>,
    /// The instant liveness is judged at: a UTC timestamp ending in Z
    /// (default: now).
    #[arg(long, value_name = "UTC")]
    pub at: Option<String>,
    /// table (default on a terminal) or json (default otherwise).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<StatusFormat>,
    /// Colour in tables: auto (terminal and no NO_COLOR), always, never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    #[serde(default = "ColorChoice::auto")]
    pub color: ColorChoice,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LogArgs {
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// Only events about this lane (or transactions touching it).
    #[arg(long, value_name = "LANE_ID")]
    pub lane: Option<String>,
    /// Only events of this type (or transactions holding one), e.g.
    /// heartbeat_observed.
    #[arg(long = "type", value_name = "EVENT_TYPE")]
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    /// Only events after this sequence number.
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,
    /// Only the last N matching events.
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
    /// Keep printing new events as they are appended, until the run ends
    /// or the user interrupts (never takes the lock).
    #[arg(long)]
    #[serde(default)]
    pub follow: bool,
    /// table (default on a terminal), jsonl (default otherwise: a line per
    /// event, then a summary line) or json (one envelope at the end, its
    /// events under rows; not with --follow).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<LogFormat>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ReportArgs {
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The HTML file to write (outside the state root; not a symlink).
    #[arg(long, required = true, value_name = "FILE.html")]
    pub out: PathBuf,
    /// The instant open lanes are drawn up to: a UTC timestamp ending in Z
    /// (default: now).
    #[arg(long, value_name = "UTC")]
    pub at: Option<String>,
    /// Replace an existing output file.
    #[arg(long)]
    #[serde(default)]
    pub force: bool,
}

fn emit(stream: &mut dyn Write, line: &str) -> bool {
    stream.write_all(line.as_bytes()).is_ok() && stream.write_all(b"\n").is_ok()
}

fn fail(err: &mut dyn Write, error: &FlowError) -> u8 {
    let (code, text) = envelope::failure(error);
    emit(err, &text);
    let _ = err.flush();
    code
}

fn now_text() -> String {
    format_now(chrono::Utc::now())
}

/// Run a view; returns the exit status.
pub fn run(
    command: ViewCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
    term: Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let root_text = root.to_string_lossy().into_owned();
    let code = match command {
        ViewCommands::Status(args) => status(args, root, &root_text, term, out),
        ViewCommands::Log(args) => log(args, root, &root_text, term, out),
        ViewCommands::Report(args) => super::report::report(args, root, &root_text, env, out),
    };
    let _ = out.flush();
    match code {
        Ok(code) => code,
        Err(error) => fail(err, &error),
    }
}

/// What `status` answers: the listing, or one run.
enum StatusAnswer {
    Listing(StatusListing),
    Run(Box<RunStatus>),
}

impl StatusAnswer {
    fn envelope(&self) -> Map<String, Value> {
        match self {
            StatusAnswer::Listing(listing) => envelope::data(listing),
            StatusAnswer::Run(status) => envelope::data(status),
        }
    }
}

fn status(
    args: StatusArgs,
    root: &StateRoot,
    root_text: &str,
    term: Terminal,
    out: &mut dyn Write,
) -> FlowResult<u8> {
    let at = args.at.unwrap_or_else(now_text);
    let data = match &args.run_id {
        Some(run_id) => StatusAnswer::Run(Box::new(view_commands::status_run(root, run_id, &at)?)),
        None => StatusAnswer::Listing(view_commands::status_all(root, &at)?),
    };
    let format = args.format.unwrap_or(if term.stdout_is_tty() {
        StatusFormat::Table
    } else {
        StatusFormat::Json
    });
    let colour = args.color.wanted(term);
    let text = match (format, data) {
        (StatusFormat::Json, data) => envelope::success("status", root_text, data.envelope()),
        (StatusFormat::Table, StatusAnswer::Listing(listing)) => listing_table(&listing, colour),
        (StatusFormat::Table, StatusAnswer::Run(status)) => detail_table(&status, colour),
    };
    emit(out, &text);
    Ok(0)
}

/// The first 12 characters of a hash, or `-`.
fn short_hash(hash: Option<&str>) -> String {
    hash.map_or_else(
        || "-".into(),
        |h| inert(&h.chars().take(12).collect::<String>()),
    )
}

/// The table of `status` without `--run-id`.
pub fn listing_table(listing: &StatusListing, colour: bool) -> String {
    let mut lines = vec![format!("at {}", inert(&listing.at))];
    if listing.runs.is_empty() {
        lines.push("no runs".into());
        return lines.join("\n");
    }
    lines.push(row(&[
        ("RUN".into(), 25),
        ("STATE".into(), 10),
        ("RECEIPT".into(), 7),
        ("SEQ".into(), 6),
        ("DONE".into(), 8),
        ("APPROVAL".into(), 8),
        ("LANES".into(), 0),
    ]));
    for run in &listing.runs {
        let receipt = run.receipt.to_string();
        let replayed = run.replayed.as_ref();
        let state = text_or_dash(replayed.map(|r| r.run_state.as_str()));
        let done = match replayed.and_then(|r| r.completion.as_ref()) {
            Some(c) if c.complete => "yes".to_string(),
            Some(c) => format!("{} gaps", c.gaps),
            None => "-".into(),
        };
        let approval = match &run.opened {
            Some(opened) => text_or_dash(opened.approval.state),
            None => "-".into(),
        };
        let lanes = match replayed.and_then(|r| r.lanes.as_ref()) {
            Some(counts) => {
                let total: u64 = counts.values().sum();
                let completed = counts.get(&LaneState::Completed).copied().unwrap_or(0);
                format!("{completed}/{total} done")
            }
            None => "-".into(),
        };
        let first_bad = run.damage.as_ref().and_then(|d| d.first_bad_sequence);
        let seq = match first_bad {
            Some(n) if run.receipt == "damaged" => format!("bad {n}"),
            _ => number_or_dash(run.sequence),
        };
        let mut line = row(&[
            (inert(&run.run_id), 25),
            (state.clone(), 10),
            (receipt.clone(), 7),
            (seq, 6),
            (done, 8),
            (approval, 8),
            (lanes, 0),
        ]);
        if colour {
            line = colour_words(
                line,
                &[(&pad(&state, 10), &state), (&pad(&receipt, 7), &receipt)],
            );
        }
        lines.push(line);
        let breaches = replayed.map_or(&[][..], |r| &r.breaches);
        if let Some(summary) = breach_summary(breaches) {
            lines.push(fit(&format!("  BREACHES {summary}"), table::WIDTH));
        }
    }
    lines.join("\n")
}

/// `N: rule at S, …` for a non-empty `breaches` list (events that break
/// the rules of `contracts/rules.md`), else `None`.
fn breach_summary(items: &[Breach]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let named: Vec<String> = items
        .iter()
        .take(4)
        .map(|b| format!("{} at {}", table::inert(&b.rule), b.sequence))
        .collect();
    let more = match items.len() {
        n if n > 4 => format!(", and {} more", n - 4),
        _ => String::new(),
    };
    Some(format!("{}: {}{more}", items.len(), named.join(", ")))
}

/// The approval's proof as a table says it.
fn proof_text(approval: &ApprovalView) -> String {
    match (approval.proof, &approval.key) {
        (Some("signed"), Some(key)) => format!("signed by key {}", table::inert(key)),
        (Some("signed"), None) => "signed".into(),
        (Some(_), _) => "asserted by its writer".into(),
        (None, _) => "-".into(),
    }
}

/// Colour the first occurrence of each padded cell (after the run id).
fn colour_words(line: String, cells: &[(&str, &str)]) -> String {
    let mut out = line;
    for (text, state) in cells {
        if let Some(pos) = out[25.min(out.len())..].find(text) {
            let at = pos + 25.min(out.len());
            let painted = paint(text.to_string(), state, true);
            out.replace_range(at..at + text.len(), &painted);
        }
    }
    out
}

/// A list as cell text: its items joined, or `-` when empty.
fn list(items: &[impl AsRef<str>]) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items
        .iter()
        .map(|item| inert(item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table of `status --run-id`.
pub fn detail_table(status: &RunStatus, colour: bool) -> String {
    let mut lines = Vec::new();
    let header = &status.header;
    let run_id = inert(&header.run_id);
    let phase2 = status.phase2();
    let detail = phase2.map(|p| &p.detail);
    lines.push(fit(
        &format!(
            "run        {run_id}  (workflow {}, manifest {})",
            cell(&header.workflow_type),
            inert(&header.manifest_version)
        ),
        table::WIDTH,
    ));
    let state = inert(&status.run_state);
    lines.push(fit(
        &format!(
            "state      {}  receipt {} at sequence {} ({})",
            paint(state.clone(), &state, colour),
            header.receipt,
            status.sequence,
            short_hash(Some(&status.checksum))
        ),
        table::WIDTH + if colour { 9 } else { 0 },
    ));
    // Breaches come first: nothing below is clean while one stands.
    let breaches = status.breaches();
    if let Some(summary) = breach_summary(breaches) {
        lines.push(fit(&format!("BREACHES   {summary}"), table::WIDTH));
        for b in breaches.iter().take(8) {
            lines.push(fit(
                &format!(
                    "  {} at {}: {}",
                    table::inert(&b.rule),
                    b.sequence,
                    table::inert(&b.found)
                ),
                table::WIDTH,
            ));
        }
        lines.push(fit(
            &format!("  gates refuse it; details: verify --run-id {run_id}"),
            table::WIDTH,
        ));
    }
    lines.push(fit(
        &format!(
            "owner      epoch {} ({})",
            number_or_dash(detail.map(|d| d.resume.owner_epoch)),
            short_hash(detail.and_then(|d| d.resume.owner_fingerprint.as_deref()))
        ),
        table::WIDTH,
    ));
    if let Some(approval) = phase2.map(|p| &p.approval) {
        let proof = match proof_text(approval).as_str() {
            "-" => String::new(),
            proof => format!(", {proof}"),
        };
        lines.push(fit(
            &format!(
                "approval   {} by {} at {}{}{proof}",
                text_or_dash(approval.state),
                text_or_dash(approval.by.as_deref()),
                text_or_dash(approval.at.as_deref()),
                if approval.gated { " (gated)" } else { "" }
            ),
            table::WIDTH,
        ));
    }
    let recovered_by = status.recovered_by.as_deref().unwrap_or_default();
    if status.recovery_of.is_some() || !recovered_by.is_empty() {
        lines.push(fit(
            &format!(
                "recovery   of {}; recovered by {}",
                text_or_dash(status.recovery_of.as_deref()),
                list(recovered_by)
            ),
            table::WIDTH,
        ));
    }
    lines.push(format!("at         {}", inert(&header.at)));
    let Some(detail) = detail else {
        return lines.join("\n");
    };
    if !detail.lanes.is_empty() {
        lines.push(String::new());
        lines.push(row(&[
            ("LANE".into(), 14),
            ("AGENT".into(), 12),
            ("STATE".into(), 15),
            ("LIVENESS".into(), 14),
            ("NEXT".into(), 0),
        ]));
        for lane in &detail.lanes {
            let state = lane.state.as_str().to_string();
            let verdict = match &lane.liveness {
                LaneVerdict::Decided { action, .. } => action.as_str(),
                LaneVerdict::Refused { error, .. } => error,
            }
            .to_string();
            let next = lane
                .next_command
                .as_deref()
                .map(|c| {
                    inert(
                        c.trim_start_matches("bluetape-flow ")
                            .split(" --")
                            .next()
                            .unwrap_or_default(),
                    )
                })
                .unwrap_or_else(|| "-".into());
            let mut line = row(&[
                (inert(&lane.lane_id), 14),
                (inert(&lane.agent_id), 12),
                (state.clone(), 15),
                (verdict, 14),
                (next, 0),
            ]);
            if colour {
                let padded = pad(&state, 15);
                if let Some(pos) = line.find(&format!(" {padded}")) {
                    let painted = paint(padded.clone(), &state, true);
                    line.replace_range(pos + 1..pos + 1 + padded.len(), &painted);
                }
            }
            lines.push(line);
        }
    }
    if !detail.components.is_empty() {
        lines.push(String::new());
        lines.push(row(&[
            ("COMPONENT".into(), 16),
            ("REQ".into(), 4),
            ("OWNER".into(), 14),
            ("COVERAGE".into(), 9),
            ("EVIDENCE".into(), 9),
            ("CHECKS".into(), 0),
        ]));
        for c in &detail.components {
            let checks: Vec<String> = c
                .required_checks
                .iter()
                .map(|check| {
                    let mark = match check.passed {
                        Some(true) => "ok",
                        Some(false) => "FAIL",
                        None => "?",
                    };
                    format!("{}:{mark}", inert(&check.check))
                })
                .collect();
            let mut name = inert(&c.component_id);
            if c.removed {
                name.push_str(" (removed)");
            }
            lines.push(row(&[
                (name, 16),
                (yes_no(c.required), 4),
                (inert(&c.owner_lane), 14),
                (c.coverage.as_str().to_string(), 9),
                (yes_no(c.evidence_present), 9),
                (
                    if checks.is_empty() {
                        "-".into()
                    } else {
                        checks.join(" ")
                    },
                    0,
                ),
            ]));
        }
    }
    let completion = &detail.completion;
    lines.push(String::new());
    lines.push(format!("complete   {}", yes_no(completion.complete)));
    for (items, label) in [
        (&completion.missing_lanes, "missing lanes"),
        (&completion.missing_components, "missing components"),
        (&completion.failed_checks, "failed checks"),
        (&completion.unresolved_failed_lanes, "unresolved failed"),
        (
            &completion.incomplete_replacements,
            "replacements to repair",
        ),
    ] {
        if !items.is_empty() {
            lines.push(fit(&format!("  {label:<23}{}", list(items)), table::WIDTH));
        }
    }
    if completion.missing_main_verification {
        lines.push("  main verification      missing (recorded by complete)".into());
    }
    if !detail.next.is_empty() {
        lines.push(String::new());
        lines.push("next".into());
        for (i, action) in detail.next.iter().enumerate() {
            let subject = action
                .subject
                .as_deref()
                .map(|s| format!(" {}", inert(s)))
                .unwrap_or_default();
            lines.push(fit(
                &format!("{:>3}. {}{}", i + 1, action.action, subject),
                table::WIDTH,
            ));
            // The command it recommends is never cut (cli-conventions §5,
            // DEVIATIONS 93): a line of its own, whatever its length, so
            // it can be copied as it is.
            if let Some(command) = &action.command {
                lines.push(format!("     {}", table::inert(command)));
            }
        }
    }
    lines.join("\n")
}

/// The `log` filters, checked before anything is read.
struct Filter {
    lane: Option<String>,
    event_type: Option<String>,
    since: u64,
}

impl Filter {
    fn accepts(&self, event: &Map<String, Value>) -> bool {
        let sequence = event.get("sequence").and_then(Value::as_u64).unwrap_or(0);
        sequence > self.since
            && self.lane.as_deref().is_none_or(|l| touches_lane(event, l))
            && self
                .event_type
                .as_deref()
                .is_none_or(|t| has_type(event, t))
    }
}

/// The table header of `log`.
pub fn log_header() -> String {
    row(&[
        ("SEQ".into(), 5),
        ("TIME (UTC)".into(), 14),
        ("TYPE".into(), 16),
        ("LANE".into(), 8),
        ("CHECKSUM".into(), 12),
        ("SUMMARY".into(), 0),
    ])
}

/// `2026-07-14T01:00:05.123Z` as `07-14T01:00:05` (the table's time; the
/// JSON rows carry the full stamp).
fn table_time(value: &Value) -> String {
    match value.as_str() {
        Some(text) if text.len() >= 19 && text.is_char_boundary(5) && text.is_char_boundary(19) => {
            inert(&text[5..19])
        }
        _ => cell(value),
    }
}

/// One `log` table line.
pub fn log_line(entry: &LogRow) -> String {
    let kind = match &entry.intent_types {
        Some(types) => types.iter().map(cell).collect::<Vec<_>>().join("+"),
        None => cell(&entry.event_type),
    };
    row(&[
        (cell(&entry.sequence), 5),
        (table_time(&entry.created_at), 14),
        (kind, 16),
        (text_or_dash(entry.lane_id.as_deref()), 8),
        (short_hash(entry.checksum.as_str()), 12),
        (inert(&entry.summary), 0),
    ])
}

/// One `log` row; an event that breaks one of our rules is marked: its
/// JSON row carries `breaches` (`rule`, `found`), its table line is
/// followed by one `BREACH` line per rule.
#[derive(Debug, Serialize)]
struct MarkedRow {
    #[serde(flatten)]
    row: LogRow,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    breaches: Vec<BreachMark>,
}

/// A rule an event breaks, as its `log` row names it.
#[derive(Debug, Serialize)]
struct BreachMark {
    rule: String,
    found: String,
}

fn marked_row(event: &Map<String, Value>, breaches: &[Breach]) -> MarkedRow {
    MarkedRow {
        row: log_row(event),
        breaches: breaches
            .iter()
            .map(|b| BreachMark {
                rule: b.rule.clone(),
                found: b.found.clone(),
            })
            .collect(),
    }
}

fn render_row(event: &Map<String, Value>, format: LogFormat, breaches: &[Breach]) -> String {
    let marked = marked_row(event, breaches);
    match format {
        LogFormat::Jsonl | LogFormat::Json => {
            envelope::render(&Value::Object(envelope::data(&marked)))
        }
        LogFormat::Table => {
            let mut line = log_line(&marked.row);
            for b in breaches {
                line.push('\n');
                line.push_str(&fit(
                    &format!(
                        "      BREACH {}: {}",
                        table::inert(&b.rule),
                        table::inert(&b.found)
                    ),
                    table::WIDTH,
                ));
            }
            line
        }
    }
}

/// What `log --format json` answers: the rows, then where verification
/// stopped.
#[derive(Debug, Serialize)]
struct LogDocument<'a> {
    run_id: &'a str,
    /// The rows as printed (free JSON: a `--tail` row is read back from
    /// its printed line).
    rows: Vec<Value>,
    /// The verified length.
    events: u64,
    printed: u64,
    checksum: &'a str,
    /// Always true: only verified events are printed.
    verified: bool,
}

/// The last line of `log --format jsonl`.
#[derive(Debug, Serialize)]
struct LogSummary<'a> {
    /// Always `summary`.
    #[serde(rename = "type")]
    kind: &'static str,
    events: u64,
    printed: u64,
    checksum: &'a str,
    verified: bool,
}

fn log(
    args: LogArgs,
    root: &StateRoot,
    root_text: &str,
    term: Terminal,
    out: &mut dyn Write,
) -> FlowResult<u8> {
    if args.follow && args.format == Some(LogFormat::Json) {
        return Err(InputRule::FollowJson.into());
    }
    let run = view_commands::open(root, &args.run_id)?;
    if let Some(lane) = &args.lane
        && !is_identifier(lane)
    {
        return Err(InputRule::LaneFilter.into());
    }
    if let Some(kind) = &args.event_type
        && !crate::receipt::vocab::EventType::parse(kind)
            .is_some_and(|t| run.manifest.contract.event_types.contains(&t))
    {
        return Err(InputRule::TypeFilter.into());
    }
    let filter = Filter {
        lane: args.lane.clone(),
        event_type: args.event_type.clone(),
        since: args.since.unwrap_or(0),
    };
    let format = args.format.unwrap_or(if term.stdout_is_tty() {
        LogFormat::Table
    } else {
        LogFormat::Jsonl
    });
    if format == LogFormat::Table {
        emit(out, &log_header());
    }
    let tail = args.tail.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let document = format == LogFormat::Json;
    // `--format json`: the rows are kept for the one envelope at the end.
    let mut rows: Vec<Value> = Vec::new();
    let mut kept: VecDeque<String> = VecDeque::new();
    let mut printed = 0u64;
    let mut broken = false;
    let mut marker = view_commands::BreachMarker::new(&run);
    let result = view_commands::stream_events(&run, None, |event| {
        let breaches = marker.observe(event);
        let event = &event.to_map();
        if !filter.accepts(event) {
            return Ok(());
        }
        if document && tail.is_none() {
            printed += 1;
            rows.push(Value::Object(envelope::data(&marked_row(event, &breaches))));
            return Ok(());
        }
        let line = render_row(event, format, &breaches);
        match tail {
            Some(0) => {}
            Some(n) => {
                if kept.len() == n {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
            None => {
                printed += 1;
                if !emit(out, &line) {
                    broken = true;
                    return Err("stdout closed".into());
                }
            }
        }
        Ok(())
    });
    // A reader that went away (a closed pipe) is not an error of ours.
    if broken {
        return Ok(0);
    }
    for line in kept.drain(..) {
        printed += 1;
        if document {
            rows.push(serde_json::from_str(&line).unwrap_or(Value::Null));
        } else {
            emit(out, &line);
        }
    }
    let mut end = result?;
    if document {
        let document = LogDocument {
            run_id: &args.run_id,
            rows,
            events: end.position.sequence,
            printed,
            checksum: &end.position.checksum,
            verified: true,
        };
        emit(
            out,
            &envelope::success("log", root_text, envelope::data(&document)),
        );
        return Ok(0);
    }
    let summary = |end: &view_commands::StreamEnd, printed: u64| {
        Value::Object(envelope::data(&LogSummary {
            kind: "summary",
            events: end.position.sequence,
            printed,
            checksum: &end.position.checksum,
            verified: true,
        }))
    };
    if !args.follow || end.terminal {
        if format == LogFormat::Jsonl {
            emit(out, &envelope::render(&summary(&end, printed)));
        }
        return Ok(0);
    }
    let _ = out.flush();
    // Follow: poll the receipt from the last verified position; never lock.
    let mut seen = end.position.sequence;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut failed = false;
        let step = view_commands::stream_events(&run, Some(end.position.clone()), |event| {
            // After a torn line the same lines are verified again: each
            // event is printed once.
            let sequence = event
                .get("sequence")
                .and_then(crate::receipt::json_ref::JsonRef::as_u64)
                .unwrap_or(0);
            if sequence <= seen {
                return Ok(());
            }
            seen = sequence;
            let breaches = marker.observe(event);
            let event = &event.to_map();
            if !filter.accepts(event) {
                return Ok(());
            }
            printed += 1;
            if !emit(out, &render_row(event, format, &breaches)) || out.flush().is_err() {
                failed = true;
                return Err("stdout closed".into());
            }
            Ok(())
        });
        if failed {
            return Ok(0);
        }
        match step {
            Ok(next) => {
                end = next;
                if end.terminal {
                    if format == LogFormat::Jsonl {
                        emit(out, &envelope::render(&summary(&end, printed)));
                    }
                    return Ok(0);
                }
            }
            // An append in progress (a torn last line) is waited for.
            Err(error) if matches!(error.classify(), (_, "coordinator_conflict", true, _)) => {}
            Err(error) if matches!(error.kind(), ErrorKind::ReceiptDamaged(damage) if damage.reason == INCOMPLETE) =>
                {}
            Err(error) => return Err(error),
        }
    }
}
