//! The "simple" run state of the reference: the fold over run-level events
//! that gives a Phase 1 run its state and the `run.json` written after
//! `init`. Pure.

use serde::Serialize;
use serde_json::{Map, Value};

use super::machine::run_edge;
use crate::receipt::vocab::EventType;

/// Fold events into the reference's "simple" run.json shape.
pub struct SimpleRunCache {
    state: String,
    last: Option<Map<String, Value>>,
}

impl Default for SimpleRunCache {
    fn default() -> Self {
        SimpleRunCache {
            state: crate::receipt::vocab::RunState::Planned.as_str().into(),
            last: None,
        }
    }
}

impl SimpleRunCache {
    pub fn observe(&mut self, event: &Map<String, Value>) {
        if event.get("lane_id").is_none_or(Value::is_null) {
            if let Some(to) = event.get("to_state").and_then(Value::as_str) {
                self.state = to.to_string();
            } else if let Some(edge) = event
                .get("event_type")
                .and_then(Value::as_str)
                .and_then(EventType::parse)
                .and_then(run_edge)
            {
                // The "simple" cache rule: a run-level event without a
                // to_state moves the run to its edge's target.
                self.state = edge.to.as_str().to_string();
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
        RunCacheRecord {
            coordinator: None,
            last_checksum: get("checksum"),
            last_event_type: get("event_type"),
            last_sequence: get("sequence"),
            manifest_hash,
            run_id,
            schema_version: 1,
            state: &self.state,
            updated_at: get("timestamp"),
        }
        .to_json()
    }
}

/// The record `runs/<id>/run.json` holds, in either shape: the simple one
/// (Phase 1 and the reference's rule) and the coordinator one, which adds
/// the replayed public state. The `last_*` values are JSON values because
/// the simple shape copies them from the last event as they are.
#[derive(Debug, Serialize)]
pub struct RunCacheRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<CoordinatorCache>,
    pub last_checksum: Value,
    pub last_event_type: Value,
    pub last_sequence: Value,
    pub manifest_hash: &'a str,
    pub run_id: &'a str,
    pub schema_version: u32,
    pub state: &'a str,
    pub updated_at: Value,
}

/// The coordinator part of a coordinator-shape run.json.
#[derive(Debug, Serialize)]
pub struct CoordinatorCache {
    pub cache_version: u32,
    pub state: Value,
}

impl RunCacheRecord<'_> {
    pub fn to_json(&self) -> Value {
        // Plain strings, numbers and JSON values with string keys: it cannot
        // fail, and a null run.json would be worse than a loud panic (which
        // the top-level catch turns into the typed envelope).
        serde_json::to_value(self).expect("a run cache record is plain JSON")
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
