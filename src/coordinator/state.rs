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

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::receipt::primitives::{AgentId, LaneId};
use crate::receipt::vocab::EventType;
pub use crate::receipt::vocab::{CoverageState, LaneState, RunState};

/// One lane as replayed (`lanes/<id>.json`): serde gives its exact JSON,
/// key for key (canonical JSON sorts the keys). The liveness digest list
/// is written by [`LaneRecord::to_json_with_digests`], which may leave it
/// out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneRecord {
    pub id: LaneId,
    pub state: LaneState,
    pub agent_id: AgentId,
    #[serde(deserialize_with = "required")]
    pub assignment: Option<String>,
    pub write_scope: Vec<String>,
    pub changed_paths: Vec<String>,
    #[serde(deserialize_with = "required")]
    pub fallback: Option<String>,
    #[serde(deserialize_with = "required")]
    pub startup_ack_deadline: Option<String>,
    #[serde(deserialize_with = "required")]
    pub silence_lease_deadline: Option<String>,
    #[serde(deserialize_with = "required")]
    pub command_deadline: Option<String>,
    #[serde(deserialize_with = "required")]
    pub probe_deadline: Option<String>,
    #[serde(deserialize_with = "required")]
    pub evidence_digest: Option<String>,
    #[serde(deserialize_with = "required")]
    pub parent_lane_id: Option<String>,
    /// Non-negative integer of any size (receipts may carry big integers and
    /// the cache must round-trip them exactly); see [`Self::replacement_count_u64`].
    pub replacement_count: Number,
    #[serde(deserialize_with = "required")]
    pub replacement_lane_id: Option<String>,
    #[serde(deserialize_with = "required")]
    pub last_evidence_digest: Option<String>,
    #[serde(deserialize_with = "required")]
    pub last_reason: Option<String>,
    pub liveness_evidence_refs: Vec<Value>,
    /// Digests of every distinct liveness evidence list, in first-seen order.
    #[serde(skip_serializing)]
    pub liveness_evidence_digests: Vec<String>,
    pub last_event_type: EventType,
    #[serde(deserialize_with = "required")]
    pub terminal_sequence: Option<u64>,
    pub updated_at: String,
    /// Completion-side evidence (the last non-liveness evidence).
    pub evidence_refs: Vec<Value>,
    /// The nine reservation fields of a `lane_reassigned` that carried all of
    /// them (the exact child proof used by `replacement-repair`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "object"
    )]
    pub replacement_reservation: Option<Map<String, Value>>,
    /// Membership index over `liveness_evidence_digests` (not serialised;
    /// rebuilt by [`LaneRecord::index_digests`]).
    #[serde(skip)]
    pub(crate) digest_index: DigestSet<String>,
    /// Digests recorded before a loaded checkpoint, kept outside the state
    /// (see [`EarlierDigests`]); `liveness_evidence_digests` then holds only
    /// the ones recorded since.
    #[serde(skip)]
    pub(crate) earlier: EarlierLaneDigests,
}

/// A nullable field that must be present (serde would default a missing
/// `Option` to `None`; our records always write every key).
fn required<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

/// An optional key whose value, when present, is an object.
fn object<'de, D>(deserializer: D) -> Result<Option<Map<String, Value>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Map::<String, Value>::deserialize(deserializer).map(Some)
}

/// Read access to liveness digests recorded before a checkpoint, held by
/// the store so that loading a heartbeat-heavy run does not read them all.
/// The rules only ask membership questions, which this answers.
pub trait EarlierDigests: std::fmt::Debug {
    fn contains(&self, lane_id: &str, digest: &str) -> bool;
}

/// Liveness digests moved out of the lanes and kept compactly (the first
/// 16 bytes of each SHA-256 instead of two 64-character strings), so that a
/// streaming replay of a heartbeat-heavy receipt stays in bounded memory
/// (`bundle-verify`). Membership is all the rules ask of them; a false
/// match would need a 128-bit second preimage.
#[derive(Debug, Default)]
pub struct CompactDigests {
    lanes: std::sync::Mutex<std::collections::HashMap<String, DigestSet<[u8; 16]>>>,
    /// Digests that are not 64 hex digits (never ours), kept as they are.
    other: std::sync::Mutex<HashSet<(String, String)>>,
}

