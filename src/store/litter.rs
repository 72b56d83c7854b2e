//! Litter: what killed writers leave in a state root. A killed `init`
//! leaves a run directory without a receipt and a staging handle
//! `handles/init-<hex>.owner`; a killed writer leaves a temp file of an
//! atomic replace (`.<name>.<hex>.tmp`), a lock held by a dead process, or
//! a retired lock directory (`<lock>.retired.<hex>`, `.stale.`). None of it
//! is read as truth, but it accumulates. `doctor` lists it (read-only) with
//! the command that removes it; `init` removes what is provably dead: older
//! than the lock grace and, for a run directory, with no live lock holder.
//! Nothing holding data is removed: a staging handle whose run has a
//! receipt is that run's only credential and is only reported.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::lock::DirLock;
use super::root::StateRoot;

/// The lock protocol's grace: anything younger may belong to a live writer.
pub const GRACE: Duration = Duration::from_secs(30);

/// What a piece of litter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LitterKind {
    /// A run directory without a receipt (a killed `init`).
    HalfMadeRun,
    /// `handles/init-*.owner` of a run that has no receipt.
    StagingHandle,
    /// `handles/init-*.owner` of a run that has a receipt: its only handle.
    UnpublishedHandle,
    /// A temp file of an interrupted atomic replace.
    TempFile,
    /// A retired or stale lock directory or file left by a reclaim.
    RetiredLock,
    /// A lock whose holder is dead (the next writer reclaims it).
    DeadLock,
    /// A `receipt-head.json` that names no head (DEVIATIONS 104): derived,
    /// `rebuild` rewrites it from a receipt that verifies.
    DamagedHeadRecord,
}

impl LitterKind {
    pub fn name(self) -> &'static str {
        match self {
            LitterKind::HalfMadeRun => "half_made_run",
            LitterKind::StagingHandle => "staging_handle",
            LitterKind::UnpublishedHandle => "unpublished_handle",
            LitterKind::TempFile => "temp_file",
            LitterKind::RetiredLock => "retired_lock",
            LitterKind::DeadLock => "dead_lock",
            LitterKind::DamagedHeadRecord => "damaged_head_record",
        }
    }
}

/// One piece of litter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Litter {
    pub kind: LitterKind,
    pub path: PathBuf,
    /// Seconds since it was last modified.
    pub age_s: u64,
    /// Older than the grace with no live holder: safe to remove.
    pub dead: bool,
}

impl Litter {
    /// The shell command that removes it, or what to do instead.
    pub fn remedy(&self) -> String {
        let quoted = self.path.to_string_lossy().replace('\'', "'\\''");
        match self.kind {
            LitterKind::UnpublishedHandle => format!(
                "keep it: it is the run's only owner handle; give it a name with mv '{quoted}' <state root>/handles/<name>.owner"
            ),
            LitterKind::DeadLock => "nothing: the next writer of the run reclaims it".to_string(),
            LitterKind::DamagedHeadRecord => {
                let run_dir = self.path.parent().unwrap_or(Path::new("."));
                let run_id = name_of(run_dir);
                let root = run_dir
                    .parent()
                    .and_then(Path::parent)
                    .map(|r| r.to_string_lossy().replace('\'', "'\\''"))
                    .unwrap_or_default();
                format!(
                    "bluetape-flow --state-root '{root}' rebuild --run-id {run_id} (it rewrites the head record when the receipt verifies; receipt-diagnose shows the finding)"
                )
            }
            _ if !self.dead => {
                "wait: it may belong to a live writer (younger than 30 s or locked)".to_string()
            }
            LitterKind::HalfMadeRun | LitterKind::RetiredLock => format!("rm -r -- '{quoted}'"),
            LitterKind::StagingHandle | LitterKind::TempFile => format!("rm -- '{quoted}'"),
        }
    }
}

// Every path below is reached from the command's held state root
// (`store::root`): a symlinked `runs/`, `handles/` or `locks/` is neither
// listed through nor removed through.
fn age(root: &StateRoot, path: &Path, now: SystemTime) -> Option<Duration> {
    let modified = root.symlink_metadata(path)?.modified().ok()?;
    Some(now.duration_since(modified).unwrap_or_default())
}

