//! Commands: the guarded paths between the CLI and the store. Each returns
//! its typed answer (`#[derive(Serialize)]`, architecture.md §3a); the
//! surface turns it into the envelope's keys in one place
//! (`surface::envelope::data`), and its tables and HTML render the same
//! answer.

pub mod approval;
pub mod attest;
pub mod bundle;
pub mod checkpoint;
pub mod completion;
pub mod doctor;
pub mod error;
pub mod init;
pub mod inspect;
pub mod lanes;
pub mod ledger;
pub mod lifecycle;
pub mod liveness;
pub mod mutate;
pub mod otel;
pub mod proof;
pub mod publish;
pub mod rebuild;
pub mod recovery;
pub mod replacement;
pub mod reports;
pub mod resume;
pub mod topology;
pub mod transparency;
pub mod views;

#[cfg(test)]
mod reliability_faults;
#[cfg(test)]
mod sequence_properties;

use crate::coordinator::OnRefusal;
use crate::coordinator::breach::Breach;
use crate::store::root::StateRoot;
use serde::Serialize;
use std::path::Path;

use crate::store;

pub use error::{ErrorKind, FlowError, FlowResult};
use ledger::{open_run, verify_chain};

/// What `verify` answers: the verified head and, for a Phase 2 run, the
/// breaches its replay found.
#[derive(Debug, Serialize)]
pub struct Verification {
    pub run_id: String,
    /// The last verified sequence.
    pub sequence: u64,
    /// The number of verified events (the reference's key; = `sequence`).
    pub event_count: u64,
    /// The checksum of the last verified event.
    pub checksum: String,
    /// Present only when some stand (contracts/rules.md); with keys, only
    /// the signed prefix's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<Breach>,
    /// The signed-head checks, when there is a head to speak of or keys
    /// were given.
    #[serde(flatten)]
    pub heads: Option<transparency::HeadsChecked>,
    /// With keys: how far the signatures reach.
    #[serde(flatten)]
    pub signed: Option<SignedReach>,
}

/// With keys (trust-model §2 promise 6): how far the signatures reach, and
/// the events after it judged apart.
#[derive(Debug, Serialize)]
pub struct SignedReach {
    /// The largest size a verified signed head covers.
    pub signed_through: u64,
    /// The events after `signed_through` (null when there are none).
    pub unsigned_tail: Option<UnsignedTail>,
}

/// The events after a signed prefix (`verify --key`, `bundle-verify
/// --key`): nothing in them is covered by a signature.
#[derive(Debug, Serialize)]
pub struct UnsignedSpan {
    /// Always false.
    pub signed: bool,
    pub from_sequence: u64,
    pub to_sequence: u64,
    pub events: u64,
}

impl UnsignedSpan {
    /// The events after `through` of a receipt of `total` events.
    pub fn after(through: u64, total: u64) -> UnsignedSpan {
        UnsignedSpan {
            signed: false,
            from_sequence: through + 1,
            to_sequence: total,
            events: total - through,
        }
    }
}

/// The events after the signed prefix of `verify --key`.
#[derive(Debug, Serialize)]
pub struct UnsignedTail {
    #[serde(flatten)]
    pub span: UnsignedSpan,
    /// The breaches among these events (empty when none).
    pub breaches: Vec<Breach>,
}

/// `verify`: stream-verify the whole receipt (read-only, no lock).
pub fn verify(root: &StateRoot, run_id: &str) -> FlowResult<Verification> {
    verify_signed(root, run_id, &[], None)
}

/// `verify` with its signed-head checks (contracts/transparency.md): every
/// stored head, signatures with `keys`, and a `head` file kept elsewhere. The
/// output gains keys only when there is a head to speak of or keys were given.
pub fn verify_signed(
    root: &StateRoot,
    run_id: &str,
    keys: &[std::path::PathBuf],
    head: Option<&Path>,
) -> FlowResult<Verification> {
    let keys = if keys.is_empty() {
        None
    } else {
        Some(transparency::load_verifier_keys(root, keys)?)
    };
    let external = head
        .map(|path| {
            store::heads::read_small(&root.at(path), None)
                .map_err(|e| FlowError::from(e.refused("head file")))
        })
        .transpose()?;
    let run = open_run(root, run_id)?;
    // Phase 2 runs also report the breaches replay finds (contracts/rules.md).
    let (position, state) = if run.manifest.contract.family == crate::receipt::rules::Family::V1_1 {
        verify_replayed(&run)?
    } else {
        (verify_chain(&run)?.intact(&run, false)?, None)
    };
    let heads = transparency::verify_heads(&run, &position, keys.as_ref(), external.as_deref())?;
    let signed_through = heads
        .as_ref()
        .filter(|_| keys.is_some())
        .map(|h| h.heads_newest_size);
    let total = position.sequence;
    let breaches = state
        .as_ref()
        .map(|s| s.breaches().to_vec())
        .unwrap_or_default();
    let mut answer = Verification {
        run_id: run_id.to_string(),
        sequence: position.sequence,
        event_count: position.sequence,
        checksum: position.checksum,
        breaches,
        heads,
        signed: None,
    };
    // With keys (trust-model §2 promise 6): how far the signatures reach,
    // and the events after it judged apart (their breaches too).
    if let Some(through) = signed_through {
        let (signed, later): (Vec<_>, Vec<_>) = std::mem::take(&mut answer.breaches)
            .into_iter()
            .partition(|b| b.sequence <= through);
        answer.breaches = signed;
        answer.signed = Some(SignedReach {
            signed_through: through,
            unsigned_tail: (total > through).then(|| UnsignedTail {
                span: UnsignedSpan::after(through, total),
                breaches: later,
            }),
        });
    }
    Ok(answer)
}

/// The verified head and the replayed state of a Phase 2 run.
fn verify_replayed(
    run: &ledger::OpenRun,
) -> FlowResult<(
    crate::receipt::verify::ChainPosition,
    Option<crate::coordinator::CoordinatorState>,
)> {
    // Every verdict is what a full replay of the receipt says: a checkpoint
    // is never consulted here, however well it is authenticated (a holder
    // of `derived.key` can write any checkpoint; contracts/receipt.md
    // "Checkpoint"). The replay streams (long receipts parsed on two more
    // threads) and its liveness digests are kept compactly.
    let origin = run.origin().ok();
    let policy = rebuild::replay_policy(run);
    let mut state = origin
        .as_ref()
        .map(crate::coordinator::CoordinatorState::new);
    let compact = std::sync::Arc::new(crate::coordinator::state::CompactDigests::default());
    let mut applied = 0u64;
    let verdict = ledger::verify_receipt(run, |event| {
        if let Some(replaying) = state.as_mut() {
            if replaying
                .apply_ref(event, &policy, OnRefusal::Spoil)
                .is_err()
            {
                state = None;
            } else {
                applied += 1;
                if applied.is_multiple_of(256)
                    && replaying.spill_liveness_digests(&compact).is_err()
                {
                    state = None;
                }
            }
        }
        Ok(())
    })?;
    Ok((verdict.intact(run, false)?, state))
}
