//! Worker processes: how one is started (argv, workspace, log, process group, scrubbed
//! environment), how its exit is classified, how it is proven alive, and how it is
//! stopped. Nothing here touches the board; the dispatcher does, with what this returns.
//! [`Processes`] is that process control as the dispatcher sees it; [`OsProcesses`] is
//! the real one.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use board_core::{BoardWrites, RunId, Task, TaskId, Termination, Terminator};
use board_home::safety::{open_append, private_dir, read_tail, rotate_log, worker_dir};
use board_home::{worker_variables as vars, Account, Home, BOARD_VARIABLE, HOME_VARIABLE};

use crate::channel::{self, Bound, Terms, CHANNEL_VARIABLE};

use crate::planner::{Boundary, LogRotation, Observed};
pub use crate::process::Signal;
use crate::process::{Leader, Pidfd};

mod files;
mod launch;
mod privileges;

pub use files::WorkerFile;

use launch::{Launch, Plan};
pub use privileges::holds_capabilities;
use privileges::may_switch_users;

/// How much of the end of an attempt's log is quoted in its run's `error`.
const LOG_TAIL_BYTES: u64 = 2048;

/// What a worker is started for.
pub struct Assignment<'a> {
    pub task: &'a Task,
    pub run_id: RunId,
    pub claim_lock: &'a str,
    pub profile: &'a str,
    pub command: &'a [String],
    /// Variable names that must not reach a worker whatever they are called (the
    /// configured key's variable).
    pub secret_vars: &'a [String],
    pub boundary: &'a Boundary,
    /// Whether the board is the home's `kanban.db`, whose path the worker is given;
    /// a PostgreSQL board's URL never is.
    pub home_board: bool,
    /// What the worker's reports through its channel are applied with.
    pub terms: Terms,
    /// When its log is rotated before it starts.
    pub worker_log: LogRotation,
    /// The task's files, written to the workspace's `attachments/` before it starts.
    pub files: &'a [WorkerFile],
}

/// A worker the gateway supervises: its own child, or one adopted after a restart.
#[derive(Debug)]
pub struct Worker {
    pub task_id: TaskId,
    pub run_id: RunId,
    pub claim_lock: String,
    pub pid: u32,
    leader: Leader,
    log: PathBuf,
    /// Where this attempt's output starts in the (shared, appended) log file.
    log_offset: u64,
}

/// What every worker gets of the gateway's environment, whatever its profile: what a
/// program needs to find its tools, its user, its language and its time. Anything else
/// (a `DATABASE_URL` with its password, a `GITHUB_PAT`, credentials inside
/// `HTTP_PROXY`) reaches a worker only when its profile's `env_allow` names it.
const PASSED: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "NO_COLOR",
];

/// Whether a variable of the gateway's environment reaches a worker: one of [`PASSED`]
/// (or a `LC_*` locale setting), or named by the profile's `env_allow`; never the
/// configured key's variable, nor one of ours (a worker's own are set afresh, and
/// `HERMES_TENANT` is its task's, never the gateway's).
fn passed(name: &str, a: &Assignment<'_>) -> bool {
    let upper = name.to_ascii_uppercase();
    let ours = upper.starts_with("KANBAN_") || upper == vars::HERMES_TENANT;
    let configured = a.secret_vars.iter().any(|s| s.eq_ignore_ascii_case(name));
    let needed = PASSED.contains(&name) || name.starts_with("LC_");
    let allowed = a.boundary.env_allow.iter().any(|v| v == name);
    !ours && !configured && (needed || allowed)
}

