//! `kanban-gateway`: the gateway as its own binary, the same code as `kanban gateway run`.

use std::path::PathBuf;
use std::process::ExitCode;

use board_home::Home;
use clap::Parser;
use gateway::logging::{LogArgs, LogOptions, Verbosity};

/// Runs the board's gateway until SIGINT or SIGTERM: a dispatcher tick every
/// kanban.dispatch_interval_seconds that decomposes triage cards, promotes, claims and
/// spawns workers, and reclaims the work of workers that are gone.
#[derive(Debug, Parser)]
#[command(name = "kanban-gateway", version)]
struct Args {
    /// The board's home directory [default: $KANBAN_HOME, else ~/.kanban]
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Stop the gateway already running on this home first
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    verbosity: Verbosity,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // Help and version on stdout with 0; a usage error on stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let home = match Home::resolve(args.home) {
        Ok(home) => home,
        Err(e) if e.is_usage() => return usage(&e.to_string()),
        Err(e) => return failed(&e),
    };
    if let Err(e) = gateway::logging::init(LogOptions::new(args.log, args.verbosity)) {
        return usage(&e.to_string());
    }
    let opened = match home.open() {
        Ok(opened) => opened,
        Err(e) => return failed(&e),
    };
    match gateway::daemon::run(&home, opened.store, opened.loaded, args.replace) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

fn failed(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kanban-gateway: {e}");
    ExitCode::FAILURE
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("kanban-gateway: {problem} (see --help)");
    ExitCode::from(2)
}