/// Hashes a SHA-256 digest (its text or its bytes) by its first 16 bytes,
/// which are already spread evenly: SipHash's defence against chosen
/// collisions buys nothing for digests this replay computed itself, and it
/// was a tenth of a long replay's main thread.
#[derive(Default, Clone, Copy)]
pub struct DigestHasher(u64);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8).take(2) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(23) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// A set of digests hashed by [`DigestHasher`].
pub type DigestSet<K> = HashSet<K, std::hash::BuildHasherDefault<DigestHasher>>;

/// The first 16 bytes of a digest of 64 hex digits (either case, as
/// `hex::decode` reads them), or `None`.
fn digest_bytes(digest: &str) -> Option<[u8; 16]> {
    let text: &[u8; 64] = digest.as_bytes().try_into().ok()?;
    // A table and no branch per digit: this runs for every heartbeat of a
    // replay, twice (its check and its record).
    let mut invalid = 0u8;
    for c in &text[32..] {
        invalid |= HEX_DIGITS[usize::from(*c)];
    }
    let mut out = [0u8; 16];
    for (slot, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (high, low) = (
            HEX_DIGITS[usize::from(pair[0])],
            HEX_DIGITS[usize::from(pair[1])],
        );
        invalid |= high | low;
        *slot = (high << 4) | (low & 0x0f);
    }
    (invalid & 0x80 == 0).then_some(out)
}

/// The value of each hex digit (either case), and 0x80 for any other byte.
const HEX_DIGITS: [u8; 256] = {
    let mut table = [0x80u8; 256];
    let mut c = 0;
    while c < 10 {
        table[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        table[b'a' as usize + c] = 10 + c as u8;
        table[b'A' as usize + c] = 10 + c as u8;
        c += 1;
    }
    table
};

impl CompactDigests {
    fn add(&self, lane_id: &str, digests: Vec<String>) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let set = lanes.entry(lane_id.to_string()).or_default();
        for digest in digests {
            match digest_bytes(&digest) {
                Some(bytes) => {
                    set.insert(bytes);
                }
                None => {
                    self.other
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((lane_id.to_string(), digest));
                }
            }
        }
    }
}

impl EarlierDigests for CompactDigests {
    fn contains(&self, lane_id: &str, digest: &str) -> bool {
        match digest_bytes(digest) {
            Some(bytes) => self
                .lanes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(lane_id)
                .is_some_and(|set| set.contains(&bytes)),
            None => self
                .other
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&(lane_id.to_string(), digest.to_string())),
        }
    }
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
        let mut value = to_value(self);
        if let Value::Object(map) = &mut value {
            map.insert(
                "liveness_evidence_digests".into(),
                if digests {
                    strings(&self.liveness_evidence_digests)
                } else {
                    Value::Array(Vec::new())
                },
            );
        }
        value
    }

    /// Rebuild the membership index after deserialising.
    pub(crate) fn index_digests(&mut self) {
        self.digest_index = self.liveness_evidence_digests.iter().cloned().collect();
    }
}

/// A record as JSON (our records have string keys and no floats, so this
/// cannot fail).
fn to_value<T: Serialize>(record: &T) -> Value {
    serde_json::to_value(record).expect("a state record is JSON")
}

/// A registered (or removed) topology component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        to_value(self)
    }
}

/// One recorded check result (`check_history[component][check][i]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    pub passed: bool,
    pub evidence_refs: Vec<Value>,
    #[serde(deserialize_with = "required")]
    pub reason: Option<String>,
}

impl CheckRecord {
    pub fn to_json(&self) -> Value {
        to_value(self)
    }
}

/// A failed lane's recorded resolution (`failure_resolutions[lane]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureResolution {
    pub resolution_lane_id: String,
    pub resolved_at: String,
    pub evidence_refs: Vec<Value>,
}

