//! The dispatcher (docs/gateway.md): the state a gateway keeps between ticks (held workers,
//! cooldowns, decomposition attempts) and the tick itself: one read of the board and the
//! workers into a [`View`], the pure [`plan`], then each action performed through the
//! `Store`, the [`Processes`] and the [`Decompositions`]. One tick never waits on a model
//! call or on a worker, and a failing step is reported, never fatal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use board_core::spend::window_start;
use board_core::{
    AttemptFloor, Breaker, BreakerSettings, Outcome, Refusal, Request, Spend, Status, Store, StoreError,
    Task, TaskId, Timestamp,
};
use board_home::Home;
use serde::Serialize;
use serde_json::json;

pub use crate::planner::RATE_LIMIT_COOLDOWN_SECONDS;
use crate::planner::{
    allowance, decomposition_room, over_runtime, plan, preview, spawn_room, spawnable, Action, Allowance,
    RunRef, StopReason, Stopping, View, WorkerView,
};
use crate::planner::{Boundary, DispatchSettings, Ending, Exit, Observed, TickReport};
use crate::supervisor::{Assignment, OsProcesses, Processes, Signal};
use board_core::LeaseHolder;

/// Decompositions running in the background, off the tick.
pub trait Decompositions: Send {
    /// Forgets the finished ones and returns the ids still in flight.
    fn in_flight(&mut self) -> BTreeSet<TaskId>;
    /// Starts an automatic decomposition of `id` (as the provider breaker's probe, when
    /// `probe`), whose card is leased to this gateway (`lease`); it commits on its own,
    /// only while the lease holds, and sends nothing that could outlast it.
    fn start(&mut self, id: TaskId, probe: bool, lease: decompose::CardLease);
    /// The cards whose attempt ended since the last call with a failure charged to the
    /// card that the store could not record (a full disk). A pool that calls no model
    /// has none.
    fn unrecorded_failures(&mut self) -> BTreeSet<TaskId> {
        BTreeSet::new()
    }
    /// Cancels every decomposition in flight; a cancelled one commits nothing.
    fn cancel_all(&mut self);
    /// Uses these model settings for the decompositions started from now on; those in
    /// flight finish with the settings they started with. A pool that calls no model
    /// has nothing to change.
    fn reconfigure(
        &mut self,
        _settings: decompose::DecomposerSettings,
    ) -> Result<(), decompose::ClientError> {
        Ok(())
    }
}

/// A dispatcher with no decomposer (`kanban dispatch --dry-run`, tests).
pub struct NoDecompositions;

impl Decompositions for NoDecompositions {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        BTreeSet::new()
    }
    fn start(&mut self, _id: TaskId, _probe: bool, _lease: decompose::CardLease) {}
    fn cancel_all(&mut self) {}
}

/// Running totals since the gateway started, for `gateway.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub ticks: u64,
    pub spawned: u64,
    pub reaped: u64,
    pub reclaimed: u64,
    pub timed_out: u64,
    pub disowned: u64,
    pub decompositions_started: u64,
    pub promoted: u64,
    pub errors: u64,
}

/// A worker the dispatcher holds: its own child, or one adopted or taken hold of to stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldWorker {
    pub task_id: TaskId,
    pub pid: u32,
    /// The run it was started for (or adopted in).
    pub run: RunRef,
    pub adopted: bool,
    /// Set once it has been asked to stop.
    pub stopping: Option<Stopping>,
    /// How its run ended, once the board says it has while the worker lives (a run
    /// never reopens, so it is read once).
    pub run_ended: Option<Outcome>,
    /// The profile it runs for (a reviewer's, for a review run); an adopted worker's is
    /// its task's assignee.
    pub profile: Option<String>,
    /// When this gateway started it, or adopted it (its start before that is unknown).
    pub since: Timestamp,
}

/// The dispatcher: the store, the workers it holds, and its decompositions.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    /// This gateway's host (`gateway.host_id`): it signals, adopts and classifies only
    /// the workers recorded on it.
    host: String,
    /// Cards leased for a decomposition this gateway started; released once it ends.
    leased: BTreeSet<TaskId>,
    processes: Box<dyn Processes>,
    decompositions: Box<dyn Decompositions>,
    workers: BTreeMap<TaskId, HeldWorker>,
    /// Rate-limited tasks and when they may be spawned again.
    cooldown: BTreeMap<TaskId, Timestamp>,
    /// Tasks already reported as `skipped_nonspawnable` by this gateway.
    skipped: BTreeSet<TaskId>,
    /// The last tick's read found a full batch of scheduled tasks whose time came: more
    /// may be due.
    due_left: bool,
    /// The decompositions this gateway started, for the backoff policy: their pacing,
    /// and the failures the store could not record.
    floors: BTreeMap<TaskId, AttemptFloor>,
    /// The actions of the last tick.
    last_plan: Vec<Action>,
    /// The provider breaker and the last 24 hours' spend, as the last tick read them.
    safety: Option<(Breaker, Spend, BTreeSet<TaskId>)>,
    /// When the board's decomposition leases were last read (see `read::LEASE_SCAN`).
    leases_read_at: Option<Timestamp>,
    pub counters: Counters,
}

