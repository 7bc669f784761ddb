//! The tick's decisions (docs/gateway.md) as one pure function: [`plan`] takes a [`View`] (one
//! read of the board and of the held workers), `now` and the settings, and returns the
//! [`Action`]s the dispatcher then performs, in order. No I/O, no clock: `kanban dispatch
//! --dry-run` prints the same plan a tick would perform.
//!
//! A worker is stopped across ticks: a SIGTERM to its group now, a SIGKILL once the
//! grace is over, and its run is ended only once it is seen gone.

use std::collections::{BTreeMap, BTreeSet};

use board_core::plan::automatic_guard;
use board_core::recurrence::copy_of;
use board_core::{
    AttemptFloor, Breaker, NewTask, Offer, Outcome, RunId, RunKind, Spend, Task, TaskFacts, TaskId,
    Timestamp, TriageLease,
};

mod budget;
mod exit;
mod report;
mod settings;
mod spawns;
mod stopping;

pub use budget::{allowance, decomposition_room, spawn_room, Allowance};
pub use exit::{classify, with_log_tail, Ending, Exit, Observed, EXIT_RATE_LIMITED};
pub use report::{preview, TickReport};
pub use settings::{Boundary, DispatchSettings, Gates, LogRotation};
pub use stopping::{over_runtime, silent, StopReason, SILENCE_SECONDS};

/// How long a task whose worker exited 75 (rate limited) waits before a new worker.
pub const RATE_LIMIT_COOLDOWN_SECONDS: i64 = 60;
/// How long a worker asked to stop (SIGTERM) gets before its group is killed; the clock
/// counts whole seconds, so the grace is over only once more than this has passed.
pub const STOP_GRACE_SECONDS: i64 = 3;

/// The open run of a running task, as the dispatcher names it in its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRef {
    pub run_id: RunId,
    pub claim_lock: String,
}

impl RunRef {
    /// The task's open run, from its lease; `None` when it has none.
    pub fn of(task: &Task) -> Option<RunRef> {
        let lease = task.lease.as_ref()?;
        Some(RunRef {
            run_id: lease.run_id,
            claim_lock: lease.claim_lock.clone(),
        })
    }
}

/// A held worker being stopped: the run to end once it is gone, why, and when it was
/// first asked to stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopping {
    pub run: RunRef,
    pub reason: StopReason,
    pub since: Timestamp,
}

/// A worker the dispatcher holds, as the read saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerView {
    pub task: TaskId,
    /// The run it was started for (or adopted in).
    pub run: RunRef,
    /// Not our child: how it ended is unknowable.
    pub adopted: bool,
    pub observed: Observed,
    pub stopping: Option<Stopping>,
    /// How its run ended, when the board says it has while the worker lives.
    pub run_ended: Option<Outcome>,
    /// The profile it runs for (a reviewer's, for a review run), when known.
    pub profile: Option<String>,
    /// When this gateway started (or adopted) it.
    pub since: Timestamp,
}

/// Everything one tick decides from, read once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    pub workers: Vec<WorkerView>,
    /// Running tasks, in claim order.
    pub running: Vec<Task>,
    /// Running tasks whose lease has expired, or expires within the lease margin.
    pub expired: Vec<Task>,
    /// Running tasks whose worker another host's gateway started: judged by their
    /// lease alone, never signalled or timed out from here.
    pub foreign: BTreeSet<TaskId>,
    /// Running tasks held by no worker here whose recorded pid provably runs their run.
    pub proven: BTreeSet<TaskId>,
    /// Triage cards the store says are due, oldest due first.
    pub triage: Vec<TaskFacts>,
    /// Cards with a decomposition in flight.
    pub in_flight: BTreeSet<TaskId>,
    /// Cards this gateway holds a decomposition lease on (in flight, or ended since the
    /// last tick).
    pub leased: BTreeSet<TaskId>,
    /// What this process remembers of the decompositions it started.
    pub floors: BTreeMap<TaskId, AttemptFloor>,
    /// Cards whose attempt ended since the last tick with a failure charged to the card
    /// that the store could not record (a full disk).
    pub unrecorded: BTreeSet<TaskId>,
    /// The decomposition leases on triage cards, any gateway's, live or lapsed.
    pub triage_leases: Vec<TriageLease>,
    /// Holders of those leases that are gateways of this host no longer running.
    pub gone_holders: BTreeSet<String>,
    /// The provider breaker, as the store holds it.
    pub breaker: Breaker,
    /// The ledger's last 24 hours.
    pub spend: Spend,
    /// Tasks a promotion sweep would promote.
    pub promotable: Vec<TaskId>,
    /// Scheduled tasks whose time has come, earliest first (recurring ones aside).
    pub due_scheduled: Vec<TaskId>,
    /// Recurring tasks' templates whose time has come, earliest first.
    pub due_recurring: Vec<DueRecurrence>,
    /// Ready tasks in claim order (a window of them).
    pub claimable: Vec<Task>,
    /// Tasks whose reported work waits for a verification or a review, in claim order.
    pub checkable: Vec<Task>,
    /// Rate-limited tasks and when they may be spawned again.
    pub cooldown: BTreeMap<TaskId, Timestamp>,
    /// Tasks already noted as not spawnable by this process.
    pub skipped: BTreeSet<TaskId>,
}

