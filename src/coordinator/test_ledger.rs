//! Test support for the coordinator's decisions: a replayed run built
//! event by event (made-up checksums: the reducer trusts the verified
//! chain), into which a decision's intents are committed the way the
//! pipeline seals them, so every test also proves the reducer accepts what
//! a decision proposes. The run and lane lifecycle (`LaneEvents`) is
//! shared with the reducer's own tests, whose builder tracks owner changes.

use serde_json::{Value, json};

use super::decide::{FlowError, Intent, Policy, lane_refused};
use super::state::{CoordinatorState, RunState};
use super::{ReplayError, ReplayPolicy, RunOrigin};

pub const FP: &str = "1111111111111111111111111111111111111111111111111111111111111111";

/// The inputs the integration bed builds too, from the same file.
#[path = "../../tests/it/bed/inputs.rs"]
mod bed_inputs;
pub use bed_inputs::{
    assert_reassigned, checkpoint_evidence, component, ev, reassign_input, with,
    write_scope_refusals,
};

pub struct Ledger {
    pub state: CoordinatorState,
    pub replay: ReplayPolicy,
    pub policy: Policy,
}

impl Ledger {
    /// A run with no event yet whose init approved `components`.
    pub fn new(components: &[&str]) -> Ledger {
        let mut approved: Vec<String> = components.iter().map(|c| c.to_string()).collect();
        approved.sort();
        Ledger {
            state: CoordinatorState::new(&RunOrigin {
                owner_fingerprint: Some(FP.into()),
                owner_epoch: 1,
                approved_component_ids: approved,
            }),
            replay: ReplayPolicy {
                max_lanes: 64,
                requires_parent: true,
                approval_file: None,
            },
            policy: Policy::default(),
        }
    }

    /// A planned run (only `run_created`) whose init approved `components`.
    pub fn planned(components: &[&str]) -> Ledger {
        let mut ledger = Ledger::new(components);
        ledger.create_run();
        ledger
    }

    /// A running run whose init approved `components`.
    pub fn running(components: &[&str]) -> Ledger {
        let mut ledger = Ledger::planned(components);
        ledger.start_run();
        ledger
    }

    /// A complete event from `fields` (metadata gets the owner epoch).
    pub fn event(&self, event_type: &str, fields: Value) -> Value {
        let sequence = self.state.last_sequence() + 1;
        let mut event = json!({
            "schema_version": 1, "run_id": "run-1", "lane_id": null, "agent_id": null,
            "sequence": sequence, "event_type": event_type, "from_state": null,
            "to_state": null, "timestamp": "2026-07-14T01:00:00Z", "owner_token": FP,
            "manifest_hash": "0".repeat(64), "previous_checksum": "",
            "checksum": format!("{sequence:064x}"),
            "evidence_refs": ev(&format!("evidence {sequence}")), "reason": null,
            "metadata": {"owner_epoch": 1},
        });
        for (key, value) in fields.as_object().expect("fields object") {
            if key == "metadata" {
                for (k, v) in value.as_object().expect("metadata object") {
                    event["metadata"][k] = v.clone();
                }
            } else {
                event[key] = value.clone();
            }
        }
        event
    }

    pub fn try_raw(&mut self, event_type: &str, fields: Value) -> Result<(), ReplayError> {
        let event = self.event(event_type, fields);
        self.state.apply(&event, &self.replay)
    }

    #[track_caller]
    pub fn raw(&mut self, event_type: &str, fields: Value) -> &mut Self {
        if let Err(e) = self.try_raw(event_type, fields) {
            panic!("{event_type} refused by replay: {e}");
        }
        self
    }

    /// The event the pipeline would seal for `intents` (one plain event or
    /// a `transaction_committed` envelope).
    pub fn sealed(&self, intents: &[Intent]) -> Value {
        let values: Vec<Value> = intents.iter().map(intent_value).collect();
        match values.as_slice() {
            [single] => {
                let mut fields = single.clone();
                if let Some(map) = fields.as_object_mut() {
                    map.remove("owner_epoch");
                }
                self.event(intents[0].event_type.as_str(), fields)
            }
            [_, second] => self.event(
                "transaction_committed",
                json!({"timestamp": second["timestamp"], "evidence_refs": [],
                       "metadata": {"intents": values}}),
            ),
            _ => panic!("one or two intents"),
        }
    }

