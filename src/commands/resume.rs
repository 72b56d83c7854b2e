//! `resume`: hand the run to a fresh owner handle (reference-coordinator
//! §11.2). The new 0600 handle (epoch + 1, fresh token) is created before
//! the append and removed again if anything fails; after the append the old
//! handle file is removed if it still holds the old owner. From then on the
//! old handle — and any copy of it — fails every mutation.

use crate::coordinator::decide::InputRule;
use serde::Serialize;
use std::path::Path;

use super::error::{FlowError, FlowResult};
use super::mutate::{DecideOn, MutationAnswer, OpenMutation};
use super::rebuild::replay_run;
use crate::coordinator::resume::{
    decide_resume, precheck_resume, require_current_owner, require_transferable,
};
use crate::store::handle::{
    OwnerHandle, OwnerToken, check_new_owner_path, create_handle, read_handle, remove_handle_if,
    same_file,
};
use crate::store::paths::expand_tilde;

/// What `resume` answers (contracts/commands.md "Owner transfer"): the
/// state envelope plus the new owner's epoch and fingerprint, never the
/// token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResumeAnswer {
    #[serde(flatten)]
    pub committed: MutationAnswer,
    pub owner_epoch: u64,
    /// The replayed owner after `run_resumed`; printed as it is, `null`
    /// included, as the reference prints it.
    pub owner_fingerprint: Option<String>,
}

/// `resume --new-owner-file`: returns the state envelope plus the new
/// owner's epoch and fingerprint (never the token).
/// `new_token` is the new owner's secret token, drawn by the CLI.
pub fn resume(
    mutation: &OpenMutation,
    new_owner_file: &Path,
    new_token: &OwnerToken,
) -> FlowResult<ResumeAnswer> {
    let ctx = &mutation.ctx;
    mutation.run.dir.validate()?;
    precheck_resume(&mutation.evidence)?;
    // Owner transfer is a gate: the whole receipt is verified, not a tail.
    let (state, _) = replay_run(&mutation.run, false)?;
    crate::coordinator::breach::require_no_breach(&state, "resume")?;
    let current_path = expand_tilde(&ctx.owner_file, ctx.env.home.as_ref());
    let current = read_handle(ctx.root.at(&current_path), None)?;
    require_current_owner(&state, &current.fingerprint, current.epoch)?;
    require_transferable(&state)?;
    let new_path = expand_tilde(new_owner_file, ctx.env.home.as_ref());
    // From here on the new handle is `<root>/handles/<name>`, reached from
    // the held state root.
    let new_path = check_new_owner_path(&ctx.root, &new_path, &ctx.env.cwd, false)?;
    if same_file(&ctx.root, &current_path, &new_path) {
        return Err(FlowError::from(InputRule::SameOwnerHandle));
    }
    let new_epoch = state
        .owner_epoch()
        .checked_add(1)
        .ok_or_else(|| FlowError::from(InputRule::OwnerEpochOverflow))?;
    let new_owner = create_handle(ctx.root.at(&new_path), &ctx.run_id, new_epoch, new_token)?;
    // In the lock too the gate decides on a full replay, never on the
    // checkpoint (contracts/receipt.md "What a mutation proves").
    let committed = super::mutate::mutate(ctx, &mutation.run, DecideOn::FullReplay, |input| {
        decide_resume(input.state, &new_owner.fingerprint, &mutation.evidence)
    });
    let committed = match committed {
        Ok(committed) => committed,
        Err(error) => {
            remove_handle_if(ctx.root.at(&new_path), &new_owner);
            return Err(error);
        }
    };
    // The transfer is committed; removing the old handle is housekeeping
    // (its copies are fenced by the epoch either way).
    let old_owner = OwnerHandle {
        run_id: ctx.run_id.clone(),
        epoch: state.owner_epoch(),
        fingerprint: state.owner_fingerprint().unwrap_or_default().to_string(),
    };
    remove_handle_if(ctx.root.at(&current_path), &old_owner);
    Ok(ResumeAnswer {
        committed: committed.answer(&ctx.run_id),
        owner_epoch: committed.owner_epoch,
        owner_fingerprint: committed.owner_fingerprint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The state envelope's keys and the new owner's, a missing
    /// fingerprint printed as `null` rather than left out.
    #[test]
    fn resume_answers_the_state_envelope_and_the_new_owner() {
        let answer = ResumeAnswer {
            committed: MutationAnswer {
                run_id: "r1".into(),
                sequence: 9,
                checksum: "c".repeat(64),
                run_state: "running".into(),
            },
            owner_epoch: 2,
            owner_fingerprint: None,
        };
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            json!({"run_id": "r1", "sequence": 9, "checksum": "c".repeat(64),
                   "run_state": "running", "owner_epoch": 2, "owner_fingerprint": null})
        );
    }
}
