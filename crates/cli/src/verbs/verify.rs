//! `verify`: the worker of a verify run (docs/board.md#checks). The gateway starts it in
//! the task's workspace, as the task's profile's user, when a worker reported work its
//! checks must pass. It asks for the verifiers, runs each (an argv list, never a shell
//! line) with a timeout, keeps the tail of its output, and reports the verdict with the
//! evidence: every command run, its exit, its duration and its output tail.
//!
//! The verifiers run code the worker wrote, so they cannot speak for the run: the report
//! channel is closed to them and the run's id and claim lock are not in their
//! environment; only this process reports the verdict.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use gateway::channel::{CheckReport, Verifiers};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::output::print_json_line;
use crate::verbs::{Desk, Worker};

/// The tail of each verifier's output kept in the evidence.
pub const OUTPUT_TAIL_BYTES: usize = 16 * 1024;

/// How long the output of an ended verifier is still read: what a process that left its
/// group writes later is not its output.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// The tail of the failing verifier's output in the comment the next worker reads.
const FAILURE_TAIL_BYTES: usize = 4 * 1024;

/// The worker's variables a verifier keeps: what it works on, never what it could report
/// with.
const KEPT: &[&str] = &[
    "KANBAN_TASK",
    "KANBAN_TITLE",
    "KANBAN_WORKSPACE",
    "KANBAN_PROFILE",
];

pub fn verify(desk: &Desk) -> Result<(), Failure> {
    let worker = Worker::from_env()?.ok_or_else(|| {
        Failure::Usage(
            "kanban verify is the worker of a verify run the gateway starts (KANBAN_TASK and KANBAN_RUN_ID unset)"
                .to_owned(),
        )
    })?;
    let verifiers = desk.verifiers(&worker.task)?;
    let verdict = run_all(&verifiers);
    let check = CheckReport::Verified {
        passed: verdict.failure.is_none(),
        evidence: Value::Array(verdict.evidence),
        failure: verdict.failure.clone(),
    };
    let ok = desk.check(&worker.task, Some(worker.run), &check)?;
    if desk.json {
        print_json_line(&json!({ "task_id": worker.task, "ok": ok, "passed": verdict.failure.is_none() }));
    } else if let Some(failure) = &verdict.failure {
        println!(
            "verification of {} failed: {}",
            worker.task,
            crate::output::cut(failure, 200)
        );
    } else {
        println!(
            "verified {}: {} command(s) passed",
            worker.task,
            verifiers.steps.len()
        );
    }
    if ok {
        Ok(())
    } else {
        Err(Failure::Refused(format!(
            "the verdict on {} lost: run {} is no longer current; nothing changed",
            worker.task, worker.run
        )))
    }
}

/// What the verifiers found: each command's evidence, and what failed first.
struct Verdict {
    evidence: Vec<Value>,
    failure: Option<String>,
}

/// Runs the verifiers in order, stopping at the first that fails.
fn run_all(verifiers: &Verifiers) -> Verdict {
    let timeout = Duration::from_secs(verifiers.timeout_seconds.max(1).unsigned_abs());
    let mut evidence = Vec::with_capacity(verifiers.steps.len());
    for argv in &verifiers.steps {
        let ran = run_one(argv, timeout);
        evidence.push(ran.evidence(argv));
        if let Some(why) = ran.failed() {
            let tail = tail(&ran.output, FAILURE_TAIL_BYTES);
            let failure = format!("{} {why}; output tail:\n{tail}", shown_argv(argv));
            return Verdict {
                evidence,
                failure: Some(failure),
            };
        }
    }
    Verdict {
        evidence,
        failure: None,
    }
}

/// One verifier's run.
struct Ran {
    status: Option<ExitStatus>,
    /// Why it could not start.
    error: Option<String>,
    timed_out: bool,
    duration: Duration,
    /// The tail of its output (stdout and stderr together), at most [`OUTPUT_TAIL_BYTES`].
    output: Vec<u8>,
}

