//! `MemStore`'s retention batches, the reference for the SQL stores' (see
//! `crate::retention` for what is kept and why).

use std::collections::{BTreeSet, VecDeque};

use super::Board;
use crate::retention::{gc_event_steps, removal_refused, Freed, GcBatch, ROUTINE_EVENTS};
use crate::store::StoreResult;
use crate::types::{Event, Status, Task, TaskId, Timestamp};

fn archived_before(t: &Task, before: Timestamp) -> bool {
    t.status == Status::Archived && t.updated_at < before
}

impl Board {
    /// The tasks linked to `seed`, directly or through others, `seed` included.
    fn component(&self, seed: &TaskId) -> BTreeSet<TaskId> {
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

    /// Removes the component of `seed` when every task of it is archived before
    /// `before` and `seed` is its smallest id (so a component is taken once). The
    /// component holding the newest event stays, so that no event id is handed out twice.
    fn remove_component(&mut self, seed: &TaskId, before: Timestamp, dry_run: bool) -> Freed {
        let members = self.component(seed);
        let whole = members
            .iter()
            .all(|id| self.tasks.get(id).is_some_and(|t| archived_before(t, before)));
        let holds_newest = self.events.last().is_some_and(|e| members.contains(&e.task_id));
        if !whole || holds_newest || members.first() != Some(seed) {
            return Freed::default();
        }
        self.remove_members(&members, dry_run)
    }

    /// Removes `members` with their runs, events, comments, links and leases (or only
    /// counts them, with `dry_run`).
    fn remove_members(&mut self, members: &BTreeSet<TaskId>, dry_run: bool) -> Freed {
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
        if !dry_run {
            self.runs.retain(|_, r| !members.contains(&r.task_id));
            self.events.retain(|e| !members.contains(&e.task_id));
            self.comments.retain(|c| !members.contains(&c.task_id));
            self.links
                .retain(|l| !members.contains(&l.parent_id) && !members.contains(&l.child_id));
            self.decomposition_leases.retain(|id, _| !members.contains(id));
            self.tasks.retain(|id, _| !members.contains(id));
        }
        freed
    }

    /// `Store::remove_archived`: the task goes alone, once it and its whole link
    /// component are archived (`retention::removal_refused`).
    pub(super) fn remove_archived(&mut self, id: &TaskId) -> StoreResult<Freed> {
        let component: Vec<(TaskId, bool)> = match self.tasks.contains_key(id) {
            true => self
                .component(id)
                .into_iter()
                .map(|m| {
                    let archived = self.tasks.get(&m).is_some_and(|t| t.status == Status::Archived);
                    (m, archived)
                })
                .collect(),
            false => Vec::new(),
        };
        if let Some(refusal) = removal_refused(id, &component) {
            return Err(refusal.into());
        }
        Ok(self.remove_members(&BTreeSet::from([id.clone()]), false))
    }

    pub(super) fn gc_archived(
        &mut self,
        before: Timestamp,
        after: Option<&TaskId>,
        batch: &GcBatch,
    ) -> (Freed, Option<TaskId>) {
        let window = batch.window.max(1);
        let looked: Vec<TaskId> = self
            .tasks
            .keys()
            .filter(|id| after.is_none_or(|a| *id > a))
            .take(window)
            .cloned()
            .collect();
        let mut next = (looked.len() == window).then(|| looked.last().cloned()).flatten();
        let mut freed = Freed::default();
        for (at, id) in looked.iter().enumerate() {
            if !self.tasks.get(id).is_some_and(|t| archived_before(t, before)) {
                continue;
            }
            if batch.stops(freed.tasks > 0) {
                next = Some(looked[at - 1].clone());
                break;
            }
            freed.add(self.remove_component(id, before, batch.dry_run));
        }
        (freed, next)
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
                    && ROUTINE_EVENTS.contains(&e.kind.as_str())
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
