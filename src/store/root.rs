//! The state root, held once per command (DEVIATIONS 50). The CLI
//! begins a [`StateRoot`] on the root it discovered and passes it down to
//! every store call of the command; the first call that needs the root
//! opens it by its path (`O_NOFOLLOW | O_DIRECTORY`: the root's own path
//! is the only one ever resolved) and every later call of the command
//! reuses that descriptor. Every path inside the root — `handles/`,
//! `reports/`, `quarantine/`, `locks/`, `config.json`, `derived.key`,
//! `runs/...` — is then reached from it with `openat`, one component at a
//! time, never following a symlink ([`StateRoot::place_inside`]): a
//! directory of the root renamed away or replaced by a symlink cannot
//! redirect a read or a write.
//!
//! A path is placed through the root it may lie in ([`StateRoot::at`]);
//! only a path outside the root (a file the user names) is opened by path.
//! The store's unit tests begin their roots the same way the CLI does.
//! Directories reached from the held root carry a handle to the command's
//! state, so that a rename or removal through them forgets what it may
//! have changed, and the files kept under a lock are found from the entry.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::error::{StoreError, StoreResult};
use super::held::{HeldDir, Loc};
use nix::libc;

/// The state root of one command: its resolved path and what the command
/// holds of it. Cloning is cheap (the state is shared); the root's
/// descriptor is closed once the last clone and every file reached from
/// it are dropped. One per command: the MCP server runs each tool call as
/// a whole command with its own root.
#[derive(Debug, Clone)]
pub struct StateRoot {
    shared: Arc<Shared>,
}

/// What a command holds of its state root, shared by the [`StateRoot`]
/// and (weakly) by the directories reached from it.
#[derive(Debug)]
pub(super) struct Shared {
    path: PathBuf,
    current: Mutex<Current>,
}

#[derive(Debug, Default)]
struct Current {
    held: Option<Arc<HeldDir>>,
    /// The directories of the root walked so far (by relative path): the
    /// command reaches `runs/<id>` or `handles` once, not at every file.
    /// Each is the directory we opened, whatever its name shows later;
    /// forgotten when this command renames or removes anything
    /// ([`forget_walked_in`]), so a directory it replaces is walked anew.
    walked: std::collections::BTreeMap<PathBuf, Arc<HeldDir>>,
    /// The root's derived-file key once this command has read it: a key
    /// replaced during the command only makes the MACs it writes fail to
    /// verify later, which costs that reader a full replay.
    key: Option<Vec<u8>>,
    /// How many locks of the root this command holds now.
    locks_held: u32,
    /// Derived files this command read while it held a lock, opened
    /// read-write so that rewriting one in place later needs no second
    /// open and check ([`kept`]). Forgotten with the walked directories (a
    /// rename or removal may have put another file at the name) and when
    /// the last lock is released.
    kept: Vec<KeptFile>,
}

#[derive(Debug)]
struct KeptFile {
    /// The directory (device, inode) and the name the file was opened at.
    dir: (u64, u64),
    name: std::ffi::OsString,
    file: Arc<std::fs::File>,
    /// Its length as this command last left it.
    len: u64,
    /// Opened to append (the receipt), not to be rewritten in place.
    appends: bool,
    /// Opened before the lock was taken ([`keep_before_lock`]): used under
    /// the lock only once its name is seen to still name it, at the length
    /// it has then (another writer may have rewritten it meanwhile).
    before_lock: bool,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut Current) -> T) -> T {
        // Poisoned only by a panic inside one of these short closures,
        // none of which leaves the state half-changed: used as it is.
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut cur)
    }
}

impl Shared {
    /// A lock of the root taken by this command (see `Current::kept`).
    fn lock_taken(&self) {
        self.with(|cur| cur.locks_held += 1);
    }

    /// A lock of the root released; with the last one the kept files go.
    fn lock_released(&self) {
        self.with(|cur| {
            cur.locks_held = cur.locks_held.saturating_sub(1);
            if cur.locks_held == 0 {
                cur.kept.clear();
            }
        });
    }
}

impl std::ops::Deref for StateRoot {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.shared.path
    }
}

