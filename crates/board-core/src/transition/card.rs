//! The requests on a task's card: archive, edit, assign, promote and the decomposition's
//! failure record.

use serde_json::json;

use super::next::Next;
use super::retry_delay;
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::types::{Outcome, Status};

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
