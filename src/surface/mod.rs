//! The command surface both shells share: every command's one definition
//! (its clap-derived typed arguments, [`registry`]), dispatch to the
//! command functions, and the answers (envelopes, tables, views). The
//! command line (`crate::cli`) parses argv into a [`Command`]; the MCP
//! server (`crate::mcp`) builds one from the values a tool call carries
//! ([`command_from`]); both answer through [`answer_command`].

pub mod approvals;
pub mod bundle;
pub mod envelope;
pub mod help;
pub mod lanes;
pub mod liveness;
pub mod manual;
pub mod mutation;
pub mod process;
pub mod progress;
pub mod recovery;
pub mod registry;
pub mod replacement;
pub mod report;
pub mod run;
pub mod table;
pub mod teach;
pub mod terminal;
pub mod topology;
pub mod transparency;
pub mod views;

use crate::store::input::JsonArg;
use crate::store::root::StateRoot;
use clap::{Args, CommandFactory, Parser, Subcommand};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::commands::{self, ErrorKind, FlowError, FlowResult};
use crate::store::discovery::{DiscoveryEnv, discover};

const EPILOG: &str = "Required fields are shown per command. UTC timestamps end in Z. Read-only commands never \
mutate receipts. Phase 1 supports only verify, rebuild, and receipt-diagnose. Safe next commands appear in \
command help. In-place migration is unavailable.";

/// `--version`: ours and the manifest schema it speaks.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (manifest 1.1.0)");

#[derive(Debug, Parser)]
#[command(
    name = "bluetape-flow",
    about = "Guarded Bluetape receipt and coordinator command surface.",
    after_help = EPILOG,
    version = VERSION,
    infer_long_args = true,
    args_override_self = true,
    disable_help_subcommand = true,
    // Without arguments clap would show the help as the error text; say
    // what is missing instead, like any other argument error.
    arg_required_else_help = false
)]
pub struct Cli {
    /// The state root <DIR> (must precede the command); without it the root
    /// is discovered, see "Getting started" below.
    #[arg(long = "state-root", value_name = "STATE_ROOT")]
    pub state_root: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    StateRoot(StateRootArgs),
    Init(InitArgs),
    Verify(VerifyArgs),
    Rebuild(RunArgs),
    ReceiptDiagnose(RunArgs),
    ResumeCheck(RunArgs),
    #[command(flatten)]
    Run(run::RunCommands),
    #[command(flatten)]
    Lanes(lanes::LaneCommands),
    #[command(flatten)]
    Replacement(replacement::ReplacementCommands),
    #[command(flatten)]
    Liveness(liveness::LivenessCommands),
    #[command(flatten)]
    Approvals(approvals::ApprovalCommands),
    #[command(flatten)]
    Topology(topology::TopologyCommands),
    #[command(flatten)]
    Recovery(recovery::RecoveryCommands),
    #[command(flatten)]
    Transparency(transparency::TransparencyCommands),
    #[command(flatten)]
    Bundle(bundle::BundleCommands),
    #[command(flatten)]
    Views(views::ViewCommands),
    Doctor(DoctorArgs),
    EvidenceDigest(EvidenceDigestArgs),
    Completions(CompletionsArgs),
    Man(ManArgs),
    #[cfg(feature = "mcp")]
    Mcp(McpArgs),
}

