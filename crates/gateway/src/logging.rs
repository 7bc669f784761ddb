//! The gateway's log (docs/gateway.md#logs): `tracing` to stderr, one line per event,
//! human by default or one JSON object a line (`--log-format json`, `KANBAN_LOG_FORMAT`)
//! for a log shipper. The level is INFO, `RUST_LOG` when set, and `-v`/`-q` when given.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// The variable that chooses the format when `--log-format` is not given.
pub const FORMAT_ENV: &str = "KANBAN_LOG_FORMAT";

/// How each log line is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-01-01T00:00:00.000000Z  INFO gateway started home=...`
    #[default]
    #[value(help = "one line per event, for people")]
    Human,
    /// `{"timestamp":"...","level":"INFO","message":"gateway started","home":"..."}`
    #[value(help = "one JSON object per line, for a log shipper")]
    Json,
}

impl FromStr for LogFormat {
    type Err = LogError;

    fn from_str(s: &str) -> Result<LogFormat, LogError> {
        match s {
            "human" => Ok(LogFormat::Human),
            "json" => Ok(LogFormat::Json),
            other => Err(LogError(format!(
                "unknown log format {other:?}: expected human or json"
            ))),
        }
    }
}

/// A log setting that cannot be used, as one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LogError(String);

/// `-v` and `-q`, on every command line that logs (`kanban` and `kanban-gateway`).
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct Verbosity {
    /// Log more: debug, then trace (wins over RUST_LOG)
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Log less: warnings, then errors, then nothing (wins over RUST_LOG)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

impl Verbosity {
    /// `-v` minus `-q`.
    pub fn shift(&self) -> i8 {
        i8::try_from(i16::from(self.verbose) - i16::from(self.quiet)).unwrap_or(0)
    }

    /// Whether a log was asked for: `-v`, `-q` or `RUST_LOG`. The verbs other than the
    /// gateway log only then, so that their stderr stays one line a failure.
    pub fn asked(&self) -> bool {
        self.verbose > 0 || self.quiet > 0 || std::env::var("RUST_LOG").is_ok_and(|v| !v.trim().is_empty())
    }
}

/// The gateway's own log flag.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct LogArgs {
    /// One line per event for people, or one JSON object per line for a log shipper
    /// [default: $KANBAN_LOG_FORMAT, else human]
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// What the command line says about the log: `--log-format`, and `-v` minus `-q`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogOptions {
    pub format: Option<LogFormat>,
    pub verbosity: i8,
}

impl LogOptions {
    pub fn new(log: LogArgs, verbosity: Verbosity) -> LogOptions {
        LogOptions {
            format: log.log_format,
            verbosity: verbosity.shift(),
        }
    }

    /// The format: the flag, else `KANBAN_LOG_FORMAT`, else human.
    fn format(&self) -> Result<LogFormat, LogError> {
        match (self.format, std::env::var(FORMAT_ENV)) {
            (Some(format), _) => Ok(format),
            (None, Ok(value)) if !value.is_empty() => value
                .parse()
                .map_err(|e: LogError| LogError(format!("{FORMAT_ENV}: {e}"))),
            (None, _) => Ok(LogFormat::Human),
        }
    }

    /// The filter: `-v`/`-q` move the level from INFO (debug, trace; warn, error, off)
    /// and win over `RUST_LOG`, which wins over INFO.
    fn filter(&self) -> Result<EnvFilter, LogError> {
        const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
        if self.verbosity != 0 {
            let index = (3 + i32::from(self.verbosity)).clamp(0, 5) as usize;
            return Ok(EnvFilter::new(LEVELS[index]));
        }
        match std::env::var("RUST_LOG") {
            Ok(value) if !value.trim().is_empty() => EnvFilter::builder()
                .parse(&value)
                .map_err(|e| LogError(format!("RUST_LOG: {e}"))),
            _ => Ok(EnvFilter::new("info")),
        }
    }
}

/// Installs the gateway's log on stderr. A second call in one process changes nothing.
pub fn init(options: LogOptions) -> Result<(), LogError> {
    let format = options.format()?;
    let filter = options.filter()?;
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_an_unknown_one_is_named() {
        assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
        assert_eq!("human".parse::<LogFormat>().unwrap(), LogFormat::Human);
        let e = "xml".parse::<LogFormat>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown log format \"xml\": expected human or json"
        );
    }

    #[test]
    fn verbosity_moves_the_level_from_info() {
        let level = |verbosity| {
            LogOptions {
                format: None,
                verbosity,
            }
            .filter()
            .unwrap()
            .max_level_hint()
        };
        use tracing_subscriber::filter::LevelFilter;
        assert_eq!(level(1), Some(LevelFilter::DEBUG));
        assert_eq!(level(2), Some(LevelFilter::TRACE));
        assert_eq!(level(9), Some(LevelFilter::TRACE));
        assert_eq!(level(-1), Some(LevelFilter::WARN));
        assert_eq!(level(-2), Some(LevelFilter::ERROR));
        assert_eq!(level(-3), Some(LevelFilter::OFF));
    }
}
