//! Reading task rows: one by id, many by a query, skipping a row the board could never have
//! written.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Mutex;

use board_core::store::{StoreResult, Visit};
use board_core::{StoreError, Task, TaskId};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

use super::{backend, no_such};
use crate::rows::{task_from_row, TASK_COLUMNS};
use crate::SqliteStore;

pub(super) fn get_task(conn: &Connection, id: &TaskId) -> StoreResult<Task> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([id.as_str()], task_from_row).optional())
        .map_err(|e| match is_undecodable(&e) {
            true => StoreError::Backend(format!(
                "task {id} cannot be read ({e}); the row was written by hand?"
            )),
            false => backend(e),
        })?
        .ok_or_else(|| no_such(id))
}

/// Whether a row failed for what it holds (a value the board could never have written)
/// rather than for the database.
fn is_undecodable(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    )
}

/// Says once per process, naming the row's id as stored, that a task row cannot be read
/// and is skipped: one bad row must not stop the board.
fn skip_unreadable(row: &Row<'_>, e: &rusqlite::Error) {
    let id = match row.get_ref(0) {
        Ok(ValueRef::Text(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Ok(other) => format!("{other:?}"),
        Err(_) => String::new(),
    };
    report_unreadable(id, e);
}

/// The report of [`skip_unreadable`], for the row whose id (as stored) is `id`.
pub(super) fn report_unreadable(id: String, e: &dyn std::fmt::Display) {
    static REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut reported = REPORTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if reported.insert(id.clone()) {
        tracing::warn!("task row {id:?} cannot be read ({e}); skipped until it is fixed or deleted");
    }
}

/// Every row that decodes, the others reported and skipped.
pub(super) fn decoded<T>(
    rows: rusqlite::Rows<'_>,
    decode: impl Fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::new();
    each_decoded(rows, decode, &mut |value| {
        out.push(value);
        ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// Hands every row that decodes to `visit` as SQLite yields it, until `visit` breaks;
/// the others are reported and skipped.
pub(super) fn each_decoded<T>(
    mut rows: rusqlite::Rows<'_>,
    decode: impl Fn(&Row<'_>) -> rusqlite::Result<T>,
    visit: &mut dyn FnMut(T) -> Visit,
) -> StoreResult<()> {
    while let Some(row) = rows.next().map_err(backend)? {
        match decode(row) {
            Ok(value) => {
                if visit(value).is_break() {
                    break;
                }
            }
            Err(e) if is_undecodable(&e) => skip_unreadable(row, &e),
            Err(e) => return Err(backend(e)),
        }
    }
    Ok(())
}

pub(super) fn query_tasks(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> StoreResult<Vec<Task>> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let tasks = decoded(stmt.query(params).map_err(backend)?, task_from_row);
    tasks
}

impl SqliteStore {
    /// Refuses an id no task has.
    pub(super) fn require_task(conn: &Connection, id: &TaskId) -> StoreResult<()> {
        let exists: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1)")
            .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)))
            .map_err(backend)?;
        if exists {
            Ok(())
        } else {
            Err(no_such(id))
        }
    }
}
