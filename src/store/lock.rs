//! The reference's directory lock (reference-runtime §5), so the Python tool
//! and ours exclude each other: a lock directory `L` holding `owner.json`,
//! a sibling initializer `.<name>.initializing.json`, and a reclaim claim
//! `L/.reclaim.json` for stale locks (dead pid, 30 s grace by mtime). Each
//! step is taken through held directory descriptors (see [`DirLock`]).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::error::{StoreError, StoreResult};
use super::held::{Loc, Place};
use super::root::StateRoot;
use super::secure::{
    DIR_MODE, FILE_MODE, check_metadata, create_dir_0700, create_exclusive,
    create_exclusive_locked, flock_held, open_regular, open_secure_dir_at, read_limited, sync_dir,
};
use crate::receipt::canonical;
use crate::receipt::primitives::{as_int, format_now};

const GRACE: Duration = Duration::from_secs(30);
/// How long we wait for a live holder before answering "busy" (the
/// reference answers at once; a short wait keeps concurrent callers calm).
const PATIENCE: Duration = Duration::from_millis(1500);

/// What a pid probe says about a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidState {
    Alive,
    Dead,
    Unknown,
}

/// `kill(pid, 0)`. Non-positive pids address process groups: never dead.
pub fn probe_pid(pid: &Value) -> Option<PidState> {
    let pid = as_int(pid)?;
    if pid <= 0 {
        return Some(PidState::Alive);
    }
    let Ok(pid) = i32::try_from(pid) else {
        return Some(PidState::Unknown);
    };
    Some(
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
            Ok(()) => PidState::Alive,
            Err(nix::errno::Errno::ESRCH) => PidState::Dead,
            Err(_) => PidState::Unknown,
        },
    )
}

/// Who we are beyond a pid, for a person reading a lock record: a pid means
/// nothing outside its PID namespace and boot. The reference reads `pid`
/// and ignores these extra fields; liveness itself is the flock.
fn identity() -> (String, String) {
    let namespace = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    (boot_id().to_string(), namespace)
}

/// This boot's id (empty when unreadable), read once per process: lock
/// records name it, and a derived file written unsynced is used only in
/// the boot that wrote it (contracts/receipt.md "One commit").
pub fn boot_id() -> &'static str {
    static BOOT_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT_ID.get_or_init(|| {
        // A uuid and a newline: one read (no `fstat`, no read to see EOF).
        use std::io::Read;
        let mut bytes = [0u8; 64];
        let read = std::fs::File::open("/proc/sys/kernel/random/boot_id")
            .and_then(|mut file| file.read(&mut bytes))
            .unwrap_or(0);
        String::from_utf8_lossy(&bytes[..read]).trim().to_string()
    })
}

/// The value of `liveness` in our lock records: the holder's flock, not
/// its pid, says whether it lives (DEVIATIONS 40).
pub const FLOCK_LIVENESS: &str = "flock";

/// Our lock record (owner, initializer, reclaim claim). Its `pid` is 0: the
/// reference judges a holder only by `kill(pid, 0)` and reclaims a lock
/// whose pid looks dead, which a pid of another PID namespace does; `kill(0,
/// 0)` (the caller's own process group) always succeeds, so the reference
/// waits instead of stealing (trust-model §2 promise 7). Our pid is
/// `holder_pid`, meaningful within `pid_namespace` and `boot_id`; our own
/// tool judges such a record by the holder's flock.
fn record(token: &str, nonce_key: &str) -> Vec<u8> {
    let session = nix::unistd::getsid(None).map(|p| p.as_raw()).unwrap_or(0);
    let now = format_now(chrono::Utc::now());
    let (boot_id, pid_namespace) = identity();
    let mut bytes = canonical::to_vec(&json!({
        "boot_id": boot_id,
        "created_at": now,
        "holder_pid": std::process::id(),
        "liveness": FLOCK_LIVENESS,
        "pid": 0,
        "pid_namespace": pid_namespace,
        "session_id": session,
        nonce_key: token,
    }));
    bytes.push(b'\n');
    bytes
}

fn fresh_token() -> String {
    crate::store::random::uuid4().simple().to_string()
}

fn is_young(at: &Loc) -> bool {
    at.symlink_metadata()
        .ok()
        .flatten()
        .and_then(|m| m.modified().ok())
        .map(|mtime| {
            SystemTime::now()
                .duration_since(mtime)
                .map(|age| age < GRACE)
                .unwrap_or(true)
        })
        .unwrap_or(false)
}

