//! Held directory descriptors (DEVIATIONS 50): a run's files are reached
//! from descriptors opened once, one component at a time with
//! `O_NOFOLLOW | O_DIRECTORY`, never by re-resolving a path. A directory
//! renamed away or replaced by a symlink after we opened it cannot redirect
//! a write: the kernel resolves each name inside the directory we hold.
//!
//! [`Loc`] names one entry of a held directory; every primitive of
//! [`super::secure`] takes a [`Place`], which a `Loc` is, and so is a path
//! placed through the command's state root ([`super::root::InRoot`]): a
//! path inside the root is reached from the held root ([`super::root`]);
//! only a path outside it (a file the user names) has its parent opened by
//! path. A bare `Path` is no `Place`: where it lies is the root's to say.

use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Weak};

use super::error::{StoreError, StoreResult};
use super::root::Shared;
use nix::libc;

fn os(error: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(error.raw_os_error())
}

/// An open directory and the path it had when we opened it (for messages
/// only: nothing is ever resolved through it again).
#[derive(Debug)]
pub struct HeldDir {
    file: File,
    path: PathBuf,
    /// Its `fstat` when opened (identity, and the owner and mode a caller
    /// checks right after opening, without asking again).
    opened: std::fs::Metadata,
    /// The state of the command whose root this directory was reached
    /// from (or placed through), if any: a rename or removal through it
    /// forgets what it may have changed there, and the files that command
    /// keeps under a lock are found from its entries. Weak: the root's
    /// state holds the directories it walked.
    root: Option<Weak<Shared>>,
}

impl HeldDir {
    fn from_fd(fd: OwnedFd, path: PathBuf) -> std::io::Result<HeldDir> {
        let file = File::from(fd);
        let opened = file.metadata()?;
        Ok(HeldDir {
            opened,
            file,
            path,
            root: None,
        })
    }

    /// This directory, as reached from (or placed through) the state root
    /// whose state is `root`.
    pub(super) fn in_root(mut self, root: Weak<Shared>) -> HeldDir {
        self.root = Some(root);
        self
    }

    /// The state of the command whose root this directory was reached
    /// from, while that command holds it.
    pub(super) fn root_state(&self) -> Option<Arc<Shared>> {
        self.root.as_ref()?.upgrade()
    }

    /// A directory opened beneath this one: reached from the same root.
    fn beneath_this(&self, dir: HeldDir) -> HeldDir {
        HeldDir {
            root: self.root.clone(),
            ..dir
        }
    }

    /// Forget what this command walked and kept (see
    /// [`super::root::forget_walked_in`]).
    fn forget_walked(&self) {
        if let Some(shared) = self.root_state() {
            super::root::forget_walked_in(&shared);
        }
    }

    /// Hold a directory already opened (and checked) as a `File`.
    pub fn from_file(file: File, path: PathBuf) -> std::io::Result<HeldDir> {
        HeldDir::from_fd(OwnedFd::from(file), path)
    }