/// The environment of a worker: what [`passed`] lets through of the gateway's, plus the
/// `KANBAN_*` variables that tie it to its run, the card's title (`KANBAN_TITLE`),
/// which is safer to read from a variable than from a command line, the task's tenant
/// (`KANBAN_TENANT`, and Hermes' `HERMES_TENANT`) and skills (`KANBAN_SKILLS`), and the descriptor
/// of its report channel (`KANBAN_CHANNEL`) when it has one. On SQLite, `KANBAN_DB`
/// names the file; a PostgreSQL board's URL is never given: a worker reports through
/// its channel, and one without (a gateway restarted since) through the home's config
/// when its user can read it.
pub fn worker_env(
    inherited: impl IntoIterator<Item = (String, String)>,
    home: &Home,
    a: &Assignment<'_>,
    channel: Option<RawFd>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = inherited.into_iter().filter(|(k, _)| passed(k, a)).collect();
    let workspace = home.workspace(&a.task.id);
    if a.home_board {
        env.push((vars::DATABASE.to_owned(), home.database().display().to_string()));
    }
    env.extend([
        (HOME_VARIABLE.to_owned(), home.dir().display().to_string()),
        (BOARD_VARIABLE.to_owned(), home.board().to_string()),
        (vars::TASK.to_owned(), a.task.id.to_string()),
        (vars::RUN.to_owned(), a.run_id.to_string()),
        (vars::CLAIM_LOCK.to_owned(), a.claim_lock.to_owned()),
        (vars::PROFILE.to_owned(), a.profile.to_owned()),
        (vars::WORKSPACE.to_owned(), workspace.display().to_string()),
        (vars::TITLE.to_owned(), a.task.title.clone()),
    ]);
    if let Some(tenant) = &a.task.tenant {
        env.push((vars::TENANT.to_owned(), tenant.clone()));
        env.push((vars::HERMES_TENANT.to_owned(), tenant.clone()));
    }
    if !a.task.skills.is_empty() {
        env.push((vars::SKILLS.to_owned(), a.task.skills.join(",")));
    }
    if let Some(fd) = channel {
        env.push((CHANNEL_VARIABLE.to_owned(), fd.to_string()));
    }
    env
}

/// The profile's argv with `{task_id}`, `{title}` and `{workspace}` substituted in one
/// pass: text that came in through a placeholder is never scanned again, so a title
/// holding `{workspace}` stays literal. An argument that card text would start with `-`
/// is refused (the program would read it as an option) unless the profile allows it.
pub fn worker_argv(
    command: &[String],
    task: &Task,
    workspace: &Path,
    dash_arguments: bool,
) -> Result<Vec<String>, String> {
    let workspace = workspace.display().to_string();
    let value = |name: &str| match name {
        "{task_id}" => Some(task.id.as_str()),
        "{title}" => Some(task.title.as_str()),
        "{workspace}" => Some(workspace.as_str()),
        _ => None,
    };
    let mut argv = Vec::with_capacity(command.len());
    for (i, template) in command.iter().enumerate() {
        let arg = substitute(template, &value);
        if i > 0 && template.starts_with("{title}") && arg.starts_with('-') && !dash_arguments {
            return Err(format!(
                "argument {i} would start with '-' from the card's title; the worker was not started \
                 (set allow_dash_arguments on the profile to allow it)"
            ));
        }
        argv.push(arg);
    }
    Ok(argv)
}

/// Replaces each known `{name}` in `template`, scanning the template only.
fn substitute<'v>(template: &str, value: &impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        let found = tail
            .find('}')
            .and_then(|close| value(&tail[..=close]).map(|v| (v, close)));
        match found {
            Some((v, close)) => {
                out.push_str(v);
                rest = &tail[close + 1..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Starts a worker: cwd its workspace, stdin null, output appended to its log, in its
/// own process group so it can be stopped with everything it started, holding `channel`
/// (its end of the report channel), and as the profile's user when it names one.
pub fn spawn(home: &Home, a: &Assignment<'_>, channel: Option<OwnedFd>) -> std::io::Result<Worker> {
    let account = match &a.boundary.user {
        Some(name) => Some(switchable(name, a.profile)?),
        None => None,
    };
    if let (Some(user), None) = (&account, &channel) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "profile {} runs its workers as user {}, who can report only through a running \
                 gateway's channel; start the gateway (kanban gateway run) rather than a single pass",
                a.profile, user.name
            ),
        ));
    }
    let workspace = home.workspace(&a.task.id);
    private_dir(&home.workspaces())?;
    match &account {
        Some(user) => worker_dir(&workspace, user.uid, user.gid)?,
        None => {
            private_dir(&workspace)?;
        }
    }
    files::place(&workspace, a.files, account.as_ref().map(|u| (u.uid, u.gid)))?;
    let log_path = home.log(&a.task.id);
    private_dir(&home.logs())?;
    rotate_log(&log_path, a.worker_log.bytes, a.worker_log.backups)?;
    let log = open_append(&log_path)?;
    let log_offset = log.metadata()?.len();
    let argv = worker_argv(a.command, a.task, &workspace, a.boundary.dash_arguments)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("profile {} has an empty command", a.profile),
        ));
    };
    let channel_fd = channel.as_ref().map(AsRawFd::as_raw_fd);
    let env = worker_env(std::env::vars(), home, a, channel_fd);
    // A worker that stays this process's user gets none of its capabilities: a root
    // gateway's worker would otherwise read the gateway's environment and memory (the
    // model key, PGPASSWORD) whatever the gateway's dumpable flag says.
    let strip = account.is_none() && holds_capabilities();
    let pid = Launch::prepare(Plan {
        program,
        args,
        env: &env,
        cwd: &workspace,
        output: &log,
        channel: channel_fd,
        ids: account.map(|user| (user.uid, user.gid, user.groups)),
        strip,
    })
    .and_then(|launch| launch.start())
    .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {program:?}: {e}")))?;
    // The worker holds its end now; ours closes, so the channel ends with the worker.
    drop(channel);
    Ok(Worker {
        task_id: a.task.id.clone(),
        run_id: a.run_id,
        claim_lock: a.claim_lock.to_owned(),
        pid: pid as u32,
        leader: Leader::own(pid)?,
        log: log_path,
        log_offset,
    })
}

