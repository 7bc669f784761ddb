//! Another board's tasks brought in with their ids kept, in the caller's transaction,
//! through the rule every store shares (`board_core::import::import_batch`). New rows
//! only: a task id another writer inserts meanwhile is a unique violation, the write
//! runs again, and then finds that task present.

use board_core::import::{import_batch, ImportBatch, ImportOutcome, ImportWrites};
use board_core::transition::NewEvent;
use board_core::{Comment, Event, Refusal, Run, StoreError, StoreResult, Task, TaskId, Timestamp};

use crate::apply::{insert_task, link, task_by, upsert_run, GET_TASK};
use crate::tx::Tx;

pub(crate) fn import(
    tx: &mut Tx<'_>,
    links_lock: (i32, i32),
    batch: &ImportBatch,
    now: Timestamp,
) -> StoreResult<ImportOutcome> {
    import_batch(&mut ImportTx { tx, links_lock }, batch, now)
}

/// An import's writes on one PostgreSQL transaction; links take the board's link lock.
struct ImportTx<'a, 'c> {
    tx: &'a mut Tx<'c>,
    links_lock: (i32, i32),
}

impl ImportWrites for ImportTx<'_, '_> {
    fn task(&mut self, id: &TaskId) -> StoreResult<Option<Task>> {
        match task_by(self.tx, GET_TASK, id) {
            Ok(task) => Ok(Some(task)),
            Err(StoreError::Refused(Refusal::NoSuchTask(_))) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn key_taken(&mut self, key: &str) -> StoreResult<bool> {
        let found = self
            .tx
            .query_opt("SELECT 1 FROM tasks WHERE idempotency_key = $1", &[&key])?;
        Ok(found.is_some())
    }

    fn insert_task(&mut self, task: &Task) -> StoreResult<()> {
        insert_task(self.tx, task)
    }

    fn insert_run(&mut self, run: &Run) -> StoreResult<i64> {
        let row = self.tx.query_one("SELECT nextval('task_runs_id_seq')", &[])?;
        let id: i64 = row.try_get(0).map_err(crate::backend)?;
        upsert_run(self.tx, &Run { id, ..run.clone() })?;
        Ok(id)
    }

    fn insert_event(&mut self, e: &Event) -> StoreResult<()> {
        let payload = e.payload.to_string();
        self.tx
            .push_imported_event(&e.task_id, e.run_id, &e.kind, payload, e.created_at);
        Ok(())
    }

    fn insert_comment(&mut self, c: &Comment) -> StoreResult<()> {
        self.tx.execute(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ($1, $2, $3, $4)",
            &[&c.task_id.as_str(), &c.author, &c.body, &c.created_at],
        )?;
        Ok(())
    }

    fn push_events(&mut self, id: &TaskId, events: &[NewEvent], now: Timestamp) -> StoreResult<()> {
        self.tx.push_events(id, events, now);
        Ok(())
    }

    fn link(&mut self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        link(self.tx, self.links_lock, parent, child, now)
    }
}
