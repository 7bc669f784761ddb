//! `kanban-gateway`: the gateway as its own binary, the same code as `kanban gateway run`.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: kanban-gateway [--home DIR] [--replace]

Runs the board's gateway until SIGINT or SIGTERM: a dispatcher tick every
kanban.dispatch_interval_seconds that decomposes triage cards, promotes, claims and
spawns workers, and reclaims the work of workers that are gone.

  --home DIR   the board's home (else $KANBAN_HOME, else ~/.kanban)
  --replace    stop the gateway already running on this home first";

fn main() -> ExitCode {
    let mut home: Option<PathBuf> = None;
    let mut replace = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--replace") => replace = true,
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
    let Some(home) = gateway::daemon::resolve_home(home) else {
        return usage("no home: pass --home DIR or set KANBAN_HOME");
    };
    gateway::daemon::init_logging();
    let mut dirs = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(dirs.recursive(true), 0o700);
    if let Err(e) = dirs.create(&home) {
        eprintln!("kanban-gateway: {}: cannot create the home: {e}", home.display());
        return ExitCode::FAILURE;
    }
    match gateway::daemon::run(&home, replace) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kanban-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("kanban-gateway: {problem}\n\n{USAGE}");
    ExitCode::from(2)
}
