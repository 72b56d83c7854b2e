//! The receipt event contract (reference-runtime §6.3–§6.8): evidence items,
//! per-event metadata, transaction intents, topology components and recovery
//! provenance. Pure functions over parsed JSON; each failure is a message.

use bumpalo::Bump;
use serde_json::Value;

use super::json_ref::{JsonRef, ObjectRef};

use super::primitives::{
    Identifier, LaneId, as_int, char_len, is_identifier, is_sha256_hex, is_timestamp_shape,
};
use super::vocab::EventType;

/// Manifest family: the first two components of `manifest_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Phase 1: raw owner token in receipts, no metadata.
    V1_0,
    /// Phase 2: owner fingerprints, metadata with owner epochs.
    V1_1,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V1_0 => "1.0",
            Family::V1_1 => "1.1",
        }
    }
}

/// The resource limits of a manifest (reference-runtime §6.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_receipt_line_bytes: u64,
    pub max_input_json_bytes: u64,
    pub max_evidence_refs: u64,
    pub max_components: u64,
    pub max_lanes: u64,
    pub max_component_checks: u64,
    pub max_component_dependencies: u64,
    pub max_write_scopes: u64,
    pub max_identifier_chars: u64,
    pub max_evidence_kind_chars: u64,
    pub max_evidence_path_chars: u64,
    pub max_evidence_summary_chars: u64,
    pub max_description_chars: u64,
    pub max_assignment_chars: u64,
}

pub const LIMIT_KEYS: [&str; 14] = [
    "max_assignment_chars",
    "max_component_checks",
    "max_component_dependencies",
    "max_components",
    "max_description_chars",
    "max_evidence_kind_chars",
    "max_evidence_path_chars",
    "max_evidence_refs",
    "max_evidence_summary_chars",
    "max_identifier_chars",
    "max_input_json_bytes",
    "max_lanes",
    "max_receipt_line_bytes",
    "max_write_scopes",
];

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

impl Limits {
    /// The manifest's default `resource_limits`.
    pub const DEFAULT: Limits = Limits {
        max_receipt_line_bytes: 65536,
        max_input_json_bytes: 1_048_576,
        max_evidence_refs: 8,
        max_components: 8,
        max_lanes: 64,
        max_component_checks: 8,
        max_component_dependencies: 8,
        max_write_scopes: 32,
        max_identifier_chars: 128,
        max_evidence_kind_chars: 32,
        max_evidence_path_chars: 256,
        max_evidence_summary_chars: 256,
        max_description_chars: 500,
        max_assignment_chars: 500,
    };

    /// Limits from an already validated `resource_limits` object; missing or
    /// odd values fall back to the defaults.
    pub fn from_object(object: Option<&Value>) -> Limits {
        let mut limits = Limits::default();
        let Some(Value::Object(map)) = object else {
            return limits;
        };
        let get = |key: &str, default: u64| -> u64 {
            map.get(key)
                .and_then(as_int)
                .map(|v| v.clamp(0, u64::MAX as i128) as u64)
                .unwrap_or(default)
        };
        limits.max_receipt_line_bytes =
            get("max_receipt_line_bytes", limits.max_receipt_line_bytes);
        limits.max_input_json_bytes = get("max_input_json_bytes", limits.max_input_json_bytes);
        limits.max_evidence_refs = get("max_evidence_refs", limits.max_evidence_refs);
        limits.max_components = get("max_components", limits.max_components);
        limits.max_lanes = get("max_lanes", limits.max_lanes);
        limits.max_component_checks = get("max_component_checks", limits.max_component_checks);
        limits.max_component_dependencies = get(
            "max_component_dependencies",
            limits.max_component_dependencies,
        );
        limits.max_write_scopes = get("max_write_scopes", limits.max_write_scopes);
        limits.max_identifier_chars = get("max_identifier_chars", limits.max_identifier_chars);
        limits.max_evidence_kind_chars =
            get("max_evidence_kind_chars", limits.max_evidence_kind_chars);
        limits.max_evidence_path_chars =
            get("max_evidence_path_chars", limits.max_evidence_path_chars);
        limits.max_evidence_summary_chars = get(
            "max_evidence_summary_chars",
            limits.max_evidence_summary_chars,
        );
        limits.max_description_chars = get("max_description_chars", limits.max_description_chars);
        limits.max_assignment_chars = get("max_assignment_chars", limits.max_assignment_chars);
        limits
    }
}

type Rule = Result<(), String>;

/// The value of a field that is not there (a slot not yet filled).
const NULL: &JsonRef<'static> = &JsonRef::Null;

/// A string of at most `max` code points.
fn bounded_string(value: &JsonRef<'_>, max: usize) -> bool {
    matches!(value, JsonRef::String(s) if char_len(s) <= max)
}

fn fail<T>(message: impl Into<String>) -> Result<T, String> {
    Err(message.into())
}

fn within(len: usize, max: u64) -> bool {
    (len as u64) <= max
}