fn lstat(at: &Loc) -> Option<std::fs::Metadata> {
    at.symlink_metadata().ok().flatten()
}

/// Read a small JSON record through a no-follow descriptor with an exact mode.
fn read_record(at: &Loc) -> StoreResult<Option<Value>> {
    let mut file = open_regular(at, "state lock record", Some(FILE_MODE))?;
    let bytes = read_limited(&mut file, &at.path(), 65536)?;
    Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
}

/// What a lock record's pid says of its holder. A record of ours (its
/// `liveness` is `flock`, its `pid` 0 for the reference's sake) is probed by
/// `holder_pid` within our own PID namespace, and is `Dead` from any other
/// one (a pid there means nothing here): the caller's flock check decides.
pub fn pid_of(record: &Value) -> Option<PidState> {
    if record.get("liveness").and_then(Value::as_str) == Some(FLOCK_LIVENESS) {
        let ours =
            record.get("pid_namespace").and_then(Value::as_str) == Some(identity().1.as_str());
        return match record.get("holder_pid") {
            Some(pid) if ours && !pid.is_boolean() => probe_pid(pid),
            _ => Some(PidState::Dead),
        };
    }
    match record.get("pid") {
        Some(Value::Bool(_)) | None => None,
        Some(pid) => probe_pid(pid),
    }
}

