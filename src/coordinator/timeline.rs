//! The pure model behind `report`'s lane timeline: folded one verified
//! event at a time (the receipt is streamed, never held), in memory that
//! grows with lanes and marks, not with heartbeats — consecutive leases fold
//! into one band, and the event table keeps only its first and last rows.
//!
//! Events are ordered by sequence; their times need not be monotonic (a run
//! may mix wall-clock stamps with `--at` values). An event whose time runs
//! backwards is recorded as an anomaly, so the picture can flag it instead
//! of misleading.

use crate::receipt::vocab::EventType;
use std::collections::{BTreeMap, VecDeque};

use serde_json::{Map, Value};

use super::views::{LogRow, evidence_refs, intents, log_row, text};
use crate::receipt::lax_time::parse_lax_timestamp;
use crate::receipt::primitives::Instant;

/// Rows kept at each end of the event table.
pub const TABLE_ENDS: usize = 50;
/// Marks kept per lane and for the run (beyond: counted, not drawn).
pub const MAX_MARKS: usize = 400;
/// Time anomalies listed (beyond: counted).
pub const MAX_ANOMALIES: usize = 50;

/// One mark on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub at: Instant,
    pub sequence: u64,
    /// `None`: an event type outside our vocabulary (not in a verified
    /// receipt).
    pub kind: Option<EventType>,
    /// The mark's details (receipt text: escape before showing).
    pub detail: String,
}

/// A shaded lease window: consecutive heartbeats whose leases overlap.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub start: Instant,
    pub end: Instant,
    pub heartbeats: u64,
}

/// One lane's row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneTrack {
    pub lane_id: String,
    pub agent_id: Option<String>,
    pub parent: Option<String>,
    /// `(from, state)`: the lane is in `state` from `from` on.
    pub segments: Vec<(Instant, String)>,
    pub marks: Vec<Mark>,
    pub folded_marks: u64,
    pub bands: Vec<Band>,
    /// The replacement lane and when it was reserved.
    pub replaced_by: Option<(String, Instant)>,
}

/// An event whose time is earlier than one before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Anomaly {
    pub sequence: u64,
    pub at: String,
    pub latest_before: String,
}

/// The folded timeline of a run.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Lanes in the order they first appear.
    pub lanes: Vec<LaneTrack>,
    index: BTreeMap<String, usize>,
    pub run_marks: Vec<Mark>,
    pub folded_run_marks: u64,
    pub anomalies: Vec<Anomaly>,
    pub anomaly_count: u64,
    /// Earliest and latest instants of lane activity (leases included).
    pub lane_span: Option<(Instant, Instant)>,
    /// Earliest and latest instants of any event.
    pub span: Option<(Instant, Instant)>,
    latest: Option<Instant>,
    pub events: u64,
    pub heartbeats: u64,
    pub first_rows: Vec<LogRow>,
    pub last_rows: VecDeque<LogRow>,
    /// `(epoch, sequence, time)` of every owner epoch (1 at creation).
    pub epochs: Vec<(u64, u64, String)>,
}

fn widen(span: &mut Option<(Instant, Instant)>, at: Instant) {
    *span = Some(match *span {
        None => (at, at),
        Some((a, b)) => (a.min(at), b.max(at)),
    });
}

/// A one-line description of an event or intent for a mark's `<title>`.
fn detail(sequence: u64, time: &str, item: &Map<String, Value>) -> String {
    let mut parts = vec![format!(
        "#{sequence} {} at {time}",
        text(item, "event_type").unwrap_or("?")
    )];
    if let Some(agent) = text(item, "agent_id") {
        parts.push(format!("agent {agent}"));
    }
    if let Some(reason) = text(item, "reason") {
        parts.push(format!("reason: {reason}"));
    }
    for evidence in evidence_refs(item) {
        parts.push(format!(
            "{}: {}",
            text(evidence, "kind").unwrap_or("?"),
            text(evidence, "summary").unwrap_or("")
        ));
    }
    let out = parts.join("\n");
    out.chars().take(2000).collect()
}

/// Lane event types drawn as marks.
const LANE_MARKS: [EventType; 14] = [
    EventType::LaneStarted,
    EventType::StartupAck,
    EventType::StallSuspected,
    EventType::StallCleared,
    EventType::ProbeSent,
    EventType::ProbeAcknowledged,
    EventType::AgentInterrupted,
    EventType::LaneRecovered,
    EventType::LaneReassigned,
    EventType::LaneCompleted,
    EventType::LaneFailed,
    EventType::LaneBlocked,
    EventType::LaneCancelled,
    EventType::ReplacementLineageClosed,
];

