//! Bound report files under `<root>/reports/`: 0600, written once with
//! their final bytes (a temporary file hard-linked into place, so no
//! partial report is ever visible and an existing one is never replaced).
//! `reports/` and its files are reached from the command's held state root
//! (`store::root`), never through a symlink.

use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::held::Place;
use super::quarantine::file_identity;
use super::root::StateRoot;
use super::secure::{
    FILE_MODE, create_exclusive, ensure_secure_dir, open_regular, open_secure_dir, read_limited,
    sync_dir,
};

/// `<root>/reports`.
pub fn reports_dir(root: &Path) -> PathBuf {
    root.join("reports")
}

/// An existing `reports/` directory must be a secure one (a missing one is
/// created when a report is written).
pub fn check_reports_dir(root: &StateRoot) -> StoreResult<()> {
    let dir = reports_dir(root);
    if root.at(&dir).exists_no_follow() {
        open_secure_dir(root.at(&dir), "state-root reports")?;
    }
    Ok(())
}

/// What is at a report path before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFile {
    Absent,
    /// A 0600 file with exactly the report's bytes (an orphan of an earlier
    /// attempt, or a concurrent writer's).
    Identical,
    /// Something with other bytes.
    Differs,
}

/// Inspect the report path: an existing entry must be a 0600 regular file
/// (else a contract error) and is compared byte for byte. An existing
/// `reports/` directory must be secure; a missing one holds nothing.
pub fn check_report_file(root: &StateRoot, name: &str, bytes: &[u8]) -> StoreResult<ReportFile> {
    let dir = reports_dir(root);
    if !root.at(&dir).exists_no_follow() {
        return Ok(ReportFile::Absent);
    }
    open_secure_dir(root.at(&dir), "state-root reports")?;
    let path = dir.join(name);
    if !root.at(&path).exists_no_follow() {
        return Ok(ReportFile::Absent);
    }
    let mut file = open_regular(&root.at(&path), "report", Some(FILE_MODE))?;
    let found = read_limited(&mut file, &path, bytes.len() as u64)?;
    Ok(if found.as_deref() == Some(bytes) {
        ReportFile::Identical
    } else {
        ReportFile::Differs
    })
}

/// Write the report unless an identical one is there. Returns whether this
/// call created it (a failure later must remove it again).
pub fn write_report(root: &StateRoot, name: &str, bytes: &[u8]) -> StoreResult<bool> {
    match check_report_file(root, name, bytes)? {
        ReportFile::Identical => return Ok(false),
        ReportFile::Differs => {
            return Err(StoreError::busy("orphan report content differs"));
        }
        ReportFile::Absent => {}
    }
    let dir = reports_dir(root);
    ensure_secure_dir(root.at(&dir), "state-root reports")?;
    let target = dir.join(name);
    let temp = dir.join(crate::store::random::temp_name(name));
    create_exclusive(&root.at(&temp), bytes)?;
    let linked = root
        .at(&temp)
        .place()?
        .hard_link_to(&root.at(&target).place()?);
    let _ = root.remove_file(&temp);
    match linked {
        Ok(()) => {
            sync_dir(root.at(&dir))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            match check_report_file(root, name, bytes)? {
                ReportFile::Identical => Ok(false),
                _ => Err(StoreError::busy("orphan report content differs")),
            }
        }
        Err(e) => Err(StoreError::io(&e, &target)),
    }
}

/// SHA-256 of a bound report file, or `None` when it is missing, a symlink
/// or not a regular file.
pub fn bound_report_checksum(root: &StateRoot, relative: &str) -> Option<String> {
    file_identity(root.at(&root.join(relative)), "report", None)
        .ok()
        .map(|(hash, _)| hash)
}

/// Remove a report this invocation wrote (best effort).
pub fn remove_report(root: &StateRoot, name: &str) {
    let dir = reports_dir(root);
    if root.remove_file(&dir.join(name)).is_ok() {
        let _ = sync_dir(root.at(&dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use crate::store::test_dirs::private_dir as root;

    #[test]
    fn written_once_0600_and_idempotent() {
        let dir = root();
        let state = StateRoot::begin(dir.path());
        assert_eq!(
            check_report_file(&state, "r.json", b"{}\n").unwrap(),
            ReportFile::Absent
        );
        assert!(write_report(&state, "r.json", b"{}\n").unwrap());
        let path = dir.path().join("reports/r.json");
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
        assert!(!write_report(&state, "r.json", b"{}\n").unwrap());
        assert_eq!(
            write_report(&state, "r.json", b"{\"a\":1}\n"),
            Err(StoreError::busy("orphan report content differs"))
        );
        assert_eq!(
            bound_report_checksum(&state, "reports/r.json").unwrap(),
            crate::receipt::canonical::sha256_hex(b"{}\n")
        );
        // No temporary files are left behind.
        assert_eq!(
            std::fs::read_dir(dir.path().join("reports"))
                .unwrap()
                .count(),
            1
        );
        remove_report(&state, "r.json");
        assert!(bound_report_checksum(&state, "reports/r.json").is_none());
    }

    #[test]
    fn loose_modes_and_symlinks_are_refused() {
        let dir = root();
        let state = StateRoot::begin(dir.path());
        assert!(write_report(&state, "r.json", b"{}\n").unwrap());
        let path = dir.path().join("reports/r.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            check_report_file(&state, "r.json", b"{}\n"),
            Err(StoreError::Insecure(_))
        ));
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        assert!(matches!(
            check_report_file(&state, "r.json", b"{}\n"),
            Err(StoreError::Invalid(_))
        ));
        assert!(bound_report_checksum(&state, "reports/r.json").is_none());
    }
}
