//! Another board's tasks brought in with their ids kept, in the caller's transaction,
//! through the rule every store shares (`board_core::import::import_batch`).

use board_core::import::{import_batch, ImportBatch, ImportOutcome, ImportWrites};
use board_core::store::StoreResult;
use board_core::transition::NewEvent;
use board_core::{Comment, Event, Refusal, Run, StoreError, Task, TaskId, Timestamp};
use rusqlite::{params, Connection, OptionalExtension};

use super::apply::{insert_events, insert_task, link, next_run_id, upsert_run};
use super::backend;
use super::tasks::get_task;
use crate::rows::INSERT_EVENT;

pub(super) fn import(tx: &Connection, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome> {
    import_batch(&mut ImportTx(tx), batch, now)
}

/// An import's writes on one SQLite transaction.
struct ImportTx<'a>(&'a Connection);

impl ImportWrites for ImportTx<'_> {
    fn task(&mut self, id: &TaskId) -> StoreResult<Option<Task>> {
        match get_task(self.0, id) {
            Ok(task) => Ok(Some(task)),
            Err(StoreError::Refused(Refusal::NoSuchTask(_))) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn key_taken(&mut self, key: &str) -> StoreResult<bool> {
        self.0
            .prepare_cached("SELECT 1 FROM tasks WHERE idempotency_key = ?1")
            .and_then(|mut s| s.query_row([key], |_| Ok(())).optional())
            .map(|found| found.is_some())
            .map_err(backend)
    }

    fn insert_task(&mut self, task: &Task) -> StoreResult<()> {
        insert_task(self.0, task)
    }

    fn insert_run(&mut self, run: &Run) -> StoreResult<i64> {
        let id = next_run_id(self.0)?;
        upsert_run(self.0, &Run { id, ..run.clone() })?;
        Ok(id)
    }

    fn insert_event(&mut self, e: &Event) -> StoreResult<()> {
        self.0
            .prepare_cached(INSERT_EVENT)
            .and_then(|mut s| {
                s.execute(params![
                    e.task_id.as_str(),
                    e.run_id,
                    e.kind,
                    e.payload.to_string(),
                    e.created_at
                ])
            })
            .map_err(backend)?;
        Ok(())
    }

    fn insert_comment(&mut self, c: &Comment) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![c.task_id.as_str(), c.author, c.body, c.created_at]))
            .map_err(backend)?;
        Ok(())
    }

    fn push_events(&mut self, id: &TaskId, events: &[NewEvent], now: Timestamp) -> StoreResult<()> {
        insert_events(self.0, id, events, now)
    }

    fn link(&mut self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        link(self.0, parent, child, now)
    }
}
