//! Whether a file is a board of ours, found without writing a byte to it: SQLite's
//! magic, our `application_id`, and a schema no newer than this binary's.

use std::fs::OpenOptions;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::{OpenError, Options, APPLICATION_ID, SCHEMA_VERSION};

/// A connection to the existing board at `path`, opened as `target` (the path, or a
/// URI naming it) with `flags`; a missing board is refused, nothing is created.
pub(crate) fn open_existing(path: &Path, target: &Path, flags: OpenFlags) -> Result<Connection, OpenError> {
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
pub(crate) fn uri_path(path: &Path) -> String {
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
pub(crate) fn check_existing(path: &Path) -> Result<Option<(i32, i64)>, OpenError> {
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
        e if crate::is_not_a_database(&e) => OpenError::NotSqlite {
            path: path.to_path_buf(),
        },
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
pub(crate) fn stamped_header(path: &Path) -> Option<(i32, i64)> {
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
pub(crate) fn identity(conn: &Connection) -> rusqlite::Result<(i32, i64, i64)> {
    let app_id = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables = if app_id == APPLICATION_ID {
        0
    } else {
        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))?
    };
    Ok((app_id, version, tables))
}

pub(crate) fn check_identity(path: &Path, app_id: i32, version: i64, tables: i64) -> Result<(), OpenError> {
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
