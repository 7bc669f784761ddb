//! The store conformance suite, written once against the `Store` trait.
//!
//! A backend's test file opens boards through a [`Backend`] and expands
//! [`store_conformance_tests!`] to get every scenario as a named test, including the
//! races of real threads on separate connections and the random-operation property test
//! that checks the invariants after every step.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod attachments;
mod checks;
mod cost_safety;
mod decomposition;
mod decomposition_lease;
mod fanout_cap;
mod graph;
mod hermes_fields;
mod import;
mod lanes;
mod limits;
mod notify;
mod races;
mod random_ops;
mod reads;
mod reclaim;
mod retention;
mod runs;
mod schedules;
mod streaming;
mod templates;

pub use attachments::files_round_trip_under_names_the_board_makes;
pub use checks::{
    a_review_loop_blocks_and_a_person_reopens_it, no_one_reviews_their_own_work,
    reported_work_goes_where_its_checks_say, review_verdicts_race_to_one_winner,
    the_evidence_contract_refuses_a_bare_completion, the_review_lane_goes_round_and_closes,
    verification_failures_block_at_the_limit, verification_gates_reported_work,
};
pub use cost_safety::{
    an_open_request_is_billed_then_finished_once, breaker_opens_and_closes_durably,
    racing_faults_open_the_breaker_once, spend_sums_the_window,
};
pub use decomposition::{
    decomposition_commits_and_guards, due_cards_come_oldest_due_first, history_blocks_automatic_decomposition,
};
pub use decomposition_lease::{
    a_plan_commits_only_under_its_live_lease, claim_ready_takes_what_is_still_ready,
    decomposition_lease_holds_a_card,
};
pub use fanout_cap::fanout_cap_is_one_rule;
pub use graph::{
    a_done_tasks_result_is_filled_in, a_scheduled_task_waits_until_unblocked,
    a_task_created_blocked_waits_for_a_person, dependencies_hold_and_release, edit_assign_and_archive,
    idempotent_create, links_refuse_cycles, promote_and_reopen_by_hand,
};
pub use hermes_fields::{
    a_claim_gives_an_unassigned_task_to_its_profile, a_tasks_own_retry_limit_wins,
    bad_hermes_fields_are_refused_and_children_inherit_the_tenant, tenants_select_tasks_and_events,
};
pub use import::import_keeps_ids_and_history;
pub use lanes::{
    a_lane_claims_its_profiles_work_in_order_up_to_its_cap, a_lapsed_lane_run_goes_to_the_next_claimer,
    lanes_and_gateways_claim_each_task_once, lanes_are_kept_by_digest_and_revoked,
};
pub use limits::fields_over_the_limits_are_refused_and_change_nothing;
pub use notify::subscriptions_keep_a_cursor_that_moves_only_past_deliveries;
pub use races::{concurrent_claims, reclaim_and_complete_race};
pub use random_ops::random_operations;
pub use reads::{listings_and_queues, reads_and_unknown_ids, tally_counts_the_board};
pub use reclaim::{
    a_stale_runs_comment_is_refused, completion_in_terminate_window_wins,
    completion_refusing_running_leaves_the_worker_alone, reclaim_clears_the_lease, reclaim_current_run,
    reclaim_defers_while_worker_survives, reclaim_loses_to_replacement_installed_meanwhile,
    reclaim_of_older_run_is_refused, stale_guards_change_nothing,
};
pub use retention::{
    gc_batches_stop_at_their_deadline_and_the_sweep_still_ends,
    gc_removes_old_archived_components_and_routine_events, gc_takes_a_component_once_all_of_it_is_old,
    remove_archived_deletes_one_task_and_never_reuses_event_ids,
};
pub use runs::{
    block_loop_sends_task_to_triage, block_recurrence_counts_same_kind_only, failures_count_to_give_up,
    replay_completes_after_block, replay_refused_after_replacement, transition_each_applies_each_in_order,
};
pub use schedules::{
    a_recurring_task_records_its_copies_and_moves_on, a_schedule_without_a_time_ahead_waits_for_a_person,
    a_task_scheduled_until_a_time_resumes_then,
};
pub use streaming::{
    aggregates_count_the_board, events_filter_by_kind_time_and_newest, pages_cover_every_task_once,
    sorted_lists_page_in_their_order, streamed_reads_equal_collected_ones,
};
pub use templates::a_card_and_its_plan_land_together_or_not_at_all;

use crate::store::{Store, Termination, Terminator};
use crate::types::{Task, TaskId};
use crate::{check_invariants, NewTask};

/// A board under test: every `connect` is a separate connection to the same board.
pub trait Backend: Send + Sync {
    fn connect(&self) -> Arc<dyn Store>;
}

/// A fixed clock for scenarios.
pub const T0: i64 = 1_750_000_000;

fn ready_task(store: &dyn Store, title: &str) -> Task {
    store.create(&NewTask::titled(title), T0).expect("create")
}

fn assert_board_ok(store: &dyn Store) {
    let snapshot = store.snapshot().expect("snapshot");
    if let Err(v) = check_invariants(&snapshot) {
        panic!("{v}\n{snapshot:#?}");
    }
    let counts = store.status_counts().expect("status counts");
    assert_eq!(
        counts,
        crate::StatusCount::of_tasks(&snapshot.tasks),
        "status_counts disagree with the tasks"
    );
}

/// Counts its calls, and runs `during` in the middle of the termination.
struct CountingTerminator<F: Fn()> {
    calls: AtomicUsize,
    during: F,
}