/// A read that failed: what was being read, and why.
type ReadError = (String, StoreError);

impl Dispatcher {
    /// A dispatcher whose workers are real processes of `home`, with report channels.
    pub fn new(store: Arc<dyn Store>, home: Home, decompositions: Box<dyn Decompositions>) -> Dispatcher {
        let processes = Box::new(OsProcesses::new(home, store.clone()));
        Dispatcher::with_processes(store, processes, decompositions)
    }

    pub fn with_processes(
        store: Arc<dyn Store>,
        processes: Box<dyn Processes>,
        decompositions: Box<dyn Decompositions>,
    ) -> Dispatcher {
        let host = board_home::default_host_id();
        Dispatcher {
            store,
            host,
            leased: BTreeSet::new(),
            processes,
            decompositions,
            workers: BTreeMap::new(),
            cooldown: BTreeMap::new(),
            skipped: BTreeSet::new(),
            due_left: false,
            floors: BTreeMap::new(),
            last_plan: Vec::new(),
            safety: None,
            leases_read_at: None,
            counters: Counters::default(),
        }
    }

    /// Who holds this gateway's decomposition leases: its host and its process.
    fn lease_holder(&self) -> String {
        LeaseHolder {
            host: self.host.clone(),
            pid: std::process::id(),
        }
        .to_string()
    }

    /// The dispatcher of the gateway of `host` (`gateway.host_id`) among several on one
    /// board; by default it is the hostname.
    pub fn on_host(mut self, host: &str) -> Dispatcher {
        self.host = host.to_owned();
        self
    }

    /// The host this dispatcher records on the runs it starts.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether the worker of a running task is this host's to signal, adopt or
    /// classify. A run with no host recorded is taken as this host's: it was started by
    /// a gateway that recorded none, which only ever ran alone on its board. A lane's run
    /// is no gateway's: its lease alone ends it.
    fn ours(&self, task: &Task) -> bool {
        task.lane().is_none() && task.worker_host().is_none_or(|h| h == self.host)
    }

    /// The earliest time a scheduled task waits for after `now`, for the gateway to tick
    /// then (`None` when nothing waits for a time, or the read failed: the ticks remain);
    /// `now` itself when the last tick took a full batch of due ones and more may wait.
    pub fn next_scheduled(&self, now: Timestamp) -> Option<Timestamp> {
        if self.due_left {
            return Some(now);
        }
        self.store.next_scheduled(now).ok().flatten()
    }

    /// Workers this dispatcher holds, by task.
    pub fn workers(&self) -> impl Iterator<Item = &HeldWorker> {
        self.workers.values()
    }

    /// Whether a held worker is still being stopped.
    pub fn stopping(&self) -> bool {
        self.workers.values().any(|w| w.stopping.is_some())
    }

    /// The cost safety as the last tick saw it, for `gateway.json` and a dry run: the
    /// breaker, the spend ceilings and the last 24 hours' spend, and what the
    /// decomposition step was allowed.
    pub fn cost_safety(&self, settings: &DispatchSettings, now: Timestamp) -> serde_json::Value {
        let Some((breaker, spend, in_flight)) = &self.safety else {
            return json!(null);
        };
        let view = View {
            breaker: breaker.clone(),
            spend: spend.clone(),
            in_flight: in_flight.clone(),
            ..View::default()
        };
        let (allowed, _) = allowance(&view, now, settings);
        json!({
            "breaker": breaker.json(),
            "ceilings": settings.ceilings.json(spend),
            "spend_24h": spend,
            "decompositions": match allowed {
                Allowance::Cards(n) => format!("up to {n} may start"),
                Allowance::Probe => "one probe may start".to_owned(),
                Allowance::Nothing(why) => why,
            },
        })
    }

