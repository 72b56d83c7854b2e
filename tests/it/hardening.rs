//! Crash and path safety through the binary (DEVIATIONS 13, 41, 42): a panic
//! ends in the envelope; a broken `receipt-head.json` is refused before any
//! append and diagnosed rather than failed on; integers the reference could
//! not read back are refused.

use crate::bed as common;
use crate::reliability;

use reliability::{LaneRun, lines};
use std::os::unix::fs::PermissionsExt;

fn lane_run() -> (tempfile::TempDir, LaneRun) {
    let (tmp, _, run) = LaneRun::in_temp(&["a"]);
    (tmp, run)
}

#[test]
fn a_panic_ends_in_the_envelope_with_an_exit_status_of_the_table() {
    let (_tmp, run) = lane_run();
    let before = run.receipt();
    for argv in [
        run.read_args("verify", &[]),
        run.heartbeat_args("a", "panic"),
    ] {
        let mut flow = common::Flow::new(&run.base);
        flow.envs.push(("BLUETAPE_TEST_PANIC".into(), "1".into()));
        let out = flow.run(&argv);
        let e = out.assert_error(2, "contract_error");
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "one line, no panic text: {out:?}"
        );
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with("internal error (a bug in bluetape-flow): test-only panic trigger"),
            "{message}"
        );
        assert!(message.contains("run verify before retrying"), "{message}");
    }
    assert_eq!(run.receipt(), before);
}

/// The broken head records of DEVIATIONS 41: a directory, then a file with a
/// wider mode. Each is refused before the append (exit 2, nothing written),
/// `verify` names it as a state-root rule (exit 2), `receipt-diagnose` still
/// answers with it as a finding, and once it is repaired the run goes on
/// with a fresh head.
#[test]
fn a_broken_head_record_is_refused_before_the_append_and_diagnosed() {
    let (_tmp, run) = lane_run();
    let head = run.run_dir().join("receipt-head.json");
    assert!(head.is_file(), "our appends keep a head");
    for (i, (case, break_it, repair)) in [
        (
            "directory",
            Box::new(|p: &std::path::Path| {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
            }) as Box<dyn Fn(&std::path::Path)>,
            Box::new(|p: &std::path::Path| std::fs::remove_dir(p).unwrap())
                as Box<dyn Fn(&std::path::Path)>,
        ),
        (
            "mode 0644",
            Box::new(|p: &std::path::Path| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap()
            }),
            Box::new(|p: &std::path::Path| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap()
            }),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        break_it(&head);
        let before = run.receipt();
        let out = run
            .flow
            .run(&run.heartbeat_args("a", &format!("broken-{i}")));
        let e = out.assert_error(2, "contract_error");
        assert!(
            crate::bed::str_field(&e, "message").contains("acknowledged receipt head record"),
            "{case}: {e}"
        );
        assert_eq!(run.receipt(), before, "{case}: nothing appended");
        let e = run.read("verify", &[]).assert_error(2, "contract_error");
        assert!(
            e["message"].as_str().unwrap().contains("receipt-head.json"),
            "{case}: {e}"
        );
        let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
        assert_eq!(
            diagnosis["effective_state"], "running",
            "{case}: {diagnosis}"
        );
        assert_eq!(
            diagnosis["last_trusted_sequence"],
            lines(&before).len(),
            "{case}"
        );
        assert!(
            crate::bed::str_field(&diagnosis, "head_record_finding")
                .contains("acknowledged receipt head record"),
            "{case}: {diagnosis}"
        );
        repair(&head);
        run.flow
            .run(&run.heartbeat_args("a", &format!("repaired-{i}")))
            .assert_ok();
        assert!(head.is_file(), "{case}: a fresh head is written");
        run.read("verify", &[]).assert_ok();
        let diagnosis = run.read("receipt-diagnose", &[]).assert_ok();
        assert!(
            diagnosis.get("head_record_finding").is_none(),
            "{diagnosis}"
        );
    }
}

