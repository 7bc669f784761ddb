//! Why a command failed, and the exit code each reason maps to.
//!
//! Every failure is printed as one line on stderr, `kanban: <message>`; the messages of
//! the board's refusals and the store's open errors are already one line each. So is
//! every warning, `kanban: warning: <message>`.

use board_core::StoreError;
use board_home::HomeError;
use board_sqlite::OpenError;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;

/// A command that did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The board said no, a race was lost, or the home or database is unusable: exit 1.
    Refused(String),
    /// The command line itself is wrong: exit 2.
    Usage(String),
    /// Refused, with every reason already printed (a verb acting on several tasks): exit 1.
    Reported,
    /// Nothing to do: a lane's claim found no ready task (its wait ended): exit 3.
    Nothing(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Refused(_) | Failure::Reported => 1,
            Failure::Usage(_) => 2,
            Failure::Nothing(_) => 3,
        }
    }

    /// The line to print, unless it was printed already.
    pub fn message(&self) -> Option<&str> {
        match self {
            Failure::Refused(m) | Failure::Usage(m) | Failure::Nothing(m) => Some(m),
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

impl From<HomeError> for Failure {
    fn from(e: HomeError) -> Failure {
        let message = one_line(&e.to_string());
        if e.is_usage() {
            Failure::Usage(message)
        } else {
            Failure::Refused(message)
        }
    }
}

/// Prints the libraries' warnings (a board row that cannot be read, a ledger row that
/// could not be written) as `kanban: warning: ...`, one line each; quieter levels are
/// dropped. The gateway installs its own logging instead.
pub fn print_warnings() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .event_format(WarningLine)
        .try_init();
}

struct WarningLine;

impl<S, N> FormatEvent<S, N> for WarningLine
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut out: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = String::new();
        ctx.field_format()
            .format_fields(Writer::new(&mut fields), event)?;
        writeln!(out, "kanban: warning: {}", one_line(&fields))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_folds_whitespace_and_blanks_control_characters() {
        assert_eq!(one_line("  a\n\n b\tc\r\n"), "a b c");
        assert_eq!(one_line("title\x1b]0;owned\x07 end"), "title ]0;owned end");
        assert_eq!(one_line("\n\t "), "");
    }

    #[test]
    fn each_failure_has_its_exit_code_and_message() {
        let refused = Failure::Refused("no".to_owned());
        assert_eq!((refused.exit_code(), refused.message()), (1, Some("no")));
        let usage = Failure::Usage("how".to_owned());
        assert_eq!((usage.exit_code(), usage.message()), (2, Some("how")));
        let reported = Failure::Reported;
        assert_eq!((reported.exit_code(), reported.message()), (1, None));
    }

    #[test]
    fn a_board_refusal_becomes_one_line() {
        let failure = Failure::from(StoreError::Backend("disk\nfull\x1b[2J".to_owned()));
        let message = failure.message().expect("a message").to_owned();
        assert!(!message.contains(['\n', '\x1b']), "{message}");
        assert!(message.contains("disk full [2J"), "{message}");
        assert_eq!(failure.exit_code(), 1);
    }
}
