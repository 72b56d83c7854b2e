//! Commands: the guarded paths between the CLI and the store. Each returns
//! the command's own output keys; the CLI adds the envelope.

pub mod approval;
pub mod checkpoint;
pub mod completion;
pub mod error;
pub mod init;
pub mod inspect;
pub mod lanes;
pub mod ledger;
pub mod lifecycle;
pub mod liveness;
pub mod mutate;
pub mod rebuild;
pub mod recovery;
pub mod replacement;
pub mod reports;
pub mod resume;
pub mod topology;

#[cfg(test)]
mod reliability_faults;

use serde_json::{Map, Value};
use std::path::Path;

pub use error::{FlowError, FlowResult};
use ledger::{Verdict, damage_error, open_run, verify_chain};

/// `verify`: stream-verify the whole receipt (read-only, no lock).
pub fn verify(root: &Path, run_id: &str) -> FlowResult<Map<String, Value>> {
    let run = open_run(root, run_id)?;
    if run.manifest.contract.family == crate::receipt::rules::Family::V1_1 {
        return verify_replayed(&run, run_id);
    }
    let position = match verify_chain(&run)? {
        Verdict::Intact(position) => position,
        Verdict::Damaged(damage) => return Err(damage_error(&run, &damage, false)),
        Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
    };
    let mut out = Map::new();
    out.insert("checksum".into(), Value::String(position.checksum));
    out.insert("event_count".into(), Value::from(position.sequence));
    out.insert("run_id".into(), Value::String(run_id.to_string()));
    out.insert("sequence".into(), Value::from(position.sequence));
    Ok(out)
}

/// `verify` of a Phase 2 run: the same chain verdict, from one pass that
/// also replays, so the events that break our rules (issue 13) are reported
/// in an extra `breaches` key, present only when there are some. A replay
/// failure does not change the verdict (`verify` judges the chain, as the
/// reference's does); it only means no breaches can be reported.
fn verify_replayed(run: &ledger::OpenRun, run_id: &str) -> FlowResult<Map<String, Value>> {
    // A checkpoint the unchanged receipt proves already holds the replay's
    // breaches: then the chain alone is verified (on two worker threads).
    if let Some((state, _)) = checkpoint::proven_state(run) {
        let position = match verify_chain(run)? {
            Verdict::Intact(position) => position,
            Verdict::Damaged(damage) => return Err(damage_error(run, &damage, false)),
            Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
        };
        if position.sequence == state.last_sequence() && position.checksum == state.last_checksum()
        {
            return Ok(verify_output(run_id, position, Some(&state)));
        }
    }
    let origin = run
        .manifest
        .run
        .clone()
        .map(Value::Object)
        .and_then(|meta| crate::coordinator::RunOrigin::from_run_metadata(&meta).ok());
    let policy = rebuild::replay_policy(run);
    let mut state = origin
        .as_ref()
        .map(crate::coordinator::CoordinatorState::new);
    let verdict = ledger::verify_receipt(run, |event| {
        if let Some(replaying) = state.as_mut()
            && replaying.apply_event(event, &policy).is_err()
        {
            state = None;
        }
        Ok(())
    })?;
    let position = match verdict {
        Verdict::Intact(position) => position,
        Verdict::Damaged(damage) => return Err(damage_error(run, &damage, false)),
        Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
    };
    Ok(verify_output(run_id, position, state.as_ref()))
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