/// Python cannot parse an integer of more than 4,300 digits, so the
/// reference could neither verify nor write a run holding one: such input
/// is refused (exit 2), the limit itself is accepted and stored exactly.
#[test]
fn integers_are_bounded_to_what_the_reference_can_read() {
    let (_tmp, run) = lane_run();
    let evidence = |digits: usize| {
        let path = run.inputs.join(format!("digits-{digits}.json"));
        let text = format!(
            "[{{\"kind\": \"test\", \"summary\": \"digits {digits}\", \"exit_status\": {}}}]",
            "7".repeat(digits)
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let beat = |path: &std::path::Path| {
        run.mutation(
            "heartbeat",
            &[
                "--evidence".into(),
                path.into(),
                "--input".into(),
                run.inputs.join("beat-a.json").into(),
            ],
        )
    };
    let before = run.receipt();
    let e = beat(&evidence(4301)).assert_error(2, "contract_error");
    common::assert_message(
        &e,
        "JSON input integers must have at most 4300 digits (the reference cannot read longer ones)",
    );
    assert_eq!(run.receipt(), before);
    beat(&evidence(4300)).assert_ok();
    let receipt = String::from_utf8(run.receipt()).unwrap();
    let last: serde_json::Value = serde_json::from_str(receipt.lines().last().unwrap()).unwrap();
    let intent = &last["metadata"]["intents"][0];
    assert_eq!(intent["event_type"], "heartbeat_observed", "{last}");
    assert_eq!(
        intent["evidence_refs"][0]["exit_status"].to_string(),
        "7".repeat(4300)
    );
}

/// Every numeric field of every derived file set to 0, -1, 2^63 and 2^64-1
/// (the checkpoint, the head record, the digest table's header), then a
/// mutation of each kind the checkpoint feeds: each either refuses before
/// the append or succeeds, never leaves the table of exit statuses, and the
/// receipt stays one that `rebuild` accepts whenever it accepted it before.
#[test]
fn forged_numbers_in_derived_files_never_fail_after_the_commit() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let template = LaneRun::new(&base, &["a", "b"]);
    let run_dir = |root: &std::path::Path| root.join("runs").join(&template.run_id);
    // 0, -1, 2^63, 2^64-1, and the two values that once broke it (2^62 made
    // an allocation abort, 9.3e18 a capacity-overflow panic).
    let values: Vec<serde_json::Value> = [
        "0",
        "-1",
        "9223372036854775808",
        "18446744073709551615",
        "4611686018427387904",
        "9300000000000000000",
    ]
    .iter()
    .map(|v| serde_json::from_str(v).unwrap())
    .collect();
    let mut forgeries: Vec<(String, Forgery)> = Vec::new();
    for file in ["checkpoint.json", "receipt-head.json"] {
        let original: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run_dir(&template.root).join(file)).unwrap())
                .unwrap();
        for pointer in numeric_pointers(&original, String::new()) {
            for value in &values {
                let (file, pointer, value) = (file.to_string(), pointer.clone(), value.clone());
                forgeries.push((
                    format!("{file} {pointer} = {value}"),
                    Box::new(move |root| {
                        let path = run_dir(root).join(&file);
                        let mut json: serde_json::Value =
                            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                        *json.pointer_mut(&pointer).unwrap() = value.clone();
                        std::fs::write(&path, format!("{json}\n")).unwrap();
                    }),
                ));
            }
        }
    }
    for (offset, name) in [(8, "slots"), (16, "entries")] {
        for value in [0u64, 1 << 63, u64::MAX] {
            forgeries.push((
                format!("checkpoint-digests.idx {name} = {value}"),
                Box::new(move |root| {
                    let path = run_dir(root).join("checkpoint-digests.idx");
                    let mut bytes = std::fs::read(&path).unwrap();
                    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
                    std::fs::write(&path, bytes).unwrap();
                }),
            ));
        }
    }
    assert!(forgeries.len() > 60, "{} forgeries", forgeries.len());
    let fail_ev = template.input(
        "fail-ev.json",
        &serde_json::json!([{"kind": "review", "summary": "b failed"}]),
    );
    let lane_c = template.input(
        "lane-c.json",
        &serde_json::json!({"lane_id": "c", "agent_id": "agent-c", "assignment": "work",
            "write_scope": [], "fallback": "main", "observed_at": "2026-07-14T01:02:00Z",
            "startup_ack_deadline": "2026-07-14T01:03:00Z", "command_deadline": "2026-07-14T09:00:00Z"}),
    );
    let assign = template.input(
        "assign-c.json",
        &serde_json::json!([{"kind": "plan", "summary": "assign c"}]),
    );
    for (i, (what, forge)) in forgeries.iter().enumerate() {
        let case = base.join(format!("case-{i}"));
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(&template.root)
            .arg(&case)
            .status()
            .unwrap();
        assert!(copied.success());
        let run = LaneRun {
            base: base.clone(),
            flow: common::Flow::new(&base),
            root: case.clone(),
            run_id: template.run_id.clone(),
            owner: case.join("handles/main.owner"),
            inputs: template.inputs.clone(),
        };
        restamp(&run_dir(&case));
        forge(&case);
        let rebuild_before = {
            let probe = base.join(format!("probe-{i}"));
            std::process::Command::new("cp")
                .arg("-a")
                .arg(&case)
                .arg(&probe)
                .status()
                .unwrap();
            let probe_run = LaneRun {
                root: probe.clone(),
                owner: probe.join("handles/main.owner"),
                flow: common::Flow::new(&base),
                base: base.clone(),
                run_id: run.run_id.clone(),
                inputs: run.inputs.clone(),
            };
            probe_run.read("rebuild", &[]).code
        };
        let mutations: Vec<Vec<std::ffi::OsString>> = vec![
            run.heartbeat_args("a", &format!("forged-{i}")),
            run.mutation_args(
                "lane-fail",
                &[
                    "--lane-id".into(),
                    "b".into(),
                    "--agent-id".into(),
                    "agent-b".into(),
                    "--at".into(),
                    "2026-07-14T01:02:00Z".into(),
                    "--reason".into(),
                    "b failed".into(),
                    "--evidence".into(),
                    fail_ev.clone().into(),
                ],
            ),
            run.mutation_args(
                "lane-create",
                &[
                    "--input".into(),
                    lane_c.clone().into(),
                    "--evidence".into(),
                    assign.clone().into(),
                ],
            ),
        ];
        for argv in mutations {
            let before = run.receipt();
            let out = run.flow.run(&argv);
            assert!(
                [0, 2, 3, 4, 5, 6, 7].contains(&out.code),
                "{what}: {:?} exit {}: {out:?}",
                argv[2],
                out.code
            );
            if out.code == 0 {
                assert!(
                    run.receipt().len() > before.len(),
                    "{what}: success without an append"
                );
            } else {
                assert!(
                    run.receipt() == before,
                    "{what}: a refusal appended: {out:?}"
                );
                assert_eq!(out.stderr.lines().count(), 1, "{what}: {out:?}");
            }
        }
        if rebuild_before == 0 {
            let out = run.read("rebuild", &[]);
            assert_eq!(out.code, 0, "{what}: rebuild no longer succeeds: {out:?}");
        }
        std::fs::remove_dir_all(&case).unwrap();
    }
}

