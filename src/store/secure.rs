//! Secure opens: every check runs on the opened descriptor (fstat), never
//! path-then-open. Files are 0600, directories 0700, owned by the real uid,
//! never symlinks. Creations and renames are followed by a directory fsync.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

use super::error::{StoreError, StoreResult};
use super::held::{HeldDir, Loc, Place};
use super::root::InRoot;
use rustix::fs::{Mode, OFlags};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// The reference's three-part secure-mode check, on a descriptor's metadata.
pub fn check_metadata(meta: &std::fs::Metadata, kind: &str, mode: u32) -> StoreResult<()> {
    check_owner_and_mode(meta.uid(), meta.mode(), kind, mode)
}

/// [`check_metadata`] of an owner and a mode (an `lstat`'s, say).
pub fn check_owner_and_mode(uid: u32, st_mode: u32, kind: &str, mode: u32) -> StoreResult<()> {
    if uid != real_uid() {
        return Err(StoreError::Insecure(format!(
            "{kind} must be owned by the current uid"
        )));
    }
    if st_mode & 0o7777 != mode {
        return Err(StoreError::Insecure(format!(
            "{kind} does not have the required secure mode"
        )));
    }
    Ok(())
}

fn symlink_or_io(error: std::io::Error, at: &Loc, kind: &str) -> StoreError {
    symlink_or_io_path(error, &at.path(), || at.is_symlink(), kind)
}

pub(super) fn symlink_or_io_path(
    error: std::io::Error,
    path: &Path,
    is_link: impl FnOnce() -> bool,
    kind: &str,
) -> StoreError {
    if matches!(
        error.raw_os_error(),
        Some(libc::ELOOP) | Some(libc::ENOTDIR)
    ) && is_link()
    {
        StoreError::invalid(format!("{kind} must not be a symlink"))
    } else if error.raw_os_error() == Some(libc::ENOTDIR) {
        StoreError::invalid(format!("{kind} is not a directory"))
    } else {
        StoreError::io(&error, path)
    }
}

/// Check that `at` is a 0700 directory owned by us, opened without
/// following a final symlink: the held state root itself, a directory
/// inside it reached from the held root, or (outside the root) by path.
pub fn open_secure_dir(at: InRoot<'_>, kind: &str) -> StoreResult<()> {
    let (root, path) = (at.root(), at.path());
    if root.is_root(path) {
        let dir = root
            .held()
            .map_err(|e| symlink_or_io_path(e, path, || at.is_symlink(), kind))?;
        // As it was opened, like every directory this command walked.
        return check_metadata(dir.opened_metadata(), kind, DIR_MODE);
    }
    if let Some(dir) = root.walked_dir(path) {
        return check_metadata(dir.opened_metadata(), kind, DIR_MODE);
    }
    if let Some(at) = root.place_inside(path)? {
        return open_secure_dir_at(&at, kind).map(drop);
    }
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| symlink_or_io_path(e, path, || at.is_symlink(), kind))?;
    let meta = dir.metadata().map_err(|e| StoreError::io(&e, path))?;
    if !meta.is_dir() {
        return Err(StoreError::invalid(format!("{kind} is not a directory")));
    }
    check_metadata(&meta, kind, DIR_MODE)
}

/// [`open_secure_dir`] without opening it when it lies directly in the
/// held root and this command has not opened it: an `lstat` from the root
/// says it is a 0700 directory of ours, and its files are then opened
/// beneath the root in one `openat2` each
/// (`StateRoot::open_file_beneath`). Anything else (a symlink, a missing
/// name) is judged by [`open_secure_dir`], in its words.
pub fn check_secure_dir(at: InRoot<'_>, kind: &str) -> StoreResult<()> {
    match at.root().lstat_unopened_top_dir(at.path()) {
        Some(stat) => check_owner_and_mode(stat.st_uid, stat.st_mode, kind, DIR_MODE),
        None => open_secure_dir(at, kind),
    }
}

