//! The state root, held once per command (issue 14, item 3). The CLI opens
//! a [`CommandScope`] for the root it discovered; the first store call that
//! needs the root opens it by its path (`O_NOFOLLOW | O_DIRECTORY`: the
//! root's own path is the only one ever resolved) and every later call of
//! the command reuses that descriptor. Every path inside the root —
//! `handles/`, `reports/`, `quarantine/`, `locks/`, `config.json`,
//! `derived.key`, `runs/...` — is then reached from it with `openat`, one
//! component at a time, never following a symlink ([`place_inside`]): a
//! directory of the root renamed away or replaced by a symlink cannot
//! redirect a read or a write.
//!
//! Without a scope (unit tests of the store), paths are opened as before.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{StoreError, StoreResult};
use super::held::{HeldDir, Loc};
use nix::libc;

#[derive(Debug)]
struct Current {
    path: PathBuf,
    held: Option<Arc<HeldDir>>,
    /// The directories of the root walked so far (by relative path): the
    /// command reaches `runs/<id>` or `handles` once, not at every file.
    /// Each is the directory we opened, whatever its name shows later;
    /// forgotten when this command renames or removes anything
    /// ([`forget_walked`]), so a directory it replaces is walked anew.
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

// Per thread: the MCP server runs tool calls on several blocking threads
// at once, each a whole command with its own root (a command's store calls
// all run on the thread that began it).
thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

fn with_current<T>(f: impl FnOnce(&mut Option<Current>) -> T) -> T {
    CURRENT.with(|cell| f(&mut cell.borrow_mut()))
}

/// The state root of the running command; dropping it ends the command's
/// hold on the root (the descriptor is closed once no file uses it).
#[derive(Debug)]
pub struct CommandScope {
    previous: Option<Current>,
}

/// Begin a command on the state root `root` (an absolute, resolved path).
pub fn begin(root: &Path) -> CommandScope {
    let previous = with_current(|cur| {
        cur.replace(Current {
            path: root.to_path_buf(),
            held: None,
            walked: Default::default(),
            key: None,
            locks_held: 0,
            kept: Vec::new(),
        })
    });
    CommandScope { previous }
}

impl Drop for CommandScope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        with_current(|cur| *cur = previous);
    }
}

/// The held state root `root`: within the command that began on it, the
/// descriptor opened the first time (opened now if this is the first
/// time); for any other root, a fresh open. Never follows a symlink at the
/// root's last component.
pub fn held(root: &Path) -> std::io::Result<Arc<HeldDir>> {
    with_current(|cur| match cur.as_mut() {
        Some(cur) if cur.path == root => {
            if let Some(held) = &cur.held {
                return Ok(Arc::clone(held));
            }
            let held = Arc::new(HeldDir::open_path(root)?);
            cur.held = Some(Arc::clone(&held));
            Ok(held)
        }
        _ => Ok(Arc::new(HeldDir::open_path(root)?)),
    })
}

/// The root of the running command and `path` relative to it, when `path`
/// lies strictly inside that root (lexically: the root is absolute and
/// resolved, and the store builds its paths by joining names to it).
fn inside(path: &Path) -> Option<(PathBuf, PathBuf)> {
    with_current(|cur| {
        let cur = cur.as_ref()?;
        let relative = path.strip_prefix(&cur.path).ok()?;
        if relative.as_os_str().is_empty() {
            return None;
        }
        Some((cur.path.clone(), relative.to_path_buf()))
    })
}

/// Whether `path` is inside the running command's state root.
pub fn is_inside(path: &Path) -> bool {
    inside(path).is_some()
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

/// Where `path` is, when it lies inside the running command's state root:
/// an entry of the directory reached from the held root, one component at
/// a time, with no symlink followed. `None` for a path outside the root
/// (a file the user names), which the caller opens as a path.
pub fn place_inside(path: &Path) -> StoreResult<Option<Loc>> {
    let Some((root, relative)) = inside(path) else {
        return Ok(None);
    };
    let Some(name) = relative.file_name() else {
        return Ok(None);
    };
    let dir = match relative.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => walked(&root, parent)?,
        _ => held(&root).map_err(|e| StoreError::io(&e, &root))?,
    };
    Ok(Some(Loc::new(dir, name)))
}

