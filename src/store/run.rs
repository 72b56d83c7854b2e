//! A run directory under `<root>/runs/<id>`: its files, its validation
//! (reference-runtime §1.3), manifest and receipt opens, caches and the
//! acknowledged receipt head (decisions.md 16).

use serde_json::{Value, json};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::error::{StoreError, StoreResult};
use super::held::{HeldDir, Loc, Place};
use super::lock::DirLock;
use super::root::StateRoot;
use super::secure::{
    DIR_MODE, Durability, FILE_MODE, atomic_write_with, check_metadata, open_regular,
    open_secure_dir, open_secure_dir_at,
};
use crate::receipt::canonical;
use crate::receipt::primitives::{RunId, Sha256Hex, as_int, is_identifier};

/// How much of the receipt's end the checkpoint fingerprints.
const RECEIPT_TAIL_BYTES: u64 = 64 * 1024;

/// Largest manifest snapshot we read (the bundled one is under 5 KiB).
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Why a run's files cannot be read as a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunReadError {
    /// The run's snapshot or receipt is missing or damaged (exit 3).
    Corrupt(String),
    /// A store rule was broken (exit 2 / 5).
    Store(StoreError),
    /// Nothing at all at `runs/<id>`: the reference's exit 3 "run manifest
    /// snapshot is missing or invalid", most often a mistyped run id or
    /// state root, never damage (DEVIATIONS 90).
    Missing(MissingRun),
}

/// A run that is not there, and what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRun {
    pub message: String,
    /// The real cause and how to find the right value.
    pub hint: String,
}

/// At most this many run ids are named in a missing run's hint.
const RUNS_NAMED: usize = 8;

impl MissingRun {
    /// Why `run_id` is not under `root`: no state root there, no `runs/`
    /// in it, or no such run (then the runs it has, newest last).
    pub fn of(root: &StateRoot, run_id: &str) -> MissingRun {
        let message = format!(
            "run manifest snapshot is missing or invalid: run {run_id} does not exist under the state root {}",
            root.display()
        );
        let shown = root.display();
        let hint = if !root.at(root).exists_no_follow() {
            format!(
                "there is no state root at {shown}: pass the --state-root that init created (bluetape-flow state-root prints the one found from this directory); this is not damage, nothing to recover"
            )
        } else {
            match std::fs::read_dir(root.join("runs")) {
                Err(_) => format!(
                    "{shown} holds no runs/ directory, so it is not a state root init made: pass the --state-root that init created (bluetape-flow state-root prints the one found from this directory); this is not damage, nothing to recover"
                ),
                Ok(entries) => {
                    let mut runs: Vec<String> = entries
                        .filter_map(Result::ok)
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|name| is_identifier(name))
                        .collect();
                    runs.sort();
                    let listed = if runs.is_empty() {
                        "this state root has no runs yet (init makes one)".to_string()
                    } else {
                        let skip = runs.len().saturating_sub(RUNS_NAMED);
                        let more = if skip > 0 {
                            format!("{skip} older and ")
                        } else {
                            String::new()
                        };
                        format!("its runs are {more}{}", runs[skip..].join(", "))
                    };
                    let text = shown.to_string();
                    let quoted = if text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+=,".contains(c))
                    {
                        text
                    } else {
                        format!("'{}'", text.replace('\'', "'\\''"))
                    };
                    format!(
                        "no run {run_id} under {shown}: check --run-id (init printed the run_id); {listed}; bluetape-flow --state-root {quoted} status lists every run; this is not damage, nothing to recover"
                    )
                }
            }
        };
        MissingRun { message, hint }
    }
}

impl From<StoreError> for RunReadError {
    fn from(e: StoreError) -> Self {
        RunReadError::Store(e)
    }
}

/// The last receipt head this tool acknowledged to a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckHead {
    pub sequence: u64,
    pub checksum: Sha256Hex,
    pub byte_length: u64,
    /// Lines up to this sequence are byte-canonical (at most `sequence`):
    /// below a line another tool wrote in other bytes it stops, so our
    /// `verify` never calls damaged a line it accepted before (DEVIATIONS
    /// 105). Written only when below `sequence`; absent, it is `sequence`.
    pub canonical_through: u64,
}

