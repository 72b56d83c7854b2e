//! Topology and completion commands: topology-register, topology-remove,
//! check-result, component-evidence, lane-resolve, complete and the
//! read-only completion-check.

use super::Success;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};

use super::mutation::{AtArg, EvidencedArgs, InputMutationArgs};
use crate::commands::FlowResult;
use crate::commands::{completion, topology};
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyCommands {
    CompletionCheck(CompletionCheckArgs),
    TopologyRegister(InputMutationArgs),
    CheckResult(InputMutationArgs),
    ComponentEvidence(InputMutationArgs),
    LaneResolve(LaneResolveArgs),
    TopologyRemove(TopologyRemoveArgs),
    Complete(CompleteArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct CompletionCheckArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct LaneResolveArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long = "lane-id", required = true)]
    pub lane_id: String,
    #[arg(long = "resolution-lane-id", required = true)]
    pub resolution_lane_id: String,
    #[arg(long, required = true)]
    pub at: String,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct TopologyRemoveArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long = "component-id", required = true)]
    pub component_id: String,
    #[arg(long, required = true)]
    pub reason: String,
    #[command(flatten)]
    #[serde(flatten)]
    pub at: AtArg,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct CompleteArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    // Its help is complete.txt's: the reference accepts and ignores it.
    #[command(flatten)]
    #[serde(flatten)]
    pub at: AtArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub sign: super::transparency::SignHeadKeyArg,
}

pub fn dispatch(
    command: TopologyCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    Ok(match command {
        TopologyCommands::CompletionCheck(a) => Success::of(
            "completion-check",
            &completion::completion_check(root, &a.run_id)?,
        ),
        TopologyCommands::TopologyRegister(a) => {
            a.run(root, env, "topology-register", topology::topology_register)?
        }
        TopologyCommands::CheckResult(a) => {
            a.run(root, env, "check-result", topology::check_result)?
        }
        TopologyCommands::ComponentEvidence(a) => a.run(
            root,
            env,
            "component-evidence",
            topology::component_evidence,
        )?,
        TopologyCommands::LaneResolve(a) => {
            let mutation = a.mutation.open(root, env, Some(a.at.as_str()))?;
            Success::of(
                "lane-resolve",
                &completion::lane_resolve(&mutation, &a.lane_id, &a.resolution_lane_id, &a.at)?,
            )
        }
        TopologyCommands::TopologyRemove(a) => {
            let mutation = a.mutation.open(root, env, a.at.value()?)?;
            Success::of(
                "topology-remove",
                &topology::topology_remove(&mutation, &a.component_id, &a.reason)?,
            )
        }
        TopologyCommands::Complete(a) => a.sign.gate(
            root,
            "complete",
            || completion::complete(&a.mutation.open(root, env, a.at.value()?)?),
            |answer| &answer.run_id,
        )?,
    })
}
