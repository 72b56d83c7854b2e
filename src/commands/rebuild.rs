//! `rebuild`: rewrite the derived caches (run.json, lanes/*.json) from a
//! fully verified receipt, under the receipt lock so it never races a
//! writer. The receipt stays the only truth; a damaged receipt writes nothing.

use crate::store::root::StateRoot;
use serde::Serialize;
use serde_json::{Value, json};

use super::error::FlowResult;
use super::ledger::{OpenRun, Verdict, open_run, verify_receipt};
use crate::coordinator::simple::{CoordinatorCache, RunCacheRecord, SimpleRunCache};
use crate::coordinator::{CoordinatorState, OnRefusal, ReplayPolicy, RunOrigin};
use crate::receipt::json_ref::ObjectRef;
use crate::receipt::rules::Family;
use crate::receipt::verify::ChainPosition;

/// The coordinator-shape run.json of a replayed Phase 2 run.
pub fn coordinator_run_cache(run_id: &str, manifest_hash: &str, state: &CoordinatorState) -> Value {
    RunCacheRecord {
        coordinator: Some(CoordinatorCache {
            cache_version: 1,
            state: state.public_json(),
        }),
        last_checksum: json!(state.last_checksum()),
        last_event_type: json!(state.last_event_type()),
        last_sequence: json!(state.last_sequence()),
        manifest_hash,
        run_id,
        schema_version: 1,
        state: state.run_state(),
        updated_at: json!(state.updated_at()),
    }
    .to_json()
}

/// Verify and replay a Phase 2 run into its coordinator state.
/// Stream-verify and replay a Phase 2 run from genesis. `None` when the
/// snapshot's `_run` names no initial owner (nothing can be trusted then).
pub fn replay_verdict(run: &OpenRun) -> FlowResult<Option<(Verdict, CoordinatorState)>> {
    let Ok(origin) = run.origin() else {
        return Ok(None);
    };
    replay_from(run, &origin, &replay_policy(run), OnRefusal::Restore).map(Some)
}

/// Stream-verify the receipt from genesis, applying each event to the
/// state `origin` starts; the first refused event rejects it and leaves
/// the state as `on_refusal` says.
pub fn replay_from(
    run: &OpenRun,
    origin: &RunOrigin,
    policy: &ReplayPolicy,
    on_refusal: OnRefusal,
) -> FlowResult<(Verdict, CoordinatorState)> {
    let mut state = CoordinatorState::new(origin);
    let verdict = verify_receipt(run, |event| {
        state
            .apply_ref(event, policy, on_refusal)
            .map_err(|e| e.to_string())
    })?;
    Ok((verdict, state))
}

/// Stream-verify and replay a whole Phase 2 run for a read that must see
/// all of it (a gate, an export): a Phase 1 run is refused saying `phase1`,
/// and `after` sees each verified event once the state has applied it.
/// Damage, or an event replay refuses, is the command's error.
pub fn replay_whole(
    root: &StateRoot,
    run_id: &str,
    phase1: &str,
    mut after: impl FnMut(&ObjectRef<'_>, &mut CoordinatorState) -> Result<(), String>,
) -> FlowResult<(OpenRun, CoordinatorState, ChainPosition)> {
    let run = open_run(root, run_id)?;
    run.phase2_or(phase1)?;
    run.dir.validate()?;
    let mut state = CoordinatorState::new(&run.origin()?);
    let policy = replay_policy(&run);
    let verdict = verify_receipt(&run, |event| {
        state
            .apply_ref(event, &policy, OnRefusal::Spoil)
            .map_err(|e| e.to_string())?;
        after(event, &mut state)
    })?;
    let position = verdict.intact(&run, false)?;
    Ok((run, state, position))
}

/// The replay rules of a run: its manifest's, and its approval policy file
/// for the gate (read only when the run has one).
pub fn replay_policy(run: &OpenRun) -> ReplayPolicy {
    let policy = ReplayPolicy::from_contract(&run.manifest.contract.contract);
    policy.with_approval_file(crate::store::approval::read_policy_file(&run.dir))
}

/// The verified, replayed state of a Phase 2 run, or the error its damage
/// gives a command.
pub fn replay_run(
    run: &OpenRun,
    holding_lock: bool,
) -> FlowResult<(CoordinatorState, ChainPosition)> {
    run.confirm_manifest(holding_lock)?;
    let (verdict, state) =
        replay_from(run, &run.origin()?, &replay_policy(run), OnRefusal::Restore)?;
    Ok((state, verdict.intact(run, holding_lock)?))
}

/// What `rebuild` answers: the verified head the caches now describe.
#[derive(Debug, Serialize)]
pub struct Rebuilt {
    pub checksum: String,
    pub run_id: String,
    pub sequence: u64,
}

/// `rebuild`: verify, then rewrite the run's caches (and a head record that
/// names no head) from the receipt.
pub fn rebuild(root: &StateRoot, run_id: &str) -> FlowResult<Rebuilt> {
    let mut run = open_run(root, run_id)?;
    let _guard = run.dir.receipt_lock().acquire()?;
    // A head record that names no head (unparsable, sequence 0, another
    // run) is a damaged cache of ours: the receipt is judged without it and,
    // when it verifies, the record is rewritten below (DEVIATIONS 104). A
    // record that names a head the receipt disagrees with is receipt damage
    // and stays refused (recovery-run-create); a record of the wrong type
    // or mode is a store rule broken (exit 2).
    let head_unreadable = matches!(
        run.dir.read_head(),
        Err(crate::store::run::RunReadError::Corrupt(_))
    );
    run.trust_head = !head_unreadable;
    let hash = run.manifest.contract.hash.clone();
    let position = match run.manifest.contract.family {
        Family::V1_1 => {
            let (state, position) = replay_run(&run, true)?;
            let lanes = state.lane_records();
            run.dir.ensure_lanes_dir()?;
            for (lane_id, record) in &lanes {
                run.dir
                    .write_cache(&run.dir.lanes_dir().join(format!("{lane_id}.json")), record)?;
            }
            for lane_id in run.dir.lane_cache_ids()? {
                if !lanes.contains_key(&lane_id) {
                    run.dir.remove_lane_cache(&lane_id)?;
                }
            }
            run.dir.write_cache(
                &run.dir.run_cache_path(),
                &coordinator_run_cache(run_id, &hash, &state),
            )?;
            super::checkpoint::save_checkpoint(
                &run,
                &super::checkpoint::LoadBasis::full_replay(),
                &state,
                &position,
                position.sequence,
            )?;
            position
        }
        Family::V1_0 => {
            let mut cache = SimpleRunCache::default();
            let position = verify_receipt(&run, |event| {
                cache.observe(&event.to_map());
                Ok(())
            })?
            .intact(&run, true)?;
            run.dir
                .write_cache(&run.dir.run_cache_path(), &cache.to_json(run_id, &hash))?;
            position
        }
    };
    // A receipt that verified has a last event, so a head to name.
    let verified_head = crate::receipt::primitives::Sha256Hex::parse(&position.checksum);
    if head_unreadable && let Some(checksum) = verified_head {
        // A record that names no head is replaced by one naming the end of
        // the receipt just verified (pinning as canonical only the lines
        // before the first one another tool wrote in other bytes).
        run.dir.write_head(&crate::store::run::AckHead {
            sequence: position.sequence,
            checksum,
            byte_length: position.byte_length,
            canonical_through: super::ledger::canonical_through(&run, None, position.sequence),
        })?;
    }
    Ok(Rebuilt {
        checksum: position.checksum,
        run_id: run_id.to_string(),
        sequence: position.sequence,
    })
}
