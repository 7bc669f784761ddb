//! The PostgreSQL store: the board in one schema of a PostgreSQL database, behind
//! `board_core::Store`, shared by every process that opens the same URL and schema.
//!
//! Opening checks, before writing anything, that the schema is empty or stamped as ours
//! (`kanban_meta`) and not newer than this binary, then migrates it forward in one
//! transaction. Every write is one READ COMMITTED transaction that locks the rows whose
//! facts it reads, asks the core, and applies the answer with its events, guarded by
//! compare-and-set on the claim; see `store.rs` for the locking rules and why they
//! suffice. The password of the URL never appears in an error or in `Debug` output.
//!
//! ```no_run
//! use board_core::{BoardWrites, NewTask};
//! use board_postgres::{Options, PgStore};
//!
//! let options = Options { schema: Some("kanban".into()), ..Options::default() };
//! let board = PgStore::open("postgres://kanban@db.internal:5432/boards", &options)?;
//! board.create(&NewTask::titled("write the release notes"), 1_700_000_000)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod apply;
mod attachments;
mod copy;
mod cost;
mod import;
mod lanes;
mod leases;
mod notify;
mod pool;
mod reads;
mod retention;
mod rows;
mod schema;
mod session;
mod store;
mod templates;
mod tx;
mod url;
mod wake;

use std::fmt;
use std::time::Duration;

use board_core::{StoreError, StoreResult};

use crate::pool::{Lease, Pool};
use crate::session::Session;
use crate::tx::{session_ended, Tx};

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use url::redact_url;
pub use wake::WakeListener;

/// How long the server lets a session of the store sit idle inside a transaction before it
/// ends the session, and the locks it holds with it. The store never waits on anything
/// mid-transaction, so a session idle in one belongs to a client that hung, was paused or
/// was cut off from the server; its locks must not hold every other gateway back.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

/// How long the store's sessions wait on a server that has gone silent: sent data left
/// unacknowledged this long, or an idle session whose keepalive probes go unanswered
/// this long, ends the session with an error (the next call opens a fresh one). Without
/// it a host cut off from the server would wait on the kernel's retransmissions for
/// about fifteen minutes, its ticks and its shutdown stalled, saying nothing.
pub const SERVER_SILENCE: Duration = Duration::from_secs(15);

/// How to open a board.
#[derive(Clone, Debug)]
pub struct Options {
    /// The schema that holds the board, created when absent. `None`: the connection's
    /// current schema, the first existing one of its `search_path` (which a URL can set
    /// with `?options=-csearch_path%3Dboard`; `public` by default).
    pub schema: Option<String>,
    /// The most connections this store opens at once (they open as needed).
    pub max_connections: usize,
    /// How long connecting, or waiting for a free connection, may take.
    pub connect_timeout: Duration,
    /// The `application_name` of the store's sessions, as `pg_stat_activity` shows it.
    pub application_name: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            schema: None,
            max_connections: 4,
            connect_timeout: Duration::from_secs(10),
            application_name: "kanban".to_owned(),
        }
    }
}

/// Why a board could not be opened. Nothing was written to the database.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{target}: not a usable database URL: {message}")]
    Url { target: String, message: String },
    #[error("{target}: cannot connect: {message}")]
    Connect { target: String, message: String },
    #[error("{target}: {found}; refusing to touch it")]
    Foreign { target: String, found: String },
    #[error(
        "{target}: schema version {found} is newer than this binary supports ({supported}); upgrade kanban"
    )]
    Newer {
        target: String,
        found: i64,
        supported: i64,
    },
    #[error("{target}: {message}")]
    Database { target: String, message: String },
}

/// Advisory lock classes (the first key of `pg_advisory_xact_lock(int, int)`; the
/// second is the schema's hash, so boards in one database never wait on each other).
#[derive(Clone, Copy)]
pub(crate) enum LockClass {
    Migrate = 0x4B42_5201,
    Links = 0x4B42_5202,
    Events = 0x4B42_5203,
}

/// The board in one PostgreSQL schema, through a small pool of connections.
pub struct PgStore {
    pool: Pool,
    /// The redacted URL and the schema, for messages.
    target: String,
    schema_key: i32,
    /// The `LISTEN/NOTIFY` channel of the board's wake-ups (see `wake.rs`).
    wake_channel: String,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore").field("target", &self.target).finish()
    }
}

/// Limits how long a session waits on a silent server ([`SERVER_SILENCE`]), unless the
/// URL set its own `tcp_user_timeout`: keepalive probes on an idle session from a third
/// of it, three unanswered probes a third apart, and no sent data unacknowledged for
/// longer.
fn bound_silence(config: &mut tokio_postgres::Config) {
    if config.get_tcp_user_timeout().is_some() {
        return;
    }
    let third = SERVER_SILENCE / 3;
    config
        .tcp_user_timeout(SERVER_SILENCE)
        .keepalives(true)
        .keepalives_idle(third)
        .keepalives_interval(third)
        .keepalives_retries(3);
}

