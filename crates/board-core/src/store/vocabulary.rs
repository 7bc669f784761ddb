//! The arguments and answers of the store's methods: filters, cursors, claims, and what
//! became of a create, a reclaim or a commit.

use std::ops::ControlFlow;

use super::StoreResult;
use crate::transition::{Claiming, Request};
use crate::types::{Checks, RunId, RunKind, Status, Task, TaskId, TaskOrder, Timestamp};

/// Which tasks `list` returns, in `order` (claim order by default: priority desc, then
/// age). Archived tasks only when asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    pub status: Option<Status>,
    pub assignee: Option<String>,
    /// Only the tasks nobody is assigned (`assignee` is then `None`).
    pub unassigned: bool,
    /// Only the tasks of this tenant.
    pub tenant: Option<String>,
    pub include_archived: bool,
    pub limit: Option<usize>,
    /// The order, sorted by the store's query (never after the read).
    pub order: TaskOrder,
    /// A page's cursor: only the tasks after this one in the order. Tasks created
    /// meanwhile land after the cursor or before it, so paging to the end reads every
    /// task present throughout exactly once. An unknown id is refused (`NoSuchTask`).
    pub after: Option<TaskId>,
}

/// Which events `events` returns, oldest first: those with an id above `after_id`, of
/// one of `kinds` (any kind when empty), created at or after `since`, of a task now
/// assigned to `assignee` and of a task of `tenant` when given, at most `limit`. With `newest`,
/// the limit keeps the newest matching events rather than the oldest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub task_id: Option<TaskId>,
    pub after_id: i64,
    pub limit: Option<usize>,
    pub kinds: Vec<String>,
    pub since: Option<Timestamp>,
    pub newest: bool,
    pub assignee: Option<String>,
    pub tenant: Option<String>,
}

/// What a visitor of streamed rows says after each row: go on, or stop the read.
pub type Visit = ControlFlow<()>;

/// One of the two index ranges a page of claim order after a cursor is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorRange {
    /// The tasks of the cursor's priority after it.
    Rest,
    /// The tasks of every lower priority.
    Lower,
}

/// Reads a page of claim order after a cursor as two index ranges, so that a deep page
/// costs what the first does: `range(Rest, limit, visit)`, then, unless that ended the
/// read or filled the page, `range(Lower, what is left of the limit, visit)`.
pub fn after_cursor(
    limit: Option<usize>,
    visit: &mut dyn FnMut(Task) -> Visit,
    mut range: impl FnMut(CursorRange, Option<usize>, &mut dyn FnMut(Task) -> Visit) -> StoreResult<()>,
) -> StoreResult<()> {
    let (shown, stopped) = (std::cell::Cell::new(0usize), std::cell::Cell::new(false));
    let mut counted = |t: Task| {
        shown.set(shown.get() + 1);
        let next = visit(t);
        stopped.set(next.is_break());
        next
    };
    range(CursorRange::Rest, limit, &mut counted)?;
    let left = limit.map(|l| l.saturating_sub(shown.get()));
    if stopped.get() || left == Some(0) {
        return Ok(());
    }
    range(CursorRange::Lower, left, &mut counted)
}

/// What `create` did: made the task, or found the one its idempotency key already names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Creation {
    Created(Task),
    /// The task created earlier with the same idempotency key, unchanged.
    Exists(Task),
}

impl Creation {
    pub fn task(&self) -> &Task {
        match self {
            Creation::Created(t) | Creation::Exists(t) => t,
        }
    }

    pub fn into_task(self) -> Task {
        match self {
            Creation::Created(t) | Creation::Exists(t) => t,
        }
    }

    /// `created` or `exists`, as the command line and the web API say it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Creation::Created(_) => "created",
            Creation::Exists(_) => "exists",
        }
    }
}

/// A claim just taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub task: Task,
    pub run_id: RunId,
    pub claim_lock: String,
}

