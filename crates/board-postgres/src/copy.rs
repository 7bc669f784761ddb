//! `BoardCopy` for PostgreSQL (`kanban migrate`): the export reads through a cursor in
//! one REPEATABLE READ transaction, the import writes multi-row inserts in one
//! transaction and moves the id sequences past the copied ids before it commits.

use std::collections::HashMap;

use board_core::copy::{batch_rows, Batch, BoardCopy, Datum, Importer, ALWAYS_ONE_ROW, TABLES};
use board_core::{StoreError, StoreResult};
use postgres::types::{ToSql, Type};
use postgres::{Row, Statement};

use crate::pool::Lease;
use crate::{backend, PgStore};

/// The tables whose ids come from a sequence.
const SEQUENCED: &[&str] = &[
    "task_runs",
    "task_events",
    "task_comments",
    "task_attachments",
    "notify_subscriptions",
    "llm_calls",
];

/// The order rows were inserted in: `seq` for tasks, the key for the others.
fn order(table: &str) -> &'static str {
    match table {
        "tasks" => "seq",
        "task_links" => "parent_id, child_id",
        "decomposition_leases" => "task_id",
        "lanes" => "created_at, name",
        _ => "id",
    }
}

/// PostgreSQL's own columns, which no other backend has.
fn own_column(table: &str, column: &str) -> bool {
    table == "tasks" && column == "seq"
}

fn unsupported(what: &str, ty: &Type) -> StoreError {
    StoreError::Backend(format!("{what}: a column of type {ty} cannot be copied"))
}

fn cell(row: &Row, i: usize) -> StoreResult<Datum> {
    let ty = row.columns()[i].type_();
    let got = |e: postgres::Error| backend(e);
    let cell = if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i).map_err(got)?.map(Datum::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)
            .map_err(got)?
            .map(|v| Datum::Int(v.into()))
    } else if *ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)
            .map_err(got)?
            .map(|v| Datum::Int(v.into()))
    } else if *ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i).map_err(got)?.map(Datum::Real)
    } else if *ty == Type::TEXT {
        row.try_get::<_, Option<String>>(i).map_err(got)?.map(Datum::Text)
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(i)
            .map_err(got)?
            .map(Datum::Bytes)
    } else {
        return Err(unsupported(row.columns()[i].name(), ty));
    };
    Ok(cell.unwrap_or(Datum::Null))
}

type Param = Box<dyn ToSql + Sync>;

/// `cell` bound as the target column's type.
fn param(column: &str, cell: &Datum, ty: &Type) -> StoreResult<Param> {
    let mismatch = || StoreError::Backend(format!("{column}: {cell:?} does not fit a column of type {ty}"));
    Ok(match cell {
        Datum::Null if *ty == Type::INT8 => Box::new(None::<i64>),
        Datum::Null if *ty == Type::INT4 => Box::new(None::<i32>),
        Datum::Null if *ty == Type::BOOL => Box::new(None::<bool>),
        Datum::Null if *ty == Type::FLOAT8 => Box::new(None::<f64>),
        Datum::Null if *ty == Type::TEXT => Box::new(None::<String>),
        Datum::Int(i) if *ty == Type::INT8 => Box::new(*i),
        Datum::Int(i) if *ty == Type::INT4 => Box::new(i32::try_from(*i).map_err(|_| mismatch())?),
        Datum::Int(i) if *ty == Type::BOOL => Box::new(*i != 0),
        Datum::Int(i) if *ty == Type::FLOAT8 => Box::new(*i as f64),
        Datum::Real(r) if *ty == Type::FLOAT8 => Box::new(*r),
        Datum::Text(t) if *ty == Type::TEXT => Box::new(t.clone()),
        Datum::Bytes(b) if *ty == Type::BYTEA => Box::new(b.clone()),
        _ => return Err(mismatch()),
    })
}

impl BoardCopy for PgStore {
    fn row_counts(&self) -> StoreResult<Vec<(&'static str, i64)>> {
        self.read(|tx| {
            TABLES
                .iter()
                .map(|table| {
                    let rows = tx.query_uncached(&format!("SELECT count(*) FROM {table}"), &[])?;
                    Ok((*table, rows.first().map_or(0, |r| r.get::<_, i64>(0))))
                })
                .collect()
        })
    }

