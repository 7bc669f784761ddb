//! The report channel (docs/gateway.md#the-report-channel): how a worker reports to the
//! gateway that started it without being able to read the home, the config or the
//! database.
//!
//! At spawn the gateway makes a connected `SOCK_SEQPACKET` pair per worker and the worker
//! inherits one end as the descriptor named by `KANBAN_CHANNEL`. The pair is the
//! capability: it has no name to guess and no secret to copy, and the gateway knows which
//! run speaks by the end it reads from, never by what the worker claims. Each `kanban`
//! call inside the worker opens a conversation of its own: it makes a private stream
//! pair and passes one end over the channel (`SCM_RIGHTS`, one packet, so concurrent
//! calls never interleave), then sends JSON lines ([`Report`]) and reads one [`Answer`]
//! line for each. The gateway applies every report through the same `Store` call the CLI
//! makes, guarded by the worker's own run, and refuses one that names another task or run.
//!
//! The channel lives as long as the process that started the worker: a worker of a
//! restarted gateway, or of `kanban dispatch`, finds it closed ([`CallError::Closed`],
//! nothing was sent) and may report through the home instead when it can read it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::{BlockKind, BoardWrites, Comment, Run, RunId, Task, TaskId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod answer;
mod check;

pub use answer::apply;
pub use check::{CheckLimits, CheckReport, Verifiers};

/// The variable naming the descriptor of a worker's channel.
pub const CHANNEL_VARIABLE: &str = "KANBAN_CHANNEL";

/// How long the gateway waits on a quiet conversation before it hangs up.
const CONVERSATION_IDLE: Duration = Duration::from_secs(30);

/// A channel's thread parses JSON (nested 128 deep at most) and calls the store; a
/// gateway may hold hundreds of them.
const CHANNEL_STACK_BYTES: usize = 512 * 1024;

/// The longest report line beyond the text it carries (ids, flags, JSON quoting).
const LINE_OVERHEAD: usize = 64 * 1024;

/// What a worker says: a write for its own task, or a read its brief needs. `task` and
/// `run` are what the worker's command line named; the gateway checks them against the
/// run the channel belongs to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Report {
    Heartbeat {
        task: TaskId,
        run: Option<RunId>,
        note: Option<String>,
    },
    Complete {
        task: TaskId,
        run: Option<RunId>,
        replay_run: Option<RunId>,
        result: Option<String>,
        summary: Option<String>,
        metadata: Option<Value>,
        /// What backs the completion (`complete --evidence`).
        #[serde(default)]
        evidence: Option<Value>,
    },
    Block {
        task: TaskId,
        run: Option<RunId>,
        kind: Option<BlockKind>,
        reason: Option<String>,
    },
    Comment {
        task: TaskId,
        author: Option<String>,
        text: String,
    },
    /// A check on the worker's own run: a request for review (a worker's), a review's
    /// verdict (a reviewer's), or the verifiers' verdict (a verify run's).
    Check {
        task: TaskId,
        run: Option<RunId>,
        check: CheckReport,
    },
    /// The worker's task, or one of its parents.
    Task {
        task: TaskId,
    },
    /// A verify run's verifiers.
    Verifiers {
        task: TaskId,
    },
    Parents {
        task: TaskId,
    },
    /// The runs of the worker's task or of one of its parents.
    Runs {
        task: TaskId,
    },
    Comments {
        task: TaskId,
    },
    /// The files the worker's own task gave it.
    Files {
        task: TaskId,
    },
}

/// What the gateway answers: the store's answer, or a refusal worded as the CLI words it
/// (`usage` for what would have been exit 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// A guarded write: whether it won (`false`: its run is not the current one).
    Won {
        ok: bool,
    },
    Comment {
        comment: Comment,
    },
    Task {
        task: Box<Task>,
    },
    Verifiers {
        verifiers: Verifiers,
    },
    Tasks {
        tasks: Vec<Task>,
    },
    Runs {
        runs: Vec<Run>,
    },
    Comments {
        comments: Vec<Comment>,
    },
    /// The files the worker was given.
    Files {
        files: Vec<board_core::Attachment>,
    },
    Refused {
        message: String,
    },
    Usage {
        message: String,
    },
}

