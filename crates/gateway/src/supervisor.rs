//! Worker processes: how one is started (argv, workspace, log, process group, scrubbed
//! environment), how its exit is classified, how it is proven alive, and how it is
//! stopped. Nothing here touches the board; the dispatcher does, with what this returns.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use board_core::{Outcome, RunId, Task, TaskId, Termination, Terminator};
use serde_json::{json, Value};

use crate::home::{open_append, open_read, private_dir, LOGS_DIR, WORKSPACES_DIR};

/// The exit code by which a worker says "rate limited, try me later".
pub const EXIT_RATE_LIMITED: i32 = 75;
/// How long a worker gets to exit after SIGTERM, and after SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
const KILL_WAIT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);
/// How much of the end of an attempt's log is quoted in its run's `error`.
const LOG_TAIL_BYTES: u64 = 2048;

/// Where a home keeps what workers need.
#[derive(Clone, Debug)]
pub struct HomeLayout {
    pub home: PathBuf,
    pub db: PathBuf,
}

impl HomeLayout {
    pub fn new(home: &Path) -> HomeLayout {
        HomeLayout {
            home: home.to_path_buf(),
            db: home.join("kanban.db"),
        }
    }

    pub fn workspace(&self, task: &TaskId) -> PathBuf {
        self.home.join(WORKSPACES_DIR).join(task.as_str())
    }

    pub fn log(&self, task: &TaskId) -> PathBuf {
        self.home.join(LOGS_DIR).join(format!("{task}.log"))
    }
}

/// What a worker is started for.
pub struct Assignment<'a> {
    pub task: &'a Task,
    pub run_id: RunId,
    pub claim_lock: &'a str,
    pub profile: &'a str,
    pub command: &'a [String],
    /// Environment variable names that must not reach a worker besides the
    /// `*_API_KEY` / `*_TOKEN` ones (the configured key's variable).
    pub secret_vars: &'a [String],
}

/// A worker the gateway supervises: its own child, or one adopted after a restart.
#[derive(Debug)]
pub struct Worker {
    pub task_id: TaskId,
    pub run_id: RunId,
    pub claim_lock: String,
    pub pid: u32,
    /// `None` for a worker adopted from an earlier gateway: not our child, so its exit
    /// status is unknowable; it is watched by pid.
    child: Option<Child>,
    log: PathBuf,
    /// Where this attempt's output starts in the (shared, appended) log file.
    log_offset: u64,
}

/// How a worker process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// An adopted worker vanished; nobody can tell how.
    Unknown,
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Unknown,
        }
    }
}

/// The environment of a worker: the gateway's own, minus secrets, plus the `KANBAN_*`
/// variables that tie it to its run.
pub fn worker_env(
    inherited: impl IntoIterator<Item = (String, String)>,
    layout: &HomeLayout,
    a: &Assignment<'_>,
) -> Vec<(String, String)> {
    let secret = |name: &str| {
        name.ends_with("_API_KEY") || name.ends_with("_TOKEN") || a.secret_vars.iter().any(|s| s == name)
    };
    let mut env: Vec<(String, String)> = inherited
        .into_iter()
        .filter(|(k, _)| !secret(k) && !k.starts_with("KANBAN_"))
        .collect();
    let workspace = layout.workspace(&a.task.id);
    env.extend([
        ("KANBAN_HOME".to_owned(), layout.home.display().to_string()),
        ("KANBAN_DB".to_owned(), layout.db.display().to_string()),
        ("KANBAN_TASK".to_owned(), a.task.id.to_string()),
        ("KANBAN_RUN_ID".to_owned(), a.run_id.to_string()),
        ("KANBAN_CLAIM_LOCK".to_owned(), a.claim_lock.to_owned()),
        ("KANBAN_PROFILE".to_owned(), a.profile.to_owned()),
        ("KANBAN_WORKSPACE".to_owned(), workspace.display().to_string()),
    ]);
    env
}

