//! Path helpers with Python `pathlib`/`os.path` semantics: tilde expansion
//! and the non-strict `realpath` the reference uses everywhere.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The home directory: `$HOME`, else the passwd entry.
pub fn home_dir(home_env: Option<&OsString>) -> Option<PathBuf> {
    if let Some(home) = home_env {
        return Some(PathBuf::from(home));
    }
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
}

/// `os.path.expanduser`: `~` and `~/x` use the home directory, `~user/x`
/// that user's home; anything else is unchanged.
pub fn expand_tilde(path: &Path, home_env: Option<&OsString>) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    if !bytes.starts_with(b"~") {
        return path.to_path_buf();
    }
    let end = bytes.iter().position(|b| *b == b'/').unwrap_or(bytes.len());
    let user = &bytes[1..end];
    let rest = &bytes[end..];
    let base = if user.is_empty() {
        home_dir(home_env)
    } else {
        std::str::from_utf8(user)
            .ok()
            .and_then(|u| nix::unistd::User::from_name(u).ok().flatten())
            .map(|u| u.dir)
    };
    match base {
        Some(base) => {
            let mut joined = base.into_os_string().into_vec_lossless();
            while joined.len() > 1 && joined.ends_with(b"/") && rest.starts_with(b"/") {
                joined.pop();
            }
            joined.extend_from_slice(rest);
            PathBuf::from(std::ffi::OsString::from_vec_lossless(joined))
        }
        None => path.to_path_buf(),
    }
}

trait VecConv {
    fn into_vec_lossless(self) -> Vec<u8>;
    fn from_vec_lossless(v: Vec<u8>) -> Self;
}

impl VecConv for OsString {
    fn into_vec_lossless(self) -> Vec<u8> {
        use std::os::unix::ffi::OsStringExt;
        self.into_vec()
    }
    fn from_vec_lossless(v: Vec<u8>) -> Self {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(v)
    }
}

/// Make `path` absolute against `cwd` without touching the filesystem.
pub fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// Python's `Path.resolve(strict=False)`: follow every existing symlink
/// component by component, apply `..` after expansion, keep a missing tail
/// lexically.
pub fn resolve_nonstrict(path: &Path, cwd: &Path) -> PathBuf {
    let mut resolved = PathBuf::from("/");
    let mut budget = 64u32;
    walk(&absolute(path, cwd), &mut resolved, &mut budget);
    resolved
}

fn walk(path: &Path, resolved: &mut PathBuf, budget: &mut u32) {
    for component in path.components() {
        match component {
            Component::RootDir => *resolved = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let candidate = resolved.join(name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() && *budget > 0 => {
                        *budget -= 1;
                        match std::fs::read_link(&candidate) {
                            Ok(target) => walk(&target, resolved, budget),
                            Err(_) => *resolved = candidate,
                        }
                    }
                    _ => *resolved = candidate,
                }
            }
        }
    }
}

/// `pathlib` drops a trailing slash; `lstat("link/")` would follow the link.
pub fn strip_trailing_slashes(path: &Path) -> PathBuf {
    path.components().collect()
}

/// The name without its last suffix, `pathlib` style (`.owner` has no suffix).
pub fn stem(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    match name.rfind('.') {
        Some(0) | None => Some(name.to_string()),
        Some(i) if i == name.len() - 1 => Some(name.to_string()),
        Some(i) => Some(name[..i].to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_follows_links_and_keeps_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let cwd = Path::new("/");
        let base = resolve_nonstrict(dir.path(), cwd);
        assert_eq!(
            resolve_nonstrict(&dir.path().join("link/missing/x"), cwd),
            base.join("real/missing/x")
        );
        assert_eq!(
            resolve_nonstrict(&dir.path().join("link/../other"), cwd),
            base.join("other")
        );
        assert_eq!(
            resolve_nonstrict(Path::new("a/./b/../c"), Path::new("/w")),
            PathBuf::from("/w/a/c")
        );
    }

    #[test]
    fn tilde() {
        let home = OsString::from("/w/home");
        assert_eq!(
            expand_tilde(Path::new("~/x"), Some(&home)),
            PathBuf::from("/w/home/x")
        );
        assert_eq!(
            expand_tilde(Path::new("~"), Some(&home)),
            PathBuf::from("/w/home")
        );
        assert_eq!(
            expand_tilde(Path::new("a/~"), Some(&home)),
            PathBuf::from("a/~")
        );
    }

    #[test]
    fn stems_follow_pathlib() {
        assert_eq!(stem(Path::new("h/main.owner")).unwrap(), "main");
        assert_eq!(stem(Path::new("h/.owner")).unwrap(), ".owner");
        assert_eq!(stem(Path::new("h/noext")).unwrap(), "noext");
        assert_eq!(stem(Path::new("h/a.b.c")).unwrap(), "a.b");
    }
}
