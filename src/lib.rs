//! bluetape-flow: a guarded, hash-chained state ledger for multi-lane agent runs.
//!
//! Layers (one direction only): `cli` → `commands` → `coordinator` (pure) →
//! `receipt` (pure formats) → `store` (the only filesystem access).

pub mod cli;
pub mod commands;
pub mod coordinator;
pub mod receipt;
pub mod store;