/// The profile's argv with `{task_id}`, `{title}` and `{workspace}` substituted.
pub fn worker_argv(command: &[String], task: &Task, workspace: &Path) -> Vec<String> {
    command
        .iter()
        .map(|arg| {
            arg.replace("{task_id}", task.id.as_str())
                .replace("{title}", &task.title)
                .replace("{workspace}", &workspace.display().to_string())
        })
        .collect()
}

/// Starts a worker: cwd its workspace, stdin null, output appended to its log, in its
/// own process group so it can be stopped with everything it started.
pub fn spawn(layout: &HomeLayout, a: &Assignment<'_>) -> std::io::Result<Worker> {
    let workspace = layout.workspace(&a.task.id);
    private_dir(&layout.home.join(WORKSPACES_DIR))?;
    private_dir(&workspace)?;
    let log_path = layout.log(&a.task.id);
    private_dir(&layout.home.join(LOGS_DIR))?;
    let log = open_append(&log_path)?;
    let log_offset = log.metadata()?.len();
    let argv = worker_argv(a.command, a.task, &workspace);
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("profile {} has an empty command", a.profile),
        ));
    };
    let child = Command::new(program)
        .args(args)
        .current_dir(&workspace)
        .env_clear()
        .envs(worker_env(std::env::vars(), layout, a))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {program:?}: {e}")))?;
    Ok(Worker {
        task_id: a.task.id.clone(),
        run_id: a.run_id,
        claim_lock: a.claim_lock.to_owned(),
        pid: child.id(),
        child: Some(child),
        log: log_path,
        log_offset,
    })
}

impl Worker {
    /// Adopts the live worker of a running task left by an earlier gateway, when its pid
    /// provably runs this task's current run.
    pub fn adopt(layout: &HomeLayout, task: &Task) -> Option<Worker> {
        let pid = u32::try_from(task.worker_pid?).ok()?;
        let run_id = task.current_run_id?;
        let worker = Worker {
            task_id: task.id.clone(),
            run_id,
            claim_lock: task.claim_lock.clone()?,
            pid,
            child: None,
            log: layout.log(&task.id),
            log_offset: std::fs::metadata(layout.log(&task.id)).map_or(0, |m| m.len()),
        };
        runs_our_run(pid, &task.id, run_id).then_some(worker)
    }

    pub fn is_adopted(&self) -> bool {
        self.child.is_none()
    }

    /// The exit of a finished worker, reaping it; `None` while it runs.
    pub fn try_exit(&mut self) -> Option<Exit> {
        match &mut self.child {
            Some(child) => match child.try_wait() {
                Ok(Some(status)) => Some(status.into()),
                Ok(None) => None,
                // The child cannot be waited on any more: treat it as gone.
                Err(_) => Some(Exit::Unknown),
            },
            None => (!runs_our_run(self.pid, &self.task_id, self.run_id)).then_some(Exit::Unknown),
        }
    }

    /// The end of this attempt's own output, never an earlier attempt's.
    pub fn log_tail(&self) -> String {
        read_tail(&self.log, self.log_offset).unwrap_or_default()
    }

    /// Stops the worker and its process group: SIGTERM, a grace period, SIGKILL.
    pub fn stop(&mut self) -> Termination {
        let pid = self.pid as libc::pid_t;
        match &mut self.child {
            Some(child) => {
                signal_group(pid, libc::SIGTERM);
                if wait_until(GRACE, || matches!(child.try_wait(), Ok(Some(_)) | Err(_))) {
                    return Termination::Stopped;
                }
                signal_group(pid, libc::SIGKILL);
                if wait_until(KILL_WAIT, || matches!(child.try_wait(), Ok(Some(_)) | Err(_))) {
                    Termination::Stopped
                } else {
                    Termination::Survived
                }
            }
            None => stop_pid(pid),
        }
    }
}

