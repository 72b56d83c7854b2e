//! Bad input for the state root and `init` (reference-runtime §1, §2):
//! symlinked roots and subdirectories, wrong modes, a foreign uid, owner
//! files outside `handles/`, existing or dangling handles, bad identifiers,
//! unknown workflow types, bad repo roots. Every case drives the real
//! binary, gets its typed error with a clear message, prints nothing on
//! stdout, and leaves every byte under the temp directory as it was — in
//! particular no run directory, no staging handle `handles/init-*.owner`,
//! and no state root or skeleton when the root did not exist before.

use crate::bed as common;
use crate::bed::refusal;

use common::init_argv;
use refusal::{Work, chmod, expect_error, is_root};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

/// The two starting points every init refusal is tried from: a state root
/// that does not exist yet, and one that already holds a run.
fn both_roots() -> Vec<(&'static str, Work)> {
    let fresh = Work::new();
    let (existing, _) = Work::with_run();
    vec![("absent root", fresh), ("existing root", existing)]
}

#[test]
fn a_symlinked_state_root_is_refused_with_and_without_trailing_slash() {
    let (work, run_id) = Work::with_run();
    let link = work.base.join("link");
    symlink(&work.state, &link).unwrap();
    for root in [link.clone(), PathBuf::from(format!("{}/", link.display()))] {
        let owner = work.state.join("handles/second.owner");
        let args = init_argv(&root, "A", &work.repo, &owner, &["runtime"]);
        work.refused(
            &args,
            2,
            "contract_error",
            "state root must not be a symlink",
        );
        for command in ["verify", "rebuild"] {
            let args: Vec<OsString> = vec![
                "--state-root".into(),
                root.clone().into(),
                command.into(),
                "--run-id".into(),
                run_id.clone().into(),
            ];
            work.refused(
                &args,
                2,
                "contract_error",
                "state root must not be a symlink",
            );
        }
    }
    // The same through BLUETAPE_STATE_ROOT.
    let mut flow = common::Flow::new(&work.base);
    flow.envs
        .push(("BLUETAPE_STATE_ROOT".into(), link.display().to_string()));
    let before = common::snapshot(&work.base);
    let out = flow.run(&["verify", "--run-id", &run_id]);
    expect_error(
        &out,
        2,
        "contract_error",
        "state root must not be a symlink",
        "env",
    );
    refusal::assert_unchanged(&before, &common::snapshot(&work.base), "env");
}

#[test]
fn a_dangling_symlink_as_state_root_is_not_followed_or_created() {
    let work = Work::new();
    let target = work.base.join("target-root");
    symlink(&target, &work.state).unwrap();
    work.init_refused("main", "state root must not be a symlink");
    assert!(!target.exists());
}

#[test]
fn a_state_root_that_is_a_file_is_refused() {
    let work = Work::new();
    std::fs::write(&work.state, b"not a directory").unwrap();
    chmod(&work.state, 0o600);
    work.init_refused("main", "state root is not a directory");
}

#[test]
fn an_existing_state_root_without_mode_0700_is_refused() {
    for mode in [0o755, 0o750, 0o711, 0o500, 0o2700, 0o1700] {
        let (work, _) = Work::with_run();
        chmod(&work.state, mode);
        work.init_refused(
            "second",
            "state root does not have the required secure mode",
        );
        chmod(&work.state, 0o700);
    }
    // An empty pre-made root with 0755 gets no skeleton either.
    let work = Work::new();
    std::fs::create_dir(&work.state).unwrap();
    chmod(&work.state, 0o755);
    work.init_refused("main", "state root does not have the required secure mode");
}

/// Make `dir` of the state root 0755: an `init` of handle `<handle>` is
/// then refused naming it, and changes nothing.
#[track_caller]
fn init_refused_for_loose(work: &Work, handle: &str, dir: &str) {
    chmod(&work.state.join(dir), 0o755);
    work.init_refused(
        handle,
        &format!("state-root {dir} does not have the required secure mode"),
    );
}

