//! The approval gate on top of the mutation pipeline (our extension;
//! `contracts/approvals.md`): `run-approve` and `run-cancel` under a frozen
//! approver policy, the policy input of `init`, and the read-only
//! `approvals` view.
//!
//! The policy is re-read under the receipt lock, in the pipeline's gather
//! step, against the head the append is about to extend: the chain is
//! verified from genesis (the binding lives in `run_created`), the policy
//! file must match the chained checksum, the pinned credential is read;
//! then the pure rules of [`crate::coordinator::approval`] decide on those
//! values. Nothing but the seal, the append and its fsync follows.

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use serde::Serialize;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::{ErrorKind, FlowError, FlowResult};
use super::ledger::{OpenRun, open_run, verify_receipt};
use super::lifecycle::decided_at;
use super::mutate::{DecideOn, DecisionInput, MutationAnswer, OpenMutation, mutate_gathered};
use crate::coordinator::approval::{
    ApprovalLedger, ApprovalPolicy, Claim, Credential, Decision, Gate, PolicyStatus,
    SignatureClaim, decide_approve, decide_deny,
};
use crate::coordinator::breach::{APPROVAL_GATE, Breach};
use crate::coordinator::run_commands::precheck_run_transition;
use crate::coordinator::{CoordinatorState, OnRefusal};
use crate::store::approval::{read_credential, read_policy_file};
use crate::store::discovery::DiscoveryEnv;
use crate::store::input::{InputShape, read_json_input};
use crate::store::paths::{absolute, expand_tilde};

/// The approval gate's process facts, captured once (like
/// [`DiscoveryEnv`]) so tests can pin them. Identity never travels in argv.
#[derive(Debug, Clone, Default)]
pub struct ApprovalEnv {
    /// `BLUETAPE_APPROVED_BY`: who approves or denies.
    pub approved_by: Option<OsString>,
    /// `BLUETAPE_APPROVER_FILE`: the approver's credential file.
    pub approver_file: Option<OsString>,
    /// `BLUETAPE_INITIATED_BY`: who initiates the run (read by `init`).
    pub initiated_by: Option<OsString>,
}

impl ApprovalEnv {
    /// A variable's trimmed text; blank means unset. Text that is not
    /// UTF-8 is kept lossily so the identity rules refuse it.
    fn text(value: Option<&OsString>) -> Option<String> {
        let text = value?.to_string_lossy();
        let trimmed = text.trim();
        (!trimmed.is_empty()).then(|| trimmed.to_string())
    }

    pub fn approved_by(&self) -> Option<String> {
        Self::text(self.approved_by.as_ref())
    }

    pub fn initiated_by(&self) -> Option<String> {
        Self::text(self.initiated_by.as_ref())
    }

    /// The credential path (`~` expanded, relative to the working
    /// directory), if set and not blank.
    pub fn approver_file(&self, env: &DiscoveryEnv) -> Option<PathBuf> {
        let value = self.approver_file.as_ref().filter(|v| !v.is_empty())?;
        Some(absolute(
            &expand_tilde(Path::new(value), env.home.as_ref()),
            &env.cwd,
        ))
    }
}

/// Read and validate an `init --approval-policy` file (before anything is
/// created).
pub fn read_policy_input(
    root: &StateRoot,
    path: &JsonArg,
    initiated_by: Option<&str>,
    env: &DiscoveryEnv,
) -> FlowResult<ApprovalPolicy> {
    let value = read_json_input(
        root,
        path,
        InputShape::Object,
        env.home.as_ref(),
        "--approval-policy",
    )?;
    ApprovalPolicy::from_input(&value, initiated_by).map_err(FlowError::contract)
}

