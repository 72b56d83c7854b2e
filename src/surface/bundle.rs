//! The commands that take a run off the machine (contracts/bundle.md):
//! bundle-export, bundle-verify, publish, attest; and otel-export
//! (contracts/otel.md).

use crate::store::root::StateRoot;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::Success;
use crate::commands::FlowResult;
use crate::commands::bundle;
use crate::receipt::primitives::format_now;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BundleCommands {
    BundleExport(BundleExportArgs),
    BundleVerify(BundleVerifyArgs),
    Attest(AttestArgs),
    Publish(PublishArgs),
    OtelExport(OtelExportArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct OtelExportArgs {
    /// The run to export (a Phase 2 run).
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The OTLP/HTTP traces URL to send to (e.g. http://localhost:4318/v1/traces).
    #[arg(long, value_name = "URL", conflicts_with = "out")]
    pub endpoint: Option<String>,
    /// Write OTLP/JSON to this file instead (outside the state root).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing file at --out (never a symlink or a non-file).
    #[arg(long, requires = "out")]
    #[serde(default)]
    pub force: bool,
    /// A request header KEY=VALUE for the receiver (e.g. an API key); repeatable; the value is never printed.
    #[arg(long, action = clap::ArgAction::Append, value_name = "KEY=VALUE", conflicts_with = "out")]
    #[serde(default)]
    pub header: Vec<String>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct PublishArgs {
    /// The run to publish.
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The git repository to publish into (default: the run's repo_root).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The ref to publish onto (default: refs/bluetape/runs/<RUN_ID>).
    #[arg(long = "ref", value_name = "REF")]
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct AttestArgs {
    /// The completed run to attest.
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The signer key file that key-generate wrote (mode 0600).
    #[arg(long, required = true, value_name = "FILE")]
    pub key: PathBuf,
    /// Where to write the DSSE envelope (JSON), outside the state root.
    #[arg(long, required = true, value_name = "FILE")]
    pub out: PathBuf,
    /// Replace an existing file at --out (never a symlink or a non-file).
    #[arg(long)]
    #[serde(default)]
    pub force: bool,
    /// Sign a completed run whose receipt records breaches of our rules
    /// (refused without it, exit 6): the breaches go into the predicate,
    /// whose type is then run-completion-with-breaches/v1.
    #[arg(long = "allow-breaches")]
    #[serde(default)]
    pub allow_breaches: bool,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct BundleExportArgs {
    /// The run to export (a Phase 2 run).
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// Where to write the bundle (a new .tar file outside the state root).
    #[arg(long, required = true, value_name = "FILE")]
    pub out: PathBuf,
    /// Replace an existing file at --out (never a symlink or a non-file).
    #[arg(long)]
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct BundleVerifyArgs {
    /// The bundle tar that bundle-export wrote.
    #[arg(
        value_name = "FILE",
        required_unless_present = "git",
        conflicts_with = "git"
    )]
    pub file: Option<PathBuf>,
    /// A git repository holding a publication (instead of FILE); needs --ref.
    #[arg(long, value_name = "DIR", requires = "git_ref")]
    pub git: Option<PathBuf>,
    /// The publication's ref in --git, e.g. refs/bluetape/runs/<RUN_ID>.
    #[arg(long = "ref", id = "git_ref", value_name = "REF", requires = "git")]
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
    /// A file of verifier keys (one per line, as key-generate prints): every signed head in the bundle must verify with them; repeatable.
    #[arg(long, action = clap::ArgAction::Append, value_name = "FILE")]
    #[serde(default)]
    pub key: Vec<PathBuf>,
    /// A signed head kept elsewhere: the bundle's receipt must extend it.
    #[arg(long, value_name = "FILE")]
    pub head: Option<PathBuf>,
    /// The instant liveness is judged at in the summary: a UTC timestamp ending in Z (default: now).
    #[arg(long, value_name = "UTC")]
    pub at: Option<String>,
    /// table (default on a terminal) or json (default otherwise).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<super::views::StatusFormat>,
}

pub fn dispatch(
    command: BundleCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    let now = || format_now(chrono::Utc::now());
    Ok(match command {
        BundleCommands::BundleExport(args) => Success::of(
            "bundle-export",
            &bundle::export(root, &args.run_id, &args.out, &env.cwd, args.force)?,
        ),
        BundleCommands::Attest(args) => {
            let key = crate::commands::transparency::load_signer_key(root, &args.key)?;
            Success::of(
                "attest",
                &crate::commands::attest::attest(
                    root,
                    &args.run_id,
                    &key,
                    &args.out,
                    &env.cwd,
                    args.force,
                    args.allow_breaches,
                )?,
            )
        }
        BundleCommands::OtelExport(args) => Success::of(
            "otel-export",
            &crate::commands::otel::export(
                root,
                &crate::commands::otel::ExportArgs {
                    run_id: args.run_id,
                    endpoint: args.endpoint,
                    out: args.out,
                    force: args.force,
                    headers: args.header,
                },
                &crate::commands::otel::OtelEnv::from_process(),
                &env.cwd,
            )?,
        ),
        BundleCommands::Publish(args) => Success::of(
            "publish",
            &crate::commands::publish::publish(
                root,
                &args.run_id,
                args.repo.as_deref(),
                args.git_ref.as_deref(),
                &env.cwd,
            )?,
        ),
        BundleCommands::BundleVerify(args) => {
            let at = args.at.unwrap_or_else(now);
            let head = args.head.map(|h| env.cwd.join(h));
            let keys: Vec<PathBuf> = args.key.iter().map(|k| env.cwd.join(k)).collect();
            let verified = match (&args.file, &args.git, &args.git_ref) {
                (Some(file), None, None) => {
                    bundle::verify_file(root, &env.cwd.join(file), &keys, head.as_deref(), &at)?
                }
                (None, Some(dir), Some(reference)) => crate::commands::publish::verify_git(
                    root,
                    &env.cwd.join(dir),
                    reference,
                    &keys,
                    head.as_deref(),
                    &at,
                )?,
                _ => {
                    return Err(crate::coordinator::decide::InputRule::BundleVerifyArgs.into());
                }
            };
            Success::tabled("bundle-verify", verified, super::terminal::bundle_table)
        }
    })
}
