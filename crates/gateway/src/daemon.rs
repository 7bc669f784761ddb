//! The gateway process (docs/gateway.md, docs/boards.md): one per home (an exclusive
//! `flock` plus a pid file), a loop per board it serves (`board_loop.rs`: its ticks and
//! status file), a config reload on SIGHUP and a clean stop on SIGINT/SIGTERM; and one
//! dispatcher pass on one board (`kanban dispatch`). Its callers resolve the home, load
//! the config and open the store (`board_home`) and hand them over.

mod board_loop;

use std::collections::BTreeMap;
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
use crate::planner::{DispatchSettings, TickReport};
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
pub(crate) struct Status {
    pub started_at: Timestamp,
    pub wakeups: u64,
    pub cost_safety: serde_json::Value,
}

/// A board's status under the running gateway, rewritten after every tick.
pub(crate) fn write_status(home: &Home, daemon: &Status, dispatcher: &Dispatcher, last: &TickReport) {
    let status = json!({
        "pid": std::process::id(),
        "board": home.board(),
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
    if let Err(e) = safety::write_report(&home.status_file(), format!("{status:#}\n").as_bytes()) {
        tracing::warn!(error = %e, "could not write {STATUS_FILE}");
    }
}

pub(crate) fn background(
    runtime: &tokio::runtime::Handle,
    store: &Arc<dyn Store>,
    (config, home): (&Config, &Home),
) -> Result<Box<dyn Decompositions>, GatewayError> {
    let settings = config.decomposer_settings_in(home);
    let pool = BackgroundDecompositions::new(runtime.clone(), store.clone(), settings).map_err(|e| {
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
    let pool = background(runtime.handle(), &store, (config, home))?;
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
/// caller opened and loaded there: one loop per board the home's gateway serves
/// (`gateway.boards`, else every board; docs/boards.md), each with its own store,
/// dispatcher, decompositions, notifier and wake-ups, so a board whose store or
/// provider is down, or that is busy, never holds another's ticks. Boards made later
/// start at the next look (every dispatch interval); a removed board's loop ends.
/// SIGHUP re-reads the config in every loop (`reload`).
pub fn run(home: &Home, store: Arc<dyn Store>, loaded: Loaded, replace: bool) -> Result<(), GatewayError> {
    use tokio::signal::unix::{signal, SignalKind};
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
    tracing::info!(home = %home.dir().display(), store = %home.board_name(&config), host = %config.gateway.host_id(), pid = std::process::id(), interval = config.kanban.dispatch_interval_seconds, "gateway started");
    if crate::supervisor::holds_capabilities() {
        tracing::info!("this gateway holds capabilities (it runs as root): workers of a profile without `user` run as its user with none, no way to regain one (bounding set empty, no_new_privs), and cannot read its environment or memory; set profiles.<name>.user to run them as another user");
    }
    let mut boards = Boards {
        root: home.on_board(board_home::BoardSlug::default_board()),
        control: tokio::sync::watch::channel(Control::default()).0,
        loops: BTreeMap::new(),
        first: Some((home.board().clone(), store)),
        metrics: config.gateway.metrics_bind(),
    };
    runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).map_err(io("cannot watch SIGTERM"))?;
        let mut hangup = signal(SignalKind::hangup()).map_err(io("cannot watch SIGHUP"))?;
        let mut look = tokio::time::interval(config.kanban.dispatch_interval().max(Duration::from_secs(1)));
        loop {
            tokio::select! {
                _ = look.tick() => boards.look(&runtime).await?,
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
                _ = hangup.recv() => boards.control.send_modify(|c| c.reloads += 1),
            }
        }
        boards.stop().await;
        Ok::<(), GatewayError>(())
    })?;
    tracing::info!("gateway stopped");
    Ok(())
}

/// What the gateway tells every board's loop.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Control {
    /// SIGHUPs so far: each re-reads the config.
    pub reloads: u64,
    /// The gateway is stopping.
    pub stop: bool,
}

/// The gateway's boards and their loops.
struct Boards {
    /// The home on its default board; each board's home is this one on that board.
    root: Home,
    control: tokio::sync::watch::Sender<Control>,
    loops: BTreeMap<board_home::BoardSlug, tokio::task::JoinHandle<()>>,
    /// The board the caller opened, used for its loop instead of opening it again.
    first: Option<(board_home::BoardSlug, Arc<dyn Store>)>,
    /// Where `/metrics` is served, until the first board's loop serves it.
    metrics: Option<std::net::SocketAddr>,
}

impl Boards {
    /// Starts a loop for each served board that has none (or whose loop ended), and
    /// forgets the loops that ended.
    async fn look(&mut self, runtime: &tokio::runtime::Runtime) -> Result<(), GatewayError> {
        self.loops.retain(|_, handle| !handle.is_finished());
        let config = match self.root.load_config() {
            Ok(loaded) => loaded.config,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the config; the boards are looked at again later");
                return Ok(());
            }
        };
        let boards = self.root.boards().unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot list the boards");
            Vec::new()
        });
        for slug in boards.into_iter().filter(|slug| config.serves(slug)) {
            if self.loops.contains_key(&slug) {
                continue;
            }
            let home = self.root.on_board(slug.clone());
            let store = match &self.first {
                Some((first, _)) if *first == slug => self.first.take().map(|(_, store)| store),
                _ => None,
            };
            let metrics = self.metrics.take();
            match crate::daemon::board_loop::start(runtime, home, store, metrics, self.control.subscribe())
                .await
            {
                Ok(handle) => {
                    self.loops.insert(slug, handle);
                }
                Err((e, metrics)) => {
                    self.metrics = metrics;
                    tracing::error!(board = %slug, error = %e, "cannot serve the board; tried again later");
                }
            }
        }
        Ok(())
    }

    /// Tells every loop to stop and waits for each to shut its dispatcher down.
    async fn stop(self) {
        self.control.send_modify(|c| c.stop = true);
        for (_, handle) in self.loops {
            let _ = handle.await;
        }
    }
}
