//! Scenarios of reclaiming a run: which run a reclaim may release, the terminate window,
//! stale guards.

use super::{assert_board_ok, counting, event_kinds, ready_task, Backend, T0};
use crate::store::{Completion, ReclaimOutcome, StoreError, Termination, Terminator};
use crate::types::{Outcome, Status, Task};
use crate::{check_step, NoWorkers, Refusal, Request};
use std::sync::atomic::Ordering;

/// reclaim(expected = current): ready, no current run, the run closed as reclaimed.
pub fn reclaim_current_run(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "to reclaim");
    let c = s.claim(&t.id, 900, T0).unwrap();
    let terminator = counting(|| {});
    assert_eq!(
        s.reclaim(
            &t.id,
            Some(c.run_id),
            Some("operator".into()),
            &terminator,
            T0 + 1
        )
        .unwrap(),
        ReclaimOutcome::Reclaimed
    );
    assert_eq!(terminator.calls.load(Ordering::SeqCst), 1);
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Ready);
    assert_eq!(task.lease, None);
    let runs = s.runs(&t.id).unwrap();
    assert_eq!(runs[0].outcome, Some(Outcome::Reclaimed));
    assert!(runs[0].ended_at.is_some());
    assert_board_ok(&*s);
}

/// reclaim(expected = an older run) while a replacement runs: lost, the replacement
/// untouched, the terminator never called.
pub fn reclaim_of_older_run_is_refused(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "replacement runs");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    s.reclaim(&t.id, Some(c1.run_id), None, &NoWorkers, T0).unwrap();
    let c2 = s.claim(&t.id, 900, T0 + 1).unwrap();
    let before = s.snapshot().unwrap();
    let terminator = counting(|| {});
    assert_eq!(
        s.reclaim(&t.id, Some(c1.run_id), None, &terminator, T0 + 2)
            .unwrap(),
        ReclaimOutcome::Lost
    );
    assert_eq!(terminator.calls.load(Ordering::SeqCst), 0, "nobody is signalled");
    assert_eq!(s.snapshot().unwrap(), before);
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.current_run_id(), Some(c2.run_id));
    assert_eq!(task.lease.map(|l| l.claim_lock), Some(c2.claim_lock));
}

/// A terminator that installs a replacement run from another connection while the
/// reclaim is between its read and its write: the reclaim loses, the replacement stays.
pub fn reclaim_loses_to_replacement_installed_meanwhile(board: &dyn Backend) {
    let s = board.connect();
    let other = board.connect();
    let t = ready_task(&*s, "raced");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    let replacement = std::sync::Mutex::new(None);
    let terminator = counting(|| {
        let id = &t.id;
        assert_eq!(
            other
                .reclaim(id, Some(c1.run_id), None, &NoWorkers, T0 + 1)
                .unwrap(),
            ReclaimOutcome::Reclaimed
        );
        *replacement.lock().unwrap() = Some(other.claim(id, 900, T0 + 1).unwrap());
    });
    assert_eq!(
        s.reclaim(&t.id, Some(c1.run_id), None, &terminator, T0 + 2)
            .unwrap(),
        ReclaimOutcome::Lost
    );
    let c2 = replacement.into_inner().unwrap().expect("replacement claimed");
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Running);
    assert_eq!(task.current_run_id(), Some(c2.run_id));
    assert_eq!(task.lease.map(|l| l.claim_lock), Some(c2.claim_lock));
    assert!(s
        .runs(&t.id)
        .unwrap()
        .iter()
        .any(|r| r.id == c2.run_id && r.is_open()));
    assert_board_ok(&*s);
}

