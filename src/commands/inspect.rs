//! Read-only inspection: `receipt-diagnose` (Phase 1 and 2) and
//! `resume-check` (Phase 2). Both validate the run directory, verify and
//! replay the whole receipt, and never write anything.

use crate::coordinator::decide::InputRefusal;
use crate::store::root::StateRoot;
use serde::Serialize;
use serde_json::json;

use super::error::FlowResult;
use super::ledger::{OpenRun, Verdict, open_run, verify_receipt};
use crate::coordinator::CoordinatorState;
use crate::coordinator::simple::SimpleRunCache;
use crate::receipt::canonical;
use crate::receipt::rules::Family;

/// What inspection found: a healthy replay or damage with its trusted prefix.
pub enum Inspection {
    Healthy {
        run_state: String,
        sequence: u64,
        checksum: String,
        state: Option<Box<CoordinatorState>>,
    },
    Damaged {
        first_bad: u64,
        trusted_sequence: u64,
        trusted_checksum: String,
    },
}

pub fn inspect_run(run: &OpenRun) -> FlowResult<Inspection> {
    let (verdict, run_state, state) = match run.manifest.contract.family {
        Family::V1_0 => {
            let mut cache = SimpleRunCache::default();
            let verdict = verify_receipt(run, |event| {
                cache.observe(&event.to_map());
                Ok(())
            })?;
            (verdict, cache.state().to_string(), None)
        }
        Family::V1_1 => match super::rebuild::replay_verdict(run)? {
            Some((verdict, state)) => (
                verdict,
                state.run_state().to_string(),
                Some(Box::new(state)),
            ),
            // No initial owner: nothing in the receipt can be trusted.
            None => {
                return Ok(Inspection::Damaged {
                    first_bad: 1,
                    trusted_sequence: 0,
                    trusted_checksum: String::new(),
                });
            }
        },
    };
    Ok(match verdict {
        Verdict::Intact(position) => Inspection::Healthy {
            run_state,
            sequence: position.sequence,
            checksum: position.checksum,
            state,
        },
        Verdict::Damaged(d) => Inspection::Damaged {
            first_bad: d.first_bad_sequence,
            trusted_sequence: d.last_trusted_sequence,
            trusted_checksum: d.last_trusted_checksum,
        },
        Verdict::Rejected {
            sequence,
            trusted_checksum,
            ..
        } => Inspection::Damaged {
            first_bad: sequence,
            trusted_sequence: sequence - 1,
            trusted_checksum,
        },
    })
}

/// What every diagnosis names: the run, its manifest and its lock.
#[derive(Debug, Serialize)]
pub struct RunIdentity {
    pub run_id: String,
    pub manifest_version: String,
    pub manifest_hash: String,
    /// Whether the receipt lock is held, and by a live owner.
    pub lock_owner_status: &'static str,
}

impl RunIdentity {
    fn of(run: &OpenRun) -> RunIdentity {
        RunIdentity {
            run_id: run.dir.run_id.to_string(),
            manifest_version: run.manifest.contract.version.clone(),
            manifest_hash: run.manifest.contract.hash.clone(),
            lock_owner_status: run.dir.receipt_lock().status(),
        }
    }
}

/// Where trust ends in a damaged receipt.
#[derive(Debug, Serialize)]
pub struct DamageFound {
    /// Always `blocked`: nothing goes on in a damaged run.
    pub effective_state: &'static str,
    pub first_bad_sequence: u64,
    pub last_trusted_sequence: u64,
    pub last_trusted_checksum: String,
    /// The receipt file's SHA-256 and size, as found.
    pub receipt_hash: String,
    pub receipt_size: u64,
}

impl DamageFound {
    fn of(
        run: &OpenRun,
        first_bad: u64,
        trusted_sequence: u64,
        trusted_checksum: String,
    ) -> FlowResult<DamageFound> {
        let (receipt_hash, receipt_size) = run.dir.receipt_identity()?;
        Ok(DamageFound {
            effective_state: "blocked",
            first_bad_sequence: first_bad,
            last_trusted_sequence: trusted_sequence,
            last_trusted_checksum: trusted_checksum,
            receipt_hash,
            receipt_size,
        })
    }
}

/// A diagnosis' verdict on the receipt.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum DiagnosedReceipt {
    Intact {
        /// The run state the verified receipt leaves.
        effective_state: String,
        last_trusted_sequence: u64,
        last_trusted_checksum: String,
    },
    Damaged(DamageFound),
}

impl DiagnosedReceipt {
    fn effective_state(&self) -> &str {
        match self {
            DiagnosedReceipt::Intact {
                effective_state, ..
            } => effective_state,
            DiagnosedReceipt::Damaged(damage) => damage.effective_state,
        }
    }
}

/// The diagnosis object `diagnosis_checksum` is the digest of.
#[derive(Debug, Serialize)]
pub struct DiagnosisBody {
    #[serde(flatten)]
    pub run: RunIdentity,
    #[serde(flatten)]
    pub receipt: DiagnosedReceipt,
    /// Why the head record was not used (it names no head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_record_finding: Option<String>,
    /// `rebuild`, for an intact receipt under such a head record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_command: Option<&'static str>,
}

