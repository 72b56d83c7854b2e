//! The pure replay reducer: verified receipt events -> [`CoordinatorState`].
//!
//! Behaviour follows reference-coordinator.md §3 (plus §8, §9, §10, §13 for
//! the events that re-check lineage, resolutions, topology and reports). The
//! reducer trusts that the hash chain and the receipt contract were verified
//! by the caller; it checks only the coordinator invariants, and reports a
//! violation as a [`ReplayError`] carrying the event's (envelope) sequence and
//! the reference's phrase.
//!
//! [`CoordinatorState::apply`] is all-or-nothing for every event: a refused
//! event leaves the state exactly as it was. That is what the reference's
//! clone-and-commit does for `transaction_committed`; here it is done with a
//! small undo journal instead of a deep copy, so replaying many heartbeats
//! does not copy growing liveness histories. Each event's metadata is
//! decoded into a typed value before it is applied (`event_meta.rs`);
//! the journal stays because a transaction's later intents are checked
//! against the state its earlier ones left (a heartbeat's renewal follows
//! its observation), so a whole event cannot be checked before any of it
//! is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::receipt::json_ref::{JsonRef, ListRef, ObjectRef};

use super::approval::{ApprovalLedger, ApprovalWindow, PolicyStatus, gate_breach};
use super::breach::Breach;
use super::event_meta::{
    ComponentFact, LaneCreated, LaneStep, Lineage, Malformed, Meta, Report, Resolution, Resumed,
    Topology,
};
use super::machine::{Edge, RunEdge, lane_edge, run_edge};
use super::state::{
    CheckRecord, Component, CoordinatorState, FailureResolution, LaneRecord, LaneState, RunState,
};
use crate::receipt::canonical;
use crate::receipt::primitives::{AgentId, LaneId};
use crate::receipt::vocab::EventType;

/// Initial owner/run facts from `manifest.json` `_run` (+ the manifest contract).
///
/// `_run` is written once at init and never updated: the *current* owner
/// exists only in replay (every `run_resumed` rotates it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOrigin {
    /// `_run.owner_fingerprint`. `None` makes every event's owner stale.
    pub owner_fingerprint: Option<String>,
    /// `_run.initial_owner_epoch`, falling back to `_run.owner_epoch`.
    pub owner_epoch: u64,
    /// Sorted `_run.component_ids`.
    pub approved_component_ids: Vec<String>,
}

impl RunOrigin {
    /// Reads the `_run` object of a manifest snapshot (family 1.1).
    ///
    /// Like the reference, a missing or non-integer epoch (both
    /// `initial_owner_epoch` and `owner_epoch`) or a non-string fingerprint
    /// is refused ("run owner metadata is invalid") rather than defaulted: a
    /// run whose initial owner cannot be established cannot be replayed.
    pub fn from_run_metadata(run: &Value) -> Result<RunOrigin, ReplayError> {
        Self::of_snapshot(run.as_object())
    }

    /// [`Self::from_run_metadata`] of a snapshot's `_run` as the manifest
    /// holds it (`None` when the snapshot has none).
    pub fn of_snapshot(run: Option<&Map<String, Value>>) -> Result<RunOrigin, ReplayError> {
        let run = run.ok_or_else(|| ReplayError::unsequenced("run metadata is missing"))?;
        let invalid = || ReplayError::unsequenced("run owner metadata is invalid");
        let owner_fingerprint = match run.get("owner_fingerprint") {
            Some(Value::String(fingerprint)) => fingerprint.clone(),
            _ => return Err(invalid()),
        };
        let epoch = match run.get("initial_owner_epoch") {
            Some(value) => value,
            None => run.get("owner_epoch").ok_or_else(invalid)?,
        };
        let owner_epoch = epoch.as_u64().ok_or_else(invalid)?;
        let approved_component_ids = match run.get("component_ids") {
            None => Vec::new(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ReplayError::unsequenced("run component metadata is invalid"))?,
            Some(_) => {
                return Err(ReplayError::unsequenced(
                    "run component metadata is invalid",
                ));
            }
        };
        let mut origin = RunOrigin {
            owner_fingerprint: Some(owner_fingerprint),
            owner_epoch,
            approved_component_ids,
        };
        origin.approved_component_ids.sort();
        Ok(origin)
    }
}

/// The manifest rules replay needs. Always taken from the run's own
/// manifest snapshot, never from the bundled manifest (decisions.md #5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayPolicy {
    /// `resource_limits.max_lanes` (default 64).
    pub max_lanes: usize,
    /// `failure_resolution == {"requires_parent": true}`; pre-policy 1.1.0
    /// snapshots lack the key and do not require the parent link.
    pub requires_parent: bool,
    /// The bytes of `approval-policy.json` as the store read them (`Err`:
    /// why not; `None`: not read). Checked against the checksum that
    /// `run_created` chains, it becomes the gate replay applies to every
    /// `plan_approved` (see [`super::breach`]).
    pub approval_file: Option<Result<Vec<u8>, String>>,
}

impl Default for ReplayPolicy {
    fn default() -> Self {
        ReplayPolicy {
            max_lanes: 64,
            requires_parent: false,
            approval_file: None,
        }
    }
}

