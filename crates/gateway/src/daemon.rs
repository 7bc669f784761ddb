//! The gateway process (docs/gateway.md): one per home (an exclusive `flock` plus a pid
//! file), a tick every `kanban.dispatch_interval_seconds` with missed ticks skipped, the
//! status file, and a clean stop on SIGINT/SIGTERM. Its callers resolve the home, load
//! the config and open the store (`board_home`) and hand them over.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::{Store, Timestamp};
use board_home::safety::{self, write_private};
use board_home::{now, Config, Home, HomeError, Loaded, STATUS_FILE};
use serde_json::json;

use crate::decompositions::BackgroundDecompositions;
use crate::dispatcher::{Decompositions, Dispatcher, NoDecompositions};
use crate::metrics::{self, Monitor};
use crate::planner::{DispatchSettings, TickReport};
use crate::reload;
use crate::supervisor::OsProcesses;

/// Why the gateway could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("another gateway is already running on {home} (pid {pid}); stop it or use --replace")]
    AlreadyRunning { home: PathBuf, pid: String },
    #[error("the gateway on {home} (pid {pid}) did not stop within {seconds} s")]
    DidNotStop {
        home: PathBuf,
        pid: String,
        seconds: u64,
    },
    #[error("no gateway is running on {home}")]
    NotRunning { home: PathBuf },
    #[error("{0}")]
    Home(#[from] HomeError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> GatewayError {
    let what = what.into();
    move |source| GatewayError::Io { what, source }
}

/// The exclusive hold on a home: the locked `gateway.lock` and the `gateway.pid` beside it.
pub struct HomeLock {
    _file: File,
    pid_path: PathBuf,
}

impl Drop for HomeLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_path);
    }
}