/// The run a channel belongs to: every write through it is guarded by this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub task: TaskId,
    pub run: RunId,
}

/// The config values a report is applied with, as they were when the worker started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terms {
    /// `kanban.claim_ttl_seconds`: what a heartbeat extends the lease by.
    pub claim_ttl_seconds: i64,
    /// `kanban.max_text_bytes`: the largest result or comment.
    pub max_text_bytes: usize,
    /// The limits the worker's checks are decided under.
    pub checks: CheckLimits,
    /// A verify run's verifiers, which its worker asks for; `None` for other runs.
    pub verify: Option<Verifiers>,
    /// The task's files the worker was given (in its workspace's `attachments/`).
    pub files: Vec<board_core::Attachment>,
}

/// Called when a worker that ended its run through its channel (a completion or a block
/// the board accepted) has closed it: its process is gone and its slot is free.
pub type OnFinished = Arc<dyn Fn() + Send + Sync>;

/// Opens the channel of a worker about to start: the end the worker inherits (the
/// caller hands its number to the worker and closes it once the worker runs), while a
/// thread of this process serves the other end until every holder of the worker's end
/// has closed it, then calls `finished` if the worker ended its run through it.
pub fn open(
    store: Arc<dyn BoardWrites>,
    bound: Bound,
    terms: Terms,
    finished: Option<OnFinished>,
) -> std::io::Result<OwnedFd> {
    let (ours, theirs) = seqpacket_pair()?;
    let name = format!("channel {}", bound.task);
    std::thread::Builder::new()
        .name(name)
        .stack_size(CHANNEL_STACK_BYTES)
        .spawn(move || {
            let ended = serve(&ours, store.as_ref(), &bound, &terms);
            if let (true, Some(finished)) = (ended, finished) {
                finished();
            }
        })?;
    Ok(theirs)
}

fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into `fds`, which we then own.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The worker's end must not land on 0, 1 or 2, which its standard streams replace.
    Ok((a, above_stdio(b)?))
}

fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    crate::process::copy_above_stdio(fd.as_raw_fd())
}

/// Serves one worker's channel: each packet brings the end of a conversation, served
/// to its end before the next, so a worker's reports are applied one at a time. Once
/// every holder of the worker's end has closed it, says whether the worker ended its
/// run through it.
fn serve(channel: &OwnedFd, store: &dyn BoardWrites, bound: &Bound, terms: &Terms) -> bool {
    let mut ended = false;
    let mut pace = Pace::new(Instant::now());
    loop {
        match receive_fd(channel) {
            Ok(Some(conversation)) => {
                if let Err(e) = converse(conversation, store, bound, terms, &mut pace, &mut ended) {
                    tracing::debug!(task = %bound.task, error = %e, "a report conversation ended early");
                }
            }
            // A packet without a descriptor says nothing; the next may.
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // End of file: the worker and everything it started have closed the channel.
            Err(_) => return ended,
        }
    }
}

