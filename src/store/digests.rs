//! The checkpoint's liveness-digest store: every lane's liveness evidence
//! digests, kept beside `checkpoint.json` so that a mutation's cost does not
//! grow with a heartbeat-heavy receipt (the replayed state holds one digest
//! per heartbeat; loading them all would be O(receipt)).
//!
//! One file, `checkpoint-digests.idx`, derived from the receipt and rebuilt
//! from a full replay whenever anything about it does not match the
//! checkpoint:
//! - a 4096-byte header, then an open-addressing hash table of 32-byte keys
//!   (SHA-256 of `lane_id NUL digest`) answering "has lane L recorded
//!   liveness digest D" with one or two `pread`s;
//! - after the table, the same pairs as `lane_id SP digest LF` lines in
//!   first-seen order (the log), read only when the full lists are needed
//!   (refreshing the derived caches). One file, so a heartbeat opens one.
//!
//! Crash safety: the file changes only after the receipt append, and is
//! used only with a checkpoint whose receipt stamp matches, which is written
//! after it; so a crash in between always means a full replay and a fresh
//! table. The header's entry count must also equal the checkpoint's.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{StoreError, StoreResult};
use super::secure::{FILE_MODE, atomic_write, check_metadata, sync_dir};

/// `02`: the log follows the table in the same file (`01` kept it in a
/// file of its own, `checkpoint-digests.log`, which a rewrite removes).
const MAGIC: &[u8; 8] = b"BTDIGX02";
const HEADER_BYTES: u64 = 4096;
const KEY_BYTES: u64 = 32;
const MIN_SLOTS: u64 = 1024;
/// Slots read per probe step (one page).
const PROBE_SLOTS: u64 = 128;

/// One liveness digest of one lane.
pub type LaneDigest = (String, String);

fn key(lane_id: &str, digest: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(lane_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(digest.as_bytes());
    hasher.finalize().into()
}

fn home_slot(key: &[u8; 32], slots: u64) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&key[..8]);
    u64::from_le_bytes(first) & (slots - 1)
}

/// What the header says about the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    slots: u64,
    entries: u64,
}

impl Header {
    fn encode(&self) -> [u8; 32] {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(MAGIC);
        bytes[8..16].copy_from_slice(&self.slots.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.entries.to_le_bytes());
        bytes
    }

    fn decode(bytes: &[u8; 32]) -> Option<Header> {
        if &bytes[..8] != MAGIC {
            return None;
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let header = Header {
            slots: word(8),
            entries: word(16),
        };
        // A table that could not be addressed is no table.
        let addressable = header
            .slots
            .checked_mul(KEY_BYTES)
            .and_then(|keys| keys.checked_add(HEADER_BYTES))
            .is_some();
        (header.slots >= MIN_SLOTS && header.slots.is_power_of_two() && addressable)
            .then_some(header)
    }

    /// Where the table ends and the log begins.
    fn log_start(&self) -> u64 {
        HEADER_BYTES + self.slots * KEY_BYTES
    }
}

/// Where the file lives (the run directory, held once validated).
#[derive(Debug, Clone)]
pub struct DigestFiles {
    dir: PathBuf,
    run: super::run::RunDir,
}

/// An opened, current digest table (read-only unless opened for update).
#[derive(Debug)]
pub struct DigestTable {
    file: std::sync::Arc<File>,
    header: Header,
    /// The file's length when opened: the table, then the log.
    size: u64,
    path: PathBuf,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::io(&e, path)
}

impl DigestFiles {
    /// The file of `run`, reached through its held directory.
    pub fn of_run(run: &super::run::RunDir) -> DigestFiles {
        DigestFiles {
            dir: run.dir.clone(),
            run: run.clone(),
        }
    }

    fn at(&self, path: &Path) -> StoreResult<super::held::Loc> {
        self.run.place(path)
    }

    /// The stamp of the file (`None` when it is missing or not a regular
    /// file): bound into the checkpoint, so that any later write of it
    /// means the checkpoint is not used.
    pub fn stamps(&self) -> Option<serde_json::Value> {
        let run = &self.run;
        let index = run.file_stamp(&self.index_path())?;
        Some(serde_json::json!({"index": index.to_json()}))
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("checkpoint-digests.idx")
    }