/// Open the directory `at` (no symlink) from its held parent and check it
/// is a 0700 directory owned by us; the result is held in turn.
pub fn open_secure_dir_at(at: &Loc, kind: &str) -> StoreResult<HeldDir> {
    let dir = at.open_dir().map_err(|e| symlink_or_io(e, at, kind))?;
    check_metadata(dir.opened_metadata(), kind, DIR_MODE)?;
    Ok(dir)
}

/// Open a file for reading without following a final symlink; it must be a
/// regular file. With `mode`, also check owner and exact mode.
pub fn open_regular(
    at: &(impl Place + ?Sized),
    kind: &str,
    mode: Option<u32>,
) -> StoreResult<File> {
    open_regular_meta(at, kind, mode).map(|(file, _)| file)
}

/// [`open_regular`], with the metadata its check read (the size a whole
/// read needs, the link count a handle check needs: no second `fstat`).
pub fn open_regular_meta(
    at: &(impl Place + ?Sized),
    kind: &str,
    mode: Option<u32>,
) -> StoreResult<(File, std::fs::Metadata)> {
    const FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::NONBLOCK)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    // A file outside the root is opened by its path in one call; when that
    // fails, the parent is opened as below, so the refusal says why in the
    // same words (a symlink, not a directory, missing).
    // A file deeper in the root whose directory is not open yet: one
    // `openat2` from the root, the same way.
    let direct = at
        .outside_path()
        .and_then(|path| {
            let fd = rustix::fs::open(path, FLAGS, Mode::empty()).ok()?;
            Some((File::from(fd), path.to_path_buf()))
        })
        .or_else(|| at.open_beneath_root(OFlags::RDONLY | OFlags::NONBLOCK));
    let (file, path) = match direct {
        Some(opened) => opened,
        None => {
            let at = at.place()?;
            let file = at
                .open(OFlags::RDONLY | OFlags::NONBLOCK, 0)
                .map_err(|e| symlink_or_io(e, &at, kind))?;
            (file, at.path())
        }
    };
    let path = &path;
    let meta = file.metadata().map_err(|e| StoreError::io(&e, path))?;
    if !meta.is_file() {
        return Err(StoreError::invalid(format!(
            "{kind} must be a regular file"
        )));
    }
    if let Some(mode) = mode {
        check_metadata(&meta, kind, mode)?;
    }
    Ok((file, meta))
}

/// The whole of a small regular file [`open_regular`] opens and checks,
/// `None` when it is larger than `max` bytes.
pub fn read_regular(
    at: &(impl Place + ?Sized),
    path: &Path,
    kind: &str,
    mode: Option<u32>,
    max: u64,
) -> StoreResult<Option<Vec<u8>>> {
    let (mut file, meta) = open_regular_meta(at, kind, mode)?;
    read_sized(&mut file, path, meta.len(), max)
}

/// The receipt, opened for positioned reads: while this command holds a
/// lock, read-write and `O_APPEND` and kept, so that the append under the
/// same lock writes through this descriptor instead of opening the file a
/// second time ([`append_line_after`]); else read-only. Never through a
/// symlink; a regular file only.
pub fn open_receipt_reader(at: &Loc) -> StoreResult<std::sync::Arc<File>> {
    if super::root::may_keep(at) {
        match at.open(OFlags::RDWR | OFlags::APPEND | OFlags::NONBLOCK, 0) {
            Ok(file) => {
                let meta = file
                    .metadata()
                    .map_err(|e| StoreError::io(&e, &at.path()))?;
                if !meta.is_file() {
                    return Err(StoreError::invalid("receipt must be a regular file"));
                }
                let file = std::sync::Arc::new(file);
                super::root::keep_for_append(at, &file);
                return Ok(file);
            }
            // A receipt we may read but not write is read (the append then
            // fails on its own open, in its own words).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EROFS | libc::EPERM)
                ) => {}
            Err(e) => return Err(symlink_or_io(e, at, "receipt")),
        }
    }
    open_regular(at, "receipt", None).map(std::sync::Arc::new)
}

