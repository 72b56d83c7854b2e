//! The run leaves the machine (contracts/bundle.md). Bundles of the demo's
//! runs (the main run, the recovery run) and of a gated run verify in a
//! directory with no state root; every hostile form of a bundle is refused;
//! a publication pushed and cloned with the real `git` verifies there, and a
//! forced rewrite of its history does not; `attest`'s envelopes are verified
//! by PyPI's securesystemslib and parsed by in-toto-attestation
//! (tests/python/attest_check.py). A missing Python venv is a failure under
//! CI=true, never a silent skip.

use crate::bed as common;

use common::{Flow, Output, git};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The demo's state root, made once per test binary by scripts/demo.sh
/// driving the binary under test, plus a gated run in the same root.
struct Demo {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    flow: Flow,
    base: PathBuf,
}

fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"))
            .env("FLOW", env!("CARGO_BIN_EXE_bluetape-flow"))
            .env("KEEP", "1")
            .env("TMPDIR", &base)
            .output()
            .unwrap();
        crate::bed::assert_ran(&out, "demo");
        let text = String::from_utf8_lossy(&out.stdout);
        let state = PathBuf::from(
            text.lines()
                .rev()
                .find_map(|l| l.strip_prefix("state root kept at "))
                .expect("the demo names its state root"),
        );
        let flow = Flow::new(&base);
        // A gated run: a frozen approval policy, approved by its approver.
        let policy = base.join("policy.json");
        std::fs::write(
            &policy,
            r#"{"required_approver": "alice", "require_different_approver": true, "initiated_by": "agent-1", "expires_after_s": 86400}"#,
        )
        .unwrap();
        let repo = base.join("gated-repo");
        std::fs::create_dir_all(&repo).unwrap();
        let owner = state.join("handles/gated.owner");
        let mut argv = common::init_argv(&state, "A", &repo, &owner, &["runtime"]);
        argv.extend(["--approval-policy".into(), policy.into_os_string()]);
        let run = flow.run(&argv).assert_ok()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        let ev = base.join("ev.json");
        std::fs::write(&ev, r#"[{"kind":"user_approval","summary":"plan reviewed"}]"#).unwrap();
        let approve = common::mutation_argv(
            &state,
            "run-approve",
            &run,
            &owner,
            &["--evidence", ev.to_str().unwrap()],
        );
        flow.run_env(&approve, &[("BLUETAPE_APPROVED_BY", "alice")])
            .assert_ok();
        Demo {
            _tmp: tmp,
            state,
            flow,
            base,
        }
    })
}

impl Demo {
    fn run(&self, args: &[&str]) -> Output {
        let mut argv = vec!["--state-root", self.state.to_str().unwrap()];
        argv.extend_from_slice(args);
        self.flow.run(&argv)
    }

    fn runs(&self) -> Vec<String> {
        common::run_ids(&self.state)
    }

    /// The first event of each run: (run id, first event).
    fn first_events(&self) -> Vec<(String, Value)> {
        self.runs()
            .into_iter()
            .map(|id| {
                let text = std::fs::read_to_string(
                    self.state.join("runs").join(&id).join("receipt.jsonl"),
                )
                .unwrap();
                (
                    id,
                    serde_json::from_str(text.lines().next().unwrap()).unwrap(),
                )
            })
            .collect()
    }

    fn recovery_run(&self) -> String {
        self.first_events()
            .into_iter()
            .find(|(_, e)| e["metadata"]["recovery_quarantine_path"].is_string())
            .unwrap()
            .0
    }

    fn gated_run(&self) -> String {
        self.first_events()
            .into_iter()
            .find(|(_, e)| {
                e["evidence_refs"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "approval_policy"))
            })
            .unwrap()
            .0
    }

    fn main_run(&self) -> String {
        self.runs()
            .into_iter()
            .find(|id| {
                let out = self.run(&["status", "--run-id", id, "--format", "json"]);
                out.code == 0 && out.json()["run_state"] == "completed"
            })
            .unwrap()
    }

    fn export(&self, run: &str, name: &str) -> PathBuf {
        let out = self.base.join("out").join(name);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&out);
        self.bundle_export(run, &out, &[]).assert_ok();
        out
    }

    /// `bundle-export --run-id <run> --out <out>` plus `extra`.
    fn bundle_export(&self, run: &str, out: &Path, extra: &[&str]) -> Output {
        let mut argv = vec![
            "bundle-export",
            "--run-id",
            run,
            "--out",
            out.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        self.run(&argv)
    }
}

fn verify(flow: &Flow, file: &Path) -> Output {
    flow.run(&[
        "bundle-verify".as_ref(),
        file.as_os_str(),
        "--at".as_ref(),
        "2026-07-14T02:00:00Z".as_ref(),
    ])
}

