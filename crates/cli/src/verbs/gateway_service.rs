//! `kanban gateway install`, `uninstall`, `start`, `restart`, `stop` and `status`: the
//! gateway as a systemd unit when systemd runs this machine, and from `gateway.pid` and
//! `gateway.json` when it does not (`stop`, `status`). `start` and `restart` need a unit
//! and systemd: without them the gateway is run in the foreground (`gateway run`) under
//! whatever supervises it, never detached behind the operator's back.

use board_home::Home;
use gateway::service::{self, Scope, ServiceError, Unit};
use serde_json::{json, Value};

use crate::args::ScopeArgs;
use crate::failure::{one_line, Failure};
use crate::output::print_json;

use super::Ctx;

/// How long `gateway stop` waits for a gateway it signals itself: the gateway's own
/// shutdown is quick (it cancels model calls and leaves workers running), so this only
/// guards against a stuck one.
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

fn service_failure(e: ServiceError) -> Failure {
    Failure::Refused(one_line(&e.to_string()))
}

fn gateway_failure(e: gateway::daemon::GatewayError) -> Failure {
    Failure::Refused(one_line(&e.to_string()))
}

fn scope(args: &ScopeArgs) -> Option<Scope> {
    match (args.user, args.system) {
        (_, true) => Some(Scope::System),
        (true, _) => Some(Scope::User),
        _ => None,
    }
}

fn report(ctx: &Ctx, value: Value, line: &str) -> Result<(), Failure> {
    if ctx.json {
        print_json(&value);
    } else {
        println!("{line}");
    }
    Ok(())
}

fn unit_line(unit: &Unit) -> String {
    format!("{} ({} unit)", unit.name, unit.scope.as_str())
}

/// `gateway install`: writes the unit, reloads systemd and enables it.
pub fn install(ctx: &Ctx, home: &Home, args: &ScopeArgs, force: bool) -> Result<(), Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Refused(format!("cannot find the kanban binary's path: {e}")))?;
    let scope = scope(args).unwrap_or(Scope::User);
    let done = service::install(home.dir(), &exe, scope, force).map_err(service_failure)?;
    let path = done.unit.path.display();
    let mut line = if done.written {
        format!("wrote {} at {path}", unit_line(&done.unit))
    } else {
        format!("{} at {path} is already up to date", unit_line(&done.unit))
    };
    if done.systemctl {
        line.push_str("; systemd reloaded and the unit enabled: `kanban gateway start` starts it");
    } else {
        line.push_str("; no systemd on this machine, so nothing was reloaded or enabled");
    }
    report(ctx, json!(done), &line)
}

/// `gateway uninstall`: stops, disables and removes the unit.
pub fn uninstall(ctx: &Ctx, home: &Home, args: &ScopeArgs, force: bool) -> Result<(), Failure> {
    let unit = service::uninstall(home.dir(), scope(args), force).map_err(service_failure)?;
    let line = format!("removed {} from {}", unit_line(&unit), unit.path.display());
    report(ctx, json!({"removed": unit}), &line)
}

/// The installed unit `start`, `restart` and `stop` drive, when systemd runs here.
fn driven_unit(home: &Home) -> Result<Result<Unit, &'static str>, Failure> {
    if !service::systemd_present().map_err(service_failure)? {
        return Ok(Err(
            "no systemd on this machine: run `kanban gateway run` (in the foreground, or under your own supervisor)",
        ));
    }
    match service::installed(home.dir(), None).map_err(service_failure)? {
        Some(unit) => Ok(Ok(unit)),
        None => Ok(Err(
            "no unit is installed for this home: `kanban gateway install` writes one, or run `kanban gateway run`",
        )),
    }
}

/// `gateway start` and `restart` (`verb`): `systemctl [--user] VERB UNIT`.
pub fn start(ctx: &Ctx, home: &Home, verb: &'static str) -> Result<(), Failure> {
    let unit = driven_unit(home)?.map_err(|why| Failure::Refused(why.to_owned()))?;
    unit.systemctl(&[verb]).map_err(service_failure)?;
    let done = if verb == "start" { "started" } else { "restarted" };
    let line = format!("{done} {}", unit_line(&unit));
    report(ctx, json!({ done: unit }), &line)
}

