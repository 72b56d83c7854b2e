//! Loading a run's state at a cost that does not grow with the receipt
//! (architecture §3): start from the checkpoint — the replayed state at a
//! known sequence, checksum and byte offset — after proving that the receipt
//! still holds that exact line at that offset, then verify and replay only
//! the tail. Anything that does not match falls back to a full replay, which
//! also reports any damage precisely. The receipt stays the only truth.

use serde_json::{Value, json};

use super::error::FlowResult;
use super::ledger::{OpenRun, Verdict, verify_from};
use super::rebuild::replay_run;
use crate::coordinator::{CoordinatorState, ReplayPolicy};
use crate::receipt::canonical;
use crate::receipt::primitives::as_int;
use crate::receipt::verify::{ChainPosition, event_checksum};

/// Where a loaded state came from (tests and benchmarks look at it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPath {
    Checkpoint,
    FullReplay,
}

/// The verified, replayed state of a Phase 2 run.
pub fn load_state(
    run: &OpenRun,
    holding_lock: bool,
) -> FlowResult<(CoordinatorState, ChainPosition, LoadPath)> {
    if let Some((mut state, start)) = proven_checkpoint(run) {
        let policy = ReplayPolicy::from_contract(&run.manifest.contract.contract);
        let verdict = verify_from(run, start, |event| {
            state.apply_event(event, &policy).map_err(|e| e.to_string())
        })?;
        if let Verdict::Intact(position) = verdict {
            return Ok((state, position, LoadPath::Checkpoint));
        }
    }
    let (state, position) = replay_run(run, holding_lock)?;
    Ok((state, position, LoadPath::FullReplay))
}

/// Record `state` at `position` for the next command.
pub fn save_checkpoint(
    run: &OpenRun,
    state: &CoordinatorState,
    position: &ChainPosition,
) -> FlowResult<()> {
    let public = state.public_json();
    let value = json!({
        "byte_length": position.byte_length,
        "checksum": position.checksum,
        "line_length": position.last_line_length,
        "manifest_hash": run.manifest.contract.hash,
        "run_id": run.dir.run_id,
        "schema_version": 1,
        "sequence": position.sequence,
        "state_digest": canonical::digest(&public),
        "state": public,
    });
    run.dir.write_checkpoint(&value)?;
    Ok(())
}

fn number(value: &Value, key: &str) -> Option<u64> {
    value
        .get(key)
        .and_then(as_int)
        .and_then(|n| u64::try_from(n).ok())
}

/// The checkpoint's state and chain position, if the receipt proves it.
fn proven_checkpoint(run: &OpenRun) -> Option<(CoordinatorState, ChainPosition)> {
    let checkpoint = run.dir.read_checkpoint()?;
    if number(&checkpoint, "schema_version") != Some(1)
        || checkpoint.get("run_id").and_then(Value::as_str) != Some(run.dir.run_id.as_str())
        || checkpoint.get("manifest_hash").and_then(Value::as_str)
            != Some(run.manifest.contract.hash.as_str())
    {
        return None;
    }
    let public = checkpoint.get("state")?;
    if checkpoint.get("state_digest").and_then(Value::as_str)
        != Some(canonical::digest(public).as_str())
    {
        return None;
    }
    let state = CoordinatorState::from_public_json(public).ok()?;
    let sequence = number(&checkpoint, "sequence")?;
    let byte_length = number(&checkpoint, "byte_length")?;
    let line_length = number(&checkpoint, "line_length")?;
    let checksum = checkpoint.get("checksum")?.as_str()?.to_string();
    if sequence == 0 || state.last_sequence() != sequence || state.last_checksum() != checksum {
        return None;
    }
    // The proof: the receipt holds exactly this canonical line here.
    let line = run.dir.read_receipt_range(byte_length, line_length)?;
    let content = line.strip_suffix(b"\n")?;
    let event: serde_json::Map<String, Value> = serde_json::from_slice(content).ok()?;
    if canonical::to_vec(&Value::Object(event.clone())) != content
        || event.get("checksum").and_then(Value::as_str) != Some(checksum.as_str())
        || event_checksum(&event) != checksum
        || event.get("sequence").and_then(Value::as_u64) != Some(sequence)
        || event.get("run_id").and_then(Value::as_str) != Some(run.dir.run_id.as_str())
    {
        return None;
    }
    let position = ChainPosition {
        sequence,
        checksum,
        byte_length,
        owner_fingerprint: state.owner_fingerprint().map(str::to_string),
        owner_epoch: state.owner_epoch(),
        last_line_length: line_length,
    };
    Some((state, position))
}
