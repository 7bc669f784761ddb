//! Tasks of another board brought in with their ids kept (`kanban import-hermes`): what
//! a batch carries, and the rules every store applies to it.
//!
//! A store writes a batch in one transaction. Each task lands whole (its row, its runs
//! under fresh run ids, its events and comments in their order, and one `imported` event)
//! or not at all; links come after the tasks they join and go through the same rule as
//! `link` (no cycle, no running child, a ready child of an open parent back to `todo`),
//! so the board's invariants hold after every batch.

use serde::Serialize;

use crate::graph::check_title;
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::store::{StoreError, StoreResult};
use crate::transition::NewEvent;
use crate::types::{Comment, Event, Link, Run, Status, Task, TaskId, Timestamp};

/// One task of another board with its history.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedTask {
    /// The row as it lands: no lease, a status of ours.
    pub task: Task,
    /// Closed runs, oldest first. Their ids are the source's: the store draws fresh ones
    /// and maps the events' `run_id` through them.
    pub runs: Vec<Run>,
    /// The source's events, oldest first; ids are ignored, `created_at` is kept.
    pub events: Vec<Event>,
    /// The source's comments, oldest first; ids are ignored.
    pub comments: Vec<Comment>,
    /// The payload of the `imported` event appended after the task's own events: where
    /// it came from and what did not map one to one.
    pub note: serde_json::Value,
}

/// What one store transaction brings in: tasks first, then links among tasks on the board.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportBatch {
    pub tasks: Vec<ImportedTask>,
    pub links: Vec<Link>,
}

/// What became of one imported task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "landed", content = "reason")]
pub enum Landed {
    /// New on the board, with its history.
    Imported,
    /// New on the board, but its idempotency key belongs to another task already: the
    /// key was left off.
    ImportedWithoutKey,
    /// The same task (same id, created at the same second) is on the board already:
    /// nothing changed.
    Present,
    /// Another task of ours has this id: nothing changed, ours is kept.
    Collision,
    /// The rows break a rule of the board: nothing changed.
    Invalid(String),
}

impl Landed {
    /// The task is on the board after the batch (new or already there).
    pub fn is_on_board(&self) -> bool {
        matches!(
            self,
            Landed::Imported | Landed::ImportedWithoutKey | Landed::Present
        )
    }
}

/// What became of one imported link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkLanded {
    Added,
    /// The link exists already.
    Present,
    /// Refused as `link` would refuse it (a cycle, a running child, an unknown end).
    Refused(Refusal),
}

/// The answer of a store to a batch, in batch order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportOutcome {
    pub tasks: Vec<Landed>,
    pub links: Vec<LinkLanded>,
}

/// Decides a task against the one holding its id on the board, if any. The same task
/// is recognised by its creation time, which neither board ever changes.
pub fn landing(existing: Option<&Task>, incoming: &ImportedTask) -> Landed {
    match existing {
        Some(ours) if ours.created_at == incoming.task.created_at => Landed::Present,
        Some(_) => Landed::Collision,
        None => match check(incoming) {
            Ok(()) => Landed::Imported,
            Err(reason) => Landed::Invalid(reason),
        },
    }
}

/// Refuses rows that would break an invariant: a lease or a `running` status (no
/// worker of ours holds it), an open run or a closed run without an outcome, rows of
/// another task, a title the board refuses.
fn check(incoming: &ImportedTask) -> Result<(), String> {
    let task = &incoming.task;
    check_title(&task.title).map_err(|r| r.to_string())?;
    if task.lease.is_some() || task.status == Status::Running {
        return Err("a running task cannot be imported: no worker of this board holds it".into());
    }
    for run in &incoming.runs {
        if run.task_id != task.id {
            return Err(format!("run {} belongs to {}", run.id, run.task_id));
        }
        if run.is_open() || run.outcome.is_none() || run.claim_lock.is_some() {
            return Err(format!("run {} is not closed with an outcome", run.id));
        }
    }
    let foreign = incoming
        .events
        .iter()
        .map(|e| &e.task_id)
        .chain(incoming.comments.iter().map(|c| &c.task_id))
        .find(|id| **id != task.id);
    match foreign {
        Some(other) => Err(format!("an event or comment belongs to {other}")),
        None => fits(incoming).map_err(|r| r.to_string()),
    }
}

