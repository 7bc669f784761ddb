//! Rows to the core's types and back: one column list and one mapping per table.
//!
//! Each list names its columns once. The statements that read and write a table are
//! built from its list, and its mappings read and bind the columns in the list's order
//! without numbering them, so adding a column is one entry in the list and one field in
//! each mapping.

use std::sync::LazyLock;

use board_core::{Comment, Event, LeaseColumns, LlmCall, Run, Task, TaskId};
use rusqlite::types::{FromSql, FromSqlError, ToSql, Type, ValueRef};
use rusqlite::Row;

/// The columns of `tasks`, in the order of `Task`'s fields (the lease as its six).
pub const TASK_COLUMNS: &str = "id, title, body, assignee, status, priority, created_by, created_at, \
    updated_at, started_at, completed_at, result, current_run_id, claim_lock, claim_expires, \
    worker_pid, worker_host, last_heartbeat_at, block_kind, block_recurrences, consecutive_failures, \
    last_failure_error, max_runtime_seconds, idempotency_key, revision, decompose_failures, \
    decompose_next_attempt_at, decompose_parked, decompose_last_error";

/// Columns a task gets when it is created and keeps: the update leaves them out, so a
/// transition never rewrites the idempotency index.
const TASK_FIXED_COLUMNS: [&str; 4] = ["id", "created_by", "created_at", "idempotency_key"];

pub const RUN_COLUMNS: &str = "id, task_id, profile, status, outcome, claim_lock, claim_expires, \
    worker_pid, worker_host, last_heartbeat_at, started_at, ended_at, summary, error, metadata";

pub const EVENT_COLUMNS: &str = "id, task_id, run_id, kind, payload, created_at";

pub const COMMENT_COLUMNS: &str = "id, task_id, author, body, created_at";

pub const LLM_CALL_COLUMNS: &str = "task_id, purpose, model, started_at, duration_ms, outcome, \
    http_status, prompt_tokens, completion_tokens, error, cost, over_budget";

fn names(columns: &'static str) -> impl Iterator<Item = &'static str> {
    columns.split(',').map(str::trim)
}

/// `INSERT INTO table (columns) VALUES (?1, ..., ?n)` for a column list.
fn insert(table: &str, columns: &'static str) -> String {
    let values: Vec<String> = (1..=names(columns).count()).map(|i| format!("?{i}")).collect();
    format!("INSERT INTO {table} ({columns}) VALUES ({})", values.join(", "))
}

pub static INSERT_TASK: LazyLock<String> = LazyLock::new(|| insert("tasks", TASK_COLUMNS));

/// Writes a task's new row only if its status, run and claim are as read: the values
/// are `task_params`, then the old status, run id and claim lock.
pub static UPDATE_TASK: LazyLock<String> = LazyLock::new(|| {
    let columns: Vec<&str> = names(TASK_COLUMNS).collect();
    let at = |name: &str| columns.iter().position(|c| *c == name).map_or(0, |i| i + 1);
    let set: Vec<String> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !TASK_FIXED_COLUMNS.contains(c))
        .map(|(i, c)| format!("{c} = ?{}", i + 1))
        .collect();
    let n = columns.len();
    format!(
        "UPDATE tasks SET {} WHERE id = ?{} AND status = ?{} AND current_run_id IS ?{} AND claim_lock IS ?{}",
        set.join(", "),
        at("id"),
        n + 1,
        n + 2,
        n + 3
    )
});

/// Upserts a run by id; a run never moves to another task.
pub static UPSERT_RUN: LazyLock<String> = LazyLock::new(|| {
    let updated: Vec<String> = names(RUN_COLUMNS)
        .filter(|c| !["id", "task_id", "profile", "started_at"].contains(c))
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    format!(
        "{} ON CONFLICT (id) DO UPDATE SET {} WHERE task_runs.task_id = excluded.task_id",
        insert("task_runs", RUN_COLUMNS),
        updated.join(", ")
    )
});

pub static INSERT_LLM_CALL: LazyLock<String> = LazyLock::new(|| insert("llm_calls", LLM_CALL_COLUMNS));

/// A column holding one of the core's words (status, outcome, block kind) or an id.
pub struct Word<T>(pub T);