impl AsRef<Path> for StateRoot {
    fn as_ref(&self) -> &Path {
        &self.shared.path
    }
}

/// A path as this command reaches it: inside its state root (lexically)
/// from the held root, never following a symlink; else, a file the user
/// names outside the root, by its path.
#[derive(Debug, Clone, Copy)]
pub struct InRoot<'a> {
    root: &'a StateRoot,
    path: &'a Path,
}

impl<'a> InRoot<'a> {
    pub fn root(&self) -> &'a StateRoot {
        self.root
    }

    pub fn path(&self) -> &'a Path {
        self.path
    }
}

impl StateRoot {
    /// Begin a command on the state root `root` (an absolute, resolved
    /// path; empty for a command that reads no root, which then holds
    /// nothing). Dropping it ends the command's hold on the root.
    pub fn begin(root: &Path) -> StateRoot {
        StateRoot {
            shared: Arc::new(Shared {
                path: root.to_path_buf(),
                current: Mutex::new(Current::default()),
            }),
        }
    }

    /// The context of a command that reads no state root (offline
    /// verification, a new key file): every path it names is outside.
    pub fn rootless() -> StateRoot {
        StateRoot::begin(Path::new(""))
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// `path` as this command reaches it (see [`InRoot`]).
    pub fn at<'a>(&'a self, path: &'a Path) -> InRoot<'a> {
        InRoot { root: self, path }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Current) -> T) -> T {
        self.shared.with(f)
    }

    /// A handle to this command's state for the directories placed
    /// through it.
    pub(super) fn downgrade(&self) -> Weak<Shared> {
        Arc::downgrade(&self.shared)
    }

    /// The held state root: the descriptor opened the first time (opened
    /// now if this is the first time). Never follows a symlink at the
    /// root's last component.
    pub fn held(&self) -> std::io::Result<Arc<HeldDir>> {
        if let Some(held) = self.with(|cur| cur.held.clone()) {
            return Ok(held);
        }
        let held =
            Arc::new(HeldDir::open_path(&self.shared.path)?.in_root(Arc::downgrade(&self.shared)));
        self.with(|cur| cur.held = Some(Arc::clone(&held)));
        Ok(held)
    }

    /// `path` relative to the root, when it lies strictly inside it
    /// (lexically: the root is absolute and resolved, and the store builds
    /// its paths by joining names to it).
    fn relative(&self, path: &Path) -> Option<PathBuf> {
        let root = &self.shared.path;
        if root.as_os_str().is_empty() {
            return None;
        }
        let relative = path.strip_prefix(root).ok()?;
        if relative.as_os_str().is_empty() {
            return None;
        }
        Some(relative.to_path_buf())
    }

    /// Whether `path` is inside this state root.
    pub fn is_inside(&self, path: &Path) -> bool {
        self.relative(path).is_some()
    }

    /// Whether `path` is this state root itself.
    pub fn is_root(&self, path: &Path) -> bool {
        !self.shared.path.as_os_str().is_empty() && self.shared.path == path
    }
}

/// Walk `relative` from the held `dir` (whose path is `base`), refusing a
/// symlink or a non-directory at any component with the path it is at.
pub fn walk(dir: &Arc<HeldDir>, base: &Path, relative: &Path) -> StoreResult<Arc<HeldDir>> {
    use std::path::Component;
    let mut dir = Arc::clone(dir);
    let mut at = base.to_path_buf();
    for component in relative.components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => {
                return Err(StoreError::invalid(format!(
                    "'{}' leaves the state root",
                    base.join(relative).display()
                )));
            }
        };
        at.push(name);
        let entry = Loc::new(Arc::clone(&dir), name);
        dir = match entry.open_dir() {
            Ok(child) => Arc::new(child),
            Err(e) => return Err(component_error(&e, &entry, &at, kind_of(base, &at))),
        };
    }
    Ok(dir)
}

/// Why a component could not be opened as a directory: a symlink is a
/// state-root rule broken (exit 2), anything else the OS error.
fn component_error(error: &std::io::Error, entry: &Loc, at: &Path, kind: String) -> StoreError {
    let errno = error.raw_os_error();
    if matches!(errno, Some(libc::ELOOP) | Some(libc::ENOTDIR)) && entry.is_symlink() {
        return StoreError::invalid(format!("{kind} must not be a symlink"));
    }
    StoreError::io(error, at)
}

