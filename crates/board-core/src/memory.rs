//! `MemStore`: the board held in memory behind a mutex, a complete `Store`. It is the
//! reference backend: the conformance suite and the property tests run against it to
//! check the pure core, and a real backend must behave the same. Ids are drawn from
//! counters, so it is deterministic.

mod attachments;
mod children;
mod import;
mod lanes;
mod notify;
mod reads;
mod retention;
mod templates;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use crate::breaker::{observe, Breaker, BreakerSettings, BreakerSignal};
use crate::comment;
use crate::decomposition_lease::{decide_lease, lease_expiry};
use crate::graph::{self, Created, NewTask};
use crate::import::{ImportBatch, ImportOutcome};
use crate::kinds::EventKind;
use crate::plan::{self, Mode, Plan, PlanBasis, PlanSettings};
use crate::refusal::Refusal;
use crate::spend::Spend;
use crate::store::{
    BoardImport, BoardReads, BoardStats, BoardWrites, Committed, Creation, DecompositionLease, DispatchQueue,
    EventFilter, LlmLedger, StoreResult, TaskFilter, TriageLease, TriageQueue, Visit,
};
use crate::transition::{decide, Change, Fresh, NewEvent, Request, TaskFacts};
use crate::types::{
    BoardSnapshot, Comment, DaySpend, Event, Finished, Link, LlmCall, Run, RunId, Status, StatusCount, Tally,
    Task, TaskId, Timestamp,
};
use crate::LlmOutcome;

/// An in-memory board.
#[derive(Default)]
pub struct MemStore {
    board: Mutex<Tables>,
}

#[derive(Clone, Default)]
struct Tables {
    tasks: BTreeMap<TaskId, Task>,
    runs: BTreeMap<i64, Run>,
    links: BTreeSet<Link>,
    events: Vec<Event>,
    comments: Vec<Comment>,
    llm_calls: Vec<LlmCall>,
    /// Decomposition leases: card -> (holder, expiry).
    decomposition_leases: BTreeMap<TaskId, (String, Timestamp)>,
    breaker: Breaker,
    lanes: BTreeMap<String, crate::lanes::Lane>,
    attachments: BTreeMap<i64, (crate::Attachment, Vec<u8>)>,
    subscriptions: BTreeMap<i64, crate::notify::Subscription>,
    next_task: u32,
    /// The last event and comment ids handed out: ids are never handed out twice, even
    /// after the newest rows were removed (`archive --rm`, gc).
    last_event_id: i64,
    last_comment_id: i64,
    last_attachment_id: i64,
    last_subscription_id: i64,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn board(&self) -> MutexGuard<'_, Tables> {
        // A panic while holding the lock cannot leave a half-applied change: every
        // change is computed first and applied with infallible inserts.
        self.board.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Orders tasks as `list` and `claimable` do: priority desc, then age, then id.
fn queue_order(a: &Task, b: &Task) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then(a.created_at.cmp(&b.created_at))
        .then(a.id.cmp(&b.id))
}

impl plan::PlanWrites for Tables {
    fn facts(&mut self, id: &TaskId) -> StoreResult<TaskFacts> {
        Tables::facts(self, id)
    }

    fn unused_task_id(&mut self, _drawn: &[TaskId]) -> StoreResult<TaskId> {
        Ok(self.new_task_id())
    }

    fn insert_created(&mut self, child: Created, now: Timestamp) -> StoreResult<()> {
        Tables::insert_created(self, child, now);
        Ok(())
    }

    fn insert_links(&mut self, links: Vec<Link>) -> StoreResult<()> {
        self.links.extend(links);
        Ok(())
    }

    fn decomposition_lease(&mut self, id: &TaskId) -> StoreResult<Option<(String, Timestamp)>> {
        Ok(self.decomposition_leases.get(id).cloned())
    }

    fn apply(&mut self, _old: &Task, change: Change, now: Timestamp) -> StoreResult<()> {
        Tables::apply(self, change, now);
        Ok(())
    }
}

