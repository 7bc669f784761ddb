//! The SQLite store: the board in one file, behind `board_core::Store`.
//!
//! Opening a file checks, before writing a byte, that it is SQLite, that it is ours
//! (`application_id`) and that its schema is not newer than this binary. Every
//! connection runs in WAL mode with a busy timeout and foreign keys on; every write is
//! one `BEGIN IMMEDIATE` transaction that reads the task's facts, asks the core, and
//! applies the change with its events, guarded by compare-and-set on the claim.

mod copy;
pub mod hermes;
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
        let found = check_existing(&path)?;
        if found.is_none() {
            create_private_file(&path)?;
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sqlite_err)?;
        configure(&conn, options).map_err(|e| OpenError::Sqlite {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let mut store = SqliteStore {
            conn: Mutex::new(conn),
            path: path.clone(),
            on_wake: None,
        };
        // A current board needs no write to open, so read-only homes can still be read.
        if found != Some((APPLICATION_ID, SCHEMA_VERSION)) {
            store.migrate()?;
        }
        Ok(store)
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

/// Refuses a file that is not ours without writing to it. Returns the
/// `(application_id, user_version)` of an existing board, `None` when there is no file
/// or an empty one (a new board).
///
/// The file is only ever read through SQLite, never through a descriptor of our own:
/// POSIX record locks belong to the process, so closing any descriptor of the file would
/// drop the locks every SQLite connection of this process holds on it, and another
/// process would then take the board for its own alone (and, closing, remove the WAL
/// this process still writes to). SQLite keeps its descriptors open while they matter.
///
/// The read takes no lock (it must not make side files for a file it may refuse), so it
/// can land in the middle of another process making or checkpointing the board and see
/// half of it. A refusal is therefore read again a few times, a little apart, before it
/// stands: a board in the making settles in milliseconds, a file that is not ours reads
/// the same every time.
/// A connection to the existing board at `path`, opened as `target` (the path, or a
/// URI naming it) with `flags`; a missing board is refused, nothing is created.
fn open_existing(path: &Path, target: &Path, flags: OpenFlags) -> Result<Connection, OpenError> {
    if check_existing(path)?.is_none() {
        return Err(OpenError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no board here"),
        });
    }
    Connection::open_with_flags(target, flags).map_err(|e| OpenError::Sqlite {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A path as the path of a `file:` URI: every byte but unreserved ones and `/`
/// percent-encoded (a `?`, `#` or `%` in a directory name stays a name).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn check_existing(path: &Path) -> Result<Option<(i32, i64)>, OpenError> {
    let mut wait = Duration::from_millis(5);
    for _ in 0..IDENTITY_REREADS {
        match read_existing(path) {
            Err(OpenError::NotSqlite { .. } | OpenError::Foreign { .. } | OpenError::Sqlite { .. }) => {
                std::thread::sleep(wait);
                wait *= 2;
            }
            verdict => return verdict,
        }
    }
    read_existing(path)
}

/// How many times a refusal of a board file is read again before it stands (waiting 5,
/// 10, 20 and 40 ms between: 75 ms in all, only ever on the way to refusing).
const IDENTITY_REREADS: usize = 4;

fn read_existing(path: &Path) -> Result<Option<(i32, i64)>, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    if meta.is_dir() {
        return Err(io_err(std::io::Error::other("is a directory, not a board file")));
    }
    match meta.len() {
        0 => return Ok(None),
        // Shorter than SQLite's header: not a database of any kind.
        1..100 => {
            return Err(OpenError::NotSqlite {
                path: path.to_path_buf(),
            })
        }
        _ => {}
    }
    if let Some((app_id, version)) = stamped_header(path) {
        check_identity(path, app_id, version, 0)?;
        return Ok(Some((app_id, version)));
    }
    let conn = open_for_identity(path).map_err(|e| OpenError::Sqlite {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let _ = conn.busy_timeout(Options::default().busy_timeout);
    let (app_id, version, tables) = identity(&conn).map_err(|e| match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
            OpenError::NotSqlite {
                path: path.to_path_buf(),
            }
        }
        e => OpenError::Sqlite {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    })?;
    check_identity(path, app_id, version, tables)?;
    Ok(Some((app_id, version)))
}

/// The first 16 bytes of every SQLite database file.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Whether a write-ahead log lies beside the board file (its header may then lag
/// behind the log).
pub(crate) fn wal_pending(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    Path::new(&wal).symlink_metadata().is_ok()
}

/// The `(application_id, user_version)` of a board file stamped as ours, read from its
/// 100-byte header without a connection: what a one-shot command needs to know before
/// it opens the board, for the price of one `pread`. Only a file with no `-wal` beside
/// it is read this way (its header is then the board's own); anything not plainly ours
/// (`None`: a WAL pending, another magic or application id, a symlink, a short read) is
/// left to SQLite, the long way.
fn stamped_header(path: &Path) -> Option<(i32, i64)> {
    use std::io::Read;
    if wal_pending(path) {
        return None;
    }
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let mut header = [0u8; 100];
    options.open(path).ok()?.read_exact(&mut header).ok()?;
    let field = |at: usize| i32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    let (version, app_id) = (field(60), field(68));
    (header.starts_with(SQLITE_MAGIC) && app_id == APPLICATION_ID).then_some((app_id, i64::from(version)))
}

/// A read-only connection that creates nothing beside the file. With a WAL pending
/// (`-wal` present) the header may lag behind it, so SQLite reads through the WAL, whose
/// side files exist already; without one, the file is complete and is opened
/// `immutable`, which makes SQLite create no `-wal`/`-shm` files for a file it may refuse.
pub(crate) fn open_for_identity(path: &Path) -> rusqlite::Result<Connection> {
    if wal_pending(path) {
        return Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY);
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let Some(text) = absolute.to_str() else {
        // A URI cannot carry a path that is not UTF-8.
        return Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY);
    };
    let mut uri = String::from("file:");
    for c in text.chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    Connection::open_with_flags(uri, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI)
}

/// `(application_id, user_version, number of schema objects)`. Both numbers are in the
/// file's header; the schema objects are counted only in a file not stamped as ours (is
/// it empty?), since reading `sqlite_master` parses the whole schema, which the
/// connection that then serves the command parses again.
fn identity(conn: &Connection) -> rusqlite::Result<(i32, i64, i64)> {
    let app_id = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables = if app_id == APPLICATION_ID {
        0
    } else {
        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))?
    };
    Ok((app_id, version, tables))
}

