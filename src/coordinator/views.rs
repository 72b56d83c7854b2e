//! The pure view models of `status` (views.md): where a run stands and the
//! safe next step, built only from the replayed state and the very
//! functions the single-purpose queries call — [`check_lane`] for each
//! lane's liveness verdict (`liveness-check`), [`evaluate_completion`]
//! (`completion-check`) and [`resume_fields`] (`resume-check`) — so a view
//! can never disagree with them. No I/O, no clock: `--at` comes in as text.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::completion::{CompletionReport, evaluate, evaluate_completion};
use super::decide::{FlowError, Policy};
use super::liveness::{CommandStatus, LivenessAction, check_lane};
use super::state::{CoordinatorState, CoverageState, LaneRecord, LaneState};
use crate::receipt::primitives::LaneId;

/// The `resume-check` fields of a replayed state: lanes that need
/// observation, replacements needing repair, approved components without a
/// registration. `resume-check` itself prints exactly these.
#[derive(Debug, Clone, Serialize)]
pub struct ResumeFields {
    pub owner_epoch: u64,
    /// The current owner's token fingerprint.
    pub owner_fingerprint: Option<String>,
    /// Lanes an owner must observe: starting, running, suspected stall,
    /// recovering.
    pub lanes_requiring_observation: Vec<LaneId>,
    /// `replaced` lanes whose reserved child lane does not exist.
    pub incomplete_replacements: Vec<String>,
    /// Approved components without a registration.
    pub topology_gaps: Vec<String>,
}

/// The [`ResumeFields`] of a replayed state.
pub fn resume_fields(state: &CoordinatorState) -> ResumeFields {
    let observe: Vec<LaneId> = state
        .lanes()
        .iter()
        .filter(|(_, lane)| {
            matches!(
                lane.state,
                LaneState::Starting
                    | LaneState::Running
                    | LaneState::SuspectedStall
                    | LaneState::Recovering
            )
        })
        .map(|(id, _)| id.clone())
        .collect();
    let gaps: Vec<String> = state
        .approved_component_ids()
        .iter()
        .filter(|id| !state.topology().contains_key(*id))
        .cloned()
        .collect();
    ResumeFields {
        owner_epoch: state.owner_epoch(),
        owner_fingerprint: state.owner_fingerprint().map(str::to_string),
        lanes_requiring_observation: observe,
        incomplete_replacements: state.incomplete_replacements().to_vec(),
        topology_gaps: gaps,
    }
}

/// What `liveness-check --lane-id L --at T` (no `--command-status`)
/// answers for one lane: its decision, or the refusal it would print.
pub fn lane_liveness(
    state: &CoordinatorState,
    policy: &Policy,
    lane_id: &str,
    at: &str,
) -> Result<LivenessAction, FlowError> {
    check_lane(state, policy, lane_id, at, CommandStatus::Unknown).map(|d| d.action)
}

/// The verdict of a lane: `{action, reason}` exactly as `liveness-check`
/// prints them, or `{error, message}` with the error code it would exit
/// with.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum LaneVerdict {
    Decided {
        action: LivenessAction,
        reason: &'static str,
    },
    Refused {
        error: &'static str,
        message: String,
    },
}

fn lane_verdict(state: &CoordinatorState, policy: &Policy, lane_id: &str, at: &str) -> LaneVerdict {
    match check_lane(state, policy, lane_id, at, CommandStatus::Unknown) {
        Ok(decision) => LaneVerdict::Decided {
            action: decision.action,
            reason: decision.reason,
        },
        Err(refusal) => LaneVerdict::Refused {
            error: refusal.classify().1,
            message: refusal.message().to_string(),
        },
    }
}

/// Shell-quote one argument (single quotes unless it is plainly safe:
/// identifiers, timestamps and plain paths need none).
pub fn quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+=,".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The command line for `command` on `lane` of `run_id`, with `<...>`
/// placeholders where only the agent knows the value.
fn lane_command(command: &str, run_id: &str, lane: &LaneRecord, extra: &str) -> String {
    format!(
        "bluetape-flow {command} --run-id {} --owner-file <OWNER_FILE> --lane-id {} --agent-id {} --at <UTC> --evidence <FILE>{extra}",
        quote(run_id),
        quote(&lane.id),
        quote(&lane.agent_id)
    )
}

