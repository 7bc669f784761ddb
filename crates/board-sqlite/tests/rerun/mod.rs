//! This test binary re-run as a child process (one `#[ignore]`d test, chosen with
//! `--exact --ignored`), its stdout read line by line on a thread so that every wait on
//! it has a deadline: a child that stays silent or does not exit is killed and fails
//! the test instead of hanging it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Rerun {
    what: String,
    child: std::process::Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Lines read so far that no `expect` consumed.
    pub seen: Vec<String>,
}

impl Rerun {
    /// Runs the ignored test `test` of this binary with `env`; `what` names it in failures.
    pub fn start(what: impl Into<String>, test: &str, env: &[(&str, String)]) -> Rerun {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a re-run of the test binary");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Rerun {
            what: what.into(),
            stdin: child.stdin.take().unwrap(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The rest of the first line that starts with `marker`, waiting at most `limit`;
    /// fails if the child exits or stays silent.
    pub fn expect(&mut self, marker: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match line.strip_prefix(marker) {
                    Some(rest) => return rest.to_owned(),
                    None => self.seen.push(line),
                },
                Err(e) => {
                    self.kill();
                    panic!(
                        "{} never said {marker:?} ({e}); it said:\n{}",
                        self.what,
                        self.seen.join("\n")
                    )
                }
            }
        }
    }

    /// Writes one line to the child's stdin.
    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits at most `limit` for the child to exit successfully, then reads the rest of
    /// its output into `seen`.
    pub fn finish(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                self.kill();
                panic!("{} did not exit within {limit:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.drain(deadline);
        self.assert_success(status);
    }

    /// Everything the exited child printed that is still unread.
    fn drain(&mut self, deadline: Instant) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{} exited but its stdout stayed open", self.what)
                }
            }
        }
    }

    fn assert_success(&self, status: ExitStatus) {
        assert!(
            status.success(),
            "{} failed ({status}); it said:\n{}",
            self.what,
            self.seen.join("\n")
        );
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Rerun {
    /// A failed test leaves no child behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}
