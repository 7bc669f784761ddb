//! Verbs that make or change a card: `create`, `edit`, `assign`, `reassign`, `archive`.

use std::io::Read;
use std::path::Path;

use board_core::{clean_title, Creation, NewTask, ReclaimOutcome, RunId, Status, Task, TaskId};
use board_home::config::text_within_cap;
use gateway::supervisor::ProcessGroupTerminator;
use serde_json::{json, Value};

use crate::args::{CreateArgs, EditArgs, ReassignArgs};
use crate::failure::Failure;
use crate::output::{plain, print_json, task_json};
use crate::verbs::{caller, each_task, profile_choice, within_cap, Ctx};

pub fn create(ctx: &Ctx, a: CreateArgs) -> Result<(), Failure> {
    let creation = create_task(ctx, a)?;
    if ctx.json {
        print_json(&creation_json(&creation));
    } else {
        // Hermes' line: `Created ID  (STATUS, assignee=P)`.
        let task = creation.task();
        let said = match creation {
            Creation::Created(_) => "Created",
            Creation::Exists(_) => "Exists",
        };
        println!(
            "{said} {}  ({}, assignee={})",
            task.id,
            task.status,
            plain(task.assignee.as_deref().unwrap_or("-"), false)
        );
    }
    Ok(())
}

/// `create TITLE --template NAME`: the title is the goal of a swarm of the template.
pub fn create_from_template(ctx: &Ctx, home: &board_home::Home, a: CreateArgs) -> Result<(), Failure> {
    hermes_only(&a)?;
    let name = a.template.clone().unwrap_or_default();
    let goal = super::swarm::Goal {
        text: a.title,
        workers: a.workers.map(usize::from),
        tenant: a.tenant,
        priority: a.priority,
        created_by: a.created_by,
    };
    super::swarm::swarm(ctx, home, &name, goal)
}

/// The `create --json` document: the task, and whether it was `created` or `exists`.
pub fn creation_json(creation: &Creation) -> Value {
    let mut task = task_json(creation.task());
    if let Value::Object(map) = &mut task {
        map.insert("outcome".to_owned(), Value::from(creation.as_str()));
    }
    task
}

/// Creates the task `kanban create` would, or finds the one its idempotency key names.
pub fn create_task(ctx: &Ctx, a: CreateArgs) -> Result<Creation, Failure> {
    hermes_only(&a)?;
    let body = match (a.body, a.body_file) {
        (Some(body), _) => body,
        (None, Some(path)) => read_body(&path, ctx.config.kanban.max_text_bytes)?,
        (None, None) => String::new(),
    };
    within_cap(ctx, "the body", &body)?;
    let assignee = a.assignee.as_deref().map(profile_choice).transpose()?;
    let request = NewTask {
        title: clean_title(&a.title),
        body,
        assignee: assignee.clone().flatten(),
        priority: a.priority,
        created_by: Some(a.created_by.unwrap_or_else(caller)),
        triage: a.triage,
        parents: a.parents,
        idempotency_key: a.idempotency_key,
        max_runtime_seconds: a.max_runtime,
        reviewer: a.reviewer,
        verify: if a.no_verify {
            Some(Vec::new())
        } else {
            (!a.verify.is_empty()).then_some(a.verify)
        },
        blocked: a.initial_status.as_deref() == Some("blocked"),
        tenant: a.tenant,
        skills: a.skills,
        max_retries: a.max_retries,
    };
    // `--assignee none` means nobody, even where a default assignee is set.
    let request = match assignee {
        Some(_) => request,
        None => request.or_assignee(&ctx.config.kanban.default_assignee),
    };
    Ok(ctx.store.create_or_find(&request, ctx.now)?)
}

/// Refuses the Hermes flags of `create` whose meaning this board does not have, saying
/// what it does instead (before anything is read or written).
fn hermes_only(a: &CreateArgs) -> Result<(), Failure> {
    let refused = |why: &str| Err(Failure::Usage(why.to_owned()));
    match a.workspace.as_deref() {
        None | Some("scratch") => {}
        Some(_) => return refused(
            "--workspace: only scratch here (every worker runs in the home's workspaces/ID); a worktree or dir: workspace is the worker command's to make",
        ),
    }
    if a.branch.is_some() {
        return refused(
            "--branch: there are no worktree workspaces here; the worker command makes its own branch",
        );
    }
    if a.goal {
        return refused(
            "--goal: a goal loop is the worker command's own here; give the profile a command that loops",
        );
    }
    Ok(())
}

