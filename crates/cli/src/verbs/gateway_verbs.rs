//! `kanban gateway run` and `kanban dispatch`: the gateway library's daemon and one
//! dispatcher pass, on the home the CLI prepared.

use board_home::{Home, Loaded, Warning};
use serde_json::json;

use crate::args::GatewayCommand;
use crate::failure::{one_line, Failure};
use crate::output::print_json;

use super::Ctx;

fn gateway_failure(e: gateway::daemon::GatewayError) -> Failure {
    Failure::Refused(one_line(&e.to_string()))
}

/// Runs the gateway in this process until SIGINT or SIGTERM, on the board and config
/// the verb opened and loaded.
pub fn run(ctx: Ctx, home: &Home, warnings: Vec<Warning>, command: GatewayCommand) -> Result<(), Failure> {
    let GatewayCommand::Run { replace } = command;
    gateway::daemon::init_logging();
    let loaded = Loaded {
        config: ctx.config,
        warnings,
    };
    gateway::daemon::run(home, ctx.store, loaded, replace).map_err(gateway_failure)
}

/// One dispatcher pass; prints what it did (or, with `dry_run`, what it would do).
pub fn dispatch(ctx: Ctx, home: &Home, dry_run: bool) -> Result<(), Failure> {
    let Ctx {
        store, config, json, ..
    } = ctx;
    let report = gateway::daemon::dispatch_once(home, store, &config, dry_run).map_err(gateway_failure)?;
    if json {
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
