//! `Store` for `PgStore`: every operation as SQL, each write one transaction that locks
//! what it reads, asks the core, and applies its answer.
//!
//! PostgreSQL runs writers concurrently, so every rule that spans rows is made to hold
//! by locks, in READ COMMITTED (each statement sees everything committed before it
//! started, so a fact read after a lock is granted is as fresh as the lock):
//!
//! - A write locks the task it decides on (`FOR NO KEY UPDATE`) before reading its
//!   facts. Its runs, its `decomposed` event and the links into it change only under
//!   that lock, so the facts hold until commit: one open run (invariant 2), and a
//!   claim, completion or reclaim of one run has one winner. The compare-and-set on
//!   `(status, current_run_id, claim_lock)` stays as a second guard.
//! - A parent leaving an open status locks its waiting children, in id order, before
//!   reading their facts. Of two parents finishing together, the second waits for the
//!   first's commit and then sees it done, so the child is promoted once both are.
//!   Parents never reopen (done and archived are terminal), so a parent seen done stays
//!   done: a child is never ready while a parent is open (invariant 6).
//! - `link` and `create` lock the parent `FOR SHARE`: a parent cannot finish between the
//!   read that holds the child back and the link becoming visible to the parent's
//!   wake-up.
//! - `link` takes the board's link advisory lock before its cycle check, so two links
//!   that would close a cycle together are checked one after the other (invariant 7).
//!   Only `link` can close a cycle: the other writes link new tasks only.
//! - `claim_next` and `claim_ready` take ready rows `FOR NO KEY UPDATE SKIP LOCKED`: concurrent claimers
//!   of the queue skip each other's rows instead of waiting. `claim` of one named task
//!   waits for the row like any write, since it must answer with the status it then
//!   finds (`WrongStatus` when another claim won).
//! - Events take the board's event lock at commit (see `Tx::commit`), so event ids
//!   appear in commit order.
//!
//! - `unlink` locks the child before deleting the link, so its promotion is decided on
//!   the parents left.
//!
//! Locks rather than SERIALIZABLE: writers on different tasks read overlapping ranges
//! (the links of a parent, the runs index), which SERIALIZABLE would turn into
//! serialization failures and retries under load; with locks only writers of the same
//! rows meet, and they queue. A deadlock among these (rare: locks go parent before
//! child, ids in order) rolls the attempt back, and `PgStore::write` runs it again.

use board_core::plan::{self, Mode, Plan, PlanBasis, PlanSettings};
use board_core::store::{Claim, Committed, Creation, EventFilter, StoreResult, TaskFilter, Visit};
use board_core::transition::{decide, Fresh, TaskFacts};
use board_core::{comment, graph};
use board_core::{
    BoardImport, BoardReads, BoardSnapshot, BoardStats, BoardWrites, Breaker, BreakerSettings, BreakerSignal,
    Comment, DaySpend, DecompositionLease, DispatchQueue, Event, Finished, ImportBatch, ImportOutcome,
    LlmCall, LlmLedger, Offer, Request, Run, RunId, Spend, Status, StatusCount, StoreError, Tally, Task,
    TaskId, Timestamp, TriageLease, TriageQueue,
};

use crate::apply::{
    all, apply, claim_rows, facts_of, insert_created, link, locked_facts, locked_facts_and_fresh, promote,
    require_task, task_by, tasks, unused_task_id, PlanTx, GET_TASK, LOCK_TASK, PROMOTABLE,
    PROMOTION_CANDIDATES, SHARE_TASK,
};
use crate::rows::{
    self, comment_columns, event_columns, llm_call_columns, run_columns, task_columns, with_params,
};
use crate::tx::Params;
use crate::{reads, LockClass, PgStore};
use board_core::EventKind;
use board_core::LlmOutcome;

