//! Why a held worker is stopped, and how its run ends once it is gone: past its
//! `max_runtime_seconds`, silent past `kanban.dispatch_stale_timeout_seconds`, its lease
//! expired, or its run ended elsewhere.

use board_core::{Outcome, Task, Timestamp};
use serde_json::json;

use super::{with_log_tail, Ending};

/// How long a worker past `kanban.dispatch_stale_timeout_seconds` may go without a
/// heartbeat before it is stopped as stale (Hermes' hour).
pub const SILENCE_SECONDS: i64 = 3600;

/// Whether a worker held since `since` is stale by Hermes' rule: it has run at least
/// `limit` seconds (0: the rule is off) and its task's lease has no heartbeat in the
/// last [`SILENCE_SECONDS`].
pub fn silent(task: &Task, since: Timestamp, limit: i64, now: Timestamp) -> bool {
    let heard = task.lease.as_ref().and_then(|l| l.last_heartbeat_at);
    limit > 0 && now - since >= limit && heard.is_none_or(|at| now - at >= SILENCE_SECONDS)
}

/// Whether a running task has run longer than its `max_runtime_seconds`.
pub fn over_runtime(task: &Task, now: Timestamp) -> bool {
    match (task.max_runtime_seconds, task.started_at) {
        (Some(max), Some(started)) => now >= started.saturating_add(max),
        _ => false,
    }
}

/// Why a worker is being stopped, and so how its run ends once it is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// It ran past `max_runtime_seconds`.
    TimedOut { limit: i64 },
    /// It ran `kanban.dispatch_stale_timeout_seconds` and has not heartbeated for
    /// [`SILENCE_SECONDS`] (Hermes' rule).
    Silent { limit: i64 },
    /// Its lease expired while nobody could prove it alive.
    Stale {
        claim_expires: Option<Timestamp>,
        at: Timestamp,
    },
    /// Its run ended while it lived, and not by its report: another host took the run
    /// over while this one was cut off, or a user reclaimed or archived the task. The
    /// run is not this gateway's to end; the worker is only let go once gone.
    Lost { outcome: Outcome },
}

impl StopReason {
    pub(super) fn timed_out(task: &Task) -> StopReason {
        StopReason::TimedOut {
            limit: task.max_runtime_seconds.unwrap_or_default(),
        }
    }

    pub(super) fn stale(task: &Task, now: Timestamp) -> StopReason {
        let claim_expires = task.lease.as_ref().map(|l| l.expires);
        StopReason::Stale {
            claim_expires,
            at: claim_expires.unwrap_or(now),
        }
    }

    /// How the run ends, quoting the worker's log tail when there is one; `None` for a
    /// lost run, which has ended already.
    pub fn ending(&self, log_tail: &str) -> Option<Ending> {
        let ending = match self {
            StopReason::TimedOut { limit } => Ending {
                outcome: Outcome::TimedOut,
                error: Some(with_log_tail(
                    format!("ran longer than max_runtime_seconds ({limit} s)"),
                    log_tail,
                )),
                detail: json!({ "max_runtime_seconds": limit }),
            },
            StopReason::Silent { limit } => Ending {
                outcome: Outcome::Stale,
                error: Some(with_log_tail(
                    format!(
                        "ran {limit} s or more with no heartbeat for {SILENCE_SECONDS} s \
                         (kanban.dispatch_stale_timeout_seconds)"
                    ),
                    log_tail,
                )),
                detail: json!({ "dispatch_stale_timeout_seconds": limit }),
            },
            StopReason::Stale { claim_expires, at } => Ending {
                outcome: Outcome::Stale,
                error: Some(format!("lease expired at {at}")),
                detail: json!({ "claim_expires": claim_expires }),
            },
            StopReason::Lost { .. } => return None,
        };
        Some(ending)
    }
}
