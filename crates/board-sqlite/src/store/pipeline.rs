//! A whole listing read on two threads. One thread steps SQLite and copies each row's
//! cells into a batch; the caller's thread decodes the rows and visits them (for `list
//! --json`, the JSON and the writes). The two overlap instead of adding up; on a
//! million-task board the reader is the larger (about three fifths of the CPU: a page
//! read per row, as the claim order visits the table once per priority, and the cells).
//!
//! The reader holds the store's one connection (the caller holds its lock meanwhile)
//! and reads in one transaction, so the listing is one snapshot as before. At most
//! `IN_FLIGHT` batches wait between the threads: the memory is a few batches, whatever
//! the board's size (and as many again on their way back to be refilled). A visitor
//! that stops drops its end and the reader stops at its next batch.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use board_core::row::{Cell, Stored};
use board_core::store::{StoreResult, Visit};
use board_core::StoreError;
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::backend;
use super::tasks::report_unreadable;

/// Rows per batch: enough that handing one over costs nothing beside its rows.
const BATCH_ROWS: usize = 256;

/// Batches read ahead of the visitor.
const IN_FLIGHT: usize = 2;

/// One cell as copied out of SQLite; text is a range of its batch's bytes.
#[derive(Clone, Copy)]
enum Raw {
    Null,
    Int(i64),
    Real(f64),
    Text(usize, usize),
    Blob,
}

/// Rows of `width` cells each, their text in one buffer.
struct Batch {
    text: Vec<u8>,
    cells: Vec<Raw>,
}

impl Batch {
    fn with_capacity(cells: usize) -> Batch {
        Batch {
            text: Vec::new(),
            cells: Vec::with_capacity(cells),
        }
    }

    /// Empty, its memory kept for the next rows.
    fn clear(&mut self) {
        self.text.clear();
        self.cells.clear();
    }

    fn push(&mut self, value: ValueRef<'_>) {
        self.cells.push(match value {
            ValueRef::Null => Raw::Null,
            ValueRef::Integer(n) => Raw::Int(n),
            ValueRef::Real(x) => Raw::Real(x),
            ValueRef::Text(bytes) => {
                let start = self.text.len();
                self.text.extend_from_slice(bytes);
                Raw::Text(start, self.text.len())
            }
            ValueRef::Blob(_) => Raw::Blob,
        });
    }

    /// A row's cells as the core reads them, borrowing the batch's text; why not, for a
    /// value the board never writes (a blob, text that is not UTF-8).
    fn cells<'a>(&'a self, row: &[Raw]) -> Result<Vec<Cell<'a>>, String> {
        row.iter()
            .map(|raw| match *raw {
                Raw::Null => Ok(Cell::Null),
                Raw::Int(n) => Ok(Cell::Int(n)),
                Raw::Real(x) => Ok(Cell::Real(x)),
                Raw::Text(start, end) => std::str::from_utf8(&self.text[start..end])
                    .map(|t| Cell::Text(t.into()))
                    .map_err(|e| e.to_string()),
                Raw::Blob => Err("a blob where the board keeps text or numbers".to_owned()),
            })
            .collect()
    }

    /// The id a skipped row is reported by: its first cell as stored.
    fn id(&self, row: &[Raw]) -> String {
        match row.first() {
            Some(Raw::Text(start, end)) => String::from_utf8_lossy(&self.text[*start..*end]).into_owned(),
            Some(Raw::Int(n)) => n.to_string(),
            _ => String::new(),
        }
    }
}

/// Runs `sql` with `params` on `conn` in a thread of its own, handing `visit` each row
/// that decodes as a `T`, in the statement's order, until `visit` breaks; a row that
/// does not decode is reported and skipped, as the one-thread reads do. The connection's
/// page cache is a listing's (`LISTING_CACHE_KIB`) meanwhile, then the writes' again.
pub(super) fn for_each<T: Stored>(
    conn: &mut Connection,
    sql: &str,
    params: &[Value],
    visit: &mut dyn FnMut(T) -> Visit,
) -> StoreResult<()> {
    let cache = |conn: &Connection, kib: i64| conn.pragma_update(None, "cache_size", -kib).map_err(backend);
    cache(conn, crate::LISTING_CACHE_KIB)?;
    let listed = stream(conn, sql, params, visit);
    listed.and(cache(conn, crate::CACHE_KIB))
}

