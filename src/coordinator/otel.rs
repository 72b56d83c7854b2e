//! PURE: a verified run as an OpenTelemetry trace (contracts/otel.md). The
//! facts a full replay established ([`RunFacts`]) and the verified events,
//! handed in one at a time in receipt order, become OTLP spans following
//! the GenAI semantic conventions at [`SEMCONV_VERSION`]: one trace per run,
//! a root `invoke_workflow` span, one `invoke_agent` span per lane, every
//! receipt event a span event. Memory is bounded by the number of lanes
//! times [`EVENTS_PER_SPAN`], never by the receipt's length: a span carries
//! at most [`EVENTS_PER_SPAN`] events, later ones go on continuation spans
//! under it, and finished spans leave in batches ([`Exporter::take_ready`]).
//! No I/O, no clock: the same receipt gives the same spans, ids included.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::breach::Breach;
use crate::receipt::primitives::parse_timestamp;
use crate::receipt::vocab::{EventType, LaneState, RunState};

/// The OpenTelemetry semantic conventions release the mapping follows (the
/// last one that carried the GenAI conventions, `invoke_workflow` included).
pub const SEMCONV_VERSION: &str = "1.41.0";
/// Its schema URL, on every `ResourceSpans` and `ScopeSpans`.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";
/// Most span events on one span (the SDKs' default span event limit).
pub const EVENTS_PER_SPAN: usize = 128;
/// A batch (one OTLP request, one line of `--out`) is sent once it holds
/// this many spans...
pub const SPANS_PER_BATCH: usize = 64;
/// ...or this many span events.
pub const EVENTS_PER_BATCH: usize = 1024;
/// Longest text taken from the receipt into an attribute, in characters;
/// a longer one is cut there and ends in [`ELLIPSIS`]. A trace is a view:
/// the full text stays in the receipt, found by the event's sequence.
pub const MAX_TEXT_CHARS: usize = 128;
pub const ELLIPSIS: char = '…';
/// Most evidence items named on one span event.
pub const MAX_EVIDENCE: usize = 16;
/// The name of a continuation span (events beyond a span's first
/// [`EVENTS_PER_SPAN`]).
pub const CONTINUATION: &str = "bluetape.receipt_events";

/// What a lane was at the end of the replay.
#[derive(Debug, Clone)]
pub struct LaneFacts {
    pub agent_id: String,
    pub write_scope: Vec<String>,
    pub state: LaneState,
    pub parent_lane_id: Option<String>,
    pub replacement_lane_id: Option<String>,
}

/// What the full verification and replay established about the run.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub run_id: String,
    pub workflow_type: Option<String>,
    pub manifest_hash: Option<String>,
    pub manifest_version: String,
    pub run_state: RunState,
    /// The last verified event: the export covers exactly 1..=sequence.
    pub head_sequence: u64,
    pub head_checksum: String,
    /// The checksum of line 1: span ids are derived from it.
    pub genesis_checksum: String,
    /// Sorted by sequence.
    pub breaches: Vec<Breach>,
    pub lanes: BTreeMap<String, LaneFacts>,
}

/// `text` cut to [`MAX_TEXT_CHARS`] characters (then ending in the
/// ellipsis). The text is data: nothing in it is interpreted.
pub fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => {
            let mut out = text[..cut].to_string();
            out.push(ELLIPSIS);
            out
        }
    }
}

/// A receipt value as attribute text: a string as it is, anything else as
/// its compact JSON; bounded either way.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => bounded(s),
        other => bounded(&other.to_string()),
    }
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hasher.finalize().into()
}

/// The trace id of a run: the first 16 bytes of
/// SHA-256("bluetape-flow/otel/trace" NUL run_id NUL).
pub fn trace_id(run_id: &str) -> [u8; 16] {
    let d = digest(&["bluetape-flow/otel/trace", run_id]);
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    if id == [0u8; 16] {
        id[15] = 1;
    }
    id
}

