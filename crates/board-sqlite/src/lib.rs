//! The SQLite store: the board in one file, behind `board_core::Store`.
//!
//! Opening a file checks, before writing a byte, that it is SQLite, that it is ours
//! (`application_id`) and that its schema is not newer than this binary. Every
//! connection runs in WAL mode with a busy timeout and foreign keys on; every write is
//! one `BEGIN IMMEDIATE` transaction that reads the task's facts, asks the core, and
//! applies the change with its events, guarded by compare-and-set on the claim.

mod copy;
pub mod hermes;
mod identity;
mod rows;
mod schema;
mod store;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use board_core::{StoreError, StoreResult};
pub use schema::{APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION};

use identity::{check_existing, check_identity, identity, open_existing, uri_path};
pub(crate) use identity::{open_for_identity, wal_pending, SQLITE_MAGIC};

/// `PRAGMA synchronous` for the board's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// An fsync at every commit: a committed write survives a power cut.
    #[default]
    Full,
    /// WAL's NORMAL: a committed write survives a process crash, not a power cut.
    Normal,
}

/// A `sqlite_synchronous` that is neither `full` nor `normal`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sqlite_synchronous {0:?} (expected full or normal)")]
pub struct UnknownSynchronous(pub String);

impl std::str::FromStr for Synchronous {
    type Err = UnknownSynchronous;
    fn from_str(s: &str) -> Result<Synchronous, UnknownSynchronous> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Synchronous::Full),
            "normal" => Ok(Synchronous::Normal),
            _ => Err(UnknownSynchronous(s.chars().take(80).collect())),
        }
    }
}

/// How to open a board file.
#[derive(Clone, Debug)]
pub struct Options {
    pub synchronous: Synchronous,
    pub busy_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(30),
        }
    }
}

/// What a connection runs with (see [`SqliteStore::settings`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub journal_mode: String,
    pub synchronous: String,
    pub busy_timeout_ms: i64,
    pub foreign_keys: bool,
    pub application_id: i32,
    pub user_version: i64,
}

/// Why a board file could not be opened. Nothing was written to it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: not an SQLite database (refusing to touch it)")]
    NotSqlite { path: PathBuf },
    #[error(
        "{path}: an SQLite database of another application (application_id {found:#x}); refusing to touch it"
    )]
    Foreign { path: PathBuf, found: i32 },
    #[error(
        "{path}: schema version {found} is newer than this binary supports ({supported}); upgrade kanban"
    )]
    Newer {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Sqlite { path: PathBuf, message: String },
}

/// The board in one SQLite file. One connection; open one store per thread or process
/// that needs its own.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// Called after a write that may give a dispatcher work commits ([`SqliteStore::on_wake`]).
    on_wake: Option<OnWake>,
}

/// What a store calls after a waking write commits; it must return at once.
pub type OnWake = Arc<dyn Fn() + Send + Sync>;