/// The worker completes while the reclaim is stopping it (its terminator returns only
/// after the completion committed): the completion wins, the reclaim's write changes
/// nothing, and the run stays `completed`.
pub fn completion_in_terminate_window_wins(board: &dyn Backend) {
    let s = board.connect();
    let worker = board.connect();
    let t = ready_task(&*s, "finishing while stopped");
    let c = s.claim(&t.id, 900, T0).unwrap();
    let completed = std::sync::Mutex::new(None);
    let terminator = counting(|| {
        let done = Completion {
            expected_run_id: Some(c.run_id),
            result: Some("finished".into()),
            ..Completion::default()
        };
        assert!(worker.complete(&t.id, &done, T0 + 1).unwrap());
        *completed.lock().unwrap() = Some(worker.snapshot().unwrap());
    });
    let outcome = s
        .reclaim(
            &t.id,
            Some(c.run_id),
            Some("operator".into()),
            &terminator,
            T0 + 2,
        )
        .unwrap();
    assert_eq!(outcome, ReclaimOutcome::Lost);
    assert_eq!(terminator.calls.load(Ordering::SeqCst), 1);
    let at_completion = completed.into_inner().unwrap().expect("completed in the window");
    let after = s.snapshot().unwrap();
    assert_eq!(after, at_completion, "the losing reclaim wrote nothing");
    check_step(&at_completion, &after).unwrap();
    let task = s.get(&t.id).unwrap();
    assert_eq!(
        (task.status, task.result.as_deref(), task.current_run_id()),
        (Status::Done, Some("finished"), None)
    );
    let runs = s.runs(&t.id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Completed));
    assert!(!event_kinds(&*s, &t.id).contains(&"reclaimed".to_owned()));
    assert_board_ok(&*s);
}

/// A worker that survives termination keeps its claim: deferred, extended, recorded.
pub fn reclaim_defers_while_worker_survives(board: &dyn Backend) {
    struct Stubborn;
    impl Terminator for Stubborn {
        fn terminate(&self, _task: &Task) -> Termination {
            Termination::Survived
        }
    }
    let s = board.connect();
    let t = ready_task(&*s, "stubborn");
    let c = s.claim(&t.id, 10, T0).unwrap();
    assert_eq!(
        s.reclaim(&t.id, None, None, &Stubborn, T0 + 5).unwrap(),
        ReclaimOutcome::Deferred
    );
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Running);
    assert_eq!(task.current_run_id(), Some(c.run_id));
    assert!(task.lease.unwrap().expires > T0 + 10);
    assert!(event_kinds(&*s, &t.id).contains(&"reclaim_deferred".to_owned()));
}

/// Stale guards change nothing: heartbeat, complete and block naming another run.
pub fn stale_guards_change_nothing(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "guarded");
    let c = s.claim(&t.id, 900, T0).unwrap();
    let before = s.snapshot().unwrap();
    let stale = c.run_id + 1000;
    assert!(!s.heartbeat(&t.id, stale, 900, None, T0).unwrap());
    let guarded = Completion {
        expected_run_id: Some(stale),
        ..Completion::default()
    };
    assert!(!s.complete(&t.id, &guarded, T0).unwrap());
    assert!(!s.block(&t.id, None, None, Some(stale), T0).unwrap());
    assert_eq!(s.snapshot().unwrap(), before);
    assert!(s
        .heartbeat(&t.id, c.run_id, 900, Some("alive".into()), T0 + 100)
        .unwrap());
    assert_eq!(s.get(&t.id).unwrap().lease.map(|l| l.expires), Some(T0 + 1000));
}

