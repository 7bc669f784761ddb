//! Reading a Python Hermes `kanban.db` for `kanban import-hermes`, without ever writing
//! it: the file is opened read-only, `immutable` when no WAL is pending (so SQLite
//! creates no `-wal`/`-shm` beside it), and read a page of tasks at a time with their
//! runs, events and comments, then its links in pages. Every value is decoded by hand:
//! the file is untrusted, and a row that cannot come over is skipped with its reason.

mod rows;

use std::io::Read;
use std::path::{Path, PathBuf};

use board_core::{ImportedTask, Link, TaskId, Timestamp};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};

pub use rows::map_status;

/// Why a file cannot be read as a Hermes board. Nothing was written to it.
#[derive(Debug, thiserror::Error)]
pub enum HermesError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not an SQLite database, so not a Hermes kanban.db")]
    NotSqlite { path: PathBuf },
    #[error(
        "{path}: a board of this kanban, not a Hermes one (use it as a home, or copy its tasks by hand)"
    )]
    Ours { path: PathBuf },
    #[error("{path}: not a Hermes kanban board ({reason})")]
    NotHermes { path: PathBuf, reason: String },
    #[error("{path}: a Hermes schema newer than this import knows (user_version {found}); upgrade kanban")]
    Newer { path: PathBuf, found: i64 },
    #[error("{path}: {message}")]
    Sqlite { path: PathBuf, message: String },
}

/// A row that did not come over, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// `task`, `run`, `event`, `comment` or `link`.
    pub what: &'static str,
    /// The row's id as stored (a link is `parent -> child`).
    pub id: String,
    pub reason: String,
}

/// How many rows each table holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub tasks: u64,
    pub links: u64,
    pub runs: u64,
    pub events: u64,
    pub comments: u64,
}

/// One page of tasks, each with its history, and the rows of it that were skipped.
#[derive(Debug, Default)]
pub struct Page {
    pub tasks: Vec<ImportedTask>,
    pub skipped: Vec<Skipped>,
    /// Where the next page starts (a rowid); `None` when this page was the last.
    pub next: Option<i64>,
}

/// One page of links, and the rows of it that were skipped.
#[derive(Debug, Default)]
pub struct LinkPage {
    pub links: Vec<Link>,
    pub skipped: Vec<Skipped>,
    /// The last link read, to read the next page after; `None` when this page was empty.
    pub next: Option<(String, String)>,
}

/// Columns a Hermes board has always had; a file without them is not one.
const REQUIRED: &[(&str, &[&str])] = &[
    (
        "tasks",
        &[
            "id",
            "title",
            "body",
            "assignee",
            "status",
            "priority",
            "created_by",
            "created_at",
        ],
    ),
    ("task_links", &["parent_id", "child_id"]),
    (
        "task_runs",
        &["id", "task_id", "status", "started_at", "ended_at", "outcome"],
    ),
    ("task_events", &["id", "task_id", "kind", "payload", "created_at"]),
    (
        "task_comments",
        &["id", "task_id", "author", "body", "created_at"],
    ),
];

/// A Hermes board open for reading.
pub struct HermesBoard {
    conn: Connection,
    /// The private copy read instead of a file with a pending WAL, removed with it.
    _copy: Option<tempfile::TempDir>,
    path: PathBuf,
    /// Text over this many bytes is not loaded: its row is skipped.
    max_text_bytes: usize,
    /// The optional `tasks` columns this file has (older Hermes versions lack some).
    task_columns: Vec<String>,
    run_columns: Vec<String>,
    event_columns: Vec<String>,
}

