//! The read-only views of issue 18: `status`, `log` and the data of
//! `report`. They never lock, create, modify or chmod anything in the
//! state root. `status` loads each run exactly as `resume-check`,
//! `completion-check` do (a full verify and replay, never a checkpoint:
//! contracts/receipt.md "Checkpoint") and asks the same pure functions;
//! `log` and `report` stream the verified receipt.

use crate::receipt::json_ref::{JsonRef, ObjectRef};
use crate::receipt::vocab::EventType;
use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};
use std::path::Path;

use super::error::{FlowError, FlowResult};
use super::inspect::{Inspection, inspect_run};
use super::ledger::{OpenRun, Verdict, damage_error, open_run, verify_from, verify_receipt};
use crate::coordinator::approval::ApprovalLedger;
use crate::coordinator::breach::{Breach, breaches_value};
use crate::coordinator::completion::evaluate_completion;
use crate::coordinator::decide::Policy;
use crate::coordinator::liveness::parse_instant;
use crate::coordinator::raced::Raced;
use crate::coordinator::views::{gap_count, lane_counts, run_detail};
use crate::coordinator::{CoordinatorState, ReplayPolicy, RunOrigin};
use crate::receipt::rules::Family;
use crate::receipt::verify::ChainPosition;
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
/// it proves who made it (`proof`: `signed` with the key's fingerprint
/// only when the replayed `state` verified its signature, else
/// `asserted`; null without a decision).
fn approval_json(ledger: &ApprovalLedger, state: Option<&CoordinatorState>) -> Value {
    let last = ledger.decisions.last();
    let proof = last.map(|d| match state {
        Some(state) => d.proof(state.gate(), state.breaches()),
        None => ("asserted", None),
    });
    json!({
        "gated": ledger.has_policy(),
        "state": last.map(|d| d.decision),
        "by": last.and_then(|d| d.by.clone()),
        "at": last.map(|d| d.at.clone()),
        "proof": proof.as_ref().map(|p| p.0),
        "key": proof.and_then(|p| p.1),
    })
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
            .then(|| RunOrigin::of_snapshot(run.manifest.run.as_ref()).ok())
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
        if state.apply_ref_or_spoil(event, &self.policy).is_err() {
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
    let Ok(origin) = RunOrigin::of_snapshot(run.manifest.run.as_ref()) else {
        return Ok(Loaded::Damaged {
            prefix: None,
            first_bad: 1,
            trusted_sequence: 0,
            trusted_checksum: String::new(),
            error: FlowError::ReceiptCorrupt("run owner metadata is invalid".into()),
        });
    };
    // The gate's policy file too: the replay `verify` does.
    let policy = super::rebuild::replay_policy(run);
    let mut state = CoordinatorState::new(&origin);
    let verdict = verify_receipt(run, |event| {
        state
            .apply_ref_or_spoil(event, &policy)
            .map_err(|e| e.to_string())
    })?;
    if let Verdict::Rejected { sequence, .. } = &verdict {
        // The refused event spoilt the state: the prefix before it again.
        state = CoordinatorState::new(&origin);
        let last = sequence.saturating_sub(1);
        let _ = verify_receipt(run, |event| {
            if event.get("sequence").and_then(JsonRef::as_u64) > Some(last) {
                return Err(String::new());
            }
            state.apply_ref(event, &policy).map_err(|e| e.to_string())
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
            error: FlowError::ReceiptCorrupt(message),
            prefix: Some(Box::new(state)),
        },
    })
}

fn workflow_type(run: &OpenRun) -> Value {
    run.manifest
        .run
        .as_ref()
        .and_then(|r| r.get("workflow_type"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// One entry of the `status` listing. A run that cannot be read is listed
/// as damaged with what is known; it never stops the listing.
fn listing_entry(root: &StateRoot, run_id: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("run_id".into(), json!(run_id));
    let run = match open_run(root, run_id) {
        Ok(run) => run,
        Err(error) => {
            map.insert("receipt".into(), json!("damaged"));
            map.insert("first_bad_sequence".into(), Value::Null);
            map.insert("effective_state".into(), json!("blocked"));
            map.insert("error".into(), json!(error.message()));
            return map;
        }
    };
    map.insert("workflow_type".into(), workflow_type(&run));
    map.insert(
        "manifest_version".into(),
        json!(run.manifest.contract.version),
    );
    let prefix = read_prefix(&run);
    map.insert("approval".into(), approval_json(&prefix.ledger, None));
    map.insert("recovery_of".into(), json!(prefix.recovery_of));
    let phase2 = |map: &mut Map<String, Value>, state: &CoordinatorState| {
        map.insert(
            "approval".into(),
            approval_json(&prefix.ledger, Some(state)),
        );
        // Present only when some stand, as in `verify`.
        if !state.breaches().is_empty() {
            map.insert("breaches".into(), breaches_value(state.breaches()));
        }
        map.insert("run_state".into(), json!(state.run_state()));
        map.insert("sequence".into(), json!(state.last_sequence()));
        map.insert("last_event_at".into(), json!(state.updated_at()));
        map.insert("owner_epoch".into(), json!(state.owner_epoch()));
        map.insert("lanes".into(), Value::Object(lane_counts(state)));
        let report = evaluate_completion(state);
        map.insert(
            "completion".into(),
            json!({"complete": report.complete, "gaps": gap_count(&report)}),
        );
    };
    match run.manifest.contract.family {
        Family::V1_0 => match inspect_run(&run) {
            Ok(Inspection::Healthy {
                run_state,
                sequence,
                ..
            }) => {
                map.insert("receipt".into(), json!("ok"));
                map.insert("run_state".into(), json!(run_state));
                map.insert("sequence".into(), json!(sequence));
                for key in ["last_event_at", "owner_epoch", "lanes", "completion"] {
                    map.insert(key.into(), Value::Null);
                }
            }
            Ok(Inspection::Damaged {
                first_bad,
                trusted_sequence,
                ..
            }) => {
                map.insert("receipt".into(), json!("damaged"));
                map.insert("first_bad_sequence".into(), json!(first_bad));
                map.insert("effective_state".into(), json!("blocked"));
                map.insert("sequence".into(), json!(trusted_sequence));
            }
            Err(error) => {
                map.insert("receipt".into(), json!("damaged"));
                map.insert("error".into(), json!(error.message()));
            }
        },
        Family::V1_1 => match load_phase2(&run) {
            Ok(Loaded::Healthy(state, _)) => {
                map.insert("receipt".into(), json!("ok"));
                phase2(&mut map, &state);
            }
            Ok(Loaded::Damaged {
                prefix,
                first_bad,
                trusted_sequence,
                trusted_checksum,
                error,
            }) => {
                if let Some(state) = prefix {
                    phase2(&mut map, &state);
                }
                map.insert("receipt".into(), json!("damaged"));
                map.insert("first_bad_sequence".into(), json!(first_bad));
                map.insert("effective_state".into(), json!("blocked"));
                map.insert("sequence".into(), json!(trusted_sequence));
                map.insert("last_trusted_checksum".into(), json!(trusted_checksum));
                map.insert("error".into(), json!(error.message()));
            }
            Err(error) => {
                map.insert("receipt".into(), json!("damaged"));
                map.insert("error".into(), json!(error.message()));
            }
        },
    }
    map
}

/// `status` without `--run-id`: every run, oldest first.
pub fn status_all(root: &StateRoot, at: &str) -> FlowResult<Map<String, Value>> {
    check_at(at)?;
    let links = recovery_links(root)?;
    let recovered = recovered_by(&links);
    let mut runs = Vec::new();
    for (id, _) in &links {
        let mut entry = listing_entry(root, id);
        let by: Vec<&String> = recovered
            .iter()
            .filter(|(of, _)| of == id)
            .map(|(_, r)| r)
            .collect();
        entry.insert("recovered_by".into(), json!(by));
        runs.push(Value::Object(entry));
    }
    let mut out = Map::new();
    out.insert("at".into(), json!(at));
    out.insert("runs".into(), Value::Array(runs));
    Ok(out)
}

/// The Phase 2 part of `status --run-id` for a verified, replayed run:
/// shared with `bundle-verify`, which replays a run from a bundle.
pub fn phase2_summary(
    manifest: &crate::receipt::manifest::RunManifest,
    state: &CoordinatorState,
    position: &ChainPosition,
    ledger: &ApprovalLedger,
    run_id: &str,
    at: &str,
) -> Map<String, Value> {
    let policy = Policy::from_contract(&manifest.contract.contract, &manifest.contract.limits);
    let mut map = Map::new();
    map.insert("run_state".into(), json!(state.run_state()));
    map.insert("sequence".into(), json!(position.sequence));
    map.insert("checksum".into(), json!(position.checksum));
    map.insert("last_event_at".into(), json!(state.updated_at()));
    map.extend(run_detail(state, &policy, run_id, at));
    map.insert("approval".into(), approval_json(ledger, Some(state)));
    map
}

/// The header of `status --run-id` from a manifest snapshot.
pub fn summary_header(
    manifest: &crate::receipt::manifest::RunManifest,
    run_id: &str,
    at: &str,
) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("run_id".into(), json!(run_id));
    map.insert("at".into(), json!(at));
    map.insert(
        "workflow_type".into(),
        manifest
            .run
            .as_ref()
            .and_then(|r| r.get("workflow_type"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    map.insert("manifest_version".into(), json!(manifest.contract.version));
    map.insert("manifest_hash".into(), json!(manifest.contract.hash));
    map.insert("receipt".into(), json!("ok"));
    map
}

/// `status --run-id`: the run header and, for a Phase 2 run, its lanes
/// with their liveness verdicts at `at`, components, completion, the
/// resume fields and the next actions. A damaged or missing run is the
/// exit-3 error `resume-check` gives.
pub fn status_run(root: &StateRoot, run_id: &str, at: &str) -> FlowResult<Map<String, Value>> {
    let run = open_run(root, run_id)?;
    check_at(at)?;
    let mut map = summary_header(&run.manifest, run_id, at);
    match run.manifest.contract.family {
        Family::V1_0 => match inspect_run(&run)? {
            Inspection::Healthy {
                run_state,
                sequence,
                checksum,
                ..
            } => {
                map.insert("run_state".into(), json!(run_state));
                map.insert("sequence".into(), json!(sequence));
                map.insert("checksum".into(), json!(checksum));
                for key in [
                    "owner_epoch",
                    "owner_fingerprint",
                    "lanes",
                    "components",
                    "completion",
                    "incomplete_replacements",
                    "lanes_requiring_observation",
                    "topology_gaps",
                    "next",
                    "approval",
                ] {
                    map.insert(key.into(), Value::Null);
                }
            }
            Inspection::Damaged { .. } => {
                // Verified again the way `verify` reports it.
                super::verify(root, run_id)?;
                return Err(FlowError::ReceiptCorrupt("receipt is damaged".into()));
            }
        },
        Family::V1_1 => {
            let (state, position) = match load_phase2(&run)? {
                Loaded::Healthy(state, position) => (state, position),
                Loaded::Damaged { error, .. } => return Err(error),
            };
            let prefix = read_prefix(&run);
            map.extend(phase2_summary(
                &run.manifest,
                &state,
                &position,
                &prefix.ledger,
                run_id,
                at,
            ));
        }
    }
    let links = recovery_links(root)?;
    let of = links
        .iter()
        .find(|(id, _)| id == run_id)
        .and_then(|(_, of)| of.clone());
    let by: Vec<String> = recovered_by(&links)
        .into_iter()
        .filter(|(of, _)| of == run_id)
        .map(|(_, r)| r)
        .collect();
    map.insert("recovery_of".into(), json!(of));
    map.insert("recovered_by".into(), json!(by));
    Ok(map)
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
        Verdict::Rejected { message, .. } => Err(FlowError::Contract(message)),
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
    pub status: Map<String, Value>,
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
    if status.get("checksum").and_then(Value::as_str) != Some(end.position.checksum.as_str()) {
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
