//! A fresh schema per test on the server of `KANBAN_TEST_DATABASE_URL`, dropped when the
//! test ends, passed or failed.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use board_core::conformance::Backend;
use board_core::Store;
use board_postgres::{redact_url, Options, PgStore};
use postgres::{Client, NoTls};

pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server the tests use.
pub fn url() -> String {
    std::env::var("KANBAN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A direct connection for setting up and inspecting schemas; an unreachable server
/// fails the test with one line naming the URL.
pub fn admin() -> Client {
    let url = url();
    match Client::connect(&url, NoTls) {
        Ok(client) => client,
        Err(e) => {
            let cause = std::error::Error::source(&e).map_or_else(String::new, |c| format!(": {c}"));
            panic!(
                "PostgreSQL is unreachable at {} ({e}{cause}); start it or set KANBAN_TEST_DATABASE_URL",
                redact_url(&url)
            )
        }
    }
}

/// A schema that exists for the life of the value.
pub struct TestSchema {
    pub name: String,
    admin: Mutex<Client>,
}

impl TestSchema {
    /// A new empty schema.
    pub fn new() -> TestSchema {
        let schema = TestSchema::unique_name();
        let mut admin = admin();
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .expect("create test schema");
        TestSchema {
            name: schema,
            admin: Mutex::new(admin),
        }
    }

    fn unique_name() -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).expect("randomness");
        format!(
            "kanban_test_{}_{}_{:08x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            u32::from_le_bytes(random)
        )
    }

    fn admin(&self) -> MutexGuard<'_, Client> {
        self.admin.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn options(&self) -> Options {
        Options {
            schema: Some(self.name.clone()),
            ..Options::default()
        }
    }

    pub fn open(&self) -> PgStore {
        PgStore::open(&url(), &self.options()).unwrap_or_else(|e| panic!("open board: {e}"))
    }

    /// Runs SQL in the schema.
    pub fn execute(&self, sql: &str) {
        let sql = format!("SET search_path TO {}; {sql}; RESET search_path", self.name);
        self.admin()
            .batch_execute(&sql)
            .expect("run SQL in the test schema");
    }

    /// Every row of every table of the schema as text, tables in name order.
    pub fn dump(&self) -> Vec<(String, Vec<String>)> {
        let mut admin = self.admin();
        let tables: Vec<String> = admin
            .query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1
                 ORDER BY table_name",
                &[&self.name],
            )
            .expect("list tables")
            .iter()
            .map(|r| r.get(0))
            .collect();
        tables
            .into_iter()
            .map(|table| {
                let sql = format!("SELECT t::text FROM {}.{table} t ORDER BY 1", self.name);
                let rows = admin.query(&sql, &[]).expect("read table");
                (table, rows.iter().map(|r| r.get(0)).collect())
            })
            .collect()
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let dropped = self
            .admin()
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        if let Err(e) = dropped {
            eprintln!("could not drop test schema {}: {e}", self.name);
        }
    }
}

/// A conformance board: every `connect` is a separate store (its own connections) on
/// the test's schema.
pub struct PgBoard {
    pub schema: TestSchema,
}

impl Backend for PgBoard {
    fn connect(&self) -> Arc<dyn Store> {
        Arc::new(self.schema.open())
    }
}

pub fn fresh() -> PgBoard {
    PgBoard {
        schema: TestSchema::new(),
    }
}
