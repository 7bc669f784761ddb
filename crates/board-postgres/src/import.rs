//! Another board's tasks brought in with their ids kept, in the caller's transaction
//! (see `board_core::import`). New rows only: a task id another writer inserts meanwhile
//! is a unique violation, the write runs again, and then finds that task present.

use board_core::import::{
    landing, link_refused, mapped_run, ImportBatch, ImportOutcome, ImportedTask, Landed, LinkLanded,
};
use board_core::transition::NewEvent;
use board_core::{Refusal, Run, StoreError, StoreResult, Timestamp};

use crate::apply::{insert_task, link, task_by, upsert_run, GET_TASK};
use crate::tx::Tx;

pub(crate) fn import(
    tx: &mut Tx<'_>,
    links_lock: (i32, i32),
    batch: &ImportBatch,
    now: Timestamp,
) -> StoreResult<ImportOutcome> {
    let mut outcome = ImportOutcome::default();
    for incoming in &batch.tasks {
        let existing = match task_by(tx, GET_TASK, &incoming.task.id) {
            Ok(task) => Some(task),
            Err(StoreError::Refused(Refusal::NoSuchTask(_))) => None,
            Err(e) => return Err(e),
        };
        let mut landed = landing(existing.as_ref(), incoming);
        if landed == Landed::Imported {
            landed = insert_imported(tx, incoming, now)?;
        }
        outcome.tasks.push(landed);
    }
    for l in &batch.links {
        outcome
            .links
            .push(match link(tx, links_lock, &l.parent_id, &l.child_id, now) {
                Ok(()) => LinkLanded::Added,
                Err(StoreError::Refused(r)) => link_refused(r),
                Err(e) => return Err(e),
            });
    }
    Ok(outcome)
}

fn insert_imported(tx: &mut Tx<'_>, incoming: &ImportedTask, now: Timestamp) -> StoreResult<Landed> {
    let mut task = incoming.task.clone();
    let without_key = match &task.idempotency_key {
        Some(key) => tx
            .query_opt("SELECT 1 FROM tasks WHERE idempotency_key = $1", &[key])?
            .is_some(),
        None => false,
    };
    if without_key {
        task.idempotency_key = None;
    }
    insert_task(tx, &task)?;
    let mut fresh = Vec::with_capacity(incoming.runs.len());
    for run in &incoming.runs {
        let row = tx.query_one("SELECT nextval('task_runs_id_seq')", &[])?;
        let id: i64 = row.try_get(0).map_err(crate::backend)?;
        fresh.push((run.id, id));
        upsert_run(tx, &Run { id, ..run.clone() })?;
    }
    for e in &incoming.events {
        let run_id = mapped_run(e.run_id, &fresh);
        tx.push_imported_event(&task.id, run_id, &e.kind, e.payload.to_string(), e.created_at);
    }
    for c in &incoming.comments {
        tx.execute(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES ($1, $2, $3, $4)",
            &[&task.id.as_str(), &c.author, &c.body, &c.created_at],
        )?;
    }
    let note = NewEvent::new("imported", None, incoming.note.clone());
    tx.push_events(&task.id, &[note], now);
    Ok(match without_key {
        true => Landed::ImportedWithoutKey,
        false => Landed::Imported,
    })
}