/// Serves one conversation; `ended` is set once a completion or a block of the bound
/// run is accepted.
fn converse(
    conversation: OwnedFd,
    store: &dyn BoardWrites,
    bound: &Bound,
    terms: &Terms,
    pace: &mut Pace,
    ended: &mut bool,
) -> std::io::Result<()> {
    let stream = UnixStream::from(conversation);
    stream.set_read_timeout(Some(CONVERSATION_IDLE))?;
    stream.set_write_timeout(Some(CONVERSATION_IDLE))?;
    let mut writer = stream.try_clone()?;
    let limit = terms
        .max_text_bytes
        .saturating_mul(6)
        .saturating_add(LINE_OVERHEAD);
    let mut reader = BufReader::new(stream);
    loop {
        let Some(line) = read_line(&mut reader, limit)? else {
            return Ok(());
        };
        let answer = match serde_json::from_slice::<Report>(&line) {
            Ok(_) if !pace.admit(Instant::now()) => Answer::Refused {
                message: format!(
                    "this worker sends reports faster than {REPORTS_PER_SECOND} a second; \
                     this one was not applied"
                ),
            },
            Ok(report) => {
                let ends = matches!(
                    report,
                    Report::Complete { .. } | Report::Block { .. } | Report::Check { .. }
                );
                let answer = apply(store, bound, terms, report, board_home::now());
                *ended |= ends && matches!(answer, Answer::Won { ok: true });
                answer
            }
            Err(e) => Answer::Usage {
                message: format!("a report the gateway cannot read: {e}"),
            },
        };
        write_line(&mut writer, &answer)?;
    }
}

/// A worker's reports answered at most this many a second, after a burst of
/// [`REPORT_BURST`]: a flood of comments or notes cannot fill the board or starve it.
const REPORTS_PER_SECOND: u32 = 20;
const REPORT_BURST: f64 = 100.0;

/// The pace of one worker's reports: a token bucket filled at [`REPORTS_PER_SECOND`].
struct Pace {
    tokens: f64,
    at: Instant,
}

impl Pace {
    fn new(now: Instant) -> Pace {
        Pace {
            tokens: REPORT_BURST,
            at: now,
        }
    }

    /// Whether a report arriving `now` is answered, spending one token if so.
    fn admit(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * f64::from(REPORTS_PER_SECOND);
        self.tokens = (self.tokens + refill).min(REPORT_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One line without its newline; `None` at the end of the stream. A line over `limit`
/// ends the conversation.
fn read_line(reader: &mut impl BufRead, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let read = reader.take(limit as u64 + 1).read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a line too long, or cut short",
        ));
    }
    line.pop();
    Ok(Some(line))
}

fn write_line(writer: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    writer.write_all(&bytes)?;
    writer.flush()
}

/// The header of a one-byte packet whose ancillary data goes in `control`.
fn packet(iov: &mut libc::iovec, control: &mut [u64]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(control) as _;
    msg
}

/// Receives one packet; the descriptor it carried, if any (any extra ones are closed).
fn receive_fd(channel: &OwnedFd) -> std::io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    // Room for a few descriptors, so that extra ones are received (and closed) rather
    // than truncating the message.
    let mut space = [0u64; 8];
    let mut msg = packet(&mut iov, &mut space);
    // SAFETY: every pointer in `msg` is valid for the call.
    let n = unsafe { libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut received = Vec::new();
    // SAFETY: the CMSG macros walk the control buffer the kernel filled in.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    received.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 && received.is_empty() {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
    }
    let mut received = received.into_iter();
    Ok(received.next())
}

/// Sends `fd` over `channel` in one packet, without raising SIGPIPE.
fn send_fd(channel: RawFd, fd: RawFd) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    let mut space = [0u64; 4];
    let mut msg = packet(&mut iov, &mut space);
    // SAFETY: CMSG_SPACE is arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: the control buffer holds one SCM_RIGHTS header and one descriptor.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
    }
    // SAFETY: every pointer in `msg` is valid for the call.
    let n = unsafe { libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Why a call through the channel got no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The gateway that started the worker is gone; nothing was sent.
    #[error("the report channel is closed (the gateway that started this worker has stopped)")]
    Closed,
    /// The conversation broke after the report was sent: it may or may not have been
    /// applied, so it must not be sent again elsewhere.
    #[error(
        "the gateway stopped answering the report channel ({0}); the report may or may not have been applied"
    )]
    Broken(String),
}

/// A worker's end of its channel, with the one conversation this process holds on it.
pub struct Channel {
    fd: OwnedFd,
    conversation: std::sync::Mutex<Option<BufReader<UnixStream>>>,
}

