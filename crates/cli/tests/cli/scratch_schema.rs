//! What the PostgreSQL suites share: the server (`KANBAN_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`), a fresh schema name per board, the URL
//! that puts a board in it, and the end of a test's board: its workers killed, its
//! schema dropped.

use board_core::Store;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn server_url() -> String {
    std::env::var("KANBAN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// `PREFIX_PID_RANDOM`: no two tests (or runs) share a schema.
pub fn unique_schema(prefix: &str) -> String {
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).unwrap();
    format!(
        "{prefix}_{}_{:08x}",
        std::process::id(),
        u32::from_le_bytes(random)
    )
}

/// A board in a fresh schema named after `prefix`, and the schema; fails, naming the
/// server, when it cannot be reached.
pub fn open_board(prefix: &str) -> (board_postgres::PgStore, String) {
    open_board_at(&server_url(), prefix)
}

/// [`open_board`] on the server at `base`.
pub fn open_board_at(base: &str, prefix: &str) -> (board_postgres::PgStore, String) {
    let schema = unique_schema(prefix);
    let options = board_postgres::Options {
        schema: Some(schema.clone()),
        ..board_postgres::Options::default()
    };
    let store = board_postgres::PgStore::open(base, &options).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is unreachable at {} ({e}); start it or set KANBAN_TEST_DATABASE_URL",
            board_postgres::redact_url(base)
        )
    });
    (store, schema)
}

/// `base` with `schema` as its `search_path`.
pub fn in_schema(base: &str, schema: &str) -> String {
    let joiner = if base.contains('?') { '&' } else { '?' };
    format!("{base}{joiner}options=-csearch_path%3D{schema}")
}

/// Kills the worker groups `store`'s runs recorded, then drops `schema`.
pub fn tear_down(store: &dyn Store, schema: &str) {
    if let Ok(snapshot) = store.snapshot() {
        for pid in snapshot
            .runs
            .iter()
            .filter_map(|r| r.worker_pid)
            .filter(|p| *p > 1)
        {
            // SAFETY: signalling worker groups the test's gateways started.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    }
    drop_schema(schema);
}

/// Drops `schema`, whatever is left in it.
pub fn drop_schema(schema: &str) {
    if let Ok(mut admin) = postgres::Client::connect(&server_url(), postgres::NoTls) {
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}

/// Ends every session named `application_name` on the server; returns how many.
pub fn terminate_sessions(application_name: &str) -> i64 {
    let mut admin = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&application_name],
        )
        .unwrap()
        .get(0)
}
