//! Hermes rows decoded by hand and mapped to this board's words: statuses and outcomes
//! it lacks go to the nearest one, and the original is kept (in the task's `imported`
//! event, in the run's metadata).

use std::collections::HashMap;

use board_core::graph::blank_task;
use board_core::limits;
use board_core::{
    clean_title, BlockKind, Comment, Event, ImportedTask, Outcome, Run, Status, TaskId, Timestamp,
};
use rusqlite::types::ValueRef;
use rusqlite::Row;
use serde_json::{json, Value};

use super::{Page, Skipped};

/// The status a Hermes status comes over as. `running` becomes `ready` (its run is
/// closed: no worker of this board holds it); `review` and any status this board lacks
/// become `blocked`, which waits for a person's `unblock`.
pub fn map_status(hermes: &str) -> Status {
    match hermes {
        "running" => Status::Ready,
        other => other.parse().unwrap_or(Status::Blocked),
    }
}

/// The outcome of a closed Hermes run: its own word when this board has it, else the
/// nearest by the run's outcome or status (`failed` is a crash, `released` a reclaim).
fn map_outcome(outcome: Option<&str>, status: Option<&str>) -> Outcome {
    if let Some(o) = outcome.and_then(|o| o.parse().ok()) {
        return o;
    }
    match outcome.or(status) {
        Some("scheduled") => Outcome::Scheduled,
        Some("blocked") => Outcome::Blocked,
        Some("done") => Outcome::Completed,
        Some("failed" | "crashed") => Outcome::Crashed,
        Some("timed_out") => Outcome::TimedOut,
        _ => Outcome::Reclaimed,
    }
}

/// A column's text, whatever SQLite stored: text that is not UTF-8 is repaired with
/// U+FFFD, a number is written out.
pub(super) fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

/// A column's integer; text holding one is read too, anything else is an error.
fn int(v: ValueRef<'_>) -> Result<Option<i64>, ()> {
    match v {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(i) => Ok(Some(i)),
        ValueRef::Real(f) if f.is_finite() && f.abs() < 9.0e15 => Ok(Some(f as i64)),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or(()),
        _ => Err(()),
    }
}

/// Reads the row's cells in order.
struct Cells<'a, 'r> {
    row: &'a Row<'r>,
    next: usize,
    cap: usize,
}

impl<'a, 'r> Cells<'a, 'r> {
    fn of(row: &'a Row<'r>, cap: usize) -> Self {
        Cells { row, next: 0, cap }
    }

    fn value(&mut self) -> ValueRef<'a> {
        self.next += 1;
        self.row.get_ref(self.next - 1).unwrap_or(ValueRef::Null)
    }

    fn text(&mut self) -> Option<String> {
        text(self.value())
    }

    /// A text column read through [`capped`]: the text, or why it is too long.
    fn long_text(&mut self, what: &str) -> Result<Option<String>, String> {
        let value = self.text();
        let bytes = int(self.value()).ok().flatten().unwrap_or(0);
        if bytes as usize > self.cap {
            return Err(format!(
                "its {what} is {bytes} bytes, over the {}-byte limit (kanban.max_text_bytes)",
                self.cap
            ));
        }
        Ok(value)
    }

    fn int(&mut self, what: &str) -> Result<Option<i64>, String> {
        int(self.value()).map_err(|()| format!("its {what} is not an integer"))
    }

    fn required_int(&mut self, what: &str) -> Result<i64, String> {
        self.int(what)?.ok_or_else(|| format!("it has no {what}"))
    }
}

/// `col` unless this file lacks it, then `NULL`.
fn column(columns: &[String], name: &str) -> String {
    match columns.iter().any(|c| c == name) {
        true => name.to_owned(),
        false => "NULL".to_owned(),
    }
}

/// A text column and its length in bytes, the text left out past the cap (`?3`), so a
/// huge value is never loaded.
fn capped(columns: &[String], name: &str) -> String {
    let col = column(columns, name);
    format!("CASE WHEN length(CAST({col} AS BLOB)) <= ?3 THEN {col} END, length(CAST({col} AS BLOB))")
}