impl Channel {
    /// The channel a worker inherited, when `KANBAN_CHANNEL` names one; an error when it
    /// names a descriptor that is not open here (or not a channel). Taking it makes the
    /// descriptor close-on-exec, so nothing this process starts inherits it.
    pub fn from_env() -> Result<Option<Channel>, String> {
        let Some(value) = std::env::var_os(CHANNEL_VARIABLE) else {
            return Ok(None);
        };
        let fd = value
            .to_str()
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|fd| *fd > 2)
            .ok_or_else(|| format!("{CHANNEL_VARIABLE} is not a descriptor number: {value:?}"))?;
        if !is_seqpacket(fd) {
            return Err(format!("{CHANNEL_VARIABLE}={fd} names no open report channel"));
        }
        // SAFETY: the descriptor is open and a socket (checked above), inherited for this
        // purpose; nothing else in this process owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: F_SETFD on a descriptor we own.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        Ok(Some(Channel {
            fd,
            conversation: std::sync::Mutex::new(None),
        }))
    }

    /// Sends one report and waits for its answer.
    pub fn call(&self, report: &Report) -> Result<Answer, CallError> {
        let mut conversation = self
            .conversation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if conversation.is_none() {
            *conversation = Some(self.connect()?);
        }
        let Some(stream) = conversation.as_mut() else {
            return Err(CallError::Closed);
        };
        let broken = |e: std::io::Error| CallError::Broken(e.to_string());
        let mut line = serde_json::to_vec(report).map_err(|e| CallError::Broken(e.to_string()))?;
        line.push(b'\n');
        send_all(stream.get_ref(), &line).map_err(broken)?;
        let mut reply = Vec::new();
        stream.read_until(b'\n', &mut reply).map_err(broken)?;
        if reply.pop() != Some(b'\n') {
            return Err(CallError::Broken("no answer".to_owned()));
        }
        serde_json::from_slice(&reply).map_err(|e| CallError::Broken(e.to_string()))
    }

    /// Starts this process's conversation: a private stream pair, one end passed to the
    /// gateway. A channel whose other end is gone refuses the packet: nothing was sent.
    fn connect(&self) -> Result<BufReader<UnixStream>, CallError> {
        let (mine, theirs) = UnixStream::pair().map_err(|e| CallError::Broken(e.to_string()))?;
        match send_fd(self.fd.as_raw_fd(), theirs.as_raw_fd()) {
            Ok(()) => {}
            Err(e) if is_gone(&e) => return Err(CallError::Closed),
            Err(e) => return Err(CallError::Broken(e.to_string())),
        }
        drop(theirs);
        Ok(BufReader::new(mine))
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel({})", self.fd.as_raw_fd())
    }
}

fn is_gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED | libc::ENOTCONN)
    )
}

/// Writes all of `bytes` without raising SIGPIPE (the CLI restores its default).
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is valid for its length.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

fn is_seqpacket(fd: RawFd) -> bool {
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int into `kind`; a descriptor that is not an open
    // socket fails without effect.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    rc == 0 && kind == libc::SOCK_SEQPACKET
}

/// Lets a worker inherit `fd`: clears close-on-exec in the child only (between its clone
/// and its exec), so no other child of the gateway ever holds it.
pub(crate) fn inherit_in_child(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl is async-signal-safe and touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_answered_a_flood_is_paced() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        let burst = (0..1000).take_while(|_| pace.admit(start)).count();
        assert_eq!(burst as f64, REPORT_BURST);
        assert!(!pace.admit(start + Duration::from_millis(10)));
        // A second later, a second's worth more.
        let later = start + Duration::from_secs(1);
        let refilled = (0..1000).take_while(|_| pace.admit(later)).count();
        assert_eq!(refilled, REPORTS_PER_SECOND as usize);
        // Never more than the burst, however long the worker was quiet.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!(
            (0..1000).take_while(|_| pace.admit(much_later)).count() as f64,
            REPORT_BURST
        );
    }
}
