//! The manifest contract (reference-runtime §4.1–§4.2): which run snapshots
//! are loadable, their family, limits, event list and contract hash.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

use super::canonical;
use super::primitives::as_int;
use super::rules::{Family, LIMIT_KEYS, Limits};
use super::vocab::EventType;

/// The manifest bundled into the binary (1.1.0).
pub const BUNDLED_MANIFEST: &str = include_str!("../../manifests/workflow-manifest.json");

const TOP_LEVEL_KEYS: [&str; 16] = [
    "schema_version",
    "manifest_version",
    "workflow_types",
    "workflow_routes",
    "router_checklist_ids",
    "gate_dependencies",
    "run_states",
    "run_transitions",
    "lane_states",
    "lane_transitions",
    "transition_policy",
    "liveness",
    "topology",
    "completion",
    "receipt",
    "token_audit",
];

/// Why a manifest cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestError {
    /// The snapshot is damaged or invalid (exit 3).
    Corrupt(String),
    /// A manifest version or schema this tool does not speak (exit 4).
    Incompatible(String),
}

/// A validated manifest contract (the snapshot without `_run`).
#[derive(Debug, Clone)]
pub struct ManifestContract {
    pub contract: Value,
    pub hash: String,
    pub family: Family,
    pub version: String,
    pub limits: Limits,
    pub event_types: Vec<EventType>,
}

/// A run's manifest snapshot: the contract plus its `_run` metadata.
#[derive(Debug, Clone)]
pub struct RunManifest {
    pub contract: ManifestContract,
    pub run: Option<Map<String, Value>>,
}

impl RunManifest {
    /// The initial owner fingerprint recorded at init (Phase 2).
    pub fn owner_fingerprint(&self) -> Option<&str> {
        self.run.as_ref()?.get("owner_fingerprint")?.as_str()
    }

    /// `_run.initial_owner_epoch`, falling back to `owner_epoch`, then 1.
    /// A value that is present but not an integer >= 1 gives 0, which no
    /// event's owner epoch can equal: verification then fails at line 1, as
    /// in the reference (which compares every event with the raw value).
    pub fn initial_owner_epoch(&self) -> u64 {
        let run = match &self.run {
            Some(run) => run,
            None => return 1,
        };
        if let Some(value) = run.get("initial_owner_epoch") {
            return as_int(value)
                .filter(|e| *e >= 1)
                .map_or(0, |e| e.min(u64::MAX as i128) as u64);
        }
        run.get("owner_epoch")
            .and_then(as_int)
            .filter(|e| *e >= 1)
            .map(|e| e.min(u64::MAX as i128) as u64)
            .unwrap_or(1)
    }
}

/// The family of a `manifest_version` string ("1.1.0" → 1.1).
pub fn family_of(version: &Value) -> Result<Family, ManifestError> {
    let incompatible = || ManifestError::Incompatible("unsupported manifest version".into());
    let text = version.as_str().ok_or_else(incompatible)?;
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() < 2
        || !parts[..2]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(incompatible());
    }
    match (parts[0], parts[1]) {
        ("1", "0") => Ok(Family::V1_0),
        ("1", "1") => Ok(Family::V1_1),
        _ => Err(incompatible()),
    }
}

/// Parse and validate a run's `manifest.json` bytes (§4.1 steps 3–10).
pub fn load_run_manifest(bytes: &[u8]) -> Result<RunManifest, ManifestError> {
    let corrupt = |m: &str| ManifestError::Corrupt(m.to_string());
    let text = std::str::from_utf8(bytes)
        .map_err(|_| corrupt("run manifest snapshot is missing or invalid"))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|_| corrupt("run manifest snapshot is missing or invalid"))?;
    let Value::Object(mut map) = value else {
        return Err(corrupt("run manifest snapshot must be an object"));
    };
    check_schema_and_family(&map)?;
    let run = match map.remove("_run") {
        None | Some(Value::Null) => None,
        Some(Value::Object(run)) => Some(run),
        Some(_) => return Err(corrupt("run manifest metadata is invalid")),
    };
    let contract = validate_contract(Value::Object(map)).map_err(|e| match e {
        ManifestError::Corrupt(_) => corrupt("run manifest contract is invalid"),
        other => other,
    })?;
    if let Some(run) = &run {
        match run.get("manifest_hash") {
            Some(Value::String(h)) if *h == contract.hash => {}
            _ => return Err(corrupt("run manifest metadata hash mismatch")),
        }
    }
    Ok(RunManifest { contract, run })
}

