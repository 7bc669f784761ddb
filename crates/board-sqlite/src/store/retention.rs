//! Retention batches (`kanban gc`), each run inside one write transaction by the caller
//! (rolled back for a dry run). What is kept and why: `board_core::retention`.

use board_core::retention::{gc_archived_rows, gc_event_steps, remove_archived_rows, GcBatch, GcRows};
use board_core::store::StoreResult;
use board_core::{Compacted, Freed, Retention, TaskId, Timestamp, ROUTINE_EVENTS};
use rusqlite::{params, Connection, OptionalExtension};

use super::{backend, passive_checkpoint, SqliteStore};

/// The link component of a task: every task linked to it, directly or through others,
/// with whether each is archived and last changed before `?2`.
const COMPONENT: &str = "
    WITH RECURSIVE component(id) AS (
        SELECT ?1
        UNION
        SELECT CASE WHEN l.parent_id = c.id THEN l.child_id ELSE l.parent_id END
        FROM task_links l JOIN component c ON l.parent_id = c.id OR l.child_id = c.id
    )
    SELECT t.id, t.status = 'archived' AND t.updated_at < ?2 FROM component c JOIN tasks t ON t.id = c.id
    ORDER BY t.id";

/// A batch of archived tasks on one SQLite transaction (`board_core::retention::gc_archived_rows`).
struct GcTx<'a>(&'a Connection);

impl GcTx<'_> {
    fn id_and_old(&self, sql: &str, params: impl rusqlite::Params) -> StoreResult<Vec<(String, bool)>> {
        let mut stmt = self.0.prepare_cached(sql).map_err(backend)?;
        let rows = stmt
            .query_map(params, |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(backend)?;
        rows.collect::<Result<_, _>>().map_err(backend)
    }
}

impl GcRows for GcTx<'_> {
    fn tasks_after(
        &mut self,
        after: &str,
        before: Timestamp,
        window: usize,
    ) -> StoreResult<Vec<(String, bool)>> {
        self.id_and_old(
            "SELECT id, status = 'archived' AND updated_at < ?2 FROM tasks WHERE id > ?1 ORDER BY id LIMIT ?3",
            params![after, before, window as i64],
        )
    }

    fn newest_event_task(&mut self) -> StoreResult<Option<String>> {
        self.0
            .prepare_cached("SELECT task_id FROM task_events ORDER BY id DESC LIMIT 1")
            .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
            .map_err(backend)
    }

    fn component(&mut self, seed: &str, before: Timestamp) -> StoreResult<Vec<(String, bool)>> {
        self.id_and_old(COMPONENT, params![seed, before])
    }

    fn remove_task(&mut self, id: &str) -> StoreResult<Freed> {
        let delete = |sql: &str| -> StoreResult<u64> {
            let n = self
                .0
                .prepare_cached(sql)
                .and_then(|mut s| s.execute([id]))
                .map_err(backend)?;
            Ok(n as u64)
        };
        let links = delete("DELETE FROM task_links WHERE parent_id = ?1 OR child_id = ?1")?;
        let events = delete("DELETE FROM task_events WHERE task_id = ?1")?;
        let comments = delete("DELETE FROM task_comments WHERE task_id = ?1")?;
        delete("DELETE FROM task_attachments WHERE task_id = ?1")?;
        delete("DELETE FROM notify_subscriptions WHERE task_id = ?1")?;
        let runs = delete("DELETE FROM task_runs WHERE task_id = ?1")?;
        delete("DELETE FROM decomposition_leases WHERE task_id = ?1")?;
        let tasks = delete("DELETE FROM tasks WHERE id = ?1")?;
        Ok(Freed {
            tasks,
            runs,
            events,
            comments,
            links,
        })
    }

    fn keep_event_ids(&mut self) -> StoreResult<()> {
        // SQLite hands out one more than the largest id in the table: the floor holds
        // the largest ever handed out, and every insert takes the larger of the two.
        self.0
            .prepare_cached(
                "INSERT INTO event_floor (one, id)
                 SELECT 1, newest FROM (SELECT MAX(id) AS newest FROM task_events) WHERE newest IS NOT NULL
                 ON CONFLICT (one) DO UPDATE SET id = MAX(id, excluded.id)",
            )
            .and_then(|mut s| s.execute([]))
            .map_err(backend)?;
        Ok(())
    }
}

pub(super) fn gc_archived(
    conn: &Connection,
    before: Timestamp,
    after: Option<&TaskId>,
    batch: &GcBatch,
) -> StoreResult<(Freed, Option<TaskId>)> {
    gc_archived_rows(&mut GcTx(conn), before, after, batch)
}

pub(super) fn remove_archived(conn: &Connection, id: &TaskId) -> StoreResult<Freed> {
    remove_archived_rows(&mut GcTx(conn), id)
}

pub(super) fn gc_events(
    conn: &Connection,
    before: Timestamp,
    after_id: i64,
    batch: &GcBatch,
) -> StoreResult<(Freed, Option<i64>)> {
    let newest: i64 = conn
        .query_row("SELECT COALESCE(MAX(id), 0) FROM task_events", [], |r| r.get(0))
        .map_err(backend)?;
    let kinds = board_core::kinds::sql_list(ROUTINE_EVENTS);
    // The newest event stays (`id < ?4`), so that no event id is ever handed out twice.
    let sql = format!(
        "DELETE FROM task_events WHERE id IN (
             SELECT e.id FROM task_events e JOIN tasks t ON t.id = e.task_id
             WHERE e.id > ?1 AND e.id <= ?2 AND e.id < ?4 AND e.created_at < ?3
               AND e.kind IN ({kinds}) AND t.status = 'done')"
    );
    let mut delete = conn.prepare_cached(&sql).map_err(backend)?;
    gc_event_steps(after_id, newest, batch, |from, upto| {
        let removed = delete
            .execute(params![from, upto, before, newest])
            .map_err(backend)?;
        Ok(removed as u64)
    })
}

impl Retention for SqliteStore {
    fn gc_archived(
        &self,
        before: Timestamp,
        after: Option<&TaskId>,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<TaskId>)> {
        self.batch(batch.dry_run, |tx| gc_archived(tx, before, after, batch))
    }

    fn gc_events(
        &self,
        before: Timestamp,
        after_id: i64,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<i64>)> {
        self.batch(batch.dry_run, |tx| gc_events(tx, before, after_id, batch))
    }

    fn remove_archived(&self, id: &TaskId) -> StoreResult<Freed> {
        self.write(|tx| remove_archived(tx, id))
    }

    fn compact(&self) -> StoreResult<Compacted> {
        self.checkpoint()
    }

    fn settle(&self) -> StoreResult<()> {
        passive_checkpoint(&self.conn()).map(drop)
    }
}