/// Reads a body from a file, or from stdin for `-`; it must be UTF-8 text. No more than
/// one byte past `cap` is read, so a huge file is refused without being held.
fn read_body(path: &Path, cap: usize) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    let limit = cap as u64 + 1;
    let read = if path == Path::new("-") {
        std::io::stdin().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| Failure::Usage(format!("--body-file {}: {e}", path.display())))?;
    text_within_cap(&format!("--body-file {}", path.display()), bytes.len(), cap)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    String::from_utf8(bytes)
        .map_err(|_| Failure::Usage(format!("--body-file {}: not UTF-8 text", path.display())))
}

pub fn edit(ctx: &Ctx, a: EditArgs) -> Result<(), Failure> {
    if let Some(result) = a.result {
        return backfill(ctx, &a.id, result, a.summary, a.metadata);
    }
    if a.title.is_none() && a.body.is_none() && a.priority.is_none() {
        return Err(Failure::Usage(
            "edit needs at least one of --title, --body, --priority (or --result on a done task)".to_owned(),
        ));
    }
    if let Some(body) = &a.body {
        within_cap(ctx, "the body", body)?;
    }
    let title = a.title.as_deref().map(clean_title);
    let task = ctx.store.edit(&a.id, title, a.body, a.priority, ctx.now)?;
    if ctx.json {
        print_json(&task_json(&task));
    } else {
        println!("Edited {}", task.id);
    }
    Ok(())
}

/// `edit --result [--summary] [--metadata]` on a done task (Hermes' recovery edit).
fn backfill(
    ctx: &Ctx,
    id: &TaskId,
    result: String,
    summary: Option<String>,
    metadata: Option<serde_json::Value>,
) -> Result<(), Failure> {
    within_cap(ctx, "the result", &result)?;
    if let Some(summary) = &summary {
        within_cap(ctx, "the summary", summary)?;
    }
    let request = board_core::Request::Backfill(board_core::transition::Backfill {
        result,
        summary,
        metadata,
    });
    let task = ctx.store.transition(id, &request, ctx.now)?;
    if ctx.json {
        print_json(&task_json(&task));
    } else {
        println!("Edited {}", task.id);
    }
    Ok(())
}

pub fn assign(ctx: &Ctx, id: TaskId, profile: String) -> Result<(), Failure> {
    let task = ctx.store.assign(&id, profile_choice(&profile)?, ctx.now)?;
    print_assigned(ctx, &task, "Assigned", None);
    Ok(())
}

/// `assign`, with `--reclaim` stopping a running task's worker first. A worker that
/// survives keeps its claim, and the task is not reassigned.
pub fn reassign(ctx: &Ctx, a: ReassignArgs) -> Result<(), Failure> {
    let assignee = profile_choice(&a.profile)?;
    let mut reclaimed = None;
    if a.reclaim {
        let task = ctx.store.get(&a.id)?;
        if let (Status::Running, Some(run)) = (task.status, task.current_run_id()) {
            let reason = a.reason.unwrap_or_else(|| format!("reassigned to {}", a.profile));
            let outcome =
                ctx.store
                    .reclaim(&a.id, Some(run), Some(reason), &ProcessGroupTerminator, ctx.now)?;
            if outcome != ReclaimOutcome::Reclaimed {
                return Err(Failure::Refused(format!(
                    "the worker of {} could not be stopped (run {run}); it is not reassigned",
                    a.id
                )));
            }
            reclaimed = Some(run);
        }
    }
    let task = ctx.store.assign(&a.id, assignee, ctx.now)?;
    print_assigned(ctx, &task, "Reassigned", reclaimed);
    Ok(())
}

fn print_assigned(ctx: &Ctx, task: &Task, verb: &str, reclaimed: Option<RunId>) {
    if ctx.json {
        print_json(&task_json(task));
        return;
    }
    let reclaimed = match reclaimed {
        Some(_) => " (claim reclaimed)",
        None => "",
    };
    println!(
        "{verb} {} to {}{reclaimed}",
        task.id,
        plain(task.assignee.as_deref().unwrap_or("(unassigned)"), false)
    );
}

/// Archives each task in turn; a refusal of one does not stop the others.
pub fn archive(ctx: &Ctx, ids: Vec<TaskId>) -> Result<(), Failure> {
    each_task(
        ctx,
        ids,
        |id| ctx.store.archive(id, ctx.now),
        |_, task| task_json(task),
        |_, task| format!("Archived {}", task.id),
    )
}

/// `archive --rm`: deletes each archived task in turn, with all of its rows; a refusal
/// of one does not stop the others.
pub fn delete_archived(ctx: &Ctx, ids: Vec<TaskId>) -> Result<(), Failure> {
    each_task(
        ctx,
        ids,
        |id| ctx.store.remove_archived(id),
        |id, freed| json!({ "id": id, "deleted": true, "freed": freed }),
        |id, _| format!("Deleted {id}"),
    )
}