#[cfg(feature = "mcp")]
#[derive(Debug, Args)]
pub struct McpArgs {
    #[arg(long, value_enum, required = true)]
    pub mode: registry::Mode,
    #[arg(long = "state-root", value_name = "STATE_ROOT")]
    pub state_root: Option<PathBuf>,
    #[arg(long = "owner-file", value_name = "FILE")]
    pub owner_file: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct DoctorArgs {
    /// table (default on a terminal) or json (default otherwise).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<views::StatusFormat>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct EvidenceDigestArgs {
    /// The evidence list to digest, as the lane recorded it: inline, - or a <FILE> (see "JSON values" below).
    #[arg(long, required = true)]
    pub evidence: JsonArg,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    #[arg(long, required = true, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct StateRootArgs {
    #[arg(long)]
    pub start: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct InitArgs {
    #[arg(long = "workflow-type", required = true)]
    pub workflow_type: String,
    #[arg(long = "repo-root", required = true)]
    pub repo_root: PathBuf,
    #[arg(long = "owner-file", required = true)]
    pub owner_file: PathBuf,
    #[arg(long = "component", required = true, action = clap::ArgAction::Append)]
    #[serde(default)]
    pub component: Vec<String>,
    /// Freeze an approval policy for the run (see contracts/approvals.md).
    #[arg(long = "approval-policy", value_name = "FILE")]
    pub approval_policy: Option<JsonArg>,
    #[command(flatten)]
    #[serde(flatten)]
    pub at: mutation::AtArg,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct VerifyArgs {
    /// The run whose receipt to verify.
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    /// A file of verifier keys (one per line, as key-generate prints): every stored signed head must verify with them; repeatable.
    #[arg(long, action = clap::ArgAction::Append, value_name = "FILE")]
    #[serde(default)]
    pub key: Vec<PathBuf>,
    /// A signed head kept elsewhere (needs --key): the receipt must extend it.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub head: Option<PathBuf>,
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct RunArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
}

/// What a command printed: the operation name, its data (the success
/// envelope's) and, for a command a person may see as a table, that table
/// drawn from the typed answer the data was made from.
pub struct Success {
    operation: &'static str,
    data: Map<String, Value>,
    table: Option<Table>,
}

/// A command's table, drawn with or without colour.
type Table = Box<dyn Fn(bool) -> String>;

impl Success {
    /// A typed answer as the envelope's data.
    pub fn of(operation: &'static str, answer: &impl serde::Serialize) -> Success {
        Success::data(operation, envelope::data(answer))
    }

    /// Data already in the envelope's shape.
    pub fn data(operation: &'static str, data: Map<String, Value>) -> Success {
        Success {
            operation,
            data,
            table: None,
        }
    }

    /// A typed answer, and the table `render` draws from it.
    pub fn tabled<T: serde::Serialize + 'static>(
        operation: &'static str,
        answer: T,
        render: fn(&T, bool) -> String,
    ) -> Success {
        let data = envelope::data(&answer);
        Success {
            operation,
            data,
            table: Some(Box::new(move |colour| render(&answer, colour))),
        }
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The commands that never read a state root (offline verification, a new
/// key file): no root is discovered and their answer names none
/// (DEVIATIONS 90).
fn rootless(command: &Command) -> bool {
    matches!(
        command,
        Command::Transparency(
            transparency::TransparencyCommands::KeyGenerate(_)
                | transparency::TransparencyCommands::CheckProof(_)
        ) | Command::Bundle(bundle::BundleCommands::BundleVerify(_))
    )
}

/// Run a command: the state root it used (none for a [`rootless`] one)
/// and what it printed.
fn run(cli: Cli, env: &DiscoveryEnv) -> Result<(Option<String>, Success), FlowError> {
    if rootless(&cli.command) {
        let success = dispatch(cli.command, &StateRoot::rootless(), env)?;
        return Ok((None, success));
    }
    let start = match &cli.command {
        Command::StateRoot(args) => args.start.clone(),
        _ => None,
    };
    let root = discover(cli.state_root.as_deref(), start.as_deref(), env)?;
    // Every file inside the root is reached from one held descriptor,
    // held for this command by the value passed down to every store call.
    let root = StateRoot::begin(&root);
    let success = dispatch(cli.command, &root, env)?;
    Ok((Some(path_text(&root)), success))
}

fn dispatch(command: Command, root: &StateRoot, env: &DiscoveryEnv) -> FlowResult<Success> {
    test_panic_trigger();
    Ok(match command {
        Command::StateRoot(_) => Success::data("state-root", Map::new()),
        Command::Init(args) => {
            let request = commands::init::InitRequest {
                workflow_type: args.workflow_type,
                repo_root: args.repo_root,
                owner_file: args.owner_file,
                components: args.component,
            };
            let policy = args
                .approval_policy
                .map(|file| commands::init::PolicyRequest {
                    file,
                    initiated_by: commands::approval::ApprovalEnv::from_process().initiated_by(),
                });
            let (outcome, policy_checksum) = commands::init::init_with_policy(
                root,
                env,
                &request,
                &commands::init::InitEntropy::fresh_at(args.at.at.as_deref())?,
                policy.as_ref(),
            )?;
            Success::of("init", &outcome.answer(policy_checksum))
        }
        Command::Verify(args) => Success::of(
            "verify",
            &commands::verify_signed(root, &args.run_id, &args.key, args.head.as_deref())?,
        ),
        Command::Transparency(command) => transparency::dispatch(command, root, env)?,
        Command::Bundle(command) => bundle::dispatch(command, root, env)?,
        Command::Run(command) => run::dispatch(command, root, env)?,
        Command::Lanes(command) => lanes::dispatch(command, root, env)?,
        Command::Replacement(command) => replacement::dispatch(command, root, env)?,
        Command::Liveness(command) => liveness::dispatch(command, root, env)?,
        Command::Approvals(command) => approvals::dispatch(command, root, env)?,
        Command::Topology(command) => topology::dispatch(command, root, env)?,
        Command::Recovery(command) => recovery::dispatch(command, root, env)?,
        Command::Views(_) => {
            return Err(FlowError::contract("views are run by run_with_terminal"));
        }
        Command::ReceiptDiagnose(args) => Success::of(
            "receipt-diagnose",
            &commands::inspect::diagnose(root, &args.run_id)?,
        ),
        Command::ResumeCheck(args) => Success::of(
            "resume-check",
            &commands::inspect::resume_check(root, &args.run_id)?,
        ),
        Command::Rebuild(args) => {
            Success::of("rebuild", &commands::rebuild::rebuild(root, &args.run_id)?)
        }
        Command::Doctor(_) => Success::tabled(
            "doctor",
            commands::doctor::doctor(root, std::time::SystemTime::now()),
            terminal::doctor_table,
        ),
        Command::Completions(_) | Command::Man(_) | Command::EvidenceDigest(_) => {
            unreachable!("utilities are answered before state-root discovery")
        }
        #[cfg(feature = "mcp")]
        Command::Mcp(_) => unreachable!("the server is started before state-root discovery"),
    })
}

/// The whole command tree, with the help pages applied.
pub fn command() -> clap::Command {
    command_with(help::Pages::Full)
}

/// The command tree with as much of the help pages as `pages` asks
/// ([`help::Pages::for_args`]).
pub fn command_with(pages: help::Pages) -> clap::Command {
    help::teach(Cli::command(), EPILOG, pages)
}

/// The utilities never discover a state root: `completions` prints a
/// script, `man` writes pages and answers with a root-less envelope.
fn utility(
    parsed: &Command,
    env: &DiscoveryEnv,
    out: &mut dyn Write,
) -> Option<Result<(), FlowError>> {
    match parsed {
        Command::EvidenceDigest(args) => {
            Some(evidence_digest(&args.evidence, env).map(|line| emit(out, &line)))
        }
        Command::Completions(args) => {
            let mut tree = self::command();
            clap_complete::generate(args.shell, &mut tree, "bluetape-flow", out);
            Some(Ok(()))
        }
        Command::Man(args) => {
            Some(manual::write(&command(), &args.out).map(|line| emit(out, &line)))
        }
        _ => None,
    }
}

/// `evidence-digest`: the digest `lane-resolve` binds for an evidence list
/// (and `replacement-repair` for a checkpoint's), computed as the tool
/// computes it, so no recipe canonicalises JSON by hand.
fn evidence_digest(evidence: &JsonArg, env: &DiscoveryEnv) -> Result<String, FlowError> {
    use crate::store::input::{InputShape, read_json_input};
    // A utility reads no state root: the file is named by path.
    let value = read_json_input(
        &StateRoot::rootless(),
        evidence,
        InputShape::List,
        env.home.as_ref(),
        "--evidence",
    )?;
    let mut data = Map::new();
    data.insert(
        "digest".into(),
        Value::String(crate::receipt::canonical::digest(&value)),
    );
    data.insert(
        "items".into(),
        Value::from(value.as_array().map_or(0, Vec::len)),
    );
    data.insert("ok".into(), Value::Bool(true));
    data.insert("operation".into(), Value::String("evidence-digest".into()));
    Ok(envelope::render(&Value::Object(data)))
}

/// The exit status of an answer that could not be written
/// (contracts/commands.md "Answers are not lost"): sysexits' EX_IOERR.
pub const ANSWER_LOST: u8 = 74;

/// Write a success answer and flush it, reporting a failure.
fn answer(stream: &mut dyn Write, line: &str) -> std::io::Result<()> {
    stream.write_all(line.as_bytes())?;
    stream.write_all(b"\n")?;
    stream.flush()
}

/// The command did its work but its answer is lost (a closed pipe, a full
/// disk under a redirected stdout): say so on stderr, with what was
/// recorded and where to see it, and exit [`ANSWER_LOST`], never 0.
fn answer_lost(
    err: &mut dyn Write,
    operation: &str,
    data: &Map<String, Value>,
    lost: &std::io::Error,
) -> u8 {
    let mutation = registry::is_mutation(operation);
    let run_id = data.get("run_id").and_then(Value::as_str);
    let next = match run_id {
        Some(run_id) => format!("bluetape-flow status --run-id {run_id}"),
        None => "bluetape-flow status".to_string(),
    };
    let done = if mutation {
        "was recorded (it is in the receipt: do not run it again)"
    } else {
        "ran"
    };
    let mut body = Map::new();
    body.insert("ok".into(), Value::Bool(false));
    body.insert("error".into(), Value::from("answer_lost"));
    body.insert(
        "message".into(),
        Value::from(format!(
            "{operation} {done}, but its answer could not be written to standard output ({lost}); see it with: {next}"
        )),
    );
    body.insert("retryable".into(), Value::Bool(!mutation));
    body.insert("next_command".into(), Value::from(next));
    body.insert("operation".into(), Value::from(operation));
    for key in ["run_id", "sequence", "checksum"] {
        if let Some(value) = data.get(key) {
            body.insert(key.into(), value.clone());
        }
    }
    emit(err, &envelope::render(&Value::Object(body)));
    ANSWER_LOST
}

pub fn emit(stream: &mut dyn Write, line: &str) {
    let _ = stream.write_all(line.as_bytes());
    let _ = stream.write_all(b"\n");
    let _ = stream.flush();
}

/// Run the command `command` on the state root `state_root` (discovered
/// when `None`) as the MCP server calls it: built from the values it
/// received ([`command_from`]), not from a command line, with the same
/// checks, answer and exit status.
pub fn run_command(
    state_root: Option<PathBuf>,
    command: Command,
    given: &Map<String, Value>,
    env: &DiscoveryEnv,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let cli = Cli {
        state_root,
        command,
    };
    let term = views::Terminal::default();
    answer_command(cli, teach::Given::Arguments(given), env, term, out, err)
}

/// The command `name` with the arguments `arguments` (its flags in snake
/// case, JSON inputs as values): the typed command its command line would
/// parse to (agent-tools.md §4 "Values, not files"). The caller has held
/// the arguments to the command's flags (`mcp::catalog::checked`).
pub fn command_from(name: &str, arguments: Map<String, Value>) -> Result<Command, String> {
    use serde::de::DeserializeOwned;
    fn args<T: DeserializeOwned>(arguments: Map<String, Value>) -> serde_json::Result<T> {
        serde_json::from_value(Value::Object(arguments))
    }
    fn group<T: Subcommand + DeserializeOwned>(
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Option<serde_json::Result<T>> {
        let mut tagged = Map::new();
        tagged.insert(name.to_string(), Value::Object(arguments.clone()));
        T::has_subcommand(name).then(|| serde_json::from_value(Value::Object(tagged)))
    }
    let built = match name {
        "state-root" => args(arguments).map(Command::StateRoot),
        "init" => args(arguments).map(Command::Init),
        "verify" => args(arguments).map(Command::Verify),
        "rebuild" => args(arguments).map(Command::Rebuild),
        "receipt-diagnose" => args(arguments).map(Command::ReceiptDiagnose),
        "resume-check" => args(arguments).map(Command::ResumeCheck),
        "doctor" => args(arguments).map(Command::Doctor),
        "evidence-digest" => args(arguments).map(Command::EvidenceDigest),
        _ => group(name, &arguments)
            .map(|r| r.map(Command::Run))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Lanes)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Replacement)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Liveness)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Approvals)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Topology)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Recovery)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Transparency)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Bundle)))
            .or_else(|| group(name, &arguments).map(|r| r.map(Command::Views)))
            .ok_or_else(|| format!("no command is called {name}"))?,
    };
    built.map_err(|e| format!("{name}: {e}"))
}

