//! Rows to the core's types and back, as `board_core::row` declares them.
//!
//! The core names each table's columns once, in order. The statements that read and
//! write a table are built from that list, and a row is read and bound in its order;
//! this module only turns the core's cells into SQLite values and back.

use std::sync::LazyLock;

use board_core::row::{Cell, Columns, Stored};
use board_core::LlmOutcome;
use board_core::{Comment, Event, LlmCall, Run, Task};
use rusqlite::types::{FromSql, FromSqlError, ToSql, ToSqlOutput, Type, Value, ValueRef};
use rusqlite::Row;

/// The columns of each table, as `board_core::row` names them.
pub static TASK_COLUMNS: Columns<Task> = Columns::new();
pub static RUN_COLUMNS: Columns<Run> = Columns::new();
pub static EVENT_COLUMNS: Columns<Event> = Columns::new();
pub static COMMENT_COLUMNS: Columns<Comment> = Columns::new();
pub static LLM_CALL_COLUMNS: Columns<LlmCall> = Columns::new();

/// Columns a task gets when it is created and keeps: the update leaves them out, so a
/// transition never rewrites the idempotency index.
const TASK_FIXED_COLUMNS: [&str; 4] = ["id", "created_by", "created_at", "idempotency_key"];

fn names<T: Stored>(_: &Columns<T>) -> impl Iterator<Item = &'static str> {
    T::COLUMNS.iter().map(|(name, _)| *name)
}

/// `INSERT INTO table (columns) VALUES (?1, ..., ?n)` for a column list.
fn insert<T: Stored>(table: &str, columns: &Columns<T>) -> String {
    let values: Vec<String> = (1..=names(columns).count()).map(|i| format!("?{i}")).collect();
    format!("INSERT INTO {table} ({columns}) VALUES ({})", values.join(", "))
}

pub static INSERT_TASK: LazyLock<String> = LazyLock::new(|| insert("tasks", &TASK_COLUMNS));

/// Columns indexes order by that a transition rarely changes: the update sets them only
/// when their value does, since SQLite rewrites an index's entry whenever a column of it
/// is set, to the same value or not (a page of `tasks_by_priority` written to the WAL at
/// every claim and completion for nothing).
pub const TASK_EDITED_COLUMNS: [&str; 2] = ["priority", "tenant"];

/// Writes a task's new row only if its status, run and claim are as read: the values
/// are `task_params`, then the old status, run id and claim lock. Bit `i` of `edited`
/// sets `TASK_EDITED_COLUMNS[i]` too; left out, its parameter is bound and unused.
fn update_task(edited: usize) -> String {
    let columns: Vec<&str> = names(&TASK_COLUMNS).collect();
    let at = |name: &str| columns.iter().position(|c| *c == name).map_or(0, |i| i + 1);
    let kept = |c: &str| match TASK_EDITED_COLUMNS.iter().position(|e| *e == c) {
        Some(bit) => edited & (1 << bit) != 0,
        None => !TASK_FIXED_COLUMNS.contains(&c),
    };
    let set: Vec<String> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| kept(c))
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
}

/// The task updates, by which of `TASK_EDITED_COLUMNS` changed (bit 0 priority, bit 1
/// tenant): see [`task_update`].
pub static UPDATE_TASK: [LazyLock<String>; 4] = [
    LazyLock::new(|| update_task(0)),
    LazyLock::new(|| update_task(1)),
    LazyLock::new(|| update_task(2)),
    LazyLock::new(|| update_task(3)),
];

/// The update that writes `new` over `old`, setting an edited column only if it changed.
pub fn task_update(old: &Task, new: &Task) -> &'static str {
    let edited = usize::from(old.priority != new.priority) | usize::from(old.tenant != new.tenant) << 1;
    &UPDATE_TASK[edited]
}

/// Upserts a run by id; a run never moves to another task.
pub static UPSERT_RUN: LazyLock<String> = LazyLock::new(|| {
    let updated: Vec<String> = names(&RUN_COLUMNS)
        .filter(|c| !["id", "task_id", "profile", "started_at"].contains(c))
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    format!(
        "{} ON CONFLICT (id) DO UPDATE SET {} WHERE task_runs.task_id = excluded.task_id",
        insert("task_runs", &RUN_COLUMNS),
        updated.join(", ")
    )
});

/// A new event: ?1 task, ?2 run, ?3 kind, ?4 payload, ?5 time. Its id is one more than
/// the larger of the table's largest and the floor `archive --rm` leaves (migration 9);
/// with neither (an empty board) it is NULL, and SQLite picks 1.
pub const INSERT_EVENT: &str = "INSERT INTO task_events (id, task_id, run_id, kind, payload, created_at)
    VALUES ((SELECT MAX(newest) + 1 FROM (SELECT MAX(id) AS newest FROM task_events UNION ALL SELECT id FROM event_floor)),
            ?1, ?2, ?3, ?4, ?5)";

