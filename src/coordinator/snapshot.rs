//! Restoring a [`CoordinatorState`] from its public JSON (the inverse of
//! [`CoordinatorState::public_json`]), so a checkpoint can stand in for the
//! replay of a receipt prefix. Both directions are serde's
//! ([`CoordinatorState::from_public_json`]); this module proves them
//! inverse on every state the reference wrote.

#[cfg(test)]
mod tests {
    use crate::coordinator::CoordinatorState;
    use serde_json::Value;

    #[test]
    fn every_reference_state_round_trips() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-runs");
        assert!(root.is_dir(), "fixtures missing at {}", root.display());
        let mut seen = 0;
        for scenario in std::fs::read_dir(&root).unwrap().flatten() {
            let runs = scenario.path().join("state/runs");
            let Ok(runs) = std::fs::read_dir(runs) else {
                continue;
            };
            for run in runs.flatten() {
                let Ok(text) = std::fs::read_to_string(run.path().join("run.json")) else {
                    continue;
                };
                let cache: Value = serde_json::from_str(&text).unwrap();
                let Some(state) = cache.get("coordinator").map(|c| &c["state"]) else {
                    continue;
                };
                let restored = CoordinatorState::from_public_json(state).unwrap();
                assert_eq!(&restored.public_json(), state, "{}", run.path().display());
                seen += 1;
            }
        }
        assert!(seen >= 15, "only {seen} states");
    }

    #[test]
    fn malformed_states_are_refused() {
        assert!(CoordinatorState::from_public_json(&serde_json::json!({})).is_err());
        assert!(CoordinatorState::from_public_json(&serde_json::json!([])).is_err());
    }
}