/// A copy has a new inode and ctime, so its checkpoint's receipt stamp no
/// longer matches and would never be used: stamp it with the copy's
/// receipt, as if the forgery had been made in place.
fn restamp(run_dir: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(run_dir.join("receipt.jsonl")).unwrap();
    let path = run_dir.join("checkpoint.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let stamp = &mut json["receipt_stamp"];
    stamp["dev"] = meta.dev().into();
    stamp["ino"] = meta.ino().into();
    stamp["size"] = meta.size().into();
    stamp["mtime_ns"] = (meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128)
        .to_string()
        .parse::<serde_json::Value>()
        .unwrap();
    stamp["ctime_ns"] = (meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128)
        .to_string()
        .parse::<serde_json::Value>()
        .unwrap();
    std::fs::write(&path, format!("{json}\n")).unwrap();
}

/// An edit of one derived file of the state root it is given.
type Forgery<'a> = Box<dyn Fn(&std::path::Path) + 'a>;

/// JSON pointers of every integer leaf.
fn numeric_pointers(value: &serde_json::Value, at: String) -> Vec<String> {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| numeric_pointers(v, format!("{at}/{k}")))
            .collect(),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .flat_map(|(i, v)| numeric_pointers(v, format!("{at}/{i}")))
            .collect(),
        serde_json::Value::Number(n) if !n.to_string().contains('.') => vec![at],
        _ => Vec::new(),
    }
}

