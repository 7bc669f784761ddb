//! `swarm TEMPLATE --goal TEXT [--workers N]` and `create TITLE --template NAME`: a team
//! template of the home's `templates/` made into a card and its children, routed and
//! linked, in one transaction (docs/board.md#team-templates).

use board_core::plan::PlanSettings;
use board_core::shapes::task_json;
use board_core::{Committed, NewTask};
use board_home::Home;
use serde_json::json;

use crate::args::SwarmArgs;
use crate::failure::Failure;
use crate::output::{plain, print_json};
use crate::verbs::identity::caller;
use crate::verbs::Ctx;

/// What a swarm is made for, beyond its template.
pub struct Goal {
    pub text: String,
    pub workers: Option<usize>,
    pub tenant: Option<String>,
    pub priority: i64,
    pub created_by: Option<String>,
}

/// `kanban swarm TEMPLATE --goal TEXT ...`.
pub fn run(ctx: &Ctx, home: &Home, a: SwarmArgs) -> Result<(), Failure> {
    let goal = Goal {
        text: a.goal,
        workers: a.workers.map(usize::from),
        tenant: a.tenant,
        priority: a.priority,
        created_by: None,
    };
    swarm(ctx, home, &a.template, goal)
}

/// Makes template `name` for `goal` and prints the card and its children.
pub fn swarm(ctx: &Ctx, home: &Home, name: &str, goal: Goal) -> Result<(), Failure> {
    let template = board_home::config::template(home, name).map_err(Failure::Refused)?;
    let max_children = ctx.config.kanban.decompose_max_children;
    let made = template
        .instantiate(&goal.text, goal.workers, max_children)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let root = NewTask {
        tenant: goal.tenant,
        priority: goal.priority,
        created_by: Some(goal.created_by.unwrap_or_else(caller)),
        ..made.root
    };
    let settings = PlanSettings {
        max_children,
        orchestrator: made.root_assignee,
        auto_promote_children: true,
    };
    let committed = ctx.store.create_planned(&root, &made.plan, &settings, ctx.now)?;
    print_made(ctx, name, &committed, &made.steps)
}

fn print_made(ctx: &Ctx, name: &str, made: &Committed, steps: &[String]) -> Result<(), Failure> {
    let children = made
        .child_ids
        .iter()
        .map(|id| ctx.store.get(id))
        .collect::<Result<Vec<_>, _>>()?;
    if ctx.json {
        print_json(&json!({
            "template": name,
            "root": task_json(&made.root),
            "children": children.iter().zip(steps).map(|(t, step)| json!({
                "step": step,
                "task": task_json(t),
            })).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    let line = |t: &board_core::Task| {
        format!(
            "{}  ({}, assignee={})",
            t.id,
            t.status,
            plain(t.assignee.as_deref().unwrap_or("-"), false)
        )
    };
    println!("Created {} from template {name}", line(&made.root));
    let width = steps.iter().map(String::len).max().unwrap_or(0);
    for (task, step) in children.iter().zip(steps) {
        println!("  {:width$}  {}", plain(step, false), line(task));
    }
    Ok(())
}
