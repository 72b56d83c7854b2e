//! `recovery-run-create` (reference-coordinator §12.2): supersede a damaged
//! run. The damaged receipt is never modified, truncated or continued: its
//! bytes are copied into `quarantine/` (0600, immutable) and a brand-new,
//! independent run starts `planned`, its first event carrying the approval
//! evidence and the provenance. Retrying with the same owner file returns
//! the same recovery run. A refusal leaves no quarantine copy behind
//! (decisions.md 11); a missing receipt is recoverable (decisions.md 17).

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

use super::error::{ErrorKind, FlowError, FlowResult};
use super::init::{FirstEvent, InitEntropy, InitRequest, PolicySource, init_run};
use super::inspect::diagnose;
use super::ledger::{OpenRun, Verdict, open_run, verify_receipt};
use crate::coordinator::approval::ApprovalPolicy;
use crate::coordinator::recovery::{
    ExistingRecovery, ProvenanceInput, check_request, provenance, quarantine_name,
    require_no_live_writer, require_receipt_identity, require_same_diagnosis,
    require_same_recovery, supplied_diagnosis,
};
use crate::coordinator::recovery_refusal::{DiagnosisCheck, RecoveryRefusal};
use crate::receipt::primitives::is_identifier;
use crate::receipt::rules::check_evidence;
use crate::store::discovery::DiscoveryEnv;
use crate::store::handle::{check_new_owner_path, read_handle, read_handle_json};
use crate::store::input::{InputShape, read_json_input};
use crate::store::lock::DirLock;
use crate::store::paths::expand_tilde;
use crate::store::quarantine::{
    QuarantineCopy, quarantine_copy, relative_quarantine_path, remove_quarantine_copy,
};

/// What `recovery-run-create` was asked for.
#[derive(Debug, Clone)]
pub struct RecoveryRequest<'a> {
    pub run_id: &'a str,
    /// The `receipt-diagnose` output (or its object).
    pub input: &'a JsonArg,
    /// The NEW run's owner handle (may exist: a retry).
    pub owner_file: &'a Path,
    /// The approval evidence.
    pub evidence: &'a JsonArg,
    /// `--approval-policy`: the recovery run's gate, when the damaged run's
    /// cannot be carried (see [`super::approval::recovery_gate`]).
    pub approval_policy: Option<&'a super::init::PolicyRequest>,
    /// The clock and random values a new recovery run is made with (read
    /// once, by the CLI).
    pub entropy: &'a InitEntropy,
}

/// The diagnosis object as `receipt-diagnose` computes it now, without its
/// checksum, as JSON: it is compared key by key with the diagnosis the
/// caller recorded.
fn current_diagnosis(root: &StateRoot, run_id: &str) -> FlowResult<Map<String, Value>> {
    let Value::Object(mut current) = json!(diagnose(root, run_id)?) else {
        unreachable!("a diagnosis is a struct, which serialises to an object");
    };
    current.remove("diagnosis_checksum");
    Ok(current)
}

/// Path text like Python's `str(Path(p))`: `.` components and repeated or
/// trailing slashes dropped.
fn path_text(path: &Path) -> String {
    path.components()
        .collect::<PathBuf>()
        .to_string_lossy()
        .into_owned()
}

/// What `recovery-run-create` answers: the recovery run (new, or the one
/// a retry names), its owner handle, and where the damaged receipt's bytes
/// are kept (contracts/commands.md "Owner transfer, recovery and bound
/// reports"). No state envelope: nothing was appended to the damaged run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryAnswer {
    pub new_run_id: String,
    /// The new owner handle as the caller named it (`str(Path(p))`).
    pub owner_file: String,
    /// A recovery run is a new run: its owner starts at epoch 1.
    pub owner_epoch: u64,
    /// The quarantined copy, relative to the state root.
    pub quarantine_path: String,
    /// SHA-256 of the damaged receipt's bytes.
    pub quarantine_hash: String,
    /// The checksum of the diagnosis the recovery was approved on.
    pub diagnosis_checksum: String,
}