/// `gateway stop`: the unit through systemctl when it is installed and systemd runs,
/// then any gateway still holding the home (one run by hand) by SIGTERM.
pub fn stop(ctx: &Ctx, home: &Home) -> Result<(), Failure> {
    let unit = driven_unit(home)?.ok();
    if let Some(unit) = &unit {
        unit.systemctl(&["stop"]).map_err(service_failure)?;
        if let Err(gateway::daemon::GatewayError::NotRunning { .. }) = gateway::control::running_pid(home) {
            let line = format!("stopped {}; its workers keep running", unit_line(unit));
            return report(ctx, json!({"stopped": unit}), &line);
        }
    }
    let pid = gateway::control::stop(home, STOP_LIMIT).map_err(gateway_failure)?;
    let line = format!("stopped the gateway (pid {pid}); its workers keep running");
    report(ctx, json!({"stopped": pid}), &line)
}

/// `gateway status`: the gateway from its files, and its unit when one is installed.
pub fn status(ctx: &Ctx, home: &Home) -> Result<(), Failure> {
    let s = gateway::control::status(home, board_home::now()).map_err(gateway_failure)?;
    let systemd = service::systemd_present().map_err(service_failure)?;
    // A file of the unit's name that we did not write is reported, not driven.
    let (unit, foreign) = match service::installed(home.dir(), None) {
        Ok(unit) => (unit, None),
        Err(ServiceError::Foreign { path }) => (None, Some(path)),
        Err(e) => return Err(service_failure(e)),
    };
    let states = match (&unit, systemd) {
        (Some(unit), true) => Some((
            unit.query("is-active").map_err(service_failure)?,
            unit.query("is-enabled").map_err(service_failure)?,
        )),
        _ => None,
    };
    // The lanes are the board's, seen by any gateway (or none) on it.
    let lanes = ctx.store.lane_stats()?;
    let waiting = super::profiles::unrunnable(ctx.store.as_ref(), &ctx.config)?;
    if ctx.json {
        let service = unit.as_ref().map(|unit| {
            let (active, enabled) = states.clone().unzip();
            json!({"unit": unit, "active": active, "enabled": enabled})
        });
        let mut value = json!(s);
        value["systemd"] = json!(systemd);
        value["service"] = json!(service);
        value["foreign_unit"] = json!(foreign);
        value["lanes"] = json!(lanes.iter().map(|l| l.to_json(ctx.now)).collect::<Vec<_>>());
        value["unrunnable"] = super::profiles::to_json(&waiting);
        print_json(&value);
        return Ok(());
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    println!("state          {}", s.state);
    println!("pid            {}", or_dash(s.pid.map(|p| p.to_string())));
    println!(
        "uptime         {}",
        or_dash(s.uptime_seconds.map(|u| format!("{u} s")))
    );
    println!(
        "last tick      {}",
        or_dash(s.last_tick_age_seconds.map(|a| format!("{a} s ago")))
    );
    println!("ticks          {}", or_dash(s.ticks.map(|n| n.to_string())));
    println!("workers        {}", or_dash(s.workers.map(|n| n.to_string())));
    println!("breaker        {}", or_dash(s.breaker));
    let service = match (&unit, states) {
        (Some(unit), Some((active, enabled))) => format!("{}: {active}, {enabled}", unit_line(unit)),
        (Some(unit), None) => format!("{} (no systemd on this machine)", unit_line(unit)),
        (None, _) => match &foreign {
            Some(path) => format!("{} was not written by `kanban gateway install`", path.display()),
            None => "no unit installed".to_owned(),
        },
    };
    println!("service        {service}");
    for line in super::profiles::lines(&waiting) {
        println!("waiting        {line}");
    }
    if !lanes.is_empty() {
        println!();
        super::lanes::print_lanes(ctx, &lanes);
    }
    Ok(())
}