/// The tasks with rowids after `?1`, `?2` of them; `?3` is the text cap.
pub(super) fn task_select(columns: &[String]) -> String {
    let c = |name| column(columns, name);
    format!(
        "SELECT id, rowid, {}, {}, assignee, status, priority, created_by, created_at, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
         FROM tasks WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        capped(columns, "title"),
        capped(columns, "body"),
        c("started_at"),
        c("completed_at"),
        capped(columns, "result"),
        c("block_kind"),
        c("block_recurrences"),
        c("consecutive_failures"),
        capped(columns, "last_failure_error"),
        c("max_runtime_seconds"),
        c("idempotency_key"),
        c("tenant"),
        capped(columns, "skills"),
        c("max_retries"),
    )
}

/// The tasks of a page: rowids in `(?1, ?2]`.
const OF_PAGE: &str = "task_id IN (SELECT id FROM tasks WHERE rowid > ?1 AND rowid <= ?2)";

pub(super) fn run_select(columns: &[String]) -> String {
    let c = |name| column(columns, name);
    format!(
        "SELECT task_id, id, {}, status, outcome, started_at, ended_at, {}, {}, {}, {}
         FROM task_runs WHERE {OF_PAGE} ORDER BY task_id, id",
        c("profile"),
        capped(columns, "summary"),
        capped(columns, "error"),
        capped(columns, "metadata"),
        c("last_heartbeat_at"),
    )
}

pub(super) fn event_select(columns: &[String]) -> String {
    format!(
        "SELECT task_id, id, {}, kind, {}, created_at FROM task_events WHERE {OF_PAGE} ORDER BY task_id, id",
        column(columns, "run_id"),
        capped(columns, "payload"),
    )
}

pub(super) const COMMENT_SELECT: &str = "SELECT task_id, id, author, \
    CASE WHEN length(CAST(body AS BLOB)) <= ?3 THEN body END, length(CAST(body AS BLOB)), created_at \
    FROM task_comments WHERE task_id IN (SELECT id FROM tasks WHERE rowid > ?1 AND rowid <= ?2) ORDER BY task_id, id";

/// A task row of [`task_select`], with no history yet.
pub(super) fn task(row: &Row<'_>, cap: usize) -> Result<ImportedTask, String> {
    let mut c = Cells::of(row, cap);
    let raw_id = c.text().unwrap_or_default();
    let id: TaskId = raw_id.parse().map_err(|_| "its id is not a task id".to_owned())?;
    c.value(); // rowid
    let title = clean_title(&c.long_text("title")?.unwrap_or_default());
    let body = c.long_text("body")?.unwrap_or_default();
    let assignee = c.text().filter(|a| !a.trim().is_empty());
    let hermes_status = c.text().unwrap_or_default();
    let priority = c.int("priority")?.unwrap_or(0);
    let created_by = c.text();
    let created_at = c.required_int("created_at")?;
    let mut task = blank_task(id, title, map_status(&hermes_status), created_at);
    task.body = body;
    task.assignee = assignee;
    task.priority = priority;
    task.created_by = created_by;
    task.started_at = c.int("started_at").unwrap_or(None);
    task.completed_at = c.int("completed_at").unwrap_or(None);
    task.result = c.long_text("result")?;
    task.block_kind = c.text().and_then(|k| k.parse::<BlockKind>().ok());
    task.block_recurrences = c.int("block_recurrences").unwrap_or(None).unwrap_or(0);
    task.consecutive_failures = c.int("consecutive_failures").unwrap_or(None).unwrap_or(0);
    task.last_failure_error = c.long_text("last_failure_error")?;
    task.max_runtime_seconds = c.int("max_runtime_seconds").unwrap_or(None).filter(|s| *s > 0);
    task.idempotency_key = c.text().filter(|k| !k.is_empty());
    let mut note = json!({ "from": "hermes", "hermes_status": hermes_status });
    let tenant = c.text().filter(|t| !t.trim().is_empty());
    match tenant.as_deref().map(|t| limits::name("the tenant", t)) {
        Some(Err(_)) => note["tenant_dropped"] = json!(tenant),
        _ => task.tenant = tenant,
    }
    let (skills, dropped) = skills(c.long_text("skills")?);
    task.skills = skills;
    if !dropped.is_empty() {
        note["skills_dropped"] = json!(dropped);
    }
    match c.int("max_retries").unwrap_or(None) {
        Some(n) if n >= 1 => task.max_retries = Some(n),
        Some(n) => note["max_retries_dropped"] = json!(n),
        None => {}
    }
    task.updated_at = [task.started_at, task.completed_at]
        .into_iter()
        .flatten()
        .fold(created_at, i64::max);
    if task.status.as_str() != hermes_status {
        note["status"] = json!(task.status);
    }
    Ok(ImportedTask {
        task,
        runs: Vec::new(),
        events: Vec::new(),
        comments: Vec::new(),
        note,
    })
}

