//! The runtime through the binary (reference-runtime §1–§4): state-root
//! discovery, init → verify → rebuild → verify, the layout and modes the
//! reference expects, and a receipt the reference's rules accept.

use crate::bed as common;
use crate::bed::TestBed;

use common::{Flow, fixtures_dir};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn rel_tree(root: &Path) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for (path, entry) in common::snapshot(root) {
        let mode = entry.mode;
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.is_empty() {
            continue;
        }
        let kind = if mode & 0o170000 == 0o040000 {
            "dir"
        } else {
            "file"
        };
        out.push((rel, kind.to_string(), mode & 0o7777));
    }
    out
}

#[test]
fn init_verify_rebuild_verify() {
    let (tmp, flow) = crate::bed::flow_elsewhere();
    let root = tmp.path().join("state");
    let out = flow.run(&common::init_argv(
        &root,
        "A",
        Path::new("."),
        &root.join("handles/main.owner"),
        &["runtime", "cli", "runtime"],
    ));
    let init = out.assert_ok();
    let run_id = init["run_id"].as_str().unwrap();
    assert_eq!(init["operation"], "init");
    assert_eq!(init["component_ids"], serde_json::json!(["runtime", "cli"]));
    assert_eq!(init["owner_epoch"], 1);
    assert_eq!(init["sequence"], 1);
    assert_eq!(init["state_root"], root.to_str().unwrap());
    assert_eq!(init.as_object().unwrap().len(), 9);
    // YYYYMMDDTHHMMSSZ-xxxxxxxx
    let re = regex::Regex::new(r"\A[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}\z").unwrap();
    assert!(re.is_match(run_id), "{run_id}");
    // The secret never leaves the handle file.
    let handle: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("handles/main.owner")).unwrap())
            .unwrap();
    let token = handle["token"].as_str().unwrap();
    assert_eq!(token.len(), 32);
    assert!(!out.stdout.contains(token) && !out.stderr.contains(token));
    let receipt =
        std::fs::read_to_string(root.join("runs").join(run_id).join("receipt.jsonl")).unwrap();
    assert!(!receipt.contains(token));

    // Same layout and modes as the reference's init (fixture 01), plus our
    // acknowledged-head file.
    let fixture = fixtures_dir().join("01-init-only");
    let fixture_tree: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("state-tree.json")).unwrap())
            .unwrap();
    let fixture_run = fixture_tree.iter().find_map(|e| {
        let p = e["path"].as_str().unwrap();
        p.strip_prefix("runs/")
            .filter(|r| !r.contains('/'))
            .map(str::to_string)
    });
    let mut want: Vec<(String, String, u32)> = fixture_tree
        .iter()
        .map(|e| {
            let p = e["path"]
                .as_str()
                .unwrap()
                .replace(fixture_run.as_deref().unwrap(), run_id);
            let mode = u32::from_str_radix(e["mode"].as_str().unwrap(), 8).unwrap();
            (p, e["type"].as_str().unwrap().to_string(), mode)
        })
        .collect();
    want.push((
        format!("runs/{run_id}/receipt-head.json"),
        "file".into(),
        0o600,
    ));
    // Ours (DEVIATIONS 48): the secret that authenticates derived files.
    want.push(("derived.key".into(), "file".into(), 0o600));
    // Ours (DEVIATIONS 92): a new state root is ignored by git.
    want.push((".gitignore".into(), "file".into(), 0o600));
    want.sort();
    assert_eq!(rel_tree(&root), want);
    assert_eq!(std::fs::metadata(&root).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(
        std::fs::read_to_string(root.join("config.json")).unwrap(),
        std::fs::read_to_string(fixture.join("state/config.json")).unwrap()
    );

    let read = |command: &str| {
        flow.run(&common::read_argv(&root, command, run_id, &[]))
            .assert_ok()
    };
    let verify = read("verify");
    assert_eq!(verify["checksum"], init["checksum"]);
    assert_eq!(verify["event_count"], 1);
    let before = common::snapshot(&root);
    let rebuild = read("rebuild");
    assert_eq!(rebuild["checksum"], init["checksum"]);
    assert_eq!(rebuild["sequence"], 1);
    // Only derived caches may have been written: run.json and our checkpoint
    // (its state and its liveness digest table).
    let after = common::snapshot(&root);
    for (path, value) in &before {
        if !path.ends_with("run.json") {
            assert_eq!(after.get(path), Some(value), "{}", path.display());
        }
    }
    let new: Vec<_> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let dir = root.join("runs").join(run_id);
    assert_eq!(
        new,
        [
            &dir.join("checkpoint-digests.idx"),
            &dir.join("checkpoint.json"),
        ]
    );
    flow.run(&crate::bed::read_argv(&root, "verify", run_id, &[]))
        .assert_ok();
}

