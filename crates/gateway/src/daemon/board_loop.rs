//! One board's loop in the gateway: its store, dispatcher, decompositions, notifier and
//! wake-ups, and a tick every `kanban.dispatch_interval_seconds` (missed ticks skipped),
//! at a scheduled task's time, or at a wake-up; `gateway.json` in the board's directory
//! after every tick. It ends when the gateway stops or the board is removed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Instant as TickStart;

use board_core::{Store, Timestamp};
use board_home::{now, Config, Home};
use tokio::sync::watch;

use super::{background, io, write_status, Control, GatewayError, Status};
use crate::dispatcher::Dispatcher;
use crate::metrics::{self, Monitor};
use crate::planner::DispatchSettings;
use crate::reload;
use crate::supervisor::OsProcesses;

/// Opens the board of `home` (unless its store is given), starts what serves it and its
/// tick loop. On failure, hands back the metrics address it did not use.
pub(super) async fn start(
    runtime: &tokio::runtime::Runtime,
    home: Home,
    store: Option<Arc<dyn Store>>,
    metrics_bind: Option<SocketAddr>,
    control: watch::Receiver<Control>,
) -> Result<tokio::task::JoinHandle<()>, (GatewayError, Option<SocketAddr>)> {
    let wake = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(tokio::sync::Notify::new());
    let (config, store, listening) = match open(&home, store, &wake).await {
        Ok(opened) => opened,
        Err(e) => return Err((e, metrics_bind)),
    };
    let started_at = now();
    let pool = background(runtime.handle(), &store, (&config, &home)).map_err(|e| (e, metrics_bind))?;
    let monitor = Monitor::new(store.clone(), config.kanban.dispatch_interval());
    if let Some(bind) = metrics_bind {
        let token = std::env::var(metrics::TOKEN_ENV).ok();
        match metrics::serve(bind, token, monitor.clone()).await {
            Ok(local) => {
                tracing::info!(address = %local, board = %home.board(), "serving /healthz and /metrics")
            }
            Err(e) => {
                let e = io("cannot serve the metrics")(std::io::Error::other(e.to_string()));
                return Err((e, metrics_bind));
            }
        }
    }
    let notify = crate::notifier::NotifySettings {
        timeout: Duration::from_secs(config.gateway.notify_timeout_seconds),
    };
    let notifier = crate::notifier::start(runtime, store.clone(), notify);
    // A worker that ended its run through its channel wakes the tick once it is gone.
    let on_finished = {
        let finished = finished.clone();
        Arc::new(move || finished.notify_one())
    };
    let processes = OsProcesses::new(home.clone(), store.clone()).on_finished(on_finished);
    let mut dispatcher =
        Dispatcher::with_processes(store, Box::new(processes), pool).on_host(&config.gateway.host_id());
    let dispatcher = tokio::task::spawn_blocking(move || {
        dispatcher.adopt(started_at);
        dispatcher
    })
    .await
    .map_err(|e| {
        (
            io("cannot adopt the workers")(std::io::Error::other(e.to_string())),
            None,
        )
    })?;
    tracing::info!(home = %home.dir().display(), board = %home.board(), store = %home.board_name(&config), host = dispatcher.host(), pid = std::process::id(), interval = config.kanban.dispatch_interval_seconds, "serving the board");
    let ticking = Ticking {
        home,
        config,
        monitor,
        started_at,
        wake,
        finished,
        wakeups: 0,
        next_due: None,
        control,
    };
    Ok(tokio::spawn(async move {
        let _listening = listening;
        ticking.run(dispatcher).await;
        if let Some(notifier) = notifier {
            notifier.abort();
        }
    }))
}

/// The board's config, its store (opened unless given) and its wake-ups' listener, off
/// the async threads: an open may wait on a lock or a server, and PostgreSQL's client
/// blocks.
async fn open(
    home: &Home,
    store: Option<Arc<dyn Store>>,
    wake: &Arc<tokio::sync::Notify>,
) -> Result<(Config, Arc<dyn Store>, Option<board_home::Listening>), GatewayError> {
    let (home, wake) = (home.clone(), wake.clone());
    let opened = tokio::task::spawn_blocking(move || -> Result<_, GatewayError> {
        let config = home.load_config()?.config;
        let store = match store {
            Some(store) => store,
            None => home.open_store(&config)?,
        };
        let listening = listen(&home, &config, &wake);
        Ok((config, store, listening))
    })
    .await;
    opened.map_err(|e| io("cannot open the board")(std::io::Error::other(e.to_string())))?
}

/// Starts hearing the board's wake-ups (docs/gateway.md#wake-ups); each one stores a
/// permit in `wake`, so those that arrive during a tick make one more tick, not many.
/// Without a listener the ticks carry on alone.
fn listen(home: &Home, config: &Config, wake: &Arc<tokio::sync::Notify>) -> Option<board_home::Listening> {
    let notify = wake.clone();
    match home.listen(config, Arc::new(move || notify.notify_one())) {
        Ok(listening) => Some(listening),
        Err(e) => {
            tracing::warn!(board = %home.board(), error = %e, "not listening for wake-ups; only the ticks dispatch");
            None
        }
    }
}

/// The least time from a tick's start to the next one a worker's end starts: a stream of
/// finished workers makes one tick at once and then at most one per gap, each freeing
/// every slot that has come free since, on top of the periodic ticks. The gap bounds
/// how fast slots are filled again: `max_spawn` workers per gap at most (8 per 20 ms
/// would be 400 a second, below what two cores run of one-shot workers).
pub const WAKE_GAP: Duration = Duration::from_millis(10);

/// The least time from a tick's start to the next one the board's wake-up starts (new
/// work: a task made, promoted, unblocked): short, since someone waits for its worker,
/// but a burst of writes still makes at most one tick per gap.
pub const NEW_WORK_GAP: Duration = Duration::from_millis(5);