/// The span id of `owner`'s span (`segment` 0) or continuation `segment`:
/// the first 8 bytes of SHA-256("bluetape-flow/otel/span" NUL genesis
/// checksum NUL "run" or "lane" NUL lane id NUL segment NUL). Never zero.
pub fn span_id(genesis_checksum: &str, owner: Option<&str>, segment: u32) -> [u8; 8] {
    let kind = if owner.is_some() { "lane" } else { "run" };
    let segment = segment.to_string();
    let d = digest(&[
        "bluetape-flow/otel/span",
        genesis_checksum,
        kind,
        owner.unwrap_or(""),
        &segment,
    ]);
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[..8]);
    if id == [0u8; 8] {
        id[7] = 1;
    }
    id
}

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn kv_str(key: &str, value: impl Into<String>) -> KeyValue {
    kv(key, Any::StringValue(value.into()))
}

fn kv_int(key: &str, value: u64) -> KeyValue {
    kv(key, Any::IntValue(i64::try_from(value).unwrap_or(i64::MAX)))
}

fn kv_strings(key: &str, values: Vec<String>) -> KeyValue {
    kv(
        key,
        Any::ArrayValue(ArrayValue {
            values: values
                .into_iter()
                .map(|v| AnyValue {
                    value: Some(Any::StringValue(v)),
                })
                .collect(),
        }),
    )
}

/// Nanoseconds since the epoch of a receipt timestamp.
fn nanos_of(timestamp: &str) -> Option<u64> {
    let instant = parse_timestamp(timestamp)?;
    u64::try_from(instant.timestamp_micros())
        .ok()
        .map(|m| m.saturating_mul(1000))
}

/// The event and, for a transaction, its intents: everything a line says.
fn parts(event: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    let mut all = vec![event];
    if let Some(intents) = event
        .get("metadata")
        .and_then(|m| m.get("intents"))
        .and_then(Value::as_array)
    {
        all.extend(intents.iter().filter_map(Value::as_object));
    }
    all
}

fn str_field<'e>(event: &'e Map<String, Value>, key: &str) -> Option<&'e str> {
    event.get(key).and_then(Value::as_str)
}

/// The attributes of one receipt event's span event.
fn event_attributes(event: &Map<String, Value>) -> Vec<KeyValue> {
    let mut attrs = Vec::with_capacity(12);
    if let Some(t) = event.get("event_type") {
        attrs.push(kv_str("bluetape.event.type", text_of(t)));
    }
    if let Some(s) = event.get("sequence").and_then(Value::as_u64) {
        attrs.push(kv_int("bluetape.event.sequence", s));
    }
    for (field, key) in [
        ("checksum", "bluetape.event.checksum"),
        ("timestamp", "bluetape.event.timestamp"),
        ("lane_id", "bluetape.lane.id"),
        ("agent_id", "bluetape.agent.id"),
        ("from_state", "bluetape.event.from_state"),
        ("to_state", "bluetape.event.to_state"),
        ("reason", "bluetape.event.reason"),
    ] {
        match event.get(field) {
            None | Some(Value::Null) => {}
            Some(value) => attrs.push(kv_str(key, text_of(value))),
        }
    }
    let all = parts(event);
    let mut kinds = Vec::new();
    let mut summaries = Vec::new();
    let mut omitted = 0u64;
    for part in &all {
        let Some(refs) = part.get("evidence_refs").and_then(Value::as_array) else {
            continue;
        };
        for item in refs {
            if kinds.len() == MAX_EVIDENCE {
                omitted += 1;
                continue;
            }
            let field = |key: &str| item.get(key).map(text_of).unwrap_or_default();
            kinds.push(field("kind"));
            summaries.push(field("summary"));
        }
    }
    if !kinds.is_empty() {
        attrs.push(kv_strings("bluetape.evidence.kinds", kinds));
        attrs.push(kv_strings("bluetape.evidence.summaries", summaries));
    }
    if omitted > 0 {
        attrs.push(kv_int("bluetape.evidence.omitted", omitted));
    }
    if all.len() > 1 {
        let intents = all[1..]
            .iter()
            .map(|i| i.get("event_type").map(text_of).unwrap_or_default())
            .collect();
        attrs.push(kv_strings("bluetape.transaction.intents", intents));
    }
    attrs
}

fn breach_event(breach: &Breach, at: u64) -> Event {
    Event {
        time_unix_nano: at,
        name: "bluetape.breach".into(),
        attributes: vec![
            kv_str("bluetape.breach.rule", bounded(&breach.rule)),
            kv_int("bluetape.breach.sequence", breach.sequence),
            kv_str("bluetape.breach.found", bounded(&breach.found)),
        ],
        dropped_attributes_count: 0,
    }
}

