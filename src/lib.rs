//! bluetape-flow: a guarded, hash-chained state ledger for multi-lane agent runs.
//!
//! Layers, with no cycles: `cli` → `commands` → `coordinator` (pure rules)
//! → `receipt` (pure formats: canonical JSON, the event and manifest
//! contracts, streaming verification). `commands` → `store`, the only
//! module that touches the filesystem; `store` writes its files in the
//! `receipt` formats and never calls the layers above it.

pub mod cli;
pub mod commands;
pub mod coordinator;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod receipt;
pub mod store;
