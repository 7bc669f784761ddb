//! Retention batches (`kanban gc`), each run in one transaction by the caller (rolled
//! back for a dry run). What is kept and why: `board_core::retention`. The statements
//! are SQLite's, so both boards remove the same rows.

use board_core::retention::{gc_archived_rows, gc_event_steps, remove_archived_rows, GcBatch, GcRows};
use board_core::store::StoreResult;
use board_core::{Compacted, Freed, Retention, TaskId, Timestamp, ROUTINE_EVENTS};

use crate::rows::get;
use crate::tx::Tx;
use crate::PgStore;

/// The link component of a task: every task linked to it, directly or through others,
/// with whether each is archived and last changed before `$2`. Locked, so that none of
/// them changes before the batch commits.
const COMPONENT: &str = r#"
    WITH RECURSIVE component(id) AS (
        SELECT $1::text COLLATE "C"
        UNION
        SELECT CASE WHEN l.parent_id = c.id THEN l.child_id ELSE l.parent_id END
        FROM task_links l JOIN component c ON l.parent_id = c.id OR l.child_id = c.id
    )
    SELECT t.id, (t.status = 'archived' AND t.updated_at < $2) AS old
    FROM tasks t WHERE t.id IN (SELECT id FROM component) ORDER BY t.id FOR UPDATE"#;

/// A batch of archived tasks on one PostgreSQL transaction (`board_core::retention::gc_archived_rows`).
struct GcTx<'a, 'c>(&'a mut Tx<'c>);

impl GcRows for GcTx<'_, '_> {
    fn tasks_after(
        &mut self,
        after: &str,
        before: Timestamp,
        window: usize,
    ) -> StoreResult<Vec<(String, bool)>> {
        let found = self.0.query(
            "SELECT id, (status = 'archived' AND updated_at < $2) AS old FROM tasks WHERE id > $1 ORDER BY id LIMIT $3",
            &[&after, &before, &(window as i64)],
        )?;
        found.iter().map(id_and_old).collect()
    }

    fn newest_event_task(&mut self) -> StoreResult<Option<String>> {
        self.0
            .query_opt("SELECT task_id FROM task_events ORDER BY id DESC LIMIT 1", &[])?
            .map(|r| get::<String>(&r, "task_id"))
            .transpose()
    }

    fn component(&mut self, seed: &str, before: Timestamp) -> StoreResult<Vec<(String, bool)>> {
        let found = self.0.query(COMPONENT, &[&seed, &before])?;
        found.iter().map(id_and_old).collect()
    }

    fn remove_task(&mut self, id: &str) -> StoreResult<Freed> {
        let tx = &mut *self.0;
        let links = tx.execute(
            "DELETE FROM task_links WHERE parent_id = $1 OR child_id = $1",
            &[&id],
        )?;
        let events = tx.execute("DELETE FROM task_events WHERE task_id = $1", &[&id])?;
        let comments = tx.execute("DELETE FROM task_comments WHERE task_id = $1", &[&id])?;
        tx.execute("DELETE FROM task_attachments WHERE task_id = $1", &[&id])?;
        tx.execute("DELETE FROM notify_subscriptions WHERE task_id = $1", &[&id])?;
        let runs = tx.execute("DELETE FROM task_runs WHERE task_id = $1", &[&id])?;
        tx.execute("DELETE FROM decomposition_leases WHERE task_id = $1", &[&id])?;
        let tasks = tx.execute("DELETE FROM tasks WHERE id = $1", &[&id])?;
        Ok(Freed {
            tasks,
            runs,
            events,
            comments,
            links,
        })
    }

    fn keep_event_ids(&mut self) -> StoreResult<()> {
        // Event ids come from a sequence, which never hands one out twice.
        Ok(())
    }
}

fn id_and_old(r: &postgres::Row) -> StoreResult<(String, bool)> {
    Ok((get::<String>(r, "id")?, get::<bool>(r, "old")?))
}

pub(crate) fn gc_archived(
    tx: &mut Tx<'_>,
    before: Timestamp,
    after: Option<&TaskId>,
    batch: &GcBatch,
) -> StoreResult<(Freed, Option<TaskId>)> {
    gc_archived_rows(&mut GcTx(tx), before, after, batch)
}

pub(crate) fn remove_archived(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<Freed> {
    remove_archived_rows(&mut GcTx(tx), id)
}

pub(crate) fn gc_events(
    tx: &mut Tx<'_>,
    before: Timestamp,
    after_id: i64,
    batch: &GcBatch,
) -> StoreResult<(Freed, Option<i64>)> {
    let newest: i64 = get(
        &tx.query_one(
            "SELECT COALESCE(max(id), 0)::bigint AS newest FROM task_events",
            &[],
        )?,
        "newest",
    )?;
    let kinds: Vec<&str> = ROUTINE_EVENTS.iter().map(|k| k.as_str()).collect();
    gc_event_steps(after_id, newest, batch, |from, upto| {
        // The newest event stays (`id < $4`), as on SQLite.
        tx.execute(
            "DELETE FROM task_events WHERE id IN (
                 SELECT e.id FROM task_events e JOIN tasks t ON t.id = e.task_id
                 WHERE e.id > $1 AND e.id <= $2 AND e.id < $4 AND e.created_at < $3
                   AND e.kind = ANY($5) AND t.status = 'done')",
            &[&from, &upto, &before, &newest, &kinds],
        )
    })
}

/// After a sweep: autovacuum reclaims the dead rows; fresh statistics keep the planner's
/// picture of the smaller tables right meanwhile.
pub(crate) fn compact(tx: &mut Tx<'_>) -> StoreResult<Compacted> {
    tx.execute(
        "ANALYZE tasks, task_runs, task_links, task_events, task_comments",
        &[],
    )?;
    Ok(Compacted {
        action: "ANALYZE".to_owned(),
        ..Compacted::default()
    })
}

impl Retention for PgStore {
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
        self.batch(false, |tx| remove_archived(tx, id))
    }

    fn compact(&self) -> StoreResult<Compacted> {
        self.read_one(compact)
    }
}
