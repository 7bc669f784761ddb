//! The kinds of the events the board appends, stored as text in `task_events.kind`
//! and printed as today; the SQL lists of them the stores name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::types::{word_enum, Outcome, UnknownWord};

word_enum!(
    /// What an event the board appends records: `task_events.kind`. Events a board
    /// imported may carry kinds of another board, so a stored [`Event`](crate::Event) keeps its kind as
    /// text; every kind this board writes or reads back is one of these.
    EventKind, "event kind" {
        Created = "created",
        Imported = "imported",
        Edited = "edited",
        Assigned = "assigned",
        Linked = "linked",
        Unlinked = "unlinked",
        Commented = "commented",
        Promoted = "promoted",
        Claimed = "claimed",
        Spawned = "spawned",
        Heartbeat = "heartbeat",
        ClaimExtended = "claim_extended",
        Completed = "completed",
        Blocked = "blocked",
        BlockLoopDetected = "block_loop_detected",
        DependencyWait = "dependency_wait",
        Unblocked = "unblocked",
        /// A task was parked in `scheduled`: waiting on time (`kanban schedule`).
        Scheduled = "scheduled",
        /// A recurring task's time came: the gateway made a copy (or skipped one while the
        /// previous copy was open) and moved the template to its next time.
        Recurred = "recurred",
        /// A file was attached to the task (`kanban attach`).
        Attached = "attached",
        /// A file was removed from the task (`kanban attach-rm`).
        Detached = "detached",
        Reclaimed = "reclaimed",
        ReclaimDeferred = "reclaim_deferred",
        Crashed = "crashed",
        TimedOut = "timed_out",
        Stale = "stale",
        SpawnFailed = "spawn_failed",
        RateLimited = "rate_limited",
        ProtocolViolation = "protocol_violation",
        GaveUp = "gave_up",
        SkippedNonspawnable = "skipped_nonspawnable",
        Archived = "archived",
        Decomposed = "decomposed",
        Specified = "specified",
        AutoDecomposeFailed = "auto_decompose_failed",
        AutoDecomposeParked = "auto_decompose_parked",
        DecomposeReset = "decompose_reset",
        BreakerOpened = "breaker_opened",
        BreakerClosed = "breaker_closed",
        SpendCeilingReached = "spend_ceiling_reached",
        SpendCeilingLifted = "spend_ceiling_lifted",
        /// A worker reported work its checks must pass: the task waits for its verifiers.
        Verifying = "verifying",
        /// Every verifier passed.
        Verified = "verified",
        VerifyFailed = "verify_failed",
        /// The task waits for a reviewer (a worker's or a person's request, or a check).
        ReviewRequested = "review_requested",
        ChangesRequested = "changes_requested",
        /// A reviewer (or a person) approved the work; `completed` follows.
        Approved = "approved",
        /// A person sent a task back to review.
        ReviewReopened = "review_reopened",
        /// A person took a done or archived task back into work (`kanban reopen`).
        Reopened = "reopened",
        /// The work went back and forth between worker and reviewer too often: blocked.
        ReviewLoopDetected = "review_loop_detected",
    }
);

impl From<Outcome> for EventKind {
    /// The event a run's end appends: the outcome's own word.
    fn from(outcome: Outcome) -> EventKind {
        match outcome {
            Outcome::Completed => EventKind::Completed,
            Outcome::Blocked => EventKind::Blocked,
            Outcome::Crashed => EventKind::Crashed,
            Outcome::TimedOut => EventKind::TimedOut,
            Outcome::Reclaimed => EventKind::Reclaimed,
            Outcome::Stale => EventKind::Stale,
            Outcome::SpawnFailed => EventKind::SpawnFailed,
            Outcome::RateLimited => EventKind::RateLimited,
            Outcome::ProtocolViolation => EventKind::ProtocolViolation,
            Outcome::GaveUp => EventKind::GaveUp,
            Outcome::VerifyFailed => EventKind::VerifyFailed,
            Outcome::ChangesRequested => EventKind::ChangesRequested,
            Outcome::Scheduled => EventKind::Scheduled,
        }
    }
}

impl PartialEq<EventKind> for String {
    fn eq(&self, kind: &EventKind) -> bool {
        self == kind.as_str()
    }
}

/// The events that end a decomposition: a fan-out (`decomposed`), one tightened task
/// (`specified`), a failed automatic one (`auto_decompose_failed`), which parks its card
/// at the failure limit (`auto_decompose_parked`, beside the failure).
pub const DECOMPOSITION_EVENTS: [EventKind; 4] = [
    EventKind::Decomposed,
    EventKind::Specified,
    EventKind::AutoDecomposeFailed,
    EventKind::AutoDecomposeParked,
];

/// [`DECOMPOSITION_EVENTS`] as a SQL list, for statements built with `concat!`.
#[macro_export]
macro_rules! decomposition_events_sql {
    () => {
        "'decomposed', 'specified', 'auto_decompose_failed', 'auto_decompose_parked'"
    };
}

/// `task_events.kind` of a decomposed card, as SQL: the predicate of the stores' partial
/// index on decomposed cards, which a query must spell the same way to use it.
#[macro_export]
macro_rules! decomposed_event_sql {
    () => {
        "'decomposed'"
    };
}

/// The events after which a task is ready again (a promotion, an unblock): where the
/// time from ready to done of `Store::finished` starts, else at the task's creation.
pub const READY_AGAIN_EVENTS: [EventKind; 2] = [EventKind::Promoted, EventKind::Unblocked];

/// [`READY_AGAIN_EVENTS`] as a SQL list.
#[macro_export]
macro_rules! ready_again_events_sql {
    () => {
        "'promoted', 'unblocked'"
    };
}

/// The events of a check's verdict against the work: a failed verification, changes a
/// reviewer or a person requested (`BoardStats::verdicts`).
pub const VERDICT_EVENTS: [EventKind; 2] = [EventKind::VerifyFailed, EventKind::ChangesRequested];

/// [`VERDICT_EVENTS`] as a SQL list: the predicate of the stores' partial index on those
/// events, which a query must spell the same way to use it.
#[macro_export]
macro_rules! verdict_events_sql {
    () => {
        "'verify_failed', 'changes_requested'"
    };
}

/// `kinds` as a SQL list of quoted words.
pub fn sql_list(kinds: &[EventKind]) -> String {
    kinds
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_lists_name_the_kinds_they_stand_for() {
        assert_eq!(decomposition_events_sql!(), sql_list(&DECOMPOSITION_EVENTS));
        assert_eq!(decomposed_event_sql!(), sql_list(&[EventKind::Decomposed]));
        assert_eq!(ready_again_events_sql!(), sql_list(&READY_AGAIN_EVENTS));
        assert_eq!(verdict_events_sql!(), sql_list(&VERDICT_EVENTS));
    }

    #[test]
    fn every_outcome_is_the_kind_of_its_event() {
        for o in Outcome::ALL {
            assert_eq!(EventKind::from(*o).as_str(), o.as_str());
        }
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), *k);
        }
    }
}
