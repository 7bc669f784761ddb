//! Rows to the core's types: one column list and one mapping function per table.
//!
//! The column lists are macros so that every statement is a `&'static str` built with
//! `concat!`, which the per-connection statement cache keys on. Mappings read columns
//! by name, so a list and its mapping cannot drift apart by position.

use std::fmt::Display;
use std::str::FromStr;

use board_core::{Comment, Event, LeaseColumns, Link, LlmCall, Run, StoreError, StoreResult, Task};
use postgres::types::FromSql;
use postgres::Row;

macro_rules! task_columns {
    () => {
        "id, title, body, assignee, status, priority, created_by, created_at, updated_at, \
         started_at, completed_at, result, current_run_id, claim_lock, claim_expires, worker_pid, \
         worker_host, last_heartbeat_at, block_kind, block_recurrences, consecutive_failures, last_failure_error, \
         max_runtime_seconds, idempotency_key, revision, decompose_failures, \
         decompose_next_attempt_at, decompose_parked, decompose_last_error"
    };
}

/// `$1..$29`: one parameter per column of `task_columns!()`, in its order.
macro_rules! task_placeholders {
    () => {
        "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
         $21, $22, $23, $24, $25, $26, $27, $28, $29"
    };
}

macro_rules! run_columns {
    () => {
        "id, task_id, profile, status, outcome, claim_lock, claim_expires, worker_pid, \
         worker_host, last_heartbeat_at, started_at, ended_at, summary, error, metadata"
    };
}

macro_rules! event_columns {
    () => {
        "id, task_id, run_id, kind, payload, created_at"
    };
}

macro_rules! comment_columns {
    () => {
        "id, task_id, author, body, created_at"
    };
}

macro_rules! llm_call_columns {
    () => {
        "task_id, purpose, model, started_at, duration_ms, outcome, http_status, prompt_tokens, \
         completion_tokens, error, cost, over_budget"
    };
}

pub(crate) use {
    comment_columns, event_columns, llm_call_columns, run_columns, task_columns, task_placeholders,
};

pub(crate) fn get<'a, T: FromSql<'a>>(r: &'a Row, column: &str) -> StoreResult<T> {
    r.try_get(column)
        .map_err(|e| StoreError::Backend(format!("reading {column}: {e}")))
}

/// A column holding one of the core's words (status, outcome, block kind) or an id.
pub(crate) fn word<T: FromStr>(r: &Row, column: &str) -> StoreResult<T>
where
    T::Err: Display,
{
    let text: &str = get(r, column)?;
    text.parse()
        .map_err(|e| StoreError::Backend(format!("reading {column}: {e}")))
}

fn optional_word<T: FromStr>(r: &Row, column: &str) -> StoreResult<Option<T>>
where
    T::Err: Display,
{
    match get::<Option<&str>>(r, column)? {
        None => Ok(None),
        Some(_) => word(r, column).map(Some),
    }
}

/// A JSON text column.
fn json(text: &str, column: &str) -> StoreResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Backend(format!("reading {column}: {e}")))
}

pub(crate) fn task(r: &Row) -> StoreResult<Task> {
    Ok(Task {
        id: word(r, "id")?,
        title: get(r, "title")?,
        body: get(r, "body")?,
        assignee: get(r, "assignee")?,
        status: word(r, "status")?,
        priority: get(r, "priority")?,
        created_by: get(r, "created_by")?,
        created_at: get(r, "created_at")?,
        updated_at: get(r, "updated_at")?,
        started_at: get(r, "started_at")?,
        completed_at: get(r, "completed_at")?,
        result: get(r, "result")?,
        lease: LeaseColumns {
            current_run_id: get(r, "current_run_id")?,
            claim_lock: get(r, "claim_lock")?,
            claim_expires: get(r, "claim_expires")?,
            worker_pid: get(r, "worker_pid")?,
            worker_host: get(r, "worker_host")?,
            last_heartbeat_at: get(r, "last_heartbeat_at")?,
        }
        .into_lease()
        .map_err(|e| StoreError::Backend(format!("reading the lease of a task: {e}")))?,
        block_kind: optional_word(r, "block_kind")?,
        block_recurrences: get(r, "block_recurrences")?,
        consecutive_failures: get(r, "consecutive_failures")?,
        last_failure_error: get(r, "last_failure_error")?,
        max_runtime_seconds: get(r, "max_runtime_seconds")?,
        idempotency_key: get(r, "idempotency_key")?,
        revision: get(r, "revision")?,
        decompose_failures: get(r, "decompose_failures")?,
        decompose_next_attempt_at: get(r, "decompose_next_attempt_at")?,
        decompose_parked: get(r, "decompose_parked")?,
        decompose_last_error: get(r, "decompose_last_error")?,
    })
}