pub(crate) fn try_flock(file: &File) -> bool {
    // SAFETY: flock on a descriptor we own; no memory is touched.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Takes the home's gateway lock; with `replace`, stops the holder first.
pub fn lock_home(home: &Home, replace: bool) -> Result<HomeLock, GatewayError> {
    let pid_path = home.pid_file();
    let file = safety::open_lock(&home.lock_file()).map_err(io("cannot take the gateway lock"))?;
    if !try_flock(&file) {
        let pid = safety::open_read(&pid_path)
            .and_then(std::io::read_to_string)
            .unwrap_or_default()
            .trim()
            .to_owned();
        if !replace {
            return Err(GatewayError::AlreadyRunning {
                home: home.dir().to_path_buf(),
                pid,
            });
        }
        if let Ok(p) = pid.parse::<libc::pid_t>() {
            if p > 1 {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(p, libc::SIGTERM) };
            }
        }
        let limit = Duration::from_secs(30);
        let start = Instant::now();
        while !try_flock(&file) {
            if start.elapsed() > limit {
                return Err(GatewayError::DidNotStop {
                    home: home.dir().to_path_buf(),
                    pid,
                    seconds: limit.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    write_private(&pid_path, format!("{}\n", std::process::id()).as_bytes())
        .map_err(io(format!("cannot write {}", pid_path.display())))?;
    Ok(HomeLock {
        _file: file,
        pid_path,
    })
}

/// The daemon's own figures in `gateway.json`.
struct Status {
    started_at: Timestamp,
    wakeups: u64,
    cost_safety: serde_json::Value,
}

/// The running gateway's status, rewritten after every tick.
fn write_status(home: &Home, daemon: &Status, dispatcher: &Dispatcher, last: &TickReport) {
    let status = json!({
        "pid": std::process::id(),
        "started_at": daemon.started_at,
        "last_tick_at": now(),
        "ticks": dispatcher.counters.ticks,
        "wakeups": daemon.wakeups,
        "workers": dispatcher.workers().count(),
        "decompositions_in_flight": last.decompositions_in_flight,
        "counters": dispatcher.counters,
        "last_tick": last,
        "cost_safety": daemon.cost_safety,
    });
    if let Err(e) = write_private(&home.status_file(), format!("{status:#}\n").as_bytes()) {
        tracing::warn!(error = %e, "could not write {STATUS_FILE}");
    }
}

fn background(
    runtime: &tokio::runtime::Runtime,
    store: &Arc<dyn Store>,
    (config, home): (&Config, &Home),
) -> Result<Box<dyn Decompositions>, GatewayError> {
    let settings = config.decomposer_settings_in(home);
    let pool =
        BackgroundDecompositions::new(runtime.handle().clone(), store.clone(), settings).map_err(|e| {
            GatewayError::Io {
                what: "cannot build the model client".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
    Ok(Box::new(pool))
}

/// Workers run as the gateway's user, and a process may read the `/proc` environment
/// and memory of a dumpable process of its own user: the gateway holds the model key, so
/// it makes itself undumpable before reading the key.
fn keep_workers_out() -> Result<(), GatewayError> {
    // SAFETY: prctl(PR_SET_DUMPABLE) changes a flag of this process and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io("cannot make the gateway undumpable")(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// One dispatcher pass without the daemon (`kanban dispatch`): the same tick, then a
/// wait for the decompositions it started, since nothing would be left to finish them.
/// With `dry_run`, says what the pass would do and changes nothing.
pub fn dispatch_once(
    home: &Home,
    store: Arc<dyn Store>,
    config: &Config,
    dry_run: bool,
) -> Result<TickReport, GatewayError> {
    keep_workers_out()?;
    let settings = DispatchSettings::from_config(config);
    if dry_run {
        let mut dispatcher = Dispatcher::new(store, home.clone(), Box::new(NoDecompositions))
            .on_host(&config.gateway.host_id());
        return dispatcher
            .take_hold()
            .and_then(|()| dispatcher.dry_run(&settings, now()))
            .map_err(|e| GatewayError::Io {
                what: "dry run".into(),
                source: std::io::Error::other(e.to_string()),
            });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("cannot start the runtime"))?;
    let pool = background(&runtime, &store, (config, home))?;
    // One pass exits before its workers do, so it serves no report channels.
    let processes = Box::new(OsProcesses::without_channels(home.clone()));
    let mut dispatcher =
        Dispatcher::with_processes(store, processes, pool).on_host(&config.gateway.host_id());
    let started = now();
    dispatcher.adopt(started);
    let mut report = dispatcher.tick(&settings, started);
    finish_stops(&mut dispatcher, &settings, &mut report);
    runtime.block_on(async {
        while !dispatcher.decompositions_idle() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    dispatcher.shutdown();
    Ok(report)
}

/// How long one pass waits for the workers it began to stop: past the grace, SIGKILL and
/// a little more. A worker that outlives it keeps its run open for a later pass.
const STOP_WAIT: Duration = Duration::from_secs(crate::planner::STOP_GRACE_SECONDS as u64 + 3);

/// A pass has no later tick of its own: it watches (spawning and decomposing nothing)
/// until the workers it asked to stop are gone and their runs ended, as the daemon's
/// next ticks would.
fn finish_stops(dispatcher: &mut Dispatcher, settings: &DispatchSettings, report: &mut TickReport) {
    let watch = DispatchSettings {
        max_spawn: 0,
        auto_decompose: false,
        ..settings.clone()
    };
    let start = Instant::now();
    while dispatcher.stopping() && start.elapsed() < STOP_WAIT {
        std::thread::sleep(Duration::from_millis(50));
        report.absorb(dispatcher.tick(&watch, now()));
    }
}

/// Runs the gateway on `home` until SIGINT or SIGTERM, with the board and config its
/// caller opened and loaded there. SIGHUP re-reads the config (`reload`).
pub fn run(home: &Home, store: Arc<dyn Store>, loaded: Loaded, replace: bool) -> Result<(), GatewayError> {
    keep_workers_out()?;
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    let config = loaded.config;
    let _lock = lock_home(home, replace)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io("cannot start the runtime"))?;
    let started_at = now();
    let pool = background(&runtime, &store, (&config, home))?;
    let monitor = Monitor::new(store.clone(), config.kanban.dispatch_interval());
    let notify = crate::notifier::NotifySettings {
        timeout: Duration::from_secs(config.gateway.notify_timeout_seconds),
    };
    crate::notifier::start(&runtime, store.clone(), notify);
    let wake = Arc::new(tokio::sync::Notify::new());
    let finished = {
        let wake = wake.clone();
        Arc::new(move || wake.notify_one())
    };
    // A worker that ended its run through its channel wakes the tick once it is gone.
    let processes = OsProcesses::new(home.clone(), store.clone()).on_finished(finished);
    let mut dispatcher =
        Dispatcher::with_processes(store, Box::new(processes), pool).on_host(&config.gateway.host_id());
    dispatcher.adopt(started_at);
    if let Some(bind) = config.gateway.metrics_bind() {
        let token = std::env::var(metrics::TOKEN_ENV).ok();
        let local = runtime
            .block_on(metrics::serve(bind, token, monitor.clone()))
            .map_err(|e| GatewayError::Io {
                what: "cannot serve the metrics".into(),
                source: std::io::Error::other(e.to_string()),
            })?;
        tracing::info!(address = %local, "serving /healthz and /metrics");
    }
    let _listening = listen(home, &config, &wake);
    tracing::info!(home = %home.dir().display(), board = %home.board_name(&config), host = dispatcher.host(), pid = std::process::id(), interval = config.kanban.dispatch_interval_seconds, "gateway started");
    if crate::supervisor::holds_capabilities() {
        tracing::info!("this gateway holds capabilities (it runs as root): workers of a profile without `user` run as its user with none, no way to regain one (bounding set empty, no_new_privs), and cannot read its environment or memory; set profiles.<name>.user to run them as another user");
    }
    let ticking = Ticking {
        home: home.clone(),
        config,
        monitor,
        started_at,
        wake,
        wakeups: 0,
        next_due: None,
    };
    runtime.block_on(ticking.run(dispatcher))
}

/// Starts hearing the board's wake-ups (docs/gateway.md#wake-ups); each one stores a
/// permit in `wake`, so those that arrive during a tick make one more tick, not many.
/// Without a listener the ticks carry on alone.
fn listen(home: &Home, config: &Config, wake: &Arc<tokio::sync::Notify>) -> Option<board_home::Listening> {
    let notify = wake.clone();
    match home.listen(config, Arc::new(move || notify.notify_one())) {
        Ok(listening) => Some(listening),
        Err(e) => {
            tracing::warn!(error = %e, "not listening for wake-ups; only the ticks dispatch");
            None
        }
    }
}

/// The least time between two ticks a wake-up starts: a burst of writes makes one tick
/// at once and then at most one per gap, on top of the periodic ticks.
pub const WAKE_GAP: Duration = Duration::from_millis(20);

/// What the tick loop keeps beside the dispatcher.
struct Ticking {
    home: Home,
    config: Config,
    monitor: Arc<Monitor>,
    started_at: Timestamp,
    /// Holds a permit when a wake-up arrived since the last tick began.
    wake: Arc<tokio::sync::Notify>,
    /// Ticks a wake-up started.
    wakeups: u64,
    /// The earliest time a scheduled task waits for, as the last tick read it: the loop
    /// ticks then too, so the task is resumed on time, not at the next periodic tick.
    next_due: Option<Timestamp>,
}

fn every(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    interval
}

impl Ticking {
    async fn run(mut self, mut dispatcher: Dispatcher) -> Result<(), GatewayError> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interval = every(self.config.kanban.dispatch_interval());
        let mut terminate = signal(SignalKind::terminate()).map_err(io("cannot watch SIGTERM"))?;
        let mut hangup = signal(SignalKind::hangup()).map_err(io("cannot watch SIGHUP"))?;
        let mut last_tick = Instant::now();
        loop {
            let due_in = self
                .next_due
                .map(|at| Duration::from_secs(u64::try_from(at.saturating_sub(now())).unwrap_or(0)));
            tokio::select! {
                _ = interval.tick() => {}
                _ = tokio::time::sleep(due_in.unwrap_or_default()), if due_in.is_some() => {}
                _ = self.wake.notified() => self.after_gap(last_tick).await,
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
                _ = hangup.recv() => {
                    let before = self.config.kanban.dispatch_interval();
                    if reload::reload(&self.home, &mut self.config, &mut dispatcher) {
                        let period = self.config.kanban.dispatch_interval();
                        self.monitor.set_interval(period);
                        if period != before {
                            interval = every(period);
                            interval.reset();
                        }
                    }
                    continue;
                }
            }
            last_tick = Instant::now();
            dispatcher = self.tick(dispatcher).await?;
        }
        dispatcher.shutdown();
        tracing::info!("gateway stopped");
        Ok(())
    }

    /// Waits out what is left of [`WAKE_GAP`] since the tick that began at `last_tick`,
    /// before a tick a wake-up starts.
    async fn after_gap(&mut self, last_tick: Instant) {
        self.wakeups += 1;
        let since = last_tick.elapsed();
        if since < WAKE_GAP {
            tokio::time::sleep(WAKE_GAP - since).await;
        }
    }

    /// One tick on the blocking pool (the store is synchronous), then `gateway.json`.
    async fn tick(&mut self, mut dispatcher: Dispatcher) -> Result<Dispatcher, GatewayError> {
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
        if let Ok((_, _, _, next_due)) = &joined {
            self.next_due = *next_due;
        }
        match joined {
            Ok((d, Ok((report, cost_safety)), took, _)) => {
                self.monitor.tick(&report, took, d.workers().count());
                let status = Status {
                    started_at: self.started_at,
                    wakeups: self.wakeups,
                    cost_safety,
                };
                write_status(&self.home, &status, &d, &report);
                Ok(d)
            }
            Ok((d, Err(_), _, _)) => {
                tracing::error!("a tick panicked; the next tick runs");
                Ok(d)
            }
            Err(e) => Err(GatewayError::Io {
                what: "tick".into(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }
}
