//! The pieces every write is made of: tasks read (and locked) by id, their facts, the
//! compare-and-set write of a task row, run upserts, new tasks and links, and the
//! promotion of the children a change releases. The locking rules they follow are in
//! `store.rs`.

use std::sync::LazyLock;

use board_core::graph;
use board_core::row::Stored;
use board_core::store::{guarded_update, update_guard, Claim};
use board_core::transition::{decide, Change, Fresh, TaskFacts};
use board_core::{Link, Offer, Refusal, Request, Run, StoreError, StoreResult, Task, TaskId, Timestamp};
use postgres::Row;

use crate::random_bytes;
use crate::rows::{self, run_columns, task_columns, task_placeholders, with_params};
use crate::tx::{Params, Tx};

pub(crate) const GET_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1");
/// The lock of a write that decides on the task.
pub(crate) const LOCK_TASK: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE id = $1 FOR NO KEY UPDATE"
);
/// The lock of a write that relies on the task's status staying as read.
pub(crate) const SHARE_TASK: &str =
    concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = $1 FOR SHARE");

pub(crate) fn no_such(id: &TaskId) -> StoreError {
    Refusal::NoSuchTask(id.clone()).into()
}

pub(crate) fn task_by(tx: &mut Tx<'_>, sql: &'static str, id: &TaskId) -> StoreResult<Task> {
    match tx.query_opt(sql, &[&id.as_str()])? {
        Some(row) => rows::task(&row),
        None => Err(no_such(id)),
    }
}

pub(crate) fn tasks(tx: &mut Tx<'_>, sql: &'static str, params: Params<'_>) -> StoreResult<Vec<Task>> {
    tx.query(sql, params)?.iter().map(rows::task).collect()
}

pub(crate) fn all<T>(rows: Vec<Row>, map: fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(map).collect()
}