impl<T: std::str::FromStr> FromSql for Word<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    fn column_result(value: ValueRef<'_>) -> Result<Self, FromSqlError> {
        let text = value.as_str()?;
        text.parse()
            .map(Word)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

/// A JSON text column.
struct Json(serde_json::Value);

impl FromSql for Json {
    fn column_result(value: ValueRef<'_>) -> Result<Self, FromSqlError> {
        serde_json::from_str(value.as_str()?)
            .map(Json)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

/// Reads a row's columns one after another, in the order of its column list.
struct Cells<'a, 'r> {
    row: &'a Row<'r>,
    next: usize,
}

impl<'a, 'r> Cells<'a, 'r> {
    fn of(row: &'a Row<'r>) -> Self {
        Cells { row, next: 0 }
    }

    fn next<T: FromSql>(&mut self) -> rusqlite::Result<T> {
        self.next += 1;
        self.row.get(self.next - 1)
    }

    fn word<T: std::str::FromStr>(&mut self) -> rusqlite::Result<T>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        Ok(self.next::<Word<T>>()?.0)
    }

    fn optional_word<T: std::str::FromStr>(&mut self) -> rusqlite::Result<Option<T>>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        Ok(self.next::<Option<Word<T>>>()?.map(|w| w.0))
    }

    /// The six lease columns, as one lease or none.
    fn lease(&mut self) -> rusqlite::Result<Option<board_core::Lease>> {
        let at = self.next;
        let columns = LeaseColumns {
            current_run_id: self.next()?,
            claim_lock: self.next()?,
            claim_expires: self.next()?,
            worker_pid: self.next()?,
            worker_host: self.next()?,
            last_heartbeat_at: self.next()?,
        };
        columns
            .into_lease()
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(at, Type::Integer, Box::new(e)))
    }
}

pub fn task_from_row(r: &Row<'_>) -> rusqlite::Result<Task> {
    let mut c = Cells::of(r);
    Ok(Task {
        id: c.word()?,
        title: c.next()?,
        body: c.next()?,
        assignee: c.next()?,
        status: c.word()?,
        priority: c.next()?,
        created_by: c.next()?,
        created_at: c.next()?,
        updated_at: c.next()?,
        started_at: c.next()?,
        completed_at: c.next()?,
        result: c.next()?,
        lease: c.lease()?,
        block_kind: c.optional_word()?,
        block_recurrences: c.next()?,
        consecutive_failures: c.next()?,
        last_failure_error: c.next()?,
        max_runtime_seconds: c.next()?,
        idempotency_key: c.next()?,
        revision: c.next()?,
        decompose_failures: c.next()?,
        decompose_next_attempt_at: c.next()?,
        decompose_parked: c.next()?,
        decompose_last_error: c.next()?,
    })
}

/// Calls `f` with a task's values for `TASK_COLUMNS`, in its order, then `extra`.
pub fn with_task_params<T>(t: &Task, extra: &[&dyn ToSql], f: impl FnOnce(&[&dyn ToSql]) -> T) -> T {
    let (id, status, block_kind) = (t.id.as_str(), t.status.as_str(), t.block_kind.map(|k| k.as_str()));
    let lease = LeaseColumns::of(t.lease.as_ref());
    let mut params: Vec<&dyn ToSql> = vec![
        &id,
        &t.title,
        &t.body,
        &t.assignee,
        &status,
        &t.priority,
        &t.created_by,
        &t.created_at,
        &t.updated_at,
        &t.started_at,
        &t.completed_at,
        &t.result,
        &lease.current_run_id,
        &lease.claim_lock,
        &lease.claim_expires,
        &lease.worker_pid,
        &lease.worker_host,
        &lease.last_heartbeat_at,
        &block_kind,
        &t.block_recurrences,
        &t.consecutive_failures,
        &t.last_failure_error,
        &t.max_runtime_seconds,
        &t.idempotency_key,
        &t.revision,
        &t.decompose_failures,
        &t.decompose_next_attempt_at,
        &t.decompose_parked,
        &t.decompose_last_error,
    ];
    params.extend_from_slice(extra);
    f(&params)
}

