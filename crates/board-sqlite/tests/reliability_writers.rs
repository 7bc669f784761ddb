//! Reliability: eight processes write one board file at once, mixing creates, claims,
//! heartbeats, completions, blocks, unblocks and reclaims, for 5 s (30 s under
//! `cargo xtask soak`, which sets `KANBAN_SOAK_WRITERS_SECS`). No caller ever sees
//! `database is locked`, the invariants hold, every task's events replay as a path the
//! status machine allows and end where the task is, and the writers keep a minimum pace.
//!
//! The writers are this test binary re-run with `--ignored --exact writer_process`.

mod rerun;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{
    BlockKind, BoardReads, BoardSnapshot, BoardStats, BoardWrites, Completion, DispatchQueue, Event, NewTask,
    NoWorkers, Outcome, Run, RunId, Status, StoreError, Task, TaskFilter,
};
use board_sqlite::{Options, SqliteStore};
use rerun::Rerun;

const WRITERS: usize = 8;
const DB_VAR: &str = "KANBAN_WRITER_DB";
const SECS_VAR: &str = "KANBAN_SOAK_WRITERS_SECS";
/// The fewest operations per second the eight writers together must make. On a 2-core
/// machine busy with other builds they made 350 to 2,500 a second; a store several times
/// slower than the worst of that fails, a busy machine does not.
const MIN_OPS_PER_SEC: f64 = 100.0;

/// xorshift64*: enough randomness for choosing operations, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[derive(Default)]
struct Tally {
    ops: HashMap<&'static str, usize>,
    refused: usize,
    locked: Vec<String>,
    other: Vec<String>,
}

impl Tally {
    fn record<T>(&mut self, op: &'static str, result: Result<T, StoreError>) -> Option<T> {
        *self.ops.entry(op).or_default() += 1;
        match result {
            Ok(v) => Some(v),
            Err(StoreError::Refused(_)) => {
                self.refused += 1;
                None
            }
            Err(StoreError::Backend(message)) => {
                let lower = message.to_ascii_lowercase();
                if lower.contains("locked") || lower.contains("busy") {
                    self.locked.push(format!("{op}: {message}"));
                } else {
                    self.other.push(format!("{op}: {message}"));
                }
                None
            }
        }
    }
}

#[test]
#[ignore = "a writer process, started by eight_processes_write_one_board"]
fn writer_process() {
    let Ok(db) = std::env::var(DB_VAR) else {
        panic!("run only as a writer: {DB_VAR} is not set");
    };
    let seconds: f64 = std::env::var(SECS_VAR).unwrap().parse().unwrap();
    let mut rng = Rng(u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t = Tally::default();
    let store = match SqliteStore::open(&db, &Options::default()) {
        Ok(store) => store,
        Err(e) => {
            println!("OPENFAIL {e}");
            return;
        }
    };
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    // Runs this writer claimed and has not finalised: (task, run).
    let mut mine = Vec::new();
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        let started = Instant::now();
        match rng.below(10) {
            0 | 1 => {
                let mut request = NewTask::titled(format!("w{} {}", std::process::id(), rng.next()));
                // Sometimes under an existing task, so links and promotion race too.
                if rng.below(3) == 0 {
                    let filter = TaskFilter {
                        limit: Some(50),
                        ..TaskFilter::default()
                    };
                    if let Some(list) = t.record("list", store.list(&filter)) {
                        if !list.is_empty() {
                            request.parents = vec![list[rng.below(list.len())].id.clone()];
                        }
                    }
                }
                t.record("create", store.create(&request, now()));
            }
            2 | 3 => {
                if let Some(ready) = t.record("claimable", store.claimable(16)) {
                    if !ready.is_empty() {
                        let task = &ready[rng.below(ready.len())];
                        if let Some(claim) = t.record("claim", store.claim(&task.id, 900, now())) {
                            mine.push((claim.task.id, claim.run_id));
                        }
                    }
                }
            }
            4 if !mine.is_empty() => {
                let (task, run) = &mine[rng.below(mine.len())];
                t.record("heartbeat", store.heartbeat(task, *run, 900, None, now()));
            }
            5 | 6 if !mine.is_empty() => {
                let (task, run) = mine.swap_remove(rng.below(mine.len()));
                let c = Completion {
                    expected_run_id: Some(run),
                    result: Some("ok".into()),
                    ..Completion::default()
                };
                t.record("complete", store.complete(&task, &c, now()));
            }
            7 if !mine.is_empty() => {
                let (task, run) = mine.swap_remove(rng.below(mine.len()));
                let kind = [None, Some(BlockKind::Capability), Some(BlockKind::Transient)][rng.below(3)];
                t.record(
                    "block",
                    store.block(&task, kind, Some("stuck".into()), Some(run), now()),
                );
            }
            8 => {
                // Reclaim anybody's running task: races the owner's completion.
                if let Some(running) = t.record("running", store.running()) {
                    if !running.is_empty() {
                        let task = &running[rng.below(running.len())];
                        t.record(
                            "reclaim",
                            store.reclaim(&task.id, task.current_run_id(), None, &NoWorkers, now()),
                        );
                    }
                }
            }
            _ => {
                let filter = TaskFilter {
                    status: Some(Status::Blocked),
                    ..TaskFilter::default()
                };
                if let Some(blocked) = t.record("list", store.list(&filter)) {
                    if let Some(task) = blocked.first() {
                        t.record("unblock", store.unblock(&task.id, None, now()));
                    }
                }
                t.record("promote", store.promote_ready(now()));
            }
        }
        slowest = slowest.max(started.elapsed());
    }
    let total: usize = t.ops.values().sum();
    for l in &t.locked {
        println!("LOCKED {l}");
    }
    for o in &t.other {
        println!("OTHER {o}");
    }
    println!(
        "STATS ops={total} slowest_ms={} refused={} locked={} other={} {:?}",
        slowest.as_millis(),
        t.refused,
        t.locked.len(),
        t.other.len(),
        t.ops
    );
}

