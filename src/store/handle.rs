//! Owner handle files (`{"epoch","run_id","token"}`, 0600). The token is a
//! secret: it is only ever written to the handle file; the receipt and every
//! output carry its SHA-256 fingerprint.

use serde_json::{Value, json};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::held::Place;
use super::paths::{resolve_nonstrict, stem};
use super::root::{InRoot, StateRoot};
use super::secure::{
    FILE_MODE, check_secure_dir, create_exclusive, open_regular, open_regular_meta,
    open_secure_dir, read_limited, read_sized,
};
use crate::receipt::canonical;
use crate::receipt::primitives::{as_int, is_identifier};

/// A secret owner token. Debug and Display never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnerToken(String);

impl OwnerToken {
    /// A fresh uuid4 hex token (122 random bits), like the reference.
    pub fn generate() -> OwnerToken {
        OwnerToken(crate::store::random::uuid4().simple().to_string())
    }

    /// A token with a known value (tests, reproducing a reference run).
    pub fn from_secret(secret: &str) -> OwnerToken {
        OwnerToken(secret.to_string())
    }

    /// Lowercase hex SHA-256 of the token's UTF-8 bytes.
    pub fn fingerprint(&self) -> String {
        canonical::sha256_hex(self.0.as_bytes())
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<secret>)")
    }
}

/// What a handle file proves: which run, which epoch, which fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerHandle {
    pub run_id: String,
    pub epoch: u64,
    pub fingerprint: String,
}

/// The canonical bytes of a handle file.
fn handle_bytes(run_id: &str, epoch: u64, token: &OwnerToken) -> Vec<u8> {
    let mut bytes = canonical::to_vec(&json!({"epoch": epoch, "run_id": run_id, "token": token.0}));
    bytes.push(b'\n');
    bytes
}

/// Create a new handle file exclusively (no-follow, 0600, fsynced).
/// Where `init` stages a new run's owner handle before publishing it
/// (`handles/init-<suffix>.owner`; `litter` knows the same name).
pub fn staging_handle_path(root: &StateRoot, suffix: &str) -> PathBuf {
    root.join("handles").join(format!("init-{suffix}.owner"))
}

pub fn create_handle(
    at: InRoot<'_>,
    run_id: &str,
    epoch: u64,
    token: &OwnerToken,
) -> StoreResult<OwnerHandle> {
    let path = at.path();
    if !stem(path).is_some_and(|s| is_identifier(&s)) {
        return Err(StoreError::invalid(
            "owner handle name must match the identifier contract",
        ));
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    open_secure_dir(at.root().at(parent), "owner handle directory")?;
    if at.exists_no_follow() {
        return Err(StoreError::invalid("owner handle already exists"));
    }
    create_exclusive(&at, &handle_bytes(run_id, epoch, token)).map_err(|e| match e {
        e if e.io_kind() == Some(std::io::ErrorKind::AlreadyExists) => {
            StoreError::invalid("owner handle already exists")
        }
        other => other,
    })?;
    Ok(OwnerHandle {
        run_id: run_id.to_string(),
        epoch,
        fingerprint: token.fingerprint(),
    })
}

/// Read and validate a handle file. With `run_id`, it must belong to that run.
pub fn read_handle(at: InRoot<'_>, run_id: Option<&str>) -> StoreResult<OwnerHandle> {
    let path = at.path();
    let (mut file, meta) = open_regular_meta(&at, "owner handle", Some(FILE_MODE))?;
    // A second name for the handle is a second place its secret lives,
    // outside the containment rule (a deviation: the reference accepts it).
    if meta.nlink() != 1 {
        return Err(StoreError::invalid(
            "owner handle must not have other hard links",
        ));
    }
    let bytes = read_sized(&mut file, path, meta.len(), 4096)?
        .ok_or_else(|| StoreError::invalid("owner handle is invalid"))?;
    let value: Value = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| StoreError::invalid("owner handle is invalid"))?;
    let Value::Object(map) = value else {
        return Err(StoreError::invalid("owner handle fields are invalid"));
    };
    if map.len() != 3
        || !["epoch", "run_id", "token"]
            .iter()
            .all(|k| map.contains_key(*k))
    {
        return Err(StoreError::invalid("owner handle fields are invalid"));
    }
    let handle_run = map["run_id"].as_str().filter(|r| is_identifier(r));
    let Some(handle_run) = handle_run else {
        return Err(StoreError::invalid(
            "run_id must match the identifier contract",
        ));
    };
    if run_id.is_some_and(|r| r != handle_run) {
        return Err(StoreError::invalid("owner handle belongs to another run"));
    }
    let epoch = match as_int(&map["epoch"]) {
        Some(e) if e >= 1 && e <= u64::MAX as i128 => e as u64,
        _ => {
            return Err(StoreError::invalid(
                "owner epoch must be a positive integer",
            ));
        }
    };
    let token = match &map["token"] {
        Value::String(t) if !t.is_empty() => OwnerToken(t.clone()),
        _ => return Err(StoreError::invalid("owner handle token is invalid")),
    };
    Ok(OwnerHandle {
        run_id: handle_run.to_string(),
        epoch,
        fingerprint: token.fingerprint(),
    })
}

