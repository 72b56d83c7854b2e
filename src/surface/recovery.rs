//! Owner transfer, recovery and bound reports: resume,
//! recovery-run-create, handoff-create, live-report-create.

use super::Success;
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::mutation::{AtArg, EvidencedArgs, MutationArgs};
use super::transparency::SignHeadKeyArg;
use crate::commands::FlowResult;
use crate::commands::recovery::{RecoveryRequest, recovery_run_create};
use crate::commands::reports::create_report;
use crate::commands::resume::resume;
use crate::coordinator::reports::ReportKind;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryCommands {
    Resume(ResumeArgs),
    RecoveryRunCreate(RecoveryRunCreateArgs),
    HandoffCreate(HandoffArgs),
    LiveReportCreate(ReportArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ResumeArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub mutation: EvidencedArgs,
    #[arg(long = "new-owner-file", required = true)]
    pub new_owner_file: PathBuf,
    #[command(flatten)]
    #[serde(flatten)]
    pub gate: GateArgs,
}

/// No `--expected-head`: the damaged run is not appended to.
#[derive(Debug, Args, serde::Deserialize)]
pub struct RecoveryRunCreateArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    #[arg(long, required = true)]
    pub evidence: JsonArg,
    #[arg(long, required = true)]
    pub input: JsonArg,
    /// The NEW run's owner handle.
    #[arg(long = "owner-file", required = true)]
    pub owner_file: PathBuf,
    /// The recovery run's approval policy (our extension): a gate for an
    /// ungated run, or constraints added to the carried gate.
    #[arg(long = "approval-policy")]
    pub approval_policy: Option<JsonArg>,
    #[command(flatten)]
    #[serde(flatten)]
    pub gate: GateArgs,
}

/// The last flags of a gate that hands a run on (resume,
/// recovery-run-create): sign the head it leaves, and when it happens.
#[derive(Debug, Args, serde::Deserialize)]
pub struct GateArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub sign: SignHeadKeyArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub at: AtArg,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct HandoffArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub sign: SignHeadKeyArg,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ReportArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: MutationArgs,
    #[arg(long, required = true)]
    pub input: JsonArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub at: AtArg,
}

pub fn dispatch(
    command: RecoveryCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    Ok(match command {
        RecoveryCommands::Resume(args) => args.gate.sign.gate(
            root,
            "resume",
            || {
                resume(
                    &args.mutation.open(root, env, args.gate.at.value()?)?,
                    &args.new_owner_file,
                    &crate::store::handle::OwnerToken::generate(),
                )
            },
            |answer| &answer.committed.run_id,
        )?,
        RecoveryCommands::RecoveryRunCreate(args) => {
            let policy = args
                .approval_policy
                .map(|file| crate::commands::init::PolicyRequest {
                    file,
                    initiated_by: crate::commands::approval::ApprovalEnv::from_process()
                        .initiated_by(),
                });
            let request = RecoveryRequest {
                run_id: &args.run_id,
                input: &args.input,
                owner_file: &args.owner_file,
                evidence: &args.evidence,
                approval_policy: policy.as_ref(),
                entropy: &crate::commands::init::InitEntropy::fresh_at(args.gate.at.at.as_deref())?,
            };
            args.gate.sign.gate(
                root,
                "recovery-run-create",
                || recovery_run_create(root, env, &request),
                |answer| &answer.new_run_id,
            )?
        }
        RecoveryCommands::HandoffCreate(args) => args.sign.gate(
            root,
            "handoff-create",
            || {
                let report = &args.report;
                let ctx = report.common.context(root, env, report.at.value()?);
                create_report(&ctx, ReportKind::Handoff, &report.input)
            },
            |answer| &answer.head.run_id,
        )?,
        RecoveryCommands::LiveReportCreate(args) => {
            let ctx = args.common.context(root, env, args.at.value()?);
            Success::of(
                "live-report-create",
                &create_report(&ctx, ReportKind::Live, &args.input)?,
            )
        }
    })
}