    /// Seal intents as the pipeline does and replay them.
    #[track_caller]
    pub fn commit(&mut self, intents: Vec<Intent>) -> &mut Self {
        let event = self.sealed(&intents);
        if let Err(e) = self.state.apply(&event, &self.replay) {
            panic!("decision refused by replay: {e}");
        }
        self
    }

    /// A lane created and running.
    pub fn running_lane(&mut self, id: &str, parent: Value) -> &mut Self {
        self.lane(id, parent).start_lane(id)
    }

    /// A running lane finishing with `evidence`.
    pub fn end_lane(&mut self, event_type: &str, id: &str, to: &str, evidence: Value) -> &mut Self {
        self.raw(
            event_type,
            json!({"lane_id": id, "from_state": "running", "to_state": to,
                   "evidence_refs": evidence, "metadata": {"changed_paths": []}}),
        )
    }

    /// A lane created, run and completed with `evidence`.
    pub fn completed_lane(&mut self, id: &str, evidence: Value) -> &mut Self {
        self.running_lane(id, Value::Null)
            .end_lane("lane_completed", id, "completed", evidence)
    }

    /// A lane created, run and failed with `evidence`.
    pub fn failed_lane(&mut self, id: &str, evidence: Value) -> &mut Self {
        self.running_lane(id, Value::Null)
            .end_lane("lane_failed", id, "failed", evidence)
    }

    /// A child lane of `parent` created, run and completed with `evidence`.
    pub fn completed_child(&mut self, id: &str, parent: &str, evidence: Value) -> &mut Self {
        self.running_lane(id, json!(parent))
            .end_lane("lane_completed", id, "completed", evidence)
    }

    /// A heartbeat of a running lane carrying `evidence` (liveness evidence).
    pub fn heartbeat(&mut self, id: &str, evidence: Value) -> &mut Self {
        self.raw(
            "heartbeat_observed",
            json!({"lane_id": id, "from_state": "running", "to_state": "running",
                   "evidence_refs": evidence}),
        )
    }

    /// Registers `components` directly through the reducer.
    pub fn topology(&mut self, components: Value) -> &mut Self {
        self.raw(
            "topology_registered",
            json!({"metadata": {"components": components}}),
        )
    }

    /// Registers a topology of one required component `id`, owned by lane
    /// `owner`, with `checks`.
    pub fn required(&mut self, id: &str, owner: &str, checks: &[&str]) -> &mut Self {
        self.topology(json!([component(id, owner, true, checks, &[])]))
    }

    pub fn check(&mut self, component: &str, check: &str, passed: bool) -> &mut Self {
        let event_type = if passed {
            "check_passed"
        } else {
            "check_failed"
        };
        self.raw(
            event_type,
            json!({"metadata": {"component_id": component, "check_id": check}}),
        )
    }

    pub fn cover(&mut self, component: &str) -> &mut Self {
        self.raw(
            "evidence_attached",
            json!({"metadata": {"component_id": component, "coverage_state": "covered"}}),
        )
    }
}

impl LaneEvents for Ledger {
    #[track_caller]
    fn accept(&mut self, event_type: &str, fields: Value) -> &mut Self {
        self.raw(event_type, fields)
    }
}

/// The run and lane lifecycle as receipt events, for any test builder that
/// can replay one event (`accept` panics when the reducer refuses it).
pub trait LaneEvents {
    fn accept(&mut self, event_type: &str, fields: Value) -> &mut Self;

    /// `run_created`: the run is planned.
    fn create_run(&mut self) -> &mut Self {
        self.accept(
            "run_created",
            json!({"to_state": "planned", "evidence_refs": []}),
        )
    }

    /// planned -> approved -> running.
    fn start_run(&mut self) -> &mut Self {
        self.accept(
            "plan_approved",
            json!({"from_state": "planned", "to_state": "approved"}),
        )
        .accept(
            "run_started",
            json!({"from_state": "approved", "to_state": "running"}),
        )
    }