/// The contained-read rule: the handle is a direct child of
/// `<root>/handles` and its stem is an identifier. Returns the handle's
/// path inside the state root (`<root>/handles/<name>`), through which it
/// is then reached from the held root, whatever path the user gave.
pub fn check_contained(root: &StateRoot, path: &Path, cwd: &Path) -> StoreResult<PathBuf> {
    let handles = root.join("handles");
    check_secure_dir(root.at(&handles), "state-root handles")?;
    let parent = path.parent().unwrap_or(Path::new("."));
    // The command's root is resolved and `handles` was just opened as a
    // directory, not a symlink: `<root>/handles` is its real path, and a
    // parent spelled exactly so (no `.`, `..`) resolves to it without a
    // lookup per component.
    let spelled_exactly = super::paths::absolute(parent, cwd) == handles
        && parent.components().all(|c| {
            matches!(
                c,
                std::path::Component::RootDir | std::path::Component::Normal(_)
            )
        });
    if !spelled_exactly && resolve_nonstrict(parent, cwd) != handles {
        return Err(StoreError::invalid(
            "owner handle must be a direct child of state-root handles",
        ));
    }
    if !stem(path).is_some_and(|s| is_identifier(&s)) {
        return Err(StoreError::invalid(
            "owner handle name must match the identifier contract",
        ));
    }
    Ok(in_root(root, path))
}

/// `<root>/handles/<file name of path>`: a contained handle, named from
/// the state root (so it is reached from the held root).
fn in_root(root: &Path, path: &Path) -> PathBuf {
    root.join("handles")
        .join(path.file_name().unwrap_or_default())
}

/// The init rule for a handle that does not exist yet: contained under
/// `<root>/handles` (which may not exist yet), a direct child, an
/// identifier stem, and nothing (not even a dangling symlink) at the path.
pub fn check_new_handle_path(root: &StateRoot, path: &Path, cwd: &Path) -> StoreResult<PathBuf> {
    let handles = resolve_nonstrict(&root.join("handles"), cwd);
    let absolute = resolve_nonstrict(path, cwd);
    if !absolute.starts_with(&handles) || absolute == handles {
        return Err(StoreError::invalid(
            "owner handle must be contained under state-root handles",
        ));
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    if resolve_nonstrict(parent, cwd) != handles {
        return Err(StoreError::invalid(
            "owner handle must be a direct child of state-root handles",
        ));
    }
    if !stem(path).is_some_and(|s| is_identifier(&s)) {
        return Err(StoreError::invalid(
            "owner handle name must match the identifier contract",
        ));
    }
    if root.at(path).is_symlink() || root.at(path).exists_no_follow() {
        return Err(StoreError::invalid("owner handle already exists"));
    }
    Ok(in_root(root, path))
}

/// Publish a staged handle under its requested name: a hard link never
/// follows a symlink and fails if anything is already there; then the
/// staging name goes and the directory is synced.
pub fn publish_handle(root: &StateRoot, staging: &Path, target: &Path) -> StoreResult<()> {
    let linked = match (root.at(staging).place(), root.at(target).place()) {
        (Ok(from), Ok(to)) => from.hard_link_to(&to),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StoreError::invalid("owner handle already exists"));
        }
        Err(e) => return Err(StoreError::io(&e, target)),
    }
    let _ = root.remove_file(staging);
    let synced = super::secure::sync_dir(root.at(target.parent().unwrap_or(Path::new("."))));
    if synced.is_err() {
        // A failed init must not leave a handle to a run it removes.
        let _ = root.remove_file(target);
    }
    synced
}

