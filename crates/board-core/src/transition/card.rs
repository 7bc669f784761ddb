//! The requests on a task's card: archive, edit, assign, promote and the decomposition's
//! failure record.

use serde_json::json;

use super::next::Next;
use super::{retry_delay, Backfill, ByHand};
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::types::{Outcome, Status, TaskId};

impl Next<'_> {
    pub(super) fn archive(&mut self) -> Result<(), Refusal> {
        if self.task.status == Status::Archived {
            return Err(Refusal::WrongStatus {
                id: self.task.id.clone(),
                status: Status::Archived,
                op: "archive",
                allowed: "any status but archived",
            });
        }
        let archived_from = self.task.status;
        let reason = Some("archived".to_owned());
        if let Some(run_id) = self.close_current_run(Outcome::Reclaimed, None, reason.as_ref(), None) {
            self.event(EventKind::Reclaimed, Some(run_id), json!({ "reason": reason }));
        }
        self.release_claim();
        self.task.status = Status::Archived;
        self.wake_children = true;
        self.event(EventKind::Archived, None, json!({ "from": archived_from }));
        Ok(())
    }

    pub(super) fn edit(
        &mut self,
        title: &Option<String>,
        body: &Option<String>,
        priority: Option<i64>,
    ) -> Result<(), Refusal> {
        self.require(
            &[
                Status::Triage,
                Status::Todo,
                Status::Ready,
                Status::Running,
                Status::Blocked,
                Status::Scheduled,
            ],
            "edit",
            "a task that is not done or archived",
        )?;
        if title.is_none() && body.is_none() && priority.is_none() {
            return Err(Refusal::Unchanged(self.task.id.clone()));
        }
        if let Some(title) = title {
            if title.trim().is_empty() {
                return Err(Refusal::BlankTitle);
            }
            self.task.title = title.clone();
        }
        if let Some(body) = body {
            self.task.body = body.clone();
        }
        if let Some(priority) = priority {
            self.task.priority = priority;
        }
        if title.is_some() || body.is_some() {
            self.task.revision += 1;
        }
        let fields: Vec<&str> = [
            title.as_ref().map(|_| "title"),
            body.as_ref().map(|_| "body"),
            priority.map(|_| "priority"),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.event(
            EventKind::Edited,
            None,
            json!({ "fields": fields, "revision": self.task.revision }),
        );
        self.clear_decompose_state();
        Ok(())
    }

    pub(super) fn assign(&mut self, assignee: &Option<String>) -> Result<(), Refusal> {
        if self.task.status == Status::Running {
            return Err(Refusal::Running {
                id: self.task.id.clone(),
                op: "assign",
            });
        }
        self.require(
            &[
                Status::Triage,
                Status::Todo,
                Status::Ready,
                Status::Blocked,
                Status::Scheduled,
                Status::Done,
            ],
            "assign",
            "a task that is not running or archived",
        )?;
        let from = self.task.assignee.clone();
        self.task.assignee = assignee.clone();
        self.task.revision += 1;
        self.event(EventKind::Assigned, None, json!({ "from": from, "to": assignee }));
        Ok(())
    }

    pub(super) fn promote(&mut self) -> Result<(), Refusal> {
        self.require(&[Status::Todo], "promote", "todo")?;
        if self.facts.open_parents > 0 {
            return Err(Refusal::OpenParents {
                id: self.task.id.clone(),
                open: self.facts.open_parents,
            });
        }
        self.task.status = Status::Ready;
        self.event(EventKind::Promoted, None, json!({}));
        Ok(())
    }

    /// A person moves a `todo` or `blocked` task to `ready` (`kanban promote`), refused
    /// while a parent is open. The assignee and the block's record stay.
    pub(super) fn promote_by_hand(&mut self, hand: &ByHand) -> Result<(), Refusal> {
        self.require(&[Status::Todo, Status::Blocked], "promote", "todo or blocked")?;
        if self.facts.open_parents > 0 {
            return Err(Refusal::OpenParents {
                id: self.task.id.clone(),
                open: self.facts.open_parents,
            });
        }
        let from = self.task.status;
        self.task.status = Status::Ready;
        self.event(
            EventKind::Promoted,
            None,
            json!({ "from": from, "by": hand.by, "reason": hand.reason }),
        );
        Ok(())
    }

    /// A person takes a `done` or `archived` task back into work (`kanban reopen`): it
    /// waits for its open parents again, else is ready; its result is kept until the
    /// next completion replaces it. Its children wait for it again: a ready child goes
    /// back to `todo`, and a running one refuses the reopen.
    pub(super) fn reopen(&mut self, hand: &ByHand) -> Result<(), Refusal> {
        self.require(&[Status::Done, Status::Archived], "reopen", "done or archived")?;
        let from = self.task.status;
        self.task.status = self.workable_status();
        self.task.completed_at = None;
        self.task.block_kind = None;
        self.task.block_recurrences = 0;
        self.task.consecutive_failures = 0;
        self.hold_children = true;
        self.event(
            EventKind::Reopened,
            None,
            json!({ "from": from, "to": self.task.status, "by": hand.by, "reason": hand.reason }),
        );
        Ok(())
    }

    /// `edit --result` on a done task: the result, and on its completed run the summary
    /// (the result when none is given) and the metadata; without such a run, only the
    /// result can be set.
    pub(super) fn backfill(&mut self, filled: &Backfill) -> Result<(), Refusal> {
        let Backfill {
            result,
            summary,
            metadata,
        } = filled;
        self.require(&[Status::Done], "edit --result", "done")?;
        let completed = (self.facts.newest_run.clone()).filter(|r| r.outcome == Some(Outcome::Completed));
        let mut fields = vec!["result"];
        let run_id = match completed {
            Some(mut run) => {
                run.summary = Some(summary.clone().unwrap_or_else(|| result.clone()));
                fields.push("summary");
                if let Some(metadata) = metadata {
                    run.metadata = Some(metadata.clone());
                    fields.push("metadata");
                }
                let id = run.id;
                self.runs.push(run);
                Some(id)
            }
            None if summary.is_some() || metadata.is_some() => {
                return Err(Refusal::NoCompletedRun(self.task.id.clone()));
            }
            None => None,
        };
        self.task.result = Some(result.clone());
        self.event(EventKind::Edited, run_id, json!({ "fields": fields }));
        Ok(())
    }

    /// A parent was reopened: a ready task waits for it in `todo`; a running one refuses.
    pub(super) fn hold(&mut self, parent: &TaskId) -> Result<(), Refusal> {
        if self.task.status == Status::Running {
            return Err(Refusal::ChildStarted {
                parent: parent.clone(),
                child: self.task.id.clone(),
            });
        }
        self.require(&[Status::Ready], "hold", "ready")?;
        self.task.status = Status::Todo;
        self.event(
            EventKind::DependencyWait,
            None,
            json!({ "reason": "a parent was reopened", "parent": parent, "open_parents": self.facts.open_parents }),
        );
        Ok(())
    }

    /// The dispatcher cannot start a worker for this ready task: recorded, unchanged.
    pub(super) fn skip_nonspawnable(&mut self, profile: &str) -> Result<(), Refusal> {
        self.require(&[Status::Ready], "skip", "ready")?;
        self.event(
            EventKind::SkippedNonspawnable,
            None,
            json!({ "profile": profile }),
        );
        Ok(())
    }

    pub(super) fn decompose_failed(
        &mut self,
        error: &str,
        base_seconds: i64,
        limit: i64,
        jitter: f64,
    ) -> Result<(), Refusal> {
        self.require(&[Status::Triage], "recording a decomposition failure", "triage")?;
        let failures = self.task.decompose_failures + 1;
        let next_attempt_at = self.now + retry_delay(base_seconds, failures, jitter);
        let parked = failures >= limit.max(1);
        self.task.decompose_failures = failures;
        self.task.decompose_last_error = Some(error.to_owned());
        self.task.decompose_next_attempt_at = Some(next_attempt_at);
        self.task.decompose_parked = parked;
        self.event(
            EventKind::AutoDecomposeFailed,
            None,
            json!({
                "error": error,
                "failures": failures,
                "next_attempt_at": next_attempt_at,
                "parked": parked,
            }),
        );
        if parked {
            self.event(
                EventKind::AutoDecomposeParked,
                None,
                json!({ "failures": failures, "error": error }),
            );
        }
        Ok(())
    }

    pub(super) fn clear_decompose_failures(&mut self) -> Result<(), Refusal> {
        if !self.clear_decompose_state() {
            return Err(Refusal::Unchanged(self.task.id.clone()));
        }
        self.event(EventKind::DecomposeReset, None, json!({}));
        Ok(())
    }

    /// Clears the failure count and the park; returns whether there was anything to clear.
    pub(super) fn clear_decompose_state(&mut self) -> bool {
        let t = &mut self.task;
        let had = t.decompose_failures != 0
            || t.decompose_parked
            || t.decompose_next_attempt_at.is_some()
            || t.decompose_last_error.is_some();
        t.decompose_failures = 0;
        t.decompose_parked = false;
        t.decompose_next_attempt_at = None;
        t.decompose_last_error = None;
        had
    }
}