#[test]
fn state_root_subdirectories_without_mode_0700_are_refused() {
    for dir in bluetape_flow::store::layout::SUBDIRS {
        let (work, _) = Work::with_run();
        init_refused_for_loose(&work, "second", dir);
    }
}

#[test]
fn a_loose_subdirectory_in_a_partial_root_creates_no_skeleton() {
    // The root exists (0700) but holds only a 0755 `quarantine/`, the last
    // directory init would create: refusing must not leave runs/, handles/,
    // ... behind.
    for dir in ["quarantine", "handles", "reports"] {
        let work = Work::new();
        std::fs::create_dir(&work.state).unwrap();
        chmod(&work.state, 0o700);
        std::fs::create_dir(work.state.join(dir)).unwrap();
        init_refused_for_loose(&work, "main", dir);
    }
}

#[test]
fn symlinked_or_non_directory_subdirectories_are_refused() {
    for dir in ["runs", "handles", "quarantine"] {
        let (work, _) = Work::with_run();
        let elsewhere = work.base.join(format!("elsewhere-{dir}"));
        std::fs::rename(work.state.join(dir), &elsewhere).unwrap();
        symlink(&elsewhere, work.state.join(dir)).unwrap();
        work.init_refused("second", &format!("state-root {dir} must not be a symlink"));
    }
    let (work, _) = Work::with_run();
    std::fs::remove_dir(work.state.join("candidates")).unwrap();
    std::fs::write(work.state.join("candidates"), b"").unwrap();
    chmod(&work.state.join("candidates"), 0o600);
    work.init_refused("second", "state-root candidates is not a directory");
}

#[test]
fn state_root_owned_by_another_uid_is_refused_chown_when_root() {
    if is_root() {
        // As root: hand the directories to nobody (65534). The check compares
        // the owner uid explicitly, so root is refused too.
        for dir in ["", "handles", "runs"] {
            let (work, _) = Work::with_run();
            let path = work.state.join(dir);
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let kind = if dir.is_empty() {
                "state root".to_string()
            } else {
                format!("state-root {dir}")
            };
            work.init_refused(
                "second",
                &format!("{kind} must be owned by the current uid"),
            );
        }
    } else {
        // Not root: `/` is owned by root, so it is a foreign-uid state root
        // (and nothing could be created there anyway).
        let work = Work::new();
        let owner = PathBuf::from("/handles/bluetape-test.owner");
        let root = std::path::Path::new("/");
        let args = init_argv(root, "A", &work.repo, &owner, &["runtime"]);
        let out = work.flow.run(&args);
        expect_error(
            &out,
            2,
            "contract_error",
            "state root must be owned by the current uid",
            "/",
        );
    }
}

#[test]
fn owner_files_outside_handles_are_refused() {
    for (label, work) in both_roots() {
        let cases: Vec<(PathBuf, &str)> = vec![
            (
                work.state.join("x.owner"),
                "owner handle must be contained under state-root handles",
            ),
            (
                work.base.join("x.owner"),
                "owner handle must be contained under state-root handles",
            ),
            (
                std::env::temp_dir().join("bluetape-bad-input-x.owner"),
                "owner handle must be contained under state-root handles",
            ),
            (
                work.state.join("handles/../x.owner"),
                "owner handle must be contained under state-root handles",
            ),
            (
                work.state.join("handles/../runs/x.owner"),
                "owner handle must be contained under state-root handles",
            ),
            (
                work.state.join("handles"),
                "owner handle must be contained under state-root handles",
            ),
            (
                work.state.join("handles/sub/x.owner"),
                "owner handle must be a direct child of state-root handles",
            ),
            (
                work.state.join("handles/sub/deeper/x.owner"),
                "owner handle must be a direct child of state-root handles",
            ),
        ];
        for (owner, needle) in cases {
            let args = work.init_args(&owner, "A", &work.repo, &["runtime"]);
            work.refused(&args, 2, "contract_error", needle);
        }
        // `refused` watches the temp dir; this one lives beside it.
        let outside = std::env::temp_dir().join("bluetape-bad-input-x.owner");
        assert!(!outside.exists(), "{label}: {outside:?} created");
        // A relative owner path resolves against the working directory
        // (the temp dir), i.e. outside the state root.
        let args = work.init_args(
            std::path::Path::new("handles/x.owner"),
            "A",
            &work.repo,
            &["runtime"],
        );
        work.refused(
            &args,
            2,
            "contract_error",
            "owner handle must be contained under state-root handles",
        );
    }
}

