//! State-root discovery, exactly the reference's order (reference-runtime
//! §1.1): `--state-root`, `BLUETAPE_STATE_ROOT`, the nearest ancestor with
//! `.bluetape/config.json`, `~/work/bluetape4k/.bluetape`, then XDG.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::paths::{expand_tilde, home_dir, resolve_nonstrict, strip_trailing_slashes};

/// The process facts discovery depends on, captured once so tests can pin them.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryEnv {
    pub state_root: Option<OsString>,
    pub xdg_state_home: Option<OsString>,
    pub home: Option<OsString>,
    pub cwd: PathBuf,
}

impl DiscoveryEnv {
    /// Read the real environment.
    pub fn from_process() -> DiscoveryEnv {
        DiscoveryEnv {
            state_root: std::env::var_os("BLUETAPE_STATE_ROOT"),
            xdg_state_home: std::env::var_os("XDG_STATE_HOME"),
            home: std::env::var_os("HOME"),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }
}

fn explicit(path: &Path, env: &DiscoveryEnv) -> StoreResult<PathBuf> {
    let expanded = expand_tilde(path, env.home.as_ref());
    // Before any root is held: the path as given, by one `lstat` (of
    // the link itself, not through a trailing slash).
    if std::fs::symlink_metadata(strip_trailing_slashes(&expanded))
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(StoreError::invalid("state root must not be a symlink"));
    }
    Ok(resolve_nonstrict(&expanded, &env.cwd))
}

/// Find the state root. `explicit_root` is the global `--state-root`;
/// `start` is `state-root --start` (default: the working directory).
pub fn discover(
    explicit_root: Option<&Path>,
    start: Option<&Path>,
    env: &DiscoveryEnv,
) -> StoreResult<PathBuf> {
    if let Some(path) = explicit_root {
        return explicit(path, env);
    }
    if let Some(value) = env.state_root.as_ref().filter(|v| !v.is_empty()) {
        return explicit(Path::new(value), env);
    }
    let start = resolve_nonstrict(start.unwrap_or(Path::new(".")), &env.cwd);
    for dir in start.ancestors() {
        if dir.join(".bluetape").join("config.json").is_file() {
            return Ok(resolve_nonstrict(&dir.join(".bluetape"), &env.cwd));
        }
    }
    let home = home_dir(env.home.as_ref()).unwrap_or_else(|| PathBuf::from("/"));
    let workspace = home.join("work").join("bluetape4k");
    if workspace.is_dir() {
        return Ok(resolve_nonstrict(&workspace.join(".bluetape"), &env.cwd));
    }
    let base = match &env.xdg_state_home {
        // An empty XDG_STATE_HOME means the working directory, as in the reference.
        Some(value) if value.is_empty() => PathBuf::from("."),
        Some(value) => PathBuf::from(value),
        None => home.join(".local").join("state"),
    };
    Ok(resolve_nonstrict(
        &expand_tilde(&base.join("bluetape-skills"), env.home.as_ref()),
        &env.cwd,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> DiscoveryEnv {
        DiscoveryEnv {
            home: Some(dir.join("home").into_os_string()),
            cwd: dir.to_path_buf(),
            ..Default::default()
        }
    }

    #[test]
    fn order_of_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = resolve_nonstrict(tmp.path(), Path::new("/"));
        let mut e = env(&dir);
        // XDG fallback, then empty XDG = cwd, then a tilde value.
        assert_eq!(
            discover(None, None, &e).unwrap(),
            dir.join("home/.local/state/bluetape-skills")
        );
        e.xdg_state_home = Some(OsString::new());
        assert_eq!(
            discover(None, None, &e).unwrap(),
            dir.join("bluetape-skills")
        );
        e.xdg_state_home = Some("~/x".into());
        assert_eq!(
            discover(None, None, &e).unwrap(),
            dir.join("home/x/bluetape-skills")
        );
        // The workspace rule beats XDG.
        std::fs::create_dir_all(dir.join("home/work/bluetape4k")).unwrap();
        assert_eq!(
            discover(None, None, &e).unwrap(),
            dir.join("home/work/bluetape4k/.bluetape")
        );
        // An ancestor with .bluetape/config.json beats the workspace.
        std::fs::create_dir_all(dir.join("proj/.bluetape")).unwrap();
        std::fs::create_dir_all(dir.join("proj/a/b")).unwrap();
        std::fs::write(dir.join("proj/.bluetape/config.json"), "{}").unwrap();
        assert_eq!(
            discover(None, Some(Path::new("proj/a/b")), &e).unwrap(),
            dir.join("proj/.bluetape")
        );
        // The environment beats the walk; empty means unset.
        e.state_root = Some(OsString::new());
        assert_eq!(
            discover(None, Some(Path::new("proj/a")), &e).unwrap(),
            dir.join("proj/.bluetape")
        );
        e.state_root = Some("rel/root".into());
        assert_eq!(discover(None, None, &e).unwrap(), dir.join("rel/root"));
        // The flag beats everything.
        assert_eq!(
            discover(Some(Path::new("/x/y/")), None, &e).unwrap(),
            PathBuf::from("/x/y")
        );
    }

    #[test]
    fn explicit_symlink_root_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
        let e = env(tmp.path());
        for p in ["link", "link/"] {
            let err = discover(Some(&tmp.path().join(p)), None, &e).unwrap_err();
            assert_eq!(err, StoreError::invalid("state root must not be a symlink"));
        }
    }
}