/// The dispatcher's reads: each an index range of `tasks_by_status` or
/// `tasks_triage_due`, so their cost follows the rows they return (for the due triage
/// cards, the unparked triage cards, sorted by due time), not the board's size (see
/// `PgStore::explain_dispatcher_reads`).
const CLAIMABLE: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status = 'ready' ORDER BY priority DESC, created_at, seq LIMIT $1"
);
const CLAIMABLE_EXCEPT: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status = 'ready' AND NOT (coalesce(assignee, '') = ANY($2))
     ORDER BY priority DESC, created_at, seq LIMIT $1"
);
const CHECKABLE: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status IN ('verifying', 'review') ORDER BY priority DESC, created_at, seq LIMIT $1"
);
const EXPIRED_LEASES: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status = 'running' AND claim_expires <= $1 ORDER BY claim_expires, id LIMIT $2"
);
const RUNNING: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE status = 'running' ORDER BY priority DESC, created_at, seq"
);
const DUE_TRIAGE: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks t
     WHERE t.status = 'triage' AND NOT t.decompose_parked
       AND (t.decompose_next_attempt_at IS NULL OR t.decompose_next_attempt_at <= $1)
       AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = t.id)
       AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id AND e.kind = ",
    board_core::decomposed_event_sql!(),
    ")
       AND NOT EXISTS (SELECT 1 FROM decomposition_leases l WHERE l.task_id = t.id AND l.expires > $1)
     ORDER BY COALESCE(t.decompose_next_attempt_at, t.created_at), t.created_at, t.seq LIMIT $2"
);

impl BoardReads for PgStore {
    fn get(&self, id: &TaskId) -> StoreResult<Task> {
        self.read_one(|tx| task_by(tx, GET_TASK, id))
    }

    fn for_each_task(&self, filter: &TaskFilter, visit: &mut dyn FnMut(Task) -> Visit) -> StoreResult<()> {
        self.read(|tx| reads::for_each_task(tx, filter, visit))
    }

    fn parents(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        self.read(|tx| {
            require_task(tx, id)?;
            let sql = concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE id IN (SELECT parent_id FROM task_links WHERE child_id = $1)
                 ORDER BY created_at, seq"
            );
            tasks(tx, sql, &[&id.as_str()])
        })
    }

    fn children(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        self.read(|tx| {
            require_task(tx, id)?;
            let sql = concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE id IN (SELECT child_id FROM task_links WHERE parent_id = $1)
                 ORDER BY created_at, seq"
            );
            tasks(tx, sql, &[&id.as_str()])
        })
    }

    fn facts(&self, id: &TaskId) -> StoreResult<TaskFacts> {
        self.read(|tx| {
            let task = task_by(tx, GET_TASK, id)?;
            facts_of(tx, task)
        })
    }

    fn comments(&self, id: &TaskId) -> StoreResult<Vec<Comment>> {
        self.read(|tx| {
            require_task(tx, id)?;
            let sql = concat!(
                "SELECT ",
                comment_columns!(),
                " FROM task_comments WHERE task_id = $1 ORDER BY id"
            );
            all(tx.query(sql, &[&id.as_str()])?, rows::comment)
        })
    }

    fn runs(&self, id: &TaskId) -> StoreResult<Vec<Run>> {
        self.read(|tx| {
            require_task(tx, id)?;
            let sql = concat!(
                "SELECT ",
                run_columns!(),
                " FROM task_runs WHERE task_id = $1 ORDER BY id"
            );
            all(tx.query(sql, &[&id.as_str()])?, rows::run)
        })
    }

    fn for_each_event(&self, filter: &EventFilter, visit: &mut dyn FnMut(Event) -> Visit) -> StoreResult<()> {
        self.read(|tx| reads::for_each_event(tx, filter, visit))
    }

    fn count_events(&self, filter: &EventFilter) -> StoreResult<u64> {
        self.read(|tx| reads::count_events(tx, filter))
    }
}