    /// A run transition `from` -> `to` (`run_blocked`, `run_recovery_started` ...).
    fn run_step(&mut self, event_type: &str, from: &str, to: &str) -> &mut Self {
        self.accept(event_type, json!({"from_state": from, "to_state": to}))
    }

    /// A pending lane of `agent-{id}` (`parent` may be null).
    fn lane(&mut self, id: &str, parent: Value) -> &mut Self {
        self.lane_with(
            id,
            &format!("agent-{id}"),
            json!({"parent_lane_id": parent}),
        )
    }

    /// A pending lane of `agent`, its creation metadata overridden by
    /// `overrides` (no parent and no replacement unless they say so).
    fn lane_with(&mut self, id: &str, agent: &str, overrides: Value) -> &mut Self {
        let mut metadata = json!({
            "assignment": format!("Work on {id}"), "write_scope": ["src"],
            "fallback": "main session", "startup_ack_deadline": "2026-07-14T01:00:30Z",
            "command_deadline": "2026-07-14T01:10:00Z", "parent_lane_id": null,
            "replacement_count": 0,
        });
        for (k, v) in overrides.as_object().expect("overrides object") {
            metadata[k] = v.clone();
        }
        self.accept(
            "lane_created",
            json!({"lane_id": id, "agent_id": agent, "to_state": "pending",
                   "metadata": metadata}),
        )
    }

    fn step(&mut self, event_type: &str, id: &str, from: &str, to: &str) -> &mut Self {
        self.accept(
            event_type,
            json!({"lane_id": id, "from_state": from, "to_state": to}),
        )
    }

    /// A pending lane started: pending -> starting -> running.
    fn start_lane(&mut self, id: &str) -> &mut Self {
        self.step("lane_started", id, "pending", "starting").step(
            "startup_ack",
            id,
            "starting",
            "running",
        )
    }

    /// running -> suspected_stall -> recovering, the probe due at 01:04:00Z.
    fn probe_lane(&mut self, id: &str) -> &mut Self {
        self.step("stall_suspected", id, "running", "suspected_stall")
            .accept(
                "probe_sent",
                json!({"lane_id": id, "from_state": "suspected_stall",
                       "to_state": "recovering",
                       "metadata": {"probe_deadline": "2026-07-14T01:04:00Z"}}),
            )
    }

    /// A running lane probed and its agent interrupted (the lane stays
    /// recovering).
    fn interrupt_lane(&mut self, id: &str) -> &mut Self {
        self.probe_lane(id)
            .step("agent_interrupted", id, "recovering", "recovering")
    }
}

/// Every field of each intent (absent ones null), to compare a decision's
/// whole proposal, its length included, with one value.
pub fn intents_json(intents: &[Intent]) -> Value {
    intents
        .iter()
        .map(|intent| {
            json!({
                "event_type": intent.event_type, "lane_id": intent.lane_id,
                "agent_id": intent.agent_id, "from_state": intent.from_state,
                "to_state": intent.to_state, "timestamp": intent.timestamp,
                "reason": intent.reason, "evidence_refs": intent.evidence_refs,
                "metadata": intent.metadata,
            })
        })
        .collect()
}

/// The refusal of a command that needs a running or recovering run, in a
/// run that is `state`.
pub fn needs_active_run(state: RunState) -> FlowError {
    lane_refused::run_state(state, &[RunState::Running, RunState::Recovering])
}

/// The ten intent keys, as the pipeline normalises them.
pub fn intent_value(intent: &Intent) -> Value {
    let mut metadata = intent.metadata.clone();
    metadata.insert("owner_epoch".into(), json!(1));
    json!({
        "agent_id": intent.agent_id, "event_type": intent.event_type,
        "evidence_refs": intent.evidence_refs, "from_state": intent.from_state,
        "lane_id": intent.lane_id, "metadata": metadata, "owner_epoch": 1,
        "reason": intent.reason,
        "timestamp": intent.timestamp.clone().unwrap_or_else(|| "2026-07-14T02:00:00Z".into()),
        "to_state": intent.to_state,
    })
}