fn writer(db: &std::path::Path, seconds: f64, n: usize) -> Rerun {
    let env = [
        (DB_VAR, db.display().to_string()),
        (SECS_VAR, seconds.to_string()),
    ];
    Rerun::start(format!("writer {n}"), "writer_process", &env)
}

#[test]
fn eight_processes_write_one_board() {
    let seconds: f64 = std::env::var(SECS_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    for i in 0..20 {
        store
            .create(&NewTask::titled(format!("seed {i}")), now())
            .unwrap();
    }
    let mut writers: Vec<_> = (0..WRITERS).map(|n| writer(&db, seconds, n)).collect();
    let (mut ops, mut locked, mut other) = (0, Vec::new(), Vec::new());
    for w in &mut writers {
        // A writer's last operation may wait out the busy timeout (30 s) before it stops.
        w.finish(Duration::from_secs_f64(seconds) + Duration::from_secs(60));
        let stdout = w.seen.join("\n");
        let stats = stdout
            .lines()
            .find_map(|l| {
                l.find("STATS ")
                    .or_else(|| l.find("OPENFAIL "))
                    .map(|at| &l[at..])
            })
            .unwrap_or_else(|| panic!("a writer printed no stats:\n{stdout}"));
        eprintln!("{stats}");
        assert!(!stats.starts_with("OPENFAIL"), "{stats}");
        let n: usize = stats
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ops="))
            .unwrap()
            .parse()
            .unwrap();
        ops += n;
        locked.extend(
            stdout
                .lines()
                .filter(|l| l.contains("LOCKED "))
                .map(str::to_owned),
        );
        other.extend(stdout.lines().filter(|l| l.contains("OTHER ")).map(str::to_owned));
    }
    assert!(
        locked.is_empty(),
        "`database is locked` reached a caller:\n{}",
        locked.join("\n")
    );
    assert!(other.is_empty(), "storage errors:\n{}", other.join("\n"));
    let snapshot = store.snapshot().unwrap();
    board_core::check_invariants(&snapshot).unwrap();
    check_status_paths(&snapshot).unwrap();
    let runs = snapshot.runs.len();
    let rate = ops as f64 / seconds;
    eprintln!(
        "{WRITERS} writers x {seconds} s: {ops} operations ({rate:.0}/s), {} tasks, {runs} runs, {} events",
        snapshot.tasks.len(),
        snapshot.events.len()
    );
    let floor = (MIN_OPS_PER_SEC * seconds) as usize;
    assert!(
        ops >= floor,
        "the writers made {ops} operations in {seconds} s, fewer than {floor} ({MIN_OPS_PER_SEC}/s)"
    );
    let ended = |outcome| {
        snapshot
            .runs
            .iter()
            .filter(|r| r.outcome == Some(outcome))
            .count()
    };
    for outcome in [Outcome::Completed, Outcome::Blocked, Outcome::Reclaimed] {
        assert!(ended(outcome) > 0, "no run ended {outcome}");
    }
}

/// Where replaying a task's events has put it: a status, or `todo` or `ready` when the
/// event does not say which (a reclaim returns a task to whichever its parents allow).
#[derive(Clone, Copy, Debug, PartialEq)]
enum At {
    Is(Status),
    Workable,
}

impl At {
    fn admits(self, allowed: &[Status]) -> bool {
        match self {
            At::Is(status) => allowed.contains(&status),
            At::Workable => allowed.iter().any(|s| matches!(s, Status::Todo | Status::Ready)),
        }
    }
}

/// One task's replay: where it is and which of its runs is open.
struct Replay<'a> {
    at: At,
    open: Option<RunId>,
    runs: &'a HashMap<RunId, &'a Run>,
}