/// A recurring task's template whose time came, as the read found it.
#[derive(Clone, Debug, PartialEq)]
pub struct DueRecurrence {
    pub template: Task,
    /// Its next time and the times missed since the one that came, or why they cannot
    /// be told (an expression or a zone this host does not know).
    pub next: Result<(Timestamp, i64), String>,
    /// The copy made last, when it is still open: no copy is made this time.
    pub open_copy: Option<TaskId>,
}

/// One thing a tick does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A held own child exited by itself: let it go, and end its run as classified
    /// (a run the worker finalised itself is left as it is). A run ended rate limited
    /// holds its task back until `cooldown_until`.
    Reap {
        task: TaskId,
        run: RunRef,
        ending: Ending,
        cooldown_until: Option<Timestamp>,
    },
    /// A held own child of a profile whose contract is `auto` exited 0 with output
    /// without reporting: let it go and complete its run, the output its result.
    AutoComplete { task: TaskId, run: RunRef },
    /// A held adopted worker is gone: let it go and release its run without counting a
    /// failure, since how it ended is unknowable.
    ReleaseAdopted { task: TaskId, run: RunRef },
    /// Ask a live worker to stop: SIGTERM to its group (holding it first when another
    /// process started it). Its run ends on a later tick, once it is gone.
    Stop { task: Task, reason: StopReason },
    /// The grace of a stopping worker is over: SIGKILL to its group.
    Kill { task: TaskId },
    /// End a run whose worker is gone (or was never there); `held` when a worker held
    /// here stopped and is let go.
    EndRun {
        task: TaskId,
        run: RunRef,
        ending: Ending,
        held: bool,
    },
    /// The run of a held live worker ended, and not by its report (another host took it
    /// over while this one was cut off): say so, and stop the worker (SIGTERM to its
    /// group, SIGKILL after the grace), to let it go once gone, its run left as it is.
    Disown {
        task: TaskId,
        run: RunRef,
        outcome: Outcome,
    },
    /// A disowned worker is gone: forget it.
    LetGo { task: TaskId },
    /// The lease of a held live worker expired: extend it.
    ExtendLease { task: TaskId, run: RunRef },
    /// A decomposition this gateway started has ended: release the card's lease.
    ReleaseDecomposition { card: TaskId },
    /// The store could not record the failure of a decomposition this gateway started:
    /// remember it as this floor, so the backoff still counts it.
    RememberFailure { card: TaskId, floor: AttemptFloor },
    /// The decomposition lease of another gateway lapsed, or its gateway is gone from
    /// this host: it stopped mid-call. Take the lease over, charge that attempt to the
    /// card's failure budget, and release it; the card is retried under the policy.
    TakeOverLease { card: TaskId, holder: String },
    /// Hand a due triage card to the background decomposer, remembering the attempt;
    /// as the provider breaker's one probe, nothing is remembered (an outage is not the
    /// card's failure).
    StartDecomposition {
        card: TaskId,
        floor: AttemptFloor,
        probe: bool,
    },
    /// The spend ceiling in force changed: note it once (an event on `card`, the card
    /// it holds back or the first it lets through, and one log line).
    NoteCeiling { card: TaskId, reached: Option<String> },
    /// Put back to work the scheduled tasks whose time has come.
    Resume { tasks: Vec<TaskId> },
    /// A recurring task's time came: make `copy` (none while the last copy is open) and
    /// move the template to `next`.
    Recur {
        template: TaskId,
        copy: Option<Box<NewTask>>,
        next: Timestamp,
        missed: i64,
    },
    /// A recurring task whose next time cannot be told: it runs once now, as itself, and
    /// repeats no more (`why` is reported).
    EndRecurrence { template: TaskId, why: String },
    /// Promote the `todo` tasks whose parents are all finished.
    Promote { tasks: Vec<TaskId> },
    /// A ready task whose profile has no command (or a task in review whose reviewer
    /// has none): noted once, left waiting.
    SkipNonspawnable { task: TaskId, profile: String },
    /// Claim these tasks, each for its kind of run (work, verification, review), in one
    /// call (among gateways sharing the board, a task another is claiming is skipped,
    /// not waited for); the spawns that follow start the workers of those claimed.
    Claim { offers: Vec<Offer> },
    /// Start the worker of a task claimed by the plan's `Claim`: the profile's command
    /// for work, the reviewer's for a review, the verifier for a verification (which
    /// runs `verifiers` in the task's workspace as the profile's user).
    Spawn {
        task: Task,
        profile: String,
        command: Vec<String>,
        kind: RunKind,
        verifiers: Vec<Vec<String>>,
    },
}