pub static INSERT_LLM_CALL: LazyLock<String> = LazyLock::new(|| insert("llm_calls", &LLM_CALL_COLUMNS));

/// Finishes a request's row: the values are `with_params`' of the call, then the id.
pub static FINISH_LLM_CALL: LazyLock<String> = LazyLock::new(|| {
    let set: Vec<String> = names(&LLM_CALL_COLUMNS)
        .enumerate()
        .map(|(i, c)| format!("{c} = ?{}", i + 1))
        .collect();
    format!(
        "UPDATE llm_calls SET {} WHERE id = ?{} AND outcome = '{}'",
        set.join(", "),
        set.len() + 1,
        LlmOutcome::Sent
    )
});

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

/// A cell as a SQLite parameter.
struct Param<'a>(&'a Cell<'a>);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Cell::Null => ToSqlOutput::Owned(Value::Null),
            Cell::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Cell::Int(n) => ToSqlOutput::Owned(Value::Integer(*n)),
            Cell::Real(x) => ToSqlOutput::Owned(Value::Real(*x)),
            Cell::Bool(b) => ToSqlOutput::Owned(Value::Integer(i64::from(*b))),
        })
    }
}

/// Reads a row of `T`'s columns, in `T::COLUMNS` order.
pub fn read<T: Stored>(r: &Row<'_>) -> rusqlite::Result<T> {
    let failure = |at: usize, e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(at, Type::Text, e)
    };
    let mut cells = Vec::with_capacity(T::COLUMNS.len());
    for at in 0..T::COLUMNS.len() {
        cells.push(match r.get_ref(at)? {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(n) => Cell::Int(n),
            ValueRef::Real(x) => Cell::Real(x),
            // Borrowed from the row: a word or JSON is read from it without a copy.
            ValueRef::Text(bytes) => Cell::Text(
                std::str::from_utf8(bytes)
                    .map_err(|e| failure(at, Box::new(e)))?
                    .into(),
            ),
            ValueRef::Blob(_) => {
                return Err(failure(at, "a blob where the board keeps text or numbers".into()))
            }
        });
    }
    T::from_cells(cells).map_err(|e| {
        let at = T::COLUMNS.iter().position(|(c, _)| *c == e.column).unwrap_or(0);
        failure(at, Box::new(e))
    })
}

/// Calls `f` with `row`'s values for `T::COLUMNS`, in its order, then `extra`.
pub fn with_params<T: Stored, R>(row: &T, extra: &[&dyn ToSql], f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
    let cells = row.cells();
    let params: Vec<Param<'_>> = cells.iter().map(Param).collect();
    let mut values: Vec<&dyn ToSql> = params.iter().map(|p| p as &dyn ToSql).collect();
    values.extend_from_slice(extra);
    f(&values)
}

pub fn task_from_row(r: &Row<'_>) -> rusqlite::Result<Task> {
    read(r)
}

pub fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    read(r)
}

pub fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    read(r)
}

pub fn comment_from_row(r: &Row<'_>) -> rusqlite::Result<Comment> {
    read(r)
}

pub fn llm_call_from_row(r: &Row<'_>) -> rusqlite::Result<LlmCall> {
    read(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_follow_the_column_lists() {
        assert!(INSERT_TASK.ends_with("?38, ?39)"), "{}", *INSERT_TASK);
        let update = &*UPDATE_TASK[3];
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
            .ends_with("WHERE id = ?1 AND status = ?40 AND current_run_id IS ?41 AND claim_lock IS ?42"));
        for (edited, sets) in [(0, [false, false]), (1, [true, false]), (2, [false, true])] {
            let (set, _) = UPDATE_TASK[edited].split_once(" WHERE ").expect("a guard");
            assert!(set.contains("title = ?2"), "{set}");
            for (column, wanted) in TASK_EDITED_COLUMNS.iter().zip(sets) {
                assert_eq!(set.contains(&format!("{column} = ?")), wanted, "{edited}: {set}");
            }
        }
        assert!(UPSERT_RUN.contains("metadata = excluded.metadata"));
        assert!(!UPSERT_RUN.contains("started_at = excluded"), "{}", *UPSERT_RUN);
        assert!(INSERT_LLM_CALL.ends_with("?12)"));
        assert!(FINISH_LLM_CALL.contains("over_budget = ?12 WHERE id = ?13 AND outcome = 'sent'"));
    }
}
