//! Opening board files: our settings on every connection, and files that are not ours
//! refused with a clear error and left byte-for-byte unchanged.

use std::path::Path;
use std::time::Duration;

use board_core::{BoardReads, BoardWrites, NewTask};
use board_sqlite::{OpenError, Options, SqliteStore, Synchronous, APPLICATION_ID, SCHEMA_VERSION};
use rusqlite::Connection;

fn refused_unchanged(path: &Path) -> OpenError {
    let before = std::fs::read(path).unwrap();
    let err = match SqliteStore::open(path, &Options::default()) {
        Ok(_) => panic!("{} was opened", path.display()),
        Err(e) => e,
    };
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "{} was modified",
        path.display()
    );
    let message = err.to_string();
    assert!(!message.contains('\n'), "one line: {message}");
    assert!(
        message.contains(&path.display().to_string()),
        "names the file: {message}"
    );
    err
}

#[test]
fn a_file_that_is_not_sqlite_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("short.db", b"hello".to_vec()),
        ("text.db", "not a database\n".repeat(100).into_bytes()),
        ("zeros.db", vec![0u8; 4096]),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &content).unwrap();
        let err = refused_unchanged(&path);
        assert!(matches!(err, OpenError::NotSqlite { .. }), "{name}: {err}");
        assert!(err.to_string().contains("not an SQLite database"));
    }
}

#[test]
fn an_sqlite_file_of_another_application_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stamped = dir.path().join("stamped.db");
    let conn = Connection::open(&stamped).unwrap();
    conn.execute_batch(
        "PRAGMA application_id = 1234; CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep me');",
    )
    .unwrap();
    drop(conn);
    let err = refused_unchanged(&stamped);
    assert!(matches!(err, OpenError::Foreign { found: 1234, .. }), "{err}");

    let unstamped = dir.path().join("unstamped.db");
    let conn = Connection::open(&unstamped).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE tasks (id TEXT);")
        .unwrap();
    drop(conn);
    let err = refused_unchanged(&unstamped);
    assert!(matches!(err, OpenError::Foreign { found: 0, .. }), "{err}");
    assert!(err.to_string().contains("another application"));
}

#[test]
fn a_board_with_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    store.create(&NewTask::titled("from the future"), 1).unwrap();
    drop(store);
    let conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let err = refused_unchanged(&path);
    assert!(matches!(err, OpenError::Newer { .. }), "{err}");
    assert!(err.to_string().contains("newer than this binary"), "{err}");
}

#[test]
fn a_new_board_is_stamped_private_and_configured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    let s = store.settings().unwrap();
    assert_eq!(s.journal_mode, "wal");
    assert_eq!(s.synchronous, "full");
    assert_eq!(s.busy_timeout_ms, 30_000);
    assert!(s.foreign_keys);
    assert_eq!(s.application_id, APPLICATION_ID);
    assert_eq!(s.user_version, SCHEMA_VERSION);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "owner-only");
    }
    drop(store);

    let options = Options {
        synchronous: Synchronous::Normal,
        busy_timeout: Duration::from_millis(1500),
    };
    let reopened = SqliteStore::open(&path, &options).unwrap();
    let s = reopened.settings().unwrap();
    assert_eq!((s.synchronous.as_str(), s.busy_timeout_ms), ("normal", 1500));
    assert_eq!("NORMAL".parse::<Synchronous>(), Ok(Synchronous::Normal));
    assert!("sometimes".parse::<Synchronous>().is_err());
}

#[test]
fn an_empty_file_becomes_a_board_and_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    assert_eq!(store.settings().unwrap().application_id, APPLICATION_ID);
    let err = SqliteStore::open(dir.path(), &Options::default())
        .err()
        .expect("a directory is no board");
    assert!(err.to_string().contains("directory"), "{err}");
}

#[test]
fn the_file_itself_refuses_a_running_task_without_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    let t = store.create(&NewTask::titled("guarded by CHECK"), 1).unwrap();
    let conn = Connection::open(&path).unwrap();
    let err = conn
        .execute(
            "UPDATE tasks SET status = 'running' WHERE id = ?1",
            [t.id.as_str()],
        )
        .unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
}

#[test]
fn opening_a_current_board_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    store.create(&NewTask::titled("settled"), 1).unwrap();
    drop(store);
    let before = std::fs::read(&path).unwrap();
    let again = SqliteStore::open(&path, &Options::default()).unwrap();
    assert_eq!(again.list(&Default::default()).unwrap().len(), 1);
    drop(again);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn read_only_opening_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let missing = SqliteStore::open_read_only(&path).err().expect("nothing to read");
    assert!(missing.to_string().contains("no board here"), "{missing}");
    assert!(!path.exists());
    let store = SqliteStore::open(&path, &Options::default()).unwrap();
    let t = store.create(&NewTask::titled("readable"), 1).unwrap();
    let reader = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(reader.get(&t.id).unwrap().title, "readable");
    assert!(reader.create(&NewTask::titled("nope"), 2).is_err());
}

/// POSIX record locks belong to the process: opening and dropping a second store on the
/// board in this process must leave the first store's locks in place. Otherwise another
/// process, closing, takes itself for the last user of the board and removes the WAL the
/// first store still writes to, and that store's next commits are lost.
#[test]
fn a_second_store_in_one_process_keeps_the_first_ones_locks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    let first = SqliteStore::open(&path, &Options::default()).unwrap();
    first.create(&NewTask::titled("one"), 1_000).unwrap();
    drop(SqliteStore::open_read_only(&path).unwrap());
    drop(SqliteStore::open(&path, &Options::default()).unwrap());
    let other = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg("SELECT count(*) FROM tasks")
        .output()
        .expect("run sqlite3 (the Debian package sqlite3)");
    assert!(
        other.status.success(),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&other.stdout).trim(), "1");
    assert!(
        path.with_extension("db-wal").exists(),
        "another process removed the WAL of a board this process holds open"
    );
    first.create(&NewTask::titled("two"), 2_000).unwrap();
    drop(first);
    let again = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(
        again.list(&Default::default()).unwrap().len(),
        2,
        "a commit was lost"
    );
}
