//! Writing generated documents (man pages) into a directory the user names.
//! Outside any state root, but still the only place that touches files:
//! every target is checked before the first byte is written, so a refusal
//! leaves the directory exactly as it was.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};

/// Write `pages` (file name, bytes) into `dir`, creating `dir` (not its
/// parents' symlinks) if missing. Refused: `dir` a file or a symlink, a page
/// name with a separator, an existing page that is not a regular file.
/// Existing regular pages are replaced through a temp file and a rename.
pub fn write_pages(dir: &Path, pages: &[(String, Vec<u8>)]) -> StoreResult<PathBuf> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(StoreError::invalid(format!(
                "output directory must not be a symlink: '{}'",
                dir.display()
            )));
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(StoreError::invalid(format!(
                "output path exists and is not a directory: '{}'",
                dir.display()
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(&e, dir)),
    }
    for (name, _) in pages {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(StoreError::invalid(format!("invalid page name: {name:?}")));
        }
        let target = dir.join(name);
        match fs::symlink_metadata(&target) {
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(StoreError::invalid(format!(
                    "refusing to replace something that is not a regular file: '{}'",
                    target.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&e, &target)),
        }
    }
    if !dir.exists() {
        fs::create_dir(dir).map_err(|e| StoreError::io(&e, dir))?;
    }
    for (name, bytes) in pages {
        let target = dir.join(name);
        let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)
            .map_err(|e| StoreError::io(&e, &temp))?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written.and_then(|()| fs::rename(&temp, &target)) {
            let _ = fs::remove_file(&temp);
            return Err(StoreError::io(&e, &target));
        }
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(name: &str) -> Vec<(String, Vec<u8>)> {
        vec![(name.to_string(), b".TH X 1\n".to_vec())]
    }

    #[test]
    fn writes_into_a_new_directory_and_replaces_regular_pages() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("man");
        write_pages(&dir, &page("x.1")).unwrap();
        write_pages(&dir, &page("x.1")).unwrap();
        assert_eq!(fs::read(dir.join("x.1")).unwrap(), b".TH X 1\n");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temp file left");
    }

    #[test]
    fn refuses_files_symlinks_and_odd_names_without_writing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(write_pages(&file, &page("x.1")).is_err());
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        assert!(write_pages(&link, &page("x.1")).is_err());
        let dir = tmp.path().join("man");
        assert!(write_pages(&dir, &page("../x.1")).is_err());
        assert!(!dir.exists(), "nothing created on refusal");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&file, dir.join("x.1")).unwrap();
        assert!(write_pages(&dir, &[page("y.1")[0].clone(), page("x.1")[0].clone()]).is_err());
        assert!(
            !dir.join("y.1").exists(),
            "no page written before the refusal"
        );
        assert_eq!(fs::read(&file).unwrap(), b"x");
    }
}
