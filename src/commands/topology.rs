//! The topology commands on top of the mutation pipeline
//! (reference-coordinator §10.1–§10.4): `topology-register`,
//! `topology-remove`, `check-result`, `component-evidence`. Each: open (run
//! id, snapshot, phase gate, `--expected-head` syntax) → read the JSON
//! inputs (evidence first) → pure prechecks → `mutate` with the pure
//! in-lock decision.

use crate::store::input::JsonArg;

use super::error::FlowResult;
use super::mutate::{MutationAnswer, MutationContext};
use crate::coordinator::topology::{
    decide_check_result, decide_component_evidence, decide_register, decide_remove,
    precheck_check_result, precheck_component_evidence, precheck_register, precheck_remove,
};
use crate::store::input::InputShape;

/// `topology-register --input <list of components> --evidence`.
pub fn topology_register(
    ctx: &MutationContext,
    evidence: &JsonArg,
    input: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let components = ctx.read_input(input, InputShape::List)?;
    precheck_register(&evidence)?;
    ctx.commit(&run, |d| {
        decide_register(d.state, d.policy, &components, &evidence)
    })
}

/// `topology-remove --component-id --reason --evidence`.
pub fn topology_remove(
    ctx: &MutationContext,
    evidence: &JsonArg,
    component_id: &str,
    reason: &str,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    precheck_remove(component_id, &evidence, reason)?;
    ctx.commit(&run, |d| {
        decide_remove(d.state, component_id, reason, &evidence)
    })
}

/// `check-result --input {component_id, check_id, passed[, reason]} --evidence`.
pub fn check_result(
    ctx: &MutationContext,
    evidence: &JsonArg,
    input: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let input = ctx.read_input(input, InputShape::Object)?;
    let request = precheck_check_result(&input, &evidence)?;
    ctx.commit(&run, |d| decide_check_result(d.state, &request, &evidence))
}

/// `component-evidence --input {component_id} --evidence`.
pub fn component_evidence(
    ctx: &MutationContext,
    evidence: &JsonArg,
    input: &JsonArg,
) -> FlowResult<MutationAnswer> {
    let (run, evidence) = ctx.open_with_evidence(evidence)?;
    let input = ctx.read_input(input, InputShape::Object)?;
    let component_id = precheck_component_evidence(&input)?;
    ctx.commit(&run, |d| {
        decide_component_evidence(d.state, &component_id, &evidence)
    })
}
