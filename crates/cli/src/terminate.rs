//! Stopping a worker from the command line: SIGTERM to its process group, a grace
//! period, then SIGKILL. Used by `reclaim` through the board's `Terminator` trait.

use std::thread::sleep;
use std::time::{Duration, Instant};

use board_core::{Task, Termination, Terminator};

/// How long a worker gets to exit after SIGTERM, and after SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
const KILL_WAIT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(50);

/// Signals the worker's process group (the gateway starts each worker as a group leader,
/// so its children go too).
pub struct ProcessGroupTerminator;

impl Terminator for ProcessGroupTerminator {
    fn terminate(&self, task: &Task) -> Termination {
        let Some(pid) = task.worker_pid else {
            return Termination::Stopped;
        };
        // 0, 1 and negative pids would signal our own group, init or everyone: never a
        // worker the gateway spawned, so there is nothing of ours to stop.
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Termination::Stopped;
        };
        if pid <= 1 {
            return Termination::Stopped;
        }
        if !alive(pid) {
            return Termination::Stopped;
        }
        signal(pid, libc::SIGTERM);
        if wait_gone(pid, GRACE) {
            return Termination::Stopped;
        }
        signal(pid, libc::SIGKILL);
        if wait_gone(pid, KILL_WAIT) {
            Termination::Stopped
        } else {
            Termination::Survived
        }
    }
}

/// Signals the group led by `pid`, or `pid` alone when it leads no group.
fn signal(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill has no memory effects; pid > 1 so -pid names one process group.
    let rc = unsafe { libc::kill(-pid, sig) };
    if rc != 0 {
        // SAFETY: as above, for a single process.
        unsafe { libc::kill(pid, sig) };
    }
}

/// A process exists while `kill(pid, 0)` succeeds or is refused for permission.
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn wait_gone(pid: libc::pid_t, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        sleep(POLL);
    }
    !alive(pid)
}