/// Who holds a lock, for a person reading a busy refusal
/// (contracts/refusals.md).
fn holder(record: &Value, dir: &Path) -> String {
    let field = |key: &str| match record.get(key) {
        Some(Value::String(text)) => Some(text.chars().take(64).collect::<String>()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    format!(
        "held by pid {} since {} (lock {})",
        field("holder_pid")
            .or_else(|| field("pid"))
            .unwrap_or_else(|| "unknown".into()),
        field("created_at").unwrap_or_else(|| "an unknown time".into()),
        dir.display()
    )
}

/// What the lock's directory is reached from.
#[derive(Debug, Clone)]
enum Anchor {
    /// By its path, placed through the state root (a lock of a run not
    /// validated yet).
    Path,
    /// A validated run's lock: `locks/` of the held run directory.
    Run(super::run::RunDir),
    /// A lock of the state root (`<root>/locks/...`), reached from the
    /// held root.
    Root,
}

/// The reference's directory lock, taken through held descriptors.
///
/// The on-disk protocol is the reference's, byte for byte (the Python
/// tool must see our lock and we must see its): `L/` created 0700,
/// `.<L>.initializing.json` renamed to `L/owner.json`, `L/.reclaim.json`
/// for an election, `L.retired.<hex>` for a reclaimed stale lock. What
/// differs is how the names are reached: every step is an `openat`,
/// `mkdirat`, `renameat` or `unlinkat` relative to the one `locks/`
/// directory opened for the attempt, from the held run directory
/// (`anchored`) or the held state root (`recovery`), never a path
/// re-resolved. So the lock we take and the files we then write are
/// always in the same directory, whatever is renamed meanwhile; before
/// every attempt and after taking the lock, `runs/<id>` (reached again
/// from the held root) and the state root's path must still name the
/// directories we hold, so the lock is also the one the Python tool,
/// resolving the path, finds. A run or root moved away or replaced during
/// the wait is refused ([`StoreError::Moved`]); `locks/` is only ever
/// created inside the held directory.
#[derive(Debug, Clone)]
pub struct DirLock {
    root: StateRoot,
    dir: PathBuf,
    anchor: Anchor,
}

/// Proof that we hold the lock; releasing happens on drop. `_held` keeps
/// the flock on `owner.json` for the lock's whole lifetime.
#[derive(Debug)]
pub struct LockGuard {
    lock: Loc,
    _held: std::fs::File,
    /// `owner.json` inside the lock directory this command made, reached
    /// through that directory's descriptor (once it is published): the
    /// release looks there rather than opening the name again.
    owner: Option<Loc>,
}

impl DirLock {
    pub fn new(root: &StateRoot, dir: PathBuf) -> DirLock {
        DirLock {
            root: root.clone(),
            dir,
            anchor: Anchor::Path,
        }
    }

    /// The state root's lock of a recovery of run `run_id`, reached from
    /// the held state root.
    pub fn recovery(root: &StateRoot, run_id: &str) -> DirLock {
        DirLock {
            root: root.clone(),
            dir: root.join("locks").join(format!("recovery-{run_id}")),
            anchor: Anchor::Root,
        }
    }

    /// The lock of `run`, which holds its directory (see [`DirLock`]).
    pub fn anchored(self, run: super::run::RunDir) -> DirLock {
        DirLock {
            anchor: Anchor::Run(run),
            ..self
        }
    }

    fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The lock directory's entry, without creating anything.
    fn loc(&self) -> StoreResult<Loc> {
        match &self.anchor {
            Anchor::Run(run) => run.place(&self.dir),
            Anchor::Path | Anchor::Root => self.root.at(&self.dir).place(),
        }
    }

    /// The held directory the lock lives in (`locks/`), created 0700 when
    /// missing (never recursively: a run directory that is gone stays
    /// gone), and checked to be a 0700 directory of ours.
    fn locks_dir(&self) -> StoreResult<Loc> {
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        let kind = "lock parent directory";
        let at = match &self.anchor {
            Anchor::Run(run) => {
                // Opened as it is; created only when it is missing.
                let at = run.place(parent)?;
                match open_secure_dir_at(&at, kind) {
                    Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                        run.ensure_locks_dir()?;
                        at
                    }
                    opened => return Self::lock_in(opened, self.name()),
                }
            }
            Anchor::Path | Anchor::Root => {
                let root = &self.root;
                if !root.at(parent).exists_no_follow() {
                    create_dir_0700(root.at(parent))?;
                    if let Some(grand) = parent.parent() {
                        sync_dir(root.at(grand))?;
                    }
                }
                root.at(parent).place()?
            }
        };
        Self::lock_in(open_secure_dir_at(&at, kind), self.name())
    }

    /// The lock's entry in the `locks/` directory just opened (or the
    /// refusal to use it).
    fn lock_in(opened: StoreResult<super::held::HeldDir>, name: String) -> StoreResult<Loc> {
        let held = opened.map_err(|e| match e {
            StoreError::Invalid(_) | StoreError::Insecure(_) => StoreError::Insecure(
                "lock parent directory does not have the required secure mode".into(),
            ),
            other => other,
        })?;
        Ok(Loc::new(Arc::new(held), name))
    }

    /// Whether the directories we hold are still the ones their paths
    /// name (see [`DirLock`]).
    fn recheck(&self) -> StoreResult<()> {
        match &self.anchor {
            Anchor::Path => Ok(()),
            Anchor::Run(run) => run.recheck(),
            Anchor::Root => {
                let root = &self.root;
                let held = root.held().map_err(|e| StoreError::io(&e, root))?;
                if super::root::still_named(&held, root) {
                    Ok(())
                } else {
                    Err(super::root::moved_root(root))
                }
            }
        }
    }

    /// Acquire, waiting briefly while a live holder works. An anchored
    /// lock is only returned while its directories are still the ones we
    /// hold.
    pub fn acquire(&self) -> StoreResult<LockGuard> {
        let started = std::time::Instant::now();
        loop {
            match self.try_acquire() {
                Err(StoreError::LockHeld(_)) if started.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(guard) => {
                    // Dropping the guard releases the lock we took.
                    self.recheck()?;
                    return Ok(guard);
                }
                Err(error) => {
                    // A directory moved during an attempt makes its steps
                    // fail (ENOENT, say): the refusal says what happened.
                    self.recheck()?;
                    return Err(error);
                }
            }
        }
    }

    /// One attempt of the reference's protocol, every step relative to
    /// the `locks/` directory opened for it.
    pub fn try_acquire(&self) -> StoreResult<LockGuard> {
        let token = fresh_token();
        let lock = self.locks_dir()?;
        if !lock.exists() {
            let held = claim_initializer(&lock, &token)?;
            match lock.mkdir(DIR_MODE) {
                Ok(()) => return publish(&lock, held),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = initializer(&lock).remove_file();
                }
                Err(e) => {
                    let _ = initializer(&lock).remove_file();
                    return Err(StoreError::io(&e, &lock.path()));
                }
            }
        }
        reclaim(&lock, token)
    }

    /// `lock_owner_status` of the reference's diagnosis.
    pub fn status(&self) -> &'static str {
        let Ok(lock) = self.loc() else {
            return "unlocked";
        };
        let owner = inside(&lock, "owner.json");
        let Some(meta) = owner.as_ref().and_then(lstat) else {
            let dir_exists = lock.exists();
            let init_exists = initializer(&lock).exists();
            return if dir_exists || init_exists {
                "locked_initializing"
            } else {
                "unlocked"
            };
        };
        let Some(owner) = owner else {
            return "unsafe";
        };
        if !meta.is_file() {
            return "unsafe";
        }
        let value = open_regular(&owner, "state lock owner", None)
            .ok()
            .and_then(|mut f| read_limited(&mut f, &owner.path(), 65536).ok().flatten())
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        match value.as_ref().filter(|v| v.is_object()).map(pid_of) {
            None => "invalid",
            Some(state) => match state {
                None => "invalid",
                Some(PidState::Alive) => "locked_alive",
                Some(PidState::Dead) if flock_held(&owner) => "locked_alive",
                Some(PidState::Dead) => "locked_dead",
                Some(PidState::Unknown) => "locked_unknown",
            },
        }
    }
}