/// What `receipt-diagnose` answers: the diagnosis and its checksum.
#[derive(Debug, Serialize)]
pub struct Diagnosis {
    #[serde(flatten)]
    pub body: DiagnosisBody,
    /// The canonical digest of `body`.
    pub diagnosis_checksum: String,
}

/// `receipt-diagnose`: the diagnosis object plus its checksum.
pub fn diagnose(root: &StateRoot, run_id: &str) -> FlowResult<Diagnosis> {
    let mut run = open_validated(root, run_id)?;
    // Diagnosis always answers: a head record that cannot be read is a
    // finding (an extra key), and the receipt is judged without it.
    let head_finding = run
        .dir
        .read_head()
        .err()
        .map(|e| super::FlowError::from(e).message().to_string());
    run.trust_head = head_finding.is_none();
    let receipt = match inspect_run(&run)? {
        Inspection::Healthy {
            run_state,
            sequence,
            checksum,
            ..
        } => DiagnosedReceipt::Intact {
            effective_state: run_state,
            last_trusted_sequence: sequence,
            last_trusted_checksum: checksum,
        },
        Inspection::Damaged {
            first_bad,
            trusted_sequence,
            trusted_checksum,
        } => DiagnosedReceipt::Damaged(DamageFound::of(
            &run,
            first_bad,
            trusted_sequence,
            trusted_checksum,
        )?),
    };
    // The way out (trust-model §2 promise 9): an intact receipt under a
    // head record that names no head is rebuilt, not recovered.
    let next_command =
        (head_finding.is_some() && receipt.effective_state() != "blocked").then_some("rebuild");
    let body = DiagnosisBody {
        run: RunIdentity::of(&run),
        receipt,
        head_record_finding: head_finding,
        next_command,
    };
    let diagnosis_checksum = canonical::digest(&json!(body));
    Ok(Diagnosis {
        body,
        diagnosis_checksum,
    })
}

/// What `resume-check` answers: where a new owner session stands, or
/// where trust ends in a damaged receipt.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ResumeCheck {
    Healthy {
        #[serde(flatten)]
        run: RunIdentity,
        run_state: String,
        last_sequence: u64,
        last_checksum: String,
        /// Present for every replayed (Phase 2) run.
        #[serde(flatten)]
        resume: Option<crate::coordinator::views::ResumeFields>,
    },
    Damaged {
        #[serde(flatten)]
        run: RunIdentity,
        #[serde(flatten)]
        damage: DamageFound,
    },
}

/// `resume-check`: what a new owner session must look at (Phase 2 only).
pub fn resume_check(root: &StateRoot, run_id: &str) -> FlowResult<ResumeCheck> {
    let run = open_run(root, run_id)?;
    run.require_phase2()?;
    run.dir.validate()?;
    // A checkpoint the unchanged receipt proves answers without a replay.
    let inspection = match super::checkpoint::proven_state(&run) {
        Some((state, position)) => Inspection::Healthy {
            run_state: state.run_state().to_string(),
            sequence: position.sequence,
            checksum: position.checksum,
            state: Some(Box::new(state)),
        },
        None => inspect_run(&run)?,
    };
    Ok(match inspection {
        Inspection::Damaged {
            first_bad,
            trusted_sequence,
            trusted_checksum,
        } => ResumeCheck::Damaged {
            run: RunIdentity::of(&run),
            damage: DamageFound::of(&run, first_bad, trusted_sequence, trusted_checksum)?,
        },
        Inspection::Healthy {
            run_state,
            sequence,
            checksum,
            state,
        } => ResumeCheck::Healthy {
            run: RunIdentity::of(&run),
            run_state,
            last_sequence: sequence,
            last_checksum: checksum,
            resume: state.map(|state| crate::coordinator::views::resume_fields(&state)),
        },
    })
}

/// Open a run for diagnosis: the run directory rules apply (modes, symlinks).
fn open_validated(root: &StateRoot, run_id: &str) -> FlowResult<OpenRun> {
    let Some(id) = crate::receipt::primitives::RunId::parse(run_id) else {
        return Err(super::FlowError::from(InputRefusal::Identifier {
            field: "run id".into(),
        }));
    };
    let dir = crate::store::run::RunDir::new(root, &id);
    if dir.is_absent() {
        return Err(nothing_to_diagnose(root, run_id));
    }
    dir.validate()?;
    open_run(root, run_id)
}

/// `receipt-diagnose` of a run that is not there at all: the reference's
/// exit 2 `contract_error` on the first path that does not exist (said as
/// every OS error is, DEVIATIONS 63), with the real cause in `hint`
/// (DEVIATIONS 90). There is nothing to diagnose, so no `next_command`.
fn nothing_to_diagnose(root: &StateRoot, run_id: &str) -> super::FlowError {
    let runs = root.join("runs");
    let run = runs.join(run_id);
    let first_missing = [root.path(), runs.as_path(), run.as_path()]
        .into_iter()
        .find(|path| !root.at(path).exists_no_follow())
        .unwrap_or(run.as_path());
    let not_found = std::io::Error::from_raw_os_error(nix::libc::ENOENT);
    super::FlowError::from(crate::store::error::StoreError::io(
        &not_found,
        first_missing,
    ))
    .hinted(crate::store::run::MissingRun::of(root, run_id).hint)
}