/// The events of one span (the run's or a lane's) while the receipt
/// streams by.
#[derive(Debug, Default)]
struct Owner {
    /// The span's own events (the first [`EVENTS_PER_SPAN`]); the span is
    /// sent at the end, when its times and status are known.
    first: Vec<Event>,
    /// The continuation being filled.
    current: Vec<Event>,
    /// Continuations sent so far.
    segments: u32,
    start: Option<u64>,
    end: Option<u64>,
    /// Why the lane is in error (interrupted, failed, blocked, cancelled).
    interrupted: Option<String>,
    last_reason: Option<String>,
}

impl Owner {
    fn touch(&mut self, at: u64) {
        self.start = Some(self.start.map_or(at, |s| s.min(at)));
        self.end = Some(self.end.map_or(at, |e| e.max(at)));
    }
}

/// Counts of what was exported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub spans: u64,
    pub span_events: u64,
    pub batches: u64,
}

/// Turns a run's verified events into batches of OTLP spans.
pub struct Exporter {
    facts: RunFacts,
    trace_id: [u8; 16],
    run: Owner,
    lanes: BTreeMap<String, Owner>,
    batch: Vec<Span>,
    batch_events: usize,
    ready: Vec<ExportTraceServiceRequest>,
    next_breach: usize,
    last_nanos: u64,
    totals: Totals,
    version: String,
}

impl Exporter {
    /// `version` is the tool's, named on the resource and the scope.
    pub fn new(facts: RunFacts, version: &str) -> Exporter {
        let lanes = facts
            .lanes
            .keys()
            .map(|id| (id.clone(), Owner::default()))
            .collect();
        Exporter {
            trace_id: trace_id(&facts.run_id),
            facts,
            run: Owner::default(),
            lanes,
            batch: Vec::new(),
            batch_events: 0,
            ready: Vec::new(),
            next_breach: 0,
            last_nanos: 0,
            totals: Totals::default(),
            version: version.to_string(),
        }
    }

    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// The span id of `lane`'s span (the run's for `None`).
    fn owner_span(&self, lane: Option<&str>) -> [u8; 8] {
        span_id(&self.facts.genesis_checksum, lane, 0)
    }

