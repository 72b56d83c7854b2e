//! Opening a run and verifying its receipt: the shared read path of every
//! command. Verification streams; the caller sees each verified event.

use crate::coordinator::decide::InputRefusal;
use crate::store::root::StateRoot;
use std::sync::Arc;

use super::error::{ErrorKind, FlowError, FlowResult};
use crate::coordinator::RunOrigin;
use crate::coordinator::raced::Raced;
use crate::receipt::json_ref::ObjectRef;
use crate::receipt::manifest::{RunManifest, load_run_manifest};
use crate::receipt::primitives::RunId;
use crate::receipt::rules::Family;
use crate::receipt::verify::{
    ChainPosition, ChainVerifier, INCOMPLETE, NO_EVENTS, ReceiptDamage, StreamStop,
};
use crate::store::run::{AckHead, ReceiptStamp, RunDir};

/// Receipt stretches at least this long are verified on worker threads.
const PARALLEL_FROM_BYTES: u64 = 1 << 20;

/// An opened run: its directory and validated manifest snapshot.
#[derive(Debug, Clone)]
pub struct OpenRun {
    pub dir: RunDir,
    pub manifest: RunManifest,
    /// The bytes `manifest` was parsed from, and where they came from.
    pub snapshot: ManifestSnapshot,
    /// Whether verification checks the receipt against our acknowledged
    /// head. Only `receipt-diagnose` turns it off, for a head record it
    /// reports as a finding instead of failing on it.
    pub trust_head: bool,
    /// What the last intact verification of this run saw: the sequence it
    /// started after and its first non-canonical line. The head record may
    /// only move over lines such a pass saw canonical ([`head_may_advance`]).
    pub last_pass: std::cell::Cell<Option<(u64, Option<u64>)>>,
}

