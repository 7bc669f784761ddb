//! Another board's tasks brought in with their ids kept, in the caller's transaction
//! (see `board_core::import`): the task row, its runs under fresh ids, its events with
//! their times kept, its comments, and the `imported` event.

use board_core::import::{
    landing, link_refused, mapped_run, ImportBatch, ImportOutcome, ImportedTask, Landed, LinkLanded,
};
use board_core::store::StoreResult;
use board_core::transition::NewEvent;
use board_core::{Refusal, Run, StoreError, Task, Timestamp};
use rusqlite::{params, Connection, OptionalExtension};

use super::apply::{insert_events, insert_task, link, next_run_id, upsert_run};
use super::backend;
use super::tasks::get_task;

pub(super) fn import(tx: &Connection, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome> {
    let mut outcome = ImportOutcome::default();
    for incoming in &batch.tasks {
        let existing = match get_task(tx, &incoming.task.id) {
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
            .push(match link(tx, &l.parent_id, &l.child_id, now) {
                Ok(()) => LinkLanded::Added,
                Err(StoreError::Refused(r)) => link_refused(r),
                Err(e) => return Err(e),
            });
    }
    Ok(outcome)
}

fn key_taken(tx: &Connection, task: &Task) -> StoreResult<bool> {
    let Some(key) = &task.idempotency_key else {
        return Ok(false);
    };
    tx.prepare_cached("SELECT 1 FROM tasks WHERE idempotency_key = ?1")
        .and_then(|mut s| s.query_row([key], |_| Ok(())).optional())
        .map(|found| found.is_some())
        .map_err(backend)
}

fn insert_imported(tx: &Connection, incoming: &ImportedTask, now: Timestamp) -> StoreResult<Landed> {
    let mut task = incoming.task.clone();
    let without_key = key_taken(tx, &task)?;
    if without_key {
        task.idempotency_key = None;
    }
    insert_task(tx, &task)?;
    let mut fresh = Vec::with_capacity(incoming.runs.len());
    for (id, run) in (next_run_id(tx)?..).zip(&incoming.runs) {
        fresh.push((run.id, id));
        upsert_run(tx, &Run { id, ..run.clone() })?;
    }
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(backend)?;
    for e in &incoming.events {
        let run_id = mapped_run(e.run_id, &fresh);
        stmt.execute(params![
            task.id.as_str(),
            run_id,
            e.kind,
            e.payload.to_string(),
            e.created_at
        ])
        .map_err(backend)?;
    }
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO task_comments (task_id, author, body, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(backend)?;
    for c in &incoming.comments {
        stmt.execute(params![task.id.as_str(), c.author, c.body, c.created_at])
            .map_err(backend)?;
    }
    let note = NewEvent::new("imported", None, incoming.note.clone());
    insert_events(tx, &task.id, &[note], now)?;
    Ok(match without_key {
        true => Landed::ImportedWithoutKey,
        false => Landed::Imported,
    })
}
