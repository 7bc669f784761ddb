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
//! - Events take the board's event lock at commit (see `Tx::commit`), so event ids
//!   appear in commit order.
//!
//! A deadlock among these (rare: locks go parent before child, ids in order) rolls the
//! attempt back, and `PgStore::write` runs it again.

use board_core::graph;
use board_core::plan::{self, Mode, Plan, PlanBasis, PlanSettings};
use board_core::store::{Committed, EventFilter, NewLlmCall, StoreResult, TaskFilter};
use board_core::transition::{decide, Change, Fresh, NewEvent, TaskFacts};
use board_core::{
    BoardSnapshot, Comment, Event, Link, LlmCall, Refusal, Request, Run, Store, StoreError, Task, TaskId,
    Timestamp,
};
use postgres::types::ToSql;
use postgres::Row;

use crate::rows::{
    self, comment_columns, event_columns, llm_call_columns, run_columns, task_columns, task_placeholders,
};
use crate::tx::{Params, Tx};
use crate::{random_bytes, LockClass, PgStore};

const GET_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1");
/// The lock of a write that decides on the task.
const LOCK_TASK: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE id = $1 FOR NO KEY UPDATE"
);
/// The lock of a write that relies on the task's status staying as read.
const SHARE_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1 FOR SHARE");

fn no_such(id: &TaskId) -> StoreError {
    Refusal::NoSuchTask(id.clone()).into()
}

fn task_by(tx: &mut Tx<'_>, sql: &'static str, id: &TaskId) -> StoreResult<Task> {
    match tx.query_opt(sql, &[&id.as_str()])? {
        Some(row) => rows::task(&row),
        None => Err(no_such(id)),
    }
}

fn tasks(tx: &mut Tx<'_>, sql: &'static str, params: Params<'_>) -> StoreResult<Vec<Task>> {
    tx.query(sql, params)?.iter().map(rows::task).collect()
}

fn all<T>(rows: Vec<Row>, map: fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(map).collect()
}

/// The facts of `task`, read after its row (locked by a writer).
fn facts_of(tx: &mut Tx<'_>, task: Task) -> StoreResult<TaskFacts> {
    let id = task.id.as_str();
    let newest_run = tx
        .query_opt(
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM task_runs WHERE task_id = $1 ORDER BY id DESC LIMIT 1"
            ),
            &[&id],
        )?
        .map(|r| rows::run(&r))
        .transpose()?;
    let counts = tx.query_one(
        "SELECT (SELECT count(*) FROM task_runs WHERE task_id = $1),
                (SELECT count(*) FROM task_links l JOIN tasks p ON p.id = l.parent_id
                  WHERE l.child_id = $1 AND p.status NOT IN ('done', 'archived')),
                EXISTS (SELECT 1 FROM task_events WHERE task_id = $1 AND kind = 'decomposed')",
        &[&id],
    )?;
    let read = |i: usize| counts.try_get::<_, i64>(i).map_err(crate::backend);
    Ok(TaskFacts {
        run_count: read(0)?,
        open_parents: read(1)?,
        decomposed: counts.try_get(2).map_err(crate::backend)?,
        newest_run,
        task,
    })
}

/// Locks the task, then reads its facts.
fn locked_facts(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<TaskFacts> {
    let task = task_by(tx, LOCK_TASK, id)?;
    facts_of(tx, task)
}

fn new_claim_lock() -> StoreResult<String> {
    Ok(random_bytes::<16>()?.iter().map(|b| format!("{b:02x}")).collect())
}

fn next_run_id(tx: &mut Tx<'_>) -> StoreResult<i64> {
    let row = tx.query_one("SELECT nextval('task_runs_id_seq')", &[])?;
    row.try_get(0).map_err(crate::backend)
}

/// A task id not yet on the board (random; a clash with a concurrent insert is a
/// unique violation, and the write is retried).
fn unused_task_id(tx: &mut Tx<'_>, also_taken: &[TaskId]) -> StoreResult<TaskId> {
    for _ in 0..64 {
        let id = TaskId::from_random(random_bytes::<4>()?);
        let taken: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1)",
                &[&id.as_str()],
            )?
            .try_get(0)
            .map_err(crate::backend)?;
        if !taken && !also_taken.contains(&id) {
            return Ok(id);
        }
    }
    Err(StoreError::Backend("could not draw an unused task id".into()))
}

