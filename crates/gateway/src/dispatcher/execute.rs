//! Performing a plan: each [`Action`] through the store, the process control and the
//! decomposer, with what it did written into the tick's report. Nothing here decides
//! which action to take; a write that loses a race (the run changed meanwhile) changes
//! nothing and is not an error.

use super::*;
use board_core::{
    lease_expiry, Claim, Completion, DecompositionLease, NewTask, Offer, Recurring, RunEnd, RunKind,
};

use crate::channel::{CheckLimits, Terms, Verifiers};

/// One tick being performed: its settings, its time, and what it has done so far.
pub(super) struct Pass<'a> {
    pub settings: &'a DispatchSettings,
    pub now: Timestamp,
    pub report: TickReport,
    /// The claims taken for this plan's spawns, by task.
    pub claims: BTreeMap<TaskId, Claim>,
    /// The workers started, to record on their runs together once the plan is done.
    pub started: Vec<(TaskId, Request)>,
}

impl Dispatcher {
    pub(super) fn execute(&mut self, action: &Action, pass: &mut Pass<'_>) {
        match action {
            Action::Reap {
                task,
                run,
                ending,
                cooldown_until,
            } => {
                self.let_go(task);
                pass.report.reaped.push(task.clone());
                if self.reap(task, run, ending, pass) {
                    if let Some(until) = cooldown_until {
                        self.cooldown.insert(task.clone(), *until);
                    }
                }
            }
            Action::AutoComplete { task, run } => self.auto_complete(task, run, pass),
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
            Action::Disown { task, run, outcome } => self.disown(task, run, *outcome, pass),
            Action::LetGo { task } => self.let_go(task),
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
            Action::ReleaseDecomposition { card } => self.release_decomposition(card),
            Action::TakeOverLease { card, holder } => self.take_over(card, holder, pass),
            Action::RememberFailure { card, floor } => {
                self.floors.insert(card.clone(), *floor);
            }
            Action::StartDecomposition { card, floor, probe } => {
                self.start_decomposition(card, *floor, *probe, pass)
            }
            Action::NoteCeiling { card, reached } => self.note_ceiling(card, reached, pass),
            Action::Resume { tasks } => self.resume(tasks, pass),
            Action::Recur {
                template,
                copy,
                next,
                missed,
            } => self.recur(template, copy.as_deref(), (*next, *missed), pass),
            Action::EndRecurrence { template, why } => self.end_recurrence(template, why, pass),
            Action::Promote { .. } => match self.store.promote_ready(pass.now) {
                Ok(promoted) => pass.report.promoted = promoted,
                Err(e) => pass.report.errors.push(format!("promoting: {e}")),
            },
            Action::SkipNonspawnable { task, profile } => self.skip(task, profile, pass),
            Action::Claim { offers } => self.claim(offers, pass),
            Action::Spawn { .. } => self.spawn_all(std::slice::from_ref(action), pass),
        }
    }

    /// Puts each scheduled task whose time came back to work. One another gateway
    /// resumed (or a person moved) meanwhile is refused and left alone.
    fn resume(&mut self, tasks: &[TaskId], pass: &mut Pass<'_>) {
        for task in tasks {
            match self.store.transition(task, &Request::Resume, pass.now) {
                Ok(_) => pass.report.resumed.push(task.clone()),
                Err(StoreError::Refused(_)) => {}
                Err(e) => pass.report.errors.push(format!("resuming {task}: {e}")),
            }
        }
    }

