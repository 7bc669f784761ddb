//! `kanban gateway run` and `kanban dispatch`: the gateway library's daemon and one
//! dispatcher pass, on the home the CLI prepared.

use std::sync::Arc;

use board_home::{Home, Loaded, Warning};
use serde_json::json;

use gateway::logging::LogOptions;

use crate::args::{GatewayCommand, LogArgs};
use crate::failure::{one_line, Failure};
use crate::output::print_json;

use super::Ctx;

fn gateway_failure(e: gateway::daemon::GatewayError) -> Failure {
    Failure::Refused(one_line(&e.to_string()))
}

/// Runs the gateway in this process until SIGINT or SIGTERM, on the board and config
/// the verb opened and loaded.
pub fn run(ctx: Ctx, home: &Home, warnings: Vec<Warning>, command: GatewayCommand) -> Result<(), Failure> {
    let GatewayCommand::Run { replace, log } = command;
    gateway::logging::init(log_options(&log)?).map_err(|e| Failure::Usage(e.to_string()))?;
    let loaded = Loaded {
        config: ctx.config,
        warnings,
    };
    gateway::daemon::run(home, Arc::new(ctx.store), loaded, replace).map_err(gateway_failure)
}

fn log_options(log: &LogArgs) -> Result<LogOptions, Failure> {
    let format = log
        .log_format
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: gateway::logging::LogError| Failure::Usage(e.to_string()))?;
    let verbosity = i8::try_from(i16::from(log.verbose) - i16::from(log.quiet)).unwrap_or(0);
    Ok(LogOptions { format, verbosity })
}

/// One dispatcher pass; prints what it did (or, with `dry_run`, what it would do).
pub fn dispatch(ctx: Ctx, home: &Home, dry_run: bool) -> Result<(), Failure> {
    let Ctx {
        store, config, json, ..
    } = ctx;
    let report =
        gateway::daemon::dispatch_once(home, Arc::new(store), &config, dry_run).map_err(gateway_failure)?;
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
