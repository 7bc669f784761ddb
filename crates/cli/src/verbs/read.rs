//! Verbs that read one task: `show`, `runs` (and the gathered list of the MCP tool).

use board_core::shapes::{Shown, SHOW_EVENTS};
use board_core::{Comment, Run, RunKind, Task, TaskId, Timestamp};
use serde_json::Value;

use crate::args::ListArgs;
use crate::failure::Failure;
use crate::output::{age, event_line, plain, print_json, run_json, run_table};
use crate::verbs::Ctx;

/// The tasks `list` shows, gathered: for the MCP tool, which answers with one document.
pub fn listed(ctx: &Ctx, a: ListArgs) -> Result<Vec<Task>, Failure> {
    Ok(ctx.store.list(&super::listing::task_filter(a))?)
}

pub fn show(ctx: &Ctx, id: &TaskId) -> Result<(), Failure> {
    let shown = Shown::read(ctx.store.as_ref(), id)?;
    if ctx.json {
        print_json(&shown.to_json());
        return Ok(());
    }
    let latest_summary = shown.latest_summary().map(str::to_owned);
    let Shown {
        task,
        parents,
        children,
        runs,
        comments,
        attachments,
        events,
        skipped,
        block_reason,
    } = shown;

    let p = ctx.paint;
    let now = ctx.now;
    println!(
        "{}  {}  {}",
        p.bold(task.id.as_str()),
        p.status(task.status),
        p.bold(&plain(&task.title, false))
    );
    let limit = ctx.config.kanban.failure_limit;
    println!("  {}", facts(&task, now, limit).join(" · "));
    if let Some(reason) = &block_reason {
        section(ctx, "Blocked because");
        indented(reason);
    }
    if !task.body.is_empty() {
        section(ctx, "Body");
        indented(&task.body);
    }
    if let Some(result) = &task.result {
        section(ctx, "Result");
        indented(result);
    } else if let Some(summary) = &latest_summary {
        section(ctx, "Latest summary");
        indented(summary);
    }
    if let Some(error) = &task.last_failure_error {
        section(ctx, "Last failure");
        indented(error);
    }
    section(ctx, "Parents");
    task_lines(ctx, &parents);
    section(ctx, "Children");
    task_lines(ctx, &children);
    section(ctx, "Runs");
    run_lines(ctx, &runs);
    section(ctx, "Comments");
    comment_lines(ctx, &comments);
    if !attachments.is_empty() {
        section(ctx, "Attachments");
        for f in &attachments {
            println!("  {}", super::attachments::line(f));
        }
    }
    if skipped > 0 {
        section(
            ctx,
            &format!("Events (last {SHOW_EVENTS} of {})", skipped + events.len()),
        );
    } else {
        section(ctx, "Events");
    }
    for e in &events {
        println!("  {}", event_line(e, now, false, ctx.paint));
    }
    Ok(())
}

/// The one-line facts under a task's title; `limit` is `kanban.failure_limit`.
fn facts(task: &Task, now: Timestamp, limit: i64) -> Vec<String> {
    let mut facts = vec![
        format!("priority {}", task.priority),
        format!(
            "assignee {}",
            plain(task.assignee.as_deref().unwrap_or("-"), false)
        ),
        format!("created {} ago", age(now, task.created_at)),
        format!("updated {} ago", age(now, task.updated_at)),
        format!("revision {}", task.revision),
    ];
    if let Some(run) = task.current_run_id() {
        facts.push(format!("run {run}"));
    }
    if let Some(kind) = task.block_kind {
        facts.push(format!("block kind {kind} (x{})", task.block_recurrences));
    }
    if let Some(at) = task.scheduled_until {
        facts.push(format!("scheduled until {}", crate::output::local_time(at)));
    }
    if let Some(rule) = &task.recurrence {
        let last = rule
            .last_copy
            .as_ref()
            .map_or_else(String::new, |c| format!(", the last {c}"));
        facts.push(format!(
            "repeats: {}, {} copies made{last}",
            plain(&rule.describe(), false),
            rule.copies
        ));
    }
    if let Some(template) = board_core::recurrence::template_of(task.idempotency_key.as_deref()) {
        facts.push(format!("a copy of the recurring task {template}"));
    }
    if let Some(tenant) = &task.tenant {
        facts.push(format!("tenant {}", plain(tenant, false)));
    }
    if !task.skills.is_empty() {
        facts.push(format!("skills {}", task.skills.join(", ")));
    }
    if task.consecutive_failures > 0 {
        facts.push(format!("failures {}", task.consecutive_failures));
    }
    match task.max_retries {
        Some(n) => facts.push(format!("max retries {n} (its own)")),
        None => facts.push(format!("max retries {limit} (kanban.failure_limit)")),
    }
    if let Some(max) = task.max_runtime_seconds {
        facts.push(format!("max runtime {max}s"));
    }
    if let Some(key) = &task.idempotency_key {
        facts.push(format!("idempotency key {}", plain(key, false)));
    }
    if task.decompose_parked {
        facts.push("decomposition parked".to_owned());
    }
    if let Some(reviewer) = &task.reviewer {
        facts.push(format!("reviewer {}", plain(reviewer, false)));
    }
    if let Some(steps) = &task.verify {
        facts.push(format!("own verifiers {}", steps.len()));
    }
    if task.verify_failures > 0 {
        facts.push(format!("failed verifications {}", task.verify_failures));
    }
    if task.review_rounds > 0 {
        facts.push(format!("changes requested {}", task.review_rounds));
    }
    facts
}