impl Action {
    /// The tasks the action is about: one, or every task a promotion would promote.
    pub fn tasks(&self) -> Vec<&TaskId> {
        match self {
            Action::Reap { task, .. }
            | Action::AutoComplete { task, .. }
            | Action::ReleaseAdopted { task, .. }
            | Action::Kill { task }
            | Action::Disown { task, .. }
            | Action::LetGo { task }
            | Action::EndRun { task, .. }
            | Action::ExtendLease { task, .. }
            | Action::SkipNonspawnable { task, .. } => vec![task],
            Action::Recur { template, .. } | Action::EndRecurrence { template, .. } => vec![template],
            Action::NoteCeiling { card, .. }
            | Action::ReleaseDecomposition { card }
            | Action::TakeOverLease { card, .. }
            | Action::RememberFailure { card, .. } => vec![card],
            Action::Stop { task, .. } | Action::Spawn { task, .. } => vec![&task.id],
            Action::StartDecomposition { card, .. } => vec![card],
            Action::Promote { tasks } | Action::Resume { tasks } => tasks.iter().collect(),
            Action::Claim { offers } => offers.iter().map(|o| &o.task).collect(),
        }
    }
}

/// Whether a run's worker ended it by its own report (and so exits by itself): a
/// completion, a block, or a check's verdict.
fn reported(outcome: Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Completed | Outcome::Blocked | Outcome::VerifyFailed | Outcome::ChangesRequested
    )
}

/// Whether a ready task is one a tick would try to spawn now: not cooling down after a
/// rate limit, and its profile has a command.
pub fn spawnable(
    task: &Task,
    settings: &DispatchSettings,
    cooldown: &BTreeMap<TaskId, Timestamp>,
    now: Timestamp,
) -> bool {
    !cooling(cooldown, &task.id, now) && settings.worker_for(task).1.is_some()
}

fn cooling(cooldown: &BTreeMap<TaskId, Timestamp>, id: &TaskId, now: Timestamp) -> bool {
    cooldown.get(id).is_some_and(|until| *until > now)
}

/// The tick's actions, in the order of docs/gateway.md: held workers (reap, kill, end stopped runs),
/// runtimes and leases, decompositions, promotion, claims.
pub fn plan(view: &View, now: Timestamp, settings: &DispatchSettings) -> Vec<Action> {
    let mut planner = Planner {
        view,
        now,
        settings,
        actions: Vec::new(),
        settled: BTreeSet::new(),
        held: view.workers.len(),
    };
    planner.workers();
    planner.leases();
    planner.decompositions();
    planner.recurrences();
    if !view.due_scheduled.is_empty() {
        planner.actions.push(Action::Resume {
            tasks: view.due_scheduled.clone(),
        });
    }
    if !view.promotable.is_empty() {
        planner.actions.push(Action::Promote {
            tasks: view.promotable.clone(),
        });
    }
    planner.spawns();
    planner.actions
}

impl Planner<'_> {
    /// Each due recurring task: a copy for its time (none while the last is open) and
    /// its next time, or, when that cannot be told, one last run as itself.
    fn recurrences(&mut self) {
        for due in &self.view.due_recurring {
            let template = due.template.id.clone();
            let action = match &due.next {
                Ok((next, missed)) => Action::Recur {
                    copy: match (&due.open_copy, due.template.scheduled_until) {
                        (None, Some(at)) => Some(Box::new(copy_of(&due.template, at))),
                        _ => None,
                    },
                    template,
                    next: *next,
                    missed: *missed,
                },
                Err(why) => Action::EndRecurrence {
                    template,
                    why: why.clone(),
                },
            };
            self.actions.push(action);
        }
    }
}