/// Run `recovery-run-create`.
pub fn recovery_run_create(
    root: &StateRoot,
    env: &DiscoveryEnv,
    request: &RecoveryRequest<'_>,
) -> FlowResult<RecoveryAnswer> {
    let run = open_run(root, request.run_id)?;
    run.require_phase2()?;
    let read = |given, shape, flag| read_json_input(root, given, shape, env.home.as_ref(), flag);
    let input = read(request.input, InputShape::Object, "--input")?;
    let approval = read(request.evidence, InputShape::List, "--evidence")?;
    let fresh = match request.approval_policy {
        Some(p) => Some(super::approval::read_policy_input(
            root,
            &p.file,
            p.initiated_by.as_deref(),
            env,
        )?),
        None => None,
    };
    run.dir.validate()?;
    let supplied = supplied_diagnosis(input.as_object().cloned().unwrap_or_default());
    let checksum = check_request(&supplied, &approval).map_err(|error| {
        // A diagnosis of an intact receipt whose head record names no head
        // (DEVIATIONS 104): not a recovery, the command that fixes it is named.
        let intact = supplied.diagnosis.get("effective_state") != Some(&json!("blocked"));
        if intact && supplied.diagnosis.contains_key("head_record_finding") {
            error.taught(crate::coordinator::decide::Teaching {
                detail: Some("the receipt verifies; only its head record receipt-head.json (ours, derived) names no head".into()),
                hint: Some(format!(
                    "bluetape-flow rebuild --run-id {} rewrites the head record from the receipt; nothing needs recovering",
                    request.run_id
                )),
                fields: Some(json!({"next_command": "rebuild"})),
            })
        } else {
            error
        }
    })?;
    let diagnosis = &supplied.diagnosis;
    require_same_diagnosis(
        &current_diagnosis(root, request.run_id)?,
        diagnosis,
        DiagnosisCheck::BeforeLock,
    )?;
    require_no_live_writer(diagnosis)?;
    let (receipt_hash, receipt_size) = run.dir.receipt_identity()?;
    require_receipt_identity(diagnosis, &receipt_hash, receipt_size)?;
    let owner_path = expand_tilde(request.owner_file, env.home.as_ref());
    // The new run's handle is `<root>/handles/<name>`, reached from the
    // held state root; outputs keep the path the caller gave.
    let owner_in_root = check_new_owner_path(root, &owner_path, &env.cwd, true)?;
    let name = quarantine_name(request.run_id, &receipt_hash);
    let quarantine_path = relative_quarantine_path(&name);
    let provenance = provenance(
        &ProvenanceInput {
            original_run_id: request.run_id,
            diagnosis_checksum: &checksum,
            manifest_version: &run.manifest.contract.version,
            manifest_hash: &run.manifest.contract.hash,
            quarantine_path: &quarantine_path,
            quarantine_hash: &receipt_hash,
        },
        diagnosis,
    )?;
    // Everything the new run's first event must satisfy is checked before
    // the quarantine copy exists.
    check_evidence(&approval, &run.manifest.contract.limits).map_err(|m| {
        crate::coordinator::decide::evidence_refusal(m, &approval, &run.manifest.contract.limits)
    })?;
    let damaged_run = run.manifest.run.clone().unwrap_or_default();
    let policy = super::approval::recovery_gate(&run, fresh)?;

    let lock = DirLock::recovery(root, request.run_id);
    let _guard = lock.acquire()?;
    require_same_diagnosis(
        &current_diagnosis(root, request.run_id)?,
        diagnosis,
        DiagnosisCheck::BeforeQuarantine,
    )?;
    let copy = quarantine_copy(
        root,
        &name,
        &run.dir.receipt_path(),
        (&receipt_hash, receipt_size),
    )?;
    match copy {
        QuarantineCopy::Created | QuarantineCopy::AlreadyPresent => {}
        QuarantineCopy::Differs => {
            return Err(FlowError::from(RecoveryRefusal::QuarantineDiffers { name }));
        }
        QuarantineCopy::CopyMismatch => {
            return Err(FlowError::from(RecoveryRefusal::QuarantineUnverified {
                name,
            }));
        }
    }
    let first = FirstEvent {
        evidence_refs: approval,
        metadata: provenance.clone(),
    };
    let result = supersede(
        root,
        env,
        &owner_in_root,
        &first,
        policy.as_ref(),
        &damaged_run,
        request.entropy,
    );
    let new_run_id = match result {
        Ok(new_run_id) => new_run_id,
        Err(error) => {
            if copy == QuarantineCopy::Created {
                remove_quarantine_copy(root, &name);
            }
            return Err(error);
        }
    };
    Ok(RecoveryAnswer {
        new_run_id,
        owner_file: path_text(&owner_path),
        owner_epoch: 1,
        quarantine_path,
        quarantine_hash: receipt_hash,
        diagnosis_checksum: checksum,
    })
}

