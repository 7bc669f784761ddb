//! `Store` for `SqliteStore`: every operation as SQL, each write one `BEGIN IMMEDIATE`
//! transaction that reads the facts, asks the core, and applies its answer.

use std::{collections::BTreeMap, sync::MutexGuard};

use board_core::plan::{self, Mode, Plan, PlanBasis, PlanSettings};
use board_core::store::{
    Claim, Committed, Creation, EventFilter, Offer, StoreResult, TaskFilter, Transitions, Visit,
};
use board_core::transition::TaskFacts;
use board_core::{comment, graph};
use board_core::{
    BoardImport, BoardReads, BoardSnapshot, BoardStats, BoardWrites, Breaker, BreakerSettings, BreakerSignal,
    Comment, Compacted, DaySpend, DecompositionLease, DispatchQueue, Event, Finished, ImportBatch,
    ImportOutcome, Link, LlmCall, LlmLedger, Refusal, Request, Run, RunId, Spend, Status, StatusCount,
    StoreError, Tally, Task, TaskId, Timestamp, TriageLease, TriageQueue,
};
use rusqlite::{params, Connection, Transaction, TransactionBehavior};

use crate::rows::{
    comment_from_row, event_from_row, llm_call_from_row, run_from_row, with_params, Word, COMMENT_COLUMNS,
    EVENT_COLUMNS, FINISH_LLM_CALL, INSERT_LLM_CALL, LLM_CALL_COLUMNS, RUN_COLUMNS, TASK_COLUMNS,
};
use crate::SqliteStore;

mod apply;
mod attachments;
mod cost;
mod import;
mod lanes;
mod leases;
mod notify;
mod pipeline;
mod reads;
mod retention;
mod tasks;
mod templates;

use apply::{
    apply, claim_offers, facts, insert_created, insert_events, link, pause_before_commit, promote, query_ids,
    take_wakes, transition_in, transitions_in, unused_task_id, PlanTx, PROMOTABLE,
};
use board_core::EventKind;
use tasks::{get_task, query_tasks};

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn no_such(id: &TaskId) -> StoreError {
    Refusal::NoSuchTask(id.clone()).into()
}

