//! `kanban gateway run` and `kanban dispatch`: the gateway library's daemon and one
//! dispatcher pass, on the home the CLI prepared.

use board_home::{Home, Loaded, Warning};
use serde_json::json;

use crate::args::GatewayCommand;
use crate::failure::{one_line, Failure};
use crate::output::print_json;

use super::{gateway_service, Ctx};

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
    let replace = match command {
        // The log was started with the command line (main.rs).
        GatewayCommand::Run { replace, .. } => replace,
        GatewayCommand::Reload => {
            let pid = gateway::control::reload(home).map_err(gateway_failure)?;
            return report(
                &ctx,
                json!({"reloading": pid}),
                &format!("asked the gateway (pid {pid}) to reload config.yaml; its log says what changed"),
            );
        }
        GatewayCommand::Stop => return gateway_service::stop(&ctx, home),
        GatewayCommand::Status => return gateway_service::status(&ctx, home),
        GatewayCommand::Start => return gateway_service::start(&ctx, home, "start"),
        GatewayCommand::Restart => return gateway_service::start(&ctx, home, "restart"),
        GatewayCommand::Install { scope, force } => {
            return gateway_service::install(&ctx, home, &scope, force)
        }
        GatewayCommand::Uninstall { scope, force } => {
            return gateway_service::uninstall(&ctx, home, &scope, force)
        }
    };
    let loaded = Loaded {
        config: ctx.config,
        warnings,
    };
    gateway::daemon::run(home, ctx.store, loaded, replace).map_err(gateway_failure)
}

fn report(ctx: &Ctx, value: serde_json::Value, line: &str) -> Result<(), Failure> {
    if ctx.json {
        print_json(&value);
    } else {
        println!("{line}");
    }
    Ok(())
}

/// One dispatcher pass; prints what it did (or, with `dry_run`, what it would do). `max`
/// stands in for `kanban.max_spawn` in this pass.
/// `max` and `failure_limit` replace kanban.max_spawn and kanban.failure_limit for this pass.
pub fn dispatch(
    ctx: Ctx,
    home: &Home,
    dry_run: bool,
    (max, failure_limit): (Option<u16>, Option<u16>),
) -> Result<(), Failure> {
    let Ctx {
        store,
        mut config,
        json,
        ..
    } = ctx;
    if let Some(max) = max {
        config.kanban.max_spawn = usize::from(max);
    }
    if let Some(limit) = failure_limit {
        config.kanban.failure_limit = i64::from(limit);
    }
    let report = gateway::daemon::dispatch_once(home, store, &config, dry_run).map_err(gateway_failure)?;
    if json {
        print_json(&json!(report));
    } else {
        let line = |what: &str, ids: &[board_core::TaskId]| {
            if !ids.is_empty() {
                let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
                println!("{what:<16} {}", ids.join(" "));
            }
        };
        // A dry run changed nothing: it says what a pass would do, in those words.
        let said = |done: &'static str, would: &'static str| if dry_run { would } else { done };
        line(said("reaped", "would reap"), &report.reaped);
        line(said("reclaimed", "would reclaim"), &report.reclaimed);
        line(said("extended", "would extend"), &report.extended);
        line(said("timed out", "would time out"), &report.timed_out);
        line(said("disowned", "would disown"), &report.disowned);
        line(
            said("decomposed", "would decompose"),
            &report.decompositions_started,
        );
        line(said("resumed", "would resume"), &report.resumed);
        line(said("recurred", "would recur"), &report.recurred);
        line(said("promoted", "would promote"), &report.promoted);
        line(said("spawned", "would spawn"), &report.spawned);
        if dry_run {
            println!("(a dry run: nothing was changed)");
        }
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