fn check_identity(path: &Path, app_id: i32, version: i64, tables: i64) -> Result<(), OpenError> {
    let ours = app_id == APPLICATION_ID || (app_id == 0 && tables == 0 && version == 0);
    if !ours {
        return Err(OpenError::Foreign {
            path: path.to_path_buf(),
            found: app_id,
        });
    }
    if version > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
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

/// The page cache of a connection, in KiB. A list of the whole board in claim order
/// visits the table's pages once per priority; with every interior page and the index
/// it walks held, each visit is one read instead of a walk from the root (a 1M-task
/// board's `list --json` took 3.3 s instead of 4.1-4.3 s with SQLite's 2 MiB).
const CACHE_KIB: i64 = 8192;

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
mod tests {
    use super::*;

    #[test]
    fn a_closed_board_is_known_by_its_header_and_anything_else_goes_the_long_way() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let store = SqliteStore::open(&path, &Options::default()).unwrap();
        // Open: a WAL is pending, so the header may lag behind it.
        assert_eq!(stamped_header(&path), None);
        drop(store);
        assert_eq!(stamped_header(&path), Some((APPLICATION_ID, SCHEMA_VERSION)));

        // A change in the WAL is not yet in the file's header: the header is not used.
        let store = SqliteStore::open(&path, &Options::default()).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 7).unwrap();
        drop(conn);
        assert_eq!(stamped_header(&path), None, "a pending WAL holds a newer header");
        drop(store);
        assert_eq!(
            stamped_header(&path),
            Some((APPLICATION_ID, 7)),
            "the version is read, not assumed"
        );

        #[cfg(unix)]
        {
            let link = dir.path().join("link.db");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert_eq!(stamped_header(&link), None, "a symlink is not followed");
        }
        let foreign = dir.path().join("foreign.db");
        let conn = Connection::open(&foreign).unwrap();
        conn.execute_batch("PRAGMA application_id = 5; CREATE TABLE t (x);")
            .unwrap();
        drop(conn);
        assert_eq!(stamped_header(&foreign), None);
        let short = dir.path().join("short.db");
        std::fs::write(&short, b"SQLite format 3\0").unwrap();
        assert_eq!(stamped_header(&short), None);
        let text = dir.path().join("text.db");
        std::fs::write(&text, [b'x'; 200]).unwrap();
        assert_eq!(stamped_header(&text), None);
    }
}
