//! Retention (`kanban gc`): what a batch removed, which events are routine, and the
//! pace of the batches. The stores do the removing (`Store::gc_archived`,
//! `Store::gc_events`); the caller runs batches until both cursors are done, measuring
//! each, and [`Pacer`] sizes the next so that no batch holds the write lock long.
//!
//! What is never removed, so that the board and its checks read the same history:
//! a task that a task outside its link component links to (the whole component goes, or
//! none of it), the events of a task that is not done, and a done task's landmark events
//! (`created`, `decomposed`, `claimed`, `completed`, the event that closed each run, ...):
//! only [`ROUTINE_EVENTS`] go. The ledger (`llm_calls`) stays whole: the spend ceilings
//! and the bill read it.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::store::{Retention, StoreError, StoreResult};
use crate::types::{TaskId, Timestamp};

/// The event kinds retention removes from done tasks: notes of a run's progress and of
/// edits, which no rule of the board reads back.
pub const ROUTINE_EVENTS: &[EventKind] = &[
    EventKind::Heartbeat,
    EventKind::ClaimExtended,
    EventKind::ReclaimDeferred,
    EventKind::Spawned,
    EventKind::Edited,
    EventKind::Assigned,
    EventKind::Linked,
    EventKind::Unlinked,
    EventKind::AutoDecomposeFailed,
    EventKind::DecomposeReset,
    EventKind::SkippedNonspawnable,
];

/// Rows a retention batch removed (or, in a dry run, would remove).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Freed {
    pub tasks: u64,
    pub runs: u64,
    pub events: u64,
    pub comments: u64,
    pub links: u64,
}

impl Freed {
    pub fn add(&mut self, other: Freed) {
        self.tasks += other.tasks;
        self.runs += other.runs;
        self.events += other.events;
        self.comments += other.comments;
        self.links += other.links;
    }

    pub fn rows(&self) -> u64 {
        self.tasks + self.runs + self.events + self.comments + self.links
    }
}

/// The reads and deletes of one batch of archived tasks on a SQL store's transaction;
/// [`gc_archived_rows`] decides what goes, the same on every such store. Each row read
/// is a task id with whether that task is archived and last changed before the cut-off.
pub trait GcRows {
    /// Up to `window` tasks with ids above `after`, in id order.
    fn tasks_after(
        &mut self,
        after: &str,
        before: Timestamp,
        window: usize,
    ) -> StoreResult<Vec<(String, bool)>>;
    /// The task the newest event belongs to.
    fn newest_event_task(&mut self) -> StoreResult<Option<String>>;
    /// The link component of `seed` (every task linked to it, directly or through
    /// others, itself included), in id order; locked where the store locks rows.
    fn component(&mut self, seed: &str, before: Timestamp) -> StoreResult<Vec<(String, bool)>>;
    /// Deletes one task with its links, runs, events, comments and lease.
    fn remove_task(&mut self, id: &str) -> StoreResult<Freed>;
    /// Makes sure no event id handed out so far is handed out again, even once the
    /// newest event is removed (a store whose ids come from a sequence has nothing to do).
    fn keep_event_ids(&mut self) -> StoreResult<()>;
}

/// Why `archive --rm` refuses `id`, given its link component as `(task, archived)`
/// pairs (itself included; empty when there is no such task), or `None` when it may
/// go: it must be archived, and so must every task it is linked to, directly or not.
pub fn removal_refused(id: &TaskId, component: &[(TaskId, bool)]) -> Option<Refusal> {
    match component.iter().find(|(m, _)| m == id) {
        None => Some(Refusal::NoSuchTask(id.clone())),
        Some((_, false)) => Some(Refusal::NotArchived(id.clone())),
        Some(_) => component
            .iter()
            .find(|(_, archived)| !archived)
            .map(|(other, _)| Refusal::LinkedToLive {
                id: id.clone(),
                other: other.clone(),
            }),
    }
}