impl ReplayPolicy {
    /// Reads the policy from the manifest contract (the snapshot with or
    /// without `_run`; `_run` is ignored).
    pub fn from_contract(contract: &Value) -> Self {
        // The manifest contract guarantees a positive integer; anything else
        // is read the way the reference's `len(lanes) >= max_lanes` treats
        // it where that is defined (negative: every lane is over the limit),
        // and fails closed where it is not (a non-number allows no lane).
        let max_lanes = match contract
            .get("resource_limits")
            .and_then(|limits| limits.get("max_lanes"))
        {
            None => 64,
            Some(Value::Number(n)) => match canonical::integer_text(n) {
                Some(text) if text.starts_with('-') => 0,
                Some(text) => text.parse::<usize>().unwrap_or(usize::MAX),
                None => 0,
            },
            Some(_) => 0,
        };
        let requires_parent = contract
            .get("failure_resolution")
            .and_then(|policy| policy.get("requires_parent"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        ReplayPolicy {
            max_lanes,
            requires_parent,
            approval_file: None,
        }
    }

    /// The same rules with the run's policy file for the approval gate.
    pub fn with_approval_file(mut self, file: Result<Vec<u8>, String>) -> Self {
        self.approval_file = Some(file);
        self
    }
}

/// A coordinator invariant violated by a receipt event (exit 3
/// `receipt_corrupt` in the CLI; `sequence` is the diagnosis's
/// `first_bad_sequence`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayError {
    /// The event (envelope) sequence; `None` when the event carries none or
    /// when the failure is not tied to an event.
    pub sequence: Option<u64>,
    /// The reference's phrase, e.g. "event evidence is missing".
    pub message: String,
}

impl ReplayError {
    fn at(sequence: Option<u64>, message: impl Into<String>) -> Self {
        ReplayError {
            sequence,
            message: message.into(),
        }
    }

    fn unsequenced(message: impl Into<String>) -> Self {
        ReplayError::at(None, message)
    }
}

/// The reference's text: "coordinator corruption at sequence N: <phrase>"
/// for event failures, the bare phrase otherwise.
impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sequence {
            Some(sequence) => write!(
                f,
                "coordinator corruption at sequence {sequence}: {}",
                self.message
            ),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ReplayError {}

/// Replays a whole verified receipt.
pub fn replay<'a>(
    origin: &RunOrigin,
    policy: &ReplayPolicy,
    events: impl IntoIterator<Item = &'a Value>,
) -> Result<CoordinatorState, ReplayError> {
    let mut state = CoordinatorState::new(origin);
    let mut empty = true;
    for event in events {
        empty = false;
        state.apply(event, policy)?;
    }
    if empty {
        return Err(ReplayError::unsequenced("receipt contains no events"));
    }
    Ok(state)
}

/// What a refused event leaves of the state it was applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRefusal {
    /// The state as it was before the event: what the event changed is
    /// saved to be undone.
    Restore,
    /// Nothing is saved: the state is spoilt and must not be used (for a
    /// caller that drops it anyway, a verdict or a view).
    Spoil,
}

/// One undoable change (see [`CoordinatorState::rollback`]).
enum Undo {
    RunState(RunState),
    Owner {
        epoch: u64,
        fingerprint: Option<String>,
    },
    LaneInserted(LaneId),
    /// A lane this event changed, not saved: the state is dropped on error
    /// ([`OnRefusal::Spoil`]).
    LaneTouched(LaneId),
    /// The lane as it was, without its liveness digest history (which only
    /// ever grows and is restored by truncation to `digests_len`).
    Lane {
        saved: Box<LaneRecord>,
        digests_len: usize,
    },
    MainVerified(bool),
    Topology {
        topology: BTreeMap<String, Component>,
        removed_components: Vec<String>,
        removed_component_records: BTreeMap<String, Component>,
    },
    CheckAppended {
        component: String,
        check: String,
        previous: Option<bool>,
    },
    Report {
        kind: String,
        previous: Option<Map<String, Value>>,
    },
    ResolutionInserted(String),
}

/// What one event changed: enough to undo it when `rollback` is asked
/// for, and the lanes and run it touched either way.
struct Journal {
    undo: Vec<Undo>,
    rollback: bool,
}

impl Journal {
    fn push(&mut self, undo: Undo) {
        self.undo.push(undo);
    }
}

/// Read access to one logical event (a plain event or one transaction
/// intent) with the error context of its envelope sequence.
struct Ev<'a> {
    map: &'a ObjectRef<'a>,
    sequence: u64,
}

impl<'a> Ev<'a> {
    fn corrupt(&self, message: impl Into<String>) -> ReplayError {
        ReplayError::at(Some(self.sequence), message)
    }

    /// The event type, parsed (`None`: absent or not one of ours).
    fn event_type(&self) -> Option<EventType> {
        self.map
            .get("event_type")
            .and_then(JsonRef::as_str)
            .and_then(EventType::parse)
    }

    /// A nullable string field; any other type is malformed.
    fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ReplayError> {
        opt_str_in(self.map, key, || {
            self.corrupt(format!("event field {key} is malformed"))
        })
    }

    fn timestamp(&self) -> Result<String, ReplayError> {
        self.opt_str("timestamp")?
            .map(str::to_owned)
            .ok_or_else(|| self.corrupt("event field timestamp is malformed"))
    }

    /// The evidence list (absent or null: none).
    fn evidence_list(&self) -> Result<Option<&'a ListRef<'a>>, ReplayError> {
        match self.map.get("evidence_refs") {
            None | Some(JsonRef::Null) => Ok(None),
            Some(JsonRef::Array(list)) => Ok(Some(list)),
            Some(_) => Err(self.corrupt("event field evidence_refs is malformed")),
        }
    }

    fn evidence(&self) -> Result<&'a [JsonRef<'a>], ReplayError> {
        Ok(match self.evidence_list()? {
            Some(list) => list,
            None => &[],
        })
    }

    /// The evidence list as `Value`s (for a record that keeps it).
    fn evidence_values(&self) -> Result<Vec<Value>, ReplayError> {
        Ok(self
            .evidence_list()?
            .map(ListRef::to_values)
            .unwrap_or_default())
    }

    fn require_evidence(&self) -> Result<(), ReplayError> {
        if self.event_type() != Some(EventType::RunCreated) && self.evidence()?.is_empty() {
            return Err(self.corrupt("event evidence is missing"));
        }
        Ok(())
    }

    /// Whether the event names `lane` (its id and agent) and the move
    /// `from` -> `to`.
    fn moves(&self, lane: &LaneRecord, from: &str, to: Option<&str>) -> Result<bool, ReplayError> {
        Ok(self.opt_str("lane_id")? == Some(lane.id.as_str())
            && self.opt_str("agent_id")? == Some(lane.agent_id.as_str())
            && self.opt_str("from_state")? == Some(from)
            && self.opt_str("to_state")? == to)
    }

    /// The event's metadata, to be decoded by what needs it.
    fn metadata(&self) -> Result<Meta<'a>, ReplayError> {
        Meta::of(self.map).ok_or_else(|| self.corrupt("event field metadata is malformed"))
    }

    fn malformed(&self, Malformed(key): Malformed) -> ReplayError {
        self.corrupt(format!("event metadata field {key} is malformed"))
    }

    /// `decoded`, or the refusal naming its malformed field.
    fn decoded<T>(&self, decoded: Result<T, Malformed>) -> Result<T, ReplayError> {
        decoded.map_err(|m| self.malformed(m))
    }
}