/// The account a profile's workers run as, when this process may switch to it.
fn switchable(name: &str, profile: &str) -> std::io::Result<Account> {
    let refused = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    if !may_switch_users() {
        return Err(refused(format!(
            "profile {profile} runs its workers as user {name}, which needs a gateway running as root \
             (or with CAP_SETUID and CAP_SETGID); this one runs as uid {}",
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() }
        )));
    }
    Account::lookup(name).map_err(|e| refused(format!("profile {profile}: {e}")))
}

impl Worker {
    /// Adopts the live worker of a running task left by an earlier gateway, when its pid
    /// provably runs this task's current run.
    pub fn adopt(home: &Home, task: &Task) -> Option<Worker> {
        let pidfd = prove_ours(task)?;
        Some(Worker {
            task_id: task.id.clone(),
            run_id: task.current_run_id()?,
            claim_lock: task.lease.as_ref()?.claim_lock.clone(),
            pid: pidfd.pid(),
            leader: Leader::Adopted(pidfd),
            log: home.log(&task.id),
            log_offset: std::fs::metadata(home.log(&task.id)).map_or(0, |m| m.len()),
        })
    }

    pub fn is_adopted(&self) -> bool {
        matches!(self.leader, Leader::Adopted(_))
    }

    /// What a probe sees: running, or exited (and how) with this attempt's log tail.
    /// Nothing is reaped: an own child is judged by its handle, never by what it left in
    /// its environment.
    pub fn observe(&self) -> Observed {
        match self.leader.poll() {
            None => Observed::Alive,
            Some(exit) => Observed::Exited {
                exit,
                log_tail: self.log_tail(),
            },
        }
    }

    /// The end of this attempt's own output, never an earlier attempt's.
    pub fn log_tail(&self) -> String {
        let tail = read_tail(&self.log, self.log_offset, LOG_TAIL_BYTES);
        tail.map(|t| t.trim().to_owned()).unwrap_or_default()
    }
}

/// The worker of a running task's current run, pinned by a pidfd, when its recorded pid
/// provably runs that run: its environment names the task and run, and the process the
/// pidfd was opened on is still alive after that was read, so the pid was not reused in
/// between. A pid reused by an unrelated process is not our worker.
pub fn prove_ours(task: &Task) -> Option<Pidfd> {
    let lease = task.lease.as_ref()?;
    let (pid, run_id) = (u32::try_from(lease.worker_pid?).ok()?, lease.run_id);
    let pidfd = Pidfd::open(pid).ok()?;
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let wanted_task = format!("{}={}", vars::TASK, task.id);
    let wanted_run = format!("{}={run_id}", vars::RUN);
    let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    let named = vars.contains(&wanted_task.as_bytes()) && vars.contains(&wanted_run.as_bytes());
    (named && !pidfd.exited()).then_some(pidfd)
}

/// Stops the worker of a running task by its recorded pid, for callers that did not
/// start it (`kanban reclaim`, a task another gateway claimed): SIGTERM to its process
/// group, a grace period, SIGKILL, all through the pidfd taken when it was proven ours.
/// A pid that does not run the task's current run is not ours: nothing is signalled.
pub struct ProcessGroupTerminator;

impl Terminator for ProcessGroupTerminator {
    fn terminate(&self, task: &Task) -> Termination {
        match prove_ours(task) {
            Some(pidfd) => Leader::Adopted(pidfd).stop(),
            None => Termination::Stopped,
        }
    }
}