/// A derived file of ours that this command reads now and may rewrite in
/// place later (the checkpoint, the head record, the digest table): while
/// the command holds a lock, opened read-write once and kept until the
/// lock is released or anything is renamed ([`super::root::kept`]), so
/// the rewrite needs no second open and check; else opened read-only.
/// Never through a symlink. `check` judges the metadata of a file opened
/// now (a kept file passed it when it was opened). `None` when nothing is
/// at `at`.
pub fn open_derived<E>(
    at: &Loc,
    check: impl FnOnce(&std::fs::Metadata) -> Result<(), E>,
    failed: impl FnOnce(std::io::Error) -> E,
) -> Result<Option<(std::sync::Arc<File>, u64)>, E> {
    open_derived_as(at, check, failed, false)
}

fn open_derived_as<E>(
    at: &Loc,
    check: impl FnOnce(&std::fs::Metadata) -> Result<(), E>,
    failed: impl FnOnce(std::io::Error) -> E,
    before_lock: bool,
) -> Result<Option<(std::sync::Arc<File>, u64)>, E> {
    if let Some(kept) = super::root::kept(at) {
        return Ok(Some(kept));
    }
    let under_lock = super::root::may_keep(at);
    let keep = under_lock || before_lock;
    let read = OFlags::RDONLY | OFlags::NONBLOCK;
    let (opened, writable) = if keep {
        match at.open(OFlags::RDWR | OFlags::NONBLOCK, 0) {
            Ok(file) => (Ok(file), true),
            // A file we may read but not write (a copied root, say) is read.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EROFS | libc::EPERM)
                ) =>
            {
                (at.open(read, 0), false)
            }
            Err(e) => (Err(e), false),
        }
    } else {
        (at.open(read, 0), false)
    };
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Err(failed(e)),
    };
    check(&meta)?;
    let file = std::sync::Arc::new(file);
    match (writable, under_lock) {
        (true, true) => super::root::keep(at, &file, meta.len()),
        (true, false) => super::root::keep_before_lock(at, &file, meta.len()),
        (false, _) => {}
    }
    Ok(Some((file, meta.len())))
}

/// [`open_derived`] of a derived file whose only rule is ours: a regular
/// 0600 file owned by the current uid, anything else (or an error) `None`.
pub fn open_derived_ours(at: &Loc, kind: &str) -> Option<(std::sync::Arc<File>, u64)> {
    open_ours(at, kind, false)
}

/// [`open_derived_ours`] by a mutation before it takes its lock: opened
/// read-write and kept, so that under the lock the same descriptor is read
/// again and rewritten ([`super::root::keep_before_lock`]).
pub fn open_derived_ours_before_lock(at: &Loc, kind: &str) -> Option<(std::sync::Arc<File>, u64)> {
    open_ours(at, kind, true)
}

fn open_ours(at: &Loc, kind: &str, before_lock: bool) -> Option<(std::sync::Arc<File>, u64)> {
    let check = |meta: &std::fs::Metadata| match meta.is_file() {
        true => check_metadata(meta, kind, FILE_MODE).map_err(drop),
        false => Err(()),
    };
    open_derived_as(at, check, drop, before_lock).ok()?
}

/// The first `len` bytes of `file` (a derived file [`open_derived`] gave,
/// `len` its length), read from offset 0 whatever the file's position.
pub fn read_derived(file: &File, path: &Path, len: u64, max: u64) -> StoreResult<Option<Vec<u8>>> {
    if len > max {
        return Ok(None);
    }
    read_from_start(file, path, len).map(Some)
}

