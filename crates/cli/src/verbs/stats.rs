//! `stats`: the board at a glance, every figure an aggregate of the store (no rows are
//! loaded to be counted). Tasks by status and by assignee, the oldest ready
//! task, and what the model calls cost, all time and over the last 24 hours (requests
//! by outcome, token sums, cost at the configured prices), with the provider breaker
//! and the spend ceilings.

use std::collections::BTreeMap;

use board_core::lanes::LaneStats;
use board_core::spend::window_start;
use board_core::{Breaker, Ceilings, Spend, Status, Task};
use serde_json::{json, Map, Value};

use crate::failure::Failure;
use crate::output::{age, cell, print_json, width, Paint, Table};
use crate::verbs::Ctx;

/// Tasks per status, every status present (zero included) in the board's order.
struct Counts([u64; Status::ALL.len()]);

impl Counts {
    fn new() -> Counts {
        Counts([0; Status::ALL.len()])
    }

    fn add(&mut self, status: Status, tasks: u64) {
        if let Some(i) = Status::ALL.iter().position(|s| *s == status) {
            self.0[i] += tasks;
        }
    }

    fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    fn get(&self, status: Status) -> u64 {
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

/// The spend of a window as JSON: requests, tokens, cost, failures by kind.
fn spend_json(spend: &Spend) -> Value {
    json!({
        "requests": spend.requests,
        "by_outcome": spend.by_outcome,
        "prompt_tokens": spend.prompt_tokens,
        "completion_tokens": spend.completion_tokens,
        "cost": spend.cost,
        "over_budget": spend.over_budget,
    })
}

/// One window's bill on one line: `2 (1 http_error, 1 ok)`.
fn requests_line(spend: &Spend) -> String {
    let outcomes: Vec<String> = spend
        .by_outcome
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    if outcomes.is_empty() {
        spend.requests.to_string()
    } else {
        format!("{} ({})", spend.requests, outcomes.join(", "))
    }
}

fn tokens_line(spend: &Spend) -> String {
    let mut line = format!(
        "{} prompt, {} completion",
        spend.prompt_tokens, spend.completion_tokens
    );
    if let Some(cost) = spend.cost {
        line.push_str(&format!(", cost {cost:.4}"));
    }
    if spend.over_budget > 0 {
        line.push_str(&format!(", {} past a ceiling", spend.over_budget));
    }
    line
}

/// The ceilings set, and which one is reached, on one line.
fn ceilings_line(ceilings: &Ceilings, day: &Spend) -> String {
    let mut set = Vec::new();
    if let Some(max) = ceilings.max_requests_per_day {
        set.push(format!("{} of {max} requests", day.requests));
    }
    if let Some(max) = ceilings.max_tokens_per_day {
        set.push(format!("{} of {max} tokens", day.tokens()));
    }
    if let Some(max) = ceilings.max_cost_per_day {
        set.push(format!("{:.4} of {max} cost", day.cost.unwrap_or(0.0)));
    }
    if set.is_empty() {
        return "none".to_owned();
    }
    let mut line = format!("{} in the last 24 h", set.join(", "));
    if ceilings.reached(day).is_some() {
        line.push_str(": reached, automatic decomposition stopped");
    }
    line
}

/// The `--json` document of `stats`.
fn stats_json(
    ctx: &Ctx,
    by_status: &Counts,
    assignees: &[(Option<String>, Counts)],
    oldest_ready: Option<&Task>,
    bill: &Bill,
    lanes: &[LaneStats],
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
            "all_time": spend_json(&bill.all_time),
            "last_24h": spend_json(&bill.day),
            "breaker": bill.breaker.json(),
            "ceilings": bill.ceilings.json(&bill.day),
        },
        "checks": {
            "verify_failed": bill.verdicts.get("verify_failed").copied().unwrap_or(0),
            "changes_requested": bill.verdicts.get("changes_requested").copied().unwrap_or(0),
        },
        "lanes": lanes.iter().map(|l| l.to_json(ctx.now)).collect::<Vec<_>>(),
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
        let mut table = Table::new(&header, p);
        for (who, counts) in assignees {
            let mut row = vec![
                cell(who.as_deref().unwrap_or("-")),
                cell(counts.total().to_string()),
            ];
            row.extend(Status::ALL.iter().map(|s| cell(counts.get(*s).to_string())));
            table.row(row);
        }
        table.print(width());
    }
}

