//! The requests on a task's runs: claim, heartbeat, complete, block, reclaim and ending a run.

use serde_json::{json, Value};

use super::next::Next;
use super::{Claiming, Completion, Fresh, RunEnd, BLOCK_RECURRENCE_LIMIT, RECLAIM_DEFER_SECONDS};
use crate::kinds::EventKind;
use crate::recurrence::{Recurrence, Recurring};
use crate::refusal::Refusal;
use crate::types::{BlockKind, Checks, Lease, Outcome, Run, RunId, RunKind, RunStatus, Status, Timestamp};

impl Next<'_> {
    /// Opens the run a claim asks for.
    pub(super) fn claim(&mut self, fresh: &Fresh, claiming: &Claiming) -> Result<(), Refusal> {
        let Claiming {
            ttl,
            host,
            kind,
            checks,
            lane,
            assign,
        } = claiming;
        let (ttl, kind, host, lane) = (*ttl, *kind, host.as_deref(), lane.as_deref());
        self.assign_unassigned(kind, assign)?;
        let (run_id, claim_lock) = (fresh.run_id, fresh.claim_lock.as_str());
        let profile = self.claimable_as(kind, ttl)?;
        let expires = self.now.saturating_add(ttl);
        self.runs.push(Run {
            id: run_id,
            task_id: self.task.id.clone(),
            profile,
            status: RunStatus::Running,
            outcome: None,
            claim_lock: Some(claim_lock.to_owned()),
            claim_expires: Some(expires),
            worker_pid: None,
            worker_host: host.map(str::to_owned),
            last_heartbeat_at: None,
            started_at: self.now,
            ended_at: None,
            summary: None,
            error: None,
            metadata: None,
            kind,
            checks: match kind {
                RunKind::Work => checks.clone(),
                // A verification passes on what the work it checks must pass after it.
                RunKind::Verify => self
                    .facts
                    .newest_run
                    .as_ref()
                    .map(|r| r.checks.clone())
                    .unwrap_or_default(),
                RunKind::Review => Checks::default(),
            },
            evidence: None,
            lane: lane.map(str::to_owned),
        });
        self.task.status = Status::Running;
        self.task.lease = Some(Lease {
            run_id,
            claim_lock: claim_lock.to_owned(),
            expires,
            worker_pid: None,
            worker_host: host.map(str::to_owned),
            last_heartbeat_at: None,
            lane: lane.map(str::to_owned),
        });
        self.task.started_at = Some(self.now);
        let mut payload = json!({ "claim_expires": expires });
        if kind != RunKind::Work {
            payload["kind"] = json!(kind.as_str());
        }
        if let Some(lane) = lane {
            payload["lane"] = json!(lane);
        }
        self.event(EventKind::Claimed, Some(run_id), payload);
        Ok(())
    }

    /// Before a work claim, gives an unassigned task to `assign` (nothing when it has an
    /// assignee, or for another kind of run): the claim's run is then that profile's.
    fn assign_unassigned(&mut self, kind: RunKind, assign: &Option<String>) -> Result<(), Refusal> {
        if let (RunKind::Work, None, Some(profile)) = (kind, &self.task.assignee, assign) {
            self.require(&[Status::Ready], "claim", "ready")?;
            self.task.assignee = Some(profile.clone());
            self.event(
                EventKind::Assigned,
                None,
                json!({ "from": null, "to": profile, "source": "kanban.default_assignee" }),
            );
        }
        Ok(())
    }

    /// Refuses a claim of a `kind` run the task is not waiting for; the profile the run
    /// is for (a review's is the task's reviewer, never the profile that did the work).
    fn claimable_as(&self, kind: RunKind, ttl: i64) -> Result<Option<String>, Refusal> {
        let (op, allowed) = match kind {
            RunKind::Work => ("claim", "ready"),
            RunKind::Verify => ("a verification", "verifying"),
            RunKind::Review => ("a review", "review"),
        };
        self.require(&[kind.waiting_status()], op, allowed)?;
        if self.task.lease.is_some() {
            return Err(Refusal::AlreadyClaimed {
                id: self.task.id.clone(),
            });
        }
        let profile = match kind {
            RunKind::Work | RunKind::Verify => self.task.assignee.clone(),
            RunKind::Review => Some(self.reviewer_for_claim()?),
        };
        // No run of any kind while a parent is open: a task sent to review by hand
        // after a link gave it one waits there until the parent is done.
        if self.facts.open_parents > 0 {
            return Err(Refusal::OpenParents {
                id: self.task.id.clone(),
                open: self.facts.open_parents,
            });
        }
        if ttl <= 0 {
            return Err(Refusal::Invalid(format!("claim ttl must be positive, got {ttl}")));
        }
        Ok(profile)
    }

    pub(super) fn heartbeat(
        &mut self,
        run_id: RunId,
        ttl: i64,
        note: &Option<String>,
    ) -> Result<(), Refusal> {
        self.require_current(run_id)?;
        self.require(&[Status::Running], "heartbeat", "running")?;
        let expires = self.now.saturating_add(ttl.max(1));
        self.extend_lease(expires);
        if let Some(lease) = self.task.lease.as_mut() {
            lease.last_heartbeat_at = Some(self.now);
        }
        if let Some(run) = self.runs.last_mut() {
            run.last_heartbeat_at = Some(self.now);
        }
        self.event(
            EventKind::Heartbeat,
            Some(run_id),
            json!({ "note": note, "claim_expires": expires }),
        );
        Ok(())
    }

    /// Sets the lease of the task and of its current run to `expires`.
    pub(super) fn extend_lease(&mut self, expires: Timestamp) {
        if let Some(lease) = self.task.lease.as_mut() {
            lease.expires = expires;
        }
        if let Some(run) = self.facts.current_run() {
            let mut run = run.clone();
            run.claim_expires = Some(expires);
            self.runs.push(run);
        }
    }

    pub(super) fn complete(&mut self, c: &Completion, zero_run_id: RunId) -> Result<(), Refusal> {
        if let Some(replayed) = c.replay_ended_run_id {
            return self.complete_replay(replayed, c);
        }
        if let Some(expected) = c.expected_run_id {
            self.require_current(expected)?;
        }
        if c.refuse_running && self.task.status == Status::Running {
            return Err(Refusal::Running {
                id: self.task.id.clone(),
                op: "complete",
            });
        }
        self.require(
            &[
                Status::Running,
                Status::Ready,
                Status::Blocked,
                Status::Verifying,
                Status::Review,
            ],
            "complete",
            "running, ready, blocked, verifying or review",
        )?;
        match self.facts.current_run().map(|r| (r.kind, r.checks.clone())) {
            Some((RunKind::Review, _)) => return self.approve(c.expected_run_id, &c.summary),
            Some((RunKind::Verify, _)) => {
                return Err(self.wrong_kind(RunKind::Verify, "complete", "work or review"))
            }
            Some((RunKind::Work, checks)) => {
                if checks.evidence && c.evidence.is_none() {
                    return Err(Refusal::EvidenceRequired {
                        id: self.task.id.clone(),
                    });
                }
                let run_id =
                    self.close_current_run(Outcome::Completed, c.summary.as_ref(), None, c.metadata.as_ref());
                self.keep_evidence(c.evidence.as_ref());
                return self.route_reported_work(&checks, c, run_id);
            }
            None if self.task.status == Status::Review => return self.approve(None, &c.summary),
            None => {}
        }
        let mut run_id =
            self.close_current_run(Outcome::Completed, c.summary.as_ref(), None, c.metadata.as_ref());
        if run_id.is_none() && c.summary.is_some() {
            self.runs.push(Run {
                id: zero_run_id,
                task_id: self.task.id.clone(),
                profile: self.task.assignee.clone(),
                status: RunStatus::Ended,
                outcome: Some(Outcome::Completed),
                claim_lock: None,
                claim_expires: None,
                worker_pid: None,
                worker_host: None,
                last_heartbeat_at: None,
                started_at: self.now,
                ended_at: Some(self.now),
                summary: c.summary.clone(),
                error: None,
                metadata: c.metadata.clone(),
                kind: RunKind::Work,
                checks: Checks::default(),
                evidence: c.evidence.clone(),
                lane: None,
            });
            run_id = Some(zero_run_id);
        }
        self.finish_done(c, run_id, false);
        Ok(())
    }

    /// A journaled completion landing after its run already ended.
    pub(super) fn complete_replay(&mut self, replayed: RunId, c: &Completion) -> Result<(), Refusal> {
        let newest = self.facts.newest_run.as_ref();
        let newest_id = newest.map(|r| r.id);
        if self.task.lease.is_some() || newest_id != Some(replayed) {
            return Err(Refusal::NotNewestRun {
                id: self.task.id.clone(),
                run_id: replayed,
                newest: newest_id,
            });
        }
        self.require(
            &[Status::Blocked, Status::Triage, Status::Ready],
            "a replayed completion",
            "blocked, triage or ready",
        )?;
        let mut run = newest.cloned().expect("newest run checked above");
        run.status = RunStatus::Ended;
        run.outcome = Some(Outcome::Completed);
        run.ended_at = run.ended_at.or(Some(self.now));
        if c.summary.is_some() {
            run.summary = c.summary.clone();
        }
        if c.metadata.is_some() {
            run.metadata = c.metadata.clone();
        }
        if c.evidence.is_some() {
            run.evidence = c.evidence.clone();
        }
        let checks = run.checks.clone();
        self.runs.push(run);
        if !checks.is_none() || self.task.reviewer.is_some() {
            return self.route_reported_work(&checks, c, Some(replayed));
        }
        self.finish_done(c, Some(replayed), true);
        Ok(())
    }

    pub(super) fn finish_done(&mut self, c: &Completion, run_id: Option<RunId>, replay: bool) {
        self.release_claim();
        self.task.status = Status::Done;
        self.task.completed_at = Some(self.now);
        if c.result.is_some() {
            self.task.result = c.result.clone();
        }
        self.task.consecutive_failures = 0;
        self.task.last_failure_error = None;
        self.task.block_kind = None;
        self.task.block_recurrences = 0;
        self.task.verify_failures = 0;
        self.task.review_rounds = 0;
        self.wake_children = true;
        let mut payload = json!({ "summary": c.summary });
        if replay {
            payload["replay"] = Value::Bool(true);
        }
        self.event(EventKind::Completed, run_id, payload);
    }

    pub(super) fn block(
        &mut self,
        kind: Option<BlockKind>,
        reason: &Option<String>,
        expected_run_id: Option<RunId>,
    ) -> Result<(), Refusal> {
        if let Some(expected) = expected_run_id {
            self.require_current(expected)?;
        }
        self.require(&[Status::Running, Status::Ready], "block", "running or ready")?;
        let run_id = self.close_current_run(Outcome::Blocked, None, reason.as_ref(), None);
        let kind_word = kind.map(BlockKind::as_str);
        if kind == Some(BlockKind::Dependency) && self.facts.open_parents > 0 {
            self.task.status = Status::Todo;
            self.event(
                EventKind::DependencyWait,
                run_id,
                json!({ "reason": reason, "open_parents": self.facts.open_parents }),
            );
            return Ok(());
        }
        let recurrences = if self.task.block_kind == kind {
            self.task.block_recurrences + 1
        } else {
            1
        };
        self.task.block_kind = kind;
        self.task.block_recurrences = recurrences;
        let payload = json!({ "kind": kind_word, "reason": reason, "recurrences": recurrences });
        if recurrences >= BLOCK_RECURRENCE_LIMIT {
            self.task.status = Status::Triage;
            self.event(EventKind::BlockLoopDetected, run_id, payload);
        } else {
            self.task.status = Status::Blocked;
            self.event(EventKind::Blocked, run_id, payload);
        }
        Ok(())
    }

    /// Parks the task in `scheduled` (its run, when it runs, ends `scheduled`), until a
    /// time when `until` names one. A scheduled task is scheduled anew only with a time,
    /// which replaces its own. A time must be ahead. With `every` (which needs a time) the
    /// task becomes a recurring task's template; a template scheduled anew keeps its rule.
    pub(super) fn schedule(
        &mut self,
        reason: &Option<String>,
        expected_run_id: Option<RunId>,
        until: Option<Timestamp>,
        every: &Option<Recurrence>,
    ) -> Result<(), Refusal> {
        if let Some(expected) = expected_run_id {
            self.require_current(expected)?;
        }
        let from = self.task.status;
        let parked = [Status::Todo, Status::Ready, Status::Running, Status::Blocked];
        let again = [Status::Scheduled];
        let allowed = match until {
            Some(_) => [&parked[..], &again[..]].concat(),
            None => parked.to_vec(),
        };
        self.require(
            &allowed,
            "schedule",
            "todo, ready, running or blocked (or scheduled, with a new time)",
        )?;
        if let Some(at) = until.filter(|&at| at <= self.now) {
            return Err(Refusal::Invalid(format!(
                "the time to wait for ({at}) is not ahead of now ({})",
                self.now
            )));
        }
        if every.is_some() && until.is_none() {
            return Err(Refusal::Invalid("a recurring task needs its first time".into()));
        }
        let run_id = self.close_current_run(Outcome::Scheduled, reason.as_ref(), None, None);
        self.task.status = Status::Scheduled;
        self.task.scheduled_until = until;
        if let Some(every) = every {
            self.task.recurrence = Some(every.clone());
        }
        let rule = self.task.recurrence.as_ref().map(Recurrence::describe);
        self.event(
            EventKind::Scheduled,
            run_id,
            json!({ "reason": reason, "from": from, "until": until, "every": rule }),
        );
        Ok(())
    }

    /// A recurring task's time came: the copy the gateway made is recorded (or, with
    /// none, the time is skipped because the previous copy is still open) and the
    /// template waits for its next time.
    pub(super) fn recur(&mut self, recurring: &Recurring) -> Result<(), Refusal> {
        self.require(&[Status::Scheduled], "recur", "scheduled")?;
        let due = self.due_time()?;
        let Some(mut rule) = self.task.recurrence.clone() else {
            return Err(Refusal::Invalid(format!(
                "{} is not a recurring task",
                self.task.id
            )));
        };
        if recurring.next <= self.now {
            return Err(Refusal::Invalid(format!(
                "the next time ({}) is not ahead of now ({})",
                recurring.next, self.now
            )));
        }
        let skipped_for = match &recurring.copy {
            Some(copy) => {
                rule.last_copy = Some(copy.clone());
                rule.copies = rule.copies.saturating_add(1);
                None
            }
            None => rule.last_copy.clone(),
        };
        self.task.recurrence = Some(rule);
        self.task.scheduled_until = Some(recurring.next);
        self.event(
            EventKind::Recurred,
            None,
            json!({
                "copy": recurring.copy,
                "due": due,
                "missed": recurring.missed,
                "next": recurring.next,
                "skipped_while_open": skipped_for,
            }),
        );
        Ok(())
    }

    /// The time a scheduled task waited for, when it has come.
    fn due_time(&self) -> Result<Timestamp, Refusal> {
        match self.task.scheduled_until {
            Some(at) if at <= self.now => Ok(at),
            Some(at) => Err(Refusal::Invalid(format!(
                "{} waits until {at}, after now ({})",
                self.task.id, self.now
            ))),
            None => Err(Refusal::Invalid(format!(
                "{} waits for a person's unblock, not for a time",
                self.task.id
            ))),
        }
    }

    /// A scheduled task whose time has come goes back to work.
    pub(super) fn resume(&mut self) -> Result<(), Refusal> {
        self.require(&[Status::Scheduled], "resume", "scheduled")?;
        let until = self.due_time()?;
        self.task.status = self.workable_status();
        self.event(
            EventKind::Unblocked,
            None,
            json!({ "reason": "its scheduled time came", "to": self.task.status, "scheduled_until": until }),
        );
        Ok(())
    }

    pub(super) fn unblock(&mut self, reason: &Option<String>) -> Result<(), Refusal> {
        self.require(
            &[Status::Blocked, Status::Scheduled],
            "unblock",
            "blocked or scheduled",
        )?;
        self.task.status = self.workable_status();
        self.event(
            EventKind::Unblocked,
            None,
            json!({ "reason": reason, "to": self.task.status }),
        );
        Ok(())
    }

    pub(super) fn reclaim(
        &mut self,
        run_id: RunId,
        claim_lock: &str,
        reason: &Option<String>,
    ) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        let back = self.waiting_status();
        self.close_current_run(Outcome::Reclaimed, None, reason.as_ref(), None);
        self.task.status = back;
        self.event(EventKind::Reclaimed, Some(run_id), json!({ "reason": reason }));
        Ok(())
    }

    pub(super) fn defer_reclaim(
        &mut self,
        run_id: RunId,
        claim_lock: &str,
        reason: &Option<String>,
    ) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        let expires = self.now.saturating_add(RECLAIM_DEFER_SECONDS);
        self.extend_lease(expires);
        self.event(
            EventKind::ReclaimDeferred,
            Some(run_id),
            json!({ "reason": reason, "claim_expires": expires }),
        );
        Ok(())
    }

    pub(super) fn end_run(&mut self, end: &RunEnd) -> Result<(), Refusal> {
        let RunEnd {
            run_id,
            claim_lock,
            outcome,
            error,
            detail,
            failure_limit,
        } = end;
        let (run_id, outcome) = (*run_id, *outcome);
        if matches!(
            outcome,
            Outcome::Completed
                | Outcome::Blocked
                | Outcome::Reclaimed
                | Outcome::GaveUp
                | Outcome::VerifyFailed
                | Outcome::ChangesRequested
        ) {
            return Err(Refusal::Invalid(format!(
                "a supervisor cannot end a run as {outcome}"
            )));
        }
        self.require_claim(run_id, claim_lock)?;
        let back = self.waiting_status();
        self.close_current_run(outcome, None, error.as_ref(), None);
        let mut payload = match detail {
            Value::Object(map) => Value::Object(map.clone()),
            _ => json!({}),
        };
        payload["error"] = json!(error);
        let mut gave_up = false;
        if outcome.counts_as_failure() {
            self.task.consecutive_failures += 1;
            self.task.last_failure_error = error.clone();
            gave_up = self.task.consecutive_failures >= self.task.failure_limit(*failure_limit);
            payload["failures"] = json!(self.task.consecutive_failures);
        }
        self.event(EventKind::from(outcome), Some(run_id), payload);
        if gave_up {
            self.task.status = Status::Blocked;
            self.event(
                EventKind::GaveUp,
                Some(run_id),
                json!({ "failures": self.task.consecutive_failures, "error": error }),
            );
        } else {
            self.task.status = back;
        }
        Ok(())
    }

    pub(super) fn extend_claim(&mut self, run_id: RunId, claim_lock: &str, ttl: i64) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        let expires = self.now.saturating_add(ttl.max(1));
        self.extend_lease(expires);
        self.event(
            EventKind::ClaimExtended,
            Some(run_id),
            json!({ "claim_expires": expires }),
        );
        Ok(())
    }

    pub(super) fn set_worker(
        &mut self,
        run_id: RunId,
        claim_lock: &str,
        pid: i64,
        host: &str,
    ) -> Result<(), Refusal> {
        let mut run = self.require_claim(run_id, claim_lock)?.clone();
        run.worker_pid = Some(pid);
        run.worker_host = Some(host.to_owned());
        self.runs.push(run);
        if let Some(lease) = self.task.lease.as_mut() {
            lease.worker_pid = Some(pid);
            lease.worker_host = Some(host.to_owned());
        }
        self.event(
            EventKind::Spawned,
            Some(run_id),
            json!({ "pid": pid, "host": host }),
        );
        Ok(())
    }
}