/// Process control as the dispatcher needs it: the workers it holds, by task. Nothing
/// here blocks: a stop is a signal now and a probe on a later tick.
pub trait Processes: Send {
    /// Starts the worker of a claimed run and holds it; its pid.
    fn spawn(&mut self, assignment: &Assignment<'_>) -> std::io::Result<u32>;
    /// Starts a worker for each assignment; each one's pid or why it did not start, in
    /// order. One after the other unless the process control can do better.
    fn spawn_each(&mut self, assignments: &[Assignment<'_>]) -> Vec<std::io::Result<u32>> {
        assignments.iter().map(|a| self.spawn(a)).collect()
    }
    /// Whether the recorded pid of a running task provably runs its current run.
    fn proven(&self, task: &Task) -> bool;
    /// Holds the live worker of a running task that this process did not start, when it
    /// provably runs the task's current run; its pid.
    fn adopt(&mut self, task: &Task) -> Option<u32>;
    /// What the held worker of `task` is doing now; `None` when none is held.
    fn probe(&self, task: &TaskId) -> Option<Observed>;
    /// Signals the whole process group of the held worker of `task`.
    fn signal(&mut self, task: &TaskId, signal: Signal);
    /// Lets go of the exited worker of `task`: kills what is left of its group
    /// (background processes must not outlive their worker), then reaps it.
    fn release(&mut self, task: &TaskId);
    /// The last `max_bytes` of the held worker's output in this attempt (an `auto`
    /// contract's result); `None` when none is held or its log cannot be read.
    fn output(&self, _task: &TaskId, _max_bytes: usize) -> Option<String> {
        None
    }
}

/// The real process control: own children and adopted workers, each behind a pidfd,
/// and, for a process that outlives its workers, their report channels, served with
/// the store.
pub struct OsProcesses {
    home: Home,
    channels: Option<Arc<dyn BoardWrites>>,
    /// Called when a worker that ended its run through its channel is gone.
    finished: Option<channel::OnFinished>,
    workers: BTreeMap<TaskId, Worker>,
}

impl OsProcesses {
    /// Process control that gives every worker a report channel served with `store`
    /// (the gateway).
    pub fn new(home: Home, store: Arc<dyn BoardWrites>) -> OsProcesses {
        OsProcesses {
            home,
            channels: Some(store),
            finished: None,
            workers: BTreeMap::new(),
        }
    }

    /// Calls `finished` each time a worker that completed or blocked its run through its
    /// channel has exited, so its slot can be filled at once (the gateway's wake-up).
    pub fn on_finished(mut self, finished: channel::OnFinished) -> OsProcesses {
        self.finished = Some(finished);
        self
    }

    /// Process control whose workers get no channel and report through the home: a
    /// process that exits after one pass (`kanban dispatch`) could not serve one.
    pub fn without_channels(home: Home) -> OsProcesses {
        OsProcesses {
            home,
            channels: None,
            finished: None,
            workers: BTreeMap::new(),
        }
    }
}

/// A worker's channel closes as its process exits, a moment before the exit can be read:
/// `notify` is called once the process `leader` names has exited (a zombie of ours, so
/// its pid names it still), or after a second at most, so the tick it starts finds the
/// slot free rather than waiting for the next periodic tick.
fn after_exit(
    notify: channel::OnFinished,
    leader: &Arc<std::sync::atomic::AtomicU32>,
) -> channel::OnFinished {
    let leader = leader.clone();
    Arc::new(move || {
        let pid = leader.load(std::sync::atomic::Ordering::Acquire);
        if let Ok(pidfd) = crate::process::Pidfd::open(pid) {
            pidfd.wait_exit(std::time::Duration::from_secs(1));
        }
        notify();
    })
}

impl OsProcesses {
    /// The channel of a worker about to start, when this process serves channels, and
    /// the cell its pid goes in once it runs (its channel's end is told apart from its
    /// exit by it).
    fn open_channel(&self, assignment: &Assignment<'_>) -> std::io::Result<(Option<OwnedFd>, PidCell)> {
        let leader = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let Some(store) = &self.channels else {
            return Ok((None, leader));
        };
        let bound = Bound {
            task: assignment.task.id.clone(),
            run: assignment.run_id,
        };
        let finished = self.finished.clone().map(|notify| after_exit(notify, &leader));
        let channel = channel::open(store.clone(), bound, assignment.terms.clone(), finished)?;
        Ok((Some(channel), leader))
    }

    /// Holds a started worker; its pid.
    fn hold(&mut self, worker: Worker) -> u32 {
        let pid = worker.pid;
        self.workers.insert(worker.task_id.clone(), worker);
        pid
    }
}

/// Where a worker's pid is put once it runs, for its channel's end.
type PidCell = Arc<std::sync::atomic::AtomicU32>;

/// A worker to start: its place among a call's, its assignment, and its channel with the
/// cell for its pid (or why the channel could not be opened).
type Job<'s, 'a> = (
    usize,
    &'s Assignment<'a>,
    std::io::Result<(Option<OwnedFd>, PidCell)>,
);

/// Starts one worker on its opened channel; its pid is in its cell as soon as it runs,
/// for its channel, which may end before a call's other workers have started.
fn start_job(
    home: &Home,
    assignment: &Assignment<'_>,
    opened: std::io::Result<(Option<OwnedFd>, PidCell)>,
) -> std::io::Result<Worker> {
    let (channel, leader) = opened?;
    let worker = spawn(home, assignment, channel)?;
    leader.store(worker.pid, std::sync::atomic::Ordering::Release);
    Ok(worker)
}

/// Starts the workers of `jobs` in turn.
fn start_jobs(home: &Home, jobs: Vec<Job<'_, '_>>) -> Vec<(usize, std::io::Result<Worker>)> {
    jobs.into_iter()
        .map(|(at, assignment, opened)| (at, start_job(home, assignment, opened)))
        .collect()
}

impl Processes for OsProcesses {
    fn spawn(&mut self, assignment: &Assignment<'_>) -> std::io::Result<u32> {
        let opened = self.open_channel(assignment);
        let worker = start_job(&self.home, assignment, opened)?;
        Ok(self.hold(worker))
    }

    /// Starts the workers on two threads, this one and a helper: a start is mostly
    /// waiting (the directories and the log file made, the child's `exec`), and the
    /// waits overlap.
    fn spawn_each(&mut self, assignments: &[Assignment<'_>]) -> Vec<std::io::Result<u32>> {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        for (at, assignment) in assignments.iter().enumerate() {
            let job = (at, assignment, self.open_channel(assignment));
            match at % 2 {
                0 => mine.push(job),
                _ => theirs.push(job),
            }
        }
        let home = &self.home;
        // The helper's share waits here for it; a thread the system refuses leaves the
        // share to this one.
        let helped = !theirs.is_empty();
        let other = std::sync::Mutex::new(Some(theirs));
        let take = || other.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut done = std::thread::scope(|scope| {
            let helper = helped.then(|| {
                std::thread::Builder::new()
                    .name("worker start".into())
                    .spawn_scoped(scope, || {
                        take().map(|job| start_jobs(home, job)).unwrap_or_default()
                    })
            });
            let mut done = start_jobs(home, mine);
            if let Some(Ok(helper)) = helper {
                // A helper that panicked leaves its workers' places empty: errors below.
                done.extend(helper.join().unwrap_or_default());
            }
            done
        });
        if let Some(job) = take() {
            done.extend(start_jobs(home, job));
        }
        let mut started: Vec<Option<std::io::Result<Worker>>> =
            (0..assignments.len()).map(|_| None).collect();
        for (at, outcome) in done {
            started[at] = Some(outcome);
        }
        started
            .into_iter()
            .map(|outcome| match outcome {
                Some(worker) => Ok(self.hold(worker?)),
                None => Err(std::io::Error::other("the worker's start was lost")),
            })
            .collect()
    }

    fn proven(&self, task: &Task) -> bool {
        prove_ours(task).is_some()
    }

    fn adopt(&mut self, task: &Task) -> Option<u32> {
        let worker = Worker::adopt(&self.home, task)?;
        let pid = worker.pid;
        self.workers.insert(task.id.clone(), worker);
        Some(pid)
    }

    fn probe(&self, task: &TaskId) -> Option<Observed> {
        self.workers.get(task).map(Worker::observe)
    }

    fn signal(&mut self, task: &TaskId, signal: Signal) {
        if let Some(worker) = self.workers.get(task) {
            worker.leader.signal(signal);
        }
    }

    fn release(&mut self, task: &TaskId) {
        if let Some(mut worker) = self.workers.remove(task) {
            let _ = worker.leader.finish();
        }
    }

    fn output(&self, task: &TaskId, max_bytes: usize) -> Option<String> {
        let worker = self.workers.get(task)?;
        let tail = read_tail(&worker.log, worker.log_offset, u64::try_from(max_bytes).ok()?).ok()?;
        Some(tail.trim().to_owned())
    }
}