/// The model bill: all time and the last 24 hours, the breaker and the ceilings; and
/// the checks' verdicts against the work.
struct Bill {
    all_time: Spend,
    day: Spend,
    breaker: Breaker,
    ceilings: Ceilings,
    verdicts: BTreeMap<String, u64>,
}

/// The bill's lines.
fn print_llm(bill: &Bill, now: i64) {
    let Bill {
        all_time,
        day,
        breaker,
        ceilings,
        verdicts,
    } = bill;
    println!("llm requests  {}", requests_line(all_time));
    println!("llm tokens    {}", tokens_line(all_time));
    println!("last 24 h     {}; {}", requests_line(day), tokens_line(day));
    let mut state = breaker.state().to_owned();
    if let (true, Some(at)) = (breaker.open, breaker.probe_at) {
        state.push_str(&format!(", next probe in {}", age(at, now)));
    }
    if let (true, Some(error)) = (breaker.open, &breaker.last_error) {
        state.push_str(&format!(": {}", crate::output::cut(error, 80)));
    }
    println!("breaker       {state}");
    println!("ceilings      {}", ceilings_line(ceilings, day));
    let count = |outcome: &str| verdicts.get(outcome).copied().unwrap_or(0);
    println!(
        "checks        {} failed verifications, {} rounds of changes requested",
        count("verify_failed"),
        count("changes_requested")
    );
}

pub fn stats(ctx: &Ctx) -> Result<(), Failure> {
    let counts = ctx.store.status_counts()?;
    let bill = Bill {
        all_time: ctx.store.spend(i64::MIN)?,
        day: ctx.store.spend(window_start(ctx.now))?,
        breaker: ctx.store.breaker()?,
        ceilings: ctx.config.spend_ceilings(),
        verdicts: ctx.store.verdicts()?,
    };

    let mut by_status = Counts::new();
    // Named assignees in name order; the unassigned (`None`) sort first in a BTreeMap
    // and are moved last when printed.
    let mut by_assignee: BTreeMap<Option<String>, Counts> = BTreeMap::new();
    for c in counts {
        by_status.add(c.status, c.tasks);
        by_assignee
            .entry(c.assignee)
            .or_insert_with(Counts::new)
            .add(c.status, c.tasks);
    }
    let mut assignees: Vec<(Option<String>, Counts)> = by_assignee.into_iter().collect();
    if assignees.first().is_some_and(|(who, _)| who.is_none()) {
        assignees.rotate_left(1);
    }
    let oldest_ready = ctx.store.oldest(Status::Ready)?;
    let oldest_ready = oldest_ready.as_ref();
    let lanes = ctx.store.lane_stats()?;

    if ctx.json {
        print_json(&stats_json(
            ctx,
            &by_status,
            &assignees,
            oldest_ready,
            &bill,
            &lanes,
        ));
        return Ok(());
    }

    let p = ctx.paint;
    let mut table = Table::new(&["STATUS", "TASKS"], p);
    for status in Status::ALL {
        table.row(vec![
            p.status_cell(*status),
            cell(by_status.get(*status).to_string()),
        ]);
    }
    table.row(vec![cell("total"), cell(by_status.total().to_string())]);
    table.print(width());

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
    print_llm(&bill, ctx.now);
    if !lanes.is_empty() {
        println!();
        super::lanes::print_lanes(ctx, &lanes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_hold_every_status_in_the_boards_order() {
        let mut counts = Counts::new();
        for status in [Status::Ready, Status::Done, Status::Ready] {
            counts.add(status, 1);
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
