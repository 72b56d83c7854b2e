//! Decisions of the owner transfer (reference-coordinator §11.2): `resume`
//! hands a run to a new owner handle. The event carries the OLD epoch (the
//! epoch that signs it) and the new owner's fingerprint; replaying it bumps
//! the epoch, which fences every copy of the old handle.

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value, json};

use super::decide::{FlowError, Intent, require_evidence};
use super::owner_refusal::OwnerRefusal;
use super::replacement_refusal::ReplacementRefusal;
use super::state::{CoordinatorState, RunState};

/// The run states an owner can be transferred in; terminal runs keep theirs.
pub const RESUMABLE: [RunState; 4] = [
    RunState::Planned,
    RunState::Approved,
    RunState::Running,
    RunState::Recovering,
];

/// Compare a plain-read owner handle with the replayed current owner. Used
/// before the lock by `resume` and the report commands, whose message
/// differs from the pipeline's in-lock one.
pub fn require_current_owner(
    state: &CoordinatorState,
    fingerprint: &str,
    epoch: u64,
) -> Result<(), FlowError> {
    if state.owner_fingerprint() != Some(fingerprint) || state.owner_epoch() != epoch {
        return Err(FlowError::from(OwnerRefusal {
            before_lock: true,
            handle_epoch: epoch,
            owner_epoch: state.owner_epoch(),
        }));
    }
    Ok(())
}

/// The run may change owner now: a live state and no replacement
/// reservation left half-done.
pub fn require_transferable(state: &CoordinatorState) -> Result<(), FlowError> {
    if !RESUMABLE.contains(&state.run_state_enum()) {
        return super::decide::run_state_refused(state.run_state_enum(), &RESUMABLE);
    }
    if !state.incomplete_replacements().is_empty() {
        return Err(FlowError::from(ReplacementRefusal::BlocksTransfer {
            lanes: state.incomplete_replacements().to_vec(),
        }));
    }
    Ok(())
}

/// Pre-lock: evidence present.
pub fn precheck_resume(evidence: &Value) -> Result<(), FlowError> {
    require_evidence(evidence)
}

/// In-lock decision: the state still allows the transfer; one
/// `run_resumed` event naming the new owner. The pipeline adds the current
/// (old) epoch to the metadata and "now" as the timestamp.
pub fn decide_resume(
    state: &CoordinatorState,
    new_owner_fingerprint: &str,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_transferable(state)?;
    let mut metadata = Map::new();
    metadata.insert("new_owner_fingerprint".into(), json!(new_owner_fingerprint));
    Ok(vec![Intent::about_run(
        EventType::RunResumed,
        evidence.clone(),
        None,
        metadata,
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::{ReplayPolicy, RunOrigin};

    fn fp(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn state() -> CoordinatorState {
        CoordinatorState::new(&RunOrigin {
            owner_fingerprint: Some(fp('a')),
            owner_epoch: 1,
            approved_component_ids: vec![],
        })
    }

    fn ev() -> Value {
        json!([{"kind": "user_approval", "summary": "hand over"}])
    }

    /// Seal `event_type` after the state's head the way the pipeline does
    /// (the reducer checks the chain fields it reads).
    fn apply(state: &mut CoordinatorState, event_type: &str, to: Option<&str>, meta: Value) {
        let mut metadata = meta.as_object().cloned().unwrap_or_default();
        metadata.insert("owner_epoch".into(), json!(state.owner_epoch()));
        let event = json!({
            "schema_version": 1, "run_id": "r", "lane_id": null, "agent_id": null,
            "sequence": state.last_sequence() + 1, "event_type": event_type,
            "from_state": null, "to_state": to,
            "timestamp": "2026-07-14T01:00:00Z",
            "owner_token": state.owner_fingerprint(),
            "manifest_hash": fp('0'), "previous_checksum": state.last_checksum(),
            "checksum": fp('c'), "evidence_refs": ev(), "reason": null,
            "metadata": metadata,
        });
        state
            .apply(&event, &ReplayPolicy::default())
            .unwrap_or_else(|e| panic!("{event_type}: {e}"));
    }

    #[test]
    fn the_event_names_the_new_owner_and_nothing_else() {
        let intents = decide_resume(&state(), &fp('b'), &ev()).unwrap();
        assert_eq!(intents.len(), 1);
        let intent = &intents[0];
        assert_eq!(intent.event_type, "run_resumed");
        assert_eq!(intent.timestamp, None);
        assert_eq!(
            (
                &intent.from_state,
                &intent.to_state,
                &intent.lane_id,
                &intent.agent_id,
                &intent.reason
            ),
            (&None, &None, &None, &None, &None)
        );
        assert_eq!(
            Value::Object(intent.metadata.clone()),
            json!({"new_owner_fingerprint": fp('b')})
        );
        assert_eq!(intent.evidence_refs, ev());
    }

    #[test]
    fn replaying_it_moves_the_owner_and_fences_the_old_one() {
        let mut s = state();
        apply(&mut s, "run_created", Some("planned"), json!({}));
        apply(
            &mut s,
            "run_resumed",
            None,
            json!({"new_owner_fingerprint": fp('b')}),
        );
        assert_eq!(s.owner_epoch(), 2);
        assert_eq!(s.owner_fingerprint(), Some(fp('b').as_str()));
        assert_eq!(
            require_current_owner(&s, &fp('a'), 1),
            Err(FlowError::from(OwnerRefusal {
                before_lock: true,
                handle_epoch: 1,
                owner_epoch: 2
            }))
        );
        assert_eq!(
            FlowError::from(OwnerRefusal {
                before_lock: true,
                handle_epoch: 1,
                owner_epoch: 2
            })
            .message(),
            "owner handle is stale"
        );
        // The old fingerprint at the new epoch is no better.
        assert!(require_current_owner(&s, &fp('a'), 2).is_err());
        assert!(require_current_owner(&s, &fp('b'), 1).is_err());
        assert_eq!(require_current_owner(&s, &fp('b'), 2), Ok(()));
    }

    #[test]
    fn terminal_runs_keep_their_owner() {
        let mut s = state();
        apply(&mut s, "run_created", Some("planned"), json!({}));
        assert!(decide_resume(&s, &fp('b'), &ev()).is_ok());
        let mut cancelled = s.clone();
        apply(
            &mut cancelled,
            "run_cancelled",
            Some("cancelled"),
            json!({}),
        );
        assert_eq!(
            decide_resume(&cancelled, &fp('b'), &ev()),
            Err(crate::coordinator::decide::lane_refused::run_state(
                crate::coordinator::state::RunState::Cancelled,
                &[
                    crate::coordinator::state::RunState::Planned,
                    crate::coordinator::state::RunState::Approved,
                    crate::coordinator::state::RunState::Running,
                    crate::coordinator::state::RunState::Recovering
                ]
            ))
        );
    }

    #[test]
    fn evidence_is_required() {
        assert_eq!(
            precheck_resume(&json!([])),
            Err(crate::coordinator::input_refusal::refused_as(
                "lifecycle transition requires evidence"
            ))
        );
        assert!(precheck_resume(&ev()).is_ok());
    }
}