impl Timeline {
    fn track(&mut self, lane_id: &str) -> &mut LaneTrack {
        let next = self.lanes.len();
        let i = *self.index.entry(lane_id.to_string()).or_insert(next);
        if i == next {
            self.lanes.push(LaneTrack {
                lane_id: lane_id.to_string(),
                ..LaneTrack::default()
            });
        }
        &mut self.lanes[i]
    }

    /// Fold one verified event (in receipt order).
    pub fn observe(&mut self, event: &Map<String, Value>) {
        self.events += 1;
        let sequence = event.get("sequence").and_then(Value::as_u64).unwrap_or(0);
        let row = log_row(event);
        if self.first_rows.len() < TABLE_ENDS {
            self.first_rows.push(row);
        } else {
            if self.last_rows.len() == TABLE_ENDS {
                self.last_rows.pop_front();
            }
            self.last_rows.push_back(row);
        }
        let time = text(event, "timestamp").unwrap_or_default().to_string();
        let at = parse_lax_timestamp(&time).ok();
        if let Some(at) = at {
            if let Some(latest) = self.latest
                && at < latest
            {
                self.anomaly_count += 1;
                if self.anomalies.len() < MAX_ANOMALIES {
                    self.anomalies.push(Anomaly {
                        sequence,
                        at: time.clone(),
                        latest_before: crate::receipt::primitives::format_now(latest),
                    });
                }
            }
            self.latest = Some(self.latest.map_or(at, |l| l.max(at)));
            widen(&mut self.span, at);
        }
        let meta = event.get("metadata").and_then(Value::as_object);
        if sequence == 1 {
            let epoch = meta
                .and_then(|m| m.get("owner_epoch"))
                .and_then(Value::as_u64)
                .unwrap_or(1);
            self.epochs.push((epoch, sequence, time.clone()));
        }
        let inner = intents(event);
        if inner.is_empty() {
            self.item(sequence, &time, at, event);
        } else {
            for intent in inner {
                let own = text(intent, "timestamp").map(str::to_string);
                let intent_time = own.unwrap_or_else(|| time.clone());
                let intent_at = parse_lax_timestamp(&intent_time).ok().or(at);
                self.item(sequence, &intent_time, intent_at, intent);
            }
        }
    }

    fn item(&mut self, sequence: u64, time: &str, at: Option<Instant>, item: &Map<String, Value>) {
        let kind = EventType::of(item);
        let Some(at) = at else { return };
        let meta = item.get("metadata").and_then(Value::as_object);
        if kind == Some(EventType::RunResumed) {
            // The event carries the old epoch; the new owner's is the next.
            let epoch = meta
                .and_then(|m| m.get("owner_epoch"))
                .and_then(Value::as_u64)
                .map_or(0, |old| old.saturating_add(1));
            self.epochs.push((epoch, sequence, time.to_string()));
        }
        let mark = || Mark {
            at,
            sequence,
            kind,
            detail: detail(sequence, time, item),
        };
        let Some(lane_id) = text(item, "lane_id").map(str::to_string) else {
            keep_mark(&mut self.run_marks, &mut self.folded_run_marks, mark);
            return;
        };
        let mut lane_times = vec![at];
        let heartbeat = matches!(
            kind,
            Some(EventType::HeartbeatObserved | EventType::LeaseRenewed)
        );
        if heartbeat {
            self.heartbeats += u64::from(kind == Some(EventType::HeartbeatObserved));
        }
        let track = self.track(&lane_id);
        if track.agent_id.is_none() {
            track.agent_id = text(item, "agent_id").map(str::to_string);
        }
        if kind == Some(EventType::LaneCreated) {
            track.parent = meta
                .and_then(|m| text(m, "parent_lane_id"))
                .map(str::to_string);
        }
        if let Some(state) = text(item, "to_state")
            && track.segments.last().map(|(_, s)| s.as_str()) != Some(state)
        {
            track.segments.push((at, state.to_string()));
        }
        if heartbeat {
            let end = meta
                .and_then(|m| text(m, "silence_lease_deadline"))
                .and_then(|t| parse_lax_timestamp(t).ok())
                .unwrap_or(at)
                .max(at);
            lane_times.push(end);
            let count = u64::from(kind == Some(EventType::HeartbeatObserved));
            match track.bands.last_mut() {
                Some(band) if at <= band.end && at >= band.start => {
                    band.end = band.end.max(end);
                    band.heartbeats += count;
                }
                _ => track.bands.push(Band {
                    start: at,
                    end,
                    heartbeats: count,
                }),
            }
        } else if kind.is_some_and(|k| LANE_MARKS.contains(&k)) {
            if kind == Some(EventType::LaneReassigned)
                && let Some(child) = meta.and_then(|m| text(m, "replacement_lane_id"))
            {
                track.replaced_by = Some((child.to_string(), at));
            }
            keep_mark(&mut track.marks, &mut track.folded_marks, mark);
        }
        for t in lane_times {
            widen(&mut self.lane_span, t);
        }
    }