/// E1–E9: an `evidence_refs` list.
pub fn check_evidence_ref(value: &JsonRef<'_>, limits: &Limits) -> Rule {
    let JsonRef::Array(items) = value else {
        return fail("evidence_refs must be a list");
    };
    if !within(items.len(), limits.max_evidence_refs) {
        return fail("evidence_refs must contain at most 8 entries");
    }
    for item in items.iter() {
        let JsonRef::Object(map) = item else {
            return fail("evidence reference must be an object");
        };
        if map
            .keys()
            .any(|k| !matches!(k, "kind" | "summary" | "path" | "checksum" | "exit_status"))
        {
            return fail("evidence reference contains unsupported fields");
        }
        match map.get("kind") {
            Some(JsonRef::String(kind))
                if !kind.is_empty() && within(char_len(kind), limits.max_evidence_kind_chars) => {}
            _ => return fail("evidence kind must be a bounded non-empty string"),
        }
        match map.get("summary") {
            Some(JsonRef::String(s)) if within(char_len(s), limits.max_evidence_summary_chars) => {}
            _ => return fail("evidence summary must be at most 256 characters"),
        }
        if let Some(path) = map.get("path")
            && !matches!(path, JsonRef::String(p) if within(char_len(p), limits.max_evidence_path_chars))
        {
            return fail("evidence path must be a bounded string");
        }
        if let Some(checksum) = map.get("checksum")
            && !matches!(checksum, JsonRef::String(c) if is_sha256_hex(c))
        {
            return fail("evidence checksum must be lowercase SHA-256");
        }
        if let Some(status) = map.get("exit_status")
            && status.as_int().is_none()
        {
            return fail("evidence exit_status must be an integer");
        }
    }
    Ok(())
}

/// The metadata a `lane_reassigned` must carry: the previous agent and its
/// replacement's exact child proof (the rest).
pub const REASSIGN_KEYS: [&str; 10] = [
    "replacement_count",
    "previous_agent_id",
    "replacement_lane_id",
    "replacement_agent_id",
    "replacement_assignment",
    "replacement_write_scope",
    "replacement_fallback",
    "replacement_startup_ack_deadline",
    "replacement_command_deadline",
    "checkpoint_digest",
];

/// The metadata keys an event type may carry beyond `owner_epoch`, and which
/// of them it must carry (reference-runtime §6.5).
pub fn metadata_keys(event_type: EventType) -> (&'static [&'static str], &'static [&'static str]) {
    const RECOVERY: &[&str] = &RECOVERY_KEYS;
    const LANE_CREATED: &[&str] = &[
        "assignment",
        "write_scope",
        "fallback",
        "startup_ack_deadline",
        "command_deadline",
        "replacement_count",
        "parent_lane_id",
    ];
    const REASSIGN: &[&str] = &REASSIGN_KEYS;
    const REPAIR: &[&str] = &[
        "original_lane_id",
        "replacement_lane_id",
        "checkpoint_digest",
    ];
    const CLOSE: &[&str] = &[
        "original_lane_id",
        "replacement_lane_id",
        "replacement_terminal_state",
    ];
    const CANDIDATE: &[&str] = &[
        "candidate_kind",
        "original_lane_id",
        "resolution_lane_id",
        "original_evidence_digest",
        "resolution_evidence_digest",
    ];
    const REPORT: &[&str] = &[
        "report_kind",
        "report_path",
        "report_checksum",
        "report_receipt_head",
    ];
    use EventType::*;
    match event_type {
        RunCreated => (RECOVERY, &[]),
        LaneCreated => (LANE_CREATED, LANE_CREATED),
        HeartbeatObserved => (&["evidence_digest"], &["evidence_digest"]),
        LeaseRenewed => (
            &["silence_lease_deadline", "evidence_digest"],
            &["silence_lease_deadline", "evidence_digest"],
        ),
        LaneCompleted => (&["changed_paths"], &["changed_paths"]),
        ProbeSent => (&["probe_deadline"], &["probe_deadline"]),
        LaneReassigned => (
            REASSIGN,
            &[
                "replacement_count",
                "previous_agent_id",
                "replacement_lane_id",
            ],
        ),
        ReplacementRepaired | ReplacementBlocked => (REPAIR, REPAIR),
        ReplacementLineageClosed => (CLOSE, CLOSE),
        CandidateValidated => (CANDIDATE, &[]),
        RunResumed => (&["new_owner_fingerprint"], &["new_owner_fingerprint"]),
        TransactionCommitted => (&["intents"], &["intents"]),
        HandoffRecorded | LiveReportRecorded => (REPORT, REPORT),
        TopologyRegistered => (&["components"], &["components"]),
        TopologyComponentRemoved => (&["component_id"], &["component_id"]),
        CheckPassed | CheckFailed => (&["component_id", "check_id"], &["component_id", "check_id"]),
        EvidenceAttached => (
            &["component_id", "coverage_state"],
            &["component_id", "coverage_state"],
        ),
        _ => (&[], &[]),
    }
}

/// The nine provenance fields of a recovery run's `run_created`.
pub const RECOVERY_KEYS: [&str; 9] = [
    "recovery_original_run_id",
    "recovery_diagnose_checksum",
    "recovery_manifest_version",
    "recovery_manifest_hash",
    "recovery_quarantine_path",
    "recovery_quarantine_hash",
    "recovery_first_bad_sequence",
    "recovery_trusted_sequence",
    "recovery_trusted_checksum",
];

/// Lexical containment of a relative path under `prefix/`.
fn is_contained_relative(path: &str, prefix: &str) -> bool {
    !path.starts_with('/') && path.starts_with(prefix) && !path.split('/').any(|part| part == "..")
}