impl FailureResolution {
    pub fn to_json(&self) -> Value {
        to_value(self)
    }
}

/// How many of the latest breaches a checkpoint keeps besides their count.
pub const CHECKPOINT_BREACHES: usize = 16;

/// The coordinator state replayed from a verified receipt.
///
/// Built with [`CoordinatorState::new`] and advanced one receipt event at a
/// time with [`CoordinatorState::apply`] (defined in `replay.rs`).
///
/// serde gives the public JSON (see [`CoordinatorState::public_json`]);
/// the lanes are written by it (with or without their digest lists), and
/// the gate and the breaches are ours, kept outside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordinatorState {
    pub(crate) run_state: RunState,
    pub(crate) owner_epoch: u64,
    #[serde(deserialize_with = "required")]
    pub(crate) owner_fingerprint: Option<String>,
    #[serde(skip_serializing)]
    pub(crate) lanes: BTreeMap<LaneId, LaneRecord>,
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
    #[serde(deserialize_with = "required")]
    pub(crate) last_event_type: Option<EventType>,
    #[serde(deserialize_with = "required")]
    pub(crate) updated_at: Option<String>,
    /// The approval gate replay applies (our extension; not in the
    /// reference's state JSON, kept in the checkpoint's `ours`).
    #[serde(skip, default = "no_gate")]
    pub(crate) gate: super::approval::PolicyStatus,
    /// `run_created`'s timestamp, which the gate's approval window is
    /// counted from on replay (ours, kept with the gate).
    #[serde(skip)]
    pub(crate) created_at: Option<String>,
    /// Events that broke one of our rules (contracts/rules.md), in receipt
    /// order.
    #[serde(skip)]
    pub(crate) breaches: Vec<super::breach::Breach>,
    /// How many earlier breaches a state restored from a checkpoint does
    /// not hold (the checkpoint keeps a count and the latest few, so no
    /// command's cost grows with a run's breaches; contracts/receipt.md
    /// "Checkpoint"). Always 0 after a full replay.
    #[serde(skip)]
    pub(crate) breaches_elided: u64,
    /// lane id -> the sequence of the last event that created or changed
    /// the lane's record (ours, kept in the checkpoint's `ours`): the line
    /// a mutation deciding on a cached lane re-reads (contracts/receipt.md
    /// "What a mutation proves").
    #[serde(skip)]
    pub(crate) lane_sources: BTreeMap<String, u64>,
    /// The sequence of the last event that changed the run state (ours,
    /// in the checkpoint's `ours`): the line a refusal re-reads.
    #[serde(skip)]
    pub(crate) run_source: u64,
}

impl CoordinatorState {
    /// Events that broke one of our rules, in receipt order. Complete only
    /// after a full replay: a state restored from a checkpoint holds the
    /// latest [`CHECKPOINT_BREACHES`] of [`Self::breach_count`].
    pub fn breaches(&self) -> &[super::breach::Breach] {
        &self.breaches
    }

    /// How many breaches the run holds, whether or not this state holds
    /// each of them.
    pub fn breach_count(&self) -> u64 {
        self.breaches_elided + self.breaches.len() as u64
    }

    /// Whether every breach of the run is in [`Self::breaches`] (a full
    /// replay), which a verdict listing them needs.
    pub fn holds_every_breach(&self) -> bool {
        self.breaches_elided == 0
    }

    /// The approval gate as replay established it from `run_created`.
    pub fn gate(&self) -> &super::approval::PolicyStatus {
        &self.gate
    }

    /// What replay adds to the reference's state: the gate and the
    /// breaches (kept in the checkpoint, never in `run.json`).
    pub fn ours_json(&self) -> serde_json::Value {
        let kept = self.breaches.len().saturating_sub(CHECKPOINT_BREACHES);
        serde_json::json!({
            "breaches": super::breach::breaches_value(&self.breaches[kept..]),
            "breach_count": self.breach_count(),
            "gate": self.gate.to_value(),
            "created_at": self.created_at,
            "lane_sources": self.lane_sources,
            "run_source": self.run_source,
        })
    }

