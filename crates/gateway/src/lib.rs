//! The gateway (docs/gateway.md): the daemon (lock, ticks, status file, signals), the
//! dispatcher's tick, background decompositions and the worker supervisor. Its home and
//! configuration are `board_home`'s.

pub mod channel;
pub mod control;
pub mod daemon;
pub mod decompositions;
pub mod dispatcher;
pub mod logging;
pub mod metrics;
pub mod notifier;
pub mod planner;
pub mod process;
pub mod recurrence;
pub mod reload;
pub mod service;
mod settings;
pub mod supervisor;
