//! `kanban diagnostics` (Hermes' verb, alias `diag`): what is wrong with this board and
//! its config, each finding with its severity and the command that fixes it. Hermes
//! loads every task with its events and runs to find these; here each rule is one
//! bounded read (an aggregate, or an index range of at most [`SHOWN`] tasks).

use board_core::{Status, Task, TaskFilter, TaskId};
use board_home::{Home, Warning};
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::DiagnosticsArgs;
use crate::failure::Failure;
use crate::output::{plain, print_json};

use super::Ctx;

/// The tasks one rule reads at most; the line says when there are more.
const SHOWN: usize = 50;

/// How bad a finding is, in Hermes' words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
    Critical,
}

/// One finding: on a task, or (no task) on the board or its config.
#[derive(Debug, Serialize)]
struct Diagnostic {
    kind: &'static str,
    severity: Severity,
    title: String,
    /// The command (or edit) that fixes it.
    fix: String,
}

/// The findings about one task, or about the board (`task` none).
struct Finding {
    task: Option<Task>,
    diagnostic: Diagnostic,
}

pub fn diagnostics(ctx: &Ctx, home: &Home, warnings: &[Warning], a: DiagnosticsArgs) -> Result<(), Failure> {
    let mut found = Vec::new();
    match &a.task {
        Some(id) => task_rules(ctx, &ctx.store.get(id)?, &mut found),
        None => board_rules(ctx, home, warnings, &mut found)?,
    }
    found.retain(|f| a.severity.is_none_or(|least| f.diagnostic.severity >= least));
    found.sort_by_key(|f| std::cmp::Reverse(f.diagnostic.severity));
    if ctx.json {
        print_json(&Value::Array(found.iter().map(to_json).collect()));
    } else {
        print_findings(&found);
    }
    Ok(())
}

/// Every rule, over the board and its config.
fn board_rules(
    ctx: &Ctx,
    home: &Home,
    warnings: &[Warning],
    found: &mut Vec<Finding>,
) -> Result<(), Failure> {
    health(ctx, home, warnings, found)?;
    for task in ctx.store.expired_leases(ctx.now, SHOWN)? {
        let title = "its worker's lease ran out and no gateway reclaimed it".to_owned();
        let fix = "kanban gateway run (it reclaims expired leases), or kanban reclaim ID";
        found.push(on(task, "stale_lease", Severity::Warning, title, fix));
    }
    for status in [Status::Blocked, Status::Triage] {
        let filter = TaskFilter {
            status: Some(status),
            limit: Some(SHOWN),
            ..TaskFilter::default()
        };
        for task in ctx.store.list(&filter)? {
            task_rules(ctx, &task, found);
        }
    }
    Ok(())
}

/// The findings about the board as a whole: its config, the provider breaker, the
/// gateway, and the profiles it cannot run.
fn health(ctx: &Ctx, home: &Home, warnings: &[Warning], found: &mut Vec<Finding>) -> Result<(), Failure> {
    for warning in warnings {
        let fix = "edit config.yaml (kanban config path)";
        found.push(on_board("config", Severity::Warning, warning.to_string(), fix));
    }
    let breaker = ctx.store.breaker()?;
    if breaker.open {
        let why = if breaker.auth {
            "the provider refused the key"
        } else {
            "the provider failed"
        };
        let title = format!("automatic decomposition is paused: {why}");
        let fix = "check the model's key and endpoint (kanban config check)";
        found.push(on_board("breaker_open", Severity::Critical, title, fix));
    }
    let ready = ctx
        .store
        .tally()?
        .tasks
        .get(Status::Ready.as_str())
        .copied()
        .unwrap_or(0);
    let local_board = ctx.config.database_url.is_none();
    if local_board && ready > 0 && gateway::control::status(home, ctx.now).is_ok_and(|s| s.state != "running")
    {
        let title = format!("{ready} ready task(s) and no gateway running on this home");
        let fix = "kanban gateway run (or kanban gateway install)";
        found.push(on_board("gateway_down", Severity::Error, title, fix));
    }
    for waiting in super::profiles::unrunnable(ctx.store.as_ref(), &ctx.config)? {
        let title = format!(
            "profile {} has no command here: {} ready task(s) wait for it",
            plain(&waiting.profile, false),
            waiting.ready
        );
        let fix = super::profiles::fix(&waiting.profile);
        found.push(on_board("stranded_in_ready", Severity::Error, title, &fix));
    }
    Ok(())
}