    /// Makes a recurring task's copy for the time that came (once, by its idempotency
    /// key, however many gateways or retries try) and moves the template to its next
    /// time. A template another gateway moved meanwhile is refused and left alone.
    fn recur(
        &mut self,
        template: &TaskId,
        copy: Option<&NewTask>,
        (next, missed): (Timestamp, i64),
        pass: &mut Pass<'_>,
    ) {
        let copy = match copy.map(|new| self.store.create_or_find(new, pass.now)) {
            Some(Ok(made)) => Some(made.into_task().id),
            Some(Err(e)) => {
                pass.report
                    .errors
                    .push(format!("making the copy of {template}: {e}"));
                return;
            }
            None => None,
        };
        let request = Request::Recur(Recurring { copy, next, missed });
        match self.store.transition(template, &request, pass.now) {
            Ok(_) => pass.report.recurred.push(template.clone()),
            Err(StoreError::Refused(_)) => {}
            Err(e) => pass
                .report
                .errors
                .push(format!("moving {template} to its next time: {e}")),
        }
    }

    /// A recurring task whose next time cannot be told runs once now, as itself (leaving
    /// `scheduled` ends its rule), and the report says why.
    fn end_recurrence(&mut self, template: &TaskId, why: &str, pass: &mut Pass<'_>) {
        pass.report.errors.push(format!(
            "{template}: its next time cannot be told ({why}); it runs once now and repeats no more"
        ));
        self.resume(std::slice::from_ref(template), pass);
    }

    /// Notes once that a task waits for a profile without a command.
    fn skip(&mut self, task: &TaskId, profile: &str, pass: &mut Pass<'_>) {
        self.skipped.insert(task.clone());
        let request = Request::SkipNonspawnable {
            profile: profile.to_owned(),
        };
        if let Err(e) = self.store.transition(task, &request, pass.now) {
            pass.report
                .errors
                .push(format!("noting {task} as not spawnable: {e}"));
        }
    }

    /// Claims the tasks of the plan's spawns in one call: among gateways sharing the
    /// board, a task another one is claiming is skipped, not waited for; a spawn whose
    /// task was not claimed does nothing.
    fn claim(&mut self, offers: &[Offer], pass: &mut Pass<'_>) {
        match self.store.claim_ready(
            offers,
            pass.settings.claim_ttl_seconds,
            Some(&self.host),
            pass.now,
        ) {
            Ok(claims) => pass.claims = claims.into_iter().map(|c| (c.task.id.clone(), c)).collect(),
            Err(e) => pass.report.errors.push(format!("claiming tasks: {e}")),
        }
    }

    /// Leases the card and hands it to the background decomposer, remembering the
    /// attempt (a probe's is not the card's).
    fn start_decomposition(&mut self, card: &TaskId, floor: AttemptFloor, probe: bool, pass: &mut Pass<'_>) {
        if !self.lease_card(card, None, pass) {
            return;
        }
        if !probe {
            self.floors.insert(card.clone(), floor);
        }
        let lease = decompose::CardLease {
            holder: self.lease_holder(),
            expires: lease_expiry(pass.settings.decomposition_lease_seconds, pass.now),
        };
        self.decompositions.start(card.clone(), probe, lease);
        pass.report.decompositions_in_flight += 1;
        pass.report.decompositions_started.push(card.clone());
    }

    /// The decomposition lease, the step before a decomposition starts: the card is
    /// leased to this gateway, so no other sends its request while the lease holds. A
    /// lease of `abandoned` (a holder the plan found stopped) counts as lapsed. A card
    /// another gateway holds is left to it; a lapsed lease is charged and released
    /// ([`Action::TakeOverLease`], or one that lapsed since the read). Whether the card
    /// is now leased to this gateway afresh.
    fn lease_card(&mut self, card: &TaskId, abandoned: Option<&str>, pass: &mut Pass<'_>) -> bool {
        let ttl = pass.settings.decomposition_lease_seconds;
        let holder = &self.lease_holder();
        match self
            .store
            .lease_decomposition(card, holder, ttl, pass.now, abandoned)
        {
            Ok(DecompositionLease::Leased) => {
                self.leased.insert(card.clone());
                true
            }
            Ok(DecompositionLease::Held { holder, .. }) => {
                tracing::debug!(card = %card, %holder, "another gateway is decomposing the card");
                false
            }
            Ok(DecompositionLease::Lapsed { holder }) => {
                self.charge_lapsed(card, &holder, pass);
                false
            }
            Err(e) => {
                pass.report
                    .errors
                    .push(format!("leasing {card} for decomposition: {e}"));
                false
            }
        }
    }

