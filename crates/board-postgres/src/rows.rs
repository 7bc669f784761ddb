//! Rows to the core's types: one column list and one mapping function per table.
//!
//! `board_core::row` declares each table's columns and their order once; this module
//! turns its cells into PostgreSQL parameters and values. The column lists are also
//! macros here, so that every statement is a `&'static str` built with `concat!`,
//! which the per-connection statement cache keys on; a test holds each macro to the
//! core's list, and rows are read by column name.

use std::fmt::Display;
use std::str::FromStr;

use board_core::row::{Cell, Kind, Stored};
use board_core::{Comment, Event, Link, LlmCall, Run, StoreError, StoreResult, Task};
use postgres::types::{FromSql, ToSql};

use crate::tx::Params;
use postgres::Row;

macro_rules! task_columns {
    () => {
        "id, title, body, assignee, status, priority, created_by, created_at, updated_at, \
         started_at, completed_at, result, current_run_id, claim_lock, claim_expires, worker_pid, \
         worker_host, last_heartbeat_at, block_kind, block_recurrences, consecutive_failures, last_failure_error, \
         max_runtime_seconds, idempotency_key, revision, decompose_failures, \
         decompose_next_attempt_at, decompose_parked, decompose_last_error, reviewer, verify_failures, \
         review_rounds, verify, lane, tenant, skills, max_retries, scheduled_until, recurrence"
    };
}

/// `$1..$39`: one parameter per column of `task_columns!()`, in its order.
macro_rules! task_placeholders {
    () => {
        "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
         $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39"
    };
}

macro_rules! run_columns {
    () => {
        "id, task_id, profile, status, outcome, claim_lock, claim_expires, worker_pid, \
         worker_host, last_heartbeat_at, started_at, ended_at, summary, error, metadata, kind, checks, \
         evidence, lane"
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

/// Reads a row of `T`, each of its columns by name.
pub(crate) fn read<T: Stored>(r: &Row) -> StoreResult<T> {
    fn cell<V>(value: Option<V>, into: impl FnOnce(V) -> Cell<'static>) -> Cell<'static> {
        value.map_or(Cell::Null, into)
    }
    let cells = T::COLUMNS
        .iter()
        .map(|&(name, kind)| {
            Ok(match kind {
                Kind::Text => cell(get::<Option<String>>(r, name)?, |t| Cell::Text(t.into())),
                Kind::Int => cell(get(r, name)?, Cell::Int),
                Kind::Real => cell(get(r, name)?, Cell::Real),
                Kind::Bool => cell(get(r, name)?, Cell::Bool),
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    T::from_cells(cells).map_err(|e| StoreError::Backend(e.to_string()))
}

/// Calls `f` with `row`'s values for `T::COLUMNS` as parameters `$1..$n`, in their
/// order, followed by `extra`.
pub(crate) fn with_params<T: Stored, R>(row: &T, extra: Params<'_>, f: impl FnOnce(Params<'_>) -> R) -> R {
    let cells = row.cells();
    let params: Vec<Box<dyn ToSql + Sync + '_>> = cells
        .iter()
        .zip(T::COLUMNS)
        .map(|(cell, &(_, kind))| param(cell, kind))
        .collect();
    let mut values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
    values.extend_from_slice(extra);
    f(&values)
}

/// A cell as a parameter of its column's type (a NULL is typed too).
fn param<'a>(cell: &'a Cell<'a>, kind: Kind) -> Box<dyn ToSql + Sync + 'a> {
    match (cell, kind) {
        (Cell::Text(text), _) => Box::new(text.as_ref()),
        (Cell::Int(n), _) => Box::new(*n),
        (Cell::Real(x), _) => Box::new(*x),
        (Cell::Bool(b), _) => Box::new(*b),
        (Cell::Null, Kind::Text) => Box::new(None::<&str>),
        (Cell::Null, Kind::Int) => Box::new(None::<i64>),
        (Cell::Null, Kind::Real) => Box::new(None::<f64>),
        (Cell::Null, Kind::Bool) => Box::new(None::<bool>),
    }
}

pub(crate) fn task(r: &Row) -> StoreResult<Task> {
    read(r)
}

pub(crate) fn run(r: &Row) -> StoreResult<Run> {
    read(r)
}

pub(crate) fn event(r: &Row) -> StoreResult<Event> {
    read(r)
}

pub(crate) fn comment(r: &Row) -> StoreResult<Comment> {
    read(r)
}

pub(crate) fn link(r: &Row) -> StoreResult<Link> {
    Ok(Link {
        parent_id: word(r, "parent_id")?,
        child_id: word(r, "child_id")?,
    })
}

pub(crate) fn llm_call(r: &Row) -> StoreResult<LlmCall> {
    read(r)
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

#[cfg(test)]
mod tests {
    use board_core::row::Columns;

    use super::*;

    #[test]
    fn the_column_macros_are_the_cores_lists() {
        assert_eq!(task_columns!(), Columns::<Task>::new().to_string());
        assert_eq!(run_columns!(), Columns::<Run>::new().to_string());
        assert_eq!(event_columns!(), Columns::<Event>::new().to_string());
        assert_eq!(comment_columns!(), Columns::<Comment>::new().to_string());
        assert_eq!(llm_call_columns!(), Columns::<LlmCall>::new().to_string());
        let placeholders: Vec<String> = (1..=Task::COLUMNS.len()).map(|i| format!("${i}")).collect();
        assert_eq!(task_placeholders!(), placeholders.join(", "));
        let n = Task::COLUMNS.len();
        let guard = format!(
            "status = ${} AND current_run_id IS NOT DISTINCT FROM ${}\n       AND claim_lock IS NOT DISTINCT FROM ${}",
            n + 1,
            n + 2,
            n + 3
        );
        assert!(
            crate::apply::UPDATE_TASK.contains(&guard),
            "{}",
            crate::apply::UPDATE_TASK
        );
    }
}