/// `Store::remove_archived` on a SQL store's transaction ([`removal_refused`]); then the
/// task goes with all of its rows.
pub fn remove_archived_rows(rows: &mut impl GcRows, id: &TaskId) -> StoreResult<Freed> {
    // Archived "before the end of time": every archived task counts.
    let component = rows
        .component(id.as_str(), Timestamp::MAX)?
        .into_iter()
        .map(|(member, archived)| Ok((parsed_id(&member)?, archived)))
        .collect::<StoreResult<Vec<_>>>()?;
    if let Some(refusal) = removal_refused(id, &component) {
        return Err(refusal.into());
    }
    rows.keep_event_ids()?;
    rows.remove_task(id.as_str())
}

/// A task id read back from a row.
fn parsed_id(id: &str) -> StoreResult<TaskId> {
    id.parse::<TaskId>()
        .map_err(|e| StoreError::Backend(format!("task row {id:?} has an id the board never writes: {e}")))
}

/// The bounds of one retention batch: how many rows it looks at, and the moment after
/// which it starts nothing new. A batch always does one piece of work (a component, a
/// step of events), so a sweep advances whatever the deadline.
#[derive(Clone, Copy, Debug)]
pub struct GcBatch {
    pub window: usize,
    pub until: Instant,
    /// The caller's clock, read between two pieces of work: the core reads none itself.
    pub clock: Clock,
    /// Rolled back: the batch counts what it would remove.
    pub dry_run: bool,
}

/// A monotonic clock the caller hands the core (`Instant::now` in the product, a fixed
/// moment in a test that wants a batch past its deadline).
pub type Clock = fn() -> Instant;

impl GcBatch {
    /// Whether the batch starts nothing more: it did some work and its deadline passed.
    pub fn stops(&self, worked: bool) -> bool {
        worked && (self.clock)() >= self.until
    }
}

/// One batch of archived tasks: the next `window` tasks after `after`, and for each old
/// archived one its whole link component when every member is old and archived, the
/// seed is its smallest id (so a component goes once) and it does not hold the newest
/// event (so no event id is handed out twice). Past the batch's deadline it stops before
/// the next component. Returns what went and where the next batch starts (`None` when
/// the tasks are done).
pub fn gc_archived_rows(
    rows: &mut impl GcRows,
    before: Timestamp,
    after: Option<&TaskId>,
    batch: &GcBatch,
) -> StoreResult<(Freed, Option<TaskId>)> {
    let window = batch.window.max(1);
    let looked = rows.tasks_after(after.map_or("", TaskId::as_str), before, window)?;
    let mut next = match looked.last() {
        Some((id, _)) if looked.len() == window => Some(parsed_id(id)?),
        _ => None,
    };
    let keep = rows.newest_event_task()?;
    let mut freed = Freed::default();
    let mut worked = false;
    for (at, (seed, old)) in looked.iter().enumerate() {
        if !old {
            continue;
        }
        if batch.stops(worked) {
            next = Some(parsed_id(&looked[at - 1].0)?);
            break;
        }
        let members = rows.component(seed, before)?;
        let whole = !members.is_empty() && members.iter().all(|(_, old)| *old);
        let first = members.first().is_some_and(|(id, _)| id == seed);
        let kept = members.iter().any(|(id, _)| Some(id.as_str()) == keep.as_deref());
        if whole && first && !kept {
            for (id, _) in &members {
                freed.add(rows.remove_task(id)?);
            }
            worked = true;
        }
    }
    Ok((freed, next))
}

/// Event ids an events batch removes with one statement; between two, a batch past its
/// deadline stops.
pub const EVENT_STEP: i64 = 256;

