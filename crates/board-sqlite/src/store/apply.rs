//! The pieces of a write: a task's facts, the compare-and-set row write, runs, events,
//! promotion and fresh ids.

use std::cell::Cell;

use board_core::releasing_statuses_sql;
use board_core::store::{claim_in_order, Claim, Offer, StoreResult, Transitions};
use board_core::transition::{decide, Change, Fresh, NewEvent, TaskFacts};
use board_core::{graph, plan};
use board_core::{Link, Request, Run, StoreError, Task, TaskId, Timestamp};
use rusqlite::{params, Connection, OptionalExtension};

use super::backend;
use super::tasks::{decoded, get_task};
use crate::rows::{
    run_from_row, task_update, with_params, Word, INSERT_EVENT, INSERT_TASK, RUN_COLUMNS, UPSERT_RUN,
};

/// Random hex from the operating system, for task ids and claim locks.
fn random_bytes<const N: usize>() -> StoreResult<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Backend(format!("no randomness: {e}")))?;
    Ok(bytes)
}

pub(super) fn new_claim_lock() -> StoreResult<String> {
    Ok(random_bytes::<16>()?.iter().map(|b| format!("{b:02x}")).collect())
}

/// The task ids a query's first column names, unreadable ones reported and skipped.
/// `todo` tasks none of whose parents is still open, in claim order: what a promotion
/// sweep promotes (the core re-checks each one under the write lock).
pub(super) const PROMOTABLE: &str = concat!(
    "SELECT t.id FROM tasks t WHERE t.status = 'todo' AND NOT EXISTS (
    SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id
    WHERE l.child_id = t.id AND p.status NOT IN (",
    releasing_statuses_sql!(),
    "))
 ORDER BY t.priority DESC, t.created_at, t.rowid"
);

pub(super) fn query_ids(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> StoreResult<Vec<TaskId>> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let ids = decoded(stmt.query(params).map_err(backend)?, |r| {
        r.get::<_, Word<TaskId>>(0).map(|w| w.0)
    });
    ids
}

pub(super) fn facts(conn: &Connection, id: &TaskId) -> StoreResult<TaskFacts> {
    let task = get_task(conn, id)?;
    let newest_sql =
        format!("SELECT {RUN_COLUMNS} FROM task_runs WHERE task_id = ?1 ORDER BY id DESC LIMIT 1");
    let newest_run = conn
        .prepare_cached(&newest_sql)
        .and_then(|mut s| s.query_row([id.as_str()], run_from_row).optional())
        .map_err(backend)?;
    let (run_count, open_parents, decomposed): (i64, i64, bool) = conn
        .prepare_cached(concat!(
            "SELECT (SELECT COUNT(*) FROM task_runs WHERE task_id = ?1),
                    (SELECT COUNT(*) FROM task_links l JOIN tasks p ON p.id = l.parent_id
                      WHERE l.child_id = ?1 AND p.status NOT IN (",
            releasing_statuses_sql!(),
            ")),
                    EXISTS (SELECT 1 FROM task_events WHERE task_id = ?1 AND kind = ",
            board_core::decomposed_event_sql!(),
            ")",
        ))
        .and_then(|mut s| s.query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .map_err(backend)?;
    Ok(TaskFacts {
        task,
        newest_run,
        run_count,
        open_parents,
        decomposed,
    })
}

thread_local! {
    /// Set when the write running on this thread appended an event that may give a
    /// dispatcher work (`board_core::wakes_dispatcher`); `SqliteStore::write` takes it.
    static WAKES: Cell<bool> = const { Cell::new(false) };
}

/// Whether the write on this thread appended a waking event since the last call.
pub(super) fn take_wakes() -> bool {
    WAKES.with(|w| w.replace(false))
}

pub(super) fn insert_events(
    tx: &Connection,
    task_id: &TaskId,
    events: &[NewEvent],
    now: Timestamp,
) -> StoreResult<()> {
    if events.iter().any(|e| board_core::wakes_dispatcher(e.kind)) {
        WAKES.with(|w| w.set(true));
    }
    let mut stmt = tx.prepare_cached(INSERT_EVENT).map_err(backend)?;
    for e in events {
        stmt.execute(params![
            task_id.as_str(),
            e.run_id,
            e.kind.as_str(),
            e.payload.to_string(),
            now
        ])
        .map_err(backend)?;
    }
    Ok(())
}

pub(super) fn insert_task(tx: &Connection, t: &Task) -> StoreResult<()> {
    tx.prepare_cached(&INSERT_TASK)
        .and_then(|mut s| with_params(t, &[], |params| s.execute(params)))
        .map_err(backend)?;
    Ok(())
}

/// Writes the task's new row only if its claim is still the one the decision was
/// based on (compare-and-set on status, current run and claim lock).
fn update_task(tx: &Connection, old: &Task, t: &Task) -> StoreResult<()> {
    // Single winner: the row changes only if status, run and claim are as read.
    let (status, run_id, claim_lock) = board_core::store::update_guard(old);
    let changed = tx
        .prepare_cached(task_update(old, t))
        .and_then(|mut s| with_params(t, &[&status, &run_id, &claim_lock], |params| s.execute(params)))
        .map_err(backend)?;
    board_core::store::guarded_update(u64::try_from(changed).unwrap_or(0), &t.id, run_id)
}

pub(super) fn upsert_run(tx: &Connection, r: &Run) -> StoreResult<()> {
    tx.prepare_cached(&UPSERT_RUN)
        .and_then(|mut s| with_params(r, &[], |params| s.execute(params)))
        .map_err(backend)?;
    Ok(())
}

/// Applies a decided change, then promotes the children it released.
pub(super) fn apply(tx: &Connection, old: &Task, change: &Change, now: Timestamp) -> StoreResult<()> {
    update_task(tx, old, &change.task)?;
    for run in &change.runs {
        upsert_run(tx, run)?;
    }
    insert_events(tx, &change.task.id, &change.events, now)?;
    if let Some(c) = &change.comment {
        let id = change.task.id.as_str();
        tx.prepare_cached(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(rusqlite::params![id, c.author, c.body, now]))
        .map_err(backend)?;
        let event = board_core::comment::event(tx.last_insert_rowid(), c.author.as_deref(), None);
        insert_events(tx, &change.task.id, &[event], now)?;
    }
    if change.wake_children {
        let waiting = query_ids(
            tx,
            "SELECT l.child_id FROM task_links l JOIN tasks c ON c.id = l.child_id
             WHERE l.parent_id = ?1 AND c.status = 'todo' ORDER BY l.child_id",
            [change.task.id.as_str()],
        )?;
        for child in waiting {
            promote(tx, &child, now)?;
        }
    }
    if change.hold_children {
        let started = query_ids(
            tx,
            "SELECT l.child_id FROM task_links l JOIN tasks c ON c.id = l.child_id
             WHERE l.parent_id = ?1 AND c.status IN ('ready', 'running') ORDER BY l.child_id",
            [change.task.id.as_str()],
        )?;
        let hold = Request::Hold {
            parent: change.task.id.clone(),
        };
        for child in started {
            // A refusal (a running child) rolls the whole change back.
            let f = facts(tx, &child)?;
            apply(tx, &f.task, &decide(&f, &hold, &Fresh::default(), now)?, now)?;
        }
    }
    Ok(())
}

/// Promotes one task when the core agrees; returns whether it did.
pub(super) fn promote(tx: &Connection, id: &TaskId, now: Timestamp) -> StoreResult<bool> {
    let f = facts(tx, id)?;
    match decide(&f, &Request::Promote, &Fresh::default(), now) {
        Ok(change) => {
            apply(tx, &f.task, &change, now)?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// A task id not yet on the board (random; retried on collision).
pub(super) fn unused_task_id(tx: &Connection, also_taken: &[TaskId]) -> StoreResult<TaskId> {
    let mut stmt = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1)")
        .map_err(backend)?;
    for _ in 0..64 {
        let id = TaskId::from_random(random_bytes::<4>()?);
        let taken: bool = stmt.query_row([id.as_str()], |r| r.get(0)).map_err(backend)?;
        if !taken && !also_taken.contains(&id) {
            return Ok(id);
        }
    }
    Err(StoreError::Backend("could not draw an unused task id".into()))
}

/// The crash suite's way to land a SIGKILL inside a write: with
/// `KANBAN_TEST_PAUSE_BEFORE_COMMIT_MS` set, a debug build says so on stderr and then
/// sleeps with every change of the transaction made and none committed. Random kill
/// delays mostly hit a process that has already finished; this makes the worst point
/// certain. Release builds have no such variable.
#[cfg(debug_assertions)]
pub(super) fn pause_before_commit() {
    let Some(ms) = std::env::var("KANBAN_TEST_PAUSE_BEFORE_COMMIT_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
    else {
        return;
    };
    eprintln!("kanban: pausing {ms} ms before a commit");
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

#[cfg(not(debug_assertions))]
pub(super) fn pause_before_commit() {}

pub(super) fn next_run_id(tx: &Connection) -> StoreResult<i64> {
    tx.prepare_cached("SELECT COALESCE(MAX(id), 0) + 1 FROM task_runs")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(backend)
}

pub(super) fn insert_links(tx: &Connection, links: &[Link]) -> StoreResult<()> {
    let mut stmt = tx
        .prepare_cached("INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)")
        .map_err(backend)?;
    for l in links {
        stmt.execute([l.parent_id.as_str(), l.child_id.as_str()])
            .map_err(backend)?;
    }
    Ok(())
}

/// Links `parent -> child` as `link` does, inside the caller's transaction.
pub(super) fn link(tx: &Connection, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
    let p = get_task(tx, parent)?;
    let f = facts(tx, child)?;
    let (exists, cycle): (bool, bool) = tx
        .prepare_cached(
            "WITH RECURSIVE down(id) AS (
                SELECT ?2 UNION SELECT l.child_id FROM task_links l JOIN down d ON l.parent_id = d.id
             )
             SELECT EXISTS (SELECT 1 FROM task_links WHERE parent_id = ?1 AND child_id = ?2),
                    ?1 <> ?2 AND EXISTS (SELECT 1 FROM down WHERE id = ?1)",
        )
        .and_then(|mut s| s.query_row([parent.as_str(), child.as_str()], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(backend)?;
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

pub(super) fn insert_created(tx: &Connection, created: &graph::Created, now: Timestamp) -> StoreResult<()> {
    insert_task(tx, &created.task)?;
    insert_links(tx, &created.links)?;
    insert_events(tx, &created.task.id, &created.events, now)
}

/// A plan's writes on one SQLite transaction (`board_core::plan::write_plan`).
pub(super) struct PlanTx<'a>(pub(super) &'a Connection);

impl plan::PlanWrites for PlanTx<'_> {
    fn facts(&mut self, id: &TaskId) -> StoreResult<TaskFacts> {
        facts(self.0, id)
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

    fn decomposition_lease(&mut self, id: &TaskId) -> StoreResult<Option<(String, Timestamp)>> {
        self.0
            .prepare_cached("SELECT holder, expires FROM decomposition_leases WHERE task_id = ?1")
            .and_then(|mut s| {
                s.query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(backend)
    }
}

/// One request decided and applied inside the caller's write transaction.
pub(super) fn transition_in(
    tx: &Connection,
    id: &TaskId,
    request: &Request,
    now: Timestamp,
) -> StoreResult<Task> {
    let f = facts(tx, id)?;
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
}

/// Applies each request in a savepoint of the caller's write transaction: a refused one
/// is rolled back alone (a refusal may come after a write: a reopen that a running child
/// refuses) and the others go on; a failure of the storage is the whole call's (the
/// caller's transaction rolls back every one).
pub(super) fn transitions_in(
    tx: &Connection,
    requests: &[(TaskId, Request)],
    now: Timestamp,
) -> StoreResult<Transitions> {
    let mut outcomes = Vec::with_capacity(requests.len());
    for (id, request) in requests {
        tx.execute_batch("SAVEPOINT one").map_err(backend)?;
        match transition_in(tx, id, request, now) {
            Err(e @ StoreError::Backend(_)) => return Err(e),
            Ok(task) => {
                tx.execute_batch("RELEASE one").map_err(backend)?;
                outcomes.push(Ok(task));
            }
            Err(refused) => {
                tx.execute_batch("ROLLBACK TO one; RELEASE one")
                    .map_err(backend)?;
                outcomes.push(Err(refused));
            }
        }
    }
    Ok(outcomes)
}

/// Claims each offered task still waiting, in the offers' order, inside the caller's
/// write transaction: a task that cannot be claimed now is passed over, and any other
/// failure is the whole call's (the caller's transaction rolls back every claim).
pub(super) fn claim_offers(
    tx: &Connection,
    offers: &[Offer],
    ttl: i64,
    host: Option<&str>,
    now: Timestamp,
) -> StoreResult<Vec<Claim>> {
    claim_in_order(offers, true, |offer| {
        Claim::of(transition_in(tx, &offer.task, &offer.request(ttl, host), now)?)
    })
}
