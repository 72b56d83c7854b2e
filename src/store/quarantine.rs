//! The quarantine: immutable 0600 byte copies of damaged receipts under
//! `<root>/quarantine/`, named by run and content hash. A copy is written
//! once (exclusive, no-follow, fsynced with its directory) and verified by
//! reading it back; it is never rewritten.

use rustix::fs::OFlags;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::held::Place;
use super::root::{InRoot, StateRoot};
use super::secure::{FILE_MODE, ensure_secure_dir, open_regular, sync_dir};

/// `<root>/quarantine`.
pub fn quarantine_dir(root: &Path) -> PathBuf {
    root.join("quarantine")
}

/// What [`quarantine_copy`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuarantineCopy {
    /// This call wrote the copy (a failure later must remove it again).
    Created,
    /// An identical copy was already there (a retry); it is kept.
    AlreadyPresent,
    /// A copy with that name exists but holds other bytes.
    Differs,
    /// The copy we wrote does not hold the expected bytes (the source
    /// changed while we copied); it was removed again.
    CopyMismatch,
}

/// SHA-256 and size of an open file's bytes, streamed.
fn identity_of(file: &mut File, path: &Path) -> StoreResult<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    for_each_chunk(file, path, |chunk| {
        hasher.update(chunk);
        size += chunk.len() as u64;
        Ok(())
    })?;
    Ok((hex::encode(hasher.finalize()), size))
}

/// Stream `file` to its end in 64 KiB chunks (a read a signal interrupted
/// is retried).
fn for_each_chunk(
    file: &mut File,
    path: &Path,
    mut each: impl FnMut(&[u8]) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buffer) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(StoreError::io(&e, path)),
        };
        if n == 0 {
            return Ok(());
        }
        each(&buffer[..n])?;
    }
}

/// SHA-256 and size of a regular, non-symlink file; with `mode`, its owner
/// and exact mode are checked too.
pub fn file_identity(at: InRoot<'_>, kind: &str, mode: Option<u32>) -> StoreResult<(String, u64)> {
    let mut file = open_regular(&at, kind, mode)?;
    identity_of(&mut file, at.path())
}

/// Copy `source` byte for byte to `<root>/quarantine/<name>` unless that
/// copy exists. The directory is created 0700 when missing. A missing
/// source is copied as the empty file it is diagnosed as (decisions.md 17).
pub fn quarantine_copy(
    root: &StateRoot,
    name: &str,
    source: &Path,
    expected: (&str, u64),
) -> StoreResult<QuarantineCopy> {
    let dir = quarantine_dir(root);
    ensure_secure_dir(root.at(&dir), "state-root quarantine")?;
    let target = dir.join(name);
    if root.at(&target).exists_no_follow() {
        let found = file_identity(root.at(&target), "quarantine receipt", Some(FILE_MODE))?;
        return Ok(if (found.0.as_str(), found.1) == expected {
            QuarantineCopy::AlreadyPresent
        } else {
            QuarantineCopy::Differs
        });
    }
    let mut input = match open_regular(&root.at(source), "receipt", None) {
        Ok(file) => Some(file),
        Err(StoreError::Io(_)) if !root.at(source).exists_no_follow() => None,
        Err(e) => return Err(e),
    };
    // Exclusive and no-follow, in the `quarantine/` reached from the held
    // state root.
    let mut output = root
        .at(&target)
        .place()?
        .open(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, FILE_MODE)
        .map_err(|e| StoreError::io(&e, &target))?;
    let written = (|| {
        output
            .set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| StoreError::io(&e, &target))?;
        if let Some(input) = input.as_mut() {
            copy_all(input, source, &mut output, &target)?;
        }
        output.sync_all().map_err(|e| StoreError::io(&e, &target))?;
        sync_dir(root.at(&dir))?;
        // Verify what is on disk now, not what we meant to write.
        file_identity(root.at(&target), "quarantine receipt", Some(FILE_MODE))
    })();
    match written {
        Ok(found) if (found.0.as_str(), found.1) == expected => Ok(QuarantineCopy::Created),
        Ok(_) => {
            remove_quarantine(root.at(&target));
            Ok(QuarantineCopy::CopyMismatch)
        }
        Err(e) => {
            remove_quarantine(root.at(&target));
            Err(e)
        }
    }
}

