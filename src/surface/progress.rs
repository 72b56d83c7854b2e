//! The progress bar of a long read (cli-conventions §1 and §5,
//! DEVIATIONS 94): `verify`, `receipt-diagnose`, `rebuild`, `log`,
//! `bundle-export` and `bundle-verify` draw one on stderr (indicatif) only
//! when stderr is a terminal and the read has taken longer than a second
//! (`BLUETAPE_PROGRESS_AFTER_MS` sets that delay); when piped, nothing.
//! The bar is cleared before the command prints its answer. `log` draws it
//! only when its rows go elsewhere (stdout not a terminal), so rows and
//! bar never interleave on one screen.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Command;
use super::bundle::BundleCommands;
use super::views::{Terminal, ViewCommands};
use crate::store::progress::{Scope, Sink, Task, begin};

/// The delay before a bar is drawn, unless the environment sets another.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(1);

/// The name a command's bar shows, for the commands that draw one.
fn drawing(command: &Command, term: Terminal) -> Option<&'static str> {
    Some(match command {
        Command::Verify(_) => "verify",
        Command::ReceiptDiagnose(_) => "receipt-diagnose",
        Command::Rebuild(_) => "rebuild",
        Command::Views(ViewCommands::Log(_)) if !term.stdout_is_tty() => "log",
        Command::Bundle(BundleCommands::BundleExport(_)) => "bundle-export",
        Command::Bundle(BundleCommands::BundleVerify(_)) => "bundle-verify",
        _ => return None,
    })
}

/// The progress scope of `command`: installed only when stderr is a
/// terminal and the command is one that draws.
pub fn scope(command: &Command, term: Terminal) -> Option<Scope> {
    let what = drawing(command, term)?;
    if !term.stderr_is_tty() {
        return None;
    }
    Some(begin(
        what,
        Arc::new(Bars {
            after: term.progress_after,
        }),
    ))
}

/// Bars on the process's stderr.
struct Bars {
    after: Duration,
}

impl Sink for Bars {
    fn task(&self, what: &str, total: u64) -> Box<dyn Task> {
        let style = ProgressStyle::with_template(
            "{prefix} {bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden())
            .with_style(style)
            .with_prefix(what.to_string());
        Box::new(Bar {
            bar,
            started: Instant::now(),
            after: self.after,
            shown: false,
        })
    }
}

struct Bar {
    bar: ProgressBar,
    started: Instant,
    after: Duration,
    shown: bool,
}

impl Task for Bar {
    fn advance(&mut self, bytes: u64) {
        self.bar.inc(bytes);
        if !self.shown && self.started.elapsed() >= self.after {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.tick();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        // The answer follows on a clean line.
        self.bar.finish_and_clear();
    }
}
