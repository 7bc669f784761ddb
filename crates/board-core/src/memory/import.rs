//! `MemStore`'s import: a batch applied under the board's one lock, which makes it one
//! transaction.

use super::Board;
use crate::import::{
    landing, link_refused, mapped_run, ImportBatch, ImportOutcome, ImportedTask, Landed, LinkLanded,
};
use crate::store::StoreError;
use crate::types::{Comment, Event, Timestamp};

impl Board {
    pub(super) fn import(&mut self, batch: &ImportBatch, now: Timestamp) -> ImportOutcome {
        let mut outcome = ImportOutcome::default();
        for incoming in &batch.tasks {
            let mut landed = landing(self.tasks.get(&incoming.task.id), incoming);
            if landed == Landed::Imported {
                landed = self.insert_imported(incoming, now);
            }
            outcome.tasks.push(landed);
        }
        for link in &batch.links {
            let landed = match self.link(&link.parent_id, &link.child_id, now) {
                Ok(()) => LinkLanded::Added,
                Err(StoreError::Refused(r)) => link_refused(r),
                Err(StoreError::Backend(e)) => LinkLanded::Refused(crate::Refusal::Invalid(e)),
            };
            outcome.links.push(landed);
        }
        outcome
    }

    fn insert_imported(&mut self, incoming: &ImportedTask, now: Timestamp) -> Landed {
        let mut task = incoming.task.clone();
        let key_taken = task.idempotency_key.as_ref().is_some_and(|key| {
            self.tasks
                .values()
                .any(|t| t.idempotency_key.as_ref() == Some(key))
        });
        if key_taken {
            task.idempotency_key = None;
        }
        let mut fresh = Vec::with_capacity(incoming.runs.len());
        for run in &incoming.runs {
            let id = self.runs.keys().next_back().map_or(1, |r| r + 1);
            fresh.push((run.id, id));
            self.runs.insert(id, crate::types::Run { id, ..run.clone() });
        }
        let id = task.id.clone();
        self.tasks.insert(id.clone(), task);
        for e in &incoming.events {
            self.events.push(Event {
                id: self.events.len() as i64 + 1,
                run_id: mapped_run(e.run_id, &fresh),
                ..e.clone()
            });
        }
        for c in &incoming.comments {
            let comment = Comment {
                id: self.comments.len() as i64 + 1,
                ..c.clone()
            };
            self.comments.push(comment);
        }
        let note = crate::transition::NewEvent::new("imported", None, incoming.note.clone());
        self.push_events(&id, vec![note], now);
        if key_taken {
            Landed::ImportedWithoutKey
        } else {
            Landed::Imported
        }
    }
}