/// One batch of events: the ids in `(after_id, after_id + window]`, a step of
/// [`EVENT_STEP`] ids at a time, `remove(from, upto)` removing the routine events of
/// done tasks in `(from, upto]` below `newest` (the board's newest event id, which stays
/// so that no id is handed out twice) and saying how many went. Returns what went and
/// the next cursor (`None` past the newest event).
pub fn gc_event_steps(
    after_id: i64,
    newest: i64,
    batch: &GcBatch,
    mut remove: impl FnMut(i64, i64) -> StoreResult<u64>,
) -> StoreResult<(Freed, Option<i64>)> {
    let window = i64::try_from(batch.window.max(1)).unwrap_or(i64::MAX);
    let end = after_id.saturating_add(window);
    let (mut from, mut events) = (after_id, 0);
    loop {
        let upto = from.saturating_add(EVENT_STEP).min(end);
        events += remove(from, upto)?;
        from = upto;
        if from >= end || from >= newest || batch.stops(true) {
            break;
        }
    }
    let freed = Freed {
        events,
        ..Freed::default()
    };
    Ok((freed, (from < newest).then_some(from)))
}

/// What handing the freed space back did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Compacted {
    /// What was done, in words (`wal_checkpoint(TRUNCATE)`, `ANALYZE`).
    pub action: String,
    /// Bytes of the database file now free for reuse (SQLite's free pages), when known.
    pub reusable_bytes: Option<u64>,
    /// Bytes the write-ahead log shrank by, when known.
    pub wal_bytes_freed: Option<u64>,
}

/// The least and the most a sweep leaves the write lock free between two batches.
pub const MIN_REST_MICROS: u64 = 10_000;
pub const MAX_REST_MICROS: u64 = 100_000;

/// How long a sweep leaves the write lock free after a batch that took `micros`: twice
/// the batch, at least [`MIN_REST_MICROS`] and at most [`MAX_REST_MICROS`]. A writer
/// waiting on the lock retries on its own clock (SQLite's busy handler sleeps a few
/// milliseconds, then longer), so the lock must be free most of the time for it to find
/// it free soon; back-to-back batches would starve it.
pub fn rest_after(micros: u64) -> u64 {
    micros.saturating_mul(2).clamp(MIN_REST_MICROS, MAX_REST_MICROS)
}

/// Sizes retention batches: each batch looks at `window` rows; a batch that took longer
/// than half the budget halves the next window, one well under a quarter of it doubles
/// it, within `[min, max]`. Time is passed in, never read here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    window: usize,
    min: usize,
    max: usize,
    budget_micros: u64,
}

impl Pacer {
    /// A pacer starting at `start` rows per batch, aiming at batches under `budget_micros`.
    pub fn new(start: usize, min: usize, max: usize, budget_micros: u64) -> Pacer {
        Pacer {
            window: start.clamp(min, max),
            min,
            max,
            budget_micros,
        }
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// The longest a batch should take: its deadline is this long after it starts.
    pub fn budget(&self) -> Duration {
        Duration::from_micros(self.budget_micros)
    }

    /// Records how long the last batch took.
    pub fn took(&mut self, micros: u64) {
        if micros > self.budget_micros / 2 {
            self.window = (self.window / 2).max(self.min);
        } else if micros < self.budget_micros / 4 {
            self.window = (self.window.saturating_mul(2)).min(self.max);
        }
    }
}

/// What one `gc` removes: archived tasks last changed before `archived_before`, routine
/// events of done tasks created before `events_before` (each skipped when `None`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    pub archived_before: Option<Timestamp>,
    pub events_before: Option<Timestamp>,
    /// Every batch is rolled back: the counts are what the same sweep would remove.
    pub dry_run: bool,
}