/// `name` inside the lock directory `lock` (opened without following a
/// symlink), or `None` when it cannot be opened as a directory.
fn inside(lock: &Loc, name: &str) -> Option<Loc> {
    let dir = lock.open_dir().ok()?;
    Some(Loc::new(Arc::new(dir), name))
}

/// The sibling initializer `.<name>.initializing.json`.
fn initializer(lock: &Loc) -> Loc {
    lock.sibling(format!(
        ".{}.initializing.json",
        lock.name().to_string_lossy()
    ))
}

fn retired(base: &Loc, what: &str) -> Loc {
    base.sibling(format!(
        "{}.{what}.{}",
        base.name().to_string_lossy(),
        fresh_token()
    ))
}

fn publish(lock: &Loc, held: std::fs::File) -> StoreResult<LockGuard> {
    // From the rename on, owner.json carries our token: if a later step
    // fails, dropping the guard releases the lock instead of leaving it
    // held by a process that reported a failure.
    super::root::lock_taken(lock);
    let mut guard = LockGuard {
        lock: lock.clone(),
        _held: held,
        owner: None,
    };
    let result = (|| {
        let dir = lock
            .open_dir()
            .map_err(|e| StoreError::io(&e, &lock.path()))?;
        // mkdir gave 0700 unless the umask took bits away.
        if std::os::unix::fs::MetadataExt::mode(dir.opened_metadata()) & 0o7777 != DIR_MODE {
            dir.set_mode(DIR_MODE)
                .map_err(|e| StoreError::io(&e, &lock.path()))?;
        }
        let owner = Loc::new(Arc::new(dir), "owner.json");
        // Our own initializer, into the directory we made: the run's
        // kept files (the checkpoint read before the lock) stay kept.
        initializer(lock)
            .rename_own_file_to(&owner)
            .map_err(|e| StoreError::io(&e, &owner.path()))?;
        guard.owner = Some(owner);
        Ok(())
    })();
    match result {
        Ok(()) => Ok(guard),
        Err(e) => {
            let _ = initializer(lock).remove_file();
            drop(guard);
            Err(e)
        }
    }
}

/// Create the initializer, flock-ed; the flock stays with the inode when
/// it becomes `owner.json`.
fn claim_initializer(lock: &Loc, token: &str) -> StoreResult<std::fs::File> {
    let init = initializer(lock);
    for _ in 0..2 {
        // The lock only has to exclude live writers: after a crash it is
        // stale whether or not it reached the disk, so nothing in taking
        // or releasing it is synced.
        match create_exclusive_locked(&init, &record(token, "token")) {
            Ok(file) => return Ok(file),
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::AlreadyExists) => {}
            Err(e) => return Err(e),
        }
        if init.is_symlink() {
            return Err(StoreError::lock_held("state lock initializer is unsafe"));
        }
        let existing = match read_record(&init) {
            Ok(v) => v,
            Err(e @ StoreError::Insecure(_)) => return Err(e),
            Err(_) => return Err(StoreError::lock_held("state lock initializer is unsafe")),
        };
        let pid = existing.as_ref().and_then(pid_of);
        if is_young(&init)
            || matches!(pid, Some(PidState::Alive | PidState::Unknown))
            || flock_held(&init)
        {
            return Err(StoreError::lock_held("state lock initialization is active"));
        }
        let stale = retired(&init, "stale");
        if init.rename_to(&stale).is_err() {
            return Err(StoreError::lock_held("state lock initializer changed"));
        }
        let _ = stale.remove_file();
    }
    Err(StoreError::lock_held(
        "state lock initializer could not be claimed",
    ))
}