    /// One verified event, in receipt order. Events after the verified
    /// head are not the export's and are ignored.
    pub fn observe(&mut self, event: &Map<String, Value>) {
        let sequence = event.get("sequence").and_then(Value::as_u64).unwrap_or(0);
        if sequence == 0 || sequence > self.facts.head_sequence {
            return;
        }
        let at = str_field(event, "timestamp")
            .and_then(nanos_of)
            .unwrap_or(self.last_nanos);
        self.last_nanos = at;
        let all = parts(event);
        let mut touched: Vec<String> = Vec::new();
        for part in &all {
            let Some(lane) = str_field(part, "lane_id") else {
                continue;
            };
            if !self.lanes.contains_key(lane) {
                continue;
            }
            if !touched.iter().any(|t| t == lane) {
                touched.push(lane.to_string());
            }
            let owner = self.lanes.get_mut(lane).expect("checked above");
            owner.touch(at);
            let reason = str_field(part, "reason").map(bounded);
            match EventType::of(part) {
                Some(EventType::AgentInterrupted) => {
                    owner.interrupted.get_or_insert_with(|| match &reason {
                        Some(r) => format!("interrupted at sequence {sequence}: {r}"),
                        None => format!("interrupted at sequence {sequence}"),
                    });
                }
                Some(EventType::LaneFailed | EventType::LaneBlocked | EventType::LaneCancelled) => {
                    owner.last_reason = Some(reason.unwrap_or_default());
                }
                _ => {}
            }
        }
        self.run.touch(at);
        let span_event = Event {
            time_unix_nano: at,
            name: event.get("event_type").map(text_of).unwrap_or_default(),
            attributes: event_attributes(event),
            dropped_attributes_count: 0,
        };
        let lane = match touched.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        };
        self.push(lane.as_deref(), span_event);
        while let Some(breach) = self.facts.breaches.get(self.next_breach) {
            if breach.sequence > sequence {
                break;
            }
            let event = breach_event(breach, at);
            self.next_breach += 1;
            self.push(None, event);
        }
    }

    /// Add a span event to `lane`'s span (the run's for `None`).
    fn push(&mut self, lane: Option<&str>, event: Event) {
        let owner = match lane {
            Some(id) => self.lanes.get_mut(id).expect("a known lane"),
            None => &mut self.run,
        };
        if owner.first.len() < EVENTS_PER_SPAN {
            owner.first.push(event);
            return;
        }
        owner.current.push(event);
        if owner.current.len() == EVENTS_PER_SPAN {
            self.flush_continuation(lane.map(str::to_string));
        }
    }

    fn flush_continuation(&mut self, lane: Option<String>) {
        let owner = match &lane {
            Some(id) => self.lanes.get_mut(id).expect("a known lane"),
            None => &mut self.run,
        };
        if owner.current.is_empty() {
            return;
        }
        owner.segments += 1;
        let segment = owner.segments;
        let events = std::mem::take(&mut owner.current);
        let start = events.iter().map(|e| e.time_unix_nano).min().unwrap_or(0);
        let end = events.iter().map(|e| e.time_unix_nano).max().unwrap_or(0);
        let mut attributes = vec![
            kv_str("bluetape.run.id", self.facts.run_id.clone()),
            kv_int("bluetape.segment", u64::from(segment)),
        ];
        if let Some(id) = &lane {
            attributes.push(kv_str("bluetape.lane.id", id.clone()));
        }
        let span = Span {
            trace_id: self.trace_id.to_vec(),
            span_id: span_id(&self.facts.genesis_checksum, lane.as_deref(), segment).to_vec(),
            parent_span_id: self.owner_span(lane.as_deref()).to_vec(),
            name: CONTINUATION.into(),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            events,
            ..Default::default()
        };
        self.add(span);
    }

    fn add(&mut self, span: Span) {
        self.batch_events += span.events.len();
        self.totals.spans += 1;
        self.totals.span_events += span.events.len() as u64;
        self.batch.push(span);
        if self.batch.len() >= SPANS_PER_BATCH || self.batch_events >= EVENTS_PER_BATCH {
            self.seal();
        }
    }

    fn seal(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.batch);
        self.batch_events = 0;
        self.totals.batches += 1;
        self.ready
            .push(request(spans, &self.facts.run_id, &self.version));
    }

    /// A batch that is full, if any (call after every [`observe`]).
    ///
    /// [`observe`]: Exporter::observe
    pub fn take_ready(&mut self) -> Option<ExportTraceServiceRequest> {
        if self.ready.is_empty() {
            None
        } else {
            Some(self.ready.remove(0))
        }
    }

    /// The rest: the last continuations, every lane's span and the run's,
    /// in batches; and the totals of the whole export.
    pub fn finish(mut self) -> (Vec<ExportTraceServiceRequest>, Totals) {
        // Breaches whose sequence no event carried (none in a verified
        // replay) still stand on the root span.
        let end = self.run.end.unwrap_or(self.last_nanos);
        while let Some(breach) = self.facts.breaches.get(self.next_breach) {
            let event = breach_event(breach, end);
            self.next_breach += 1;
            self.push(None, event);
        }
        let ids: Vec<String> = self.lanes.keys().cloned().collect();
        for id in &ids {
            self.flush_continuation(Some(id.clone()));
        }
        self.flush_continuation(None);
        let root = self.root_span();
        for id in &ids {
            let span = self.lane_span(id, root.start_time_unix_nano);
            self.add(span);
        }
        self.add(root);
        self.seal();
        (self.ready, self.totals)
    }

    fn root_span(&mut self) -> Span {
        let facts = &self.facts;
        let workflow = facts.workflow_type.clone().unwrap_or_default();
        let mut attributes = vec![
            kv_str("gen_ai.operation.name", "invoke_workflow"),
            kv_str("bluetape.run.id", facts.run_id.clone()),
            kv_str("bluetape.run.state", facts.run_state.as_str()),
            kv_str("bluetape.manifest.version", facts.manifest_version.clone()),
            kv_int("bluetape.receipt.sequence", facts.head_sequence),
            kv_str(
                "bluetape.receipt.head_checksum",
                facts.head_checksum.clone(),
            ),
            kv_int("bluetape.breach.count", facts.breaches.len() as u64),
            kv_int("bluetape.lane.count", facts.lanes.len() as u64),
        ];
        if let Some(w) = &facts.workflow_type {
            attributes.push(kv_str("gen_ai.workflow.name", bounded(w)));
            attributes.push(kv_str("bluetape.workflow.type", bounded(w)));
        }
        if let Some(h) = &facts.manifest_hash {
            attributes.push(kv_str("bluetape.manifest.hash", h.clone()));
        }
        let status = if let Some(first) = facts.breaches.first() {
            error(format!(
                "{} breach(es) of the run's rules; first at sequence {}: {}",
                facts.breaches.len(),
                first.sequence,
                bounded(&first.rule)
            ))
        } else if matches!(
            facts.run_state,
            RunState::Failed | RunState::Blocked | RunState::Cancelled
        ) {
            error(format!("run {}", facts.run_state.as_str()))
        } else {
            None
        };
        let start = self.run.start.unwrap_or(0);
        let name = if workflow.is_empty() {
            "invoke_workflow".to_string()
        } else {
            format!("invoke_workflow {}", bounded(&workflow))
        };
        Span {
            trace_id: self.trace_id.to_vec(),
            span_id: self.owner_span(None).to_vec(),
            name,
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: self.run.end.unwrap_or(start),
            attributes,
            events: std::mem::take(&mut self.run.first),
            status,
            ..Default::default()
        }
    }

    fn lane_span(&mut self, id: &str, run_start: u64) -> Span {
        let facts = self.facts.lanes.get(id).expect("a known lane").clone();
        let owner = self.lanes.get_mut(id).expect("a known lane");
        let events = std::mem::take(&mut owner.first);
        let start = owner.start.unwrap_or(run_start);
        let end = owner.end.unwrap_or(start);
        let failed = matches!(
            facts.state,
            LaneState::Failed | LaneState::Blocked | LaneState::Cancelled
        );
        let status = if failed {
            let reason = owner.last_reason.clone().unwrap_or_default();
            error(if reason.is_empty() {
                format!("lane {}", facts.state.as_str())
            } else {
                format!("lane {}: {reason}", facts.state.as_str())
            })
        } else {
            owner.interrupted.clone().and_then(error)
        };
        let mut attributes = vec![
            kv_str("gen_ai.operation.name", "invoke_agent"),
            kv_str("gen_ai.agent.id", bounded(&facts.agent_id)),
            kv_str("gen_ai.agent.name", bounded(&facts.agent_id)),
            kv_str("bluetape.run.id", self.facts.run_id.clone()),
            kv_str("bluetape.lane.id", id.to_string()),
            kv_str("bluetape.lane.state", facts.state.as_str()),
            kv_strings(
                "bluetape.lane.write_scope",
                facts.write_scope.iter().map(|s| bounded(s)).collect(),
            ),
        ];
        let mut links = Vec::new();
        if let Some(parent) = &facts.parent_lane_id {
            attributes.push(kv_str("bluetape.lane.parent_lane_id", parent.clone()));
            if self.facts.lanes.contains_key(parent) {
                links.push(Link {
                    trace_id: self.trace_id.to_vec(),
                    span_id: self.owner_span(Some(parent)).to_vec(),
                    attributes: vec![kv_str("bluetape.link.type", "replaces")],
                    ..Default::default()
                });
            }
        }
        if let Some(replacement) = &facts.replacement_lane_id {
            attributes.push(kv_str(
                "bluetape.lane.replacement_lane_id",
                replacement.clone(),
            ));
        }
        Span {
            trace_id: self.trace_id.to_vec(),
            span_id: self.owner_span(Some(id)).to_vec(),
            parent_span_id: self.owner_span(None).to_vec(),
            name: format!("invoke_agent {}", bounded(&facts.agent_id)),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            events,
            links,
            status,
            ..Default::default()
        }
    }
}

