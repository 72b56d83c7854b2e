//! The process facts the commands are given as values: the clock, the
//! random source and the environment are read here, in the CLI, and
//! nowhere below it (the store's own temporary names and lock tokens
//! aside).

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

/// The commands that append one event to a run (or make one), loading it
/// from its proven checkpoint: short processes whose allocations all fit
/// one small heap. They run on the C library's allocator, whose start
/// costs no system calls; mimalloc's own start (reading the overcommit and
/// huge-page settings, naming each mapping) was a tenth of a heartbeat's
/// calls. Every other command (the full replays, the parallel verifiers,
/// the MCP server) keeps mimalloc (src/main.rs).
pub const ONE_EVENT_MUTATIONS: &[&str] = &[
    "check-result",
    "complete",
    "component-evidence",
    "handoff-create",
    "heartbeat",
    "init",
    "interrupt-result",
    "lane-block",
    "lane-cancel",
    "lane-complete",
    "lane-create",
    "lane-fail",
    "lane-reassign",
    "lane-resolve",
    "lane-start",
    "live-report-create",
    "probe-ack",
    "probe-sent",
    "replacement-block",
    "replacement-close",
    "replacement-repair",
    "resume",
    "run-approve",
    "run-block",
    "run-cancel",
    "run-fail",
    "run-recovery-finish",
    "run-recovery-start",
    "run-start",
    "stall-clear",
    "stall-record",
    "startup-ack",
    "topology-register",
    "topology-remove",
];

/// The other commands that change state (a run made from another, derived
/// files, a key, a signed head, a git ref): with [`ONE_EVENT_MUTATIONS`],
/// every command whose help says "Mutation" (a test holds the two lists to
/// the parser), so nothing decides on that text at run time.
pub const OTHER_MUTATIONS: &[&str] = &[
    "key-generate",
    "publish",
    "rebuild",
    "recovery-run-create",
    "sign-head",
];

/// Whether the command `name` changes state ([`ONE_EVENT_MUTATIONS`],
/// [`OTHER_MUTATIONS`]).
pub fn is_mutation(name: &str) -> bool {
    ONE_EVENT_MUTATIONS.contains(&name) || OTHER_MUTATIONS.contains(&name)
}

/// Whether the process arguments `args` (after the program's name) run one
/// of [`ONE_EVENT_MUTATIONS`]: the command is the first argument after the
/// one global option, `--state-root`. Allocates nothing (the binary asks
/// before its first allocation).
pub fn is_one_event_mutation<'a>(mut args: impl Iterator<Item = &'a [u8]>) -> bool {
    let command = loop {
        match args.next() {
            Some(b"--state-root") => {
                args.next();
            }
            Some(arg) if arg.starts_with(b"--state-root=") => {}
            Some(arg) => break arg,
            None => return false,
        }
    };
    ONE_EVENT_MUTATIONS
        .iter()
        .any(|name| name.as_bytes() == command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asks(args: &[&str]) -> bool {
        is_one_event_mutation(args.iter().map(|a| a.as_bytes()))
    }

    #[test]
    fn the_command_is_found_after_the_global_option() {
        assert!(asks(&["heartbeat", "--run-id", "x"]));
        assert!(asks(&["--state-root", "verify", "heartbeat"]));
        assert!(asks(&["--state-root=/s", "lane-start"]));
        assert!(!asks(&["--state-root", "heartbeat", "verify"]));
        assert!(!asks(&["verify", "heartbeat"]));
        assert!(!asks(&["--state-root"]));
        assert!(!asks(&[]));
    }

    #[test]
    fn each_listed_command_is_a_mutation_of_the_parser() {
        use clap::CommandFactory;
        let tree = crate::cli::Cli::command();
        for name in ONE_EVENT_MUTATIONS {
            let command = tree
                .get_subcommands()
                .find(|c| c.get_name() == *name)
                .unwrap_or_else(|| panic!("{name} is no command"));
            let about = command
                .get_about()
                .map(|a| a.to_string())
                .unwrap_or_default();
            assert!(about.starts_with("Mutation."), "{name}: {about}");
        }
    }

    #[test]
    fn the_mutations_are_exactly_the_parsers() {
        use clap::CommandFactory;
        let tree = crate::cli::Cli::command();
        for command in tree.get_subcommands() {
            let name = command.get_name();
            let about = command
                .get_about()
                .map(|a| a.to_string())
                .unwrap_or_default();
            assert_eq!(
                is_mutation(name),
                about.starts_with("Mutation"),
                "{name}: {about}"
            );
        }
        for name in OTHER_MUTATIONS {
            assert!(tree.find_subcommand(name).is_some(), "{name} is no command");
        }
    }
}
