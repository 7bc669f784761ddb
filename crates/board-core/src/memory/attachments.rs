//! `MemStore`'s files on cards, under the one lock.

use crate::attachments::{attached, detached, unique_name, Attachment, AttachmentShelf, NewAttachment};
use crate::refusal::Refusal;
use crate::store::StoreResult;
use crate::types::{TaskId, Timestamp};

use super::MemStore;

impl AttachmentShelf for MemStore {
    fn attach(&self, id: &TaskId, file: &NewAttachment, now: Timestamp) -> StoreResult<Attachment> {
        let (name, sha256) = file.admit()?;
        let mut b = self.board();
        b.task(id)?;
        let taken: Vec<String> = b
            .attachments
            .values()
            .filter(|(a, _)| &a.task_id == id)
            .map(|(a, _)| a.name.clone())
            .collect();
        b.last_attachment_id += 1;
        let attachment = Attachment {
            id: b.last_attachment_id,
            task_id: id.clone(),
            name: unique_name(&name, &taken),
            content_type: file.content_type.clone(),
            size: file.content.len() as i64,
            sha256,
            created_by: file.created_by.clone(),
            created_at: now,
        };
        b.push_events(id, vec![attached(&attachment)], now);
        b.attachments
            .insert(attachment.id, (attachment.clone(), file.content.clone()));
        Ok(attachment)
    }

    fn attachments(&self, id: &TaskId) -> StoreResult<Vec<Attachment>> {
        let b = self.board();
        b.task(id)?;
        Ok(b.attachments
            .values()
            .filter(|(a, _)| &a.task_id == id)
            .map(|(a, _)| a.clone())
            .collect())
    }

    fn attachment(&self, attachment_id: i64) -> StoreResult<(Attachment, Vec<u8>)> {
        self.board()
            .attachments
            .get(&attachment_id)
            .cloned()
            .ok_or_else(|| Refusal::NoSuchAttachment(attachment_id).into())
    }

    fn detach(&self, attachment_id: i64, now: Timestamp) -> StoreResult<Attachment> {
        let mut b = self.board();
        let (attachment, _) = b
            .attachments
            .remove(&attachment_id)
            .ok_or(Refusal::NoSuchAttachment(attachment_id))?;
        b.push_events(&attachment.task_id.clone(), vec![detached(&attachment)], now);
        Ok(attachment)
    }
}