/// What a directory of the state root is called in a refusal, as the
/// reference's own checks call it (`state-root runs`, `run directory`).
fn kind_of(base: &Path, at: &Path) -> String {
    let relative = at.strip_prefix(base).unwrap_or(at);
    let names: Vec<_> = relative.iter().map(|n| n.to_string_lossy()).collect();
    match names.as_slice() {
        [name] => format!("state-root {name}"),
        [runs, _] if runs == "runs" => "run directory".to_string(),
        _ => format!("'{}'", at.display()),
    }
}

impl StateRoot {
    /// Where `path` is, when it lies inside this state root: an entry of
    /// the directory reached from the held root, one component at a time,
    /// with no symlink followed. `None` for a path outside the root (a
    /// file the user names), which the caller opens as a path.
    pub fn place_inside(&self, path: &Path) -> StoreResult<Option<Loc>> {
        let Some(relative) = self.relative(path) else {
            return Ok(None);
        };
        let Some(name) = relative.file_name() else {
            return Ok(None);
        };
        let dir = match relative.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => self.walked(parent)?,
            _ => self.held().map_err(|e| StoreError::io(&e, self.path()))?,
        };
        Ok(Some(Loc::new(dir, name)))
    }

    /// The directory `relative` of the held root: walked once per command
    /// (see `Current::walked`).
    fn walked(&self, relative: &Path) -> StoreResult<Arc<HeldDir>> {
        let root = self.path();
        // From the deepest directory of the path walked before, else the root.
        let known = self.with(|cur| {
            relative
                .ancestors()
                .find_map(|at| Some((at.to_path_buf(), cur.walked.get(at)?.clone())))
        });
        let from_root = || {
            let held = self.held().map_err(|e| StoreError::io(&e, root))?;
            // Deeper than one name, and names only (no `.` or `..`, which
            // the walk refuses): one `openat2` as safe as the walk (no
            // symlink at any component, nothing outside the root); the
            // walk when it fails, to say why.
            let names_only = relative
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if names_only
                && relative.components().nth(1).is_some()
                && let Some(dir) = held.descend(relative)
            {
                return Ok(Arc::new(dir));
            }
            walk(&held, root, relative)
        };
        let dir = match known {
            Some((at, dir)) if at == relative => return Ok(dir),
            // A refusal is said as a walk from the root says it (`run
            // directory`, `state-root runs`), not from where this one began.
            Some((at, dir)) => walk(
                &dir,
                &root.join(&at),
                relative.strip_prefix(&at).unwrap_or(relative),
            )
            .or_else(|_| from_root())?,
            None => from_root()?,
        };
        self.with(|cur| cur.walked.insert(relative.to_path_buf(), Arc::clone(&dir)));
        Ok(dir)
    }

    /// The directory at `path` inside this root, walked once per command;
    /// `None` outside the root or when it cannot be reached (the caller's
    /// own open then says why, in its words).
    pub fn walked_dir(&self, path: &Path) -> Option<Arc<HeldDir>> {
        let relative = self.relative(path)?;
        self.walked(&relative).ok()
    }

    /// Remember `dir`, opened and checked by the caller, as the directory
    /// at `path` inside this root (as if walked to).
    pub(super) fn remember_walked(&self, path: &Path, dir: &Arc<HeldDir>) {
        let Some(relative) = self.relative(path) else {
            return;
        };
        self.with(|cur| cur.walked.insert(relative, Arc::clone(dir)));
    }

    /// The file at `path`, inside this root and deeper than one name
    /// (names only), whose directory this command has not opened yet:
    /// opened with `flags` from the held root in one `openat2` (no symlink
    /// at any component, nothing outside the root), its directory not
    /// held. The directory's own rule (a 0700 directory of ours) is the
    /// caller's, checked by an `lstat` (`secure::check_secure_dir`).
    /// `None` otherwise, or when the call fails: the caller then walks,
    /// whose refusals say why.
    pub fn open_file_beneath(
        &self,
        path: &Path,
        flags: rustix::fs::OFlags,
    ) -> Option<std::fs::File> {
        let relative = self.relative(path)?;
        let parent = relative.parent()?;
        let names_only = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !names_only || parent.as_os_str().is_empty() {
            return None;
        }
        // A directory already open costs nothing more: the usual way.
        if self.with(|cur| cur.walked.contains_key(parent)) {
            return None;
        }
        self.held().ok()?.open_file_beneath(&relative, flags)
    }

    /// The `lstat` of `path`, a directory directly in the held root that
    /// this command has not opened: `None` for any other path, or when it
    /// cannot be looked at.
    pub fn lstat_unopened_top_dir(&self, path: &Path) -> Option<rustix::fs::Stat> {
        let relative = self.relative(path)?;
        let mut names = relative.components();
        let (Some(std::path::Component::Normal(name)), None) = (names.next(), names.next()) else {
            return None;
        };
        if self.with(|cur| cur.walked.contains_key(&relative)) {
            return None;
        }
        let stat = Loc::new(self.held().ok()?, name).lstat().ok()??;
        (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory)
            .then_some(stat)
    }

    /// The directory at `path` if this command has walked to it already.
    pub fn known_dir(&self, path: &Path) -> Option<Arc<HeldDir>> {
        let relative = self.relative(path)?;
        self.with(|cur| cur.walked.get(&relative).cloned())
    }

    /// The key this command read from its root's `derived.key`, if it did.
    pub(super) fn remembered_key(&self) -> Option<Vec<u8>> {
        self.with(|cur| cur.key.clone())
    }

    /// Remember the key read from this root.
    pub(super) fn remember_key(&self, key: &[u8]) {
        self.with(|cur| cur.key = Some(key.to_vec()));
    }

    /// Forget the directories walked so far (see [`forget_walked_in`]),
    /// as a rename or removal of this command does.
    #[cfg(test)]
    fn forget_walked(&self) {
        forget_walked_in(&self.shared);
    }

    /// Whether a derived file read now may be opened read-write and kept:
    /// only while this command holds a lock, so that read-only commands
    /// never open a file for writing.
    pub(super) fn may_keep(&self) -> bool {
        self.with(|cur| cur.locks_held > 0)
    }

    /// The directory at `path` inside this root, opened from the held
    /// root (see [`Self::place_inside`]); `None` outside it.
    pub fn dir_inside(&self, path: &Path) -> StoreResult<Option<HeldDir>> {
        match self.place_inside(path)? {
            Some(loc) => loc
                .open_dir()
                .map(Some)
                .map_err(|e| component_error(&e, &loc, path, kind_of(self.path(), path))),
            None => Ok(None),
        }
    }

    /// The directory at `path` when it is this root (the held descriptor)
    /// or inside it (reached from the held root); `None` for a path
    /// outside the root.
    pub fn dir_at(&self, path: &Path) -> StoreResult<Option<Arc<HeldDir>>> {
        if self.is_root(path) {
            return self.held().map(Some).map_err(|e| StoreError::io(&e, path));
        }
        Ok(self.dir_inside(path)?.map(Arc::new))
    }

    /// Remove `path` (and everything in it) inside this state root through
    /// descriptors; outside it, by path.
    pub fn remove_tree(&self, path: &Path) -> std::io::Result<()> {
        match self.place_inside(path) {
            Ok(Some(at)) => at.remove_tree(),
            Ok(None) => match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
                _ => std::fs::remove_file(path),
            },
            Err(e) => Err(std::io::Error::other(e.message().to_string())),
        }
    }

    /// Remove the file `path` (never following a symlink) inside this
    /// state root through the held root; outside it, by path.
    pub fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        match self.place_inside(path) {
            Ok(Some(at)) => at.remove_file(),
            Ok(None) => std::fs::remove_file(path),
            Err(e) => Err(std::io::Error::other(e.message().to_string())),
        }
    }

    /// `lstat` of `path` (inside this state root, from the held root):
    /// `None` when nothing is there or it cannot be reached.
    pub fn symlink_metadata(&self, path: &Path) -> Option<std::fs::Metadata> {
        match self.place_inside(path) {
            Ok(Some(at)) => at.symlink_metadata().ok().flatten(),
            Ok(None) => std::fs::symlink_metadata(path).ok(),
            Err(_) => None,
        }
    }

    /// The entry names of the directory `path` (inside this state root,
    /// listed through a descriptor reached from the held root), as paths,
    /// sorted; empty when it cannot be listed.
    pub fn list(&self, path: &Path) -> Vec<PathBuf> {
        let names: Vec<std::ffi::OsString> = match self.dir_at(path) {
            Ok(Some(dir)) => dir.entries().unwrap_or_default(),
            Ok(None) => std::fs::read_dir(path)
                .map(|it| it.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let mut out: Vec<PathBuf> = names.into_iter().map(|n| path.join(n)).collect();
        out.sort();
        out
    }
}

/// Forget the directories walked so far: called by every rename and
/// removal, after which a path may name another directory than before.
pub(super) fn forget_walked_in(shared: &Shared) {
    shared.with(|cur| {
        cur.walked.clear();
        cur.kept.clear();
    });
}

/// Forget what a rename of a file between the entries named `names` may
/// have changed: the walked directories with such a name on their path
/// and the kept files of that name. A rename changes two directory
/// entries and nothing else, and a path resolves through the names on it
/// only, so whatever names neither stays what it was (a lock's initializer
/// renamed into its lock directory leaves the run's directories and files
/// as they were).
pub(super) fn forget_renamed_in(shared: &Shared, names: [&std::ffi::OsStr; 2]) {
    shared.with(|cur| {
        cur.walked
            .retain(|path, _| !path.iter().any(|component| names.contains(&component)));
        cur.kept.retain(|k| !names.contains(&k.name.as_os_str()));
    });
}

/// A lock taken at `at`, a lock directory's entry reached from the state
/// root: the command holds one more lock of its root.
pub(super) fn lock_taken(at: &Loc) {
    if let Some(shared) = at.dir().root_state() {
        shared.lock_taken();
    }
}

/// The lock at `at` released (see [`lock_taken`]).
pub(super) fn lock_released(at: &Loc) {
    if let Some(shared) = at.dir().root_state() {
        shared.lock_released();
    }
}

/// Whether a derived file read now at `at` may be opened read-write and
/// kept (see [`StateRoot::may_keep`]); never for an entry reached from no
/// state root.
pub(super) fn may_keep(at: &Loc) -> bool {
    at.dir()
        .root_state()
        .is_some_and(|shared| shared.with(|cur| cur.locks_held > 0))
}

/// The file kept for `at` to rewrite in place, with its length, if this
/// command has one.
pub(super) fn kept(at: &Loc) -> Option<(Arc<std::fs::File>, u64)> {
    kept_as(at, false)
}

/// The file kept for `at` to append to (the receipt, opened `O_APPEND`
/// when it was first read under the lock), if this command has one.
pub(super) fn kept_for_append(at: &Loc) -> Option<Arc<std::fs::File>> {
    kept_as(at, true).map(|(file, _)| file)
}

fn kept_as(at: &Loc, appends: bool) -> Option<(Arc<std::fs::File>, u64)> {
    let shared = at.dir().root_state()?;
    let dir = at.dir().identity();
    shared.with(|cur| {
        let locked = cur.locks_held > 0;
        let i = cur
            .kept
            .iter()
            .position(|k| k.dir == dir && k.name == at.name() && k.appends == appends)?;
        if cur.kept[i].before_lock {
            if !locked {
                return None;
            }
            // Kept before the lock: used while its name still names it, at
            // the length it has now; else forgotten and opened afresh.
            match length_if_named(&cur.kept[i].file, at) {
                Some(len) => (cur.kept[i].before_lock, cur.kept[i].len) = (false, len),
                None => {
                    cur.kept.remove(i);
                    return None;
                }
            }
        }
        Some((Arc::clone(&cur.kept[i].file), cur.kept[i].len))
    })
}

/// The length of `file` when the name `at` still names it (one `fstat`,
/// one `lstat`).
fn length_if_named(file: &std::fs::File, at: &Loc) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let now = file.metadata().ok()?;
    let named = at.lstat().ok()??;
    (now.is_file() && (now.dev(), now.ino()) == (named.st_dev, named.st_ino)).then_some(now.len())
}

