//! The replayed coordinator state: typed records plus their exact JSON form.
//!
//! Everything here is derived from the receipt by the reducer in
//! [`super::replay`]; nothing is ever read back from a cache. The JSON
//! produced by [`CoordinatorState::public_json`] and
//! [`CoordinatorState::lane_records`] is, key for key, what the reference
//! writes under `run.json` `coordinator.state` and to `lanes/<id>.json`
//! (canonical JSON sorts keys, so only the key sets and values matter).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Number, Value};

use crate::receipt::vocab::EventType;
pub use crate::receipt::vocab::{CoverageState, LaneState, RunState};

/// One lane as replayed (`lanes/<id>.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct LaneRecord {
    pub id: String,
    pub state: LaneState,
    pub agent_id: String,
    pub assignment: Option<String>,
    pub write_scope: Vec<String>,
    pub changed_paths: Vec<String>,
    pub fallback: Option<String>,
    pub startup_ack_deadline: Option<String>,
    pub silence_lease_deadline: Option<String>,
    pub command_deadline: Option<String>,
    pub probe_deadline: Option<String>,
    pub evidence_digest: Option<String>,
    pub parent_lane_id: Option<String>,
    /// Non-negative integer of any size (receipts may carry big integers and
    /// the cache must round-trip them exactly); see [`Self::replacement_count_u64`].
    pub replacement_count: Number,
    pub replacement_lane_id: Option<String>,
    pub last_evidence_digest: Option<String>,
    pub last_reason: Option<String>,
    pub liveness_evidence_refs: Vec<Value>,
    /// Digests of every distinct liveness evidence list, in first-seen order.
    pub liveness_evidence_digests: Vec<String>,
    pub last_event_type: EventType,
    pub terminal_sequence: Option<u64>,
    pub updated_at: String,
    /// Completion-side evidence (the last non-liveness evidence).
    pub evidence_refs: Vec<Value>,
    /// The nine reservation fields of a `lane_reassigned` that carried all of
    /// them (the exact child proof used by `replacement-repair`).
    pub replacement_reservation: Option<Map<String, Value>>,
    /// Membership index over `liveness_evidence_digests` (not serialised).
    pub(crate) digest_index: HashSet<String>,
    /// Digests recorded before a loaded checkpoint, kept outside the state
    /// (see [`EarlierDigests`]); `liveness_evidence_digests` then holds only
    /// the ones recorded since.
    pub(crate) earlier: EarlierLaneDigests,
}

/// Read access to liveness digests recorded before a checkpoint, held by
/// the store so that loading a heartbeat-heavy run does not read them all.
/// The rules only ask membership questions, which this answers.
pub trait EarlierDigests: std::fmt::Debug {
    fn contains(&self, lane_id: &str, digest: &str) -> bool;
}

/// A lane's view of its earlier digests: how many, and where to ask.
#[derive(Debug, Clone, Default)]
pub struct EarlierLaneDigests {
    source: Option<Arc<dyn EarlierDigests>>,
    count: usize,
}

impl PartialEq for EarlierLaneDigests {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
    }
}

