//! The tick as read, plan, perform, with the process control replaced by a recording
//! fake and the board in memory: a dry run plans exactly what a tick then performs, and
//! a worker is stopped across ticks (SIGTERM, SIGKILL after the grace) with its run
//! ended only once it is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use board_core::memory::MemStore;
use board_core::{BoardReads, BoardWrites, NewTask, Outcome, Request, Status, Task, TaskId};
use gateway::dispatcher::{Decompositions, Dispatcher};
use gateway::planner::{preview, Action, DispatchSettings, Exit, Observed, TickReport, STOP_GRACE_SECONDS};
use gateway::supervisor::{Assignment, Processes, Signal};

const T0: i64 = 1_800_000_000;

/// Records what the dispatcher asks of its processes; a held worker lives until the
/// test says how it ended. With `proves_all`, every recorded pid provably runs its run
/// (as a reused or foreign pid might seem to), and is adopted when asked.
#[derive(Clone, Default)]
struct FakeProcesses {
    calls: Arc<Mutex<Vec<String>>>,
    held: Arc<Mutex<BTreeSet<TaskId>>>,
    exits: Arc<Mutex<BTreeMap<TaskId, Exit>>>,
    proves_all: bool,
}

impl FakeProcesses {
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn exit(&self, id: &TaskId, exit: Exit) {
        self.exits.lock().unwrap().insert(id.clone(), exit);
    }
}

impl Processes for FakeProcesses {
    fn spawn(&mut self, a: &Assignment<'_>) -> std::io::Result<u32> {
        self.record(format!("spawn {}", a.task.id));
        self.held.lock().unwrap().insert(a.task.id.clone());
        Ok(4242)
    }
    fn proven(&self, task: &Task) -> bool {
        self.record(format!("prove {}", task.id));
        self.proves_all
    }
    fn adopt(&mut self, task: &Task) -> Option<u32> {
        self.record(format!("adopt {}", task.id));
        self.held.lock().unwrap().insert(task.id.clone());
        self.proves_all.then_some(4242)
    }
    fn probe(&self, task: &TaskId) -> Option<Observed> {
        if !self.held.lock().unwrap().contains(task) {
            return None;
        }
        Some(match self.exits.lock().unwrap().get(task) {
            None => Observed::Alive,
            Some(exit) => Observed::Exited {
                exit: *exit,
                log_tail: String::new(),
            },
        })
    }
    fn signal(&mut self, task: &TaskId, signal: Signal) {
        self.record(format!("{signal:?} {task}"));
    }
    fn release(&mut self, task: &TaskId) {
        self.record(format!("release {task}"));
        self.held.lock().unwrap().remove(task);
    }
}

/// Decompositions that start and stay in flight.
#[derive(Default)]
struct InFlight(BTreeSet<TaskId>);

impl Decompositions for InFlight {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        self.0.clone()
    }
    fn start(&mut self, id: TaskId, _probe: bool, _lease: decompose::CardLease) {
        self.0.insert(id);
    }
    fn cancel_all(&mut self) {
        self.0.clear();
    }
}

fn settings() -> DispatchSettings {
    DispatchSettings {
        max_spawn: 2,
        commands: BTreeMap::from([
            ("default".to_owned(), Some(vec!["agent".to_owned()])),
            ("idle".to_owned(), None),
        ]),
        ..DispatchSettings::default()
    }
}

fn board() -> (Arc<MemStore>, FakeProcesses, Dispatcher) {
    let store = Arc::new(MemStore::new());
    let processes = FakeProcesses::default();
    let d = Dispatcher::with_processes(
        store.clone(),
        Box::new(processes.clone()),
        Box::<InFlight>::default(),
    );
    (store, processes, d)
}

fn create(store: &MemStore, title: &str, f: impl FnOnce(&mut NewTask)) -> TaskId {
    let mut request = NewTask::titled(title);
    f(&mut request);
    store.create(&request, T0).unwrap().id
}

#[test]
fn a_dry_run_plans_exactly_what_the_tick_then_performs() {
    let (store, _processes, mut d) = board();
    let slow = create(&store, "slow", |t| t.max_runtime_seconds = Some(5));
    assert_eq!(d.tick(&settings(), T0).spawned, vec![slow.clone()]);
    // Before the spawnable one in claim order, so the read widens its window past it.
    let idle = create(&store, "idle", |t| t.assignee = Some("idle".into()));
    let ready = create(&store, "ready", |_| {});
    let card = create(&store, "rough idea", |t| t.triage = true);
    let by_hand = create(&store, "claimed by hand", |_| {});
    store.claim(&by_hand, 10, T0).unwrap();
    let now = T0 + 20;
    let (view, planned) = d.plan(&settings(), now).unwrap();
    let dry = d.dry_run(&settings(), now).unwrap();
    let report = d.tick(&settings(), now);
    assert_eq!(d.last_plan(), &planned[..]);
    assert!(report.errors.is_empty(), "{report:?}");
    assert!(
        dry.cost_safety.is_some(),
        "a dry run shows the breaker and the ceilings"
    );
    let dry = TickReport {
        cost_safety: None,
        ..dry
    };
    assert_eq!(dry, preview(&planned, view.in_flight.len()));
    let about = |pick: fn(&Action) -> bool| -> Vec<TaskId> {
        planned
            .iter()
            .filter(|a| pick(a))
            .flat_map(|a| a.tasks())
            .cloned()
            .collect()
    };
    assert_eq!(about(|a| matches!(a, Action::Stop { .. })), [slow]);
    assert_eq!(about(|a| matches!(a, Action::EndRun { .. })), [by_hand]);
    assert_eq!(
        about(|a| matches!(a, Action::StartDecomposition { .. })),
        std::slice::from_ref(&card)
    );
    assert_eq!(about(|a| matches!(a, Action::SkipNonspawnable { .. })), [idle]);
    assert_eq!(
        about(|a| matches!(a, Action::Spawn { .. })),
        std::slice::from_ref(&ready)
    );
    assert_eq!(report.spawned, [ready]);
    assert_eq!(report.decompositions_started, [card]);
}

