//! Failed-lane resolution (reference-coordinator §9): `lane-resolve`.
//!
//! A `failed` lane stays failed forever; its history is never rewritten. A
//! *later* correction or re-review lane that completed with independent
//! evidence resolves it: the resolution record binds the digests of both
//! lanes' evidence (the failure's and the resolver's completion evidence),
//! and, when the run's own manifest snapshot says so
//! (`failure_resolution.requires_parent`, decisions.md 5), the resolver
//! must declare the failed lane as its parent. Completion then counts the
//! failed lane as resolved (see [`super::completion`]).

use crate::receipt::vocab::EventType;
use serde_json::{Map, Value, json};

use super::completion::require_completion_evidence;
use super::decide::{FlowError, Intent, Policy, invalid, refused, require_evidence};
use super::decide::{InputRefusal, InputRule};
use super::lane_commands::{identifier, require_lane_run_state};
use super::resolution_refusal::ResolutionRefusal as Refused;
use super::state::{CoordinatorState, LaneState};
use crate::receipt::canonical;
use crate::receipt::lax_time::LaxTimeError;
use crate::receipt::primitives::parse_timestamp;

/// A `lane-resolve` request that passed its pre-lock checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolve {
    pub lane_id: String,
    pub resolution_lane_id: String,
    /// `--at`, the event timestamp.
    pub at: String,
}

/// Pre-lock checks of `lane-resolve` (exit 2): both ids, `--at`, evidence
/// present. `--at` is read with the stored-value rule, as for the other
/// caller-timed lineage commands (the reference reads it laxly and leaves
/// the shape to the receipt contract: exit 2 either way).
pub fn precheck_resolve(
    lane_id: &str,
    resolution_lane_id: &str,
    at: &str,
    evidence: &Value,
) -> Result<Resolve, FlowError> {
    identifier(&json!(lane_id), "lane id")?;
    identifier(&json!(resolution_lane_id), "resolution lane id")?;
    if parse_timestamp(at).is_none() {
        return invalid(InputRefusal::LaxTimestamp(LaxTimeError::Invalid))
            .map_err(|r| crate::coordinator::decide::at_refusal(r, at));
    }
    require_evidence(evidence)?;
    Ok(Resolve {
        lane_id: lane_id.to_string(),
        resolution_lane_id: resolution_lane_id.to_string(),
        at: at.to_string(),
    })
}

/// The digest of a lane's current (non-liveness) evidence list.
fn lane_evidence_digest(refs: &[Value]) -> String {
    canonical::digest(&Value::Array(refs.to_vec()))
}

/// In-lock decision of `lane-resolve`, in the reference's order:
/// 1. run running or recovering (5);
/// 2. the lane exists and is `failed` (5);
/// 3. it is not its own resolver (2);
/// 4. the resolver exists and is `completed` (5);
/// 5. with the snapshot's `requires_parent`, the resolver's parent is the
///    failed lane (5);
/// 6. the resolver completed after the failure (5);
/// 7. the failed lane is not resolved yet (5);
/// 8. the evidence is completion evidence, never liveness evidence (2);
/// 9. the evidence binds both lanes' evidence digests as `checksum`s (2);
/// 10. the two digests differ (5; decisions.md 7 — the reference lets this
///     through to its pre-append replay and answers exit 3).
///
/// One `candidate_validated` event (`failed_lane_resolution`) on the
/// failed lane, failed → failed, at `--at`.
pub fn decide_resolve(
    state: &CoordinatorState,
    policy: &Policy,
    request: &Resolve,
    evidence: &Value,
) -> Result<Vec<Intent>, FlowError> {
    require_lane_run_state(state)?;
    let pair = || (request.lane_id.clone(), request.resolution_lane_id.clone());
    let original = state
        .lane_in(&request.lane_id, LaneState::Failed)
        .or_else(|state| {
            refused(Refused::NotFailed {
                lane_id: request.lane_id.clone(),
                state,
            })
        })?;
    if request.lane_id == request.resolution_lane_id {
        return invalid(InputRule::ResolveItself);
    }
    let resolver = state
        .lane_in(&request.resolution_lane_id, LaneState::Completed)
        .or_else(|state| {
            refused(Refused::ResolverNotCompleted {
                resolution_lane_id: request.resolution_lane_id.clone(),
                state,
            })
        })?;
    if policy.requires_parent && resolver.parent_lane_id.as_deref() != Some(original.id.as_str()) {
        let (lane_id, resolution_lane_id) = pair();
        return refused(Refused::NotItsParent {
            lane_id,
            resolution_lane_id,
            parent: resolver.parent_lane_id.clone(),
        });
    }
    let after_failure = match (original.terminal_sequence, resolver.terminal_sequence) {
        (Some(failed_at), Some(completed_at)) => completed_at > failed_at,
        _ => false,
    };
    if !after_failure {
        let (lane_id, resolution_lane_id) = pair();
        return refused(Refused::CompletedBefore {
            lane_id,
            resolution_lane_id,
        });
    }
    if state
        .failure_resolutions()
        .contains_key(original.id.as_str())
    {
        let (lane_id, resolution_lane_id) = pair();
        return refused(Refused::AlreadyResolved {
            lane_id,
            resolution_lane_id,
        });
    }
    require_completion_evidence(state, evidence)?;
    let original_digest = lane_evidence_digest(&original.evidence_refs);
    let resolution_digest = lane_evidence_digest(&resolver.evidence_refs);
    let supplied: Vec<&str> = evidence
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("checksum").and_then(Value::as_str))
        .collect();
    if !supplied.contains(&original_digest.as_str())
        || !supplied.contains(&resolution_digest.as_str())
    {
        let missing: Vec<&str> = [original_digest.as_str(), resolution_digest.as_str()]
            .into_iter()
            .filter(|digest| !supplied.contains(digest))
            .collect();
        return invalid(InputRule::ResolutionEvidenceUnbound).map_err(
            |r| {
                r.taught(super::decide::Teaching {
                    detail: None,
                    hint: Some(format!(
                        "add evidence items whose checksum is each lane's evidence digest: {} ({}) and {} ({}); bluetape-flow evidence-digest --evidence VALUE prints a list's digest",
                        original_digest, original.id, resolution_digest, resolver.id
                    )),
                    fields: Some(json!({
                        "input": "--evidence",
                        "expected_checksums": {
                            original.id.clone(): original_digest,
                            resolver.id.clone(): resolution_digest,
                        },
                        "missing_checksums": missing,
                    })),
                })
            },
        );
    }
    if original_digest == resolution_digest {
        let (lane_id, resolution_lane_id) = pair();
        return refused(Refused::SameEvidence {
            lane_id,
            resolution_lane_id,
        });
    }
    let mut metadata = Map::new();
    metadata.insert("candidate_kind".into(), json!("failed_lane_resolution"));
    metadata.insert("original_lane_id".into(), json!(original.id));
    metadata.insert("resolution_lane_id".into(), json!(resolver.id));
    metadata.insert("original_evidence_digest".into(), json!(original_digest));
    metadata.insert(
        "resolution_evidence_digest".into(),
        json!(resolution_digest),
    );
    // The original is failed (checked above) and stays failed.
    Ok(vec![Intent::on_lane(
        EventType::CandidateValidated,
        original,
        Some(LaneState::Failed.into()),
        &request.at,
        evidence,
        None,
        metadata,
    )])
}

#[cfg(test)]
#[path = "resolution_tests.rs"]
mod tests;