/// Keep `file` (opened read-write at `at` and checked) for a rewrite.
pub(super) fn keep(at: &Loc, file: &Arc<std::fs::File>, len: u64) {
    keep_as(at, file, len, false);
}

/// Keep `file` (opened read-write and `O_APPEND` at `at`) for an append.
pub(super) fn keep_for_append(at: &Loc, file: &Arc<std::fs::File>) {
    keep_as(at, file, 0, true);
}

/// Keep `file` (opened read-write at `at` and checked before the lock was
/// taken) for the rewrite under the lock: a mutation reads its checkpoint
/// before the lock (the run's manifest copy is in it) and so opens it once.
pub(super) fn keep_before_lock(at: &Loc, file: &Arc<std::fs::File>, len: u64) {
    keep_entry(at, file, len, false, true);
}

fn keep_as(at: &Loc, file: &Arc<std::fs::File>, len: u64, appends: bool) {
    keep_entry(at, file, len, appends, false);
}

fn keep_entry(at: &Loc, file: &Arc<std::fs::File>, len: u64, appends: bool, before_lock: bool) {
    let Some(shared) = at.dir().root_state() else {
        return;
    };
    let dir = at.dir().identity();
    shared.with(|cur| {
        if before_lock || cur.locks_held > 0 {
            cur.kept.retain(|k| !(k.dir == dir && k.name == at.name()));
            cur.kept.push(KeptFile {
                dir,
                name: at.name().to_os_string(),
                file: Arc::clone(file),
                len,
                appends,
                before_lock,
            });
        }
    });
}

