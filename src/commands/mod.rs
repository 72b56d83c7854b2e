//! Commands: the guarded paths between the CLI and the store. Each returns
//! the command's own output keys; the CLI adds the envelope.

pub mod checkpoint;
pub mod error;
pub mod init;
pub mod inspect;
pub mod lanes;
pub mod ledger;
pub mod lifecycle;
pub mod liveness;
pub mod mutate;
pub mod rebuild;
pub mod replacement;

use serde_json::{Map, Value};
use std::path::Path;

pub use error::{FlowError, FlowResult};
use ledger::{Verdict, damage_error, open_run, verify_receipt};

/// `verify`: stream-verify the whole receipt (read-only, no lock).
pub fn verify(root: &Path, run_id: &str) -> FlowResult<Map<String, Value>> {
    let run = open_run(root, run_id)?;
    let position = match verify_receipt(&run, |_| Ok(()))? {
        Verdict::Intact(position) => position,
        Verdict::Damaged(damage) => return Err(damage_error(&run, &damage, false)),
        Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
    };
    let mut out = Map::new();
    out.insert("checksum".into(), Value::String(position.checksum));
    out.insert("event_count".into(), Value::from(position.sequence));
    out.insert("run_id".into(), Value::String(run_id.to_string()));
    out.insert("sequence".into(), Value::from(position.sequence));
    Ok(out)
}

/// The run state implied by a run-level event (the "simple" cache rule).
fn simple_state_of(event_type: &str) -> Option<&'static str> {
    Some(match event_type {
        "run_created" => "planned",
        "plan_approved" => "approved",
        "run_started" => "running",
        "run_recovery_started" => "recovering",
        "run_recovery_finished" => "running",
        "run_completed" => "completed",
        "run_failed" => "failed",
        "run_blocked" => "blocked",
        "run_cancelled" => "cancelled",
        _ => return None,
    })
}

/// Fold events into the reference's "simple" run.json shape.
pub struct SimpleRunCache {
    state: String,
    last: Option<Map<String, Value>>,
}

impl Default for SimpleRunCache {
    fn default() -> Self {
        SimpleRunCache {
            state: "planned".into(),
            last: None,
        }
    }
}

impl SimpleRunCache {
    pub fn observe(&mut self, event: &Map<String, Value>) {
        if event.get("lane_id").is_none_or(Value::is_null) {
            if let Some(to) = event.get("to_state").and_then(Value::as_str) {
                self.state = to.to_string();
            } else if let Some(state) = event
                .get("event_type")
                .and_then(Value::as_str)
                .and_then(simple_state_of)
            {
                self.state = state.to_string();
            }
        }
        let mut last = Map::new();
        for key in ["checksum", "event_type", "sequence", "timestamp"] {
            last.insert(key.into(), event.get(key).cloned().unwrap_or(Value::Null));
        }
        self.last = Some(last);
    }

    /// The run state seen so far.
    pub fn state(&self) -> &str {
        &self.state
    }

    pub fn to_json(&self, run_id: &str, manifest_hash: &str) -> Value {
        let last = self.last.clone().unwrap_or_default();
        let get = |k: &str| last.get(k).cloned().unwrap_or(Value::Null);
        serde_json::json!({
            "last_checksum": get("checksum"),
            "last_event_type": get("event_type"),
            "last_sequence": get("sequence"),
            "manifest_hash": manifest_hash,
            "run_id": run_id,
            "schema_version": 1,
            "state": self.state,
            "updated_at": get("timestamp"),
        })
    }
}

/// The simple run.json for a sequence of events.
pub fn simple_run_cache<'a>(
    run_id: &str,
    manifest_hash: &str,
    events: impl IntoIterator<Item = &'a Map<String, Value>>,
) -> Value {
    let mut cache = SimpleRunCache::default();
    for event in events {
        cache.observe(event);
    }
    cache.to_json(run_id, manifest_hash)
}
