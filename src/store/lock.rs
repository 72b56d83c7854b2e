//! The reference's directory lock (reference-runtime §5), so the Python tool
//! and ours exclude each other: a lock directory `L` holding `owner.json`,
//! a sibling initializer `.<name>.initializing.json`, and a reclaim claim
//! `L/.reclaim.json` for stale locks (dead pid, 30 s grace by mtime).

use serde_json::{Value, json};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::error::{StoreError, StoreResult};
use super::paths::is_symlink;
use super::secure::{
    DIR_MODE, FILE_MODE, check_metadata, create_exclusive, create_exclusive_locked, flock_held,
    open_regular, open_secure_dir, read_limited, sync_dir,
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
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let namespace = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    (read("/proc/sys/kernel/random/boot_id"), namespace)
}

fn record(token: &str, nonce_key: &str) -> Vec<u8> {
    let session = nix::unistd::getsid(None).map(|p| p.as_raw()).unwrap_or(0);
    let now = format_now(chrono::Utc::now());
    let (boot_id, pid_namespace) = identity();
    let mut bytes = canonical::to_vec(&json!({
        "boot_id": boot_id,
        "created_at": now,
        "pid": std::process::id(),
        "pid_namespace": pid_namespace,
        "session_id": session,
        nonce_key: token,
    }));
    bytes.push(b'\n');
    bytes
}

/// `mkdir(dir, 0700)`: a lock directory is never visible with a wider mode,
/// which every later acquirer would refuse as "insecure" for good. (The
/// chmod that makes it umask-independent follows in `publish`.)
fn create_lock_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(DIR_MODE).create(dir)
}

fn fresh_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn is_young(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .map(|mtime| {
            SystemTime::now()
                .duration_since(mtime)
                .map(|age| age < GRACE)
                .unwrap_or(true)
        })
        .unwrap_or(false)
}

/// Read a small JSON record through a no-follow descriptor with an exact mode.
fn read_record(path: &Path) -> StoreResult<Option<Value>> {
    let mut file = open_regular(path, "state lock record", Some(FILE_MODE))?;
    let bytes = read_limited(&mut file, path, 65536)?;
    Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
}

fn pid_of(record: &Value) -> Option<PidState> {
    match record.get("pid") {
        Some(Value::Bool(_)) | None => None,
        Some(pid) => probe_pid(pid),
    }
}

