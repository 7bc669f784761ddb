//! `MemStore`'s retention: the board in memory as [`GcRows`], so that the rules of
//! `crate::retention` (what goes, in what batches, what `archive --rm` refuses) are the
//! same code here as on the SQL stores; and its event batches.

use std::collections::{BTreeSet, VecDeque};

use super::{MemStore, Tables};
use crate::retention::{
    gc_archived_rows, gc_event_steps, remove_archived_rows, Compacted, Freed, GcBatch, GcRows, ROUTINE_EVENTS,
};
use crate::store::{Retention, StoreResult};
use crate::types::{Event, Status, Task, TaskId, Timestamp};

fn archived_before(t: &Task, before: Timestamp) -> bool {
    t.status == Status::Archived && t.updated_at < before
}

impl GcRows for Tables {
    fn tasks_after(
        &mut self,
        after: &str,
        before: Timestamp,
        window: usize,
    ) -> StoreResult<Vec<(String, bool)>> {
        let after = self.tasks.values().filter(|t| t.id.as_str() > after);
        Ok(after
            .take(window)
            .map(|t| (t.id.as_str().to_owned(), archived_before(t, before)))
            .collect())
    }

    fn newest_event_task(&mut self) -> StoreResult<Option<String>> {
        Ok(self.events.last().map(|e| e.task_id.as_str().to_owned()))
    }

    fn component(&mut self, seed: &str, before: Timestamp) -> StoreResult<Vec<(String, bool)>> {
        let Some(seed) = seed
            .parse::<TaskId>()
            .ok()
            .filter(|id| self.tasks.contains_key(id))
        else {
            return Ok(Vec::new());
        };
        let members = self.linked_set(&seed);
        Ok(members
            .iter()
            .filter_map(|id| self.tasks.get(id))
            .map(|t| (t.id.as_str().to_owned(), archived_before(t, before)))
            .collect())
    }

    fn remove_task(&mut self, id: &str) -> StoreResult<Freed> {
        Ok(match id.parse::<TaskId>() {
            Ok(id) => self.remove_members(&BTreeSet::from([id])),
            Err(_) => Freed::default(),
        })
    }

    /// The event counter never goes back: nothing to do.
    fn keep_event_ids(&mut self) -> StoreResult<()> {
        Ok(())
    }
}

impl Tables {
    /// The tasks linked to `seed`, directly or through others, `seed` included.
    fn linked_set(&self, seed: &TaskId) -> BTreeSet<TaskId> {
        let mut seen = BTreeSet::from([seed.clone()]);
        let mut queue = VecDeque::from([seed.clone()]);
        while let Some(node) = queue.pop_front() {
            for l in &self.links {
                let other = if l.parent_id == node {
                    &l.child_id
                } else if l.child_id == node {
                    &l.parent_id
                } else {
                    continue;
                };
                if seen.insert(other.clone()) {
                    queue.push_back(other.clone());
                }
            }
        }
        seen
    }

    /// Removes `members` with their runs, events, comments, links and leases.
    fn remove_members(&mut self, members: &BTreeSet<TaskId>) -> Freed {
        let freed = Freed {
            tasks: members.len() as u64,
            runs: self
                .runs
                .values()
                .filter(|r| members.contains(&r.task_id))
                .count() as u64,
            events: self
                .events
                .iter()
                .filter(|e| members.contains(&e.task_id))
                .count() as u64,
            comments: self
                .comments
                .iter()
                .filter(|c| members.contains(&c.task_id))
                .count() as u64,
            links: self
                .links
                .iter()
                .filter(|l| members.contains(&l.parent_id) || members.contains(&l.child_id))
                .count() as u64,
        };
        self.runs.retain(|_, r| !members.contains(&r.task_id));
        self.events.retain(|e| !members.contains(&e.task_id));
        self.comments.retain(|c| !members.contains(&c.task_id));
        self.attachments.retain(|_, (a, _)| !members.contains(&a.task_id));
        self.subscriptions
            .retain(|_, s| s.task_id.as_ref().is_none_or(|t| !members.contains(t)));
        self.links
            .retain(|l| !members.contains(&l.parent_id) && !members.contains(&l.child_id));
        self.decomposition_leases.retain(|id, _| !members.contains(id));
        self.tasks.retain(|id, _| !members.contains(id));
        freed
    }

    /// `Store::gc_archived`: the shared batch rule; a dry run works on a copy, rolled
    /// back as a SQL store's is.
    pub(super) fn gc_archived(
        &mut self,
        before: Timestamp,
        after: Option<&TaskId>,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<TaskId>)> {
        match batch.dry_run {
            false => gc_archived_rows(self, before, after, batch),
            true => gc_archived_rows(&mut self.clone(), before, after, batch),
        }
    }

    pub(super) fn gc_events(
        &mut self,
        before: Timestamp,
        after_id: i64,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<i64>)> {
        let newest = self.events.last().map_or(0, |e| e.id);
        gc_event_steps(after_id, newest, batch, |from, upto| {
            // Events are kept in id order: a step reads its own range only.
            let start = self.events.partition_point(|e| e.id <= from);
            let end = self.events.partition_point(|e| e.id <= upto);
            let tasks = &self.tasks;
            let removable = |e: &Event| {
                // The newest event stays, so that no id is ever handed out twice.
                e.id < newest
                    && e.created_at < before
                    && ROUTINE_EVENTS.iter().any(|k| e.kind == *k)
                    && tasks.get(&e.task_id).is_some_and(|t| t.status == Status::Done)
            };
            let events = self.events[start..end].iter().filter(|e| removable(e)).count();
            if !batch.dry_run && events > 0 {
                let kept: Vec<Event> = self.events.drain(start..end).filter(|e| !removable(e)).collect();
                self.events.splice(start..start, kept);
            }
            Ok(events as u64)
        })
    }
}

impl Retention for MemStore {
    fn gc_archived(
        &self,
        before: Timestamp,
        after: Option<&TaskId>,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<TaskId>)> {
        self.board().gc_archived(before, after, batch)
    }

    fn gc_events(
        &self,
        before: Timestamp,
        after_id: i64,
        batch: &GcBatch,
    ) -> StoreResult<(Freed, Option<i64>)> {
        self.board().gc_events(before, after_id, batch)
    }

    fn remove_archived(&self, id: &TaskId) -> StoreResult<Freed> {
        remove_archived_rows(&mut *self.board(), id)
    }

    fn compact(&self) -> StoreResult<Compacted> {
        Ok(Compacted {
            action: "nothing (a board in memory)".to_owned(),
            ..Compacted::default()
        })
    }
}