/// The acknowledged head a record's bytes name, or `None` when they name
/// none: not JSON, a field missing or mistyped, another run, or a position
/// no append can leave (sequence 0, no bytes: we write the record only
/// after an append). Such a record is damaged itself and says nothing
/// about the receipt: `receipt-diagnose` judges the receipt without it and
/// `rebuild` rewrites it from a receipt that verifies (DEVIATIONS 104).
///
/// With the state root's key (`key`), the record must also carry its own
/// `mac` (HMAC-SHA256 of the record without it, contracts/receipt.md
/// "Appends and the acknowledged head"): one written by anyone without the
/// key names no head either, so it is reported as a damaged cache of ours,
/// never as receipt damage. Without a readable key (an auditor's copy)
/// the record is judged by its content alone.
pub fn parse_head(bytes: &[u8], run_id: &str, key: Option<&[u8]>) -> Option<AckHead> {
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    let claimed = value.as_object_mut()?.remove("mac");
    if let Some(key) = key {
        let claimed = claimed?;
        if !super::secret::mac_matches(key, &value, claimed.as_str()?) {
            return None;
        }
    }
    let field = |k: &str| {
        value
            .get(k)
            .and_then(as_int)
            .filter(|n| *n >= 1)
            .map(|n| n as u64)
    };
    let checksum = value
        .get("checksum")
        .and_then(Value::as_str)
        .and_then(Sha256Hex::parse)?;
    if value.get("run_id").and_then(Value::as_str) != Some(run_id) {
        return None;
    }
    let sequence = field("sequence")?;
    let canonical_through = match value.get("canonical_through") {
        None => sequence,
        Some(v) => as_int(v).filter(|n| (0..=i128::from(sequence)).contains(n))? as u64,
    };
    Some(AckHead {
        sequence,
        checksum,
        byte_length: field("byte_length")?,
        canonical_through,
    })
}

/// The size of `receipt-head.json`: one sector, so its in-place rewrite
/// is one write the device does whole.
pub const HEAD_RECORD_BYTES: usize = 512;

/// One run: its paths (for messages) and, once [`RunDir::validate`] has
/// opened them, the held descriptors of the state root and the run
/// directory through which every file of the run is reached.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: StateRoot,
    pub run_id: RunId,
    pub dir: PathBuf,
    held: Arc<OnceLock<HeldRun>>,
    /// The receipt opened for reading once per command (positioned reads
    /// of single lines and tails; streaming readers open their own).
    receipt_reader: Arc<OnceLock<Arc<File>>>,
    /// The receipt bytes this command read last by position (a tail),
    /// with the lines it appended after them: the last line, the recent
    /// lines and the next tail are then read from here. A receipt only
    /// grows: bytes once read stay what they were, and a rewrite by
    /// anyone else is as if it came after this command.
    recent: Arc<std::sync::Mutex<Option<RecentBytes>>>,
}

/// Receipt bytes `[start, start + bytes.len())`.
#[derive(Debug)]
struct RecentBytes {
    start: u64,
    bytes: Vec<u8>,
}

/// The state root opened once, and the run directory reached from it
/// without following a symlink at any component.
#[derive(Debug)]
struct HeldRun {
    root: Arc<HeldDir>,
    /// The identity of `runs` when it was opened.
    runs: (u64, u64),
    run: Arc<HeldDir>,
}

fn moved(run_id: &str) -> StoreError {
    StoreError::Moved(format!(
        "run directory runs/{run_id} was moved or replaced after this command opened it; nothing was written (run `doctor`, then `verify --run-id {run_id}`)"
    ))
}

