//! The read-only views (views.md): `status`, `log` and the data of
//! `report`. They never lock, create, modify or chmod anything in the
//! state root. `status` loads each run exactly as `resume-check`,
//! `completion-check` do (a full verify and replay, never a checkpoint:
//! contracts/receipt.md "Checkpoint") and asks the same pure functions;
//! `log` and `report` stream the verified receipt.

use crate::receipt::json_ref::{JsonRef, ObjectRef};
use crate::receipt::vocab::EventType;
use crate::store::root::StateRoot;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

use super::error::{ErrorKind, FlowError, FlowResult};
use super::inspect::{Inspection, inspect_run};
use super::ledger::{OpenRun, Verdict, damage_error, open_run, verify_from, verify_receipt};
use crate::coordinator::OnRefusal;
use crate::coordinator::approval::ApprovalLedger;
use crate::coordinator::breach::Breach;
use crate::coordinator::completion::evaluate_completion;
use crate::coordinator::decide::Policy;
use crate::coordinator::liveness::parse_instant;
use crate::coordinator::raced::Raced;
use crate::coordinator::views::{RunDetail, gap_count, lane_counts, run_detail};
use crate::coordinator::{CoordinatorState, ReplayPolicy};
use crate::receipt::rules::Family;
use crate::receipt::verify::ChainPosition;
use crate::receipt::vocab::LaneState;
use crate::store::run::list_run_ids;

/// Validate an `--at` value the way `liveness-check` reads it.
pub fn check_at(at: &str) -> FlowResult<()> {
    parse_instant(at).map(|_| ())
}

/// What the first events of a run say: its approval decisions (made
/// before it starts) and, for a recovery run, the run it recovers.
#[derive(Debug, Default)]
struct RunPrefix {
    ledger: ApprovalLedger,
    recovery_of: Option<String>,
}

/// Event types after which no approval decision can follow.
fn ends_approval_phase(event: &ObjectRef<'_>) -> bool {
    matches!(
        event
            .get("event_type")
            .and_then(JsonRef::as_str)
            .and_then(EventType::parse),
        Some(EventType::RunStarted | EventType::RunRecoveryStarted)
    ) || matches!(
        event.get("to_state").and_then(JsonRef::as_str),
        Some("running" | "completed" | "failed" | "blocked" | "cancelled")
    ) && event.get("lane_id").is_none_or(JsonRef::is_null)
}

/// Read the verified events up to the run's start (bounded by the run's
/// approval phase, not by the receipt's length).
fn read_prefix(run: &OpenRun) -> RunPrefix {
    let mut prefix = RunPrefix::default();
    let _ = verify_receipt(run, |event| {
        if event.get("sequence").and_then(JsonRef::as_u64) == Some(1) {
            prefix.recovery_of = event
                .get("metadata")
                .and_then(|m| m.get("recovery_original_run_id"))
                .and_then(JsonRef::as_str)
                .map(str::to_string);
        }
        prefix.ledger.observe_ref(event);
        if ends_approval_phase(event) {
            Err(String::new())
        } else {
            Ok(())
        }
    });
    prefix
}

/// The run's approval as the views show it: the last decision, and how
/// it proves who made it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalView {
    /// Whether the run froze an approver policy.
    pub gated: bool,
    /// `approved` or `denied` (null without a decision).
    pub state: Option<&'static str>,
    pub by: Option<String>,
    pub at: Option<String>,
    /// `signed` only when the replayed state verified its signature, else
    /// `asserted` (null without a decision).
    pub proof: Option<&'static str>,
    /// The fingerprint of the key that signed it.
    pub key: Option<String>,
}

fn approval_view(ledger: &ApprovalLedger, state: Option<&CoordinatorState>) -> ApprovalView {
    let last = ledger.decisions.last();
    let (proof, key) = match last.map(|d| match state {
        Some(state) => d.proof(state.gate(), state.breaches()),
        None => ("asserted", None),
    }) {
        Some((proof, key)) => (Some(proof), key),
        None => (None, None),
    };
    ApprovalView {
        gated: ledger.has_policy(),
        state: last.map(|d| d.decision),
        by: last.and_then(|d| d.by.clone()),
        at: last.map(|d| d.at.clone()),
        proof,
        key,
    }
}