/// §6.6: the provenance fields (all nine present). A receipt damaged at
/// its first line has no trusted prefix: trusted sequence 0 with an empty
/// trusted checksum is accepted (decisions.md 11; the reference refuses it).
pub fn check_recovery_provenance_ref(metadata: &ObjectRef<'_>) -> Rule {
    let text = |key: &str| metadata.get(key).and_then(JsonRef::as_str);
    if !text("recovery_original_run_id").is_some_and(is_identifier) {
        return fail("recovery_original_run_id is invalid");
    }
    let no_trusted_prefix = metadata
        .get("recovery_trusted_sequence")
        .and_then(JsonRef::as_int)
        == Some(0);
    for key in [
        "recovery_diagnose_checksum",
        "recovery_manifest_hash",
        "recovery_quarantine_hash",
        "recovery_trusted_checksum",
    ] {
        let genesis =
            key == "recovery_trusted_checksum" && no_trusted_prefix && text(key) == Some("");
        if !genesis && !text(key).is_some_and(is_sha256_hex) {
            return fail(format!("{key} must be lowercase SHA-256"));
        }
    }
    if !metadata
        .get("recovery_manifest_version")
        .is_some_and(|v| bounded_string(v, 32))
    {
        return fail("recovery manifest version is invalid");
    }
    match text("recovery_quarantine_path") {
        Some(p) if char_len(p) <= 256 && is_contained_relative(p, "quarantine/") => {}
        _ => return fail("recovery quarantine path must be contained"),
    }
    if metadata
        .get("recovery_first_bad_sequence")
        .and_then(JsonRef::as_int)
        .is_none_or(|v| v < 1)
    {
        return fail("recovery_first_bad_sequence is invalid");
    }
    if metadata
        .get("recovery_trusted_sequence")
        .and_then(JsonRef::as_int)
        .is_none_or(|v| v < 0)
    {
        return fail("recovery_trusted_sequence is invalid");
    }
    Ok(())
}

/// One component of `topology-register --input` (TC1–TC9, checked by
/// [`check_component_ref`]); its limits in the schema are the manifest
/// defaults, the check reads the run's. A component is recorded as given,
/// so this type is its schema and keys.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
// A field's doc comment is its prose in the help's field table
// (`surface::help`); notes for the reader of this code are plain comments.
pub struct Component {
    // `missing` when registered; a receipt may also hold `partial` or
    // `covered`.
    #[schemars(schema_with = "registered_coverage")]
    pub coverage_state: String,
    /// Ids of components in this list, no cycles (a component may not
    /// depend on itself).
    #[schemars(
        length(max = Limits::DEFAULT.max_component_dependencies),
        extend("uniqueItems" = true)
    )]
    pub dependencies: Vec<Identifier>,
    /// What the component is.
    #[schemars(length(min = 1, max = Limits::DEFAULT.max_description_chars))]
    pub description: String,
    /// Coverage evidence comes later (component-evidence).
    #[schemars(schema_with = "no_items")]
    pub evidence_refs: Vec<Value>,
    /// An approved component id; unique in the list.
    pub id: Identifier,
    /// An existing lane (any state) whose completion covers the component.
    pub owner_lane: LaneId,
    /// Whether completion needs this component covered.
    pub required: bool,
    /// The checks check-result must record as passed.
    #[schemars(
        length(max = Limits::DEFAULT.max_component_checks),
        extend("uniqueItems" = true)
    )]
    pub required_checks: Vec<Identifier>,
}

fn registered_coverage(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"const": "missing"})
}

fn no_items(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "maxItems": 0})
}

