//! When an automatic decomposition may try a card again. The store's columns say it
//! (`decompose_failures`, `decompose_next_attempt_at`, `decompose_parked`, written by
//! `DecomposeFailed`); an [`AttemptFloor`] is what a process remembers of an attempt it
//! started, and counts only while the store holds fewer failures than it does: when a
//! failure could not be written (a full disk), the card is still backed off and parked
//! rather than billed every tick.

use crate::plan::automatic_guard;
use crate::store::RetryPolicy;
use crate::transition::{retry_delay, TaskFacts};
use crate::types::{Task, Timestamp};

/// An automatic decomposition a process started on a card at one revision: the failure
/// count it would leave, and the earliest next attempt the policy could give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptFloor {
    pub revision: i64,
    pub failures: i64,
    pub not_before: Timestamp,
}

impl RetryPolicy {
    /// Whether an automatic decomposition of the card may start at `now`: the guards of
    /// an automatic call (history, parked, not yet due) and the floor of an earlier
    /// attempt whose failure the store may not hold.
    pub fn allows(&self, facts: &TaskFacts, floor: Option<&AttemptFloor>, now: Timestamp) -> bool {
        automatic_guard(facts, now).is_ok() && !floor.is_some_and(|f| f.holds_back(&facts.task, self, now))
    }

    /// The floor left by an attempt on `card` started at `now`. Its delay is the
    /// shortest the store's jitter could give (-10%), so it never holds back a card the
    /// store says is due.
    pub fn floor_after_start(
        &self,
        card: &Task,
        earlier: Option<&AttemptFloor>,
        now: Timestamp,
    ) -> AttemptFloor {
        let remembered = earlier
            .filter(|f| f.revision == card.revision)
            .map_or(0, |f| f.failures);
        let failures = card.decompose_failures.max(remembered) + 1;
        AttemptFloor {
            revision: card.revision,
            failures,
            not_before: now + retry_delay(self.base_seconds, failures, -0.1),
        }
    }
}

impl AttemptFloor {
    /// Whether this floor could hold a card back at `now` at all (parked or cooling).
    pub fn blocks(&self, policy: &RetryPolicy, now: Timestamp) -> bool {
        self.failures >= policy.failure_limit || self.not_before > now
    }

    /// Whether it holds `card` back: it is about the card as it is (an edit makes a new
    /// card to the policy), the store has not recorded the failures it counts, and it
    /// parks the card or is not yet due.
    pub fn holds_back(&self, card: &Task, policy: &RetryPolicy, now: Timestamp) -> bool {
        card.revision == self.revision && card.decompose_failures < self.failures && self.blocks(policy, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::blank_task;
    use crate::types::{Status, TaskId};

    const T: Timestamp = 1_750_000_000;
    const POLICY: RetryPolicy = RetryPolicy {
        base_seconds: 30,
        failure_limit: 3,
    };

    fn card() -> TaskFacts {
        let task = blank_task(
            TaskId::from_random([0, 0, 0, 9]),
            "idea".into(),
            Status::Triage,
            T,
        );
        TaskFacts {
            task,
            newest_run: None,
            run_count: 0,
            open_parents: 0,
            decomposed: false,
        }
    }

    #[test]
    fn the_store_columns_decide_when_nothing_is_remembered() {
        let mut facts = card();
        assert!(POLICY.allows(&facts, None, T));
        facts.task.decompose_next_attempt_at = Some(T + 5);
        assert!(!POLICY.allows(&facts, None, T + 4));
        assert!(POLICY.allows(&facts, None, T + 5));
        facts.task.decompose_parked = true;
        assert!(!POLICY.allows(&facts, None, T + 100));
        let mut ran = card();
        ran.run_count = 1;
        assert!(!POLICY.allows(&ran, None, T), "history");
    }

    #[test]
    fn an_unrecorded_failure_backs_off_and_parks_in_memory() {
        let facts = card();
        let first = POLICY.floor_after_start(&facts.task, None, T);
        assert_eq!((first.failures, first.not_before), (1, T + 27));
        assert!(!POLICY.allows(&facts, Some(&first), T + 26));
        assert!(POLICY.allows(&facts, Some(&first), T + 27));
        let second = POLICY.floor_after_start(&facts.task, Some(&first), T + 27);
        let third = POLICY.floor_after_start(&facts.task, Some(&second), T + 1000);
        assert_eq!(third.failures, 3);
        assert!(
            !POLICY.allows(&facts, Some(&third), T + 100_000),
            "parked at the limit"
        );
        let mut edited = card();
        edited.task.revision += 1;
        assert!(
            POLICY.allows(&edited, Some(&third), T + 100_000),
            "an edit is a new card"
        );
    }

    #[test]
    fn a_recorded_failure_leaves_the_decision_to_the_store() {
        let mut facts = card();
        let floor = POLICY.floor_after_start(&facts.task, None, T);
        facts.task.decompose_failures = 1;
        facts.task.decompose_next_attempt_at = Some(T + 33);
        assert!(POLICY.allows(&facts, Some(&floor), T + 33));
        let next = POLICY.floor_after_start(&facts.task, Some(&floor), T + 33);
        assert_eq!(next.failures, 2, "counted from the store's failures");
    }
}
