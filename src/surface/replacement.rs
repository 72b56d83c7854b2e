//! Stalled-lane replacement commands: lane-reassign, replacement-repair,
//! replacement-block, replacement-close.

use super::Success;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};

use super::mutation::{EvidencedArgs, InputMutationArgs};
use crate::commands::FlowResult;
use crate::commands::replacement::{LineageCommand, lane_reassign, lineage};
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplacementCommands {
    LaneReassign(InputMutationArgs),
    ReplacementRepair(LineageArgs),
    ReplacementBlock(LineageArgs),
    ReplacementClose(LineageArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LineageArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long = "lane-id", required = true)]
    pub lane_id: String,
    #[arg(long = "replacement-lane-id", required = true)]
    pub replacement_lane_id: String,
    #[arg(long, required = true)]
    pub at: String,
}

pub fn dispatch(
    command: ReplacementCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    let (name, kind, args) = match command {
        ReplacementCommands::LaneReassign(args) => {
            return args.run(root, env, "lane-reassign", lane_reassign);
        }
        ReplacementCommands::ReplacementRepair(a) => {
            ("replacement-repair", LineageCommand::Repair, a)
        }
        ReplacementCommands::ReplacementBlock(a) => ("replacement-block", LineageCommand::Block, a),
        ReplacementCommands::ReplacementClose(a) => ("replacement-close", LineageCommand::Close, a),
    };
    let answer = lineage(
        &args.mutation.open(root, env, Some(args.at.as_str()))?,
        kind,
        &args.lane_id,
        &args.replacement_lane_id,
        &args.at,
    )?;
    Ok(Success::of(name, &answer))
}