/// On a filesystem with 1 s timestamps a same-size edit within the second
/// after our append keeps the receipt's stamp (simulated: the checkpoint is
/// re-stamped with the edited receipt's metadata). The checkpoint's tail
/// fingerprint still sees it, so the next mutation replays, finds the damage
/// and refuses instead of appending onto it.
#[test]
fn a_same_size_edit_the_stamp_cannot_see_is_caught_by_the_tail_fingerprint() {
    let (_tmp, run) = lane_run();
    let receipt = run.receipt();
    let text = String::from_utf8(receipt.clone()).unwrap();
    let second = text.lines().nth(1).unwrap();
    assert!(second.contains("\"summary\":\"go\""), "{second}");
    let edited = text.replacen("\"summary\":\"go\"", "\"summary\":\"GO\"", 2);
    assert_eq!(edited.len(), receipt.len(), "a same-size edit");
    std::fs::write(run.receipt_path(), &edited).unwrap();
    restamp(&run.run_dir());
    let out = run.flow.run(&run.heartbeat_args("a", "after-edit"));
    let e = out.assert_error(3, "receipt_corrupt");
    assert_eq!(e["first_bad_sequence"], 2, "{e}");
    assert_eq!(
        run.receipt(),
        edited.as_bytes(),
        "nothing appended onto the damage"
    );
}

