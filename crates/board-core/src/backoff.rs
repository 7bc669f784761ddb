//! When an automatic decomposition may try a card again. The store's columns say it
//! (`decompose_failures`, `decompose_next_attempt_at`, `decompose_parked`, written by
//! `DecomposeFailed`); an [`AttemptFloor`] is what a process remembers of the attempts it
//! started on a card. It paces them: each attempt waits at least the policy's delay after
//! the one before, charged or not, so a card whose faults are never charged (they keep the
//! provider breaker in doubt or open) is not sent again at every chance. It parks only on
//! failures: the store's, plus the charged failures the store could not record (a full
//! disk). An uncharged attempt is no failure, so it never parks a card the store says
//! is due.

use crate::plan::automatic_guard;
use crate::store::RetryPolicy;
use crate::transition::{retry_delay, TaskFacts};
use crate::types::{Task, Timestamp};

/// What a process remembers of its automatic decompositions of a card at one revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptFloor {
    pub revision: i64,
    /// The backoff's exponent: the attempts made on the card at this revision, as far as
    /// this process knows (its own, or the store's failures when more).
    pub attempts: i64,
    /// Failures charged to the card that the store could not record.
    pub unrecorded: i64,
    /// The earliest next attempt.
    pub not_before: Timestamp,
}

impl RetryPolicy {
    /// Whether an automatic decomposition of the card may start at `now`: the guards of
    /// an automatic call (history, parked, not yet due) and the floor of this process's
    /// earlier attempts.
    pub fn allows(&self, facts: &TaskFacts, floor: Option<&AttemptFloor>, now: Timestamp) -> bool {
        automatic_guard(facts, now).is_ok() && !floor.is_some_and(|f| f.holds_back(&facts.task, self, now))
    }

    /// The floor left by an attempt on `card` started at `now`. Its delay is the
    /// shortest the store's jitter could give (-10%), so it never holds back a card the
    /// store would make due later anyway by more than the jitter.
    pub fn floor_after_start(
        &self,
        card: &Task,
        earlier: Option<&AttemptFloor>,
        now: Timestamp,
    ) -> AttemptFloor {
        let earlier = earlier.filter(|f| f.revision == card.revision);
        let (attempts, unrecorded) = earlier.map_or((0, 0), |f| (f.attempts, f.unrecorded));
        let attempts = attempts.max(card.decompose_failures + unrecorded) + 1;
        AttemptFloor {
            revision: card.revision,
            attempts,
            unrecorded,
            not_before: now + retry_delay(self.base_seconds, attempts, -0.1),
        }
    }
}

impl AttemptFloor {
    /// The floor after its attempt ended with a failure charged to the card that the
    /// store could not record.
    pub fn unrecorded_failure(self) -> AttemptFloor {
        AttemptFloor {
            unrecorded: self.unrecorded + 1,
            ..self
        }
    }

    /// Whether this floor could hold a card back at `now` at all (it counts failures
    /// the store lacks, or it is not yet due).
    pub fn blocks(&self, now: Timestamp) -> bool {
        self.unrecorded > 0 || self.not_before > now
    }

    /// Whether it holds `card` back: it is about the card as it is (an edit makes a new
    /// card to the policy), and the card is not yet due again or its failures, the
    /// store's and those the store lacks, reach the limit.
    pub fn holds_back(&self, card: &Task, policy: &RetryPolicy, now: Timestamp) -> bool {
        card.revision == self.revision
            && (self.not_before > now || card.decompose_failures + self.unrecorded >= policy.failure_limit)
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
        let first = POLICY
            .floor_after_start(&facts.task, None, T)
            .unrecorded_failure();
        assert_eq!((first.attempts, first.not_before), (1, T + 27));
        assert!(!POLICY.allows(&facts, Some(&first), T + 26));
        assert!(POLICY.allows(&facts, Some(&first), T + 27));
        let second = POLICY
            .floor_after_start(&facts.task, Some(&first), T + 27)
            .unrecorded_failure();
        let third = POLICY
            .floor_after_start(&facts.task, Some(&second), T + 1000)
            .unrecorded_failure();
        assert_eq!((third.attempts, third.unrecorded), (3, 3));
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
    fn uncharged_attempts_are_paced_but_never_park() {
        let mut facts = card();
        let mut floor: Option<AttemptFloor> = None;
        let mut at = T;
        let mut waits = Vec::new();
        for _ in 0..6 {
            assert!(POLICY.allows(&facts, floor.as_ref(), at), "due at {at}");
            let next = POLICY.floor_after_start(&facts.task, floor.as_ref(), at);
            waits.push(next.not_before - at);
            at = next.not_before;
            floor = Some(next);
        }
        assert_eq!(waits, [27, 54, 108, 216, 432, 864], "paced like failures");
        // Two recorded failures and an uncharged third attempt: the store's count
        // decides, so the card is due again, not parked.
        facts.task.decompose_failures = 2;
        let after = POLICY.floor_after_start(&facts.task, None, T);
        assert!(!POLICY.allows(&facts, Some(&after), after.not_before - 1));
        assert!(POLICY.allows(&facts, Some(&after), after.not_before));
    }

    #[test]
    fn a_recorded_failure_leaves_the_decision_to_the_store() {
        let mut facts = card();
        let floor = POLICY.floor_after_start(&facts.task, None, T);
        facts.task.decompose_failures = 1;
        facts.task.decompose_next_attempt_at = Some(T + 33);
        assert!(POLICY.allows(&facts, Some(&floor), T + 33));
        let next = POLICY.floor_after_start(&facts.task, Some(&floor), T + 33);
        assert_eq!(next.attempts, 2, "counted from the store's failures");
        facts.task.decompose_failures = 3;
        assert!(
            !POLICY.allows(&facts, Some(&next), T + 100_000),
            "the store's limit"
        );
    }

    #[test]
    fn the_store_failures_and_those_it_lacks_add_up_to_the_next_exponent() {
        let mut facts = card();
        let first = POLICY
            .floor_after_start(&facts.task, None, T)
            .unrecorded_failure();
        facts.task.decompose_failures = 2;
        let next = POLICY.floor_after_start(&facts.task, Some(&first), T + 100);
        assert_eq!(next.attempts, 4, "two recorded, one unrecorded, this one");
        assert_eq!(
            next.not_before,
            T + 100 + 216,
            "the fourth attempt's wait, less 10%"
        );
    }

    #[test]
    fn a_floor_blocks_while_it_counts_unrecorded_failures_or_is_not_yet_due() {
        let floor = AttemptFloor {
            revision: 0,
            attempts: 1,
            unrecorded: 0,
            not_before: T + 10,
        };
        assert!(floor.blocks(T + 9));
        assert!(!floor.blocks(T + 10), "due at its time");
        assert!(!floor.blocks(T + 11));
        let lacking = floor.unrecorded_failure();
        assert!(lacking.blocks(T + 11), "a failure the store lacks");
    }
}