impl RunDir {
    pub fn new(root: &StateRoot, run_id: &RunId) -> RunDir {
        RunDir {
            root: root.clone(),
            run_id: run_id.clone(),
            dir: root.join("runs").join(run_id),
            held: Arc::new(OnceLock::new()),
            receipt_reader: Arc::new(OnceLock::new()),
            recent: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    /// Where `path` (a path under the run directory) is: reached from the
    /// held run directory, one component at a time with no symlink
    /// followed, once the run was validated; by path before that.
    pub fn place(&self, path: &Path) -> StoreResult<Loc> {
        let Some(held) = self.held.get() else {
            return self.root.at(path).place();
        };
        let Ok(relative) = path.strip_prefix(&self.dir) else {
            return self.root.at(path).place();
        };
        let (Some(name), parent) = (relative.file_name(), relative.parent()) else {
            return self.root.at(path).place();
        };
        let dir = match parent {
            // Through the directories this command walked (`lanes` once,
            // not per lane file) when they lead from the run we hold.
            Some(parent) if !parent.as_os_str().is_empty() => {
                let from_held_run = self
                    .root
                    .known_dir(&self.dir)
                    .is_some_and(|run| run.identity() == held.run.identity());
                match from_held_run
                    .then(|| self.root.walked_dir(&self.dir.join(parent)))
                    .flatten()
                {
                    Some(dir) => dir,
                    None => held
                        .run
                        .walk(parent)
                        .map_err(|e| StoreError::io(&e, &self.dir.join(parent)))?,
                }
            }
            _ => Arc::clone(&held.run),
        };
        Ok(Loc::new(dir, name))
    }

    /// Open the state root and the run directory (in one `openat2` from
    /// the root, [`Self::open_held_beneath`]; else `runs` and the run each
    /// from the one before with `O_NOFOLLOW | O_DIRECTORY`), and check
    /// that the root, `runs` and the run are 0700 directories of ours. The
    /// first call holds the descriptors; a later call that finds another
    /// directory is a refusal.
    fn open_held(&self) -> StoreResult<HeldRun> {
        open_secure_dir(self.root.at(&self.root), "state root")?;
        let root = self
            .root
            .held()
            .map_err(|e| StoreError::io(&e, &self.root))?;
        // Directories reached before, checked here and held.
        let reached = |runs: Arc<HeldDir>, run: Arc<HeldDir>| -> StoreResult<HeldRun> {
            check_metadata(runs.opened_metadata(), "state-root runs", DIR_MODE)?;
            check_metadata(run.opened_metadata(), "run directory", DIR_MODE)?;
            Ok(HeldRun {
                root: Arc::clone(&root),
                runs: runs.identity(),
                run,
            })
        };
        let (runs_path, run_path) = (self.root.join("runs"), &self.dir);
        // Those this command already walked to (reading the manifest, say);
        // else the run in one open; else each walked to, or opened here.
        if let (Some(runs), Some(run)) = (
            self.root.known_dir(&runs_path),
            self.root.known_dir(run_path),
        ) {
            return reached(runs, run);
        }
        if let Some(held) = self.open_held_beneath(&root)? {
            return Ok(held);
        }
        if let (Some(runs), Some(run)) = (
            self.root.walked_dir(&runs_path),
            self.root.walked_dir(run_path),
        ) {
            return reached(runs, run);
        }
        let runs = Arc::new(open_secure_dir_at(
            &Loc::new(Arc::clone(&root), "runs"),
            "state-root runs",
        )?);
        let runs_identity = runs.identity();
        let run = Arc::new(open_secure_dir_at(
            &Loc::new(runs, self.run_id.as_str()),
            "run directory",
        )?);
        Ok(HeldRun {
            root,
            runs: runs_identity,
            run,
        })
    }

    /// [`Self::open_held`] in one open: `runs/<id>` by one `openat2` from
    /// the held root (no symlink at any component, nothing outside the
    /// root), `runs` checked by an `lstat` (a 0700 directory of ours) and
    /// proven to be the run's parent by the run's `..`. `None` whenever
    /// that does not hold as it stands (no `openat2`, a symlink, a name
    /// missing, `runs` swapped between the two calls): the walk component
    /// by component then decides, and says why in its words.
    fn open_held_beneath(&self, root: &Arc<HeldDir>) -> StoreResult<Option<HeldRun>> {
        let Some(runs) = Loc::new(Arc::clone(root), "runs").lstat().ok().flatten() else {
            return Ok(None);
        };
        if rustix::fs::FileType::from_raw_mode(runs.st_mode) != rustix::fs::FileType::Directory {
            return Ok(None);
        }
        let run = match self.root.known_dir(&self.dir) {
            Some(run) => run,
            None => match root.descend(&std::path::Path::new("runs").join(&self.run_id)) {
                Some(run) => Arc::new(run),
                None => return Ok(None),
            },
        };
        let runs_identity = (runs.st_dev, runs.st_ino);
        if run.parent_identity() != Some(runs_identity) {
            return Ok(None);
        }
        super::secure::check_owner_and_mode(
            runs.st_uid,
            runs.st_mode,
            "state-root runs",
            DIR_MODE,
        )?;
        check_metadata(run.opened_metadata(), "run directory", DIR_MODE)?;
        self.root.remember_walked(&self.dir, &run);
        Ok(Some(HeldRun {
            root: Arc::clone(root),
            runs: runs_identity,
            run,
        }))
    }

    /// Whether `runs/<id>`, reached again from the held state root, is
    /// still the directory we hold, and the state root's path still names
    /// the root we hold (after a lock wait, say). A run or root moved
    /// away, or replaced by a symlink or another directory, is
    /// [`StoreError::Moved`]. Without held descriptors (never validated)
    /// there is nothing to compare.
    pub fn recheck(&self) -> StoreResult<()> {
        let Some(held) = self.held.get() else {
            return Ok(());
        };
        if !super::root::still_named(&held.root, &self.root) {
            return Err(super::root::moved_root(&self.root));
        }
        // `runs` must still be the directory we hold (not a symlink), and
        // `runs/<id>` within it the run we hold: two `lstat`s from the held
        // root. A swap racing this check cannot redirect anything: every
        // write goes through the held descriptors; this only tells the
        // caller that the names moved.
        let runs = Loc::new(Arc::clone(&held.root), "runs")
            .lstat()
            .ok()
            .flatten()
            .filter(|s| {
                rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory
            })
            .map(|s| (s.st_dev, s.st_ino));
        let run = Loc::new(
            Arc::clone(&held.root),
            std::path::Path::new("runs").join(&self.run_id),
        )
        .lstat()
        .ok()
        .flatten()
        .map(|s| (s.st_dev, s.st_ino));
        if runs != Some(held.runs) || run != Some(held.run.identity()) {
            return Err(moved(&self.run_id));
        }
        Ok(())
    }

    /// `locks/` of the run (0700), created inside the held run directory
    /// when missing: never a path re-resolved, so a run moved away is not
    /// recreated as a ghost `runs/<id>/locks`.
    pub fn ensure_locks_dir(&self) -> StoreResult<()> {
        let locks = self.place(&self.dir.join("locks"))?;
        if locks.exists() {
            return Ok(());
        }
        // Only a run whose names still lead to it gets a `locks/` (the
        // lock itself rechecks them once taken).
        self.recheck()?;
        match locks.mkdir(super::secure::DIR_MODE) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(StoreError::io(&e, &locks.path())),
        }
        let dir = locks
            .open_dir()
            .map_err(|e| StoreError::io(&e, &locks.path()))?;
        dir.set_mode(super::secure::DIR_MODE)
            .map_err(|e| StoreError::io(&e, &locks.path()))?;
        locks.sync_dir().map_err(|e| StoreError::io(&e, &self.dir))
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    pub fn receipt_path(&self) -> PathBuf {
        self.dir.join("receipt.jsonl")
    }

    pub fn run_cache_path(&self) -> PathBuf {
        self.dir.join("run.json")
    }

    pub fn lanes_dir(&self) -> PathBuf {
        self.dir.join("lanes")
    }

    /// Our own file: the last acknowledged head. The reference ignores it.
    pub fn head_path(&self) -> PathBuf {
        self.dir.join("receipt-head.json")
    }

    pub fn receipt_lock(&self) -> DirLock {
        let lock = DirLock::new(&self.root, self.dir.join("locks").join("receipt"));
        if self.held.get().is_some() {
            lock.anchored(self.clone())
        } else {
            lock
        }
    }

    /// §1.3 run-directory validation (mutations, diagnosis).
    pub fn validate(&self) -> StoreResult<()> {
        if !is_identifier(&self.run_id) {
            return Err(StoreError::invalid(
                "run_id must match the identifier contract",
            ));
        }
        // Validated before (a later step of the same command): a run or
        // `runs/` swapped since is the refusal "moved", whatever the path
        // now shows (a symlink, nothing), before any by-path check.
        if self.held.get().is_some() {
            // Held since: what the first validation checked stays true of
            // the descriptors; only the names can have moved.
            return self.recheck();
        }
        // A run directory this command walked to already was no symlink
        // when it was opened (no-follow), and is the one it holds.
        if self.root.known_dir(&self.dir).is_none() && self.root.at(&self.dir).is_symlink() {
            return Err(StoreError::invalid("run directory must not be a symlink"));
        }
        // Reached from the held root one component at a time, the run
        // directory is an entry of `runs`: it cannot escape it.
        let opened = self.open_held()?;
        match self.held.get() {
            Some(held) if held.run.identity() != opened.run.identity() => Err(moved(&self.run_id)),
            Some(_) => Ok(()),
            None => {
                let _ = self.held.set(opened);
                Ok(())
            }
        }
    }

    /// True when nothing at all exists at the run path.
    pub fn is_absent(&self) -> bool {
        !self.root.at(&self.dir).exists_no_follow()
    }

    /// The manifest snapshot bytes (§4.1 steps 1–3).
    pub fn read_manifest(&self) -> Result<Vec<u8>, RunReadError> {
        self.read_manifest_stamped().map(|(bytes, _)| bytes)
    }

    /// [`Self::read_manifest`] with the stamp of the file the bytes were
    /// read from (its `fstat`), when that stamp can stand for them later:
    /// it is older than [`SETTLED`], so no write of the same clock tick
    /// can hide behind it (a checkpoint keeps the bytes under it,
    /// contracts/receipt.md "Checkpoint").
    pub fn read_manifest_stamped(&self) -> Result<(Vec<u8>, Option<ReceiptStamp>), RunReadError> {
        // The run directory reached from the held root (one `openat2`, no
        // symlink at any component); when it cannot be, one `lstat` of
        // its entry says why: nothing there, or a symlink.
        if self.root.walked_dir(&self.dir).is_none() {
            match self.root.at(&self.dir).entry_is_symlink() {
                None => {
                    return Err(RunReadError::Missing(MissingRun::of(
                        &self.root,
                        &self.run_id,
                    )));
                }
                Some(true) => {
                    return Err(RunReadError::Corrupt(
                        "run directory snapshot is unsafe".into(),
                    ));
                }
                Some(false) => {}
            }
        }
        let path = self.manifest_path();
        let missing =
            || RunReadError::Corrupt("run manifest snapshot is missing or invalid".into());
        // A symlink or a file where a directory of the root belongs is a
        // state-root rule broken (exit 2), not a damaged run.
        let at = self.place(&path).map_err(|e| match e {
            e @ StoreError::Invalid(_) => RunReadError::Store(e),
            _ => missing(),
        })?;
        // The no-follow open refuses a symlink; only then is it asked why.
        let refused = |_| {
            if at.is_symlink() {
                RunReadError::Corrupt("run manifest snapshot is unsafe".into())
            } else {
                missing()
            }
        };
        let (mut file, meta) = super::secure::open_regular_meta(&at, "run manifest snapshot", None)
            .map_err(refused)?;
        let bytes = super::secure::read_sized(&mut file, &path, meta.len(), MAX_MANIFEST_BYTES)
            .map_err(refused)?
            .ok_or_else(|| {
                RunReadError::Corrupt(format!(
                    "run manifest snapshot is missing or invalid: larger than {MAX_MANIFEST_BYTES} bytes"
                ))
            })?;
        let stamp = ReceiptStamp::of(&meta).filter(|stamp| {
            stamp.settled(std::time::SystemTime::now()) && stamp.size == bytes.len() as u64
        });
        Ok((bytes, stamp))
    }

    /// The manifest snapshot's stamp now (one `lstat`): a copy of it kept
    /// under an equal stamp is its bytes.
    pub fn manifest_stamp(&self) -> Option<ReceiptStamp> {
        self.file_stamp(&self.manifest_path())
    }

    /// The checkpoint read by a mutation before it takes its lock (for the
    /// manifest copy in it); the descriptor is kept, and under the lock
    /// [`Self::read_checkpoint`] reads it again through it.
    pub fn read_checkpoint_before_lock(&self) -> Option<Value> {
        self.checkpoint_through(true)
    }

    /// Remove the checkpoint (under the lock): the next command replays
    /// the receipt in full and writes it again.
    pub fn discard_checkpoint(&self) -> StoreResult<()> {
        let path = self.checkpoint_path();
        match self.place(&path)?.remove_file() {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&e, &path)),
        }
    }

