//! Wake-ups (docs/gateway.md#wake-ups): a write that may give a dispatcher work at once
//! notifies the board's channel in its own transaction (`Tx::commit`), and each gateway
//! listens on a session of its own.
//!
//! The listener runs on a thread: it waits for notifications, coalesces those that
//! arrived together into one call of `on_wake`, and on a lost session reconnects after a
//! pause that doubles up to [`MAX_PAUSE`]. While it is not listening the gateway's tick
//! still sweeps the board, so nothing waits longer than it did without wake-ups; after
//! every (re)connection it wakes the gateway once for what it may have missed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;

use crate::pool::Pool;
use crate::PgStore;

/// How often a waiting listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);
/// The first pause before reconnecting, and the longest.
const MIN_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// What a listener calls on a wake-up; it must return at once.
pub type OnWake = Arc<dyn Fn() + Send + Sync>;

/// The channel of the board whose schema hashes to `schema_key`. Notifications are
/// per database, so boards in other schemas of it do not wake each other.
pub(crate) fn channel(schema_key: i32) -> String {
    format!("kanban_wake_{:08x}", schema_key as u32)
}

/// A running listener; stopped (and its thread joined) when dropped.
pub struct WakeListener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for WakeListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl PgStore {
    /// Listens for the board's wake-ups on a session of its own, calling `on_wake` for
    /// each burst of them (and once after every connection), until dropped.
    pub fn listen(&self, on_wake: OnWake) -> std::io::Result<WakeListener> {
        let stop = Arc::new(AtomicBool::new(false));
        let listener = Listener {
            pool: self.pool.twin(),
            channel: self.wake_channel.clone(),
            target: self.target.clone(),
            stop: stop.clone(),
            on_wake,
        };
        let thread = std::thread::Builder::new()
            .name("wake-listener".into())
            .spawn(move || listener.run())?;
        Ok(WakeListener {
            stop,
            thread: Some(thread),
        })
    }
}

struct Listener {
    pool: Pool,
    channel: String,
    target: String,
    stop: Arc<AtomicBool>,
    on_wake: OnWake,
}

impl Listener {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(self) {
        let mut pause = MIN_PAUSE;
        let mut outage = false;
        while !self.stopped() {
            let failure = match self.connect() {
                Ok(mut client) => {
                    if outage {
                        tracing::info!(board = %self.target, "listening for wake-ups again");
                    }
                    outage = false;
                    pause = MIN_PAUSE;
                    (self.on_wake)();
                    match self.serve(&mut client) {
                        Ok(()) => return,
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            };
            if !outage {
                tracing::warn!(board = %self.target, error = %failure, "not listening for wake-ups; ticks go on, reconnecting");
                outage = true;
            }
            self.sleep(pause);
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    fn connect(&self) -> Result<Client, String> {
        let mut client = self.pool.connect_apart()?;
        let listen = format!("LISTEN \"{}\"", self.channel);
        client.batch_execute(&listen).map_err(|e| crate::describe(&e))?;
        Ok(client)
    }

    /// Waits for notifications until stopped (`Ok`) or the session is lost (`Err`).
    fn serve(&self, client: &mut Client) -> Result<(), String> {
        while !self.stopped() {
            let next = client.notifications().timeout_iter(POLL).next();
            match next {
                Ok(Some(_)) => {
                    // Those already here count as the same wake-up.
                    while let Ok(Some(_)) = client.notifications().iter().next() {}
                    (self.on_wake)();
                }
                Ok(None) if client.is_closed() => return Err("the session ended".into()),
                Ok(None) => {}
                Err(e) => return Err(crate::describe(&e)),
            }
        }
        Ok(())
    }

    /// Sleeps for `pause`, or until stopped.
    fn sleep(&self, pause: Duration) {
        let until = Instant::now() + pause;
        while !self.stopped() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(POLL));
        }
    }
}
