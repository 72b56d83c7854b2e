//! Interoperation with the Python reference: its recorded runs (the
//! fixtures in `tests/fixtures/reference-runs`), Phase 1 runs, and the
//! worked example of the runtime contract.

mod parity;
mod phase1_runs;
mod rebuild;
mod worked_example;