/// Refuses a field over the board's limits ([`crate::limits`]), as a write of ours
/// would be refused: an imported board is no way around them.
fn fits(incoming: &ImportedTask) -> Result<(), Refusal> {
    use crate::limits::{json, short, some_short, some_text, text};
    let task = &incoming.task;
    text("the body", &task.body)?;
    some_text("the result", &task.result)?;
    some_short("the assignee", &task.assignee)?;
    some_short("the creator", &task.created_by)?;
    some_short("the idempotency key", &task.idempotency_key)?;
    crate::limits::some_name("the tenant", &task.tenant)?;
    crate::limits::retries(task.max_retries)?;
    if crate::limits::skills(&task.skills)? != task.skills {
        return Err(Refusal::Invalid(
            "the skills repeat a name or hold a blank one".into(),
        ));
    }
    for run in &incoming.runs {
        some_short("a run's profile", &run.profile)?;
        some_short("a run's host", &run.worker_host)?;
        some_text("a run's summary", &run.summary)?;
        some_text("a run's error", &run.error)?;
        run.metadata
            .as_ref()
            .map_or(Ok(()), |m| json("a run's metadata", m))?;
    }
    for event in &incoming.events {
        short("an event's kind", &event.kind)?;
        json("an event's payload", &event.payload)?;
    }
    for comment in &incoming.comments {
        some_short("a comment's author", &comment.author)?;
        text("a comment", &comment.body)?;
    }
    Ok(())
}