/// The approval gate of a recovery run (trust-model §2 promise 5,
/// contracts/approvals.md "Recovery"): carried from the source or refused.
/// `fresh` is the policy the caller named with `--approval-policy`. What
/// decides is the trusted prefix only, never a search of raw bytes:
///
/// * The source's first line verifies and binds a policy: the policy file
///   must match the bound checksum, and that frozen gate is carried (a
///   missing, loose or edited file is refused, exit 3: the gate cannot be
///   read, so it cannot be carried). `fresh` may only add constraints to
///   it ([`ApprovalPolicy::adds_to`]; exit 2 otherwise). A breach of our
///   rules standing in the trusted prefix refuses a recovery that does not
///   name the gate (exit 5 `rule_breach`); named, it must still add.
/// * The first line verifies and binds none, and no policy file lies
///   beside it: the source is proven ungated; the recovery run is ungated
///   unless `fresh` adds a gate (an unbound policy file is refused, exit 3).
/// * The first line cannot be trusted: the source's gate can be neither
///   read nor proven absent, so a recovery run could lose it: refused
///   (exit 3), whatever `fresh` says; the hint names `init` (a new run, its
///   gate named afresh), the way on that claims nothing about the source.
pub fn recovery_gate(
    run: &OpenRun,
    fresh: Option<ApprovalPolicy>,
) -> FlowResult<Option<ApprovalPolicy>> {
    let mut ledger = ApprovalLedger::default();
    let mut first_verified = false;
    // Only the first line matters for the binding: stop after it.
    let _ = verify_receipt(run, |event| {
        first_verified = true;
        ledger.observe_ref(event);
        Err(String::new())
    })?;
    let cannot = |problem: &str| {
        ErrorKind::ReceiptCorrupt(format!(
            "the damaged run's approval policy cannot be carried into a recovery run: {problem}"
        ))
    };
    if !first_verified {
        return Err(ErrorKind::ReceiptCorrupt(
            "the damaged run's first line cannot be trusted, so whether it had an approval gate can be neither read nor proven absent: a recovery run could lose it".into(),
        )
        .taught(crate::coordinator::decide::Teaching {
            detail: None,
            hint: Some("nothing of the damaged run can be carried (no event is trusted): start a new run with bluetape-flow init (--approval-policy FILE for its gate); the damaged run stays as it is for inspection".into()),
            fields: Some(json!({"next_command": "init"})),
        }));
    }
    let carried = if !ledger.has_policy() {
        if crate::store::approval::policy_file_exists(&run.dir) {
            return Err(cannot(
                "a policy file is present but the first event binds none, so the run cannot be proven ungated",
            ).into());
        }
        None
    } else {
        match PolicyStatus::resolve(&ledger, Some(read_policy_file(&run.dir))) {
            PolicyStatus::Frozen { policy, .. } => Some(policy),
            PolicyStatus::Absent => {
                return Err(cannot("its first event binds no readable policy").into());
            }
            PolicyStatus::Tampered { problem, .. } => return Err(cannot(&problem).into()),
        }
    };
    let Some(carried) = carried else {
        return Ok(fresh);
    };
    let breaches = super::rebuild::replay_verdict(run)?
        .map(|(_, state)| state.breaches().to_vec())
        .unwrap_or_default();
    match fresh {
        None => {
            if !breaches.is_empty() {
                crate::coordinator::breach::refuse_breaches(
                    &breaches,
                    "recovery-run-create without --approval-policy",
                )?;
            }
            Ok(Some(carried))
        }
        Some(policy) => match policy.adds_to(&carried) {
            Ok(()) => Ok(Some(policy)),
            Err(loosened) => Err(FlowError::from(InputRefusal::PolicyLoosened {
                loosened: loosened.to_string(),
            })),
        },
    }
}

/// Fold the whole verified receipt into the approval ledger.
fn read_ledger(run: &OpenRun, holding_lock: bool) -> FlowResult<(ApprovalLedger, String)> {
    let mut ledger = ApprovalLedger::default();
    let position = verify_receipt(run, |event| {
        ledger.observe_ref(event);
        Ok(())
    })?
    .intact(run, holding_lock)?;
    Ok((ledger, position.checksum))
}

/// The gate's view of a run: its ledger and the frozen policy's status.
fn read_gate(
    run: &OpenRun,
    holding_lock: bool,
) -> FlowResult<(ApprovalLedger, PolicyStatus, String)> {
    let (ledger, head) = read_ledger(run, holding_lock)?;
    let file = ledger.binding.as_ref().map(|_| read_policy_file(&run.dir));
    let status = PolicyStatus::resolve(&ledger, file);
    Ok((ledger, status, head))
}

/// The in-lock step: the gate read against the head the pipeline loaded.
fn read_gate_in_lock(
    run: &OpenRun,
    state: &CoordinatorState,
) -> Result<(ApprovalLedger, PolicyStatus), FlowError> {
    let corrupt = ErrorKind::ReceiptCorrupt;
    let (ledger, status, head) = read_gate(run, true).map_err(|e| corrupt(e.message().into()))?;
    if head != state.last_checksum() {
        return Err(corrupt("receipt head does not match the loaded state".into()).into());
    }
    Ok((ledger, status))
}

