//! A small connection pool.
//!
//! A store needs a handful of connections, each used by one call at a time: check one
//! out, run one transaction, give it back. That is a vector behind a mutex with a cap
//! and a condition variable; r2d2 would add a scheduler thread pool and a reaper thread
//! per pool for features a board does not use. Connections open lazily, up to the cap;
//! one that the server closed is dropped when it comes back, and the next checkout
//! opens a fresh one.
//!
//! A lost session closes the idle ones too (a restarted or unreachable server lost them
//! all), and for a moment after a connection attempt fails, checkouts fail at once with
//! its error: a tick's reads during an outage cost one connection timeout, not one
//! each.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls, Statement};

use crate::session::Session;

/// How long after a failed connection attempt checkouts fail at once with its error.
const FAILED_CONNECT_HOLDS: Duration = Duration::from_secs(1);

/// One connection and the statements prepared on it, keyed by their SQL.
pub(crate) struct Conn {
    pub client: Session,
    pub statements: HashMap<&'static str, Statement>,
    /// Set when the connection is in an unknown state: it is closed, not returned.
    pub broken: bool,
}

pub(crate) struct Pool {
    config: tokio_postgres::Config,
    /// Runs on every new connection (the `search_path` of the board's schema).
    setup: Option<String>,
    max: usize,
    wait: Duration,
    state: Mutex<State>,
    returned: Condvar,
    /// Set when a session was lost, until a new one opens: one warning per outage,
    /// however many pooled sessions it ended.
    lost: AtomicBool,
}

struct State {
    idle: Vec<Conn>,
    open: usize,
    /// The last failed connection attempt: when, and its error.
    failed: Option<(Instant, String)>,
}

/// A checked-out connection; back in the pool when dropped.
pub(crate) struct Lease<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Pool {
    /// The most connections open at once.
    pub fn max(&self) -> usize {
        self.max
    }

    pub fn new(config: tokio_postgres::Config, setup: Option<String>, max: usize, wait: Duration) -> Pool {
        Pool {
            config,
            setup,
            max: max.max(1),
            wait,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                failed: None,
            }),
            returned: Condvar::new(),
            lost: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a list and a count, each updated in one step: never half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, a new one while under the cap, or the first one returned
    /// within the wait.
    pub fn get(&self) -> Result<Lease<'_>, String> {
        let deadline = Instant::now() + self.wait;
        let mut state = self.state();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(self.lease(conn));
            }
            if let Some((at, error)) = &state.failed {
                if at.elapsed() < FAILED_CONNECT_HOLDS {
                    return Err(error.clone());
                }
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                let connected = self.connect();
                let mut state = self.state();
                return match connected {
                    Ok(conn) => {
                        state.failed = None;
                        Ok(self.lease(conn))
                    }
                    Err(e) => {
                        state.open -= 1;
                        state.failed = Some((Instant::now(), e.clone()));
                        drop(state);
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "all {} connections stayed busy for {:?}",
                    self.max, self.wait
                ));
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn lease(&self, conn: Conn) -> Lease<'_> {
        Lease {
            pool: self,
            conn: Some(conn),
        }
    }

    /// An empty pool that opens its sessions as this one does (the wake-up listener's).
    pub fn twin(&self) -> Pool {
        Pool::new(self.config.clone(), self.setup.clone(), 1, self.wait)
    }

    /// A session of its own, not counted nor returned: the caller keeps it.
    pub fn connect_apart(&self) -> Result<Client, String> {
        let config = postgres::Config::from(self.config.clone());
        let mut client = config.connect(NoTls).map_err(|e| crate::describe(&e))?;
        if let Some(setup) = &self.setup {
            client.batch_execute(setup).map_err(|e| crate::describe(&e))?;
        }
        Ok(client)
    }

    fn connect(&self) -> Result<Conn, String> {
        let mut client = Session::connect(&self.config)?;
        self.lost.store(false, Ordering::Relaxed);
        if let Some(setup) = &self.setup {
            client.batch_execute(setup).map_err(|e| crate::describe(&e))?;
        }
        Ok(Conn {
            client,
            statements: HashMap::new(),
            broken: false,
        })
    }
}

impl Deref for Lease<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a lease holds its connection until dropped")
    }
}

impl DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let mut state = self.pool.state();
        let mut lost = Vec::new();
        if conn.broken || conn.client.is_closed() {
            // The server that lost this session lost the idle ones too.
            lost = std::mem::take(&mut state.idle);
            state.open -= 1 + lost.len();
            if !self.pool.lost.swap(true, Ordering::Relaxed) {
                tracing::warn!("a database session was lost; the next call opens a new one");
            }
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.pool.returned.notify_all();
        drop(lost);
    }
}
