//! What a mutation deciding on a checkpoint proves from the receipt before
//! it appends (trust-model §2 promise 3; contracts/receipt.md "What a
//! mutation proves"). A checkpoint, even validly MACed, is only a claim: a
//! holder of `derived.key` can write any. So the facts the event rests on
//! are re-read from the receipt lines they came from:
//!
//! - the receipt's last lines, read backwards from the checkpoint's head
//!   and linked by their checksums (each line canonical, its checksum
//!   recomputed), down to the oldest line any fact needs;
//! - each lane the event changes: the line of its last event (its
//!   sequence is in the checkpoint) is a line of that lane that produces
//!   the cached state, and no later line names the lane at all;
//! - the owner (fingerprint, epoch) the event is sealed with is the last
//!   line's, and the run is not terminal unless the last line made it so.
//!
//! The lines read are the ones between the oldest such fact and the head:
//! a constant number per decision in a run whose lanes keep reporting, never
//! the receipt's length. When that stretch is longer than [`BUDGET`], or a
//! fact cannot be proven this way (a lane the event creates: its absence is
//! not a line), the mutation decides on a full replay instead.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ledger::OpenRun;
use crate::coordinator::CoordinatorState;
use crate::receipt::verify::{ChainPosition, LineRules};
use crate::receipt::vocab::EventType;

/// The most receipt bytes a proof reads before it gives way to a full
/// replay.
pub const BUDGET: u64 = 1 << 20;
/// The first window read (grown fourfold up to [`BUDGET`]).
const FIRST_WINDOW: u64 = 16 * 1024;

/// A lane's record before the decision, as the checkpoint had it.
pub struct LaneBefore {
    pub record: Value,
    pub source: Option<u64>,
}

/// The verified last events of the receipt, oldest first, ending at the
/// checkpoint's head: `events[i]` has sequence `first + i`.
struct Tail {
    first: u64,
    events: Vec<Map<String, Value>>,
}

/// Read backwards from `head` until the event `down_to` is reached, each
/// line proving itself and linking to the next by its checksum. `None`
/// when the lines do not prove it or the stretch exceeds [`BUDGET`].
fn read_tail(run: &OpenRun, head: &ChainPosition, down_to: u64) -> Option<Tail> {
    if down_to == 0 || down_to > head.sequence {
        return None;
    }
    let end = head.byte_length;
    let rules = LineRules::new(&run.manifest, &run.dir.run_id, true);
    let mut window = FIRST_WINDOW;
    loop {
        let len = window.min(end);
        let bytes = run.dir.read_receipt_range(end, len)?;
        if bytes.last() != Some(&b'\n') {
            return None;
        }
        // Whole lines only: the first piece is partial unless the window
        // starts the receipt.
        let body = &bytes[..bytes.len() - 1];
        let mut lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
        if len < end && !lines.is_empty() {
            lines.remove(0);
        }
        let mut events = Vec::new();
        let mut expect_sequence = head.sequence;
        let mut expect_checksum = head.checksum.clone();
        let mut reached = false;
        for line in lines.iter().rev() {
            let mut framed = line.to_vec();
            framed.push(b'\n');
            let arena = bumpalo::Bump::new();
            let facts = rules.examine(&framed, &arena);
            let (event, sequence, previous, checksum) = facts.proven_event()?;
            if sequence != expect_sequence || checksum != expect_checksum {
                return None;
            }
            events.push(event.to_map());
            if sequence == down_to {
                reached = true;
                break;
            }
            expect_sequence = sequence - 1;
            expect_checksum = previous.to_string();
        }
        if reached {
            events.reverse();
            return Some(Tail {
                first: down_to,
                events,
            });
        }
        if len == end || window >= BUDGET {
            return None;
        }
        window = (window * 4).min(BUDGET);
    }
}

/// Whether `value` holds the string `text` anywhere (a key's value, an
/// array item, at any depth).
fn mentions(value: &Value, text: &str) -> bool {
    match value {
        Value::String(s) => s == text,
        Value::Array(items) => items.iter().any(|v| mentions(v, text)),
        Value::Object(map) => map.values().any(|v| mentions(v, text)),
        _ => false,
    }
}