impl<F: Fn()> Terminator for CountingTerminator<F> {
    fn terminate(&self, _task: &Task) -> Termination {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.during)();
        Termination::Stopped
    }
}

fn counting<F: Fn()>(during: F) -> CountingTerminator<F> {
    CountingTerminator {
        calls: AtomicUsize::new(0),
        during,
    }
}

fn event_kinds(store: &dyn Store, id: &TaskId) -> Vec<String> {
    store
        .events(&crate::EventFilter {
            task_id: Some(id.clone()),
            ..Default::default()
        })
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

/// Expands to one `#[test]` per conformance scenario, plus the property test with
/// `$cases` random sequences. `$board` is an expression that makes a fresh [`Backend`];
/// `property_board`, when given, makes the boards of the property test instead (a
/// backend may open those with cheaper settings that do not change what it decides).
#[macro_export]
macro_rules! store_conformance_tests {
    ($board:expr, cases = $cases:expr, race_rounds = $rounds:expr) => {
        $crate::store_conformance_tests!($board, cases = $cases, race_rounds = $rounds, property_board = $board);
    };
    ($board:expr, cases = $cases:expr, race_rounds = $rounds:expr, property_board = $property_board:expr) => {
        $crate::store_conformance_tests!(@each $board;
            block_loop_sends_task_to_triage,
            block_recurrence_counts_same_kind_only,
            replay_completes_after_block,
            replay_refused_after_replacement,
            reclaim_current_run,
            reclaim_of_older_run_is_refused,
            reclaim_loses_to_replacement_installed_meanwhile,
            completion_in_terminate_window_wins,
            reclaim_defers_while_worker_survives,
            stale_guards_change_nothing,
            a_stale_runs_comment_is_refused,
            completion_refusing_running_leaves_the_worker_alone,
            reclaim_clears_the_lease,
            dependencies_hold_and_release,
            links_refuse_cycles,
            failures_count_to_give_up,
            idempotent_create,
            edit_assign_and_archive,
            promote_and_reopen_by_hand,
            a_done_tasks_result_is_filled_in,
            a_scheduled_task_waits_until_unblocked,
            a_task_created_blocked_waits_for_a_person,
            tenants_select_tasks_and_events,
            a_tasks_own_retry_limit_wins,
            bad_hermes_fields_are_refused_and_children_inherit_the_tenant,
            a_claim_gives_an_unassigned_task_to_its_profile,
            a_task_scheduled_until_a_time_resumes_then,
            a_recurring_task_records_its_copies_and_moves_on,
            files_round_trip_under_names_the_board_makes,
            a_card_and_its_plan_land_together_or_not_at_all,
            subscriptions_keep_a_cursor_that_moves_only_past_deliveries,
            a_schedule_without_a_time_ahead_waits_for_a_person,
            decomposition_commits_and_guards,
            due_cards_come_oldest_due_first,
            fanout_cap_is_one_rule,
            decomposition_lease_holds_a_card,
            a_plan_commits_only_under_its_live_lease,
            claim_ready_takes_what_is_still_ready,
            transition_each_applies_each_in_order,
            history_blocks_automatic_decomposition,
            reads_and_unknown_ids,
            listings_and_queues,
            breaker_opens_and_closes_durably,
            racing_faults_open_the_breaker_once,
            spend_sums_the_window,
            an_open_request_is_billed_then_finished_once,
            tally_counts_the_board,
            streamed_reads_equal_collected_ones,
            events_filter_by_kind_time_and_newest,
            pages_cover_every_task_once,
            sorted_lists_page_in_their_order,
            aggregates_count_the_board,
            gc_removes_old_archived_components_and_routine_events,
            gc_takes_a_component_once_all_of_it_is_old,
            gc_batches_stop_at_their_deadline_and_the_sweep_still_ends,
            remove_archived_deletes_one_task_and_never_reuses_event_ids,
            import_keeps_ids_and_history,
            fields_over_the_limits_are_refused_and_change_nothing,
            verification_gates_reported_work,
            verification_failures_block_at_the_limit,
            the_evidence_contract_refuses_a_bare_completion,
            the_review_lane_goes_round_and_closes,
            no_one_reviews_their_own_work,
            a_review_loop_blocks_and_a_person_reopens_it,
            reported_work_goes_where_its_checks_say,
            lanes_are_kept_by_digest_and_revoked,
            a_lane_claims_its_profiles_work_in_order_up_to_its_cap,
            a_lapsed_lane_run_goes_to_the_next_claimer,
        );

        #[test]
        fn lanes_and_gateways_claim_each_task_once() {
            $crate::conformance::lanes_and_gateways_claim_each_task_once(&$board, 200);
        }

        #[test]
        fn review_verdicts_race_to_one_winner() {
            $crate::conformance::review_verdicts_race_to_one_winner(&$board, $rounds);
        }

        #[test]
        fn reclaim_and_complete_race() {
            $crate::conformance::reclaim_and_complete_race(&$board, $rounds);
        }

        #[test]
        fn eight_threads_claim_one_hundred_tasks() {
            $crate::conformance::concurrent_claims(&$board, 8, 100);
        }

        #[test]
        fn invariants_hold_after_every_step() {
            $crate::conformance::random_operations(|| $property_board, $cases);
        }
    };
    (@each $board:expr; $($name:ident,)+) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::$name(&$board);
            }
        )+
    };
}
