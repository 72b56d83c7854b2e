//! `rebuild` regenerates the reference's own caches (reference-runtime §4.4,
//! §4.5) byte for byte from the receipt alone (run.json in the coordinator
//! shape and every lanes/<id>.json), deletes caches of lanes that do not
//! exist, and writes nothing when the receipt is damaged.

use crate::bed as common;

use serde_json::Value;

#[test]
fn rebuild_regenerates_the_reference_caches() {
    let mut compared = 0;
    for copy in common::fixture_copies() {
        let (scenario, expected, state, flow) =
            (&copy.scenario, &copy.expected, &copy.state, &copy.flow);
        // Damaged copies keep the stale caches of the run they were cut
        // from, so their caches are not a reference to compare with.
        let commands = std::fs::read_to_string(scenario.join("commands.jsonl")).unwrap_or_default();
        let damaged_copy = commands.contains("\"kind\": \"damage\"");
        for (run_id, run) in expected["runs"].as_object().unwrap() {
            let name = format!("{} {run_id}", scenario.display());
            let dir = state.join("runs").join(run_id);
            let original_run = std::fs::read(dir.join("run.json")).unwrap();
            let mut original_lanes = Vec::new();
            for entry in std::fs::read_dir(dir.join("lanes")).unwrap().flatten() {
                original_lanes.push((entry.file_name(), std::fs::read(entry.path()).unwrap()));
                std::fs::remove_file(entry.path()).unwrap();
            }
            std::fs::write(dir.join("lanes/ghost.json"), "{}\n").unwrap();
            std::fs::remove_file(dir.join("run.json")).unwrap();
            common::set_modes(state);
            let out = flow.run(&crate::bed::read_argv(state, "rebuild", run_id, &[]));
            let healthy = run["verify"]["exit_status"] == 0;
            if !healthy {
                out.assert_error(3, "receipt_corrupt");
                assert!(
                    !dir.join("run.json").exists(),
                    "{name}: caches written for a damaged receipt"
                );
                continue;
            }
            let v = out.assert_ok();
            let verified: Value =
                serde_json::from_str(run["verify"]["stdout"].as_str().unwrap()).unwrap();
            assert_eq!(v["checksum"], verified["checksum"], "{name}");
            assert_eq!(v["sequence"], verified["sequence"], "{name}");
            let rebuilt = std::fs::read(dir.join("run.json")).unwrap();
            let original: Value = serde_json::from_slice(&original_run).unwrap();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            if damaged_copy {
                let rebuilt: Value = serde_json::from_slice(&rebuilt).unwrap();
                assert_eq!(rebuilt["last_checksum"], verified["checksum"], "{name}");
                continue;
            }
            if original.get("coordinator").is_some() {
                assert_eq!(
                    text(&rebuilt),
                    text(&original_run),
                    "{name}: run.json differs"
                );
                compared += 1;
            } else {
                // The reference's init writes the simple shape; its rebuild
                // of a Phase 2 run writes the coordinator shape.
                let rebuilt: Value = serde_json::from_slice(&rebuilt).unwrap();
                assert_eq!(rebuilt["state"], original["state"], "{name}");
                assert_eq!(
                    rebuilt["last_checksum"], original["last_checksum"],
                    "{name}"
                );
                assert!(rebuilt["coordinator"]["state"].is_object(), "{name}");
            }
            assert!(
                !dir.join("lanes/ghost.json").exists(),
                "{name}: stale lane cache kept"
            );
            for (file, bytes) in original_lanes {
                assert_eq!(
                    text(&std::fs::read(dir.join("lanes").join(&file)).unwrap()),
                    text(&bytes),
                    "{name}: {file:?}"
                );
            }
            // No lock directory is left behind.
            assert!(!dir.join("locks/receipt").exists(), "{name}");
        }
    }
    assert!(
        compared >= 12,
        "only {compared} coordinator caches compared"
    );
}