    /// Open the receipt for streaming: a regular, non-symlink file.
    pub fn open_receipt(&self) -> Result<BufReader<File>, RunReadError> {
        let unsafe_ = || RunReadError::Corrupt("receipt is missing or unsafe".into());
        let at = self.place(&self.receipt_path()).map_err(|_| unsafe_())?;
        let file = open_regular(&at, "receipt", None).map_err(|_| unsafe_())?;
        Ok(BufReader::with_capacity(64 * 1024, file))
    }

    /// The acknowledged head, if this tool ever wrote one.
    pub fn read_head(&self) -> Result<Option<AckHead>, RunReadError> {
        let path = self.head_path();
        let at = self.place(&path)?;
        // A file of the wrong type, mode or owner is a state-root rule
        // broken (exit 2), not a damaged receipt: the receipt may be fine.
        let not_regular = || {
            RunReadError::Store(StoreError::invalid(format!(
                "acknowledged receipt head record must be a regular file: '{}' is not (remove it; the next mutation writes a fresh one)",
                path.display()
            )))
        };
        // Opened first (no-follow), then checked on the descriptor: one
        // open says missing, a symlink, or the file to check.
        let check = |meta: &std::fs::Metadata| {
            if !meta.file_type().is_file() {
                return Err(not_regular());
            }
            check_metadata(meta, "acknowledged receipt head record", FILE_MODE).map_err(|e| {
                RunReadError::Store(StoreError::Insecure(format!(
                    "{}: '{}' must be a 0600 file owned by you (chmod 600 it)",
                    e.message(),
                    path.display()
                )))
            })
        };
        let failed = |e: std::io::Error| match at.symlink_metadata() {
            Ok(Some(meta)) if !meta.file_type().is_file() => not_regular(),
            _ => RunReadError::Store(StoreError::io(&e, &path)),
        };
        let Some((file, len)) = super::secure::open_derived(&at, check, failed)? else {
            return Ok(None);
        };
        let invalid =
            || RunReadError::Corrupt("acknowledged receipt head record is invalid".into());
        let bytes = super::secure::read_derived(&file, &path, len, 4096)
            .map_err(|_| invalid())?
            .ok_or_else(invalid)?;
        parse_head(
            &bytes,
            &self.run_id,
            super::secret::read_key(&self.root).as_deref(),
        )
        .map(Some)
        .ok_or_else(invalid)
    }