    fn export(&self, each: &mut dyn FnMut(Batch<'_>) -> StoreResult<()>) -> StoreResult<()> {
        let mut lease = self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let result = TABLES
            .iter()
            .try_for_each(|table| export_table(&mut lease, table, each));
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        if lease.client.batch_execute(end).is_err() {
            lease.broken = true;
        }
        result.map_err(|e| self.named(e))
    }

    fn importer(&self) -> StoreResult<Box<dyn Importer + '_>> {
        let lease = self.begin("BEGIN")?;
        Ok(Box::new(PgImporter {
            lease,
            statements: HashMap::new(),
            open: true,
        }))
    }
}

fn export_table(
    lease: &mut Lease<'_>,
    table: &'static str,
    each: &mut dyn FnMut(Batch<'_>) -> StoreResult<()>,
) -> StoreResult<()> {
    let client = &mut lease.client;
    let declare = format!(
        "DECLARE kanban_copy NO SCROLL CURSOR FOR SELECT * FROM {table} ORDER BY {}",
        order(table)
    );
    client.batch_execute(&declare).map_err(backend)?;
    let fetch = format!("FETCH {} FROM kanban_copy", batch_rows(table));
    loop {
        let rows = client.query(&fetch, &[]).map_err(backend)?;
        let Some(first) = rows.first() else { break };
        let kept: Vec<usize> = (0..first.columns().len())
            .filter(|&i| !own_column(table, first.columns()[i].name()))
            .collect();
        let columns: Vec<String> = kept
            .iter()
            .map(|&i| first.columns()[i].name().to_owned())
            .collect();
        let batch = rows
            .iter()
            .map(|row| kept.iter().map(|&i| cell(row, i)).collect())
            .collect::<StoreResult<Vec<Vec<Datum>>>>()?;
        each(Batch {
            table,
            columns: &columns,
            rows: &batch,
        })?;
    }
    client.batch_execute("CLOSE kanban_copy").map_err(backend)
}

struct PgImporter<'s> {
    lease: Lease<'s>,
    /// Inserts by table and row count, with the target's column types.
    statements: HashMap<(String, usize), (Statement, Vec<Type>)>,
    open: bool,
}

impl PgImporter<'_> {
    fn statement(&mut self, batch: &Batch<'_>) -> StoreResult<(Statement, Vec<Type>)> {
        let key = (batch.table.to_owned(), batch.rows.len());
        if let Some(found) = self.statements.get(&key) {
            return Ok(found.clone());
        }
        let width = batch.columns.len();
        let values: Vec<String> = (0..batch.rows.len())
            .map(|r| {
                let marks: Vec<String> = (1..=width).map(|c| format!("${}", r * width + c)).collect();
                format!("({})", marks.join(", "))
            })
            .collect();
        let mut sql = format!(
            "INSERT INTO {} ({}) VALUES {}",
            batch.table,
            batch.columns.join(", "),
            values.join(", ")
        );
        if batch.table == ALWAYS_ONE_ROW {
            let sets: Vec<String> = batch
                .columns
                .iter()
                .filter(|c| *c != "id")
                .map(|c| format!("{c} = EXCLUDED.{c}"))
                .collect();
            sql = format!("{sql} ON CONFLICT (id) DO UPDATE SET {}", sets.join(", "));
        }
        let statement = self.lease.client.prepare(&sql).map_err(backend)?;
        let types = statement.params()[..width].to_vec();
        self.statements.insert(key, (statement.clone(), types.clone()));
        Ok((statement, types))
    }
}

impl Importer for PgImporter<'_> {
    fn insert(&mut self, batch: Batch<'_>) -> StoreResult<()> {
        if batch.rows.is_empty() {
            return Ok(());
        }
        let (statement, types) = self.statement(&batch)?;
        let mut params: Vec<Param> = Vec::with_capacity(batch.rows.len() * types.len());
        for row in batch.rows {
            for ((column, cell), ty) in batch.columns.iter().zip(row).zip(&types) {
                params.push(param(column, cell, ty)?);
            }
        }
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        self.lease.client.execute(&statement, &refs).map_err(backend)?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> StoreResult<()> {
        for table in SEQUENCED {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'), COALESCE(max(id), 0) + 1, false) FROM {table}"
            );
            self.lease.client.batch_execute(&sql).map_err(backend)?;
        }
        self.open = false;
        self.lease.client.batch_execute("COMMIT").map_err(backend)
    }
}

impl Drop for PgImporter<'_> {
    fn drop(&mut self) {
        if self.open && self.lease.client.batch_execute("ROLLBACK").is_err() {
            self.lease.broken = true;
        }
    }
}