struct Planner<'a> {
    view: &'a View,
    now: Timestamp,
    settings: &'a DispatchSettings,
    actions: Vec<Action>,
    /// Tasks whose run this plan already ends, or whose worker it is stopping.
    settled: BTreeSet<TaskId>,
    /// Workers held once this plan is done.
    held: usize,
}

impl Planner<'_> {
    fn worker(&self, id: &TaskId) -> Option<&WorkerView> {
        self.view.workers.iter().find(|w| &w.task == id)
    }

    /// What this process remembers of a card's decompositions, counting a failure the
    /// store could not record.
    fn floor(&self, id: &TaskId) -> Option<AttemptFloor> {
        let floor = self.view.floors.get(id).copied();
        if self.view.unrecorded.contains(id) {
            floor.map(|f| f.unrecorded_failure())
        } else {
            floor
        }
    }

    /// Step 1: held workers that exited, those being stopped, and those whose run ended
    /// without them.
    fn workers(&mut self) {
        for w in &self.view.workers {
            let task = w.task.clone();
            let action = match (&w.stopping, &w.observed) {
                (None, Observed::Alive) => match w.run_ended {
                    Some(outcome) if !reported(outcome) => Action::Disown {
                        task,
                        run: w.run.clone(),
                        outcome,
                    },
                    _ => continue,
                },
                (Some(s), Observed::Alive) => {
                    if self.now - s.since <= STOP_GRACE_SECONDS {
                        self.settled.insert(task);
                        continue;
                    }
                    Action::Kill { task }
                }
                (Some(s), Observed::Exited { log_tail, .. }) => match s.reason.ending(log_tail) {
                    Some(ending) => Action::EndRun {
                        task,
                        run: s.run.clone(),
                        ending,
                        held: true,
                    },
                    None => Action::LetGo { task },
                },
                (None, Observed::Exited { .. }) if w.adopted => Action::ReleaseAdopted {
                    task,
                    run: w.run.clone(),
                },
                (None, Observed::Exited { exit, log_tail }) if self.auto_completes(w, *exit, log_tail) => {
                    Action::AutoComplete {
                        task,
                        run: w.run.clone(),
                    }
                }
                (None, Observed::Exited { exit, log_tail }) => {
                    let ending = classify(*exit, log_tail);
                    let rate_limited = ending.outcome == Outcome::RateLimited;
                    Action::Reap {
                        task,
                        run: w.run.clone(),
                        ending,
                        cooldown_until: rate_limited.then_some(self.now + RATE_LIMIT_COOLDOWN_SECONDS),
                    }
                }
            };
            self.settled.insert(w.task.clone());
            if !matches!(action, Action::Kill { .. } | Action::Disown { .. }) {
                self.held -= 1;
            }
            self.actions.push(action);
        }
    }

    /// Whether a worker's exit completes its task by its profile's `auto` contract: it
    /// exited 0 and wrote something.
    fn auto_completes(&self, w: &WorkerView, exit: Exit, log_tail: &str) -> bool {
        let auto = w
            .profile
            .as_deref()
            .and_then(|p| self.settings.gates_for(p))
            .is_some_and(|g| g.auto);
        auto && exit == Exit::Code(0) && !log_tail.trim().is_empty()
    }

    /// Step 2: runtimes over `max_runtime_seconds` are stopped (this host's workers
    /// only: another host times out its own); leases expiring soon are extended for a
    /// held live worker of the same run, and an expired one with none goes stale.
    fn leases(&mut self) {
        let now = self.now;
        let foreign = &self.view.foreign;
        for task in self
            .view
            .running
            .iter()
            .filter(|t| over_runtime(t, now) && !foreign.contains(&t.id))
        {
            self.stop_or_end(task, StopReason::timed_out(task));
        }
        let limit = self.settings.stale_timeout_seconds;
        for task in self.view.running.iter().filter(|t| !foreign.contains(&t.id)) {
            let held = self.worker(&task.id).filter(|w| w.stopping.is_none());
            if held.is_some_and(|w| silent(task, w.since, limit, now)) {
                self.stop_or_end(task, StopReason::Silent { limit });
            }
        }
        for task in &self.view.expired {
            let Some(run) = RunRef::of(task) else {
                continue;
            };
            if self.settled.contains(&task.id) {
                continue;
            }
            if self.worker(&task.id).is_some_and(|w| w.run.run_id == run.run_id) {
                self.actions.push(Action::ExtendLease {
                    task: task.id.clone(),
                    run,
                });
                continue;
            }
            if task.lease.as_ref().is_some_and(|l| l.expires > now) {
                continue;
            }
            self.stop_or_end(task, StopReason::stale(task, now));
        }
    }

    /// A live worker (held, or proven to run the task's run) is asked to stop; with none,
    /// the run ends now.
    fn stop_or_end(&mut self, task: &Task, reason: StopReason) {
        if !self.settled.insert(task.id.clone()) {
            return;
        }
        // A held worker of an earlier run of the task is not this run's.
        let run = RunRef::of(task).map(|r| r.run_id);
        let held = self.worker(&task.id).is_some_and(|w| Some(w.run.run_id) == run);
        if held || self.view.proven.contains(&task.id) {
            self.held += usize::from(!held);
            self.actions.push(Action::Stop {
                task: task.clone(),
                reason,
            });
        } else if let (Some(run), Some(ending)) = (RunRef::of(task), reason.ending("")) {
            self.actions.push(Action::EndRun {
                task: task.id.clone(),
                run,
                ending,
                held: false,
            });
        }
    }

    /// Step 3: due triage cards to the background decomposer, within what the cost
    /// safety allows ([`allowance`]) and the per-tick and in-flight limits, never a card
    /// already in flight, and never one the backoff policy holds back.
    fn decompositions(&mut self) {
        let view = self.view;
        for card in view.leased.difference(&view.in_flight) {
            let card = card.clone();
            self.actions.push(Action::ReleaseDecomposition { card });
        }
        for card in &view.unrecorded {
            if let Some(floor) = self.floor(card) {
                let card = card.clone();
                self.actions.push(Action::RememberFailure { card, floor });
            }
        }
        let s = self.settings;
        if !s.auto_decompose {
            return;
        }
        let in_flight = &self.view.in_flight;
        let policy = s.decompose_retry;
        let (allowed, ceiling) = allowance(self.view, self.now, s);
        if ceiling != self.view.breaker.ceiling {
            if let Some(first) = self.view.triage.first() {
                self.actions.push(Action::NoteCeiling {
                    card: first.task.id.clone(),
                    reached: ceiling,
                });
            }
        }
        let (room, probe) = match allowed {
            Allowance::Cards(room) => (room, false),
            Allowance::Probe => (1, true),
            Allowance::Nothing(_) => return,
        };
        let taken_over = self.take_over_leases();
        let mut due: Vec<&TaskFacts> = self
            .view
            .triage
            .iter()
            .filter(|facts| {
                let id = &facts.task.id;
                let ready = if probe {
                    automatic_guard(facts, self.now).is_ok()
                } else {
                    policy.allows(facts, self.floor(id).as_ref(), self.now)
                };
                !in_flight.contains(id) && !taken_over.contains(id) && ready
            })
            .collect();
        let breaker = &self.view.breaker;
        if probe || breaker.in_doubt() {
            // The probe, or the one call while in doubt, asks about the provider, so it
            // goes to a card not suspected of failing by itself when there is one (a
            // stable sort keeps the due order).
            due.sort_by_key(|facts| breaker.suspected(&facts.task.id));
        }
        for facts in due.into_iter().take(room) {
            let card = facts.task.id.clone();
            let floor = policy.floor_after_start(&facts.task, self.floor(&card).as_ref(), self.now);
            self.actions
                .push(Action::StartDecomposition { card, floor, probe });
        }
    }

    /// Leases of other gateways that stopped mid-call, taken over (their attempt charged)
    /// rather than waited for: one lapsed on a due card, or held by a gateway of this
    /// host whose process is gone. The cards taken over start nothing this tick.
    fn take_over_leases(&mut self) -> BTreeSet<TaskId> {
        let view = self.view;
        let due: BTreeSet<&TaskId> = view.triage.iter().map(|f| &f.task.id).collect();
        let mut taken = BTreeSet::new();
        for lease in &view.triage_leases {
            let ours = view.leased.contains(&lease.card) || view.in_flight.contains(&lease.card);
            let lapsed = lease.expires <= self.now && due.contains(&lease.card);
            if ours || !(lapsed || view.gone_holders.contains(&lease.holder)) {
                continue;
            }
            taken.insert(lease.card.clone());
            self.actions.push(Action::TakeOverLease {
                card: lease.card.clone(),
                holder: lease.holder.clone(),
            });
        }
        taken
    }
}

#[cfg(test)]
mod tests;
