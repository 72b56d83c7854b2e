//! The cache-path pre-check of a Phase 2 append (reference-runtime §7.2
//! step 15): before the receipt line is written, every derived file the
//! mutation will rewrite afterwards must be a safe target. Checking after
//! the append would be too late to refuse: the event would already be
//! durable while its caches silently stayed behind (a symlinked `run.json`
//! was never followed, but never updated either).

use std::path::Path;

use super::error::{StoreError, StoreResult};
use super::run::RunDir;
use super::secure::{DIR_MODE, FILE_MODE, check_metadata};

impl RunDir {
    /// An existing cache file must be a non-symlink regular file, ours, 0600.
    fn check_cache_file(&self, path: &Path, kind: &str) -> StoreResult<()> {
        check_cache_entry(&self.place(path)?, kind)
    }
}

/// [`RunDir::check_cache_file`] of an entry already placed.
fn check_cache_entry(at: &super::held::Loc, kind: &str) -> StoreResult<()> {
    match at.symlink_metadata() {
        Err(_) | Ok(None) => Ok(()),
        Ok(Some(meta)) if meta.file_type().is_symlink() => {
            Err(StoreError::invalid(format!("{kind} must not be a symlink")))
        }
        Ok(Some(meta)) if !meta.is_file() => Err(StoreError::invalid(format!(
            "{kind} does not have the required secure mode"
        ))),
        Ok(Some(meta)) => check_metadata(&meta, kind, FILE_MODE),
    }
}

impl RunDir {
    /// `lanes/` (0700), created inside the held run directory when missing.
    pub fn ensure_lanes_dir(&self) -> StoreResult<()> {
        self.ensure_subdir(&self.lanes_dir(), "run lanes directory")
    }

    /// A 0700 directory `path` of the run, created inside the held run
    /// directory when missing (never through a symlink, never recursive).
    pub fn ensure_subdir(&self, path: &Path, kind: &str) -> StoreResult<()> {
        let lanes = self.place(path)?;
        match lanes.mkdir(DIR_MODE) {
            Ok(()) => {
                let dir = lanes
                    .open_dir()
                    .map_err(|e| StoreError::io(&e, &lanes.path()))?;
                dir.set_mode(DIR_MODE)
                    .map_err(|e| StoreError::io(&e, &lanes.path()))?;
                lanes
                    .sync_dir()
                    .map_err(|e| StoreError::io(&e, &self.dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io(&e, &lanes.path())),
        }
        super::secure::open_secure_dir_at(&lanes, kind)?;
        Ok(())
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
        self.check_cache_file(&self.run_cache_path(), "run cache")?;
        self.check_cache_file(&self.checkpoint_path(), "run checkpoint")?;
        // The head is rewritten after the append too: a head that cannot be
        // replaced would silently stop protecting the receipt's length.
        self.check_cache_file(&self.head_path(), "acknowledged receipt head record")?;
        let lanes = self.lanes_dir();
        let lanes_at = self.place(&lanes)?;
        match lanes_at.symlink_metadata() {
            Ok(Some(meta)) if meta.file_type().is_symlink() => {
                return Err(StoreError::invalid("state path contains a symlink"));
            }
            Ok(Some(meta)) if !meta.is_dir() => {
                return Err(StoreError::invalid(
                    "secure directory path is not a directory",
                ));
            }
            Ok(Some(meta)) => check_metadata(&meta, "directory", DIR_MODE)?,
            _ => self.ensure_lanes_dir()?,
        }
        // Each lane file by its two-component name from the run directory
        // (`lanes` was just seen to be a directory, no symlink): no open of
        // `lanes/` for a check. A swap racing this only misdirects the
        // check; the writes go through held descriptors.
        for lane_id in lane_ids {
            let file = lanes_at.sibling(Path::new("lanes").join(format!("{lane_id}.json")));
            check_cache_entry(&file, "lane cache")?;
        }
        Ok(())
    }
}
