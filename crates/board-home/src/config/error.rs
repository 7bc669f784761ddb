//! What can be wrong with a config: the warnings a load tells the user, and the errors
//! that refuse it, each one line naming the file and the key.

use std::fmt;
use std::path::PathBuf;

use super::MAX_FILE_BYTES;
use crate::CONFIG_FILE;

/// Something in the file that is ignored rather than refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A key this version does not know, by its full path (`kanban.max_spwn`).
    UnknownKey(String),
    /// `model.api_key` is in a file that other users can read.
    KeyReadable(PathBuf),
    /// Keys a Hermes config holds that the board does not use, by their full paths.
    HermesKeys(Vec<String>),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownKey(path) => write!(f, "{CONFIG_FILE}: unknown key {path} (ignored)"),
            Warning::KeyReadable(path) => write!(
                f,
                "{CONFIG_FILE}: model.api_key is readable by other users: run chmod 600 {}, \
                 or better move the key to the variable named by model.api_key_env",
                path.display()
            ),
            Warning::HermesKeys(paths) => write!(
                f,
                "{CONFIG_FILE}: Hermes settings not used by kanban (ignored): {}",
                paths.join(", ")
            ),
        }
    }
}

/// Why a config could not be used. Its `Display` is one line naming the file and, for a
/// bad value, the key's full path.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read the config: {source}", path.display())]
    Read {
        /// The config's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The new file could not be written (`kanban config set`); the old one stands.
    #[error("{}: cannot write the config: {source}", path.display())]
    Write {
        /// The config's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `kanban config get` or `set` named a key the config does not have.
    #[error("{CONFIG_FILE}: unknown key {0} (`kanban config check` lists the keys)")]
    UnknownKey(String),
    /// The path is a directory, a FIFO or another thing that is not a regular file.
    #[error("{}: the config is {what}, not a file", path.display())]
    NotAFile {
        /// The config's path.
        path: PathBuf,
        /// `a directory`, or `not a regular file`.
        what: &'static str,
    },
    /// The file is bigger than any hand-written config.
    #[error("{CONFIG_FILE}: {bytes} bytes is too big for a config (at most {MAX_FILE_BYTES})")]
    TooBig {
        /// Its size.
        bytes: u64,
    },
    /// The bytes are not UTF-8.
    #[error("{CONFIG_FILE}: not valid UTF-8 (line {line})")]
    NotUtf8 {
        /// The 1-based line of the first bad byte.
        line: usize,
    },
    /// The text is not YAML.
    #[error("{CONFIG_FILE}: YAML syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// The YAML is well formed but not shaped like a config (several documents, a list
    /// at the top, too many aliases).
    #[error("{CONFIG_FILE}: {0}")]
    Shape(String),
    /// A key holds a value it cannot have.
    #[error("{CONFIG_FILE}: {key}: {problem}")]
    Invalid {
        /// The key's full path, `kanban.max_spawn`, `profiles.coder.command`.
        key: String,
        /// What was wrong.
        problem: String,
    },
}

impl ConfigError {
    pub(super) fn invalid(key: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_owned(),
            problem: problem.into(),
        }
    }
}
