//! Lane lifecycle commands: lane-create, lane-start, startup-ack,
//! probe-ack, lane-complete, lane-fail, lane-block, lane-cancel.

use super::Success;
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};

use super::mutation::{InputMutationArgs, LaneStepArgs};
use crate::commands::{self, FlowResult};
use crate::coordinator::lane_commands::LaneCommand;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaneCommands {
    LaneCreate(InputMutationArgs),
    LaneStart(LaneStepArgs),
    StartupAck(LaneStepArgs),
    ProbeAck(LaneStepArgs),
    LaneComplete(LaneCompleteArgs),
    LaneFail(LaneReasonArgs),
    LaneBlock(LaneReasonArgs),
    LaneCancel(LaneReasonArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LaneReasonArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub transition: LaneStepArgs,
    #[arg(long, required = true)]
    pub reason: String,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LaneCompleteArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub transition: LaneStepArgs,
    #[arg(long = "changed-paths", required = true)]
    pub changed_paths: JsonArg,
}

pub fn dispatch(
    command: LaneCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    let (name, kind, transition, reason, changed_paths) = match command {
        LaneCommands::LaneCreate(a) => {
            return a.run(root, env, "lane-create", commands::lanes::lane_create);
        }
        LaneCommands::LaneStart(a) => ("lane-start", LaneCommand::Start, a, None, None),
        LaneCommands::StartupAck(a) => ("startup-ack", LaneCommand::StartupAck, a, None, None),
        LaneCommands::ProbeAck(a) => ("probe-ack", LaneCommand::ProbeAck, a, None, None),
        LaneCommands::LaneComplete(a) => (
            "lane-complete",
            LaneCommand::Complete,
            a.transition,
            None,
            Some(a.changed_paths),
        ),
        LaneCommands::LaneFail(a) => (
            "lane-fail",
            LaneCommand::Fail,
            a.transition,
            Some(a.reason),
            None,
        ),
        LaneCommands::LaneBlock(a) => (
            "lane-block",
            LaneCommand::Block,
            a.transition,
            Some(a.reason),
            None,
        ),
        LaneCommands::LaneCancel(a) => (
            "lane-cancel",
            LaneCommand::Cancel,
            a.transition,
            Some(a.reason),
            None,
        ),
    };
    transition.run(root, env, name, |mutation, flags| {
        let changed_paths = changed_paths.as_ref();
        commands::lanes::lane_transition(mutation, kind, flags, reason.as_deref(), changed_paths)
    })
}