fn error(message: String) -> Option<Status> {
    Some(Status {
        message,
        code: StatusCode::Error as i32,
    })
}

/// One OTLP request: the tool as the resource and the scope.
fn request(spans: Vec<Span>, run_id: &str, version: &str) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv_str("service.name", "bluetape-flow"),
                    kv_str("service.version", version),
                    kv_str("bluetape.run.id", run_id),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "bluetape-flow.otel-export".into(),
                    version: version.into(),
                    ..Default::default()
                }),
                spans,
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: SCHEMA_URL.into(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(
        lanes: &[(&str, LaneState, Option<&str>)],
        breaches: Vec<Breach>,
        head: u64,
    ) -> RunFacts {
        RunFacts {
            run_id: "20260714T010000Z-1a2b3c4d".into(),
            workflow_type: Some("A".into()),
            manifest_hash: Some("ab".repeat(32)),
            manifest_version: "1.1.0".into(),
            run_state: RunState::Running,
            head_sequence: head,
            head_checksum: "cd".repeat(32),
            genesis_checksum: "ef".repeat(32),
            breaches,
            lanes: lanes
                .iter()
                .map(|(id, state, parent)| {
                    (
                        id.to_string(),
                        LaneFacts {
                            agent_id: format!("agent-{id}"),
                            write_scope: vec!["src".into()],
                            state: *state,
                            parent_lane_id: parent.map(str::to_string),
                            replacement_lane_id: None,
                        },
                    )
                })
                .collect(),
        }
    }

    fn event(sequence: u64, event_type: &str, lane: Option<&str>) -> Map<String, Value> {
        json!({
            "sequence": sequence, "event_type": event_type, "lane_id": lane,
            "checksum": format!("{sequence:064x}"), "timestamp": "2026-07-14T01:00:00Z",
            "evidence_refs": [{"kind": "test", "summary": "s"}], "reason": null,
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn run(exporter: &mut Exporter, events: &[Map<String, Value>]) -> Vec<Span> {
        let mut spans = Vec::new();
        for e in events {
            exporter.observe(e);
            while let Some(batch) = exporter.take_ready() {
                spans.extend(
                    batch
                        .resource_spans
                        .into_iter()
                        .flat_map(|r| r.scope_spans)
                        .flat_map(|s| s.spans),
                );
            }
        }
        spans
    }

    fn all_spans(mut exporter: Exporter, events: &[Map<String, Value>]) -> (Vec<Span>, Totals) {
        let mut spans = run(&mut exporter, events);
        let (rest, totals) = exporter.finish();
        spans.extend(
            rest.into_iter()
                .flat_map(|b| b.resource_spans)
                .flat_map(|r| r.scope_spans)
                .flat_map(|s| s.spans),
        );
        (spans, totals)
    }

    #[test]
    fn ids_come_from_the_run_id_and_the_receipt_and_are_never_zero() {
        assert_eq!(trace_id("r1"), trace_id("r1"));
        assert_ne!(trace_id("r1"), trace_id("r2"));
        let g = "ef".repeat(32);
        assert_ne!(span_id(&g, None, 0), span_id(&g, Some("a"), 0));
        assert_ne!(span_id(&g, Some("a"), 0), span_id(&g, Some("a"), 1));
        assert_ne!(
            span_id(&g, Some("a"), 0),
            span_id(&"00".repeat(32), Some("a"), 0)
        );
        assert_ne!(span_id(&g, None, 0), [0u8; 8]);
    }

    #[test]
    fn text_is_bounded_on_a_character_boundary() {
        let long: String = "é".repeat(300);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), MAX_TEXT_CHARS + 1);
        assert!(cut.ends_with(ELLIPSIS));
        let exact = "x".repeat(MAX_TEXT_CHARS);
        assert_eq!(bounded(&exact), exact);
    }

    #[test]
    fn interrupted_and_failed_lanes_are_errors_and_a_replacement_links_back() {
        let f = facts(
            &[
                ("a", LaneState::Completed, None),
                ("b", LaneState::Completed, Some("a")),
                ("c", LaneState::Failed, None),
                ("d", LaneState::Completed, None),
            ],
            vec![],
            5,
        );
        let mut failed = event(4, "lane_failed", Some("c"));
        failed.insert("reason".into(), json!("tests broke"));
        let events = vec![
            event(1, "run_created", None),
            event(2, "agent_interrupted", Some("a")),
            event(3, "lane_created", Some("b")),
            failed,
            event(5, "lane_completed", Some("d")),
        ];
        let (spans, totals) = all_spans(Exporter::new(f, "0"), &events);
        assert_eq!(totals.spans, 5);
        assert_eq!(totals.span_events, 5);
        let lane = |id: &str| {
            spans
                .iter()
                .find(|s| {
                    s.attributes.iter().any(|a| {
                        a.key == "bluetape.lane.id"
                            && a.value
                                == Some(AnyValue {
                                    value: Some(Any::StringValue(id.into())),
                                })
                    })
                })
                .unwrap()
        };
        let code = |s: &Span| s.status.as_ref().map_or(0, |s| s.code);
        assert_eq!(code(lane("a")), StatusCode::Error as i32);
        assert_eq!(
            lane("a").status.as_ref().unwrap().message,
            "interrupted at sequence 2"
        );
        assert_eq!(code(lane("c")), StatusCode::Error as i32);
        assert_eq!(
            lane("c").status.as_ref().unwrap().message,
            "lane failed: tests broke"
        );
        assert_eq!(code(lane("d")), 0);
        assert_eq!(lane("b").links.len(), 1);
        assert_eq!(lane("b").links[0].span_id, lane("a").span_id);
        let root = spans.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
        assert_eq!(code(root), 0);
        assert!(
            spans
                .iter()
                .filter(|s| !s.parent_span_id.is_empty())
                .all(|s| s.parent_span_id == root.span_id)
        );
    }

    #[test]
    fn breaches_are_root_events_and_make_the_run_an_error() {
        let breach = Breach {
            sequence: 2,
            rule: "approval_gate".into(),
            found: "x".repeat(400),
        };
        let f = facts(&[], vec![breach], 3);
        let events = vec![
            event(1, "run_created", None),
            event(2, "plan_approved", None),
            event(3, "run_started", None),
        ];
        let (spans, _) = all_spans(Exporter::new(f, "0"), &events);
        assert_eq!(spans.len(), 1);
        let root = &spans[0];
        assert_eq!(root.status.as_ref().unwrap().code, StatusCode::Error as i32);
        let names: Vec<&str> = root.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "run_created",
                "plan_approved",
                "bluetape.breach",
                "run_started"
            ]
        );
    }

    #[test]
    fn long_lanes_spill_into_continuations_and_batches_stay_bounded() {
        let n = EVENTS_PER_SPAN * 5 + 7;
        let f = facts(&[("a", LaneState::Running, None)], vec![], n as u64 + 1);
        let mut events = vec![event(1, "run_created", None)];
        events.extend((0..n).map(|i| event(i as u64 + 2, "heartbeat_observed", Some("a"))));
        // An event after the verified head is not exported.
        events.push(event(n as u64 + 2, "heartbeat_observed", Some("a")));
        let mut exporter = Exporter::new(f.clone(), "0");
        let mut batches = Vec::new();
        for e in &events {
            exporter.observe(e);
            while let Some(b) = exporter.take_ready() {
                batches.push(b);
            }
        }
        let (rest, totals) = exporter.finish();
        batches.extend(rest);
        assert_eq!(totals.span_events, n as u64 + 1);
        assert_eq!(totals.batches, batches.len() as u64);
        let spans: Vec<Span> = batches
            .iter()
            .flat_map(|b| b.resource_spans[0].scope_spans[0].spans.clone())
            .collect();
        assert!(spans.iter().all(|s| s.events.len() <= EVENTS_PER_SPAN));
        for b in &batches {
            let spans = &b.resource_spans[0].scope_spans[0].spans;
            assert!(spans.len() <= SPANS_PER_BATCH);
            assert!(
                spans.iter().map(|s| s.events.len()).sum::<usize>()
                    <= EVENTS_PER_BATCH + EVENTS_PER_SPAN
            );
        }
        let lane_span = span_id(&f.genesis_checksum, Some("a"), 0).to_vec();
        let continuations: Vec<&Span> = spans.iter().filter(|s| s.name == CONTINUATION).collect();
        assert_eq!(continuations.len(), 5);
        assert!(continuations.iter().all(|s| s.parent_span_id == lane_span));
        let agents = spans
            .iter()
            .filter(|s| s.name.starts_with("invoke_agent"))
            .count();
        assert_eq!(agents, 1);
        // The same events give the same spans, ids and all.
        let (again, _) = all_spans(Exporter::new(f, "0"), &events);
        assert_eq!(again, spans);
    }
}
