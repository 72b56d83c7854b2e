//! Files of the transparency commands (contracts/transparency.md):
//! stored signed heads `runs/<id>/heads/<N>.<key hash>.note`, key files,
//! proof files, and finding one receipt line by its sequence.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::error::{StoreError, StoreResult};
use super::held::Place;
use super::root::InRoot;
use super::run::RunDir;
use super::secure::{FILE_MODE, atomic_write, create_exclusive, open_regular, read_limited};

/// No key, note or proof file of ours comes near this.
pub const MAX_SMALL_FILE: u64 = 64 * 1024;

/// One stored signed head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHead {
    pub size: u64,
    pub key_hash: String,
    pub path: PathBuf,
}

impl StoredHead {
    /// The path relative to the state root (`runs/<id>/heads/<file>`).
    pub fn relative(&self, dir: &RunDir) -> String {
        self.path
            .strip_prefix(&dir.root)
            .unwrap_or(&self.path)
            .to_string_lossy()
            .into_owned()
    }
}

fn head_name(name: &str) -> Option<(u64, String)> {
    let stem = name.strip_suffix(".note")?;
    let (size, key_hash) = stem.split_once('.')?;
    let canonical =
        !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit()) && !size.starts_with('0');
    let hex = key_hash.len() == 8
        && key_hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (canonical && hex).then(|| Some((size.parse().ok()?, key_hash.to_string())))?
}

impl RunDir {
    pub fn heads_dir(&self) -> PathBuf {
        self.dir.join("heads")
    }

    /// Every stored head, smallest size first (names that are not
    /// `<N>.<8 hex>.note` are not heads: temp files, litter).
    pub fn stored_heads(&self) -> StoreResult<Vec<StoredHead>> {
        let dir = self.heads_dir();
        let at = self.place(&dir)?;
        let meta = match at.symlink_metadata() {
            Ok(Some(meta)) => meta,
            Ok(None) => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&e, &dir)),
        };
        if !meta.is_dir() {
            return Err(StoreError::invalid(
                "run heads directory must be a directory",
            ));
        }
        let mut heads = Vec::new();
        let names = at
            .open_dir()
            .and_then(|d| d.entries())
            .map_err(|e| StoreError::io(&e, &dir))?;
        for name in names {
            let name = name.to_string_lossy().into_owned();
            if let Some((size, key_hash)) = head_name(&name) {
                heads.push(StoredHead {
                    size,
                    key_hash,
                    path: dir.join(&name),
                });
            }
        }
        heads.sort_by(|a, b| (a.size, &a.key_hash).cmp(&(b.size, &b.key_hash)));
        Ok(heads)
    }

    /// Store a signed head (temp + rename, 0600, in a 0700 `heads/`); an
    /// identical file already there is kept as it is.
    pub fn store_head(&self, size: u64, key_hash: &str, note: &[u8]) -> StoreResult<StoredHead> {
        let dir = self.heads_dir();
        self.ensure_subdir(&dir, "run heads directory")?;
        let path = dir.join(format!("{size}.{key_hash}.note"));
        let at = self.place(&path)?;
        if read_small(&at, Some(FILE_MODE)).ok().as_deref() != Some(note) {
            atomic_write(&at, note)?;
        }
        Ok(StoredHead {
            size,
            key_hash: key_hash.to_string(),
            path,
        })
    }
}

/// A small regular file (no symlink followed), with `mode` checked
/// (owner and exact mode) when given.
pub fn read_small(at: &(impl Place + ?Sized), mode: Option<u32>) -> StoreResult<Vec<u8>> {
    let at = at.place()?;
    let path = &at.path();
    let mut file = open_regular(&at, "file", mode)?;
    read_limited(&mut file, path, MAX_SMALL_FILE)?.ok_or_else(|| {
        StoreError::invalid(format!(
            "{} is larger than {MAX_SMALL_FILE} bytes",
            path.display()
        ))
    })
}

/// Read a signer key file: a regular file (never a symlink), owned by us,
/// mode exactly 0600.
pub fn read_signer_key(at: InRoot<'_>) -> StoreResult<Vec<u8>> {
    // A mode or owner, an OS error, keeps its kind (and so its hint).
    read_small(&at, Some(FILE_MODE)).map_err(|e| e.refused("signer key file"))
}