#[test]
fn the_demos_runs_verify_anywhere_and_match_status() {
    let demo = demo();
    let (tmp, flow) = common::flow_elsewhere();
    for run in [demo.main_run(), demo.recovery_run(), demo.gated_run()] {
        let bundle = demo.export(&run, &format!("{run}.tar"));
        // Deterministic: the same state gives the same bytes.
        let again = demo.export(&run, &format!("{run}-again.tar"));
        assert_eq!(
            std::fs::read(&bundle).unwrap(),
            std::fs::read(&again).unwrap()
        );
        let copy = tmp.path().join("copy.tar");
        std::fs::copy(&bundle, &copy).unwrap();
        let out = verify(&flow, &copy).assert_ok();
        assert_eq!(out["verified"], true);
        assert_eq!(out["run_id"], run.as_str());
        // The summary is status --run-id's.
        let status = demo
            .run(&[
                "status",
                "--run-id",
                &run,
                "--at",
                "2026-07-14T02:00:00Z",
                "--format",
                "json",
            ])
            .assert_ok();
        for key in [
            "run_state",
            "sequence",
            "checksum",
            "lanes",
            "components",
            "completion",
            "approval",
            "recovery_of",
            "manifest_hash",
            "next",
        ] {
            assert_eq!(out[key], status[key], "{run}: {key}");
        }
        // GNU tar reads it as an ordinary archive.
        let listed = Command::new("tar").arg("-tf").arg(&copy).output().unwrap();
        assert!(listed.status.success());
        assert!(
            String::from_utf8_lossy(&listed.stdout).starts_with("bluetape-bundle/index.json\n")
        );
        // Nothing was written beside the bundle.
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}"); // copy.tar and the flow's home
    }
    let recovery = demo.export(&demo.recovery_run(), "recovery.tar");
    let listed = Command::new("tar")
        .arg("-tf")
        .arg(&recovery)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout)
            .contains("bluetape-bundle/quarantine.receipt.jsonl")
    );
    let gated = demo.export(&demo.gated_run(), "gated.tar");
    let listed = Command::new("tar").arg("-tf").arg(&gated).output().unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("bluetape-bundle/approval-policy.json")
    );
}

#[test]
fn the_damaged_run_and_unsafe_outputs_are_refused() {
    let demo = demo();
    let damaged = demo
        .runs()
        .into_iter()
        .find(|id| demo.run(&["verify", "--run-id", id]).code == 3)
        .unwrap();
    let out = demo.base.join("out/damaged.tar");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    demo.bundle_export(&damaged, &out, &[])
        .assert_error(3, "receipt_corrupt");
    assert!(!out.exists());
    let main = demo.main_run();
    let inside = demo.state.join("bundle.tar");
    demo.bundle_export(&main, &inside, &[])
        .assert_error(2, "contract_error");
    assert!(!inside.exists());
    let existing = demo.export(&main, "exists.tar");
    demo.bundle_export(&main, &existing, &[])
        .assert_error(2, "contract_error");
    let link = demo.base.join("out/link.tar");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&existing, &link).unwrap();
    demo.bundle_export(&main, &link, &["--force"])
        .assert_error(2, "contract_error");
}

// ------------------------------------------------------------- hostility

/// The members of a tar: (header offset, data offset, size).
fn members(bytes: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= bytes.len() && bytes[at..at + 512].iter().any(|b| *b != 0) {
        let size_field = std::str::from_utf8(&bytes[at + 124..at + 135]).unwrap();
        let size = usize::from_str_radix(size_field.trim_matches(['\0', ' ']), 8).unwrap();
        out.push((at, at + 512, size));
        at += 512 + size.div_ceil(512) * 512;
    }
    out
}

/// A tar header for `name` (raw bytes, so '..' and links are possible).
fn raw_header(name: &[u8], kind: u8, size: usize, link: &[u8]) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// `bytes` with an extra member (header + padded data) before the end.
fn with_member(bytes: &[u8], header: [u8; 512], data: &[u8]) -> Vec<u8> {
    let end = members(bytes)
        .last()
        .map(|(_, d, s)| d + s.div_ceil(512) * 512)
        .unwrap();
    let mut out = bytes[..end].to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out.resize(out.len() + (512 - data.len() % 512) % 512, 0);
    out.extend_from_slice(&bytes[end..]);
    out
}

fn assert_refused(flow: &Flow, dir: &Path, bytes: &[u8], what: &str) -> Value {
    let file = dir.join("hostile.tar");
    std::fs::write(&file, bytes).unwrap();
    let before: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let out = verify(flow, &file);
    assert!(
        out.code == 2 || out.code == 3,
        "{what}: exit {} {}",
        out.code,
        out.stdout
    );
    let error = out.error();
    assert_eq!(
        error["error"],
        if out.code == 2 {
            "contract_error"
        } else {
            "receipt_corrupt"
        },
        "{what}"
    );
    assert!(
        error["message"].as_str().unwrap().starts_with("bundle "),
        "{what}: {error}"
    );
    let after: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(before, after, "{what}: nothing is written");
    error
}

