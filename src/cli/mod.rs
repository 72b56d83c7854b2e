//! The command line: argv parsed into the [`Command`] every shell shares
//! (`crate::surface`), the process's streams, terminal and exit status.
//! `mcp` starts the MCP server, the other shell over the same surface.

use clap::FromArgMatches;
use std::ffi::OsString;
use std::io::Write;

use crate::commands::FlowError;
use crate::store::discovery::DiscoveryEnv;
use crate::surface::help::Pages;
use crate::surface::teach::Given;
use crate::surface::{
    Cli, answer_command, command, command_with, emit, envelope, panic_error, progress, views,
};

/// Run the CLI on `args` with `env`, writing to the given streams (which
/// are not a terminal).
pub fn run_with(
    args: Vec<OsString>,
    env: &DiscoveryEnv,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    run_with_terminal(args, env, views::Terminal::default(), out, err)
}

/// [`run_with`], knowing whether stdout is a terminal (views print tables
/// there, JSON elsewhere).
pub fn run_with_terminal(
    args: Vec<OsString>,
    env: &DiscoveryEnv,
    term: views::Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let argv = args.clone();
    if args.len() <= 1 {
        // Bare invocation: the usage and the command list, for a person
        // (cli-conventions §5; DEVIATIONS 91), not a JSON error.
        let _ = write!(err, "{}", command().render_help());
        return 2;
    }
    let matches = command_with(Pages::for_args(&args)).try_get_matches_from(args);
    let mut piped: Vec<&'static str> = Vec::new();
    let cli = match matches.and_then(|m| {
        piped = stdin_flags(&m);
        Cli::from_arg_matches(&m)
    }) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let text = e.render().to_string();
                let _ = out.write_all(text.as_bytes());
                if !text.ends_with('\n') {
                    let _ = out.write_all(b"\n");
                }
                return 0;
            }
            let (code, text) = envelope::failure(&FlowError::contract(parse_error_message(&e)));
            emit(err, &text);
            return code;
        }
    };
    if piped.len() > 1 {
        let error = FlowError::from(crate::coordinator::decide::InputRefusal::SharedStdin {
            flags: piped.iter().map(|flag| flag.to_string()).collect(),
        });
        let (code, text) = envelope::failure_with(&error, Given::Argv(&argv));
        emit(err, &text);
        return code;
    }
    #[cfg(feature = "mcp")]
    if let crate::surface::Command::Mcp(args) = cli.command {
        let config = crate::mcp::Config {
            mode: args.mode,
            state_root: args.state_root.or(cli.state_root),
            owner_file: args.owner_file,
            env: env.clone(),
        };
        return match crate::mcp::serve(config) {
            Ok(()) => 0,
            Err(error) => {
                let (code, text) = envelope::failure(&error);
                emit(err, &text);
                code
            }
        };
    }
    answer_command(cli, Given::Argv(&argv), env, term, out, err)
}

/// clap's message without its "error: " prefix, usage and tips, on one line.
fn parse_error_message(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let body = text.split("\n\nUsage:").next().unwrap_or(&text);
    let body = body.trim().trim_start_matches("error: ");
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The JSON options of the parsed command whose value is `-` (standard
/// input; contracts/commands.md "JSON inputs").
fn stdin_flags(matches: &clap::ArgMatches) -> Vec<&'static str> {
    const IDS: [(&str, &str); 5] = [
        ("evidence", "--evidence"),
        ("input", "--input"),
        ("decision", "--decision"),
        ("changed_paths", "--changed-paths"),
        ("approval_policy", "--approval-policy"),
    ];
    let mut sub = matches;
    while let Some((_, next)) = sub.subcommand() {
        sub = next;
    }
    IDS.iter()
        .filter(|(id, _)| {
            sub.try_get_raw(id)
                .ok()
                .flatten()
                .is_some_and(|mut values| values.any(|v| v == "-"))
        })
        .map(|(_, flag)| *flag)
        .collect()
}

/// The binary's work, returning its exit status (`src/main.rs` ends the
/// process with it). A panic is a bug, but it must still end in the typed
/// envelope and an exit status of the table (DEVIATIONS 13): the default
/// hook's text is silenced and the unwind is caught here.
pub fn process_status() -> u8 {
    let env = DiscoveryEnv::from_process();
    let term = views::Terminal {
        stdout: views::Tty::Ask(views::Stdio::Out),
        stderr: views::Tty::Ask(views::Stdio::Err),
        progress_after: std::env::var("BLUETAPE_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(progress::DEFAULT_AFTER, std::time::Duration::from_millis),
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    };
    // Views stream their rows: a buffered stdout keeps that cheap. Not
    // locked for the whole run: the MCP server writes stdout from its own
    // threads.
    let mut out = std::io::BufWriter::new(std::io::stdout());
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_with_terminal(
            std::env::args_os().collect(),
            &env,
            term,
            &mut out,
            &mut std::io::stderr(),
        )
    }));
    let _ = out.flush();
    outcome.unwrap_or_else(|payload| {
        let (code, text) = envelope::failure(&panic_error(payload.as_ref()));
        emit(&mut std::io::stderr(), &text);
        code
    })
}