impl SqliteStore {
    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic cannot leave a transaction half-applied: an unfinished one rolls back
        // when its `Transaction` is dropped during the unwind.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; commits only when it succeeds.
    /// A committed write that appended a waking event calls the `on_wake` hook.
    fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut conn = self.conn();
        take_wakes();
        let result = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)
            .and_then(|tx| {
                let out = f(&tx)?;
                pause_before_commit();
                tx.commit().map_err(backend)?;
                Ok(out)
            });
        drop(conn);
        if take_wakes() && result.is_ok() {
            if let Some(on_wake) = &self.on_wake {
                on_wake();
            }
        }
        // A write that fails for the storage's sake (read-only, full disk) names the file.
        result.map_err(|e| match e {
            StoreError::Backend(message) => {
                StoreError::Backend(format!("{}: {message}", self.path.display()))
            }
            refused => refused,
        })
    }

    /// The connection, for a copy's import transaction (`copy.rs`).
    pub(crate) fn lock_conn(&self) -> MutexGuard<'_, Connection> {
        self.conn()
    }

    /// Runs `f` in one read transaction (`copy.rs`).
    pub(crate) fn read_copy<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        self.read(|tx| f(tx))
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, committed when it succeeds, or
    /// rolled back whole with `dry_run` (the dry run of a retention batch counts exactly
    /// what the batch would remove).
    fn batch<T>(&self, dry_run: bool, f: impl FnOnce(&Transaction<'_>) -> StoreResult<T>) -> StoreResult<T> {
        if !dry_run {
            return self.write(f);
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        let out = f(&tx)?;
        tx.rollback().map_err(backend)?;
        Ok(out)
    }

    /// Checkpoints the write-ahead log into the database and truncates it, and says
    /// how much of the file is free for reuse.
    fn checkpoint(&self) -> StoreResult<Compacted> {
        let wal = std::path::PathBuf::from(format!("{}-wal", self.path.display()));
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let before = size(&wal);
        let conn = self.conn();
        // A passive checkpoint copies the WAL into the file without holding writers
        // back; the truncating one after it (which blocks new writers while it runs)
        // then has only the frames committed in between to copy.
        let whole = passive_checkpoint(&conn)?;
        if whole {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(backend)?;
        }
        let free: i64 = conn
            .query_row(
                "SELECT freelist_count * page_size FROM pragma_freelist_count, pragma_page_size",
                [],
                |r| r.get(0),
            )
            .map_err(backend)?;
        Ok(Compacted {
            action: if whole {
                "wal_checkpoint(TRUNCATE)"
            } else {
                "wal_checkpoint(PASSIVE): a reader holds the rest of the WAL"
            }
            .to_owned(),
            reusable_bytes: Some(free.max(0) as u64),
            wal_bytes_freed: Some(before.saturating_sub(size(&wal))),
        })
    }

    /// Runs `f` in one read transaction, for a consistent view across statements.
    fn read<T>(&self, f: impl FnOnce(&Transaction<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(backend)?;
        let out = f(&tx)?;
        tx.finish().map_err(backend)?;
        Ok(out)
    }
}

impl BoardReads for SqliteStore {
    fn get(&self, id: &TaskId) -> StoreResult<Task> {
        get_task(&self.conn(), id)
    }

    /// A whole listing is read on two threads (`pipeline`); a page on this one.
    fn for_each_task(&self, filter: &TaskFilter, visit: &mut dyn FnMut(Task) -> Visit) -> StoreResult<()> {
        match reads::whole_listing(filter) {
            Some((sql, params)) => pipeline::for_each(&mut self.conn(), &sql, &params, visit),
            None => self.read(|tx| reads::for_each_task(tx, filter, visit)),
        }
    }

    fn parents(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        let conn = self.conn();
        Self::require_task(&conn, id)?;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id IN (SELECT parent_id FROM task_links WHERE child_id = ?1)
             ORDER BY created_at, rowid"
        );
        query_tasks(&conn, &sql, [id.as_str()])
    }

    fn children(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        let conn = self.conn();
        Self::require_task(&conn, id)?;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id IN (SELECT child_id FROM task_links WHERE parent_id = ?1)
             ORDER BY created_at, rowid"
        );
        query_tasks(&conn, &sql, [id.as_str()])
    }

    fn facts(&self, id: &TaskId) -> StoreResult<TaskFacts> {
        self.read(|tx| facts(tx, id))
    }

    fn comments(&self, id: &TaskId) -> StoreResult<Vec<Comment>> {
        self.read(|tx| {
            Self::require_task(tx, id)?;
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {COMMENT_COLUMNS} FROM task_comments WHERE task_id = ?1 ORDER BY id"
                ))
                .map_err(backend)?;
            let rows = stmt.query_map([id.as_str()], comment_from_row).map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
        })
    }

    fn runs(&self, id: &TaskId) -> StoreResult<Vec<Run>> {
        self.read(|tx| {
            Self::require_task(tx, id)?;
            let sql = format!("SELECT {RUN_COLUMNS} FROM task_runs WHERE task_id = ?1 ORDER BY id");
            let mut stmt = tx.prepare_cached(&sql).map_err(backend)?;
            let rows = stmt.query_map([id.as_str()], run_from_row).map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
        })
    }

    fn for_each_event(&self, filter: &EventFilter, visit: &mut dyn FnMut(Event) -> Visit) -> StoreResult<()> {
        self.read(|tx| reads::for_each_event(tx, filter, visit))
    }

    fn count_events(&self, filter: &EventFilter) -> StoreResult<u64> {
        self.read(|tx| reads::count_events(tx, filter))
    }
}