    /// Record the head we are about to acknowledge (after the append's fsync).
    pub fn write_head(&self, head: &AckHead) -> StoreResult<()> {
        let mut record = json!({
            "byte_length": head.byte_length,
            "checksum": head.checksum,
            "run_id": self.run_id,
            "schema_version": 1,
            "sequence": head.sequence,
        });
        if head.canonical_through < head.sequence {
            record["canonical_through"] = json!(head.canonical_through);
        }
        // Created now if the state root has none yet (a root the reference
        // made): a record written before its key would read as forged.
        if let Ok(Some(key)) = super::secret::ensure_key(&self.root) {
            record["mac"] = json!(super::secret::mac_hex(&key, &record));
        }
        let mut bytes = canonical::to_vec(&record);
        // Always HEAD_RECORD_BYTES (JSON, spaces, LF): rewritten in place
        // with one write of one sector and one fdatasync, never cut, so no
        // crash leaves a mix of two records (contracts/receipt.md "One
        // commit").
        if bytes.len() < HEAD_RECORD_BYTES {
            bytes.resize(HEAD_RECORD_BYTES - 1, b' ');
        }
        bytes.push(b'\n');
        let at = self.place(&self.head_path())?;
        match super::secure::overwrite_existing(&at, &bytes, true) {
            Ok(true) => Ok(()),
            // The first record is created whole (temp file and rename): a
            // process killed between creating the file and writing it must
            // not leave an empty record.
            Ok(false) => atomic_write_with(&at, &bytes, Durability::ContentOnly),
            // A write that failed part way leaves a record that names no
            // head (its MAC fails): the whole record is then put in place
            // by rename, and when even that fails the record is removed, so
            // what remains is the new head or none, never a damaged one (no
            // head only means verify has nothing to hold the receipt to
            // until the next append).
            Err(_) => atomic_write_with(&at, &bytes, Durability::ContentOnly).inspect_err(|_| {
                let _ = at.remove_file();
            }),
        }
    }

