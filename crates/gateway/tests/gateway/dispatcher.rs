//! The dispatcher's tick against a real SQLite board and real worker processes
//! (`sh -c ...`), with an injected clock; decompositions through a recording fake.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use board_core::{EventFilter, NewTask, Outcome, Status, Store, TaskId};

use board_sqlite::{Options, SqliteStore};
use gateway::dispatcher::{Decompositions, Dispatcher, NoDecompositions};
use gateway::planner::{DispatchSettings, TickReport};

pub(crate) const T0: i64 = 1_800_000_000;

pub(crate) struct Home {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: Arc<dyn Store>,
}

pub(crate) fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("kanban.db"), &Options::default()).unwrap());
    Home { dir, store }
}

impl Home {
    pub(crate) fn dispatcher(&self) -> Dispatcher {
        Dispatcher::new(
            self.store.clone(),
            board_home::Home::at(self.dir.path()).unwrap(),
            Box::new(NoDecompositions),
        )
    }

    /// A ready task; tasks created later come later in the claim order.
    pub(crate) fn task(&self, title: &str, assignee: &str) -> TaskId {
        let request = NewTask {
            assignee: Some(assignee.into()),
            ..NewTask::titled(title)
        };
        let age = self.store.snapshot().unwrap().tasks.len() as i64;
        self.store.create(&request, T0 - 1000 + age).unwrap().id
    }

    /// A triage card created at `at`.
    fn triage(&self, title: &str, at: i64) -> TaskId {
        let request = NewTask {
            triage: true,
            ..NewTask::titled(title)
        };
        self.store.create(&request, at).unwrap().id
    }

    /// A dispatcher whose decompositions a test drives through the returned recorder.
    /// Marks the provider as seen up, as a successful call would: decompositions then
    /// run at the configured rate.
    fn provider_up(&self, card: &TaskId) {
        let up = board_core::BreakerSignal::Up { card: card.clone() };
        self.store.signal_breaker(&up, &Default::default(), T0).unwrap();
    }

    fn recording_dispatcher(&self) -> (Dispatcher, Recorder) {
        let recorder = Recorder::default();
        let d = Dispatcher::new(
            self.store.clone(),
            board_home::Home::at(self.dir.path()).unwrap(),
            Box::new(recorder.clone()),
        );
        (d, recorder)
    }

    fn kinds(&self, id: &TaskId) -> Vec<String> {
        let filter = EventFilter {
            task_id: Some(id.clone()),
            ..EventFilter::default()
        };
        self.store
            .events(&filter)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }
}

pub(crate) fn settings(profiles: &[(&str, &str)]) -> DispatchSettings {
    let mut commands: BTreeMap<String, Option<Vec<String>>> = profiles
        .iter()
        .map(|(name, script)| {
            let argv = vec!["sh".to_owned(), "-c".to_owned(), (*script).to_owned()];
            ((*name).to_owned(), Some(argv))
        })
        .collect();
    commands.insert("idle".into(), None);
    DispatchSettings {
        max_spawn: 4,
        auto_decompose: false,
        commands,
        ..DispatchSettings::default()
    }
}

/// The same settings, spawning nothing: the tick only watches.
pub(crate) fn watch(s: &DispatchSettings) -> DispatchSettings {
    DispatchSettings {
        max_spawn: 0,
        ..s.clone()
    }
}

