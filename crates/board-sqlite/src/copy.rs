//! `BoardCopy` for SQLite (`kanban migrate`): the export reads in one read transaction,
//! the import writes in one `BEGIN IMMEDIATE` transaction.

use std::sync::MutexGuard;

use board_core::copy::{batch_rows, Batch, BoardCopy, Datum, Importer, ALWAYS_ONE_ROW, TABLES};
use board_core::{StoreError, StoreResult};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use crate::SqliteStore;

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// The order rows were inserted in: `rowid` for tasks, the key for the others.
fn order(table: &str) -> &'static str {
    match table {
        "tasks" => "rowid",
        "task_links" => "parent_id, child_id",
        "decomposition_leases" => "task_id",
        "lanes" => "created_at, name",
        _ => "id",
    }
}

fn cell(value: ValueRef<'_>) -> StoreResult<Datum> {
    Ok(match value {
        ValueRef::Null => Datum::Null,
        ValueRef::Integer(i) => Datum::Int(i),
        ValueRef::Real(r) => Datum::Real(r),
        ValueRef::Text(t) => Datum::Text(
            String::from_utf8(t.to_vec())
                .map_err(|_| StoreError::Backend("a text value is not UTF-8".into()))?,
        ),
        ValueRef::Blob(b) => Datum::Bytes(b.to_vec()),
    })
}

fn value(cell: &Datum) -> Value {
    match cell {
        Datum::Null => Value::Null,
        Datum::Int(i) => Value::Integer(*i),
        Datum::Real(r) => Value::Real(*r),
        Datum::Text(t) => Value::Text(t.clone()),
        Datum::Bytes(b) => Value::Blob(b.clone()),
    }
}

fn export_table(
    conn: &Connection,
    table: &'static str,
    each: &mut dyn FnMut(Batch<'_>) -> StoreResult<()>,
) -> StoreResult<()> {
    let sql = format!("SELECT * FROM {table} ORDER BY {}", order(table));
    let mut stmt = conn.prepare(&sql).map_err(backend)?;
    let columns: Vec<String> = stmt.column_names().iter().map(|c| (*c).to_owned()).collect();
    let mut rows = stmt.query([]).map_err(backend)?;
    let rows_per_batch = batch_rows(table);
    let mut batch = Vec::with_capacity(rows_per_batch);
    while let Some(row) = rows.next().map_err(backend)? {
        let cells = (0..columns.len())
            .map(|i| row.get_ref(i).map_err(backend).and_then(cell))
            .collect::<StoreResult<Vec<Datum>>>()?;
        batch.push(cells);
        if batch.len() == rows_per_batch {
            each(Batch {
                table,
                columns: &columns,
                rows: &batch,
            })?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        each(Batch {
            table,
            columns: &columns,
            rows: &batch,
        })?;
    }
    Ok(())
}

impl BoardCopy for SqliteStore {
    fn row_counts(&self) -> StoreResult<Vec<(&'static str, i64)>> {
        self.read_copy(|conn| {
            TABLES
                .iter()
                .map(|table| {
                    let sql = format!("SELECT count(*) FROM {table}");
                    let rows = conn.query_row(&sql, [], |r| r.get(0)).map_err(backend)?;
                    Ok((*table, rows))
                })
                .collect()
        })
    }

    fn export(&self, each: &mut dyn FnMut(Batch<'_>) -> StoreResult<()>) -> StoreResult<()> {
        self.read_copy(|conn| {
            TABLES
                .iter()
                .try_for_each(|table| export_table(conn, table, each))
        })
    }

    fn importer(&self) -> StoreResult<Box<dyn Importer + '_>> {
        let conn = self.lock_conn();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        Ok(Box::new(SqliteImporter { conn, open: true }))
    }
}

struct SqliteImporter<'s> {
    conn: MutexGuard<'s, Connection>,
    open: bool,
}

impl Importer for SqliteImporter<'_> {
    fn insert(&mut self, batch: Batch<'_>) -> StoreResult<()> {
        let verb = if batch.table == ALWAYS_ONE_ROW {
            "INSERT OR REPLACE"
        } else {
            "INSERT"
        };
        let marks = vec!["?"; batch.columns.len()].join(", ");
        let sql = format!(
            "{verb} INTO {} ({}) VALUES ({marks})",
            batch.table,
            batch.columns.join(", ")
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(backend)?;
        for row in batch.rows {
            stmt.execute(rusqlite::params_from_iter(row.iter().map(value)))
                .map_err(backend)?;
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> StoreResult<()> {
        self.open = false;
        self.conn.execute_batch("COMMIT").map_err(backend)
    }
}

impl Drop for SqliteImporter<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
