//! `report --out FILE.html`: one self-contained HTML5 page about a run —
//! header, an inline SVG lane timeline, lanes, components, approvals,
//! completion gaps, next actions and the event table.
//!
//! No JavaScript and no external resource, and the page tells the browser
//! so: `default-src 'none'`. The one `<style>` element is allowed by its
//! SHA-256 hash rather than by `'unsafe-inline'`: with a hash, a `<style>`
//! or `style=` that a receipt string smuggled in (should escaping ever
//! fail) would not apply, while ours does; colours in the SVG are
//! presentation attributes, which CSP does not govern. Every string from
//! the receipt passes through [`escape`]: markup becomes text, control
//! characters become visible control pictures and bidirectional controls a
//! visible `[U+202E]`, so nothing a receipt carries can inject an element
//! or reorder the page.

use crate::receipt::vocab::EventType;
use crate::store::root::StateRoot;
use chrono::TimeDelta;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

use super::envelope;
use super::views::ReportArgs;
use crate::commands::FlowResult;
use crate::commands::views::{self as view_commands, RunStatus};
use crate::coordinator::breach::Breach;
use crate::coordinator::timeline::{Mark, Timeline};
use crate::coordinator::views::{LaneVerdict, LogRow, RunDetail};
use crate::receipt::lax_time::parse_lax_timestamp;
use crate::receipt::primitives::{Instant, format_now};
use crate::store::discovery::DiscoveryEnv;

/// `report`: gather, render, write; print the envelope.
pub fn report(
    args: ReportArgs,
    root: &StateRoot,
    root_text: &str,
    env: &DiscoveryEnv,
    out: &mut dyn Write,
) -> FlowResult<u8> {
    let at = args
        .at
        .clone()
        .unwrap_or_else(|| format_now(chrono::Utc::now()));
    let data = view_commands::report_data(root, &args.run_id, &at)?;
    let page = render(&data.status, &data.timeline, &at);
    let path =
        view_commands::write_report_page(root, &args.out, &env.cwd, page.as_bytes(), args.force)?;
    let written = ReportWritten {
        run_id: &args.run_id,
        path: path.to_string_lossy().into_owned(),
        bytes: page.len(),
        sequence: data.head.sequence,
        checksum: &data.head.checksum,
        events: data.timeline.events,
        at: &at,
        breaches: data.status.breaches(),
    };
    let envelope = envelope::success("report", root_text, envelope::data(&written));
    let _ = out.write_all(envelope.as_bytes());
    let _ = out.write_all(b"\n");
    Ok(0)
}

/// What `report` answers: the page written and the head it describes.
#[derive(Debug, Serialize)]
struct ReportWritten<'a> {
    run_id: &'a str,
    path: String,
    /// The page's size.
    bytes: usize,
    sequence: u64,
    checksum: &'a str,
    /// The events the page describes.
    events: u64,
    at: &'a str,
    /// Present only when some stand, as in `verify`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    breaches: &'a [Breach],
}

