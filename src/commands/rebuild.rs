//! `rebuild`: rewrite the derived caches (run.json, lanes/*.json) from a
//! fully verified receipt. The receipt stays the only truth.

use serde_json::{Map, Value};
use std::path::Path;

use super::SimpleRunCache;
use super::error::{FlowError, FlowResult};
use super::ledger::{Verdict, damage_error, open_run, verify_receipt};

pub fn rebuild(root: &Path, run_id: &str) -> FlowResult<Map<String, Value>> {
    let run = open_run(root, run_id)?;
    let mut cache = SimpleRunCache::default();
    let position = match verify_receipt(&run, |event| {
        cache.observe(event);
        Ok(())
    })? {
        Verdict::Intact(position) => position,
        Verdict::Damaged(damage) => return Err(damage_error(&run, &damage)),
        Verdict::Rejected { message, .. } => return Err(FlowError::ReceiptCorrupt(message)),
    };
    run.dir.write_cache(
        &run.dir.run_cache_path(),
        &cache.to_json(run_id, &run.manifest.contract.hash),
    )?;
    let mut out = Map::new();
    out.insert("checksum".into(), Value::String(position.checksum));
    out.insert("run_id".into(), Value::String(run_id.to_string()));
    out.insert("sequence".into(), Value::from(position.sequence));
    Ok(out)
}
