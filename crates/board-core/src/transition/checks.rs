//! The checks work passes before it counts (docs/board.md#checks): reported work goes
//! to its verifiers (`verifying`), then to its reviewer (`review`), then to `done`; a
//! failed verification or a reviewer's requested changes send it back to `ready` with a
//! comment the next worker reads, and too many of either block it.

use serde_json::{json, Value};

use super::next::Next;
use super::{Completion, NewComment, Request, Verdict};
use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::types::{Checks, Outcome, RunId, RunKind, Status};

/// The author of the comment a failed verification leaves.
pub const VERIFIER_AUTHOR: &str = "verifier";

impl Next<'_> {
    /// Decides a request of the checks: a verdict, a request for review, a review's
    /// verdict, a reopened review.
    pub(super) fn check(&mut self, request: &Request) -> Result<(), Refusal> {
        match request {
            Request::Verified(verdict) => self.verified(verdict),
            Request::RequestReview {
                expected_run_id,
                reviewer,
                summary,
                result,
            } => self.request_review(*expected_run_id, reviewer, summary, result),
            Request::RequestChanges {
                expected_run_id,
                author,
                reason,
                round_limit,
            } => self.request_changes(*expected_run_id, author, reason, *round_limit),
            Request::Approve {
                expected_run_id,
                summary,
            } => self.approve(*expected_run_id, summary),
            Request::ReopenReview { reason } => self.reopen_review(reason),
            other => Err(Refusal::Invalid(format!("{} is not a check", other.verb()))),
        }
    }

    /// The profile a review run is claimed for: the task's reviewer, never the profile
    /// that did the work.
    pub(super) fn reviewer_for_claim(&self) -> Result<String, Refusal> {
        let reviewer = self.task.reviewer.clone().ok_or_else(|| Refusal::NoReviewer {
            id: self.task.id.clone(),
        })?;
        self.refuse_self_review(&reviewer)?;
        Ok(reviewer)
    }

    fn refuse_self_review(&self, reviewer: &str) -> Result<(), Refusal> {
        if self.task.assignee.as_deref() == Some(reviewer) {
            return Err(Refusal::SelfReview {
                id: self.task.id.clone(),
                profile: reviewer.to_owned(),
            });
        }
        Ok(())
    }

    pub(super) fn wrong_kind(&self, kind: RunKind, op: &'static str, needs: &'static str) -> Refusal {
        Refusal::WrongRunKind {
            id: self.task.id.clone(),
            run_id: self.task.current_run_id().unwrap_or_default(),
            kind,
            op,
            needs,
        }
    }

    /// Keeps `evidence` on the run the change just closed.
    pub(super) fn keep_evidence(&mut self, evidence: Option<&Value>) {
        if let (Some(evidence), Some(run)) = (evidence, self.runs.last_mut()) {
            run.evidence = Some(evidence.clone());
        }
    }

    /// Where a worker's reported work goes once its run closed: to its verifiers when
    /// its checks name them, else to its reviewer when it has one, else to `done`.
    pub(super) fn route_reported_work(
        &mut self,
        checks: &Checks,
        c: &Completion,
        run_id: Option<RunId>,
    ) -> Result<(), Refusal> {
        if checks.review && self.task.reviewer.is_none() {
            self.task.reviewer = checks.reviewer.clone();
        }
        if c.result.is_some() {
            self.task.result = c.result.clone();
        }
        if checks.verify {
            self.task.status = Status::Verifying;
            self.event(EventKind::Verifying, run_id, json!({ "summary": c.summary }));
        } else if checks.review || self.task.reviewer.is_some() {
            self.send_to_review(run_id, &c.summary);
        } else {
            self.finish_done(c, run_id, c.replay_ended_run_id.is_some());
        }
        Ok(())
    }

    fn send_to_review(&mut self, run_id: Option<RunId>, summary: &Option<String>) {
        self.task.status = Status::Review;
        self.event(
            EventKind::ReviewRequested,
            run_id,
            json!({ "reviewer": self.task.reviewer, "summary": summary }),
        );
    }

    pub(super) fn verified(&mut self, v: &Verdict) -> Result<(), Refusal> {
        self.require_current(v.run_id)?;
        let review = match self.facts.current_run() {
            Some(run) if run.kind == RunKind::Verify => run.checks.review,
            run => {
                let kind = run.map(|r| r.kind).unwrap_or_default();
                return Err(self.wrong_kind(kind, "a verdict", "verify"));
            }
        };
        let outcome = if v.passed {
            Outcome::Completed
        } else {
            Outcome::VerifyFailed
        };
        self.close_current_run(outcome, None, v.failure.as_ref(), None);
        self.keep_evidence(Some(&v.evidence));
        let run_id = Some(v.run_id);
        if v.passed {
            self.event(EventKind::Verified, run_id, json!({}));
            if review || self.task.reviewer.is_some() {
                self.send_to_review(run_id, &None);
            } else {
                self.finish_done(&Completion::default(), run_id, false);
            }
            return Ok(());
        }
        self.task.verify_failures += 1;
        let failures = self.task.verify_failures;
        let failure = v
            .failure
            .clone()
            .unwrap_or_else(|| "a verifier failed".to_owned());
        self.comment = Some(NewComment {
            author: Some(VERIFIER_AUTHOR.to_owned()),
            body: format!(
                "VERIFICATION FAILED ({failures} of {}): {failure}",
                v.failure_limit.max(1)
            ),
        });
        self.task.result = None;
        self.event(
            EventKind::VerifyFailed,
            run_id,
            json!({ "failures": failures, "error": failure }),
        );
        if failures >= v.failure_limit.max(1) {
            let reason = format!("verification failed {failures} times; the last: {failure}");
            self.task.last_failure_error = Some(reason.clone());
            self.task.status = Status::Blocked;
            self.event(
                EventKind::Blocked,
                run_id,
                json!({ "reason": reason, "verify_failures": failures }),
            );
        } else {
            self.task.status = self.workable_status();
        }
        Ok(())
    }

    pub(super) fn request_review(
        &mut self,
        expected_run_id: Option<RunId>,
        reviewer: &Option<String>,
        summary: &Option<String>,
        result: &Option<String>,
    ) -> Result<(), Refusal> {
        if let Some(reviewer) = reviewer {
            self.refuse_self_review(reviewer)?;
            self.task.reviewer = Some(reviewer.clone());
        }
        // A worker asks for review: the work waits for one, by the reviewer named, else
        // the task's, else its profile's.
        let completion = Completion {
            summary: summary.clone(),
            result: result.clone(),
            ..Completion::default()
        };
        if let Some(expected) = expected_run_id {
            self.require_current(expected)?;
            let run = self.facts.current_run().filter(|r| r.kind == RunKind::Work);
            let Some(checks) = run.map(|r| r.checks.clone()) else {
                let kind = self.current_kind().unwrap_or_default();
                return Err(self.wrong_kind(kind, "request-review", "work"));
            };
            let run_id = self.close_current_run(Outcome::Completed, summary.as_ref(), None, None);
            let checks = Checks {
                review: true,
                ..checks
            };
            if let Some(run) = self.runs.last_mut() {
                run.checks = checks.clone();
            }
            if self.task.reviewer.is_none() {
                self.task.reviewer = checks.reviewer.clone();
            }
            if self.task.reviewer.is_some() {
                self.refuse_self_review(self.task.reviewer.as_deref().unwrap_or_default())?;
            }
            if checks.verify {
                return self.route_reported_work(&checks, &completion, run_id);
            }
            if result.is_some() {
                self.task.result = result.clone();
            }
            self.send_to_review(run_id, summary);
            return Ok(());
        }
        if self.task.status == Status::Running {
            return Err(Refusal::Running {
                id: self.task.id.clone(),
                op: "request-review",
            });
        }
        self.require(
            &[Status::Ready, Status::Blocked],
            "request-review",
            "ready or blocked",
        )?;
        if result.is_some() {
            self.task.result = result.clone();
        }
        self.send_to_review(None, summary);
        Ok(())
    }

    /// Refuses unless the caller may give a review verdict: a reviewer inside its own
    /// review run, or a person on a task waiting in `review`.
    fn require_reviewer(&self, expected_run_id: Option<RunId>, op: &'static str) -> Result<(), Refusal> {
        match expected_run_id {
            Some(expected) => {
                self.require_current(expected)?;
                match self.current_kind() {
                    Some(RunKind::Review) => Ok(()),
                    // The worker that did the work cannot pass it.
                    Some(RunKind::Work) => Err(Refusal::SelfReview {
                        id: self.task.id.clone(),
                        profile: self.task.assignee.clone().unwrap_or_default(),
                    }),
                    kind => Err(self.wrong_kind(kind.unwrap_or_default(), op, "review")),
                }
            }
            None if self.task.status == Status::Running => Err(Refusal::Running {
                id: self.task.id.clone(),
                op,
            }),
            None => self.require(&[Status::Review], op, "review"),
        }
    }

    pub(super) fn approve(
        &mut self,
        expected_run_id: Option<RunId>,
        summary: &Option<String>,
    ) -> Result<(), Refusal> {
        self.require_reviewer(expected_run_id, "approve")?;
        let run_id = self.close_current_run(Outcome::Completed, summary.as_ref(), None, None);
        let reviewer = self.reviewing_profile();
        self.event(
            EventKind::Approved,
            run_id,
            json!({ "reviewer": reviewer, "summary": summary }),
        );
        let completion = Completion {
            summary: summary.clone(),
            ..Completion::default()
        };
        self.finish_done(&completion, run_id, false);
        Ok(())
    }

    /// The profile of the open review run, when a reviewer speaks.
    fn reviewing_profile(&self) -> Option<String> {
        self.facts
            .current_run()
            .filter(|r| r.kind == RunKind::Review)
            .and_then(|r| r.profile.clone())
    }

    pub(super) fn request_changes(
        &mut self,
        expected_run_id: Option<RunId>,
        author: &Option<String>,
        reason: &str,
        round_limit: i64,
    ) -> Result<(), Refusal> {
        self.require_reviewer(expected_run_id, "request-changes")?;
        if crate::comment::blank(reason) {
            return Err(Refusal::Invalid("request-changes needs a reason".into()));
        }
        let author = author.clone().or_else(|| self.reviewing_profile());
        let reason_text = reason.to_owned();
        let run_id = self.close_current_run(Outcome::ChangesRequested, None, Some(&reason_text), None);
        self.task.review_rounds += 1;
        let rounds = self.task.review_rounds;
        self.comment = Some(NewComment {
            author: author.clone(),
            body: format!("CHANGES REQUESTED: {reason}"),
        });
        self.event(
            EventKind::ChangesRequested,
            run_id,
            json!({ "reason": reason, "rounds": rounds, "author": author }),
        );
        if rounds >= round_limit.max(1) {
            self.task.status = Status::Blocked;
            self.task.last_failure_error = Some(format!(
                "review loop: changes were requested {rounds} times; the last: {reason}"
            ));
            self.event(
                EventKind::ReviewLoopDetected,
                run_id,
                json!({ "rounds": rounds, "reason": reason }),
            );
        } else {
            self.task.status = self.workable_status();
        }
        Ok(())
    }

    pub(super) fn reopen_review(&mut self, reason: &Option<String>) -> Result<(), Refusal> {
        self.require(
            &[Status::Ready, Status::Blocked],
            "reopen-review",
            "ready or blocked",
        )?;
        if self.task.status == Status::Blocked {
            // A person looked at the loop and decided to go on: the count starts again.
            self.task.review_rounds = 0;
        }
        self.task.status = Status::Review;
        self.event(
            EventKind::ReviewReopened,
            None,
            json!({ "reason": reason, "reviewer": self.task.reviewer }),
        );
        Ok(())
    }
}