impl BoardWrites for PgStore {
    fn create_or_find(&self, request: &graph::NewTask, now: Timestamp) -> StoreResult<Creation> {
        self.write(|tx| {
            if let Some(key) = &request.idempotency_key {
                let by_key = concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM tasks WHERE idempotency_key = $1"
                );
                if let Some(row) = tx.query_opt(by_key, &[key])? {
                    return rows::task(&row).map(Creation::Exists);
                }
            }
            let mut parents = Vec::with_capacity(request.parents.len());
            for p in &request.parents {
                parents.push(task_by(tx, SHARE_TASK, p)?);
            }
            let id = unused_task_id(tx, &[])?;
            let created = graph::create(request, id, &parents, now)?;
            insert_created(tx, &created, now)?;
            Ok(Creation::Created(created.task))
        })
    }

    fn transition(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task> {
        self.write(|tx| {
            let (f, fresh) = match request.opens_run() {
                true => locked_facts_and_fresh(tx, id)?,
                false => (locked_facts(tx, id)?, Fresh::default()),
            };
            let change = decide(&f, request, &fresh, now)?;
            apply(tx, &f.task, &change, now)?;
            Ok(change.task)
        })
    }

    fn link(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        let links_lock = self.lock_key(LockClass::Links);
        self.write(|tx| link(tx, links_lock, parent, child, now))
    }

    fn unlink(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| {
            require_task(tx, parent)?;
            let task = task_by(tx, LOCK_TASK, child)?;
            let removed = tx.execute(
                "DELETE FROM task_links WHERE parent_id = $1 AND child_id = $2",
                &[&parent.as_str(), &child.as_str()],
            )?;
            let f = facts_of(tx, task)?;
            // A refusal returns early and the transaction rolls the delete back.
            let change = graph::unlink(parent, &f, removed == 1, now)?;
            apply(tx, &f.task, &change, now)
        })
    }

    fn comment(
        &self,
        id: &TaskId,
        author: Option<&str>,
        body: &str,
        guard: Option<RunId>,
        now: Timestamp,
    ) -> StoreResult<Comment> {
        self.write(|tx| {
            // Shared lock: the run the guard names cannot end until the comment commits.
            comment::admit(&task_by(tx, SHARE_TASK, id)?, author, body, guard)?;
            let row = tx.query_one(
                "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ($1, $2, $3, $4)
                 RETURNING id",
                &[&id.as_str(), &author, &body, &now],
            )?;
            let comment_id: i64 = row.try_get(0).map_err(crate::backend)?;
            tx.push_events(id, &[comment::event(comment_id, author, guard)], now);
            Ok(Comment {
                id: comment_id,
                task_id: id.clone(),
                author: author.map(str::to_owned),
                body: body.to_owned(),
                created_at: now,
            })
        })
    }
}

impl DispatchQueue for PgStore {
    fn promote_ready(&self, now: Timestamp) -> StoreResult<Vec<TaskId>> {
        self.write(|tx| {
            // Locked in id order, as wake-ups lock children; promoted in claim order.
            let candidates = tx.query(PROMOTION_CANDIDATES, &[])?;
            let mut queue = Vec::with_capacity(candidates.len());
            for row in &candidates {
                let order: (i64, i64, i64) = (
                    row.try_get(1).map_err(crate::backend)?,
                    row.try_get(2).map_err(crate::backend)?,
                    row.try_get(3).map_err(crate::backend)?,
                );
                queue.push(((-order.0, order.1, order.2), rows::task_id(row)?));
            }
            queue.sort();
            let mut promoted = Vec::new();
            for (_, id) in queue {
                if promote(tx, &id, now)? {
                    promoted.push(id);
                }
            }
            Ok(promoted)
        })
    }

    fn promotable(&self) -> StoreResult<Vec<TaskId>> {
        self.read_one(|tx| {
            let rows = tx.query(PROMOTABLE, &[])?;
            rows.iter().map(rows::task_id).collect()
        })
    }

    fn due_scheduled(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<TaskId>> {
        self.read_one(|tx| reads::due_scheduled(tx, now, limit))
    }

    fn next_scheduled(&self, after: Timestamp) -> StoreResult<Option<Timestamp>> {
        self.read_one(|tx| reads::next_scheduled(tx, after))
    }

    fn claimable_except(&self, limit: usize, external: &[String]) -> StoreResult<Vec<Task>> {
        let limit = reads::sql_limit(Some(limit));
        match external {
            [] => self.read_one(|tx| tasks(tx, CLAIMABLE, &[&limit])),
            _ => self.read_one(|tx| tasks(tx, CLAIMABLE_EXCEPT, &[&limit, &external])),
        }
    }

    fn checkable(&self, limit: usize) -> StoreResult<Vec<Task>> {
        let limit = reads::sql_limit(Some(limit));
        self.read_one(|tx| tasks(tx, CHECKABLE, &[&limit]))
    }

    fn expired_leases(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let limit = reads::sql_limit(Some(limit));
        self.read_one(|tx| tasks(tx, EXPIRED_LEASES, &[&now, &limit]))
    }

    fn running(&self) -> StoreResult<Vec<Task>> {
        self.read_one(|tx| tasks(tx, RUNNING, &[]))
    }

    /// One transaction: the offered tasks still waiting to be claimed, in claim order,
    /// taken `FOR NO KEY UPDATE SKIP LOCKED`, so gateways offering the same tasks never
    /// wait on each other.
    fn claim_ready(
        &self,
        offers: &[Offer],
        ttl: i64,
        host: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Vec<Claim>> {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE id = ANY($1) AND status IN ('ready', 'verifying', 'review')
             ORDER BY priority DESC, created_at, seq
             FOR NO KEY UPDATE SKIP LOCKED"
        );
        let ids: Vec<&str> = offers.iter().map(|o| o.task.as_str()).collect();
        self.write(|tx| {
            let waiting = tx.query(sql, &[&ids])?;
            claim_rows(tx, &waiting, offers, ttl, host, now)
        })
    }
}

impl TriageQueue for PgStore {
    fn due_triage(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let limit = reads::sql_limit(Some(limit));
        self.read_one(|tx| tasks(tx, DUE_TRIAGE, &[&now, &limit]))
    }