#[test]
fn an_existing_or_dangling_owner_file_is_refused() {
    let (work, _) = Work::with_run();
    let handles = work.state.join("handles");
    // The handle the first init published.
    work.init_refused("main", "owner handle already exists");
    // Inside handles/: a dangling symlink, a symlink to the existing
    // handle, a directory. Nothing may be written through them.
    symlink(
        handles.join("nothing.owner"),
        handles.join("dangling.owner"),
    )
    .unwrap();
    symlink(handles.join("main.owner"), handles.join("alias.owner")).unwrap();
    std::fs::create_dir(handles.join("dir.owner")).unwrap();
    chmod(&handles.join("dir.owner"), 0o700);
    for name in ["dangling", "alias", "dir"] {
        work.init_refused(name, "owner handle already exists");
    }
    assert!(std::fs::symlink_metadata(handles.join("nothing.owner")).is_err());
    // A symlink leading out of handles/ (dangling or not) resolves outside
    // it, so it fails the containment rule first (as in the reference).
    symlink(work.base.join("nowhere"), handles.join("away.owner")).unwrap();
    std::fs::write(work.base.join("outside"), b"keep me").unwrap();
    symlink(work.base.join("outside"), handles.join("pointing.owner")).unwrap();
    for name in ["away", "pointing"] {
        work.init_refused(
            name,
            "owner handle must be contained under state-root handles",
        );
    }
    assert!(!work.base.join("nowhere").exists());
    assert_eq!(
        std::fs::read(work.base.join("outside")).unwrap(),
        b"keep me"
    );
}

#[test]
fn owner_file_stems_must_be_identifiers() {
    for (label, work) in both_roots() {
        let handles = work.state.join("handles");
        let mut names: Vec<OsString> = vec![
            ".owner".into(),
            "a b.owner".into(),
            "é.owner".into(),
            "-x.owner".into(),
            format!("{}.owner", "x".repeat(129)).into(),
        ];
        names.push(OsString::from_vec(b"\xff\xfe.owner".to_vec()));
        for name in names {
            let owner = handles.join(&name);
            let args = work.init_args(&owner, "A", &work.repo, &["runtime"]);
            work.refused(
                &args,
                2,
                "contract_error",
                "owner handle name must match the identifier contract",
            );
            assert!(!owner.exists(), "{label}: {name:?}");
        }
    }
}

#[test]
fn unknown_workflow_types_are_refused() {
    for (_, work) in both_roots() {
        for workflow in ["Z", "a", "", "AB", "A "] {
            let args = work.init_args(
                &work.state.join("handles/x.owner"),
                workflow,
                &work.repo,
                &["runtime"],
            );
            work.refused(&args, 2, "contract_error", "unknown workflow type");
        }
    }
}

#[test]
fn bad_component_ids_are_refused() {
    let long = "c".repeat(129);
    for (_, work) in both_roots() {
        for bad in ["../x", "a/b", "", ".", "..", ".hidden", "é", "x\n", &long] {
            let args = work.init_args(
                &work.state.join("handles/x.owner"),
                "A",
                &work.repo,
                &["runtime", bad],
            );
            work.refused(
                &args,
                2,
                "contract_error",
                "component_id must match the identifier contract",
            );
        }
        // Missing --component altogether is an argument error.
        let mut args = work.init_args(&work.state.join("handles/x.owner"), "A", &work.repo, &[]);
        args.truncate(9);
        work.refused(&args, 2, "contract_error", "--component");
    }
    // The boundary: 128 characters is an identifier.
    let work = Work::new();
    let ok = "c".repeat(128);
    let out = work.ok(&work.init_args(
        &work.state.join("handles/main.owner"),
        "A",
        &work.repo,
        &[&ok],
    ));
    assert_eq!(out["component_ids"], serde_json::json!([ok]));
}

