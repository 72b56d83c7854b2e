//! Flags and context shared by every Phase 2 mutation command.

use clap::Args;
use std::path::{Path, PathBuf};

use crate::commands::mutate::MutationContext;
use crate::store::discovery::DiscoveryEnv;

/// Flags every Phase 2 mutation shares.
#[derive(Debug, Args)]
pub struct MutationArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    #[arg(long = "owner-file", required = true)]
    pub owner_file: PathBuf,
    #[arg(long = "expected-head")]
    pub expected_head: Option<String>,
}

/// `--evidence FILE --input FILE` after the shared mutation flags
/// (lane-create, heartbeat, lane-reassign).
#[derive(Debug, Args)]
pub struct InputMutationArgs {
    #[command(flatten)]
    pub common: MutationArgs,
    #[arg(long, required = true)]
    pub evidence: PathBuf,
    #[arg(long, required = true)]
    pub input: PathBuf,
}

/// `--evidence --lane-id --agent-id --at` after the shared mutation flags
/// (every lane transition and liveness step).
#[derive(Debug, Args)]
pub struct LaneStepArgs {
    #[command(flatten)]
    pub common: MutationArgs,
    #[arg(long, required = true)]
    pub evidence: PathBuf,
    #[arg(long = "lane-id", required = true)]
    pub lane_id: String,
    #[arg(long = "agent-id", required = true)]
    pub agent_id: String,
    #[arg(long, required = true)]
    pub at: String,
}

/// The pipeline context of one invocation: the clock is read once, here.
pub fn context(root: &Path, env: &DiscoveryEnv, args: &MutationArgs) -> MutationContext {
    MutationContext {
        root: root.to_path_buf(),
        run_id: args.run_id.clone(),
        owner_file: args.owner_file.clone(),
        expected_head: args.expected_head.clone(),
        now: chrono::Utc::now(),
        env: env.clone(),
    }
}