/// The slow path: the lock directory exists.
fn reclaim(lock: &Loc, token: String) -> StoreResult<LockGuard> {
    if lock.is_symlink() {
        return Err(StoreError::lock_held("state lock path is unsafe"));
    }
    let owner = inside(lock, "owner.json")
        .ok_or_else(|| StoreError::lock_held("state lock changed during recovery"))?;
    if owner.is_symlink() {
        return Err(StoreError::lock_held("state lock path is unsafe"));
    }
    let secure = lstat(lock)
        .ok_or_else(|| StoreError::lock_held("state lock changed during recovery"))
        .and_then(|m| {
            check_metadata(&m, "state lock", DIR_MODE)
                .map_err(|_| StoreError::lock_held("state lock path is insecure"))
        });
    secure?;
    if let Some(meta) = lstat(&owner)
        && check_metadata(&meta, "state lock owner", FILE_MODE).is_err()
    {
        return Err(StoreError::lock_held("state lock path is insecure"));
    }
    let owner_before = read_record(&owner).ok().flatten();
    match &owner_before {
        None => {
            let init = initializer(lock);
            if init.exists() {
                let existing = match read_record(&init) {
                    Ok(v) => v,
                    Err(_) => {
                        return Err(StoreError::lock_held("state lock initializer is unsafe"));
                    }
                };
                if existing.is_none() && lstat(&init).is_some_and(|m| m.len() > 0) {
                    return Err(StoreError::lock_held("state lock initializer is unsafe"));
                }
                if matches!(
                    existing.as_ref().and_then(pid_of),
                    Some(PidState::Alive | PidState::Unknown)
                ) || flock_held(&init)
                {
                    return Err(StoreError::lock_held("state lock initialization is active"));
                }
            }
            if owner.exists() || is_young(lock) {
                return Err(StoreError::lock_held(
                    "state lock owner is not readable yet",
                ));
            }
        }
        Some(record) => {
            // A pid that looks dead may live in another PID namespace: the
            // holder's flock is the proof either way.
            if pid_of(record) != Some(PidState::Dead) || flock_held(&owner) {
                return Err(StoreError::lock_held(format!(
                    "state lock owner is live or unknown: {}",
                    holder(record, &lock.path())
                )));
            }
        }
    }
    let claim = owner.sibling(".reclaim.json");
    elect(&claim, &token)?;
    let owner_now = read_record(&owner).ok().flatten();
    let owner_present = owner.exists();
    let unchanged = match &owner_before {
        None => !owner_present,
        Some(before) => owner_now.as_ref() == Some(before),
    };
    if !unchanged {
        let _ = claim.remove_file();
        return Err(StoreError::lock_held(
            "state lock owner changed during recovery",
        ));
    }
    let held = claim_initializer(lock, &token)?;
    let gone = retired(lock, "retired");
    let outcome = match lock.rename_to(&gone) {
        Err(_) => Err(StoreError::lock_held(
            "state lock recovery lost its election",
        )),
        Ok(()) => match lock.mkdir(DIR_MODE) {
            Err(_) => Err(StoreError::lock_held(
                "state lock was reacquired during recovery",
            )),
            Ok(()) => publish(lock, held),
        },
    };
    let _ = initializer(lock).remove_file();
    let _ = gone.remove_tree();
    outcome
}

fn elect(claim: &Loc, token: &str) -> StoreResult<()> {
    match create_exclusive(claim, &record(token, "nonce")) {
        Ok(()) => return Ok(()),
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::AlreadyExists) => {}
        Err(_) => {
            return Err(StoreError::lock_held(
                "state lock recovery lost its election",
            ));
        }
    }
    if claim.is_symlink() || !lstat(claim).is_some_and(|m| m.is_file()) {
        return Err(StoreError::lock_held("state lock recovery claim is unsafe"));
    }
    // Like the reference: a claim whose pid cannot be read (a claimant
    // killed between creating the file and writing it leaves it empty) is
    // stale once the grace has passed; only a live or unknown pid keeps it.
    let existing = read_record(claim)?;
    if is_young(claim)
        || matches!(
            existing.as_ref().and_then(pid_of),
            Some(PidState::Alive | PidState::Unknown)
        )
    {
        return Err(StoreError::lock_held(
            "state lock recovery is already claimed",
        ));
    }
    let stale = claim.sibling(format!(".reclaim.stale.{}", fresh_token()));
    claim
        .rename_to(&stale)
        .map_err(|_| StoreError::lock_held("state lock recovery claim changed"))?;
    let _ = stale.remove_file();
    match create_exclusive(claim, &record(token, "nonce")) {
        Ok(()) => Ok(()),
        Err(_) => Err(StoreError::lock_held(
            "state lock recovery claim was reacquired",
        )),
    }
}

