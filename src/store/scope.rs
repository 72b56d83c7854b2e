//! Write-scope canonicalisation against the run's pinned repo root
//! (reference-coordinator §1.7, reference-runtime §6.11), used for a lane's
//! `write_scope` and for the `changed_paths` of `lane-complete`.
//!
//! The entry rules and the pathlib-style splitting are pure and live in
//! [`crate::receipt::scope`]; this module adds what needs the filesystem:
//! the repo root must still exist, and no existing component below it may
//! be a symlink.

use serde_json::Value;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::paths::resolve_nonstrict;
use crate::receipt::rules::Limits;
use crate::receipt::scope::{ESCAPES, SYMLINK, entry_components, join_components, scope_entries};

/// Canonicalise a write-scope list against the pinned repo root. Entries are
/// checked one at a time (lexical rules, then the symlink walk), in order,
/// so the first bad entry decides the message, as in the reference.
pub fn canonicalize_write_scope(
    repo_root: &Path,
    scopes: &Value,
    limits: &Limits,
) -> StoreResult<Vec<String>> {
    let root = std::fs::canonicalize(repo_root).map_err(|e| StoreError::io(&e, repo_root))?;
    let meta = std::fs::metadata(&root).map_err(|e| StoreError::io(&e, &root))?;
    if !meta.is_dir() {
        return Err(StoreError::invalid("repo_root must be a directory"));
    }
    let entries = scope_entries(scopes, limits).map_err(StoreError::invalid)?;
    let mut canonical: Vec<String> = Vec::new();
    for entry in entries {
        let components =
            entry_components(entry, limits.max_evidence_path_chars).map_err(StoreError::invalid)?;
        let candidate = reject_symlink_below(&root, &components)?;
        let resolved = resolve_nonstrict(&candidate, &root);
        let relative = resolved
            .strip_prefix(&root)
            .map_err(|_| StoreError::invalid(ESCAPES))?;
        let parts: Vec<&str> = relative
            .iter()
            .map(|part| part.to_str().ok_or_else(|| StoreError::invalid(ESCAPES)))
            .collect::<StoreResult<_>>()?;
        let normalized = join_components(&parts);
        if !canonical.contains(&normalized) {
            canonical.push(normalized);
        }
    }
    Ok(canonical)
}

/// Walk `root/c1/c2/...` one component at a time and refuse any existing
/// component that is a symlink. A missing component (or one under a
/// non-directory) is fine, as with pathlib's `is_symlink`; any other OS
/// error (name too long, permission denied) is reported.
fn reject_symlink_below(root: &Path, components: &[&str]) -> StoreResult<PathBuf> {
    let mut current = root.to_path_buf();
    for component in components {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(StoreError::invalid(SYMLINK));
            }
            Ok(_) => {}
            Err(e) if e.raw_os_error().is_some_and(not_a_symlink_errno) => {}
            Err(e) => return Err(StoreError::io(&e, &current)),
        }
    }
    Ok(current)
}

/// The errno values pathlib's `is_symlink` treats as "not a symlink".
fn not_a_symlink_errno(code: i32) -> bool {
    use nix::errno::Errno;
    matches!(
        Errno::from_raw(code),
        Errno::ENOENT | Errno::ENOTDIR | Errno::EBADF | Errno::ELOOP
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn symlinks_below_the_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        std::os::unix::fs::symlink(dir.path(), repo.join("out")).unwrap();
        std::os::unix::fs::symlink(repo.join("src"), repo.join("src/deep/loop")).unwrap();
        std::fs::write(repo.join("file"), b"x").unwrap();
        let canon = |scopes: Value| canonicalize_write_scope(&repo, &scopes, &limits());
        assert_eq!(
            canon(json!(["src/", "./docs", "src"])),
            Ok(vec!["src".to_string(), "docs".to_string()])
        );
        for bad in ["out", "out/x", "./out/", "src/deep/loop", "src/deep/loop/x"] {
            assert_eq!(
                canon(json!([bad])),
                Err(StoreError::invalid(SYMLINK)),
                "{bad}"
            );
        }
        // Missing components and components under a file are not symlinks.
        assert_eq!(
            canon(json!(["missing/out", "file/x"])),
            Ok(vec!["missing/out".to_string(), "file/x".to_string()])
        );
        // Entries are checked in order: a symlink before a bad shape wins.
        assert_eq!(
            canon(json!(["out", "/abs"])),
            Err(StoreError::invalid(SYMLINK))
        );
        // A symlinked repo root is resolved first (the pinned root is real).
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&repo, &alias).unwrap();
        assert_eq!(
            canonicalize_write_scope(&alias, &json!(["src"]), &limits()),
            Ok(vec!["src".to_string()])
        );
    }

    #[test]
    fn the_repo_root_must_exist_and_be_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let error = canonicalize_write_scope(&gone, &json!(["src"]), &limits()).unwrap_err();
        assert!(
            matches!(&error, StoreError::Io(f) if f.kind == std::io::ErrorKind::NotFound)
                && error.message().ends_with("(ENOENT)"),
            "{error:?}"
        );
        // The root is checked before the list.
        assert!(matches!(
            canonicalize_write_scope(&gone, &json!("not a list"), &limits()),
            Err(StoreError::Io(_))
        ));
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            canonicalize_write_scope(&file, &json!(["src"]), &limits()),
            Err(StoreError::invalid("repo_root must be a directory"))
        );
    }

    #[test]
    fn os_errors_other_than_missing_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        // One component longer than NAME_MAX: lstat fails with ENAMETOOLONG.
        let long = "a".repeat(256);
        assert!(matches!(
            canonicalize_write_scope(dir.path(), &json!([long]), &limits()),
            Err(StoreError::Io(f)) if f.errno == Some(36)
        ));
    }
}