    /// Where the log was kept before it moved into the table's file.
    fn former_log_path(&self) -> PathBuf {
        self.dir.join("checkpoint-digests.log")
    }

    /// The file, opened and checked now.
    fn open_meta(&self, path: &Path, write: bool) -> StoreResult<(File, std::fs::Metadata)> {
        use rustix::fs::OFlags;
        let flags = if write { OFlags::RDWR } else { OFlags::RDONLY };
        let file = self.at(path)?.open(flags, 0).map_err(io(path))?;
        let meta = file.metadata().map_err(io(path))?;
        if !meta.is_file() {
            return Err(StoreError::invalid("checkpoint digest file is not a file"));
        }
        check_metadata(&meta, "checkpoint digest file", FILE_MODE)?;
        Ok((file, meta))
    }

    /// The table, if its header is sound and it holds exactly `entries`
    /// keys.
    ///
    /// Read under a lock, the file is opened once for the command: the
    /// table a checkpoint's proof read is the one its successor extends
    /// (`secure::open_derived`).
    pub fn open_table(&self, entries: u64, write: bool) -> Option<DigestTable> {
        let path = self.index_path();
        let (file, size) = if write && !self.run.root.may_keep() {
            let (file, meta) = self.open_meta(&path, true).ok()?;
            (std::sync::Arc::new(file), meta.len())
        } else {
            super::secure::open_derived_ours(&self.at(&path).ok()?, "checkpoint digest file")?
        };
        let mut bytes = [0u8; 32];
        file.read_exact_at(&mut bytes, 0).ok()?;
        let header = Header::decode(&bytes)?;
        if header.entries != entries || size < header.log_start() {
            return None;
        }
        Some(DigestTable {
            file,
            header,
            size,
            path,
        })
    }

    /// Replace the file with exactly `digests` (after a full replay).
    /// Returns the log's byte length.
    pub fn rewrite(&self, digests: &[LaneDigest]) -> StoreResult<u64> {
        let log = log_bytes(digests);
        let keys: Vec<[u8; 32]> = digests.iter().map(|(l, d)| key(l, d)).collect();
        self.write_file(&keys, &log)?;
        // A log of the former layout is nobody's any more.
        if let Ok(former) = self.at(&self.former_log_path())
            && former.exists()
        {
            let _ = former.remove_file();
        }
        sync_dir(self.run.root.at(&self.dir))?;
        Ok(log.len() as u64)
    }

    /// A fresh file: a table holding `keys`, at most half full, then `log`.
    fn write_file(&self, keys: &[[u8; 32]], log: &[u8]) -> StoreResult<()> {
        let mut slots = MIN_SLOTS;
        while (keys.len() as u64) * 2 > slots {
            slots *= 2;
        }
        let header = Header {
            slots,
            entries: keys.len() as u64,
        };
        let log_start = header.log_start() as usize;
        let mut bytes = vec![0u8; log_start + log.len()];
        bytes[..32].copy_from_slice(&header.encode());
        let table = &mut bytes[HEADER_BYTES as usize..log_start];
        for key in keys {
            insert_in_memory(table, slots, key);
        }
        bytes[log_start..].copy_from_slice(log);
        atomic_write(&self.at(&self.index_path())?, &bytes)
    }