/// Up to the first `len` bytes of `file`, by positioned reads from offset
/// 0 (fewer when the file is shorter now).
fn read_from_start(file: &File, path: &Path, len: u64) -> StoreResult<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
    let mut filled = 0;
    while filled < bytes.len() {
        match file.read_at(&mut bytes[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io(&e, path)),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// [`read_limited`] of a file just opened, which an `fstat` gave as `len`
/// bytes long: those bytes, read in one call as a rule, with no further
/// read to see the end (the file as it was when checked; one written
/// meanwhile is as if read a moment earlier). A file that says it is empty
/// (a `/proc` file given as an input, say) is read to its end.
pub fn read_sized(
    file: &mut File,
    path: &Path,
    len: u64,
    max: u64,
) -> StoreResult<Option<Vec<u8>>> {
    if len == 0 || len > max {
        return read_limited(file, path, max);
    }
    read_from_start(file, path, len).map(Some)
}

/// fsync a directory so a new or renamed entry survives a power loss (the
/// held state root, or a directory reached from it, when `at` is one).
pub fn sync_dir(at: InRoot<'_>) -> StoreResult<()> {
    let path = at.path();
    if let Some(dir) = at.root().dir_at(path)? {
        if injected(FaultPoint::Fsync, path) {
            return Err(injected_error(path));
        }
        return dir.sync().map_err(|e| StoreError::io(&e, path));
    }
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| StoreError::io(&e, path))?;
    sync_file(&dir, path)
}

/// fsync one open file or directory (every fsync of the store goes here).
fn sync_file(file: &File, path: &Path) -> StoreResult<()> {
    if injected(FaultPoint::Fsync, path) {
        return Err(injected_error(path));
    }
    file.sync_all().map_err(|e| StoreError::io(&e, path))
}

/// The real uid, asked once per process (every file check compares it).
pub fn real_uid() -> u32 {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(|| nix::unistd::getuid().as_raw())
}

/// The two kinds of operation a test can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    Write,
    Fsync,
}

#[cfg(not(test))]
#[inline(always)]
fn injected(_point: FaultPoint, _path: &Path) -> bool {
    false
}

#[cfg(test)]
fn injected(point: FaultPoint, path: &Path) -> bool {
    faults::hit(point, path)
}

fn injected_error(path: &Path) -> StoreError {
    StoreError::io(&std::io::Error::from_raw_os_error(libc::EIO), path)
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `mkdir(path, 0700)` then `chmod 0700`: the directory is never visible
/// with a wider mode (a process killed between the two calls cannot leave a
/// directory that every later check refuses), and the chmod makes the mode
/// independent of the umask. Inside the state root, both go through the
/// held root's descriptors (`mkdirat`, then `fchmod` of the directory
/// opened without following a symlink).
pub fn create_dir_0700(at: InRoot<'_>) -> StoreResult<()> {
    use std::os::unix::fs::DirBuilderExt;
    let path = at.path();
    if let Some(at) = at.root().place_inside(path)? {
        at.mkdir(DIR_MODE)
            .and_then(|()| at.open_dir())
            .and_then(|dir| dir.set_mode(DIR_MODE))
            .map_err(|e| StoreError::io(&e, path))?;
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .mode(DIR_MODE)
        .create(path)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE)))
        .map_err(|e| StoreError::io(&e, path))
}

/// Create a 0700 directory (parent must exist) or validate an existing one.
/// Returns true when it was created.
pub fn ensure_secure_dir(at: InRoot<'_>, kind: &str) -> StoreResult<bool> {
    let created = match create_dir_0700(at) {
        Ok(()) => {
            sync_dir(at.root().at(&parent_of(at.path())))?;
            true
        }
        Err(e) if e.io_kind() == Some(ErrorKind::AlreadyExists) => false,
        Err(e) => return Err(e),
    };
    open_secure_dir(at, kind)?;
    Ok(created)
}

/// Write all bytes; a zero-byte write is an error, short writes continue.
fn write_all(mut file: &File, bytes: &[u8], path: &Path) -> StoreResult<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        if injected(FaultPoint::Write, path) {
            let _ = file.write(&rest[..rest.len() / 2]);
            return Err(injected_error(path));
        }
        match file.write(rest) {
            Ok(0) => {
                return Err(StoreError::io(
                    &std::io::Error::from(ErrorKind::WriteZero),
                    path,
                ));
            }
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io(&e, path)),
        }
    }
    Ok(())
}

/// Create a new 0600 file exclusively (no-follow), write it and fsync it
/// and its directory. On any failure the new file is removed again, so a
/// caller that reports an error leaves no record behind (a lock
/// initializer left by a failed call would block the lock for its grace).
pub fn create_exclusive(at: &(impl Place + ?Sized), bytes: &[u8]) -> StoreResult<()> {
    create_exclusive_with(at, bytes, Durability::Full)
}

/// A new 0600 file at `at`, never through a symlink.
fn create_new_file(at: &Loc) -> StoreResult<File> {
    at.open(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, FILE_MODE)
        .map_err(|e| StoreError::io(&e, &at.path()))
}