/// Write a new file at 0600: never over an existing file, never through a
/// symlink (an exclusive create), synced with its directory.
pub fn create_new_file(at: InRoot<'_>, bytes: &[u8], what: &str) -> StoreResult<()> {
    if at.exists_no_follow() {
        return Err(StoreError::invalid(format!(
            "{what} {} already exists; it is never replaced",
            at.path().display()
        )));
    }
    create_exclusive(&at, bytes)
}

impl RunDir {
    /// Receipt line `sequence` (without its LF) within the first `end`
    /// bytes, found by binary search over line starts: `sequence_of` reads
    /// a line's sequence (lines are in sequence order). O(log n) reads.
    pub fn find_line(
        &self,
        sequence: u64,
        end: u64,
        sequence_of: impl Fn(&[u8]) -> Option<u64>,
    ) -> StoreResult<Option<Vec<u8>>> {
        let path = self.receipt_path();
        let mut file = open_regular(&self.root.at(&path), "receipt", None)?;
        let mut read_line_at = |offset: u64| -> StoreResult<Vec<u8>> {
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| StoreError::io(&e, &path))?;
            let mut reader = BufReader::new((&mut file).take(end - offset));
            let mut line = Vec::new();
            reader
                .read_until(b'\n', &mut line)
                .map_err(|e| StoreError::io(&e, &path))?;
            Ok(line)
        };
        // `lo` is a line start whose sequence is at most the target; the
        // target's line starts before `hi`.
        let (mut lo, mut hi) = (0u64, end);
        loop {
            if hi.saturating_sub(lo) <= 64 * 1024 {
                let mut offset = lo;
                while offset < end {
                    let line = read_line_at(offset)?;
                    if line.last() != Some(&b'\n') {
                        return Ok(None);
                    }
                    let body = &line[..line.len() - 1];
                    match sequence_of(body) {
                        Some(s) if s == sequence => return Ok(Some(body.to_vec())),
                        Some(s) if s > sequence => return Ok(None),
                        Some(_) => offset += line.len() as u64,
                        None => return Ok(None),
                    }
                }
                return Ok(None);
            }
            let mid = lo + (hi - lo) / 2;
            // The first line start at or after `mid` (mid > lo >= 0).
            let partial = read_line_at(mid - 1)?;
            if partial.last() != Some(&b'\n') {
                hi = mid;
                continue;
            }
            let start = mid - 1 + partial.len() as u64;
            if start >= hi {
                hi = mid;
                continue;
            }
            let line = read_line_at(start)?;
            if line.last() != Some(&b'\n') {
                hi = mid;
                continue;
            }
            match sequence_of(&line[..line.len() - 1]) {
                Some(s) if s == sequence => return Ok(Some(line[..line.len() - 1].to_vec())),
                Some(s) if s < sequence => lo = start,
                Some(_) => hi = start,
                None => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_names_are_strict() {
        assert_eq!(head_name("12.0123abcd.note"), Some((12, "0123abcd".into())));
        for bad in [
            "012.0123abcd.note",
            "12.0123ABCD.note",
            "12.0123abc.note",
            ".12.0123abcd.note.x.tmp",
            "12.0123abcd",
            "x.0123abcd.note",
        ] {
            assert_eq!(head_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn find_line_finds_every_line_by_binary_search() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(
            &crate::store::root::StateRoot::begin(dir.path()),
            &crate::receipt::primitives::RunId::parse("r").unwrap(),
        );
        std::fs::create_dir_all(&run.dir).unwrap();
        let mut text = Vec::new();
        for i in 1..=3000u64 {
            // Lines of varying length, some long.
            let pad = "x".repeat((i as usize * 37) % 300);
            text.extend_from_slice(format!("{i} {pad}\n").as_bytes());
        }
        std::fs::write(run.receipt_path(), &text).unwrap();
        let seq = |line: &[u8]| {
            std::str::from_utf8(line)
                .ok()?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        };
        let end = text.len() as u64;
        for i in (1..=3000u64).step_by(7).chain([1, 2, 2999, 3000]) {
            let line = run.find_line(i, end, seq).unwrap().unwrap();
            assert_eq!(seq(&line), Some(i));
        }
        assert_eq!(run.find_line(3001, end, seq).unwrap(), None);
        assert_eq!(run.find_line(0, end, seq).unwrap(), None);
    }
}
