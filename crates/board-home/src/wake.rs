//! Wake-ups (docs/gateway.md#wake-ups): how a write that may give the dispatcher work
//! reaches a running gateway before its next tick.
//!
//! On PostgreSQL the store notifies the board's channel in the write's own transaction
//! and the gateway listens on a session of its own (`board_postgres::WakeListener`). On
//! SQLite every process that writes (the CLI, the web board, the gateway itself) sends an
//! empty datagram to `gateway.wake`, a socket the running gateway binds in the home:
//! nobody listening (no gateway) costs one failed `sendto`, and a full queue means a
//! wake-up is already pending. The datagram carries nothing; the gateway reads the board.
//!
//! A process that waits for work without being the gateway (a lane's `kanban claim
//! --wait`, `kanban serve` answering waiting lanes) binds a socket of its own under
//! `waiters/`, and the writers nudge each socket there too; a socket nobody listens on
//! any more (its process died) is removed by the first writer that finds it so.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use board_postgres::{PgStore, WakeListener};
use board_sqlite::OnWake;

use crate::config::Config;
use crate::home::{Home, HomeError};

/// How often the socket listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);

/// The nudge a SQLite board's writers send after a waking commit: one datagram to the
/// gateway's socket in `home`, never waiting.
pub(crate) fn nudger(home: &Home) -> OnWake {
    let path = home.wake_socket();
    let waiters = home.waiters();
    let socket = UnixDatagram::unbound().and_then(|s| s.set_nonblocking(true).map(|()| s));
    Arc::new(move || {
        if let Ok(socket) = &socket {
            let _ = socket.send_to(&[], &path);
            nudge_waiters(socket, &waiters);
        }
    })
}

/// One datagram to each waiter's socket; a socket no process listens on is removed.
fn nudge_waiters(socket: &UnixDatagram, waiters: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(waiters) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if let Err(e) = socket.send_to(&[], &path) {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// A running wake-up listener; stopped when dropped.
pub struct Listening {
    _postgres: Option<WakeListener>,
    _socket: Option<SocketListener>,
}

impl Home {
    /// Listens for the board's wake-ups, calling `on_wake` (which must return at once)
    /// for each: the board's channel on PostgreSQL, else the home's `gateway.wake`
    /// socket. Only the holder of the gateway lock may listen: a socket left by an
    /// earlier gateway is replaced.
    pub fn listen(&self, config: &Config, on_wake: OnWake) -> Result<Listening, HomeError> {
        self.hear(config, on_wake, None)
    }

    /// Listens for the board's wake-ups as a waiter, not the gateway: the board's
    /// channel on PostgreSQL, else a socket of this process's own under `waiters/`.
    pub fn watch(&self, config: &Config, on_wake: OnWake) -> Result<Listening, HomeError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = self.waiters().join(format!("{}-{n}.sock", std::process::id()));
        self.hear(config, on_wake, Some(path))
    }

    /// The listener: on SQLite the gateway's socket, or a waiter's at `waiter`.
    fn hear(
        &self,
        config: &Config,
        on_wake: OnWake,
        waiter: Option<PathBuf>,
    ) -> Result<Listening, HomeError> {
        let listening = match &config.database_url {
            Some(url) => {
                let options = board_postgres::Options {
                    max_connections: 1,
                    ..self.postgres_options(format!("kanban pid {} wake-ups", std::process::id()))
                };
                let store = PgStore::open(url.expose(), &options)?;
                let listener = store
                    .listen(on_wake)
                    .map_err(|source| self.io("cannot listen", source))?;
                Listening {
                    _postgres: Some(listener),
                    _socket: None,
                }
            }
            None => {
                let path = match waiter {
                    Some(path) => {
                        crate::safety::private_dir(&self.waiters())
                            .map_err(|e| self.io("cannot make the waiters' directory", e))?;
                        path
                    }
                    None => self.wake_socket(),
                };
                Listening {
                    _postgres: None,
                    _socket: Some(SocketListener::bind(self, path, on_wake)?),
                }
            }
        };
        Ok(listening)
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> HomeError {
        HomeError::Io {
            path: self.wake_socket(),
            what,
            source,
        }
    }
}

struct SocketListener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SocketListener {
    fn bind(home: &Home, path: PathBuf, on_wake: OnWake) -> Result<SocketListener, HomeError> {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(home.io("cannot replace the wake-up socket", e)),
        }
        let socket = UnixDatagram::bind(&path).map_err(|e| home.io("cannot bind the wake-up socket", e))?;
        socket
            .set_read_timeout(Some(POLL))
            .map_err(|e| home.io("cannot bind the wake-up socket", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wake-socket".into())
            .spawn(move || {
                let mut buffer = [0u8; 64];
                while !stopped.load(Ordering::Relaxed) {
                    if socket.recv(&mut buffer).is_ok() {
                        on_wake();
                    }
                }
            })
            .map_err(|e| home.io("cannot start the wake-up listener", e))?;
        Ok(SocketListener {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