    /// Append `digests` (new since the checkpoint) to a current table and
    /// its log. `log_bytes_covered` is the log length the checkpoint
    /// covers; anything after it (left by a crash) is overwritten. Returns
    /// the new log length.
    pub fn extend(
        &self,
        mut table: DigestTable,
        log_bytes_covered: u64,
        digests: &[LaneDigest],
    ) -> StoreResult<u64> {
        let path = self.index_path();
        let lines = log_bytes(digests);
        let new_length = log_bytes_covered + lines.len() as u64;
        let entries = table.header.entries + digests.len() as u64;
        if entries * 2 > table.header.slots {
            // Grow: the old table's keys plus the new ones, in a table twice
            // the size, and the log moved after it (amortised: this happens
            // at every doubling).
            let mut old = vec![0u8; (table.header.slots * KEY_BYTES) as usize];
            table
                .file
                .read_exact_at(&mut old, HEADER_BYTES)
                .map_err(io(&path))?;
            let mut keys: Vec<[u8; 32]> = old
                .chunks_exact(KEY_BYTES as usize)
                .filter(|k| k.iter().any(|b| *b != 0))
                .filter_map(|k| k.try_into().ok())
                .collect();
            keys.extend(digests.iter().map(|(l, d)| key(l, d)));
            let mut log = table.log(log_bytes_covered)?;
            log.extend_from_slice(&lines);
            self.write_file(&keys, &log)?;
            return Ok(new_length);
        }
        let log_start = table.header.log_start();
        table
            .file
            .write_all_at(&lines, log_start + log_bytes_covered)
            .map_err(io(&path))?;
        // Lines past what the checkpoint covered (a run cut back, a crash
        // after a write) are cut off.
        if table.size > log_start + new_length {
            table
                .file
                .set_len(log_start + new_length)
                .map_err(io(&path))?;
        }
        // No sync. A crash before the checkpoint that names this table is
        // written leaves a checkpoint whose receipt stamp no longer matches
        // (the append came first), so a half-done table is never used; a
        // power loss, which may keep the checkpoint and lose these keys,
        // starts a new boot, and a checkpoint of another boot is never used
        // (contracts/receipt.md "One commit").
        for (lane, digest) in digests {
            table.insert(&key(lane, digest)).map_err(io(&path))?;
        }
        table.header.entries = entries;
        table
            .file
            .write_all_at(&table.header.encode(), 0)
            .map_err(io(&path))?;
        Ok(new_length)
    }

    /// The first `length` bytes of the log as pairs, in first-seen order.
    pub fn read_log(&self, length: u64) -> StoreResult<Vec<LaneDigest>> {
        let path = self.index_path();
        let (file, meta) = self.open_meta(&path, false)?;
        let mut bytes = [0u8; 32];
        file.read_exact_at(&mut bytes, 0).map_err(io(&path))?;
        let header = Header::decode(&bytes)
            .ok_or_else(|| StoreError::invalid("checkpoint digest table is damaged"))?;
        let table = DigestTable {
            file: std::sync::Arc::new(file),
            header,
            size: meta.len(),
            path,
        };
        parse_log(&table.log(length)?)
    }

    /// The log grouped by lane (the full lists the caches show).
    pub fn read_lists(&self, length: u64) -> StoreResult<BTreeMap<String, Vec<String>>> {
        let mut lists: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (lane, digest) in self.read_log(length)? {
            lists.entry(lane).or_default().push(digest);
        }
        Ok(lists)
    }
}

/// `lane_id SP digest LF` lines as pairs.
fn parse_log(bytes: &[u8]) -> StoreResult<Vec<LaneDigest>> {
    let damaged = || StoreError::invalid("checkpoint digest log is damaged");
    let mut pairs = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(line).map_err(|_| damaged())?;
        let (lane, digest) = text.split_once(' ').ok_or_else(damaged)?;
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(damaged());
        }
        pairs.push((lane.to_string(), digest.to_string()));
    }
    Ok(pairs)
}

impl DigestTable {
    pub fn entries(&self) -> u64 {
        self.header.entries
    }

    /// The first `length` bytes of the log after the table.
    fn log(&self, length: u64) -> StoreResult<Vec<u8>> {
        // `length` comes from the checkpoint, which anyone can edit: read no
        // more than the file holds (a huge value must not become a huge
        // allocation, which aborts after the append has committed).
        let start = self.header.log_start();
        if start.saturating_add(length) > self.size {
            return Err(StoreError::invalid(
                "checkpoint digest log is shorter than its checkpoint says",
            ));
        }
        let mut bytes = vec![0u8; usize::try_from(length).unwrap_or(usize::MAX)];
        self.file
            .read_exact_at(&mut bytes, start)
            .map_err(|e| StoreError::io(&e, &self.path))?;
        Ok(bytes)
    }