fn read_tail(path: &Path, from: u64) -> std::io::Result<String> {
    let mut file = open_read(path)?;
    let len = file.metadata()?.len();
    let start = from.max(len.saturating_sub(LOG_TAIL_BYTES));
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(LOG_TAIL_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// The run outcome, error and event detail of a worker's exit, when it ended without
/// completing or blocking its task (SPEC 6, tick step 1).
pub fn classify(exit: Exit, log_tail: &str) -> (Outcome, Option<String>, Value) {
    let quoted = |what: String| {
        if log_tail.is_empty() {
            what
        } else {
            format!("{what}; log tail: {log_tail}")
        }
    };
    match exit {
        Exit::Code(0) => (
            Outcome::ProtocolViolation,
            Some(quoted(
                "exited 0 without completing or blocking its task".to_owned(),
            )),
            json!({ "exit_code": 0, "signal": null }),
        ),
        Exit::Code(EXIT_RATE_LIMITED) => (
            Outcome::RateLimited,
            Some("exited 75: rate limited".to_owned()),
            json!({ "exit_code": EXIT_RATE_LIMITED, "signal": null }),
        ),
        Exit::Code(code) => (
            Outcome::Crashed,
            Some(quoted(format!("exited with code {code}"))),
            json!({ "exit_code": code, "signal": null }),
        ),
        Exit::Signal(signal) => (
            Outcome::Crashed,
            Some(quoted(format!("killed by signal {signal}"))),
            json!({ "exit_code": null, "signal": signal }),
        ),
        Exit::Unknown => (
            Outcome::Crashed,
            Some("the worker vanished".to_owned()),
            json!({ "exit_code": null, "signal": null }),
        ),
    }
}

/// Whether `pid` is a live (not zombie) process whose environment names this task's run:
/// a pid reused by an unrelated process is not our worker.
pub fn runs_our_run(pid: u32, task: &TaskId, run_id: RunId) -> bool {
    if !alive(pid as libc::pid_t) {
        return false;
    }
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted_task = format!("KANBAN_TASK={task}");
    let wanted_run = format!("KANBAN_RUN_ID={run_id}");
    let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    vars.contains(&wanted_task.as_bytes()) && vars.contains(&wanted_run.as_bytes())
}

/// A process exists and is not a zombie.
fn alive(pid: libc::pid_t) -> bool {
    if pid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// A zombie has exited and only waits for its parent to reap it.
fn is_zombie(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command name, which is in parentheses and may hold spaces.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

/// Signals the group led by `pid`, or `pid` alone when it leads no group.
fn signal_group(pid: libc::pid_t, sig: libc::c_int) {
    if pid <= 1 {
        return;
    }
    // SAFETY: kill has no memory effects; pid > 1 so -pid names one process group.
    let rc = unsafe { libc::kill(-pid, sig) };
    if rc != 0 {
        // SAFETY: as above, for a single process.
        unsafe { libc::kill(pid, sig) };
    }
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        sleep(POLL);
    }
}

/// Stops a process that is not our child (we cannot reap it; a zombie counts as gone).
fn stop_pid(pid: libc::pid_t) -> Termination {
    if !alive(pid) {
        return Termination::Stopped;
    }
    signal_group(pid, libc::SIGTERM);
    if wait_until(GRACE, || !alive(pid)) {
        return Termination::Stopped;
    }
    signal_group(pid, libc::SIGKILL);
    if wait_until(KILL_WAIT, || !alive(pid)) {
        Termination::Stopped
    } else {
        Termination::Survived
    }
}

/// Stops the worker of a running task by its recorded pid, for callers that did not
/// start it (`kanban reclaim`): SIGTERM to its process group, a grace period, SIGKILL.
/// A pid that does not run the task's current run is not ours: nothing is signalled.
pub struct ProcessGroupTerminator;

impl Terminator for ProcessGroupTerminator {
    fn terminate(&self, task: &Task) -> Termination {
        let (Some(pid), Some(run_id)) = (task.worker_pid, task.current_run_id) else {
            return Termination::Stopped;
        };
        let Ok(pid) = u32::try_from(pid) else {
            return Termination::Stopped;
        };
        if !runs_our_run(pid, &task.id, run_id) {
            return Termination::Stopped;
        }
        stop_pid(pid as libc::pid_t)
    }
}
