//! The board's storage, as roles: everything above the storage (decomposer, dispatcher,
//! CLI, web) talks to the board through them, each caller through the roles it uses
//! ([`BoardReads`], [`BoardWrites`], [`DispatchQueue`], [`TriageQueue`], [`LlmLedger`],
//! [`BoardStats`], [`Retention`], [`BoardImport`]). A backend implements every role, each
//! method atomic, and so is a [`Store`]; the verbs built from the required methods (claim,
//! complete, reclaim, ...) are provided here once, so every backend follows the same
//! protocol.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

mod vocabulary;

pub use vocabulary::{
    after_cursor, claim_in_order, guarded_update, update_guard, Claim, Committed, Creation, CursorRange,
    EventFilter, NoWorkers, Offer, ReclaimOutcome, RetryPolicy, TaskFilter, Termination, Terminator, Visit,
};

pub use crate::attachments::AttachmentShelf;
use crate::breaker::{Breaker, BreakerSettings, BreakerSignal};
pub use crate::decomposition_lease::{DecompositionLease, TriageLease};
use crate::graph::NewTask;
use crate::import::{ImportBatch, ImportOutcome};
use crate::kinds::EventKind;
pub use crate::lanes::LaneDesk;
pub use crate::notify::NotifyDesk;
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings};
use crate::refusal::Refusal;
use crate::retention::{Compacted, Freed, GcBatch};
use crate::spend::Spend;
pub use crate::template::GraphWrites;
pub use crate::transition::{Completion, RunEnd, Verdict};
use crate::transition::{Request, TaskFacts};
use crate::types::{
    BlockKind, BoardSnapshot, Comment, DaySpend, Event, Finished, Lease, LlmCall, Run, RunId, Status,
    StatusCount, Tally, Task, TaskId, Timestamp,
};

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The board said no; nothing changed.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The storage itself failed (I/O, corruption, a full disk); nothing changed.
    #[error("storage error: {0}")]
    Backend(String),
}

impl StoreError {
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            StoreError::Refused(r) => Some(r),
            StoreError::Backend(_) => None,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// What [`Store::transition_each`] says of its requests: each one's task, or why not.
pub type Transitions = Vec<StoreResult<Task>>;

/// Reading tasks and what hangs off them (links, runs, comments, events): what every
/// surface that shows the board needs.
pub trait BoardReads: Send + Sync {
    fn get(&self, id: &TaskId) -> StoreResult<Task>;

    /// Hands `visit` the tasks of `filter` one by one as the query yields them, so the
    /// memory a read holds does not grow with the board; `Break` ends the read.
    fn for_each_task(&self, filter: &TaskFilter, visit: &mut dyn FnMut(Task) -> Visit) -> StoreResult<()>;

    /// The tasks of `filter`, collected: for bounded filters (a limit, a status).
    fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<Task>> {
        let mut tasks = Vec::new();
        self.for_each_task(filter, &mut |t| {
            tasks.push(t);
            ControlFlow::Continue(())
        })?;
        Ok(tasks)
    }

    fn parents(&self, id: &TaskId) -> StoreResult<Vec<Task>>;

    fn children(&self, id: &TaskId) -> StoreResult<Vec<Task>>;

    /// What the core needs to decide about the task, read in one consistent view.
    fn facts(&self, id: &TaskId) -> StoreResult<TaskFacts>;

    fn comments(&self, id: &TaskId) -> StoreResult<Vec<Comment>>;

    /// Every run of a task, oldest first.
    fn runs(&self, id: &TaskId) -> StoreResult<Vec<Run>>;

    /// Hands `visit` the events of `filter` one by one as the query yields them; an
    /// unknown `task_id` is refused.
    fn for_each_event(&self, filter: &EventFilter, visit: &mut dyn FnMut(Event) -> Visit) -> StoreResult<()>;

    /// The events of `filter`, collected: for bounded filters.
    fn events(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        let mut events = Vec::new();
        self.for_each_event(filter, &mut |e| {
            events.push(e);
            ControlFlow::Continue(())
        })?;
        Ok(events)
    }

    /// How many events match `filter`, its `limit` and `newest` aside, in one aggregate.
    fn count_events(&self, filter: &EventFilter) -> StoreResult<u64>;
}

/// Changing tasks: creation, every transition of the state machine, links and comments,
/// and the verbs built on [`BoardWrites::transition`] (claim, complete, block, ...). What a
/// person's command, a worker's report and the web board write through.
pub trait BoardWrites: BoardReads + Send + Sync {
    /// Creates a task. With an idempotency key already used, returns that task unchanged
    /// and says so.
    fn create_or_find(&self, request: &NewTask, now: Timestamp) -> StoreResult<Creation>;

