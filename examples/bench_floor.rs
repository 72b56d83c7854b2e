//! The floor of a mutation for `scripts/bench.sh`: one process that opens
//! FILE with O_APPEND (creating it), writes 1,500 bytes (about one
//! heartbeat line), fsyncs and exits. The bench times the whole process;
//! with `bluetape-flow --version` (the binary's own start) it is what no
//! heartbeat can go below.
//!
//!   bench_floor FILE

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: bench_floor FILE");
        return ExitCode::from(2);
    };
    let mut line = [b'x'; 1500];
    line[1499] = b'\n';
    let result = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut file| {
            file.write_all(&line)?;
            file.sync_all()
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_floor: {e}");
            ExitCode::from(1)
        }
    }
}
