//! The fencing rule for a gateway's live workers against a real SQLite board and real
//! worker processes: a worker is kept while its run is open, even past its lease, and
//! stopped, with nothing written, once its run ended without it (taken over by another
//! host while this gateway could not reach the board).

use std::time::{Duration, Instant};

use board_core::{Completion, EventFilter, Lease, NewTask, Outcome, Request, RunEnd, Status, TaskId};
use gateway::dispatcher::Dispatcher;
use gateway::planner::DispatchSettings;

use super::dispatcher::{home, kill_workers, lives, settings, watch, Home};

const T0: i64 = 1_800_000_000;

/// A task whose worker sleeps, spawned by a tick at `T0` (after an earlier run of the
/// task, reclaimed, when `earlier`): the home, its settings, the dispatcher, the task and
/// its lease.
fn sleeping_worker(earlier: bool) -> (Home, DispatchSettings, Dispatcher, TaskId, Lease) {
    let h = home();
    let s = settings(&[("slow", "exec sleep 30")]);
    let request = NewTask {
        assignee: Some("slow".into()),
        ..NewTask::titled("slow work")
    };
    let id = h.store.create(&request, T0 - 20).unwrap().id;
    if earlier {
        let claim = h.store.claim(&id, 60, T0 - 10).unwrap();
        let reclaim = Request::Reclaim {
            run_id: claim.run_id,
            claim_lock: claim.claim_lock,
            reason: None,
        };
        h.store.transition(&id, &reclaim, T0 - 5).unwrap();
    }
    let mut d = h.dispatcher();
    assert_eq!(d.tick(&s, T0).spawned, vec![id.clone()]);
    let lease = h.store.get(&id).unwrap().lease.unwrap();
    (h, s, d, id, lease)
}

fn events(h: &Home) -> u64 {
    h.store.count_events(&EventFilter::default()).unwrap()
}

#[test]
fn a_worker_whose_run_was_taken_over_is_stopped_and_nothing_of_its_run_is_written() {
    let (h, s, mut d, id, lease) = sleeping_worker(false);
    let pid = lease.worker_pid.unwrap();
    // Cut off past its lease and back: while the run is open the worker is kept and its
    // lease extended, however late.
    let late = d.tick(&watch(&s), T0 + 600);
    assert_eq!((late.extended, late.disowned), (vec![id.clone()], vec![]));
    assert!(lives(pid));
    // Another host ends the run stale and runs the task again.
    let end = RunEnd {
        run_id: lease.run_id,
        claim_lock: lease.claim_lock.clone(),
        outcome: Outcome::Stale,
        error: Some("lease expired".into()),
        detail: serde_json::json!({}),
        failure_limit: 5,
    };
    assert!(h.store.end_run(&id, end, T0 + 700).unwrap());
    let again = h.store.claim(&id, 600, T0 + 701).unwrap();
    let before = events(&h);
    let runs_before = h.store.runs(&id).unwrap();
    let disowned = d.tick(&watch(&s), T0 + 702);
    assert_eq!(disowned.disowned, vec![id.clone()], "{disowned:?}");
    assert!(
        disowned.reclaimed.is_empty() && disowned.errors.is_empty(),
        "{disowned:?}"
    );
    // `sleep` honours SIGTERM: gone within the grace, and let go.
    let start = Instant::now();
    while d.workers().count() > 0 {
        let report = d.tick(&watch(&s), T0 + 703);
        assert!(report.disowned.is_empty(), "disowned once: {report:?}");
        assert!(start.elapsed() < Duration::from_secs(10), "never let go");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!lives(pid), "stopped");
    assert_eq!(events(&h), before, "nothing written");
    assert_eq!(h.store.runs(&id).unwrap(), runs_before, "no run touched");
    let task = h.store.get(&id).unwrap();
    assert_eq!(task.status, Status::Running);
    assert_eq!(
        task.lease.map(|l| l.run_id),
        Some(again.run_id),
        "the new run is left alone"
    );
    assert_eq!(d.counters.disowned, 1);
}

#[test]
fn a_worker_that_reported_its_run_is_left_to_exit_by_itself() {
    // The task's earlier run, reclaimed, is not the worker's.
    let (h, s, mut d, id, lease) = sleeping_worker(true);
    let completion = Completion {
        expected_run_id: Some(lease.run_id),
        result: Some("done".into()),
        ..Completion::default()
    };
    assert!(h.store.complete(&id, &completion, T0 + 1).unwrap());
    for now in [T0 + 2, T0 + 600] {
        let report = d.tick(&watch(&s), now);
        assert!(
            report.disowned.is_empty() && report.errors.is_empty(),
            "{report:?}"
        );
    }
    assert!(lives(lease.worker_pid.unwrap()), "left to exit");
    assert_eq!(d.workers().count(), 1);
    kill_workers(&d);
}
