//! The metadata of each coordinator event, decoded once into a typed value
//! before the reducer uses it (reference-coordinator.md §3, §8–§10, §13).
//!
//! A decoder checks shape only: a text field is text, null or absent; a
//! list of texts is such a list; a count is an integer. What the values
//! must be against the state (a known lane, the owner's current epoch) is
//! the reducer's to say. The reference reads metadata with `dict.get` and
//! checks no type; a value of the wrong type is refused here as "event
//! metadata field K is malformed". The reducer decodes an
//! event's metadata where it first needs it, and a field it checks only
//! after a state rule is kept as a `Result` until then, so a receipt the
//! reference refuses for another reason is refused for that reason here.

use serde_json::{Map, Number, Value};

use super::state::{Component, CoverageState};
use crate::receipt::json_ref::{JsonRef, ObjectRef};
use crate::receipt::vocab::EventType;

/// A metadata field of the wrong type, by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed(pub &'static str);

type Decoded<T> = Result<T, Malformed>;

/// An event's metadata object (`None`: absent or null).
#[derive(Clone, Copy)]
pub(super) struct Meta<'a>(Option<&'a ObjectRef<'a>>);

impl<'a> Meta<'a> {
    /// The `metadata` of an event; `None` when it is neither an object,
    /// null nor absent.
    pub(super) fn of(event: &'a ObjectRef<'a>) -> Option<Meta<'a>> {
        match event.get("metadata") {
            None | Some(JsonRef::Null) => Some(Meta(None)),
            Some(JsonRef::Object(meta)) => Some(Meta(Some(meta))),
            Some(_) => None,
        }
    }

    fn get(&self, key: &str) -> Option<&'a JsonRef<'a>> {
        self.0.and_then(|map| map.get(key))
    }

    /// The owner epoch an event says it was written under.
    pub(super) fn owner_epoch(&self) -> Option<u64> {
        self.get("owner_epoch").and_then(JsonRef::as_u64)
    }

    /// A transaction's intents (none when absent or null).
    pub(super) fn intents(&self) -> Decoded<&'a [JsonRef<'a>]> {
        match self.get("intents") {
            None | Some(JsonRef::Null) => Ok(&[]),
            Some(JsonRef::Array(intents)) => Ok(intents),
            Some(_) => Err(Malformed("intents")),
        }
    }

    /// Whether a `candidate_validated` resolves a failed lane (§9).
    pub(super) fn resolves_failed_lane(&self) -> bool {
        self.get("candidate_kind").and_then(JsonRef::as_str) == Some("failed_lane_resolution")
    }

    fn text(&self, key: &'static str) -> Decoded<Option<&'a str>> {
        match self.get(key) {
            None | Some(JsonRef::Null) => Ok(None),
            Some(JsonRef::String(text)) => Ok(Some(text)),
            Some(_) => Err(Malformed(key)),
        }
    }

    fn owned_text(&self, key: &'static str) -> Decoded<Option<String>> {
        Ok(self.text(key)?.map(str::to_owned))
    }

    /// A text field only when the metadata has the key (`Some(None)`: null).
    fn text_if_present(&self, key: &'static str) -> Decoded<Option<Option<String>>> {
        match self.0.is_some_and(|map| map.contains_key(key)) {
            true => Ok(Some(self.owned_text(key)?)),
            false => Ok(None),
        }
    }

    fn texts(&self, key: &'static str) -> Decoded<Vec<String>> {
        match self.get(key) {
            None | Some(JsonRef::Null) => Ok(Vec::new()),
            Some(JsonRef::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or(Malformed(key)),
            Some(_) => Err(Malformed(key)),
        }
    }

    /// A replacement count as the state keeps it (the number's text).
    fn count(&self, key: &'static str) -> Decoded<Option<Number>> {
        match self.get(key) {
            None => Ok(None),
            Some(JsonRef::Number(text)) => text.parse().map(Some).map_err(|_| Malformed(key)),
            Some(_) => Err(Malformed(key)),
        }
    }
}

/// `run_resumed`: the epoch it ends and the owner it starts.
pub(super) struct Resumed<'a> {
    pub owner_epoch: Option<u64>,
    /// The new owner's fingerprint when it is 64 lowercase hex digits.
    pub new_owner_fingerprint: Option<&'a str>,
}