impl SqliteStore {
    /// Opens (creating when absent) the board at `path`, migrating it forward.
    pub fn open(path: impl AsRef<Path>, options: &Options) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_path_buf();
        let sqlite_err = |e: rusqlite::Error| OpenError::Sqlite {
            path: path.clone(),
            message: e.to_string(),
        };
        if let Some(store) = SqliteStore::open_held(&path, options)? {
            return Ok(store);
        }
        let found = check_existing(&path)?;
        if found.is_none() {
            create_private_file(&path)?;
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sqlite_err)?;
        SqliteStore::serving(
            conn,
            &path,
            options,
            found == Some((APPLICATION_ID, SCHEMA_VERSION)),
        )
    }

    /// The store on `conn`, configured, and migrated unless the board is `current`: a
    /// current board needs no write to open, so read-only homes can still be read.
    fn serving(
        conn: Connection,
        path: &Path,
        options: &Options,
        current: bool,
    ) -> Result<SqliteStore, OpenError> {
        configure(&conn, options).map_err(|e| OpenError::Sqlite {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut store = SqliteStore {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            on_wake: None,
        };
        if !current {
            store.migrate()?;
        }
        Ok(store)
    }

    /// Opens a board that another connection holds open (its WAL is there): the
    /// connection that will serve reads the board's identity through the WAL before
    /// anything is set on it (reading writes nothing, and the side files are there
    /// already), instead of a connection of its own first. `None` when the file is not
    /// plainly a board of ours, for the long way, which refuses what is not; a board of a
    /// newer kanban is refused here as there.
    fn open_held(path: &Path, options: &Options) -> Result<Option<SqliteStore>, OpenError> {
        // Only through SQLite: a descriptor of our own on the file, closed, would drop the
        // locks of every connection of this process (see `check_existing`).
        if !wal_pending(path) {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let Ok(conn) = Connection::open_with_flags(path, flags) else {
            return Ok(None);
        };
        if conn.busy_timeout(options.busy_timeout).is_err() {
            return Ok(None);
        }
        let (app_id, version, tables) = match identity(&conn) {
            Ok(found) if found.0 == APPLICATION_ID => found,
            _ => return Ok(None),
        };
        check_identity(path, app_id, version, tables)?;
        SqliteStore::serving(conn, path, options, version == SCHEMA_VERSION).map(Some)
    }

    /// Opens an existing board for reading only: nothing is created or migrated.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_path_buf();
        let conn = open_existing(&path, &path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(Options::default().busy_timeout)
            .map_err(|e| OpenError::Sqlite {
                path: path.clone(),
                message: e.to_string(),
            })?;
        Ok(SqliteStore::reading(conn, path))
    }

    /// A store on a connection that only reads.
    fn reading(conn: Connection, path: PathBuf) -> SqliteStore {
        SqliteStore {
            conn: Mutex::new(conn),
            path,
            on_wake: None,
        }
    }

    /// The store, once one read succeeded: a read-only open of a board in WAL mode fails
    /// only at its first read when SQLite cannot make its shared-memory file.
    pub fn ensure_readable(self) -> Result<SqliteStore, OpenError> {
        let read = self
            .lock_conn()
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0));
        match read {
            Ok(_) => Ok(self),
            Err(e) => Err(OpenError::Sqlite {
                path: self.path.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// Opens an existing board as an unchanging snapshot (SQLite's `immutable`): no lock,
    /// no shared-memory file, nothing created. The one way to read a board in a directory
    /// this process cannot write when SQLite's WAL files are absent; a write by another
    /// process meanwhile is not seen, and one that moves pages may fail the read.
    pub fn open_snapshot(path: impl AsRef<Path>) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_path_buf();
        let uri = PathBuf::from(format!("file:{}?immutable=1", uri_path(&path)));
        let flags =
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = open_existing(&path, &uri, flags)?;
        Ok(SqliteStore::reading(conn, path))
    }

    /// Calls `on_wake` after every committed write that appended an event which may
    /// give a dispatcher work (`board_core::wakes_dispatcher`): how a running gateway
    /// hears of it before its next tick (docs/gateway.md#wake-ups).
    pub fn on_wake(mut self, on_wake: OnWake) -> SqliteStore {
        self.on_wake = Some(on_wake);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The settings in force on this store's connection, as SQLite reports them.
    pub fn settings(&self) -> StoreResult<Settings> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let read = |name: &str| -> StoreResult<String> {
            conn.pragma_query_value(None, name, |r| r.get::<_, rusqlite::types::Value>(0))
                .map(|v| match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .map_err(|e| StoreError::Backend(format!("{name}: {e}")))
        };
        let number = |name: &str| -> StoreResult<i64> {
            read(name)?
                .parse()
                .map_err(|e| StoreError::Backend(format!("{name}: {e}")))
        };
        Ok(Settings {
            journal_mode: read("journal_mode")?.to_ascii_lowercase(),
            synchronous: match number("synchronous")? {
                2 => "full".to_owned(),
                1 => "normal".to_owned(),
                other => other.to_string(),
            },
            busy_timeout_ms: number("busy_timeout")?,
            foreign_keys: number("foreign_keys")? == 1,
            application_id: number("application_id")? as i32,
            user_version: number("user_version")?,
        })
    }

    fn migrate(&mut self) -> Result<(), OpenError> {
        let path = self.path.clone();
        let sqlite_err = |e: rusqlite::Error| OpenError::Sqlite {
            path: path.clone(),
            message: e.to_string(),
        };
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite_err)?;
        // Re-read under the write lock: another process may have created the board.
        let (app_id, version, tables) = identity(&tx).map_err(sqlite_err)?;
        check_identity(&path, app_id, version, tables)?;
        for (from, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(sqlite_err)?;
            tx.pragma_update(None, "user_version", from as i64 + 1)
                .map_err(sqlite_err)?;
        }
        if app_id != APPLICATION_ID {
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(sqlite_err)?;
        }
        tx.commit().map_err(sqlite_err)
    }
}

/// Creates the board file readable and writable by its owner only.
fn create_private_file(path: &Path) -> Result<(), OpenError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(OpenError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Applies the board's connection settings to `conn`: the busy timeout, the page size
/// of a new file, WAL with its checkpoint interval, foreign keys and `synchronous`.
/// Every store connection runs it; benchmarks run it on their baseline connections so
/// that a ratio compares like with like.
///
/// Switching a new file to WAL needs the file to itself for a moment, and SQLite answers
/// `database is locked` at once, without its busy handler, when another process holds
/// it then (one making the same new board, say): the switch is tried again until the
/// busy timeout has passed.
pub fn configure(conn: &Connection, options: &Options) -> Result<(), ConfigureError> {
    let deadline = std::time::Instant::now() + options.busy_timeout;
    let mut wait = Duration::from_millis(1);
    loop {
        let mode = set_pragmas(conn, options)
            .and_then(|()| conn.pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0)));
        let failure = match mode {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => ConfigureError::NotWal(mode),
            Err(e) if !is_busy(&e) => return Err(ConfigureError::Sqlite(e)),
            Err(e) => ConfigureError::Sqlite(e),
        };
        if std::time::Instant::now() >= deadline {
            return Err(failure);
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(50));
    }
}

/// Why a connection could not be set up as a board's.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    #[error("could not switch to WAL mode (got {0})")]
    NotWal(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// Whether SQLite found the file is not a database at all.
fn is_not_a_database(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase)
}

/// Whether SQLite refused because another connection holds the file.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Small pages: a claim or a completion dirties half a dozen pages (the task row, its
/// status index entry, a run, an event and their indexes), each written to the WAL in
/// full at every commit; 1 KiB pages hold a few task rows each and make those frames a
/// quarter of the default's size. It only applies to a new file.
const PAGE_SIZE: i64 = 1024;

/// Checkpoint the WAL every this many pages (about 10 MiB of frames) rather than
/// SQLite's 1000: fewer checkpoints, each of which costs a sync of the main file.
const WAL_AUTOCHECKPOINT: i64 = 10_000;

/// The page cache of a connection, in KiB: SQLite's own default, kept small for the
/// writes' sake. When a B-tree page splits, SQLite renumbers the new pages through a
/// page number far past the end of the file (the one holding the lock byte), and the
/// commit that follows walks the cache's whole hash table to drop pages past the end,
/// a table that grows with the cache and never shrinks: with 8 MiB, that walk was a
/// fifth of a claim's or a completion's CPU (`perf`: `pcache1TruncateUnsafe`), and the
/// store cycle ran 12-15% (`synchronous` FULL) and 19-23% (NORMAL) slower than with
/// this.
pub(crate) const CACHE_KIB: i64 = 2048;

/// The page cache of a whole listing (`store/pipeline.rs`), in KiB, for its duration. A
/// list of the whole board in claim order visits the table's pages once per priority;
/// with every interior page and the index it walks held, each visit is one read instead
/// of a walk from the root (a 1M-task board's `list --json` took 3.3 s instead of
/// 4.1-4.3 s with 2 MiB).
pub(crate) const LISTING_CACHE_KIB: i64 = 8192;

fn set_pragmas(conn: &Connection, options: &Options) -> rusqlite::Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)?;
    // No memory map: the pages a command maps stay in its resident memory, so a list or
    // a gc of a large board would hold up to the whole file. Reads go through SQLite's
    // own page cache instead, whatever the size of the board: CACHE_KIB, filled only as
    // pages are read, so a command that reads a few pages holds a few.
    conn.pragma_update(None, "mmap_size", 0)?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    // The last connection to close folds the WAL into the file and removes it (SQLite's
    // default). A `kanban` command is a short process, often the only one on the board:
    // a WAL left behind is read whole by the next command to open the board (it rebuilds
    // the WAL index from it), and since that rebuilt index forgets what was already
    // checkpointed, the log would never restart and every command would pay for all of
    // it. While a gateway holds the board open, no command is the last to close.
    conn.pragma_update(None, "foreign_keys", "ON")?;
    let sync = match options.synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

#[cfg(test)]
mod tests;