#[test]
fn a_missing_or_non_directory_repo_root_is_refused() {
    for (_, work) in both_roots() {
        let owner = work.state.join("handles/x.owner");
        let missing = work.base.join("no-such-repo");
        let args = work.init_args(&owner, "A", &missing, &["runtime"]);
        work.refused(&args, 2, "contract_error", "No such file or directory");
        let file = work.base.join("repo-file");
        std::fs::write(&file, b"").unwrap();
        let args = work.init_args(&owner, "A", &file, &["runtime"]);
        work.refused(&args, 2, "contract_error", "repo_root must be a directory");
        // A repo root whose name is not UTF-8 cannot be recorded in JSON.
        let odd = work.base.join(OsString::from_vec(b"repo-\xff".to_vec()));
        std::fs::create_dir(&odd).unwrap();
        let args = work.init_args(&owner, "A", &odd, &["runtime"]);
        work.refused(&args, 2, "contract_error", "repo_root must be valid UTF-8");
        // A dangling symlink as repo root.
        let dangling = work.base.join("repo-link");
        symlink(work.base.join("gone"), &dangling).unwrap();
        let args = work.init_args(&owner, "A", &dangling, &["runtime"]);
        work.refused(&args, 2, "contract_error", "No such file or directory");
    }
}

#[test]
fn a_state_root_whose_parent_does_not_exist_is_refused() {
    let work = Work::new();
    let root = work.base.join("missing-parent/state");
    let owner = root.join("handles/main.owner");
    let args = init_argv(&root, "A", &work.repo, &owner, &["runtime"]);
    work.refused(&args, 2, "contract_error", "No such file or directory");
    assert!(!work.base.join("missing-parent").exists());
}

#[test]
fn a_refused_init_on_an_absent_root_creates_nothing_at_all() {
    // Every early refusal above is also checked by snapshot; this states the
    // property directly: the root itself is not created.
    let work = Work::new();
    let refusals: Vec<Vec<OsString>> = vec![
        work.init_args(
            &work.state.join("handles/main.owner"),
            "Z",
            &work.repo,
            &["runtime"],
        ),
        work.init_args(
            &work.state.join("handles/main.owner"),
            "A",
            &work.repo,
            &["../x"],
        ),
        work.init_args(
            &work.state.join("handles/main.owner"),
            "A",
            &work.base.join("nope"),
            &["runtime"],
        ),
        work.init_args(&work.state.join("x.owner"), "A", &work.repo, &["runtime"]),
        work.init_args(
            &work.state.join("handles/.owner"),
            "A",
            &work.repo,
            &["runtime"],
        ),
    ];
    for args in refusals {
        let out = work.flow.run(&args);
        assert_eq!(out.code, 2, "{out:?}");
        assert!(
            std::fs::symlink_metadata(&work.state).is_err(),
            "{args:?} created the state root"
        );
    }
}

#[test]
fn a_successful_init_leaves_no_staging_handle_and_exact_modes() {
    // The positive control for the refusals: the layout a good init leaves.
    use std::os::unix::fs::MetadataExt;
    let (work, run_id) = Work::with_run();
    let handles: Vec<String> = std::fs::read_dir(work.state.join("handles"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(handles, vec!["main.owner".to_string()]);
    for (path, mode) in [
        (work.state.clone(), 0o700),
        (work.state.join("handles/main.owner"), 0o600),
        (work.run_dir(&run_id), 0o700),
        (work.receipt(&run_id), 0o600),
        (work.manifest(&run_id), 0o600),
    ] {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, mode, "{}", path.display());
    }
}