    /// The actions the last tick performed.
    pub fn last_plan(&self) -> &[Action] {
        &self.last_plan
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
            if task.worker_pid().is_none() || self.workers.contains_key(&task.id) || !self.ours(&task) {
                continue;
            }
            if !self.hold(&task, now) {
                if let Some(run) = RunRef::of(&task) {
                    self.release(&task.id, &run, "its worker is gone", now, &mut report);
                }
            }
        }
        report
    }

    /// Holds the live workers an earlier gateway left running, writing nothing: what a
    /// pass sees after [`Dispatcher::adopt`], for a dry run.
    pub fn take_hold(&mut self) -> Result<(), StoreError> {
        for task in self.store.running()? {
            if task.worker_pid().is_some() && !self.workers.contains_key(&task.id) && self.ours(&task) {
                self.hold(&task, board_home::now());
            }
        }
        Ok(())
    }

    /// Holds the worker of a running task when it provably runs the task's current run.
    fn hold(&mut self, task: &Task, now: Timestamp) -> bool {
        let Some(run) = RunRef::of(task) else {
            return false;
        };
        let Some(pid) = self.processes.adopt(task) else {
            return false;
        };
        tracing::info!(task = %task.id, pid, "adopted a live worker");
        let held = HeldWorker {
            task_id: task.id.clone(),
            pid,
            run,
            adopted: true,
            stopping: None,
            run_ended: None,
            profile: task.assignee.clone(),
            since: now,
        };
        self.workers.insert(task.id.clone(), held);
        true
    }

    /// One pass of the dispatcher: read, plan, perform.
    pub fn tick(&mut self, settings: &DispatchSettings, now: Timestamp) -> TickReport {
        let (view, failed) = self.read(settings, now);
        let actions = plan(&view, now, settings);
        let errors = failed.into_iter().map(|(what, e)| format!("{what}: {e}"));
        let mut pass = Pass {
            settings,
            now,
            report: TickReport {
                errors: errors.collect(),
                ..TickReport::default()
            },
            claims: BTreeMap::new(),
            started: Vec::new(),
        };
        if settings.auto_decompose {
            pass.report.decompositions_in_flight = view.in_flight.len();
        }
        // A plan's spawns come together, after their claim: their workers start together.
        let spawn = |a: &Action| matches!(a, Action::Spawn { .. });
        for group in actions.chunk_by(|a, b| spawn(a) && spawn(b)) {
            match group {
                [first, ..] if spawn(first) => self.spawn_all(group, &mut pass),
                _ => group.iter().for_each(|a| self.execute(a, &mut pass)),
            }
        }
        self.record_started(&mut pass);
        // Cooldowns that have passed hold nothing back any more.
        self.cooldown.retain(|_, until| *until > now);
        let report = pass.report;
        self.last_plan = actions;
        self.count(&report);
        for error in &report.errors {
            tracing::error!(%error, "tick step failed");
        }
        report
    }

    /// The actions a tick would perform now: the same read and the same plan, performing
    /// nothing.
    pub fn plan(
        &mut self,
        settings: &DispatchSettings,
        now: Timestamp,
    ) -> Result<(View, Vec<Action>), StoreError> {
        let (view, failed) = self.read(settings, now);
        if let Some((_, e)) = failed.into_iter().next() {
            return Err(e);
        }
        let actions = plan(&view, now, settings);
        Ok((view, actions))
    }

    /// What a tick would do now, changing nothing: the plan, in the report's shape.
    pub fn dry_run(&mut self, settings: &DispatchSettings, now: Timestamp) -> Result<TickReport, StoreError> {
        let (view, actions) = self.plan(settings, now)?;
        let in_flight = if settings.auto_decompose {
            view.in_flight.len()
        } else {
            0
        };
        let mut report = preview(&actions, in_flight);
        if settings.auto_decompose {
            report.cost_safety = Some(self.cost_safety(settings, now));
        }
        Ok(report)
    }

    /// The model settings of the decompositions started from now on.
    pub fn reconfigure_decompositions(
        &mut self,
        settings: decompose::DecomposerSettings,
    ) -> Result<(), decompose::ClientError> {
        self.decompositions.reconfigure(settings)
    }

    /// Whether no decomposition is in flight any more.
    pub fn decompositions_idle(&mut self) -> bool {
        self.decompositions.in_flight().is_empty()
    }

    /// Cancels decompositions in flight and releases their leases: a cancelled call
    /// commits nothing, so the card is free for the next gateway at once. Workers keep
    /// running: a restarted gateway adopts them.
    pub fn shutdown(&mut self) {
        self.decompositions.cancel_all();
        for card in self.leased.clone() {
            self.release_decomposition(&card);
        }
    }

    fn count(&mut self, r: &TickReport) {
        let c = &mut self.counters;
        c.ticks += 1;
        c.spawned += r.spawned.len() as u64;
        c.reaped += r.reaped.len() as u64;
        c.reclaimed += r.reclaimed.len() as u64;
        c.timed_out += r.timed_out.len() as u64;
        c.disowned += r.disowned.len() as u64;
        c.decompositions_started += r.decompositions_started.len() as u64;
        c.promoted += r.promoted.len() as u64;
        c.errors += r.errors.len() as u64;
    }
}

mod execute;
mod read;
mod spawn;

use execute::Pass;