/// Who holds a lock, for a person reading a busy refusal (issue 15).
fn holder(record: &Value, dir: &Path) -> String {
    let field = |key: &str| match record.get(key) {
        Some(Value::String(text)) => Some(text.chars().take(64).collect::<String>()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    format!(
        "held by pid {} since {} (lock {})",
        field("pid").unwrap_or_else(|| "unknown".into()),
        field("created_at").unwrap_or_else(|| "an unknown time".into()),
        dir.display()
    )
}

/// The lock's paths, and the run whose held directory they must stay in.
///
/// The protocol itself works on paths, as the reference's does: the lock
/// that excludes the Python tool is the one its path names. A lock of a
/// validated run (`anchored`) therefore checks before every attempt and
/// after taking the lock that `runs/<id>`, reached again from the held
/// state root, is still the directory we hold; a run moved away or
/// replaced during the wait is refused ([`StoreError::Moved`]), and
/// `locks/` is only ever created inside the held run directory.
#[derive(Debug, Clone)]
pub struct DirLock {
    dir: PathBuf,
    run: Option<super::run::RunDir>,
}

/// Proof that we hold the lock; releasing happens on drop. `_held` keeps
/// the flock on `owner.json` for the lock's whole lifetime.
#[derive(Debug)]
pub struct LockGuard {
    dir: PathBuf,
    token: String,
    _held: std::fs::File,
}

impl DirLock {
    pub fn new(dir: PathBuf) -> DirLock {
        DirLock { dir, run: None }
    }

    /// The state root's lock of a recovery of run `run_id`.
    pub fn recovery(root: &Path, run_id: &str) -> DirLock {
        DirLock::new(root.join("locks").join(format!("recovery-{run_id}")))
    }

    /// The lock of `run`, which holds its directory (see [`DirLock`]).
    pub fn anchored(self, run: super::run::RunDir) -> DirLock {
        DirLock {
            run: Some(run),
            ..self
        }
    }

    fn owner(&self) -> PathBuf {
        self.dir.join("owner.json")
    }

    fn initializer(&self) -> PathBuf {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dir
            .with_file_name(format!(".{name}.initializing.json"))
    }

    fn claim(&self) -> PathBuf {
        self.dir.join(".reclaim.json")
    }

    fn retired(&self, base: &Path, what: &str) -> PathBuf {
        let name = base
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        base.with_file_name(format!("{name}.{what}.{}", fresh_token()))
    }

    /// Acquire, waiting briefly while a live holder works. An anchored
    /// lock is only returned while its run is still the directory we hold.
    pub fn acquire(&self) -> StoreResult<LockGuard> {
        let started = std::time::Instant::now();
        loop {
            match self.try_acquire() {
                Err(StoreError::Busy(_)) if started.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(guard) => {
                    if let Some(run) = &self.run {
                        // Dropping the guard releases the lock we took.
                        run.recheck()?;
                    }
                    return Ok(guard);
                }
                Err(error) => {
                    // A run moved during an attempt makes its path steps
                    // fail (ENOENT, say): the refusal says what happened.
                    if let Some(run) = &self.run {
                        run.recheck()?;
                    }
                    return Err(error);
                }
            }
        }
    }

    /// One attempt of the reference's protocol.
    pub fn try_acquire(&self) -> StoreResult<LockGuard> {
        let token = fresh_token();
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        if let Some(run) = &self.run {
            run.ensure_locks_dir()?;
        } else if std::fs::symlink_metadata(parent).is_err() {
            // Never recursive: a run directory that is gone stays gone.
            std::fs::DirBuilder::new()
                .mode(DIR_MODE)
                .create(parent)
                .map_err(|e| StoreError::io(&e, parent))?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| StoreError::io(&e, parent))?;
            if let Some(grand) = parent.parent() {
                sync_dir(grand)?;
            }
        }
        open_secure_dir(parent, "lock parent directory").map_err(|e| match e {
            StoreError::Invalid(_) | StoreError::Insecure(_) => StoreError::Insecure(
                "lock parent directory does not have the required secure mode".into(),
            ),
            other => other,
        })?;
        if !self.dir.exists() {
            let held = self.claim_initializer(&token)?;
            match create_lock_dir(&self.dir) {
                Ok(()) => return self.publish(token, held),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(self.initializer());
                }
                Err(e) => {
                    let _ = std::fs::remove_file(self.initializer());
                    return Err(StoreError::io(&e, &self.dir));
                }
            }
        }
        self.reclaim(token)
    }

    fn publish(&self, token: String, held: std::fs::File) -> StoreResult<LockGuard> {
        // From the rename on, owner.json carries our token: if a later step
        // fails, dropping the guard releases the lock instead of leaving it
        // held by a process that reported a failure.
        let guard = LockGuard {
            dir: self.dir.clone(),
            token,
            _held: held,
        };
        let result = (|| {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| StoreError::io(&e, &self.dir))?;
            std::fs::rename(self.initializer(), self.owner())
                .map_err(|e| StoreError::io(&e, &self.owner()))
        })();
        match result {
            Ok(()) => Ok(guard),
            Err(e) => {
                let _ = std::fs::remove_file(self.initializer());
                drop(guard);
                Err(e)
            }
        }
    }

    /// Create the initializer, flock-ed; the flock stays with the inode
    /// when it becomes `owner.json`.
    fn claim_initializer(&self, token: &str) -> StoreResult<std::fs::File> {
        let init = self.initializer();
        for _ in 0..2 {
            // The lock only has to exclude live writers: after a crash it
            // is stale whether or not it reached the disk, so nothing in
            // taking or releasing it is synced.
            match create_exclusive_locked(&init, &record(token, "token")) {
                Ok(file) => return Ok(file),
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::AlreadyExists) => {}
                Err(e) => return Err(e),
            }
            if is_symlink(&init) {
                return Err(StoreError::busy("state lock initializer is unsafe"));
            }
            let existing = match read_record(&init) {
                Ok(v) => v,
                Err(e @ StoreError::Insecure(_)) => return Err(e),
                Err(_) => return Err(StoreError::busy("state lock initializer is unsafe")),
            };
            let pid = existing.as_ref().and_then(pid_of);
            if is_young(&init)
                || matches!(pid, Some(PidState::Alive | PidState::Unknown))
                || flock_held(&init)
            {
                return Err(StoreError::busy("state lock initialization is active"));
            }
            let stale = self.retired(&init, "stale");
            if std::fs::rename(&init, &stale).is_err() {
                return Err(StoreError::busy("state lock initializer changed"));
            }
            let _ = std::fs::remove_file(&stale);
        }
        Err(StoreError::busy(
            "state lock initializer could not be claimed",
        ))
    }

    /// The slow path: the lock directory exists.
    fn reclaim(&self, token: String) -> StoreResult<LockGuard> {
        if is_symlink(&self.dir) || is_symlink(&self.owner()) {
            return Err(StoreError::busy("state lock path is unsafe"));
        }
        let secure = std::fs::symlink_metadata(&self.dir)
            .map_err(|_| StoreError::busy("state lock changed during recovery"))
            .and_then(|m| {
                check_metadata(&m, "state lock", DIR_MODE)
                    .map_err(|_| StoreError::busy("state lock path is insecure"))
            });
        secure?;
        if let Ok(meta) = std::fs::symlink_metadata(self.owner())
            && check_metadata(&meta, "state lock owner", FILE_MODE).is_err()
        {
            return Err(StoreError::busy("state lock path is insecure"));
        }
        let owner_before = read_record(&self.owner()).ok().flatten();
        match &owner_before {
            None => {
                let init = self.initializer();
                if std::fs::symlink_metadata(&init).is_ok() {
                    let existing = match read_record(&init) {
                        Ok(v) => v,
                        Err(_) => return Err(StoreError::busy("state lock initializer is unsafe")),
                    };
                    if existing.is_none() && std::fs::metadata(&init).is_ok_and(|m| m.len() > 0) {
                        return Err(StoreError::busy("state lock initializer is unsafe"));
                    }
                    if matches!(
                        existing.as_ref().and_then(pid_of),
                        Some(PidState::Alive | PidState::Unknown)
                    ) || flock_held(&init)
                    {
                        return Err(StoreError::busy("state lock initialization is active"));
                    }
                }
                if std::fs::symlink_metadata(self.owner()).is_ok() || is_young(&self.dir) {
                    return Err(StoreError::busy("state lock owner is not readable yet"));
                }
            }
            Some(record) => {
                // A pid that looks dead may live in another PID namespace:
                // the holder's flock is the proof either way.
                if pid_of(record) != Some(PidState::Dead) || flock_held(&self.owner()) {
                    return Err(StoreError::busy(format!(
                        "state lock owner is live or unknown: {}",
                        holder(record, &self.dir)
                    )));
                }
            }
        }
        self.elect(&token)?;
        let owner_now = read_record(&self.owner()).ok().flatten();
        let owner_present = std::fs::symlink_metadata(self.owner()).is_ok();
        let unchanged = match &owner_before {
            None => !owner_present,
            Some(before) => owner_now.as_ref() == Some(before),
        };
        if !unchanged {
            let _ = std::fs::remove_file(self.claim());
            return Err(StoreError::busy("state lock owner changed during recovery"));
        }
        let held = self.claim_initializer(&token)?;
        let retired = self.retired(&self.dir, "retired");
        let outcome = match std::fs::rename(&self.dir, &retired) {
            Err(_) => Err(StoreError::busy("state lock recovery lost its election")),
            Ok(()) => match create_lock_dir(&self.dir) {
                Err(_) => Err(StoreError::busy(
                    "state lock was reacquired during recovery",
                )),
                Ok(()) => self.publish(token, held),
            },
        };
        let _ = std::fs::remove_file(self.initializer());
        let _ = std::fs::remove_dir_all(&retired);
        outcome
    }

    fn elect(&self, token: &str) -> StoreResult<()> {
        let claim = self.claim();
        match create_exclusive(&claim, &record(token, "nonce")) {
            Ok(()) => return Ok(()),
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::AlreadyExists) => {}
            Err(_) => return Err(StoreError::busy("state lock recovery lost its election")),
        }
        if is_symlink(&claim) || !std::fs::symlink_metadata(&claim).is_ok_and(|m| m.is_file()) {
            return Err(StoreError::busy("state lock recovery claim is unsafe"));
        }
        // Like the reference: a claim whose pid cannot be read (a claimant
        // killed between creating the file and writing it leaves it empty)
        // is stale once the grace has passed; only a live or unknown pid
        // keeps it.
        let existing = read_record(&claim)?;
        if is_young(&claim)
            || matches!(
                existing.as_ref().and_then(pid_of),
                Some(PidState::Alive | PidState::Unknown)
            )
        {
            return Err(StoreError::busy("state lock recovery is already claimed"));
        }
        let stale = self.dir.join(format!(".reclaim.stale.{}", fresh_token()));
        std::fs::rename(&claim, &stale)
            .map_err(|_| StoreError::busy("state lock recovery claim changed"))?;
        let _ = std::fs::remove_file(&stale);
        match create_exclusive(&claim, &record(token, "nonce")) {
            Ok(()) => Ok(()),
            Err(_) => Err(StoreError::busy("state lock recovery claim was reacquired")),
        }
    }

    /// `lock_owner_status` of the reference's diagnosis.
    pub fn status(&self) -> &'static str {
        let owner = self.owner();
        let Ok(meta) = std::fs::symlink_metadata(&owner) else {
            let dir_exists = std::fs::symlink_metadata(&self.dir).is_ok();
            let init_exists = std::fs::symlink_metadata(self.initializer()).is_ok();
            return if dir_exists || init_exists {
                "locked_initializing"
            } else {
                "unlocked"
            };
        };
        if !meta.is_file() {
            return "unsafe";
        }
        let value = std::fs::read(&owner)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        match value
            .as_ref()
            .and_then(|v| v.as_object())
            .and_then(|o| o.get("pid"))
        {
            Some(Value::Bool(_)) | None => "invalid",
            Some(pid) => match probe_pid(pid) {
                None => "invalid",
                Some(PidState::Alive) => "locked_alive",
                Some(PidState::Dead) if flock_held(&owner) => "locked_alive",
                Some(PidState::Dead) => "locked_dead",
                Some(PidState::Unknown) => "locked_unknown",
            },
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let owner = self.dir.join("owner.json");
        let ours = std::fs::symlink_metadata(&owner).is_ok_and(|m| m.is_file())
            && std::fs::read(&owner)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .and_then(|v| {
                    v.get("token")
                        .and_then(Value::as_str)
                        .map(|t| t == self.token)
                })
                .unwrap_or(false);
        if ours {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::DirBuilderExt;

    fn setup() -> (tempfile::TempDir, DirLock) {
        let tmp = tempfile::tempdir().unwrap();
        let locks = tmp.path().join("locks");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&locks)
            .unwrap();
        std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o700)).unwrap();
        let lock = DirLock::new(locks.join("receipt"));
        (tmp, lock)
    }

    fn write_owner(lock: &DirLock, body: &str) {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&lock.dir)
            .unwrap();
        std::fs::set_permissions(&lock.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        create_exclusive(&lock.owner(), body.as_bytes()).unwrap();
    }

    #[test]
    fn acquire_and_release() {
        let (_tmp, lock) = setup();
        assert_eq!(lock.status(), "unlocked");
        let guard = lock.try_acquire().unwrap();
        assert_eq!(lock.status(), "locked_alive");
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::Busy(m)) if m.starts_with("state lock owner is live or unknown: held by pid "))
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
            matches!(lock.try_acquire(), Err(StoreError::Busy(m)) if m.starts_with("state lock owner is live or unknown: held by pid "))
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
    fn our_guard_holds_the_flock_and_records_who_we_are() {
        let (_tmp, lock) = setup();
        let guard = lock.try_acquire().unwrap();
        assert!(flock_held(&lock.owner()));
        let record: Value = serde_json::from_slice(&std::fs::read(lock.owner()).unwrap()).unwrap();
        assert_eq!(record["pid"], std::process::id());
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
        create_exclusive(&lock.claim(), b"").unwrap();
        assert!(
            matches!(lock.try_acquire(), Err(StoreError::Busy(m)) if m == "state lock recovery is already claimed")
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
                matches!(lock.try_acquire(), Err(StoreError::Busy(_))),
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
            matches!(lock.try_acquire(), Err(StoreError::Busy(m)) if m == "state lock owner is not readable yet")
        );
    }
}