    /// `fchmod`: the mode of the directory we hold.
    pub fn set_mode(&self, mode: u32) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        self.file
            .set_permissions(std::fs::Permissions::from_mode(mode))
    }

    /// Open a directory by path, without following a final symlink (the
    /// state root itself, or the parent of a file outside any run).
    pub fn open_path(path: &Path) -> std::io::Result<HeldDir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        HeldDir::from_fd(fd, path.to_path_buf())
    }

    /// Open the child directory `name` (one component, never a symlink).
    pub fn child(&self, name: &OsStr) -> std::io::Result<HeldDir> {
        let fd = rustix::fs::openat(
            &self.file,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        HeldDir::from_fd(fd, self.path.join(name)).map(|dir| self.beneath_this(dir))
    }

    /// Open the directory `relative` beneath this one in one `openat2`
    /// that follows no symlink at any component and never leaves this
    /// directory (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
    /// RESOLVE_NO_MAGICLINKS`, and `O_NOFOLLOW` for the last). `None` when
    /// the call fails for any reason (a kernel without `openat2`, a
    /// symlink, a missing name): the caller then walks component by
    /// component, whose refusals say why.
    pub fn descend(&self, relative: &Path) -> Option<HeldDir> {
        let fd = self.beneath(relative, OFlags::RDONLY | OFlags::DIRECTORY)?;
        HeldDir::from_fd(fd, self.path.join(relative))
            .ok()
            .map(|dir| self.beneath_this(dir))
    }

    /// [`Self::descend`] to a file: `relative` opened with `flags` in one
    /// `openat2` that follows no symlink at any component and never leaves
    /// this directory. `None` when the call fails for any reason.
    pub fn open_file_beneath(&self, relative: &Path, flags: OFlags) -> Option<File> {
        self.beneath(relative, flags).map(File::from)
    }

    fn beneath(&self, relative: &Path, flags: OFlags) -> Option<OwnedFd> {
        use rustix::fs::ResolveFlags;
        rustix::fs::openat2(
            &self.file,
            relative,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .ok()
    }

    /// Device and inode of this directory's parent (`..`, not followed
    /// further), as it is now.
    pub fn parent_identity(&self) -> Option<(u64, u64)> {
        let stat = rustix::fs::statat(&self.file, "..", AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some((stat.st_dev, stat.st_ino))
    }

    /// Walk `relative` (normal components only) from here, never following
    /// a symlink at any component.
    pub fn walk(self: &Arc<Self>, relative: &Path) -> std::io::Result<Arc<HeldDir>> {
        let mut dir = Arc::clone(self);
        for component in relative.components() {
            match component {
                Component::Normal(name) => dir = Arc::new(dir.child(name)?),
                Component::CurDir => {}
                _ => return Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
            }
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory as a `File` (for callers that only check it).
    pub fn into_file(self) -> File {
        self.file
    }

    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// What `fstat` said when the directory was opened.
    pub fn opened_metadata(&self) -> &std::fs::Metadata {
        &self.opened
    }

    /// Device and inode: what the directory is, whatever its name now.
    pub fn identity(&self) -> (u64, u64) {
        (self.opened.dev(), self.opened.ino())
    }

    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_all()
    }

    /// Entry names (a directory listing through the descriptor).
    pub fn entries(&self) -> std::io::Result<Vec<OsString>> {
        use std::os::unix::ffi::OsStrExt;
        let fd = rustix::fs::openat(
            &self.file,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        let dir = rustix::fs::Dir::read_from(&fd).map_err(os)?;
        let mut names = Vec::new();
        for entry in dir {
            let entry = entry.map_err(os)?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_os_string());
            }
        }
        Ok(names)
    }
}

/// One entry `name` of a held directory.
#[derive(Debug, Clone)]
pub struct Loc {
    dir: Arc<HeldDir>,
    name: OsString,
}

impl Loc {
    pub fn new(dir: Arc<HeldDir>, name: impl Into<OsString>) -> Loc {
        Loc {
            dir,
            name: name.into(),
        }
    }

    /// The path this entry had (for messages).
    pub fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }

    pub fn name(&self) -> &OsStr {
        &self.name
    }

    pub fn dir(&self) -> &Arc<HeldDir> {
        &self.dir
    }

    /// Another entry of the same directory.
    pub fn sibling(&self, name: impl Into<OsString>) -> Loc {
        Loc::new(Arc::clone(&self.dir), name)
    }

    /// `openat` with `O_NOFOLLOW | O_CLOEXEC` added.
    pub fn open(&self, flags: OFlags, mode: u32) -> std::io::Result<File> {
        rustix::fs::openat(
            &self.dir.file,
            self.name.as_os_str(),
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map(File::from)
        .map_err(os)
    }

    /// Open this entry as a directory (never through a symlink).
    pub fn open_dir(&self) -> std::io::Result<HeldDir> {
        self.dir.child(&self.name)
    }

    /// `lstat`: `None` when nothing is there.
    pub fn lstat(&self) -> std::io::Result<Option<rustix::fs::Stat>> {
        match rustix::fs::statat(
            &self.dir.file,
            self.name.as_os_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => Ok(Some(stat)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(os(e)),
        }
    }

    /// `lstat` as a `std` metadata (through an `O_PATH | O_NOFOLLOW`
    /// descriptor): `None` when nothing is there.
    pub fn symlink_metadata(&self) -> std::io::Result<Option<std::fs::Metadata>> {
        // One `statx` through the held directory's `/proc/self/fd` entry
        // (the kernel jumps to the directory we hold, whatever its name
        // now, and looks up the one component without following it), not
        // three calls (open, fstat, close). Without /proc, or for an entry
        // that is not there, the descriptor way below answers.
        use std::os::fd::AsRawFd;
        let mut through =
            std::ffi::OsString::from(format!("/proc/self/fd/{}/", self.dir.file.as_raw_fd()));
        through.push(&self.name);
        if let Ok(meta) = std::fs::symlink_metadata(&through) {
            return Ok(Some(meta));
        }
        match rustix::fs::openat(
            &self.dir.file,
            self.name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => File::from(fd).metadata().map(Some),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(os(e)),
        }
    }

    pub fn exists(&self) -> bool {
        self.lstat().is_ok_and(|s| s.is_some())
    }

    pub fn is_symlink(&self) -> bool {
        self.lstat().ok().flatten().is_some_and(|s| {
            rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Symlink
        })
    }

    pub fn rename_to(&self, to: &Loc) -> std::io::Result<()> {
        self.dir.forget_walked();
        self.renameat(to)
    }

    /// [`Self::rename_to`] of a file this command made (a lock's
    /// initializer into its lock directory): it forgets only the kept
    /// files and walked directories that have one of the two names, since
    /// a path resolves through the names on it only, and a file moved
    /// carries no directory or kept file of this command with it.
    pub fn rename_own_file_to(&self, to: &Loc) -> std::io::Result<()> {
        if let Some(shared) = self.dir.root_state() {
            super::root::forget_renamed_in(&shared, [self.name.as_os_str(), to.name.as_os_str()]);
        }
        self.renameat(to)
    }

    fn renameat(&self, to: &Loc) -> std::io::Result<()> {
        rustix::fs::renameat(
            &self.dir.file,
            self.name.as_os_str(),
            &to.dir.file,
            to.name.as_os_str(),
        )
        .map_err(os)
    }

    pub fn remove_file(&self) -> std::io::Result<()> {
        self.dir.forget_walked();
        rustix::fs::unlinkat(&self.dir.file, self.name.as_os_str(), AtFlags::empty()).map_err(os)
    }

    /// `linkat` without following a symlink: a new name for this entry;
    /// fails if anything is at `to`.
    pub fn hard_link_to(&self, to: &Loc) -> std::io::Result<()> {
        rustix::fs::linkat(
            &self.dir.file,
            self.name.as_os_str(),
            &to.dir.file,
            to.name.as_os_str(),
            AtFlags::empty(),
        )
        .map_err(os)
    }

    /// Remove this entry and, when it is a directory, everything in it,
    /// through descriptors only (a symlink inside is removed, never
    /// followed).
    pub fn remove_tree(&self) -> std::io::Result<()> {
        self.dir.forget_walked();
        let is_dir = self.lstat()?.is_some_and(|s| {
            rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory
        });
        if !is_dir {
            return self.remove_file();
        }
        let dir = Arc::new(self.open_dir()?);
        for name in dir.entries()? {
            Loc::new(Arc::clone(&dir), name).remove_tree()?;
        }
        rustix::fs::unlinkat(&self.dir.file, self.name.as_os_str(), AtFlags::REMOVEDIR).map_err(os)
    }

    pub fn mkdir(&self, mode: u32) -> std::io::Result<()> {
        rustix::fs::mkdirat(
            &self.dir.file,
            self.name.as_os_str(),
            Mode::from_raw_mode(mode),
        )
        .map_err(os)
    }

    /// Remove a directory of plain files (a lock directory), through its
    /// descriptor: nothing outside it is reached.
    /// `rmdir`: fails unless the directory is empty.
    pub fn remove_empty_dir(&self) -> std::io::Result<()> {
        self.dir.forget_walked();
        rustix::fs::unlinkat(&self.dir.file, self.name.as_os_str(), AtFlags::REMOVEDIR).map_err(os)
    }

    pub fn remove_flat_dir(&self) -> std::io::Result<()> {
        self.dir.forget_walked();
        let dir = self.open_dir()?;
        for name in dir.entries()? {
            let _ = rustix::fs::unlinkat(&dir.file, name.as_os_str(), AtFlags::empty());
        }
        rustix::fs::unlinkat(&self.dir.file, self.name.as_os_str(), AtFlags::REMOVEDIR).map_err(os)
    }

    pub fn sync_dir(&self) -> std::io::Result<()> {
        self.dir.sync()
    }
}

impl AsFd for HeldDir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Where a store primitive acts: an entry of a held directory, a path
/// placed through the command's state root, or a path outside any root
/// (its parent is opened by path).
pub trait Place {
    fn place(&self) -> StoreResult<Loc>;

    /// The path, when this is a path outside the command's state root (a
    /// file the user names): it may be opened by path in one call,
    /// which follows its parent's symlinks exactly as opening the parent
    /// would.
    fn outside_path(&self) -> Option<&Path> {
        None
    }

    /// The file opened with `flags` from the held root in one `openat2`,
    /// when this is a path inside the command's state root whose
    /// directory the command has not opened (see
    /// [`super::root::StateRoot::open_file_beneath`]); `None` otherwise, or when that
    /// open fails (the caller then opens it from its placed directory,
    /// whose refusal says why).
    fn open_beneath_root(&self, _flags: OFlags) -> Option<(File, PathBuf)> {
        None
    }
}

impl Place for Loc {
    fn place(&self) -> StoreResult<Loc> {
        Ok(self.clone())
    }
}

impl Place for super::root::InRoot<'_> {
    fn outside_path(&self) -> Option<&Path> {
        (!self.root().is_inside(self.path())).then_some(self.path())
    }

    fn open_beneath_root(&self, flags: OFlags) -> Option<(File, PathBuf)> {
        let file = self.root().open_file_beneath(self.path(), flags)?;
        Some((file, self.path().to_path_buf()))
    }

    fn place(&self) -> StoreResult<Loc> {
        // Inside the state root: from the held root.
        if let Some(loc) = self.root().place_inside(self.path())? {
            return Ok(loc);
        }
        // Outside it, by path; what is renamed or removed there still
        // makes the command forget what it walked, as anywhere.
        outside(self.path(), Some(self.root().downgrade()))
    }
}

/// The entry `path` of a directory opened by its path (a file outside any
/// state root: its parent's symlinks are followed as opening it would).
fn outside(path: &Path, root: Option<Weak<Shared>>) -> StoreResult<Loc> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| StoreError::invalid(format!("'{}' names no file", path.display())))?;
    let mut dir =
        HeldDir::open_directory_following(parent).map_err(|e| StoreError::io(&e, path))?;
    dir.root = root;
    Ok(Loc::new(Arc::new(dir), name))
}

impl HeldDir {
    /// A directory opened by a path whose components may be symlinks (the
    /// parent of a file named by the caller, such as a report or handle).
    fn open_directory_following(path: &Path) -> std::io::Result<HeldDir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        HeldDir::from_fd(fd, path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descend_stays_beneath_and_follows_no_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        std::fs::create_dir_all(base.join("runs/r1")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/r1")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("linked")).unwrap();
        std::os::unix::fs::symlink(base.join("runs/r1"), base.join("runs/r2")).unwrap();
        let root = HeldDir::open_path(base).unwrap();
        let run = root
            .descend(Path::new("runs/r1"))
            .expect("a plain path is reached");
        let runs = root.child(OsStr::new("runs")).unwrap();
        assert_eq!(run.parent_identity(), Some(runs.identity()));
        assert_eq!(run.path(), base.join("runs/r1"));
        // A symlink at any component, a way out, or nothing there: no.
        for refused in [
            "linked/r1",
            "runs/r2",
            "../runs/r1",
            "runs/../../x",
            "runs/r3",
        ] {
            assert!(root.descend(Path::new(refused)).is_none(), "{refused}");
        }
    }
}
