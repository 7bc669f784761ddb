//! The planner's edges: the preview a dry run prints, which ready tasks a tick would
//! spawn, a lease that expires this very second, and the room a stopping worker takes.

use super::*;

#[test]
fn the_preview_counts_a_timed_out_run_as_timed_out_and_keeps_the_decompositions_in_flight() {
    let view = View {
        running: vec![with_runtime(running(1), 5)],
        expired: vec![expired(running(2))],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(kinds(&actions), [("end", id(1)), ("end", id(2))]);
    let report = preview(&actions, 3);
    assert_eq!(report.timed_out, [id(1)], "over its runtime");
    assert_eq!(report.reclaimed, [id(2)], "its lease ran out");
    assert_eq!(report.decompositions_in_flight, 3);
}

#[test]
fn a_ready_task_is_spawnable_when_its_profile_has_a_command_and_it_is_not_cooling() {
    let none = BTreeMap::new();
    assert!(spawnable(&ready(1), &settings(), &none, T));
    assert!(!spawnable(&idle(1), &settings(), &none, T), "no command");
    let cooling = BTreeMap::from([(id(1), T + 10)]);
    assert!(!spawnable(&ready(1), &settings(), &cooling, T + 9));
    assert!(spawnable(&ready(1), &settings(), &cooling, T + 10), "cooled down");
}

#[test]
fn a_lease_expiring_this_second_is_stale() {
    let mut due = running(1);
    if let Some(lease) = due.lease.as_mut() {
        lease.expires = T;
    }
    let view = View {
        expired: vec![due],
        ..View::default()
    };
    assert_eq!(planned(&view), [("end", id(1))]);
}

#[test]
fn a_proven_worker_asked_to_stop_still_takes_a_spawn_slot() {
    let view = View {
        running: vec![with_runtime(running(1), 5)],
        proven: BTreeSet::from([id(1)]),
        claimable: vec![ready(2), ready(3)],
        ..View::default()
    };
    // Two slots: the worker that is still stopping holds one.
    assert_eq!(
        planned(&view),
        [("stop", id(1)), ("claim", id(2)), ("spawn", id(2))]
    );
}

#[test]
fn an_ended_decomposition_releases_its_lease_and_one_in_flight_keeps_it() {
    let view = View {
        leased: BTreeSet::from([id(1), id(2)]),
        in_flight: BTreeSet::from([id(2)]),
        breaker: up(),
        ..View::default()
    };
    let actions = plan(&view, T, &decomposing(1, 1));
    assert_eq!(actions, [Action::ReleaseDecomposition { card: id(1) }]);
}

#[test]
fn a_failure_the_store_could_not_record_is_remembered_and_holds_the_card_back() {
    let policy = RetryPolicy::default();
    let mut failing = card(1);
    failing.task.decompose_failures = policy.failure_limit - 1;
    let floor = policy.floor_after_start(&failing.task, None, T - 10_000);
    let view = View {
        triage: vec![failing],
        floors: BTreeMap::from([(id(1), floor)]),
        unrecorded: BTreeSet::from([id(1)]),
        breaker: up(),
        ..View::default()
    };
    let actions = plan(&view, T, &decomposing(1, 1));
    let remembered = floor.unrecorded_failure();
    assert_eq!(
        actions.first(),
        Some(&Action::RememberFailure {
            card: id(1),
            floor: remembered
        })
    );
    let known = View {
        unrecorded: BTreeSet::new(),
        ..view.clone()
    };
    assert_eq!(
        kinds(&plan(&known, T, &decomposing(1, 1))),
        [("decompose", id(1))],
        "without the failure the card is due: one failure short of the limit"
    );
    assert!(
        !kinds(&actions).contains(&("decompose", id(1))),
        "the failure counts this very tick, reaching the limit: {actions:?}"
    );
}

#[test]
fn a_lapsed_or_abandoned_lease_is_taken_over_and_a_live_one_or_ours_is_left() {
    let lease = |n: u8, holder: &str, expires: Timestamp| TriageLease {
        card: id(n),
        holder: holder.into(),
        expires,
    };
    let view = View {
        triage: vec![card(1), card(5)],
        triage_leases: vec![
            lease(1, "b/2", T),
            lease(2, "b/3", T + 60),
            lease(3, "here/9", T + 60),
            lease(4, "here/1", T + 60),
            lease(6, "c/4", T - 1),
        ],
        gone_holders: BTreeSet::from(["here/9".to_owned()]),
        leased: BTreeSet::from([id(4)]),
        in_flight: BTreeSet::from([id(4)]),
        breaker: up(),
        ..View::default()
    };
    assert_eq!(
        kinds(&plan(&view, T, &decomposing(5, 5))),
        [("take over", id(1)), ("take over", id(3)), ("decompose", id(5))],
        "lapsed on a due card, or its gateway gone; a live lease, ours, or one on a card not due stays"
    );
    let Action::TakeOverLease { holder, .. } = &plan(&view, T, &decomposing(5, 5))[0] else {
        panic!("a take-over first");
    };
    assert_eq!(holder, "b/2");
    // A lease of ours whose decomposition ended is released, never taken over, even
    // lapsed on a due card.
    let ended = View {
        triage: vec![card(7)],
        triage_leases: vec![lease(7, "here/5", T - 1)],
        leased: BTreeSet::from([id(7)]),
        breaker: up(),
        ..View::default()
    };
    assert_eq!(
        kinds(&plan(&ended, T, &decomposing(5, 5))),
        [("release lease", id(7)), ("decompose", id(7))]
    );
    let stopped = View {
        breaker: Breaker {
            open: true,
            probe_at: Some(T + 60),
            ..up()
        },
        ..view
    };
    assert_eq!(
        plan(&stopped, T, &decomposing(5, 5)),
        [],
        "nothing is taken over while no decomposition may start"
    );
}

/// Hermes' `dispatch_stale_timeout_seconds`: a worker held that long with no heartbeat
/// for an hour is stopped and its run will end `stale`; a recent heartbeat, a younger
/// worker, or the rule off (0) leave it alone.
#[test]
fn a_worker_silent_past_the_stale_timeout_is_stopped_as_stale() {
    let limit = 4 * 3600;
    let old = |n: u8| WorkerView {
        since: T - limit,
        ..held(n, Observed::Alive)
    };
    let mut heard = running(2);
    if let Some(lease) = heard.lease.as_mut() {
        lease.last_heartbeat_at = Some(T - SILENCE_SECONDS + 60);
    }
    let mut long_ago = running(4);
    if let Some(lease) = long_ago.lease.as_mut() {
        lease.last_heartbeat_at = Some(T - SILENCE_SECONDS);
    }
    let view = View {
        workers: vec![old(1), old(2), held(3, Observed::Alive), old(4)],
        running: vec![running(1), heard, running(3), long_ago],
        ..View::default()
    };
    let on = DispatchSettings {
        stale_timeout_seconds: limit,
        ..settings()
    };
    let actions = plan(&view, T, &on);
    assert_eq!(kinds(&actions), [("stop", id(1)), ("stop", id(4))]);
    let Action::Stop { reason, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!(*reason, StopReason::Silent { limit });
    let ending = reason.ending("").unwrap();
    assert_eq!(ending.outcome, Outcome::Stale);
    assert!(ending.error.unwrap().contains("dispatch_stale_timeout_seconds"));
    assert!(plan(&view, T, &settings()).is_empty(), "0 turns the rule off");
}
