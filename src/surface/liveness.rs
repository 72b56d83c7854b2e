//! Liveness commands: heartbeat, stall-record, stall-clear, probe-sent,
//! interrupt-result and the read-only liveness-check.

use super::Success;
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::mutation::{InputMutationArgs, LaneStepArgs};
use crate::commands::liveness;
use crate::commands::{FlowError, FlowResult};
use crate::coordinator::liveness::CommandStatus;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LivenessCommands {
    Heartbeat(InputMutationArgs),
    StallRecord(StallRecordArgs),
    StallClear(StallClearArgs),
    ProbeSent(ProbeSentArgs),
    InterruptResult(LaneStepArgs),
    LivenessCheck(LivenessCheckArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct StallRecordArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub lane: LaneStepArgs,
    #[arg(long, required = true)]
    pub reason: String,
    #[arg(long, required = true)]
    pub decision: JsonArg,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct StallClearArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub lane: LaneStepArgs,
    #[arg(long, required = true)]
    pub reason: String,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ProbeSentArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub lane: LaneStepArgs,
    #[arg(long, required = true)]
    pub deadline: String,
}

/// The default of `--command-status`, for a call that names none.
fn unknown() -> String {
    "unknown".into()
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LivenessCheckArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    #[arg(long = "lane-id", required = true)]
    pub lane_id: String,
    #[arg(long, required = true)]
    pub at: String,
    #[arg(
        long = "command-status",
        default_value = "unknown",
        value_parser = ["alive", "dead", "unknown"]
    )]
    #[serde(default = "unknown")]
    pub command_status: String,
    /// Our extension (cli-conventions §5): add the keys the next command needs.
    #[arg(long)]
    #[serde(default)]
    pub explain: bool,
    /// Our extension (cli-conventions §5): write the decision file for
    /// stall-record (implies --explain).
    #[arg(long = "decision-out", value_name = "FILE")]
    pub decision_out: Option<PathBuf>,
}

pub fn dispatch(
    command: LivenessCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    Ok(match command {
        LivenessCommands::Heartbeat(a) => a.run(root, env, "heartbeat", liveness::heartbeat)?,
        LivenessCommands::StallRecord(a) => {
            a.lane.run(root, env, "stall-record", |mutation, flags| {
                liveness::stall_record(mutation, flags, &a.reason, &a.decision)
            })?
        }
        LivenessCommands::StallClear(a) => {
            a.lane.run(root, env, "stall-clear", |mutation, flags| {
                liveness::stall_clear(mutation, flags, &a.reason)
            })?
        }
        LivenessCommands::ProbeSent(a) => {
            a.lane.run(root, env, "probe-sent", |mutation, flags| {
                liveness::probe_sent(mutation, flags, &a.deadline)
            })?
        }
        LivenessCommands::InterruptResult(a) => {
            a.run(root, env, "interrupt-result", liveness::interrupt_result)?
        }
        LivenessCommands::LivenessCheck(a) => {
            let status = CommandStatus::parse(&a.command_status).ok_or_else(|| {
                FlowError::from(crate::coordinator::decide::InputRule::CommandStatusChoice)
            })?;
            let extra = (a.explain || a.decision_out.is_some()).then_some(liveness::Explain {
                decision_out: a.decision_out.as_deref(),
                cwd: &env.cwd,
            });
            Success::of(
                "liveness-check",
                &liveness::liveness_check(root, &a.run_id, &a.lane_id, &a.at, status, extra)?,
            )
        }
    })
}