fn opt_str_in<'a>(
    map: &'a ObjectRef<'a>,
    key: &str,
    malformed: impl FnOnce() -> ReplayError,
) -> Result<Option<&'a str>, ReplayError> {
    match map.get(key) {
        None | Some(JsonRef::Null) => Ok(None),
        Some(JsonRef::String(text)) => Ok(Some(text)),
        Some(_) => Err(malformed()),
    }
}

/// Digests of the canonical JSON of evidence lists met within one receipt
/// event: a heartbeat is two intents with one evidence list, whose digest
/// the rules and the reducer would otherwise compute three times. Equal
/// values have equal canonical forms, so a remembered digest is the one
/// computing it again would give. A list read from a canonical line is
/// hashed as its own bytes stand ([`ListRef::digest`]).
#[derive(Default)]
pub(crate) struct DigestMemo<'a> {
    last: std::cell::RefCell<Option<(&'a ListRef<'a>, String)>>,
}

impl<'a> DigestMemo<'a> {
    /// SHA-256 of the canonical JSON of `list`.
    pub(crate) fn digest(&self, list: &'a ListRef<'a>) -> String {
        let mut last = self.last.borrow_mut();
        if let Some((seen, digest)) = &*last
            && (std::ptr::eq(*seen, list) || *seen == list)
        {
            return digest.clone();
        }
        let digest = list.digest();
        *last = Some((list, digest.clone()));
        digest
    }
}

/// SHA-256 of the canonical JSON of an evidence list (empty list if absent).
fn evidence_digest(list: Option<&ListRef<'_>>) -> String {
    match list {
        Some(list) => list.digest(),
        None => canonical::digest(&Value::Array(Vec::new())),
    }
}

fn list_digest(items: &[Value]) -> String {
    canonical::digest(&Value::Array(items.to_vec()))
}

/// Equality of JSON values the way the reference's `==` on parsed JSON
/// behaves for receipt data (integers only): compare canonical forms.
fn same_json(a: &Value, b: &Value) -> bool {
    canonical::to_vec(a) == canonical::to_vec(b)
}

impl CoordinatorState {
    /// The state before the first receipt event.
    pub fn new(origin: &RunOrigin) -> Self {
        let mut approved_component_ids = origin.approved_component_ids.clone();
        approved_component_ids.sort();
        CoordinatorState {
            run_state: RunState::Planned,
            owner_epoch: origin.owner_epoch,
            owner_fingerprint: origin.owner_fingerprint.clone(),
            lanes: BTreeMap::new(),
            topology: BTreeMap::new(),
            removed_components: Vec::new(),
            removed_component_records: BTreeMap::new(),
            approved_component_ids,
            checks: BTreeMap::new(),
            check_history: BTreeMap::new(),
            reports: BTreeMap::new(),
            main_verified: false,
            incomplete_replacements: Vec::new(),
            failure_resolutions: BTreeMap::new(),
            last_sequence: 0,
            last_checksum: String::new(),
            last_event_type: None,
            updated_at: None,
            gate: PolicyStatus::Absent,
            created_at: None,
            breaches: Vec::new(),
            breaches_elided: 0,
            lane_sources: BTreeMap::new(),
            run_source: 0,
        }
    }

    /// Applies one chain-verified receipt event (the whole 16-key event
    /// object). All-or-nothing: on error the state is unchanged.
    pub fn apply(&mut self, event: &Value, policy: &ReplayPolicy) -> Result<(), ReplayError> {
        let next = self.last_sequence.saturating_add(1);
        let map = event
            .as_object()
            .ok_or_else(|| ReplayError::at(Some(next), "event is not an object"))?;
        self.apply_event(map, policy)
    }

    /// [`Self::apply`] for an event already known to be an object (one this
    /// tool drafted, or a test's).
    pub fn apply_event(
        &mut self,
        event: &Map<String, Value>,
        policy: &ReplayPolicy,
    ) -> Result<(), ReplayError> {
        self.apply_ref(
            &ObjectRef::from_map(event, &bumpalo::Bump::new()),
            policy,
            OnRefusal::Restore,
        )
    }

    /// [`Self::apply`] for an event as the verifier read it (borrowing the
    /// receipt line), without copying it; a refused event leaves the state
    /// as `on_refusal` says.
    pub fn apply_ref(
        &mut self,
        event: &ObjectRef<'_>,
        policy: &ReplayPolicy,
        on_refusal: OnRefusal,
    ) -> Result<(), ReplayError> {
        let rollback = on_refusal == OnRefusal::Restore;
        let mut journal = Journal {
            undo: Vec::new(),
            rollback,
        };
        let result = self.apply_journaled(event, policy, &mut journal);
        if result.is_err() {
            if rollback {
                self.rollback(journal.undo);
            }
            return result;
        }
        // Every lane this event created or changed now comes from it.
        for undo in &journal.undo {
            if matches!(undo, Undo::RunState(_)) {
                self.run_source = self.last_sequence;
            }
            let id = match undo {
                Undo::LaneInserted(id) | Undo::LaneTouched(id) => id,
                Undo::Lane { saved, .. } => &saved.id,
                _ => continue,
            };
            self.lane_sources.insert(id.to_string(), self.last_sequence);
        }
        result
    }

