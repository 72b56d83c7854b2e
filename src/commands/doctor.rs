//! `doctor` (read-only): the litter in a state root, each piece with the
//! command that removes it (see `store::litter`).

use crate::store::root::StateRoot;
use serde::Serialize;
use std::time::SystemTime;

/// What `doctor` answers: the litter found, each piece with its remedy.
#[derive(Debug, Serialize)]
pub struct LitterReport {
    /// How many pieces (`litter.len()`).
    pub count: usize,
    pub litter: Vec<LitterItem>,
}

/// One piece of litter a killed writer left behind.
#[derive(Debug, Serialize)]
pub struct LitterItem {
    pub kind: &'static str,
    pub path: String,
    /// Its age in seconds.
    pub age_s: u64,
    /// Whether the process that made it is gone.
    pub dead: bool,
    /// The command that removes it.
    pub remedy: String,
}

/// The litter report. `now` is the caller's clock.
pub fn doctor(root: &StateRoot, now: SystemTime) -> LitterReport {
    let litter: Vec<LitterItem> = crate::store::litter::scan(root, now)
        .iter()
        .map(|l| LitterItem {
            kind: l.kind.name(),
            path: l.path.to_string_lossy().into_owned(),
            age_s: l.age_s,
            dead: l.dead,
            remedy: l.remedy(),
        })
        .collect();
    LitterReport {
        count: litter.len(),
        litter,
    }
}