/// Calls `f` with the task's columns as parameters `$1..$28`, in `task_columns!()`
/// order, followed by `extra`.
fn with_task_params<T>(t: &Task, extra: Params<'_>, f: impl FnOnce(Params<'_>) -> T) -> T {
    let (id, status, block_kind) = (t.id.as_str(), t.status.as_str(), t.block_kind.map(|k| k.as_str()));
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &id,
        &t.title,
        &t.body,
        &t.assignee,
        &status,
        &t.priority,
        &t.created_by,
        &t.created_at,
        &t.updated_at,
        &t.started_at,
        &t.completed_at,
        &t.result,
        &t.current_run_id,
        &t.claim_lock,
        &t.claim_expires,
        &t.worker_pid,
        &t.last_heartbeat_at,
        &block_kind,
        &t.block_recurrences,
        &t.consecutive_failures,
        &t.last_failure_error,
        &t.max_runtime_seconds,
        &t.idempotency_key,
        &t.revision,
        &t.decompose_failures,
        &t.decompose_next_attempt_at,
        &t.decompose_parked,
        &t.decompose_last_error,
    ];
    params.extend_from_slice(extra);
    f(&params)
}

fn insert_task(tx: &mut Tx<'_>, t: &Task) -> StoreResult<()> {
    let sql = concat!(
        "INSERT INTO tasks (",
        task_columns!(),
        ") VALUES (",
        task_placeholders!(),
        ")"
    );
    with_task_params(t, &[], |params| tx.execute(sql, params))?;
    Ok(())
}

/// Writes the task's new row only if its claim is still the one the decision was
/// based on.
fn update_task(tx: &mut Tx<'_>, old: &Task, t: &Task) -> StoreResult<()> {
    // Single winner: the row changes only if status, run and claim are as read. The id
    // is written unchanged, which PostgreSQL does not count as a key update.
    let sql = concat!(
        "UPDATE tasks SET (",
        task_columns!(),
        ") = ROW(",
        task_placeholders!(),
        ")
         WHERE id = $1 AND status = $29 AND current_run_id IS NOT DISTINCT FROM $30
           AND claim_lock IS NOT DISTINCT FROM $31"
    );
    let guard: Params<'_> = &[&old.status.as_str(), &old.current_run_id, &old.claim_lock];
    let changed = with_task_params(t, guard, |params| tx.execute(sql, params))?;
    if changed == 1 {
        Ok(())
    } else {
        Err(Refusal::ClaimChanged {
            id: t.id.clone(),
            run_id: old.current_run_id.unwrap_or_default(),
        }
        .into())
    }
}

fn upsert_run(tx: &mut Tx<'_>, r: &Run) -> StoreResult<()> {
    tx.execute(
        concat!(
            "INSERT INTO task_runs (",
            run_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, outcome = excluded.outcome,
                claim_lock = excluded.claim_lock, claim_expires = excluded.claim_expires,
                worker_pid = excluded.worker_pid, last_heartbeat_at = excluded.last_heartbeat_at,
                ended_at = excluded.ended_at, summary = excluded.summary, error = excluded.error,
                metadata = excluded.metadata
             WHERE task_runs.task_id = excluded.task_id"
        ),
        &[
            &r.id,
            &r.task_id.as_str(),
            &r.profile,
            &r.status,
            &r.outcome.map(|o| o.as_str()),
            &r.claim_lock,
            &r.claim_expires,
            &r.worker_pid,
            &r.last_heartbeat_at,
            &r.started_at,
            &r.ended_at,
            &r.summary,
            &r.error,
            &r.metadata.as_ref().map(|m| m.to_string()),
        ],
    )?;
    Ok(())
}

