//! `handoff-create` and `live-report-create` (reference-coordinator §13):
//! store a report's canonical bytes under `reports/` (0600) and bind their
//! SHA-256 and the pre-event receipt head into the receipt. The file is
//! written under the receipt lock right before the append, and removed
//! again if the append does not happen, so a refusal leaves nothing.

use crate::store::input::JsonArg;
use serde::Serialize;

use super::error::{FlowError, FlowResult};
use super::mutate::{MutationAnswer, MutationContext, mutate_staged, open_for_mutation};
use crate::coordinator::decide::Policy;
use crate::coordinator::report_refusal::ReportRefusal;
use crate::coordinator::reports::{
    Binding, ReportKind, ReportOutput, bind_report, binding_status, decide_report,
    require_report_state, validate_report_payload,
};
use crate::coordinator::resume::require_current_owner;
use crate::store::handle::read_handle;
use crate::store::input::InputShape;
use crate::store::paths::expand_tilde;
use crate::store::reports::{
    ReportFile, bound_report_checksum, check_report_file, check_reports_dir, remove_report,
    write_report,
};

/// What `handoff-create` and `live-report-create` answer: the state
/// envelope (of the event that bound the report, or of the head when it
/// was already bound) and the report's binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportAnswer {
    #[serde(flatten)]
    pub head: MutationAnswer,
    #[serde(flatten)]
    pub report: ReportOutput,
}

/// Create (or confirm) the report of `kind` from the `--input` payload.
pub fn create_report(
    ctx: &MutationContext,
    kind: ReportKind,
    input: &JsonArg,
) -> FlowResult<ReportAnswer> {
    let run = open_for_mutation(ctx)?;
    let payload = ctx.read_input(input, InputShape::Object)?;
    run.dir.validate()?;
    // A report binds the current head; like any mutation it may start from
    // a checkpoint the unchanged receipt proves (reports are not gates).
    let (state, _, _) = super::checkpoint::load_state(&run, false)?;
    let owner_path = expand_tilde(&ctx.owner_file, ctx.env.home.as_ref());
    let owner = read_handle(ctx.root.at(&owner_path), None)?;
    require_current_owner(&state, &owner.fingerprint, owner.epoch)?;
    require_report_state(&state, kind)?;
    let policy = Policy::from_contract(
        &run.manifest.contract.contract,
        &run.manifest.contract.limits,
    );
    let payload = validate_report_payload(kind, &payload, &policy.limits)?;
    let report = bind_report(
        &state,
        kind,
        &ctx.run_id,
        &run.manifest.contract.hash,
        payload,
    )?;
    check_reports_dir(&ctx.root)?;
    if binding_status(&state, &report)? == Binding::AlreadyBound {
        // Idempotent: the same binding is in the receipt; its file must
        // still hold the bound bytes. Nothing is appended (no CAS either).
        let found = bound_report_checksum(&ctx.root, &report.relative_path());
        if found.as_ref() != Some(&report.checksum) {
            return Err(FlowError::from(ReportRefusal::BoundFileChanged {
                path: report.relative_path(),
                bound: report.checksum.clone(),
                found,
            }));
        }
        return Ok(ReportAnswer {
            head: MutationAnswer::at_head(&ctx.run_id, &state),
            report: report.output(),
        });
    }
    if check_report_file(&ctx.root, &report.file_name, &report.bytes)? == ReportFile::Differs {
        return Err(FlowError::from(ReportRefusal::OrphanDiffers {
            path: report.relative_path(),
        }));
    }
    let mut created = false;
    let committed = mutate_staged(
        ctx,
        &run,
        |input| decide_report(input.state, &report),
        || {
            created = write_report(&ctx.root, &report.file_name, &report.bytes)?;
            Ok(())
        },
    );
    let committed = match committed {
        Ok(committed) => committed,
        Err(error) => {
            if created {
                remove_report(&ctx.root, &report.file_name);
            }
            return Err(error);
        }
    };
    Ok(ReportAnswer {
        head: committed.answer(&ctx.run_id),
        report: report.output(),
    })
}