fn stream<T: Stored>(
    conn: &mut Connection,
    sql: &str,
    params: &[Value],
    visit: &mut dyn FnMut(T) -> Visit,
) -> StoreResult<()> {
    let width = T::COLUMNS.len();
    std::thread::scope(|scope| {
        let (batches, arriving) = sync_channel(IN_FLIGHT);
        // Read batches go back to the reader to be filled again: no batch is allocated
        // (nor its memory touched for the first time) after the first few.
        let (emptied, returned) = sync_channel(IN_FLIGHT + 1);
        let reader = std::thread::Builder::new()
            .name("list reader".into())
            .spawn_scoped(scope, move || read(conn, sql, params, width, batches, returned))
            .map_err(|e| StoreError::Backend(format!("cannot start the listing's reader: {e}")))?;
        'batches: for mut batch in arriving.iter() {
            for row in batch.cells.chunks(width) {
                let decoded = batch
                    .cells(row)
                    .and_then(|cells| T::from_cells(cells).map_err(|e| e.to_string()));
                match decoded {
                    Ok(value) => {
                        if visit(value).is_break() {
                            break 'batches;
                        }
                    }
                    Err(why) => report_unreadable(batch.id(row), &why),
                }
            }
            batch.clear();
            // A reader that has stopped takes none back.
            let _ = emptied.try_send(batch);
        }
        // Hung up: a reader still stepping stops at its next batch.
        drop(arriving);
        reader
            .join()
            .unwrap_or_else(|_| Err(StoreError::Backend("the listing's reader panicked".into())))
    })
}

/// The reader: steps the statement in one read transaction, sending full batches, until
/// the rows end or the visitor hangs up.
fn read(
    conn: &mut Connection,
    sql: &str,
    params: &[Value],
    width: usize,
    batches: SyncSender<Batch>,
    returned: Receiver<Batch>,
) -> StoreResult<()> {
    let tx = conn.transaction().map_err(backend)?;
    {
        let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(backend)?;
        let full = BATCH_ROWS * width;
        let empty = || returned.try_recv().unwrap_or_else(|_| Batch::with_capacity(full));
        let mut batch = empty();
        while let Some(row) = rows.next().map_err(backend)? {
            for at in 0..width {
                batch.push(row.get_ref(at).map_err(backend)?);
            }
            if batch.cells.len() == full && batches.send(std::mem::replace(&mut batch, empty())).is_err() {
                break;
            }
        }
        if !batch.cells.is_empty() {
            // A visitor that already hung up needs no more.
            let _ = batches.send(batch);
        }
    }
    tx.finish().map_err(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader hands over full batches of `BATCH_ROWS` rows, then the rest; each
    /// row's cells and its id come back as SQLite gave them, and a blob is refused.
    #[test]
    fn the_reader_sends_full_batches_then_the_rest() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (id TEXT, n INTEGER, x BLOB)")
            .unwrap();
        let rows = 2 * BATCH_ROWS + 88;
        for n in 0..rows {
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, NULL)",
                rusqlite::params![format!("r{n}"), n],
            )
            .unwrap();
        }
        conn.execute("UPDATE t SET x = x'00' WHERE n = 5", []).unwrap();
        let (sent, arriving) = sync_channel(rows);
        let (_emptied, returned) = sync_channel(1);
        read(
            &mut conn,
            "SELECT id, n, x FROM t ORDER BY n",
            &[],
            3,
            sent,
            returned,
        )
        .unwrap();
        let batches: Vec<Batch> = arriving.iter().collect();
        let sizes: Vec<usize> = batches.iter().map(|b| b.cells.len() / 3).collect();
        assert_eq!(sizes, [BATCH_ROWS, BATCH_ROWS, 88]);
        let first = &batches[0];
        let cells = first.cells(&first.cells[..3]).unwrap();
        assert!(
            matches!(&cells[..], [Cell::Text(t), Cell::Int(0), Cell::Null] if t == "r0"),
            "{cells:?}"
        );
        let blob = &first.cells[15..18];
        assert!(first.cells(blob).is_err());
        assert_eq!(first.id(blob), "r5");
        assert_eq!(first.id(&[Raw::Int(7)]), "7");
        let last = &batches[2];
        assert_eq!(
            last.id(&last.cells[last.cells.len() - 3..]),
            format!("r{}", rows - 1)
        );
    }
}
