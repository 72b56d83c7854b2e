//! The liveness commands (reference-coordinator §6): the read-only
//! `liveness-check`, and `heartbeat`, `stall-record`, `stall-clear`,
//! `probe-sent`, `interrupt-result` on top of the mutation pipeline. Each
//! mutation takes its [`OpenMutation`] (run opened, evidence read) → reads
//! its other JSON inputs → pure prechecks → one commit with the pure in-lock
//! decision.

use crate::coordinator::decide::InputRule;
use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};
use std::path::Path;

use super::error::{FlowError, FlowResult};
use super::lanes::LaneFlags;
use super::ledger::open_run;
use super::mutate::{MutationAnswer, MutationContext, OpenMutation};
use crate::coordinator::decide::Policy;
use crate::coordinator::decide::Teaching;
use crate::coordinator::inputs::HeartbeatInput;
use crate::coordinator::liveness::{
    CommandStatus, LaneStep, StallRecord, check_lane, decide_heartbeat, decide_interrupt_result,
    decide_probe_sent, decide_stall_clear, decide_stall_record, precheck_heartbeat,
    precheck_interrupt_result, precheck_probe_sent, precheck_stall_clear, precheck_stall_record,
};
use crate::coordinator::liveness::{LivenessDecision, LivenessExplanation};
use crate::coordinator::liveness::{explain, parse_instant};
use crate::receipt::canonical;
use crate::store::input::InputShape;
use serde::Serialize;

/// Read an object input file (`--input`, `--decision`).
fn read_object(ctx: &MutationContext, path: &JsonArg) -> FlowResult<Map<String, Value>> {
    match ctx.read_json(path, InputShape::Object, "--decision")? {
        Value::Object(map) => Ok(map),
        _ => Err(FlowError::from(InputRule::WrongTopLevelType)),
    }
}

/// `liveness-check --explain` / `--decision-out FILE` (cli-conventions §5): the
/// extra keys, and where to write the decision file (relative to `cwd`).
#[derive(Debug, Clone, Copy)]
pub struct Explain<'a> {
    pub decision_out: Option<&'a Path>,
    pub cwd: &'a Path,
}

/// What `liveness-check` answers (contracts/commands.md "Liveness"): the
/// decision, what `--explain` adds, and the head it was decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LivenessCheckAnswer {
    /// `action` and `reason`.
    #[serde(flatten)]
    pub decision: LivenessDecision,
    /// `--explain` (or `--decision-out`) only.
    #[serde(flatten)]
    pub explanation: Option<LivenessExplanation>,
    /// `--decision-out` only: the file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_out: Option<String>,
    /// The run and the head the lane was judged at (nothing is committed).
    #[serde(flatten)]
    pub head: MutationAnswer,
}

/// `liveness-check`: read-only (no lock, no writes). Loads the state from a
/// checkpoint the unchanged receipt proves, else verifies and replays the
/// whole receipt; then evaluates one lane at `--at`.
pub fn liveness_check(
    root: &StateRoot,
    run_id: &str,
    lane_id: &str,
    at: &str,
    command: CommandStatus,
    extra: Option<Explain<'_>>,
) -> FlowResult<LivenessCheckAnswer> {
    let run = open_run(root, run_id)?;
    run.require_phase2()?;
    let (state, _, _) = super::checkpoint::load_state(&run, false)?;
    let policy = Policy::from_contract(
        &run.manifest.contract.contract,
        &run.manifest.contract.limits,
    );
    let decision = check_lane(&state, &policy, lane_id, at, command)?;
    let mut answer = LivenessCheckAnswer {
        decision,
        explanation: None,
        decision_out: None,
        head: MutationAnswer::at_head(run_id, &state),
    };
    if let Some(extra) = extra {
        // check_lane found the lane and parsed --at.
        if let (Some(lane), Ok(now)) = (state.lane(lane_id), parse_instant(at)) {
            answer.explanation = Some(explain(lane, &policy, now, &decision));
        }
        if let Some(path) = extra.decision_out {
            let mut bytes = canonical::to_vec(&Value::Object(decision.to_json()));
            bytes.push(b'\n');
            let written = crate::store::output::write_view_file(path, extra.cwd, root, &bytes, false)
                .map_err(|e| {
                    FlowError::from(e).taught(Teaching {
                        detail: Some(format!("--decision-out {}", path.display())),
                        hint: Some("--decision-out writes a new file (0600) outside the state root: it never replaces a file and never follows a symlink; name a new path".into()),
                        fields: Some(json!({"input": "--decision-out", "file": path.display().to_string()})),
                    })
                })?;
            answer.decision_out = Some(written.display().to_string());
        }
    }
    Ok(answer)
}

/// `heartbeat --input --evidence`.
pub fn heartbeat(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let input = mutation.ctx.read_timed_input::<HeartbeatInput>(input)?;
    let heartbeat = precheck_heartbeat(&input)?;
    mutation.commit(|d| decide_heartbeat(d.state, d.policy, &heartbeat, &mutation.evidence))
}

/// `stall-record --decision --reason`.
pub fn stall_record(
    mutation: &OpenMutation,
    flags: LaneFlags<'_>,
    reason: &str,
    decision: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let decision = read_object(&mutation.ctx, decision)?;
    let request = StallRecord {
        lane_id: flags.lane_id,
        agent_id: flags.agent_id,
        at: flags.at,
        reason,
        decision: &decision,
        evidence: &mutation.evidence,
    };
    let at = precheck_stall_record(&request)?;
    mutation.commit(|d| decide_stall_record(d.state, d.policy, &request, at))
}

/// `stall-clear --reason`.
pub fn stall_clear(
    mutation: &OpenMutation,
    flags: LaneFlags<'_>,
    reason: &str,
) -> FlowResult<MutationAnswer> {
    let step = lane_step(flags, &mutation.evidence);
    precheck_stall_clear(&step)?;
    mutation.commit(|d| decide_stall_clear(d.state, d.policy, &step, reason))
}

/// `probe-sent --deadline`.
pub fn probe_sent(
    mutation: &OpenMutation,
    flags: LaneFlags<'_>,
    deadline: &str,
) -> FlowResult<MutationAnswer> {
    let step = lane_step(flags, &mutation.evidence);
    let instants = precheck_probe_sent(&step, deadline)?;
    mutation.commit(|d| decide_probe_sent(d.state, d.policy, &step, deadline, instants))
}

/// `interrupt-result`.
pub fn interrupt_result(
    mutation: &OpenMutation,
    flags: LaneFlags<'_>,
) -> FlowResult<MutationAnswer> {
    let step = lane_step(flags, &mutation.evidence);
    let at = precheck_interrupt_result(&step)?;
    mutation.commit(|d| decide_interrupt_result(d.state, d.policy, &step, at))
}

fn lane_step<'a>(flags: LaneFlags<'a>, evidence: &'a Value) -> LaneStep<'a> {
    LaneStep {
        lane_id: flags.lane_id,
        agent_id: flags.agent_id,
        at: flags.at,
        evidence,
    }
}