impl Drop for LockGuard {
    /// Release: through the held `locks/` directory the lock was taken in,
    /// and only while its `owner.json` still carries our token.
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        // The derived files kept open for writing under it are closed
        // first: nothing is written through them once it is released.
        super::root::lock_released(&self.lock);
        // Ours when `owner.json` in the lock directory that now has the
        // lock's name is the very file we flocked and renamed there (the
        // descriptor we hold): a reclaimer's record is another inode.
        // The directory we made, while the lock's name still names it (a
        // reclaimer may have moved it aside and made its own): one `lstat`
        // of the name instead of opening it again.
        let made = self.owner.as_ref().filter(|owner| {
            self.lock.lstat().ok().flatten().is_some_and(|s| {
                rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory
                    && (s.st_dev, s.st_ino) == owner.dir().identity()
            })
        });
        let Some(owner) = made.cloned().or_else(|| inside(&self.lock, "owner.json")) else {
            return;
        };
        let held = self._held.metadata().ok().map(|m| (m.dev(), m.ino()));
        let ours = owner.lstat().ok().flatten().is_some_and(|s| {
            rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::RegularFile
                && Some((s.st_dev, s.st_ino)) == held
        });
        if ours {
            // Our record, then the directory; anything else left inside
            // (a reclaim claim) is removed with it.
            let _ = owner.remove_file();
            if self.lock.remove_empty_dir().is_err() {
                let _ = self.lock.remove_tree();
            }
        }
    }
}

#[cfg(test)]
impl DirLock {
    fn owner(&self) -> PathBuf {
        self.dir.join("owner.json")
    }