impl BoardWrites for SqliteStore {
    fn create_or_find(&self, request: &graph::NewTask, now: Timestamp) -> StoreResult<Creation> {
        self.write(|tx| {
            if let Some(key) = &request.idempotency_key {
                let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE idempotency_key = ?1");
                if let Some(t) = query_tasks(tx, &sql, [key])?.pop() {
                    return Ok(Creation::Exists(t));
                }
            }
            let parents = request
                .parents
                .iter()
                .map(|p| get_task(tx, p))
                .collect::<StoreResult<Vec<_>>>()?;
            let id = unused_task_id(tx, &[])?;
            let created = graph::create(request, id, &parents, now)?;
            insert_created(tx, &created, now)?;
            Ok(Creation::Created(created.task))
        })
    }

    fn transition(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task> {
        self.write(|tx| transition_in(tx, id, request, now))
    }

    fn transition_each(&self, requests: &[(TaskId, Request)], now: Timestamp) -> StoreResult<Transitions> {
        self.write(|tx| transitions_in(tx, requests, now))
    }

    fn link(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| link(tx, parent, child, now))
    }

    fn unlink(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| {
            get_task(tx, parent)?;
            get_task(tx, child)?;
            let removed = tx
                .prepare_cached("DELETE FROM task_links WHERE parent_id = ?1 AND child_id = ?2")
                .and_then(|mut s| s.execute([parent.as_str(), child.as_str()]))
                .map_err(backend)?;
            let f = facts(tx, child)?;
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
            // Read under the write lock: a run that ends meanwhile ends before or after.
            comment::admit(&get_task(tx, id)?, author, body, guard)?;
            tx.prepare_cached(
                "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![id.as_str(), author, body, now]))
            .map_err(backend)?;
            let comment_id = tx.last_insert_rowid();
            insert_events(tx, id, &[comment::event(comment_id, author, guard)], now)?;
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

impl DispatchQueue for SqliteStore {
    fn promote_ready(&self, now: Timestamp) -> StoreResult<Vec<TaskId>> {
        self.write(|tx| {
            let candidates = query_ids(tx, PROMOTABLE, [])?;
            let mut promoted = Vec::new();
            for id in candidates {
                if promote(tx, &id, now)? {
                    promoted.push(id);
                }
            }
            Ok(promoted)
        })
    }

    fn promotable(&self) -> StoreResult<Vec<TaskId>> {
        query_ids(&self.conn(), PROMOTABLE, [])
    }

    fn due_scheduled(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<TaskId>> {
        reads::due_scheduled(&self.conn(), now, limit)
    }

    fn next_scheduled(&self, after: Timestamp) -> StoreResult<Option<Timestamp>> {
        reads::next_scheduled(&self.conn(), after)
    }

    fn claimable_except(&self, limit: usize, external: &[String]) -> StoreResult<Vec<Task>> {
        if external.is_empty() {
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE status = 'ready' ORDER BY priority DESC, created_at, rowid LIMIT ?1"
            );
            return query_tasks(&self.conn(), &sql, [limit as i64]);
        }
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status = 'ready'
             AND coalesce(assignee, '') NOT IN (SELECT value FROM json_each(?2))
             ORDER BY priority DESC, created_at, rowid LIMIT ?1"
        );
        let external = serde_json::to_string(external).map_err(|e| StoreError::Backend(e.to_string()))?;
        query_tasks(&self.conn(), &sql, params![limit as i64, external])
    }

    fn checkable(&self, limit: usize) -> StoreResult<Vec<Task>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status IN ('verifying', 'review')
             ORDER BY priority DESC, created_at, rowid LIMIT ?1"
        );
        query_tasks(&self.conn(), &sql, [limit as i64])
    }

    fn expired_leases(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status = 'running' AND claim_expires <= ?1
             ORDER BY claim_expires, id LIMIT ?2"
        );
        query_tasks(&self.conn(), &sql, params![now, limit as i64])
    }

