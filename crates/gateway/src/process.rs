//! Worker process groups held by a pidfd. A signal reaches the group of the process the
//! pidfd was opened on, or nobody: a pid that was reused by an unrelated process after
//! the check that proved it ours is never signalled.
//!
//! A worker leads its own process group, whose id is the leader's pid. The kernel's
//! group flag signals that group through the leader's pidfd. Without it, the group id is
//! used only while the leader is unreaped (alive or a zombie), when no other group can
//! hold it, and otherwise each member left is signalled through its own pidfd. The
//! gateway's own children are reaped only after their group has been killed.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::thread::sleep;
use std::time::{Duration, Instant};

use board_core::Termination;

use crate::planner::Exit;

/// How long a worker gets to exit after SIGTERM, and after SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
const KILL_WAIT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);
/// `pidfd_send_signal` flag (Linux 6.9): signal the process group of the pidfd's process.
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 4;

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Unknown,
        }
    }
}

/// A signal for a worker's whole process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Asks the group to stop (SIGTERM).
    Term,
    /// Stops it (SIGKILL).
    Kill,
}

impl Signal {
    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// A process pinned by a pidfd.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: libc::pid_t,
}

impl Pidfd {
    /// Opens a pidfd on `pid`, which names whatever process holds that pid now.
    pub fn open(pid: u32) -> std::io::Result<Pidfd> {
        let pid = libc::pid_t::try_from(pid)
            .ok()
            .filter(|p| *p > 1)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just returned to us and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        Ok(Pidfd { fd, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Whether the process has exited (a zombie has). A pidfd turns readable on exit.
    pub fn exited(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let rc = unsafe { libc::poll(&mut poll, 1, 0) };
        rc != 0 && poll.revents != 0
    }

    /// Waits up to `limit` for the process to exit; whether it has.
    pub fn wait_exit(&self, limit: std::time::Duration) -> bool {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd; poll waits at most `millis`.
        let rc = unsafe { libc::poll(&mut poll, 1, millis) };
        rc > 0 && poll.revents != 0
    }

    /// Signals this process alone.
    fn signal(&self, sig: libc::c_int) {
        self.send(sig, 0);
    }

    /// `pidfd_send_signal`, true when it was delivered.
    fn send(&self, sig: libc::c_int, flags: libc::c_uint) -> bool {
        // SAFETY: the descriptor is ours; a null siginfo asks for a kill()-like signal.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                flags,
            )
        };
        rc == 0
    }

    /// Signals the process group this pidfd's process leads. `unreaped` says that the
    /// caller holds the leader unreaped (its own child), so its pid still names its group
    /// even when it has exited.
    fn signal_group(&self, sig: libc::c_int, unreaped: bool) {
        if self.send(sig, PIDFD_SIGNAL_PROCESS_GROUP)
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
        {
            return;
        }
        // A kernel without the group flag: the group's id is the leader's pid, which no
        // other process can hold while the leader is unreaped.
        if unreaped || !self.exited() {
            // SAFETY: kill has no memory effects; pid > 1, so -pid names one group.
            unsafe { libc::kill(-self.pid, sig) };
        } else {
            signal_members(self.pid, sig);
        }
    }
}

/// Signals each process left in group `pgid` after its leader is gone, each through its
/// own pidfd, opened and then confirmed to be in the group (a living member keeps the
/// group's id from being reused).
fn signal_members(pgid: libc::pid_t, sig: libc::c_int) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        if group_of(pid) != Some(pgid) {
            continue;
        }
        let Ok(member) = Pidfd::open(pid) else {
            continue;
        };
        if group_of(pid) == Some(pgid) && !member.exited() {
            member.signal(sig);
        }
    }
}

/// The process group of `pid`, from `/proc/<pid>/stat` (readable for every process).
fn group_of(pid: u32) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything; state, ppid, pgrp follow.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(2)?.parse().ok()
}

/// The leader of a worker's process group: the gateway's own child, or a process proven
/// to run a task's current run.
#[derive(Debug)]
pub enum Leader {
    Own(Pidfd),
    Adopted(Pidfd),
}

