//! Verbs that make or change a card: `create`, `edit`, `assign`, `archive`.

use std::io::Read;
use std::path::Path;

use board_core::{clean_title, NewTask, Task, TaskId};
use board_home::config::text_within_cap;
use serde_json::Value;

use crate::args::{CreateArgs, EditArgs};
use crate::failure::Failure;
use crate::output::{plain, print_json, status_label, task_json};
use crate::verbs::{within_cap, Ctx};

pub fn create(ctx: &Ctx, a: CreateArgs) -> Result<(), Failure> {
    let task = create_task(ctx, a)?;
    if ctx.json {
        print_json(&task_json(&task));
    } else {
        println!("created {}  {}", task.id, ctx.paint.status(task.status));
    }
    Ok(())
}

/// Creates the task `kanban create` would.
pub fn create_task(ctx: &Ctx, a: CreateArgs) -> Result<Task, Failure> {
    let body = match (a.body, a.body_file) {
        (Some(body), _) => body,
        (None, Some(path)) => read_body(&path, ctx.config.kanban.max_text_bytes)?,
        (None, None) => String::new(),
    };
    within_cap(ctx, "the body", &body)?;
    let request = NewTask {
        title: clean_title(&a.title),
        body,
        assignee: a.assignee,
        priority: a.priority,
        created_by: None,
        triage: a.triage,
        parents: a.parents,
        idempotency_key: a.idempotency_key,
        max_runtime_seconds: a.max_runtime,
    }
    .or_assignee(&ctx.config.kanban.default_assignee);
    Ok(ctx.store.create(&request, ctx.now)?)
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
    text_within_cap(&format!("--body-file {}", path.display()), bytes.len(), cap).map_err(Failure::Usage)?;
    String::from_utf8(bytes)
        .map_err(|_| Failure::Usage(format!("--body-file {}: not UTF-8 text", path.display())))
}

pub fn edit(ctx: &Ctx, a: EditArgs) -> Result<(), Failure> {
    if a.title.is_none() && a.body.is_none() && a.priority.is_none() {
        return Err(Failure::Usage(
            "edit needs at least one of --title, --body, --priority".to_owned(),
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
        println!("edited {} (revision {})", task.id, task.revision);
    }
    Ok(())
}

pub fn assign(ctx: &Ctx, id: TaskId, profile: String) -> Result<(), Failure> {
    let assignee = match profile.as_str() {
        "none" => None,
        "" => {
            return Err(Failure::Usage(
                "a profile name cannot be empty (use `none` to clear)".to_owned(),
            ))
        }
        _ => Some(profile),
    };
    let task = ctx.store.assign(&id, assignee, ctx.now)?;
    if ctx.json {
        print_json(&task_json(&task));
    } else {
        println!(
            "assigned {} to {}",
            task.id,
            plain(task.assignee.as_deref().unwrap_or("nobody"), false)
        );
    }
    Ok(())
}

/// Archives each task in turn; a refusal of one does not stop the others.
pub fn archive(ctx: &Ctx, ids: Vec<TaskId>) -> Result<(), Failure> {
    let mut archived: Vec<Value> = Vec::new();
    let mut refused = Vec::new();
    for id in ids {
        match ctx.store.archive(&id, ctx.now) {
            Ok(task) if ctx.json => archived.push(task_json(&task)),
            Ok(task) => println!("archived {}  {}", task.id, status_label(task.status)),
            Err(e) => refused.push(Failure::from(e)),
        }
    }
    if ctx.json {
        print_json(&Value::Array(archived));
    }
    crate::verbs::settle(refused)
}
