//! How a worker's end is judged: what a probe saw of it, and how its run ends when the
//! dispatcher ends it. Pure: the exit and the log tail come in as values.

use board_core::Outcome;
use serde_json::{json, Value};

/// The exit code by which a worker says "rate limited, try me later".
pub const EXIT_RATE_LIMITED: i32 = 75;

/// How a worker process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// An adopted worker vanished; nobody can tell how.
    Unknown,
}

/// What a probe saw of a held worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    Alive,
    /// The group leader exited (not yet reaped); the end of this attempt's log.
    Exited {
        exit: Exit,
        log_tail: String,
    },
}

/// How a run ends when the dispatcher ends it: its outcome, the run's error and the
/// event's detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub outcome: Outcome,
    pub error: Option<String>,
    pub detail: Value,
}

/// `what`, followed by the attempt's log tail when there is one.
pub fn with_log_tail(what: String, log_tail: &str) -> String {
    if log_tail.is_empty() {
        what
    } else {
        format!("{what}; log tail: {log_tail}")
    }
}

/// How the run of a worker that exited without completing or blocking its task ends
/// (docs/gateway.md, the tick's step 1).
pub fn classify(exit: Exit, log_tail: &str) -> Ending {
    let ending = |outcome, error: String, code: Option<i32>, signal: Option<i32>| Ending {
        outcome,
        error: Some(error),
        detail: json!({ "exit_code": code, "signal": signal }),
    };
    match exit {
        Exit::Code(0) => ending(
            Outcome::ProtocolViolation,
            with_log_tail(
                "exited 0 without completing or blocking its task".to_owned(),
                log_tail,
            ),
            Some(0),
            None,
        ),
        Exit::Code(EXIT_RATE_LIMITED) => ending(
            Outcome::RateLimited,
            "exited 75: rate limited".to_owned(),
            Some(EXIT_RATE_LIMITED),
            None,
        ),
        Exit::Code(code) => ending(
            Outcome::Crashed,
            with_log_tail(format!("exited with code {code}"), log_tail),
            Some(code),
            None,
        ),
        Exit::Signal(signal) => ending(
            Outcome::Crashed,
            with_log_tail(format!("killed by signal {signal}"), log_tail),
            None,
            Some(signal),
        ),
        Exit::Unknown => ending(Outcome::Crashed, "the worker vanished".to_owned(), None, None),
    }
}