impl Replay<'_> {
    fn require(&self, allowed: &[Status]) -> Result<(), String> {
        if self.at.admits(allowed) {
            Ok(())
        } else {
            Err(format!("from {:?}, which allows only {allowed:?}", self.at))
        }
    }

    /// The event must name the open run; that run must have ended with `outcome`.
    fn close(&mut self, e: &Event, outcome: Outcome) -> Result<(), String> {
        self.current(e)?;
        let run = self.runs.get(&e.run_id.unwrap()).ok_or("names a missing run")?;
        if run.outcome != Some(outcome) {
            return Err(format!("closes a run that ended {:?}", run.outcome));
        }
        self.open = None;
        Ok(())
    }

    fn current(&self, e: &Event) -> Result<(), String> {
        if self.open.is_none() || e.run_id != self.open {
            return Err(format!("names run {:?} while {:?} is open", e.run_id, self.open));
        }
        Ok(())
    }

    fn step(&mut self, e: &Event) -> Result<(), String> {
        let running = self.at == At::Is(Status::Running);
        self.at = match e.kind.as_str() {
            "linked" => self.at,
            "claimed" => {
                self.require(&[Status::Ready])?;
                if self.open.is_some() {
                    return Err(format!("while run {:?} is open", self.open));
                }
                self.open = Some(e.run_id.ok_or("names no run")?);
                At::Is(Status::Running)
            }
            "heartbeat" => {
                self.require(&[Status::Running])?;
                self.current(e)?;
                self.at
            }
            "completed" => {
                self.require(&[Status::Running, Status::Ready, Status::Blocked])?;
                if running {
                    self.close(e, Outcome::Completed)?;
                }
                At::Is(Status::Done)
            }
            kind @ ("blocked" | "block_loop_detected") => {
                self.require(&[Status::Running, Status::Ready])?;
                if running {
                    self.close(e, Outcome::Blocked)?;
                }
                At::Is(if kind == "blocked" {
                    Status::Blocked
                } else {
                    Status::Triage
                })
            }
            "reclaimed" => {
                self.require(&[Status::Running])?;
                self.close(e, Outcome::Reclaimed)?;
                At::Workable
            }
            "unblocked" => {
                self.require(&[Status::Blocked])?;
                At::Is(serde_json::from_value(e.payload["to"].clone()).map_err(|x| x.to_string())?)
            }
            "promoted" => {
                self.require(&[Status::Todo])?;
                At::Is(Status::Ready)
            }
            other => return Err(format!("{other:?} is not an event these writers cause")),
        };
        Ok(())
    }
}

/// Every task's events, oldest first, form a path the status machine allows (each event
/// from a status that permits it, run events naming the open run, closed runs with the
/// matching outcome) and end at the task's status and current run.
fn check_status_paths(board: &BoardSnapshot) -> Result<(), String> {
    let runs: HashMap<RunId, &Run> = board.runs.iter().map(|r| (r.id, r)).collect();
    let mut events_of: HashMap<&board_core::TaskId, Vec<&Event>> = HashMap::new();
    for e in &board.events {
        events_of.entry(&e.task_id).or_default().push(e);
    }
    for task in &board.tasks {
        let events = events_of.remove(&task.id).unwrap_or_default();
        replay(task, &events, &runs).map_err(|why| format!("{}: {why}", task.id))?;
    }
    match events_of.keys().next() {
        Some(orphan) => Err(format!("events of {orphan}, which does not exist")),
        None => Ok(()),
    }
}

