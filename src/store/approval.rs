//! Files of the approval gate (our extension): the frozen policy file
//! `runs/<id>/approval-policy.json` (0600, written once at init) and the
//! approver's credential file named by `BLUETAPE_APPROVER_FILE`
//! (`{"approver","token"}`, 0600, owned by the user, kept wherever the
//! approver keeps it). The token is a secret: only its SHA-256 fingerprint
//! leaves this module.

use serde_json::Value;
use std::path::PathBuf;

use super::error::{StoreError, StoreResult};
use super::root::InRoot;
use super::run::RunDir;
use super::secure::{FILE_MODE, create_exclusive, open_regular, read_limited};
use crate::receipt::canonical;

pub use crate::receipt::vocab::POLICY_FILE;

/// Largest policy file we read (a canonical policy is under 512 bytes).
const MAX_POLICY_BYTES: u64 = 64 * 1024;
/// Largest credential file we read.
const MAX_CREDENTIAL_BYTES: u64 = 4096;

pub fn policy_path(run: &RunDir) -> PathBuf {
    run.dir.join(POLICY_FILE)
}

/// Whether the run has a policy file at all (anything at its path).
pub fn policy_file_exists(run: &RunDir) -> bool {
    run.place(&policy_path(run)).is_ok_and(|at| at.exists())
}

/// Write the frozen policy (exclusive create, 0600, fsync of file and
/// directory). It never exists before: a policy is written once, at init.
pub fn write_policy_file(run: &RunDir, bytes: &[u8]) -> StoreResult<()> {
    create_exclusive(&run.place(&policy_path(run))?, bytes)
}

/// The policy file's bytes through a no-follow descriptor: a regular 0600
/// file owned by the user. `Err` says, for people, why it cannot be trusted.
pub fn read_policy_file(run: &RunDir) -> Result<Vec<u8>, String> {
    let path = policy_path(run);
    let at = run.place(&path).map_err(|e| e.message().to_string())?;
    if !at.exists() {
        return Err("approval policy file is missing".into());
    }
    let mut file = open_regular(&at, "approval policy file", Some(FILE_MODE))
        .map_err(|e| e.message().to_string())?;
    read_limited(&mut file, &path, MAX_POLICY_BYTES)
        .map_err(|e| e.message().to_string())?
        .ok_or_else(|| "approval policy file is too large".to_string())
}

/// A readable approver credential: who it names and its token's
/// fingerprint (the token itself never leaves this module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApproverCredential {
    pub approver: String,
    pub fingerprint: String,
}

/// Read an approver credential: a regular non-symlink file owned by the
/// user with mode 0600, holding exactly `{"approver": str, "token": str}`.
pub fn read_credential(at: InRoot<'_>) -> StoreResult<ApproverCredential> {
    let path = at.path();
    if std::fs::symlink_metadata(path).is_err() {
        return Err(StoreError::invalid("approver credential file is missing"));
    }
    let mut file = open_regular(&at, "approver credential", Some(FILE_MODE))?;
    let bytes = read_limited(&mut file, path, MAX_CREDENTIAL_BYTES)?
        .ok_or_else(|| StoreError::invalid("approver credential is too large"))?;
    let invalid = || StoreError::invalid("approver credential must be {\"approver\", \"token\"}");
    let value: Value = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(invalid)?;
    let Value::Object(map) = value else {
        return Err(invalid());
    };
    match (map.len(), map.get("approver"), map.get("token")) {
        (2, Some(Value::String(approver)), Some(Value::String(token))) if !token.is_empty() => {
            Ok(ApproverCredential {
                approver: approver.clone(),
                fingerprint: canonical::sha256_hex(token.as_bytes()),
            })
        }
        _ => Err(invalid()),
    }
}

/// Largest approval signature file we read (an Ed25519 SSH signature is
/// under 400 bytes).
const MAX_SIGNATURE_BYTES: u64 = 8 * 1024;

/// Read `run-approve --signature FILE`: a regular, non-symlink file (not a
/// secret, so any mode). `Err` says why, for people.
pub fn read_signature_file(at: InRoot<'_>) -> Result<Vec<u8>, String> {
    let path = at.path();
    if std::fs::symlink_metadata(path).is_err() {
        return Err("signature file is missing".into());
    }
    let mut file =
        open_regular(&at, "signature file", None).map_err(|e| e.message().to_string())?;
    read_limited(&mut file, path, MAX_SIGNATURE_BYTES)
        .map_err(|e| e.message().to_string())?
        .ok_or_else(|| "signature file is too large".to_string())
}

/// Write the approval statement to a new file (never replacing one).
pub fn write_statement(at: InRoot<'_>, bytes: &[u8]) -> StoreResult<()> {
    create_exclusive(&at, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::root::StateRoot;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn credentials_are_strict_about_files_and_shape() {
        let dir = tempfile::tempdir().unwrap();
        // The approver keeps the credential outside the state root.
        let root = StateRoot::begin(&dir.path().join("state"));
        let good = dir.path().join("alice.cred");
        write(&good, r#"{"approver":"alice","token":"s3cret"}"#, 0o600);
        assert_eq!(
            read_credential(root.at(&good)),
            Ok(ApproverCredential {
                approver: "alice".into(),
                fingerprint: canonical::sha256_hex(b"s3cret"),
            })
        );
        let loose = dir.path().join("loose.cred");
        write(&loose, r#"{"approver":"alice","token":"s3cret"}"#, 0o644);
        assert_eq!(
            read_credential(root.at(&loose)),
            Err(StoreError::Insecure(
                "approver credential does not have the required secure mode".into()
            ))
        );
        let link = dir.path().join("link.cred");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert_eq!(
            read_credential(root.at(&link)),
            Err(StoreError::invalid(
                "approver credential must not be a symlink"
            ))
        );
        assert_eq!(
            read_credential(root.at(&dir.path().join("none"))),
            Err(StoreError::invalid("approver credential file is missing"))
        );
        for bad in [
            r#"{"approver":"alice"}"#,
            r#"{"approver":"alice","token":""}"#,
            r#"{"approver":"alice","token":"x","extra":1}"#,
            r#"{"approver":1,"token":"x"}"#,
            r#"["alice","x"]"#,
            "not json",
        ] {
            let path = dir.path().join("bad.cred");
            let _ = std::fs::remove_file(&path);
            write(&path, bad, 0o600);
            assert!(read_credential(root.at(&path)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_policy_file_is_read_securely() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(
            &StateRoot::begin(dir.path()),
            &crate::receipt::primitives::RunId::parse("r1").unwrap(),
        );
        std::fs::create_dir_all(&run.dir).unwrap();
        assert_eq!(
            read_policy_file(&run),
            Err("approval policy file is missing".into())
        );
        write_policy_file(&run, b"{}\n").unwrap();
        assert_eq!(read_policy_file(&run), Ok(b"{}\n".to_vec()));
        let mode = std::fs::metadata(policy_path(&run))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Written once: a second write is refused.
        assert!(write_policy_file(&run, b"{}\n").is_err());
        std::fs::set_permissions(policy_path(&run), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(read_policy_file(&run).is_err());
    }
}