/// A Hermes task's skills column as this board keeps it: each name trimmed, once, at most
/// `SKILLS_MAX`; and what cannot be kept (a comma, a flag, a non-string, JSON that is no
/// list), for the import's note.
fn skills(raw: Option<String>) -> (Vec<String>, Vec<String>) {
    let listed: Option<Vec<Value>> = raw.as_deref().and_then(|t| serde_json::from_str(t).ok());
    let (mut kept, mut dropped): (Vec<String>, Vec<String>) = match (raw, &listed) {
        (Some(text), None) => (Vec::new(), vec![text]),
        _ => (Vec::new(), Vec::new()),
    };
    for value in listed.unwrap_or_default() {
        let Some(name) = value.as_str() else {
            dropped.push(value.to_string());
            continue;
        };
        match limits::skills(&[name.to_owned()]) {
            Ok(one) => {
                for skill in one {
                    if kept.contains(&skill) {
                        continue;
                    }
                    match kept.len() < limits::SKILLS_MAX {
                        true => kept.push(skill),
                        false => dropped.push(skill),
                    }
                }
            }
            Err(_) => dropped.push(name.to_owned()),
        }
    }
    (kept, dropped)
}

fn skip(what: &'static str, id: Option<i64>) -> impl Fn(String) -> Skipped {
    move |reason| Skipped {
        what,
        id: id.map_or_else(|| "?".to_owned(), |i| i.to_string()),
        reason,
    }
}

/// A run row of [`run_select`], closed: a run still open in Hermes is closed
/// `reclaimed` at `now`. An outcome this board lacks is kept in its metadata.
pub(super) fn run(row: &Row<'_>, now: Timestamp) -> Result<Run, Skipped> {
    let mut c = Cells::of(row, usize::MAX);
    let task_id = c.text().unwrap_or_default();
    let id = c.int("id").ok().flatten();
    let fail = skip("run", id);
    let id = id.ok_or_else(|| fail("its id is not an integer".into()))?;
    let profile = c.text();
    let (status, outcome) = (c.text(), c.text());
    let started_at = c.required_int("started_at").map_err(&fail)?;
    let ended_at = c.int("ended_at").map_err(&fail)?;
    let summary = c.long_text("summary").map_err(&fail)?;
    let mut error = c.long_text("error").map_err(&fail)?;
    let metadata = c.long_text("metadata").map_err(&fail)?;
    let last_heartbeat_at = c.int("last_heartbeat_at").unwrap_or(None);
    let mut metadata: Option<Value> = metadata.map(|m| serde_json::from_str(&m).unwrap_or(Value::String(m)));
    let mapped = match ended_at {
        Some(_) => map_outcome(outcome.as_deref(), status.as_deref()),
        None => {
            error.get_or_insert_with(|| "open in Hermes when imported".to_owned());
            Outcome::Reclaimed
        }
    };
    if outcome.as_deref() != Some(mapped.as_str()) {
        let kept = json!({ "hermes_status": status, "hermes_outcome": outcome });
        metadata = Some(match metadata {
            Some(Value::Object(mut m)) => {
                m.insert("hermes".into(), kept);
                Value::Object(m)
            }
            Some(other) => json!({ "hermes": kept, "hermes_metadata": other }),
            None => json!({ "hermes": kept }),
        });
    }
    Ok(Run {
        id,
        task_id: task_id
            .parse()
            .map_err(|_| fail("its task id is not a task id".into()))?,
        profile,
        status: board_core::types::RunStatus::Ended,
        outcome: Some(mapped),
        claim_lock: None,
        claim_expires: None,
        worker_pid: None,
        worker_host: None,
        last_heartbeat_at,
        started_at,
        ended_at: Some(ended_at.unwrap_or(now).max(started_at)),
        summary,
        error,
        metadata,
        kind: board_core::RunKind::Work,
        checks: board_core::Checks::default(),
        evidence: None,
        lane: None,
    })
}