    /// Takes over the lease of a gateway that stopped mid-call (charged by
    /// [`Dispatcher::lease_card`]); a lease released since the read is not needed.
    fn take_over(&mut self, card: &TaskId, holder: &str, pass: &mut Pass<'_>) {
        if self.lease_card(card, Some(holder), pass) {
            self.release_decomposition(card);
        }
    }

    /// The lapsed attempt of `holder`, whose lease this gateway now holds, is recorded as
    /// a failure under the policy, and the lease released.
    fn charge_lapsed(&mut self, card: &TaskId, holder: &str, pass: &mut Pass<'_>) {
        let error = format!("the decomposition lease of {holder} lapsed: its gateway stopped mid-call");
        tracing::warn!(card = %card, %holder, "a decomposition lease lapsed; counted as a failed attempt");
        let policy = pass.settings.decompose_retry;
        if let Err(e) = self
            .store
            .record_decompose_failure(card, &error, policy, jitter(), pass.now)
        {
            pass.report
                .errors
                .push(format!("recording the lapsed decomposition of {card}: {e}"));
        }
        self.leased.insert(card.clone());
        self.release_decomposition(card);
    }

    /// Releases the lease of a decomposition of this gateway's that ended. A release
    /// that fails is tried again next tick; at worst the lease lapses.
    pub(super) fn release_decomposition(&mut self, card: &TaskId) {
        match self.store.release_decomposition(card, &self.lease_holder()) {
            Ok(()) => {
                self.leased.remove(card);
            }
            Err(e) => tracing::warn!(card = %card, error = %e, "releasing a decomposition lease failed"),
        }
    }

    /// Notes a change of the spend ceiling in force: one event and one log line.
    fn note_ceiling(&self, card: &TaskId, reached: &Option<String>, pass: &mut Pass<'_>) {
        let signal = board_core::BreakerSignal::Ceiling {
            card: card.clone(),
            reached: reached.clone(),
        };
        // A ceiling moves no probe: the base and the probe cap are not read.
        let settings = BreakerSettings {
            base_seconds: pass.settings.decompose_retry.base_seconds,
            config_stamp: pass.settings.config_stamp.clone(),
            ..BreakerSettings::default()
        };
        match self.store.signal_breaker(&signal, &settings, pass.now) {
            Ok((_, Some(_))) => match reached {
                Some(ceiling) => {
                    tracing::warn!(%ceiling, "spend ceiling reached: automatic decomposition stops until the 24 h window allows")
                }
                None => tracing::info!("the spend window allows again: automatic decomposition resumes"),
            },
            Ok((_, None)) => {}
            Err(e) => pass.report.errors.push(format!("noting the spend ceiling: {e}")),
        }
    }

    /// Forgets a worker that is gone, after what is left of its group is killed.
    fn let_go(&mut self, task: &TaskId) {
        self.workers.remove(task);
        self.processes.release(task);
    }