/// Every string value of an event (at any depth), for "which lanes and
/// components does it name".
pub fn named_strings(event: &Map<String, Value>) -> std::collections::BTreeSet<&str> {
    fn walk<'a>(value: &'a Value, out: &mut std::collections::BTreeSet<&'a str>) {
        match value {
            Value::String(s) => {
                out.insert(s.as_str());
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for value in event.values() {
        walk(value, &mut out);
    }
    out
}

/// The logical events of a receipt event: its intents, or itself.
fn logical(event: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    let text =
        |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    if text(event, "event_type").as_deref() == Some(EventType::TransactionCommitted.as_str()) {
        event
            .get("metadata")
            .and_then(|m| m.get("intents"))
            .and_then(Value::as_array)
            .map(|intents| intents.iter().filter_map(Value::as_object).collect())
            .unwrap_or_default()
    } else {
        vec![event]
    }
}

/// Does the line of a lane's last event produce the cached record? Its
/// last logical event naming the lane as `lane_id` must carry the record's
/// event type, target state and time; a line that changed the lane through
/// another reducer (a replacement, a resolution) must at least name it.
fn produces(event: &Map<String, Value>, lane_id: &str, record: &Value) -> bool {
    let own = logical(event)
        .into_iter()
        .rfind(|e| e.get("lane_id").and_then(Value::as_str) == Some(lane_id));
    let Some(own) = own else {
        return mentions(&Value::Object(event.clone()), lane_id);
    };
    let field = |k: &str| own.get(k).and_then(Value::as_str);
    let cached = |k: &str| record.get(k).and_then(Value::as_str);
    let liveness = field("event_type")
        .and_then(EventType::parse)
        .is_some_and(EventType::is_liveness);
    // A liveness event leaves its evidence as the lane's last liveness
    // evidence (what the freshness rule compares first).
    if liveness && own.get("evidence_refs") != record.get("liveness_evidence_refs") {
        return false;
    }
    field("event_type") == cached("last_event_type")
        && field("to_state").is_none_or(|to| Some(to) == cached("state"))
        && field("timestamp") == cached("updated_at")
        && field("agent_id").is_none_or(|agent| Some(agent) == cached("agent_id"))
}

/// The owner the last event leaves: its token and epoch, or the new owner
/// of a `run_resumed`.
fn owner_after(event: &Map<String, Value>) -> Option<(String, u64)> {
    let metadata = event.get("metadata")?;
    let epoch = metadata.get("owner_epoch")?.as_u64()?;
    if event.get("event_type").and_then(Value::as_str) == Some(EventType::RunResumed.as_str()) {
        let fingerprint = metadata.get("new_owner_fingerprint")?.as_str()?;
        return Some((fingerprint.to_string(), epoch.checked_add(1)?));
    }
    Some((event.get("owner_token")?.as_str()?.to_string(), epoch))
}

/// Prove, from the receipt, the facts of the checkpoint-loaded `state`
/// that an event changing `touched` lanes rests on (see the module
/// documentation). `before` holds those lanes as the checkpoint had them;
/// a touched lane missing from it is one the event creates.
pub fn prove(
    run: &OpenRun,
    state: &CoordinatorState,
    head: &ChainPosition,
    before: &BTreeMap<String, LaneBefore>,
    touched: &[String],
    run_state: bool,
) -> bool {
    let mut oldest = head.sequence;
    if run_state {
        oldest = oldest.min(state.run_source());
    }
    for lane in touched {
        match before.get(lane).and_then(|b| b.source) {
            Some(source) => oldest = oldest.min(source),
            None => return false,
        }
    }
    let Some(tail) = read_tail(run, head, oldest) else {
        return false;
    };
    let Some(last) = tail.events.last() else {
        return false;
    };
    // The owner the event will be sealed with.
    if owner_after(last)
        != state
            .owner_fingerprint()
            .map(|f| (f.to_string(), state.owner_epoch()))
    {
        return false;
    }
    // The run state, where the last line speaks of it: a run event leaves
    // its target, a live report may follow completion.
    for event in logical(last) {
        let kind = event
            .get("event_type")
            .and_then(Value::as_str)
            .and_then(EventType::parse);
        let Some(kind) = kind else {
            return false;
        };
        if kind == EventType::LiveReportRecorded {
            return false;
        }
        if crate::coordinator::machine::run_edge(kind).is_some()
            && event.get("to_state").and_then(Value::as_str) != Some(state.run_state())
        {
            return false;
        }
    }
    // The run state itself (for a refusal): the line of the last run
    // event leaves it, and no later line is a run event.
    if run_state {
        let Some(source) = state.run_source().checked_sub(tail.first) else {
            return false;
        };
        let is_run_event = |event: &Map<String, Value>| {
            event
                .get("event_type")
                .and_then(Value::as_str)
                .and_then(EventType::parse)
                .is_some_and(|k| crate::coordinator::machine::run_edge(k).is_some())
        };
        let Some(line) = tail.events.get(source as usize) else {
            return false;
        };
        let target = logical(line)
            .into_iter()
            .rfind(|e| is_run_event(e))
            .and_then(|e| e.get("to_state").and_then(Value::as_str));
        if target != Some(state.run_state()) {
            return false;
        }
        if tail.events[source as usize + 1..]
            .iter()
            .any(|later| logical(later).into_iter().any(is_run_event))
        {
            return false;
        }
    }
    for lane in touched {
        let Some(LaneBefore {
            record,
            source: Some(source),
        }) = before.get(lane)
        else {
            return false;
        };
        let at = (source - tail.first) as usize;
        let Some(line) = tail.events.get(at) else {
            return false;
        };
        if !produces(line, lane, record) {
            return false;
        }
        if tail.events[at + 1..]
            .iter()
            .any(|later| later.values().any(|v| mentions(v, lane)))
        {
            return false;
        }
    }
    true
}