/// Create `path` exclusively, take an `flock` on it and only then write
/// `bytes` (unsynced: lock records need not survive a crash). The returned
/// descriptor holds the flock, which follows the inode through renames, so
/// a process in any PID namespace on this kernel can see the holder alive.
pub fn create_exclusive_locked(at: &(impl Place + ?Sized), bytes: &[u8]) -> StoreResult<File> {
    let at = at.place()?;
    let path = &at.path();
    let file = create_new_file(&at)?;
    let result = (|| {
        file.lock().map_err(|e| StoreError::io(&e, path))?;
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| StoreError::io(&e, path))?;
        write_all(&file, bytes, path)
    })();
    match result {
        Ok(()) => Ok(file),
        Err(e) => {
            let _ = at.remove_file();
            Err(e)
        }
    }
}

/// Whether another open file description holds an `flock` on `path` (a
/// live lock holder, whatever its PID namespace). Unopenable: not held.
pub fn flock_held(at: &(impl Place + ?Sized)) -> bool {
    let Ok(file) = at.place().and_then(|at| {
        at.open(OFlags::RDONLY | OFlags::NONBLOCK, 0)
            .map_err(|e| StoreError::io(&e, &at.path()))
    }) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// [`create_exclusive`] with the given durability.
pub fn create_exclusive_with(
    at: &(impl Place + ?Sized),
    bytes: &[u8],
    durability: Durability,
) -> StoreResult<()> {
    let at = at.place()?;
    create_filled(&at, bytes, durability, || durability.sync_name(&at))
}

/// Create `at` new, fill it ([`fill_new`]) and `finish`; when filling or
/// `finish` fails, remove the file again (a failed create is never
/// removed: it may be another's).
fn create_filled(
    at: &Loc,
    bytes: &[u8],
    durability: Durability,
    finish: impl FnOnce() -> StoreResult<()>,
) -> StoreResult<()> {
    let mut file = create_new_file(at)?;
    let result = fill_new(&mut file, &at.path(), bytes, durability).and_then(|()| finish());
    if result.is_err() {
        let _ = at.remove_file();
    }
    result
}

/// The content of a file we just created: 0600, `bytes`, and an fsync of
/// the file unless nothing need survive.
fn fill_new(
    file: &mut std::fs::File,
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> StoreResult<()> {
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| StoreError::io(&e, path))?;
    write_all(file, bytes, path)?;
    match durability {
        Durability::None => Ok(()),
        Durability::Full | Durability::ContentOnly => sync_file(file, path),
    }
}

/// fsync the directory holding `at`.
fn sync_held(at: &Loc) -> StoreResult<()> {
    let dir = at.dir().path();
    if injected(FaultPoint::Fsync, dir) {
        return Err(injected_error(dir));
    }
    at.sync_dir().map_err(|e| StoreError::io(&e, dir))
}

/// How much of an atomic replacement must survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The new content and its name (fsync of the file and the directory).
    Full,
    /// The new content, if the rename survives; else the old file stays
    /// (fsync of the file only): for records where an older version is
    /// still true, such as the acknowledged head.
    ContentOnly,
    /// Nothing: a derived file that is proven before use and rebuilt when
    /// it is missing or garbled, such as the checkpoint.
    None,
}

impl Durability {
    /// Make the name `at` durable (an fsync of its directory) when the
    /// name must survive too.
    fn sync_name(self, at: &Loc) -> StoreResult<()> {
        match self {
            Durability::Full => sync_held(at),
            Durability::ContentOnly | Durability::None => Ok(()),
        }
    }
}

/// Replace `path` atomically with `bytes`: exclusive 0600 temp file in the
/// same directory, fsync, rename, fsync the directory.
pub fn atomic_write(at: &(impl Place + ?Sized), bytes: &[u8]) -> StoreResult<()> {
    atomic_write_with(at, bytes, Durability::Full)
}

