//! The dispatcher's tick (SPEC 6): reap and classify workers, enforce leases and
//! runtimes, start background decompositions, promote, claim and spawn. One tick never
//! waits on a model call, and a failing step is reported, never fatal.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use board_core::transition::retry_delay;
use board_core::{
    Outcome, Refusal, Request, RetryPolicy, Status, Store, StoreError, Task, TaskId, Termination, Terminator,
    Timestamp,
};
use serde::Serialize;
use serde_json::json;

use crate::supervisor::{self, classify, Assignment, Boundary, Exit, HomeLayout, Worker};

/// How long a task whose worker exited 75 (rate limited) waits before a new worker.
pub const RATE_LIMIT_COOLDOWN_SECONDS: i64 = 60;

/// What the tick needs from the configuration, re-read every tick.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchSettings {
    pub max_spawn: usize,
    pub auto_decompose: bool,
    pub auto_decompose_per_tick: usize,
    pub auto_decompose_concurrency: usize,
    pub failure_limit: i64,
    pub claim_ttl_seconds: i64,
    pub default_assignee: String,
    /// Profile name -> its worker command (`None`: the profile cannot be spawned).
    pub commands: BTreeMap<String, Option<Vec<String>>>,
    /// Variables kept from workers whatever their names (the model key's variable).
    pub secret_vars: Vec<String>,
    /// Profile name -> what its workers may have beyond the defaults.
    pub boundaries: BTreeMap<String, Boundary>,
    /// `kanban.decompose_retry_base_seconds` and `decompose_failure_limit`.
    pub decompose_retry: RetryPolicy,
}

impl DispatchSettings {
    /// The profile a task's worker runs as, and its command; `None` for a profile that
    /// cannot be spawned.
    pub fn worker_for(&self, task: &Task) -> (String, Option<Vec<String>>) {
        let profile = task
            .assignee
            .clone()
            .unwrap_or_else(|| self.default_assignee.clone());
        let command = self.commands.get(&profile).cloned().flatten();
        (profile, command)
    }
}

/// Automatic decompositions this gateway started on one card (at one revision).
#[derive(Clone, Copy, Debug)]
struct Attempts {
    revision: i64,
    count: i64,
    next_at: Timestamp,
}

/// Decompositions running in the background, off the tick.
pub trait Decompositions: Send {
    /// Forgets the finished ones and returns the ids still in flight.
    fn in_flight(&mut self) -> BTreeSet<TaskId>;
    /// Starts an automatic decomposition of `id`; it commits on its own.
    fn start(&mut self, id: TaskId);
    /// Cancels every decomposition in flight; a cancelled one commits nothing.
    fn cancel_all(&mut self);
}

/// A dispatcher with no decomposer (`kanban dispatch --dry-run`, tests).
pub struct NoDecompositions;

impl Decompositions for NoDecompositions {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        BTreeSet::new()
    }
    fn start(&mut self, _id: TaskId) {}
    fn cancel_all(&mut self) {}
}

/// What one tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TickReport {
    pub reaped: Vec<TaskId>,
    pub reclaimed: Vec<TaskId>,
    pub extended: Vec<TaskId>,
    pub timed_out: Vec<TaskId>,
    pub decompositions_started: Vec<TaskId>,
    /// Decompositions running in the background after this tick.
    pub decompositions_in_flight: usize,
    pub promoted: Vec<TaskId>,
    pub spawned: Vec<TaskId>,
    pub errors: Vec<String>,
}

/// Running totals since the gateway started, for `gateway.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub ticks: u64,
    pub spawned: u64,
    pub reaped: u64,
    pub reclaimed: u64,
    pub timed_out: u64,
    pub decompositions_started: u64,
    pub promoted: u64,
    pub errors: u64,
}