/// Remove a staged handle that was never published (best effort).
pub fn discard_handle(root: &StateRoot, staging: &Path) {
    let _ = root.remove_file(staging);
}

/// The JSON held by a secure (0600, owned, not a symlink) handle file, or
/// `None` when it is not JSON at all; no field is checked.
pub fn read_handle_json(at: InRoot<'_>, kind: &str) -> StoreResult<Option<Value>> {
    let mut file = open_regular(&at, kind, Some(FILE_MODE))?;
    let bytes = read_limited(&mut file, at.path(), 4096)?;
    Ok(bytes
        .as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| serde_json::from_str(t).ok()))
}

/// The rule for the handle a run is handed to (`resume --new-owner-file`,
/// `recovery-run-create --owner-file`): a direct child of the secure
/// `<root>/handles` with an identifier stem, never a symlink, and — unless
/// `allow_existing` (a recovery retry) — not there yet.
pub fn check_new_owner_path(
    root: &StateRoot,
    path: &Path,
    cwd: &Path,
    allow_existing: bool,
) -> StoreResult<PathBuf> {
    let contained = check_contained(root, path, cwd)?;
    let at = root.at(&contained);
    if at.is_symlink() || (!allow_existing && at.exists_no_follow()) {
        return Err(StoreError::invalid("owner handle already exists"));
    }
    Ok(contained)
}

/// True when both paths name the same existing file (the current handle
/// given again as the new one).
pub fn same_file(root: &StateRoot, a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = |p: &Path| match root.at(p).place() {
        Ok(at) => at
            .open(rustix::fs::OFlags::PATH, 0)
            .and_then(|f| f.metadata()),
        Err(_) => std::fs::metadata(p),
    };
    match (meta(a), meta(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Remove a handle file if it still proves exactly `expected` (same run,
/// epoch and fingerprint), then sync its directory. Anything else at the
/// path is left alone. Returns whether it was removed.
pub fn remove_handle_if(at: InRoot<'_>, expected: &OwnerHandle) -> bool {
    let (root, path) = (at.root(), at.path());
    match read_handle(at, Some(&expected.run_id)) {
        Ok(found) if found == *expected => {}
        _ => return false,
    }
    if root.remove_file(path).is_err() {
        return false;
    }
    let _ = super::secure::sync_dir(root.at(path.parent().unwrap_or(Path::new("."))));
    true
}

/// Give the handle at `from` the name `to` in the same directory (the MCP
/// server's stable handle path after a `resume`, DEVIATIONS 94): a hard
/// link that never replaces a file at `to` (linkat does not follow a
/// symlink at `from`), then `from` removed and the directory fsynced. A
/// crash in between leaves both names on the one handle, never none.
pub fn rename_handle(root: &StateRoot, from: &Path, to: &Path) -> StoreResult<()> {
    if from.parent() != to.parent() || root.at(from).is_symlink() {
        return Err(StoreError::invalid(
            "owner handle must be renamed within its directory",
        ));
    }
    std::fs::hard_link(from, to).map_err(|e| StoreError::io(&e, to))?;
    std::fs::remove_file(from).map_err(|e| StoreError::io(&e, from))?;
    super::secure::sync_dir(root.at(to.parent().unwrap_or(Path::new("."))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_matches_the_reference_example() {
        let token = OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097");
        assert_eq!(
            token.fingerprint(),
            "1667382387d683aa7f84c7768d11afa5b4860bc339135eb2a88f6cfb7ffaf11e"
        );
        assert!(!format!("{token:?}").contains("5b12"));
    }

    #[test]
    fn handle_bytes_match_the_reference_example() {
        let token = OwnerToken::from_secret("5b12fa0b8bfd4c589bbd6c3637d25097");
        let bytes = handle_bytes("20261130T020310Z-728df1d6", 1, &token);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"epoch\":1,\"run_id\":\"20261130T020310Z-728df1d6\",\"token\":\"5b12fa0b8bfd4c589bbd6c3637d25097\"}\n"
        );
    }
}