/// [`atomic_write`] with the given durability.
pub fn atomic_write_with(
    at: &(impl Place + ?Sized),
    bytes: &[u8],
    durability: Durability,
) -> StoreResult<()> {
    let at = at.place()?;
    let path = &at.path();
    if at.is_symlink() {
        return Err(StoreError::invalid("atomic target must not be a symlink"));
    }
    let name = at.name().to_string_lossy().into_owned();
    let temp_at = at.sibling(crate::store::random::temp_name(&name));
    create_filled(&temp_at, bytes, durability, || {
        temp_at.rename_to(&at).map_err(|e| StoreError::io(&e, path))
    })?;
    durability.sync_name(&at)
}

/// Overwrite a derived file of ours in place: one `pwrite` of `bytes` at
/// offset 0 through a no-follow descriptor (created 0600 when missing;
/// refused unless it is a regular 0600 file), the rest cut off when the
/// file was longer, and with `sync` one `fdatasync`. No temp file and no
/// rename (contracts/receipt.md "One commit"): a reader that meets a
/// half-written file finds it fails its own checks (JSON, MAC) and treats
/// it as a cache to rebuild, which is what every file written this way is.
pub fn overwrite_in_place(at: &(impl Place + ?Sized), bytes: &[u8], sync: bool) -> StoreResult<()> {
    overwrite(at, bytes, sync, OFlags::CREATE).map(drop)
}

/// [`overwrite_in_place`] of a file that is there: `false`, and nothing
/// written, when it is missing (one open says both).
pub fn overwrite_existing(
    at: &(impl Place + ?Sized),
    bytes: &[u8],
    sync: bool,
) -> StoreResult<bool> {
    overwrite(at, bytes, sync, OFlags::empty())
}

fn overwrite(
    at: &(impl Place + ?Sized),
    bytes: &[u8],
    sync: bool,
    create: OFlags,
) -> StoreResult<bool> {
    let at = at.place()?;
    let path = &at.path();
    if let Some((file, len)) = super::root::kept(&at) {
        rewrite_open(&file, len, path, bytes, sync)?;
        super::root::kept_len(&at, bytes.len() as u64);
        return Ok(true);
    }
    let file = match at.open(OFlags::RDWR | create, FILE_MODE) {
        Ok(file) => file,
        Err(e) if create.is_empty() && e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(symlink_or_io(e, &at, "derived file")),
    };
    let meta = file.metadata().map_err(|e| StoreError::io(&e, path))?;
    if !meta.is_file() {
        return Err(StoreError::invalid("derived file must be a regular file"));
    }
    check_metadata(&meta, "derived file", FILE_MODE)?;
    rewrite_open(&file, meta.len(), path, bytes, sync)?;
    Ok(true)
}

/// Write `bytes` over the open derived file `file` (`len` bytes long) at
/// offset 0, cut what lies past them, and with `sync` one `fdatasync`.
fn rewrite_open(file: &File, len: u64, path: &Path, bytes: &[u8], sync: bool) -> StoreResult<()> {
    if injected(FaultPoint::Write, path) {
        let _ = rustix::io::pwrite(file, &bytes[..bytes.len() / 2], 0);
        return Err(injected_error(path));
    }
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(bytes, 0)
            .map_err(|e| StoreError::io(&e, path))?;
    }
    if len > bytes.len() as u64 {
        file.set_len(bytes.len() as u64)
            .map_err(|e| StoreError::io(&e, path))?;
    }
    if sync {
        if injected(FaultPoint::Fsync, path) {
            return Err(injected_error(path));
        }
        file.sync_data().map_err(|e| StoreError::io(&e, path))?;
    }
    Ok(())
}

/// Append one whole line to the receipt: no-follow, 0600, one write call
/// for the whole line (LF included), fsync of the file (and of the
/// directory when the file was created). Only after this returns may
/// success be reported. The caller holds the receipt lock: when the write
/// or the fsync fails, the receipt is cut back to its length before the
/// append, so a failed append leaves the old receipt, not a torn line.
pub fn append_line(at: &(impl Place + ?Sized), line: &[u8]) -> StoreResult<()> {
    append_line_after(at, line, None)
}