impl<'a> Resumed<'a> {
    pub(super) fn decode(meta: Meta<'a>) -> Resumed<'a> {
        let is_fingerprint = |text: &&str| {
            text.len() == 64
                && text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        Resumed {
            owner_epoch: meta.owner_epoch(),
            new_owner_fingerprint: meta
                .get("new_owner_fingerprint")
                .and_then(JsonRef::as_str)
                .filter(is_fingerprint),
        }
    }
}

/// `lane_created`: the lane's description as `lane-create` recorded it.
pub(super) struct LaneCreated {
    pub replacement_count: Number,
    pub evidence_digest: Option<String>,
    pub assignment: Option<String>,
    pub write_scope: Vec<String>,
    pub fallback: Option<String>,
    pub startup_ack_deadline: Option<String>,
    pub silence_lease_deadline: Option<String>,
    pub command_deadline: Option<String>,
    pub probe_deadline: Option<String>,
    pub parent_lane_id: Option<String>,
    pub replacement_lane_id: Option<String>,
}

impl LaneCreated {
    pub(super) fn decode(meta: Meta<'_>) -> Decoded<LaneCreated> {
        // Fields are decoded in this order: the first malformed one is named.
        Ok(LaneCreated {
            replacement_count: meta
                .count("replacement_count")?
                .unwrap_or(Number::from(0u8)),
            evidence_digest: meta.owned_text("evidence_digest")?,
            assignment: meta.owned_text("assignment")?,
            write_scope: meta.texts("write_scope")?,
            fallback: meta.owned_text("fallback")?,
            startup_ack_deadline: meta.owned_text("startup_ack_deadline")?,
            silence_lease_deadline: meta.owned_text("silence_lease_deadline")?,
            command_deadline: meta.owned_text("command_deadline")?,
            probe_deadline: meta.owned_text("probe_deadline")?,
            parent_lane_id: meta.owned_text("parent_lane_id")?,
            replacement_lane_id: meta.owned_text("replacement_lane_id")?,
        })
    }
}

/// A lane step (§3): the lane fields the event sets, each only when the
/// metadata has its key (`Some(None)`: set to null).
pub(super) struct LaneStep {
    pub silence_lease_deadline: Option<Option<String>>,
    pub probe_deadline: Option<Option<String>>,
    pub evidence_digest: Option<Option<String>>,
    pub replacement_lane_id: Option<Option<String>>,
    pub replacement_count: Option<Number>,
    /// `lane_completed` only.
    pub changed_paths: Option<Vec<String>>,
    /// `lane_reassigned` carrying every reservation field: the reservation
    /// `replacement-repair` checks its child against.
    pub reservation: Option<Map<String, Value>>,
}

impl LaneStep {
    pub(super) fn decode(meta: Meta<'_>, event_type: EventType) -> Decoded<LaneStep> {
        Ok(LaneStep {
            silence_lease_deadline: meta.text_if_present("silence_lease_deadline")?,
            probe_deadline: meta.text_if_present("probe_deadline")?,
            evidence_digest: meta.text_if_present("evidence_digest")?,
            replacement_lane_id: meta.text_if_present("replacement_lane_id")?,
            replacement_count: meta.count("replacement_count")?,
            changed_paths: match event_type {
                EventType::LaneCompleted => Some(meta.texts("changed_paths")?),
                _ => None,
            },
            reservation: match (event_type, meta.0) {
                (EventType::LaneReassigned, Some(map))
                    if reservation_fields().all(|k| map.contains_key(k)) =>
                {
                    Some(
                        reservation_fields()
                            .filter_map(|k| map.get(k).map(|v| (k.to_owned(), v.to_value())))
                            .collect(),
                    )
                }
                _ => None,
            },
        })
    }
}

/// The fields a `lane_reassigned` must carry for its reservation to be
/// stored (the exact child proof of `replacement-repair`): its metadata
/// but the previous agent.
fn reservation_fields() -> impl Iterator<Item = &'static str> {
    crate::receipt::rules::REASSIGN_KEYS
        .into_iter()
        .filter(|key| *key != "previous_agent_id")
}

/// `replacement_repaired`, `replacement_blocked` and
/// `replacement_lineage_closed` (§8): the lineage they act on.
pub(super) struct Lineage<'a> {
    pub original_lane_id: Option<&'a str>,
    pub replacement_lane_id: Option<&'a str>,
    /// `replacement_lineage_closed` only.
    pub replacement_terminal_state: Option<&'a str>,
}