/// The writes of an import on one store transaction; [`import_batch`] decides what to
/// write and in which order, the same on every store.
pub trait ImportWrites {
    /// The task of ours holding this id, if any.
    fn task(&mut self, id: &TaskId) -> StoreResult<Option<Task>>;
    /// Whether a task of ours holds this idempotency key.
    fn key_taken(&mut self, key: &str) -> StoreResult<bool>;
    fn insert_task(&mut self, task: &Task) -> StoreResult<()>;
    /// Inserts a closed run under a fresh id of this board and returns that id.
    fn insert_run(&mut self, run: &Run) -> StoreResult<i64>;
    /// Inserts one of the source's events, its time kept, its run id already mapped.
    fn insert_event(&mut self, event: &Event) -> StoreResult<()>;
    /// Inserts one of the source's comments, its author and time kept.
    fn insert_comment(&mut self, comment: &Comment) -> StoreResult<()>;
    /// Appends events of this board, stamped `now`.
    fn push_events(&mut self, id: &TaskId, events: &[NewEvent], now: Timestamp) -> StoreResult<()>;
    /// Links as `Store::link` does, with its refusals.
    fn link(&mut self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()>;
}

/// Writes a batch: each task decided by [`landing`] and, when new, inserted whole with
/// its history; then the links, each decided as `link` decides it.
pub fn import_batch(
    w: &mut impl ImportWrites,
    batch: &ImportBatch,
    now: Timestamp,
) -> StoreResult<ImportOutcome> {
    let mut outcome = ImportOutcome::default();
    for incoming in &batch.tasks {
        let existing = w.task(&incoming.task.id)?;
        let mut landed = landing(existing.as_ref(), incoming);
        if landed == Landed::Imported {
            landed = insert_imported(w, incoming, now)?;
        }
        outcome.tasks.push(landed);
    }
    for l in &batch.links {
        outcome.links.push(match w.link(&l.parent_id, &l.child_id, now) {
            Ok(()) => LinkLanded::Added,
            Err(StoreError::Refused(r)) => link_refused(r),
            Err(e) => return Err(e),
        });
    }
    Ok(outcome)
}

/// One new task: its row (without an idempotency key another task holds), its runs under
/// fresh ids, its events and comments, and the `imported` event.
fn insert_imported(
    w: &mut impl ImportWrites,
    incoming: &ImportedTask,
    now: Timestamp,
) -> StoreResult<Landed> {
    let mut task = incoming.task.clone();
    let key_taken = match &task.idempotency_key {
        Some(key) => w.key_taken(key)?,
        None => false,
    };
    if key_taken {
        task.idempotency_key = None;
    }
    w.insert_task(&task)?;
    let mut fresh = Vec::with_capacity(incoming.runs.len());
    for run in &incoming.runs {
        fresh.push((run.id, w.insert_run(run)?));
    }
    for e in &incoming.events {
        w.insert_event(&Event {
            run_id: mapped_run(e.run_id, &fresh),
            ..e.clone()
        })?;
    }
    for c in &incoming.comments {
        w.insert_comment(c)?;
    }
    let note = NewEvent::new(EventKind::Imported, None, incoming.note.clone());
    w.push_events(&task.id, &[note], now)?;
    Ok(match key_taken {
        true => Landed::ImportedWithoutKey,
        false => Landed::Imported,
    })
}

/// A link `link` refused: one that exists already changed nothing and is `Present`.
pub fn link_refused(refusal: Refusal) -> LinkLanded {
    match refusal {
        Refusal::Unchanged(_) => LinkLanded::Present,
        other => LinkLanded::Refused(other),
    }
}

/// The run id an imported event names, through the map of source run ids to fresh ones.
pub fn mapped_run(run_id: Option<i64>, fresh: &[(i64, i64)]) -> Option<i64> {
    let source = run_id?;
    fresh.iter().find(|(from, _)| *from == source).map(|(_, to)| *to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::blank_task;
    use crate::types::{Outcome, RunStatus, TaskId};

    fn bundle(status: Status) -> ImportedTask {
        let id = TaskId::from_random([1, 2, 3, 4]);
        ImportedTask {
            task: blank_task(id, "imported".into(), status, 100),
            runs: Vec::new(),
            events: Vec::new(),
            comments: Vec::new(),
            note: serde_json::json!({}),
        }
    }

    fn closed_run(task: &Task, id: i64, outcome: Option<Outcome>) -> Run {
        Run {
            id,
            task_id: task.id.clone(),
            profile: None,
            status: RunStatus::Ended,
            outcome,
            claim_lock: None,
            claim_expires: None,
            worker_pid: None,
            worker_host: None,
            last_heartbeat_at: None,
            started_at: 100,
            ended_at: Some(110),
            summary: None,
            error: None,
            metadata: None,
            kind: crate::RunKind::Work,
            checks: crate::Checks::default(),
            evidence: None,
            lane: None,
        }
    }

    #[test]
    fn the_same_creation_time_is_the_same_task() {
        let incoming = bundle(Status::Done);
        let mut ours = incoming.task.clone();
        assert_eq!(landing(None, &incoming), Landed::Imported);
        assert_eq!(landing(Some(&ours), &incoming), Landed::Present);
        ours.created_at += 1;
        assert_eq!(landing(Some(&ours), &incoming), Landed::Collision);
    }

    #[test]
    fn rows_that_break_an_invariant_are_invalid() {
        assert!(matches!(
            landing(None, &bundle(Status::Running)),
            Landed::Invalid(_)
        ));
        let mut open = bundle(Status::Blocked);
        let mut run = closed_run(&open.task, 7, Some(Outcome::Blocked));
        run.ended_at = None;
        open.runs.push(run);
        assert!(matches!(landing(None, &open), Landed::Invalid(r) if r.contains("run 7")));
        let mut no_outcome = bundle(Status::Done);
        no_outcome.runs.push(closed_run(&no_outcome.task, 8, None));
        assert!(matches!(landing(None, &no_outcome), Landed::Invalid(_)));
        let mut blank = bundle(Status::Todo);
        blank.task.title = "  ".into();
        assert!(matches!(landing(None, &blank), Landed::Invalid(_)));
    }

    #[test]
    fn event_runs_follow_the_fresh_ids() {
        let fresh = [(12, 1), (15, 2)];
        assert_eq!(mapped_run(Some(15), &fresh), Some(2));
        assert_eq!(mapped_run(Some(99), &fresh), None);
        assert_eq!(mapped_run(None, &fresh), None);
    }
}
