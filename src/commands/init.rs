//! `init`: create the state-root skeleton if needed, a run directory, its
//! frozen manifest snapshot, the first receipt event and the owner handle.
//! Everything that can be checked is checked before anything is created;
//! a failure after the run directory exists removes it again.

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

use super::error::{ErrorKind, FlowError, FlowResult};
use super::ledger::open_run;
use crate::coordinator::approval::ApprovalPolicy;
use crate::coordinator::raced::Raced;
use crate::receipt::event::EventDraft;
use crate::receipt::manifest::{ManifestContract, bundled};
use crate::receipt::primitives::{Instant, RunId, format_now, is_identifier};
use crate::receipt::rules::{EventContract, check_event};
use crate::store::approval::write_policy_file;
use crate::store::handle::{
    OwnerToken, check_new_handle_path, create_handle, discard_handle, publish_handle,
};
use crate::store::layout::{check_state_root, ensure_skeleton, resolve_repo_root};
use crate::store::paths::expand_tilde;
use crate::store::run::{AckHead, RunDir};
use crate::store::{StoreError, discovery::DiscoveryEnv};

/// What `init` was asked for.
#[derive(Debug, Clone)]
pub struct InitRequest {
    pub workflow_type: String,
    pub repo_root: PathBuf,
    pub owner_file: PathBuf,
    pub components: Vec<String>,
}

/// The values `init` takes from the clock and the random source, passed in
/// so a run can be reproduced exactly.
#[derive(Debug, Clone)]
pub struct InitEntropy {
    /// The wall clock (litter ages are judged by it).
    pub now: Instant,
    /// `--at`: the time the run records (its id and first event), when
    /// given; `now` otherwise (contracts/commands.md "One clock").
    pub recorded: Option<Instant>,
    /// 8 lowercase hex characters for the run id.
    pub run_suffix: String,
    pub token: OwnerToken,
    /// 32 hex characters naming the staging handle.
    pub staging_suffix: String,
}

/// The result printed by the CLI.
#[derive(Debug, Clone)]
pub struct InitOutcome {
    pub run_id: String,
    pub checksum: String,
    pub component_ids: Vec<String>,
    pub workflow_type: String,
}

fn dedupe(components: &[String]) -> FlowResult<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for id in components {
        if !is_identifier(id) {
            return Err(FlowError::from(InputRefusal::Identifier {
                field: "component_id".into(),
            }));
        }
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    Ok(ids)
}

/// What the new run's `run_created` carries besides `owner_epoch` and a
/// frozen approval policy: nothing for `init`; the approval evidence and
/// the provenance for a recovery run.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstEvent {
    pub evidence_refs: Value,
    /// Metadata beyond `owner_epoch` (the recovery provenance).
    pub metadata: Map<String, Value>,
}

impl FirstEvent {
    /// Its evidence, after the frozen policy's binding when there is one:
    /// the policy is bound by the run's first event.
    pub fn evidence_after(&self, policy: Option<&ApprovalPolicy>) -> Value {
        let binding = policy.map(|p| p.evidence_item());
        let own = self.evidence_refs.as_array().into_iter().flatten().cloned();
        Value::Array(binding.into_iter().chain(own).collect())
    }
}

impl Default for FirstEvent {
    fn default() -> Self {
        FirstEvent {
            evidence_refs: json!([]),
            metadata: Map::new(),
        }
    }
}

/// Where a new run's frozen approval policy comes from.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// `init --approval-policy FILE` (validated as user input).
    Input(PolicyRequest),
    /// A policy already frozen by another run (carried into its recovery
    /// run, so that recovering a run never sheds its gate).
    Frozen(ApprovalPolicy),
}

/// `init --approval-policy FILE` (our extension): the policy input and
/// `BLUETAPE_INITIATED_BY` (trimmed; `None` when unset or blank).
#[derive(Debug, Clone)]
pub struct PolicyRequest {
    pub file: crate::store::input::JsonArg,
    pub initiated_by: Option<String>,
}

/// Run `init`.
pub fn init(
    root: &StateRoot,
    env: &DiscoveryEnv,
    request: &InitRequest,
    entropy: &InitEntropy,
) -> FlowResult<InitOutcome> {
    init_run(root, env, request, entropy, &FirstEvent::default(), None).map(|(outcome, _)| outcome)
}

