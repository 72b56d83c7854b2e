//! Read-only inspection: `receipt-diagnose` (Phase 1 and 2) and
//! `resume-check` (Phase 2). Both validate the run directory, verify and
//! replay the whole receipt, and never write anything.

use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};

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

fn damaged_object(
    run: &OpenRun,
    first_bad: u64,
    trusted_sequence: u64,
    trusted_checksum: String,
) -> FlowResult<Map<String, Value>> {
    let (receipt_hash, receipt_size) = run.dir.receipt_identity()?;
    let mut map = base_object(run);
    map.insert("effective_state".into(), json!("blocked"));
    map.insert("first_bad_sequence".into(), json!(first_bad));
    map.insert("last_trusted_sequence".into(), json!(trusted_sequence));
    map.insert("last_trusted_checksum".into(), json!(trusted_checksum));
    map.insert("receipt_hash".into(), json!(receipt_hash));
    map.insert("receipt_size".into(), json!(receipt_size));
    Ok(map)
}

fn base_object(run: &OpenRun) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("run_id".into(), json!(run.dir.run_id));
    map.insert(
        "manifest_version".into(),
        json!(run.manifest.contract.version),
    );
    map.insert("manifest_hash".into(), json!(run.manifest.contract.hash));
    map.insert(
        "lock_owner_status".into(),
        json!(run.dir.receipt_lock().status()),
    );
    map
}

/// `receipt-diagnose`: the diagnosis object plus its checksum.
pub fn receipt_diagnose(root: &StateRoot, run_id: &str) -> FlowResult<Map<String, Value>> {
    let mut run = open_validated(root, run_id)?;
    // Diagnosis always answers: a head record that cannot be read is a
    // finding (an extra key), and the receipt is judged without it.
    let head_finding = run
        .dir
        .read_head()
        .err()
        .map(|e| super::FlowError::from(e).message().to_string());
    run.trust_head = head_finding.is_none();
    let mut map = match inspect_run(&run)? {
        Inspection::Healthy {
            run_state,
            sequence,
            checksum,
            ..
        } => {
            let mut map = base_object(&run);
            map.insert("effective_state".into(), json!(run_state));
            map.insert("last_trusted_sequence".into(), json!(sequence));
            map.insert("last_trusted_checksum".into(), json!(checksum));
            map
        }
        Inspection::Damaged {
            first_bad,
            trusted_sequence,
            trusted_checksum,
        } => damaged_object(&run, first_bad, trusted_sequence, trusted_checksum)?,
    };
    if let Some(finding) = head_finding {
        map.insert("head_record_finding".into(), json!(finding));
        // The way out (trust-model §2 promise 9): an intact receipt under a
        // head record that names no head is rebuilt, not recovered.
        if map.get("effective_state") != Some(&json!("blocked")) {
            map.insert("next_command".into(), json!("rebuild"));
        }
    }
    let checksum = canonical::digest(&Value::Object(map.clone()));
    map.insert("diagnosis_checksum".into(), json!(checksum));
    Ok(map)
}

/// `resume-check`: what a new owner session must look at (Phase 2 only).
pub fn resume_check(root: &StateRoot, run_id: &str) -> FlowResult<Map<String, Value>> {
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
    match inspection {
        Inspection::Damaged {
            first_bad,
            trusted_sequence,
            trusted_checksum,
        } => damaged_object(&run, first_bad, trusted_sequence, trusted_checksum),
        Inspection::Healthy {
            run_state,
            sequence,
            checksum,
            state,
        } => {
            let mut map = base_object(&run);
            map.insert("run_state".into(), json!(run_state));
            map.insert("last_sequence".into(), json!(sequence));
            map.insert("last_checksum".into(), json!(checksum));
            if let Some(state) = state {
                map.extend(crate::coordinator::views::resume_fields(&state));
            }
            Ok(map)
        }
    }
}

/// Open a run for diagnosis: the run directory rules apply (modes, symlinks).
fn open_validated(root: &StateRoot, run_id: &str) -> FlowResult<OpenRun> {
    let Some(id) = crate::receipt::primitives::RunId::parse(run_id) else {
        return Err(super::FlowError::contract(
            "run id must match the identifier contract",
        ));
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
/// every OS error is, issue 15), with the real cause in `hint`
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
