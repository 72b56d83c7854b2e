//! Building a receipt event: the 15/16-key object, its checksum over the
//! event without `checksum`, and the framed canonical line.

use serde_json::{Map, Value};

use super::canonical;
use super::primitives::{AgentId, LaneId, Sha256Hex};
use super::verify::event_checksum;
use super::vocab::EventType;

/// Every field of an event except the checksum, which sealing computes.
#[derive(Debug, Clone)]
pub struct EventDraft {
    pub run_id: String,
    pub lane_id: Option<LaneId>,
    pub agent_id: Option<AgentId>,
    pub sequence: u64,
    pub event_type: EventType,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub timestamp: String,
    pub owner_token: String,
    pub manifest_hash: String,
    pub previous_checksum: String,
    pub evidence_refs: Value,
    pub reason: Option<String>,
    /// Present for Phase 2 runs, absent for Phase 1.
    pub metadata: Option<Value>,
}

/// A sealed event: the object and its framed line (canonical JSON + LF).
#[derive(Debug, Clone)]
pub struct SealedEvent {
    pub event: Map<String, Value>,
    pub checksum: Sha256Hex,
    pub line: Vec<u8>,
}

fn opt(value: &Option<impl AsRef<str>>) -> Value {
    value
        .as_ref()
        .map_or(Value::Null, |s| Value::String(s.as_ref().to_string()))
}

impl EventDraft {
    pub fn seal(&self) -> SealedEvent {
        let mut event = Map::new();
        event.insert("agent_id".into(), opt(&self.agent_id));
        event.insert("event_type".into(), Value::from(self.event_type.as_str()));
        event.insert("evidence_refs".into(), self.evidence_refs.clone());
        event.insert("from_state".into(), opt(&self.from_state));
        event.insert("lane_id".into(), opt(&self.lane_id));
        event.insert(
            "manifest_hash".into(),
            Value::String(self.manifest_hash.clone()),
        );
        if let Some(metadata) = &self.metadata {
            event.insert("metadata".into(), metadata.clone());
        }
        event.insert(
            "owner_token".into(),
            Value::String(self.owner_token.clone()),
        );
        event.insert(
            "previous_checksum".into(),
            Value::String(self.previous_checksum.clone()),
        );
        event.insert("reason".into(), opt(&self.reason));
        event.insert("run_id".into(), Value::String(self.run_id.clone()));
        event.insert("schema_version".into(), Value::from(1));
        event.insert("sequence".into(), Value::from(self.sequence));
        event.insert("timestamp".into(), Value::String(self.timestamp.clone()));
        event.insert("to_state".into(), opt(&self.to_state));
        let checksum = event_checksum(&event);
        event.insert("checksum".into(), Value::String(checksum.to_string()));
        let mut line = canonical::to_vec(&Value::Object(event.clone()));
        line.push(b'\n');
        SealedEvent {
            event,
            checksum,
            line,
        }
    }
}