/// The kept file at `at` is now `len` bytes long.
pub(super) fn kept_len(at: &Loc, len: u64) {
    let Some(shared) = at.dir().root_state() else {
        return;
    };
    let dir = at.dir().identity();
    shared.with(|cur| {
        if let Some(kept) = cur
            .kept
            .iter_mut()
            .find(|k| k.dir == dir && k.name == at.name())
        {
            kept.len = len;
        }
    });
}

/// Whether the path `root` still names the state root we hold: a state
/// root renamed away (and perhaps replaced by a symlink to a copy) while a
/// command waited for a lock is no longer where other writers look.
pub fn still_named(held: &HeldDir, root: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // One `lstat`: a symlink put in its place has another identity.
    std::fs::symlink_metadata(root)
        .is_ok_and(|now| now.is_dir() && (now.dev(), now.ino()) == held.identity())
}

/// The refusal when the state root's path no longer names the root held.
pub fn moved_root(root: &Path) -> StoreError {
    StoreError::Moved(format!(
        "state root {} was moved or replaced after this command opened it; nothing was written (run `doctor`)",
        root.display()
    ))
}

impl<'a> InRoot<'a> {
    /// What is at this path, in one `lstat`: `None` for nothing, else
    /// whether it is a symlink (inside the state root, from the held root;
    /// by path where it cannot be reached so).
    pub fn entry_is_symlink(&self) -> Option<bool> {
        let path = super::paths::strip_trailing_slashes(self.path);
        if let Ok(Some(at)) = self.root.place_inside(&path) {
            let stat = at.lstat().ok()??;
            return Some(
                rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Symlink,
            );
        }
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| m.file_type().is_symlink())
    }

    /// True when the final component is a symlink (`lstat`; inside the
    /// state root, from the held root).
    pub fn is_symlink(&self) -> bool {
        self.entry_is_symlink() == Some(true)
    }

    /// True when anything (even a dangling symlink) is here (`lstat`;
    /// inside the state root, from the held root).
    pub fn exists_no_follow(&self) -> bool {
        if let Ok(Some(at)) = self.root.place_inside(self.path) {
            return at.exists();
        }
        std::fs::symlink_metadata(self.path).is_ok()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_kept_before_the_lock_is_used_under_it_only_while_its_name_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("state");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("checkpoint.json"), b"first").unwrap();
        let state = StateRoot::begin(&root);
        let at = state
            .place_inside(&root.join("checkpoint.json"))
            .unwrap()
            .unwrap();
        let open = || Arc::new(std::fs::File::open(root.join("checkpoint.json")).unwrap());
        keep_before_lock(&at, &open(), 5);
        assert!(kept(&at).is_none(), "not used before the lock");
        // Rewritten in place meanwhile: under the lock, the same file at
        // the length it has now.
        std::fs::write(root.join("checkpoint.json"), b"second, longer").unwrap();
        lock_taken(&at);
        let (_, len) = kept(&at).expect("still the file at its name");
        assert_eq!(len, 14);
        // The lock's own rename of another name keeps it ...
        forget_renamed_in(
            &state.shared,
            [".receipt.initializing.json".as_ref(), "owner.json".as_ref()],
        );
        assert!(kept(&at).is_some());
        // ... a rename of its own name does not.
        forget_renamed_in(&state.shared, ["checkpoint.json".as_ref(), "x".as_ref()]);
        assert!(kept(&at).is_none());
        lock_released(&at);
        // Replaced by another file before the lock: opened afresh.
        keep_before_lock(&at, &open(), 14);
        std::fs::write(root.join("other"), b"other").unwrap();
        std::fs::rename(root.join("other"), root.join("checkpoint.json")).unwrap();
        lock_taken(&at);
        assert!(kept(&at).is_none(), "another file has the name now");
        lock_released(&at);
    }

    #[test]
    fn a_rootless_command_holds_nothing_and_places_every_path_by_path() {
        // An empty root would be a prefix of every relative path: it holds
        // nothing instead.
        let root = StateRoot::rootless();
        for path in ["", "/", "x", "runs/x", "/tmp/x"] {
            let path = Path::new(path);
            assert!(!root.is_root(path) && !root.is_inside(path), "{path:?}");
            assert!(root.place_inside(path).unwrap().is_none(), "{path:?}");
        }
    }

    #[test]
    fn paths_inside_the_root_are_reached_from_one_held_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("state");
        std::fs::create_dir_all(root.join("handles")).unwrap();
        let outside = root.parent().unwrap().join("elsewhere");
        std::fs::create_dir(&outside).unwrap();
        let state = StateRoot::begin(&root);
        assert!(state.is_root(&root) && state.is_inside(&root.join("handles")));
        let first = state.held().unwrap();
        assert!(Arc::ptr_eq(&first, &state.held().unwrap()), "opened once");
        let at = state
            .place_inside(&root.join("handles/x.owner"))
            .unwrap()
            .unwrap();
        assert_eq!(at.dir().path(), root.join("handles"));
        assert!(state.place_inside(&outside.join("x")).unwrap().is_none());
        // Swapped for a symlink after this command walked it: the command
        // goes on in the directory it opened, never through the symlink.
        let handles = (at.dir().identity(), Arc::clone(at.dir()));
        std::fs::rename(root.join("handles"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("handles")).unwrap();
        let again = state
            .place_inside(&root.join("handles/x.owner"))
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(again.dir(), &handles.1), "walked once");
        assert_eq!(again.dir().identity(), handles.0);
        // Once the command renames or removes anything, or in the next
        // command, the path is walked again: a symlinked directory of the
        // root is refused, never walked.
        state.forget_walked();
        assert_eq!(
            state
                .place_inside(&root.join("handles/x.owner"))
                .unwrap_err(),
            StoreError::invalid("state-root handles must not be a symlink")
        );
        let next = StateRoot::begin(&root);
        assert_eq!(
            next.place_inside(&root.join("handles/x.owner"))
                .unwrap_err(),
            StoreError::invalid("state-root handles must not be a symlink")
        );
        // The root renamed away: the held descriptor still reaches it, and
        // its old path no longer names it.
        let moved_root = root.with_file_name("state-moved");
        std::fs::rename(&root, &moved_root).unwrap();
        assert!(!still_named(&first, &root));
        let at = state.place_inside(&root.join("moved/y")).unwrap().unwrap();
        assert_eq!(at.dir().identity(), {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(moved_root.join("moved")).unwrap();
            (m.dev(), m.ino())
        });
        // The directories reached from the root carry its state only while
        // the command holds it: dropped, they hold nothing of it.
        drop((state, next, first, handles, again));
        assert!(at.dir().root_state().is_none());
    }
}