/// Claims `offers` in order with `claim`, passing over a task another claimer took or
/// that cannot be claimed now. Any other failure is the whole call's when `atomic` (the
/// claims share one transaction, which the failure rolls back) and when nothing was
/// claimed yet; otherwise it ends the batch with the claims already made.
pub fn claim_in_order(
    offers: &[Offer],
    atomic: bool,
    mut claim: impl FnMut(&Offer) -> StoreResult<Claim>,
) -> StoreResult<Vec<Claim>> {
    let mut claims = Vec::with_capacity(offers.len());
    for offer in offers {
        match claim(offer) {
            Ok(c) => claims.push(c),
            Err(super::StoreError::Refused(r)) if r.is_lost_race() || r.not_claimable_now() => {}
            Err(e) if atomic || claims.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(claims)
}

impl Claim {
    /// The claim a task just claimed holds: its lease's run and lock.
    pub fn of(task: Task) -> StoreResult<Claim> {
        match task.lease.clone() {
            Some(lease) => Ok(Claim {
                task,
                run_id: lease.run_id,
                claim_lock: lease.claim_lock,
            }),
            None => Err(super::StoreError::Backend(format!(
                "claim of {} left no run",
                task.id
            ))),
        }
    }
}

/// What became of a reclaim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReclaimOutcome {
    /// The worker is stopped and the task is back to `ready`.
    Reclaimed,
    /// The worker survived termination: the claim stands, extended briefly.
    Deferred,
    /// The guard named another run, or a replacement took over meanwhile: nothing changed.
    Lost,
}

/// What a termination attempt achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// The worker is gone (or there was none).
    Stopped,
    /// The worker is still alive after the attempt.
    Survived,
}

/// Stops the worker of a running task. Called outside any write transaction.
pub trait Terminator {
    fn terminate(&self, task: &Task) -> Termination;
}

/// For boards with no supervised processes: there is never a worker to stop.
pub struct NoWorkers;

impl Terminator for NoWorkers {
    fn terminate(&self, _task: &Task) -> Termination {
        Termination::Stopped
    }
}

/// The decomposition failure policy's settings (`kanban.decompose_*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    pub base_seconds: i64,
    pub failure_limit: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base_seconds: 30,
            failure_limit: 3,
        }
    }
}

/// A committed decomposition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub root: Task,
    /// Children in reply order (empty for a single-task plan).
    pub child_ids: Vec<TaskId>,
}

/// A task a dispatcher offers to claim: the kind of run it would open, and the checks
/// a work run's completion must pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    pub task: TaskId,
    pub kind: RunKind,
    pub checks: Checks,
    /// For an unassigned task, the profile that takes its work (`kanban.default_assignee`):
    /// the claim assigns the task to it.
    pub assign: Option<String>,
}

impl Offer {
    /// The claim this offer asks for, recorded on `host`.
    pub fn request(&self, ttl: i64, host: Option<&str>) -> Request {
        Request::Claim(Claiming {
            ttl,
            host: host.map(str::to_owned),
            kind: self.kind,
            checks: self.checks.clone(),
            lane: None,
            assign: self.assign.clone(),
        })
    }

    /// Work on a ready task, with no checks.
    pub fn work(task: TaskId) -> Offer {
        Offer {
            task,
            kind: RunKind::Work,
            checks: Checks::default(),
            assign: None,
        }
    }
}

/// What a task row's guarded update compares, as `old` was read: its status, current run
/// and claim lock.
pub fn update_guard(old: &Task) -> (&'static str, Option<RunId>, Option<&str>) {
    (
        old.status.as_str(),
        old.current_run_id(),
        old.lease.as_ref().map(|l| l.claim_lock.as_str()),
    )
}

/// The outcome of a task row's guarded update, written only if its status, run and claim
/// were still as read: `changed` rows, one when it was written; none is a claim that
/// changed under the write (`run_id` the one it was read with).
pub fn guarded_update(changed: u64, id: &TaskId, run_id: Option<RunId>) -> StoreResult<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(crate::refusal::Refusal::ClaimChanged {
            id: id.clone(),
            run_id: run_id.unwrap_or_default(),
        }
        .into())
    }
}