/// Run a parsed command and write its answer (or refusal) where the CLI
/// writes them; returns the exit status.
pub fn answer_command(
    cli: Cli,
    given: teach::Given,
    env: &DiscoveryEnv,
    term: views::Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    // Dropped after the answer is printed; each bar is cleared as its read
    // ends, before that.
    let _progress = progress::scope(&cli.command, term);
    if let Command::Views(command) = cli.command {
        return match discover(cli.state_root.as_deref(), None, env) {
            Ok(root) => views::run(command, &StateRoot::begin(&root), env, term, out, err),
            Err(error) => {
                let (code, text) = envelope::failure(&FlowError::from(error));
                emit(err, &text);
                code
            }
        };
    }
    if let Some(result) = utility(&cli.command, env, out) {
        return match result {
            Ok(()) => 0,
            Err(error) => {
                let (code, text) = envelope::failure(&error);
                emit(err, &text);
                code
            }
        };
    }
    let wants_table = terminal::wants_table(&cli.command, term);
    match run(cli, env) {
        Ok((root, success)) => {
            let colour = || term.stdout_is_tty() && !term.no_color;
            let text = match success.table.as_ref().filter(|_| wants_table) {
                Some(table) => table(colour()),
                None => {
                    envelope::success_in(success.operation, root.as_deref(), success.data.clone())
                }
            };
            match answer(out, &text) {
                Ok(()) => 0,
                Err(lost) => answer_lost(err, success.operation, &success.data, &lost),
            }
        }
        Err(error) => {
            let (code, text) = envelope::failure_with(&error, given);
            emit(err, &text);
            code
        }
    }
}

/// The error a caught panic is reported as. The command may have appended
/// its event before it failed, so the message says to look before retrying.
pub fn panic_error(payload: &(dyn std::any::Any + Send)) -> FlowError {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    ErrorKind::Internal(crate::coordinator::decide::Bug::Panic(what)).into()
}

/// Test-only (debug builds): `BLUETAPE_TEST_PANIC=1` panics inside command
/// dispatch, so the suite can prove a panic still ends in the envelope.
fn test_panic_trigger() {
    if cfg!(debug_assertions) && std::env::var_os("BLUETAPE_TEST_PANIC").is_some() {
        panic!("test-only panic trigger");
    }
}