/// A worker's comment is guarded by its run: it lands, with its run on the `commented`
/// event, while the run holds the task; once the run was reclaimed (or ended) it is
/// refused and writes neither a comment nor an event. A person's unguarded comment lands
/// whatever runs.
pub fn a_stale_runs_comment_is_refused(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "commented on");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    let first = s
        .comment(&t.id, Some("w1"), "halfway", Some(c1.run_id), T0 + 1)
        .unwrap();
    let last_event = |s: &dyn crate::Store| s.events(&Default::default()).unwrap().pop().unwrap();
    let event = last_event(&*s);
    assert_eq!(
        (event.kind.as_str(), event.run_id),
        ("commented", Some(c1.run_id))
    );
    s.reclaim(&t.id, Some(c1.run_id), None, &NoWorkers, T0 + 2)
        .unwrap();
    let c2 = s.claim(&t.id, 900, T0 + 3).unwrap();
    let before = (s.snapshot().unwrap(), s.comments(&t.id).unwrap());
    let stale = StoreError::Refused(Refusal::StaleRun {
        id: t.id.clone(),
        expected: c1.run_id,
        current: Some(c2.run_id),
    });
    let late = s.comment(&t.id, Some("w1"), "still here", Some(c1.run_id), T0 + 4);
    assert_eq!(late.unwrap_err(), stale);
    assert_eq!((s.snapshot().unwrap(), s.comments(&t.id).unwrap()), before);
    let second = s
        .comment(&t.id, Some("w2"), "on it", Some(c2.run_id), T0 + 5)
        .unwrap();
    assert!(s.complete(&t.id, &Completion::default(), T0 + 6).unwrap());
    let after_end = s.comment(&t.id, Some("w2"), "one more", Some(c2.run_id), T0 + 7);
    assert!(matches!(
        after_end,
        Err(StoreError::Refused(Refusal::StaleRun { current: None, .. }))
    ));
    let person = s.comment(&t.id, Some("ana"), "thanks", None, T0 + 8).unwrap();
    let ids: Vec<_> = s.comments(&t.id).unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, [first.id, second.id, person.id]);
    assert_board_ok(&*s);
}

/// A reclaim takes every lease field the worker set (pid, heartbeat, expiry) off the
/// task and leaves them on the closed run; the next claim opens a fresh lease.
pub fn reclaim_clears_the_lease(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "leases");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    let spawned = Request::SetWorker {
        run_id: c1.run_id,
        claim_lock: c1.claim_lock.clone(),
        pid: 4242,
        host: "host-a".into(),
    };
    s.transition(&t.id, &spawned, T0 + 1).unwrap();
    assert!(s.heartbeat(&t.id, c1.run_id, 900, None, T0 + 10).unwrap());
    let lease = |t: &Task| {
        let l = t.lease.clone().expect("a running task holds a lease");
        (l.worker_pid, l.worker_host, l.last_heartbeat_at, l.expires)
    };
    assert_eq!(
        lease(&s.get(&t.id).unwrap()),
        (Some(4242), Some("host-a".to_owned()), Some(T0 + 10), T0 + 910)
    );
    s.reclaim(&t.id, None, None, &NoWorkers, T0 + 20).unwrap();
    assert_eq!(s.get(&t.id).unwrap().lease, None);
    let closed = &s.runs(&t.id).unwrap()[0];
    assert_eq!(
        (
            closed.worker_pid,
            closed.worker_host.as_deref(),
            closed.last_heartbeat_at,
            closed.claim_expires
        ),
        (Some(4242), Some("host-a"), Some(T0 + 10), None)
    );
    let c2 = s.claim(&t.id, 50, T0 + 30).unwrap();
    assert_ne!(c1.claim_lock, c2.claim_lock);
    assert!(c2.run_id > c1.run_id);
    let task = s.get(&t.id).unwrap();
    assert_eq!(lease(&task), (None, None, None, T0 + 80));
    assert_eq!(task.started_at, Some(T0 + 30));
    let open = &s.runs(&t.id).unwrap()[1];
    assert_eq!(
        (
            open.id,
            open.worker_pid,
            open.last_heartbeat_at,
            open.claim_expires
        ),
        (c2.run_id, None, None, Some(T0 + 80))
    );
    assert_board_ok(&*s);
}

/// A completion that refuses running leaves a claimed task to its worker, and completes
/// a task nobody runs.
pub fn completion_refusing_running_leaves_the_worker_alone(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "claimed");
    s.claim(&t.id, 900, T0).unwrap();
    let before = s.snapshot().unwrap();
    let unclaimed = Completion {
        refuse_running: true,
        result: Some("not mine".into()),
        ..Completion::default()
    };
    match s.complete(&t.id, &unclaimed, T0) {
        Err(StoreError::Refused(Refusal::Running { id, op: "complete" })) => assert_eq!(id, t.id),
        other => panic!("expected a running refusal, got {other:?}"),
    }
    assert_eq!(s.snapshot().unwrap(), before);
    let free = ready_task(&*s, "free");
    assert!(s.complete(&free.id, &unclaimed, T0).unwrap());
    assert_eq!(s.get(&free.id).unwrap().status, Status::Done);
}
