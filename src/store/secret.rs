//! The per-state-root secret that authenticates our derived files (issue
//! 13): `<root>/derived.key`, 32 random bytes as hex, a regular 0600 file
//! created at init (or by the next mutation of a state root without one),
//! never printed, never in the receipt. `checkpoint.json` carries an
//! HMAC-SHA256 under it, so an edited checkpoint is detected and a full
//! replay is done instead of believing it.

use std::path::{Path, PathBuf};

use super::error::StoreResult;
use super::root::StateRoot;
use super::secure::{FILE_MODE, create_exclusive, open_regular_meta, read_sized};

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
pub fn read_key(root: &StateRoot) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    if let Some(key) = root.remembered_key() {
        return Some(key);
    }
    let path = key_path(root);
    let stamp_of =
        |meta: &std::fs::Metadata| (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec());
    let mut known = KNOWN.lock().ok()?;
    // In another command of the same process (the MCP server) one `lstat`:
    // the key read before from the same file (device, inode, change time)
    // is not read again. A first read takes its stamp from the descriptor.
    if let Some((seen, key)) = known.get(&path) {
        let meta = match root.place_inside(&path) {
            Ok(Some(at)) => at.symlink_metadata().ok()??,
            _ => std::fs::symlink_metadata(&path).ok()?,
        };
        if *seen == stamp_of(&meta) {
            root.remember_key(key);
            return Some(key.clone());
        }
    }
    let (mut file, meta) =
        open_regular_meta(&root.at(&path), "derived-file key", Some(FILE_MODE)).ok()?;
    let stamp = stamp_of(&meta);
    let bytes = read_sized(&mut file, &path, meta.len(), 256).ok()??;
    let key = decode(&bytes)?;
    root.remember_key(&key);
    known.insert(path, (stamp, key.clone()));
    Some(key)
}

type KeyStamp = (u64, u64, i64, i64);

/// Keys read by this process, by file, with the stamp they were read at.
static KNOWN: std::sync::Mutex<std::collections::BTreeMap<PathBuf, (KeyStamp, Vec<u8>)>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The key, created first when the state root has none (exclusive create,
/// 0600, file and directory fsync). An unsafe or malformed key file is
/// left alone: `None`, and the derived files are then never believed.
pub fn ensure_key(root: &StateRoot) -> StoreResult<Option<Vec<u8>>> {
    if let Some(key) = read_key(root) {
        return Ok(Some(key));
    }
    if root.at(&key_path(root)).exists_no_follow() {
        return Ok(None);
    }
    let secret = format!(
        "{}{}\n",
        crate::store::random::uuid4().simple(),
        crate::store::random::uuid4().simple()
    );
    match create_exclusive(&root.at(&key_path(root)), secret.as_bytes()) {
        Ok(()) => Ok(read_key(root)),
        // A racing writer created it first: use theirs.
        Err(_) if root.at(&key_path(root)).exists_no_follow() => Ok(read_key(root)),
        Err(e) => Err(e),
    }
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

fn mac_of(key: &[u8], value: &serde_json::Value) -> HmacSha256 {
    use hmac::Mac;
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(&crate::receipt::canonical::to_vec(value));
    mac
}

/// HMAC-SHA256 (hex) of a derived record's canonical JSON (without its
/// own `mac` key), under the state root's key.
pub fn mac_hex(key: &[u8], value: &serde_json::Value) -> String {
    use hmac::Mac;
    hex::encode(mac_of(key, value).finalize().into_bytes())
}

/// Constant-time check of a claimed [`mac_hex`].
pub fn mac_matches(key: &[u8], value: &serde_json::Value, claimed: &str) -> bool {
    use hmac::Mac;
    // Only the lowercase form we write: `hex` also takes uppercase, which
    // would let a changed byte of the record pass.
    if !claimed
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return false;
    }
    hex::decode(claimed).is_ok_and(|tag| mac_of(key, value).verify_slice(&tag).is_ok())
}