/// What a killed `init` leaves (a run directory without a receipt, a
/// staging handle) is listed by `doctor` with its remedy, and removed by the
/// next `init` once it is older than the lock grace; a staging handle whose
/// run has a receipt is that run's only credential and is kept.
#[test]
fn init_litter_is_listed_by_doctor_and_removed_once_provably_dead() {
    let (_tmp, run) = lane_run();
    let root = run.root.clone();
    let half = root.join("runs/20260714T010000Z-deadbeef");
    std::fs::create_dir_all(half.join("locks")).unwrap();
    let staging = root.join("handles/init-0123456789abcdef0123456789abcdef.owner");
    std::fs::write(
        &staging,
        r#"{"epoch":1,"run_id":"20260714T010000Z-deadbeef","token":"x"}"#,
    )
    .unwrap();
    let unpublished = root.join("handles/init-fedcba9876543210fedcba9876543210.owner");
    std::fs::write(
        &unpublished,
        format!(r#"{{"epoch":1,"run_id":"{}","token":"y"}}"#, run.run_id),
    )
    .unwrap();
    common::set_modes(&root);
    let doctor = |flow: &common::Flow| {
        let out = flow.run(&["--state-root".as_ref(), root.as_os_str(), "doctor".as_ref()]);
        out.assert_ok()
    };
    // Young: listed, not dead, and init leaves it alone.
    let before = common::snapshot(&root);
    let young = doctor(&run.flow);
    assert_eq!(common::snapshot(&root), before, "doctor writes nothing");
    assert_eq!(young["count"], 3, "{young}");
    assert!(
        young["litter"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["dead"] == false)
    );
    // Backdate past the 30 s grace.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    for path in [&half, &staging, &unpublished] {
        std::fs::File::open(path)
            .unwrap()
            .set_modified(past)
            .unwrap();
    }
    let old = doctor(&run.flow);
    let kinds: Vec<(String, bool, String)> = old["litter"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap().to_string(),
                l["dead"].as_bool().unwrap(),
                l["remedy"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(kinds[0].0, "half_made_run");
    assert!(
        kinds[0].1 && kinds[0].2.starts_with("rm -r -- '"),
        "{kinds:?}"
    );
    assert_eq!(kinds[1].0, "staging_handle");
    assert!(kinds[1].1 && kinds[1].2.starts_with("rm -- '"), "{kinds:?}");
    assert_eq!(kinds[2].0, "unpublished_handle");
    assert!(
        !kinds[2].1 && kinds[2].2.starts_with("keep it"),
        "{kinds:?}"
    );
    // The next init removes the dead ones and keeps the credential.
    let second = root.join("handles/second.owner");
    run.flow
        .run(&[
            "--state-root".as_ref(),
            root.as_os_str(),
            "init".as_ref(),
            "--workflow-type".as_ref(),
            "A".as_ref(),
            "--repo-root".as_ref(),
            run.base.join("repo").as_os_str(),
            "--owner-file".as_ref(),
            second.as_os_str(),
            "--component".as_ref(),
            "runtime".as_ref(),
        ])
        .assert_ok();
    assert!(!half.exists() && !staging.exists());
    assert!(unpublished.exists());
    let after = doctor(&run.flow);
    assert_eq!(after["count"], 1, "{after}");
}

/// Every path under `root`, deepest first.
fn every_path(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
        out.push(path);
    }
    out.reverse();
    out
}

/// Move every mtime under `root` two minutes back: past the 30 s grace.
fn backdate(root: &std::path::Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    for path in every_path(root) {
        if let Ok(file) = std::fs::File::open(&path) {
            file.set_modified(past).unwrap();
        }
    }
}

fn doctor_items(flow: &common::Flow, root: &std::path::Path) -> Vec<serde_json::Value> {
    let out = flow.run(&["--state-root".as_ref(), root.as_os_str(), "doctor".as_ref()]);
    out.assert_ok()["litter"].as_array().unwrap().clone()
}

/// trust-model §2 promise 9 (DEVIATIONS 104): an `init` killed (SIGKILL,
/// by `strace -e inject`) at every file-changing system call it makes, in
/// turn: once older than the grace, everything it left is listed by
/// `doctor` with a remedy that is not "wait", and the next `init` removes
/// the half-made runs and staging handles (what is left is a run's only
/// handle, kept, or a dead lock the next writer reclaims); every run that
/// has a receipt verifies.
#[test]
fn every_litter_a_killed_init_leaves_has_a_way_out() {
    let (_tmp, base) = crate::bed::canonical_tempdir();
    let flow = common::Flow::new(&base);
    let root = base.join("state");
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    // A first run, so the state root and its key exist (as they usually do).
    flow.init(&root, &repo);
    let mut kills = 0;
    let trace = base.join("trace");
    for syscall in [
        "mkdir",
        "mkdirat",
        "openat",
        "write",
        "pwrite64",
        "fsync",
        "fdatasync",
        "rename",
        "renameat",
        "renameat2",
        "link",
        "linkat",
        "unlink",
        "unlinkat",
        "flock",
        "fchmod",
    ] {
        for when in 1..=60 {
            let owner = root.join(format!("handles/k-{syscall}-{when}.owner"));
            let argv = common::init_argv(&root, "A", &repo, &owner, &["runtime"]);
            let inject = format!("inject={syscall}:signal=KILL:when={when}");
            let out = flow
                .strace(&["-f", "-qq", "-e", &inject], &trace, &argv)
                .output()
                .expect("strace is required (Debian strace; .ci/run installs it)");
            if out.status.success() {
                break;
            }
            kills += 1;
        }
    }
    assert!(kills > 20, "only {kills} kills: did strace inject?");
    // Young, everything may belong to a live init: listed, nothing removed.
    backdate(&root);
    for item in doctor_items(&flow, &root) {
        let remedy = item["remedy"].as_str().unwrap();
        assert!(!remedy.starts_with("wait"), "a dead end: {item}");
    }
    // The next init removes what is provably dead.
    flow.run(&common::init_argv(
        &root,
        "A",
        &repo,
        &root.join("handles/after.owner"),
        &["runtime"],
    ))
    .assert_ok();
    for item in doctor_items(&flow, &root) {
        assert!(
            ["unpublished_handle", "dead_lock"].contains(&item["kind"].as_str().unwrap()),
            "left behind after init: {item}"
        );
    }
    for run_id in common::run_ids(&root) {
        let out = flow.run(&crate::bed::read_argv(&root, "verify", &run_id, &[]));
        assert_eq!(out.code, 0, "{run_id}: {out:?}");
    }
}