    pub(super) fn end_run(
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
    /// Whether this ended it (a worker that finalised its run itself, complete or block,
    /// left nothing to end).
    fn reap(&mut self, id: &TaskId, run: &RunRef, ending: &Ending, pass: &mut Pass<'_>) -> bool {
        match self.end_run(id, run, ending, pass) {
            Ok(false) | Err(StoreError::Refused(_)) => false,
            Ok(true) => {
                tracing::info!(task = %id, run = run.run_id, outcome = %ending.outcome, "worker exited");
                self.warn_if_gave_up(id);
                true
            }
            Err(e) => {
                let error = format!("ending run {} of {id}: {e}", run.run_id);
                pass.report.errors.push(error);
                false
            }
        }
    }

    /// Completes the run of a worker that exited 0 with output under its profile's `auto`
    /// contract, the output its result; a completion the board refuses ends the run as
    /// the protocol violation an exit without a report is.
    fn auto_complete(&mut self, id: &TaskId, run: &RunRef, pass: &mut Pass<'_>) {
        let output = self
            .processes
            .output(id, pass.settings.max_text_bytes)
            .unwrap_or_default();
        self.let_go(id);
        pass.report.reaped.push(id.clone());
        let completion = Completion {
            expected_run_id: Some(run.run_id),
            summary: Some("exited 0 with output: completed by the profile's auto contract".to_owned()),
            result: Some(output.clone()),
            ..Completion::default()
        };
        match self.store.complete(id, &completion, pass.now) {
            Ok(true) => tracing::info!(task = %id, run = run.run_id, "completed by the auto contract"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "the auto contract's completion was refused");
                self.reap(id, run, &crate::planner::classify(Exit::Code(0), &output), pass);
            }
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
        if !self.workers.contains_key(&task.id) && !self.hold(task, now) {
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

    /// Stops a live worker whose run ended without it, in one log line: the run is not
    /// this gateway's any more, so nothing is written, and the worker is let go once gone.
    fn disown(&mut self, id: &TaskId, run: &RunRef, outcome: Outcome, pass: &mut Pass<'_>) {
        let Some(worker) = self.workers.get_mut(id) else {
            return;
        };
        worker.stopping = Some(Stopping {
            run: run.clone(),
            reason: StopReason::Lost { outcome },
            since: pass.now,
        });
        tracing::warn!(
            task = %id,
            run = run.run_id,
            %outcome,
            "the worker's run ended without it (taken over while this gateway could not reach the board): stopping the worker, its work not counted"
        );
        self.processes.signal(id, Signal::Term);
        pass.report.disowned.push(id.clone());
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
}

impl Dispatcher {
    /// Records the workers this pass started on their runs, in one call: each claimed
    /// run is told its worker's pid and host (how a later gateway finds the process).
    pub(super) fn record_started(&mut self, pass: &mut Pass<'_>) {
        if pass.started.is_empty() {
            return;
        }
        let started = std::mem::take(&mut pass.started);
        let outcomes = match self.store.transition_each(&started, pass.now) {
            Ok(outcomes) => outcomes,
            Err(e) => vec![Err(e); started.len()],
        };
        for ((task, _), outcome) in started.iter().zip(outcomes) {
            match outcome {
                // A quick worker may finish its run before its pid is recorded.
                Ok(_) | Err(StoreError::Refused(Refusal::ClaimChanged { .. })) => {}
                Err(e) => pass
                    .report
                    .errors
                    .push(format!("recording the worker of {task}: {e}")),
            }
        }
    }
}

/// What a worker's reports are applied with; a verify run's worker is also told the
/// verifiers it runs, when it asks its channel.
pub(super) fn terms(settings: &DispatchSettings, kind: RunKind, verifiers: &[Vec<String>]) -> Terms {
    Terms {
        claim_ttl_seconds: settings.claim_ttl_seconds,
        max_text_bytes: settings.max_text_bytes,
        checks: CheckLimits {
            review_rounds: settings.review_round_limit,
            verify_failures: settings.verify_failure_limit,
        },
        verify: (kind == RunKind::Verify).then(|| Verifiers {
            steps: verifiers.to_vec(),
            timeout_seconds: settings.verify_timeout_seconds,
        }),
        files: Vec::new(),
    }
}

/// A jitter factor for the failure policy, uniform in [-0.1, 0.1]; without randomness, none.
fn jitter() -> f64 {
    match getrandom::u32() {
        Ok(n) => (f64::from(n) / f64::from(u32::MAX)) * 0.2 - 0.1,
        Err(_) => 0.0,
    }
}