fn entries(root: &StateRoot, dir: &Path) -> Vec<PathBuf> {
    if root
        .symlink_metadata(dir)
        .is_some_and(|m| m.file_type().is_symlink())
    {
        return Vec::new();
    }
    root.list(dir)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// The temp files of atomic writes and the retired lock directories in
/// `dir`: what a killed writer leaves beside the files it was replacing.
fn leftovers(root: &StateRoot, dir: &Path) -> impl Iterator<Item = (LitterKind, PathBuf)> {
    entries(root, dir).into_iter().filter_map(|path| {
        let name = name_of(&path);
        if is_temp_name(&name) {
            Some((LitterKind::TempFile, path))
        } else if is_retired_name(&name) {
            Some((LitterKind::RetiredLock, path))
        } else {
            None
        }
    })
}

fn is_retired_name(name: &str) -> bool {
    name.contains(".retired.") || name.contains(".stale.")
}

fn has_receipt(root: &StateRoot, run_dir: &Path) -> bool {
    root.symlink_metadata(&run_dir.join("receipt.jsonl"))
        .is_some_and(|m| m.len() > 0)
}

/// The receipt lock of a run without a receipt is free, or what a writer
/// killed while taking it left (an `init` killed at its first `flock`,
/// DEVIATIONS 104): an initializer `.receipt.initializing.json` and/or an
/// empty lock directory, each older than the grace, the initializer's pid
/// (when it has a readable one) not alive and its flock not held, the
/// same rule the lock protocol applies when it claims a stale initializer
/// or an empty lock directory.
fn half_made_lock_is_free(root: &StateRoot, run_dir: &Path, now: SystemTime) -> bool {
    let lock = DirLock::new(root, run_dir.join("locks").join("receipt"));
    match lock.status() {
        "unlocked" | "locked_dead" => return true,
        "locked_initializing" => {}
        _ => return false,
    }
    let old = |path: &Path| age(root, path, now).is_some_and(|a| a >= GRACE);
    let dir = run_dir.join("locks").join("receipt");
    if root.symlink_metadata(&dir).is_some() && !old(&dir) {
        return false;
    }
    let init = run_dir.join("locks").join(".receipt.initializing.json");
    if root.symlink_metadata(&init).is_none() {
        return true;
    }
    if !old(&init) || super::secure::flock_held(&root.at(&init)) {
        return false;
    }
    let record = super::heads::read_small(&root.at(&init), None)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    !matches!(
        record.as_ref().and_then(super::lock::pid_of),
        Some(super::lock::PidState::Alive | super::lock::PidState::Unknown)
    )
}

/// A run's head record, when present and naming no head.
fn head_record_is_damaged(root: &StateRoot, run_dir: &Path) -> bool {
    let path = run_dir.join("receipt-head.json");
    if !root.symlink_metadata(&path).is_some_and(|m| m.is_file()) {
        return false;
    }
    super::heads::read_small(&root.at(&path), None).is_ok_and(|bytes| {
        let key = super::secret::read_key(root);
        super::run::parse_head(&bytes, &name_of(run_dir), key.as_deref()).is_none()
    })
}

/// Every piece of litter under `root`, oldest kinds first. Reads only.
pub fn scan(root: &StateRoot, now: SystemTime) -> Vec<Litter> {
    let mut out = Vec::new();
    let mut push = |kind, path: PathBuf, dead_if_old: bool| {
        let age = age(root, &path, now).unwrap_or_default();
        out.push(Litter {
            kind,
            dead: dead_if_old && age >= GRACE,
            age_s: age.as_secs(),
            path,
        });
    };
    for run_dir in entries(root, &root.join("runs")) {
        let is_dir = root.symlink_metadata(&run_dir).is_some_and(|m| m.is_dir());
        if !is_dir {
            continue;
        }
        let lock = DirLock::new(root, run_dir.join("locks").join("receipt"));
        if !has_receipt(root, &run_dir) {
            push(
                LitterKind::HalfMadeRun,
                run_dir.clone(),
                half_made_lock_is_free(root, &run_dir, now),
            );
            continue;
        }
        if head_record_is_damaged(root, &run_dir) {
            push(
                LitterKind::DamagedHeadRecord,
                run_dir.join("receipt-head.json"),
                false,
            );
        }
        if lock.status() == "locked_dead" {
            push(
                LitterKind::DeadLock,
                run_dir.join("locks").join("receipt"),
                false,
            );
        }
        for dir in [
            run_dir.clone(),
            run_dir.join("lanes"),
            run_dir.join("locks"),
        ] {
            for (kind, path) in leftovers(root, &dir) {
                push(kind, path, true);
            }
        }
    }
    for path in entries(root, &root.join("handles")) {
        let name = name_of(&path);
        if is_temp_name(&name) {
            push(LitterKind::TempFile, path, true);
            continue;
        }
        if !(name.starts_with("init-") && name.ends_with(".owner")) {
            continue;
        }
        let run_id = super::heads::read_small(&root.at(&path), None)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("run_id").and_then(|r| r.as_str()).map(str::to_string));
        let live_run = run_id
            .filter(|id| super::super::receipt::primitives::is_identifier(id))
            .is_some_and(|id| has_receipt(root, &root.join("runs").join(id)));
        if live_run {
            push(LitterKind::UnpublishedHandle, path, false);
        } else {
            push(LitterKind::StagingHandle, path, true);
        }
    }
    for dir in [root.to_path_buf(), root.join("locks")] {
        for (kind, path) in leftovers(root, &dir) {
            push(kind, path, true);
        }
    }
    out
}