/// `run-approve`: the reference's transition, gated by the frozen policy.
pub fn approve(
    mutation: &OpenMutation,
    approval_env: &ApprovalEnv,
    signature: Option<&Path>,
) -> FlowResult<MutationAnswer> {
    let ctx = &mutation.ctx;
    let at = decided_at(ctx)?;
    precheck_run_transition(&mutation.evidence)?;
    let identity = approval_env.approved_by();
    let credential_path = approval_env.approver_file(&ctx.env);
    let signature = signature.map(|path| SignatureClaim {
        run_id: ctx.run_id.clone(),
        file: crate::store::approval::read_signature_file(ctx.root.at(&absolute(
            &expand_tilde(path, ctx.env.home.as_ref()),
            &ctx.env.cwd,
        ))),
    });
    // Read under the lock, before the decision: the gate against the head
    // the pipeline loaded, and the credential the policy pins.
    let gather = |input: &DecisionInput<'_>| {
        let (ledger, status) = read_gate_in_lock(&mutation.run, input.state)?;
        let credential = match (&credential_path, status.pins_credential()) {
            (_, false) | (None, true) => Credential::NotGiven,
            (Some(path), true) => match read_credential(ctx.root.at(path)) {
                Ok(c) => Credential::Read {
                    approver: c.approver,
                    fingerprint: c.fingerprint,
                },
                Err(e) => Credential::Unusable(e.message().to_string()),
            },
        };
        Ok((ledger, status, credential))
    };
    let committed = mutate_gathered(
        ctx,
        &mutation.run,
        DecideOn::FullReplay,
        gather,
        |input, (ledger, status, credential)| {
            if status != PolicyStatus::Absent {
                crate::coordinator::breach::require_no_breach(input.state, "run-approve")?;
            }
            let claim = Claim {
                identity: identity.clone(),
                credential,
                signature: signature.clone(),
            };
            decide_approve(
                input.state,
                Gate {
                    status: &status,
                    ledger: &ledger,
                },
                &claim,
                input.now,
                &at,
                &mutation.evidence,
                &input.policy.limits,
            )
        },
    )?;
    Ok(committed.answer(&ctx.run_id))
}

/// `run-cancel`: always allowed; under a policy a cancel from `planned` or
/// `approved` is a denial and records `BLUETAPE_APPROVED_BY` when set. The
/// chain is only read for such a denial (the receipt is short then).
pub fn cancel(
    mutation: &OpenMutation,
    reason: &str,
    approval_env: &ApprovalEnv,
) -> FlowResult<MutationAnswer> {
    use crate::coordinator::RunState;
    let at = decided_at(&mutation.ctx)?;
    precheck_run_transition(&mutation.evidence)?;
    let identity = approval_env.approved_by();
    // A denial is recorded against the gate: read it under the lock first.
    let gather = |input: &DecisionInput<'_>| {
        Ok(
            if matches!(
                input.state.run_state_enum(),
                RunState::Planned | RunState::Approved
            ) {
                read_gate_in_lock(&mutation.run, input.state)?.0
            } else {
                ApprovalLedger::default()
            },
        )
    };
    let committed = mutate_gathered(
        &mutation.ctx,
        &mutation.run,
        DecideOn::FullReplay,
        gather,
        |input, ledger| {
            decide_deny(
                input.state,
                &ledger,
                identity.as_deref(),
                &at,
                &mutation.evidence,
                Some(reason),
                &input.policy.limits,
            )
        },
    )?;
    Ok(committed.answer(&mutation.ctx.run_id))
}

/// What `approvals` answers (contracts/approvals.md): the frozen policy,
/// whether its file still matches the chained checksum, how identities are
/// proven, and every decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalsAnswer {
    pub run_id: String,
    /// The chained checksum; `null` for a run without a policy (or whose
    /// binding cannot be read).
    pub policy_checksum: Option<String>,
    /// The frozen policy; `null` when there is none or its file does not
    /// match.
    pub policy: Option<ApprovalPolicy>,
    /// `null` without a policy.
    pub policy_file_matches: Option<bool>,
    /// Why the policy file does not match (a tampered policy only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_problem: Option<String>,
    /// How the policy proves who approved (runs with a policy only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_proof: Option<&'static str>,
    pub decisions: Vec<ShownDecision>,
    /// The breaches of our rules that stand in the receipt, when any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<Breach>,
}

/// One approve/deny decision as `approvals` shows it: the record, how it
/// proves who decided, and the breach replay found at it, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownDecision {
    #[serde(flatten)]
    pub decision: Decision,
    /// `signed` or `asserted` ([`Decision::proof`]).
    pub proof: &'static str,
    /// The signing key's fingerprint of a signed decision, else `null`.
    pub key: Option<String>,
    /// What replay found when the decision breaks the approval gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breach: Option<String>,
}

