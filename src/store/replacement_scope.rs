//! Write-scope canonicalisation against the run's pinned repo root
//! (reference-coordinator §1.7), as `lane-reassign` needs it for
//! `replacement_write_scope`.
//!
//! This is a minimal private copy for the replacement commands: the
//! lane-create family has its own canonicaliser (`store::scope`) and the two
//! should be unified once both are merged. The lexical rules live in
//! [`lexical_parts`] (pure, unit-tested); [`canonicalize_write_scope`] adds
//! the filesystem walk (symlinked components, containment under the root).

use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::paths::{expand_tilde, resolve_nonstrict};
use crate::receipt::primitives::char_len;
use crate::receipt::rules::Limits;

/// One scope entry split into path components the way Python's pathlib
/// does (empty and `.` components disappear), after the character rules.
/// A remaining `..` is traversal.
pub fn lexical_parts(scope: &Value, limits: &Limits) -> StoreResult<Vec<String>> {
    let text = match scope {
        Value::String(s)
            if !s.is_empty()
                && (char_len(s) as u64) <= limits.max_evidence_path_chars
                && !s.starts_with('/')
                && !s.contains(['\\', '*', '?', '['])
                && !s.chars().any(|c| (c as u32) < 32) =>
        {
            s
        }
        _ => {
            return Err(StoreError::invalid(
                "write scope must be canonical and relative",
            ));
        }
    };
    let parts: Vec<String> = text
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .map(str::to_string)
        .collect();
    if parts.iter().any(|part| part == "..") {
        return Err(StoreError::invalid(
            "write scope must not contain traversal",
        ));
    }
    Ok(parts)
}

/// The repo root pinned at init, resolved strictly: it must still exist and
/// be a directory.
pub fn resolve_repo_root(repo_root: &str, home: Option<&OsString>) -> StoreResult<PathBuf> {
    let path = expand_tilde(Path::new(repo_root), home);
    let root = std::fs::canonicalize(&path).map_err(|e| StoreError::io(&e, &path))?;
    if !root.is_dir() {
        return Err(StoreError::invalid("repo_root must be a directory"));
    }
    Ok(root)
}

/// Canonicalise a write scope (a JSON list of relative paths) under `root`
/// (already resolved by [`resolve_repo_root`]): at most `max_write_scopes`
/// entries, no traversal, no symlinked component, contained under the
/// root; the canonical POSIX relative form, duplicates dropped keeping the
/// first occurrence.
pub fn canonicalize_write_scope(
    root: &Path,
    scopes: &Value,
    limits: &Limits,
) -> StoreResult<Vec<String>> {
    let items = match scopes {
        Value::Array(items) if (items.len() as u64) <= limits.max_write_scopes => items,
        _ => return Err(StoreError::invalid("write_scope must be a bounded list")),
    };
    let mut canonical: Vec<String> = Vec::new();
    for scope in items {
        let parts = lexical_parts(scope, limits)?;
        reject_symlink_below(root, &parts)?;
        let candidate = parts
            .iter()
            .fold(root.to_path_buf(), |p, part| p.join(part));
        let resolved = resolve_nonstrict(&candidate, root);
        let relative = resolved
            .strip_prefix(root)
            .map_err(|_| StoreError::invalid("write scope escapes repo_root"))?;
        let normalized = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let normalized = if normalized.is_empty() {
            ".".to_string()
        } else {
            normalized
        };
        if !canonical.contains(&normalized) {
            canonical.push(normalized);
        }
    }
    Ok(canonical)
}

/// Walking from the root, no existing component may be a symlink.
fn reject_symlink_below(root: &Path, parts: &[String]) -> StoreResult<()> {
    let mut current = root.to_path_buf();
    for part in parts {
        current.push(part);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(StoreError::invalid("contained path includes a symlink"));
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(StoreError::io(&e, &current)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn pathlib_style_parts() {
        let parts = |s: &str| lexical_parts(&json!(s), &limits());
        assert_eq!(parts("src/").unwrap(), vec!["src"]);
        assert_eq!(parts("./docs").unwrap(), vec!["docs"]);
        assert_eq!(parts("a//b/./c").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(parts(".").unwrap(), Vec::<String>::new());
        for bad in ["../x", "a/../b", ".."] {
            assert_eq!(
                parts(bad),
                Err(StoreError::invalid(
                    "write scope must not contain traversal"
                ))
            );
        }
    }

    #[test]
    fn character_rules() {
        let long = "a".repeat(257);
        for bad in [
            json!(""),
            json!("/abs"),
            json!("a\\b"),
            json!("a*"),
            json!("a?"),
            json!("a[b"),
            json!("a\u{1f}b"),
            json!(long),
            json!(3),
            json!(null),
        ] {
            assert_eq!(
                lexical_parts(&bad, &limits()),
                Err(StoreError::invalid(
                    "write scope must be canonical and relative"
                )),
                "{bad}"
            );
        }
        // 256 code points (not bytes) is still fine; DEL is not a control
        // character for the reference.
        assert!(lexical_parts(&json!("é".repeat(256)), &limits()).is_ok());
        assert!(lexical_parts(&json!("a\u{7f}"), &limits()).is_ok());
    }

    #[test]
    fn canonical_form_and_containment() {
        let tmp = tempfile::tempdir().unwrap();
        let root = resolve_repo_root(tmp.path().to_str().unwrap(), None).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let canon = |v: Value| canonicalize_write_scope(&root, &v, &limits());
        assert_eq!(
            canon(json!(["src/", "./docs", "src"])).unwrap(),
            vec!["src", "docs"]
        );
        assert_eq!(canon(json!([])).unwrap(), Vec::<String>::new());
        assert_eq!(canon(json!(["."])).unwrap(), vec!["."]);
        assert_eq!(
            canon(json!(["link/x"])),
            Err(StoreError::invalid("contained path includes a symlink"))
        );
        assert_eq!(
            canon(json!(["link"])),
            Err(StoreError::invalid("contained path includes a symlink"))
        );
        assert_eq!(
            canon(json!("src")),
            Err(StoreError::invalid("write_scope must be a bounded list"))
        );
        let many: Vec<String> = (0..33).map(|i| format!("d{i}")).collect();
        assert_eq!(
            canon(json!(many)),
            Err(StoreError::invalid("write_scope must be a bounded list"))
        );
    }

    #[test]
    fn the_root_must_exist_and_be_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("gone");
        let error = resolve_repo_root(missing.to_str().unwrap(), None).unwrap_err();
        assert!(matches!(error, StoreError::Io(_)), "{error:?}");
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            resolve_repo_root(file.to_str().unwrap(), None),
            Err(StoreError::invalid("repo_root must be a directory"))
        );
    }
}