/// [`append_line`] that first checks, on the descriptor it writes through,
/// that the file is exactly `expected` bytes long (trust-model §2 promise
/// 7): a writer that did not honour the lock (the reference reclaiming a
/// lock it judged dead) may have appended since the state was loaded, and
/// a line sealed on the old end would fork the chain. Refused as busy
/// (retryable), nothing written.
pub fn append_line_after(
    at: &(impl Place + ?Sized),
    line: &[u8],
    expected: Option<u64>,
) -> StoreResult<()> {
    let at = at.place()?;
    let path = &at.path();
    // The receipt this command read under the lock, when its name still
    // names it: no second open. Anything else (renamed over since, never
    // read) is opened as it is, else created: one open says whether it
    // existed (a symlink, even a dangling one, fails the no-follow open
    // either way).
    let append = OFlags::WRONLY | OFlags::APPEND;
    let kept = super::root::kept_for_append(&at).and_then(|file| {
        let meta = file.metadata().ok()?;
        let named = at.lstat().ok()??;
        ((named.st_dev, named.st_ino) == (meta.dev(), meta.ino())).then_some((file, meta))
    });
    let (file, meta, existed) = match kept {
        Some((file, meta)) => (file, meta, true),
        None => {
            let (file, existed) = match at.open(append, FILE_MODE) {
                Ok(file) => (file, true),
                Err(e) if e.kind() == ErrorKind::NotFound => (
                    at.open(append | OFlags::CREATE, FILE_MODE)
                        .map_err(|e| symlink_or_io(e, &at, "receipt path"))?,
                    false,
                ),
                Err(e) => return Err(symlink_or_io(e, &at, "receipt path")),
            };
            let meta = file.metadata().map_err(|e| StoreError::io(&e, path))?;
            (std::sync::Arc::new(file), meta, existed)
        }
    };
    if !meta.is_file() {
        return Err(StoreError::invalid("receipt must be a regular file"));
    }
    if meta.uid() != real_uid() {
        return Err(StoreError::Insecure(
            "receipt must be owned by the current uid".into(),
        ));
    }
    if meta.mode() & 0o7777 != FILE_MODE {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| StoreError::io(&e, path))?;
    }
    let before = meta.len();
    if let Some(expected) = expected
        && before != expected
    {
        return Err(StoreError::busy(format!(
            "the receipt changed under the lock: it is {before} bytes, the state this command decided on ends at {expected} (another writer appended without honouring the lock); nothing was written: run verify, then retry"
        )));
    }
    if let Err(error) = write_all(&file, line, path).and_then(|()| sync_file(&file, path)) {
        // Nothing was acknowledged: take back whatever part of the line
        // reached the file (best effort; verify reports what remains).
        let _ = file.set_len(before).and_then(|()| file.sync_all());
        return Err(error);
    }
    if !existed {
        sync_held(&at)?;
    }
    Ok(())
}

/// Read a whole small file through a secure descriptor, refusing files
/// larger than `max` bytes.
pub fn read_limited(file: &mut File, path: &Path, max: u64) -> StoreResult<Option<Vec<u8>>> {
    use std::io::Read;
    // Room for every small file the store reads (a manifest, a checkpoint,
    // a head record, an input) up front: it is read in one call and its end
    // seen in the next, with no `fstat` to size the buffer and no growing
    // buffer's many calls. A larger file grows the buffer as usual.
    const FIRST_READ: u64 = 64 * 1024;
    let mut bytes = Vec::with_capacity((max + 1).min(FIRST_READ) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::io(&e, path))?;
    Ok(if bytes.len() as u64 > max {
        None
    } else {
        Some(bytes)
    })
}