    /// Write a derived cache file (run.json or a lane) as canonical JSON + LF.
    pub fn write_cache(&self, path: &Path, value: &Value) -> StoreResult<()> {
        let at = self.place(path)?;
        if at.is_symlink() {
            return Err(StoreError::invalid("atomic target must not be a symlink"));
        }
        let mut bytes = canonical::to_vec(value);
        bytes.push(b'\n');
        // Derived and never read back as truth: the content is synced (as
        // the reference does), the rename is not; after a power loss the
        // older cache may show, and `rebuild` refreshes it.
        atomic_write_with(&at, &bytes, Durability::ContentOnly)
    }

    /// Lane cache names present on disk (stems that are identifiers).
    pub fn lane_cache_ids(&self) -> StoreResult<Vec<String>> {
        let dir = self.lanes_dir();
        let names = match self.place(&dir)?.open_dir().and_then(|d| d.entries()) {
            Ok(names) => names,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&e, &dir)),
        };
        let mut ids = Vec::new();
        for name in names {
            let name = name.to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".json")
                && is_identifier(stem)
            {
                ids.push(stem.to_string());
            }
        }
        ids.sort();
        Ok(ids)
    }

    pub fn remove_lane_cache(&self, lane_id: &str) -> StoreResult<()> {
        let path = self.lanes_dir().join(format!("{lane_id}.json"));
        match self.place(&path)?.remove_file() {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&e, &path)),
        }
    }
}

impl RunDir {
    /// SHA-256 and size of the receipt's raw bytes, streamed (the file
    /// identity of a diagnosis). A missing receipt has the identity of an
    /// empty one.
    pub fn receipt_identity(&self) -> StoreResult<(String, u64)> {
        use sha2::{Digest, Sha256};
        use std::io::Read;
        let path = self.receipt_path();
        let at = self.place(&path)?;
        if !at.exists() {
            return Ok((canonical::sha256_hex(b""), 0));
        }
        let mut file = open_regular(&at, "receipt", None)?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(|e| StoreError::io(&e, &path))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            size += n as u64;
        }
        Ok((hex::encode(hasher.finalize()), size))
    }
}

/// The receipt file's identity and change times. Equal stamps mean the
/// file was not written since the earlier one was taken: every write, even
/// one that restores the old mtime, moves the ctime (the kernel hands out a
/// fresh fine-grained ctime after one was observed), and a rename changes
/// the inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptStamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// How old a file's change time must be before its stamp may stand for
/// bytes read from it: a write within the same clock tick may leave the
/// change time as it was.
pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

impl ReceiptStamp {
    /// The stamp of a regular file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> Option<ReceiptStamp> {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() {
            return None;
        }
        Some(ReceiptStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime().checked_mul(1_000_000_000)? + meta.mtime_nsec(),
            ctime_ns: meta.ctime().checked_mul(1_000_000_000)? + meta.ctime_nsec(),
        })
    }

    /// Whether the file's last change is at least [`SETTLED`] before `now`
    /// (a change time after `now`, from a clock set back, is not).
    pub fn settled(&self, now: std::time::SystemTime) -> bool {
        let Ok(now) = now.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        i128::try_from(now.as_nanos())
            .is_ok_and(|now| now - i128::from(self.ctime_ns) >= SETTLED.as_nanos() as i128)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "ctime_ns": self.ctime_ns,
            "dev": self.dev,
            "ino": self.ino,
            "mtime_ns": self.mtime_ns,
            "size": self.size,
        })
    }

    pub fn from_json(value: &Value) -> Option<ReceiptStamp> {
        let unsigned = |k: &str| value.get(k)?.as_u64();
        let signed = |k: &str| value.get(k)?.as_i64();
        Some(ReceiptStamp {
            dev: unsigned("dev")?,
            ino: unsigned("ino")?,
            size: unsigned("size")?,
            mtime_ns: signed("mtime_ns")?,
            ctime_ns: signed("ctime_ns")?,
        })
    }
}