#[test]
fn receipt_lines_are_canonical_and_chained() {
    // An independent check of the reference's rules (§3.2–3.4) with serde
    // alone: every line is canonical JSON + LF and its checksum is the
    // SHA-256 of the event without `checksum`.
    use sha2::{Digest, Sha256};
    let bed = TestBed::planned(&["runtime"]);
    let (root, run_id) = (&bed.root, &bed.run_id);
    let receipt =
        std::fs::read_to_string(root.join("runs").join(run_id).join("receipt.jsonl")).unwrap();
    let mut previous = String::new();
    for line in receipt.split_inclusive('\n') {
        let body = line.strip_suffix('\n').expect("LF-terminated");
        let mut event: serde_json::Map<String, Value> = serde_json::from_str(body).unwrap();
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            body,
            "canonical bytes"
        );
        assert_eq!(event.len(), 16);
        let checksum = event.remove("checksum").unwrap();
        let digest = hex::encode(Sha256::digest(
            serde_json::to_string(&event).unwrap().as_bytes(),
        ));
        assert_eq!(checksum, digest);
        assert_eq!(event["previous_checksum"], previous);
        previous = digest;
    }
}

#[test]
fn state_root_discovery_through_the_binary() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let mut flow = Flow::new(&base);
    let show = |flow: &Flow, extra: &[&str]| -> String {
        let mut argv: Vec<&str> = extra.to_vec();
        if !argv.contains(&"state-root") {
            argv.push("state-root");
        }
        let v = flow.run(&argv).assert_ok();
        assert_eq!(v["operation"], "state-root");
        assert_eq!(v.as_object().unwrap().len(), 3);
        v["state_root"].as_str().unwrap().to_string()
    };
    let home = base.join("home");
    assert_eq!(
        show(&flow, &[]),
        home.join(".local/state/bluetape-skills").to_str().unwrap()
    );
    flow.envs.push(("XDG_STATE_HOME".into(), "".into()));
    assert_eq!(
        show(&flow, &[]),
        base.join("bluetape-skills").to_str().unwrap()
    );
    std::fs::create_dir_all(home.join("work/bluetape4k")).unwrap();
    assert_eq!(
        show(&flow, &[]),
        home.join("work/bluetape4k/.bluetape").to_str().unwrap()
    );
    std::fs::create_dir_all(base.join("proj/.bluetape")).unwrap();
    std::fs::create_dir_all(base.join("proj/deep/er")).unwrap();
    std::fs::write(base.join("proj/.bluetape/config.json"), "{}").unwrap();
    assert_eq!(
        show(&flow, &["state-root", "--start", "proj/deep/er"]),
        base.join("proj/.bluetape").to_str().unwrap()
    );
    flow.envs
        .push(("BLUETAPE_STATE_ROOT".into(), "env-root".into()));
    assert_eq!(show(&flow, &[]), base.join("env-root").to_str().unwrap());
    assert_eq!(show(&flow, &["--state-root", "/x/y/"]), "/x/y");
    // state-root never creates anything.
    assert!(!base.join("env-root").exists() && !base.join("bluetape-skills").exists());
    std::os::unix::fs::symlink(base.join("proj"), base.join("link")).unwrap();
    flow.run(&[
        "--state-root",
        base.join("link").to_str().unwrap(),
        "state-root",
    ])
    .assert_error(2, "contract_error");
}

#[test]
fn help_names_capability_and_safe_next() {
    let (_tmp, flow) = crate::bed::flow_elsewhere();
    let top = flow.run(&["--help"]);
    assert_eq!(top.code, 0);
    assert!(top.stdout.contains("UTC timestamps end in Z."));
    assert!(
        top.stdout
            .contains("Phase 1 supports only verify, rebuild, and receipt-diagnose.")
    );
    common::assert_helps_say(
        &flow,
        &[
            (
                "state-root",
                "Read-only. Capability: workspace bootstrap. Safe next: init or an explicit run command.",
            ),
            (
                "init",
                "Mutation. Capability: workspace bootstrap. Safe next: run-approve.",
            ),
            (
                "verify",
                "Read-only. Capability: Phase 1 and Phase 2. Safe next: rebuild",
            ),
            (
                "rebuild",
                "Mutation. Capability: Phase 1 and Phase 2. Safe next: verify.",
            ),
        ],
    );
}