    fn claim(&self) -> PathBuf {
        self.dir.join(".reclaim.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    fn setup() -> (tempfile::TempDir, DirLock) {
        let tmp = tempfile::tempdir().unwrap();
        let locks = tmp.path().join("locks");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&locks)
            .unwrap();
        std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o700)).unwrap();
        let root = StateRoot::begin(tmp.path());
        let lock = DirLock::new(&root, locks.join("receipt"));
        (tmp, lock)
    }

    fn write_owner(lock: &DirLock, body: &str) {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&lock.dir)
            .unwrap();
        std::fs::set_permissions(&lock.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Another holder's record: written by another command, with its
        // own hold on the root.
        let other = StateRoot::begin(lock.root.path());
        create_exclusive(&other.at(&lock.owner()), body.as_bytes()).unwrap();
    }

    #[test]
    fn acquire_and_release() {
        let (_tmp, lock) = setup();
        assert_eq!(lock.status(), "unlocked");
        let guard = lock.try_acquire().unwrap();
        assert_eq!(lock.status(), "locked_alive");
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::LockHeld(m)) if m.starts_with("state lock owner is live or unknown: held by pid "))
        );
        drop(guard);
        assert_eq!(lock.status(), "unlocked");
        assert!(!lock.dir.exists());
    }

    #[test]
    fn dead_owner_is_reclaimed() {
        let (_tmp, lock) = setup();
        // A pid that does not fit an i32 is unknown, never reclaimed.
        write_owner(&lock, "{\"pid\":99999999999,\"token\":\"x\"}\n");
        assert_eq!(lock.status(), "locked_unknown");
        assert!(lock.try_acquire().is_err());
        std::fs::remove_dir_all(&lock.dir).unwrap();
        // pid_max is at most 2^22, so this pid is dead.
        write_owner(&lock, "{\"pid\":999999999,\"token\":\"x\"}\n");
        assert_eq!(lock.status(), "locked_dead");
        let guard = lock.try_acquire().unwrap();
        assert_eq!(lock.status(), "locked_alive");
        drop(guard);
        assert!(!lock.dir.exists());
        let leftovers: Vec<_> = std::fs::read_dir(lock.dir.parent().unwrap())
            .unwrap()
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_dead_looking_pid_whose_flock_is_held_is_alive() {
        // A holder in another PID namespace: its pid means nothing here
        // (999999999 cannot exist), but it holds the flock on owner.json.
        let (_tmp, lock) = setup();
        write_owner(&lock, "{\"pid\":999999999,\"token\":\"x\"}\n");
        let holder = std::fs::File::open(lock.owner()).unwrap();
        holder.lock().unwrap();
        assert_eq!(lock.status(), "locked_alive");
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::LockHeld(m)) if m.starts_with("state lock owner is live or unknown: held by pid "))
        );
        assert!(lock.owner().exists(), "the live holder's lock is untouched");
        drop(holder);
        assert_eq!(lock.status(), "locked_dead");
        let guard = lock
            .try_acquire()
            .expect("reclaimed once the flock is gone");
        drop(guard);
        assert!(!lock.dir.exists());
    }

    #[test]
    fn a_record_of_ours_is_judged_by_its_flock_whatever_its_pid_says() {
        let (_tmp, lock) = setup();
        write_owner(
            &lock,
            "{\"holder_pid\":1,\"liveness\":\"flock\",\"pid\":0,\"pid_namespace\":\"pid:[1]\",\"token\":\"x\"}\n",
        );
        let holder = std::fs::File::open(lock.owner()).unwrap();
        holder.lock().unwrap();
        assert_eq!(lock.status(), "locked_alive");
        drop(holder);
        assert_eq!(lock.status(), "locked_dead");
        drop(lock.try_acquire().expect("reclaimed: no flock holds it"));
    }

    #[test]
    fn our_guard_holds_the_flock_and_records_who_we_are() {
        let (_tmp, lock) = setup();
        let guard = lock.try_acquire().unwrap();
        assert!(flock_held(&lock.root.at(&lock.owner())));
        let record: Value = serde_json::from_slice(&std::fs::read(lock.owner()).unwrap()).unwrap();
        // `pid` 0 keeps the reference waiting (DEVIATIONS 40); ours is
        // `holder_pid`, and the flock decides.
        assert_eq!(record["pid"], 0);
        assert_eq!(record["holder_pid"], std::process::id());
        assert_eq!(record["liveness"], "flock");
        assert_eq!(lock.status(), "locked_alive");
        assert!(
            record["pid_namespace"]
                .as_str()
                .unwrap()
                .starts_with("pid:[")
        );
        assert_eq!(record["boot_id"].as_str().unwrap().len(), 36);
        drop(guard);
        assert!(!lock.dir.exists());
    }

    #[test]
    fn an_empty_claim_left_by_a_killed_reclaimer_is_stale_after_the_grace() {
        // A reclaimer killed between creating `.reclaim.json` and writing it
        // leaves an empty claim beside a dead owner. Within the grace it
        // holds; after it, the next writer takes the lock (the reference's
        // rule: only a live or unknown pid keeps a claim).
        let (_tmp, lock) = setup();
        write_owner(&lock, "{\"pid\":999999999,\"token\":\"x\"}\n");
        let other = StateRoot::begin(lock.root.path());
        create_exclusive(&other.at(&lock.claim()), b"").unwrap();
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::LockHeld(m)) if m == "state lock recovery is already claimed")
        );
        let past = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::open(lock.claim())
            .unwrap()
            .set_modified(past)
            .unwrap();
        let guard = lock.try_acquire().expect("the abandoned claim is stale");
        assert_eq!(lock.status(), "locked_alive");
        drop(guard);
        assert!(!lock.dir.exists());
    }

    #[test]
    fn unreadable_or_odd_owners_are_busy() {
        for body in ["garbage", "{\"pid\":true}", "[1]", "{\"pid\":1}"] {
            let (_tmp, lock) = setup();
            write_owner(&lock, body);
            assert!(
                matches!(lock.try_acquire(), Err(StoreError::LockHeld(_))),
                "{body}"
            );
            let status = lock.status();
            assert!(
                ["invalid", "locked_alive"].contains(&status),
                "{body}: {status}"
            );
        }
    }

    #[test]
    fn fresh_empty_lock_dir_is_initializing() {
        let (_tmp, lock) = setup();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&lock.dir)
            .unwrap();
        std::fs::set_permissions(&lock.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(lock.status(), "locked_initializing");
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::LockHeld(m)) if m == "state lock owner is not readable yet")
        );
    }
}