impl HermesBoard {
    /// Opens `path` read-only and checks that it is a Hermes board this import knows.
    pub fn open(path: &Path, max_text_bytes: usize) -> Result<HermesBoard, HermesError> {
        let path = path.to_path_buf();
        check_header(&path)?;
        let sqlite = |e: rusqlite::Error| sqlite_error(&path, e);
        // A pending WAL (Hermes still running) holds rows the file does not: they are
        // read from a private copy of both, so nothing (no `-shm`) appears beside them.
        let (conn, copy) = if crate::wal_pending(&path) {
            let copy = private_copy(&path)?;
            let conn =
                Connection::open_with_flags(copy.path().join(COPY_NAME), OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .map_err(sqlite)?;
            (conn, Some(copy))
        } else {
            (crate::open_for_identity(&path).map_err(sqlite)?, None)
        };
        let _ = conn.busy_timeout(std::time::Duration::from_secs(30));
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        bound_the_work(&conn, bytes);
        let app_id: i32 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(|e| not_a_database(&path, e))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sqlite)?;
        if app_id == crate::APPLICATION_ID {
            return Err(HermesError::Ours { path });
        }
        if app_id != 0 {
            let reason = format!("application_id {app_id:#x} is another application's");
            return Err(HermesError::NotHermes { path, reason });
        }
        if version != 0 {
            return Err(HermesError::Newer { path, found: version });
        }
        for (table, columns) in REQUIRED {
            // A view of that name could be anything, an endless recursive query included.
            let kind: Option<String> = conn
                .query_row("SELECT type FROM sqlite_master WHERE name = ?1", [table], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(sqlite)?;
            if let Some(kind) = kind.filter(|k| k != "table") {
                let reason = format!("{table} is a {kind}, not a table");
                return Err(HermesError::NotHermes { path, reason });
            }
            let found = table_columns(&conn, table).map_err(sqlite)?;
            if let Some(missing) = columns.iter().find(|c| !found.iter().any(|f| f == *c)) {
                let reason = match found.is_empty() {
                    true => format!("no table {table}"),
                    false => format!("table {table} has no column {missing}"),
                };
                return Err(HermesError::NotHermes { path, reason });
            }
        }
        let task_columns = table_columns(&conn, "tasks").map_err(sqlite)?;
        let run_columns = table_columns(&conn, "task_runs").map_err(sqlite)?;
        let event_columns = table_columns(&conn, "task_events").map_err(sqlite)?;
        Ok(HermesBoard {
            conn,
            _copy: copy,
            path,
            max_text_bytes,
            task_columns,
            run_columns,
            event_columns,
        })
    }

    fn sqlite(&self, e: rusqlite::Error) -> HermesError {
        sqlite_error(&self.path, e)
    }

    /// The rows of each table, counted by SQLite.
    pub fn counts(&self) -> Result<Counts, HermesError> {
        self.conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM task_links),
                        (SELECT COUNT(*) FROM task_runs), (SELECT COUNT(*) FROM task_events),
                        (SELECT COUNT(*) FROM task_comments)",
                [],
                |r| {
                    Ok(Counts {
                        tasks: r.get(0)?,
                        links: r.get(1)?,
                        runs: r.get(2)?,
                        events: r.get(3)?,
                        comments: r.get(4)?,
                    })
                },
            )
            .map_err(|e| self.sqlite(e))
    }

    /// Up to `limit` tasks stored after rowid `after` (0 to start), each with its
    /// history, mapped to this board's words. A task's run still open in Hermes is
    /// closed `reclaimed` at `now`: no worker of this board holds it.
    pub fn tasks(&self, after: i64, limit: usize, now: Timestamp) -> Result<Page, HermesError> {
        let cap = self.max_text_bytes;
        let sql = rows::task_select(&self.task_columns);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.sqlite(e))?;
        let mut found = stmt
            .query(params![after, limit as i64, cap as i64])
            .map_err(|e| self.sqlite(e))?;
        let mut page = Page::default();
        while let Some(row) = found.next().map_err(|e| self.sqlite(e))? {
            page.next = row.get(1).ok();
            match rows::task(row, cap) {
                Ok(task) => page.tasks.push(task),
                Err(reason) => page.skipped.push(Skipped {
                    what: "task",
                    id: row.get_ref(0).ok().and_then(rows::text).unwrap_or_default(),
                    reason,
                }),
            }
        }
        if let Some(last) = page.next {
            let range = params![after, last, cap as i64];
            let runs = self.rows(&rows::run_select(&self.run_columns), range, |row| {
                rows::run(row, now)
            })?;
            let events = self.rows(&rows::event_select(&self.event_columns), range, rows::event)?;
            let comments = self.rows(rows::COMMENT_SELECT, range, rows::comment)?;
            rows::attach(&mut page, runs, events, comments);
        }
        Ok(page)
    }

    /// Runs a history query, decoding each row; a row that cannot be decoded is kept as
    /// its skip.
    fn rows<T>(
        &self,
        sql: &str,
        range: &[&dyn rusqlite::ToSql],
        decode: impl Fn(&Row<'_>) -> Result<T, Skipped>,
    ) -> Result<rows::Decoded<T>, HermesError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sqlite(e))?;
        let mut found = stmt.query(range).map_err(|e| self.sqlite(e))?;
        let mut out = Vec::new();
        while let Some(row) = found.next().map_err(|e| self.sqlite(e))? {
            let task_id = rows::text(row.get_ref(0).map_err(|e| self.sqlite(e))?).unwrap_or_default();
            out.push((task_id, decode(row)));
        }
        Ok(out)
    }

    /// Up to `limit` links after `(parent, child)` in order; links whose ends are not
    /// task ids are skipped.
    pub fn links(&self, after: &(String, String), limit: usize) -> Result<LinkPage, HermesError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT parent_id, child_id FROM task_links WHERE (parent_id, child_id) > (?1, ?2)
                 ORDER BY parent_id, child_id LIMIT ?3",
            )
            .map_err(|e| self.sqlite(e))?;
        let mut found = stmt
            .query(params![after.0, after.1, limit as i64])
            .map_err(|e| self.sqlite(e))?;
        let mut page = LinkPage::default();
        while let Some(row) = found.next().map_err(|e| self.sqlite(e))? {
            let end = |i| row.get_ref(i).ok().and_then(rows::text).unwrap_or_default();
            let (parent, child) = (end(0), end(1));
            match (parent.parse::<TaskId>(), child.parse::<TaskId>()) {
                (Ok(parent_id), Ok(child_id)) => page.links.push(Link { parent_id, child_id }),
                _ => page.skipped.push(Skipped {
                    what: "link",
                    id: format!("{parent} -> {child}"),
                    reason: "an end is not a task id".into(),
                }),
            }
            page.next = Some((parent, child));
        }
        Ok(page)
    }
}