#[test]
fn every_hostile_bundle_is_refused() {
    let demo = demo();
    let (tmp, flow) = common::flow_elsewhere();
    let good = std::fs::read(demo.export(&demo.recovery_run(), "hostile-base.tar")).unwrap();
    verify(&flow, &{
        let f = tmp.path().join("good.tar");
        std::fs::write(&f, &good).unwrap();
        f
    })
    .assert_ok();
    // Each byte class of each member (the index too): a header's name,
    // mode, size, checksum and magic; the data's first, middle and last
    // byte; the padding.
    for (header, data, size) in members(&good) {
        let mut spots = vec![
            (header, "name"),
            (header + 100, "mode"),
            (header + 124 + 10, "size"),
            (header + 148, "header checksum"),
            (header + 257, "magic"),
            (data, "first data byte"),
            (data + size / 2, "middle data byte"),
            (data + size - 1, "last data byte"),
        ];
        if size % 512 != 0 {
            spots.push((data + size, "padding"));
        }
        for (at, what) in spots {
            let mut bad = good.clone();
            bad[at] ^= 0x20;
            assert_refused(
                &flow,
                tmp.path(),
                &bad,
                &format!("{what} of the member at {header}"),
            );
        }
    }
    // Truncated anywhere: inside a header, inside data, in the end blocks.
    for cut in [100, 700, good.len() / 2, good.len() - 700, good.len() - 1] {
        assert_refused(
            &flow,
            tmp.path(),
            &good[..cut],
            &format!("truncated at {cut}"),
        );
    }
    // Appended: a member after the last, bytes after the end.
    let extra = with_member(
        &good,
        raw_header(b"bluetape-bundle/extra.json", b'0', 2, b""),
        b"{}",
    );
    let e = assert_refused(&flow, tmp.path(), &extra, "an appended member");
    assert!(
        e["message"].as_str().unwrap().contains("extra member"),
        "{e}"
    );
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"x");
    assert_refused(&flow, tmp.path(), &trailing, "bytes after the end");
    // Hostile member forms, in place of the first member after the index.
    let (second, _, _) = members(&good)[1];
    let splice = |header: [u8; 512]| {
        let mut bad = good.clone();
        bad[second..second + 512].copy_from_slice(&header);
        bad
    };
    for (header, needle) in [
        (
            raw_header(b"bluetape-bundle/../../etc/passwd", b'0', 10, b""),
            "'..' path",
        ),
        (raw_header(b"../manifest.json", b'0', 10, b""), "'..' path"),
        (raw_header(b"/etc/passwd", b'0', 10, b""), "absolute path"),
        (
            raw_header(b"bluetape-bundle/manifest.json", b'2', 0, b"/etc/passwd"),
            "is a link",
        ),
        (
            raw_header(
                b"bluetape-bundle/manifest.json",
                b'1',
                0,
                b"bluetape-bundle/index.json",
            ),
            "is a link",
        ),
        (
            raw_header(b"bluetape-bundle/manifest.json", b'3', 0, b""),
            "is a device",
        ),
        (
            raw_header(b"bluetape-bundle/index.json", b'0', 10, b""),
            "duplicate member",
        ),
    ] {
        let e = assert_refused(&flow, tmp.path(), &splice(header), needle);
        assert!(
            e["message"].as_str().unwrap().contains(needle),
            "{needle}: {e}"
        );
    }
    // A member over its limit: an index listing a 70 KiB head.
    let index = {
        let (_, data, size) = members(&good)[0];
        let mut index: Value = serde_json::from_slice(&good[data..data + size]).unwrap();
        let members = index["members"].as_array_mut().unwrap();
        members.insert(
            1,
            serde_json::json!({"name": "heads/1.0123abcd.note", "sha256": "a".repeat(64), "size": 70000}),
        );
        index
    };
    let big = bundle_of(&index, &[]);
    let e = assert_refused(&flow, tmp.path(), &big, "a member over its limit");
    assert!(
        e["message"].as_str().unwrap().contains("over its limit"),
        "{e}"
    );
    // Not a tar at all.
    assert_refused(&flow, tmp.path(), b"not a tar", "not a tar");
}

// ------------------------------------------------------------------- git

/// Clone `remote` to `dest` as an auditor would, with the runs' refs.
fn clone_with_runs(remote: &Path, dest: &Path) {
    git(
        dest.parent().unwrap(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            dest.to_str().unwrap(),
        ],
    );
    git(
        dest,
        &["fetch", "-q", "origin", "refs/bluetape/*:refs/bluetape/*"],
    );
}