/// TC1–TC9: one topology component.
pub fn check_component_ref(value: &JsonRef<'_>, limits: &Limits) -> Rule {
    let keys = &super::schema::keys_of!(Component).required;
    let JsonRef::Object(map) = value else {
        return fail("component metadata fields do not match contract");
    };
    if map.len() != keys.len() || keys.iter().any(|k| !map.contains_key(k)) {
        return fail("component metadata fields do not match contract");
    }
    for key in ["id", "owner_lane"] {
        if !map[key].as_str().is_some_and(is_identifier) {
            return fail(format!(
                "component {key} must match the identifier contract"
            ));
        }
    }
    if !map["required"].is_boolean() {
        return fail("component required must be a boolean");
    }
    match &map["description"] {
        JsonRef::String(d)
            if !d.is_empty() && within(char_len(d), limits.max_description_chars) => {}
        _ => return fail("component description is invalid"),
    }
    for (key, max) in [
        ("required_checks", limits.max_component_checks),
        ("dependencies", limits.max_component_dependencies),
    ] {
        let JsonRef::Array(items) = &map[key] else {
            return fail(format!("component {key} exceeds its limit"));
        };
        if !within(items.len(), max) {
            return fail(format!("component {key} exceeds its limit"));
        }
        if items.iter().any(|i| !i.as_str().is_some_and(is_identifier)) {
            return fail(format!(
                "component {key} must match the identifier contract"
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if !items.iter().all(|i| seen.insert(i.as_str())) {
            return fail(format!("component {key} contains duplicates"));
        }
    }
    if !matches!(&map["evidence_refs"], JsonRef::Array(a) if a.is_empty()) {
        return fail("topology snapshot evidence_refs must be empty");
    }
    if !matches!(
        map["coverage_state"].as_str(),
        Some("missing" | "partial" | "covered")
    ) {
        return fail("component coverage_state is invalid");
    }
    Ok(())
}

/// The ten keys of a transaction intent.
pub const INTENT_KEYS: [&str; 10] = [
    "agent_id",
    "event_type",
    "evidence_refs",
    "from_state",
    "lane_id",
    "metadata",
    "owner_epoch",
    "reason",
    "timestamp",
    "to_state",
];

/// The values of `map` in the order of `keys` when its keys are exactly
/// `keys` (sorted, distinct, as a map iterates them): the fields of a
/// checked object by position, without a lookup per field.
fn fields_in_order<'a, 'v, const N: usize>(
    map: &'a ObjectRef<'v>,
    keys: &[&str; N],
) -> Option<[&'a JsonRef<'v>; N]> {
    if map.len() != N {
        return None;
    }
    let mut fields = [NULL; N];
    for ((slot, (key, value)), expected) in fields.iter_mut().zip(map.iter()).zip(keys) {
        if key != *expected {
            return None;
        }
        *slot = value;
    }
    Some(fields)
}

/// The position of `key` in `keys` (at compile time).
const fn slot<const N: usize>(keys: &[&str; N], key: &str) -> usize {
    let mut i = 0;
    while i < N {
        let candidate = keys[i].as_bytes();
        let wanted = key.as_bytes();
        if candidate.len() == wanted.len() {
            let mut j = 0;
            while j < wanted.len() && candidate[j] == wanted[j] {
                j += 1;
            }
            if j == wanted.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("not a key of the list")
}

/// The fields of an intent by position in [`INTENT_KEYS`].
mod intent {
    use super::{INTENT_KEYS as K, slot};
    pub const AGENT_ID: usize = slot(&K, "agent_id");
    pub const EVENT_TYPE: usize = slot(&K, "event_type");
    pub const EVIDENCE_REFS: usize = slot(&K, "evidence_refs");
    pub const FROM_STATE: usize = slot(&K, "from_state");
    pub const LANE_ID: usize = slot(&K, "lane_id");
    pub const METADATA: usize = slot(&K, "metadata");
    pub const OWNER_EPOCH: usize = slot(&K, "owner_epoch");
    pub const REASON: usize = slot(&K, "reason");
    pub const TIMESTAMP: usize = slot(&K, "timestamp");
    pub const TO_STATE: usize = slot(&K, "to_state");
}

const INTENT_PAIRS: [(EventType, EventType); 4] = [
    (EventType::HeartbeatObserved, EventType::LeaseRenewed),
    (EventType::LaneReassigned, EventType::LaneCreated),
    (EventType::ReplacementRepaired, EventType::LaneCreated),
    (EventType::MainVerification, EventType::RunCompleted),
];

fn check_state_field(value: &JsonRef<'_>) -> bool {
    value.is_null() || bounded_string(value, 32)
}

fn check_reason_field(value: &JsonRef<'_>) -> bool {
    value.is_null() || bounded_string(value, 500)
}

fn check_optional_identifier(value: &JsonRef<'_>) -> bool {
    value.is_null() || value.as_str().is_some_and(is_identifier)
}

/// TX1–TX11: the `intents` of a transaction envelope.
fn check_intents(value: &JsonRef<'_>, limits: &Limits, epoch: u64, nested: bool) -> Rule {
    if nested {
        return fail("transaction intent cannot contain nested intents");
    }
    let JsonRef::Array(intents) = value else {
        return fail("transaction intents must contain exactly two events");
    };
    if intents.len() != 2 {
        return fail("transaction intents must contain exactly two events");
    }
    // Exactly the intent keys (a map holds each key once, in order), so
    // each intent's fields are read by position.
    let mut fields = Vec::with_capacity(2);
    for intent in intents.iter() {
        let JsonRef::Object(map) = intent else {
            return fail("transaction intent fields do not match contract");
        };
        let Some(intent_fields) = fields_in_order(map, &INTENT_KEYS) else {
            return fail("transaction intent fields do not match contract");
        };
        fields.push(intent_fields);
    }
    let types: Vec<_> = fields
        .iter()
        .map(|f| f[intent::EVENT_TYPE].as_str().and_then(EventType::parse))
        .collect();
    let pair = match (types[0], types[1]) {
        (Some(first), Some(second)) if INTENT_PAIRS.contains(&(first, second)) => [first, second],
        _ => return fail("transaction intent pair is unsupported"),
    };
    for (field, event_type) in fields.iter().zip(pair) {
        if event_type == EventType::TransactionCommitted {
            return fail("transaction intent cannot contain a nested envelope");
        }
        if field[intent::OWNER_EPOCH].as_int() != Some(epoch as i128) {
            return fail("transaction intent owner epoch does not match");
        }
        if !field[intent::TIMESTAMP]
            .as_str()
            .is_some_and(is_timestamp_shape)
        {
            return fail("timestamp must be a UTC ISO-8601 timestamp ending in Z");
        }
        for (key, at) in [("lane_id", intent::LANE_ID), ("agent_id", intent::AGENT_ID)] {
            if !check_optional_identifier(field[at]) {
                return fail(format!("{key} must match the identifier contract"));
            }
        }
        if !check_state_field(field[intent::FROM_STATE])
            || !check_state_field(field[intent::TO_STATE])
        {
            return fail("transaction state is invalid");
        }
        if !check_reason_field(field[intent::REASON]) {
            return fail("transaction reason is invalid");
        }
        check_evidence_ref(field[intent::EVIDENCE_REFS], limits)?;
        check_metadata_ref(
            event_type,
            Some(field[intent::METADATA]),
            limits,
            epoch,
            true,
        )?;
    }
    Ok(())
}

/// Why metadata breaks the contract: the reference's message, and the
/// metadata field it is about when one field alone is at fault (so a
/// refusal can name the field and its limit without reading the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataFault {
    pub field: Option<String>,
    pub message: String,
}

/// MD1–MD18: the metadata object of a Phase-2 event (or intent).
pub fn check_metadata_ref(
    event_type: EventType,
    metadata: Option<&JsonRef<'_>>,
    limits: &Limits,
    epoch: u64,
    nested: bool,
) -> Rule {
    metadata_fault_ref(event_type, metadata, limits, epoch, nested).map_err(|fault| fault.message)
}

/// [`check_metadata`], saying which field is at fault.
pub fn metadata_fault_ref(
    event_type: EventType,
    metadata: Option<&JsonRef<'_>>,
    limits: &Limits,
    epoch: u64,
    nested: bool,
) -> Result<(), MetadataFault> {
    let whole = |message: String| MetadataFault {
        field: None,
        message,
    };
    let Some(JsonRef::Object(map)) = metadata else {
        return Err(whole("manifest 1.1 event metadata is required".into()));
    };
    let (allowed, required) = metadata_keys(event_type);
    let unknown: Vec<&str> = map
        .keys()
        .filter(|k| *k != "owner_epoch" && !allowed.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(whole(format!(
            "unsupported metadata fields: {}",
            unknown.join(", ")
        )));
    }
    match map.get("owner_epoch").and_then(JsonRef::as_int) {
        Some(e) if e >= 1 && e == epoch as i128 => {}
        _ => {
            return Err(whole(
                "owner_epoch must match the current positive epoch".into(),
            ));
        }
    }
    let mut missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|k| !map.contains_key(k))
        .collect();
    missing.sort_unstable();
    if !missing.is_empty() {
        return Err(whole(format!(
            "required metadata fields missing: {}",
            missing.join(", ")
        )));
    }
    if event_type == EventType::RunCreated {
        let present = RECOVERY_KEYS.iter().filter(|k| map.contains_key(k)).count();
        if present != 0 && present != RECOVERY_KEYS.len() {
            return Err(whole("recovery run provenance must be complete".into()));
        }
        if present == RECOVERY_KEYS.len() {
            check_recovery_provenance_ref(map).map_err(whole)?;
        }
    }
    for (key, value) in map {
        check_metadata_value(key, value, limits, epoch, nested).map_err(|message| {
            MetadataFault {
                field: Some(key.to_string()),
                message,
            }
        })?;
    }
    Ok(())
}

fn check_metadata_value(
    key: &str,
    value: &JsonRef<'_>,
    limits: &Limits,
    epoch: u64,
    nested: bool,
) -> Rule {
    match key {
        "startup_ack_deadline"
        | "silence_lease_deadline"
        | "probe_deadline"
        | "replacement_startup_ack_deadline"
        | "replacement_command_deadline"
            if !value.as_str().is_some_and(is_timestamp_shape) =>
        {
            return fail(format!(
                "{key} must be a UTC ISO-8601 timestamp ending in Z"
            ));
        }
        "command_deadline"
            if !(value.is_null() || value.as_str().is_some_and(is_timestamp_shape)) =>
        {
            return fail(format!(
                "{key} must be a UTC ISO-8601 timestamp ending in Z"
            ));
        }
        "write_scope" | "replacement_write_scope" | "changed_paths" => {
            let JsonRef::Array(items) = value else {
                return fail(format!("{key} must be a bounded list"));
            };
            if !within(items.len(), limits.max_write_scopes) {
                return fail(format!("{key} must be a bounded list"));
            }
            if items
                .iter()
                .any(|i| !matches!(i, JsonRef::String(s) if !s.is_empty() && char_len(s) <= 256))
            {
                return fail(format!("{key} must contain bounded strings"));
            }
        }
        "assignment" | "fallback" | "replacement_assignment" | "replacement_fallback" if !matches!(value, JsonRef::String(s) if within(char_len(s), limits.max_assignment_chars)) =>
        {
            return fail(format!("{key} must be at most 500 characters"));
        }
        "replacement_count" if value.as_int().is_none_or(|v| v < 0) => {
            return fail("replacement_count must be a non-negative integer");
        }
        "previous_agent_id"
        | "replacement_agent_id"
        | "original_lane_id"
        | "replacement_lane_id"
        | "resolution_lane_id"
        | "parent_lane_id"
        | "component_id"
        | "check_id"
            if !check_optional_identifier(value) =>
        {
            return fail(format!("{key} must match the identifier contract"));
        }
        "evidence_digest"
        | "checkpoint_digest"
        | "original_evidence_digest"
        | "resolution_evidence_digest"
        | "new_owner_fingerprint"
        | "report_checksum"
        | "report_receipt_head"
            if !(value.is_null() || value.as_str().is_some_and(is_sha256_hex)) =>
        {
            return fail(format!("{key} must be lowercase SHA-256"));
        }
        "replacement_terminal_state"
            if !matches!(
                value.as_str(),
                Some("completed" | "failed" | "blocked" | "cancelled")
            ) =>
        {
            return fail("replacement terminal state is invalid");
        }
        "candidate_kind" if value.as_str() != Some("failed_lane_resolution") => {
            return fail("candidate kind is invalid");
        }
        "coverage_state" if !matches!(value.as_str(), Some("missing" | "partial" | "covered")) => {
            return fail("coverage_state is invalid");
        }
        "report_kind"
            if !matches!(value.as_str(), Some("fresh_session_handoff" | "live_apply")) =>
        {
            return fail("report_kind is invalid");
        }
        "report_path" => match value.as_str() {
            Some(p) if char_len(p) <= 256 && is_contained_relative(p, "reports/") => {}
            _ => return fail("report_path must be contained"),
        },
        "components" => {
            let JsonRef::Array(items) = value else {
                return fail("components must be a bounded list");
            };
            if !within(items.len(), limits.max_components) {
                return fail("components must be a bounded list");
            }
            for item in items.iter() {
                check_component_ref(item, limits)?;
            }
        }
        "intents" => check_intents(value, limits, epoch, nested)?,
        _ => {}
    }
    Ok(())
}

/// The 15 keys every event has (metadata is the 16th, Phase 2 only).
pub const EVENT_KEYS: [&str; 15] = [
    "agent_id",
    "checksum",
    "event_type",
    "evidence_refs",
    "from_state",
    "lane_id",
    "manifest_hash",
    "owner_token",
    "previous_checksum",
    "reason",
    "run_id",
    "schema_version",
    "sequence",
    "timestamp",
    "to_state",
];

/// The fields of an event by position in [`EVENT_KEYS`].
mod event {
    use super::{EVENT_KEYS as K, slot};
    pub const AGENT_ID: usize = slot(&K, "agent_id");
    pub const CHECKSUM: usize = slot(&K, "checksum");
    pub const EVENT_TYPE: usize = slot(&K, "event_type");
    pub const EVIDENCE_REFS: usize = slot(&K, "evidence_refs");
    pub const FROM_STATE: usize = slot(&K, "from_state");
    pub const LANE_ID: usize = slot(&K, "lane_id");
    pub const MANIFEST_HASH: usize = slot(&K, "manifest_hash");
    pub const OWNER_TOKEN: usize = slot(&K, "owner_token");
    pub const PREVIOUS_CHECKSUM: usize = slot(&K, "previous_checksum");
    pub const REASON: usize = slot(&K, "reason");
    pub const RUN_ID: usize = slot(&K, "run_id");
    pub const SCHEMA_VERSION: usize = slot(&K, "schema_version");
    pub const SEQUENCE: usize = slot(&K, "sequence");
    pub const TIMESTAMP: usize = slot(&K, "timestamp");
    pub const TO_STATE: usize = slot(&K, "to_state");
}

/// The values of an event whose keys are exactly [`EVENT_KEYS`], or those
/// and `metadata`, in the order of [`EVENT_KEYS`], and whether it has
/// metadata; `None` for any other set of keys.
fn event_fields<'a, 'v>(event: &'a ObjectRef<'v>) -> Option<([&'a JsonRef<'v>; 15], bool)> {
    let has_metadata = match event.len() {
        15 => false,
        16 => true,
        _ => return None,
    };
    let mut fields = [NULL; 15];
    let mut expected = EVENT_KEYS.iter().zip(fields.iter_mut());
    for (key, value) in event {
        if has_metadata && key == "metadata" {
            continue;
        }
        let (name, slot) = expected.next()?;
        if key != *name {
            return None;
        }
        *slot = value;
    }
    // 15 keys matched, so metadata (if counted) was there.
    (expected.next().is_none()).then_some((fields, has_metadata))
}

/// What an event is checked against: the run's manifest snapshot and the
/// owner epoch current at this point of the receipt.
#[derive(Debug, Clone, Copy)]
pub struct EventContract<'a> {
    pub family: Family,
    pub event_types: &'a [EventType],
    pub limits: &'a Limits,
    pub epoch: u64,
}

/// R1–R17: the full per-event contract.
pub fn check_event_ref(event: &ObjectRef<'_>, contract: &EventContract<'_>) -> Rule {
    // The event's fields by position in EVENT_KEYS, and whether it has
    // metadata: one ordered walk over its keys when they are exactly the
    // event keys (with or without metadata), as every event's are;
    // otherwise the key checks below, one by one.
    let (fields, has_metadata) = match event_fields(event) {
        Some(found) => found,
        None => {
            let has_required = EVENT_KEYS.iter().all(|k| event.contains_key(k));
            let extra = event
                .keys()
                .filter(|k| !EVENT_KEYS.contains(k))
                .collect::<Vec<_>>();
            if !has_required || extra.iter().any(|k| *k != "metadata") {
                return fail("receipt event fields do not match the schema");
            }
            (EVENT_KEYS.map(|k| &event[k]), !extra.is_empty())
        }
    };
    if contract.family == Family::V1_0 && has_metadata {
        return fail("manifest 1.0 receipt fields do not match the schema");
    }
    if fields[event::SCHEMA_VERSION].as_int() != Some(1) {
        return fail("receipt event schema version is unsupported");
    }
    if !fields[event::RUN_ID].as_str().is_some_and(is_identifier) {
        return fail("run_id must match the identifier contract");
    }
    for (key, at) in [("lane_id", event::LANE_ID), ("agent_id", event::AGENT_ID)] {
        if !check_optional_identifier(fields[at]) {
            return fail(format!("{key} must match the identifier contract"));
        }
    }
    if !check_state_field(fields[event::FROM_STATE]) || !check_state_field(fields[event::TO_STATE])
    {
        return fail("receipt state field is invalid");
    }
    if fields[event::SEQUENCE].as_int().is_none_or(|s| s < 1) {
        return fail("receipt sequence must be a positive integer");
    }
    let Some(event_type) = fields[event::EVENT_TYPE]
        .as_str()
        .and_then(EventType::parse)
        .filter(|t| contract.event_types.contains(t))
    else {
        return fail("receipt event type is unsupported");
    };
    if !fields[event::TIMESTAMP]
        .as_str()
        .is_some_and(is_timestamp_shape)
    {
        return fail("timestamp must be a UTC ISO-8601 timestamp ending in Z");
    }
    let owner = fields[event::OWNER_TOKEN].as_str().unwrap_or("");
    if owner.is_empty() {
        return fail("receipt owner token must be a non-empty string");
    }
    if contract.family == Family::V1_1 && !is_sha256_hex(owner) {
        return fail("receipt owner fingerprint is invalid");
    }
    if !fields[event::MANIFEST_HASH]
        .as_str()
        .is_some_and(is_sha256_hex)
    {
        return fail("receipt manifest hash is invalid");
    }
    if !fields[event::PREVIOUS_CHECKSUM]
        .as_str()
        .is_some_and(|p| p.is_empty() || is_sha256_hex(p))
    {
        return fail("receipt previous checksum is invalid");
    }
    if !fields[event::CHECKSUM].as_str().is_some_and(is_sha256_hex) {
        return fail("receipt checksum is invalid");
    }
    check_evidence_ref(fields[event::EVIDENCE_REFS], contract.limits)?;
    if !check_reason_field(fields[event::REASON]) {
        return fail("receipt reason must be at most 500 characters");
    }
    match contract.family {
        Family::V1_0 => Ok(()),
        Family::V1_1 => check_metadata_ref(
            event_type,
            event.get("metadata"),
            contract.limits,
            contract.epoch,
            false,
        ),
    }
}

/// [`check_evidence_ref`] of a `Value` (an input before it is sealed).
pub fn check_evidence(value: &Value, limits: &Limits) -> Rule {
    check_evidence_ref(&JsonRef::from_value(value, &Bump::new()), limits)
}

/// [`check_component_ref`] of a `Value`.
pub fn check_component(value: &Value, limits: &Limits) -> Rule {
    check_component_ref(&JsonRef::from_value(value, &Bump::new()), limits)
}

/// [`check_recovery_provenance_ref`] of a `Map`.
pub fn check_recovery_provenance(metadata: &serde_json::Map<String, Value>) -> Rule {
    check_recovery_provenance_ref(&ObjectRef::from_map(metadata, &Bump::new()))
}

/// [`check_metadata_ref`] of a `Value`.
pub fn check_metadata(
    event_type: EventType,
    metadata: Option<&Value>,
    limits: &Limits,
    epoch: u64,
    nested: bool,
) -> Rule {
    let arena = Bump::new();
    let metadata = metadata.map(|value| JsonRef::from_value(value, &arena));
    check_metadata_ref(event_type, metadata.as_ref(), limits, epoch, nested)
}

/// [`metadata_fault_ref`] of a `Value`.
pub fn metadata_fault(
    event_type: EventType,
    metadata: Option<&Value>,
    limits: &Limits,
    epoch: u64,
    nested: bool,
) -> Result<(), MetadataFault> {
    let arena = Bump::new();
    let metadata = metadata.map(|value| JsonRef::from_value(value, &arena));
    metadata_fault_ref(event_type, metadata.as_ref(), limits, epoch, nested)
}

/// [`check_event_ref`] of a `Map` (an event this tool drafted).
pub fn check_event(event: &serde_json::Map<String, Value>, contract: &EventContract<'_>) -> Rule {
    check_event_ref(&ObjectRef::from_map(event, &Bump::new()), contract)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    #[test]
    fn intent_fields_by_position_are_the_named_ones() {
        assert!(INTENT_KEYS.is_sorted(), "a map iterates its keys sorted");
        for (i, key) in INTENT_KEYS.iter().enumerate() {
            assert_eq!(slot(&INTENT_KEYS, key), i);
        }
        let intent: Map<String, Value> = INTENT_KEYS
            .iter()
            .map(|k| (k.to_string(), Value::String(format!("value of {k}"))))
            .collect();
        let arena = Bump::new();
        let object = ObjectRef::from_map(&intent, &arena);
        let fields = fields_in_order(&object, &INTENT_KEYS).unwrap();
        for (key, at) in [
            ("agent_id", intent::AGENT_ID),
            ("event_type", intent::EVENT_TYPE),
            ("evidence_refs", intent::EVIDENCE_REFS),
            ("from_state", intent::FROM_STATE),
            ("lane_id", intent::LANE_ID),
            ("metadata", intent::METADATA),
            ("owner_epoch", intent::OWNER_EPOCH),
            ("reason", intent::REASON),
            ("timestamp", intent::TIMESTAMP),
            ("to_state", intent::TO_STATE),
        ] {
            assert!(fields[at].matches(&intent[key]));
        }
        // Exactly those keys, or nothing: one missing, one more, one other.
        let mut missing = intent.clone();
        missing.remove("reason");
        assert!(
            fields_in_order(&ObjectRef::from_map(&missing, &Bump::new()), &INTENT_KEYS).is_none()
        );
        let mut more = intent.clone();
        more.insert("extra".into(), Value::Null);
        assert!(fields_in_order(&ObjectRef::from_map(&more, &Bump::new()), &INTENT_KEYS).is_none());
        let mut other = missing.clone();
        other.insert("reasons".into(), Value::Null);
        assert!(
            fields_in_order(&ObjectRef::from_map(&other, &Bump::new()), &INTENT_KEYS).is_none()
        );
    }

    /// A metadata fault names the one field at fault (the key whose value
    /// broke its rule), or none when the object as a whole is at fault; the
    /// message is the reference's either way.
    #[test]
    fn metadata_faults_name_their_field() {
        let limits = Limits::default();
        let check = |metadata: Value| {
            metadata_fault(EventType::LaneCreated, Some(&metadata), &limits, 1, false)
        };
        let long = "x".repeat(limits.max_assignment_chars as usize + 1);
        let base = json!({
            "owner_epoch": 1, "assignment": "a", "write_scope": ["src"],
            "fallback": "main", "startup_ack_deadline": "2026-07-14T01:05:00Z",
            "command_deadline": null, "parent_lane_id": null, "replacement_count": 0,
        });
        let mut too_long = base.clone();
        too_long["assignment"] = json!(long);
        let fault = check(too_long).unwrap_err();
        assert_eq!(fault.field.as_deref(), Some("assignment"));
        assert_eq!(fault.message, "assignment must be at most 500 characters");
        // The first field in key order that breaks a rule is the one named,
        // whatever its message begins with.
        let mut bad_deadline = base.clone();
        bad_deadline["startup_ack_deadline"] = json!("soon");
        let fault = check(bad_deadline).unwrap_err();
        assert_eq!(fault.field.as_deref(), Some("startup_ack_deadline"));
        let mut unknown = base.clone();
        unknown["surprise"] = json!(1);
        assert_eq!(check(unknown).unwrap_err().field, None);
        let mut stale = base.clone();
        stale["owner_epoch"] = json!(2);
        assert_eq!(check(stale).unwrap_err().field, None);
        assert!(check(base.clone()).is_ok());
        assert_eq!(
            check_metadata(EventType::LaneCreated, Some(&base), &limits, 1, false),
            Ok(())
        );
    }

    #[test]
    fn event_fields_by_position_are_the_named_ones() {
        assert!(EVENT_KEYS.is_sorted(), "a map iterates its keys sorted");
        let event: Map<String, Value> = EVENT_KEYS
            .iter()
            .map(|k| (k.to_string(), Value::String(format!("value of {k}"))))
            .collect();
        let mut with_metadata = event.clone();
        with_metadata.insert("metadata".into(), json!({"owner_epoch": 1}));
        for (map, metadata) in [(&event, false), (&with_metadata, true)] {
            let arena = Bump::new();
            let object = ObjectRef::from_map(map, &arena);
            let (fields, has_metadata) = event_fields(&object).unwrap();
            assert_eq!(has_metadata, metadata);
            for (i, key) in EVENT_KEYS.iter().enumerate() {
                assert_eq!(slot(&EVENT_KEYS, key), i);
                assert!(fields[i].matches(&map[*key]));
            }
        }
        assert_eq!(event::SEQUENCE, 12);
        // Any other set of keys is left to the checks one by one.
        let mut missing = with_metadata.clone();
        missing.remove("reason");
        let mut other = event.clone();
        other.insert("zzz".into(), Value::Null);
        let mut swapped = missing.clone();
        swapped.remove("metadata");
        swapped.insert("aaa".into(), Value::Null);
        for map in [&missing, &other, &swapped] {
            assert!(event_fields(&ObjectRef::from_map(map, &Bump::new())).is_none());
        }
    }

    #[test]
    fn evidence_rules() {
        let l = Limits::default();
        assert!(check_evidence(&json!([{"kind":"log","summary":""}]), &l).is_ok());
        assert!(check_evidence(&json!([{"kind":"log","summary":"s","exit_status":100000000000000000000000000000u128}]), &l).is_ok());
        let bad = [
            json!({}),
            json!([1]),
            json!([{"kind":"","summary":"s"}]),
            json!([{"kind":"k"}]),
            json!([{"kind":"k","summary":"s","secret":"x"}]),
            json!([{"kind":"k","summary":"s","checksum":"ABC"}]),
            json!([{"kind":"k","summary":"s","exit_status":true}]),
            json!([{"kind":"k","summary":"s","exit_status":1.5}]),
            json!([{"kind":"k","summary":"x".repeat(257)}]),
            Value::Array(vec![json!({"kind":"k","summary":"s"}); 9]),
        ];
        for b in bad {
            assert!(check_evidence(&b, &l).is_err(), "{b}");
        }
    }

    #[test]
    fn metadata_owner_epoch_and_required_keys() {
        let l = Limits::default();
        assert!(
            check_metadata(
                EventType::PlanApproved,
                Some(&json!({"owner_epoch":1})),
                &l,
                1,
                false
            )
            .is_ok()
        );
        assert_eq!(
            check_metadata(
                EventType::PlanApproved,
                Some(&json!({"owner_epoch":2})),
                &l,
                1,
                false
            )
            .unwrap_err(),
            "owner_epoch must match the current positive epoch"
        );
        assert_eq!(
            check_metadata(
                EventType::ProbeSent,
                Some(&json!({"owner_epoch":1})),
                &l,
                1,
                false
            )
            .unwrap_err(),
            "required metadata fields missing: probe_deadline"
        );
        assert_eq!(
            check_metadata(
                EventType::PlanApproved,
                Some(&json!({"owner_epoch":1,"z":1,"a":2})),
                &l,
                1,
                false
            )
            .unwrap_err(),
            "unsupported metadata fields: a, z"
        );
        assert!(check_metadata(EventType::PlanApproved, None, &l, 1, false).is_err());
    }

    #[test]
    fn recovery_provenance_is_all_or_nothing() {
        let l = Limits::default();
        let partial = json!({"owner_epoch":1,"recovery_original_run_id":"r"});
        assert_eq!(
            check_metadata(EventType::RunCreated, Some(&partial), &l, 1, false).unwrap_err(),
            "recovery run provenance must be complete"
        );
    }

    #[test]
    fn an_empty_trusted_checksum_needs_trusted_sequence_zero() {
        // decisions.md 11: a receipt bad from line 1 has no trusted prefix.
        let provenance = |sequence: u64, checksum: &str| {
            json!({
                "recovery_original_run_id": "r", "recovery_diagnose_checksum": "a".repeat(64),
                "recovery_manifest_version": "1.1.0", "recovery_manifest_hash": "b".repeat(64),
                "recovery_quarantine_path": "quarantine/r.receipt.jsonl",
                "recovery_quarantine_hash": "c".repeat(64), "recovery_first_bad_sequence": sequence + 1,
                "recovery_trusted_sequence": sequence, "recovery_trusted_checksum": checksum,
            })
            .as_object()
            .cloned()
            .unwrap()
        };
        assert!(check_recovery_provenance(&provenance(0, "")).is_ok());
        assert!(check_recovery_provenance(&provenance(5, &"d".repeat(64))).is_ok());
        assert!(check_recovery_provenance(&provenance(0, &"d".repeat(64))).is_ok());
        for (sequence, checksum) in [(5, ""), (0, "ABC"), (1, "")] {
            assert_eq!(
                check_recovery_provenance(&provenance(sequence, checksum)).unwrap_err(),
                "recovery_trusted_checksum must be lowercase SHA-256"
            );
        }
    }

    #[test]
    fn transactions_need_a_legal_pair() {
        let l = Limits::default();
        let intent = |t: &str| {
            json!({"agent_id":null,"event_type":t,"evidence_refs":[],"from_state":null,"lane_id":null,
                   "metadata":{"owner_epoch":1},"owner_epoch":1,"reason":null,"timestamp":"2026-01-01T00:00:00Z","to_state":null})
        };
        let ok = json!({"owner_epoch":1,"intents":[intent("main_verification"), intent("run_completed")]});
        assert!(check_metadata(EventType::TransactionCommitted, Some(&ok), &l, 1, false).is_ok());
        let swapped = json!({"owner_epoch":1,"intents":[intent("run_completed"), intent("main_verification")]});
        assert_eq!(
            check_metadata(
                EventType::TransactionCommitted,
                Some(&swapped),
                &l,
                1,
                false
            )
            .unwrap_err(),
            "transaction intent pair is unsupported"
        );
    }
}
