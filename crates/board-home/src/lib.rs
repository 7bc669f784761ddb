//! The board's home, known in one place: where it is (`--home`, `$KANBAN_HOME`,
//! `~/.kanban`, always made absolute), the names of the files in it, the checks that it
//! is ours alone, its `config.yaml`, and opening its store with the configured settings.
//! The CLI and the gateway both stand on this crate; neither spells a file name.

mod account;
pub mod boards;
pub mod config;
mod copy;
mod home;
pub mod safety;
mod wake;

pub use account::Account;
pub use boards::{BoardMeta, BoardSlug, Removed, BOARD_VARIABLE};
pub use config::{
    ApiKey, AuxiliaryConfig, Config, ConfigError, DatabaseUrl, DecomposerConfig, GatewayConfig, KanbanConfig,
    LanesConfig, Loaded, ModelConfig, ProfileConfig, SpecifierConfig, Warning, DATABASE_URL_VARIABLE,
};
pub use copy::CopyTarget;
pub use home::{worker_variables, Home, HomeError, Opened, HOME_VARIABLE};
pub use wake::Listening;

/// What a wake-up listener calls; it must return at once.
pub use board_sqlite::OnWake;

use board_core::Timestamp;

/// The board file.
pub const DATABASE_FILE: &str = "kanban.db";
/// The configuration.
pub const CONFIG_FILE: &str = "config.yaml";
/// The gateway's exclusive lock.
pub const LOCK_FILE: &str = "gateway.lock";
/// The running gateway's pid, beside its lock.
pub const PID_FILE: &str = "gateway.pid";
/// The running gateway's status, rewritten after every tick.
pub const STATUS_FILE: &str = "gateway.json";
/// The running gateway's wake-up socket on a SQLite board (docs/gateway.md#wake-ups).
pub const WAKE_SOCKET: &str = "gateway.wake";
/// The wake-up sockets of processes waiting for work (lanes' claims).
pub const WAITERS_DIR: &str = "waiters";
/// The token `kanban serve` requires when none is given: made once, owner-only.
pub const SERVE_TOKEN_FILE: &str = "serve-token";
/// Workers' logs, one per task.
pub const LOGS_DIR: &str = "logs";
/// Workers' working directories, one per task.
pub const WORKSPACES_DIR: &str = "workspaces";

/// This machine's hostname: the default `gateway.host_id`. `localhost` when the system
/// will not say.
pub fn default_host_id() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most `buffer.len()` bytes into the buffer it is given.
    let ok = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    match std::str::from_utf8(&buffer[..end]) {
        Ok(name) if ok && !name.is_empty() => name.to_owned(),
        _ => "localhost".to_owned(),
    }
}

/// The clock every part of the board reads: Unix seconds.
pub fn now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as Timestamp)
}
