//! The dispatcher tick workload for `cargo xtask bench`. Each subcommand prints one JSON
//! line of figures on stdout; errors go to stderr with a non-zero exit.
//!
//! - `build --db F --tasks N --ready R --triage C`: a board of N tasks through the
//!   `Store` API: R ready, C triage cards cooling down after a recorded decomposition
//!   failure, the rest (if any) done. Built once and copied for each run.
//! - `version`: the schema version a built board has, so a stale one is rebuilt.
//! - `tick --home H --ticks K [--spawn N]`: the dispatcher on `H/kanban.db` (or the
//!   board of `KANBAN_DATABASE_URL`) with auto-decompose on; one warm-up tick, then K
//!   timed ticks. With `--spawn 0` (the default) no work is due, so a tick reads and
//!   plans and does nothing: the idle tick. With `--spawn N` every timed tick reaps the N
//!   workers the last one started (they completed their runs between the ticks, as
//!   workers do), claims N ready tasks and starts their workers in a process table that
//!   does not fork, so the tick's own work is timed and not process creation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use board_core::{BoardWrites, Retention, TriageQueue};
use board_core::{Completion, NewTask, RetryPolicy, RunId, Store, Task, TaskId};
use board_home::Home;
use board_sqlite::{Options, SqliteStore, Synchronous};
use gateway::dispatcher::{Decompositions, Dispatcher};
use gateway::planner::{DispatchSettings, Exit, Observed};
use gateway::supervisor::{Assignment, Processes, Signal};
use serde_json::{json, Value};
use store_bench::{number, text, Flags, Workload};

/// Decompositions that never start anything, so the tick's own cost is what is timed.
struct Idle;

impl Decompositions for Idle {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        BTreeSet::new()
    }
    fn start(&mut self, _id: TaskId, _probe: bool, _lease: decompose::CardLease) {}
    fn cancel_all(&mut self) {}
}

/// A process table that does not fork: a started worker is held at once under a made-up
/// pid, lives until the bench completes its run, and has then exited with 0.
#[derive(Clone, Default)]
struct NoFork {
    /// Started workers whose runs the bench has not completed yet.
    started: Arc<Mutex<Vec<(TaskId, RunId)>>>,
    /// Held workers, and whether each has exited.
    held: Arc<Mutex<BTreeMap<TaskId, bool>>>,
}

impl NoFork {
    /// Completes the run of every worker started since the last call, as a worker that
    /// ran `kanban complete` would, and lets its process exit.
    fn finish_started(&self, store: &dyn Store, now: i64) -> Result<usize, String> {
        let started: Vec<(TaskId, RunId)> = std::mem::take(&mut *self.started.lock().unwrap());
        for (task, run) in &started {
            let completion = Completion {
                expected_run_id: Some(*run),
                result: Some("done".to_owned()),
                ..Completion::default()
            };
            store
                .complete(task, &completion, now)
                .map_err(|e| e.to_string())?;
            self.held.lock().unwrap().insert(task.clone(), true);
        }
        Ok(started.len())
    }
}

impl Processes for NoFork {
    fn spawn(&mut self, a: &Assignment<'_>) -> std::io::Result<u32> {
        self.started.lock().unwrap().push((a.task.id.clone(), a.run_id));
        self.held.lock().unwrap().insert(a.task.id.clone(), false);
        Ok(4_000_000)
    }
    fn proven(&self, _task: &Task) -> bool {
        false
    }
    fn adopt(&mut self, _task: &Task) -> Option<u32> {
        None
    }
    fn probe(&self, task: &TaskId) -> Option<Observed> {
        let exited = *self.held.lock().unwrap().get(task)?;
        Some(match exited {
            false => Observed::Alive,
            true => Observed::Exited {
                exit: Exit::Code(0),
                log_tail: String::new(),
            },
        })
    }
    fn signal(&mut self, _task: &TaskId, _signal: Signal) {}
    fn release(&mut self, task: &TaskId) {
        self.held.lock().unwrap().remove(task);
    }
}

fn main() {
    let workloads: &[(&str, Workload)] = &[("build", build), ("tick", tick), ("version", version)];
    store_bench::main("bench_tick", workloads)
}

fn version(_: &Flags) -> Result<Value, String> {
    Ok(json!({"schema_version": board_sqlite::SCHEMA_VERSION}))
}

fn path(f: &Flags, name: &str) -> Result<PathBuf, String> {
    text(f, name).map(PathBuf::from)
}