/// A stable 32-bit hash (FNV-1a) of the schema name, for advisory lock keys.
fn schema_key(schema: &str) -> i32 {
    let hash = schema.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash as i32
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PgStore {
    /// Opens the board at `url` (`postgres://user[:password]@host[:port]/database`, or a
    /// libpq `key=value` string), creating the schema of [`Options::schema`] when absent
    /// and migrating the board forward. TLS is not supported.
    pub fn open(url: &str, options: &Options) -> Result<PgStore, OpenError> {
        let mut target = redact_url(url);
        if let Some(schema) = &options.schema {
            target = format!("{target} (schema {schema})");
        }
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e: postgres::Error| OpenError::Url {
                target: target.clone(),
                message: url::scrub(describe(&e), None),
            })?;
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let scrub = |message: String| url::scrub(message, password.as_deref());
        config
            .connect_timeout(options.connect_timeout)
            .application_name(&options.application_name);
        bound_silence(&mut config);
        let mut setup = format!(
            "SET idle_in_transaction_session_timeout = {}",
            IDLE_IN_TRANSACTION.as_millis()
        );
        if let Some(schema) = options.schema.as_deref() {
            setup.push_str(&format!("; SET search_path TO {}", quote_ident(schema)));
        }
        let pool = Pool::new(
            config,
            Some(setup),
            options.max_connections,
            options.connect_timeout,
        );
        let connect = |message| OpenError::Connect {
            target: target.clone(),
            message: scrub(message),
        };
        let database = |e: postgres::Error| OpenError::Database {
            target: target.clone(),
            message: scrub(describe(&e)),
        };
        let mut lease = pool.get().map_err(connect)?;
        if let Some(schema) = &options.schema {
            create_schema(&mut lease.client, schema).map_err(database)?;
        }
        let schema = current_schema(&mut lease.client).map_err(database)?;
        let Some(schema) = schema else {
            return Err(OpenError::Database {
                target,
                message: "no schema to hold the board: none of the search_path exists".into(),
            });
        };
        let key = schema_key(&schema);
        let found = schema::identity(&mut lease.client).map_err(database)?;
        schema::check_identity(&target, &found)?;
        if found.version != SCHEMA_VERSION {
            schema::migrate(&mut lease.client, &target, key).map_err(|e| match e {
                schema::Migration::Refused(refusal) => refusal,
                schema::Migration::Failed(e) => database(e),
            })?;
        }
        drop(lease);
        Ok(PgStore {
            pool,
            target,
            schema_key: key,
            wake_channel: wake::channel(key),
        })
    }

    /// Renames the schema that holds this board to `to` (`kanban boards rm` keeps a
    /// removed board so), in one statement; the store is not to be used after it.
    pub fn rename_schema(&self, to: &str) -> StoreResult<()> {
        let mut lease = self.pool.get().map_err(StoreError::Backend)?;
        let from = current_schema(&mut lease.client)
            .map_err(|e| StoreError::Backend(describe(&e)))?
            .ok_or_else(|| StoreError::Backend("the board has no schema".into()))?;
        lease
            .client
            .batch_execute(&format!(
                "ALTER SCHEMA {} RENAME TO {}",
                quote_ident(&from),
                quote_ident(to)
            ))
            .map_err(|e| StoreError::Backend(describe(&e)))
    }

    /// The URL (password redacted) and schema this store writes to.
    pub fn target(&self) -> &str {
        &self.target
    }

    fn lease(&self) -> StoreResult<Lease<'_>> {
        self.pool
            .get()
            .map_err(|e| StoreError::Backend(format!("{}: {e}", self.target)))
    }

    fn lock_key(&self, class: LockClass) -> (i32, i32) {
        (class as i32, self.schema_key)
    }

    fn named(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Backend(message) => StoreError::Backend(format!("{}: {message}", self.target)),
            refused => refused,
        }
    }

    /// Checks out a connection and runs `begin` on it. A connection that the server
    /// closed while it sat in the pool fails here, before any statement of the
    /// transaction ran: it is dropped and the next one tried, so a restarted server
    /// or a terminated session costs no call an error.
    fn begin(&self, begin: &'static str) -> StoreResult<Lease<'_>> {
        let mut tries = self.pool.max() + 1;
        loop {
            let mut lease = self.lease()?;
            match lease.client.batch_execute(begin) {
                Ok(()) => return Ok(lease),
                Err(e) => {
                    lease.broken = true;
                    tries -= 1;
                    if !(session_ended(&e) || lease.client.is_closed()) || tries == 0 {
                        return Err(self.named(backend(e)));
                    }
                }
            }
        }
    }

    /// Runs `f` in one READ COMMITTED transaction and commits when it succeeds. A
    /// deadlock or a clash of fresh keys rolls the whole attempt back and runs it
    /// again, a bounded number of times.
    fn write<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        const ATTEMPTS: u32 = 8;
        let events_lock = self.lock_key(LockClass::Events);
        let mut attempt = 1;
        // Sessions the server closed while they sat in the pool, found by the first
        // round trip of the transaction (which carries its `BEGIN`, so nothing of it
        // ran): each is dropped and the transaction run on the next.
        let mut dead = 0;
        loop {
            let mut lease = self.lease()?;
            let mut tx = Tx::lazy(&mut lease, "BEGIN");
            let (error, retry) = match f(&mut tx) {
                Ok(out) => match tx.commit(events_lock, &self.wake_channel) {
                    Ok(()) => return Ok(out),
                    Err(failure) => failure,
                },
                Err(_) if tx.dead_on_arrival() && dead < self.pool.max() => {
                    dead += 1;
                    continue;
                }
                Err(e) => {
                    let retry = tx.should_retry();
                    (e, retry)
                }
            };
            if !retry || attempt == ATTEMPTS {
                return Err(self.named(error));
            }
            // A little jitter so that two writers that deadlocked do not meet again.
            let pause = u64::from(attempt) * 2 + u64::from(random_bytes::<1>()?[0] % 4);
            std::thread::sleep(Duration::from_millis(pause));
            attempt += 1;
        }
    }

    /// Runs `f` in one transaction like [`PgStore::write`], or with `dry_run` rolls it
    /// back whole (a retention batch's dry run counts exactly what it would remove).
    fn batch<T>(&self, dry_run: bool, f: impl FnMut(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        if !dry_run {
            return self.write(f);
        }
        let mut f = f;
        let mut lease = self.begin("BEGIN")?;
        let mut tx = Tx::begun(&mut lease);
        // Dropped uncommitted: rolled back.
        f(&mut tx).map_err(|e| self.named(e))
    }

    /// Runs `f`, a single statement, outside any transaction: one statement is its own
    /// consistent view, and BEGIN and COMMIT would double its round trips. A session
    /// the server ended is replaced and the read run again.
    fn read_one<T>(&self, f: impl Fn(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut tries = self.pool.max() + 1;
        loop {
            let mut lease = self.lease()?;
            let mut tx = Tx::single(&mut lease);
            let result = f(&mut tx);
            if result.is_err() && tx.session_ended() && tries > 1 {
                tries -= 1;
                continue;
            }
            return result.map_err(|e| self.named(e));
        }
    }

    /// Runs `f` in one read-only REPEATABLE READ transaction: one consistent view
    /// across its statements. A session the server ended while it sat in the pool is
    /// found by the first round trip, before `f` saw a row, and `f` runs again on the
    /// next one.
    fn read<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut tries = self.pool.max() + 1;
        loop {
            let mut lease = self.lease()?;
            let mut tx = Tx::lazy(&mut lease, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
            let out = match f(&mut tx) {
                Ok(out) => out,
                Err(_) if tx.dead_on_arrival() && tries > 1 => {
                    tries -= 1;
                    continue;
                }
                Err(e) => return Err(self.named(e)),
            };
            tx.commit(self.lock_key(LockClass::Events), &self.wake_channel)
                .map_err(|(e, _)| self.named(e))?;
            return Ok(out);
        }
    }
}

pub(crate) fn backend(e: postgres::Error) -> StoreError {
    StoreError::Backend(describe(&e))
}

/// A driver error in one line: the server's own message and SQLSTATE for a database
/// error (the driver's `Display` says only "db error"), else the error and its causes.
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                let cause_text = cause.to_string();
                if !text.contains(&cause_text) {
                    text = format!("{text}: {cause_text}");
                }
                source = cause.source();
            }
            text
        }
    }
}

/// Random bytes from the operating system, for task ids and claim locks.
pub(crate) fn random_bytes<const N: usize>() -> StoreResult<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Backend(format!("no randomness: {e}")))?;
    Ok(bytes)
}

fn create_schema(client: &mut Session, schema: &str) -> Result<(), postgres::Error> {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )?
        .get(0);
    if !exists {
        client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)))?;
    }
    Ok(())
}

fn current_schema(client: &mut Session) -> Result<Option<String>, postgres::Error> {
    Ok(client.query_one("SELECT current_schema()::text", &[])?.get(0))
}