impl RunDir {
    /// The receipt's current stamp (`None` when it is missing or not a
    /// regular file).
    pub fn receipt_stamp(&self) -> Option<ReceiptStamp> {
        self.file_stamp(&self.receipt_path())
    }

    /// The stamp of a regular file of the run (never through a symlink):
    /// what the checkpoint binds its derived files by, since any write,
    /// rename over or truncation moves the change time or the inode, which
    /// no process can set back.
    pub fn file_stamp(&self, path: &Path) -> Option<ReceiptStamp> {
        let meta = self.place(path).ok()?.symlink_metadata().ok()??;
        ReceiptStamp::of(&meta)
    }

    /// SHA-256 of the receipt's last `min(size, 64 KiB)` bytes before `size`:
    /// the stamp's second witness. On a filesystem whose timestamps cannot
    /// tell two writes within a second apart, a same-size edit keeps the
    /// stamp; it does not keep this fingerprint of the tail.
    pub fn receipt_tail_digest(&self, size: u64) -> Option<String> {
        use sha2::Digest;
        let bytes = self.read_receipt_range(size, size.min(RECEIPT_TAIL_BYTES))?;
        Some(hex::encode(sha2::Sha256::digest(&bytes)))
    }

    /// Whether the receipt's last byte is now a LF (a torn last line seen a
    /// moment ago has since been completed by its writer).
    pub fn receipt_ends_with_lf(&self) -> bool {
        self.receipt_stamp()
            .and_then(|stamp| self.read_receipt_range(stamp.size, 1))
            .is_some_and(|last| last == b"\n")
    }

    /// Append one whole line to the receipt, through the held run
    /// directory (see [`super::secure::append_line`]).
    pub fn append_receipt(&self, line: &[u8]) -> StoreResult<()> {
        self.forget_recent();
        super::secure::append_line(&self.place(&self.receipt_path())?, line)
    }

    /// Append `line` only if the receipt is exactly `expected` bytes long
    /// (the length the appending command loaded), checked on the very
    /// descriptor written through, under the lock, right before the write.
    pub fn append_receipt_after(&self, line: &[u8], expected: u64) -> StoreResult<()> {
        let appended = super::secure::append_line_after(
            &self.place(&self.receipt_path())?,
            line,
            Some(expected),
        );
        match (&appended, self.recent.lock().as_deref_mut()) {
            // The receipt was `expected` bytes and now ends with `line`.
            (Ok(()), Ok(Some(recent))) if recent.start + recent.bytes.len() as u64 == expected => {
                recent.bytes.extend_from_slice(line);
            }
            (_, Ok(recent)) => *recent = None,
            (_, Err(_)) => {}
        }
        appended
    }

    fn forget_recent(&self) {
        if let Ok(mut recent) = self.recent.lock() {
            *recent = None;
        }
    }

    /// The checkpoint's liveness digest files.
    pub fn digest_files(&self) -> super::digests::DigestFiles {
        super::digests::DigestFiles::of_run(self)
    }

    /// The run's stored Merkle tree hashes (contracts/transparency.md).
    pub fn tree_file(&self) -> super::tree::TreeFile {
        super::tree::TreeFile::of_run(self)
    }