/// Run `init`, freezing an approval policy when one is given (see
/// [`init_run`]).
pub fn init_with_policy(
    root: &StateRoot,
    env: &DiscoveryEnv,
    request: &InitRequest,
    entropy: &InitEntropy,
    policy_request: Option<&PolicyRequest>,
) -> FlowResult<(InitOutcome, Option<String>)> {
    let source = policy_request.cloned().map(PolicySource::Input);
    init_run(
        root,
        env,
        request,
        entropy,
        &FirstEvent::default(),
        source.as_ref(),
    )
}

/// Create a run whose first event carries `first` (init, recovery runs),
/// freezing an approval policy when one is given. The policy is validated
/// after the reference's own checks and before anything is created; it is
/// written to `runs/<id>/approval-policy.json` and bound into `run_created`
/// as an evidence item. Also returns the policy's chained checksum.
pub fn init_run(
    root: &StateRoot,
    env: &DiscoveryEnv,
    request: &InitRequest,
    entropy: &InitEntropy,
    first: &FirstEvent,
    policy_source: Option<&PolicySource>,
) -> FlowResult<(InitOutcome, Option<String>)> {
    let manifest = bundled()?;
    let workflow_types = manifest.contract["workflow_types"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !workflow_types
        .iter()
        .any(|t| t.as_str() == Some(request.workflow_type.as_str()))
    {
        let known: Vec<&str> = workflow_types.iter().filter_map(Value::as_str).collect();
        return Err(FlowError::from(InputRule::UnknownWorkflowType).taught(
            crate::coordinator::decide::Teaching {
            detail: Some(format!(
                "'{}' (known: {})",
                request.workflow_type,
                known.join(", ")
            )),
            hint: Some(format!(
                "pass one of the manifest's workflow types: --workflow-type {}",
                known.join(" | ")
            )),
            fields: Some(serde_json::json!({
                "input": "--workflow-type",
                "invalid": [{"field": "--workflow-type", "expected": format!("one of {}", known.join(", "))}],
                "allowed": known,
            })),
        }));
    }
    if request.components.is_empty() {
        return Err(FlowError::from(InputRule::NoComponents));
    }
    let component_ids = dedupe(&request.components)?;
    let repo = crate::store::paths::absolute(
        &expand_tilde(&request.repo_root, env.home.as_ref()),
        &env.cwd,
    );
    let repo = resolve_repo_root(&repo)?;
    let repo_text = repo
        .to_str()
        .ok_or_else(|| FlowError::from(InputRule::RepoRootNotUtf8))?
        .to_string();
    if root.at(root).is_symlink() {
        return Err(StoreError::invalid("state root must not be a symlink").into());
    }
    let owner_file = expand_tilde(&request.owner_file, env.home.as_ref());
    let owner_target = check_new_handle_path(root, &owner_file, &env.cwd)?;
    check_state_root(root)?;
    let policy = match policy_source {
        None => None,
        Some(PolicySource::Input(p)) => Some(super::approval::read_policy_input(
            root,
            &p.file,
            p.initiated_by.as_deref(),
            env,
        )?),
        Some(PolicySource::Frozen(policy)) => Some(policy.clone()),
    };
    let run_id = format!(
        "{}-{}",
        entropy
            .recorded
            .unwrap_or(entropy.now)
            .format("%Y%m%dT%H%M%SZ"),
        entropy.run_suffix
    );
    let Some(id) = RunId::parse(&run_id) else {
        return Err(FlowError::from(InputRefusal::Identifier {
            field: "run_id".into(),
        }));
    };

    ensure_skeleton(root)?;
    // The secret that authenticates our derived files (trust-model §2).
    crate::store::secret::ensure_key(root)?;
    // A killed init leaves a run directory without a receipt and a staging
    // handle; remove those that are provably dead before making another.
    crate::store::litter::remove_dead_init_litter(root, entropy.now.into());
    let run = RunDir::new(root, &id);
    run.create()?;
    let staging = crate::store::handle::staging_handle_path(root, &entropy.staging_suffix);
    let mut published = false;
    let result = create_run(
        &NewRun {
            run: &run,
            manifest: &manifest,
            request,
            entropy,
            component_ids: &component_ids,
            repo_root: &repo_text,
            staging: &staging,
            owner_target: &owner_target,
            policy: policy.as_ref(),
            first,
        },
        &mut published,
    );
    if result.is_err() && !published {
        discard_handle(root, &staging);
        run.discard();
    }
    let checksum = result?;
    Ok((
        InitOutcome {
            run_id,
            checksum,
            component_ids,
            workflow_type: request.workflow_type.clone(),
        },
        policy.map(|p| p.checksum()),
    ))
}

/// Everything `init` has settled before it creates the run: the
/// directory, the manifest, the caller's request and the checked values.
struct NewRun<'a> {
    run: &'a RunDir,
    manifest: &'a ManifestContract,
    request: &'a InitRequest,
    entropy: &'a InitEntropy,
    component_ids: &'a [String],
    repo_root: &'a str,
    /// Where the handle is made before it is published at `owner_target`.
    staging: &'a Path,
    owner_target: &'a Path,
    policy: Option<&'a ApprovalPolicy>,
    first: &'a FirstEvent,
}