    fn running(&self) -> StoreResult<Vec<Task>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status = 'running' ORDER BY priority DESC, created_at, rowid"
        );
        query_tasks(&self.conn(), &sql, [])
    }

    /// One transaction, one commit for the tick's claims: each offered task still waiting
    /// is claimed in the offers' order (the write lock is held throughout, so no other
    /// claimer takes one meanwhile); a task that cannot be claimed now is passed over, and
    /// any other failure claims none.
    fn claim_ready(
        &self,
        offers: &[Offer],
        ttl: i64,
        host: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Vec<Claim>> {
        self.write(|tx| claim_offers(tx, offers, ttl, host, now))
    }
}

impl TriageQueue for SqliteStore {
    fn due_triage(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        // An index range of the triage cards, the due ones sorted: a card is due at its
        // retry time, or at its creation when it never failed, and the oldest due comes
        // first, so fresh cards never hold back a retry.
        let sql = format!(
            concat!(
                "SELECT {columns} FROM tasks t
                 WHERE t.status = 'triage' AND t.decompose_parked = 0
                   AND (t.decompose_next_attempt_at IS NULL OR t.decompose_next_attempt_at <= ?1)
                   AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = t.id)
                   AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id AND e.kind = ",
                board_core::decomposed_event_sql!(),
                ")
                   AND NOT EXISTS (SELECT 1 FROM decomposition_leases l WHERE l.task_id = t.id AND l.expires > ?1)
                 ORDER BY COALESCE(t.decompose_next_attempt_at, t.created_at), t.created_at, t.rowid LIMIT ?2"
            ),
            columns = TASK_COLUMNS
        );
        query_tasks(&self.conn(), &sql, params![now, limit as i64])
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

    fn lease_decomposition(
        &self,
        id: &TaskId,
        holder: &str,
        ttl: i64,
        now: Timestamp,
        abandoned: Option<&str>,
    ) -> StoreResult<DecompositionLease> {
        self.write(|tx| leases::lease(tx, id, holder, ttl, now, abandoned))
    }

    fn release_decomposition(&self, id: &TaskId, holder: &str) -> StoreResult<()> {
        self.write(|tx| leases::release(tx, id, holder))
    }

    fn triage_leases(&self, limit: usize) -> StoreResult<Vec<TriageLease>> {
        leases::on_triage(&self.conn(), limit)
    }
}

impl LlmLedger for SqliteStore {
    fn record_llm_call(&self, c: &LlmCall) -> StoreResult<i64> {
        self.write(|tx| {
            tx.prepare_cached(&INSERT_LLM_CALL)
                .and_then(|mut s| with_params(c, &[], |params| s.execute(params)))
                .map_err(backend)?;
            Ok(tx.last_insert_rowid())
        })
    }

    fn finish_llm_call(&self, id: i64, c: &LlmCall) -> StoreResult<bool> {
        self.write(|tx| {
            let changed = tx
                .prepare_cached(&FINISH_LLM_CALL)
                .and_then(|mut s| with_params(c, &[&id], |params| s.execute(params)))
                .map_err(backend)?;
            Ok(changed == 1)
        })
    }

    fn llm_calls(&self, task_id: Option<&TaskId>) -> StoreResult<Vec<LlmCall>> {
        let conn = self.conn();
        let sql =
            format!("SELECT {LLM_CALL_COLUMNS} FROM llm_calls WHERE ?1 IS NULL OR task_id = ?1 ORDER BY id");
        let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
        let rows = stmt
            .query_map([task_id.map(TaskId::as_str)], llm_call_from_row)
            .map_err(backend)?;
        rows.collect::<Result<_, _>>().map_err(backend)
    }

    fn spend(&self, since: Timestamp) -> StoreResult<Spend> {
        self.read(|tx| cost::spend(tx, since))
    }

    fn breaker(&self) -> StoreResult<Breaker> {
        self.read(|tx| cost::breaker(tx))
    }

    fn signal_breaker(
        &self,
        signal: &BreakerSignal,
        settings: &BreakerSettings,
        now: Timestamp,
    ) -> StoreResult<(Breaker, Option<EventKind>)> {
        self.write(|tx| cost::signal_breaker(tx, signal, settings, now))
    }