fn verify_git(flow: &Flow, dir: &Path, reference: &str) -> Output {
    flow.run(&[
        "bundle-verify",
        "--git",
        dir.to_str().unwrap(),
        "--ref",
        reference,
    ])
}

#[test]
fn a_publication_pushed_and_cloned_verifies_and_a_rewrite_does_not() {
    let bed = common::TestBed::running(&["api"]);
    let repo = bed.tmp.path().join("project");
    let remote = bed.tmp.path().join("remote.git");
    let clone = bed.tmp.path().join("clone");
    git(bed.tmp.path(), &["init", "-q", repo.to_str().unwrap()]);
    git(
        bed.tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let publish = |expect: i32| {
        let out = bed.read("publish", &["--repo", repo.to_str().unwrap()]);
        assert_eq!(out.code, expect, "{} {}", out.stdout, out.stderr);
        out
    };
    let first = publish(0).assert_ok();
    assert_eq!(first["previous"], Value::Null);
    let reference = format!("refs/bluetape/runs/{}", bed.run_id);
    assert_eq!(first["ref"], reference.as_str());
    // More events, more publications: each commit's parent is the last.
    for i in 0..3 {
        bed.cmd(
            "lane-create",
            &common::ev("assign"),
            &[
                "--input",
                &bed.file(&common::lane_input(
                    &format!("w{i}"),
                    "agent",
                    &[&format!("src/w{i}")],
                )),
            ],
        )
        .assert_ok();
        let out = publish(0).assert_ok();
        assert_eq!(
            git(
                &repo,
                &[
                    "rev-parse",
                    &format!("{}^", out["commit"].as_str().unwrap())
                ]
            ),
            out["previous"].as_str().unwrap()
        );
    }
    // Published again unchanged: no new commit.
    let tip = git(&repo, &["rev-parse", &reference]);
    assert_eq!(publish(0).assert_ok()["unchanged"], true);
    assert_eq!(git(&repo, &["rev-parse", &reference]), tip);
    // Plain git moves it: push, clone elsewhere, fetch refs/bluetape/*.
    git(
        &repo,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            "refs/bluetape/*:refs/bluetape/*",
        ],
    );
    clone_with_runs(&remote, &clone);
    let (_elsewhere, flow) = common::flow_elsewhere();
    let out = verify_git(&flow, &clone, &reference).assert_ok();
    assert_eq!(out["publications"], 4);
    assert_eq!(out["verified"], true);
    assert_eq!(
        out["sequence"],
        bed.read("verify", &[]).assert_ok()["sequence"]
    );
    // A forced rewrite of the remote ref to a shortened receipt: a new
    // commit on top whose receipt drops the last event.
    let work = bed.tmp.path().join("rewrite");
    git(
        bed.tmp.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(
        &work,
        &["fetch", "-q", "origin", &format!("{reference}:{reference}")],
    );
    git(&work, &["checkout", "-q", &reference]);
    let segment = work.join("receipt/000000000001.jsonl");
    let text = std::fs::read_to_string(&segment).unwrap();
    let shorter: String = text
        .split_inclusive('\n')
        .take(text.lines().count() - 1)
        .collect();
    std::fs::write(&segment, &shorter).unwrap();
    git(&work, &["commit", "-qam", "rewrite"]);
    git(
        &work,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            &format!("HEAD:{reference}"),
        ],
    );
    let again = bed.tmp.path().join("clone-2");
    clone_with_runs(&remote, &again);
    verify_git(&flow, &again, &reference).assert_error(3, "receipt_corrupt");
    // A forced rewrite whose newest commit is itself a valid, shorter
    // bundle (an older publication's tree on top of the newest one): the
    // tip verifies, the history does not.
    let tip = git(&repo, &["rev-parse", &reference]);
    let old_tree = git(&repo, &["rev-parse", &format!("{reference}~2^{{tree}}")]);
    let forged = git(
        &repo,
        &["commit-tree", &old_tree, "-p", &tip, "-m", "rollback"],
    );
    git(
        &repo,
        &[
            "push",
            "-q",
            "--force",
            remote.to_str().unwrap(),
            &format!("{forged}:{reference}"),
        ],
    );
    let third = bed.tmp.path().join("clone-3");
    clone_with_runs(&remote, &third);
    let e = verify_git(&flow, &third, &reference).assert_error(3, "receipt_corrupt");
    assert!(
        e["message"].as_str().unwrap().contains("not append-only"),
        "{e}"
    );
    // A history rewritten to a shorter receipt (a forced reset onto an
    // older publication plus a different event) is refused too.
    let older = git(&repo, &["rev-parse", &format!("{reference}~2")]);
    git(&repo, &["update-ref", &reference, &older]);
    bed.truncate(3);
    bed.cmd(
        "run-block",
        &common::ev("other"),
        &["--reason", "a rewrite"],
    );
    let out = bed.read("publish", &["--repo", repo.to_str().unwrap()]);
    assert!(
        out.code == 5 || out.code == 3,
        "{} {}",
        out.stdout,
        out.stderr
    );
    if out.code == 5 {
        let e = out.error();
        assert_eq!(
            e["message"],
            "the receipt does not extend the one published: a rewrite is never published over history"
        );
        assert_eq!(e["fields"]["ref"], reference.as_str());
        assert!(e["fields"]["published_sequence"].is_u64(), "{e}");
    }
    assert_eq!(git(&repo, &["rev-parse", &reference]), older);
}

