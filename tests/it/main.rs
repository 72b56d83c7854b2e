//! The one integration test binary of bluetape-flow. Every area is a module
//! below; all of them share the test bed in `bed/` (a temp state root and
//! repo, the real binary in a cleared, pinned environment, typed decoding of
//! the JSON envelope, builders for the common inputs, tree snapshots and
//! fixture copies). Snapshots of human-facing output live in
//! `tests/it/snapshots/` (insta); reference fixtures are data in
//! `tests/fixtures/`.
//!
//! Run one area: `cargo test --test it approvals::`.

mod bed;

mod agent_run;
mod approvals;
mod bad_input;
mod bundle;
mod checkpoint;
mod checkpoint_honesty;
mod commit_path;
mod completion;
mod concurrency;
mod defaults;
mod durability;
mod guards;
mod hardening;
mod held_root;
mod help;
mod interop;
mod io_errors;
mod lanes;
mod ledger;
mod lifecycle;
mod liveness;
#[cfg(feature = "mcp")]
mod mcp;
mod namespaces;
mod otel;
mod owner_fencing;
mod parallel_verify;
mod path_swap;
mod properties;
mod real_cause;
mod recovery;
mod reliability;
mod replacement;
mod reports;
mod resume;
mod scope_narrowing;
mod state_root;
mod teach;
mod topology;
mod transparency;
mod trust_caches;
mod views;

/// jj's guard: a `.rs` file under `tests/` that no `mod` declaration
/// reaches is never compiled, so its tests would silently not run. Every
/// file must be `tests/it/main.rs` or declared by the `mod.rs`/`main.rs`
/// of its directory (`mod name;` for `name.rs` or `name/mod.rs`).
#[test]
fn every_test_file_is_part_of_the_binary() {
    use std::path::{Path, PathBuf};
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    fn declares(parent: &Path, name: &str) -> bool {
        let text = std::fs::read_to_string(parent).unwrap_or_default();
        text.lines()
            .map(str::trim)
            .any(|l| l == format!("mod {name};") || l == format!("pub mod {name};"))
    }
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let it = tests.join("it");
    let mut files = Vec::new();
    rust_files(&tests, &mut files);
    files.sort();
    let mut orphans = Vec::new();
    for file in &files {
        if *file == it.join("main.rs") {
            continue;
        }
        let dir = file.parent().unwrap();
        let stem = file.file_stem().unwrap().to_str().unwrap();
        // `x/mod.rs` is declared as `mod x;` by the directory above it;
        // `x.rs` by the `mod.rs` (or `main.rs`) beside it.
        let (name, siblings) = if stem == "mod" {
            (
                dir.file_name().unwrap().to_str().unwrap(),
                dir.parent().unwrap(),
            )
        } else {
            (stem, dir)
        };
        let parent = if siblings == it {
            it.join("main.rs")
        } else {
            siblings.join("mod.rs")
        };
        if !file.starts_with(&it) || !declares(&parent, name) {
            orphans.push(file.strip_prefix(&tests).unwrap().display().to_string());
        }
    }
    assert!(
        orphans.is_empty(),
        "test files outside the `it` binary (add a `mod` line or move them under tests/it/): {orphans:?}"
    );
    assert!(files.len() > 30, "the guard found too few files: {files:?}");
}
