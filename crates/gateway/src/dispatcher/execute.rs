//! Performing a plan: each [`Action`] through the store, the process control and the
//! decomposer, with what it did written into the tick's report. Nothing here decides
//! which action to take; a write that loses a race (the run changed meanwhile) changes
//! nothing and is not an error.

use super::*;
use board_core::RunEnd;

use crate::channel::Terms;

/// One tick being performed: its settings, its time, and what it has done so far.
pub(super) struct Pass<'a> {
    pub settings: &'a DispatchSettings,
    pub now: Timestamp,
    pub report: TickReport,
}

impl Dispatcher {
    pub(super) fn execute(&mut self, action: &Action, pass: &mut Pass<'_>) {
        match action {
            Action::Reap { task, run, ending } => {
                self.let_go(task);
                pass.report.reaped.push(task.clone());
                self.reap(task, run, ending, pass);
            }
            Action::ReleaseAdopted { task, run } => {
                self.let_go(task);
                pass.report.reaped.push(task.clone());
                self.release(
                    task,
                    run,
                    "its adopted worker is gone",
                    pass.now,
                    &mut pass.report,
                );
            }
            Action::Stop { task, reason } => self.stop(task, reason, pass.now),
            Action::Kill { task } => {
                tracing::warn!(task = %task, "the worker outlived its grace; killing its process group");
                self.processes.signal(task, Signal::Kill);
            }
            Action::EndRun {
                task,
                run,
                ending,
                held,
            } => {
                if *held {
                    self.let_go(task);
                }
                self.end_stopped(task, run, ending, pass);
            }
            Action::ExtendLease { task, run } => self.extend(task, run, pass),
            Action::StartDecomposition { card, floor } => {
                self.floors.insert(card.clone(), *floor);
                self.decompositions.start(card.clone());
                pass.report.decompositions_in_flight += 1;
                pass.report.decompositions_started.push(card.clone());
            }
            Action::Promote { .. } => match self.store.promote_ready(pass.now) {
                Ok(promoted) => pass.report.promoted = promoted,
                Err(e) => pass.report.errors.push(format!("promoting: {e}")),
            },
            Action::SkipNonspawnable { task, profile } => {
                self.skipped.insert(task.clone());
                let request = Request::SkipNonspawnable {
                    profile: profile.clone(),
                };
                if let Err(e) = self.store.transition(task, &request, pass.now) {
                    pass.report
                        .errors
                        .push(format!("noting {task} as not spawnable: {e}"));
                }
            }
            Action::Spawn {
                task,
                profile,
                command,
            } => self.spawn(task, profile, command, pass),
        }
    }

    /// Forgets a worker that is gone, after what is left of its group is killed.
    fn let_go(&mut self, task: &TaskId) {
        self.workers.remove(task);
        self.processes.release(task);
    }

    fn end_run(
        &self,
        task: &TaskId,
        run: &RunRef,
        ending: &Ending,
        pass: &Pass<'_>,
    ) -> Result<bool, StoreError> {
        let end = RunEnd {
            run_id: run.run_id,
            claim_lock: run.claim_lock.clone(),
            outcome: ending.outcome,
            error: ending.error.clone(),
            detail: ending.detail.clone(),
            failure_limit: pass.settings.failure_limit,
        };
        self.store.end_run(task, end, pass.now)
    }

    /// A worker that exited by itself and left its run open: the run ends as classified.
    fn reap(&mut self, id: &TaskId, run: &RunRef, ending: &Ending, pass: &mut Pass<'_>) {
        match self.end_run(id, run, ending, pass) {
            // The worker finalised its run itself (complete or block): all is well.
            Ok(false) | Err(StoreError::Refused(_)) => {}
            Ok(true) => {
                tracing::info!(task = %id, run = run.run_id, outcome = %ending.outcome, "worker exited");
                if ending.outcome == Outcome::RateLimited {
                    self.cooldown
                        .insert(id.clone(), pass.now + RATE_LIMIT_COOLDOWN_SECONDS);
                }
                self.warn_if_gave_up(id);
            }
            Err(e) => pass
                .report
                .errors
                .push(format!("ending run {} of {id}: {e}", run.run_id)),
        }
    }

    /// The run of a stopped worker (or of one that was never there) ends: timed out, or
    /// stale.
    fn end_stopped(&self, id: &TaskId, run: &RunRef, ending: &Ending, pass: &mut Pass<'_>) {
        let timed_out = ending.outcome == Outcome::TimedOut;
        match self.end_run(id, run, ending, pass) {
            Ok(true) if timed_out => {
                tracing::info!(task = %id, run = run.run_id, "timed out");
                pass.report.timed_out.push(id.clone());
                self.warn_if_gave_up(id);
            }
            Ok(true) => {
                tracing::info!(task = %id, run = run.run_id, "lease expired: run stale");
                pass.report.reclaimed.push(id.clone());
            }
            Ok(false) => {}
            Err(e) if e.refusal().is_some_and(Refusal::is_lost_race) => {}
            Err(e) if timed_out => pass.report.errors.push(format!("timing out {id}: {e}")),
            Err(e) => pass.report.errors.push(format!("lease of {id}: {e}")),
        }
    }