// ---------------------------------------------------------------- attest

/// The venv python with securesystemslib and in-toto-attestation
/// (.ci/run's `pyvenv`, exported as BLUETAPE_CI_PYTHON).
pub(crate) fn python() -> Option<PathBuf> {
    let from_env = std::env::var_os("BLUETAPE_CI_PYTHON").map(PathBuf::from);
    let default = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/bluetape-ci/venv/bin/python"));
    let found = from_env.or(default).filter(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "BLUETAPE_CI_PYTHON must name the venv python with securesystemslib and \
             in-toto-attestation (.ci/run's pyvenv installs it)"
        );
        eprintln!("SKIPPED outside CI: no venv python (set BLUETAPE_CI_PYTHON; .ci/run makes one)");
    }
    found
}

/// `tests/python/attest_check.py` on an envelope signed by the key that
/// `key-generate` printed as `key` (its `verifier_key` and `key_hash`).
pub(crate) fn attest_check(python: &Path, file: &Path, key: &Value) -> std::process::Output {
    use base64::Engine;
    let vkey = key["verifier_key"].as_str().unwrap();
    let public = base64::engine::general_purpose::STANDARD
        .decode(vkey.splitn(3, '+').nth(2).unwrap())
        .unwrap();
    Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/attest_check.py"
        ))
        .arg(file)
        .arg(hex::encode(&public[1..]))
        .arg(key["key_hash"].as_str().unwrap())
        .output()
        .unwrap()
}