/// Says which events of a streamed receipt (`log`) break one of our rules
/// (`contracts/rules.md`): the stream's own events are replayed one at a
/// time as they are verified (a breach is always recorded at the event
/// that makes it), so `log` reads the receipt once, `--follow` included.
/// Phase 1 runs mark nothing.
pub struct BreachMarker {
    state: Option<Box<CoordinatorState>>,
    policy: ReplayPolicy,
}

impl BreachMarker {
    pub fn new(run: &OpenRun) -> BreachMarker {
        let state = (run.manifest.contract.family == Family::V1_1)
            .then(|| run.origin().ok())
            .flatten()
            .map(|origin| Box::new(CoordinatorState::new(&origin)));
        BreachMarker {
            state,
            policy: super::rebuild::replay_policy(run),
        }
    }

    /// The breaches of the next verified event (events in receipt order).
    pub fn observe(&mut self, event: &ObjectRef<'_>) -> Vec<Breach> {
        let Some(state) = self.state.as_mut() else {
            return Vec::new();
        };
        let before = state.breaches().len();
        // A refused event ends the marking: nothing to undo.
        if state
            .apply_ref(event, &self.policy, OnRefusal::Spoil)
            .is_err()
        {
            self.state = None;
            return Vec::new();
        }
        state.breaches()[before..].to_vec()
    }
}

/// The recovery runs made from each run, found from the other runs' first
/// events (linear in the number of runs).
fn recovered_by(runs: &[(String, Option<String>)]) -> Vec<(String, String)> {
    runs.iter()
        .filter_map(|(id, of)| of.clone().map(|of| (of, id.clone())))
        .collect()
}

fn recovery_links(root: &StateRoot) -> FlowResult<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    for id in list_run_ids(root)? {
        let of = open_run(root, &id)
            .ok()
            .and_then(|run| read_prefix(&run).recovery_of);
        out.push((id, of));
    }
    Ok(out)
}

/// A Phase 2 run's state: a full verify and replay (with the state of the
/// trusted prefix when damaged). Never a checkpoint: what `status`, `log`
/// and `report` show is what the receipt says (contracts/receipt.md
/// "Checkpoint").
enum Loaded {
    Healthy(Box<CoordinatorState>, ChainPosition),
    Damaged {
        prefix: Option<Box<CoordinatorState>>,
        first_bad: u64,
        trusted_sequence: u64,
        trusted_checksum: String,
        error: FlowError,
    },
}

fn load_phase2(run: &OpenRun) -> FlowResult<Loaded> {
    let origin = match run.origin() {
        Ok(origin) => origin,
        Err(error) => {
            return Ok(Loaded::Damaged {
                prefix: None,
                first_bad: 1,
                trusted_sequence: 0,
                trusted_checksum: String::new(),
                error,
            });
        }
    };
    // The gate's policy file too: the replay `verify` does.
    let policy = super::rebuild::replay_policy(run);
    let (verdict, mut state) =
        super::rebuild::replay_from(run, &origin, &policy, OnRefusal::Spoil)?;
    if let Verdict::Rejected { sequence, .. } = &verdict {
        // The refused event spoilt the state: the prefix before it again.
        state = CoordinatorState::new(&origin);
        let last = sequence.saturating_sub(1);
        let _ = verify_receipt(run, |event| {
            if event.get("sequence").and_then(JsonRef::as_u64) > Some(last) {
                return Err(String::new());
            }
            state
                .apply_ref(event, &policy, OnRefusal::Restore)
                .map_err(|e| e.to_string())
        })?;
    }
    Ok(match verdict {
        Verdict::Intact(position) => Loaded::Healthy(Box::new(state), position),
        Verdict::Damaged(damage) => Loaded::Damaged {
            first_bad: damage.first_bad_sequence,
            trusted_sequence: damage.last_trusted_sequence,
            trusted_checksum: damage.last_trusted_checksum.clone(),
            error: damage_error(run, &damage, false),
            prefix: Some(Box::new(state)),
        },
        Verdict::Rejected {
            sequence,
            message,
            trusted_checksum,
        } => Loaded::Damaged {
            first_bad: sequence,
            trusted_sequence: sequence.saturating_sub(1),
            trusted_checksum,
            error: ErrorKind::ReceiptCorrupt(message).into(),
            prefix: Some(Box::new(state)),
        },
    })
}