/// The dispatcher: the store, the workers it supervises, and its decompositions.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    layout: HomeLayout,
    decompositions: Box<dyn Decompositions>,
    workers: BTreeMap<TaskId, Worker>,
    /// Rate-limited tasks and when they may be spawned again.
    cooldown: HashMap<TaskId, Timestamp>,
    /// Tasks already reported as `skipped_nonspawnable` by this gateway.
    skipped: BTreeSet<TaskId>,
    /// The failure policy kept in memory too: when the store cannot record a failed
    /// decomposition (a full disk), the card is still backed off and parked, so it is
    /// never billed every tick.
    attempts: HashMap<TaskId, Attempts>,
    pub counters: Counters,
}

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        layout: HomeLayout,
        decompositions: Box<dyn Decompositions>,
    ) -> Dispatcher {
        Dispatcher {
            store,
            layout,
            decompositions,
            workers: BTreeMap::new(),
            cooldown: HashMap::new(),
            skipped: BTreeSet::new(),
            attempts: HashMap::new(),
            counters: Counters::default(),
        }
    }

    /// Workers this dispatcher supervises, by task.
    pub fn workers(&self) -> impl Iterator<Item = &Worker> {
        self.workers.values()
    }

    /// On start: adopt the live workers an earlier gateway left running (by pid, proven
    /// by their environment), and reclaim the runs whose worker is gone.
    pub fn adopt(&mut self, now: Timestamp) -> TickReport {
        let mut report = TickReport::default();
        let running = match self.store.running() {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(format!("listing running tasks: {e}"));
                return report;
            }
        };
        for task in running {
            if task.worker_pid.is_none() || self.workers.contains_key(&task.id) {
                continue;
            }
            match Worker::adopt(&self.layout, &task) {
                Some(worker) => {
                    tracing::info!(task = %task.id, pid = worker.pid, "adopted a live worker");
                    self.workers.insert(task.id.clone(), worker);
                }
                None => self.release(&task, "its worker is gone", now, &mut report),
            }
        }
        report
    }

    /// One pass of the dispatcher, in SPEC 6 order.
    pub fn tick(&mut self, settings: &DispatchSettings, now: Timestamp) -> TickReport {
        let mut report = TickReport::default();
        self.reap(settings, now, &mut report);
        self.enforce_leases(settings, now, &mut report);
        self.start_decompositions(settings, now, &mut report);
        match self.store.promote_ready(now) {
            Ok(promoted) => report.promoted = promoted,
            Err(e) => report.errors.push(format!("promoting: {e}")),
        }
        self.spawn_workers(settings, now, &mut report);
        self.count(&report);
        for error in &report.errors {
            tracing::error!(%error, "tick step failed");
        }
        report
    }

    /// What a tick would do now, changing nothing: expired leases and runtimes it would
    /// end (or extend, for a provably live worker), cards it would decompose, tasks it
    /// would promote and tasks it would claim and spawn.
    pub fn dry_run(&self, settings: &DispatchSettings, now: Timestamp) -> Result<TickReport, StoreError> {
        let mut report = TickReport::default();
        for task in self.store.running()? {
            let alive = supervisor::prove_ours(&task).is_some();
            if over_runtime(&task, now) {
                report.timed_out.push(task.id);
            } else if task.claim_expires.is_some_and(|e| e <= now) {
                if alive {
                    report.extended.push(task.id);
                } else {
                    report.reclaimed.push(task.id);
                }
            }
        }
        if settings.auto_decompose {
            let room = settings
                .auto_decompose_concurrency
                .min(settings.auto_decompose_per_tick);
            report.decompositions_started = self
                .store
                .due_triage(now, room)?
                .into_iter()
                .map(|t| t.id)
                .collect();
        }
        let todo = self.store.list(&board_core::TaskFilter {
            status: Some(Status::Todo),
            ..board_core::TaskFilter::default()
        })?;
        for task in todo {
            if self.store.facts(&task.id)?.open_parents == 0 {
                report.promoted.push(task.id);
            }
        }
        let room = settings.max_spawn.saturating_sub(self.workers.len());
        for task in self.store.claimable(room + self.skipped.len() + 64)? {
            if report.spawned.len() == room {
                break;
            }
            if settings.worker_for(&task).1.is_some() {
                report.spawned.push(task.id);
            }
        }
        Ok(report)
    }

    /// Whether no decomposition is in flight any more.
    pub fn decompositions_idle(&mut self) -> bool {
        self.decompositions.in_flight().is_empty()
    }

    /// Cancels decompositions in flight. Workers keep running: a restarted gateway
    /// adopts them.
    pub fn shutdown(&mut self) {
        self.decompositions.cancel_all();
    }

    fn count(&mut self, r: &TickReport) {
        let c = &mut self.counters;
        c.ticks += 1;
        c.spawned += r.spawned.len() as u64;
        c.reaped += r.reaped.len() as u64;
        c.reclaimed += r.reclaimed.len() as u64;
        c.timed_out += r.timed_out.len() as u64;
        c.decompositions_started += r.decompositions_started.len() as u64;
        c.promoted += r.promoted.len() as u64;
        c.errors += r.errors.len() as u64;
    }

    /// Step 1: workers that exited. One that left its run open is classified.
    fn reap(&mut self, settings: &DispatchSettings, now: Timestamp, report: &mut TickReport) {
        let exited: Vec<(TaskId, Exit)> = self
            .workers
            .iter_mut()
            .filter_map(|(id, w)| w.try_exit().map(|exit| (id.clone(), exit)))
            .collect();
        for (id, exit) in exited {
            let Some(worker) = self.workers.remove(&id) else {
                continue;
            };
            report.reaped.push(id.clone());
            if worker.is_adopted() {
                // Not our child: how it ended is unknowable, so its run is released
                // without counting a failure.
                match self.store.get(&id) {
                    Ok(task) if task.current_run_id == Some(worker.run_id) => {
                        self.release(&task, "its adopted worker is gone", now, report)
                    }
                    Ok(_) => {}
                    Err(e) => report.errors.push(format!("reading {id}: {e}")),
                }
                continue;
            }
            let (outcome, error, detail) = classify(exit, &worker.log_tail());
            let ended = self.store.end_run(
                &id,
                worker.run_id,
                &worker.claim_lock,
                outcome,
                error,
                detail,
                settings.failure_limit,
                now,
            );
            match ended {
                // The worker finalised its run itself (complete or block): all is well.
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!(task = %id, run = worker.run_id, outcome = %outcome, "worker exited");
                    if outcome == Outcome::RateLimited {
                        self.cooldown
                            .insert(id.clone(), now + RATE_LIMIT_COOLDOWN_SECONDS);
                    }
                    self.warn_if_gave_up(&id);
                }
                Err(StoreError::Refused(_)) => {}
                Err(e) => report
                    .errors
                    .push(format!("ending run {} of {id}: {e}", worker.run_id)),
            }
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
    fn release(&mut self, task: &Task, why: &str, now: Timestamp, report: &mut TickReport) {
        let (Some(run_id), Some(claim_lock)) = (task.current_run_id, task.claim_lock.clone()) else {
            return;
        };
        let request = Request::Reclaim {
            run_id,
            claim_lock,
            reason: Some(why.to_owned()),
        };
        match self.store.transition(&task.id, &request, now) {
            Ok(_) => {
                tracing::info!(task = %task.id, run = run_id, reason = why, "reclaimed");
                report.reclaimed.push(task.id.clone());
            }
            Err(StoreError::Refused(r)) if r.is_lost_race() => {}
            Err(e) => report.errors.push(format!("reclaiming {}: {e}", task.id)),
        }
    }

    /// Step 2: runtimes over `max_runtime_seconds` are stopped; expired leases are
    /// extended for a provably live worker, else the run goes stale.
    fn enforce_leases(&mut self, settings: &DispatchSettings, now: Timestamp, report: &mut TickReport) {
        let running = match self.store.running() {
            Ok(r) => r,
            Err(e) => return report.errors.push(format!("listing running tasks: {e}")),
        };
        for task in running.iter().filter(|t| over_runtime(t, now)) {
            self.time_out(task, settings, now, report);
        }
        let expired = match self.store.expired_leases(now, 1000) {
            Ok(e) => e,
            Err(e) => return report.errors.push(format!("listing expired leases: {e}")),
        };
        for task in expired {
            let (Some(run_id), Some(claim_lock)) = (task.current_run_id, task.claim_lock.clone()) else {
                continue;
            };
            let ours = self
                .workers
                .get(&task.id)
                .is_some_and(|w| w.run_id == run_id && w.is_alive());
            let result = if ours {
                let request = Request::ExtendClaim {
                    run_id,
                    claim_lock,
                    ttl: settings.claim_ttl_seconds,
                };
                self.store.transition(&task.id, &request, now).map(|_| {
                    report.extended.push(task.id.clone());
                })
            } else if self.stop_worker(&task) == Termination::Survived {
                tracing::warn!(task = %task.id, "worker survived termination; its lease ends later");
                continue;
            } else {
                self.workers.remove(&task.id);
                let error = Some(format!("lease expired at {}", task.claim_expires.unwrap_or(now)));
                let detail = json!({ "claim_expires": task.claim_expires });
                self.store
                    .end_run(
                        &task.id,
                        run_id,
                        &claim_lock,
                        Outcome::Stale,
                        error,
                        detail,
                        settings.failure_limit,
                        now,
                    )
                    .map(|ended| {
                        if ended {
                            tracing::info!(task = %task.id, run = run_id, "lease expired: run stale");
                            report.reclaimed.push(task.id.clone());
                        }
                    })
            };
            if let Err(e) = result {
                if !e.refusal().is_some_and(Refusal::is_lost_race) {
                    report.errors.push(format!("lease of {}: {e}", task.id));
                }
            }
        }
    }

    /// Stops the worker of a running task before its run is released: the supervised
    /// one (the caller forgets it once stopped), else a worker proven to run the task's
    /// current run.
    fn stop_worker(&mut self, task: &Task) -> Termination {
        match self.workers.get_mut(&task.id) {
            Some(worker) => worker.stop(),
            None => supervisor::ProcessGroupTerminator.terminate(task),
        }
    }

    fn time_out(
        &mut self,
        task: &Task,
        settings: &DispatchSettings,
        now: Timestamp,
        report: &mut TickReport,
    ) {
        let (Some(run_id), Some(claim_lock)) = (task.current_run_id, task.claim_lock.clone()) else {
            return;
        };
        if self.stop_worker(task) == Termination::Survived {
            tracing::warn!(task = %task.id, "worker survived termination; timing out later");
            return;
        }
        let tail = self
            .workers
            .remove(&task.id)
            .map(|w| w.log_tail())
            .unwrap_or_default();
        let limit = task.max_runtime_seconds.unwrap_or_default();
        let mut error = format!("ran longer than max_runtime_seconds ({limit} s)");
        if !tail.is_empty() {
            error = format!("{error}; log tail: {tail}");
        }
        let detail = json!({ "max_runtime_seconds": limit });
        match self.store.end_run(
            &task.id,
            run_id,
            &claim_lock,
            Outcome::TimedOut,
            Some(error),
            detail,
            settings.failure_limit,
            now,
        ) {
            Ok(true) => {
                tracing::info!(task = %task.id, run = run_id, "timed out");
                report.timed_out.push(task.id.clone());
                self.warn_if_gave_up(&task.id);
            }
            Ok(false) => {}
            Err(e) => report.errors.push(format!("timing out {}: {e}", task.id)),
        }
    }

    /// Step 3: hand due triage cards to the background decomposer, within the per-tick
    /// and in-flight limits, never the same card twice at once.
    fn start_decompositions(&mut self, settings: &DispatchSettings, now: Timestamp, report: &mut TickReport) {
        if !settings.auto_decompose {
            return;
        }
        let in_flight = self.decompositions.in_flight();
        report.decompositions_in_flight = in_flight.len();
        let room = settings
            .auto_decompose_concurrency
            .saturating_sub(in_flight.len())
            .min(settings.auto_decompose_per_tick);
        if room == 0 {
            return;
        }
        let policy = settings.decompose_retry;
        let blocked = |a: &Attempts| a.count >= policy.failure_limit || a.next_at > now;
        let held = self.attempts.values().filter(|a| blocked(a)).count();
        let due = match self.store.due_triage(now, room + in_flight.len() + held) {
            Ok(d) => d,
            Err(e) => return report.errors.push(format!("listing due triage cards: {e}")),
        };
        let mut started = 0;
        for task in due {
            if started == room {
                break;
            }
            if in_flight.contains(&task.id) {
                continue;
            }
            let earlier = self
                .attempts
                .get(&task.id)
                .filter(|a| a.revision == task.revision);
            if earlier.is_some_and(blocked) {
                continue;
            }
            let count = earlier.map_or(1, |a| a.count + 1);
            // The shortest delay the store's policy could give (jitter -10%), so the
            // memory never holds back a card the store says is due.
            let next_at = now + retry_delay(policy.base_seconds, count, -0.1);
            self.attempts.insert(
                task.id.clone(),
                Attempts {
                    revision: task.revision,
                    count,
                    next_at,
                },
            );
            self.decompositions.start(task.id.clone());
            report.decompositions_in_flight += 1;
            report.decompositions_started.push(task.id);
            started += 1;
        }
    }

    /// Step 5: claim ready tasks in order and start their workers, up to `max_spawn`.
    fn spawn_workers(&mut self, settings: &DispatchSettings, now: Timestamp, report: &mut TickReport) {
        self.cooldown.retain(|_, until| *until > now);
        let mut room = settings.max_spawn.saturating_sub(self.workers.len());
        if room == 0 {
            return;
        }
        // Tasks that cannot be spawned stay ready: look past them, a widening window at a
        // time, so the tick stays proportional to what it can start.
        let mut window = room + self.skipped.len() + self.cooldown.len();
        let mut seen: BTreeSet<TaskId> = BTreeSet::new();
        let mut ready = Vec::new();
        loop {
            let batch = match self.store.claimable(window) {
                Ok(r) => r,
                Err(e) => return report.errors.push(format!("listing ready tasks: {e}")),
            };
            let full = batch.len() == window;
            let spawnable: Vec<(Task, String, Vec<String>)> = batch
                .into_iter()
                .filter(|t| seen.insert(t.id.clone()))
                .filter(|t| !self.cooldown.contains_key(&t.id))
                .filter_map(|t| match settings.worker_for(&t) {
                    (profile, Some(command)) => Some((t, profile, command)),
                    (profile, None) => {
                        if self.skipped.insert(t.id.clone()) {
                            let request = Request::SkipNonspawnable { profile };
                            if let Err(e) = self.store.transition(&t.id, &request, now) {
                                report
                                    .errors
                                    .push(format!("noting {} as not spawnable: {e}", t.id));
                            }
                        }
                        None
                    }
                })
                .collect();
            ready.extend(spawnable);
            if ready.len() >= room || !full {
                break;
            }
            window *= 2;
        }
        let no_boundary = Boundary::default();
        for (task, profile, command) in ready {
            if room == 0 {
                break;
            }
            let claim = match self.store.claim(&task.id, settings.claim_ttl_seconds, now) {
                Ok(c) => c,
                Err(StoreError::Refused(_)) => continue,
                Err(e) => {
                    report.errors.push(format!("claiming {}: {e}", task.id));
                    continue;
                }
            };
            let assignment = Assignment {
                task: &claim.task,
                run_id: claim.run_id,
                claim_lock: &claim.claim_lock,
                profile: &profile,
                command: &command,
                secret_vars: &settings.secret_vars,
                boundary: settings.boundaries.get(&profile).unwrap_or(&no_boundary),
            };
            match supervisor::spawn(&self.layout, &assignment) {
                Ok(worker) => {
                    let request = Request::SetWorker {
                        run_id: claim.run_id,
                        claim_lock: claim.claim_lock.clone(),
                        pid: i64::from(worker.pid),
                    };
                    match self.store.transition(&task.id, &request, now) {
                        // A quick worker may finish its run before its pid is recorded.
                        Ok(_) | Err(StoreError::Refused(Refusal::ClaimChanged { .. })) => {}
                        Err(e) => report
                            .errors
                            .push(format!("recording the worker of {}: {e}", task.id)),
                    }
                    tracing::info!(task = %task.id, run = claim.run_id, pid = worker.pid, %profile, "spawned a worker");
                    self.workers.insert(task.id.clone(), worker);
                    report.spawned.push(task.id.clone());
                    room -= 1;
                }
                Err(e) => {
                    tracing::warn!(task = %task.id, error = %e, "could not spawn a worker");
                    let detail = json!({ "profile": profile });
                    let ended = self.store.end_run(
                        &task.id,
                        claim.run_id,
                        &claim.claim_lock,
                        Outcome::SpawnFailed,
                        Some(e.to_string()),
                        detail,
                        settings.failure_limit,
                        now,
                    );
                    if let Err(e) = ended {
                        report
                            .errors
                            .push(format!("ending the failed spawn of {}: {e}", task.id));
                    }
                }
            }
        }
    }
}

fn over_runtime(task: &Task, now: Timestamp) -> bool {
    match (task.max_runtime_seconds, task.started_at) {
        (Some(max), Some(started)) => now >= started.saturating_add(max),
        _ => false,
    }
}
