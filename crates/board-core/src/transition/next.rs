//! The change being built for one task: the guards every request checks, the run it closes
//! and the lease it releases.

use serde_json::Value;

use super::{Change, NewComment, NewEvent, TaskFacts};
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::types::{Outcome, Run, RunId, RunKind, RunStatus, Status, Task, Timestamp};

/// The change being built for one task.
pub(super) struct Next<'a> {
    pub(super) facts: &'a TaskFacts,
    pub(super) now: Timestamp,
    pub(super) task: Task,
    pub(super) runs: Vec<Run>,
    pub(super) events: Vec<NewEvent>,
    pub(super) wake_children: bool,
    pub(super) hold_children: bool,
    pub(super) comment: Option<NewComment>,
}

impl<'a> Next<'a> {
    pub(super) fn new(facts: &'a TaskFacts, now: Timestamp) -> Next<'a> {
        Next {
            facts,
            now,
            task: facts.task.clone(),
            runs: Vec::new(),
            events: Vec::new(),
            wake_children: false,
            hold_children: false,
            comment: None,
        }
    }

    pub(super) fn into_change(mut self) -> Change {
        self.task.updated_at = self.now;
        // A time to wait for belongs to the scheduled status alone (invariant 9).
        if self.task.status != Status::Scheduled {
            self.task.scheduled_until = None;
            self.task.recurrence = None;
        }
        Change {
            task: self.task,
            runs: self.runs,
            events: self.events,
            wake_children: self.wake_children,
            hold_children: self.hold_children,
            comment: self.comment,
        }
    }

    pub(super) fn event(&mut self, kind: EventKind, run_id: Option<RunId>, payload: Value) {
        self.events.push(NewEvent::new(kind, run_id, payload));
    }

    pub(super) fn require(
        &self,
        allowed: &[Status],
        op: &'static str,
        wording: &'static str,
    ) -> Result<(), Refusal> {
        if allowed.contains(&self.task.status) {
            Ok(())
        } else {
            Err(Refusal::WrongStatus {
                id: self.task.id.clone(),
                status: self.task.status,
                op,
                allowed: wording,
            })
        }
    }

    /// Refuses unless `run_id` is the task's current run.
    pub(super) fn require_current(&self, run_id: RunId) -> Result<(), Refusal> {
        if self.task.current_run_id() == Some(run_id) {
            Ok(())
        } else {
            Err(Refusal::StaleRun {
                id: self.task.id.clone(),
                expected: run_id,
                current: self.task.current_run_id(),
            })
        }
    }

    /// Refuses unless the task still runs `run_id` under `claim_lock`: the claim a
    /// supervisor observed before acting is the claim it finalises, or nothing happens.
    pub(super) fn require_claim(&self, run_id: RunId, claim_lock: &str) -> Result<&'a Run, Refusal> {
        let unchanged = self.task.status == Status::Running
            && self
                .task
                .lease
                .as_ref()
                .is_some_and(|l| l.run_id == run_id && l.claim_lock == claim_lock);
        match self.facts.current_run() {
            Some(run) if unchanged => Ok(run),
            _ => Err(Refusal::ClaimChanged {
                id: self.task.id.clone(),
                run_id,
            }),
        }
    }

    /// The kind of the task's open run, while it runs.
    pub(super) fn current_kind(&self) -> Option<RunKind> {
        self.facts.current_run().map(|r| r.kind)
    }

    /// Where a task goes when its open run ends without a verdict (a crash, a timeout,
    /// a reclaim): back to where that kind of run is claimed from, so finished work
    /// waiting for a check is never lost to a checker's failure.
    pub(super) fn waiting_status(&self) -> Status {
        match self.current_kind() {
            None | Some(RunKind::Work) => self.workable_status(),
            Some(kind) => kind.waiting_status(),
        }
    }

    /// Where a task goes when it becomes workable again.
    pub(super) fn workable_status(&self) -> Status {
        if self.facts.open_parents > 0 {
            Status::Todo
        } else {
            Status::Ready
        }
    }

    pub(super) fn release_claim(&mut self) {
        self.task.lease = None;
    }

    /// Closes the current run, if any, with `outcome`; returns its id.
    pub(super) fn close_current_run(
        &mut self,
        outcome: Outcome,
        summary: Option<&String>,
        error: Option<&String>,
        metadata: Option<&Value>,
    ) -> Option<RunId> {
        let mut run = self.facts.current_run()?.clone();
        run.status = RunStatus::Ended;
        run.outcome = Some(outcome);
        run.ended_at = Some(self.now);
        run.claim_expires = None;
        if summary.is_some() {
            run.summary = summary.cloned();
        }
        if error.is_some() {
            run.error = error.cloned();
        }
        if metadata.is_some() {
            run.metadata = metadata.cloned();
        }
        let id = run.id;
        self.runs.push(run);
        self.release_claim();
        Some(id)
    }
}
