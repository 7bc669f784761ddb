//! Copying a whole board from one backend to another (`kanban migrate`): every table's
//! rows with their ids, streamed from the source's one consistent read into one
//! transaction of the target, in batches.
//!
//! The tables and their columns are the same on every backend (docs/storage.md); a row
//! travels as a list of [`Datum`]s in the order of the source's column names, and the
//! target binds each by the type of its own column of that name.

use crate::store::StoreResult;

/// Every table of a board, parents before the rows that refer to them.
pub const TABLES: &[&str] = &[
    "tasks",
    "task_links",
    "task_runs",
    "task_events",
    "task_comments",
    "task_attachments",
    "notify_subscriptions",
    "llm_calls",
    "decomposition_leases",
    "provider_breaker",
    "lanes",
];

/// The one table every board holds a row of from the start (the provider breaker's,
/// which a copy overwrites): a board is empty when every other table is.
pub const ALWAYS_ONE_ROW: &str = "provider_breaker";

/// How many rows a target inserts at once.
pub const BATCH: usize = 500;

/// How many rows of `table` travel in one batch: [`BATCH`], but one file at a time for
/// the table that holds files' bytes, so a copy never holds more than one.
pub fn batch_rows(table: &str) -> usize {
    match table {
        "task_attachments" => 1,
        _ => BATCH,
    }
}

/// One value of a row. Booleans travel as 0 and 1, as SQLite keeps them.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    /// A file's bytes.
    Bytes(Vec<u8>),
}

/// A batch of rows of one table, each in the order of `columns`.
pub struct Batch<'a> {
    pub table: &'static str,
    pub columns: &'a [String],
    pub rows: &'a [Vec<Datum>],
}

/// A board a copy reads from or writes to.
pub trait BoardCopy {
    /// The rows of every table of [`TABLES`], counted in one consistent view.
    fn row_counts(&self) -> StoreResult<Vec<(&'static str, i64)>>;
    /// Reads every table of [`TABLES`] in order, in one consistent view, each in the
    /// order its rows were inserted, and hands the rows over in batches of at most
    /// [`BATCH`]; never holds a whole table.
    fn export(&self, each: &mut dyn FnMut(Batch<'_>) -> StoreResult<()>) -> StoreResult<()>;
    /// Opens the one transaction a copy writes in.
    fn importer(&self) -> StoreResult<Box<dyn Importer + '_>>;
}

/// The open transaction of a copy's target.
pub trait Importer {
    /// Inserts a batch, ids kept; the provider breaker's row replaces the target's.
    fn insert(&mut self, batch: Batch<'_>) -> StoreResult<()>;
    /// Commits everything inserted (moving the target's id sequences past the copied
    /// ids); dropped uncommitted, nothing is written.
    fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// Whether counts read by [`BoardCopy::row_counts`] are those of an empty board.
pub fn is_empty(counts: &[(&'static str, i64)]) -> bool {
    counts
        .iter()
        .all(|(table, rows)| *rows == 0 || *table == ALWAYS_ONE_ROW)
}

/// Whether a target's counts after a copy match the source's: equal table by table,
/// except that a target which holds the provider breaker's default row from the start
/// (PostgreSQL) keeps it when the source never wrote one.
pub fn counts_match(copied: &[(&'static str, i64)], there: &[(&'static str, i64)]) -> bool {
    copied.len() == there.len()
        && copied.iter().zip(there).all(|((table, from), (other, to))| {
            table == other && (from == to || (*table == ALWAYS_ONE_ROW && *from == 0 && *to == 1))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_table_by_table_and_allow_only_the_breakers_default_row() {
        let source = [("tasks", 3), (ALWAYS_ONE_ROW, 0)];
        assert!(counts_match(&source, &[("tasks", 3), (ALWAYS_ONE_ROW, 0)]));
        assert!(counts_match(&source, &[("tasks", 3), (ALWAYS_ONE_ROW, 1)]));
        assert!(!counts_match(&source, &[("tasks", 2), (ALWAYS_ONE_ROW, 1)]));
        assert!(!counts_match(&[("tasks", 0)], &[("tasks", 1)]));
        assert!(!counts_match(&[(ALWAYS_ONE_ROW, 1)], &[(ALWAYS_ONE_ROW, 2)]));
        assert!(!counts_match(&source, &source[..1]));
        assert!(is_empty(&[("tasks", 0), (ALWAYS_ONE_ROW, 1)]));
        assert!(!is_empty(&[("tasks", 1), (ALWAYS_ONE_ROW, 0)]));
    }
}