impl Tables {
    fn task(&self, id: &TaskId) -> StoreResult<&Task> {
        self.tasks
            .get(id)
            .ok_or_else(|| Refusal::NoSuchTask(id.clone()).into())
    }

    fn new_task_id(&mut self) -> TaskId {
        self.next_task += 1;
        TaskId::from_random(self.next_task.to_be_bytes())
    }

    fn facts(&self, id: &TaskId) -> StoreResult<TaskFacts> {
        let task = self.task(id)?.clone();
        let runs: Vec<&Run> = self.runs.values().filter(|r| &r.task_id == id).collect();
        let open_parents = self
            .links
            .iter()
            .filter(|l| &l.child_id == id)
            .filter(|l| !self.tasks[&l.parent_id].status.releases_children())
            .count() as i64;
        Ok(TaskFacts {
            newest_run: runs.last().map(|r| (*r).clone()),
            run_count: runs.len() as i64,
            open_parents,
            decomposed: self
                .events
                .iter()
                .any(|e| &e.task_id == id && e.kind == EventKind::Decomposed),
            task,
        })
    }

    fn next_event_id(&mut self) -> i64 {
        self.last_event_id += 1;
        self.last_event_id
    }

    fn next_comment_id(&mut self) -> i64 {
        self.last_comment_id += 1;
        self.last_comment_id
    }

    fn push_events(&mut self, task_id: &TaskId, events: Vec<NewEvent>, now: Timestamp) {
        for e in events {
            let id = self.next_event_id();
            self.events.push(Event {
                id,
                task_id: task_id.clone(),
                run_id: e.run_id,
                kind: e.kind.as_str().to_owned(),
                payload: e.payload,
                created_at: now,
            });
        }
    }

    fn apply(&mut self, change: Change, now: Timestamp) {
        let id = change.task.id.clone();
        for run in change.runs {
            self.runs.insert(run.id, run);
        }
        self.tasks.insert(id.clone(), change.task);
        self.push_events(&id, change.events, now);
        if let Some(c) = change.comment {
            let comment = Comment {
                id: self.next_comment_id(),
                task_id: id.clone(),
                author: c.author,
                body: c.body,
                created_at: now,
            };
            let event = comment::event(comment.id, comment.author.as_deref(), None);
            self.comments.push(comment);
            self.push_events(&id, vec![event], now);
        }
        self.follow_children(&id, change.hold_children, change.wake_children, now);
    }

    fn insert_created(&mut self, created: Created, now: Timestamp) {
        let id = created.task.id.clone();
        self.tasks.insert(id.clone(), created.task);
        self.links.extend(created.links);
        self.push_events(&id, created.events, now);
    }

    fn transition(&mut self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task> {
        let facts = self.facts(id)?;
        let fresh = Fresh {
            run_id: self.runs.keys().next_back().map_or(1, |r| r + 1),
            claim_lock: format!("lock-{}", self.last_event_id + 1),
        };
        let change = decide(&facts, request, &fresh, now)?;
        if change.hold_children {
            self.may_hold_children(id)?;
        }
        let task = change.task.clone();
        self.apply(change, now);
        Ok(self.tasks.get(id).cloned().unwrap_or(task))
    }

    fn sorted(&self, keep: impl Fn(&Task) -> bool, limit: usize) -> Vec<Task> {
        let mut out: Vec<Task> = self.tasks.values().filter(|t| keep(t)).cloned().collect();
        out.sort_by(queue_order);
        out.truncate(limit);
        out
    }

    fn link(&mut self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        let p = self.task(parent)?.clone();
        let facts = self.facts(child)?;
        let exists = self.links.contains(&Link {
            parent_id: parent.clone(),
            child_id: child.clone(),
        });
        let cycle = parent != child && self.reaches(child, parent);
        let change = graph::link(&p, &facts, cycle, exists, now)?;
        self.links.insert(Link {
            parent_id: parent.clone(),
            child_id: child.clone(),
        });
        self.apply(change, now);
        Ok(())
    }
}

impl BoardReads for MemStore {
    fn get(&self, id: &TaskId) -> StoreResult<Task> {
        self.board().task(id).cloned()
    }

