//! The dispatcher tick workload for `cargo xtask bench`. Each subcommand prints one JSON
//! line of figures on stdout; errors go to stderr with a non-zero exit.
//!
//! - `build --db F --tasks N --ready R --triage C`: a board of N tasks through the
//!   `Store` API: R ready, C triage cards cooling down after a recorded decomposition
//!   failure, the rest (if any) done. Built once and copied for each run.
//! - `version`: the schema version a built board has, so a stale one is rebuilt.
//! - `tick --home H --ticks K`: the dispatcher on `H/kanban.db` (or the board of
//!   `KANBAN_DATABASE_URL`) with `max_spawn: 0` and auto-decompose on; one warm-up tick,
//!   then K timed ticks.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use board_core::{Completion, NewTask, RetryPolicy, Store, TaskId, Timestamp};
use board_home::Home;
use board_sqlite::{Options, SqliteStore, Synchronous};
use gateway::dispatcher::{Decompositions, DispatchSettings, Dispatcher};
use serde_json::{json, Value};
use store_bench::{number, text, Flags, Workload};

/// Decompositions that never start anything, so the tick's own cost is what is timed.
struct Idle;

impl Decompositions for Idle {
    fn in_flight(&mut self) -> BTreeSet<TaskId> {
        BTreeSet::new()
    }
    fn start(&mut self, _id: TaskId, _probe: bool, _lease_expires: Timestamp) {}
    fn cancel_all(&mut self) {}
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
    let home = Home::at(&home).map_err(|e| e.to_string())?;
    // The board as `kanban-gateway` would open it: `H/kanban.db` with the default
    // durability (FULL), or the PostgreSQL board of `KANBAN_DATABASE_URL`.
    let loaded = home.load_config().map_err(|e| e.to_string())?;
    let store: Arc<dyn Store> = home.open_store(&loaded.config).map_err(|e| e.to_string())?;
    let mut dispatcher = Dispatcher::new(store, home, Box::new(Idle));
    let settings = DispatchSettings {
        max_spawn: 0,
        auto_decompose: true,
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
        if !report.decompositions_started.is_empty() || !report.spawned.is_empty() {
            unexpected.push(format!(
                "the tick started {} decompositions and {} workers; the board is not the one built",
                report.decompositions_started.len(),
                report.spawned.len()
            ));
        }
    }
    if !unexpected.is_empty() {
        return Err(unexpected.join("; "));
    }
    Ok(json!({"ticks_ms": latencies}))
}