/// `approvals`: the frozen policy, whether its file still matches, and
/// every approve/deny decision. Read-only; a tampered policy file is
/// reported, not refused.
pub fn approvals(root: &StateRoot, run_id: &str) -> FlowResult<ApprovalsAnswer> {
    let run = open_run(root, run_id)?;
    run.require_phase2()?;
    run.dir.validate()?;
    // One pass: the approval ledger and the replay that applies the gate
    // (and our other rules) to every event, whoever wrote it.
    let replay_policy = super::rebuild::replay_policy(&run);
    let mut state = run.origin().ok().as_ref().map(CoordinatorState::new);
    let mut ledger = ApprovalLedger::default();
    verify_receipt(&run, |event| {
        ledger.observe_ref(event);
        if let Some(replaying) = state.as_mut()
            && replaying
                .apply_ref(event, &replay_policy, OnRefusal::Spoil)
                .is_err()
        {
            state = None;
        }
        Ok(())
    })?
    .intact(&run, false)?;
    let file = ledger.binding.as_ref().map(|_| read_policy_file(&run.dir));
    let status = PolicyStatus::resolve(&ledger, file);
    let breaches = state.map(|s| s.breaches().to_vec()).unwrap_or_default();
    let (policy, policy_file_matches, policy_problem) = match &status {
        PolicyStatus::Absent => (None, None, None),
        PolicyStatus::Frozen { policy, .. } => (Some(policy.clone()), Some(true), None),
        PolicyStatus::Tampered { problem, .. } => (None, Some(false), Some(problem.clone())),
    };
    let decisions = ledger
        .decisions
        .iter()
        .map(|d| {
            let (proof, key) = d.proof(&status, &breaches);
            ShownDecision {
                decision: d.clone(),
                proof,
                key,
                breach: breaches
                    .iter()
                    .find(|b| b.sequence == d.sequence && b.rule == APPROVAL_GATE)
                    .map(|b| b.found.clone()),
            }
        })
        .collect();
    Ok(ApprovalsAnswer {
        run_id: run_id.to_string(),
        policy_checksum: status.checksum().map(str::to_string),
        policy,
        policy_file_matches,
        policy_problem,
        identity_proof: (status != PolicyStatus::Absent).then(|| identity_proof(&status)),
        decisions,
        breaches,
    })
}

/// How the policy proves who approved, in plain words.
fn identity_proof(status: &PolicyStatus) -> &'static str {
    match status {
        PolicyStatus::Frozen { policy, .. } if policy.approver_key.is_some() => {
            "identity signed with the pinned approver key, verified on replay"
        }
        PolicyStatus::Frozen { policy, .. } if policy.approver_fingerprint.is_some() => {
            "identity asserted with a pinned credential, not signed"
        }
        _ => "identity asserted, not signed",
    }
}

/// What `approval-statement` answers (contracts/approvals.md): what the
/// written statement binds, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatementAnswer {
    pub run_id: String,
    /// The receipt head the statement names.
    pub head: String,
    /// The frozen policy's chained checksum.
    pub policy_checksum: String,
    /// The SSH signature namespace `ssh-keygen -Y sign -n` must use.
    pub namespace: &'static str,
    /// The statement file written (absolute).
    pub out: String,
}

/// `approval-statement --run-id ID --out FILE` (read-only for the state
/// root): write the canonical statement the approver signs for the run's
/// current head. The run must be `planned`, verify in full, carry no
/// breach, and its frozen policy must pin an `approver_key`. FILE is
/// created new (never replaced).
pub fn approval_statement(
    root: &StateRoot,
    env: &DiscoveryEnv,
    run_id: &str,
    out: &Path,
) -> FlowResult<StatementAnswer> {
    let run = open_run(root, run_id)?;
    run.require_phase2()?;
    run.dir.validate()?;
    let (state, position) = super::rebuild::replay_run(&run, false)?;
    crate::coordinator::breach::require_no_breach(&state, "approval-statement")?;
    let (policy, checksum) = match state.gate() {
        PolicyStatus::Frozen { policy, checksum } => (policy, checksum),
        PolicyStatus::Absent => {
            return Err(FlowError::from(InputRule::NoApprovalPolicy));
        }
        PolicyStatus::Tampered { problem, .. } => {
            return Err(ErrorKind::ReceiptCorrupt(problem.clone()).into());
        }
    };
    if policy.approver_key.is_none() {
        return Err(FlowError::from(InputRule::UnsignedApprovalPolicy));
    }
    if state.run_state_enum() != crate::coordinator::RunState::Planned {
        return Err(ErrorKind::RunStateRefused {
            state: state.run_state_enum(),
            allowed: vec![crate::coordinator::RunState::Planned],
        }
        .into());
    }
    let bytes = crate::coordinator::signed::statement(run_id, &position.checksum, checksum);
    let path = absolute(&expand_tilde(out, env.home.as_ref()), &env.cwd);
    if path.starts_with(root) || path.starts_with(absolute(root, &env.cwd)) {
        return Err(FlowError::from(InputRule::StatementInStateRoot));
    }
    crate::store::approval::write_statement(root.at(&path), &bytes)?;
    Ok(StatementAnswer {
        run_id: run_id.to_string(),
        head: position.checksum,
        policy_checksum: checksum.clone(),
        namespace: crate::coordinator::signed::NAMESPACE,
        out: path.to_string_lossy().into_owned(),
    })
}
