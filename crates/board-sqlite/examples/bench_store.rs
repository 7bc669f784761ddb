//! Workloads for `cargo xtask bench` on the SQLite store. Each subcommand does one
//! measurement and prints one JSON line of figures on stdout; xtask repeats, aggregates
//! and compares. Errors go to stderr with a non-zero exit.
//!
//! - `raw --dir D --sync full|normal --max N --seconds T`: one-row `BEGIN IMMEDIATE`
//!   insert transactions with rusqlite on a fresh file with the store's settings, the
//!   physical ceiling of a write transaction on this disk.
//! - `cycle --dir D --sync full|normal --max N --seconds T`: claim then complete of
//!   ready tasks through the `Store` trait, one process.
//! - `contend --dir D --procs P --per N --seconds T`: P copies of this binary claim and
//!   complete from one board file at once.
//! - `populate --db F --ready N [--assignee A]`: adds N ready tasks.
//! - `inspect --db F [--subtasks ID]`: reads the board read-only: running tasks, their
//!   worker pids, and how many tasks a decomposition of ID created (in link terms the
//!   card's parents: the card waits for them).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use board_core::{BoardReads, BoardWrites, DispatchQueue, NewTask, Status, TaskFilter, TaskId};
use board_sqlite::{Options, SqliteStore, Synchronous};
use serde_json::{json, Value};
use store_bench::{budget, now, number, run_cycles, text, Contender, Flags, Workload};

fn main() {
    let workloads: &[(&str, Workload)] = &[
        ("raw", raw),
        ("cycle", cycle),
        ("contend", contend),
        ("contend-worker", contend_worker),
        ("populate", populate),
        ("inspect", inspect),
    ];
    store_bench::main("bench_store", workloads)
}

fn options(f: &Flags) -> Result<Options, String> {
    Ok(Options {
        synchronous: text(f, "sync")?
            .parse::<board_sqlite::Synchronous>()
            .map_err(|e| e.to_string())?,
        ..Options::default()
    })
}

fn open(path: &Path, options: &Options) -> Result<SqliteStore, String> {
    SqliteStore::open(path, options).map_err(|e| e.to_string())
}

/// A fresh directory for one measurement; an old one from an earlier run is replaced.
fn fresh_dir(f: &Flags) -> Result<PathBuf, String> {
    let dir = PathBuf::from(text(f, "dir")?);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Creates `n` ready tasks with NORMAL durability: setting up is not what is measured,
/// and FULL would make a large board take minutes on a slow disk.
fn create_ready(db: &Path, n: usize, assignee: Option<&str>) -> Result<Vec<TaskId>, String> {
    let store = open(
        db,
        &Options {
            synchronous: Synchronous::Normal,
            ..Options::default()
        },
    )?;
    let now = now();
    (0..n)
        .map(|i| {
            let mut task = NewTask::titled(format!("bench task {i}"));
            task.assignee = assignee.map(str::to_owned);
            store.create(&task, now).map(|t| t.id).map_err(|e| e.to_string())
        })
        .collect()
}

fn raw(f: &Flags) -> Result<Value, String> {
    let dir = fresh_dir(f)?;
    let options = options(f)?;
    let max: usize = number(f, "max")?;
    let budget = budget(f)?;
    let sql_err = |e: rusqlite::Error| e.to_string();
    let mut conn = rusqlite::Connection::open(dir.join("raw.db")).map_err(sql_err)?;
    // The store's own settings (docs/storage.md), so the ceiling is for the same configuration.
    board_sqlite::configure(&conn, &options).map_err(|e| e.to_string())?;
    conn.execute_batch("CREATE TABLE raw (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
        .map_err(sql_err)?;
    let started = Instant::now();
    let mut done = 0;
    while done < max && started.elapsed() < budget {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql_err)?;
        tx.prepare_cached("INSERT INTO raw (payload) VALUES (?1)")
            .and_then(|mut s| s.execute(["a row of about the size of an event payload"]))
            .map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
        done += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({"tx": done, "seconds": seconds, "tx_per_sec": done as f64 / seconds}))
}

fn cycle(f: &Flags) -> Result<Value, String> {
    let dir = fresh_dir(f)?;
    let db = dir.join("kanban.db");
    let ids = create_ready(&db, number(f, "max")?, None)?;
    let store = open(&db, &options(f)?)?;
    let budget = budget(f)?;
    let started = Instant::now();
    let c = run_cycles(&store, &ids, budget, started);
    Ok(c.figures(started.elapsed().as_secs_f64()))
}

fn contend(f: &Flags) -> Result<Value, String> {
    let dir = fresh_dir(f)?;
    let db = dir.join("kanban.db");
    let procs: usize = number(f, "procs")?;
    let per: usize = number(f, "per")?;
    let seconds = text(f, "seconds")?;
    let ids = create_ready(&db, procs * per, None)?;
    let mut copies = Vec::new();
    for index in 0..procs {
        // Disjoint ids: the figure is the cost of sharing the file's write lock, not of
        // lost races, so it compares with the single-process one.
        let mine: Vec<&str> = ids
            .iter()
            .skip(index)
            .step_by(procs)
            .map(TaskId::as_str)
            .collect();
        let list = dir.join(format!("ids-{index}.txt"));
        std::fs::write(&list, mine.join("\n")).map_err(|e| format!("{}: {e}", list.display()))?;
        let args: Vec<OsString> = vec![
            "contend-worker".into(),
            "--db".into(),
            db.clone().into(),
            "--ids".into(),
            list.into(),
            "--seconds".into(),
            seconds.into(),
        ];
        copies.push(args);
    }
    Ok(store_bench::contend(copies)?.figures())
}

fn contend_worker(f: &Flags) -> Result<Value, String> {
    let db = PathBuf::from(text(f, "db")?);
    let list = text(f, "ids")?;
    let ids: Vec<TaskId> = std::fs::read_to_string(list)
        .map_err(|e| format!("{list}: {e}"))?
        .lines()
        .map(|l| l.parse::<TaskId>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let store = open(
        &db,
        &Options {
            synchronous: Synchronous::Normal,
            ..Options::default()
        },
    )?;
    let budget = budget(f)?;
    let contender = Contender::start(f)?;
    let c = run_cycles(&store, &ids, budget, Instant::now());
    Ok(contender.report(&c))
}

fn populate(f: &Flags) -> Result<Value, String> {
    let db = PathBuf::from(text(f, "db")?);
    let n: usize = number(f, "ready")?;
    let ids = create_ready(&db, n, f.get("assignee").map(String::as_str))?;
    Ok(json!({"created": ids.len()}))
}

fn inspect(f: &Flags) -> Result<Value, String> {
    let store = SqliteStore::open_read_only(text(f, "db")?).map_err(|e| e.to_string())?;
    let running = store.running().map_err(|e| e.to_string())?;
    let pids: Vec<i64> = running
        .iter()
        .filter_map(|t| t.lease.as_ref()?.worker_pid)
        .collect();
    let subtasks = match f.get("subtasks") {
        Some(id) => {
            let id: TaskId = id
                .parse()
                .map_err(|e: board_core::types::BadTaskId| e.to_string())?;
            store.parents(&id).map_err(|e| e.to_string())?.len()
        }
        None => 0,
    };
    let ready = store
        .list(&TaskFilter {
            status: Some(Status::Ready),
            ..TaskFilter::default()
        })
        .map_err(|e| e.to_string())?
        .len();
    Ok(json!({"running": running.len(), "worker_pids": pids, "ready": ready, "subtasks": subtasks}))
}