    /// The sequence of the last event that changed the run state.
    pub fn run_source(&self) -> u64 {
        self.run_source
    }

    /// The sequence of the last event that created or changed `lane_id`.
    pub fn lane_source(&self, lane_id: &str) -> Option<u64> {
        self.lane_sources.get(lane_id).copied()
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
        let count = value
            .get("breach_count")
            .and_then(serde_json::Value::as_u64)
            .filter(|n| *n >= breaches.len() as u64 && breaches.len() <= CHECKPOINT_BREACHES)
            .ok_or_else(bad)?;
        let gate = value
            .get("gate")
            .and_then(super::approval::PolicyStatus::from_value)
            .ok_or_else(bad)?;
        // Required (a checkpoint written before it existed is not used).
        let created_at = match value.get("created_at").ok_or_else(bad)? {
            serde_json::Value::Null => None,
            serde_json::Value::String(at) => Some(at.clone()),
            _ => return Err(bad()),
        };
        let lane_sources: BTreeMap<String, u64> = value
            .get("lane_sources")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .ok_or_else(bad)?;
        if lane_sources.len() != self.lanes.len()
            || lane_sources.iter().any(|(id, seq)| {
                !self.lanes.contains_key(id.as_str()) || *seq == 0 || *seq > self.last_sequence
            })
        {
            return Err(bad());
        }
        self.breaches_elided = count - breaches.len() as u64;
        self.breaches = breaches;
        self.gate = gate;
        self.created_at = created_at;
        let run_source = value
            .get("run_source")
            .and_then(serde_json::Value::as_u64)
            .filter(|seq| *seq >= 1 && *seq <= self.last_sequence)
            .ok_or_else(bad)?;
        self.lane_sources = lane_sources;
        self.run_source = run_source;
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

    pub fn lanes(&self) -> &BTreeMap<LaneId, LaneRecord> {
        &self.lanes
    }

    pub fn lane(&self, lane_id: &str) -> Option<&LaneRecord> {
        self.lanes.get(lane_id)
    }

    /// The lane when it is `wanted`; else the state it is in (`None`: the
    /// run has no such lane), for the refusal to name.
    pub fn lane_in(
        &self,
        lane_id: &str,
        wanted: LaneState,
    ) -> Result<&LaneRecord, Option<LaneState>> {
        match self.lane(lane_id) {
            Some(lane) if lane.state == wanted => Ok(lane),
            other => Err(other.map(|lane| lane.state)),
        }
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

    /// THE liveness-evidence rule (`contracts/receipt.md`, "Our rules,
    /// whoever writes"): the digest is any lane's latest liveness digest or
    /// in any lane's liveness history. Such evidence never completes a
    /// lane, a component, a resolution or the run, and never passes a
    /// check; the write path refuses it and replay records it as a breach.
    pub fn rests_on_liveness(&self, digest: &str) -> bool {
        self.lanes
            .values()
            .any(|lane| lane.last_evidence_digest.as_deref() == Some(digest))
            || self.is_liveness_digest(digest)
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
        let mut value = to_value(self);
        if let Value::Object(map) = &mut value {
            map.insert(
                "lanes".into(),
                Value::Object(
                    self.lanes
                        .iter()
                        .map(|(id, lane)| (id.to_string(), lane.to_json_with_digests(digests)))
                        .collect(),
                ),
            );
        }
        value
    }

    /// Rebuild a state from [`CoordinatorState::public_json`] output (a
    /// checkpoint standing in for the replay of a receipt prefix); any
    /// shape error refuses it, and the caller then replays the receipt.
    pub fn from_public_json(value: &Value) -> Result<CoordinatorState, String> {
        let mut state = CoordinatorState::deserialize(value)
            .map_err(|e| format!("checkpoint state is malformed: {e}"))?;
        for lane in state.lanes.values_mut() {
            lane.index_digests();
        }
        Ok(state)
    }

    /// Hand each lane the digests it recorded before a checkpoint, held in
    /// `source`; `counts` says how many per lane. The lanes must hold no
    /// digests of their own yet (they come from a checkpoint).
    pub fn attach_earlier_digests(
        &mut self,
        source: Arc<dyn EarlierDigests>,
        counts: &BTreeMap<String, usize>,
    ) -> Result<(), String> {
        if counts
            .keys()
            .any(|id| !self.lanes.contains_key(id.as_str()))
        {
            return Err("digest counts name an unknown lane".into());
        }
        for (id, lane) in &mut self.lanes {
            if !lane.liveness_evidence_digests.is_empty() {
                return Err("lane already holds liveness digests".into());
            }
            let count = counts.get(id.as_str()).copied().unwrap_or(0);
            lane.earlier = EarlierLaneDigests::new(source.clone(), count);
        }
        Ok(())
    }

    /// Move every lane's own liveness digests into `sink` (between events
    /// of a streaming replay): membership and counts answer as before, the
    /// lanes' lists are empty. Refused for a state whose earlier digests
    /// come from another source (a checkpoint's).
    pub fn spill_liveness_digests(&mut self, sink: &Arc<CompactDigests>) -> Result<(), String> {
        let ours = Arc::as_ptr(sink) as *const ();
        for (id, lane) in &mut self.lanes {
            if let Some(source) = &lane.earlier.source
                && Arc::as_ptr(source) as *const () != ours
            {
                return Err(format!("lane {id} holds digests of another source"));
            }
            if lane.liveness_evidence_digests.is_empty() {
                continue;
            }
            let moved = std::mem::take(&mut lane.liveness_evidence_digests);
            lane.digest_index = DigestSet::default();
            let count = lane.earlier.count + moved.len();
            sink.add(id, moved);
            let source: Arc<dyn EarlierDigests> = sink.clone();
            lane.earlier = EarlierLaneDigests::new(source, count);
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
            let mut earlier = lists.remove(id.as_str()).unwrap_or_default();
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
                    .map(move |d| (id.to_string(), d.clone()))
            })
            .collect()
    }

    /// lane id -> how many liveness digests it has recorded in all.
    pub fn liveness_digest_counts(&self) -> BTreeMap<String, usize> {
        self.lanes
            .iter()
            .map(|(id, lane)| (id.to_string(), lane.liveness_digest_count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// lane id -> lane record, exactly the JSON the reference writes to
    /// `lanes/<id>.json`.
    pub fn lane_records(&self) -> BTreeMap<String, Value> {
        self.lanes
            .iter()
            .map(|(id, lane)| (id.to_string(), lane.to_json()))
            .collect()
    }
}

fn no_gate() -> super::approval::PolicyStatus {
    super::approval::PolicyStatus::Absent
}

fn strings(values: &[String]) -> Value {
    Value::Array(values.iter().cloned().map(Value::String).collect())
}

#[cfg(test)]
mod digest_bytes_tests {
    use super::digest_bytes;
    use proptest::prelude::*;

    /// What `hex::decode_to_slice` made of it before: the first 16 bytes
    /// of exactly 32 decoded ones.
    fn by_hex(text: &str) -> Option<[u8; 16]> {
        let mut full = [0u8; 32];
        hex::decode_to_slice(text, &mut full).ok()?;
        full[..16].try_into().ok()
    }

    proptest! {
        #[test]
        fn reads_what_hex_reads(text in "[0-9a-fA-F]{62,66}|[0-9a-gA-G]{64}|.{0,70}") {
            prop_assert_eq!(digest_bytes(&text), by_hex(&text));
        }

        #[test]
        fn reads_every_digest(bytes in proptest::array::uniform32(any::<u8>())) {
            let text = hex::encode(bytes);
            prop_assert_eq!(digest_bytes(&text), Some(bytes[..16].try_into().unwrap()));
            prop_assert_eq!(digest_bytes(&text.to_uppercase()), by_hex(&text));
        }
    }
}