impl EarlierLaneDigests {
    pub fn new(source: Arc<dyn EarlierDigests>, count: usize) -> Self {
        EarlierLaneDigests {
            source: (count > 0).then_some(source),
            count,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

impl LaneRecord {
    /// `replacement_count` as a `u64`, or `None` when it does not fit (it is
    /// then larger than any manifest limit).
    pub fn replacement_count_u64(&self) -> Option<u64> {
        self.replacement_count.as_u64()
    }

    /// Whether `digest` is one of this lane's liveness evidence digests.
    pub fn has_liveness_digest(&self, digest: &str) -> bool {
        self.digest_index.contains(digest)
            || self
                .earlier
                .source
                .as_ref()
                .is_some_and(|earlier| earlier.contains(&self.id, digest))
    }

    /// How many liveness digests the lane has recorded in all.
    pub fn liveness_digest_count(&self) -> usize {
        self.earlier.count + self.liveness_evidence_digests.len()
    }

    /// Appends a liveness digest unless already present; true when added.
    pub(crate) fn push_liveness_digest(&mut self, digest: String) -> bool {
        if self.digest_index.contains(&digest) {
            return false;
        }
        self.digest_index.insert(digest.clone());
        self.liveness_evidence_digests.push(digest);
        true
    }

    /// Drops liveness digests beyond `len` (rollback of an append).
    pub(crate) fn truncate_liveness_digests(&mut self, len: usize) {
        while self.liveness_evidence_digests.len() > len {
            if let Some(digest) = self.liveness_evidence_digests.pop() {
                self.digest_index.remove(&digest);
            }
        }
    }

    /// The record exactly as the reference writes it to `lanes/<id>.json`.
    pub fn to_json(&self) -> Value {
        debug_assert_eq!(self.earlier.count, 0, "earlier digests are not attached");
        self.to_json_with_digests(true)
    }

    /// The record, with or without the liveness digest list.
    pub fn to_json_with_digests(&self, digests: bool) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("state".into(), Value::String(self.state.as_str().into()));
        m.insert("agent_id".into(), Value::String(self.agent_id.clone()));
        m.insert("assignment".into(), opt_string(&self.assignment));
        m.insert("write_scope".into(), strings(&self.write_scope));
        m.insert("changed_paths".into(), strings(&self.changed_paths));
        m.insert("fallback".into(), opt_string(&self.fallback));
        m.insert(
            "startup_ack_deadline".into(),
            opt_string(&self.startup_ack_deadline),
        );
        m.insert(
            "silence_lease_deadline".into(),
            opt_string(&self.silence_lease_deadline),
        );
        m.insert(
            "command_deadline".into(),
            opt_string(&self.command_deadline),
        );
        m.insert("probe_deadline".into(), opt_string(&self.probe_deadline));
        m.insert("evidence_digest".into(), opt_string(&self.evidence_digest));
        m.insert("parent_lane_id".into(), opt_string(&self.parent_lane_id));
        m.insert(
            "replacement_count".into(),
            Value::Number(self.replacement_count.clone()),
        );
        m.insert(
            "replacement_lane_id".into(),
            opt_string(&self.replacement_lane_id),
        );
        m.insert(
            "last_evidence_digest".into(),
            opt_string(&self.last_evidence_digest),
        );
        m.insert("last_reason".into(), opt_string(&self.last_reason));
        m.insert(
            "liveness_evidence_refs".into(),
            Value::Array(self.liveness_evidence_refs.clone()),
        );
        m.insert(
            "liveness_evidence_digests".into(),
            if digests {
                strings(&self.liveness_evidence_digests)
            } else {
                Value::Array(Vec::new())
            },
        );
        m.insert(
            "last_event_type".into(),
            Value::String(self.last_event_type.as_str().into()),
        );
        m.insert(
            "terminal_sequence".into(),
            self.terminal_sequence.map_or(Value::Null, Value::from),
        );
        m.insert("updated_at".into(), Value::String(self.updated_at.clone()));
        m.insert(
            "evidence_refs".into(),
            Value::Array(self.evidence_refs.clone()),
        );
        if let Some(reservation) = &self.replacement_reservation {
            m.insert(
                "replacement_reservation".into(),
                Value::Object(reservation.clone()),
            );
        }
        Value::Object(m)
    }
}

/// A registered (or removed) topology component.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    pub id: String,
    pub required: bool,
    pub description: String,
    pub owner_lane: String,
    pub required_checks: Vec<String>,
    pub dependencies: Vec<String>,
    pub evidence_refs: Vec<Value>,
    pub coverage_state: CoverageState,
}

impl Component {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("required".into(), Value::Bool(self.required));
        m.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        m.insert("owner_lane".into(), Value::String(self.owner_lane.clone()));
        m.insert("required_checks".into(), strings(&self.required_checks));
        m.insert("dependencies".into(), strings(&self.dependencies));
        m.insert(
            "evidence_refs".into(),
            Value::Array(self.evidence_refs.clone()),
        );
        m.insert(
            "coverage_state".into(),
            Value::String(self.coverage_state.as_str().into()),
        );
        Value::Object(m)
    }
}

/// One recorded check result (`check_history[component][check][i]`).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRecord {
    pub passed: bool,
    pub evidence_refs: Vec<Value>,
    pub reason: Option<String>,
}

impl CheckRecord {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("passed".into(), Value::Bool(self.passed));
        m.insert(
            "evidence_refs".into(),
            Value::Array(self.evidence_refs.clone()),
        );
        m.insert("reason".into(), opt_string(&self.reason));
        Value::Object(m)
    }
}

