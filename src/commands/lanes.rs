//! The lane lifecycle commands on top of the mutation pipeline:
//! `lane-create` and the shared lane-transition path (`lane-start`,
//! `startup-ack`, `probe-ack`, `lane-complete`, `lane-fail`, `lane-block`,
//! `lane-cancel`).

use crate::coordinator::decide::InputRule;
use crate::store::input::JsonArg;
use serde_json::Value;
use std::path::Path;

use super::error::FlowResult;
use super::mutate::{DecideOn, MutationAnswer, OpenMutation};
use crate::coordinator::decide::{FlowError, Teaching};
use crate::coordinator::inputs::LaneCreateInput;
use crate::coordinator::lane_commands::{
    LaneCommand, LaneTransition, check_changed_paths_input, decide_lane_create,
    decide_lane_transition, precheck_lane_create, precheck_lane_transition,
};
use crate::receipt::rules::Limits;
use crate::store::input::InputShape;
use crate::store::scope::canonicalize_write_scope;

/// Canonicalise a scope list against the run's pinned repo root, as a
/// decision-layer refusal (every failure is exit 2).
pub(crate) fn canonicalize(
    repo_root: Option<&str>,
    scopes: &Value,
    limits: &Limits,
) -> Result<Vec<String>, FlowError> {
    let Some(root) = repo_root else {
        return Err(FlowError::from(InputRule::NoRepoRoot));
    };
    canonicalize_write_scope(Path::new(root), scopes, limits).map_err(|e| {
        match e {
            // The OS refused the pinned root itself: no path list fixes it.
            crate::store::StoreError::Io(ref failure) if failure.path == Path::new(root) => FlowError::from(e)
                .taught(Teaching {
                    detail: Some(format!("the run's pinned repo_root {root} cannot be resolved")),
                    hint: Some(format!(
                        "restore the repository at {root} (the run's manifest pins it), or start a new run with bluetape-flow init"
                    )),
                    fields: None,
                }),
            _ => FlowError::from(e),
        }
    })
}

/// `lane-create`: (evidence read) the input object, then the pre-lock
/// checks (the write scope is canonicalised here, before the lock).
pub fn lane_create(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let input = mutation.ctx.read_timed_input::<LaneCreateInput>(input)?;
    let limits = &mutation.run.manifest.contract.limits;
    let repo_root = mutation.run.repo_root()?;
    let request = precheck_lane_create(&input, &mutation.evidence, |scopes| {
        canonicalize(repo_root.as_deref(), scopes, limits)
    })?;
    // A new lane rests on absences (no lane of that id, the lane limit):
    // no line proves them, so the decision is taken on a full replay
    // (contracts/receipt.md "What a mutation proves").
    mutation.commit_replayed(|input| {
        decide_lane_create(input.state, input.policy, &request, &mutation.evidence)
    })
}

/// The flags that address a lane step: every lane transition and liveness
/// step names its lane, its agent and its time.
#[derive(Debug, Clone, Copy)]
pub struct LaneFlags<'a> {
    pub lane_id: &'a str,
    pub agent_id: &'a str,
    pub at: &'a str,
}

/// The shared lane-transition path: (evidence read) `--changed-paths` (its
/// items must be non-empty strings), then ids, `--at`, evidence present;
/// in the lock the shared decision (changed paths are canonicalised there,
/// against the repo root, after the lane checks).
/// `changed_paths` is lane-complete's `--changed-paths`.
pub fn lane_transition(
    mutation: &OpenMutation,
    command: LaneCommand,
    flags: LaneFlags<'_>,
    reason: Option<&str>,
    changed_paths: Option<&JsonArg>,
) -> FlowResult<MutationAnswer> {
    let changed_paths = match changed_paths {
        Some(path) => {
            let changed = mutation
                .ctx
                .read_json(path, InputShape::List, "--changed-paths")?;
            check_changed_paths_input(&changed)?;
            Some(changed)
        }
        None => None,
    };
    let transition = LaneTransition {
        command,
        lane_id: flags.lane_id,
        agent_id: flags.agent_id,
        at: flags.at,
        evidence: &mutation.evidence,
        reason,
        changed_paths: changed_paths.as_ref(),
    };
    precheck_lane_transition(&transition)?;
    // The changed paths are resolved against the run's pinned repo root
    // here, so the decision gets the outcome as a value and reads no file;
    // it still reports a failure only after the lane checks.
    let repo_root = match &changed_paths {
        Some(_) => mutation.run.repo_root()?,
        None => None,
    };
    let canonical_changed = changed_paths.as_ref().map(|paths| {
        canonicalize(
            repo_root.as_deref(),
            paths,
            &mutation.run.manifest.contract.limits,
        )
    });
    // lane-complete asks whether its evidence was ever liveness evidence:
    // it decides on a full replay, never on the digest table
    // (contracts/rules.md).
    let decide_on = if command == LaneCommand::Complete {
        DecideOn::FullReplay
    } else {
        DecideOn::Checkpoint
    };
    mutation.commit_on(decide_on, |input| {
        decide_lane_transition(input.state, &transition, |_| {
            canonical_changed
                .clone()
                .unwrap_or_else(|| Err(FlowError::from(InputRule::CompletionNeedsChangedPaths)))
        })
    })
}