/// Applies a decided change, then promotes the children it released.
fn apply(tx: &mut Tx<'_>, old: &Task, change: &Change, now: Timestamp) -> StoreResult<()> {
    update_task(tx, old, &change.task)?;
    for run in &change.runs {
        upsert_run(tx, run)?;
    }
    tx.push_events(&change.task.id, &change.events, now);
    if change.wake_children {
        // Locked before their facts are read: see the module doc.
        let waiting = tx.query(
            "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id
             WHERE l.parent_id = $1 AND c.status = 'todo' ORDER BY c.id FOR NO KEY UPDATE OF c",
            &[&change.task.id.as_str()],
        )?;
        for child in all(waiting, rows::task_id)? {
            promote(tx, &child, now)?;
        }
    }
    Ok(())
}

/// Promotes one task (locked) when the core agrees; returns whether it did.
fn promote(tx: &mut Tx<'_>, id: &TaskId, now: Timestamp) -> StoreResult<bool> {
    let f = locked_facts(tx, id)?;
    match decide(&f, &Request::Promote, &Fresh::default(), now) {
        Ok(change) => {
            apply(tx, &f.task, &change, now)?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

fn insert_links(tx: &mut Tx<'_>, links: &[Link]) -> StoreResult<()> {
    for l in links {
        tx.execute(
            "INSERT INTO task_links (parent_id, child_id) VALUES ($1, $2)",
            &[&l.parent_id.as_str(), &l.child_id.as_str()],
        )?;
    }
    Ok(())
}

fn insert_created(tx: &mut Tx<'_>, created: &graph::Created, now: Timestamp) -> StoreResult<()> {
    insert_task(tx, &created.task)?;
    insert_links(tx, &created.links)?;
    tx.push_events(&created.task.id, &created.events, now);
    Ok(())
}

fn require_task(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<()> {
    task_by(tx, GET_TASK, id).map(|_| ())
}

/// One statement per shape of filter, so that a status filter is an index range of
/// tasks_by_status rather than a scan of the whole board.
macro_rules! list_sql {
    ($status:literal, $assignee:literal) => {
        concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE ",
            $status,
            " AND ",
            $assignee,
            " ORDER BY priority DESC, created_at, seq LIMIT $3"
        )
    };
}

fn list_statement(filter: &TaskFilter) -> &'static str {
    match (
        filter.status.is_some(),
        filter.include_archived,
        filter.assignee.is_some(),
    ) {
        (true, _, true) => list_sql!("status = $1", "assignee = $2"),
        (true, _, false) => list_sql!("status = $1", "$2::text IS NULL"),
        (false, true, true) => list_sql!("$1::text IS NULL", "assignee = $2"),
        (false, true, false) => list_sql!("$1::text IS NULL", "$2::text IS NULL"),
        (false, false, true) => list_sql!("$1::text IS NULL AND status <> 'archived'", "assignee = $2"),
        (false, false, false) => list_sql!("$1::text IS NULL AND status <> 'archived'", "$2::text IS NULL"),
    }
}

fn limit(n: Option<usize>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

impl Store for PgStore {
    fn create(&self, request: &graph::NewTask, now: Timestamp) -> StoreResult<Task> {
        self.write(|tx| {
            if let Some(key) = &request.idempotency_key {
                let by_key = concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM tasks WHERE idempotency_key = $1"
                );
                if let Some(row) = tx.query_opt(by_key, &[key])? {
                    return rows::task(&row);
                }
            }
            let mut parents = Vec::with_capacity(request.parents.len());
            for p in &request.parents {
                parents.push(task_by(tx, SHARE_TASK, p)?);
            }
            let id = unused_task_id(tx, &[])?;
            let created = graph::create(request, id, &parents, now)?;
            insert_created(tx, &created, now)?;
            Ok(created.task)
        })
    }

    fn get(&self, id: &TaskId) -> StoreResult<Task> {
        self.read(|tx| task_by(tx, GET_TASK, id))
    }

    fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<Task>> {
        let status = filter.status.map(|s| s.as_str());
        let params: Params<'_> = &[&status, &filter.assignee, &limit(filter.limit)];
        self.read(|tx| tasks(tx, list_statement(filter), params))
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

    fn transition(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task> {
        self.write(|tx| {
            let f = locked_facts(tx, id)?;
            let fresh = if request.opens_run() {
                Fresh {
                    run_id: next_run_id(tx)?,
                    claim_lock: new_claim_lock()?,
                }
            } else {
                Fresh::default()
            };
            let change = decide(&f, request, &fresh, now)?;
            apply(tx, &f.task, &change, now)?;
            Ok(change.task)
        })
    }

    fn link(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        self.write(|tx| {
            let (class, key) = self.lock_key(LockClass::Links);
            tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&class, &key])?;
            let p = task_by(tx, SHARE_TASK, parent)?;
            let f = locked_facts(tx, child)?;
            let found = tx.query_one(
                "WITH RECURSIVE down(id) AS (
                    SELECT $2::text COLLATE \"C\" UNION SELECT l.child_id FROM task_links l JOIN down d ON l.parent_id = d.id
                 )
                 SELECT EXISTS (SELECT 1 FROM task_links WHERE parent_id = $1 AND child_id = $2),
                        $1 <> $2 AND EXISTS (SELECT 1 FROM down WHERE id = $1)",
                &[&parent.as_str(), &child.as_str()],
            )?;
            let exists: bool = found.try_get(0).map_err(crate::backend)?;
            let cycle: bool = found.try_get(1).map_err(crate::backend)?;
            let change = graph::link(&p, &f, cycle, exists, now)?;
            // No cycle: the core refused any link that would close one.
            insert_links(
                tx,
                &[Link {
                    parent_id: parent.clone(),
                    child_id: child.clone(),
                }],
            )?;
            apply(tx, &f.task, &change, now)
        })
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

    fn comment(&self, id: &TaskId, author: Option<&str>, body: &str, now: Timestamp) -> StoreResult<Comment> {
        self.write(|tx| {
            require_task(tx, id)?;
            if body.trim().is_empty() {
                return Err(Refusal::Invalid("a comment cannot be blank".into()).into());
            }
            let row = tx.query_one(
                "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ($1, $2, $3, $4)
                 RETURNING id",
                &[&id.as_str(), &author, &body, &now],
            )?;
            let comment_id: i64 = row.try_get(0).map_err(crate::backend)?;
            let event = NewEvent::new(
                "commented",
                None,
                serde_json::json!({ "comment_id": comment_id, "author": author }),
            );
            tx.push_events(id, &[event], now);
            Ok(Comment {
                id: comment_id,
                task_id: id.clone(),
                author: author.map(str::to_owned),
                body: body.to_owned(),
                created_at: now,
            })
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

    fn events(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        let limit = limit(filter.limit);
        self.read(|tx| {
            let found = match &filter.task_id {
                Some(id) => {
                    require_task(tx, id)?;
                    let sql = concat!(
                        "SELECT ",
                        event_columns!(),
                        " FROM task_events WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3"
                    );
                    tx.query(sql, &[&id.as_str(), &filter.after_id, &limit])?
                }
                None => {
                    let sql = concat!(
                        "SELECT ",
                        event_columns!(),
                        " FROM task_events WHERE id > $1 ORDER BY id LIMIT $2"
                    );
                    tx.query(sql, &[&filter.after_id, &limit])?
                }
            };
            all(found, rows::event)
        })
    }

    fn promote_ready(&self, now: Timestamp) -> StoreResult<Vec<TaskId>> {
        self.write(|tx| {
            // Locked in id order, as wake-ups lock children; promoted in claim order.
            let candidates = tx.query(
                "SELECT t.id, t.priority, t.created_at, t.seq FROM tasks t
                 WHERE t.status = 'todo' AND NOT EXISTS (
                    SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id
                    WHERE l.child_id = t.id AND p.status NOT IN ('done', 'archived'))
                 ORDER BY t.id FOR NO KEY UPDATE OF t",
                &[],
            )?;
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

    fn claimable(&self, limit: usize) -> StoreResult<Vec<Task>> {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE status = 'ready' ORDER BY priority DESC, created_at, seq LIMIT $1"
        );
        let limit = self::limit(Some(limit));
        self.read(|tx| tasks(tx, sql, &[&limit]))
    }

    fn expired_leases(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE status = 'running' AND claim_expires <= $1 ORDER BY claim_expires, id LIMIT $2"
        );
        let limit = self::limit(Some(limit));
        self.read(|tx| tasks(tx, sql, &[&now, &limit]))
    }

    fn running(&self) -> StoreResult<Vec<Task>> {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE status = 'running' ORDER BY priority DESC, created_at, seq"
        );
        self.read(|tx| tasks(tx, sql, &[]))
    }

    fn due_triage(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        // Served by tasks_triage_due: cooling cards cost an index range, parked ones nothing.
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks t
             WHERE t.status = 'triage' AND NOT t.decompose_parked
               AND (t.decompose_next_attempt_at IS NULL OR t.decompose_next_attempt_at <= $1)
               AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = t.id)
               AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id AND e.kind = 'decomposed')
             ORDER BY COALESCE(t.decompose_next_attempt_at, 0), t.created_at, t.seq LIMIT $2"
        );
        let limit = self::limit(Some(limit));
        self.read(|tx| tasks(tx, sql, &[&now, &limit]))
    }

    fn commit_plan(
        &self,
        id: &TaskId,
        basis: PlanBasis,
        mode: Mode,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed> {
        self.write(|tx| {
            let f = locked_facts(tx, id)?;
            let count = match plan {
                Plan::Fanout { tasks, .. }
                    if tasks.len() <= settings.max_children.min(plan::MAX_CHILDREN_CEILING) =>
                {
                    tasks.len()
                }
                _ => 0,
            };
            let mut child_ids = Vec::with_capacity(count);
            for _ in 0..count {
                let fresh = unused_task_id(tx, &child_ids)?;
                child_ids.push(fresh);
            }
            let commit = plan::commit_plan(&f, basis, mode, plan, settings, &child_ids, now)?;
            for child in &commit.children {
                insert_created(tx, child, now)?;
            }
            insert_links(tx, &commit.links)?;
            apply(tx, &f.task, &commit.root, now)?;
            Ok(Committed {
                root: commit.root.task,
                child_ids,
            })
        })
    }

    fn record_llm_call(&self, c: &NewLlmCall) -> StoreResult<i64> {
        self.write(|tx| {
            let row = tx.query_one(
                "INSERT INTO llm_calls (task_id, purpose, model, started_at, duration_ms, outcome,
                    http_status, prompt_tokens, completion_tokens, error)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                &[
                    &c.task_id.as_ref().map(TaskId::as_str),
                    &c.purpose,
                    &c.model,
                    &c.started_at,
                    &c.duration_ms,
                    &c.outcome,
                    &c.http_status,
                    &c.prompt_tokens,
                    &c.completion_tokens,
                    &c.error,
                ],
            )?;
            row.try_get(0).map_err(crate::backend)
        })
    }

    fn llm_calls(&self, task_id: Option<&TaskId>) -> StoreResult<Vec<LlmCall>> {
        self.read(|tx| {
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