fn run_command(command: &str, run_id: &str, extra: &str) -> String {
    format!(
        "bluetape-flow {command} --run-id {} --owner-file <OWNER_FILE> --evidence <FILE>{extra}",
        quote(run_id)
    )
}

/// The command an agent runs next for a lane, given its liveness action
/// (`None` when the lane needs nothing).
pub fn next_lane_command(
    state: &CoordinatorState,
    run_id: &str,
    lane: &LaneRecord,
    action: Option<LivenessAction>,
) -> Option<String> {
    use LivenessAction as A;
    let Some(action) = action else {
        // The verdict itself failed: look at the lane first.
        return Some(format!(
            "bluetape-flow liveness-check --run-id {} --lane-id {} --at <UTC>",
            quote(run_id),
            quote(&lane.id)
        ));
    };
    Some(match (action, lane.state) {
        (A::Continue, LaneState::Pending) => lane_command("lane-start", run_id, lane, ""),
        (A::Continue, LaneState::Starting) => lane_command("startup-ack", run_id, lane, ""),
        (A::Continue, _) => run_command("heartbeat", run_id, " --input <FILE>"),
        (A::SuspectStall, _) => lane_command(
            "stall-record",
            run_id,
            lane,
            " --reason <TEXT> --decision <FILE>",
        ),
        (A::SendProbe, _) => lane_command("probe-sent", run_id, lane, " --deadline <UTC>"),
        (A::AwaitProbe, _) => lane_command("probe-ack", run_id, lane, ""),
        (A::Interrupt, _) => lane_command("interrupt-result", run_id, lane, ""),
        (A::ObserveCommand, _) => format!(
            "bluetape-flow liveness-check --run-id {} --lane-id {} --at <UTC> --command-status <alive|dead>",
            quote(run_id),
            quote(&lane.id)
        ),
        (A::MainTakeover, _) => lane_command("lane-fail", run_id, lane, ""),
        (A::None, LaneState::Replaced) => {
            let child = lane.replacement_lane_id.as_deref().unwrap_or("<LANE>");
            let verb = if state
                .incomplete_replacements()
                .iter()
                .any(|id| id == &lane.id)
            {
                "replacement-repair"
            } else if state.lane(child).map(|c| c.state) == Some(LaneState::Completed) {
                "replacement-close"
            } else {
                return None;
            };
            format!(
                "bluetape-flow {verb} --run-id {} --owner-file <OWNER_FILE> --lane-id {} --replacement-lane-id {} --at <UTC> --evidence <FILE>",
                quote(run_id),
                quote(&lane.id),
                quote(child)
            )
        }
        (A::None, _) => return None,
    })
}

/// One lane of `status --run-id`.
#[derive(Debug, Clone, Serialize)]
pub struct LaneView {
    pub lane_id: String,
    pub agent_id: String,
    pub state: LaneState,
    pub parent_lane_id: Option<String>,
    /// The lane that replaced this one.
    pub replaced_by: Option<String>,
    pub write_scope: Vec<String>,
    /// When the lane was last observed (its last event).
    pub last_observed_at: String,
    /// Its silence lease deadline.
    pub lease_until: Option<String>,
    /// What `liveness-check --lane-id L --at T` answers for it.
    pub liveness: LaneVerdict,
    /// The command line an agent runs next for this lane, if any.
    pub next_command: Option<String>,
}

fn lane_view(
    state: &CoordinatorState,
    policy: &Policy,
    run_id: &str,
    lane: &LaneRecord,
    at: &str,
) -> (LaneView, Option<LivenessAction>) {
    let action = lane_liveness(state, policy, &lane.id, at).ok();
    let view = LaneView {
        lane_id: lane.id.to_string(),
        agent_id: lane.agent_id.to_string(),
        state: lane.state,
        parent_lane_id: lane.parent_lane_id.clone(),
        replaced_by: lane.replacement_lane_id.clone(),
        write_scope: lane.write_scope.clone(),
        last_observed_at: lane.updated_at.clone(),
        lease_until: lane.silence_lease_deadline.clone(),
        liveness: lane_verdict(state, policy, &lane.id, at),
        next_command: next_lane_command(state, run_id, lane, action),
    };
    (view, action)
}