    fn lease_decomposition(
        &self,
        id: &TaskId,
        holder: &str,
        ttl: i64,
        now: Timestamp,
        abandoned: Option<&str>,
    ) -> StoreResult<DecompositionLease> {
        self.write(|tx| crate::leases::lease(tx, id, holder, ttl, now, abandoned))
    }

    fn release_decomposition(&self, id: &TaskId, holder: &str) -> StoreResult<()> {
        self.write(|tx| crate::leases::release(tx, id, holder))
    }

    fn triage_leases(&self, limit: usize) -> StoreResult<Vec<TriageLease>> {
        self.read(|tx| crate::leases::on_triage(tx, limit))
    }

    fn commit_plan(
        &self,
        id: &TaskId,
        basis: &PlanBasis,
        mode: Mode,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed> {
        self.write(|tx| plan::write_plan(&mut PlanTx(tx), id, basis, mode, plan, settings, now))
    }
}

impl LlmLedger for PgStore {
    fn record_llm_call(&self, c: &LlmCall) -> StoreResult<i64> {
        self.write(|tx| {
            let sql = concat!(
                "INSERT INTO llm_calls (",
                llm_call_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id"
            );
            let row = with_params(c, &[], |params| tx.query_one(sql, params))?;
            row.try_get(0).map_err(crate::backend)
        })
    }

    fn finish_llm_call(&self, id: i64, c: &LlmCall) -> StoreResult<bool> {
        self.write(|tx| {
            let sql = concat!(
                "UPDATE llm_calls SET (",
                llm_call_columns!(),
                ") = ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) WHERE id = $13 AND outcome = $14"
            );
            let changed = with_params(c, &[&id, &LlmOutcome::Sent.as_str()], |params| {
                tx.execute(sql, params)
            })?;
            Ok(changed == 1)
        })
    }

    fn llm_calls(&self, task_id: Option<&TaskId>) -> StoreResult<Vec<LlmCall>> {
        self.read_one(|tx| {
            let found = match task_id {
                Some(id) => tx.query(
                    concat!(
                        "SELECT ",
                        llm_call_columns!(),
                        " FROM llm_calls WHERE task_id = $1 ORDER BY id"
                    ),
                    &[&id.as_str()],
                )?,
                None => tx.query(
                    concat!("SELECT ", llm_call_columns!(), " FROM llm_calls ORDER BY id"),
                    &[],
                )?,
            };
            all(found, rows::llm_call)
        })
    }

    fn spend(&self, since: Timestamp) -> StoreResult<Spend> {
        self.read_one(|tx| crate::cost::spend(tx, since))
    }

    fn breaker(&self) -> StoreResult<Breaker> {
        self.read_one(crate::cost::breaker)
    }

    fn signal_breaker(
        &self,
        signal: &BreakerSignal,
        settings: &BreakerSettings,
        now: Timestamp,
    ) -> StoreResult<(Breaker, Option<EventKind>)> {
        self.write(|tx| crate::cost::signal_breaker(tx, signal, settings, now))
    }

    fn daily_spend(&self, since: Timestamp) -> StoreResult<Vec<DaySpend>> {
        self.read_one(|tx| reads::daily_spend(tx, since))
    }
}

impl BoardStats for PgStore {
    fn verdicts(&self) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        self.read_one(reads::verdicts)
    }

