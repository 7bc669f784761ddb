//! `stats`: the board at a glance. Tasks by status and by assignee, the oldest ready
//! task, and what the model calls cost (requests by outcome, token sums).

use std::collections::BTreeMap;

use board_core::{LlmCall, Status, Task, TaskFilter};
use serde_json::{json, Map, Value};

use crate::failure::Failure;
use crate::output::{age, cell, print_json, status_label, width, Paint, Table};
use crate::verbs::Ctx;

/// Tasks per status, every status present (zero included) in the board's order.
struct Counts([usize; Status::ALL.len()]);

impl Counts {
    fn new() -> Counts {
        Counts([0; Status::ALL.len()])
    }

    fn add(&mut self, status: Status) {
        if let Some(i) = Status::ALL.iter().position(|s| *s == status) {
            self.0[i] += 1;
        }
    }

    fn total(&self) -> usize {
        self.0.iter().sum()
    }

    fn get(&self, status: Status) -> usize {
        Status::ALL
            .iter()
            .position(|s| *s == status)
            .map_or(0, |i| self.0[i])
    }

    fn json(&self) -> Value {
        let mut map = Map::new();
        for status in Status::ALL {
            map.insert(status.as_str().to_owned(), json!(self.get(*status)));
        }
        Value::Object(map)
    }
}

/// The model calls summed up.
struct Llm {
    requests: usize,
    by_outcome: BTreeMap<String, usize>,
    prompt_tokens: i64,
    completion_tokens: i64,
}

fn llm_totals(calls: &[LlmCall]) -> Llm {
    let mut llm = Llm {
        requests: calls.len(),
        by_outcome: BTreeMap::new(),
        prompt_tokens: 0,
        completion_tokens: 0,
    };
    for call in calls {
        *llm.by_outcome.entry(call.outcome.clone()).or_default() += 1;
        llm.prompt_tokens += call.prompt_tokens.unwrap_or(0);
        llm.completion_tokens += call.completion_tokens.unwrap_or(0);
    }
    llm
}

/// The `--json` document of `stats`.
fn stats_json(
    ctx: &Ctx,
    by_status: &Counts,
    assignees: &[(Option<String>, Counts)],
    oldest_ready: Option<&Task>,
    llm: &Llm,
) -> Value {
    json!({
        "tasks": {
            "total": by_status.total(),
            "by_status": by_status.json(),
            "by_assignee": assignees.iter().map(|(who, counts)| json!({
                "assignee": who,
                "total": counts.total(),
                "by_status": counts.json(),
            })).collect::<Vec<_>>(),
        },
        "oldest_ready": oldest_ready.map(|t| json!({
            "task_id": t.id,
            "created_at": t.created_at,
            "age_seconds": (ctx.now - t.created_at).max(0),
        })),
        "llm": {
            "requests": llm.requests,
            "by_outcome": llm.by_outcome,
            "prompt_tokens": llm.prompt_tokens,
            "completion_tokens": llm.completion_tokens,
        },
    })
}

/// The table of tasks per assignee and status, the unassigned last.
fn print_assignees(p: Paint, assignees: &[(Option<String>, Counts)]) {
    if assignees.is_empty() {
        println!("{}", p.dim("no tasks"));
    } else {
        let mut header = vec!["ASSIGNEE", "TOTAL"];
        header.extend(Status::ALL.iter().map(|s| s.as_str()));
        let header: Vec<String> = header.iter().map(|h| h.to_uppercase()).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = Table::new(&header);
        for (who, counts) in assignees {
            let mut row = vec![
                cell(who.as_deref().unwrap_or("-")),
                cell(counts.total().to_string()),
            ];
            row.extend(Status::ALL.iter().map(|s| cell(counts.get(*s).to_string())));
            table.row(row);
        }
        table.print(p, width());
    }
}

/// The model calls' outcomes and tokens.
fn print_llm(llm: &Llm) {
    let outcomes: Vec<String> = llm
        .by_outcome
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    let outcomes = if outcomes.is_empty() {
        String::new()
    } else {
        format!(" ({})", outcomes.join(", "))
    };
    println!("llm requests  {}{outcomes}", llm.requests);
    println!(
        "llm tokens    {} prompt, {} completion",
        llm.prompt_tokens, llm.completion_tokens
    );
}

pub fn stats(ctx: &Ctx) -> Result<(), Failure> {
    let tasks = ctx.store.list(&TaskFilter {
        include_archived: true,
        ..TaskFilter::default()
    })?;
    let calls = ctx.store.llm_calls(None)?;

    let mut by_status = Counts::new();
    // Named assignees in name order; the unassigned (`None`) sort first in a BTreeMap
    // and are moved last when printed.
    let mut by_assignee: BTreeMap<Option<String>, Counts> = BTreeMap::new();
    for t in &tasks {
        by_status.add(t.status);
        by_assignee
            .entry(t.assignee.clone())
            .or_insert_with(Counts::new)
            .add(t.status);
    }
    let mut assignees: Vec<(Option<String>, Counts)> = by_assignee.into_iter().collect();
    if assignees.first().is_some_and(|(who, _)| who.is_none()) {
        assignees.rotate_left(1);
    }
    let oldest_ready: Option<&Task> = tasks
        .iter()
        .filter(|t| t.status == Status::Ready)
        .min_by_key(|t| (t.created_at, t.id.clone()));
    let llm = llm_totals(&calls);

    if ctx.json {
        print_json(&stats_json(ctx, &by_status, &assignees, oldest_ready, &llm));
        return Ok(());
    }

    let p = ctx.paint;
    let mut table = Table::new(&["STATUS", "TASKS"]);
    for status in Status::ALL {
        let label = status_label(*status);
        table.row(vec![
            (p.status(*status), label.chars().count()),
            cell(by_status.get(*status).to_string()),
        ]);
    }
    table.row(vec![cell("total"), cell(by_status.total().to_string())]);
    table.print(p, width());

    println!();
    print_assignees(p, &assignees);

    println!();
    match oldest_ready {
        Some(t) => println!(
            "oldest ready  {} ago  {}  {}",
            age(ctx.now, t.created_at),
            t.id,
            crate::output::cut(&t.title, 60)
        ),
        None => println!("oldest ready  {}", p.dim("none")),
    }
    print_llm(&llm);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_hold_every_status_in_the_boards_order() {
        let mut counts = Counts::new();
        for status in [Status::Ready, Status::Done, Status::Ready] {
            counts.add(status);
        }
        assert_eq!(counts.total(), 3);
        assert_eq!(counts.get(Status::Ready), 2);
        assert_eq!(counts.get(Status::Triage), 0);
        let json = counts.json();
        let keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let order: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(keys, order);
        assert_eq!(json["ready"], 2);
        assert_eq!(json["done"], 1);
        assert_eq!(json["triage"], 0);
    }
}
