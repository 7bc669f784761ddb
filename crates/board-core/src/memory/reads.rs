//! `MemStore`'s filtered and aggregate reads: the streamed lists, the counts of `stats`
//! and the web board's charts, computed from the board in memory as the SQL stores
//! compute them in one statement.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::ControlFlow;

use super::{queue_order, Tables};
use crate::kinds::READY_AGAIN_EVENTS;
use crate::spend::Spend;
use crate::store::{EventFilter, StoreResult, TaskFilter, TriageLease, Visit};
use crate::types::{
    DaySpend, Event, Finished, Link, Status, StatusCount, Tally, Task, TaskId, TaskOrder, Timestamp,
};
use crate::LlmOutcome;

const DAY: i64 = 86_400;

/// Two tasks in a list's order, as the SQL stores order them (ties to the older task,
/// then here to the id, where they go to the rowid).
fn ordered(order: TaskOrder, a: &Task, b: &Task) -> Ordering {
    let older = a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id));
    match order {
        TaskOrder::Priority => queue_order(a, b),
        TaskOrder::Created => older,
        TaskOrder::CreatedDesc => b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)),
        TaskOrder::PriorityDesc => a.priority.cmp(&b.priority).then(older),
        TaskOrder::Assignee => {
            let name = |t: &Task| t.assignee.as_deref().unwrap_or("").as_bytes().to_vec();
            name(a).cmp(&name(b)).then(older)
        }
        TaskOrder::Updated => b.updated_at.cmp(&a.updated_at).then(older),
        TaskOrder::Title => a.title.as_bytes().cmp(b.title.as_bytes()).then(older),
        TaskOrder::Status => a.status.cmp(&b.status).then(queue_order(a, b)),
    }
}

impl Tables {
    /// Whether a path of links leads from `from` down to `to`.
    pub(super) fn reaches(&self, from: &TaskId, to: &TaskId) -> bool {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([from.clone()]);
        while let Some(node) = queue.pop_front() {
            if &node == to {
                return true;
            }
            for l in self.links.iter().filter(|l| l.parent_id == node) {
                if seen.insert(l.child_id.clone()) {
                    queue.push_back(l.child_id.clone());
                }
            }
        }
        false
    }

    /// The tasks linked to `id`, in link order; `ends` gives a link's end at `id` and
    /// the end it reads.
    pub(super) fn linked(
        &self,
        id: &TaskId,
        ends: impl Fn(&Link) -> (&TaskId, &TaskId),
    ) -> StoreResult<Vec<Task>> {
        self.task(id)?;
        let far = self.links.iter().map(ends).filter(|(near, _)| *near == id);
        Ok(far.map(|(_, far)| self.tasks[far].clone()).collect())
    }

    /// The tasks of `filter` in claim order, after its cursor, at most its limit.
    pub(super) fn filtered_tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<Task>> {
        let after = match &filter.after {
            Some(id) => Some(self.task(id)?.clone()),
            None => None,
        };
        let keep = |t: &Task| {
            filter.status.is_none_or(|s| t.status == s)
                && (filter.include_archived || filter.status.is_some() || t.status != Status::Archived)
                && filter
                    .assignee
                    .as_ref()
                    .is_none_or(|a| t.assignee.as_ref() == Some(a))
                && (!filter.unassigned || t.assignee.is_none())
                && filter
                    .tenant
                    .as_ref()
                    .is_none_or(|n| t.tenant.as_ref() == Some(n))
                && after
                    .as_ref()
                    .is_none_or(|a| ordered(filter.order, t, a) == Ordering::Greater)
        };
        let mut tasks: Vec<Task> = self.tasks.values().filter(|t| keep(t)).cloned().collect();
        tasks.sort_by(|a, b| ordered(filter.order, a, b));
        tasks.truncate(filter.limit.unwrap_or(usize::MAX));
        Ok(tasks)
    }

    fn event_matches(&self, filter: &EventFilter, e: &Event) -> bool {
        let task = self.tasks.get(&e.task_id);
        let assigned = |a: &String| task.is_some_and(|t| t.assignee.as_ref() == Some(a));
        let of_tenant = |n: &String| task.is_some_and(|t| t.tenant.as_ref() == Some(n));
        e.id > filter.after_id
            && filter.task_id.as_ref().is_none_or(|t| &e.task_id == t)
            && (filter.kinds.is_empty() || filter.kinds.contains(&e.kind))
            && filter.since.is_none_or(|at| e.created_at >= at)
            && filter.assignee.as_ref().is_none_or(assigned)
            && filter.tenant.as_ref().is_none_or(of_tenant)
    }

    pub(super) fn visit_events(
        &self,
        filter: &EventFilter,
        visit: &mut dyn FnMut(Event) -> Visit,
    ) -> StoreResult<()> {
        if let Some(id) = &filter.task_id {
            self.task(id)?;
        }
        let matching: Vec<&Event> = self
            .events
            .iter()
            .filter(|e| self.event_matches(filter, e))
            .collect();
        let limit = filter.limit.unwrap_or(usize::MAX);
        let skip = if filter.newest {
            matching.len().saturating_sub(limit)
        } else {
            0
        };
        for e in matching.into_iter().skip(skip).take(limit) {
            if visit(e.clone()).is_break() {
                break;
            }
        }
        Ok(())
    }