/// Test-only fault injection, compiled into unit tests and never into the
/// binary: a test arms "fail the n-th write" or "fail the n-th fsync" for
/// its own thread, and every write and fsync of the store obeys it. A
/// failing write first lets half of its bytes through, like a device that
/// fills up mid-line.
#[cfg(test)]
pub mod faults {
    use super::FaultPoint;
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    /// One write or fsync the store attempted, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Attempt {
        pub point: FaultPoint,
        pub path: PathBuf,
        pub failed: bool,
    }

    #[derive(Default)]
    struct Plan {
        fail: Option<(FaultPoint, usize)>,
        writes: usize,
        fsyncs: usize,
        log: Vec<Attempt>,
    }

    thread_local! {
        static PLAN: RefCell<Plan> = RefCell::new(Plan::default());
    }

    /// Start counting; with `fail`, the n-th (1-based) operation of that
    /// kind fails.
    pub fn arm(fail: Option<(FaultPoint, usize)>) {
        PLAN.with(|p| {
            *p.borrow_mut() = Plan {
                fail,
                ..Plan::default()
            }
        });
    }

    /// Stop injecting; returns every operation attempted since `arm`.
    pub fn disarm() -> Vec<Attempt> {
        PLAN.with(|p| std::mem::take(&mut *p.borrow_mut()).log)
    }

    pub(super) fn hit(point: FaultPoint, path: &Path) -> bool {
        PLAN.with(|p| {
            let mut plan = p.borrow_mut();
            let count = match point {
                FaultPoint::Write => {
                    plan.writes += 1;
                    plan.writes
                }
                FaultPoint::Fsync => {
                    plan.fsyncs += 1;
                    plan.fsyncs
                }
            };
            let failed = plan.fail == Some((point, count));
            plan.log.push(Attempt {
                point,
                path: path.to_path_buf(),
                failed,
            });
            failed
        })
    }
}

#[cfg(test)]
mod kept_tests {
    use super::*;
    use crate::store::root;
    use std::os::unix::fs::PermissionsExt;

    fn private(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn derived(at: &Loc) -> (std::sync::Arc<File>, u64) {
        open_derived(at, |_| Ok::<(), ()>(()), drop)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_derived_file_read_under_a_lock_is_rewritten_through_its_descriptor_until_a_rename() {
        let tmp = tempfile::tempdir().unwrap();
        let root_path = std::fs::canonicalize(tmp.path()).unwrap();
        let name = root_path.join("checkpoint.json");
        private(&name, b"old record");
        let state = root::StateRoot::begin(&root_path);
        let at = state.place_inside(&name).unwrap().unwrap();
        // Without a lock: read-only, nothing kept.
        assert_eq!(derived(&at).1, 10);
        assert!(root::kept(&at).is_none());
        root::lock_taken(&at);
        let (file, len) = derived(&at);
        assert_eq!(
            read_derived(&file, &name, len, 64).unwrap().unwrap(),
            b"old record"
        );
        assert!(root::kept(&at).is_some(), "opened read-write and kept");
        // The rewrite goes through the kept descriptor (the same inode),
        // cut to its new length.
        overwrite_in_place(&at, b"new", false).unwrap();
        assert_eq!(std::fs::read(&name).unwrap(), b"new");
        assert_eq!(root::kept(&at).map(|(_, len)| len), Some(3));
        // Another file renamed over the name: the descriptor is dropped
        // and the next rewrite reaches the file that has the name now.
        private(&root_path.join(".replacement"), b"replacement");
        at.sibling(".replacement").rename_to(&at).unwrap();
        assert!(root::kept(&at).is_none());
        overwrite_in_place(&at, b"newest", false).unwrap();
        assert_eq!(std::fs::read(&name).unwrap(), b"newest");
        // Kept again when read again, and closed with the last lock.
        derived(&at);
        assert!(root::kept(&at).is_some());
        root::lock_released(&at);
        assert!(root::kept(&at).is_none());
    }

    #[test]
    fn a_file_that_says_it_is_empty_is_read_to_its_end() {
        let mut file = File::open("/proc/self/status").unwrap();
        let bytes = read_sized(&mut file, Path::new("/proc/self/status"), 0, 1 << 20)
            .unwrap()
            .unwrap();
        assert!(String::from_utf8(bytes).unwrap().contains("Pid:"));
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b"0123456789").unwrap();
        let mut file = File::open(tmp.path()).unwrap();
        // The length an fstat gave is what is read; more than `max` is None.
        assert_eq!(
            read_sized(&mut file, tmp.path(), 4, 64).unwrap().unwrap(),
            b"0123"
        );
        assert_eq!(read_sized(&mut file, tmp.path(), 10, 5).unwrap(), None);
    }
}
