//! The gateway (SPEC 6): its configuration (`<home>/config.yaml`, SPEC 8), the daemon
//! (lock, ticks, status file, signals), the dispatcher's tick, and the worker supervisor.

pub mod config;
pub mod daemon;
pub mod decompositions;
pub mod dispatcher;
pub mod home;
pub mod plan;
pub mod process;
pub mod supervisor;

pub use config::{
    ApiKey, AuxiliaryConfig, Config, ConfigError, DecomposerConfig, KanbanConfig, Loaded, ModelConfig,
    ProfileConfig, Warning,
};