/// Ticks until `done` holds for a report, failing after a few seconds.
pub(crate) fn tick_until(
    d: &mut Dispatcher,
    s: &DispatchSettings,
    now: i64,
    done: impl Fn(&TickReport) -> bool,
) -> TickReport {
    let start = Instant::now();
    loop {
        let report = d.tick(s, now);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        if done(&report) {
            return report;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "condition never held");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn last_outcome(h: &Home, id: &TaskId) -> Option<Outcome> {
    h.store.runs(id).unwrap().last().and_then(|r| r.outcome)
}

#[test]
fn a_worker_that_exits_zero_without_completing_is_a_protocol_violation() {
    let h = home();
    let s = settings(&[("lazy", "echo thinking; exit 0")]);
    let id = h.task("lazy work", "lazy");
    let mut d = h.dispatcher();
    let first = d.tick(&s, T0);
    assert_eq!(first.spawned, vec![id.clone()]);
    let run = h.store.runs(&id).unwrap().remove(0);
    assert!(run.worker_pid.is_some(), "the pid is recorded");
    tick_until(&mut d, &watch(&s), T0 + 1, |r| r.reaped.contains(&id));
    assert_eq!(last_outcome(&h, &id), Some(Outcome::ProtocolViolation));
    let run = h.store.runs(&id).unwrap().remove(0);
    assert!(run.error.unwrap().contains("thinking"), "quotes its own log");
    let task = h.store.get(&id).unwrap();
    assert_eq!(task.consecutive_failures, 1);
    assert!(h.kinds(&id).contains(&"protocol_violation".to_owned()));
    let log = std::fs::read_to_string(h.dir.path().join("logs").join(format!("{id}.log"))).unwrap();
    assert!(log.contains("thinking"));
}

#[test]
fn a_worker_that_crashes_twice_is_given_up() {
    let h = home();
    let s = settings(&[("crashy", "echo attempt $KANBAN_RUN_ID >&2; exit 3")]);
    let id = h.task("crashy work", "crashy");
    let mut d = h.dispatcher();
    for round in 0..2 {
        let now = T0 + 10 * round;
        d.tick(&s, now);
        tick_until(&mut d, &watch(&s), now + 1, |r| r.reaped.contains(&id));
    }
    let task = h.store.get(&id).unwrap();
    assert_eq!(task.status, Status::Blocked);
    let runs = h.store.runs(&id).unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.outcome == Some(Outcome::Crashed)));
    // Each run quotes its own attempt's log, never an earlier one's.
    assert!(runs[1]
        .error
        .as_deref()
        .unwrap()
        .contains(&format!("attempt {}", runs[1].id)));
    assert!(!runs[1]
        .error
        .as_deref()
        .unwrap()
        .contains(&format!("attempt {}", runs[0].id)));
    let crashed = h
        .store
        .events(&EventFilter {
            task_id: Some(id.clone()),
            ..EventFilter::default()
        })
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "crashed")
        .unwrap();
    assert_eq!(crashed.payload["exit_code"], 3);
    assert!(crashed.payload["signal"].is_null());
    assert!(h.kinds(&id).contains(&"gave_up".to_owned()));
}

#[test]
fn a_rate_limited_worker_returns_its_task_without_a_failure_and_cools_down() {
    let h = home();
    let s = settings(&[("limited", "exit 75")]);
    let id = h.task("limited work", "limited");
    let mut d = h.dispatcher();
    d.tick(&s, T0);
    let report = tick_until(&mut d, &s, T0 + 1, |r| r.reaped.contains(&id));
    assert!(report.spawned.is_empty(), "not respawned during the cooldown");
    assert!(
        d.tick(&s, T0 + 2).spawned.is_empty(),
        "not respawned during the cooldown"
    );
    let task = h.store.get(&id).unwrap();
    assert_eq!((task.status, task.consecutive_failures), (Status::Ready, 0));
    assert_eq!(last_outcome(&h, &id), Some(Outcome::RateLimited));
    assert!(d.tick(&s, T0 + 30).spawned.is_empty());
    assert_eq!(d.tick(&s, T0 + 1000).spawned, vec![id]);
}

#[test]
fn a_worker_past_its_max_runtime_is_killed_and_timed_out() {
    let h = home();
    let s = settings(&[("slow", "sleep 30")]);
    let request = NewTask {
        assignee: Some("slow".into()),
        max_runtime_seconds: Some(5),
        ..NewTask::titled("slow work")
    };
    let id = h.store.create(&request, T0).unwrap().id;
    let mut d = h.dispatcher();
    d.tick(&s, T0);
    let pid = h
        .store
        .get(&id)
        .unwrap()
        .lease
        .and_then(|l| l.worker_pid)
        .unwrap();
    assert!(d.tick(&s, T0 + 4).timed_out.is_empty());
    let asked = d.tick(&watch(&s), T0 + 5);
    assert!(
        asked.timed_out.is_empty(),
        "the run ends only once the worker is seen gone"
    );
    // `sleep` honours SIGTERM: a later tick sees it gone, within the grace.
    tick_until(&mut d, &watch(&s), T0 + 5, |r| r.timed_out == vec![id.clone()]);
    assert_eq!(last_outcome(&h, &id), Some(Outcome::TimedOut));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "no process left behind"
    );
}