/// Receipt text as inert HTML text (element content and attribute values).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            // C0 controls as their visible control pictures (U+2400..).
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
            '\u{7f}' => out.push('\u{2421}'),
            '\u{80}'..='\u{9f}' => out.push('\u{fffd}'),
            '\u{200e}'
            | '\u{200f}'
            | '\u{061c}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{feff}' => {
                let _ = write!(out, "[U+{:04X}]", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn value_text(value: &Value) -> String {
    match value {
        Value::Null => "–".into(),
        Value::String(s) => escape(s),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => escape(&other.to_string()),
    }
}

/// Optional text as the page shows it (`–` when absent, as null).
fn optional_text(text: Option<&str>) -> String {
    text.map_or_else(|| "–".into(), escape)
}

fn yes_no(flag: bool) -> &'static str {
    if flag { "yes" } else { "no" }
}

/// A list as the page shows it: `none` when empty.
fn list_text<T: AsRef<str>>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|item| escape(item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Recorded JSON values as a list (`none` when empty).
fn values_text(items: &[Value]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items.iter().map(value_text).collect::<Vec<_>>().join(", ")
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

const CSS: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:2px solid #d0d7e2}
.note{color:#5b6475;font-size:12px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:8px 0}
dt{font-weight:600;color:#44506a}dd{margin:0;word-break:break-all}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{border:1px solid #d0d7e2;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eef2f8}td.s{max-width:420px;word-break:break-word;white-space:pre-wrap}
tr.gap td{background:#fff8e1;text-align:center;font-style:italic}
.ok{color:#2b8a3e;font-weight:600}.bad{color:#c92a2a;font-weight:600}
svg{border:1px solid #d0d7e2;background:#fbfcfe}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.warn{background:#fff4e6;border-left:4px solid #f76707;padding:6px 10px}
.breach{background:#fff5f5;border:2px solid #c92a2a;border-left-width:8px;padding:8px 12px;margin:0 0 16px}
.breach b{color:#c92a2a}tr.breach td{background:#fff5f5}
code{font-size:12px;word-break:break-all}";

/// The fill of a lane state.
fn state_fill(state: &str) -> &'static str {
    match state {
        "pending" => "#adb5bd",
        "starting" => "#74c0fc",
        "running" => "#339af0",
        "suspected_stall" => "#fcc419",
        "recovering" => "#ff922b",
        "replaced" => "#b197fc",
        "completed" => "#40c057",
        "failed" => "#fa5252",
        "blocked" => "#e03131",
        "cancelled" => "#868e96",
        _ => "#ced4da",
    }
}

fn mark_fill(kind: Option<EventType>) -> &'static str {
    use EventType::*;
    let Some(kind) = kind else {
        return "#495057";
    };
    match kind {
        StartupAck | LaneStarted => "#1864ab",
        StallSuspected => "#f08c00",
        StallCleared | LaneRecovered | ProbeAcknowledged => "#2f9e44",
        ProbeSent => "#e8590c",
        AgentInterrupted => "#c92a2a",
        LaneReassigned => "#7048e8",
        LaneCompleted | ReplacementLineageClosed => "#2b8a3e",
        LaneFailed | LaneBlocked => "#c92a2a",
        LaneCancelled => "#495057",
        _ => "#495057",
    }
}

/// Run-level milestones drawn as a labelled line across every lane.
fn milestone(kind: Option<EventType>) -> Option<&'static str> {
    use EventType::*;
    Some(match kind? {
        PlanApproved => "approve",
        RunStarted => "start",
        HandoffRecorded => "handoff",
        RunResumed => "resume",
        RunCompleted => "complete",
        RunRecoveryStarted => "recovery",
        RunFailed => "fail",
        RunBlocked => "block",
        RunCancelled => "cancel",
        _ => return None,
    })
}

const WIDTH: f64 = 1120.0;
const LABEL: f64 = 180.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 84.0;
const ROW: f64 = 30.0;

struct Scale {
    start: Instant,
    end: Instant,
}

impl Scale {
    fn new(timeline: &Timeline, at: Option<Instant>) -> Option<Scale> {
        let (start, mut end) = timeline.lane_span.or(timeline.span)?;
        if let Some(at) = at
            && at > end
        {
            let span = (end - start).max(TimeDelta::hours(1));
            if at - end <= span {
                end = at;
            }
        }
        if end <= start {
            end = start + TimeDelta::seconds(1);
        }
        Some(Scale { start, end })
    }

    fn inside(&self, t: Instant) -> bool {
        t >= self.start && t <= self.end
    }

    fn x(&self, t: Instant) -> f64 {
        let total = (self.end - self.start).num_milliseconds().max(1) as f64;
        let offset = (t.clamp(self.start, self.end) - self.start).num_milliseconds() as f64;
        LABEL + offset / total * (WIDTH - LABEL - RIGHT)
    }
}

fn title(text: &str, outside: bool) -> String {
    let note = if outside {
        "\n(outside the drawn time range: shown at its edge)"
    } else {
        ""
    };
    format!("<title>{}{note}</title>", escape(text))
}

fn timeline_svg(timeline: &Timeline, at: &str) -> String {
    let at_instant = parse_lax_timestamp(at).ok();
    let Some(scale) = Scale::new(timeline, at_instant) else {
        return "<p>No timed events to draw.</p>".into();
    };
    let rows = timeline.lanes.len().max(1) as f64;
    let height = TOP + rows * ROW + 30.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"lane timeline\">"
    );
    s.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#7048e8\"/></marker></defs>");
    // Axis: six ticks with UTC labels.
    for i in 0..=5 {
        let t = scale.start + (scale.end - scale.start) * i / 5;
        let x = scale.x(t);
        let label = format_now(t);
        let label = label.get(5..19).unwrap_or(&label);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"18\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e8f0\"/><text x=\"{x:.1}\" y=\"14\" font-size=\"10\" text-anchor=\"middle\" fill=\"#5b6475\">{}</text>",
            height - 24.0,
            escape(label)
        );
    }
    let _ = write!(
        s,
        "<text x=\"8\" y=\"44\" font-size=\"12\" font-weight=\"600\" fill=\"#1d2330\">run</text>"
    );
    // Run marks and milestones (labels step down when they would overlap).
    let mut last_label: Option<(f64, f64)> = None;
    for mark in &timeline.run_marks {
        let outside = !scale.inside(mark.at);
        let x = scale.x(mark.at);
        match milestone(mark.kind) {
            Some(label) => {
                let label_y = match last_label {
                    Some((lx, ly)) if x - lx < 48.0 && ly < 78.0 => ly + 10.0,
                    _ => 58.0,
                };
                last_label = Some((x, label_y));
                // Near the right edge the label reads leftwards, unclipped.
                let anchor = if x > WIDTH - 90.0 { "end" } else { "start" };
                let _ = write!(
                    s,
                    "<g><line x1=\"{x:.1}\" y1=\"30\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#5f3dc4\" stroke-dasharray=\"3,3\"/><rect x=\"{:.1}\" y=\"32\" width=\"8\" height=\"16\" fill=\"#5f3dc4\"/><text x=\"{:.1}\" y=\"{label_y:.1}\" font-size=\"10\" fill=\"#5f3dc4\" text-anchor=\"{anchor}\">{label}</text>{}</g>",
                    height - 24.0,
                    x - 4.0,
                    if anchor == "end" { x - 6.0 } else { x + 5.0 },
                    title(&mark.detail, outside)
                );
            }
            None => {
                let _ = write!(
                    s,
                    "<circle cx=\"{x:.1}\" cy=\"40\" r=\"3.5\" fill=\"{}\">{}</circle>",
                    if outside { "#ced4da" } else { "#868e96" },
                    title(&mark.detail, outside)
                );
            }
        }
    }
    for anomaly in &timeline.anomalies {
        if let Ok(t) = parse_lax_timestamp(&anomaly.at) {
            let x = scale.x(t);
            let _ = write!(
                s,
                "<text x=\"{x:.1}\" y=\"30\" font-size=\"13\" font-weight=\"700\" fill=\"#d9480f\" text-anchor=\"middle\">!{}</text>",
                title(
                    &format!(
                        "#{}: time {} runs backwards (an earlier event is stamped {})",
                        anomaly.sequence, anomaly.at, anomaly.latest_before
                    ),
                    !scale.inside(t)
                )
            );
        }
    }
    let row_y = |i: usize| TOP + i as f64 * ROW;
    let index: std::collections::BTreeMap<&str, usize> = timeline
        .lanes
        .iter()
        .enumerate()
        .map(|(i, l)| (l.lane_id.as_str(), i))
        .collect();
    for (i, lane) in timeline.lanes.iter().enumerate() {
        let y = row_y(i);
        let _ = write!(
            s,
            "<text x=\"8\" y=\"{:.1}\" font-size=\"12\" fill=\"#1d2330\">{}<title>{} (agent {})</title></text>",
            y + 19.0,
            escape(&lane.lane_id.chars().take(22).collect::<String>()),
            escape(&lane.lane_id),
            escape(lane.agent_id.as_deref().unwrap_or("?"))
        );
        // Lease bands, merged where they touch on screen.
        let mut merged: Vec<(f64, f64, u64)> = Vec::new();
        for band in &lane.bands {
            let (a, b) = (
                scale.x(band.start),
                scale.x(band.end).max(scale.x(band.start) + 1.0),
            );
            match merged.last_mut() {
                Some(last) if a <= last.1 + 1.0 => {
                    last.1 = last.1.max(b);
                    last.2 += band.heartbeats;
                }
                _ => merged.push((a, b, band.heartbeats)),
            }
        }
        for (a, b, n) in merged {
            let _ = write!(
                s,
                "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"24\" fill=\"#228be6\" fill-opacity=\"0.18\"><title>lease window: {n} heartbeat(s)</title></rect>",
                y + 3.0,
                b - a
            );
        }
        // State segments.
        for (k, (from, state)) in lane.segments.iter().enumerate() {
            let a = scale.x(*from);
            let terminal = matches!(
                state.as_str(),
                "completed" | "failed" | "blocked" | "cancelled"
            );
            let b = match lane.segments.get(k + 1) {
                Some((next, _)) => scale.x(*next),
                None if terminal => a + 3.0,
                None => scale.x(scale.end),
            };
            let until = match lane.segments.get(k + 1) {
                Some((next, _)) => format_now(*next),
                None if terminal => "terminal".into(),
                None => format!("open at {at}"),
            };
            let _ = write!(
                s,
                "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" rx=\"2\" fill=\"{}\"><title>{}</title></rect>",
                y + 8.0,
                (b - a).max(2.0),
                state_fill(state),
                escape(&format!(
                    "{}: {state} from {} until {until}",
                    lane.lane_id,
                    format_now(*from)
                ))
            );
        }
        for mark in &lane.marks {
            s.push_str(&lane_mark(
                mark,
                scale.x(mark.at),
                y + 15.0,
                !scale.inside(mark.at),
            ));
        }
        if let Some((child, t)) = &lane.replaced_by
            && let Some(j) = index.get(child.as_str())
        {
            let x = scale.x(*t);
            let (y1, y2) = (y + 15.0, row_y(*j) + 15.0);
            let _ = write!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{y1:.1}\" x2=\"{:.1}\" y2=\"{y2:.1}\" stroke=\"#7048e8\" stroke-width=\"1.6\" marker-end=\"url(#arrow)\"><title>{}</title></line>",
                x + 6.0,
                escape(&format!("{} replaced by {child}", lane.lane_id))
            );
        }
    }
    s.push_str("</svg>");
    s
}

fn lane_mark(mark: &Mark, x: f64, y: f64, outside: bool) -> String {
    let fill = if outside {
        "#ced4da"
    } else {
        mark_fill(mark.kind)
    };
    let t = title(&mark.detail, outside);
    use EventType::*;
    match mark.kind {
        Some(StallSuspected) => format!(
            "<path d=\"M{x:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}z\" fill=\"{fill}\" stroke=\"#fff\">{t}</path>",
            y - 7.0,
            x + 6.0,
            y + 5.0,
            x - 6.0,
            y + 5.0
        ),
        Some(AgentInterrupted) | Some(LaneFailed) | Some(LaneBlocked) => format!(
            "<path d=\"M{:.1},{:.1}L{:.1},{:.1}M{:.1},{:.1}L{:.1},{:.1}\" stroke=\"{fill}\" stroke-width=\"3\">{t}</path>",
            x - 5.0,
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x + 5.0,
            y - 5.0,
            x - 5.0,
            y + 5.0
        ),
        Some(ProbeSent) | Some(ProbeAcknowledged) => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\" transform=\"rotate(45 {x:.1} {y:.1})\" fill=\"{fill}\" stroke=\"#fff\">{t}</rect>",
            x - 4.5,
            y - 4.5
        ),
        _ => format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{fill}\" stroke=\"#fff\">{t}</circle>"
        ),
    }
}

/// The rules each breaching event breaks, by sequence.
fn breach_rules(status: &RunStatus) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for b in status.breaches() {
        out.entry(b.sequence).or_default().push(b.rule.clone());
    }
    out
}

/// The banner a page opens with while breaches stand (trust model §2
/// promise 4): how many, which, and where to look.
fn breach_banner(s: &mut String, status: &RunStatus) {
    let breaches = status.breaches();
    if breaches.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "<div class=\"breach\" role=\"alert\"><b>This run breaks our rules in {} event(s).</b> Its receipt verifies, but events were appended that our binary refuses to write (by the Python tool or by hand); every gate refuses this run, and this page is not the record of a clean run.<ul>",
        breaches.len()
    );
    for b in breaches.iter().take(16) {
        let _ = write!(
            s,
            "<li>sequence {} — <code>{}</code>: {}</li>",
            b.sequence,
            escape(&b.rule),
            escape(&b.found)
        );
    }
    if breaches.len() > 16 {
        let _ = write!(s, "<li>… and {} more</li>", breaches.len() - 16);
    }
    let _ = writeln!(
        s,
        "</ul>All of them: <code>bluetape-flow verify --run-id {}</code></div>",
        escape(&status.header.run_id)
    );
}

