//! What a change does to a task's children in `MemStore`: promote those it no longer
//! holds back (`wake_children`), or hold the ready ones back again (`hold_children`, a
//! reopen), as the SQL stores do in the change's transaction.

use super::Tables;
use crate::refusal::Refusal;
use crate::store::StoreResult;
use crate::transition::{decide, Fresh, Request};
use crate::types::{Link, Status, TaskId, Timestamp};

impl Tables {
    /// The children of `id` in `status`.
    fn children_in(&self, id: &TaskId, status: Status) -> Vec<TaskId> {
        let child = |l: &Link| (l.parent_id == *id).then(|| l.child_id.clone());
        let children = self.links.iter().filter_map(child);
        children
            .filter(|c| self.tasks.get(c).is_some_and(|t| t.status == status))
            .collect()
    }

    /// Refuses a change that would hold back a running child (decided before anything
    /// is applied: this store applies changes without a transaction to roll back).
    pub(super) fn may_hold_children(&self, id: &TaskId) -> StoreResult<()> {
        match self.children_in(id, Status::Running).first() {
            Some(running) => Err(Refusal::ChildStarted {
                parent: id.clone(),
                child: running.clone(),
            }
            .into()),
            None => Ok(()),
        }
    }

    /// After `id`'s change: its ready children held back, or its children promoted.
    pub(super) fn follow_children(&mut self, id: &TaskId, hold: bool, wake: bool, now: Timestamp) {
        if hold {
            let hold = Request::Hold { parent: id.clone() };
            for child in self.children_in(id, Status::Ready) {
                let held = self
                    .facts(&child)
                    .and_then(|f| Ok(decide(&f, &hold, &Fresh::default(), now)?));
                if let Ok(held) = held {
                    self.apply(held, now);
                }
            }
        }
        if wake {
            let children: Vec<TaskId> = self
                .links
                .iter()
                .filter(|l| l.parent_id == *id)
                .map(|l| l.child_id.clone())
                .collect();
            for child in children {
                self.promote(&child, now);
            }
        }
    }

    /// Promotes one task when the core agrees; returns whether it did.
    pub(super) fn promote(&mut self, id: &TaskId, now: Timestamp) -> bool {
        let Ok(facts) = self.facts(id) else {
            return false;
        };
        match decide(&facts, &Request::Promote, &Fresh::default(), now) {
            Ok(change) => {
                self.apply(change, now);
                true
            }
            Err(_) => false,
        }
    }
}