    /// Whether the table holds the pair. An unreadable table answers "yes",
    /// which refuses the evidence as repeated rather than accepting it.
    /// Whether the table holds `digest` for `lane_id`; a read error is an
    /// error (never "present": a failing disk is not stale evidence).
    pub fn contains(&self, lane_id: &str, digest: &str) -> StoreResult<bool> {
        let wanted = key(lane_id, digest);
        self.find(&wanted)
            .map(|slot| slot.is_some())
            .map_err(|e| StoreError::io(&e, &self.path))
    }

    /// `Some(slot)` when present, `None` when absent.
    fn find(&self, wanted: &[u8; 32]) -> std::io::Result<Option<u64>> {
        let slots = self.header.slots;
        let mut slot = home_slot(wanted, slots);
        let mut chunk = vec![0u8; (PROBE_SLOTS * KEY_BYTES) as usize];
        for _ in 0..slots.div_ceil(PROBE_SLOTS) + 1 {
            let count = PROBE_SLOTS.min(slots - slot);
            let bytes = &mut chunk[..(count * KEY_BYTES) as usize];
            self.file
                .read_exact_at(bytes, HEADER_BYTES + slot * KEY_BYTES)?;
            for (i, candidate) in bytes.chunks_exact(KEY_BYTES as usize).enumerate() {
                if candidate == wanted {
                    return Ok(Some(slot + i as u64));
                }
                if candidate.iter().all(|b| *b == 0) {
                    return Ok(None);
                }
            }
            slot = (slot + count) & (slots - 1);
        }
        Ok(None)
    }

    fn insert(&mut self, wanted: &[u8; 32]) -> std::io::Result<()> {
        let slots = self.header.slots;
        let mut slot = home_slot(wanted, slots);
        let mut candidate = [0u8; 32];
        for _ in 0..slots {
            self.file
                .read_exact_at(&mut candidate, HEADER_BYTES + slot * KEY_BYTES)?;
            if candidate == *wanted {
                return Ok(());
            }
            if candidate.iter().all(|b| *b == 0) {
                return self
                    .file
                    .write_all_at(wanted, HEADER_BYTES + slot * KEY_BYTES);
            }
            slot = (slot + 1) & (slots - 1);
        }
        Err(std::io::Error::other("digest table is full"))
    }
}

fn insert_in_memory(table: &mut [u8], slots: u64, wanted: &[u8; 32]) {
    let mut slot = home_slot(wanted, slots);
    loop {
        let at = (slot * KEY_BYTES) as usize;
        let candidate = &mut table[at..at + KEY_BYTES as usize];
        if candidate == wanted {
            return;
        }
        if candidate.iter().all(|b| *b == 0) {
            candidate.copy_from_slice(wanted);
            return;
        }
        slot = (slot + 1) & (slots - 1);
    }
}

