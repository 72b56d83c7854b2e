//! The transparency commands (contracts/transparency.md):
//! key-generate, sign-head, prove-event, prove-append, check-proof, and the
//! `--sign-head-key` the phase-closing gates accept.

use super::Success;
use crate::store::root::StateRoot;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use crate::commands::FlowResult;
use crate::commands::transparency::{
    self, ProofInput, load_signer_key, load_verifier_keys, sign_after_gate,
};
use crate::receipt::signed_head::SignerKey;
use crate::store::discovery::DiscoveryEnv;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransparencyCommands {
    KeyGenerate(KeyGenerateArgs),
    SignHead(SignHeadArgs),
    ProveEvent(ProveEventArgs),
    ProveAppend(ProveAppendArgs),
    CheckProof(CheckProofArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct KeyGenerateArgs {
    /// The key name in the signed heads (no spaces, no '+'), e.g. ci.example/bluetape.
    #[arg(long, required = true, value_name = "NAME")]
    pub name: String,
    /// Where to write the signer key (created at 0600; never over an existing file).
    #[arg(long, required = true, value_name = "FILE")]
    pub out: PathBuf,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct SignHeadArgs {
    /// The run whose head to sign.
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The signer key file that key-generate wrote (mode 0600).
    #[arg(long, required = true, value_name = "FILE")]
    pub key: PathBuf,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ProveEventArgs {
    /// The run holding the event.
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The event's sequence (1 to the head's size).
    #[arg(long, required = true, value_name = "SEQUENCE")]
    pub sequence: u64,
    /// The signed head to prove against (default: the newest stored head).
    #[arg(long, value_name = "FILE")]
    pub head: Option<PathBuf>,
    /// Also write the proof text to this new file (0600; never over a file).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ProveAppendArgs {
    /// The run whose heads to relate.
    #[arg(long = "run-id", required = true, value_name = "RUN_ID")]
    pub run_id: String,
    /// The older signed head (a note file).
    #[arg(long, required = true, value_name = "FILE")]
    pub from: PathBuf,
    /// The newer signed head (default: the newest stored head).
    #[arg(long, value_name = "FILE")]
    pub head: Option<PathBuf>,
    /// Also write the proof (canonical JSON) to this new file (0600; never over a file).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct CheckProofArgs {
    /// An inclusion proof (c2sp.org/tlog-proof text) that prove-event wrote; needs --event.
    #[arg(
        long,
        value_name = "FILE",
        requires = "event",
        conflicts_with = "append"
    )]
    pub proof: Option<PathBuf>,
    /// The event line the inclusion proof is about (the receipt line, LF optional).
    #[arg(long, value_name = "FILE", requires = "proof")]
    pub event: Option<PathBuf>,
    /// A consistency proof (JSON) that prove-append wrote.
    #[arg(long, value_name = "FILE")]
    pub append: Option<PathBuf>,
    /// A file of verifier keys (one per line, as key-generate prints); repeatable.
    #[arg(long, required = true, action = clap::ArgAction::Append, value_name = "FILE")]
    #[serde(default)]
    pub key: Vec<PathBuf>,
    /// Require the heads to be of this run (origin bluetape-flow/<RUN_ID>).
    #[arg(long = "run-id", value_name = "RUN_ID")]
    pub run_id: Option<String>,
}

pub fn dispatch(
    command: TransparencyCommands,
    root: &StateRoot,
    _env: &DiscoveryEnv,
) -> FlowResult<Success> {
    Ok(match command {
        TransparencyCommands::KeyGenerate(args) => Success::of(
            "key-generate",
            &transparency::key_generate(root, &args.name, &args.out)?,
        ),
        TransparencyCommands::SignHead(args) => {
            let key = load_signer_key(root, &args.key)?;
            Success::of(
                "sign-head",
                &transparency::sign_head(root, &args.run_id, &key)?,
            )
        }
        TransparencyCommands::ProveEvent(args) => Success::of(
            "prove-event",
            &transparency::prove_event(
                root,
                &args.run_id,
                args.sequence,
                args.head.as_deref(),
                args.out.as_deref(),
            )?,
        ),
        TransparencyCommands::ProveAppend(args) => Success::of(
            "prove-append",
            &transparency::prove_append(
                root,
                &args.run_id,
                &args.from,
                args.head.as_deref(),
                args.out.as_deref(),
            )?,
        ),
        TransparencyCommands::CheckProof(args) => {
            let keys = load_verifier_keys(root, &args.key)?;
            let input = match (&args.proof, &args.event, &args.append) {
                (Some(proof), Some(event), None) => ProofInput::Inclusion { proof, event },
                (None, None, Some(append)) => ProofInput::Append(append),
                _ => {
                    return Err(crate::coordinator::decide::InputRule::CheckProofArgs.into());
                }
            };
            Success::of(
                "check-proof",
                &transparency::check_proof(root, input, &keys, args.run_id.as_deref())?,
            )
        }
    })
}

/// `--sign-head-key FILE` of the gates that close a phase.
#[derive(Debug, Args, Clone, serde::Deserialize)]
pub struct SignHeadKeyArg {
    /// Sign the head this command leaves with this signer key file (mode 0600); checked before anything is written.
    #[arg(long = "sign-head-key", value_name = "FILE")]
    pub sign_head_key: Option<PathBuf>,
}

impl SignHeadKeyArg {
    /// Load the key before the gate runs (exit 2 on a bad key file).
    pub fn load(&self, root: &StateRoot) -> FlowResult<Option<SignerKey>> {
        self.sign_head_key
            .as_deref()
            .map(|path| load_signer_key(root, path))
            .transpose()
    }

    /// Run a gate and sign the head it left on `run_id(answer)` into its
    /// answer; the key is loaded first, so a bad key file refuses the gate
    /// before it writes anything.
    pub fn gate<A: serde::Serialize>(
        &self,
        root: &StateRoot,
        operation: &'static str,
        gate: impl FnOnce() -> FlowResult<A>,
        run_id: impl FnOnce(&A) -> &str,
    ) -> FlowResult<Success> {
        let key = self.load(root)?;
        let answer = gate()?;
        let mut success = Success::of(operation, &answer);
        if let Some(key) = &key {
            let (name, value) = sign_after_gate(root, run_id(&answer), key);
            success.data.insert(name, value);
        }
        Ok(success)
    }
}
