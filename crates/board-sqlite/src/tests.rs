//! The opening of a board file: what is ours, what is not, and what a held board costs.

use super::*;
use crate::identity::stamped_header;

#[test]
fn a_held_board_is_checked_through_its_own_connection_and_a_newer_one_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kanban.db");
    drop(SqliteStore::open(&path, &Options::default()).unwrap());
    let holder = SqliteStore::open(&path, &Options::default()).unwrap();
    board_core::BoardWrites::create(&holder, &board_core::NewTask::titled("held"), 1).unwrap();
    let held = SqliteStore::open_held(&path, &Options::default()).unwrap();
    let held = held.expect("a held board of ours opens without a second connection");
    let tasks = board_core::BoardReads::list(&held, &board_core::TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 1);
    drop(held);
    // Not ours by its header: the long way, which refuses it.
    let foreign = dir.path().join("other.db");
    let conn = Connection::open(&foreign).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA application_id = 5; CREATE TABLE t (x);")
        .unwrap();
    assert!(SqliteStore::open_held(&foreign, &Options::default())
        .unwrap()
        .is_none());
    assert!(matches!(
        SqliteStore::open(&foreign, &Options::default()),
        Err(OpenError::Foreign { found: 5, .. })
    ));
    drop(conn);
    // A newer kanban's migration still only in the WAL (the file's header says the
    // current version): the board is newer, and it is refused at once, without
    // waiting for the write lock another writer holds.
    let conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let patient = Options {
        busy_timeout: Duration::from_secs(60),
        ..Options::default()
    };
    match SqliteStore::open(&path, &patient) {
        Err(OpenError::Newer { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a newer board was opened"),
    }
}

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

#[test]
fn a_whole_listing_leaves_the_connection_the_writes_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("kanban.db"), &Options::default()).unwrap();
    let cache = |store: &SqliteStore| {
        store
            .lock_conn()
            .pragma_query_value(None, "cache_size", |r| r.get::<_, i64>(0))
            .unwrap()
    };
    assert_eq!(cache(&store), -CACHE_KIB);
    assert_ne!(CACHE_KIB, LISTING_CACHE_KIB);
    board_core::BoardWrites::create(&store, &board_core::NewTask::titled("listed"), 1).unwrap();
    let listed = board_core::BoardReads::list(&store, &board_core::TaskFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(cache(&store), -CACHE_KIB, "the listing's cache stayed on");
}
