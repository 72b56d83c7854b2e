//! Private input files for one call of the MCP server: each JSON value a
//! tool receives becomes a 0600 file (created exclusively, never through a
//! symlink) in a fresh 0700 directory of the system temp dir, outside the
//! state root, which is removed when the call ends. No other user can read
//! or swap what the model sent; the command reads it as it reads any
//! `--evidence` file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::secure::{DIR_MODE, Durability, create_exclusive_with, open_secure_dir};

/// The private directory of one call; removed on drop.
pub struct PrivateInputs {
    dir: tempfile::TempDir,
    count: usize,
}

impl PrivateInputs {
    /// A new 0700 directory under the temp dir; refused if that would be
    /// inside `state_root` (the temp dir is the caller's environment).
    pub fn new(state_root: Option<&Path>) -> StoreResult<PrivateInputs> {
        let base = std::env::temp_dir();
        // Created 0700 (mkdir's mode; the umask can only narrow it), then
        // set to exactly 0700 and checked on the descriptor.
        let dir = tempfile::Builder::new()
            .prefix("bluetape-mcp-")
            .permissions(std::fs::Permissions::from_mode(DIR_MODE))
            .tempdir_in(&base)
            .map_err(|e| StoreError::io(&e, &base))?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(DIR_MODE))
            .map_err(|e| StoreError::io(&e, dir.path()))?;
        open_secure_dir(dir.path(), "MCP input directory")?;
        if let Some(root) = state_root {
            let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
            let here = std::fs::canonicalize(dir.path()).unwrap_or_else(|_| dir.path().into());
            if here.starts_with(&root) {
                return Err(StoreError::invalid(
                    "the temp dir is inside the state root; set TMPDIR elsewhere",
                ));
            }
        }
        Ok(PrivateInputs { dir, count: 0 })
    }

    /// Write `bytes` to a new 0600 file named after `flag`; its path.
    pub fn put(&mut self, flag: &str, bytes: &[u8]) -> StoreResult<PathBuf> {
        self.count += 1;
        let path = self.dir.path().join(format!("{}-{flag}.json", self.count));
        // Read once, right away, by this process: no fsync needed.
        create_exclusive_with(&path, bytes, Durability::None)?;
        Ok(path)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Where `resume` puts the new handle: beside the current one (which
/// resume deletes), `<stem>-r<n>.owner` for the first n that is free.
pub fn next_handle(current: &Path) -> PathBuf {
    let stem = current
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "owner".into());
    let base = stem
        .rsplit_once("-r")
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(stem.as_str(), |(base, _)| base)
        .to_string();
    (1..)
        .map(|n| current.with_file_name(format!("{base}-r{n}.owner")))
        .find(|candidate| std::fs::symlink_metadata(candidate).is_err())
        .unwrap_or_else(|| current.with_extension("next"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_private_and_go_away() {
        let mut inputs = PrivateInputs::new(None).unwrap();
        let dir = inputs.path().to_path_buf();
        let file = inputs.put("evidence", b"[]").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read(&file).unwrap(), b"[]");
        drop(inputs);
        assert!(!dir.exists());
    }

    #[test]
    fn the_next_handle_is_numbered_beside_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main.owner");
        assert_eq!(next_handle(&main), dir.path().join("main-r1.owner"));
        std::fs::write(dir.path().join("main-r1.owner"), "").unwrap();
        assert_eq!(next_handle(&main), dir.path().join("main-r2.owner"));
        let r1 = dir.path().join("main-r1.owner");
        assert_eq!(next_handle(&r1), dir.path().join("main-r2.owner"));
    }

    #[test]
    fn never_inside_the_state_root() {
        let temp = std::env::temp_dir();
        assert!(PrivateInputs::new(Some(&temp)).is_err());
    }
}
