//! Creating a state root and a run directory (`init`): the skeleton of
//! reference-runtime §1.2 at 0700/0600, checked before anything is created,
//! and the rollback of a run directory whose creation failed.

use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::root::StateRoot;
use super::run::RunDir;
use super::secure::{atomic_write, create_dir_0700, ensure_secure_dir, open_secure_dir, sync_dir};

/// The directories of a state root (reference-runtime §1.2), in the order
/// `init` checks and creates them.
pub const SUBDIRS: [&str; 6] = [
    "runs",
    "reports",
    "candidates",
    "locks",
    "handles",
    "quarantine",
];
const CONFIG: &str =
    r#"{"runtime":"bluetape-workflow","schema_version":1,"workspace":"bluetape4k"}"#;

/// The file that keeps a new state root out of git, and its text: every
/// entry, itself included (as cargo's `target/` and a venv do).
pub const GITIGNORE: &str = ".gitignore";
pub const GITIGNORE_TEXT: &str =
    "# Made by bluetape-flow init: the state root holds owner handles and its MAC key.\n*\n";

/// Inside the state root, reached from the held root (see `store::root`).
fn exists(root: &StateRoot, path: &Path) -> bool {
    root.at(path).exists_no_follow()
}

/// A state root `init` may use: an existing secure directory, or a path
/// whose parent exists (it will be created). Nothing is created here.
pub fn check_state_root(root: &StateRoot) -> StoreResult<()> {
    if root.at(root).is_symlink() {
        return Err(StoreError::invalid("state root must not be a symlink"));
    }
    if exists(root, root) {
        open_secure_dir(root.at(root), "state root")?;
        return Ok(());
    }
    let parent = root.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        return Err(StoreError::io(
            &std::io::Error::from_raw_os_error(nix::libc::ENOENT),
            root,
        ));
    }
    Ok(())
}

/// Create the state root and its directories, validating existing ones
/// first so a refusal (say a 0755 `quarantine/`) leaves no half-built
/// skeleton; write `config.json` once.
pub fn ensure_skeleton(root: &StateRoot) -> StoreResult<()> {
    check_state_root(root)?;
    for name in SUBDIRS {
        let path = root.join(name);
        if exists(root, &path) {
            open_secure_dir(root.at(&path), &format!("state-root {name}"))?;
        }
    }
    ensure_secure_dir(root.at(root), "state root")?;
    for name in SUBDIRS {
        ensure_secure_dir(root.at(&root.join(name)), &format!("state-root {name}"))?;
    }
    let config = root.join("config.json");
    if !exists(root, &config) {
        // A new state root (its first init): git ignores all of it, since
        // it holds the owner handles and `derived.key` (cli-conventions §5,
        // DEVIATIONS 92). Written before config.json, so a root that has
        // one was given its .gitignore; an existing root is left as it is.
        let ignore = root.join(GITIGNORE);
        if !exists(root, &ignore) {
            atomic_write(&root.at(&ignore), GITIGNORE_TEXT.as_bytes())?;
        }
        atomic_write(&root.at(&config), format!("{CONFIG}\n").as_bytes())?;
    }
    Ok(())
}

/// The repo root a run pins: it must exist and be a directory; the result
/// is fully resolved.
pub fn resolve_repo_root(path: &Path) -> StoreResult<PathBuf> {
    let repo = std::fs::canonicalize(path).map_err(|e| StoreError::io(&e, path))?;
    if !repo.is_dir() {
        return Err(StoreError::invalid("repo_root must be a directory"));
    }
    Ok(repo)
}

impl RunDir {
    /// Create the run directory (0700, which must not exist yet) with its
    /// `lanes heartbeats locks` subdirectories.
    ///
    /// Once the directory exists it is ours: any later failure removes it
    /// again, so a failed `init` never leaves a half-made run behind.
    pub fn create(&self) -> StoreResult<()> {
        let root = &self.root;
        create_dir_0700(root.at(&self.dir))?;
        let result = (|| {
            sync_dir(root.at(&root.join("runs")))?;
            self.validate()?;
            for name in ["lanes", "heartbeats", "locks"] {
                ensure_secure_dir(root.at(&self.dir.join(name)), "run directory")?;
            }
            Ok(())
        })();
        if result.is_err() {
            self.discard();
        }
        result
    }

    /// Remove a run directory whose creation failed (best effort).
    pub fn discard(&self) {
        let _ = self.root.remove_tree(&self.dir);
        let _ = sync_dir(self.root.at(&self.root.join("runs")));
    }

    /// Write the frozen manifest snapshot (once, at init).
    pub fn write_manifest(&self, snapshot: &serde_json::Value) -> StoreResult<()> {
        self.write_cache(&self.manifest_path(), snapshot)
    }

    /// Whether any receipt file exists yet.
    pub fn has_receipt(&self) -> bool {
        exists(&self.root, &self.receipt_path())
    }
}