    fn for_each_task(&self, filter: &TaskFilter, visit: &mut dyn FnMut(Task) -> Visit) -> StoreResult<()> {
        let tasks = self.board().filtered_tasks(filter)?;
        reads::visit_all(tasks, visit);
        Ok(())
    }

    fn parents(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        self.board().linked(id, |l| (&l.child_id, &l.parent_id))
    }

    fn children(&self, id: &TaskId) -> StoreResult<Vec<Task>> {
        self.board().linked(id, |l| (&l.parent_id, &l.child_id))
    }

    fn facts(&self, id: &TaskId) -> StoreResult<TaskFacts> {
        self.board().facts(id)
    }

    fn comments(&self, id: &TaskId) -> StoreResult<Vec<Comment>> {
        let b = self.board();
        b.task(id)?;
        Ok(b.comments.iter().filter(|c| &c.task_id == id).cloned().collect())
    }

    fn runs(&self, id: &TaskId) -> StoreResult<Vec<Run>> {
        let b = self.board();
        b.task(id)?;
        Ok(b.runs.values().filter(|r| &r.task_id == id).cloned().collect())
    }

    fn for_each_event(&self, filter: &EventFilter, visit: &mut dyn FnMut(Event) -> Visit) -> StoreResult<()> {
        self.board().visit_events(filter, visit)
    }

    fn count_events(&self, filter: &EventFilter) -> StoreResult<u64> {
        self.board().count_events(filter)
    }
}

impl BoardWrites for MemStore {
    fn create_or_find(&self, request: &NewTask, now: Timestamp) -> StoreResult<Creation> {
        let mut b = self.board();
        if let Some(key) = &request.idempotency_key {
            if let Some(t) = b.tasks.values().find(|t| t.idempotency_key.as_ref() == Some(key)) {
                return Ok(Creation::Exists(t.clone()));
            }
        }
        let parents = request
            .parents
            .iter()
            .map(|p| b.task(p).cloned())
            .collect::<StoreResult<Vec<Task>>>()?;
        let id = b.new_task_id();
        let created = graph::create(request, id, &parents, now)?;
        let task = created.task.clone();
        b.insert_created(created, now);
        Ok(Creation::Created(task))
    }

    fn transition(&self, id: &TaskId, request: &Request, now: Timestamp) -> StoreResult<Task> {
        self.board().transition(id, request, now)
    }

    fn link(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        self.board().link(parent, child, now)
    }

    fn unlink(&self, parent: &TaskId, child: &TaskId, now: Timestamp) -> StoreResult<()> {
        let mut b = self.board();
        b.task(parent)?;
        b.task(child)?;
        let link = Link {
            parent_id: parent.clone(),
            child_id: child.clone(),
        };
        let exists = b.links.remove(&link);
        let facts = b.facts(child)?;
        match graph::unlink(parent, &facts, exists, now) {
            Ok(change) => {
                b.apply(change, now);
                Ok(())
            }
            Err(refusal) => {
                if exists {
                    b.links.insert(link);
                }
                Err(refusal.into())
            }
        }
    }

    fn comment(
        &self,
        id: &TaskId,
        author: Option<&str>,
        body: &str,
        guard: Option<RunId>,
        now: Timestamp,
    ) -> StoreResult<Comment> {
        let mut b = self.board();
        comment::admit(b.task(id)?, author, body, guard)?;
        let comment = Comment {
            id: b.next_comment_id(),
            task_id: id.clone(),
            author: author.map(str::to_owned),
            body: body.to_owned(),
            created_at: now,
        };
        b.comments.push(comment.clone());
        b.push_events(id, vec![comment::event(comment.id, author, guard)], now);
        Ok(comment)
    }
}

impl DispatchQueue for MemStore {
    fn promote_ready(&self, now: Timestamp) -> StoreResult<Vec<TaskId>> {
        let mut b = self.board();
        let todo: Vec<TaskId> = b
            .sorted(|t| t.status == Status::Todo, usize::MAX)
            .into_iter()
            .map(|t| t.id)
            .collect();
        Ok(todo.into_iter().filter(|id| b.promote(id, now)).collect())
    }