/// The workflow type the run's manifest snapshot names (free JSON: the
/// snapshot is shown as it was recorded).
fn workflow_type(manifest: &crate::receipt::manifest::RunManifest) -> Value {
    manifest
        .run
        .as_ref()
        .and_then(|r| r.get("workflow_type"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// What `status` answers without `--run-id`: every run, oldest first.
#[derive(Debug, Serialize)]
pub struct StatusListing {
    /// The instant liveness is judged at.
    pub at: String,
    pub runs: Vec<ListingEntry>,
}

/// One run of the `status` listing. A run that cannot be read is listed
/// as damaged with what is known.
#[derive(Debug, Serialize)]
pub struct ListingEntry {
    pub run_id: String,
    /// Absent when the run could not be opened.
    #[serde(flatten)]
    pub opened: Option<OpenedRun>,
    /// The replayed state (of the trusted prefix when damaged); absent
    /// when nothing could be replayed.
    #[serde(flatten)]
    pub replayed: Option<ListedState>,
    /// `ok` or `damaged`.
    pub receipt: &'static str,
    /// The verified (or trusted) length; absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Where trust ends in a damaged receipt.
    #[serde(flatten)]
    pub damage: Option<ListedDamage>,
    /// Why the run is damaged or could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The recovery runs made from this one.
    pub recovered_by: Vec<String>,
}

/// What the listing knows of a run it could open.
#[derive(Debug, Serialize)]
pub struct OpenedRun {
    /// As the manifest snapshot records it.
    pub workflow_type: Value,
    pub manifest_version: String,
    pub approval: ApprovalView,
    /// The damaged run this one recovers.
    pub recovery_of: Option<String>,
}

/// A listed run's state: Phase 2 fields are null for a Phase 1 run.
#[derive(Debug, Serialize)]
pub struct ListedState {
    pub run_state: String,
    pub last_event_at: Option<String>,
    pub owner_epoch: Option<u64>,
    /// Lanes by state.
    pub lanes: Option<BTreeMap<LaneState, u64>>,
    pub completion: Option<CompletionSummary>,
    /// Present only when some stand, as in `verify`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<Breach>,
}

/// Completion in one line: complete, or how many gaps.
#[derive(Debug, Serialize)]
pub struct CompletionSummary {
    pub complete: bool,
    pub gaps: usize,
}

/// Where trust ends in a listed damaged run.
#[derive(Debug, Serialize)]
pub struct ListedDamage {
    /// Null when the run could not even be opened.
    pub first_bad_sequence: Option<u64>,
    /// Always `blocked`.
    pub effective_state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_trusted_checksum: Option<String>,
}

impl ListedDamage {
    fn at(first_bad: Option<u64>, trusted_checksum: Option<String>) -> Option<ListedDamage> {
        Some(ListedDamage {
            first_bad_sequence: first_bad,
            effective_state: "blocked",
            last_trusted_checksum: trusted_checksum,
        })
    }
}

/// The listing's state of a replayed Phase 2 run.
fn listed_phase2(state: &CoordinatorState) -> ListedState {
    let report = evaluate_completion(state);
    ListedState {
        run_state: state.run_state().to_string(),
        last_event_at: state.updated_at().map(str::to_string),
        owner_epoch: Some(state.owner_epoch()),
        lanes: Some(lane_counts(state)),
        completion: Some(CompletionSummary {
            complete: report.complete,
            gaps: gap_count(&report),
        }),
        breaches: state.breaches().to_vec(),
    }
}

/// One entry of the `status` listing. A run that cannot be read is listed
/// as damaged with what is known; it never stops the listing.
fn listing_entry(root: &StateRoot, run_id: &str, recovered_by: Vec<String>) -> ListingEntry {
    let mut entry = ListingEntry {
        run_id: run_id.to_string(),
        opened: None,
        replayed: None,
        receipt: "damaged",
        sequence: None,
        damage: None,
        error: None,
        recovered_by,
    };
    let run = match open_run(root, run_id) {
        Ok(run) => run,
        Err(error) => {
            entry.damage = ListedDamage::at(None, None);
            entry.error = Some(error.message().to_string());
            return entry;
        }
    };
    let prefix = read_prefix(&run);
    let opened = |state: Option<&CoordinatorState>| OpenedRun {
        workflow_type: workflow_type(&run.manifest),
        manifest_version: run.manifest.contract.version.clone(),
        approval: approval_view(&prefix.ledger, state),
        recovery_of: prefix.recovery_of.clone(),
    };
    entry.opened = Some(opened(None));
    match run.manifest.contract.family {
        Family::V1_0 => match inspect_run(&run) {
            Ok(Inspection::Healthy {
                run_state,
                sequence,
                ..
            }) => {
                entry.receipt = "ok";
                entry.sequence = Some(sequence);
                entry.replayed = Some(ListedState {
                    run_state,
                    last_event_at: None,
                    owner_epoch: None,
                    lanes: None,
                    completion: None,
                    breaches: Vec::new(),
                });
            }
            Ok(Inspection::Damaged {
                first_bad,
                trusted_sequence,
                ..
            }) => {
                entry.damage = ListedDamage::at(Some(first_bad), None);
                entry.sequence = Some(trusted_sequence);
            }
            Err(error) => entry.error = Some(error.message().to_string()),
        },
        Family::V1_1 => match load_phase2(&run) {
            Ok(Loaded::Healthy(state, _)) => {
                entry.receipt = "ok";
                entry.opened = Some(opened(Some(&state)));
                entry.sequence = Some(state.last_sequence());
                entry.replayed = Some(listed_phase2(&state));
            }
            Ok(Loaded::Damaged {
                prefix,
                first_bad,
                trusted_sequence,
                trusted_checksum,
                error,
            }) => {
                if let Some(state) = prefix {
                    entry.opened = Some(opened(Some(&state)));
                    entry.replayed = Some(listed_phase2(&state));
                }
                entry.damage = ListedDamage::at(Some(first_bad), Some(trusted_checksum));
                entry.sequence = Some(trusted_sequence);
                entry.error = Some(error.message().to_string());
            }
            Err(error) => entry.error = Some(error.message().to_string()),
        },
    }
    entry
}

/// `status` without `--run-id`: every run, oldest first.
pub fn status_all(root: &StateRoot, at: &str) -> FlowResult<StatusListing> {
    check_at(at)?;
    let links = recovery_links(root)?;
    let recovered = recovered_by(&links);
    let runs = links
        .iter()
        .map(|(id, _)| {
            let by: Vec<String> = recovered
                .iter()
                .filter(|(of, _)| of == id)
                .map(|(_, r)| r.clone())
                .collect();
            listing_entry(root, id, by)
        })
        .collect();
    Ok(StatusListing {
        at: at.to_string(),
        runs,
    })
}

/// What `status --run-id` answers (and `bundle-verify` summarises): the
/// run header and where the run stands.
#[derive(Debug, Serialize)]
pub struct RunStatus {
    #[serde(flatten)]
    pub header: StatusHeader,
    pub run_state: String,
    /// The verified length.
    pub sequence: u64,
    /// The checksum of the last verified event.
    pub checksum: String,
    #[serde(flatten)]
    pub phase: StatusPhase,
    /// The damaged run this one recovers.
    pub recovery_of: Option<String>,
    /// The recovery runs made from this one (null where only a state root
    /// could say: `bundle-verify`).
    pub recovered_by: Option<Vec<String>>,
}

/// The header of `status --run-id`, from the manifest snapshot.
#[derive(Debug, Serialize)]
pub struct StatusHeader {
    pub run_id: String,
    /// The instant liveness is judged at.
    pub at: String,
    /// As the manifest snapshot records it.
    pub workflow_type: Value,
    pub manifest_version: String,
    pub manifest_hash: String,
    /// Always `ok`: a damaged run is an error.
    pub receipt: &'static str,
}

/// What a run's phase gives `status --run-id`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum StatusPhase {
    /// A Phase 1 run: its verified state, with the Phase 2 fields null
    /// (views.md §1).
    Phase1(Phase2FieldsNull),
    Phase2(Box<Phase2Status>),
}

/// The Phase 2 fields of `status --run-id`, each null (`()` serialises
/// as null).
#[derive(Debug, Default, Serialize)]
pub struct Phase2FieldsNull {
    pub owner_epoch: (),
    pub owner_fingerprint: (),
    pub lanes: (),
    pub components: (),
    pub completion: (),
    pub incomplete_replacements: (),
    pub lanes_requiring_observation: (),
    pub topology_gaps: (),
    pub next: (),
    pub approval: (),
}

/// The Phase 2 part of `status --run-id` for a verified, replayed run.
#[derive(Debug, Serialize)]
pub struct Phase2Status {
    /// The time of the last event.
    pub last_event_at: Option<String>,
    #[serde(flatten)]
    pub detail: RunDetail,
    pub approval: ApprovalView,
}

impl RunStatus {
    /// The Phase 2 part, if the run has one.
    pub fn phase2(&self) -> Option<&Phase2Status> {
        match &self.phase {
            StatusPhase::Phase1(_) => None,
            StatusPhase::Phase2(status) => Some(status),
        }
    }

    /// The breaches of the run (none for a Phase 1 run).
    pub fn breaches(&self) -> &[Breach] {
        self.phase2().map_or(&[], |p| &p.detail.breaches)
    }
}

/// The Phase 2 part of `status --run-id` for a verified, replayed run:
/// shared with `bundle-verify`, which replays a run from a bundle.
pub fn phase2_status(
    manifest: &crate::receipt::manifest::RunManifest,
    state: &CoordinatorState,
    ledger: &ApprovalLedger,
    run_id: &str,
    at: &str,
) -> Phase2Status {
    let policy = Policy::from_contract(&manifest.contract.contract, &manifest.contract.limits);
    Phase2Status {
        last_event_at: state.updated_at().map(str::to_string),
        detail: run_detail(state, &policy, run_id, at),
        approval: approval_view(ledger, Some(state)),
    }
}

/// `status --run-id` of a verified, replayed Phase 2 run at `position`.
pub fn replayed_status(
    manifest: &crate::receipt::manifest::RunManifest,
    state: &CoordinatorState,
    position: &ChainPosition,
    ledger: &ApprovalLedger,
    run_id: &str,
    at: &str,
) -> RunStatus {
    RunStatus {
        header: summary_header(manifest, run_id, at),
        run_state: state.run_state().to_string(),
        sequence: position.sequence,
        checksum: position.checksum.clone(),
        phase: StatusPhase::Phase2(Box::new(phase2_status(manifest, state, ledger, run_id, at))),
        recovery_of: None,
        recovered_by: None,
    }
}

/// The header of `status --run-id` from a manifest snapshot.
pub fn summary_header(
    manifest: &crate::receipt::manifest::RunManifest,
    run_id: &str,
    at: &str,
) -> StatusHeader {
    StatusHeader {
        run_id: run_id.to_string(),
        at: at.to_string(),
        workflow_type: workflow_type(manifest),
        manifest_version: manifest.contract.version.clone(),
        manifest_hash: manifest.contract.hash.clone(),
        receipt: "ok",
    }
}

/// `status --run-id`: the run header and, for a Phase 2 run, its lanes
/// with their liveness verdicts at `at`, components, completion, the
/// resume fields and the next actions. A damaged or missing run is the
/// exit-3 error `resume-check` gives.
pub fn status_run(root: &StateRoot, run_id: &str, at: &str) -> FlowResult<RunStatus> {
    let run = open_run(root, run_id)?;
    check_at(at)?;
    let mut status = match run.manifest.contract.family {
        Family::V1_0 => match inspect_run(&run)? {
            Inspection::Healthy {
                run_state,
                sequence,
                checksum,
                ..
            } => RunStatus {
                header: summary_header(&run.manifest, run_id, at),
                run_state,
                sequence,
                checksum,
                phase: StatusPhase::Phase1(Phase2FieldsNull::default()),
                recovery_of: None,
                recovered_by: None,
            },
            Inspection::Damaged { .. } => {
                // Verified again the way `verify` reports it.
                super::verify(root, run_id)?;
                return Err(ErrorKind::ReceiptCorrupt("receipt is damaged".into()).into());
            }
        },
        Family::V1_1 => {
            let (state, position) = match load_phase2(&run)? {
                Loaded::Healthy(state, position) => (state, position),
                Loaded::Damaged { error, .. } => return Err(error),
            };
            let prefix = read_prefix(&run);
            replayed_status(&run.manifest, &state, &position, &prefix.ledger, run_id, at)
        }
    };
    let links = recovery_links(root)?;
    status.recovery_of = links
        .iter()
        .find(|(id, _)| id == run_id)
        .and_then(|(_, of)| of.clone());
    status.recovered_by = Some(
        recovered_by(&links)
            .into_iter()
            .filter(|(of, _)| of == run_id)
            .map(|(_, r)| r)
            .collect(),
    );
    Ok(status)
}

/// The end of a streamed `log`: where verification stopped.
#[derive(Debug, Clone)]
pub struct StreamEnd {
    pub position: ChainPosition,
    pub terminal: bool,
}

fn is_terminal_event(event: &ObjectRef<'_>) -> bool {
    let terminal = |e: &ObjectRef<'_>| {
        matches!(
            e.get("event_type")
                .and_then(JsonRef::as_str)
                .and_then(EventType::parse),
            Some(
                EventType::RunCompleted
                    | EventType::RunFailed
                    | EventType::RunBlocked
                    | EventType::RunCancelled
            )
        )
    };
    terminal(event)
        || event
            .get("metadata")
            .and_then(|m| m.get("intents"))
            .and_then(JsonRef::as_array)
            .is_some_and(|intents| intents.iter().filter_map(JsonRef::as_object).any(terminal))
}

/// Stream the verified events after `start` (genesis when `None`) to
/// `emit`, in bounded memory. Only verified events reach `emit`: a line is
/// handed on after its checksum chain is verified, and at the acknowledged
/// head's sequence an event that disagrees with the head stops the stream
/// (the verdict then names that sequence). A damaged receipt is the
/// exit-3 error after the verified prefix.
pub fn stream_events(
    run: &OpenRun,
    start: Option<ChainPosition>,
    mut emit: impl FnMut(&ObjectRef<'_>) -> Result<(), String>,
) -> FlowResult<StreamEnd> {
    let head = run.dir.read_head()?;
    let mut terminal = false;
    let mut untrusted = false;
    let consume = |event: &ObjectRef<'_>| -> Result<(), String> {
        if let Some(head) = &head
            && event.get("sequence").and_then(JsonRef::as_u64) == Some(head.sequence)
            && event.get("checksum").and_then(JsonRef::as_str) != Some(head.checksum.as_str())
        {
            // Not trusted from here on: the verdict reports the
            // disagreement with the acknowledged head.
            untrusted = true;
        }
        if untrusted {
            return Ok(());
        }
        terminal |= is_terminal_event(event);
        emit(event)
    };
    let start = start.unwrap_or_else(|| ChainPosition::genesis(&run.manifest));
    let verdict = verify_from(run, start, consume)?;
    match verdict {
        Verdict::Intact(position) => Ok(StreamEnd { position, terminal }),
        Verdict::Damaged(damage) => Err(damage_error(run, &damage, false)),
        Verdict::Rejected { message, .. } => Err(ErrorKind::Contract(message).into()),
    }
}

/// Open a run for `log`/`report` (any phase; no validation writes).
pub fn open(root: &StateRoot, run_id: &str) -> FlowResult<OpenRun> {
    open_run(root, run_id)
}

/// What `report` draws: the status of the run (as `status --run-id`
/// answers at `at`) and its timeline, folded from one streamed pass over
/// the verified receipt.
pub struct ReportData {
    pub status: RunStatus,
    pub timeline: crate::coordinator::timeline::Timeline,
    pub head: ChainPosition,
}

/// Gather a report's data (read-only; a damaged run is the exit-3 error).
pub fn report_data(root: &StateRoot, run_id: &str, at: &str) -> FlowResult<ReportData> {
    let status = status_run(root, run_id, at)?;
    let run = open_run(root, run_id)?;
    let mut timeline = crate::coordinator::timeline::Timeline::default();
    let end = stream_events(&run, None, |event| {
        timeline.observe(&event.to_map());
        Ok(())
    })?;
    if status.checksum != end.position.checksum {
        return Err(FlowError::from(Raced::ReportRead));
    }
    Ok(ReportData {
        status,
        timeline,
        head: end.position,
    })
}

/// Write the page for `report --out` (outside the state root, temp file
/// and rename, never through a symlink, never over a file without
/// `force`).
pub fn write_report_page(
    root: &StateRoot,
    out: &Path,
    cwd: &Path,
    bytes: &[u8],
    force: bool,
) -> FlowResult<std::path::PathBuf> {
    Ok(crate::store::output::write_view_file(
        out, cwd, root, bytes, force,
    )?)
}