/// A failed lane's recorded resolution (`failure_resolutions[lane]`).
#[derive(Debug, Clone, PartialEq)]
pub struct FailureResolution {
    pub resolution_lane_id: String,
    pub resolved_at: String,
    pub evidence_refs: Vec<Value>,
}

impl FailureResolution {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "resolution_lane_id".into(),
            Value::String(self.resolution_lane_id.clone()),
        );
        m.insert(
            "resolved_at".into(),
            Value::String(self.resolved_at.clone()),
        );
        m.insert(
            "evidence_refs".into(),
            Value::Array(self.evidence_refs.clone()),
        );
        Value::Object(m)
    }
}

/// The coordinator state replayed from a verified receipt.
///
/// Built with [`CoordinatorState::new`] and advanced one receipt event at a
/// time with [`CoordinatorState::apply`] (defined in `replay.rs`).
#[derive(Debug, Clone)]
pub struct CoordinatorState {
    pub(crate) run_state: RunState,
    pub(crate) owner_epoch: u64,
    pub(crate) owner_fingerprint: Option<String>,
    pub(crate) lanes: BTreeMap<String, LaneRecord>,
    pub(crate) topology: BTreeMap<String, Component>,
    pub(crate) removed_components: Vec<String>,
    pub(crate) removed_component_records: BTreeMap<String, Component>,
    pub(crate) approved_component_ids: Vec<String>,
    pub(crate) checks: BTreeMap<String, BTreeMap<String, bool>>,
    pub(crate) check_history: BTreeMap<String, BTreeMap<String, Vec<CheckRecord>>>,
    /// report kind -> the binding event's whole metadata object.
    pub(crate) reports: BTreeMap<String, Map<String, Value>>,
    pub(crate) main_verified: bool,
    pub(crate) incomplete_replacements: Vec<String>,
    pub(crate) failure_resolutions: BTreeMap<String, FailureResolution>,
    pub(crate) last_sequence: u64,
    pub(crate) last_checksum: String,
    pub(crate) last_event_type: Option<EventType>,
    pub(crate) updated_at: Option<String>,
    /// The approval gate replay applies (our extension; not in the
    /// reference's state JSON, kept in the checkpoint's `ours`).
    pub(crate) gate: super::approval::PolicyStatus,
    /// Events that broke one of our rules (issue 13), in receipt order.
    pub(crate) breaches: Vec<super::breach::Breach>,
}

impl CoordinatorState {
    /// Events that broke one of our rules, in receipt order.
    pub fn breaches(&self) -> &[super::breach::Breach] {
        &self.breaches
    }

    /// The approval gate as replay established it from `run_created`.
    pub fn gate(&self) -> &super::approval::PolicyStatus {
        &self.gate
    }

    /// What replay adds to the reference's state: the gate and the
    /// breaches (kept in the checkpoint, never in `run.json`).
    pub fn ours_json(&self) -> serde_json::Value {
        serde_json::json!({
            "breaches": super::breach::breaches_value(&self.breaches),
            "gate": self.gate.to_value(),
        })
    }

    /// Restore [`Self::ours_json`] into a state rebuilt from its public JSON.
    pub fn restore_ours(&mut self, value: &serde_json::Value) -> Result<(), String> {
        let bad = || "checkpoint extension is malformed".to_string();
        let breaches = value
            .get("breaches")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(super::breach::Breach::from_value)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        let gate = value
            .get("gate")
            .and_then(super::approval::PolicyStatus::from_value)
            .ok_or_else(bad)?;
        self.breaches = breaches;
        self.gate = gate;
        Ok(())
    }

    pub fn run_state(&self) -> &str {
        self.run_state.as_str()
    }

    pub fn run_state_enum(&self) -> RunState {
        self.run_state
    }

    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The receipt head ("" before the first event).
    pub fn last_checksum(&self) -> &str {
        &self.last_checksum
    }

    pub fn last_event_type(&self) -> Option<&str> {
        self.last_event_type.map(EventType::as_str)
    }

    pub fn updated_at(&self) -> Option<&str> {
        self.updated_at.as_deref()
    }

    /// The current owner's fingerprint (switches at every `run_resumed`).
    pub fn owner_fingerprint(&self) -> Option<&str> {
        self.owner_fingerprint.as_deref()
    }

    pub fn owner_epoch(&self) -> u64 {
        self.owner_epoch
    }