/// One component of `status --run-id`.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentView {
    pub component_id: String,
    pub required: bool,
    pub owner_lane: String,
    pub required_checks: Vec<CheckView>,
    pub evidence_present: bool,
    pub coverage: CoverageState,
    pub dependencies: Vec<String>,
    /// Removed from the topology (listed after the registered ones).
    pub removed: bool,
}

/// A required check and its latest recorded result (null: none yet).
#[derive(Debug, Clone, Serialize)]
pub struct CheckView {
    pub check: String,
    pub passed: Option<bool>,
}

/// The components of the run: registered ones with their recorded check
/// results, then removed ones.
pub fn component_views(state: &CoordinatorState) -> Vec<ComponentView> {
    let one = |component: &super::state::Component, removed: bool| {
        let results = state.checks().get(&component.id);
        ComponentView {
            component_id: component.id.clone(),
            required: component.required,
            owner_lane: component.owner_lane.clone(),
            required_checks: component
                .required_checks
                .iter()
                .map(|check| CheckView {
                    check: check.clone(),
                    passed: results.and_then(|r| r.get(check)).copied(),
                })
                .collect(),
            evidence_present: !component.evidence_refs.is_empty(),
            coverage: component.coverage_state,
            dependencies: component.dependencies.clone(),
            removed,
        }
    };
    let registered = state.topology().values().map(|c| one(c, false));
    let removed = state
        .removed_component_records()
        .values()
        .map(|c| one(c, true));
    registered.chain(removed).collect()
}

/// One recommended action of `status --run-id`.
#[derive(Debug, Clone, Serialize)]
pub struct NextAction {
    /// What to do: a liveness action, or `repair_replacement`,
    /// `approve_run`, `cover_component`, `complete`…
    pub action: &'static str,
    /// The lane, component or check it is about (null: the run).
    pub subject: Option<String>,
    /// The command line to run.
    pub command: Option<String>,
}

/// The recommended actions, in order: stalled or recovering lanes first,
/// then replacements needing repair, then completion gaps, then `complete`
/// when nothing else is missing.
pub fn next_actions(
    state: &CoordinatorState,
    run_id: &str,
    lane_actions: &BTreeMap<String, Option<LivenessAction>>,
    report: &CompletionReport,
) -> Vec<NextAction> {
    use LivenessAction as A;
    let mut out = Vec::new();
    let mut push = |action: &'static str, subject: Option<&str>, command: Option<String>| {
        out.push(NextAction {
            action,
            subject: subject.map(str::to_string),
            command,
        });
    };
    let run_state = state.run_state_enum();
    if run_state.is_terminal() {
        return out;
    }
    let urgent = |action: &Option<LivenessAction>| {
        matches!(
            action,
            None | Some(
                A::SuspectStall | A::SendProbe | A::AwaitProbe | A::Interrupt | A::MainTakeover
            ) | Some(A::ObserveCommand)
        )
    };
    for (lane_id, action) in lane_actions {
        let Some(lane) = state.lane(lane_id) else {
            continue;
        };
        if urgent(action) {
            let kind = action.map_or("liveness_unreadable", |a| a.as_str());
            push(
                kind,
                Some(lane_id),
                next_lane_command(state, run_id, lane, *action),
            );
        }
    }
    for lane_id in state.incomplete_replacements() {
        if let Some(lane) = state.lane(lane_id) {
            push(
                "repair_replacement",
                Some(lane_id),
                next_lane_command(state, run_id, lane, Some(A::None)),
            );
        }
    }
    // A run not yet started has one next action: the step that starts it.
    let opening = match run_state {
        super::state::RunState::Planned => Some(("approve_run", "run-approve")),
        super::state::RunState::Approved => Some(("start_run", "run-start")),
        _ => None,
    };
    if let Some((action, command)) = opening {
        push(action, None, Some(run_command(command, run_id, "")));
        return out;
    }
    for component in &report.missing_components {
        let command = if state.topology().contains_key(component) {
            run_command("component-evidence", run_id, " --input <FILE>")
        } else {
            run_command("topology-register", run_id, " --input <FILE>")
        };
        push("cover_component", Some(component), Some(command));
    }
    for check in &report.failed_checks {
        push(
            "record_check",
            Some(check),
            Some(run_command("check-result", run_id, " --input <FILE>")),
        );
    }
    for lane_id in &report.unresolved_failed_lanes {
        push(
            "resolve_failed_lane",
            Some(lane_id),
            Some(format!(
                "bluetape-flow lane-resolve --run-id {} --owner-file <OWNER_FILE> --lane-id {} --resolution-lane-id <LANE> --at <UTC> --evidence <FILE>",
                quote(run_id),
                quote(lane_id)
            )),
        );
    }
    for lane_id in &report.missing_lanes {
        if report.unresolved_failed_lanes.contains(lane_id) {
            continue;
        }
        let action = lane_actions.get(lane_id).copied().flatten();
        if let (Some(lane), Some(A::Continue)) = (state.lane(lane_id), action)
            && lane.state == LaneState::Running
        {
            push(
                "finish_lane",
                Some(lane_id),
                Some(lane_command("lane-complete", run_id, lane, "")),
            );
        }
    }
    if evaluate(state, true).complete && run_state == super::state::RunState::Running {
        push("complete", None, Some(run_command("complete", run_id, "")));
    }
    out
}