impl OpenRun {
    /// The repo root the run's manifest snapshot pins. Write scopes and
    /// changed paths are resolved against it before the lock, so it is
    /// read from `manifest.json` itself when this run was opened from the
    /// checkpoint's copy: no path a command accepts or refuses rests on a
    /// cached fact.
    pub fn repo_root(&self) -> FlowResult<Option<String>> {
        let pinned = |manifest: &RunManifest| {
            manifest
                .run
                .as_ref()
                .and_then(|r| r.get("repo_root"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        if !self.snapshot.copied {
            return Ok(pinned(&self.manifest));
        }
        Ok(pinned(&load_run_manifest(&self.dir.read_manifest()?)?))
    }
}

/// The manifest snapshot's bytes as a command holds them.
#[derive(Debug, Clone)]
pub struct ManifestSnapshot {
    pub bytes: Arc<[u8]>,
    /// The stamp of the file they are, when it may stand for them
    /// ([`RunDir::read_manifest_stamped`]).
    pub stamp: Option<ReceiptStamp>,
    /// Taken from the checkpoint's copy behind an equal stamp of
    /// `manifest.json`, not read from the file: a full replay reads the
    /// file and holds the copy to it ([`OpenRun::confirm_manifest`]).
    pub copied: bool,
}

/// Check the run id, then load and validate the manifest snapshot.
pub fn open_run(root: &StateRoot, run_id: &str) -> FlowResult<OpenRun> {
    read_run(RunDir::new(root, &checked_run_id(run_id)?))
}

/// [`open_run`] for a mutation: the manifest snapshot from the checkpoint's
/// copy when the checkpoint holds one under the file's current stamp (the
/// file is then not opened; contracts/receipt.md "Checkpoint"), else from
/// the file. The checkpoint's descriptor is kept for the lock.
pub fn open_run_for_mutation(root: &StateRoot, run_id: &str) -> FlowResult<OpenRun> {
    let dir = RunDir::new(root, &checked_run_id(run_id)?);
    if let Some((bytes, stamp)) = super::checkpoint::manifest_copy(&dir)
        && let Ok(manifest) = load_run_manifest(&bytes)
    {
        return Ok(OpenRun {
            dir,
            manifest,
            snapshot: ManifestSnapshot {
                bytes: bytes.into(),
                stamp: Some(stamp),
                copied: true,
            },
            trust_head: true,
            last_pass: std::cell::Cell::new(None),
        });
    }
    read_run(dir)
}

fn checked_run_id(run_id: &str) -> FlowResult<RunId> {
    RunId::parse(run_id).ok_or_else(|| {
        FlowError::from(InputRefusal::Identifier {
            field: "run id".into(),
        })
    })
}

fn read_run(dir: RunDir) -> FlowResult<OpenRun> {
    let (bytes, stamp) = dir.read_manifest_stamped()?;
    let manifest = load_run_manifest(&bytes)?;
    Ok(OpenRun {
        dir,
        manifest,
        snapshot: ManifestSnapshot {
            bytes: bytes.into(),
            stamp,
            copied: false,
        },
        trust_head: true,
        last_pass: std::cell::Cell::new(None),
    })
}

impl OpenRun {
    /// A full replay stands on `manifest.json` itself: when this run was
    /// opened from the checkpoint's copy, the file is read and must hold
    /// the same bytes. A copy that differs was written by someone else
    /// than this tool (the stamp check lets no edit of the file through):
    /// under the lock the checkpoint is removed, so the next command reads
    /// the file, and this one is refused before anything is decided.
    pub fn confirm_manifest(&self, holding_lock: bool) -> FlowResult<()> {
        if !self.snapshot.copied {
            return Ok(());
        }
        let bytes = self.dir.read_manifest()?;
        if *bytes == *self.snapshot.bytes {
            return Ok(());
        }
        if holding_lock {
            self.dir.discard_checkpoint()?;
        }
        Err(FlowError::from(Raced::CheckpointManifest {
            removed: holding_lock,
        }))
    }

    /// Coordinator commands need a Phase 2 (1.1) run.
    pub fn require_phase2(&self) -> FlowResult<()> {
        self.phase2_or("the selected run manifest does not support coordinator commands")
    }

    /// A Phase 2 (1.1) run, or exit 7 saying `why` a Phase 1 run cannot be
    /// used.
    pub fn phase2_or(&self, why: &str) -> FlowResult<()> {
        match self.manifest.contract.family {
            Family::V1_1 => Ok(()),
            Family::V1_0 => Err(ErrorKind::Unsupported(why.into()).into()),
        }
    }

    /// The initial owner the snapshot's `_run` names, which a replay
    /// starts from: without one nothing in the run can be trusted.
    pub fn origin(&self) -> FlowResult<RunOrigin> {
        RunOrigin::of_snapshot(self.manifest.run.as_ref())
            .map_err(|_| ErrorKind::ReceiptCorrupt("run owner metadata is invalid".into()).into())
    }
}

/// The outcome of a full verification.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Every line verified; the head is trustworthy.
    Intact(ChainPosition),
    /// The receipt is damaged at a line.
    Damaged(ReceiptDamage),
    /// A verified event was refused by the caller's consumer (e.g. replay):
    /// `sequence` is that event's, `trusted_checksum` its predecessor's.
    Rejected {
        sequence: u64,
        message: String,
        trusted_checksum: String,
    },
}

impl Verdict {
    /// The head of an intact receipt, for a command that needs all of it:
    /// damage is the error [`damage_error`] gives, and an event the
    /// consumer refused makes the receipt corrupt for this run.
    pub fn intact(self, run: &OpenRun, holding_lock: bool) -> FlowResult<ChainPosition> {
        match self {
            Verdict::Intact(position) => Ok(position),
            Verdict::Damaged(damage) => Err(damage_error(run, &damage, holding_lock)),
            Verdict::Rejected { message, .. } => Err(ErrorKind::ReceiptCorrupt(message).into()),
        }
    }
}

/// What to do about a head record that names no head (DEVIATIONS 104).
pub const HEAD_RECORD_HINT: &str = "the head record receipt-head.json is ours and derived, and this one names no head: bluetape-flow receipt-diagnose --run-id {run_id} judges the receipt without it, and when the receipt verifies, bluetape-flow rebuild --run-id {run_id} rewrites it";

/// Stream-verify the whole receipt, handing each verified event to
/// `consume`. Also checks the acknowledged head (decisions.md 16): a receipt
/// that ends before it, or disagrees with it, is damaged.
pub fn verify_receipt(
    run: &OpenRun,
    consume: impl FnMut(&ObjectRef<'_>) -> Result<(), String>,
) -> FlowResult<Verdict> {
    verify_from(run, ChainPosition::genesis(&run.manifest), consume)
}

/// Verify the whole receipt without handing the events on (`verify`):
/// long receipts are parsed on worker threads.
pub fn verify_chain(run: &OpenRun) -> FlowResult<Verdict> {
    verify_with(run, ChainPosition::genesis(&run.manifest), None)
}

/// Verify the receipt from `start` (genesis, or a proven checkpoint) to its
/// end; only the lines after `start.byte_length` are read.
pub fn verify_from(
    run: &OpenRun,
    start: ChainPosition,
    mut consume: impl FnMut(&ObjectRef<'_>) -> Result<(), String>,
) -> FlowResult<Verdict> {
    verify_with(run, start, Some(&mut consume))
}

type Consumer<'c> = &'c mut dyn FnMut(&ObjectRef<'_>) -> Result<(), String>;

fn verify_with(
    run: &OpenRun,
    start: ChainPosition,
    mut consume: Option<Consumer<'_>>,
) -> FlowResult<Verdict> {
    let head = if run.trust_head {
        run.dir.read_head().map_err(|e| match e {
            crate::store::run::RunReadError::Corrupt(m) => {
                ErrorKind::ReceiptCorrupt(m).hinted(HEAD_RECORD_HINT)
            }
            other => other.into(),
        })?
    } else {
        None
    };
    let start_byte = start.byte_length;
    let remaining = run
        .dir
        .receipt_stamp()
        .map_or(0, |stamp| stamp.size.saturating_sub(start_byte));
    let start_sequence = start.sequence;
    let mut reader = match run.dir.open_receipt_at(start.byte_length) {
        // A long read shows progress where the CLI asked for it.
        Ok(reader) => crate::store::progress::Tracked::new(reader, remaining),
        Err(_) => {
            return Ok(Verdict::Damaged(ReceiptDamage::new(
                1,
                0,
                "",
                "receipt is missing or unsafe",
            )));
        }
    };
    // A head at or below the start was proven with the start itself.
    let mut head_seen: Option<(String, u64)> = match &head {
        Some(h) if h.sequence < start.sequence => Some((h.checksum.to_string(), h.byte_length)),
        Some(h) if h.sequence == start.sequence => {
            Some((start.checksum.clone(), start.byte_length))
        }
        _ => None,
    };
    let mut trusted_checksum = start.checksum.clone();
    let mut verifier = ChainVerifier::new(&run.manifest, &run.dir.run_id, start);
    if let Some(head) = &head {
        verifier.require_canonical_until(head.canonical_through);
    }
    let mut after_line = |position: &ChainPosition| {
        if head
            .as_ref()
            .is_some_and(|h| h.sequence == position.sequence)
        {
            head_seen = Some((position.checksum.clone(), position.byte_length));
        }
        trusted_checksum = position.checksum.clone();
    };
    // Long stretches are parsed on worker threads (same checks, same
    // verdicts, the events handed on in order); short ones are not worth
    // the threads.
    let remaining = run
        .dir
        .receipt_stamp()
        .map_or(0, |stamp| stamp.size.saturating_sub(start_byte));
    let outcome = match consume.as_mut() {
        Some(consume) if remaining >= PARALLEL_FROM_BYTES => verifier
            .verify_stream_parallel_events(&mut reader, |event, position| {
                consume(event)?;
                after_line(position);
                Ok(())
            }),
        Some(consume) => verifier.verify_stream(&mut reader, |event, position| {
            consume(event)?;
            after_line(position);
            Ok(())
        }),
        None => {
            // Long stretches are parsed on worker threads (same checks,
            // same verdicts); short ones are not worth the threads.
            if remaining >= PARALLEL_FROM_BYTES {
                verifier.verify_stream_parallel(&mut reader, |position| {
                    after_line(position);
                    Ok(())
                })
            } else {
                verifier.verify_stream(&mut reader, |_, position| {
                    after_line(position);
                    Ok(())
                })
            }
        }
    }
    .map_err(|e| ErrorKind::Contract(format!("receipt could not be read: {e}")))?;
    let position = verifier.position().clone();
    match outcome {
        Err(StreamStop::Damage(damage)) => return Ok(Verdict::Damaged(damage)),
        Err(StreamStop::Rejected(message)) => {
            return Ok(Verdict::Rejected {
                sequence: position.sequence,
                message,
                trusted_checksum,
            });
        }
        Ok(()) => {}
    }
    if position.sequence == 0 {
        return Ok(Verdict::Damaged(ReceiptDamage::new(1, 0, "", NO_EVENTS)));
    }
    if let Some(head) = head {
        let damage = |at: u64, trusted: &ChainPosition, reason: String| {
            ReceiptDamage::new(at, trusted.sequence, &trusted.checksum, &reason)
        };
        if position.sequence < head.sequence {
            return Ok(Verdict::Damaged(damage(
                position.sequence + 1,
                &position,
                format!(
                    "receipt ends before its acknowledged head (sequence {})",
                    head.sequence
                ),
            )));
        }
        if head_seen != Some((head.checksum.to_string(), head.byte_length)) {
            // The line at the acknowledged sequence was replaced: trust only
            // what precedes it.
            let mut trusted = ChainPosition::genesis(&run.manifest);
            let mut reread = run.dir.open_receipt()?;
            let mut prefix = ChainVerifier::new(&run.manifest, &run.dir.run_id, trusted.clone());
            let _ = prefix.verify_stream(&mut reread, |_, p| {
                if p.sequence < head.sequence {
                    trusted = p.clone();
                    Ok(())
                } else {
                    Err(String::new())
                }
            });
            return Ok(Verdict::Damaged(damage(
                head.sequence,
                &trusted,
                "receipt disagrees with its acknowledged head".into(),
            )));
        }
    }
    run.last_pass
        .set(Some((start_sequence, verifier.first_non_canonical())));
    Ok(Verdict::Intact(position))
}

/// How far the head record written after this pass may pin lines as
/// byte-canonical (trust-model §2 promise 10, DEVIATIONS 105), for a new
/// head at `new_sequence` over the current head `head`. A line another
/// tool wrote in other bytes (spacing, escapes) verifies under the
/// reference's rule, but lines up to `canonical_through` must be
/// canonical, so a head pinning it would make our own `verify` call it
/// damaged: the pin stops below the first such line the last pass saw,
/// and once stopped stays. A pass that started above the head (from a
/// checkpoint the head lags behind, or with no head at all) did not see
/// the lines between: the pin stays where the head had it.
pub fn canonical_through(run: &OpenRun, head: Option<&AckHead>, new_sequence: u64) -> u64 {
    let pinned = head.map_or(0, |h| h.canonical_through);
    if head.is_some_and(|h| h.canonical_through < h.sequence) {
        return pinned;
    }
    match run.last_pass.get() {
        Some((start, first_non_canonical)) if start <= pinned => {
            first_non_canonical.map_or(new_sequence, |k| k.saturating_sub(1))
        }
        _ => pinned,
    }
}

/// The error a damaged receipt gives a command. A torn last line while a
/// live writer holds the lock is an append in progress, not damage
/// (decisions.md 13). A caller that holds the lock itself sees real damage.
pub fn damage_error(run: &OpenRun, damage: &ReceiptDamage, holding_lock: bool) -> FlowError {
    // A reader that saw the writer's line half-written may only look at
    // the lock after the writer finished and released it: a receipt that
    // now ends with a complete line was an append in progress too.
    if !holding_lock
        && damage.reason == INCOMPLETE
        && (run.dir.receipt_lock().status() == "locked_alive" || run.dir.receipt_ends_with_lf())
    {
        return FlowError::from(Raced::AppendInProgress);
    }
    ErrorKind::ReceiptDamaged(damage.clone()).into()
}
