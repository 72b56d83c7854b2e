//! The worked example of reference-runtime §3.8 reproduces byte for byte
//! when init is given the same clock, run-id suffix and owner token.

use bluetape_flow::commands::init::{InitEntropy, InitRequest, init};
use bluetape_flow::store::discovery::DiscoveryEnv;
use bluetape_flow::store::handle::OwnerToken;
use bluetape_flow::store::root::StateRoot;
use chrono::{TimeZone, Utc};

const LINE_1: &str = r#"{"agent_id":null,"checksum":"311d69447b74af5e4654eb3856766afe6f0e8eb0e5263d17e84fa8628a6c4c48","event_type":"run_created","evidence_refs":[],"from_state":null,"lane_id":null,"manifest_hash":"63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6","metadata":{"owner_epoch":1},"owner_token":"1667382387d683aa7f84c7768d11afa5b4860bc339135eb2a88f6cfb7ffaf11e","previous_checksum":"","reason":null,"run_id":"20261130T020310Z-728df1d6","schema_version":1,"sequence":1,"timestamp":"2026-11-30T02:03:10.292358Z","to_state":"planned"}"#;

#[test]
fn init_reproduces_the_reference_worked_example() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let env = DiscoveryEnv {
        home: Some(tmp.path().into()),
        cwd: tmp.path().to_path_buf(),
        ..Default::default()
    };
    let request = InitRequest {
        workflow_type: "A".into(),
        repo_root: repo.clone(),
        owner_file: root.join("handles/main.owner"),
        components: vec!["runtime".into(), "cli".into(), "runtime".into()],
    };
    let entropy = InitEntropy {
        now: Utc.with_ymd_and_hms(2026, 11, 30, 2, 3, 10).unwrap()
            + chrono::Duration::microseconds(292_358),
        run_suffix: "728df1d6".into(),
        token: OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097"),
        recorded: None,
        staging_suffix: "0".repeat(32),
    };
    let outcome = init(&StateRoot::begin(&root), &env, &request, &entropy).unwrap();
    assert_eq!(outcome.run_id, "20261130T020310Z-728df1d6");
    assert_eq!(
        outcome.checksum,
        "311d69447b74af5e4654eb3856766afe6f0e8eb0e5263d17e84fa8628a6c4c48"
    );
    assert_eq!(outcome.component_ids, ["runtime", "cli"]);

    let run = root.join("runs").join(&outcome.run_id);
    let receipt = std::fs::read_to_string(run.join("receipt.jsonl")).unwrap();
    assert_eq!(receipt, format!("{LINE_1}\n"));
    assert_eq!(receipt.len(), 537);

    let handle = std::fs::read_to_string(root.join("handles/main.owner")).unwrap();
    assert_eq!(
        handle,
        "{\"epoch\":1,\"run_id\":\"20261130T020310Z-728df1d6\",\"token\":\"5b12fa0b8bfd4c589bbd6c3637d25097\"}\n"
    );
    assert_eq!(handle.len(), 92);
    // The staging handle is gone; only the published name remains.
    let handles: Vec<_> = std::fs::read_dir(root.join("handles"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(handles, ["main.owner"]);

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["_run"],
        serde_json::json!({
            "component_ids": ["runtime", "cli"],
            "initial_owner_epoch": 1,
            "manifest_hash": "63d9230c3ff7198644fe0d20580809737484322b921d513406875053c96576d6",
            "owner_epoch": 1,
            "owner_fingerprint": "1667382387d683aa7f84c7768d11afa5b4860bc339135eb2a88f6cfb7ffaf11e",
            "repo_root": std::fs::canonicalize(&repo).unwrap().to_string_lossy(),
            "workflow_type": "A",
        })
    );
    // The simple run.json cache the reference writes after init.
    let cache: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(cache["state"], "planned");
    assert_eq!(cache["last_sequence"], 1);
    assert_eq!(cache["updated_at"], "2026-11-30T02:03:10.292358Z");
}