    /// Events left out of the table between its first and last rows.
    pub fn hidden_rows(&self) -> u64 {
        self.events
            .saturating_sub((self.first_rows.len() + self.last_rows.len()) as u64)
    }
}

/// Keeps the first [`MAX_MARKS`] marks of a row and only counts the rest.
fn keep_mark(marks: &mut Vec<Mark>, folded: &mut u64, mark: impl FnOnce() -> Mark) {
    if marks.len() < MAX_MARKS {
        marks.push(mark());
    } else {
        *folded += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        seq: u64,
        kind: &str,
        lane: Option<&str>,
        at: &str,
        meta: Value,
    ) -> Map<String, Value> {
        json!({"sequence": seq, "event_type": kind, "lane_id": lane, "agent_id": "a",
               "timestamp": at, "metadata": meta, "evidence_refs": [], "to_state": null,
               "checksum": format!("{seq:064}")})
        .as_object()
        .unwrap()
        .clone()
    }

    /// A timeline that has seen its run created at `at` (owner epoch 1).
    fn created_at(at: &str) -> Timeline {
        let mut t = Timeline::default();
        t.observe(&event(
            1,
            "run_created",
            None,
            at,
            json!({"owner_epoch": 1}),
        ));
        t
    }

    #[test]
    fn heartbeats_fold_into_bands_and_backwards_time_is_flagged() {
        let mut t = created_at("2026-07-14T02:00:00Z");
        for i in 0..1000u64 {
            let at = format!("2026-07-14T01:{:02}:{:02}Z", 1 + i / 60 % 50, i % 60);
            let lease = format!(
                "2026-07-14T01:{:02}:{:02}Z",
                1 + (i + 30) / 60 % 50,
                (i + 30) % 60
            );
            t.observe(&json!({"sequence": i + 2, "event_type": "transaction_committed",
                "timestamp": at, "checksum": "c", "lane_id": null,
                "metadata": {"intents": [
                    {"event_type": "heartbeat_observed", "lane_id": "w0", "timestamp": at, "metadata": {}},
                    {"event_type": "lease_renewed", "lane_id": "w0", "timestamp": at,
                     "metadata": {"silence_lease_deadline": lease}}]}})
                .as_object().unwrap().clone());
        }
        assert_eq!(t.lanes.len(), 1);
        assert_eq!(t.heartbeats, 1000);
        assert_eq!(t.lanes[0].bands.len(), 1, "{:?}", t.lanes[0].bands.len());
        assert_eq!(t.lanes[0].bands[0].heartbeats, 1000);
        // Every heartbeat is earlier than run_created's wall-clock stamp.
        assert_eq!(t.anomaly_count, 1000);
        assert_eq!(t.anomalies.len(), MAX_ANOMALIES);
        assert_eq!(t.first_rows.len(), TABLE_ENDS);
        assert_eq!(t.last_rows.len(), TABLE_ENDS);
        assert_eq!(t.hidden_rows(), 1001 - 2 * TABLE_ENDS as u64);
    }

    #[test]
    fn a_resume_starts_the_next_owner_epoch() {
        let mut t = created_at("2026-07-14T01:00:00Z");
        t.observe(&event(
            2,
            "run_resumed",
            None,
            "2026-07-14T01:10:00Z",
            json!({"owner_epoch": 1}),
        ));
        let epochs: Vec<(u64, u64)> = t.epochs.iter().map(|(e, s, _)| (*e, *s)).collect();
        assert_eq!(epochs, vec![(1, 1), (2, 2)]);
        assert_eq!(t.run_marks.len(), 2);
    }
}
