//! `MemStore`'s import: a batch applied under the board's one lock, which makes it one
//! transaction, through the rule every store shares (`crate::import::import_batch`).

use super::Tables;
use crate::import::ImportWrites;
use crate::store::StoreResult;
use crate::transition::NewEvent;
use crate::types::{Comment, Event, Run, Task, TaskId, Timestamp};

impl ImportWrites for Tables {
    fn task(&mut self, id: &TaskId) -> StoreResult<Option<Task>> {
        Ok(self.tasks.get(id).cloned())
    }

    fn key_taken(&mut self, key: &str) -> StoreResult<bool> {
        Ok(self
            .tasks
            .values()
            .any(|t| t.idempotency_key.as_deref() == Some(key)))
    }

    fn insert_task(&mut self, task: &Task) -> StoreResult<()> {
        self.tasks.insert(task.id.clone(), task.clone());
        Ok(())
    }

    fn insert_run(&mut self, run: &Run) -> StoreResult<i64> {
        let id = self.runs.keys().next_back().map_or(1, |r| r + 1);
        self.runs.insert(id, Run { id, ..run.clone() });
        Ok(id)
    }

    fn insert_event(&mut self, event: &Event) -> StoreResult<()> {
        let id = self.next_event_id();
        self.events.push(Event { id, ..event.clone() });
        Ok(())
    }

    fn insert_comment(&mut self, comment: &Comment) -> StoreResult<()> {
        let id = self.next_comment_id();
        self.comments.push(Comment {
            id,
            ..comment.clone()
        });
        Ok(())
    }

    fn push_events(&mut self, id: &TaskId, events: &[NewEvent], now: Timestamp) -> StoreResult<()> {
        Tables::push_events(self, id, events.to_vec(), now);
        Ok(())
    }

    fn link(&mut self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        Tables::link(self, parent, child, now)
    }
}