    fn tally(&self) -> StoreResult<Tally> {
        self.read(|tx| {
            let tasks = tx.query("SELECT status AS key, COUNT(*) AS n FROM tasks GROUP BY status", &[])?;
            let runs = tx.query(
                "SELECT outcome AS key, COUNT(*) AS n FROM task_runs WHERE outcome IS NOT NULL GROUP BY outcome",
                &[],
            )?;
            let calls = tx.query("SELECT outcome AS key, COUNT(*) AS n FROM llm_calls GROUP BY outcome", &[])?;
            // Read through the partial index task_events_decompositions, whose WHERE this
            // repeats (board_core::DECOMPOSITION_EVENTS).
            let decompositions = tx.query(
                concat!(
                    "SELECT kind AS key, COUNT(*) AS n FROM task_events WHERE kind IN (",
                    board_core::decomposition_events_sql!(),
                    ") GROUP BY kind"
                ),
                &[],
            )?;
            let tokens = tx.query(
                "SELECT COALESCE(SUM(GREATEST(prompt_tokens, 0)), 0)::BIGINT AS prompt,
                        COALESCE(SUM(GREATEST(completion_tokens, 0)), 0)::BIGINT AS completion
                 FROM llm_calls",
                &[],
            )?;
            let totals = tokens
                .first()
                .ok_or_else(|| StoreError::Backend("the token sums returned no row".into()))?;
            Ok(Tally {
                tasks: rows::counts(&tasks)?,
                runs: rows::counts(&runs)?,
                llm_calls: rows::counts(&calls)?,
                prompt_tokens: rows::sum(totals, "prompt")?,
                completion_tokens: rows::sum(totals, "completion")?,
                decompositions: rows::counts(&decompositions)?,
            })
        })
    }

    fn status_counts(&self) -> StoreResult<Vec<StatusCount>> {
        self.read_one(reads::status_counts)
    }

    fn oldest(&self, status: Status) -> StoreResult<Option<Task>> {
        self.read_one(|tx| reads::oldest(tx, status))
    }

    fn finished(&self, since: Timestamp, slot: i64, bounds: &[i64]) -> StoreResult<Vec<Finished>> {
        self.read(|tx| reads::finished(tx, since, slot, bounds))
    }

    fn snapshot(&self) -> StoreResult<BoardSnapshot> {
        self.read(|tx| {
            let tasks = tasks(
                tx,
                concat!("SELECT ", task_columns!(), " FROM tasks ORDER BY id"),
                &[],
            )?;
            let runs = tx.query(
                concat!("SELECT ", run_columns!(), " FROM task_runs ORDER BY id"),
                &[],
            )?;
            let links = tx.query(
                "SELECT parent_id, child_id FROM task_links ORDER BY parent_id, child_id",
                &[],
            )?;
            let events = tx.query(
                concat!("SELECT ", event_columns!(), " FROM task_events ORDER BY id"),
                &[],
            )?;
            Ok(BoardSnapshot {
                tasks,
                runs: all(runs, rows::run)?,
                links: all(links, rows::link)?,
                events: all(events, rows::event)?,
            })
        })
    }
}

impl BoardImport for PgStore {
    fn import(&self, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome> {
        let links_lock = self.lock_key(LockClass::Links);
        self.write(|tx| crate::import::import(tx, links_lock, batch, now))
    }
}

impl PgStore {
    /// How PostgreSQL plans the dispatcher's reads on this board now: one `EXPLAIN`
    /// text per read (`claimable`, `expired_leases`, `running`, `due_triage`), with
    /// `now` as the clock and a limit of 64.
    pub fn explain_dispatcher_reads(&self, now: Timestamp) -> StoreResult<Vec<(&'static str, String)>> {
        let limit = Some(64i64);
        let reads: [(&'static str, &str, Params<'_>); 4] = [
            ("claimable", CLAIMABLE, &[&limit]),
            ("expired_leases", EXPIRED_LEASES, &[&now, &limit]),
            ("running", RUNNING, &[]),
            ("due_triage", DUE_TRIAGE, &[&now, &limit]),
        ];
        self.read(|tx| {
            let mut plans = Vec::with_capacity(reads.len());
            for (name, sql, params) in reads {
                let lines = tx.query_uncached(&format!("EXPLAIN {sql}"), params)?;
                let text: Vec<String> = lines
                    .iter()
                    .map(|r| r.try_get(0).map_err(crate::backend))
                    .collect::<StoreResult<_>>()?;
                plans.push((name, text.join("\n")));
            }
            Ok(plans)
        })
    }
}
