//! Commands: the guarded paths between the CLI and the store. Each returns
//! the command's own output keys; the CLI adds the envelope.

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

use crate::store::root::StateRoot;
use serde_json::{Map, Value};
use std::path::Path;

use crate::store;

pub use error::{FlowError, FlowResult};
use ledger::{Verdict, damage_error, open_run, verify_chain};

/// `verify`: stream-verify the whole receipt (read-only, no lock).
pub fn verify(root: &StateRoot, run_id: &str) -> FlowResult<Map<String, Value>> {
    verify_signed(root, run_id, &[], None)
}

/// `verify` with its signed-head checks (issue 19): every stored head,
/// signatures with `keys`, and a `head` file kept elsewhere. The output
/// gains keys only when there is a head to speak of or keys were given.
pub fn verify_signed(
    root: &StateRoot,
    run_id: &str,
    keys: &[std::path::PathBuf],
    head: Option<&Path>,
) -> FlowResult<Map<String, Value>> {
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
    // Phase 2 runs also report the breaches replay finds (issue 13).
    let (position, state) = if run.manifest.contract.family == crate::receipt::rules::Family::V1_1 {
        verify_replayed(&run)?
    } else {
        match verify_chain(&run)? {
            Verdict::Intact(position) => (position, None),
            Verdict::Damaged(damage) => return Err(damage_error(&run, &damage, false)),
            Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
        }
    };
    let heads = transparency::verify_heads(&run, &position, keys.as_ref(), external.as_deref())?;
    let signed_through = heads
        .as_ref()
        .filter(|_| keys.is_some())
        .and_then(|h| h.get("heads_newest_size"))
        .and_then(Value::as_u64);
    let mut out = heads.unwrap_or_default();
    let total = position.sequence;
    out.extend(verify_output(run_id, position, state.as_ref()));
    // With keys (trust-model §2 promise 6): how far the signatures reach,
    // and the events after it judged apart (their breaches too).
    if let Some(through) = signed_through {
        out.insert("signed_through".into(), Value::from(through));
        let breaches = state.as_ref().map(|s| s.breaches()).unwrap_or_default();
        let (signed, later): (Vec<_>, Vec<_>) = breaches
            .iter()
            .cloned()
            .partition(|b| b.sequence <= through);
        out.remove("breaches");
        if !signed.is_empty() {
            out.insert(
                "breaches".into(),
                crate::coordinator::breach::breaches_value(&signed),
            );
        }
        let tail = (total > through).then(|| {
            serde_json::json!({
                "signed": false,
                "from_sequence": through + 1,
                "to_sequence": total,
                "events": total - through,
                "breaches": crate::coordinator::breach::breaches_value(&later),
            })
        });
        out.insert("unsigned_tail".into(), tail.unwrap_or(Value::Null));
    }
    Ok(out)
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
    let origin = crate::coordinator::RunOrigin::of_snapshot(run.manifest.run.as_ref()).ok();
    let policy = rebuild::replay_policy(run);
    let mut state = origin
        .as_ref()
        .map(crate::coordinator::CoordinatorState::new);
    let compact = std::sync::Arc::new(crate::coordinator::state::CompactDigests::default());
    let mut applied = 0u64;
    let verdict = ledger::verify_receipt(run, |event| {
        if let Some(replaying) = state.as_mut() {
            if replaying.apply_ref_or_spoil(event, &policy).is_err() {
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
    let position = match verdict {
        Verdict::Intact(position) => position,
        Verdict::Damaged(damage) => return Err(damage_error(run, &damage, false)),
        Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
    };
    Ok((position, state))
}

fn verify_output(
    run_id: &str,
    position: crate::receipt::verify::ChainPosition,
    state: Option<&crate::coordinator::CoordinatorState>,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("checksum".into(), Value::String(position.checksum));
    out.insert("event_count".into(), Value::from(position.sequence));
    out.insert("run_id".into(), Value::String(run_id.to_string()));
    out.insert("sequence".into(), Value::from(position.sequence));
    if let Some(state) = state.filter(|s| !s.breaches().is_empty()) {
        out.insert(
            "breaches".into(),
            crate::coordinator::breach::breaches_value(state.breaches()),
        );
    }
    out
}