/// The runs of `show`, newest last, with what each one ended with.
fn run_lines(ctx: &Ctx, runs: &[Run]) {
    let (p, now) = (ctx.paint, ctx.now);
    if runs.is_empty() {
        println!("  {}", p.dim("none"));
    }
    for r in runs {
        let outcome = r.outcome.map_or("running", |o| o.as_str());
        let kind = match r.kind {
            RunKind::Work => String::new(),
            other => format!("{other} "),
        };
        let mut line = format!(
            "  #{} {kind}{outcome}  started {} ago",
            r.id,
            age(now, r.started_at)
        );
        if let Some(ended) = r.ended_at {
            line.push_str(&format!(", took {}", age(ended, r.started_at)));
        }
        if let Some(note) = r.summary.as_deref().or(r.error.as_deref()) {
            line.push_str(&format!("  {}", crate::output::cut(note, 80)));
        }
        println!("{line}");
        if let Some(evidence) = &r.evidence {
            println!(
                "     evidence: {}",
                crate::output::cut(&evidence.to_string(), 100)
            );
        }
    }
}

/// The comments of `show`, oldest first.
fn comment_lines(ctx: &Ctx, comments: &[Comment]) {
    let (p, now) = (ctx.paint, ctx.now);
    if comments.is_empty() {
        println!("  {}", p.dim("none"));
    }
    for c in comments {
        let author = plain(c.author.as_deref().unwrap_or("anonymous"), false);
        println!(
            "  {} ago  {author}: {}",
            age(now, c.created_at),
            plain(&c.body, true)
        );
    }
}

/// Multi-line text from the board, each line indented, control characters blanked.
fn indented(text: &str) {
    for line in plain(text, true).lines() {
        println!("  {line}");
    }
}

fn section(ctx: &Ctx, title: &str) {
    println!();
    println!("{}", ctx.paint.bold(title));
}

fn task_lines(ctx: &Ctx, tasks: &[Task]) {
    if tasks.is_empty() {
        println!("  {}", ctx.paint.dim("none"));
    }
    for t in tasks {
        println!(
            "  {}  {}  {}",
            t.id,
            ctx.paint.status(t.status),
            crate::output::cut(&t.title, 70)
        );
    }
}

pub fn runs(ctx: &Ctx, id: &TaskId) -> Result<(), Failure> {
    // `runs` of an unknown task is a refusal, not an empty list.
    ctx.store.get(id)?;
    let runs = ctx.store.runs(id)?;
    if ctx.json {
        print_json(&Value::Array(runs.iter().map(run_json).collect()));
    } else {
        run_table(&runs, ctx.now, ctx.paint);
    }
    Ok(())
}

/// `kanban log ID [--tail BYTES]`: the task's worker log as it is on disk, opened without
/// following a link, streamed line by line (lossy UTF-8) with control characters blanked;
/// exit 1 for a task with no log yet, as Hermes.
pub fn log(
    ctx: &Ctx,
    home: &board_home::Home,
    id: &board_core::TaskId,
    tail: Option<u64>,
) -> Result<(), Failure> {
    use std::io::{BufRead, Write};
    ctx.store.get(id)?;
    let path = home.log(id);
    let missing = || Failure::Refused(format!("(no log for {id} — task may not have spawned yet)"));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut write = |line: &str| {
        let shown = board_core::shapes::plain(line.trim_end_matches(['\n', '\r']), false);
        writeln!(out, "{shown}")
    };
    let written = match tail {
        Some(bytes) => {
            let text = board_home::safety::read_tail(&path, 0, bytes).map_err(|_| missing())?;
            text.lines().try_for_each(&mut write)
        }
        None => {
            let file = board_home::safety::open_read(&path).map_err(|_| missing())?;
            std::io::BufReader::new(file)
                .split(b'\n')
                .try_for_each(|line| write(&String::from_utf8_lossy(&line?)))
        }
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Refused(format!("cannot print the log: {e}"))),
    }
}
