//! The process facts the commands are given as values: the clock, the
//! random source and the environment are read here, in the command
//! surface both shells share, and nowhere below it (the store's own
//! temporary names and lock tokens aside).

use crate::commands::approval::ApprovalEnv;
use crate::commands::init::InitEntropy;
use crate::store::handle::OwnerToken;

impl InitEntropy {
    /// The clock and fresh random values for a new run.
    pub fn fresh() -> InitEntropy {
        InitEntropy {
            now: chrono::Utc::now(),
            recorded: None,
            run_suffix: crate::store::random::uuid4().simple().to_string()[..8].to_string(),
            token: OwnerToken::generate(),
            staging_suffix: crate::store::random::uuid4().simple().to_string(),
        }
    }
}

impl InitEntropy {
    /// [`InitEntropy::fresh`] recording `--at` when given (checked against
    /// the wall clock: a UTC instant, at most the skew bound ahead).
    pub fn fresh_at(at: Option<&str>) -> Result<InitEntropy, crate::commands::FlowError> {
        let mut entropy = InitEntropy::fresh();
        if let Some(at) = at {
            entropy.recorded = Some(crate::coordinator::decide::check_at(at, entropy.now)?);
        }
        Ok(entropy)
    }
}

impl ApprovalEnv {
    /// The approval gate's variables of this process.
    pub fn from_process() -> ApprovalEnv {
        ApprovalEnv {
            approved_by: std::env::var_os("BLUETAPE_APPROVED_BY"),
            approver_file: std::env::var_os("BLUETAPE_APPROVER_FILE"),
            initiated_by: std::env::var_os("BLUETAPE_INITIATED_BY"),
        }
    }
}