impl Ran {
    /// Why it failed, or `None` when it passed.
    fn failed(&self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(error) = &self.error {
            return Some(format!("could not start: {error}"));
        }
        if self.timed_out {
            return Some(format!(
                "ran past the timeout ({} s) and was killed",
                self.duration.as_secs()
            ));
        }
        match self.status {
            Some(s) if s.success() => None,
            Some(s) => Some(match (s.code(), s.signal()) {
                (Some(code), _) => format!("exited {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                _ => "failed".to_owned(),
            }),
            None => Some("ended without a status".to_owned()),
        }
    }

    fn evidence(&self, argv: &[String]) -> Value {
        use std::os::unix::process::ExitStatusExt;
        json!({
            "argv": argv,
            "exit_code": self.status.and_then(|s| s.code()),
            "signal": self.status.and_then(|s| s.signal()),
            "timed_out": self.timed_out,
            "error": self.error,
            "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            "passed": self.failed().is_none(),
            "output_tail": String::from_utf8_lossy(&self.output),
        })
    }
}

/// Runs one verifier in this directory (the task's workspace), in a process group of its
/// own so a timeout kills everything it started, with its output's tail kept.
fn run_one(argv: &[String], timeout: Duration) -> Ran {
    let started = Instant::now();
    let failed_to_start = |error: String| Ran {
        status: None,
        error: Some(error),
        timed_out: false,
        duration: started.elapsed(),
        output: Vec::new(),
    };
    let Some((program, args)) = argv.split_first() else {
        return failed_to_start("an empty command".to_owned());
    };
    let (reader, writer) = match std::io::pipe() {
        Ok(pipe) => pipe,
        Err(e) => return failed_to_start(format!("no pipe for its output: {e}")),
    };
    let (out, err) = match (writer.try_clone(), writer) {
        (Ok(out), err) => (out, err),
        (Err(e), _) => return failed_to_start(format!("no pipe for its output: {e}")),
    };
    let env =
        std::env::vars().filter(|(name, _)| !name.starts_with("KANBAN_") || KEPT.contains(&name.as_str()));
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return failed_to_start(format!("{program:?}: {e}")),
    };
    // Our copies of the pipe's writing end went into the command, which is dropped with
    // it; the reader sees the end once the group's last writer is gone.
    drop(command);
    let group = child.id();
    let (kept, ended) = collect(reader);
    let (done, waited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let (status, timed_out) = match waited.recv_timeout(timeout) {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            kill_group(group);
            (waited.recv().ok().and_then(Result::ok), true)
        }
    };
    // Whatever the leader left running holds the pipe open: it goes with the group, and
    // what left the group is waited for no longer than OUTPUT_GRACE.
    kill_group(group);
    let _ = ended.recv_timeout(OUTPUT_GRACE);
    let output = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Ran {
        status,
        error: None,
        timed_out,
        duration: started.elapsed(),
        output: tail(&output, OUTPUT_TAIL_BYTES).into_bytes(),
    }
}

/// Reads a verifier's output on a thread of its own, keeping its tail where the reading
/// can be left behind (a process that left the group, `setsid`, may hold the pipe open
/// long after the verifier ended); the receiver hears when the output ended.
fn collect(mut reader: std::io::PipeReader) -> (Arc<Mutex<Vec<u8>>>, mpsc::Receiver<()>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (read_all, ended) = mpsc::channel::<()>();
    let into = kept.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let mut kept = into.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.extend_from_slice(&chunk[..n]);
            if kept.len() > 2 * OUTPUT_TAIL_BYTES {
                let excess = kept.len() - OUTPUT_TAIL_BYTES;
                kept.drain(..excess);
            }
        }
        let _ = read_all.send(());
    });
    (kept, ended)
}

fn kill_group(group: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(group) {
        // SAFETY: killpg has no memory preconditions; the group is the verifier's own.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}

/// The last `max` bytes of `output` as text (cut at a character boundary).
fn tail(output: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(output);
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// An argv as one line for people: JSON, so every argument's bounds show.
fn shown_argv(argv: &[String]) -> String {
    serde_json::to_string(argv).unwrap_or_default()
}
