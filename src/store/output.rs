//! Files a view writes outside the state root (`report --out`): never
//! inside the state root, never through a symlink, never over an existing
//! file unless asked, always through an exclusive temp file and a rename.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
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
    state_root: &Path,
    bytes: &[u8],
    force: bool,
) -> StoreResult<PathBuf> {
    write_view_with(path, cwd, state_root, force, |file, temp| {
        file.write_all(bytes).map_err(|e| StoreError::io(&e, temp))
    })
}

/// [`write_view_file`] for content streamed by `write` into the temp file
/// (`bundle-export`): the same refusals, the same temp file and rename.
pub fn write_view_with(
    path: &Path,
    cwd: &Path,
    state_root: &Path,
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
    let suffix: String = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(8)
        .collect();
    let temp = dir.join(format!(".{name}.{suffix}.tmp"));
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
        if !force && std::fs::symlink_metadata(&target).is_ok() {
            return Err(StoreError::invalid(
                "output file exists (pass --force to replace it)",
            ));
        }
        std::fs::rename(&temp, &target).map_err(|e| StoreError::io(&e, &target))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
        return result.map(|_| target);
    }
    sync_dir(&dir)?;
    Ok(target)
}
