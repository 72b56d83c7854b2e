//! `doctor` (read-only): the litter in a state root, each piece with the
//! command that removes it (see `store::litter`).

use crate::store::root::StateRoot;
use serde_json::{Map, Value, json};
use std::time::SystemTime;

/// The litter report. `now` is the caller's clock.
pub fn doctor(root: &StateRoot, now: SystemTime) -> Map<String, Value> {
    let litter = crate::store::litter::scan(root, now);
    let items: Vec<Value> = litter
        .iter()
        .map(|l| {
            json!({
                "kind": l.kind.name(),
                "path": l.path.to_string_lossy(),
                "age_s": l.age_s,
                "dead": l.dead,
                "remedy": l.remedy(),
            })
        })
        .collect();
    let mut map = Map::new();
    map.insert("count".into(), json!(items.len()));
    map.insert("litter".into(), Value::Array(items));
    map
}
