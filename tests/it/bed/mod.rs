//! Shared helpers for the integration tests: run the real binary in a
//! pinned environment, copy reference fixtures into temp dirs, snapshot a
//! tree to prove nothing changed.
#![allow(dead_code)]

pub mod refusal;
pub mod topo;

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference fixtures beside the checkout. Missing fixtures are a test
/// failure, never a silent skip.
pub fn fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-runs");
    assert!(
        dir.join("README.md").is_file(),
        "reference fixtures missing at {}",
        dir.display()
    );
    dir
}

/// Names of every scenario directory (with expected.json), plus recovery/.
pub fn scenarios() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.join("expected.json").is_file() {
            out.push(path.clone());
            if path.join("recovery/expected.json").is_file() {
                out.push(path.join("recovery"));
            }
        }
    }
    out
}

/// A recorded `argv` with its placeholders filled in: `{STATE}` is the
/// temp copy of the state root, `{INPUT:x}` the scenario's `inputs/x`.
pub fn expand_argv(argv: &[Value], state: &Path, scenario: &Path) -> Vec<String> {
    argv.iter()
        .map(|a| {
            let a = a.as_str().expect("recorded argv items are strings");
            match a.strip_prefix("{INPUT:").and_then(|r| r.strip_suffix('}')) {
                Some(name) => scenario
                    .join("inputs")
                    .join(name)
                    .to_string_lossy()
                    .into_owned(),
                None => a.replace("{STATE}", &state.to_string_lossy()),
            }
        })
        .collect()
}

/// Copy a scenario's state into `target` (created), recreate the empty
/// directories git dropped, and set modes 0700/0600.
pub fn prepare_state(scenario: &Path, target: &Path) {
    let tree: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(scenario.join("state-tree.json")).unwrap())
            .unwrap();
    std::fs::create_dir_all(target).unwrap();
    for entry in tree {
        let rel = entry["path"].as_str().unwrap();
        match entry["type"].as_str().unwrap() {
            "file" => {
                let dest = target.join(rel);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::copy(scenario.join("state").join(rel), &dest).unwrap();
            }
            "dir" => std::fs::create_dir_all(target.join(rel)).unwrap(),
            _ => {}
        }
    }
    set_modes(target);
}

/// 0700 on every directory, 0600 on every file under (and including) `root`.
pub fn set_modes(root: &Path) {
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700)).unwrap();
    for entry in walk(root) {
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = if meta.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Every path under `root` with its type, mode, mtime and content: equal
/// snapshots mean nothing was created, modified or chmod-ed.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, i64, Vec<u8>)> {
    let mut map = BTreeMap::new();
    if let Ok(meta) = std::fs::symlink_metadata(root) {
        map.insert(root.to_path_buf(), (meta.mode(), 0, Vec::new()));
    }
    for path in walk(root) {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let content = if meta.is_file() {
            std::fs::read(&path).unwrap()
        } else if meta.file_type().is_symlink() {
            std::fs::read_link(&path)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else {
            Vec::new()
        };
        let mtime = if meta.is_file() {
            meta.mtime_nsec() + meta.mtime() * 1_000_000_000
        } else {
            0
        };
        map.insert(path, (meta.mode(), mtime, content));
    }
    map
}

/// The result of one CLI call.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|_| panic!("stdout is not JSON: {self:?}"))
    }

    pub fn error(&self) -> Value {
        assert!(
            self.stdout.is_empty(),
            "failure printed on stdout: {self:?}"
        );
        serde_json::from_str(&self.stderr)
            .unwrap_or_else(|_| panic!("stderr is not JSON: {self:?}"))
    }

    /// Assert a typed failure with this exit status and error code.
    pub fn assert_error(&self, code: i32, error: &str) -> Value {
        assert_eq!(self.code, code, "{self:?}");
        let e = self.error();
        assert_eq!(e["error"], error, "{self:?}");
        assert_eq!(e["ok"], false);
        assert_eq!(e["retryable"], matches!(code, 5 | 6), "{self:?}");
        e
    }

    pub fn assert_ok(&self) -> Value {
        assert_eq!(self.code, 0, "{self:?}");
        assert!(self.stderr.is_empty(), "{self:?}");
        let v = self.json();
        assert_eq!(v["ok"], true);
        v
    }
}

/// A pinned environment: HOME inside `home`, no XDG, no BLUETAPE_STATE_ROOT.
pub struct Flow {
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub envs: Vec<(String, String)>,
}

impl Flow {
    pub fn new(base: &Path) -> Flow {
        let home = base.join("home");
        std::fs::create_dir_all(&home).unwrap();
        Flow {
            home,
            cwd: base.to_path_buf(),
            envs: Vec::new(),
        }
    }

    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bluetape-flow"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&self.cwd);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        let out = cmd.args(args).output().unwrap();
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Like [`Flow::run`], with extra environment variables for this call
    /// only (the pinned environment is otherwise unchanged).
    pub fn run_env<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], envs: &[(&str, &str)]) -> Output {
        let flow = Flow {
            home: self.home.clone(),
            cwd: self.cwd.clone(),
            envs: self
                .envs
                .iter()
                .cloned()
                .chain(envs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
                .collect(),
        };
        flow.run(args)
    }

    /// `init` a fresh run under `root`; returns the run id.
    pub fn init(&self, root: &Path, repo: &Path) -> String {
        std::fs::create_dir_all(repo).unwrap();
        let owner = root.join("handles/main.owner");
        let out = self.run(&[
            "--state-root".as_ref(),
            root.as_os_str(),
            "init".as_ref(),
            "--workflow-type".as_ref(),
            "A".as_ref(),
            "--repo-root".as_ref(),
            repo.as_os_str(),
            "--owner-file".as_ref(),
            owner.as_os_str(),
            "--component".as_ref(),
            "runtime".as_ref(),
        ]);
        out.assert_ok()["run_id"].as_str().unwrap().to_string()
    }
}

/// Arguments as owned strings (paths included).
pub fn args(items: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
    items.iter().map(|i| i.as_ref().to_os_string()).collect()
}