/// An event row of [`event_select`]. A payload that is not JSON is kept as its text.
pub(super) fn event(row: &Row<'_>) -> Result<Event, Skipped> {
    let mut c = Cells::of(row, usize::MAX);
    let task_id = c.text().unwrap_or_default();
    let id = c.int("id").ok().flatten();
    let fail = skip("event", id);
    let run_id = c.int("run_id").unwrap_or(None);
    let kind = c
        .text()
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| fail("it has no kind".into()))?;
    let payload = match c.long_text("payload").map_err(&fail)? {
        None => json!({}),
        Some(p) => serde_json::from_str(&p).unwrap_or_else(|_| json!({ "text": p })),
    };
    Ok(Event {
        id: id.unwrap_or(0),
        task_id: task_id
            .parse()
            .map_err(|_| fail("its task id is not a task id".into()))?,
        run_id,
        kind,
        payload,
        created_at: c.required_int("created_at").map_err(&fail)?,
    })
}

/// A comment row of [`COMMENT_SELECT`]; a blank one is skipped, as the board refuses it.
pub(super) fn comment(row: &Row<'_>) -> Result<Comment, Skipped> {
    let mut c = Cells::of(row, usize::MAX);
    let task_id = c.text().unwrap_or_default();
    let id = c.int("id").ok().flatten();
    let fail = skip("comment", id);
    let author = c.text().filter(|a| !a.trim().is_empty());
    let body = c.long_text("body").map_err(&fail)?.unwrap_or_default();
    if board_core::comment::blank(&body) {
        return Err(fail("it is blank".into()));
    }
    Ok(Comment {
        id: id.unwrap_or(0),
        task_id: task_id
            .parse()
            .map_err(|_| fail("its task id is not a task id".into()))?,
        author,
        body,
        created_at: c.required_int("created_at").map_err(&fail)?,
    })
}

/// History rows by the task id they name, each decoded or skipped.
pub(super) type Decoded<T> = Vec<(String, Result<T, Skipped>)>;

/// Hands each history row to its task in the page. Rows of a task that was skipped go
/// with it; rows that could not be decoded are the page's skips.
pub(super) fn attach(
    page: &mut Page,
    runs: Decoded<Run>,
    events: Decoded<Event>,
    comments: Decoded<Comment>,
) {
    let at: HashMap<String, usize> = page
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.task.id.as_str().to_owned(), i))
        .collect();
    hand_out(page, &at, runs, |t, run| t.runs.push(run));
    hand_out(page, &at, events, |t, event| t.events.push(event));
    hand_out(page, &at, comments, |t, comment| t.comments.push(comment));
}

fn hand_out<T>(
    page: &mut Page,
    at: &HashMap<String, usize>,
    rows: Decoded<T>,
    put: impl Fn(&mut ImportedTask, T),
) {
    for (task, row) in rows {
        let Some(&i) = at.get(&task) else { continue };
        match row {
            Ok(row) => put(&mut page.tasks[i], row),
            Err(skipped) => page.skipped.push(skipped),
        }
    }
}
