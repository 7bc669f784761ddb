//! Opening both ends of a board copy (`kanban migrate`): the home's own board, and a
//! target named by a PostgreSQL URL or a SQLite path.

use std::path::PathBuf;

use board_core::copy::BoardCopy;
use board_postgres::PgStore;
use board_sqlite::{Options, SqliteStore};

use crate::config::Config;
use crate::home::{Home, HomeError};

/// Where a copy goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyTarget {
    /// A `postgres://` or `postgresql://` URL (or `postgres:` and a libpq string).
    Postgres(String),
    /// A SQLite board file (`sqlite:PATH`, or a bare path).
    Sqlite(PathBuf),
}

/// A `--to` that names no board.
#[derive(Debug, thiserror::Error)]
pub enum BadCopyTarget {
    #[error("--to is empty: name a postgres:// URL or a SQLite file")]
    Empty,
    #[error("{path}: cannot make the path absolute: {source}")]
    NotAbsolute { path: String, source: std::io::Error },
}

impl CopyTarget {
    /// Reads `--to`: a URL whose scheme is `postgres` or `postgresql`, else a path,
    /// with or without `sqlite:` before it.
    pub fn parse(text: &str) -> Result<CopyTarget, BadCopyTarget> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(CopyTarget::Postgres(text.to_owned()));
        }
        let path = text.strip_prefix("sqlite:").unwrap_or(text);
        if path.is_empty() {
            return Err(BadCopyTarget::Empty);
        }
        std::path::absolute(path)
            .map(CopyTarget::Sqlite)
            .map_err(|source| BadCopyTarget::NotAbsolute {
                path: path.to_owned(),
                source,
            })
    }

    /// The target as it may be shown: the URL with its password redacted, or the path.
    pub fn shown(&self) -> String {
        match self {
            CopyTarget::Postgres(url) => board_postgres::redact_url(url),
            CopyTarget::Sqlite(path) => path.display().to_string(),
        }
    }

    /// Opens (creating when new) the board at the target.
    pub fn open(&self) -> Result<Box<dyn BoardCopy>, HomeError> {
        Ok(match self {
            CopyTarget::Postgres(url) => {
                let options = board_postgres::Options {
                    application_name: format!("kanban pid {} migrate", std::process::id()),
                    max_connections: 2,
                    ..board_postgres::Options::default()
                };
                Box::new(PgStore::open(url, &options)?)
            }
            CopyTarget::Sqlite(path) => Box::new(SqliteStore::open(path, &Options::default())?),
        })
    }
}

impl Home {
    /// The home's board (the one `open_store` opens), to copy from.
    pub fn open_copy_source(&self, config: &Config) -> Result<Box<dyn BoardCopy>, HomeError> {
        match &config.database_url {
            Some(url) => {
                let options = board_postgres::Options {
                    max_connections: 2,
                    ..self.postgres_options(format!("kanban pid {} migrate", std::process::id()))
                };
                Ok(Box::new(PgStore::open(url.expose(), &options)?))
            }
            None => Ok(Box::new(SqliteStore::open_read_only(self.database())?)),
        }
    }
}