fn event_row(s: &mut String, row: &LogRow, breaches: &BTreeMap<u64, Vec<String>>) {
    let rules = row.sequence().and_then(|sequence| breaches.get(&sequence));
    let kind = match &row.intent_types {
        Some(types) => format!("{} ({})", value_text(&row.event_type), values_text(types)),
        None => value_text(&row.event_type),
    };
    let checksum: String = row
        .checksum
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(12)
        .collect();
    let (class, mark) = match rules {
        Some(rules) => (
            " class=\"breach\"",
            format!("<b>BREACH {}</b> ", escape(&rules.join(", "))),
        ),
        None => ("", String::new()),
    };
    let _ = write!(
        s,
        "<tr{class}><td>{}</td><td>{}</td><td>{kind}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"s\">{mark}{}</td><td><code>{}</code></td></tr>",
        value_text(&row.sequence),
        value_text(&row.created_at),
        optional_text(row.lane_id.as_deref()),
        optional_text(row.agent_id.as_deref()),
        value_text(&row.owner_epoch),
        escape(&row.summary),
        escape(&checksum)
    );
}

/// The Phase 2 sections: lanes, components, completion and next actions.
fn detail_sections(s: &mut String, detail: &RunDetail) {
    s.push_str("<section><h2>Lanes</h2><table><tr><th>lane</th><th>agent</th><th>state</th><th>parent</th><th>replaced by</th><th>last observed</th><th>lease until</th><th>liveness at --at</th><th>next command</th></tr>");
    for lane in &detail.lanes {
        let verdict = match &lane.liveness {
            LaneVerdict::Decided { action, reason } => {
                format!("{}: {}", escape(action.as_str()), escape(reason))
            }
            LaneVerdict::Refused { error, .. } => escape(error),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{verdict}</td><td><code>{}</code></td></tr>",
            escape(&lane.lane_id),
            escape(&lane.agent_id),
            escape(lane.state.as_str()),
            optional_text(lane.parent_lane_id.as_deref()),
            optional_text(lane.replaced_by.as_deref()),
            escape(&lane.last_observed_at),
            optional_text(lane.lease_until.as_deref()),
            optional_text(lane.next_command.as_deref())
        );
    }
    s.push_str("</table></section>\n");
    s.push_str("<section><h2>Components</h2>");
    if detail.components.is_empty() {
        s.push_str("<p>No registered components.</p>");
    } else {
        s.push_str("<table><tr><th>component</th><th>required</th><th>owner lane</th><th>checks</th><th>evidence</th><th>coverage</th><th>dependencies</th></tr>");
        for c in &detail.components {
            let checks: Vec<String> = c
                .required_checks
                .iter()
                .map(|k| {
                    let result = match k.passed {
                        Some(true) => "passed",
                        Some(false) => "failed",
                        None => "not recorded",
                    };
                    format!("{}: {result}", escape(&k.check))
                })
                .collect();
            let removed = if c.removed { " (removed)" } else { "" };
            let _ = write!(
                s,
                "<tr><td>{}{removed}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&c.component_id),
                yes_no(c.required),
                escape(&c.owner_lane),
                if checks.is_empty() {
                    "none".into()
                } else {
                    checks.join(", ")
                },
                yes_no(c.evidence_present),
                escape(c.coverage.as_str()),
                list_text(&c.dependencies)
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>\n");
    let completion = &detail.completion;
    let complete = completion.complete;
    let _ = write!(
        s,
        "<section><h2>Completion</h2><p class=\"{}\">{}</p><dl>",
        if complete { "ok" } else { "bad" },
        if complete { "complete" } else { "not complete" }
    );
    for (items, label) in [
        (&completion.missing_lanes, "missing lanes"),
        (&completion.missing_components, "missing components"),
        (&completion.failed_checks, "failed checks"),
        (
            &completion.unresolved_failed_lanes,
            "unresolved failed lanes",
        ),
        (&completion.resolved_failed_lanes, "resolved failed lanes"),
        (
            &completion.incomplete_replacements,
            "replacements to repair",
        ),
    ] {
        let _ = write!(s, "<dt>{label}</dt><dd>{}</dd>", list_text(items));
    }
    let _ = write!(
        s,
        "<dt>main verification missing</dt><dd>{}</dd>",
        yes_no(completion.missing_main_verification)
    );
    s.push_str("</dl></section>\n");
    if !detail.next.is_empty() {
        s.push_str("<section><h2>Next</h2><ol>");
        for action in &detail.next {
            let _ = write!(
                s,
                "<li>{} {} — <code>{}</code></li>",
                escape(action.action),
                optional_text(action.subject.as_deref()),
                optional_text(action.command.as_deref())
            );
        }
        s.push_str("</ol></section>\n");
    }
}

/// The whole page.
pub fn render(status: &RunStatus, timeline: &Timeline, at: &str) -> String {
    let hash = base64(&Sha256::digest(CSS.as_bytes()));
    let header = &status.header;
    let phase2 = status.phase2();
    let detail = phase2.map(|p| &p.detail);
    let run_id = escape(&header.run_id);
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'sha256-{hash}'; img-src data:; base-uri 'none'; form-action 'none'\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>bluetape-flow report {run_id}</title>\n<style>{CSS}</style></head>\n<body>\n"
    );
    breach_banner(&mut s, status);
    let breaches = breach_rules(status);
    let receipt_ok = header.receipt == "ok";
    let _ = write!(
        s,
        "<header><h1>Run {run_id}</h1><p class=\"note\">Written by bluetape-flow report at --at {}. Self-contained: no script and no external resource (Content-Security-Policy default-src 'none'). Hover a mark for its details.</p><dl>",
        escape(at)
    );
    let mut item = |k: &str, v: String| {
        let _ = write!(s, "<dt>{k}</dt><dd>{v}</dd>");
    };
    item("workflow type", value_text(&header.workflow_type));
    item("run state", escape(&status.run_state));
    item(
        "verification",
        format!(
            "<span class=\"{}\">{}</span> — {} events, head checksum <code>{}</code>",
            if receipt_ok { "ok" } else { "bad" },
            if receipt_ok {
                "receipt verified"
            } else {
                "receipt damaged"
            },
            status.sequence,
            escape(&status.checksum)
        ),
    );
    item(
        "manifest",
        format!(
            "{} (<code>{}</code>)",
            escape(&header.manifest_version),
            escape(&header.manifest_hash)
        ),
    );
    item(
        "owner",
        format!(
            "epoch {} (fingerprint <code>{}</code>)",
            detail.map_or_else(|| "–".into(), |d| d.resume.owner_epoch.to_string()),
            optional_text(detail.and_then(|d| d.resume.owner_fingerprint.as_deref()))
        ),
    );
    let epochs: Vec<String> = timeline
        .epochs
        .iter()
        .map(|(epoch, seq, time)| format!("epoch {epoch} from #{seq} ({})", escape(time)))
        .collect();
    item(
        "owner epochs",
        if epochs.is_empty() {
            "–".into()
        } else {
            epochs.join("; ")
        },
    );
    if let Some(a) = phase2.map(|p| &p.approval) {
        let proof = match a.proof {
            Some("signed") => format!(
                "; signed by key <code>{}</code>",
                optional_text(a.key.as_deref())
            ),
            Some(_) => "; asserted by its writer, not signed".into(),
            None => String::new(),
        };
        item(
            "approval",
            format!(
                "{} by {} at {}{}{proof}",
                optional_text(a.state),
                optional_text(a.by.as_deref()),
                optional_text(a.at.as_deref()),
                if a.gated {
                    " (frozen approver policy)"
                } else {
                    " (no approver policy)"
                }
            ),
        );
    }
    item("recovery of", optional_text(status.recovery_of.as_deref()));
    item(
        "recovered by",
        list_text(status.recovered_by.as_deref().unwrap_or_default()),
    );
    s.push_str("</dl></header>\n");

    s.push_str("<section><h2>Lane timeline</h2>");
    s.push_str(&timeline_svg(timeline, at));
    s.push_str("<p class=\"legend\">");
    for state in [
        "pending",
        "starting",
        "running",
        "suspected_stall",
        "recovering",
        "replaced",
        "completed",
        "failed",
        "blocked",
        "cancelled",
    ] {
        let _ = write!(
            s,
            "<span><svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {state}</span>",
            state_fill(state)
        );
    }
    s.push_str("<span><svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" fill=\"#228be6\" fill-opacity=\"0.18\"/></svg> lease window (heartbeats folded)</span><span>▲ stall · ◆ probe · ✕ interrupt/fail · ● other · → replacement · dashed: run milestone · <b>!</b> time runs backwards</span></p>");
    let _ = write!(
        s,
        "<p class=\"note\">{} event(s), {} heartbeat(s) in {} lane(s).{}{}</p>",
        timeline.events,
        timeline.heartbeats,
        timeline.lanes.len(),
        if timeline.folded_run_marks > 0 {
            format!(" {} run marks not drawn.", timeline.folded_run_marks)
        } else {
            String::new()
        },
        {
            let folded: u64 = timeline.lanes.iter().map(|l| l.folded_marks).sum();
            if folded > 0 {
                format!(" {folded} lane marks not drawn.")
            } else {
                String::new()
            }
        }
    );
    if timeline.anomaly_count > 0 {
        let _ = write!(
            s,
            "<div class=\"warn\"><b>Time runs backwards in {} event(s).</b> Events are ordered by sequence; these carry a time earlier than an event before them (a run may mix wall-clock stamps and --at values). They are marked <b>!</b> above; marks outside the drawn range sit at its edge.<ul>",
            timeline.anomaly_count
        );
        for a in timeline.anomalies.iter().take(10) {
            let _ = write!(
                s,
                "<li>#{}: {} (after {})</li>",
                a.sequence,
                escape(&a.at),
                escape(&a.latest_before)
            );
        }
        let unlisted = timeline.anomaly_count.saturating_sub(10);
        if unlisted > 0 {
            let _ = write!(s, "<li>and {unlisted} more</li>");
        }
        s.push_str("</ul></div>");
    }
    s.push_str("</section>\n");

    if let Some(detail) = detail {
        detail_sections(&mut s, detail);
    }
    let _ = write!(
        s,
        "<section><h2>Events</h2><table><tr><th>seq</th><th>created at</th><th>type</th><th>lane</th><th>agent</th><th>epoch</th><th>summary</th><th>checksum</th></tr>"
    );
    for row in &timeline.first_rows {
        event_row(&mut s, row, &breaches);
    }
    let hidden = timeline.hidden_rows();
    if hidden > 0 {
        let _ = write!(
            s,
            "<tr class=\"gap\"><td colspan=\"8\">… {hidden} events not shown (bluetape-flow log lists them all) …</td></tr>"
        );
    }
    for row in &timeline.last_rows {
        event_row(&mut s, row, &breaches);
    }
    s.push_str("</table></section>\n</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_makes_markup_controls_and_bidi_inert() {
        assert_eq!(
            escape("<script>a&b\"c'</script>"),
            "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;"
        );
        assert_eq!(escape("a\u{1b}[31m\u{0}"), "a\u{241b}[31m\u{2400}");
        assert_eq!(escape("x\u{202e}y\u{2066}"), "x[U+202E]y[U+2066]");
        let long = "<img onerror=x>".repeat(64 * 1024 / 15);
        let out = escape(&long);
        assert!(!out.contains('<') && !out.contains('>'));
    }

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
