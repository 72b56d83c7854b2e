//! The PURE coordinator core: replay of verified receipt events into the
//! coordinator state (no I/O, no clock).
//!
//! * [`replay`] — the reducer: [`CoordinatorState::apply`] one event at a
//!   time, or [`replay()`] a whole receipt.
//! * [`state`] — the typed state and its exact reference JSON
//!   ([`CoordinatorState::public_json`], [`CoordinatorState::lane_records`]).

pub mod approval;
pub mod breach;
pub mod completion;
pub mod component_refusal;
pub mod decide;
mod event_meta;
pub mod input_refusal;
pub mod inputs;
pub mod lane_commands;
pub mod liveness;
pub mod machine;
pub mod otel;
pub mod owner_refusal;
pub mod raced;
pub mod recovery;
pub mod recovery_refusal;
pub mod replacement;
pub mod replacement_refusal;
pub mod replay;
pub mod report_refusal;
pub mod reports;
pub mod resolution;
pub mod resolution_refusal;
pub mod resume;
pub mod run_commands;
pub mod signed;
pub mod simple;
pub mod snapshot;
pub mod state;
pub mod timeline;
pub mod topology;
pub mod views;

pub use replay::{OnRefusal, ReplayError, ReplayPolicy, RunOrigin, replay};
pub use state::{
    CheckRecord, Component, CoordinatorState, CoverageState, EarlierDigests, FailureResolution,
    LaneRecord, LaneState, RunState,
};

#[cfg(test)]
mod fixture_tests;

#[cfg(test)]
mod replay_tests;

#[cfg(test)]
mod test_ledger;