    fn warn_if_gave_up(&self, id: &TaskId) {
        if let Ok(task) = self.store.get(id) {
            if task.status == Status::Blocked {
                tracing::warn!(task = %id, failures = task.consecutive_failures, "gave up on the task");
            }
        }
    }

    /// Releases a running task's claim whose worker is gone, without counting a failure.
    pub(super) fn release(
        &mut self,
        id: &TaskId,
        run: &RunRef,
        why: &str,
        now: Timestamp,
        report: &mut TickReport,
    ) {
        let request = Request::Reclaim {
            run_id: run.run_id,
            claim_lock: run.claim_lock.clone(),
            reason: Some(why.to_owned()),
        };
        match self.store.transition(id, &request, now) {
            Ok(_) => {
                tracing::info!(task = %id, run = run.run_id, reason = why, "reclaimed");
                report.reclaimed.push(id.clone());
            }
            Err(StoreError::Refused(r)) if r.is_lost_race() => {}
            Err(e) => report.errors.push(format!("reclaiming {id}: {e}")),
        }
    }

    /// Asks a worker to stop (SIGTERM to its group), holding it first when another
    /// process started it; its run ends on a later tick, once it is gone.
    fn stop(&mut self, task: &Task, reason: &StopReason, now: Timestamp) {
        let Some(run) = RunRef::of(task) else {
            return;
        };
        if !self.workers.contains_key(&task.id) && !self.hold(task) {
            // Gone since the read: the next tick ends its run.
            return;
        }
        if let Some(worker) = self.workers.get_mut(&task.id) {
            worker.stopping = Some(Stopping {
                run,
                reason: reason.clone(),
                since: now,
            });
        }
        tracing::info!(task = %task.id, "stopping the worker");
        self.processes.signal(&task.id, Signal::Term);
    }

    fn extend(&self, id: &TaskId, run: &RunRef, pass: &mut Pass<'_>) {
        let request = Request::ExtendClaim {
            run_id: run.run_id,
            claim_lock: run.claim_lock.clone(),
            ttl: pass.settings.claim_ttl_seconds,
        };
        match self.store.transition(id, &request, pass.now) {
            Ok(_) => pass.report.extended.push(id.clone()),
            Err(e) if e.refusal().is_some_and(Refusal::is_lost_race) => {}
            Err(e) => pass.report.errors.push(format!("lease of {id}: {e}")),
        }
    }

    /// Claims a ready task and starts its worker; a worker that cannot be started ends
    /// its run as `spawn_failed`.
    fn spawn(&mut self, task: &Task, profile: &str, command: &[String], pass: &mut Pass<'_>) {
        let claim = match self
            .store
            .claim(&task.id, pass.settings.claim_ttl_seconds, pass.now)
        {
            Ok(c) => c,
            Err(StoreError::Refused(_)) => return,
            Err(e) => return pass.report.errors.push(format!("claiming {}: {e}", task.id)),
        };
        let no_boundary = Boundary::default();
        let assignment = Assignment {
            task: &claim.task,
            run_id: claim.run_id,
            claim_lock: &claim.claim_lock,
            profile,
            command,
            secret_vars: &pass.settings.secret_vars,
            boundary: pass.settings.boundaries.get(profile).unwrap_or(&no_boundary),
            terms: Terms {
                claim_ttl_seconds: pass.settings.claim_ttl_seconds,
                max_text_bytes: pass.settings.max_text_bytes,
            },
        };
        let run = RunRef {
            run_id: claim.run_id,
            claim_lock: claim.claim_lock.clone(),
        };
        match self.processes.spawn(&assignment) {
            Ok(pid) => {
                let request = Request::SetWorker {
                    run_id: run.run_id,
                    claim_lock: run.claim_lock.clone(),
                    pid: i64::from(pid),
                };
                match self.store.transition(&task.id, &request, pass.now) {
                    // A quick worker may finish its run before its pid is recorded.
                    Ok(_) | Err(StoreError::Refused(Refusal::ClaimChanged { .. })) => {}
                    Err(e) => pass
                        .report
                        .errors
                        .push(format!("recording the worker of {}: {e}", task.id)),
                }
                tracing::info!(task = %task.id, run = run.run_id, pid, %profile, "spawned a worker");
                let held = HeldWorker {
                    task_id: task.id.clone(),
                    pid,
                    run,
                    adopted: false,
                    stopping: None,
                };
                self.workers.insert(task.id.clone(), held);
                pass.report.spawned.push(task.id.clone());
            }
            Err(e) => {
                tracing::warn!(task = %task.id, error = %e, "could not spawn a worker");
                let ending = Ending {
                    outcome: Outcome::SpawnFailed,
                    error: Some(e.to_string()),
                    detail: json!({ "profile": profile }),
                };
                if let Err(e) = self.end_run(&task.id, &run, &ending, pass) {
                    pass.report
                        .errors
                        .push(format!("ending the failed spawn of {}: {e}", task.id));
                }
            }
        }
    }
}