#[test]
fn a_profile_without_a_command_is_skipped_once_and_max_spawn_holds() {
    let h = home();
    let s = DispatchSettings {
        max_spawn: 2,
        ..settings(&[("sleepy", "sleep 30")])
    };
    let idle = h.task("nobody can run this", "idle");
    let busy: Vec<TaskId> = (0..3).map(|i| h.task(&format!("sleepy {i}"), "sleepy")).collect();
    let mut d = h.dispatcher();
    let first = d.tick(&s, T0);
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.spawned, busy[..2].to_vec());
    assert!(d.tick(&s, T0 + 1).spawned.is_empty(), "max_spawn is reached");
    let skipped = h
        .kinds(&idle)
        .iter()
        .filter(|k| *k == "skipped_nonspawnable")
        .count();
    assert_eq!(skipped, 1);
    assert_eq!(h.store.get(&idle).unwrap().status, Status::Ready);
    kill_workers(&d);
}

pub(crate) fn kill_workers(d: &Dispatcher) {
    for w in d.workers() {
        // SAFETY: signalling the process group of a worker this test started.
        unsafe { libc::kill(-(w.pid as i32), libc::SIGKILL) };
    }
}

#[test]
fn a_restarted_dispatcher_adopts_live_workers_and_reclaims_dead_ones() {
    let h = home();
    let s = settings(&[("sleepy", "sleep 30")]);
    let alive = h.task("keeps running", "sleepy");
    let dead = h.task("will die", "sleepy");
    let mut first = h.dispatcher();
    first.tick(&s, T0);
    let pid_of = |id: &TaskId| h.store.get(id).unwrap().lease.and_then(|l| l.worker_pid).unwrap() as i32;
    let (alive_pid, dead_pid) = (pid_of(&alive), pid_of(&dead));
    // The first gateway goes away; its workers stay.
    std::mem::forget(first);
    unsafe { libc::kill(-dead_pid, libc::SIGKILL) };
    let start = Instant::now();
    // The dead worker is a zombie of this test process until reaped.
    while unsafe { libc::waitpid(dead_pid, std::ptr::null_mut(), libc::WNOHANG) } == 0 {
        assert!(start.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut second = h.dispatcher();
    let report = second.adopt(T0 + 1);
    assert_eq!(report.reclaimed, vec![dead.clone()]);
    assert_eq!(last_outcome(&h, &dead), Some(Outcome::Reclaimed));
    assert_eq!(h.store.get(&alive).unwrap().status, Status::Running);
    assert_eq!(
        second.workers().map(|w| w.pid as i32).collect::<Vec<_>>(),
        vec![alive_pid]
    );
    // The adopted worker is not respawned; its lease is extended while it lives.
    let later = second.tick(&s, T0 + 2000);
    assert!(later.spawned.iter().all(|id| id != &alive), "{later:?}");
    assert!(later.extended.contains(&alive), "{later:?}");
    assert_eq!(h.store.runs(&alive).unwrap().len(), 1);
    unsafe { libc::kill(-alive_pid, libc::SIGKILL) };
}

#[test]
fn an_expired_lease_without_a_live_worker_goes_stale() {
    let h = home();
    let s = settings(&[]);
    let id = h.task("claimed by hand", "idle");
    h.store.claim(&id, 10, T0).unwrap();
    let mut d = h.dispatcher();
    assert!(d.tick(&s, T0 + 9).reclaimed.is_empty());
    assert_eq!(d.tick(&s, T0 + 10).reclaimed, vec![id.clone()]);
    assert_eq!(last_outcome(&h, &id), Some(Outcome::Stale));
    assert_eq!(h.store.get(&id).unwrap().consecutive_failures, 1);
}

/// Records starts; a test decides which are still in flight, and how they ended.
#[derive(Clone, Default)]
struct Recorder {
    started: Arc<Mutex<Vec<TaskId>>>,
    in_flight: Arc<Mutex<BTreeSet<TaskId>>>,
    unrecorded: Arc<Mutex<BTreeSet<TaskId>>>,
}

impl Recorder {
    /// Ends every attempt in flight with a charged failure the store could not record.
    fn end_unrecorded(&self) {
        let ended = std::mem::take(&mut *self.in_flight.lock().unwrap());
        self.unrecorded.lock().unwrap().extend(ended);
    }
}

impl Decompositions for Recorder {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        self.in_flight.lock().unwrap().clone()
    }
    fn unrecorded_failures(&mut self) -> BTreeSet<TaskId> {
        std::mem::take(&mut *self.unrecorded.lock().unwrap())
    }
    fn start(&mut self, id: TaskId, _probe: bool, _lease: decompose::CardLease) {
        self.started.lock().unwrap().push(id.clone());
        self.in_flight.lock().unwrap().insert(id);
    }
    fn cancel_all(&mut self) {
        self.in_flight.lock().unwrap().clear();
    }
}

#[test]
fn decompositions_respect_the_per_tick_and_in_flight_limits() {
    let h = home();
    let cards: Vec<TaskId> = (0..5).map(|i| h.triage(&format!("idea {i}"), T0 + i)).collect();
    h.provider_up(&cards[4]);
    let (mut d, recorder) = h.recording_dispatcher();
    let s = DispatchSettings {
        auto_decompose: true,
        auto_decompose_per_tick: 1,
        auto_decompose_concurrency: 2,
        ..settings(&[])
    };
    assert_eq!(d.tick(&s, T0 + 10).decompositions_started, vec![cards[0].clone()]);
    assert_eq!(d.tick(&s, T0 + 10).decompositions_started, vec![cards[1].clone()]);
    assert!(
        d.tick(&s, T0 + 10).decompositions_started.is_empty(),
        "two in flight"
    );
    // A card whose attempt ended without the store recording anything (a full disk)
    // is still backed off by the dispatcher's own memory: not billed again at once.
    recorder.in_flight.lock().unwrap().remove(&cards[0]);
    recorder.unrecorded.lock().unwrap().insert(cards[0].clone());
    assert_eq!(d.tick(&s, T0 + 10).decompositions_started, vec![cards[2].clone()]);
    recorder.in_flight.lock().unwrap().clear();
    let later = d.tick(&s, T0 + 10 + 27);
    assert_eq!(
        later.decompositions_started,
        vec![cards[0].clone()],
        "due again after the backoff"
    );
    let off = DispatchSettings {
        auto_decompose: false,
        ..s.clone()
    };
    recorder.in_flight.lock().unwrap().clear();
    assert!(
        d.tick(&off, T0 + 100_000).decompositions_started.is_empty(),
        "auto_decompose is read every tick"
    );
    let started = recorder.started.lock().unwrap().clone();
    assert_eq!(started.len(), 4);
}

#[test]
fn a_card_whose_failures_cannot_be_recorded_is_parked_in_memory() {
    let h = home();
    let card = h.triage("unlucky", T0);
    let (mut d, recorder) = h.recording_dispatcher();
    let s = DispatchSettings {
        auto_decompose: true,
        ..settings(&[])
    };
    let mut now = T0;
    for _ in 0..3 {
        assert_eq!(d.tick(&s, now).decompositions_started, vec![card.clone()]);
        // Each attempt ends with nothing written: the card stays due in the store.
        recorder.end_unrecorded();
        assert!(
            d.tick(&s, now + 1).decompositions_started.is_empty(),
            "backed off"
        );
        now += 10_000;
    }
    assert!(
        d.tick(&s, now).decompositions_started.is_empty(),
        "parked after the failure limit"
    );
    // An edit (a new revision) is a new card to the policy, as it is to the store.
    h.store
        .edit(&card, Some("luckier".into()), None, None, now)
        .unwrap();
    assert_eq!(d.tick(&s, now).decompositions_started, vec![card]);
}

#[test]
fn attempts_that_fail_uncharged_are_paced_but_never_park_the_card() {
    let h = home();
    let card = h.triage("tried while the provider was in doubt", T0);
    let (mut d, recorder) = h.recording_dispatcher();
    let s = DispatchSettings {
        auto_decompose: true,
        ..settings(&[])
    };
    // Attempts that end without a charge (no provider seen up yet) are no failures of
    // the card: each waits out the backoff, and past the failure limit of them the card
    // is still due, never parked in memory.
    let mut now = T0;
    for n in 0..5 {
        let started = d.tick(&s, now).decompositions_started;
        assert_eq!(started, vec![card.clone()], "attempt {n}");
        recorder.in_flight.lock().unwrap().clear();
        assert!(d.tick(&s, now + 1).decompositions_started.is_empty(), "paced");
        now += 10_000;
    }
}

#[test]
fn a_lease_of_a_gateway_of_this_host_that_is_gone_is_taken_over_at_once() {
    let h = home();
    let cards: Vec<TaskId> = ["left mid-call", "a live gateway's", "another host's"]
        .iter()
        .map(|title| h.triage(title, T0))
        .collect();
    h.provider_up(&cards[0]);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let holders = [
        format!("here/{dead}"),
        "here/1".to_owned(),
        format!("there/{dead}"),
    ];
    for (card, holder) in cards.iter().zip(&holders) {
        h.store.lease_decomposition(card, holder, 600, T0, None).unwrap();
    }
    let (d, recorder) = h.recording_dispatcher();
    let mut d = d.on_host("here");
    let s = DispatchSettings {
        auto_decompose: true,
        ..settings(&[])
    };
    let report = d.tick(&s, T0 + 10);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report.decompositions_started.is_empty(),
        "the lapsed attempt is charged, not retried at once"
    );
    let failures = h.store.get(&cards[0]).unwrap().decompose_failures;
    assert_eq!(failures, 1, "the attempt of the gone gateway is charged");
    let held: Vec<TaskId> = h
        .store
        .triage_leases(10)
        .unwrap()
        .into_iter()
        .map(|l| l.card)
        .collect();
    let mut left = cards[1..].to_vec();
    left.sort();
    assert_eq!(
        held, left,
        "a live gateway's and another host's leases are left alone"
    );
    let later = d.tick(&s, T0 + 10_000);
    assert_eq!(
        later.decompositions_started,
        [cards[0].clone()],
        "retried under the policy"
    );
    assert_eq!(recorder.started.lock().unwrap().len(), 1);
}

