//! The only module that touches the filesystem: state-root discovery and
//! layout, secure opens, atomic replaces with fsync, owner handles, the
//! directory lock and the acknowledged receipt head.

pub mod approval;
pub mod bundle;
pub mod caches;
pub mod digests;
pub mod discovery;
pub mod error;
pub mod git;
pub mod handle;
pub mod heads;
pub mod held;
pub mod input;
pub mod layout;
pub mod litter;
pub mod lock;
pub mod output;
pub mod pages;
pub mod paths;
#[cfg(feature = "mcp")]
pub mod private;
pub mod progress;
pub mod quarantine;
pub mod random;
pub mod reports;
pub mod root;
pub mod run;
pub mod scope;
pub mod secret;
pub mod secure;
pub mod tree;

pub use error::{StoreError, StoreResult};

/// What the store's unit tests share.
#[cfg(test)]
pub(crate) mod test_dirs {
    use std::os::unix::fs::PermissionsExt;

    /// A temp directory at 0700, as the state root's directories are.
    pub fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    /// The directory of a run `r` in a new state root (as [`private_dir`]),
    /// reached as a command reaches it.
    pub fn run_dir() -> (tempfile::TempDir, super::run::RunDir) {
        let dir = private_dir();
        let root = super::root::StateRoot::begin(dir.path());
        let run = super::run::RunDir::new(
            &root,
            &crate::receipt::primitives::RunId::parse("r").unwrap(),
        );
        std::fs::create_dir_all(&run.dir).unwrap();
        (dir, run)
    }
}
