//! Loading a run's state at a cost that does not grow with the receipt
//! (architecture §3). The checkpoint is the replayed state at a known
//! sequence, checksum and byte length, plus the receipt's stamp (identity,
//! size, change times) taken right after our own append under the lock. It
//! is used only when the receipt still has exactly that stamp — nobody has
//! written, truncated, extended or replaced it since — and still holds the
//! checkpoint's line at its offset. Anything else (another writer such as
//! the Python tool, an edit, a copy) means a full verify and replay, which
//! also reports any damage precisely. The receipt stays the only truth.
//!
//! The liveness evidence digests (one per heartbeat) stay out of the
//! checkpoint: they live in the store's digest table, which the lanes ask
//! membership questions of (see `store::digests`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::FlowResult;
use super::ledger::OpenRun;
use super::rebuild::replay_run;
use crate::coordinator::{CoordinatorState, EarlierDigests};
use crate::receipt::canonical;
use crate::receipt::primitives::as_int;
use crate::receipt::verify::{ChainPosition, LineRules};
use crate::store::StoreError;
use crate::store::digests::DigestTable;
use crate::store::run::{ReceiptStamp, RunDir};

const SCHEMA_VERSION: u64 = 7;
/// The derived caches (`run.json`, `lanes/*.json`, never read as truth by
/// either tool) are rewritten after a mutation at most when the receipt has
/// grown by an eighth since they were last written, so their renames and
/// syncs are not part of a mutation's commit (contracts/receipt.md "One
/// commit"); they carry their own `last_sequence`, and `rebuild` refreshes
/// them on demand.
const CACHE_GROWTH_DIVISOR: u64 = 8;

/// `checkpoint.json` (our file; canonical JSON, authenticated by a `mac`
/// key over the rest).
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint {
    schema_version: u64,
    run_id: String,
    manifest_hash: String,
    /// SHA-256 of the canonical `_run` section of the manifest snapshot.
    run_metadata_digest: String,
    /// The manifest snapshot's bytes and the stamp of `manifest.json` they
    /// are: a mutation that finds the file under that stamp takes them
    /// from here instead of opening it (contracts/receipt.md "Checkpoint").
    #[serde(default)]
    manifest_snapshot: Option<String>,
    #[serde(default)]
    manifest_stamp: Option<Value>,
    sequence: u64,
    checksum: String,
    byte_length: u64,
    line_length: u64,
    /// The receipt's identity, size and change times after our append.
    receipt_stamp: Value,
    /// SHA-256 of the receipt's last bytes (`None`: unreadable; such a
    /// checkpoint is never believed).
    tail_sha256: Option<String>,
    /// The public state without the liveness digest lists, and its digest.
    state: Value,
    state_digest: String,
    /// What replay adds to the public state (gate, breaches).
    ours: Value,
    /// lane id -> how many liveness digests it recorded (in the table).
    digest_counts: BTreeMap<String, u64>,
    digest_entries: u64,
    digest_log_bytes: u64,
    /// The stamp of `checkpoint-digests.idx` (the table and its log) right
    /// after this command wrote it: a file written since (by anyone) is
    /// not used (contracts/receipt.md "Checkpoint").
    digest_stamps: Value,
    /// Where the derived caches are current; a value that cannot be read
    /// means "unknown" (all caches are rewritten).
    #[serde(default, deserialize_with = "lenient_number")]
    caches_sequence: Option<u64>,
    /// The boot this checkpoint was written in. It and the digest table
    /// are written without a sync: a power loss may keep one and lose the
    /// other, so a checkpoint from another boot is never used
    /// (contracts/receipt.md "One commit").
    boot_id: String,
}

fn lenient_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(number_value(&Value::deserialize(d)?))
}

/// Where a loaded state came from (tests and benchmarks look at it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPath {
    Checkpoint,
    FullReplay,
}

/// Where a loaded state came from, and what the next checkpoint builds on.
#[derive(Debug, Clone)]
pub struct LoadBasis {
    pub path: LoadPath,
    /// The digest table's entries and log length when loaded from a
    /// checkpoint.
    digests: Option<(u64, u64)>,
    /// The sequence at which the derived caches were last fully written.
    caches_sequence: Option<u64>,
    /// The digest table the state asks (checkpoint loads only).
    lookups: Option<Arc<TableDigests>>,
}