    fn promotable(&self) -> StoreResult<Vec<TaskId>> {
        let b = self.board();
        let todo = b.sorted(|t| t.status == Status::Todo, usize::MAX);
        Ok(todo
            .into_iter()
            .filter(|t| b.facts(&t.id).is_ok_and(|f| f.open_parents == 0))
            .map(|t| t.id)
            .collect())
    }

    fn due_scheduled(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<TaskId>> {
        let b = self.board();
        let mut due: Vec<(Timestamp, TaskId)> = b
            .tasks
            .values()
            .filter(|t| t.status == Status::Scheduled)
            .filter_map(|t| {
                t.scheduled_until
                    .filter(|&at| at <= now)
                    .map(|at| (at, t.id.clone()))
            })
            .collect();
        due.sort();
        Ok(due.into_iter().take(limit).map(|(_, id)| id).collect())
    }

    fn next_scheduled(&self, after: Timestamp) -> StoreResult<Option<Timestamp>> {
        let b = self.board();
        let waiting = b.tasks.values().filter(|t| t.status == Status::Scheduled);
        Ok(waiting
            .filter_map(|t| t.scheduled_until)
            .filter(|&at| at > after)
            .min())
    }

    fn claimable_except(&self, limit: usize, external: &[String]) -> StoreResult<Vec<Task>> {
        let external = |t: &Task| t.assignee.as_ref().is_some_and(|a| external.contains(a));
        Ok(self
            .board()
            .sorted(|t| t.status == Status::Ready && !external(t), limit))
    }

    fn checkable(&self, limit: usize) -> StoreResult<Vec<Task>> {
        let waiting = |t: &Task| matches!(t.status, Status::Verifying | Status::Review);
        Ok(self.board().sorted(waiting, limit))
    }

    fn expired_leases(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let mut expired = self.board().sorted(
            |t| t.status == Status::Running && t.lease.as_ref().is_some_and(|l| l.expires <= now),
            usize::MAX,
        );
        expired.sort_by_key(|t| (t.lease.as_ref().map(|l| l.expires), t.id.clone()));
        expired.truncate(limit);
        Ok(expired)
    }

    fn running(&self) -> StoreResult<Vec<Task>> {
        Ok(self.board().sorted(|t| t.status == Status::Running, usize::MAX))
    }
}

impl TriageQueue for MemStore {
    fn due_triage(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Task>> {
        let b = self.board();
        let mut due: Vec<Task> = b
            .tasks
            .values()
            .filter(|t| {
                // The core's rule for an automatic decomposition, and no lease holding.
                t.status == Status::Triage
                    && b.facts(&t.id)
                        .is_ok_and(|f| plan::automatic_guard(&f, now).is_ok())
                    && b.decomposition_leases
                        .get(&t.id)
                        .is_none_or(|(_, until)| *until <= now)
            })
            .cloned()
            .collect();
        due.sort_by_key(|t| {
            (
                t.decompose_next_attempt_at.unwrap_or(t.created_at),
                t.created_at,
                t.id.clone(),
            )
        });
        due.truncate(limit);
        Ok(due)
    }

    fn commit_plan(
        &self,
        id: &TaskId,
        basis: &PlanBasis,
        mode: Mode,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed> {
        plan::write_plan(&mut *self.board(), id, basis, mode, plan, settings, now)
    }

    fn lease_decomposition(
        &self,
        id: &TaskId,
        holder: &str,
        ttl: i64,
        now: Timestamp,
        abandoned: Option<&str>,
    ) -> StoreResult<DecompositionLease> {
        let mut b = self.board();
        b.task(id)?;
        let current = b.decomposition_leases.get(id).map(|(h, e)| (h.as_str(), *e));
        let decision = decide_lease(current, now, abandoned);
        if !matches!(decision, DecompositionLease::Held { .. }) {
            b.decomposition_leases
                .insert(id.clone(), (holder.to_owned(), lease_expiry(ttl, now)));
        }
        Ok(decision)
    }

    fn release_decomposition(&self, id: &TaskId, holder: &str) -> StoreResult<()> {
        let mut b = self.board();
        b.decomposition_leases
            .retain(|card, (h, _)| card != id || h != holder);
        Ok(())
    }

    fn triage_leases(&self, limit: usize) -> StoreResult<Vec<TriageLease>> {
        Ok(self.board().triage_leases(limit))
    }
}

impl LlmLedger for MemStore {
    fn record_llm_call(&self, call: &LlmCall) -> StoreResult<i64> {
        let mut b = self.board();
        b.llm_calls.push(call.clone());
        Ok(b.llm_calls.len() as i64)
    }

    fn finish_llm_call(&self, id: i64, call: &LlmCall) -> StoreResult<bool> {
        let mut b = self.board();
        let row = usize::try_from(id.saturating_sub(1))
            .ok()
            .and_then(|at| b.llm_calls.get_mut(at));
        let open = row.filter(|r| r.outcome == LlmOutcome::Sent);
        Ok(open.map(|r| *r = call.clone()).is_some())
    }

    fn llm_calls(&self, task_id: Option<&TaskId>) -> StoreResult<Vec<LlmCall>> {
        Ok(self
            .board()
            .llm_calls
            .iter()
            .filter(|c| task_id.is_none_or(|t| c.task_id.as_ref() == Some(t)))
            .cloned()
            .collect())
    }

    fn spend(&self, since: Timestamp) -> StoreResult<Spend> {
        Ok(self.board().spend(since))
    }

    fn breaker(&self) -> StoreResult<Breaker> {
        Ok(self.board().breaker.clone())
    }

    fn signal_breaker(
        &self,
        signal: &BreakerSignal,
        settings: &BreakerSettings,
        now: Timestamp,
    ) -> StoreResult<(Breaker, Option<EventKind>)> {
        let mut b = self.board();
        let Some(change) = observe(&b.breaker, signal, settings, now) else {
            return Ok((b.breaker.clone(), None));
        };
        b.task(&change.card)?;
        let kind = change.event.as_ref().map(|e| e.kind);
        b.push_events(&change.card, change.event.into_iter().collect(), now);
        b.breaker = change.breaker.clone();
        Ok((change.breaker, kind))
    }

    fn daily_spend(&self, since: Timestamp) -> StoreResult<Vec<DaySpend>> {
        Ok(self.board().daily_spend(since))
    }
}

impl BoardStats for MemStore {
    fn tally(&self) -> StoreResult<Tally> {
        Ok(self.board().tally())
    }

    fn status_counts(&self) -> StoreResult<Vec<StatusCount>> {
        Ok(self.board().status_counts())
    }

    fn verdicts(&self) -> StoreResult<BTreeMap<String, u64>> {
        Ok(self.board().verdicts())
    }

    fn oldest(&self, status: Status) -> StoreResult<Option<Task>> {
        Ok(self.board().oldest(status))
    }

    fn finished(&self, since: Timestamp, slot: i64, bounds: &[i64]) -> StoreResult<Vec<Finished>> {
        Ok(self.board().finished(since, slot, bounds))
    }

    fn snapshot(&self) -> StoreResult<BoardSnapshot> {
        let b = self.board();
        Ok(BoardSnapshot {
            tasks: b.tasks.values().cloned().collect(),
            runs: b.runs.values().cloned().collect(),
            links: b.links.iter().cloned().collect(),
            events: b.events.clone(),
        })
    }
}

impl BoardImport for MemStore {
    fn import(&self, batch: &ImportBatch, now: Timestamp) -> StoreResult<ImportOutcome> {
        crate::import::import_batch(&mut *self.board(), batch, now)
    }
}