/// The directory `relative` of the held root `root`: walked once per
/// command (see `Current::walked`).
fn walked(root: &Path, relative: &Path) -> StoreResult<Arc<HeldDir>> {
    // From the deepest directory of the path walked before, else the root.
    let known = with_current(|cur| {
        let cur = cur.as_ref()?;
        relative
            .ancestors()
            .find_map(|at| Some((at.to_path_buf(), cur.walked.get(at)?.clone())))
    });
    let from_root = || {
        let held = held(root).map_err(|e| StoreError::io(&e, root))?;
        // Deeper than one name, and names only (no `.` or `..`, which the
        // walk refuses): one `openat2` as safe as the walk (no symlink at
        // any component, nothing outside the root); the walk when it
        // fails, to say why.
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
    with_current(|cur| {
        if let Some(cur) = cur.as_mut().filter(|cur| cur.path == root) {
            cur.walked.insert(relative.to_path_buf(), Arc::clone(&dir));
        }
    });
    Ok(dir)
}

/// The directory at `path` inside the running command's root, walked
/// once per command; `None` outside the root or when it cannot be
/// reached (the caller's own open then says why, in its words).
pub fn walked_dir(path: &Path) -> Option<Arc<HeldDir>> {
    let (root, relative) = inside(path)?;
    walked(&root, &relative).ok()
}

/// Remember `dir`, opened and checked by the caller, as the directory at
/// `path` inside the running command's root (as if walked to).
pub(super) fn remember_walked(path: &Path, dir: &Arc<HeldDir>) {
    let Some((root, relative)) = inside(path) else {
        return;
    };
    with_current(|cur| {
        if let Some(cur) = cur.as_mut().filter(|cur| cur.path == root) {
            cur.walked.insert(relative, Arc::clone(dir));
        }
    });
}

/// The file at `path`, inside the running command's root and deeper than
/// one name (names only), whose directory this command has not opened yet:
/// opened with `flags` from the held root in one `openat2` (no symlink at
/// any component, nothing outside the root), its directory not held. The
/// directory's own rule (a 0700 directory of ours) is the caller's, checked
/// by an `lstat` (`secure::check_secure_dir`). `None` otherwise, or when
/// the call fails: the caller then walks, whose refusals say why.
pub fn open_file_beneath(path: &Path, flags: rustix::fs::OFlags) -> Option<std::fs::File> {
    let (root, relative) = inside(path)?;
    let parent = relative.parent()?;
    let names_only = relative
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !names_only || parent.as_os_str().is_empty() {
        return None;
    }
    // A directory already open costs nothing more: the usual way.
    if with_current(|cur| {
        cur.as_ref()
            .is_some_and(|cur| cur.walked.contains_key(parent))
    }) {
        return None;
    }
    held(&root).ok()?.open_file_beneath(&relative, flags)
}

/// The `lstat` of `path`, a directory directly in the running command's
/// held root that this command has not opened: `None` for any other path,
/// or when it cannot be looked at.
pub fn lstat_unopened_top_dir(path: &Path) -> Option<rustix::fs::Stat> {
    let (root, relative) = inside(path)?;
    let mut names = relative.components();
    let (Some(std::path::Component::Normal(name)), None) = (names.next(), names.next()) else {
        return None;
    };
    if with_current(|cur| {
        cur.as_ref()
            .is_some_and(|cur| cur.walked.contains_key(&relative))
    }) {
        return None;
    }
    let stat = Loc::new(held(&root).ok()?, name).lstat().ok()??;
    (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory)
        .then_some(stat)
}

/// The directory at `path` if this command has walked to it already.
pub fn known_dir(path: &Path) -> Option<Arc<HeldDir>> {
    let (_, relative) = inside(path)?;
    with_current(|cur| cur.as_ref()?.walked.get(&relative).cloned())
}

/// The key this command read from its root's `derived.key`, if it did.
pub(super) fn remembered_key(root: &Path) -> Option<Vec<u8>> {
    with_current(|cur| cur.as_ref().filter(|cur| cur.path == root)?.key.clone())
}

/// Remember the key read from the running command's root.
pub(super) fn remember_key(root: &Path, key: &[u8]) {
    with_current(|cur| {
        if let Some(cur) = cur.as_mut().filter(|cur| cur.path == root) {
            cur.key = Some(key.to_vec());
        }
    });
}

/// Forget the directories walked so far: called by every rename and
/// removal, after which a path may name another directory than before.
pub(super) fn forget_walked() {
    with_current(|cur| {
        if let Some(cur) = cur.as_mut() {
            cur.walked.clear();
            cur.kept.clear();
        }
    });
}

/// Forget what a rename of a file between the entries named `names` may
/// have changed: the walked directories with such a name on their path
/// and the kept files of that name. A rename changes two directory
/// entries and nothing else, and a path resolves through the names on it
/// only, so whatever names neither stays what it was (a lock's initializer
/// renamed into its lock directory leaves the run's directories and files
/// as they were).
pub(super) fn forget_renamed(names: [&std::ffi::OsStr; 2]) {
    with_current(|cur| {
        if let Some(cur) = cur.as_mut() {
            cur.walked
                .retain(|path, _| !path.iter().any(|component| names.contains(&component)));
            cur.kept.retain(|k| !names.contains(&k.name.as_os_str()));
        }
    });
}

/// A lock of the root taken by this command (see `Current::kept`).
pub(super) fn lock_taken() {
    with_current(|cur| {
        if let Some(cur) = cur.as_mut() {
            cur.locks_held += 1;
        }
    });
}

/// A lock of the root released; with the last one the kept files go.
pub(super) fn lock_released() {
    with_current(|cur| {
        if let Some(cur) = cur.as_mut() {
            cur.locks_held = cur.locks_held.saturating_sub(1);
            if cur.locks_held == 0 {
                cur.kept.clear();
            }
        }
    });
}

/// Whether a derived file read now may be opened read-write and kept:
/// only while this command holds a lock, so that read-only commands never
/// open a file for writing.
pub(super) fn may_keep() -> bool {
    with_current(|cur| cur.as_ref().is_some_and(|cur| cur.locks_held > 0))
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
    let dir = at.dir().identity();
    with_current(|cur| {
        let cur = cur.as_mut()?;
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
    let dir = at.dir().identity();
    with_current(|cur| {
        if let Some(cur) = cur.as_mut().filter(|cur| before_lock || cur.locks_held > 0) {
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
    let dir = at.dir().identity();
    with_current(|cur| {
        if let Some(kept) = cur.as_mut().and_then(|cur| {
            cur.kept
                .iter_mut()
                .find(|k| k.dir == dir && k.name == at.name())
        }) {
            kept.len = len;
        }
    });
}

/// The directory at `path` inside the running command's root, opened from
/// the held root (see [`place_inside`]); `None` outside it.
pub fn dir_inside(path: &Path) -> StoreResult<Option<HeldDir>> {
    match place_inside(path)? {
        Some(loc) => loc.open_dir().map(Some).map_err(|e| {
            let kind = with_current(|cur| {
                cur.as_ref()
                    .map(|cur| kind_of(&cur.path, path))
                    .unwrap_or_default()
            });
            component_error(&e, &loc, path, kind)
        }),
        None => Ok(None),
    }
}

/// Whether `path` is the running command's state root itself.
pub fn is_root(path: &Path) -> bool {
    with_current(|cur| cur.as_ref().is_some_and(|cur| cur.path == path))
}

/// The directory at `path` when it is the running command's root (the
/// held descriptor) or inside it (reached from the held root); `None`
/// for a path outside the root.
pub fn dir_at(path: &Path) -> StoreResult<Option<Arc<HeldDir>>> {
    if is_root(path) {
        return held(path).map(Some).map_err(|e| StoreError::io(&e, path));
    }
    Ok(dir_inside(path)?.map(Arc::new))
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

/// Remove `path` (and everything in it) inside the running command's
/// state root through descriptors; outside it, by path.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    match place_inside(path) {
        Ok(Some(at)) => at.remove_tree(),
        Ok(None) => match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
            _ => std::fs::remove_file(path),
        },
        Err(e) => Err(std::io::Error::other(e.message().to_string())),
    }
}

/// Remove the file `path` (never following a symlink) inside the running
/// command's state root through the held root; outside it, by path.
pub fn remove_file(path: &Path) -> std::io::Result<()> {
    match place_inside(path) {
        Ok(Some(at)) => at.remove_file(),
        Ok(None) => std::fs::remove_file(path),
        Err(e) => Err(std::io::Error::other(e.message().to_string())),
    }
}

/// `lstat` of `path` (inside the running command's state root, from the
/// held root): `None` when nothing is there or it cannot be reached.
pub fn symlink_metadata(path: &Path) -> Option<std::fs::Metadata> {
    match place_inside(path) {
        Ok(Some(at)) => at.symlink_metadata().ok().flatten(),
        Ok(None) => std::fs::symlink_metadata(path).ok(),
        Err(_) => None,
    }
}

/// The entry names of the directory `path` (inside the running command's
/// state root, listed through a descriptor reached from the held root),
/// as paths, sorted; empty when it cannot be listed.
pub fn list(path: &Path) -> Vec<PathBuf> {
    let names: Vec<std::ffi::OsString> = match dir_at(path) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_kept_before_the_lock_is_used_under_it_only_while_its_name_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("state");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("checkpoint.json"), b"first").unwrap();
        let _scope = begin(&root);
        let at = place_inside(&root.join("checkpoint.json"))
            .unwrap()
            .unwrap();
        let open = || Arc::new(std::fs::File::open(root.join("checkpoint.json")).unwrap());
        keep_before_lock(&at, &open(), 5);
        assert!(kept(&at).is_none(), "not used before the lock");
        // Rewritten in place meanwhile: under the lock, the same file at
        // the length it has now.
        std::fs::write(root.join("checkpoint.json"), b"second, longer").unwrap();
        lock_taken();
        let (_, len) = kept(&at).expect("still the file at its name");
        assert_eq!(len, 14);
        // The lock's own rename of another name keeps it ...
        forget_renamed([".receipt.initializing.json".as_ref(), "owner.json".as_ref()]);
        assert!(kept(&at).is_some());
        // ... a rename of its own name does not.
        forget_renamed(["checkpoint.json".as_ref(), "x".as_ref()]);
        assert!(kept(&at).is_none());
        lock_released();
        // Replaced by another file before the lock: opened afresh.
        keep_before_lock(&at, &open(), 14);
        std::fs::write(root.join("other"), b"other").unwrap();
        std::fs::rename(root.join("other"), root.join("checkpoint.json")).unwrap();
        lock_taken();
        assert!(kept(&at).is_none(), "another file has the name now");
        lock_released();
    }

    #[test]
    fn within_a_scope_paths_inside_the_root_are_reached_from_one_held_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("state");
        std::fs::create_dir_all(root.join("handles")).unwrap();
        let outside = root.parent().unwrap().join("elsewhere");
        std::fs::create_dir(&outside).unwrap();
        let scope = begin(&root);
        assert!(is_root(&root) && is_inside(&root.join("handles")));
        let first = held(&root).unwrap();
        assert!(Arc::ptr_eq(&first, &held(&root).unwrap()), "opened once");
        let at = place_inside(&root.join("handles/x.owner"))
            .unwrap()
            .unwrap();
        assert_eq!(at.dir().path(), root.join("handles"));
        assert!(place_inside(&outside.join("x")).unwrap().is_none());
        // Swapped for a symlink after this command walked it: the command
        // goes on in the directory it opened, never through the symlink.
        let handles = (at.dir().identity(), Arc::clone(at.dir()));
        std::fs::rename(root.join("handles"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("handles")).unwrap();
        let again = place_inside(&root.join("handles/x.owner"))
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(again.dir(), &handles.1), "walked once");
        assert_eq!(again.dir().identity(), handles.0);
        // Once the command renames or removes anything, or in the next
        // command, the path is walked again: a symlinked directory of the
        // root is refused, never walked.
        forget_walked();
        assert_eq!(
            place_inside(&root.join("handles/x.owner")).unwrap_err(),
            StoreError::invalid("state-root handles must not be a symlink")
        );
        // The root renamed away: the held descriptor still reaches it, and
        // its old path no longer names it.
        let moved_root = root.with_file_name("state-moved");
        std::fs::rename(&root, &moved_root).unwrap();
        assert!(!still_named(&first, &root));
        let at = place_inside(&root.join("moved/y")).unwrap().unwrap();
        assert_eq!(at.dir().identity(), {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(moved_root.join("moved")).unwrap();
            (m.dev(), m.ino())
        });
        drop(scope);
        assert!(!is_root(&root) && !is_inside(&root.join("handles")));
    }
}