/// The coordinator's membership questions, answered by the store's table.
/// The coordinator's rules ask a yes/no question; a read error cannot be
/// an answer, so it is kept here (the answer given is "present", the
/// refusing one) and the mutation reports it before anything is decided
/// on it or written: [`LoadBasis::lookup_error`].
#[derive(Debug)]
struct TableDigests {
    table: DigestTable,
    failed: std::sync::Mutex<Option<StoreError>>,
    present: std::sync::atomic::AtomicBool,
    /// The answers read so far: a command that asks twice (decide, then
    /// the replay of what it decided) reads the table once. Nothing is
    /// added to this table while the command asks.
    answered: std::sync::Mutex<Vec<(String, String, bool)>>,
}

impl EarlierDigests for TableDigests {
    fn contains(&self, lane_id: &str, digest: &str) -> bool {
        if let Some(present) = self.answered.lock().ok().and_then(|answered| {
            answered
                .iter()
                .find(|(lane, d, _)| lane == lane_id && d == digest)
                .map(|(_, _, present)| *present)
        }) {
            return present;
        }
        match self.table.contains(lane_id, digest) {
            Ok(present) => {
                if present {
                    self.present
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                if let Ok(mut answered) = self.answered.lock() {
                    answered.push((lane_id.to_string(), digest.to_string(), present));
                }
                present
            }
            Err(error) => {
                if let Ok(mut failed) = self.failed.lock() {
                    failed.get_or_insert(error);
                }
                true
            }
        }
    }
}

/// The verified, replayed state of a Phase 2 run: from the checkpoint when
/// the receipt proves it current, otherwise by a full verify and replay.
pub fn load_state(
    run: &OpenRun,
    holding_lock: bool,
) -> FlowResult<(CoordinatorState, ChainPosition, LoadBasis)> {
    if let Some(loaded) = proven_checkpoint(run) {
        return Ok(loaded);
    }
    let (state, position) = replay_run(run, holding_lock)?;
    Ok((state, position, LoadBasis::full_replay()))
}

/// The checkpoint's state, only when the unchanged receipt proves it (for
/// read-only queries, which fall back to their own full verification).
pub fn proven_state(run: &OpenRun) -> Option<(CoordinatorState, ChainPosition)> {
    proven_checkpoint(run).map(|(state, position, _)| (state, position))
}

/// Record `state` at `position` for the next command (under the lock,
/// right after the append); `caches_sequence` is where the derived caches
/// will be current. Returns the digest log's length.
pub fn save_checkpoint(
    run: &OpenRun,
    basis: &LoadBasis,
    state: &CoordinatorState,
    position: &ChainPosition,
    caches_sequence: u64,
) -> FlowResult<u64> {
    let files = run.dir.digest_files();
    let own = state.own_liveness_digests();
    let (entries, log_bytes) = match basis.digests {
        Some((entries, log_bytes)) if own.is_empty() => (entries, log_bytes),
        Some((entries, log_bytes)) => {
            let table = files.open_table(entries, true).ok_or_else(|| {
                super::error::ErrorKind::Contract("checkpoint digest table changed".into())
            })?;
            let log_bytes = files.extend(table, log_bytes, &own)?;
            (entries + own.len() as u64, log_bytes)
        }
        None => (own.len() as u64, files.rewrite(&own)?),
    };
    let Some(stamp) = run.dir.receipt_stamp() else {
        return Ok(log_bytes);
    };
    let Some(digest_stamps) = files.stamps() else {
        return Ok(log_bytes);
    };
    // A checkpoint is only ever believed with its MAC: without a key
    // (an unsafe key file) there is no point in writing one.
    let Some(key) = crate::store::secret::ensure_key(&run.dir.root)? else {
        return Ok(log_bytes);
    };
    let public = state.public_json_with_digests(false);
    let (manifest_snapshot, manifest_stamp) = match &run.snapshot.stamp {
        Some(stamp) => (
            std::str::from_utf8(&run.snapshot.bytes)
                .ok()
                .map(str::to_string),
            Some(stamp.to_json()),
        ),
        None => (None, None),
    };
    let checkpoint = Checkpoint {
        schema_version: SCHEMA_VERSION,
        run_id: run.dir.run_id.to_string(),
        manifest_hash: run.manifest.contract.hash.clone(),
        run_metadata_digest: run_metadata_digest(run),
        manifest_snapshot,
        manifest_stamp,
        sequence: position.sequence,
        checksum: position.checksum.clone(),
        byte_length: position.byte_length,
        line_length: position.last_line_length,
        receipt_stamp: stamp.to_json(),
        tail_sha256: run.dir.receipt_tail_digest(stamp.size),
        state_digest: canonical::digest(&public),
        state: public,
        ours: state.ours_json(),
        digest_counts: state
            .liveness_digest_counts()
            .into_iter()
            .map(|(lane, n)| (lane, n as u64))
            .collect(),
        digest_entries: entries,
        digest_log_bytes: log_bytes,
        digest_stamps,
        caches_sequence: Some(caches_sequence),
        boot_id: crate::store::lock::boot_id().to_string(),
    };
    let mut value = serde_json::to_value(&checkpoint)
        .map_err(|e| super::error::ErrorKind::Contract(e.to_string()))?;
    value["mac"] = json!(crate::store::secret::mac_hex(&key, &value));
    run.dir.write_checkpoint(&value)?;
    Ok(log_bytes)
}

/// When the derived caches are rewritten after a mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheRefresh {
    /// Only the lanes this event changed (the caches were current before).
    ChangedLanes,
    /// Every lane (earlier refreshes were skipped, or nothing is known).
    AllLanes,
    /// Not now (see [`CACHE_GROWTH_DIVISOR`]).
    Skip,
}