impl<'a> Lineage<'a> {
    pub(super) fn decode(meta: Meta<'a>, event_type: EventType) -> Decoded<Lineage<'a>> {
        Ok(Lineage {
            original_lane_id: meta.text("original_lane_id")?,
            replacement_lane_id: meta.text("replacement_lane_id")?,
            replacement_terminal_state: match event_type {
                EventType::ReplacementLineageClosed => meta.text("replacement_terminal_state")?,
                _ => None,
            },
        })
    }
}

/// A `candidate_validated` resolving a failed lane (§9).
pub(super) struct Resolution<'a> {
    pub original_lane_id: Option<&'a str>,
    pub resolution_lane_id: Option<&'a str>,
    /// The two digests the event binds, checked after its lineage.
    pub binding: Decoded<(Option<&'a str>, Option<&'a str>)>,
}

impl<'a> Resolution<'a> {
    pub(super) fn decode(meta: Meta<'a>) -> Decoded<Resolution<'a>> {
        Ok(Resolution {
            original_lane_id: meta.text("original_lane_id")?,
            resolution_lane_id: meta.text("resolution_lane_id")?,
            binding: meta
                .text("original_evidence_digest")
                .and_then(|original| Ok((original, meta.text("resolution_evidence_digest")?))),
        })
    }
}

/// `topology_registered` (§10): the components, in their recorded order.
pub(super) struct Topology {
    pub components: Vec<Component>,
}

impl Topology {
    pub(super) fn decode(meta: Meta<'_>) -> Decoded<Topology> {
        let components = match meta.get("components") {
            None => &[][..],
            Some(JsonRef::Array(components)) => &components[..],
            Some(_) => return Err(Malformed("components")),
        };
        let components = components
            .iter()
            .map(|value| parse_component(value).ok_or(Malformed("components")))
            .collect::<Decoded<_>>()?;
        Ok(Topology { components })
    }
}

fn parse_component(value: &JsonRef<'_>) -> Option<Component> {
    let map = value.as_object()?;
    let strings = |key: &str| -> Option<Vec<String>> {
        map.get(key)?
            .as_array()?
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect()
    };
    Some(Component {
        id: map.get("id")?.as_str()?.to_owned(),
        required: map.get("required")?.as_bool()?,
        description: map.get("description")?.as_str()?.to_owned(),
        owner_lane: map.get("owner_lane")?.as_str()?.to_owned(),
        required_checks: strings("required_checks")?,
        dependencies: strings("dependencies")?,
        evidence_refs: map.get("evidence_refs")?.as_array()?.to_values(),
        coverage_state: CoverageState::parse(map.get("coverage_state")?.as_str()?)?,
    })
}

/// `topology_component_removed`, `check_passed`/`check_failed` and
/// `evidence_attached` (§10): the component, and the check or coverage.
pub(super) struct ComponentFact<'a> {
    pub component_id: Option<&'a str>,
    /// `check_passed`/`check_failed` only.
    pub check_id: Option<&'a str>,
    /// `evidence_attached` only, checked once the component is known.
    pub coverage_state: Decoded<CoverageState>,
}

impl<'a> ComponentFact<'a> {
    pub(super) fn decode(meta: Meta<'a>, event_type: EventType) -> Decoded<ComponentFact<'a>> {
        let component_id = meta.text("component_id")?;
        let check_id = match event_type {
            EventType::CheckPassed | EventType::CheckFailed => meta.text("check_id")?,
            _ => None,
        };
        let coverage_state = meta
            .text("coverage_state")
            .ok()
            .flatten()
            .and_then(CoverageState::parse)
            .ok_or(Malformed("coverage_state"));
        Ok(ComponentFact {
            component_id,
            check_id,
            coverage_state,
        })
    }
}

/// `handoff_recorded`/`live_report_recorded` (§13): the kind and the whole
/// binding, which a later event of the kind must repeat exactly.
pub(super) struct Report<'a> {
    pub kind: &'a str,
    pub binding: Map<String, Value>,
}

impl<'a> Report<'a> {
    pub(super) fn decode(meta: Meta<'a>) -> Decoded<Report<'a>> {
        let binding = meta.0.map(ObjectRef::to_map).unwrap_or_default();
        let kind = meta.text("report_kind")?.ok_or(Malformed("report_kind"))?;
        Ok(Report { kind, binding })
    }
}