    pub fn lanes(&self) -> &BTreeMap<String, LaneRecord> {
        &self.lanes
    }

    pub fn lane(&self, lane_id: &str) -> Option<&LaneRecord> {
        self.lanes.get(lane_id)
    }

    pub fn topology(&self) -> &BTreeMap<String, Component> {
        &self.topology
    }

    /// Sorted ids of removed topology components.
    pub fn removed_components(&self) -> &[String] {
        &self.removed_components
    }

    pub fn removed_component_records(&self) -> &BTreeMap<String, Component> {
        &self.removed_component_records
    }

    /// Sorted component ids approved at init (`_run.component_ids`).
    pub fn approved_component_ids(&self) -> &[String] {
        &self.approved_component_ids
    }

    /// component -> check -> last result.
    pub fn checks(&self) -> &BTreeMap<String, BTreeMap<String, bool>> {
        &self.checks
    }

    pub fn check_history(&self) -> &BTreeMap<String, BTreeMap<String, Vec<CheckRecord>>> {
        &self.check_history
    }

    /// report kind -> binding metadata.
    pub fn reports(&self) -> &BTreeMap<String, Map<String, Value>> {
        &self.reports
    }

    pub fn main_verified(&self) -> bool {
        self.main_verified
    }

    /// Sorted ids of `replaced` lanes whose reserved child lane does not exist.
    pub fn incomplete_replacements(&self) -> &[String] {
        &self.incomplete_replacements
    }

    pub fn failure_resolutions(&self) -> &BTreeMap<String, FailureResolution> {
        &self.failure_resolutions
    }

    /// True when the evidence digest (SHA-256 of the canonical JSON of the
    /// whole list) is in any lane's liveness evidence history.
    pub fn is_liveness_digest(&self, digest: &str) -> bool {
        self.lanes
            .values()
            .any(|lane| lane.has_liveness_digest(digest))
    }

    /// True when the evidence list (an `evidence_refs` JSON array) was
    /// recorded as liveness evidence by any lane: such evidence can never
    /// satisfy completion or resolve a failed lane.
    pub fn is_liveness_evidence(&self, evidence_refs: &Value) -> bool {
        self.is_liveness_digest(&crate::receipt::canonical::digest(evidence_refs))
    }

    /// The public replay state exactly as the reference stores it under
    /// `run.json` `coordinator.state`.
    pub fn public_json(&self) -> Value {
        self.public_json_with_digests(true)
    }

    /// The public state, optionally without the liveness digest lists (the
    /// checkpoint keeps those in the store's digest table instead).
    pub fn public_json_with_digests(&self, digests: bool) -> Value {
        debug_assert!(
            !digests || self.lanes.values().all(|l| l.earlier.count == 0),
            "earlier digests are not attached"
        );
        let mut m = Map::new();
        m.insert(
            "approved_component_ids".into(),
            strings(&self.approved_component_ids),
        );
        m.insert(
            "check_history".into(),
            Value::Object(
                self.check_history
                    .iter()
                    .map(|(component, checks)| {
                        let checks = checks
                            .iter()
                            .map(|(check, history)| {
                                let history = history.iter().map(CheckRecord::to_json).collect();
                                (check.clone(), Value::Array(history))
                            })
                            .collect();
                        (component.clone(), Value::Object(checks))
                    })
                    .collect(),
            ),
        );
        m.insert(
            "checks".into(),
            Value::Object(
                self.checks
                    .iter()
                    .map(|(component, checks)| {
                        let checks = checks
                            .iter()
                            .map(|(check, passed)| (check.clone(), Value::Bool(*passed)))
                            .collect();
                        (component.clone(), Value::Object(checks))
                    })
                    .collect(),
            ),
        );
        m.insert(
            "failure_resolutions".into(),
            Value::Object(
                self.failure_resolutions
                    .iter()
                    .map(|(id, resolution)| (id.clone(), resolution.to_json()))
                    .collect(),
            ),
        );
        m.insert(
            "incomplete_replacements".into(),
            strings(&self.incomplete_replacements),
        );
        m.insert(
            "lanes".into(),
            Value::Object(
                self.lanes
                    .iter()
                    .map(|(id, lane)| (id.clone(), lane.to_json_with_digests(digests)))
                    .collect(),
            ),
        );
        m.insert(
            "last_checksum".into(),
            Value::String(self.last_checksum.clone()),
        );
        m.insert(
            "last_event_type".into(),
            self.last_event_type
                .map_or(Value::Null, |t| Value::String(t.as_str().into())),
        );
        m.insert("last_sequence".into(), Value::from(self.last_sequence));
        m.insert("main_verified".into(), Value::Bool(self.main_verified));
        m.insert("owner_epoch".into(), Value::from(self.owner_epoch));
        m.insert(
            "owner_fingerprint".into(),
            opt_string(&self.owner_fingerprint),
        );
        m.insert(
            "removed_component_records".into(),
            Value::Object(
                self.removed_component_records
                    .iter()
                    .map(|(id, component)| (id.clone(), component.to_json()))
                    .collect(),
            ),
        );
        m.insert(
            "removed_components".into(),
            strings(&self.removed_components),
        );
        m.insert(
            "reports".into(),
            Value::Object(
                self.reports
                    .iter()
                    .map(|(kind, metadata)| (kind.clone(), Value::Object(metadata.clone())))
                    .collect(),
            ),
        );
        m.insert(
            "run_state".into(),
            Value::String(self.run_state.as_str().into()),
        );
        m.insert(
            "topology".into(),
            Value::Object(
                self.topology
                    .iter()
                    .map(|(id, component)| (id.clone(), component.to_json()))
                    .collect(),
            ),
        );
        m.insert("updated_at".into(), opt_string(&self.updated_at));
        Value::Object(m)
    }

