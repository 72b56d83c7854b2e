//! The JSON inputs both test layers build: the integration bed and the
//! coordinator's unit tests (`src/coordinator/test_ledger.rs` includes
//! this file), so a component or an evidence list has one shape in both.

use serde_json::{Value, json};

/// `[{"kind": "test", "summary": summary}]`.
pub fn ev(summary: &str) -> Value {
    json!([{"kind": "test", "summary": summary}])
}

/// A component as `topology-register` takes it (no coverage).
pub fn component(id: &str, owner: &str, required: bool, checks: &[&str], deps: &[&str]) -> Value {
    json!({
        "id": id, "required": required, "description": format!("Component {id}"),
        "owner_lane": owner, "required_checks": checks, "dependencies": deps,
        "evidence_refs": [], "coverage_state": "missing",
    })
}
