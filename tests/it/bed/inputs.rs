//! The JSON inputs both test layers build, and what both expect of them:
//! the integration bed and the coordinator's unit tests
//! (`src/coordinator/test_ledger.rs` includes this file), so a component,
//! an evidence list or a reassignment has one shape in both.

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

/// `value` with `key` set to `v`: one field of a valid input changed.
pub fn with(mut value: Value, key: &str, v: Value) -> Value {
    value[key] = v;
    value
}

/// Write scopes every scope field refuses before any path is looked at
/// (`write_scope` of lane-create, `replacement_write_scope` of
/// lane-reassign), with the reference's message.
pub fn write_scope_refusals() -> [(Value, &'static str); 4] {
    [
        (json!("src"), "write_scope must be a bounded list"),
        (json!(["../x"]), "write scope must not contain traversal"),
        (
            json!(["src/../lib"]),
            "write scope must not contain traversal",
        ),
        (
            json!(["/abs"]),
            "write scope must be canonical and relative",
        ),
    ]
}

/// The lane-reassign input of the stall-replace story: `build` (agent-1)
/// is replaced by `build-2` for agent-2 from checkpoint 3.
pub fn reassign_input() -> Value {
    json!({
        "lane_id": "build", "replacement_lane_id": "build-2",
        "replacement_agent_id": "agent-2", "decided_at": "2026-07-14T01:11:00Z",
        "replacement_assignment": "Resume build from checkpoint 3",
        "replacement_write_scope": ["src/runtime"],
        "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
        "replacement_command_deadline": "2026-07-14T01:30:00Z",
    })
}

/// The recovery evidence lane-reassign needs.
pub fn checkpoint_evidence() -> Value {
    json!([{"kind": "recovery", "summary": "checkpoint 3 recovered from agent-1 notes"}])
}

/// The two lanes after [`reassign_input`] committed, as their caches (or
/// `to_json`) show them: `build` replaced and reserved for `build-2`, and
/// `build-2` pending for agent-2 under parent `build`.
#[track_caller]
pub fn assert_reassigned(original: &Value, child: &Value) {
    assert_eq!(original["state"], "replaced");
    assert_eq!(original["replacement_lane_id"], "build-2");
    assert_eq!(
        original["replacement_reservation"]["replacement_agent_id"],
        "agent-2"
    );
    assert_eq!(child["state"], "pending");
    assert_eq!(child["agent_id"], "agent-2");
    assert_eq!(child["parent_lane_id"], "build");
    assert_eq!(child["replacement_count"], 1);
    assert_eq!(child["write_scope"], json!(["src/runtime"]));
}
