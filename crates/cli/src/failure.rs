//! Why a command failed, and the exit code each reason maps to.
//!
//! Every failure is printed as one line on stderr, `kanban: <message>`; the messages of
//! the board's refusals and the store's open errors are already one line each.

use board_core::StoreError;
use board_sqlite::OpenError;

/// A command that did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The board said no, a race was lost, or the home or database is unusable: exit 1.
    Refused(String),
    /// The command line itself is wrong: exit 2.
    Usage(String),
    /// Refused, with every reason already printed (a verb acting on several tasks): exit 1.
    Reported,
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Refused(_) | Failure::Reported => 1,
            Failure::Usage(_) => 2,
        }
    }

    /// The line to print, unless it was printed already.
    pub fn message(&self) -> Option<&str> {
        match self {
            Failure::Refused(m) | Failure::Usage(m) => Some(m),
            Failure::Reported => None,
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::Refused(one_line(&e.to_string()))
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Failure {
        Failure::Refused(one_line(&e.to_string()))
    }
}

/// Folds a message onto one line so that stderr always carries exactly one, with no
/// control character from whatever text it quotes.
pub fn one_line(message: &str) -> String {
    crate::output::plain(message, false)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