pub fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    let mut c = Cells::of(r);
    Ok(Run {
        id: c.next()?,
        task_id: c.word()?,
        profile: c.next()?,
        status: c.next()?,
        outcome: c.optional_word()?,
        claim_lock: c.next()?,
        claim_expires: c.next()?,
        worker_pid: c.next()?,
        worker_host: c.next()?,
        last_heartbeat_at: c.next()?,
        started_at: c.next()?,
        ended_at: c.next()?,
        summary: c.next()?,
        error: c.next()?,
        metadata: c.next::<Option<Json>>()?.map(|j| j.0),
    })
}

/// Calls `f` with a run's values for `RUN_COLUMNS`, in its order.
pub fn with_run_params<T>(r: &Run, f: impl FnOnce(&[&dyn ToSql]) -> T) -> T {
    let (task_id, outcome) = (r.task_id.as_str(), r.outcome.map(|o| o.as_str()));
    let metadata = r.metadata.as_ref().map(|m| m.to_string());
    f(&[
        &r.id,
        &task_id,
        &r.profile,
        &r.status,
        &outcome,
        &r.claim_lock,
        &r.claim_expires,
        &r.worker_pid,
        &r.worker_host,
        &r.last_heartbeat_at,
        &r.started_at,
        &r.ended_at,
        &r.summary,
        &r.error,
        &metadata,
    ])
}

pub fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    let mut c = Cells::of(r);
    Ok(Event {
        id: c.next()?,
        task_id: c.word()?,
        run_id: c.next()?,
        kind: c.next()?,
        payload: c.next::<Json>()?.0,
        created_at: c.next()?,
    })
}

pub fn comment_from_row(r: &Row<'_>) -> rusqlite::Result<Comment> {
    let mut c = Cells::of(r);
    Ok(Comment {
        id: c.next()?,
        task_id: c.word()?,
        author: c.next()?,
        body: c.next()?,
        created_at: c.next()?,
    })
}

pub fn llm_call_from_row(r: &Row<'_>) -> rusqlite::Result<LlmCall> {
    let mut c = Cells::of(r);
    Ok(LlmCall {
        task_id: c.optional_word::<TaskId>()?,
        purpose: c.next()?,
        model: c.next()?,
        started_at: c.next()?,
        duration_ms: c.next()?,
        outcome: c.next()?,
        http_status: c.next()?,
        prompt_tokens: c.next()?,
        completion_tokens: c.next()?,
        error: c.next()?,
        cost: c.next()?,
        over_budget: c.next()?,
    })
}

/// Calls `f` with a call's values for `LLM_CALL_COLUMNS`, in its order.
pub fn with_llm_call_params<T>(c: &LlmCall, f: impl FnOnce(&[&dyn ToSql]) -> T) -> T {
    let task_id = c.task_id.as_ref().map(TaskId::as_str);
    f(&[
        &task_id,
        &c.purpose,
        &c.model,
        &c.started_at,
        &c.duration_ms,
        &c.outcome,
        &c.http_status,
        &c.prompt_tokens,
        &c.completion_tokens,
        &c.error,
        &c.cost,
        &c.over_budget,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_follow_the_column_lists() {
        assert!(INSERT_TASK.ends_with("?28, ?29)"), "{}", *INSERT_TASK);
        let update = &*UPDATE_TASK;
        for set in [
            "title = ?2",
            "current_run_id = ?13",
            "worker_host = ?17",
            "decompose_last_error = ?29",
        ] {
            assert!(update.contains(set), "{set}: {update}");
        }
        let (set, _) = update.split_once(" WHERE ").expect("a guard");
        for fixed in TASK_FIXED_COLUMNS {
            assert!(!set.contains(&format!(" {fixed} = ")), "{fixed}: {set}");
        }
        assert!(update
            .ends_with("WHERE id = ?1 AND status = ?30 AND current_run_id IS ?31 AND claim_lock IS ?32"));
        assert!(UPSERT_RUN.contains("metadata = excluded.metadata"));
        assert!(!UPSERT_RUN.contains("started_at = excluded"), "{}", *UPSERT_RUN);
        assert!(INSERT_LLM_CALL.ends_with("?12)"));
    }
}