/// What the tick loop keeps beside the dispatcher.
struct Ticking {
    home: Home,
    config: Config,
    monitor: Arc<Monitor>,
    started_at: Timestamp,
    /// Holds a permit when the board's wake-up arrived since the last tick began.
    wake: Arc<tokio::sync::Notify>,
    /// Holds a permit when one of this gateway's workers ended its run since then.
    finished: Arc<tokio::sync::Notify>,
    /// Ticks a wake-up started.
    wakeups: u64,
    /// The earliest time a scheduled task waits for, as the last tick read it: the loop
    /// ticks then too, so the task is resumed on time, not at the next periodic tick.
    next_due: Option<Timestamp>,
    /// The gateway's reloads and stop.
    control: watch::Receiver<Control>,
}

/// What is left of `gap` since the tick that began at `last_tick`: the wait before a
/// tick a wake-up starts.
fn rest(last_tick: TickStart, gap: Duration) -> tokio::time::Sleep {
    tokio::time::sleep_until(last_tick + gap)
}

/// The rest before a tick a worker's end starts: [`WAKE_GAP`] since the last tick began,
/// cut to [`NEW_WORK_GAP`] when the board's wake-up for new work arrives meanwhile.
async fn after_finished(wake: &tokio::sync::Notify, last_tick: TickStart) {
    tokio::select! {
        _ = rest(last_tick, WAKE_GAP) => {}
        _ = wake.notified() => rest(last_tick, NEW_WORK_GAP).await,
    }
}

fn every(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    interval
}

impl Ticking {
    async fn run(mut self, mut dispatcher: Dispatcher) {
        let mut interval = every(self.config.kanban.dispatch_interval());
        let mut last_tick = TickStart::now();
        let mut reloads = self.control.borrow().reloads;
        loop {
            let due_in = self
                .next_due
                .map(|at| Duration::from_secs(u64::try_from(at.saturating_sub(now())).unwrap_or(0)));
            tokio::select! {
                _ = interval.tick() => {}
                _ = tokio::time::sleep(due_in.unwrap_or_default()), if due_in.is_some() => {}
                _ = self.wake.notified() => {
                    self.wakeups += 1;
                    rest(last_tick, NEW_WORK_GAP).await;
                }
                _ = self.finished.notified() => {
                    self.wakeups += 1;
                    after_finished(&self.wake, last_tick).await;
                }
                changed = self.control.changed() => {
                    let control = *self.control.borrow();
                    if changed.is_err() || control.stop {
                        break;
                    }
                    if control.reloads != reloads {
                        reloads = control.reloads;
                        let before = self.config.kanban.dispatch_interval();
                        if reload::reload(&self.home, &mut self.config, &mut dispatcher) {
                            let period = self.config.kanban.dispatch_interval();
                            self.monitor.set_interval(period);
                            if period != before {
                                interval = every(period);
                                interval.reset();
                            }
                        }
                    }
                    continue;
                }
            }
            if !self.home.board_exists() {
                tracing::warn!(board = %self.home.board(), "the board was removed; its loop stops");
                break;
            }
            last_tick = TickStart::now();
            dispatcher = match self.tick(dispatcher).await {
                Some(dispatcher) => dispatcher,
                None => return,
            };
        }
        let board = self.home.board().clone();
        let _ = tokio::task::spawn_blocking(move || dispatcher.shutdown()).await;
        tracing::info!(board = %board, "stopped serving the board");
    }

    /// One tick on the blocking pool (the store is synchronous), then `gateway.json`.
    async fn tick(&mut self, mut dispatcher: Dispatcher) -> Option<Dispatcher> {
        let settings = DispatchSettings::from_config(&self.config);
        let joined = tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            // A panic in a tick is a bug, but it must not take the gateway down: the
            // next tick runs with the same dispatcher.
            let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let report = dispatcher.tick(&settings, now());
                let cost_safety = dispatcher.cost_safety(&settings, now());
                (report, cost_safety)
            }));
            let next_due = dispatcher.next_scheduled(now());
            (dispatcher, report, start.elapsed(), next_due)
        })
        .await;
        match joined {
            Ok((d, Ok((report, cost_safety)), took, next_due)) => {
                self.next_due = next_due;
                self.monitor.tick(&report, took, d.workers().count());
                let status = Status {
                    started_at: self.started_at,
                    wakeups: self.wakeups,
                    cost_safety,
                };
                write_status(&self.home, &status, &d, &report);
                Some(d)
            }
            Ok((d, Err(_), _, next_due)) => {
                self.next_due = next_due;
                tracing::error!(board = %self.home.board(), "a tick panicked; the next tick runs");
                Some(d)
            }
            Err(e) => {
                tracing::error!(board = %self.home.board(), error = %e, "a tick was lost; the board's loop stops");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long after the last tick's start a tick for a worker's end begins, with the
    /// board's wake-up for new work arriving `new_work` after it (or never).
    async fn tick_after(new_work: Option<Duration>) -> Duration {
        let (wake, last_tick) = (Arc::new(tokio::sync::Notify::new()), TickStart::now());
        if let Some(after) = new_work {
            let wake = wake.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                wake.notify_one();
            });
        }
        after_finished(&wake, last_tick).await;
        last_tick.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn new_work_cuts_short_the_rest_a_finished_worker_waits_out() {
        let ms = Duration::from_millis;
        assert_eq!(tick_after(None).await, WAKE_GAP);
        assert_eq!(tick_after(Some(ms(2))).await, NEW_WORK_GAP);
        assert_eq!(tick_after(Some(ms(7))).await, ms(7));
        assert_eq!(tick_after(Some(ms(30))).await, WAKE_GAP);
    }
}