    fn apply_journaled(
        &mut self,
        map: &ObjectRef<'_>,
        policy: &ReplayPolicy,
        journal: &mut Journal,
    ) -> Result<(), ReplayError> {
        let next = self.last_sequence.saturating_add(1);
        let sequence = map.get("sequence").and_then(JsonRef::as_u64);
        if sequence != Some(next) {
            return Err(ReplayError::at(sequence, "sequence is not contiguous"));
        }
        let envelope = Ev {
            map,
            sequence: next,
        };
        let owner_token = map.get("owner_token").and_then(JsonRef::as_str);
        if self.owner_fingerprint.is_none() || owner_token != self.owner_fingerprint.as_deref() {
            return Err(envelope.corrupt("event owner fingerprint is stale"));
        }
        let metadata = envelope.metadata()?;
        if metadata.owner_epoch() != Some(self.owner_epoch) {
            return Err(envelope.corrupt("event owner epoch is stale"));
        }
        let event_type = envelope.opt_str("event_type")?.and_then(EventType::parse);
        if self.run_state.is_terminal()
            && !(event_type == Some(EventType::LiveReportRecorded)
                && self.run_state == RunState::Completed)
        {
            return Err(envelope.corrupt("terminal run rejects further mutation"));
        }
        // Read the head fields before changing anything.
        let checksum = envelope.opt_str("checksum")?;
        let timestamp = envelope.opt_str("timestamp")?;

        let mut touches_lineage = false;
        let mut found: Vec<(String, String)> = Vec::new();
        let memo = DigestMemo::default();
        if event_type == Some(EventType::TransactionCommitted) {
            for intent in envelope.decoded(metadata.intents())? {
                let intent = intent
                    .as_object()
                    .ok_or_else(|| envelope.corrupt("transaction intent is not an object"))?;
                let logical = Ev {
                    map: intent,
                    sequence: next,
                };
                touches_lineage |= logical.event_type().is_some_and(EventType::touches_lineage);
                found.extend(self.our_rules(intent, timestamp, &memo));
                Applier {
                    state: self,
                    ev: &logical,
                    journal: &mut *journal,
                }
                .apply(policy, &memo)?;
            }
        } else {
            touches_lineage = event_type.is_some_and(EventType::touches_lineage);
            found.extend(self.our_rules(map, timestamp, &memo));
            Applier {
                state: self,
                ev: &envelope,
                journal,
            }
            .apply(policy, &memo)?;
        }
        // Nothing below can fail: the event is applied.
        if event_type == Some(EventType::RunCreated) && next == 1 {
            let mut ledger = ApprovalLedger::default();
            ledger.observe_ref(map);
            self.gate = PolicyStatus::resolve(&ledger, policy.approval_file.clone());
            self.created_at = ledger.created_at;
        }
        self.breaches
            .extend(found.into_iter().map(|(rule, found)| Breach {
                sequence: next,
                rule,
                found,
            }));

        self.last_sequence = next;
        if let Some(checksum) = checksum {
            self.last_checksum = checksum.to_owned();
        }
        self.last_event_type = event_type;
        self.updated_at = timestamp.map(str::to_owned);
        if touches_lineage {
            self.incomplete_replacements = self
                .lanes
                .values()
                .filter(|lane| {
                    lane.state == LaneState::Replaced
                        && !lane
                            .replacement_lane_id
                            .as_ref()
                            .is_some_and(|child| self.lanes.contains_key(child.as_str()))
                })
                .map(|lane| lane.id.to_string())
                .collect();
        }
        Ok(())
    }

    /// Our stricter rules and the approval gate for one logical event,
    /// against the state before it (see [`super::breach`]).
    fn our_rules<'a>(
        &self,
        event: &'a ObjectRef<'a>,
        at: Option<&str>,
        memo: &DigestMemo<'a>,
    ) -> Vec<(String, String)> {
        let mut found = super::breach::stricter_rules_with(self, event, memo);
        if event
            .get("event_type")
            .and_then(JsonRef::as_str)
            .and_then(EventType::parse)
            == Some(EventType::PlanApproved)
            && let Some(what) = gate_breach(
                &self.gate,
                ApprovalWindow {
                    created_at: self.created_at.as_deref(),
                    approved_at: at,
                },
                event,
            )
        {
            found.push((super::breach::APPROVAL_GATE.to_string(), what));
        }
        found
    }

    /// Undoes the journal's changes, newest first.
    fn rollback(&mut self, journal: Vec<Undo>) {
        for undo in journal.into_iter().rev() {
            match undo {
                Undo::RunState(state) => self.run_state = state,
                Undo::Owner { epoch, fingerprint } => {
                    self.owner_epoch = epoch;
                    self.owner_fingerprint = fingerprint;
                }
                Undo::LaneInserted(id) => {
                    self.lanes.remove(&id);
                }
                // Only journaled without rollback, which never gets here.
                Undo::LaneTouched(_) => {}
                Undo::Lane { saved, digests_len } => {
                    let mut saved = *saved;
                    if let Some(current) = self.lanes.get_mut(&saved.id) {
                        current.truncate_liveness_digests(digests_len);
                        saved.liveness_evidence_digests =
                            std::mem::take(&mut current.liveness_evidence_digests);
                        saved.digest_index = std::mem::take(&mut current.digest_index);
                        *current = saved;
                    }
                }
                Undo::MainVerified(verified) => self.main_verified = verified,
                Undo::Topology {
                    topology,
                    removed_components,
                    removed_component_records,
                } => {
                    self.topology = topology;
                    self.removed_components = removed_components;
                    self.removed_component_records = removed_component_records;
                }
                Undo::CheckAppended {
                    component,
                    check,
                    previous,
                } => {
                    if let Some(checks) = self.check_history.get_mut(&component) {
                        if let Some(history) = checks.get_mut(&check) {
                            history.pop();
                            if history.is_empty() {
                                checks.remove(&check);
                            }
                        }
                        if checks.is_empty() {
                            self.check_history.remove(&component);
                        }
                    }
                    let results = self.checks.entry(component.clone()).or_default();
                    match previous {
                        Some(passed) => {
                            results.insert(check, passed);
                        }
                        None => {
                            results.remove(&check);
                        }
                    }
                    if results.is_empty() {
                        self.checks.remove(&component);
                    }
                }
                Undo::Report { kind, previous } => match previous {
                    Some(metadata) => {
                        self.reports.insert(kind, metadata);
                    }
                    None => {
                        self.reports.remove(&kind);
                    }
                },
                Undo::ResolutionInserted(id) => {
                    self.failure_resolutions.remove(&id);
                }
            }
        }
    }
}