fn on_board(kind: &'static str, severity: Severity, title: String, fix: &str) -> Finding {
    Finding {
        task: None,
        diagnostic: Diagnostic {
            kind,
            severity,
            title,
            fix: fix.to_owned(),
        },
    }
}

/// The rules about one task, from its row alone.
fn task_rules(ctx: &Ctx, task: &Task, found: &mut Vec<Finding>) {
    let limit = ctx.config.kanban.failure_limit;
    let kind_and_fix = match task.status {
        Status::Blocked if task.consecutive_failures >= task.failure_limit(limit) => Some((
            "repeated_failures",
            Severity::Error,
            format!(
                "gave up after {} failed runs in a row{}",
                task.consecutive_failures,
                task.last_failure_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(
                        ": {}",
                        plain(&crate::output::cut(e, 120), false)
                    ))
            ),
            "kanban log ID, then kanban reassign ID PROFILE or kanban unblock ID",
        )),
        Status::Blocked if ctx.now - task.updated_at > STUCK_SECONDS => Some((
            "stuck_in_blocked",
            Severity::Warning,
            format!("blocked for {}", crate::output::age(ctx.now, task.updated_at)),
            "kanban show ID (why), then kanban unblock ID or kanban archive ID",
        )),
        Status::Triage if task.block_recurrences >= board_core::BLOCK_RECURRENCE_LIMIT => Some((
            "block_unblock_cycling",
            Severity::Warning,
            format!(
                "blocked {} times with the same kind, sent to triage",
                task.block_recurrences
            ),
            "kanban edit ID --body TEXT (make it doable), then kanban decompose ID",
        )),
        Status::Triage if task.decompose_parked => Some((
            "decomposition_parked",
            Severity::Warning,
            format!(
                "automatic decomposition gave up after {} failures{}",
                task.decompose_failures,
                task.decompose_last_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(
                        ": {}",
                        plain(&crate::output::cut(e, 120), false)
                    ))
            ),
            "kanban decompose ID (or kanban edit ID, which clears the park)",
        )),
        _ => None,
    };
    if let Some((kind, severity, title, fix)) = kind_and_fix {
        found.push(on(task.clone(), kind, severity, title, fix));
    }
}

/// A blocked task untouched this long is stuck (Hermes' default: a day).
const STUCK_SECONDS: i64 = 24 * 3600;

fn on(task: Task, kind: &'static str, severity: Severity, title: String, fix: &str) -> Finding {
    let fix = fix.replace("ID", task.id.as_str());
    Finding {
        task: Some(task),
        ..on_board(kind, severity, title, &fix)
    }
}

fn to_json(f: &Finding) -> Value {
    let task = f.task.as_ref();
    json!({
        "task_id": task.map(|t| &t.id),
        "title": task.map(|t| &t.title),
        "status": task.map(|t| t.status),
        "assignee": task.and_then(|t| t.assignee.as_ref()),
        "diagnostics": [&f.diagnostic],
    })
}

/// Hermes' layout: a count, then each finding under its task (or the board), marked by
/// severity, with its fix.
fn print_findings(found: &[Finding]) {
    if found.is_empty() {
        println!("No active diagnostics on this board.");
        return;
    }
    let tasks: std::collections::BTreeSet<&TaskId> = found
        .iter()
        .filter_map(|f| f.task.as_ref().map(|t| &t.id))
        .collect();
    let and_board = match found.iter().any(|f| f.task.is_none()) {
        true => " and the board",
        false => "",
    };
    println!(
        "{} active diagnostic(s) across {} task(s){and_board}:\n",
        found.len(),
        tasks.len()
    );
    for f in found {
        match &f.task {
            Some(t) => println!(
                "  {}  {:8}  @{:18}  {}",
                t.id,
                t.status.as_str(),
                plain(t.assignee.as_deref().unwrap_or("(unassigned)"), false),
                plain(&crate::output::cut(&t.title, 60), false)
            ),
            None => println!("  board"),
        }
        let d = &f.diagnostic;
        let marker = match d.severity {
            Severity::Warning => "⚠",
            Severity::Error => "!!",
            Severity::Critical => "!!!",
        };
        println!(
            "    {marker} [{}] {}: {}",
            severity_word(d.severity),
            d.kind,
            plain(&d.title, false)
        );
        println!("       → {}", d.fix);
        println!();
    }
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Warning => "warning",
        Severity::Error => "error",
        Severity::Critical => "critical",
    }
}