#[test]
fn attest_envelopes_verify_with_securesystemslib_and_parse_with_in_toto() {
    let demo = demo();
    let keys = demo.base.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let signer = keys.join("attest.key");
    let _ = std::fs::remove_file(&signer);
    let key = demo
        .run(&[
            "key-generate",
            "--name",
            "ci.example/attest",
            "--out",
            signer.to_str().unwrap(),
        ])
        .assert_ok();
    let main = demo.main_run();
    let envelope = keys.join("main.intoto.json");
    let _ = std::fs::remove_file(&envelope);
    let attest = |run: &str, out: &Path| {
        demo.run(&[
            "attest",
            "--run-id",
            run,
            "--key",
            signer.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let out = attest(&main, &envelope).assert_ok();
    assert_eq!(
        out["predicate_type"],
        "https://github.com/bluetape4k/bluetape-skills/bluetape-flow/run-completion/v1"
    );
    // A run that is not completed is refused with its gaps, nothing written.
    let planned = demo.recovery_run();
    let refused = keys.join("planned.json");
    let e = attest(&planned, &refused).assert_error(6, "completion_blocked");
    assert!(
        e["missing_ids"].as_array().is_some_and(|m| !m.is_empty()),
        "{e}"
    );
    assert!(!refused.exists());
    let Some(python) = python() else { return };
    let check = |file: &Path| attest_check(&python, file, &key);
    let verified = check(&envelope);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    let statement: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(statement["type"], "https://in-toto.io/Statement/v1");
    let receipt = std::fs::read(demo.state.join("runs").join(&main).join("receipt.jsonl")).unwrap();
    assert_eq!(
        statement["subject"][0]["digest"]["sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&receipt))
    );
    let predicate = &statement["predicate"];
    assert_eq!(predicate["run_id"], main.as_str());
    assert_eq!(predicate["run_state"], "completed");
    // A clean run says so, and an unsigned approval is asserted.
    assert_eq!(predicate["breaches"], serde_json::json!([]));
    let approvals = predicate["approvals"].as_array().unwrap();
    assert!(!approvals.is_empty());
    assert!(
        approvals
            .iter()
            .all(|a| a["proof"] == "asserted" && a["key"].is_null())
    );
    let status = demo.run(&["verify", "--run-id", &main]).assert_ok();
    assert_eq!(predicate["final_head"]["checksum"], status["checksum"]);
    assert!(
        predicate["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["replacement_lane_id"] == "parser-2")
    );
    assert!(
        predicate["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["checks"].is_array())
    );
    // A flipped bit anywhere in the signature or the payload fails there.
    use base64::Engine;
    let text = std::fs::read_to_string(&envelope).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    for field in ["payload", "sig"] {
        let mut bad = value.clone();
        let slot = if field == "sig" {
            &mut bad["signatures"][0]["sig"]
        } else {
            &mut bad["payload"]
        };
        let mut raw = base64::engine::general_purpose::STANDARD
            .decode(slot.as_str().unwrap())
            .unwrap();
        raw[3] ^= 0x01;
        *slot = Value::String(base64::engine::general_purpose::STANDARD.encode(raw));
        let file = keys.join(format!("bad-{field}.json"));
        std::fs::write(&file, bad.to_string()).unwrap();
        assert!(!check(&file).status.success(), "a flipped {field} verified");
    }
    value["payloadType"] = Value::String("application/json".into());
    let file = keys.join("bad-type.json");
    std::fs::write(&file, value.to_string()).unwrap();
    assert!(!check(&file).status.success());
}

/// A receipt over the parallel threshold (1 MiB): parsed on two worker
/// threads, replayed in order; the verdicts are the sequential ones.
#[test]
fn a_long_receipt_verifies_on_worker_threads_and_damage_is_still_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, run_id) = crate::parallel_verify::long_run(tmp.path());
    let flow = Flow::new(tmp.path());
    let out = tmp.path().join("long.tar");
    flow.run(&crate::bed::read_argv(
        &root,
        "bundle-export",
        &run_id,
        &["--out", out.to_str().unwrap()],
    ))
    .assert_ok();
    let receipt = std::fs::metadata(root.join("runs").join(&run_id).join("receipt.jsonl")).unwrap();
    assert!(
        receipt.len() > 1 << 20,
        "the receipt must take the parallel path"
    );
    let (elsewhere, other) = common::flow_elsewhere();
    let verified = verify(&other, &out).assert_ok();
    let status = flow
        .run(&crate::bed::read_argv(
            &root,
            "status",
            &run_id,
            &["--at", "2026-07-14T02:00:00Z", "--format", "json"],
        ))
        .assert_ok();
    for key in ["run_state", "sequence", "checksum", "lanes", "completion"] {
        assert_eq!(verified[key], status[key], "{key}");
    }
    // A changed event deep in a segment, with its index entry changed to
    // match (a consistent forgery of the tar), is still refused: by the
    // chain, on the worker threads.
    let good = std::fs::read(&out).unwrap();
    let forged = reforge(&good, |name, data| {
        if name.ends_with("000000000257.jsonl") {
            let at = data.len() / 2;
            data[at] = if data[at] == b'a' { b'b' } else { b'a' };
        }
    });
    let e = assert_refused(
        &other,
        elsewhere.path(),
        &forged,
        "a forged event in a long receipt",
    );
    assert!(
        crate::bed::str_field(&e, "message").contains("bundle refused: receipt"),
        "{e}"
    );
}

/// The tar rebuilt with `change` applied to members' data and the index
/// recomputed to match: a forgery only the content checks can catch.
fn reforge(bytes: &[u8], mut change: impl FnMut(&str, &mut Vec<u8>)) -> Vec<u8> {
    use sha2::Digest;
    let all = members(bytes);
    let name_of = |header: usize| {
        let h = &bytes[header..header + 512];
        let field = |r: std::ops::Range<usize>| {
            String::from_utf8_lossy(&h[r])
                .trim_end_matches('\0')
                .to_string()
        };
        let (prefix, name) = (field(345..500), field(0..100));
        let full = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        full.strip_prefix("bluetape-bundle/").unwrap().to_string()
    };
    let (_, data, size) = all[0];
    let mut index: Value = serde_json::from_slice(&bytes[data..data + size]).unwrap();
    let mut datas = Vec::new();
    for (i, (header, data, size)) in all.iter().enumerate().skip(1) {
        let name = name_of(*header);
        let mut content = bytes[*data..*data + *size].to_vec();
        change(&name, &mut content);
        let entry = &mut index["members"][i - 1];
        assert_eq!(entry["name"], name.as_str());
        entry["sha256"] = Value::String(hex::encode(sha2::Sha256::digest(&content)));
        entry["size"] = Value::from(content.len());
        datas.push((name, content));
    }
    bundle_of(&index, &datas)
}

/// A bundle written by our writer: `index.json` (canonical `index` and a
/// line feed), then each of `members` (name, content) as it is.
fn bundle_of(index: &Value, members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut text = bluetape_flow::receipt::canonical::to_vec(index);
    text.push(b'\n');
    let mut out = Vec::new();
    let mut writer = bluetape_flow::receipt::bundle::BundleWriter::new(&mut out);
    writer
        .append("index.json", text.len() as u64, &text[..])
        .unwrap();
    for (name, content) in members {
        writer
            .append(name, content.len() as u64, &content[..])
            .unwrap();
    }
    writer.finish().unwrap();
    out
}

/// Forgeries that keep the tar and its index consistent (each member's
/// SHA-256 recomputed) are caught by what binds each member: the chain, the
/// replay, the report, policy and quarantine bindings, the manifest.
#[test]
fn consistent_forgeries_of_each_member_are_refused_by_their_bindings() {
    let demo = demo();
    let (tmp, flow) = common::flow_elsewhere();
    let flip = |data: &mut Vec<u8>| {
        let at = data.len() / 2;
        data[at] = if data[at] == b'1' { b'2' } else { b'1' };
    };
    for run in [demo.main_run(), demo.recovery_run(), demo.gated_run()] {
        let good = std::fs::read(demo.export(&run, &format!("forge-{run}.tar"))).unwrap();
        // The rebuilt tar with nothing changed is the same bundle.
        let same = reforge(&good, |_, _| {});
        assert_eq!(same, good, "reforge is faithful");
        let names: Vec<String> = {
            let (_, data, size) = members(&good)[0];
            let index: Value = serde_json::from_slice(&good[data..data + size]).unwrap();
            index["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_string())
                .collect()
        };
        for name in &names {
            let forged = reforge(&good, |n, data| {
                if n == name {
                    flip(data);
                }
            });
            assert_ne!(forged, good);
            assert_refused(&flow, tmp.path(), &forged, &format!("{run}: forged {name}"));
        }
    }
}

/// Signed heads travel in the bundle: they verify with their key, not with
/// another, and a head kept elsewhere must be extended by the bundle.
#[test]
fn signed_heads_in_a_bundle_verify_with_their_key_only() {
    let bed = common::TestBed::running(&["api"]);
    let key = |name: &str| {
        let stem = name.replace('/', "-");
        let file = bed.work.join(format!("{stem}.key"));
        let out = bed
            .raw(&[
                "key-generate",
                "--name",
                name,
                "--out",
                file.to_str().unwrap(),
            ])
            .assert_ok();
        let public = bed.work.join(format!("{stem}.pub"));
        std::fs::write(
            &public,
            format!("{}\n", out["verifier_key"].as_str().unwrap()),
        )
        .unwrap();
        (file, public)
    };
    let (ours, ours_pub) = key("ci.example/ours");
    let (_, other_pub) = key("ci.example/other");
    let export = |name: &str| {
        let out = bed.work.join(name);
        bed.read("bundle-export", &["--out", out.to_str().unwrap()])
            .assert_ok();
        out
    };
    let before = export("before.tar");
    bed.cmd(
        "lane-create",
        &common::ev("assign"),
        &[
            "--input",
            &bed.file(&common::lane_input("w", "agent", &["src/w"])),
        ],
    )
    .assert_ok();
    let signed = bed
        .read("sign-head", &["--key", ours.to_str().unwrap()])
        .assert_ok();
    let kept = bed.work.join("kept.note");
    std::fs::write(&kept, signed["note"].as_str().unwrap()).unwrap();
    let bundle = export("signed.tar");
    let (_tmp, flow) = common::flow_elsewhere();
    let run = |file: &Path, extra: &[&str]| {
        let mut argv = vec!["bundle-verify", file.to_str().unwrap()];
        argv.extend_from_slice(extra);
        flow.run(&argv)
    };
    let out = run(&bundle, &["--key", ours_pub.to_str().unwrap()]).assert_ok();
    assert_eq!(out["heads"], 1);
    run(&bundle, &["--key", other_pub.to_str().unwrap()]).assert_error(3, "receipt_corrupt");
    run(
        &bundle,
        &[
            "--key",
            ours_pub.to_str().unwrap(),
            "--head",
            kept.to_str().unwrap(),
        ],
    )
    .assert_ok();
    // An older bundle does not extend the head kept since; with a key,
    // a bundle without heads proves nothing and is refused (exit 2: there
    // is nothing to check the key against, DEVIATIONS 90).
    let e = run(&before, &["--head", kept.to_str().unwrap()]).assert_error(3, "receipt_corrupt");
    assert!(e["message"].as_str().unwrap().contains("--head"), "{e}");
    run(&before, &["--key", ours_pub.to_str().unwrap()]).assert_error(2, "contract_error");
    // The receipt cut back before the stored head: the export refuses.
    bed.truncate(2);
    bed.read(
        "bundle-export",
        &["--out", bed.work.join("cut.tar").to_str().unwrap()],
    )
    .assert_error(3, "receipt_corrupt");
}

/// trust-model §2 promise 6 (DEVIATIONS 107): `bundle-verify --key` says
/// how far the signatures reach (`signed_through`); its summary is the
/// signed prefix's, and the events after it are judged apart, as
/// `unsigned_tail` (`signed: false`). Before, one head over events 1–3 made
/// `verified: true, run_state: completed, sequence: 11` of an 11-event
/// receipt; and with heads at 3 and 10, dropping the head at 10 and
/// cutting the receipt to 8 showed a failed lane as still running.
#[test]
fn signed_verdicts_say_how_far_the_signatures_reach() {
    let key_pair = |bed: &common::TestBed| {
        let file = bed.work.join("signer.key");
        let out = bed
            .raw(&[
                "key-generate",
                "--name",
                "ci.example/ours",
                "--out",
                file.to_str().unwrap(),
            ])
            .assert_ok();
        let public = bed.work.join("signer.pub");
        std::fs::write(
            &public,
            format!("{}\n", out["verifier_key"].as_str().unwrap()),
        )
        .unwrap();
        (file, public)
    };
    let export = |bed: &common::TestBed, name: &str| {
        let out = bed.work.join(name);
        bed.read("bundle-export", &["--out", out.to_str().unwrap()])
            .assert_ok();
        out
    };
    let (_tmp, flow) = common::flow_elsewhere();
    let verify_keyed = |file: &Path, public: &Path| {
        flow.run(&[
            "bundle-verify",
            file.to_str().unwrap(),
            "--key",
            public.to_str().unwrap(),
            "--at",
            "2026-07-14T02:00:00Z",
        ])
        .assert_ok()
    };

    // One head over events 1-3 of a run that then completes.
    let bed = common::TestBed::running(&["runtime"]);
    let (key, public) = key_pair(&bed);
    bed.read("sign-head", &["--key", key.to_str().unwrap()])
        .assert_ok();
    bed.built_runtime();
    bed.check("runtime", "unit", true, None, &common::ev("unit green"))
        .assert_ok();
    bed.cover("runtime", &common::ev("runtime verified"))
        .assert_ok();
    bed.complete(&common::ev("main verification")).assert_ok();
    let total = bed.events().len() as u64;
    let out = verify_keyed(&export(&bed, "completed.tar"), &public);
    assert_eq!(out["verified"], true);
    assert_eq!(out["signed_through"], 3, "{out}");
    assert_eq!(
        out["sequence"], 3,
        "the summary is the signed prefix's: {out}"
    );
    assert_eq!(out["run_state"], "running", "{out}");
    assert_eq!(out["completion"]["complete"], false, "{out}");
    assert_eq!(out["receipt_sequence"], total);
    let tail = &out["unsigned_tail"];
    assert_eq!(tail["signed"], false, "{out}");
    assert_eq!(tail["from_sequence"], 4);
    assert_eq!(tail["to_sequence"], total);
    assert_eq!(tail["events"], total - 3);
    assert_eq!(tail["run_state"], "completed");
    // `verify --key` on the state root says the same reach.
    let out = bed
        .read("verify", &["--key", public.to_str().unwrap()])
        .assert_ok();
    assert_eq!(out["signed_through"], 3, "{out}");
    assert_eq!(out["unsigned_tail"]["events"], total - 3, "{out}");
    assert_eq!(out["unsigned_tail"]["signed"], false);

    // Heads at 3 and 10, lane `w` failed at 9; the head at 10 dropped, the
    // receipt cut to 8 (and the head record with it), then exported.
    let bed = common::TestBed::running(&["api"]);
    let (key, public) = key_pair(&bed);
    bed.read("sign-head", &["--key", key.to_str().unwrap()])
        .assert_ok();
    bed.running_lane("w", None);
    bed.heartbeat("w", &common::ev("working"));
    bed.heartbeat("w", &common::ev("still working"));
    bed.fail_lane("w", &common::ev("review failed"));
    bed.input(
        "lane-create",
        &common::ev("assign x"),
        &common::lane_input("x", "agent-x", &[]),
    )
    .assert_ok();
    assert_eq!(bed.events().len(), 10);
    bed.read("sign-head", &["--key", key.to_str().unwrap()])
        .assert_ok();
    let full = verify_keyed(&export(&bed, "full.tar"), &public);
    assert_eq!(full["signed_through"], 10);
    assert!(full["unsigned_tail"].is_null(), "{full}");
    let lane = |out: &Value, id: &str| {
        out["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["lane_id"] == id)
            .cloned()
    };
    assert_eq!(lane(&full, "w").unwrap()["state"], "failed", "{full}");
    for entry in std::fs::read_dir(bed.dir.join("heads")).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("10.")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    std::fs::remove_file(bed.dir.join("receipt-head.json")).unwrap();
    bed.truncate(8);
    let cut = verify_keyed(&export(&bed, "cut.tar"), &public);
    assert_eq!(cut["signed_through"], 3, "{cut}");
    assert_eq!(cut["sequence"], 3);
    assert!(
        lane(&cut, "w").is_none(),
        "no signed verdict on lane w: {cut}"
    );
    assert_eq!(cut["unsigned_tail"]["signed"], false);
    assert_eq!(cut["unsigned_tail"]["events"], 5);
}