fn build(f: &Flags) -> Result<Value, String> {
    let db = path(f, "db")?;
    let total = number::<usize>(f, "tasks")?;
    let ready = number(f, "ready")?;
    let triage = number(f, "triage")?;
    // The 1k board is all ready and triage cards: every board keeps the same work for
    // the tick, so the sizes differ only in the done tasks it must not look at.
    let done = total.saturating_sub(ready + triage);
    let started = Instant::now();
    let store = SqliteStore::open(
        &db,
        &Options {
            synchronous: Synchronous::Normal,
            ..Options::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let now = board_home::now();
    let err = |e: board_core::StoreError| e.to_string();
    for i in 0..done {
        let task = store
            .create(&NewTask::titled(format!("finished work {i}")), now)
            .map_err(err)?;
        let claim = store.claim(&task.id, 900, now).map_err(err)?;
        let completion = Completion {
            expected_run_id: Some(claim.run_id),
            result: Some("done".to_owned()),
            ..Completion::default()
        };
        store.complete(&task.id, &completion, now).map_err(err)?;
    }
    for i in 0..ready {
        store
            .create(&NewTask::titled(format!("waiting work {i}")), now)
            .map_err(err)?;
    }
    // Cooling for a century: the board is reused across runs and days, and a card that
    // fell due would make the tick time decompositions rather than itself. The backoff
    // is capped at an hour, so the failure is recorded as of a century from now.
    let policy = RetryPolicy {
        base_seconds: 1_000_000_000,
        failure_limit: 3,
    };
    let century = now + 100 * 365 * 86_400;
    for i in 0..triage {
        let mut card = NewTask::titled(format!("rough idea {i}"));
        card.triage = true;
        let card = store.create(&card, now).map_err(err)?;
        store
            .record_decompose_failure(&card.id, "bench: simulated failure", policy, 0.0, century)
            .map_err(err)?;
    }
    // One file: the benchmarks copy `kanban.db` alone, so nothing may stay in the WAL.
    store.compact().map_err(err)?;
    Ok(
        json!({"tasks": done + ready + triage, "done": done, "ready": ready, "triage": triage,
              "seconds": started.elapsed().as_secs_f64()}),
    )
}

fn tick(f: &Flags) -> Result<Value, String> {
    let home = path(f, "home")?;
    let ticks = number(f, "ticks")?;
    let spawn: usize = if f.contains_key("spawn") {
        number(f, "spawn")?
    } else {
        0
    };
    let home = Home::at(&home).map_err(|e| e.to_string())?;
    // The board as `kanban-gateway` would open it: `H/kanban.db` with the default
    // durability (FULL), or the PostgreSQL board of `KANBAN_DATABASE_URL`.
    let loaded = home.load_config().map_err(|e| e.to_string())?;
    let store: Arc<dyn Store> = home.open_store(&loaded.config).map_err(|e| e.to_string())?;
    let processes = NoFork::default();
    let mut dispatcher = if spawn == 0 {
        Dispatcher::new(store.clone(), home, Box::new(Idle))
    } else {
        Dispatcher::with_processes(store.clone(), Box::new(processes.clone()), Box::new(Idle))
    };
    // The built board's ready tasks have no assignee, so they go to the default one.
    let settings = DispatchSettings {
        max_spawn: spawn,
        auto_decompose: true,
        default_assignee: "bench".to_owned(),
        commands: BTreeMap::from([("bench".to_owned(), Some(vec!["true".to_owned()]))]),
        ..DispatchSettings::default()
    };
    let mut unexpected = Vec::new();
    let mut latencies = Vec::with_capacity(ticks);
    for i in 0..=ticks {
        let now = board_home::now();
        let started = Instant::now();
        let report = dispatcher.tick(&settings, now);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if i > 0 {
            latencies.push(ms);
        }
        unexpected.extend(report.errors);
        if !report.decompositions_started.is_empty() || report.spawned.len() != spawn {
            unexpected.push(format!(
                "tick {i} started {} decompositions and {} workers, not 0 and {spawn}; the board is not the one built",
                report.decompositions_started.len(),
                report.spawned.len()
            ));
        }
        processes.finish_started(store.as_ref(), now)?;
    }
    if !unexpected.is_empty() {
        return Err(unexpected.join("; "));
    }
    Ok(json!({"ticks_ms": latencies, "spawned_per_tick": spawn}))
}