impl Sweep {
    /// The next batch, starting at `clock`'s now.
    fn batch(&self, pacer: &Pacer, clock: Clock) -> GcBatch {
        GcBatch {
            window: pacer.window(),
            until: clock() + pacer.budget(),
            clock,
            dry_run: self.dry_run,
        }
    }
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Swept {
    pub freed: Freed,
    pub batches: u64,
    /// The longest batch, in microseconds, as the caller's clock measured it.
    pub longest_batch_micros: u64,
}

/// A clock for [`sweep`]: runs one batch and says how many microseconds it took.
pub type Timer<'a> = dyn FnMut(&mut dyn FnMut() -> StoreResult<Freed>) -> (StoreResult<Freed>, u64) + 'a;

/// Runs the batches of `request` to the end: archived tasks in id order, then events in
/// id order, each batch sized by `pacer` from the time `timer` measured for the last,
/// and given the pacer's budget from its start on `clock` as its deadline ([`GcBatch`]).
pub fn sweep(
    store: &dyn Retention,
    request: &Sweep,
    pacer: &mut Pacer,
    clock: Clock,
    timer: &mut Timer<'_>,
) -> StoreResult<Swept> {
    let mut swept = Swept::default();
    let mut run = Batches {
        request,
        pacer,
        clock,
        timer,
        swept: &mut swept,
    };
    if let Some(before) = request.archived_before {
        run.until_done(None, |after: &Option<TaskId>, batch| {
            let (freed, next) = store.gc_archived(before, after.as_ref(), batch)?;
            Ok((freed, next.map(Some)))
        })?;
    }
    if let Some(before) = request.events_before {
        run.until_done(0, |after: &i64, batch| store.gc_events(before, *after, batch))?;
    }
    Ok(swept)
}

/// One sweep's batches as they run: each sized by the pacer and timed by the timer.
struct Batches<'a, 't> {
    request: &'a Sweep,
    pacer: &'a mut Pacer,
    clock: Clock,
    timer: &'a mut Timer<'t>,
    swept: &'a mut Swept,
}

impl Batches<'_, '_> {
    /// Runs `step` from `cursor` on, one batch at a time, until the store returns no
    /// cursor to go on from.
    fn until_done<C>(
        &mut self,
        mut cursor: C,
        mut step: impl FnMut(&C, &GcBatch) -> StoreResult<(Freed, Option<C>)>,
    ) -> StoreResult<()> {
        loop {
            let mut next = None;
            let (request, pacer, clock) = (self.request, &*self.pacer, self.clock);
            let (freed, micros) = (self.timer)(&mut || {
                let (freed, cursor_after) = step(&cursor, &request.batch(pacer, clock))?;
                next = cursor_after;
                Ok(freed)
            });
            self.swept.batches += 1;
            self.swept.longest_batch_micros = self.swept.longest_batch_micros.max(micros);
            self.pacer.took(micros);
            self.swept.freed.add(freed?);
            match next {
                Some(after) => cursor = after,
                None => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_batch_halves_the_window_and_a_quick_one_doubles_it_within_bounds() {
        let mut pacer = Pacer::new(1000, 100, 4000, 50_000);
        pacer.took(30_000);
        assert_eq!(pacer.window(), 500);
        pacer.took(40_000);
        pacer.took(40_000);
        pacer.took(40_000);
        assert_eq!(pacer.window(), 100, "never below the minimum");
        pacer.took(15_000);
        assert_eq!(pacer.window(), 100, "between a quarter and half: unchanged");
        for _ in 0..10 {
            pacer.took(1_000);
        }
        assert_eq!(pacer.window(), 4000, "never above the maximum");
    }

    #[test]
    fn the_rest_after_a_batch_is_twice_the_batch_within_bounds() {
        assert_eq!(rest_after(8_000), 16_000);
        assert_eq!(rest_after(100), MIN_REST_MICROS);
        assert_eq!(rest_after(u64::MAX), MAX_REST_MICROS);
    }

    #[test]
    fn freed_rows_add_up() {
        let mut total = Freed::default();
        total.add(Freed {
            tasks: 1,
            runs: 2,
            events: 3,
            comments: 4,
            links: 5,
        });
        total.add(Freed {
            events: 10,
            ..Freed::default()
        });
        assert_eq!(total.events, 13);
        assert_eq!(total.rows(), 25);
    }
}