#[test]
fn a_running_gateway_reads_the_leases_every_few_seconds_not_every_tick() {
    let h = home();
    let (d, _recorder) = h.recording_dispatcher();
    let mut d = d.on_host("here");
    let s = DispatchSettings {
        auto_decompose: true,
        ..settings(&[])
    };
    // The first tick reads the leases: there are none.
    d.tick(&s, T0 + 10);
    // Then a gateway of this host leases a card and is gone.
    let card = h.triage("left mid-call", T0);
    h.provider_up(&card);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let holder = format!("here/{dead}");
    h.store
        .lease_decomposition(&card, &holder, 600, T0 + 11, None)
        .unwrap();
    let failures = |h: &Home| h.store.get(&card).unwrap().decompose_failures;
    d.tick(&s, T0 + 12);
    assert_eq!(failures(&h), 0, "not read again within a scan's interval");
    d.tick(&s, T0 + 15);
    assert_eq!(
        failures(&h),
        1,
        "read again, the gone gateway's lease is taken over"
    );
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub(crate) fn lives(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_worker_that_ignores_sigterm_never_blocks_a_tick_and_is_killed_after_its_grace() {
    let h = home();
    let s = settings(&[("stubborn", "trap '' TERM; echo ready; exec sleep 30")]);
    let request = NewTask {
        assignee: Some("stubborn".into()),
        max_runtime_seconds: Some(5),
        ..NewTask::titled("stubborn work")
    };
    let id = h.store.create(&request, T0).unwrap().id;
    let mut d = h.dispatcher();
    assert_eq!(d.tick(&s, T0).spawned, vec![id.clone()]);
    let log = h.dir.path().join("logs").join(format!("{id}.log"));
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("ready")
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the worker never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = h.store.get(&id).unwrap().worker_pid().unwrap();
    let start = Instant::now();
    let asked = d.tick(&watch(&s), T0 + 5);
    let took = start.elapsed();
    assert!(took < Duration::from_millis(50), "the tick took {took:?}");
    assert!(asked.timed_out.is_empty() && asked.errors.is_empty(), "{asked:?}");
    let grace = gateway::planner::STOP_GRACE_SECONDS;
    let within = d.tick(&watch(&s), T0 + 5 + grace);
    assert!(within.timed_out.is_empty(), "{within:?}");
    assert!(lives(pid), "it ignores SIGTERM and its grace is not over");
    assert_eq!(
        h.store.get(&id).unwrap().status,
        Status::Running,
        "never released while it lives"
    );
    tick_until(&mut d, &watch(&s), T0 + 6 + grace, |r| {
        r.timed_out == vec![id.clone()]
    });
    assert_eq!(last_outcome(&h, &id), Some(Outcome::TimedOut));
    assert!(!lives(pid), "killed");
    assert_eq!(d.workers().count(), 0);
}