fn replay(task: &Task, events: &[&Event], runs: &HashMap<RunId, &Run>) -> Result<(), String> {
    let Some((first, rest)) = events.split_first() else {
        return Err("no events".to_owned());
    };
    if first.kind != "created" {
        return Err(format!("first event {} is {}", first.id, first.kind));
    }
    let created = serde_json::from_value(first.payload["status"].clone()).map_err(|e| e.to_string())?;
    let mut replay = Replay {
        at: At::Is(created),
        open: None,
        runs,
    };
    for e in rest {
        replay
            .step(e)
            .map_err(|why| format!("event {} ({}) {why}", e.id, e.kind))?;
    }
    if !replay.at.admits(&[task.status]) {
        return Err(format!(
            "events end at {:?}, the task is {}",
            replay.at, task.status
        ));
    }
    if replay.open != task.current_run_id() {
        return Err(format!(
            "events leave run {:?} open, the task's is {:?}",
            replay.open,
            task.current_run_id()
        ));
    }
    Ok(())
}

/// A small board every kind of writer event appears on, built through the store.
fn replayable_board() -> (tempfile::TempDir, BoardSnapshot) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("kanban.db"), &Options::default()).unwrap();
    let parent = store.create(&NewTask::titled("parent"), 1).unwrap();
    let mut request = NewTask::titled("child");
    request.parents = vec![parent.id.clone()];
    let child = store.create(&request, 1).unwrap();
    let run = store.claim(&parent.id, 900, 2).unwrap().run_id;
    store.heartbeat(&parent.id, run, 900, None, 3).unwrap();
    let done = Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    assert!(store.complete(&parent.id, &done, 4).unwrap());
    let run = store.claim(&child.id, 900, 5).unwrap().run_id;
    store
        .block(&child.id, Some(BlockKind::Transient), None, Some(run), 6)
        .unwrap();
    store.unblock(&child.id, None, 7).unwrap();
    let run = store.claim(&child.id, 900, 8).unwrap().run_id;
    store.reclaim(&child.id, Some(run), None, &NoWorkers, 9).unwrap();
    store.claim(&child.id, 900, 10).unwrap();
    let snapshot = store.snapshot().unwrap();
    (dir, snapshot)
}

#[test]
fn the_status_path_check_refuses_impossible_histories() {
    let (_dir, good) = replayable_board();
    check_status_paths(&good).unwrap();
    let position = |kind: &str| good.events.iter().position(|e| e.kind == kind).unwrap();
    let child = good.tasks.iter().position(|t| t.title == "child").unwrap();
    // Each impossible history, and what the refusal must name.
    let mut bad: Vec<(&str, &str, BoardSnapshot)> = Vec::new();
    let mut b = good.clone();
    b.events.remove(position("claimed"));
    bad.push(("a run without its claim", "(heartbeat) from", b));
    let mut b = good.clone();
    b.events.swap(position("heartbeat"), position("completed"));
    bad.push(("a heartbeat after the completion", "(heartbeat) from Is(Done)", b));
    let mut b = good.clone();
    b.events.swap(position("blocked"), position("unblocked"));
    bad.push(("an unblock before the block", "(unblocked) from", b));
    let mut b = good.clone();
    b.tasks[child].status = Status::Done;
    bad.push(("a status no event explains", "the task is done", b));
    let mut b = good.clone();
    b.tasks[child].lease = None;
    bad.push((
        "a current run the events do not leave open",
        "the task's is None",
        b,
    ));
    let mut b = good.clone();
    b.runs[0].outcome = Some(Outcome::Reclaimed);
    bad.push((
        "a completion of a run that ended reclaimed",
        "ended Some(Reclaimed)",
        b,
    ));
    let mut b = good.clone();
    let at = position("reclaimed");
    b.events[at].run_id = Some(b.events[at].run_id.unwrap() + 100);
    bad.push(("a reclaim of a run that is not open", "(reclaimed) names run", b));
    let mut b = good.clone();
    let child_id = b.tasks[child].id.clone();
    b.events.retain(|e| e.kind != "created" || e.task_id != child_id);
    bad.push(("a task that was never created", "first event", b));
    for (what, names, board) in bad {
        match check_status_paths(&board) {
            Ok(()) => panic!("accepted {what}"),
            Err(why) => assert!(why.contains(names), "{what}: refused for another reason: {why}"),
        }
    }
}