/// The recovery run: the existing one a retry names, or a new one.
fn supersede(
    root: &StateRoot,
    env: &DiscoveryEnv,
    owner_path: &Path,
    first: &FirstEvent,
    policy: Option<&ApprovalPolicy>,
    damaged_run: &Map<String, Value>,
    entropy: &InitEntropy,
) -> FlowResult<String> {
    if root.at(owner_path).exists_no_follow() {
        // The first event a recovery run made here carries the carried
        // policy's binding ahead of the approval evidence.
        return existing_recovery(
            root,
            owner_path,
            &first.metadata,
            &first.evidence_after(policy),
            damaged_run,
        );
    }
    let text = |key: &str| {
        damaged_run
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| FlowError::from(InputRefusal::DamagedRunField { key: key.into() }))
    };
    let components = match damaged_run.get("component_ids") {
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| id.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>(),
        _ => None,
    }
    .ok_or_else(|| FlowError::from(InputRule::DamagedRunComponents))?;
    let request = InitRequest {
        workflow_type: text("workflow_type")?,
        repo_root: PathBuf::from(text("repo_root")?),
        owner_file: owner_path.to_path_buf(),
        components,
    };
    let source = policy.cloned().map(PolicySource::Frozen);
    let (outcome, _) = init_run(root, env, &request, entropy, first, source.as_ref())?;
    Ok(outcome.run_id)
}

/// A retry: the handle names a recovery run that must be this recovery.
fn existing_recovery(
    root: &StateRoot,
    owner_path: &Path,
    provenance: &Map<String, Value>,
    approval: &Value,
    damaged_run: &Map<String, Value>,
) -> FlowResult<String> {
    let invalid_handle = || FlowError::from(RecoveryRefusal::ExistingHandleInvalid);
    let payload = read_handle_json(root.at(owner_path), "recovery owner handle")?
        .ok_or_else(invalid_handle)?;
    let run_id = match payload.get("run_id") {
        None => return Err(invalid_handle()),
        Some(Value::String(id)) if is_identifier(id) => id.clone(),
        Some(_) => {
            return Err(FlowError::from(InputRefusal::Identifier {
                field: "recovery run id".into(),
            }));
        }
    };
    let handle = read_handle(root.at(owner_path), Some(&run_id))?;
    let invalid_run = || {
        FlowError::from(RecoveryRefusal::ExistingRunInvalid {
            run_id: run_id.clone(),
        })
    };
    let recovery = match open_run(root, &run_id) {
        Ok(run) => run,
        Err(e) if matches!(e.kind(), ErrorKind::IncompatibleManifest(_)) => return Err(e),
        Err(_) => return Err(invalid_run()),
    };
    recovery.dir.validate().map_err(|_| invalid_run())?;
    let first_event = first_verified_event(&recovery).map_err(|_| invalid_run())?;
    let Some(first_event) = first_event else {
        return Err(invalid_run());
    };
    let existing_run = recovery.manifest.run.clone().unwrap_or_default();
    require_same_recovery(
        &ExistingRecovery {
            run_id: &run_id,
            first_event: &first_event,
            run: &existing_run,
            handle_fingerprint: &handle.fingerprint,
            handle_epoch: handle.epoch,
        },
        provenance,
        approval,
        damaged_run,
    )?;
    Ok(run_id)
}

/// The first event of a receipt that verifies completely.
fn first_verified_event(run: &OpenRun) -> FlowResult<Option<Map<String, Value>>> {
    let mut first = None;
    let verdict = verify_receipt(run, |event| {
        if first.is_none() {
            first = Some(event.to_map());
        }
        Ok(())
    })?;
    match verdict {
        Verdict::Intact(_) => Ok(first),
        _ => Err(FlowError::from(RecoveryRefusal::ExistingRunInvalid {
            run_id: run.dir.run_id.to_string(),
        })),
    }
}
