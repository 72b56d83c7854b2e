//! The per-state-root secret that authenticates our derived files (issue
//! 13): `<root>/derived.key`, 32 random bytes as hex, a regular 0600 file
//! created at init (or by the next mutation of a state root without one),
//! never printed, never in the receipt. `checkpoint.json` carries an
//! HMAC-SHA256 under it, so an edited checkpoint is detected and a full
//! replay is done instead of believing it.

use std::path::{Path, PathBuf};

use super::error::StoreResult;
use super::secure::{FILE_MODE, create_exclusive, open_regular, read_limited};

pub const KEY_FILE: &str = "derived.key";

fn key_path(root: &Path) -> PathBuf {
    root.join(KEY_FILE)
}

fn decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    if text.len() != 64 {
        return None;
    }
    hex::decode(text).ok()
}

/// The key, when a safe (regular, 0600, ours, no symlink) and well-formed
/// key file exists. Read-only commands use this and never create one.
pub fn read_key(root: &Path) -> Option<Vec<u8>> {
    let path = key_path(root);
    if !super::paths::exists_no_follow(&path) {
        return None;
    }
    let mut file = open_regular(&path, "derived-file key", Some(FILE_MODE)).ok()?;
    let bytes = read_limited(&mut file, &path, 256).ok()??;
    decode(&bytes)
}

/// The key, created first when the state root has none (exclusive create,
/// 0600, file and directory fsync). An unsafe or malformed key file is
/// left alone: `None`, and the derived files are then never believed.
pub fn ensure_key(root: &Path) -> StoreResult<Option<Vec<u8>>> {
    if let Some(key) = read_key(root) {
        return Ok(Some(key));
    }
    if super::paths::exists_no_follow(&key_path(root)) {
        return Ok(None);
    }
    let secret = format!(
        "{}{}\n",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    match create_exclusive(&key_path(root), secret.as_bytes()) {
        Ok(()) => Ok(read_key(root)),
        // A racing writer created it first: use theirs.
        Err(_) if super::paths::exists_no_follow(&key_path(root)) => Ok(read_key(root)),
        Err(e) => Err(e),
    }
}