#[test]
fn a_worker_is_signalled_then_killed_and_its_run_ends_only_once_it_is_gone() {
    let (store, processes, mut d) = board();
    let id = create(&store, "slow", |t| t.max_runtime_seconds = Some(5));
    let s = DispatchSettings {
        max_spawn: 1,
        ..settings()
    };
    d.tick(&s, T0);
    let running = |at: i64, d: &mut Dispatcher| {
        let report = d.tick(&s, at);
        assert!(
            report.timed_out.is_empty() && report.errors.is_empty(),
            "{report:?}"
        );
        assert_eq!(
            store.get(&id).unwrap().status,
            Status::Running,
            "released while it lived"
        );
    };
    running(T0 + 5, &mut d);
    running(T0 + 5 + STOP_GRACE_SECONDS, &mut d);
    assert_eq!(processes.calls(), [format!("spawn {id}"), format!("Term {id}")]);
    running(T0 + 6 + STOP_GRACE_SECONDS, &mut d);
    running(T0 + 7 + STOP_GRACE_SECONDS, &mut d);
    assert_eq!(
        processes.calls()[2..],
        [format!("Kill {id}"), format!("Kill {id}")]
    );
    processes.exit(&id, Exit::Signal(9));
    let report = d.tick(&s, T0 + 8 + STOP_GRACE_SECONDS);
    assert_eq!(report.timed_out, std::slice::from_ref(&id));
    assert_eq!(processes.calls().last(), Some(&format!("release {id}")));
    let run = store.runs(&id).unwrap().remove(0);
    assert_eq!(run.outcome, Some(Outcome::TimedOut));
    assert!(report.spawned.is_empty(), "{report:?}");
}

/// A dispatcher judges another host's run by its lease alone, even when its recorded pid
/// would prove to be the run's worker here: it never proves, adopts or signals it, nor
/// times it out, and ends it `stale` once its lease lapses. A run of its own host in the
/// same state is adopted and stopped.
#[test]
fn another_hosts_run_is_never_adopted_or_signalled_and_ends_stale_by_its_lease() {
    let store = Arc::new(MemStore::new());
    let processes = FakeProcesses {
        proves_all: true,
        ..FakeProcesses::default()
    };
    let boxed = Box::new(processes.clone());
    let mut d =
        Dispatcher::with_processes(store.clone(), boxed, Box::<InFlight>::default()).on_host("host-a");
    let running_on = |host: &str| {
        let id = create(&store, host, |t| t.max_runtime_seconds = Some(5));
        let claim = store.claim(&id, 100, T0).unwrap();
        let set = Request::SetWorker {
            run_id: claim.run_id,
            claim_lock: claim.claim_lock,
            pid: 777,
            host: host.to_owned(),
        };
        store.transition(&id, &set, T0).unwrap();
        id
    };
    let (theirs, ours) = (running_on("host-b"), running_on("host-a"));
    assert!(d.adopt(T0 + 10).errors.is_empty());
    d.tick(&settings(), T0 + 10);
    assert_eq!(
        processes.calls(),
        [format!("adopt {ours}"), format!("Term {ours}")],
        "only this host's worker is adopted and stopped"
    );
    assert_eq!(store.get(&theirs).unwrap().status, Status::Running);
    let report = d.tick(&settings(), T0 + 101);
    assert_eq!(report.reclaimed, std::slice::from_ref(&theirs), "{report:?}");
    let run = store.runs(&theirs).unwrap().remove(0);
    assert_eq!(run.outcome, Some(Outcome::Stale));
    let about_theirs: Vec<String> = processes
        .calls()
        .into_iter()
        .filter(|c| c.ends_with(theirs.as_str()))
        .collect();
    assert_eq!(about_theirs, Vec::<String>::new());
}

/// More scheduled tasks due at once than a tick resumes: the dispatcher says to tick
/// again at once, and the next tick resumes the rest; then nothing is due.
#[test]
fn a_full_batch_of_due_tasks_asks_for_another_tick_at_once() {
    let (store, _processes, mut d) = board();
    let idle = |t: &mut NewTask| t.assignee = Some("idle".into());
    let ids: Vec<TaskId> = (0..300)
        .map(|n| create(&store, &format!("due {n}"), idle))
        .collect();
    let later = create(&store, "later", idle);
    let schedule = |until| Request::Schedule {
        reason: None,
        expected_run_id: None,
        until: Some(until),
        every: None,
    };
    for id in &ids {
        store.transition(id, &schedule(T0 + 1), T0).unwrap();
    }
    store.transition(&later, &schedule(T0 + 500), T0).unwrap();
    let now = T0 + 2;
    assert_eq!(d.tick(&settings(), now).resumed.len(), 256);
    assert_eq!(d.next_scheduled(now), Some(now), "more are due: tick again now");
    assert_eq!(d.tick(&settings(), now).resumed.len(), 44);
    assert_eq!(d.next_scheduled(now), Some(T0 + 500));
    assert!(ids
        .iter()
        .all(|id| store.get(id).unwrap().status == Status::Ready));
}