    fn daily_spend(&self, since: Timestamp) -> StoreResult<Vec<DaySpend>> {
        reads::daily_spend(&self.conn(), since)
    }
}

impl BoardStats for SqliteStore {
    fn verdicts(&self) -> StoreResult<BTreeMap<String, u64>> {
        reads::verdicts(&self.conn())
    }

    fn tally(&self) -> StoreResult<Tally> {
        self.read(|tx| {
            let counts = |sql: &str| -> StoreResult<BTreeMap<String, u64>> {
                let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
                    .map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)
            };
            let (prompt_tokens, completion_tokens) = tx
                .query_row(
                    "SELECT COALESCE(SUM(MAX(prompt_tokens, 0)), 0), COALESCE(SUM(MAX(completion_tokens, 0)), 0)
                     FROM llm_calls",
                    [],
                    |r| Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get::<_, i64>(1)?.max(0) as u64)),
                )
                .map_err(backend)?;
            Ok(Tally {
                tasks: counts("SELECT status, COUNT(*) FROM tasks GROUP BY status")?,
                runs: counts("SELECT outcome, COUNT(*) FROM task_runs WHERE outcome IS NOT NULL GROUP BY outcome")?,
                llm_calls: counts("SELECT outcome, COUNT(*) FROM llm_calls GROUP BY outcome")?,
                prompt_tokens,
                completion_tokens,
                // Read through the partial index task_events_decompositions, whose WHERE
                // this repeats (board_core::DECOMPOSITION_EVENTS).
                decompositions: counts(concat!(
                    "SELECT kind, COUNT(*) FROM task_events WHERE kind IN (",
                    board_core::decomposition_events_sql!(),
                    ") GROUP BY kind",
                ))?,
            })
        })
    }

    fn status_counts(&self) -> StoreResult<Vec<StatusCount>> {
        reads::status_counts(&self.conn())
    }

    fn oldest(&self, status: Status) -> StoreResult<Option<Task>> {
        reads::oldest(&self.conn(), status)
    }

    fn finished(&self, since: Timestamp, slot: i64, bounds: &[i64]) -> StoreResult<Vec<Finished>> {
        self.read(|tx| reads::finished(tx, since, slot, bounds))
    }

    fn snapshot(&self) -> StoreResult<BoardSnapshot> {
        self.read(|tx| {
            let tasks = query_tasks(tx, &format!("SELECT {TASK_COLUMNS} FROM tasks ORDER BY id"), [])?;
            let collect = |sql: String| -> StoreResult<Vec<Run>> {
                let mut stmt = tx.prepare(&sql).map_err(backend)?;
                let rows = stmt.query_map([], run_from_row).map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)
            };
            let runs = collect(format!("SELECT {RUN_COLUMNS} FROM task_runs ORDER BY id"))?;
            let links = {
                let mut stmt = tx
                    .prepare("SELECT parent_id, child_id FROM task_links ORDER BY parent_id, child_id")
                    .map_err(backend)?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok(Link {
                            parent_id: r.get::<_, Word<TaskId>>(0)?.0,
                            child_id: r.get::<_, Word<TaskId>>(1)?.0,
                        })
                    })
                    .map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)?
            };
            let events = {
                let mut stmt = tx
                    .prepare(&format!("SELECT {EVENT_COLUMNS} FROM task_events ORDER BY id"))
                    .map_err(backend)?;
                let rows = stmt.query_map([], event_from_row).map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)?
            };
            Ok(BoardSnapshot {
                tasks,
                runs,
                links,
                events,
            })
        })
    }
}

impl BoardImport for SqliteStore {
    fn import(&self, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome> {
        self.write(|tx| import::import(tx, batch, now))
    }
}

/// Copies what it can of the WAL into the file without holding any writer back; whether
/// it copied the whole log (no reader held part of it).
fn passive_checkpoint(conn: &Connection) -> StoreResult<bool> {
    let (log, copied): (i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })
        .map_err(backend)?;
    Ok(log >= 0 && copied == log)
}