/// `todo` tasks none of whose parents is still open, in claim order: what a promotion
/// sweep would promote.
pub(crate) const PROMOTABLE: &str = concat!(
    "SELECT t.id FROM tasks t WHERE t.status = 'todo' AND NOT EXISTS (
     SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id
     WHERE l.child_id = t.id AND p.status NOT IN (",
    board_core::releasing_statuses_sql!(),
    "))
     ORDER BY t.priority DESC, t.created_at, t.seq"
);

/// The same tasks, locked in id order (as wake-ups lock children) for a promotion sweep.
pub(crate) const PROMOTION_CANDIDATES: &str = concat!(
    "SELECT t.id, t.priority, t.created_at, t.seq FROM tasks t
     WHERE t.status = 'todo' AND NOT EXISTS (
     SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id
     WHERE l.child_id = t.id AND p.status NOT IN (",
    board_core::releasing_statuses_sql!(),
    "))
     ORDER BY t.id FOR NO KEY UPDATE OF t"
);

/// The statement reading a task's facts, with `$extra` (`""`, or more columns).
macro_rules! facts_sql {
    ($extra:literal) => {
        concat!(
            "SELECT (SELECT count(*) FROM task_runs WHERE task_id = $1) AS run_count,
                    (SELECT count(*) FROM task_links l JOIN tasks p ON p.id = l.parent_id
                      WHERE l.child_id = $1 AND p.status NOT IN (",
            board_core::releasing_statuses_sql!(),
            ")) AS open_parents,
                    EXISTS (SELECT 1 FROM task_events WHERE task_id = $1 AND kind = ",
            board_core::decomposed_event_sql!(),
            ") AS decomposed",
            $extra,
            ", newest.*
             FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT ",
            run_columns!(),
            " FROM task_runs WHERE task_id = $1 ORDER BY id DESC LIMIT 1) AS newest ON TRUE"
        )
    };
}

/// The facts of `task`, read (in one statement) after its row was read, and locked by a
/// writer.
pub(crate) fn facts_of(tx: &mut Tx<'_>, task: Task) -> StoreResult<TaskFacts> {
    let row = tx.query_one(facts_sql!(""), &[&task.id.as_str()])?;
    facts_from(&row, task)
}

/// The facts of `task` (as [`facts_of`]) and, in the same round trip, a fresh run id and
/// claim lock, for a request that may open a run.
pub(crate) fn facts_and_fresh(tx: &mut Tx<'_>, task: Task) -> StoreResult<(TaskFacts, Fresh)> {
    let row = tx.query_one(
        facts_sql!(", nextval('task_runs_id_seq') AS fresh_run_id"),
        &[&task.id.as_str()],
    )?;
    fresh_of(&row, task)
}

/// The facts of a row read by [`facts_and_fresh`]'s statement, and its fresh ids.
fn fresh_of(row: &Row, task: Task) -> StoreResult<(TaskFacts, Fresh)> {
    let fresh = Fresh {
        run_id: row.try_get("fresh_run_id").map_err(crate::backend)?,
        claim_lock: claim_lock()?,
    };
    Ok((facts_from(row, task)?, fresh))
}

fn facts_from(row: &postgres::Row, task: Task) -> StoreResult<TaskFacts> {
    let has_run = row
        .try_get::<_, Option<i64>>("id")
        .map_err(crate::backend)?
        .is_some();
    Ok(TaskFacts {
        run_count: row.try_get("run_count").map_err(crate::backend)?,
        open_parents: row.try_get("open_parents").map_err(crate::backend)?,
        decomposed: row.try_get("decomposed").map_err(crate::backend)?,
        newest_run: if has_run { Some(rows::run(row)?) } else { None },
        task,
    })
}

/// Locks the task, then reads its facts: two statements, the second run after the lock
/// is taken (so reading what was committed before), sent in one round trip.
pub(crate) fn locked_facts(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<TaskFacts> {
    let (task, facts) = locked_then(tx, facts_sql!(""), id)?;
    facts_from(&facts, task)
}

/// Locks the task, then reads its facts and fresh ids for a run it may open, as
/// [`locked_facts`] does.
pub(crate) fn locked_facts_and_fresh(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<(TaskFacts, Fresh)> {
    let sql = facts_sql!(", nextval('task_runs_id_seq') AS fresh_run_id");
    let (task, facts) = locked_then(tx, sql, id)?;
    fresh_of(&facts, task)
}

/// The task locked by id ([`LOCK_TASK`]) and the one row of `then` on it, run after the
/// lock was taken, in one round trip.
fn locked_then(tx: &mut Tx<'_>, then: &'static str, id: &TaskId) -> StoreResult<(Task, Row)> {
    let params: crate::tx::Params<'_> = &[&id.as_str()];
    let (locked, mut facts) = tx.query_both((LOCK_TASK, params), (then, params))?;
    let task = match locked.first() {
        Some(row) => rows::task(row)?,
        None => return Err(no_such(id)),
    };
    match facts.len() {
        1 => Ok((task, facts.remove(0))),
        n => Err(StoreError::Backend(format!("a task's facts came as {n} rows"))),
    }
}

/// A claim lock: 16 random bytes in hex.
fn claim_lock() -> StoreResult<String> {
    Ok(random_bytes::<16>()?.iter().map(|b| format!("{b:02x}")).collect())
}

/// A task id not yet on the board (random; a clash with a concurrent insert is a
/// unique violation, and the write is retried).
pub(crate) fn unused_task_id(tx: &mut Tx<'_>, also_taken: &[TaskId]) -> StoreResult<TaskId> {
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

pub(crate) fn insert_task(tx: &mut Tx<'_>, t: &Task) -> StoreResult<()> {
    let sql = concat!(
        "INSERT INTO tasks (",
        task_columns!(),
        ") VALUES (",
        task_placeholders!(),
        ")"
    );
    with_params(t, &[], |params| tx.execute(sql, params))?;
    Ok(())
}

/// The guarded update of [`update_task`]: the row, then the status, run and claim lock
/// it was read with.
pub(crate) const UPDATE_TASK: &str = concat!(
    "UPDATE tasks SET (",
    task_columns!(),
    ") = ROW(",
    task_placeholders!(),
    ")
     WHERE id = $1 AND status = $40 AND current_run_id IS NOT DISTINCT FROM $41
       AND claim_lock IS NOT DISTINCT FROM $42"
);

/// Writes the task's new row only if its claim is still the one the decision was
/// based on.
pub(crate) fn update_task(tx: &mut Tx<'_>, old: &Task, t: &Task) -> StoreResult<()> {
    // Single winner: the row changes only if status, run and claim are as read. The id
    // is written unchanged, which PostgreSQL does not count as a key update. The guard's
    // three parameters follow the row's (a test holds their numbers to the column count).
    let (status, run_id, claim_lock) = update_guard(old);
    let guard: Params<'_> = &[&status, &run_id, &claim_lock];
    let changed = with_params(t, guard, |params| tx.execute(UPDATE_TASK, params))?;
    guarded_update(changed, &t.id, run_id)
}

/// What a run's upsert changes when the run is there already.
macro_rules! run_upsert_set {
    () => {
        "ON CONFLICT (id) DO UPDATE SET status = excluded.status, outcome = excluded.outcome,
            claim_lock = excluded.claim_lock, claim_expires = excluded.claim_expires,
            worker_pid = excluded.worker_pid, worker_host = excluded.worker_host,
            last_heartbeat_at = excluded.last_heartbeat_at,
            ended_at = excluded.ended_at, summary = excluded.summary, error = excluded.error,
            metadata = excluded.metadata, checks = excluded.checks, evidence = excluded.evidence
         WHERE task_runs.task_id = excluded.task_id"
    };
}

pub(crate) fn upsert_run(tx: &mut Tx<'_>, r: &Run) -> StoreResult<()> {
    let sql = concat!(
        "INSERT INTO task_runs (",
        run_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) ",
        run_upsert_set!()
    );
    with_params(r, &[], |params| tx.execute(sql, params))?;
    Ok(())
}

/// The `todo` children of task `$1`, locked in id order before their facts are read (see
/// the module doc): those a change that releases its children may promote.
const WAITING_CHILDREN: &str = "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id
     WHERE l.parent_id = $1 AND c.status = 'todo' ORDER BY c.id FOR NO KEY UPDATE OF c";

/// [`UPDATE_TASK`] and the upsert of the change's one run in one statement (one round
/// trip): the run is written only when the task's row was, and the statement says how
/// many task rows it changed. The run's parameters follow the guard's. With `waking`,
/// the same statement locks [`WAITING_CHILDREN`] and returns their ids.
fn update_task_and_run_sql(waking: bool) -> String {
    let first = Task::COLUMNS.len() + 4;
    let run: Vec<String> = (first..first + Run::COLUMNS.len())
        .map(|i| format!("${i}"))
        .collect();
    let (waiting, ids) = match waking {
        true => (
            format!(", waiting AS ({WAITING_CHILDREN})"),
            "ARRAY(SELECT id FROM waiting)",
        ),
        false => (String::new(), "ARRAY[]::text[]"),
    };
    format!(
        "WITH updated AS ({UPDATE_TASK} RETURNING 1),
              run AS (INSERT INTO task_runs ({}) SELECT {} WHERE EXISTS (SELECT 1 FROM updated) {}){waiting}
         SELECT (SELECT count(*) FROM updated), {ids}",
        run_columns!(),
        run.join(", "),
        run_upsert_set!()
    )
}

static UPDATE_TASK_AND_RUN: LazyLock<String> = LazyLock::new(|| update_task_and_run_sql(false));
static UPDATE_TASK_AND_RUN_WAKING: LazyLock<String> = LazyLock::new(|| update_task_and_run_sql(true));

/// [`update_task`] and [`upsert_run`] of `run` in one round trip; with `waking`, the
/// waiting children too, locked, their ids returned.
fn update_task_and_run(
    tx: &mut Tx<'_>,
    (old, t, run): (&Task, &Task, &Run),
    waking: bool,
) -> StoreResult<Vec<TaskId>> {
    let (status, run_id, claim_lock) = update_guard(old);
    let guard: Params<'_> = &[&status, &run_id, &claim_lock];
    let sql: &'static str = match waking {
        true => &UPDATE_TASK_AND_RUN_WAKING,
        false => &UPDATE_TASK_AND_RUN,
    };
    let row = with_params(t, guard, |task| {
        with_params(run, task, |run_after| {
            // `with_params` puts its row first: the run's parameters go after the task's.
            let (run_params, task_params) = run_after.split_at(Run::COLUMNS.len());
            let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                task_params.iter().chain(run_params).copied().collect();
            tx.query_one(sql, &params)
        })
    })?;
    let changed: i64 = row.try_get(0).map_err(crate::backend)?;
    guarded_update(u64::try_from(changed).unwrap_or(0), &t.id, run_id)?;
    let mut waiting: Vec<String> = row.try_get(1).map_err(crate::backend)?;
    waiting.sort_unstable();
    waiting
        .into_iter()
        .map(|id| {
            id.parse()
                .map_err(|e| StoreError::Backend(format!("reading a child's id: {e}")))
        })
        .collect()
}

/// Writes a decided change's task row and runs; when it releases its children, locks
/// those waiting and returns their ids, in id order.
fn write_rows(tx: &mut Tx<'_>, old: &Task, change: &Change) -> StoreResult<Vec<TaskId>> {
    if let [run] = change.runs.as_slice() {
        return update_task_and_run(tx, (old, &change.task, run), change.wake_children);
    }
    update_task(tx, old, &change.task)?;
    for run in &change.runs {
        upsert_run(tx, run)?;
    }
    match change.wake_children {
        true => all(
            tx.query(WAITING_CHILDREN, &[&change.task.id.as_str()])?,
            rows::task_id,
        ),
        false => Ok(Vec::new()),
    }
}

/// Applies a decided change, then promotes the children it released.
pub(crate) fn apply(tx: &mut Tx<'_>, old: &Task, change: &Change, now: Timestamp) -> StoreResult<()> {
    let waiting = write_rows(tx, old, change)?;
    tx.push_events(&change.task.id, &change.events, now);
    if let Some(c) = &change.comment {
        let row = tx.query_one(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id",
            &[&change.task.id.as_str(), &c.author, &c.body, &now],
        )?;
        let comment_id: i64 = row.try_get(0).map_err(crate::backend)?;
        let event = board_core::comment::event(comment_id, c.author.as_deref(), None);
        tx.push_events(&change.task.id, &[event], now);
    }
    for child in waiting {
        promote(tx, &child, now)?;
    }
    if change.hold_children {
        let started = tx.query(
            "SELECT c.id FROM task_links l JOIN tasks c ON c.id = l.child_id
             WHERE l.parent_id = $1 AND c.status IN ('ready', 'running') ORDER BY c.id FOR NO KEY UPDATE OF c",
            &[&change.task.id.as_str()],
        )?;
        let hold = Request::Hold {
            parent: change.task.id.clone(),
        };
        for child in all(started, rows::task_id)? {
            // A refusal (a running child) rolls the whole change back.
            let f = locked_facts(tx, &child)?;
            let held = decide(&f, &hold, &Fresh::default(), now)?;
            apply(tx, &f.task, &held, now)?;
        }
    }
    Ok(())
}

/// Promotes one task (locked) when the core agrees; returns whether it did.
pub(crate) fn promote(tx: &mut Tx<'_>, id: &TaskId, now: Timestamp) -> StoreResult<bool> {
    let f = locked_facts(tx, id)?;
    match decide(&f, &Request::Promote, &Fresh::default(), now) {
        Ok(change) => {
            apply(tx, &f.task, &change, now)?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

pub(crate) fn insert_links(tx: &mut Tx<'_>, links: &[Link]) -> StoreResult<()> {
    for l in links {
        tx.execute(
            "INSERT INTO task_links (parent_id, child_id) VALUES ($1, $2)",
            &[&l.parent_id.as_str(), &l.child_id.as_str()],
        )?;
    }
    Ok(())
}

/// Links `parent -> child` as `link` does, inside the caller's transaction: the board's
/// link lock (`links_lock`) is taken before the cycle check, so two links that would
/// close a cycle together are checked one after the other.
pub(crate) fn link(
    tx: &mut Tx<'_>,
    (class, key): (i32, i32),
    parent: &TaskId,
    child: &TaskId,
    now: Timestamp,
) -> StoreResult<()> {
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
}

pub(crate) fn insert_created(tx: &mut Tx<'_>, created: &graph::Created, now: Timestamp) -> StoreResult<()> {
    insert_task(tx, &created.task)?;
    insert_links(tx, &created.links)?;
    tx.push_events(&created.task.id, &created.events, now);
    Ok(())
}

pub(crate) fn require_task(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<()> {
    task_by(tx, GET_TASK, id).map(|_| ())
}

/// A plan's writes on one PostgreSQL transaction (`board_core::plan::write_plan`), the
/// card locked as the commit reads it.
pub(crate) struct PlanTx<'a, 'c>(pub(crate) &'a mut Tx<'c>);

impl board_core::plan::PlanWrites for PlanTx<'_, '_> {
    fn facts(&mut self, id: &TaskId) -> StoreResult<TaskFacts> {
        locked_facts(self.0, id)
    }

    fn unused_task_id(&mut self, drawn: &[TaskId]) -> StoreResult<TaskId> {
        unused_task_id(self.0, drawn)
    }

    fn insert_created(&mut self, child: graph::Created, now: Timestamp) -> StoreResult<()> {
        insert_created(self.0, &child, now)
    }

    fn insert_links(&mut self, links: Vec<Link>) -> StoreResult<()> {
        insert_links(self.0, &links)
    }

    fn apply(&mut self, old: &Task, change: Change, now: Timestamp) -> StoreResult<()> {
        apply(self.0, old, &change, now)
    }

    /// Locked until the commit: a take-over of the lease waits for it.
    fn decomposition_lease(&mut self, id: &TaskId) -> StoreResult<Option<(String, Timestamp)>> {
        let row = self.0.query_opt(
            "SELECT holder, expires FROM decomposition_leases WHERE task_id = $1 FOR UPDATE",
            &[&id.as_str()],
        )?;
        match row {
            None => Ok(None),
            Some(row) => Ok(Some((
                row.try_get(0).map_err(crate::backend)?,
                row.try_get(1).map_err(crate::backend)?,
            ))),
        }
    }
}

/// Claims the locked rows, each as `claim_offer` would with its offer, under fresh runs;
/// a row the core finds not claimable now (its status is not the one its offer's kind is
/// claimed from, a parent is open, ...) is left alone.
pub(crate) fn claim_rows(
    tx: &mut Tx<'_>,
    waiting: &[postgres::Row],
    offers: &[Offer],
    ttl: i64,
    host: Option<&str>,
    now: Timestamp,
) -> StoreResult<Vec<Claim>> {
    let mut claims = Vec::with_capacity(waiting.len());
    for row in waiting {
        let task = rows::task(row)?;
        let Some(offer) = offers.iter().find(|o| o.task == task.id) else {
            continue;
        };
        let (f, fresh) = facts_and_fresh(tx, task)?;
        let change = match decide(&f, &offer.request(ttl, host), &fresh, now) {
            Err(refusal) if refusal.not_claimable_now() => continue,
            decided => decided?,
        };
        apply(tx, &f.task, &change, now)?;
        claims.push(Claim {
            task: change.task,
            run_id: fresh.run_id,
            claim_lock: fresh.claim_lock,
        });
    }
    Ok(claims)
}

impl crate::PgStore {
    /// Claims up to `limit` ready tasks, in claim order, under fresh runs, in one
    /// transaction. Rows that another transaction holds are skipped (`SKIP LOCKED`), so
    /// claimers sharing the ready queue never wait on each other's rows: each takes the
    /// next tasks nobody else is taking. Each claim is the core's, as `claim` makes it.
    pub fn claim_next(&self, limit: usize, ttl: i64, now: Timestamp) -> StoreResult<Vec<Claim>> {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE status = 'ready' ORDER BY priority DESC, created_at, seq LIMIT $1
             FOR NO KEY UPDATE SKIP LOCKED"
        );
        let limit = crate::reads::sql_limit(Some(limit));
        self.write(|tx| {
            let ready = tx.query(sql, &[&limit])?;
            let offers = ready
                .iter()
                .map(|row| rows::task_id(row).map(Offer::work))
                .collect::<StoreResult<Vec<_>>>()?;
            claim_rows(tx, &ready, &offers, ttl, None, now)
        })
    }
}