/// What one logical event (a plain receipt event or one transaction
/// intent) is applied with: the state it changes, the event, and the
/// journal of the receipt event it belongs to.
struct Applier<'s, 'a> {
    state: &'s mut CoordinatorState,
    ev: &'s Ev<'a>,
    journal: &'s mut Journal,
}

/// What applying an event answers.
type Applied = Result<(), ReplayError>;

impl<'a> Applier<'_, 'a> {
    /// Records the lane's current record in the journal and returns it for
    /// modification.
    /// One record per lane and event is enough: the rollback, newest
    /// first, ends at the oldest, which is the lane before the event.
    fn lane_for_update(&mut self, id: &str) -> Option<&mut LaneRecord> {
        let journal = &mut *self.journal;
        let lane = self.state.lanes.get_mut(id)?;
        let saved_already = journal.undo.iter().any(|undo| match undo {
            Undo::Lane { saved, .. } => saved.id == id,
            Undo::LaneTouched(touched) => touched == id,
            _ => false,
        });
        if saved_already {
            return Some(lane);
        }
        if !journal.rollback {
            journal.push(Undo::LaneTouched(lane.id.clone()));
            return Some(lane);
        }
        let digests = std::mem::take(&mut lane.liveness_evidence_digests);
        let index = std::mem::take(&mut lane.digest_index);
        let saved = Box::new(lane.clone());
        let digests_len = digests.len();
        lane.liveness_evidence_digests = digests;
        lane.digest_index = index;
        journal.push(Undo::Lane { saved, digests_len });
        Some(lane)
    }

    fn save_topology(&mut self) {
        self.journal.push(Undo::Topology {
            topology: self.state.topology.clone(),
            removed_components: self.state.removed_components.clone(),
            removed_component_records: self.state.removed_component_records.clone(),
        });
    }

    /// The original lane of a lineage step (found in its state already)
    /// for update, with this event recorded as its last: type, time and
    /// evidence.
    fn original_takes(
        &mut self,
        original_id: &str,
        what: &str,
        event_type: EventType,
    ) -> Result<&mut LaneRecord, ReplayError> {
        let ev = self.ev;
        let timestamp = ev.timestamp()?;
        let evidence = ev.evidence_values()?;
        let Some(original) = self.lane_for_update(original_id) else {
            return Err(ev.corrupt(format!("replacement {what} original lane is invalid")));
        };
        original.last_event_type = event_type;
        original.updated_at = timestamp;
        original.evidence_refs = evidence;
        Ok(original)
    }

    fn apply(&mut self, policy: &ReplayPolicy, memo: &DigestMemo<'a>) -> Applied {
        let ev = self.ev;
        let Some(event_type) = ev.event_type() else {
            return Err(ev.corrupt("event type has no coordinator reducer"));
        };
        let meta = ev.metadata()?;
        if let Some(edge) = run_edge(event_type) {
            ev.require_evidence()?;
            return self.run_event(event_type, edge);
        }
        use EventType::*;
        match event_type {
            RunResumed => self.run_resumed(Resumed::decode(meta)),
            LaneCreated => {
                ev.require_evidence()?;
                if self.state.lanes.len() >= policy.max_lanes {
                    return Err(ev.corrupt("lane limit exceeded"));
                }
                self.lane_created(meta)
            }
            _ if lane_edge(event_type).is_some() => {
                ev.require_evidence()?;
                self.lane_event(event_type, meta, memo)
            }
            ReplacementRepaired | ReplacementBlocked => {
                let lineage = ev.decoded(Lineage::decode(meta, event_type))?;
                self.replacement_reservation(event_type, lineage)
            }
            ReplacementLineageClosed => {
                let lineage = ev.decoded(Lineage::decode(meta, event_type))?;
                self.lineage_closed(lineage)
            }
            CandidateValidated if meta.resolves_failed_lane() => {
                self.failure_resolution(meta, policy)
            }
            MainVerification => {
                ev.require_evidence()?;
                self.journal
                    .push(Undo::MainVerified(self.state.main_verified));
                self.state.main_verified = true;
                Ok(())
            }
            TopologyRegistered => {
                ev.require_evidence()?;
                let topology = ev.decoded(Topology::decode(meta))?;
                self.topology_registered(topology);
                Ok(())
            }
            TopologyComponentRemoved | CheckPassed | CheckFailed | EvidenceAttached => {
                ev.require_evidence()?;
                let fact = ev.decoded(ComponentFact::decode(meta, event_type))?;
                match event_type {
                    TopologyComponentRemoved => self.component_removed(fact),
                    EvidenceAttached => self.evidence_attached(fact),
                    _ => self.check_result(event_type == CheckPassed, fact),
                }
            }
            HandoffRecorded | LiveReportRecorded => {
                let report = ev.decoded(Report::decode(meta))?;
                self.report(report)
            }
            CandidateProposed | CandidateValidated | CandidateRejected => Ok(()),
            _ => Err(ev.corrupt("event type has no coordinator reducer")),
        }
    }

    fn run_event(&mut self, event_type: EventType, edge: RunEdge) -> Applied {
        let (ev, state) = (self.ev, &mut *self.state);
        let (sources, target) = (edge.from, edge.to);
        let source = if event_type == EventType::RunCreated && state.last_sequence == 0 {
            None
        } else {
            Some(state.run_state)
        };
        if !sources.contains(&source) {
            return Err(ev.corrupt("run transition source is invalid"));
        }
        let to_state = ev.opt_str("to_state")?;
        if to_state.is_some_and(|to| to != target.as_str()) {
            return Err(ev.corrupt("run transition target is invalid"));
        }
        let from_state = ev.opt_str("from_state")?;
        if from_state.is_some() && from_state != source.map(RunState::as_str) {
            return Err(ev.corrupt("run transition from_state is invalid"));
        }
        self.journal.push(Undo::RunState(state.run_state));
        state.run_state = target;
        Ok(())
    }

    fn run_resumed(&mut self, resumed: Resumed<'_>) -> Applied {
        let (ev, state) = (self.ev, &mut *self.state);
        let old_epoch = state.owner_epoch;
        if resumed.owner_epoch != Some(old_epoch) {
            return Err(ev.corrupt("resume old owner epoch is invalid"));
        }
        let Some(fingerprint) = resumed.new_owner_fingerprint else {
            return Err(ev.corrupt("resume owner fingerprint is invalid"));
        };
        let new_epoch = old_epoch
            .checked_add(1)
            .ok_or_else(|| ev.corrupt("resume old owner epoch is invalid"))?;
        self.journal.push(Undo::Owner {
            epoch: old_epoch,
            fingerprint: state.owner_fingerprint.clone(),
        });
        state.owner_epoch = new_epoch;
        state.owner_fingerprint = Some(fingerprint.to_string());
        Ok(())
    }

    fn lane_created(&mut self, meta: Meta<'_>) -> Applied {
        let (ev, state) = (self.ev, &mut *self.state);
        let Some(lane_id) = ev.opt_str("lane_id")? else {
            return Err(ev.corrupt("lane_created requires lane_id"));
        };
        if !matches!(state.run_state, RunState::Running | RunState::Recovering) {
            return Err(ev.corrupt("lane cannot be created in current run state"));
        }
        if state.lanes.contains_key(lane_id) {
            return Err(ev.corrupt("duplicate lane_created"));
        }
        let Some(agent_id) = ev.opt_str("agent_id")? else {
            return Err(ev.corrupt("lane_created requires lane_id and agent_id"));
        };
        // The verifier checked both against the identifier contract; a
        // hand-fed event is held to it here too.
        let (Some(id), Some(agent)) = (LaneId::parse(lane_id), AgentId::parse(agent_id)) else {
            return Err(ev.corrupt("lane_id must match the identifier contract"));
        };
        let created = ev.decoded(LaneCreated::decode(meta))?;
        let lane = LaneRecord {
            id,
            state: LaneState::Pending,
            agent_id: agent,
            assignment: created.assignment,
            write_scope: created.write_scope,
            changed_paths: Vec::new(),
            fallback: created.fallback,
            startup_ack_deadline: created.startup_ack_deadline,
            silence_lease_deadline: created.silence_lease_deadline,
            command_deadline: created.command_deadline,
            probe_deadline: created.probe_deadline,
            evidence_digest: created.evidence_digest.clone(),
            parent_lane_id: created.parent_lane_id,
            replacement_count: created.replacement_count,
            replacement_lane_id: created.replacement_lane_id,
            last_evidence_digest: created.evidence_digest,
            last_reason: ev.opt_str("reason")?.map(str::to_owned),
            liveness_evidence_refs: Vec::new(),
            liveness_evidence_digests: Vec::new(),
            last_event_type: EventType::LaneCreated,
            terminal_sequence: None,
            updated_at: ev.timestamp()?,
            evidence_refs: ev.evidence_values()?,
            replacement_reservation: None,
            digest_index: Default::default(),
            earlier: Default::default(),
        };
        self.journal.push(Undo::LaneInserted(lane.id.clone()));
        state.lanes.insert(lane.id.clone(), lane);
        Ok(())
    }

    fn lane_event(
        &mut self,
        event_type: EventType,
        meta: Meta<'_>,
        memo: &DigestMemo<'a>,
    ) -> Applied {
        let ev = self.ev;
        let Some(lane_id) = ev.opt_str("lane_id")? else {
            return Err(ev.corrupt(format!("{event_type} requires lane_id")));
        };
        let Some(Edge {
            from: sources,
            to: target,
        }) = lane_edge(event_type)
        else {
            return Err(ev.corrupt("event type has no coordinator reducer"));
        };
        let Some(lane) = self.state.lanes.get(lane_id) else {
            return Err(ev.corrupt("lane event references an unknown lane"));
        };
        if ev
            .opt_str("agent_id")?
            .is_some_and(|agent| agent != lane.agent_id)
        {
            return Err(ev.corrupt("lane event agent does not own the lane"));
        }
        if !sources.contains(&lane.state) {
            return Err(ev.corrupt("lane transition source is invalid"));
        }
        if ev
            .opt_str("from_state")?
            .is_some_and(|from| from != lane.state.as_str())
        {
            return Err(ev.corrupt("lane transition from_state is invalid"));
        }
        if ev
            .opt_str("to_state")?
            .is_some_and(|to| to != target.as_str())
        {
            return Err(ev.corrupt("lane transition target is invalid"));
        }

        // Read and type-check everything before changing the lane.
        let timestamp = ev.timestamp()?;
        let reason = ev.opt_str("reason")?;
        let evidence_list = ev.evidence_list()?;
        let evidence = ev.evidence()?;
        let LaneStep {
            silence_lease_deadline,
            probe_deadline,
            evidence_digest: metadata_digest,
            replacement_lane_id,
            replacement_count,
            changed_paths,
            reservation,
        } = ev.decoded(LaneStep::decode(meta, event_type))?;
        let sequence = ev.sequence;

        let Some(lane) = self.lane_for_update(lane_id) else {
            return Err(ev.corrupt("lane event references an unknown lane"));
        };
        lane.state = target;
        lane.last_event_type = event_type;
        lane.updated_at = timestamp;
        if target.is_terminal() {
            lane.terminal_sequence = Some(sequence);
        }
        if !evidence.is_empty() {
            if event_type.is_liveness() {
                // A heartbeat's second intent carries the same list.
                let same = lane.liveness_evidence_refs.len() == evidence.len()
                    && evidence
                        .iter()
                        .zip(&lane.liveness_evidence_refs)
                        .all(|(new, kept)| new.matches(kept));
                if !same {
                    lane.liveness_evidence_refs = ev.evidence_values()?;
                }
                let digest = match evidence_list {
                    Some(list) => memo.digest(list),
                    None => evidence_digest(None),
                };
                lane.push_liveness_digest(digest.clone());
                if metadata_digest.is_none() {
                    lane.last_evidence_digest = Some(digest);
                }
            } else {
                lane.evidence_refs = ev.evidence_values()?;
            }
        }
        if let Some(value) = silence_lease_deadline {
            lane.silence_lease_deadline = value;
        }
        if let Some(value) = probe_deadline {
            lane.probe_deadline = value;
        }
        if let Some(value) = &metadata_digest {
            lane.evidence_digest = value.clone();
        }
        if let Some(value) = replacement_count {
            lane.replacement_count = value;
        }
        if let Some(value) = replacement_lane_id {
            lane.replacement_lane_id = value;
        }
        if let Some(value) = metadata_digest {
            lane.last_evidence_digest = value;
        }
        if let Some(paths) = changed_paths {
            lane.changed_paths = paths;
        }
        if let Some(reservation) = reservation {
            lane.replacement_reservation = Some(reservation);
        }
        if let Some(reason) = reason {
            lane.last_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    /// `replacement_repaired` (replaced -> replaced) and `replacement_blocked`
    /// (replaced -> blocked): the reserved child must still be absent.
    fn replacement_reservation(&mut self, event_type: EventType, lineage: Lineage<'_>) -> Applied {
        let (ev, state) = (self.ev, &*self.state);
        let (what, target) = if event_type == EventType::ReplacementRepaired {
            ("repair", LaneState::Replaced)
        } else {
            ("block", LaneState::Blocked)
        };
        let (original_id, replacement_id) = (lineage.original_lane_id, lineage.replacement_lane_id);
        let original = original_id.and_then(|id| state.lane_in(id, LaneState::Replaced).ok());
        let Some(original) = original else {
            return Err(ev.corrupt(format!("replacement {what} original lane is invalid")));
        };
        if !ev.moves(original, "replaced", Some(target.as_str()))?
            || original.replacement_lane_id.as_deref() != replacement_id
            || replacement_id.is_some_and(|id| state.lanes.contains_key(id))
        {
            return Err(ev.corrupt(format!("replacement {what} identity is invalid")));
        }
        let original_id = original.id.clone();
        let original = self.original_takes(&original_id, what, event_type)?;
        original.replacement_lane_id = replacement_id.map(str::to_owned);
        if target == LaneState::Blocked {
            original.state = LaneState::Blocked;
            original.terminal_sequence = Some(ev.sequence);
        }
        Ok(())
    }

    /// `replacement_lineage_closed`: the original takes its (existing)
    /// replacement's terminal state.
    fn lineage_closed(&mut self, lineage: Lineage<'_>) -> Applied {
        let (ev, state) = (self.ev, &*self.state);
        let Lineage {
            original_lane_id: original_id,
            replacement_lane_id: replacement_id,
            replacement_terminal_state: terminal_state,
        } = lineage;
        let original = original_id.and_then(|id| state.lane_in(id, LaneState::Replaced).ok());
        let Some(original) = original else {
            return Err(ev.corrupt("replacement close original lane is invalid"));
        };
        let replacement = replacement_id.and_then(|id| state.lanes.get(id));
        let identity_ok = ev.moves(original, "replaced", terminal_state)?
            && original.replacement_lane_id.as_deref() == replacement_id
            && replacement.is_some_and(|lane| Some(lane.state.as_str()) == terminal_state);
        // The replacement's state equals `terminal_state`, so it parses.
        let Some(target) = terminal_state
            .and_then(LaneState::parse)
            .filter(|_| identity_ok)
        else {
            return Err(ev.corrupt("replacement close lineage is invalid"));
        };
        let original_id = original.id.clone();
        let original =
            self.original_takes(&original_id, "close", EventType::ReplacementLineageClosed)?;
        original.state = target;
        original.terminal_sequence = Some(ev.sequence);
        Ok(())
    }

    /// `candidate_validated` with `candidate_kind = failed_lane_resolution`
    /// (reference-coordinator.md §9).
    fn failure_resolution(&mut self, meta: Meta<'_>, policy: &ReplayPolicy) -> Applied {
        let (ev, state) = (self.ev, &mut *self.state);
        ev.require_evidence()?;
        let evidence = ev.evidence()?;
        if state.is_liveness_digest(&evidence_digest(ev.evidence_list()?)) {
            return Err(ev.corrupt("liveness evidence cannot resolve a failed lane"));
        }
        let Resolution {
            original_lane_id: original_id,
            resolution_lane_id: resolution_id,
            binding,
        } = ev.decoded(Resolution::decode(meta))?;
        let original = original_id.and_then(|id| state.lane_in(id, LaneState::Failed).ok());
        let Some(original) = original else {
            return Err(ev.corrupt("failure resolution original lane is invalid"));
        };
        let resolution = resolution_id.and_then(|id| state.lanes.get(id));
        let lineage_ok = ev.moves(original, "failed", Some("failed"))?
            && resolution_id != original_id
            && resolution.is_some_and(|resolution| {
                resolution.state == LaneState::Completed
                    && (!policy.requires_parent
                        || resolution.parent_lane_id.as_deref() == original_id)
                    && match (original.terminal_sequence, resolution.terminal_sequence) {
                        (Some(failed_at), Some(completed_at)) => completed_at > failed_at,
                        _ => false,
                    }
            })
            && !state.failure_resolutions.contains_key(original.id.as_str());
        let Some(resolution) = resolution.filter(|_| lineage_ok) else {
            return Err(ev.corrupt("failure resolution lineage is invalid"));
        };

        let required: BTreeSet<String> = [
            list_digest(&original.evidence_refs),
            list_digest(&resolution.evidence_refs),
        ]
        .into_iter()
        .collect();
        let supplied: BTreeSet<&str> = evidence
            .iter()
            .filter_map(|item| item.get("checksum").and_then(JsonRef::as_str))
            .collect();
        let (original_digest, resolution_digest) = ev.decoded(binding)?;
        let bound = |digest: Option<&str>| digest.is_some_and(|d| required.contains(d));
        if !bound(original_digest)
            || !bound(resolution_digest)
            || original_digest == resolution_digest
            || !required.iter().all(|d| supplied.contains(d.as_str()))
        {
            return Err(ev.corrupt("failure resolution evidence binding is invalid"));
        }
        let record = FailureResolution {
            resolution_lane_id: resolution.id.to_string(),
            resolved_at: ev.timestamp()?,
            evidence_refs: ev.evidence_values()?,
        };
        let original_id = original.id.to_string();
        self.journal
            .push(Undo::ResolutionInserted(original_id.clone()));
        state.failure_resolutions.insert(original_id, record);
        Ok(())
    }

    /// `topology_registered`: replaces the topology; surviving ids keep
    /// their coverage and evidence. Checks are untouched.
    fn topology_registered(&mut self, topology: Topology) {
        let mut registered = BTreeMap::new();
        for mut component in topology.components {
            if let Some(previous) = self.state.topology.get(&component.id) {
                component.coverage_state = previous.coverage_state;
                component.evidence_refs = previous.evidence_refs.clone();
            }
            registered.insert(component.id.clone(), component);
        }
        self.save_topology();
        self.state.topology = registered;
    }

    fn component_removed(&mut self, fact: ComponentFact<'_>) -> Applied {
        let component_id = fact.component_id;
        let Some(component_id) = component_id.filter(|id| self.state.topology.contains_key(*id))
        else {
            return Err(self
                .ev
                .corrupt("topology removal references an unknown component"));
        };
        self.save_topology();
        let state = &mut *self.state;
        if let Some(record) = state.topology.remove(component_id) {
            state
                .removed_component_records
                .insert(component_id.to_owned(), record);
        }
        if !state.removed_components.iter().any(|id| id == component_id) {
            state.removed_components.push(component_id.to_owned());
            state.removed_components.sort();
        }
        Ok(())
    }

    fn check_result(&mut self, passed: bool, fact: ComponentFact<'_>) -> Applied {
        let (ev, state) = (self.ev, &mut *self.state);
        let (component_id, check_id) = (fact.component_id, fact.check_id);
        let registered = component_id
            .and_then(|id| state.topology.get(id))
            .zip(check_id)
            .is_some_and(|(component, check)| component.required_checks.iter().any(|c| c == check));
        let (Some(component_id), Some(check_id), true) = (component_id, check_id, registered)
        else {
            return Err(ev.corrupt("check result references an unknown required check"));
        };
        let record = CheckRecord {
            passed,
            evidence_refs: ev.evidence_values()?,
            reason: ev.opt_str("reason")?.map(str::to_owned),
        };
        let last = state
            .check_history
            .get(component_id)
            .and_then(|checks| checks.get(check_id))
            .and_then(|history| history.last());
        if last.is_some_and(|last| same_json(&last.to_json(), &record.to_json())) {
            return Err(ev.corrupt("duplicate check result"));
        }
        let previous = state
            .checks
            .get(component_id)
            .and_then(|checks| checks.get(check_id))
            .copied();
        self.journal.push(Undo::CheckAppended {
            component: component_id.to_owned(),
            check: check_id.to_owned(),
            previous,
        });
        state
            .check_history
            .entry(component_id.to_owned())
            .or_default()
            .entry(check_id.to_owned())
            .or_default()
            .push(record);
        state
            .checks
            .entry(component_id.to_owned())
            .or_default()
            .insert(check_id.to_owned(), passed);
        Ok(())
    }

    fn evidence_attached(&mut self, fact: ComponentFact<'_>) -> Applied {
        let ev = self.ev;
        let component_id = fact.component_id;
        let Some(component_id) = component_id.filter(|id| self.state.topology.contains_key(*id))
        else {
            return Err(ev.corrupt("component evidence references an unknown component"));
        };
        let coverage = ev.decoded(fact.coverage_state)?;
        let evidence = ev.evidence_values()?;
        self.save_topology();
        if let Some(component) = self.state.topology.get_mut(component_id) {
            component.coverage_state = coverage;
            component.evidence_refs = evidence;
        }
        Ok(())
    }

    /// `handoff_recorded` / `live_report_recorded`: one binding per kind;
    /// rebinding the same metadata is accepted, different metadata is not.
    fn report(&mut self, Report { kind, binding }: Report<'_>) -> Applied {
        let state = &mut *self.state;
        let metadata = binding;
        let previous = state.reports.get(kind);
        if previous.is_some_and(|previous| {
            !same_json(
                &Value::Object(previous.clone()),
                &Value::Object(metadata.clone()),
            )
        }) {
            return Err(self
                .ev
                .corrupt("report kind is already bound to different evidence"));
        }
        self.journal.push(Undo::Report {
            kind: kind.to_owned(),
            previous: previous.cloned(),
        });
        state.reports.insert(kind.to_owned(), metadata);
        Ok(())
    }
}