/// What `init` removes before it creates a run: everything provably dead
/// that a killed writer left (trust-model §2 promise 9): half-made runs,
/// staging handles, temp files of atomic writes and retired lock
/// directories, each older than the grace (and a half-made run with no
/// live lock holder). Never a run's only handle, never a lock (the next
/// writer of its run reclaims it), never a head record (`rebuild`). Best
/// effort: a failure to remove is left for `doctor` to report. Returns how
/// many were removed.
pub fn remove_dead_init_litter(root: &StateRoot, now: SystemTime) -> usize {
    scan(root, now)
        .into_iter()
        .filter(|l| l.dead)
        .filter(|l| match l.kind {
            LitterKind::HalfMadeRun => root.remove_tree(&l.path).is_ok(),
            LitterKind::RetiredLock
                if root.symlink_metadata(&l.path).is_some_and(|m| m.is_dir()) =>
            {
                root.remove_tree(&l.path).is_ok()
            }
            LitterKind::StagingHandle | LitterKind::TempFile | LitterKind::RetiredLock => {
                root.remove_file(&l.path).is_ok()
            }
            _ => false,
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::DirBuilderExt;

    fn dir(path: &Path) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .unwrap();
    }

    #[test]
    fn only_dead_init_litter_is_removed_and_data_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let root = &crate::store::root::StateRoot::begin(tmp.path());
        dir(&root.join("runs/half"));
        dir(&root.join("runs/real"));
        std::fs::write(root.join("runs/real/receipt.jsonl"), b"{}\n").unwrap();
        dir(&root.join("handles"));
        std::fs::write(root.join("handles/init-aa.owner"), br#"{"run_id":"half"}"#).unwrap();
        std::fs::write(root.join("handles/init-bb.owner"), br#"{"run_id":"real"}"#).unwrap();
        std::fs::write(root.join("runs/real/.run.json.ab12.tmp"), b"x").unwrap();
        // Just made: everything may belong to a live init.
        let now = SystemTime::now();
        assert_eq!(remove_dead_init_litter(root, now), 0);
        let later = now + Duration::from_secs(31);
        let found = scan(root, later);
        let kinds: Vec<_> = found.iter().map(|l| (l.kind, l.dead)).collect();
        assert_eq!(
            kinds,
            vec![
                (LitterKind::HalfMadeRun, true),
                (LitterKind::TempFile, true),
                (LitterKind::StagingHandle, true),
                (LitterKind::UnpublishedHandle, false),
            ]
        );
        assert!(found[3].remedy().starts_with("keep it"));
        assert_eq!(remove_dead_init_litter(root, later), 3);
        assert!(!root.join("runs/half").exists());
        assert!(!root.join("handles/init-aa.owner").exists());
        assert!(
            root.join("handles/init-bb.owner").exists(),
            "a live run's only handle"
        );
        assert!(root.join("runs/real/receipt.jsonl").exists());
    }
}
