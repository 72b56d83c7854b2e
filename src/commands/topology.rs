//! The topology commands on top of the mutation pipeline
//! (reference-coordinator §10.1–§10.4): `topology-register`,
//! `topology-remove`, `check-result`, `component-evidence`. Each takes its
//! [`OpenMutation`] (run opened: id, snapshot, phase gate, `--expected-head`
//! syntax; evidence read) → reads its JSON input → pure prechecks → one
//! commit with the pure in-lock decision.

use crate::store::input::JsonArg;

use super::error::FlowResult;
use super::mutate::{MutationAnswer, OpenMutation};
use crate::coordinator::topology::{
    decide_check_result, decide_component_evidence, decide_register, decide_remove,
    precheck_check_result, precheck_component_evidence, precheck_register, precheck_remove,
};
use crate::store::input::InputShape;

/// `topology-register --input <list of components> --evidence`.
pub fn topology_register(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let components = mutation.ctx.read_input(input, InputShape::List)?;
    precheck_register(&mutation.evidence)?;
    mutation.commit(|d| decide_register(d.state, d.policy, &components, &mutation.evidence))
}

/// `topology-remove --component-id --reason --evidence`.
pub fn topology_remove(
    mutation: &OpenMutation,
    component_id: &str,
    reason: &str,
) -> FlowResult<MutationAnswer> {
    precheck_remove(component_id, &mutation.evidence, reason)?;
    mutation.commit(|d| decide_remove(d.state, component_id, reason, &mutation.evidence))
}

/// `check-result --input {component_id, check_id, passed[, reason]} --evidence`.
pub fn check_result(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let input = mutation.ctx.read_input(input, InputShape::Object)?;
    let request = precheck_check_result(&input, &mutation.evidence)?;
    mutation.commit(|d| decide_check_result(d.state, &request, &mutation.evidence))
}

/// `component-evidence --input {component_id} --evidence`.
pub fn component_evidence(mutation: &OpenMutation, input: &JsonArg) -> FlowResult<MutationAnswer> {
    let input = mutation.ctx.read_input(input, InputShape::Object)?;
    let component_id = precheck_component_evidence(&input)?;
    mutation.commit(|d| decide_component_evidence(d.state, &component_id, &mutation.evidence))
}
