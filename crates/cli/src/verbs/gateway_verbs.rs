//! `kanban gateway run` and `kanban dispatch`: the gateway library's daemon and one
//! dispatcher pass, on the home the CLI prepared.

use serde_json::json;

use crate::args::GatewayCommand;
use crate::failure::{one_line, Failure};
use crate::home::Home;
use crate::output::print_json;

use super::Ctx;

fn gateway_failure(e: gateway::daemon::GatewayError) -> Failure {
    Failure::Refused(one_line(&e.to_string()))
}

/// Runs the gateway in this process until SIGINT or SIGTERM.
pub fn run(ctx: Ctx, home: &Home, command: GatewayCommand) -> Result<(), Failure> {
    let GatewayCommand::Run { replace } = command;
    // The daemon opens its own connection; this one is not needed.
    drop(ctx);
    gateway::daemon::init_logging();
    gateway::daemon::run(&home.dir, replace).map_err(gateway_failure)
}

/// One dispatcher pass; prints what it did (or, with `dry_run`, what it would do).
pub fn dispatch(ctx: &Ctx, home: &Home, dry_run: bool) -> Result<(), Failure> {
    let report = gateway::daemon::dispatch_once(&home.dir, dry_run).map_err(gateway_failure)?;
    if ctx.json {
        print_json(&json!(report));
    } else {
        let line = |what: &str, ids: &[board_core::TaskId]| {
            if !ids.is_empty() {
                let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
                println!("{what:<14} {}", ids.join(" "));
            }
        };
        line("reaped", &report.reaped);
        line("reclaimed", &report.reclaimed);
        line("extended", &report.extended);
        line("timed out", &report.timed_out);
        line("decomposed", &report.decompositions_started);
        line("promoted", &report.promoted);
        line("spawned", &report.spawned);
    }
    for error in &report.errors {
        eprintln!("kanban: {}", one_line(error));
    }
    if report.errors.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}