fn log_bytes(digests: &[LaneDigest]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(digests.len() * 80);
    for (lane, digest) in digests {
        bytes.extend_from_slice(lane.as_bytes());
        bytes.push(b' ');
        bytes.extend_from_slice(digest.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: usize) -> Vec<LaneDigest> {
        (0..n)
            .map(|i| (format!("lane-{}", i % 3), format!("{i:064x}")))
            .collect()
    }

    fn files_of_a_run() -> (tempfile::TempDir, DigestFiles) {
        let (dir, run) = crate::store::test_dirs::run_dir();
        (dir, DigestFiles::of_run(&run))
    }

    #[test]
    fn rewritten_table_answers_membership_per_lane() {
        let (_dir, files) = files_of_a_run();
        let all = pairs(3000);
        let log = files.rewrite(&all).unwrap();
        let table = files.open_table(3000, false).unwrap();
        for (lane, digest) in &all {
            assert!(table.contains(lane, digest).unwrap());
        }
        // The same digest under another lane is a different key.
        assert!(!table.contains("lane-1", &format!("{:064x}", 0)).unwrap());
        assert!(!table.contains("lane-0", &format!("{:064x}", 9999)).unwrap());
        assert_eq!(files.read_log(log).unwrap(), all);
        assert!(
            files.open_table(2999, false).is_none(),
            "entry count is bound"
        );
    }

    #[test]
    fn extending_grows_the_table_and_keeps_every_pair() {
        let (_dir, files) = files_of_a_run();
        let all = pairs(2500);
        let mut log = files.rewrite(&all[..10]).unwrap();
        let mut entries = 10;
        for chunk in all[10..].chunks(7) {
            let table = files.open_table(entries, true).unwrap();
            log = files.extend(table, log, chunk).unwrap();
            entries += chunk.len() as u64;
        }
        let table = files.open_table(entries, false).unwrap();
        assert!(all.iter().all(|(l, d)| table.contains(l, d).unwrap()));
        assert_eq!(files.read_lists(log).unwrap()["lane-2"].len(), 833);
    }

    /// Caches never vouch (trust-model §2): a read error is an error, never
    /// "digest present". The table was proven sound when opened; a file cut
    /// short afterwards makes the pread fail (a real short read, no injection).
    #[test]
    fn a_read_error_of_the_table_is_an_io_error_not_present() {
        let (_dir, files) = files_of_a_run();
        let all = pairs(100);
        files.rewrite(&all).unwrap();
        let table = files.open_table(100, false).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(files.index_path())
            .unwrap()
            .set_len(HEADER_BYTES)
            .unwrap();
        let (lane, digest) = &all[0];
        match table.contains(lane, digest) {
            Err(StoreError::Io(failure)) => {
                assert_eq!(failure.kind, std::io::ErrorKind::UnexpectedEof);
                assert_eq!(failure.path, files.index_path());
            }
            other => panic!("a failed read answered {other:?}"),
        }
    }

    /// The log follows the table in its one file: a tail past what the
    /// checkpoint covers (a crash after a write) is cut, growing moves the
    /// log with the table, and a file of the former layout is not used (a
    /// rewrite removes its separate log).
    #[test]
    fn the_log_lives_after_the_table_in_one_file() {
        let (_dir, files) = files_of_a_run();
        let all = pairs(600);
        let covered = files.rewrite(&all[..300]).unwrap();
        // A crash left lines the checkpoint does not cover.
        let table = files.open_table(300, true).unwrap();
        let stray = log_bytes(&[("lane-9".into(), format!("{:064x}", 7))]);
        let end = table.header.log_start() + covered;
        table.file.write_all_at(&stray, end).unwrap();
        drop(table);
        let table = files.open_table(300, true).unwrap();
        let log = files.extend(table, covered, &all[300..301]).unwrap();
        assert_eq!(files.read_log(log).unwrap(), all[..301].to_vec());
        let size = std::fs::metadata(files.index_path()).unwrap().len();
        assert_eq!(
            size,
            HEADER_BYTES + 1024 * KEY_BYTES + log,
            "stray lines cut"
        );
        // 601 entries do not fit half of 1024 slots: the table grows.
        let table = files.open_table(301, true).unwrap();
        let log = files.extend(table, log, &all[301..]).unwrap();
        let table = files.open_table(600, false).unwrap();
        assert_eq!(table.header.slots, 2048);
        assert!(all.iter().all(|(l, d)| table.contains(l, d).unwrap()));
        assert_eq!(files.read_log(log).unwrap(), all);
        assert!(
            files.read_log(log + 1).is_err(),
            "a length past the file is refused"
        );
        // The former layout: its magic is not ours, its log goes.
        let mut bytes = std::fs::read(files.index_path()).unwrap();
        bytes[..8].copy_from_slice(b"BTDIGX01");
        std::fs::write(files.index_path(), &bytes).unwrap();
        std::fs::write(files.former_log_path(), b"old").unwrap();
        assert!(files.open_table(600, false).is_none());
        files.rewrite(&all).unwrap();
        assert!(!files.former_log_path().exists());
        assert!(files.open_table(600, false).is_some());
    }

    #[test]
    fn a_table_with_a_broken_header_or_size_is_not_used() {
        let (_dir, files) = files_of_a_run();
        files.rewrite(&pairs(5)).unwrap();
        let table = files.open_table(5, true).unwrap();
        table.file.write_all_at(b"NOTMAGIC", 0).unwrap();
        drop(table);
        assert!(files.open_table(5, false).is_none());
        files.rewrite(&pairs(5)).unwrap();
        let table = files.open_table(5, true).unwrap();
        table.file.set_len(HEADER_BYTES + 7).unwrap();
        drop(table);
        assert!(files.open_table(5, false).is_none());
    }
}
