//! Files a view writes outside the state root (`report --out`): never
//! inside the state root, never through a symlink, never over an existing
//! file unless asked, always through an exclusive temp file and a rename.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::root::StateRoot;
use super::secure::sync_dir;
use nix::libc;

/// Mode of a written report: readable by the user only, like the state.
const OUTPUT_MODE: u32 = 0o600;

/// The absolute, symlink-resolved form of `path`'s directory joined with
/// its file name (the directory must exist).
fn resolve_target(path: &Path, cwd: &Path) -> StoreResult<(PathBuf, PathBuf)> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let name = absolute
        .file_name()
        .ok_or_else(|| StoreError::invalid("output path must name a file"))?
        .to_os_string();
    let parent = absolute
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("/"));
    let dir = std::fs::canonicalize(parent).map_err(|_| {
        StoreError::invalid(format!(
            "output directory does not exist: {}",
            parent.display()
        ))
    })?;
    Ok((dir.clone(), dir.join(name)))
}

/// Write `bytes` to `path` (relative to `cwd`) for a view. Refuses a path
/// inside `state_root`, a symlink, anything but a regular file in the way,
/// and an existing file without `force`. Returns the absolute path.
pub fn write_view_file(
    path: &Path,
    cwd: &Path,
    state_root: &StateRoot,
    bytes: &[u8],
    force: bool,
) -> StoreResult<PathBuf> {
    write_view_with(path, cwd, state_root, force, |file, temp| {
        file.write_all(bytes).map_err(|e| StoreError::io(&e, temp))
    })
}

/// Put the finished `temp` at `target` only if nothing is there: `link`
/// fails atomically on an existing name (a file or symlink created after
/// the checks), where a rename would replace it. `temp` is removed after.
fn place_new(temp: &Path, target: &Path) -> StoreResult<()> {
    match std::fs::hard_link(temp, target) {
        Ok(()) => {
            let _ = std::fs::remove_file(temp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(StoreError::invalid(
            "output file exists (pass --force to replace it)",
        )),
        Err(e) => Err(StoreError::io(&e, target)),
    }
}

/// [`write_view_file`] for content streamed by `write` into the temp file
/// (`bundle-export`): the same refusals, the same temp file and rename.
pub fn write_view_with(
    path: &Path,
    cwd: &Path,
    state_root: &StateRoot,
    force: bool,
    write: impl FnOnce(&mut std::fs::File, &Path) -> StoreResult<()>,
) -> StoreResult<PathBuf> {
    let (dir, target) = resolve_target(path, cwd)?;
    if let Ok(root) = std::fs::canonicalize(state_root)
        && (dir.starts_with(&root) || target.starts_with(&root))
    {
        return Err(StoreError::invalid(
            "output path must be outside the state root",
        ));
    }
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(StoreError::invalid("output path must not be a symlink"));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(StoreError::invalid("output path exists and is not a file"));
        }
        Ok(_) if !force => {
            return Err(StoreError::invalid(
                "output file exists (pass --force to replace it)",
            ));
        }
        _ => {}
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(crate::store::random::temp_name(&name));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(OUTPUT_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&temp)
        .map_err(|e| StoreError::io(&e, &temp))?;
    let result = (|| {
        file.set_permissions(std::fs::Permissions::from_mode(OUTPUT_MODE))
            .map_err(|e| StoreError::io(&e, &temp))?;
        write(&mut file, &temp)?;
        file.sync_all().map_err(|e| StoreError::io(&e, &temp))?;
        // Checked again right before the rename: a symlink planted in the
        // meantime is refused, not replaced.
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::invalid("output path must not be a symlink"));
        }
        if force {
            std::fs::rename(&temp, &target).map_err(|e| StoreError::io(&e, &target))
        } else {
            place_new(&temp, &target)
        }
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
        return result.map(|_| target);
    }
    sync_dir(state_root.at(&dir))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_never_replaces_one_that_appeared_after_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let (temp, target) = (dir.path().join(".t.tmp"), dir.path().join("out"));
        std::fs::write(&temp, b"new").unwrap();
        // Created after the caller's checks, as a racing writer would.
        std::fs::write(&target, b"someone else's").unwrap();
        let error = place_new(&temp, &target).unwrap_err();
        assert!(error.message().contains("output file exists"), "{error:?}");
        assert_eq!(std::fs::read(&target).unwrap(), b"someone else's");
        // A symlink planted there is refused too, and not followed.
        std::fs::remove_file(&target).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &target).unwrap();
        assert!(place_new(&temp, &target).is_err());
        assert!(!dir.path().join("elsewhere").exists());
        // Nothing there: the file is placed and the temp name is gone.
        std::fs::remove_file(&target).unwrap();
        place_new(&temp, &target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!temp.exists());
    }
}