/// An SQLite error reading `path`; a statement stopped by [`bound_the_work`] says why.
fn sqlite_error(path: &Path, e: rusqlite::Error) -> HermesError {
    let message = match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OperationInterrupted => {
            "reading it takes far more work than a board of its size needs (a hostile query?); \
             nothing was imported"
                .to_owned()
        }
        e => e.to_string(),
    };
    HermesError::Sqlite {
        path: path.to_path_buf(),
        message,
    }
}

/// The name of the board in a private copy.
const COPY_NAME: &str = "hermes.db";

/// The SQLite steps the whole import may take per byte of the Hermes file, beyond a
/// floor: far more than reading a real board needs, and an end to a query a hostile
/// file made endless.
const STEPS_PER_BYTE: u64 = 2_000;
const STEPS_FLOOR: u64 = 1_000_000_000;

/// Opens a foreign file for reading without waiting on it: a FIFO or a device would
/// block an `open`, so it is opened non-blocking and refused unless it is a regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::other(
            "is a directory; give the path of kanban.db",
        ));
    }
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Copies the board and its WAL into a private directory of ours, each read as a
/// regular file.
fn private_copy(path: &Path) -> Result<tempfile::TempDir, HermesError> {
    let io = |source| HermesError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = tempfile::Builder::new()
        .prefix("kanban-hermes-")
        .tempdir()
        .map_err(io)?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    for (from, to) in [
        (path.to_path_buf(), COPY_NAME.to_owned()),
        (PathBuf::from(wal), format!("{COPY_NAME}-wal")),
    ] {
        let mut source = open_regular(&from).map_err(|source| HermesError::Io {
            path: from.clone(),
            source,
        })?;
        let mut target = std::fs::File::create_new(dir.path().join(to)).map_err(io)?;
        std::io::copy(&mut source, &mut target).map_err(io)?;
    }
    Ok(dir)
}

/// Interrupts the connection's statements once they have taken more steps than a board
/// of `bytes` can need.
fn bound_the_work(conn: &Connection, bytes: u64) {
    const EVERY: i32 = 100_000;
    let limit = STEPS_FLOOR.saturating_add(bytes.saturating_mul(STEPS_PER_BYTE));
    let mut steps = 0u64;
    conn.progress_handler(
        EVERY,
        Some(move || {
            steps = steps.saturating_add(EVERY as u64);
            steps > limit
        }),
    );
}

fn check_header(path: &Path) -> Result<(), HermesError> {
    let io = |source| HermesError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = open_regular(path).map_err(io)?;
    let mut header = [0u8; 16];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]).map_err(io)? {
            0 => break,
            n => read += n,
        }
    }
    if &header[..read] != crate::SQLITE_MAGIC {
        return Err(HermesError::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn not_a_database(path: &Path, e: rusqlite::Error) -> HermesError {
    match e {
        e if crate::is_not_a_database(&e) => HermesError::NotSqlite {
            path: path.to_path_buf(),
        },
        e => HermesError::Sqlite {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    }
}

/// The column names of `table`; empty when there is no such table.
fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt.query_map([table], |r| {
        Ok(match r.get_ref(0)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => String::new(),
        })
    })?;
    names.collect()
}
