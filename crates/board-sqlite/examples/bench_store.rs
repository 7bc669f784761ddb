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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{Completion, NewTask, Status, Store, StoreError, TaskFilter, TaskId};
use board_sqlite::{Options, SqliteStore, Synchronous};
use serde_json::{json, Value};

type Flags = HashMap<String, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((command, rest)) => flags(rest).and_then(|f| match command.as_str() {
            "raw" => raw(&f),
            "cycle" => cycle(&f),
            "contend" => contend(&f),
            "contend-worker" => contend_worker(&f),
            "populate" => populate(&f),
            "inspect" => inspect(&f),
            other => Err(format!("unknown subcommand {other:?}")),
        }),
        None => Err("usage: bench_store raw|cycle|contend|populate|inspect --flag value ...".to_owned()),
    };
    match result {
        Ok(figures) => println!("{figures}"),
        Err(message) => {
            eprintln!("bench_store: {message}");
            std::process::exit(1);
        }
    }
}

fn flags(args: &[String]) -> Result<Flags, String> {
    let mut out = Flags::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let name = key
            .strip_prefix("--")
            .ok_or_else(|| format!("expected a --flag, got {key:?}"))?;
        let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
        out.insert(name.to_owned(), value.clone());
    }
    Ok(out)
}

fn text<'a>(f: &'a Flags, name: &str) -> Result<&'a str, String> {
    f.get(name)
        .map(String::as_str)
        .ok_or_else(|| format!("missing --{name}"))
}

fn number<T: std::str::FromStr>(f: &Flags, name: &str) -> Result<T, String> {
    text(f, name)?
        .parse()
        .map_err(|_| format!("--{name}: not a number"))
}

fn options(f: &Flags) -> Result<Options, String> {
    Ok(Options {
        synchronous: text(f, "sync")?.parse()?,
        ..Options::default()
    })
}

fn open(path: &Path, options: &Options) -> Result<SqliteStore, String> {
    SqliteStore::open(path, options).map_err(|e| e.to_string())
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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
    let budget = Duration::from_secs_f64(number(f, "seconds")?);
    let sql_err = |e: rusqlite::Error| e.to_string();
    let mut conn = rusqlite::Connection::open(dir.join("raw.db")).map_err(sql_err)?;
    // The store's own settings (SPEC 4.1), so the ceiling is for the same configuration.
    board_sqlite::configure(&conn, &options)?;
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

/// What one claim -> complete loop achieved.
#[derive(Default)]
struct Cycles {
    done: u64,
    errors: u64,
    lost: u64,
    samples: Vec<String>,
}

impl Cycles {
    fn failed(&mut self, what: &str, e: StoreError) {
        if e.refusal().is_some_and(|r| r.is_lost_race()) {
            self.lost += 1;
        } else {
            self.errors += 1;
            if self.samples.len() < 5 {
                self.samples.push(format!("{what}: {e}"));
            }
        }
    }
}

fn run_cycles(store: &SqliteStore, ids: &[TaskId], budget: Duration, started: Instant) -> Cycles {
    let mut out = Cycles::default();
    for id in ids {
        if started.elapsed() >= budget {
            break;
        }
        let now = now();
        let claim = match store.claim(id, 900, now) {
            Ok(c) => c,
            Err(e) => {
                out.failed("claim", e);
                continue;
            }
        };
        let completion = Completion {
            expected_run_id: Some(claim.run_id),
            result: Some("done".to_owned()),
            ..Completion::default()
        };
        match store.complete(id, &completion, now) {
            Ok(true) => out.done += 1,
            Ok(false) => out.lost += 1,
            Err(e) => out.failed("complete", e),
        }
    }
    out
}

fn cycle(f: &Flags) -> Result<Value, String> {
    let dir = fresh_dir(f)?;
    let db = dir.join("kanban.db");
    let ids = create_ready(&db, number(f, "max")?, None)?;
    let store = open(&db, &options(f)?)?;
    let budget = Duration::from_secs_f64(number(f, "seconds")?);
    let started = Instant::now();
    let c = run_cycles(&store, &ids, budget, started);
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "cycles": c.done, "seconds": seconds, "cycles_per_sec": c.done as f64 / seconds,
        "errors": c.errors, "lost": c.lost, "error_samples": c.samples,
    }))
}

fn contend(f: &Flags) -> Result<Value, String> {
    let dir = fresh_dir(f)?;
    let db = dir.join("kanban.db");
    let procs: usize = number(f, "procs")?;
    let per: usize = number(f, "per")?;
    let seconds: f64 = number(f, "seconds")?;
    let ids = create_ready(&db, procs * per, None)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    // A common start time, so the copies contend from their first cycle rather than
    // the first one running alone while the others start up.
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_nanos()
        + 300_000_000;
    let mut children = Vec::new();
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
        let child = Command::new(&exe)
            .arg("contend-worker")
            .arg("--db")
            .arg(&db)
            .arg("--ids")
            .arg(&list)
            .args([
                "--start-at",
                &start_at.to_string(),
                "--seconds",
                &seconds.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a contender: {e}"))?;
        children.push(child);
    }
    let mut reports = Vec::new();
    for child in children {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let line = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!("a contender failed ({})", out.status));
        }
        let report: Value =
            serde_json::from_str(line.trim()).map_err(|e| format!("a contender printed {line:?}: {e}"))?;
        reports.push(report);
    }
    let sum = |key: &str| reports.iter().map(|r| r[key].as_u64().unwrap_or(0)).sum::<u64>();
    let first = reports
        .iter()
        .filter_map(|r| r["started_ns"].as_u64())
        .min()
        .unwrap_or(0);
    let last = reports
        .iter()
        .filter_map(|r| r["ended_ns"].as_u64())
        .max()
        .unwrap_or(0);
    let wall = (last.saturating_sub(first)) as f64 / 1e9;
    let cycles = sum("cycles");
    let samples: Vec<Value> = reports
        .iter()
        .flat_map(|r| r["error_samples"].as_array().cloned().unwrap_or_default())
        .collect();
    Ok(json!({
        "procs": procs, "cycles": cycles, "seconds": wall,
        "cycles_per_sec": if wall > 0.0 { cycles as f64 / wall } else { 0.0 },
        "errors": sum("errors"), "lost": sum("lost"), "error_samples": samples,
    }))
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
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
    let start_at: u128 = number(f, "start-at")?;
    let wait = start_at.saturating_sub(unix_ns());
    std::thread::sleep(Duration::from_nanos(wait as u64));
    let budget = Duration::from_secs_f64(number(f, "seconds")?);
    let started_ns = unix_ns();
    let c = run_cycles(&store, &ids, budget, Instant::now());
    Ok(json!({
        "cycles": c.done, "errors": c.errors, "lost": c.lost, "error_samples": c.samples,
        "started_ns": started_ns as u64, "ended_ns": unix_ns() as u64,
    }))
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
