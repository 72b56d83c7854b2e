//! Flags and context shared by every Phase 2 mutation command.

use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use clap::Args;
use std::path::PathBuf;

use crate::commands::lanes::LaneFlags;
use crate::commands::mutate::{MutationContext, OpenMutation};
use crate::commands::{FlowError, FlowResult};
use crate::store::discovery::DiscoveryEnv;

/// Flags every Phase 2 mutation shares.
#[derive(Debug, Args, serde::Deserialize)]
pub struct MutationArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    #[arg(long = "owner-file", required = true)]
    pub owner_file: PathBuf,
    #[arg(long = "expected-head")]
    pub expected_head: Option<String>,
}

impl MutationArgs {
    /// The pipeline context of one invocation: the clock is read once,
    /// here; `at` is the command's `--at` (the time its event records).
    pub fn context(
        &self,
        root: &StateRoot,
        env: &DiscoveryEnv,
        at: Option<&str>,
    ) -> MutationContext {
        MutationContext {
            root: root.clone(),
            run_id: self.run_id.clone(),
            owner_file: self.owner_file.clone(),
            expected_head: self.expected_head.clone(),
            now: chrono::Utc::now(),
            at: at.map(str::to_string),
            env: env.clone(),
        }
    }
}

/// The shared mutation flags, then `--evidence`: how every evidenced
/// mutation's flags begin.
#[derive(Debug, Args, serde::Deserialize)]
pub struct EvidencedArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: MutationArgs,
    #[arg(long, required = true)]
    pub evidence: JsonArg,
}

impl EvidencedArgs {
    /// This invocation's first two steps ([`MutationContext::open_with_evidence`])
    /// in its context ([`MutationArgs::context`]).
    pub fn open(
        &self,
        root: &StateRoot,
        env: &DiscoveryEnv,
        at: Option<&str>,
    ) -> FlowResult<OpenMutation> {
        self.common
            .context(root, env, at)
            .open_with_evidence(&self.evidence)
    }
}

/// `--at` of a mutation the reference stamps with its own clock (our
/// extension, DEVIATIONS 87): the time the event records.
#[derive(Debug, Args, serde::Deserialize)]
pub struct AtArg {
    /// When it happened: a UTC timestamp ending in Z (e.g. 2026-07-14T01:00:00Z), recorded as the event's time; at most 300 seconds after this machine's clock (default: now).
    #[arg(long)]
    pub at: Option<String>,
}

impl AtArg {
    /// `--at`, which must be a UTC timestamp in the stored shape
    /// (`YYYY-MM-DDTHH:MM:SS[.ffffff]Z`; the event records it as given):
    /// refused naming the flag before anything else, since the reference
    /// has no such flag, or ignores it (contracts/commands.md "One clock").
    pub fn value(&self) -> FlowResult<Option<&str>> {
        match self.at.as_deref() {
            Some(text) if crate::receipt::primitives::parse_timestamp(text).is_none() => Err(
                FlowError::from(crate::coordinator::decide::InputRefusal::Timestamp {
                    field: "--at".into(),
                })
                .taught(crate::coordinator::decide::at_teaching(text)),
            ),
            other => Ok(other),
        }
    }
}

/// `--evidence FILE --input FILE` after the shared mutation flags
/// (lane-create, heartbeat, lane-reassign, topology-register, check-result,
/// component-evidence), and `--at`.
#[derive(Debug, Args, serde::Deserialize)]
pub struct InputMutationArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long, required = true)]
    pub input: JsonArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub at: AtArg,
}

impl InputMutationArgs {
    /// Run `command` with this invocation's context, evidence and input;
    /// its answer is the envelope of `operation`.
    pub fn run<A: serde::Serialize>(
        &self,
        root: &StateRoot,
        env: &DiscoveryEnv,
        operation: &'static str,
        command: impl FnOnce(&OpenMutation, &JsonArg) -> FlowResult<A>,
    ) -> FlowResult<super::Success> {
        let mutation = self.mutation.open(root, env, self.at.value()?)?;
        let answer = command(&mutation, &self.input)?;
        Ok(super::Success::of(operation, &answer))
    }
}

/// `--evidence --lane-id --agent-id --at` after the shared mutation flags
/// (every lane transition and liveness step).
#[derive(Debug, Args, serde::Deserialize)]
pub struct LaneStepArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long = "lane-id", required = true)]
    pub lane_id: String,
    #[arg(long = "agent-id", required = true)]
    pub agent_id: String,
    #[arg(long, required = true)]
    pub at: String,
}

impl LaneStepArgs {
    /// Run `command` with this invocation's first two steps (its event time
    /// the step's `--at`) and lane flags; its answer is the envelope of
    /// `operation`.
    pub fn run<A: serde::Serialize>(
        &self,
        root: &StateRoot,
        env: &DiscoveryEnv,
        operation: &'static str,
        command: impl FnOnce(&OpenMutation, LaneFlags<'_>) -> FlowResult<A>,
    ) -> FlowResult<super::Success> {
        let mutation = self.mutation.open(root, env, Some(self.at.as_str()))?;
        let flags = LaneFlags {
            lane_id: &self.lane_id,
            agent_id: &self.agent_id,
            at: &self.at,
        };
        Ok(super::Success::of(operation, &command(&mutation, flags)?))
    }
}
