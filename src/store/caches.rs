//! The cache-path pre-check of a Phase 2 append (reference-runtime §7.2
//! step 15): before the receipt line is written, every derived file the
//! mutation will rewrite afterwards must be a safe target. Checking after
//! the append would be too late to refuse: the event would already be
//! durable while its caches silently stayed behind (a symlinked `run.json`
//! was never followed, but never updated either).

use std::path::Path;

use super::error::{StoreError, StoreResult};
use super::paths::is_symlink;
use super::run::RunDir;
use super::secure::{DIR_MODE, FILE_MODE, check_metadata, ensure_secure_dir};

/// An existing cache file must be a non-symlink regular file, ours, 0600.
fn check_cache_file(path: &Path, kind: &str) -> StoreResult<()> {
    if is_symlink(path) {
        return Err(StoreError::invalid(format!("{kind} must not be a symlink")));
    }
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(meta) if !meta.is_file() => Err(StoreError::invalid(format!(
            "{kind} does not have the required secure mode"
        ))),
        Ok(meta) => check_metadata(&meta, kind, FILE_MODE),
    }
}

impl RunDir {
    /// `run.json`, `lanes/` (created 0700 when missing), the caches of
    /// `lane_ids`, and our `checkpoint.json` and `receipt-head.json` must be
    /// safe to replace.
    pub fn prepare_cache_paths<'a>(
        &self,
        lane_ids: impl IntoIterator<Item = &'a String>,
    ) -> StoreResult<()> {
        check_cache_file(&self.run_cache_path(), "run cache")?;
        check_cache_file(&self.checkpoint_path(), "run checkpoint")?;
        // The head is rewritten after the append too: a head that cannot be
        // replaced would silently stop protecting the receipt's length.
        check_cache_file(&self.head_path(), "acknowledged receipt head record")?;
        let lanes = self.lanes_dir();
        if is_symlink(&lanes) {
            return Err(StoreError::invalid("state path contains a symlink"));
        }
        if let Ok(meta) = std::fs::symlink_metadata(&lanes) {
            if !meta.is_dir() {
                return Err(StoreError::invalid(
                    "secure directory path is not a directory",
                ));
            }
            check_metadata(&meta, "directory", DIR_MODE)?;
        } else {
            ensure_secure_dir(&lanes, "directory")?;
        }
        for lane_id in lane_ids {
            check_cache_file(&lanes.join(format!("{lane_id}.json")), "lane cache")?;
        }
        Ok(())
    }
}
