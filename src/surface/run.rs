//! Run lifecycle commands: run-approve, run-start, run-recovery-start,
//! run-recovery-finish, run-fail, run-block, run-cancel.

use super::Success;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::mutation::EvidencedArgs;
use crate::commands::mutate::OpenMutation;
use crate::commands::{self, FlowResult};
use crate::coordinator::run_commands::RunCommand;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunCommands {
    RunApprove(RunApproveArgs),
    RunStart(RunTransitionArgs),
    RunRecoveryFinish(RunTransitionArgs),
    RunRecoveryStart(RunReasonArgs),
    RunFail(RunReasonArgs),
    RunBlock(RunReasonArgs),
    RunCancel(RunReasonArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct RunTransitionArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long)]
    pub at: Option<String>,
}

impl RunTransitionArgs {
    /// This invocation's first two steps, its event time `--at` (checked
    /// as the decision's time, [`commands::lifecycle::decided_at`]).
    fn open(&self, root: &StateRoot, env: &DiscoveryEnv) -> FlowResult<OpenMutation> {
        self.mutation.open(root, env, self.at.as_deref())
    }
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct RunApproveArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub transition: RunTransitionArgs,
    /// An SSH signature of the run's `approval-statement` (`ssh-keygen -Y
    /// sign -n bluetape-flow-approval`), required when the policy pins an
    /// approver_key (our extension).
    #[arg(long)]
    pub signature: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct RunReasonArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub transition: RunTransitionArgs,
    #[arg(long, required = true)]
    pub reason: String,
}

pub fn dispatch(command: RunCommands, root: &StateRoot, env: &DiscoveryEnv) -> FlowResult<Success> {
    let (name, kind, transition, reason) = match command {
        RunCommands::RunApprove(a) => {
            // The approval gate (our extension): identity comes from the
            // environment, never from argv; a signature from a file.
            let answer = commands::approval::approve(
                &a.transition.open(root, env)?,
                &commands::approval::ApprovalEnv::from_process(),
                a.signature.as_deref(),
            )?;
            return Ok(Success::of("run-approve", &answer));
        }
        RunCommands::RunStart(a) => ("run-start", RunCommand::Start, a, None),
        RunCommands::RunRecoveryFinish(a) => {
            ("run-recovery-finish", RunCommand::RecoveryFinish, a, None)
        }
        RunCommands::RunRecoveryStart(a) => (
            "run-recovery-start",
            RunCommand::RecoveryStart,
            a.transition,
            Some(a.reason),
        ),
        RunCommands::RunFail(a) => ("run-fail", RunCommand::Fail, a.transition, Some(a.reason)),
        RunCommands::RunBlock(a) => ("run-block", RunCommand::Block, a.transition, Some(a.reason)),
        RunCommands::RunCancel(a) => (
            "run-cancel",
            RunCommand::Cancel,
            a.transition,
            Some(a.reason),
        ),
    };
    let mutation = transition.open(root, env)?;
    // The approval gate (our extension) owns approve and cancel: identity
    // comes from the environment, never from argv.
    let gate = commands::approval::ApprovalEnv::from_process;
    let answer = match (kind, reason.as_deref()) {
        (RunCommand::Cancel, Some(reason)) => {
            commands::approval::cancel(&mutation, reason, &gate())?
        }
        _ => commands::lifecycle::run_transition(&mutation, kind, reason.as_deref())?,
    };
    Ok(Success::of(name, &answer))
}
