//! `AttachmentShelf` for `PgStore`: a file's bytes in its `task_attachments` row
//! (`bytea`), so every host of the board reads the same file; an attach locks its task's
//! row, so two files given the same name at once get two names.

use board_core::attachments::{attached, detached, unique_name, Attachment, AttachmentShelf, NewAttachment};
use board_core::store::StoreResult;
use board_core::{Refusal, StoreError, TaskId, Timestamp};
use postgres::Row;

use crate::apply::{require_task, task_by, LOCK_TASK};
use crate::tx::Tx;
use crate::PgStore;

macro_rules! attachment_columns {
    () => {
        "id, task_id, name, content_type, size, sha256, created_by, created_at"
    };
}

const LISTED: &str = concat!(
    "SELECT ",
    attachment_columns!(),
    " FROM task_attachments WHERE task_id = $1 ORDER BY id"
);
const ONE: &str = concat!(
    "SELECT ",
    attachment_columns!(),
    " FROM task_attachments WHERE id = $1"
);
const INSERT: &str = concat!(
    "INSERT INTO task_attachments (task_id, name, content_type, size, sha256, content, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ",
    attachment_columns!()
);

fn attachment(r: &Row) -> StoreResult<Attachment> {
    let get = |e: postgres::Error| crate::backend(e);
    let task: String = r.try_get(1).map_err(get)?;
    Ok(Attachment {
        id: r.try_get(0).map_err(get)?,
        task_id: task
            .parse()
            .map_err(|e| StoreError::Backend(format!("task_attachments.task_id: {e}")))?,
        name: r.try_get(2).map_err(get)?,
        content_type: r.try_get(3).map_err(get)?,
        size: r.try_get(4).map_err(get)?,
        sha256: r.try_get(5).map_err(get)?,
        created_by: r.try_get(6).map_err(get)?,
        created_at: r.try_get(7).map_err(get)?,
    })
}

fn listed(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<Vec<Attachment>> {
    tx.query(LISTED, &[&id.as_str()])?
        .iter()
        .map(attachment)
        .collect()
}

fn one(tx: &mut Tx<'_>, attachment_id: i64) -> StoreResult<Attachment> {
    match tx.query_opt(ONE, &[&attachment_id])? {
        Some(row) => attachment(&row),
        None => Err(Refusal::NoSuchAttachment(attachment_id).into()),
    }
}

impl AttachmentShelf for PgStore {
    fn attach(&self, id: &TaskId, file: &NewAttachment, now: Timestamp) -> StoreResult<Attachment> {
        let (name, sha256) = file.admit()?;
        self.write(|tx| {
            task_by(tx, LOCK_TASK, id)?;
            let taken: Vec<String> = listed(tx, id)?.into_iter().map(|a| a.name).collect();
            let name = unique_name(&name, &taken);
            let size = file.content.len() as i64;
            let row = tx.query_one(
                INSERT,
                &[
                    &id.as_str(),
                    &name,
                    &file.content_type,
                    &size,
                    &sha256,
                    &file.content,
                    &file.created_by,
                    &now,
                ],
            )?;
            let made = attachment(&row)?;
            tx.push_events(id, &[attached(&made)], now);
            Ok(made)
        })
    }

    fn attachments(&self, id: &TaskId) -> StoreResult<Vec<Attachment>> {
        self.read(|tx| {
            require_task(tx, id)?;
            listed(tx, id)
        })
    }

    fn attachment(&self, attachment_id: i64) -> StoreResult<(Attachment, Vec<u8>)> {
        self.read(|tx| {
            let made = one(tx, attachment_id)?;
            let row = tx.query_one(
                "SELECT content FROM task_attachments WHERE id = $1",
                &[&attachment_id],
            )?;
            let bytes: Vec<u8> = row.try_get(0).map_err(crate::backend)?;
            Ok((made, bytes))
        })
    }

    fn detach(&self, attachment_id: i64, now: Timestamp) -> StoreResult<Attachment> {
        self.write(|tx| {
            let gone = one(tx, attachment_id)?;
            tx.execute("DELETE FROM task_attachments WHERE id = $1", &[&attachment_id])?;
            tx.push_events(&gone.task_id, &[detached(&gone)], now);
            Ok(gone)
        })
    }
}