/// How many gaps a completion report lists (for the run listing).
pub fn gap_count(report: &CompletionReport) -> usize {
    report.missing_lanes.len()
        + report.missing_components.len()
        + report.failed_checks.len()
        + report.incomplete_replacements.len()
        + report.unresolved_failed_lanes.len()
        + usize::from(report.missing_main_verification)
}

/// Lanes by state (`{"running": 2, "completed": 1}`).
pub fn lane_counts(state: &CoordinatorState) -> BTreeMap<LaneState, u64> {
    let mut counts: BTreeMap<LaneState, u64> = BTreeMap::new();
    for lane in state.lanes().values() {
        *counts.entry(lane.state).or_default() += 1;
    }
    counts
}

/// The Phase 2 part of `status --run-id`: lanes, components, completion,
/// the resume fields and the next actions.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub resume: ResumeFields,
    pub lanes: Vec<LaneView>,
    pub components: Vec<ComponentView>,
    /// Exactly what `completion-check` reports.
    pub completion: CompletionReport,
    /// Events that break one of our rules (contracts/rules.md), as
    /// completion-check reports them; empty when none stands.
    pub breaches: Vec<super::breach::Breach>,
    pub next: Vec<NextAction>,
}

/// The [`RunDetail`] of a replayed state at `at` (already validated).
pub fn run_detail(state: &CoordinatorState, policy: &Policy, run_id: &str, at: &str) -> RunDetail {
    let mut lanes = Vec::new();
    let mut actions = BTreeMap::new();
    for lane in state.lanes().values() {
        let (view, action) = lane_view(state, policy, run_id, lane, at);
        lanes.push(view);
        actions.insert(lane.id.to_string(), action);
    }
    let report = evaluate_completion(state);
    RunDetail {
        resume: resume_fields(state),
        lanes,
        components: component_views(state),
        next: next_actions(state, run_id, &actions, &report),
        completion: report,
        breaches: state.breaches().to_vec(),
    }
}

/// The longest `summary` a log row carries (the event itself is in the
/// receipt; a row is for reading).
pub const MAX_SUMMARY_CHARS: usize = 240;

/// The string at `key` of an event or intent (absent or not a string: none).
pub(super) fn text<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// The objects of the list `list`, when it is one (anything else: none).
fn objects(list: Option<&Value>) -> impl Iterator<Item = &Map<String, Value>> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

/// The evidence items of an event or intent that are objects.
pub(super) fn evidence_refs(
    item: &Map<String, Value>,
) -> impl Iterator<Item = &Map<String, Value>> {
    objects(item.get("evidence_refs"))
}

