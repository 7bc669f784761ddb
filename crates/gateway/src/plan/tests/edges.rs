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
    assert_eq!(planned(&view), [("stop", id(1)), ("spawn", id(2))]);
}
