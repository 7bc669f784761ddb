//! The board's home, known in one place: where it is (`--home`, `$KANBAN_HOME`,
//! `~/.kanban`, always made absolute), the names of the files in it, the checks that it
//! is ours alone, its `config.yaml`, and opening its store with the configured settings.
//! The CLI and the gateway both stand on this crate; neither spells a file name.

mod account;
pub mod config;
mod home;
pub mod safety;

pub use account::Account;
pub use config::{
    ApiKey, AuxiliaryConfig, Config, ConfigError, DecomposerConfig, GatewayConfig, KanbanConfig, Loaded,
    ModelConfig, ProfileConfig, Warning,
};
pub use home::{Home, HomeError, Opened, HOME_VARIABLE};

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
/// Workers' logs, one per task.
pub const LOGS_DIR: &str = "logs";
/// Workers' working directories, one per task.
pub const WORKSPACES_DIR: &str = "workspaces";

/// The clock every part of the board reads: Unix seconds.
pub fn now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as Timestamp)
}