    pub(super) fn count_events(&self, filter: &EventFilter) -> StoreResult<u64> {
        if let Some(id) = &filter.task_id {
            self.task(id)?;
        }
        Ok(self
            .events
            .iter()
            .filter(|e| self.event_matches(filter, e))
            .count() as u64)
    }

    /// The ledger summed over the calls started at or after `since`.
    pub(super) fn spend(&self, since: Timestamp) -> Spend {
        let b = self;
        let mut sum = Spend::default();
        for call in b.llm_calls.iter().filter(|c| c.started_at >= since) {
            let one = Spend {
                requests: 1,
                prompt_tokens: call.prompt_tokens.unwrap_or(0),
                completion_tokens: call.completion_tokens.unwrap_or(0),
                cost: call.cost,
                over_budget: i64::from(call.over_budget),
                ..Spend::default()
            };
            sum.add(call.outcome.as_str().to_owned(), &one);
        }
        sum
    }

    /// Tasks by status, runs by outcome, decompositions and model requests counted.
    /// The decomposition leases on triage cards, by card.
    pub(super) fn triage_leases(&self, limit: usize) -> Vec<TriageLease> {
        let on_triage = self
            .decomposition_leases
            .iter()
            .filter(|(id, _)| self.tasks.get(*id).is_some_and(|t| t.status == Status::Triage));
        let leases = on_triage.map(|(card, (holder, expires))| TriageLease {
            card: card.clone(),
            holder: holder.clone(),
            expires: *expires,
        });
        leases.take(limit).collect()
    }

    pub(super) fn verdicts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for event in &self.events {
            if crate::kinds::VERDICT_EVENTS.iter().any(|k| event.kind == *k) {
                *counts.entry(event.kind.clone()).or_default() += 1;
            }
        }
        counts
    }

    pub(super) fn tally(&self) -> Tally {
        let b = self;
        let mut tally = Tally::default();
        for task in b.tasks.values() {
            *tally.tasks.entry(task.status.as_str().to_owned()).or_default() += 1;
        }
        for outcome in b.runs.values().filter_map(|r| r.outcome) {
            *tally.runs.entry(outcome.as_str().to_owned()).or_default() += 1;
        }
        for event in &b.events {
            if crate::kinds::DECOMPOSITION_EVENTS
                .iter()
                .any(|k| event.kind == *k)
            {
                *tally.decompositions.entry(event.kind.clone()).or_default() += 1;
            }
        }
        for call in &b.llm_calls {
            *tally
                .llm_calls
                .entry(call.outcome.as_str().to_owned())
                .or_default() += 1;
            tally.prompt_tokens += call.prompt_tokens.unwrap_or(0).max(0) as u64;
            tally.completion_tokens += call.completion_tokens.unwrap_or(0).max(0) as u64;
        }
        tally
    }

    pub(super) fn status_counts(&self) -> Vec<StatusCount> {
        StatusCount::of_tasks(self.tasks.values())
    }

    pub(super) fn oldest(&self, status: Status) -> Option<Task> {
        self.tasks
            .values()
            .filter(|t| t.status == status)
            .min_by_key(|t| (t.created_at, t.id.clone()))
            .cloned()
    }

    /// When a task last became ready before `done`: its last promotion or unblock, else
    /// its creation.
    fn ready_at(&self, t: &Task, done: Timestamp) -> Timestamp {
        self.events
            .iter()
            .filter(|e| e.task_id == t.id && READY_AGAIN_EVENTS.iter().any(|k| e.kind == *k))
            .filter(|e| e.created_at <= done)
            .map(|e| e.created_at)
            .max()
            .unwrap_or(t.created_at)
    }

    pub(super) fn finished(&self, since: Timestamp, slot: i64, bounds: &[i64]) -> Vec<Finished> {
        let mut counts: BTreeMap<(i64, usize), u64> = BTreeMap::new();
        for t in self.tasks.values() {
            let Some(done) = t.completed_at.filter(|at| *at >= since) else {
                continue;
            };
            let took = done - self.ready_at(t, done);
            let bucket = bounds.iter().position(|b| took < *b).unwrap_or(bounds.len());
            *counts.entry(((done - since) / slot.max(1), bucket)).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|((slot, bucket), tasks)| Finished { slot, bucket, tasks })
            .collect()
    }

    pub(super) fn daily_spend(&self, since: Timestamp) -> Vec<DaySpend> {
        let mut days: BTreeMap<i64, DaySpend> = BTreeMap::new();
        for c in self.llm_calls.iter().filter(|c| c.started_at >= since) {
            let day = c.started_at.div_euclid(DAY);
            let entry = days.entry(day).or_insert(DaySpend {
                day,
                ..DaySpend::default()
            });
            entry.requests += 1;
            let tokens = c.prompt_tokens.unwrap_or(0) + c.completion_tokens.unwrap_or(0);
            entry.tokens += u64::try_from(tokens).unwrap_or(0);
            entry.failures += u64::from(c.outcome != LlmOutcome::Ok);
        }
        days.into_values().collect()
    }
}

/// Hands each task to `visit` until it breaks.
pub(super) fn visit_all(tasks: Vec<Task>, visit: &mut dyn FnMut(Task) -> Visit) {
    for t in tasks {
        if let ControlFlow::Break(()) = visit(t) {
            break;
        }
    }
}
