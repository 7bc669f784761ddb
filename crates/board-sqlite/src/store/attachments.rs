//! `AttachmentShelf` for `SqliteStore`: a file's bytes in its `task_attachments` row, so
//! a backup or a copy of the board carries them; a listing never reads the bytes.

use board_core::attachments::{attached, detached, unique_name, Attachment, AttachmentShelf, NewAttachment};
use board_core::store::StoreResult;
use board_core::{Refusal, StoreError, TaskId, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::apply::insert_events;
use super::backend;
use crate::SqliteStore;

const COLUMNS: &str = "id, task_id, name, content_type, size, sha256, created_by, created_at";

fn attachment(r: &Row<'_>) -> rusqlite::Result<Attachment> {
    let task: String = r.get(1)?;
    let task_id = task.parse().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(Attachment {
        id: r.get(0)?,
        task_id,
        name: r.get(2)?,
        content_type: r.get(3)?,
        size: r.get(4)?,
        sha256: r.get(5)?,
        created_by: r.get(6)?,
        created_at: r.get(7)?,
    })
}

fn listed(conn: &Connection, id: &TaskId) -> StoreResult<Vec<Attachment>> {
    let sql = format!("SELECT {COLUMNS} FROM task_attachments WHERE task_id = ?1 ORDER BY id");
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt.query_map([id.as_str()], attachment).map_err(backend)?;
    rows.collect::<rusqlite::Result<_>>().map_err(backend)
}

fn one(conn: &Connection, attachment_id: i64) -> StoreResult<Attachment> {
    let sql = format!("SELECT {COLUMNS} FROM task_attachments WHERE id = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([attachment_id], attachment).optional())
        .map_err(backend)?
        .ok_or_else(|| no_such(attachment_id))
}

fn no_such(attachment_id: i64) -> StoreError {
    Refusal::NoSuchAttachment(attachment_id).into()
}

impl AttachmentShelf for SqliteStore {
    fn attach(&self, id: &TaskId, file: &NewAttachment, now: Timestamp) -> StoreResult<Attachment> {
        let (name, sha256) = file.admit()?;
        self.write(|tx| {
            SqliteStore::require_task(tx, id)?;
            let taken: Vec<String> = listed(tx, id)?.into_iter().map(|a| a.name).collect();
            let name = unique_name(&name, &taken);
            tx.prepare_cached(
                "INSERT INTO task_attachments
                   (task_id, name, content_type, size, sha256, content, created_by, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id.as_str(),
                    name,
                    file.content_type,
                    file.content.len() as i64,
                    sha256,
                    file.content,
                    file.created_by,
                    now
                ])
            })
            .map_err(backend)?;
            let made = one(tx, tx.last_insert_rowid())?;
            insert_events(tx, id, &[attached(&made)], now)?;
            Ok(made)
        })
    }

    fn attachments(&self, id: &TaskId) -> StoreResult<Vec<Attachment>> {
        self.read(|tx| {
            SqliteStore::require_task(tx, id)?;
            listed(tx, id)
        })
    }

    fn attachment(&self, attachment_id: i64) -> StoreResult<(Attachment, Vec<u8>)> {
        self.read(|tx| {
            let made = one(tx, attachment_id)?;
            let bytes: Vec<u8> = tx
                .prepare_cached("SELECT content FROM task_attachments WHERE id = ?1")
                .and_then(|mut s| s.query_row([attachment_id], |r| r.get(0)))
                .map_err(backend)?;
            Ok((made, bytes))
        })
    }

    fn detach(&self, attachment_id: i64, now: Timestamp) -> StoreResult<Attachment> {
        self.write(|tx| {
            let gone = one(tx, attachment_id)?;
            tx.prepare_cached("DELETE FROM task_attachments WHERE id = ?1")
                .and_then(|mut s| s.execute([attachment_id]))
                .map_err(backend)?;
            insert_events(tx, &gone.task_id, &[detached(&gone)], now)?;
            Ok(gone)
        })
    }
}