impl Leader {
    /// A freshly started child of this process; its pid is ours until we reap it. A
    /// child that cannot be held is killed with its group rather than left running
    /// unsupervised.
    pub fn own(pid: libc::pid_t) -> std::io::Result<Leader> {
        match Pidfd::open(pid as u32) {
            Ok(pidfd) => Ok(Leader::Own(pidfd)),
            Err(e) => {
                // SAFETY: kill has no memory effects; the child is unreaped, so its pid
                // still names its own group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                let _ = reap(pid);
                Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot hold the worker: {e}"),
                ))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        match self {
            Leader::Own(pidfd) | Leader::Adopted(pidfd) => pidfd.pid(),
        }
    }

    /// Whether the leader has exited, without reaping it.
    pub fn exited(&self) -> bool {
        self.poll().is_some()
    }

    /// How the leader ended, once it has, without reaping it: an own child's status is
    /// read with `WNOWAIT`, so its pid keeps naming its group; an adopted leader's is
    /// unknowable.
    pub fn poll(&self) -> Option<Exit> {
        match self {
            Leader::Own(pidfd) => own_child_exit(pidfd.pid),
            Leader::Adopted(pidfd) => pidfd.exited().then_some(Exit::Unknown),
        }
    }

    /// Sends `signal` to the whole group, now, without waiting.
    pub fn signal(&self, signal: Signal) {
        self.signal_group(signal.number());
    }

    fn signal_group(&self, sig: libc::c_int) {
        match self {
            Leader::Own(pidfd) => pidfd.signal_group(sig, true),
            Leader::Adopted(pidfd) => pidfd.signal_group(sig, false),
        }
    }

    /// After the leader exited: kills what is left of its group (background processes
    /// must not outlive their worker), then reaps an own child. `None` for an adopted
    /// leader, whose exit status only its parent can know.
    pub fn finish(&mut self) -> Option<std::io::Result<ExitStatus>> {
        self.signal_group(libc::SIGKILL);
        match self {
            Leader::Own(pidfd) => Some(reap(pidfd.pid)),
            Leader::Adopted(_) => None,
        }
    }

    /// Stops the whole group: SIGTERM, a grace period for the leader, then SIGKILL to the
    /// group whether or not the leader is still there (a grandchild may ignore SIGTERM).
    pub fn stop(&mut self) -> Termination {
        self.signal_group(libc::SIGTERM);
        wait_until(GRACE, || self.exited());
        self.signal_group(libc::SIGKILL);
        if !wait_until(KILL_WAIT, || self.exited()) {
            return Termination::Survived;
        }
        let _ = self.finish();
        Termination::Stopped
    }
}

/// A close-on-exec copy of `fd` numbered 3 or above: never one of the standard streams a
/// worker's own replace.
pub(crate) fn copy_above_stdio(fd: std::os::fd::RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor (>= 3) that only we own, or -1.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just made, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Waits for our child `pid` to end and reaps it.
pub(crate) fn reap(pid: libc::pid_t) -> std::io::Result<ExitStatus> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child writes one int we own.
        if unsafe { libc::waitpid(pid, &mut status, 0) } >= 0 {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// How our child `pid` ended, once it has, leaving it a zombie (WNOWAIT) so that its
/// pid keeps naming its group until [`Leader::finish`].
fn own_child_exit(pid: libc::pid_t) -> Option<Exit> {
    // SAFETY: zeroed siginfo is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child writes only into `info`.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Some(Exit::Unknown);
    }
    // SAFETY: si_pid and si_status are set by waitid (si_pid is 0 while the child runs).
    let (child, status) = unsafe { (info.si_pid(), info.si_status()) };
    if child == 0 {
        return None;
    }
    Some(match info.si_code {
        libc::CLD_EXITED => Exit::Code(status),
        libc::CLD_KILLED | libc::CLD_DUMPED => Exit::Signal(status),
        _ => Exit::Unknown,
    })
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