    /// Hand each of the receipt's lines within its first `limit` bytes to
    /// `f`, without its LF (a rebuild of derived data; the caller has
    /// verified those bytes). A receipt shorter than `limit` is an error.
    pub fn for_each_line(&self, limit: u64, mut f: impl FnMut(&[u8])) -> StoreResult<()> {
        use std::io::{BufRead, Read};
        let path = self.receipt_path();
        let file = open_regular(&self.place(&path)?, "receipt", None)?;
        let mut reader = BufReader::with_capacity(256 * 1024, file.take(limit));
        let mut line = Vec::new();
        let mut seen = 0u64;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| StoreError::io(&e, &path))?;
            if n == 0 {
                break;
            }
            seen += n as u64;
            if line.last() != Some(&b'\n') {
                return Err(StoreError::io_other(
                    &path,
                    "a line within the verified length has no LF",
                ));
            }
            f(&line[..n - 1]);
        }
        if seen != limit {
            return Err(StoreError::io_other(
                &path,
                "shorter than its verified length",
            ));
        }
        Ok(())
    }

    /// Our checkpoint file: a replayed state proven against the receipt
    /// before use, never believed on its own.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.dir.join("checkpoint.json")
    }

    /// The checkpoint, if present and readable as JSON (it is only a cache:
    /// anything odd means "no checkpoint").
    pub fn read_checkpoint(&self) -> Option<Value> {
        self.checkpoint_through(false)
    }

    fn checkpoint_through(&self, before_lock: bool) -> Option<Value> {
        let path = self.checkpoint_path();
        let at = self.place(&path).ok()?;
        let (file, len) = match before_lock {
            true => super::secure::open_derived_ours_before_lock(&at, "checkpoint")?,
            false => super::secure::open_derived_ours(&at, "checkpoint")?,
        };
        let bytes = super::secure::read_derived(&file, &path, len, 256 << 20).ok()??;
        serde_json::from_slice(&bytes).ok()
    }

    /// The checkpoint is proven against the receipt before every use, so
    /// it needs no sync: a lost or garbled one only costs a full replay.
    pub fn write_checkpoint(&self, value: &Value) -> StoreResult<()> {
        let at = self.place(&self.checkpoint_path())?;
        let mut bytes = canonical::to_vec(value);
        bytes.push(b'\n');
        // The no-follow open refuses a symlink. In place, unsynced
        // (contracts/receipt.md "One commit"): a torn or stale checkpoint
        // fails its MAC or its stamps and costs one full replay; one
        // written before the last boot is never used.
        super::secure::overwrite_in_place(&at, &bytes, false)
    }

    /// Open the receipt positioned at `offset` (for verifying a tail).
    pub fn open_receipt_at(&self, offset: u64) -> Result<BufReader<File>, RunReadError> {
        use std::io::{Seek, SeekFrom};
        let mut reader = self.open_receipt()?;
        reader
            .seek(SeekFrom::Start(offset))
            .map_err(|_| RunReadError::Corrupt("receipt is missing or unsafe".into()))?;
        Ok(reader)
    }

    /// Exactly `len` receipt bytes ending at `end`, or `None` when the
    /// receipt is shorter or unreadable.
    pub fn read_receipt_range(&self, end: u64, len: u64) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let start = end.checked_sub(len)?;
        if let Some(bytes) = self.recent.lock().ok().and_then(|recent| {
            let recent = recent.as_ref()?;
            let from = usize::try_from(start.checked_sub(recent.start)?).ok()?;
            let to = from.checked_add(usize::try_from(len).ok()?)?;
            recent.bytes.get(from..to).map(<[u8]>::to_vec)
        }) {
            return Some(bytes);
        }
        let opened;
        let file = match self.held_receipt_reader() {
            Some(file) => file,
            None => {
                opened =
                    open_regular(&self.place(&self.receipt_path()).ok()?, "receipt", None).ok()?;
                &opened
            }
        };
        // Bounded by the real size: `end` and `len` come from a derived
        // file and must never size a large allocation on their own. A small
        // read past the end fails as a short read, without an `fstat`.
        const SMALL_READ: u64 = 1 << 20;
        if len > SMALL_READ && end > file.metadata().ok()?.len() {
            return None;
        }
        let mut bytes = vec![0u8; usize::try_from(len).ok()?];
        file.read_exact_at(&mut bytes, start).ok()?;
        // A tail is kept; a line read alone does not replace it.
        if let Ok(mut recent) = self.recent.lock()
            && len <= SMALL_READ
            && recent.as_ref().is_none_or(|r| r.bytes.len() as u64 <= len)
        {
            *recent = Some(RecentBytes {
                start,
                bytes: bytes.clone(),
            });
        }
        Some(bytes)
    }

    /// The receipt held open for positioned reads once the run directory
    /// is held (opened through it on first use, never through a symlink).
    /// Under a lock it is opened to append as well, and the append goes
    /// through it ([`super::secure::open_receipt_reader`]).
    fn held_receipt_reader(&self) -> Option<&File> {
        self.held.get()?;
        if let Some(file) = self.receipt_reader.get() {
            return Some(file);
        }
        let at = self.place(&self.receipt_path()).ok()?;
        let file = super::secure::open_receipt_reader(&at).ok()?;
        let _ = self.receipt_reader.set(file);
        self.receipt_reader.get().map(|file| &**file)
    }
}

/// The run ids under `<root>/runs` (entry names that are identifiers),
/// sorted; run ids begin with their creation time, so this is oldest
/// first. Nothing is opened but the directory listing.
pub fn list_run_ids(root: &StateRoot) -> StoreResult<Vec<String>> {
    let dir = root.join("runs");
    // From the held state root: never through a symlink.
    let names = match root.dir_at(&dir) {
        Ok(Some(held)) => held.entries().map_err(|e| StoreError::io(&e, &dir))?,
        Ok(None) => match std::fs::read_dir(&dir) {
            Ok(entries) => entries.flatten().map(|e| e.file_name()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&e, &dir)),
        },
        Err(StoreError::Io(failure)) if failure.kind == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut ids: Vec<String> = names
        .into_iter()
        .filter_map(|name| name.to_str().map(str::to_string))
        .filter(|name| is_identifier(name))
        .collect();
    ids.sort();
    Ok(ids)
}