/// The one-line summary parts of one event or intent.
fn summary_parts(event: &Map<String, Value>, parts: &mut Vec<String>) {
    if let Some(reason) = text(event, "reason") {
        parts.push(reason.to_string());
    }
    if let Some(meta) = event.get("metadata").and_then(Value::as_object) {
        match (text(meta, "component_id"), text(meta, "check_id")) {
            (Some(component), Some(check)) => parts.push(format!("{component}:{check}")),
            (Some(component), None) => parts.push(format!("component {component}")),
            _ => {}
        }
        if let Some(kind) = text(meta, "report_kind") {
            parts.push(format!("report {kind}"));
        }
        if let Some(child) = text(meta, "replacement_lane_id") {
            parts.push(format!("replacement {child}"));
        }
        if let Some(lease) = text(meta, "silence_lease_deadline") {
            parts.push(format!("lease until {lease}"));
        }
        if let Some(components) = meta.get("components").and_then(Value::as_array) {
            let ids: Vec<&str> = components
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .collect();
            parts.push(format!("components {}", ids.join(",")));
        }
    }
    for item in evidence_refs(event) {
        let kind = text(item, "kind").unwrap_or("?");
        match text(item, "summary") {
            Some(summary) => parts.push(format!("{kind}: {summary}")),
            None => parts.push(kind.to_string()),
        }
    }
}

/// The intents of a `transaction_committed` (empty for any other event).
pub fn intents(event: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    objects(event.get("metadata").and_then(|m| m.get("intents"))).collect()
}

/// One `log` row of a verified event (views.md §2). The fields copied
/// from the event are shown as the receipt recorded them (JSON values,
/// not re-typed, so a row never says more than the line did).
#[derive(Debug, Clone, Serialize)]
pub struct LogRow {
    pub sequence: Value,
    /// The event's `timestamp`.
    pub created_at: Value,
    /// Its (or its first intent's) `metadata.observed_at`, or null.
    pub observed_at: Value,
    pub event_type: Value,
    /// For a `transaction_committed`: its intents' types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent_types: Option<Vec<Value>>,
    /// The event's (or its first intent's) lane.
    pub lane_id: Option<String>,
    pub agent_id: Option<String>,
    /// Its `metadata.owner_epoch`, or null.
    pub owner_epoch: Value,
    /// One line: reason, evidence kinds and summaries, check, component…
    pub summary: String,
    pub checksum: Value,
}

impl LogRow {
    /// The event's sequence, when it is a number.
    pub fn sequence(&self) -> Option<u64> {
        self.sequence.as_u64()
    }
}

/// The [`LogRow`] of a verified event.
pub fn log_row(event: &Map<String, Value>) -> LogRow {
    let inner = intents(event);
    let first = |key: &str| -> Option<String> {
        match event.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => inner.iter().find_map(|i| text(i, key)).map(str::to_string),
        }
    };
    let mut parts = Vec::new();
    summary_parts(event, &mut parts);
    for intent in &inner {
        summary_parts(intent, &mut parts);
    }
    parts.dedup();
    let summary: String = parts.join("; ").chars().take(MAX_SUMMARY_CHARS).collect();
    let metadata = event.get("metadata").and_then(Value::as_object);
    let observed = metadata
        .and_then(|m| m.get("observed_at"))
        .or_else(|| {
            inner
                .iter()
                .find_map(|i| i.get("metadata")?.get("observed_at"))
        })
        .cloned()
        .unwrap_or(Value::Null);
    let recorded = |key: &str| event.get(key).cloned().unwrap_or(Value::Null);
    LogRow {
        sequence: recorded("sequence"),
        created_at: recorded("timestamp"),
        observed_at: observed,
        event_type: recorded("event_type"),
        intent_types: (!inner.is_empty()).then(|| {
            inner
                .iter()
                .filter_map(|i| i.get("event_type").cloned())
                .collect()
        }),
        lane_id: first("lane_id"),
        agent_id: first("agent_id"),
        owner_epoch: metadata
            .and_then(|m| m.get("owner_epoch"))
            .cloned()
            .unwrap_or(Value::Null),
        summary,
        checksum: recorded("checksum"),
    }
}

/// Whether a row's event (or one of its intents) is about `lane`.
pub fn touches_lane(event: &Map<String, Value>, lane: &str) -> bool {
    text(event, "lane_id") == Some(lane)
        || intents(event)
            .iter()
            .any(|i| text(i, "lane_id") == Some(lane))
}

/// Whether the event is of type `kind`, or a transaction holding one.
pub fn has_type(event: &Map<String, Value>, kind: &str) -> bool {
    text(event, "event_type") == Some(kind)
        || intents(event)
            .iter()
            .any(|i| text(i, "event_type") == Some(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_identifiers_alone_and_quotes_the_rest() {
        assert_eq!(quote("build-2"), "build-2");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
    }
}
