//! The verbs a person moves cards with past the board's own rules: `schedule` (parked,
//! waiting on time), `promote` (todo or blocked to ready, past open parents with
//! `--force`) and `reopen` (done or archived back into work). Each records who and why
//! in its event. A refusal is Hermes' line (`cannot promote ID: why`) after `kanban: `.

use board_core::transition::{decide, Fresh};
use board_core::{ByHand, Recurrence, Refusal, Request, Status, StoreError, TaskId};
use serde_json::{json, Value};

use crate::args::{PromoteArgs, ScheduleArgs};
use crate::failure::Failure;
use crate::output::{local_time, plain, print_json, task_json};
use crate::verbs::identity::caller;
use crate::verbs::{each_task, Ctx};

/// `kanban promote ID [REASON...] [--ids ID...] [--force] [--dry-run]`, as Hermes' verb:
/// one line per task (`Promoted ID -> ready`, or `Would promote ... (dry)`), a refusal
/// per task on stderr, exit 1 when any was refused; `--json` is one object for one task
/// and an array for several.
pub fn promote(ctx: &Ctx, a: PromoteArgs) -> Result<(), Failure> {
    let reason = a.targets.reason();
    let hand = ByHand {
        by: Some(caller()),
        reason: reason.clone(),
    };
    let mut ids = vec![a.targets.id];
    for id in a.targets.ids {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let request = Request::PromoteByHand(hand);
    let mut shown = Vec::new();
    let mut refused = false;
    for id in &ids {
        let outcome = promote_one(ctx, id, &request, a.force, a.dry_run);
        let error = outcome.err().map(|e| why_not(&e));
        refused |= error.is_some();
        if ctx.json {
            shown.push(json!({
                "task_id": id,
                "promoted": error.is_none(),
                "dry_run": a.dry_run,
                "forced": a.force,
                "reason": reason,
                "error": error,
            }));
        } else if let Some(error) = error {
            eprintln!("kanban: cannot promote {id}: {}", plain(&error, false));
        } else {
            let label = if a.dry_run { "Would promote" } else { "Promoted" };
            let tag = if a.dry_run { " (dry)" } else { "" };
            let suffix = reason
                .as_deref()
                .map_or_else(String::new, |r| format!(": {}", plain(r, false)));
            println!("{label} {id} -> ready{tag}{suffix}");
        }
    }
    if ctx.json {
        print_json(&match shown.len() {
            1 => shown.remove(0),
            _ => Value::Array(shown),
        });
    }
    match refused {
        true => Err(Failure::Reported),
        false => Ok(()),
    }
}

/// Promotes one task, or with `dry_run` decides whether it would be. With `force`, a
/// task that could be promoted but for its open parents stops waiting for them: its
/// links to them are removed (each an `unlinked` event), then it is promoted (a todo
/// task is promoted by the unlink of its last open parent).
fn promote_one(
    ctx: &Ctx,
    id: &TaskId,
    request: &Request,
    force: bool,
    dry_run: bool,
) -> Result<(), StoreError> {
    if !dry_run && !force {
        // The store decides, in its own transaction; nothing to check first.
        return ctx.store.transition(id, request, ctx.now).map(|_| ());
    }
    let mut facts = ctx.store.facts(id)?;
    let open = facts.open_parents;
    if force {
        facts.open_parents = 0;
    }
    decide(&facts, request, &Fresh::default(), ctx.now).map_err(StoreError::Refused)?;
    if dry_run {
        return Ok(());
    }
    if force && open > 0 {
        for parent in ctx.store.parents(id)? {
            if !parent.status.releases_children() {
                ctx.store.unlink(&parent.id, id, ctx.now)?;
            }
        }
        if ctx.store.get(id)?.status == Status::Ready {
            return Ok(());
        }
    }
    ctx.store.transition(id, request, ctx.now).map(|_| ())
}

/// A refusal of a promotion in Hermes' words where it has them.
fn why_not(error: &StoreError) -> String {
    match error {
        StoreError::Refused(Refusal::OpenParents { open, .. }) => {
            format!("{open} parent(s) not done or archived (use --force to override)")
        }
        other => other.to_string(),
    }
}

/// `kanban schedule ID [REASON...] [--ids ID...] [--run RUN] [--at TIME | --in DUR]`, as
/// Hermes' verb: each task parked in `scheduled` (until a time, which the gateway keeps),
/// `Scheduled ID[ until TIME][: REASON]` per task, a refusal per task on stderr, exit 1
/// when any was refused; `--json`: one task object per line.
pub fn schedule(ctx: &Ctx, a: ScheduleArgs) -> Result<(), Failure> {
    let reason = a.targets.reason();
    let every = a
        .every
        .as_deref()
        .map(|text| rule(text, a.tz.as_deref()))
        .transpose()?;
    let mut until = a.at.or(a.within.map(|secs| ctx.now.saturating_add(secs)));
    if let (None, Some(rule)) = (until, &every) {
        until = Some(gateway::recurrence::first(&rule.every, ctx.now).map_err(Failure::Usage)?);
    }
    let when = until.map_or_else(String::new, |at| format!(" until {}", local_time(at)));
    let repeats = every
        .as_ref()
        .map_or_else(String::new, |r| format!(", then {}", r.describe()));
    let mut ids = vec![(a.targets.id, a.run)];
    ids.extend(a.targets.ids.into_iter().map(|id| (id, None)));
    let mut refused = false;
    for (id, run) in ids {
        let request = Request::Schedule {
            reason: reason.clone(),
            expected_run_id: run,
            until,
            every: every.clone(),
        };
        match ctx.store.transition(&id, &request, ctx.now) {
            Ok(task) if ctx.json => crate::output::print_json_line(&task_json(&task)),
            Ok(_) => {
                let suffix = reason
                    .as_deref()
                    .map_or_else(String::new, |r| format!(": {}", plain(r, false)));
                println!("Scheduled {id}{when}{repeats}{suffix}");
            }
            Err(e) => {
                refused = true;
                eprintln!("kanban: cannot schedule {id}: {}", plain(&e.to_string(), false));
            }
        }
    }
    match refused {
        true => Err(Failure::Reported),
        false => Ok(()),
    }
}

/// The rule `--every` names, a cron expression read in `--tz` (else this machine's zone,
/// else UTC).
fn rule(text: &str, tz: Option<&str>) -> Result<Recurrence, Failure> {
    let system = jiff::tz::TimeZone::system();
    let zone = tz
        .map(str::to_owned)
        .or_else(|| system.iana_name().map(str::to_owned))
        .unwrap_or_else(|| "UTC".to_owned());
    let every = gateway::recurrence::every(text, &zone).map_err(Failure::Usage)?;
    Recurrence::new(every).map_err(|e| Failure::Usage(e.to_string()))
}

/// `kanban reopen ID... [--reason TEXT]`: done or archived tasks back to ready, or to
/// todo while a parent is open.
pub fn reopen(ctx: &Ctx, ids: Vec<TaskId>, reason: Option<String>) -> Result<(), Failure> {
    let request = Request::Reopen(ByHand {
        by: Some(caller()),
        reason,
    });
    each_task(
        ctx,
        ids,
        |id| ctx.store.transition(id, &request, ctx.now),
        |_, task| task_json(task),
        |_, task| format!("Reopened {} -> {}", task.id, task.status),
    )
}