    /// [`Store::create_or_find`], the task alone.
    fn create(&self, request: &NewTask, now: Timestamp) -> StoreResult<Task> {
        self.create_or_find(request, now).map(Creation::into_task)
    }

    /// Decides `request` against the task as it is now and applies the change with its
    /// events in one transaction; children the change releases are promoted in it too.
    fn transition(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task>;

    /// Each of `requests` as [`Store::transition`] applies it, each all or nothing and
    /// decided against the changes before it; the outcomes in order, one per request. A
    /// refused request changes nothing and the others go on. By default each is a
    /// transaction of its own, and a failure of the storage is that request's outcome;
    /// a store that commits them together (SQLite: one transaction, one flush for a
    /// tick's worth of writes) fails the whole call instead, with none applied.
    fn transition_each(&self, requests: &[(TaskId, Request)], now: Timestamp) -> StoreResult<Transitions> {
        Ok(requests
            .iter()
            .map(|(id, request)| self.transition(id, request, now))
            .collect())
    }

    fn link(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()>;

    fn unlink(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()>;

    /// Adds a comment; one guarded by `guard` (a worker's run) lands only while that run
    /// holds the task, checked in the transaction that writes it (`comment::admit`).
    fn comment(
        &self,
        id: &TaskId,
        author: Option<&str>,
        body: &str,
        guard: Option<RunId>,
        now: Timestamp,
    ) -> StoreResult<Comment>;

    /// Claims a ready task under a fresh run.
    fn claim(&self, id: &TaskId, ttl: i64, now: Timestamp) -> StoreResult<Claim> {
        self.claim_on(id, ttl, None, now)
    }

    /// Claims a ready task under a fresh run recorded on `host` (a gateway's).
    fn claim_on(&self, id: &TaskId, ttl: i64, host: Option<&str>, now: Timestamp) -> StoreResult<Claim> {
        self.claim_offer(&Offer::work(id.clone()), ttl, host, now)
    }

    /// Claims the run `offer` names (work on a ready task, a verification, a review)
    /// under a fresh run recorded on `host`.
    fn claim_offer(&self, offer: &Offer, ttl: i64, host: Option<&str>, now: Timestamp) -> StoreResult<Claim> {
        Claim::of(self.transition(&offer.task, &offer.request(ttl, host), now)?)
    }

    /// Extends the lease of the worker's run. `false` when `run_id` is not current.
    fn heartbeat(
        &self,
        id: &TaskId,
        run_id: RunId,
        ttl: i64,
        note: Option<String>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        won(self.transition(id, &Request::Heartbeat { run_id, ttl, note }, now))
    }

    /// Applies a guarded request (a verdict, a review's request or verdict): `false` when
    /// its guard named a run or claim that is no longer current, and nothing changed.
    fn finalise(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<bool> {
        won(self.transition(id, request, now))
    }

    /// Completes a task. `false` when the guard names another run or a replay lost.
    fn complete(&self, id: &TaskId, c: &Completion, now: Timestamp) -> StoreResult<bool> {
        won(self.transition(id, &Request::Complete(c.clone()), now))
    }

    /// Blocks a task. `false` when the guard names another run.
    fn block(
        &self,
        id: &TaskId,
        kind: Option<BlockKind>,
        reason: Option<String>,
        expected_run_id: Option<RunId>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let request = Request::Block {
            kind,
            reason,
            expected_run_id,
        };
        won(self.transition(id, &request, now))
    }

    /// Stops the worker of a running task and returns the task to `ready`.
    ///
    /// 1. Read the task; a guard that names another run loses without signalling anyone.
    /// 2. Terminate the worker outside any transaction; if it survives, keep the claim
    ///    (extended briefly, `reclaim_deferred`).
    /// 3. Release the claim only if it is exactly the one read in step 1.
    fn reclaim(
        &self,
        id: &TaskId,
        expected_run_id: Option<RunId>,
        reason: Option<String>,
        terminator: &dyn Terminator,
        now: Timestamp,
    ) -> StoreResult<ReclaimOutcome> {
        let task = self.get(id)?;
        if let Some(expected) = expected_run_id {
            if task.current_run_id() != Some(expected) {
                return Ok(ReclaimOutcome::Lost);
            }
        }
        let Some(Lease {
            run_id, claim_lock, ..
        }) = task.lease.clone()
        else {
            return Err(Refusal::WrongStatus {
                id: id.clone(),
                status: task.status,
                op: "reclaim",
                allowed: "running",
            }
            .into());
        };
        let (request, outcome) = match terminator.terminate(&task) {
            Termination::Stopped => (
                Request::Reclaim {
                    run_id,
                    claim_lock,
                    reason,
                },
                ReclaimOutcome::Reclaimed,
            ),
            Termination::Survived => (
                Request::DeferReclaim {
                    run_id,
                    claim_lock,
                    reason,
                },
                ReclaimOutcome::Deferred,
            ),
        };
        match won(self.transition(id, &request, now))? {
            true => Ok(outcome),
            false => Ok(ReclaimOutcome::Lost),
        }
    }

    /// The dispatcher ends a supervised run (crash, timeout, stale lease, ...), counting
    /// failures towards `end.failure_limit`. `false` when the claim changed meanwhile.
    fn end_run(&self, id: &TaskId, end: RunEnd, now: Timestamp) -> StoreResult<bool> {
        won(self.transition(id, &Request::EndRun(end), now))
    }

    fn unblock(&self, id: &TaskId, reason: Option<String>, now: Timestamp) -> StoreResult<Task> {
        self.transition(id, &Request::Unblock { reason }, now)
    }

    /// Archives a task; a running one has its run closed as `reclaimed` first.
    fn archive(&self, id: &TaskId, now: Timestamp) -> StoreResult<Task> {
        self.transition(id, &Request::Archive, now)
    }

    fn edit(
        &self,
        id: &TaskId,
        title: Option<String>,
        body: Option<String>,
        priority: Option<i64>,
        now: Timestamp,
    ) -> StoreResult<Task> {
        self.transition(
            id,
            &Request::Edit {
                title,
                body,
                priority,
            },
            now,
        )
    }

    fn assign(&self, id: &TaskId, assignee: Option<String>, now: Timestamp) -> StoreResult<Task> {
        self.transition(id, &Request::Assign { assignee }, now)
    }
}

/// The dispatcher's queue: promotion of tasks whose parents are done, the ready tasks in
/// claim order and their claims, and the running tasks whose leases it watches.
pub trait DispatchQueue: BoardWrites + Send + Sync {
    /// Promotes every `todo` task whose parents are all done or archived.
    fn promote_ready(&self, now: Timestamp) -> StoreResult<Vec<TaskId>>;

    /// The tasks `promote_ready` would promote now, in claim order, changing nothing.
    fn promotable(&self) -> StoreResult<Vec<TaskId>>;

    /// Scheduled tasks whose time has come (`scheduled_until` at or before `now`),
    /// earliest first, at most `limit`: an index range of the due ones, whatever waits
    /// for later. `Request::Resume` puts each back to work.
    fn due_scheduled(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<TaskId>>;

    /// The earliest time a scheduled task waits for after `after`, if any: the first
    /// entry of the same index past `after`.
    fn next_scheduled(&self, after: Timestamp) -> StoreResult<Option<Timestamp>>;

    /// Ready tasks in claim order: priority desc, then age.
    fn claimable(&self, limit: usize) -> StoreResult<Vec<Task>> {
        self.claimable_except(limit, &[])
    }

    /// Ready tasks in claim order but those assigned to one of `external` (profiles that
    /// lanes serve and no gateway spawns, docs/lanes.md).
    fn claimable_except(&self, limit: usize, external: &[String]) -> StoreResult<Vec<Task>>;

    /// Tasks whose reported work waits for a check (`verifying`, `review`), in claim
    /// order.
    fn checkable(&self, limit: usize) -> StoreResult<Vec<Task>>;

    /// Running tasks whose lease expired at or before `now`.
    fn expired_leases(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>>;

    fn running(&self) -> StoreResult<Vec<Task>>;

    /// Claims those of `offers` (given in claim order) whose tasks still wait in the
    /// status their kind of run is claimed from, each under a fresh run recorded on
    /// `host` (the claiming gateway's). A task another claimer holds or took meanwhile is
    /// skipped, never waited on. A backend that claims in one transaction skips rows
    /// other transactions hold (`SKIP LOCKED`); this one claims them one by one, and a
    /// storage error after some claims returns those, leaving the rest for a later call.
    fn claim_ready(
        &self,
        offers: &[Offer],
        ttl: i64,
        host: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Vec<Claim>> {
        claim_in_order(offers, false, |offer| self.claim_offer(offer, ttl, host, now))
    }
}

/// The decomposer's role: triage cards that are due, the lease that makes one gateway
/// bill a card, the commit of a plan, the failure budget of automatic decomposition, and
/// the ledger every request it sends is billed in.
pub trait TriageQueue: BoardWrites + LlmLedger + Send + Sync {
    /// Triage cards an automatic decomposition may take now, oldest due first: no
    /// history, not parked, not decomposed, retry due, and no decomposition lease
    /// holding at `now`.
    fn due_triage(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>>;

    /// Leases a card for an automatic decomposition to `holder` until `now + ttl`,
    /// before any model request is sent: while the lease holds, `due_triage` leaves the
    /// card out for every caller, so among gateways sharing the board one bills it. A
    /// live lease of `abandoned` (a holder the caller knows is gone) counts as lapsed.
    fn lease_decomposition(
        &self,
        id: &TaskId,
        holder: &str,
        ttl: i64,
        now: Timestamp,
        abandoned: Option<&str>,
    ) -> StoreResult<DecompositionLease>;

    /// Ends `holder`'s decomposition lease on the card; a lease another holder took
    /// meanwhile is left alone.
    fn release_decomposition(&self, id: &TaskId, holder: &str) -> StoreResult<()>;

    /// The decomposition leases on triage cards, live or lapsed, at most `limit`, by
    /// card: what a gateway reads to take over the lease of one that stopped mid-call.
    fn triage_leases(&self, limit: usize) -> StoreResult<Vec<TriageLease>>;

    /// Commits a decomposition in one transaction, re-checking every guard of docs/decomposer.md#the-commit.
    fn commit_plan(
        &self,
        id: &TaskId,
        basis: &PlanBasis,
        mode: Mode,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed>;

    /// Records a failed automatic decomposition: backoff, and parking at the limit.
    fn record_decompose_failure(
        &self,
        id: &TaskId,
        error: &str,
        policy: RetryPolicy,
        jitter: f64,
        now: Timestamp,
    ) -> StoreResult<Task> {
        let request = Request::DecomposeFailed {
            error: error.to_owned(),
            base_seconds: policy.base_seconds,
            limit: policy.failure_limit,
            jitter,
        };
        self.transition(id, &request, now)
    }

    /// Clears the failure count and park of a card (a manual decomposition). A card
    /// with nothing to clear is left as it is.
    fn clear_decompose_failures(&self, id: &TaskId, now: Timestamp) -> StoreResult<()> {
        match self.transition(id, &Request::ClearDecomposeFailures, now) {
            Ok(_) | Err(StoreError::Refused(Refusal::Unchanged(_))) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The bill of every model request and the provider breaker: what the spend ceilings and
/// the breaker read before a request is sent.
pub trait LlmLedger: Send + Sync {
    /// Bills one model request; returns the id the store gave its row.
    fn record_llm_call(&self, call: &LlmCall) -> StoreResult<i64>;

    /// Finishes the row `id`, billed before its request was sent (outcome
    /// [`LlmOutcome::Sent`](crate::types::LlmOutcome::Sent)), with how the request ended: every column becomes `call`'s.
    /// False, and nothing changed, when no such row is still `sent`.
    fn finish_llm_call(&self, id: i64, call: &LlmCall) -> StoreResult<bool>;

    /// The billed model requests (of one task, when given), in the order they were billed.
    fn llm_calls(&self, task_id: Option<&TaskId>) -> StoreResult<Vec<LlmCall>>;

    /// The ledger summed over the calls started at or after `since`, in one aggregate
    /// read (never row by row).
    fn spend(&self, since: Timestamp) -> StoreResult<Spend>;

    /// The provider breaker as last written; the default when never written.
    fn breaker(&self) -> StoreResult<Breaker>;

    /// Applies `signal` to the breaker in one transaction: reads it, asks
    /// `breaker::observe`, writes the new state and appends its event on the card the
    /// change names. Returns the state after, and the kind of the event appended.
    fn signal_breaker(
        &self,
        signal: &BreakerSignal,
        settings: &BreakerSettings,
        now: Timestamp,
    ) -> StoreResult<(Breaker, Option<EventKind>)>;

    /// The ledger per UTC day (`started_at / 86400`) from `since` on, in one aggregate.
    fn daily_spend(&self, since: Timestamp) -> StoreResult<Vec<DaySpend>>;
}

/// The board counted in aggregates (never rows loaded), and the whole board in one view
/// for the invariant checks: what metrics, `stats` and the stats page read.
pub trait BoardStats: Send + Sync {
    /// The whole board, read in one consistent view.
    fn snapshot(&self) -> StoreResult<BoardSnapshot>;

    /// Tasks by status, ended runs by outcome, model requests by outcome and their tokens,
    /// each counted by the store in one aggregate.
    fn tally(&self) -> StoreResult<Tally>;

    /// Tasks counted per assignee and status in one aggregate, assignees in name order
    /// (the unassigned first).
    fn status_counts(&self) -> StoreResult<Vec<StatusCount>>;

    /// The task of `status` created first (ties by id), if any.
    fn oldest(&self, status: Status) -> StoreResult<Option<Task>>;

    /// A check's verdicts against the work ([`crate::VERDICT_EVENTS`]: failed
    /// verifications, requested changes), counted per event kind in one aggregate.
    fn verdicts(&self) -> StoreResult<BTreeMap<String, u64>>;

    /// Tasks completed at or after `since` and still done or archived, counted per
    /// `slot` seconds of completion (slot 0 starts at `since`) and per bucket of the time
    /// from their last promotion or unblock (else creation) to completion: bucket `i`
    /// holds spans below `bounds[i]` and at or above the bound before. One aggregate.
    fn finished(&self, since: Timestamp, slot: i64, bounds: &[i64]) -> StoreResult<Vec<Finished>>;
}

/// Removing what the board no longer needs (`kanban gc`, `archive --rm`) and handing the
/// space back.
pub trait Retention: Send + Sync {
    /// One batch of retention: of the tasks after `after` in id order (at most
    /// `batch.window` of them looked at), removes each archived task last changed before
    /// `before` with its runs, events, comments and links, together with every task
    /// linked to it (its link component), when all of them are archived and changed
    /// before `before`; a component with a live or newer task is kept whole. Past
    /// `batch.until` it starts no further component. Runs in one transaction, rolled back
    /// with `batch.dry_run` (`retention::gc_archived_rows`). Returns what it removed and
    /// the cursor of the next batch (`None` once the last task was looked at).
    fn gc_archived(
        &self,
        before: Timestamp,
        after: Option<&TaskId>,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<TaskId>)>;

    /// One batch of retention: of the events with ids in `(after_id, after_id +
    /// batch.window]`, removes the routine ones (`retention::ROUTINE_EVENTS`) of done
    /// tasks created before `before`, a step of ids at a time until `batch.until`
    /// (`retention::gc_event_steps`). One transaction, rolled back with `batch.dry_run`.
    /// Returns what it removed and the next cursor (`None` past the newest event).
    fn gc_events(
        &self,
        before: Timestamp,
        after_id: i64,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<i64>)>;

    /// `kanban archive --rm`: permanently removes one archived task with its runs,
    /// events, comments and links, in one transaction. Refused (nothing removed) unless
    /// the task is archived and so is every task in its link component, so no live task
    /// gains or loses a parent. Event ids stay unique: the ids removed are never handed
    /// out again.
    fn remove_archived(&self, id: &TaskId) -> StoreResult<Freed>;

    /// Hands the space retention freed back: SQLite checkpoints its WAL (TRUNCATE),
    /// PostgreSQL refreshes its planner statistics.
    fn compact(&self) -> StoreResult<Compacted>;

    /// Between the batches of a long write job (gc): folds what it wrote so far into the
    /// board without holding any writer back, so no other writer's commit has to (SQLite:
    /// a passive checkpoint). Nothing to do elsewhere.
    fn settle(&self) -> StoreResult<()> {
        Ok(())
    }
}

/// Bringing another board's tasks in (`kanban import-hermes`).
pub trait BoardImport: Send + Sync {
    /// Brings in the tasks of another board with their ids kept, then the links among
    /// tasks on the board, in one transaction, each row decided as `crate::import` says.
    /// A batch a storage error stops changes nothing.
    fn import(&self, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome>;
}

/// The board's storage: every role at once, what a backend implements and what a
/// caller that needs the whole board (the gateway's dispatcher, the command line) holds.
/// Every method that writes is atomic: it happens whole, with its events, or not at all.
/// A caller that needs one role takes that role (`&dyn LlmLedger`, `&dyn BoardStats`, ...);
/// a `&dyn Store` turns into any of them.
pub trait Store:
    BoardReads
    + BoardWrites
    + DispatchQueue
    + TriageQueue
    + LlmLedger
    + BoardStats
    + Retention
    + BoardImport
    + LaneDesk
    + AttachmentShelf
    + GraphWrites
    + NotifyDesk
{
}

impl<S> Store for S where
    S: BoardReads
        + BoardWrites
        + DispatchQueue
        + TriageQueue
        + LlmLedger
        + BoardStats
        + Retention
        + BoardImport
        + LaneDesk
        + AttachmentShelf
        + GraphWrites
        + NotifyDesk
        + ?Sized
{
}

/// Maps a finaliser's result to its boolean: a lost race or stale guard is `false`.
fn won(result: StoreResult<Task>) -> StoreResult<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(StoreError::Refused(r)) if r.is_lost_race() => Ok(false),
        Err(e) => Err(e),
    }
}