fn create_run(new: &NewRun<'_>, published: &mut bool) -> FlowResult<String> {
    let NewRun {
        run,
        manifest,
        request,
        entropy,
        component_ids,
        repo_root,
        staging,
        owner_target,
        policy,
        first,
    } = *new;
    let handle = create_handle(run.root.at(staging), &run.run_id, 1, &entropy.token)?;
    let mut snapshot = manifest.contract.as_object().cloned().unwrap_or_default();
    snapshot.insert(
        "_run".into(),
        json!({
            "component_ids": component_ids,
            "initial_owner_epoch": 1,
            "manifest_hash": manifest.hash,
            "owner_epoch": 1,
            "owner_fingerprint": handle.fingerprint,
            "repo_root": repo_root,
            "workflow_type": request.workflow_type,
        }),
    );
    run.write_manifest(&Value::Object(snapshot))?;
    // The frozen policy exists before the event that binds it.
    if let Some(policy) = policy {
        write_policy_file(run, &policy.file_bytes())?;
    }
    let evidence = first.evidence_after(policy);

    // The first event goes through the same open → lock → verify path as
    // every append, against the snapshot just written.
    let opened = open_run(&run.root, &run.run_id)?;
    let draft = EventDraft {
        run_id: run.run_id.to_string(),
        lane_id: None,
        agent_id: None,
        sequence: 1,
        event_type: crate::receipt::vocab::EventType::RunCreated,
        from_state: None,
        to_state: Some("planned".into()),
        timestamp: format_now(entropy.recorded.unwrap_or(entropy.now)),
        owner_token: handle.fingerprint.clone(),
        manifest_hash: opened.manifest.contract.hash.clone(),
        previous_checksum: String::new(),
        evidence_refs: evidence,
        reason: None,
        metadata: Some({
            let mut metadata = first.metadata.clone();
            metadata.insert("owner_epoch".into(), json!(1));
            Value::Object(metadata)
        }),
    };
    let sealed = draft.seal();
    let contract = EventContract {
        family: opened.manifest.contract.family,
        event_types: &opened.manifest.contract.event_types,
        limits: &opened.manifest.contract.limits,
        epoch: 1,
    };
    check_event(&sealed.event, &contract).map_err(ErrorKind::Contract)?;
    if (sealed.line.len() as u64 - 1) > opened.manifest.contract.limits.max_receipt_line_bytes {
        return Err(FlowError::from(InputRule::ReceiptLineTooLong));
    }
    {
        let _guard = run.receipt_lock().acquire()?;
        if run.has_receipt() {
            return Err(FlowError::from(Raced::ReceiptAppeared));
        }
        run.append_receipt(&sealed.line)?;
        run.write_head(&AckHead {
            sequence: 1,
            checksum: sealed.checksum.clone(),
            byte_length: sealed.line.len() as u64,
            canonical_through: 1,
        })?;
        let cache = crate::coordinator::simple::simple_run_cache(
            &run.run_id,
            &opened.manifest.contract.hash,
            [&sealed.event],
        );
        run.write_cache(&run.run_cache_path(), &cache)?;
    }

    // Publish the handle under its requested name: a hard link never
    // follows a symlink and fails if anything is already there.
    publish_handle(&run.root, staging, owner_target)?;
    *published = true;
    Ok(sealed.checksum.into())
}

/// What `init` answers (beyond the envelope): the new run at its first
/// event, its owner at epoch 1.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InitAnswer {
    pub run_id: String,
    pub sequence: u64,
    pub checksum: String,
    pub owner_epoch: u64,
    pub component_ids: Vec<String>,
    pub workflow_type: String,
    /// The frozen approval policy's checksum (our extension), when `init`
    /// was given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy_checksum: Option<String>,
}

impl InitOutcome {
    /// Its answer, with the approval policy's checksum when there is one.
    pub fn answer(self, approval_policy_checksum: Option<String>) -> InitAnswer {
        InitAnswer {
            run_id: self.run_id,
            sequence: 1,
            checksum: self.checksum,
            owner_epoch: 1,
            component_ids: self.component_ids,
            workflow_type: self.workflow_type,
            approval_policy_checksum,
        }
    }
}