    /// Hand each lane the digests it recorded before a checkpoint, held in
    /// `source`; `counts` says how many per lane. The lanes must hold no
    /// digests of their own yet (they come from a checkpoint).
    pub fn attach_earlier_digests(
        &mut self,
        source: Arc<dyn EarlierDigests>,
        counts: &BTreeMap<String, usize>,
    ) -> Result<(), String> {
        if counts.keys().any(|id| !self.lanes.contains_key(id)) {
            return Err("digest counts name an unknown lane".into());
        }
        for (id, lane) in &mut self.lanes {
            if !lane.liveness_evidence_digests.is_empty() {
                return Err("lane already holds liveness digests".into());
            }
            let count = counts.get(id).copied().unwrap_or(0);
            lane.earlier = EarlierLaneDigests::new(source.clone(), count);
        }
        Ok(())
    }

    /// Put the earlier digests back into the lanes' own lists (in front of
    /// the ones recorded since), so the full records can be written out.
    pub fn prepend_earlier_digests(
        &mut self,
        mut lists: BTreeMap<String, Vec<String>>,
    ) -> Result<(), String> {
        for (id, lane) in &mut self.lanes {
            let mut earlier = lists.remove(id).unwrap_or_default();
            if earlier.len() != lane.earlier.count {
                return Err(format!("earlier digests of lane {id} do not match"));
            }
            earlier.append(&mut lane.liveness_evidence_digests);
            lane.digest_index = earlier.iter().cloned().collect();
            lane.liveness_evidence_digests = earlier;
            lane.earlier = EarlierLaneDigests::default();
        }
        if !lists.is_empty() {
            return Err("earlier digests name an unknown lane".into());
        }
        Ok(())
    }

    /// The (lane, digest) pairs the lanes hold themselves: everything after
    /// a full replay, only what was recorded since the checkpoint otherwise.
    pub fn own_liveness_digests(&self) -> Vec<(String, String)> {
        self.lanes
            .iter()
            .flat_map(|(id, lane)| {
                lane.liveness_evidence_digests
                    .iter()
                    .map(move |d| (id.clone(), d.clone()))
            })
            .collect()
    }

    /// lane id -> how many liveness digests it has recorded in all.
    pub fn liveness_digest_counts(&self) -> BTreeMap<String, usize> {
        self.lanes
            .iter()
            .map(|(id, lane)| (id.clone(), lane.liveness_digest_count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// lane id -> lane record, exactly the JSON the reference writes to
    /// `lanes/<id>.json`.
    pub fn lane_records(&self) -> BTreeMap<String, Value> {
        self.lanes
            .iter()
            .map(|(id, lane)| (id.clone(), lane.to_json()))
            .collect()
    }
}

fn opt_string(value: &Option<String>) -> Value {
    value.clone().map_or(Value::Null, Value::String)
}

fn strings(values: &[String]) -> Value {
    Value::Array(values.iter().cloned().map(Value::String).collect())
}
