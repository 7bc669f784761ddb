//! `kanban gateway run` and `kanban dispatch`: the gateway library's daemon and one
//! dispatcher pass, on the home the CLI prepared.

use board_home::{Home, Loaded, Warning};
use serde_json::json;

use crate::args::GatewayCommand;
use crate::failure::{one_line, Failure};
use crate::output::print_json;

use super::Ctx;

/// The breaker and the ceilings in two lines, for a dry run.
fn print_cost_safety(safety: &serde_json::Value) {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_owned();
    let breaker = &safety["breaker"];
    let mut state = text(&breaker["state"]);
    if let Some(at) = breaker["probe_at"].as_i64() {
        state.push_str(&format!(", next probe at {at}"));
    }
    if breaker["in_doubt"].as_bool() == Some(true) {
        state.push_str(", provider in doubt");
    }
    println!("{:<14} {state}", "breaker");
    println!("{:<14} {}", "decomposition", text(&safety["decompositions"]));
}

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
        if let Some(safety) = &report.cost_safety {
            print_cost_safety(safety);
        }
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
