//! `kanban-gateway`: the gateway as its own binary, the same code as `kanban gateway run`.

use std::path::PathBuf;
use std::process::ExitCode;

use board_home::Home;
use gateway::logging::LogOptions;

const USAGE: &str = "usage: kanban-gateway [--home DIR] [--replace] [--log-format human|json] [-v|-q]...

Runs the board's gateway until SIGINT or SIGTERM: a dispatcher tick every
kanban.dispatch_interval_seconds that decomposes triage cards, promotes, claims and
spawns workers, and reclaims the work of workers that are gone.

  --home DIR   the board's home (else $KANBAN_HOME, else ~/.kanban)
  --replace    stop the gateway already running on this home first
  --log-format human (one line per event) or json (one object per line)
               [default: $KANBAN_LOG_FORMAT, else human]
  -v, -q       log more (debug, trace) or less (warn, error, off); win over RUST_LOG";

fn main() -> ExitCode {
    let mut home: Option<PathBuf> = None;
    let mut replace = false;
    let mut log = LogOptions::default();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--replace") => replace = true,
            Some("-v" | "--verbose") => log.verbosity = log.verbosity.saturating_add(1),
            Some("-q" | "--quiet") => log.verbosity = log.verbosity.saturating_sub(1),
            Some("--log-format") => match args.next().map(|f| f.to_string_lossy().parse()) {
                Some(Ok(format)) => log.format = Some(format),
                Some(Err(e)) => return usage(&e.to_string()),
                None => return usage("--log-format needs human or json"),
            },
            Some("--home") => match args.next() {
                Some(dir) => home = Some(PathBuf::from(dir)),
                None => return usage("--home needs a directory"),
            },
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let home = match Home::resolve(home) {
        Ok(home) => home,
        Err(e) if e.is_usage() => return usage(&e.to_string()),
        Err(e) => return failed(&e),
    };
    if let Err(e) = gateway::logging::init(log) {
        return usage(&e.to_string());
    }
    let opened = match home.open() {
        Ok(opened) => opened,
        Err(e) => return failed(&e),
    };
    match gateway::daemon::run(&home, opened.store, opened.loaded, replace) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

fn failed(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kanban-gateway: {e}");
    ExitCode::FAILURE
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("kanban-gateway: {problem}\n\n{USAGE}");
    ExitCode::from(2)
}
