//! The board builder of `cargo xtask bench --scale`: a large board written with direct
//! SQL in one transaction (the Store API would take hours at a million tasks). Prints
//! one JSON line of figures on stdout; errors go to stderr with a non-zero exit.
//!
//! `build --db F --tasks N --events-per-task E --ready R --archived A`: the schema as
//! `SqliteStore::open` makes it, then N tasks: R ready, A archived (with a run each), the
//! rest done, each done or archived task with one ended run and E events (`created`,
//! `claimed`, heartbeats, `completed`, and `archived` for the archived). Everything but
//! the ready tasks was finished 60 days ago, so a `gc` with ages of 30 days has work.

use std::time::Instant;

use board_sqlite::{Options, SqliteStore, Synchronous};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use store_bench::{number, text, Flags, Workload};

const DAY: i64 = 86_400;

fn main() {
    let workloads: &[(&str, Workload)] = &[("build", build)];
    store_bench::main("bench_scale", workloads)
}

/// The task id of the n-th task: `t_` and 12 hex digits, unique by construction.
fn task_id(n: usize) -> String {
    format!("t_{n:012x}")
}

fn build(f: &Flags) -> Result<Value, String> {
    let db = text(f, "db")?;
    let total = number::<usize>(f, "tasks")?;
    let per_task = number::<usize>(f, "events-per-task")?.max(3);
    let ready = number::<usize>(f, "ready")?.min(total);
    let archived = number::<usize>(f, "archived")?.min(total - ready);
    let started = Instant::now();
    let options = Options {
        synchronous: Synchronous::Normal,
        ..Options::default()
    };
    drop(SqliteStore::open(db, &options).map_err(|e| e.to_string())?);
    let mut conn = Connection::open(db).map_err(|e| e.to_string())?;
    conn.pragma_update(None, "synchronous", "OFF")
        .map_err(|e| e.to_string())?;
    let now = store_bench::now();
    let events = fill(&mut conn, total, per_task, ready, archived, now).map_err(|e| e.to_string())?;
    conn.execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")
        .map_err(|e| e.to_string())?;
    Ok(json!({
        "tasks": total, "ready": ready, "archived": archived, "events": events,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}

/// Inserts every row in one transaction; returns the number of events.
fn fill(
    conn: &mut Connection,
    total: usize,
    per_task: usize,
    ready: usize,
    archived: usize,
    now: i64,
) -> rusqlite::Result<u64> {
    let tx = conn.transaction()?;
    let old = now - 60 * DAY;
    let mut events = 0u64;
    {
        let mut task = tx.prepare(
            "INSERT INTO tasks (id, title, body, assignee, status, priority, created_at, updated_at,
                                started_at, completed_at, result, revision)
             VALUES (?1, ?2, '', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1)",
        )?;
        let mut run = tx.prepare(
            "INSERT INTO task_runs (task_id, status, outcome, started_at, ended_at, summary)
             VALUES (?1, 'ended', 'completed', ?2, ?3, 'done')",
        )?;
        let mut event = tx.prepare(
            "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) VALUES (?1, ?2, ?3, '{}', ?4)",
        )?;
        for n in 0..total {
            let id = task_id(n);
            let title = format!("scale task {n}");
            let assignee = ["coder", "writer", "reviewer"][n % 3];
            let priority = (n % 5) as i64;
            if n < ready {
                task.execute(params![
                    id,
                    title,
                    assignee,
                    "ready",
                    priority,
                    now - 3600,
                    now - 3600,
                    None::<i64>,
                    None::<i64>,
                    None::<String>
                ])?;
                event.execute(params![id, None::<i64>, "created", now - 3600])?;
                events += 1;
                continue;
            }
            let is_archived = n < ready + archived;
            let status = if is_archived { "archived" } else { "done" };
            let at = old + (n % 1000) as i64;
            task.execute(params![
                id,
                title,
                assignee,
                status,
                priority,
                at,
                at + 60,
                at,
                at + 50,
                "done"
            ])?;
            run.execute(params![id, at, at + 50])?;
            let run_id = tx.last_insert_rowid();
            event.execute(params![id, None::<i64>, "created", at])?;
            event.execute(params![id, run_id, "claimed", at])?;
            let closing = if is_archived { 2 } else { 1 };
            for beat in 0..per_task.saturating_sub(2 + closing) {
                event.execute(params![id, run_id, "heartbeat", at + 1 + beat as i64])?;
            }
            event.execute(params![id, run_id, "completed", at + 50])?;
            if is_archived {
                event.execute(params![id, None::<i64>, "archived", at + 60])?;
            }
            events += per_task.max(2 + closing) as u64;
        }
    }
    tx.commit()?;
    Ok(events)
}