/// The bundled manifest, validated.
pub fn bundled() -> Result<ManifestContract, ManifestError> {
    let value: Value = serde_json::from_str(BUNDLED_MANIFEST)
        .map_err(|_| ManifestError::Corrupt("bundled manifest is invalid".into()))?;
    if let Value::Object(map) = &value {
        check_schema_and_family(map)?;
    }
    validate_contract(value)
}

fn check_schema_and_family(map: &Map<String, Value>) -> Result<Family, ManifestError> {
    if as_int(map.get("schema_version").unwrap_or(&Value::Null)) != Some(1) {
        return Err(ManifestError::Incompatible(
            "unsupported manifest schema version".into(),
        ));
    }
    family_of(map.get("manifest_version").unwrap_or(&Value::Null))
}

fn set_of(value: &Value) -> Option<BTreeSet<&str>> {
    value.as_array()?.iter().map(Value::as_str).collect()
}

fn keys_of(value: &Value) -> Option<BTreeSet<&str>> {
    Some(value.as_object()?.keys().map(String::as_str).collect())
}

/// M1–M20. Every failure is `Corrupt` with a precise message, except the
/// family check (M2), which is `Incompatible`.
pub fn validate_contract(contract: Value) -> Result<ManifestContract, ManifestError> {
    let bad = |m: &str| ManifestError::Corrupt(m.to_string());
    let map = contract
        .as_object()
        .ok_or_else(|| bad("manifest must be an object"))?;
    let mut missing: Vec<&str> = TOP_LEVEL_KEYS
        .iter()
        .copied()
        .filter(|k| !map.contains_key(*k))
        .collect();
    missing.sort_unstable();
    if !missing.is_empty() {
        return Err(ManifestError::Corrupt(format!(
            "missing manifest fields: {}",
            missing.join(", ")
        )));
    }
    let family = family_of(&map["manifest_version"])?;
    let workflow_types: Vec<&str> = map["workflow_types"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect())
        .ok_or_else(|| bad("workflow types are invalid"))?;
    if workflow_types != ["A", "B", "C", "D", "E", "P", "F"] {
        return Err(bad("workflow types are invalid"));
    }
    if keys_of(&map["workflow_routes"]) != Some(workflow_types.iter().copied().collect()) {
        return Err(bad("workflow routes do not match workflow types"));
    }
    let checklist: Vec<&str> = map["router_checklist_ids"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect())
        .ok_or_else(|| bad("router checklist ids are invalid"))?;
    let checklist_set: BTreeSet<&str> = checklist.iter().copied().collect();
    if checklist_set.len() != checklist.len() {
        return Err(bad("router checklist ids must be unique"));
    }
    let gates = map["gate_dependencies"]
        .as_object()
        .ok_or_else(|| bad("gate dependencies are invalid"))?;
    if gates.keys().map(String::as_str).collect::<BTreeSet<_>>() != checklist_set {
        return Err(bad("gate dependencies do not match checklist ids"));
    }
    for deps in gates.values() {
        match set_of(deps) {
            Some(d) if d.is_subset(&checklist_set) => {}
            _ => return Err(bad("gate dependency is unknown")),
        }
    }
    let run_targets = check_transitions(map, "run_states", "run_transitions")?;
    let lane_targets = check_transitions(map, "lane_states", "lane_transitions")?;
    let policy = map["transition_policy"]
        .as_object()
        .ok_or_else(|| bad("transition policy is invalid"))?;
    for (name, targets) in [("run", &run_targets), ("lane", &lane_targets)] {
        let section = policy
            .get(name)
            .and_then(Value::as_object)
            .ok_or_else(|| bad("transition policy is invalid"))?;
        let by_target = section.get("evidence_by_target").and_then(keys_of);
        if by_target.as_ref() != Some(targets) {
            return Err(bad("transition policy evidence does not match transitions"));
        }
        if !section.get("required_arguments").is_some_and(truthy) {
            return Err(bad("transition policy requires arguments"));
        }
    }
    let liveness = map["liveness"]
        .as_object()
        .ok_or_else(|| bad("liveness policy is invalid"))?;
    for key in [
        "startup_ack_seconds",
        "monitor_interval_seconds",
        "suspected_stall_seconds",
        "max_silence_lease_seconds",
        "probe_grace_seconds",
        "max_replacements",
    ] {
        // The reference lets a bool through here (Python bools are ints).
        let ok = match liveness.get(key) {
            Some(Value::Bool(_)) => true,
            Some(v) => as_int(v).is_some_and(|n| n >= 0),
            None => false,
        };
        if !ok {
            return Err(ManifestError::Corrupt(format!(
                "liveness {key} must be a non-negative integer"
            )));
        }
    }
    if liveness.get("heartbeat_is_completion_evidence") != Some(&Value::Bool(false)) {
        return Err(bad("heartbeat cannot be completion evidence"));
    }
    if map["token_audit"]
        .as_object()
        .and_then(|t| t.get("hard_limit"))
        != Some(&Value::Bool(false))
    {
        return Err(bad("token audit must not be a hard limit"));
    }
    match map.get("failure_resolution") {
        None | Some(Value::Null) => {}
        Some(v) if *v == serde_json::json!({"requires_parent": true}) => {}
        Some(_) => return Err(bad("failure resolution policy is invalid")),
    }
    let names: Vec<&str> = map["receipt"]
        .as_object()
        .and_then(|r| r.get("event_types"))
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_str).collect())
        .ok_or_else(|| bad("receipt event types are invalid"))?;
    if names.iter().collect::<BTreeSet<_>>().len() != names.len() {
        return Err(bad("receipt event types must be unique"));
    }
    // A name outside our vocabulary cannot be one of the family's.
    let event_list: Vec<EventType> = names
        .iter()
        .map(|name| EventType::parse(name))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("receipt event types do not match the manifest family"))?;
    let event_set: BTreeSet<EventType> = event_list.iter().copied().collect();
    let family_set: BTreeSet<EventType> = EventType::of_family(family).iter().copied().collect();
    if event_set != family_set {
        return Err(bad("receipt event types do not match the manifest family"));
    }
    let limits = if family == Family::V1_1 {
        let limits = map
            .get("resource_limits")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("resource limits are invalid"))?;
        if limits.len() != LIMIT_KEYS.len()
            || !LIMIT_KEYS
                .iter()
                .all(|k| limits.get(*k).and_then(as_int).is_some_and(|v| v >= 1))
        {
            return Err(bad("resource limits are invalid"));
        }
        if limits.get("max_identifier_chars").and_then(as_int) != Some(128) {
            return Err(bad("max_identifier_chars must stay 128"));
        }
        if map.get("compatible_manifest_versions") != Some(&serde_json::json!(["1.0", "1.1"])) {
            return Err(bad("compatible manifest versions are invalid"));
        }
        Limits::from_object(map.get("resource_limits"))
    } else {
        Limits::default()
    };
    let version = map["manifest_version"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let hash = canonical::digest(&contract);
    Ok(ManifestContract {
        contract,
        hash,
        family,
        version,
        limits,
        event_types: event_list,
    })
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n
            .as_str()
            .trim_start_matches('-')
            .bytes()
            .any(|b| b != b'0' && b != b'.'),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// M8/M9: the transition table covers exactly the states and stays inside them.
/// Returns the set of all targets.
fn check_transitions<'a>(
    map: &'a Map<String, Value>,
    states_key: &str,
    transitions_key: &str,
) -> Result<BTreeSet<&'a str>, ManifestError> {
    let bad = || ManifestError::Corrupt(format!("{transitions_key} do not match {states_key}"));
    let states = set_of(&map[states_key]).ok_or_else(bad)?;
    let transitions = map[transitions_key].as_object().ok_or_else(bad)?;
    if transitions
        .keys()
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        != states
    {
        return Err(bad());
    }
    let mut targets = BTreeSet::new();
    for value in transitions.values() {
        let set = set_of(value).ok_or_else(bad)?;
        if !set.is_subset(&states) {
            return Err(bad());
        }
        targets.extend(set);
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_manifest_has_the_reference_hash() {
        let m = bundled().unwrap();
        assert_eq!(
            m.hash,
            "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6"
        );
        assert_eq!(m.family, Family::V1_1);
        assert_eq!(m.event_types.len(), 41);
        assert_eq!(m.limits, Limits::default());
    }

    #[test]
    fn families() {
        for (v, f) in [
            ("1.1.0", Family::V1_1),
            ("1.1", Family::V1_1),
            ("1.1.x.y", Family::V1_1),
            ("1.0.3", Family::V1_0),
        ] {
            assert_eq!(family_of(&Value::from(v)).unwrap(), f);
        }
        for v in ["2.0.0", "1", "1.x", "", "1.2"] {
            assert!(
                matches!(
                    family_of(&Value::from(v)),
                    Err(ManifestError::Incompatible(_))
                ),
                "{v}"
            );
        }
    }

    fn bundled_value() -> Value {
        serde_json::from_str(BUNDLED_MANIFEST).unwrap()
    }

    #[test]
    fn each_contract_rule_rejects_a_broken_manifest() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let edits: Vec<(&str, Edit)> = vec![
            (
                "M1",
                Box::new(|m| {
                    m.as_object_mut().unwrap().remove("liveness");
                }),
            ),
            (
                "M3",
                Box::new(|m| m["workflow_types"] = serde_json::json!(["A"])),
            ),
            (
                "M5",
                Box::new(|m| {
                    m["router_checklist_ids"]
                        .as_array_mut()
                        .unwrap()
                        .push("WF-01".into())
                }),
            ),
            (
                "M8",
                Box::new(|m| m["run_transitions"]["planned"] = serde_json::json!(["nowhere"])),
            ),
            (
                "M12",
                Box::new(|m| m["liveness"]["probe_grace_seconds"] = serde_json::json!(-1)),
            ),
            (
                "M13",
                Box::new(|m| m["liveness"]["heartbeat_is_completion_evidence"] = Value::Bool(true)),
            ),
            (
                "M14",
                Box::new(|m| m["token_audit"]["hard_limit"] = Value::Bool(true)),
            ),
            (
                "M15",
                Box::new(|m| {
                    m["failure_resolution"] = serde_json::json!({"requires_parent": false})
                }),
            ),
            (
                "M16",
                Box::new(|m| {
                    m["receipt"]["event_types"]
                        .as_array_mut()
                        .unwrap()
                        .push("run_created".into())
                }),
            ),
            (
                "M18",
                Box::new(|m| m["resource_limits"]["max_lanes"] = serde_json::json!(0)),
            ),
            (
                "M19",
                Box::new(|m| m["resource_limits"]["max_identifier_chars"] = serde_json::json!(64)),
            ),
            (
                "M20",
                Box::new(|m| m["compatible_manifest_versions"] = serde_json::json!(["1.1"])),
            ),
            (
                "types",
                Box::new(|m| m["transition_policy"] = serde_json::json!([])),
            ),
        ];
        for (rule, edit) in edits {
            let mut m = bundled_value();
            edit(&mut m);
            assert!(
                matches!(validate_contract(m), Err(ManifestError::Corrupt(_))),
                "{rule}"
            );
        }
        let mut m = bundled_value();
        m["manifest_version"] = "2.0.0".into();
        assert!(matches!(
            validate_contract(m),
            Err(ManifestError::Incompatible(_))
        ));
    }

    #[test]
    fn run_metadata_hash_must_match() {
        let mut m = bundled_value();
        m["_run"] = serde_json::json!({"manifest_hash": "0".repeat(64)});
        let bytes = serde_json::to_vec(&m).unwrap();
        assert_eq!(
            load_run_manifest(&bytes).unwrap_err(),
            ManifestError::Corrupt("run manifest metadata hash mismatch".into())
        );
    }
}