pub(crate) fn run(r: &Row) -> StoreResult<Run> {
    Ok(Run {
        id: get(r, "id")?,
        task_id: word(r, "task_id")?,
        profile: get(r, "profile")?,
        status: get(r, "status")?,
        outcome: optional_word(r, "outcome")?,
        claim_lock: get(r, "claim_lock")?,
        claim_expires: get(r, "claim_expires")?,
        worker_pid: get(r, "worker_pid")?,
        worker_host: get(r, "worker_host")?,
        last_heartbeat_at: get(r, "last_heartbeat_at")?,
        started_at: get(r, "started_at")?,
        ended_at: get(r, "ended_at")?,
        summary: get(r, "summary")?,
        error: get(r, "error")?,
        metadata: get::<Option<&str>>(r, "metadata")?
            .map(|m| json(m, "metadata"))
            .transpose()?,
    })
}

pub(crate) fn event(r: &Row) -> StoreResult<Event> {
    Ok(Event {
        id: get(r, "id")?,
        task_id: word(r, "task_id")?,
        run_id: get(r, "run_id")?,
        kind: get(r, "kind")?,
        payload: json(get(r, "payload")?, "payload")?,
        created_at: get(r, "created_at")?,
    })
}

pub(crate) fn comment(r: &Row) -> StoreResult<Comment> {
    Ok(Comment {
        id: get(r, "id")?,
        task_id: word(r, "task_id")?,
        author: get(r, "author")?,
        body: get(r, "body")?,
        created_at: get(r, "created_at")?,
    })
}

pub(crate) fn link(r: &Row) -> StoreResult<Link> {
    Ok(Link {
        parent_id: word(r, "parent_id")?,
        child_id: word(r, "child_id")?,
    })
}

pub(crate) fn llm_call(r: &Row) -> StoreResult<LlmCall> {
    Ok(LlmCall {
        task_id: optional_word(r, "task_id")?,
        purpose: get(r, "purpose")?,
        model: get(r, "model")?,
        started_at: get(r, "started_at")?,
        duration_ms: get(r, "duration_ms")?,
        outcome: get(r, "outcome")?,
        http_status: get(r, "http_status")?,
        prompt_tokens: get(r, "prompt_tokens")?,
        completion_tokens: get(r, "completion_tokens")?,
        error: get(r, "error")?,
        cost: get(r, "cost")?,
        over_budget: get(r, "over_budget")?,
    })
}

/// The single task id column of a row, for queries that select only ids.
/// A `(key, count)` row of a `GROUP BY` into its map.
pub(crate) fn counts(found: &[Row]) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    found
        .iter()
        .map(|r| Ok((get::<String>(r, "key")?, get::<i64>(r, "n")?.max(0) as u64)))
        .collect()
}

/// A token sum, never negative.
pub(crate) fn sum(r: &Row, column: &str) -> StoreResult<u64> {
    Ok(get::<i64>(r, column)?.max(0) as u64)
}

pub(crate) fn task_id(r: &Row) -> StoreResult<board_core::TaskId> {
    word(r, "id")
}