fn copy_all(input: &mut File, source: &Path, output: &mut File, target: &Path) -> StoreResult<()> {
    for_each_chunk(input, source, |chunk| {
        output
            .write_all(chunk)
            .map_err(|e| StoreError::io(&e, target))
    })
}

/// Remove a quarantine copy this invocation created (best effort), so a
/// failed recovery leaves no orphan behind (decisions.md 11).
/// The state-root-relative path of a quarantine copy, as outputs and
/// receipts record it.
pub fn relative_quarantine_path(name: &str) -> String {
    format!("quarantine/{name}")
}

/// Remove the quarantine copy `name` of the state root `root` (best
/// effort: a recovery that failed after copying).
pub fn remove_quarantine_copy(root: &StateRoot, name: &str) {
    remove_quarantine(root.at(&quarantine_dir(root).join(name)));
}

pub fn remove_quarantine(target: InRoot<'_>) {
    let root = target.root();
    if root.remove_file(target.path()).is_ok()
        && let Some(dir) = target.path().parent()
    {
        let _ = sync_dir(root.at(dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    use crate::store::test_dirs::private_dir as root;

    /// Quarantine `source` as `r.receipt.jsonl`, diagnosed as holding
    /// `diagnosed`.
    fn copy_as(state: &StateRoot, source: &Path, diagnosed: &[u8]) -> StoreResult<QuarantineCopy> {
        let hash = crate::receipt::canonical::sha256_hex(diagnosed);
        quarantine_copy(
            state,
            "r.receipt.jsonl",
            source,
            (&hash, diagnosed.len() as u64),
        )
    }

    /// A private state root with, beside it, a receipt holding `bytes`.
    fn receipt_of(bytes: &[u8]) -> (tempfile::TempDir, StateRoot, PathBuf) {
        let dir = root();
        let state = StateRoot::begin(dir.path());
        let source = dir.path().join("receipt.jsonl");
        std::fs::write(&source, bytes).unwrap();
        (dir, state, source)
    }

    #[test]
    fn copies_once_then_recognises_the_copy() {
        let (dir, state, source) = receipt_of(b"damaged\n");
        let copy = copy_as(&state, &source, b"damaged\n").unwrap();
        assert_eq!(copy, QuarantineCopy::Created);
        let target = dir.path().join("quarantine/r.receipt.jsonl");
        assert_eq!(std::fs::read(&target).unwrap(), b"damaged\n");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o7777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.path().join("quarantine"))
                .unwrap()
                .mode()
                & 0o7777,
            0o700
        );
        let again = copy_as(&state, &source, b"damaged\n").unwrap();
        assert_eq!(again, QuarantineCopy::AlreadyPresent);
        assert_eq!(
            copy_as(&state, &source, b"other\n").unwrap(),
            QuarantineCopy::Differs
        );
        // A copy with a loose mode is refused, not trusted.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            copy_as(&state, &source, b"damaged\n"),
            Err(StoreError::Insecure(_))
        ));
    }

    #[test]
    fn a_source_that_is_not_what_was_diagnosed_leaves_nothing() {
        let (dir, state, source) = receipt_of(b"changed\n");
        let copy = copy_as(&state, &source, b"damaged\n").unwrap();
        assert_eq!(copy, QuarantineCopy::CopyMismatch);
        assert!(!dir.path().join("quarantine/r.receipt.jsonl").exists());
    }

    #[test]
    fn a_missing_source_is_the_empty_receipt() {
        let dir = root();
        let state = StateRoot::begin(dir.path());
        let copy = copy_as(&state, &dir.path().join("gone"), b"").unwrap();
        assert_eq!(copy, QuarantineCopy::Created);
        assert_eq!(
            std::fs::read(dir.path().join("quarantine/r.receipt.jsonl")).unwrap(),
            b""
        );
    }

    #[test]
    fn a_symlinked_source_is_refused() {
        let dir = root();
        let state = StateRoot::begin(dir.path());
        let real = dir.path().join("real");
        std::fs::write(&real, b"x").unwrap();
        let link = dir.path().join("receipt.jsonl");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(copy_as(&state, &link, b"x").is_err());
        assert!(!dir.path().join("quarantine/r.receipt.jsonl").exists());
    }
}