impl LoadBasis {
    /// The first read error of the digest table the state asked, if any:
    /// a decision made on it must not stand.
    pub fn lookup_error(&self) -> Option<StoreError> {
        self.lookups
            .as_ref()
            .and_then(|l| l.failed.lock().ok().and_then(|f| f.clone()))
    }

    /// Whether the digest table answered "present" to a question of the
    /// decision: a refusal resting on it is confirmed on a full replay of
    /// the receipt before it is given (the table is a cache; a forged one
    /// must not be able to refuse what the receipt allows).
    pub fn table_answered_present(&self) -> bool {
        self.lookups
            .as_ref()
            .is_some_and(|l| l.present.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// A state replayed from genesis (every digest is in the state).
    pub fn full_replay() -> LoadBasis {
        LoadBasis {
            path: LoadPath::FullReplay,
            digests: None,
            caches_sequence: None,
            lookups: None,
        }
    }

    /// The cache refresh after the event at `sequence`.
    pub fn cache_refresh(&self, sequence: u64) -> CacheRefresh {
        let Some(last) = self.caches_sequence else {
            return CacheRefresh::AllLanes;
        };
        if sequence < last.saturating_add((last / CACHE_GROWTH_DIVISOR).max(1)) {
            CacheRefresh::Skip
        } else if last.checked_add(1) == Some(sequence) {
            CacheRefresh::ChangedLanes
        } else {
            CacheRefresh::AllLanes
        }
    }

    /// The sequence the caches were last written at (0 when unknown).
    pub fn caches_sequence(&self) -> u64 {
        self.caches_sequence.unwrap_or(0)
    }
}

/// Put the full digest lists back into `state` (for writing the caches);
/// `log_bytes` is what [`save_checkpoint`] returned.
pub fn restore_digest_lists(
    run: &OpenRun,
    basis: &LoadBasis,
    log_bytes: u64,
    state: &mut CoordinatorState,
) -> FlowResult<()> {
    if basis.digests.is_none() {
        return Ok(());
    }
    // The lanes' own digests are already in the log: take the earlier ones
    // (the log minus what the lanes hold) and prepend them.
    let mut lists = run.dir.digest_files().read_lists(log_bytes)?;
    for (lane, own) in state
        .lanes()
        .iter()
        .map(|(id, l)| (id.to_string(), l.liveness_evidence_digests.len()))
    {
        if let Some(list) = lists.get_mut(&lane) {
            let keep = list.len().saturating_sub(own);
            list.truncate(keep);
        }
    }
    lists.retain(|_, list| !list.is_empty());
    state
        .prepend_earlier_digests(lists)
        .map_err(super::error::FlowError::contract)
}

/// The manifest snapshot's copy in the checkpoint, read by a mutation
/// before its lock, when the checkpoint is one this tool wrote for this run
/// in this boot and `manifest.json` has exactly the stamp the copy was
/// taken under (one `lstat`; any write, rename over or mode change moves
/// it). The checkpoint's descriptor is kept for the lock.
pub fn manifest_copy(dir: &RunDir) -> Option<(Vec<u8>, ReceiptStamp)> {
    let checkpoint = authenticated(dir, dir.read_checkpoint_before_lock()?)?;
    let stamp = ReceiptStamp::from_json(checkpoint.manifest_stamp.as_ref()?)?;
    let copy = checkpoint.manifest_snapshot?;
    if stamp.size != copy.len() as u64 || dir.manifest_stamp().as_ref() != Some(&stamp) {
        return None;
    }
    Some((copy.into_bytes(), stamp))
}

/// A checkpoint this tool wrote for this run in this boot: its MAC under
/// `derived.key` verifies (an edited checkpoint, or one written under
/// another key, is never believed), its schema is this one.
fn authenticated(dir: &RunDir, mut checkpoint: Value) -> Option<Checkpoint> {
    let key = crate::store::secret::read_key(&dir.root)?;
    let claimed = checkpoint.as_object_mut()?.remove("mac")?;
    if !crate::store::secret::mac_matches(&key, &checkpoint, claimed.as_str()?) {
        return None;
    }
    let checkpoint = Checkpoint::deserialize(&checkpoint).ok()?;
    (checkpoint.schema_version == SCHEMA_VERSION
        && !checkpoint.boot_id.is_empty()
        && checkpoint.boot_id == crate::store::lock::boot_id()
        && checkpoint.run_id == dir.run_id)
        .then_some(checkpoint)
}

/// The checkpoint's state and chain position, if the receipt proves it.
fn proven_checkpoint(run: &OpenRun) -> Option<(CoordinatorState, ChainPosition, LoadBasis)> {
    let checkpoint = authenticated(&run.dir, run.dir.read_checkpoint()?)?;
    if checkpoint.manifest_hash != run.manifest.contract.hash {
        return None;
    }
    // A run opened from the copy stands on this checkpoint's copy: one
    // rewritten since (between the read before the lock and now) with
    // another is not this run's.
    if run.snapshot.copied
        && checkpoint.manifest_snapshot.as_deref().map(str::as_bytes)
            != Some(&run.snapshot.bytes[..])
    {
        return None;
    }
    // The snapshot's `_run` (owner, approved components) seeds the replay.
    if checkpoint.run_metadata_digest != run_metadata_digest(run) {
        return None;
    }
    let Checkpoint {
        sequence,
        byte_length,
        line_length,
        checksum,
        ..
    } = checkpoint;
    // Nobody has touched the receipt since the checkpoint was taken.
    let stamp = ReceiptStamp::from_json(&checkpoint.receipt_stamp)?;
    if run.dir.receipt_stamp().as_ref() != Some(&stamp) || stamp.size != byte_length {
        return None;
    }
    // The stamp alone cannot see a same-size edit within a coarse
    // timestamp's tick; the tail's fingerprint can.
    let tail = checkpoint.tail_sha256.as_deref()?;
    if run.dir.receipt_tail_digest(byte_length).as_deref() != Some(tail) {
        return None;
    }
    let public = &checkpoint.state;
    if checkpoint.state_digest != canonical::digest(public) {
        return None;
    }
    let mut state = CoordinatorState::from_public_json(public).ok()?;
    state.restore_ours(&checkpoint.ours).ok()?;
    if sequence == 0 || state.last_sequence() != sequence || state.last_checksum() != checksum {
        return None;
    }
    // And the receipt holds exactly this canonical line at this offset.
    let line = run.dir.read_receipt_range(byte_length, line_length)?;
    let arena = bumpalo::Bump::new();
    let facts = LineRules::new(&run.manifest, &run.dir.run_id, false).examine(&line, &arena);
    if !facts.is_canonical_event(sequence, &checksum) {
        return None;
    }
    let entries = checkpoint.digest_entries;
    let log_bytes = checkpoint.digest_log_bytes;
    let mut counts = BTreeMap::new();
    for (lane, n) in &checkpoint.digest_counts {
        counts.insert(lane.clone(), usize::try_from(*n).ok()?);
    }
    let total = counts
        .values()
        .try_fold(0u64, |sum, n| sum.checked_add(*n as u64));
    if total != Some(entries) {
        return None;
    }
    // The table (and its log) is exactly as this checkpoint's writer left
    // it (its own MAC would cost a pass over it per heartbeat; its stamp
    // cannot be set back).
    let files = run.dir.digest_files();
    if files.stamps().as_ref() != Some(&checkpoint.digest_stamps) {
        return None;
    }
    let table = files.open_table(entries, false)?;
    let lookups = Arc::new(TableDigests {
        table,
        failed: std::sync::Mutex::new(None),
        present: std::sync::atomic::AtomicBool::new(false),
        answered: std::sync::Mutex::new(Vec::new()),
    });
    state
        .attach_earlier_digests(Arc::clone(&lookups) as Arc<dyn EarlierDigests>, &counts)
        .ok()?;
    let position = ChainPosition {
        sequence,
        checksum,
        byte_length,
        owner_fingerprint: state.owner_fingerprint().map(str::to_string),
        owner_epoch: state.owner_epoch(),
        last_line_length: line_length,
    };
    let basis = LoadBasis {
        path: LoadPath::Checkpoint,
        digests: Some((entries, log_bytes)),
        // The caches cannot be newer than the checkpoint; a value that says
        // so was edited and means "unknown" (all caches are rewritten).
        caches_sequence: checkpoint.caches_sequence.filter(|c| *c <= sequence),
        lookups: Some(lookups),
    };
    Some((state, position, basis))
}

/// SHA-256 of the canonical `_run` section of the run's manifest snapshot.
fn run_metadata_digest(run: &OpenRun) -> String {
    let section = run.manifest.run.clone().map_or(Value::Null, Value::Object);
    canonical::digest(&section)
}

fn number_value(value: &Value) -> Option<u64> {
    as_int(value).and_then(|n| u64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read error of the digest table answers "present" to the rules
    /// (which only ask yes or no) and is kept: `lookup_error` hands it to
    /// the mutation, which reports it instead of its decision.
    #[test]
    fn a_table_read_error_is_kept_for_the_mutation_to_report() {
        let (_dir, run) = crate::store::test_dirs::run_dir();
        let files = crate::store::digests::DigestFiles::of_run(&run);
        let digest = format!("{:064x}", 7);
        files
            .rewrite(&[("lane-a".to_string(), digest.clone())])
            .unwrap();
        let table = files.open_table(1, false).unwrap();
        let lookups = Arc::new(TableDigests {
            table,
            failed: std::sync::Mutex::new(None),
            present: std::sync::atomic::AtomicBool::new(false),
            answered: std::sync::Mutex::new(Vec::new()),
        });
        let basis = LoadBasis {
            path: LoadPath::Checkpoint,
            digests: Some((1, 0)),
            caches_sequence: None,
            lookups: Some(Arc::clone(&lookups)),
        };
        assert!(!lookups.contains("lane-a", &format!("{:064x}", 8)));
        assert_eq!(basis.lookup_error(), None);
        std::fs::OpenOptions::new()
            .write(true)
            .open(run.dir.join("checkpoint-digests.idx"))
            .unwrap()
            .set_len(32)
            .unwrap();
        assert!(lookups.contains("lane-a", &digest));
        let error = basis.lookup_error().expect("the read error is kept");
        assert_eq!(error.io_kind(), Some(std::io::ErrorKind::UnexpectedEof));
    }
}
